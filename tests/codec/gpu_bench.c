/*
 * test_codec_gpu --bench [MiB]: decode and encode throughput, chunks in
 * device memory. --widths [N]: the decode time of batches of 1 .. N whole
 * 1 MiB chunks, and of N chunks as two or four batches decoded at once
 * (a codec and a stream each), to size the reads' batches.
 * --bench-deflate [MiB]: Deflate alone, at the piece size
 * H5GDS_DEFLATE_PIECE_KIB sets (run it once per size to compare).
 */
#include <pthread.h>
#include <string.h>

#include "codec_shared.h"
#include "gpu_test_common.h"

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

/* nvCOMP's zstd compression by the size of what it compresses: a chunk of
 * plain zstd is one input, a bitshuffle chunk one input per block (nelems
 * elements), a blosc chunk one per block. */
static void bench_zstd_sizes(size_t mib)
{
    const size_t KB = 1 << 10;
    const size_t sizes[] = {8 * KB, 32 * KB, 64 * KB, 128 * KB, 256 * KB, 1024 * KB};
    char name[64];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        gds_codec_pipeline_t p = pipe_new(sizes[i] < 256 * KB ? 1024 * KB : sizes[i], 4);
        if (sizes[i] < 256 * KB) { /* bitshuffle blocks of this size inside 1 MiB chunks */
            const unsigned bs[] = {0, 4, 4, (unsigned)(sizes[i] / 4), 3, 3};
            pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 6, bs);
            snprintf(name, sizeof name, "bitshuffle+zstd %zu KiB blocks", sizes[i] / KB);
        } else {
            pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
            snprintf(name, sizeof name, "zstd3 %zu KiB chunks", sizes[i] / KB);
        }
        bench_one(name, &p, DATA_FLOAT_FIELD, mib);
    }
    gds_codec_pipeline_t p = pipe_new(128 * KB, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    bench_one("zstd3 128 KiB chunks", &p, DATA_FLOAT_FIELD, mib);
    p = pipe_new(64 * KB, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    bench_one("zstd3 64 KiB chunks", &p, DATA_FLOAT_FIELD, mib);
    p = pipe_new(GDS_ZSTD_PIECE_MIN, 4); /* one piece a chunk: nvCOMP alone, nothing spliced */
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD1);
    bench_one("zstd1 32 KiB chunks (no splice)", &p, DATA_FLOAT_FIELD, mib);
    /* the level's pieces: 32 KiB up to level 2, 64 KiB to 5, 128 KiB from 6 */
    const unsigned *levels[] = {CD1, CD3, CD8};
    const char *names[] = {"zstd1 f32 (32 KiB pieces)", "zstd3 f32 (64 KiB pieces)", "zstd8 f32 (128 KiB pieces)"};
    for (int k = 0; k < 3; k++) {
        p = pipe_new(1024 * KB, 4);
        pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, levels[k]);
        bench_one(names[k], &p, DATA_FLOAT_FIELD, mib * 4);
    }
}

/* A Deflate pipeline (with shuffle of elem-byte elements before it where
 * elem > 1) of chunk-byte chunks at the level cd gives, benched. */
static void bench_deflate_one(const char *name, size_t chunk, unsigned elem, const unsigned *cd, data_kind_t kind,
                              size_t mib)
{
    gds_codec_pipeline_t p = pipe_new(chunk, elem);
    if (elem > 1)
        pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, cd);
    bench_one(name, &p, kind, mib);
}

void bench(size_t mib)
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
    bench_deflate_one("deflate4 u8 image", MB, 1, CD4, DATA_IMAGE_U8, mib);
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
    const unsigned blosc_shuf[] = {2, 2, 4, 0, 5, 1, 1}, blosc_bit[] = {2, 2, 4, 0, 5, 2, 1};
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, blosc_shuf);
    bench_one("blosc lz4 shuffle f32", &p, DATA_FLOAT_FIELD, mib);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, blosc_bit);
    bench_one("blosc lz4 bitshuffle f32", &p, DATA_FLOAT_FIELD, mib);
    bench_deflate_one("shuffle+deflate4 f32 4 MiB", 4 * MB, 4, CD4, DATA_FLOAT_FIELD, mib);
    bench_zstd_sizes(mib / 4 ? mib / 4 : 1);
}

void bench_deflate(size_t mib)
{
    const size_t MB = 1 << 20;
    printf("Deflate pieces: %zu B (0: chunks whole)\n", gds_codec_deflate_piece());
    bench_deflate_one("shuffle+deflate4 f32", MB, 4, CD4, DATA_FLOAT_FIELD, mib);
    bench_deflate_one("shuffle+deflate1 f32", MB, 4, CD1, DATA_FLOAT_FIELD, mib);
    bench_deflate_one("deflate4 u8 image", MB, 1, CD4, DATA_IMAGE_U8, mib);
    bench_deflate_one("shuffle+deflate4 f32 4 MiB", 4 * MB, 4, CD4, DATA_FLOAT_FIELD, mib);
}

/* ---- decode time by batch width, and two batches decoded at once ---- */

typedef struct lane {
    gds_codec_t *codec;
    CUstream stream;
    const gds_codec_pipeline_t *p;
    const gds_codec_chunk_t *chunks;
    size_t n;
    int rc;
    gds_status_t st;
} lane_t;

static void *lane_run(void *arg)
{
    lane_t *l = arg;
    size_t bad;
    l->rc = gds_codec_decode(l->codec, l->p, l->chunks, l->n, l->stream, &bad, &l->st);
    return NULL;
}

/* Best of three timed calls (after one untimed) of `lanes` decodes at once,
 * each of n / lanes chunks on a codec and stream of its own. */
static double lanes_seconds(lane_t *lane, int lanes, const gds_codec_pipeline_t *p, const batch_t *b, size_t n)
{
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        pthread_t t[4];
        double t0 = now();
        for (int i = 0; i < lanes; i++) {
            lane[i].p = p;
            lane[i].chunks = b->chunks + i * (n / lanes);
            lane[i].n = n / lanes;
            pthread_create(&t[i], NULL, lane_run, &lane[i]);
        }
        for (int i = 0; i < lanes; i++)
            pthread_join(t[i], NULL);
        double dt = now() - t0;
        for (int i = 0; i < lanes; i++)
            CHECK_MSG(lane[i].rc == 0, "lanes: %s", lane[i].st.msg);
        if (r > 0 && dt < best)
            best = dt;
    }
    return best;
}

static void widths_one(const char *name, const gds_codec_pipeline_t *p, data_kind_t kind, size_t n, lane_t *lane)
{
    batch_t b;
    if (!batch_make(&b, p, kind, n, NULL)) {
        printf("skip  widths %s\n", name);
        batch_free(&b);
        return;
    }
    batch_upload(&b, p->chunk_bytes, false);
    for (size_t w = 1; w <= n; w *= 2) {
        double s = lanes_seconds(lane, 1, p, &b, w);
        printf("widths %-24s lanes 1 width %5zu: %8.2f ms, %6.1f GB/s\n", name, w, 1e3 * s,
               (double)(w * p->chunk_bytes) / s / 1e9);
    }
    for (int lanes = 2; lanes <= 4; lanes *= 2) {
        double s = lanes_seconds(lane, lanes, p, &b, n);
        printf("widths %-24s lanes %d width %5zu: %8.2f ms, %6.1f GB/s\n", name, lanes, n / lanes, 1e3 * s,
               (double)(n * p->chunk_bytes) / s / 1e9);
    }
    CHECK(batch_compare(&b, p->chunk_bytes, SIZE_MAX) == 0);
    batch_free(&b);
}

void widths(size_t nchunks)
{
    lane_t lane[4];
    memset(lane, 0, sizeof lane);
    lane[0].codec = codec;
    lane[0].stream = stream;
    for (int i = 1; i < 4; i++) {
        gds_status_t st = {0, ""};
        CHECK_MSG(gds_codec_open(&lane[i].codec, NULL, &st) == 0, "second codec: %s", st.msg);
        GPU_OK(cu->StreamCreate(&lane[i].stream, CU_STREAM_NON_BLOCKING));
    }
    const size_t MB = 1 << 20, n = nchunks < 4 ? 4 : nchunks / 4 * 4; /* every chunk in one of four lanes */
    const unsigned bs_lz4[] = {0, 4, 4, 0, 2}, blosc_shuf[] = {2, 2, 4, 0, 5, 1, 1};
    gds_codec_pipeline_t p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    widths_one("shuffle+deflate4 f32", &p, DATA_FLOAT_FIELD, n, lane);
    p = pipe_new(MB, 1);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD4);
    widths_one("deflate4 u8 image", &p, DATA_IMAGE_U8, n, lane);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    widths_one("zstd3 f32", &p, DATA_FLOAT_FIELD, n, lane);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_LZ4, OPT, 1, CD0);
    widths_one("lz4 f32", &p, DATA_FLOAT_FIELD, n, lane);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4);
    widths_one("bitshuffle+lz4 f32", &p, DATA_FLOAT_FIELD, n, lane);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, blosc_shuf);
    widths_one("blosc lz4 shuffle f32", &p, DATA_FLOAT_FIELD, n, lane);
    for (int i = 1; i < 4; i++) {
        gds_codec_close(lane[i].codec);
        cu->StreamDestroy(lane[i].stream);
    }
}
