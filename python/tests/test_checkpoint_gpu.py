"""Checkpoints of device state (marker gpu): torch tensors of every dtype
(bfloat16 included) and CuPy arrays; the state changes right after save()
returns and the checkpoint still holds the snapshot; device and pinned host
snapshots; h5py reads the file, converting bfloat16."""
from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pytest

import h5gds

pytestmark = pytest.mark.gpu


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not importable")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")
    return torch


@pytest.mark.parametrize("memory", ["device", "host"])
def test_snapshot_survives_changes(tmp_path: Path, memory: str) -> None:
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(1)
    state = {
        "w16": torch.randn(1024, 1024, device="cuda", generator=g).half(),
        "wbf": torch.randn(777, 513, device="cuda", generator=g).bfloat16(),
        "w32": torch.randn(1 << 20, device="cuda", generator=g),
        "i64": torch.randint(0, 1 << 40, (1000,), device="cuda", generator=g),
        "mask": torch.rand(4096, device="cuda", generator=g) > 0.5,
        "opt": {"state": {0: {"step": 5, "m": torch.zeros(3, device="cuda")}}, "lr": 0.1},
        "cpu": torch.arange(10),
    }
    expect = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in state.items()}
    h = h5gds.save(state, tmp_path / "c.h5", memory=memory)
    for k in ("w16", "wbf", "w32", "i64"):
        state[k].zero_()  # the loop goes on at once
    h.wait()
    assert h.stall_s < h.durable_s
    back = h5gds.load(tmp_path / "c.h5", device="cuda")
    for k in ("w16", "wbf", "w32", "i64", "mask"):
        assert back[k].dtype == expect[k].dtype and back[k].is_cuda
        assert torch.equal(back[k], expect[k]), k
    assert back["opt"]["state"][0]["step"] == 5 and back["opt"]["lr"] == 0.1
    assert not back["cpu"].is_cuda or back["cpu"].device.type == "cuda"
    assert torch.equal(back["cpu"].cpu(), expect["cpu"])
    # into: in place, on the device
    h5gds.load(tmp_path / "c.h5", into=state)
    assert torch.equal(state["wbf"], expect["wbf"])
    # h5py reads it (bfloat16 converted by HDF5 to the float type h5py picks)
    with h5py.File(tmp_path / "c.h5", "r") as f:
        np.testing.assert_allclose(f["wbf"][...].astype(np.float32), expect["wbf"].float().cpu().numpy(),
                                   rtol=1e-2, atol=1e-2)
        np.testing.assert_array_equal(f["w32"][...], expect["w32"].cpu().numpy())


def test_cupy_state(tmp_path: Path) -> None:
    try:
        import cupy
    except ImportError:
        pytest.skip("CuPy is not importable")
    a = cupy.random.default_rng(2).random((300, 200), dtype=cupy.float32)
    h5gds.save({"a": a, "b": [a[:10].copy(), 3]}, tmp_path / "c.h5").wait()
    back = h5gds.load(tmp_path / "c.h5")
    assert isinstance(back["a"], cupy.ndarray) and bool((back["a"] == a).all())
    assert back["b"][1] == 3


# ---- ordering of device snapshots (the CPU does not wait for the copy) ----
# save() returns once the snapshot copies are queued; the application's
# stream waits for them. Work queued afterwards on that stream (a kernel
# overwriting the tensors) must not reach the checkpoint; work queued before
# (a long kernel writing the tensors) must.

def _big_state(torch, n: int = 8, elems: int = 1 << 24) -> dict:
    g = torch.Generator(device="cuda").manual_seed(3)
    return {f"t{i}": torch.randn(elems, device="cuda", generator=g) for i in range(n)}


def _check(torch, path: Path, expect: dict) -> None:
    back = h5gds.load(path, device="cuda")
    for k, v in expect.items():
        assert torch.equal(back[k], v), f"{k}: the checkpoint does not hold the state save() was given"


def test_overwrite_on_legacy_stream_right_after_save(tmp_path: Path) -> None:
    torch = _torch()
    state = _big_state(torch)
    expect = {k: v.clone() for k, v in state.items()}
    torch.cuda.synchronize()
    h = h5gds.save(state, tmp_path / "c.h5", memory="device")
    for v in state.values():  # kernels on the legacy default stream (torch's default), queued at once
        v.fill_(-7.0)
    h.wait()
    # the path without a CPU wait was taken (every snapshot stream-ordered;
    # the tensors are written in runs, one snapshot per run)
    assert h.snapshots >= 1 and h.stream_ordered_snapshots == h.snapshots, (h.snapshots, h.stream_ordered_snapshots)
    _check(torch, tmp_path / "c.h5", expect)


def test_long_kernel_before_save_is_waited_for(tmp_path: Path) -> None:
    torch = _torch()
    state = _big_state(torch)
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # a long kernel (about 0.1 s) on the legacy stream, then the real values
    for i, v in enumerate(state.values()):
        v.fill_(float(i + 1))
    expect = {k: torch.full_like(v, float(i + 1)) for i, (k, v) in enumerate(state.items())}
    h = h5gds.save(state, tmp_path / "c.h5", memory="device")
    for v in state.values():
        v.add_(100.0)  # after save returns: must not be in the checkpoint
    h.wait()
    _check(torch, tmp_path / "c.h5", expect)


def test_own_stream_ordering(tmp_path: Path) -> None:
    torch = _torch()
    state = _big_state(torch, n=4)
    s = torch.cuda.Stream()  # torch's streams are non-blocking: only the stream ordering (dxpl) orders them
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(100_000_000)
        for v in state.values():
            v.mul_(2.0)
        expect = {k: v.clone() for k, v in state.items()}  # queued on s too: the doubled values
        h = h5gds.save(state, tmp_path / "c.h5", memory="device")
        for v in state.values():
            v.zero_()
    h.wait()
    torch.cuda.synchronize()
    _check(torch, tmp_path / "c.h5", expect)


def test_host_snapshots_wait_on_the_cpu(tmp_path: Path) -> None:
    torch = _torch()
    state = _big_state(torch, n=2, elems=1 << 20)
    expect = {k: v.clone() for k, v in state.items()}
    h = h5gds.save(state, tmp_path / "c.h5", memory="host")
    for v in state.values():
        v.fill_(3.0)
    h.wait()
    assert h.stream_ordered_snapshots == 0  # host snapshots are complete when save returns
    _check(torch, tmp_path / "c.h5", expect)


def test_sync_save_same_path(tmp_path: Path) -> None:
    torch = _torch()
    state = _big_state(torch, n=4)
    expect = {k: v.clone() for k, v in state.items()}
    h = h5gds.save(state, tmp_path / "c.h5", async_=False)
    for v in state.values():
        v.zero_()
    assert h.done()
    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        can_reserve = True
    except OSError:
        can_reserve = False
    finally:
        os.close(fd)
    if can_reserve:  # every leaf created before any was written: one reservation covering them all
        assert h.reserved_bytes >= sum(v.numel() * 4 for v in expect.values())
    _check(torch, tmp_path / "c.h5", expect)


# ---- snapshot memory made ready ahead (prepare_checkpoint), device state ----

def _deltas(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in ("files_ready", "files_allocated", "prepared")}


@pytest.mark.parametrize("memory", ["device", "host", "auto"])
@pytest.mark.parametrize("wait_first", [True, False])
def test_prepared_device_state_memory_is_taken(tmp_path: Path, memory: str, wait_first: bool) -> None:
    """Device (or pinned host) memory prepared for a device state is the
    memory the next save snapshots into; a save started while it is being
    prepared waits for it rather than allocating its own."""
    torch = _torch()
    h5gds.release_checkpoint_memory()
    g = torch.Generator(device="cuda").manual_seed(3)
    state = {"w": torch.randn(4096, 1024, device="cuda", generator=g).half(),
             "b": torch.randn(1 << 20, device="cuda", generator=g), "step": 7}
    expect = {k: v.clone() for k, v in state.items() if hasattr(v, "clone")}
    before = h5gds.checkpoint_memory_info()
    mem = h5gds.prepare_checkpoint(state, memory=memory)  # in the background
    if wait_first:
        mem.wait()
        ready = h5gds.checkpoint_memory_info()
        assert _deltas(before, ready)["prepared"] == 1 and ready["preparing"] == 0
        if memory == "host":
            assert ready["ready_host_bytes"] == mem.nbytes and ready["ready_host_pinned"] == 1
        else:  # auto: device memory, the device has the room
            assert ready["ready_device_bytes"] == mem.nbytes
    h = h5gds.save(state, tmp_path / "c.h5", memory=memory)
    state["w"].zero_()
    h.wait()
    mem.wait()
    assert _deltas(before, h5gds.checkpoint_memory_info()) == {"files_ready": 1, "files_allocated": 0, "prepared": 1}
    assert h.snapshot_memory_bytes == mem.nbytes
    back = h5gds.load(tmp_path / "c.h5", device="cuda")
    assert torch.equal(back["w"], expect["w"]) and torch.equal(back["b"], expect["b"]) and back["step"] == 7


def test_prepare_with_a_path_device_state(tmp_path: Path) -> None:
    """The warm-up (a 256 MiB device save into the checkpoint's directory,
    removed after) takes the prepared device memory and gives it back: the
    first real save allocates nothing and is correct."""
    torch = _torch()
    h5gds.release_checkpoint_memory()
    state = {f"w{i}": torch.full((8 << 20,), float(i), device="cuda") for i in range(12)}  # 384 MiB
    before = h5gds.checkpoint_memory_info()
    mem = h5gds.prepare_checkpoint(state, memory="device", path=tmp_path / "ckpt.h5")
    mem.wait()
    assert os.listdir(tmp_path) == []
    warm = h5gds.checkpoint_memory_info()
    assert _deltas(before, warm) == {"files_ready": 1, "files_allocated": 0, "prepared": 1}
    assert warm["ready_device_bytes"] == mem.nbytes
    h = h5gds.save(state, tmp_path / "ckpt.h5", memory="device")
    h.wait()
    assert _deltas(warm, h5gds.checkpoint_memory_info())["files_allocated"] == 0
    back = h5gds.load(tmp_path / "ckpt.h5", device="cuda")
    assert all(torch.equal(back[k], v) for k, v in state.items())


def test_prepared_memory_of_the_state_device() -> None:
    """The memory is of the device the state's first array is on (its
    context), whichever device is current."""
    torch = _torch()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    h5gds.release_checkpoint_memory()
    state = {"w": torch.ones(64 << 20, device="cuda:1")}  # 256 MiB
    free_before = [torch.cuda.mem_get_info(i)[0] for i in (0, 1)]
    with torch.cuda.device(0):
        mem = h5gds.prepare_checkpoint(state, memory="device", background=False)
    free_after = [torch.cuda.mem_get_info(i)[0] for i in (0, 1)]
    assert free_before[1] - free_after[1] >= mem.nbytes  # on device 1
    assert free_before[0] - free_after[0] < mem.nbytes // 2
    h5gds.release_checkpoint_memory()


def test_prepare_more_device_memory_than_free_fails() -> None:
    torch = _torch()
    free, total = torch.cuda.mem_get_info()
    before = h5gds.checkpoint_memory_info()
    with pytest.raises(MemoryError, match="device"):
        h5gds.prepare_checkpoint(free, memory="device").wait()
    with pytest.raises(MemoryError, match=r"more than the device's \d+ bytes"):
        h5gds.prepare_checkpoint(2 * total, memory="device")
    after = h5gds.checkpoint_memory_info()
    assert after["prepared"] == before["prepared"] and after["preparing"] == 0
