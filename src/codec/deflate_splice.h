/*
 * One Deflate stream out of streams compressed one piece at a time.
 *
 * nvCOMP's Deflate compressor codes each input as one stream, serially, and
 * the inputs of a batch side by side: a batch of 1 MiB chunks takes about
 * one chunk's time (250 ms on an H100) however wide. HDF5's deflate filter
 * reads one zlib stream per chunk. So a chunk is compressed in pieces, each
 * a raw Deflate stream of its own, and the pieces are joined into one
 * stream as a parallel gzip joins its pieces (RFC 1951 allows it: a block
 * may refer back only into the bytes before it, and a piece's blocks refer
 * only into their own piece, which the joined stream also holds before
 * them):
 *
 *   - each piece's blocks are walked (headers, Huffman codes, lengths and
 *     distances; nothing decoded into bytes) to the bit where its last
 *     block ends, and the bit of that block's BFINAL flag;
 *   - in all pieces but the chunk's last, that flag is cleared and an empty
 *     stored block follows the last block (what zlib's Z_SYNC_FLUSH
 *     writes: three zero header bits, zeros to the byte's end, then LEN 0
 *     and NLEN 0xFFFF), so that the next piece starts on a byte boundary;
 *   - a piece that cannot be walked (a stream nvCOMP should not have
 *     written), or one that came out no smaller than stored blocks of its
 *     bytes, is written as stored blocks instead (right, only larger).
 *
 * Plain C that CUDA C++ (NVRTC) compiles too: the codec's kernel runs it a
 * piece per warp (one lane walking, its tables in shared memory), the unit
 * tests on the host against zlib. Written from the format's specification
 * (RFC 1951); codes are accepted as zlib's inflate accepts them.
 */
#ifndef H5GDS_DEFLATE_SPLICE_H
#define H5GDS_DEFLATE_SPLICE_H

#ifdef __CUDACC_RTC__
/* forced inline: a bit reader or output passed by pointer to a function
 * not inlined lives in local memory, a round trip at every code */
#define DS_FN __device__ static __forceinline__
/* global memory, not constant: each thread looks up its own index, and the
 * constant cache serves one address a warp at a time */
#define DS_DATA __device__ static const
#else
#define DS_FN static inline
#define DS_DATA static const
#endif

typedef unsigned char ds_u8;
typedef unsigned short ds_u16;
typedef unsigned int ds_u32;
typedef unsigned long long ds_u64;

#define DS_STORED_MAX 65535u /* a stored block's bytes at most */
#define DS_SYNC_BYTES 5u     /* the empty stored block after a piece, at most (its header may take a byte) */
#define DS_MAX_BITS 15u

/* What a walk found (ds_walk). */
typedef struct ds_stream {
    ds_u64 final_bit; /* the bit of the last block's BFINAL flag */
    ds_u64 end_bit;   /* the bit after the last block's end */
} ds_stream_t;

/* A canonical Huffman code: codes per length, symbols in code order, and
 * a table by the next DS_FAST_BITS bits of the stream (symbol << 4 | code
 * length; 0 where the code is longer), which decodes most symbols in one
 * look-up. */
#define DS_FAST_BITS 9u
typedef struct ds_huff {
    ds_u16 count[DS_MAX_BITS + 1];
    ds_u16 symbol[288];
    ds_u16 fast[1u << DS_FAST_BITS];
} ds_huff_t;

/* Bits are read from the least significant bit of each byte up, through a
 * 64-bit buffer. Bytes past the end read as zeros; the walk fails once it
 * has used one of them. */
typedef struct ds_bits {
    const ds_u8 *p;
    ds_u64 n;   /* bytes */
    ds_u64 at;  /* the next byte into buf */
    ds_u64 buf; /* bits not used yet, the next one lowest */
    ds_u32 cnt; /* bits in buf */
} ds_bits_t;

/* The 8 bytes from p[0] on, the first lowest. On the GPU two aligned
 * 32-bit loads: (64 - 8 * (p % 4)) bits of the result, at least 40, are
 * p's; p[0, 8) must be readable. */
DS_FN ds_u64 ds_load8(const ds_u8 *p)
{
#ifdef __CUDACC_RTC__
    unsigned long long a = (unsigned long long)p;
    const ds_u32 *w = (const ds_u32 *)(a & ~3ull);
    return ((ds_u64)w[0] | (ds_u64)w[1] << 32) >> (8 * (a & 3u));
#else
    ds_u64 v = 0;
    for (ds_u32 i = 0; i < 8; i++)
        v |= (ds_u64)p[i] << (8 * i);
    return v;
#endif
}

/* At least k (<= 56) bits in the buffer. Away from the stream's end, up to
 * five bytes come from one ds_load8 (a refill was a fifth of a literal's
 * instructions byte by byte); near it, byte by byte to 56 bits or more. */
DS_FN void ds_need(ds_bits_t *b, ds_u32 k)
{
    while (b->cnt < k) {
        if (b->at + 8 <= b->n) {
            ds_u32 take = (63 - b->cnt) / 8; /* whole bytes that fit: 1 .. 7 */
            take = take < 5 ? take : 5;
            b->buf |= (ds_load8(b->p + b->at) & ((1ull << (8 * take)) - 1)) << b->cnt;
            b->at += take;
            b->cnt += 8 * take;
            continue;
        }
        while (b->cnt <= 56) {
            ds_u64 v = b->at < b->n ? b->p[b->at] : 0;
            b->buf |= v << b->cnt;
            b->at++;
            b->cnt += 8;
        }
    }
}

DS_FN ds_u32 ds_take(ds_bits_t *b, ds_u32 k)
{
    ds_need(b, k);
    ds_u32 v = (ds_u32)(b->buf & ((1ull << k) - 1));
    b->buf >>= k;
    b->cnt -= k;
    return v;
}

/* Bits used so far. */
DS_FN ds_u64 ds_pos(const ds_bits_t *b) { return 8 * b->at - b->cnt; }

/* Moves to bit `pos` (a byte boundary or further on). */
DS_FN void ds_seek(ds_bits_t *b, ds_u64 pos)
{
    b->at = pos / 8;
    b->buf = 0;
    b->cnt = 0;
    ds_take(b, (ds_u32)(pos % 8));
}

DS_FN int ds_overrun(const ds_bits_t *b) { return ds_pos(b) > 8 * b->n; }

/* A walk's working memory: the two codes in force and the code lengths of
 * a block's header (the kernel keeps it in shared memory). */
typedef struct ds_work {
    ds_huff_t lit, dist;
    ds_u8 lens[288 + 32];
} ds_work_t;

/* Whether counts[1..DS_MAX_BITS] of code lengths make a code zlib's
 * inflate takes (ds_build). */
DS_FN int ds_code_ok(const ds_u16 *count, int lengths_code)
{
    int left = 1;
    ds_u32 longest = 0;
    for (ds_u32 l = 1; l <= DS_MAX_BITS; l++) {
        left = 2 * left - count[l];
        if (left < 0)
            return 0;
        if (count[l])
            longest = l;
    }
    return !(left > 0 && longest > 0 && (lengths_code || longest != 1));
}

/* Whether the code lengths len[0..n) make a code zlib's inflate takes. */
DS_FN int ds_lengths_ok(const ds_u8 *len, ds_u32 n, int lengths_code)
{
    ds_u16 count[DS_MAX_BITS + 1];
    for (ds_u32 l = 0; l <= DS_MAX_BITS; l++)
        count[l] = 0;
    for (ds_u32 s = 0; s < n; s++)
        count[len[s]]++;
    return ds_code_ok(count, lengths_code);
}

/* The code of `n` symbols whose code lengths are len[]: 0, or -1 where the
 * lengths are not a code zlib's inflate takes: more codes than the lengths
 * allow, or fewer (an incomplete code), except a code with no symbols or
 * one of a single 1-bit code (a block of one distance), and never for the
 * code-length code (`lengths_code`). */
DS_FN int ds_build(ds_huff_t *h, const ds_u8 *len, ds_u32 n, int lengths_code)
{
    ds_u16 offs[DS_MAX_BITS + 1], next[DS_MAX_BITS + 1];
    for (ds_u32 l = 0; l <= DS_MAX_BITS; l++)
        h->count[l] = 0;
    for (ds_u32 s = 0; s < n; s++)
        h->count[len[s]]++;
    if (!ds_code_ok(h->count, lengths_code))
        return -1;
    offs[1] = 0;
    next[1] = 0;
    for (ds_u32 l = 1; l < DS_MAX_BITS; l++) {
        offs[l + 1] = (ds_u16)(offs[l] + h->count[l]);
        next[l + 1] = (ds_u16)((next[l] + h->count[l]) << 1); /* the first code of each length */
    }
    for (ds_u32 i = 0; i < (1u << DS_FAST_BITS); i++)
        h->fast[i] = 0;
    for (ds_u32 s = 0; s < n; s++) {
        ds_u32 l = len[s];
        if (!l)
            continue;
        h->symbol[offs[l]++] = (ds_u16)s;
        ds_u32 code = next[l]++;
        if (l > DS_FAST_BITS)
            continue;
        ds_u32 rev = 0; /* the code as the stream's bits come: its first bit lowest */
        for (ds_u32 i = 0; i < l; i++)
            rev |= ((code >> i) & 1u) << (l - 1 - i);
        for (ds_u32 i = rev; i < (1u << DS_FAST_BITS); i += 1u << l)
            h->fast[i] = (ds_u16)(s << 4 | l);
    }
    return 0;
}

/* The next symbol of code h, or -1 where the bits are no code of it. The
 * code's bits come first-bit-first, the most significant bit of the code
 * first (RFC 1951 3.1.1). */
DS_FN int ds_decode(ds_bits_t *b, const ds_huff_t *h)
{
    ds_need(b, DS_MAX_BITS);
    ds_u32 e = h->fast[b->buf & ((1u << DS_FAST_BITS) - 1)];
    if (e) {
        b->buf >>= e & 15;
        b->cnt -= e & 15;
        return (int)(e >> 4);
    }
    ds_u32 bits = (ds_u32)b->buf;
    int code = 0, first = 0, index = 0;
    for (ds_u32 l = 1; l <= DS_MAX_BITS; l++) {
        code |= (int)(bits & 1);
        bits >>= 1;
        int count = h->count[l];
        if (code - first < count) {
            b->buf >>= l;
            b->cnt -= l;
            return h->symbol[index + (code - first)];
        }
        index += count;
        first = (first + count) << 1;
        code <<= 1;
    }
    return -1;
}

DS_DATA ds_u8 ds_len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                  2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
DS_DATA ds_u16 ds_len_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                  31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
DS_DATA ds_u8 ds_dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                   6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
DS_DATA ds_u16 ds_dist_base[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                   193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
DS_DATA ds_u8 ds_clen_order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

/* A Huffman-coded block's symbols up to its end of block; `done` bytes of
 * the piece come before it (a distance may not reach before the piece).
 * 0, or -1 where the block is not valid. */
DS_FN int ds_codes(ds_bits_t *b, const ds_huff_t *lit, const ds_huff_t *dist, ds_u64 *done)
{
    for (;;) {
        int sym = ds_decode(b, lit);
        if (sym < 0 || ds_overrun(b))
            return -1;
        if (sym < 256) {
            (*done)++;
            continue;
        }
        if (sym == 256)
            return 0;
        sym -= 257;
        if (sym >= 29)
            return -1;
        ds_u64 length = ds_len_base[sym] + ds_take(b, ds_len_extra[sym]);
        int d = ds_decode(b, dist);
        if (d < 0 || d >= 30 || ds_overrun(b))
            return -1;
        ds_u64 distance = ds_dist_base[d] + ds_take(b, ds_dist_extra[d]);
        if (distance > *done)
            return -1;
        *done += length;
    }
}

/* A dynamic block's code lengths: `total` of them into l, read with the
 * code-length code given by its counts per length and its symbols in code
 * order (decoded bit by bit: a header's few hundred codes). 0, or -1 where
 * they are not valid. */
DS_FN int ds_code_lengths(ds_bits_t *b, const ds_u16 *count, const ds_u16 *symbol, ds_u8 *l, ds_u32 total)
{
    for (ds_u32 i = 0; i < total;) {
        int sym = -1;
        ds_u32 code = 0, first = 0, index = 0;
        for (ds_u32 len = 1; len <= 7; len++) {
            code |= ds_take(b, 1);
            if (code - first < count[len]) {
                sym = symbol[index + (code - first)];
                break;
            }
            index += count[len];
            first = (first + count[len]) << 1;
            code <<= 1;
        }
        if (sym < 0 || ds_overrun(b))
            return -1;
        if (sym < 16) {
            l[i++] = (ds_u8)sym;
            continue;
        }
        ds_u32 rep, v = 0;
        if (sym == 16) {
            if (i == 0)
                return -1;
            v = l[i - 1];
            rep = 3 + ds_take(b, 2);
        }
        else if (sym == 17)
            rep = 3 + ds_take(b, 3);
        else
            rep = 11 + ds_take(b, 7);
        if (i + rep > total)
            return -1;
        while (rep--)
            l[i++] = (ds_u8)v;
    }
    return 0;
}

/* The codes of a Huffman-coded block (type 1: fixed, 2: dynamic) whose
 * header's first three bits were read: lit and dist built, the stream at
 * the block's first symbol. *fixed: lit and dist hold the fixed codes
 * already (set and cleared here). 0, or -1 where the header is not one
 * zlib's inflate takes. */
DS_FN int ds_block_codes(ds_bits_t *b, ds_work_t *w, ds_u32 type, int *fixed)
{
    ds_huff_t *lit = &w->lit, *dist = &w->dist;
    ds_u8 *l = w->lens;
    if (type == 1) {
        if (!*fixed) {
            for (ds_u32 i = 0; i < 288; i++)
                l[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
            ds_build(lit, l, 288, 0);
            for (ds_u32 i = 0; i < 32; i++)
                l[i] = 5; /* 30 and 31 take codes but are no distances (ds_codes refuses them) */
            ds_build(dist, l, 32, 0);
            *fixed = 1;
        }
        return 0;
    }
    if (type != 2)
        return -1;
    *fixed = 0;
    ds_u32 nlit = ds_take(b, 5) + 257, ndist = ds_take(b, 5) + 1, ncode = ds_take(b, 4) + 4;
    if (nlit > 286 || ndist > 30)
        return -1;
    for (ds_u32 i = 0; i < 19; i++)
        l[ds_clen_order[i]] = i < ncode ? (ds_u8)ds_take(b, 3) : 0;
    if (ds_build(lit, l, 19, 1) < 0 || ds_code_lengths(b, lit->count, lit->symbol, l, nlit + ndist) < 0)
        return -1;
    if (l[256] == 0) /* no end-of-block code */
        return -1;
    if (ds_build(lit, l, nlit, 0) < 0 || ds_build(dist, l + nlit, ndist, 0) < 0)
        return -1;
    return 0;
}

/* Walks the raw Deflate stream p[0, n) to its last block's end: 0 and *s,
 * or -1 where it is not a valid stream within n bytes, or does not decode
 * to exactly `expect` bytes. */
DS_FN int ds_walk(const ds_u8 *p, ds_u64 n, ds_u64 expect, ds_stream_t *s, ds_work_t *w)
{
    ds_bits_t b = {p, n, 0, 0, 0};
    ds_u64 done = 0;
    int fixed = 0; /* w's codes are the fixed ones */
    for (;;) {
        ds_u64 header = ds_pos(&b);
        ds_u32 final = ds_take(&b, 1), type = ds_take(&b, 2);
        if (type == 0) {
            ds_seek(&b, (ds_pos(&b) + 7) & ~7ull);
            ds_u32 len = ds_take(&b, 16), nlen = ds_take(&b, 16);
            if ((len ^ 0xffffu) != nlen)
                return -1;
            ds_seek(&b, ds_pos(&b) + 8ull * len);
            done += len;
        }
        else if (ds_block_codes(&b, w, type, &fixed) < 0 || ds_codes(&b, &w->lit, &w->dist, &done) < 0)
            return -1;
        if (ds_overrun(&b) || done > expect)
            return -1;
        if (final) {
            s->final_bit = header;
            s->end_bit = ds_pos(&b);
            return done == expect ? 0 : -1;
        }
    }
}

/* Bytes of `len` bytes in stored blocks. */
DS_FN ds_u64 ds_stored_bytes(ds_u64 len)
{
    ds_u64 n = len ? (len + DS_STORED_MAX - 1) / DS_STORED_MAX : 1;
    return 5 * n + len;
}

/* Bytes of a walked piece once joined: its blocks to the last one's end,
 * then, where it is not the chunk's last piece, the empty stored block. */
DS_FN ds_u64 ds_joined_bytes(const ds_stream_t *s, int last)
{
    return last ? (s->end_bit + 7) / 8 : (s->end_bit + 3 + 7) / 8 + 4;
}

/* Makes the walked stream p (room for ds_joined_bytes) a piece that the
 * next one may follow: the last block's BFINAL flag cleared, the bits after
 * its end zeroed, the empty stored block appended. The chunk's last piece
 * is left as it is. Returns its joined bytes. */
DS_FN ds_u64 ds_join(ds_u8 *p, const ds_stream_t *s, int last)
{
    ds_u64 total = ds_joined_bytes(s, last);
    if (last)
        return total;
    p[s->final_bit / 8] &= (ds_u8)~(1u << (s->final_bit % 8));
    ds_u64 end = s->end_bit / 8;
    if (s->end_bit % 8)
        p[end++] &= (ds_u8)((1u << (s->end_bit % 8)) - 1);
    while (end < total - 4)
        p[end++] = 0; /* the stored block's header bits, then its padding */
    p[total - 4] = 0;
    p[total - 3] = 0;
    p[total - 2] = 0xff;
    p[total - 1] = 0xff;
    return total;
}

/* Stored blocks of src[0, len) into out (ds_stored_bytes(len)), the last
 * one BFINAL where `last`. For the host and tests; the kernel writes them
 * with all its threads. */
DS_FN ds_u64 ds_store(ds_u8 *out, const ds_u8 *src, ds_u64 len, int last)
{
    ds_u64 o = 0, at = 0;
    do {
        ds_u64 bl = len - at < DS_STORED_MAX ? len - at : DS_STORED_MAX;
        out[o++] = (ds_u8)(last && at + bl == len ? 1 : 0);
        out[o++] = (ds_u8)bl;
        out[o++] = (ds_u8)(bl >> 8);
        out[o++] = (ds_u8)~bl;
        out[o++] = (ds_u8)(~bl >> 8);
        for (ds_u64 i = 0; i < bl; i++)
            out[o++] = src[at + i];
        at += bl;
    } while (at < len);
    return o;
}

#endif
