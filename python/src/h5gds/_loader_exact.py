"""The exact order's batches: per batch, ONE engine request per file, one
segment per sample (per piece of a sample for chunked data, per sample's
values for Ragged columns), sorted by file offset, each pointing straight at
the sample's place in the batch buffer, so the batch comes out in shuffled
order with no scatter step. ``prefetch`` batches are in flight while the
caller consumes the current one. Device batches are read into pinned host
slots and copied to the GPU with one copy per batch on the loader's copy
stream, started as soon as a batch's reads are found done (so it overlaps
the caller's step on the batch before), or read by the engine straight into
device memory (``staging="device"``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generator

import numpy as np

from . import _arrays
from . import _loader_io as io
from ._loader_copy import Slot, stream_wait


def _align(n: int) -> int:
    return -(-int(n) // 4096) * 4096


@dataclass
class _Batch:
    rows: np.ndarray
    tickets: list[tuple[int, str]]
    outputs: list[Any]          # the parts: host views (pinned) or the final arrays
    slot: Slot | None
    # Copied ahead (see Loader._copy_ahead): the device arrays, the event
    # after their copy on the loader's copy stream, the stream they were
    # allocated for, and a read failure kept for the batch's turn.
    device: list[Any] | None = None
    copied: Any = None
    stream: Any = None
    error: OSError | None = None


class ExactBatches:
    """The exact order's batch pipeline, a part of Loader (it uses the
    loader's columns, files, copier and output arrays)."""

    columns: list[Any]
    module: str
    staging: str
    prefetch: int
    batch_size: int
    _files: dict[str, io.EngineFile]
    _copier: Any
    _gatherer: Any
    _tuple: bool                     # batches are tuples (several columns)

    def _host_array(self, column: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        raise NotImplementedError  # Loader's

    def _slot_bytes(self, order: np.ndarray, starts: list[int]) -> int:
        """The largest batch's bytes in a pinned slot (every part aligned)."""
        total = np.zeros(len(starts), np.int64)
        idx = np.asarray(starts, np.int64)
        counts = np.diff(np.concatenate([idx, [len(order)]]))
        for c in self.columns:
            if c.ragged:
                nb = c.row_nbytes(order)
                per = np.add.reduceat(nb, idx) if len(order) else np.zeros(len(starts), np.int64)
                total += (per + 4095) // 4096 * 4096 + ((counts + 1) * 8 + 4095) // 4096 * 4096
            else:
                total += (counts * c.row_bytes + 4095) // 4096 * 4096
        return int(total.max()) if len(total) else 0

    def _submit(self, rows: np.ndarray, slot: Slot | None) -> _Batch:
        tickets: list[tuple[int, str]] = []
        outputs: list[Any] = []
        offset = 0
        if slot is not None:
            slot.wait_copied()
        try:
            for ci, col in enumerate(self.columns):
                nb = col.row_nbytes(rows)
                dst = np.cumsum(nb) - nb
                nbytes = int(nb.sum())
                shape = (nbytes // col.itemsize,) if col.ragged else (len(rows),) + col.row_shape
                keep: Any  # what the batch holds: its output array, or its part of a pinned slot
                if self.module == "numpy":
                    out = self._host_array(ci, shape, col.dtype)
                    base, keep = int(out.ctypes.data), out
                elif self.staging == "device":
                    out = _arrays.empty(shape, col.dtype, self.module)  # type: ignore[arg-type]
                    base = _arrays.view(out, writable=True).ptr if nbytes else 0
                    keep = out
                else:
                    assert slot is not None
                    keep = (slot, offset, nbytes, col.dtype, shape)
                    base = slot.addr + offset
                    offset += _align(nbytes)
                outputs.append(keep)
                if col.ragged:
                    offs = np.concatenate([[0], np.cumsum(nb // col.itemsize)]).astype(np.int64)
                    if self.module == "numpy" or self.staging == "device":
                        outputs.append(self._gatherer.host_to_module(offs))
                    else:
                        assert slot is not None
                        slot.host[offset:offset + offs.nbytes] = offs.view(np.uint8)
                        outputs.append((slot, offset, offs.nbytes, np.dtype(np.int64), offs.shape))
                        offset += _align(offs.nbytes)
                if nbytes == 0:
                    continue
                if len(col.paths) == 1:  # one file: no partition by file
                    parts = [(0, rows, dst)]
                else:
                    fidx = np.searchsorted(col.starts, rows, side="right") - 1
                    parts = [(fi, rows[fidx == fi] - col.starts[fi], dst[fidx == fi]) for fi in np.unique(fidx)]
                for fi, local, d in parts:
                    off, size, mem = col.segments(int(fi), local, d)
                    if not len(off):
                        continue
                    mem += np.uint64(base)
                    path = col.paths[int(fi)]
                    tickets.append((self._files[path].submit(off, size, mem, base), path))
        except BaseException:
            for t, p in tickets:  # buffers must outlive every request that uses them
                try:
                    io.wait(t, p)
                except OSError:
                    pass
            raise
        return _Batch(rows, tickets, outputs, slot)

    def _collect(self, batch: _Batch) -> None:
        """Waits for the batch's reads; the first failure is raised."""
        io.wait_all(batch.tickets)

    def _assemble(self, parts: list[Any]) -> Any:
        """The batch the caller gets from its parts: per column an array,
        or (values, offsets) for a Ragged column."""
        outs: list[Any] = []
        i = 0
        for c in self.columns:
            if c.ragged:
                outs.append((parts[i], parts[i + 1]))
                i += 2
            else:
                outs.append(parts[i])
                i += 1
        return tuple(outs) if self._tuple else outs[0]

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
                outs = [self._copier.to_device(*h) for h in batch.outputs]
                assert batch.slot is not None
                batch.slot.copied = self._copier.record(self._copier.current_stream())
        return self._assemble(outs)

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
            if not all(io.done(t) for t, _ in batch.tickets):
                return
            try:
                self._collect(batch)
            except OSError as exc:
                batch.error = exc  # raised at the batch's turn, not before the batches ahead of it
                return
            current = self._copier.current_stream()
            copy_stream = self._copier.copy_stream()
            try:
                stream_wait(copy_stream, self._copier.record(current))
                batch.device = [self._copier.to_device(*h, stream=copy_stream) for h in batch.outputs]
                batch.copied = self._copier.record(copy_stream)
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
        current = self._copier.current_stream()
        if current == batch.stream:
            stream_wait(current, batch.copied)
        elif self.module == "torch":
            # allocated for another stream: the allocator must not reuse
            # the memory before this stream's work with it is done
            stream_wait(current, batch.copied)
            for t in batch.device or []:
                t.record_stream(current)
        else:
            # CuPy has no record_stream, and its memory pool would hand the
            # arrays' blocks to the copy's stream again while this one still
            # reads them: copied again, from the slot (still holding the
            # batch), into arrays of the current stream.
            batch.copied.synchronize()
            batch.device = [self._copier.to_device(*h) for h in batch.outputs]
            assert batch.slot is not None
            batch.slot.copied = self._copier.record(current)

    def _iter_exact(self, order: np.ndarray) -> Generator[Any, None, None]:
        starts = list(range(0, len(order), self.batch_size))
        slots: list[Slot] = []
        if self.module != "numpy" and self.staging == "pinned" and starts:
            nbytes = self._slot_bytes(order, starts)
            # one slot more than batches in flight: the slot of the batch just
            # yielded is still being copied to the device while the next read
            # starts in another
            slots = [Slot(nbytes, self.module) for _ in range(min(self.prefetch + 1, max(1, len(starts))))]
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
