"""The loader's device path run on the host (not a test file itself):
CuPy's stand-in (loader_fake_cupy) for the device arrays and, in place of
the native GPU decode, Python's zlib for HDF5's deflate, shuffle and
fletcher32 filters, writing each chunk where the loader asks. Every
destination must lie inside memory the loader allocated and overlap no
other, every source inside such memory too: so the loader's reads, decode
destinations and copies are checked on a machine without a GPU."""
from __future__ import annotations

import ctypes
import sys
import threading
import types
import zlib
from typing import Any

import numpy as np
import pytest
from h5py._objects import phil

import loader_fake_cupy

DEFLATE, SHUFFLE, FLETCHER32 = 1, 2, 3


def _decode_chunk(stored: bytes, filters: list[int], mask: int, itemsize: int) -> bytes:
    """HDF5's pipeline backwards; bit i of the mask: filter i was skipped."""
    out = stored
    for i in reversed(range(len(filters))):
        if mask & (1 << i):
            continue
        if filters[i] == DEFLATE:
            d = zlib.decompressobj()
            out = d.decompress(out)
            if not d.eof or d.unused_data:  # as the GPU's decoder: the stream must end at the chunk's end
                raise zlib.error("the zlib stream does not end at the chunk's end")
        elif filters[i] == SHUFFLE:
            out = np.frombuffer(out, np.uint8).reshape(itemsize, -1).T.tobytes()
        elif filters[i] == FLETCHER32:
            out = out[:-4]
        else:
            raise AssertionError(f"the stand-in decodes deflate, shuffle and fletcher32, not filter {filters[i]}")
    return out


def install_decode_stand_in(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Installs the stand-ins for the test; returns the decode calls' count,
    the calls refused for a corrupt stream, the decodes begun and ended, and
    the most open at once, and the waits for a decode made while another
    thread could take h5py's lock (``{"n", "refused", "begun", "ended",
    "most_open", "waited_unlocked"}``)."""
    import h5gds._loader_decode as decode

    fake = loader_fake_cupy.make()
    allocs: dict[int, int] = {}
    empty = fake.empty

    def tracked_empty(shape: Any, dtype: Any = np.float64) -> Any:
        a = empty(shape, dtype)
        allocs[int(a.ctypes.data)] = a.nbytes
        return a

    fake.empty = tracked_empty
    monkeypatch.setitem(sys.modules, "cupy", fake)
    props: dict[int, tuple[int, int, list[int], Any]] = {}
    dataset = decode.Decoder.dataset

    def recording_dataset(self: Any, col: Any, fi: int) -> Any:
        ds = dataset(self, col, fi)
        dcpl = ds.id.get_create_plist()
        filters = [dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters())]
        props[ds.id.id] = (int(np.prod(ds.chunks)) * ds.dtype.itemsize, ds.dtype.itemsize, filters, ds)
        return ds

    def hdf5_reads_chunk(ds: Any, lo: np.ndarray) -> bytes:
        """As gds_filtered_refused: HDF5's filters read the chunk whose first
        element is at `lo`, its part inside the extent, laid out as a chunk."""
        box = tuple(slice(int(o), min(int(o) + c, n)) for o, c, n in zip(lo, ds.chunks, ds.shape))
        assert all(int(o) % c == 0 for o, c in zip(lo, ds.chunks)), f"{tuple(lo)} is no chunk's first element"
        out = np.zeros(ds.chunks, ds.dtype)
        out[tuple(slice(0, b.stop - b.start) for b in box)] = ds[box]
        return out.tobytes()

    def inside(addr: int, n: int) -> bool:
        return any(a <= addr and addr + n <= a + size for a, size in allocs.items())

    calls = {"n": 0, "refused": 0}
    error: dict[str, str] = {"text": ""}

    def decode_chunks(hid: int, n: int, src: Any, size: Any, mask: Any, dst: Any, lo: Any, rank: int,
                      hdf5_chunks: Any, stream: int) -> int:
        chunk_bytes, itemsize, filters, ds = props[hid]

        def arr(p: Any, t: Any, count: int = n) -> np.ndarray:
            return np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(t)), (count,)).copy()

        s, z, m, d = arr(src, ctypes.c_uint64), arr(size, ctypes.c_uint64), arr(mask, ctypes.c_uint32), \
            arr(dst, ctypes.c_uint64)
        assert rank == ds.ndim, (rank, ds.ndim)
        first = arr(lo, ctypes.c_uint64, n * rank).reshape(n, rank)
        order = np.argsort(d)
        assert (np.diff(d[order].astype(np.int64)) >= chunk_bytes).all(), "decode destinations overlap"
        fake.queue.run()  # the engine's reads and earlier copies are done before a decode reads them
        taken = 0
        for k in range(n):
            assert inside(int(s[k]), int(z[k])), f"chunk {k}: stored bytes outside the loader's memory"
            assert inside(int(d[k]), chunk_bytes), f"chunk {k}: destination outside the loader's memory"
            try:
                out = _decode_chunk(ctypes.string_at(int(s[k]), int(z[k])), filters, int(m[k]), itemsize)
            except zlib.error as exc:  # a corrupt stream: HDF5's filters judge that chunk (gds_filtered_refused)
                calls["refused"] += 1
                try:
                    out = hdf5_reads_chunk(ds, first[k])
                except OSError as hdf5_exc:
                    error["text"] = (f"dataset '{ds.name}': chunk at {tuple(int(x) for x in first[k])} could not "
                                     f"be decoded on the GPU: {exc}; HDF5's own filters failed on it as well: "
                                     f"{hdf5_exc}")
                    return -1
                taken += 1
            assert len(out) == chunk_bytes
            ctypes.memmove(int(d[k]), out, chunk_bytes)
        hdf5_chunks._obj.value = taken  # ctypes.byref(c_size_t)
        calls["n"] += 1
        return 1

    # Begun decodes run only when ended, as late as the native thread may
    # finish: rows used before their decode's end would be wrong here.
    jobs: dict[int, Any] = {}

    def decode_chunks_begin(hid: int, n: int, src: Any, size: Any, mask: Any, dst: Any, lo: Any, rank: int,
                            stream: int, job: Any) -> int:
        def arr(p: Any, t: Any, count: int) -> Any:
            a = np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(t)), (count,)).copy()  # the caller may free them
            return a.ctypes.data_as(ctypes.POINTER(t)), a
        held = [arr(src, ctypes.c_uint64, n), arr(size, ctypes.c_uint64, n), arr(mask, ctypes.c_uint32, n),
                arr(dst, ctypes.c_uint64, n), arr(lo, ctypes.c_uint64, n * rank)]
        key = calls["begun"] + 1
        jobs[key] = (hid, n, rank, stream, held)
        job._obj.value = key  # ctypes.byref(c_uint64)
        calls["begun"] += 1
        calls["most_open"] = max(calls["most_open"], len(jobs))
        return 1

    waited: set[int] = set()

    def decode_chunks_wait(job: int) -> None:
        assert job in jobs, f"decode job {job} waited for after its end, or never begun"
        waited.add(job)
        free = []

        def try_lock() -> None:  # on another thread: fails while this one holds h5py's lock
            if phil.acquire(False):
                phil.release()
                free.append(True)

        probe = threading.Thread(target=try_lock)
        probe.start()
        probe.join()
        calls["waited_unlocked"] += bool(free)

    def decode_chunks_end(job: int, hdf5_chunks: Any) -> int:
        assert job in jobs, f"decode job {job} ended twice, or never begun"
        assert job in waited, f"decode job {job} ended without its wait"
        waited.discard(job)
        hid, n, rank, stream, held = jobs.pop(job)
        calls["ended"] += 1
        return decode_chunks(hid, n, held[0][0], held[1][0], held[2][0], held[3][0], held[4][0], rank, hdf5_chunks,
                             stream)

    calls["begun"] = calls["ended"] = calls["most_open"] = calls["waited_unlocked"] = 0
    monkeypatch.setattr(decode.Decoder, "dataset", recording_dataset)
    monkeypatch.setattr(decode, "native", types.SimpleNamespace(h5gds_py_decode_chunks_begin=decode_chunks_begin,
                                                                h5gds_py_decode_chunks_end=decode_chunks_end,
                                                                h5gds_py_decode_chunks_wait=decode_chunks_wait))
    monkeypatch.setattr(decode, "hdf5_error_text", lambda: error["text"])
    return calls
