"""Checkpoints of device state (marker gpu): torch tensors of every dtype
(bfloat16 included) and CuPy arrays; the state changes right after save()
returns and the checkpoint still holds the snapshot; device and pinned host
snapshots; h5py reads the file, converting bfloat16."""
from __future__ import annotations

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
