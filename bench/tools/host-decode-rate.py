#!/usr/bin/env python3
"""How fast the host's CPU threads decode the compressed benchmark's chunks
(warm, in memory): zlib (HDF5's deflate, level 1, after a byte shuffle) and
zstd (level 1, no shuffle, through the system's libzstd when present), by thread count.
Prints CSV: codec,data,ratio,threads,GBps (decoded bytes). The answer says
how much of a cold read's last stretch the CPU could decode while the GPU's
decode of the batch before it runs.

    python3 bench/tools/host-decode-rate.py --size 256MiB --threads 1,4,8,16
"""
from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import ctypes.util
import time
import zlib
from typing import Callable

import numpy as np

from h5gds._sizes import parse_size
from h5gds.bench.compressed import CHUNK_BYTES, dataset_shape, make_rows


def chunks(kind: str, nbytes: int, shuffle: bool) -> list[bytes]:
    dtype, nrows, width, rows_per_chunk = dataset_shape(kind, nbytes)
    rng = np.random.default_rng(7)
    out = []
    for r in range(0, nrows, rows_per_chunk):
        a = make_rows(kind, r, rows_per_chunk, width, rng)
        b = a.view(np.uint8).reshape(-1, dtype.itemsize)
        out.append((b.T if shuffle else b).tobytes())  # HDF5's shuffle: the benchmark's gzip has it
    return out


def zstd_lib() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("zstd") or "libzstd.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    lib.ZSTD_compress.restype = ctypes.c_size_t
    lib.ZSTD_compress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
    return lib


def zlib_decode(b: bytes) -> None:
    zlib.decompress(b)


def rate(decode: Callable[[bytes], None], chunks: list[bytes], threads: int) -> float:
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(decode, chunks[:threads]))  # threads started, code paths warm
        best = 0.0
        for _ in range(3):
            t0 = time.perf_counter()
            list(pool.map(decode, chunks))
            best = max(best, len(chunks) * CHUNK_BYTES / (time.perf_counter() - t0) / 1e9)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--threads", default="1,4,8,16")
    ap.add_argument("--data", default="field,image")
    args = ap.parse_args()
    nbytes = parse_size(args.size)
    threads = [int(t) for t in args.threads.split(",")]
    zstd = zstd_lib()
    print("codec,data,ratio,threads,GBps", flush=True)
    for kind in args.data.split(","):
        raw = chunks(kind, nbytes, shuffle=True)
        codecs: dict[str, tuple[list[bytes], Callable[[bytes], None]]] = {}
        codecs["zlib1"] = ([zlib.compress(c, 1) for c in raw], zlib_decode)
        if zstd is not None:
            lib = zstd
            cap = lib.ZSTD_compressBound(CHUNK_BYTES)
            comp = []
            for c in chunks(kind, nbytes, shuffle=False):  # the benchmark's zstd: no shuffle
                dst = ctypes.create_string_buffer(cap)
                n = lib.ZSTD_compress(dst, cap, c, len(c), 1)
                comp.append(dst.raw[:n])

            def zstd_decode(b: bytes) -> None:
                dst = ctypes.create_string_buffer(CHUNK_BYTES)
                if lib.ZSTD_decompress(dst, CHUNK_BYTES, b, len(b)) != CHUNK_BYTES:
                    raise RuntimeError("zstd decode")
            codecs["zstd1"] = (comp, zstd_decode)
        for name, (comp, decode) in codecs.items():
            ratio = len(raw) * CHUNK_BYTES / sum(len(c) for c in comp)
            for t in threads:
                print(f"{name},{kind},{ratio:.2f},{t},{rate(decode, comp, t):.2f}", flush=True)


if __name__ == "__main__":
    main()
