"""h5gds: GPU-direct HDF5 I/O for h5py.

After ``import h5gds``:

* ``h5py.File(path, mode, driver="gds", threads=8, io_block_size="16MiB")``
  opens files with the gds driver (``f.driver == "gds"``);
* :func:`read` / :func:`write` move dataset selections into and out of
  CuPy / PyTorch / any CUDA or DLPack array (host numpy arrays too);
* :func:`create_dataset` makes datasets ready for pass-through;
* :class:`Loader` reads shuffled batches of samples onto the GPU (:class:`Ragged`:
  variable-length samples);
* :func:`save` / :func:`load` write and read checkpoints of nested states
  (the loop stalls for a snapshot, not for the disk; atomic and durable).
"""
from __future__ import annotations

from . import _lib
from ._arrays import gpu_available, set_array_module
from ._build_info import version as __version__
from ._io import (DecodeStats, EncodeStats, NotGdsWarning, create_dataset, driver_id, fapl_config, gds_dcpl,
                  last_decode_stats, last_encode_stats, last_route, read, register, write)
from ._checkpoint import CheckpointHandle, save
from ._checkpoint_load import load
from ._checkpoint_memory import CheckpointMemory, checkpoint_memory_info, release_checkpoint_memory
from ._checkpoint_prepare import prepare_checkpoint
from ._loader import Loader, Ragged, TorchLoader

register()

hdf5_version: tuple[int, int, int] = _lib.hdf5_version
"""The HDF5 version h5py runs (and so h5gds)."""
hdf5_compiled: tuple[int, int, int] = tuple(_lib._build_info.hdf5_compiled)  # type: ignore[assignment]
"""The HDF5 headers the native library was compiled with."""

__all__ = [
    "CheckpointHandle", "CheckpointMemory", "Loader", "NotGdsWarning", "Ragged", "TorchLoader", "load", "save", "create_dataset", "driver_id", "fapl_config", "gds_dcpl",
    "checkpoint_memory_info", "prepare_checkpoint", "release_checkpoint_memory",
    "gpu_available", "hdf5_compiled", "hdf5_version", "last_route", "last_decode_stats", "last_encode_stats",
    "DecodeStats", "EncodeStats", "read", "set_array_module", "write",
    "__version__",
]
