"""A stand-in for CuPy backed by host memory, modelling one in-order GPU
queue: copies to "device" arrays (``set``) and gathers (``take``) are
queued and run only when something waits (an event's ``synchronize``, a
stream's ``synchronize``, ``get()``). Engine reads into host or "device"
memory land at once. So a loader that reuses a pinned slot before the copy
out of it ran, or lets the engine write a buffer before the gathers out of
it ran, hands back wrong rows, which the tests see.

``done`` of an event is True only once its work ran: a poll never lets the
loader skip a wait."""
from __future__ import annotations

import types
from typing import Any

import numpy as np


class Queue:
    def __init__(self) -> None:
        self.ops: list[Any] = []
        self.ran = 0
        self.waits = 0          # stream waits on events (copy stream after gathers, ...)

    def push(self, fn: Any) -> None:
        self.ops.append(fn)

    def run(self, upto: int | None = None) -> None:
        upto = len(self.ops) if upto is None else upto
        while self.ran < upto:
            self.ops[self.ran]()
            self.ran += 1


def make(total_memory: int = 1 << 30) -> types.SimpleNamespace:
    q = Queue()

    class Ptr:
        def __init__(self, arr: np.ndarray):
            self.ptr = int(arr.ctypes.data)

    class DevArray(np.ndarray):
        """A 'device' array: host memory the test must not read before a sync."""

        @property
        def data(self) -> Any:  # type: ignore[override]
            return Ptr(np.asarray(self))

        def set(self, host: np.ndarray, stream: Any = None) -> None:
            dst = self
            q.push(lambda: np.copyto(np.asarray(dst), np.asarray(host).reshape(dst.shape)))

        def get(self) -> np.ndarray:
            q.run()
            return np.asarray(self).copy()

    def empty(shape: Any, dtype: Any = np.float64) -> DevArray:
        return np.empty(shape, dtype).view(DevArray)

    def asarray(a: Any) -> DevArray:
        return np.array(a).view(DevArray)  # new memory: no hazard to model

    def take(a: Any, idx: Any, axis: Any = None, out: Any = None) -> Any:
        src, ind = a, np.asarray(idx).copy()
        q.push(lambda: np.take(np.asarray(src), ind, axis=axis, out=np.asarray(out)))
        return out

    class Event:
        def __init__(self, block: bool = False, disable_timing: bool = False):
            self.at = 0

        def record(self, stream: Any = None) -> None:
            self.at = len(q.ops)

        def synchronize(self) -> None:
            q.run(self.at)

        @property
        def done(self) -> bool:
            return q.ran >= self.at

    class Stream:
        def __init__(self, non_blocking: bool = False):
            self.ptr = 1

        def wait_event(self, event: Any) -> None:
            q.waits += 1

        def synchronize(self) -> None:
            q.run()

        def __enter__(self) -> Any:  # `with stream:` makes it current (one queue here)
            return self

        def __exit__(self, *exc: Any) -> None:
            pass

    current = Stream()

    class Runtime:
        @staticmethod
        def getDevice() -> int:
            return 0

        @staticmethod
        def getDeviceCount() -> int:
            return 1

        @staticmethod
        def memGetInfo() -> tuple[int, int]:
            return total_memory, total_memory

    cuda = types.SimpleNamespace(
        Event=Event, Stream=Stream, runtime=Runtime, get_current_stream=lambda: current,
        alloc_pinned_memory=lambda n: bytearray(n), Device=lambda *a: types.SimpleNamespace(synchronize=q.run))

    def arange(n: int, dtype: Any = np.int64) -> DevArray:
        return np.arange(n, dtype=dtype).view(DevArray)

    def searchsorted(a: Any, v: Any, side: str = "left") -> DevArray:
        return np.searchsorted(np.asarray(a), np.asarray(v), side=side).view(DevArray)

    return types.SimpleNamespace(__name__="cupy", cuda=cuda, empty=empty, asarray=asarray, take=take,
                                 arange=arange, searchsorted=searchsorted, int64=np.int64, uint8=np.uint8,
                                 ndarray=DevArray, queue=q)
