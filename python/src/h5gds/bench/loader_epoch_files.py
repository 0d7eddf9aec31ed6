"""The files of h5gds.bench.loader_epoch and the readers each method
opens on them: one file per sample size (made once), where its samples lie,
an h5gds.Loader of either order, a torch DataLoader over h5py."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import h5py
import numpy as np

import h5gds

from .._sizes import parse_size
from ._common import fsync_path
from .loader import RowDataset


def sample_file(directory: Path, label: str, file_bytes: int, var_range: tuple[int, int]) -> tuple[Path, int, int]:
    """The file of one sample size (made once): (path, samples, bytes of
    the samples). Contents: a 64 MiB random block repeated (the disk does
    not care), labels 0..9 in blocks."""
    path = directory / f"loader-epoch-{label}.h5"
    rng = np.random.default_rng(0)
    if label == "var":
        lo, hi = var_range
        n = int(file_bytes // ((lo + hi) / 2))
        lens = rng.integers(lo, hi + 1, n)
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        total = int(offsets[-1])
        if not _made(path, "v", (total,)):
            block = rng.integers(0, 255, 64 << 20, dtype=np.uint8)
            with h5py.File(path, "w") as f:
                d = f.create_dataset("v", shape=(total,), dtype="u1")
                for i in range(0, total, len(block)):
                    d[i:i + len(block)] = block[: min(len(block), total - i)]
                f["o"] = offsets
                f["y"] = (np.arange(n) * 10 // n).astype(np.int64)
            fsync_path(path)
        return path, n, total
    sample = parse_size(label)
    n = file_bytes // sample
    if not _made(path, "x", (n, sample)):
        step = max(1, (64 << 20) // sample)
        block = rng.integers(0, 255, (step, sample), dtype=np.uint8)
        with h5py.File(path, "w") as f:
            d = f.create_dataset("x", shape=(n, sample), dtype="u1")
            for i in range(0, n, step):
                d[i:i + step] = block[: min(step, n - i)]
            f["y"] = (np.arange(n) * 10 // n).astype(np.int64)
        fsync_path(path)
    return path, n, n * sample


def _made(path: Path, name: str, shape: tuple[int, ...]) -> bool:
    if not path.exists():
        return False
    try:
        with h5py.File(path, "r") as f:
            return name in f and f[name].shape == shape
    except OSError:
        return False


def data_region(path: Path, label: str) -> tuple[int, int]:
    """File offset and bytes of the samples' dataset (contiguous)."""
    with h5py.File(path, "r") as f:
        d = f["v" if label == "var" else "x"]
        return int(d.id.get_offset()), int(d.size * d.dtype.itemsize)


# ---- readers ----------------------------------------------------------------------------


class _VarDataset:
    """torch Dataset over a Ragged column with h5py: one file per worker."""

    def __init__(self, path: str):
        self.path = path
        self.f: h5py.File | None = None
        with h5py.File(path, "r") as f:
            self.offsets = f["o"][()]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> Any:
        import torch
        if self.f is None:
            self.f = h5py.File(self.path, "r")
        return torch.from_numpy(self.f["v"][self.offsets[i]:self.offsets[i + 1]])


def _var_collate(items: list[Any]) -> Any:
    import torch
    lens = torch.tensor([len(t) for t in items], dtype=torch.int64)
    return torch.cat(items), torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])


def make_loader(path: Path, label: str, bsz: int, dev: Any, args: argparse.Namespace, order: str,
                labels: bool = False) -> h5gds.Loader:
    with h5py.File(path, "r") as f:
        col: Any = h5gds.Ragged(f["v"], f["o"]) if label == "var" else f["x"]
        src = (col, f["y"]) if labels else col
        ld = h5gds.Loader(src, bsz, seed=1, like=dev.name, order=order, cache="off", config=args.config,
                          window=args.window, buffer=args.buffer, prefetch=4)
    if args.inflight:
        ld._inflight_loads = args.inflight
    return ld


def _dataloader(path: Path, label: str, bsz: int, order: np.ndarray, workers: int) -> Any:
    import torch
    ds = _VarDataset(str(path)) if label == "var" else RowDataset(str(path))
    return torch.utils.data.DataLoader(ds, batch_size=bsz, sampler=order.tolist(), num_workers=workers,
                                       pin_memory=True, collate_fn=_var_collate if label == "var" else None)


def _to_device(batch: Any) -> None:
    if isinstance(batch, (tuple, list)):
        for b in batch:
            _to_device(b)
    else:
        batch.cuda(non_blocking=True)
