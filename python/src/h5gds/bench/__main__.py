"""Benchmarks of the Python layer, each method beside its peers in the same run.

  python -m h5gds.bench whole,loader,checkpoint,train-loop [--dir DIR] [--out OUT] [--sizes 256MiB,1GiB,4GiB]
         [--samples 4KiB,64KiB,1MiB] [--file-size 2GiB] [--batch 16MiB] [--read-bytes 512MiB]
         [--warm-read-bytes 2GiB]

whole:  dataset write (durable: fsync before the clock stops), cold read (page
        cache dropped), warm read through h5gds.write/read into device arrays,
        beside h5py + cupy (host array, then a copy to the device).
loader: random samples into 16 MiB device batches from a 2 GiB file per
        sample size, cold and warm: h5gds-loader, torch-dataloader-h5py,
        h5py-fancy, kvikio-pread, and the ceilings ceiling-odirect (cold),
        ceiling-buffered and ceiling-h2d (warm). Each method reads the same
        samples: the first --read-bytes (cold) or --warm-read-bytes (warm, by
        default the whole epoch: at 50 GB/s a shorter run is mostly the
        start of an iteration) of one shuffled epoch.
Sizes are written as in the gds configuration: 4096, 64KiB, 8MiB, 1G (powers
of 1024), 100KB, 500MB (powers of 1000).
Writes OUT/bench.csv (bench,method,sample_bytes,cache,GBps,samples_per_s,...)
and OUT/bench.png (when matplotlib is importable).
"""
from __future__ import annotations

import argparse
import csv
import ctypes
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

import h5gds
from h5gds._lib import errbuf, native
from h5gds._sizes import SizeError, parse_size


def size(text: str) -> int:
    """Bytes of a size in the driver configuration's syntax (h5gds._sizes)."""
    return parse_size(text)


def fadvise_dontneed(path: Path | str) -> None:
    """Drops the file's own clean pages (fsync, then fadvise DONTNEED)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def drop_cache(path: Path) -> str:
    """Drops the file's pages: the whole page cache when root, else the
    file's own clean pages (fadvise DONTNEED after fsync)."""
    fadvise_dontneed(path)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        return "fadvise"


def warm(path: Path) -> None:
    with open(path, "rb", buffering=0) as f:
        while f.read(64 << 20):
            pass


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Device:
    """The GPU array library in use: CuPy when importable, else torch."""

    def __init__(self, host: bool = False) -> None:
        self.name = "numpy"
        if host:  # --host: host arrays only, to check the benchmark itself on a machine without a GPU
            return
        try:
            import cupy
            cupy.cuda.runtime.getDeviceCount()
            self.name, self.cp = "cupy", cupy
            return
        except Exception:
            pass
        try:
            import torch
        except ImportError:
            raise SystemExit("h5gds.bench needs a CUDA GPU with CuPy or PyTorch (or --host)") from None
        if not torch.cuda.is_available():
            raise SystemExit("h5gds.bench needs a CUDA GPU (CuPy or PyTorch), or --host")
        self.name, self.torch = "torch", torch

    def sync(self) -> None:
        if self.name == "numpy":
            return
        if self.name == "cupy":
            self.cp.cuda.Device().synchronize()
        else:
            self.torch.cuda.synchronize()

    def free_cached(self) -> None:
        """Returns the array library's cached device memory to the driver."""
        if self.name == "cupy":
            self.cp.get_default_memory_pool().free_all_blocks()
        elif self.name == "torch":
            self.torch.cuda.empty_cache()

    def random(self, nbytes: int) -> Any:
        n = nbytes // 4
        if self.name == "numpy":
            return np.random.default_rng(0).random(n, dtype="f4")
        if self.name == "cupy":
            return self.cp.random.random(n, dtype="f4")
        return self.torch.rand(n, device="cuda")

    def empty(self, nbytes: int) -> Any:
        n = nbytes // 4
        if self.name == "numpy":
            return np.empty(n, "f4")
        return self.cp.empty(n, "f4") if self.name == "cupy" else self.torch.empty(n, device="cuda")

    def to_host(self, a: Any) -> np.ndarray:
        if self.name == "numpy":
            return a
        return a.get() if self.name == "cupy" else a.cpu().numpy()

    def from_host(self, a: np.ndarray) -> Any:
        if self.name == "numpy":
            return a
        return self.cp.asarray(a) if self.name == "cupy" else self.torch.from_numpy(a).cuda()

    def equal(self, a: Any, b: Any) -> bool:
        return bool((a == b).all())


Row = dict[str, Any]


def timed(fn: Callable[[], Any], dev: Device | None = None) -> float:
    if dev:
        dev.sync()
    t0 = time.perf_counter()
    fn()
    if dev:
        dev.sync()
    return time.perf_counter() - t0


# ---- whole datasets ---------------------------------------------------------------

def c_bench_whole(args: argparse.Namespace, dev: Device, rows: list[Row], nbytes: int, rep: int) -> None:
    """The C benchmark's GDS figures (h5gds-bench --methods GDS) for one size,
    run right before the Python API's measurement of the same size and
    repeat, so that both share the machine's state and the disk's drift:
    rows method=c-h5gds-bench-gds."""
    import subprocess
    import tempfile
    exe = args.c_bench or os.environ.get("H5GDS_C_BENCH", "")
    if not exe:
        if not any(r["method"] == "c-h5gds-bench-gds" for r in rows):
            rows.append(row("whole", "c-h5gds-bench-gds", 0, "-", float("nan"), float("nan"),
                            note="skipped: no --c-bench (path of tools/h5gds-bench)"))
            print("whole: the C bench skipped (no --c-bench)", flush=True)
        return
    memory = "host" if dev.name == "numpy" else "device"
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        out_csv = Path(tmp) / "c.csv"
        cmd = [exe, "--sizes", str(nbytes), "--methods", "GDS", "--repeat", "1", "--no-ceilings",
               "--memory", memory, "--dir", tmp, "--csv", str(out_csv)]
        print("whole: " + " ".join(cmd), flush=True)
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0 or not out_csv.exists():
            tail = " | ".join(done.stdout.strip().splitlines()[-5:])
            raise SystemExit(f"whole: {exe} failed ({done.returncode}): {tail}")
        phases = {"write": "durable-write", "cold_read": "cold", "warm_read": "warm"}
        with open(out_csv, newline="") as f:
            for r in csv.DictReader(f):
                if r["method"] != "GDS" or r["phase"] not in phases:
                    continue
                secs = float(r["seconds"])
                rows.append(row("whole", "c-h5gds-bench-gds", int(r["size_bytes"]), phases[r["phase"]],
                                float(r["rate_GBps"]) * 1e9, 1 / secs if secs else float("nan"), rep,
                                f"C bench, {r['memory']} memory, {r['driver_config']}"
                                + (f", {r['cold_cache']}" if r["phase"] == "cold_read" else "")))
                print_row(rows[-1:])


def bench_whole(args: argparse.Namespace, dev: Device, rows: list[Row]) -> None:
    sizes = args.sizes
    # Untimed: the engine's workers pin their staging rings on first use (up to
    # a second for sixteen), which the first measurement would otherwise pay
    # (the C bench warms up the same way); 512 MiB gives every worker a block.
    warm_path = Path(args.dir) / "whole-warm-up.h5"
    with h5py.File(warm_path, "w", driver="gds") as f:
        h5gds.create_dataset(f, "x", data=dev.random(min(max(sizes), 512 << 20)))
    warm_path.unlink()
    for nbytes in sizes:
        path = Path(args.dir) / f"whole-{nbytes}.h5"
        data = dev.random(nbytes)
        out = dev.empty(nbytes)

        def gds_write() -> None:
            with h5py.File(path, "w", driver="gds") as f:
                h5gds.create_dataset(f, "x", data=data)
            fsync_path(path)

        def gds_read() -> None:
            with h5py.File(path, "r", driver="gds") as f:
                h5gds.read(f["x"], out=out)

        def peer_write() -> None:
            host = dev.to_host(data)
            with h5py.File(path, "w") as f:
                f.create_dataset("x", data=host)
            fsync_path(path)

        peer_out: list[Any] = []

        def peer_read() -> None:
            with h5py.File(path, "r") as f:
                peer_out[:] = [dev.from_host(f["x"][()])]

        for rep in range(args.repeat):
            # the C bench's figures first, then each Python method, per
            # repeat: neighbours in time (the disk's write rate drifts)
            peer_out.clear()  # the C bench needs device memory of its own
            dev.free_cached()
            c_bench_whole(args, dev, rows, nbytes, rep)
            for method, write, read in (("h5gds", gds_write, gds_read), ("h5py+cupy", peer_write, peer_read)):
                if path.exists():
                    path.unlink()
                # as the C bench does: the previous file's blocks are freed
                # and other dirty data written before the clock starts
                os.sync()
                t = timed(write, dev)
                rows.append(row("whole", method, nbytes, "durable-write", nbytes / t, 1 / t, rep))
                how = drop_cache(path)
                t = timed(read, dev)
                rows.append(row("whole", method, nbytes, "cold", nbytes / t, 1 / t, rep, how))
                t = timed(read, dev)
                rows.append(row("whole", method, nbytes, "warm", nbytes / t, 1 / t, rep))
                got = out if method == "h5gds" else peer_out[0]
                if not dev.equal(got, data):
                    raise SystemExit(f"whole {method} {nbytes}: data read differs from data written")
                print_row(rows[-3:])
        path.unlink()
        del data, out


def row(bench: str, method: str, sample: int, cache: str, bps: float, per_s: float, rep: int = 0,
        note: str = "") -> Row:
    return {"bench": bench, "method": method, "sample_bytes": sample, "cache": cache, "GBps": round(bps / 1e9, 4),
            "samples_per_s": round(per_s, 1), "repeat": rep, "note": note}


def print_row(rs: list[Row]) -> None:
    for r in rs:
        print(f"{r['bench']:7s} {r['method']:22s} {r['sample_bytes']:>11d} {r['cache']:14s} {r['GBps']:8.3f} GB/s "
              f"{r['samples_per_s']:>12.0f}/s {r['note']}", flush=True)


# ---- loader -------------------------------------------------------------------------

class _RowDataset:
    """torch Dataset: one h5py.File per worker, opened lazily in the worker."""

    def __init__(self, path: str):
        self.path, self.f = path, None

    def __len__(self) -> int:
        with h5py.File(self.path, "r") as f:
            return int(f["x"].shape[0])

    def __getitem__(self, i: int) -> Any:
        import torch
        if self.f is None:
            self.f = h5py.File(self.path, "r")
        return torch.from_numpy(self.f["x"][i])


def ceiling_seconds(path: Path, direct: bool, threads: int, sample: int, offsets: np.ndarray) -> float:
    """Seconds `threads` threads take to pread `sample` bytes at each of
    `offsets` (uint64) of `path` (O_DIRECT when `direct`): the ceilings."""
    secs, err = ctypes.c_double(), errbuf()
    rc = native.h5gds_py_ceiling_pread(str(path).encode(), int(direct), threads, sample, len(offsets),
                                       offsets.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                       ctypes.byref(secs), err, len(err))
    if rc != 0:
        raise OSError(-rc, err.value.decode())
    return secs.value


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


def bench_loader(args: argparse.Namespace, dev: Device, rows: list[Row]) -> None:
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
            ds = _RowDataset(str(path))
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
            bench_loader_train(args, dev, rows, loader, path, sample, bsz)
        loader.close()


class _Compute:
    """A training step's compute: a GPU kernel that spins for `ms` of wall
    time on the current stream (the GPU's global timer, so clock changes
    between runs do not change the step; host: a sleep), then a read of the
    batch, then a synchronisation (as `loss.item()` does)."""

    def __init__(self, dev: Device, ms: float):
        self.dev, self.ms = dev, ms
        if dev.name == "numpy":
            return
        try:
            import cupy as cp  # the kernel; it runs on the current stream of either library
        except ImportError:  # torch alone: its sleep kernel counts clock cycles, calibrated here
            probe = 50_000_000
            dev.torch.cuda._sleep(probe)
            dev.sync()
            t = timed(lambda: dev.torch.cuda._sleep(probe), dev)
            cycles = int(probe * (ms / 1e3) / t)
            self.spin = lambda: dev.torch.cuda._sleep(cycles)
            return
        kern = cp.RawKernel(r'''extern "C" __global__ void spin(unsigned long long ns) {
                unsigned long long t0, t;
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
                do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
            }''', "spin")
        stream = (lambda: dev.torch.cuda.current_stream().cuda_stream) if dev.name == "torch" else \
            (lambda: cp.cuda.get_current_stream().ptr)
        ns = np.uint64(ms * 1e6)
        self.spin = lambda: kern((1,), (1,), (ns,), stream=cp.cuda.ExternalStream(stream()))
        self.spin()  # compile
        dev.sync()

    def step(self, batch: Any) -> None:
        if self.dev.name == "numpy":
            time.sleep(self.ms / 1e3)
            return
        self.spin()
        x = batch[0] if isinstance(batch, tuple) else batch
        float(x[0, :64].sum()) if self.dev.name == "cupy" else float(x[0, :64].float().sum())


def bench_loader_train(args: argparse.Namespace, dev: Device, rows: list[Row], loader: Any, path: Path,
                       sample: int, bsz: int) -> None:
    """Loader overhead in a training loop: an epoch of --train-batches steps
    of --train-step-ms compute each, fed by the loader, against the same
    steps on one batch already on the device (compute only). The epoch time
    includes waiting for the first batch."""
    nb = min(args.train_batches, len(loader)) if args.train_batches > 0 else len(loader)
    compute = _Compute(dev, args.train_step_ms)
    consume = bsz * sample / (args.train_step_ms / 1e3)
    first = next(iter(loader))
    for rep in range(args.repeat):
        t_compute = timed(lambda: [compute.step(first) for _ in range(nb)], dev)
        rows.append(row("loader-train", "compute-only", sample, "-", nb * bsz * sample / t_compute,
                        nb * bsz / t_compute, rep, f"{nb} steps of {args.train_step_ms:g} ms"))
        print_row(rows[-1:])
        for cache in ("cold", "warm"):
            note = drop_cache(path) if cache == "cold" else ""
            if cache == "warm":
                warm(path)

            in_next = [0.0]

            def epoch() -> None:
                it = iter(loader)
                for _ in range(nb):
                    t0 = time.perf_counter()
                    batch = next(it)
                    in_next[0] += time.perf_counter() - t0
                    compute.step(batch)
                it.close()

            t = timed(epoch, dev)
            over = (t / t_compute - 1) * 100
            rows.append(row("loader-train", "h5gds-loader", sample, cache, nb * bsz * sample / t, nb * bsz / t, rep,
                            f"{note + ', ' if note else ''}epoch {t:.3f} s vs compute-only {t_compute:.3f} s: "
                            f"{over:+.1f}%; consumption {consume / 1e9:.3f} GB/s; in next() "
                            f"{in_next[0] * 1e3:.0f} ms"))
            rows[-1]["overhead_pct"] = round(over, 2)
            print_row(rows[-1:])


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


def whole_vs_c(medians: list[Row]) -> None:
    """Python API / C benchmark, GDS, same run (the goal: within 10%)."""
    c = {(m["sample_bytes"], m["cache"]): m["GBps"] for m in medians
         if m["bench"] == "whole" and m["method"] == "c-h5gds-bench-gds"}
    for m in medians:
        key = (m["sample_bytes"], m["cache"])
        if m["bench"] == "whole" and m["method"] == "h5gds" and c.get(key):
            print(f"whole {m['sample_bytes'] >> 20} MiB {m['cache']}: Python {m['GBps']:.3f} / C {c[key]:.3f} GB/s "
                  f"= {m['GBps'] / c[key]:.2f}", flush=True)


def median_rows(rows: list[Row]) -> list[Row]:
    """One row per (bench, method, size, cache): the median over repeats."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        groups.setdefault((r["bench"], r["method"], r["sample_bytes"], r["cache"]), []).append(r)
    out = []
    for (bench, method, sample, cache), rs in groups.items():
        gb = [r["GBps"] for r in rs]
        med = float(np.median(gb)) if gb else float("nan")
        m: Row = {"bench": bench, "method": method, "sample_bytes": sample, "cache": cache, "GBps": round(med, 4),
                  "samples_per_s": round(float(np.median([r["samples_per_s"] for r in rs])), 1),
                  "repeats": len(rs), "note": rs[len(rs) // 2]["note"]}
        over = [r["overhead_pct"] for r in rs if "overhead_pct" in r]
        if over:
            m["overhead_pct"] = round(float(np.median(over)), 2)
        out.append(m)
    return out


def plot(rows: list[Row], png: Path) -> None:
    groups = sorted({(r["bench"], r["cache"]) for r in rows if r["cache"] != "-"})
    if not groups:  # only skipped methods (or none): no figure, not an error
        print("plot skipped: no measurements to plot", flush=True)
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib not importable", flush=True)
        return
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, 3.2 * len(groups)), squeeze=False)
    for ax, (bench, cache) in zip(axes[:, 0], groups):
        sel = [r for r in rows if r["bench"] == bench and r["cache"] == cache]
        methods = sorted({r["method"] for r in sel})
        sizes = sorted({r["sample_bytes"] for r in sel})
        w = 0.8 / max(1, len(methods))
        for k, m in enumerate(methods):
            ys = [np.median([r["GBps"] for r in sel if r["method"] == m and r["sample_bytes"] == s] or [0])
                  for s in sizes]
            ax.bar(np.arange(len(sizes)) + k * w, ys, w, label=m)
        ax.set_xticks(np.arange(len(sizes)) + 0.4 - w / 2, [f"{s >> 10} KiB" if s < 1 << 20 else f"{s >> 20} MiB"
                                                             for s in sizes])
        ax.set_ylabel("GB/s")
        ax.set_title(f"{bench}: {cache}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"plot: {png}", flush=True)


PARTS = ("whole", "loader", "loader-train", "checkpoint", "train-loop")
LOADER_METHODS = ("h5gds-loader", "h5py-fancy", "torch-dataloader-h5py", "kvikio-pread", "ceiling-odirect",
                  "ceiling-buffered", "ceiling-h2d")
# The method names of h5gds.bench.checkpoint (its checkpoint and train-loop parts).
CHECKPOINT_METHODS = ("floor-d2h", "floor-d2d", "h5gds-async", "h5gds-sync", "torch.save", "safetensors", "h5py",
                      "dcp.save", "dcp.async_save", "no-checkpoint")


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (what is wrong), exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (--help for usage)\n")


def _size_arg(text: str) -> int:
    """argparse type: one positive size (h5gds._sizes syntax)."""
    try:
        n = parse_size(text)
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n == 0:
        raise argparse.ArgumentTypeError(f"size {text!r} must be more than 0 bytes")
    return n


def _size_list_arg(text: str) -> list[int]:
    """argparse type: a comma list of positive sizes."""
    return [_size_arg(item) for item in text.split(",")]


def _int_arg(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is less than {minimum}")
        return n
    return parse


def _ms_arg(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of milliseconds")
    return v


def _check_args(p: _Parser, args: argparse.Namespace) -> None:
    """What argparse's types cannot see: names in lists, values together,
    directories, the configuration string. Each problem: one line, exit 2."""
    parts = args.parts.split(",")
    bad = [x for x in parts if x not in PARTS]
    if bad:
        p.error(f"argument parts: unknown part {bad[0]!r} (a comma list of {', '.join(PARTS)})")
    args.methods = [m for m in args.methods.split(",") if m]
    known = LOADER_METHODS + CHECKPOINT_METHODS
    for m in args.methods:
        if m not in known and not m.startswith("ceiling"):
            p.error(f"argument --methods: unknown method {m!r} (loader: {', '.join(LOADER_METHODS)}; checkpoint: "
                    f"{', '.join(CHECKPOINT_METHODS)})")
    if any(x in ("checkpoint", "train-loop") for x in parts):
        from .checkpoint import STATES
        for st in args.states.split(","):
            if st not in STATES:
                p.error(f"argument --states: unknown state {st!r} ({', '.join(STATES)})")
    if any(x in ("loader", "loader-train") for x in parts):
        big = [s for s in args.samples if s > args.file_size]
        if big:
            p.error(f"argument --samples: a sample of {big[0]} bytes does not fit in --file-size "
                    f"({args.file_size} bytes)")
    if args.c_bench and not os.access(args.c_bench, os.X_OK):
        p.error(f"argument --c-bench: {args.c_bench!r} is not an executable file")
    if args.config:
        from h5gds._io import _set_fapl_gds
        try:  # the driver's own check of the string, as the loader's engine will make it
            _set_fapl_gds(h5py.h5p.create(h5py.h5p.FILE_ACCESS), args.config)
        except ValueError as exc:
            p.error(f"argument --config: {' '.join(str(exc).split())}")
    for name in ("dir", "out"):
        try:
            Path(getattr(args, name)).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            p.error(f"argument --{name}: cannot make directory {getattr(args, name)!r}: {exc.strerror}")


# Benchmarks with options of their own: `python -m h5gds.bench NAME [options]`.
SEPARATE = {"compressed": "h5gds.bench.compressed", "loader-epoch": "h5gds.bench.loader_epoch"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SEPARATE:
        import importlib
        return int(importlib.import_module(SEPARATE[argv[0]]).main(argv[1:]) or 0)
    p = _Parser(prog="python -m h5gds.bench", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("parts", help="a list of whole, loader, loader-train, checkpoint, train-loop "
                                 "(the last two: h5gds.bench.checkpoint); or alone, with options of their own: "
                                 "compressed, loader-epoch (see `python -m h5gds.bench compressed --help`)")
    p.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where the files go (a real disk)")
    p.add_argument("--out", default=os.environ.get("OUT", "."), help="where bench.csv and bench.png go")
    sizes = "; sizes as in the gds configuration: 4096, 64KiB, 8MiB, 1GiB, 1G, 500MB"
    p.add_argument("--sizes", default="256MiB,1GiB,4GiB", type=_size_list_arg, help="whole: dataset sizes" + sizes)
    p.add_argument("--samples", default="4KiB,64KiB,1MiB", type=_size_list_arg, help="loader: sample sizes")
    p.add_argument("--file-size", default="2GiB", type=_size_arg, help="loader: bytes of samples per file")
    p.add_argument("--batch", default="16MiB", type=_size_arg, help="loader: bytes per batch")
    p.add_argument("--read-bytes", default="512MiB", type=_size_arg,
                   help="bytes each loader method reads per cold measurement")
    p.add_argument("--warm-read-bytes", default="2GiB", type=_size_arg,
                   help="bytes each loader method reads per warm measurement (default: the whole 2 GiB file)")
    p.add_argument("--prefetch", type=_int_arg(1), default=4)
    p.add_argument("--config", default="", help="gds configuration keys for the loader's engine")
    p.add_argument("--host", action="store_true", help="host arrays only (checks the benchmark without a GPU)")
    p.add_argument("--repeat", "--repeats", dest="repeat", type=_int_arg(1), default=3,
                   help="repeats of every measurement, interleaved across methods (medians printed and in "
                        "bench-median.csv)")
    p.add_argument("--methods", default="", help="loader, checkpoint: only these methods (comma list; default all)")
    p.add_argument("--c-bench", default="", help="whole: path of the C h5gds-bench, run before the Python methods "
                                                  "for each size and repeat (default: $H5GDS_C_BENCH; none: its "
                                                  "rows say skipped)")
    p.add_argument("--train-batches", type=_int_arg(0), default=0,
                   help="loader-train: batches per epoch (default 0: a whole epoch of the file)")
    p.add_argument("--train-step-ms", type=_ms_arg, default=20.0, help="loader-train: compute per batch (ms)")
    p.add_argument("--steps", type=_int_arg(1), default=360, help="train-loop: steps per run")
    p.add_argument("--every", type=_int_arg(1), default=120, help="train-loop: a checkpoint every this many steps")
    p.add_argument("--step-matmuls", type=_int_arg(0), default=20, help="train-loop: 8192^2 fp16 products per step")
    p.add_argument("--verify", action="store_true", help="checkpoint: load the h5gds checkpoint back and compare")
    p.add_argument("--states", default="fp16,bf16",
                   help="checkpoint: which states (fp16, bf16: 3.13 GiB; 16g: 16.1 GiB fp16, where memory allows)")
    p.add_argument("--loop-repeat", type=_int_arg(1), default=3, help="train-loop: repeats")
    args = p.parse_args(argv)
    _check_args(p, args)
    parts = args.parts.split(",")
    ckpt_parts = [x for x in parts if x in ("checkpoint", "train-loop")]
    if ckpt_parts:
        try:
            import torch
            gpu = torch.cuda.is_available()
        except ImportError as exc:
            raise SystemExit(f"h5gds.bench {','.join(ckpt_parts)}: needs PyTorch and a CUDA GPU ({exc})") from None
        if not gpu:
            raise SystemExit(f"h5gds.bench {','.join(ckpt_parts)}: needs a CUDA GPU (torch sees none)")
        from . import checkpoint
        checkpoint.run(ckpt_parts, args)
        parts = [x for x in parts if x not in ckpt_parts]
        if not parts:
            return 0
    dev = Device(args.host)
    rows: list[Row] = []
    print(f"h5gds {h5gds.__version__}, HDF5 {h5gds.hdf5_version}, arrays: {dev.name}, files in {args.dir}", flush=True)
    # loader-train runs inside the loader part (same files); alone, it runs
    # the loader's setup with no loader methods
    args.loader_parts = [x for x in parts if x in ("loader", "loader-train")]
    if args.loader_parts:
        parts = [x for x in parts if x not in ("loader", "loader-train")] + ["loader"]
        if "loader-train" in args.loader_parts:
            args.loader_parts.append("train")
    try:
        for part in parts:
            {"whole": bench_whole, "loader": bench_loader}[part](args, dev, rows)
    finally:
        csv_path = Path(args.out) / "bench.csv"
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["bench", "method", "sample_bytes", "cache", "GBps", "samples_per_s",
                                              "repeat", "note", "overhead_pct"])
            w.writeheader()
            w.writerows(rows)
        print(f"csv: {csv_path}", flush=True)
        medians = median_rows(rows)
        with open(Path(args.out) / "bench-median.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["bench", "method", "sample_bytes", "cache", "GBps", "samples_per_s",
                                              "repeats", "note", "overhead_pct"])
            w.writeheader()
            w.writerows(medians)
        print("medians:", flush=True)
        print_row([{**m, "repeat": 0} for m in medians])
        whole_vs_c(medians)
        if rows:
            plot(rows, Path(args.out) / "bench.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
