"""Times the five kernels of the zstd block-by-block decoder
(src/codec/zstd_blocks.h, codec_kernels.cu) on frames written by
zstd-blocks-frames.py, without I/O or nvCOMP: batches of N chunks (the
frames repeated), each kernel's time (CUDA events, median of --repeat),
every decoded chunk's CRC-32 checked, and a second decode with clock64
stamps: each block's cycles to its tables, its literals and its sequences,
and cycles per sequence. Each --src folder (codec_kernels.cu and its
headers) is compiled by NVRTC as the library does: an A/B of variants.

    python3 bench/tools/zstd-blocks-kernels.py --frames DIR --src head=src/codec [--src old=DIR2] \
        --widths 32,128,512 --csv out.csv        # GPU machine: CuPy, NVRTC
"""
import argparse, ctypes, glob, json, os, statistics, sys, zlib
import numpy as np
import cupy as cp

ap = argparse.ArgumentParser()
ap.add_argument("--src", action="append", required=True, help="label=folder holding codec_kernels.cu and its headers")
ap.add_argument("--widths", default="32,128,512")
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--frames", required=True, help="folder of zstd-blocks-frames.py's output")
ap.add_argument("--csv", help="write the rows here too")
a = ap.parse_args()

def nvrtc():
    pats = ["/usr/local/cuda/lib64/libnvrtc.so*", "/usr/local/cuda*/lib64/libnvrtc.so*", "/usr/lib/x86_64-linux-gnu/libnvrtc.so*"]
    import site
    for sp in site.getsitepackages():
        pats.append(sp + "/nvidia/cu*/lib/libnvrtc.so*"); pats.append(sp + "/nvidia/cuda_nvrtc/lib/libnvrtc.so*")
    for p in pats:
        for f in sorted(glob.glob(p)):
            if "builtins" in f or "alt" in f: continue
            try: return ctypes.CDLL(f)
            except OSError: pass
    raise SystemExit("no libnvrtc")

PROBE = r'''
extern "C" __global__ void probe_layout(u64 expect, u64 *v) { *v = zb_layout(expect).total; }
'''

def rewritten(source, head, pairs):
    """The function of `source` (bytes) that opens with `head`, to its
    closing brace, with each (old, new) pair replaced once (each must be
    there: the library's code is patched, not copied)."""
    t = source.decode()
    a = t.index(head)
    f = t[a:t.index("\n}\n", a) + 3]
    for old, new in pairs:
        assert old in f, (head, old)
        f = f.replace(old, new, 1)
    return f

def compile_dir(lib, d):
    names = ["codec_shared.h", "zstd_splice.h", "deflate_splice.h", "inflate_split.h", "zstd_blocks.h"]
    hdrs = [open(os.path.join(d, n), "rb").read() for n in names]
    kernels = open(os.path.join(d, "codec_kernels.cu"), "rb").read()
    # zb_decode with clock64 stamps: the tables built, the literals decoded, the sequences walked
    stamped = rewritten(hdrs[4], "ZS_FN void zb_decode(", [
        ("zb_decode(", "probe_zb_decode(long long *st, "),
        ("{\n    if (b->type != 2)", "{\n    long long c0 = clock64();\n    if (b->type != 2)"),
        ("    ZS_SYNC();\n    /* the literals", "    ZS_SYNC();\n    if (lane == 0) st[0] = clock64() - c0;\n    /* the literals"),
        ("    if (lane == seq_lane)\n        zb_sequences(p, b, seqs, w);",
         "    if (lane == 0) st[1] = clock64() - c0;\n    if (lane == seq_lane) {\n        zb_sequences(p, b, seqs, w);\n"
         "        st[2] = clock64() - c0;\n        st[3] = b->nseq;\n    }")])
    # the decode kernel calling it; the resolve with nvCOMP's entries by pointer (CuPy passes no structs)
    decode = 'extern "C" ' + rewritten(kernels, "__global__ void codec_zstd_decode(", [
        ("codec_zstd_decode(", "probe_decode("), ("u64 expect)", "u64 expect, long long *st)"),
        ("zb_decode(in,", "probe_zb_decode(st + ((u64)blockIdx.y * zb_max_blocks(expect) + k) * 4, in,")])
    resolve = 'extern "C" ' + rewritten(kernels, "__global__ void codec_zstd_resolve(", [
        ("codec_zstd_resolve(", "probe_resolve("), ("gds_kentries_t e,", "const gds_kentries_t *ep,"),
        ("{\n", "{\n    const gds_kentries_t e = *ep;\n")])
    src = kernels + PROBE.encode() + (stamped + decode + resolve).encode()
    arr = lambda xs: (ctypes.c_char_p * len(xs))(*xs)
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"codec_kernels.cu", len(names), arr(hdrs), arr([n.encode() for n in names])) == 0
    opts = [b"--gpu-architecture=sm_90", b"--std=c++17", b"-default-device", b"-lineinfo"]
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr(opts))
    n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, log)
    if rc != 0: raise SystemExit("NVRTC failed for %s:\n%s" % (d, log.value.decode()))
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n)); cub = ctypes.create_string_buffer(n.value); lib.nvrtcGetCUBIN(prog, cub)
    import tempfile
    fd, path = tempfile.mkstemp(suffix=".cubin"); os.write(fd, cub.raw); os.close(fd)
    return cp.RawModule(path=path)

ZS_BLOCK_MAX = 128 * 1024
def layout_total(mod, expect):
    v = cp.zeros(1, dtype=cp.uint64)
    mod.get_function("probe_layout")((1,), (1,), (np.uint64(expect), v))
    return int(v.get()[0])

index = json.load(open(os.path.join(a.frames, "frames.json")))
blob = np.fromfile(os.path.join(a.frames, "frames.bin"), dtype=np.uint8)
dblob = cp.asarray(blob)
lib = nvrtc()
kjob = np.dtype([("in", "<u8"), ("out", "<u8"), ("mid", "<u8"), ("in_size", "<u8"), ("out_size", "<u8"), ("entry0", "<u8"),
                 ("nentries", "<u4"), ("chunk", "<u4"), ("p0", "<u4"), ("p1", "<u4"), ("dead", "<u4"), ("pad", "<u4")])
rows = []
for spec in a.src:
    label, d = spec.split("=", 1)
    mod = compile_dir(lib, d)
    fn = {k: mod.get_function(k) for k in ("codec_zstd_plan", "codec_zstd_decode", "codec_zstd_link", "codec_zstd_execute", "probe_resolve", "probe_decode")}
    for kind, frames in index.items():
        expect = frames[0][2]
        for width in [int(w) for w in a.widths.split(",")]:
            total = layout_total(mod, expect)
            mem = cp.zeros(width * total + 256, dtype=cp.uint8)
            out = cp.zeros(width * expect, dtype=cp.uint8)
            jobs = np.zeros(width, dtype=kjob)
            for j in range(width):
                off, size, raw, crc = frames[j % len(frames)]
                jobs[j]["in"] = dblob.data.ptr + off; jobs[j]["in_size"] = size
                jobs[j]["out"] = out.data.ptr + j * expect; jobs[j]["out_size"] = raw; jobs[j]["chunk"] = j
            djobs = cp.asarray(jobs.view(np.uint8)); err = cp.zeros(width, dtype=cp.uint32); made = cp.zeros(1, dtype=cp.uint32)
            for j in range(width):
                jobs[j]["entry0"] = j
            djobs = cp.asarray(jobs.view(np.uint8))
            # nvCOMP's entries (7 arrays of width; the aux records 32 bytes each) and a dummy input
            ent = [cp.zeros(width * 4, dtype=cp.uint64) for _ in range(7)]
            dent = cp.asarray(np.array([x.data.ptr for x in ent], dtype=np.uint64))
            dummy = cp.zeros(64, dtype=cp.uint8); dp = np.uint64(dummy.data.ptr)
            n = np.uint32(width); memp = np.uint64(mem.data.ptr); st = np.uint64(total); ex = np.uint64(expect)
            gx = (expect + ZS_BLOCK_MAX - 1) // ZS_BLOCK_MAX + 2
            steps = [("plan", lambda: fn["codec_zstd_plan"](((width + 63) // 64,), (64,), (djobs, n, err, memp, st, ex))),
                     ("decode", lambda: fn["codec_zstd_decode"]((gx, width), (64,), (djobs, memp, st, ex))),
                     ("link", lambda: fn["codec_zstd_link"](((width + 63) // 64,), (64,), (djobs, n, memp, st, ex))),
                     ("execute", lambda: fn["codec_zstd_execute"]((gx, width), (32,), (djobs, memp, st, ex))),
                     ("resolve", lambda: fn["probe_resolve"]((width,), (256,), (djobs, dent, memp, st, ex, err, dp, np.uint64(16), dp, made)))]
            times = {k: [] for k, _ in steps}
            for rep in range(a.repeat + 1):
                made[...] = 0; out[...] = 0
                ev = [cp.cuda.Event() for _ in range(len(steps) + 1)]
                ev[0].record()
                for i, (k, f) in enumerate(steps):
                    f(); ev[i + 1].record()
                ev[-1].synchronize()
                if rep:
                    for i, (k, f) in enumerate(steps):
                        times[k].append(cp.cuda.get_elapsed_time(ev[i], ev[i + 1]))
            stamps = cp.zeros(width * (expect // 2048 + 16) * 4, dtype=cp.int64)  # zb_max_blocks(expect) a chunk
            fn["codec_zstd_plan"](((width + 63) // 64,), (64,), (djobs, n, err, memp, st, ex))
            e0 = cp.cuda.Event(); e1 = cp.cuda.Event(); e0.record()
            fn["probe_decode"]((gx, width), (64,), (djobs, memp, st, ex, stamps)); e1.record(); e1.synchronize()
            sv = cp.asnumpy(stamps).reshape(-1, 4); sv = sv[sv[:, 3] > 0]
            probe = dict(stamped_ms=round(cp.cuda.get_elapsed_time(e0, e1), 3), blocks=len(sv),
                         tables_kcyc=round(float(np.median(sv[:, 0])) / 1e3, 1), lits_kcyc=round(float(np.median(sv[:, 1])) / 1e3, 1),
                         seqs_kcyc=round(float(np.median(sv[:, 2])) / 1e3, 1), max_kcyc=round(float(sv[:, 2].max()) / 1e3, 1),
                         cyc_per_seq=round(float(np.median((sv[:, 2] - sv[:, 0]) / sv[:, 3])), 1), nseq=int(np.median(sv[:, 3])))
            fn["codec_zstd_link"](((width + 63) // 64,), (64,), (djobs, n, memp, st, ex))
            host = cp.asnumpy(out)
            bad = sum(zlib.crc32(host[j * expect:(j + 1) * expect].tobytes()) != frames[j % len(frames)][3] for j in range(width))
            med = {k: statistics.median(v) for k, v in times.items()}
            tot = sum(med.values())
            row = dict(variant=label, data=kind, chunks=width, made=int(made.get()[0]), crc_bad=bad, total_ms=round(tot, 3),
                       **{k + "_ms": round(v, 3) for k, v in med.items()}, GBps=round(width * expect / tot / 1e6, 2), **probe)
            print(row, flush=True); rows.append(row)
            del mem, out
if a.csv and rows:
    import csv
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader(); w.writerows(rows)
