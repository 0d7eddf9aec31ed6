#!/usr/bin/env python3
"""Where a warm loader batch's time goes (GPU machine, CuPy): the loader's
rate at several prefetch depths and read lengths, the engine alone (reads
into pinned slots, no device copy), the device copies alone, the time the
caller spends in next(), and a cProfile of one run. A diagnostic for the
loader's warm figures, not a benchmark of record.
    python3 bench/tools/loader-profile.py [--dir D] [--samples 64KiB,1MiB] [--out DIR]
    python3 bench/tools/loader-profile.py --cold [--config threads=32]   # cold rates beside the O_DIRECT ceiling
(H5GDS_TEST_LOOKAHEAD=<pieces>,<bytes> sets the engine's read-ahead depth per worker.)
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
from pathlib import Path

import numpy as np

import h5py

import h5gds
from h5gds._sizes import parse_size as size
from h5gds.bench._common import warm
from h5gds.bench.loader import make_sample_file


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/h5gds-profile")
    ap.add_argument("--samples", default="64KiB,1MiB")
    ap.add_argument("--out", default=".")
    ap.add_argument("--cold", action="store_true", help="cold rates only, beside the O_DIRECT ceiling")
    ap.add_argument("--config", default="")
    ap.add_argument("--train", action="store_true",
                    help="a training loop (20 ms GPU step, then a sync as loss.item() does): where next() spends time")
    args = ap.parse_args()
    if args.cold:
        cold(args)
        return
    if args.train:
        train(args)
        return
    import cupy as cp
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    batch = 16 << 20
    for sample in [size(s) for s in args.samples.split(",")]:
        path = Path(args.dir) / f"samples-{sample}.h5"
        n = make_sample_file(path, sample, 2 << 30)
        warm(path)
        bsz = batch // sample
        for prefetch in (2, 4, 8):
            for read in (512 << 20, 2 << 30):
                nb = read // batch
                with h5py.File(path, "r") as f:
                    loader = h5gds.Loader(f["x"], bsz, seed=1, like="cupy", prefetch=prefetch, order="exact")
                for rep in range(2):
                    cp.cuda.Device().synchronize()
                    t0 = time.perf_counter()
                    it = iter(loader)
                    in_next = 0.0
                    worst = 0.0
                    for _ in range(nb):
                        a = time.perf_counter()
                        next(it)
                        d = time.perf_counter() - a
                        in_next += d
                        worst = max(worst, d)
                    cp.cuda.Device().synchronize()
                    t = time.perf_counter() - t0
                    it.close()
                    say(f"sample {sample} prefetch {prefetch} read {read >> 20} MiB rep {rep}: {nb * batch / t / 1e9:.2f} GB/s, "
                        f"{t / nb * 1e3:.3f} ms/batch, in next() {in_next / nb * 1e3:.3f} ms/batch (worst {worst * 1e3:.2f})")
                loader.close()
        # the engine alone: numpy batches (host arrays reused), no device copy
        with h5py.File(path, "r") as f:
            loader = h5gds.Loader(f["x"], bsz, seed=1, like="numpy", prefetch=4, order="exact")
        nb = (2 << 30) // batch
        for rep in range(2):
            t0 = time.perf_counter()
            for k, _b in enumerate(loader):
                if k + 1 == nb:
                    break
            t = time.perf_counter() - t0
            say(f"sample {sample} engine only (numpy batches, prefetch 4): {nb * batch / t / 1e9:.2f} GB/s")
        loader.close()
        # the device copies alone: one 16 MiB pinned -> device copy per batch
        host = np.frombuffer(cp.cuda.alloc_pinned_memory(batch), np.uint8, batch)
        dev = cp.empty(batch, cp.uint8)
        s = cp.cuda.Stream(non_blocking=True)
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(nb):
            dev.set(host, stream=s)
        s.synchronize()
        t = time.perf_counter() - t0
        say(f"sample {sample} copies alone: {nb * batch / t / 1e9:.2f} GB/s")
        # a cProfile of one 2 GiB run at prefetch 2
        with h5py.File(path, "r") as f:
            loader = h5gds.Loader(f["x"], bsz, seed=1, like="cupy", prefetch=2, order="exact")
        prof = cProfile.Profile()
        prof.enable()
        it = iter(loader)
        for _ in range(nb):
            next(it)
        cp.cuda.Device().synchronize()
        prof.disable()
        it.close()
        loader.close()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        say(f"== cProfile sample {sample}, {nb} batches, prefetch 2\n{buf.getvalue()}")
    (Path(args.out) / "loader-profile.txt").write_text("\n".join(lines) + "\n")


def train(args: argparse.Namespace) -> None:
    import cupy as cp

    from h5gds.bench._device import Device
    from h5gds.bench.loader_train import StepCompute
    dev = Device()
    compute = StepCompute(dev, 20.0)
    batch = 16 << 20
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    for sample in [size(s) for s in args.samples.split(",")]:
        path = Path(args.dir) / f"samples-{sample}.h5"
        make_sample_file(path, sample, 2 << 30)
        warm(path)
        for prefetch in (2, 4):
            with h5py.File(path, "r") as f:
                loader = h5gds.Loader(f["x"], batch // sample, seed=1, like="cupy", prefetch=prefetch,
                                      config=args.config, order="exact")
            nb = 64
            first = next(iter(loader))
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            for _ in range(nb):
                compute.step(first)
            t_compute = time.perf_counter() - t0
            prof = cProfile.Profile()
            nexts = []
            it = iter(loader)
            t0 = time.perf_counter()
            for _ in range(nb):
                a = time.perf_counter()
                prof.enable()
                b = next(it)
                prof.disable()
                nexts.append(time.perf_counter() - a)
                compute.step(b)
            t = time.perf_counter() - t0
            it.close()
            loader.close()
            nexts.sort()
            print(f"train sample {sample} prefetch {prefetch}: {nb} steps {t:.3f} s vs compute-only {t_compute:.3f} s "
                  f"({(t / t_compute - 1) * 100:+.1f}%); next() median {nexts[nb // 2] * 1e3:.3f} ms, "
                  f"p90 {nexts[nb * 9 // 10] * 1e3:.3f}, max {nexts[-1] * 1e3:.3f}, sum {sum(nexts) * 1e3:.1f} ms",
                  flush=True)
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
            print(buf.getvalue(), flush=True)


def cold(args: argparse.Namespace) -> None:
    import cupy as cp

    from h5gds.bench._common import ceiling_seconds, drop_cache
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    batch, read = 16 << 20, 512 << 20
    setting = f"lookahead {os.environ.get('H5GDS_TEST_LOOKAHEAD', 'default')} config '{args.config}'"
    for sample in [size(s) for s in args.samples.split(",")]:
        path = Path(args.dir) / f"samples-{sample}.h5"
        make_sample_file(path, sample, 2 << 30)
        bsz = batch // sample
        nb = read // batch
        with h5py.File(path, "r") as f:
            base = int(f["x"].id.get_offset())
            loader = h5gds.Loader(f["x"], bsz, seed=1, like="cupy", prefetch=4, config=args.config,
                                  order="exact")
        order = loader.indices()[: nb * bsz]
        offsets = np.ascontiguousarray(base + order.astype(np.uint64) * np.uint64(sample), np.uint64)
        for rep in range(2):
            drop_cache(path)
            t0 = time.perf_counter()
            it = iter(loader)
            for _ in range(nb):
                next(it)
            cp.cuda.Device().synchronize()
            t = time.perf_counter() - t0
            it.close()
            drop_cache(path)
            secs = ceiling_seconds(path, True, 64, sample, offsets)
            print(f"cold sample {sample} {setting} rep {rep}: loader {nb * batch / t / 1e9:.3f} GB/s, "
                  f"O_DIRECT 64 threads {nb * batch / secs / 1e9:.3f} GB/s, ratio {secs / t:.2f}",
                  flush=True)
        loader.close()


if __name__ == "__main__":
    main()
