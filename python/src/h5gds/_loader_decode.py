"""Compressed columns of the loader: a window's rows are read as the whole
stored chunks that hold them (addresses located once, _loader_layout), by
the engine straight into device memory, and decoded on the GPU into the
read buffer once every window of the group is in: one decode call per file
and group, so nvCOMP sees hundreds of chunks at a time rather than the few
of one window. The call is begun when the group's reads are in and runs in
the background (a native thread waits for the GPU; it calls no HDF5
function), so the caller's thread goes on with the batches of the groups
before; it is ended (its errors raised, the chunks the GPU refused read by
HDF5) when the group's first batch is wanted.

A chunk whose rows all belong to the window decodes in place; one cut by
the window's ends (a file's last chunk, or a cache fill of a part of a
window) decodes into scratch memory and its rows are copied. Where the
chunks cut each sample into tiles (chunks smaller than a sample in its
inner dimensions, as netCDF-4 files often have), every tile decodes into
scratch memory (about the group's decoded bytes), the tiles of one
position side by side, and each position's boxes are copied into the rows
with one strided copy per window piece and tile position. Where the GPU
cannot decode (host batches, a filter without a GPU decoder, no nvCOMP),
and for windows holding chunks never written, HDF5 reads the rows with its
own filters (h5py; the fill value) and they are copied in."""
from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import h5py
import numpy as np
from h5py._objects import phil

from ._lib import hdf5_error_text, native
from ._loader_layout import FixedColumn, TileBoxes

_P64 = ctypes.POINTER(ctypes.c_uint64)
_P32 = ctypes.POINTER(ctypes.c_uint32)
_MIB = 1 << 20


@dataclass
class FilePiece:
    """Local rows [lo, hi) of file `fi` of a compressed column, going to
    buffer byte `dst` (rows packed in order), with their chunks' stored
    bytes at `staged` offsets of the load's staging memory."""
    fi: int
    lo: int
    hi: int
    dst: int
    chunks: np.ndarray               # chunk rows of the file
    staged: np.ndarray               # byte offset of each (chunk row, tile)'s stored bytes in the staging memory


@dataclass
class CompressedLoad:
    """One window's reads of one compressed column."""
    column: int
    pieces: list[FilePiece] = field(default_factory=list)
    staging: Any = None              # device memory holding the stored chunks (None: decoded by HDF5)
    staging_addr: int = 0


@dataclass
class DecodeJob:
    """One decode call begun (a native job of gds_filtered_decode_chunks_begin),
    the file's pieces it decodes, and what follows it once done (the cut
    chunks' or tiles' copies into the rows). `ds` keeps the dataset's HDF5
    id open until the end, which reads the refused chunks through it."""
    col: FixedColumn
    fi: int
    ds: h5py.Dataset
    n: int
    job: int
    pieces: list[FilePiece]
    after: Callable[[], None]


@dataclass
class PendingGroup:
    """A group whose decode is begun (Decoder.begin_group): its jobs end in
    finish_group (or abandon), each once."""
    reader: Any
    buffer: Any
    stream: Any
    used: list[Any]                  # device memory the decode uses, given back at its end
    jobs: list[DecodeJob] = field(default_factory=list)
    jobs_open: list[DecodeJob] = field(default_factory=list)  # begun, not yet ended
    ended: bool = False              # finish_group or abandon ran


# Device memory a failed decode may still be using (a decoder that never
# ended): kept for the life of the process, never handed back to the pool.
_RETIRED: list[Any] = []


class Decoder:
    """The loader's decoding of compressed columns: HDF5 handles of their
    files (read-only, opened once) for the pipeline and for HDF5's own reads,
    and the device memory of stored chunks and cut chunks, kept and reused
    (memory new from the array library's pool may still be in use by work
    queued on the caller's stream, which the engine's writes would not wait
    for: it is taken once, after that stream is drained)."""

    def __init__(self, loader: Any):
        self.ld = loader
        self._files: dict[str, h5py.File] = {}
        self._free: list[Any] = []       # device buffers not in use
        self.gpu_decoded = 0             # chunks decoded on the GPU
        self.hdf5_decoded_rows = 0       # rows read through HDF5's filters
        self.hdf5_chunks = 0             # chunks the GPU refused that HDF5's filters read in its place
        self.decode_seconds = 0.0        # the caller's time in begin_group and finish_group
        self._open: list[PendingGroup] = []  # groups whose decode is begun and not yet ended

    def _take(self, reader: Any, nbytes: int) -> Any:
        fits = [k for k, m in enumerate(self._free) if int(m.shape[0]) >= nbytes]
        if fits:  # by position: list.remove would compare arrays element by element
            return self._free.pop(min(fits, key=lambda k: int(self._free[k].shape[0])))
        # sizes in classes (1 MiB, then 4/4, 5/4, 6/4, 7/4 of a power of two):
        # the next windows' stored bytes differ a little, and buffers of a few
        # sizes are reused by any of them (INFLIGHT_BYTES of them in flight)
        mem = reader.gatherer.buffer(size_class(nbytes))
        self.ld._copier.current_stream().synchronize()
        return mem

    def _give(self, mems: list[Any]) -> None:
        self._free.extend(m for m in mems if m is not None)

    def dataset(self, col: FixedColumn, fi: int) -> h5py.Dataset:
        path = col.paths[fi]
        with phil:
            if path not in self._files:
                self._files[path] = h5py.File(path, "r")
            return self._files[path][col.layouts[fi].dataset]

    def close(self) -> None:
        while self._open:  # an iteration left open: its decodes end before their memory goes
            self.abandon(self._open[0])
        self._free = []
        for f in self._files.values():
            try:
                f.close()
            except Exception:
                pass
        self._files = {}

    # ---- reads ----------------------------------------------------------------

    def submit(self, reader: Any, col: FixedColumn, ci: int, a: int, b: int, dst0: int,
               tickets: list[tuple[int, str]]) -> CompressedLoad:
        """Global rows [a, b) of column `ci` to buffer byte `dst0`: the stored
        chunks holding them are read into fresh device memory (tickets
        appended), or nothing is read when HDF5 will decode them."""
        load = CompressedLoad(ci)
        total = 0
        while a < b:
            fi = int(np.searchsorted(col.starts, a, side="right") - 1)
            e = min(b, int(col.starts[fi + 1]))
            lo, hi = a - int(col.starts[fi]), e - int(col.starts[fi])
            lay = col.layouts[fi]
            chunks = np.arange(lo // lay.c0, -(-hi // lay.c0), dtype=np.int64) if lay.filtered else None
            if chunks is None or (lay.addr is not None and (lay.addr[chunks] < 0).any()):
                # HDF5 reads these rows: a file of the column that is not compressed, or one
                # whose chunks here were never written (they read as the fill value)
                load.pieces.append(FilePiece(fi, lo, hi, dst0, np.zeros(0, np.int64), np.zeros(0, np.int64)))
                dst0 += (hi - lo) * col.row_bytes
                a = e
                continue
            assert lay.stored is not None
            sizes = lay.stored[chunks].reshape(-1)  # each chunk row's tiles in turn
            staged = total + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            total += int(sizes.sum())
            load.pieces.append(FilePiece(fi, lo, hi, dst0, chunks, staged))
            dst0 += (hi - lo) * col.row_bytes
            a = e
        if self.ld.module == "numpy" or total == 0:
            return load
        load.staging = self._take(reader, total)
        load.staging_addr = reader.gatherer.address(load.staging)
        for p in load.pieces:
            lay = col.layouts[p.fi]
            if not len(p.chunks):
                continue
            assert lay.addr is not None and lay.stored is not None
            off = np.ascontiguousarray(lay.addr[p.chunks].reshape(-1), np.uint64)
            size = np.ascontiguousarray(lay.stored[p.chunks].reshape(-1), np.uint64)
            mem = np.ascontiguousarray(p.staged, np.uint64) + np.uint64(load.staging_addr)
            path = col.paths[p.fi]
            tickets.append((self.ld._files[path].submit(off, size, mem, load.staging_addr), path))
        return load

    # ---- decoding -------------------------------------------------------------

    def begin_group(self, reader: Any, buffer: Any, loads: list[CompressedLoad], stream: Any) -> PendingGroup:
        """Begins the decode of one group's loads into `buffer` (the group's
        read buffer, or the cache): each file's GPU decode runs in the
        background (the caller's thread goes on), the rows HDF5 reads are
        read now. Nothing may use the rows before finish_group."""
        t0 = time.perf_counter()
        by_file: dict[tuple[int, int], list[tuple[CompressedLoad, FilePiece]]] = {}
        for load in loads:
            for p in load.pieces:
                by_file.setdefault((load.column, p.fi), []).append((load, p))
        pg = PendingGroup(reader, buffer, stream, [load.staging for load in loads])
        self._open.append(pg)
        try:
            for (ci, fi), items in by_file.items():
                col = reader.columns[ci]
                # pieces whose stored chunks were read decode on the GPU; the others (an
                # uncompressed file, chunks never written, host batches) are HDF5's
                on_gpu = [k for k, (load, p) in enumerate(items) if len(p.chunks) and load.staging is not None] \
                    if self.ld.module != "numpy" and col.layouts[fi].filtered else []
                if on_gpu and not self._gpu(reader, col, fi, buffer, [items[k] for k in on_gpu], stream, pg):
                    on_gpu = []
                taken = set(on_gpu)
                for k, (_, p) in enumerate(items):
                    if k not in taken:
                        self._hdf5_rows(reader, col, fi, p, buffer, stream)
        except BaseException:
            self.abandon(pg)
            raise
        finally:
            self.decode_seconds += time.perf_counter() - t0
        return pg

    def finish_group(self, pg: PendingGroup) -> None:
        """Ends a group's decode: waits for its GPU work, reads what the GPU
        did not take through HDF5, copies the cut chunks' and tiles' rows;
        returns with the rows in place (the stream synchronised)."""
        if pg.ended:
            raise RuntimeError("internal error: a group's decode finished after it ended")
        t0 = time.perf_counter()
        self._forget(pg)
        try:
            taken = self._end_all(pg)
            for job, ok in zip(pg.jobs, taken):
                if ok:
                    job.after()
                else:
                    for p in job.pieces:
                        self._hdf5_rows(pg.reader, job.col, job.fi, p, pg.buffer, pg.stream)
            if self.ld.module != "numpy":
                pg.stream.synchronize()
        except BaseException:
            _RETIRED.extend(m for m in pg.used if m is not None)  # a decode may still be writing them
            raise
        finally:
            self.decode_seconds += time.perf_counter() - t0
        self._give(pg.used)

    def abandon(self, pg: PendingGroup) -> None:
        """Ends a group's decode whose rows nobody will read (an error, an
        epoch left early, the loader closed): its memory comes back once the
        GPU is done with it. Again on an ended group: nothing."""
        if pg.ended:
            return
        self._forget(pg)
        try:
            self._end_all(pg)
            if self.ld.module != "numpy":
                pg.stream.synchronize()
        except BaseException:
            _RETIRED.extend(m for m in pg.used if m is not None)
            return
        self._give(pg.used)

    def _forget(self, pg: PendingGroup) -> None:
        pg.ended = True
        self._open = [g for g in self._open if g is not pg]

    def _end_all(self, pg: PendingGroup) -> list[bool]:
        """Ends every job of the group (each once, even after one fails):
        per job whether the GPU took its chunks; the first failure raised."""
        taken: list[bool] = []
        error: BaseException | None = None
        while pg.jobs_open:
            job = pg.jobs_open.pop(0)  # off the list first: a job is freed by its end, never ended twice
            try:
                taken.append(self._end(job))
            except BaseException as exc:
                error = error or exc
                taken.append(False)
        if error is not None:
            raise error
        return taken

    def _gpu(self, reader: Any, col: FixedColumn, fi: int, buffer: Any,
             items: list[tuple[CompressedLoad, FilePiece]], stream: Any, pg: PendingGroup) -> bool:
        """Begins one decode call for the chunks of file `fi` in this group
        (its job joins pg's); False when the GPU cannot decode them
        (nothing written then)."""
        lay = col.layouts[fi]
        assert lay.stored is not None and lay.mask is not None
        if lay.tiles is not None:
            return self._gpu_tiles(reader, col, fi, buffer, items, stream, pg)
        chunk_bytes = lay.c0 * col.row_bytes
        buf_addr = reader.gatherer.address(buffer)
        src, size, mask, dst, first = [], [], [], [], []
        cut: list[tuple[int, int, int, int]] = []  # (scratch index, first row, rows, buffer byte) of cut chunks
        for load, p in items:
            first_row = p.chunks * lay.c0                       # local row of each chunk's first row
            whole = (first_row >= p.lo) & (first_row + lay.c0 <= p.hi)
            d = p.dst + (first_row - p.lo) * col.row_bytes
            first.append(first_row)
            src.append(load.staging_addr + p.staged)
            size.append(lay.stored[p.chunks, 0])
            mask.append(lay.mask[p.chunks, 0])
            for k in np.flatnonzero(~whole).tolist():
                r0 = max(int(first_row[k]), p.lo)
                r1 = min(int(first_row[k]) + lay.c0, p.hi)
                cut.append((len(cut), r0 - int(first_row[k]), r1 - r0, p.dst + (r0 - p.lo) * col.row_bytes))
            dst.append(np.where(whole, buf_addr + d, -1))
        src_a, size_a = np.concatenate(src).astype(np.uint64), np.concatenate(size).astype(np.uint64)
        mask_a, dst_a = np.concatenate(mask).astype(np.uint32), np.concatenate(dst).astype(np.int64)
        scratch = None
        if cut:
            scratch = self._take(reader, len(cut) * chunk_bytes)
            pg.used.append(scratch)
            scratch_addr = reader.gatherer.address(scratch)
            holes = np.flatnonzero(dst_a < 0)
            dst_a[holes] = scratch_addr + np.arange(len(holes), dtype=np.int64) * chunk_bytes
        lo = np.zeros((len(src_a), 1 + len(col.row_shape)), np.uint64)  # each chunk's first element
        lo[:, 0] = np.concatenate(first)

        def copy_cut() -> None:
            copy = self._strided_copy(stream)
            for k, row0, nrows, at in cut:
                s0, n = k * chunk_bytes + row0 * col.row_bytes, nrows * col.row_bytes
                copy(buffer, slice(at, at + n), scratch, slice(s0, s0 + n))
        return self._begin(col, fi, src_a, size_a, mask_a, dst_a.astype(np.uint64), lo, stream,
                           [p for _, p in items], copy_cut, pg)

    def _gpu_tiles(self, reader: Any, col: FixedColumn, fi: int, buffer: Any,
                   items: list[tuple[CompressedLoad, FilePiece]], stream: Any, pg: PendingGroup) -> bool:
        """The decode of chunks that cut samples into tiles: every tile into
        scratch memory, the tiles of one position side by side (`m` chunk
        rows of a piece, tile t at chunk index base + t * m + i), then one
        strided copy per piece and tile position into the rows."""
        lay = col.layouts[fi]
        tiles = lay.tiles
        assert tiles is not None and lay.stored is not None and lay.mask is not None
        ntiles = len(tiles.origin)
        chunk_bytes = lay.c0 * int(np.prod(tiles.chunk, dtype=np.int64)) * col.dtype.itemsize
        total = sum(len(p.chunks) for _, p in items) * ntiles
        scratch = self._take(reader, total * chunk_bytes)
        pg.used.append(scratch)
        scratch_addr = reader.gatherer.address(scratch)
        src, size, mask, dst, lo = [], [], [], [], []
        origin = np.array(tiles.origin, np.int64).reshape(ntiles, -1)
        base = 0
        for load, p in items:
            m = len(p.chunks)
            i, t = np.divmod(np.arange(m * ntiles, dtype=np.int64), ntiles)  # staging order: each row's tiles
            src.append(load.staging_addr + p.staged)
            size.append(lay.stored[p.chunks].reshape(-1))
            mask.append(lay.mask[p.chunks].reshape(-1))
            dst.append(scratch_addr + (base + t * m + i) * chunk_bytes)
            lo.append(np.column_stack([p.chunks[i] * lay.c0, origin[t]]))  # each tile's first element
            base += m * ntiles

        def place() -> None:
            at, copy = 0, self._strided_copy(stream)
            for _, p in items:
                m = len(p.chunks)
                place_tiles(scratch, at * chunk_bytes, buffer, p.dst, tiles, col.dtype.itemsize, lay.c0, m,
                            int(p.chunks[0]) * lay.c0, p.lo, p.hi, copy)
                at += m * ntiles
        return self._begin(col, fi, np.concatenate(src).astype(np.uint64), np.concatenate(size).astype(np.uint64),
                           np.concatenate(mask).astype(np.uint32), np.concatenate(dst).astype(np.uint64),
                           np.concatenate(lo).astype(np.uint64), stream, [p for _, p in items], place, pg)

    def _begin(self, col: FixedColumn, fi: int, src: np.ndarray, size: np.ndarray, mask: np.ndarray,
               dst: np.ndarray, lo: np.ndarray, stream: Any, pieces: list[FilePiece],
               after: Callable[[], None], pg: PendingGroup) -> bool:
        """Begins one GPU decode call for chunks of file `fi` (lo: each
        chunk's first element, so that HDF5's filters read a chunk the GPU
        refuses in its place), its job in pg's at once; False when the GPU
        cannot decode them (nothing written then)."""
        ds = self.dataset(col, fi)
        lo = np.ascontiguousarray(lo, np.uint64)
        job = ctypes.c_uint64(0)
        with phil:
            rc = native.h5gds_py_decode_chunks_begin(ds.id.id, len(src), src.ctypes.data_as(_P64),
                                                     size.ctypes.data_as(_P64), mask.ctypes.data_as(_P32),
                                                     dst.ctypes.data_as(_P64), lo.ctypes.data_as(_P64), lo.shape[1],
                                                     _stream_handle(stream), ctypes.byref(job))
            if rc < 0:
                raise OSError(f"{col.paths[fi]}:{col.layouts[fi].dataset}: cannot decode the loader's chunks "
                              f"({hdf5_error_text()})")
            if rc == 1:
                begun = DecodeJob(col, fi, ds, len(src), job.value, pieces, after)
                pg.jobs.append(begun)
                pg.jobs_open.append(begun)
        return rc == 1

    def _end(self, job: DecodeJob) -> bool:
        """Waits for a decode call begun; False when the GPU did not take
        its chunks after all (nothing usable written: HDF5 reads them)."""
        taken = ctypes.c_size_t(0)
        native.h5gds_py_decode_chunks_wait(job.job)  # without h5py's lock: other threads' HDF5 calls go on
        with phil:
            rc = native.h5gds_py_decode_chunks_end(job.job, ctypes.byref(taken))
            if rc < 0:
                raise OSError(f"{job.col.paths[job.fi]}:{job.col.layouts[job.fi].dataset}: cannot decode the "
                              f"loader's chunks ({hdf5_error_text()})")
        if rc == 0:
            return False
        self.gpu_decoded += job.n - taken.value
        self.hdf5_chunks += taken.value
        return True

    def _strided_copy(self, stream: Any) -> Any:
        """copy(dst, dst_index, src, src_index) on the caller's stream: a
        cut chunk's rows, a tile position's boxes."""
        if self.ld.module == "cupy":
            def copy_cupy(dst: Any, di: Any, src: Any, si: Any) -> None:
                with stream:
                    dst[di] = src[si]
            return copy_cupy

        import torch

        def copy_torch(dst: Any, di: Any, src: Any, si: Any) -> None:
            with torch.cuda.stream(stream):
                dst[di].copy_(src[si], non_blocking=True)
        return copy_torch

    def _hdf5_rows(self, reader: Any, col: FixedColumn, fi: int, p: FilePiece, buffer: Any, stream: Any) -> None:
        """Local rows [p.lo, p.hi) read by HDF5 (its filters, on the CPU) into the buffer."""
        ds = self.dataset(col, fi)
        with phil:
            rows = np.ascontiguousarray(ds[p.lo:p.hi])
        self.hdf5_decoded_rows += p.hi - p.lo
        raw = rows.reshape(-1).view(np.uint8)
        if self.ld.module == "numpy":
            buffer[p.dst:p.dst + raw.nbytes] = raw
        elif self.ld.module == "cupy":
            buffer[p.dst:p.dst + raw.nbytes].set(raw, stream=stream)
        else:
            import torch
            with torch.cuda.stream(stream):
                buffer[p.dst:p.dst + raw.nbytes].copy_(torch.from_numpy(raw), non_blocking=False)


def size_class(nbytes: int) -> int:
    """The least of 1 MiB and (4, 5, 6 or 7) x 2**k bytes that holds nbytes."""
    if nbytes <= _MIB:
        return _MIB
    step = 1 << ((int(nbytes) - 1).bit_length() - 3)  # an eighth of the next power of two
    return -(-int(nbytes) // step) * step


def place_tiles(scratch: Any, base: int, buffer: Any, dst: int, tiles: TileBoxes, itemsize: int, c0: int, m: int,
                row0: int, lo: int, hi: int, copy: Any) -> None:
    """Rows [lo, hi) (the file's local rows) from `m` chunk rows starting
    at local row `row0`, decoded into `scratch` (flat bytes) from byte
    `base`, tile-major (tile t of chunk row i at chunk index t * m + i),
    copied into `buffer` (flat bytes) from byte `dst`, rows packed: one
    copy(dst_array, dst_index, src_array, src_index) per tile position.
    Any array library whose 1-D byte arrays slice and reshape (NumPy, CuPy,
    torch) will do."""
    chunk_shape = tiles.chunk[:-1] + (tiles.chunk[-1] * itemsize,)   # bytes along the last dimension
    row_shape = tiles.inner[:-1] + (tiles.inner[-1] * itemsize,)
    chunk_bytes = c0 * int(np.prod(chunk_shape, dtype=np.int64))
    n = hi - lo
    out = buffer[dst:dst + n * int(np.prod(row_shape, dtype=np.int64))].reshape((n,) + row_shape)
    rows_src = slice(lo - row0, hi - row0)
    for t, (origin, extent) in enumerate(zip(tiles.origin, tiles.extent)):
        at = base + t * m * chunk_bytes
        src = scratch[at:at + m * chunk_bytes].reshape((m * c0,) + chunk_shape)
        si = (rows_src,) + tuple(slice(0, e) for e in extent[:-1]) + (slice(0, extent[-1] * itemsize),)
        di = (slice(None),) + tuple(slice(o, o + e) for o, e in zip(origin[:-1], extent[:-1])) + \
            (slice(origin[-1] * itemsize, (origin[-1] + extent[-1]) * itemsize),)
        copy(out, di, src, si)


def _stream_handle(stream: Any) -> int:
    if stream is None:
        return 0
    if hasattr(stream, "ptr"):         # cupy
        return int(stream.ptr)
    return int(stream.cuda_stream)     # torch
