"""The loader over compressed (filtered) datasets: whole stored chunks read
per window and decoded (on the GPU for device batches, by HDF5's filters
for host batches and where the GPU cannot), every sample exactly once per
epoch, the same bytes as h5py reads; orders, caches and the errors of
layouts it cannot serve."""
from __future__ import annotations

import importlib.util
import os

import h5py
import numpy as np
import pytest

import h5gds
import h5gds._loader_decode as decode_module
from loader_stand_in import install_decode_stand_in
from support import nvcomp_missing


def _data(rows: int, shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """Data that compresses like real data (a smooth field plus noise kept to a few decimals)."""
    rng = np.random.default_rng(seed)
    base = np.cumsum(rng.standard_normal((rows,) + shape), axis=0)
    if np.dtype(dtype).kind == "f":
        return np.round(base, 2).astype(dtype)
    return (base * 10).astype(dtype)


def _file(tmp_path: os.PathLike[str], name: str, rows: int = 1000, shape: tuple[int, ...] = (64,),
          dtype: str = "f4", chunk_rows: int = 64, seed: int = 1, **filters: object) -> tuple[str, np.ndarray]:
    path = os.path.join(os.fspath(tmp_path), name)
    data = _data(rows, shape, dtype, seed)
    labels = np.arange(rows, dtype=np.int64)
    with h5py.File(path, "w") as f:
        kw = filters or {"compression": "gzip", "shuffle": True}
        f.create_dataset("x", data=data, chunks=(chunk_rows,) + shape, **kw)  # type: ignore[arg-type]
        f.create_dataset("label", data=labels)
    return path, data


def _epoch(loader: h5gds.Loader) -> tuple[np.ndarray, np.ndarray]:
    xs, ls = [], []
    for x, label in loader:
        xs.append(np.asarray(x))
        ls.append(np.asarray(label))
    return np.concatenate(xs), np.concatenate(ls)


@pytest.mark.parametrize("chunk_rows", [64, 100, 1000])
def test_windowed_host_batches_every_sample_once(tmp_path, chunk_rows):
    path, data = _file(tmp_path, "c.h5", chunk_rows=chunk_rows)
    with h5gds.Loader([path], 32, dataset=["x", "label"], like="numpy", window="16KiB", buffer="256KiB",
                      seed=3) as ld:
        assert ld.compressed and ld.epoch_order() == "windowed"
        x, label = _epoch(ld)
        assert sorted(label.tolist()) == list(range(len(data)))   # each sample once
        np.testing.assert_array_equal(x, data[label])              # with its own bytes
        assert ld._decoder.hdf5_decoded_rows >= len(data)           # host batches: HDF5's filters


def test_two_files_one_compressed_one_not(tmp_path):
    p1, d1 = _file(tmp_path, "a.h5", rows=300, seed=1)
    p2 = os.path.join(os.fspath(tmp_path), "b.h5")
    d2 = _data(200, (64,), "f4", 2)
    with h5py.File(p2, "w") as f:
        f.create_dataset("x", data=d2, chunks=(64, 64))
        f.create_dataset("label", data=np.arange(300, 500, dtype=np.int64))
    both = np.concatenate([d1, d2])
    with h5gds.Loader([p1, p2], 50, dataset=["x", "label"], like="numpy", window="8KiB", buffer="64KiB") as ld:
        x, label = _epoch(ld)
    assert sorted(label.tolist()) == list(range(500))
    np.testing.assert_array_equal(x, both[label])


def test_reads_in_flight_counted_in_stored_bytes(tmp_path, monkeypatch):
    """Compressed columns are read as their stored chunks: the windows in
    flight are counted in those bytes (so more of them), the pinned slots
    hold the other columns alone, and H5GDS_LOADER_INFLIGHT sets the count."""
    from h5gds import _loader
    p1, _ = _file(tmp_path, "a.h5", rows=3000, shape=(256,), chunk_rows=64, seed=1)
    p2 = os.path.join(os.fspath(tmp_path), "b.h5")
    with h5py.File(p2, "w") as f:  # a second file of the column, unfiltered
        f.create_dataset("x", data=_data(500, (256,), "f4", 2), chunks=(64, 256))
    stored = []
    with h5py.File(p1, "r") as f:
        ds = f["x"]
        stored = [ds.id.get_chunk_info(i).size for i in range(ds.id.get_num_chunks())]
    monkeypatch.setattr(_loader, "INFLIGHT_BYTES", 1 << 20)
    with h5gds.Loader([p1, p2], 16, dataset="x", like="numpy", window="64KiB") as ld:
        col = ld.columns[0]  # rows of 1 KiB, chunks of 64 rows
        starts = np.array([0, 10, 64, 2990, 3000, 2990, 0])
        stops = np.array([64, 70, 192, 3000, 3200, 3500, 3500])
        want = [stored[0], stored[0] + stored[1], stored[1] + stored[2], stored[46], 200 * 1024,
                stored[46] + 500 * 1024, sum(stored) + 500 * 1024]
        assert col.range_stored_nbytes(starts, stops).tolist() == want
        # any ranges (empty, across the files, past the end) against a sum per row's chunk
        rng = np.random.default_rng(5)
        a = rng.integers(0, 3600, 400)
        b = a + rng.integers(-5, 900, 400)
        per_chunk = np.array(stored + [0], np.int64)

        def brute(lo: int, hi: int) -> int:
            chunks = {r // 64 for r in range(max(lo, 0), min(hi, 3000))}
            return int(per_chunk[list(chunks)].sum()) + max(0, min(hi, 3500) - max(lo, 3000)) * 1024
        assert col.range_stored_nbytes(a, b).tolist() == [brute(int(x), int(y)) for x, y in zip(a, b)]
        assert ld._inflight_loads == (1 << 20) // (64 << 10)  # the unfiltered file's windows read the most
        assert ld._max_load_bytes() == 1  # no column goes through the pinned slots
    with h5gds.Loader([p1], 16, dataset=["x", "label"], like="numpy", window="64KiB") as ld:
        w = ld._windows
        read = -(-ld.columns[0].range_stored_nbytes(w.start, w.stop) // 4096) * 4096 + \
            -(-ld.columns[1].range_nbytes(w.start, w.stop) // 4096) * 4096  # each column aligned
        expect = max(4, min(64, (1 << 20) // int(read.max())))
        assert ld._inflight_loads == expect > (1 << 20) // (64 << 10)  # more than decoded bytes would allow
        assert ld._max_load_bytes() == 4096  # the labels' bytes of the largest window, aligned
    monkeypatch.setenv("H5GDS_LOADER_INFLIGHT", "3")
    with h5gds.Loader([p1], 16, dataset="x", like="numpy", window="64KiB") as ld:
        assert ld._inflight_loads == 3
        x = np.concatenate([np.asarray(b) for b in ld])
        assert x.shape == (3000, 256)
    monkeypatch.setenv("H5GDS_LOADER_INFLIGHT", "many")
    with pytest.raises(ValueError, match="H5GDS_LOADER_INFLIGHT='many'"):
        h5gds.Loader([p1], 16, dataset="x", like="numpy")


def test_decoder_memory_in_size_classes():
    """The decoder's device buffers for stored chunks come in a few sizes
    (reused by windows whose stored bytes differ a little), at most a
    quarter larger than asked for."""
    from h5gds._loader_decode import size_class
    mib = 1 << 20
    assert [size_class(n) for n in (0, 1, mib, mib + 1, 2 * mib, 2 * mib + 1, 7 * mib + 1)] == \
        [mib, mib, mib, mib * 5 // 4, 2 * mib, mib * 5 // 2, 8 * mib]
    rng = np.random.default_rng(2)
    sizes = rng.integers(mib + 1, 64 * mib, 5000)
    classes = {size_class(int(n)) for n in sizes}
    assert all(n <= size_class(int(n)) < 1.25 * n for n in sizes.tolist())
    assert len(classes) <= 4 * 6 + 1  # four a doubling from 1 to 64 MiB


def test_exact_order_needs_the_loader_cache(tmp_path):
    path, data = _file(tmp_path, "c.h5")
    with pytest.raises(ValueError, match="decode a whole chunk per sample"):
        h5gds.Loader([path], 16, dataset="x", like="numpy", order="exact")
    with h5gds.Loader([path], 16, dataset=["x", "label"], like="numpy", cache="loader", window="16KiB") as ld:
        assert ld.epoch_order(0) == "windowed" and ld.epoch_order(1) == "exact"
        for epoch in (0, 1):
            ld.set_epoch(epoch)
            x, label = _epoch(ld)
            assert sorted(label.tolist()) == list(range(len(data)))
            np.testing.assert_array_equal(x, data[label])
        # the exact epoch is a permutation drawn from (seed, epoch), served from memory
        ld.set_epoch(1)
        np.testing.assert_array_equal(ld.indices(), label)
    with h5gds.Loader([path], 16, dataset="x", like="numpy", cache="loader", order="exact") as ld:
        x = np.concatenate([np.asarray(b) for b in ld])
        np.testing.assert_array_equal(x, data[ld.indices()])


def test_auto_cache_page_stays_windowed(tmp_path):
    path, _ = _file(tmp_path, "c.h5")
    with h5gds.Loader([path], 16, dataset="x", like="numpy", cache="page") as ld:
        assert [ld.epoch_order(e) for e in range(3)] == ["windowed"] * 3


def _tiled_file(tmp_path: os.PathLike[str], rows: int, shape: tuple[int, ...], chunk: tuple[int, ...],
                **filters: object) -> tuple[str, np.ndarray]:
    """A dataset whose chunks cut each sample into tiles (edge tiles included)."""
    path = os.path.join(os.fspath(tmp_path), "tiles.h5")
    data = _data(rows, shape, "f4", 4)
    with h5py.File(path, "w") as f:
        kw = filters or {"compression": "gzip", "shuffle": True}
        f.create_dataset("x", data=data, chunks=chunk, maxshape=(None,) * (len(shape) + 1),
                         **kw)  # type: ignore[arg-type]
        f.create_dataset("label", data=np.arange(rows, dtype=np.int64))
    return path, data


@pytest.mark.parametrize("shape,chunk", [((32, 32), (10, 16, 32)), ((37, 72), (1, 12, 24)),
                                         ((6, 37, 19), (3, 4, 10, 8)), ((100,), (10, 128))],
                         ids=["halves", "netcdf-tiles", "3d-edges", "wider-than-rows"])
def test_chunks_that_tile_samples_host(tmp_path, shape, chunk):
    """Chunks smaller than a sample (netCDF-4's tiles) or wider than it
    (unlimited dimensions): host batches read by HDF5, every sample once."""
    path, data = _tiled_file(tmp_path, 100, shape, chunk)
    with h5gds.Loader([path], 8, dataset=["x", "label"], like="numpy", window="16KiB", buffer="64KiB",
                      seed=3) as ld:
        x, label = _epoch(ld)
    assert sorted(label.tolist()) == list(range(100))
    np.testing.assert_array_equal(x, data[label])


@pytest.mark.parametrize("shape,chunk,lo,hi", [((37, 72), (2, 12, 24), 3, 9), ((6, 5, 7), (4, 4, 2, 3), 0, 11),
                                               ((100,), (5, 128), 7, 8), ((9, 9), (3, 9, 4), 0, 6)])
def test_place_tiles_puts_every_tile_box_in_its_rows(shape, chunk, lo, hi):
    """The tile copies of the GPU path, run with NumPy: tiles decoded
    tile-major (padded as HDF5 pads edge chunks) land in their rows' boxes."""
    from h5gds._loader_decode import place_tiles
    from h5gds._loader_layout import tile_boxes

    c0, inner, cinner = chunk[0], shape, chunk[1:]
    rows = hi + 2 * c0
    data = _data(rows, shape, "f4", 9)
    tiles = tile_boxes(inner, cinner)
    first, last = lo // c0, -(-hi // c0)
    m = last - first
    chunk_elems = c0 * int(np.prod(cinner))
    scratch = np.full(len(tiles.origin) * m * chunk_elems, np.float32(-7.0))
    for t, (origin, extent) in enumerate(zip(tiles.origin, tiles.extent)):
        for i in range(m):
            block = np.full((c0,) + cinner, np.float32(-7.0))
            r0 = (first + i) * c0
            part = data[(slice(r0, r0 + c0),) + tuple(slice(o, o + e) for o, e in zip(origin, extent))]
            block[(slice(0, part.shape[0]),) + tuple(slice(0, e) for e in extent)] = part
            k = t * m + i
            scratch[k * chunk_elems:(k + 1) * chunk_elems] = block.reshape(-1)
    out = np.zeros((hi - lo + 3,) + shape, np.float32)  # rows packed at buffer row 2

    def copy(dst, di, src, si):
        dst[di] = src[si]

    row_bytes = int(np.prod(shape)) * 4
    place_tiles(scratch.view(np.uint8), 0, out.reshape(-1).view(np.uint8), 2 * row_bytes, tiles, 4, c0, m,
                first * c0, lo, hi, copy)
    np.testing.assert_array_equal(out[2:2 + hi - lo], data[lo:hi])
    assert not out[:2].any() and not out[2 + hi - lo:].any()


def test_compressed_ragged_values_refused(tmp_path):
    path = os.path.join(os.fspath(tmp_path), "ragged.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=np.arange(1000, dtype="u1"), chunks=(100,), compression="gzip")
        f.create_dataset("o", data=np.arange(0, 1001, 10, dtype=np.int64))
    with pytest.raises(ValueError, match="Ragged column are compressed"):
        h5gds.Loader([path], 8, dataset=h5gds.Ragged("v", "o"), like="numpy")


def test_filter_hdf5_cannot_read_is_an_error_not_garbage(tmp_path):
    """A chunk corrupted in the file: the epoch fails with HDF5's error, as h5py's read does."""
    path, _ = _file(tmp_path, "bad.h5", rows=256, chunk_rows=64)
    with h5py.File(path, "r") as f:
        info = f["x"].id.get_chunk_info(1)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset + 8)
        fh.write(b"\xff" * 64)
    with h5py.File(path, "r") as f, pytest.raises(OSError):
        f["x"][64:128]
    with h5gds.Loader([path], 16, dataset="x", like="numpy", window="16KiB") as ld, pytest.raises(OSError):
        for _ in ld:
            pass


# ---- device batches: decoded on the GPU ----------------------------------------------------------------

def _gpu_module() -> str | None:
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return "cupy"
    except Exception:
        pass
    return None


def _plugin_filters() -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {"gzip-shuffle": {"compression": "gzip", "shuffle": True}}
    if importlib.util.find_spec("hdf5plugin") is not None:
        import hdf5plugin
        out["zstd"] = dict(hdf5plugin.Zstd())
        out["lz4"] = dict(hdf5plugin.LZ4())
        out["bitshuffle-lz4"] = dict(hdf5plugin.Bitshuffle(cname="lz4"))
        out["blosc-lz4"] = dict(hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.SHUFFLE))
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("staging", ["pinned", "device"])
@pytest.mark.parametrize("name", ["gzip-shuffle", "zstd", "lz4", "bitshuffle-lz4", "blosc-lz4"])
def test_device_batches_decoded_on_the_gpu(tmp_path, staging, name):
    if _gpu_module() is None:
        pytest.skip("needs CuPy and a CUDA GPU")
    filters = _plugin_filters()
    if name not in filters:
        pytest.skip(f"{name}: hdf5plugin is not installed")
    path, data = _file(tmp_path, "g.h5", rows=3000, shape=(256,), chunk_rows=200, **filters[name])
    with h5gds.Loader([path], 64, dataset=["x", "label"], like="cupy", staging=staging, window="256KiB",
                      buffer="4MiB", seed=5) as ld:
        _check_device_epoch(ld, data)
        if ld._decoder.gpu_decoded == 0:
            pytest.fail(f"{name}: no chunk was decoded on the GPU (nvCOMP missing? H5GDS_NVCOMP_LIB)")


@pytest.mark.gpu
def test_device_batches_cache_then_exact(tmp_path):
    if _gpu_module() is None:
        pytest.skip("needs CuPy and a CUDA GPU")
    import cupy
    path, data = _file(tmp_path, "g.h5", rows=2000, shape=(128,), chunk_rows=300)  # a cut last chunk
    with h5gds.Loader([path], 100, dataset="x", like="cupy", cache="loader", window="64KiB") as ld:
        for epoch in (0, 1):
            ld.set_epoch(epoch)
            x = np.concatenate([cupy.asnumpy(b) for b in ld])
            np.testing.assert_array_equal(x, data[ld.indices()])
        assert ld.epoch_order(1) == "exact"


@pytest.mark.parametrize("like", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def test_cache_after_an_epoch_left_early(tmp_path, like):
    """An epoch left after one batch: the cache must not count rows whose
    chunks were read but not yet decoded (decoding waits for the group; host
    batches decode as soon as a group is issued, device batches' chunk reads
    are still in flight when the epoch is left)."""
    if like == "cupy" and _gpu_module() is None:
        pytest.skip("needs CuPy and a CUDA GPU")
    path, data = _file(tmp_path, "c.h5", rows=20000, chunk_rows=50)  # more windows than reads in flight
    with h5gds.Loader([path], 20, dataset="x", like=like, cache="loader", window="16KiB", buffer="64KiB",
                      seed=2) as ld:
        it = iter(ld)
        next(it)
        it.close()
        ld.set_epoch(1)
        x = np.concatenate([_host(b) for b in ld])
        np.testing.assert_array_equal(x, data[ld.indices()])


def _host(batch):
    return batch.get() if hasattr(batch, "get") else np.asarray(batch)


def _check_device_epoch(ld: h5gds.Loader, data: np.ndarray) -> None:
    """One epoch of device batches (CuPy arrays, or their stand-in): every
    sample once, each the row written."""
    import cupy
    xs, ls = [], []
    for x, label in ld:
        assert isinstance(x, cupy.ndarray)
        xs.append(x.get())
        ls.append(label.get())
    x_all, label_all = np.concatenate(xs), np.concatenate(ls)
    assert sorted(label_all.tolist()) == list(range(len(data)))
    np.testing.assert_array_equal(x_all, data[label_all])


# ---- the device path's arithmetic on the host: CuPy's stand-in and a zlib decoder ----------


@pytest.fixture
def fake_gpu_decode(monkeypatch):
    return install_decode_stand_in(monkeypatch)


def _rewrite_chunks(path: str, every: int, how: str) -> int:
    """Rewrites every `every`-th stored chunk of "x" (gzip + shuffle):
    "trailing": its zlib stream with 16 bytes after it (HDF5's zlib reads
    it, the GPU's decoder refuses it); "adler": its Adler-32 (the stream's
    last byte) wrong (both refuse it). Returns the chunks rewritten."""
    n = 0
    with h5py.File(path, "r+") as f:
        d = f["x"]
        for i in range(0, d.id.get_num_chunks(), every):
            offset = d.id.get_chunk_info(i).chunk_offset
            mask, stored = d.id.read_direct_chunk(offset)
            stored = bytearray(stored)
            if how == "trailing":
                stored += bytes(range(1, 17))
            else:
                stored[-1] ^= 0x5A
            d.id.write_direct_chunk(offset, bytes(stored), mask)
            n += 1
    return n


REFUSALS = ["stand-in", pytest.param("gpu", marks=pytest.mark.gpu)]


def _gpu_decodes(like: str) -> bool:
    """Whether the decoder the test runs is the GPU's (or its stand-in), not HDF5's alone."""
    if like == "gpu" and _gpu_module() is None:
        pytest.skip("needs CuPy and a CUDA GPU")
    return like == "stand-in" or nvcomp_missing() is None


@pytest.mark.parametrize("chunk", [(4, 37, 72), (3, 12, 24)], ids=["whole-samples", "tiles"])
@pytest.mark.parametrize("like", REFUSALS)
def test_chunks_the_gpu_refuses_are_read_by_hdf5(tmp_path, monkeypatch, like, chunk):
    """A chunk whose zlib stream has bytes after its end: HDF5's filters
    read it (zlib stops at the stream's end), the GPU's decoder refuses it.
    HDF5's filters read those chunks alone, in the GPU's place, and the GPU
    decodes the others: every sample as h5py reads it. On the GPU the tiled
    case has the codec report the others undefined (as after a
    decompressor's garbage): they are decoded again without the refused."""
    gpu_decodes = _gpu_decodes(like)
    calls = install_decode_stand_in(monkeypatch) if like == "stand-in" else None
    if like == "gpu" and chunk[1] != 37:  # the others decoded again without the refused ones, as after garbage
        monkeypatch.setenv("H5GDS_CODEC_TEST_REDECODE", "1")
    path, _ = _tiled_file(tmp_path, 800, (37, 72), chunk)
    refused = _rewrite_chunks(path, 90 if chunk[1] == 37 else 97, "trailing")
    assert refused == (3 if chunk[1] == 37 else 34), refused
    with h5py.File(path, "r") as f:
        want = f["x"][()]
    with h5gds.Loader([path], 16, dataset=["x", "label"], like="cupy", window="128KiB", buffer="512KiB",
                      seed=4) as ld:
        _check_device_epoch(ld, want)
        if gpu_decodes:
            assert ld._decoder.hdf5_chunks == refused and ld._decoder.hdf5_decoded_rows == 0, \
                (ld._decoder.hdf5_chunks, ld._decoder.hdf5_decoded_rows)
            assert ld._decoder.gpu_decoded > 0
        else:
            assert ld._decoder.hdf5_decoded_rows > 0
    assert calls is None or calls["refused"] == refused


@pytest.mark.parametrize("like", REFUSALS)
def test_a_chunk_corrupt_for_both_names_both_findings(tmp_path, monkeypatch, like):
    """A chunk that HDF5's filters fail on too: the loader's error names the
    file, the GPU's finding (chunk, filter) and HDF5's."""
    gpu_decodes = _gpu_decodes(like)
    if like == "stand-in":
        install_decode_stand_in(monkeypatch)
    path, _ = _tiled_file(tmp_path, 400, (37, 72), (4, 37, 72))
    _rewrite_chunks(path, 1000, "adler")  # the first chunk
    with h5py.File(path, "r") as f:
        with pytest.raises(OSError):
            f["x"][:4]
    with h5gds.Loader([path], 16, dataset=["x", "label"], like="cupy", window="128KiB", buffer="1MiB",
                      seed=4) as ld:
        with pytest.raises(OSError) as err:
            for _ in ld:
                pass
    message = str(err.value)
    assert "tiles.h5" in message, message
    if gpu_decodes:
        assert "could not be decoded on the GPU" in message and "HDF5's own filters failed on it as well" in message, message


@pytest.mark.parametrize("like", REFUSALS)
def test_an_epoch_left_early_ends_its_decodes(tmp_path, monkeypatch, like):
    """An epoch left after its first batch, while the next groups' decodes
    run in the background: each is ended (waited for, its memory kept for
    reuse), and the next epochs read every sample right."""
    gpu_decodes = _gpu_decodes(like)
    calls = install_decode_stand_in(monkeypatch) if like == "stand-in" else None
    path, want = _tiled_file(tmp_path, 800, (37, 72), (4, 37, 72))
    with h5gds.Loader([path], 16, dataset=["x", "label"], like="cupy", window="128KiB", buffer="512KiB",
                      seed=4) as ld:
        for epoch in range(3):
            ld.set_epoch(epoch)
            it = iter(ld)
            next(it)
            if calls is not None:
                assert calls["begun"] > calls["ended"], calls  # a later group's decode is still open
            it.close()
            if calls is not None:
                assert calls["begun"] == calls["ended"], calls
        retired = len(decode_module._RETIRED)
        _check_device_epoch(ld, want)
        assert len(decode_module._RETIRED) == retired
        if gpu_decodes:
            assert ld._decoder.gpu_decoded > 0
        # the decoder closed (as Loader.close does) with an iteration still
        # open: its decodes end first, and the iteration's end ends nothing twice
        open_iteration = iter(ld)
        next(open_iteration)
        ld._decoder.close()
        assert not ld._decoder._open
        if calls is not None:
            assert calls["begun"] == calls["ended"], calls
        open_iteration.close()
        assert len(decode_module._RETIRED) == retired


def test_a_cache_fill_keeps_few_decodes_open(tmp_path, monkeypatch):
    """A cache fill reads as far ahead as its reads in flight allow (no
    buffer bounds it): the decodes of groups more than one behind end as
    the next begins, so that their memory comes back; every sample right."""
    calls = install_decode_stand_in(monkeypatch)
    path, want = _tiled_file(tmp_path, 800, (37, 72), (4, 37, 72))
    with h5gds.Loader([path], 16, dataset=["x", "label"], like="cupy", window="64KiB", buffer="256KiB",
                      cache="loader", seed=4) as ld:
        _check_device_epoch(ld, want)
    assert calls["begun"] == calls["ended"] > 8, calls
    assert calls["most_open"] <= 3, calls  # the group begun, the one before, and one ending
    assert calls["waited_unlocked"] == calls["ended"], calls  # h5py's lock free while a decode is waited for


@pytest.mark.parametrize("staging", ["pinned", "device"])
def test_a_group_decodes_in_parts_as_its_windows_are_read(tmp_path, monkeypatch, staging):
    """H5GDS_LOADER_DECODE_PARTS: a group's windows decode in that many
    calls, each begun once its windows are read; every sample right
    whatever the count; a count out of range is refused."""
    calls = install_decode_stand_in(monkeypatch)
    path, want = _tiled_file(tmp_path, 800, (37, 72), (4, 37, 72))
    made = {}
    for parts in ("1", "4", "64"):
        monkeypatch.setenv("H5GDS_LOADER_DECODE_PARTS", parts)
        before = calls["n"]
        with h5gds.Loader([path], 16, dataset=["x", "label"], like="cupy", window="64KiB", buffer="1MiB",
                          staging=staging, seed=4) as ld:
            _check_device_epoch(ld, want)
        made[parts] = calls["n"] - before
    assert made["1"] < made["4"] < made["64"], made
    assert calls["begun"] == calls["ended"], calls
    monkeypatch.delenv("H5GDS_LOADER_DECODE_PARTS")
    with h5gds.Loader([path], 16, dataset=["x", "label"], like="cupy", window="64KiB", buffer="1MiB") as ld:
        assert ld._decode_parts == 1  # Deflate: one call a group
    if importlib.util.find_spec("hdf5plugin") is not None:
        import hdf5plugin
        zpath = os.path.join(os.fspath(tmp_path), "zstd.h5")
        with h5py.File(zpath, "w") as f:
            f.create_dataset("x", data=want, chunks=(4, 37, 72), **hdf5plugin.Zstd())
            f.create_dataset("label", data=np.arange(len(want), dtype=np.int64))
        with h5gds.Loader([zpath], 16, dataset=["x", "label"], like="cupy", window="64KiB", buffer="1MiB",
                          seed=4) as ld:
            assert ld._decode_parts == 4  # plain zstd: parts decode block by block
    for bad in ("0", "65", "four"):
        monkeypatch.setenv("H5GDS_LOADER_DECODE_PARTS", bad)
        with pytest.raises(ValueError, match="H5GDS_LOADER_DECODE_PARTS"):
            h5gds.Loader([path], 16, dataset=["x", "label"], like="cupy", window="64KiB", buffer="1MiB")


@pytest.mark.parametrize("staging", ["pinned", "device"])
@pytest.mark.parametrize("cache", ["off", "loader"])
@pytest.mark.parametrize("shape,chunk", [((37, 72), (1, 12, 24)), ((6, 37, 19), (3, 4, 10, 8)), ((100,), (10, 128)),
                                         ((37, 72), (7, 37, 72))],
                         ids=["netcdf-tiles", "3d-edges", "wider-than-rows", "whole-samples-cut"])
def test_device_path_places_every_chunk_on_a_stand_in(tmp_path, fake_gpu_decode, staging, cache, shape, chunk):
    """The GPU path's reads, decode destinations (tile-major scratch, in
    place) and copies, with a group of windows over 4 MiB (the decoder's
    memory taken again for a larger need), two files in one column, and
    two epochs (the second exact from the loader's cache)."""
    rows = 1501 if len(shape) == 1 else 811
    a, data_a = _tiled_file(tmp_path, rows, shape, chunk)
    b = os.path.join(os.fspath(tmp_path), "second.h5")
    os.replace(a, b)
    a, data_a = _tiled_file(tmp_path, rows, shape, chunk)
    with h5py.File(b, "r") as f:
        data = np.concatenate([data_a, f["x"][()]])
    with h5py.File(b, "r+") as f:
        f["label"][...] = np.arange(rows, 2 * rows)
    with h5gds.Loader([a, b], 32, dataset=["x", "label"], like="cupy", staging=staging, cache=cache,
                      window="1MiB", buffer="6MiB", seed=3) as ld:
        for epoch in (0, 1):
            ld.set_epoch(epoch)
            _check_device_epoch(ld, data)
        assert ld._decoder.gpu_decoded > 0 and ld._decoder.hdf5_decoded_rows == 0
    assert fake_gpu_decode["n"] > 0
    assert fake_gpu_decode["begun"] == fake_gpu_decode["ended"] == fake_gpu_decode["n"]


@pytest.mark.parametrize("like", ["numpy", "stand-in"])
@pytest.mark.parametrize("chunk", [(4, 12, 24), (4, 37, 72)], ids=["tiles", "whole-samples"])
def test_chunks_never_written_read_as_the_fill_value(tmp_path, monkeypatch, like, chunk):
    """Rows of a compressed dataset left unwritten (netCDF's records not
    yet written, a preallocated dataset filled in part): HDF5 reads the
    windows that hold such chunks (the fill value), the GPU the others."""
    calls = install_decode_stand_in(monkeypatch) if like == "stand-in" else None
    path = os.path.join(os.fspath(tmp_path), "holes.h5")
    data = _data(400, (37, 72), "f4", 6)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=data.shape, dtype="f4", chunks=chunk, compression="gzip", shuffle=True,
                             fillvalue=-1.5)
        d[:96] = data[:96]
        d[200:] = data[200:]  # rows 96-199 never written
        f.create_dataset("label", data=np.arange(400, dtype=np.int64))
        want = d[()]
    assert (want[100:196] == -1.5).all()
    with h5gds.Loader([path], 16, dataset=["x", "label"], like="numpy" if like == "numpy" else "cupy",
                      window="128KiB", buffer="1MiB", seed=4) as ld:
        if like == "numpy":
            x, label = _epoch(ld)
            assert sorted(label.tolist()) == list(range(400))
            np.testing.assert_array_equal(x, want[label])
        else:
            _check_device_epoch(ld, want)
            assert ld._decoder.gpu_decoded > 0 and ld._decoder.hdf5_decoded_rows >= 96
            assert calls is not None and calls["n"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("staging", ["pinned", "device"])
@pytest.mark.parametrize("shape,chunk,name", [((37, 72), (1, 12, 24), "gzip-shuffle"), ((37, 72), (3, 12, 24), "zstd"),
                                              ((6, 37, 19), (2, 4, 10, 8), "blosc-lz4"),
                                              ((100,), (10, 128), "gzip-shuffle")],
                         ids=["netcdf-tiles", "tiles-of-3-rows", "3d-edges", "wider-than-rows"])
def test_device_batches_of_tiled_chunks_decoded_on_the_gpu(tmp_path, staging, shape, chunk, name):
    if _gpu_module() is None:
        pytest.skip("needs CuPy and a CUDA GPU")
    filters = _plugin_filters()
    if name not in filters:
        pytest.skip(f"{name}: hdf5plugin is not installed")
    path, data = _tiled_file(tmp_path, 301, shape, chunk, **filters[name])  # a cut last chunk row
    with h5gds.Loader([path], 16, dataset=["x", "label"], like="cupy", staging=staging, window="64KiB",
                      buffer="512KiB", seed=7) as ld:
        _check_device_epoch(ld, data)
        if ld._decoder.gpu_decoded == 0:
            pytest.fail(f"{name}: no chunk was decoded on the GPU (nvCOMP missing? H5GDS_NVCOMP_LIB)")
