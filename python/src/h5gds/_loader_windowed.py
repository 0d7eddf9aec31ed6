"""Epochs read in windows: the windowed order's groups (and the loader's
own cache) read by the engine as a few large requests per window, into
buffers from which batches are gathered.

Buffers: with ``cache="loader"`` one buffer holds every sample (row r of a
column at its place in the whole column), else ``nbuf`` rolling buffers
each hold one group of the windowed order (its rows in the group's buffer
order). Where a buffer lives: host memory for host batches, device memory
for device batches. Device batches with ``staging="pinned"`` read each
window into a pinned staging slot and copy it to the device buffer on the
loader's copy stream (one copy per window and column); with
``staging="device"`` the engine writes the device buffer itself.

Ordering: a rolling buffer is read into again only after the gathers out of
its previous group: the copy stream waits on the GPU for the event recorded
after the group's last gather (pinned staging: the host never waits for
the caller's GPU work), or the host waits for that event before the engine
writes the buffer (device staging). Batches are gathered on the caller's
current stream, after it waited for the copies of the groups they use."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Generator

import numpy as np

from . import _loader_io as io
from ._loader_copy import Copier, Slot, event_done, stream_wait
from ._loader_decode import CompressedLoad, PendingGroup
from ._loader_gather import Gatherer
from ._loader_layout import Column, FixedColumn, RaggedColumn, Segments, range_reads
from ._loader_order import WindowedPlan

_ALIGN = 4096


def _align(n: int) -> int:
    return -(-int(n) // _ALIGN) * _ALIGN


@dataclass
class _Load:
    """One window's rows [start, stop) (global) into a buffer."""
    group: int
    start: int
    stop: int
    dst: list[int]                       # per column: byte offset in the buffer
    nbytes: list[int]                    # per column
    tickets: list[tuple[int, str]] | None = None
    slot: Slot | None = None             # pinned staging
    slot_off: list[int] = field(default_factory=list)
    compressed: list[CompressedLoad] = field(default_factory=list)  # compressed columns' chunk reads


class Buffer:
    """A read buffer (one group's rows, or the cache)."""

    def __init__(self, mem: Any, addr: int):
        self.mem = mem
        self.addr = addr
        self.released = False           # its group's batches are all gathered
        self.release_event: Any = None  # recorded after those gathers (device batches)
        self.waited = True              # the copy stream waits for release_event (pinned staging)


@dataclass
class _GroupState:
    buffer: Buffer | None = None
    loads: list[_Load] = field(default_factory=list)
    issued: int = 0
    outstanding: int = 0
    copied: Any = None                  # event after the group's last copy (pinned staging)
    ready_waited: bool = False          # the current stream waits for `copied`
    ragged_start: list[np.ndarray | None] = field(default_factory=list)  # per column, rolling buffers
    to_decode: list[CompressedLoad] = field(default_factory=list)  # read, their decode part not yet begun
    decoded_rows: list[tuple[int, int]] = field(default_factory=list)  # their rows (the cache's, once decoded)
    read_since_decode: int = 0          # loads read since the last decode part began
    decoding: list[tuple[PendingGroup, list[tuple[int, int]]]] = field(default_factory=list)  # parts begun


class Cache:
    """The loader's own copy of every sample (``cache="loader"``): one
    buffer, which rows are in it, and each column's place in it."""

    def __init__(self, columns: list[Column], gatherer: Gatherer):
        self.base: list[int] = []
        total = 0
        for c in columns:
            self.base.append(total)
            total += _align(c.total_bytes)
        self.nbytes = total
        self.mem = gatherer.buffer(total)
        self.buffer = Buffer(self.mem, gatherer.address(self.mem))
        self.rows_read = np.zeros(columns[0].rows, np.bool_)

    def complete(self) -> bool:
        return bool(self.rows_read.all())


class WindowedReader:
    """Reads the groups of one epoch into buffers (rolling, or the cache)
    and gathers its batches. Reads are issued in order, at most
    `inflight` windows at a time; a group's batches wait for all of it."""

    def __init__(self, loader: Any, plan: WindowedPlan):
        self.ld = loader
        self.columns: list[Column] = loader.columns
        self.module: str = loader.module
        self.staged = self.module != "numpy" and loader.staging == "pinned"
        self.copier: Copier = loader._copier
        self.gatherer: Gatherer = loader._gatherer
        self.cache: Cache | None = loader._cache
        self.order, self.group_of, self.groups = plan.order, plan.group, plan.groups
        # where each position's row is in its buffer: the cache keeps rows at their global place
        self.local = plan.order if self.cache is not None else plan.local
        self.states = [_GroupState() for _ in self.groups]
        self.pending: deque[_Load] = deque()  # issued, not yet complete, oldest first
        self.next_group = 0                   # the next group to prepare (buffer, loads)
        self.decodes_ended_before = 0         # groups before this one have no decode still open
        self.cur_group = 0                    # the group whose loads are being issued
        self.released_upto = 0
        self.inflight: int = loader._inflight_loads
        self.free: list[Buffer] = []
        self.busy: deque[Buffer] = deque()    # buffers of prepared groups, oldest first
        self.capacity: list[int] = []
        self.region: list[int] = []
        self.last_copy: Any = None
        self.staging: list[Slot] = loader._staging_slots() if self.staged else []
        if self.cache is None and self.groups:
            self._rolling_buffers()

    # ---- buffers --------------------------------------------------------------

    def _rolling_buffers(self) -> None:
        """Capacity per column: its bytes in the largest group; as many
        buffers as one batch spans groups, plus one read ahead."""
        self.capacity = [max(int(c.range_nbytes(g.start, g.stop).sum()) for g in self.groups) for c in self.columns]
        total = 0
        for cap in self.capacity:
            self.region.append(total)
            total += _align(cap)
        bs = self.ld.batch_size
        first = self.group_of[::bs]
        last = self.group_of[np.minimum(np.arange(0, len(self.order), bs) + bs, len(self.order)) - 1]
        span = int((last - first).max()) + 1 if len(first) else 1
        self.free = [Buffer(m, self.gatherer.address(m))
                     for m in self.ld._rolling_buffers(min(len(self.groups), span + 1), total)]

    def _acquire(self, block: bool) -> Buffer | None:
        """A buffer for the next group: a free one, or the oldest busy one
        once its group is released (and, unless the copy stream orders it,
        once that group's gathers are done)."""
        if self.free:
            buf = self.free.pop()
        else:
            if not self.busy or not self.busy[0].released:
                return None
            buf = self.busy[0]
            if self.module != "numpy" and not self.staged:
                if not block and not event_done(buf.release_event):
                    return None
                buf.release_event.synchronize()
            self.busy.popleft()
        buf.released = False
        buf.waited = buf.release_event is None or not self.staged
        return buf

    def _buffer_of(self, g: int) -> Buffer:
        if self.cache is not None:
            return self.cache.buffer
        buf = self.states[g].buffer
        assert buf is not None
        return buf

    # ---- loads ----------------------------------------------------------------

    def _prepare(self, g: int, block: bool) -> bool:
        """Group `g` gets its buffer and its list of loads."""
        st = self.states[g]
        grp = self.groups[g]
        if self.cache is not None:
            st.loads = []
            rows_read = self.cache.rows_read
            for a, b in zip(grp.start.tolist(), grp.stop.tolist()):
                missing = ~rows_read[a:b]
                if not missing.any():
                    continue
                edges = np.flatnonzero(np.diff(np.concatenate([[False], missing, [False]]).astype(np.int8)))
                for lo, hi in zip((edges[0::2] + a).tolist(), (edges[1::2] + a).tolist()):
                    st.loads.append(self._load(g, lo, hi, None))
        else:
            buf = self._acquire(block)
            if buf is None:
                return False
            st.buffer = buf
            self.busy.append(buf)
            st.ragged_start = []
            for c in self.columns:
                if c.ragged:
                    nb = c.row_nbytes(grp.row_ids())
                    st.ragged_start.append(np.cumsum(nb) - nb)
                else:
                    st.ragged_start.append(None)
            # pieces packed in order from the start of each column's region
            pos = list(self.region)
            st.loads = []
            for a, b in zip(grp.start.tolist(), grp.stop.tolist()):
                load = self._load(g, a, b, pos)
                st.loads.append(load)
                pos = [p + n for p, n in zip(pos, load.nbytes)]
        st.outstanding = len(st.loads)
        self.next_group += 1
        return True

    def _load(self, g: int, a: int, b: int, dst: list[int] | None) -> _Load:
        """Global rows [a, b) of one file (a window, or a part of one)."""
        sa, sb = np.array([a]), np.array([b])
        nbytes = [int(c.range_nbytes(sa, sb)[0]) for c in self.columns]
        if dst is None:  # the cache: the rows' global places
            assert self.cache is not None
            dst = [self.cache.base[ci] + (int(c.cum_bytes[a]) if isinstance(c, RaggedColumn) else a * c.row_bytes)
                   for ci, c in enumerate(self.columns)]
        return _Load(g, a, b, list(dst), nbytes)

    def _issue(self, load: _Load, slot: Slot | None) -> None:
        if slot is not None:
            load.slot = slot
            base_addr = slot.addr
            o = 0
            for c, n in zip(self.columns, load.nbytes):
                load.slot_off.append(o)
                if not c.compressed:  # (their chunks go to device memory: Decoder.submit)
                    o += _align(n)
            dsts = load.slot_off
        else:
            base_addr = self._buffer_of(load.group).addr
            dsts = load.dst
        by_path: dict[str, list[Segments]] = {}
        for ci, c in enumerate(self.columns):
            if load.nbytes[ci] and not c.compressed:
                for path, seg in range_reads(c, load.start, load.stop, dsts[ci]):
                    by_path.setdefault(path, []).append(seg)
        if not by_path and slot is not None:  # compressed columns alone: their chunks go to device memory
            self.staging.append(slot)
            load.slot = None
        # one request per file (columns given as datasets may lie in different files)
        tickets: list[tuple[int, str]] = []
        try:
            for path, segs in by_path.items():
                off, size, mem = (np.ascontiguousarray(np.concatenate([sg[k] for sg in segs]), np.uint64)
                                  for k in range(3))
                mem += np.uint64(base_addr)
                tickets.append((self.ld._files[path].submit(off, size, mem, base_addr), path))
            for ci, c in enumerate(self.columns):
                if load.nbytes[ci] and c.compressed:
                    assert isinstance(c, FixedColumn)
                    load.compressed.append(self.ld._decoder.submit(self, c, ci, load.start, load.stop,
                                                                   load.dst[ci], tickets))
        except BaseException:
            try:
                io.wait_all(tickets)  # the buffer must outlive every request into it
            except OSError:
                pass
            if slot is not None:
                self.staging.append(slot)
                load.slot = None
            raise
        if not tickets:
            self._complete(load)
            return
        load.tickets = tickets
        self.pending.append(load)

    def _complete(self, load: _Load) -> None:
        """A load's reads are done: its copies to the device are queued
        (pinned staging); the cache records its rows."""
        st = self.states[load.group]
        if load.slot is not None:
            buf = self._buffer_of(load.group)
            stream = self.copier.copy_stream()
            if not buf.waited:
                stream_wait(stream, buf.release_event)  # the gathers out of the buffer's previous group
                buf.waited = True
            for ci in range(len(self.columns)):
                if not self.columns[ci].compressed:  # (those decode into the buffer later)
                    self.copier.copy_into(buf.mem, load.dst[ci], load.slot, load.slot_off[ci], load.nbytes[ci],
                                          stream)
            ev = self.copier.record(stream)
            load.slot.copied = ev
            st.copied = self.last_copy = ev
            self.staging.append(load.slot)
            load.slot = None
        if load.compressed:  # its rows are there once decoded (_decode)
            st.to_decode.extend(load.compressed)
            st.decoded_rows.append((load.start, load.stop))
            st.read_since_decode += 1
            load.compressed = []
        elif self.cache is not None:
            self.cache.rows_read[load.start:load.stop] = True
        st.outstanding -= 1
        # a part of the group's windows decodes as soon as they are read, the last when all are
        part = -(-len(st.loads) // self.ld._decode_parts)
        if st.to_decode and (st.outstanding == 0 or st.read_since_decode >= part):
            self._decode(load.group)

    def _decode(self, g: int) -> None:
        """A part of group `g` is read (H5GDS_LOADER_DECODE_PARTS): the
        decode of its compressed columns' chunks into the group's buffer
        begins (one GPU batch per file, in the background), ordered after
        the gathers out of the buffer's previous group (as the copies are);
        _finish_decode ends it."""
        st = self.states[g]
        loads, st.to_decode = st.to_decode, []
        rows, st.decoded_rows = st.decoded_rows, []
        st.read_since_decode = 0
        buf = self._buffer_of(g)
        stream = None
        if self.module != "numpy":
            stream = self.copier.copy_stream()
            if not buf.waited:
                # the host waits (the decode's own waits then count the
                # decode alone: H5GDS_CODEC_TIMEOUT_S), as it would below
                buf.release_event.synchronize()
                buf.waited = True
        st.decoding.append((self.ld._decoder.begin_group(self, buf.mem, loads, stream), rows))
        # Decodes more than a group behind end now (most likely done), so that their
        # memory comes back: nothing else bounds how far a cache fill reads ahead.
        for older in range(self.decodes_ended_before, g - 1):
            self._finish_decode(older)
        self.decodes_ended_before = max(self.decodes_ended_before, g - 1)

    def _finish_decode(self, g: int) -> None:
        """Group `g`'s decodes end: its rows are in place (an error raised
        here names the file, dataset and chunk; the parts after it are
        abandoned)."""
        st = self.states[g]
        parts, st.decoding = st.decoding, []
        decoder = self.ld._decoder
        for k, (pending, rows) in enumerate(parts):
            try:
                decoder.finish_group(pending)
            except BaseException:
                for later, _ in parts[k + 1:]:
                    decoder.abandon(later)
                raise
            if self.cache is not None:
                for a, b in rows:
                    self.cache.rows_read[a:b] = True
            if self.staged and pending.stream is not None:
                st.copied = self.last_copy = self.copier.record(pending.stream)

    def _reap(self, block: bool) -> bool:
        """Completes the oldest load when its reads are done (or waits for
        them when `block`)."""
        if not self.pending:
            return False
        load = self.pending[0]
        tickets = load.tickets
        assert tickets is not None
        if not block and not all(io.done(t) for t, _ in tickets):
            return False
        self.pending.popleft()
        load.tickets = None
        try:
            io.wait_all(tickets)
        except BaseException:
            if load.slot is not None:
                self.staging.append(load.slot)
                load.slot = None
            raise
        self._complete(load)
        return True

    def _free_slot(self) -> Slot | None:
        for i, s in enumerate(self.staging):
            if s.copy_done():
                return self.staging.pop(i)
        return None

    def pump(self, need: int = -1) -> None:
        """Moves the reads along without waiting; with `need` >= 0, waits
        until group `need` is read (and its copies queued)."""
        while True:
            while self._reap(block=False):
                pass
            slot_wanted = False  # the next load waits for a staging slot's copy
            while len(self.pending) < self.inflight:
                if self.cur_group == self.next_group:  # every prepared group issued: prepare the next
                    if self.next_group >= len(self.groups) or not self._prepare(self.next_group,
                                                                                self.next_group <= need):
                        break
                st = self.states[self.cur_group]
                if st.issued == len(st.loads):
                    self.cur_group += 1
                    continue
                slot = None
                if self.staged:
                    slot = self._free_slot()
                    if slot is None:
                        slot_wanted = True
                        break
                self._issue(st.loads[st.issued], slot)
                st.issued += 1
            if need < 0:
                return
            if need < self.next_group and self.states[need].outstanding == 0:
                self._finish_decode(need)
                return
            # something to wait for: the oldest read, else the oldest copy out of a staging slot
            if self._reap(block=True):
                continue
            if slot_wanted and self.staging:
                # Every slot's copy was pending when polled above. Not polled
                # again: the GPU may have finished one since, which is no
                # reason to give up (the wait then returns at once).
                self.staging[0].wait_copied()
                continue
            raise RuntimeError(f"the windowed reader cannot make progress towards group {need} "
                               f"(prepared {self.next_group}, issuing {self.cur_group}): internal error")

    # ---- batches --------------------------------------------------------------

    def ready(self, g: int) -> None:
        """Group `g` is read, and the current stream waits for its copies."""
        self.pump(need=g)
        st = self.states[g]
        if self.staged and st.copied is not None and not st.ready_waited:
            stream_wait(self.copier.current_stream(), st.copied)
            st.ready_waited = True

    def batch(self, lo: int, hi: int) -> list[Any]:
        """The parts of the batch of positions [lo, hi): per column an
        array, or (ragged) values and offsets."""
        gids = self.group_of[lo:hi]
        cuts = (np.flatnonzero(np.diff(gids)) + 1).tolist()
        runs = list(zip([0] + cuts, cuts + [hi - lo]))
        for a, _ in runs:
            if self.groups:
                self.ready(int(gids[a]))
        rows = self.order[lo:hi]
        parts: list[Any] = []
        for ci, c in enumerate(self.columns):
            if isinstance(c, RaggedColumn):
                lens = c.row_nbytes(rows)
                offsets = np.concatenate([[0], np.cumsum(lens // c.itemsize)]).astype(np.int64)
                values = self.ld._new_array(ci, (int(offsets[-1]),), c.dtype)
                out_byte = 0
                for a, b in runs:
                    buf, src = self._ragged_sources(int(gids[a]), ci, lo + a, lo + b)
                    self.gatherer.ranges(buf.mem, src, lens[a:b], values, out_byte)
                    out_byte += int(lens[a:b].sum())
                parts.append(values)
                parts.append(self.gatherer.host_to_module(offsets))
                continue
            out = self.ld._new_array(ci, (hi - lo,) + c.row_shape, c.dtype)
            for a, b in runs:
                g = int(gids[a])
                if self.cache is not None:
                    base, cap = self.cache.base[ci], c.rows
                else:
                    base, cap = self.region[ci], self.capacity[ci] // max(1, c.row_bytes)
                self.gatherer.rows(self._buffer_of(g).mem, base, cap, c.row_bytes, self.local[lo + a:lo + b], out, a)
            parts.append(out)
        return parts

    def _ragged_sources(self, g: int, ci: int, lo: int, hi: int) -> tuple[Buffer, np.ndarray]:
        """The buffer and the byte starts in it of positions [lo, hi)."""
        c = self.columns[ci]
        assert isinstance(c, RaggedColumn)
        if self.cache is not None:
            return self.cache.buffer, self.cache.base[ci] + c.cum_bytes[self.order[lo:hi]]
        starts = self.states[g].ragged_start[ci]
        assert starts is not None
        return self._buffer_of(g), self.region[ci] + starts[self.local[lo:hi]]

    def release_before(self, pos: int) -> None:
        """Positions before `pos` are gathered: the groups wholly before it
        give their buffers back, after their gathers (on the GPU)."""
        if self.cache is not None:
            return
        upto = int(self.group_of[pos]) if pos < len(self.order) else len(self.groups)
        for g in range(self.released_upto, upto):
            buf = self.states[g].buffer
            if buf is None:
                continue
            self.states[g].buffer = None
            if self.module != "numpy":
                buf.release_event = self.copier.record(self.copier.current_stream())
            buf.released = True
        self.released_upto = max(self.released_upto, upto)

    def close(self) -> None:
        """Collects every read still writing into the buffers, and every
        copy still reading the staging slots, and every decode begun."""
        for st in self.states:
            parts, st.decoding = st.decoding, []
            for pending, _ in parts:
                self.ld._decoder.abandon(pending)
        while self.pending:
            load = self.pending.popleft()
            if load.tickets is not None:
                try:
                    io.wait_all(load.tickets)
                except OSError:
                    pass
            if load.slot is not None:
                self.staging.append(load.slot)
                load.slot = None
        for s in self.staging:
            s.wait_copied()
        self.ld._return_staging(self.staging)
        self.staging = []


def iterate(reader: WindowedReader, batch_size: int, drop_last: bool) -> Generator[list[Any], None, None]:
    """The batches (lists of parts) of a windowed epoch."""
    n = len(reader.order)
    end = n // batch_size * batch_size if drop_last else n
    try:
        reader.pump()
        for lo in range(0, end, batch_size):
            hi = min(lo + batch_size, end)
            parts = reader.batch(lo, hi)
            reader.release_before(hi)
            reader.pump()
            yield parts
    finally:
        reader.close()


def fill_cache(loader: Any) -> None:
    """Reads every row the loader's cache lacks, window by window in file
    order (before an exact epoch served from the cache); the current
    stream waits for the copies."""
    from ._loader_order import group_pieces
    cache: Cache = loader._cache
    if cache.complete():
        return
    w = loader._windows
    nbytes = sum(c.range_nbytes(w.start, w.stop) for c in loader.columns)
    groups = group_pieces(w.start, w.stop, np.asarray(nbytes), loader.buffer_bytes)
    rows = np.concatenate([g.row_ids() for g in groups])
    gid = np.concatenate([np.full(g.rows, i, np.int64) for i, g in enumerate(groups)])
    reader = WindowedReader(loader, WindowedPlan(rows, gid, rows, groups))
    try:
        for g in range(len(groups)):
            reader.pump(need=g)
        if reader.last_copy is not None:
            stream_wait(reader.copier.current_stream(), reader.last_copy)
    finally:
        reader.close()
