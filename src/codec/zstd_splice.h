/*
 * One zstd frame out of frames compressed one piece at a time.
 *
 * nvCOMP compresses small inputs quickly and large ones slowly, while the
 * zstd filter of HDF5's plugins (hdf5plugin's zstd_h5plugin.c) reads one
 * frame per chunk, sized by its content size. So a chunk is compressed in
 * pieces, each its own frame, and the pieces' blocks are laid end to end
 * in one frame.
 *
 * A block decodes the same inside the longer frame, except where one of its
 * sequences uses a repeat offset whose value came from the starting history
 * {1, 4, 8}: there the longer frame's history differs, and such a sequence
 * is given another offset value (a repeat offset where the longer frame's
 * history is known to hold the offset, else the offset itself). The
 * decoder reads a block's sequences from the end of its bitstream back, so
 * a block is patched, not coded again: its bitstream kept up to the bits of
 * its last changed sequence, that one and those before it coded again from
 * the decoder's state there, the literals and tables kept byte for byte.
 * Decoding stops where the two histories agree (the rest of the piece means
 * the same in both frames).
 * Where the tables in force cannot code a new offset value, the block is
 * coded again whole with an offsets table made for its codes, and so are
 * the piece's later blocks. A block that would grow past its decoded size
 * is stored raw; a piece that cannot be parsed is stored as raw blocks
 * (right, only larger).
 *
 * Plain C that CUDA C++ (NVRTC) compiles too: the codec's kernel runs it one
 * piece per thread block, the unit tests on the host against libzstd.
 * Written from the format's specification (RFC 8878).
 */
#ifndef H5GDS_ZSTD_SPLICE_H
#define H5GDS_ZSTD_SPLICE_H

#ifdef __CUDACC_RTC__
#define ZS_FN __device__ static inline
#define ZS_DATA __constant__ static const
#define ZS_SYNC() __syncthreads()
#else
#define ZS_FN static inline
#define ZS_DATA static const
#define ZS_SYNC() ((void)0)
#endif

typedef unsigned char zs_u8;
typedef unsigned short zs_u16;
typedef unsigned int zs_u32;
typedef unsigned long long zs_u64;

#define ZS_MAGIC 0xFD2FB528u
#define ZS_FRAME_HEADER 13u        /* magic, descriptor (single segment, 8-byte content size), size */
#define ZS_BLOCK_MAX 131072u       /* a block's decoded bytes at most */
#define ZS_MAX_AL 9u               /* FSE accuracy of sequence tables at most */
#define ZS_SEG 128u                /* sequences between two checkpoints of the decoder */
#ifndef ZS_MAX_CHECKPOINTS        /* enough for a block's most sequences (131072 / 3); a user whose */
#define ZS_MAX_CHECKPOINTS 342u    /* pieces are smaller may set fewer (less shared memory) */
#endif
#define ZS_MAX_COPIES 32u          /* byte copies a piece defers (zs_copy) */

enum { ZS_LL = 0, ZS_OF = 1, ZS_ML = 2 };
enum { ZS_MODE_PREDEFINED = 0, ZS_MODE_RLE = 1, ZS_MODE_FSE = 2, ZS_MODE_REPEAT = 3 };

/* Code tables of the format (RFC 8878 3.1.1.3.2.1): baselines and extra
 * bits of literal length codes 16-35 and match length codes 32-52 (lower
 * codes carry no extra bits), and the predefined distributions. */
ZS_DATA zs_u32 zs_ll_base[20] = {16,  18,  20,   22,   24,   28,   32,   40,    48,    64,
                                  128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
ZS_DATA zs_u8 zs_ll_bits[20] = {1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
ZS_DATA zs_u32 zs_ml_base[21] = {35,  37,  39,   41,   43,   47,   51,    59,    67,    83,   99,
                                  131, 259, 515, 1027, 2051, 4099, 8195, 16387, 32771, 65539};
ZS_DATA zs_u8 zs_ml_bits[21] = {1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
ZS_DATA short zs_ll_default[36] = {4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2,
                                    2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1};
ZS_DATA short zs_ml_default[53] = {1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1,  1,  1,  1,  1,  1,  1,  1,  1,  1, 1,
                                    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1};
ZS_DATA short zs_of_default[29] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1,
                                    1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1};
ZS_DATA zs_u8 zs_max_sym[3] = {35, 31, 52}; /* LL, OF (what decoders accept), ML */
ZS_DATA zs_u8 zs_max_al[3] = {9, 8, 9};

/* A literal or match length code's extra bits, and the length they add
 * to (the tables above; lower codes have none); an offset code's are the
 * code itself, added to 1 << code. The decoders and the encoder read the
 * format's code tables through these two only. */
ZS_FN unsigned zs_code_bits(int type, unsigned code)
{
    if (type == ZS_LL)
        return code < 16 ? 0u : zs_ll_bits[code - 16];
    if (type == ZS_ML)
        return code < 32 ? 0u : zs_ml_bits[code - 32];
    return code;
}

ZS_FN zs_u32 zs_code_base(int type, unsigned code)
{
    if (type == ZS_LL)
        return code < 16 ? code : zs_ll_base[code - 16];
    if (type == ZS_ML)
        return code < 32 ? code + 3 : zs_ml_base[code - 32];
    return 1u << code;
}

/* One decoder state: the symbol, and the next state's bits and baseline. */
typedef struct zs_cell {
    zs_u8 sym, nb;
    zs_u16 base;
} zs_cell_t;

/* An FSE table of a sequence symbol type, for decoding and for coding
 * again: order[] lists the states by symbol, then by state (the encoder
 * looks a symbol's states up there). */
typedef struct zs_table {
    zs_cell_t cell[1u << ZS_MAX_AL];
    zs_u16 order[1u << ZS_MAX_AL];
    zs_u16 start[54]; /* symbol s: order[start[s] .. start[s + 1]) */
    const zs_u8 *desc; /* ZS_MODE_FSE: the description's bytes, to write it again */
    zs_u32 desc_len;
    zs_u8 al, mode, sym_end; /* accuracy log; ZS_MODE_*; symbols 0 .. sym_end - 1 described */
} zs_table_t;

/* Three repeat offsets, and which of them are unknown: bit r for rep[r]
 * (the piece's own stream: values from the starting history; the spliced
 * stream: values set before the piece). */
typedef struct zs_history {
    zs_u32 rep[3];
    zs_u32 unknown;
} zs_history_t;

/* What the decoder needs to start again at a sequence. */
typedef struct zs_checkpoint {
    zs_u32 bitpos;
    zs_history_t piece, spliced;
    zs_u16 state[3];
} zs_checkpoint_t;

/* A copy of bytes the parse defers, so that a thread block can share it. */
typedef struct zs_copy {
    zs_u8 *dst;
    const zs_u8 *src;
    zs_u64 n;
} zs_copy_t;

typedef struct zs_seq {
    zs_u32 llx, mlx, ofv; /* extra bits of the length codes; the offset value written again */
    zs_u8 llc, mlc;
} zs_seq_t;

/* A piece's working memory (30 KiB, the kernel's shared memory; fewer
 * checkpoints, for smaller pieces only, would take less). */
typedef struct zs_work {
    zs_table_t t[3];    /* the tables in force (Repeat_Mode reuses them) */
    zs_table_t of_new;  /* an offsets table for the codes a re-coded block writes */
    zs_u32 of_count[32]; /* how often the re-coded block writes each offset code */
    zs_checkpoint_t ck[ZS_MAX_CHECKPOINTS];
    zs_seq_t seg[ZS_SEG];
    zs_u8 have[3];      /* a table is in force */
    zs_copy_t copy[ZS_MAX_COPIES]; /* in order: a later one may overwrite an earlier one */
    zs_u32 ncopies;
    zs_u8 settled;        /* no repeat offset of the starting history is left: the rest of the piece
                             decodes the same in the spliced frame (first pieces: from the start) */
    zs_history_t piece;   /* the repeat offsets as the piece's own stream has them */
    zs_history_t spliced; /* and as the spliced frame has them at the same point */
} zs_work_t;

/* What happened to a piece (for tests and counters). */
enum {
    ZS_PIECE_COPIED = 0,
    ZS_PIECE_RECODED = 1, /* a block or more written again whole */
    ZS_PIECE_RAW = 2,
    ZS_PIECE_PATCHED = 3 /* only the first sequences of one block written again */
};

ZS_FN unsigned zs_hibit(zs_u64 v)
{
    unsigned r = 0;
    while (v >>= 1)
        r++;
    return r;
}

/* Runs the deferred copies in order, `lane` of `lanes` threads sharing
 * each (all of a thread block's threads call it in the kernel). */
ZS_FN void zs_run_copies(zs_work_t *w, unsigned lane, unsigned lanes)
{
    for (zs_u32 c = 0; c < w->ncopies; c++) {
        zs_u8 *dst = w->copy[c].dst;
        const zs_u8 *src = w->copy[c].src;
        for (zs_u64 k = lane; k < w->copy[c].n; k += lanes)
            dst[k] = src[k];
        ZS_SYNC();
    }
}

/* Copies n bytes later (zs_run_copies), or now when the list is full (by
 * this thread alone: not zs_run_copies, whose barriers want every thread). */
ZS_FN void zs_copy(zs_work_t *w, zs_u8 *dst, const zs_u8 *src, zs_u64 n)
{
    if (w->ncopies == ZS_MAX_COPIES) {
        for (zs_u32 c = 0; c < w->ncopies; c++)
            for (zs_u64 k = 0; k < w->copy[c].n; k++)
                w->copy[c].dst[k] = w->copy[c].src[k];
        w->ncopies = 0;
    }
    w->copy[w->ncopies].dst = dst;
    w->copy[w->ncopies].src = src;
    w->copy[w->ncopies].n = n;
    w->ncopies++;
}

ZS_FN zs_u32 zs_le24(const zs_u8 *p) { return (zs_u32)p[0] | ((zs_u32)p[1] << 8) | ((zs_u32)p[2] << 16); }

/* n (<= 32) bits of p[0 .. len) from bit `lo` up, little-endian; bits past the end read 0. */
ZS_FN zs_u32 zs_bits_at(const zs_u8 *p, zs_u64 len, zs_u64 lo, unsigned n)
{
    if (n == 0)
        return 0;
    zs_u64 byte = lo >> 3, v = 0;
    unsigned sh = (unsigned)(lo & 7), need = (sh + n + 7) >> 3;
    for (unsigned k = 0; k < need; k++)
        if (byte + k < len)
            v |= (zs_u64)p[byte + k] << (8 * k);
    return (zs_u32)((v >> sh) & ((n == 32) ? 0xFFFFFFFFull : ((1ull << n) - 1)));
}

/* ---- FSE tables ---- */

/* The decoder's cells of a normalized distribution (RFC 8878 4.1.1):
 * cell[1 << al]; -1 when the counts do not fill the table. */
ZS_FN int zs_cells_build(zs_cell_t *cell, const short *norm, unsigned sym_end, unsigned al)
{
    unsigned size = 1u << al, high = size - 1, mask = size - 1;
    zs_u16 next[53];
    if (al > ZS_MAX_AL || sym_end == 0 || sym_end > 53)
        return -1;
    for (unsigned s = 0; s < sym_end; s++) {
        if (norm[s] == -1) {
            cell[high].sym = (zs_u8)s;
            if (high == 0)
                return -1;
            high--;
            next[s] = 1;
        }
        else
            next[s] = (zs_u16)(norm[s] > 0 ? norm[s] : 0);
    }
    unsigned step = (size >> 1) + (size >> 3) + 3, pos = 0, placed = 0;
    for (unsigned s = 0; s < sym_end; s++)
        for (int i = 0; i < norm[s]; i++) {
            if (placed++ > high)
                return -1;
            cell[pos].sym = (zs_u8)s;
            do
                pos = (pos + step) & mask;
            while (pos > high);
        }
    if (pos != 0 || placed != high + 1)
        return -1;
    for (unsigned u = 0; u < size; u++) {
        unsigned n = next[cell[u].sym]++;
        unsigned nb = al - zs_hibit(n);
        cell[u].nb = (zs_u8)nb;
        cell[u].base = (zs_u16)((n << nb) - size);
    }
    return 0;
}

/* Builds t's decoder cells and the encoder's order from a normalized
 * distribution; -1 when the counts do not fill the table. */
ZS_FN int zs_table_build(zs_table_t *t, const short *norm, unsigned sym_end, unsigned al)
{
    if (zs_cells_build(t->cell, norm, sym_end, al) < 0)
        return -1;
    unsigned size = 1u << al;
    zs_u16 fill[54];
    for (unsigned s = 0; s <= sym_end; s++)
        fill[s] = 0;
    for (unsigned u = 0; u < size; u++)
        fill[t->cell[u].sym + 1]++;
    t->start[0] = 0;
    for (unsigned s = 0; s < 53; s++)
        t->start[s + 1] = (zs_u16)(t->start[s] + (s < sym_end ? fill[s + 1] : 0));
    for (unsigned s = 0; s < sym_end; s++)
        fill[s] = t->start[s];
    for (unsigned u = 0; u < size; u++)
        t->order[fill[t->cell[u].sym]++] = (zs_u16)u;
    t->al = (zs_u8)al;
    t->sym_end = (zs_u8)sym_end;
    return 0;
}

/* A table of one symbol (RLE_Mode): no state bits. */
ZS_FN void zs_table_rle(zs_table_t *t, unsigned sym)
{
    t->cell[0].sym = (zs_u8)sym;
    t->cell[0].nb = 0;
    t->cell[0].base = 0;
    for (unsigned s = 0; s < 54; s++)
        t->start[s] = (zs_u16)(s > sym ? 1 : 0);
    t->order[0] = 0;
    t->al = 0;
    t->sym_end = (zs_u8)(sym + 1);
}

/* Reads an FSE table description (RFC 8878 4.1.1) at p (len bytes left)
 * into norm[]; the bytes it takes, or -1 when it is malformed. */
ZS_FN int zs_read_counts(short *norm, unsigned *sym_end, unsigned *al, const zs_u8 *p, zs_u64 len,
                         unsigned max_al, unsigned max_sym)
{
    if (len < 1)
        return -1;
    unsigned a = (p[0] & 15u) + 5;
    if (a > max_al)
        return -1;
    zs_u64 bit = 4, end = len * 8;
    int remaining = (1 << a) + 1, threshold = 1 << a;
    unsigned nbits = a + 1, s = 0;
    int prev0 = 0;
    while (remaining > 1 && s <= max_sym) {
        if (prev0) {
            unsigned n0 = s;
            for (;;) {
                if (bit + 2 > end)
                    return -1;
                unsigned r = zs_bits_at(p, len, bit, 2);
                bit += 2;
                n0 += r;
                if (r != 3)
                    break;
            }
            if (n0 > max_sym)
                return -1;
            while (s < n0)
                norm[s++] = 0;
        }
        int maxv = 2 * threshold - 1 - remaining, count;
        zs_u32 v = zs_bits_at(p, len, bit, nbits);
        if ((int)(v & (zs_u32)(threshold - 1)) < maxv) {
            count = (int)(v & (zs_u32)(threshold - 1));
            bit += nbits - 1;
        }
        else {
            count = (int)(v & (zs_u32)(2 * threshold - 1));
            if (count >= threshold)
                count -= maxv;
            bit += nbits;
        }
        if (bit > end)
            return -1;
        count--;
        remaining -= count < 0 ? -count : count;
        norm[s++] = (short)count;
        prev0 = count == 0;
        if (remaining < 1)
            return -1;
        while (remaining < threshold) {
            nbits--;
            threshold >>= 1;
        }
    }
    if (remaining != 1)
        return -1;
    *sym_end = s;
    *al = a;
    return (int)((bit + 7) / 8);
}

/* A sequence symbol type's table description at p (RFC 8878
 * 3.1.1.3.2.1; mode not Repeat_Mode): *norm the distribution (read[],
 * room for 53, or the predefined one) of *sym_end symbols and accuracy
 * *al; RLE_Mode: *norm NULL and *sym_end its symbol. The bytes it takes,
 * or -1 when malformed. */
ZS_FN int zs_read_desc(int type, unsigned mode, const zs_u8 *p, zs_u64 len, short *read, const short **norm,
                       unsigned *sym_end, unsigned *al)
{
    if (mode == ZS_MODE_RLE) {
        if (len < 1 || p[0] > zs_max_sym[type])
            return -1;
        *norm = 0;
        *sym_end = p[0];
        *al = 0;
        return 1;
    }
    if (mode == ZS_MODE_PREDEFINED) {
        *norm = type == ZS_LL ? zs_ll_default : type == ZS_ML ? zs_ml_default : zs_of_default;
        *sym_end = type == ZS_LL ? 36 : type == ZS_ML ? 53 : 29;
        *al = type == ZS_OF ? 5 : 6;
        return 0;
    }
    *norm = read;
    return zs_read_counts(read, sym_end, al, p, len, zs_max_al[type], zs_max_sym[type]);
}

/* The sequences section's table of one symbol type: sets w->t[type]
 * unless Repeat_Mode; the bytes the description takes, or -1. */
ZS_FN int zs_read_table(zs_work_t *w, int type, unsigned mode, const zs_u8 *p, zs_u64 len)
{
    zs_table_t *t = &w->t[type];
    if (mode == ZS_MODE_REPEAT)
        return w->have[type] ? 0 : -1;
    w->have[type] = 0;
    short read[53];
    const short *norm;
    unsigned sym_end, al;
    int used = zs_read_desc(type, mode, p, len, read, &norm, &sym_end, &al);
    if (used < 0)
        return -1;
    if (!norm) {
        zs_table_rle(t, sym_end);
        t->mode = ZS_MODE_RLE;
        w->have[type] = 1;
        return 1;
    }
    if (zs_table_build(t, norm, sym_end, al) < 0)
        return -1;
    t->mode = (zs_u8)mode;
    t->desc = p;
    t->desc_len = (zs_u32)used;
    w->have[type] = 1;
    return used;
}

/* ---- bit streams ---- */

/* Backward reader of a sequences bitstream: `pos` bits left below the end mark. */
typedef struct zs_rbits {
    const zs_u8 *p;
    zs_u64 len, pos;
    int overrun;
} zs_rbits_t;

ZS_FN zs_u32 zs_read(zs_rbits_t *r, unsigned n)
{
    if (n > r->pos) {
        r->overrun = 1;
        r->pos = 0;
        return 0;
    }
    r->pos -= n;
    return zs_bits_at(r->p, r->len, r->pos, n);
}

/* Forward writer: bits pushed here come out last when read backward. */
typedef struct zs_wbits {
    zs_u8 *p;
    zs_u64 cap, len, acc;
    unsigned nacc;
} zs_wbits_t;

ZS_FN void zs_put(zs_wbits_t *w, zs_u32 v, unsigned n)
{
    if (n == 0)
        return;
    w->acc |= (zs_u64)(v & (n == 32 ? 0xFFFFFFFFu : ((1u << n) - 1))) << w->nacc;
    w->nacc += n;
    while (w->nacc >= 8) {
        if (w->len < w->cap)
            w->p[w->len] = (zs_u8)w->acc;
        w->len++;
        w->acc >>= 8;
        w->nacc -= 8;
    }
}

ZS_FN void zs_put_end(zs_wbits_t *w)
{
    zs_put(w, 1, 1);
    if (w->nacc) {
        if (w->len < w->cap)
            w->p[w->len] = (zs_u8)w->acc;
        w->len++;
        w->acc = 0;
        w->nacc = 0;
    }
}

/* ---- sequences ---- */

/* The offset an offset value stands for (RFC 8878 3.1.2.5), the history
 * updated; *used_unknown set when it came from an unknown repeat offset. */
ZS_FN zs_u32 zs_resolve(zs_history_t *h, zs_u64 ofv, zs_u32 ll, int *used_unknown)
{
    zs_u32 off, t = h->unknown & 7u, *rep = h->rep;
    if (ofv > 3) {
        off = (zs_u32)(ofv - 3);
        rep[2] = rep[1];
        rep[1] = rep[0];
        rep[0] = off;
        t = (t << 1) & 6u;
    }
    else {
        unsigned idx = (unsigned)ofv - 1 + (ll == 0);
        if (idx == 0) {
            off = rep[0];
            *used_unknown |= (int)(t & 1u);
        }
        else if (idx == 3) { /* rep[0] - 1, pushed in front */
            *used_unknown |= (int)(t & 1u);
            off = rep[0] - 1;
            rep[2] = rep[1];
            rep[1] = rep[0];
            rep[0] = off;
            t = ((t << 1) & 6u) | (t & 1u);
        }
        else {
            off = rep[idx];
            zs_u32 ti = (t >> idx) & 1u;
            *used_unknown |= (int)ti;
            if (idx == 2)
                rep[2] = rep[1];
            rep[1] = rep[0];
            rep[0] = off;
            zs_u32 keep = idx == 2 ? ((t & 2u) << 1) : (t & 4u); /* the slot not moved */
            t = keep | ((t & 1u) << 1) | ti;
        }
    }
    h->unknown = t;
    return off;
}

/* The offset value that writes `off` against history h: a repeat offset
 * where a known one matches, else the offset itself. */
ZS_FN zs_u64 zs_choose(const zs_history_t *h, zs_u32 off, zs_u32 ll)
{
    for (unsigned v = 1; v <= 3; v++) {
        unsigned idx = v - 1 + (ll == 0);
        zs_u32 known = idx == 3 ? !(h->unknown & 1u) : !((h->unknown >> idx) & 1u);
        zs_u32 val = idx == 3 ? h->rep[0] - 1 : h->rep[idx];
        if (known && val == off)
            return v;
    }
    return (zs_u64)off + 3;
}

/* The spliced frame's history known and the same as the piece's: from
 * here on the piece's offset values mean the same in the spliced frame
 * (the piece's own may still hold starting values: they are values too). */
ZS_FN int zs_same_history(const zs_history_t *piece, const zs_history_t *spliced)
{
    return spliced->unknown == 0 && piece->rep[0] == spliced->rep[0] && piece->rep[1] == spliced->rep[1] &&
           piece->rep[2] == spliced->rep[2];
}

/* The offset value the spliced frame (history h) writes for offset `off`,
 * which the piece wrote as ofv: the piece's own where it means the same
 * there (its bits can stay), else zs_choose's. */
ZS_FN zs_u64 zs_rewrite(const zs_history_t *h, zs_u64 ofv, zs_u32 off, zs_u32 ll)
{
    zs_history_t t = *h;
    int unknown = 0;
    return zs_resolve(&t, ofv, ll, &unknown) == off && !unknown ? ofv : zs_choose(h, off, ll);
}

/* Decodes one sequence at the reader's position with the tables in force
 * (state[] advanced unless it is the block's last): its codes and extra
 * bits in *q, its offset value, literal and match lengths. */
ZS_FN zs_u64 zs_decode_seq(const zs_work_t *w, zs_rbits_t *r, zs_u16 *state, int last, zs_seq_t *q, zs_u32 *ll_out,
                           zs_u32 *ml_out)
{
    const zs_cell_t *cll = &w->t[ZS_LL].cell[state[ZS_LL]];
    const zs_cell_t *cof = &w->t[ZS_OF].cell[state[ZS_OF]];
    const zs_cell_t *cml = &w->t[ZS_ML].cell[state[ZS_ML]];
    unsigned ofc = cof->sym, mlc = cml->sym, llc = cll->sym;
    zs_u64 ofv = ((zs_u64)1 << ofc) + zs_read(r, ofc);
    zs_u32 mlx = zs_read(r, zs_code_bits(ZS_ML, mlc));
    zs_u32 llx = zs_read(r, zs_code_bits(ZS_LL, llc));
    if (!last) {
        state[ZS_LL] = (zs_u16)(cll->base + zs_read(r, cll->nb));
        state[ZS_ML] = (zs_u16)(cml->base + zs_read(r, cml->nb));
        state[ZS_OF] = (zs_u16)(cof->base + zs_read(r, cof->nb));
    }
    q->llc = (zs_u8)llc;
    q->mlc = (zs_u8)mlc;
    q->llx = llx;
    q->mlx = mlx;
    *ml_out = zs_code_base(ZS_ML, mlc) + mlx;
    *ll_out = zs_code_base(ZS_LL, llc) + llx;
    return ofv;
}

/* The encoder's state before symbol x, given the decoder's state after it;
 * writes the bits that lead from one to the other. */
ZS_FN unsigned zs_encode_step(const zs_table_t *t, unsigned x, unsigned next, zs_wbits_t *bw)
{
    unsigned c = (unsigned)(t->start[x + 1] - t->start[x]), al = t->al, hb = zs_hibit(c);
    zs_u32 v = next + (1u << al);
    if (al == 0)
        return t->order[t->start[x]];
    /* x's states in order lead to c .. 2c - 1 shifted by nb bits: one bit
     * fewer for those from 2^(hb + 1) on */
    unsigned nb = al - hb;
    if (hb < al && (v >> (nb - 1)) >= (2u << hb) && (v >> (nb - 1)) < 2 * c)
        nb--;
    zs_put(bw, v, nb);
    return t->order[t->start[x] + (v >> nb) - c];
}

ZS_FN int zs_codable(const zs_table_t *t, unsigned x) { return x < t->sym_end && t->start[x + 1] > t->start[x]; }

/* A distribution of `al` bits for the counts c[0 .. n) (total `total`):
 * each symbol present gets at least one state. */
ZS_FN void zs_normalize(short *norm, const zs_u32 *c, unsigned n, zs_u64 total, unsigned al)
{
    int used = 0, size = 1 << al;
    for (unsigned s = 0; s < n; s++) {
        norm[s] = (short)(c[s] ? (int)(((zs_u64)c[s] << al) / total) : 0);
        if (c[s] && norm[s] < 1)
            norm[s] = 1;
        used += norm[s];
    }
    while (used != size) { /* the largest absorbs the rounding, one state at a time */
        unsigned big = 0;
        for (unsigned s = 1; s < n; s++)
            big = norm[s] > norm[big] ? s : big;
        if (used > size) {
            if (norm[big] <= 1)
                break; /* cannot happen: size >= n */
            norm[big]--;
            used--;
        }
        else {
            norm[big] = (short)(norm[big] + (size - used));
            used = size;
        }
    }
}

/* Writes the description of a distribution (no "less than 1" counts) as
 * zs_read_counts reads it; the bytes, or -1 when they do not fit. */
ZS_FN int zs_write_counts(const short *norm, unsigned n, unsigned al, zs_u8 *out, zs_u64 cap)
{
    zs_wbits_t bw = {out, cap, 0, 0, 0};
    zs_put(&bw, al - 5, 4);
    int remaining = (1 << al) + 1, threshold = 1 << al;
    unsigned nbits = al + 1, s = 0;
    while (remaining > 1 && s < n) {
        int v = norm[s] + 1, maxv = 2 * threshold - 1 - remaining;
        if (v < maxv)
            zs_put(&bw, (zs_u32)v, nbits - 1);
        else if (v < threshold)
            zs_put(&bw, (zs_u32)v, nbits);
        else
            zs_put(&bw, (zs_u32)(v + maxv), nbits);
        remaining -= norm[s];
        while (remaining < threshold) {
            nbits--;
            threshold >>= 1;
        }
        s++;
        if (norm[s - 1] == 0) { /* how many more zeros follow */
            unsigned run = 0;
            while (s + run < n && norm[s + run] == 0)
                run++;
            s += run;
            for (; run >= 3; run -= 3)
                zs_put(&bw, 3, 2);
            zs_put(&bw, run, 2);
        }
    }
    if (bw.nacc)
        zs_put(&bw, 0, 8 - bw.nacc);
    return bw.len <= bw.cap && remaining == 1 ? (int)bw.len : -1;
}

/* The description of table t as a re-coded block writes it: its mode, and bytes. */
ZS_FN int zs_put_table(const zs_table_t *t, zs_u8 *out, zs_u64 cap, zs_u64 *o)
{
    if (t->mode == ZS_MODE_RLE) {
        if (*o + 1 > cap)
            return -1;
        out[(*o)++] = t->cell[0].sym;
    }
    else if (t->mode == ZS_MODE_FSE) {
        if (*o + t->desc_len > cap)
            return -1;
        for (zs_u32 k = 0; k < t->desc_len; k++)
            out[*o + k] = t->desc[k];
        *o += t->desc_len;
    }
    return 0;
}

/* ---- blocks ---- */

/* A literals section's header (RFC 8878 3.1.1.3.1) at p (len bytes
 * left): its bytes *hdr, the regenerated size, and the bytes after it
 * (*body: the raw literals, 1 for RLE, else the compressed ones); -1 if it
 * runs past len. */
ZS_FN int zs_literals_header(const zs_u8 *p, zs_u64 len, zs_u32 *hdr, zs_u32 *regen, zs_u32 *body)
{
    if (len < 1)
        return -1;
    unsigned type = p[0] & 3u, sf = (p[0] >> 2) & 3u;
    if (type < 2) {
        *hdr = sf == 1 ? 2 : sf == 3 ? 3 : 1;
        if (len < *hdr)
            return -1;
        *regen = *hdr == 1 ? p[0] >> 3 : *hdr == 2 ? (p[0] >> 4) + ((zs_u32)p[1] << 4)
                                                   : (p[0] >> 4) + ((zs_u32)p[1] << 4) + ((zs_u32)p[2] << 12);
        *body = type == 0 ? *regen : 1;
    }
    else {
        *hdr = sf < 2 ? 3 : sf == 2 ? 4 : 5;
        if (len < *hdr)
            return -1;
        zs_u64 v = 0;
        for (unsigned k = 0; k < *hdr; k++)
            v |= (zs_u64)p[k] << (8 * k);
        unsigned bits = sf < 2 ? 10 : sf == 2 ? 14 : 18;
        *regen = (zs_u32)((v >> 4) & ((1u << bits) - 1));
        *body = (zs_u32)((v >> (4 + bits)) & ((1u << bits) - 1));
    }
    return (zs_u64)*hdr + *body <= len ? 0 : -1;
}

/* Bytes of a literals section and its regenerated size; -1 if malformed. */
ZS_FN zs_u64 zs_literals_size(const zs_u8 *p, zs_u64 len, zs_u32 *regen)
{
    zs_u32 hdr, body;
    return zs_literals_header(p, len, &hdr, regen, &body) < 0 ? (zs_u64)-1 : (zs_u64)hdr + body;
}

/* A sequences section's Number_of_Sequences (RFC 8878 3.1.1.3.2.1): the
 * bytes it takes, or -1 if they run past len. */
ZS_FN int zs_seq_count(const zs_u8 *seq, zs_u64 len, zs_u32 *nseq)
{
    if (len < 1)
        return -1;
    zs_u8 b0 = seq[0];
    if (b0 < 128) {
        *nseq = b0;
        return 1;
    }
    if (b0 < 255) {
        if (len < 2)
            return -1;
        *nseq = ((zs_u32)(b0 - 128) << 8) + seq[1];
        return 2;
    }
    if (len < 3)
        return -1;
    *nseq = seq[1] + ((zs_u32)seq[2] << 8) + 0x7F00u;
    return 3;
}

ZS_FN void zs_put_block_header(zs_u8 *p, int last, unsigned type, zs_u32 size)
{
    zs_u32 h = (size << 3) | (type << 1) | (last ? 1u : 0u);
    p[0] = (zs_u8)h;
    p[1] = (zs_u8)(h >> 8);
    p[2] = (zs_u8)(h >> 16);
}

/* Raw blocks of src[0 .. len) at out (cap bytes), the last one marked when
 * `last`; the bytes written, 0 when they do not fit. */
ZS_FN zs_u64 zs_raw_blocks(zs_work_t *w, const zs_u8 *src, zs_u64 len, int last, zs_u8 *out, zs_u64 cap)
{
    zs_u64 o = 0, done = 0;
    do {
        zs_u32 n = (zs_u32)(len - done < ZS_BLOCK_MAX ? len - done : ZS_BLOCK_MAX);
        if (o + 3 + n > cap)
            return 0;
        zs_put_block_header(out + o, last && done + n == len, 0, n);
        zs_copy(w, out + o + 3, src + done, n);
        o += 3 + n;
        done += n;
    } while (done < len);
    return o;
}

ZS_FN void zs_frame_header(zs_u8 *p, zs_u64 content)
{
    p[0] = 0x28; p[1] = 0xB5; p[2] = 0x2F; p[3] = 0xFD;
    p[4] = 0xE0; /* content size in 8 bytes, single segment, no checksum */
    for (unsigned k = 0; k < 8; k++)
        p[5 + k] = (zs_u8)(content >> (8 * k));
}

/* Writes sequences top - 1 .. 0 of a block (bits: its bitstream, bits_len
 * bytes; re-decoded from w->ck's checkpoints) with the offset values the
 * spliced frame gives them, tof their offsets table, onto bw; enc[]: the
 * decoder's states at sequence `top` (top < nseq), else set from the last
 * sequence. Then the initial states and the end mark. The decoder reads a
 * block's sequences from the end of the bitstream back, so the encoder
 * writes them last to first (RFC 8878 4.1). */
ZS_FN void zs_write_seqs(zs_work_t *w, const zs_u8 *bits, zs_u64 bits_len, zs_u64 nseq, zs_u64 top,
                         const zs_table_t *tof, zs_u16 *enc, zs_wbits_t *bw)
{
    for (zs_u64 g = (top + ZS_SEG - 1) / ZS_SEG; g-- > 0;) {
        const zs_checkpoint_t *ck = &w->ck[g];
        zs_rbits_t rr = {bits, bits_len, ck->bitpos, 0};
        zs_u16 st[3] = {ck->state[0], ck->state[1], ck->state[2]};
        zs_history_t hp = ck->piece, hs = ck->spliced;
        zs_u64 i0 = g * ZS_SEG, n = top - i0 < ZS_SEG ? top - i0 : ZS_SEG;
        for (zs_u64 k = 0; k < n; k++) {
            zs_u32 ll, ml;
            int ignored = 0;
            zs_u64 ofv = zs_decode_seq(w, &rr, st, i0 + k + 1 == nseq, &w->seg[k], &ll, &ml);
            zs_u32 off = zs_resolve(&hp, ofv, ll, &ignored);
            w->seg[k].ofv = (zs_u32)zs_rewrite(&hs, ofv, off, ll);
            zs_resolve(&hs, w->seg[k].ofv, ll, &ignored);
        }
        for (zs_u64 k = n; k-- > 0;) {
            const zs_seq_t *q = &w->seg[k];
            unsigned ofc = zs_hibit(q->ofv);
            if (i0 + k + 1 == nseq) {
                enc[ZS_LL] = w->t[ZS_LL].order[w->t[ZS_LL].start[q->llc]];
                enc[ZS_OF] = tof->order[tof->start[ofc]];
                enc[ZS_ML] = w->t[ZS_ML].order[w->t[ZS_ML].start[q->mlc]];
            }
            else { /* the decoder updates LL, ML, OF: written in reverse */
                enc[ZS_OF] = (zs_u16)zs_encode_step(tof, ofc, enc[ZS_OF], bw);
                enc[ZS_ML] = (zs_u16)zs_encode_step(&w->t[ZS_ML], q->mlc, enc[ZS_ML], bw);
                enc[ZS_LL] = (zs_u16)zs_encode_step(&w->t[ZS_LL], q->llc, enc[ZS_LL], bw);
            }
            /* the decoder reads OF, ML, LL extra bits: written in reverse */
            zs_put(bw, q->llx, zs_code_bits(ZS_LL, q->llc));
            zs_put(bw, q->mlx, zs_code_bits(ZS_ML, q->mlc));
            zs_put(bw, (zs_u32)(q->ofv - ((zs_u64)1 << ofc)), ofc);
        }
    }
    zs_put(bw, enc[ZS_ML], w->t[ZS_ML].al);
    zs_put(bw, enc[ZS_OF], tof->al);
    zs_put(bw, enc[ZS_LL], w->t[ZS_LL].al);
    zs_put_end(bw);
}

/* Writes a block again with only its first `top` sequences changed, the
 * tables in force kept: the bitstream's first `top_pos` bits, which code
 * sequences top .. nseq - 1, stay as they are, and the encoder goes on from
 * the decoder's states there (top_state). The block (body: literals, then
 * `head` bytes of sequences header and tables; all copied, with the kept
 * bits) goes to out + *o when it takes at most `limit` bytes. 0: done; 1:
 * it does not fit (nothing queued). */
ZS_FN int zs_patch_block(zs_work_t *w, const zs_u8 *body, zs_u64 head, zs_u64 bits_len, zs_u64 nseq, zs_u64 top,
                         zs_u64 top_pos, const zs_u16 *top_state, int last, zs_u64 limit, zs_u8 *out, zs_u64 cap,
                         zs_u64 *o)
{
    zs_u64 whole = top_pos >> 3, q = *o + 3 + head + whole;
    unsigned part = (unsigned)(top_pos & 7u);
    if (q > cap)
        return 1;
    zs_wbits_t bw = {out + q, cap - q, 0, (zs_u64)(body[head + whole] & ((1u << part) - 1u)), part};
    zs_u16 enc[3] = {top_state[0], top_state[1], top_state[2]};
    zs_write_seqs(w, body + head, bits_len, nseq, top, &w->t[ZS_OF], enc, &bw);
    zs_u64 size = head + whole + bw.len;
    if (bw.len > bw.cap || size > limit)
        return 1;
    zs_copy(w, out + *o + 3, body, head + whole);
    zs_put_block_header(out + *o, last, 2, (zs_u32)size);
    *o += 3 + size;
    return 0;
}

/* One compressed block's sequences section (seq, len bytes), after a
 * literals section of `lit_len` bytes at lit: decoded to check it and to
 * find the sequences whose offset values the spliced frame must write
 * otherwise (they use the starting history), and written again at out + *o
 * (block header included) when there are such sequences and recoding is
 * allowed (`may_recode`), or always when `recode`: as a patch (only up to
 * the last such sequence, *patched set) where the tables in force code
 * every new offset value, else whole (an offsets table made for them where
 * needed). Decoding stops once the two frames' histories agree: the rest
 * means the same in both. A block written again takes at most `limit`
 * bytes. Sets *decoded (the block's bytes once decoded), *recoded (whether
 * it was written). 0: done; 1: store it raw; 2: the piece settled
 * (w->settled: decoding stopped, *decoded not set), the block kept as it
 * is or patched; -1: malformed. */
ZS_FN int zs_block(zs_work_t *w, const zs_u8 *lit, zs_u64 lit_len, zs_u32 regen, const zs_u8 *seq, zs_u64 len,
                   int recode, int may_recode, int last, zs_u64 limit, zs_u8 *out, zs_u64 cap, zs_u64 *o,
                   zs_u64 *decoded, int *recoded, int *patched)
{
    *recoded = 0;
    *patched = 0;
    zs_u32 count;
    int head = zs_seq_count(seq, len, &count);
    if (head < 0)
        return -1;
    zs_u64 p = (zs_u64)head, nseq = count;
    if (nseq == 0) { /* literals only: nothing to re-code, no table or history changes */
        if (p != len)
            return -1;
        *decoded = regen;
        return 0;
    }
    if (p >= len)
        return -1;
    zs_u8 modes = seq[p++];
    if (modes & 3u)
        return -1;
    unsigned mode[3] = {(unsigned)(modes >> 6), (unsigned)((modes >> 4) & 3u), (unsigned)((modes >> 2) & 3u)};
    for (int type = 0; type < 3; type++) {
        int used = zs_read_table(w, type, mode[type], seq + p, len - p);
        if (used < 0)
            return -1;
        p += (zs_u64)used;
    }
    if (p >= len || seq[len - 1] == 0)
        return -1;
    zs_rbits_t r = {seq + p, len - p, 0, 0};
    r.pos = (r.len - 1) * 8 + zs_hibit(seq[len - 1]);
    zs_u16 state[3];
    state[ZS_LL] = (zs_u16)zs_read(&r, w->t[ZS_LL].al);
    state[ZS_OF] = (zs_u16)zs_read(&r, w->t[ZS_OF].al);
    state[ZS_ML] = (zs_u16)zs_read(&r, w->t[ZS_ML].al);
    /* pass 1: check the block, find the last sequence whose offset value
     * changes (top - 1), keep checkpoints and the decoder's place after it */
    zs_history_t piece = w->piece, spliced = w->spliced;
    zs_u64 lits = 0, matched = 0, top = 0, top_pos = 0;
    zs_u16 top_state[3] = {0, 0, 0};
    int of_codable = 1, patch_tried = 0;
    const zs_u64 kept = (zs_u64)ZS_SEG * ZS_MAX_CHECKPOINTS; /* the sequences the checkpoints let it code again */
    const zs_table_t *of_in_force = &w->t[ZS_OF];
    for (unsigned c = 0; c < 32; c++)
        w->of_count[c] = 0;
    for (zs_u64 i = 0; i < nseq; i++) {
        if (i % ZS_SEG == 0 && i / ZS_SEG < ZS_MAX_CHECKPOINTS) {
            zs_checkpoint_t *ck = &w->ck[i / ZS_SEG];
            ck->bitpos = (zs_u32)r.pos;
            ck->piece = piece;
            ck->spliced = spliced;
            for (int k = 0; k < 3; k++)
                ck->state[k] = state[k];
        }
        zs_seq_t q;
        zs_u32 ll, ml;
        int unknown = 0, ignored = 0;
        zs_u64 ofv = zs_decode_seq(w, &r, state, i + 1 == nseq, &q, &ll, &ml);
        zs_u32 off = zs_resolve(&piece, ofv, ll, &ignored);
        zs_u64 nv = zs_rewrite(&spliced, ofv, off, ll);
        zs_resolve(&spliced, nv, ll, &unknown);
        lits += ll;
        matched += ml;
        if (off == 0 || unknown)
            return -1;
        unsigned ofc = zs_hibit(nv);
        if (ofc > 31)
            return -1;
        of_codable &= zs_codable(of_in_force, ofc);
        w->of_count[ofc]++;
        if (nv != ofv) {
            top = i + 1;
            top_pos = r.pos;
            for (int k = 0; k < 3; k++)
                top_state[k] = state[k];
        }
        if (recode || !zs_same_history(&piece, &spliced))
            continue;
        /* every later sequence means the same in both frames as it is */
        if (top == 0) {
            w->settled = 1; /* kept as it is, and so are the piece's later blocks */
            return 2;
        }
        if (!may_recode || !of_codable || patch_tried || top >= nseq || top > kept)
            continue;
        patch_tried = 1; /* once: the histories stay the same, so would the outcome */
        if (zs_patch_block(w, lit, lit_len + p, len - p, nseq, top, top_pos, top_state, last, limit, out, cap, o) ==
            0) {
            w->settled = 1;
            *recoded = *patched = 1;
            return 2;
        }
    }
    if (r.overrun || r.pos != 0 || lits > regen || regen + matched > ZS_BLOCK_MAX)
        return -1;
    *decoded = regen + matched;
    if (!recode && (top == 0 || !may_recode)) {
        /* kept as it is: the spliced frame's history went on as simulated */
        w->piece = piece;
        w->spliced = top == 0 ? spliced : piece;
        return 0;
    }
    /* not worth it: the caller stores the block raw (which leaves the
     * spliced frame's history as it was), unless a later block's literals
     * may need this one's Huffman tree */
    int tree = (lit[0] & 3u) == 2;
    zs_u64 worth = tree || *decoded > limit ? limit : *decoded - 1;
    if (!recode && of_codable && top < nseq && top <= kept &&
        zs_patch_block(w, lit, lit_len + p, len - p, nseq, top, top_pos, top_state, last, worth, out, cap, o) == 0) {
        w->piece = piece;
        w->spliced = spliced;
        *recoded = *patched = 1;
        return 0;
    }
    /* pass 2: the whole block again, with an offsets table that codes every
     * new offset code: the one in force if it does, else one made for them */
    if (nseq > kept)
        return -1;
    const zs_table_t *tof = of_in_force;
    short of_norm[32];
    unsigned of_end = 0, of_distinct = 0, of_al = 0;
    if (!of_codable) {
        for (unsigned c = 0; c < 32; c++)
            if (w->of_count[c]) {
                of_end = c + 1;
                of_distinct++;
            }
        if (of_distinct == 1) {
            zs_table_rle(&w->of_new, of_end - 1);
            w->of_new.mode = ZS_MODE_RLE;
        }
        else {
            of_al = zs_hibit(nseq) - 1;
            of_al = of_al < 5 ? 5 : of_al > 8 ? 8 : of_al;
            zs_normalize(of_norm, w->of_count, of_end, nseq, of_al);
            if (zs_table_build(&w->of_new, of_norm, of_end, of_al) < 0)
                return -1;
            w->of_new.mode = ZS_MODE_FSE;
        }
        tof = &w->of_new;
    }
    unsigned of_mode = tof->mode;
    zs_u64 h = *o;
    if (h + 3 + lit_len + 4 > cap)
        return -1;
    zs_u64 q0 = h + 3; /* the literals go there once the block is kept (below) */
    zs_u64 q1 = q0 + lit_len;
    if (nseq < 128)
        out[q1++] = (zs_u8)nseq;
    else if (nseq < 0x7F00) {
        out[q1++] = (zs_u8)((nseq >> 8) + 128);
        out[q1++] = (zs_u8)nseq;
    }
    else {
        out[q1++] = 255;
        out[q1++] = (zs_u8)(nseq - 0x7F00);
        out[q1++] = (zs_u8)((nseq - 0x7F00) >> 8);
    }
    out[q1++] = (zs_u8)((w->t[ZS_LL].mode << 6) | (of_mode << 4) | (w->t[ZS_ML].mode << 2));
    if (zs_put_table(&w->t[ZS_LL], out, cap, &q1) < 0)
        return -1;
    if (tof == &w->of_new && of_mode == ZS_MODE_FSE) {
        int used = zs_write_counts(of_norm, of_end, of_al, out + q1, cap - q1);
        if (used < 0)
            return -1;
        q1 += (zs_u64)used;
    }
    else if (zs_put_table(tof, out, cap, &q1) < 0)
        return -1;
    if (zs_put_table(&w->t[ZS_ML], out, cap, &q1) < 0)
        return -1;
    if (q1 > cap)
        return -1;
    zs_wbits_t bw = {out + q1, cap - q1, 0, 0, 0};
    zs_u16 enc[3] = {0, 0, 0};
    zs_write_seqs(w, seq + p, len - p, nseq, nseq, tof, enc, &bw);
    if (bw.len > bw.cap)
        return -1;
    zs_u64 size = q1 + bw.len - q0;
    /* the decoder of the later blocks reads the piece's own stream: its
     * history and tables go on as before (the re-coded blocks after this
     * one write every table out) */
    w->piece = piece;
    if (size >= *decoded && !tree)
        return 1;
    if (size > limit)
        return -1;
    w->spliced = spliced;
    /* queued only now: a block stored raw instead may be shorter than its
     * literals, and a queued copy runs after the direct writes of the
     * blocks that follow */
    zs_copy(w, out + q0, lit, lit_len);
    zs_put_block_header(out + h, last, 2, (zs_u32)size);
    *o = q0 + size;
    *recoded = 1;
    return 0;
}

/* Splices one piece: `frame` (flen bytes), one zstd frame of src[0 .. slen),
 * into blocks at out (cap bytes), no block marked last unless `last`. The
 * first piece of a frame (`first`) keeps its blocks as they are; a later
 * one is re-coded from its first block that uses the starting history; a
 * frame that cannot be used gives raw blocks of src. The bytes the blocks
 * take (0: not even raw blocks fit), their byte copies left in w for
 * zs_run_copies. *what: ZS_PIECE_*. */
ZS_FN zs_u64 zs_splice_piece(zs_work_t *w, const zs_u8 *frame, zs_u64 flen, const zs_u8 *src, zs_u64 slen,
                             int first, int last, zs_u8 *out, zs_u64 cap, int *what)
{
    *what = ZS_PIECE_COPIED;
    w->ncopies = 0;
    w->settled = (zs_u8)(first != 0);
    w->have[0] = w->have[1] = w->have[2] = 0;
    w->piece.rep[0] = 1;
    w->piece.rep[1] = 4;
    w->piece.rep[2] = 8;
    w->piece.unknown = 7;
    w->spliced = w->piece;
    zs_u64 p = 0, o = 0, decoded = 0;
    int recoding = 0, unchecked = 0, ok = flen >= 6 && (frame[0] | frame[1] << 8 | frame[2] << 16 | (zs_u32)frame[3] << 24) == ZS_MAGIC;
    zs_u8 fhd = ok ? frame[4] : 0;
    unsigned fcs_flag = fhd >> 6, single = (fhd >> 5) & 1u, checksum = (fhd >> 2) & 1u, did = fhd & 3u;
    unsigned fcs_bytes = fcs_flag ? (1u << fcs_flag) : single;
    if (!ok || (fhd & 8u) || did) /* reserved bit, or a dictionary */
        goto raw;
    p = 5 + (single ? 0 : 1);
    if (p + fcs_bytes > flen)
        goto raw;
    if (fcs_bytes) { /* a content size that is not the piece's: not this piece's frame */
        zs_u64 fcs = 0;
        for (unsigned k = 0; k < fcs_bytes; k++)
            fcs |= (zs_u64)frame[p + k] << (8 * k);
        if ((fcs_bytes == 2 ? fcs + 256 : fcs) != slen)
            goto raw;
    }
    p += fcs_bytes;
    for (;;) {
        if (p + 3 > flen)
            goto raw;
        zs_u32 bh = zs_le24(frame + p);
        int is_last = bh & 1u;
        unsigned type = (bh >> 1) & 3u;
        zs_u32 size = bh >> 3;
        const zs_u8 *body = frame + p + 3;
        zs_u64 stored = type == 1 ? 1 : size;
        if (type == 3 || p + 3 + stored > flen)
            goto raw;
        int put_last = last && is_last, copy = 1;
        zs_u64 block_decoded = size;
        if (type == 2 && w->settled)
            unchecked = 1; /* nothing to change: not decoded */
        else if (type == 2) {
            zs_u32 regen = 0;
            zs_u64 lit = zs_literals_size(body, size, &regen);
            int recoded = 0, patched = 0;
            if (lit == (zs_u64)-1)
                goto raw;
            /* a block may not take more than the frame's window (at least this piece) */
            zs_u64 limit = slen < ZS_BLOCK_MAX ? slen : ZS_BLOCK_MAX;
            int rc = zs_block(w, body, lit, regen, body + lit, size - lit, recoding, !first, put_last, limit, out,
                              cap, &o, &block_decoded, &recoded, &patched);
            if (rc < 0)
                goto raw;
            unchecked |= rc == 2;
            if (rc == 1 || recoded) {
                /* after a block stored raw or written whole (its tables
                 * maybe not the piece's), the later ones are written whole */
                recoding |= rc == 1 || !patched;
                *what = patched && *what != ZS_PIECE_RECODED ? ZS_PIECE_PATCHED : ZS_PIECE_RECODED;
                copy = 0;
                if (rc == 1) { /* store it raw: its decoded bytes are src's */
                    if (decoded + block_decoded > slen || o + 3 + block_decoded > cap)
                        goto raw;
                    zs_put_block_header(out + o, put_last, 0, (zs_u32)block_decoded);
                    zs_copy(w, out + o + 3, src + decoded, block_decoded);
                    o += 3 + block_decoded;
                }
            }
        }
        if (copy) {
            if (o + 3 + stored > cap)
                goto raw;
            zs_put_block_header(out + o, put_last, type, size);
            zs_copy(w, out + o + 3, body, stored);
            o += 3 + stored;
        }
        decoded += block_decoded;
        p += 3 + stored;
        if (is_last)
            break;
    }
    if ((!unchecked && decoded != slen) || p + (checksum ? 4 : 0) > flen)
        goto raw;
    return o;
raw:
    *what = ZS_PIECE_RAW;
    w->ncopies = 0;
    return zs_raw_blocks(w, src, slen, last, out, cap);
}

#endif
