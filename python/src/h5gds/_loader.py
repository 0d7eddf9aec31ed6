"""A GPU sample loader over HDF5 datasets, without HDF5 per sample.

At construction the loader asks HDF5 once where each dataset's bytes are
(_loader_layout), and opens each file with the driver's I/O engine
(_loader_io). Each epoch has an order (_loader_order):

* ``exact``: a uniform permutation. A batch is, per file, ONE engine
  request: one segment per sample, each pointing straight at the sample's
  place in the batch buffer (_loader_exact); device batches are copied to
  the GPU on a copy stream of the loader's (_loader_copy), or written by
  the engine straight into device memory (``staging="device"``).
* ``windowed``: the file is read in windows of several MiB (disk sequential
  rate even for 4 KiB samples) into a shuffle buffer of many windows, and
  batches are gathered from it (_loader_windowed, _loader_gather).

When the dataset fits in memory (the page cache, or a cache the loader owns)
the first epoch is windowed and the later ones exact, served from memory.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Generator, Iterator, Sequence

import numpy as np

from . import _arrays
from . import _loader_io as io
from . import _loader_order as orders
from ._loader_copy import Copier, Slot
from ._loader_decode import Decoder
from ._loader_exact import ExactBatches
from ._loader_gather import Gatherer
from ._loader_layout import Column, FixedColumn, Ragged, columns_from
from ._loader_windowed import Cache, WindowedReader, fill_cache, iterate

__all__ = ["Loader", "TorchLoader", "Ragged"]

ORDERS = ("auto", "windowed", "exact")
CACHES = ("auto", "page", "loader", "off")

# What order="auto" gives an epoch that is not served from memory: the
# windowed order (see the loader's docstring for the measurement behind it).
AUTO_ORDER = "windowed"
# Defaults of the windowed order: windows of this size (a divisor of the
# engine's 32 MiB host blocks), a shuffle buffer of this many windows.
DEFAULT_WINDOW = 8 << 20
DEFAULT_BUFFER_WINDOWS = 64
# Bytes of window reads in flight at once.
INFLIGHT_BYTES = 128 << 20
ZSTD_FILTER = 32015  # hdf5plugin's Zstd


def _free_refs() -> int:
    # What sys.getrefcount says of an array only a list refers to, measured
    # the way Loader._host_array asks (the count's own reference varies
    # between Python versions).
    probe = [np.empty(0)]
    return sys.getrefcount(probe[0])


_FREE_REFS = _free_refs()


def _size_arg(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        from ._sizes import parse_size
        n = parse_size(value, what)
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        n = int(value)
    else:
        raise TypeError(f"{what} must be a number of bytes or a size such as '8MiB', not {value!r}")
    if n < 1:
        raise ValueError(f"{what} must be at least 1 byte, not {n}")
    return n


def _memory_total() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError):
        return 0


def _align(n: int) -> int:
    return -(-int(n) // 4096) * 4096


class _OpenEpoch:
    """The epoch a loader is iterating, and what ended it early (if anything did)."""

    def __init__(self, epoch: Generator[Any, None, None]):
        self.epoch = epoch
        self.ended_by = ""


def _env_count(name: str, most: int, what: str) -> int:
    """The count an environment setting gives (1 to `most`), 0 where it is
    unset; ValueError naming it otherwise."""
    env = os.environ.get(name, "")
    if not env:
        return 0
    try:
        n = int(env)
    except ValueError:
        n = 0
    if not 1 <= n <= most:
        raise ValueError(f"{name}={env!r}: a number of {what} from 1 to {most}")
    return n


def _decode_parts(columns: list[Column]) -> int:
    """Decode calls a group's compressed windows are cut in, each begun as
    soon as its windows are read, so that the group's reads go on while its
    first windows decode and only the last part's decode follows its last
    byte. 4 where every compressed file is plain zstd, else 1; set by
    H5GDS_LOADER_DECODE_PARTS (1-64). Measured on an H200 (2026-12-02,
    64-window groups of 2 MiB chunks): zstd parts of 128 MiB decode block
    by block, in about half the time of the whole group's call, and the
    epochs were faster cold, warm and under a training step; a Deflate
    call costs nearly as much whatever its width, so parts multiplied it
    (warm epochs 36-46% slower)."""
    n = _env_count("H5GDS_LOADER_DECODE_PARTS", 64, "decode calls a group")
    if n:
        return n
    pipelines = [lay.filter_ids for c in columns if isinstance(c, FixedColumn) for lay in c.layouts if lay.filtered]
    return 4 if pipelines and all(ZSTD_FILTER in ids for ids in pipelines) else 1


class Loader(ExactBatches):
    """Batches of samples (rows along the first axis) from HDF5 datasets,
    read onto the GPU (or into host arrays).

    ``source``: an ``h5py.Dataset``; a :class:`Ragged` (variable-length
    samples: values and offsets datasets); a tuple or list of them of equal
    length (each batch is then a tuple, e.g. data, labels); or a list of
    file paths holding the same ``dataset`` path (one logical dataset across
    files; a list of paths in ``dataset`` gives several columns). A Ragged
    column comes in each batch as ``(values, offsets)``.

    Each epoch's order is deterministic from ``(seed, epoch)``
    (``set_epoch``), ``rank`` and ``world_size``, and every sample is read
    exactly once per epoch across ranks (no padding: ranks differ by at most
    one sample); ``drop_last`` drops each rank's last partial batch.

    ``order``:

    * ``"exact"``: a uniform permutation of all samples, the same on every
      rank; rank r takes every ``world_size``-th sample from r (as
      ``torch.utils.data.DistributedSampler``). Each batch reads its samples
      one by one: fast from memory, at the disk's random-read rate cold.
    * ``"windowed"``: samples are read in windows of ``window`` bytes
      (several MiB, on the engine's block boundaries: the disk's sequential
      rate at any sample size). The windows are dealt into groups; the ranks take
      consecutive shares of them; each rank reads its share in groups of
      about ``buffer`` bytes (its shuffle buffer, default 64 windows: one
      random window from each of 64 runs of neighbouring windows, so a
      group spans all the files) and yields each group's samples in a
      uniform random order. A batch is thus a uniform sample of one group
      (two at a group's end), not of the dataset; when a rank's share fits
      in one buffer its order is a uniform permutation of its share.
    * ``"auto"`` (the default): exact for epochs served from memory (see
      ``cache``), windowed otherwise, but only with a shuffle buffer of at
      least 64 windows (or one holding a rank's whole share), the depth
      whose randomness was measured harmless
      (bench/results/2026-11-25-cpu-loader-epoch: on a dataset stored
      sorted by label, 10 classes, batches had the exact shuffle's label
      mix within 0.007 and an MLP reached its accuracy within the
      run-to-run noise; 16 windows were measurably worse); exact with a
      shallower buffer. Ask for ``order="exact"`` where batches must be
      uniform samples of the whole dataset (e.g. a file sorted by one of
      many classes: a group holds at most as many runs as windows).

    Compressed (filtered) datasets are read as whole stored chunks per
    window (chunks of whole samples, or tiles of them as in netCDF-4 files)
    and decoded on the GPU once a group of windows is in (_loader_decode;
    HDF5's filters for host batches). Their
    epochs are windowed: ``order="exact"`` needs ``cache="loader"`` (it
    would decode a whole chunk per sample).

    ``cache``: ``"page"``: epochs after the first are exact and served from
    the page cache (the first, windowed, fills it; before an exact epoch the
    loader checks a few samples and reads the files through at the
    sequential rate if they are not cached); ``"loader"``: the loader keeps
    every sample in memory of its own (device memory for device batches:
    exact epochs are then gathers on the GPU), filled by the reads of the
    first epoch (or read through at the first exact epoch); ``"off"``: no
    epoch relies on memory; ``"auto"`` (the default): ``"page"`` when all
    columns together take at most half the machine's memory, else
    ``"off"`` (ranks must agree: give it explicitly on machines that
    differ).

    ``window``, ``buffer``: bytes (or sizes such as "8MiB") of the windowed
    order's windows and shuffle buffer (defaults 8 MiB and 64 windows,
    at least two batches, at most a sixteenth of the memory it lives in).
    A windowed epoch holds two or three buffers (device memory for device
    batches) and, with pinned staging, 128 MiB of pinned window slots (at
    least 4 windows); 128 MiB of reads are in flight (compressed columns:
    of stored chunks; H5GDS_LOADER_INFLIGHT=N: N windows).

    ``like``: "cupy", "torch" or "numpy" (default: as :func:`h5gds.read`).
    ``staging``: "pinned" (engine reads into pinned host memory, copied to
    the device on the loader's own copy stream; the current stream waits
    for the copy: work queued on that stream afterwards sees the batch;
    another stream must wait for it, as with DataLoader's
    ``.cuda(non_blocking=True)``) or "device" (the engine writes device
    memory itself). Windowed batches are gathered on the current stream.
    ``prefetch``: exact batches in flight. ``config``: driver
    configuration keys for the engine ("threads=16,...").
    """

    def __init__(self, source: Any, batch_size: int, shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 prefetch: int = 2, rank: int = 0, world_size: int = 1, *,
                 dataset: str | Ragged | Sequence[str | Ragged] | None = None,
                 like: Any = None, staging: str = "pinned", config: str = "", order: str = "auto",
                 window: int | str | None = None, buffer: int | str | None = None, cache: str = "auto"):
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in range for world_size {world_size}")
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, not {prefetch}")
        if staging not in ("pinned", "device"):
            raise ValueError(f"staging must be 'pinned' or 'device', not {staging!r}")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(map(repr, ORDERS))}, not {order!r}")
        if cache not in CACHES:
            raise ValueError(f"cache must be one of {', '.join(map(repr, CACHES))}, not {cache!r}")
        if seed < 0:
            raise ValueError(f"seed must be a non-negative integer, not {seed}")
        window_arg = _size_arg(window, "window")
        buffer_arg = _size_arg(buffer, "buffer")
        self.batch_size, self.shuffle, self.seed = int(batch_size), bool(shuffle), int(seed)
        self.drop_last, self.prefetch = bool(drop_last), int(prefetch)
        self.rank, self.world_size = int(rank), int(world_size)
        self.module: str = _arrays.resolve_module(like)
        if self.module != "numpy" and _arrays._try_import(self.module) is None:  # now, not at the first batch
            raise RuntimeError(f"{self.module} is not importable: pass like='numpy' (host batches), or install it")
        self.staging = staging
        self.order = order
        self.epoch = 0
        self._files: dict[str, io.EngineFile] = {}
        self._plan_cache: tuple[tuple[Any, ...], Any] | None = None
        self._copier = Copier(self.module)
        self._gatherer = Gatherer(self.module)
        self._recycle: dict[int, list[np.ndarray]] = {}
        self._staging: list[Slot] = []
        self._rolling: list[Any] = []
        self._cache: Cache | None = None
        self._closed = False
        self._open_epoch: _OpenEpoch | None = None  # the epoch being iterated (one at a time)
        self._decoder = Decoder(self)
        self._tuple, columns = columns_from(source, dataset)
        lengths = {c.rows for c in columns}
        if len(lengths) != 1:
            raise ValueError(f"the datasets have different lengths {sorted(lengths)}: they must have one per sample")
        self.columns: list[Column] = columns
        self.num_samples = columns[0].rows
        if config:  # a wrong key or value: the message h5py.File(driver="gds", config=...) gives
            from h5py import h5p

            from ._io import _set_fapl_gds
            _set_fapl_gds(h5p.create(h5p.FILE_ACCESS), str(config))
        if staging == "pinned" or self.module == "numpy":  # host requests (device ones keep autotuning)
            config = io.loader_config(config)
        self._config = config
        for c in columns:
            for path in c.paths:
                if path not in self._files:
                    self._files[path] = io.EngineFile(path, config)
        self.dataset_bytes = sum(c.total_bytes for c in columns)
        self.window_bytes = window_arg or self._auto_window(config)
        self._windows = self._make_windows()
        self.buffer_bytes = buffer_arg or self._auto_buffer()
        if cache == "auto":
            total = _memory_total()
            cache = "page" if total and self.dataset_bytes <= total // 2 else "off"
        self.cache = cache
        # Compressed columns are read in whole chunks: an epoch that reads
        # samples one by one would decode a chunk per sample.
        self.compressed = any(c.compressed for c in columns)
        if self.compressed and order == "exact" and cache != "loader":
            raise ValueError("order='exact' reads samples one by one, which would decode a whole chunk per sample "
                             "of a compressed dataset: use order='windowed' (or 'auto', the default), or cache='loader' "
                             "(the first epoch decodes every sample into memory, later exact epochs gather from it)")
        self._inflight_loads = self._auto_inflight()
        self._decode_parts = _decode_parts(self.columns)

    # ---- settings ---------------------------------------------------------

    @staticmethod
    def _auto_window(config: str) -> int:
        """8 MiB, or the engine's block when the configuration sets a smaller one."""
        block = None
        for text in (os.environ.get("H5GDS_CONFIG", ""), config):
            v = io.config_value(text, "io_block_size")
            if v and v != "auto":
                try:
                    from ._sizes import parse_size
                    block = parse_size(v, "io_block_size")
                except ValueError:
                    pass
        return min(DEFAULT_WINDOW, block) if block else DEFAULT_WINDOW

    def _main_column(self) -> Column:
        """The column whose bytes dominate: windows follow its layout."""
        return max(self.columns, key=lambda c: c.total_bytes)

    def _make_windows(self) -> orders.Windows:
        main = self._main_column()
        return orders.windows_from_boundaries([main.window_bounds(fi, self.window_bytes)
                                               for fi in range(len(main.paths))])

    def _range_bytes(self, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        return np.asarray(sum(c.range_nbytes(start, stop) for c in self.columns), np.int64)

    def _max_load_bytes(self) -> int:
        """Staging bytes of the largest window: its columns read through the
        staging slots, aligned (compressed columns' chunks go to device
        memory)."""
        staged = [c for c in self.columns if not c.compressed]
        if not len(self._windows) or not staged:
            return 1
        return self._largest_window(staged, stored=False)

    def _largest_window(self, columns: list[Column], stored: bool) -> int:
        """Bytes of the largest window over `columns`, each column aligned
        to 4 KiB; with `stored`, a compressed column counts its stored chunks."""
        w = self._windows
        per_column = [c.range_stored_nbytes(w.start, w.stop) if stored and isinstance(c, FixedColumn) and c.compressed
                      else c.range_nbytes(w.start, w.stop) for c in columns]
        return int(np.max(sum((n + 4095) // 4096 * 4096 for n in per_column)))

    def _slot_count(self) -> int:
        """Pinned staging slots (and host scratch buffers): one per window in
        flight, within INFLIGHT_BYTES (at least 4); loads wait for a free one."""
        return min(self._inflight_loads, max(4, INFLIGHT_BYTES // max(1, self._max_load_bytes())))

    def _auto_inflight(self) -> int:
        """Windows read at once: INFLIGHT_BYTES of what the engine reads for
        the largest window (compressed columns: their stored chunks), 4 to 64
        windows; H5GDS_LOADER_INFLIGHT=N sets it. Counted in stored bytes,
        the reads in flight while a group decodes keep the disk busy for as
        long as a read of decoded bytes would."""
        n = _env_count("H5GDS_LOADER_INFLIGHT", 1024, "windows")
        if n:
            return n
        if not len(self._windows):
            return 4
        return max(4, min(64, INFLIGHT_BYTES // max(1, self._largest_window(self.columns, stored=True))))

    def _auto_buffer(self) -> int:
        batch_bytes = self.batch_size * max(1, self.dataset_bytes // max(1, self.num_samples))
        w = self._windows
        mean = float(self._range_bytes(w.start, w.stop).sum()) / len(w) if len(w) else float(self.window_bytes)
        want = max(int(np.ceil(DEFAULT_BUFFER_WINDOWS * mean)), 2 * batch_bytes)
        memory = _memory_total()
        if self.module != "numpy":
            try:
                if self.module == "cupy":
                    import cupy
                    memory = int(cupy.cuda.runtime.memGetInfo()[1])
                else:
                    import torch
                    memory = int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
            except Exception:
                pass
        if memory:
            want = min(want, max(memory // 16, 2 * batch_bytes))
        return int(max(want, self.window_bytes))

    # ---- orders -------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Selects the order of the next iteration (as
        DistributedSampler.set_epoch): same seed and epoch, same order."""
        self.epoch = int(epoch)

    def epoch_order(self, epoch: int | None = None) -> str:
        """The order ("exact" or "windowed") of `epoch` (default: the current one)."""
        e = self.epoch if epoch is None else int(epoch)
        if self.compressed:  # exact only from the loader's own cache of decoded samples
            if self.cache == "loader" and (self.order == "exact" or (self.order == "auto" and e >= 1)):
                return "exact"
            return "windowed"
        if self.order != "auto":
            return self.order
        if self.cache in ("page", "loader") and e >= 1:
            return "exact"
        return AUTO_ORDER if self._buffer_is_deep() else "exact"

    def windows_per_buffer(self) -> float:
        """Windows the shuffle buffer holds (the windowed order's depth)."""
        w = self._windows
        if not len(w):
            return 0.0
        mean = float(self._range_bytes(w.start, w.stop).sum()) / len(w)
        return self.buffer_bytes / max(1.0, mean)

    def _buffer_is_deep(self) -> bool:
        """Whether the windowed order's randomness was measured harmless
        for this buffer: at least DEFAULT_BUFFER_WINDOWS windows per group,
        or a rank's whole share in one group (then its order is a uniform
        permutation of its share)."""
        share = self.dataset_bytes / self.world_size
        return self.windows_per_buffer() >= DEFAULT_BUFFER_WINDOWS * 0.95 or share <= self.buffer_bytes

    def indices(self) -> np.ndarray:
        """The global sample indices this rank reads this epoch, in order
        (drop_last applied)."""
        kind, plan = self._plan()
        order = plan if kind == "exact" else plan.order
        return self._trim(order).copy()

    def _trim(self, order: np.ndarray) -> np.ndarray:
        return order[: len(order) // self.batch_size * self.batch_size] if self.drop_last else order

    def _plan(self) -> tuple[str, Any]:
        # Drawn once per epoch: a permutation of millions of samples takes
        # milliseconds, which an iteration restarted in the same epoch
        # should not pay again.
        kind = self.epoch_order()
        key = (kind, self.seed, self.epoch, self.shuffle, self.rank, self.world_size, self.num_samples,
               self.buffer_bytes)
        if self._plan_cache is not None and self._plan_cache[0] == key:
            return kind, self._plan_cache[1]
        if kind == "exact":
            plan: Any = orders.exact_order(self.num_samples, self.seed, self.epoch, self.shuffle, self.rank,
                                           self.world_size)
            plan.flags.writeable = False
        else:
            plan = orders.windowed_plan(self._windows, self.num_samples, self.seed, self.epoch, self.shuffle,
                                        self.rank, self.world_size, self.buffer_bytes, self._range_bytes)
            for a in (plan.order, plan.group, plan.local):
                a.flags.writeable = False
        self._plan_cache = (key, plan)
        return kind, plan

    def __len__(self) -> int:
        m = int(orders.rank_counts(self.num_samples, self.world_size)[self.rank])
        return m // self.batch_size if self.drop_last else -(-m // self.batch_size)

    # ---- memory -------------------------------------------------------------

    def _staging_slots(self) -> list[Slot]:
        """Pinned slots for window reads (kept across epochs)."""
        if not self._staging:
            self._staging = [Slot(self._max_load_bytes(), self.module) for _ in range(self._slot_count())]
        slots, self._staging = self._staging, []
        return slots

    def _return_staging(self, slots: list[Slot]) -> None:
        self._staging = slots + self._staging

    def _rolling_buffers(self, count: int, nbytes: int) -> list[Any]:
        """`count` buffers of at least `nbytes` (kept across epochs)."""
        keep = [b for b in self._rolling if b.shape[0] >= nbytes]
        if len(keep) < count:
            self._rolling = []  # drop the old ones before allocating
            keep = [self._gatherer.buffer(nbytes) for _ in range(count)]
        self._rolling = keep
        return keep[:count]

    def _ensure_cache(self) -> Cache:
        if self._cache is None:
            self._cache = Cache(self.columns, self._gatherer)
        return self._cache

    def _new_array(self, column: int, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        if self.module == "numpy":
            return self._host_array(column, shape, dtype)
        return _arrays.empty(shape, dtype, self.module)  # type: ignore[arg-type]

    def _host_array(self, column: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An output array for host batches: one the caller has let go of
        (nothing but this list refers to it, so nobody can see it change),
        else a new one. Reusing them saves a 16 MiB allocation per batch and
        the page faults of filling it (the workers' copies into fresh memory
        cost as much as the copies themselves)."""
        pool = self._recycle.setdefault(column, [])
        for i in range(len(pool)):
            if sys.getrefcount(pool[i]) <= _FREE_REFS and pool[i].shape == shape and pool[i].dtype == dtype:
                out = pool.pop(i)
                pool.append(out)
                return out
        out = np.empty(shape, dtype)
        pool.append(out)
        if len(pool) > self.prefetch + 2:
            del pool[0]
        return out

    # ---- page cache ---------------------------------------------------------

    def _page_cached(self, probes: int = 64) -> bool:
        """Whether a few samples spread over the files (main column) are in
        the page cache (RWF_NOWAIT reads: nothing goes to the disk)."""
        flag = getattr(os, "RWF_NOWAIT", None)
        if flag is None or not self.num_samples:
            return True  # cannot tell: assume cached
        main = self._main_column()
        rows = np.unique(np.random.default_rng([self.seed, self.epoch, 3]).integers(0, self.num_samples, probes))
        fidx = np.searchsorted(main.starts, rows, side="right") - 1
        for fi in np.unique(fidx).tolist():
            sel = rows[fidx == fi] - main.starts[fi]
            nb = main.row_nbytes(sel + main.starts[fi])
            off, size, _ = main.segments(fi, sel, np.cumsum(nb) - nb)
            fd = os.open(main.paths[fi], os.O_RDONLY)
            try:
                for o, s in zip(off.tolist(), size.tolist()):
                    s = min(s, 1 << 20)
                    try:
                        n = os.preadv(fd, [bytearray(s)], o, flag)
                    except BlockingIOError:
                        return False
                    except OSError:
                        return True  # RWF_NOWAIT refused here: cannot tell
                    if n < s:
                        return False
            finally:
                os.close(fd)
        return True

    def warm_page_cache(self) -> None:
        """Reads every file of the loader through, window by window (disk
        sequential rate), so that later reads find them in the page cache."""
        w = self._windows
        nslots = self._slot_count()
        size = self._max_load_bytes()
        scratch = [np.empty(size, np.uint8) for _ in range(min(nslots, max(1, len(w))))]
        pending: list[tuple[list[tuple[int, str]], np.ndarray]] = []
        from ._loader_layout import range_reads
        try:
            for a, b in zip(w.start.tolist(), w.stop.tolist()):
                if len(pending) == len(scratch):
                    tickets, buf = pending.pop(0)
                    io.wait_all(tickets)
                    scratch.append(buf)
                buf = scratch.pop()
                base = int(buf.ctypes.data)
                by_path: dict[str, list[Any]] = {}
                dst = 0
                for c in self.columns:
                    if c.compressed:
                        continue  # read by their epochs' windows (their stored bytes are not rows)
                    for path, seg in range_reads(c, a, b, dst):
                        by_path.setdefault(path, []).append(seg)
                    dst += _align(int(c.range_nbytes(np.array([a]), np.array([b]))[0]))
                tickets = []
                for path, segs in by_path.items():
                    off, sz, mem = (np.ascontiguousarray(np.concatenate([s[k] for s in segs]), np.uint64)
                                    for k in range(3))
                    mem += np.uint64(base)
                    tickets.append((self._files[path].submit(off, sz, mem, base), path))
                pending.append((tickets, buf))
        finally:
            first: OSError | None = None
            for tickets, _ in pending:
                try:
                    io.wait_all(tickets)
                except OSError as exc:
                    first = first or exc
            if first:
                raise first

    def __iter__(self) -> Generator[Any, None, None]:
        if self._closed:
            raise ValueError("the loader is closed")
        self._end_open_epoch("a new epoch of this loader")  # epochs share the loader's buffers
        kind, plan = self._plan()
        if kind == "windowed":
            if self.cache == "loader":
                self._ensure_cache()
            yield from self._run_epoch(iterate(WindowedReader(self, plan), self.batch_size, self.drop_last), True)
            return
        order = self._trim(plan)
        if self.cache == "loader":
            # every sample read once (windows in file order), then gathers from memory
            self._ensure_cache()
            fill_cache(self)
            exact = orders.WindowedPlan(order, np.zeros(len(order), np.int64), order, [])
            yield from self._run_epoch(iterate(WindowedReader(self, exact), self.batch_size, False), True)
            return
        if self.cache == "page" and not self._page_cached():
            self.warm_page_cache()
        yield from self._run_epoch(self._iter_exact(order), False)

    def _run_epoch(self, epoch: Generator[Any, None, None], assemble: bool) -> Generator[Any, None, None]:
        """The batches of `epoch`, which is closed as soon as this ends (an
        epoch left early ends its reads and decodes at once, not when Python
        collects it), or when a new epoch of the loader begins or the loader
        closes: its iterator then raises RuntimeError rather than stop short."""
        record = _OpenEpoch(epoch)
        self._open_epoch = record
        try:
            for parts in epoch:
                yield self._assemble(parts) if assemble else parts
            if record.ended_by:
                raise RuntimeError(f"this epoch was ended by {record.ended_by} before its last batch (epochs of "
                                   "one loader share its buffers: iterate one at a time)")
        finally:
            epoch.close()
            if self._open_epoch is record:
                self._open_epoch = None

    def _end_open_epoch(self, by: str) -> None:
        record, self._open_epoch = self._open_epoch, None
        if record is not None:
            record.ended_by = by
            record.epoch.close()

    # ---- the rest -----------------------------------------------------------

    def close(self) -> None:
        """Ends an epoch still open (its iterator then raises RuntimeError),
        closes the loader's engine files and drops its buffers."""
        self._end_open_epoch("Loader.close()")
        for f in self._files.values():
            f.close()
        self._decoder.close()
        self._closed = True
        self._cache = None
        self._rolling = []
        self._staging = []

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
        return {path: f.stats() for path, f in self._files.items()}


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
