"""The `loader-train` benchmark: the loader's overhead in a training loop.
An epoch of --train-batches steps of --train-step-ms GPU compute each, fed
by the loader, against the same steps on one batch already on the device
(compute only); run by loader.py on its files. Rows: bench=loader-train,
column overhead_pct."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import _common
from ._common import Row, print_row, row, timed, warm
from ._device import Device


class StepCompute:
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

    def steps(self, batch: Any, n: int) -> None:
        """`n` steps on one batch (the compute alone)."""
        for _ in range(n):
            self.step(batch)


def run(args: argparse.Namespace, dev: Device, rows: list[Row], loader: Any, path: Path, sample: int, bsz: int,
        drop_cache: Callable[[Path], str] = _common.drop_cache) -> None:
    """Loader overhead in a training loop: an epoch of --train-batches steps
    of --train-step-ms compute each, fed by the loader, against the same
    steps on one batch already on the device (compute only). The epoch time
    includes waiting for the first batch."""
    nb = min(args.train_batches, len(loader)) if args.train_batches > 0 else len(loader)
    compute = StepCompute(dev, args.train_step_ms)
    consume = bsz * sample / (args.train_step_ms / 1e3)
    first = next(iter(loader))
    for rep in range(args.repeat):
        t_compute = timed(lambda: compute.steps(first, nb), dev)
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
