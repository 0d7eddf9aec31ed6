"""The windowed order, the loader's cache and variable-length (Ragged)
columns, on host arrays and on a host-backed stand-in for CuPy (both
staging modes); GPU runs of the same at the end (marker gpu)."""
import os
import sys

import h5py
import numpy as np
import pytest

import h5gds
from h5gds import _loader_io
from h5gds import _loader_order as orders

import loader_fake_cupy


def make_file(path, n=3000, row=(37,), chunks=None, seed=0, label_offset=0):
    data = np.random.default_rng(seed).integers(0, 255, (n,) + row, dtype=np.uint8)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=chunks)
        f.create_dataset("y", data=np.arange(n, dtype="i8") + label_offset)
    return data


def ragged_file(path, n=500, seed=0, chunks=None, label_offset=0):
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 300, n)
    lens[::17] = 0  # empty samples too
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype("i8")
    values = rng.integers(-1000, 1000, int(offsets[-1])).astype("i2")
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=values, chunks=chunks)
        f.create_dataset("o", data=offsets)
        f.create_dataset("y", data=np.arange(n, dtype="i8") + label_offset)
    return [values[offsets[i]:offsets[i + 1]] for i in range(n)]


def host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


# ---- orders (no files) --------------------------------------------------------


def _windows(n, rows_per_window):
    return orders.windows_from_boundaries([orders.even_boundaries(0, n, rows_per_window)])


@pytest.mark.parametrize("world", [1, 2, 3, 8])
@pytest.mark.parametrize("n,rpw,buffer_windows", [(1000, 7, 4), (1000, 250, 1), (997, 1, 64), (10, 100, 2)])
def test_windowed_plan_each_sample_once_across_ranks(world, n, rpw, buffer_windows):
    w = _windows(n, rpw)
    for epoch in range(3):
        seen, counts = [], []
        for rank in range(world):
            p = orders.windowed_plan(w, n, 5, epoch, True, rank, world, buffer_windows * rpw, lambda a, b: b - a)
            seen.append(p.order)
            counts.append(len(p.order))
            # positions map back to their rows through the groups
            for g, grp in enumerate(p.groups):
                sel = p.group == g
                np.testing.assert_array_equal(grp.row_ids()[p.local[sel]], p.order[sel])
                assert grp.rows <= 2 * buffer_windows * rpw + rpw
        assert sorted(np.concatenate(seen).tolist()) == list(range(n))
        assert counts == orders.rank_counts(n, world).tolist()  # as the exact order: differ by at most one


def test_windowed_plan_deterministic_and_per_epoch():
    w = _windows(5000, 10)
    f = lambda a, b: b - a  # noqa: E731
    a = orders.windowed_plan(w, 5000, 1, 0, True, 1, 3, 200, f)
    b = orders.windowed_plan(w, 5000, 1, 0, True, 1, 3, 200, f)
    np.testing.assert_array_equal(a.order, b.order)
    assert not np.array_equal(a.order, orders.windowed_plan(w, 5000, 1, 1, True, 1, 3, 200, f).order)
    assert not np.array_equal(a.order, orders.windowed_plan(w, 5000, 2, 0, True, 1, 3, 200, f).order)
    seq = orders.windowed_plan(w, 5000, 1, 0, False, 0, 1, 200, f)
    np.testing.assert_array_equal(seq.order, np.arange(5000))


def test_window_boundaries_follow_blocks():
    # rows of 6 KiB from an unaligned base: each window starts at the first
    # row starting at or after a multiple of the window
    b = orders.aligned_boundaries(100, 5000, 2000, 6144, 1 << 20)
    starts = 2000 + (b[1:-1] - 100) * 6144
    assert (starts % (1 << 20) < 6144).all()
    assert b[0] == 100 and b[-1] == 5100
    big = orders.aligned_boundaries(0, 5, 0, 3 << 20, 1 << 20)
    np.testing.assert_array_equal(big, np.arange(6))


# ---- the loader, host arrays --------------------------------------------------


@pytest.fixture
def f3000(tmp_path):
    p = tmp_path / "w.h5"
    data = make_file(p)
    f = h5py.File(p, "r")
    yield f, data
    f.close()


def windowed(src, batch, **kw):
    kw.setdefault("like", "numpy")
    kw.setdefault("order", "windowed")
    kw.setdefault("window", 37 * 20)      # about 20 rows per window
    kw.setdefault("buffer", 37 * 20 * 6)  # 6 windows per group
    return h5gds.Loader(src, batch, **kw)


@pytest.mark.parametrize("world", [1, 2, 3, 7])
@pytest.mark.parametrize("drop_last", [False, True])
def test_windowed_loader_each_sample_once(f3000, world, drop_last):
    f, data = f3000
    for epoch in (0, 3):
        seen = []
        for rank in range(world):
            ld = windowed((f["x"], f["y"]), 64, seed=9, rank=rank, world_size=world, drop_last=drop_last)
            ld.set_epoch(epoch)
            assert ld.epoch_order() == "windowed"
            kind, plan = ld._plan()
            assert len(plan.groups) > 2 or world > 3
            batches = list(ld)
            assert len(batches) == len(ld)
            got = []
            for x, y in batches:
                np.testing.assert_array_equal(x, data[y])
                got += y.tolist()
            assert got == ld.indices().tolist()
            seen += got
            if drop_last:
                assert all(len(y) == 64 for _, y in batches)
        if not drop_last:
            assert sorted(seen) == list(range(3000))
        else:
            assert len(set(seen)) == len(seen)


def test_windowed_deterministic(f3000):
    f, _ = f3000
    a = [y.tolist() for _, y in windowed((f["x"], f["y"]), 100, seed=4)]
    b = [y.tolist() for _, y in windowed((f["x"], f["y"]), 100, seed=4)]
    c = [y.tolist() for _, y in windowed((f["x"], f["y"]), 100, seed=5)]
    assert a == b and a != c
    ld = windowed((f["x"], f["y"]), 100, seed=4)
    ld.set_epoch(1)
    assert [y.tolist() for _, y in ld] != a


def test_windowed_batches_mix_several_windows(f3000):
    """Every full batch draws from several windows (the shuffle buffer), not
    from one run of neighbours."""
    f, _ = f3000
    ld = windowed((f["x"], f["y"]), 60)
    for _, y in ld:
        if len(y) == 60:
            assert len(np.unique(np.asarray(y) // 20)) >= 4


def test_windowed_multi_file_several_columns_chunked(tmp_path):
    paths, parts = [], []
    offset = 0
    for i, (n, chunks) in enumerate([(700, None), (13, None), (900, (16, 37)), (400, (7, 5))]):
        p = tmp_path / f"p{i}.h5"
        parts.append(make_file(p, n=n, chunks=chunks, seed=i, label_offset=offset))
        offset += n
        paths.append(str(p))
    whole = np.concatenate(parts)
    for world in (1, 2):
        seen = []
        for rank in range(world):
            ld = windowed(paths, 50, dataset=["x", "y"], seed=3, rank=rank, world_size=world)
            assert len(ld._windows) > 50
            for x, y in ld:
                np.testing.assert_array_equal(x, whole[y])
                seen += y.tolist()
        assert sorted(seen) == list(range(len(whole)))


def test_orders_agree_on_len_and_samples(f3000):
    f, data = f3000
    for order in ("exact", "windowed"):
        ld = windowed((f["x"], f["y"]), 128, order=order, rank=1, world_size=2)
        assert len(ld) == 12 and len(ld.indices()) == 1500


def test_auto_order_and_page_cache(f3000):
    """order="auto": windowed first epoch, exact later ones (the dataset fits
    in memory); the exact epoch warms the page cache first when it was
    dropped."""
    from h5gds.bench.__main__ import fadvise_dontneed
    f, data = f3000
    ld = h5gds.Loader((f["x"], f["y"]), 100, like="numpy", window=37 * 20)
    assert ld.cache == "page" and ld.epoch_order() == "windowed"
    ld.set_epoch(1)
    assert ld.epoch_order() == "exact"
    fd = os.open(f.filename, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages are not dropped
    finally:
        os.close(fd)
    fadvise_dontneed(f.filename)
    warmed, seen = [], []
    real, real_seen = ld.warm_page_cache, ld._page_cached
    ld.warm_page_cache = lambda: (warmed.append(1), real())[1]
    ld._page_cached = lambda *a: (seen.append(real_seen(*a)), seen[-1])[1]
    got = []
    for x, y in ld:
        np.testing.assert_array_equal(x, data[y])
        got += y.tolist()
    assert sorted(got) == list(range(3000))
    # The files are read through when the loader saw the drop (a drop the
    # kernel did not make, or RWF_NOWAIT refused, reads as cached: no warm).
    assert seen[:1] == [False] and warmed == [1] or seen[:1] == [True] and warmed == []
    if seen[0] is False:
        assert real_seen()  # read through: cached now
    off = h5gds.Loader((f["x"], f["y"]), 100, like="numpy", cache="off")
    off.set_epoch(5)
    assert off.epoch_order() == "windowed"


@pytest.mark.parametrize("order", ["auto", "exact", "windowed"])
def test_loader_cache_serves_later_epochs_from_memory(f3000, order):
    f, data = f3000
    # auto: a buffer deep enough for the windowed order's first epoch (the default 64 windows)
    ld = windowed((f["x"], f["y"]), 64, order=order, cache="loader", buffer=None if order == "auto" else 37 * 120)
    path = f.filename
    for epoch in range(3):
        ld.set_epoch(epoch)
        got = []
        for x, y in ld:
            np.testing.assert_array_equal(x, data[y])
            got += y.tolist()
        assert sorted(got) == list(range(3000))
        read = sum(ld.stats()[path].values())
        if epoch == 0:
            first = read
            assert ld._cache is not None and ld._cache.complete()
        else:
            assert read == first  # nothing read again
    if order == "auto":
        assert ld.epoch_order(0) == "windowed" and ld.epoch_order(2) == "exact"


def test_auto_order_needs_a_deep_buffer(f3000):
    """order="auto" gives the windowed order only with a buffer of the depth
    whose randomness was measured (64 windows), or one holding a rank's
    whole share."""
    f, _ = f3000
    deep = h5gds.Loader((f["x"], f["y"]), 64, like="numpy", window=37 * 20, cache="off")
    assert deep.windows_per_buffer() >= 60 and deep.epoch_order() == "windowed"
    shallow = h5gds.Loader((f["x"], f["y"]), 64, like="numpy", window=37 * 20, buffer=37 * 20 * 8, cache="off")
    assert shallow.epoch_order() == "exact"
    assert shallow.epoch_order() == "exact" and [y.tolist() for _, y in shallow] == \
        [y.tolist() for _, y in h5gds.Loader((f["x"], f["y"]), 64, like="numpy", order="exact")]
    whole = h5gds.Loader((f["x"], f["y"]), 64, like="numpy", window=37 * 20, buffer=200_000, cache="off")
    assert whole.epoch_order() == "windowed"


def test_loader_cache_exact_from_the_start_fills_first(tmp_path):
    p = tmp_path / "c.h5"
    data = make_file(p, n=1000, row=(3, 5), chunks=(10, 3, 2))
    with h5py.File(p, "r") as f:
        ld = h5gds.Loader((f["x"], f["y"]), 33, like="numpy", order="exact", cache="loader", window=400, seed=2)
        ld.set_epoch(4)
        exact = h5gds.Loader((f["x"], f["y"]), 33, like="numpy", order="exact", seed=2)
        exact.set_epoch(4)
        a = [(x.copy(), y.tolist()) for x, y in ld]
        assert [y for _, y in a] == [y.tolist() for _, y in exact]  # the same permutation
        for x, y in a:
            np.testing.assert_array_equal(x, data[y])


def test_bad_order_arguments(f3000):
    f, _ = f3000
    with pytest.raises(ValueError, match="order"):
        h5gds.Loader(f["x"], 4, like="numpy", order="random")
    with pytest.raises(ValueError, match="cache"):
        h5gds.Loader(f["x"], 4, like="numpy", cache="gpu")
    with pytest.raises(ValueError, match="window"):
        h5gds.Loader(f["x"], 4, like="numpy", window="8Mb")
    with pytest.raises(TypeError, match="buffer"):
        h5gds.Loader(f["x"], 4, like="numpy", buffer=1.5)
    ld = h5gds.Loader(f["x"], 4, like="numpy", window="64KiB", buffer="1MB")
    assert ld.window_bytes == 65536 and ld.buffer_bytes == 1000000


# ---- variable-length rows -----------------------------------------------------------


@pytest.mark.parametrize("order", ["exact", "windowed"])
@pytest.mark.parametrize("chunks", [None, (64,)])
def test_ragged_column(tmp_path, order, chunks):
    p = tmp_path / "r.h5"
    samples = ragged_file(p, chunks=chunks)
    with h5py.File(p, "r") as f:
        for world in (1, 3):
            seen = []
            for rank in range(world):
                ld = h5gds.Loader((h5gds.Ragged(f["v"], f["o"]), f["y"]), 32, like="numpy", order=order,
                                  window=2000, buffer=12000, seed=1, rank=rank, world_size=world)
                for (values, offsets), y in ld:
                    assert offsets[0] == 0 and len(offsets) == len(y) + 1 and offsets.dtype == np.int64
                    for i, yi in enumerate(y):
                        np.testing.assert_array_equal(values[offsets[i]:offsets[i + 1]], samples[yi])
                    seen += y.tolist()
            assert sorted(seen) == list(range(len(samples)))


@pytest.mark.parametrize("order", ["exact", "windowed"])
def test_ragged_over_files_with_cache(tmp_path, order):
    paths, samples = [], []
    for i, n in enumerate([300, 1, 250]):
        p = tmp_path / f"r{i}.h5"
        samples += ragged_file(p, n=n, seed=i, label_offset=len(samples))
        paths.append(str(p))
    ld = h5gds.Loader(paths, 40, dataset=[h5gds.Ragged("v", "o"), "y"], like="numpy", order=order, window=3000,
                      cache="loader")
    for epoch in range(2):
        ld.set_epoch(epoch)
        seen = []
        for (values, offsets), y in ld:
            for i, yi in enumerate(y):
                np.testing.assert_array_equal(values[offsets[i]:offsets[i + 1]], samples[yi])
            seen += y.tolist()
        assert sorted(seen) == list(range(len(samples)))
    single = h5gds.Loader(paths, 1000, dataset=h5gds.Ragged("v", "o"), like="numpy", shuffle=False,
                          order=order)
    ((values, offsets),) = list(single)
    np.testing.assert_array_equal(values, np.concatenate(samples))


def test_ragged_errors(tmp_path):
    p = tmp_path / "bad.h5"
    with h5py.File(p, "w") as f:
        f["v"] = np.arange(10, dtype="f4")
        f["o"] = np.array([0, 4, 3, 10])
        f["o2"] = np.array([0, 4, 11])
        f["v2"] = np.zeros((5, 2))
        f["ok"] = np.array([0, 5, 10])
        with pytest.raises(ValueError, match="non-decreasing"):
            h5gds.Loader(h5gds.Ragged(f["v"], f["o"]), 2, like="numpy")
        with pytest.raises(ValueError, match="within"):
            h5gds.Loader(h5gds.Ragged(f["v"], f["o2"]), 2, like="numpy")
        with pytest.raises(ValueError, match="1-D"):
            h5gds.Loader(h5gds.Ragged(f["v2"], f["ok"]), 2, like="numpy")
        with pytest.raises(TypeError, match="list of files"):
            h5gds.Loader(h5gds.Ragged("v", "o"), 2, like="numpy")
    with pytest.raises(KeyError, match="nope"):
        h5gds.Loader([str(p)], 2, dataset=h5gds.Ragged("v", "nope"), like="numpy")


# ---- device batches on the stand-in ---------------------------------------------------


@pytest.fixture
def fake_cupy(monkeypatch):
    fake = loader_fake_cupy.make()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


@pytest.mark.parametrize("staging", ["pinned", "device"])
@pytest.mark.parametrize("cache", ["off", "loader"])
def test_windowed_device_batches_kept_until_the_end(f3000, fake_cupy, staging, cache):
    """Every batch is kept and only read at the end (when the queue runs):
    a staging slot or a buffer written again before the copies and gathers
    out of it ran would show as wrong rows."""
    f, data = f3000
    ld = windowed((f["x"], f["y"]), 64, like="cupy", staging=staging, cache=cache, seed=7)
    for epoch in range(2):
        ld.set_epoch(epoch)
        kept = list(ld)
        assert len(kept) == len(ld)
        seen = []
        for x, y in kept:
            yh = y.get()
            np.testing.assert_array_equal(x.get(), data[yh])
            seen += yh.tolist()
        assert sorted(seen) == list(range(3000))
    if staging == "pinned" and cache == "off":
        assert fake_cupy.queue.waits > 0  # the copy stream waited for gathers, the current stream for copies


@pytest.mark.parametrize("staging", ["pinned", "device"])
def test_ragged_device_batches(tmp_path, fake_cupy, staging):
    p = tmp_path / "r.h5"
    samples = ragged_file(p, n=400)
    with h5py.File(p, "r") as f:
        for order in ("exact", "windowed"):
            if staging == "device" and order == "exact":
                continue  # the exact order's device staging needs a real GPU (h5gds.read's checks)
            ld = h5gds.Loader((h5gds.Ragged(f["v"], f["o"]), f["y"]), 24, like="cupy", staging=staging,
                              order=order, window=1500, buffer=6000)
            kept = list(ld)
            seen = []
            for (values, offsets), y in kept:
                v, o, yh = values.get(), offsets.get(), y.get()
                for i, yi in enumerate(yh):
                    np.testing.assert_array_equal(v[o[i]:o[i + 1]], samples[yi])
                seen += yh.tolist()
            assert sorted(seen) == list(range(400))


def test_break_out_of_windowed_iteration(f3000, fake_cupy):
    f, data = f3000
    ld = windowed((f["x"], f["y"]), 64, like="cupy")
    for i, _ in enumerate(ld):
        if i == 5:
            break
    x, y = next(iter(ld))
    np.testing.assert_array_equal(x.get(), data[y.get()])
    ld.close()


def test_pinned_reads_go_on_when_a_copy_finishes_between_polls(tmp_path, fake_cupy, monkeypatch):
    """A GPU runs on while the host polls: every staging slot's copy may be
    pending when the reader looks for a free slot and done when it looks
    again. Modelled deterministically: an event found pending is passed
    just after (the queue runs up to it), and every read is finished when
    polled (the reads outrun the copies: all slots end up waiting on
    copies, no read pending). The proportions of the benchmark run that
    failed (16 MiB windows): 7 slots, 4 groups of 64 windows, a batch per
    window; a first iteration of one batch, closed, then a whole epoch."""
    q = fake_cupy.queue

    class LateEvent(fake_cupy.cuda.Event):
        @property
        def done(self):
            if q.ran >= self.at:
                return True
            q.run(self.at)
            return False

    monkeypatch.setattr(fake_cupy.cuda, "Event", LateEvent)
    monkeypatch.setattr(_loader_io, "done", lambda ticket: True)  # the wait that follows collects it
    p = tmp_path / "late.h5"
    rows_per_window = 4
    data = make_file(p, n=1024, row=(4096,))  # rows from file offset 2048: windows of 4 rows
    with h5py.File(p, "r") as f:
        ld = h5gds.Loader((f["x"], f["y"]), rows_per_window, seed=1, like="cupy", order="windowed", cache="off",
                          window=rows_per_window * 4096)
    ld._inflight_loads = 7  # slots of 16 MiB windows
    _, plan = ld._plan()
    assert ld.windows_per_buffer() == 64 and [g.rows for g in plan.groups] == [256] * 4
    it = iter(ld)
    x, y = next(it)
    it.close()
    np.testing.assert_array_equal(x.get(), data[y.get()])
    kept = list(ld)
    assert len(kept) == len(ld) == 256
    seen = []
    for x, y in kept:
        yh = y.get()
        np.testing.assert_array_equal(x.get(), data[yh])
        seen += yh.tolist()
    assert seen == plan.order.tolist() and sorted(seen) == list(range(1024))
    ld.close()


# ---- on a GPU ---------------------------------------------------------------------------


@pytest.fixture(params=["cupy", "torch"])
def gpu_module(request):
    pytest.importorskip(request.param)
    return request.param


def _to_host(a):
    if hasattr(a, "get"):
        return a.get()
    if hasattr(a, "cpu"):
        return a.cpu().numpy()
    return np.asarray(a)


@pytest.mark.gpu
@pytest.mark.parametrize("staging", ["pinned", "device"])
@pytest.mark.parametrize("cache", ["off", "loader"])
def test_windowed_on_gpu(tmp_path, gpu_module, staging, cache):
    p = tmp_path / "g.h5"
    data = make_file(p, n=5000, row=(100,))
    with h5py.File(p, "r") as f:
        ld = h5gds.Loader((f["x"], f["y"]), 128, like=gpu_module, staging=staging, cache=cache,
                          window=100 * 50, buffer=100 * 50 * 8)
        for epoch in range(2):
            ld.set_epoch(epoch)
            kept = list(ld)
            seen = []
            for x, y in kept:
                assert type(x).__module__.split(".")[0] == gpu_module
                yh = _to_host(y)
                np.testing.assert_array_equal(_to_host(x), data[yh])
                seen += yh.tolist()
            assert sorted(seen) == list(range(5000))


@pytest.mark.gpu
@pytest.mark.parametrize("staging", ["pinned", "device"])
@pytest.mark.parametrize("order", ["exact", "windowed"])
def test_ragged_on_gpu(tmp_path, gpu_module, staging, order):
    p = tmp_path / "rg.h5"
    samples = ragged_file(p, n=700)
    with h5py.File(p, "r") as f:
        ld = h5gds.Loader((h5gds.Ragged(f["v"], f["o"]), f["y"]), 50, like=gpu_module, staging=staging,
                          order=order, window=4000)
        seen = []
        for (values, offsets), y in ld:
            v, o, yh = _to_host(values), _to_host(offsets), _to_host(y)
            for i, yi in enumerate(yh):
                np.testing.assert_array_equal(v[o[i]:o[i + 1]], samples[yi])
            seen += yh.tolist()
        assert sorted(seen) == list(range(700))
