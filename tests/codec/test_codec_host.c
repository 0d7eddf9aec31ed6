/*
 * The CPU decode of whole chunks (src/codec/host_codec.h) against the
 * filters' CPU references (codec_ref.h, checked against h5py + hdf5plugin by
 * codec_fixtures_cpu): pipelines of deflate, zstd, shuffle and fletcher32 in
 * HDF5's orders and with filters skipped by the chunk's mask, element sizes
 * 1-8 and odd chunk lengths, every data kind; bit for bit. Corrupt chunks
 * (bytes flipped, truncated, decoding to the wrong size, a bad checksum)
 * fail with EBADMSG and the filter's name, as HDF5's filters fail on them,
 * or decode to what the reference decodes them to; never a read or write
 * outside the buffers (the sanitizer builds run this). Pipelines the CPU
 * does not decode say why. Skipped (77) without zlib.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec_ref.h"
#include "codec_test.h"
#include "host_codec.h"

static const unsigned CD_DEFL[] = {1}, CD_DEFL9[] = {9}, CD_ZSTD1[] = {1}, CD_ZSTD9[] = {9};

typedef struct shape {
    const char *name;
    unsigned ids[4];
    const unsigned *cd[4];
    bool needs_zstd;
} shape_t;

static gds_codec_pipeline_t make_pipeline(const shape_t *sh, size_t chunk_bytes, unsigned elem)
{
    gds_codec_pipeline_t p;
    memset(&p, 0, sizeof p);
    p.chunk_bytes = chunk_bytes;
    p.type_size = elem;
    for (int i = 0; i < 4 && sh->ids[i]; i++) {
        unsigned id = sh->ids[i];
        unsigned shuf[1] = {elem};
        if (id == GDS_FILTER_SHUFFLE)
            pipe_add(&p, id, 0, 1, shuf);
        else if (id == GDS_FILTER_FLETCHER32)
            pipe_add(&p, id, 0, 0, NULL);
        else
            pipe_add(&p, id, 0, 1, sh->cd[i]);
    }
    return p;
}

/* Decodes `stored` with the host codec into a buffer of exactly the chunk's
 * size; 0 or -1 with st. */
static int host_decode(const gds_codec_pipeline_t *p, unsigned mask, const bytes_t *stored, bytes_t *out,
                       gds_status_t *st)
{
    *out = bytes_new(p->chunk_bytes);
    bytes_t work = bytes_new(gds_codec_host_work_bytes(p));
    /* the stored bytes in a buffer of their exact size: a read past them is the sanitizer's to see */
    bytes_t exact = bytes_new(stored->n);
    memcpy(exact.p, stored->p, stored->n);
    int rc = gds_codec_host_decode(p, mask, exact.p, exact.n, out->p, work.p, st);
    free(work.p);
    free(exact.p);
    return rc;
}

static void round_trips(const shape_t *sh)
{
    static const size_t sizes[] = {1 << 20, 65536 + 3, 4097, 24, 3};
    static const unsigned elems[] = {1, 2, 4, 8, 3};
    static const data_kind_t kinds[] = {DATA_FLOAT_FIELD, DATA_IMAGE_U8, DATA_SPARSE_INT, DATA_RANDOM, DATA_MIXED};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t ei = 0; ei < sizeof elems / sizeof *elems; ei++) {
            size_t n = sizes[si];
            gds_codec_pipeline_t p = make_pipeline(sh, n, elems[ei]);
            char why[200] = "";
            int comp = gds_codec_host_compressor(&p, why, sizeof why);
            CHECK_MSG(comp >= 0, "%s: %s", sh->name, why);
            if (comp < 0)
                return;
            for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++) {
                bytes_t data = bytes_new(n), stored, got;
                make_data(kinds[ki], data.p, n, (unsigned)(si * 7 + ei + ki));
                unsigned masks = 1u << p.nfilters;
                for (unsigned mask = 0; mask < masks; mask += (si == 0 ? masks - 1 : 1)) {
                    if (!ref_encode(&p, mask, &data, &stored)) {
                        CHECK_MSG(false, "%s: the reference cannot encode", sh->name);
                        continue;
                    }
                    gds_status_t st = {0, ""};
                    int rc = host_decode(&p, mask, &stored, &got, &st);
                    CHECK_MSG(rc == 0, "%s n=%zu elem=%u kind=%zu mask=%u: %s", sh->name, n, elems[ei], ki, mask,
                              st.msg);
                    if (rc == 0)
                        CHECK_MSG(memcmp(got.p, data.p, n) == 0, "%s n=%zu elem=%u kind=%zu mask=%u: bytes differ",
                                  sh->name, n, elems[ei], ki, mask);
                    free(stored.p);
                    free(got.p);
                }
                free(data.p);
            }
        }
}

/* Mutated chunks: the host decode fails with the filter named, or gives
 * what the reference gives. */
static void corrupt_chunks(const shape_t *sh)
{
    size_t n = 256 * 1024;
    gds_codec_pipeline_t p = make_pipeline(sh, n, 4);
    bytes_t data = bytes_new(n), stored;
    make_data(DATA_FLOAT_FIELD, data.p, n, 11);
    if (!ref_encode(&p, 0, &data, &stored)) {
        CHECK_MSG(false, "%s: the reference cannot encode", sh->name);
        free(data.p);
        return;
    }
    for (int how = 0; how < 40; how++) {
        bytes_t bad = bytes_new(stored.n);
        memcpy(bad.p, stored.p, stored.n);
        if (how < 30) { /* bytes flipped at spread positions */
            size_t at = (size_t)how * stored.n / 30;
            for (size_t k = at; k < at + 1 + (size_t)how % 5 && k < bad.n; k++)
                bad.p[k] ^= (unsigned char)(0x5a + how);
        } else { /* truncated, to 0-90% of its bytes */
            bad.n = stored.n * (size_t)(how - 30) / 10;
        }
        bytes_t want, got;
        bool ref_ok = ref_decode(&p, 0, &bad, &want) && want.n == n;
        gds_status_t st = {0, ""};
        int rc = host_decode(&p, 0, &bad, &got, &st);
        if (rc == 0) {
            CHECK_MSG(ref_ok, "%s corruption %d: decoded where HDF5's filters fail", sh->name, how);
            if (ref_ok)
                CHECK_MSG(memcmp(got.p, want.p, n) == 0, "%s corruption %d: decoded differently", sh->name, how);
        } else {
            CHECK_MSG(st.err == EBADMSG, "%s corruption %d: err %d (%s)", sh->name, how, st.err, st.msg);
            CHECK_MSG(strstr(st.msg, "filter ") != NULL || strstr(st.msg, "pipeline") != NULL, "%s: %s", sh->name,
                      st.msg);
        }
        if (ref_ok)
            free(want.p);
        free(got.p);
        free(bad.p);
    }
    free(stored.p);
    free(data.p);
}

static void checksums_and_sizes(void)
{
    size_t n = 4096;
    shape_t sh = {"fletcher32", {GDS_FILTER_FLETCHER32}, {NULL}, false};
    gds_codec_pipeline_t p = make_pipeline(&sh, n, 4);
    bytes_t data = bytes_new(n), stored, got;
    make_data(DATA_IMAGE_U8, data.p, n, 3);
    CHECK(ref_encode(&p, 0, &data, &stored));
    /* HDF5's own Fletcher-32, against the reference written from H5checksum.c */
    for (size_t len = 0; len < 40; len++)
        CHECK(gds_codec_host_fletcher32(data.p, len) == ref_fletcher32(data.p, len));
    CHECK(gds_codec_host_fletcher32(data.p, n) == ref_fletcher32(data.p, n));
    /* the byte-swapped form of files of HDF5 < 1.6.3 is accepted */
    uint32_t f = ref_fletcher32(data.p, n), swapped = ((f & 0x00ff00ffu) << 8) | ((f >> 8) & 0x00ff00ffu);
    put_le32(stored.p + n, swapped);
    gds_status_t st = {0, ""};
    CHECK_MSG(host_decode(&p, 0, &stored, &got, &st) == 0, "%s", st.msg);
    free(got.p);
    put_le32(stored.p + n, f ^ 0x10000);
    CHECK(host_decode(&p, 0, &stored, &got, &st) == -1 && st.err == EBADMSG);
    CHECK_MSG(strstr(st.msg, "filter 0 (fletcher32): checksum mismatch") != NULL, "%s", st.msg);
    free(got.p);
    /* H5Z_FLAG_SKIP_EDC: not verified */
    p.filter[0].flags |= GDS_FILTER_FLAG_SKIP_EDC;
    CHECK(host_decode(&p, 0, &stored, &got, &st) == 0);
    free(got.p);
    free(stored.p);

    /* deflate of the wrong size: one byte more, one byte less than the chunk */
    shape_t dsh = {"deflate", {GDS_FILTER_DEFLATE}, {CD_DEFL}, false};
    gds_codec_pipeline_t dp = make_pipeline(&dsh, n, 1);
    for (int delta = -1; delta <= 1; delta += 2) {
        bytes_t other = {data.p, n + (size_t)delta};
        bytes_t bigger = bytes_new(n + 1);
        memcpy(bigger.p, data.p, n);
        bigger.p[n] = 7;
        if (delta > 0)
            other = bigger;
        CHECK(ref_deflate(&other, &stored, 1));
        CHECK(host_decode(&dp, 0, &stored, &got, &st) == -1 && st.err == EBADMSG);
        CHECK_MSG(strstr(st.msg, "filter 0 (deflate)") != NULL, "%s", st.msg);
        free(got.p);
        free(stored.p);
        free(bigger.p);
    }
    /* a chunk stored with every filter skipped is the chunk itself; of the wrong size, an error */
    bytes_t plain = {data.p, n};
    CHECK(host_decode(&dp, 1, &plain, &got, &st) == 0 && memcmp(got.p, data.p, n) == 0);
    free(got.p);
    plain.n = n - 1;
    CHECK(host_decode(&dp, 1, &plain, &got, &st) == -1 && st.err == EBADMSG);
    free(got.p);
    free(data.p);
}

static void refusals(void)
{
    static const unsigned cd_lz4[] = {0};
    gds_codec_pipeline_t p;
    memset(&p, 0, sizeof p);
    p.chunk_bytes = 4096;
    p.type_size = 4;
    pipe_add(&p, GDS_FILTER_LZ4, 0, 1, cd_lz4);
    char why[200] = "";
    CHECK(gds_codec_host_compressor(&p, why, sizeof why) == -1);
    CHECK_MSG(strstr(why, "lz4") != NULL, "%s", why);
    memset(&p, 0, sizeof p);
    p.chunk_bytes = 4096;
    p.type_size = 4;
    pipe_add(&p, 32000, 0, 0, NULL); /* lzf: no decoder on either side */
    CHECK(gds_codec_host_compressor(&p, why, sizeof why) == -1 && why[0]);
    memset(&p, 0, sizeof p);
    p.chunk_bytes = 4096;
    p.type_size = 4;
    pipe_add(&p, GDS_FILTER_SHUFFLE, 0, 1, (const unsigned[]){4});
    CHECK(gds_codec_host_compressor(&p, why, sizeof why) == 0);
}

int main(void)
{
    ref_load();
    if (!ref.z) {
        printf("SKIP: zlib (libz.so.1) is not installed\n");
        return 77;
    }
    static const shape_t shapes[] = {
        {"deflate", {GDS_FILTER_DEFLATE}, {CD_DEFL}, false},
        {"shuffle+deflate", {GDS_FILTER_SHUFFLE, GDS_FILTER_DEFLATE}, {NULL, CD_DEFL}, false},
        {"shuffle+deflate9+fletcher32", {GDS_FILTER_SHUFFLE, GDS_FILTER_DEFLATE, GDS_FILTER_FLETCHER32},
         {NULL, CD_DEFL9, NULL}, false},
        {"fletcher32+shuffle+deflate", {GDS_FILTER_FLETCHER32, GDS_FILTER_SHUFFLE, GDS_FILTER_DEFLATE},
         {NULL, NULL, CD_DEFL}, false},
        {"shuffle", {GDS_FILTER_SHUFFLE}, {NULL}, false},
        {"shuffle+fletcher32", {GDS_FILTER_SHUFFLE, GDS_FILTER_FLETCHER32}, {NULL, NULL}, false},
        {"zstd", {GDS_FILTER_ZSTD}, {CD_ZSTD1}, true},
        {"shuffle+zstd9+fletcher32", {GDS_FILTER_SHUFFLE, GDS_FILTER_ZSTD, GDS_FILTER_FLETCHER32},
         {NULL, CD_ZSTD9, NULL}, true},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        if (shapes[i].needs_zstd && !ref.zstd) {
            printf("skipped %s: libzstd is not installed\n", shapes[i].name);
            continue;
        }
        round_trips(&shapes[i]);
        if (shapes[i].ids[0] != GDS_FILTER_SHUFFLE || shapes[i].ids[1])
            corrupt_chunks(&shapes[i]);
    }
    checksums_and_sizes();
    refusals();
    return test_finish("test_codec_host");
}
