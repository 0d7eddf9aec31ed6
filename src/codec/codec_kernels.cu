// The GPU codecs' own kernels: framing of HDF5's filters around nvCOMP's
// batched (de)compressors, byte shuffle, bit shuffle, checksums.
// Compiled at run time by NVRTC for the device's architecture
// (gpu_codec.c); embedded in the library as a string at build time.
// Every size read from a chunk is checked against the chunk's end before
// it is used: corrupt input gives an error code, never a read or write
// outside the buffers.
#include "codec_shared.h"
#define ZS_MAX_CHECKPOINTS GDS_ZSTD_SPLICE_CHECKPOINTS
#include "zstd_splice.h"
#include "deflate_splice.h"
#include "inflate_split.h"
#include "zstd_blocks.h"

typedef unsigned char u8;
typedef gds_u64 u64;
typedef gds_u32 u32;

#define ADLER_MOD 65521u
#define FLETCHER_MOD 65535u

__device__ __forceinline__ void fail(u32 *err, u64 *detail, u32 chunk, u32 code, u64 det)
{
    if (atomicCAS(&err[chunk], 0u, code) == 0u)
        detail[chunk] = det;
}

__device__ __forceinline__ u32 be32(const u8 *p)
{
    return ((u32)p[0] << 24) | ((u32)p[1] << 16) | ((u32)p[2] << 8) | (u32)p[3];
}
__device__ __forceinline__ u64 be64(const u8 *p) { return ((u64)be32(p) << 32) | be32(p + 4); }
__device__ __forceinline__ void put_be32(u8 *p, u32 v)
{
    p[0] = (u8)(v >> 24); p[1] = (u8)(v >> 16); p[2] = (u8)(v >> 8); p[3] = (u8)v;
}
__device__ __forceinline__ void put_be64(u8 *p, u64 v)
{
    put_be32(p, (u32)(v >> 32));
    put_be32(p + 4, (u32)v);
}
__device__ __forceinline__ u32 le32(const u8 *p)
{
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}
__device__ __forceinline__ void put_le32(u8 *p, u32 v)
{
    p[0] = (u8)v; p[1] = (u8)(v >> 8); p[2] = (u8)(v >> 16); p[3] = (u8)(v >> 24);
}

// This thread's index and the stride over the x dimension of the grid.
__device__ __forceinline__ u64 gtid() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ u64 gstride() { return (u64)gridDim.x * blockDim.x; }

// Copies len bytes, all threads of the x dimension sharing the work.
__device__ void copy_bytes(u8 *dst, const u8 *src, u64 len, u64 tid, u64 stride)
{
    if ((((u64)dst | (u64)src) & 15) == 0) {
        u64 n16 = len / 16;
        const uint4 *s = (const uint4 *)src;
        uint4 *d = (uint4 *)dst;
        for (u64 i = tid; i < n16; i += stride)
            d[i] = s[i];
        for (u64 i = n16 * 16 + tid; i < len; i += stride)
            dst[i] = src[i];
    }
    else if ((((u64)dst | (u64)src) & 3) == 0) {
        u64 n4 = len / 4;
        const u32 *s = (const u32 *)src;
        u32 *d = (u32 *)dst;
        for (u64 i = tid; i < n4; i += stride)
            d[i] = s[i];
        for (u64 i = n4 * 4 + tid; i < len; i += stride)
            dst[i] = src[i];
    }
    else {
        for (u64 i = tid; i < len; i += stride)
            dst[i] = src[i];
    }
}

// Sums of a block's threads (u64), into thread 0's return value.
__device__ u64 block_sum(u64 v)
{
    __shared__ u64 part[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    v = 0;
    if (warp == 0) {
        int nw = (blockDim.x + 31) >> 5;
        v = lane < nw ? part[lane] : 0;
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
    }
    return v;
}

__device__ __forceinline__ u64 job_len(const gds_kjob_t &jb, const u64 *dsize)
{
    return dsize ? dsize[jb.chunk] : jb.in_size;
}

extern "C" {

// The first GDS_HEAD_BYTES bytes of each job's input (zeros past its end),
// for the host to plan the blocks.
__global__ void codec_gather_head(const gds_kjob_t *jobs, u32 n, u8 *heads)
{
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    u32 j = t / GDS_HEAD_BYTES, b = t % GDS_HEAD_BYTES;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    heads[(u64)j * GDS_HEAD_BYTES + b] = b < jb.in_size ? ((const u8 *)jb.in)[b] : 0;
}

// in -> out, the input's length (dsize when given).
__global__ void codec_copy(const gds_kjob_t *jobs, const u64 *dsize)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    copy_bytes((u8 *)jb.out, (const u8 *)jb.in, job_len(jb, dsize), gtid(), gstride());
}

// Fletcher-32 as HDF5 computes it (H5_checksum_fletcher32): big-endian
// 16-bit words, a trailing odd byte as the high byte of a last word,
// sums folded with (x & 0xffff) + (x >> 16). Folding keeps each sum
// congruent to the true sum mod 65535 and never makes a positive sum 0, so
// the result is: 0 for a true sum of 0, else the residue with 0 written as
// 0xffff. Sums per chunk: acc[3j] = sum of words, acc[3j+1] = sum of
// (m - i) * word_i (m words), acc[3j+2] = whether any word is nonzero.
// `trailer` bytes at the end are not summed (the stored checksum).
__global__ void codec_fletcher_sum(const gds_kjob_t *jobs, const u64 *dsize, u64 *acc, u32 trailer)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    u64 len = job_len(jb, dsize);
    len = len >= trailer ? len - trailer : 0;
    const u8 *p = (const u8 *)jb.in;
    u64 m = (len + 1) / 2;
    u64 s1 = 0, s2 = 0, nz = 0;
    for (u64 w = gtid(); w < m; w += gstride()) {
        u32 hi = p[2 * w];
        u32 lo = 2 * w + 1 < len ? p[2 * w + 1] : 0;
        u32 v = (hi << 8) | lo;
        s1 += v;
        s2 += (u64)v * ((m - w) % FLETCHER_MOD);
        nz |= v;
    }
    s1 = block_sum(s1 % FLETCHER_MOD);
    s2 = block_sum(s2 % FLETCHER_MOD);
    nz = block_sum(nz ? 1 : 0);
    if (threadIdx.x == 0) {
        atomicAdd((unsigned long long *)&acc[3 * blockIdx.y], (unsigned long long)s1);
        atomicAdd((unsigned long long *)&acc[3 * blockIdx.y + 1], (unsigned long long)s2);
        if (nz)
            atomicOr((unsigned long long *)&acc[3 * blockIdx.y + 2], 1ull);
    }
}

__device__ __forceinline__ u32 fletcher_value(const u64 *a)
{
    u32 f1 = (u32)(a[0] % FLETCHER_MOD), f2 = (u32)(a[1] % FLETCHER_MOD);
    if (a[2]) {
        f1 = f1 ? f1 : FLETCHER_MOD;
        f2 = f2 ? f2 : FLETCHER_MOD;
    }
    return (f2 << 16) | f1;
}

// Compares with the stored checksum (little-endian, the last 4 bytes), or
// with its byte-swapped form, as HDF5 accepts for files of HDF5 < 1.6.3.
__global__ void codec_fletcher_check(const gds_kjob_t *jobs, u32 n, const u64 *acc, u32 *err, u64 *detail, u32 code)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    if (jb.in_size < 4)
        return; // the host marked it
    u32 f = fletcher_value(&acc[3 * j]);
    u32 rev = ((f & 0x00ff00ffu) << 8) | ((f >> 8) & 0x00ff00ffu);
    u32 stored = le32((const u8 *)jb.in + jb.in_size - 4);
    if (stored != f && stored != rev)
        fail(err, detail, jb.chunk, code | GDS_KERR_CHECKSUM, ((u64)stored << 32) | f);
}

// Appends the checksum (encoding): in place after the data, size + 4.
__global__ void codec_fletcher_put(const gds_kjob_t *jobs, u32 n, u64 *dsize, const u64 *acc)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    u64 len = dsize[jb.chunk];
    put_le32((u8 *)jb.in + len, fletcher_value(&acc[3 * j]));
    dsize[jb.chunk] = len + 4;
}

// Adler-32 sums: acc[2j] = sum of bytes, acc[2j+1] = sum of (len - i) * byte_i.
// which = 0: over the output (out_size bytes, decoding); 1: over the input.
__global__ void codec_adler_sum(const gds_kjob_t *jobs, u64 *acc, u32 which)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    const u8 *p = (const u8 *)(which ? jb.in : jb.out);
    u64 len = which ? jb.in_size : jb.out_size;
    u64 s1 = 0, s2 = 0;
    for (u64 i = gtid(); i < len; i += gstride()) {
        u32 v = p[i];
        s1 += v;
        s2 += (u64)v * ((len - i) % ADLER_MOD);
    }
    s1 = block_sum(s1 % ADLER_MOD);
    s2 = block_sum(s2 % ADLER_MOD);
    if (threadIdx.x == 0) {
        atomicAdd((unsigned long long *)&acc[2 * blockIdx.y], (unsigned long long)s1);
        atomicAdd((unsigned long long *)&acc[2 * blockIdx.y + 1], (unsigned long long)s2);
    }
}

__device__ __forceinline__ u32 adler_value(const u64 *a, u64 len)
{
    u32 s1 = (u32)((1 + a[0]) % ADLER_MOD);
    u32 s2 = (u32)((len % ADLER_MOD + a[1]) % ADLER_MOD);
    return (s2 << 16) | s1;
}

// zlib's trailer: big-endian Adler-32 of the decoded data, the chunk's last 4 bytes.
__global__ void codec_adler_check(const gds_kjob_t *jobs, u32 n, const u64 *acc, u32 *err, u64 *detail, u32 code)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    if (jb.in_size < 7 || err[jb.chunk])
        return;
    u32 a = adler_value(&acc[2 * j], jb.out_size);
    u32 stored = be32((const u8 *)jb.in + jb.in_size - 4);
    if (stored != a)
        fail(err, detail, jb.chunk, code | GDS_KERR_CHECKSUM, ((u64)stored << 32) | a);
}

__device__ __forceinline__ void set_entry(const gds_kentries_t &e, u64 i, u64 in, u64 in_bytes, u64 out, u64 cap,
                                          u32 chunk, u32 flags)
{
    ((u64 *)e.in_ptrs)[i] = in;
    ((u64 *)e.in_bytes)[i] = in_bytes;
    ((u64 *)e.out_ptrs)[i] = out;
    ((u64 *)e.out_cap)[i] = cap;
    ((u64 *)e.out_actual)[i] = 0;
    ((int *)e.status)[i] = 0;
    gds_kentry_t *x = &((gds_kentry_t *)e.aux)[i];
    x->chunk = chunk;
    x->flags = flags;
    x->copy_src = x->copy_dst = x->copy_len = 0;
}

// A valid tiny stream in place of an entry that must not be decoded (its
// chunk failed already, or it is a raw block): it decodes to one byte of scratch.
__device__ __forceinline__ void set_dummy(const gds_kentries_t &e, u64 i, u64 dummy_in, u64 dummy_len, u64 scratch,
                                          u32 chunk, u32 flags)
{
    set_entry(e, i, dummy_in, dummy_len, scratch, 1, chunk, flags | GDS_KENTRY_DUMMY);
}

// zlib stream -> raw deflate for nvCOMP: checks the 2-byte header (CM = 8,
// window <= 32K, no preset dictionary, header check), copies the deflate
// data (without header and Adler-32 trailer) to 4-byte aligned staging
// (mid), one entry per chunk.
__global__ void codec_zlib_prep(const gds_kjob_t *jobs, gds_kentries_t e, u32 *err, u64 *detail, u32 code,
                                u64 dummy_in, u64 dummy_len, u64 scratch)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    const u8 *p = (const u8 *)jb.in;
    bool usable = jb.in_size >= 7 && !jb.dead;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        bool ok = usable && err[jb.chunk] == 0;
        if (ok) {
            u32 cmf = p[0], flg = p[1];
            if (!gds_zlib_header_ok(cmf, flg)) {
                fail(err, detail, jb.chunk, code | GDS_KERR_HEADER, (cmf << 8) | flg);
                ok = false;
            }
        }
        if (ok)
            set_entry(e, jb.entry0, jb.mid, jb.in_size - 6, jb.out, jb.out_size, blockIdx.y, 0);
        else
            set_dummy(e, jb.entry0, dummy_in, dummy_len, scratch, blockIdx.y, 0);
    }
    if (usable)
        copy_bytes((u8 *)jb.mid, p + 2, jb.in_size - 6, gtid(), gstride());
}

// One entry per chunk, the whole input: a zstd frame, checked first.
__global__ void codec_zstd_prep(const gds_kjob_t *jobs, u32 n, gds_kentries_t e, u32 *err, u64 *detail, u32 code,
                                u64 dummy_in, u64 dummy_len, u64 scratch)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    bool ok = !jb.dead && err[jb.chunk] == 0 && jb.in_size > 0;
    if (ok) {
        u64 det;
        u32 why = gds_zstd_frame_check((const u8 *)jb.in, jb.in_size, jb.out_size, 1, &det);
        if (why) {
            fail(err, detail, jb.chunk, code | why, det);
            ok = false;
        }
    }
    if (ok)
        set_entry(e, jb.entry0, jb.in, jb.in_size, jb.out, jb.out_size, j, 0);
    else
        set_dummy(e, jb.entry0, dummy_in, dummy_len, scratch, j, 0);
}

// nvCOMP's per-entry results: status, and the decoded size (must fill the output).
__global__ void codec_nvcomp_check(const gds_kjob_t *jobs, gds_kentries_t e, u64 nent, u32 *err, u64 *detail,
                                   u32 code)
{
    u64 i = gtid();
    if (i >= nent)
        return;
    const gds_kentry_t x = ((const gds_kentry_t *)e.aux)[i];
    if (x.flags & GDS_KENTRY_DUMMY)
        return;
    u32 chunk = jobs[x.chunk].chunk;
    int st = ((const int *)e.status)[i];
    u64 got = ((const u64 *)e.out_actual)[i], want = ((const u64 *)e.out_cap)[i];
    if (st != 0)
        fail(err, detail, chunk, code | GDS_KERR_DECODE, (u64)(unsigned)st);
    else if (got != want)
        fail(err, detail, chunk, code | GDS_KERR_SIZE, got);
}

// The copies entries ask for (raw blocks, encoded blocks to their place):
// one thread block per entry.
__global__ void codec_entry_copy(gds_kentries_t e, u64 nent)
{
    for (u64 i = blockIdx.x; i < nent; i += gridDim.x) {
        const gds_kentry_t x = ((const gds_kentry_t *)e.aux)[i];
        if (x.flags & GDS_KENTRY_COPY)
            copy_bytes((u8 *)x.copy_dst, (const u8 *)x.copy_src, x.copy_len, threadIdx.x, blockDim.x);
    }
}

// HDF5's LZ4 filter (32004): 8-byte BE original size, 4-byte BE block size
// (checked by the host: out_size and p1), then per block a 4-byte BE
// compressed size and the block, stored raw when that size equals the
// block's size. One thread per chunk walks the blocks.
__global__ void codec_lz4h5_walk(const gds_kjob_t *jobs, u32 n, gds_kentries_t e, u32 *err, u64 *detail, u32 code,
                                 u64 dummy_in, u64 dummy_len, u64 scratch)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    const u8 *p = (const u8 *)jb.in;
    u64 bs = jb.p1, pos = 12;
    bool ok = !jb.dead && err[jb.chunk] == 0 && jb.in_size >= 12;
    for (u32 k = 0; k < jb.nentries; k++) {
        u64 i = jb.entry0 + k;
        u64 off = (u64)k * bs;
        u64 bsz = jb.out_size - off < bs ? jb.out_size - off : bs;
        if (ok && pos + 4 > jb.in_size) {
            fail(err, detail, jb.chunk, code | GDS_KERR_TRUNCATED, pos);
            ok = false;
        }
        u64 cs = ok ? be32(p + pos) : 0;
        if (ok && (cs > jb.in_size - pos - 4 || cs == 0)) {
            fail(err, detail, jb.chunk, code | GDS_KERR_TRUNCATED, pos);
            ok = false;
        }
        if (!ok) {
            set_dummy(e, i, dummy_in, dummy_len, scratch, j, 0);
            continue;
        }
        if (cs == bsz) {
            set_dummy(e, i, dummy_in, dummy_len, scratch, j, GDS_KENTRY_COPY);
            gds_kentry_t *x = &((gds_kentry_t *)e.aux)[i];
            x->copy_src = jb.in + pos + 4;
            x->copy_dst = jb.out + off;
            x->copy_len = bsz;
        }
        else
            set_entry(e, i, jb.in + pos + 4, cs, jb.out + off, bsz, j, 0);
        pos += 4 + cs;
    }
}

// bitshuffle's framing (32008 with LZ4 or zstd): 8-byte BE size, 4-byte BE
// block size in bytes (checked by the host: p0 = element size, p1 = block
// size in elements), then per block a 4-byte BE compressed size and the
// compressed, bit-shuffled block; the elements that do not fill a multiple
// of 8 follow raw (their address goes to tail[j]). The blocks decode into
// mid at their place in the output.
__global__ void codec_bshuf_walk(const gds_kjob_t *jobs, u32 n, gds_kentries_t e, u64 *tail, u32 *err, u64 *detail,
                                 u32 code, u64 dummy_in, u64 dummy_len, u64 scratch, u32 zstd)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    const u8 *p = (const u8 *)jb.in;
    u64 elem = jb.p0, bs = jb.p1;
    u64 size = jb.out_size / elem;
    u64 full = size / bs, last = (size % bs) / 8 * 8;
    u64 leftover = (size % 8) * elem;
    u64 pos = 12;
    bool ok = !jb.dead && err[jb.chunk] == 0 && jb.in_size >= 12;
    for (u32 k = 0; k < jb.nentries; k++) {
        u64 i = jb.entry0 + k;
        u64 belems = k < full ? bs : last;
        if (ok && pos + 4 > jb.in_size) {
            fail(err, detail, jb.chunk, code | GDS_KERR_TRUNCATED, pos);
            ok = false;
        }
        long long cs = ok ? (long long)(int)be32(p + pos) : 0;
        if (ok && (cs <= 0 || (u64)cs > jb.in_size - pos - 4)) {
            fail(err, detail, jb.chunk, code | GDS_KERR_TRUNCATED, pos);
            ok = false;
        }
        u64 det;
        u32 why = ok && zstd ? gds_zstd_frame_check(p + pos + 4, (u64)cs, belems * elem, 0, &det) : 0;
        if (why) {
            fail(err, detail, jb.chunk, code | why, det);
            ok = false;
        }
        if (!ok) {
            set_dummy(e, i, dummy_in, dummy_len, scratch, j, 0);
            continue;
        }
        set_entry(e, i, jb.in + pos + 4, (u64)cs, jb.mid + (u64)k * bs * elem, belems * elem, j, 0);
        pos += 4 + (u64)cs;
    }
    if (ok && pos + leftover > jb.in_size) {
        fail(err, detail, jb.chunk, code | GDS_KERR_TRUNCATED, pos);
        ok = false;
    }
    tail[j] = ok ? jb.in + pos : 0;
}

// Blosc-1 chunks (32001), whose header the host checked (gds_codec_parse_blosc):
// in_size = the header's cbytes (within the stored chunk), out_size = nbytes,
// p0 = typesize | flags << 8, p1 = blocksize; entries entry0 + k * nsplits
// + j for stream j of block k. One thread per block: its start from the
// block-start table, then its streams (gds_blosc_stream), each an nvCOMP
// entry decoding into mid at the block's place (k * blocksize + j * stream
// size), or a copy when stored raw. zstd streams are checked first.
__global__ void codec_blosc_walk(const gds_kjob_t *jobs, gds_kentries_t e, u32 *err, u64 *detail, u32 code,
                                 u64 dummy_in, u64 dummy_len, u64 scratch, u32 zstd)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    u64 k = gtid();
    u64 bs = jb.p1, nbytes = jb.out_size;
    u64 nblocks = (nbytes + bs - 1) / bs;
    if (k >= nblocks)
        return;
    const u8 *p = (const u8 *)jb.in;
    u32 typesize = jb.p0 & 0xff, flags = (jb.p0 >> 8) & 0xff;
    bool partial = (k + 1) * bs > nbytes;
    u64 bsize = partial ? nbytes - k * bs : bs;
    u32 nsplits_whole = gds_blosc_nsplits(flags, typesize, bs, 0);
    u32 ns = gds_blosc_nsplits(flags, typesize, bs, partial);
    u64 neblock = bsize / ns;
    long long off = (long long)(int)le32(p + 16 + 4 * k);
    bool ok = !jb.dead && err[jb.chunk] == 0;
    for (u32 j = 0; j < ns; j++) {
        u64 i = jb.entry0 + k * nsplits_whole + j;
        u64 cs = 0, det = 0;
        u32 why = ok ? gds_blosc_stream(p, jb.in_size, &off, &cs, &det) : 0;
        const u8 *stream = p + (off - (long long)cs);
        if (!why && ok && zstd && cs != neblock)
            why = gds_zstd_frame_check(stream, cs, neblock, 0, &det);
        if (why) {
            fail(err, detail, jb.chunk, code | why, det);
            ok = false;
        }
        if (!ok) {
            set_dummy(e, i, dummy_in, dummy_len, scratch, blockIdx.y, 0);
            continue;
        }
        u64 dst = jb.mid + k * bs + j * neblock;
        if (cs == neblock) {
            set_dummy(e, i, dummy_in, dummy_len, scratch, blockIdx.y, GDS_KENTRY_COPY);
            gds_kentry_t *x = &((gds_kentry_t *)e.aux)[i];
            x->copy_src = (u64)stream;
            x->copy_dst = dst;
            x->copy_len = cs;
        }
        else
            set_entry(e, i, (u64)stream, cs, dst, neblock, blockIdx.y, 0);
    }
}

// The decoded blosc chunk into out: a MEMCPYED chunk's bytes after the
// header; else each block from mid, unshuffled as its header says
// (gds_blosc_block_byte). One thread per output byte.
__global__ void codec_blosc_finish(const gds_kjob_t *jobs, const u32 *err)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    if (err[jb.chunk] || jb.dead)
        return;
    u8 *out = (u8 *)jb.out;
    u32 flags = (jb.p0 >> 8) & 0xff, typesize = jb.p0 & 0xff;
    if (flags & GDS_BLOSC_MEMCPYED) {
        copy_bytes(out, (const u8 *)jb.in + 16, jb.out_size, gtid(), gstride());
        return;
    }
    const u8 *mid = (const u8 *)jb.mid;
    u32 bs = jb.p1, nbytes = (u32)jb.out_size;
    bool plain = !(flags & (GDS_BLOSC_DOSHUFFLE | GDS_BLOSC_DOBITSHUFFLE)) ||
                 ((flags & GDS_BLOSC_DOSHUFFLE) && typesize == 1 && !(flags & GDS_BLOSC_DOBITSHUFFLE));
    if (plain) {
        copy_bytes(out, mid, nbytes, gtid(), gstride());
        return;
    }
    for (u64 i = gtid(); i < nbytes; i += gstride()) {
        u32 k = (u32)i / bs, b0 = k * bs;
        u32 bsize = nbytes - b0 < bs ? nbytes - b0 : bs;
        out[i] = gds_blosc_block_byte(mid + b0, flags, typesize, bsize, (u32)i - b0);
    }
}


// Bit unshuffle (bitshuffle's layout): per block of S elements (S a
// multiple of 8), bit k of byte b of element i is bit i % 8 of byte i / 8
// of row 8 b + k (rows of S / 8 bytes). One thread per group of 8
// elements; the leftover elements (size % 8) are copied from tail[j]
// (after the compressed blocks), or from after the blocks of the input.
// Source: mid when set (decompressed blocks), else in.
__global__ void codec_bitunshuffle(const gds_kjob_t *jobs, const u64 *tail, const u32 *err)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    if (err[jb.chunk] || jb.dead)
        return;
    const u8 *src = (const u8 *)(jb.mid ? jb.mid : jb.in);
    u8 *out = (u8 *)jb.out;
    u64 elem = jb.p0, bs = jb.p1;
    u64 size = jb.out_size / elem;
    u64 groups = size / 8, full = size / bs, last = (size % bs) / 8 * 8;
    u64 leftover = (size % 8) * elem;
    const u8 *t8 = jb.mid ? (const u8 *)tail[blockIdx.y] : src + groups * 8 * elem;
    for (u64 g = gtid(); g < groups + leftover; g += gstride()) {
        if (g >= groups) {
            out[groups * 8 * elem + (g - groups)] = t8[g - groups];
            continue;
        }
        u64 e0 = g * 8, k = e0 / bs, b0 = k * bs;
        u64 S = k < full ? bs : last;
        u64 row = S / 8, gl = (e0 - b0) / 8;
        const u8 *blk = src + b0 * elem;
        for (u64 jj = 0; jj < elem; jj++) {
            u64 x = 0;
            for (u32 kk = 0; kk < 8; kk++)
                x |= (u64)blk[(jj * 8 + kk) * row + gl] << (8 * kk);
            x = gds_bit_transpose8(x);
            for (u32 t = 0; t < 8; t++)
                out[(e0 + t) * elem + jj] = (u8)(x >> (8 * t));
        }
    }
}

// Bit shuffle (encoding): in -> mid when set (blocks for the compressor;
// the leftover elements stay in the input), else in -> out (the leftover
// copied after the blocks). Sizes: in_size bytes.
__global__ void codec_bitshuffle(const gds_kjob_t *jobs)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    const u8 *in = (const u8 *)jb.in;
    u8 *dst = (u8 *)(jb.mid ? jb.mid : jb.out);
    u64 elem = jb.p0, bs = jb.p1;
    u64 size = jb.in_size / elem;
    u64 groups = size / 8, full = size / bs, last = (size % bs) / 8 * 8;
    u64 leftover = jb.mid ? 0 : (size % 8) * elem;
    for (u64 g = gtid(); g < groups + leftover; g += gstride()) {
        if (g >= groups) {
            u64 at = groups * 8 * elem + (g - groups);
            dst[at] = in[at];
            continue;
        }
        u64 e0 = g * 8, k = e0 / bs, b0 = k * bs;
        u64 S = k < full ? bs : last;
        u64 row = S / 8, gl = (e0 - b0) / 8;
        u8 *blk = dst + b0 * elem;
        for (u64 jj = 0; jj < elem; jj++) {
            u64 x = 0;
            for (u32 t = 0; t < 8; t++)
                x |= (u64)in[(e0 + t) * elem + jj] << (8 * t);
            x = gds_bit_transpose8(x);
            for (u32 kk = 0; kk < 8; kk++)
                blk[(jj * 8 + kk) * row + gl] = (u8)(x >> (8 * kk));
        }
    }
}

// HDF5's shuffle: with T bytes per element and N = len / T elements (T > 1,
// N > 1), byte t of element i is at t * N + i; the len % T leftover bytes
// stay at the end. Otherwise a plain copy. One thread per element.
__global__ void codec_unshuffle(const gds_kjob_t *jobs, const u64 *dsize, u32 T)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    const u8 *in = (const u8 *)jb.in;
    u8 *out = (u8 *)jb.out;
    u64 len = job_len(jb, dsize);
    u64 N = len / T;
    if (T <= 1 || N <= 1) {
        copy_bytes(out, in, len, gtid(), gstride());
        return;
    }
    u64 left = len - N * T;
    for (u64 i = gtid(); i < N + left; i += gstride()) {
        if (i >= N) {
            out[N * T + (i - N)] = in[N * T + (i - N)];
            continue;
        }
        if (T == 4 && (((u64)out & 3) == 0)) {
            u32 v = (u32)in[i] | ((u32)in[N + i] << 8) | ((u32)in[2 * N + i] << 16) | ((u32)in[3 * N + i] << 24);
            ((u32 *)out)[i] = v;
        }
        else if (T == 8 && (((u64)out & 7) == 0)) {
            u64 v = 0;
            for (u32 t = 0; t < 8; t++)
                v |= (u64)in[t * N + i] << (8 * t);
            ((u64 *)out)[i] = v;
        }
        else if (T == 2 && (((u64)out & 1) == 0)) {
            ((unsigned short *)out)[i] = (unsigned short)(in[i] | (in[N + i] << 8));
        }
        else {
            for (u32 t = 0; t < T; t++)
                out[i * T + t] = in[(u64)t * N + i];
        }
    }
}

__global__ void codec_shuffle(const gds_kjob_t *jobs, const u64 *dsize, u32 T)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    const u8 *in = (const u8 *)jb.in;
    u8 *out = (u8 *)jb.out;
    u64 len = job_len(jb, dsize);
    u64 N = len / T;
    if (T <= 1 || N <= 1) {
        copy_bytes(out, in, len, gtid(), gstride());
        return;
    }
    u64 left = len - N * T;
    for (u64 i = gtid(); i < N + left; i += gstride()) {
        if (i >= N) {
            out[N * T + (i - N)] = in[N * T + (i - N)];
            continue;
        }
        if (T == 4 && (((u64)in & 3) == 0)) {
            u32 v = ((const u32 *)in)[i];
            out[i] = (u8)v; out[N + i] = (u8)(v >> 8); out[2 * N + i] = (u8)(v >> 16); out[3 * N + i] = (u8)(v >> 24);
        }
        else {
            for (u32 t = 0; t < T; t++)
                out[(u64)t * N + i] = in[i * T + t];
        }
    }
}

// ---- encoding ----

// Entries of nvCOMP compressions of a chunk's pieces. mode 0 (LZ4) and 1
// (bitshuffle): fixed-size blocks, block k is bytes [k * bs, ...) of the
// input (bitshuffle: of the bit-shuffled blocks in mid), bs = p1 * p0
// (elements * element size), the last one shorter (bitshuffle: a multiple
// of 8 elements; else whatever is left). mode 2 (blosc): its streams
// (gds_blosc_stream_at; p0 = typesize | flags << 8, p1 = block size) of the
// shuffled blocks in mid, or of the input when mid is 0. Entry i
// compresses into out_base + i * slot_bytes.
__global__ void codec_blocks_plan(const gds_kjob_t *jobs, u32 n, gds_kentries_t e, u64 slot_bytes, u64 out_base,
                                  u32 mode)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    u64 elem = mode == 2 ? 1 : jb.p0, bs = (u64)jb.p1 * elem;
    u64 size = jb.in_size / elem;
    u64 len = mode == 1 ? (size / 8 * 8) * elem : jb.in_size;
    u64 src = mode == 1 || (mode == 2 && jb.mid) ? jb.mid : jb.in;
    u32 ns = mode == 2 ? gds_blosc_nsplits((jb.p0 >> 8) & 0xff, jb.p0 & 0xff, bs, 0) : 1;
    for (u32 k = 0; k < jb.nentries; k++) {
        u64 off = (u64)k * bs, bsz, blk;
        if (mode == 2)
            off = gds_blosc_stream_at(k, len, bs, ns, &bsz, &blk);
        else
            bsz = len - off < bs ? len - off : bs;
        u64 i = jb.entry0 + k;
        set_entry(e, i, src + off, bsz, out_base + i * slot_bytes, slot_bytes, j, 0);
    }
}

// Stored blocks (BTYPE 00) of in[0, len) at out, ds_stored_bytes(len)
// bytes, the last one BFINAL where `final`; all threads of the x dimension
// share the work.
__device__ void store_blocks(u8 *out, const u8 *in, u64 len, bool final, u64 tid, u64 stride)
{
    u64 nstored = len ? (len + GDS_DEFLATE_STORED_MAX - 1) / GDS_DEFLATE_STORED_MAX : 1;
    const u64 span = 5 + GDS_DEFLATE_STORED_MAX;
    for (u64 o = tid; o < 5 * nstored + len; o += stride) {
        u64 b = o / span, w = o % span;
        u64 bl = len - b * GDS_DEFLATE_STORED_MAX;
        bl = bl < GDS_DEFLATE_STORED_MAX ? bl : GDS_DEFLATE_STORED_MAX;
        u8 v;
        if (w == 0)
            v = final && b == nstored - 1 ? 1 : 0; // BFINAL, BTYPE = 00
        else if (w == 1) v = (u8)bl;
        else if (w == 2) v = (u8)(bl >> 8);
        else if (w == 3) v = (u8)~bl;
        else if (w == 4) v = (u8)(~bl >> 8);
        else v = in[b * GDS_DEFLATE_STORED_MAX + w - 5];
        out[o] = v;
    }
}

// A chunk's Deflate pieces (deflate_splice.h), a warp each, its first lane
// working, its tables in shared memory: each piece's stream walked and made
// one the next piece may follow, in place in its nvCOMP slot (DS_SYNC_BYTES
// of room after the stream). out_actual becomes the piece's joined bytes,
// or 0: the piece goes as stored blocks (it did not walk, or is no smaller
// than them). Entries nvCOMP failed are left for codec_zlib_assemble to
// report. A warp each, not a thread: the walk branches at every code, and
// the threads of one warp walking different pieces ran about 25 times
// slower (H100). Launched with GDS_DEFLATE_JOIN_WARPS warps a block.
__global__ void codec_deflate_join(const gds_kjob_t *jobs, gds_kentries_t e, u64 n)
{
    __shared__ ds_work_t work[GDS_DEFLATE_JOIN_WARPS];
    u64 i = gtid() / 32;
    if ((threadIdx.x & 31) != 0 || threadIdx.x / 32 >= GDS_DEFLATE_JOIN_WARPS || i >= n ||
        ((const int *)e.status)[i] != 0)
        return;
    const gds_kjob_t jb = jobs[((const gds_kentry_t *)e.aux)[i].chunk];
    int last = i + 1 == jb.entry0 + jb.nentries;
    u8 *p = (u8 *)((const u64 *)e.out_ptrs)[i];
    u64 len = ((const u64 *)e.out_actual)[i], in = ((const u64 *)e.in_bytes)[i];
    u64 cap = ((const u64 *)e.out_cap)[i];
    ds_stream_t s;
    u64 joined = 0;
    if (len + DS_SYNC_BYTES <= cap && ds_walk(p, len, in, &s, &work[threadIdx.x / 32]) == 0 &&
        ds_joined_bytes(&s, last) < ds_stored_bytes(in))
        joined = ds_join(p, &s, last);
    ((u64 *)e.out_actual)[i] = joined;
}

// ---- Deflate decoded in segments (inflate_split.h) ----
// Per chunk j of a batch, in the split memory: IS_MAX_SEGMENTS segment
// records, a page counter, a pool of npages pages, and per segment a list
// of npages. The raw stream is in the job's mid (codec_zlib_prep), `per`
// compressed bytes a segment nominally.

__device__ __forceinline__ is_segment_t *split_segs(u64 segs, u32 j) { return (is_segment_t *)segs + (u64)j * IS_MAX_SEGMENTS; }

// Chunk j's pool of pages, and its segment s's list of them.
__device__ __forceinline__ ds_u16 *split_pool(u64 pool, u32 j, u32 npages)
{
    return (ds_u16 *)pool + (u64)j * npages * IS_PAGE;
}
__device__ __forceinline__ u32 *split_list(u64 lists, u32 j, u32 s, u32 npages)
{
    return (u32 *)lists + ((u64)j * IS_MAX_SEGMENTS + s) * npages;
}

__device__ __forceinline__ u32 split_segments(const gds_kjob_t &jb, u64 per, u64 *n)
{
    bool usable = jb.in_size >= 7 && !jb.dead;
    *n = usable ? jb.in_size - 6 : 0;
    return usable ? is_segments(*n, per) : 0;
}

// Each segment's start: a warp a segment, the first bit where is_header_at
// holds (is_find's). The lanes test FIND_BITS positions by their first 17
// bits (is_header_bits), then the one in ten that pass get a lane each for
// the full test, in order: a lane on each position would leave most lanes
// idle while a few build tables. Grid (IS_MAX_SEGMENTS / GDS_INFLATE_WARPS,
// jobs), 32 * GDS_INFLATE_WARPS threads (blocks of one warp would cap an SM
// at half its warps).
#define FIND_ROUNDS 8u
#define FIND_BITS (32u * FIND_ROUNDS)
__global__ void codec_inflate_find(const gds_kjob_t *jobs, u64 segs, u64 next, u64 per)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    is_segment_t *seg = split_segs(segs, blockIdx.y);
    u32 s = blockIdx.x * GDS_INFLATE_WARPS + threadIdx.x / 32, lane = threadIdx.x & 31;
    u64 n;
    u32 S = split_segments(jb, per, &n);
    if (s == 0 && lane == 0)
        ((u32 *)next)[blockIdx.y] = 0;
    if (s >= S || s == 0) {
        if (lane == 0)
            seg[s].start = s < S ? 0 : IS_NO_START;
        return;
    }
    const u8 *p = (const u8 *)jb.mid;
    u64 lo = 8 * is_nominal(n, S, s), hi = 8 * is_nominal(n, S, s + 1), found = IS_NO_START;
    u8 lens[320];
    for (u64 base = lo; base < hi && found == IS_NO_START; base += FIND_BITS) {
        unsigned m[FIND_ROUNDS]; // bit l of m[r]: position base + 32 r + l passed its first 17 bits
        u32 total = 0;
#pragma unroll
        for (u32 r = 0; r < FIND_ROUNDS; r++) {
            u64 pos = base + 32 * r + lane, bits;
            m[r] = __ballot_sync(0xffffffffu, pos < hi && is_header_bits(p, n, pos, &bits));
            total += __popc(m[r]);
        }
        for (u32 first = 0; first < total; first += 32) {
            // lane i takes candidate first + i, counted in bit order
            u32 k = first + lane;
            u64 pos = IS_NO_START;
#pragma unroll
            for (u32 r = 0; r < FIND_ROUNDS; r++) {
                u32 c = __popc(m[r]);
                if (pos == IS_NO_START && k < c) {
                    unsigned mr = m[r];
                    for (u32 i = 0; i < k; i++)
                        mr &= mr - 1; // drop the k lowest
                    pos = base + 32 * r + (u64)(__ffs(mr) - 1);
                }
                else if (pos == IS_NO_START)
                    k -= c;
            }
            unsigned ok = __ballot_sync(0xffffffffu, pos != IS_NO_START && is_header_at(p, n, pos, lens));
            if (ok) {
                found = __shfl_sync(0xffffffffu, pos, __ffs(ok) - 1);
                break;
            }
        }
    }
    if (lane == 0)
        seg[s].start = found;
}

// Each segment with a start decoded into its pages: a warp a segment, its
// lanes in step (inflate_split.h), its tables in shared memory. Grid
// (IS_MAX_SEGMENTS / GDS_INFLATE_WARPS, jobs).
__global__ void codec_inflate_segments(const gds_kjob_t *jobs, u64 segs, u64 next, u64 pool, u64 lists, u32 npages,
                                       u64 per)
{
    __shared__ ds_work_t work[GDS_INFLATE_WARPS];
    u32 w = threadIdx.x / 32, j = blockIdx.y, s = blockIdx.x * GDS_INFLATE_WARPS + w;
    if (w >= GDS_INFLATE_WARPS)
        return;
    const gds_kjob_t jb = jobs[j];
    is_segment_t *seg = split_segs(segs, j);
    u64 n;
    u32 S = split_segments(jb, per, &n);
    if (s >= S || seg[s].start == IS_NO_START)
        return;
    u32 t = is_next(seg, S, s);
    is_out_t o;
    o.pool = split_pool(pool, j, npages);
    o.next = (u32 *)next + j;
    o.npages = npages;
    o.list = split_list(lists, j, s, npages);
    is_segment_t r;
    r.start = seg[s].start;
    is_decode((const u8 *)jb.mid, n, r.start, t < S ? seg[t].start : IS_NO_START, s == 0, &o, &work[w], &r);
    if ((threadIdx.x & 31) == 0) {
        seg[s].end = r.end;
        seg[s].count = r.count;
        seg[s].status = r.status;
        seg[s].final = r.final;
    }
}

// A chain a false start broke, mended (is_mend): a warp a chunk, in step,
// its tables in shared memory. Grid (jobs), 32 threads.
__global__ void codec_inflate_mend(const gds_kjob_t *jobs, u64 segs, u64 next, u64 pool, u64 lists, u32 npages,
                                   u64 per)
{
    __shared__ ds_work_t work;
    u32 j = blockIdx.x;
    const gds_kjob_t jb = jobs[j];
    u64 n;
    u32 S = split_segments(jb, per, &n);
    if (S == 0)
        return;
    is_mend((const u8 *)jb.mid, n, split_segs(segs, j), S, split_pool(pool, j, npages), (u32 *)next + j, npages,
            split_list(lists, j, 0, npages), &work);
}

// A chunk whose segments make up its stream: its bytes written to the
// job's out, segment after segment (a segment's markers name bytes of the
// ones before), and its nvCOMP entry made a dummy; the others are left to
// nvCOMP. Grid (jobs), THREADS threads. made: chunks made up (counted).
__global__ void codec_inflate_resolve(const gds_kjob_t *jobs, gds_kentries_t e, u64 segs, u64 pool, u64 lists,
                                      u32 npages, u64 per, const u32 *err, u64 dummy_in, u64 dummy_len, u64 scratch,
                                      u32 *made)
{
    __shared__ u64 at[IS_MAX_SEGMENTS];
    __shared__ int ok;
    u32 j = blockIdx.x;
    const gds_kjob_t jb = jobs[j];
    const is_segment_t *seg = split_segs(segs, j);
    u64 n;
    u32 S = split_segments(jb, per, &n);
    if (threadIdx.x == 0)
        ok = S > 0 && err[jb.chunk] == 0 && is_chain(seg, S, jb.out_size, at);
    __syncthreads();
    if (!ok)
        return;
    const ds_u16 *pl = split_pool(pool, j, npages);
    u8 *out = (u8 *)jb.out;
    for (u32 s = 0; s < S; s = is_next(seg, S, s)) {
        const u32 *list = split_list(lists, j, s, npages);
        u64 count = seg[s].count, base = at[s];
        int bad = 0;
        for (u64 i = threadIdx.x; i < count; i += blockDim.x)
            bad |= is_byte(out, base, i, is_symbol(pl, list, i)) < 0;
        if (__syncthreads_or(bad))
            return;
    }
    if (threadIdx.x == 0) {
        set_dummy(e, jb.entry0, dummy_in, dummy_len, scratch, j, 0);
        atomicAdd(made, 1u);
    }
}

// zstd frames block by block (zstd_blocks.h): job j's working memory at
// mem + j * stride, laid out for chunks of `expect` bytes (the batch's
// largest); its chunk's own size is the job's out_size.
__device__ __forceinline__ u8 *zb_base(u64 mem, u64 stride, u32 j) { return (u8 *)(mem + (u64)j * stride); }

// Step 1: a thread a job. Jobs that failed before are not planned.
__global__ void codec_zstd_plan(const gds_kjob_t *jobs, u32 n, const u32 *err, u64 mem, u64 stride, u64 expect)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    u8 *base = zb_base(mem, stride, j);
    zb_chunk_t *ch = (zb_chunk_t *)base;
    ch->ok = 0;
    ch->nblocks = 0;
    if (!jb.dead && err[jb.chunk] == 0 && jb.out_size <= expect)
        zb_plan((const u8 *)jb.in, jb.in_size, jb.out_size, (zb_block_t *)(base + zb_layout(expect).blocks), ch);
}

// Steps 2 and 4: grid (blocks, jobs), two warps each (the decode: the
// literals beside the sequences, then the offsets on the second warp) or
// one (the execution), taking the chunk's blocks blockIdx.x,
// blockIdx.x + gridDim.x, ...
__global__ void codec_zstd_decode(const gds_kjob_t *jobs, u64 mem, u64 stride, u64 expect)
{
    __shared__ zb_work_t w;
    u8 *base = zb_base(mem, stride, blockIdx.y);
    const zb_chunk_t *ch = (const zb_chunk_t *)base;
    if (!ch->ok)
        return;
    zb_layout_t l = zb_layout(expect);
    const u8 *in = (const u8 *)jobs[blockIdx.y].in;
    zb_block_t *blk = (zb_block_t *)(base + l.blocks);
    for (u32 k = blockIdx.x; k < ch->nblocks; k += gridDim.x) {
        zb_decode(in, &blk[k], base + l.lits, (zb_seq_t *)(base + l.seqs), &w, threadIdx.x, blockDim.x);
        if (threadIdx.x >= 32) // the offsets on the sequences' warp (the next block's decode waits for it)
            zb_offsets(&blk[k], (zb_seq_t *)(base + l.seqs), threadIdx.x - 32, 32);
    }
}

__global__ void codec_zstd_execute(const gds_kjob_t *jobs, u64 mem, u64 stride, u64 expect)
{
    u8 *base = zb_base(mem, stride, blockIdx.y);
    const zb_chunk_t *ch = (const zb_chunk_t *)base;
    if (!ch->ok)
        return;
    zb_layout_t l = zb_layout(expect);
    const gds_kjob_t jb = jobs[blockIdx.y];
    zb_block_t *blk = (zb_block_t *)(base + l.blocks);
    for (u32 k = blockIdx.x; k < ch->nblocks; k += gridDim.x)
        zb_execute((const u8 *)jb.in, &blk[k], base + l.lits, (const zb_seq_t *)(base + l.seqs), (u8 *)jb.out,
                   (u32 *)(base + l.refs), threadIdx.x, blockDim.x);
}

// Step 3: a thread a job.
__global__ void codec_zstd_link(const gds_kjob_t *jobs, u32 n, u64 mem, u64 stride, u64 expect)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    u8 *base = zb_base(mem, stride, j);
    zb_chunk_t *ch = (zb_chunk_t *)base;
    if (ch->ok)
        zb_link((zb_block_t *)(base + zb_layout(expect).blocks), ch, jobs[j].out_size);
}

// Step 5: a thread block a job, its blocks in order; a chunk made up has
// its nvCOMP entry made a dummy, the others are left to nvCOMP.
__global__ void codec_zstd_resolve(const gds_kjob_t *jobs, gds_kentries_t e, u64 mem, u64 stride, u64 expect,
                                   const u32 *err, u64 dummy_in, u64 dummy_len, u64 scratch, u32 *made)
{
    __shared__ int ok;
    u32 j = blockIdx.x;
    u8 *base = zb_base(mem, stride, j);
    const zb_chunk_t *ch = (const zb_chunk_t *)base;
    zb_layout_t l = zb_layout(expect);
    const zb_block_t *blk = (const zb_block_t *)(base + l.blocks);
    const gds_kjob_t jb = jobs[j];
    int bad = 0;
    if (ch->ok)
        for (u32 k = threadIdx.x; k < ch->nblocks; k += blockDim.x)
            bad |= blk[k].bad;
    if (threadIdx.x == 0)
        ok = ch->ok && err[jb.chunk] == 0;
    __syncthreads();
    if (__syncthreads_or(bad) || !ok)
        return;
    for (u32 k = 0; k < ch->nblocks; k++) {
        zb_resolve(&blk[k], (u8 *)jb.out, (const u32 *)(base + l.refs), threadIdx.x, blockDim.x);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        set_dummy(e, jb.entry0, dummy_in, dummy_len, scratch, j, 0);
        atomicAdd(made, 1u);
    }
}

// Bytes of piece k of a chunk of len bytes in pieces of bs (the last shorter).
__device__ __forceinline__ u64 piece_bytes(u64 len, u64 bs, u32 k)
{
    u64 off = (u64)k * bs;
    return len - off < bs ? len - off : bs;
}

// zlib stream from nvCOMP's raw Deflate: header, data, Adler-32 (acc from
// codec_adler_sum over the input). The data: the one stream of a chunk
// compressed whole, or its pieces joined (codec_deflate_join; p1 = the
// piece's bytes), a piece not joined as stored blocks. When that is longer
// than the chunk in stored blocks (or nvCOMP failed to compress: an error),
// the stored form is written. An optional filter whose output is not
// smaller than its input is skipped (mask bit set, the input copied).
// stored_only (level 0): no nvCOMP entries, the stored form.
__global__ void codec_zlib_assemble(const gds_kjob_t *jobs, gds_kentries_t e, u64 *dsize, u32 *mask, const u64 *acc,
                                    u32 *err, u64 *detail, u32 code, u32 flg, u32 bit, u32 optional, u32 stored_only)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    const u8 *in = (const u8 *)jb.in;
    u8 *out = (u8 *)jb.out;
    u64 len = jb.in_size, bs = jb.p1 ? jb.p1 : 1;
    u32 np = stored_only ? 0 : jb.nentries;
    const u64 *actual = (const u64 *)e.out_actual;
    u64 c = stored_only ? ~0ull / 2 : 0;
    for (u32 k = 0; k < np; k++) {
        u64 i = jb.entry0 + k, plen = piece_bytes(len, bs, k);
        int st = ((const int *)e.status)[i];
        if (st != 0) {
            if (blockIdx.x == 0 && threadIdx.x == 0)
                fail(err, detail, jb.chunk, code | GDS_KERR_ENCODE, (u64)(unsigned)st);
            return;
        }
        c += np == 1 || actual[i] ? actual[i] : ds_stored_bytes(plen);
    }
    u64 stored_total = 2 + ds_stored_bytes(len) + 4;
    bool comp = c + 6 <= stored_total;
    u64 total = comp ? c + 6 : stored_total;
    bool skip = optional && total >= len;
    u64 tid = gtid(), stride = gstride();
    if (skip) {
        copy_bytes(out, in, len, tid, stride);
        if (tid == 0)
            mask[jb.chunk] |= bit;
        return;
    }
    if (comp) {
        u64 at = 2;
        for (u32 k = 0; k < np; k++) {
            u64 i = jb.entry0 + k, plen = piece_bytes(len, bs, k);
            if (np == 1 || actual[i]) {
                copy_bytes(out + at, (const u8 *)((const u64 *)e.out_ptrs)[i], actual[i], tid, stride);
                at += actual[i];
            }
            else {
                store_blocks(out + at, in + k * bs, plen, k + 1 == np, tid, stride);
                at += ds_stored_bytes(plen);
            }
        }
    }
    else
        store_blocks(out + 2, in, len, true, tid, stride);
    if (tid == 0) {
        out[0] = 0x78;
        out[1] = (u8)flg;
        put_be32(out + total - 4, adler_value(&acc[2 * blockIdx.y], len));
        dsize[jb.chunk] = total;
    }
}

// A chunk's zstd pieces, each compressed by nvCOMP into a frame of its own,
// made the blocks of one frame (zstd_splice.h): one thread block per piece,
// its working memory in shared memory; thread 0 parses and re-codes, all
// threads share the byte copies. The blocks go to
// the piece's splice slot (out_base + entry * slot_bytes); the entry then
// points there, out_actual their size. Entries nvCOMP failed are left for
// codec_zstd_assemble to report.
__global__ void codec_zstd_splice(const gds_kjob_t *jobs, gds_kentries_t e, u64 n, u64 out_base, u64 slot_bytes)
{
    __shared__ zs_work_t w;
    for (u64 i = blockIdx.x; i < n; i += gridDim.x) {
        if (((const int *)e.status)[i] != 0)
            continue;
        u8 *out = (u8 *)(out_base + i * slot_bytes);
        u64 got = 0;
        if (threadIdx.x == 0) {
            const gds_kjob_t jb = jobs[((const gds_kentry_t *)e.aux)[i].chunk];
            const u8 *frame = (const u8 *)((const u64 *)e.out_ptrs)[i];
            const u8 *src = (const u8 *)((const u64 *)e.in_ptrs)[i];
            u64 flen = ((const u64 *)e.out_actual)[i], slen = ((const u64 *)e.in_bytes)[i];
            int what = 0;
            got = zs_splice_piece(&w, frame, flen, src, slen, i == jb.entry0, i + 1 == jb.entry0 + jb.nentries, out,
                                  slot_bytes, &what);
            if (got == 0) /* not even raw blocks fit: the host sizes slots so that they do */
                w.ncopies = 0;
        }
        __syncthreads();
        zs_run_copies(&w, threadIdx.x, blockDim.x);
        __syncthreads();
        if (threadIdx.x == 0) { /* status[i] only now: every thread has read it */
            ((u64 *)e.out_ptrs)[i] = (u64)out;
            ((u64 *)e.out_actual)[i] = got;
            if (got == 0)
                ((int *)e.status)[i] = -1;
        }
    }
}

// One zstd frame per chunk from its spliced pieces (codec_zstd_splice): the
// header (HDF5's zstd filter sizes its output from the content size), then
// the pieces' blocks. A frame longer than the data in raw blocks is
// replaced by the raw form. Skipped like deflate.
__global__ void codec_zstd_assemble(const gds_kjob_t *jobs, gds_kentries_t e, u64 *dsize, u32 *mask, u32 *err,
                                    u64 *detail, u32 code, u32 bit, u32 optional)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    const u8 *in = (const u8 *)jb.in;
    u8 *out = (u8 *)jb.out;
    u64 len = jb.in_size, spliced = ZS_FRAME_HEADER;
    for (u32 k = 0; k < jb.nentries; k++) {
        int st = ((const int *)e.status)[jb.entry0 + k];
        if (st != 0) {
            if (blockIdx.x == 0 && threadIdx.x == 0)
                fail(err, detail, jb.chunk, code | GDS_KERR_ENCODE, (u64)(unsigned)st);
            return;
        }
        spliced += ((const u64 *)e.out_actual)[jb.entry0 + k];
    }
    u64 nraw = len ? (len + GDS_ZSTD_RAW_BLOCK_MAX - 1) / GDS_ZSTD_RAW_BLOCK_MAX : 1;
    u64 raw_total = ZS_FRAME_HEADER + 3 * nraw + len;
    bool comp = spliced <= raw_total;
    u64 total = comp ? spliced : raw_total;
    bool skip = optional && total >= len;
    u64 tid = gtid(), stride = gstride();
    if (skip) {
        copy_bytes(out, in, len, tid, stride);
        if (tid == 0)
            mask[jb.chunk] |= bit;
        return;
    }
    if (tid == 0)
        zs_frame_header(out, len);
    if (comp) {
        u64 at = ZS_FRAME_HEADER;
        for (u32 k = 0; k < jb.nentries; k++) {
            u64 i = jb.entry0 + k, n = ((const u64 *)e.out_actual)[i];
            copy_bytes(out + at, (const u8 *)((const u64 *)e.out_ptrs)[i], n, tid, stride);
            at += n;
        }
    }
    else {
        const u64 span = 3 + GDS_ZSTD_RAW_BLOCK_MAX;
        for (u64 o = ZS_FRAME_HEADER + tid; o < total; o += stride) {
            u64 b = (o - ZS_FRAME_HEADER) / span, w = (o - ZS_FRAME_HEADER) % span;
            u64 bl = len - b * GDS_ZSTD_RAW_BLOCK_MAX;
            bl = bl < GDS_ZSTD_RAW_BLOCK_MAX ? bl : GDS_ZSTD_RAW_BLOCK_MAX;
            u32 hdr = (u32)(bl << 3) | (b == nraw - 1 ? 1u : 0u); // raw block, last flag
            out[o] = w < 3 ? (u8)(hdr >> (8 * w)) : in[b * GDS_ZSTD_RAW_BLOCK_MAX + w - 3];
        }
    }
    if (tid == 0)
        dsize[jb.chunk] = total;
}

// HDF5's LZ4 framing around nvCOMP's compressed blocks: header, then per
// block its size and bytes (raw when compression did not shrink it, as the
// filter does). Writes the size fields and turns each entry into the copy
// of its bytes (codec_entry_copy does the copies). Skipped like deflate.
__global__ void codec_lz4h5_layout(const gds_kjob_t *jobs, u32 n, gds_kentries_t e, u64 *dsize, u32 *mask, u32 *err,
                                   u64 *detail, u32 code, u32 bit, u32 optional)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    u8 *out = (u8 *)jb.out;
    u64 len = jb.in_size, bs = jb.p1;
    u64 pos = 12;
    bool failed = false;
    for (u32 k = 0; k < jb.nentries; k++) {
        u64 i = jb.entry0 + k;
        u64 off = (u64)k * bs;
        u64 bsz = len - off < bs ? len - off : bs;
        int st = ((const int *)e.status)[i];
        u64 cs = ((const u64 *)e.out_actual)[i];
        gds_kentry_t *x = &((gds_kentry_t *)e.aux)[i];
        if (st != 0) {
            fail(err, detail, jb.chunk, code | GDS_KERR_ENCODE, (u64)(unsigned)st);
            failed = true;
        }
        bool raw = cs >= bsz;
        u64 n_k = raw ? bsz : cs;
        put_be32(out + pos, (u32)n_k);
        x->copy_src = raw ? jb.in + off : ((const u64 *)e.out_ptrs)[i];
        x->copy_dst = jb.out + pos + 4;
        x->copy_len = n_k;
        x->flags = GDS_KENTRY_COPY;
        pos += 4 + n_k;
    }
    if (failed) {
        for (u32 k = 0; k < jb.nentries; k++)
            ((gds_kentry_t *)e.aux)[jb.entry0 + k].flags = 0;
        return;
    }
    put_be64(out, len);
    put_be32(out + 8, (u32)bs);
    if (optional && pos >= len) {
        for (u32 k = 0; k < jb.nentries; k++) {
            gds_kentry_t *x = &((gds_kentry_t *)e.aux)[jb.entry0 + k];
            u64 off = (u64)k * bs;
            x->copy_src = jb.in + off;
            x->copy_dst = jb.out + off;
            x->copy_len = len - off < bs ? len - off : bs;
        }
        mask[jb.chunk] |= bit;
        pos = len;
    }
    dsize[jb.chunk] = pos;
}

// bitshuffle's framing around nvCOMP's compressed bit-shuffled blocks:
// header (size, block size in bytes), per block its BE size and bytes, then
// the leftover elements raw (copied here). Skipped like deflate.
__global__ void codec_bshuf_layout(const gds_kjob_t *jobs, u32 n, gds_kentries_t e, u64 *dsize, u32 *mask, u32 *err,
                                   u64 *detail, u32 code, u32 bit, u32 optional, u64 cap)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    const u8 *in = (const u8 *)jb.in;
    u8 *out = (u8 *)jb.out;
    u64 len = jb.in_size, elem = jb.p0, bs = jb.p1;
    u64 size = len / elem;
    u64 body = size / 8 * 8 * elem, leftover = len - body;
    u64 pos = 12;
    bool failed = false;
    for (u32 k = 0; k < jb.nentries; k++) {
        u64 i = jb.entry0 + k;
        int st = ((const int *)e.status)[i];
        u64 cs = ((const u64 *)e.out_actual)[i];
        gds_kentry_t *x = &((gds_kentry_t *)e.aux)[i];
        if (st != 0 || pos + 4 + cs + leftover > cap) {
            fail(err, detail, jb.chunk, code | GDS_KERR_ENCODE, (u64)(unsigned)st);
            failed = true;
            break;
        }
        put_be32(out + pos, (u32)cs);
        x->copy_src = ((const u64 *)e.out_ptrs)[i];
        x->copy_dst = jb.out + pos + 4;
        x->copy_len = cs;
        x->flags = GDS_KENTRY_COPY;
        pos += 4 + cs;
    }
    if (failed) {
        for (u32 k = 0; k < jb.nentries; k++)
            ((gds_kentry_t *)e.aux)[jb.entry0 + k].flags = 0;
        return;
    }
    if (optional && pos + leftover >= len) {
        for (u32 k = 0; k < jb.nentries; k++) {
            gds_kentry_t *x = &((gds_kentry_t *)e.aux)[jb.entry0 + k];
            u64 off = (u64)k * bs * elem;
            x->copy_src = jb.in + off;
            x->copy_dst = jb.out + off;
            x->copy_len = body - off < bs * elem ? body - off : bs * elem;
        }
        for (u64 b = 0; b < leftover; b++)
            out[body + b] = in[body + b];
        mask[jb.chunk] |= bit;
        dsize[jb.chunk] = len;
        return;
    }
    put_be64(out, len);
    put_be32(out + 8, (u32)(bs * elem));
    for (u64 b = 0; b < leftover; b++)
        out[pos + b] = in[body + b];
    dsize[jb.chunk] = pos + leftover;
}

// Blosc-1 encoding (32001), shuffle first: each block of the input (in)
// shuffled into mid as its header's flags say (gds_blosc_shuffle_at; p0 =
// typesize | flags << 8, p1 = block size, in_size bytes, the last block
// partial). One thread per unit of work.
__global__ void codec_blosc_shuffle(const gds_kjob_t *jobs)
{
    const gds_kjob_t jb = jobs[blockIdx.y];
    u32 typesize = jb.p0 & 0xff, flags = (jb.p0 >> 8) & 0xff;
    u64 units = gds_blosc_shuffle_total(flags, typesize, jb.in_size, jb.p1);
    for (u64 u = gtid(); u < units; u += gstride())
        gds_blosc_shuffle_at((const u8 *)jb.in, (u8 *)jb.mid, flags, typesize, jb.in_size, jb.p1, u);
}

// Blosc-1's frame around nvCOMP's LZ4 streams (gds_blosc_frame: header,
// block starts, per stream its LE size and bytes, raw where LZ4 did not
// shrink it; or the MEMCPYED form; or the input as it is, the optional
// filter skipped); compressed 0: no stream was compressed (clevel 0, tiny
// chunks: MEMCPYED). Writes the header and size fields and turns each entry
// into the copy of its bytes (codec_entry_copy does the copies). One thread
// per chunk.
__global__ void codec_blosc_layout(const gds_kjob_t *jobs, u32 n, gds_kentries_t e, u64 *dsize, u32 *mask, u32 *err,
                                   u64 *detail, u32 code, u32 bit, u32 optional, u32 compressed)
{
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    const gds_kjob_t jb = jobs[j];
    gds_kentry_t *copy = &((gds_kentry_t *)e.aux)[jb.entry0];
    for (u32 k = 0; compressed && k < jb.nentries; k++) {
        int st = ((const int *)e.status)[jb.entry0 + k];
        if (st != 0) {
            fail(err, detail, jb.chunk, code | GDS_KERR_ENCODE, (u64)(unsigned)st);
            for (u32 x = 0; x < jb.nentries; x++)
                copy[x].flags = 0;
            return;
        }
    }
    const u64 *csize = compressed ? (const u64 *)e.out_actual + jb.entry0 : 0;
    const u64 *cptr = compressed ? (const u64 *)e.out_ptrs + jb.entry0 : 0;
    u32 how;
    u64 total = gds_blosc_frame((u8 *)jb.out, jb.in, jb.mid ? jb.mid : jb.in, jb.in_size, jb.p1,
                                (jb.p0 >> 8) & 0xff, jb.p0 & 0xff, csize, cptr, jb.nentries, optional, copy, &how);
    if (how == GDS_BLOSC_STORE_SKIPPED)
        mask[jb.chunk] |= bit;
    dsize[jb.chunk] = total;
}

} // extern "C"
