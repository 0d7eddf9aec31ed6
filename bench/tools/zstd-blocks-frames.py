"""Frames for bench/tools/zstd-blocks-kernels.py: N chunks of 1 MiB of the
compressed benchmark's field, image and labels data (python/src/h5gds/bench/
compressed.py's generators), each compressed whole by libzstd at level 3.
Writes frames.bin and frames.json (offset, size, decoded size, CRC-32 of
each) to the folder given.

    python3 bench/tools/zstd-blocks-frames.py OUT_DIR [N]   # needs numpy and libzstd.so.1
"""
import ctypes, json, zlib, sys
import numpy as np
z = ctypes.CDLL("libzstd.so.1")
z.ZSTD_compress.restype = ctypes.c_size_t
z.ZSTD_compress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
def rows(kind, r0, n, width, rng):
    i = np.arange(r0, r0 + n, dtype=np.float32)[:, None]; j = np.arange(width, dtype=np.float32)[None, :]
    if kind == "field":
        f = np.sin(i * 0.002) * np.cos(j * 0.013) + 0.3 * np.sin((i + j) * 0.0007)
        f = f + rng.normal(0, 0.0005, f.shape).astype(np.float32)
        return np.round(f, 3).astype(np.float32)
    if kind == "labels":  # sparse segmentation labels: long matches
        a = np.zeros((n, width), np.int32)
        m = rng.random((n, width)) < 0.04
        a[m] = rng.integers(1, 30, int(m.sum()))
        return a
    base = (np.sin(i * 0.01) * 60 + np.cos(j * 0.02) * 60 + 128).astype(np.int32) // 4 * 4
    noise = rng.integers(-2, 3, base.shape) * (rng.random(base.shape) < 0.04)
    return np.clip(base + noise, 0, 255).astype(np.uint8)
import os
outdir = sys.argv[1]
nchunks = int(sys.argv[2]) if len(sys.argv) > 2 else 32
os.makedirs(outdir, exist_ok=True)
index = {}
with open(os.path.join(outdir, "frames.bin"), "wb") as out:
    pos = 0
    for kind, width in (("field", 1024), ("image", 4096), ("labels", 1024)):
        rng = np.random.default_rng(7); per = 256; lst = []
        for c in range(nchunks):
            raw = rows(kind, c * per * 7, per, width, rng).tobytes()
            cap = len(raw) + 65536; buf = ctypes.create_string_buffer(cap)
            m = z.ZSTD_compress(buf, cap, raw, len(raw), 3)
            out.write(buf.raw[:m]); lst.append([pos, m, len(raw), zlib.crc32(raw)]); pos += m
        index[kind] = lst
json.dump(index, open(os.path.join(outdir, "frames.json"), "w"))
for k, v in index.items(): print(k, len(v), "ratio %.2f" % (sum(x[2] for x in v) / sum(x[1] for x in v)))
