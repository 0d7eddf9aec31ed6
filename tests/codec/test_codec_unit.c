/*
 * The GPU codecs' host side, without a GPU: which pipelines the GPU can
 * decode and encode (and why not), encoded-size bounds, the chunk headers
 * the host parses, zlib's header rule against zlib itself, the checksum
 * arithmetic the kernels use against HDF5's Fletcher-32 and zlib's
 * Adler-32, the bit transpose against bitshuffle's definition, error texts,
 * and clean failures when nvCOMP or CUDA is absent.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blosc_chunks.h"
#include "blosc_encode_model.h"
#include "codec_plan.h"
#include "codec_internal.h"
#include "codec_ref.h"
#include "codec_shared.h"
#include "codec_test.h"
#include "cuda_loader.h"

static gds_codec_pipeline_t pipeline(size_t chunk_bytes, size_t type_size)
{
    gds_codec_pipeline_t p;
    memset(&p, 0, sizeof p);
    p.chunk_bytes = chunk_bytes;
    p.type_size = type_size;
    return p;
}

static const unsigned CD_SHUF4[] = {4}, CD_DEFL6[] = {6}, CD_ZSTD3[] = {3}, CD_LZ4_0[] = {0};
static const unsigned CD_BS_LZ4[] = {0, 4, 4, 0, 2}, CD_BS_ZSTD[] = {0, 4, 4, 0, 3, 5}, CD_BS_PLAIN[] = {0, 4, 4};

static bool decodable(const gds_codec_pipeline_t *p, const char *why_has)
{
    char why[300] = "x";
    bool ok = gds_codec_can_decode(p, why, sizeof why);
    if (ok)
        CHECK_MSG(why[0] == 0, "why set on success: %s", why);
    else if (why_has)
        CHECK_MSG(strstr(why, why_has) != NULL, "'%s' not in '%s'", why_has, why);
    if (!ok && !why[0])
        CHECK_MSG(0, "no reason given");
    return ok;
}

static void test_can_decode(void)
{
    gds_codec_pipeline_t p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, 1, 1, CD_SHUF4);
    pipe_add(&p, GDS_FILTER_DEFLATE, 1, 1, CD_DEFL6);
    CHECK(decodable(&p, NULL));
    CHECK(gds_codec_can_encode(&p, NULL, 0));
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    CHECK(decodable(&p, NULL));
    CHECK(gds_codec_can_encode(&p, NULL, 0));

    const struct {
        unsigned id;
        size_t ncd;
        const unsigned *cd;
    } good[] = {{GDS_FILTER_ZSTD, 1, CD_ZSTD3},       {GDS_FILTER_ZSTD, 0, NULL},          {GDS_FILTER_LZ4, 1, CD_LZ4_0},
                {GDS_FILTER_LZ4, 0, NULL},            {GDS_FILTER_BITSHUFFLE, 5, CD_BS_LZ4}, {GDS_FILTER_BITSHUFFLE, 6, CD_BS_ZSTD},
                {GDS_FILTER_BITSHUFFLE, 3, CD_BS_PLAIN}, {GDS_FILTER_FLETCHER32, 0, NULL}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        p = pipeline(1 << 20, 4);
        pipe_add(&p, good[i].id, 1, good[i].ncd, good[i].cd);
        CHECK_MSG(decodable(&p, NULL), "filter %u", good[i].id);
        CHECK_MSG(gds_codec_can_encode(&p, NULL, 0), "filter %u", good[i].id);
    }

    /* blosc: lz4, lz4hc and zstd (cd_values[6]) decode and encode on the
     * GPU; the others are named, so the caller's message says what sends
     * them to the CPU */
    const struct {
        unsigned code;
        bool gpu, encode;
        const char *name, *encode_why;
    } blosc[] = {{0, false, false, "blosclz", "no GPU encoder"}, {1, true, true, "lz4", NULL},
                 {2, true, true, "lz4hc", NULL},                 {3, false, false, "snappy", "no GPU encoder"},
                 {4, false, false, "zlib", "no GPU encoder"},    {5, true, true, "zstd", NULL},
                 {9, false, false, "unknown", "no GPU encoder"}};
    for (size_t i = 0; i < sizeof blosc / sizeof blosc[0]; i++)
        for (unsigned shuffle = 0; shuffle <= 2; shuffle++) {
            p = pipeline(1 << 20, 4);
            const unsigned cd_blosc[] = {2, 2, 4, 1 << 20, 5, shuffle, blosc[i].code};
            pipe_add(&p, GDS_FILTER_BLOSC, 1, 7, cd_blosc);
            CHECK_MSG(decodable(&p, blosc[i].name) == blosc[i].gpu, "blosc %s", blosc[i].name);
            char why[300] = "x";
            bool enc = gds_codec_can_encode(&p, why, sizeof why);
            CHECK_MSG(enc == blosc[i].encode, "blosc %s shuffle %u: encode %d (%s)", blosc[i].name, shuffle, enc, why);
            if (enc)
                CHECK_MSG(why[0] == 0 && gds_codec_max_encoded_bytes(&p) == (1u << 20) + 16, "blosc %s: %zu",
                          blosc[i].name, gds_codec_max_encoded_bytes(&p));
            else
                CHECK_MSG(strstr(why, "filter 0 (blosc)") && strstr(why, blosc[i].encode_why) &&
                              strstr(why, blosc[i].name) && strstr(why, "CPU") &&
                              gds_codec_max_encoded_bytes(&p) == 0,
                          "blosc %s: %s", blosc[i].name, why);
        }
    /* parameters c-blosc's compressor refuses: HDF5's filter gives the error */
    const unsigned cd_blosc_sh3[] = {2, 2, 4, 1 << 20, 5, 3, 1}, cd_blosc_cl10[] = {2, 2, 4, 1 << 20, 10, 1, 1};
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 7, cd_blosc_sh3);
    char why_enc[300];
    CHECK(decodable(&p, NULL) && !gds_codec_can_encode(&p, why_enc, sizeof why_enc) && strstr(why_enc, "shuffle 3"));
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 7, cd_blosc_cl10);
    CHECK(!gds_codec_can_encode(&p, why_enc, sizeof why_enc) && strstr(why_enc, "clevel 10"));
    /* lz4 blosc after a shuffle and before a checksum encodes; the chunk's
     * largest int32 frame is c-blosc's limit */
    const unsigned cd_blosc_lz4[] = {2, 2, 4, 0, 5, 2, 1};
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, 1, 1, CD_SHUF4);
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 7, cd_blosc_lz4);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    CHECK(gds_codec_can_encode(&p, NULL, 0) && gds_codec_max_encoded_bytes(&p) == (1u << 20) + 16 + 4);
    p = pipeline(0x7fffffffu - 15, 1);
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 7, cd_blosc_lz4);
    CHECK(!gds_codec_can_encode(&p, why_enc, sizeof why_enc) && strstr(why_enc, "blosc takes at most"));
    p = pipeline(0x7fffffffu - 16, 1);
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 7, cd_blosc_lz4);
    CHECK(gds_codec_can_encode(&p, NULL, 0));
    /* fewer values (h5py's compression=32001): c-blosc's default, blosclz */
    p = pipeline(1 << 20, 4);
    const unsigned cd_blosc4[] = {2, 2, 4, 1 << 20};
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 4, cd_blosc4);
    CHECK(!decodable(&p, "blosclz"));
    /* blosc with a shuffle before it and a checksum after */
    p = pipeline(1 << 20, 4);
    const unsigned cd_blosc_zstd[] = {2, 2, 4, 1 << 20, 5, 1, 5};
    pipe_add(&p, GDS_FILTER_SHUFFLE, 1, 1, CD_SHUF4);
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 7, cd_blosc_zstd);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    CHECK(decodable(&p, NULL));
    pipe_add(&p, GDS_FILTER_DEFLATE, 1, 1, CD_DEFL6);
    CHECK(!decodable(&p, "both compress"));
    p = pipeline(1 << 20, 4);
    const unsigned cd_szip[] = {4, 32};
    pipe_add(&p, 4, 1, 2, cd_szip);
    CHECK(!decodable(&p, "szip"));
    p = pipeline(1 << 20, 4);
    pipe_add(&p, 30000, 1, 0, NULL);
    CHECK(!decodable(&p, "30000"));

    /* two compressors */
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_DEFLATE, 1, 1, CD_DEFL6);
    pipe_add(&p, GDS_FILTER_ZSTD, 1, 1, CD_ZSTD3);
    CHECK(!decodable(&p, "both compress"));
    /* ... unless one is skipped for a chunk: plan of mask 0x2 */
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t ns = 0;
    CHECK(gds_codec_plan_steps(&p, 0x2, false, steps, &ns, NULL, 0) == 0 && ns == 1 &&
          steps[0].kind == GDS_STEP_DEFLATE && steps[0].pos == 0);

    /* parameters HDF5's filters reject */
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_DEFLATE, 1, 0, NULL);
    CHECK(!decodable(&p, "deflate"));
    p = pipeline(1 << 20, 4);
    const unsigned cd_l10[] = {10};
    pipe_add(&p, GDS_FILTER_DEFLATE, 1, 1, cd_l10);
    CHECK(!decodable(&p, "level"));
    p = pipeline(1 << 20, 4);
    const unsigned cd_zero[] = {0};
    pipe_add(&p, GDS_FILTER_SHUFFLE, 1, 1, cd_zero);
    CHECK(!decodable(&p, "shuffle"));
    p = pipeline(1 << 20, 4);
    const unsigned cd_bs2[] = {0, 4};
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 1, 2, cd_bs2);
    CHECK(!decodable(&p, "bitshuffle"));
    p = pipeline(1001, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 1, 5, CD_BS_LZ4);
    CHECK(!decodable(&p, "whole number"));
    p = pipeline(1 << 20, 4);
    const unsigned cd_bs12[] = {0, 4, 4, 12};
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 1, 4, cd_bs12);
    CHECK(!decodable(&p, "multiple of 8"));
    p = pipeline(0, 4);
    CHECK(!decodable(&p, "0 bytes"));
    p = pipeline((size_t)3 << 30, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, 1, 0, NULL);
    CHECK(!decodable(&p, "at most"));
    p = pipeline(1 << 20, 4);
    p.nfilters = GDS_CODEC_MAX_FILTERS + 1;
    CHECK(!decodable(&p, "filters"));
    CHECK(!gds_codec_can_decode(NULL, NULL, 0));

    /* no filter at all: a copy */
    p = pipeline(4096, 1);
    CHECK(decodable(&p, NULL));

    /* the encoder keeps only a checksum after the compressor */
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_DEFLATE, 1, 1, CD_DEFL6);
    pipe_add(&p, GDS_FILTER_SHUFFLE, 1, 1, CD_SHUF4);
    CHECK(decodable(&p, NULL));
    char why[300];
    CHECK(!gds_codec_can_encode(&p, why, sizeof why) && strstr(why, "shuffle"));

    /* fletcher32 on read unless H5Z_FLAG_SKIP_EDC */
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_FLETCHER32, GDS_FILTER_FLAG_SKIP_EDC, 0, NULL);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    CHECK(gds_codec_plan_steps(&p, 0, false, steps, &ns, NULL, 0) == 0 && ns == 2 && !steps[0].verify &&
          steps[1].verify);
}

static void test_bounds(void)
{
    size_t n = 1 << 20;
    gds_codec_pipeline_t p = pipeline(n, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, 1, 1, CD_SHUF4);
    pipe_add(&p, GDS_FILTER_DEFLATE, 1, 1, CD_DEFL6);
    CHECK(gds_codec_max_encoded_bytes(&p) == 2 + n + 5 * ((n + 65534) / 65535) + 4);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    CHECK(gds_codec_max_encoded_bytes(&p) == 2 + n + 5 * ((n + 65534) / 65535) + 4 + 4);

    p = pipeline(n, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, 1, 0, NULL);
    CHECK(gds_codec_max_encoded_bytes(&p) == 13 + 3 * 8 + n);
    p = pipeline(n, 4);
    pipe_add(&p, GDS_FILTER_LZ4, 1, 0, NULL); /* no block size: 64 KiB blocks */
    CHECK(gds_codec_max_encoded_bytes(&p) == 12 + 4 * 16 + n);
    p = pipeline(n, 4);
    const unsigned cd64k[] = {65536};
    pipe_add(&p, GDS_FILTER_LZ4, 1, 1, cd64k);
    CHECK(gds_codec_max_encoded_bytes(&p) == 12 + 4 * 16 + n);
    /* 64 MiB in blocks of 1 GiB: nvCOMP's 16 MiB blocks */
    p = pipeline((size_t)64 << 20, 4);
    const unsigned cd1g[] = {1u << 30};
    pipe_add(&p, GDS_FILTER_LZ4, 1, 1, cd1g);
    CHECK(gds_codec_max_encoded_bytes(&p) == 12 + 4 * 4 + ((size_t)64 << 20));
    p = pipeline(n, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 1, 5, CD_BS_LZ4);
    CHECK(gds_codec_max_encoded_bytes(&p) > n + 12 + 4 * (n / 8192));
    p = pipeline(n, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 0, NULL); /* blosclz: no GPU encoder */
    CHECK(gds_codec_max_encoded_bytes(&p) == 0);
    /* blosc lz4: a frame only where smaller than the MEMCPYED form */
    const unsigned cd_blosc_lz4[] = {2, 2, 4, 0, 5, 1, 1};
    p = pipeline(n + 3, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 7, cd_blosc_lz4);
    CHECK(gds_codec_max_encoded_bytes(&p) == n + 3 + 16);
}

static void be(unsigned char *p, uint64_t v, int n) { put_be(p, v, n); }

static void test_headers(void)
{
    unsigned char h[GDS_HEAD_BYTES] = {0};
    gds_codec_blocks_t b;
    be(h, 1000, 8);
    be(h + 8, 300, 4);
    CHECK(gds_codec_parse_lz4h5(h, 500, 1000, &b) == 0 && b.block == 300 && b.nblocks == 4);
    CHECK(gds_codec_parse_lz4h5(h, 500, 999, &b) < 0 && b.reason == GDS_KERR_ORIGSIZE && b.detail == 1000);
    CHECK(gds_codec_parse_lz4h5(h, 11, 1000, &b) < 0 && b.reason == GDS_KERR_SHORT);
    CHECK(gds_codec_parse_lz4h5(h, 12 + 5 * 3, 1000, &b) < 0 && b.reason == GDS_KERR_TRUNCATED);
    be(h + 8, 0, 4);
    CHECK(gds_codec_parse_lz4h5(h, 500, 1000, &b) < 0 && b.reason == GDS_KERR_PARAM);
    be(h + 8, 1u << 30, 4); /* the default block: capped to the chunk, as the filter does */
    CHECK(gds_codec_parse_lz4h5(h, 500, 1000, &b) == 0 && b.block == 1000 && b.nblocks == 1);

    be(h, 4000, 8);
    be(h + 8, 0, 4); /* 0: bitshuffle's default block (2048 elements of 4 bytes) */
    CHECK(gds_codec_parse_bshuf(h, 600, 4000, 4, &b) == 0 && b.block == 2048 && b.nblocks == 1);
    be(h + 8, 32, 4); /* 8 elements */
    CHECK(gds_codec_parse_bshuf(h, 12 + 5 * 125, 4000, 4, &b) == 0 && b.block == 8 && b.nblocks == 125);
    CHECK(gds_codec_parse_bshuf(h, 12 + 5 * 124, 4000, 4, &b) < 0 && b.reason == GDS_KERR_TRUNCATED);
    be(h + 8, 12, 4); /* 3 elements: not a multiple of 8 */
    CHECK(gds_codec_parse_bshuf(h, 600, 4000, 4, &b) < 0 && b.reason == GDS_KERR_PARAM);
    be(h, 4001, 8);
    CHECK(gds_codec_parse_bshuf(h, 600, 4001, 4, &b) < 0 && b.reason == GDS_KERR_PARAM);
    CHECK(gds_codec_parse_bshuf(h, 600, 4000, 4, &b) < 0 && b.reason == GDS_KERR_ORIGSIZE);

    size_t full, last, left;
    gds_bshuf_layout(1003, 16, &full, &last, &left);
    CHECK(full == 62 && last == 8 && left == 3);
    CHECK(gds_bshuf_default_block(4) == 2048 && gds_bshuf_default_block(1) == 8192 &&
          gds_bshuf_default_block(128) == 128 && gds_bshuf_default_block(3) == 2728);
}

static void test_zlib_header(void)
{
    for (int level = 0; level <= 9; level++)
        CHECK(gds_codec_zlib_header_ok(0x78, gds_codec_zlib_flg(level)));
    if (!ref.z) {
        printf("zlib (libz.so.1) not found: zlib's own header check skipped\n");
        return;
    }
    /* the header zlib writes for each level is the one the encoder writes */
    unsigned char in[64], out[256];
    memset(in, 'a', sizeof in);
    for (int level = 0; level <= 9; level++) {
        unsigned long n = sizeof out;
        CHECK(ref.compress2(out, &n, in, sizeof in, level) == 0);
        CHECK_MSG(out[0] == 0x78 && out[1] == gds_codec_zlib_flg(level), "level %d: %02x %02x", level, out[0],
                  out[1]);
    }
    /* every 2-byte header: accepted by the rule exactly when zlib accepts it */
    int mismatches = 0;
    for (unsigned cmf = 0; cmf < 256; cmf++)
        for (unsigned flg = 0; flg < 256; flg++) {
            unsigned char s[] = {(unsigned char)cmf, (unsigned char)flg, 0x03, 0x00, 0, 0, 0, 1};
            unsigned char o[16];
            unsigned long n = sizeof o;
            bool zlib_ok = ref.uncompress(o, &n, s, sizeof s) == 0;
            if (zlib_ok != gds_codec_zlib_header_ok(cmf, flg) && mismatches++ < 5)
                fprintf(stderr, "header %02x %02x: zlib %d, codec %d\n", cmf, flg, zlib_ok,
                        gds_codec_zlib_header_ok(cmf, flg));
        }
    CHECK(mismatches == 0);
}

/* The kernels' Fletcher-32 (codec_fletcher_sum/_check): sums mod 65535
 * with (m - i) weights, 0 kept for all-zero data only. */
static uint32_t fletcher_model(const unsigned char *p, size_t len)
{
    size_t m = (len + 1) / 2;
    uint64_t s1 = 0, s2 = 0, nz = 0;
    for (size_t w = 0; w < m; w++) {
        uint32_t v = ((uint32_t)p[2 * w] << 8) | (2 * w + 1 < len ? p[2 * w + 1] : 0);
        s1 += v;
        s2 += (uint64_t)v * ((m - w) % 65535);
        nz |= v;
    }
    uint32_t f1 = (uint32_t)(s1 % 65535), f2 = (uint32_t)(s2 % 65535);
    if (nz) {
        f1 = f1 ? f1 : 65535;
        f2 = f2 ? f2 : 65535;
    }
    return (f2 << 16) | f1;
}

/* The kernels' Adler-32 (codec_adler_sum/_check). */
static uint32_t adler_model(const unsigned char *p, size_t len)
{
    uint64_t s1 = 0, s2 = 0;
    for (size_t i = 0; i < len; i++) {
        s1 += p[i];
        s2 += (uint64_t)p[i] * ((len - i) % 65521);
    }
    return (uint32_t)(((len % 65521 + s2) % 65521) << 16 | (1 + s1) % 65521);
}

static void test_checksums(void)
{
    size_t big = 3 << 20;
    unsigned char *buf = calloc(1, big); /* zeroed: gcc cannot tell make_data fills what is read */
    int bad = 0;
    for (size_t len = 0; len < 3000; len += 1 + len / 7) {
        make_data(DATA_RANDOM, buf, len, (unsigned)len);
        if (fletcher_model(buf, len) != ref_fletcher32(buf, len))
            bad++;
    }
    /* all 0xff: every fold lands on 0xffff; single bytes; zeros */
    const size_t lens[] = {1, 2, 3, 719, 720, 721, 1440, 65535 * 2, 1 << 20, big - 1, big};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        memset(buf, 0xff, lens[i]);
        if (fletcher_model(buf, lens[i]) != ref_fletcher32(buf, lens[i]))
            bad++, fprintf(stderr, "fletcher32 of %zu bytes of 0xff differs\n", lens[i]);
        memset(buf, 0, lens[i]);
        buf[lens[i] / 2] = 0x80;
        if (fletcher_model(buf, lens[i]) != ref_fletcher32(buf, lens[i]))
            bad++, fprintf(stderr, "fletcher32 of %zu bytes, one set, differs\n", lens[i]);
        memset(buf, 0, lens[i]);
        if (fletcher_model(buf, lens[i]) != ref_fletcher32(buf, lens[i]))
            bad++;
    }
    make_data(DATA_FLOAT_FIELD, buf, big, 7);
    if (fletcher_model(buf, big) != ref_fletcher32(buf, big))
        bad++;
    CHECK(bad == 0);

    unsigned long (*adler32)(unsigned long, const unsigned char *, unsigned) = NULL;
    void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (z)
        *(void **)&adler32 = dlsym(z, "adler32");
    if (!adler32)
        printf("zlib not found: Adler-32 model check skipped\n");
    else {
        bad = 0;
        for (size_t len = 0; len < 100000; len += 1 + len / 3) {
            make_data(DATA_RANDOM, buf, len, (unsigned)len + 1);
            if (adler_model(buf, len) != (uint32_t)adler32(adler32(0, NULL, 0), buf, (unsigned)len))
                bad++;
        }
        memset(buf, 0xff, big);
        if (adler_model(buf, big) != (uint32_t)adler32(adler32(0, NULL, 0), buf, (unsigned)big))
            bad++;
        CHECK(bad == 0);
    }
    free(buf);
}

/* The kernels' bit transpose (gds_bit_transpose8 of codec_shared.h, per
 * group of 8 elements) against bitshuffle's definition. */

static void test_bit_transpose(void)
{
    int bad = 0;
    for (int r = 0; r < 1000; r++) {
        uint64_t x = rng(), y = gds_bit_transpose8(x);
        for (int k = 0; k < 8; k++)
            for (int t = 0; t < 8; t++)
                bad += ((x >> (8 * k + t)) & 1) != ((y >> (8 * t + k)) & 1);
    }
    CHECK(bad == 0);
    /* one block of 64 elements of 3 bytes, as codec_bitshuffle does it */
    const size_t S = 64, E = 3;
    unsigned char in[64 * 3], want[64 * 3], got[64 * 3], back[64 * 3];
    make_data(DATA_RANDOM, in, sizeof in, 3);
    ref_bitshuffle_block(in, want, S, E, false);
    for (size_t g = 0; g < S / 8; g++)
        for (size_t j = 0; j < E; j++) {
            uint64_t x = 0;
            for (int t = 0; t < 8; t++)
                x |= (uint64_t)in[(8 * g + t) * E + j] << (8 * t);
            x = gds_bit_transpose8(x);
            for (int k = 0; k < 8; k++)
                got[(j * 8 + k) * (S / 8) + g] = (unsigned char)(x >> (8 * k));
        }
    CHECK(memcmp(want, got, sizeof got) == 0);
    ref_bitshuffle_block(want, back, S, E, true);
    CHECK(memcmp(back, in, sizeof in) == 0);
}

/* The zstd frame check the kernels run before nvCOMP (codec_shared.h), on
 * frames libzstd writes and on damaged ones. */
static unsigned zcheck(const unsigned char *p, size_t n, size_t expect, int need_fcs)
{
    gds_u64 det;
    return gds_zstd_frame_check(p, n, expect, need_fcs, &det);
}

static void test_zstd_frames(void)
{
    if (!ref.zstd) {
        printf("zstd (libzstd.so.1) not found: zstd frame checks skipped\n");
        return;
    }
    const size_t sizes[] = {1, 100, 5000, 131072, 131073, 500000, 2u << 20};
    const int levels[] = {1, 3, 9};
    size_t maxn = 2u << 20;
    bytes_t in = bytes_new(maxn), out = bytes_new(maxn + maxn / 8 + 1024);
    int bad = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t li = 0; li < 3; li++)
            for (int kind = 0; kind < 3; kind++) {
                size_t n = sizes[si];
                make_data(kind == 0 ? DATA_FLOAT_FIELD : kind == 1 ? DATA_SPARSE_INT : DATA_RANDOM, in.p, n,
                          (unsigned)(si * 9 + li));
                size_t c = ref.ZSTD_compress(out.p, out.n, in.p, n, levels[li]);
                if (ref.ZSTD_isError(c)) {
                    bad++;
                    continue;
                }
                unsigned r0 = zcheck(out.p, c, n, 1), r1 = zcheck(out.p, c, n + 1, 1);
                unsigned r2 = zcheck(out.p, c - 1, n, 1), r3 = zcheck(out.p, c + 1, n, 1);
                if (r0 != 0 || r1 != GDS_KERR_ORIGSIZE || r2 == 0 || r3 == 0) {
                    bad++;
                    fprintf(stderr, "zstd frame of %zu bytes (level %d): %u %u %u %u\n", n, levels[li], r0, r1, r2, r3);
                }
                /* every truncation is refused */
                for (size_t cut = 1; cut < c && cut < 64; cut++)
                    bad += zcheck(out.p, c - cut, n, 1) == 0;
            }
    CHECK(bad == 0);

    /* hand-made frames: raw blocks, with and without a content size */
    unsigned char f[64];
    const unsigned char raw_fcs[] = {0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x05, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'};
    CHECK(zcheck(raw_fcs, sizeof raw_fcs, 5, 1) == 0);
    if (ref.ZSTD_getFrameContentSize(raw_fcs, sizeof raw_fcs) != 5)
        CHECK_MSG(0, "hand-made frame not read by libzstd");
    /* no content size: window descriptor 0 (1 KiB), one raw block */
    const unsigned char raw_nofcs[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'};
    CHECK(zcheck(raw_nofcs, sizeof raw_nofcs, 5, 1) == GDS_KERR_HEADER);
    CHECK(zcheck(raw_nofcs, sizeof raw_nofcs, 5, 0) == 0);
    CHECK(zcheck(raw_nofcs, sizeof raw_nofcs, 6, 0) == GDS_KERR_SIZE);
    memcpy(f, raw_fcs, sizeof raw_fcs);
    f[0] ^= 1;
    CHECK(zcheck(f, sizeof raw_fcs, 5, 1) == GDS_KERR_HEADER); /* magic */
    memcpy(f, raw_fcs, sizeof raw_fcs);
    f[4] |= 0x08;
    CHECK(zcheck(f, sizeof raw_fcs, 5, 1) == GDS_KERR_HEADER); /* reserved bit */
    memcpy(f, raw_fcs, sizeof raw_fcs);
    f[6] = 0x2f; /* block type 3 */
    CHECK(zcheck(f, sizeof raw_fcs, 5, 1) == GDS_KERR_HEADER);
    memcpy(f, raw_fcs, sizeof raw_fcs);
    f[6] = 0x28; /* not the last block: a second header is missing */
    CHECK(zcheck(f, sizeof raw_fcs, 5, 1) == GDS_KERR_TRUNCATED);
    /* a dictionary ID */
    const unsigned char dict[] = {0x28, 0xb5, 0x2f, 0xfd, 0x21, 0x07, 0x05, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'};
    CHECK(zcheck(dict, sizeof dict, 5, 1) == GDS_KERR_PARAM);
    /* the codec's dummy frame (gpu_codec.c): one raw byte */
    const unsigned char dummy[] = {0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x01, 0x09, 0x00, 0x00, 0x78};
    CHECK(zcheck(dummy, sizeof dummy, 1, 1) == 0);
    unsigned char one[4];
    CHECK(!ref.ZSTD_isError(ref.ZSTD_decompress(one, sizeof one, dummy, sizeof dummy)) && one[0] == 0x78);
    /* two frames: refused (HDF5's filter reads the first one's size) */
    unsigned char two[2 * sizeof raw_fcs];
    memcpy(two, raw_fcs, sizeof raw_fcs);
    memcpy(two + sizeof raw_fcs, raw_fcs, sizeof raw_fcs);
    CHECK(zcheck(two, sizeof two, 5, 1) == GDS_KERR_TRUNCATED);
    free(in.p);
    free(out.p);
}


/* ---- blosc ---- */

/* The data of the chunks make_blosc_chunks.py had c-blosc compress. */
static bytes_t blosc_data(unsigned ts, unsigned long n)
{
    bytes_t b = bytes_new((size_t)ts * n);
    for (unsigned long i = 0; i < n; i++) {
        uint64_t v = (i >> 3) % 1000 + ((i >> 11) & 1) * 3;
        for (unsigned t = 0; t < ts; t++)
            b.p[(size_t)i * ts + t] = (unsigned char)(v >> (8 * t));
    }
    return b;
}

/* What the GPU does with a blosc chunk, on the host: the same header check
 * (gds_codec_parse_blosc), per block the walk of codec_blosc_walk (the
 * shared gds_blosc_nsplits, gds_blosc_stream, gds_zstd_frame_check), the
 * streams decoded by LZ4 / zstd as nvCOMP would (sizes checked as
 * codec_nvcomp_check does), and codec_blosc_finish's bytes
 * (gds_blosc_block_byte). 0, or the reason (GDS_KERR_*) with its detail. */
static int blosc_model(const unsigned char *p, size_t stored, size_t expect, unsigned char *out, uint64_t *detail)
{
    gds_codec_blosc_t b;
    unsigned char head[GDS_HEAD_BYTES] = {0};
    memcpy(head, p, stored < GDS_HEAD_BYTES ? stored : GDS_HEAD_BYTES);
    if (gds_codec_parse_blosc(head, stored, expect, &b) < 0) {
        *detail = b.detail;
        return b.reason;
    }
    if (b.memcpyed) {
        memcpy(out, p + 16, expect);
        return 0;
    }
    unsigned char *mid = calloc(1, expect);
    int why = 0;
    uint64_t entries = 0;
    for (uint64_t k = 0; !why && k < b.nblocks; k++) {
        bool partial = (k + 1) * b.blocksize > expect;
        uint64_t bsize = partial ? expect - k * b.blocksize : b.blocksize;
        uint32_t ns = gds_blosc_nsplits(b.flags, b.typesize, b.blocksize, partial);
        uint64_t neblock = bsize / ns;
        long long off = (int32_t)get_le32(p + 16 + 4 * k);
        for (uint32_t j = 0; !why && j < ns; j++, entries++) {
            gds_u64 cs = 0, det = 0;
            why = (int)gds_blosc_stream(p, b.cbytes, &off, &cs, &det);
            const unsigned char *stream = p + (off - (long long)cs);
            if (!why && b.format == GDS_BLOSC_FORMAT_ZSTD && cs != neblock)
                why = (int)gds_zstd_frame_check(stream, cs, neblock, 0, &det);
            *detail = det;
            if (why)
                break;
            unsigned char *dst = mid + k * b.blocksize + j * neblock;
            if (cs == neblock)
                memcpy(dst, stream, cs);
            else if (b.format == GDS_BLOSC_FORMAT_LZ4) {
                int r = ref.LZ4_decompress_safe((const char *)stream, (char *)dst, (int)cs, (int)neblock);
                why = r < 0 ? GDS_KERR_DECODE : (uint64_t)r != neblock ? GDS_KERR_SIZE : 0;
            }
            else {
                size_t r = ref.ZSTD_decompress(dst, neblock, stream, cs);
                why = ref.ZSTD_isError(r) ? GDS_KERR_DECODE : r != neblock ? GDS_KERR_SIZE : 0;
            }
        }
    }
    if (!why && entries != b.nentries)
        why = 100; /* the host's count of streams differs from the walk's */
    for (uint32_t i = 0; !why && i < expect; i++) {
        uint32_t k = i / (uint32_t)b.blocksize, b0 = k * (uint32_t)b.blocksize;
        uint32_t bsize = (uint32_t)expect - b0 < b.blocksize ? (uint32_t)expect - b0 : (uint32_t)b.blocksize;
        out[i] = gds_blosc_block_byte(mid + b0, b.flags, b.typesize, bsize, i - b0);
    }
    free(mid);
    return why;
}

static void test_blosc_real_chunks(void)
{
    if (!ref.lz4 || !ref.zstd) {
        printf("liblz4 / libzstd not found: blosc chunk decoding skipped\n");
        return;
    }
    for (size_t i = 0; i < sizeof blosc_chunks / sizeof blosc_chunks[0]; i++) {
        const blosc_chunk_t *c = &blosc_chunks[i];
        bytes_t want = blosc_data(c->typesize, c->elements);
        bool gpu = !strcmp(c->compressor, "lz4") || !strcmp(c->compressor, "lz4hc") || !strcmp(c->compressor, "zstd") ||
                   strstr(c->name, "memcpyed");
        unsigned char *got = calloc(1, want.n);
        uint64_t detail = 0;
        int why = blosc_model(c->bytes, c->stored, want.n, got, &detail);
        if (gpu)
            CHECK_MSG(why == 0 && !memcmp(got, want.p, want.n), "%s: model reason %d (%llu)%s", c->name, why,
                      (unsigned long long)detail, why ? "" : ", data differs");
        else
            CHECK_MSG(why == GDS_KERR_UNSUPPORTED &&
                          !strcmp(gds_codec_blosc_format_name((unsigned)detail), c->compressor),
                      "%s: reason %d, detail %llu", c->name, why, (unsigned long long)detail);
        bytes_t in = {(unsigned char *)c->bytes, c->stored}, dec = {NULL, 0};
        if (gpu)
            CHECK_MSG(ref_unblosc(&in, &dec) && dec.n == want.n && !memcmp(dec.p, want.p, want.n),
                      "%s: CPU reference", c->name);
        free(dec.p);
        free(got);
        free(want.p);
    }
}

static const blosc_chunk_t *blosc_chunk(const char *name)
{
    for (size_t i = 0; i < sizeof blosc_chunks / sizeof blosc_chunks[0]; i++)
        if (!strcmp(blosc_chunks[i].name, name))
            return &blosc_chunks[i];
    return NULL;
}

/* A copy of a real chunk with `len` bytes of `v` (LE) at `at`; the model's reason. */
static int blosc_mutated(const char *name, size_t at, uint32_t v, int len, size_t cut, uint64_t *detail)
{
    const blosc_chunk_t *c = blosc_chunk(name);
    bytes_t b = bytes_new(c->stored);
    memcpy(b.p, c->bytes, c->stored);
    for (int i = 0; i < len; i++)
        b.p[at + i] = (unsigned char)(v >> (8 * i));
    size_t expect = (size_t)c->typesize * c->elements;
    unsigned char *out = malloc(expect);
    int why = blosc_model(b.p, c->stored - cut, expect, out, detail);
    free(out);
    free(b.p);
    return why;
}

static void test_blosc_corrupt(void)
{
    if (!ref.lz4 || !ref.zstd)
        return;
    uint64_t d;
    const char *lz = "lz4_shuffle_t4_partial", *zs = "zstd_shuffle_t4_blocks", *mc = "memcpyed_t4";
    const blosc_chunk_t *c = blosc_chunk(lz);
    CHECK(blosc_mutated(lz, 0, 3, 1, 0, &d) == GDS_KERR_HEADER && d == 3);                  /* version */
    CHECK(blosc_mutated(lz, 1, 2, 1, 0, &d) == GDS_KERR_PARAM);                             /* LZ4 format version */
    CHECK(blosc_mutated(lz, 2, 0x21 | 0x08, 1, 0, &d) == GDS_KERR_HEADER);                  /* flag from the future */
    CHECK(blosc_mutated(lz, 2, 0xc1, 1, 0, &d) == GDS_KERR_PARAM && d == 6);                /* compressor 6 */
    CHECK(blosc_mutated(lz, 2, 0x41, 1, 0, &d) == GDS_KERR_UNSUPPORTED && d == 2);          /* snappy */
    CHECK(blosc_mutated(lz, 3, 0, 1, 0, &d) == GDS_KERR_PARAM);                             /* typesize 0 */
    CHECK(blosc_mutated(lz, 4, 160004, 4, 0, &d) == GDS_KERR_ORIGSIZE && d == 160004);      /* nbytes */
    CHECK(blosc_mutated(lz, 8, 0, 4, 0, &d) == GDS_KERR_PARAM);                             /* blocksize 0 */
    CHECK(blosc_mutated(lz, 8, 160001, 4, 0, &d) == GDS_KERR_PARAM);                        /* blocksize > nbytes */
    CHECK(blosc_mutated(lz, 8, 0x80000000u, 4, 0, &d) == GDS_KERR_PARAM);                   /* negative */
    CHECK(blosc_mutated(lz, 8, 65537, 4, 0, &d) == GDS_KERR_PARAM);                         /* 4 streams short */
    CHECK(blosc_mutated(lz, 12, (uint32_t)c->stored + 99, 4, 0, &d) == 0); /* cbytes past the end: c-blosc's bound only */
    CHECK(blosc_mutated(lz, 12, 15, 4, 0, &d) == GDS_KERR_TRUNCATED && d == 12);
    CHECK(blosc_mutated(lz, 0, 2, 1, 1, &d) == GDS_KERR_TRUNCATED);                         /* stored one short */
    CHECK(blosc_mutated(lz, 12, 20, 4, 0, &d) == GDS_KERR_TRUNCATED && d == 16);            /* no room for the table */
    CHECK(blosc_mutated(lz, 0, 2, 1, c->stored - 15, &d) == GDS_KERR_SHORT);                 /* 15 bytes */
    /* block-start table and stream sizes */
    CHECK(blosc_mutated(lz, 16, (uint32_t)c->stored - 3, 4, 0, &d) == GDS_KERR_TRUNCATED);  /* start past the end */
    CHECK(blosc_mutated(lz, 20, 0xffffffffu, 4, 0, &d) == GDS_KERR_TRUNCATED);              /* negative start */
    uint32_t start0 = get_le32(c->bytes + 16);
    CHECK(blosc_mutated(lz, start0, 0x7fffffff, 4, 0, &d) == GDS_KERR_TRUNCATED && d == start0); /* size too big */
    CHECK(blosc_mutated(lz, start0, 0xfffffff0u, 4, 0, &d) == GDS_KERR_TRUNCATED);          /* negative size */
    CHECK(blosc_mutated(lz, start0, 0, 4, 0, &d) == GDS_KERR_TRUNCATED);                    /* empty stream */
    /* garbage in a stream: the decompressor's error, never a read outside */
    uint32_t s0 = get_le32(c->bytes + start0);
    int why = blosc_mutated(lz, start0 + 4 + s0 / 3, 0xdeadbeef, 4, 0, &d);
    CHECK_MSG(why == GDS_KERR_DECODE || why == GDS_KERR_SIZE || why == 0, "%d", why);
    /* zstd: a stream's frame is checked before nvCOMP sees it */
    const blosc_chunk_t *z = blosc_chunk(zs);
    uint32_t zstart = get_le32(z->bytes + 16);
    CHECK(blosc_mutated(zs, zstart + 4, 0, 1, 0, &d) == GDS_KERR_HEADER);                   /* frame magic */
    /* MEMCPYED: cbytes must be nbytes + 16 */
    CHECK(blosc_mutated(mc, 12, 1017, 4, 0, &d) == GDS_KERR_PARAM);
    CHECK(blosc_mutated(mc, 12, 1015, 4, 0, &d) == GDS_KERR_PARAM && d == 1015);
    CHECK(blosc_mutated(mc, 0, 2, 1, 1, &d) == GDS_KERR_TRUNCATED);
    /* trailing bytes after cbytes are ignored, as c-blosc ignores them */
    bytes_t longer = bytes_new(c->stored + 100), want = blosc_data(c->typesize, c->elements);
    memcpy(longer.p, c->bytes, c->stored);
    memset(longer.p + c->stored, 0xee, 100);
    unsigned char *out = malloc(want.n);
    CHECK(blosc_model(longer.p, longer.n, want.n, out, &d) == 0 && !memcmp(out, want.p, want.n));
    free(out);
    free(want.p);
    free(longer.p);
}

/* The CPU reference encoder (the GPU tests' source of blosc chunks) against
 * the reference decoder and the GPU model. */
static void test_blosc_roundtrip(void)
{
    if (!ref.lz4 || !ref.zstd)
        return;
    const size_t sizes[] = {100, 127, 128, 5000, 65536, 65537 * 3, 400000};
    const size_t tss[] = {1, 2, 3, 4, 8, 16, 17};
    int bad = 0, cases = 0, memcpyed = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t ti = 0; ti < sizeof tss / sizeof tss[0]; ti++)
            for (int sh = 0; sh < 3; sh++)
                for (unsigned code = 1; code <= 5; code += 4) {
                    /* whole elements, or not (a filter before blosc, fletcher32 say, adds bytes) */
                    size_t n = code == 1 ? sizes[si] / tss[ti] * tss[ti] : sizes[si];
                    bytes_t in = bytes_new(n), enc = {NULL, 0}, dec = {NULL, 0};
                    make_data(si % 2 ? DATA_SPARSE_INT : (ti % 3 == 2 ? DATA_RANDOM : DATA_FLOAT_FIELD), in.p, n,
                              (unsigned)(si * 31 + ti));
                    int clevel = (int)((si + ti + (size_t)sh) % 10);
                    bool ok = ref_blosc(&in, &enc, tss[ti], clevel, sh, code) && ref_unblosc(&enc, &dec) &&
                              dec.n == n && !memcmp(dec.p, in.p, n);
                    unsigned char *got = malloc(n ? n : 1);
                    uint64_t d;
                    ok = ok && blosc_model(enc.p, enc.n, n, got, &d) == 0 && !memcmp(got, in.p, n);
                    memcpyed += enc.n >= 16 && (enc.p[2] & 2);
                    if (!ok && bad++ < 5)
                        fprintf(stderr, "blosc round trip: %zu bytes, typesize %zu, shuffle %d, code %u, clevel %d\n",
                                n, tss[ti], sh, code, clevel);
                    cases++;
                    free(got);
                    free(in.p);
                    free(enc.p);
                    free(dec.p);
                }
    CHECK_MSG(bad == 0, "%d of %d blosc round trips failed", bad, cases);
    CHECK(memcpyed > 0);
}

/* ---- blosc encoding: the GPU encoder's code on the host ---- */

/* The blosc step gds_codec_encode plans for a pipeline of blosc alone. */
static gds_codec_step_t blosc_step(unsigned ts, unsigned clevel, unsigned shuffle, unsigned code, bool optional,
                                   size_t n)
{
    gds_codec_pipeline_t p = pipeline(n, ts);
    const unsigned cd[] = {2, 2, ts, (unsigned)n, clevel, shuffle, code};
    pipe_add(&p, GDS_FILTER_BLOSC, optional ? GDS_FILTER_FLAG_OPTIONAL : 0, 7, cd);
    gds_codec_step_t s;
    memset(&s, 0, sizeof s);
    CHECK(blosc_encode_step(&p, &s));
    return s;
}

/* Which pipelines the GPU would encode more slowly than HDF5's filter (or
 * was not measured on): zstd inputs inside bitshuffle blocks over 128 KiB
 * (plain zstd chunks of any size are compressed in pieces of 32-128 KiB,
 * then spliced). */
static void test_encodes_slowly(void)
{
    gds_codec_pipeline_t p = pipeline(32 << 10, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, 1, 1, CD_ZSTD3);
    CHECK(!gds_codec_encodes_slowly(&p)); /* a 32 KiB chunk */
    p = pipeline((32 << 10) + 4, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, 0, 1, CD_SHUF4);
    pipe_add(&p, GDS_FILTER_ZSTD, 1, 1, CD_ZSTD3);
    CHECK(!gds_codec_encodes_slowly(&p)); /* two pieces */
    p = pipeline(64 << 20, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, 1, 1, CD_ZSTD3);
    CHECK(!gds_codec_encodes_slowly(&p)); /* 2048 pieces */
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 1, 6, CD_BS_ZSTD); /* the default block: 8 KiB */
    CHECK(!gds_codec_encodes_slowly(&p));
    const unsigned bs_32k_elems[] = {0, 4, 4, 32768, 3, 5}, bs_40k_elems[] = {0, 4, 4, 40960, 3, 5};
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 1, 6, bs_32k_elems); /* 128 KiB blocks */
    CHECK(!gds_codec_encodes_slowly(&p));
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 1, 6, bs_40k_elems); /* 160 KiB blocks */
    CHECK(gds_codec_encodes_slowly(&p));
    p = pipeline(4 << 10, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, 1, 6, bs_40k_elems); /* 160 KiB blocks in a 4 KiB chunk: 4 KiB */
    CHECK(!gds_codec_encodes_slowly(&p));
    /* the level sets the pieces: fastest up to 2, larger from 3 and 6 */
    CHECK(gds_codec_zstd_piece(-5) == 32768 && gds_codec_zstd_piece(1) == 32768 && gds_codec_zstd_piece(2) == 32768);
    CHECK(gds_codec_zstd_piece(3) == 65536 && gds_codec_zstd_piece(5) == 65536);
    CHECK(gds_codec_zstd_piece(6) == 131072 && gds_codec_zstd_piece(22) == 131072);
    const unsigned blosc_zstd[] = {2, 2, 4, 1 << 20, 5, 1, 5};
    p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, 1, 7, blosc_zstd); /* the encoder's 32 KiB blocks */
    CHECK(!gds_codec_encodes_slowly(&p));
    p = pipeline(4 << 20, 4);
    pipe_add(&p, GDS_FILTER_LZ4, 1, 1, CD_LZ4_0);
    CHECK(!gds_codec_encodes_slowly(&p));
    p = pipeline(1 << 20, 4);
    pipe_add(&p, 4 /* szip: no GPU codec at all, so not "slowly" */, 0, 0, NULL);
    CHECK(!gds_codec_encodes_slowly(&p));
}

/* The encoder's block size, flags and streams. */
static void test_blosc_encode_plan(void)
{
    const size_t MB = 1 << 20;
    gds_codec_step_t s = blosc_step(4, 5, 1, 1, false, MB);
    CHECK(s.elem == 4 && s.shuffle == 1 && s.level == 5);
    CHECK(gds_blosc_encode_blocksize(&s, MB) == 4 * 65536); /* 4 streams of 64 KiB */
    CHECK(gds_blosc_encode_flags(&s, 4 * 65536) == (GDS_BLOSC_DOSHUFFLE | (GDS_BLOSC_FORMAT_LZ4 << 5)));
    size_t nstreams, longest;
    gds_blosc_encode_streams(&s, MB, &nstreams, &longest);
    CHECK(nstreams == 16 && longest == 65536);
    /* an edge: 3 whole blocks and a partial one of 1000 bytes in one stream */
    gds_blosc_encode_streams(&s, 3 * 4 * 65536 + 1000, &nstreams, &longest);
    CHECK(nstreams == 13 && longest == 65536);
    CHECK(gds_blosc_encode_blocksize(&s, 1000) == 992 && gds_blosc_encode_blocksize(&s, 20) == 20);
    gds_blosc_encode_streams(&s, 1000, &nstreams, &longest); /* one block of 992: 4 streams of 248; 8 bytes */
    CHECK(nstreams == 5 && longest == 248);
    /* 200 bytes of f4: one block of 192 bytes, 48 elements: not split */
    CHECK(gds_blosc_encode_blocksize(&s, 200) == 192 && (gds_blosc_encode_flags(&s, 192) & GDS_BLOSC_DONT_SPLIT));
    s = blosc_step(17, 5, 2, 2, false, MB); /* lz4hc: LZ4 streams too; typesize > 16: not split */
    CHECK(gds_blosc_encode_blocksize(&s, MB) == 65536 / 136 * 136);
    CHECK(gds_blosc_encode_flags(&s, 65416) ==
          (GDS_BLOSC_DOBITSHUFFLE | GDS_BLOSC_DONT_SPLIT | (GDS_BLOSC_FORMAT_LZ4 << 5)));
    /* zstd: whole blocks of at most 32 KiB (nvCOMP's zstd compression is
     * slow on larger inputs), never split, zstd's format in the flags */
    s = blosc_step(4, 5, 1, 5, false, MB);
    CHECK(s.compressor == GDS_BLOSC_CODE_ZSTD && gds_blosc_encode_blocksize(&s, MB) == 32768);
    CHECK(gds_blosc_encode_flags(&s, 32768) ==
          (GDS_BLOSC_DOSHUFFLE | GDS_BLOSC_DONT_SPLIT | (GDS_BLOSC_FORMAT_ZSTD << 5)));
    gds_blosc_encode_streams(&s, MB + 100, &nstreams, &longest);
    CHECK(nstreams == 33 && longest == 32768);
    s = blosc_step(12, 5, 2, 5, false, MB); /* blocks of whole groups of 8 elements */
    CHECK(gds_blosc_encode_blocksize(&s, MB) == 32768 / 96 * 96);
    s = blosc_step(300, 5, 0, 1, false, MB); /* c-blosc's typesize for more than 255 bytes: 1 */
    CHECK(s.elem == 1 && gds_blosc_encode_blocksize(&s, MB) == 65536 && gds_blosc_encode_flags(&s, 65536) == 0x20);
    s = blosc_step(0, 5, 0, 1, false, MB);
    CHECK(s.elem == 1);
    s = blosc_step(8, 0, 1, 1, false, MB);
    CHECK(gds_blosc_encode_memcpy_only(&s, MB)); /* clevel 0 */
    s = blosc_step(8, 1, 1, 1, false, MB);
    CHECK(!gds_blosc_encode_memcpy_only(&s, MB) && !gds_blosc_encode_memcpy_only(&s, 128) &&
          gds_blosc_encode_memcpy_only(&s, 127));
}

/* Each block's shuffle as the encoder's units do it, against c-blosc's
 * (codec_ref.h) and undone by the decoder's gds_blosc_block_byte. */
static void test_blosc_shuffle_units(void)
{
    const unsigned tss[] = {1, 2, 3, 4, 8, 12, 16, 17, 255};
    const unsigned sizes[] = {1, 7, 64, 100, 1000, 2040, 4096, 4099, 65536, 65541};
    const unsigned flag_sets[] = {0, GDS_BLOSC_DOSHUFFLE, GDS_BLOSC_DOBITSHUFFLE};
    int bad = 0, cases = 0;
    for (size_t f = 0; f < 3; f++)
        for (size_t t = 0; t < sizeof tss / sizeof tss[0]; t++)
            for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
                unsigned flags = flag_sets[f], ts = tss[t], bsize = sizes[z];
                unsigned char *in = malloc(bsize), *got = malloc(bsize), *want = malloc(bsize);
                make_data(DATA_RANDOM, in, bsize, bsize + ts);
                memset(got, 0xee, bsize);
                for (gds_u32 u = 0; u < gds_blosc_shuffle_units(flags, ts, bsize); u++)
                    gds_blosc_shuffle_unit(in, got, flags, ts, bsize, u);
                ref_blosc_block_shuffle(in, want, bsize, flags, ts, false);
                bool ok = memcmp(got, want, bsize) == 0;
                for (unsigned o = 0; ok && o < bsize; o++)
                    ok = gds_blosc_block_byte(got, flags, ts, bsize, o) == in[o];
                if (!ok && bad++ < 5)
                    fprintf(stderr, "blosc shuffle units: flags %u, typesize %u, %u bytes\n", flags, ts, bsize);
                cases++;
                free(in);
                free(got);
                free(want);
            }
    CHECK_MSG(bad == 0, "%d of %d blosc block shuffles differ", bad, cases);
    /* a chunk's units: whole blocks, then a partial one with more units (not transformed) */
    const unsigned ts = 4, bs = 4 * 65536;
    const size_t n = 2 * (size_t)bs + 4 * 1001 + 3;
    unsigned char *in = malloc(n), *got = malloc(n), *want = malloc(n);
    make_data(DATA_FLOAT_FIELD, in, n, 5);
    for (gds_u64 u = 0; u < gds_blosc_shuffle_total(GDS_BLOSC_DOBITSHUFFLE, ts, n, bs); u++)
        gds_blosc_shuffle_at(in, got, GDS_BLOSC_DOBITSHUFFLE, ts, n, bs, u);
    for (size_t k = 0; k * bs < n; k++)
        ref_blosc_block_shuffle(in + k * bs, want + k * bs, n - k * bs < bs ? n - k * bs : bs, GDS_BLOSC_DOBITSHUFFLE,
                                ts, false);
    CHECK(gds_blosc_shuffle_total(GDS_BLOSC_DOBITSHUFFLE, ts, n, bs) == 2 * 65536 / 8 + 4 * 1001 + 3);
    CHECK(memcmp(got, want, n) == 0);
    free(in);
    free(got);
    free(want);
}

/* The data as c-blosc (ref_unblosc), a c-blosc from before the DONT_SPLIT
 * flag (the flag cleared: it splits by the old rule alone) and the GPU
 * decoder's model read it back. */
static bool blosc_reads_back(const bytes_t *enc, const bytes_t *want)
{
    bytes_t dec = {NULL, 0}, old = bytes_new(enc->n), old_dec = {NULL, 0};
    memcpy(old.p, enc->p, enc->n);
    old.p[2] &= (unsigned char)~GDS_BLOSC_DONT_SPLIT;
    unsigned char *got = malloc(want->n);
    uint64_t d;
    bool ok = ref_unblosc(enc, &dec) && dec.n == want->n && !memcmp(dec.p, want->p, want->n) &&
              ref_unblosc(&old, &old_dec) && old_dec.n == want->n && !memcmp(old_dec.p, want->p, want->n) &&
              blosc_model(enc->p, enc->n, want->n, got, &d) == 0 && !memcmp(got, want->p, want->n);
    free(dec.p);
    free(old.p);
    free(old_dec.p);
    free(got);
    return ok;
}

/* The encoder's frames for each shuffle, typesize and size (edges: not a
 * whole number of elements or blocks, under 128 bytes), compressible,
 * incompressible and mixed data, mandatory and optional filters, read back
 * by c-blosc's rules and the GPU decoder's model. */
static void test_blosc_encode_frames(void)
{
    if (!ref.lz4) {
        printf("liblz4 not found: blosc encoding model skipped\n");
        return;
    }
    const unsigned tss[] = {1, 2, 3, 4, 8, 16, 17, 255};
    const size_t sizes[] = {100, 128, 1000, 4096 + 3, 3 * 65536 + 5, (1 << 20) + 6 * 2048 + 2};
    const data_kind_t kinds[] = {DATA_FLOAT_FIELD, DATA_SPARSE_INT, DATA_RANDOM};
    int bad = 0, cases = 0, count[3] = {0, 0, 0};
    for (size_t t = 0; t < sizeof tss / sizeof tss[0]; t++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
            for (unsigned sh = 0; sh <= 2; sh++)
                for (size_t k = 0; k < 3; k++)
                    for (int optional = 0; optional <= 1; optional++) {
                        size_t n = sizes[z];
                        gds_codec_step_t s = blosc_step(tss[t], 5, sh, 1 + (unsigned)(z % 2), optional, n);
                        bytes_t in = bytes_new(n), enc = {NULL, 0};
                        make_data(kinds[k], in.p, n, (unsigned)(t * 7 + z));
                        size_t raw = 0;
                        int how = blosc_encode_model(&s, &in, false, &enc, &raw);
                        bool ok = how >= 0;
                        if (how == GDS_BLOSC_STORE_SKIPPED)
                            ok = optional && enc.n == n && !memcmp(enc.p, in.p, n);
                        else {
                            size_t bs = gds_blosc_encode_blocksize(&s, n);
                            ok = ok && blosc_reads_back(&enc, &in) && enc.p[0] == 2 && enc.p[1] == 1 &&
                                 enc.p[2] >> 5 == GDS_BLOSC_FORMAT_LZ4 && enc.p[3] == s.elem &&
                                 get_le32(enc.p + 4) == n && get_le32(enc.p + 8) == bs &&
                                 get_le32(enc.p + 12) == enc.n && (optional ? enc.n < n : enc.n <= n + 16) &&
                                 ((enc.p[2] & GDS_BLOSC_MEMCPYED) != 0) == (how == GDS_BLOSC_STORE_MEMCPYED);
                        }
                        /* random data is never compressed, sparse labels always
                         * (but under 128 bytes: MEMCPYED); the float field
                         * depends on the typesize and shuffle */
                        int none = optional ? GDS_BLOSC_STORE_SKIPPED : GDS_BLOSC_STORE_MEMCPYED;
                        if (kinds[k] == DATA_RANDOM || n < GDS_BLOSC_MIN_COMPRESS)
                            ok = ok && how == none;
                        else if (kinds[k] == DATA_SPARSE_INT && n >= 4096)
                            ok = ok && how == GDS_BLOSC_STORE_STREAMS;
                        count[how >= 0 ? how : 0]++;
                        if (!ok && bad++ < 5)
                            fprintf(stderr,
                                    "blosc encode model: %zu bytes, typesize %u, shuffle %u, kind %d, optional %d: "
                                    "stored %d (%zu bytes)\n",
                                    n, tss[t], sh, (int)kinds[k], optional, how, enc.n);
                        cases++;
                        free(in.p);
                        free(enc.p);
                    }
    CHECK_MSG(bad == 0, "%d of %d blosc encodings wrong", bad, cases);
    CHECK(count[GDS_BLOSC_STORE_STREAMS] && count[GDS_BLOSC_STORE_MEMCPYED] && count[GDS_BLOSC_STORE_SKIPPED]);

    /* blocks that do not compress among ones that do: stored raw inside a frame */
    const size_t n = 4 << 20;
    bytes_t in = bytes_new(n), enc = {NULL, 0};
    make_data(DATA_FLOAT_FIELD, in.p, n / 2, 1);
    make_data(DATA_RANDOM, in.p + n / 2, n / 2, 2);
    for (unsigned sh = 0; sh <= 2; sh++) {
        gds_codec_step_t s = blosc_step(4, 5, sh, 1, true, n);
        size_t raw = 0;
        int how = blosc_encode_model(&s, &in, false, &enc, &raw);
        CHECK_MSG(how == GDS_BLOSC_STORE_STREAMS && raw >= n / 2 / 65536 && enc.n < n && blosc_reads_back(&enc, &in),
                  "mixed data, shuffle %u: stored %d, %zu raw streams, %zu bytes", sh, how, raw, enc.n);
        free(enc.p);
        /* a stream whose LZ4 form is as long as it is: stored raw (its size field its length) */
        bytes_t small = {in.p, 300000};
        how = blosc_encode_model(&s, &small, true, &enc, &raw);
        CHECK_MSG(how == GDS_BLOSC_STORE_STREAMS && raw >= 1 && blosc_reads_back(&enc, &small) &&
                      get_le32(enc.p + get_le32(enc.p + 16)) == 65536,
                  "forced raw stream, shuffle %u: stored %d, %zu raw", sh, how, raw);
        free(enc.p);
    }
    /* clevel 0: MEMCPYED (mandatory) or skipped (optional), as hdf5plugin's filter gives up */
    gds_codec_step_t s0 = blosc_step(4, 0, 1, 1, false, n);
    size_t raw;
    CHECK(blosc_encode_model(&s0, &in, false, &enc, &raw) == GDS_BLOSC_STORE_MEMCPYED && enc.n == n + 16 &&
          blosc_reads_back(&enc, &in));
    free(enc.p);
    s0 = blosc_step(4, 0, 1, 1, true, n);
    CHECK(blosc_encode_model(&s0, &in, false, &enc, &raw) == GDS_BLOSC_STORE_SKIPPED && enc.n == n);
    free(enc.p);
    free(in.p);
}

static void test_error_texts(void)
{
    gds_codec_pipeline_t p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, 1, 1, CD_SHUF4);
    pipe_add(&p, GDS_FILTER_DEFLATE, 1, 1, CD_DEFL6);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    char t[300];
    gds_codec_error_text(&p, (3u << 8) | GDS_KERR_CHECKSUM, ((uint64_t)0x12345678 << 32) | 0x9abcdef0, t, sizeof t);
    CHECK_MSG(strstr(t, "filter 2 (fletcher32)") && strstr(t, "0x12345678") && strstr(t, "0x9abcdef0"), "%s", t);
    gds_codec_error_text(&p, (2u << 8) | GDS_KERR_CHECKSUM, 1, t, sizeof t);
    CHECK_MSG(strstr(t, "deflate") && strstr(t, "Adler-32"), "%s", t);
    gds_codec_error_text(&p, (2u << 8) | GDS_KERR_HEADER, 0x7801, t, sizeof t);
    CHECK_MSG(strstr(t, "zlib") && strstr(t, "0x78 0x01"), "%s", t);
    gds_codec_error_text(&p, (2u << 8) | GDS_KERR_DECODE, 12, t, sizeof t);
    CHECK_MSG(strstr(t, "nvCOMP") && strstr(t, "cannot decompress"), "%s", t);
    gds_codec_pipeline_t pb = pipeline(1 << 20, 4);
    const unsigned cd_blosc[] = {2, 2, 4, 1 << 20, 5, 1, 1};
    pipe_add(&pb, GDS_FILTER_BLOSC, 1, 7, cd_blosc);
    gds_codec_error_text(&pb, (1u << 8) | GDS_KERR_UNSUPPORTED, GDS_BLOSC_FORMAT_BLOSCLZ, t, sizeof t);
    CHECK_MSG(strstr(t, "filter 0 (blosc)") && strstr(t, "blosclz") && strstr(t, "CPU"), "%s", t);
    for (unsigned r = 1; r <= 11; r++) {
        gds_codec_error_text(&p, (1u << 8) | r, 5, t, sizeof t);
        CHECK_MSG(strstr(t, "shuffle") && strlen(t) > 20, "%s", t);
    }
    /* the errno of each finding, and its filter: sizes apart from corrupt streams */
    static const struct {
        unsigned code;
        uint64_t detail;
        int err;
        unsigned filter;
    } kinds[] = {
        {(2u << 8) | GDS_KERR_CHECKSUM, 1, EBADMSG, GDS_FILTER_DEFLATE},
        {(3u << 8) | GDS_KERR_CHECKSUM, 1, EBADMSG, GDS_FILTER_FLETCHER32},
        {(2u << 8) | GDS_KERR_HEADER, 0x7801, EBADMSG, GDS_FILTER_DEFLATE},
        {(2u << 8) | GDS_KERR_TRUNCATED, 9, EBADMSG, GDS_FILTER_DEFLATE},
        {(2u << 8) | GDS_KERR_DECODE, 12, EBADMSG, GDS_FILTER_DEFLATE},
        {(2u << 8) | GDS_KERR_DECODE, 15, ERANGE, GDS_FILTER_DEFLATE}, /* output buffer too small */
        {(2u << 8) | GDS_KERR_SIZE, 100, ERANGE, GDS_FILTER_DEFLATE},
        {(3u << 8) | GDS_KERR_SHORT, 3, ERANGE, GDS_FILTER_FLETCHER32},
        {(1u << 8) | GDS_KERR_STORED, 7, ERANGE, GDS_FILTER_SHUFFLE},
        {(2u << 8) | GDS_KERR_ORIGSIZE, 7, ERANGE, GDS_FILTER_DEFLATE},
        {(2u << 8) | GDS_KERR_PARAM, 7, EBADMSG, GDS_FILTER_DEFLATE},
        {GDS_KERR_STORED, 7, ERANGE, 0},  /* the pipeline's */
        {(9u << 8) | GDS_KERR_HEADER, 0, EBADMSG, 0}, /* past the pipeline's filters */
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        unsigned filter = 99;
        int err = gds_codec_error_errno(&p, kinds[i].code, kinds[i].detail, &filter);
        CHECK_MSG(err == kinds[i].err && filter == kinds[i].filter, "code 0x%x detail %llu: errno %d filter %u", kinds[i].code,
                  (unsigned long long)kinds[i].detail, err, filter);
    }
    unsigned filter = 99;
    CHECK(gds_codec_error_errno(&pb, (1u << 8) | GDS_KERR_UNSUPPORTED, 0, &filter) == EOPNOTSUPP &&
          filter == GDS_FILTER_BLOSC);
}

/* A decode's findings: the lowest failing chunk for gds_codec_decode, every
 * chunk's first finding for gds_codec_decode_findings, and whether a
 * decompressor met garbage (the other chunks then undefined). */
static void test_error_list(void)
{
    unsigned code_of[6] = {0};
    uint64_t detail_of[6] = {0};
    error_list_t e = {.first = SIZE_MAX, .code_of = code_of, .detail_of = detail_of};
    gds_codec_record_error(&e, 4, (3u << 8) | GDS_KERR_CHECKSUM, 44);
    gds_codec_record_error(&e, 1, (2u << 8) | GDS_KERR_CHECKSUM, 11);
    gds_codec_record_error(&e, 4, (2u << 8) | GDS_KERR_HEADER, 45); /* a later stage's: the first stays */
    CHECK(e.first == 1 && e.code == ((2u << 8) | GDS_KERR_CHECKSUM) && e.detail == 11 && !e.garbage);
    CHECK(code_of[4] == ((3u << 8) | GDS_KERR_CHECKSUM) && detail_of[4] == 44 && code_of[1] && detail_of[1] == 11);
    CHECK(!code_of[0] && !code_of[2] && !code_of[3] && !code_of[5]);
    gds_codec_record_error(&e, 5, (2u << 8) | GDS_KERR_DECODE, 12);
    CHECK(e.garbage && e.first == 1 && code_of[5] == ((2u << 8) | GDS_KERR_DECODE));
    error_list_t sizes = {.first = SIZE_MAX};
    gds_codec_record_error(&sizes, 2, (2u << 8) | GDS_KERR_SIZE, 100);
    CHECK(sizes.garbage && sizes.first == 2); /* without per-chunk arrays: the lowest alone */
    error_list_t plain = {.first = SIZE_MAX};
    gds_codec_record_error(&plain, 0, (1u << 8) | GDS_KERR_UNSUPPORTED, 0);
    gds_codec_record_error(&plain, 3, (1u << 8) | GDS_KERR_STORED, 0);
    CHECK(!plain.garbage && plain.first == 0);
    /* no codec: a failure with EINVAL, nothing found */
    gds_codec_pipeline_t p = pipeline(1 << 20, 4);
    pipe_add(&p, GDS_FILTER_DEFLATE, 1, 1, CD_DEFL6);
    gds_codec_finding_t found[1];
    size_t nfound = 7, bad = 7;
    bool others = false;
    gds_status_t st;
    CHECK(gds_codec_decode_findings(NULL, &p, NULL, 0, NULL, &bad, found, &nfound, &others, &st) < 0 &&
          st.err == 22 && nfound == 0 && bad == 0 && others);
    gds_codec_finding_t f = {.chunk = 0, .err = EBADMSG, .filter = GDS_FILTER_DEFLATE,
                             .code = (1u << 8) | GDS_KERR_CHECKSUM, .detail = 1};
    char t[300];
    gds_codec_finding_text(&p, &f, t, sizeof t);
    CHECK_MSG(strstr(t, "filter 0 (deflate)") && strstr(t, "Adler-32"), "%s", t);
}

static void test_absent(void)
{
    /* an explicit nvCOMP path is the only one tried */
    setenv("H5GDS_NVCOMP_LIB", "/nonexistent/libnvcomp.so.6", 1);
    const char *why = NULL;
    CHECK(gds_nvcomp_load(&why) == NULL);
    CHECK_MSG(why && strstr(why, "H5GDS_NVCOMP_LIB") && strstr(why, "/nonexistent/libnvcomp.so.6"), "%s",
              why ? why : "(null)");
    gds_codec_t *c = (gds_codec_t *)1;
    gds_status_t st = {0, ""};
    CHECK(gds_codec_open(&c, NULL, &st) == -1 && c == NULL);
    CHECK_MSG(strstr(st.msg, "CUDA") || strstr(st.msg, "nvCOMP"), "%s", st.msg);
    printf("open without nvCOMP: %s\n", st.msg);

    gds_codec_pipeline_t p = pipeline(4096, 1);
    gds_codec_chunk_t ch = {0};
    size_t bad = 99;
    memset(&st, 0, sizeof st);
    CHECK(gds_codec_decode(NULL, &p, &ch, 1, NULL, &bad, &st) == -1 && st.msg[0]);
    memset(&st, 0, sizeof st);
    CHECK(gds_codec_encode(NULL, &p, NULL, NULL, NULL, NULL, 1, NULL, &st) == -1 && st.msg[0]);
    CHECK(strcmp(gds_codec_describe(NULL), "") == 0);
    gds_codec_close(NULL);
}

/* The widest sub-batch search (gds_codec_widest_fitting): for every bound
 * and every width up to which memory fits, the widest that fits (1 when
 * none does), in no more calls than a binary search needs. */
typedef struct {
    size_t limit, calls;
} fit_probe_t;

static bool fits_up_to(void *arg, size_t m)
{
    fit_probe_t *f = arg;
    f->calls++;
    return m <= f->limit;
}

static void test_widest_fitting(void)
{
    size_t bad = 0, first_hi = 0, first_limit = 0, first_got = 0, most_calls = 0;
    for (size_t hi = 0; hi <= 300; hi++)
        for (size_t limit = 0; limit <= 310; limit++) {
            fit_probe_t f = {limit, 0};
            size_t got = gds_codec_widest_fitting(hi, fits_up_to, &f);
            size_t want = hi == 0 ? 1 : limit < 1 ? 1 : limit < hi ? limit : hi;
            if (got != want && bad++ == 0) {
                first_hi = hi;
                first_limit = limit;
                first_got = got;
            }
            most_calls = f.calls > most_calls ? f.calls : most_calls;
        }
    CHECK_MSG(bad == 0, "widest fitting: %zu wrong, the first: bound %zu, fits up to %zu: %zu", bad, first_hi,
              first_limit, first_got);
    CHECK_MSG(most_calls <= 10, "widest fitting: %zu calls of fits for a bound up to 300", most_calls);
}

/* Read batches by pipeline (gds_codec_read_batch_goal): chunks of one
 * stream each and Blosc take the most the caller allows, chunks of many
 * streams (bitshuffle, LZ4 in small blocks) or none 128 MiB decoded where
 * the input comes fast, the most allowed from a disk. */
static void test_read_batch_goal(void)
{
    const size_t MB = 1 << 20;
    const unsigned cd_lz4_64k[] = {65536}, cd_lz4_2m[] = {2u << 20}, cd_blosc[] = {2, 2, 4, 0, 5, 1, 1};
    struct {
        unsigned id;
        size_t ncd;
        const unsigned *cd;
        size_t chunk, max, want;
    } cases[] = {
        {GDS_FILTER_DEFLATE, 1, CD_DEFL6, MB, 512, 512},
        {GDS_FILTER_ZSTD, 1, CD_ZSTD3, MB, 512, 512},
        {GDS_FILTER_LZ4, 1, CD_LZ4_0, MB, 512, 512},        /* one block per chunk */
        {GDS_FILTER_LZ4, 1, cd_lz4_2m, MB, 512, 512},       /* a block larger than the chunk */
        {GDS_FILTER_LZ4, 1, cd_lz4_64k, MB, 512, 128},      /* 16 blocks per chunk */
        {GDS_FILTER_BITSHUFFLE, 5, CD_BS_LZ4, MB, 512, 128},
        {GDS_FILTER_BITSHUFFLE, 6, CD_BS_ZSTD, 64 << 10, 8192, 2048},
        {GDS_FILTER_BITSHUFFLE, 3, CD_BS_PLAIN, MB, 512, 128},
        {GDS_FILTER_BITSHUFFLE, 5, CD_BS_LZ4, MB, 64, 64},  /* the caller's limit wins */
        {GDS_FILTER_BITSHUFFLE, 5, CD_BS_LZ4, 256 * MB, 2, 1},
        {GDS_FILTER_BLOSC, 7, cd_blosc, MB, 512, 512},
        {GDS_FILTER_SHUFFLE, 1, CD_SHUF4, MB, 512, 128},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gds_codec_pipeline_t p = pipeline(cases[i].chunk, 4);
        pipe_add(&p, cases[i].id, 1, cases[i].ncd, cases[i].cd);
        size_t got = gds_codec_read_batch_goal(&p, cases[i].max, true);
        CHECK_MSG(gds_codec_read_batch_goal(&p, cases[i].max, false) == cases[i].max, "case %zu from a disk", i);
        CHECK_MSG(got == cases[i].want, "case %zu (filter %u): %zu chunks per batch, expected %zu", i, cases[i].id,
                  got, cases[i].want);
    }
    gds_codec_pipeline_t p = pipeline(MB, 4);
    pipe_add(&p, 30000, 1, 0, NULL); /* not decodable: the caller's limit */
    CHECK(gds_codec_read_batch_goal(&p, 77, true) == 77);
    CHECK(gds_codec_read_batch_goal(&p, 0, true) == 1);
    CHECK(gds_codec_read_batch_goal(NULL, 5, true) == 5);
    CHECK(gds_codec_read_batch_chunks(NULL, &p, MB, 9, true) == 9); /* no codec: the goal */
}

/* A read's last batch (gds_codec_read_tail_chunks): Deflate chunks from a
 * disk, the fewest whose stored bytes take as long to come as nvCOMP's
 * decode of the batch before them, where the segments decode them quicker
 * than nvCOMP; none from a fast disk (page cache), where the segments are
 * slower (small stored chunks), with the segments off, or where it would
 * hold every chunk left; none for other compressors. */
static void test_read_tail(void)
{
    const size_t MB = 1 << 20;
    gds_codec_pipeline_t defl = pipeline(MB, 4);
    pipe_add(&defl, GDS_FILTER_SHUFFLE, 1, 1, CD_SHUF4);
    pipe_add(&defl, GDS_FILTER_DEFLATE, 1, 1, CD_DEFL6);
    unsetenv("H5GDS_INFLATE_SPLIT");
    const double stored = 0.47e6; /* h5py's float field, 1 MiB chunks: ratio 2.2 */
    /* nvCOMP: 0.115 ms x 488 KiB = 56.2 ms; a chunk comes in 392 us at 1.2 GB/s: 144 chunks */
    size_t slow = gds_codec_read_tail_chunks(&defl, 500000, stored, 1.2e9, 512);
    CHECK_MSG(slow == 144, "1.2 GB/s: a last batch of %zu chunks, expected 144", slow);
    for (double gbps = 0.2; gbps < 3.0; gbps += 0.1) {
        size_t n = gds_codec_read_tail_chunks(&defl, 500000, stored, gbps * 1e9, 512);
        double read_ms = 1e3 * (double)n * stored / (gbps * 1e9), seg_ms = 13.5 + 0.125 * (double)n;
        CHECK_MSG(n == 0 || (n < 512 && read_ms >= 56.1 && read_ms < 56.2 + 0.5 && seg_ms <= 0.9 * 56.2),
                  "%.1f GB/s: a last batch of %zu chunks, read in %.1f ms, decoded in %.1f", gbps, n, read_ms,
                  seg_ms);
        if (gbps < 2.0)
            CHECK_MSG(n > 0, "%.1f GB/s: no last batch", gbps);
    }
    CHECK(gds_codec_read_tail_chunks(&defl, 500000, stored, 25e9, 512) == 0);  /* the page cache */
    CHECK(gds_codec_read_tail_chunks(&defl, 500000, stored, 2.6e9, 512) == 0); /* segments too slow */
    CHECK(gds_codec_read_tail_chunks(&defl, 500000, stored, 1.2e9, 144) == 0); /* every chunk left */
    CHECK(gds_codec_read_tail_chunks(&defl, 500000, stored, 1.2e9, 145) == 144);
    CHECK(gds_codec_read_tail_chunks(&defl, 500000, stored, 0, 512) == 0);
    CHECK(gds_codec_read_tail_chunks(&defl, 500000, 0, 1.2e9, 512) == 0);
    /* image tiles (ratio 4.6): nvCOMP decodes their small stored chunks quicker than the segments */
    CHECK(gds_codec_read_tail_chunks(&defl, 240000, 0.23e6, 1.8e9, 512) == 0);
    setenv("H5GDS_INFLATE_SPLIT", "0", 1);
    CHECK(gds_codec_read_tail_chunks(&defl, 500000, stored, 1.2e9, 512) == 0);
    unsetenv("H5GDS_INFLATE_SPLIT");
    /* zstd: none (block by block, a last batch of its own measured no quicker: bench/results/
     * 2026-11-28-h100-zstd-blocks) */
    gds_codec_pipeline_t zstd = pipeline(MB, 4);
    pipe_add(&zstd, GDS_FILTER_ZSTD, 1, 1, CD_ZSTD3);
    CHECK(gds_codec_read_tail_chunks(&zstd, 400000, 0.33e6, 1.2e9, 512) == 0);
    CHECK(gds_codec_read_tail_chunks(NULL, 500000, stored, 1.2e9, 512) == 0);
}

/* Deflate's decoder chosen by the model scaled by what was measured: the
 * model alone at first, the other decoder tried once, then the faster as
 * measured, the slower tried again after 32 batches where it is close. */
static void test_inflate_choose(void)
{
    const size_t MB = 1 << 20;
    unsetenv("H5GDS_INFLATE_SPLIT");
    gds_inflate_fit_t fit = {{0, 0}, {0, 0}};
    /* unmeasured: the model's choice */
    size_t cases[][3] = {{256, 500000, MB}, {256, 240000, MB}, {32, 500000, MB}, {512, 1100000, 2 * MB}};
    for (size_t k = 0; k < 4; k++) {
        gds_inflate_fit_t fresh = {{0, 0}, {0, 0}};
        CHECK(gds_codec_inflate_choose(&fresh, cases[k][0], cases[k][1], cases[k][2]) ==
              gds_codec_inflate_split_batch(cases[k][0], cases[k][1], cases[k][2]));
    }
    /* 256 chunks of 2 MiB, 1.1 MB stored: the model says segments (77.5 ms against 123.5) */
    const size_t n = 256, stored = 1100000, expect = 2 * MB;
    CHECK(gds_codec_inflate_choose(&fit, n, stored, expect));
    gds_codec_inflate_learn(&fit, true, n, stored, expect, 89000);
    CHECK(fit.scale[1] > 1.14 && fit.scale[1] < 1.15 && fit.scale[0] == 0);
    CHECK(!gds_codec_inflate_choose(&fit, n, stored, expect)); /* nvCOMP tried once */
    gds_codec_inflate_learn(&fit, false, n, stored, expect, 65000);
    for (int i = 0; i < 100; i++) /* then nvCOMP: 65 ms against 89, never within 1.25x */
        CHECK_MSG(!gds_codec_inflate_choose(&fit, n, stored, expect), "batch %d: segments", i);
    /* a new measurement moves the scale halfway */
    double before = fit.scale[0];
    gds_codec_inflate_learn(&fit, false, n, stored, expect, 2 * 65000);
    CHECK(fit.scale[0] > 1.49 * before && fit.scale[0] < 1.51 * before);
    gds_codec_inflate_learn(&fit, false, n, stored, expect, 0); /* ignored */
    gds_codec_inflate_learn(&fit, false, n, stored, expect, -1);
    CHECK(fit.scale[0] > 1.49 * before && fit.scale[0] < 1.51 * before);
    /* close decoders: the slower tried again after 32 batches of the faster */
    gds_inflate_fit_t close = {{0, 0}, {0, 0}};
    double nv = gds_codec_inflate_model_us(false, n, stored, expect), sp = gds_codec_inflate_model_us(true, n, stored, expect);
    close.scale[0] = 70000 / nv;
    close.scale[1] = 80000 / sp;
    int tried = 0, first = -1;
    for (int i = 0; i < 66; i++)
        if (gds_codec_inflate_choose(&close, n, stored, expect)) {
            tried++;
            first = first < 0 ? i : first;
        }
    CHECK_MSG(tried == 2 && first == 32, "segments tried %d times, first at batch %d", tried, first);
    /* far apart: never tried again */
    close.scale[1] = 200000 / sp;
    close.since[1] = 1000;
    CHECK(!gds_codec_inflate_choose(&close, n, stored, expect));
    /* H5GDS_INFLATE_SPLIT decides whatever was measured */
    setenv("H5GDS_INFLATE_SPLIT", "1", 1);
    CHECK(gds_codec_inflate_choose(&fit, n, stored, expect));
    setenv("H5GDS_INFLATE_SPLIT", "0", 1);
    CHECK(!gds_codec_inflate_choose(&close, 1, 500000, MB));
    unsetenv("H5GDS_INFLATE_SPLIT");
}

/* Which zstd batches are decoded block by block (chunks of more than one
 * block, batches of up to 256 MiB; H5GDS_ZSTD_BLOCKS 0 never, 1 always),
 * and the scratch a sub-batch counts: that of the widest batch taken up to
 * its width, so it never shrinks as the width grows. */
static void test_zstd_blocks_batches(void)
{
    const size_t MB = 1 << 20, KB = 1 << 10;
    unsetenv("H5GDS_ZSTD_BLOCKS");
    CHECK(gds_codec_zstd_blocks_batch(256, MB) && !gds_codec_zstd_blocks_batch(257, MB));
    CHECK(gds_codec_zstd_blocks_batch(1, 128 * KB + 1) && !gds_codec_zstd_blocks_batch(1, 128 * KB));
    CHECK(gds_codec_zstd_blocks_batch(64, 4 * MB) && !gds_codec_zstd_blocks_batch(65, 4 * MB));
    CHECK(gds_codec_zstd_blocks_batch(1, 256 * MB) && !gds_codec_zstd_blocks_batch(1, 257 * MB));
    CHECK(!gds_codec_zstd_blocks_batch(1, (size_t)1 << 31));
    size_t prev = 0;
    for (size_t n = 1; n <= 300; n++) {
        size_t r = gds_codec_zstd_blocks_reserve(n, MB);
        CHECK_MSG(r == gds_codec_zstd_blocks_bytes(n < 256 ? n : 256, MB) && r >= prev,
                  "%zu chunks of 1 MiB: %zu B of scratch counted", n, r);
        prev = r;
    }
    CHECK(gds_codec_zstd_blocks_reserve(64, 64 * KB) == 0 && gds_codec_zstd_blocks_reserve(1, 257 * MB) == 0);
    setenv("H5GDS_ZSTD_BLOCKS", "0", 1);
    CHECK(!gds_codec_zstd_blocks_batch(1, MB) && gds_codec_zstd_blocks_reserve(8, MB) == 0);
    setenv("H5GDS_ZSTD_BLOCKS", "1", 1);
    CHECK(gds_codec_zstd_blocks_batch(1000, MB) && gds_codec_zstd_blocks_batch(1, 64 * KB));
    CHECK(!gds_codec_zstd_blocks_batch(1, (size_t)1 << 31));
    CHECK(gds_codec_zstd_blocks_reserve(300, MB) == gds_codec_zstd_blocks_bytes(300, MB));
    CHECK(gds_codec_zstd_blocks_reserve(5, 64 * KB) == gds_codec_zstd_blocks_bytes(5, 64 * KB));
    unsetenv("H5GDS_ZSTD_BLOCKS");
}

/* A decode in the background reads the settings its caller copied, not the
 * environment as changed since (getenv is not safe against a concurrent
 * setenv); other threads, and that one after, read the environment. */
static void *debug_on_elsewhere(void *arg)
{
    *(bool *)arg = gds_codec_debug_on();
    return NULL;
}

static void test_settings_copy(void)
{
    const size_t MB = 1 << 20;
    setenv("H5GDS_CODEC_DEBUG", "1", 1);
    setenv("H5GDS_ZSTD_BLOCKS", "1", 1);
    unsetenv("H5GDS_INFLATE_SPLIT");
    setenv("H5GDS_INFLATE_SEGMENT_KIB", "1234567890123456789012345678901234567890", 1);
    gds_codec_settings_t copy;
    gds_codec_settings_copy(&copy);
    setenv("H5GDS_CODEC_DEBUG", "0", 1);
    setenv("H5GDS_ZSTD_BLOCKS", "0", 1);
    setenv("H5GDS_INFLATE_SPLIT", "1", 1);
    CHECK(!gds_codec_debug_on() && !gds_codec_zstd_blocks_batch(1000, MB));
    gds_codec_settings_use(&copy);
    CHECK(gds_codec_debug_on());
    CHECK(gds_codec_zstd_blocks_batch(1000, MB)); /* "1": every batch block by block */
    CHECK(gds_codec_setting(GDS_SET_INFLATE_SPLIT) == NULL);
    const char *seg = gds_codec_setting(GDS_SET_INFLATE_SEGMENT_KIB);
    CHECK_MSG(seg && strcmp(seg, "?") == 0, "a value too long for the copy: %s", seg ? seg : "(unset)");
    CHECK(gds_codec_setting(-1) == NULL && gds_codec_setting(GDS_SET_COUNT) == NULL);
    bool other = true;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, debug_on_elsewhere, &other) == 0 && pthread_join(t, NULL) == 0);
    CHECK_MSG(!other, "another thread read this thread's copy");
    gds_codec_settings_use(NULL);
    CHECK(!gds_codec_debug_on() && !gds_codec_zstd_blocks_batch(1000, MB));
    const char *split = gds_codec_setting(GDS_SET_INFLATE_SPLIT);
    CHECK(split && strcmp(split, "1") == 0);
    unsetenv("H5GDS_CODEC_DEBUG");
    unsetenv("H5GDS_ZSTD_BLOCKS");
    unsetenv("H5GDS_INFLATE_SPLIT");
    unsetenv("H5GDS_INFLATE_SEGMENT_KIB");
}

/* The compiled kernels kept on disk (codec_kernel_cache.c): what is stored
 * loads back, and nothing foreign, damaged or another key's does. */
static void test_kernel_cache(void)
{
    const char *ab_c[] = {"ab", "c"}, *a_bc[] = {"a", "bc"};
    CHECK(gds_codec_kernel_key(ab_c, 2) != gds_codec_kernel_key(a_bc, 2));
    CHECK(gds_codec_kernel_key(ab_c, 2) == gds_codec_kernel_key(ab_c, 2));
    char root[] = "/tmp/h5gds-kcache-XXXXXX", dir[100], path[200], other[300];
    CHECK(mkdtemp(root) != NULL);
    snprintf(dir, sizeof dir, "%s/not/yet", root);
    unsetenv("H5GDS_KERNEL_CACHE");
    setenv("H5GDS_KERNEL_CACHE_DIR", dir, 1);
    uint64_t key = 0x1234abcdULL;
    CHECK(gds_codec_kernel_cache_path(key, 90, path, sizeof path) && strstr(path, dir) == path &&
          strstr(path, "sm90"));
    size_t size = 0;
    bool ptx = true;
    CHECK(gds_codec_kernel_cache_load(path, key, 90, &size, &ptx) == NULL); /* nothing yet */
    char image[5000];
    for (size_t i = 0; i < sizeof image; i++)
        image[i] = (char)(i * 7 + 3);
    CHECK(gds_codec_kernel_cache_store(path, key, 90, image, sizeof image, false) == 0); /* makes the folders */
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    char *got = gds_codec_kernel_cache_load(path, key, 90, &size, &ptx);
    CHECK(got && size == sizeof image && !ptx && memcmp(got, image, size) == 0 && got[size] == '\0');
    free(got);
    CHECK(gds_codec_kernel_cache_load(path, key + 1, 90, &size, &ptx) == NULL); /* another key's */
    CHECK(gds_codec_kernel_cache_load(path, key, 80, &size, &ptx) == NULL);     /* another architecture's */
    CHECK(chmod(path, 0620) == 0 && gds_codec_kernel_cache_load(path, key, 90, &size, &ptx) == NULL);
    CHECK(chmod(path, 0600) == 0);
    FILE *f = fopen(path, "r+b"); /* one byte of the image changed: the checksum fails */
    CHECK(f && fseek(f, 100, SEEK_SET) == 0 && fputc(0x55 ^ image[60], f) != EOF && fclose(f) == 0);
    CHECK(gds_codec_kernel_cache_load(path, key, 90, &size, &ptx) == NULL);
    CHECK(gds_codec_kernel_cache_store(path, key, 90, "PTX text", 9, true) == 0); /* replaced whole */
    got = gds_codec_kernel_cache_load(path, key, 90, &size, &ptx);
    CHECK(got && size == 9 && ptx && strcmp(got, "PTX text") == 0);
    free(got);
    CHECK(truncate(path, 40 + 4) == 0 && gds_codec_kernel_cache_load(path, key, 90, &size, &ptx) == NULL);
    snprintf(other, sizeof other, "%s/link.bin", dir); /* a symbolic link is not followed */
    CHECK(gds_codec_kernel_cache_store(path, key, 90, image, sizeof image, false) == 0 && symlink(path, other) == 0);
    CHECK(gds_codec_kernel_cache_load(other, key, 90, &size, &ptx) == NULL);
    snprintf(other, sizeof other, "%s/fifo.bin", dir); /* a FIFO is refused, not waited on */
    CHECK(mkfifo(other, 0600) == 0 && gds_codec_kernel_cache_load(other, key, 90, &size, &ptx) == NULL);
    snprintf(other, sizeof other, "%s/x.bin", path); /* a folder under a file cannot be made: -1, no more */
    CHECK(gds_codec_kernel_cache_store(other, key, 90, image, sizeof image, false) == -1);
    setenv("H5GDS_KERNEL_CACHE_DIR", "relative/dir", 1);
    CHECK(!gds_codec_kernel_cache_path(key, 90, other, sizeof other));
    unsetenv("H5GDS_KERNEL_CACHE_DIR");
    setenv("XDG_CACHE_HOME", root, 1);
    CHECK(gds_codec_kernel_cache_path(key, 90, other, sizeof other) && strstr(other, "/h5gds/kernels/codec-sm90-"));
    setenv("H5GDS_KERNEL_CACHE", "0", 1);
    CHECK(!gds_codec_kernel_cache_path(key, 90, other, sizeof other));
    unsetenv("H5GDS_KERNEL_CACHE");
    unsetenv("XDG_CACHE_HOME");
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    ref_load();
    test_can_decode();
    test_bounds();
    test_headers();
    test_zlib_header();
    test_zstd_frames();
    test_checksums();
    test_bit_transpose();
    test_blosc_real_chunks();
    test_blosc_corrupt();
    test_blosc_roundtrip();
    test_blosc_encode_plan();
    test_encodes_slowly();
    test_read_batch_goal();
    test_read_tail();
    test_inflate_choose();
    test_zstd_blocks_batches();
    test_settings_copy();
    test_kernel_cache();
    test_widest_fitting();
    test_blosc_shuffle_units();
    test_blosc_encode_frames();
    test_error_texts();
    test_error_list();
    test_absent();
    return test_finish("test_codec_unit");
}
