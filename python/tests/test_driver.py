"""The package in a process with h5py: one libhdf5, driver="gds", host round trips."""
import subprocess
import sys
import warnings

import h5py
import numpy as np
import pytest

import h5gds
from h5gds._lib import loaded_libhdf5


def test_one_libhdf5_in_process(tmp_h5):
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        f["x"] = np.arange(10)
    maps = loaded_libhdf5()
    assert len(maps) == 1, maps
    # and it is h5py's: the library h5py's extension modules use
    assert "hdf5" in maps[0]


def test_native_library_links_no_libhdf5():
    import pathlib
    lib = pathlib.Path(h5gds.__file__).with_name("libh5gds_py.so")
    out = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("readelf not available")
    assert "libhdf5" not in out.stdout


def test_fresh_interpreter_import_order():
    # importing h5gds first (it imports h5py itself) also works, and h5py's
    # own HDF5 is the one in use
    code = ("import h5gds, h5py; from h5gds._lib import loaded_libhdf5; "
            "assert len(loaded_libhdf5()) == 1; assert h5gds.hdf5_version == h5py.version.hdf5_version_tuple[:3]; "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_version_check():
    from h5gds._lib import _version_ok
    assert _version_ok((1, 14, 5), (1, 14, 1))
    assert not _version_ok((1, 14, 5), (1, 14, 0))  # no H5Pset_selection_io
    assert _version_ok((1, 14, 5), (2, 0, 0))
    assert not _version_ok((1, 14, 5), (1, 12, 2))
    assert not _version_ok((1, 14, 5), (1, 10, 8))
    assert not _version_ok((2, 0, 0), (1, 14, 5))


def test_driver_name_and_options(tmp_h5):
    assert "gds" in h5py.registered_drivers()
    with h5py.File(tmp_h5, "w", driver="gds", threads=3, io_block_size="16MiB", direct="off", stats=False) as f:
        assert f.driver == "gds"
        cfg = h5gds.fapl_config(f)
        assert "threads=3" in cfg and "io_block_size=16777216" in cfg and "direct=off" in cfg
    with h5py.File(tmp_h5, "r") as f:
        assert f.driver == "sec2"  # h5py's own answer for its drivers is untouched


@pytest.mark.parametrize("bad", [{"threads": 0}, {"alignment": 3000}, {"nonsense": 1}, {"io_block_size": "lots"}])
def test_bad_driver_options(tmp_h5, bad):
    with pytest.raises(ValueError, match=list(bad)[0]):
        h5py.File(tmp_h5, "w", driver="gds", **bad)


@pytest.mark.parametrize("dtype", ["f4", "f8", "i2", "u1", "c8"])
@pytest.mark.parametrize("chunks", [None, (3, 4, 5)])
def test_host_round_trip_against_default_driver(tmp_h5, dtype, chunks):
    rng = np.random.default_rng(1)
    data = (rng.random((7, 9, 11)) * 100).astype(dtype)
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = h5gds.create_dataset(f, "x", data=data, chunks=chunks)
        assert d.chunks == chunks
        for sel in [(), (Ellipsis,), (2,), (slice(1, 6, 2), Ellipsis, 3), (slice(None), 4, slice(0, 11, 5)), (-1,)]:
            got = h5gds.read(d, sel, like="numpy")
            np.testing.assert_array_equal(got, data[sel])
        h5gds.write(d, np.full((3, 11), 7, dtype), (slice(0, 6, 2), 1))
        data[0:6:2, 1] = 7
        out = np.empty((9, 11), dtype)
        assert h5gds.read(d, 4, out=out) is out
        np.testing.assert_array_equal(out, data[4])
    with h5py.File(tmp_h5, "r") as f:  # h5py's default driver reads what gds wrote
        np.testing.assert_array_equal(f["x"][()], data)
    with h5py.File(tmp_h5, "r", driver="gds") as f:
        np.testing.assert_array_equal(h5gds.read(f["x"], like="numpy"), data)


def test_create_dataset_properties(tmp_h5):
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = h5gds.create_dataset(f, "x", data=np.ones((4, 4), "f4"), chunks=(2, 2))
        dcpl = d.id.get_create_plist()
        assert dcpl.get_fill_time() == h5py.h5d.FILL_TIME_NEVER
        assert dcpl.get_alloc_time() == h5py.h5d.ALLOC_TIME_EARLY
        e = h5gds.create_dataset(f, "e", shape=(5,), dtype="i4")
        assert e.id.get_offset() is not None  # allocated early, before any write
        with pytest.raises(ValueError, match="incompatible"):
            h5gds.create_dataset(f, "bad", data=np.ones(4), shape=(5,))
        assert "bad" not in f


def test_numpy_scalar_and_list_writes(tmp_h5):
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = f.create_dataset("x", shape=(4,), dtype="i8")
        h5gds.write(d, [1, 2, 3, 4])
        h5gds.write(d, 9, (2,))
        np.testing.assert_array_equal(d[()], [1, 2, 9, 4])
        assert h5gds.read(d, 1, like="numpy") == 2


def test_torch_cpu_tensor_round_trip(tmp_h5):
    torch = pytest.importorskip("torch")
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        d = h5gds.create_dataset(f, "x", data=t)
        out = torch.empty(3, 4)
        h5gds.read(d, out=out)
        assert torch.equal(out, t)


def test_no_warning_for_host_arrays_on_sec2(tmp_h5):
    with h5py.File(tmp_h5, "w") as f:
        d = f.create_dataset("x", data=np.arange(5))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(h5gds.read(d, like="numpy"), np.arange(5))


def test_codec_statistics_of_a_thread_that_did_no_gpu_codec_work(tmp_h5):
    """last_decode_stats / last_encode_stats describe this thread's last
    GPU-decoded read and GPU-encoded write: a host read and write (HDF5's
    filters) change neither, and a fresh thread has all zeros."""
    import dataclasses
    import threading

    with h5py.File(tmp_h5, "w", driver="gds") as f:
        h5gds.create_dataset(f, "z", data=np.arange(4096, dtype="i4"), chunks=(512,), compression="gzip")
        assert h5gds.last_route() == "host"
        np.testing.assert_array_equal(h5gds.read(f["z"], like="numpy"), np.arange(4096))
    got = {}

    def fresh_thread() -> None:
        got["decode"], got["encode"] = h5gds.last_decode_stats(), h5gds.last_encode_stats()

    t = threading.Thread(target=fresh_thread)
    t.start()
    t.join()
    for stats, cls in ((got["decode"], h5gds.DecodeStats), (got["encode"], h5gds.EncodeStats)):
        assert isinstance(stats, cls)
        assert all(v == 0 for v in dataclasses.asdict(stats).values()), stats
        with pytest.raises(dataclasses.FrozenInstanceError):
            stats.chunks = 1  # type: ignore[misc]
    assert set(dataclasses.asdict(got["decode"])) == {"chunks", "stored_bytes", "decoded_bytes", "read_wait_s",
                                                      "decode_s", "total_s", "hdf5_chunks"}
    assert set(dataclasses.asdict(got["encode"])) == {"chunks", "decoded_bytes", "stored_bytes", "encode_s",
                                                      "store_wait_s", "total_s"}


def test_a_large_dataset_written_in_part_stays_sparse(tmp_path):
    """The space the driver reserves ahead of large writes (fallocate) must
    not allocate the holes of a dataset written in part: a 4 GiB dataset
    with 2 MiB written takes about what sec2's file takes on disk."""
    used = {}
    for driver in (None, "gds"):
        path = tmp_path / f"sparse-{driver}.h5"
        with h5py.File(path, "w", driver=driver) as f:
            x = f.create_dataset("x", shape=(4 << 30 >> 3,), dtype="f8")
            x[: 1 << 17] = 1.0  # 1 MiB at the start
            x[1 << 28:(1 << 28) + (1 << 17)] = 2.0  # 1 MiB at 2 GiB
            y = f.create_dataset("y", shape=(1 << 20,), dtype="f8", chunks=(1 << 17,))
            y[:] = 3.0  # 8 MiB of chunks allocated past x
        with h5py.File(path, "r") as f:
            assert f["x"][0] == 1.0 and f["x"][1 << 28] == 2.0 and f["x"][1 << 20] == 0.0
            assert (f["y"][()] == 3.0).all()
        used[driver] = path.stat().st_blocks * 512
    if used[None] > 1 << 30:
        pytest.skip(f"this file system keeps no holes (sec2's file takes {used[None]} bytes)")
    # the reservation may run up to 64 MiB past a write
    assert used["gds"] <= used[None] + (200 << 20), f"gds's file takes {used['gds']} bytes, sec2's {used[None]}"
