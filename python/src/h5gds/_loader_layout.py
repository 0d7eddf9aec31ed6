"""Where the loader's samples lie: for each column (one logical dataset
over one or more files), HDF5 is asked once where every row's bytes are
(the contiguous storage offset, or the address of every chunk); reads of
rows are then lists of (file offset, size, buffer offset) segments built
with numpy, without HDF5.

Two kinds of columns: fixed rows (an N-d dataset, one sample per row along
the first axis) and variable-length rows (:class:`Ragged`: a 1-D dataset of
values and a 1-D dataset of n + 1 offsets into it)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import h5py
import numpy as np
from h5py import h5d
from h5py._objects import phil

from . import _loader_order as order_mod

__all__ = ["Ragged"]


class Ragged:
    """A column of variable-length samples stored as two datasets:
    ``values`` (1-D, every sample's elements end to end) and ``offsets``
    (1-D integers, n + 1 entries: sample i is
    ``values[offsets[i]:offsets[i + 1]]``).

    Give h5py datasets (``Loader((Ragged(f["bytes"], f["offsets"]),
    f["label"]), 64)``) or, with a list of files, dataset paths
    (``Loader(paths, 64, dataset=[Ragged("bytes", "offsets"), "label"])``).
    Each batch gives such a column as a pair ``(values, offsets)``: the
    batch's samples end to end, and ``len(batch) + 1`` int64 offsets into
    them (starting at 0), both in the batch's array library."""

    def __init__(self, values: Any, offsets: Any):
        self.values = values
        self.offsets = offsets

    def __repr__(self) -> str:
        return f"Ragged({self.values!r}, {self.offsets!r})"


@dataclass
class FileLayout:
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
    # filtered (compressed) chunks: per (chunk row, tile) the stored size
    # and filter mask (addr above), decoded by _loader_decode; a sample's
    # inner dimensions are cut into tiles where the chunks do not span them
    # (netCDF-4 files often are), each decoded whole and its box copied
    filtered: bool = False
    filter_ids: tuple[int, ...] = ()  # the pipeline's filters, in HDF5's order
    dataset: str = ""
    stored: np.ndarray | None = None
    mask: np.ndarray | None = None
    tiles: TileBoxes | None = None


@dataclass
class TileBoxes:
    """The boxes a sample's inner dimensions are cut into by chunks that
    do not span them: per tile its origin and extent (elements, inner
    dimensions), the chunk's inner shape and the sample's."""
    chunk: tuple[int, ...]
    inner: tuple[int, ...]
    origin: list[tuple[int, ...]]
    extent: list[tuple[int, ...]]


def _filters(dcpl: Any) -> list[tuple[int, str]]:
    """The pipeline's filters in HDF5's order: (id, name for messages)."""
    out = []
    for i in range(dcpl.get_nfilters()):
        code, _flags, _vals, name = dcpl.get_filter(i)
        out.append((int(code), f"{name.decode(errors='replace') or 'filter'} (id {code})"))
    return out


def file_layout(dset: h5py.Dataset) -> FileLayout:
    """Asks HDF5 once where the dataset's rows are."""
    name = f"{dset.file.filename}:{dset.name}"
    if dset.dtype.kind not in "biufc" or dset.dtype.fields is not None:
        raise TypeError(f"{name}: dtype {dset.dtype} is not a numeric type the loader can return")
    if not dset.dtype.isnative:
        raise TypeError(f"{name}: dtype {dset.dtype} is not in native byte order: the loader moves stored bytes "
                        "as they are (h5gds.read converts them; or store the dataset in native order)")
    if len(dset.shape) < 1:
        raise ValueError(f"{name}: a scalar dataset has no samples")
    with phil:
        dcpl = dset.id.get_create_plist()
        pipeline = _filters(dcpl)
        filters = [name for _, name in pipeline]
        layout = dcpl.get_layout()
        if dcpl.get_external_count():
            raise ValueError(f"{name} uses external storage, which the loader does not read")
        if dset.file.mode == "r+":
            dset.file.flush()  # the loader reads the file itself: data written through h5py must be there
        shape = tuple(int(n) for n in dset.shape)
        itemsize = dset.dtype.itemsize
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * itemsize
        out = FileLayout(path=os.fspath(dset.file.filename), rows=shape[0], dataset=dset.name)
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
    stored = np.zeros((grid[0], ntiles), np.int64)
    mask = np.zeros((grid[0], ntiles), np.uint32)
    for info in infos:
        idx = [o // c for o, c in zip(info.chunk_offset, chunk)]
        tile = int(np.ravel_multi_index(idx[1:], grid[1:])) if len(idx) > 1 else 0
        addr[idx[0], tile] = int(info.byte_offset)
        if filters:
            stored[idx[0], tile] = int(info.size)
            mask[idx[0], tile] = int(info.filter_mask)
    if (addr < 0).any() and not filters:  # (compressed: HDF5 reads the rows of those chunks, the fill value)
        missing = int((addr < 0).sum())
        raise ValueError(f"{name}: {missing} chunk(s) are not allocated (never written); write the whole dataset "
                         "or create it with h5gds.create_dataset (early allocation)")
    if filters:
        out.filtered = True
        out.filter_ids = tuple(code for code, _ in pipeline)
        out.c0, out.chunk_row_bytes, out.addr = chunk[0], row_bytes, addr
        out.stored, out.mask = stored, mask
        if tuple(chunk[1:]) != tuple(shape[1:]):  # tiles, or chunks wider than a sample (unlimited dimensions)
            out.tiles = tile_boxes(shape[1:], chunk[1:])
        return out
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


def tile_boxes(inner: Sequence[int], cinner: Sequence[int]) -> TileBoxes:
    """The tiles chunks of inner shape `cinner` cut a sample of shape
    `inner` into, in HDF5's order of chunks (the last dimension fastest)."""
    grid = [-(-n // c) for n, c in zip(inner, cinner)]
    origin, extent = [], []
    for tidx in np.ndindex(*grid):
        o = tuple(int(t) * c for t, c in zip(tidx, cinner))
        origin.append(o)
        extent.append(tuple(min(c, n - a) for c, n, a in zip(cinner, inner, o)))
    return TileBoxes(tuple(int(c) for c in cinner), tuple(int(n) for n in inner), origin, extent)


Segments = tuple[np.ndarray, np.ndarray, np.ndarray]


def _sorted_segments(off: np.ndarray, size: np.ndarray, mem: np.ndarray) -> Segments:
    """Non-empty segments sorted by file offset (uint64, contiguous)."""
    keep = size > 0
    if not keep.all():
        off, size, mem = off[keep], size[keep], mem[keep]
    order = np.argsort(off, kind="stable")
    return (np.ascontiguousarray(off[order], np.uint64), np.ascontiguousarray(size[order], np.uint64),
            np.ascontiguousarray(mem[order], np.uint64))


def merge_segments(off: np.ndarray, size: np.ndarray, mem: np.ndarray) -> Segments:
    """Sorted segments with neighbours that continue each other both in
    the file and in memory joined (one large read instead of many)."""
    if len(off) < 2:
        return off, size, mem
    o, s, m = off.astype(np.int64), size.astype(np.int64), mem.astype(np.int64)
    joins = (o[:-1] + s[:-1] == o[1:]) & (m[:-1] + s[:-1] == m[1:])
    if not joins.any():
        return off, size, mem
    first = np.concatenate([[True], ~joins])
    run = np.cumsum(first) - 1
    sizes = np.bincount(run, weights=s, minlength=int(run[-1]) + 1).astype(np.int64)
    return (np.ascontiguousarray(o[first], np.uint64), np.ascontiguousarray(sizes, np.uint64),
            np.ascontiguousarray(m[first], np.uint64))


def row_segments(lay: FileLayout, rows: np.ndarray, dst: np.ndarray, row_bytes: int) -> Segments:
    """File offsets, sizes and buffer offsets of the local `rows` of a
    fixed-row dataset going to buffer byte offsets `dst`, sorted by file
    offset (uint64)."""
    rows = np.asarray(rows, np.int64)
    dst = np.asarray(dst, np.int64)
    if lay.contiguous_base is not None:
        # Rows of a contiguous dataset: sorting the rows sorts the offsets.
        order = np.argsort(rows)
        off = rows[order].astype(np.uint64)
        off *= np.uint64(row_bytes)
        off += np.uint64(lay.contiguous_base)
        return off, np.full(len(rows), row_bytes, np.uint64), dst[order].astype(np.uint64)
    assert lay.addr is not None
    base = lay.addr[rows // lay.c0][:, lay.tmpl_tile]                     # (m, T)
    off = (base + ((rows % lay.c0) * lay.chunk_row_bytes)[:, None] + lay.tmpl_file[None, :]).ravel()
    mem = (dst[:, None] + lay.tmpl_mem[None, :]).ravel()
    size = np.broadcast_to(lay.tmpl_len[None, :], base.shape).ravel()
    return _sorted_segments(off, size, mem)


def element_segments(lay: FileLayout, start: np.ndarray, stop: np.ndarray, dst: np.ndarray,
                     itemsize: int) -> Segments:
    """Segments of element ranges [start, stop) of a 1-D dataset going to
    buffer byte offsets `dst` (one range after another), sorted by file
    offset (uint64)."""
    start, stop, dst = (np.asarray(a, np.int64) for a in (start, stop, dst))
    if lay.contiguous_base is not None:
        return _sorted_segments(lay.contiguous_base + start * itemsize, (stop - start) * itemsize, dst)
    assert lay.addr is not None
    c = lay.c0
    nonempty = stop > start
    start, stop, dst = start[nonempty], stop[nonempty], dst[nonempty]
    first, last = start // c, (stop - 1) // c
    counts = last - first + 1
    which = np.repeat(np.arange(len(start)), counts)
    chunk = np.repeat(first, counts) + (np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts))
    lo = np.maximum(start[which], chunk * c)
    hi = np.minimum(stop[which], (chunk + 1) * c)
    off = lay.addr[chunk, 0] + (lo - chunk * c) * itemsize
    mem = dst[which] + (lo - start[which]) * itemsize
    return _sorted_segments(off, (hi - lo) * itemsize, mem)


class _LazyDataset:
    """Stand-in while building columns from paths: the dataset's file is
    closed right after its layout is read (see Loader._columns)."""

    def __init__(self, dset: h5py.Dataset):
        self.layout = file_layout(dset)
        self.shape = tuple(dset.shape)
        self.dtype = dset.dtype
        self.file = type("F", (), {"filename": os.fspath(dset.file.filename)})()
        self.name = dset.name


def _layout_of(d: Any) -> FileLayout:
    return d.layout if isinstance(d, _LazyDataset) else file_layout(d)


class FixedColumn:
    """One logical dataset of fixed rows: the same row shape and dtype in
    one or more files."""
    ragged = False

    def __init__(self, dsets: Sequence[Any]):
        first = dsets[0]
        self.row_shape = tuple(int(n) for n in first.shape[1:])
        self.dtype = np.dtype(first.dtype)
        for d in dsets[1:]:
            if tuple(d.shape[1:]) != self.row_shape or d.dtype != self.dtype:
                raise ValueError(f"{d.file.filename}:{d.name} has rows {tuple(d.shape[1:])} {d.dtype}, the first "
                                 f"file {self.row_shape} {self.dtype}: the files must hold one logical dataset")
        self.row_bytes = int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize
        self.layouts = [_layout_of(d) for d in dsets]
        self.paths = [lay.path for lay in self.layouts]
        self.starts = np.cumsum([0] + [lay.rows for lay in self.layouts], dtype=np.int64)
        self.rows = int(self.starts[-1])
        # compressed in some file: read as whole stored chunks, decoded (_loader_decode)
        self.compressed = any(lay.filtered for lay in self.layouts)
        self._stored_cum: dict[int, np.ndarray] = {}  # range_stored_nbytes' sums, per file

    @property
    def total_bytes(self) -> int:
        return self.rows * self.row_bytes

    def row_nbytes(self, rows: np.ndarray) -> np.ndarray:
        return np.full(len(rows), self.row_bytes, np.int64)

    def range_nbytes(self, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        return (np.asarray(stop, np.int64) - np.asarray(start, np.int64)) * self.row_bytes

    def range_stored_nbytes(self, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        """The bytes read for global rows [start, stop) of each range: where
        a file's chunks are compressed, the stored bytes of the whole chunks
        that hold them; else the rows' bytes."""
        start, stop = np.asarray(start, np.int64), np.asarray(stop, np.int64)
        out = np.zeros(len(start), np.int64)
        nfiles = len(self.layouts)
        first = np.clip(np.searchsorted(self.starts, start, side="right") - 1, 0, nfiles - 1)
        last = np.clip(np.searchsorted(self.starts, np.maximum(stop - 1, start), side="right") - 1, 0, nfiles - 1)
        # ranges inside one file (windows are), grouped by file: one pass each
        one = np.flatnonzero((first == last) & (stop > start))
        one = one[np.argsort(first[one], kind="stable")]
        files, at = np.unique(first[one], return_index=True)
        for fi, a, b in zip(files.tolist(), at.tolist(), at[1:].tolist() + [len(one)]):
            sel = one[a:b]
            out[sel] = self._file_stored(fi, start[sel], stop[sel])
        for k in np.flatnonzero((first != last) & (stop > start)).tolist():  # ranges across files
            for fi in range(int(first[k]), int(last[k]) + 1):
                out[k] += int(self._file_stored(fi, start[k:k + 1], stop[k:k + 1])[0])
        return out

    def _file_stored(self, fi: int, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        """range_stored_nbytes of global rows [start, stop) within file `fi`."""
        lay = self.layouts[fi]
        s0 = int(self.starts[fi])
        lo, hi = np.clip(start - s0, 0, lay.rows), np.clip(stop - s0, 0, lay.rows)
        if not lay.filtered or lay.stored is None:
            return (hi - lo) * self.row_bytes
        cum = self._stored_cum.get(fi)
        if cum is None:  # stored bytes before each chunk row
            cum = self._stored_cum[fi] = np.concatenate([[0], np.cumsum(lay.stored.sum(axis=1))]).astype(np.int64)
        c_lo, c_hi = lo // lay.c0, -(-hi // lay.c0)
        return np.where(hi > lo, cum[np.minimum(c_hi, len(cum) - 1)] - cum[np.minimum(c_lo, len(cum) - 1)], 0)

    def segments(self, fi: int, rows: np.ndarray, dst: np.ndarray) -> Segments:
        """Local rows of file `fi` to buffer byte offsets `dst`."""
        return row_segments(self.layouts[fi], rows, dst, self.row_bytes)

    def range_segments(self, fi: int, a: int, b: int, dst0: int) -> Segments:
        """Local rows [a, b) of file `fi`, packed in order from `dst0`."""
        lay = self.layouts[fi]
        if lay.contiguous_base is not None:
            n = b - a
            if n <= 0 or self.row_bytes == 0:
                z = np.zeros(0, np.uint64)
                return z, z, z
            return (np.array([lay.contiguous_base + a * self.row_bytes], np.uint64),
                    np.array([n * self.row_bytes], np.uint64), np.array([dst0], np.uint64))
        rows = np.arange(a, b, dtype=np.int64)
        return merge_segments(*self.segments(fi, rows, dst0 + (rows - a) * self.row_bytes))

    def window_bounds(self, fi: int, window: int) -> np.ndarray:
        """Window boundaries (global rows) over file `fi`."""
        lay, first = self.layouts[fi], int(self.starts[fi])
        if lay.contiguous_base is not None:
            return order_mod.aligned_boundaries(first, lay.rows, lay.contiguous_base, self.row_bytes, window)
        # chunked: whole chunk rows, about a window of bytes each
        per_chunk_row = max(1, lay.c0 * self.row_bytes)
        return order_mod.even_boundaries(first, lay.rows, max(1, window // per_chunk_row) * lay.c0)


class RaggedColumn:
    """Variable-length rows: a 1-D values dataset and its n + 1 offsets,
    per file. The offsets are read into memory at construction."""
    ragged = True
    compressed = False

    def __init__(self, values: Sequence[Any], offsets: Sequence[np.ndarray], names: Sequence[str]):
        first = values[0]
        self.dtype = np.dtype(first.dtype)
        self.row_shape: tuple[int, ...] = ()
        for v, name in zip(values, names):
            if len(v.shape) != 1:
                raise ValueError(f"{name}: the values of a Ragged column must be a 1-D dataset, not {v.shape}")
            if v.dtype != self.dtype:
                raise ValueError(f"{name} has dtype {v.dtype}, the first file {self.dtype}: the files must hold "
                                 "one logical dataset")
        self.itemsize = self.dtype.itemsize
        self.layouts = [_layout_of(v) for v in values]
        for lay, name in zip(self.layouts, names):
            if lay.filtered:
                raise ValueError(f"{name}: the values of a Ragged column are compressed; the loader decodes "
                                 "compressed fixed-size rows only (store the values unfiltered)")
        self.paths = [lay.path for lay in self.layouts]
        self.offsets: list[np.ndarray] = []
        lengths = []
        for off, v, name in zip(offsets, values, names):
            off = np.asarray(off)
            if off.ndim != 1 or off.dtype.kind not in "iu" or len(off) < 1:
                raise ValueError(f"{name}: the offsets of a Ragged column must be a 1-D integer dataset of n + 1 "
                                 "entries")
            off = off.astype(np.int64)
            if (np.diff(off) < 0).any() or off[0] < 0 or off[-1] > v.shape[0]:
                raise ValueError(f"{name}: the offsets must be non-decreasing and within the values "
                                 f"(0..{v.shape[0]}), found {int(off.min())}..{int(off.max())}")
            self.offsets.append(off)
            lengths.append(np.diff(off))
        self.lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        self.starts = np.cumsum([0] + [len(o) - 1 for o in self.offsets], dtype=np.int64)
        self.rows = int(self.starts[-1])
        self.cum_bytes = np.concatenate([[0], np.cumsum(self.lengths * self.itemsize)]).astype(np.int64)

    @property
    def total_bytes(self) -> int:
        return int(self.cum_bytes[-1])

    def row_nbytes(self, rows: np.ndarray) -> np.ndarray:
        return self.lengths[rows] * self.itemsize

    def range_nbytes(self, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        return self.cum_bytes[np.asarray(stop, np.int64)] - self.cum_bytes[np.asarray(start, np.int64)]

    def segments(self, fi: int, rows: np.ndarray, dst: np.ndarray) -> Segments:
        off = self.offsets[fi]
        rows = np.asarray(rows, np.int64)
        return element_segments(self.layouts[fi], off[rows], off[rows + 1], dst, self.itemsize)

    def range_segments(self, fi: int, a: int, b: int, dst0: int) -> Segments:
        off = self.offsets[fi]
        return merge_segments(*element_segments(self.layouts[fi], off[a:a + 1], off[b:b + 1],
                                                np.array([dst0]), self.itemsize))

    def window_bounds(self, fi: int, window: int) -> np.ndarray:
        lay, first = self.layouts[fi], int(self.starts[fi])
        off = self.offsets[fi]
        if lay.contiguous_base is not None:
            return order_mod.offset_boundaries(first, lay.contiguous_base + off * self.itemsize, window)
        return order_mod.offset_boundaries(first, off * self.itemsize, window)


Column = FixedColumn | RaggedColumn


def range_reads(col: Column, a: int, b: int, dst0: int) -> list[tuple[str, Segments]]:
    """Global rows [a, b) of a column packed in order from buffer byte
    `dst0`: (file path, segments) per file they lie in."""
    out = []
    while a < b:
        fi = int(np.searchsorted(col.starts, a, side="right") - 1)
        e = min(b, int(col.starts[fi + 1]))
        lo = a - int(col.starts[fi])
        out.append((col.paths[fi], col.range_segments(fi, lo, lo + e - a, dst0)))
        dst0 += int(col.range_nbytes(np.array([a]), np.array([e]))[0])
        a = e
    return out


def _read_offsets(d: Any) -> np.ndarray:
    with phil:
        return np.asarray(d[()])


def columns_from(source: Any, dataset: Any) -> tuple[bool, list[Column]]:
    """The columns a Loader's `source` (and `dataset=`) name, and whether a
    batch is a tuple of columns."""
    if isinstance(source, (h5py.Dataset, Ragged)):
        return False, [_column_of([source])]
    if isinstance(source, (tuple, list)) and source and all(isinstance(s, (h5py.Dataset, Ragged)) for s in source):
        return True, [_column_of([s]) for s in source]
    if isinstance(source, (str, os.PathLike)):
        source = [source]
    if isinstance(source, (tuple, list)) and source and all(isinstance(s, (str, os.PathLike)) for s in source):
        if dataset is None:
            raise TypeError("a list of files needs dataset='path/in/file' (or a list of paths, or Ragged(values, "
                            "offsets) paths)")
        names = [dataset] if isinstance(dataset, (str, Ragged)) else list(dataset)
        for n in names:
            if not isinstance(n, (str, Ragged)) or (isinstance(n, Ragged) and not (
                    isinstance(n.values, str) and isinstance(n.offsets, str))):
                raise TypeError(f"dataset= names datasets by path (str, or Ragged of two paths), not {n!r}")
        cols: list[list[Any]] = [[] for _ in names]
        for path in source:
            # Each file is opened read-only just long enough to read its layout.
            with h5py.File(path, "r") as f:
                for j, n in enumerate(names):
                    if isinstance(n, Ragged):
                        v, o = _dataset_in(f, path, n.values), _dataset_in(f, path, n.offsets)
                        cols[j].append(Ragged(_LazyDataset(v), _read_offsets(o)))
                    else:
                        cols[j].append(_LazyDataset(_dataset_in(f, path, n)))
        return not isinstance(dataset, (str, Ragged)), [_column_of(c) for c in cols]
    raise TypeError("source must be an h5py.Dataset, a Ragged, a tuple/list of them, or a list of file paths "
                    "with dataset=")


def _dataset_in(f: h5py.File, path: Any, name: str) -> h5py.Dataset:
    if name not in f or not isinstance(f[name], h5py.Dataset):
        raise KeyError(f"{os.fspath(path)} has no dataset {name!r}")
    return f[name]


def _column_of(parts: list[Any]) -> Column:
    if isinstance(parts[0], Ragged):
        values, offsets, names = [], [], []
        for r in parts:
            v, o = r.values, r.offsets
            if isinstance(v, str) or isinstance(o, str):
                raise TypeError("Ragged(values, offsets) of dataset paths needs a list of files as the source")
            if isinstance(o, h5py.Dataset):
                o = _read_offsets(o)
            values.append(v if isinstance(v, _LazyDataset) else v)
            offsets.append(o)
            names.append(f"{v.file.filename}:{v.name}")
        return RaggedColumn(values, offsets, names)
    return FixedColumn(parts)
