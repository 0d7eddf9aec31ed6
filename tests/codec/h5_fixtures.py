#!/usr/bin/env python3
"""Chunks written by HDF5 and hdf5plugin themselves, for the GPU codec tests.

  h5_fixtures.py make DIR     HDF5 files (DIR/<name>.h5) written by h5py with
                              HDF5's and hdf5plugin's filters, and for each a
                              fixture (DIR/<name>.fx): the pipeline, the raw
                              chunks as stored (read_direct_chunk) and the
                              data HDF5 reads.
  h5_fixtures.py verify DIR   for each DIR/<name>.<tag>.enc (chunks encoded by
                              `test_codec_gpu --fixtures DIR`, on the GPU or
                              with the CPU references): writes them with
                              write_direct_chunk into a copy of the dataset and
                              checks that HDF5 reads the same data.

test_codec_gpu --fixtures DIR decodes the .fx chunks (GPU, or --cpu: the
tests' CPU references) and compares with what HDF5 read. Needs h5py and
hdf5plugin (pip install h5py hdf5plugin).
"""
import glob
import os
import struct
import sys

import h5py
import hdf5plugin
import numpy as np

MAX_CD = 20


def field(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    idx = np.indices(shape, dtype=np.float64)
    x = idx[-1] / shape[-1]
    y = idx[-2] / shape[-2] if len(shape) > 1 else 0.0
    z = idx[0] / shape[0]
    v = 3.0 * np.sin(6.3 * x + 1.7 * y + z) + 0.5 * np.cos(21.0 * x * y) + 0.01 * rng.standard_normal(shape)
    return np.round(v, 3).astype(dtype)


def image(shape, seed):
    rng = np.random.default_rng(seed)
    idx = np.indices(shape)
    x, y = idx[-1], idx[-2]
    v = (x + 2 * y) // 5 % 256 + np.where(((x // 37) ^ (y // 29)) & 1, 40, 0) + rng.integers(0, 7, shape)
    return np.clip(v, 0, 255).astype(np.uint8)


def sparse(shape, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 40, shape, dtype=np.int32)
    keep = rng.random(shape) < 0.08
    v = np.where(keep, labels, 0).astype(np.int32)
    v.flat[::1024] = np.arange(v.size)[::1024]
    return v


def random_bytes(shape, seed):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def triples(shape, seed):
    """Packed 3-byte records (u1, u2) from a smooth field."""
    v = field(shape, np.float64, seed)
    out = np.zeros(shape, dtype=[("a", "u1"), ("b", "<u2")])
    out["a"] = (np.abs(v) * 40).astype(np.uint8)
    out["b"] = ((v + 4) * 2000).astype(np.uint16)
    return out


# name: (data, chunks, dataset keyword arguments)
def configs():
    f32 = field((8, 128, 256), np.float32, 1)
    return {
        "deflate6_shuffle_f32": (f32, (1, 128, 256), dict(compression="gzip", compression_opts=6, shuffle=True)),
        "deflate4_shuffle_fletcher_f32": (f32, (2, 64, 256),
                                          dict(compression="gzip", compression_opts=4, shuffle=True, fletcher32=True)),
        "deflate1_u8": (image((1024, 1024), 2), (256, 512), dict(compression="gzip", compression_opts=1)),
        "deflate9_big_f32": (field((2, 512, 1024), np.float32, 3), (1, 512, 1024),
                             dict(compression="gzip", compression_opts=9, shuffle=True)),
        "fletcher_i32": (sparse((256, 1000), 4), (64, 1000), dict(fletcher32=True)),
        "shuffle_f64": (field((32, 4000), np.float64, 5), (16, 4000), dict(shuffle=True)),
        "zstd3_i32": (sparse((256, 1024), 6), (64, 1024), dict(**hdf5plugin.Zstd(clevel=3))),
        "zstd_shuffle_f32": (f32, (2, 128, 256), dict(shuffle=True, **hdf5plugin.Zstd(clevel=5))),
        "lz4_u8": (image((1024, 1024), 7), (512, 512), dict(**hdf5plugin.LZ4())),
        "lz4_64k_mixed": (np.concatenate([random_bytes((256, 1024), 8), image((256, 1024), 9)]), (128, 1024),
                          dict(**hdf5plugin.LZ4(nbytes=65536))),
        "bslz4_f32": (field((4, 999, 37), np.float32, 10), (1, 999, 37),
                      dict(**hdf5plugin.Bitshuffle(cname="lz4"))),
        "bszstd_f64": (field((4, 333, 61), np.float64, 11), (2, 333, 61),
                       dict(**hdf5plugin.Bitshuffle(cname="zstd", clevel=5))),
        "bslz4_u16_1024": (field((512, 700), np.float32, 12).astype(np.uint16), (128, 700),
                           dict(**hdf5plugin.Bitshuffle(nelems=1024, cname="lz4"))),
        "bitshuffle_plain_i32": (sparse((300, 301), 13), (100, 301), dict(**hdf5plugin.Bitshuffle(cname="none"))),
        "masked_deflate_f32": (f32, (1, 128, 256), dict(compression="gzip", compression_opts=5, shuffle=True)),
        "fletcher_swapped_i32": (sparse((256, 1000), 14), (64, 1000), dict(fletcher32=True)),
        "blosc_lz4_f32": (f32, (1, 128, 256), dict(**hdf5plugin.Blosc(cname="lz4"))),
        # chunks of 1 MiB + 4 KiB: blosc blocks of 512 KiB and a partial one
        "blosc_lz4hc_bitshuffle_u16": (field((8, 520, 1024), np.float32, 15).astype(np.uint16), (1, 520, 1024),
                                       dict(**hdf5plugin.Blosc(cname="lz4hc", clevel=9,
                                                               shuffle=hdf5plugin.Blosc.BITSHUFFLE))),
        "blosc_zstd_f64": (field((4, 333, 61), np.float64, 16), (2, 333, 61),
                           dict(**hdf5plugin.Blosc(cname="zstd", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))),
        "blosc_memcpyed_i32": (sparse((256, 1000), 17), (64, 1000),
                               dict(**hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.NOSHUFFLE))),
        "blosc_blosclz_f32": (f32, (1, 128, 256), dict(**hdf5plugin.Blosc(cname="blosclz"))),
        # for the GPU's blosc encoder (blocks of typesize x 64 KiB): 4 whole blocks and a partial one of
        # 8756 elements (no multiple of 8: not bit-shuffled)
        "blosc_lz4_bitshuffle_f64": (field((6, 300, 301), np.float64, 18), (3, 300, 301),
                                     dict(**hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.BITSHUFFLE))),
        # incompressible: hdf5plugin's filter gives up (the optional filter skipped)
        "blosc_lz4_random_u8": (random_bytes((4, 100000), 19), (2, 100000),
                                dict(**hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.NOSHUFFLE))),
        # 3-byte elements (a packed compound: blosc's typesize 3), two blocks and a partial one
        "blosc_lz4_shuffle_3byte": (triples((1000, 333), 20), (500, 333),
                                    dict(**hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.SHUFFLE))),
    }


def blosc_memcpyed(raw, typesize):
    """A MEMCPYED Blosc-1 chunk (as c-blosc writes incompressible data when
    given room): the 16-byte header (version 2, lz4 format 1, flags MEMCPYED
    | SHUFFLE | lz4 << 5) and the bytes as they are."""
    n = len(raw)
    return bytes([2, 1, 0x02 | 0x01 | (1 << 5), typesize]) + struct.pack("<iii", n, n, n + 16) + raw


def chunk_offsets(shape, chunks):
    grid = [range(0, s, c) for s, c in zip(shape, chunks)]
    return [tuple(o) for o in np.stack(np.meshgrid(*[list(g) for g in grid], indexing="ij"), -1).reshape(-1, len(shape))]


def pipeline(dset):
    plist = dset.id.get_create_plist()
    out = []
    for i in range(plist.get_nfilters()):
        code, flags, cd, _name = plist.get_filter(i)
        out.append((code, flags, list(cd)))
    return out


def make(directory):
    os.makedirs(directory, exist_ok=True)
    for name, (data, chunks, kw) in configs().items():
        path = os.path.join(directory, name + ".h5")
        with h5py.File(path, "w") as f:
            d = f.create_dataset("data", data=data, chunks=chunks, **kw)
            if name == "masked_deflate_f32":
                # chunk 1 stored without its filters (mask 0b11), as HDF5 does when an optional filter fails
                off = chunk_offsets(data.shape, chunks)[1]
                raw = np.ascontiguousarray(data[tuple(slice(o, o + c) for o, c in zip(off, chunks))])
                d.id.write_direct_chunk(off, raw.tobytes(), filter_mask=0b11)
            if name == "blosc_memcpyed_i32":
                # chunk 2 as c-blosc's MEMCPYED form (HDF5's filter never writes one: no room)
                off = chunk_offsets(data.shape, chunks)[2]
                raw = np.ascontiguousarray(data[tuple(slice(o, o + c) for o, c in zip(off, chunks))])
                d.id.write_direct_chunk(off, blosc_memcpyed(raw.tobytes(), raw.dtype.itemsize), filter_mask=0)
            if name == "fletcher_swapped_i32":
                # chunk 0 with the byte-swapped checksum of files from HDF5 < 1.6.3
                off = chunk_offsets(data.shape, chunks)[0]
                mask, raw = d.id.read_direct_chunk(off)
                raw = bytearray(raw)
                raw[-4:] = bytes([raw[-3], raw[-4], raw[-1], raw[-2]])
                d.id.write_direct_chunk(off, bytes(raw), filter_mask=mask)
        with h5py.File(path, "r") as f:
            d = f["data"]
            read = d[...]
            assert np.array_equal(read, data), name
            pipe = pipeline(d)
            offs = chunk_offsets(d.shape, d.chunks)
            chunk_bytes = int(np.prod(d.chunks)) * d.dtype.itemsize
            write_fixture(directory, name, d, pipe, offs, chunk_bytes, read)
        print(f"{name}: {len(offs)} chunks of {chunk_bytes} bytes, filters {[p[0] for p in pipe]}")


def write_fixture(directory, name, d, pipe, offs, chunk_bytes, read):
    with open(os.path.join(directory, name + ".fx"), "wb") as fx:
        fx.write(b"H5GDSFX1")
        fx.write(struct.pack("<I", len(pipe)))
        for code, flags, cd in pipe:
            fx.write(struct.pack("<III", code, flags, len(cd)))
            fx.write(struct.pack("<%dI" % MAX_CD, *((list(cd) + [0] * MAX_CD)[:MAX_CD])))
        fx.write(struct.pack("<QQQ", d.dtype.itemsize, chunk_bytes, len(offs)))
        for off in offs:
            mask, raw = d.id.read_direct_chunk(off)
            fx.write(struct.pack("<IQ", mask, len(raw)))
            fx.write(raw)
        for off in offs:
            sel = tuple(slice(o, o + c) for o, c in zip(off, d.chunks))
            fx.write(np.ascontiguousarray(read[sel]).tobytes())


def verify(directory):
    failures = 0
    files = sorted(glob.glob(os.path.join(directory, "*.enc")))
    for enc in files:
        base = os.path.basename(enc)
        name, tag = base.split(".")[0], ".".join(base.split(".")[1:-1])
        src = os.path.join(directory, name + ".h5")
        with open(enc, "rb") as e:
            assert e.read(8) == b"H5GDSEN1", enc
            (n,) = struct.unpack("<Q", e.read(8))
            chunks = []
            for _ in range(n):
                mask, size = struct.unpack("<IQ", e.read(12))
                chunks.append((mask, e.read(size)))
        out = os.path.join(directory, f"{name}.{tag}.check.h5")
        with h5py.File(src, "r") as f:
            d = f["data"]
            data = d[...]
            offs = chunk_offsets(d.shape, d.chunks)
            # the dataset made again as the original was (copying its creation
            # list would run bitshuffle's set_local on its own output)
            _, chunk_shape, kw = configs()[name]
            with h5py.File(out, "w") as g:
                dd = g.create_dataset("data", shape=d.shape, dtype=d.dtype, chunks=chunk_shape, **kw)
                assert pipeline(dd) == pipeline(d), (pipeline(dd), pipeline(d))
                for off, (mask, raw) in zip(offs, chunks):
                    dd.id.write_direct_chunk(off, raw, filter_mask=mask)
            with h5py.File(out, "r") as g:
                back = g["data"][...]
        masks = sorted({m for m, _ in chunks})
        size = sum(len(r) for _, r in chunks)
        ok = np.array_equal(back, data)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name} ({tag}): HDF5 reads {'the same' if ok else 'OTHER'} data from "
              f"{n} chunks, {size} bytes stored (ratio {data.nbytes / max(size, 1):.2f}), masks {masks}")
        os.remove(out)
    print(f"{len(files)} encoded datasets checked, {failures} failed")
    return 1 if failures or not files else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "verify"):
        print(__doc__)
        sys.exit(2)
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        sys.exit(verify(sys.argv[2]))
