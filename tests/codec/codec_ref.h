/*
 * CPU references of HDF5's and hdf5plugin's filters for the codec tests,
 * written from their sources (HDF5 H5Zshuffle.c, H5Zfletcher32.c +
 * H5checksum.c, H5Zdeflate.c; hdf5plugin's H5Zlz4.c, zstd_h5plugin.c,
 * bitshuffle's bshuf_h5filter.c / bitshuffle.c / bitshuffle_core.c; c-blosc
 * 1.x's blosc.c and shuffle.c behind hdf5plugin's blosc_filter.c), with
 * zlib, zstd and LZ4 dlopen'ed (a filter whose library is missing is
 * skipped). tests/codec/h5_fixtures.py checks them against h5py +
 * hdf5plugin themselves.
 */
#ifndef H5GDS_CODEC_REF_H
#define H5GDS_CODEC_REF_H

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_codec.h"

typedef struct ref_libs {
    /* zlib */
    int (*compress2)(unsigned char *, unsigned long *, const unsigned char *, unsigned long, int);
    int (*uncompress)(unsigned char *, unsigned long *, const unsigned char *, unsigned long);
    unsigned long (*compressBound)(unsigned long);
    /* zstd */
    size_t (*ZSTD_compress)(void *, size_t, const void *, size_t, int);
    size_t (*ZSTD_decompress)(void *, size_t, const void *, size_t);
    unsigned long long (*ZSTD_getFrameContentSize)(const void *, size_t);
    unsigned (*ZSTD_isError)(size_t);
    size_t (*ZSTD_compressBound)(size_t);
    /* lz4 */
    int (*LZ4_compress_default)(const char *, char *, int, int);
    int (*LZ4_decompress_safe)(const char *, char *, int, int);
    int (*LZ4_compressBound)(int);
    bool z, zstd, lz4;
} ref_libs_t;

static ref_libs_t ref;

#define REF_SYM(lib, name) (ok = ok && ((*(void **)&ref.name = dlsym(lib, #name)) != NULL))
static inline void ref_load(void)
{
    void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    void *zs = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    void *l = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
    bool ok = z != NULL;
    REF_SYM(z, compress2);
    REF_SYM(z, uncompress);
    REF_SYM(z, compressBound);
    ref.z = ok;
    ok = zs != NULL;
    REF_SYM(zs, ZSTD_compress);
    REF_SYM(zs, ZSTD_decompress);
    REF_SYM(zs, ZSTD_getFrameContentSize);
    REF_SYM(zs, ZSTD_isError);
    REF_SYM(zs, ZSTD_compressBound);
    ref.zstd = ok;
    ok = l != NULL;
    REF_SYM(l, LZ4_compress_default);
    REF_SYM(l, LZ4_decompress_safe);
    REF_SYM(l, LZ4_compressBound);
    ref.lz4 = ok;
}
#undef REF_SYM

/* A growable byte buffer. */
typedef struct bytes {
    unsigned char *p;
    size_t n;
} bytes_t;

static inline bytes_t bytes_new(size_t n)
{
    bytes_t b = {malloc(n ? n : 1), n};
    if (!b.p) {
        fprintf(stderr, "out of memory\n");
        exit(100);
    }
    return b;
}

static inline void put_be(unsigned char *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}
static inline uint64_t get_be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* ---- HDF5's filters ---- */

static inline void ref_shuffle(const unsigned char *in, unsigned char *out, size_t len, size_t T, bool reverse)
{
    size_t N = len / T;
    if (T <= 1 || N <= 1) {
        memcpy(out, in, len);
        return;
    }
    for (size_t i = 0; i < N; i++)
        for (size_t t = 0; t < T; t++) {
            if (reverse)
                out[i * T + t] = in[t * N + i];
            else
                out[t * N + i] = in[i * T + t];
        }
    memcpy(out + N * T, in + N * T, len - N * T);
}

/* H5_checksum_fletcher32, as HDF5 1.14 writes it. */
static inline uint32_t ref_fletcher32(const unsigned char *data, size_t len_bytes)
{
    size_t len = len_bytes / 2;
    uint32_t sum1 = 0, sum2 = 0;
    while (len) {
        size_t tlen = len > 360 ? 360 : len;
        len -= tlen;
        do {
            sum1 += (uint32_t)(((uint16_t)data[0]) << 8) | ((uint16_t)data[1]);
            data += 2;
            sum2 += sum1;
        } while (--tlen);
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    if (len_bytes % 2) {
        sum1 += (uint32_t)(((uint16_t)*data) << 8);
        sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    return (sum2 << 16) | sum1;
}

/* ---- bitshuffle ---- */

static inline size_t ref_bshuf_default_block(size_t elem)
{
    size_t b = 8192 / elem / 8 * 8;
    return b > 128 ? b : 128;
}

/* Bit k of byte j of element i <-> bit i % 8 of byte i / 8 of row 8 j + k
 * (rows of size / 8 bytes): the definition, bit by bit. */
static inline void ref_bitshuffle_block(const unsigned char *in, unsigned char *out, size_t size, size_t elem, bool reverse)
{
    size_t row = size / 8;
    memset(out, 0, size * elem);
    for (size_t i = 0; i < size; i++)
        for (size_t j = 0; j < elem; j++)
            for (size_t k = 0; k < 8; k++) {
                size_t r = (j * 8 + k) * row + i / 8;
                if (reverse) {
                    if (in[r] >> (i % 8) & 1)
                        out[i * elem + j] |= (unsigned char)(1u << k);
                }
                else if (in[i * elem + j] >> k & 1)
                    out[r] |= (unsigned char)(1u << (i % 8));
            }
}

/* The blocked transform (bshuf_bitshuffle / bshuf_bitunshuffle). */
static inline void ref_bitshuffle(const unsigned char *in, unsigned char *out, size_t len, size_t elem, size_t block,
                           bool reverse)
{
    size_t size = len / elem, b0 = 0;
    if (!block)
        block = ref_bshuf_default_block(elem);
    for (; b0 + block <= size; b0 += block)
        ref_bitshuffle_block(in + b0 * elem, out + b0 * elem, block, elem, reverse);
    size_t last = (size - b0) / 8 * 8;
    if (last)
        ref_bitshuffle_block(in + b0 * elem, out + b0 * elem, last, elem, reverse);
    b0 += last;
    memcpy(out + b0 * elem, in + b0 * elem, len - b0 * elem);
}

/* ---- compressors with their HDF5 framing; NULL when the library is missing ---- */

static inline bool ref_deflate(const bytes_t *in, bytes_t *out, int level)
{
    if (!ref.z)
        return false;
    unsigned long cap = ref.compressBound(in->n);
    *out = bytes_new(cap);
    if (ref.compress2(out->p, &cap, in->p, in->n, level) != 0)
        return false;
    out->n = cap;
    return true;
}

static inline bool ref_inflate(const bytes_t *in, bytes_t *out, size_t expect)
{
    if (!ref.z)
        return false;
    unsigned long n = expect;
    *out = bytes_new(expect);
    int rc = ref.uncompress(out->p, &n, in->p, in->n);
    out->n = n;
    return rc == 0 && n == expect;
}

/* zlib's raw Deflate stream of src (its zlib stream without the 2-byte
 * header and the Adler-32 after it), in a buffer with `room` bytes to
 * spare after it; .p NULL without zlib. */
static inline bytes_t ref_raw_deflate(const unsigned char *src, size_t len, int level, size_t room)
{
    bytes_t in = {(unsigned char *)src, len}, z, raw = {NULL, 0};
    if (!ref_deflate(&in, &z, level) || z.n < 6)
        return raw;
    raw = bytes_new(z.n - 6 + room);
    memcpy(raw.p, z.p + 2, z.n - 6);
    raw.n = z.n - 6;
    free(z.p);
    return raw;
}

static inline uint32_t ref_adler32(const unsigned char *p, size_t n)
{
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521u;
        b = (b + a) % 65521u;
    }
    return b << 16 | a;
}

static inline bool ref_zstd(const bytes_t *in, bytes_t *out, int level)
{
    if (!ref.zstd)
        return false;
    size_t cap = ref.ZSTD_compressBound(in->n);
    *out = bytes_new(cap);
    size_t r = ref.ZSTD_compress(out->p, cap, in->p, in->n, level);
    if (ref.ZSTD_isError(r))
        return false;
    out->n = r;
    return true;
}

/* As zstd_h5plugin.c: the frame's content size sizes the output. */
static inline bool ref_unzstd(const bytes_t *in, bytes_t *out)
{
    if (!ref.zstd)
        return false;
    unsigned long long size = ref.ZSTD_getFrameContentSize(in->p, in->n);
    if (size >= (1ull << 40))
        return false; /* unknown or error */
    *out = bytes_new((size_t)size);
    size_t r = ref.ZSTD_decompress(out->p, (size_t)size, in->p, in->n);
    if (ref.ZSTD_isError(r))
        return false;
    out->n = r;
    return true;
}

/* H5Zlz4.c's framing. */
static inline bool ref_lz4h5(const bytes_t *in, bytes_t *out, size_t block)
{
    if (!ref.lz4)
        return false;
    size_t bs = block ? block : (size_t)1 << 30;
    if (bs > in->n)
        bs = in->n;
    size_t nb = (in->n - 1) / bs + 1;
    *out = bytes_new((size_t)ref.LZ4_compressBound((int)in->n) + 12 + nb * 4 + nb * 64);
    put_be(out->p, in->n, 8);
    put_be(out->p + 8, bs, 4);
    size_t pos = 12;
    for (size_t b = 0; b < nb; b++) {
        size_t bsz = in->n - b * bs < bs ? in->n - b * bs : bs;
        int cs = ref.LZ4_compress_default((const char *)in->p + b * bs, (char *)out->p + pos + 4, (int)bsz,
                                          ref.LZ4_compressBound((int)bsz));
        if (cs <= 0)
            return false;
        if ((size_t)cs >= bsz) {
            cs = (int)bsz;
            memcpy(out->p + pos + 4, in->p + b * bs, bsz);
        }
        put_be(out->p + pos, (uint64_t)cs, 4);
        pos += 4 + (size_t)cs;
    }
    out->n = pos;
    return true;
}

static inline bool ref_unlz4h5(const bytes_t *in, bytes_t *out)
{
    if (!ref.lz4 || in->n < 12)
        return false;
    uint64_t orig = get_be(in->p, 8), bs = get_be(in->p + 8, 4);
    if (bs > orig)
        bs = orig;
    if (!bs || orig > ((uint64_t)1 << 34))
        return false;
    *out = bytes_new(orig);
    size_t pos = 12;
    for (uint64_t off = 0; off < orig; off += bs) {
        size_t bsz = orig - off < bs ? orig - off : bs;
        if (pos + 4 > in->n)
            return false;
        size_t cs = get_be(in->p + pos, 4);
        pos += 4;
        if (cs > in->n - pos)
            return false;
        if (cs == bsz)
            memcpy(out->p + off, in->p + pos, bsz);
        else if (ref.LZ4_decompress_safe((const char *)in->p + pos, (char *)out->p + off, (int)cs, (int)bsz) !=
                 (int)bsz)
            return false;
        pos += cs;
    }
    out->n = orig;
    return true;
}

/* bshuf_h5filter.c with LZ4 (comp 2) or zstd (comp 3). */
static inline bool ref_bshuf(const bytes_t *in, bytes_t *out, size_t elem, size_t block, int comp, int level)
{
    if ((comp == 2 && !ref.lz4) || (comp == 3 && !ref.zstd))
        return false;
    if (!block)
        block = ref_bshuf_default_block(elem);
    size_t size = in->n / elem;
    *out = bytes_new(in->n * 2 + 4096);
    put_be(out->p, in->n, 8);
    put_be(out->p + 8, block * elem, 4);
    size_t pos = 12, b0 = 0;
    unsigned char *tmp = malloc(block * elem);
    while (b0 < size / 8 * 8) {
        size_t n = size - b0 >= block ? block : (size - b0) / 8 * 8;
        ref_bitshuffle_block(in->p + b0 * elem, tmp, n, elem, false);
        long cs;
        if (comp == 2)
            cs = ref.LZ4_compress_default((const char *)tmp, (char *)out->p + pos + 4, (int)(n * elem),
                                          ref.LZ4_compressBound((int)(n * elem)));
        else {
            size_t r = ref.ZSTD_compress(out->p + pos + 4, ref.ZSTD_compressBound(n * elem), tmp, n * elem, level);
            cs = ref.ZSTD_isError(r) ? -1 : (long)r;
        }
        if (cs <= 0) {
            free(tmp);
            return false;
        }
        put_be(out->p + pos, (uint64_t)cs, 4);
        pos += 4 + (size_t)cs;
        b0 += n;
    }
    free(tmp);
    memcpy(out->p + pos, in->p + b0 * elem, in->n - b0 * elem);
    out->n = pos + in->n - b0 * elem;
    return true;
}

static inline bool ref_unbshuf(const bytes_t *in, bytes_t *out, size_t elem, int comp)
{
    if ((comp == 2 && !ref.lz4) || (comp == 3 && !ref.zstd) || in->n < 12)
        return false;
    uint64_t nbytes = get_be(in->p, 8);
    size_t block = get_be(in->p + 8, 4) / elem;
    if (!block)
        block = ref_bshuf_default_block(elem);
    if (nbytes % elem || block % 8 || nbytes > ((uint64_t)1 << 34))
        return false;
    size_t size = nbytes / elem, pos = 12, b0 = 0;
    *out = bytes_new(nbytes);
    unsigned char *tmp = malloc(block * elem);
    while (b0 < size / 8 * 8) {
        size_t n = size - b0 >= block ? block : (size - b0) / 8 * 8;
        if (pos + 4 > in->n)
            break;
        size_t cs = get_be(in->p + pos, 4);
        pos += 4;
        if (cs > in->n - pos)
            break;
        long got;
        if (comp == 2)
            got = ref.LZ4_decompress_safe((const char *)in->p + pos, (char *)tmp, (int)cs, (int)(n * elem));
        else {
            size_t r = ref.ZSTD_decompress(tmp, n * elem, in->p + pos, cs);
            got = ref.ZSTD_isError(r) ? -1 : (long)r;
        }
        if (got != (long)(n * elem))
            break;
        ref_bitshuffle_block(tmp, out->p + b0 * elem, n, elem, true);
        pos += cs;
        b0 += n;
    }
    free(tmp);
    if (b0 != size / 8 * 8 || pos + (nbytes - b0 * elem) > in->n)
        return false;
    memcpy(out->p + b0 * elem, in->p + pos, nbytes - b0 * elem);
    out->n = nbytes;
    return true;
}

/* ---- Blosc-1 (c-blosc 1.x), LZ4 / LZ4HC / zstd streams ---- */

static inline uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* One block's unshuffle (reverse) or shuffle, as c-blosc's shuffle.c does
 * it: byte shuffle of bsize / typesize elements (typesize > 1), or bit
 * shuffle when that count is a multiple of 8 (else nothing); trailing bytes
 * as they are. */
static inline void ref_blosc_block_shuffle(const unsigned char *in, unsigned char *out, size_t bsize, unsigned flags,
                                           size_t ts, bool reverse)
{
    if ((flags & 1) && ts > 1) {
        ref_shuffle(in, out, bsize, ts, reverse);
        return;
    }
    size_t n = bsize / ts;
    if ((flags & 4) && bsize >= ts && n % 8 == 0) {
        ref_bitshuffle_block(in, out, n, ts, reverse);
        memcpy(out + n * ts, in + n * ts, bsize - n * ts);
        return;
    }
    memcpy(out, in, bsize);
}

/* blosc_decompress as hdf5plugin calls it (blosc_run_decompression_with_context
 * and blosc_d), bounded by the stored size as well; false on any error. */
static inline bool ref_unblosc(const bytes_t *in, bytes_t *out)
{
    if (in->n < 16 || in->p[0] != 2)
        return false;
    unsigned flags = in->p[2];
    int32_t ts = in->p[3], nbytes = (int32_t)get_le32(in->p + 4), bs = (int32_t)get_le32(in->p + 8);
    int32_t cbytes = (int32_t)get_le32(in->p + 12);
    if (nbytes <= 0 || bs <= 0 || bs > nbytes || ts == 0 || (flags & 8) || cbytes < 16 || (size_t)cbytes > in->n)
        return false;
    int32_t nblocks = nbytes / bs + (nbytes % bs ? 1 : 0);
    *out = bytes_new((size_t)nbytes);
    if (flags & 2) {
        if (cbytes != nbytes + 16)
            return false;
        memcpy(out->p, in->p + 16, (size_t)nbytes);
        return true;
    }
    unsigned format = flags >> 5;
    if (in->p[1] != 1 || (format == 1 && !ref.lz4) || (format == 4 && !ref.zstd) || (format != 1 && format != 4) ||
        nblocks > (cbytes - 16) / 4)
        return false;
    unsigned char *tmp = malloc((size_t)bs);
    bool ok = true;
    for (int32_t k = 0; ok && k < nblocks; k++) {
        bool partial = k == nblocks - 1 && nbytes % bs;
        int32_t bsize = partial ? nbytes % bs : bs;
        int32_t ns = !(flags & 0x10) && ts <= 16 && bs / ts >= 128 && !partial ? ts : 1, neblock = bsize / ns;
        int64_t off = (int32_t)get_le32(in->p + 16 + 4 * k);
        for (int32_t j = 0; ok && j < ns; j++) {
            if (off < 0 || off > cbytes - 4) {
                ok = false;
                break;
            }
            int32_t cs = (int32_t)get_le32(in->p + off);
            off += 4;
            if (cs < 0 || cs > cbytes - off) {
                ok = false;
                break;
            }
            unsigned char *dst = tmp + (size_t)j * neblock;
            if (cs == neblock)
                memcpy(dst, in->p + off, (size_t)cs);
            else if (format == 1)
                ok = ref.LZ4_decompress_safe((const char *)in->p + off, (char *)dst, cs, neblock) == neblock;
            else {
                size_t r = ref.ZSTD_decompress(dst, (size_t)neblock, in->p + off, (size_t)cs);
                ok = !ref.ZSTD_isError(r) && r == (size_t)neblock;
            }
            off += cs;
        }
        ok = ok && neblock * ns == bsize;
        if (ok)
            ref_blosc_block_shuffle(tmp, out->p + (size_t)k * bs, (size_t)bsize, flags, (size_t)ts, true);
    }
    free(tmp);
    return ok;
}

/* c-blosc's compute_blocksize for a compressor code (hdf5plugin's: 1 lz4,
 * 2 lz4hc, 5 zstd) in its default split mode (FORWARD_COMPAT). */
static inline bool ref_blosc_splits(unsigned code, size_t ts, size_t bs)
{
    return code != 5 && ts <= 16 && bs / ts >= 128;
}
static inline size_t ref_blosc_blocksize(unsigned code, int clevel, size_t ts, size_t nbytes)
{
    if (nbytes < ts)
        return 1;
    size_t bs = nbytes;
    bool hcr = code == 2 || code == 4 || code == 5;
    if (nbytes >= 32768) {
        bs = 32768 * (hcr ? 2 : 1);
        static const unsigned mul8[10] = {2, 4, 8, 16, 32, 32, 64, 64, 64, 64}; /* eighths: /4, /2, x1, x2, x4... */
        bs = bs * mul8[clevel] / 8;
        if (clevel == 9 && hcr)
            bs *= 2;
    }
    if (clevel > 0 && ref_blosc_splits(code, ts, bs)) {
        bs = bs > (1u << 18) ? (1u << 18) : bs;
        bs *= ts;
        bs = bs < (1u << 16) ? (1u << 16) : bs > (1u << 20) ? (1u << 20) : bs;
    }
    if (bs > nbytes)
        bs = nbytes;
    if (bs > ts)
        bs = bs / ts * ts;
    return bs;
}

/* blosc_compress as python-blosc calls it (room for a MEMCPYED chunk when
 * compression does not pay): shuffle 0 none, 1 byte, 2 bit; code 1 lz4,
 * 2 lz4hc (written with LZ4's fast compressor: the same stream format),
 * 5 zstd; false for another code or a missing library. */
static inline bool ref_blosc(const bytes_t *in, bytes_t *out, size_t ts, int clevel, int shuffle, unsigned code)
{
    if (((code == 1 || code == 2) && !ref.lz4) || (code == 5 && !ref.zstd) || (code != 1 && code != 2 && code != 5))
        return false;
    ts = ts > 255 ? 1 : ts;
    clevel = clevel < 0 ? 0 : clevel > 9 ? 9 : clevel;
    size_t nbytes = in->n, bs = ref_blosc_blocksize(code, clevel, ts, nbytes);
    size_t nblocks = nbytes / bs + (nbytes % bs ? 1 : 0);
    unsigned flags = (shuffle == 1 ? 1u : 0u) | (shuffle == 2 ? 4u : 0u) | (ref_blosc_splits(code, ts, bs) ? 0u : 0x10u) |
                     ((code == 5 ? 4u : 1u) << 5);
    size_t cap = nbytes + 16;
    *out = bytes_new(cap + 64);
    unsigned char *h = out->p;
    h[0] = 2;
    h[1] = 1;
    h[3] = (unsigned char)ts;
    put_le32(h + 4, (uint32_t)nbytes);
    put_le32(h + 8, (uint32_t)bs);
    size_t pos = 16 + 4 * nblocks;
    bool fits = clevel > 0 && nbytes >= 128 && pos <= cap;
    unsigned char *tmp = malloc(bs), *cbuf = malloc(2 * bs + 1024);
    for (size_t k = 0; fits && k < nblocks; k++) {
        bool partial = k == nblocks - 1 && nbytes % bs;
        size_t bsize = partial ? nbytes % bs : bs;
        size_t ns = !(flags & 0x10) && !partial ? ts : 1, neblock = bsize / ns;
        ref_blosc_block_shuffle(in->p + k * bs, tmp, bsize, flags, ts, false);
        put_le32(h + 16 + 4 * k, (uint32_t)pos);
        for (size_t j = 0; fits && j < ns; j++) {
            const unsigned char *src = tmp + j * neblock;
            long cs;
            if (code == 5) {
                size_t r = ref.ZSTD_compress(cbuf, 2 * bs + 1024, src, neblock, clevel);
                cs = ref.ZSTD_isError(r) ? 0 : (long)r;
            }
            else
                cs = ref.LZ4_compress_default((const char *)src, (char *)cbuf, (int)neblock, (int)(2 * bs + 1024));
            bool raw = cs <= 0 || (size_t)cs >= neblock;
            size_t n = raw ? neblock : (size_t)cs;
            if (pos + 4 + n > cap) {
                fits = false;
                break;
            }
            put_le32(h + pos, (uint32_t)n);
            memcpy(h + pos + 4, raw ? src : cbuf, n);
            pos += 4 + n;
        }
    }
    free(tmp);
    free(cbuf);
    if (!fits) {
        flags |= 2;
        memcpy(h + 16, in->p, nbytes);
        pos = nbytes + 16;
    }
    h[2] = (unsigned char)flags;
    put_le32(h + 12, (uint32_t)pos);
    out->n = pos;
    return true;
}

/* ---- whole pipelines ---- */

/* Applies the pipeline's filters (not those in `mask`) as HDF5 writes;
 * false when a library is missing (or the filter cannot run). */
static inline bool ref_encode(const gds_codec_pipeline_t *p, unsigned mask, const bytes_t *in, bytes_t *out)
{
    bytes_t cur = bytes_new(in->n);
    memcpy(cur.p, in->p, in->n);
    for (size_t i = 0; i < p->nfilters; i++) {
        if (mask & (1u << i))
            continue;
        const gds_codec_filter_t *f = &p->filter[i];
        bytes_t next = {NULL, 0};
        bool ok = true;
        switch (f->id) {
        case GDS_FILTER_SHUFFLE:
            next = bytes_new(cur.n);
            ref_shuffle(cur.p, next.p, cur.n, f->cd[0], false);
            break;
        case GDS_FILTER_FLETCHER32: {
            next = bytes_new(cur.n + 4);
            memcpy(next.p, cur.p, cur.n);
            uint32_t fl = ref_fletcher32(cur.p, cur.n);
            for (int b = 0; b < 4; b++)
                next.p[cur.n + b] = (unsigned char)(fl >> (8 * b));
            break;
        }
        case GDS_FILTER_DEFLATE: ok = ref_deflate(&cur, &next, (int)f->cd[0]); break;
        case GDS_FILTER_ZSTD: ok = ref_zstd(&cur, &next, f->ncd ? (int)f->cd[0] : 3); break;
        case GDS_FILTER_LZ4: ok = ref_lz4h5(&cur, &next, f->ncd ? f->cd[0] : 0); break;
        case GDS_FILTER_BLOSC:
            ok = ref_blosc(&cur, &next, f->ncd > 2 && f->cd[2] ? f->cd[2] : 1, f->ncd > 4 ? (int)f->cd[4] : 5,
                           f->ncd > 5 ? (int)f->cd[5] : 1, f->ncd > 6 ? f->cd[6] : 0);
            break;
        case GDS_FILTER_BITSHUFFLE: {
            unsigned comp = f->ncd > 4 ? f->cd[4] : 0;
            if (comp == 2 || comp == 3)
                ok = ref_bshuf(&cur, &next, f->cd[2], f->ncd > 3 ? f->cd[3] : 0, (int)comp,
                               f->ncd > 5 ? (int)f->cd[5] : 0);
            else {
                next = bytes_new(cur.n);
                ref_bitshuffle(cur.p, next.p, cur.n, f->cd[2], f->ncd > 3 ? f->cd[3] : 0, false);
            }
            break;
        }
        default: ok = false;
        }
        free(cur.p);
        if (!ok) {
            free(next.p);
            return false;
        }
        cur = next;
    }
    *out = cur;
    return true;
}

/* Reverses them (checksums verified); false on any error. */
static inline bool ref_decode(const gds_codec_pipeline_t *p, unsigned mask, const bytes_t *in, bytes_t *out)
{
    bytes_t cur = bytes_new(in->n);
    memcpy(cur.p, in->p, in->n);
    for (size_t i = p->nfilters; i-- > 0;) {
        if (mask & (1u << i))
            continue;
        const gds_codec_filter_t *f = &p->filter[i];
        bytes_t next = {NULL, 0};
        bool ok = true;
        switch (f->id) {
        case GDS_FILTER_SHUFFLE:
            next = bytes_new(cur.n);
            ref_shuffle(cur.p, next.p, cur.n, f->cd[0], true);
            break;
        case GDS_FILTER_FLETCHER32: {
            ok = cur.n >= 4;
            if (ok) {
                uint32_t fl = ref_fletcher32(cur.p, cur.n - 4), stored = 0;
                for (int b = 0; b < 4; b++)
                    stored |= (uint32_t)cur.p[cur.n - 4 + b] << (8 * b);
                uint32_t rev = ((fl & 0x00ff00ffu) << 8) | ((fl >> 8) & 0x00ff00ffu);
                ok = stored == fl || stored == rev;
                next = bytes_new(cur.n - 4);
                memcpy(next.p, cur.p, cur.n - 4);
            }
            break;
        }
        case GDS_FILTER_DEFLATE: {
            /* the size the earlier filters give (a shuffle keeps it, fletcher32 adds 4) */
            size_t expect = p->chunk_bytes;
            for (size_t k = 0; k < i; k++)
                if (!(mask & (1u << k)) && p->filter[k].id == GDS_FILTER_FLETCHER32)
                    expect += 4;
            ok = ref_inflate(&cur, &next, expect);
            break;
        }
        case GDS_FILTER_ZSTD: ok = ref_unzstd(&cur, &next); break;
        case GDS_FILTER_LZ4: ok = ref_unlz4h5(&cur, &next); break;
        case GDS_FILTER_BLOSC: ok = ref_unblosc(&cur, &next); break;
        case GDS_FILTER_BITSHUFFLE: {
            unsigned comp = f->ncd > 4 ? f->cd[4] : 0;
            if (comp == 2 || comp == 3)
                ok = ref_unbshuf(&cur, &next, f->cd[2], (int)comp);
            else {
                next = bytes_new(cur.n);
                ref_bitshuffle(cur.p, next.p, cur.n, f->cd[2], f->ncd > 3 ? f->cd[3] : 0, true);
            }
            break;
        }
        default: ok = false;
        }
        free(cur.p);
        if (!ok) {
            free(next.p);
            return false;
        }
        cur = next;
    }
    *out = cur;
    return true;
}

/* ---- pipelines ---- */

static inline void pipe_add(gds_codec_pipeline_t *p, unsigned id, unsigned flags, size_t ncd, const unsigned *cd)
{
    gds_codec_filter_t *f = &p->filter[p->nfilters++];
    f->id = id;
    f->flags = flags;
    f->ncd = ncd;
    for (size_t i = 0; i < ncd; i++)
        f->cd[i] = cd[i];
}

/* ---- test data (never all zeros) ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static inline double rng_unit(void) { return (double)(rng() >> 11) / 9007199254740992.0; }

typedef enum { DATA_FLOAT_FIELD, DATA_IMAGE_U8, DATA_SPARSE_INT, DATA_RANDOM, DATA_DOUBLE_FIELD, DATA_MIXED } data_kind_t;

/* A smooth field with noise (float32/64), image-like bytes (gradients,
 * texture, edges), sparse labels (int32), random bytes; image bytes with
 * random stretches (the second 128 KiB of every 256: a compressor meets pieces it
 * cannot shrink beside ones it can). */
static inline void make_data(data_kind_t kind, unsigned char *out, size_t len, unsigned seed)
{
    rng_state = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed * 0x100000001b3ull);
    switch (kind) {
    case DATA_FLOAT_FIELD: {
        float *f = (float *)out;
        size_t n = len / 4;
        for (size_t i = 0; i < n; i++) {
            double x = (double)(i % 512) / 512.0, y = (double)(i / 512) / 512.0 + seed;
            double v = 3.0 * sin(6.3 * x + 1.7 * y) + 0.5 * cos(21.0 * x * y) +
                       0.01 * (rng_unit() - 0.5);
            f[i] = (float)((int)(v * 1000.0)) / 1000.0f; /* 3 decimals, as stored fields often are */
        }
        for (size_t i = n * 4; i < len; i++)
            out[i] = (unsigned char)rng();
        break;
    }
    case DATA_DOUBLE_FIELD: {
        size_t n = len / 8;
        for (size_t i = 0; i < n; i++) {
            double x = (double)(i % 300) / 300.0, y = (double)(i / 300) / 300.0;
            double v = 100.0 * exp(-(x - 0.5) * (x - 0.5) * 8) * cos(5 * y + seed) +
                       1e-6 * rng_unit();
            memcpy(out + i * 8, &v, 8);
        }
        for (size_t i = n * 8; i < len; i++)
            out[i] = (unsigned char)rng();
        break;
    }
    case DATA_IMAGE_U8:
        for (size_t i = 0; i < len; i++) {
            size_t x = i % 640, y = i / 640;
            int v = (int)((x + 2 * y) / 5 % 256) + (((x / 37) ^ (y / 29)) & 1 ? 40 : 0) + (int)(rng() % 7);
            out[i] = (unsigned char)(v > 255 ? 255 : v);
        }
        break;
    case DATA_SPARSE_INT: {
        size_t n = len / 4;
        int32_t label = 1 + (int32_t)(seed % 5);
        for (size_t i = 0; i < n; i++) {
            if (rng() % 97 == 0)
                label = (int32_t)(rng() % 40);
            int32_t v = (rng() % 13 == 0) ? label : 0;
            if (i % 1024 == 0)
                v = (int32_t)i; /* never all zeros */
            memcpy(out + i * 4, &v, 4);
        }
        for (size_t i = n * 4; i < len; i++)
            out[i] = (unsigned char)(1 + rng() % 200);
        break;
    }
    case DATA_RANDOM:
        for (size_t i = 0; i < len; i++)
            out[i] = (unsigned char)rng();
        break;
    case DATA_MIXED:
        make_data(DATA_IMAGE_U8, out, len, seed);
        for (size_t i = 0; i < len; i++)
            if (i % 262144 >= 131072)
                out[i] = (unsigned char)rng();
        break;
    }
}

#endif
