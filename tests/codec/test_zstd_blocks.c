/*
 * zstd frames decoded block by block (src/codec/zstd_blocks.h) on the host,
 * against libzstd: chunks of several kinds of data and sizes compressed by
 * libzstd at levels from -5 to 19, decoded in the kernels' five steps (one
 * lane) and compared byte for byte; the blocks that reuse tables (Treeless
 * literals, Repeat_Mode) and that copy bytes from blocks before them are
 * counted, so the paths are known to be taken. Then damaged frames: a byte
 * changed, a frame cut short, bytes added. Where this decoder accepts one,
 * libzstd must accept it too and decode the same bytes (what it refuses goes
 * to nvCOMP). The offsets' scan is also checked against the serial rule on
 * made-up sequences (offsets_made_up). Skipped (77) without libzstd.
 *
 * Built with ZB_SIMULATED_LANES (test_zstd_blocks_lanes), the offsets and
 * the execution run on a warp of 32 simulated lanes (zb_lanes.h), as in
 * the kernels, on fewer frames.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "codec_ref.h"
#include "zb_host.h"

enum { KIND_FIELD, KIND_IMAGE, KIND_SPARSE, KIND_RANDOM, KIND_DOUBLE, KIND_MIXED, KIND_RECORDS, KIND_CONSTANT, NKINDS };
static const char *const kind_names[NKINDS] = {"float field", "image u8", "sparse int32", "random",
                                               "double field", "mixed", "records", "constant"};

static void fill(uint8_t *p, size_t n, int kind, unsigned seed)
{
    static const data_kind_t ref_kind[] = {DATA_FLOAT_FIELD, DATA_IMAGE_U8, DATA_SPARSE_INT,
                                           DATA_RANDOM,      DATA_DOUBLE_FIELD, DATA_MIXED};
    if (kind < KIND_RECORDS) {
        make_data(ref_kind[kind], p, n, seed);
        return;
    }
    for (size_t i = 0; i < n; i++) { /* records of 24 bytes: many repeat offsets */
        size_t r = i / 24, f = i % 24;
        p[i] = kind == KIND_CONSTANT ? 0x5A
               : f < 8               ? (uint8_t)(r >> (8 * (f % 4)))
               : f < 16              ? (uint8_t)(0x40 + f)
                                     : (uint8_t)(rng() % 3);
    }
}

typedef struct counts {
    size_t blocks, treeless, repeat, raw, rle, refs, chunks;
    size_t warp_lits, warp_matches, warp_overlapping, warp_before; /* runs of ZB_WARP_RUN bytes or more */
} counts_t;

/* The runs block b's execution copies by the whole warp (zb_execute):
 * literals, matches, those overlapping themselves (offset below their
 * length) and those reading bytes before the block (references). */
static void count_warp_runs(const zb_block_t *b, const zb_seq_t *seqs, counts_t *c)
{
    if (b->type != 2)
        return;
    zs_u32 d = b->out_at;
    for (zs_u32 i = 0; i < b->nseq; i++) {
        const zb_seq_t *q = &seqs[b->seq_at + i];
        zs_u32 off = zb_subst(q->off, b->in_rep), dm = d + q->ll;
        c->warp_lits += q->ll >= ZB_WARP_RUN;
        if (q->ml >= ZB_WARP_RUN && off && off <= dm) {
            c->warp_matches++;
            c->warp_overlapping += off < q->ml;
            c->warp_before += dm - off < b->out_at;
        }
        d = dm + q->ml;
    }
}

/* What a decoded frame's blocks did, into a counts_t. */
static void count_blocks(const zb_chunk_t *ch, const zb_block_t *blk, const zb_seq_t *seqs, const uint32_t *refs,
                         void *arg)
{
    counts_t *c = arg;
    for (uint32_t k = 0; k < ch->nblocks; k++) {
        count_warp_runs(&blk[k], seqs, c);
        c->blocks++;
        c->treeless += blk[k].reused & 1u;
        c->repeat += (blk[k].reused & 14u) != 0;
        c->raw += blk[k].type == 0;
        c->rle += blk[k].type == 1;
        for (uint32_t i = blk[k].out_at; blk[k].type == 2 && i < blk[k].out_at + blk[k].out_len; i++)
            if (refs[i]) {
                c->refs++;
                break;
            }
    }
    c->chunks++;
}

/* zb_host_decode, counting the blocks' kinds into c where given. */
static int decode(const uint8_t *frame, size_t n, size_t expect, uint8_t *out, counts_t *c)
{
    return zb_host_decode(frame, n, expect, out, c ? count_blocks : NULL, c);
}

static void roundtrip(int kind, size_t len, int level, counts_t *total)
{
    uint8_t *src = malloc(len + 1), *out = malloc(len + 1);
    fill(src, len, kind, (unsigned)(len + level));
    bytes_t in = {src, len}, frame;
    if (!ref_zstd(&in, &frame, level)) {
        CHECK_MSG(0, "libzstd failed to compress %zu B", len);
        free(src);
        free(out);
        return;
    }
    memset(out, 0xC3, len + 1);
    counts_t c = {0};
    int r = decode(frame.p, frame.n, len, out, &c);
    CHECK_MSG(r == 0, "%s %zu B, level %d: frame of %zu B not taken", kind_names[kind], len, level, frame.n);
    CHECK_MSG(r != 0 || memcmp(out, src, len) == 0, "%s %zu B, level %d: decoded bytes differ", kind_names[kind], len,
          level);
    CHECK_MSG(out[len] == 0xC3, "%s %zu B, level %d: a byte written past the end", kind_names[kind], len, level);
    total->blocks += c.blocks;
    total->treeless += c.treeless;
    total->repeat += c.repeat;
    total->raw += c.raw;
    total->rle += c.rle;
    total->refs += c.refs;
    total->chunks += c.chunks;
    total->warp_lits += c.warp_lits;
    total->warp_matches += c.warp_matches;
    total->warp_overlapping += c.warp_overlapping;
    total->warp_before += c.warp_before;
    free(frame.p);
    free(src);
    free(out);
}

/* Damaged frames: whatever is taken must be what libzstd returns. */
static void damaged(int kind, size_t len, int level, int rounds, size_t *taken, size_t *refused)
{
    uint8_t *src = malloc(len + 1), *out = malloc(len + 1);
    fill(src, len, kind, 99);
    bytes_t in = {src, len}, frame;
    if (!ref_zstd(&in, &frame, level)) {
        free(src);
        free(out);
        return;
    }
    uint8_t *bad = malloc(frame.n + 16);
    for (int k = 0; k < rounds; k++) {
        size_t n = frame.n;
        memcpy(bad, frame.p, n);
        int how = k % 4;
        if (how == 0 || how == 1) { /* bytes changed (past the frame header) */
            int flips = how == 0 ? 1 : 1 + (int)(rng() % 8);
            for (int f = 0; f < flips; f++)
                bad[13 + rng() % (n - 13)] ^= (uint8_t)(1u << (rng() % 8));
        }
        else if (how == 2) /* cut short */
            n = 13 + rng() % (n - 13);
        else { /* bytes added */
            for (int a = 0; a < 4; a++)
                bad[n + a] = (uint8_t)rng();
            n += 1 + rng() % 4;
        }
        memset(out, 0, len + 1);
        if (decode(bad, n, len, out, NULL) == 0) {
            (*taken)++;
            bytes_t b = {bad, n}, back = {0};
            bool ok = ref_unzstd(&b, &back) && back.n == len && memcmp(back.p, out, len) == 0;
            CHECK_MSG(ok, "%s %zu B, level %d, damage %d (%d): taken here, but libzstd %s", kind_names[kind], len, level,
                  k, how, back.p ? "decodes other bytes" : "refuses it");
            free(back.p);
        }
        else
            (*refused)++;
    }
    free(bad);
    free(frame.p);
    free(src);
    free(out);
}

/* The offsets' scan (zb_offsets) against the serial rule it replaces (RFC
 * 8878 3.1.2.5, offsets in terms of the block's starting repeat offsets) on
 * made-up sequences: repeat offsets taken every way, "the first one minus
 * 1" many times in a row (down to 0: not valid), offset values too large,
 * literal lengths overrunning the block's literals, 0 to 100 sequences
 * (groups of 32 and the carry between them). libzstd's frames seldom hold
 * two "minus 1" in a row. */
static zs_u32 serial_minus1(zs_u32 v)
{
    if (v & ZB_SYM)
        return (v & ZB_SYM_D) == ZB_SYM_D ? 0 : v + 1;
    return v > 1 ? v - 1 : 0;
}

static void offsets_made_up(int blocks)
{
    static zb_seq_t seqs[100];
    zs_u32 want[100];
    size_t valid = 0;
    for (int k = 0; k < blocks; k++) {
        zs_u32 n = (zs_u32)(rng() % 101), rep[3] = {ZB_SYM, ZB_SYM | 1u << 29, ZB_SYM | 2u << 29};
        zs_u64 lits = 0, mls = 0;
        int bad = 0;
        for (zs_u32 i = 0; i < n; i++) {
            zs_u32 pick = (zs_u32)(rng() % 16), ll = rng() % 3 ? 0 : (zs_u32)(rng() % 20), ofv;
            ofv = pick < 9 ? 1 + pick % 3 : pick < 15 ? 4 + (zs_u32)(rng() % (pick < 12 ? 8 : 5000)) : 0x80000003u + (zs_u32)(rng() % 4);
            seqs[i].ll = ll;
            seqs[i].ml = 3 + (zs_u32)(rng() % 40);
            seqs[i].off = ofv;
            lits += ll;
            mls += seqs[i].ml;
            zs_u32 o; /* the serial rule, as zb_sequences applied it before the scan */
            if (ofv > 3) {
                bad |= ofv - 3 >= ZB_SYM;
                o = ofv - 3;
                rep[2] = rep[1];
                rep[1] = rep[0];
                rep[0] = o;
            }
            else {
                unsigned idx = ofv - 1 + (ll == 0);
                o = idx == 0 ? rep[0] : idx == 3 ? serial_minus1(rep[0]) : rep[idx];
                if (idx) {
                    if (idx != 1)
                        rep[2] = rep[1];
                    rep[1] = rep[0];
                    rep[0] = o;
                }
            }
            bad |= o == 0;
            want[i] = o;
        }
        zb_block_t b;
        memset(&b, 0, sizeof b);
        b.type = 2;
        b.nseq = n;
        b.lit_len = (zs_u32)(rng() % 8 ? lits + rng() % 5 : lits / 2);
        bad |= lits > b.lit_len || b.lit_len + mls > ZS_BLOCK_MAX;
#ifdef ZB_SIMULATED_LANES
        zb_offsets_args_t a = {&b, seqs};
        CHECK_MSG(zb_sim_run(zb_offsets_lane, &a) == 0, "made-up block %d: the offsets' lanes diverged", k);
#else
        zb_offsets(&b, seqs, 0, 1);
#endif
        CHECK_MSG(b.bad == bad, "made-up block %d (%u sequences): bad %d, the serial rule %d", k, n, b.bad, bad);
        if (bad || b.bad)
            continue;
        valid++;
        for (zs_u32 i = 0; i < n; i++)
            CHECK_MSG(seqs[i].off == want[i], "made-up block %d, sequence %u: offset %#x, the serial rule %#x", k, i,
                      seqs[i].off, want[i]);
        for (int r = 0; r < 3; r++)
            CHECK_MSG(b.end_rep[r] == rep[r], "made-up block %d: repeat offset %d after it %#x, the serial rule %#x", k,
                      r, b.end_rep[r], rep[r]);
        CHECK_MSG(b.out_len == b.lit_len + mls, "made-up block %d: out_len %u, expected %llu", k, b.out_len,
                  (unsigned long long)(b.lit_len + mls));
    }
    CHECK_MSG(valid > (size_t)blocks / 10, "only %zu of %d made-up blocks valid", valid, blocks);
}

int main(void)
{
    ref_load();
    if (!ref.zstd) {
        printf("libzstd.so.1 not found: skipped\n");
        return 77;
    }
#ifdef ZB_SIMULATED_LANES /* each sequence's lanes in turn: slower, so fewer frames */
    static const size_t sizes[] = {0, 100, 4096, 131073, 300000};
    static const int levels[] = {-5, 3, 19};
    const int damage_rounds = 20;
#else
    static const size_t sizes[] = {0, 1, 100, 4096, 65536, 131072, 131073, 300000, 1048576, 2621440};
    static const int levels[] = {-5, 1, 3, 9, 19};
    const int damage_rounds = 200;
#endif
    counts_t total = {0};
    for (int kind = 0; kind < NKINDS; kind++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t v = 0; v < sizeof levels / sizeof levels[0]; v++) {
                if (levels[v] == 19 && sizes[s] > 300000)
                    continue; /* slow, and level 9 covers the large frames */
                roundtrip(kind, sizes[s], levels[v], &total);
            }
    printf("%zu chunks, %zu blocks: %zu with Treeless literals, %zu with a table in Repeat_Mode, %zu raw, %zu RLE, "
           "%zu copying from blocks before them\n",
           total.chunks, total.blocks, total.treeless, total.repeat, total.raw, total.rle, total.refs);
    CHECK_MSG(total.treeless > 0, "no block with Treeless literals: that path was not taken");
    CHECK_MSG(total.repeat > 0, "no block with a table in Repeat_Mode: that path was not taken");
    CHECK_MSG(total.raw > 0, "no raw block");
    CHECK_MSG(total.refs > 0, "no block copying from the blocks before it");
    printf("copied by the warp: %zu literal runs, %zu matches (%zu overlapping themselves, %zu reaching before "
           "their block)\n",
           total.warp_lits, total.warp_matches, total.warp_overlapping, total.warp_before);
    CHECK_MSG(total.warp_lits > 0 && total.warp_matches > 0 && total.warp_overlapping > 0 && total.warp_before > 0,
              "a path of the warp's copies was not taken");

    /* a frame with a content checksum is left to nvCOMP */
    {
        uint8_t f[] = {0x28, 0xB5, 0x2F, 0xFD, 0x24, 0x01, 0x09, 0x00, 0x00, 0x41, 0, 0, 0, 0};
        uint8_t out[2];
        CHECK_MSG(decode(f, sizeof f, 1, out, NULL) != 0, "a frame with a content checksum was taken");
    }
    /* frames libzstd refuses (found by a review's fuzzing), each in a buffer of its exact size */
    {
        static const uint8_t empty_block_at_end[] = {0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x50, 0x05, 0x00, 0x00};
        static const uint8_t window_2_to_32[] = {0x28, 0xB5, 0x2F, 0xFD, 0x00, 0xB0, 0x21,
                                                 0x00, 0x00, 'a',  'b',  'c',  'd'};
        static const uint8_t no_sequences_in_two_bytes[] = {0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x04, 0x1C, 0x00, 0x00, 0x00,
                                                            0x80, 0x00, 0x21, 0x00, 0x00, 'a', 'b', 'c', 'd'};
        static const struct {
            const uint8_t *p;
            size_t n, expect;
            const char *what;
        } bad[] = {{empty_block_at_end, sizeof empty_block_at_end, 16, "a compressed block of 0 bytes ending it"},
                   {window_2_to_32, sizeof window_2_to_32, 4, "a window of 2^32"},
                   {no_sequences_in_two_bytes, sizeof no_sequences_in_two_bytes, 4, "no sequences in the 2-byte form"}};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            uint8_t *f = malloc(bad[i].n), out[16];
            memcpy(f, bad[i].p, bad[i].n);
            bytes_t b = {f, bad[i].n}, back = {0};
            bool libzstd_reads = ref_unzstd(&b, &back);
            CHECK_MSG(decode(f, bad[i].n, bad[i].expect, out, NULL) != 0, "%s was taken (libzstd %s it)", bad[i].what,
                  libzstd_reads ? "reads" : "refuses");
            free(back.p);
            free(f);
        }
    }
#ifdef ZB_SIMULATED_LANES
    offsets_made_up(500);
#else
    offsets_made_up(5000);
#endif
    size_t taken = 0, refused = 0;
    for (int kind = 0; kind < NKINDS; kind++) {
        damaged(kind, 300000, 3, damage_rounds, &taken, &refused);
        damaged(kind, 65536, 19, damage_rounds / 2, &taken, &refused);
    }
    printf("damaged frames: %zu taken (each equal to libzstd's), %zu left to nvCOMP\n", taken, refused);
    CHECK_MSG(refused > 0, "no damaged frame refused");
    return test_finish("test_zstd_blocks");
}
