"""Writes climate.nc, the netCDF-4 fixture, with the netCDF-C library (through
the `netCDF4` package; not a test dependency: run by hand, in a venv of its
own, since the package carries a libhdf5 of its own):

    python3 -m venv /tmp/ncvenv && /tmp/ncvenv/bin/pip install netCDF4 numpy
    /tmp/ncvenv/bin/python python/tests/data/netcdf/make_netcdf.py python/tests/data/netcdf/climate.nc

The variables are what netCDF-4 files of models and observations hold:
an unlimited time axis, coordinate variables, deflate + shuffle (netCDF's
usual `zlib=True`), fletcher32, packed int16 with a fill value and time
steps never written, zstd and Blosc through netCDF-C's own filters, bzip2
(which h5gds leaves to HDF5), a big-endian variable, netCDF's default
chunk sizes, quantized floats (BitGroom / BitRound), and a group.
"""
from __future__ import annotations

import sys

import netCDF4
import numpy as np


def field(shape: tuple[int, ...], rng: np.random.Generator, scale: float, offset: float) -> np.ndarray:
    """A smooth field with a little noise, as model output is."""
    grids = np.meshgrid(*[np.linspace(0, 3 * np.pi, n) for n in shape], indexing="ij")
    f = sum(np.sin(g * (k + 1) * 0.7 + k) for k, g in enumerate(grids))
    return (offset + scale * f + rng.normal(0, scale * 0.002, shape)).astype(np.float32)


def main(path: str) -> None:
    rng = np.random.default_rng(2026)
    nt, nz, ny, nx = 6, 4, 37, 72
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.title = "h5gds test fixture: a small climate-model-like file"
        ds.createDimension("time", None)
        ds.createDimension("level", nz)
        ds.createDimension("lat", ny)
        ds.createDimension("lon", nx)
        t = ds.createVariable("time", "f8", ("time",))
        t.units = "hours since 2000-01-01"
        t[:] = np.arange(nt) * 6.0
        ds.createVariable("level", "f4", ("level",))[:] = [1000, 850, 500, 250]
        ds.createVariable("lat", "f8", ("lat",))[:] = np.linspace(-90, 90, ny)
        ds.createVariable("lon", "f8", ("lon",))[:] = np.linspace(0, 355.0, nx)

        temp = ds.createVariable("temperature", "f4", ("time", "level", "lat", "lon"), zlib=True, complevel=4,
                                 shuffle=True, chunksizes=(1, 2, ny, nx), significant_digits=4)
        temp[:] = field((nt, nz, ny, nx), rng, 15.0, 260.0)

        precip = ds.createVariable("precip", "i2", ("time", "lat", "lon"), zlib=True, complevel=2, shuffle=True,
                                   fletcher32=True, chunksizes=(1, 19, 36), fill_value=np.int16(-32767))
        precip.scale_factor = np.float32(0.01)
        precip.add_offset = np.float32(0.0)
        precip.set_auto_maskandscale(False)
        rain = np.clip(field((nt, ny, nx), rng, 120.0, 60.0), 0, None).astype(np.int16)
        for k in range(0, nt, 2):  # odd time steps never written: their chunks read as the fill value
            precip[k] = rain[k]

        hum = ds.createVariable("humidity", "f4", ("time", "level", "lat", "lon"), compression="zstd",
                                complevel=3, shuffle=True, chunksizes=(2, 1, 20, 36),
                                significant_digits=3, quantize_mode="BitRound")
        hum[:] = np.clip(field((nt, nz, ny, nx), rng, 0.3, 0.5), 0, 1)

        wind = ds.createVariable("wind", "f8", ("time", "lat", "lon"), compression="blosc_lz4", complevel=5,
                                 blosc_shuffle=1, chunksizes=(3, 37, 72))
        wind[:] = field((nt, ny, nx), rng, 8.0, 2.0).astype(np.float64)

        press = ds.createVariable("surface_pressure", "f4", ("time", "lat", "lon"), compression="bzip2",
                                  complevel=6, chunksizes=(1, 37, 72))
        press[:] = field((nt, ny, nx), rng, 900.0, 101000.0)

        big = ds.createVariable("albedo", "f4", ("lat", "lon"), zlib=True, complevel=6, shuffle=True,
                                endian="big", chunksizes=(15, 25))
        big[:] = np.clip(field((ny, nx), rng, 0.2, 0.35), 0, 1)

        default = ds.createVariable("geopotential", "f4", ("time", "level", "lat", "lon"), zlib=True,
                                    significant_digits=5)
        default[:] = field((nt, nz, ny, nx), rng, 5000.0, 50000.0)

        sfc = ds.createGroup("surface")
        sst = sfc.createVariable("sst", "f4", ("time", "lat", "lon"), zlib=True, complevel=5, shuffle=True,
                                 chunksizes=(1, 12, 24), fill_value=np.float32(-999.0))
        sst[:] = field((nt, ny, nx), rng, 4.0, 290.0)
        mask = sfc.createVariable("land_mask", "u1", ("lat", "lon"), zlib=True, complevel=9, chunksizes=(37, 72))
        mask[:] = (field((ny, nx), rng, 1.0, 0.0) > 0.5).astype(np.uint8)
        ds.history = f"written by netCDF4 {netCDF4.__version__} (netCDF-C {netCDF4.__netcdf4libversion__}, " \
                     f"HDF5 {netCDF4.__hdf5libversion__})"


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "climate.nc")
