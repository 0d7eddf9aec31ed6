#!/usr/bin/env python3
"""Where a GPU-decoded read loses time against min(disk x ratio, decode)
(cold) or the decode alone (warm): the same files read by h5gds.read under
several settings, interleaved (A, B, C, A, B, C, ...), each row with the
read's decode statistics (decode seconds, seconds waiting for stored
bytes), beside the read ceilings of the same file (cold: O_DIRECT; warm:
the page cache into host memory). A diagnostic, not a benchmark of record
(GPU machine, CuPy, root for drop_caches).

    python3 bench/tools/compressed-read-ab.py --dir D --out DIR \\
        --files image:lz4,field:gzip-shuffle --size 1GiB --repeat 2 --cache cold,warm \\
        --variants "default;H5GDS_CONFIG=direct=on;H5GDS_DECODE_BATCH_MIB=128"

`--chunks 1,8,64` reads, instead of the whole dataset, its first 1, 8 and
64 chunks along the first axis (small reads: their latency, medians in the
CSV's `chunks` column).

Variants are separated by `;`; each is `default` or NAME=VALUE
environment settings joined by `+`, applied for its reads only (the
library reads H5GDS_CONFIG at each file open, H5GDS_DECODE_BATCH_MIB at
each read).
"""
from __future__ import annotations

import os
import time

import numpy as np

import h5py

import h5gds
from h5gds._sizes import parse_size
from h5gds.bench._common import ceiling_seconds, drop_cache, warm
from h5gds.bench.compressed import write_dataset

from ab_variants import applied, folders_and_files, parser, variants_of, write_csv


def main() -> None:
    import cupy

    ap = parser(__doc__, "/tmp/h5gds-read-ab", "image:lz4,field:gzip-shuffle", 2,
                "default;H5GDS_CONFIG=direct=on;H5GDS_DECODE_BATCH_MIB=128")
    ap.add_argument("--cache", default="cold", help="cold, warm or cold,warm")
    ap.add_argument("--chunks", default="0", help="chunks read from the start, e.g. 1,8,64 (0: the whole dataset)")
    args = ap.parse_args()
    counts = [int(c) for c in args.chunks.split(",")]
    work, out, pairs = folders_and_files(args)
    variants = variants_of(args.variants)
    rows = []
    for kind, fname in pairs:
        path = work / f"ab-{kind}-{fname}.h5"
        ratio = write_dataset(path, kind, fname, parse_size(args.size))
        if ratio is None:
            print(f"# {fname}: hdf5plugin not installed, skipped", flush=True)
            continue
        with h5py.File(path, "r", driver="gds") as f:  # untimed: the codecs' start and first device buffers
            h5gds.read(f["x"], like="cupy")
            decoded = f["x"].size * f["x"].dtype.itemsize
        stored = os.path.getsize(path)
        block = 16 << 20
        offsets = np.arange(0, stored // block * block, block, dtype=np.uint64)
        for rep in range(args.repeat):
            for cache in args.cache.split(","):
                prepare = (lambda: drop_cache(path)) if cache == "cold" else (lambda: warm(path))
                prepare()
                secs = ceiling_seconds(path, cache == "cold", 16, block, offsets)
                ceiling = "ceiling-odirect" if cache == "cold" else "ceiling-page-cache"  # warm: buffered preads
                row = dict(data=kind, filter=fname, ratio=f"{ratio:.2f}", cache=cache, variant=ceiling,
                           rep=rep, chunks="", GBps=f"{len(offsets) * block / secs / 1e9:.3f}", ms="", decode_s="",
                           read_wait_s="", total_s="")
                rows.append(row)
                print(row, flush=True)
                for v in variants:
                    for count in counts:
                        with applied(v):
                            prepare()
                            with h5py.File(path, "r", driver="gds") as f:
                                d = f["x"]
                                sel = (slice(0, count * d.chunks[0]),) if count else ()
                                part = d.shape[0] if not count else min(d.shape[0], count * d.chunks[0])
                                nbytes = decoded // d.shape[0] * part
                                t0 = time.perf_counter()
                                x = h5gds.read(d, sel, like="cupy") if count else h5gds.read(d, like="cupy")
                                cupy.cuda.runtime.deviceSynchronize()
                                secs = time.perf_counter() - t0
                                st = h5gds.last_decode_stats()
                                route = h5gds.last_route()
                            del x
                        row = dict(data=kind, filter=fname, ratio=f"{ratio:.2f}", cache=cache,
                                   variant=f"{v} ({route})", rep=rep, chunks=count or "all",
                                   GBps=f"{nbytes / secs / 1e9:.3f}", ms=f"{1e3 * secs:.2f}",
                                   decode_s=f"{st.decode_s:.4f}", read_wait_s=f"{st.read_wait_s:.4f}",
                                   total_s=f"{st.total_s:.4f}")
                        rows.append(row)
                        print(row, flush=True)
        path.unlink()
    write_csv(out / "compressed-read-ab.csv", rows)


if __name__ == "__main__":
    main()
