"""How long device buffers take: cuMemAlloc/cuMemFree against stream-ordered
allocations (default pool, and a pool that keeps freed memory)."""
import ctypes, time
import cupy
cupy.zeros(1)  # context
cu = ctypes.CDLL("libcuda.so.1")
u64 = ctypes.c_uint64
def chk(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: {r}")
stream = ctypes.c_void_p()
chk(cu.cuStreamCreate(ctypes.byref(stream), 1), "stream")
sizes = [190 << 20, 190 << 20, 190 << 20, 64 << 20]
busy = cupy.zeros(1 << 28, dtype=cupy.float32)
def plain():
    ptrs = []
    t0 = time.perf_counter()
    for s in sizes:
        p = u64(); chk(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(s)), "alloc"); ptrs.append(p)
    t1 = time.perf_counter()
    for p in ptrs:
        chk(cu.cuMemFree_v2(p), "free")
    return t1 - t0, time.perf_counter() - t1
def ordered():
    ptrs = []
    t0 = time.perf_counter()
    for s in sizes:
        p = u64(); chk(cu.cuMemAllocAsync(ctypes.byref(p), ctypes.c_size_t(s), stream), "allocasync"); ptrs.append(p)
    t1 = time.perf_counter()
    for p in ptrs:
        chk(cu.cuMemFreeAsync(p, stream), "freeasync")
    chk(cu.cuStreamSynchronize(stream), "sync")
    return t1 - t0, time.perf_counter() - t1
for name, fn in (("cuMemAlloc/cuMemFree", plain), ("default pool, threshold 0", ordered)):
    for i in range(4):
        a, f = fn()
        print(f"{name} #{i}: alloc {a*1e3:.2f} ms, free {f*1e3:.2f} ms", flush=True)
pool = ctypes.c_void_p()
chk(cu.cuDeviceGetDefaultMemPool(ctypes.byref(pool), 0), "pool")
thr = u64(1 << 32)
chk(cu.cuMemPoolSetAttribute(pool, 4, ctypes.byref(thr)), "threshold")  # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4
for i in range(4):
    a, f = ordered()
    print(f"default pool, threshold 4 GiB #{i}: alloc {a*1e3:.2f} ms, free {f*1e3:.2f} ms", flush=True)
# with a kernel busy on another stream: does the free wait for it?
big = cupy.random.random(1 << 27, dtype=cupy.float32)
for name, fn in (("cuMemAlloc/cuMemFree", plain), ("pool 4 GiB", ordered)):
    for i in range(2):
        for _ in range(20):
            big = cupy.sqrt(big * big + 1.0)  # queued work on cupy's stream
        t0 = time.perf_counter()
        a, f = fn()
        print(f"{name} while the GPU is busy #{i}: alloc {a*1e3:.2f} ms, free {f*1e3:.2f} ms", flush=True)
        cupy.cuda.Device().synchronize()
chk(cu.cuMemPoolTrimTo(pool, ctypes.c_size_t(0)), "trim")
a, f = ordered()
print(f"after trim: alloc {a*1e3:.2f} ms, free {f*1e3:.2f} ms")
