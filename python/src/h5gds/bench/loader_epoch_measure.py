"""Whole-epoch measurements of h5gds.bench.loader_epoch (part epoch): per
sample size, cold and warm epochs of h5gds-loader order=windowed and
order=exact, torch-dataloader-h5py and the sequential ceiling, and the sweep
of window sizes."""
from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any, Callable

import numpy as np

import h5gds

from . import _common as common
from .loader_epoch_files import _dataloader, _to_device, data_region, make_loader, sample_file
from .loader_epoch_rows import Row, print_row, row


def bench_epoch(args: argparse.Namespace, dev: Any, rows: list[Row]) -> None:
    want = (lambda m: not args.methods or m in args.methods)
    have_torch = False
    if dev.name != "numpy":
        try:
            import torch  # noqa: F401
            have_torch = True
        except ImportError:
            pass
    for label in args.samples:
        path, n, data_bytes = sample_file(Path(args.dir), label, args.file_size, args.var_range)
        mean = data_bytes / n
        bsz = max(1, int(args.batch // mean))
        base, region = data_region(path, label)
        loaders = {o: make_loader(path, label, bsz, dev, args, o) for o in ("windowed", "exact")}
        for ld in loaders.values():  # untimed: buffers and pinned memory allocated, engine threads started
            it = iter(ld)
            next(it)
            it.close()
        exact_order = loaders["exact"].indices()
        note_geom = (f"window {loaders['windowed'].window_bytes >> 20} MiB, buffer "
                     f"{loaders['windowed'].buffer_bytes >> 20} MiB, batch {bsz} samples")
        print(f"{label}: {n} samples, {data_bytes / 2**30:.2f} GiB, {note_geom}", flush=True)

        def run_loader(ld: h5gds.Loader, batches: int) -> tuple[float, int, int]:
            it = iter(ld)
            got_bytes = got = 0

            def go() -> None:
                nonlocal got_bytes, got
                for _ in range(batches):
                    b = next(it)
                    if label == "var":
                        got += len(b[1]) - 1
                        got_bytes += int(b[0].shape[0])
                    else:
                        got += int(b.shape[0])
                        got_bytes += int(b.shape[0]) * int(b.shape[1])
            t = common.timed(go, dev)
            it.close()
            return t, got_bytes, got

        def run_dataloader(samples: int) -> tuple[float, int, int]:
            order = exact_order[:samples]
            dl = _dataloader(path, label, bsz, order, args.workers)
            counted = [0, 0]

            def go() -> None:
                for b in dl:
                    _to_device(b)
                    if label == "var":
                        counted[0] += int(b[0].shape[0]); counted[1] += len(b[1]) - 1
                    else:
                        counted[0] += int(b.numel()); counted[1] += int(b.shape[0])
            t = common.timed(go, dev)
            return t, counted[0], counted[1]

        for rep in range(args.repeat):
            for cache in args.caches:
                part_bytes = args.read_bytes if cache == "cold" else args.warm_read_bytes
                part_batches = max(1, min(len(loaders["exact"]), int(part_bytes // (bsz * mean))))
                measures: list[tuple[str, str, Callable[[], tuple[float, int, int]]]] = []
                if want("h5gds-windowed"):
                    ldw = loaders["windowed"]
                    measures.append(("h5gds-loader", "windowed", lambda: run_loader(ldw, len(ldw))))
                if want("h5gds-exact"):
                    lde = loaders["exact"]
                    nb = part_batches if cache == "cold" else len(lde)
                    measures.append(("h5gds-loader", "exact", functools.partial(run_loader, lde, nb)))
                if want("torch-dataloader-h5py") and have_torch:
                    measures.append(("torch-dataloader-h5py", "exact",
                                     lambda: run_dataloader(part_batches * bsz)))
                for method, order, fn in measures:
                    note = common.drop_cache(path) if cache == "cold" else ""
                    if cache == "warm":
                        common.warm(path)
                    t, nbytes, nsamples = fn()
                    r = row("loader-epoch", method, order, label, mean, cache, nbytes, nsamples, t, nsamples / n,
                            rep, ", ".join(x for x in (note, note_geom if method == "h5gds-loader" else "") if x))
                    rows.append(r)
                    print_row(r)
                if cache == "cold" and want("ceiling-sequential"):
                    tried = []
                    for threads, piece in args.ceiling_configs:
                        offsets = np.arange(base, base + region, piece, dtype=np.uint64)
                        note = common.drop_cache(path)
                        tried.append((common.ceiling_seconds(path, True, threads, piece, offsets), threads, piece))
                    t, threads, piece = min(tried)
                    all_ = " ".join(f"{th}x{pc >> 20}MiB={region / tt / 1e9:.3f}" for tt, th, pc in tried)
                    r = row("loader-epoch", "ceiling-sequential", "-", label, mean, cache, region, n, t, 1.0, rep,
                            f"O_DIRECT, best of {all_} GB/s: {threads} threads x {piece >> 20} MiB, {note}")
                    rows.append(r)
                    print_row(r)
        if label == args.samples[0] and args.sweep_windows:
            sweep_windows(args, dev, rows, path, label, bsz, mean, n)
        if not have_torch and want("torch-dataloader-h5py"):
            rows.append(row("loader-epoch", "torch-dataloader-h5py", "exact", label, mean, "-", 0, 0, 0, 0, 0,
                            "skipped: torch with CUDA not available"))
        for ld in loaders.values():
            ld.close()


def sweep_windows(args: argparse.Namespace, dev: Any, rows: list[Row], path: Path, label: str, bsz: int,
                  mean: float, n: int) -> None:
    """Cold windowed epochs with other window sizes (default buffer depth)."""
    from .._loader import DEFAULT_BUFFER_WINDOWS
    for w in args.sweep_windows:
        sub = argparse.Namespace(**{**vars(args), "window": w, "buffer": None})
        ld = make_loader(path, label, bsz, dev, sub, "windowed")
        it = iter(ld)
        next(it)
        it.close()
        note = common.drop_cache(path)
        got = [0, 0]

        def go() -> None:
            for b in ld:
                if label == "var":
                    got[0] += int(b[0].shape[0]); got[1] += len(b[1]) - 1
                else:
                    got[0] += int(b.shape[0]) * int(b.shape[1]); got[1] += int(b.shape[0])
        t = common.timed(go, dev)
        r = row("loader-epoch", "h5gds-loader", f"windowed@{w >> 20}MiB", label, mean, "cold", got[0], got[1], t,
                got[1] / n, 0, f"{note}, window {w >> 20} MiB, buffer {ld.buffer_bytes >> 20} MiB "
                              f"({ld.windows_per_buffer():.0f} windows, default depth {DEFAULT_BUFFER_WINDOWS})")
        rows.append(r)
        print_row(r)
        ld.close()
