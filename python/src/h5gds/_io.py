"""Device (and host) arrays in and out of h5py datasets through the gds
driver's checked calls, H5Dread_gds / H5Dwrite_gds: device buffers go
straight to the driver when HDF5 can pass them through, otherwise the
library stages them through pinned host memory; the CPU never touches
device memory."""
from __future__ import annotations

import ctypes
import dataclasses
import warnings
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5t
from h5py._hl import selections as _selections
from h5py._objects import phil

from . import _arrays, _lib
from ._lib import hdf5_error_text, native

__all__ = ["read", "write", "create_dataset", "driver_id", "last_route", "last_decode_stats", "last_encode_stats",
           "DecodeStats", "EncodeStats", "NotGdsWarning"]


class NotGdsWarning(UserWarning):
    """A device array moved through a file not opened with driver="gds"."""


_warned_not_gds = False


def driver_id() -> int:
    """HDF5's id of the gds driver (registering it on first use)."""
    with phil:
        did = int(native.h5gds_py_driver_id())
    if did < 0:
        raise RuntimeError(f"cannot register the gds driver: {hdf5_error_text()}")
    return did


def last_route() -> str:
    """How this thread's last h5gds.read/write moved its data: ``host``,
    ``passthrough`` (device buffer handed to the driver), ``host-staged``
    (through pinned host memory, HDF5's filters), ``gpu-decode`` (filtered
    chunks decoded on the GPU) or ``gpu-encode`` (encoded on the GPU)."""
    return native.H5FD_gds_route_name(native.H5FD_gds_last_route()).decode()


@dataclasses.dataclass(frozen=True)
class DecodeStats:
    """What this thread's last read decoded on the GPU (route
    ``gpu-decode``) did; all zeros before the first one."""
    chunks: int          # chunks decoded (never-written ones not counted)
    stored_bytes: int    # bytes read from the file
    decoded_bytes: int   # bytes the chunks decoded to
    read_wait_s: float   # waiting for stored bytes still being read
    decode_s: float      # decoding and placing on the GPU
    total_s: float
    hdf5_chunks: int     # of `chunks`, those the GPU refused and HDF5's own filters read instead


@dataclasses.dataclass(frozen=True)
class EncodeStats:
    """What this thread's last write encoded on the GPU (route
    ``gpu-encode``) did; all zeros before the first one."""
    chunks: int          # chunks encoded
    decoded_bytes: int   # bytes before encoding
    stored_bytes: int    # bytes stored
    encode_s: float      # the GPU compression alone
    store_wait_s: float  # waiting for stored bytes still being written
    total_s: float


def last_decode_stats() -> DecodeStats:
    """Statistics of this thread's last GPU-decoded read (``gpu-decode``):
    its decode rate alone is ``decoded_bytes / decode_s``."""
    st = _lib.DecodeStatsC()
    native.H5FD_gds_last_decode_stats(ctypes.byref(st))
    return DecodeStats(**{f.name: getattr(st, f.name) for f in dataclasses.fields(DecodeStats)})


def last_encode_stats() -> EncodeStats:
    """Statistics of this thread's last GPU-encoded write (``gpu-encode``):
    its compression rate alone is ``decoded_bytes / encode_s``."""
    st = _lib.EncodeStatsC()
    native.H5FD_gds_last_encode_stats(ctypes.byref(st))
    return EncodeStats(**{f.name: getattr(st, f.name) for f in dataclasses.fields(EncodeStats)})


# ---- h5py driver registry -------------------------------------------------

def _format_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, str)):
        text = str(value)
    else:
        raise TypeError(f"gds driver option {key}={value!r}: expected an int, a str or a bool")
    if "," in text or "=" in text:
        raise ValueError(f"gds driver option {key}={value!r}: value may not contain ',' or '='")
    return text


def _set_fapl_gds(plist: h5p.PropFAID, config: str | None = None, **options: Any) -> None:
    """h5py's hook: ``h5py.File(path, mode, driver="gds", threads=8, ...)``.
    Keys are the driver's configuration keys (README, Configuration);
    ``config="k=v,..."`` gives them as one string, applied first."""
    parts = [config] if config else []
    parts += [f"{k}={_format_value(k, v)}" for k, v in options.items()]
    text = ",".join(parts)
    with phil:
        rc = native.h5gds_py_set_fapl(plist.id, text.encode())
    if rc < 0:
        raise ValueError(f"gds driver configuration {text!r}: {hdf5_error_text()}")


def fapl_config(f: h5py.File) -> str:
    """The gds configuration of an open file, as ``key=value,...``."""
    if not isinstance(f, h5py.File):
        raise TypeError(f"expected an h5py.File, not {type(f).__name__}")
    buf = ctypes.create_string_buffer(1024)
    with phil:
        plist = f.id.get_access_plist()
        if plist.get_driver() != driver_id():
            raise ValueError(f"{f.filename} is not open with driver='gds'")
        rc = native.h5gds_py_get_fapl(plist.id, buf, len(buf))
    if rc < 0:
        raise ValueError(f"{f.filename}: {hdf5_error_text()}")
    return buf.value.decode()


_h5py_driver_property = h5py.File.driver


def _file_driver(self: h5py.File) -> str:
    # h5py's File.driver knows only its built-in drivers ("unknown" for any
    # other); answer for ours, leave the rest to h5py.
    with phil:
        if self.id.get_access_plist().get_driver() == driver_id():
            return "gds"
    return _h5py_driver_property.fget(self)  # type: ignore[no-any-return,misc]


def register() -> None:
    h5py.register_driver("gds", _set_fapl_gds)
    h5py.File.driver = property(_file_driver, doc=_h5py_driver_property.__doc__)  # type: ignore[method-assign,assignment]


# ---- selections -------------------------------------------------------------

def _check_dataset(dset: Any) -> h5py.Dataset:
    if not isinstance(dset, h5py.Dataset):
        raise TypeError(f"expected an h5py.Dataset, not {type(dset).__name__}")
    if not dset.id.valid:
        raise ValueError("Invalid dataset identifier (the dataset or its file is closed)")
    return dset


def _selection(dset: h5py.Dataset, sel: Any) -> tuple[Any, tuple[int, ...], h5s.SpaceID]:
    """h5py's own selection machinery: (file space, result shape, memory space)."""
    args = sel if isinstance(sel, tuple) else (sel,)
    # h5py's own checks for what its selection machinery does not see:
    # field names are taken out before it, None is refused before it.
    if any(isinstance(a, str) for a in args):
        if dset.dtype.names is None:
            raise ValueError("Field names only allowed for compound types")
        raise ValueError("h5gds moves whole compound elements: select fields with h5py (dset.fields([...]))")
    if any(a is None for a in args):
        raise TypeError("Indexing with None (or np.newaxis) is not supported")
    with phil:
        selection = _selections.select(dset.shape, args, dataset=dset)
    fspace = selection.id
    mshape = tuple(selection.mshape) if selection.mshape is not None else ()
    mspace = h5s.create_simple(mshape) if mshape else h5s.create(h5s.SCALAR)
    return fspace, tuple(selection.array_shape), mspace


def _unsupported_dtype(dtype: np.dtype, top: bool = True) -> str | None:
    """Why h5gds cannot move a dataset of `dtype` (h5py reads it), or None:
    variable-length data (strings, sequences) and references are pointers
    HDF5 makes in memory; an HDF5 array type as the dataset's own type has a
    shape of its own (as a compound's field it is fixed-size data, moved)."""
    if top and dtype.subdtype is not None:
        return "an HDF5 array type (elements with a shape of their own)"
    if dtype.subdtype is not None:
        dtype = dtype.subdtype[0]
    if h5py.check_ref_dtype(dtype) is not None:
        return "references"
    if h5py.check_vlen_dtype(dtype) is not None or dtype.kind == "O":
        string = h5py.check_string_dtype(dtype)
        return "variable-length strings" if string is not None and string.length is None else \
            "variable-length or object data"
    for name, field in (dtype.fields or {}).items():
        why = _unsupported_dtype(field[0], top=False)
        if why:
            return f"{why} in field {name!r}"
    return None


def _check_dtype(dset: h5py.Dataset, device: bool) -> np.dtype:
    dtype = dset.dtype
    why = _unsupported_dtype(dtype)
    if why:
        raise TypeError(f"dataset {dset.name!r} holds {why} (dtype {dtype}), which h5gds does not move: "
                        "read and write it with h5py")
    if device and (dtype.kind not in "biufc" or dtype.fields is not None):
        raise TypeError(f"dataset dtype {dtype} cannot live in a device array (numeric types only)")
    return dtype


def _never_filled(dset: h5py.Dataset) -> bool:
    """Whether HDF5 may leave parts of a read untouched: storage not all
    allocated, and no fill value written for it (fill time never). h5py
    reads into zeros; a new array is then zeroed first, as h5py's is."""
    with phil:
        dcpl = dset.id.get_create_plist()
        if dcpl.get_fill_time() != h5d.FILL_TIME_NEVER or dcpl.get_alloc_time() == h5d.ALLOC_TIME_EARLY:
            return False  # early allocation: all storage exists (h5gds.create_dataset's datasets)
        if dcpl.get_layout() == h5d.CHUNKED:
            return True  # its space status walks the whole chunk index: zeroing costs less
        return bool(dset.id.get_space_status() != h5d.SPACE_STATUS_ALLOCATED)


def _device_dtype(dtype: np.dtype, device: bool) -> np.dtype:
    """Device arrays hold native byte order only: a dataset stored
    big-endian (say) is read into its native-endian twin, HDF5 converting."""
    return dtype.newbyteorder("=") if device and not dtype.isnative else dtype


def _dxpl(v: _arrays.ArrayView) -> h5p.PropDXID:
    dxpl = h5p.create(h5p.DATASET_XFER)
    # The driver orders device transfers against the legacy default stream
    # unless told otherwise: follow the stream the array's library uses now.
    if v.device and v.stream:
        if native.H5Pset_dxpl_gds_stream(dxpl.id, v.stream) < 0:
            raise RuntimeError(f"cannot set the transfer stream: {hdf5_error_text()}")
    return dxpl


def _warn_if_not_gds(dset: h5py.Dataset, v: _arrays.ArrayView) -> None:
    global _warned_not_gds
    if not v.device or _warned_not_gds:
        return
    with phil:
        drv = dset.file.id.get_access_plist().get_driver()
    if drv != driver_id():
        _warned_not_gds = True
        warnings.warn(
            f"{dset.file.filename} was not opened with driver='gds': device arrays move through pinned "
            "host memory (staging); open it with h5py.File(..., driver='gds') for the direct path "
            "(this warning is shown once)", NotGdsWarning, stacklevel=3)


# ---- read / write -------------------------------------------------------------

def read(dset: h5py.Dataset, sel: Any = (), out: Any = None, *, like: Any = None) -> Any:
    """Reads ``dset[sel]`` into a device array (or a host one).

    ``sel``: h5py-style selection (ints, slices with steps, Ellipsis, ...).
    ``out``: an array to fill (CuPy, torch, ``__cuda_array_interface__``,
    DLPack or numpy); its dtype must be the dataset's (in native byte order
    for device arrays: a big-endian dataset is converted) and its shape the
    selection's. Without ``out`` a new array is returned, of the library
    ``like`` names ("cupy", "torch", "numpy", a module or an array; default:
    :func:`h5gds.set_array_module`, else CuPy/torch on a GPU, else numpy)."""
    dset = _check_dataset(dset)
    fspace, shape, mspace = _selection(dset, sel)
    if out is None:
        module = _arrays.resolve_module(like)
        dtype = _device_dtype(_check_dtype(dset, module != "numpy"), module != "numpy")
        out = _arrays.empty(shape, dtype, module, zeros=int(np.prod(shape)) > 0 and _never_filled(dset))
    v = _arrays.view(out, writable=True, name="out")
    dtype = _check_dtype(dset, v.device)
    if v.dtype != dtype:  # a device array of a big-endian dataset: its native twin, HDF5 converting
        dtype = _device_dtype(dtype, v.device)
    if v.dtype != dtype:
        raise TypeError(f"out has dtype {v.dtype}, the dataset {dset.name!r} has {dset.dtype}: pass an array of "
                        "the dataset's dtype" + (" (or, on the device, its native byte order)" if v.device else ""))
    if v.shape != shape and not (int(np.prod(v.shape)) == int(np.prod(shape)) == 1):
        raise ValueError(f"out has shape {v.shape}, the selection has shape {shape}")
    if int(np.prod(shape)) == 0:
        return out
    _warn_if_not_gds(dset, v)
    with phil:
        tid = h5t.py_create(dtype)
        dxpl = _dxpl(v)
        rc = native.H5Dread_gds(dset.id.id, tid.id, mspace.id, fspace.id, dxpl.id, v.ptr)
        if rc < 0:
            raise OSError(f"Can't read data ({hdf5_error_text()})")
    return out


def write(dset: h5py.Dataset, array: Any, sel: Any = ()) -> None:
    """Writes ``array`` (device or host) to ``dset[sel]``. The array's shape
    must be the selection's; its dtype is converted by HDF5 when it differs
    (device arrays then go through pinned host memory). Non-contiguous device
    arrays are made contiguous on the device first."""
    dset = _check_dataset(dset)
    if not any(hasattr(array, a) for a in ("__cuda_array_interface__", "__dlpack__", "__array_interface__")) \
            and type(array).__module__.split(".")[0] != "torch":
        array = np.asarray(array)  # lists, scalars: as h5py accepts them
    _check_dtype(dset, False)
    v = _arrays.view(array, writable=False, name="array", contiguous_copy=True)
    fspace, shape, mspace = _selection(dset, sel)
    if v.shape != shape and not (int(np.prod(v.shape)) == int(np.prod(shape)) == 1):
        raise ValueError(f"array has shape {v.shape}, the selection has shape {shape}")
    dtype = _check_dtype(dset, v.device)
    why = _unsupported_dtype(v.dtype)
    if why or (v.dtype.kind not in "biufc" and v.dtype != dtype):
        raise TypeError(f"array dtype {v.dtype} cannot be written to a dataset of {dtype}"
                        + (f" (the array holds {why})" if why else ""))
    if dset.file.mode != "r+":
        raise OSError(f"Can't write data (file {dset.file.filename!r} is open read-only)")
    if int(np.prod(shape)) == 0:
        return
    _warn_if_not_gds(dset, v)
    with phil:
        tid = h5t.py_create(v.dtype)
        dxpl = _dxpl(v)
        rc = native.H5Dwrite_gds(dset.id.id, tid.id, mspace.id, fspace.id, dxpl.id, v.ptr)
        if rc < 0:
            raise OSError(f"Can't write data ({hdf5_error_text()})")


def gds_dcpl() -> h5p.PropDCID:
    """A dataset creation property list ready for pass-through: fill time
    never (no fill value to write before the data) and early allocation
    (storage exists, so device reads never need HDF5 to fill)."""
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_fill_time(h5d.FILL_TIME_NEVER)
    dcpl.set_alloc_time(h5d.ALLOC_TIME_EARLY)
    return dcpl


def create_dataset(group: h5py.Group, name: str, data: Any = None, *, shape: Any = None, dtype: Any = None,
                   chunks: Any = None, **kwds: Any) -> h5py.Dataset:
    """``group.create_dataset`` for device data: fill never (unless
    ``fillvalue=`` is given: HDF5 then writes it at the allocation), early
    allocation, the chunk cache off for chunked datasets (so chunks go
    straight to the driver), then ``data`` (device or host) written with
    :func:`write`. Other keywords go to h5py: with ``compression=`` (gzip,
    or hdf5plugin's Zstd, LZ4, Bitshuffle, Blosc), ``shuffle``, ``fletcher32``,
    device data of whole chunks is compressed on the GPU (route
    ``gpu-encode``, nvCOMP; zstd inside bitshuffle where its blocks are
    at most 128 KiB); other
    filters are applied by HDF5 on the CPU."""
    if not isinstance(group, h5py.Group):
        raise TypeError(f"expected an h5py.Group or File, not {type(group).__name__}")
    if data is not None:
        if not any(hasattr(data, a) for a in ("__cuda_array_interface__", "__dlpack__", "__array_interface__")) \
                and type(data).__module__.split(".")[0] != "torch":
            data = np.asarray(data)
        v = _arrays.view(data, writable=False, name="data", contiguous_copy=True)
        if shape is None:
            shape = v.shape
        elif int(np.prod(shape)) != int(np.prod(v.shape)):
            raise ValueError(f"shape {shape} is incompatible with data of shape {v.shape}")
        if dtype is None:
            dtype = v.dtype
        data = v.keep
    elif shape is None:
        raise TypeError("create_dataset needs data or a shape")
    if dtype is None:
        dtype = np.float32
    if chunks not in (None, False):
        # no chunk cache for this handle: chunks go straight to the driver
        # (h5py applies cache settings only when one of them is truthy,
        # hence a slot count with the zero size)
        kwds.setdefault("rdcc_nbytes", 0)
        kwds.setdefault("rdcc_nslots", 1)
    if "dcpl" in kwds:
        raise TypeError("create_dataset sets its own dcpl (fill never, early allocation)")
    # Filtered datasets keep HDF5's incremental allocation: chunks allocated
    # early at their full size would stay in the file beside the compressed
    # ones that replace them (and filtered chunks never pass through anyway).
    filtered = any(kwds.get(k) for k in ("compression", "shuffle", "fletcher32", "scaleoffset"))
    extra = {} if filtered else {"dcpl": gds_dcpl()}
    if extra and kwds.get("fillvalue") is not None:  # asked for: written at the early allocation, then the data
        extra["dcpl"].set_fill_time(h5d.FILL_TIME_IFSET)
    dset = group.create_dataset(name, shape=shape, dtype=dtype, chunks=chunks, **extra, **kwds)
    if data is not None:
        if tuple(dset.shape) != tuple(_arrays.view(data, writable=False).shape):
            data = data.reshape(dset.shape)
        write(dset, data)
    return dset
