/*
 * test_codec_gpu's round trips of every filter: realistic data encoded on
 * the CPU with each filter's reference framing (codec_ref.h), decoded on the
 * GPU and compared bit for bit; GPU-encoded, then decoded on the CPU and on
 * the GPU.
 */
#include <errno.h>
#include <string.h>

#include "gpu_test_common.h"

#include "codec_shared.h"

static const char *kind_name(data_kind_t k)
{
    static const char *const names[] = {"float field", "image u8",     "sparse int32",
                                        "random bytes", "double field", "image, half random"};
    return (size_t)k < sizeof names / sizeof *names ? names[k] : "?";
}

/* ---- memory pressure: the codec's calls with little free device memory ---- */

/* While set, decode_case's and encode_case's codec calls run with the
 * device's free memory cut to about this many bytes (the rest held by a
 * block taken just before the call and freed right after). */
static size_t squeeze_to;
/* While set, encode_case accepts a clean failure for want of memory
 * (ENOMEM, the caller's cue to take HDF5's filters instead). */
static bool oom_ok;

static CUdeviceptr squeeze_begin(void)
{
    size_t free_bytes = 0, total = 0;
    CUdeviceptr hog = 0;
    if (!squeeze_to || cu->MemGetInfo(&free_bytes, &total) != CUDA_SUCCESS || free_bytes <= squeeze_to)
        return 0;
    for (size_t take = free_bytes - squeeze_to; take > ((size_t)64 << 20); take -= (size_t)64 << 20)
        if (cu->MemAlloc(&hog, take) == CUDA_SUCCESS)
            return hog;
    return 0;
}

static void squeeze_end(CUdeviceptr hog)
{
    if (hog)
        GPU_OK(cu->MemFree(hog));
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
    CUdeviceptr hog = squeeze_begin();
    int rc = gds_codec_decode(codec, p, b.chunks, n, stream, &bad, &st);
    squeeze_end(hog);
    CHECK_MSG(rc == 0, "%s: %s", name, st.msg);
    size_t diff = rc == 0 ? batch_compare(&b, p->chunk_bytes, SIZE_MAX) : n;
    CHECK_MSG(diff == 0, "%s: %zu chunks differ", name, diff);
    printf("%s decode %-34s %zu x %zu B of %s, ratio %.2f\n", rc == 0 && diff == 0 ? "ok   " : "FAIL ", name, n,
           p->chunk_bytes, kind_name(kind), (double)(n * p->chunk_bytes) / (double)stored);
    batch_free(&b);
}

/* ---- encode: GPU -> CPU reference decoding, and GPU decoding ---- */

/* A GPU-encoded blosc chunk (a pipeline of blosc alone) as the encoder
 * writes it: c-blosc 1.x's header (version 2, LZ4's or zstd's format, the typesize,
 * the chunk's size, cbytes the stored size); random data, clevel 0 and
 * chunks under 128 bytes MEMCPYED (or the optional filter skipped), sparse
 * labels compressed. */
static bool blosc_frame_ok(const gds_codec_pipeline_t *p, CUdeviceptr enc, size_t bytes, unsigned mask,
                           data_kind_t kind)
{
    size_t nbytes = p->chunk_bytes;
    if (mask)
        return mask == 1 && bytes == nbytes && (p->filter[0].flags & OPT) && kind != DATA_SPARSE_INT;
    unsigned char h[16];
    if (bytes < 16)
        return false;
    GPU_OK(cu->MemcpyDtoH(h, enc, 16));
    unsigned ts = p->filter[0].cd[2] && p->filter[0].cd[2] <= 255 ? p->filter[0].cd[2] : 1;
    bool memcpyed = (h[2] & GDS_BLOSC_MEMCPYED) != 0;
    unsigned format = p->filter[0].cd[6] == 5 /* c-blosc's zstd */ ? GDS_BLOSC_FORMAT_ZSTD : GDS_BLOSC_FORMAT_LZ4;
    bool ok = h[0] == 2 && h[1] == 1 && h[2] >> 5 == format && h[3] == ts && get_le32(h + 4) == nbytes &&
              get_le32(h + 12) == bytes && get_le32(h + 8) <= nbytes;
    if (kind == DATA_RANDOM || nbytes < 128 || p->filter[0].cd[4] == 0)
        ok = ok && memcpyed && bytes == nbytes + 16;
    else if (kind == DATA_SPARSE_INT)
        ok = ok && !memcpyed && bytes < nbytes;
    if (!ok)
        fprintf(stderr, "  blosc frame: header %02x %02x %02x %02x, nbytes %u, blocksize %u, cbytes %u; %zu B\n", h[0],
                h[1], h[2], h[3], get_le32(h + 4), get_le32(h + 8), get_le32(h + 12), bytes);
    return ok;
}

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
    GPU_OK(cu->CtxSynchronize()); /* the pageable copies' DMA landed (batch_upload says why) */
    gds_status_t st = {0, ""};
    CUdeviceptr hog = squeeze_begin();
    int rc = gds_codec_encode(codec, p, src, dst, out_bytes, out_mask, n, stream, &st);
    squeeze_end(hog);
    if (rc < 0 && oom_ok) {
        CHECK_MSG(st.err == ENOMEM, "%s: failed, not for want of memory: %s", name, st.msg);
        printf("%s encode %-34s failed for want of memory: %s\n", st.err == ENOMEM ? "ok   " : "FAIL ", name, st.msg);
        rc = 1; /* nothing more to check */
    }
    else
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
    size_t bad_frame = 0;
    for (size_t i = 0; rc == 0 && p->nfilters == 1 && p->filter[0].id == GDS_FILTER_BLOSC && i < n; i++)
        bad_frame += !blosc_frame_ok(p, (CUdeviceptr)(uintptr_t)dst[i], out_bytes[i], out_mask[i], kind);
    CHECK_MSG(bad_frame == 0, "%s: %zu blosc frames not as expected", name, bad_frame);
    if (expect_skipped)
        CHECK_MSG(skipped == n, "%s: %zu of %zu chunks with the optional filter skipped", name, skipped, n);
    /* Deflate (level 1 and up) of data that compresses: smaller than stored
     * blocks, so its pieces were joined, not stored */
    bool deflates = false;
    for (size_t k = 0; k < p->nfilters; k++)
        deflates |= p->filter[k].id == GDS_FILTER_DEFLATE && p->filter[k].ncd > 0 && p->filter[k].cd[0] > 0;
    if (rc == 0 && deflates && kind != DATA_RANDOM && kind != DATA_MIXED)
        CHECK_MSG((double)total < 0.95 * (double)(n * p->chunk_bytes), "%s: Deflate stored %zu of %zu bytes", name,
                  total, n * p->chunk_bytes);
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
    if (rc <= 0)
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

/* The read batches the codec asks for (gds_codec_read_batch_chunks) with
 * its real memory budget: one stream per chunk, the widest one sub-batch
 * holds; bitshuffle, 128 MiB from the page cache, 512 from a disk; Blosc
 * one sub-batch from the page cache, 512 from a disk; and decoding that many and one more (two
 * sub-batches of one size) gives the data back. */
static void read_batch_cases(void)
{
    const size_t MB = 1 << 20;
    const unsigned bs_lz4[] = {0, 4, 4, 0, 2};
    gds_codec_pipeline_t p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    size_t deflate = gds_codec_read_batch_chunks(codec, &p, MB + 1024, 512, true);
    CHECK_MSG(deflate >= 256 && deflate <= 512, "shuffle+deflate: %zu chunks per read batch", deflate);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    size_t zstd = gds_codec_read_batch_chunks(codec, &p, MB + 1024, 512, true);
    CHECK_MSG(zstd >= 64 && zstd <= 512, "zstd: %zu chunks per read batch", zstd);
    CHECK(gds_codec_read_batch_chunks(codec, &p, MB + 1024, 3, true) == 3);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4);
    CHECK(gds_codec_read_batch_chunks(codec, &p, MB + 1024, 512, true) == 128);
    CHECK(gds_codec_read_batch_chunks(codec, &p, MB + 1024, 512, false) == 512);
    const unsigned blosc_lz4[] = {2, 2, 4, 0, 5, 1, 1};
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, blosc_lz4);
    size_t blosc = gds_codec_read_batch_chunks(codec, &p, MB + 1024, 512, true);
    CHECK_MSG(blosc >= 64 && blosc <= 512, "blosc: %zu chunks per read batch from the page cache", blosc);
    CHECK(gds_codec_read_batch_chunks(codec, &p, MB + 1024, 512, false) == 512);
    p = pipe_new(64 * 1024, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    size_t n = gds_codec_read_batch_chunks(codec, &p, 70000, 8192, false);
    CHECK_MSG(n >= 256 && n <= 8192, "zstd 64 KiB: %zu chunks per read batch", n);
    decode_case("zstd3 64 KiB, a read batch and one more", &p, DATA_FLOAT_FIELD, n + 1, NULL);
}

/* The write batches the codec asks for (gds_codec_write_batch_chunks):
 * Deflate, one stream a chunk (chunks of one piece, or 1 MiB where chunks
 * are compressed whole), as many as one sub-batch holds (at least 128
 * within the default 2 GiB); compressors of many streams a chunk (Deflate's
 * 1 MiB chunks in pieces among them) and Deflate's stored blocks (level 0,
 * no nvCOMP) 0, the writer's own. Then encoding that many and one more (one or two
 * sub-batches, by the device's free memory) after reserving their memory
 * (gds_codec_encode_reserve), the memory given back (gds_codec_trim), and
 * an encode after. */
static void write_batch_cases(void)
{
    const size_t MB = 1 << 20;
    gds_codec_pipeline_t p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    gds_status_t st;
    size_t piece = gds_codec_deflate_piece();
    if (piece && piece < MB) { /* 1 MiB chunks in pieces: many streams, the writer's own batches */
        CHECK(gds_codec_write_batch_chunks(codec, &p, 512) == 0);
        CHECK_MSG(gds_codec_encode_reserve(codec, &p, 257, &st) == 0, "reserving 257 chunks: %s", st.msg);
        encode_case("shuffle+deflate4 in pieces, 257 chunks", &p, DATA_FLOAT_FIELD, 257, false);
        gds_codec_trim(codec);
        p = pipe_new(piece, 4); /* chunks of one piece: one stream each */
        pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
        pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    }
    size_t cap = piece && piece < MB ? 4096 : 512, lo = 128;
    size_t deflate = gds_codec_write_batch_chunks(codec, &p, cap);
    CHECK_MSG(deflate >= lo && deflate <= cap, "shuffle+deflate %zu B chunks: %zu per write batch", p.chunk_bytes,
              deflate);
    CHECK(gds_codec_write_batch_chunks(codec, &p, 3) == 3);
    CHECK_MSG(gds_codec_encode_reserve(codec, &p, deflate + 1, &st) == 0, "reserving %zu chunks: %s", deflate + 1,
              st.msg);
    if (deflate >= lo && deflate <= cap)
        encode_case("shuffle+deflate4, a write batch and one more", &p, DATA_FLOAT_FIELD, deflate + 1, false);
    gds_codec_trim(codec);
    encode_case("shuffle+deflate4 after the memory was given back", &p, DATA_FLOAT_FIELD, 8, false);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    CHECK(gds_codec_write_batch_chunks(codec, &p, 512) == 0);
    const unsigned bs_lz4[] = {0, 4, 4, 0, 2};
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4);
    CHECK(gds_codec_write_batch_chunks(codec, &p, 512) == 0);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_DEFLATE, 0, 1, CD0);
    CHECK(gds_codec_write_batch_chunks(codec, &p, 512) == 0);
}

/* A fresh codec (it holds no memory yet) decoding and encoding with about
 * 96 MiB of the device free: 96 chunks of 1 MiB need more at once
 * (arenas, nvCOMP's scratch: Deflate's compressor about 12 MB a chunk), so
 * the sub-batches are narrowed (gds_codec_narrowed counts it) and the data
 * still comes back whole; zstd's compressor, whose scratch may not fit even
 * for one chunk, succeeds or fails cleanly with ENOMEM; then a trim lifts
 * the lowered budget. First the same cases with the memory free: the
 * kernels' launches size the context's local memory. */
void pressure_tests(void)
{
    const size_t MB = 1 << 20;
    /* the checks below are of the default budget: a budget set from the
     * environment (the width runs set one) caps both sides of them */
    unsetenv("H5GDS_CODEC_TEMP_MIB");
    ref_load();
    gds_codec_pipeline_t w = pipe_new(MB, 4);
    pipe_add(&w, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&w, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    decode_case("shuffle+deflate4 (warm-up)", &w, DATA_FLOAT_FIELD, 4, NULL);
    encode_case("shuffle+deflate4 (warm-up)", &w, DATA_FLOAT_FIELD, 4, false);
    w = pipe_new(MB, 4);
    pipe_add(&w, GDS_FILTER_ZSTD, OPT, 1, CD3);
    encode_case("zstd3 (warm-up)", &w, DATA_FLOAT_FIELD, 4, false);

    gds_status_t st = {0, ""};
    gds_codec_t *keep = codec, *fresh = NULL;
    if (gds_codec_open(&fresh, NULL, &st) < 0) {
        CHECK_MSG(0, "a second codec: %s", st.msg);
        return;
    }
    codec = fresh;
    squeeze_to = 96 * MB;
    gds_codec_pipeline_t p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    unsigned long n0 = gds_codec_narrowed(fresh);
    decode_case("shuffle+deflate4, 96 MiB free", &p, DATA_FLOAT_FIELD, 96, NULL);
    unsigned long n1 = gds_codec_narrowed(fresh);
    CHECK_MSG(n1 > n0, "decode with 96 MiB free: narrowed %lu times", n1 - n0);
    encode_case("shuffle+deflate4, 96 MiB free", &p, DATA_FLOAT_FIELD, 96, false);
    unsigned long n2 = gds_codec_narrowed(fresh);
    CHECK_MSG(n2 > n1, "encode with 96 MiB free: narrowed %lu times", n2 - n1);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    oom_ok = true;
    encode_case("zstd3, 96 MiB free", &p, DATA_FLOAT_FIELD, 96, false);
    oom_ok = false;
    squeeze_to = 0;
    /* the budget seen through the Deflate write batch of chunks that are one
     * stream each (1 MiB, or a piece): at least 2 GiB after the trim */
    size_t piece = gds_codec_deflate_piece(), one = piece && piece < MB ? piece : MB;
    p = pipe_new(one, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    size_t squeezed = gds_codec_write_batch_chunks(fresh, &p, 65536);
    gds_codec_trim(fresh);
    size_t after = gds_codec_write_batch_chunks(fresh, &p, 65536);
    CHECK_MSG(squeezed < after && after >= 128,
              "Deflate write batch of %zu B chunks: %zu under pressure, %zu after the trim", one, squeezed, after);
    printf("      pressure: %lu sub-batches narrowed\n", gds_codec_narrowed(fresh) - n0);
    codec = keep;
    gds_codec_close(fresh);
    /* and the other codec decodes right afterwards (the first decode after
     * the failed zstd encode once read its chunks before their upload had
     * landed: the tests now wait for their uploads, gpu_test_common.c) */
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    decode_case("shuffle+deflate6 after the pressure", &p, DATA_FLOAT_FIELD, 6, NULL);
    decode_case("shuffle+deflate6 after the pressure, again", &p, DATA_FLOAT_FIELD, 6, NULL);
}

void roundtrip_tests(void)
{
    gds_codec_pipeline_t p;
    const size_t MB = 1 << 20;
    ref_load(); /* this file's copy of codec_ref.h's table (a static): encode_case's CPU decoding */

    read_batch_cases();
    write_batch_cases();

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
    /* chunks of fewer than 8 elements: no block to compress, all leftover
     * (nvCOMP is not called: it refuses an empty batch) */
    p = pipe_new(5 * 8, 8);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 6, bs_zstd);
    decode_case("bitshuffle+zstd 5 f64 (leftover only)", &p, DATA_DOUBLE_FIELD, 7, NULL);
    p = pipe_new(3 * 4, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4);
    decode_case("bitshuffle+lz4 3 f32 (leftover only)", &p, DATA_FLOAT_FIELD, 5, NULL);
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
    p = pipe_new(MB + 4097, 1); /* pieces joined beside pieces stored, a short last one */
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    encode_case("deflate6 1 MiB + 4097 half random", &p, DATA_MIXED, 6, false);
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
    /* zstd chunks over a piece (32-128 KiB by the level): pieces spliced
     * into one frame (zstd_splice.h) */
    p = pipe_new(gds_codec_zstd_piece(1) + 1, 1);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD1);
    encode_case("zstd1 32 KiB + 1 (a 1-byte last piece)", &p, DATA_IMAGE_U8, 6, false);
    p = pipe_new(gds_codec_zstd_piece(3), 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    encode_case("zstd3 64 KiB (one piece)", &p, DATA_SPARSE_INT, 6, false);
    p = pipe_new(3 * gds_codec_zstd_piece(8) - 4, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD8);
    encode_case("zstd8 384 KiB - 4 (128 KiB pieces)", &p, DATA_FLOAT_FIELD, 6, false);
    p = pipe_new(64 * 1024, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    encode_case("zstd 64 KiB sparse (repeat offsets)", &p, DATA_SPARSE_INT, 40, false);
    p = pipe_new(MB, 1);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    encode_case("zstd 1 MiB image", &p, DATA_IMAGE_U8, 8, false);
    p = pipe_new(4 * MB + 8, 8);
    pipe_add(&p, GDS_FILTER_ZSTD, 0, 1, CD3);
    encode_case("zstd 4 MiB + 8 double field", &p, DATA_DOUBLE_FIELD, 3, false);
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
    p = pipe_new(5 * 8, 8); /* fewer than 8 elements: nothing for nvCOMP */
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 0, 6, bs_zstd);
    encode_case("bitshuffle+zstd 5 f64 (leftover only)", &p, DATA_DOUBLE_FIELD, 6, false);
    p = pipe_new(7 * 4, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 0, 5, bs_lz4);
    encode_case("bitshuffle+lz4 7 f32 (leftover only)", &p, DATA_FLOAT_FIELD, 3, false);
    p = pipe_new(300 * 301 * 4, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 3, bs_plain);
    encode_case("bitshuffle (no compression)", &p, DATA_SPARSE_INT, 4, false);

    /* blosc lz4 / lz4hc: each shuffle, element sizes 1 to 17, chunks that
     * are no whole number of blocks (and of elements), incompressible data
     * (MEMCPYED when mandatory, skipped when optional), clevel 0, tiny
     * chunks, with filters before and after */
    const unsigned bl_lz4_none1[] = {2, 2, 1, 0, 5, 0, 1}, bl_lz4_bit4[] = {2, 2, 4, 0, 5, 2, 1};
    const unsigned bl_lz4_shuf4[] = {2, 2, 4, 0, 5, 1, 1}, bl_lz4_bit8[] = {2, 2, 8, 0, 9, 2, 1};
    const unsigned bl_lz4_shuf17[] = {2, 2, 17, 0, 5, 1, 1}, bl_lz4_bit3[] = {2, 2, 3, 0, 5, 2, 1};
    const unsigned bl_lz4_shuf8_c0[] = {2, 2, 8, 0, 0, 1, 1};
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf);
    encode_case("blosc lz4 shuffle f32", &p, DATA_FLOAT_FIELD, 8, false);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_bit4);
    encode_case("blosc lz4 bitshuffle i32", &p, DATA_SPARSE_INT, 8, false);
    p = pipe_new(640 * 480, 1);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_none1);
    encode_case("blosc lz4 noshuffle u8", &p, DATA_IMAGE_U8, 12, false);
    p = pipe_new(MB + 6 * 2048 + 2, 2); /* blocks of 128 KiB and a partial one of 12290 bytes */
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4hc_bit);
    encode_case("blosc lz4hc bitshuffle u16 partial", &p, DATA_IMAGE_U8, 5, false);
    p = pipe_new(333 * 61 * 8, 8);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_bit8);
    encode_case("blosc lz4 bitshuffle f64 partial", &p, DATA_DOUBLE_FIELD, 6, false);
    p = pipe_new(700001 * 4, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf4);
    encode_case("blosc lz4 shuffle i32 2.7 MiB", &p, DATA_SPARSE_INT, 3, false);
    p = pipe_new(5003 * 17, 17); /* typesize > 16: streams not split */
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf17);
    encode_case("blosc lz4 shuffle 17-byte elements", &p, DATA_SPARSE_INT, 4, false);
    p = pipe_new(3001 * 3, 3);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_bit3);
    encode_case("blosc lz4 bitshuffle 3-byte elements", &p, DATA_IMAGE_U8, 4, false);
    p = pipe_new(300000, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf4);
    encode_case("blosc lz4 random (skipped)", &p, DATA_RANDOM, 4, true);
    p = pipe_new(300000, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, 0, 7, bl_lz4_bit4);
    encode_case("blosc lz4 random, mandatory (memcpyed)", &p, DATA_RANDOM, 4, false);
    p = pipe_new(200000, 1);
    pipe_add(&p, GDS_FILTER_BLOSC, 0, 7, bl_lz4_1);
    encode_case("blosc lz4 random u8, mandatory", &p, DATA_RANDOM, 3, false);
    /* blosc zstd: whole blocks of up to 32 KiB, never split */
    const unsigned bl_zstd_shuf4[] = {2, 2, 4, 0, 5, 1, 5}, bl_zstd_bit3_c9[] = {2, 2, 3, 0, 9, 2, 5};
    const unsigned bl_zstd_none8[] = {2, 2, 8, 0, 1, 0, 5};
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_zstd_shuf4);
    encode_case("blosc zstd shuffle f32", &p, DATA_FLOAT_FIELD, 8, false);
    p = pipe_new(3001 * 3, 3);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_zstd_bit3_c9);
    encode_case("blosc zstd bitshuffle 3-byte elements", &p, DATA_IMAGE_U8, 4, false);
    p = pipe_new(333 * 61 * 8, 8);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_zstd_none8);
    encode_case("blosc zstd noshuffle f64 partial", &p, DATA_DOUBLE_FIELD, 6, false);
    p = pipe_new(300000, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, 0, 7, bl_zstd_shuf4);
    encode_case("blosc zstd random, mandatory (memcpyed)", &p, DATA_RANDOM, 4, false);
    p = pipe_new(700001 * 4, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_zstd_shuf4);
    encode_case("blosc zstd shuffle i32 2.7 MiB", &p, DATA_SPARSE_INT, 3, false);
    p = pipe_new(256 * 1024, 8);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf8_c0);
    encode_case("blosc lz4 clevel 0 (skipped)", &p, DATA_DOUBLE_FIELD, 3, true);
    p = pipe_new(256 * 1024, 8);
    pipe_add(&p, GDS_FILTER_BLOSC, 0, 7, bl_lz4_shuf8_c0);
    encode_case("blosc lz4 clevel 0, mandatory (memcpyed)", &p, DATA_DOUBLE_FIELD, 3, false);
    p = pipe_new(100, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, 0, 7, bl_lz4_shuf4);
    encode_case("blosc lz4 100-byte chunk (memcpyed)", &p, DATA_SPARSE_INT, 5, false);
    p = pipe_new(65536 * 8, 8); /* blosc sees 4 bytes more: half an element after the last whole one */
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf8);
    encode_case("fletcher32+blosc lz4 shuffle f64", &p, DATA_DOUBLE_FIELD, 6, false);
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_bit4);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    encode_case("shuffle+blosc lz4 bitshuffle+fletcher32", &p, DATA_FLOAT_FIELD, 8, false);

}
