"""Compressed (filtered) chunked datasets read into device memory with the
decode on the GPU: every result is compared bit for bit with h5py's own
read of the same file (HDF5's CPU filter pipeline, hdf5plugin for the
plugin filters). Marker `gpu`; the GPU-decode assertions also need nvCOMP
(skipped, with the reason, where it is not installed)."""

import re

import h5py
import numpy as np
import pytest

import h5gds
from support import SIZE_FINDING, hdf5plugin_or_none, nvcomp_missing

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")


NVCOMP = nvcomp_missing()


def field(shape, seed=1):
    """A smooth float32 field with noise, kept to 3 decimals: compresses
    like simulation output (about 2x), never all zeros."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 4 * np.pi, n, dtype=np.float32) for n in shape], indexing="ij")
    f = sum(np.sin(g * (i + 1) * 0.7) for i, g in enumerate(grids))
    f = f + rng.normal(0, 0.05, shape).astype(np.float32)
    return np.round(f, 3).astype(np.float32)


def image_tiles(shape, seed=2):
    rng = np.random.default_rng(seed)
    base = (np.indices(shape).sum(axis=0) * 3 % 256).astype(np.uint8)
    return (base + rng.integers(0, 8, shape, dtype=np.uint8)).astype(np.uint8)


def sparse_labels(shape, seed=3):
    rng = np.random.default_rng(seed)
    a = np.zeros(shape, np.int32)
    mask = rng.random(shape) < 0.05
    a[mask] = rng.integers(1, 20, int(mask.sum()))
    return a


def _filters():
    """(name, h5py create_dataset keyword arguments, decodable on the GPU)."""
    out = [
        ("gzip", dict(compression="gzip", compression_opts=4), True),
        ("gzip+shuffle", dict(compression="gzip", shuffle=True), True),
        ("gzip+shuffle+fletcher32", dict(compression="gzip", shuffle=True, fletcher32=True), True),
        ("fletcher32", dict(fletcher32=True), True),
        ("shuffle", dict(shuffle=True), True),
        ("lzf", dict(compression="lzf"), False),
    ]
    hp = hdf5plugin_or_none()
    if hp is not None:
        out += [
            ("zstd", dict(**hp.Zstd(clevel=3)), True),
            ("lz4", dict(**hp.LZ4()), True),
            ("bitshuffle-lz4", dict(**hp.Bitshuffle(cname="lz4")), True),
            ("bitshuffle-zstd", dict(**hp.Bitshuffle(cname="zstd")), True),
            ("blosc-blosclz", dict(**hp.Blosc(cname="blosclz", shuffle=hp.Blosc.SHUFFLE)), False),
        ]
    return out


FILTERS = _filters()
FILTERS_BY_NAME = {f[0]: f for f in FILTERS}


def _read_and_compare(path, name, sel, expect_gpu):
    with h5py.File(path, "r") as ref:
        want = ref[name][sel]
    with h5py.File(path, "r", driver="gds") as f:
        got = h5gds.read(f[name], sel, like="cupy")
        route = h5gds.last_route()
    np.testing.assert_array_equal(cupy.asnumpy(got), want)
    assert cupy.asnumpy(got).tobytes() == np.ascontiguousarray(want).tobytes()
    if expect_gpu and NVCOMP is None:
        assert route == "gpu-decode", f"{name} {sel}: route {route}"
    return route


@pytest.mark.parametrize("fname,kw,gpu", FILTERS, ids=[f[0] for f in FILTERS])
@pytest.mark.parametrize("data", ["field", "image", "labels"])
def test_filters_bit_identical(tmp_path, fname, kw, gpu, data):
    shape = (300, 257)  # edge chunks in both dimensions
    arr = {"field": field, "image": image_tiles, "labels": sparse_labels}[data](shape)
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(64, 100), **kw)
    _read_and_compare(path, "x", (), gpu)
    _read_and_compare(path, "x", (slice(10, 290), slice(33, 200)), gpu)
    _read_and_compare(path, "x", (slice(64, 128), slice(None)), gpu)


def test_selections_and_ranks(tmp_path):
    path = tmp_path / "s.h5"
    a1 = field((100_003,))
    a3 = field((37, 45, 29))
    with h5py.File(path, "w") as f:
        f.create_dataset("a1", data=a1, chunks=(4096,), compression="gzip", shuffle=True)
        f.create_dataset("a3", data=a3, chunks=(8, 16, 29), compression="gzip", shuffle=True)
    for sel in [(), (slice(5, 99_000),), (slice(4096, 8192),), (slice(100_000, 100_003),)]:
        _read_and_compare(path, "a1", sel, True)
    for sel in [(), (slice(3, 30), slice(7, 44), slice(None)), (slice(8, 16),), (slice(1, 2), slice(2, 3), slice(4, 5))]:
        _read_and_compare(path, "a3", sel, True)
    # a strided selection is no box: HDF5's path, same bytes
    route = _read_and_compare(path, "a1", (slice(0, 1000, 3),), False)
    assert route != "gpu-decode"


@pytest.mark.parametrize("level,chunk", [(19, 517460), (22, 1 << 20), (19, 65536), (19, 16384)])
def test_zstd_frames_dense_in_sequences(tmp_path, level, chunk):
    """Valid zstd frames with about one sequence per 3 bytes (3-byte tokens
    of a 256-token alphabet, high levels) overran the scratch nvCOMP's
    decoder asks for and lost the CUDA context; they decode with the scratch
    the library gives it, alone (one chunk) and in a batch."""
    hp = hdf5plugin_or_none()
    if hp is None:
        pytest.skip("hdf5plugin is not installed")
    rng = np.random.default_rng(3 * 1000 + 256 + level)
    tokens = rng.integers(0, 256, (256, 3), dtype=np.uint8)
    n = chunk * 2
    arr = tokens[rng.integers(0, 256, n // 3 + 1)].reshape(-1)[:n].copy()
    path = tmp_path / "z.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(chunk,), **hp.Zstd(clevel=level))
    _read_and_compare(path, "x", (slice(0, chunk),), True)
    _read_and_compare(path, "x", (), True)
    assert cupy.asnumpy(cupy.arange(3)).tolist() == [0, 1, 2]  # the context is alive


def test_unwritten_chunks_read_as_fill_value(tmp_path):
    path = tmp_path / "fill.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(1000, 64), dtype="f4", chunks=(100, 64), compression="gzip",
                             fillvalue=7.5)
        d[200:400] = field((200, 64))
        f.create_dataset("z", shape=(1000,), dtype="i4", chunks=(100,), compression="gzip")
    _read_and_compare(path, "x", (), True)
    _read_and_compare(path, "x", (slice(150, 450),), True)
    _read_and_compare(path, "z", (), True)


def test_into_out_and_torch(tmp_path):
    path = tmp_path / "o.h5"
    arr = field((512, 256))
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(128, 256), compression="gzip", shuffle=True)
    out = cupy.full((512, 256), -1, np.float32)
    with h5py.File(path, "r", driver="gds") as f:
        h5gds.read(f["x"], out=out)
    np.testing.assert_array_equal(cupy.asnumpy(out), arr)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    with h5py.File(path, "r", driver="gds") as f:
        t = h5gds.read(f["x"], (slice(100, 300),), like="torch")
    np.testing.assert_array_equal(t.cpu().numpy(), arr[100:300])


def _hold_device_memory(leave):
    """Allocates all but about `leave` bytes of the device's free memory
    (as another process, or PyTorch's cache, would hold it); the pointer."""
    free, _ = cupy.cuda.runtime.memGetInfo()
    take = free - leave
    while take > 64 << 20:
        try:
            return cupy.cuda.runtime.malloc(take)
        except cupy.cuda.runtime.CUDARuntimeError:
            take -= 64 << 20
    return None


@pytest.mark.parametrize("leave_mib", [48, 8])
def test_reads_and_writes_with_the_device_nearly_full(tmp_path, leave_mib):
    """All but 48 (8) MiB of the device held elsewhere: the GPU codec narrows
    its sub-batches, and where even one chunk at a time does not fit, the
    read or write takes HDF5's filters through host memory (route
    host-staged). The data is always whole and equal, never an error."""
    if NVCOMP is not None:
        pytest.skip(NVCOMP)
    arr = field((2048, 8192))  # 64 MiB in 64 chunks of 1 MiB
    path, wpath = tmp_path / "p.h5", tmp_path / "w.h5"
    kw = dict(chunks=(256, 1024), compression="gzip", shuffle=True)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, **kw)
    out = cupy.full(arr.shape, -1, arr.dtype)
    dev = cupy.asarray(arr)
    with h5py.File(path, "r", driver="gds") as f:  # the codec opened (its kernels loaded) beforehand
        h5gds.read(f["x"], (slice(0, 256),), like="cupy")
    cupy.cuda.Device().synchronize()
    cupy.get_default_memory_pool().free_all_blocks()
    with h5py.File(path, "r", driver="gds") as f, h5py.File(wpath, "w", driver="gds") as w:
        hog = _hold_device_memory(leave_mib << 20)
        try:
            h5gds.read(f["x"], out=out)
            read_route = h5gds.last_route()
            h5gds.create_dataset(w, "y", data=dev, **kw)
            write_route = h5gds.last_route()
        finally:
            if hog:
                cupy.cuda.runtime.free(hog)
    assert hog is not None
    np.testing.assert_array_equal(cupy.asnumpy(out), arr)
    with h5py.File(wpath, "r") as ref:
        np.testing.assert_array_equal(ref["y"][()], arr)
    assert read_route in ("gpu-decode", "host-staged") and write_route in ("gpu-encode", "host-staged")
    if leave_mib == 8:  # the stored bytes of one batch alone need more
        assert (read_route, write_route) == ("host-staged", "host-staged")
    _read_and_compare(path, "x", (slice(100, 1900),), True)  # with the memory back, the GPU again


def test_read_does_not_wait_for_unrelated_gpu_work(tmp_path):
    """A GPU-decoded read orders its buffers on its own stream: it neither
    waits for, nor makes the caller wait for, a kernel running on another
    (non-blocking) stream. cuMemFree would wait for the whole device: the
    read would then return only after the 2 s kernel."""
    import os

    if os.environ.get("H5GDS_DISABLE_DEVICE_POOL") not in (None, "", "0"):
        pytest.skip("H5GDS_DISABLE_DEVICE_POOL is set: reads use cuMemAlloc/cuMemFree")
    if os.path.exists("/proc/driver/nvidia-fs/version") or os.path.exists("/sys/module/nvidia_fs"):
        pytest.skip("nvidia-fs is loaded: reads keep cuMemAlloc buffers, which cuFile can DMA into")
    if NVCOMP:
        pytest.skip(NVCOMP)
    path = tmp_path / "busy.h5"
    arr = field((1024, 256))
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(64, 256), compression="gzip", shuffle=True)
    spin = cupy.RawKernel(r'''extern "C" __global__ void spin(long long n)
        { long long t = clock64(); while (clock64() - t < n) {} }''', "spin")
    with h5py.File(path, "r", driver="gds") as f:
        h5gds.read(f["x"], like="cupy")  # untimed: codecs loaded, the pool made
        busy = cupy.cuda.Stream(non_blocking=True)
        rate = cupy.cuda.runtime.deviceGetAttribute(cupy.cuda.runtime.cudaDevAttrClockRate, 0)  # kHz
        with busy:
            spin((1,), (1,), (np.int64(2 * rate * 1000),))  # about 2 s
        got = h5gds.read(f["x"], like="cupy")
        assert h5gds.last_route() == "gpu-decode"
        still_running = not busy.done
        busy.synchronize()
    assert still_running, "the read waited for a kernel on another stream"
    np.testing.assert_array_equal(cupy.asnumpy(got), arr)


def _corrupt(path, name, how):
    """Mutates the first stored chunk of `name` in place, as h5py finds it."""
    with h5py.File(path, "r") as f:
        info = f[name].id.get_chunk_info(0)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset)
        stored = bytearray(fh.read(info.size))
        if how == "flip":
            for i in range(len(stored) // 3, len(stored) // 3 + 16):
                stored[i] ^= 0x5A
        elif how == "zero-tail":
            for i in range(len(stored) // 2, len(stored)):
                stored[i] = 0
        elif how == "last-byte":  # Deflate's Adler-32, Fletcher-32's checksum, ...
            stored[-1] ^= 0x5A
        fh.seek(info.byte_offset)
        fh.write(stored)


# Filters HDF5 implements and checks itself: the judges of what the GPU
# finds wrong in them (gds_filtered_hdf5_judges).
HDF5_JUDGES = ("gzip", "gzip+shuffle", "gzip+shuffle+fletcher32", "fletcher32")
# A damaged checksum only where one ends the chunk (the last bytes of other
# filters' streams are data; nvCOMP's Zstd decoder may never end on them).
CORRUPTIONS = [(f, how) for f in FILTERS if f[2] and f[0] != "shuffle" for how in ("flip", "zero-tail")] + \
    [(FILTERS_BY_NAME[name], "last-byte") for name in HDF5_JUDGES]


@pytest.mark.parametrize("case,how", CORRUPTIONS, ids=[f"{f[0]}-{how}" for f, how in CORRUPTIONS])
def test_corrupt_chunks_fail_as_h5py_does(tmp_path, case, how):
    fname, kw, _ = case
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=field((256, 256)), chunks=(64, 256), **kw)
    _corrupt(path, "x", how)
    with h5py.File(path, "r") as ref:
        try:
            want = ref["x"][()]
            h5py_failed = False
        except OSError:
            h5py_failed = True
    with h5py.File(path, "r", driver="gds") as f:
        try:
            got = cupy.asnumpy(h5gds.read(f["x"], like="cupy"))
            failed, message = False, ""
        except OSError as exc:
            failed, message = True, str(exc)
    if h5py_failed:
        assert failed, f"{fname}/{how}: h5py fails on the corrupt chunk, h5gds returned data"
        if NVCOMP is None:
            assert "/x" in message and "(0,0)" in message, message
            if how == "last-byte":  # a checksum HDF5 checks itself: its verdict too
                assert "HDF5's own filters failed on it as well: H5Z" in message, message  # HDF5's innermost error
    elif failed and fname in HDF5_JUDGES:
        # HDF5's filters judge what the GPU finds wrong in them; the GPU fails alone only on sizes,
        # which HDF5 never checks (elsewhere nvCOMP may be the stricter decoder: an error, not garbage)
        assert SIZE_FINDING.search(message), f"{fname}/{how}: h5py reads the chunk, h5gds failed: {message}"
    elif not failed:
        np.testing.assert_array_equal(got, want)  # a corruption HDF5's filters cannot see: the same bytes


@pytest.mark.parametrize("redecode", ["", "1"], ids=["once", "decoded-again"])
@pytest.mark.parametrize("fname", ["gzip", "gzip+shuffle", "gzip+shuffle+fletcher32"])
def test_bytes_after_a_zlib_stream_read_as_hdf5_reads_them(tmp_path, monkeypatch, fname, redecode):
    """Chunks with bytes after their zlib stream's end (a writer's padding):
    zlib, and so HDF5, stops at the stream's end; the GPU's decoder refuses
    the chunk, and HDF5's filters read that chunk alone, so the read gives
    h5py's data with the other chunks decoded on the GPU (route gpu-decode,
    the refused chunks counted in last_decode_stats().hdf5_chunks). The
    padded chunk at row 192 is an edge chunk (rows 192-249). With
    H5GDS_CODEC_TEST_REDECODE=1 the codec reports the other chunks
    undefined, as after a decompressor's garbage: they are decoded again
    without the refused ones."""
    if NVCOMP is not None:
        pytest.skip(NVCOMP)
    if redecode:
        monkeypatch.setenv("H5GDS_CODEC_TEST_REDECODE", redecode)
    kw = FILTERS_BY_NAME[fname][1]
    arr = field((250, 256))
    path = tmp_path / "padded.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", data=arr, chunks=(64, 256), **kw)
        for row in (0, 192):
            mask, stored = d.id.read_direct_chunk((row, 0))
            if fname.endswith("fletcher32"):  # the checksum covers the padded stream
                stream = stored[:-4] + bytes(range(1, 17 + (len(stored) - 4) % 2))
                d.id.write_direct_chunk((row, 0), stream + _fletcher32(stream), mask)
            else:
                d.id.write_direct_chunk((row, 0), stored + bytes(range(1, 17)), mask)
    with h5py.File(path, "r") as ref:
        want = ref["x"][()]
    np.testing.assert_array_equal(want, arr)
    with h5py.File(path, "r", driver="gds") as f:
        got = h5gds.read(f["x"], like="cupy")
        stats = h5gds.last_decode_stats()
        assert (h5gds.last_route(), stats.chunks, stats.hdf5_chunks) == ("gpu-decode", 4, 2), stats
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
        part = h5gds.read(f["x"], np.s_[64:128], like="cupy")  # chunks without padding: the GPU's
        assert (h5gds.last_route(), h5gds.last_decode_stats().hdf5_chunks) == ("gpu-decode", 0)
        np.testing.assert_array_equal(cupy.asnumpy(part), want[64:128])
        box = h5gds.read(f["x"], np.s_[10:200, 3:250], like="cupy")  # padded chunks cut: placed from aside
        assert (h5gds.last_route(), h5gds.last_decode_stats().hdf5_chunks) == ("gpu-decode", 2)
        np.testing.assert_array_equal(cupy.asnumpy(box), want[10:200, 3:250])


def _fletcher32(data: bytes) -> bytes:
    """HDF5's Fletcher-32 of `data` of even length (H5_checksum_fletcher32:
    16-bit big-endian words, sums folded every 360), as stored."""
    assert len(data) % 2 == 0
    words = np.frombuffer(data, ">u2").astype(np.uint64)
    sum1 = sum2 = 0
    for start in range(0, len(words), 360):
        for w in words[start:start + 360].tolist():
            sum1 += w
            sum2 += sum1
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
    sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return ((sum2 << 16) | sum1).to_bytes(4, "little")


PYTABLES = sorted((__import__("pathlib").Path(__file__).parent / "data" / "pytables").glob("*.h5"))


def test_files_written_by_pytables():
    """Every numeric dataset of PyTables' files that h5gds reads into device
    memory reads the bytes h5py reads; deflate+shuffle ones decode on the GPU
    where nothing differs from HDF5's read (others take HDF5's pipeline)."""
    compared, decoded = 0, []
    for path in PYTABLES:
        names: list[str] = []
        with h5py.File(path, "r") as f:
            f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for name in names:
            with h5py.File(path, "r") as ref:
                d = ref[name]
                if d.shape is None or d.size == 0 or d.dtype.kind not in "biuf" or not d.dtype.isnative:
                    continue
                want = d[()]
            with h5py.File(path, "r", driver="gds") as f:
                got = cupy.asnumpy(h5gds.read(f[name], like="cupy"))
                route = h5gds.last_route()
            np.testing.assert_array_equal(got, want, err_msg=f"{path.name}:{name}")
            compared += 1
            if route == "gpu-decode":
                decoded.append(f"{path.name}:{name}")
    assert compared >= 10, f"only {compared} numeric datasets in PyTables' files"
    if NVCOMP is None:
        assert len(decoded) >= 5, f"only {decoded} decoded on the GPU"


ENCODABLE = [f for f in FILTERS if f[2] and f[0] not in ("shuffle",)] + [f for f in FILTERS if f[0] == "shuffle"]


@pytest.mark.parametrize("fname,kw,gpu", ENCODABLE, ids=[f[0] for f in ENCODABLE])
def test_gpu_compressed_writes_read_back_in_h5py(tmp_path, fname, kw, gpu):
    """Device data written to filtered datasets (whole chunks, edge chunks
    included) is compressed on the GPU and reads back equal through h5py
    (+ hdf5plugin), HDF5's own filters."""
    path = tmp_path / "w.h5"
    arr = field((300, 257))
    with h5py.File(path, "w", driver="gds") as f:
        h5gds.create_dataset(f, "x", data=cupy.asarray(arr), chunks=(64, 100), **kw)
        route_create = h5gds.last_route()
        d = f.create_dataset("y", shape=(300, 257), dtype="f4", chunks=(64, 100), **kw)
        h5gds.write(d, cupy.asarray(arr[64:192]), (slice(64, 192),))  # chunk rows 1-2, all columns
        route_rows = h5gds.last_route()
        h5gds.write(d, cupy.asarray(arr[10:20, 5:50]), (slice(10, 20), slice(5, 50)))  # part of a chunk
        route_part = h5gds.last_route()
    with h5py.File(path, "r") as ref:
        np.testing.assert_array_equal(ref["x"][()], arr)
        y = ref["y"][()]
        if "compression" in kw and fname != "lz4":  # the field compresses: the chunks are stored small
            assert ref["x"].id.get_storage_size() < arr.nbytes, (fname, ref["x"].id.get_storage_size())
    np.testing.assert_array_equal(y[64:192], arr[64:192])
    np.testing.assert_array_equal(y[10:20, 5:50], arr[10:20, 5:50])
    if NVCOMP is None:  # zstd too: its chunks here (25 KB) are small enough for nvCOMP's zstd
        assert route_create == "gpu-encode", route_create
        assert route_rows == "gpu-encode", route_rows
    assert route_part != "gpu-encode"  # a part of a chunk: HDF5's pipeline
    with h5py.File(path, "r", driver="gds") as f:
        got = cupy.asnumpy(h5gds.read(f["x"], like="cupy"))
    np.testing.assert_array_equal(got, arr)


@pytest.mark.parametrize("fname,kw,gpu", [f for f in FILTERS if "zstd" in f[0]],
                         ids=[f[0] for f in FILTERS if "zstd" in f[0]])
def test_zstd_writes_of_large_zstd_inputs(tmp_path, fname, kw, gpu):
    """nvCOMP's zstd compression is slow on large inputs: 1 MiB zstd chunks
    are compressed on the GPU in pieces of 32-128 KiB (by the level) spliced
    into one frame each, bitshuffle blocks of 8 and 64 KiB by the GPU, of
    256 KiB by HDF5's CPU filter; all read back equal in h5py (whose zstd
    filter reads one frame per chunk)."""
    hp = hdf5plugin_or_none()
    arr = field((512, 2048))  # 4 MiB, chunks of 1 MiB
    cases = {"zstd": (kw, True), "zstd1": (dict(**hp.Zstd(clevel=1)), True),
             "zstd9": (dict(**hp.Zstd(clevel=9)), True)} if fname == "zstd" else {
        "8KiB": (dict(**hp.Bitshuffle(cname="zstd")), True),
        "64KiB": (dict(**hp.Bitshuffle(nelems=16384, cname="zstd")), True),
        "256KiB": (dict(**hp.Bitshuffle(nelems=65536, cname="zstd")), False)}
    path = tmp_path / "z.h5"
    routes = {}
    with h5py.File(path, "w", driver="gds") as f:
        for name, (k, _) in cases.items():
            h5gds.create_dataset(f, name, data=cupy.asarray(arr), chunks=(128, 2048), **k)
            routes[name] = h5gds.last_route()
    with h5py.File(path, "r") as ref:
        for name in cases:
            np.testing.assert_array_equal(ref[name][()], arr)
    if NVCOMP is None:
        assert routes == {n: "gpu-encode" if g else "host-staged" for n, (_, g) in cases.items()}, routes


LARGE_CHUNK_FILTERS = [f for f in FILTERS if f[0] in ("gzip+shuffle", "zstd", "lz4", "bitshuffle-lz4",
                                                     "bitshuffle-zstd", "gzip+shuffle+fletcher32")]


@pytest.mark.parametrize("fname,kw,gpu", LARGE_CHUNK_FILTERS, ids=[f[0] for f in LARGE_CHUNK_FILTERS])
def test_chunks_larger_than_nvcomps_blocks(tmp_path, fname, kw, gpu):
    """Chunks of 40 MiB (detector frames, 3-D fields chunked by slab):
    larger than nvCOMP's 16 MiB LZ4 and zstd blocks, and than one LZ4
    block of hdf5plugin's default framing (a block per chunk). Files h5py
    writes read bit-identical on the GPU; device data written through
    h5gds reads back equal in h5py."""
    arr = field((3, 2048, 5120))  # 120 MiB, chunks (1, 2048, 5120): 40 MiB
    chunks = (1, 2048, 5120)
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=chunks, **kw)
    _read_and_compare(path, "x", (), gpu)
    _read_and_compare(path, "x", (slice(1, 3), slice(100, 2000), slice(7, 5000)), gpu)
    with h5py.File(path, "w", driver="gds") as f:
        h5gds.create_dataset(f, "y", data=cupy.asarray(arr), chunks=chunks, **kw)
    with h5py.File(path, "r") as ref:
        np.testing.assert_array_equal(ref["y"][()], arr)
    _read_and_compare(path, "y", (), gpu)


def test_gpu_compressed_write_1d_and_fill(tmp_path):
    path = tmp_path / "w1.h5"
    a = sparse_labels((100_003,))
    with h5py.File(path, "w", driver="gds") as f:
        d = f.create_dataset("a", shape=(100_003,), dtype="i4", chunks=(4096,), compression="gzip", fillvalue=-3)
        h5gds.write(d, cupy.asarray(a[4096:100_003]), (slice(4096, 100_003),))  # through the edge chunk
        route = h5gds.last_route()
    with h5py.File(path, "r") as ref:
        got = ref["a"][()]
    np.testing.assert_array_equal(got[4096:], a[4096:])
    assert (got[:4096] == -3).all()  # never written: the fill value
    if NVCOMP is None:
        assert route == "gpu-encode", route


def _blosc_data(shape, dtype, seed=5):
    """A smooth field in `dtype`: floats to 3 decimals, integers in 64 levels
    over the type's range (runs of equal values). Compresses under every
    blosc shuffle, never all zeros."""
    f = field(shape, seed).astype(np.float64)
    if np.dtype(dtype).kind == "f":
        return f.astype(dtype)
    levels = np.round((f - f.min()) / (np.ptp(f) + 1e-9) * 63)
    return (levels * (min(np.iinfo(dtype).max, 2**31 - 1) // 63)).astype(dtype)


@pytest.mark.parametrize("dtype", ["u1", "u2", "f4", "f8"])
@pytest.mark.parametrize("shuffle", ["noshuffle", "shuffle", "bitshuffle"])
@pytest.mark.parametrize("cname", ["lz4", "lz4hc", "zstd"])
def test_gpu_blosc_writes_read_back_in_h5py(tmp_path, cname, shuffle, dtype):
    """Blosc (32001) with lz4 / lz4hc / zstd is compressed on the GPU (c-blosc
    1.x frames of LZ4 or zstd streams) and hdf5plugin's c-blosc reads back the same data:
    edge chunks in both dimensions, chunks that are no whole number of the
    encoder's blocks, incompressible data."""
    hp = pytest.importorskip("hdf5plugin")
    kw = dict(**hp.Blosc(cname=cname, clevel=5, shuffle=getattr(hp.Blosc, shuffle.upper())))
    shape, chunks = (300, 2300), (128, 1100)
    arr = _blosc_data(shape, dtype)
    noise = np.random.default_rng(7).integers(0, 256, shape[0] * shape[1] * arr.itemsize, dtype=np.uint8)
    noise = noise.view(arr.dtype).reshape(shape)
    path = tmp_path / "b.h5"
    with h5py.File(path, "w", driver="gds") as f:
        h5gds.create_dataset(f, "x", data=cupy.asarray(arr), chunks=chunks, **kw)
        route_x = h5gds.last_route()
        h5gds.create_dataset(f, "noise", data=cupy.asarray(noise), chunks=chunks, **kw)
        route_noise = h5gds.last_route()
    with h5py.File(path, "r") as ref:
        x = ref["x"]
        np.testing.assert_array_equal(x[()], arr)
        assert ref["noise"][()].tobytes() == noise.tobytes()
        assert x.id.get_storage_size() < arr.nbytes, x.id.get_storage_size()
        mask, raw = x.id.read_direct_chunk((0, 0))
        fmt = 4 if cname == "zstd" else 1  # the compressor's format in the flags
        assert mask == 0 and raw[0] == 2 and raw[2] >> 5 == fmt and raw[3] == arr.itemsize, (mask, raw[:16])
        flags = raw[2]
        assert bool(flags & 0x1) == (shuffle == "shuffle") and bool(flags & 0x4) == (shuffle == "bitshuffle"), flags
        # incompressible chunks: stored through the filter all the same (mask 0: see
        # test_incompressible_gpu_writes_then_hdf5_in_the_same_session)
        nmask, nraw = ref["noise"].id.read_direct_chunk((0, 0))
        assert nmask == 0 and nraw[0] == 2, (nmask, nraw[:16])
    if NVCOMP is None:
        assert route_x == "gpu-encode", route_x
        assert route_noise == "gpu-encode", route_noise
        _read_and_compare(path, "x", (), True)
        _read_and_compare(path, "noise", (slice(100, 290), slice(1000, 2300)), True)


@pytest.mark.parametrize("cname", ["blosclz", "zlib"])
def test_gpu_blosc_writes_other_compressors_on_the_cpu(tmp_path, cname):
    """Blosc with blosclz or zlib (no GPU compressor) compresses with
    hdf5plugin's filter: route host-staged, the same data."""
    hp = pytest.importorskip("hdf5plugin")
    arr = _blosc_data((300, 2300), "f4")
    path = tmp_path / "c.h5"
    with h5py.File(path, "w", driver="gds") as f:
        h5gds.create_dataset(f, "x", data=cupy.asarray(arr), chunks=(128, 1100),
                             **hp.Blosc(cname=cname, shuffle=hp.Blosc.SHUFFLE))
        route = h5gds.last_route()
    assert route != "gpu-encode", route
    with h5py.File(path, "r") as ref:
        np.testing.assert_array_equal(ref["x"][()], arr)


@pytest.mark.parametrize("ahead", ["1", "2", "3"])
@pytest.mark.parametrize("fname", ["gzip+shuffle", "zstd", "bitshuffle-lz4"])
def test_reads_in_many_batches(tmp_path, monkeypatch, ahead, fname):
    """1 MiB batches (H5GDS_DECODE_BATCH_MIB=1, 70 chunks) cut a read of
    224 chunks into four of 56, read 1-3 ahead: chunks never written among
    them (a never-written part of a written chunk too), selections whose
    chunks land in place and aside, a read of never-written chunks only."""
    kw = dict(FILTERS_BY_NAME[fname][1]) if fname in FILTERS_BY_NAME else None
    if kw is None:
        pytest.skip(f"{fname}: hdf5plugin is not installed")
    monkeypatch.setenv("H5GDS_DECODE_BATCH_MIB", "1")
    monkeypatch.setenv("H5GDS_DECODE_READ_AHEAD", ahead)
    arr = field((1000, 777))
    path = tmp_path / "b.h5"
    with h5py.File(path, "w") as f:  # chunks of 37 x 100: 28 x 8 = 224, 14.8 KB each
        d = f.create_dataset("x", shape=arr.shape, dtype="f4", chunks=(37, 100), fillvalue=-2.5, **kw)
        d[:370] = arr[:370]          # rows 370-629 (chunk rows 10-16) never written
        d[630:] = arr[630:]
    with h5py.File(path, "r") as ref:
        written = ref["x"].id.get_num_chunks()
    assert written == 224 - 7 * 8
    for sel in [(), (slice(5, 990), slice(3, 770)), (slice(360, 700),), (slice(400, 600), slice(50, 60))]:
        _read_and_compare(path, "x", sel, True)
    if NVCOMP is None:
        with h5py.File(path, "r", driver="gds") as f:
            h5gds.read(f["x"])
        st = h5gds.last_decode_stats()
        assert st.chunks == written
        assert st.decoded_bytes == written * 37 * 100 * 4


def _read_batches(path, want, capfd):
    """Reads /x on the GPU (H5GDS_CODEC_DEBUG set), checks it against `want`
    and returns the read's batches, [from, to) chunk indices, from its trace."""
    capfd.readouterr()
    with h5py.File(path, "r", driver="gds") as f:
        got = h5gds.read(f["x"], like="cupy")
        assert h5gds.last_route() == "gpu-decode"
    np.testing.assert_array_equal(cupy.asnumpy(got), want)
    err = capfd.readouterr().err
    return [(int(a), int(b)) for a, b in re.findall(r"h5gds read '[^']*': chunks \[(\d+), (\d+)\)", err)]


@pytest.mark.parametrize("ahead", ["1", "2"])
@pytest.mark.parametrize("fname", ["gzip+shuffle", "zstd"])
def test_read_with_a_last_batch_of_its_own(tmp_path, monkeypatch, capfd, ahead, fname):
    """A read cut anew after its first batch with a last batch of its own
    (H5GDS_DECODE_TAIL=9 forces what a slow disk does to Deflate reads):
    the planned batches of 56 chunks up to the first one not yet being
    read, then the chunks before the last 9 in the fewest batches of at
    most 70, of one size, then the last 9; chunks never written among
    them; the data equal to h5py's; H5GDS_DECODE_TAIL=0 keeps the plan."""
    kw = dict(FILTERS_BY_NAME[fname][1]) if fname in FILTERS_BY_NAME else None
    if kw is None:
        pytest.skip(f"{fname}: hdf5plugin is not installed")
    if NVCOMP is not None:
        pytest.skip(NVCOMP)
    monkeypatch.setenv("H5GDS_DECODE_BATCH_MIB", "1")  # 70 chunks of 14.8 KB a batch: four of 56 planned
    monkeypatch.setenv("H5GDS_DECODE_READ_AHEAD", ahead)
    monkeypatch.setenv("H5GDS_CODEC_DEBUG", "1")
    arr = field((1000, 777))
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=arr.shape, dtype="f4", chunks=(37, 100), fillvalue=-2.5, **kw)
        d[:370] = arr[:370]  # chunk rows 10-16 never written
        d[630:] = arr[630:]
    want = np.array(arr)
    want[370:630] = -2.5

    def batches(tail):
        monkeypatch.setenv("H5GDS_DECODE_TAIL", tail)
        return _read_batches(path, want, capfd)

    assert batches("0") == [(0, 56), (56, 112), (112, 168), (168, 224)]
    if ahead == "1":  # 159 chunks before the last batch: three of 53
        assert batches("9") == [(0, 56), (56, 109), (109, 162), (162, 215), (215, 224)]
    else:  # two batches in flight when the first came; 103 chunks before the last: 52 and 51
        assert batches("9") == [(0, 56), (56, 112), (112, 164), (164, 215), (215, 224)]
    assert batches("300") == [(0, 56), (56, 112), (112, 168), (168, 224)]  # more than is left: the plan


def test_read_batches_follow_the_page_cache(tmp_path, monkeypatch, capfd):
    """Chunks of no compressed stream (shuffle alone; bitshuffle's are of
    many) come in batches of 128 MiB decoded when their stored bytes are in
    the page cache, in the widest (512 MiB) when they come from the disk:
    five chunks of 32 MiB in two batches warm, one cold (the batches from
    H5GDS_CODEC_DEBUG's trace)."""
    import os

    if NVCOMP is not None:
        pytest.skip(NVCOMP)
    monkeypatch.delenv("H5GDS_DECODE_BATCH_MIB", raising=False)
    monkeypatch.setenv("H5GDS_CODEC_DEBUG", "1")
    arr = np.tile(field((2048, 512)), (5, 8))  # five chunks of 2048 x 4096 float32: 32 MiB each
    path = tmp_path / "s.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(2048, 4096), shuffle=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)

        def batches():
            return _read_batches(path, arr, capfd)

        def cached(offset):
            """Whether the page at `offset` is in the page cache; None where
            the kernel cannot say (no RWF_NOWAIT)."""
            try:
                os.preadv(fd, [bytearray(1)], offset, os.RWF_NOWAIT)
                return True
            except BlockingIOError:
                return False
            except OSError:
                return None

        probe = os.path.getsize(path) * 19 // 20  # in the last chunk, which the read does not probe
        with open(path, "rb") as fh:  # every page in the cache
            while fh.read(1 << 24):
                pass
        if cached(probe) is None:
            pytest.skip("the kernel cannot say what is in the page cache here (RWF_NOWAIT)")
        assert batches() == [(0, 3), (3, 5)]
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # clean pages leave the cache
        if cached(probe):
            pytest.skip("the page cache keeps this file's pages (tmpfs?): no cold read to test")
        assert batches() == [(0, 5)]
    finally:
        os.close(fd)


def _zstd_made_up(err):
    """(chunks made up block by block, chunks offered) summed over a read's
    batches, from H5GDS_CODEC_DEBUG's trace."""
    got = re.findall(r"zstd block by block: (\d+) of (\d+) chunks made up", err)
    return sum(int(a) for a, _ in got), sum(int(b) for _, b in got)


@pytest.mark.parametrize(
    "data,chunks,clevel",
    [
        ("field", (256, 1024), 3),  # 1 MiB float32 chunks of 8 blocks
        ("field", (300, 777), 1),  # edge chunks, 0.9 MB
        ("image", (1024, 1024), 9),  # 1 MiB of uint8
        ("image", (2048, 1280), 19),  # 2.5 MiB, libzstd's block splitter (blocks of a few KiB)
        ("labels", (128, 1024), 3),  # 512 KiB of sparse int32: long matches, RLE blocks
        ("field", (64, 256), 3),  # 64 KiB: one block a chunk (H5GDS_ZSTD_BLOCKS=1 takes them too)
    ],
)
def test_zstd_block_by_block(tmp_path, monkeypatch, capfd, data, chunks, clevel):
    """zstd chunks written by hdf5plugin at levels 1-19 decoded block by
    block on the GPU: every chunk made up there (the trace's counts), none
    left to nvCOMP, the data equal to h5py's, chunks never written read as
    the fill value; with H5GDS_ZSTD_BLOCKS=0 none is, with the same data."""
    hp = hdf5plugin_or_none()
    if hp is None:
        pytest.skip("hdf5plugin is not installed")
    if NVCOMP is not None:
        pytest.skip(NVCOMP)
    shape = (2 * chunks[0] + 77, 2 * chunks[1] + 33)
    arr = {"field": field, "image": image_tiles, "labels": sparse_labels}[data](shape)
    path = tmp_path / "z.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=shape, dtype=arr.dtype, chunks=chunks, fillvalue=7, **hp.Zstd(clevel=clevel))
        d[: chunks[0]] = arr[: chunks[0]]  # the middle chunk row is never written
        d[2 * chunks[0] :] = arr[2 * chunks[0] :]
        written = f["x"].id.get_num_chunks()
    with h5py.File(path, "r") as f:
        want = f["x"][...]
    monkeypatch.setenv("H5GDS_CODEC_DEBUG", "1")
    for setting, made in (("1", written), ("0", 0)):
        monkeypatch.setenv("H5GDS_ZSTD_BLOCKS", setting)
        capfd.readouterr()
        with h5py.File(path, "r", driver="gds") as f:
            got = h5gds.read(f["x"], like="cupy")
            assert h5gds.last_route() == "gpu-decode"
        np.testing.assert_array_equal(cupy.asnumpy(got), want)
        assert _zstd_made_up(capfd.readouterr().err) == (made, made)
    sel = np.s_[chunks[0] // 2 : chunks[0] * 2 + 50, 5 : chunks[1] + 9]  # partial chunks
    monkeypatch.setenv("H5GDS_ZSTD_BLOCKS", "1")
    with h5py.File(path, "r", driver="gds") as f:
        got = h5gds.read(f["x"], sel, like="cupy")
    np.testing.assert_array_equal(cupy.asnumpy(got), want[sel])


def test_zstd_block_by_block_leaves_a_damaged_chunk(tmp_path, monkeypatch, capfd):
    """A chunk whose frame is damaged (a block of the reserved type) is not
    made up block by block, the others are; the read fails naming the
    dataset and the chunk. (Frames damaged inside their blocks: the host's
    codec_zstd_blocks test, against libzstd.)"""
    hp = hdf5plugin_or_none()
    if hp is None:
        pytest.skip("hdf5plugin is not installed")
    if NVCOMP is not None:
        pytest.skip(NVCOMP)
    arr = field((1024, 1024))
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(256, 1024), **hp.Zstd(clevel=3))
    with h5py.File(path, "r+") as f:
        mask, frame = f["x"].id.read_direct_chunk((512, 0))
        bad = bytearray(frame)
        fhd = bad[4]
        single, fcs, dict_id = (fhd >> 5) & 1, fhd >> 6, fhd & 3
        at = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_id] + ((1 if single else 0), 2, 4, 8)[fcs]
        bad[at] |= 0x06  # the first block's type: 3, reserved
        f["x"].id.write_direct_chunk((512, 0), bytes(bad), mask)
    monkeypatch.setenv("H5GDS_CODEC_DEBUG", "1")
    monkeypatch.setenv("H5GDS_ZSTD_BLOCKS", "1")
    capfd.readouterr()
    with h5py.File(path, "r", driver="gds") as f:
        with pytest.raises(OSError, match=r"/x.*\(512,0\)"):
            h5gds.read(f["x"], like="cupy")
    assert _zstd_made_up(capfd.readouterr().err) == (3, 4)


_KERNEL_CACHE_CHILD = """
import sys, h5py, numpy as np, h5gds, cupy
with h5py.File(sys.argv[1], "r", driver="gds") as f:
    x = h5gds.read(f["x"])
    assert h5gds.last_route() == "gpu-decode", h5gds.last_route()
    assert cupy.asnumpy(x).tobytes() == np.load(sys.argv[2]).tobytes()
"""


@pytest.mark.skipif(NVCOMP is not None, reason=str(NVCOMP))
def test_kernels_kept_on_disk_between_processes(tmp_path):
    """The first process compiles the codec's kernels and keeps them in
    H5GDS_KERNEL_CACHE_DIR; the next loads them from there; a damaged file
    is compiled anew and replaced; H5GDS_KERNEL_CACHE=0 keeps nothing."""
    import os
    import subprocess
    import sys

    arr = field((256, 1024))
    path, want = tmp_path / "k.h5", tmp_path / "want.npy"
    np.save(want, arr)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(64, 1024), compression="gzip", shuffle=True)
    cache = tmp_path / "kernels"

    def child(**env):
        e = dict(os.environ, H5GDS_CODEC_DEBUG="1", H5GDS_KERNEL_CACHE_DIR=str(cache), **env)
        r = subprocess.run([sys.executable, "-c", _KERNEL_CACHE_CHILD, str(path), str(want)], capture_output=True,
                           text=True, env=e, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        return [ln for ln in r.stderr.splitlines() if "h5gds codec: kernels for" in ln]

    first = child()
    assert len(first) == 1 and "compiled by NVRTC" in first[0] and "kept in" in first[0], first
    files = list(cache.glob("codec-sm*.bin"))
    assert len(files) == 1 and oct(files[0].stat().st_mode & 0o777) == "0o600", files
    second = child()
    assert len(second) == 1 and f"from {files[0]}" in second[0], second
    blob = bytearray(files[0].read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # a damaged image: its checksum fails, it is compiled again
    files[0].write_bytes(bytes(blob))
    third = child()
    assert len(third) == 1 and "compiled by NVRTC" in third[0] and "kept in" in third[0], third
    assert "from" in child()[0]
    files[0].unlink()
    off = child(H5GDS_KERNEL_CACHE="0")
    assert len(off) == 1 and "compiled by NVRTC" in off[0] and "kept in" not in off[0], off
    assert not list(cache.glob("codec-sm*.bin"))


@pytest.mark.parametrize("fname", ["gzip+shuffle", "zstd"])
def test_many_tiny_chunks(tmp_path, fname):
    """65536 chunks of 256 bytes (one decode batch of them): every chunk
    located, read and placed, as h5py reads them."""
    if fname not in FILTERS_BY_NAME:
        pytest.skip("hdf5plugin is not installed")
    _, kw, gpu = FILTERS_BY_NAME[fname]
    arr = field((1 << 22,))  # 16 MiB of float32
    path = tmp_path / "tiny.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(64,), **kw)
    _read_and_compare(path, "x", (), gpu)
    if gpu and NVCOMP is None:
        assert h5gds.last_decode_stats().chunks == 1 << 16
    _read_and_compare(path, "x", (slice(1000, 3_000_001),), gpu)


@pytest.mark.parametrize("fname", ["gzip+shuffle", "zstd"])
def test_one_chunk_of_64_mib(tmp_path, fname):
    """A dataset stored as one 64 MiB chunk: one stream decoded alone."""
    if fname not in FILTERS_BY_NAME:
        pytest.skip("hdf5plugin is not installed")
    _, kw, gpu = FILTERS_BY_NAME[fname]
    arr = field((4096, 4096))
    path = tmp_path / "one.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=arr.shape, **kw)
    _read_and_compare(path, "x", (), gpu)
    _read_and_compare(path, "x", (slice(4000, 4096), slice(5, 17)), gpu)


def test_read_on_a_stream_of_the_callers(tmp_path):
    """Under a non-blocking CuPy stream the read is ordered on it: work
    queued after it on that stream sees the decoded data."""
    arr = field((2048, 1024))
    path = tmp_path / "s.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr, chunks=(256, 1024), compression="gzip", shuffle=True)
    s = cupy.cuda.Stream(non_blocking=True)
    with s, h5py.File(path, "r", driver="gds") as f:
        y = h5gds.read(f["x"])
        z = y * 2
    s.synchronize()
    assert cupy.asnumpy(z).tobytes() == (arr * 2).tobytes()


def test_resized_dataset_with_chunks_past_its_old_extent(tmp_path):
    """A dataset grown after it was written: chunks past the old extent
    never written (the fill value), one written at the far corner."""
    path = tmp_path / "r.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(100, 100), maxshape=(None, None), dtype="f8", chunks=(64, 64),
                             compression="gzip", fillvalue=7.5)
        d[:] = field((100, 100)).astype("f8")
        d.resize((300, 130))
        d[250:300, 120:130] = 1.0
    for sel in [(), (slice(90, 260), slice(50, 130)), (slice(250, 300), slice(100, 130))]:
        _read_and_compare(path, "x", sel, True)
