"""nvCOMP zstd decode scratch: temp sizes, and dense-sequence frames at temp scales 1-4."""
import ctypes, os, subprocess, sys, itertools
import numpy as np

lib = ctypes.CDLL(os.environ["H5GDS_NVCOMP_LIB"])
class Opts(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("reserved", ctypes.c_char * 60)]
f = lib.nvcompBatchedZstdDecompressGetTempSize
f.argtypes = [ctypes.c_size_t, ctypes.c_size_t, Opts, ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t, ctypes.c_void_p]
f.restype = ctypes.c_int
print("== temp bytes: nchunks, max_out -> temp (temp / total)")
for ne, mo in itertools.product([1, 256], [65536, 517460, 1 << 20, 4 << 20]):
    t = ctypes.c_size_t(0)
    rc = f(ne, mo, Opts(), ctypes.byref(t), ne * mo, None)
    print(ne, mo, rc, t.value, f"{t.value / (ne * mo):.2f}")

def nseq(raw):
    b = raw; fhd = b[4]; single = (fhd >> 5) & 1; pos = 5 + (0 if single else 1) + [0, 1, 2, 4][fhd & 3]
    pos += [1 if single else 0, 2, 4, 8][fhd >> 6]
    tot = blocks = 0
    while True:
        h = int.from_bytes(b[pos:pos + 3], 'little'); pos += 3
        last, bt, bs = h & 1, (h >> 1) & 3, h >> 3
        if bt == 2:
            blk = b[pos:pos + bs]; lt = blk[0] & 3; sf = (blk[0] >> 2) & 3
            if lt in (0, 1):
                lh, rs = ((1, blk[0] >> 3) if sf in (0, 2) else (2, (blk[0] >> 4) + (blk[1] << 4)) if sf == 1
                          else (3, (blk[0] >> 4) + (blk[1] << 4) + (blk[2] << 12)))
                sp = lh + (rs if lt == 0 else 1)
            else:
                lh, sh, m = {0: (3, 14, 0x3ff), 1: (3, 14, 0x3ff), 2: (4, 18, 0x3fff), 3: (5, 22, 0x3ffff)}[sf]
                sp = lh + ((int.from_bytes(blk[:lh], 'little') >> sh) & m)
            nb = blk[sp]
            tot += nb if nb < 128 else ((nb - 128) << 8) + blk[sp + 1] if nb < 255 else blk[sp + 1] + (blk[sp + 2] << 8) + 0x7F00
        pos += bs if bt != 1 else 1
        blocks += 1
        if last:
            return tot, blocks

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
        print("ERR", str(e)[-100:])
'''
import h5py, hdf5plugin
print("== dense sequences: tokens of k bytes from an alphabet, zstd level; first temp scale that decodes")
for k, alpha, level, chunk in itertools.product([3, 4], [4, 16, 256], [3, 19, 22], [517460, 1 << 20]):
    rng = np.random.default_rng(k * 1000 + alpha + level)
    toks = rng.integers(0, 256, (alpha, k), dtype=np.uint8)
    n = chunk * 2
    a = toks[rng.integers(0, alpha, n // k + 1)].reshape(-1)[:n].copy()
    p = f"/tmp/zd-{k}-{alpha}-{level}-{chunk}.h5"
    with h5py.File(p, "w") as fh:
        fh.create_dataset("x", data=a, chunks=(chunk,), **hdf5plugin.Zstd(clevel=level))
    with h5py.File(p, "r") as fh:
        d = fh["x"]
        stats = [nseq(d.id.read_direct_chunk(d.id.get_chunk_info(i).chunk_offset)[1]) for i in range(d.id.get_num_chunks())]
    dens = max(s for s, _ in stats) / chunk
    blocks = max(b for _, b in stats)
    res = "none"
    for scale in ("1", "2", "3", "4", "8"):
        r = subprocess.run([sys.executable, "-c", CASE, p], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, H5GDS_ZSTD_TEMP_SCALE=scale))
        out = (r.stdout.strip().splitlines() or ["?"])[-1]
        if out.startswith("OK"):
            res = scale
            break
    print(f"k {k} alphabet {alpha} level {level} chunk {chunk}: sequences/byte {dens:.3f} blocks {blocks} -> scale {res}",
          flush=True)
