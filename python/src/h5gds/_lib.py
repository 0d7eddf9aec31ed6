"""Loading the native library into the process h5py already set up.

The native library (``libh5gds_py.so``) holds the gds driver and the I/O
engine, built from the repository's C sources, but is linked without
libhdf5: its HDF5 symbols must resolve to the libhdf5 h5py loaded. h5py's
wheel loads its private copy (``h5py.libs/libhdf5-<hash>.so``) with local
binding, so nothing else could see its symbols; this module finds that
library in ``/proc/self/maps``, promotes it to global binding with
``RTLD_NOLOAD | RTLD_GLOBAL`` (no second copy is loaded: NOLOAD fails rather
than load one), checks its version against the HDF5 declarations the native
library was compiled with (by default the package's own, python/native/decl),
and then loads the native library with ``RTLD_NOW``, so a symbol that h5py's
HDF5 lacks is an ImportError here, not a crash later; last, the native library
checks that the running HDF5 lays out the driver structs as declared.
"""
from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

import h5py  # noqa: F401  (initialises HDF5 first)
import h5py.h5  # noqa: F401

from . import _build_info

_LIBHDF5_RE = re.compile(r"^libhdf5(?:_serial|_openmpi|_mpich)?(?:-[0-9a-f]+)?\.so(?:\.[0-9.]+)?$")

_c_int64 = ctypes.c_int64
_c_char_p = ctypes.c_char_p
_c_void_p = ctypes.c_void_p
_c_size_t = ctypes.c_size_t
_u64p = ctypes.POINTER(ctypes.c_uint64)


def loaded_libhdf5() -> list[str]:
    """Paths of every libhdf5 (not libhdf5_hl) mapped into this process."""
    paths: list[str] = []
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6:
                continue
            path = parts[5].strip()
            if _LIBHDF5_RE.match(os.path.basename(path)) and path not in paths:
                paths.append(path)
    return paths


def _version_ok(compiled: tuple[int, int, int], running: tuple[int, int, int]) -> bool:
    # 1.14 declarations (the package's own, python/native/decl, or HDF5
    # 1.14 headers) describe a driver class (version 1) and functions that
    # HDF5 1.14.1+ and 2.x keep with the same ABI (checked against 1.14.5's
    # and 2.x headers by tests/declarations/, and against the running
    # library by h5gds_py_check_hdf5_abi below). 1.14.0 lacks
    # H5Pset_selection_io (1.14.1): refused here, with both versions named,
    # rather than by the loader's missing-symbol error. Headers of 2.x need 2.x.
    if compiled[:2] == (1, 14):
        return (running[:2] == (1, 14) and running[2] >= 1) or running[0] == 2
    if compiled[0] == 2:
        return running[0] == 2
    return False


def _load() -> tuple[ctypes.CDLL, ctypes.CDLL, tuple[int, int, int], str]:
    found = loaded_libhdf5()
    if not found:
        raise ImportError(
            "h5gds: h5py's libhdf5 is not a shared library in this process "
            "(h5py built with a static HDF5?); h5gds needs to share it")
    if len(found) > 1:
        raise ImportError(f"h5gds: several libhdf5 are already loaded in this process: {found}")
    hdf5_path = found[0]
    try:
        hdf5 = ctypes.CDLL(hdf5_path, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise ImportError(f"h5gds: cannot promote h5py's {hdf5_path} to global binding: {exc}") from exc
    major, minor, release = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    if hdf5.H5get_libversion(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(release)) < 0:
        raise ImportError("h5gds: H5get_libversion failed")
    running = (major.value, minor.value, release.value)
    compiled = tuple(_build_info.hdf5_compiled)
    if not _version_ok(compiled, running):  # type: ignore[arg-type]
        if getattr(_build_info, "declarations", "real") == "own":
            built = f"with its own HDF5 {'.'.join(map(str, compiled))} declarations"
        else:
            built = f"against HDF5 {'.'.join(map(str, compiled))} headers ({_build_info.hdf5_include})"
        raise ImportError(
            f"h5gds: built {built}, but h5py runs HDF5 {'.'.join(map(str, running))} ({hdf5_path}), which "
            "this build cannot serve: it needs HDF5 1.14 (1.14.1 or later) or 2.x. Install an h5py that "
            "brings one of those")
    native_path = Path(__file__).with_name("libh5gds_py.so")
    try:
        # RTLD_NOW (ctypes always adds it): every HDF5 symbol must resolve in
        # h5py's library now. RTLD_LOCAL: nothing of ours leaks to others.
        native = ctypes.CDLL(str(native_path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        raise ImportError(
            f"h5gds: cannot load {native_path} against h5py's HDF5 {'.'.join(map(str, running))}: {exc}") from exc
    native.h5gds_py_check_hdf5_abi.argtypes = [ctypes.c_char_p, _c_size_t]
    native.h5gds_py_check_hdf5_abi.restype = ctypes.c_int
    why = ctypes.create_string_buffer(1024)
    if native.h5gds_py_check_hdf5_abi(why, len(why)) != 0:
        raise ImportError(f"h5gds: {why.value.decode(errors='replace')} ({hdf5_path})")
    return hdf5, native, running, hdf5_path  # type: ignore[return-value]


hdf5, native, hdf5_version, hdf5_path = _load()

native.h5gds_py_compiled_hdf5.argtypes = [ctypes.POINTER(ctypes.c_uint)]
native.h5gds_py_compiled_hdf5.restype = None
native.h5gds_py_driver_id.argtypes = []
native.h5gds_py_driver_id.restype = _c_int64
native.h5gds_py_set_fapl.argtypes = [_c_int64, _c_char_p]
native.h5gds_py_set_fapl.restype = ctypes.c_int
native.h5gds_py_get_fapl.argtypes = [_c_int64, ctypes.c_char_p, _c_size_t]
native.h5gds_py_get_fapl.restype = ctypes.c_int
native.h5gds_py_error_text.argtypes = [ctypes.c_char_p, _c_size_t]
native.h5gds_py_error_text.restype = _c_size_t
native.h5gds_py_file_open.argtypes = [_c_char_p, _c_char_p, ctypes.c_int, ctypes.POINTER(_c_void_p),
                                      ctypes.c_char_p, _c_size_t]
native.h5gds_py_file_open.restype = ctypes.c_int
native.h5gds_py_file_close.argtypes = [_c_void_p]
native.h5gds_py_file_close.restype = None
native.h5gds_py_file_submit.argtypes = [_c_void_p, ctypes.c_int, ctypes.c_int, _c_size_t, _u64p, _u64p, _u64p, _c_void_p,
                                        ctypes.POINTER(_c_void_p), ctypes.c_char_p, _c_size_t]
native.h5gds_py_file_submit.restype = ctypes.c_int
native.h5gds_py_decode_chunks_begin.argtypes = [_c_int64, _c_size_t, _u64p, _u64p, ctypes.POINTER(ctypes.c_uint32),
                                                _u64p, _u64p, _c_size_t, ctypes.c_uint64, _u64p]
native.h5gds_py_decode_chunks_begin.restype = ctypes.c_int
native.h5gds_py_decode_chunks_end.argtypes = [ctypes.c_uint64, ctypes.POINTER(_c_size_t)]
native.h5gds_py_decode_chunks_end.restype = ctypes.c_int
native.h5gds_py_decode_chunks_wait.argtypes = [ctypes.c_uint64]
native.h5gds_py_decode_chunks_wait.restype = None
native.h5gds_py_io_done.argtypes = [_c_void_p]
native.h5gds_py_io_done.restype = ctypes.c_int
native.h5gds_py_io_wait.argtypes = [_c_void_p, ctypes.c_char_p, _c_size_t]
native.h5gds_py_io_wait.restype = ctypes.c_int
native.h5gds_py_file_stats.argtypes = [_c_void_p, _u64p, _c_size_t]
native.h5gds_py_file_stats.restype = ctypes.c_int
native.h5gds_py_route_name.argtypes = [ctypes.c_int]
native.h5gds_py_route_name.restype = _c_char_p
native.h5gds_py_memory_kind.argtypes = [_c_void_p]
native.h5gds_py_memory_kind.restype = ctypes.c_int
native.h5gds_py_ceiling_pread.argtypes = [_c_char_p, ctypes.c_int, ctypes.c_int, _c_size_t, _c_size_t, _u64p,
                                          ctypes.POINTER(ctypes.c_double), ctypes.c_char_p, _c_size_t]
native.h5gds_py_ceiling_pread.restype = ctypes.c_int
native.h5gds_py_ceiling_pwrite.argtypes = [_c_char_p, ctypes.c_int, ctypes.c_int, _c_size_t, _c_size_t, _u64p,
                                           ctypes.POINTER(ctypes.c_double), ctypes.c_char_p, _c_size_t]
native.h5gds_py_ceiling_pwrite.restype = ctypes.c_int
native.h5gds_py_engine_of.argtypes = [_c_int64]
native.h5gds_py_engine_of.restype = _c_void_p
native.h5gds_py_sync.argtypes = [_c_void_p, ctypes.c_char_p, _c_size_t]
native.h5gds_py_sync.restype = ctypes.c_int
native.h5gds_py_wb_stats.argtypes = [_c_int64, _u64p]
native.h5gds_py_wb_stats.restype = ctypes.c_int
native.h5gds_py_save_leaves.argtypes = [_c_int64, _c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                        ctypes.POINTER(_c_int64), ctypes.POINTER(ctypes.c_int32), _u64p, _u64p,
                                        _u64p, ctypes.POINTER(_c_int64), _c_int64, ctypes.c_uint64,
                                        ctypes.POINTER(ctypes.c_double), ctypes.POINTER(_c_int64), ctypes.c_char_p,
                                        _c_size_t]
native.h5gds_py_save_leaves.restype = ctypes.c_int
native.h5gds_py_prepare_start.argtypes = [ctypes.c_uint64, ctypes.c_int, _c_void_p, ctypes.POINTER(_c_void_p),
                                          ctypes.c_char_p, _c_size_t]
native.h5gds_py_prepare_start.restype = ctypes.c_int
native.h5gds_py_prepare_done.argtypes = [_c_void_p]
native.h5gds_py_prepare_done.restype = ctypes.c_int
native.h5gds_py_prepare_wait.argtypes = [_c_void_p, ctypes.c_char_p, _c_size_t]
native.h5gds_py_prepare_wait.restype = ctypes.c_int
native.h5gds_py_prepare_free.argtypes = [_c_void_p]
native.h5gds_py_prepare_free.restype = None
native.h5gds_py_release_snapshot_memory.argtypes = []
native.h5gds_py_release_snapshot_memory.restype = None
native.h5gds_py_snapshot_memory_info.argtypes = [_u64p]
native.h5gds_py_snapshot_memory_info.restype = None
native.h5gds_py_close_datasets.argtypes = [_c_size_t, ctypes.POINTER(_c_int64), ctypes.c_char_p, _c_size_t]
native.h5gds_py_close_datasets.restype = ctypes.c_int
for _name in ("H5Dwrite", "H5Dread"):  # h5py's own libhdf5: datasets known to pass through
    getattr(hdf5, _name).argtypes = [_c_int64, _c_int64, _c_int64, _c_int64, _c_int64, _c_void_p]
    getattr(hdf5, _name).restype = ctypes.c_int
for _name in ("H5Dwrite_gds", "H5Dread_gds"):
    getattr(native, _name).argtypes = [_c_int64, _c_int64, _c_int64, _c_int64, _c_int64, _c_void_p]
    getattr(native, _name).restype = ctypes.c_int
native.H5FD_gds_last_route.argtypes = []
native.H5FD_gds_last_route.restype = ctypes.c_int
native.H5FD_gds_route_name.argtypes = [ctypes.c_int]
native.H5FD_gds_route_name.restype = _c_char_p


class DecodeStatsC(ctypes.Structure):
    """H5FD_gds_decode_stats_t (H5FDgds.h)."""
    _fields_ = [("chunks", ctypes.c_uint64), ("stored_bytes", ctypes.c_uint64), ("decoded_bytes", ctypes.c_uint64),
                ("read_wait_s", ctypes.c_double), ("decode_s", ctypes.c_double), ("total_s", ctypes.c_double),
                ("hdf5_chunks", ctypes.c_uint64)]


class EncodeStatsC(ctypes.Structure):
    """H5FD_gds_encode_stats_t (H5FDgds.h)."""
    _fields_ = [("chunks", ctypes.c_uint64), ("decoded_bytes", ctypes.c_uint64), ("stored_bytes", ctypes.c_uint64),
                ("encode_s", ctypes.c_double), ("store_wait_s", ctypes.c_double), ("total_s", ctypes.c_double)]


native.H5FD_gds_last_decode_stats.argtypes = [ctypes.POINTER(DecodeStatsC)]
native.H5FD_gds_last_decode_stats.restype = ctypes.c_int
native.H5FD_gds_last_encode_stats.argtypes = [ctypes.POINTER(EncodeStatsC)]
native.H5FD_gds_last_encode_stats.restype = ctypes.c_int
native.H5Pset_dxpl_gds_stream.argtypes = [_c_int64, _c_void_p]
native.H5Pset_dxpl_gds_stream.restype = ctypes.c_int

MEMORY_KINDS = ("host", "pinned", "device", "managed")

_DIAG_RE = re.compile(r"#\d+: .*? in (\S+\(\)): (.*)$")


def hdf5_error_text() -> str:
    """The calling thread's HDF5 error stack, one ``func(): message`` per
    entry (innermost last), and clears it."""
    buf = ctypes.create_string_buffer(8192)
    native.h5gds_py_error_text(buf, len(buf))
    lines = []
    for raw in buf.value.decode(errors="replace").splitlines():
        m = _DIAG_RE.search(raw.strip())
        if m:
            lines.append(f"{m.group(1)}: {m.group(2)}")
    return "; ".join(lines) if lines else "(no HDF5 error message)"


def errbuf() -> ctypes.Array[ctypes.c_char]:
    return ctypes.create_string_buffer(8192)  # room for a whole HDF5 error stack (the reason comes last)
