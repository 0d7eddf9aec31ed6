"""Snapshot memory, and the I/O engine, made ready ahead of a process's
first checkpoint: ``prepare_checkpoint`` and its warm-up (a small save into
the checkpoints' directory, run in the background).

The snapshot memory is allocated by a process's first save and kept for
the next ones; ``prepare_checkpoint`` allocates it ahead (in the background
by default), and with a path starts the I/O engine there, so that the first
save stalls no longer than the later ones. The top of the checkpoint
modules: the warm-up saves through _checkpoint.py, which imports nothing of
this one."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from . import _arrays
from ._checkpoint import _save_now
from ._checkpoint_leaves import _array_info, _leaves
from ._checkpoint_memory import (_MEMORY_KINDS, _WARMUPS, _WARMUPS_LOCK, CheckpointMemory, _memory_error,
                                 _snapshot_budget)
from ._lib import errbuf, native

__all__ = ["prepare_checkpoint"]


def _device_pointer(arr: Any) -> int | None:
    """The address of a device array's memory, None for a host array."""
    if type(arr).__module__.split(".")[0] == "torch":
        return int(arr.data_ptr()) if arr.is_cuda else None
    if isinstance(arr, np.ndarray):
        return None
    v = _arrays.view(arr, writable=False, name="state array", contiguous_copy=True)
    return v.ptr if v.device else None


def _warmup_state(module: str, device: int | None, nbytes: int) -> dict[str, Any]:
    """What a warm-up saves: 16 arrays of zeros, of 16 MiB on a GPU (every
    pool worker that a 3 GiB save then uses finds its staging memory pinned),
    of 1 MiB on the host (nothing to pin there: the threads only); smaller
    when the prepared memory (`nbytes`) is, so that they fit in it."""
    size = (16 << 20) if module != "numpy" else (1 << 20)
    size = max(4096, min(size, (nbytes - 4096) // 16 // 4096 * 4096))
    state = {}
    for i in range(16):
        a = _arrays.empty((size,), np.dtype(np.uint8), module, device)  # type: ignore[arg-type]
        if module == "torch":
            a.zero_()
        else:
            a.fill(0)
        state[f"w{i}"] = a
    return state


def _warmup(handle: CheckpointMemory, directory: str, module: str, device: int | None, memory: str) -> None:
    """A small save into `directory` (removed after): the pool's threads
    started, their staging memory pinned, the device path's tuning for that
    file system measured or read from its cache -- what a process's first
    save would otherwise do inside its stall. It takes the prepared memory
    and gives it back when its file closes."""
    try:
        handle._wait_memory()
        path = os.path.join(directory, f".h5gds-warmup-{os.getpid()}-{threading.get_ident()}.h5")
        try:
            warm = _warmup_state(module, device, handle.nbytes)
            _save_now(warm, path, async_=True, memory=memory, budget=None, options={}).wait()
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
    except BaseException as exc:  # kept for wait()
        handle._warmup_error = exc
    finally:
        with _WARMUPS_LOCK:
            _WARMUPS.discard(threading.current_thread())


def prepare_checkpoint(state: Any, *, memory: str = "auto", background: bool = True,
                       path: str | os.PathLike[str] | None = None) -> CheckpointMemory:
    """Makes the snapshot memory of the next :func:`save` ready ahead, and
    with ``path`` the I/O engine too, so that a process's first save stalls
    no longer than its later ones. Returns a :class:`CheckpointMemory`.

    Without it the first save allocates its snapshot memory (about 2 s for
    3 GiB of pinned host memory, milliseconds for device memory) and starts
    the engine: its worker threads, their pinned staging memory (about 0.3 s
    on an H100) and, once per file system and GPU, the measurement of the
    device path's best threads and block size (about 2 s; then cached).

    ``state``: the state you will save (its snapshot memory is sized and
    placed as ``save(state, memory=memory)`` asks for it: device memory of
    its first array's device, or host memory), or a number of bytes: a
    state's size, to which room for the arrays' alignment is added (1 MiB
    and 1/256th, enough for arrays of 64 KiB on average, or a ``budget=``
    of ``save`` up to that total); then the memory is of the current
    device. ``memory``: as for :func:`save`, "auto" (device memory for a
    device state when the device has the room, else pinned host memory),
    "device" or "host" (pinned). ``path``: where the checkpoints go (a file
    path or its directory): the engine is made ready by a small save (256
    MiB of zeros on the state's device, 16 MiB for a host state; less for a
    smaller state) into a temporary file there, removed after; a save that
    starts meanwhile waits for it.

    With ``background`` (the default) it returns at once and the work goes
    on in the background: a save that starts meanwhile waits for it rather
    than allocating memory of its own; ``wait()`` says whether it worked.
    Without, it returns once all is ready (or raises).

    The memory is kept for later saves (one arena per kind, the larger one
    when two meet) until :func:`release_checkpoint_memory` or the end of the
    process; asking again for memory that is ready allocates nothing. Call
    it from the thread that saves (its current CUDA device).
    ``ValueError``: a wrong argument, device memory without a GPU, or a
    ``path`` whose directory does not exist; ``MemoryError``: more than the
    device or the machine has."""
    if memory not in _MEMORY_KINDS:
        raise ValueError(f"memory must be 'auto', 'device' or 'host', not {memory!r}")
    directory = None
    if path is not None:
        p = os.fspath(path)
        directory = p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p))
        if not os.path.isdir(directory):
            raise ValueError(f"prepare_checkpoint: path {p!r}: no such directory {directory!r}")
    like: int | None = None
    module: str
    device: int | None
    if isinstance(state, bool):
        raise TypeError("prepare_checkpoint: a state or a number of bytes, not a bool")
    if isinstance(state, int):
        if state <= 0:
            raise ValueError(f"prepare_checkpoint: {state} bytes (a positive number of bytes, or the state)")
        nbytes = state + (1 << 20) + state // 256
        kind = _MEMORY_KINDS[memory]
        module, device = str(_arrays.resolve_module(None)), None
    else:
        leaves = list(_leaves(state, ""))
        infos = [_array_info(a) for _, a in leaves]
        total = sum(i[4] for i in infos)
        if total == 0:  # nothing a save would snapshot
            return CheckpointMemory(None, 0, memory)
        first = next(a for (_, a), i in zip(leaves, infos) if i[4])  # the save's first snapshot decides
        like = _device_pointer(first)
        if like is None and memory == "device":
            raise ValueError("memory='device' for a state whose first array is in host memory: its save "
                             "snapshots into host memory")
        nbytes = _snapshot_budget(total, len(infos))
        kind = _MEMORY_KINDS["host"] if like is None else _MEMORY_KINDS[memory]
        module, device = _module_of(first) if like is not None else ("numpy", None)
    prep = ctypes.c_void_p()
    err = errbuf()
    rc = native.h5gds_py_prepare_start(nbytes, kind, like, ctypes.byref(prep), err, len(err))
    if rc != 0:
        raise _memory_error(rc, err.value.decode(errors="replace"))
    handle = CheckpointMemory(prep.value, nbytes, memory)
    if directory is not None:
        t = threading.Thread(target=_warmup, args=(handle, directory, module, device, memory),
                             name="h5gds-checkpoint-warmup", daemon=True)
        handle._warmup = t
        with _WARMUPS_LOCK:
            _WARMUPS.add(t)  # before it starts: a save right after waits for it
        try:
            t.start()
        except BaseException:
            with _WARMUPS_LOCK:
                _WARMUPS.discard(t)
            raise
    if not background:
        handle.wait()
    return handle


def _module_of(arr: Any) -> tuple[str, int | None]:
    """The array library and device of a device array, for a warm-up state
    like it (CuPy for device arrays of other libraries, when it is there)."""
    mod = type(arr).__module__.split(".")[0]
    if mod == "torch":
        return "torch", arr.device.index
    if mod == "cupy":
        return "cupy", int(arr.device.id)
    return _arrays.resolve_module(None), None
