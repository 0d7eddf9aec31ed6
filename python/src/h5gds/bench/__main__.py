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
import os
import sys
from pathlib import Path

import h5py

import h5gds

from . import loader, whole
from ._common import Parser, Row, int_arg, ms_arg, plot, size_arg, size_list_arg, write_csv
# drop_cache is handed to the benchmarks from here at each run, so that a
# caller may replace it in this module (the tests do, keeping the machine's
# page cache); the tests also take fadvise_dontneed and row from here.
from ._common import drop_cache, fadvise_dontneed, row  # noqa: F401
from ._device import Device

PARTS = ("whole", "loader", "loader-train", "checkpoint", "train-loop")
LOADER_METHODS = ("h5gds-loader", "h5py-fancy", "torch-dataloader-h5py", "kvikio-pread", "ceiling-odirect",
                  "ceiling-buffered", "ceiling-h2d")
# The method names of h5gds.bench.checkpoint (its checkpoint and train-loop parts).
CHECKPOINT_METHODS = ("floor-d2h", "floor-d2d", "h5gds-async", "h5gds-sync", "torch.save", "safetensors", "h5py",
                      "dcp.save", "dcp.async_save", "no-checkpoint")


def _check_args(p: Parser, args: argparse.Namespace) -> None:
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
    p = Parser(prog="python -m h5gds.bench", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("parts", help="a list of whole, loader, loader-train, checkpoint, train-loop "
                                 "(the last two: h5gds.bench.checkpoint); or alone, with options of their own: "
                                 "compressed, loader-epoch (see `python -m h5gds.bench compressed --help`)")
    p.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where the files go (a real disk)")
    p.add_argument("--out", default=os.environ.get("OUT", "."), help="where bench.csv and bench.png go")
    sizes = "; sizes as in the gds configuration: 4096, 64KiB, 8MiB, 1GiB, 1G, 500MB"
    p.add_argument("--sizes", default="256MiB,1GiB,4GiB", type=size_list_arg, help="whole: dataset sizes" + sizes)
    p.add_argument("--samples", default="4KiB,64KiB,1MiB", type=size_list_arg, help="loader: sample sizes")
    p.add_argument("--file-size", default="2GiB", type=size_arg, help="loader: bytes of samples per file")
    p.add_argument("--batch", default="16MiB", type=size_arg, help="loader: bytes per batch")
    p.add_argument("--read-bytes", default="512MiB", type=size_arg,
                   help="bytes each loader method reads per cold measurement")
    p.add_argument("--warm-read-bytes", default="2GiB", type=size_arg,
                   help="bytes each loader method reads per warm measurement (default: the whole 2 GiB file)")
    p.add_argument("--prefetch", type=int_arg(1), default=4)
    p.add_argument("--config", default="", help="gds configuration keys for the loader's engine")
    p.add_argument("--host", action="store_true", help="host arrays only (checks the benchmark without a GPU)")
    p.add_argument("--repeat", "--repeats", dest="repeat", type=int_arg(1), default=3,
                   help="repeats of every measurement, interleaved across methods (medians printed and in "
                        "bench-median.csv)")
    p.add_argument("--methods", default="", help="loader, checkpoint: only these methods (comma list; default all)")
    p.add_argument("--c-bench", default="", help="whole: path of the C h5gds-bench, run before the Python methods "
                                                  "for each size and repeat (default: $H5GDS_C_BENCH; none: its "
                                                  "rows say skipped)")
    p.add_argument("--train-batches", type=int_arg(0), default=0,
                   help="loader-train: batches per epoch (default 0: a whole epoch of the file)")
    p.add_argument("--train-step-ms", type=ms_arg, default=20.0, help="loader-train: compute per batch (ms)")
    p.add_argument("--steps", type=int_arg(1), default=360, help="train-loop: steps per run")
    p.add_argument("--every", type=int_arg(1), default=120, help="train-loop: a checkpoint every this many steps")
    p.add_argument("--step-matmuls", type=int_arg(0), default=20, help="train-loop: 8192^2 fp16 products per step")
    p.add_argument("--verify", action="store_true", help="checkpoint: load the h5gds checkpoint back and compare")
    p.add_argument("--states", default="fp16,bf16",
                   help="checkpoint: which states (fp16, bf16: 3.13 GiB; 16g: 16.1 GiB fp16, where memory allows)")
    p.add_argument("--loop-repeat", type=int_arg(1), default=3, help="train-loop: repeats")
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
            {"whole": whole.run, "loader": loader.run}[part](args, dev, rows, drop_cache)
    finally:
        medians = write_csv(rows, Path(args.out))
        whole.compare_with_c(medians)
        if rows:
            plot(rows, Path(args.out) / "bench.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
