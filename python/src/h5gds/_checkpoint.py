"""Saving checkpoints (``save``, ``CheckpointHandle``, the native write of
the leaves, the background finish: fsync, rename): a nested state (dicts,
lists, tuples of torch tensors, CuPy and numpy arrays, and plain Python
values) saved as one plain HDF5 file.

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

Compressed leaves (``compression=``, opt-in): _checkpoint_compress.py.
Loading: _checkpoint_load.py; snapshot memory kept between saves:
_checkpoint_memory.py; made ready ahead (``prepare_checkpoint``):
_checkpoint_prepare.py, which builds on this module.
"""
from __future__ import annotations

import ctypes
import itertools
import json
import os
import threading
import time
import traceback
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5p
from h5py._objects import phil

from ._checkpoint_compress import (_COMPRESS_MIN_BYTES, _chunk_shape, _Compression, _CompressedLeaf,
                                   _compression_of, _snapshot_copy, _write_compressed, _write_copies)
from ._checkpoint_leaves import _array_info, _escape, _is_array, _leaves, _plain, _plain_entry, _raw_view
from ._checkpoint_memory import _snapshot_budget, _wait_for_warmups
from ._io import _dxpl, gds_dcpl
from ._lib import errbuf, hdf5_error_text, native

__all__ = ["CheckpointHandle", "save"]


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
        self._before: CheckpointHandle | None = None  # the same path's save before it, until renamed
        self._key: str | None = None  # the path, absolute, as the saves in flight are kept

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
        _wait_for_before(handle)  # the same path's earlier save renames first
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
            try:
                threading.Thread(target=os.close, args=(previous,), name="h5gds-checkpoint-free").start()
            except RuntimeError:  # no thread to be had (memory, ulimit -u): closed here, slower
                os.close(previous)
        # a save that failed before its rename is done only after the one
        # before it: the next save, which waits for this one, then renames
        # after that one too (the order of the calls holds across failures)
        _wait_for_before(handle)
        _forget_save(handle)
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
    _check_snapshot_args(memory, budget)  # before any file
    compress = _compression_of(compression, compression_opts, shuffle, compress_min_bytes)
    waited = _wait_for_warmups()  # prepare_checkpoint(path=...) in progress: its engine and memory
    return _save_now(state, os.fspath(path), async_=async_, memory=memory, budget=budget, options=options, t0=t0,
                     waited=waited, compress=compress)


def _check_snapshot_args(memory: Any, budget: Any) -> None:
    if memory not in ("auto", "device", "host"):
        raise ValueError(f"memory={memory!r}: expected 'auto', 'device' or 'host'")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget <= 0):
        raise ValueError(f"budget={budget!r}: expected a number of bytes (an int > 0) or None")


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
    tmp = f"{path}.h5gds-tmp-{os.getpid()}-{next(_tmp_serial)}"
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
    _follow_last_save(path, handle)
    handle.stall_s = time.perf_counter() - t0
    if async_:
        handle._thread = threading.Thread(target=_finish, args=(handle, f, tmp, path, t0, meta), daemon=False,
                                          name="h5gds-checkpoint")
        try:
            handle._thread.start()
        except BaseException as exc:  # no thread: nothing may stay open (snapshot memory, datasets, the file)
            _discard(f, tmp)
            handle._error = exc
            _wait_for_before(handle)  # so that a later save that waits for this one also waits for that one
            _forget_save(handle)
            handle._done.set()
            raise
    else:
        _finish(handle, f, tmp, path, t0, meta)
        handle.wait()
        handle.stall_s = handle.durable_s or 0.0  # the caller waited until durable
    return handle


_SYNC_BUDGET = 1 << 30

# Temporary files are named per save, not per thread: two saves of one path
# may be in flight at once. Their renames go in the order of the calls: a
# save waits, before its rename, for the one of the same path before it, so
# the last call's checkpoint is the one left at the path.
_tmp_serial = itertools.count()
_last_save_lock = threading.Lock()
_last_save: dict[str, CheckpointHandle] = {}


def _follow_last_save(path: str, handle: CheckpointHandle) -> None:
    """Records the save of `path` still in flight before this one, if any;
    this one becomes the path's last."""
    handle._key = os.path.abspath(path)
    with _last_save_lock:
        before = _last_save.get(handle._key)
        _last_save[handle._key] = handle
    handle._before = before if before is not None and not before.done() else None


def _wait_for_before(handle: CheckpointHandle) -> None:
    before, handle._before = handle._before, None
    if before is not None:
        before._done.wait()


def _forget_save(handle: CheckpointHandle) -> None:
    with _last_save_lock:
        if handle._key is not None and _last_save.get(handle._key) is handle:
            del _last_save[handle._key]


def _forget_all_saves() -> None:
    """A child of fork() has none of the parent's background saves, and a
    lock of its own (the parent's may have been held by another thread)."""
    global _last_save_lock
    _last_save_lock = threading.Lock()
    _last_save.clear()


os.register_at_fork(after_in_child=_forget_all_saves)


def _discard(f: h5py.File, tmp: str) -> None:
    """A save that failed before its background part: the file closed (its
    snapshot memory and open datasets with it), the temporary removed."""
    try:
        f.close()
    except Exception:
        pass  # the close of a failed file may fail too: the failure raised is the one that came first
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
                plain[name] = _plain_entry(v)
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
                plain[str(i)] = _plain_entry(v)
            else:
                _structure(v, f"{where.rstrip('/')}/{i}", plan)
        attrs["h5gds_values"] = json.dumps(plain)
        attrs["h5gds_length"] = len(state)
    elif _is_array(state) and where == "/":
        attrs["h5gds_container"] = "array"
    else:
        raise TypeError(f"cannot checkpoint a {type(state).__name__} at {where}")
    return plan
