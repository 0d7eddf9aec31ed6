"""Whole loader epochs: the windowed and the exact order beside DataLoader +
h5py and the disk's sequential ceiling, a training loop's epoch, and how
random the windowed order is.

  python -m h5gds.bench.loader_epoch [epoch,train,randomness] [--dir DIR] [--out OUT]
         [--samples 4KiB,6KiB,64KiB,100KB,var] [--file-size 4GiB] [--batch 16MiB] [--repeat 2]
         [--read-bytes 512MiB] [--methods ...] [--window 8MiB] [--buffer 512MiB] [--host]

epoch:      per sample size, a file of --file-size (uint8 rows "x", int64 labels "y"; "var": variable-
            length rows stored as values "v" + offsets "o", lengths uniform in --var-range), then cold
            (page cache dropped) and warm epochs into --batch device batches:
            h5gds-loader order=windowed (the whole epoch), h5gds-loader order=exact and
            torch-dataloader-h5py (8 workers, pin_memory; cold: the first --read-bytes of the epoch,
            warm: --warm-read-bytes), ceiling-sequential (O_DIRECT reads of the dataset's bytes,
            the best of the --ceiling threads x piece configurations: the disk's sequential rate).
train:      a training loop over a whole cold epoch of the --train-sample file (--train-step-ms of GPU
            compute per step, the batch read by the step): compute only, h5gds-loader windowed (whole
            epoch), h5gds-loader exact and torch-dataloader-h5py (the first --train-batches steps).
randomness: (CPU, numpy) batch-composition statistics of each order on a dataset sorted by label
            (bench.csv rows bench=loader-randomness), and a small training run (an MLP on generated
            data, stored sorted by label, read through the loader) per order and seed
            (bench=loader-accuracy: final test accuracy).

Writes OUT/loader-epoch.csv (bench,method,order,sample,sample_bytes,cache,GBps,samples_per_s,seconds,
bytes,epoch_fraction,repeat,note) and OUT/loader-epoch-median.csv (medians over repeats).
Cold needs root to drop the page cache (echo 3 > /proc/sys/vm/drop_caches); without it, each file's
own pages are dropped (posix_fadvise DONTNEED), which the note column says.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

import h5gds

from .._sizes import SizeError, parse_size
from . import _common as common
from ._device import Device
from .loader import RowDataset
from .loader_train import StepCompute

Row = dict[str, Any]
_ROWS: list[list[Row]] = []
FIELDS = ["bench", "method", "order", "sample", "sample_bytes", "cache", "GBps", "samples_per_s", "seconds",
          "bytes", "epoch_fraction", "repeat", "note"]


# ---- arguments -------------------------------------------------------------------


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _samples(text: str) -> list[str]:
    out = []
    for item in text.split(","):
        if item != "var":
            _size(item)
        out.append(item)
    if not out:
        raise argparse.ArgumentTypeError("no sample size given")
    return out


def _var_range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("-")
    if not sep:
        raise argparse.ArgumentTypeError(f"--var-range {text!r}: give LOW-HIGH, e.g. 1KiB-12KiB")
    a, b = _size(lo), _size(hi)
    if not 0 < a <= b:
        raise argparse.ArgumentTypeError(f"--var-range {text!r}: need 0 < LOW <= HIGH")
    return a, b


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return v


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m h5gds.bench.loader_epoch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("parts", nargs="?", default="epoch,train",
                   help="a list of epoch, train, randomness (default epoch,train)")
    p.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where the files go (a real disk)")
    p.add_argument("--out", default=os.environ.get("OUT", "."), help="where the CSV files go")
    p.add_argument("--samples", type=_samples, default=_samples("4KiB,6KiB,64KiB,100KB,var"),
                   help="sample sizes (any size unit of the configuration: 4KiB, 100KB, 6144...; var: "
                        "variable-length rows)")
    p.add_argument("--var-range", type=_var_range, default=(1 << 10, 12 << 10),
                   help="lengths of var samples, uniform in LOW-HIGH (default 1KiB-12KiB)")
    p.add_argument("--file-size", type=_size, default=4 << 30)
    p.add_argument("--batch", type=_size, default=16 << 20, help="bytes per batch")
    p.add_argument("--read-bytes", type=_size, default=512 << 20,
                   help="cold: bytes read by the methods that do not read a whole epoch (exact, DataLoader)")
    p.add_argument("--warm-read-bytes", type=_size, default=1 << 30,
                   help="warm: bytes read by DataLoader (the h5gds orders read the whole epoch)")
    p.add_argument("--window", type=_size, default=None, help="windowed order: window bytes (default: the loader's)")
    p.add_argument("--buffer", type=_size, default=None,
                   help="windowed order: shuffle buffer bytes (default: the loader's)")
    p.add_argument("--config", default="", help="gds configuration keys for the loader's engine")
    p.add_argument("--repeat", "--repeats", dest="repeat", type=_positive_int, default=2)
    p.add_argument("--methods", default="", help="only these methods (comma list of h5gds-windowed, h5gds-exact, "
                                                 "torch-dataloader-h5py, ceiling-sequential)")
    p.add_argument("--sweep-windows", default="",
                   help="epoch: for the first sample size, cold windowed epochs with these windows too "
                        "(comma list of sizes; the buffer keeps the default depth in windows)")
    p.add_argument("--workers", type=_positive_int, default=8, help="DataLoader workers")
    p.add_argument("--ceiling", default="16x8MiB,4x32MiB,64x1MiB",
                   help="ceiling-sequential: O_DIRECT configurations THREADSxPIECE tried in turn (the best is "
                        "the ceiling; all are in its note)")
    p.add_argument("--caches", default="cold,warm", help="epoch: which cache states (cold, warm)")
    p.add_argument("--inflight", type=_positive_int, default=None,
                   help="windowed order: window reads in flight (default: the loader's)")
    p.add_argument("--train-sample", default="6KiB")
    p.add_argument("--train-step-ms", type=float, default=12.0)
    p.add_argument("--train-batches", type=_positive_int, default=48,
                   help="train: steps measured for the methods that do not run a whole epoch")
    p.add_argument("--accuracy-seeds", type=_positive_int, default=5)
    p.add_argument("--host", action="store_true", help="host arrays only (checks the benchmark without a GPU)")
    args = p.parse_args(argv)
    parts = [x for x in args.parts.split(",") if x]
    bad = [x for x in parts if x not in ("epoch", "train", "randomness")]
    if bad or not parts:
        p.error(f"unknown part(s) {', '.join(bad) or '(none)'}: choose from epoch, train, randomness")
    args.parts = parts
    _size(args.train_sample) if args.train_sample != "var" else None
    args.sweep_windows = [_size(w) for w in args.sweep_windows.split(",") if w]
    args.ceiling_configs = []
    for item in args.ceiling.split(","):
        t, sep, piece = item.partition("x")
        if not sep or not t.isdigit() or int(t) < 1:
            p.error(f"--ceiling {item!r}: give THREADSxPIECE, e.g. 16x8MiB")
        args.ceiling_configs.append((int(t), _size(piece)))
    args.caches = [c for c in args.caches.split(",") if c]
    if not args.caches or any(c not in ("cold", "warm") for c in args.caches):
        p.error(f"--caches {','.join(args.caches)!r}: cold and/or warm")
    args.methods = [m for m in args.methods.split(",") if m]
    known = {"h5gds-windowed", "h5gds-exact", "torch-dataloader-h5py", "ceiling-sequential"}
    unknown = [m for m in args.methods if m not in known]
    if unknown:
        p.error(f"unknown method(s) {', '.join(unknown)}: choose from {', '.join(sorted(known))}")
    return args


# ---- files -----------------------------------------------------------------------------


def sample_file(directory: Path, label: str, file_bytes: int, var_range: tuple[int, int]) -> tuple[Path, int, int]:
    """The file of one sample size (made once): (path, samples, bytes of
    the samples). Contents: a 64 MiB random block repeated (the disk does
    not care), labels 0..9 in blocks."""
    path = directory / f"loader-epoch-{label}.h5"
    rng = np.random.default_rng(0)
    if label == "var":
        lo, hi = var_range
        n = int(file_bytes // ((lo + hi) / 2))
        lens = rng.integers(lo, hi + 1, n)
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        total = int(offsets[-1])
        if not _made(path, "v", (total,)):
            block = rng.integers(0, 255, 64 << 20, dtype=np.uint8)
            with h5py.File(path, "w") as f:
                d = f.create_dataset("v", shape=(total,), dtype="u1")
                for i in range(0, total, len(block)):
                    d[i:i + len(block)] = block[: min(len(block), total - i)]
                f["o"] = offsets
                f["y"] = (np.arange(n) * 10 // n).astype(np.int64)
            _sync(path)
        return path, n, total
    sample = parse_size(label)
    n = file_bytes // sample
    if not _made(path, "x", (n, sample)):
        step = max(1, (64 << 20) // sample)
        block = rng.integers(0, 255, (step, sample), dtype=np.uint8)
        with h5py.File(path, "w") as f:
            d = f.create_dataset("x", shape=(n, sample), dtype="u1")
            for i in range(0, n, step):
                d[i:i + step] = block[: min(step, n - i)]
            f["y"] = (np.arange(n) * 10 // n).astype(np.int64)
        _sync(path)
    return path, n, n * sample


def _made(path: Path, name: str, shape: tuple[int, ...]) -> bool:
    if not path.exists():
        return False
    try:
        with h5py.File(path, "r") as f:
            return name in f and f[name].shape == shape
    except OSError:
        return False


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def data_region(path: Path, label: str) -> tuple[int, int]:
    """File offset and bytes of the samples' dataset (contiguous)."""
    with h5py.File(path, "r") as f:
        d = f["v" if label == "var" else "x"]
        return int(d.id.get_offset()), int(d.size * d.dtype.itemsize)


# ---- methods ----------------------------------------------------------------------------


class _VarDataset:
    """torch Dataset over a Ragged column with h5py: one file per worker."""

    def __init__(self, path: str):
        self.path, self.f = path, None
        with h5py.File(path, "r") as f:
            self.offsets = f["o"][()]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> Any:
        import torch
        if self.f is None:
            self.f = h5py.File(self.path, "r")
        return torch.from_numpy(self.f["v"][self.offsets[i]:self.offsets[i + 1]])


def _var_collate(items: list[Any]) -> Any:
    import torch
    lens = torch.tensor([len(t) for t in items], dtype=torch.int64)
    return torch.cat(items), torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])


def make_loader(path: Path, label: str, bsz: int, dev: Any, args: argparse.Namespace, order: str,
                labels: bool = False) -> h5gds.Loader:
    with h5py.File(path, "r") as f:
        col: Any = h5gds.Ragged(f["v"], f["o"]) if label == "var" else f["x"]
        src = (col, f["y"]) if labels else col
        ld = h5gds.Loader(src, bsz, seed=1, like=dev.name, order=order, cache="off", config=args.config,
                          window=args.window, buffer=args.buffer, prefetch=4)
    if args.inflight:
        ld._inflight_loads = args.inflight
    return ld


def _dataloader(path: Path, label: str, bsz: int, order: np.ndarray, workers: int) -> Any:
    import torch
    ds = _VarDataset(str(path)) if label == "var" else RowDataset(str(path))
    return torch.utils.data.DataLoader(ds, batch_size=bsz, sampler=order.tolist(), num_workers=workers,
                                       pin_memory=True, collate_fn=_var_collate if label == "var" else None)


def _to_device(batch: Any) -> None:
    if isinstance(batch, (tuple, list)):
        for b in batch:
            _to_device(b)
    else:
        batch.cuda(non_blocking=True)


def row(bench: str, method: str, order: str, label: str, sample_bytes: float, cache: str, nbytes: int,
        nsamples: int, secs: float, fraction: float, rep: int, note: str = "") -> Row:
    return {"bench": bench, "method": method, "order": order, "sample": label, "sample_bytes": round(sample_bytes),
            "cache": cache, "GBps": round(nbytes / secs / 1e9, 4) if secs > 0 else float("nan"),
            "samples_per_s": round(nsamples / secs, 1) if secs > 0 else float("nan"),
            "seconds": round(secs, 4), "bytes": nbytes, "epoch_fraction": round(fraction, 4), "repeat": rep,
            "note": note}


_CSV_OUT: list[Path] = []


def print_row(r: Row) -> None:
    """Prints a row (and rewrites the CSV so far: a run cut short keeps its rows)."""
    if _CSV_OUT and _ROWS:
        write_csv(_CSV_OUT[0], _ROWS[0])
    print(f"{r['bench']:14s} {r['method']:22s} {r['order']:8s} {r['sample']:>6s} {r['cache']:5s} "
          f"{r['GBps']:8.3f} GB/s {r['seconds']:8.3f} s  x{r['epoch_fraction']:.3f}  {r['note']}", flush=True)


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
                    measures.append(("h5gds-loader", "exact", lambda nb=nb: run_loader(lde, nb)))
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


def bench_train(args: argparse.Namespace, dev: Any, rows: list[Row]) -> None:
    """An epoch of a training loop: per step, --train-step-ms of GPU work
    and a read of the batch (the step's loss.item())."""
    label = args.train_sample
    path, n, data_bytes = sample_file(Path(args.dir), label, args.file_size, args.var_range)
    mean = data_bytes / n
    bsz = max(1, int(args.batch // mean))
    compute = StepCompute(dev, args.train_step_ms)
    loaders = {o: make_loader(path, label, bsz, dev, args, o, labels=True) for o in ("windowed", "exact")}
    for ld in loaders.values():
        it = iter(ld)
        first = next(it)
        it.close()
    steps = len(loaders["windowed"])
    part = min(args.train_batches, steps)

    def step_input(batch: Any) -> Any:
        x = batch[0]
        return x[0] if isinstance(x, tuple) else x

    for rep in range(args.repeat):
        t_compute = common.timed(lambda: [compute.step(step_input(first)) for _ in range(steps)], dev)
        r = row("loader-train", "compute-only", "-", label, mean, "-", int(steps * bsz * mean), steps * bsz,
                t_compute, 1.0, rep, f"{steps} steps of {args.train_step_ms:g} ms")
        rows.append(r)
        print_row(r)
        for method, order in (("h5gds-loader", "windowed"), ("h5gds-loader", "exact"),
                              ("torch-dataloader-h5py", "exact")):
            if method.startswith("torch") and (dev.name == "numpy"):
                continue
            nsteps = steps if order == "windowed" else part
            note = common.drop_cache(path)
            if method == "h5gds-loader":
                ld = loaders[order]

                def epoch() -> None:
                    it = iter(ld)
                    for _ in range(nsteps):
                        compute.step(step_input(next(it)))
                    it.close()
            else:
                dl = _dataloader(path, label, bsz, loaders["exact"].indices()[: nsteps * bsz], args.workers)

                def epoch() -> None:
                    for b in dl:
                        x = b[0] if label == "var" else b
                        compute.step(x.cuda(non_blocking=True))
            t = common.timed(epoch, dev)
            expect = t_compute * nsteps / steps
            r = row("loader-train", method, order, label, mean, "cold", int(nsteps * bsz * mean), nsteps * bsz, t,
                    nsteps / steps, rep, f"{note}, {nsteps} steps: {t:.3f} s vs compute-only {expect:.3f} s = "
                                         f"{t / expect:.2f}x")
            rows.append(r)
            print_row(r)
    for ld in loaders.values():
        ld.close()


# ---- randomness (CPU) ----------------------------------------------------------------------


def _orders_for_stats(n: int, row_bytes: int, window: int, buffer_windows: int, world: int, seed: int = 0
                      ) -> dict[str, np.ndarray]:
    """Rank 0's order of epoch 0 for each order (no files: the plans only)."""
    from .. import _loader_order as orders
    win = orders.windows_from_boundaries([orders.aligned_boundaries(0, n, 4096, row_bytes, window)])
    out = {"exact": orders.exact_order(n, seed, 0, True, 0, world),
           "sequential": orders.exact_order(n, seed, 0, False, 0, world)}
    for d in sorted({1, 4, 16, buffer_windows}):
        plan = orders.windowed_plan(win, n, seed, 0, True, 0, world, d * window,
                                    lambda a, b: (b - a) * row_bytes)
        out[f"windowed-{d}"] = plan.order
    return out


def randomness_stats(rows: list[Row], args: argparse.Namespace) -> None:
    """Batch composition of each order, on the geometry of the epoch
    benchmark (--file-size of 6 KiB samples, the loader's default window
    and buffer), labels sorted (10 classes in blocks): the worst case."""
    from .._loader import DEFAULT_BUFFER_WINDOWS, DEFAULT_WINDOW
    from .._loader_randomness import batch_stats
    window = args.window or DEFAULT_WINDOW
    bufw = max(1, (args.buffer // window) if args.buffer else DEFAULT_BUFFER_WINDOWS)
    for sample in (6 << 10, 64 << 10):
        n = args.file_size // sample
        labels = (np.arange(n) * 10 // n).astype(np.int64)
        for world in (1, 8):
            for bsz in sorted({256, max(1, args.batch // sample)}):
                for name, order in _orders_for_stats(n, sample, window, bufw, world).items():
                    st = batch_stats(order, bsz, n, labels, window_rows=max(1, window // sample))
                    note = ";".join(f"{k}={v:.4g}" for k, v in st.items() if isinstance(v, float))
                    rows.append({"bench": "loader-randomness", "method": "order-statistics", "order": name,
                                 "sample": f"{sample >> 10}KiB", "sample_bytes": sample, "cache": "-",
                                 "GBps": float("nan"), "samples_per_s": float("nan"), "seconds": float("nan"),
                                 "bytes": n * sample, "epoch_fraction": 1.0, "repeat": 0,
                                 "note": f"world={world};batch={bsz};" + note})
                    print(f"randomness {sample >> 10:3d} KiB world {world} batch {bsz:5d} {name:12s} "
                          f"label_tv {st['label_tv']:.3f} (uniform {st['label_tv_uniform']:.3f}) "
                          f"spread {st['spread']:.3f} windows/batch {st.get('windows_per_batch', 0):.1f} "
                          f"neighbours {st['same_batch_neighbours']:.4f}", flush=True)


def generated_dataset(path: Path, n: int, dims: int = 32, classes: int = 10, seed: int = 0, noise: float = 2.0
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A classification task (two Gaussian clusters per class, overlapping
    enough that an MLP reaches about 77%, not 100%), training set written
    to `path` sorted by label; returns the training and test sets."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 1.0, (classes, 2, dims)).astype(np.float32)

    def draw(m: int, r: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        y = np.repeat(np.arange(classes), m // classes)
        x = centers[y, r.integers(0, 2, len(y))] + r.normal(0, noise, (len(y), dims)).astype(np.float32)
        return x.astype(np.float32), y.astype(np.int64)

    xtr, ytr = draw(n, np.random.default_rng(seed + 1))
    xte, yte = draw(max(classes, n // 5), np.random.default_rng(seed + 2))
    with h5py.File(path, "w") as f:
        f["x"] = xtr
        f["y"] = ytr
    return xtr, ytr, xte, yte


def train_mlp(loader: Any, epochs: int, dims: int, classes: int, seed: int, lr: float = 0.05,
              hidden: int = 64) -> list[np.ndarray]:
    """SGD with momentum on a one-hidden-layer MLP (numpy), batches from `loader`."""
    rng = np.random.default_rng(seed)
    w1 = (rng.normal(0, 1, (dims, hidden)) / np.sqrt(dims)).astype(np.float32)
    w2 = (rng.normal(0, 1, (hidden, classes)) / np.sqrt(hidden)).astype(np.float32)
    params = [w1, np.zeros(hidden, np.float32), w2, np.zeros(classes, np.float32)]
    vel = [np.zeros_like(p) for p in params]
    for e in range(epochs):
        loader.set_epoch(e)
        for x, y in loader:
            w1, b1, w2, b2 = params
            h = x @ w1 + b1
            a = np.maximum(h, 0)
            z = a @ w2 + b2
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(len(y)), y] -= 1
            p /= len(y)
            ga = p @ w2.T
            ga[h <= 0] = 0
            for v, q, g in zip(vel, params, (x.T @ ga, ga.sum(0), a.T @ p, p.sum(0))):
                v *= 0.9
                v -= lr * g
                q += v
    return params


def accuracy(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    w1, b1, w2, b2 = params
    return float(((np.maximum(x @ w1 + b1, 0) @ w2 + b2).argmax(axis=1) == y).mean())


def accuracy_runs(path: Path, xte: np.ndarray, yte: np.ndarray, orders: dict[str, dict[str, Any]], seeds: int,
                  epochs: int, batch: int, dims: int = 32, classes: int = 10) -> dict[str, list[float]]:
    """Final test accuracy per order (keyword arguments of the Loader) and seed."""
    out: dict[str, list[float]] = {}
    with h5py.File(path, "r") as f:
        for name, kw in orders.items():
            accs = []
            for s in range(seeds):
                ld = h5gds.Loader((f["x"], f["y"]), batch, seed=s, like="numpy", **kw)
                accs.append(accuracy(train_mlp(ld, epochs, dims, classes, seed=s), xte, yte))
                ld.close()
            out[name] = accs
    return out


def accuracy_orders(n: int, row_bytes: int, windows: int, buffer_windows: list[int]) -> dict[str, dict[str, Any]]:
    """The orders of the accuracy runs: exact, windowed with `windows`
    windows over the dataset and each buffer depth, sequential."""
    window = max(row_bytes, n * row_bytes // windows)
    out: dict[str, dict[str, Any]] = {"exact": {"order": "exact"}}
    for d in buffer_windows:
        out[f"windowed-{d}"] = {"order": "windowed", "window": window, "buffer": d * window, "cache": "off"}
    out["sequential"] = {"order": "exact", "shuffle": False}
    return out


def randomness_accuracy(rows: list[Row], args: argparse.Namespace) -> None:
    """The training runs: 60,000 samples in 512 windows (as 4 GiB of 6 KiB
    samples in 8 MiB windows), windowed buffers of 1, 4, 16 and the
    default 64 windows, 3 epochs at a constant learning rate (the last
    batches weigh most: a worst case for a biased order)."""
    from .._loader import DEFAULT_BUFFER_WINDOWS
    path = Path(args.dir) / "loader-accuracy.h5"
    n, epochs, batch = 60000, 3, 128
    _, _, xte, yte = generated_dataset(path, n)
    orders = accuracy_orders(n, 32 * 4, 512, sorted({1, 4, 16, DEFAULT_BUFFER_WINDOWS}))
    t0 = time.perf_counter()
    res = accuracy_runs(path, xte, yte, orders, args.accuracy_seeds, epochs, batch)
    for name, accs in res.items():
        for s, a in enumerate(accs):
            rows.append({"bench": "loader-accuracy", "method": "mlp-numpy", "order": name, "sample": "128B",
                         "sample_bytes": 128, "cache": "-", "GBps": float("nan"), "samples_per_s": float("nan"),
                         "seconds": float("nan"), "bytes": n * 128, "epoch_fraction": float(epochs), "repeat": s,
                         "note": f"test_accuracy={a:.4f};epochs={epochs};batch={batch};samples={n};windows=512"})
        print(f"accuracy {name:12s} mean {np.mean(accs):.4f} sd {np.std(accs, ddof=1) if len(accs) > 1 else 0:.4f} "
              f"({', '.join(f'{a:.4f}' for a in accs)})", flush=True)
    print(f"accuracy runs: {time.perf_counter() - t0:.1f} s", flush=True)
    path.unlink()


# ---- main ------------------------------------------------------------------------------------


def median_rows(rows: list[Row]) -> list[Row]:
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        groups.setdefault((r["bench"], r["method"], r["order"], r["sample"], r["cache"]), []).append(r)
    out = []
    for rs in groups.values():
        m = dict(rs[len(rs) // 2])
        for k in ("GBps", "samples_per_s", "seconds"):
            vals = [float(r[k]) for r in rs]
            m[k] = round(float(np.median(vals)), 4)
        m["repeat"] = len(rs)
        out.append(m)
    return out


def write_csv(path: Path, rows: list[Row]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    _ROWS[:] = [rows]
    _CSV_OUT[:] = [Path(args.out) / "loader-epoch.csv"]
    try:
        if "randomness" in args.parts:
            randomness_stats(rows, args)
            randomness_accuracy(rows, args)
        gpu_parts = [p for p in args.parts if p in ("epoch", "train")]
        if gpu_parts:
            dev = Device(args.host)
            print(f"h5gds {h5gds.__version__}, HDF5 {h5gds.hdf5_version}, arrays: {dev.name}, files in {args.dir}",
                  flush=True)
            if "epoch" in gpu_parts:
                bench_epoch(args, dev, rows)
            if "train" in gpu_parts:
                bench_train(args, dev, rows)
    finally:
        write_csv(Path(args.out) / "loader-epoch.csv", rows)
        write_csv(Path(args.out) / "loader-epoch-median.csv", median_rows(rows))
        print(f"csv: {Path(args.out) / 'loader-epoch.csv'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
