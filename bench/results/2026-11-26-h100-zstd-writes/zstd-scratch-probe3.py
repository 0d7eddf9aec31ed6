"""Which extra scratch makes nvCOMP's zstd decode the frames that overflowed it."""
import os, subprocess, sys, itertools, shutil
import numpy as np, h5py, hdf5plugin
files = sys.argv[1:]  # e.g. the file of random case 2005 (test_compressed_random.py, H5GDS_TEST_CASES_SCALE=8)
for k, alpha, level, chunk in [(3, 256, 19, 517460), (3, 256, 22, 1 << 20), (3, 256, 19, 65536), (3, 256, 19, 16384)]:
    rng = np.random.default_rng(k * 1000 + alpha + level)
    toks = rng.integers(0, 256, (alpha, k), dtype=np.uint8)
    n = chunk * 2
    a = toks[rng.integers(0, alpha, n // k + 1)].reshape(-1)[:n].copy()
    p = f"/tmp/zd-{k}-{alpha}-{level}-{chunk}.h5"
    with h5py.File(p, "w") as fh:
        fh.create_dataset("x", data=a, chunks=(chunk,), **hdf5plugin.Zstd(clevel=level))
    files.append(p)
CASE = r'''
import sys, numpy as np, h5py, hdf5plugin, cupy, h5gds
p = sys.argv[1]
with h5py.File(p, "r") as f:
    want = f["x"][()]
with h5py.File(p, "r", driver="gds") as f:
    try:
        got = cupy.asnumpy(h5gds.read(f["x"], like="cupy"))
        print("OK" if got.tobytes() == want.tobytes() else "WRONG")
    except Exception as e:
        print("ERR", str(e)[-60:])
'''
for p in files:
    res = []
    for scale, slack in [("1", "0"), ("1", "16"), ("1", "64"), ("1", "128"), ("1", "256"), ("2", "0")]:
        r = subprocess.run([sys.executable, "-c", CASE, p], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, H5GDS_ZSTD_TEMP_SCALE=scale, H5GDS_ZSTD_TEMP_SLACK_KIB=slack))
        out = (r.stdout.strip().splitlines() or ["?"])[-1]
        res.append(f"x{scale}+{slack}K {out[:4]}")
    print(os.path.basename(p), " | ".join(res), flush=True)
