/*
 * The zstd splicer (src/codec/zstd_splice.h) on the host, against libzstd:
 * chunks cut in pieces, each compressed by libzstd into a frame of its own
 * (as nvCOMP does on the GPU), the pieces spliced into one frame as the
 * codec's kernels do, read back the way hdf5plugin's zstd filter reads (one
 * frame, sized by its content size) and compared byte for byte. Also: how
 * many pieces were re-coded (the path must be taken) or fell back to raw
 * blocks (never, for libzstd's frames), what splicing costs in size, and
 * mutated pieces (no write outside the output, no hang). Skipped (77)
 * without libzstd. Built twice: as the host uses the splicer (any piece
 * size), and as the kernel does (SPLICE_AS_KERNEL: its checkpoints,
 * pieces of GDS_ZSTD_PIECE_MIN to GDS_ZSTD_PIECE_MAX bytes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_ref.h"
#ifdef SPLICE_AS_KERNEL
#include "codec_shared.h"
#define ZS_MAX_CHECKPOINTS GDS_ZSTD_SPLICE_CHECKPOINTS
#endif
#include "zstd_splice.h"

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

static uint64_t rnd(void) { return rng(); }

/* codec_ref.h's kinds (a smooth field in 3 decimals, image bytes, sparse
 * labels, random bytes, a double field), plus fixed-size records with
 * repeating fields (many repeat offsets) and one byte repeated. */
enum { KIND_FIELD, KIND_IMAGE, KIND_SPARSE, KIND_RANDOM, KIND_DOUBLE, KIND_RECORDS, KIND_CONSTANT, NKINDS };
static const char *const data_names[NKINDS] = {"float field", "image u8", "sparse int32", "random",
                                               "double field", "records", "constant"};

static void fill(uint8_t *p, size_t n, int kind)
{
    static const data_kind_t ref_kind[] = {DATA_FLOAT_FIELD, DATA_IMAGE_U8, DATA_SPARSE_INT, DATA_RANDOM,
                                           DATA_DOUBLE_FIELD};
    if (kind < KIND_RECORDS) {
        make_data(ref_kind[kind], p, n, 7);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t r = i / 24, f = i % 24;
        p[i] = kind == KIND_CONSTANT ? 0x5A
               : f < 8               ? (uint8_t)(r >> (8 * (f % 4)))
               : f < 16              ? (uint8_t)(0x40 + f)
                                     : (uint8_t)(rnd() % 3);
    }
}

typedef struct splice_stats {
    int what[4];      /* pieces copied, re-coded whole, raw, patched (ZS_PIECE_*) */
    size_t pieces_bytes; /* the pieces' frames, summed */
} splice_stats_t;

static size_t slot_bytes(size_t piece) { return piece + 3 * (piece / ZS_BLOCK_MAX + 1) + 64; }

/* src cut in pieces of `piece` bytes, each compressed at `level`, spliced;
 * the frame, or .p NULL. */
static bytes_t splice(const uint8_t *src, size_t len, size_t piece, int level, zs_work_t *w, splice_stats_t *s)
{
    size_t n = len ? (len + piece - 1) / piece : 1, cap = slot_bytes(piece);
    bytes_t out = bytes_new(ZS_FRAME_HEADER + n * cap);
    uint8_t *slot = malloc(cap + 64);
    zs_frame_header(out.p, len);
    out.n = ZS_FRAME_HEADER;
    for (size_t k = 0; k < n; k++) {
        size_t off = k * piece, plen = len - off < piece ? len - off : piece;
        bytes_t in = {(uint8_t *)src + off, plen}, frame;
        if (!ref_zstd(&in, &frame, level)) {
            free(out.p);
            out.p = NULL;
            break;
        }
        s->pieces_bytes += frame.n;
        memset(slot + cap, 0xA5, 64);
        int what = -1;
        zs_u64 got = zs_splice_piece(w, frame.p, frame.n, src + off, plen, k == 0, k + 1 == n, slot, cap, &what);
        zs_run_copies(w, 0, 1);
        bool guard = true;
        for (int g = 0; g < 64; g++)
            guard &= slot[cap + g] == 0xA5;
        CHECK(got > 0 && guard, "piece %zu of %zu (%zu B): %llu B written, guard %s", k, n, plen, got,
              guard ? "intact" : "overwritten");
        if (what >= 0 && what < 4)
            s->what[what]++;
        memcpy(out.p + out.n, slot, got);
        out.n += got;
        free(frame.p);
    }
    free(slot);
    return out;
}

static void roundtrip(int kind, size_t len, size_t piece, int level, zs_work_t *w, splice_stats_t *total,
                      bool expect_recode)
{
    uint8_t *src = malloc(len ? len : 1);
    fill(src, len, kind);
    splice_stats_t s = {{0, 0, 0, 0}, 0};
    bytes_t frame = splice(src, len, piece, level, w, &s);
    bytes_t back = {0};
    bool ok = frame.p && ref_unzstd(&frame, &back) && back.n == len && memcmp(back.p, src, len) == 0;
    size_t n = len ? (len + piece - 1) / piece : 1;
    /* the splice's cost: one frame header instead of n, raw blocks where
     * re-coding did not pay */
    double cost = s.pieces_bytes ? (double)frame.n / (double)s.pieces_bytes : 0;
    CHECK(ok, "%s %zu B in %zu B pieces, level %d: spliced frame reads back wrong", data_names[kind], len, piece,
          level);
    CHECK(s.what[ZS_PIECE_RAW] == 0, "%s %zu B in %zu B pieces, level %d: %d of %zu pieces fell back to raw",
          data_names[kind], len, piece, level, s.what[ZS_PIECE_RAW], n);
    CHECK(cost <= 1.03 || frame.n <= s.pieces_bytes + 64,
          "%s %zu B in %zu B pieces, level %d: spliced %zu B against %zu B of pieces", data_names[kind], len, piece,
          level, frame.n, s.pieces_bytes);
    if (expect_recode)
        CHECK(s.what[ZS_PIECE_RECODED] + s.what[ZS_PIECE_PATCHED] > 0,
              "%s %zu B in %zu B pieces, level %d: no piece re-coded (%d copied)", data_names[kind], len, piece, level,
              s.what[ZS_PIECE_COPIED]);
    printf("%-4s %-12s %8zu B, pieces %6zu B, level %3d: %4d copied %4d patched %4d re-coded %d raw, ratio %.2f, "
           "splice %+.2f%%\n",
           ok ? "ok" : "FAIL", data_names[kind], len, piece, level, s.what[ZS_PIECE_COPIED],
           s.what[ZS_PIECE_PATCHED], s.what[ZS_PIECE_RECODED], s.what[ZS_PIECE_RAW],
           frame.n ? (double)len / (double)frame.n : 0, (cost - 1) * 100);
    for (int k = 0; k < 4; k++)
        total->what[k] += s.what[k];
    free(frame.p);
    free(back.p);
    free(src);
}

/* Pieces with bytes changed: whatever the splicer makes of them, it
 * returns, writes inside its output and, where it reports a copy or a
 * re-code, a frame that libzstd either rejects or decodes to len bytes. */
static void mutations(zs_work_t *w)
{
    const size_t piece = 32768, len = 4 * piece;
    uint8_t *src = malloc(len);
    fill(src, len, KIND_RECORDS);
    size_t cap = slot_bytes(piece);
    uint8_t *slot = malloc(cap + 64);
    int survived = 0, runs = 0;
    for (int k = 0; k < 4; k++) {
        bytes_t in = {src + k * piece, piece}, frame;
        if (!ref_zstd(&in, &frame, 3))
            break;
        for (int m = 0; m < 300; m++) {
            bytes_t bad = bytes_new(frame.n);
            memcpy(bad.p, frame.p, frame.n);
            bad.n = frame.n;
            int flips = 1 + (int)(rnd() % 4);
            for (int f = 0; f < flips; f++)
                bad.p[rnd() % bad.n] ^= (uint8_t)(1u << (rnd() % 8));
            if (m % 10 == 9)
                bad.n = rnd() % bad.n; /* truncated */
            memset(slot + cap, 0xA5, 64);
            int what = -1;
            zs_u64 got = zs_splice_piece(w, bad.p, bad.n, src + k * piece, piece, k == 0, 1, slot, cap, &what);
            zs_run_copies(w, (unsigned)(m % 3), 3); /* one lane of three: the others' bytes stay unwritten */
            zs_run_copies(w, (unsigned)((m + 1) % 3), 3);
            zs_run_copies(w, (unsigned)((m + 2) % 3), 3);
            bool guard = true;
            for (int g = 0; g < 64; g++)
                guard &= slot[cap + g] == 0xA5;
            runs++;
            survived += got > 0 && got <= cap && guard && what >= 0 && what <= 3;
            free(bad.p);
        }
        free(frame.p);
    }
    CHECK(runs > 0 && survived == runs, "mutated pieces: %d of %d spliced within their output", survived, runs);
    printf("%-4s mutated pieces: %d of %d spliced within their output\n", survived == runs ? "ok" : "FAIL", survived,
           runs);
    free(slot);
    free(src);
}

/* A frame made by hand the way another encoder may write it: single
 * segment with a 1-byte content size, a raw block, a compressed block of
 * RLE literals (regenerated size 0) and one match that uses the starting
 * history's repeat offset 4 (re-coded, then stored raw: shorter than its
 * literals section), a raw last block. Spliced after a first piece it must
 * decode; a piece frame whose content size is not the piece's falls back
 * to raw blocks. */
static void crafted(zs_work_t *w)
{
    static const uint8_t first[16] = "0123456789abcdef", second[14] = "ABCDEFGHEFGxyz";
    uint8_t f1[64], f2[64], out[512];
    size_t n1 = 0, n2 = 0;
    const uint8_t head1[6] = {0x28, 0xB5, 0x2F, 0xFD, 0x20, 16}, head2[6] = {0x28, 0xB5, 0x2F, 0xFD, 0x20, 14};
    memcpy(f1, head1, 6);
    n1 = 6;
    zs_put_block_header(f1 + n1, 1, 0, 16);
    memcpy(f1 + n1 + 3, first, 16);
    n1 += 19;
    memcpy(f2, head2, 6);
    n2 = 6;
    zs_put_block_header(f2 + n2, 0, 0, 8);
    memcpy(f2 + n2 + 3, second, 8);
    n2 += 11;
    /* the compressed block: RLE literals, 3-byte header, 0 bytes, 'Q';
     * one sequence, predefined tables: LL 0, offset value 1 (with LL 0:
     * repeat offset 2 of the history, 4), match length 3 */
    uint8_t blk[32];
    size_t b = 0;
    blk[b++] = 0x01 | (3u << 2);
    blk[b++] = 0;
    blk[b++] = 0;
    blk[b++] = 'Q';
    blk[b++] = 1;    /* one sequence */
    blk[b++] = 0x00; /* predefined LL, OF, ML */
    zs_table_build(&w->t[ZS_LL], zs_ll_default, 36, 6);
    zs_table_build(&w->t[ZS_OF], zs_of_default, 29, 5);
    zs_table_build(&w->t[ZS_ML], zs_ml_default, 53, 6);
    zs_wbits_t bw = {blk + b, sizeof blk - b, 0, 0, 0};
    zs_put(&bw, w->t[ZS_ML].order[w->t[ZS_ML].start[0]], 6); /* initial states, read LL, OF, ML */
    zs_put(&bw, w->t[ZS_OF].order[w->t[ZS_OF].start[0]], 5);
    zs_put(&bw, w->t[ZS_LL].order[w->t[ZS_LL].start[0]], 6);
    zs_put_end(&bw);
    b += bw.len;
    zs_put_block_header(f2 + n2, 0, 2, (zs_u32)b);
    memcpy(f2 + n2 + 3, blk, b);
    n2 += 3 + b;
    zs_put_block_header(f2 + n2, 1, 0, 3);
    memcpy(f2 + n2 + 3, "xyz", 3);
    n2 += 6;
    bytes_t alone = {f2, n2}, back = {0};
    bool ok = ref_unzstd(&alone, &back) && back.n == 14 && memcmp(back.p, second, 14) == 0;
    CHECK(ok, "crafted piece frame: libzstd reads it alone");
    free(back.p);
    for (int bad_size = 0; bad_size < 2; bad_size++) {
        f2[5] = bad_size ? 15 : 14;
        zs_frame_header(out, 30);
        size_t o = ZS_FRAME_HEADER;
        int what1 = -1, what2 = -1;
        o += zs_splice_piece(w, f1, n1, first, 16, 1, 0, out + o, 200, &what1);
        zs_run_copies(w, 0, 1);
        o += zs_splice_piece(w, f2, n2, second, 14, 0, 1, out + o, 200, &what2);
        zs_run_copies(w, 0, 1);
        bytes_t spliced = {out, o};
        back = (bytes_t){0};
        ok = ref_unzstd(&spliced, &back) && back.n == 30 && memcmp(back.p, first, 16) == 0 &&
             memcmp(back.p + 16, second, 14) == 0;
        CHECK(ok && what2 == (bad_size ? ZS_PIECE_RAW : ZS_PIECE_RECODED),
              "crafted pieces spliced (%s content size): %s, second piece %d", bad_size ? "a wrong" : "the right",
              ok ? "reads back" : "reads back wrong", what2);
        printf("%-4s crafted pieces, %s content size: second piece %s\n", ok ? "ok" : "FAIL",
               bad_size ? "a wrong" : "the right", what2 == ZS_PIECE_RAW ? "raw" : "re-coded");
        free(back.p);
    }
}

/* The FSE helpers against the format's own numbers: the predefined tables
 * fill exactly, and a symbol's states cover the whole state range once. */
static void tables(zs_work_t *w)
{
    const short *norms[3] = {zs_ll_default, zs_of_default, zs_ml_default};
    const unsigned ends[3] = {36, 29, 53}, als[3] = {6, 5, 6};
    for (int t = 0; t < 3; t++) {
        zs_table_t *tb = &w->t[t];
        int rc = zs_table_build(tb, norms[t], ends[t], als[t]);
        CHECK(rc == 0, "predefined table %d builds", t);
        unsigned size = 1u << als[t];
        bool covered = true;
        for (unsigned x = 0; x < ends[t] && rc == 0; x++) {
            /* every state after x is reached from exactly one of x's states */
            for (unsigned next = 0; next < size; next++) {
                uint8_t buf[8] = {0};
                zs_wbits_t bw = {buf, sizeof buf, 0, 0, 0};
                unsigned s = zs_encode_step(tb, x, next, &bw);
                zs_u32 bits = (zs_u32)(bw.len ? buf[0] | (bw.acc << 8) : bw.acc);
                const zs_cell_t *c = &tb->cell[s];
                covered &= c->sym == x && (unsigned)c->base + (bits & ((1u << c->nb) - 1)) == next;
            }
        }
        CHECK(covered, "predefined table %d: the encoder's steps invert the decoder's", t);
    }
    /* distributions made for counts, written and read back */
    int same = 0, runs = 0;
    for (int k = 0; k < 2000; k++) {
        zs_u32 c[32] = {0};
        unsigned n = 2 + (unsigned)(rnd() % 31), al = 5 + (unsigned)(rnd() % 4);
        for (unsigned s = 0; s < n; s++)
            c[s] = rnd() % 3 == 0 ? 0 : (zs_u32)(rnd() % (rnd() % 2 ? 5 : 5000));
        c[n - 1] += 1 + (zs_u32)(rnd() % 100); /* two symbols at least, the last present */
        c[0] += 1;
        zs_u64 total = 0;
        for (unsigned s = 0; s < n; s++)
            total += c[s];
        short norm[32], back[32];
        uint8_t desc[64];
        zs_normalize(norm, c, n, total, al);
        int sum = 0;
        bool present = true;
        for (unsigned s = 0; s < n; s++) {
            sum += norm[s];
            present &= (c[s] != 0) == (norm[s] > 0);
        }
        int len = zs_write_counts(norm, n, al, desc, sizeof desc);
        unsigned end = 0, al2 = 0;
        int used = len > 0 ? zs_read_counts(back, &end, &al2, desc, (zs_u64)len, 9, 31) : -1;
        bool ok = sum == (1 << al) && present && used == len && end == n && al2 == al;
        for (unsigned s = 0; ok && s < n; s++)
            ok = back[s] == norm[s];
        ok = ok && zs_table_build(&w->t[0], norm, n, al) == 0;
        same += ok;
        runs++;
    }
    CHECK(same == runs, "distributions written and read back: %d of %d the same", same, runs);
}

int main(void)
{
    ref_load();
    if (!ref.zstd) {
        printf("SKIP: libzstd.so.1 not found\n");
        return 77;
    }
    zs_work_t *w = malloc(sizeof *w);
    splice_stats_t total = {{0, 0, 0, 0}, 0};
    tables(w);
    crafted(w);
    const size_t sizes[] = {1u << 20, (1u << 20) + 777, 70000, 1};
#ifdef SPLICE_AS_KERNEL
    const size_t pieces[] = {GDS_ZSTD_PIECE_MIN, 4096, 65536, GDS_ZSTD_PIECE_MAX};
#else
    const size_t pieces[] = {32768, 4096, 100000, 262144};
#endif
    const int levels[] = {-3, 1, 3, 9};
    for (int kind = 0; kind < NKINDS; kind++)
        for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
            for (size_t b = 0; b < sizeof pieces / sizeof *pieces; b++)
                for (size_t c = 0; c < sizeof levels / sizeof *levels; c++) {
                    if (sizes[a] == 1 && (b || c))
                        continue;
                    bool many = sizes[a] >= 4 * pieces[b];
                    roundtrip(kind, sizes[a], pieces[b], levels[c], w, &total,
                              many && kind == KIND_SPARSE);
                }
    for (int kind = 0; kind < NKINDS; kind++) /* the slow levels, once each */
        roundtrip(kind, 1u << 19, 32768, 19, w, &total, kind == KIND_SPARSE);
    /* both ways of re-coding occur: first sequences only, and blocks whole */
    CHECK(total.what[ZS_PIECE_PATCHED] > 0, "some piece was patched (%d copied)", total.what[ZS_PIECE_COPIED]);
    CHECK(total.what[ZS_PIECE_RECODED] > 0, "some piece was re-coded whole (%d copied)",
          total.what[ZS_PIECE_COPIED]);
    mutations(w);
    free(w);
    printf("test_zstd_splice%s: %d checks, %d failed (%d pieces copied, %d patched, %d re-coded whole, %d raw)\n",
#ifdef SPLICE_AS_KERNEL
           " (as the kernel)",
#else
           "",
#endif
           checks, failures,
           total.what[ZS_PIECE_COPIED], total.what[ZS_PIECE_PATCHED], total.what[ZS_PIECE_RECODED],
           total.what[ZS_PIECE_RAW]);
    return failures ? 1 : 0;
}
