/*
 * test_codec_gpu --fixtures DIR [--cpu] [--out DIR]: the chunks h5py +
 * hdf5plugin wrote (tests/codec/h5_fixtures.py make DIR), decoded on the GPU
 * (--cpu: with the CPU references) and compared with what HDF5 read; their
 * data encoded into OUT/<name>.<gpu|cpu>.enc for h5_fixtures.py verify
 * (--cpu, blosc: also by the GPU encoder's code run on the host, into
 * OUT/<name>.model.enc: hdf5plugin's c-blosc reads its frames without a GPU).
 */
#include <string.h>
#include <sys/stat.h>

#include "gpu_test_common.h"

#include "blosc_encode_model.h"

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
            GPU_OK(cu->CtxSynchronize()); /* the pageable copy's DMA landed (batch_upload says why) */
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
        /* the GPU's blosc frames, made on the host (the model compresses
         * with liblz4: blosc's zstd frames are the GPU test's) */
        gds_codec_step_t bs;
        if (cpu && blosc && blosc_encode_step(&x.p, &bs) && !gds_step_compresses_zstd(&bs)) {
            size_t raw;
            for (size_t i = 0; i < x.n && ok; i++) {
                bytes_t in = {x.expected.p + i * cb, cb};
                int how = blosc_encode_model(&bs, &in, false, &enc[i], &raw);
                CHECK_MSG(how >= 0, "%s: chunk %zu: the blosc encoder's model failed", name, i);
                mask[i] = how == GDS_BLOSC_STORE_SKIPPED ? 1 : 0;
                ok = how >= 0;
            }
            if (ok) {
                snprintf(path, sizeof path, "%s/%s.model.enc", out, name);
                write_encoded(path, x.n, enc, mask);
            }
            for (size_t i = 0; i < x.n; i++)
                free(enc[i].p);
        }
        free(enc);
        free(mask);
    }
    fixture_free(&x);
}

void fixtures(const char *dir, const char *out, bool cpu)
{
    static const char *const names[] = {
        "deflate6_shuffle_f32", "deflate4_shuffle_fletcher_f32", "deflate1_u8",       "deflate9_big_f32",
        "fletcher_i32",         "shuffle_f64",                   "zstd3_i32",         "zstd_shuffle_f32",
        "lz4_u8",               "lz4_64k_mixed",                 "bslz4_f32",         "bszstd_f64",
        "bslz4_u16_1024",       "bitshuffle_plain_i32",          "masked_deflate_f32", "fletcher_swapped_i32",
        "blosc_lz4_f32",        "blosc_lz4hc_bitshuffle_u16",    "blosc_zstd_f64",    "blosc_memcpyed_i32",
        "blosc_blosclz_f32",    "blosc_lz4_bitshuffle_f64",      "blosc_lz4_random_u8", "blosc_lz4_shuffle_3byte"};
    ref_load(); /* this file's copy of codec_ref.h's table (a static): the CPU decoding and encoding */
    if (out)
        mkdir(out, 0755);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        fixture_run(dir, names[i], out, cpu);
}
