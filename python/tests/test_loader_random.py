"""Seeded random loaders against h5py: one to three files of random row
counts, sample shapes and dtypes, compressed with a random filter (or not)
in chunks of random rows, read with random batch sizes, windows, buffers,
ranks, drop_last, caches and orders over three epochs. Every batch must hold
the rows ``indices()`` names, with h5py's bytes, each sample once per epoch
across the ranks. Host batches run without a GPU; device batches (both
stagings) carry the marker ``gpu``. A failure names its case (``-k case_7``)."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import h5py
import numpy as np
import pytest

import h5gds
from support import cases_scale

SCALE = cases_scale()  # H5GDS_TEST_CASES_SCALE
HOST_CASES = 30 * SCALE
DEVICE_CASES = 30 * SCALE
DTYPES = ["u1", "i2", "f2", "f4", "i4", "f8", "u8"]


def _filter(rng: np.random.Generator) -> tuple[str, dict[str, Any]]:
    names = ["none", "gzip", "gzip-shuffle", "lzf"]
    if importlib.util.find_spec("hdf5plugin") is not None:
        names += ["zstd", "lz4", "bitshuffle-lz4", "bitshuffle-zstd", "blosc-lz4", "blosc-zstd"]
    name = str(rng.choice(names))
    if name in ("none", "gzip", "gzip-shuffle", "lzf"):
        return name, {"none": {}, "gzip": {"compression": "gzip"},
                      "gzip-shuffle": {"compression": "gzip", "shuffle": True},
                      "lzf": {"compression": "lzf"}}[name]
    import hdf5plugin
    return name, {"zstd": dict(hdf5plugin.Zstd(clevel=1)), "lz4": dict(hdf5plugin.LZ4()),
                  "bitshuffle-lz4": dict(hdf5plugin.Bitshuffle(cname="lz4")),
                  "bitshuffle-zstd": dict(hdf5plugin.Bitshuffle(cname="zstd")),
                  "blosc-lz4": dict(hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.SHUFFLE)),
                  "blosc-zstd": dict(hdf5plugin.Blosc(cname="zstd", shuffle=hdf5plugin.Blosc.BITSHUFFLE))}[name]


def _rows(rng: np.random.Generator, n: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Rows that compress like real data: a random walk kept to a few decimals."""
    walk = np.cumsum(rng.standard_normal((n,) + shape), axis=0)
    if dtype.kind == "f":
        return np.round(walk, 2).astype(dtype)
    return np.clip(walk * 10, np.iinfo(dtype).min, np.iinfo(dtype).max).astype(dtype)


def _case(seed: int, tmp_path: Any, like: str) -> None:
    rng = np.random.default_rng(7000 + seed)
    dtype = np.dtype(str(rng.choice(DTYPES)))
    shape = tuple(int(rng.integers(1, 40)) for _ in range(int(rng.integers(0, 3))))
    fname, kw = _filter(rng)
    nfiles = int(rng.integers(1, 4))
    paths, parts = [], []
    for i in range(nfiles):
        n = int(rng.integers(1, 1500))
        chunk_rows = int(rng.integers(1, min(n, 300) + 1))
        data = _rows(rng, n, shape, dtype)
        path = os.path.join(os.fspath(tmp_path), f"f{i}.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=data, chunks=(chunk_rows,) + shape, **kw)
        paths.append(path)
        parts.append(data)
    data = np.concatenate(parts)
    row = max(1, int(np.prod(shape)) * dtype.itemsize)
    batch = int(rng.integers(1, 200))
    world = int(rng.choice([1, 1, 2, 3]))
    drop_last = bool(rng.random() < 0.3)
    window = f"{int(rng.choice([4, 16, 64, 256]))}KiB"
    buffer = f"{int(rng.choice([64, 256, 1024]))}KiB"
    cache = str(rng.choice(["auto", "loader", "off", "page"]))
    staging = str(rng.choice(["pinned", "device"]))
    order = str(rng.choice(["auto", "auto", "windowed", "exact"]))
    if order == "exact" and fname != "none":
        cache = "loader"  # exact epochs of compressed rows come from the loader's cache only
    what = (f"case {seed}: {nfiles} files, {len(data)} rows of {shape} {dtype}, {fname}, batch {batch}, "
            f"world {world}, drop_last {drop_last}, window {window}, buffer {buffer}, cache {cache}, "
            f"order {order}, staging {staging}, row {row} B")
    epochs = 3
    seen: list[list[np.ndarray]] = [[] for _ in range(epochs)]
    for rank in range(world):
        with h5gds.Loader(paths, batch, dataset="x", like=like, staging=staging, window=window, buffer=buffer,
                          cache=cache, order=order, seed=seed, rank=rank, world_size=world,
                          drop_last=drop_last) as ld:
            for epoch in range(epochs):
                ld.set_epoch(epoch)
                want = ld.indices()
                got = [b.get() if hasattr(b, "get") else np.asarray(b) for b in ld]
                x = np.concatenate(got) if got else np.empty((0,) + shape, dtype)
                at = f"{what}, epoch {epoch} ({ld.epoch_order()}) rank {rank}"
                assert len(got) == len(ld), f"{at}: {len(got)} batches, len {len(ld)}"
                assert x.shape == (len(want),) + shape, f"{at}: shape {x.shape}"
                assert x.tobytes() == data[want].tobytes(), f"{at}: other bytes"
                seen[epoch].append(want)
    for epoch in range(epochs):
        every = np.concatenate(seen[epoch])
        assert len(np.unique(every)) == len(every), f"{what} epoch {epoch}: a sample twice"
        if not drop_last:
            assert len(every) == len(data), f"{what} epoch {epoch}: {len(every)} of {len(data)} samples"


@pytest.mark.parametrize("seed", range(HOST_CASES), ids=[f"case_{i}" for i in range(HOST_CASES)])
def test_random_host_loaders_match_h5py(tmp_path, seed):
    _case(seed, tmp_path, "numpy")


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(DEVICE_CASES), ids=[f"case_{i}" for i in range(DEVICE_CASES)])
def test_random_device_loaders_match_h5py(tmp_path, seed):
    pytest.importorskip("cupy")
    _case(seed, tmp_path, "cupy")
