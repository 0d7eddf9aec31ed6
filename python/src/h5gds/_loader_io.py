"""The loader's files opened with the driver's I/O engine: asynchronous
requests of (file offset, size, address) segments, tickets, and the
engine settings the loader uses."""
from __future__ import annotations

import ctypes
import os

import numpy as np

from ._lib import errbuf, native


def loader_config(config: str) -> str:
    """The engine settings of the loader's files: the caller's, with
    `threads` one less than the cores (at least 4, at most 16) unless the
    caller or H5GDS_CONFIG sets it. Warm batches are copies out of the page
    cache that keep every worker busy; a worker per core would take the
    core of the thread that runs the training loop (and submits the next
    batch) at every batch."""
    if config_value(config, "threads") is not None or config_value(os.environ.get("H5GDS_CONFIG", ""),
                                                                   "threads") is not None:
        return config
    threads = max(4, min(16, (os.cpu_count() or 1) - 1))
    return f"threads={threads}" + ("," + config if config else "")


def config_value(text: str, key: str) -> str | None:
    """The value `text` (key=value,...) gives `key`, the last one wins."""
    found = None
    for kv in text.split(","):
        if "=" in kv:
            k, v = kv.split("=", 1)
            if k.strip() == key:
                found = v.strip()
    return found


class EngineFile:
    def __init__(self, path: str, config: str):
        handle = ctypes.c_void_p()
        err = errbuf()
        rc = native.h5gds_py_file_open(path.encode(), config.encode(), 0, ctypes.byref(handle), err, len(err))
        if rc != 0:
            raise OSError(-rc, f"cannot open {path} for the loader: {err.value.decode(errors='replace')}", path)
        self.handle: int | None = handle.value
        self.path = path

    def submit(self, off: np.ndarray, size: np.ndarray, addr: np.ndarray, base: int, read_once: bool = False) -> int:
        """Starts reading segments (file offset, size, address within the
        allocation at `base`); `read_once`: bytes read once (O_DIRECT where
        not in the page cache). Returns the ticket to wait on."""
        ticket = ctypes.c_void_p()
        err = errbuf()
        u64 = ctypes.POINTER(ctypes.c_uint64)
        rc = native.h5gds_py_file_submit(self.handle, 0, int(read_once), len(off), off.ctypes.data_as(u64),
                                         size.ctypes.data_as(u64), addr.ctypes.data_as(u64), base,
                                         ctypes.byref(ticket), err, len(err))
        if rc != 0:
            raise OSError(-rc, f"batch read failed: {err.value.decode(errors='replace')}", self.path)
        return int(ticket.value or 0)

    def close(self) -> None:
        if self.handle:
            native.h5gds_py_file_close(self.handle)
            self.handle = None

    def stats(self) -> dict[str, int]:
        arr = (ctypes.c_uint64 * 5)()
        native.h5gds_py_file_stats(self.handle, arr, 5)
        return {native.h5gds_py_route_name(i).decode(): int(arr[i]) for i in range(5) if arr[i]}


def wait(ticket: int, path: str) -> None:
    """Waits for (and frees) a ticket; a failed read raises OSError."""
    err = errbuf()
    rc = native.h5gds_py_io_wait(ticket, err, len(err))
    if rc != 0:
        raise OSError(-rc, f"batch read failed: {err.value.decode(errors='replace')}", path)


def done(ticket: int) -> bool:
    return bool(native.h5gds_py_io_done(ticket))


def wait_all(tickets: list[tuple[int, str]]) -> None:
    """Waits for every ticket (each once: popped first); the first failure
    is raised after all are collected."""
    first_error: OSError | None = None
    while tickets:
        t, p = tickets.pop(0)  # off the list first: a ticket is freed by its wait, and never waited twice
        try:
            wait(t, p)
        except OSError as exc:
            first_error = first_error or exc
    if first_error:
        raise first_error
