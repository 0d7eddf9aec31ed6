"""Benchmark ``compressed``: chunked, filtered datasets read into device
memory, GB/s of decoded bytes landing on the GPU, cold (page cache
dropped) and warm, side by side in one run:

  h5gds            h5gds.read into a CuPy array (GPU decode where supported)
  h5py             h5py's read (HDF5's CPU filters, hdf5plugin) + cupy.asarray
  cpu16            16 threads: read_direct_chunk + zlib + unshuffle (deflate only)
  nvcomp-decode    the GPU decode alone, chunks already in device memory
                   (H5FD_gds_last_decode_stats of the warm h5gds reads)
  ceiling-odirect  O_DIRECT read of the file, 16 threads (GB/s of file bytes)
  h5gds-raw        the file's bytes read into device memory by h5gds's engine
                   the way h5gds reads stored chunks (O_DIRECT where not
                   cached, pinned staging), no HDF5, no decode: the I/O part
                   of an h5gds read alone (GB/s of file bytes)

Durable writes from device memory (--methods; cache "write", the file
fsync'ed inside the clock):

  h5gds-write            GPU compression (route gpu-encode), direct chunk writes
  nvcomp-compress        the GPU encode alone (cache "device";
                         H5FD_gds_last_encode_stats of the h5gds-write)
  h5py-write             a copy to the host, HDF5's CPU filters
  ceiling-odirect-write  O_DIRECT writes of as many bytes as the compressed
                         file has (16 MiB blocks, 16 threads, fallocate and
                         fsync inside the clock; GB/s of file bytes)

The h5gds reads are timed after one untimed read of the whole dataset per
file (the GPU codecs' one-time start: nvCOMP loaded, kernels compiled; the
process's first device buffers: 0.6-0.85 s for a process's first file on an
H200, printed as a comment), the h5gds writes after
one untimed write of the same data (the process's encode buffers and every
I/O worker's pinned staging allocated). Filters: gzip-shuffle,
zstd (level 1), zstd6 (level 6), lz4, bitshuffle-lz4, bitshuffle-zstd,
blosc-lz4, blosc-zstd (all but gzip need hdf5plugin). CSV columns: bench,method,data,filter,ratio,cache,
GBps,repeat; OUT/compressed.png: the medians as bars (with matplotlib;
``--plot CSV`` redraws it and the summary from a CSV);
OUT/compressed-summary.md: the goals' ratios from the medians
(reads: cold h5gds / min(ceiling-odirect cold x ratio, nvcomp-decode), warm
h5gds / nvcomp-decode, h5gds / h5py, h5gds / cpu16; writes: h5gds-write /
min(ceiling-odirect-write x the ratio the GPU compression reached,
nvcomp-compress)). The h5gds-write and h5py-write rows carry the ratio of
the file each wrote. ``--parts loader``
(or reads,loader) adds loader epochs over compressed samples
(h5gds.bench.compressed_loader: compressed-loader.csv).

    python -m h5gds.bench compressed --size 1GiB --repeat 3 --out DIR
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable

import h5py
import numpy as np

import h5gds
from h5gds._sizes import SizeError, parse_size

CHUNK_BYTES = 1 << 20
COLUMNS = ["bench", "method", "data", "filter", "ratio", "cache", "GBps", "repeat"]
READ_METHODS = ("h5gds", "h5py", "cpu16", "nvcomp-decode", "ceiling-odirect", "h5gds-raw")
WRITE_METHODS = ("h5gds-write", "nvcomp-compress", "h5py-write", "ceiling-odirect-write")
GPU_ENCODE_ROUTE = "gpu-encode"  # H5FD_gds_route_name of a write compressed on the GPU
CEILING_BLOCK = 16 << 20  # the O_DIRECT ceilings: 16 MiB blocks from 16 threads
CEILING_THREADS = 16


# The codec statistics through module names of their own: the tests replace them.
def last_decode_stats() -> h5gds.DecodeStats:
    return h5gds.last_decode_stats()


def last_encode_stats() -> h5gds.EncodeStats:
    return h5gds.last_encode_stats()


# ---- data that compresses like real data does (never zeros) ----

def make_rows(kind: str, row0: int, nrows: int, width: int, rng: np.random.Generator) -> np.ndarray:
    i = np.arange(row0, row0 + nrows, dtype=np.float32)[:, None]
    j = np.arange(width, dtype=np.float32)[None, :]
    if kind == "field":  # smooth simulation field, 3 decimals kept
        f = np.sin(i * 0.002) * np.cos(j * 0.013) + 0.3 * np.sin((i + j) * 0.0007)
        f = f + rng.normal(0, 0.0005, f.shape).astype(np.float32)
        return np.round(f, 3).astype(np.float32)
    if kind == "image":  # image tiles: smooth shading, flat regions, sensor noise on a few pixels
        base = (np.sin(i * 0.01) * 60 + np.cos(j * 0.02) * 60 + 128).astype(np.int32) // 4 * 4
        noise = rng.integers(-2, 3, base.shape) * (rng.random(base.shape) < 0.04)
        return np.clip(base + noise, 0, 255).astype(np.uint8)
    if kind == "labels":  # sparse segmentation labels
        a = np.zeros((nrows, width), np.int32)
        m = rng.random((nrows, width)) < 0.04
        a[m] = rng.integers(1, 30, int(m.sum()))
        return a
    raise ValueError(kind)


DTYPES = {"field": np.float32, "image": np.uint8, "labels": np.int32}


def filter_kwargs(name: str) -> dict[str, Any] | None:
    if name == "gzip-shuffle":
        return dict(compression="gzip", compression_opts=1, shuffle=True)
    try:
        import hdf5plugin
    except ImportError:
        return None
    return {"zstd": lambda: dict(**hdf5plugin.Zstd(clevel=1)),
            "zstd6": lambda: dict(**hdf5plugin.Zstd(clevel=6)),  # GPU writes: 128 KiB pieces (zstd 1: 32 KiB)
            "lz4": lambda: dict(**hdf5plugin.LZ4()),
            "bitshuffle-lz4": lambda: dict(**hdf5plugin.Bitshuffle(cname="lz4")),
            "bitshuffle-zstd": lambda: dict(**hdf5plugin.Bitshuffle(cname="zstd")),
            "blosc-lz4": lambda: dict(**hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE)),
            "blosc-zstd": lambda: dict(**hdf5plugin.Blosc(cname="zstd", clevel=1,
                                                          shuffle=hdf5plugin.Blosc.SHUFFLE))}[name]()


def dataset_shape(kind: str, nbytes: int) -> tuple[np.dtype[Any], int, int, int]:
    """(dtype, rows, row width, rows a chunk) of about `nbytes` of `kind` in
    1 MiB chunks of whole rows."""
    dtype = np.dtype(DTYPES[kind])
    width = 1024 if dtype.itemsize >= 4 else 4096
    rows_per_chunk = CHUNK_BYTES // (width * dtype.itemsize)
    nrows = max(rows_per_chunk, nbytes // (width * dtype.itemsize) // rows_per_chunk * rows_per_chunk)
    return dtype, nrows, width, rows_per_chunk


def write_dataset(path: Path, kind: str, fname: str, nbytes: int) -> float | None:
    """Writes `path` (dataset "x", 1 MiB chunks); returns its ratio."""
    kw = filter_kwargs(fname)
    if kw is None:
        return None
    dtype, nrows, width, rows_per_chunk = dataset_shape(kind, nbytes)
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(nrows, width), dtype=dtype, chunks=(rows_per_chunk, width), **kw)
        step = rows_per_chunk * 64
        for r in range(0, nrows, step):
            n = min(step, nrows - r)
            d[r:r + n] = make_rows(kind, r, n, width, rng)
    stored = os.path.getsize(path)
    return nrows * width * dtype.itemsize / stored


# ---- methods ----

def cpu16_read(path: Path) -> np.ndarray:
    """deflate(+shuffle) chunks decoded by 16 threads (zlib frees the GIL)."""
    with h5py.File(path, "r") as f:
        d = f["x"]
        out = np.empty(d.shape, d.dtype)
        rows = d.chunks[0]
        esize = d.dtype.itemsize
        shuffled = d.shuffle
        stored = [d.id.read_direct_chunk((r, 0)) for r in range(0, d.shape[0], rows)]

    def one(k: int) -> None:
        raw = zlib.decompress(stored[k][1])
        a = np.frombuffer(raw, np.uint8)
        if shuffled and esize > 1:
            a = a.reshape(esize, -1).T.copy()
        n = min(rows, out.shape[0] - k * rows)
        out[k * rows:k * rows + n] = a.view(out.dtype).reshape(rows, -1)[:n]

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(one, range(len(stored))))
    return out


def ceiling_write(src: Path) -> tuple[int, float]:
    """The write ceiling beside `src`: O_DIRECT writes of as many bytes as
    `src` has (whole 16 MiB blocks, at least one) into a scratch file next
    to it (removed afterwards), fallocate and fsync inside the clock;
    returns (bytes written, seconds)."""
    from h5gds.bench._common import ceiling_write_seconds

    nblocks = max(1, os.path.getsize(src) // CEILING_BLOCK)
    offsets = np.arange(nblocks, dtype=np.uint64) * np.uint64(CEILING_BLOCK)
    scratch = src.with_suffix(".ceiling-write")
    os.sync()  # the writes before this one are not the ceiling's to flush
    try:
        secs = ceiling_write_seconds(scratch, True, CEILING_THREADS, CEILING_BLOCK, offsets)
    finally:
        scratch.unlink(missing_ok=True)
    return nblocks * CEILING_BLOCK, secs


def raw_read_seconds(path: Path) -> float:
    """Seconds h5gds's engine takes to read the whole file into device
    memory in 16 MiB pieces, as bytes read once (as the GPU-decoded reads
    read stored chunks); the device buffer is allocated before the clock."""
    import cupy

    from h5gds._loader_io import EngineFile, wait

    size = os.path.getsize(path)
    buf = cupy.empty(max(size, 1), dtype=cupy.uint8)
    off = np.arange(0, size, CEILING_BLOCK, dtype=np.uint64)
    sizes = np.minimum(np.uint64(CEILING_BLOCK), np.uint64(size) - off).astype(np.uint64)
    addr = off + np.uint64(buf.data.ptr)
    f = EngineFile(str(path), "")
    try:
        t0 = time.perf_counter()
        wait(f.submit(off, sizes, addr, buf.data.ptr, read_once=True), str(path))
        cupy.cuda.runtime.deviceSynchronize()
        return time.perf_counter() - t0
    finally:
        f.close()


def bench_writes(src: Path, kind: str, fname: str, ratio: float, rep: int, methods: set[str],
                 add: Callable[..., None]) -> None:
    """Durable writes of the dataset in `src` from device memory into a new
    file with the same filters: h5gds (GPU compression, direct chunk
    writes) and h5py (a copy to the host, HDF5's CPU filters); cache
    "write", GB/s of decoded bytes, the file fsync'ed inside the clock.
    Beside them the write ceiling (ceiling-odirect-write, GB/s of file
    bytes) and the GPU encode alone of the h5gds write (nvcomp-compress,
    cache "device": its decoded bytes over its encode seconds)."""
    import cupy
    from h5gds.bench._common import fsync_path

    if "ceiling-odirect-write" in methods:
        written, secs = ceiling_write(src)
        add("ceiling-odirect-write", kind, fname, ratio, "write", written / secs / 1e9, rep)
    with h5py.File(src, "r") as f:
        host = f["x"][()]
        chunks = f["x"].chunks
    dev = cupy.asarray(host)
    decoded = host.nbytes
    kw = filter_kwargs(fname) or {}
    out = src.with_suffix(".w.h5")
    if rep == 0 and methods & {"h5gds-write", "nvcomp-compress"}:
        # untimed: the GPU encoder's one-time start (nvCOMP's compressors, kernels) and the
        # process's buffers sized (the encoder's, the engine's pinned staging of every worker)
        with h5py.File(out, "w", driver="gds") as f:
            h5gds.create_dataset(f, "x", data=dev, chunks=chunks, **kw)
        out.unlink()
    for method in ("h5gds-write", "h5py-write"):
        # nvcomp-compress is read from the h5gds write: it runs for either
        if method not in methods and not (method == "h5gds-write" and "nvcomp-compress" in methods):
            continue
        if out.exists():
            out.unlink()
        os.sync()
        encode: h5gds.EncodeStats | None = None
        t0 = time.perf_counter()
        if method == "h5gds-write":
            with h5py.File(out, "w", driver="gds") as f:
                h5gds.create_dataset(f, "x", data=dev, chunks=chunks, **kw)
                route = h5gds.last_route()
                encode = last_encode_stats()  # this thread's write, before anything else runs on it
        else:
            with h5py.File(out, "w") as f:
                f.create_dataset("x", data=cupy.asnumpy(dev), chunks=chunks, **kw)
                route = "host"
        fsync_path(out)
        secs = time.perf_counter() - t0
        with h5py.File(out, "r") as f:  # the ratio this writer's compressor reached (GPU and CPU ones differ)
            stored = f["x"].id.get_storage_size()
        written_ratio = decoded / stored if stored else ratio
        if method in methods:
            add(method, kind, fname, written_ratio, "write", decoded / secs / 1e9, rep)
        if method != "h5gds-write" or route != GPU_ENCODE_ROUTE:
            # the encode statistics are of the thread's last GPU-encoded write: not this one
            print(f"# {method} route {route}", flush=True)
        elif encode is None:
            print(f"# h5gds-write route {route}; no encode statistics", flush=True)
        else:
            print(f"# h5gds-write route {route}; encode {encode.encode_s:.3f} s, waiting for writes "
                  f"{encode.store_wait_s:.3f} s, total {encode.total_s:.3f} s", flush=True)
            if "nvcomp-compress" in methods and encode.encode_s > 0:
                add("nvcomp-compress", kind, fname, written_ratio, "device",
                    encode.decoded_bytes / encode.encode_s / 1e9, rep)
    if out.exists():
        out.unlink()
    del dev


# ---- the summary: the goals' ratios from the medians ----

def _fmt(value: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _over(num: float | None, den: float | None) -> float | None:
    return None if num is None or den is None or den <= 0 else num / den


class _Medians:
    """The rows gathered per data and filter (in the order the run measured
    them): the median GB/s of each method and cache, the ratio of the file
    read (HDF5's CPU filter: the first row that is not a writer's or the
    GPU compression's) and the median ratio h5gds's GPU writes reached."""

    def __init__(self, rows: Iterable[dict[str, Any]]):
        values: dict[tuple[str, str, str, str], list[float]] = {}
        gpu: dict[tuple[str, str], list[float]] = {}
        self.keys: dict[tuple[str, str], None] = {}
        self.cpu_ratio: dict[tuple[str, str], float] = {}
        for r in rows:
            key = (str(r["data"]), str(r["filter"]))
            self.keys.setdefault(key)
            if r["method"] == "h5gds-write":
                gpu.setdefault(key, []).append(float(r["ratio"]))
            elif r["method"] not in ("h5py-write", "nvcomp-compress"):
                self.cpu_ratio.setdefault(key, float(r["ratio"]))
            values.setdefault((str(r["method"]), *key, str(r["cache"])), []).append(float(r["GBps"]))
        self.medians = {k: float(np.median(v)) for k, v in values.items()}
        self.gpu_ratio = {k: float(np.median(v)) for k, v in gpu.items()}
        self.methods = {k[0] for k in self.medians}

    def get(self, method: str, key: tuple[str, str], cache: str) -> float | None:
        return self.medians.get((method, *key, cache))


def summary_lines(rows: Iterable[dict[str, Any]]) -> list[str]:
    """compressed-summary.md: per data and filter, the medians over repeats
    (GB/s) and the goals' ratios; "-" where an input is missing.

    Reads (GB/s of decoded bytes; the ceiling: file bytes, times the ratio
    for decoded bytes): cold h5gds / min(ceiling-odirect cold x ratio,
    nvcomp-decode), warm h5gds / nvcomp-decode (beside it warm h5gds /
    min(h5gds-raw warm x ratio, nvcomp-decode): the bound when the page
    cache feeds the GPU slower than it decodes), cold h5gds / h5py and
    / cpu16. Writes: h5gds-write / min(ceiling-odirect-write x the ratio
    h5gds's GPU compression reached (its rows' median), nvcomp-compress);
    beside it the same with the ratio of the file read (HDF5's CPU filter),
    and h5gds-write / h5py-write."""
    m = _Medians(rows)
    med, keys, ratios, methods = m.get, m.keys, m.cpu_ratio, m.methods

    def low(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else min(a, b)

    out = ["# compressed: the goals' ratios", "",
           "Medians over repeats, GB/s of decoded bytes (the O_DIRECT ceilings: GB/s of file bytes, "
           "x ratio for decoded bytes); - where an input was not measured.", ""]
    if methods & set(READ_METHODS):
        out += ["## Reads into device memory", "",
                "Goals: cold h5gds >= 0.8 x min(ceiling x ratio, decode alone); warm h5gds >= 0.8 x decode "
                "alone; h5gds >= 10x h5py; h5gds >= 2x cpu16 (gzip).", "",
                "| data | filter | ratio | cold: **h5gds** | O_DIRECT ceiling (file bytes) | ceiling x ratio "
                "| GPU decode alone | **h5gds / min(ceiling x ratio, decode)** | warm: **h5gds** "
                "| **warm h5gds / decode** | warm I/O alone (file bytes) | warm h5gds / min(I/O x ratio, decode) "
                "| h5py cold | h5gds / h5py | cpu16 cold | h5gds / cpu16 |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key in keys:
            ratio = ratios.get(key)
            cold, warm_ = med("h5gds", key, "cold"), med("h5gds", key, "warm")
            ceiling = med("ceiling-odirect", key, "cold")
            ceiling_x = None if ceiling is None or ratio is None else ceiling * ratio
            decode = med("nvcomp-decode", key, "device")
            h5py_cold, cpu16_cold = med("h5py", key, "cold"), med("cpu16", key, "cold")
            raw_warm = med("h5gds-raw", key, "warm")
            raw_warm_x = None if raw_warm is None or ratio is None else raw_warm * ratio
            out.append(f"| {key[0]} | {key[1]} | {_fmt(ratio)} | **{_fmt(cold)}** | {_fmt(ceiling)} "
                       f"| {_fmt(ceiling_x)} | {_fmt(decode)} | **{_fmt(_over(cold, low(ceiling_x, decode)))}** "
                       f"| **{_fmt(warm_)}** | **{_fmt(_over(warm_, decode))}** | {_fmt(raw_warm)} "
                       f"| {_fmt(_over(warm_, low(raw_warm_x, decode)))} | {_fmt(h5py_cold)} "
                       f"| {_fmt(_over(cold, h5py_cold), '.1f', 'x')} | {_fmt(cpu16_cold)} "
                       f"| {_fmt(_over(cold, cpu16_cold), '.1f', 'x')} |")
        out.append("")
    if methods & set(WRITE_METHODS):
        out += ["## Durable writes from device memory", "",
                "Goal: h5gds-write >= 0.8 x min(write ceiling x ratio, GPU compress alone), with the "
                "ratio the GPU compression reached (GPU ratio); beside it the same with the ratio of "
                "HDF5's CPU filter (CPU ratio: the file the reads use).", "",
                "| data | filter | CPU ratio | GPU ratio | **h5gds-write** | O_DIRECT write ceiling (file bytes) "
                "| ceiling x GPU ratio | GPU compress alone | **h5gds-write / min(ceiling x GPU ratio, compress)** "
                "| h5gds-write / min(ceiling x CPU ratio, compress) | h5py-write | h5gds-write / h5py-write |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key in keys:
            ratio = ratios.get(key)
            h5gds_write = med("h5gds-write", key, "write")
            gpu_ratio = m.gpu_ratio.get(key)
            ceiling = med("ceiling-odirect-write", key, "write")
            ceiling_gpu = None if ceiling is None or gpu_ratio is None else ceiling * gpu_ratio
            ceiling_cpu = None if ceiling is None or ratio is None else ceiling * ratio
            compress = med("nvcomp-compress", key, "device")
            h5py_write = med("h5py-write", key, "write")
            out.append(f"| {key[0]} | {key[1]} | {_fmt(ratio)} | {_fmt(gpu_ratio)} | **{_fmt(h5gds_write)}** "
                       f"| {_fmt(ceiling)} | {_fmt(ceiling_gpu)} | {_fmt(compress)} "
                       f"| **{_fmt(_over(h5gds_write, low(ceiling_gpu, compress)))}** "
                       f"| {_fmt(_over(h5gds_write, low(ceiling_cpu, compress)))} | {_fmt(h5py_write)} "
                       f"| {_fmt(_over(h5gds_write, h5py_write), '.1f', 'x')} |")
        out.append("")
    return out


def write_summary(rows: Iterable[dict[str, Any]], path: Path) -> Path:
    path.write_text("\n".join(summary_lines(rows)))
    return path


# Panels of the figure: (title, cache of the rows, [(label, method, times the ratio)]).
PLOT_PANELS = [
    ("cold reads into device memory", "cold", [("h5gds", "h5gds", False), ("disk x ratio", "ceiling-odirect", True),
                                               ("h5py", "h5py", False), ("cpu16", "cpu16", False)]),
    ("warm reads", "warm", [("h5gds", "h5gds", False), ("I/O alone x ratio", "h5gds-raw", True),
                            ("h5py", "h5py", False)]),
    ("durable writes from device memory", "write", [("h5gds-write", "h5gds-write", False),
                                                    ("disk x GPU ratio", "ceiling-odirect-write", True),
                                                    ("h5py-write", "h5py-write", False)]),
]


def plot(rows: list[dict[str, Any]], png: Path) -> bool:
    """compressed.png: per data and filter, medians in GB/s of decoded
    bytes: h5gds beside the disk's ceiling times the ratio (for writes the
    ratio the GPU reached), the GPU's decode or compression alone, h5py and
    cpu16; one panel per kind of measurement present. False (and a line
    saying why) when there is nothing to plot or no matplotlib."""
    m = _Medians(rows)
    keys = m.keys

    def med(method: str, key: tuple[str, str], cache: str) -> float:
        return m.get(method, key, cache) or 0.0

    def ratio_for(method: str, key: tuple[str, str]) -> float:
        """The ceiling's ratio: the GPU's for the write ceiling (else the file's)."""
        gpu = m.gpu_ratio.get(key) if method == "ceiling-odirect-write" else None
        return gpu or m.cpu_ratio.get(key, 0.0)

    panels = []
    for title, cache, series in PLOT_PANELS:
        alone = ("nvcomp-compress", "device") if cache == "write" else ("nvcomp-decode", "device")
        label = "GPU compress alone" if cache == "write" else "GPU decode alone"
        full = series[:2] + [(label, alone[0], False)] + series[2:]
        got = [(lab, [med(method, k, alone[1] if method == alone[0] else cache)
                      * (ratio_for(method, k) if times_ratio else 1) for k in keys])
               for lab, method, times_ratio in full]
        got = [(lab, ys) for lab, ys in got if any(ys)]
        if any(lab.startswith("h5gds") for lab, _ in got):
            panels.append((title, got))
    if not panels:
        print("plot skipped: no measurements to plot", flush=True)
        return False
    from h5gds.bench._common import pyplot
    plt = pyplot()
    if plt is None:
        return False
    names = [f"{d}\n{f}" for d, f in keys]
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8.0, 1.3 * len(names)), 3.4 * len(panels)), squeeze=False)
    for ax, (title, got) in zip(axes[:, 0], panels):
        w = 0.8 / len(got)
        for i, (lab, ys) in enumerate(got):
            ax.bar(np.arange(len(names)) + i * w, ys, w, label=lab)
        ax.set_xticks(np.arange(len(names)) + 0.4 - w / 2, names, fontsize=7)
        ax.set_ylabel("GB/s (decoded)")
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    print(f"plot: {png}", flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    from h5gds.bench import _common as common
    from h5gds.bench._common import Parser, ceiling_seconds, drop_cache, warm

    p = Parser(prog="python -m h5gds.bench compressed", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"), help="where the files go (a real disk)")
    p.add_argument("--out", default=os.environ.get("OUT", "."), help="where compressed.csv goes")
    p.add_argument("--size", default="1GiB", help="decoded bytes per dataset")
    p.add_argument("--data", default="field,image,labels")
    p.add_argument("--filters", default="gzip-shuffle,zstd,lz4,bitshuffle-lz4")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--methods", default=",".join(READ_METHODS),
                   help=f"a comma list of {', '.join(READ_METHODS)} (reads; default all) and "
                        f"{', '.join(WRITE_METHODS)} (durable writes from device memory, the GPU encode "
                        "alone, the O_DIRECT write ceiling)")
    p.add_argument("--parts", default="reads", help="reads (datasets into device memory), loader (loader "
                   "epochs over compressed samples, compressed-loader.csv), or both: reads,loader")
    p.add_argument("--loader-samples", type=common.size_list_arg, default=[64 << 10, 1 << 20],
                   help="loader part: sample sizes (64KiB,1MiB)")
    p.add_argument("--loader-chunk", type=common.size_arg, default=2 << 20,
                   help="loader part: chunk bytes (whole samples, about this many bytes; 2MiB)")
    p.add_argument("--loader-windows", type=common.size_list_arg, default=[],
                   help="loader part: the loader's window sizes to try (default: the loader's own)")
    p.add_argument("--loader-variants", default="default",
                   help="loader part: settings separated by ';' (default, or NAME=VALUE[+NAME=VALUE...] environment "
                        "settings)")
    p.add_argument("--loader-step-ms", type=float, default=0.0,
                   help="loader part: also a cold training epoch with this much GPU compute per step (0: none)")
    p.add_argument("--loader-data", default="field,image", help="loader part: data kinds")
    p.add_argument("--loader-filters", default="gzip-shuffle,zstd,lz4,bitshuffle-lz4",
                   help="loader part: filters")
    p.add_argument("--loader-dataloader-bytes", type=common.size_arg, default=256 << 20,
                   help="loader part: samples DataLoader + h5py reads per measurement (it is slow)")
    p.add_argument("--plot", metavar="CSV", default=None,
                   help="measure nothing: the figure and the summary of a compressed.csv (or the summary of a "
                        "compressed-loader.csv), written beside it")
    args = p.parse_args(argv)
    if args.plot:
        import csv
        src = Path(args.plot)
        try:
            with open(src, newline="") as fh:
                old = list(csv.DictReader(fh))
        except OSError as exc:
            p.error(f"--plot: {exc.strerror}: {src}")
        if old and old[0].get("bench") == "compressed-loader":
            from h5gds.bench import compressed_loader
            out = compressed_loader.write_summary(old, src.with_name(src.stem + "-summary.md"))
            print(f"compressed: the loader goal's ratios in {out}")
            return 0
        if not old or not set(COLUMNS) <= set(old[0]):
            p.error(f"--plot: {src} is not a compressed.csv (columns {','.join(COLUMNS)})")
        print(f"compressed: goals' ratios in {write_summary(old, src.with_name(src.stem + '-summary.md'))}")
        plot(old, src.with_suffix(".png"))
        return 0
    parts = set(args.parts.split(","))
    if not parts or not parts <= {"reads", "loader"}:
        p.error(f"--parts: {args.parts!r}: a comma list of reads, loader")
    try:
        nbytes = parse_size(args.size)
    except SizeError as exc:
        p.error(f"--size: {exc}")
    if args.repeat < 1:
        p.error("--repeat: must be at least 1")
    methods = {m for m in args.methods.split(",") if m}
    unknown = sorted(methods - set(READ_METHODS) - set(WRITE_METHODS))
    if unknown:
        p.error(f"--methods: unknown method {unknown[0]!r} (reads: {', '.join(READ_METHODS)}; writes: "
                f"{', '.join(WRITE_METHODS)})")
    try:
        import cupy
    except ImportError:
        print("compressed: needs CuPy and a GPU (device memory is where the data lands)", file=sys.stderr)
        return 2
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "compressed.csv"
    table = common.CsvRows(csv_path, COLUMNS)
    rows = table.rows

    def add(method: str, kind: str, fname: str, ratio: float, cache: str, gbps: float, rep: int) -> None:
        table.add(dict(bench="compressed", method=method, data=kind, filter=fname, ratio=f"{ratio:.2f}",
                       cache=cache, GBps=f"{gbps:.3f}", repeat=rep))

    def timed(fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        cupy.cuda.runtime.deviceSynchronize()
        return time.perf_counter() - t0

    if "loader" in parts:
        from h5gds.bench import compressed_loader
        if "reads" not in parts:
            return compressed_loader.run(args, nbytes, out_dir, work)
    print(",".join(COLUMNS), flush=True)
    for kind in args.data.split(",") if "reads" in parts else []:
        for fname in args.filters.split(","):
            path = work / f"h5gds-compressed-{kind}-{fname}.h5"
            ratio = write_dataset(path, kind, fname, nbytes)
            if ratio is None:
                print(f"# {fname}: hdf5plugin not installed, skipped", flush=True)
                continue
            with h5py.File(path, "r") as f:
                decoded = f["x"].size * f["x"].dtype.itemsize
                want_sum = float(np.asarray(f["x"][:64], np.float64).sum())
            stored = os.path.getsize(path)
            if "h5gds" in methods:  # untimed: the GPU codecs loaded, kernels compiled, first device buffers
                with h5py.File(path, "r", driver="gds") as f:
                    secs = timed(lambda: h5gds.read(f["x"], like="cupy"))
                print(f"# {kind}/{fname}: first h5gds read of the file (untimed in the rows) {secs:.3f} s, "
                      f"route {h5gds.last_route()}", flush=True)
            for rep in range(args.repeat):
                if methods & set(WRITE_METHODS):
                    bench_writes(path, kind, fname, ratio, rep, methods, add)
                for cache in ("cold", "warm"):
                    def prepare() -> None:
                        if cache == "cold":
                            drop_cache(path)
                        else:
                            warm(path)
                    if "ceiling-odirect" in methods:
                        prepare()
                        block = CEILING_BLOCK
                        offsets = np.arange(0, stored // block * block, block, dtype=np.uint64)
                        if len(offsets):
                            secs = ceiling_seconds(path, cache == "cold", CEILING_THREADS, block, offsets)
                            add("ceiling-odirect", kind, fname, ratio, cache, len(offsets) * block / secs / 1e9, rep)
                    if "h5gds-raw" in methods:
                        prepare()
                        add("h5gds-raw", kind, fname, ratio, cache, stored / raw_read_seconds(path) / 1e9, rep)
                    if "h5gds" in methods:
                        prepare()
                        with h5py.File(path, "r", driver="gds") as f:
                            got: list[Any] = []
                            secs = timed(lambda: got.append(h5gds.read(f["x"], like="cupy")))
                            route = h5gds.last_route()
                            stats = last_decode_stats()
                        if abs(float(cupy.asnumpy(got[0][:64]).astype(np.float64).sum()) - want_sum) > 1e-3 * (
                                1 + abs(want_sum)):
                            print(f"compressed: {kind}/{fname}: h5gds read different data", file=sys.stderr)
                            return 1
                        del got
                        add("h5gds", kind, fname, ratio, cache, decoded / secs / 1e9, rep)
                        print(f"# h5gds route {route}; decode {stats.decode_s:.3f} s, waiting for reads "
                              f"{stats.read_wait_s:.3f} s, total {stats.total_s:.3f} s", flush=True)
                        if "nvcomp-decode" in methods and cache == "warm" and route == "gpu-decode" and stats.decode_s:
                            add("nvcomp-decode", kind, fname, ratio, "device", stats.decoded_bytes / stats.decode_s / 1e9,
                                rep)
                    if "h5py" in methods:
                        prepare()
                        with h5py.File(path, "r") as f:
                            secs = timed(lambda: cupy.asarray(f["x"][()]))
                        add("h5py", kind, fname, ratio, cache, decoded / secs / 1e9, rep)
                    if "cpu16" in methods and fname == "gzip-shuffle":
                        prepare()
                        secs = timed(lambda: cupy.asarray(cpu16_read(path)))
                        add("cpu16", kind, fname, ratio, cache, decoded / secs / 1e9, rep)
            path.unlink()
    print(f"compressed: {len(rows)} rows in {csv_path}")
    if rows:
        print(f"compressed: goals' ratios in {write_summary(rows, out_dir / 'compressed-summary.md')}", flush=True)
        plot(rows, out_dir / "compressed.png")
    if "loader" in parts:
        return compressed_loader.run(args, nbytes, out_dir, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
