"""The `loader` benchmark: random samples into 16 MiB device batches from a
2 GiB file per sample size, cold and warm: h5gds-loader,
torch-dataloader-h5py, h5py-fancy, kvikio-pread, and the ceilings
ceiling-odirect (cold), ceiling-buffered and ceiling-h2d (warm). Each method
reads the same samples: the first --read-bytes (cold) or --warm-read-bytes
(warm) of one shuffled epoch. With loader-train, the training loop of
loader_train.py runs on the same files. Rows: bench=loader."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

import h5gds

from . import _common, loader_train
from ._common import Row, ceiling_seconds, print_row, row, timed, warm
from ._device import Device


class RowDataset:
    """torch Dataset: one h5py.File per worker, opened lazily in the worker."""

    def __init__(self, path: str):
        self.path = path
        self.f: h5py.File | None = None

    def __len__(self) -> int:
        with h5py.File(self.path, "r") as f:
            return int(f["x"].shape[0])

    def __getitem__(self, i: int) -> Any:
        import torch
        if self.f is None:
            self.f = h5py.File(self.path, "r")
        return torch.from_numpy(self.f["x"][i])


def make_sample_file(path: Path, sample: int, file_bytes: int) -> int:
    n = file_bytes // sample
    if path.exists():
        with h5py.File(path, "r") as f:
            if f["x"].shape == (n, sample):
                return n
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(n, sample), dtype="u1")
        step = max(1, (256 << 20) // sample)
        for i in range(0, n, step):
            d[i:i + step] = rng.integers(0, 255, (min(step, n - i), sample), dtype=np.uint8)
    return n


def run(args: argparse.Namespace, dev: Device, rows: list[Row],
        drop_cache: Callable[[Path], str] = _common.drop_cache) -> None:
    """Each of --samples: its file made (or kept), then the methods, cold and
    warm, --repeat times; drop_cache: how a cold read starts (the caller may
    keep the machine's page cache, as the tests do)."""
    batch_bytes, file_bytes = args.batch, args.file_size
    try:
        import kvikio  # type: ignore[import-not-found]
    except Exception as exc:
        kvikio = None
        print(f"kvikio-pread: skipped (kvikio not importable: {exc})", flush=True)
        rows.append(row("loader", "kvikio-pread", 0, "-", float("nan"), float("nan"), note="skipped: kvikio not importable"))
    for sample in args.samples:
        path = Path(args.dir) / f"samples-{sample}.h5"
        n = make_sample_file(path, sample, file_bytes)
        bsz = max(1, batch_bytes // sample)
        with h5py.File(path, "r") as f:
            base = int(f["x"].id.get_offset())
            loader = h5gds.Loader(f["x"], bsz, seed=1, like=dev.name, prefetch=args.prefetch, config=args.config,
                                  order="exact")
        epoch = loader.indices()

        # The samples every method reads, per cache state: the first
        # read_bytes of the epoch, in batches (set before each cache's runs).
        nbatches, order, batches, total, offsets = 0, epoch[:0], [], 0, np.zeros(0, np.uint64)

        def select(read_bytes: int) -> None:
            nonlocal nbatches, order, batches, total, offsets
            nbatches = max(1, min(n // bsz, read_bytes // batch_bytes))
            order = epoch[: nbatches * bsz]
            batches = [np.sort(order[i:i + bsz]) for i in range(0, len(order), bsz)]
            total = len(order) * sample
            offsets = np.ascontiguousarray(base + order.astype(np.uint64) * np.uint64(sample), np.uint64)

        open_iters: list[Any] = []

        def m_loader() -> None:
            # The clock stops when the last measured batch is on the device;
            # the prefetched batches after it are collected outside the
            # timing (they are not part of the bytes counted).
            it = iter(loader)
            open_iters.append(it)
            for _ in range(nbatches):
                next(it)

        def m_fancy() -> None:
            with h5py.File(path, "r") as f:
                d = f["x"]
                for b in batches:
                    dev.from_host(d[b])

        def m_torch() -> None:
            import torch
            ds = RowDataset(str(path))
            dl = torch.utils.data.DataLoader(ds, batch_size=bsz, sampler=order.tolist(), num_workers=8,
                                             pin_memory=True)
            for x in dl:
                x.cuda(non_blocking=True)

        def m_kvikio() -> None:
            buf = dev.cp.empty(bsz * sample, "u1") if dev.name == "cupy" else dev.torch.empty(bsz * sample, dtype=dev.torch.uint8, device="cuda")
            with kvikio.CuFile(str(path), "r") as f:
                for b in batches:
                    futs = [f.pread(buf[j * sample:(j + 1) * sample], sample, base + int(i) * sample)
                            for j, i in enumerate(b)]
                    for fu in futs:
                        fu.get()

        def ceiling(direct: bool, threads: int) -> float:
            return ceiling_seconds(path, direct, threads, sample, offsets)

        methods: list[tuple[str, Callable[[], None]]] = [("h5gds-loader", m_loader), ("h5py-fancy", m_fancy)]
        if args.methods:
            methods = [m for m in methods if m[0] in args.methods]
        try:
            import torch  # noqa: F401
            if dev.name == "numpy":
                raise ImportError
            if not args.methods or "torch-dataloader-h5py" in args.methods:
                methods.append(("torch-dataloader-h5py", m_torch))
        except ImportError:
            rows.append(row("loader", "torch-dataloader-h5py", sample, "-", float("nan"), float("nan"),
                            note="skipped: torch not importable"))
        if kvikio is not None:
            try:  # 16 threads: kvikio's API for it changed across releases
                import kvikio.defaults as kvikio_defaults
                if hasattr(kvikio_defaults, "set"):
                    kvikio_defaults.set({"num_threads": 16})
                else:
                    kvikio_defaults.num_threads_reset(16)
                if dev.name == "cupy" and (not args.methods or "kvikio-pread" in args.methods):
                    methods.append(("kvikio-pread", m_kvikio))
            except Exception as exc:  # noqa: BLE001 - reported in the CSV
                rows.append(row("loader", "kvikio-pread", sample, "-", float("nan"), float("nan"),
                                note=f"skipped: kvikio threads could not be set ({exc})"))
        for cache in ("cold", "warm") if "loader" in args.loader_parts else ():
            select(args.read_bytes if cache == "cold" else args.warm_read_bytes)
            for rep in range(args.repeat):
                for name, fn in methods:
                    note = drop_cache(path) if cache == "cold" else ""
                    if cache == "warm":
                        warm(path)
                    t = timed(fn, dev)
                    for it in open_iters:
                        it.close()
                    open_iters.clear()
                    rows.append(row("loader", name, sample, cache, total / t, len(order) / t, rep, note))
                    print_row(rows[-1:])
                if args.methods and not any(m.startswith("ceiling") for m in args.methods):
                    continue
                if cache == "cold":
                    best = None
                    for threads in (16, 64):
                        note = drop_cache(path)
                        t = ceiling(True, threads)
                        if best is None or t < best[0]:
                            best = (t, f"{threads} threads, {note}")
                    assert best is not None
                    rows.append(row("loader", "ceiling-odirect", sample, cache, total / best[0], len(order) / best[0],
                                    rep, best[1]))
                else:
                    warm(path)
                    ceiling(False, 16)
                    t = ceiling(False, 16)
                    rows.append(row("loader", "ceiling-buffered", sample, cache, total / t, len(order) / t, rep,
                                    "16 threads"))
                    if dev.name == "numpy":
                        print_row(rows[-1:])
                        continue
                    t = h2d_time(dev, bsz * sample)
                    rows.append(row("loader", "ceiling-h2d", sample, cache, bsz * sample / t, bsz / t, rep))
                    print_row(rows[-2:])
                    continue
                print_row(rows[-1:])
        if "train" in args.loader_parts:
            loader_train.run(args, dev, rows, loader, path, sample, bsz, drop_cache)
        loader.close()



def h2d_time(dev: Device, nbytes: int) -> float:
    """Pinned host -> device copy of one batch (best of 10)."""
    best = float("inf")
    if dev.name == "cupy":
        cp = dev.cp
        host = np.frombuffer(cp.cuda.alloc_pinned_memory(nbytes), np.uint8, nbytes)
        d = cp.empty(nbytes, cp.uint8)
        for _ in range(10):
            best = min(best, timed(lambda: d.set(host), dev))
    else:
        torch = dev.torch
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        d = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        for _ in range(10):
            best = min(best, timed(lambda: d.copy_(host, non_blocking=True), dev))
    return best
