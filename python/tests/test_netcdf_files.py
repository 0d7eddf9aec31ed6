"""A netCDF-4 file written by the netCDF-C library (data/netcdf/climate.nc,
made by make_netcdf.py there): an unlimited time axis, deflate + shuffle,
fletcher32, time steps never written, zstd and Blosc through netCDF-C's
own filters, bzip2, a big-endian variable, tiles smaller than a sample,
a group. Every variable read through h5gds is the bytes h5py reads: into
host memory here, into device memory with the decode on the GPU (marker
`gpu`); the loader serves its tiled variables, every sample once."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import h5gds
from loader_stand_in import install_decode_stand_in
from support import hdf5plugin_or_none, nvcomp_missing

hdf5plugin_or_none()  # registers the plugin filters (zstd, Blosc, bzip2) with h5py's HDF5 where installed

NC = Path(__file__).parent / "data" / "netcdf" / "climate.nc"
NVCOMP = nvcomp_missing()
# Variables whose filters the GPU decodes (surface_pressure is bzip2: HDF5's filter; albedo is
# big-endian: HDF5 converts it to the native order on the host, as for any dataset of that order).
GPU_DECODED = {"temperature", "geopotential", "precip", "humidity", "wind", "surface/sst", "surface/land_mask"}
# The loader's columns: tiles of a sample (temperature, sst, humidity) and whole samples (wind,
# geopotential); precip (time steps never written, one fewer than the time axis) is loaded alone.
LOADED = ["temperature", "surface/sst", "humidity", "wind", "geopotential"]


def _variables() -> list[str]:
    names: list[str] = []
    with h5py.File(NC, "r") as f:
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    return sorted(names)


VARIABLES = _variables()
SELECTIONS = [("temperature", (slice(1, 5), 2, slice(3, 30))), ("temperature", (slice(0, 1),)),
              ("surface/sst", (slice(2, 6), slice(5, 30), slice(20, 50))), ("precip", (slice(1, 4),)),
              ("humidity", (3, slice(None), slice(19, 21))), ("albedo", (slice(10, 20), slice(30, 70)))]


def _reference(name: str, sel: Any = ()) -> np.ndarray | None:
    """h5py's read, or None where its HDF5 lacks the variable's filter."""
    with h5py.File(NC, "r") as f:
        try:
            return np.asarray(f[name][sel])
        except OSError:
            return None


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def _same_on_device(got: np.ndarray, want: np.ndarray) -> None:
    """Device arrays are native-endian (CuPy has no other byte order): the values, converted."""
    want = want.astype(want.dtype.newbyteorder("="))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def test_the_fixture_is_what_make_netcdf_writes():
    """The variables the tests count on, with the filters netCDF-C chose."""
    with h5py.File(NC, "r") as f:
        assert "netCDF-C" in str(f.attrs["history"])
        assert f["temperature"].chunks == (1, 2, 37, 72) and f["temperature"].shuffle
        assert f["precip"].fletcher32 and f["precip"].fillvalue == -32767
        assert f["precip"].id.get_num_chunks() == 12  # time steps 1 and 3 never written
        assert "32015" in f["humidity"]._filters and "32001" in f["wind"]._filters
        assert "307" in f["surface_pressure"]._filters
        assert f["albedo"].dtype == np.dtype(">f4")
    assert len(VARIABLES) == 13


@pytest.mark.parametrize("name", VARIABLES)
def test_host_reads_match_h5py(name):
    want = _reference(name)
    with h5py.File(NC, "r", driver="gds") as f:
        if want is None:  # no bzip2 filter in this HDF5: an error, never garbage
            with pytest.raises(OSError):
                h5gds.read(f[name], like="numpy")
            return
        _same(h5gds.read(f[name], like="numpy"), want)


@pytest.mark.parametrize("name,sel", SELECTIONS)
def test_host_selections_match_h5py(name, sel):
    want = _reference(name, sel)
    assert want is not None
    with h5py.File(NC, "r", driver="gds") as f:
        _same(h5gds.read(f[name], sel, like="numpy"), want)


def _loader_epoch(like: str, name: str, **kw: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    """One epoch of `name` with the time axis as each sample's label."""
    with h5gds.Loader([str(NC)], 2, dataset=[name, "time"], like=like, window="32KiB", buffer="128KiB",
                      seed=11, **kw) as ld:
        xs, ts = [], []
        for x, t in ld:
            xs.append(x.get() if hasattr(x, "get") else np.asarray(x.cpu() if hasattr(x, "cpu") else x))
            ts.append(t.get() if hasattr(t, "get") else np.asarray(t.cpu() if hasattr(t, "cpu") else t))
        decoded = ld._decoder.gpu_decoded
    return np.concatenate(xs), (np.concatenate(ts) // 6).astype(np.int64), decoded


@pytest.mark.parametrize("name", LOADED)
def test_host_loader_over_variables(name):
    want = _reference(name)
    assert want is not None
    x, rows, _ = _loader_epoch("numpy", name)
    assert sorted(rows.tolist()) == list(range(len(want)))
    _same(x, want[rows])


def _same_samples(like: str, name: str, **kw: Any) -> tuple[int, int]:
    """One epoch of `name` alone holds each of h5py's samples once (compared
    as a multiset: samples of the fill value are alike); the chunks the GPU
    decoded and the rows HDF5 read. Windows of one sample each (precip's
    samples are 5 KiB): those with a chunk never written go to HDF5."""
    want = _reference(name)
    assert want is not None
    with h5gds.Loader([str(NC)], 2, dataset=name, like=like, window="4KiB", buffer="64KiB", seed=5, **kw) as ld:
        got = [x.get() if hasattr(x, "get") else np.asarray(x) for x in ld]
        decoded, by_hdf5 = ld._decoder.gpu_decoded, ld._decoder.hdf5_decoded_rows
    x = np.concatenate(got)
    assert x.dtype == want.dtype and x.shape == want.shape
    assert sorted(r.tobytes() for r in x) == sorted(r.tobytes() for r in want)
    return decoded, by_hdf5


def test_host_loader_reads_time_steps_never_written_as_the_fill_value():
    want = _reference("precip")
    assert want is not None and (want[1] == -32767).all() and (want[0] != -32767).any()
    _same_samples("numpy", "precip")


@pytest.mark.parametrize("staging", ["pinned", "device"])
def test_device_path_on_a_stand_in_reads_never_written_steps_from_hdf5(monkeypatch, staging):
    """The device path on the host (loader_stand_in): the written steps'
    chunks (fletcher32 + shuffle + deflate) decoded by the stand-in, the
    two steps never written read by HDF5."""
    calls = install_decode_stand_in(monkeypatch)
    decoded, by_hdf5 = _same_samples("cupy", "precip", staging=staging)
    assert decoded == 3 * 4 and by_hdf5 == 2 and calls["n"] > 0  # 3 steps of 4 tiles; steps 1 and 3


def _cupy() -> Any:
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA GPU visible to CuPy")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA GPU visible to CuPy")
    return cupy


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIABLES)
def test_device_reads_match_h5py(name):
    cupy = _cupy()
    want = _reference(name)
    with h5py.File(NC, "r", driver="gds") as f:
        if want is None:
            with pytest.raises(OSError):
                h5gds.read(f[name], like="cupy")
            return
        got = h5gds.read(f[name], like="cupy")
        route = h5gds.last_route()
    assert isinstance(got, cupy.ndarray)
    _same_on_device(cupy.asnumpy(got), want)
    if name in GPU_DECODED and NVCOMP is None:
        assert route == "gpu-decode", f"{name}: route {route}"


@pytest.mark.gpu
@pytest.mark.parametrize("name,sel", SELECTIONS)
def test_device_selections_match_h5py(name, sel):
    cupy = _cupy()
    want = _reference(name, sel)
    assert want is not None
    with h5py.File(NC, "r", driver="gds") as f:
        got = h5gds.read(f[name], sel, like="cupy")
        route = h5gds.last_route()
    _same_on_device(cupy.asnumpy(got), want)
    if NVCOMP is None and name in GPU_DECODED and name != "humidity":  # humidity's: an integer index, no box
        assert route == "gpu-decode", f"{name} {sel}: route {route}"


@pytest.mark.gpu
@pytest.mark.parametrize("staging", ["pinned", "device"])
@pytest.mark.parametrize("name", LOADED)
def test_device_loader_over_variables(name, staging):
    _cupy()
    if name in ("humidity", "wind") and importlib.util.find_spec("hdf5plugin") is None:
        pytest.skip(f"{name}: hdf5plugin is not installed")
    want = _reference(name)
    assert want is not None
    x, rows, decoded = _loader_epoch("cupy", name, staging=staging)
    assert sorted(rows.tolist()) == list(range(len(want)))
    _same(x, want[rows])
    if NVCOMP is None:
        assert decoded > 0, f"{name}: no chunk was decoded on the GPU"


@pytest.mark.gpu
@pytest.mark.parametrize("staging", ["pinned", "device"])
def test_device_loader_reads_time_steps_never_written_as_the_fill_value(staging):
    _cupy()
    decoded, by_hdf5 = _same_samples("cupy", "precip", staging=staging)
    assert by_hdf5 == 2  # steps 1 and 3
    if NVCOMP is None:
        assert decoded == 3 * 4  # the written steps' tiles


@pytest.mark.gpu
def test_device_loader_over_tiles_into_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")
    want = _reference("surface/sst")
    assert want is not None
    x, rows, decoded = _loader_epoch("torch", "surface/sst")
    assert sorted(rows.tolist()) == list(range(len(want)))
    _same(x, want[rows])
    if NVCOMP is None:
        assert decoded > 0
