#!/usr/bin/env python3
"""Where a GPU-compressed write loses time against min(write ceiling x
GPU ratio, compression alone): the same device array written by
h5gds.create_dataset under several settings, interleaved (A, B, C, A, B,
C, ...), each row with the write's encode statistics (compression
seconds, seconds waiting for the stored bytes to be written) beside the
O_DIRECT write ceiling measured just before each round. A diagnostic, not
a benchmark of record (GPU machine, CuPy). H5GDS_CODEC_DEBUG=1 in the
environment adds each batch's timeline to stderr.

    python3 bench/tools/compressed-write-ab.py --dir D --out DIR \\
        --files field:gzip-shuffle,image:zstd --size 1GiB --repeat 3 \\
        --variants "default;H5GDS_DECODE_BATCH_MIB=64;H5GDS_DECODE_BATCH_MIB=128"

Variants are separated by `;`; each is `default` or NAME=VALUE
environment settings joined by `+`, applied for its writes only (the
library reads H5GDS_DECODE_BATCH_MIB and H5GDS_DEFLATE_PIECE_KIB at each
write).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

import h5py

import h5gds
from h5gds._sizes import parse_size
from h5gds.bench._common import ceiling_write_seconds, fsync_path
from h5gds.bench.compressed import dataset_shape, filter_kwargs, make_rows

from ab_variants import applied, folders_and_files, parser, variants_of, write_csv

CEILING_BLOCK = 16 << 20


def host_array(kind: str, nbytes: int) -> tuple[np.ndarray, tuple[int, int]]:
    """The benchmark's data (`make_rows`) in 1 MiB chunks of whole rows."""
    _, nrows, width, rows_per_chunk = dataset_shape(kind, nbytes)
    rng = np.random.default_rng(7)
    return make_rows(kind, 0, nrows, width, rng), (rows_per_chunk, width)


def write_once(path: Path, dev, chunks, kw) -> tuple[float, h5gds.EncodeStats | None, str, int]:
    """One durable write of `dev`: (seconds, encode statistics, route, stored bytes)."""
    if path.exists():
        path.unlink()
    os.sync()
    t0 = time.perf_counter()
    with h5py.File(path, "w", driver="gds") as f:
        h5gds.create_dataset(f, "x", data=dev, chunks=chunks, **kw)
        route = h5gds.last_route()
        stats = h5gds.last_encode_stats()
    fsync_path(path)
    secs = time.perf_counter() - t0
    with h5py.File(path, "r") as f:
        stored = int(f["x"].id.get_storage_size())
    return secs, stats, route, stored


def main() -> None:
    import cupy

    ap = parser(__doc__, "/tmp/h5gds-write-ab", "field:gzip-shuffle,image:gzip-shuffle", 3,
                "default;H5GDS_DECODE_BATCH_MIB=64;H5GDS_DECODE_BATCH_MIB=128")
    args = ap.parse_args()
    work, out, pairs = folders_and_files(args)
    variants = variants_of(args.variants)
    rows = []
    for kind, fname in pairs:
        kw = filter_kwargs(fname)
        if kw is None:
            print(f"# {fname}: hdf5plugin not installed, skipped", flush=True)
            continue
        host, chunks = host_array(kind, parse_size(args.size))
        dev = cupy.asarray(host)
        decoded = host.nbytes
        path = work / f"ab-{kind}-{fname}.h5"
        write_once(path, dev, chunks, kw)  # untimed: the encoder's start, the process's buffers
        for rep in range(args.repeat):
            nblocks = max(1, os.path.getsize(path) // CEILING_BLOCK)
            scratch = path.with_suffix(".ceiling-write")
            os.sync()
            secs = ceiling_write_seconds(scratch, True, 16, CEILING_BLOCK,
                                         np.arange(nblocks, dtype=np.uint64) * np.uint64(CEILING_BLOCK))
            scratch.unlink(missing_ok=True)
            row = dict(data=kind, filter=fname, cache="write", variant="ceiling-odirect-write", rep=rep,
                       GBps=f"{nblocks * CEILING_BLOCK / secs / 1e9:.3f}", file_GBps="", gpu_ratio="", encode_s="",
                       store_wait_s="", total_s="")
            rows.append(row)
            print(row, flush=True)
            for v in variants:
                print(f"# {kind} {fname} repeat {rep} variant {v}", file=sys.stderr, flush=True)
                with applied(v):
                    secs, st, route, stored = write_once(path, dev, chunks, kw)
                row = dict(data=kind, filter=fname, cache="write", variant=f"{v} ({route})", rep=rep,
                           GBps=f"{decoded / secs / 1e9:.3f}", file_GBps=f"{stored / secs / 1e9:.3f}",
                           gpu_ratio=f"{decoded / stored:.3f}" if stored else "",
                           encode_s=f"{st.encode_s:.4f}" if st else "",
                           store_wait_s=f"{st.store_wait_s:.4f}" if st else "",
                           total_s=f"{st.total_s:.4f}" if st else "")
                rows.append(row)
                print(row, flush=True)
        path.unlink(missing_ok=True)
        del dev
    write_csv(out / "compressed-write-ab.csv", rows)


if __name__ == "__main__":
    main()
