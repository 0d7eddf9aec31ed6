"""The training-loop epoch of h5gds.bench.loader_epoch (part train): a
cold epoch of the --train-sample file with --train-step-ms of compute per
step, through each reader, beside compute alone."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import _common as common
from .loader_epoch_files import _dataloader, make_loader, sample_file
from .loader_epoch_rows import Row, print_row, row
from .loader_train import StepCompute


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
        t_compute = common.timed(lambda: compute.steps(step_input(first), steps), dev)
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
