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

# This module reads the command line and runs the parts; the parts live in
# loader_epoch_measure.py (epoch), loader_epoch_train.py (train) and
# loader_epoch_randomness.py (randomness), on the files and readers of
# loader_epoch_files.py, writing rows through loader_epoch_rows.py.
import argparse
import os
import sys
from pathlib import Path

import h5gds

from .._sizes import SizeError, parse_size
from . import loader_epoch_rows as _rows
from ._device import Device
from .loader_epoch_measure import bench_epoch
# generated_dataset, accuracy_orders, accuracy_runs: also used from here by the tests
from .loader_epoch_randomness import (accuracy_orders, accuracy_runs, generated_dataset,  # noqa: F401
                                      randomness_accuracy, randomness_stats)
from .loader_epoch_rows import FIELDS, Row, median_rows, write_csv  # noqa: F401
from .loader_epoch_train import bench_train


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


# ---- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    _rows._ROWS[:] = [rows]
    _rows._CSV_OUT[:] = [Path(args.out) / "loader-epoch.csv"]
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
