"""Array interop: host (numpy), CuPy, PyTorch, ``__cuda_array_interface__``
and DLPack, reduced to what the C calls need: an address, a shape, a dtype,
contiguity, and where the memory lives. Device memory is never read by the
CPU here: a non-contiguous device array is made contiguous on the device by
its own library, or refused."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

ArrayModule = Literal["cupy", "torch", "numpy"]

_DLPACK_CPU, _DLPACK_CUDA, _DLPACK_CUDA_HOST, _DLPACK_CUDA_MANAGED = 1, 2, 3, 13

_default_module: ArrayModule | None = None


def _try_import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception:  # not installed, or broken CUDA install: the module is simply not available
        return None


def gpu_available() -> bool:
    """True when CuPy or PyTorch can see a CUDA device."""
    cp = _try_import("cupy")
    if cp is not None:
        try:
            if cp.cuda.runtime.getDeviceCount() > 0:
                return True
        except Exception:
            pass
    torch = _try_import("torch")
    return bool(torch is not None and torch.cuda.is_available())


def set_array_module(name: ArrayModule | None) -> None:
    """Which library ``h5gds.read`` and the loader return arrays of, when
    ``like=`` is not given: ``"cupy"``, ``"torch"``, ``"numpy"``, or None
    (the default: CuPy when it sees a GPU, else PyTorch on CUDA, else numpy)."""
    global _default_module
    if name not in (None, "cupy", "torch", "numpy"):
        raise ValueError(f"array module must be 'cupy', 'torch', 'numpy' or None, not {name!r}")
    _default_module = name


def resolve_module(like: Any) -> ArrayModule:
    """``like``: None, a module name, a module, or an array whose kind to follow."""
    if like is None:
        if _default_module is not None:
            return _default_module
        cp = _try_import("cupy")
        try:
            if cp is not None and cp.cuda.runtime.getDeviceCount() > 0:
                return "cupy"
        except Exception:
            pass
        torch = _try_import("torch")
        if torch is not None and torch.cuda.is_available():
            return "torch"
        return "numpy"
    if isinstance(like, str):
        if like not in ("cupy", "torch", "numpy"):
            raise ValueError(f"like must be 'cupy', 'torch' or 'numpy', not {like!r}")
        return like  # type: ignore[return-value]
    name = getattr(like, "__name__", None)
    if name in ("cupy", "torch", "numpy"):
        return name  # type: ignore[return-value]
    mod = type(like).__module__.split(".")[0]
    if mod in ("cupy", "torch", "numpy"):
        return mod  # type: ignore[return-value]
    raise TypeError(f"like must be a module name, a module or an array, not {type(like).__name__}")


_TORCH_DTYPES = {
    "bool": "bool", "uint8": "uint8", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "float32": "float32", "float64": "float64",
    "complex64": "complex64", "complex128": "complex128",
}


def torch_dtype(dtype: np.dtype) -> Any:
    import torch
    name = _TORCH_DTYPES.get(np.dtype(dtype).name)
    if name is None or not hasattr(torch, name):
        raise TypeError(f"PyTorch has no dtype for {np.dtype(dtype)}")
    return getattr(torch, name)


def numpy_dtype_of_torch(t: Any) -> np.dtype:
    name = str(t.dtype).replace("torch.", "")
    if name not in _TORCH_DTYPES:
        raise TypeError(f"no numpy dtype for {t.dtype}")
    return np.dtype(name)


def empty(shape: tuple[int, ...], dtype: np.dtype, module: ArrayModule, device: int | None = None,
          zeros: bool = False) -> Any:
    """A new C-contiguous array of `module` (on the GPU for cupy/torch),
    its bytes zero where `zeros`."""
    if module == "numpy":
        return np.zeros(shape, dtype) if zeros else np.empty(shape, dtype)
    if module == "cupy":
        cp = _try_import("cupy")
        if cp is None:
            raise RuntimeError("CuPy is not importable: pass like='numpy' or 'torch', or install cupy")
        try:
            if cp.cuda.runtime.getDeviceCount() < 1:
                raise RuntimeError
        except Exception:
            raise RuntimeError("no CUDA GPU is available for a CuPy result; host arrays (like='numpy') work") from None
        if device is not None:
            with cp.cuda.Device(device):
                return cp.zeros(shape, dtype) if zeros else cp.empty(shape, dtype)
        return cp.zeros(shape, dtype) if zeros else cp.empty(shape, dtype)
    torch = _try_import("torch")
    if torch is None:
        raise RuntimeError("PyTorch is not importable: pass like='numpy' or 'cupy', or install torch")
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is available for a torch result; host arrays (like='numpy') work")
    dev = torch.device("cuda", device if device is not None else torch.cuda.current_device())
    make = torch.zeros if zeros else torch.empty
    return make(shape, dtype=torch_dtype(dtype), device=dev)


@dataclass
class ArrayView:
    """What the C calls need of an array."""
    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    device: bool            # memory the CPU must not touch (device or managed)
    device_id: int | None
    module: ArrayModule | None
    stream: int | None      # the CUDA stream the array's library works on now (0: legacy default)
    keep: Any               # the object that keeps the memory alive
    readonly: bool = False

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> bool:
    if strides is None:
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _cupy_stream() -> int:
    cp = _try_import("cupy")
    return int(cp.cuda.get_current_stream().ptr) if cp is not None else 0


def _torch_stream(device: Any) -> int:
    import torch
    return int(torch.cuda.current_stream(device).cuda_stream)


def view(obj: Any, *, writable: bool, name: str = "array", contiguous_copy: bool = False) -> ArrayView:
    """Describes `obj`. With `contiguous_copy`, a non-contiguous device
    array is copied to a contiguous one on the device (writes); otherwise it
    is refused (outputs: the data would not land in the caller's array)."""
    mod = type(obj).__module__.split(".")[0]

    # PyTorch first: its tensors also have __cuda_array_interface__ and
    # __dlpack__, but the stream and the contiguity fix are its own.
    if mod == "torch":
        import torch
        t = obj.detach() if obj.requires_grad else obj
        if t.is_cuda:
            if not t.is_contiguous():
                if not contiguous_copy:
                    raise ValueError(f"{name} is a non-contiguous torch tensor: pass a contiguous one "
                                     "(h5gds never reads device memory with the CPU)")
                t = t.contiguous()
            return ArrayView(int(t.data_ptr()), tuple(t.shape), numpy_dtype_of_torch(t), True,
                             t.device.index, "torch", _torch_stream(t.device), t)
        if t.device.type != "cpu":
            raise TypeError(f"{name}: torch tensors on {t.device.type} are not supported")
        return view(t.numpy(), writable=writable, name=name, contiguous_copy=contiguous_copy)

    if isinstance(obj, np.ndarray):
        arr = obj
        if not arr.flags.c_contiguous:
            if writable:
                raise ValueError(f"{name} must be C-contiguous")
            arr = np.ascontiguousarray(arr)
        if writable and not arr.flags.writeable:
            raise ValueError(f"{name} is read-only")
        return ArrayView(arr.ctypes.data, arr.shape, arr.dtype, False, None, "numpy", None, arr)

    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(n) for n in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        ptr, readonly = cai["data"]
        strides = cai.get("strides")
        if not _c_contiguous(shape, strides, dtype.itemsize):
            if contiguous_copy and mod == "cupy":
                import cupy
                obj = cupy.ascontiguousarray(obj)
                return view(obj, writable=writable, name=name)
            raise ValueError(f"{name} is a non-contiguous device array: pass a contiguous one "
                             "(h5gds never reads device memory with the CPU)")
        if writable and readonly:
            raise ValueError(f"{name} is read-only")
        device_id = None
        stream = 0
        if mod == "cupy":
            device_id = int(obj.device.id)
            stream = _cupy_stream()
        elif cai.get("stream") not in (None, 1, 2):
            stream = int(cai["stream"])
        return ArrayView(int(ptr or 0), shape, dtype, True, device_id, "cupy" if mod == "cupy" else None,
                         stream, obj, readonly=bool(readonly))

    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        dev_type, dev_id = obj.__dlpack_device__()
        if dev_type in (_DLPACK_CPU, _DLPACK_CUDA_HOST):
            return view(np.from_dlpack(obj), writable=writable, name=name, contiguous_copy=contiguous_copy)
        if dev_type in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED):
            cp = _try_import("cupy")
            if cp is None:
                raise TypeError(f"{name}: a CUDA DLPack array needs CuPy to be read (not importable)")
            return view(cp.from_dlpack(obj), writable=writable, name=name, contiguous_copy=contiguous_copy)
        raise TypeError(f"{name}: DLPack device type {dev_type} is not supported")

    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
        if writable:
            raise TypeError(f"{name} must be an array h5gds can fill in place (numpy, CuPy, torch, "
                            f"__cuda_array_interface__ or DLPack), not {type(obj).__name__}")
        return view(np.asarray(obj), writable=False, name=name)
    raise TypeError(f"{name}: unsupported array type {type(obj).__name__} (numpy, CuPy, torch, "
                    "__cuda_array_interface__ or DLPack)")
