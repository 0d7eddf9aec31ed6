/*
 * One raw Deflate stream decoded in segments side by side.
 *
 * nvCOMP decodes each Deflate stream serially: a 1 MiB chunk takes 67-78 ms
 * on an H100 however many decode beside it, and a read ends that long after
 * the disk's last byte. Here a stream is cut, by its compressed bytes, into
 * segments that warps decode at once, as rapidgzip does on CPU cores:
 *
 *   - find: from each segment's nominal start on, the first bit where a
 *     dynamic-Huffman block header begins that zlib's inflate would take
 *     (complete codes, an end-of-block code; is_header_at). The first
 *     segment starts at the stream's start; a segment where none is found
 *     within its share is merged into the one before it;
 *   - decode: each segment from its start to the first block end at or
 *     after the next segment's start (or to the final block), into 16-bit
 *     symbols: a byte, or a marker for a byte of the 32 KiB before the
 *     segment, which its decoder cannot know (a back-reference reaching
 *     there, or copying such a marker);
 *   - mend: a segment the one before it ran past began on no block (a
 *     false header found): it is dropped and the one before decodes on
 *     to the next start (is_mend);
 *   - chain: the result is right only if every segment ended on exactly
 *     the bit where the next one began (then each began on a real block
 *     boundary, by induction from the stream's start), the last ended with
 *     the final block and the bytes add up to the expected size. Anything
 *     else (the scratch spent, a corrupt stream) leaves the stream to the
 *     serial decoder;
 *   - resolve: segment by segment, the markers replaced by the bytes the
 *     segments before produced.
 *
 * Plain C that CUDA C++ (NVRTC) compiles too: the codec's kernels run it
 * (codec_kernels.cu), the unit tests on the host against zlib. Written from
 * RFC 1951; codes are accepted as zlib's inflate accepts them
 * (deflate_splice.h).
 */
#ifndef H5GDS_INFLATE_SPLIT_H
#define H5GDS_INFLATE_SPLIT_H

#include "deflate_splice.h"

#define IS_WINDOW 32768u       /* Deflate's window: how far back a distance reaches */
#define IS_MARK 256u           /* symbols >= IS_MARK: the byte IS_WINDOW - (v - IS_MARK) before the segment */
#define IS_NO_START (~0ull)    /* a segment with no block start found: merged into the one before */
#define IS_MAX_SEGMENTS 64u    /* per stream */
#define IS_SEGMENT_BYTES 16384u /* compressed bytes per segment, nominally */
#define IS_PAGE 4096u          /* symbols per page of a segment's output */

enum { IS_OK = 0, IS_BAD = 1, IS_FULL = 2 };

typedef struct is_segment {
    ds_u64 start;  /* bit where its first block begins, or IS_NO_START */
    ds_u64 end;    /* bit after its last block */
    ds_u64 count;  /* symbols decoded */
    ds_u32 status; /* IS_OK, IS_BAD (not a valid stream from start), IS_FULL (over its scratch) */
    ds_u32 final;  /* its last block is the stream's final one */
} is_segment_t;

/* Segments of a raw stream of n bytes: 1 .. IS_MAX_SEGMENTS, about
 * `per` compressed bytes each (0: IS_SEGMENT_BYTES). */
DS_FN ds_u32 is_segments(ds_u64 n, ds_u64 per)
{
    ds_u64 s = n / (per ? per : IS_SEGMENT_BYTES);
    return s < 2 ? 1u : s > IS_MAX_SEGMENTS ? IS_MAX_SEGMENTS : (ds_u32)s;
}

/* Segment s's nominal first byte. */
DS_FN ds_u64 is_nominal(ds_u64 n, ds_u32 segments, ds_u32 s) { return n * s / segments; }

/* Whether the code-length code whose `ncode` 3-bit lengths are the low bits
 * of c (in the stream's order) passes ds_code_ok(count, 1): complete, or
 * no symbols at all. The Kraft sum in units of 2^-7, from registers alone:
 * about nine positions in ten that pass the header's first 17 bits fail
 * here, and the search then touches no array. */
DS_FN int is_lengths_code_ok(ds_u64 c, ds_u32 ncode)
{
    ds_u32 kraft = 0;
    for (ds_u32 i = 0; i < 19; i++) {
        ds_u32 l = i < ncode ? (ds_u32)((c >> (3 * i)) & 7u) : 0u;
        kraft += l ? 128u >> l : 0u;
    }
    return kraft == 128u || kraft == 0u;
}

/* The 17 bits from bit `pos` of p[0, n) on (bytes past n read as zeros),
 * and whether they can begin a non-final dynamic-Huffman block: BFINAL 0,
 * BTYPE 2, HLIT and HDIST in range. About nine bit positions in ten fail
 * here. */
DS_FN int is_header_bits(const ds_u8 *p, ds_u64 n, ds_u64 pos, ds_u64 *bits)
{
    ds_u64 at = pos / 8, v = 0;
    for (ds_u32 i = 0; i < 3; i++)
        v |= (ds_u64)(at + i < n ? p[at + i] : 0) << (8 * i);
    v >>= pos % 8;
    *bits = v;
    return pos + 17 <= 8 * n && (v & 7u) == 4u && ((v >> 3) & 31u) <= 29u && ((v >> 8) & 31u) <= 29u;
}

/* Whether a non-final dynamic-Huffman block header that zlib's inflate takes
 * begins at bit `pos` of p[0, n): its three codes complete (or the one-code
 * cases zlib allows), an end-of-block code. Cheap refusals first: the first
 * 17 bits, then the code-length code's Kraft sum, from two loads of bytes
 * and no bit reader. lens: 320 bytes of room. */
DS_FN int is_header_at(const ds_u8 *p, ds_u64 n, ds_u64 pos, ds_u8 *lens)
{
    ds_u64 v, c = 0;
    if (!is_header_bits(p, n, pos, &v))
        return 0;
    ds_u32 nlit = (ds_u32)((v >> 3) & 31u) + 257, ndist = (ds_u32)((v >> 8) & 31u) + 1;
    ds_u32 ncode = (ds_u32)((v >> 13) & 15u) + 4;
    ds_u64 cpos = pos + 17, cat = cpos / 8;
    for (ds_u32 i = 0; i < 8; i++)
        c |= (ds_u64)(cat + i < n ? p[cat + i] : 0) << (8 * i);
    c >>= cpos % 8; /* 57 bits at least: 19 lengths of 3 */
    if (!is_lengths_code_ok(c, ncode))
        return 0;
    ds_u8 cl[19];
    ds_u16 count[DS_MAX_BITS + 1];
    for (ds_u32 l = 0; l <= DS_MAX_BITS; l++)
        count[l] = 0;
    for (ds_u32 i = 0; i < 19; i++)
        cl[ds_clen_order[i]] = i < ncode ? (ds_u8)((c >> (3 * i)) & 7u) : 0;
    for (ds_u32 i = 0; i < 19; i++)
        count[cl[i]]++;
    /* the code-length code, canonical: symbols in code order */
    ds_u16 sym[19], offs[8];
    offs[1] = 0;
    for (ds_u32 l = 1; l < 7; l++)
        offs[l + 1] = (ds_u16)(offs[l] + count[l]);
    for (ds_u32 s = 0; s < 19; s++)
        if (cl[s])
            sym[offs[cl[s]]++] = (ds_u16)s;
    ds_bits_t b = {p, n, 0, 0, 0};
    ds_seek(&b, cpos + 3 * ncode);
    if (ds_code_lengths(&b, count, sym, lens, nlit + ndist) < 0 || lens[256] == 0 || ds_overrun(&b))
        return 0;
    return ds_lengths_ok(lens, nlit, 0) && ds_lengths_ok(lens + nlit, ndist, 0);
}

/* The first bit in [lo, hi) where is_header_at holds, or IS_NO_START (the
 * host's search; the kernel's, codec_inflate_find, gives the same bit). */
DS_FN ds_u64 is_find(const ds_u8 *p, ds_u64 n, ds_u64 lo, ds_u64 hi, ds_u8 *lens)
{
    for (ds_u64 pos = lo; pos < hi; pos++)
        if (is_header_at(p, n, pos, lens))
            return pos;
    return IS_NO_START;
}

/* On the GPU a warp decodes a segment, its lanes in step: each runs the
 * same serial decode of the stream (same bits, same tables: no
 * divergence), the first lane writes literals and builds the tables, and
 * copies are spread over the lanes. On the host one lane does it all. */
#ifdef __CUDACC_RTC__
#define IS_LANES 32u
DS_FN ds_u32 is_lane(void) { return threadIdx.x & 31u; }
DS_FN void is_sync(void) { __syncwarp(); }
DS_FN ds_u32 is_from_first(ds_u32 v) { return __shfl_sync(0xffffffffu, v, 0); }
DS_FN ds_u64 is_from_first64(ds_u64 v) { return __shfl_sync(0xffffffffu, v, 0); }
#else
#define IS_LANES 1u
DS_FN ds_u32 is_lane(void) { return 0; }
DS_FN void is_sync(void) {}
DS_FN ds_u32 is_from_first(ds_u32 v) { return v; }
DS_FN ds_u64 is_from_first64(ds_u64 v) { return v; }
#endif

/* A segment's output: 16-bit symbols in pages of IS_PAGE taken from its
 * stream's pool as it grows (a stream's segments decode to sizes nobody
 * knows beforehand: a shuffled float field's exponent bytes take a tenth
 * of the stored bytes and a quarter of the decoded ones), listed in order. */
typedef struct is_out {
    ds_u16 *pool;  /* the stream's pages */
    ds_u32 *next;  /* pages handed out, shared by the stream's segments */
    ds_u32 npages; /* in the pool */
    ds_u32 *list;  /* this segment's pages in order, room for npages */
    ds_u64 done;   /* symbols written */
    ds_u64 have;   /* symbols its listed pages hold */
    ds_u16 *cur;   /* where symbol `done` goes, unless done is at a page's start */
} is_out_t;

/* A stream's pages for `expect` decoded bytes cut into `segments`: its
 * bytes, and a partly filled last page per segment. */
DS_FN ds_u32 is_pages(ds_u64 expect, ds_u32 segments)
{
    /* and a quarter more: the pages of segments dropped by is_mend stay taken */
    return (ds_u32)(expect / IS_PAGE + expect / (4 * IS_PAGE)) + segments + 1;
}

DS_FN ds_u32 is_take_page(ds_u32 *next)
{
#ifdef __CUDACC_RTC__
    return atomicAdd(next, 1u);
#else
    return (*next)++;
#endif
}

/* Where symbol i of the segment's output is. */
DS_FN ds_u16 *is_ptr(const is_out_t *o, ds_u64 i) { return o->pool + (ds_u64)o->list[i / IS_PAGE] * IS_PAGE + i % IS_PAGE; }

/* Pages for symbols [0, upto): 0, or -1 where the pool is spent (more
 * symbols than the stream has). Every lane calls it; the first takes the
 * pages and lists them. */
DS_FN int is_ensure(is_out_t *o, ds_u64 upto)
{
    if (upto <= o->have)
        return 0;
    while (o->have < upto) {
        ds_u64 k = o->have / IS_PAGE;
        ds_u32 pg = is_from_first(is_lane() == 0 ? is_take_page(o->next) : 0u);
        if (pg >= o->npages || k >= o->npages)
            return -1;
        if (is_lane() == 0)
            o->list[k] = pg;
        o->have += IS_PAGE;
    }
    is_sync();
    return 0;
}

/* `len` symbols at the output's end, each the one `dis` before it (a
 * marker where that lies before the segment): IS_OK, IS_FULL, or IS_BAD
 * where the stream's first segment reaches before it. A copy repeats its
 * last `dis` symbols before it, so symbol k is the one at
 * done - dis + k % dis: every lane reads only what was written before. */
DS_FN ds_u32 is_copy(is_out_t *o, ds_u64 dis, ds_u64 len, int first)
{
    if (dis > o->done && first)
        return IS_BAD;
    if (is_ensure(o, o->done + len) < 0)
        return IS_FULL;
    is_sync(); /* the lanes' earlier symbols seen by all */
    ds_u32 d32 = (ds_u32)dis; /* at most IS_WINDOW; len at most 258: 32-bit arithmetic */
    for (ds_u32 k = is_lane(); k < (ds_u32)len; k += IS_LANES) {
        ds_u64 from = o->done + (k < d32 ? k : k % d32); /* its source: from - dis */
        ds_u16 v = from >= dis ? *is_ptr(o, from - dis) : (ds_u16)(IS_MARK + IS_WINDOW - (dis - from));
        *is_ptr(o, o->done + k) = v;
    }
    o->done += len;
    if (o->done % IS_PAGE) /* within a listed page */
        o->cur = is_ptr(o, o->done);
    return IS_OK;
}

/* The codes of a Huffman-coded block (ds_block_codes): on the GPU the
 * first lane reads the header and builds the tables, the others take its
 * place in the stream. */
DS_FN int is_block_codes(ds_bits_t *b, ds_work_t *w, ds_u32 type, int *fixed)
{
#ifdef __CUDACC_RTC__
    int r = 0;
    __syncwarp(); /* every lane done with the tables before the first rebuilds them */
    if (is_lane() == 0)
        r = ds_block_codes(b, w, type, fixed);
    r = (int)is_from_first((ds_u32)r);
    *fixed = (int)is_from_first((ds_u32)*fixed);
    b->at = is_from_first64(b->at);
    b->buf = is_from_first64(b->buf);
    b->cnt = is_from_first(b->cnt);
    __syncwarp(); /* the tables seen by every lane */
    return r;
#else
    return ds_block_codes(b, w, type, fixed);
#endif
}

/* A Huffman-coded block's symbols: IS_OK at its end of block, IS_FULL, or
 * IS_BAD. A distance reaching before the segment gives markers, or IS_BAD
 * in the stream's first segment. */
DS_FN ds_u32 is_symbols(ds_bits_t *b, const ds_huff_t *lit, const ds_huff_t *dist, is_out_t *o, int first)
{
    for (;;) {
        int sym = ds_decode(b, lit);
        if (sym < 0)
            return IS_BAD;
        /* a literal is checked for bits past the stream's end (zeros) only
         * at a page's start, a sixth of its instructions saved: the block's
         * end and each copy are checked, and a run of literals read from
         * past the end (a false start in the last segment) stops within a
         * page, before it takes the pages of the stream's other segments */
        if (sym < 256) {
            if (o->done % IS_PAGE == 0) {
                if (ds_overrun(b))
                    return IS_BAD;
                if (is_ensure(o, o->done + 1) < 0)
                    return IS_FULL;
                o->cur = is_ptr(o, o->done);
            }
            if (is_lane() == 0)
                *o->cur = (ds_u16)sym;
            o->cur++;
            o->done++;
            continue;
        }
        if (ds_overrun(b))
            return IS_BAD;
        if (sym == 256)
            return IS_OK;
        sym -= 257;
        if (sym >= 29)
            return IS_BAD;
        ds_u64 len = ds_len_base[sym] + ds_take(b, ds_len_extra[sym]);
        int d = ds_decode(b, dist);
        if (d < 0 || d >= 30 || ds_overrun(b))
            return IS_BAD;
        ds_u64 dis = ds_dist_base[d] + ds_take(b, ds_dist_extra[d]);
        ds_u32 r = is_copy(o, dis, len, first);
        if (r != IS_OK)
            return r;
    }
}

/* Decodes blocks from bit `start` (a block's start) until one ends at or
 * after bit `stop`, or the final one ends, appending to o's symbols: seg's
 * end, count, status and final (its start is the caller's). first: the
 * stream's first segment. Every lane calls it, with the same arguments. */
DS_FN void is_decode_on(const ds_u8 *p, ds_u64 n, ds_u64 start, ds_u64 stop, int first, is_out_t *o, ds_work_t *w,
                        is_segment_t *seg)
{
    ds_bits_t b = {p, n, 0, 0, 0};
    ds_seek(&b, start);
    int fixed = 0;
    seg->status = IS_BAD;
    seg->final = 0;
    seg->count = o->done;
    seg->end = start;
    for (;;) {
        ds_u32 final = ds_take(&b, 1), type = ds_take(&b, 2);
        if (type == 0) {
            ds_seek(&b, (ds_pos(&b) + 7) & ~7ull);
            ds_u32 len = ds_take(&b, 16), nlen = ds_take(&b, 16);
            ds_u64 at = ds_pos(&b) / 8;
            if ((len ^ 0xffffu) != nlen || at + len > n)
                return;
            if (is_ensure(o, o->done + len) < 0) {
                seg->status = IS_FULL;
                return;
            }
            for (ds_u32 k = is_lane(); k < len; k += IS_LANES)
                *is_ptr(o, o->done + k) = p[at + k];
            o->done += len;
            if (o->done % IS_PAGE)
                o->cur = is_ptr(o, o->done);
            ds_seek(&b, 8 * (at + len));
        }
        else {
            if (is_block_codes(&b, w, type, &fixed) < 0)
                return;
            ds_u32 r = is_symbols(&b, &w->lit, &w->dist, o, first);
            if (r != IS_OK) {
                seg->status = r;
                return;
            }
        }
        if (ds_overrun(&b))
            return;
        if (final || ds_pos(&b) >= stop) {
            seg->final = final;
            seg->end = ds_pos(&b);
            seg->count = o->done;
            seg->status = IS_OK;
            return;
        }
    }
}

/* is_decode_on into an empty output. */
DS_FN void is_decode(const ds_u8 *p, ds_u64 n, ds_u64 start, ds_u64 stop, int first, is_out_t *o, ds_work_t *w,
                     is_segment_t *seg)
{
    o->done = 0;
    o->have = 0;
    o->cur = 0;
    is_decode_on(p, n, start, stop, first, o, w, seg);
}

/* The next segment after s with a start, or `segments`. */
DS_FN ds_u32 is_next(const is_segment_t *seg, ds_u32 segments, ds_u32 s)
{
    ds_u32 t = s + 1;
    while (t < segments && seg[t].start == IS_NO_START)
        t++;
    return t;
}

/* Mends a chain a false start broke: a segment found to begin where no
 * block begins (the one before it ended past that bit, or it did not
 * decode) is dropped, and the segment before it, which began on a block,
 * decodes on from where it ended to the next segment's start, until the
 * two meet or the final block ends. Segment s's output: its symbols' pages
 * lists[s * npages ...] in pool. The chain is checked afterwards
 * (is_chain) as if nothing had been mended. One warp a stream, in step. */
DS_FN void is_mend(const ds_u8 *p, ds_u64 n, is_segment_t *seg, ds_u32 segments, ds_u16 *pool, ds_u32 *next,
                   ds_u32 npages, ds_u32 *lists, ds_work_t *w)
{
    ds_u32 s = 0;
    while (s < segments && seg[0].start == 0 && seg[s].status == IS_OK && !seg[s].final) {
        ds_u32 t = is_next(seg, segments, s);
        if (t < segments && seg[s].end == seg[t].start) {
            s = t; /* t began on a block: whole so far */
            continue;
        }
        if (t < segments && seg[s].end > seg[t].start) {
            /* s, begun on a block, ends on every block's end: t's start is none */
            if (is_lane() == 0)
                seg[t].start = IS_NO_START;
            is_sync();
            continue;
        }
        /* s stopped short of t (its stop was a start dropped since), or no
         * segment is left after it: on from its end */
        is_out_t o;
        o.pool = pool;
        o.next = next;
        o.npages = npages;
        o.list = lists + (ds_u64)s * npages;
        o.done = seg[s].count;
        o.have = (o.done + IS_PAGE - 1) / IS_PAGE * IS_PAGE;
        o.cur = o.done % IS_PAGE ? is_ptr(&o, o.done) : 0;
        is_segment_t r;
        is_decode_on(p, n, seg[s].end, t < segments ? seg[t].start : IS_NO_START, s == 0, &o, w, &r);
        if (is_lane() == 0) {
            seg[s].end = r.end;
            seg[s].count = r.count;
            seg[s].status = r.status;
            seg[s].final = r.final;
        }
        is_sync();
    }
    /* segments after the final block: none of the stream's */
    if (s < segments && seg[s].status == IS_OK && seg[s].final)
        for (ds_u32 t = s + 1; t < segments; t++)
            if (is_lane() == 0)
                seg[t].start = IS_NO_START;
    is_sync();
}


/* Whether the decoded segments make up the stream (see the top) of
 * `expect` bytes; at[s]: where segment s's bytes go. */
DS_FN int is_chain(const is_segment_t *seg, ds_u32 segments, ds_u64 expect, ds_u64 *at)
{
    ds_u64 total = 0;
    if (segments == 0 || seg[0].start != 0)
        return 0;
    for (ds_u32 s = 0; s < segments; s = is_next(seg, segments, s)) {
        ds_u32 t = is_next(seg, segments, s);
        if (seg[s].status != IS_OK)
            return 0;
        if (t < segments && (seg[s].final || seg[s].end != seg[t].start))
            return 0;
        if (t == segments && !seg[s].final)
            return 0;
        at[s] = total;
        total += seg[s].count;
        if (total > expect)
            return 0;
    }
    return total == expect;
}

/* Symbol i of a segment whose pages are list[] in pool. */
DS_FN ds_u16 is_symbol(const ds_u16 *pool, const ds_u32 *list, ds_u64 i)
{
    return pool[(ds_u64)list[i / IS_PAGE] * IS_PAGE + i % IS_PAGE];
}

/* Symbol v of a segment whose bytes go at out + at, as a byte: the byte
 * before it a marker names must be final. 0, or -1 where a marker reaches
 * before the stream. */
DS_FN int is_byte(ds_u8 *out, ds_u64 at, ds_u64 i, ds_u32 v)
{
    if (v < IS_MARK)
        out[at + i] = (ds_u8)v;
    else if (at + (v - IS_MARK) < IS_WINDOW)
        return -1;
    else
        out[at + i] = out[at + (v - IS_MARK) - IS_WINDOW];
    return 0;
}

#endif
