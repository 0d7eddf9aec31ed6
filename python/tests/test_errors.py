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


@pytest.mark.parametrize("sel", ["abc", ("abc",), (slice(0, 2), "a"), None, (0, None), 1.5, [3, 1],
                                 (slice(0, 2), slice(0, 2), 0)])
def test_bad_selections_raise_what_h5py_raises(dset, sel):
    try:
        dset[sel]
    except Exception as e:  # h5py's exception for this selection
        want: type = type(e)
    else:
        pytest.fail(f"h5py accepted {sel!r}")
    with pytest.raises(want):
        h5gds.read(dset, sel, like="numpy")
    with pytest.raises(want):
        h5gds.write(dset, np.zeros((4, 6), "f4"), sel)


def test_field_names_of_a_compound_are_refused_clearly(tmp_h5):
    with h5py.File(tmp_h5, "w", driver="gds") as f:
        d = f.create_dataset("c", data=np.zeros(4, [("a", "f4"), ("b", "i4")]))
        assert d["a"].shape == (4,)  # h5py reads a field
        with pytest.raises(ValueError, match="fields"):
            h5gds.read(d, "a", like="numpy")
        with pytest.raises(ValueError, match="fields"):
            h5gds.write(d, np.zeros(4, "f4"), ("a",))


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


def test_compound_with_array_fields_read_as_h5py_reads_it(tmp_path):
    """A compound whose field is an array (fixed-size) is moved like any
    fixed-size data; only the dataset's own type being an array is refused."""
    dt = np.dtype([("id", "<i8"), ("pos", "<f4", (3,))])
    arr = np.zeros(5, dt)
    arr["id"] = np.arange(5)
    arr["pos"] = np.arange(15, dtype="f4").reshape(5, 3)
    p = tmp_path / "c.h5"
    with h5py.File(p, "w") as f:
        f["x"] = arr
    with h5py.File(p, "r", driver="gds") as f:
        assert h5gds.read(f["x"], like="numpy").tobytes() == arr.tobytes()


@pytest.mark.parametrize("kind", ["vlen-str", "vlen-int", "ref", "array", "compound-vlen"])
def test_pointer_and_array_types_refused(tmp_path, kind):
    """Variable-length data and references are pointers HDF5 makes in
    memory, HDF5 array types elements with a shape of their own: read and
    write refuse them with TypeError (a read once crashed the process, a
    write stored Python's pointers) and the file stays readable."""
    p = tmp_path / "t.h5"
    with h5py.File(p, "w") as f:
        if kind == "vlen-str":
            d = f.create_dataset("x", data=["ab", "cde"])
        elif kind == "vlen-int":
            d = f.create_dataset("x", (2,), dtype=h5py.vlen_dtype("i4"))
            d[0], d[1] = np.arange(2, dtype="i4"), np.arange(3, dtype="i4")
        elif kind == "ref":
            d = f.create_dataset("x", data=[f.ref], dtype=h5py.ref_dtype)
        elif kind == "array":
            d = f.create_dataset("x", (4,), dtype=np.dtype(("<i2", (2, 3))))
            d[()] = np.arange(24, dtype="i2").reshape(4, 2, 3)
        else:
            f.create_dataset("x", (3,), dtype=np.dtype([("a", "f4"), ("s", h5py.string_dtype())]))
        want = repr(f["x"][()].tolist())
    with h5py.File(p, "r+", driver="gds") as f:
        with pytest.raises(TypeError, match="h5gds does not move"):
            h5gds.read(f["x"], like="numpy")
        with pytest.raises(TypeError):
            h5gds.write(f["x"], np.array([b"xy", b"z"], dtype=object) if kind != "array"
                        else np.zeros((4, 2, 3), "i2"))
    with h5py.File(p, "r") as f:
        assert repr(f["x"][()].tolist()) == want


@pytest.mark.parametrize("layout", ["contiguous", "chunked"])
def test_never_filled_storage_reads_as_h5py_does(tmp_path, layout):
    """Fill time never and storage not (all) written: HDF5 leaves those
    bytes of the buffer as they were, h5py reads into zeros; so does a new
    array of h5gds.read, whatever the allocator held before."""
    p = tmp_path / "n.h5"
    with h5py.File(p, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        if layout == "chunked":
            dcpl.set_chunk((256,))
        h5py.h5d.create(f.id, b"x", h5py.h5t.NATIVE_FLOAT, h5py.h5s.create_simple((4096,)), dcpl=dcpl)
        if layout == "chunked":
            f["x"][1000:1100] = 5.0
    with h5py.File(p, "r", driver="gds") as f:
        want = f["x"][()]
        for _ in range(3):
            junk = [np.full(4096, 1e30, "f4") for _ in range(8)]
            del junk
            got = h5gds.read(f["x"], like="numpy")
            assert got.tobytes() == want.tobytes()


def test_create_dataset_keeps_a_fill_value_asked_for(tmp_path):
    """h5gds.create_dataset writes no fill value (fill time never) unless
    one is given: then the elements never written read as it."""
    p = tmp_path / "f.h5"
    with h5py.File(p, "w", driver="gds") as f:
        d = h5gds.create_dataset(f, "x", shape=(10,), dtype="f4", chunks=(5,), fillvalue=7)
        h5gds.write(d, np.ones(5, "f4"), (slice(0, 5),))
        plain = h5gds.create_dataset(f, "y", shape=(10,), dtype="f4", chunks=(5,))
        assert plain.id.get_create_plist().get_fill_time() == h5py.h5d.FILL_TIME_NEVER
    with h5py.File(p, "r") as f:
        assert f["x"][()].tolist() == [1] * 5 + [7] * 5


def test_fapl_config_of_other_files(tmp_path):
    p = tmp_path / "s.h5"
    with h5py.File(p, "w") as f:
        with pytest.raises(ValueError, match="not open with driver='gds'"):
            h5gds.fapl_config(f)
    with pytest.raises(TypeError, match="h5py.File"):
        h5gds.fapl_config(None)
