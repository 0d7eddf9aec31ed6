"""Checkpoints with compressed leaves (h5gds.save(..., compression=...)):
round trips through h5gds.load and plain h5py (+ hdf5plugin) for each
compressor, small leaves left contiguous, the default writing no filters,
chunk shapes, the snapshot taken before save returns, background failures
as without compression, wrong arguments refused before a file exists.
GPU tests (marker gpu): CuPy and torch leaves compressed on the GPU (route
gpu-encode where nvCOMP is installed) and read back equal."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import h5gds
from support import hdf5plugin_or_none, states_equal
from h5gds import _checkpoint

hdf5plugin = hdf5plugin_or_none()

NEEDS_PLUGIN = pytest.mark.skipif(hdf5plugin is None, reason="hdf5plugin is not installed (pip install hdf5plugin): "
                                  "the lz4, zstd and bitshuffle-lz4 filters are its")

# compression= value, the HDF5 filter id stored, byte shuffle expected before it
COMPRESSIONS = [
    pytest.param("gzip", 1, True, id="gzip"),
    pytest.param("lz4", 32004, True, id="lz4", marks=NEEDS_PLUGIN),
    pytest.param("zstd", 32015, True, id="zstd", marks=NEEDS_PLUGIN),
    pytest.param("bitshuffle-lz4", 32008, False, id="bitshuffle-lz4", marks=NEEDS_PLUGIN),
]


def _filters(dset: h5py.Dataset) -> list[int]:
    dcpl = dset.id.get_create_plist()
    return [dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters())]


def _field(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """float32 weights kept to 3 decimals: they compress, not to nothing."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32).round(3)


def _state(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "model": {"layer.0.weight": _field((512, 256), seed),                 # 512 KiB: compressed
                  "layer.0.bias": rng.standard_normal(256).astype(np.float32),  # 1 KiB: not
                  "emb/table": rng.integers(0, 1000, (3000, 16), dtype=np.int64),  # 375 KiB
                  "half": _field((300, 300), seed + 1).astype(np.float16),     # 176 KiB, 3-D below
                  "cube": rng.integers(0, 7, (40, 50, 60), dtype=np.uint8)},   # 117 KiB, 1-byte elements
        "optim": {"state": {0: {"step": 17, "exp_avg": _field((70_000,), seed + 2).astype(np.float64)}},
                  "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0]}]},
        "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "flag": True,
    }


LARGE = ["model/layer.0.weight", "model/emb%2Ftable", "model/half", "model/cube", "optim/state/0/exp_avg"]
SMALL = ["model/layer.0.bias", "scalar", "empty"]


def _get(state: dict, path: str) -> Any:
    for part in path.split("/"):
        part = part.replace("%2F", "/")
        state = state[int(part)] if isinstance(state, dict) and part.isdigit() and int(part) in state else state[part]
    return state


@pytest.mark.parametrize("async_", [True, False], ids=["async", "sync"])
@pytest.mark.parametrize("compression,filter_id,shuffled", COMPRESSIONS)
def test_round_trip(tmp_path: Path, compression: str, filter_id: int, shuffled: bool, async_: bool) -> None:
    path = tmp_path / "ckpt.h5"
    state = _state(1)
    h = h5gds.save(state, path, compression=compression, async_=async_)
    h.wait()
    assert h.exception() is None and not list(tmp_path.glob("*.h5gds-tmp-*"))
    assert sum(h.compression_routes.values()) == len(LARGE), h.compression_routes
    assert set(h.compression_routes) == {"host"}  # host arrays: HDF5's filters
    assert states_equal(state, h5gds.load(path, device="cpu"))
    with h5py.File(path, "r") as f:  # h5py's own driver and filters (hdf5plugin's, imported above)
        for name in LARGE:
            d = f[name]
            np.testing.assert_array_equal(d[...], _get(state, name))
            expect = [2, filter_id] if shuffled and d.dtype.itemsize > 1 else [filter_id]
            assert _filters(d) == expect, (name, _filters(d))
            assert d.chunks is not None and d.chunks[1:] == d.shape[1:]  # whole rows
        assert f["model/layer.0.weight"].id.get_storage_size() < state["model"]["layer.0.weight"].nbytes
        for name in SMALL:
            assert f[name].compression is None and f[name].chunks is None and _filters(f[name]) == [], name


def test_filter_objects_ids_and_mappings(tmp_path: Path) -> None:
    """h5py's ways of naming a filter: an hdf5plugin object, an HDF5 filter
    id with its parameters, h5py's keywords as a mapping; no byte shuffle
    unless asked for (exactly the pipeline given)."""
    w = _field((400, 400), 3)
    cases: list[tuple[dict[str, Any], list[int]]] = [
        ({"compression": 1, "compression_opts": (6,)}, [1]),
        ({"compression": {"compression": "gzip", "compression_opts": 9}}, [2, 1]),
        ({"compression": 1, "shuffle": True}, [2, 1]),
        ({"compression": "gzip", "shuffle": False}, [1]),
        ({"compression": "lzf"}, [2, 32000]),
    ]
    if hdf5plugin is not None:
        cases += [({"compression": hdf5plugin.Zstd(clevel=9)}, [32015]),
                  ({"compression": hdf5plugin.Bitshuffle(cname="zstd")}, [32008]),
                  ({"compression": "zstd", "compression_opts": 1}, [2, 32015])]
    for i, (kw, pipeline) in enumerate(cases):
        h5gds.save({"w": w}, tmp_path / f"c{i}.h5", **kw).wait()
        with h5py.File(tmp_path / f"c{i}.h5", "r") as f:
            assert _filters(f["w"]) == pipeline, (kw, _filters(f["w"]))
            np.testing.assert_array_equal(f["w"][...], w)
        np.testing.assert_array_equal(h5gds.load(tmp_path / f"c{i}.h5", device="cpu")["w"], w)


def test_level_is_stored(tmp_path: Path) -> None:
    h5gds.save({"w": _field((300, 300), 4)}, tmp_path / "c.h5", compression="gzip", compression_opts=7).wait()
    with h5py.File(tmp_path / "c.h5", "r") as f:
        assert f["w"].compression == "gzip" and f["w"].compression_opts == 7 and f["w"].shuffle


def test_default_writes_no_filters(tmp_path: Path) -> None:
    state = _state(2)
    h = h5gds.save(state, tmp_path / "c.h5")
    h.wait()
    assert h.compression_routes == {} and "copy" not in h.timings
    with h5py.File(tmp_path / "c.h5", "r") as f:
        names: list[str] = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        assert len(names) == len(LARGE) + len(SMALL)
        for name in names:
            assert f[name].chunks is None and _filters(f[name]) == [], name


def test_small_leaves_stay_uncompressed(tmp_path: Path) -> None:
    """Leaves below compress_min_bytes (64 KiB by default) are contiguous;
    the threshold is inclusive; compress_min_bytes=0 compresses every
    non-empty array (scalars and empty arrays never: they have no chunks)."""
    below = np.arange((64 << 10) // 8 - 1, dtype=np.float64)
    at = np.arange((64 << 10) // 8, dtype=np.float64)
    state = {"below": below, "at": at, "tiny": np.arange(3, dtype=np.int32), "scalar": np.array(1.0),
             "empty": np.zeros(0)}
    h5gds.save(state, tmp_path / "a.h5", compression="gzip").wait()
    h5gds.save(state, tmp_path / "b.h5", compression="gzip", compress_min_bytes=0).wait()
    with h5py.File(tmp_path / "a.h5", "r") as a, h5py.File(tmp_path / "b.h5", "r") as b:
        assert a["below"].compression is None and a["tiny"].compression is None
        assert a["at"].compression == "gzip"
        assert b["below"].compression == "gzip" and b["tiny"].compression == "gzip"
        for f in (a, b):
            assert f["scalar"].compression is None and f["empty"].compression is None
            for k, v in state.items():
                np.testing.assert_array_equal(f[k][...], v)
    for name in ("a.h5", "b.h5"):
        assert states_equal(state, h5gds.load(tmp_path / name, device="cpu"))


def test_chunk_shapes() -> None:
    """At most 4 MiB, whole rows along the first axis where a row fits."""
    assert _checkpoint._chunk_shape((4096, 1024), 4) == (1024, 1024)  # 4 MiB of whole rows
    assert _checkpoint._chunk_shape((3000, 700), 2) == (2995, 700)
    assert _checkpoint._chunk_shape((100, 50), 8) == (100, 50)  # smaller than a chunk: one chunk
    assert _checkpoint._chunk_shape((1 << 24,), 4) == (1 << 20,)
    assert _checkpoint._chunk_shape((2, 3 << 20), 4) == (1, 1 << 20)  # a row of 12 MiB: split
    assert _checkpoint._chunk_shape((3, 5, 1 << 20), 1) == (1, 4, 1 << 20)
    assert _checkpoint._chunk_shape((7, 9, 11), 1) == (7, 9, 11)


def test_large_leaf_in_slabs(tmp_path: Path) -> None:
    """A leaf of many chunks, written in several slabs (host slabs are 8 MiB),
    rows that are split into chunks too, and an edge chunk in each axis."""
    rng = np.random.default_rng(7)
    state = {"rows": rng.integers(0, 50, (5000, 999), dtype=np.int32),          # 19 MiB, edge chunk
             "wide": rng.integers(0, 9, (3, (5 << 20) + 17), dtype=np.int8)}   # rows of 5 MiB: split
    h5gds.save(state, tmp_path / "c.h5", compression="gzip", compression_opts=1).wait()
    with h5py.File(tmp_path / "c.h5", "r") as f:
        assert f["rows"].chunks == (1049, 999) and f["wide"].chunks == (1, 4 << 20)
        for k, v in state.items():
            np.testing.assert_array_equal(f[k][...], v)
    assert states_equal(state, h5gds.load(tmp_path / "c.h5", device="cpu"))


def test_load_into_in_place(tmp_path: Path) -> None:
    h5gds.save(_state(3), tmp_path / "c.h5", compression="gzip").wait()
    target = _state(4)
    weight = target["model"]["layer.0.weight"]
    assert h5gds.load(tmp_path / "c.h5", into=target) is target
    assert target["model"]["layer.0.weight"] is weight and states_equal(target, _state(3))


@NEEDS_PLUGIN
def test_plain_h5py_reader_in_a_fresh_process(tmp_path: Path) -> None:
    """A reader that knows nothing of h5gds (h5py and hdf5plugin only) opens
    the checkpoint and reads every leaf equal."""
    state = _state(5)
    for compression in ("gzip", "zstd", "bitshuffle-lz4"):
        path = tmp_path / f"{compression}.h5"
        h5gds.save(state, path, compression=compression).wait()
        np.savez(tmp_path / "expect.npz", **{n.replace("/", "|"): _get(state, n) for n in LARGE + SMALL})
        code = textwrap.dedent("""
            import sys
            import h5py, hdf5plugin, numpy as np
            assert "h5gds" not in sys.modules
            expect = np.load(sys.argv[2])
            with h5py.File(sys.argv[1], "r") as f:
                for key in expect.files:
                    got = f[key.replace("|", "/")][()]
                    assert got.dtype == expect[key].dtype and np.array_equal(got, expect[key]), key
            print("ok", len(expect.files))
        """)
        out = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "expect.npz")],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.split() == ["ok", str(len(LARGE + SMALL))], (out.stdout, out.stderr)


def test_snapshot_taken_before_save_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The background part is held until the state has changed: the
    compressed leaves hold the values of the call (their copies)."""
    gate = threading.Event()
    finish = _checkpoint._finish

    def held_finish(*a: Any, **k: Any) -> Any:
        assert gate.wait(30), "the test never released the background part"
        return finish(*a, **k)

    monkeypatch.setattr(_checkpoint, "_finish", held_finish)
    state, expect = _state(6), _state(6)
    try:
        h = h5gds.save(state, tmp_path / "c.h5", compression="gzip")
        assert "copy" in h.timings and h.compression_routes == {}  # copied, not yet compressed
        for name in LARGE:
            _get(state, name)[...] = 0
        assert not h.done()
    finally:
        gate.set()
    h.wait()
    assert "compress_background" in h.timings and sum(h.compression_routes.values()) == len(LARGE)
    assert states_equal(expect, h5gds.load(tmp_path / "c.h5", device="cpu"))


def test_background_failure_keeps_previous(tmp_path: Path) -> None:
    """A failure while the compressed leaves are written in the background
    (a file-size limit: EFBIG) fails wait(), as without compression: the
    previous checkpoint is intact and no temporary file is left."""
    path = tmp_path / "ckpt.h5"
    h5gds.save({"w": np.arange(1000, dtype=np.float64)}, path).wait()
    code = textwrap.dedent("""
        import resource, signal, sys
        import numpy as np, h5gds
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, resource.RLIM_INFINITY))
        noise = np.random.default_rng(0).integers(0, 1 << 62, 1 << 20)   # 8 MiB that does not compress
        h = h5gds.save({"w": noise}, sys.argv[1], compression="gzip", compression_opts=1)
        try:
            h.wait()
        except OSError as exc:
            print("FAILED:", exc)
            sys.exit(3)
        sys.exit(0)
    """)
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "File too large" in out.stdout, out.stdout
    np.testing.assert_array_equal(h5gds.load(path, device="cpu")["w"], np.arange(1000, dtype=np.float64))
    assert not list(tmp_path.glob("*.h5gds-tmp-*"))


BAD_ARGUMENTS = [
    ({"compression": "brotli"}, ValueError, "expected one of"),
    ({"compression": "szip"}, ValueError, "expected one of"),
    ({"compression": 3.5}, TypeError, "compression must be"),
    ({"compression": True}, TypeError, "compression must be"),
    ({"compression": "gzip", "compression_opts": "9"}, TypeError, "must be an int"),
    ({"compression": "gzip", "compression_opts": 12}, ValueError, "from 0 to 9"),
    ({"compression": "lzf", "compression_opts": 1}, TypeError, "no compression_opts"),
    ({"compression": 1, "compression_opts": 6}, TypeError, "tuple of ints"),
    ({"compression": 31999}, ValueError, "not available for writing"),
    ({"compression_opts": 4}, TypeError, "without compression"),
    ({"shuffle": True}, ValueError, "without compression"),
    ({"compression": "gzip", "shuffle": "yes"}, TypeError, "shuffle must be"),
    ({"compression": "gzip", "compress_min_bytes": -1}, ValueError, "compress_min_bytes"),
    ({"compression": "gzip", "compress_min_bytes": "64KiB"}, TypeError, "compress_min_bytes"),
]
if hdf5plugin is not None:
    BAD_ARGUMENTS += [
        ({"compression": "zstd", "compression_opts": (3,)}, TypeError, "must be an int"),
        ({"compression": "zstd", "compression_opts": 99}, ValueError, "clevel"),
        ({"compression": "bitshuffle-lz4", "compression_opts": 2}, TypeError, "no compression_opts"),
        ({"compression": hdf5plugin.LZ4(), "compression_opts": 3}, TypeError, "filter object"),
    ]


@pytest.mark.parametrize("kw,exc,match", BAD_ARGUMENTS, ids=[repr(b[0]) for b in BAD_ARGUMENTS])
def test_bad_arguments_raise_before_a_file_exists(tmp_path: Path, kw: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        h5gds.save(_state(7), tmp_path / "c.h5", **kw)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["lz4", "zstd", "bitshuffle-lz4"])
def test_missing_hdf5plugin_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setitem(sys.modules, "hdf5plugin", None)  # import hdf5plugin fails
    with pytest.raises(ImportError, match=r"needs the hdf5plugin package \(pip install hdf5plugin\)"):
        h5gds.save(_state(8), tmp_path / "c.h5", compression=name)
    assert os.listdir(tmp_path) == []


def test_torch_cpu_tensors(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    g = torch.Generator().manual_seed(0)
    state = {"w": torch.randn(512, 256, generator=g).round(decimals=2),
             "bf": torch.randn(400, 300, generator=g).bfloat16(),
             "i": torch.randint(0, 100, (20_000,), generator=g),
             "t": torch.randn(300, 300, generator=g).t(),  # not contiguous
             "b": torch.zeros(5)}
    h5gds.save(state, tmp_path / "c.h5", compression="gzip").wait()
    back = h5gds.load(tmp_path / "c.h5", device="cpu")
    for k, v in state.items():
        assert back[k].dtype == v.dtype and torch.equal(back[k], v), k
    with h5py.File(tmp_path / "c.h5", "r") as f:
        assert f["w"].compression == "gzip" and f["bf"].compression == "gzip" and f["b"].compression is None
        np.testing.assert_array_equal(f["t"][...], state["t"].numpy())
        np.testing.assert_array_equal(f["bf"][...].astype(np.float32), state["bf"].float().numpy())


# ---- GPU (marker gpu) ----

def _nvcomp_reason() -> str | None:
    if os.environ.get("H5GDS_NVCOMP_LIB") or importlib.util.find_spec("nvidia.nvcomp") is not None:
        return None
    try:
        if importlib.util.find_spec("nvidia") is not None:
            import nvidia
            if any(os.path.isdir(os.path.join(p, "nvcomp")) for p in getattr(nvidia, "__path__", [])):
                return None
    except ImportError:
        pass
    return "nvCOMP not installed (pip install nvidia-libnvcomp-cu13, or set H5GDS_NVCOMP_LIB)"


def _cupy() -> Any:
    try:
        import cupy
    except ImportError:
        pytest.skip("CuPy is not installed")
    return cupy


# compressions the GPU encodes (zstd's 4 MiB chunks in pieces by the level, spliced: zstd_splice.h)
GPU_ENCODED = {"gzip", "lz4", "zstd", "bitshuffle-lz4"}


@pytest.mark.gpu
@pytest.mark.parametrize("memory", ["auto", "host"])
@pytest.mark.parametrize("compression,filter_id,shuffled", COMPRESSIONS)
def test_gpu_cupy_leaves(tmp_path: Path, compression: str, filter_id: int, shuffled: bool, memory: str) -> None:
    """CuPy leaves: copied on the device and compressed in the background
    (memory="auto"), or compressed during the call (memory="host"); on the
    GPU where nvCOMP is there; the state changes right after save returns;
    h5py and h5gds.load read the values of the call."""
    cupy = _cupy()
    host = _state(9)
    state = {"model": {k: cupy.asarray(v) for k, v in host["model"].items()},
             "big": cupy.asarray(_field((3000, 2500), 10)),  # 29 MiB: 8 chunks, an edge chunk
             "step": 3}
    expect = {"model": host["model"], "big": cupy.asnumpy(state["big"])}
    h = h5gds.save(state, tmp_path / "c.h5", compression=compression, memory=memory)
    for v in list(state["model"].values()) + [state["big"]]:
        v.fill(0)  # the loop goes on at once
    h.wait()
    assert sum(h.compression_routes.values()) == 5, h.compression_routes
    if _nvcomp_reason() is None:
        want = "gpu-encode" if compression in GPU_ENCODED else "host-staged"
        assert h.compression_routes == {want: 5}, h.compression_routes
    with h5py.File(tmp_path / "c.h5", "r") as f:
        for k, v in expect["model"].items():
            np.testing.assert_array_equal(f[f"model/{k.replace('/', '%2F')}"][()], v)
        np.testing.assert_array_equal(f["big"][()], expect["big"])
        assert _filters(f["big"])[-1] == filter_id and f["big"].chunks == (419, 2500)
        assert f["model/layer.0.bias"].compression is None
    back = h5gds.load(tmp_path / "c.h5")
    route = h5gds.last_route()  # of the last leaf read: "big"
    assert isinstance(back["big"], cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(back["big"]), expect["big"])
    for k, v in expect["model"].items():
        np.testing.assert_array_equal(cupy.asnumpy(back["model"][k]), v)
    if _nvcomp_reason() is None:
        assert route == "gpu-decode", route


@pytest.mark.gpu
def test_gpu_torch_leaves(tmp_path: Path) -> None:
    """torch CUDA tensors (bfloat16 among them) on a side stream, changed on
    that stream right after save returns: the copies are ordered after the
    work queued before the call and before the change."""
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        g = torch.Generator(device="cuda").manual_seed(2)
        state = {"w": torch.randn(2048, 1024, device="cuda", generator=g).round(decimals=3),
                 "bf": torch.randn(1000, 777, device="cuda", generator=g).bfloat16(),
                 "i": torch.randint(0, 1000, (300_000,), device="cuda", generator=g),
                 "small": torch.ones(10, device="cuda")}
        expect = {k: v.clone() for k, v in state.items()}
        h = h5gds.save(state, tmp_path / "c.h5", compression="lz4" if hdf5plugin is not None else "gzip")
        for v in state.values():
            v.zero_()
    side.synchronize()  # the expected values (cloned on the side stream) are complete
    h.wait()
    assert sum(h.compression_routes.values()) == 3, h.compression_routes
    if _nvcomp_reason() is None:
        assert h.compression_routes == {"gpu-encode": 3}, h.compression_routes
    back = h5gds.load(tmp_path / "c.h5", device="cuda")
    for k, v in expect.items():
        assert back[k].dtype == v.dtype and torch.equal(back[k], v), k
    with h5py.File(tmp_path / "c.h5", "r") as f:
        np.testing.assert_array_equal(f["w"][()], expect["w"].cpu().numpy())
        np.testing.assert_array_equal(f["i"][()], expect["i"].cpu().numpy())
        np.testing.assert_array_equal(f["bf"][()].astype(np.float32), expect["bf"].float().cpu().numpy())
        assert f["small"].compression is None
