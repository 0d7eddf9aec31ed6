"""Snapshot memory kept between checkpoints: its size for a state
(``_snapshot_budget``), the handle of memory being made ready
(``CheckpointMemory``), its release (``release_checkpoint_memory``) and
figures (``checkpoint_memory_info``), and the registry of warm-ups in
progress, which a save waits for.

The snapshot memory is allocated by a process's first save and kept for
the next ones; ``prepare_checkpoint`` (_checkpoint_prepare.py) allocates it
ahead. This module imports no other checkpoint module."""
from __future__ import annotations

import ctypes
import errno
import threading
import time

from ._lib import errbuf, native

__all__ = ["CheckpointMemory", "checkpoint_memory_info", "release_checkpoint_memory"]


def _snapshot_budget(total: int, narrays: int) -> int:
    """Snapshot memory of an asynchronous save: the state's bytes and room
    for each array's alignment (write-behind places snapshots at multiples of
    256 bytes), at least 1 MiB."""
    return max(total + 256 * narrays, 1 << 20)


# The engine's kinds of snapshot memory (gds_wb_memory_t; H5FD_gds_wb_memory_t).
_MEMORY_KINDS = {"auto": 0, "device": 1, "host": 2}


class CheckpointMemory:
    """Snapshot memory (and, with ``path``, the I/O engine) being made ready
    for the next checkpoint, returned by :func:`prepare_checkpoint`.
    ``wait(timeout=None)`` returns once all is ready, or raises what failed
    (``MemoryError`` when the device or the machine has not that much free);
    ``done()`` polls. ``nbytes``: the bytes asked for (0: nothing to
    prepare); ``memory``: the kind asked for."""

    def __init__(self, prep: int | None, nbytes: int, memory: str) -> None:
        self._prep = prep
        self.nbytes = nbytes
        self.memory = memory
        self._warmup: threading.Thread | None = None
        self._warmup_error: BaseException | None = None

    def _memory_done(self) -> bool:
        return self._prep is None or bool(native.h5gds_py_prepare_done(self._prep))

    def done(self) -> bool:
        return self._memory_done() and (self._warmup is None or not self._warmup.is_alive())

    def _wait_memory(self) -> None:
        if self._prep is None:
            return
        err = errbuf()
        rc = native.h5gds_py_prepare_wait(self._prep, err, len(err))  # without the GIL
        if rc != 0:
            raise _memory_error(rc, err.value.decode(errors="replace"))

    def wait(self, timeout: float | None = None) -> None:
        if timeout is not None:
            deadline = time.monotonic() + timeout
            while not self._memory_done():
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"checkpoint memory ({self.nbytes} bytes) not ready after {timeout} s")
                time.sleep(0.002)
        self._wait_memory()
        if self._warmup is not None:
            self._warmup.join(None if timeout is None else max(0.0, deadline - time.monotonic()))
            if self._warmup.is_alive():
                raise TimeoutError(f"checkpoint engine warm-up not done after {timeout} s")
            if self._warmup_error is not None:
                raise self._warmup_error

    def __del__(self) -> None:
        prep, self._prep = self._prep, None
        if prep is not None and native is not None:
            native.h5gds_py_prepare_free(prep)  # a preparation in progress goes on

    def __repr__(self) -> str:
        state = "ready" if self.done() else "in progress"
        return f"<CheckpointMemory {self.nbytes} bytes, {self.memory}, {state}>"


def _memory_error(rc: int, msg: str) -> Exception:
    if -rc == errno.ENOMEM:
        return MemoryError(msg)
    if -rc == errno.EINVAL:
        return ValueError(msg)
    return OSError(-rc, msg)


# Warm-ups in progress (prepare_checkpoint with a path): a save waits for
# them, so that it finds the engine ready and the snapshot memory kept
# (the warm-up's save holds that memory while it runs).
_WARMUPS: set[threading.Thread] = set()
_WARMUPS_LOCK = threading.Lock()


def _wait_for_warmups() -> float:
    """Waits for the warm-ups in progress (not the caller's own); seconds waited."""
    with _WARMUPS_LOCK:
        pending = [t for t in _WARMUPS if t is not threading.current_thread()]
    if not pending:
        return 0.0
    t0 = time.perf_counter()
    for t in pending:
        t.join()
    return time.perf_counter() - t0


def release_checkpoint_memory() -> None:
    """Frees the snapshot memory kept for the next save (after a preparation
    in progress has ended). A save running now keeps its memory, and keeps
    it again for the next save when it ends."""
    native.h5gds_py_release_snapshot_memory()


_INFO_KEYS = ("ready_device_bytes", "ready_host_bytes", "ready_host_pinned", "open_bytes", "preparing",
              "files_ready", "files_allocated", "prepared")


def checkpoint_memory_info() -> dict[str, int]:
    """The process's snapshot memory: bytes ready for the next save (device,
    host; ``ready_host_pinned``), bytes held by files being written
    (``open_bytes``), preparations running, and counters since the start:
    files that found their memory ready (``files_ready``) or allocated it
    (``files_allocated``), and allocations made by preparations
    (``prepared``)."""
    out = (ctypes.c_uint64 * len(_INFO_KEYS))()
    native.h5gds_py_snapshot_memory_info(out)
    return dict(zip(_INFO_KEYS, (int(v) for v in out)))
