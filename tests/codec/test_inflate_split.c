/*
 * Deflate decoded in segments (src/codec/inflate_split.h) on the host,
 * against zlib: streams zlib wrote (levels 0, 1, 4, 6, 9; float fields
 * shuffled as HDF5's shuffle filter lays them out, images, sparse integers,
 * random and half-random bytes, a constant) cut into segments of several
 * sizes, each segment's start found, decoded, chained and resolved as the
 * codec's kernels do. A stream the segments make up must come back byte
 * for byte; the benchmark's kinds of data at zlib's usual levels must be
 * made up by the segments (else the GPU falls back to the serial decoder
 * and the split gains nothing). Mutated streams: the segments either
 * refuse them or give exactly what zlib's own inflate gives. Skipped (77)
 * without zlib.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_ref.h"
#include "codec_test.h"
#include "is_host.h"

#undef CHECK
#define CHECK(cond, ...) CHECK_MSG(cond, __VA_ARGS__)

enum { KIND_FIELD, KIND_IMAGE, KIND_SPARSE, KIND_RANDOM, KIND_DOUBLE, KIND_MIXED, KIND_CONSTANT, NKINDS };
static const char *const kind_names[NKINDS] = {"shuffled float field", "image u8", "sparse int32", "random",
                                               "shuffled double field", "half random", "constant"};

static void fill(uint8_t *p, size_t n, int kind)
{
    static const data_kind_t ref_kind[] = {DATA_FLOAT_FIELD, DATA_IMAGE_U8, DATA_SPARSE_INT, DATA_RANDOM,
                                           DATA_DOUBLE_FIELD, DATA_MIXED};
    if (kind == KIND_CONSTANT) {
        memset(p, 0x5A, n);
        return;
    }
    make_data(ref_kind[kind], p, n, 7);
    size_t elem = kind == KIND_FIELD ? 4 : kind == KIND_DOUBLE ? 8 : 0;
    if (elem && n % elem == 0) { /* HDF5's shuffle: byte k of every element together */
        uint8_t *t = malloc(n);
        size_t ne = n / elem;
        for (size_t i = 0; i < ne; i++)
            for (size_t k = 0; k < elem; k++)
                t[k * ne + i] = p[i * elem + k];
        memcpy(p, t, n);
        free(t);
    }
}

static size_t made_up_total, tried_total;

static void roundtrip(int kind, size_t len, int level, size_t per)
{
    uint8_t *src = malloc(len), *out = malloc(len + 1);
    fill(src, len, kind);
    bytes_t raw = ref_raw_deflate(src, len, level, 0);
    CHECK(raw.p != NULL, "zlib compressed %s", kind_names[kind]);
    if (!raw.p) {
        free(src);
        free(out);
        return;
    }
    memset(out, 0xEE, len + 1);
    split_result_t r = split_inflate(raw.p, raw.n, len, per, out);
    if (r.made_up)
        CHECK(memcmp(out, src, len) == 0, "%s, %zu bytes, level %d, segments of %zu: the bytes differ",
              kind_names[kind], len, level, per);
    /* what must split: the benchmark's kinds, 1 MiB and up, zlib's usual
     * levels, several segments */
    int must = len >= (1u << 20) && (level == 4 || level == 6) && r.segments >= 4 &&
               (kind == KIND_FIELD || kind == KIND_IMAGE || kind == KIND_DOUBLE);
    if (must)
        CHECK(r.made_up, "%s, %zu bytes, level %d, segments of %zu: %u segments, %u with a start, not made up",
              kind_names[kind], len, level, per, r.segments, r.active);
    if (r.segments > 1) {
        tried_total++;
        made_up_total += r.made_up;
    }
    if (len >= (1u << 20) && per == 16384)
        printf("  %-22s level %d: %7zu B stored, %2u segments, %2u started, %s\n", kind_names[kind], level, raw.n,
               r.segments, r.active, r.made_up ? "made up" : "left to the serial decoder");
    free(raw.p);
    free(src);
    free(out);
}

/* Mutated streams: the segments refuse them, or give exactly what zlib's
 * inflate gives from the same bytes. */
static void mutated(void)
{
    const size_t len = 1u << 20;
    uint8_t *src = malloc(len), *out = malloc(len);
    uint32_t rng = 12345;
    size_t refused = 0, same = 0;
    for (int kind = KIND_FIELD; kind <= KIND_IMAGE; kind++) {
        fill(src, len, kind);
        bytes_t raw = ref_raw_deflate(src, len, 6, 0);
        for (int t = 0; t < 24 && raw.p; t++) {
            bytes_t m = bytes_new(raw.n);
            memcpy(m.p, raw.p, raw.n);
            int flips = 1 + t % 3;
            for (int f = 0; f < flips; f++) {
                rng = rng * 1103515245u + 12345u;
                size_t at = (rng >> 8) % m.n;
                m.p[at] ^= (uint8_t)(1u << (rng & 7));
            }
            if (t % 6 == 5)
                m.n = m.n * 3 / 4; /* truncated too */
            split_result_t r = split_inflate(m.p, m.n, len, 16384, out);
            if (!r.made_up) {
                refused++;
            }
            else {
                /* HDF5's zlib stream of the mutated bytes, with the Adler-32
                 * of what the segments gave: zlib takes it only if it
                 * decodes the same bytes */
                bytes_t in = bytes_new(m.n + 6), z = {NULL, 0};
                uint32_t adler = ref_adler32(out, len);
                in.p[0] = 0x78;
                in.p[1] = 0x9C;
                memcpy(in.p + 2, m.p, m.n);
                for (int k = 0; k < 4; k++)
                    in.p[2 + m.n + k] = (uint8_t)(adler >> (24 - 8 * k));
                bool zok = ref_inflate(&in, &z, len);
                CHECK(zok && memcmp(out, z.p, len) == 0,
                      "mutated stream %d (%s): made up by the segments but not what zlib decodes", t,
                      kind_names[kind]);
                free(in.p);
                free(z.p);
                same++;
            }
            free(m.p);
        }
        free(raw.p);
    }
    printf("  mutated streams: %zu refused, %zu decoded as zlib decodes them\n", refused, same);
    CHECK(refused > 0, "some mutated streams are refused");
    free(src);
    free(out);
}

/* False starts: a segment made to begin one bit after a block's start,
 * or at a bit in the middle of a block, breaks the chain as decoded; the
 * mend drops it and the stream is made up, byte for byte. */
static void chain_cases(void)
{
    const size_t len = 1u << 20;
    uint8_t *src = malloc(len), *out = malloc(len);
    fill(src, len, KIND_IMAGE);
    bytes_t raw = ref_raw_deflate(src, len, 6, 0);
    CHECK(raw.p != NULL, "zlib compressed the image");
    if (raw.p) {
        uint32_t segments = is_segments(raw.n, 0);
        is_segment_t seg[IS_MAX_SEGMENTS];
        ds_u64 at[IS_MAX_SEGMENTS] = {0};
        scratch_t x;
        scratch_new(&x, len, segments);
        find_starts(raw.p, raw.n, seg, segments);
        /* segment 1 moved one bit on from the header found, segment 3 into
         * the middle of its block */
        CHECK(segments > 4 && seg[1].start != IS_NO_START && seg[3].start != IS_NO_START, "segments start");
        if (segments > 4 && seg[1].start != IS_NO_START && seg[3].start != IS_NO_START) {
            seg[1].start += 1;
            seg[3].start += 1001;
            decode_segments(raw.p, raw.n, seg, segments, &x);
            CHECK(!is_chain(seg, segments, len, at), "segments begun off a block boundary break the chain");
            is_mend(raw.p, raw.n, seg, segments, x.pool, &x.next, x.npages, x.lists, &x.w);
            int whole = is_chain(seg, segments, len, at);
            CHECK(whole, "the mend makes the chain whole");
            CHECK(seg[1].start == IS_NO_START && seg[3].start == IS_NO_START, "the false starts are dropped");
            int bad = 0;
            for (uint32_t s = 0; whole && s < segments; s = is_next(seg, segments, s))
                for (uint64_t i = 0; i < seg[s].count; i++)
                    bad |= is_byte(out, at[s], i, is_symbol(x.pool, x.lists + (size_t)s * x.npages, i)) < 0;
            CHECK(!bad, "markers resolve");
            if (whole)
                CHECK(memcmp(out, src, len) == 0, "the mended stream's bytes");
        }
        free(x.pool);
        free(x.lists);
        free(raw.p);
    }
    free(src);
    free(out);
}

/* A segment's decode stopped and gone on from where it ended, as is_mend
 * does, 15 times over a stream: its copies reach back into what the
 * earlier calls wrote, and the bytes are the stream's. */
static void resume_case(int kind, int level)
{
    const size_t len = 1u << 20;
    uint8_t *src = malloc(len), *out = malloc(len);
    fill(src, len, kind);
    bytes_t raw = ref_raw_deflate(src, len, level, 0);
    CHECK(raw.p != NULL, "zlib compressed %s", kind_names[kind]);
    if (raw.p) {
        scratch_t x;
        scratch_new(&x, len, 1);
        is_out_t o = {x.pool, &x.next, x.npages, x.lists, 0, 0, NULL};
        is_segment_t part, rest;
        is_decode(raw.p, raw.n, 0, 8 * raw.n / 16, 1, &o, &x.w, &part);
        CHECK(part.status == IS_OK && !part.final && part.count > 0 && part.count < len,
              "%s: the first part decoded (%llu symbols)", kind_names[kind], (unsigned long long)part.count);
        for (int k = 2; k < 16 && part.status == IS_OK && !part.final; k++) { /* stopped and gone on 15 times */
            is_decode_on(raw.p, raw.n, part.end, 8 * raw.n * k / 16, 1, &o, &x.w, &part);
        }
        is_decode_on(raw.p, raw.n, part.end, IS_NO_START, 1, &o, &x.w, &rest);
        CHECK(rest.status == IS_OK && rest.final && rest.count == len, "%s: gone on to the final block",
              kind_names[kind]);
        if (rest.status == IS_OK && rest.count == len) {
            for (size_t i = 0; i < len; i++)
                out[i] = (uint8_t)is_symbol(x.pool, x.lists, i);
            CHECK(memcmp(out, src, len) == 0, "%s, level %d: the bytes after going on", kind_names[kind], level);
        }
        free(x.pool);
        free(x.lists);
        free(raw.p);
    }
    free(src);
    free(out);
}

/* The search's register-only test of the code-length code against
 * ds_code_ok, over every multiset of 19 lengths (both depend on the counts
 * alone), then lengths with garbage above `ncode` of them. */
static void lengths_code_walk(ds_u32 *k, ds_u32 l, ds_u32 left, size_t *tried, size_t *wrong, size_t *complete)
{
    if (l == 8) { /* k[1..7]: how many lengths of each value, at most 19 in all; the rest 0 */
        ds_u64 c = 0;
        ds_u32 i = 0;
        ds_u16 count[DS_MAX_BITS + 1] = {0};
        for (ds_u32 v = 1; v < 8; v++) {
            count[v] = (ds_u16)k[v];
            for (ds_u32 j = 0; j < k[v]; j++, i++)
                c |= (ds_u64)v << (3 * i);
        }
        int want = ds_code_ok(count, 1);
        *wrong += want != is_lengths_code_ok(c, 19);
        *complete += want;
        (*tried)++;
        return;
    }
    for (k[l] = 0; k[l] <= left; k[l]++)
        lengths_code_walk(k, l + 1, left - k[l], tried, wrong, complete);
}

static void lengths_code_cases(void)
{
    size_t tried = 0, wrong = 0, complete = 0;
    ds_u32 k[8] = {0};
    lengths_code_walk(k, 1, 19, &tried, &wrong, &complete);
    CHECK(wrong == 0, "the register test agrees with ds_code_ok on all %zu multisets of lengths (%zu wrong)", tried,
          wrong);
    CHECK(complete > 1000, "complete codes among them (%zu)", complete);
    uint64_t state = 12345;
    wrong = 0;
    for (int t = 0; t < 200000; t++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        ds_u32 ncode = 4 + (ds_u32)(state >> 60);
        ds_u64 c = state ^ (state << 17);
        ds_u16 count[DS_MAX_BITS + 1] = {0};
        count[0] = (ds_u16)(19 - ncode);
        for (ds_u32 i = 0; i < ncode; i++)
            count[(c >> (3 * i)) & 7u]++;
        wrong += ds_code_ok(count, 1) != is_lengths_code_ok(c, ncode);
    }
    CHECK(wrong == 0, "lengths beyond ncode ignored (%zu wrong)", wrong);
}

int main(void)
{
    ref_load();
    if (!ref.z) {
        printf("SKIP: libz.so.1 not found\n");
        return 77;
    }
    const size_t sizes[] = {1000, 65536, 300000, 1048576, 4194304 + 8};
    const int levels[] = {0, 1, 4, 6, 9};
    const size_t pers[] = {4096, 16384, 65536};
    for (int kind = 0; kind < NKINDS; kind++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
            for (size_t li = 0; li < sizeof levels / sizeof *levels; li++)
                for (size_t pi = 0; pi < sizeof pers / sizeof *pers; pi++) {
                    if (sizes[si] > 1048576 && (levels[li] == 9 || pers[pi] == 4096))
                        continue; /* time */
                    roundtrip(kind, sizes[si], levels[li], pers[pi]);
                }
    printf("  streams of several segments: %zu of %zu made up\n", made_up_total, tried_total);
    mutated();
    chain_cases();
    resume_case(KIND_IMAGE, 6);
    resume_case(KIND_FIELD, 4);
    lengths_code_cases();
    return test_finish("test_inflate_split");
}
