"""A GPU sample loader over HDF5 datasets, without HDF5 per sample.

At construction the loader asks HDF5 once where each dataset's bytes are
(the contiguous storage offset, or the address of every chunk), and opens
each file with the driver's I/O engine. A batch is then, per file and
dataset, ONE engine request: one segment per sample (per piece of a sample
for chunked data), sorted by file offset, each pointing straight at the
sample's slot in the batch buffer, so the batch comes out in shuffled order
with no scatter step. Requests are asynchronous: ``prefetch`` batches are in
flight while the caller consumes the current one. Device batches are read
into pinned host slots and copied to the GPU with one copy per batch on a
copy stream of the loader's, overlapping the caller's compute
(``staging="pinned"``, the default: small samples cost one pread each and no
per-sample copy), or read by the engine straight into device memory
(``staging="device"``: its staged pipeline or cuFile).
"""
from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import h5py
import numpy as np
from h5py import h5d
from h5py._objects import phil

from . import _arrays
from ._lib import errbuf, native

__all__ = ["Loader", "TorchLoader"]


def _free_refs() -> int:
    # What sys.getrefcount says of an array only a list refers to, measured
    # the way Loader._host_array asks (the count's own reference varies
    # between Python versions).
    probe = [np.empty(0)]
    return sys.getrefcount(probe[0])


_FREE_REFS = _free_refs()


@dataclass
class _FileLayout:
    """Where the rows of one dataset lie in one file."""
    path: str
    rows: int
    contiguous_base: int | None = None          # contiguous: file offset of row 0
    # chunked: chunk address per (chunk row, tile), and a template of runs
    # per sample: (tile, byte offset inside the chunk for local row 0,
    # byte offset inside the sample, length)
    c0: int = 1
    chunk_row_bytes: int = 0
    addr: np.ndarray | None = None
    tmpl_tile: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tmpl_file: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tmpl_mem: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tmpl_len: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def _filter_names(dcpl: Any) -> list[str]:
    names = []
    for i in range(dcpl.get_nfilters()):
        code, _flags, _vals, name = dcpl.get_filter(i)
        names.append(f"{name.decode(errors='replace') or 'filter'} (id {code})")
    return names


def _layout(dset: h5py.Dataset) -> _FileLayout:
    """Asks HDF5 once where the dataset's rows are."""
    name = f"{dset.file.filename}:{dset.name}"
    if dset.dtype.kind not in "biufc" or dset.dtype.fields is not None:
        raise TypeError(f"{name}: dtype {dset.dtype} is not a numeric type the loader can return")
    if not dset.dtype.isnative:
        raise TypeError(f"{name}: dtype {dset.dtype} is not in native byte order")
    if len(dset.shape) < 1:
        raise ValueError(f"{name}: a scalar dataset has no samples")
    with phil:
        dcpl = dset.id.get_create_plist()
        filters = _filter_names(dcpl)
        if filters:
            raise ValueError(f"{name} is filtered with {', '.join(filters)}: the loader reads raw bytes from the "
                             "file, so compressed or otherwise filtered datasets are not supported")
        layout = dcpl.get_layout()
        if dcpl.get_external_count():
            raise ValueError(f"{name} uses external storage, which the loader does not read")
        if dset.file.mode == "r+":
            dset.file.flush()  # the loader reads the file itself: data written through h5py must be there
        shape = tuple(int(n) for n in dset.shape)
        itemsize = dset.dtype.itemsize
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * itemsize
        out = _FileLayout(path=os.fspath(dset.file.filename), rows=shape[0])
        if shape[0] == 0 or row_bytes == 0:
            out.contiguous_base = 0
            return out
        if layout == h5d.CONTIGUOUS:
            base = dset.id.get_offset()
            if base is None:
                raise ValueError(f"{name}: storage is not allocated (nothing was written)")
            out.contiguous_base = int(base)
            return out
        if layout != h5d.CHUNKED:
            raise ValueError(f"{name}: only contiguous and chunked datasets can be loaded (compact or virtual "
                             "datasets cannot)")
        chunk = tuple(int(c) for c in dcpl.get_chunk())
        infos: list[Any] = []
        try:
            dset.id.chunk_iter(infos.append)
        except Exception:  # chunk_iter needs HDF5 >= 1.12.3; fall back to one call per chunk
            infos = [dset.id.get_chunk_info(i) for i in range(dset.id.get_num_chunks())]
    grid = [-(-n // c) for n, c in zip(shape, chunk)]
    ntiles = int(np.prod(grid[1:], dtype=np.int64))
    addr = np.full((grid[0], ntiles), -1, np.int64)
    for info in infos:
        idx = [o // c for o, c in zip(info.chunk_offset, chunk)]
        tile = int(np.ravel_multi_index(idx[1:], grid[1:])) if len(idx) > 1 else 0
        addr[idx[0], tile] = int(info.byte_offset)
    if (addr < 0).any():
        missing = int((addr < 0).sum())
        raise ValueError(f"{name}: {missing} chunk(s) are not allocated (never written); write the whole dataset "
                         "or create it with h5gds.create_dataset (early allocation)")
    # The runs of one sample, as a template independent of the row: for each
    # tile of the inner dimensions, contiguous pieces along the last one.
    inner, cinner = shape[1:], chunk[1:]
    cstride = [int(np.prod(cinner[j + 1:], dtype=np.int64)) for j in range(len(cinner))]
    rstride = [int(np.prod(inner[j + 1:], dtype=np.int64)) for j in range(len(inner))]
    t_tile, t_file, t_mem, t_len = [], [], [], []
    for tile in range(ntiles):
        tidx = np.unravel_index(tile, grid[1:]) if inner else ()
        origin = [int(t) * c for t, c in zip(tidx, cinner)]
        extent = [min(c, n - o) for c, n, o in zip(cinner, inner, origin)]
        if not inner:
            t_tile.append(0); t_file.append(0); t_mem.append(0); t_len.append(itemsize)
            continue
        for pos in np.ndindex(*extent[:-1]) if len(extent) > 1 else [()]:
            fi = sum(p * s for p, s in zip(pos, cstride[:-1]))
            mi = sum((o + p) * s for o, p, s in zip(origin[:-1], pos, rstride[:-1])) + origin[-1]
            length = extent[-1] * itemsize
            # Merge with the previous run when both file and sample continue it.
            if t_tile and t_tile[-1] == tile and t_file[-1] + t_len[-1] == fi * itemsize \
                    and t_mem[-1] + t_len[-1] == mi * itemsize:
                t_len[-1] += length
            else:
                t_tile.append(tile); t_file.append(fi * itemsize); t_mem.append(mi * itemsize); t_len.append(length)
    out.c0 = chunk[0]
    out.chunk_row_bytes = int(np.prod(cinner, dtype=np.int64)) * itemsize
    out.addr = addr
    out.tmpl_tile, out.tmpl_file = np.array(t_tile, np.int64), np.array(t_file, np.int64)
    out.tmpl_mem, out.tmpl_len = np.array(t_mem, np.int64), np.array(t_len, np.int64)
    return out


def _segments(lay: _FileLayout, rows: np.ndarray, slots: np.ndarray | None, row_bytes: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """File offsets, sizes and batch-buffer offsets of local `rows` going to
    batch `slots` (None: 0, 1, 2...), sorted by file offset (uint64)."""
    if slots is None:
        slots = np.arange(len(rows), dtype=np.int64)
    if lay.contiguous_base is not None:
        # Rows of a contiguous dataset: sorting the rows sorts the offsets.
        order = np.argsort(rows)
        off = rows[order].astype(np.uint64)
        off *= np.uint64(row_bytes)
        off += np.uint64(lay.contiguous_base)
        mem = slots[order].astype(np.uint64)
        mem *= np.uint64(row_bytes)
        return off, np.full(len(rows), row_bytes, np.uint64), mem
    else:
        assert lay.addr is not None
        base = lay.addr[rows // lay.c0][:, lay.tmpl_tile]                     # (m, T)
        off = (base + ((rows % lay.c0) * lay.chunk_row_bytes)[:, None] + lay.tmpl_file[None, :]).ravel()
        mem = (slots.astype(np.int64)[:, None] * row_bytes + lay.tmpl_mem[None, :]).ravel()
        size = np.broadcast_to(lay.tmpl_len[None, :], base.shape).ravel()
    order = np.argsort(off, kind="stable")
    return (np.ascontiguousarray(off[order], np.uint64), np.ascontiguousarray(size[order], np.uint64),
            np.ascontiguousarray(mem[order], np.uint64))


def _loader_config(config: str) -> str:
    """The engine settings of the loader's files: the caller's, with
    `threads` one less than the cores (at least 4, at most 16) unless the
    caller or H5GDS_CONFIG sets it. Warm batches are copies out of the page
    cache that keep every worker busy; a worker per core would take the
    core of the thread that runs the training loop (and submits the next
    batch) at every batch."""
    def sets_threads(text: str) -> bool:
        return any(kv.split("=", 1)[0].strip() == "threads" for kv in text.split(",") if "=" in kv)
    if sets_threads(config) or sets_threads(os.environ.get("H5GDS_CONFIG", "")):
        return config
    threads = max(4, min(16, (os.cpu_count() or 1) - 1))
    return f"threads={threads}" + ("," + config if config else "")


class _Column:
    """One logical dataset: the same row shape and dtype in one or more files."""

    def __init__(self, dsets: Sequence[h5py.Dataset]):
        first = dsets[0]
        self.row_shape = tuple(int(n) for n in first.shape[1:])
        self.dtype = first.dtype
        for d in dsets[1:]:
            if tuple(d.shape[1:]) != self.row_shape or d.dtype != self.dtype:
                raise ValueError(f"{d.file.filename}:{d.name} has rows {tuple(d.shape[1:])} {d.dtype}, the first "
                                 f"file {self.row_shape} {self.dtype}: the files must hold one logical dataset")
        self.row_bytes = int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize
        self.layouts = [d.layout if isinstance(d, _LazyDataset) else _layout(d) for d in dsets]
        self.starts = np.cumsum([0] + [lay.rows for lay in self.layouts], dtype=np.int64)
        self.rows = int(self.starts[-1])


class _EngineFile:
    def __init__(self, path: str, config: str):
        handle = ctypes.c_void_p()
        err = errbuf()
        rc = native.h5gds_py_file_open(path.encode(), config.encode(), 0, ctypes.byref(handle), err, len(err))
        if rc != 0:
            raise OSError(-rc, f"cannot open {path} for the loader: {err.value.decode(errors='replace')}", path)
        self.handle: int | None = handle.value
        self.path = path

    def submit(self, off: np.ndarray, size: np.ndarray, addr: np.ndarray, base: int) -> int:
        ticket = ctypes.c_void_p()
        err = errbuf()
        u64 = ctypes.POINTER(ctypes.c_uint64)
        rc = native.h5gds_py_file_submit(self.handle, 0, len(off), off.ctypes.data_as(u64), size.ctypes.data_as(u64),
                                         addr.ctypes.data_as(u64), base, ctypes.byref(ticket), err, len(err))
        if rc != 0:
            raise OSError(-rc, f"batch read failed: {err.value.decode(errors='replace')}", self.path)
        return int(ticket.value or 0)

    def close(self) -> None:
        if self.handle:
            native.h5gds_py_file_close(self.handle)
            self.handle = None


def _wait(ticket: int, path: str) -> None:
    err = errbuf()
    rc = native.h5gds_py_io_wait(ticket, err, len(err))
    if rc != 0:
        raise OSError(-rc, f"batch read failed: {err.value.decode(errors='replace')}", path)


class _Slot:
    """Host memory for one batch in flight (pinned when a GPU is used), and
    the event after the last copy out of it: the slot is read into again
    only once that copy is done, so no batch waits for its own copy."""

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


@dataclass
class _Batch:
    rows: np.ndarray
    tickets: list[tuple[int, str]]
    outputs: list[Any]          # per column: host views (pinned) or the final arrays
    slot: _Slot | None
    # Copied ahead (see Loader._copy_ahead): the device arrays, the event
    # after their copy on the loader's copy stream, the stream they were
    # allocated for, and a read failure kept for the batch's turn.
    device: list[Any] | None = None
    copied: Any = None
    stream: Any = None
    error: OSError | None = None


class Loader:
    """Batches of samples (rows along the first axis) from HDF5 datasets,
    read onto the GPU (or into host arrays).

    ``source``: an ``h5py.Dataset``; a tuple or list of datasets of equal
    length (each batch is then a tuple, e.g. data, labels); or a list of file
    paths holding the same ``dataset`` path (one logical dataset across
    files; a list of paths in ``dataset`` gives several columns).

    Semantics follow ``torch.utils.data.DistributedSampler``: each epoch is a
    permutation drawn from ``(seed, epoch)`` (``set_epoch``), the same on
    every rank; rank r takes every ``world_size``-th sample from r, so each
    sample is read exactly once per epoch across ranks (no padding: ranks may
    differ by one sample). ``drop_last`` drops each rank's last partial batch.

    ``like``: "cupy", "torch" or "numpy" (default: as :func:`h5gds.read`).
    ``staging``: "pinned" (engine reads into pinned slots, one host-to-device
    copy per batch on the loader's own copy stream, started as soon as the
    batch's reads are done; the current stream waits for it: work queued on
    that stream afterwards sees the batch; another stream must wait for it,
    as with DataLoader's ``.cuda(non_blocking=True)``) or "device" (the
    engine writes device memory itself; the batch is complete when yielded).
    ``config``: driver configuration keys for the engine ("threads=16,...").
    """

    def __init__(self, source: Any, batch_size: int, shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 prefetch: int = 2, rank: int = 0, world_size: int = 1, *, dataset: str | Sequence[str] | None = None,
                 like: Any = None, staging: str = "pinned", config: str = ""):
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in range for world_size {world_size}")
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, not {prefetch}")
        if staging not in ("pinned", "device"):
            raise ValueError(f"staging must be 'pinned' or 'device', not {staging!r}")
        self.batch_size, self.shuffle, self.seed = int(batch_size), bool(shuffle), int(seed)
        self.drop_last, self.prefetch = bool(drop_last), int(prefetch)
        self.rank, self.world_size = int(rank), int(world_size)
        self.module: str = _arrays.resolve_module(like)
        self.staging = staging
        self.epoch = 0
        self._files: dict[str, _EngineFile] = {}
        self._order_cache: tuple[tuple[int, ...], np.ndarray] | None = None
        self._copy_streams: dict[int, Any] = {}
        self._recycle: dict[int, list[np.ndarray]] = {}
        self._closed = False
        self._tuple, columns = self._columns(source, dataset)
        lengths = {c.rows for c in columns}
        if len(lengths) != 1:
            raise ValueError(f"the datasets have different lengths {sorted(lengths)}: they must have one per sample")
        self.columns = columns
        self.num_samples = columns[0].rows
        if staging == "pinned" or self.module == "numpy":  # host requests (device ones keep autotuning)
            config = _loader_config(config)
        self._config = config
        for c in columns:
            for lay in c.layouts:
                if lay.path not in self._files:
                    self._files[lay.path] = _EngineFile(lay.path, config)

    @staticmethod
    def _columns(source: Any, dataset: str | Sequence[str] | None) -> tuple[bool, list[_Column]]:
        if isinstance(source, h5py.Dataset):
            return False, [_Column([source])]
        if isinstance(source, (tuple, list)) and source and all(isinstance(s, h5py.Dataset) for s in source):
            return True, [_Column([s]) for s in source]
        if isinstance(source, (str, os.PathLike)):
            source = [source]
        if isinstance(source, (tuple, list)) and source and all(isinstance(s, (str, os.PathLike)) for s in source):
            if dataset is None:
                raise TypeError("a list of files needs dataset='path/in/file' (or a list of paths)")
            names = [dataset] if isinstance(dataset, str) else list(dataset)
            cols: list[list[h5py.Dataset]] = [[] for _ in names]
            for path in source:
                # Each file is opened read-only just long enough to read its layout.
                with h5py.File(path, "r") as f:
                    for j, n in enumerate(names):
                        if n not in f or not isinstance(f[n], h5py.Dataset):
                            raise KeyError(f"{os.fspath(path)} has no dataset {n!r}")
                        cols[j].append(_LazyDataset(f[n]))  # type: ignore[arg-type]
            return not isinstance(dataset, str), [_Column(c) for c in cols]
        raise TypeError("source must be an h5py.Dataset, a tuple/list of datasets, or a list of file paths "
                        "with dataset=")

    # ---- sampler ----------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Selects the permutation of the next iteration (as
        DistributedSampler.set_epoch): same seed and epoch, same order."""
        self.epoch = int(epoch)

    def indices(self) -> np.ndarray:
        """The global sample indices this rank reads this epoch, in order."""
        return self._order().copy()

    def _order(self) -> np.ndarray:
        # Drawn once per epoch (read-only): a permutation of millions of
        # samples takes milliseconds, which an iteration restarted in the
        # same epoch should not pay again.
        key = (self.seed, self.epoch, int(self.shuffle), self.rank, self.world_size, int(self.drop_last),
               self.batch_size, self.num_samples)
        if self._order_cache is not None and self._order_cache[0] == key:
            return self._order_cache[1]
        n = self.num_samples
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(n)
        else:
            order = np.arange(n, dtype=np.int64)
        mine = order[self.rank::self.world_size]
        if self.drop_last:
            mine = mine[: len(mine) // self.batch_size * self.batch_size]
        mine = np.ascontiguousarray(mine, dtype=np.int64)
        mine.flags.writeable = False
        self._order_cache = (key, mine)
        return mine

    def __len__(self) -> int:
        m = max(0, -(-(self.num_samples - self.rank) // self.world_size))
        return m // self.batch_size if self.drop_last else -(-m // self.batch_size)

    # ---- batches ------------------------------------------------------------

    def _submit(self, rows: np.ndarray, slot: _Slot | None) -> _Batch:
        tickets: list[tuple[int, str]] = []
        outputs: list[Any] = []
        offset = 0
        if slot is not None:
            slot.wait_copied()
        try:
            for ci, col in enumerate(self.columns):
                shape = (len(rows),) + col.row_shape
                if self.module == "numpy":
                    out = self._host_array(ci, shape, col.dtype)
                    base, keep = int(out.ctypes.data), out
                elif self.staging == "device":
                    out = _arrays.empty(shape, col.dtype, self.module)  # type: ignore[arg-type]
                    base = _arrays.view(out, writable=True).ptr
                    keep = out
                else:
                    assert slot is not None
                    nbytes = len(rows) * col.row_bytes
                    keep = (slot, offset, nbytes, col.dtype, shape)
                    base = slot.addr + offset
                    offset += -(-nbytes // 4096) * 4096
                outputs.append(keep)
                if len(col.layouts) == 1:  # one file: no partition by file
                    lay = col.layouts[0]
                    off, size, mem = _segments(lay, rows, None, col.row_bytes)
                    mem += np.uint64(base)
                    tickets.append((self._files[lay.path].submit(off, size, mem, base), lay.path))
                    continue
                fidx = np.searchsorted(col.starts, rows, side="right") - 1
                slots = np.arange(len(rows), dtype=np.int64)
                for fi in np.unique(fidx):
                    lay = col.layouts[fi]
                    sel = fidx == fi
                    off, size, mem = _segments(lay, rows[sel] - col.starts[fi], slots[sel], col.row_bytes)
                    mem += np.uint64(base)
                    tickets.append((self._files[lay.path].submit(off, size, mem, base), lay.path))
        except BaseException:
            for t, p in tickets:  # buffers must outlive every request that uses them
                try:
                    _wait(t, p)
                except OSError:
                    pass
            raise
        return _Batch(rows, tickets, outputs, slot)

    def _host_array(self, column: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An output array for host batches: one the caller has let go of
        (nothing but this list refers to it, so nobody can see it change),
        else a new one. Reusing them saves a 16 MiB allocation per batch and
        the page faults of filling it (the workers' copies into fresh memory
        cost as much as the copies themselves)."""
        pool = self._recycle.setdefault(column, [])
        for i in range(len(pool)):
            if sys.getrefcount(pool[i]) <= _FREE_REFS and pool[i].shape == shape:
                out = pool.pop(i)
                pool.append(out)
                return out
        out = np.empty(shape, dtype)
        pool.append(out)
        if len(pool) > self.prefetch + 2:
            del pool[0]
        return out

    def _collect(self, batch: _Batch) -> None:
        """Waits for the batch's reads; the first failure is raised."""
        first_error: OSError | None = None
        while batch.tickets:
            t, p = batch.tickets.pop(0)  # off the list first: a ticket is freed by its wait, and never waited twice
            try:
                _wait(t, p)
            except OSError as exc:
                first_error = first_error or exc
        if first_error:
            raise first_error

    def _finish(self, batch: _Batch) -> Any:
        if batch.error is not None:
            raise batch.error
        if batch.device is not None:  # copied ahead: the caller's stream waits for that copy
            self._await_copy(batch)
            outs = batch.device
        else:
            self._collect(batch)
            if self.module == "numpy" or self.staging == "device":
                outs = batch.outputs
            else:
                outs = [self._to_device(*h) for h in batch.outputs]
                assert batch.slot is not None
                batch.slot.copied = self._record(self._current_stream())
        return tuple(outs) if self._tuple else outs[0]

    def _copy_ahead(self, pending: list[_Batch]) -> None:
        """Starts the device copies of the waiting batches whose reads are
        done, in order, on the loader's copy stream: they then run while the
        caller still computes on the batch just yielded, instead of in front
        of its next step on its stream. The device arrays are allocated for
        the caller's current stream, and the copy stream first waits for the
        work queued there so far (the memory may be a block that work just
        freed)."""
        if self.module == "numpy" or self.staging != "pinned":
            return
        for batch in pending:
            if batch.device is not None or batch.error is not None:
                continue
            if not all(native.h5gds_py_io_done(t) for t, _ in batch.tickets):
                return
            try:
                self._collect(batch)
            except OSError as exc:
                batch.error = exc  # raised at the batch's turn, not before the batches ahead of it
                return
            current = self._current_stream()
            copy_stream = self._copy_stream()
            try:
                _stream_wait(copy_stream, self._record(current))
                batch.device = [self._to_device(*h, stream=copy_stream) for h in batch.outputs]
                batch.copied = self._record(copy_stream)
            except BaseException as exc:
                # (out of device memory, an interrupt): no copy may still run
                # into memory dropped here; the batch is copied at its turn
                copy_stream.synchronize()
                batch.device = batch.copied = None
                if not isinstance(exc, Exception):
                    raise
                return
            batch.stream = current
            assert batch.slot is not None
            batch.slot.copied = batch.copied

    def _await_copy(self, batch: _Batch) -> None:
        current = self._current_stream()
        if current == batch.stream:
            _stream_wait(current, batch.copied)
        elif self.module == "torch":
            # allocated for another stream: the allocator must not reuse
            # the memory before this stream's work with it is done
            _stream_wait(current, batch.copied)
            for t in batch.device or []:
                t.record_stream(current)
        else:
            # CuPy has no record_stream, and its memory pool would hand the
            # arrays' blocks to the copy's stream again while this one still
            # reads them: copied again, from the slot (still holding the
            # batch), into arrays of the current stream.
            batch.copied.synchronize()
            batch.device = [self._to_device(*h) for h in batch.outputs]
            assert batch.slot is not None
            batch.slot.copied = self._record(current)

    def _current_stream(self) -> Any:
        if self.module == "cupy":
            import cupy
            return cupy.cuda.get_current_stream()
        import torch
        return torch.cuda.current_stream()

    def _copy_stream(self) -> Any:
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

    def _to_device(self, slot: _Slot, offset: int, nbytes: int, dtype: np.dtype, shape: tuple[int, ...],
                   stream: Any = None) -> Any:
        # One asynchronous copy per batch from the pinned slot, on the
        # current stream (or `stream`): work the caller queues on the
        # current stream afterwards runs after it (as with DataLoader's
        # pin_memory and .cuda(non_blocking=True)); the slot is reused only
        # after the event recorded behind it.
        if self.module == "cupy":
            import cupy
            dev = cupy.empty(shape, dtype)
            dev.set(slot.host[offset:offset + nbytes].view(dtype).reshape(shape),
                    stream=stream if stream is not None else cupy.cuda.get_current_stream())
            return dev
        import torch
        src = slot.torch_buf[offset:offset + nbytes].view(_torch_dtype(dtype)).reshape(shape)
        dev = torch.empty(shape, dtype=src.dtype, device="cuda")
        if stream is None:
            dev.copy_(src, non_blocking=True)
        else:
            with torch.cuda.stream(stream):
                dev.copy_(src, non_blocking=True)
        return dev

    def _record(self, stream: Any) -> Any:
        if self.module == "cupy":
            import cupy
            ev = cupy.cuda.Event(block=False, disable_timing=True)
            ev.record(stream)
            return ev
        import torch
        ev = torch.cuda.Event()
        ev.record(stream)
        return ev

    def __iter__(self) -> Iterator[Any]:
        if self._closed:
            raise ValueError("the loader is closed")
        order = self._order()
        starts = list(range(0, len(order), self.batch_size))
        slots: list[_Slot] = []
        if self.module != "numpy" and self.staging == "pinned":
            nbytes = sum(-(-self.batch_size * c.row_bytes // 4096) * 4096 for c in self.columns)
            # one slot more than batches in flight: the slot of the batch just
            # yielded is still being copied to the device while the next read
            # starts in another
            slots = [_Slot(nbytes, self.module) for _ in range(min(self.prefetch + 1, max(1, len(starts))))]
        pending: list[_Batch] = []
        free = list(slots)
        nxt = 0
        try:
            while nxt < len(starts) and len(pending) < self.prefetch:
                pending.append(self._submit(order[starts[nxt]:starts[nxt] + self.batch_size],
                                            free.pop(0) if free else None))
                nxt += 1
            while pending:
                batch = pending.pop(0)
                result = self._finish(batch)
                if batch.slot is not None:
                    free.append(batch.slot)  # last in line: its copy is still running
                if nxt < len(starts):
                    pending.append(self._submit(order[starts[nxt]:starts[nxt] + self.batch_size],
                                                free.pop(0) if free else None))
                    nxt += 1
                self._copy_ahead(pending)
                yield result
        finally:
            # Leaving early (break, exception, garbage collection): collect
            # every request still writing into our buffers, and every copy
            # still reading from them, before they go.
            for batch in pending:
                try:
                    self._collect(batch)
                except OSError:
                    pass
            for slot in slots:
                slot.wait_copied()

    def close(self) -> None:
        """Closes the loader's engine files (iterators must be finished)."""
        for f in self._files.values():
            f.close()
        self._closed = True

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def sampler(self) -> "Loader":
        """For training loops written for DataLoader + DistributedSampler:
        ``loader.sampler.set_epoch(e)``."""
        return self

    def stats(self) -> dict[str, dict[str, int]]:
        """Bytes read per route, per file (``host``, ``staged``, ``cufile``...)."""
        out: dict[str, dict[str, int]] = {}
        for path, f in self._files.items():
            arr = (ctypes.c_uint64 * 5)()
            native.h5gds_py_file_stats(f.handle, arr, 5)
            out[path] = {native.h5gds_py_route_name(i).decode(): int(arr[i]) for i in range(5) if arr[i]}
        return out


def _stream_wait(stream: Any, event: Any) -> None:
    """Work queued on `stream` from now on waits for `event` (CuPy or torch)."""
    stream.wait_event(event)


def _torch_dtype(dtype: np.dtype) -> Any:
    import torch
    return torch.from_numpy(np.empty(0, dtype)).dtype


class _LazyDataset:
    """Stand-in while building columns from paths: the dataset's file is
    closed right after its layout is read (see Loader._columns)."""

    def __init__(self, dset: h5py.Dataset):
        self.layout = _layout(dset)
        self.shape = tuple(dset.shape)
        self.dtype = dset.dtype
        self.file = type("F", (), {"filename": os.fspath(dset.file.filename)})()
        self.name = dset.name


class TorchLoader(Loader):
    """The loader yielding torch tensors on the GPU, for training loops
    written around ``torch.utils.data.DataLoader``: iterable, ``len()``,
    ``sampler.set_epoch(e)``; ``as_dataset()`` gives a
    ``torch.utils.data.IterableDataset`` for code that wants one (use it with
    ``DataLoader(ds, batch_size=None, num_workers=0)``: batches are already
    made and on the device)."""

    def __init__(self, source: Any, batch_size: int, shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 prefetch: int = 2, rank: int = 0, world_size: int = 1, **kwds: Any):
        kwds.setdefault("like", "torch")
        super().__init__(source, batch_size, shuffle, seed, drop_last, prefetch, rank, world_size, **kwds)

    def as_dataset(self) -> Any:
        import torch.utils.data

        loader = self

        class _Iterable(torch.utils.data.IterableDataset):  # type: ignore[misc,type-arg]
            def __iter__(self) -> Iterator[Any]:
                return iter(loader)

            def __len__(self) -> int:
                return len(loader)

        return _Iterable()
