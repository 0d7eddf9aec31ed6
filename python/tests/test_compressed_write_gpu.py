"""GPU writes of compressed datasets in many batches: batch k + 1 is
encoded while batch k is written (the driver holds the chunks' writes and
starts each batch as one request). The files read back equal through h5py
(HDF5's own filters), the statistics count every chunk, and metadata
flushed in the middle of the write (a tiny metadata cache) never reaches
the file before the chunks it indexes. Marker `gpu`; the GPU-encode
assertions need nvCOMP."""

import h5py
import numpy as np
import pytest

import h5gds
from support import hdf5plugin_or_none, nvcomp_missing

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")

NVCOMP = nvcomp_missing()


def field(shape, seed=11):
    """Smooth float32 data with noise, 3 decimals: compresses about 2x."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 6 * np.pi, shape[0] * shape[1], dtype=np.float32).reshape(shape)
    return np.round(np.sin(x) + rng.normal(0, 0.05, shape).astype(np.float32), 3).astype(np.float32)


@pytest.mark.parametrize("tiny_metadata_cache", [False, True], ids=["cache", "tiny-metadata-cache"])
def test_gpu_compressed_write_in_many_batches(tmp_path, monkeypatch, tiny_metadata_cache):
    if NVCOMP is not None:
        pytest.skip(NVCOMP)
    monkeypatch.setenv("H5GDS_DECODE_BATCH_MIB", "1")  # 32 chunks of 32 KiB a batch: 8 batches
    arr = field((2048, 1024))
    path = tmp_path / "many.h5"
    with h5py.File(path, "w", driver="gds") as f:
        if tiny_metadata_cache:  # chunk-index blocks evicted (written) while chunks are being stored
            cfg = f.id.get_mdc_config()
            cfg.set_initial_size = True
            cfg.initial_size = 4096
            cfg.max_size = 4096
            cfg.min_size = 2048
            cfg.incr_mode = 0  # H5C_incr__off
            cfg.decr_mode = 0  # H5C_decr__off
            cfg.flash_incr_mode = 0
            f.id.set_mdc_config(cfg)
        d = f.create_dataset("x", shape=arr.shape, dtype="f4", chunks=(8, 1024), compression="gzip", shuffle=True)
        h5gds.write(d, cupy.asarray(arr))
        assert h5gds.last_route() == "gpu-encode"
        st = h5gds.last_encode_stats()
        storage = d.id.get_storage_size()
    assert st.chunks == 256
    assert st.decoded_bytes == arr.nbytes
    assert st.stored_bytes == storage < arr.nbytes
    assert st.encode_s > 0 and st.total_s >= st.encode_s
    with h5py.File(path, "r") as ref:
        np.testing.assert_array_equal(ref["x"][()], arr)


def test_gpu_compressed_write_then_more_writes_of_the_file(tmp_path, monkeypatch):
    """Held writes end with the call: host writes and another GPU write of
    the same file right after land where they belong."""
    if NVCOMP is not None:
        pytest.skip(NVCOMP)
    monkeypatch.setenv("H5GDS_DECODE_BATCH_MIB", "1")
    a, b = field((512, 1024), seed=1), field((512, 1024), seed=2)
    path = tmp_path / "two.h5"
    with h5py.File(path, "w", driver="gds") as f:
        da = f.create_dataset("a", shape=a.shape, dtype="f4", chunks=(16, 1024), compression="gzip")
        h5gds.write(da, cupy.asarray(a))
        assert h5gds.last_route() == "gpu-encode"
        f["host"] = np.arange(1000, dtype="i8")
        db = f.create_dataset("b", shape=b.shape, dtype="f4", chunks=(16, 1024), compression="gzip")
        h5gds.write(db, cupy.asarray(b))
        assert h5gds.last_route() == "gpu-encode"
    with h5py.File(path, "r") as ref:
        np.testing.assert_array_equal(ref["a"][()], a)
        np.testing.assert_array_equal(ref["b"][()], b)
        np.testing.assert_array_equal(ref["host"][()], np.arange(1000))


def _incompressible_pipelines():
    out = [("gzip+shuffle+fletcher32", dict(compression="gzip", shuffle=True, fletcher32=True))]
    hp = hdf5plugin_or_none()
    if hp is not None:
        out += [("zstd+fletcher32", dict(**hp.Zstd(clevel=3), fletcher32=True)),
                ("bitshuffle-zstd", dict(**hp.Bitshuffle(cname="zstd"))),
                ("lz4", dict(**hp.LZ4())),
                ("blosc-lz4", dict(**hp.Blosc(cname="lz4", shuffle=hp.Blosc.SHUFFLE)))]
    return out


INCOMPRESSIBLE_PIPELINES = _incompressible_pipelines()


@pytest.mark.parametrize("fname,kw", INCOMPRESSIBLE_PIPELINES, ids=[p[0] for p in INCOMPRESSIBLE_PIPELINES])
def test_incompressible_gpu_writes_then_hdf5_in_the_same_session(tmp_path, fname, kw):
    """HDF5 keeps the filter mask a chunk had before an H5Dwrite_chunk in its
    cache of the last chunk looked up: GPU writes store incompressible
    chunks through every filter (mask 0), so that HDF5's own reads and
    partial writes in the same session (h5py, route host-staged) decode them
    right. Where a chunk exists with a filter skipped by HDF5's filters, the
    GPU write leaves it to them."""
    if NVCOMP is not None:
        pytest.skip(NVCOMP)
    rng = np.random.default_rng(7)
    noise = np.frombuffer(rng.bytes(4 * 3000 * 4), dtype="<i4").reshape(4, 3000).copy()
    path = tmp_path / "n.h5"
    with h5py.File(path, "w", driver="gds") as f:
        d = f.create_dataset("x", shape=noise.shape, dtype="<i4", chunks=(2, 1000), **kw)
        h5gds.write(d, cupy.asarray(noise[:2]), (slice(0, 2),))       # new chunks, GPU
        assert h5gds.last_route() == "gpu-encode"
        assert [d.id.get_chunk_info(i).filter_mask for i in range(d.id.get_num_chunks())] == [0, 0, 0]
        np.testing.assert_array_equal(d[:2], noise[:2])               # HDF5's read, same session
        d[0, 10:20] = np.arange(10)                                   # HDF5's partial write of a GPU chunk
        want = noise.copy()
        want[0, 10:20] = np.arange(10)
        want[2:] = 0
        np.testing.assert_array_equal(d[()], want)
        d[2:] = noise[2:]                                             # HDF5's filters: masks where skipped
        want[2:] = noise[2:]
        masks = [d.id.get_chunk_info(i).filter_mask for i in range(d.id.get_num_chunks())]
        h5gds.write(d, cupy.asarray(noise[2:]), (slice(2, 4),))       # over chunks HDF5 stored
        skipped = any(m != 0 for m in masks[3:])
        assert h5gds.last_route() == ("host-staged" if skipped else "gpu-encode"), (masks, h5gds.last_route())
        np.testing.assert_array_equal(d[()], want)
        back = cupy.asnumpy(h5gds.read(d))
        np.testing.assert_array_equal(back, want)
    with h5py.File(path, "r") as ref:
        np.testing.assert_array_equal(ref["x"][()], want)
