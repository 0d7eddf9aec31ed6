"""Epoch orders of the loader: which samples each rank reads, and in which
order, as a function of (seed, epoch, rank, world_size) and nothing else.

``exact``: a uniform permutation of all samples, rank r taking every
world_size-th one from r (torch's DistributedSampler without padding).

``windowed``: the samples are cut into windows, contiguous runs of rows
whose bytes lie together in the file (a few MiB, on the engine's block
boundaries); the windows are dealt into groups of a shuffle buffer's worth
(stratified: each group takes one random window from each of as many runs
of neighbouring windows, so it spans the whole file), the groups put in
random order; the ranks split that sequence into consecutive shares of the
sizes the exact order gives them; each rank reads its share in groups of
about a buffer and draws each group's samples in a uniform random order. A group is read as a few large reads
(disk sequential rate) and every batch is a uniform sample of the group's
rows. When a rank's share fits in one group, its order is a uniform
permutation of its share.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

# Distinct streams of the epoch's random numbers (numpy SeedSequence entropy).
_WINDOWS_STREAM = 1
_GROUPS_STREAM = 2


def rank_counts(n: int, world_size: int) -> np.ndarray:
    """Samples per rank: ceil((n - r) / world_size) for rank r, as the
    exact order's strided split gives (ranks differ by at most one)."""
    r = np.arange(world_size, dtype=np.int64)
    return np.maximum(0, -(-(n - r) // world_size))


def exact_order(n: int, seed: int, epoch: int, shuffle: bool, rank: int, world_size: int) -> np.ndarray:
    """The exact order's global sample indices of `rank` for `epoch`."""
    if shuffle:
        order = np.random.default_rng([seed, epoch]).permutation(n)
    else:
        order = np.arange(n, dtype=np.int64)
    return np.ascontiguousarray(order[rank::world_size], dtype=np.int64)


@dataclass
class Windows:
    """Windows of global rows [start, stop), in file order (each in one file)."""
    start: np.ndarray
    stop: np.ndarray

    def __len__(self) -> int:
        return len(self.start)


def windows_from_boundaries(bounds: list[np.ndarray]) -> Windows:
    """Windows from each file's row boundaries (global rows, first = the
    file's first row, last = one past its last): empty windows dropped."""
    starts, stops = [], []
    for b in bounds:
        b = np.asarray(b, dtype=np.int64)
        keep = b[1:] > b[:-1]
        starts.append(b[:-1][keep])
        stops.append(b[1:][keep])
    if not starts:
        return Windows(np.zeros(0, np.int64), np.zeros(0, np.int64))
    return Windows(np.concatenate(starts), np.concatenate(stops))


@dataclass
class Group:
    """A group of the shuffle buffer: its rows are read as the pieces
    [start, stop) (global rows, in this order into the group's buffer)."""
    start: np.ndarray
    stop: np.ndarray

    @property
    def rows(self) -> int:
        return int((self.stop - self.start).sum())

    def row_ids(self) -> np.ndarray:
        """Global rows in buffer order."""
        return _ranges(self.start, self.stop)


@dataclass
class WindowedPlan:
    """One rank's windowed epoch: `order` (global rows, in the order the
    rank yields them), `group` (the group each position belongs to) and
    `local` (the row's index in its group's buffer order)."""
    order: np.ndarray
    group: np.ndarray
    local: np.ndarray
    groups: list[Group]


def _ranges(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Concatenation of arange(start[i], stop[i])."""
    lens = (stop - start).astype(np.int64)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    firsts = np.cumsum(lens) - lens
    out = np.arange(total, dtype=np.int64)
    out += np.repeat(start.astype(np.int64) - firsts, lens)
    return out


def window_sequence(nwin: int, per_group: int, seed: int, epoch: int, shuffle: bool
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The epoch's windows (indices in file order) and their groups, the
    same on every rank. Stratified: with G = ceil(nwin / per_group) groups,
    the windows are cut into strata of at most G neighbours (file order) and
    each group takes one window of each stratum, drawn at random, so every
    group spans the whole file, and a dataset stored sorted (by label, by
    time) gives each group about its whole mix. The groups come in random
    order; inside a group, windows are in file order (the reads)."""
    if nwin == 0:
        z = np.zeros(0, np.int64)
        return z, z
    d = max(1, min(int(per_group), nwin))
    groups = -(-nwin // d)
    if not shuffle:
        seq = np.arange(nwin, dtype=np.int64)
        return seq, seq // d
    rng = np.random.default_rng([seed, epoch, _WINDOWS_STREAM])
    strata = -(-nwin // groups)
    slot = np.full((groups, strata), -1, np.int64)
    for s, stratum in enumerate(np.array_split(np.arange(nwin, dtype=np.int64), strata)):
        # a stratum of fewer windows than groups leaves random groups without one of it
        where = rng.permutation(groups)[: len(stratum)]
        slot[where, s] = rng.permutation(stratum)
    slot = slot[rng.permutation(groups)]
    big = np.iinfo(np.int64).max
    slot = np.sort(np.where(slot < 0, big, slot), axis=1)
    gid = np.repeat(np.arange(groups, dtype=np.int64), strata).reshape(groups, strata)
    keep = slot != big
    return slot[keep], gid[keep]


def rank_pieces(windows: Windows, n: int, seed: int, epoch: int, shuffle: bool, rank: int,
                world_size: int, per_group: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The row ranges [start, stop) of `rank`'s share, in order, and their
    groups: the epoch's window sequence (window_sequence: the same on every
    rank) split in consecutive shares of rank_counts() samples."""
    seq, gid = window_sequence(len(windows), per_group, seed, epoch, shuffle)
    start, stop = windows.start[seq], windows.stop[seq]
    counts = rank_counts(n, world_size)
    lo = int(counts[:rank].sum())
    hi = lo + int(counts[rank])
    lens = stop - start
    ends = np.cumsum(lens)
    begins = ends - lens
    sel = (ends > lo) & (begins < hi)
    start, stop, begins, ends, gid = start[sel], stop[sel], begins[sel], ends[sel], gid[sel]
    # clip the first and last pieces to the share
    start = start + np.maximum(0, lo - begins)
    stop = stop - np.maximum(0, ends - hi)
    return start.astype(np.int64), stop.astype(np.int64), gid


def groups_of(start: np.ndarray, stop: np.ndarray, gid: np.ndarray, piece_bytes: np.ndarray,
              buffer_bytes: int) -> list[Group]:
    """The rank's groups: runs of pieces of one group of the sequence; a
    partial group at either end of the share smaller than half a buffer
    joins its neighbour (fewer, fuller groups)."""
    if not len(start):
        return []
    cuts = (np.flatnonzero(np.diff(gid)) + 1).tolist()
    bounds = [0] + cuts + [len(start)]
    runs = [[a, b] for a, b in zip(bounds[:-1], bounds[1:])]
    size = lambda r: int(piece_bytes[r[0]:r[1]].sum())  # noqa: E731
    if len(runs) > 1 and size(runs[0]) < buffer_bytes // 2:
        runs[1][0] = runs[0][0]
        runs.pop(0)
    if len(runs) > 1 and size(runs[-1]) < buffer_bytes // 2:
        runs[-2][1] = runs[-1][1]
        runs.pop()
    return [Group(start[a:b], stop[a:b]) for a, b in runs]


def group_pieces(start: np.ndarray, stop: np.ndarray, piece_bytes: np.ndarray, buffer_bytes: int) -> list[Group]:
    """Consecutive pieces in groups of about `buffer_bytes`: piece k joins
    group floor(bytes before it / buffer_bytes) (a group exceeds the size
    by less than one piece)."""
    if not len(start):
        return []
    before = np.cumsum(piece_bytes) - piece_bytes
    gid = before // max(1, int(buffer_bytes))
    # renumber 0, 1, 2...: a piece larger than the buffer skips numbers
    _, gid = np.unique(gid, return_inverse=True)
    cuts = np.flatnonzero(np.diff(gid)) + 1
    return [Group(s, e) for s, e in zip(np.split(start, cuts), np.split(stop, cuts))]


def windowed_plan(windows: Windows, n: int, seed: int, epoch: int, shuffle: bool, rank: int, world_size: int,
                  buffer_bytes: int, range_bytes: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> WindowedPlan:
    """The windowed order of `rank` for `epoch` (see the module's text).
    `range_bytes(start, stop)`: the bytes (all columns) of row ranges."""
    per_group = 1
    if len(windows):
        mean = float(range_bytes(windows.start, windows.stop).sum()) / len(windows)
        per_group = max(1, int(round(buffer_bytes / max(1.0, mean))))
    start, stop, gid = rank_pieces(windows, n, seed, epoch, shuffle, rank, world_size, per_group)
    groups = groups_of(start, stop, gid, range_bytes(start, stop), buffer_bytes)
    rng = np.random.default_rng([seed, epoch, _GROUPS_STREAM, rank, world_size])
    orders, gids, locals_ = [], [], []
    for g, grp in enumerate(groups):
        rows = grp.row_ids()
        local = rng.permutation(len(rows)) if shuffle else np.arange(len(rows), dtype=np.int64)
        orders.append(rows[local])
        locals_.append(local)
        gids.append(np.full(len(rows), g, np.int64))
    if not groups:
        empty = np.zeros(0, np.int64)
        return WindowedPlan(empty, empty, empty, [])
    return WindowedPlan(np.concatenate(orders), np.concatenate(gids), np.concatenate(locals_).astype(np.int64),
                        groups)


def aligned_boundaries(first_row: int, rows: int, base: int, row_bytes: int, window: int) -> np.ndarray:
    """Boundaries of windows over the `rows` rows of one contiguous dataset
    (row 0 at file offset `base`, `row_bytes` each; global row of row 0:
    `first_row`): a window starts at the first row that starts at or after
    each multiple of `window` in the file, so windows follow the engine's
    blocks when `window` divides its block size. Rows larger than a
    window are windows of one row."""
    if rows == 0:
        return np.array([first_row, first_row], np.int64)
    if row_bytes >= window:
        return np.arange(first_row, first_row + rows + 1, dtype=np.int64)
    end = base + rows * row_bytes
    marks = np.arange((base // window + 1) * window, end, window, dtype=np.int64)
    local = -(-(marks - base) // row_bytes)
    local = local[(local > 0) & (local < rows)]
    return np.concatenate([[first_row], first_row + np.unique(local), [first_row + rows]]).astype(np.int64)


def offset_boundaries(first_row: int, starts: np.ndarray, window: int) -> np.ndarray:
    """Window boundaries over rows whose file offsets (non-decreasing, one
    per row, plus the end) are `starts`: a window starts at the first row
    at or after each multiple of `window`."""
    rows = len(starts) - 1
    if rows <= 0:
        return np.array([first_row, first_row], np.int64)
    block = starts[:-1] // window
    cut = np.flatnonzero(np.diff(block)) + 1
    return np.concatenate([[first_row], first_row + cut, [first_row + rows]]).astype(np.int64)


def even_boundaries(first_row: int, rows: int, rows_per_window: int) -> np.ndarray:
    """Windows of `rows_per_window` rows (chunked datasets: whole chunks)."""
    step = max(1, int(rows_per_window))
    b = np.arange(first_row, first_row + rows, step, dtype=np.int64)
    return np.concatenate([b, [first_row + rows]]).astype(np.int64)
