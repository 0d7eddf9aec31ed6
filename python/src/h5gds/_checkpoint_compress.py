"""Compressed leaves (``save(..., compression=...)``, opt-in): the
compression arguments checked and resolved into a filter pipeline
(``_Compression``), the chunk shape, and a compressed leaf's snapshot copy
and its write in slabs.

Compressed leaves are chunked datasets with an HDF5 filter pipeline
(deflate, or hdf5plugin's LZ4, Zstd, Bitshuffle): any h5py reader (with
hdf5plugin for the plugin filters) reads them. ``save`` copies each of
them (a device copy ordered on the array's stream, or a host copy) and
returns; the background part compresses and writes the copies before it
writes the metadata, so the file is complete when the handle says durable.
Device copies are compressed on the GPU where the driver can (route
``gpu-encode``), the others by HDF5's CPU filters. It imports no other
checkpoint module."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5z
from h5py._objects import phil

from . import _arrays
from ._io import _dxpl
from ._lib import hdf5_error_text, native

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
