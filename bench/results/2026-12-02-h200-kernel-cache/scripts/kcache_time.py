"""The first GPU-decoded read of a process, timed: with the kernels
compiled (no cache, or an empty one) and loaded from the disk cache."""
import os, sys, time
t0 = time.perf_counter()
import h5py, numpy as np, cupy, h5gds
path = sys.argv[1]
if not os.path.exists(path):
    with h5py.File(path, "w") as f:
        a = np.round(np.sin(np.linspace(0, 60, 1 << 22)) * 100, 2).astype("f4").reshape(1024, 4096)
        f.create_dataset("x", data=a, chunks=(64, 4096), compression="gzip", shuffle=True)
cupy.zeros(1).sum()  # CUDA context made before the timing
with h5py.File(path, "r", driver="gds") as f:
    t1 = time.perf_counter()
    x = h5gds.read(f["x"])
    cupy.cuda.runtime.deviceSynchronize()
    t2 = time.perf_counter()
    route = h5gds.last_route()
    y = h5gds.read(f["x"])
    cupy.cuda.runtime.deviceSynchronize()
    t3 = time.perf_counter()
print(f"{sys.argv[2]}: first read {t2 - t1:.3f} s, second {t3 - t2:.3f} s, route {route}, "
      f"H5GDS_KERNEL_CACHE={os.environ.get('H5GDS_KERNEL_CACHE', '')} dir={os.environ.get('H5GDS_KERNEL_CACHE_DIR', '')}",
      flush=True)
