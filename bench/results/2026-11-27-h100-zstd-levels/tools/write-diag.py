"""Where a GPU-compressed write's time goes: batch sizes, per-batch trace, raw engine write of the same bytes.

    python3 write-diag.py field|image [plain|shuffle] [repeat]

`repeat`: only three writes of the default settings (pieces-*.txt, with
H5GDS_ZSTD_PIECE_KIB set by the experiment build); else the diagnosis
(write-timeline-*.txt)."""
import os, sys, time, numpy as np, h5py, cupy, h5gds, hdf5plugin
from pathlib import Path
from h5gds.bench.compressed import make_rows, ceiling_write
from h5gds.bench._common import fsync_path
d = Path("/tmp/wd"); d.mkdir(exist_ok=True)
kind = sys.argv[1] if len(sys.argv) > 1 else "field"
width = 1024 if kind == "field" else 4096
dt = np.float32 if kind == "field" else np.uint8
rows = (1 << 20) // (width * np.dtype(dt).itemsize)
nrows = (1 << 30) // (width * np.dtype(dt).itemsize)
rng = np.random.default_rng(7)
host = np.concatenate([make_rows(kind, r, rows * 64, width, rng) for r in range(0, nrows, rows * 64)])
dev = cupy.asarray(host)
kw = dict(**hdf5plugin.Zstd(clevel=1))
if len(sys.argv) > 2 and sys.argv[2] == "shuffle":
    kw["shuffle"] = True
def w(label, env, **kw2):
    for k, v in env.items(): os.environ[k] = v
    out = d / "w.h5"
    out.unlink(missing_ok=True); os.sync()
    t0 = time.perf_counter()
    with h5py.File(out, "w", driver="gds") as f:
        h5gds.create_dataset(f, "x", data=dev, chunks=(rows, width), **kw2)
        st = h5gds.last_encode_stats()
    t1 = time.perf_counter()
    fsync_path(out)
    t2 = time.perf_counter()
    size = os.path.getsize(out)
    for k in env: del os.environ[k]
    print(f"{label:28s} {host.nbytes/(t2-t0)/1e9:6.2f} GB/s decoded, file {size/1e6:.0f} MB at {size/(t2-t0)/1e9:.2f} GB/s; "
          f"write+close {t1-t0:.3f} s, fsync {t2-t1:.3f} s; encode {st.encode_s:.3f} wait {st.store_wait_s:.3f} total {st.total_s:.3f}", flush=True)
    return out
w("warm-up", {}, **kw)
if "repeat" in sys.argv[2:]:
    for rep in range(3):
        w("default", {}, **kw)
    sys.exit(0)
for rep in range(2):
    for mib in ["256", "64", "128", "512"]:
        w(f"batch {mib} MiB", {"H5GDS_DECODE_BATCH_MIB": mib}, **kw)
out = w("trace (default)", {"H5GDS_CODEC_DEBUG": "1"}, **kw)
size = os.path.getsize(out)
# raw engine write of as many bytes from device memory (uncompressed, contiguous)
n = size // 4 // 1024 * 1024
raw = dev.view(np.uint8).ravel()[: n * 4].view(np.float32).reshape(-1, 1024)
for rep in range(3):
    p = d / "raw.h5"; p.unlink(missing_ok=True); os.sync()
    t0 = time.perf_counter()
    with h5py.File(p, "w", driver="gds") as f:
        h5gds.create_dataset(f, "x", data=raw)
    fsync_path(p)
    t = time.perf_counter() - t0
    print(f"raw gds write {raw.nbytes/1e6:.0f} MB: {raw.nbytes/t/1e9:.2f} GB/s", flush=True)
    wr, secs = ceiling_write(out)
    print(f"ceiling O_DIRECT {wr/1e6:.0f} MB: {wr/secs/1e9:.2f} GB/s", flush=True)
