"""Seeded random cases against h5py: datasets of every numeric dtype, 1-4
dimensions, odd chunk shapes (larger than the dataset, one element wide),
random filter pipelines and filter parameters (levels, block sizes, shuffles,
incompressible chunks, which HDF5's optional filters skip), fill values and
chunks never written, then random selections. Every read is compared bit
for bit with h5py's read of the same file; every GPU-encoded write is read
back by h5py. The cases are drawn from fixed seeds, so a failure names a
case that reproduces (``-k case_17``)."""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np
import pytest

import h5gds
from support import cases_scale, nvcomp_missing

hdf5plugin = pytest.importorskip("hdf5plugin")

NVCOMP = nvcomp_missing()
SCALE = cases_scale()  # H5GDS_TEST_CASES_SCALE
READ_CASES = 300 * SCALE
HOST_READ_CASES = 40 * SCALE  # without a GPU: the same cases into numpy arrays
WRITE_CASES = 100 * SCALE
DTYPES = ["u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f2", "f4", "f8", ">f4", ">i2", "c8"]


def _pipeline(rng: np.random.Generator, itemsize: int) -> tuple[str, dict[str, Any], bool]:
    """(name, h5py keywords, decodable on the GPU) for a random pipeline."""
    k = int(rng.integers(0, 12))
    if k <= 1:
        level = int(rng.integers(0, 10))  # 0: deflate's stored blocks
        kw: dict[str, Any] = dict(compression="gzip", compression_opts=level)
        name = f"gzip{level}"
    elif k == 2:
        level = int(rng.choice([1, 3, 9, 19]))
        kw, name = dict(**hdf5plugin.Zstd(clevel=level)), f"zstd{level}"
    elif k == 3:
        nbytes = int(rng.choice([0, 1024, 4096, 65536]))  # several LZ4 blocks per chunk
        kw, name = dict(**hdf5plugin.LZ4(nbytes=nbytes)), f"lz4-{nbytes}"
    elif k in (4, 5):
        cname = str(rng.choice(["lz4", "zstd", "none"]))
        nelems = int(rng.choice([0, 8, 64, 2048]))
        kw, name = dict(**hdf5plugin.Bitshuffle(nelems=nelems, cname=cname)), f"bitshuffle-{cname}-{nelems}"
    elif k in (6, 7):
        cname = str(rng.choice(["lz4", "lz4hc", "zstd", "blosclz"]))
        clevel = int(rng.choice([0, 1, 5, 9]))
        shuffle = int(rng.integers(0, 3))
        kw = dict(**hdf5plugin.Blosc(cname=cname, clevel=clevel, shuffle=shuffle))
        name = f"blosc-{cname}-{clevel}-{shuffle}"
        return name, kw, cname != "blosclz"
    elif k == 8:
        kw, name = dict(compression="lzf"), "lzf"
        return name, kw, False
    elif k == 9:
        kw, name = {}, "none"
    elif k == 10:
        kw, name = dict(shuffle=True), "shuffle"
    else:
        kw, name = dict(fletcher32=True), "fletcher32"
    if k <= 3 and itemsize > 1 and rng.random() < 0.6:
        kw["shuffle"] = True
        name = "shuffle+" + name
    if k <= 5 and rng.random() < 0.3:
        kw["fletcher32"] = True
        name += "+fletcher32"
    return name, kw, True


def _data(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Smooth (compresses), noisy small integers, or incompressible bytes."""
    n = int(np.prod(shape))
    how = int(rng.integers(0, 3))
    if how == 2:  # incompressible: HDF5's filters skip optional filters for such chunks
        return np.frombuffer(rng.bytes(n * dtype.itemsize), dtype=dtype).reshape(shape).copy()
    t = np.linspace(0, 6 * np.pi, n)
    if dtype.kind in "fc":
        v = np.round(np.sin(t) * 100 + rng.normal(0, 0.5, n), 2)
        if dtype.kind == "c":
            v = v + 1j * np.round(np.cos(t), 2)
        return v.astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
    v = (np.sin(t) * (hi - lo) / 2 + (hi + lo) / 2).astype(np.int64)
    if how == 1:
        v = v + rng.integers(-3, 4, n)
    return np.clip(v, info.min, info.max).astype(dtype).reshape(shape)


def _box(rng: np.random.Generator, n: int) -> slice:
    a = int(rng.integers(0, n))
    b = int(rng.integers(a + 1, n + 1))
    return slice(a, b)


def _selection(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], bool]:
    """(selection, is a box of the dataset: the GPU decode's case)."""
    k = int(rng.integers(0, 8))
    if k == 0:
        return (), True
    if k == 1:  # an integer drops a dimension
        i = int(rng.integers(-shape[0], shape[0]))
        return (i,) + tuple(_box(rng, n) for n in shape[1:]), True
    if k == 2:
        return (Ellipsis, _box(rng, shape[-1])), True
    if k == 3 and max(shape) > 2:  # a step: HDF5's path
        return tuple(slice(0, n, 2) for n in shape), False
    if k == 4:
        return (slice(-min(3, shape[0]), None),), True
    return tuple(_box(rng, n) for n in shape), True


def _read_case(seed: int, tmp_path: Any, like: str) -> None:
    rng = np.random.default_rng(1000 + seed)
    dtype = np.dtype(str(rng.choice(DTYPES)))
    ndim = int(rng.integers(1, 5))
    limit = [300_000, 700, 80, 24][ndim - 1]
    shape = tuple(int(rng.integers(1, limit)) for _ in range(ndim))
    resizable = rng.random() < 0.25
    small = rng.random() < 0.4  # many chunks: several decode batches
    chunks = tuple(int(rng.integers(1, (int(n * 1.5) + 2) if resizable else max(2, n // 8 if small else n) + 0))
                   for n in shape)
    while int(np.prod(np.ceil(np.divide(shape, chunks)))) > 20_000:
        chunks = tuple(min(2 * c, n) for c, n in zip(chunks, shape))
    name, kw, gpu = _pipeline(rng, dtype.itemsize)
    arr = _data(rng, shape, dtype)
    fill = arr.flat[int(rng.integers(0, arr.size))] if rng.random() < 0.5 else None
    partial = rng.random() < 0.4
    path = tmp_path / f"r{seed}.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=shape, dtype=dtype, chunks=chunks, fillvalue=fill,
                             maxshape=(None,) * ndim if resizable else None, **kw)
        if partial:  # some chunks never written: the fill value
            box = tuple(_box(rng, n) for n in shape)
            d[box] = arr[box]
        else:
            d[()] = arr
    what = f"case {seed}: {dtype.str} {shape} chunks {chunks} {name} fill={fill} partial={partial}"
    sels = [_selection(rng, shape) for _ in range(3)]
    with h5py.File(path, "r") as ref:
        want = [ref["x"][s] for s, _ in sels]
    with h5py.File(path, "r", driver="gds") as f:
        for (sel, box), w in zip(sels, want):
            got = h5gds.read(f["x"], sel, like=like)
            route = h5gds.last_route()
            host = got if like == "numpy" else cupy_module().asnumpy(got)
            if not isinstance(w, np.ndarray):  # h5py returns a scalar (native-endian) for a single element
                w = np.asarray(w).astype(dtype)
            if like != "numpy":
                # device arrays are native-endian: the values, converted
                w = w.astype(w.dtype.newbyteorder("="))
            assert host.dtype == w.dtype, f"{what} sel {sel}: dtype {host.dtype}, h5py {w.dtype}"
            assert host.shape == w.shape, f"{what} sel {sel}: shape {host.shape}, h5py {w.shape}"
            assert host.tobytes() == np.ascontiguousarray(w).tobytes(), f"{what} sel {sel}: data differ"
            if like != "numpy" and NVCOMP is None and gpu and box and dtype.isnative and not partial \
                    and name != "none" and _has_chunks(path):
                assert route == "gpu-decode", f"{what} sel {sel}: route {route}"


def cupy_module() -> Any:
    return pytest.importorskip("cupy")


def _has_chunks(path: Any) -> bool:
    with h5py.File(path, "r") as f:
        return f["x"].id.get_num_chunks() > 0


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(READ_CASES), ids=[f"case_{i}" for i in range(READ_CASES)])
def test_random_reads_match_h5py(tmp_path, seed):
    _read_case(seed, tmp_path, "cupy")


@pytest.mark.parametrize("seed", range(HOST_READ_CASES), ids=[f"case_{i}" for i in range(HOST_READ_CASES)])
def test_random_host_reads_match_h5py(tmp_path, seed):
    _read_case(seed, tmp_path, "numpy")


ENCODE_DTYPES = ["u1", "u2", "i4", "f4", "f8", "i8"]


def _encodable(rng: np.random.Generator, itemsize: int) -> tuple[str, dict[str, Any]]:
    k = int(rng.integers(0, 5))
    if k == 0:
        level = int(rng.integers(1, 10))
        kw: dict[str, Any] = dict(compression="gzip", compression_opts=level, shuffle=bool(rng.random() < 0.7))
        name = f"gzip{level}"
    elif k == 1:
        nbytes = int(rng.choice([0, 4096, 65536]))
        kw, name = dict(**hdf5plugin.LZ4(nbytes=nbytes)), f"lz4-{nbytes}"
    elif k == 2:
        nelems = int(rng.choice([0, 64, 2048, 16384]))
        cname = str(rng.choice(["lz4", "zstd"]))
        kw, name = dict(**hdf5plugin.Bitshuffle(nelems=nelems, cname=cname)), f"bitshuffle-{cname}-{nelems}"
    elif k == 3:
        cname = str(rng.choice(["lz4", "lz4hc", "zstd"]))
        kw = dict(**hdf5plugin.Blosc(cname=cname, clevel=int(rng.integers(1, 10)), shuffle=int(rng.integers(0, 3))))
        name = f"blosc-{cname}"
    else:
        # chunks over a piece (32-128 KiB by the level): pieces spliced into one frame (zstd_splice.h)
        level = int(rng.choice([1, 3, 9]))
        kw, name = dict(**hdf5plugin.Zstd(clevel=level)), f"zstd{level}"
    if rng.random() < 0.3:
        kw["fletcher32"] = True
        name += "+fletcher32"
    return name, kw


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(WRITE_CASES), ids=[f"case_{i}" for i in range(WRITE_CASES)])
def test_random_gpu_writes_read_back_in_h5py(tmp_path, seed):
    cupy = cupy_module()
    rng = np.random.default_rng(5000 + seed)
    dtype = np.dtype(str(rng.choice(ENCODE_DTYPES)))
    ndim = int(rng.integers(1, 4))
    limit = [20000, 400, 60][ndim - 1]
    shape = tuple(int(rng.integers(1, limit)) for _ in range(ndim))
    chunks = tuple(int(rng.integers(1, n + 1)) for n in shape)
    name, kw = _encodable(rng, dtype.itemsize)
    arr = _data(rng, shape, dtype)
    fill = arr.flat[0] if rng.random() < 0.5 else None
    what = f"case {seed}: {dtype.str} {shape} chunks {chunks} {name}"
    path = tmp_path / f"w{seed}.h5"
    mirror = np.full(shape, fill if fill is not None else 0, dtype)
    with h5py.File(path, "w", driver="gds") as f:
        if rng.random() < 0.5:
            h5gds.create_dataset(f, "x", data=cupy.asarray(arr), chunks=chunks, fillvalue=fill, **kw)
            mirror[...] = arr
        else:
            d = f.create_dataset("x", shape=shape, dtype=dtype, chunks=chunks, fillvalue=fill, **kw)
            for _ in range(3):
                # chunk-aligned boxes (GPU encode) or any box (HDF5's filters)
                if rng.random() < 0.5:
                    box = []
                    for n, c in zip(shape, chunks):
                        nc = -(-n // c)
                        a = int(rng.integers(0, nc))
                        b = int(rng.integers(a + 1, nc + 1))
                        box.append(slice(a * c, min(b * c, n)))
                    box = tuple(box)
                else:
                    box = tuple(_box(rng, n) for n in shape)
                h5gds.write(d, cupy.asarray(arr[box]), box)
                mirror[box] = arr[box]
    with h5py.File(path, "r") as ref:
        got = ref["x"][()]
    assert got.tobytes() == mirror.tobytes(), f"{what}: h5py reads other data"
    with h5py.File(path, "r", driver="gds") as f:
        back = cupy.asnumpy(h5gds.read(f["x"], like="cupy"))
    assert back.tobytes() == mirror.tobytes(), f"{what}: h5gds reads other data"
