"""The HDF5 declarations the native library was compiled with, and the
import-time check that the running HDF5 lays out the driver structs as
they say (python/native/abi_check.c)."""
import ctypes

from h5gds import _build_info, _lib


def test_declarations_recorded():
    assert _build_info.declarations in ("own", "real")
    assert _build_info.hdf5_compiled[:2] == (1, 14) or _build_info.hdf5_compiled[0] == 2


def test_running_hdf5_layout_matches():
    why = ctypes.create_string_buffer(1024)
    assert _lib.native.h5gds_py_check_hdf5_abi(why, len(why)) == 0, why.value


def test_version_rule_names_both_series():
    assert _lib._version_ok((1, 14, 1), (2, 0, 0))
    assert _lib._version_ok((1, 14, 1), (1, 14, 6))
    assert not _lib._version_ok((1, 14, 1), (1, 12, 3))
    assert not _lib._version_ok((1, 14, 1), (3, 0, 0))
