#!/usr/bin/env python3
"""Latency of small reads of compressed datasets into device memory: reads
of 1, 2 and 8 whole 1 MiB chunks (warm), decoded by CPU threads (the
default for reads this small) and by the GPU (H5GDS_HOST_DECODE_THREADS=0),
interleaved. CSV: data,filter,chunks,variant,median_ms,min_ms. A
diagnostic (GPU machine, CuPy).

    python3 bench/tools/small-read-latency.py --dir /tmp/h5gds-small --repeat 20
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import h5py

import h5gds
from h5gds.bench.compressed import write_dataset


def main() -> None:
    import cupy

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp/h5gds-small")
    ap.add_argument("--files", default="image:gzip-shuffle,field:gzip-shuffle,image:zstd,field:zstd")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    print("data,filter,chunks,variant,median_ms,min_ms", flush=True)
    for spec in args.files.split(","):
        kind, fname = spec.split(":")
        path = folder / f"{kind}-{fname}.h5"
        if not path.exists():
            write_dataset(path, kind, fname, 64 << 20)
        with h5py.File(path, "r", driver="gds") as f:
            d = f["x"]
            rows = d.chunks[0]
            h5gds.read(d, (slice(0, rows),))  # untimed: codecs loaded, buffers made
            for nchunks in (1, 2, 8):
                times: dict[str, list[float]] = {"cpu": [], "gpu": []}
                for rep in range(args.repeat):
                    for variant in ("cpu", "gpu"):
                        if variant == "gpu":
                            os.environ["H5GDS_HOST_DECODE_THREADS"] = "0"
                        else:
                            os.environ.pop("H5GDS_HOST_DECODE_THREADS", None)
                        lo = (rep % 8) * 8 * rows
                        t0 = time.perf_counter()
                        h5gds.read(d, (slice(lo, lo + nchunks * rows),))
                        cupy.cuda.runtime.deviceSynchronize()
                        times[variant].append(time.perf_counter() - t0)
                os.environ.pop("H5GDS_HOST_DECODE_THREADS", None)
                for variant, ts in times.items():
                    print(f"{kind},{fname},{nchunks},{variant},{1e3 * float(np.median(ts)):.2f},"
                          f"{1e3 * min(ts):.2f}", flush=True)


if __name__ == "__main__":
    main()
