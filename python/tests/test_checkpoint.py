"""Checkpoints (h5gds.save / h5gds.load) with host arrays: structure and
values round trip, plain HDF5 that h5py reads, asynchronous handles, the
previous checkpoint intact when a save fails or the process is killed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

import h5gds
from support import states_equal


def _state(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "model": {"layer.0.weight": rng.standard_normal((64, 32)).astype(np.float32),
                  "layer.0.bias": rng.standard_normal(32).astype(np.float16),
                  "emb/table": rng.integers(0, 1 << 30, (100, 8), dtype=np.int64)},
        "optim": {"state": {0: {"step": 17, "exp_avg": rng.standard_normal(5).astype(np.float64)},
                            1: {"step": 18, "exp_avg": rng.standard_normal(3).astype(np.float64)}},
                  "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1], "name": None}]},
        "tuple": (np.arange(7, dtype=np.uint8), 3.5, "text"),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "scalar_array": np.array(2.5, dtype=np.float32),
        "flag": True,
    }


@pytest.mark.parametrize("async_", [True, False])
def test_round_trip(tmp_path: Path, async_: bool) -> None:
    path = tmp_path / "ckpt.h5"
    state = _state(1)
    h = h5gds.save(state, path, async_=async_)
    h.wait()
    assert h.done() and h.exception() is None
    assert h.durable_s is not None and h.durable_s >= h.stall_s >= 0
    back = h5gds.load(path, device="cpu")
    assert states_equal(state, back)
    assert not list(tmp_path.glob("*.h5gds-tmp-*")), "temporary file left behind"


def test_plain_hdf5_read_by_h5py(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.h5"
    state = _state(2)
    h5gds.save(state, path).wait()
    with h5py.File(path, "r") as f:  # h5py's default driver
        np.testing.assert_array_equal(f["model/layer.0.weight"][...], state["model"]["layer.0.weight"])
        np.testing.assert_array_equal(f["model/emb%2Ftable"][...], state["model"]["emb/table"])
        np.testing.assert_array_equal(f["optim/state/0/exp_avg"][...], state["optim"]["state"][0]["exp_avg"])


def test_non_ascii_names_are_utf8_links(tmp_path: Path) -> None:
    """Keys outside ASCII become links named in UTF-8 (as h5py names its
    own), for datasets and the groups made on the way to them."""
    state = {"größe": {"über": np.arange(3, dtype=np.int32)}, "naïve": np.ones(2)}
    h5gds.save(state, tmp_path / "c.h5").wait()
    with h5py.File(tmp_path / "c.h5", "r") as f:
        for parent, name in ((f, "größe"), (f["größe"], "über"), (f, "naïve")):
            assert parent.id.links.get_info(name.encode()).cset == h5py.h5t.CSET_UTF8, name
        np.testing.assert_array_equal(f["größe/über"][...], state["größe"]["über"])
    back = h5gds.load(tmp_path / "c.h5", device="cpu")
    assert states_equal(state, back)


def test_load_into_in_place(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.h5"
    h5gds.save(_state(3), path).wait()
    target = _state(4)
    weight = target["model"]["layer.0.weight"]
    out = h5gds.load(path, into=target)
    assert out is target and target["model"]["layer.0.weight"] is weight
    assert states_equal(target, _state(3))
    bad = _state(4)
    bad["model"]["layer.0.weight"] = np.zeros((3, 3), np.float32)
    with pytest.raises(ValueError, match="layer.0.weight"):
        h5gds.load(path, into=bad)


def test_unsupported_values_raise(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        h5gds.save({"x": object()}, tmp_path / "a.h5")
    with pytest.raises(TypeError):
        h5gds.save({(1, 2): np.zeros(2)}, tmp_path / "b.h5")
    assert not (tmp_path / "a.h5").exists() and not list(tmp_path.glob("*.h5gds-tmp-*"))


def _run(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_failed_save_keeps_previous(tmp_path: Path) -> None:
    """A real failure (a file-size limit: EFBIG): the save or its wait()
    raises, the previous checkpoint is intact, no temporary file is left."""
    path = tmp_path / "ckpt.h5"
    h5gds.save({"w": np.arange(1000, dtype=np.float64)}, path).wait()
    p = _run("""
        import resource, signal, sys
        import numpy as np, h5gds
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, resource.RLIM_INFINITY))
        try:  # the call itself fails where the limit is met before a write is deferred
            h5gds.save({"w": np.ones(4 << 20, dtype=np.float64)}, sys.argv[1]).wait()
        except OSError as exc:
            print("FAILED:", exc)
            sys.exit(3)
        sys.exit(0)
    """, str(path))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 3, (out, err)
    assert "File too large" in out, out
    back = h5gds.load(path, device="cpu")
    np.testing.assert_array_equal(back["w"], np.arange(1000, dtype=np.float64))
    assert not list(tmp_path.glob("*.h5gds-tmp-*"))


def test_killed_saver_keeps_a_checkpoint(tmp_path: Path) -> None:
    """A process saving again and again is killed (SIGKILL) at random
    moments: the checkpoint at the path always loads and is one version."""
    path = tmp_path / "ckpt.h5"
    rng = np.random.default_rng(0)
    for round_ in range(4):
        p = _run("""
            import sys
            import numpy as np, h5gds
            i = 0
            while True:
                h5gds.save({"v": np.full(1 << 20, i, dtype=np.int32), "i": i}, sys.argv[1]).wait()
                print(i, flush=True)
                i += 1
        """, str(path))
        first = p.stdout.readline()  # at least one checkpoint exists
        assert first.strip() == "0", p.stderr.read()
        import time
        time.sleep(float(rng.uniform(0.05, 0.4)))
        p.send_signal(signal.SIGKILL)
        p.wait()
        back = h5gds.load(path, device="cpu")
        assert np.all(back["v"] == back["i"]), f"round {round_}: a mixed checkpoint"


def _can_fallocate(d: Path) -> bool:
    probe = d / "fallocate-probe"
    fd = os.open(probe, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        probe.unlink()


@pytest.mark.parametrize("async_", [True, False])
def test_all_leaves_created_before_written(tmp_path: Path, async_: bool) -> None:
    """save creates every dataset before writing any, so the driver reserves
    the file's space once, before the first large write, covering every
    leaf (their direct writes then run side by side, see gds_file_reserve)."""
    if not _can_fallocate(tmp_path):
        pytest.skip("this file system has no fallocate: nothing is reserved")
    rng = np.random.default_rng(5)
    state = {f"w{i}": rng.standard_normal(1 << 19).astype(np.float32) for i in range(8)}  # 2 MiB each
    h = h5gds.save(state, tmp_path / "c.h5", async_=async_)
    h.wait()
    total = sum(v.nbytes for v in state.values())
    assert h.reserved_bytes >= total, (h.reserved_bytes, total)
    assert h.peak_background_writes >= 1 and h.peak_busy_workers >= 1
    back = h5gds.load(tmp_path / "c.h5", device="cpu")
    assert all(np.array_equal(back[k], v) for k, v in state.items())
    with h5py.File(tmp_path / "c.h5", "r") as f:  # the reservation left no extra bytes past the data
        assert all(np.array_equal(f[k][...], v) for k, v in state.items())


def test_sync_save_overwrite_after_return(tmp_path: Path) -> None:
    """A synchronous save returns durable: changing the arrays afterwards
    changes nothing in the file."""
    state = _state(4)
    expect = _state(4)
    h5gds.save(state, tmp_path / "c.h5", async_=False)
    state["model"]["layer.0.weight"][...] = 0
    assert states_equal(expect, h5gds.load(tmp_path / "c.h5", device="cpu"))


def test_async_save_captures_containers_at_the_call(tmp_path: Path, monkeypatch) -> None:
    """Groups and attributes are written in the background, but describe
    the state as it was when save was called: changing its containers and
    plain values (and its arrays) right after save returns changes nothing
    in the checkpoint. The background part is held at its start until the
    state has changed."""
    import threading

    from h5gds import _checkpoint
    gate = threading.Event()
    finish = _checkpoint._finish

    def held_finish(*a, **k):
        assert gate.wait(30), "the test never released the background part"
        return finish(*a, **k)

    monkeypatch.setattr(_checkpoint, "_finish", held_finish)
    state = _state(6)
    expect = _state(6)
    try:
        h = h5gds.save(state, tmp_path / "c.h5")
        state["optim"]["state"][0]["step"] = 99
        state["optim"]["param_groups"][0]["lr"] = 5.0
        state["optim"]["param_groups"][0]["params"].append(2)
        state["optim"]["state"][2] = {"step": 1}
        del state["flag"]
        state["tuple"] = ()
        state["model"]["layer.0.weight"][...] = 0
        assert not h.done()
    finally:
        gate.set()
    h.wait()
    assert states_equal(expect, h5gds.load(tmp_path / "c.h5", device="cpu"))


@pytest.mark.skipif(h5py.version.hdf5_version_tuple < (1, 14, 0), reason="H5Dwrite_multi needs HDF5 >= 1.14")
def test_leaves_written_in_runs(tmp_path: Path) -> None:
    """Leaves are written in runs (one HDF5 call, one vector request to the
    driver, one write-behind snapshot each) of at most half the snapshot
    budget: 40 leaves in 2 snapshots by default; with a small budget, more
    runs, each within it. The values, read by h5py, are the leaves'."""
    rng = np.random.default_rng(9)
    state = {f"w{i}": rng.standard_normal(1 << 16) for i in range(40)}  # 512 KiB each
    state["small"] = [rng.standard_normal(7), np.zeros(0)]
    h = h5gds.save(state, tmp_path / "c.h5")
    h.wait()
    assert 1 <= h.snapshots <= 2, h.snapshots
    budget = 4 << 20
    h = h5gds.save(state, tmp_path / "d.h5", budget=budget)
    h.wait()
    assert h.snapshots >= 40 * (512 << 10) // (budget // 2), h.snapshots
    assert h.peak_snapshot_bytes <= budget
    for name in ("c.h5", "d.h5"):
        with h5py.File(tmp_path / name, "r") as f:
            assert all(np.array_equal(f[k][...], state[k]) for k in state if k != "small")
            assert np.array_equal(f["small/0"][...], state["small"][0])


@pytest.mark.skipif(h5py.version.hdf5_version_tuple < (1, 14, 0), reason="H5Dwrite_multi needs HDF5 >= 1.14")
def test_runs_gather_leaves_of_one_transfer_list(tmp_path: Path, monkeypatch) -> None:
    """Leaves on two streams, alternating (as an optimizer's state
    alternates host step counters with device tensors): each stream's
    leaves are still written together, one run per transfer list, not one
    run per leaf. Host arrays stand in, given alternating stream numbers."""
    import dataclasses

    from h5gds import _checkpoint
    rng = np.random.default_rng(11)
    state = {f"p{i}": rng.standard_normal(1 << 16) for i in range(24)}  # 512 KiB each
    real_view, count = _checkpoint._raw_view, [0]

    def view_on_alternating_streams(obj):
        count[0] += 1
        return dataclasses.replace(real_view(obj), stream=count[0] % 2)
    monkeypatch.setattr(_checkpoint, "_raw_view", view_on_alternating_streams)
    h = h5gds.save(state, tmp_path / "c.h5")
    h.wait()
    assert count[0] == len(state)
    assert 2 <= h.snapshots <= 4, h.snapshots
    back = h5gds.load(tmp_path / "c.h5", device="cpu")
    assert all(np.array_equal(back[k], v) for k, v in state.items())


def test_previous_checkpoint_freed_after_the_new_one_is_durable(tmp_path: Path) -> None:
    """Saving over a checkpoint: the previous file's blocks are freed after
    the new one is durable (its descriptor is held across the rename and
    closed in the background): the path holds the new values, and no
    descriptor of the replaced file stays open."""
    import threading
    path = tmp_path / "c.h5"
    first = {"w": np.random.default_rng(1).standard_normal(1 << 18)}
    second = {"w": np.random.default_rng(2).standard_normal(1 << 18)}
    h5gds.save(first, path).wait()
    h = h5gds.save(second, path)
    h.wait()
    assert np.array_equal(h5gds.load(path, device="cpu")["w"], second["w"])
    for t in threading.enumerate():
        if t.name == "h5gds-checkpoint-free":
            t.join()
    deleted = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}") and str(tmp_path) in os.readlink(f"/proc/self/fd/{fd}")]
    assert not deleted, deleted


# ---- snapshot memory made ready ahead (prepare_checkpoint) ----
# Observed through the process's counters (h5gds.checkpoint_memory_info) and
# the driver's log line, never through timings.

def _big_state(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal(1 << 20).astype(np.float32), "b": rng.standard_normal(100),
            "opt": {"step": 3, "m": np.ones((64, 64), dtype=np.float16)}}


def _deltas(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in ("files_ready", "files_allocated", "prepared")}


@pytest.mark.parametrize("background", [True, False])
def test_prepared_memory_is_taken_by_the_next_save(tmp_path: Path, capfd, background: bool) -> None:
    h5gds.release_checkpoint_memory()
    state = _big_state(1)
    before = h5gds.checkpoint_memory_info()
    mem = h5gds.prepare_checkpoint(state, background=background)
    mem.wait()
    assert mem.done() and mem.nbytes >= 4 << 20
    ready = h5gds.checkpoint_memory_info()
    assert _deltas(before, ready) == {"files_ready": 0, "files_allocated": 0, "prepared": 1}
    assert ready["ready_host_bytes"] == mem.nbytes and ready["preparing"] == 0
    capfd.readouterr()
    h = h5gds.save(state, tmp_path / "c.h5", log="on")
    h.wait()
    err = capfd.readouterr().err
    after = h5gds.checkpoint_memory_info()
    assert _deltas(ready, after) == {"files_ready": 1, "files_allocated": 0, "prepared": 0}
    assert h.snapshot_memory_bytes == mem.nbytes  # the prepared arena itself
    assert "ready: kept or prepared ahead" in err and "allocated now" not in err, err
    assert after["ready_host_bytes"] == mem.nbytes  # kept again for the save after
    assert states_equal(state, h5gds.load(tmp_path / "c.h5", device="cpu"))


def test_without_preparation_the_first_save_allocates(tmp_path: Path, capfd) -> None:
    h5gds.release_checkpoint_memory()
    state = _big_state(2)
    before = h5gds.checkpoint_memory_info()
    assert before["ready_host_bytes"] == before["ready_device_bytes"] == 0
    capfd.readouterr()
    h5gds.save(state, tmp_path / "a.h5", log="on").wait()
    assert "allocated now" in capfd.readouterr().err
    first = h5gds.checkpoint_memory_info()
    assert _deltas(before, first) == {"files_ready": 0, "files_allocated": 1, "prepared": 0}
    h5gds.save(state, tmp_path / "b.h5").wait()  # the steady state: the kept arena
    assert _deltas(first, h5gds.checkpoint_memory_info()) == {"files_ready": 1, "files_allocated": 0, "prepared": 0}


def test_save_during_a_background_preparation_waits_for_its_memory(tmp_path: Path) -> None:
    """The preparation is marked before prepare_checkpoint returns: a save
    right after it takes that memory, whether or not it is allocated yet,
    and never allocates a second arena."""
    h5gds.release_checkpoint_memory()
    state = _big_state(3)
    before = h5gds.checkpoint_memory_info()
    mem = h5gds.prepare_checkpoint(state)  # no wait
    h = h5gds.save(state, tmp_path / "c.h5")
    h.wait()
    mem.wait()
    assert _deltas(before, h5gds.checkpoint_memory_info()) == {"files_ready": 1, "files_allocated": 0, "prepared": 1}
    assert h.snapshot_memory_bytes == mem.nbytes


def test_prepare_when_ready_allocates_nothing(tmp_path: Path) -> None:
    h5gds.release_checkpoint_memory()
    state = _big_state(4)
    before = h5gds.checkpoint_memory_info()
    h5gds.prepare_checkpoint(state, background=False)
    h5gds.prepare_checkpoint(state).wait()  # the same again
    h5gds.prepare_checkpoint(1 << 20, memory="host").wait()  # smaller
    h5gds.save(state, tmp_path / "c.h5").wait()
    h5gds.prepare_checkpoint(state).wait()  # kept by that save
    assert _deltas(before, h5gds.checkpoint_memory_info()) == {"files_ready": 1, "files_allocated": 0, "prepared": 1}


def test_prepare_by_size_covers_the_state(tmp_path: Path) -> None:
    """A number of bytes: the state's size with room for its arrays'
    alignment added, so the save of a state of that size takes it."""
    h5gds.release_checkpoint_memory()
    state = {f"a{i}": np.full(8192 + i, i, dtype=np.float64) for i in range(300)}  # 300 arrays, odd sizes
    nbytes = sum(a.nbytes for a in state.values())
    mem = h5gds.prepare_checkpoint(nbytes, memory="host", background=False)
    assert mem.nbytes > nbytes
    before = h5gds.checkpoint_memory_info()
    h5gds.save(state, tmp_path / "c.h5").wait()
    assert _deltas(before, h5gds.checkpoint_memory_info())["files_ready"] == 1


def test_release_frees_the_kept_memory(tmp_path: Path) -> None:
    h5gds.prepare_checkpoint(_big_state(5), background=False)
    assert h5gds.checkpoint_memory_info()["ready_host_bytes"] > 0
    h5gds.release_checkpoint_memory()
    info = h5gds.checkpoint_memory_info()
    assert info["ready_host_bytes"] == info["ready_device_bytes"] == 0
    h5gds.save(_big_state(5), tmp_path / "c.h5").wait()
    assert _deltas(info, h5gds.checkpoint_memory_info())["files_allocated"] == 1


@pytest.mark.parametrize("background", [True, False])
def test_prepare_more_than_the_machine_has_fails(background: bool) -> None:
    machine = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    before = h5gds.checkpoint_memory_info()
    with pytest.raises(MemoryError, match=r"more than this machine's \d+ bytes"):
        h5gds.prepare_checkpoint(2 * machine, memory="host", background=background)
    after = h5gds.checkpoint_memory_info()
    assert after["prepared"] == before["prepared"] and after["preparing"] == 0


def test_prepare_arguments() -> None:
    state = _big_state(6)
    with pytest.raises(ValueError, match="memory must be"):
        h5gds.prepare_checkpoint(state, memory="gpu")
    with pytest.raises(ValueError, match="positive number of bytes"):
        h5gds.prepare_checkpoint(0)
    with pytest.raises(ValueError, match="positive number of bytes"):
        h5gds.prepare_checkpoint(-5)
    with pytest.raises(TypeError, match="not a bool"):
        h5gds.prepare_checkpoint(True)
    with pytest.raises(ValueError, match="host memory"):
        h5gds.prepare_checkpoint(state, memory="device")  # host arrays: their save snapshots into host memory
    assert h5gds.prepare_checkpoint({"n": 1, "s": "x"}).nbytes == 0  # nothing to snapshot: nothing prepared
    # device memory by size needs a CUDA context on the calling thread: a new
    # thread has none, on a machine with a GPU too
    import threading
    caught: list[BaseException] = []

    def run() -> None:
        try:
            h5gds.prepare_checkpoint(1 << 20, memory="device")
        except BaseException as exc:  # noqa: BLE001 - checked below
            caught.append(exc)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert len(caught) == 1 and isinstance(caught[0], ValueError), caught
    assert "needs a CUDA context" in str(caught[0])


def test_memory_handle_wait_with_timeout() -> None:
    mem = h5gds.prepare_checkpoint(_big_state(7))
    mem.wait(timeout=60)
    mem.wait()  # asked again: the same answer
    assert mem.done() and "ready" in repr(mem)
    del mem  # the handle given back


def test_prepare_with_a_path_warms_the_engine_there(tmp_path: Path) -> None:
    """With a path, a small save into a temporary file in that directory
    (removed after) starts the engine; it takes the prepared memory and gives
    it back, so the real save finds it ready."""
    h5gds.release_checkpoint_memory()
    state = _big_state(8)
    before = h5gds.checkpoint_memory_info()
    mem = h5gds.prepare_checkpoint(state, path=tmp_path / "ckpt.h5")
    mem.wait()
    assert mem.done() and os.listdir(tmp_path) == []  # the warm-up's file is gone
    warm = h5gds.checkpoint_memory_info()
    assert _deltas(before, warm) == {"files_ready": 1, "files_allocated": 0, "prepared": 1}
    h = h5gds.save(state, tmp_path / "ckpt.h5")
    h.wait()
    assert _deltas(warm, h5gds.checkpoint_memory_info()) == {"files_ready": 1, "files_allocated": 0, "prepared": 0}
    assert h.snapshot_memory_bytes == mem.nbytes and os.listdir(tmp_path) == ["ckpt.h5"]
    assert states_equal(state, h5gds.load(tmp_path / "ckpt.h5", device="cpu"))


def test_save_during_a_warm_up_waits_for_it(tmp_path: Path) -> None:
    h5gds.release_checkpoint_memory()
    state = _big_state(9)
    before = h5gds.checkpoint_memory_info()
    mem = h5gds.prepare_checkpoint(state, path=tmp_path)  # a directory; no wait
    h = h5gds.save(state, tmp_path / "ckpt.h5")
    assert mem.done()  # the save waited for the warm-up before it began
    h.wait()
    mem.wait()
    assert _deltas(before, h5gds.checkpoint_memory_info()) == {"files_ready": 2, "files_allocated": 0, "prepared": 1}
    assert os.listdir(tmp_path) == ["ckpt.h5"]


def test_prepare_with_a_missing_directory_fails(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such directory"):
        h5gds.prepare_checkpoint(_big_state(10), path=tmp_path / "nowhere" / "ckpt.h5")


def test_bench_summary_keeps_first_and_steady_apart() -> None:
    from h5gds.bench import checkpoint as bench
    rows = [dict(bench="checkpoint", state="s", method="h5gds-async", memory="device", phase=phase, prepared=prep,
                 stall_s=str(stall), durable_s="2.0")
            for phase, prep, stall in (("first", "no", 1.5), ("first", "ahead", 0.03), ("steady", "-", 0.02),
                                       ("steady", "-", 0.04))]
    lines = bench.summary(rows)
    assert len(lines) == 3, lines
    assert any("| first | no |" in ln and "1.500" in ln for ln in lines)
    assert any("| first | ahead |" in ln and "0.030" in ln for ln in lines)
    assert any("| steady | - |" in ln and "0.030" in ln for ln in lines)  # the median of the two


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_big_endian_leaves_load_with_their_values(tmp_path, compression):
    """numpy arrays stored big-endian load with their values (native order),
    not their bytes reinterpreted."""
    state = {"a": np.arange(40000, dtype=">i4"), "f": np.linspace(-2, 2, 20000).astype(">f8"),
             "n": np.arange(6, dtype="<i2"), "c": (np.arange(9000) * (1 + 1j)).astype(">c8")}
    p = tmp_path / "be.h5"
    h5gds.save(state, p, compression=compression).wait()
    out = h5gds.load(p)
    for k, v in state.items():
        assert out[k].dtype == v.dtype.newbyteorder("=") and out[k].dtype.isnative
        assert np.array_equal(out[k], v), k
    into = {k: np.zeros(v.shape, v.dtype.newbyteorder("=")) for k, v in state.items()}
    h5gds.load(p, into=into)
    assert all(np.array_equal(into[k], v) for k, v in state.items())


def test_load_into_a_state_of_other_keys_refused(tmp_path):
    """into= is read in place only into the same structure: a key missing
    on either side is a KeyError naming it, raised before anything is read."""
    p = tmp_path / "k.h5"
    h5gds.save({"layer1.weight": np.ones(4), "inner": {"b": np.ones(2)}}, p).wait()
    state = {"layer1.weights": np.zeros(4), "inner": {"b": np.zeros(2)}}
    with pytest.raises(KeyError, match=r"only in the state: \['layer1.weights'\].*only in the checkpoint: "
                                       r"\['layer1.weight'\]"):
        h5gds.load(p, into=state)
    assert sorted(state) == ["inner", "layer1.weights"] and not state["layer1.weights"].any()
    state = {"layer1.weight": np.zeros(4), "inner": {"b": np.zeros(2), "c": np.zeros(1)}}
    with pytest.raises(KeyError, match=r"/inner: .*only in the state: \['c'\]"):
        h5gds.load(p, into=state)
    assert not state["layer1.weight"].any() and not state["inner"]["b"].any()  # nothing read
    state = {"layer1.weight": np.zeros(4), "inner": {"b": np.zeros(3)}}
    with pytest.raises(ValueError, match="/inner/b"):
        h5gds.load(p, into=state)
    assert not state["layer1.weight"].any()


def test_saves_of_one_path_in_flight_at_once(tmp_path):
    """A loop saving one path without waiting: every save succeeds, each
    renames after the one before it, and the last call's state is left."""
    p = tmp_path / "latest.h5"
    handles = [h5gds.save({"v": np.full(size, i, "f4"), "i": i}, p)
               for i, size in enumerate([8 << 20, 1024, 4 << 20, 16])]
    for h in handles:
        h.wait()
    assert h5gds.load(p)["i"] == 3 and h5gds.load(p)["v"].tolist() == [3.0] * 16
    assert sorted(os.listdir(tmp_path)) == ["latest.h5"]  # no temporary file left


def test_saves_of_one_path_in_order_when_one_fails(tmp_path, monkeypatch):
    """A save between two others fails in its background part: the last
    call's checkpoint is still the one left, after the first's rename."""
    import h5gds._checkpoint as ck
    write = ck._Metadata.write

    def failing_write(self, f, path):
        if any("boom" in str(a.get("h5gds_values", "")) for _, a in self.plan):
            raise OSError("a metadata write that fails (test)")
        return write(self, f, path)

    monkeypatch.setattr(ck._Metadata, "write", failing_write)
    p = tmp_path / "latest.h5"
    first = h5gds.save({"v": np.full(16 << 20, 1, "f4"), "i": 1}, p)
    second = h5gds.save({"v": np.ones(4, "f4"), "i": 2, "boom": 1}, p)
    third = h5gds.save({"v": np.ones(4, "f4"), "i": 3}, p)
    third.wait()
    assert first.done() and second.done()
    with pytest.raises(OSError, match="fails"):
        second.wait()
    first.wait()
    assert h5gds.load(p)["i"] == 3


def test_keys_and_scalars_of_a_state(tmp_path):
    """numpy scalars (a step counter, a loss) load with their dtype; bool
    keys, which load could not tell from int ones, and keys stored under one
    name are refused before any file is made."""
    p = tmp_path / "s.h5"
    state = {"step": np.int64(7), "loss": np.float32(0.25), "flag": np.bool_(True), "lr": [np.float32(0.5), 2],
             "w": np.ones(3)}
    h5gds.save(state, p).wait()
    out = h5gds.load(p)
    for k in ("step", "loss", "flag"):
        assert type(out[k]) is type(state[k]) and out[k] == state[k], k
    assert type(out["lr"][0]) is np.float32 and out["lr"] == [0.5, 2]
    with pytest.raises(TypeError, match="not bool"):
        h5gds.save({True: np.ones(2)}, tmp_path / "b.h5")
    with pytest.raises(ValueError, match="one name"):
        h5gds.save({5: np.ones(2), "5": np.ones(2)}, tmp_path / "c.h5")
    assert sorted(os.listdir(tmp_path)) == ["s.h5"]
