"""A/B of write batches: one process per variant; 3 durable writes + 1 traced."""
import os, sys, time, numpy as np, h5py, cupy, h5gds, hdf5plugin
from pathlib import Path
from h5gds.bench.compressed import make_rows
from h5gds.bench._common import fsync_path
d = Path("/tmp/wd"); d.mkdir(exist_ok=True)
kind, level, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
width = 1024 if kind == "field" else 4096
dt = np.float32 if kind == "field" else np.uint8
rows = (1 << 20) // (width * np.dtype(dt).itemsize)
nrows = (1 << 30) // (width * np.dtype(dt).itemsize)
cache = d / f"{kind}.npy"
if cache.exists():
    host = np.load(cache)
else:
    rng = np.random.default_rng(7)
    host = np.concatenate([make_rows(kind, r, rows * 64, width, rng) for r in range(0, nrows, rows * 64)])
    np.save(cache, host)
dev = cupy.asarray(host)
kw = dict(**hdf5plugin.Zstd(clevel=level)) if level else dict(compression="gzip", shuffle=True)
def w(tag):
    out = d / "w.h5"
    out.unlink(missing_ok=True); os.sync()
    t0 = time.perf_counter()
    with h5py.File(out, "w", driver="gds") as f:
        h5gds.create_dataset(f, "x", data=dev, chunks=(rows, width), **kw)
        st = h5gds.last_encode_stats()
    fsync_path(out)
    t = time.perf_counter() - t0
    size = os.path.getsize(out)
    print(f"{kind},{level},{label},{tag},{host.nbytes/t/1e9:.3f},{size},{st.encode_s:.4f},{st.store_wait_s:.4f},{st.total_s:.4f}", flush=True)
w("warm-up")
for r in range(3):
    w("timed")
os.environ["H5GDS_CODEC_DEBUG"] = "1"
w("trace")
