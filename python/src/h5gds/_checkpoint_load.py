"""Loading a checkpoint (``load``): the structure rebuilt from the groups'
attributes, each array read by the driver's checked read into a new array
(torch, CuPy or numpy, as saved) or in place into an existing state
(``into=``); compressed arrays are decoded on the GPU where they can be,
else by HDF5's filters (registered by hdf5plugin when it is there)."""
from __future__ import annotations

import json
import os
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5t, h5z
from h5py._objects import phil

from . import _arrays
from ._checkpoint_leaves import _array_info, _is_array, _unescape
from ._io import _dxpl
from ._lib import hdf5_error_text, native

__all__ = ["load"]

_H5S_ALL = 0


def _plain_value(kind: str, value: Any) -> Any:
    if kind.startswith("numpy."):  # a numpy scalar, made again with its dtype
        return np.dtype(kind[len("numpy."):]).type(value)
    return tuple(value) if kind == "tuple" else value


def _new_array(kind: str, dtype_name: str, shape: tuple[int, ...], device: Any) -> tuple[Any, Any]:
    """(array, raw view target) for a dataset read back."""
    if kind == "torch":
        import torch
        dt = getattr(torch, dtype_name)
        dev = device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu")
        t = torch.empty(shape, dtype=dt, device=dev)
        return t, (t.view(torch.int16) if dt == torch.bfloat16 else t)
    if kind == "cupy":
        import cupy
        a = cupy.empty(shape, dtype=np.dtype(dtype_name))
        return a, a
    a = np.empty(shape, dtype=np.dtype(dtype_name))
    return a, a


def _missing_filters(dset: h5py.Dataset) -> list[int]:
    """The filters of a dataset's pipeline that HDF5 has not registered
    (none for contiguous datasets)."""
    with phil:
        dcpl = dset.id.get_create_plist()
        if dcpl.get_layout() != h5d.CHUNKED:
            return []
        ids = [int(dcpl.get_filter(i)[0]) for i in range(dcpl.get_nfilters())]
    return [i for i in ids if not h5z.filter_avail(i)]


def _read_into(dset: h5py.Dataset, target: Any, convert: bool = False) -> None:
    """The whole dataset into `target`, by the driver's checked read: a
    compressed dataset into device memory is decoded on the GPU where it
    can be (as h5gds.read), else by HDF5's filters."""
    v = _arrays.view(target, writable=True, name="checkpoint array")
    if v.nbytes == 0:
        return
    missing = _missing_filters(dset)
    if missing:
        try:  # registers hdf5plugin's filters with HDF5, for HDF5's own decode (host arrays, no nvCOMP)
            import hdf5plugin  # noqa: F401
        except ImportError:
            pass
    with phil:
        ftype = dset.id.get_type()
        if convert:
            ftype = h5t.py_create(v.dtype)  # a leaf saved in the other byte order: HDF5 converts it
        dxpl = _dxpl(v)  # kept: the id closes with the object
        rc = native.H5Dread_gds(dset.id.id, ftype.id, _H5S_ALL, _H5S_ALL, dxpl.id, v.ptr)
        if rc < 0:
            text = hdf5_error_text()
            hint = ""
            if missing and _missing_filters(dset):
                hint = (f"; HDF5 filter(s) {_missing_filters(dset)} not registered: pip install hdf5plugin "
                        "(registered when imported)")
            raise OSError(f"reading {dset.name} failed ({text}){hint}")


def _dict_entries(node: h5py.Group, plain: dict[str, Any]) -> list[tuple[Any, str]]:
    """A dict container's (key, entry name) pairs, in the saved order."""
    int_keys = set(json.loads(node.attrs.get("h5gds_int_keys", "[]")))
    order = json.loads(node.attrs.get("h5gds_order", "null")) or list(node.keys()) + list(plain)
    return [(int(_unescape(n)) if n in int_keys else _unescape(n), n) for n in order]


def _load_node(f: h5py.File, where: str, device: Any, into: Any, arrays: dict[str, list[str]]) -> Any:
    """The node at `where`; `into` (its part of the state, or None) already
    checked against the file's structure (_check_into)."""
    node = f[where]
    if isinstance(node, h5py.Dataset):
        if where not in arrays:
            raise ValueError(f"{where}: not an array of an h5gds checkpoint")
        kind, dtype_name = arrays[where]
        shape = tuple(node.shape)
        if into is not None and _is_array(into):
            kind_into = _array_info(into)[0]
            _read_into(node, _raw_view_writable(into), convert=kind_into in ("numpy", "cupy"))
            return into
        arr, target = _new_array(kind, dtype_name, shape, device)
        # numpy and CuPy leaves are read as their native dtype (HDF5 converts
        # one saved big-endian); torch's as stored (bf16 has no HDF5 twin)
        _read_into(node, target, convert=kind in ("numpy", "cupy"))
        return arr
    container = str(node.attrs.get("h5gds_container", "dict"))
    if container == "array":
        return _load_node(f, "/__root__", device, into, arrays)
    plain = json.loads(node.attrs.get("h5gds_values", "{}"))
    base = where.rstrip("/")
    if container == "dict":
        out = into if isinstance(into, dict) else {}
        for key, name in _dict_entries(node, plain):
            if name in plain:
                out[key] = _plain_value(*plain[name])
            else:
                out[key] = _load_node(f, f"{base}/{name}", device, into.get(key) if isinstance(into, dict) else None,
                                      arrays)
        return out
    items = []
    for i in range(int(node.attrs["h5gds_length"])):
        if str(i) in plain:
            items.append(_plain_value(*plain[str(i)]))
        else:
            sub = into[i] if isinstance(into, (list, tuple)) and i < len(into) else None
            items.append(_load_node(f, f"{base}/{i}", device, sub, arrays))
    if container == "tuple":
        return tuple(items)
    if isinstance(into, list):
        into[:] = items
        return into
    return items


def _check_into(f: h5py.File, where: str, into: Any, arrays: dict[str, list[str]]) -> None:
    """Before anything is read in place: the state has the checkpoint's
    structure, the same keys in every dict (KeyError naming the others) and
    arrays of its shapes and dtypes (ValueError)."""
    node = f[where]
    if isinstance(node, h5py.Dataset):
        if where in arrays and into is not None and _is_array(into):
            _, dtype_name = arrays[where]
            _, dname_into, shape_into, _, _ = _array_info(into)
            if tuple(shape_into) != tuple(node.shape) or dname_into != dtype_name:
                raise ValueError(f"{where}: the checkpoint holds {dtype_name}{list(node.shape)}, the state "
                                 f"{dname_into}{list(shape_into)}")
        return
    container = str(node.attrs.get("h5gds_container", "dict"))
    if container == "array":
        _check_into(f, "/__root__", into, arrays)
        return
    plain = json.loads(node.attrs.get("h5gds_values", "{}"))
    base = where.rstrip("/")
    if container == "dict" and isinstance(into, dict):
        keys = dict(_dict_entries(node, plain))
        missing, extra = [k for k in into if k not in keys], [k for k in keys if k not in into]
        if missing or extra:
            raise KeyError(f"{where}: the state and the checkpoint hold different keys (only in the state: "
                           f"{missing}, only in the checkpoint: {extra}); nothing was read")
        for key, name in keys.items():
            if name not in plain:
                _check_into(f, f"{base}/{name}", into[key], arrays)
    elif container in ("list", "tuple") and isinstance(into, (list, tuple)):
        for i in range(min(len(into), int(node.attrs["h5gds_length"]))):
            if str(i) not in plain:
                _check_into(f, f"{base}/{i}", into[i], arrays)


def _raw_view_writable(obj: Any) -> Any:
    if type(obj).__module__.split(".")[0] == "torch":
        import torch
        if obj.dtype == torch.bfloat16:
            return obj.view(torch.int16)
    return obj


def load(path: str | os.PathLike[str], *, device: Any = None, into: Any = None, **options: Any) -> Any:
    """Reads a checkpoint written by :func:`save`: the same structure, torch
    tensors on ``device`` (default: the GPU when there is one), CuPy arrays
    on the current device, numpy arrays on the host. With ``into``, arrays
    are read in place into the existing state and ``into`` is returned: its
    structure is checked first, nothing read unless it matches (the same
    keys in every dict, else ``KeyError``; the same shapes and dtypes, else
    ``ValueError``)."""
    with h5py.File(os.fspath(path), "r", driver="gds", **options) as f:
        if "h5gds_arrays" not in f.attrs:
            raise ValueError(f"{os.fspath(path)!r} is not an h5gds checkpoint (no h5gds_arrays attribute)")
        arrays = json.loads(f.attrs["h5gds_arrays"])
        if into is not None:
            _check_into(f, "/", into, arrays)
        return _load_node(f, "/", device, into, arrays)
