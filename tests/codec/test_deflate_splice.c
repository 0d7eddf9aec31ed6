/*
 * The Deflate joiner (src/codec/deflate_splice.h) on the host, against
 * zlib: chunks cut in pieces, each compressed by zlib into a raw Deflate
 * stream of its own (as nvCOMP does on the GPU), the pieces walked and
 * joined as the codec's kernel does, wrapped in HDF5's zlib stream and read
 * back by zlib's uncompress() (what HDF5's deflate filter calls), byte for
 * byte. zlib's levels 0 (stored blocks), 1 (fixed codes on short inputs)
 * and 6/9 (dynamic codes) give every block type. Also: what joining costs
 * in size, and streams that must not walk (mutated bytes, truncated, the
 * wrong decoded size): a failed walk, never a read outside the stream.
 * Skipped (77) without zlib.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_ref.h"
#include "deflate_splice.h"

static int failures, checks;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            printf("FAIL  " __VA_ARGS__);                                                                              \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

enum { KIND_FIELD, KIND_IMAGE, KIND_SPARSE, KIND_RANDOM, KIND_DOUBLE, KIND_MIXED, KIND_CONSTANT, NKINDS };
static const char *const data_names[NKINDS] = {"float field", "image u8", "sparse int32", "random", "double field",
                                               "half random", "constant"};

static void fill(uint8_t *p, size_t n, int kind)
{
    static const data_kind_t ref_kind[] = {DATA_FLOAT_FIELD, DATA_IMAGE_U8, DATA_SPARSE_INT, DATA_RANDOM,
                                           DATA_DOUBLE_FIELD, DATA_MIXED};
    if (kind == KIND_CONSTANT)
        memset(p, 0x5A, n);
    else
        make_data(ref_kind[kind], p, n, 11);
}

static uint32_t adler32(const uint8_t *p, size_t n)
{
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + p[i]) % 65521u;
        b = (b + a) % 65521u;
    }
    return b << 16 | a;
}

/* zlib's raw Deflate stream of src (its zlib stream without the 2-byte
 * header and the Adler-32 after it), in a buffer with DS_SYNC_BYTES of
 * room after it. */
static bytes_t raw_deflate(const uint8_t *src, size_t len, int level)
{
    bytes_t in = {(uint8_t *)src, len}, z, raw = {NULL, 0};
    if (!ref_deflate(&in, &z, level) || z.n < 6)
        return raw;
    raw = bytes_new(z.n - 6 + DS_SYNC_BYTES);
    memcpy(raw.p, z.p + 2, z.n - 6);
    raw.n = z.n - 6;
    free(z.p);
    return raw;
}

typedef struct join_stats {
    size_t pieces, stored, pieces_bytes, joined_bytes;
} join_stats_t;

/* src cut in pieces of `piece` bytes, each compressed at `level`, walked,
 * joined; HDF5's zlib stream of the chunk, or .p NULL. */
static bytes_t join(const uint8_t *src, size_t len, size_t piece, int level, join_stats_t *s)
{
    size_t n = len ? (len + piece - 1) / piece : 1;
    bytes_t out = bytes_new(2 + n * (ds_stored_bytes(piece) + DS_SYNC_BYTES) + 4);
    ds_huff_t lit, dist;
    out.p[0] = 0x78;
    out.p[1] = 0x9c;
    out.n = 2;
    for (size_t k = 0; k < n; k++) {
        size_t off = k * piece, plen = len - off < piece ? len - off : piece;
        int last = k + 1 == n;
        bytes_t raw = raw_deflate(src + off, plen, level);
        if (!raw.p) {
            free(out.p);
            out.p = NULL;
            return out;
        }
        ds_stream_t st;
        int walked = ds_walk(raw.p, raw.n, plen, &st, &lit, &dist);
        CHECK(walked == 0, "piece %zu of %zu (%zu B, level %d): zlib's stream did not walk", k, n, plen, level);
        CHECK(walked < 0 || (st.end_bit + 7) / 8 == raw.n, "piece %zu: walk ends at bit %llu of %zu bytes", k,
              (unsigned long long)st.end_bit, raw.n);
        s->pieces++;
        s->pieces_bytes += raw.n;
        if (walked == 0 && ds_joined_bytes(&st, last) < ds_stored_bytes(plen)) {
            uint64_t got = ds_join(raw.p, &st, last);
            CHECK(got == ds_joined_bytes(&st, last) && got <= raw.n + DS_SYNC_BYTES, "piece %zu: joined %llu B", k,
                  (unsigned long long)got);
            memcpy(out.p + out.n, raw.p, got);
            out.n += got;
        }
        else {
            s->stored++;
            out.n += ds_store(out.p + out.n, src + off, plen, last);
        }
        free(raw.p);
    }
    uint32_t a = adler32(src, len);
    put_be(out.p + out.n, a, 4);
    out.n += 4;
    s->joined_bytes += out.n;
    return out;
}

static void roundtrip(int kind, size_t len, size_t piece, int level)
{
    uint8_t *src = malloc(len ? len : 1);
    fill(src, len, kind);
    join_stats_t s = {0, 0, 0, 0};
    bytes_t z = join(src, len, piece, level, &s);
    bytes_t back = {0};
    bool ok = z.p && ref_inflate(&z, &back, len) && back.n == len && memcmp(back.p, src, len) == 0;
    CHECK(ok, "%s %zu B in %zu B pieces, level %d: the joined stream reads back wrong", data_names[kind], len, piece,
          level);
    /* joining adds the empty stored blocks (4-5 bytes a piece) and the
     * zlib header and trailer; random data goes stored either way */
    CHECK(s.joined_bytes <= s.pieces_bytes + 6 * s.pieces + 6 || kind == KIND_RANDOM || kind == KIND_MIXED ||
              level == 0,
          "%s %zu B in %zu B pieces, level %d: joined %zu B against %zu B of pieces", data_names[kind], len, piece,
          level, s.joined_bytes, s.pieces_bytes);
    if (kind == KIND_MIXED && level > 0 && len > 200000)
        CHECK(s.stored > 0 && s.stored < s.pieces, "%s %zu B in %zu B pieces, level %d: %zu of %zu pieces stored",
              data_names[kind], len, piece, level, s.stored, s.pieces);
    if (kind != KIND_RANDOM && kind != KIND_MIXED && level > 0 && len >= 4096)
        CHECK(s.stored == 0, "%s %zu B in %zu B pieces, level %d: %zu of %zu pieces stored", data_names[kind], len,
              piece, level, s.stored, s.pieces);
    printf("%-4s %-12s %8zu B, pieces %6zu B, level %d: %3zu pieces, %3zu stored, ratio %.2f\n", ok ? "ok" : "FAIL",
           data_names[kind], len, piece, level, s.pieces, s.stored, z.n ? (double)len / (double)z.n : 0);
    free(z.p);
    free(back.p);
    free(src);
}

/* Streams that must not walk, and mutations that must not read or write
 * outside: a walk either fails or accounts for exactly the piece's bytes. */
static void hostile(void)
{
    const size_t len = 40000;
    uint8_t *src = malloc(len);
    fill(src, len, KIND_FIELD);
    ds_huff_t lit, dist;
    ds_stream_t st;
    for (int level = 1; level <= 9; level += 8) {
        bytes_t raw = raw_deflate(src, len, level);
        CHECK(raw.p && ds_walk(raw.p, raw.n, len, &st, &lit, &dist) == 0, "level %d: the stream walks", level);
        CHECK(ds_walk(raw.p, raw.n, len - 1, &st, &lit, &dist) < 0, "level %d: a decoded size one short is refused",
              level);
        CHECK(ds_walk(raw.p, raw.n, len + 1, &st, &lit, &dist) < 0, "level %d: a decoded size one long is refused",
              level);
        CHECK(ds_walk(raw.p, raw.n / 2, len, &st, &lit, &dist) < 0, "level %d: half the stream is refused", level);
        int walked = 0;
        uint8_t *copy = malloc(raw.n);
        for (int t = 0; t < 2000; t++) {
            memcpy(copy, raw.p, raw.n);
            int flips = 1 + (int)(rng() % 4);
            for (int f = 0; f < flips; f++)
                copy[rng() % raw.n] ^= (uint8_t)(1u << (rng() % 8));
            size_t n = rng() % 8 == 0 ? rng() % raw.n : raw.n; /* sometimes truncated too */
            if (ds_walk(copy, n, len, &st, &lit, &dist) == 0) {
                walked++;
                CHECK(st.end_bit <= 8 * n && st.final_bit < st.end_bit, "mutated stream: end bit %llu of %zu bytes",
                      (unsigned long long)st.end_bit, n);
            }
        }
        printf("ok   mutated level-%d streams: %d of 2000 still walk to %zu bytes (the rest refused)\n", level, walked,
               len);
        free(copy);
        free(raw.p);
    }
    /* "a" in a final fixed-code block: 3 header bits, 8 of the literal, 7 of
     * the end of block */
    uint8_t one[] = {0x4b, 0x04, 0x00};
    CHECK(ds_walk(one, sizeof one, 1, &st, &lit, &dist) == 0 && st.final_bit == 0 && st.end_bit == 18,
          "a final fixed-code block of one literal: end bit %llu", (unsigned long long)st.end_bit);
    uint8_t reserved[] = {0x07, 0x00};
    CHECK(ds_walk(reserved, sizeof reserved, 0, &st, &lit, &dist) < 0, "block type 3 is refused");
    uint8_t badlen[] = {0x01, 0x05, 0x00, 0xfa, 0xfe, 1, 2, 3, 4, 5};
    CHECK(ds_walk(badlen, sizeof badlen, 5, &st, &lit, &dist) < 0, "a stored block whose NLEN is wrong is refused");
    free(src);
}

int main(void)
{
    ref_load();
    if (!ref.z) {
        printf("SKIP: libz.so.1 not found\n");
        return 77;
    }
    const size_t sizes[] = {1, 1000, 65536, 100000, 1048576 + 3};
    const size_t pieces[] = {4096, 32768, 65536, 131072};
    const int levels[] = {0, 1, 6, 9};
    for (int kind = 0; kind < NKINDS; kind++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
            for (size_t pi = 0; pi < sizeof pieces / sizeof *pieces; pi++)
                for (size_t li = 0; li < sizeof levels / sizeof *levels; li++) {
                    if (sizes[si] > 100000 && (pieces[pi] == 4096 || levels[li] == 9))
                        continue; /* time: the large chunk at the kernel's piece sizes */
                    roundtrip(kind, sizes[si], pieces[pi], levels[li]);
                }
    hostile();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
