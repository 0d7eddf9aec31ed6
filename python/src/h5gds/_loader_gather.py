"""Batches gathered out of the loader's read buffers (the windowed order's
shuffle buffer, the loader's own cache): one gather per column per buffer,
done by the batch's array library (numpy on the host, CuPy or torch on the
current CUDA stream), in units of 8 bytes where rows allow it."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _arrays


def _unit(*values: int) -> int:
    """The largest of 8, 4, 2, 1 dividing every value."""
    g = 0
    for v in values:
        g = int(np.gcd(g, int(v)))
    for u in (8, 4, 2):
        if g % u == 0:
            return u
    return 1


_UNIT_DTYPES = {8: np.uint64, 4: np.uint32, 2: np.uint16, 1: np.uint8}


class Gatherer:
    """Buffers and gathers of one array library ("numpy", "cupy", "torch")."""

    def __init__(self, module: str):
        self.module = module

    # ---- memory -------------------------------------------------------------

    def buffer(self, nbytes: int) -> Any:
        """A 1-D uint8 buffer in the batches' memory (host for numpy)."""
        return _arrays.empty((max(int(nbytes), 1),), np.dtype(np.uint8), self.module)  # type: ignore[arg-type]

    def address(self, buf: Any) -> int:
        if self.module == "numpy":
            return int(buf.ctypes.data)
        if self.module == "cupy":
            return int(buf.data.ptr)
        return int(buf.data_ptr())

    def index(self, idx: np.ndarray) -> Any:
        """An int64 index array where the library's kernels can use it."""
        idx = np.ascontiguousarray(idx, np.int64)
        if self.module == "numpy":
            return idx
        if not idx.flags.writeable:  # (a plan's read-only arrays: torch warns on those)
            idx = idx.copy()
        if self.module == "cupy":
            import cupy
            return cupy.asarray(idx)
        import torch
        return torch.from_numpy(idx).to("cuda", non_blocking=True)

    def _view(self, buf: Any, lo: int, hi: int, unit: int) -> Any:
        """buf[lo:hi] (bytes) as elements of `unit` bytes."""
        part = buf[lo:hi]
        if unit == 1:
            return part
        if self.module == "torch":
            import torch
            return part.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[unit])
        return part.view(_UNIT_DTYPES[unit])

    def _bytes_of(self, out: Any) -> Any:
        """A 1-D uint8 view of a C-contiguous array."""
        if self.module == "torch":
            import torch
            return out.reshape(-1).view(torch.uint8)
        return out.reshape(-1).view(np.uint8)

    # ---- gathers ------------------------------------------------------------

    def rows(self, buf: Any, base: int, capacity: int, row_bytes: int, local: np.ndarray, out: Any,
             out_row: int = 0) -> None:
        """out[out_row:out_row + len(local)] (rows of `row_bytes`) = the rows
        `local` of the region of `capacity` rows at byte `base` of `buf`."""
        n = len(local)
        if n == 0 or row_bytes == 0:
            return
        unit = _unit(row_bytes, base)
        per = row_bytes // unit
        src = self._view(buf, base, base + capacity * row_bytes, unit).reshape(capacity, per)
        dst_bytes = self._bytes_of(out)[out_row * row_bytes:(out_row + n) * row_bytes]
        dst = (self._view(dst_bytes, 0, n * row_bytes, unit)).reshape(n, per)
        idx = self.index(local)
        if self.module == "numpy":
            np.take(src, idx, axis=0, out=dst)
        elif self.module == "cupy":
            import cupy
            cupy.take(src, idx, axis=0, out=dst)
        else:
            import torch
            torch.index_select(src, 0, idx, out=dst)

    def ranges(self, buf: Any, src: np.ndarray, lengths: np.ndarray, out: Any, out_byte: int = 0) -> None:
        """Bytes [src[i], src[i] + lengths[i]) of `buf`, end to end, into
        the bytes of `out` from `out_byte` (variable-length rows)."""
        lengths = np.asarray(lengths, np.int64)
        src = np.asarray(src, np.int64)
        total = int(lengths.sum())
        if total == 0:
            return
        dst_bytes = self._bytes_of(out)
        if self.module == "numpy":
            d = out_byte
            for s, n in zip(src.tolist(), lengths.tolist()):
                dst_bytes[d:d + n] = buf[s:s + n]
                d += n
            return
        dst0 = np.cumsum(lengths) - lengths
        unit = _unit(out_byte, *np.unique(src % 8), *np.unique(lengths % 8), 8)
        # element i of the output comes from element i + shift[run] of buf,
        # run = the sample it falls in (found by a search over the starts)
        starts_u = self.index(dst0 // unit)
        shift_u = self.index((src - dst0) // unit)
        nu = total // unit
        whole = self._view(buf, 0, (buf.shape[0] // unit) * unit, unit)
        dst = self._view(dst_bytes, out_byte, out_byte + total, unit)
        if self.module == "cupy":
            import cupy
            pos = cupy.arange(nu, dtype=cupy.int64)
            run = cupy.searchsorted(starts_u, pos, side="right") - 1
            cupy.take(whole, pos + shift_u[run], out=dst)
        else:
            import torch
            pos = torch.arange(nu, dtype=torch.int64, device=starts_u.device)
            run = torch.searchsorted(starts_u, pos, right=True) - 1
            torch.index_select(whole, 0, pos + shift_u[run], out=dst)

    def host_to_module(self, arr: np.ndarray) -> Any:
        """A small host array (a ragged batch's offsets) in the batch's library."""
        if self.module == "numpy":
            return arr
        if self.module == "cupy":
            import cupy
            return cupy.asarray(arr)
        import torch
        return torch.from_numpy(arr).to("cuda")
