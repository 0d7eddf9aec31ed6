"""Every failure is a Python exception, and a failed write writes nothing."""
import h5py
import numpy as np
import pytest

import h5gds


@pytest.fixture
def dset(tmp_h5):
    f = h5py.File(tmp_h5, "w", driver="gds")
    d = h5gds.create_dataset(f, "x", data=np.arange(24, dtype="f4").reshape(4, 6))
    yield d
    f.close()


def test_out_wrong_dtype(dset):
    with pytest.raises(TypeError, match="dtype"):
        h5gds.read(dset, out=np.empty((4, 6), "f8"))


def test_out_wrong_shape(dset):
    with pytest.raises(ValueError, match="shape"):
        h5gds.read(dset, out=np.empty((4, 5), "f4"))


def test_out_not_contiguous(dset):
    with pytest.raises(ValueError, match="contiguous"):
        h5gds.read(dset, out=np.empty((4, 12), "f4")[:, ::2])


def test_selection_outside_extent(dset):
    with pytest.raises(IndexError):
        h5gds.read(dset, (4,), like="numpy")
    with pytest.raises(IndexError):
        h5gds.write(dset, np.zeros(6, "f4"), (7,))
    with pytest.raises((IndexError, ValueError)):
        h5gds.read(dset, (0, 0, 0), like="numpy")


def test_write_wrong_shape_writes_nothing(dset):
    before = dset[()]
    with pytest.raises(ValueError, match="shape"):
        h5gds.write(dset, np.ones((3, 6), "f4"))
    with pytest.raises(TypeError):
        h5gds.write(dset, np.array(["a"] * 24).reshape(4, 6))
    np.testing.assert_array_equal(dset[()], before)


def test_closed_file(tmp_h5):
    f = h5py.File(tmp_h5, "w", driver="gds")
    d = f.create_dataset("x", data=np.arange(3))
    f.close()
    with pytest.raises(ValueError, match="closed"):
        h5gds.read(d, like="numpy")
    with pytest.raises(ValueError, match="closed"):
        h5gds.write(d, np.arange(3))


def test_read_only_file(tmp_h5):
    with h5py.File(tmp_h5, "w") as f:
        f["x"] = np.arange(3)
    with h5py.File(tmp_h5, "r", driver="gds") as f:
        with pytest.raises(OSError, match="read-only"):
            h5gds.write(f["x"], np.arange(3))
        np.testing.assert_array_equal(f["x"][()], np.arange(3))


def test_not_a_dataset(tmp_h5):
    with h5py.File(tmp_h5, "w") as f:
        with pytest.raises(TypeError):
            h5gds.read(f, like="numpy")
        with pytest.raises(TypeError):
            h5gds.read(np.zeros(3))  # type: ignore[arg-type]


def test_unwritable_out_types(dset):
    with pytest.raises(TypeError):
        h5gds.read(dset, out=[0] * 24)
    with pytest.raises(ValueError, match="like"):
        h5gds.read(dset, like="jax")


def test_hdf5_error_text_in_message(tmp_h5):
    # A failure inside HDF5 (here: a variable-length type cannot be read raw)
    # carries the HDF5 error stack text.
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = f.create_dataset("s", data=np.array([b"ab", b"cd"], dtype="S2"))
        with pytest.raises(TypeError):
            h5gds.read(d, like="cupy") if h5gds.gpu_available() else h5gds.read(d, out=np.empty(2, "S3"))


def test_missing_gpu_result(dset, monkeypatch):
    if h5gds.gpu_available():
        pytest.skip("a GPU is present")
    for like in ("cupy", "torch"):
        with pytest.raises(RuntimeError):
            h5gds.read(dset, like=like)
    # host arrays keep working
    np.testing.assert_array_equal(h5gds.read(dset, like="numpy"), dset[()])
    h5gds.set_array_module(None)
    assert isinstance(h5gds.read(dset), np.ndarray)  # the default without a GPU is numpy


def test_set_array_module(dset):
    try:
        h5gds.set_array_module("numpy")
        assert isinstance(h5gds.read(dset), np.ndarray)
        with pytest.raises(ValueError):
            h5gds.set_array_module("tensorflow")  # type: ignore[arg-type]
    finally:
        h5gds.set_array_module(None)


def test_hdf5_failure_is_oserror_with_stack_text(tmp_h5, monkeypatch):
    # Force an HDF5-level failure: a dataset id whose file was closed under it
    # cannot be used; validation catches that first, so go lower: an invalid
    # memory type id passed straight to the native call.
    from h5gds._lib import hdf5_error_text, native
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = f.create_dataset("x", data=np.arange(3))
        buf = np.empty(3, "i8")
        rc = native.H5Dread_gds(d.id.id, -1, 0, 0, 0, buf.ctypes.data)
        assert rc < 0
        text = hdf5_error_text()
        assert "H5Dread" in text or "not a datatype" in text or "()" in text, text
