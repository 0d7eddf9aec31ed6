"""gzip+shuffle encode time by the codec's temp budget and the write batch."""
import os, sys, time, numpy as np, h5py, cupy, h5gds
from pathlib import Path
from h5gds.bench._common import fsync_path
d = Path("/tmp/wd")
host = np.load(d / "field.npy")
dev = cupy.asarray(host)
rows = (1 << 20) // (1024 * 4)
for temp, batch in [(sys.argv[1], sys.argv[2])]:
    os.environ["H5GDS_CODEC_TEMP_MIB"] = temp
    os.environ["H5GDS_DECODE_BATCH_MIB"] = batch
    for rep in range(2):
        os.environ["H5GDS_CODEC_DEBUG"] = "1" if rep else "0"
        p = d / "t.h5"; p.unlink(missing_ok=True)
        t0 = time.perf_counter()
        with h5py.File(p, "w", driver="gds") as f:
            h5gds.create_dataset(f, "x", data=dev, chunks=(rows, 1024), compression="gzip", shuffle=True)
            st = h5gds.last_encode_stats()
        fsync_path(p)
        t = time.perf_counter() - t0
        print(f"== temp {temp} MiB batch {batch} MiB: {host.nbytes/t/1e9:.3f} GB/s, encode {st.encode_s:.3f} s, file {os.path.getsize(p)}", file=sys.stderr, flush=True)
