"""The state's arrays, as every checkpoint module sees them: the walk that
lists a nested state's arrays (its leaves) with their dataset paths, the
link names of dict keys, each leaf's kind, dtype name, shape, HDF5 file
type and size (bfloat16 as an HDF5 float type with bfloat16's layout), and
raw views of its bytes. The lowest of the checkpoint modules: it imports
none of them."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
from h5py import h5t

from . import _arrays

_PLAIN = (type(None), bool, int, float, str)


def _bf16_type() -> h5t.TypeFloatID:
    t = h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)  # sign bit, exponent position and size, mantissa position and size
    t.set_offset(0)
    t.set_precision(16)
    t.set_size(2)
    t.set_ebias(127)
    return t


def _escape(key: str) -> str:
    """An HDF5 link name for a dict key ('/' is a separator, '.' a link to self)."""
    out = key.replace("%", "%25").replace("/", "%2F")
    return "%2E" if out == "." else "%00" if out == "" else out


def _unescape(name: str) -> str:
    if name == "%00":
        return ""
    return name.replace("%2E", ".").replace("%2F", "/").replace("%25", "%")


def _is_array(obj: Any) -> bool:
    mod = type(obj).__module__.split(".")[0]
    return (mod == "torch" and hasattr(obj, "data_ptr")) or isinstance(obj, np.ndarray) or \
        hasattr(obj, "__cuda_array_interface__")


def _numpy_scalar(value: Any) -> bool:
    """A numpy bool, integer or float scalar (a step counter, a loss)."""
    return isinstance(value, np.generic) and value.dtype.kind in "biuf"


def _plain(value: Any) -> bool:
    if isinstance(value, _PLAIN) or _numpy_scalar(value):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, _PLAIN) for v in value)


def _leaves(state: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(dataset path, array) for every array of the state."""
    if _is_array(state):
        yield path, state
    elif isinstance(state, dict):
        names: dict[str, Any] = {}
        for k, v in state.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"{path or '/'}: dict keys must be str or int, not {type(k).__name__}")
            name = _escape(str(k))
            if name in names:
                raise ValueError(f"{path or '/'}: the keys {names[name]!r} and {k!r} would be stored under one "
                                 f"name, {name!r}")
            names[name] = k
            yield from _leaves(v, f"{path}/{name}")
    elif isinstance(state, (list, tuple)) and not _plain(state):
        for i, v in enumerate(state):
            yield from _leaves(v, f"{path}/{i}")


def _plain_entry(value: Any) -> list[Any]:
    """How a plain value is kept in the JSON of its container: [type, value];
    numpy scalars as "numpy.<dtype>" and their value, made again on load."""
    if _numpy_scalar(value):
        return [f"numpy.{value.dtype.name}", value.item()]
    return [type(value).__name__, list(value) if isinstance(value, tuple) else value]


_TYPES: dict[Any, Any] = {}  # HDF5 file type per dtype, made once


def _file_type(key: Any, make: Any) -> Any:
    t = _TYPES.get(key)
    if t is None:
        t = _TYPES[key] = make()
    return t


def _array_info(obj: Any) -> tuple[str, str, tuple[int, ...], Any, int]:
    """(array kind, dtype name, shape, HDF5 type, bytes) of a leaf."""
    mod = type(obj).__module__.split(".")[0]
    if mod == "torch":
        import torch
        name = str(obj.dtype).replace("torch.", "")
        if obj.dtype == torch.bfloat16:
            return "torch", name, tuple(obj.shape), _file_type("bf16", _bf16_type), obj.numel() * 2
        dt = _arrays.numpy_dtype_of_torch(obj)
        return "torch", name, tuple(obj.shape), _file_type(dt, lambda: h5t.py_create(dt)), obj.numel() * dt.itemsize
    kind = "numpy" if isinstance(obj, np.ndarray) else "cupy"
    dt = np.dtype(obj.dtype)
    if dt.kind not in "biufc":
        raise TypeError(f"arrays of dtype {dt} cannot be checkpointed (numeric types only)")
    return kind, dt.name, tuple(obj.shape), _file_type(dt, lambda: h5t.py_create(dt)), int(obj.size) * dt.itemsize


def _raw_view(obj: Any) -> Any:
    """An array view of the leaf's bytes (bfloat16 as int16: the file type
    is the memory type, so nothing is converted)."""
    if type(obj).__module__.split(".")[0] == "torch":
        import torch
        if obj.dtype == torch.bfloat16:
            obj = obj.view(torch.int16)
    return _arrays.view(obj, writable=False, name="state array", contiguous_copy=True)

