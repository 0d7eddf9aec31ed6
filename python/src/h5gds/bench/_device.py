"""The GPU array library a benchmark uses (CuPy when importable, else
PyTorch; NumPy with --host): random data, empty arrays, copies between host
and device, synchronisation."""
from __future__ import annotations

from typing import Any

import numpy as np


class Device:
    """The GPU array library in use: CuPy when importable, else torch."""

    def __init__(self, host: bool = False) -> None:
        self.name = "numpy"
        if host:  # --host: host arrays only, to check the benchmark itself on a machine without a GPU
            return
        try:
            import cupy
            cupy.cuda.runtime.getDeviceCount()
            self.name, self.cp = "cupy", cupy
            return
        except Exception:
            pass
        try:
            import torch
        except ImportError:
            raise SystemExit("h5gds.bench needs a CUDA GPU with CuPy or PyTorch (or --host)") from None
        if not torch.cuda.is_available():
            raise SystemExit("h5gds.bench needs a CUDA GPU (CuPy or PyTorch), or --host")
        self.name, self.torch = "torch", torch

    def sync(self) -> None:
        if self.name == "numpy":
            return
        if self.name == "cupy":
            self.cp.cuda.Device().synchronize()
        else:
            self.torch.cuda.synchronize()

    def free_cached(self) -> None:
        """Returns the array library's cached device memory to the driver."""
        if self.name == "cupy":
            self.cp.get_default_memory_pool().free_all_blocks()
        elif self.name == "torch":
            self.torch.cuda.empty_cache()

    def random(self, nbytes: int) -> Any:
        n = nbytes // 4
        if self.name == "numpy":
            return np.random.default_rng(0).random(n, dtype="f4")
        if self.name == "cupy":
            return self.cp.random.random(n, dtype="f4")
        return self.torch.rand(n, device="cuda")

    def empty(self, nbytes: int) -> Any:
        n = nbytes // 4
        if self.name == "numpy":
            return np.empty(n, "f4")
        return self.cp.empty(n, "f4") if self.name == "cupy" else self.torch.empty(n, device="cuda")

    def to_host(self, a: Any) -> np.ndarray:
        if self.name == "numpy":
            return a
        return a.get() if self.name == "cupy" else a.cpu().numpy()

    def from_host(self, a: np.ndarray) -> Any:
        if self.name == "numpy":
            return a
        return self.cp.asarray(a) if self.name == "cupy" else self.torch.from_numpy(a).cuda()

    def equal(self, a: Any, b: Any) -> bool:
        return bool((a == b).all())
