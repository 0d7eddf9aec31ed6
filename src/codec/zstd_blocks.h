/*
 * A zstd frame decoded block by block, the blocks of a chunk side by side.
 *
 * nvCOMP decodes each frame of a batch serially: about 25 ms for a 1 MiB
 * chunk, whatever the batch's width. A frame's blocks (128 KiB decoded at
 * most) depend on the blocks before them in three ways only: the Huffman
 * and FSE tables a block reuses (Treeless literals, Repeat_Mode), the
 * repeat offsets its sequences start from, and matches that copy bytes
 * decoded before it. So the decode runs in five steps:
 *  1. plan (a thread a chunk): the block headers, each block's literal and
 *     sequence counts, and where the descriptions of the tables in force lie;
 *  2. decode (two warps a block): the literals (Huffman streams side by
 *     side) on one, the sequences' bitstream on a lane of the other; then
 *     that warp turns their offset values into offsets, kept in terms of
 *     the repeat offsets the block starts from (ZB_SYM), with a scan;
 *  3. link (a thread a chunk): where each block's bytes go, and the repeat
 *     offsets each block starts from;
 *  4. execute (a warp a block, 32 sequences at a time): literals and
 *     matches written out; a byte that a match takes from before the
 *     block's start gets a reference to that byte instead (refs[]);
 *  5. resolve (a thread block a chunk): block after block, the referenced
 *     bytes filled in (the bytes they name are final by then).
 * What this decoder does not take (a content checksum, a dictionary, a
 * window over 2^27, more blocks than planned, anything malformed) leaves
 * the chunk to nvCOMP, which decodes it or reports its error as before.
 * Where libzstd might accept what is refused here, the chunk goes to
 * nvCOMP too: this decoder only ever returns what libzstd returns.
 *
 * Plain C that CUDA C++ (NVRTC) compiles too: the codec's kernels run it,
 * the unit tests on the host against libzstd (lane 0 of 1, and the warp
 * steps on 32 simulated lanes). Written from the format's specification
 * (RFC 8878).
 */
#ifndef H5GDS_ZSTD_BLOCKS_H
#define H5GDS_ZSTD_BLOCKS_H

#include "zstd_splice.h"

#ifdef __CUDACC_RTC__
#define ZB_WARP_SYNC() __syncwarp()
#elif defined(ZB_SIMULATED_LANES) /* a test runs a warp's lanes on the host (it defines these) */
void zb_sim_sync(int line);
#define ZB_WARP_SYNC() zb_sim_sync(__LINE__)
#else
#define ZB_WARP_SYNC() ((void)0)
#endif

/* A frame this decoder does not take (ZB_TRACE: where, for debugging). */
#ifdef ZB_TRACE
#define ZB_REFUSE() return (printf("zstd_blocks.h:%d: refused\n", __LINE__), -1)
#else
#define ZB_REFUSE() return -1
#endif

#define ZB_NONE 0xFFFFFFFFu
#define ZB_HUF_BITS 11u      /* a Huffman code's bits at most (what is longer goes to nvCOMP) */
#define ZB_SYM 0x80000000u   /* an offset in terms of the block's starting repeat offsets */

/* A sequence whose bits fit this many is cut from the bit window at once
 * (after one refill the window holds 56); longer ones a field at a time
 * (a test builds with 0: every sequence that way). */
#ifndef ZB_WINDOW_BITS
#define ZB_WINDOW_BITS 56
#endif

/* Blocks planned per chunk: libzstd's block splitter (its high levels)
 * cuts blocks of a few KiB; a frame of more is left to nvCOMP. */
ZS_FN zs_u32 zb_max_blocks(zs_u64 expect) { return (zs_u32)(expect / 2048 + 16); }

/* Thread blocks per chunk in the kernels of steps 2 and 4 (each takes the
 * blocks k, k + this, ...): a chunk of full blocks, and a few. */
ZS_FN zs_u32 zb_grid_blocks(zs_u64 expect) { return (zs_u32)((expect + ZS_BLOCK_MAX - 1) / ZS_BLOCK_MAX + 2); }

typedef struct zb_block {
    zs_u32 src, size;           /* the block's content: offset in the frame, Block_Size */
    zs_u32 out_at, out_len;     /* its decoded bytes in the chunk (raw, RLE: from the header) */
    zs_u32 lit_at, lit_len;     /* its literals in the chunk's literal area, regenerated size */
    zs_u32 lit_src, lit_bytes;  /* the literals' streams (or raw bytes) in the frame */
    zs_u32 huf_at;              /* the Huffman tree description in force, in the frame */
    zs_u32 seq_at, nseq;        /* its sequences in the chunk's sequence area */
    zs_u32 bits_at, bits_len;   /* the sequences' bitstream in the frame */
    zs_u32 tab_at[3];           /* LL, OF, ML: the table descriptions in force, in the frame */
    zs_u32 end_rep[3];          /* repeat offsets after the block, in terms of those before it */
    zs_u32 in_rep[3];           /* repeat offsets before it (link) */
    zs_u32 ref_end;             /* its bytes past this name none before it (execute) */
    zs_u8 type, lit_type, streams, bad;
    zs_u8 tab_mode[3];
    zs_u8 reused; /* bit 0: Treeless literals; bit 1 + t: table t in Repeat_Mode (tests' counts) */
} zb_block_t;

typedef struct zb_chunk {
    zs_u32 nblocks;
    zs_u32 ok; /* planned, then linked; 0: the chunk is left to nvCOMP */
} zb_chunk_t;

/* One decoded sequence: lengths, and its offset (zb_sym). */
typedef struct zb_seq {
    zs_u32 ll, ml, off;
} zb_seq_t;

/* Where a chunk's working memory lies (offsets from its base; the same on
 * the host and in the kernels). */
typedef struct zb_layout {
    zs_u64 blocks, lits, seqs, refs, total;
    zs_u32 max_blocks;
} zb_layout_t;

ZS_FN zs_u64 zb_align(zs_u64 v) { return (v + 255) & ~(zs_u64)255; }

ZS_FN zb_layout_t zb_layout(zs_u64 expect)
{
    zb_layout_t l;
    l.max_blocks = zb_max_blocks(expect);
    l.blocks = zb_align(sizeof(zb_chunk_t));
    l.lits = l.blocks + zb_align((zs_u64)l.max_blocks * sizeof(zb_block_t));
    l.seqs = l.lits + zb_align(expect);
    l.refs = l.seqs + zb_align((expect / 3 + 1) * sizeof(zb_seq_t));
    l.total = l.refs + zb_align(expect * 4);
    return l;
}

/* ---- offsets in terms of the starting repeat offsets ---- */

/* An offset or repeat offset: ZB_SYM | i << 29 | d, starting repeat offset
 * i minus d; else a value (0: not valid). zb_subst(v, s): v with the
 * starting repeat offsets replaced by s[0..2] (values, or themselves in
 * terms of earlier ones: updates compose). */
#define ZB_SYM_D 0x1FFFFFFFu
ZS_FN zs_u32 zb_subst(zs_u32 v, const zs_u32 *s)
{
    if (!(v & ZB_SYM))
        return v;
    zs_u32 base = s[(v >> 29) & 3u], d = v & ZB_SYM_D;
    if (!(base & ZB_SYM))
        return base > d ? base - d : 0;
    zs_u32 sum = (base & ZB_SYM_D) + d;
    return sum >= ZB_SYM_D ? 0 : (base & ~ZB_SYM_D) | sum;
}

/* What one sequence does to the repeat offsets (RFC 8878 3.1.2.5), from
 * its Offset_Value ofv and literals length: t[] the repeat offsets after it
 * in terms of those before it, *off its offset (0: not valid). */
ZS_FN void zb_seq_rep(zs_u32 ofv, zs_u32 ll, zs_u32 *t, zs_u32 *off)
{
    const zs_u32 r0 = ZB_SYM, r1 = ZB_SYM | 1u << 29, r2 = ZB_SYM | 2u << 29;
    unsigned idx = ofv - 1 + (ll == 0); /* a repeat offset: 0-3 (ofv is 1 at least) */
    zs_u32 o = ofv > 3 ? (ofv - 3 < ZB_SYM ? ofv - 3 : 0) : idx == 0 ? r0 : idx == 1 ? r1 : idx == 2 ? r2 : r0 + 1;
    t[0] = o;
    t[1] = ofv > 3 || idx != 0 ? r0 : r1;
    t[2] = ofv > 3 || idx >= 2 ? r1 : r2;
    *off = o;
}

/* ---- the plan ---- */

ZS_FN zs_u32 zb_le(const zs_u8 *p, unsigned n)
{
    zs_u32 v = 0;
    for (unsigned k = 0; k < n; k++)
        v |= (zs_u32)p[k] << (8 * k);
    return v;
}

/* Reads the frame p[0 .. n) (a chunk's bytes, expect decoded): 0 and its
 * blocks in blk[] when the chunk can be decoded here, else -1. */
ZS_FN int zb_plan(const zs_u8 *p, zs_u64 n, zs_u64 expect, zb_block_t *blk, zb_chunk_t *ch)
{
    zb_layout_t l = zb_layout(expect);
    ch->nblocks = 0;
    ch->ok = 0;
    if (n < 6 || zb_le(p, 4) != ZS_MAGIC || n >= ZB_SYM || expect >= ZB_SYM)
        ZB_REFUSE();
    zs_u32 fhd = p[4], fcs_flag = fhd >> 6, single = (fhd >> 5) & 1u, dflag = fhd & 3u;
    if ((fhd & 0x08u) || (fhd & 0x04u)) /* reserved bit; a content checksum (left to nvCOMP) */
        ZB_REFUSE();
    zs_u64 pos = 5 + !single;
    zs_u32 dbytes = dflag == 3 ? 4 : dflag, fbytes = fcs_flag ? (1u << fcs_flag) : single;
    if (pos + dbytes + fbytes > n || (dbytes && zb_le(p + pos, dbytes) != 0))
        ZB_REFUSE();
    pos += dbytes;
    if (fbytes) {
        zs_u64 fcs = 0;
        for (zs_u32 k = 0; k < fbytes; k++)
            fcs |= (zs_u64)p[pos + k] << (8 * k);
        if ((fbytes == 2 ? fcs + 256 : fcs) != expect)
            ZB_REFUSE();
    }
    pos += fbytes;
    if (!single) { /* the window: a block is never larger than it; libzstd's one-shot decode takes
                      up to 2^31, its streaming one 2^27 (more: refused here) */
        zs_u32 wd = p[5];
        zs_u64 base = 1ull << (10 + (wd >> 3));
        if (base + (base >> 3) * (wd & 7u) < ZS_BLOCK_MAX || (wd >> 3) > 17)
            ZB_REFUSE();
    }
    zs_u32 nb = 0, lits = 0, seqs = 0, huf = ZB_NONE, tab_at[3] = {ZB_NONE, ZB_NONE, ZB_NONE};
    zs_u8 tab_mode[3] = {0xFF, 0xFF, 0xFF};
    zs_u64 fixed = 0, bmax = single && expect < ZS_BLOCK_MAX ? expect : ZS_BLOCK_MAX; /* as libzstd */
    for (;;) {
        if (pos + 3 > n || nb == l.max_blocks)
            ZB_REFUSE();
        zs_u32 bh = zb_le(p + pos, 3), last = bh & 1u, type = (bh >> 1) & 3u, size = bh >> 3;
        pos += 3;
        zs_u64 content = type == 1 ? 1 : size;
        if (type == 3 || content > n - pos || size > bmax || (type == 2 && (size >= bmax || size < 2)))
            ZB_REFUSE(); /* a compressed block holds a literals header and a sequences one at least */
        zb_block_t *b = &blk[nb];
        b->src = (zs_u32)pos;
        b->size = size;
        b->type = (zs_u8)type;
        b->bad = 0;
        b->reused = 0;
        b->out_len = type < 2 ? size : 0;
        b->lit_len = b->nseq = b->lit_at = b->seq_at = 0;
        b->end_rep[0] = ZB_SYM;
        b->end_rep[1] = ZB_SYM | (1u << 29);
        b->end_rep[2] = ZB_SYM | (2u << 29);
        fixed += b->out_len;
        if (type == 2) {
            const zs_u8 *q = p + pos;
            zs_u32 lt = q[0] & 3u, hs, regen, csize, streams = lt >= 2 && ((q[0] >> 2) & 3u) ? 4 : 1;
            if (zs_literals_header(q, size, &hs, &regen, &csize) < 0 || regen > ZS_BLOCK_MAX ||
                (lt >= 2 && csize == 0) || (streams == 4 && regen < 6))
                ZB_REFUSE();
            b->lit_type = (zs_u8)lt;
            b->streams = (zs_u8)streams;
            b->lit_len = regen;
            b->lit_at = lits;
            b->lit_src = (zs_u32)(pos + hs);
            b->lit_bytes = csize;
            if (lt == 2) {
                huf = b->lit_src; /* the tree description opens the streams */
            }
            else if (lt == 3) {
                if (huf == ZB_NONE)
                    ZB_REFUSE();
                b->reused = 1;
            }
            b->huf_at = huf;
            lits += regen;
            if (lits > expect)
                ZB_REFUSE();
            /* the sequences section */
            zs_u32 at = hs + csize, left = size - at, nseq;
            const zs_u8 *s = q + at;
            int head = zs_seq_count(s, left, &nseq);
            if (head < 0)
                ZB_REFUSE();
            zs_u32 sh = (zs_u32)head;
            b->nseq = nseq;
            b->seq_at = seqs;
            seqs += nseq;
            if (seqs > expect / 3 + 1)
                ZB_REFUSE();
            if (nseq == 0) {
                if (sh != 1 || left != 1) /* only a 0 byte ends the section (RFC 8878 3.1.1.3.2.1) */
                    ZB_REFUSE();
                b->bits_at = b->bits_len = 0;
            }
            else {
                if (sh + 1 > left)
                    ZB_REFUSE();
                zs_u32 modes = s[sh];
                if (modes & 3u)
                    ZB_REFUSE();
                zs_u32 d = sh + 1;
                for (int t = 0; t < 3; t++) {
                    zs_u32 mode = (modes >> (6 - 2 * t)) & 3u;
                    if (mode == ZS_MODE_REPEAT) {
                        if (tab_mode[t] == 0xFF)
                            ZB_REFUSE();
                        b->reused |= (zs_u8)(2u << t);
                    }
                    else {
                        short read[53];
                        const short *norm;
                        unsigned sym_end, al;
                        int used = zs_read_desc(t, mode, s + d, left - d, read, &norm, &sym_end, &al);
                        if (used < 0)
                            ZB_REFUSE();
                        tab_mode[t] = (zs_u8)mode;
                        tab_at[t] = (zs_u32)(pos + at + d);
                        d += (zs_u32)used;
                    }
                    b->tab_mode[t] = tab_mode[t];
                    b->tab_at[t] = tab_at[t];
                }
                if (d >= left || s[left - 1] == 0) /* a bitstream, with its end mark */
                    ZB_REFUSE();
                b->bits_at = (zs_u32)(pos + at + d);
                b->bits_len = left - d;
            }
        }
        pos += content;
        nb++;
        if (last)
            break;
    }
    if (pos != n || fixed > expect)
        ZB_REFUSE();
    ch->nblocks = nb;
    ch->ok = 1;
    return 0;
}

/* ---- bitstreams ---- */

/* A backward bitstream (RFC 8878 4.1) read through a 64-bit window: `pos`
 * bits left below the end mark; c holds bytes [at, at + 8) (zeros past the
 * end), so that a read touches memory once in several. */
typedef struct zb_bits {
    const zs_u8 *p;
    zs_u64 c;
    int len, at, pos;
    int overrun;
} zb_bits_t;

ZS_FN void zb_fill(zb_bits_t *r)
{
    int at = (r->pos >> 3) - 7;
    if (at < 0)
        at = 0;
    zs_u64 c = 0;
#ifdef __CUDACC_RTC__
    /* three aligned words that hold the eight bytes: up to 3 bytes before
     * them (inside the frame: a stream never opens it) and after them
     * (inside the aligned word of a byte of the frame: they never fault,
     * though a memory checker may name them) */
    if (at + 8 <= r->len) {
        zs_u64 a = (zs_u64)(r->p + at);
        const zs_u32 *w = (const zs_u32 *)(a & ~(zs_u64)3);
        unsigned sh = 8u * (unsigned)(a & 3);
        zs_u64 lo = (zs_u64)w[0] | ((zs_u64)w[1] << 32), hi = sh ? w[2] : 0;
        c = sh ? (lo >> sh) | (hi << (64 - sh)) : lo;
    }
    else
#endif
        for (int k = 0; k < 8; k++)
            c |= (zs_u64)(at + k < r->len ? r->p[at + k] : 0) << (8 * k);
    r->c = c;
    r->at = at;
}

ZS_FN int zb_bits_init(zb_bits_t *r, const zs_u8 *p, zs_u64 len)
{
    if (len == 0 || p[len - 1] == 0 || len >= (1u << 27))
        return -1;
    r->p = p;
    r->len = (int)len;
    r->pos = (int)((len - 1) * 8 + zs_hibit(p[len - 1]));
    r->overrun = 0;
    zb_fill(r);
    return 0;
}

/* n (<= 56) bits; past the stream's start: 0 and overrun set. */
ZS_FN zs_u32 zb_read(zb_bits_t *r, unsigned n)
{
    int lo = r->pos - (int)n;
    if (lo < 0) {
        r->overrun = 1;
        r->pos = 0;
        return 0;
    }
    if (lo < 8 * r->at)
        zb_fill(r);
    r->pos = lo;
    return (zs_u32)((r->c >> (lo - 8 * r->at)) & ((1ull << n) - 1));
}

/* The next n (<= 56) bits without taking them, zeros below the start. */
ZS_FN zs_u32 zb_peek(zb_bits_t *r, unsigned n)
{
    int lo = r->pos - (int)n;
    if (lo < 8 * r->at)
        zb_fill(r);
    if (lo >= 0)
        return (zs_u32)((r->c >> (lo - 8 * r->at)) & ((1ull << n) - 1));
    return (zs_u32)((r->c & ((1ull << r->pos) - 1)) << (n - (unsigned)r->pos)); /* at is 0 here */
}

#define ZB_HUF_WEIGHTS_AL 6u /* the Huffman weights' FSE accuracy at most (RFC 8878 4.2.1.2) */

/* ---- literals ---- */

/* The Huffman tree description at p (avail bytes): the decode table
 * dt[1 << *bits] (symbol | bits << 8). cell: room for the weights' FSE
 * table (1 << ZB_HUF_WEIGHTS_AL cells). */
ZS_FN int zb_huf_table(const zs_u8 *p, zs_u64 avail, zs_u16 *dt, unsigned *bits, unsigned *used, zs_cell_t *cell)
{
    zs_u8 w[256];
    unsigned nw = 0;
    if (avail < 1)
        return -1;
    unsigned hb = p[0];
    if (hb >= 128) {
        nw = hb - 127;
        unsigned nbytes = (nw + 1) / 2;
        if (1 + nbytes > avail)
            return -1;
        for (unsigned i = 0; i < nw; i++)
            w[i] = (zs_u8)(i & 1 ? p[1 + i / 2] & 15u : p[1 + i / 2] >> 4);
        *used = 1 + nbytes;
    }
    else {
        if (hb == 0 || 1 + (zs_u64)hb > avail)
            return -1;
        short norm[53];
        unsigned sym_end, al;
        int hdr = zs_read_counts(norm, &sym_end, &al, p + 1, hb, ZB_HUF_WEIGHTS_AL, 12);
        if (hdr < 0 || (unsigned)hdr >= hb || zs_cells_build(cell, norm, sym_end, al) < 0)
            return -1;
        zb_bits_t r;
        if (zb_bits_init(&r, p + 1 + hdr, hb - (unsigned)hdr) < 0)
            return -1;
        unsigned s1 = zb_read(&r, al), s2 = zb_read(&r, al);
        if (r.overrun)
            return -1;
        for (;;) { /* two states in turn, until the bits run out (RFC 8878 4.2.1.2) */
            if (nw > 253)
                return -1;
            w[nw++] = cell[s1].sym;
            s1 = cell[s1].base + zb_read(&r, cell[s1].nb);
            if (r.overrun) {
                w[nw++] = cell[s2].sym;
                break;
            }
            w[nw++] = cell[s2].sym;
            s2 = cell[s2].base + zb_read(&r, cell[s2].nb);
            if (r.overrun) {
                w[nw++] = cell[s1].sym;
                break;
            }
        }
        *used = 1 + hb;
    }
    zs_u32 total = 0, rank[13];
    for (unsigned k = 0; k < 13; k++)
        rank[k] = 0;
    for (unsigned i = 0; i < nw; i++) {
        if (w[i] > 12)
            return -1;
        rank[w[i]]++;
        total += (1u << w[i]) >> 1;
    }
    if (total == 0)
        return -1;
    unsigned log = zs_hibit(total) + 1;
    if (log > ZB_HUF_BITS)
        return -1;
    zs_u32 rest = (1u << log) - total;
    if (rest & (rest - 1))
        return -1;
    unsigned lastw = zs_hibit(rest) + 1;
    w[nw] = (zs_u8)lastw;
    rank[lastw]++;
    if (rank[1] < 2 || (rank[1] & 1u))
        return -1;
    zs_u32 start[13];
    start[1] = 0;
    for (unsigned k = 1; k < 12; k++)
        start[k + 1] = start[k] + (rank[k] << (k - 1));
    for (unsigned s = 0; s <= nw; s++) {
        unsigned wt = w[s];
        if (!wt)
            continue;
        zs_u32 len = 1u << (wt - 1);
        zs_u16 e = (zs_u16)(s | ((log + 1 - wt) << 8));
        for (zs_u32 u = start[wt]; u < start[wt] + len; u++)
            dt[u] = e;
        start[wt] += len;
    }
    *bits = log;
    return 0;
}

/* One Huffman stream of `count` symbols to out; -1 unless it ends exactly. */
ZS_FN int zb_huf_stream(const zs_u8 *p, zs_u64 len, const zs_u16 *dt, unsigned bits, zs_u8 *out, zs_u32 count)
{
    zb_bits_t r;
    if (zb_bits_init(&r, p, len) < 0)
        return -1;
    for (zs_u32 i = 0; i < count; i++) {
        zs_u16 e = dt[zb_peek(&r, bits)];
        int nb = e >> 8;
        if (nb > r.pos)
            return -1;
        r.pos -= nb;
        out[i] = (zs_u8)e;
    }
    return r.pos == 0 ? 0 : -1;
}

/* ---- sequences ---- */

/* A sequences table (of `type`) from its description: its cells into
 * cell[1 << *al]. */
ZS_FN int zb_seq_table(zs_cell_t *cell, unsigned *al, int type, unsigned mode, const zs_u8 *p, zs_u64 len)
{
    short read[53];
    const short *norm;
    unsigned sym_end;
    if (zs_read_desc(type, mode, p, len, read, &norm, &sym_end, al) < 0)
        return -1;
    if (!norm) { /* RLE_Mode: one symbol, no state bits */
        cell[0].sym = (zs_u8)sym_end;
        cell[0].nb = 0;
        cell[0].base = 0;
        *al = 0;
        return 0;
    }
    return zs_cells_build(cell, norm, sym_end, *al);
}

/* A sequences table's cell with all a sequence needs of it, in one load:
 * bits 0-31 the base of the value the code's extra bits add to (LL, ML:
 * the length's; OF: 1 << code), 32-47 the next state's base, 48-55 its
 * bits, 56-63 the code's extra bits. */
typedef zs_u64 zb_scell_t;

/* Where table t's cells start in zb_work_t's sc (LL, OF, ML: 512, 256
 * and 512 of them, 1 << zs_max_al[t]). */
ZS_FN zs_u32 zb_sc_at(int t) { return t == ZS_LL ? 0u : t == ZS_OF ? 512u : 768u; }

/* A warp's working memory for one block (the kernel's shared memory: 14.3
 * KiB, so that 14 blocks' thread blocks fit an SM). A sequences table is
 * built as 4-byte cells in the upper half of its packed cells' room, which
 * zb_seq_cells then fills from the bottom up: packed cell s covers 4-byte
 * cells 2s - n and 2s - n + 1 (n = the room's cells), read by then. */
typedef struct zb_work {
    union {
        zb_scell_t sc[1280];
        zs_cell_t cell[2560];
    } seq;
    zs_u16 dt[1u << ZB_HUF_BITS];
    zs_cell_t hw[1u << ZB_HUF_WEIGHTS_AL]; /* the Huffman weights' FSE table */
    unsigned al[3];                        /* the sequences' tables' accuracy */
    unsigned huf_bits;
    int fail;
} zb_work_t;

/* Where table t's 4-byte cells are built (zb_seq_cells). */
ZS_FN zs_cell_t *zb_seq_built(zb_work_t *w, int t)
{
    return w->seq.cell + 2u * zb_sc_at(t) + (1u << zs_max_al[t]);
}

/* Table t's cells packed as zb_scell_t in place (the decode's inner loop
 * reads those). */
ZS_FN void zb_seq_cells(zb_work_t *w, int t)
{
    const zs_cell_t *built = zb_seq_built(w, t);
    zb_scell_t *sc = w->seq.sc + zb_sc_at(t);
    for (zs_u32 s = 0; s < (1u << w->al[t]); s++) {
        zs_cell_t c = built[s];
        zs_u32 value = zs_code_base(t, c.sym); /* OF: codes up to 31 (zs_max_sym) */
        unsigned extra = zs_code_bits(t, c.sym);
        sc[s] = value | (zs_u64)c.base << 32 | (zs_u64)c.nb << 48 | (zs_u64)extra << 56;
    }
}

/* A packed cell's next-state base, next-state bits and extra bits. */
ZS_FN zs_u32 zb_sc_state(zb_scell_t c) { return (zs_u32)(c >> 32 & 0xFFFFu); }
ZS_FN unsigned zb_sc_nb(zb_scell_t c) { return (unsigned)(c >> 48) & 255u; }
ZS_FN unsigned zb_sc_extra(zb_scell_t c) { return (unsigned)(c >> 56); }

/* The low n bits of v >> at. */
ZS_FN zs_u32 zb_field(zs_u64 v, int at, unsigned n) { return (zs_u32)((v >> at) & (((zs_u64)1 << n) - 1)); }

/* Step 2's sequences (one lane): their lengths and raw offset values
 * (Offset_Value, RFC 8878 3.1.1.3.2.1.1) into seqs, bad set where the
 * bitstream does not hold them exactly; zb_offsets then turns the values
 * into offsets on a warp. This lane's serial loop bounds a block's decode,
 * so it does nothing else: each sequence takes one load of each table and,
 * where its bits fit the window (56 bits: nearly always), one refill at
 * most and its six fields cut from the window with no check between them. */
ZS_FN void zb_sequences(const zs_u8 *p, zb_block_t *b, zb_seq_t *seqs, zb_work_t *w)
{
    int fail = w->fail;
    if (b->nseq && !fail) {
        zb_bits_t r;
        zs_u32 sll = 0, sof = 0, sml = 0;
        fail = zb_bits_init(&r, p + b->bits_at, b->bits_len) < 0;
        if (!fail) {
            sll = zb_read(&r, w->al[ZS_LL]);
            sof = zb_read(&r, w->al[ZS_OF]);
            sml = zb_read(&r, w->al[ZS_ML]);
            fail = r.overrun;
        }
        const zb_scell_t *tll = w->seq.sc + zb_sc_at(ZS_LL), *tof = w->seq.sc + zb_sc_at(ZS_OF),
                         *tml = w->seq.sc + zb_sc_at(ZS_ML);
        zb_seq_t *q = seqs + b->seq_at;
        for (zs_u32 i = 0; i < b->nseq && !fail; i++) {
            zb_scell_t cll = tll[sll], cof = tof[sof], cml = tml[sml];
            unsigned lle = zb_sc_extra(cll), mle = zb_sc_extra(cml), ole = zb_sc_extra(cof);
            unsigned lnb = zb_sc_nb(cll), mnb = zb_sc_nb(cml), onb = zb_sc_nb(cof);
            int more = i + 1 < b->nseq;
            unsigned need = ole + mle + lle + (more ? lnb + mnb + onb : 0u);
            zs_u32 ofx, mlx, llx;
            if ((int)need > r.pos) { /* past the stream's start */
                fail = 1;
                break;
            }
            if (need <= ZB_WINDOW_BITS) {
                if (r.pos - (int)need < 8 * r.at)
                    zb_fill(&r); /* the window then holds 56 bits below pos, or all that are left */
                zs_u64 c = r.c;
                int at = r.pos - 8 * r.at;
                at -= (int)ole;
                ofx = zb_field(c, at, ole);
                at -= (int)mle;
                mlx = zb_field(c, at, mle);
                at -= (int)lle;
                llx = zb_field(c, at, lle);
                if (more) {
                    at -= (int)lnb;
                    sll = zb_sc_state(cll) + zb_field(c, at, lnb);
                    at -= (int)mnb;
                    sml = zb_sc_state(cml) + zb_field(c, at, mnb);
                    at -= (int)onb;
                    sof = zb_sc_state(cof) + zb_field(c, at, onb);
                }
                r.pos = 8 * r.at + at;
            }
            else { /* long extra bits: a field at a time */
                ofx = zb_read(&r, ole);
                mlx = zb_read(&r, mle);
                llx = zb_read(&r, lle);
                if (more) {
                    sll = zb_sc_state(cll) + zb_read(&r, lnb);
                    sml = zb_sc_state(cml) + zb_read(&r, mnb);
                    sof = zb_sc_state(cof) + zb_read(&r, onb);
                }
            }
            zb_seq_t e;
            e.ll = (zs_u32)cll + llx;
            e.ml = (zs_u32)cml + mlx;
            e.off = (zs_u32)cof + ofx; /* (1 << code) + extra bits: 2^32 - 1 at most */
            q[i] = e;
        }
        if (!fail && (r.overrun || r.pos != 0))
            fail = 1;
    }
    b->bad = (zs_u8)fail;
}

/* Step 2: block k of a planned chunk, its literals to lits and its
 * sequences to seqs (the chunk's areas); `lane` of `lanes` threads (a
 * thread block of two warps), all of which call it: lanes 0-3 the
 * literals' streams, lanes 32-34 the sequences' tables and lane 32 the
 * sequences, side by side (one lane on the host does all). Sets the
 * block's bad; zb_offsets, after it, its out_len and end_rep. */
ZS_FN void zb_decode(const zs_u8 *p, zb_block_t *b, zs_u8 *lits, zb_seq_t *seqs, zb_work_t *w, unsigned lane,
                     unsigned lanes)
{
    if (b->type != 2)
        return;
    zs_u8 *lo = lits + b->lit_at;
    const zs_u8 *ls = p + b->lit_src;
    if (lane == 0)
        w->fail = 0;
    ZS_SYNC();
    /* the tables: the Huffman tree (lane 0), the sequences' (lanes 32-34) */
    int huf = b->lit_type >= 2;
    if (huf && lane == 0) {
        unsigned used = 0;
        const zs_u8 *h = p + b->huf_at;
        zs_u64 avail = b->lit_type == 2 ? b->lit_bytes : (zs_u64)(p + b->src + b->size - h);
        if (zb_huf_table(h, avail, w->dt, &w->huf_bits, &used, w->hw) < 0 ||
            (b->lit_type == 2 && used >= b->lit_bytes))
            w->fail = 1;
    }
    unsigned seq_lane = 32 % lanes;
    for (unsigned t = 0; b->nseq && t < 3; t++)
        if (lane == (seq_lane + t) % lanes) {
            const zs_u8 *d = p + b->tab_at[t];
            zs_u64 avail = b->tab_mode[t] == ZS_MODE_PREDEFINED ? 0 : (zs_u64)(p + b->src + b->size - d);
            if (zb_seq_table(zb_seq_built(w, (int)t), &w->al[t], (int)t, b->tab_mode[t], d, avail) < 0)
                w->fail = 1;
            else
                zb_seq_cells(w, (int)t);
        }
    ZS_SYNC();
    /* the literals (lanes 0-3) beside the sequences (lane 32) */
    if (!w->fail && !huf)
        for (zs_u32 i = lane; lane < 32 && i < b->lit_len; i += lanes < 32 ? lanes : 32)
            lo[i] = b->lit_type == 0 ? ls[i] : ls[0];
    else if (!w->fail && b->streams == 1) {
        if (lane == 0) {
            unsigned hb = ls[0];
            zs_u32 skip = b->lit_type == 3 ? 0 : hb >= 128 ? 1 + (hb - 127 + 1) / 2 : 1 + hb;
            if (zb_huf_stream(ls + skip, b->lit_bytes - skip, w->dt, w->huf_bits, lo, b->lit_len) < 0)
                w->fail = 1;
        }
    }
    else if (!w->fail) {
        unsigned hb = ls[0];
        zs_u32 skip = b->lit_type == 3 ? 0 : hb >= 128 ? 1 + (hb - 127 + 1) / 2 : 1 + hb;
        const zs_u8 *st = ls + skip;
        zs_u32 sbytes = b->lit_bytes - skip, s1 = 0, s2 = 0, s3 = 0, s4 = 0, seg = (b->lit_len + 3) / 4;
        int ok = sbytes > 6;
        if (ok) {
            s1 = zb_le(st, 2);
            s2 = zb_le(st + 2, 2);
            s3 = zb_le(st + 4, 2);
            ok = (zs_u64)s1 + s2 + s3 + 6 < sbytes && 3 * seg <= b->lit_len;
            s4 = sbytes - 6 - s1 - s2 - s3;
        }
        for (unsigned k = lane; k < 4; k += lanes) {
            zs_u32 at = 6 + (k > 0 ? s1 : 0) + (k > 1 ? s2 : 0) + (k > 2 ? s3 : 0);
            zs_u32 len = k == 0 ? s1 : k == 1 ? s2 : k == 2 ? s3 : s4;
            zs_u32 cnt = k < 3 ? seg : b->lit_len - 3 * seg;
            if (!ok || zb_huf_stream(st + at, len, w->dt, w->huf_bits, lo + k * seg, cnt) < 0)
                w->fail = 1;
        }
    }
    if (lane == seq_lane)
        zb_sequences(p, b, seqs, w);
    ZS_SYNC();
    if (lane == 0 && w->fail)
        b->bad = 1;
    ZS_SYNC(); /* every thread passes the same barriers, block after block */
}

/* ---- link ---- */

/* Step 3: the blocks' places and starting repeat offsets; 0 when the
 * blocks decoded and fill the chunk exactly, else -1 (ch->ok cleared). */
ZS_FN int zb_link(zb_block_t *blk, zb_chunk_t *ch, zs_u64 expect)
{
    zs_u32 rep[3] = {1, 4, 8};
    zs_u64 at = 0;
    for (zs_u32 k = 0; k < ch->nblocks; k++) {
        zb_block_t *b = &blk[k];
        if (b->bad)
            break;
        b->out_at = (zs_u32)at;
        at += b->out_len;
        zs_u32 next[3];
        for (int i = 0; i < 3; i++) {
            b->in_rep[i] = rep[i];
            next[i] = zb_subst(b->end_rep[i], rep);
        }
        for (int i = 0; i < 3; i++)
            rep[i] = next[i];
        if (k + 1 == ch->nblocks && at == expect)
            return 0;
    }
    if (ch->nblocks == 0 && expect == 0)
        return 0;
    ch->ok = 0;
    return -1;
}

/* ---- execute and resolve ---- */

/* Across a warp's lanes (the kernels launch warps of 32; the host runs one
 * lane, or a test 32 simulated ones): the sum over the lanes below, with the
 * total; any; max; the lanes where v is set (a bit each); v of lane `from`;
 * v of the lane `by` below (its own below lane `by`); the highest bit set. */
#ifdef __CUDACC_RTC__
ZS_FN zs_u32 zb_scan(zs_u32 v, zs_u32 *total, unsigned lane)
{
    zs_u32 x = v;
    for (unsigned o = 1; o < 32; o <<= 1) {
        zs_u32 y = __shfl_up_sync(0xFFFFFFFFu, x, o);
        if (lane >= o)
            x += y;
    }
    *total = __shfl_sync(0xFFFFFFFFu, x, 31);
    return x - v;
}
ZS_FN int zb_any(int v) { return __any_sync(0xFFFFFFFFu, v); }
ZS_FN zs_u32 zb_max(zs_u32 v)
{
#if __CUDA_ARCH__ >= 800
    return __reduce_max_sync(0xFFFFFFFFu, v);
#else
    for (unsigned o = 16; o > 0; o >>= 1) {
        zs_u32 y = __shfl_xor_sync(0xFFFFFFFFu, v, o);
        v = y > v ? y : v;
    }
    return v;
#endif
}
ZS_FN zs_u32 zb_ballot(int v) { return __ballot_sync(0xFFFFFFFFu, v); }
ZS_FN zs_u32 zb_from(zs_u32 v, unsigned from) { return __shfl_sync(0xFFFFFFFFu, v, from); }
ZS_FN zs_u32 zb_up(zs_u32 v, unsigned by) { return __shfl_up_sync(0xFFFFFFFFu, v, by); }
ZS_FN unsigned zb_top(zs_u32 v) { return 31u - (unsigned)__clz(v); }
#elif defined(ZB_SIMULATED_LANES) /* each call names its line: lanes at different calls diverge */
zs_u32 zb_sim_scan(zs_u32 v, zs_u32 *total, unsigned lane, int line);
int zb_sim_any(int v, int line);
zs_u32 zb_sim_max(zs_u32 v, int line);
zs_u32 zb_sim_ballot(int v, int line);
zs_u32 zb_sim_from(zs_u32 v, unsigned from, int line);
zs_u32 zb_sim_up(zs_u32 v, unsigned by, int line);
#define zb_scan(v, total, lane) zb_sim_scan(v, total, lane, __LINE__)
#define zb_any(v) zb_sim_any(v, __LINE__)
#define zb_max(v) zb_sim_max(v, __LINE__)
#define zb_ballot(v) zb_sim_ballot(v, __LINE__)
#define zb_from(v, from) zb_sim_from(v, from, __LINE__)
#define zb_up(v, by) zb_sim_up(v, by, __LINE__)
ZS_FN unsigned zb_top(zs_u32 v) { return zs_hibit(v); }
#else
ZS_FN zs_u32 zb_scan(zs_u32 v, zs_u32 *total, unsigned lane)
{
    (void)lane;
    *total = v;
    return 0;
}
ZS_FN int zb_any(int v) { return v; }
ZS_FN zs_u32 zb_max(zs_u32 v) { return v; }
ZS_FN zs_u32 zb_ballot(int v) { return v ? 1u : 0u; }
ZS_FN zs_u32 zb_from(zs_u32 v, unsigned from)
{
    (void)from;
    return v;
}
ZS_FN zs_u32 zb_up(zs_u32 v, unsigned by)
{
    (void)by;
    return v;
}
ZS_FN unsigned zb_top(zs_u32 v) { return zs_hibit(v); }
#endif

/* The lowest bit set in v (not 0): the lowest lane of a ballot. */
ZS_FN unsigned zb_lowest(zs_u32 v) { return zb_top(v & (0u - v)); }

/* Step 2's offsets (a warp, after zb_sequences; the host: one lane): each
 * sequence's Offset_Value turned into its offset in terms of the block's
 * starting repeat offsets (ZB_SYM). What a sequence does to the repeat
 * offsets (zb_seq_rep) composes with what the ones before it did, so a
 * scan over 32 sequences at a time gives each the repeat offsets before
 * it. Sets the block's out_len and end_rep; bad where an offset is not
 * valid or the lengths overrun the literals or the block. */
ZS_FN void zb_offsets(zb_block_t *b, zb_seq_t *seqs, unsigned lane, unsigned lanes)
{
    if (b->type != 2 || b->bad)
        return;
    const zs_u32 same[3] = {ZB_SYM, ZB_SYM | 1u << 29, ZB_SYM | 2u << 29};
    zs_u32 c[3] = {same[0], same[1], same[2]}; /* the repeat offsets before the 32 */
    zs_u64 lits = 0, out = b->lit_len;
    int bad = 0;
    zb_seq_t *q = seqs + b->seq_at;
    for (zs_u32 g = 0; g < b->nseq; g += lanes) {
        zs_u32 i = g + lane, x[3] = {same[0], same[1], same[2]}, off = same[0], ll = 0, ml = 0;
        if (i < b->nseq) {
            ll = q[i].ll;
            ml = q[i].ml;
            zb_seq_rep(q[i].off, ll, x, &off);
        }
        for (unsigned by = 1; by < lanes; by <<= 1) { /* x: this lane's update after those below it */
            zs_u32 y[3] = {zb_up(x[0], by), zb_up(x[1], by), zb_up(x[2], by)};
            if (lane >= by)
                for (int k = 0; k < 3; k++)
                    x[k] = zb_subst(x[k], y);
        }
        zs_u32 e[3] = {zb_up(x[0], 1), zb_up(x[1], 1), zb_up(x[2], 1)}, before[3], after[3];
        for (int k = 0; k < 3; k++) { /* both from the offsets before the 32 */
            before[k] = zb_subst(lane ? e[k] : same[k], c);
            after[k] = zb_subst(zb_from(x[k], lanes - 1), c);
        }
        if (i < b->nseq) {
            off = zb_subst(off, before);
            bad |= off == 0;
            q[i].off = off;
        }
        for (int k = 0; k < 3; k++)
            c[k] = after[k];
        zs_u32 tl, tm;
        (void)zb_scan(ll, &tl, lane);
        (void)zb_scan(ml, &tm, lane);
        lits += tl;
        out += tm;
    }
    bad = zb_any(bad);
    if (lane == 0) {
        if (bad || lits > b->lit_len || out > ZS_BLOCK_MAX)
            b->bad = 1;
        b->out_len = (zs_u32)out;
        for (int k = 0; k < 3; k++)
            b->end_rep[k] = c[k];
    }
    ZB_WARP_SYNC();
}

/* n bytes from src to dst, forward, in steps of at most `step` (<= 8)
 * bytes held in registers: a step reads only bytes written before it. */
ZS_FN void zb_copy(zs_u8 *dst, const zs_u8 *src, zs_u32 n, zs_u32 step)
{
    for (zs_u32 j = 0; j < n; j += step) {
        zs_u8 t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        zs_u32 m = n - j < step ? n - j : step;
        for (zs_u32 k = 0; k < 8; k++)
            if (k < m)
                t[k] = src[j + k];
        for (zs_u32 k = 0; k < 8; k++)
            if (k < m)
                dst[j + k] = t[k];
    }
}

/* Byte s as a copy reads it (the block starts at `start`): its value into
 * *t where this block decoded it, and what it refers to (1 + a place
 * before the block; 0: nothing), from refs where it may hold a reference
 * (held) or itself where it lies before the block. */
ZS_FN zs_u32 zb_source(const zs_u8 *out, const zs_u32 *refs, zs_u32 start, zs_u32 s, int held, zs_u8 *t)
{
    if (s < start)
        return s + 1;
    *t = out[s];
    return held ? refs[s] : 0;
}

/* Byte `at` written as a copy of byte s (zb_source's t and r): whether it
 * holds a reference. */
ZS_FN int zb_put(zs_u8 *out, zs_u32 *refs, zs_u32 start, zs_u32 s, zs_u32 at, zs_u8 t, zs_u32 r)
{
    if (s >= start)
        out[at] = t;
    if (r)
        refs[at] = r;
    return r != 0;
}

/* One match of ml bytes at dm from src (chunk places): the bytes from the
 * block itself, references for those before it (and for bytes copied from
 * ones that hold a reference: below hi). Returns the end of what it wrote
 * that holds references, 0 if none. */
ZS_FN zs_u32 zb_match(zs_u8 *out, zs_u32 *refs, zs_u32 start, zs_u32 hi, zs_u32 src, zs_u32 dm, zs_u32 ml, zs_u32 off)
{
    if (src >= start && src >= hi) { /* nothing to refer to: a plain copy */
        zb_copy(out + dm, out + src, ml, off < 8 ? off : 8);
        return 0;
    }
    /* in steps of at most min(off, 8) bytes, loaded together: a step reads
     * only what the steps before it wrote */
    zs_u32 reach = 0, step = off < 8 ? off : 8;
    for (zs_u32 j = 0; j < ml; j += step) {
        zs_u8 t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        zs_u32 r[8] = {0, 0, 0, 0, 0, 0, 0, 0}, m = ml - j < step ? ml - j : step;
        for (zs_u32 k = 0; k < 8; k++) {
            zs_u32 s = src + j + k;
            if (k >= m)
                break;
            r[k] = zb_source(out, refs, start, s, s < hi || (reach && s >= dm), &t[k]);
        }
        for (zs_u32 k = 0; k < 8; k++) {
            if (k >= m)
                break;
            if (zb_put(out, refs, start, src + j + k, dm + j + k, t[k], r[k]))
                reach = dm + ml;
        }
    }
    return reach;
}

/* Runs (a sequence's literals, or its match) of at least ZB_WARP_RUN bytes
 * are copied by the whole warp, lanes on consecutive bytes: a long run
 * copied by its own lane a few bytes a step holds up the other 31 (sparse
 * data: matches of hundreds of bytes), and the warp's loads and stores each
 * touch one or two 32-byte sectors instead of 32. Shorter runs are copied
 * by their own lanes, side by side. */
#ifndef ZB_WARP_RUN
#define ZB_WARP_RUN 32u
#endif

/* n bytes from src to dst (which do not overlap) by the warp. */
ZS_FN void zb_run_warp(zs_u8 *dst, const zs_u8 *src, zs_u32 n, unsigned lane, unsigned lanes)
{
    for (zs_u32 j = lane; j < n; j += 4 * lanes) { /* four loads in flight, then their stores */
        zs_u8 t[4];
        for (unsigned k = 0; k < 4; k++)
            t[k] = j + k * lanes < n ? src[j + k * lanes] : 0;
        for (unsigned k = 0; k < 4; k++)
            if (j + k * lanes < n)
                dst[j + k * lanes] = t[k];
    }
}

/* One match by the warp, by zb_match's rules: byte j repeats byte
 * src + j % off, which lies before dm, so no byte is read that the match
 * itself writes. Returns, on every lane, the end of what it wrote that
 * holds references, 0 if none. */
ZS_FN zs_u32 zb_match_warp(zs_u8 *out, zs_u32 *refs, zs_u32 start, zs_u32 hi, zs_u32 src, zs_u32 dm, zs_u32 ml,
                           zs_u32 off, unsigned lane, unsigned lanes)
{
    int any = 0;
    zs_u32 m = lane % off, step = lanes % off; /* m: j % off */
    for (zs_u32 j = lane; j < ml; j += 4 * lanes) {
        zs_u32 from[4], r[4];
        zs_u8 t[4];
        for (unsigned k = 0; k < 4; k++) {
            from[k] = src + m;
            t[k] = 0;
            r[k] = j + k * lanes < ml ? zb_source(out, refs, start, from[k], from[k] < hi, &t[k]) : 0;
            m += step;
            if (m >= off)
                m -= off;
        }
        for (unsigned k = 0; k < 4; k++) {
            if (j + k * lanes >= ml)
                break;
            any |= zb_put(out, refs, start, from[k], dm + j + k * lanes, t[k], r[k]);
        }
    }
    return zb_any(any) ? dm + ml : 0;
}

/* Step 4: block b's bytes to out (the chunk's decoded bytes), refs[] set
 * for a compressed block's bytes: 0 for a byte known, else 1 + the place
 * of the byte before the block's start that it repeats. A warp takes 32
 * sequences at a time: each lane its literals, then the matches in rounds,
 * a match going once the bytes it reads are all written (the first
 * pending one always can). */
ZS_FN void zb_execute(const zs_u8 *p, zb_block_t *b, const zs_u8 *lits, const zb_seq_t *seqs, zs_u8 *out,
                      zs_u32 *refs, unsigned lane, unsigned lanes)
{
    zs_u32 start = b->out_at;
    if (b->type != 2) {
        for (zs_u32 i = lane; i < b->out_len; i += lanes)
            out[start + i] = p[b->src + (b->type == 0 ? i : 0)];
        return;
    }
    for (zs_u32 i = lane; i < b->out_len; i += lanes)
        refs[start + i] = 0;
    ZB_WARP_SYNC();
    const zs_u8 *lo = lits + b->lit_at;
    const zb_seq_t *q = seqs + b->seq_at;
    zs_u32 d = start, lp = 0, hi = start; /* no byte at or past hi holds a reference */
    int bad = 0;
    zb_seq_t next = {0, 0, 1};
    if (lane < b->nseq)
        next = q[lane];
    for (zs_u32 g = 0; g < b->nseq; g += lanes) {
        zs_u32 i = g + lane, ll = 0, ml = 0, off = 1, tl, to;
        zb_seq_t e = next;
        if (i + lanes < b->nseq) /* the next 32's load in flight during these */
            next = q[i + lanes];
        if (i < b->nseq) {
            ll = e.ll;
            ml = e.ml;
            off = zb_subst(e.off, b->in_rep);
        }
        zs_u32 lit = lp + zb_scan(ll, &tl, lane), dl = d + zb_scan(ll + ml, &to, lane), dm = dl + ll;
        if (ll < ZB_WARP_RUN)
            zb_copy(out + dl, lo + lit, ll, 8);
        for (zs_u32 runs = zb_ballot(ll >= ZB_WARP_RUN); runs; runs &= runs - 1) { /* the long ones, in turn */
            unsigned k = zb_lowest(runs);
            zs_u32 at = zb_from(dl, k);
            zs_u32 from = zb_from(lit, k);
            zs_u32 n = zb_from(ll, k);
            zb_run_warp(out + at, lo + from, n, lane, lanes);
        }
        if (zb_any(ml && (off == 0 || off > dm))) { /* before the frame's first byte */
            bad = 1;
            break;
        }
        /* a match goes once no match still pending writes what it reads:
         * its reads start at or past the end of the last one pending in
         * the lanes below (their bytes come in order), or end before the
         * first one pending (the lowest pending always goes) */
        zs_u32 src = dm - off, reads_end = off >= ml ? src + ml : dm, end = dm + ml;
        int pending = ml > 0;
        for (;;) {
            ZB_WARP_SYNC();
            zs_u32 waiting = zb_ballot(pending);
            if (!waiting)
                break;
            zs_u32 below = waiting & ((1u << lane) - 1u);
            zs_u32 low = zb_from(dm, zb_lowest(waiting));
            zs_u32 last_end = zb_from(end, below ? zb_top(below) : lane);
            zs_u32 reach = 0;
            int go = pending && (!below || src >= last_end || reads_end <= low);
            if (go && ml < ZB_WARP_RUN)
                reach = zb_match(out, refs, start, hi, src, dm, ml, off);
            for (zs_u32 runs = zb_ballot(go && ml >= ZB_WARP_RUN); runs; runs &= runs - 1) { /* the long ones */
                unsigned k = zb_lowest(runs);
                zs_u32 m_src = zb_from(src, k);
                zs_u32 m_dm = zb_from(dm, k);
                zs_u32 m_ml = zb_from(ml, k);
                zs_u32 m_off = zb_from(off, k);
                zs_u32 m_reach = zb_match_warp(out, refs, start, hi, m_src, m_dm, m_ml, m_off, lane, lanes);
                reach = m_reach > reach ? m_reach : reach;
            }
            pending &= !go;
            hi = zb_max(reach > hi ? reach : hi);
        }
        d += to;
        lp += tl;
    }
    ZB_WARP_SYNC();
    if (!bad)
        for (zs_u32 j = lane; j < b->lit_len - lp; j += lanes)
            out[d + j] = lo[lp + j];
    if (lane == 0) {
        if (bad)
            b->bad = 1;
        b->ref_end = hi;
    }
    ZB_WARP_SYNC();
}

/* Step 5, for one block (in order, after the blocks before it): the bytes
 * that name earlier ones filled. */
ZS_FN void zb_resolve(const zb_block_t *b, zs_u8 *out, const zs_u32 *refs, unsigned lane, unsigned lanes)
{
    if (b->type != 2)
        return;
    /* four places a lane at a time, their loads together */
    for (zs_u32 i = b->out_at + lane; i < b->ref_end; i += 4 * lanes) {
        zs_u32 r[4];
        for (unsigned k = 0; k < 4; k++)
            r[k] = i + k * lanes < b->ref_end ? refs[i + k * lanes] : 0;
        zs_u8 v[4];
        for (unsigned k = 0; k < 4; k++)
            v[k] = r[k] ? out[r[k] - 1] : 0;
        for (unsigned k = 0; k < 4; k++)
            if (r[k])
                out[i + k * lanes] = v[k];
    }
}

#endif
