/*
 * The GPU codecs on a GPU (label gpu; exit 77 without a GPU or nvCOMP,
 * with the reason; --require makes those failures).
 *
 *   test_codec_gpu                 realistic data encoded on the CPU with each
 *                                  filter's reference framing (codec_ref.h),
 *                                  decoded on the GPU and compared bit for bit;
 *                                  GPU-encoded then decoded on the CPU; corrupt
 *                                  and truncated chunks give errors
 *   test_codec_gpu --fixtures DIR  the chunks h5py + hdf5plugin wrote
 *       [--cpu] [--out DIR]        (tests/codec/h5_fixtures.py make DIR),
 *                                  decoded on the GPU (--cpu: with the CPU
 *                                  references, no GPU) and compared with what
 *                                  HDF5 read; their data encoded on the GPU (or
 *                                  CPU) into OUT/<name>.<gpu|cpu>.enc for
 *                                  h5_fixtures.py verify
 *   test_codec_gpu --hostile       garbage inside valid framing (child processes)
 *   test_codec_gpu --bench [MiB]   decode and encode throughput
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codec_ref.h"
#include "codec_shared.h"
#include "codec_test.h"
#include "cuda_loader.h"
#include "gpu_codec.h"

static const gds_cuda_api_t *cu;
static gds_codec_t *codec;
static CUstream stream;
static bool require_gpu;

#define GPU_OK(call)                                                                        \
    do {                                                                                    \
        CUresult rc_ = (call);                                                              \
        if (rc_ != CUDA_SUCCESS) {                                                          \
            fprintf(stderr, "FATAL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
                    gds_cuda_error_text(rc_));                                              \
            exit(100);                                                                      \
        }                                                                                   \
    } while (0)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static CUdeviceptr dalloc(size_t n)
{
    CUdeviceptr p;
    GPU_OK(cu->MemAlloc(&p, n ? n : 1));
    return p;
}

/* ---- a batch of chunks on the device ---- */

typedef struct batch {
    size_t n;
    bytes_t *data;    /* decoded (host) */
    bytes_t *stored;  /* encoded (host) */
    unsigned *mask;
    CUdeviceptr src_buf, dst_buf;
    gds_codec_chunk_t *chunks;
} batch_t;

/* Uploads the stored chunks at odd offsets (alignment 1..3) and makes room for the decoded ones. */
static void batch_upload(batch_t *b, size_t chunk_bytes, bool odd_dst)
{
    size_t total = 0;
    for (size_t i = 0; i < b->n; i++)
        total += b->stored[i].n + 64;
    b->src_buf = dalloc(total);
    b->dst_buf = dalloc(b->n * (chunk_bytes + 8));
    b->chunks = calloc(b->n, sizeof *b->chunks);
    size_t at = 0;
    for (size_t i = 0; i < b->n; i++) {
        at = (at + 15) / 16 * 16 + i % 4;
        GPU_OK(cu->MemcpyHtoD(b->src_buf + at, b->stored[i].p, b->stored[i].n));
        b->chunks[i].src = (const void *)(uintptr_t)(b->src_buf + at);
        b->chunks[i].src_bytes = b->stored[i].n;
        b->chunks[i].filter_mask = b->mask[i];
        b->chunks[i].dst = (void *)(uintptr_t)(b->dst_buf + i * (chunk_bytes + 8) + (odd_dst ? i % 8 : 0));
        at += b->stored[i].n;
    }
}

static void batch_free(batch_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->data[i].p);
        free(b->stored[i].p);
    }
    free(b->data);
    free(b->stored);
    free(b->mask);
    free(b->chunks);
    if (b->src_buf)
        cu->MemFree(b->src_buf);
    if (b->dst_buf)
        cu->MemFree(b->dst_buf);
    memset(b, 0, sizeof *b);
}

/* Chunks whose decoded bytes differ from the data (skip = a chunk expected to fail). */
static size_t batch_compare(const batch_t *b, size_t chunk_bytes, size_t skip)
{
    size_t bad = 0;
    unsigned char *got = malloc(chunk_bytes);
    for (size_t i = 0; i < b->n; i++) {
        if (i == skip)
            continue;
        GPU_OK(cu->MemcpyDtoH(got, (CUdeviceptr)(uintptr_t)b->chunks[i].dst, chunk_bytes));
        if (memcmp(got, b->data[i].p, chunk_bytes)) {
            size_t at = 0;
            while (got[at] == b->data[i].p[at])
                at++;
            if (bad++ < 3)
                fprintf(stderr, "  chunk %zu differs first at byte %zu (got 0x%02x, want 0x%02x)\n", i, at, got[at],
                        b->data[i].p[at]);
        }
    }
    free(got);
    return bad;
}

/* Parallel CPU encoding of a batch (the references are slow on big batches). */
typedef struct encode_work {
    const gds_codec_pipeline_t *p;
    batch_t *b;
    size_t next;
    bool ok;
    pthread_mutex_t lock;
} encode_work_t;

static void *encode_worker(void *arg)
{
    encode_work_t *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        size_t i = w->next++;
        pthread_mutex_unlock(&w->lock);
        if (i >= w->b->n)
            return NULL;
        if (!ref_encode(w->p, w->b->mask[i], &w->b->data[i], &w->b->stored[i])) {
            pthread_mutex_lock(&w->lock);
            w->ok = false;
            pthread_mutex_unlock(&w->lock);
        }
    }
}

/* Builds n chunks of `kind` data, encoded with the CPU references; false when a library is missing. */
static bool batch_make(batch_t *b, const gds_codec_pipeline_t *p, data_kind_t kind, size_t n, const unsigned *masks)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->data = calloc(n, sizeof *b->data);
    b->stored = calloc(n, sizeof *b->stored);
    b->mask = calloc(n, sizeof *b->mask);
    for (size_t i = 0; i < n; i++) {
        b->data[i] = bytes_new(p->chunk_bytes);
        make_data(kind, b->data[i].p, p->chunk_bytes, (unsigned)(i * 7 + kind));
        b->mask[i] = masks ? masks[i % 4] : 0;
    }
    encode_work_t w = {p, b, 0, true, PTHREAD_MUTEX_INITIALIZER};
    pthread_t th[16];
    int nth = n > 16 ? 16 : (int)n;
    for (int t = 0; t < nth; t++)
        pthread_create(&th[t], NULL, encode_worker, &w);
    for (int t = 0; t < nth; t++)
        pthread_join(th[t], NULL);
    return w.ok;
}

static const char *kind_name(data_kind_t k)
{
    static const char *const names[] = {"float field", "image u8", "sparse int32", "random bytes", "double field"};
    return names[k];
}

/* ---- decode: CPU reference encoding -> GPU ---- */

static void decode_case(const char *name, const gds_codec_pipeline_t *p, data_kind_t kind, size_t n,
                        const unsigned *masks)
{
    batch_t b;
    if (!batch_make(&b, p, kind, n, masks)) {
        printf("skip  decode %-34s (a compression library is missing)\n", name);
        batch_free(&b);
        return;
    }
    batch_upload(&b, p->chunk_bytes, n % 2 == 1);
    gds_status_t st = {0, ""};
    size_t bad = SIZE_MAX, stored = 0;
    for (size_t i = 0; i < n; i++)
        stored += b.stored[i].n;
    int rc = gds_codec_decode(codec, p, b.chunks, n, stream, &bad, &st);
    CHECK_MSG(rc == 0, "%s: %s", name, st.msg);
    size_t diff = rc == 0 ? batch_compare(&b, p->chunk_bytes, SIZE_MAX) : n;
    CHECK_MSG(diff == 0, "%s: %zu chunks differ", name, diff);
    printf("%s decode %-34s %zu x %zu B of %s, ratio %.2f\n", rc == 0 && diff == 0 ? "ok   " : "FAIL ", name, n,
           p->chunk_bytes, kind_name(kind), (double)(n * p->chunk_bytes) / (double)stored);
    batch_free(&b);
}

/* ---- encode: GPU -> CPU reference decoding, and GPU decoding ---- */

static void encode_case(const char *name, const gds_codec_pipeline_t *p, data_kind_t kind, size_t n,
                        bool expect_skipped)
{
    char why[300];
    if (!gds_codec_can_encode(p, why, sizeof why)) {
        CHECK_MSG(0, "%s: cannot encode: %s", name, why);
        return;
    }
    size_t cap = gds_codec_max_encoded_bytes(p);
    bytes_t *data = calloc(n, sizeof *data);
    CUdeviceptr sbuf = dalloc(n * (p->chunk_bytes + 16)), dbuf = dalloc(n * (cap + 16));
    const void **src = calloc(n, sizeof *src);
    void **dst = calloc(n, sizeof *dst);
    size_t *out_bytes = calloc(n, sizeof *out_bytes);
    unsigned *out_mask = calloc(n, sizeof *out_mask);
    for (size_t i = 0; i < n; i++) {
        data[i] = bytes_new(p->chunk_bytes);
        make_data(kind, data[i].p, p->chunk_bytes, (unsigned)(100 + i));
        CUdeviceptr s = sbuf + i * (p->chunk_bytes + 16) + (i % 3);
        GPU_OK(cu->MemcpyHtoD(s, data[i].p, p->chunk_bytes));
        src[i] = (const void *)(uintptr_t)s;
        dst[i] = (void *)(uintptr_t)(dbuf + i * (cap + 16) + (i % 2));
    }
    gds_status_t st = {0, ""};
    int rc = gds_codec_encode(codec, p, src, dst, out_bytes, out_mask, n, stream, &st);
    CHECK_MSG(rc == 0, "%s: %s", name, st.msg);
    size_t bad_cpu = 0, total = 0, skipped = 0;
    gds_codec_chunk_t *chunks = calloc(n, sizeof *chunks);
    CUdeviceptr back = dalloc(n * p->chunk_bytes);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        CHECK_MSG(out_bytes[i] <= cap, "%s: chunk %zu: %zu bytes > bound %zu", name, i, out_bytes[i], cap);
        bytes_t enc = bytes_new(out_bytes[i]), dec = {NULL, 0};
        GPU_OK(cu->MemcpyDtoH(enc.p, (CUdeviceptr)(uintptr_t)dst[i], out_bytes[i]));
        if (!ref_decode(p, out_mask[i], &enc, &dec) || dec.n != p->chunk_bytes ||
            memcmp(dec.p, data[i].p, p->chunk_bytes)) {
            if (bad_cpu++ < 3)
                fprintf(stderr, "  %s: chunk %zu (%zu bytes, mask %u) not decoded by the CPU reference\n", name, i,
                        out_bytes[i], out_mask[i]);
        }
        total += out_bytes[i];
        skipped += out_mask[i] != 0;
        chunks[i] = (gds_codec_chunk_t){dst[i], out_bytes[i], out_mask[i], (void *)(uintptr_t)(back + i * p->chunk_bytes)};
        free(enc.p);
        free(dec.p);
    }
    CHECK_MSG(bad_cpu == 0, "%s: %zu chunks not decoded by the CPU", name, bad_cpu);
    if (expect_skipped)
        CHECK_MSG(skipped == n, "%s: %zu of %zu chunks with the optional filter skipped", name, skipped, n);
    /* and back through the GPU */
    size_t bad_gpu = 0, badi = 0;
    if (rc == 0) {
        int r2 = gds_codec_decode(codec, p, chunks, n, stream, &badi, &st);
        CHECK_MSG(r2 == 0, "%s: GPU decoding of GPU-encoded chunks: %s", name, st.msg);
        unsigned char *got = malloc(p->chunk_bytes);
        for (size_t i = 0; r2 == 0 && i < n; i++) {
            GPU_OK(cu->MemcpyDtoH(got, back + i * p->chunk_bytes, p->chunk_bytes));
            bad_gpu += memcmp(got, data[i].p, p->chunk_bytes) != 0;
        }
        free(got);
        CHECK_MSG(bad_gpu == 0, "%s: %zu chunks differ after GPU encode + decode", name, bad_gpu);
    }
    printf("%s encode %-34s %zu x %zu B of %s, ratio %.2f, %zu skipped\n",
           rc == 0 && !bad_cpu && !bad_gpu ? "ok   " : "FAIL ", name, n, p->chunk_bytes, kind_name(kind),
           total ? (double)(n * p->chunk_bytes) / (double)total : 0.0, skipped);
    for (size_t i = 0; i < n; i++)
        free(data[i].p);
    free(data);
    free(src);
    free(dst);
    free(out_bytes);
    free(out_mask);
    free(chunks);
    cu->MemFree(sbuf);
    cu->MemFree(dbuf);
    cu->MemFree(back);
}

/* ---- corrupt chunks ---- */

typedef void (*corrupt_fn)(bytes_t *chunk);

/* Encodes 6 chunks, corrupts chunk 3 with `fn`: the decode fails naming
 * chunk 3 and `want` is in the message; the other chunks decode right. */
static void corrupt_case(const char *name, const gds_codec_pipeline_t *p, data_kind_t kind, corrupt_fn fn,
                         const char *want, bool expect_ok)
{
    batch_t b;
    if (!batch_make(&b, p, kind, 6, NULL)) {
        printf("skip  corrupt %-33s (a compression library is missing)\n", name);
        batch_free(&b);
        return;
    }
    fn(&b.stored[3]);
    batch_upload(&b, p->chunk_bytes, false);
    gds_status_t st = {0, ""};
    size_t bad = SIZE_MAX;
    int rc = gds_codec_decode(codec, p, b.chunks, b.n, stream, &bad, &st);
    bool ok;
    if (expect_ok) {
        ok = rc == 0 && batch_compare(&b, p->chunk_bytes, SIZE_MAX) == 0;
        CHECK_MSG(ok, "%s: expected success: %s", name, st.msg);
    }
    else {
        ok = rc == -1 && bad == 3 && (!want || strstr(st.msg, want));
        CHECK_MSG(ok, "%s: rc %d, bad %zu, message '%s' (wanted '%s')", name, rc, bad, st.msg, want ? want : "");
        /* a failure the checks find before decompressing leaves the other
         * chunks decoded; garbage only the decompressor meets ("corrupt
         * data") may make it write past its chunk's slot (nvCOMP's LZ4 does),
         * and the batch's other chunks are then undefined, as gpu_codec.h says */
        size_t diff = batch_compare(&b, p->chunk_bytes, 3);
        bool decompressor = strstr(st.msg, "corrupt data") != NULL;
        CHECK_MSG(diff == 0 || decompressor, "%s: %zu good chunks differ", name, diff);
        ok = ok && (diff == 0 || decompressor);
    }
    printf("%s corrupt %-33s %s\n", ok ? "ok   " : "FAIL ", name, expect_ok ? "(accepted)" : st.msg);
    batch_free(&b);
}

static void flip_middle(bytes_t *c) { c->p[c->n / 2] ^= 0x5a; }
static void flip_zlib_header(bytes_t *c) { c->p[0] = 0x79; }
static void zlib_dictionary(bytes_t *c)
{
    unsigned flg = (c->p[1] & 0xe0u) | 0x20u; /* FDICT, then the check bits again */
    flg |= (31 - ((unsigned)(c->p[0] << 8) | flg) % 31) % 31;
    c->p[1] = (unsigned char)flg;
}
static void flip_last(bytes_t *c) { c->p[c->n - 1] ^= 0x01; }
static void truncate_half(bytes_t *c) { c->n /= 2; }
static void truncate_tiny(bytes_t *c) { c->n = 3; }
static void truncate_last(bytes_t *c) { c->n -= 1; }
static void bshuf_zstd_magic(bytes_t *c) { c->p[16] ^= 0xff; }
static void swap_checksum(bytes_t *c)
{
    unsigned char *t = c->p + c->n - 4, a = t[0], x = t[2];
    t[0] = t[1];
    t[1] = a;
    t[2] = t[3];
    t[3] = x;
}
static void lz4_block_size_huge(bytes_t *c) { put_be(c->p + 12, 0x7fffff00u, 4); }
static void lz4_block_size_short(bytes_t *c) { put_be(c->p + 12, get_be(c->p + 12, 4) - 1, 4); }
static void header_orig_size(bytes_t *c) { put_be(c->p, get_be(c->p, 8) + 8, 8); }
static void bshuf_block_negative(bytes_t *c) { put_be(c->p + 12, 0xffffffffu, 4); }
static void bshuf_block_size_zero(bytes_t *c) { put_be(c->p + 8, 12, 4); }
static void zstd_magic(bytes_t *c) { c->p[0] ^= 0xff; }
/* The frame header's content size (ZSTD_compress writes it after the
 * window descriptor, or at byte 5 in a single-segment frame). */
static void zstd_content_size(bytes_t *c)
{
    unsigned fhd = c->p[4], single = (fhd >> 5) & 1;
    c->p[5 + !single] ^= 0x01;
}
static void zstd_reserved_bit(bytes_t *c) { c->p[4] |= 0x08; }
/* Position of the first zstd block's content and its size. */
static size_t zstd_first_block(const bytes_t *c, size_t *bsize)
{
    unsigned fhd = c->p[4], single = (fhd >> 5) & 1, fcs = fhd >> 6, did = fhd & 3;
    size_t pos = 5 + !single + (did == 3 ? 4 : did) + (fcs ? (1u << fcs) : single);
    unsigned bh = c->p[pos] | (c->p[pos + 1] << 8) | (c->p[pos + 2] << 16);
    *bsize = bh >> 3;
    return pos + 3;
}
static void zstd_block_garbage(bytes_t *c)
{
    size_t bsize, at = zstd_first_block(c, &bsize);
    for (size_t i = at + bsize / 4; i < at + bsize * 3 / 4; i++)
        c->p[i] = (unsigned char)rng();
}
/* Garbage inside each LZ4 block of HDF5's framing, sizes kept. */
static void lz4h5_block_garbage(bytes_t *c)
{
    size_t pos = 12;
    while (pos + 4 <= c->n) {
        size_t cs = get_be(c->p + pos, 4);
        pos += 4;
        if (cs > c->n - pos)
            break;
        for (size_t i = pos + cs / 4; i < pos + cs * 3 / 4; i++)
            c->p[i] = (unsigned char)rng();
        pos += cs;
    }
}
/* The same inside bitshuffle's blocks (LZ4 or zstd frames). */
static void bshuf_block_garbage(bytes_t *c) { lz4h5_block_garbage(c); }
static void garbage(bytes_t *c)
{
    for (size_t i = 0; i < c->n; i++)
        c->p[i] = (unsigned char)rng();
}
static void garbage_keep_head(bytes_t *c)
{
    for (size_t i = 16; i < c->n; i++)
        c->p[i] = (unsigned char)rng();
}

/* Blosc chunks: header fields (LE) and the first block's first stream. */
static void blosc_version(bytes_t *c) { c->p[0] = 3; }
static void blosc_nbytes(bytes_t *c) { put_le32(c->p + 4, get_le32(c->p + 4) + 4); }
static void blosc_block_start(bytes_t *c) { put_le32(c->p + 16, (uint32_t)c->n - 2); }
static void blosc_stream_size(bytes_t *c) { put_le32(c->p + get_le32(c->p + 16), 0x7ffffff0u); }
static void blosc_blosclz(bytes_t *c) { c->p[2] = (unsigned char)(c->p[2] & 0x1f); } /* compressor format 0 */
/* Garbage in the middle of every compressed stream of every block, sizes
 * kept (raw streams left: nothing could tell). */
static void blosc_stream_garbage(bytes_t *c)
{
    uint32_t flags = c->p[2], ts = c->p[3], nbytes = get_le32(c->p + 4), bs = get_le32(c->p + 8);
    if (flags & GDS_BLOSC_MEMCPYED)
        return;
    for (uint32_t k = 0; k < (nbytes + bs - 1) / bs; k++) {
        bool partial = (uint64_t)(k + 1) * bs > nbytes;
        uint32_t ns = gds_blosc_nsplits(flags, ts, bs, partial), neblock = (partial ? nbytes - k * bs : bs) / ns;
        size_t at = get_le32(c->p + 16 + 4 * k);
        for (uint32_t j = 0; j < ns && at + 4 <= c->n; j++) {
            size_t cs = get_le32(c->p + at);
            if (cs > c->n - at - 4)
                break;
            for (size_t i = at + 4 + cs / 4; cs != neblock && i < at + 4 + cs * 3 / 4; i++)
                c->p[i] = (unsigned char)rng();
            at += 4 + cs;
        }
    }
}

/* ---- pipelines ---- */

static gds_codec_pipeline_t pipe_new(size_t chunk_bytes, size_t type_size)
{
    gds_codec_pipeline_t p;
    memset(&p, 0, sizeof p);
    p.chunk_bytes = chunk_bytes;
    p.type_size = type_size;
    return p;
}

static const unsigned CD1[] = {1}, CD2[] = {2}, CD4[] = {4}, CD6[] = {6}, CD8[] = {8}, CD0[] = {0}, CD3[] = {3};
static const unsigned CD64K[] = {65536};
#define OPT GDS_FILTER_FLAG_OPTIONAL

/* A chunk whose header names blosclz in a pipeline that says lz4: the
 * decode fails with EOPNOTSUPP (95) naming blosclz, the caller's cue to use
 * HDF5's CPU filter; the other chunks decode. */
static void blosc_fallback_case(void)
{
    gds_codec_pipeline_t p = pipe_new(256 * 1024, 4);
    const unsigned cd[] = {2, 2, 4, 256 * 1024, 5, 1, 1};
    pipe_add(&p, GDS_FILTER_BLOSC, GDS_FILTER_FLAG_OPTIONAL, 7, cd);
    batch_t b;
    if (!batch_make(&b, &p, DATA_FLOAT_FIELD, 6, NULL)) {
        printf("skip  blosc fallback (liblz4 missing)\n");
        batch_free(&b);
        return;
    }
    blosc_blosclz(&b.stored[3]);
    batch_upload(&b, p.chunk_bytes, false);
    gds_status_t st = {0, ""};
    size_t bad = SIZE_MAX;
    int rc = gds_codec_decode(codec, &p, b.chunks, b.n, stream, &bad, &st);
    bool ok = rc == -1 && bad == 3 && st.err == 95 && strstr(st.msg, "blosclz") && strstr(st.msg, "CPU");
    CHECK_MSG(ok, "blosc fallback: rc %d, bad %zu, err %d, '%s'", rc, bad, st.err, st.msg);
    size_t diff = batch_compare(&b, p.chunk_bytes, 3);
    CHECK_MSG(diff == 0, "blosc fallback: %zu good chunks differ", diff);
    printf("%s blosc chunk of blosclz                 err %d: %s\n", ok && !diff ? "ok   " : "FAIL ", st.err, st.msg);
    batch_free(&b);
}

static void self_tests(void)
{
    gds_codec_pipeline_t p;
    const size_t MB = 1 << 20;

    /* decode */
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    decode_case("deflate6", &p, DATA_FLOAT_FIELD, 16, NULL);
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    decode_case("shuffle+deflate6", &p, DATA_FLOAT_FIELD, 24, NULL);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    decode_case("shuffle+deflate6+fletcher32", &p, DATA_FLOAT_FIELD, 9, NULL);
    const unsigned masks[] = {0, 2, 0, 3}; /* deflate skipped; shuffle and deflate skipped */
    decode_case("shuffle+deflate+fletcher32 masks", &p, DATA_FLOAT_FIELD, 12, masks);
    p = pipe_new(MB + 12, 8);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD8);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD1);
    decode_case("fletcher32+shuffle8+deflate1", &p, DATA_DOUBLE_FIELD, 5, NULL);
    p = pipe_new(3 * MB, 1);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD0);
    decode_case("deflate0 (stored) 3 MiB", &p, DATA_IMAGE_U8, 3, NULL);
    p = pipe_new(100003, 1);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    decode_case("fletcher32 odd size", &p, DATA_RANDOM, 7, NULL);
    p = pipe_new(500000, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    decode_case("shuffle", &p, DATA_SPARSE_INT, 6, NULL);
    p = pipe_new(4096, 1);
    decode_case("no filter", &p, DATA_RANDOM, 5, NULL);
    p = pipe_new(512 * 1024, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    decode_case("zstd3", &p, DATA_SPARSE_INT, 16, NULL);
    p = pipe_new(4 * MB, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD1);
    decode_case("shuffle+zstd1 4 MiB", &p, DATA_FLOAT_FIELD, 6, NULL);
    p = pipe_new(640 * 480, 1);
    pipe_add(&p, GDS_FILTER_LZ4, OPT, 1, CD0);
    decode_case("lz4 default block", &p, DATA_IMAGE_U8, 12, NULL);
    p = pipe_new(MB, 1);
    pipe_add(&p, GDS_FILTER_LZ4, OPT, 1, CD64K);
    decode_case("lz4 64 KiB blocks, random (raw)", &p, DATA_RANDOM, 6, NULL);
    decode_case("lz4 64 KiB blocks, image", &p, DATA_IMAGE_U8, 6, NULL);
    p = pipe_new(999 * 37 * 4, 4);
    const unsigned bs_lz4[] = {0, 4, 4, 0, 2};
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4);
    decode_case("bitshuffle+lz4 f32 (leftover)", &p, DATA_FLOAT_FIELD, 10, NULL);
    p = pipe_new(333 * 61 * 8, 8);
    const unsigned bs_zstd[] = {0, 4, 8, 0, 3, 5};
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 6, bs_zstd);
    decode_case("bitshuffle+zstd f64 (leftover)", &p, DATA_DOUBLE_FIELD, 6, NULL);
    p = pipe_new(2 * MB, 2);
    const unsigned bs_lz4_2[] = {0, 4, 2, 1024, 2};
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4_2);
    decode_case("bitshuffle+lz4 u16 1024 elements", &p, DATA_IMAGE_U8, 4, NULL);
    p = pipe_new(300 * 301 * 4, 4);
    const unsigned bs_plain[] = {0, 4, 4};
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 3, bs_plain);
    decode_case("bitshuffle (no compression)", &p, DATA_SPARSE_INT, 5, NULL);
    p = pipe_new(1000 * 12, 12);
    const unsigned bs_12[] = {0, 4, 12, 0, 2};
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_12);
    decode_case("bitshuffle+lz4 12-byte elements", &p, DATA_RANDOM, 4, NULL);

    /* blosc (cd: revision, version, typesize, chunk bytes, clevel, shuffle, compressor) */
    const unsigned bl_lz4_shuf[] = {2, 2, 4, MB, 5, 1, 1}, bl_lz4hc_bit[] = {2, 2, 2, 0, 9, 2, 2};
    const unsigned bl_zstd_shuf8[] = {2, 2, 8, 0, 5, 1, 5}, bl_zstd_none[] = {2, 2, 4, 0, 1, 0, 5};
    const unsigned bl_lz4_c0[] = {2, 2, 4, 0, 0, 1, 1}, bl_lz4_1[] = {2, 2, 1, 0, 1, 1, 1};
    const unsigned bl_zstd_bit3[] = {2, 2, 3, 0, 3, 2, 5};
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf);
    decode_case("blosc lz4 shuffle f32", &p, DATA_FLOAT_FIELD, 8, NULL);
    p = pipe_new(MB + 6 * 2048 + 2, 2); /* blocks of 512 KiB and a partial one */
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4hc_bit);
    decode_case("blosc lz4hc bitshuffle u16 partial", &p, DATA_IMAGE_U8, 5, NULL);
    p = pipe_new(333 * 61 * 8, 8);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_zstd_shuf8);
    decode_case("blosc zstd shuffle f64", &p, DATA_DOUBLE_FIELD, 6, NULL);
    p = pipe_new(700001 * 4, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_zstd_none);
    decode_case("blosc zstd i32 partial", &p, DATA_SPARSE_INT, 3, NULL);
    p = pipe_new(3001 * 3, 3);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_zstd_bit3);
    decode_case("blosc zstd bitshuffle 3-byte elements", &p, DATA_RANDOM, 4, NULL);
    p = pipe_new(300000, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_c0);
    decode_case("blosc clevel 0 (memcpyed)", &p, DATA_FLOAT_FIELD, 4, NULL);
    p = pipe_new(200000, 1);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_1);
    decode_case("blosc lz4 random (memcpyed)", &p, DATA_RANDOM, 4, NULL);
    p = pipe_new(65536 * 8, 8); /* blosc sees 4 bytes more: half an element after the last whole one */
    const unsigned bl_lz4_shuf8[] = {2, 2, 8, 0, 5, 1, 1};
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf8);
    decode_case("fletcher32+blosc lz4 shuffle f64", &p, DATA_DOUBLE_FIELD, 6, NULL);
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_zstd_none);
    decode_case("shuffle+blosc zstd masks", &p, DATA_FLOAT_FIELD, 8, masks);

    /* encode */
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    encode_case("shuffle+deflate6", &p, DATA_FLOAT_FIELD, 24, false);
    p = pipe_new(64 * 1024, 1);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD1);
    encode_case("deflate1 64 KiB", &p, DATA_IMAGE_U8, 16, false);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    encode_case("deflate4 1 MiB", &p, DATA_SPARSE_INT, 8, false);
    p = pipe_new(200000, 1);
    pipe_add(&p, GDS_FILTER_DEFLATE, 0, 1, CD0);
    encode_case("deflate0 (stored)", &p, DATA_IMAGE_U8, 4, false);
    p = pipe_new(300000, 1);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    encode_case("deflate6 random (skipped)", &p, DATA_RANDOM, 4, true);
    p = pipe_new(300000, 1);
    pipe_add(&p, GDS_FILTER_DEFLATE, 0, 1, CD6);
    encode_case("deflate6 random, mandatory", &p, DATA_RANDOM, 4, false);
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD2);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    encode_case("shuffle+deflate2+fletcher32", &p, DATA_FLOAT_FIELD, 8, false);
    p = pipe_new(100001, 1);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    encode_case("fletcher32+deflate6 odd size", &p, DATA_IMAGE_U8, 5, false);
    p = pipe_new(512 * 1024, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    encode_case("zstd", &p, DATA_SPARSE_INT, 12, false);
    p = pipe_new(2 * MB + 4, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    encode_case("shuffle+zstd+fletcher32", &p, DATA_FLOAT_FIELD, 5, false);
    p = pipe_new(300000, 1);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    encode_case("zstd random (skipped)", &p, DATA_RANDOM, 3, true);
    p = pipe_new(300000, 1);
    pipe_add(&p, GDS_FILTER_ZSTD, 0, 1, CD3);
    encode_case("zstd random, mandatory (raw frame)", &p, DATA_RANDOM, 3, false);
    p = pipe_new(640 * 480, 1);
    pipe_add(&p, GDS_FILTER_LZ4, OPT, 1, CD0);
    encode_case("lz4", &p, DATA_IMAGE_U8, 12, false);
    p = pipe_new(MB, 1);
    pipe_add(&p, GDS_FILTER_LZ4, 0, 1, CD64K);
    encode_case("lz4 64 KiB blocks random, mandatory", &p, DATA_RANDOM, 4, false);
    p = pipe_new(999 * 37 * 4, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4);
    encode_case("bitshuffle+lz4", &p, DATA_FLOAT_FIELD, 8, false);
    p = pipe_new(333 * 61 * 8, 8);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 6, bs_zstd);
    encode_case("bitshuffle+zstd", &p, DATA_DOUBLE_FIELD, 4, false);
    p = pipe_new(300 * 301 * 4, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 3, bs_plain);
    encode_case("bitshuffle (no compression)", &p, DATA_SPARSE_INT, 4, false);

    /* corrupt chunks: errors name the chunk and the filter */
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    corrupt_case("deflate: zlib header", &p, DATA_FLOAT_FIELD, flip_zlib_header, "zlib", false);
    corrupt_case("deflate: preset dictionary", &p, DATA_FLOAT_FIELD, zlib_dictionary, "zlib", false);
    corrupt_case("deflate: Adler-32 trailer", &p, DATA_FLOAT_FIELD, flip_last, "Adler-32", false);
    corrupt_case("deflate: data", &p, DATA_FLOAT_FIELD, flip_middle, "deflate", false);
    corrupt_case("deflate: truncated", &p, DATA_FLOAT_FIELD, truncate_half, "deflate", false);
    corrupt_case("deflate: 3 bytes", &p, DATA_FLOAT_FIELD, truncate_tiny, "too small", false);
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    corrupt_case("fletcher32: data", &p, DATA_FLOAT_FIELD, flip_middle, "fletcher32): checksum mismatch", false);
    corrupt_case("fletcher32: byte-swapped (HDF5 < 1.6.3)", &p, DATA_FLOAT_FIELD, swap_checksum, NULL, true);
    p = pipe_new(MB, 1);
    pipe_add(&p, GDS_FILTER_LZ4, OPT, 1, CD64K);
    corrupt_case("lz4: block size past the end", &p, DATA_IMAGE_U8, lz4_block_size_huge, "truncated", false);
    corrupt_case("lz4: block size one short", &p, DATA_IMAGE_U8, lz4_block_size_short, "lz4", false);
    corrupt_case("lz4: original size", &p, DATA_IMAGE_U8, header_orig_size, "header says", false);
    corrupt_case("lz4: truncated", &p, DATA_IMAGE_U8, truncate_half, "lz4", false);
    p = pipe_new(999 * 37 * 4, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4);
    corrupt_case("bitshuffle: negative block size", &p, DATA_FLOAT_FIELD, bshuf_block_negative, "truncated", false);
    corrupt_case("bitshuffle: block of 3 elements", &p, DATA_FLOAT_FIELD, bshuf_block_size_zero, "not valid", false);
    corrupt_case("bitshuffle: size", &p, DATA_FLOAT_FIELD, header_orig_size, "header says", false);
    corrupt_case("bitshuffle: truncated", &p, DATA_FLOAT_FIELD, truncate_half, "bitshuffle", false);
    p = pipe_new(512 * 1024, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    corrupt_case("zstd: magic", &p, DATA_SPARSE_INT, zstd_magic, "malformed header", false);
    corrupt_case("zstd: reserved bit", &p, DATA_SPARSE_INT, zstd_reserved_bit, "malformed header", false);
    corrupt_case("zstd: content size", &p, DATA_SPARSE_INT, zstd_content_size, "header says", false);
    corrupt_case("zstd: truncated", &p, DATA_SPARSE_INT, truncate_half, "truncated", false);
    corrupt_case("zstd: last byte dropped", &p, DATA_SPARSE_INT, truncate_last, "truncated", false);
    p = pipe_new(333 * 61 * 8, 8);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 6, bs_zstd);
    corrupt_case("bitshuffle+zstd: magic of block 0", &p, DATA_DOUBLE_FIELD, bshuf_zstd_magic, "malformed header",
                 false);
    p = pipe_new(500000, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    corrupt_case("shuffle: stored size", &p, DATA_SPARSE_INT, truncate_half, "stored size", false);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf);
    corrupt_case("blosc: version", &p, DATA_FLOAT_FIELD, blosc_version, "malformed header", false);
    corrupt_case("blosc: nbytes", &p, DATA_FLOAT_FIELD, blosc_nbytes, "header says", false);
    corrupt_case("blosc: block start past the end", &p, DATA_FLOAT_FIELD, blosc_block_start, "truncated", false);
    corrupt_case("blosc: stream size past the end", &p, DATA_FLOAT_FIELD, blosc_stream_size, "truncated", false);
    corrupt_case("blosc: truncated", &p, DATA_FLOAT_FIELD, truncate_half, "truncated", false);
    corrupt_case("blosc: 3 bytes", &p, DATA_FLOAT_FIELD, truncate_tiny, "too small", false);
    corrupt_case("blosc: garbage in the streams", &p, DATA_IMAGE_U8, blosc_stream_garbage, "blosc", false);
    blosc_fallback_case();
    /* garbage behind valid headers: nvCOMP decodes it (an error, never a crash) */
    p = pipe_new(MB, 1);
    pipe_add(&p, GDS_FILTER_LZ4, OPT, 1, CD64K);
    corrupt_case("lz4: garbage", &p, DATA_IMAGE_U8, garbage_keep_head, "lz4", false);
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    corrupt_case("deflate: garbage after the header", &p, DATA_FLOAT_FIELD, garbage_keep_head, "deflate", false);
    p = pipe_new(512 * 1024, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    corrupt_case("zstd: garbage", &p, DATA_SPARSE_INT, garbage, "zstd", false);
}

/* Garbage inside blocks whose framing is valid: only the decompressor can
 * see it. nvCOMP documents corrupt input as undefined behaviour; these
 * cases check that the codec returns (an error where the format can tell:
 * deflate, zstd's sizes) and that no other chunk's output is touched. Each
 * case runs in a child process of its own, so that a broken CUDA context
 * shows as that case's failure. */
/* Seconds a hostile case's child may take (CUDA start, NVRTC, one batch). */
#define HOSTILE_CHILD_SECONDS 20

typedef struct hostile {
    const char *name;
    unsigned id;
    size_t ncd;
    const unsigned *cd;
    size_t chunk_bytes;
    data_kind_t kind;
    corrupt_fn fn;
    bool must_fail;
    /* nvCOMP's Zstd decoder faults on some garbage inside a block
     * (compute-sanitizer: zstd::decompression_kernel reads address 0x8,
     * bench/results/2026-11-26-h200-compressed/sanitizer-nvcomp-zstd-garbage.txt):
     * the CUDA context is lost. Accepted for these cases as long as the
     * codec returned an error; docs/compression.md says so. */
    bool decoder_may_fault;
} hostile_t;

static int hostile_child(const hostile_t *h)
{
    setenv("H5GDS_CODEC_TIMEOUT_S", "5", 0); /* a decoder that never ends is reported within the child's time */
    const char *why = NULL;
    if (!gds_cuda_use_device(0, NULL, 0, &why)) {
        printf("SKIP: no GPU: %s\n", why);
        return 77;
    }
    cu = gds_cuda_load(NULL);
    gds_status_t st = {0, ""};
    if (gds_codec_open(&codec, NULL, &st) < 0) {
        printf("SKIP: %s\n", st.msg);
        return 77;
    }
    GPU_OK(cu->StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    gds_codec_pipeline_t p = pipe_new(h->chunk_bytes, 4);
    pipe_add(&p, h->id, OPT, h->ncd, h->cd);
    batch_t b;
    if (!batch_make(&b, &p, h->kind, 6, NULL)) {
        printf("skip  hostile %s (a compression library is missing)\n", h->name);
        return 77;
    }
    rng_state = 12345;
    h->fn(&b.stored[3]);
    batch_upload(&b, p.chunk_bytes, false);
    size_t bad = SIZE_MAX;
    int rc = gds_codec_decode(codec, &p, b.chunks, b.n, stream, &bad, &st);
    if (rc == -1 && st.err == ETIMEDOUT) {
        /* the decoder never finished: the codec said so and stopped (a
         * synchronisation would never return, so none is made) */
        printf("ok    hostile %-34s rc -1: %.90s...\n", h->name, st.msg);
        fflush(stdout);
        _exit(gds_codec_stopped(codec) ? 0 : 1);
    }
    CUresult alive = cu->CtxSynchronize();
    if (alive != CUDA_SUCCESS && h->decoder_may_fault && rc == -1) {
        printf("known hostile %-34s rc -1: %s; CUDA context lost (nvCOMP's decoder faulted)\n", h->name, st.msg);
        return 0;
    }
    size_t diff = alive == CUDA_SUCCESS ? batch_compare(&b, p.chunk_bytes, 3) : b.n;
    /* a failed decode leaves its batch's other chunks undefined (gpu_codec.h) */
    bool ok = alive == CUDA_SUCCESS && (rc == -1 ? bad == 3 : !h->must_fail && diff == 0);
    printf("%s hostile %-34s rc %d%s%s; other chunks %s%s\n", ok ? "ok   " : "FAIL ", h->name, rc, rc ? ": " : "",
           rc ? st.msg : " (nothing to detect it)", diff ? "CHANGED" : "intact",
           alive == CUDA_SUCCESS ? "" : "; CUDA context broken");
    return ok ? 0 : 1;
}

/* The hostile cases. */
static const hostile_t *hostile_cases(size_t *n)
{
    static const unsigned cd3[] = {3}, cd64k[] = {65536}, bs_lz4[] = {0, 4, 4, 0, 2}, bs_zstd[] = {0, 4, 4, 0, 3, 3};
    static const unsigned bl_lz4[] = {2, 2, 4, 0, 5, 1, 1}, bl_zstd[] = {2, 2, 4, 0, 3, 1, 5};
    static const hostile_t cases[] = {
        {"zstd: garbage in a block", GDS_FILTER_ZSTD, 1, cd3, 512 * 1024, DATA_SPARSE_INT, zstd_block_garbage, false,
         true},
        {"zstd f32: garbage in a block", GDS_FILTER_ZSTD, 1, cd3, 512 * 1024, DATA_FLOAT_FIELD, zstd_block_garbage,
         false, true},
        {"lz4: garbage in the blocks", GDS_FILTER_LZ4, 1, cd64k, 1 << 20, DATA_IMAGE_U8, lz4h5_block_garbage, false,
         false},
        {"bitshuffle+lz4: garbage in the blocks", GDS_FILTER_BITSHUFFLE, 5, bs_lz4, 1 << 20, DATA_FLOAT_FIELD,
         bshuf_block_garbage, false, false},
        {"bitshuffle+zstd: garbage in the blocks", GDS_FILTER_BITSHUFFLE, 6, bs_zstd, 1 << 20, DATA_FLOAT_FIELD,
         bshuf_block_garbage, false, true},
        {"deflate: garbage after the header", GDS_FILTER_DEFLATE, 1, CD6, 1 << 20, DATA_FLOAT_FIELD,
         garbage_keep_head, true, false},
        {"blosc lz4: garbage in the streams", GDS_FILTER_BLOSC, 7, bl_lz4, 1 << 20, DATA_IMAGE_U8,
         blosc_stream_garbage, false, false},
        {"blosc zstd: garbage in the streams", GDS_FILTER_BLOSC, 7, bl_zstd, 1 << 20, DATA_FLOAT_FIELD,
         blosc_stream_garbage, false, true},
    };
    *n = sizeof cases / sizeof cases[0];
    return cases;
}

/* Case i in this process (no child): for compute-sanitizer. */
static int hostile_one(int i)
{
    size_t n;
    const hostile_t *cases = hostile_cases(&n);
    if (i < 0 || (size_t)i >= n) {
        fprintf(stderr, "--hostile-case: 0..%zu\n", n - 1);
        return 2;
    }
    return hostile_child(&cases[i]);
}

/* The cases that ran (not skipped). */
static int hostile_tests(void)
{
    int ran = 0;
    size_t ncases;
    const hostile_t *cases = hostile_cases(&ncases);
    fflush(stdout);
    for (size_t i = 0; i < ncases; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            int r = hostile_child(&cases[i]);
            fflush(stdout);
            _exit(r);
        }
        /* a decoder that never returns on garbage is a failure of its own
         * (a hang), not a test that never ends */
        int status = 0;
        bool hung = false;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
            if (waitpid(pid, &status, WNOHANG) == pid)
                break;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if (t1.tv_sec - t0.tv_sec > HOSTILE_CHILD_SECONDS) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                hung = true;
                break;
            }
            usleep(20000);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("      hostile %-34s %.1f s\n", cases[i].name,
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
        fflush(stdout);
        if (!hung && WIFEXITED(status) && WEXITSTATUS(status) == 77)
            continue;
        ran++;
        bool ok = !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        CHECK_MSG(ok, "hostile %s: child %s %d", cases[i].name,
                  hung ? "HUNG, killed after seconds:" : WIFEXITED(status) ? "exit" : "signal",
                  hung ? HOSTILE_CHILD_SECONDS : WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    return ran;
}

/* ---- fixtures written by h5py + hdf5plugin ---- */

typedef struct fixture {
    gds_codec_pipeline_t p;
    size_t n;
    unsigned *mask;
    bytes_t *stored;
    bytes_t expected; /* n * chunk_bytes */
} fixture_t;

static bool read_exact(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

static bool fixture_load(const char *path, fixture_t *x)
{
    memset(x, 0, sizeof *x);
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char magic[8];
    uint32_t nf = 0;
    bool ok = read_exact(f, magic, 8) && memcmp(magic, "H5GDSFX1", 8) == 0 && read_exact(f, &nf, 4) &&
              nf <= GDS_CODEC_MAX_FILTERS;
    for (uint32_t i = 0; ok && i < nf; i++) {
        uint32_t h[3], cd[GDS_CODEC_MAX_CD];
        ok = read_exact(f, h, sizeof h) && read_exact(f, cd, sizeof cd) && h[2] <= GDS_CODEC_MAX_CD;
        if (ok)
            pipe_add(&x->p, h[0], h[1], h[2], cd);
    }
    uint64_t hdr[3];
    ok = ok && read_exact(f, hdr, sizeof hdr);
    if (ok) {
        x->p.type_size = hdr[0];
        x->p.chunk_bytes = hdr[1];
        x->n = hdr[2];
        x->mask = calloc(x->n, sizeof *x->mask);
        x->stored = calloc(x->n, sizeof *x->stored);
    }
    for (size_t i = 0; ok && i < x->n; i++) {
        uint32_t m;
        uint64_t size;
        ok = read_exact(f, &m, 4) && read_exact(f, &size, 8);
        if (ok) {
            x->mask[i] = m;
            x->stored[i] = bytes_new(size);
            ok = read_exact(f, x->stored[i].p, size);
        }
    }
    if (ok) {
        x->expected = bytes_new(x->n * x->p.chunk_bytes);
        ok = read_exact(f, x->expected.p, x->expected.n);
    }
    fclose(f);
    return ok;
}

static void fixture_free(fixture_t *x)
{
    for (size_t i = 0; i < x->n; i++)
        free(x->stored[i].p);
    free(x->stored);
    free(x->mask);
    free(x->expected.p);
}

static void write_encoded(const char *path, size_t n, const bytes_t *enc, const unsigned *mask)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        CHECK_MSG(0, "cannot write %s", path);
        return;
    }
    uint64_t n64 = n;
    fwrite("H5GDSEN1", 1, 8, f);
    fwrite(&n64, 8, 1, f);
    for (size_t i = 0; i < n; i++) {
        uint32_t m = mask[i];
        uint64_t size = enc[i].n;
        fwrite(&m, 4, 1, f);
        fwrite(&size, 8, 1, f);
        fwrite(enc[i].p, 1, enc[i].n, f);
    }
    fclose(f);
}

static void fixture_run(const char *dir, const char *name, const char *out, bool cpu)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.fx", dir, name);
    fixture_t x;
    if (!fixture_load(path, &x)) {
        CHECK_MSG(0, "cannot read fixture %s", path);
        fixture_free(&x);
        return;
    }
    size_t cb = x.p.chunk_bytes;
    char why[300];
    bool decodable = gds_codec_can_decode(&x.p, why, sizeof why);
    bool blosc = x.p.nfilters && x.p.filter[0].id == GDS_FILTER_BLOSC;
    if (!decodable) { /* blosc of blosclz: HDF5's CPU filter */
        CHECK_MSG(blosc && strstr(why, "blosclz"), "%s: cannot decode: %s", name, why);
        printf("%s fixture %-30s not decodable on the GPU: %s\n", blosc ? "ok   " : "FAIL ", name, why);
        fixture_free(&x);
        return;
    }
    /* decode */
    size_t diff = 0;
    int rc = 0;
    gds_status_t st = {0, ""};
    if (cpu) {
        for (size_t i = 0; i < x.n; i++) {
            bytes_t dec = {NULL, 0};
            if (!ref_decode(&x.p, x.mask[i], &x.stored[i], &dec) || dec.n != cb ||
                memcmp(dec.p, x.expected.p + i * cb, cb))
                diff++;
            free(dec.p);
        }
    }
    else {
        batch_t b = {0};
        b.n = x.n;
        b.data = calloc(x.n, sizeof *b.data);
        b.stored = calloc(x.n, sizeof *b.stored);
        b.mask = calloc(x.n, sizeof *b.mask);
        for (size_t i = 0; i < x.n; i++) {
            b.data[i] = bytes_new(cb);
            memcpy(b.data[i].p, x.expected.p + i * cb, cb);
            b.stored[i] = bytes_new(x.stored[i].n);
            memcpy(b.stored[i].p, x.stored[i].p, x.stored[i].n);
            b.mask[i] = x.mask[i];
        }
        batch_upload(&b, cb, false);
        size_t bad;
        rc = gds_codec_decode(codec, &x.p, b.chunks, b.n, stream, &bad, &st);
        diff = rc == 0 ? batch_compare(&b, cb, SIZE_MAX) : x.n;
        batch_free(&b);
    }
    CHECK_MSG(rc == 0 && diff == 0, "%s: %s decode: %zu chunks differ %s", name, cpu ? "CPU" : "GPU", diff, st.msg);
    printf("%s fixture %-30s %s decode of %zu chunks (HDF5 + hdf5plugin wrote them): %s\n",
           rc == 0 && diff == 0 ? "ok   " : "FAIL ", name, cpu ? "CPU" : "GPU", x.n,
           rc == 0 && diff == 0 ? "bit-identical" : st.msg);
    /* encode the data for h5_fixtures.py verify */
    if (gds_codec_can_encode(&x.p, why, sizeof why) && out) {
        bytes_t *enc = calloc(x.n, sizeof *enc);
        unsigned *mask = calloc(x.n, sizeof *mask);
        bool ok = true;
        if (cpu) {
            for (size_t i = 0; i < x.n && ok; i++) {
                bytes_t in = {x.expected.p + i * cb, cb};
                ok = ref_encode(&x.p, 0, &in, &enc[i]);
            }
        }
        else {
            size_t cap = gds_codec_max_encoded_bytes(&x.p);
            CUdeviceptr sbuf = dalloc(x.n * cb), dbuf = dalloc(x.n * cap);
            const void **src = calloc(x.n, sizeof *src);
            void **dst = calloc(x.n, sizeof *dst);
            size_t *ob = calloc(x.n, sizeof *ob);
            GPU_OK(cu->MemcpyHtoD(sbuf, x.expected.p, x.n * cb));
            for (size_t i = 0; i < x.n; i++) {
                src[i] = (const void *)(uintptr_t)(sbuf + i * cb);
                dst[i] = (void *)(uintptr_t)(dbuf + i * cap);
            }
            ok = gds_codec_encode(codec, &x.p, src, dst, ob, mask, x.n, stream, &st) == 0;
            CHECK_MSG(ok, "%s: GPU encode: %s", name, st.msg);
            for (size_t i = 0; ok && i < x.n; i++) {
                enc[i] = bytes_new(ob[i]);
                GPU_OK(cu->MemcpyDtoH(enc[i].p, (CUdeviceptr)(uintptr_t)dst[i], ob[i]));
            }
            free(src);
            free(dst);
            free(ob);
            cu->MemFree(sbuf);
            cu->MemFree(dbuf);
        }
        if (ok) {
            snprintf(path, sizeof path, "%s/%s.%s.enc", out, name, cpu ? "cpu" : "gpu");
            write_encoded(path, x.n, enc, mask);
        }
        for (size_t i = 0; i < x.n; i++)
            free(enc[i].p);
        free(enc);
        free(mask);
    }
    fixture_free(&x);
}

static void fixtures(const char *dir, const char *out, bool cpu)
{
    static const char *const names[] = {
        "deflate6_shuffle_f32", "deflate4_shuffle_fletcher_f32", "deflate1_u8",       "deflate9_big_f32",
        "fletcher_i32",         "shuffle_f64",                   "zstd3_i32",         "zstd_shuffle_f32",
        "lz4_u8",               "lz4_64k_mixed",                 "bslz4_f32",         "bszstd_f64",
        "bslz4_u16_1024",       "bitshuffle_plain_i32",          "masked_deflate_f32", "fletcher_swapped_i32",
        "blosc_lz4_f32",        "blosc_lz4hc_bitshuffle_u16",    "blosc_zstd_f64",    "blosc_memcpyed_i32",
        "blosc_blosclz_f32"};
    if (out)
        mkdir(out, 0755);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        fixture_run(dir, names[i], out, cpu);
}

/* ---- throughput ---- */

static void bench_one(const char *name, const gds_codec_pipeline_t *p, data_kind_t kind, size_t total_mib)
{
    size_t n = (total_mib << 20) / p->chunk_bytes;
    batch_t b;
    double t0 = now();
    if (!batch_make(&b, p, kind, n, NULL)) {
        printf("skip  bench %s\n", name);
        batch_free(&b);
        return;
    }
    double t_cpu = now() - t0;
    batch_upload(&b, p->chunk_bytes, false);
    size_t stored = 0;
    for (size_t i = 0; i < n; i++)
        stored += b.stored[i].n;
    gds_status_t st = {0, ""};
    size_t bad;
    double best = 1e30;
    int rc = 0;
    for (int r = 0; r < 4 && rc == 0; r++) { /* the first one warms up (allocations) */
        double t = now();
        rc = gds_codec_decode(codec, p, b.chunks, n, stream, &bad, &st);
        t = now() - t;
        if (r > 0 && t < best)
            best = t;
    }
    CHECK_MSG(rc == 0, "bench %s: %s", name, st.msg);
    CHECK(rc != 0 || batch_compare(&b, p->chunk_bytes, SIZE_MAX) == 0);
    /* encode */
    size_t cap = gds_codec_max_encoded_bytes(p);
    CUdeviceptr ebuf = dalloc(n * cap);
    const void **src = calloc(n, sizeof *src);
    void **dst = calloc(n, sizeof *dst);
    size_t *ob = calloc(n, sizeof *ob);
    unsigned *om = calloc(n, sizeof *om);
    for (size_t i = 0; i < n; i++) {
        src[i] = b.chunks[i].dst;
        dst[i] = (void *)(uintptr_t)(ebuf + i * cap);
    }
    double ebest = 1e30;
    size_t enc_total = 0;
    for (int r = 0; r < 3 && rc == 0 && gds_codec_can_encode(p, NULL, 0); r++) {
        double t = now();
        rc = gds_codec_encode(codec, p, src, dst, ob, om, n, stream, &st);
        t = now() - t;
        if (r > 0 && t < ebest)
            ebest = t;
    }
    for (size_t i = 0; i < n; i++)
        enc_total += ob[i];
    CHECK_MSG(rc == 0, "bench %s encode: %s", name, st.msg);
    double gb = (double)(n * p->chunk_bytes) / 1e9;
    printf("bench %-28s %4zu x %7zu B: decode %6.1f GB/s, encode %6.1f GB/s (of decoded bytes); ratio CPU %.2f, "
           "GPU %.2f; CPU reference encode, 16 threads: %.2f GB/s\n",
           name, n, p->chunk_bytes, gb / best, ebest < 1e30 ? gb / ebest : 0.0,
           (double)(n * p->chunk_bytes) / (double)stored,
           enc_total ? (double)(n * p->chunk_bytes) / (double)enc_total : 0.0, gb / t_cpu);
    free(src);
    free(dst);
    free(ob);
    free(om);
    cu->MemFree(ebuf);
    batch_free(&b);
}

static void bench(size_t mib)
{
    gds_codec_pipeline_t p;
    const size_t MB = 1 << 20;
    const unsigned bs_lz4[] = {0, 4, 4, 0, 2}, bs_zstd[] = {0, 4, 4, 0, 3, 1};
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    bench_one("shuffle+deflate4 f32", &p, DATA_FLOAT_FIELD, mib);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    bench_one("shuffle+deflate4+fletcher32", &p, DATA_FLOAT_FIELD, mib);
    p = pipe_new(MB, 1);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    bench_one("deflate4 u8 image", &p, DATA_IMAGE_U8, mib);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    bench_one("zstd3 f32", &p, DATA_FLOAT_FIELD, mib);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    bench_one("shuffle+zstd3 f32", &p, DATA_FLOAT_FIELD, mib);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_LZ4, OPT, 1, CD0);
    bench_one("lz4 f32", &p, DATA_FLOAT_FIELD, mib);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4);
    bench_one("bitshuffle+lz4 f32", &p, DATA_FLOAT_FIELD, mib);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 6, bs_zstd);
    bench_one("bitshuffle+zstd f32", &p, DATA_FLOAT_FIELD, mib);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    bench_one("zstd3 sparse int32", &p, DATA_SPARSE_INT, mib);
    p = pipe_new(4 * MB, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    bench_one("shuffle+deflate4 f32 4 MiB", &p, DATA_FLOAT_FIELD, mib);
}

int main(int argc, char **argv)
{
    const char *fixture_dir = NULL, *out = NULL;
    bool cpu = false, hostile = false;
    int hostile_case = -1;
    size_t bench_mib = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fixtures") && i + 1 < argc)
            fixture_dir = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--cpu"))
            cpu = true;
        else if (!strcmp(argv[i], "--require"))
            require_gpu = true;
        else if (!strcmp(argv[i], "--hostile"))
            hostile = true;
        else if (!strcmp(argv[i], "--hostile-case") && i + 1 < argc)
            hostile_case = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bench"))
            bench_mib = i + 1 < argc && atoi(argv[i + 1]) > 0 ? (size_t)atoi(argv[++i]) : 256;
        else {
            fprintf(stderr, "usage: %s [--require] [--hostile | --hostile-case N | --fixtures DIR [--cpu] [--out DIR] | --bench [MiB]]\n",
                    argv[0]);
            return 2;
        }
    }
    ref_load();
    printf("CPU references: zlib %s, zstd %s, lz4 %s\n", ref.z ? "yes" : "NO", ref.zstd ? "yes" : "NO",
           ref.lz4 ? "yes" : "NO");
    if (fixture_dir && cpu) {
        fixtures(fixture_dir, out ? out : fixture_dir, true);
        return test_finish("test_codec_gpu (fixtures, CPU references)");
    }
    const char *why = NULL;
    char name[128] = "";
    if (hostile_case >= 0) /* one case in this process (compute-sanitizer follows it) */
        return hostile_one(hostile_case);
    if (hostile) { /* only the children use CUDA (a CUDA process must not fork) */
        if (hostile_tests() == 0) {
            printf("SKIP: no GPU or no nvCOMP\n");
            return require_gpu ? 1 : 77;
        }
        return test_finish("test_codec_gpu --hostile");
    }
    if (!gds_cuda_use_device(0, name, sizeof name, &why)) {
        printf("SKIP: no GPU: %s\n", why);
        return require_gpu ? 1 : 77;
    }
    cu = gds_cuda_load(NULL);
    gds_status_t st = {0, ""};
    double t = now();
    if (gds_codec_open(&codec, NULL, &st) < 0) {
        printf("SKIP: GPU codec unavailable on %s: %s\n", name, st.msg);
        return require_gpu ? 1 : 77;
    }
    printf("GPU %s: codec opened in %.3f s: %s\n", name, now() - t, gds_codec_describe(codec));
    t = now();
    gds_codec_t *second = NULL;
    CHECK(gds_codec_open(&second, NULL, &st) == 0); /* the compiled kernels are cached per process */
    printf("second open (kernels cached): %.3f s\n", now() - t);
    gds_codec_close(second);
    GPU_OK(cu->StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    if (fixture_dir)
        fixtures(fixture_dir, out, false);
    else if (!bench_mib)
        self_tests();
    if (bench_mib)
        bench(bench_mib);
    gds_codec_close(codec);
    cu->StreamDestroy(stream);
    return test_finish("test_codec_gpu");
}
