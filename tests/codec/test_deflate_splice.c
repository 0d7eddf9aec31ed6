/*
 * The Deflate joiner (src/codec/deflate_splice.h) on the host, against
 * zlib: chunks cut in pieces, each compressed by zlib into a raw Deflate
 * stream of its own (as nvCOMP does on the GPU), the pieces walked and
 * joined as the codec's kernel does, wrapped in HDF5's zlib stream and read
 * back by zlib's uncompress() (what HDF5's deflate filter calls), byte for
 * byte. zlib's levels 0 (stored blocks), 1 (fixed codes on short inputs)
 * and 6/9 (dynamic codes) give every block type. Also: what joining costs
 * in size, and streams that must not walk (mutated bytes, truncated, the
 * wrong decoded size): a failed walk, never a read outside the stream (the
 * mutated streams sit in buffers of their exact size, for the sanitizers),
 * and, where zlib.h is there to build against, the walk accepts exactly the
 * streams zlib's inflate decodes to the piece's size, and a walked stream
 * joined to a following one inflates to the same bytes. Skipped (77)
 * without zlib.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_ref.h"
#include "codec_test.h"
#include "deflate_splice.h"

#if defined(__has_include)
#if __has_include(<zlib.h>)
#include <zlib.h>
#define HAVE_ZLIB_H 1
#endif
#endif

#ifdef HAVE_ZLIB_H
/* zlib's raw inflate (windowBits -15), loaded as codec_ref.h loads zlib */
static int (*z_inflate_init)(z_streamp, int, const char *, int);
static int (*z_inflate)(z_streamp, int);
static int (*z_inflate_end)(z_streamp);

static bool raw_inflate_load(void)
{
    void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!z)
        return false;
    *(void **)&z_inflate_init = dlsym(z, "inflateInit2_");
    *(void **)&z_inflate = dlsym(z, "inflate");
    *(void **)&z_inflate_end = dlsym(z, "inflateEnd");
    return z_inflate_init && z_inflate && z_inflate_end;
}

/* Whether p[0, n) is a raw Deflate stream zlib decodes to exactly `expect`
 * bytes (into out, expect + 1 bytes of room). */
static bool raw_inflate(const uint8_t *p, size_t n, uint8_t *out, size_t expect)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (z_inflate_init(&zs, -15, ZLIB_VERSION, (int)sizeof zs) != Z_OK)
        return false;
    zs.next_in = (Bytef *)(uintptr_t)p;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)(expect + 1);
    int rc = z_inflate(&zs, Z_FINISH);
    bool ok = rc == Z_STREAM_END && zs.total_out == expect;
    z_inflate_end(&zs);
    return ok;
}
#endif

/* codec_test.h's CHECK_MSG, under the name this file uses */
#undef CHECK
#define CHECK(cond, ...) CHECK_MSG(cond, __VA_ARGS__)

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

typedef struct join_stats {
    size_t pieces, stored, pieces_bytes, joined_bytes;
} join_stats_t;

/* src cut in pieces of `piece` bytes, each compressed at `level`, walked,
 * joined; HDF5's zlib stream of the chunk, or .p NULL. */
static bytes_t join(const uint8_t *src, size_t len, size_t piece, int level, join_stats_t *s)
{
    size_t n = len ? (len + piece - 1) / piece : 1;
    bytes_t out = bytes_new(2 + n * (ds_stored_bytes(piece) + DS_SYNC_BYTES) + 4);
    static ds_work_t w;
    out.p[0] = 0x78;
    out.p[1] = 0x9c;
    out.n = 2;
    for (size_t k = 0; k < n; k++) {
        size_t off = k * piece, plen = len - off < piece ? len - off : piece;
        int last = k + 1 == n;
        bytes_t raw = ref_raw_deflate(src + off, plen, level, DS_SYNC_BYTES);
        if (!raw.p) {
            free(out.p);
            out.p = NULL;
            return out;
        }
        ds_stream_t st;
        int walked = ds_walk(raw.p, raw.n, plen, &st, &w);
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
    uint32_t a = ref_adler32(src, len);
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

/* A bit writer for hand-made streams: values first-bit-first (extra bits,
 * header fields), Huffman codes most significant bit first. */
typedef struct bit_writer {
    uint8_t *p;
    size_t bits;
} bit_writer_t;

static void put_bits(bit_writer_t *b, uint32_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++, b->bits++)
        if ((v >> i) & 1)
            b->p[b->bits / 8] |= (uint8_t)(1u << (b->bits % 8));
}

static void put_code(bit_writer_t *b, uint32_t code, unsigned n)
{
    for (unsigned i = n; i-- > 0;)
        put_bits(b, (code >> i) & 1, 1);
}

/* A final dynamic block holding "a": literal 'a' and the end of block one
 * bit each, one distance code of `dist_len` bits (never used). zlib takes
 * dist_len 1 (a single 1-bit code), not 2 (an incomplete code). */
static size_t one_literal_block(uint8_t *out, unsigned dist_len)
{
    bit_writer_t b = {out, 0};
    memset(out, 0, 64);
    put_bits(&b, 1, 1);  /* BFINAL */
    put_bits(&b, 2, 2);  /* dynamic */
    put_bits(&b, 0, 5);  /* 257 literal/length codes */
    put_bits(&b, 0, 5);  /* 1 distance code */
    put_bits(&b, 15, 4); /* 19 code length codes */
    /* in their order 16 17 18 0 8 7 9 6 10 5 11 4 12 3 13 2 14 1 15: 18, 0, 2 and 1 two bits each */
    static const unsigned order_len[19] = {0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 0};
    for (int i = 0; i < 19; i++)
        put_bits(&b, order_len[i], 3);
    /* their codes: 0 -> 00, 1 -> 01, 2 -> 10, 18 -> 11 */
    put_code(&b, 3, 2); put_bits(&b, 97 - 11, 7);     /* 97 zero lengths */
    put_code(&b, 1, 2);                               /* 'a': 1 bit */
    put_code(&b, 3, 2); put_bits(&b, 138 - 11, 7);    /* 138 zero lengths */
    put_code(&b, 3, 2); put_bits(&b, 20 - 11, 7);     /* 20 more: up to 255 */
    put_code(&b, 1, 2);                               /* end of block: 1 bit */
    put_code(&b, dist_len == 1 ? 1 : 2, 2);           /* the distance code's length */
    put_code(&b, 0, 1);                               /* 'a' */
    put_code(&b, 1, 1);                               /* end of block */
    return (b.bits + 7) / 8;
}

/* Streams that must not walk, and mutations that must not read or write
 * outside: a walk either fails or accounts for exactly the piece's bytes;
 * with zlib.h, it agrees with zlib's inflate on every mutated stream. */
static void hostile(void)
{
    const size_t len = 40000;
    uint8_t *src = malloc(len);
    fill(src, len, KIND_FIELD);
    static ds_work_t w;
    ds_stream_t st;
#ifdef HAVE_ZLIB_H
    bool with_zlib = raw_inflate_load();
    uint8_t *want = malloc(len + 1), *got = malloc(len + 1);
#else
    bool with_zlib = false;
#endif
    for (int level = 1; level <= 9; level += 4) {
        bytes_t raw = ref_raw_deflate(src, len, level, DS_SYNC_BYTES);
        CHECK(raw.p && ds_walk(raw.p, raw.n, len, &st, &w) == 0, "level %d: the stream walks", level);
        CHECK(ds_walk(raw.p, raw.n, len - 1, &st, &w) < 0, "level %d: a decoded size one short is refused", level);
        CHECK(ds_walk(raw.p, raw.n, len + 1, &st, &w) < 0, "level %d: a decoded size one long is refused", level);
        CHECK(ds_walk(raw.p, raw.n / 2, len, &st, &w) < 0, "level %d: half the stream is refused", level);
        int walked = 0, disagree = 0;
        for (int t = 0; t < 3000; t++) {
            size_t n = rng() % 8 == 0 ? rng() % raw.n : raw.n; /* sometimes truncated too */
            uint8_t *copy = malloc(n + DS_SYNC_BYTES + 5);  /* room for the join and a final block */
            memcpy(copy, raw.p, n);
            int flips = 1 + (int)(rng() % 4);
            for (int f = 0; f < flips && n; f++)
                copy[rng() % n] ^= (uint8_t)(1u << (rng() % 8));
            bool walks = ds_walk(copy, n, len, &st, &w) == 0;
            if (walks) {
                walked++;
                CHECK(st.end_bit <= 8 * n && st.final_bit < st.end_bit, "mutated stream: end bit %llu of %zu bytes",
                      (unsigned long long)st.end_bit, n);
            }
#ifdef HAVE_ZLIB_H
            if (with_zlib) {
                bool inflates = raw_inflate(copy, n, want, len);
                disagree += walks != inflates;
                if (walks && inflates) { /* joined to a final empty stored block: the same bytes */
                    uint64_t j = ds_join(copy, &st, 0);
                    const uint8_t final_block[5] = {0x01, 0x00, 0x00, 0xff, 0xff};
                    memcpy(copy + j, final_block, 5);
                    CHECK(j <= n + DS_SYNC_BYTES && raw_inflate(copy, j + 5, got, len) && !memcmp(got, want, len),
                          "mutated level-%d stream, joined: %llu B of %zu, not the same bytes", level,
                          (unsigned long long)j, n);
                }
            }
#endif
            free(copy);
        }
        CHECK(disagree == 0, "level %d: the walk and zlib disagreed on %d of 3000 mutated streams", level, disagree);
        printf("ok   mutated level-%d streams: %d of 3000 still walk to %zu bytes (the rest refused)%s\n", level,
               walked, len, with_zlib ? ", as zlib's inflate" : " (zlib.h absent: not compared)");
        free(raw.p);
    }
#ifdef HAVE_ZLIB_H
    free(want);
    free(got);
#endif
    /* "a" in a final fixed-code block: 3 header bits, 8 of the literal, 7 of
     * the end of block */
    uint8_t one[] = {0x4b, 0x04, 0x00};
    CHECK(ds_walk(one, sizeof one, 1, &st, &w) == 0 && st.final_bit == 0 && st.end_bit == 18,
          "a final fixed-code block of one literal: end bit %llu", (unsigned long long)st.end_bit);
    uint8_t reserved[] = {0x07, 0x00};
    CHECK(ds_walk(reserved, sizeof reserved, 0, &st, &w) < 0, "block type 3 is refused");
    uint8_t badlen[] = {0x01, 0x05, 0x00, 0xfa, 0xfe, 1, 2, 3, 4, 5};
    CHECK(ds_walk(badlen, sizeof badlen, 5, &st, &w) < 0, "a stored block whose NLEN is wrong is refused");
    uint8_t block[64];
    size_t n1 = one_literal_block(block, 1);
    CHECK(ds_walk(block, n1, 1, &st, &w) == 0 && st.end_bit <= 8 * n1 && st.end_bit > 8 * (n1 - 1),
          "a dynamic block with a single 1-bit distance code walks to its last byte");
#ifdef HAVE_ZLIB_H
    uint8_t one_byte[2];
    CHECK(!with_zlib || (raw_inflate(block, n1, one_byte, 1) && one_byte[0] == 'a'),
          "zlib inflates the hand-made block with a single 1-bit distance code");
#endif
    size_t n2 = one_literal_block(block, 2);
    CHECK(ds_walk(block, n2, 1, &st, &w) < 0, "a dynamic block with an incomplete distance code is refused");
#ifdef HAVE_ZLIB_H
    CHECK(!with_zlib || !raw_inflate(block, n2, one_byte, 1), "zlib refuses an incomplete distance code too");
#endif
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
    return test_finish("test_deflate_splice");
}
