"""Checkpoints: a nested state (dicts, lists, tuples of torch tensors, CuPy
and numpy arrays, and plain Python values) saved as one plain HDF5 file.

``save`` opens a temporary file with the gds driver and write-behind
(snapshot memory of the state's size: device memory for device tensors when
it can be had, else pinned host memory), creates one dataset per array, and
writes each: a write returns once its bytes are copied into the snapshot,
so ``save`` returns after the copies -- the training loop may change its
tensors (and its dicts) at once. A background thread then writes what is
left of HDF5's metadata (closes the datasets; the groups and attributes,
described at the call), waits for the file's background writes and fsyncs
(without the GIL or h5py's lock), closes the file (HDF5's metadata, fsync),
renames it over ``path`` and fsyncs the directory. A
crash at any moment leaves the previous checkpoint at ``path`` intact; its
blocks are freed after the new one is durable, not inside the rename.

The snapshot memory is allocated by a process's first save and kept for
the next ones; ``prepare_checkpoint`` allocates it ahead (in the background
by default), and with a path starts the I/O engine there, so that the first
save stalls no longer than the later ones.

Layout: groups for dicts, lists and tuples (attribute ``h5gds_container``),
one contiguous dataset per array (chunked and filtered for the arrays that
``compression=`` compresses), plain values as JSON in the group
attribute ``h5gds_values``; the root's ``h5gds_arrays`` (JSON) gives each
array's library (torch, cupy, numpy) and dtype name. bfloat16 is stored as an HDF5 float
type with bfloat16's layout (sign 15, exponent 7..14 with bias 127,
mantissa 0..6), which h5py reads, converting.

Compressed leaves (``compression=``, opt-in) are chunked datasets with an
HDF5 filter pipeline (deflate, or hdf5plugin's LZ4, Zstd, Bitshuffle): any
h5py reader (with hdf5plugin for the plugin filters) reads them. ``save``
copies each of them (a device copy ordered on the array's stream, or a host
copy) and returns; the background part compresses and writes the copies
before it writes the metadata, so the file is complete when the handle
says durable. Device copies are compressed on the GPU where the driver can
(route ``gpu-encode``), the others by HDF5's CPU filters.
"""
from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any, Iterator

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5t, h5z
from h5py._objects import phil

from . import _arrays
from ._io import _dxpl, gds_dcpl
from ._lib import errbuf, hdf5_error_text, native

__all__ = ["CheckpointHandle", "CheckpointMemory", "checkpoint_memory_info", "load", "prepare_checkpoint",
           "release_checkpoint_memory", "save"]

_H5S_ALL = 0
_PLAIN = (type(None), bool, int, float, str)


def _bf16_type() -> h5t.TypeFloatID:
    t = h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)  # sign bit, exponent position and size, mantissa position and size
    t.set_offset(0)
    t.set_precision(16)
    t.set_size(2)
    t.set_ebias(127)
    return t


def _escape(key: str) -> str:
    """An HDF5 link name for a dict key ('/' is a separator, '.' a link to self)."""
    out = key.replace("%", "%25").replace("/", "%2F")
    return "%2E" if out == "." else "%00" if out == "" else out


def _unescape(name: str) -> str:
    if name == "%00":
        return ""
    return name.replace("%2E", ".").replace("%2F", "/").replace("%25", "%")


def _is_array(obj: Any) -> bool:
    mod = type(obj).__module__.split(".")[0]
    return (mod == "torch" and hasattr(obj, "data_ptr")) or isinstance(obj, np.ndarray) or \
        hasattr(obj, "__cuda_array_interface__")


def _plain(value: Any) -> bool:
    if isinstance(value, _PLAIN):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, _PLAIN) for v in value)


def _leaves(state: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(dataset path, array) for every array of the state."""
    if _is_array(state):
        yield path, state
    elif isinstance(state, dict):
        for k, v in state.items():
            if not isinstance(k, (str, int)):
                raise TypeError(f"{path or '/'}: dict keys must be str or int, not {type(k).__name__}")
            yield from _leaves(v, f"{path}/{_escape(str(k))}")
    elif isinstance(state, (list, tuple)) and not _plain(state):
        for i, v in enumerate(state):
            yield from _leaves(v, f"{path}/{i}")


_TYPES: dict[Any, Any] = {}  # HDF5 file type per dtype, made once


def _file_type(key: Any, make: Any) -> Any:
    t = _TYPES.get(key)
    if t is None:
        t = _TYPES[key] = make()
    return t


def _array_info(obj: Any) -> tuple[str, str, tuple[int, ...], Any, int]:
    """(array kind, dtype name, shape, HDF5 type, bytes) of a leaf."""
    mod = type(obj).__module__.split(".")[0]
    if mod == "torch":
        import torch
        name = str(obj.dtype).replace("torch.", "")
        if obj.dtype == torch.bfloat16:
            return "torch", name, tuple(obj.shape), _file_type("bf16", _bf16_type), obj.numel() * 2
        dt = _arrays.numpy_dtype_of_torch(obj)
        return "torch", name, tuple(obj.shape), _file_type(dt, lambda: h5t.py_create(dt)), obj.numel() * dt.itemsize
    kind = "numpy" if isinstance(obj, np.ndarray) else "cupy"
    dt = np.dtype(obj.dtype)
    if dt.kind not in "biufc":
        raise TypeError(f"arrays of dtype {dt} cannot be checkpointed (numeric types only)")
    return kind, dt.name, tuple(obj.shape), _file_type(dt, lambda: h5t.py_create(dt)), int(obj.size) * dt.itemsize


def _raw_view(obj: Any) -> Any:
    """An array view of the leaf's bytes (bfloat16 as int16: the file type
    is the memory type, so nothing is converted)."""
    if type(obj).__module__.split(".")[0] == "torch":
        import torch
        if obj.dtype == torch.bfloat16:
            obj = obj.view(torch.int16)
    return _arrays.view(obj, writable=False, name="state array", contiguous_copy=True)


# ---- compressed leaves (save(..., compression=...)) ----

_COMPRESS_MIN_BYTES = 64 << 10  # below it a filter's per-chunk overhead outweighs the bytes saved
_CHUNK_BYTES = 4 << 20  # at most, whole rows where a row fits: the GPU encoder takes whole chunks
# Rows written per HDF5 call: HDF5's lock is held for one call, so that
# other threads' h5py calls wait for one slab's compression at most (HDF5's
# CPU filters are slower: smaller slabs for host data). A device slab stays
# within one batch of the GPU encoder (256 MiB).
_SLAB_BYTES_DEVICE = 64 << 20
_SLAB_BYTES_HOST = 8 << 20
_PLUGIN_NAMES = ("lz4", "zstd", "bitshuffle-lz4")  # hdf5plugin's filters
_NAMES = ("gzip", "lzf") + _PLUGIN_NAMES


@dataclasses.dataclass(frozen=True)
class _Compression:
    """The filter pipeline of compressed leaves: an optional byte shuffle,
    then one compressor (HDF5 filter id and its parameters)."""
    label: str
    filter_id: int
    opts: tuple[int, ...]
    shuffle: bool
    min_bytes: int

    def dcpl(self, chunks: tuple[int, ...], itemsize: int) -> h5p.PropDCID:
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_chunk(chunks)
        if self.shuffle and itemsize > 1:  # a byte shuffle of 1-byte elements changes nothing
            dcpl.set_shuffle()
        if self.filter_id == h5z.FILTER_DEFLATE:
            dcpl.set_deflate(self.opts[0] if self.opts else 4)
        else:  # optional, as h5py sets them: a chunk that does not shrink is stored as it is
            dcpl.set_filter(self.filter_id, h5z.FLAG_OPTIONAL, self.opts)
        return dcpl


def _import_hdf5plugin(why: str) -> Any:
    try:
        import hdf5plugin
    except ImportError as exc:
        raise ImportError(f"{why} needs the hdf5plugin package (pip install hdf5plugin), which cannot be "
                          f"imported: {exc}") from exc
    return hdf5plugin


def _can_encode(filter_id: int) -> bool:
    return bool(h5z.filter_avail(filter_id)) and \
        bool(h5z.get_filter_info(filter_id) & h5z.FILTER_CONFIG_ENCODE_ENABLED)


def _level(name: str, opts: Any, default: int) -> int:
    if opts is None:
        return default
    if isinstance(opts, bool) or not isinstance(opts, (int, np.integer)):
        raise TypeError(f"compression={name!r}: compression_opts must be an int (the level), "
                        f"not {type(opts).__name__}")
    return int(opts)


def _compression_of(compression: Any, compression_opts: Any, shuffle: Any, min_bytes: Any) -> _Compression | None:
    """save()'s compression arguments checked and resolved (nothing is
    created yet): None when nothing is compressed."""
    if isinstance(min_bytes, bool) or not isinstance(min_bytes, (int, np.integer)):
        raise TypeError(f"compress_min_bytes must be an int (bytes), not {type(min_bytes).__name__}")
    if min_bytes < 0:
        raise ValueError(f"compress_min_bytes must be >= 0, not {min_bytes}")
    if shuffle is not None and not isinstance(shuffle, bool):
        raise TypeError(f"shuffle must be None, True or False, not {type(shuffle).__name__}")
    if compression is None:
        if compression_opts is not None:
            raise TypeError("compression_opts given without compression=")
        if shuffle:
            raise ValueError("shuffle=True without compression= (the shuffle only helps a compressor)")
        return None
    if isinstance(compression, Mapping) and isinstance(compression.get("compression"), str):
        # {"compression": "gzip", "compression_opts": 4}: h5py's keywords as a dict
        if compression_opts is not None:
            raise TypeError("compression_opts given twice (in the compression mapping and as a keyword)")
        return _compression_of(compression["compression"], compression.get("compression_opts"), shuffle, min_bytes)
    label: str
    opts: tuple[int, ...]
    auto_shuffle = False  # filters given by id or object: exactly the pipeline asked for
    if isinstance(compression, str):
        name = compression.lower()
        if name == "gzip":
            level = _level(name, compression_opts, 4)  # h5py's default level
            if not 0 <= level <= 9:
                raise ValueError(f"compression='gzip': compression_opts must be a level from 0 to 9, not {level}")
            filter_id, opts, auto_shuffle = h5z.FILTER_DEFLATE, (level,), True
        elif name == "lzf":
            if compression_opts is not None:
                raise TypeError("compression='lzf' takes no compression_opts")
            filter_id, opts, auto_shuffle = h5z.FILTER_LZF, (), True
        elif name in _PLUGIN_NAMES:
            hdf5plugin = _import_hdf5plugin(f"compression={compression!r}")
            if name == "lz4":
                filt = hdf5plugin.LZ4(nbytes=_level(name, compression_opts, 0))  # opts: LZ4's block size
            elif name == "zstd":
                filt = hdf5plugin.Zstd(clevel=_level(name, compression_opts, 3))
            else:
                if compression_opts is not None:
                    raise TypeError("compression='bitshuffle-lz4' takes no compression_opts")
                filt = hdf5plugin.Bitshuffle(cname="lz4")
            filter_id, opts = int(filt.filter_id), tuple(int(o) for o in filt.filter_options)
            auto_shuffle = name != "bitshuffle-lz4"  # bitshuffle is a shuffle of its own
        else:
            raise ValueError(f"compression={compression!r}: expected one of {', '.join(map(repr, _NAMES))}, an "
                             "HDF5 filter id or an hdf5plugin filter object")
        label = name
    elif isinstance(compression, (int, np.integer)) and not isinstance(compression, bool):
        filter_id = int(compression)
        if compression_opts is None:
            opts = ()
        elif isinstance(compression_opts, (tuple, list)) and \
                all(isinstance(o, (int, np.integer)) and not isinstance(o, bool) for o in compression_opts):
            opts = tuple(int(o) for o in compression_opts)
        else:
            raise TypeError(f"compression={filter_id}: compression_opts must be a tuple of ints (the filter's "
                            f"parameters), not {compression_opts!r}")
        label = f"filter {filter_id}"
    elif isinstance(compression, Mapping) and "compression" in compression:  # hdf5plugin's filter objects
        if compression_opts is not None:
            raise TypeError("compression_opts given with a filter object (its options are the object's)")
        filter_id = compression["compression"]
        if isinstance(filter_id, bool) or not isinstance(filter_id, (int, np.integer)):
            raise TypeError(f"compression={compression!r}: its 'compression' must be an HDF5 filter id")
        filter_id = int(filter_id)
        opts = tuple(int(o) for o in compression.get("compression_opts") or ())
        label = f"{type(compression).__name__} (filter {filter_id})"
    else:
        raise TypeError(f"compression must be None, a name ({', '.join(map(repr, _NAMES))}), an HDF5 filter id "
                        f"or an hdf5plugin filter object, not {type(compression).__name__}")
    if not _can_encode(filter_id):
        try:  # hdf5plugin registers its filters with HDF5 when imported
            import hdf5plugin  # noqa: F401
        except ImportError:
            pass
    if not _can_encode(filter_id):
        raise ValueError(f"compression={label}: HDF5 filter {filter_id} is not available for writing (not "
                         "registered; hdf5plugin registers its filters when imported)")
    return _Compression(label, filter_id, opts, auto_shuffle if shuffle is None else shuffle, int(min_bytes))


def _chunk_shape(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Chunks of at most _CHUNK_BYTES (the whole array when smaller): whole
    rows along the first axis where a row fits, else parts of a row (the
    trailing axes kept whole as far as they fit)."""
    chunk = [1] * len(shape)
    inner = itemsize
    for axis in range(len(shape) - 1, -1, -1):
        if inner * shape[axis] <= _CHUNK_BYTES:
            chunk[axis] = shape[axis]
            inner *= shape[axis]
        else:
            chunk[axis] = max(1, _CHUNK_BYTES // inner)
            break
    return tuple(chunk)


class _CompressedLeaf:
    """A leaf stored compressed: its dataset, and what its write reads -- a
    snapshot copy (``ready``: the event after the copy on the array's
    stream, for device copies), or the leaf itself while ``save`` runs."""

    def __init__(self, name: str, shape: tuple[int, ...], ftype: Any, nbytes: int, chunks: tuple[int, ...]) -> None:
        self.name = name
        self.shape = shape
        self.ftype = ftype
        self.nbytes = nbytes
        self.chunks = chunks
        self.dset: h5d.DatasetID | None = None
        self.view: _arrays.ArrayView | None = None
        self.ready: Any = None


def _snapshot_copy(arr: Any, memory: str) -> tuple[_arrays.ArrayView, Any] | None:
    """A copy of a leaf for the background to compress: (its view, the event
    after the copy or None). Host leaves get a host copy; device leaves a
    device copy queued on the array's current stream (the CPU does not
    wait). None where no device copy is to be had (``memory="host"``, the
    device full, an array that neither torch nor CuPy copies): that leaf is
    then compressed during the call."""
    mod = type(arr).__module__.split(".")[0]
    if mod == "torch":
        import torch
        t = arr.detach()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)  # the raw bytes (the file type is bfloat16's layout)
        if not t.is_cuda:
            return _arrays.view(t.numpy().copy(), writable=False, name="state array"), None
        if memory == "host":
            return None
        with torch.cuda.device(t.device):
            try:
                snap = torch.empty(t.shape, dtype=t.dtype, device=t.device)
                snap.copy_(t)
            except torch.cuda.OutOfMemoryError:
                return None
            ready = torch.cuda.Event()
            ready.record()
        return _arrays.view(snap, writable=False, name="state array"), ready
    if isinstance(arr, np.ndarray):
        return _arrays.view(np.array(arr, order="C", copy=True), writable=False, name="state array"), None
    if memory == "host":
        return None
    try:
        import cupy
    except ImportError:
        return None
    with (arr.device if mod == "cupy" else cupy.cuda.Device()):
        try:
            snap = cupy.array(cupy.asarray(arr), order="C", copy=True)
        except cupy.cuda.memory.OutOfMemoryError:
            return None
        ready = cupy.cuda.Event(disable_timing=True)
        ready.record()
    return _arrays.view(snap, writable=False, name="state array"), ready


def _write_compressed(f: h5py.File, path: str, leaf: _CompressedLeaf, view: _arrays.ArrayView) -> str:
    """Writes a compressed leaf from `view` in slabs of whole chunk rows
    (each slab's chunks are encoded together: on the GPU for device data
    where the driver can, else by HDF5's filters); returns the route of its
    last slab."""
    dset, leaf.dset = leaf.dset, None  # closed when let go
    assert dset is not None
    row_bytes = leaf.nbytes // leaf.shape[0]
    slab = _SLAB_BYTES_DEVICE if view.device else _SLAB_BYTES_HOST
    step = leaf.chunks[0]
    rows = max(step, slab // row_bytes // step * step)
    fspace = dset.get_space()
    dxpl = _dxpl(view)
    route = ""
    for start in range(0, leaf.shape[0], rows):
        n = min(rows, leaf.shape[0] - start)
        mspace = h5s.create_simple((n,) + leaf.shape[1:])
        fspace.select_hyperslab((start,) + (0,) * (len(leaf.shape) - 1), (n,) + leaf.shape[1:])
        with phil:
            rc = native.H5Dwrite_gds(dset.id, leaf.ftype.id, mspace.id, fspace.id, dxpl.id,
                                     view.ptr + start * row_bytes)
            if rc < 0:
                raise OSError(f"checkpoint {path!r}: writing {leaf.name} (compressed) failed: {hdf5_error_text()}")
            route = native.H5FD_gds_route_name(native.H5FD_gds_last_route()).decode()
    return route


def _background_stream(view: _arrays.ArrayView) -> Any:
    """A stream of the background's own for a device copy (its library's, on
    its device), so that compressing it does not queue behind the training
    loop's work; None for host copies."""
    if not view.device:
        return None
    if view.module == "torch":
        import torch
        return torch.cuda.Stream(device=view.device_id)
    import cupy
    with cupy.cuda.Device(view.device_id):
        return cupy.cuda.Stream(non_blocking=True)


def _write_copies(f: h5py.File, path: str, leaves: list[_CompressedLeaf]) -> dict[str, int]:
    """Background: each snapshot copy compressed and written, then let go;
    the leaves written per route."""
    routes: dict[str, int] = {}
    streams: dict[tuple[str | None, int | None], Any] = {}
    for leaf in leaves:
        view, leaf.view = leaf.view, None
        assert view is not None
        stream = None
        if view.device:
            key = (view.module, view.device_id)
            if key not in streams:
                streams[key] = _background_stream(view)
            stream = streams[key]
            stream.wait_event(leaf.ready)  # ordered after the copy, on the GPU
            ptr = int(stream.cuda_stream if view.module == "torch" else stream.ptr)
            view = dataclasses.replace(view, stream=ptr)
        route = _write_compressed(f, path, leaf, view)
        if stream is not None:
            stream.synchronize()  # nothing queued still reads the copy let go next
        leaf.ready = None
        del view
        routes[route] = routes.get(route, 0) + 1
    return routes


class CheckpointHandle:
    """The checkpoint being written in the background. ``wait()`` returns
    once it is durable at its path (or raises what failed); ``done()``
    polls. Statistics: ``stall_s`` (the time ``save`` took), ``durable_s``
    (from the call to durable), ``peak_snapshot_bytes``, and ``timings``:
    seconds of each part of the stall (``walk``: listing the arrays,
    ``open``: the temporary file and its snapshot memory, ``structure``:
    the containers' description, ``views``: the arrays' pointers,
    ``create`` and ``write`` (the snapshots) of the datasets, ``native``:
    the rest of that native call; ``warmup``: waiting for a
    ``prepare_checkpoint(path=...)`` still at work; with ``compression=``:
    ``copy``, the compressed leaves' snapshot copies, and ``compress``, the
    compressed leaves that could not be copied, compressed and written in
    the call), and of the background's first part (``compress_background``:
    the copies compressed and written; ``metadata``: closing the datasets,
    groups and attributes; HDF5 metadata only, done after the call
    returns). ``compression_routes``: compressed leaves written per route
    (``gpu-encode``, ``host-staged``, ``host``), complete once done."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.stall_s = 0.0
        self.durable_s: float | None = None
        self.peak_snapshot_bytes = 0
        self.snapshot_memory_bytes = 0
        # how the drain went: background writes in flight and pool workers
        # busy at once (at most), snapshots the application's stream waited
        # for (no CPU wait), file space reserved ahead
        self.peak_background_writes = 0
        self.peak_busy_workers = 0
        self.stream_ordered_snapshots = 0
        self.reserved_bytes = 0
        self.snapshots = 0  # write-behind snapshots taken (one per run of leaves written together)
        self.compression_routes: dict[str, int] = {}
        self.timings: dict[str, float] = {}
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> None:
        if not self._done.wait(timeout):
            raise TimeoutError(f"checkpoint {self.path!r} not durable after {timeout} s")
        if self._error is not None:
            raise self._error

    def exception(self) -> BaseException | None:
        self._done.wait()
        return self._error


def _hold(path: str) -> int | None:
    """A descriptor of the checkpoint `path` replaces, if any: its blocks are
    then freed when that descriptor is closed, after the new checkpoint is
    durable, instead of inside the rename (ext4: 0.4-0.75 s for 2 GiB,
    bench/tools/replace-cost.py)."""
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


class _Metadata:
    """What a save leaves to its background part: the datasets still open,
    and the groups and attributes, captured when ``save`` was called (the
    caller may change its containers as soon as ``save`` returns)."""

    def __init__(self, plan: list[tuple[str, dict[str, Any]]]) -> None:
        self.plan = plan
        self.index = ""
        self.datasets: Any = None  # ctypes array of dataset ids, open until written out
        self.copies: list[_CompressedLeaf] = []  # compressed leaves whose snapshot copies are still to write

    def write(self, f: h5py.File, path: str) -> None:
        with phil:
            if self.datasets is not None:
                ids, self.datasets = self.datasets, None
                err = errbuf()
                if native.h5gds_py_close_datasets(len(ids), ids, err, len(err)) != 0:
                    raise OSError(f"checkpoint {path!r}: {err.value.decode(errors='replace')}")
            for where, attrs in self.plan:
                grp = f.require_group(where) if where != "/" else f["/"]
                for k, v in attrs.items():
                    grp.attrs[k] = v
            f.attrs["h5gds_arrays"] = self.index


def _finish_copies(handle: CheckpointHandle, f: h5py.File, path: str, meta: _Metadata) -> None:
    """Background: the compressed leaves' snapshot copies compressed and
    written (before the metadata: the file is whole when it is durable)."""
    t = time.perf_counter()
    copies, meta.copies = meta.copies, []
    routes = _write_copies(f, path, copies)
    merged = dict(handle.compression_routes)
    for route, count in routes.items():
        merged[route] = merged.get(route, 0) + count
    handle.compression_routes = merged  # rebound, as timings
    handle.timings = {**handle.timings, "compress_background": time.perf_counter() - t}


def _finish(handle: CheckpointHandle, f: h5py.File, tmp: str, path: str, t0: float, meta: _Metadata) -> None:
    """Background part: the HDF5 metadata, durable data, closed file, atomic
    rename; then the previous checkpoint's blocks freed in the background."""
    previous: int | None = None
    try:
        if meta.copies:
            _finish_copies(handle, f, path, meta)
        t = time.perf_counter()
        meta.write(f, tmp)
        # rebound, not changed in place: the caller may be reading the dict
        handle.timings = {**handle.timings, "metadata": time.perf_counter() - t}
        with phil:
            engine = native.h5gds_py_engine_of(f.id.id)
        if not engine:
            raise OSError(f"cannot reach the driver of {tmp!r}: {hdf5_error_text()}")
        err = errbuf()
        if native.h5gds_py_sync(engine, err, len(err)) != 0:  # no GIL, no h5py lock
            raise OSError(f"checkpoint {path!r}: writing the data failed: {err.value.decode(errors='replace')}")
        stats = (ctypes.c_uint64 * 10)()
        with phil:
            if native.h5gds_py_wb_stats(f.id.id, stats) == 0:
                handle.peak_snapshot_bytes = int(stats[3])
                handle.snapshot_memory_bytes = int(stats[4])
                handle.peak_background_writes = int(stats[6])
                handle.peak_busy_workers = int(stats[7])
                handle.stream_ordered_snapshots = int(stats[8])
                handle.reserved_bytes = int(stats[9])
                handle.snapshots = int(stats[0])
        f.close()  # HDF5's metadata; the driver fsyncs at the flush
        previous = _hold(path)
        os.replace(tmp, path)
        dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(dfd)  # the rename itself is durable
        finally:
            os.close(dfd)
        handle.durable_s = time.perf_counter() - t0
    except BaseException as exc:  # kept for wait(): nothing is dropped silently
        handle._error = exc
        meta.copies = []  # the snapshot copies let go, and the frames that held them
        traceback.clear_frames(exc.__traceback__)  # (the kept exception would hold them)
        try:
            if f.id.valid:
                f.close()
        except Exception:
            pass
        try:
            os.unlink(tmp)
        except OSError:
            pass
    finally:
        if previous is not None:  # started before the handle says done, so it can be joined from then on
            threading.Thread(target=os.close, args=(previous,), name="h5gds-checkpoint-free").start()
        handle._done.set()


def save(state: Any, path: str | os.PathLike[str], *, async_: bool = True, memory: str = "auto",
         budget: int | None = None, compression: Any = None, compression_opts: Any = None,
         shuffle: bool | None = None, compress_min_bytes: int = _COMPRESS_MIN_BYTES,
         **options: Any) -> CheckpointHandle:
    """Saves ``state`` to ``path`` as one HDF5 file; returns a
    :class:`CheckpointHandle`. With ``async_`` (the default) it returns once
    every array is copied into snapshot memory (``memory``: "auto" = device
    memory for device arrays when it can be had, "host" = pinned host
    memory; ``budget``: its size, by default the state's size); the file
    becomes durable, and appears at ``path``, in the background. Without
    ``async_`` it returns once the checkpoint is durable; it takes the same
    path with a snapshot pool of at most 1 GiB (unless ``budget`` is given),
    so that many leaves are written side by side. Other keywords are
    driver options (``threads=``, ...).

    ``compression`` (default None: nothing compressed) compresses every
    array of at least ``compress_min_bytes`` bytes (default 64 KiB; smaller
    ones stay contiguous, uncompressed) into a chunked dataset (chunks of
    whole rows, at most 4 MiB): "gzip" (HDF5's deflate; ``compression_opts``
    the level, 0-9, default 4), "lz4", "zstd" (``compression_opts`` the
    level, default 3), "bitshuffle-lz4" (these three hdf5plugin's filters:
    it must be importable), "lzf", an HDF5 filter id (``compression_opts`` a
    tuple of its parameters) or an hdf5plugin filter object
    (``hdf5plugin.Zstd(clevel=9)``). ``shuffle``: HDF5's byte shuffle
    before the compressor; None (the default) puts it before "gzip", "lz4",
    "zstd" and "lzf", not elsewhere. A wrong argument raises before any
    file is created. With ``async_``, ``save`` returns once each compressed
    array is copied (device arrays on the device, ordered on their stream,
    unless ``memory="host"`` or the device is full: those are compressed
    during the call); the background compresses the copies (on the GPU
    where the driver can, route ``gpu-encode``; else HDF5's CPU filters)
    before the file is made durable. Readers need nothing new: h5py (with
    hdf5plugin for the plugin filters) and :func:`load` read the arrays.

    The first save of a process allocates the snapshot memory (about 2 s
    for 3 GiB of pinned memory), kept for the next saves, and starts the I/O
    engine (its threads and their pinned staging memory, and once per file
    system the device path's tuning): that save stalls that much longer,
    unless :func:`prepare_checkpoint` made them ready before. A save that
    starts while ``prepare_checkpoint(path=...)`` is still at work waits
    for it (``timings['warmup']``)."""
    t0 = time.perf_counter()
    compress = _compression_of(compression, compression_opts, shuffle, compress_min_bytes)  # before any file
    waited = _wait_for_warmups()  # prepare_checkpoint(path=...) in progress: its engine and memory
    return _save_now(state, os.fspath(path), async_=async_, memory=memory, budget=budget, options=options, t0=t0,
                     waited=waited, compress=compress)


def _save_now(state: Any, path: str, *, async_: bool, memory: str, budget: int | None, options: dict[str, Any],
              t0: float | None = None, waited: float = 0.0, compress: _Compression | None = None) -> CheckpointHandle:
    t0 = time.perf_counter() if t0 is None else t0
    handle = CheckpointHandle(path)
    if waited:
        handle.timings["warmup"] = waited
    clock = _Clock(handle.timings)
    leaves = list(_leaves(state, ""))
    infos = [_array_info(a) for _, a in leaves]
    total = sum(i[4] for i in infos)
    clock.lap("walk")
    if budget is None:
        budget = _snapshot_budget(total, len(infos))
        if not async_:
            # Synchronous saves take the same path (snapshots written side by
            # side, many leaves in flight); a bounded pool is enough for that.
            budget = min(budget, _SYNC_BUDGET)
    tmp = f"{path}.h5gds-tmp-{os.getpid()}-{threading.get_ident()}"
    opts: dict[str, Any] = dict(options)
    opts.update(write_behind=int(budget), write_behind_memory=memory)
    f = h5py.File(tmp, "w", driver="gds", **opts)
    clock.lap("open")
    try:
        meta = _Metadata(_structure(state))
        clock.lap("structure")
        packed = set() if compress is None else \
            {i for i, info in enumerate(infos) if info[2] and info[4] and info[4] >= compress.min_bytes}
        if not packed:
            _write_leaves(f, path, leaves, infos, clock, max(int(budget) // 2, 1), meta)
        else:
            assert compress is not None
            plain = [i for i in range(len(leaves)) if i not in packed]
            _write_leaves(f, path, [leaves[i] for i in plain], [infos[i] for i in plain], clock,
                          max(int(budget) // 2, 1), meta)
            _compressed_leaves(f, path, [leaves[i] for i in sorted(packed)], [infos[i] for i in sorted(packed)],
                               compress, clock, meta, handle, defer=async_, memory=memory)
            meta.index = json.dumps({name or "/__root__": [info[0], info[1]] for (name, _), info in zip(leaves, infos)})
    except BaseException:
        _discard(f, tmp)
        raise
    handle.stall_s = time.perf_counter() - t0
    if async_:
        handle._thread = threading.Thread(target=_finish, args=(handle, f, tmp, path, t0, meta), daemon=False,
                                          name="h5gds-checkpoint")
        try:
            handle._thread.start()
        except BaseException:  # no thread: nothing may stay open (snapshot memory, datasets, the file)
            _discard(f, tmp)
            raise
    else:
        _finish(handle, f, tmp, path, t0, meta)
        handle.wait()
        handle.stall_s = handle.durable_s or 0.0  # the caller waited until durable
    return handle


_SYNC_BUDGET = 1 << 30


def _snapshot_budget(total: int, narrays: int) -> int:
    """Snapshot memory of an asynchronous save: the state's bytes and room
    for each array's alignment (write-behind places snapshots at multiples of
    256 bytes), at least 1 MiB."""
    return max(total + 256 * narrays, 1 << 20)


# The engine's kinds of snapshot memory (gds_wb_memory_t; H5FD_gds_wb_memory_t).
_MEMORY_KINDS = {"auto": 0, "device": 1, "host": 2}


def _device_pointer(arr: Any) -> int | None:
    """The address of a device array's memory, None for a host array."""
    if type(arr).__module__.split(".")[0] == "torch":
        return int(arr.data_ptr()) if arr.is_cuda else None
    if isinstance(arr, np.ndarray):
        return None
    v = _arrays.view(arr, writable=False, name="state array", contiguous_copy=True)
    return v.ptr if v.device else None


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


def _discard(f: h5py.File, tmp: str) -> None:
    """A save that failed before its background part: the file closed (its
    snapshot memory and open datasets with it), the temporary removed."""
    try:
        f.close()
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


class _Clock:
    """Seconds per part of a save, into `timings`."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings, self.t = timings, time.perf_counter()

    def lap(self, name: str) -> None:
        t = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + t - self.t
        self.t = t

    def add(self, name: str, seconds: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + seconds


def _write_leaves(f: h5py.File, path: str, leaves: list[tuple[str, Any]], infos: list[Any], clock: _Clock,
                  run_bytes: int, meta: _Metadata) -> None:
    """Every array as a dataset, in one native call (h5gds_py_save_leaves):
    all created first, then all written, no Python per HDF5 call; the
    writes go in runs of leaves of at most `run_bytes` (half the snapshot
    budget: a run is snapshotted at once, and two fit), one HDF5 call each.
    The datasets stay open, and the array index is written, in the
    background (`meta`)."""
    n = len(leaves)
    names = (ctypes.c_char_p * max(n, 1))()
    types = (ctypes.c_int64 * max(n, 1))()
    ranks = (ctypes.c_int32 * max(n, 1))()
    addrs = (ctypes.c_uint64 * max(n, 1))()
    sizes = (ctypes.c_uint64 * max(n, 1))()
    dxpl_ids = (ctypes.c_int64 * max(n, 1))()
    dims: list[int] = []
    arrays: dict[str, list[str]] = {}
    keep = []  # views (contiguous copies among them) live until written
    # one transfer list per (device, stream): leaves of one list are written
    # together (two devices' legacy streams are two lists: one snapshot
    # holds one device's memory)
    dxpls: dict[tuple[int | None, int | None], Any] = {}

    def dxpl_of(v: Any) -> Any:
        key = (v.device_id, v.stream)
        if key not in dxpls:
            dxpls[key] = _dxpl(v)
        return dxpls[key]

    torch_dxpls: dict[int, Any] = {}  # per device: its current stream's
    for i, ((name, arr), (kind, dtype_name, shape, ftype, nbytes)) in enumerate(zip(leaves, infos)):
        dset_path = name or "/__root__"
        arrays[dset_path] = [kind, dtype_name]
        names[i] = dset_path.encode()
        types[i] = ftype.id
        ranks[i] = len(shape)
        dims.extend(shape)
        sizes[i] = nbytes
        if not nbytes:
            continue
        if kind == "torch" and arr.is_cuda and arr.is_contiguous():
            # the common case, without building a view (a model's state is
            # hundreds of tensors, each on the caller's critical path)
            addrs[i] = arr.data_ptr()
            dev = arr.device.index
            if dev not in torch_dxpls:
                torch_dxpls[dev] = dxpl_of(_raw_view(arr))
            dxpl_ids[i] = torch_dxpls[dev].id
            continue
        v = _raw_view(arr)
        keep.append(v)
        addrs[i] = v.ptr
        dxpl_ids[i] = dxpl_of(v).id
    dim_arr = (ctypes.c_uint64 * max(len(dims), 1))(*dims)
    err = errbuf()
    dcpl = gds_dcpl()
    seconds = (ctypes.c_double * 2)()
    opened = (ctypes.c_int64 * max(n, 1))()
    clock.lap("views")
    with phil:  # HDF5 is not thread-safe; the GIL is released for the call
        rc = native.h5gds_py_save_leaves(f.id.id, n, names, types, ranks, dim_arr, addrs, sizes, dxpl_ids, dcpl.id,
                                         run_bytes, seconds, opened, err, len(err))
    if rc != 0:
        raise OSError(f"checkpoint {path!r}: {err.value.decode(errors='replace')}")
    meta.datasets = (ctypes.c_int64 * n)(*opened[:n])
    clock.lap("native")
    for name, sec in zip(("create", "write"), seconds):
        clock.add(name, sec)
    clock.timings["native"] -= sum(seconds)  # what is left: the call itself
    del keep
    meta.index = json.dumps(arrays)


def _compressed_leaves(f: h5py.File, path: str, leaves: list[tuple[str, Any]], infos: list[Any],
                       compress: _Compression, clock: _Clock, meta: _Metadata, handle: CheckpointHandle, *,
                       defer: bool, memory: str) -> None:
    """The compressed leaves' datasets created (grouped by creation list, in
    one native call per group, as the other leaves), then each leaf either
    copied for the background (`defer`: `meta.copies`) or, where no copy is
    to be had or the save is synchronous, compressed and written now."""
    groups: dict[tuple[tuple[int, ...], int], list[int]] = {}
    entries: list[_CompressedLeaf] = []
    for i, ((name, _), (_, _, shape, ftype, nbytes)) in enumerate(zip(leaves, infos)):
        chunks = _chunk_shape(shape, nbytes // int(np.prod(shape)))
        entries.append(_CompressedLeaf(name or "/__root__", shape, ftype, nbytes, chunks))
        groups.setdefault((chunks, nbytes // int(np.prod(shape))), []).append(i)
    for (chunks, itemsize), members in groups.items():
        _create_datasets(f, path, [entries[i] for i in members], compress.dcpl(chunks, itemsize))
    # Opened again without a chunk cache: each write then compresses and
    # stores its chunks itself (a cache would hold them until the close).
    dapl = h5p.create(h5p.DATASET_ACCESS)
    dapl.set_chunk_cache(1, 0, 1.0)
    for leaf in entries:
        leaf.dset = h5d.open(f.id, leaf.name.encode(), dapl=dapl)
    clock.lap("create")
    now: list[int] = []
    for i, ((_, arr), leaf) in enumerate(zip(leaves, entries)):
        copied = _snapshot_copy(arr, memory) if defer else None
        if copied is None:
            now.append(i)
        else:
            leaf.view, leaf.ready = copied
            meta.copies.append(leaf)
    if defer:
        clock.lap("copy")
    routes: dict[str, int] = {}
    for i in now:
        route = _write_compressed(f, path, entries[i], _raw_view(leaves[i][1]))
        routes[route] = routes.get(route, 0) + 1
    handle.compression_routes = routes
    if now:
        clock.lap("compress")


def _create_datasets(f: h5py.File, path: str, leaves: list[_CompressedLeaf], dcpl: h5p.PropDCID) -> None:
    """Datasets (and the groups on their way) created by the native call
    that creates the other leaves', with `dcpl` and nothing written, and
    closed."""
    n = len(leaves)
    names = (ctypes.c_char_p * n)(*(leaf.name.encode() for leaf in leaves))
    types = (ctypes.c_int64 * n)(*(leaf.ftype.id for leaf in leaves))
    ranks = (ctypes.c_int32 * n)(*(len(leaf.shape) for leaf in leaves))
    dims = [d for leaf in leaves for d in leaf.shape]
    dim_arr = (ctypes.c_uint64 * max(len(dims), 1))(*dims)
    zeros = (ctypes.c_uint64 * n)()  # no bytes: created only
    dxpl_ids = (ctypes.c_int64 * n)()
    opened = (ctypes.c_int64 * n)()
    err = errbuf()
    with phil:
        rc = native.h5gds_py_save_leaves(f.id.id, n, names, types, ranks, dim_arr, zeros, zeros, dxpl_ids, dcpl.id,
                                         1, None, opened, err, len(err))
        if rc == 0:
            rc = native.h5gds_py_close_datasets(n, opened, err, len(err))
    if rc != 0:
        raise OSError(f"checkpoint {path!r}: {err.value.decode(errors='replace')}")


def _structure(state: Any, where: str = "/", plan: list[tuple[str, dict[str, Any]]] | None = None
               ) -> list[tuple[str, dict[str, Any]]]:
    """The groups of the containers and their attributes (plain values as
    JSON), parents first, as (group path, attributes) to write later."""
    plan = [] if plan is None else plan
    attrs: dict[str, Any] = {}
    plan.append((where, attrs))
    if isinstance(state, dict):
        attrs["h5gds_container"] = "dict"
        plain, int_keys = {}, []
        for k, v in state.items():
            name = _escape(str(k))
            if isinstance(k, int):
                int_keys.append(name)
            if _is_array(v):
                continue
            if _plain(v):
                plain[name] = [type(v).__name__, v if not isinstance(v, tuple) else list(v)]
            else:
                _structure(v, f"{where.rstrip('/')}/{name}", plan)
        attrs["h5gds_values"] = json.dumps(plain)
        attrs["h5gds_int_keys"] = json.dumps(int_keys)
        attrs["h5gds_order"] = json.dumps([_escape(str(k)) for k in state])
    elif isinstance(state, (list, tuple)):
        attrs["h5gds_container"] = type(state).__name__
        plain = {}
        for i, v in enumerate(state):
            if _is_array(v):
                continue
            if _plain(v):
                plain[str(i)] = [type(v).__name__, v if not isinstance(v, tuple) else list(v)]
            else:
                _structure(v, f"{where.rstrip('/')}/{i}", plan)
        attrs["h5gds_values"] = json.dumps(plain)
        attrs["h5gds_length"] = len(state)
    elif _is_array(state) and where == "/":
        attrs["h5gds_container"] = "array"
    else:
        raise TypeError(f"cannot checkpoint a {type(state).__name__} at {where}")
    return plan


def _plain_value(kind: str, value: Any) -> Any:
    return tuple(value) if kind == "tuple" else value


def _new_array(kind: str, dtype_name: str, shape: tuple[int, ...], device: Any) -> tuple[Any, Any]:
    """(array, raw view target) for a dataset read back."""
    if kind == "torch":
        import torch
        dt = getattr(torch, dtype_name)
        dev = device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu")
        t = torch.empty(shape, dtype=dt, device=dev)
        return t, (t.view(torch.int16) if dt == torch.bfloat16 else t)
    if kind == "cupy":
        import cupy
        a = cupy.empty(shape, dtype=np.dtype(dtype_name))
        return a, a
    a = np.empty(shape, dtype=np.dtype(dtype_name))
    return a, a


def _missing_filters(dset: h5py.Dataset) -> list[int]:
    """The filters of a dataset's pipeline that HDF5 has not registered
    (none for contiguous datasets)."""
    with phil:
        dcpl = dset.id.get_create_plist()
        if dcpl.get_layout() != h5d.CHUNKED:
            return []
        ids = [int(dcpl.get_filter(i)[0]) for i in range(dcpl.get_nfilters())]
    return [i for i in ids if not h5z.filter_avail(i)]


def _read_into(dset: h5py.Dataset, target: Any) -> None:
    """The whole dataset into `target`, by the driver's checked read: a
    compressed dataset into device memory is decoded on the GPU where it
    can be (as h5gds.read), else by HDF5's filters."""
    v = _arrays.view(target, writable=True, name="checkpoint array")
    if v.nbytes == 0:
        return
    missing = _missing_filters(dset)
    if missing:
        try:  # registers hdf5plugin's filters with HDF5, for HDF5's own decode (host arrays, no nvCOMP)
            import hdf5plugin  # noqa: F401
        except ImportError:
            pass
    with phil:
        ftype = dset.id.get_type()
        dxpl = _dxpl(v)  # kept: the id closes with the object
        rc = native.H5Dread_gds(dset.id.id, ftype.id, _H5S_ALL, _H5S_ALL, dxpl.id, v.ptr)
        if rc < 0:
            text = hdf5_error_text()
            hint = ""
            if missing and _missing_filters(dset):
                hint = (f"; HDF5 filter(s) {_missing_filters(dset)} not registered: pip install hdf5plugin "
                        "(registered when imported)")
            raise OSError(f"reading {dset.name} failed ({text}){hint}")


def _load_node(f: h5py.File, where: str, device: Any, into: Any, arrays: dict[str, list[str]]) -> Any:
    node = f[where]
    if isinstance(node, h5py.Dataset):
        if where not in arrays:
            raise ValueError(f"{where}: not an array of an h5gds checkpoint")
        kind, dtype_name = arrays[where]
        shape = tuple(node.shape)
        if into is not None and _is_array(into):
            kind_into, dname_into, shape_into, _, _ = _array_info(into)
            if shape_into != shape or dname_into != dtype_name:
                raise ValueError(f"{where}: the checkpoint holds {dtype_name}{list(shape)}, the state "
                                 f"{dname_into}{list(shape_into)}")
            _read_into(node, _raw_view_writable(into))
            return into
        arr, target = _new_array(kind, dtype_name, shape, device)
        _read_into(node, target)
        return arr
    container = str(node.attrs.get("h5gds_container", "dict"))
    if container == "array":
        return _load_node(f, "/__root__", device, into, arrays)
    plain = json.loads(node.attrs.get("h5gds_values", "{}"))
    base = where.rstrip("/")
    if container == "dict":
        int_keys = set(json.loads(node.attrs.get("h5gds_int_keys", "[]")))
        order = json.loads(node.attrs.get("h5gds_order", "null")) or list(node.keys()) + list(plain)
        out = into if isinstance(into, dict) else {}
        for name in order:
            key: Any = int(_unescape(name)) if name in int_keys else _unescape(name)
            if name in plain:
                out[key] = _plain_value(*plain[name])
            else:
                out[key] = _load_node(f, f"{base}/{name}", device, into.get(key) if isinstance(into, dict) else None,
                                      arrays)
        return out
    items = []
    for i in range(int(node.attrs["h5gds_length"])):
        if str(i) in plain:
            items.append(_plain_value(*plain[str(i)]))
        else:
            sub = into[i] if isinstance(into, (list, tuple)) and i < len(into) else None
            items.append(_load_node(f, f"{base}/{i}", device, sub, arrays))
    if container == "tuple":
        return tuple(items)
    if isinstance(into, list):
        into[:] = items
        return into
    return items


def _raw_view_writable(obj: Any) -> Any:
    if type(obj).__module__.split(".")[0] == "torch":
        import torch
        if obj.dtype == torch.bfloat16:
            return obj.view(torch.int16)
    return obj


def load(path: str | os.PathLike[str], *, device: Any = None, into: Any = None, **options: Any) -> Any:
    """Reads a checkpoint written by :func:`save`: the same structure, torch
    tensors on ``device`` (default: the GPU when there is one), CuPy arrays
    on the current device, numpy arrays on the host. With ``into``, arrays
    are read in place into the existing state (shapes and dtypes must
    match) and ``into`` is returned."""
    with h5py.File(os.fspath(path), "r", driver="gds", **options) as f:
        if "h5gds_arrays" not in f.attrs:
            raise ValueError(f"{os.fspath(path)!r} is not an h5gds checkpoint (no h5gds_arrays attribute)")
        return _load_node(f, "/", device, into, json.loads(f.attrs["h5gds_arrays"]))
