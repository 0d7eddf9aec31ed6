"""Blosc (HDF5 filter 32001, hdf5plugin's c-blosc 1.x) datasets read into
device memory with the decode on the GPU: every result compared bit for bit
with h5py + hdf5plugin's read of the same file. Marker `gpu`; skipped without
hdf5plugin; the GPU-decode route is asserted only where nvCOMP is installed
(the same conventions as test_compressed_gpu.py)."""
import os
import struct

import h5py
import numpy as np
import pytest

import h5gds
from support import nvcomp_missing

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")
hdf5plugin = pytest.importorskip("hdf5plugin", reason="hdf5plugin not installed (pip install hdf5plugin)")


NVCOMP = nvcomp_missing()
SHUFFLES = {"noshuffle": hdf5plugin.Blosc.NOSHUFFLE, "shuffle": hdf5plugin.Blosc.SHUFFLE,
            "bitshuffle": hdf5plugin.Blosc.BITSHUFFLE}


def field(shape, dtype, seed=1):
    """A smooth field: floats with noise, kept to 3 decimals; integers in 64
    levels spread over the type's range (runs of equal values, as labels and
    quantised images have). Compressible by every blosc compressor, never all zeros."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 4 * np.pi, n) for n in shape], indexing="ij")
    f = sum(np.sin(g * (i + 1) * 0.7 + seed) for i, g in enumerate(grids))
    if np.dtype(dtype).kind == "f":
        return np.round(f + rng.normal(0, 0.05, shape), 3).astype(dtype)
    levels = np.round((f - f.min()) / (np.ptp(f) + 1e-9) * 63)
    return (levels * (min(np.iinfo(dtype).max, 2**31 - 1) // 63)).astype(dtype)


def _read_and_compare(path, name, sel=(), expect_gpu=True):
    with h5py.File(path, "r") as ref:
        want = ref[name][sel]
    with h5py.File(path, "r", driver="gds") as f:
        got = h5gds.read(f[name], sel, like="cupy")
        route = h5gds.last_route()
    got = cupy.asnumpy(got)
    np.testing.assert_array_equal(got, want)
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()
    if expect_gpu and NVCOMP is None:
        assert route == "gpu-decode", f"{name} {sel}: route {route}"
    return route


def _blosc_header(path, name, chunk=0):
    with h5py.File(path, "r") as f:
        d = f[name]
        off = tuple(c * chunk for c in d.chunks)
        mask, raw = d.id.read_direct_chunk(off)
    return mask, raw


@pytest.mark.parametrize("dtype", ["u1", "u2", "f4", "f8"])
@pytest.mark.parametrize("shuffle", list(SHUFFLES))
@pytest.mark.parametrize("cname", ["lz4", "lz4hc", "zstd"])
def test_blosc_bit_identical(tmp_path, cname, shuffle, dtype):
    # chunks of 250 x 1100 elements: blosc's blocks (64 KiB .. 1 MiB) do not
    # divide them, so the last block of each chunk is a partial one; edge
    # chunks in both dimensions
    shape, chunks = (600, 2300), (250, 1100)
    arr = field(shape, dtype)
    path = tmp_path / "b.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=chunks,
                         **hdf5plugin.Blosc(cname=cname, clevel=5, shuffle=SHUFFLES[shuffle]))
    mask, raw = _blosc_header(path, "x")
    assert mask == 0 and raw[0] == 2, "the chunk is not blosc-compressed"
    nbytes, blocksize = struct.unpack("<ii", raw[4:12])
    if dtype != "u1":
        assert nbytes % blocksize, (nbytes, blocksize)  # a partial block
    _read_and_compare(path, "x")
    _read_and_compare(path, "x", (slice(10, 590), slice(33, 2201)))
    _read_and_compare(path, "x", (slice(250, 500),))


def test_blosc_typesizes_and_ranks(tmp_path):
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("i8", data=np.arange(300_001, dtype="i8") * 7, chunks=(65_536,),
                         **hdf5plugin.Blosc(cname="zstd", clevel=9, shuffle=hdf5plugin.Blosc.BITSHUFFLE))
        f.create_dataset("c3", data=field((20, 37, 45), "f4"), chunks=(7, 37, 45),
                         **hdf5plugin.Blosc(cname="lz4", clevel=1))
        f.create_dataset("tiny", data=np.arange(100, dtype="u1"), chunks=(10,), **hdf5plugin.Blosc(cname="lz4"))
    _read_and_compare(path, "i8")
    _read_and_compare(path, "i8", (slice(65_000, 200_000),))
    _read_and_compare(path, "c3")
    # 10-byte chunks: c-blosc cannot compress them, hdf5plugin's filter stores them unfiltered
    _read_and_compare(path, "tiny")


def _memcpyed(raw: bytes, typesize: int) -> bytes:
    """A chunk in c-blosc's MEMCPYED form (flags MEMCPYED | SHUFFLE, lz4's format):
    what c-blosc writes for incompressible data when given room for it."""
    n = len(raw)
    return bytes([2, 1, 0x02 | 0x01 | (1 << 5), typesize]) + struct.pack("<iii", n, n, n + 16) + raw


def test_blosc_memcpyed_and_incompressible(tmp_path):
    path = tmp_path / "m.h5"
    rng = np.random.default_rng(5)
    noise = rng.integers(0, 2**32, (400, 1000), dtype=np.uint32)
    with h5py.File(path, "w") as f:
        # incompressible: hdf5plugin's filter fails and HDF5 stores the chunks unfiltered (mask bit)
        f.create_dataset("noise", data=noise, chunks=(100, 1000), **hdf5plugin.Blosc(cname="lz4"))
        d = f.create_dataset("m", data=noise, chunks=(100, 1000), **hdf5plugin.Blosc(cname="zstd"))
        for row in (0, 200):
            d.id.write_direct_chunk((row, 0), _memcpyed(noise[row:row + 100].tobytes(), 4), filter_mask=0)
        e = f.create_dataset("mixed", data=field((400, 1000), "f4"), chunks=(100, 1000),
                             **hdf5plugin.Blosc(cname="lz4"))
        e.id.write_direct_chunk((100, 0), _memcpyed(field((100, 1000), "f4", 9).tobytes(), 4), filter_mask=0)
    assert _blosc_header(path, "noise")[0] == 1
    assert _blosc_header(path, "m")[1][2] & 0x02
    _read_and_compare(path, "noise")
    _read_and_compare(path, "m")
    _read_and_compare(path, "mixed")


def test_blosclz_falls_back_to_hdf5(tmp_path):
    path = tmp_path / "lz.h5"
    arr = field((300, 1000), "f4")
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(100, 1000), **hdf5plugin.Blosc(cname="blosclz"))
        f.create_dataset("dflt", data=arr, chunks=(100, 1000), compression=32001)  # no cd_values: blosclz
        f.create_dataset("zlib", data=arr, chunks=(100, 1000), **hdf5plugin.Blosc(cname="zlib"))
    for name in ("x", "dflt", "zlib"):
        route = _read_and_compare(path, name, expect_gpu=False)
        assert route != "gpu-decode", (name, route)


def test_blosclz_chunk_in_an_lz4_dataset(tmp_path):
    """A dataset whose parameters say lz4 holding a chunk that c-blosc wrote
    with blosclz (another writer's chunk): hdf5plugin reads it by its header.
    The codec refuses the chunk with EOPNOTSUPP naming blosclz; HDF5's filter
    reads that chunk alone, the GPU the others (the same data)."""
    path = tmp_path / "mix.h5"
    arr = field((300, 1000), "f4")
    with h5py.File(path, "w") as f:
        lz = f.create_dataset("lz", data=arr, chunks=(100, 1000), **hdf5plugin.Blosc(cname="blosclz"))
        x = f.create_dataset("x", data=arr, chunks=(100, 1000), **hdf5plugin.Blosc(cname="lz4"))
        mask, raw = lz.id.read_direct_chunk((100, 0))
        assert raw[2] >> 5 == 0  # blosclz
        x.id.write_direct_chunk((100, 0), raw, filter_mask=mask)
    _read_and_compare(path, "x", expect_gpu=True)
    if NVCOMP is None:
        stats = h5gds.last_decode_stats()
        assert (stats.chunks, stats.hdf5_chunks) == (3, 1), stats


# The child leaves with os._exit: after a decoder that never ended, the
# work is still on the GPU and an orderly exit (freeing device memory)
# would wait for it.
_CHILD = """
import os, sys, numpy as np, h5py, cupy, h5gds
try:
    with h5py.File(sys.argv[1], "r", driver="gds") as f:
        np.save(sys.argv[2], cupy.asnumpy(h5gds.read(f["x"], like="cupy")))
    print("READ", flush=True)
except OSError as exc:
    print("FAILED", exc, flush=True)
os._exit(0)
"""


def _read_in_child(path, tmp_path):
    """h5gds.read of dataset "x" in a process of its own: garbage inside a
    compressed stream may stop the process's GPU codec (a decoder that never
    ends, H5GDS_CODEC_TIMEOUT_S) or break its CUDA context, which must not
    decide the other tests. (failed, message, data)."""
    import subprocess
    import sys
    out = tmp_path / "got.npy"
    env = dict(os.environ, H5GDS_CODEC_TIMEOUT_S="5")
    r = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(out)], capture_output=True, text=True,
                       timeout=120, env=env)
    text = r.stdout.strip()
    assert r.returncode == 0 and text.startswith(("READ", "FAILED")), \
        f"the reading process ended with {r.returncode}: {text} {r.stderr[-2000:]}"
    if text.startswith("READ"):
        return False, "", np.load(out)
    return True, text[len("FAILED "):], None


def _rewrite_chunk(path, name, fn):
    with h5py.File(path, "r") as f:
        info = f[name].id.get_chunk_info(0)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset)
        stored = bytearray(fh.read(info.size))
        fn(stored)
        fh.seek(info.byte_offset)
        fh.write(stored)


def _flip(b):
    for i in range(len(b) // 3, len(b) // 3 + 16):
        b[i] ^= 0x5A


def _zero_tail(b):
    for i in range(len(b) // 2, len(b)):
        b[i] = 0


def _version(b):
    b[0] = 3


def _block_start(b):
    b[16:20] = struct.pack("<i", len(b) - 2)


def _stream_size(b):
    start = struct.unpack("<i", b[16:20])[0]
    b[start:start + 4] = struct.pack("<i", 0x7FFFFFF0)


def _cbytes(b):
    b[12:16] = struct.pack("<i", len(b) + 100)


def _nbytes(b):
    b[4:8] = struct.pack("<i", struct.unpack("<i", b[4:8])[0] + 4)


@pytest.mark.parametrize("how", [_flip, _zero_tail, _version, _block_start, _stream_size, _cbytes, _nbytes],
                         ids=["flip", "zero-tail", "version", "block-start", "stream-size", "cbytes", "nbytes"])
@pytest.mark.parametrize("cname", ["lz4", "zstd"])
def test_corrupt_blosc_chunks_fail(tmp_path, cname, how):
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=field((256, 4096), "f4"), chunks=(64, 4096),
                         **hdf5plugin.Blosc(cname=cname, shuffle=hdf5plugin.Blosc.SHUFFLE))
    _rewrite_chunk(path, "x", how)
    with h5py.File(path, "r") as ref:
        try:
            want = ref["x"][()]
            h5py_failed = False
        except OSError:
            h5py_failed = True
    failed, message, got = _read_in_child(path, tmp_path)
    if how in (_version, _block_start, _stream_size, _nbytes):
        assert h5py_failed, f"h5py read a chunk with a corrupt {how.__name__[1:]}"
    if how is _cbytes:  # c-blosc bounds its reads by it, nothing more: both read the chunk
        assert not h5py_failed and not failed, message
    if h5py_failed:
        assert failed, f"{cname}/{how.__name__}: h5py fails on the corrupt chunk, h5gds returned data"
        if NVCOMP is None:
            assert "/x" in message and "(0,0)" in message and "blosc" in message, message
    elif not failed:
        np.testing.assert_array_equal(got, want)  # a corruption c-blosc cannot see: the same bytes
