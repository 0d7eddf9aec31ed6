"""Host-to-device copies of the loader: pinned host slots, the loader's
copy stream, events, and the copies themselves (CuPy or torch). Work the
caller queues on its current stream after a batch is yielded sees the batch
(as with DataLoader's pin_memory and ``.cuda(non_blocking=True)``); a slot
is read into again only after the event recorded behind its last copy."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _arrays


class Slot:
    """Host memory for reads in flight (pinned when a GPU is used), and the
    event after the last copy out of it: the slot is read into again only
    once that copy is done, so no read waits for its own copy."""

    def __init__(self, nbytes: int, module: str):
        self.nbytes = nbytes
        self.torch_buf: Any = None
        self.copied: Any = None  # CUDA event recorded after the copy to the device
        if module == "cupy":
            import cupy
            mem = cupy.cuda.alloc_pinned_memory(max(nbytes, 1))
            self.host = np.frombuffer(mem, np.uint8, max(nbytes, 1))
            self._mem = mem
        elif module == "torch":
            import torch
            self.torch_buf = torch.empty(max(nbytes, 1), dtype=torch.uint8, pin_memory=True)
            self.host = self.torch_buf.numpy()
        else:
            self.host = np.empty(max(nbytes, 1), np.uint8)
        self.addr = int(self.host.ctypes.data)

    def wait_copied(self) -> None:
        if self.copied is not None:
            self.copied.synchronize()
            self.copied = None

    def copy_done(self) -> bool:
        """True when no copy out of the slot is pending (never blocks)."""
        if self.copied is None:
            return True
        if event_done(self.copied):
            self.copied = None
            return True
        return False


def event_done(event: Any) -> bool:
    """Whether the GPU has passed `event` (CuPy: .done, torch: .query())."""
    q = getattr(event, "query", None)
    if callable(q):
        return bool(q())
    d = getattr(event, "done", None)
    if d is None:  # an event type that cannot be polled: wait for it
        event.synchronize()
        return True
    return bool(d)


def stream_wait(stream: Any, event: Any) -> None:
    """Work queued on `stream` from now on waits for `event` (CuPy or torch)."""
    stream.wait_event(event)


def torch_dtype(dtype: np.dtype) -> Any:
    return _arrays.torch_dtype(dtype)


class Copier:
    """The copy stream (one per device) and copies of one loader."""

    def __init__(self, module: str):
        self.module = module
        self._copy_streams: dict[int, Any] = {}

    def current_stream(self) -> Any:
        if self.module == "cupy":
            import cupy
            return cupy.cuda.get_current_stream()
        import torch
        return torch.cuda.current_stream()

    def copy_stream(self) -> Any:
        if self.module == "cupy":
            import cupy
            dev = cupy.cuda.runtime.getDevice()
            if dev not in self._copy_streams:
                self._copy_streams[dev] = cupy.cuda.Stream(non_blocking=True)
        else:
            import torch
            dev = torch.cuda.current_device()
            if dev not in self._copy_streams:
                self._copy_streams[dev] = torch.cuda.Stream(device=dev)
        return self._copy_streams[dev]

    def record(self, stream: Any) -> Any:
        if self.module == "cupy":
            import cupy
            ev = cupy.cuda.Event(block=False, disable_timing=True)
            ev.record(stream)
            return ev
        import torch
        ev = torch.cuda.Event()
        ev.record(stream)
        return ev

    def to_device(self, slot: Slot, offset: int, nbytes: int, dtype: np.dtype, shape: tuple[int, ...],
                  stream: Any = None) -> Any:
        """A new device array of `shape` copied from the slot's bytes (one
        asynchronous copy, on the current stream or `stream`)."""
        if self.module == "cupy":
            import cupy
            dev = cupy.empty(shape, dtype)
            dev.set(slot.host[offset:offset + nbytes].view(dtype).reshape(shape),
                    stream=stream if stream is not None else cupy.cuda.get_current_stream())
            return dev
        import torch
        src = slot.torch_buf[offset:offset + nbytes].view(torch_dtype(dtype)).reshape(shape)
        dev = torch.empty(shape, dtype=src.dtype, device="cuda")
        if stream is None:
            dev.copy_(src, non_blocking=True)
        else:
            with torch.cuda.stream(stream):
                dev.copy_(src, non_blocking=True)
        return dev

    def copy_into(self, dst: Any, dst_offset: int, slot: Slot, src_offset: int, nbytes: int, stream: Any) -> None:
        """Bytes of the slot into a byte range of the device buffer `dst`
        (1-D uint8), asynchronously on `stream`."""
        if nbytes <= 0:
            return
        if self.module == "cupy":
            dst[dst_offset:dst_offset + nbytes].set(slot.host[src_offset:src_offset + nbytes], stream=stream)
            return
        import torch
        with torch.cuda.stream(stream):
            dst[dst_offset:dst_offset + nbytes].copy_(slot.torch_buf[src_offset:src_offset + nbytes],
                                                      non_blocking=True)
