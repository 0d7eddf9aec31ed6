import os, time, sys, h5py, h5gds, cupy, numpy as np
path = sys.argv[1]
os.environ["H5GDS_CODEC_DEBUG"] = "1"
for variant in ["0", "", "0", ""]:
    if variant: os.environ["H5GDS_HOST_DECODE_THREADS"] = variant
    else: os.environ.pop("H5GDS_HOST_DECODE_THREADS", None)
    with h5py.File(path, "r", driver="gds") as f:
        d = f["x"]; rows = d.chunks[0]
        h5gds.read(d, (slice(0, rows),)); cupy.cuda.runtime.deviceSynchronize()
        ts = []
        for i in range(10):
            t0 = time.perf_counter(); h5gds.read(d, (slice(i * 2 * rows, (i * 2 + 2) * rows),)); cupy.cuda.runtime.deviceSynchronize(); ts.append(time.perf_counter() - t0)
        print(path, "threads", variant or "default", "2-chunk read ms median %.2f min %.2f" % (1e3*np.median(ts), 1e3*min(ts)), flush=True)
