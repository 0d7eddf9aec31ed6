"""Loader semantics on host arrays (like="numpy"): the same code builds the
engine requests for device batches."""
import h5py
import numpy as np
import pytest

import h5gds


def make_file(path, n=1000, row=(6,), chunks=None, dtype="f4"):
    data = np.arange(n * int(np.prod(row)), dtype=dtype).reshape((n,) + row)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=chunks)
        f.create_dataset("y", data=np.arange(n, dtype="i8"))
    return data


def ids(batch):
    return [int(v) for v in batch[1]]


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "s.h5"
    data = make_file(p)
    f = h5py.File(p, "r")
    yield f, data
    f.close()


def test_batches_match_rows(src):
    f, data = src
    loader = h5gds.Loader((f["x"], f["y"]), 64, like="numpy")
    n = 0
    for x, y in loader:
        np.testing.assert_array_equal(x, data[y])
        n += 1
    assert n == len(loader) == 16


def test_shuffle_deterministic_per_seed_and_epoch(src):
    f, _ = src
    a = h5gds.Loader((f["x"], f["y"]), 100, seed=3, like="numpy")
    b = h5gds.Loader((f["x"], f["y"]), 100, seed=3, like="numpy")
    c = h5gds.Loader((f["x"], f["y"]), 100, seed=4, like="numpy")
    first = [ids(x) for x in a]
    assert first == [ids(x) for x in b]
    assert first != [ids(x) for x in c]
    a.set_epoch(1)
    second = [ids(x) for x in a]
    assert second != first and sorted(sum(second, [])) == list(range(1000))
    b.set_epoch(1)
    assert second == [ids(x) for x in b]
    assert [ids(x) for x in a] == second  # same epoch again: same order


def test_no_shuffle_is_in_order(src):
    f, _ = src
    got = sum((ids(b) for b in h5gds.Loader((f["x"], f["y"]), 128, shuffle=False, like="numpy")), [])
    assert got == list(range(1000))


@pytest.mark.parametrize("world", [1, 2, 3, 7])
@pytest.mark.parametrize("epoch", [0, 5])
def test_each_sample_once_across_ranks(src, world, epoch):
    f, _ = src
    seen = []
    total_len = 0
    for rank in range(world):
        loader = h5gds.Loader((f["x"], f["y"]), 50, seed=11, rank=rank, world_size=world, like="numpy")
        loader.set_epoch(epoch)
        batches = [ids(b) for b in loader]
        assert len(batches) == len(loader)
        total_len += len(loader)
        seen += sum(batches, [])
    assert sorted(seen) == list(range(1000))


@pytest.mark.parametrize("drop_last", [False, True])
def test_drop_last_and_len(src, drop_last):
    f, _ = src
    loader = h5gds.Loader((f["x"], f["y"]), 300, drop_last=drop_last, like="numpy")
    sizes = [len(b[1]) for b in loader]
    assert len(sizes) == len(loader)
    assert sizes == ([300, 300, 300] if drop_last else [300, 300, 300, 100])
    r = h5gds.Loader((f["x"], f["y"]), 300, drop_last=drop_last, rank=1, world_size=3, like="numpy")
    assert len(list(r)) == len(r) == (1 if drop_last else 2)


def test_multi_file_source(tmp_path):
    paths, parts = [], []
    for i, n in enumerate([130, 7, 200]):
        p = tmp_path / f"part{i}.h5"
        with h5py.File(p, "w") as f:
            part = np.random.default_rng(i).random((n, 3, 5)).astype("f8")
            f.create_dataset("data/x", data=part, chunks=(4, 3, 2) if i == 2 else None)
            f.create_dataset("data/label", data=np.arange(n) + sum(len(q) for q in parts))
        paths.append(str(p))
        parts.append(part)
    whole = np.concatenate(parts)
    loader = h5gds.Loader(paths, 32, dataset=["data/x", "data/label"], seed=2, like="numpy")
    assert loader.num_samples == 337 and len(loader) == 11
    seen = []
    for x, lab in loader:
        np.testing.assert_array_equal(x, whole[lab])
        seen += list(lab)
    assert sorted(seen) == list(range(337))
    single = h5gds.Loader(paths, 337, dataset="data/x", shuffle=False, like="numpy")
    (only,) = list(single)
    np.testing.assert_array_equal(only, whole)


@pytest.mark.parametrize("chunks,row", [((7, 6), (6,)), ((3, 4), (6,)), ((5, 2, 3), (4, 5)), ((1, 4, 5), (4, 5)),
                                        ((64,), ())])
def test_chunked_sources_samples_spanning_chunks(tmp_path, chunks, row):
    p = tmp_path / "c.h5"
    data = make_file(p, n=301, row=row, chunks=chunks, dtype="i4")
    with h5py.File(p, "r") as f:
        loader = h5gds.Loader((f["x"], f["y"]), 40, seed=5, like="numpy")
        seen = []
        for x, y in loader:
            np.testing.assert_array_equal(x, data[y])
            seen += list(y)
        assert sorted(seen) == list(range(301))


def test_filtered_datasets_are_read_in_chunks_of_rows_or_tiles(tmp_path):
    p = tmp_path / "z.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=np.arange(100.0), compression="gzip", chunks=(10,))
        with h5gds.Loader(f["x"], 10, like="numpy") as loader:  # a file open for writing: flushed first
            got = np.concatenate([np.asarray(b) for b in loader])
        np.testing.assert_array_equal(np.sort(got), np.arange(100.0))
        tiles = np.arange(80.0).reshape(10, 8)
        f.create_dataset("tiles", data=tiles, compression="gzip", chunks=(5, 4))  # two tiles a sample
        with h5gds.Loader(f["tiles"], 10, like="numpy") as loader:
            got = np.concatenate([np.asarray(b) for b in loader])
        np.testing.assert_array_equal(got[np.argsort(got[:, 0])], tiles)


def test_bad_arguments(src, tmp_path):
    f, _ = src
    with pytest.raises(ValueError):
        h5gds.Loader(f["x"], 0, like="numpy")
    with pytest.raises(ValueError):
        h5gds.Loader(f["x"], 4, rank=2, world_size=2, like="numpy")
    p = tmp_path / "o.h5"
    with h5py.File(p, "w") as g:
        g["a"] = np.arange(10)
        g["b"] = np.arange(11)
        with pytest.raises(ValueError, match="lengths"):
            h5gds.Loader((g["a"], g["b"]), 2, like="numpy")
        g.create_dataset("u", shape=(10,), dtype="f4")  # never written: no storage
        with pytest.raises(ValueError, match="allocated"):
            h5gds.Loader(g["u"], 2, like="numpy")
    with pytest.raises(TypeError, match="dataset="):
        h5gds.Loader([str(p)], 2, like="numpy")
    with pytest.raises(KeyError):
        h5gds.Loader([str(p)], 2, dataset="nope", like="numpy")


def test_break_out_of_iteration_and_reiterate(src):
    f, data = src
    loader = h5gds.Loader((f["x"], f["y"]), 10, prefetch=4, like="numpy")
    for i, _ in enumerate(loader):
        if i == 2:
            break
    x, y = next(iter(loader))
    np.testing.assert_array_equal(x, data[y])
    loader.close()
    with pytest.raises(ValueError, match="closed"):
        iter(loader).__next__()


@pytest.mark.parametrize("order", ["windowed", "exact"])
def test_a_new_epoch_ends_the_one_still_open(src, order):
    """Epochs share the loader's buffers: an iterator kept open while a new
    epoch begins raises RuntimeError (it does not stop short), the new one
    reads every sample right, and closing the loader ends an epoch still
    open."""
    f, data = src
    kw = dict(window="2KiB", buffer="8KiB") if order == "windowed" else dict(order="exact")
    loader = h5gds.Loader((f["x"], f["y"]), 10, like="numpy", seed=1, **kw)
    first = iter(loader)
    next(first)
    seen = []
    for x, y in loader:
        np.testing.assert_array_equal(x, data[y])
        seen.extend(ids((x, y)))
    assert sorted(seen) == list(range(len(data)))
    with pytest.raises(RuntimeError, match="ended by a new epoch of this loader"):
        next(first)
    with pytest.raises(StopIteration):
        next(first)
    second = iter(loader)
    next(second)
    loader.close()
    with pytest.raises(RuntimeError, match=r"ended by Loader.close\(\)"):
        next(second)


def test_single_dataset_yields_arrays(src):
    f, data = src
    (b,) = list(h5gds.Loader(f["x"], 1000, shuffle=False, like="numpy"))
    np.testing.assert_array_equal(b, data)
    assert h5gds.Loader(f["x"], 1000, like="numpy").sampler.set_epoch(3) is None


def _drop_from_cache(path):
    from h5gds.bench.__main__ import fadvise_dontneed
    fadvise_dontneed(path)


@pytest.mark.parametrize("order", ["exact", "windowed"])
@pytest.mark.parametrize("row,chunks", [((4096,), None), ((1000,), None), ((3, 777), None), ((4096,), (5, 4096)),
                                        ((3, 777), (4, 2, 300))])
def test_partly_cached_file_unaligned_samples(tmp_path, row, chunks, order):
    """Samples not in the page cache take the read-ahead path (probe, hint,
    read later), cached ones are read by the probe; a file dropped from the
    cache and then partly re-read mixes both inside every batch. Sample
    sizes and the dataset's offset make samples straddle page boundaries;
    the last batch is partial."""
    p = tmp_path / "u.h5"
    n = 1203
    rng = np.random.default_rng(3)
    data = rng.integers(0, 255, (n,) + row, dtype=np.uint8)
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=data, chunks=chunks)
        f.create_dataset("y", data=np.arange(n, dtype="i8"))
    for epoch in range(2):
        _drop_from_cache(p)
        with open(p, "rb") as fh:  # every other 64 KiB of the file back into the cache
            size = fh.seek(0, 2)
            for off in range(0, size, 128 << 10):
                fh.seek(off)
                fh.read(64 << 10)
        with h5py.File(p, "r") as f:
            loader = h5gds.Loader((f["x"], f["y"]), 100, seed=epoch, like="numpy", config="threads=4", order=order,
                                  window=64 << 10, buffer=256 << 10)
            seen = []
            for x, y in loader:
                np.testing.assert_array_equal(x, data[y])
                seen += list(y)
            assert len(y) == n % 100  # the last, partial batch
            assert sorted(seen) == list(range(n))
            loader.close()


@pytest.mark.parametrize("order", ["exact", "windowed"])
def test_samples_past_the_end_of_the_file_read_as_zeros(tmp_path, order):
    """A truncated file (the layout still says where the rows were): rows
    past the end come back as zeros, as the driver's reads do, and rows
    before it are intact."""
    p = tmp_path / "t.h5"
    data = np.arange(400 * 1024, dtype=np.uint8).reshape(400, 1024)
    with h5py.File(p, "w") as f:
        f.create_dataset("y", data=np.arange(400, dtype="i8"))
        f.create_dataset("x", data=data)  # last in the file
        base = f["x"].id.get_offset()
    with h5py.File(p, "r") as f:
        loader = h5gds.Loader((f["x"], f["y"]), 64, seed=1, like="numpy", order=order)
    import os
    cut = base + 300 * 1024 + 100  # inside row 300
    if os.path.getsize(p) > base + 400 * 1024:
        pytest.skip("the dataset is not at the end of the file")
    os.truncate(p, cut)
    _drop_from_cache(p)
    for x, y in loader:
        for xi, yi in zip(x, y):
            want = data[yi].copy()
            if yi >= 300:
                want[max(0, cut - base - int(yi) * 1024):] = 0
            np.testing.assert_array_equal(xi, want)
    loader.close()


def test_host_batches_kept_by_the_caller_are_never_reused(src):
    """Host batches reuse arrays the caller has let go of; batches kept
    whole, or through a view or a memoryview, keep their rows."""
    f, data = src
    loader = h5gds.Loader((f["x"], f["y"]), 48, seed=2, like="numpy", prefetch=2)
    kept = list(loader)  # every batch kept
    for x, y in kept:
        np.testing.assert_array_equal(x, data[y])
    assert len({id(x) for x, _ in kept}) == len(kept)
    views = [(x[1:], memoryview(y)) for x, y in loader]  # only views kept
    for xv, yv in views:
        y = np.asarray(yv)
        np.testing.assert_array_equal(xv, data[y[1:]])
    ids_seen = set()
    for x, y in loader:  # nothing kept: arrays are reused
        np.testing.assert_array_equal(x, data[y])
        ids_seen.add(id(x))
    assert len(ids_seen) < len(loader)


class _FakeStream:
    """A CUDA stream that runs its copies only when something waits for
    them: a slot overwritten before its copy ran is seen at once."""

    def __init__(self):
        self.ops, self.done = [], 0

    def run(self, upto):
        while self.done < upto:
            self.ops[self.done]()
            self.done += 1


class _FakeCupy:
    """Just what the pinned-slot path of the loader calls."""

    def __init__(self):
        stream = _FakeStream()
        fake = self
        self.copies_ahead = 0

        class Array:
            def __init__(self, shape, dtype):
                self.a = np.zeros(shape, dtype)

            def set(self, arr, stream):
                stream.ops.append(lambda: self.a.__setitem__(Ellipsis, arr))  # reads the slot later
                fake.copies_ahead += not isinstance(stream, _FakeStream)

            def get(self):
                stream.run(len(stream.ops))
                return self.a.copy()

        class FakeEvent:
            def __init__(self, block=False, disable_timing=False):
                self.at = None

            def record(self, s):
                self.at = len(s.ops)

            def synchronize(self):
                stream.run(self.at)

        class Cuda:
            Event = staticmethod(FakeEvent)

            @staticmethod
            def get_current_stream():
                return stream

            @staticmethod
            def alloc_pinned_memory(n):
                return bytearray(n)

        fake = self

        class Stream:
            """The loader's copy stream: ops go into the one in-order queue
            (a valid model of two streams joined by events), counted."""

            def __init__(self, non_blocking=False):
                fake.copy_streams += 1
                self.ops = stream.ops

            def wait_event(self, event):
                pass

        class Runtime:
            @staticmethod
            def getDevice():
                return 0

        Cuda.Stream = Stream
        Cuda.runtime = Runtime
        stream.wait_event = lambda event: None
        self.copy_streams = 0
        self.cuda = Cuda
        self.empty = Array
        self.stream = stream


def _each_batch_its_own_rows(kept, data):
    """Kept (fake CuPy) batches each hold their own rows, every row once."""
    seen = []
    for x, y in kept:
        yh = y.get()
        np.testing.assert_array_equal(x.get(), data[yh])
        seen += list(yh)
    assert sorted(seen) == list(range(len(data)))


@pytest.mark.parametrize("prefetch", [1, 2, 4])
def test_pinned_slots_are_reused_only_after_their_copy(src, monkeypatch, prefetch):
    """The pinned path on a stand-in for CuPy whose copies run late: every
    batch kept until the end still holds its own rows, so no slot was read
    into while its copy to the device was pending."""
    import sys
    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    f, data = src
    loader = h5gds.Loader((f["x"], f["y"]), 48, seed=4, like="cupy", prefetch=prefetch, order="exact")
    kept = []
    for batch in loader:
        # the batch's copy is queued, not waited for, when it is yielded
        assert fake.stream.done < len(fake.stream.ops)
        kept.append(batch)
    assert len(kept) == len(loader)
    _each_batch_its_own_rows(kept, data)
    loader.close()


def test_pinned_batches_are_copied_ahead_on_the_copy_stream(src, monkeypatch):
    """A batch whose reads are done when the caller asks for the one before
    it is copied then, on the loader's copy stream (here: the consumer
    sleeps, so the reads are done); the data is still each batch's own."""
    import sys
    import time
    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    f, data = src
    loader = h5gds.Loader((f["x"], f["y"]), 48, seed=5, like="cupy", prefetch=2, order="exact")
    kept = []
    for batch in loader:
        time.sleep(0.02)  # a training step
        kept.append(batch)
    assert fake.copy_streams == 1
    assert fake.copies_ahead >= 2 * (len(loader) - 2), fake.copies_ahead  # two columns per batch
    _each_batch_its_own_rows(kept, data)
    loader.close()


@pytest.mark.parametrize("read_once", [False, True])
def test_engine_file_reads_segments(tmp_path, read_once):
    """The engine file the loader (and the compressed benchmark's raw
    reads) use: segments land at their addresses, also as bytes read once
    after the file left the page cache (O_DIRECT where not cached)."""
    import os

    from h5gds._loader_io import EngineFile, wait

    data = np.random.default_rng(3).integers(0, 256, 3 << 20, dtype=np.uint8)
    path = tmp_path / "raw.bin"
    path.write_bytes(data.tobytes())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # clean pages leave the cache
    finally:
        os.close(fd)
    out = np.zeros(2 << 20, dtype=np.uint8)
    off = np.array([5, 1 << 20, 3 * (1 << 20) - 100], dtype=np.uint64)
    size = np.array([(1 << 20) - 5, 1 << 19, 100], dtype=np.uint64)
    at = np.array([0, 1 << 20, (1 << 20) + (1 << 19)], dtype=np.uint64)
    base = out.ctypes.data
    f = EngineFile(str(path), "")
    try:
        wait(f.submit(off, size, at + np.uint64(base), base, read_once=read_once), str(path))
    finally:
        f.close()
    for o, n, a in zip(off.tolist(), size.tolist(), at.tolist()):
        np.testing.assert_array_equal(out[a:a + n], data[o:o + n])


def test_loader_config_refused_as_h5py_refuses_it(tmp_path):
    """A wrong configuration key is the ValueError h5py.File(driver="gds",
    config=...) gives, naming the key, before any file is opened."""
    p = tmp_path / "c.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.arange(100, dtype="f4")
    with h5py.File(p, "r", driver="gds") as f:
        with pytest.raises(ValueError, match="'bogus'"):
            h5gds.Loader(f["x"], 4, like="numpy", config="bogus=1")


def test_loader_of_a_missing_array_library_refused_at_once(tmp_path, monkeypatch):
    """like="cupy" where CuPy cannot be imported: a RuntimeError from the
    constructor, not from the first batch."""
    import sys
    p = tmp_path / "m.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.arange(100, dtype="f4")
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    with h5py.File(p, "r", driver="gds") as f:
        with pytest.raises(RuntimeError, match="cupy is not importable"):
            h5gds.Loader(f["x"], 4, like="cupy")
