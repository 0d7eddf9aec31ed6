/*
 * GPU encoding (gds_codec_encode, see gpu_codec.h): the pipeline planned
 * into stages in write order (the data moved first where a stage may not
 * work in place on the source or nvCOMP wants it aligned), the compressor's
 * blocks sized, the chunks cut into sub-batches that fit the codec's
 * temporary memory, each sub-batch run stage by stage on the caller's
 * stream (shuffles, checksums, nvCOMP's batched compression, the filters'
 * framing assembled by the kernels); stored sizes, filter masks and the
 * lowest failing chunk collected.
 */
#include "codec_internal.h"
#include "deflate_splice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct encode_plan {
    const gds_codec_step_t *steps;
    size_t nsteps;
    stage_t stage[2 * GDS_CODEC_MAX_FILTERS + 1];
    size_t nstages;
    size_t in_size[2 * GDS_CODEC_MAX_FILTERS + 1]; /* host-known input size of each stage (0: after the compressor) */
    size_t slot[NARENAS];
    size_t max_encoded;
    /* the compressor's blocks */
    size_t nblocks, block_in;  /* blocks per chunk, bytes of the largest */
    size_t block_out;          /* nvCOMP's slot per block */
    size_t splice_out;         /* zstd: a piece's slot once spliced (zstd_splice.h), else 0 */
    const gds_codec_step_t *comp; /* the compressor (NULL: none, or deflate level 0) */
    size_t comp_in;            /* bytes entering it */
    bool copy_entries;         /* blosc without nvCOMP (MEMCPYED): entries that only carry its copies */
} encode_plan_t;

/* Whether the compressing step s runs nvCOMP on `in` bytes: not deflate at
 * level 0 (stored blocks), nor blosc where it writes MEMCPYED frames
 * (clevel 0, chunks under 128 bytes). */
static bool step_nvcomp(const gds_codec_step_t *s, size_t in)
{
    if (s->kind == GDS_STEP_DEFLATE)
        return s->level != 0;
    if (s->kind == GDS_STEP_BLOSC)
        return !gds_blosc_encode_memcpy_only(s, in);
    return gds_codec_step_compresses(s->kind);
}

/* Whether blosc's blocks change before compression (into the stage's mid):
 * a byte shuffle of elements of more than a byte, or a bit shuffle. */
static bool blosc_transforms(const gds_codec_step_t *s)
{
    return (s->shuffle == 1 && s->elem > 1) || s->shuffle == 2;
}

/* Blocks per chunk of the compressor step s for `in` bytes: (count, bytes of a full block). */
static void encode_blocks(const gds_codec_step_t *s, size_t in, size_t *nblocks, size_t *block_in)
{
    if (s->kind == GDS_STEP_LZ4) {
        size_t bs = gds_lz4h5_encode_block(s, in);
        *nblocks = (in + bs - 1) / bs;
        *block_in = bs;
    }
    else if (s->kind == GDS_STEP_BSHUF_LZ4 || s->kind == GDS_STEP_BSHUF_ZSTD) {
        size_t bs = s->block ? s->block : gds_bshuf_default_block(s->elem);
        size_t full, last, left;
        gds_bshuf_layout(in / s->elem, bs, &full, &last, &left);
        *nblocks = full + (last ? 1 : 0);
        *block_in = (full ? bs : last) * s->elem;
    }
    else if (s->kind == GDS_STEP_BLOSC) /* its streams, the pieces nvCOMP compresses */
        gds_blosc_encode_streams(s, in, nblocks, block_in);
    else if (s->kind == GDS_STEP_DEFLATE && s->level != 0 && gds_codec_deflate_piece() &&
             in > gds_codec_deflate_piece()) { /* pieces joined into one stream */
        size_t piece = gds_codec_deflate_piece();
        *nblocks = (in + piece - 1) / piece;
        *block_in = piece;
    }
    else if (s->kind == GDS_STEP_ZSTD && in > gds_codec_zstd_piece(s->level)) { /* pieces spliced into one frame */
        size_t piece = gds_codec_zstd_piece(s->level);
        *nblocks = (in + piece - 1) / piece;
        *block_in = piece;
    }
    else {
        *nblocks = 1;
        *block_in = in;
    }
}

/* nvCOMP's zstd compression (tests/codec bench, 2026-11-27, an H100 and an
 * H200 alike, a float field): 64 MiB of chunks that are one piece each
 * 7.2-7.4 GB/s in 32 KiB, 4.0-4.1 in 64 KiB, 2.3-2.4 in 128 KiB; 256 MiB in
 * 1 MiB chunks, spliced, 5.2-6.0, 5.8-6.6, 6.7-7.2; bitshuffle blocks of
 * 8-32 KiB 11.5, 64 KiB 7.7, 128 KiB 4.6. HDF5's CPU filter: 0.1-0.25.
 * Inputs over 128 KiB were not measured: left to HDF5. Larger pieces find
 * longer matches: 1 GiB of python -m h5gds.bench's float field in 1 MiB
 * chunks took 446, 400 and 372 MB in pieces of 32, 64 and 128 KiB (HDF5's
 * level 1: 339 MB), its image tiles 186, 184 and 183 MB, the encode of the
 * field 0.16, 0.18 and 0.19 s, of the tiles 0.10, 0.11 and 0.13 s (H100).
 * So the level chooses, between speed and ratio as on the CPU. */
#define ZSTD_FAST_INPUT_MAX GDS_ZSTD_PIECE_MAX

size_t gds_codec_zstd_piece(int level)
{
    return level <= 2 ? GDS_ZSTD_PIECE_MIN : level <= 5 ? 65536u : GDS_ZSTD_PIECE_MAX;
}

/* nvCOMP's Deflate compression codes a stream serially: a batch of 1 MiB
 * chunks took 250 ms, one chunk's time, however wide (H100,
 * 2026-11-27-h100-deflate-writes). Pieces of a chunk are compressed side
 * by side, then joined into the chunk's one stream (deflate_splice.h).
 * H5GDS_DEFLATE_PIECE_KIB sets their size (0: chunks whole). */
size_t gds_codec_deflate_piece(void)
{
    static size_t piece = SIZE_MAX;
    size_t p = __atomic_load_n(&piece, __ATOMIC_RELAXED);
    if (p == SIZE_MAX) {
        const char *env = getenv("H5GDS_DEFLATE_PIECE_KIB");
        char *end = NULL;
        long kib = env && *env ? strtol(env, &end, 10) : -1;
        p = kib >= 0 && end && *end == '\0' && kib <= 65536 ? (size_t)kib * 1024 : GDS_DEFLATE_PIECE;
        __atomic_store_n(&piece, p, __ATOMIC_RELAXED);
    }
    return p;
}

bool gds_codec_encodes_slowly(const gds_codec_pipeline_t *p)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t ns;
    if (gds_codec_plan_steps(p, 0, true, steps, &ns, NULL, 0) < 0)
        return false;
    for (size_t i = 0; i < ns; i++) {
        size_t nblocks, block_in; /* the pieces nvCOMP would compress, as the encoder cuts them */
        if (!gds_step_compresses_zstd(&steps[i]))
            continue;
        encode_blocks(&steps[i], p->chunk_bytes, &nblocks, &block_in);
        if (block_in > ZSTD_FAST_INPUT_MAX)
            return true;
    }
    return false;
}

static int encode_plan(gds_codec_t *c, const gds_codec_pipeline_t *p, const void *const *src, size_t n,
                       const gds_codec_step_t *steps, size_t ns, encode_plan_t *e, CUstream stream, gds_status_t *st)
{
    memset(e, 0, sizeof *e);
    e->steps = steps;
    e->nsteps = ns;
    e->max_encoded = gds_codec_max_encoded_bytes(p);
    int comp = -1;
    for (size_t k = 0; k < ns; k++)
        if (gds_codec_step_compresses(steps[k].kind))
            comp = (int)k;
    for (size_t k = (size_t)comp + 1; comp >= 0 && k < ns; k++)
        if (steps[k].kind != GDS_STEP_FLETCHER32) {
            gds_status_set(st, 95, "GPU codec: cannot encode: filter %u (%s) after the compressing filter", steps[k].pos,
                           gds_codec_filter_name(p->filter[steps[k].pos].id));
            return -1;
        }
    int loc = LOC_SRC;
    size_t size = p->chunk_bytes;
    for (size_t k = 0; k < ns; k++) {
        const gds_codec_step_t *s = &steps[k];
        bool later_moving = false;
        for (size_t l = k + 1; l < ns; l++)
            later_moving |= steps[l].kind != GDS_STEP_FLETCHER32;
        bool zstd_misaligned = false;
        if (step_zstd(s->kind) && s->kind == GDS_STEP_ZSTD && loc == LOC_SRC && c->zstd_calign.input > 1)
            for (size_t i = 0; i < n; i++)
                zstd_misaligned |= (uintptr_t)src[i] % c->zstd_calign.input != 0;
        if ((s->kind == GDS_STEP_FLETCHER32 && loc == LOC_SRC) || zstd_misaligned) {
            /* the data must move first: in place on the source is not allowed, or
             * nvCOMP wants it aligned */
            stage_t *g = &e->stage[e->nstages];
            int busy[1] = {LOC_SRC};
            g->step = NULL;
            g->in = loc;
            g->out = (s->kind == GDS_STEP_FLETCHER32 && !later_moving) ? LOC_DST : gds_codec_free_arena(busy, 1);
            g->mid = g->mid2 = LOC_SRC;
            e->in_size[e->nstages++] = size;
            loc = g->out;
        }
        stage_t *g = &e->stage[e->nstages];
        g->step = s;
        g->in = loc;
        g->mid = g->mid2 = LOC_SRC;
        e->in_size[e->nstages++] = size;
        if (s->kind == GDS_STEP_FLETCHER32)
            g->out = loc;
        else {
            int busy[2] = {loc, LOC_DST};
            g->out = later_moving ? gds_codec_free_arena(busy, 1) : LOC_DST;
            /* blosc: shuffled blocks, or blocks nvCOMP wants aligned, in mid */
            bool blosc_mid = false;
            if (s->kind == GDS_STEP_BLOSC && step_nvcomp(s, size)) {
                blosc_mid = blosc_transforms(s);
                size_t align = gds_step_compresses_zstd(s) ? c->zstd_calign.input : c->lz4_calign.input;
                if (loc == LOC_SRC && align > 1)
                    for (size_t i = 0; i < n; i++)
                        blosc_mid |= (uintptr_t)src[i] % align != 0;
            }
            if (s->kind == GDS_STEP_BSHUF_LZ4 || s->kind == GDS_STEP_BSHUF_ZSTD || blosc_mid) {
                busy[1] = g->out;
                g->mid = gds_codec_free_arena(busy, 2);
            }
        }
        if (gds_codec_step_compresses(s->kind)) {
            encode_blocks(s, size, &e->nblocks, &e->block_in);
            bool nvcomp = step_nvcomp(s, size);
            if (nvcomp &&
                gds_codec_compress_sizes(c, s, e->nblocks, e->block_in, size, stream, &e->block_out, NULL, st) < 0)
                return -1;
            if (nvcomp && s->kind == GDS_STEP_DEFLATE && e->nblocks > 1) /* the join's empty stored block */
                e->block_out = align_up(e->block_out + DS_SYNC_BYTES, SLOT_ALIGN);
            if (nvcomp && s->kind == GDS_STEP_ZSTD) /* room for the piece's blocks stored raw */
                e->splice_out = align_up(e->block_in + 3 * (e->block_in / GDS_ZSTD_RAW_BLOCK_MAX + 1) + 64, 16);
            e->comp = nvcomp ? s : NULL;
            e->comp_in = size;
            e->copy_entries = !nvcomp && s->kind == GDS_STEP_BLOSC;
        }
        loc = g->out;
        size = size == GDS_SIZE_UNKNOWN || gds_codec_step_compresses(s->kind) ? GDS_SIZE_UNKNOWN
                                                                               : gds_codec_step_forward(s, size);
    }
    if (loc != LOC_DST) {
        stage_t *g = &e->stage[e->nstages];
        g->step = NULL;
        g->in = loc;
        g->out = LOC_DST;
        g->mid = g->mid2 = LOC_SRC;
        e->in_size[e->nstages++] = p->chunk_bytes;
    }
    for (size_t d = 0; d < e->nstages; d++) {
        const stage_t *g = &e->stage[d];
        if (g->out >= 0)
            e->slot[g->out] = align_up(e->max_encoded, SLOT_ALIGN);
        if (g->mid >= 0)
            e->slot[g->mid] = align_up(e->in_size[d], SLOT_ALIGN);
    }
    return 0;
}

/* The temporary memory of m chunks (gds_codec_temp_fn): nvCOMP's output
 * slots, arrays and its compressor's scratch. */
static size_t encode_temp(gds_codec_t *c, const void *plan, size_t m)
{
    const encode_plan_t *e = plan;
    size_t temp = 0, bo = 0;
    gds_status_t ignored;
    if (e->comp) {
        size_t ne = m * e->nblocks;
        if (gds_codec_compress_sizes(c, e->comp, ne, e->block_in, m * e->comp_in, NULL, &bo, &temp, &ignored) < 0)
            temp = 0;
        temp += ne * (e->block_out + e->splice_out + 6 * 8 + sizeof(gds_kentry_t));
    }
    else if (e->copy_entries)
        temp = m * e->nblocks * (6 * 8 + sizeof(gds_kentry_t));
    return temp;
}

/* The most chunks (up to n) one sub-batch holds within the codec's budget
 * (at least 1). */
static size_t encode_widest(gds_codec_t *c, const encode_plan_t *e, size_t n, size_t *per_out, size_t *temp_out)
{
    *per_out = gds_codec_arena_bytes(e->slot);
    return gds_codec_widest_sub_batch(c, *per_out, n, encode_temp, e, temp_out);
}

/* Chunks per sub-batch: n cut into the fewest sub-batches that fit, all of
 * one size (a Deflate sub-batch takes about one chunk's time, however
 * wide: a short last one costs as much as a full one). */
static size_t encode_batch_size(gds_codec_t *c, const encode_plan_t *e, size_t n)
{
    size_t per, temp, m = encode_widest(c, e, n, &per, &temp);
    size_t nb = n ? (n + m - 1) / m : 1;
    m = n ? (n + nb - 1) / nb : 1;
    if (gds_codec_debug_on())
        fprintf(stderr, "h5gds codec: encode: %zu chunks in batches of %zu: arenas %zu B/chunk, nvCOMP %zu B\n", n, m,
                per, temp);
    return m;
}

/* A sub-batch of m chunks' work memory (arenas, arrays: *bm, device
 * addresses not yet offset) and pinned staging. */
static int reserve_work(gds_codec_t *c, const encode_plan_t *e, size_t m, CUstream s, batch_mem_t *bm,
                        gds_status_t *st)
{
    size_t need = gds_codec_batch_bytes(e->slot, m, e->nstages, bm);
    if (gds_codec_dbuf_reserve(c, &c->work, need, s, st) < 0 ||
        gds_codec_pinned_reserve(c, gds_codec_pinned_bytes(bm), s, st) < 0)
        return -1;
    return 0;
}

/* nvCOMP's entry arrays, scratch and output slots for the compressing
 * step over m chunks of in_size bytes. */
static int reserve_compressor(gds_codec_t *c, const encode_plan_t *e, const gds_codec_step_t *step, size_t m,
                              size_t in_size, CUstream s, entries_mem_t *em, CUdeviceptr *comp_base, gds_status_t *st)
{
    size_t ne = m * e->nblocks, bo, temp;
    if (gds_codec_compress_sizes(c, step, ne, e->block_in, in_size * m, s, &bo, &temp, st) < 0 ||
        gds_codec_entries_reserve(c, ne, temp, ne * (e->block_out + e->splice_out), s, em, comp_base, st) < 0)
        return -1;
    return 0;
}

/* H5GDS_CODEC_DEBUG: the compressor's share of a sub-batch, timed on the
 * stream by events: nvCOMP, the pieces' splice or join, the framing. */
typedef struct encode_timer {
    CUevent ev[4];
    int n;
    size_t inputs; /* nvCOMP's inputs in the sub-batch */
} encode_timer_t;

static void timer_free(gds_codec_t *c, encode_timer_t *t)
{
    for (int i = 0; i < t->n; i++)
        c->cu->EventDestroy(t->ev[i]);
    t->n = 0;
}

static void timer_mark(gds_codec_t *c, encode_timer_t *t, CUstream s)
{
    if (!gds_codec_debug_on() || t->n >= 4)
        return;
    if (c->cu->EventCreate(&t->ev[t->n], 0) != CUDA_SUCCESS)
        return;
    if (c->cu->EventRecord(t->ev[t->n], s) != CUDA_SUCCESS) {
        c->cu->EventDestroy(t->ev[t->n]);
        return;
    }
    t->n++;
}

/* After the stream's work is done: prints and frees the marks. */
static void timer_report(gds_codec_t *c, encode_timer_t *t, size_t m)
{
    float ms[3] = {0, 0, 0};
    for (int i = 1; i < t->n; i++)
        c->cu->EventElapsedTime(&ms[i - 1], t->ev[i - 1], t->ev[i]);
    if (t->n == 4)
        fprintf(stderr, "h5gds codec: encode: %zu chunks, %zu nvCOMP inputs: nvCOMP %.2f ms, splice %.2f ms, "
                        "framing %.2f ms\n", m, t->inputs, ms[0], ms[1], ms[2]);
    timer_free(c, t);
}

/* One sub-batch of m chunks from i0; the caller frees what is left of the
 * timer's marks where this fails. */
static int encode_batch(gds_codec_t *c, const gds_codec_pipeline_t *p, const encode_plan_t *e, const void *const *src,
                        void *const *dst, size_t i0, size_t m, size_t *out_bytes, unsigned *out_mask,
                        error_list_t *errors, encode_timer_t *timer, CUstream s, gds_status_t *st)
{
    batch_mem_t bm;
    if (reserve_work(c, e, m, s, &bm, st) < 0)
        return -1;
    gds_codec_offset_batch(&bm, c->work.ptr);
    uint64_t *dsize_h = (uint64_t *)((char *)c->pinned + bm.pin_dsize);
    for (size_t j = 0; j < m; j++)
        dsize_h[j] = p->chunk_bytes;
    CUresult rc;
    if ((rc = c->cu->MemcpyHtoDAsync(bm.dsize, dsize_h, m * 8, s)) != CUDA_SUCCESS)
        return gds_codec_cuda_fail(st, "cuMemcpyHtoDAsync", rc);
    if (gds_codec_memset_async(c, bm.err, m * 4, s, st) < 0 || gds_codec_memset_async(c, bm.detail, m * 8, s, st) < 0 ||
        gds_codec_memset_async(c, bm.mask, m * 4, s, st) < 0)
        return -1;
    unsigned n32 = (unsigned)m;
    CUdeviceptr none = 0;
    for (size_t d = 0; d < e->nstages; d++) {
        const stage_t *g = &e->stage[d];
        const gds_codec_step_t *step = g->step;
        gds_kjob_t *jobs = gds_codec_pinned_jobs(c, &bm, d);
        size_t in_size = e->in_size[d];
        bool nvcomp = step && gds_codec_step_compresses(step->kind) && step_nvcomp(step, in_size);
        /* the compressor's entries and output slots */
        entries_mem_t em;
        memset(&em, 0, sizeof em);
        CUdeviceptr comp_base = 0;
        size_t ne = step && gds_codec_step_compresses(step->kind) ? m * e->nblocks : 0;
        if (nvcomp) {
            if (reserve_compressor(c, e, step, m, in_size, s, &em, &comp_base, st) < 0)
                return -1;
        }
        else if (step && step->kind == GDS_STEP_BLOSC &&
                 gds_codec_entries_reserve(c, ne, 0, 0, s, &em, NULL, st) < 0) /* the copies' records */
            return -1;
        for (size_t j = 0; j < m; j++) {
            gds_codec_chunk_t ch = {src[i0 + j], 0, 0, dst[i0 + j]};
            gds_kjob_t *jb = &jobs[j];
            memset(jb, 0, sizeof *jb);
            jb->in = gds_codec_loc_ptr(&bm, g->in, &ch, j);
            jb->out = gds_codec_loc_ptr(&bm, g->out, &ch, j);
            jb->mid = g->mid == LOC_SRC ? 0 : gds_codec_loc_ptr(&bm, g->mid, &ch, j);
            jb->in_size = in_size == GDS_SIZE_UNKNOWN ? 0 : in_size;
            jb->chunk = (gds_u32)j;
            jb->entry0 = j * (step && gds_codec_step_compresses(step->kind) ? e->nblocks : 1);
            jb->nentries = step && gds_codec_step_compresses(step->kind) ? (gds_u32)e->nblocks : 1;
            if (step) {
                jb->p0 = step->elem ? step->elem : 1;
                jb->p1 = step->block;
                if (step->kind == GDS_STEP_LZ4) {
                    jb->p0 = 1;
                    jb->p1 = (gds_u32)e->block_in;
                }
                else if (step->kind == GDS_STEP_BITSHUFFLE || step->kind == GDS_STEP_BSHUF_LZ4 ||
                         step->kind == GDS_STEP_BSHUF_ZSTD)
                    jb->p1 = (gds_u32)(step->block ? step->block : gds_bshuf_default_block(step->elem));
                else if (step->kind == GDS_STEP_DEFLATE) { /* pieces of block_in bytes (one: the chunk) */
                    jb->p0 = 1;
                    jb->p1 = (gds_u32)(e->block_in ? e->block_in : in_size);
                }
                else if (step->kind == GDS_STEP_ZSTD) { /* pieces of block_in bytes */
                    jb->p0 = 1;
                    jb->p1 = (gds_u32)(e->block_in ? e->block_in : 1);
                }
                else if (step->kind == GDS_STEP_BLOSC) { /* as the decoder's jobs: typesize | flags << 8, block size */
                    size_t bs = gds_blosc_encode_blocksize(step, in_size);
                    jb->p0 = step->elem | gds_blosc_encode_flags(step, bs) << 8;
                    jb->p1 = (gds_u32)bs;
                }
            }
        }
        CUdeviceptr dj;
        if (gds_codec_upload_jobs(c, &bm, d, m, s, &dj, st) < 0)
            return -1;
        unsigned code = step ? step_code(step) : 0;
        unsigned bit = step ? 1u << step->pos : 0;
        unsigned optional = step && step->optional;
        size_t big = in_size == GDS_SIZE_UNKNOWN ? e->max_encoded : in_size;
        if (!step) {
            void *a[] = {&dj, &none};
            if (gds_codec_launch(c, K_COPY, parts_for(big), n32, s, a, st) < 0)
                return -1;
            continue;
        }
        switch (step->kind) {
        case GDS_STEP_FLETCHER32: {
            unsigned trailer = 0;
            void *a1[] = {&dj, &bm.dsize, &bm.acc, &trailer};
            void *a2[] = {&dj, &n32, &bm.dsize, &bm.acc};
            if (gds_codec_memset_async(c, bm.acc, m * 3 * 8, s, st) < 0 ||
                gds_codec_launch(c, K_FLETCHER_SUM, parts_for(big / 2), n32, s, a1, st) < 0 ||
                gds_codec_launch(c, K_FLETCHER_PUT, blocks_for(m), 1, s, a2, st) < 0)
                return -1;
            break;
        }
        case GDS_STEP_SHUFFLE: {
            unsigned T = step->elem;
            void *a[] = {&dj, &none, &T};
            if (gds_codec_launch(c, K_SHUFFLE, parts_for(big), n32, s, a, st) < 0)
                return -1;
            break;
        }
        case GDS_STEP_BITSHUFFLE: {
            void *a[] = {&dj};
            if (gds_codec_launch(c, K_BITSHUFFLE, parts_for(big / 8), n32, s, a, st) < 0)
                return -1;
            break;
        }
        case GDS_STEP_BLOSC: {
            /* blocks shuffled into mid, their streams compressed by nvCOMP's
             * LZ4, the frame laid out and the streams' bytes copied into it */
            unsigned long long ne64 = ne, slot = e->block_out, base = comp_base;
            unsigned grid = ne < 65536 ? (unsigned)ne : 65536, mode = 2, compressed = nvcomp;
            void *ash[] = {&dj};
            void *apl[] = {&dj, &n32, &em.e, &slot, &base, &mode};
            void *aly[] = {&dj, &n32, &em.e, &bm.dsize, &bm.mask, &bm.err, &bm.detail, &code, &bit, &optional,
                           &compressed};
            void *acp[] = {&em.e, &ne64};
            if ((g->mid != LOC_SRC && gds_codec_launch(c, K_BLOSC_SHUFFLE, parts_for(big), n32, s, ash, st) < 0) ||
                (nvcomp && (gds_codec_launch(c, K_BLOCKS_PLAN, blocks_for(m), 1, s, apl, st) < 0 ||
                            gds_codec_nvcomp_compress(c, step, ne, e->block_in, &em, s, st) < 0)) ||
                gds_codec_launch(c, K_BLOSC_LAYOUT, blocks_for(m), 1, s, aly, st) < 0 ||
                gds_codec_launch(c, K_ENTRY_COPY, grid, 1, s, acp, st) < 0)
                return -1;
            break;
        }
        case GDS_STEP_DEFLATE:
        case GDS_STEP_ZSTD:
        case GDS_STEP_LZ4:
        case GDS_STEP_BSHUF_LZ4:
        case GDS_STEP_BSHUF_ZSTD: {
            bool bshuf = step->kind == GDS_STEP_BSHUF_LZ4 || step->kind == GDS_STEP_BSHUF_ZSTD;
            if (bshuf) {
                void *a[] = {&dj};
                if (gds_codec_launch(c, K_BITSHUFFLE, parts_for(big / 8), n32, s, a, st) < 0)
                    return -1;
            }
            if (step->kind == GDS_STEP_DEFLATE) {
                unsigned which = 1;
                void *a[] = {&dj, &bm.acc, &which};
                if (gds_codec_memset_async(c, bm.acc, m * 2 * 8, s, st) < 0 ||
                    gds_codec_launch(c, K_ADLER_SUM, parts_for(big), n32, s, a, st) < 0)
                    return -1;
            }
            if (nvcomp) {
                unsigned long long slot = e->block_out, base = comp_base;
                unsigned bs32 = bshuf;
                void *a[] = {&dj, &n32, &em.e, &slot, &base, &bs32};
                timer_mark(c, timer, s);
                if (gds_codec_launch(c, K_BLOCKS_PLAN, blocks_for(m), 1, s, a, st) < 0 ||
                    gds_codec_nvcomp_compress(c, step, ne, e->block_in, &em, s, st) < 0)
                    return -1;
                timer_mark(c, timer, s);
                timer->inputs = ne;
            }
            unsigned long long ne64 = ne;
            unsigned grid = ne < 65536 ? (unsigned)ne : 65536;
            if (step->kind == GDS_STEP_DEFLATE) {
                unsigned flg = gds_codec_zlib_flg(step->level), stored_only = !nvcomp;
                unsigned join_blocks = (unsigned)((ne + GDS_DEFLATE_JOIN_WARPS - 1) / GDS_DEFLATE_JOIN_WARPS);
                void *aj[] = {&dj, &em.e, &ne64};
                void *a[] = {&dj, &em.e, &bm.dsize, &bm.mask, &bm.acc, &bm.err, &bm.detail, &code, &flg, &bit,
                             &optional, &stored_only};
                if (nvcomp && e->nblocks > 1 &&
                    gds_codec_launch_threads(c, K_DEFLATE_JOIN, join_blocks, 1, 32 * GDS_DEFLATE_JOIN_WARPS, s, aj,
                                             st) < 0)
                    return -1;
                timer_mark(c, timer, s);
                if (gds_codec_launch(c, K_ZLIB_ASSEMBLE, parts_for(e->max_encoded), n32, s, a, st) < 0)
                    return -1;
            }
            else if (step->kind == GDS_STEP_ZSTD) {
                /* the pieces' frames made blocks of one frame, then the frame */
                unsigned long long splice_base = comp_base + ne * e->block_out, splice_slot = e->splice_out;
                void *sp[] = {&dj, &em.e, &ne64, &splice_base, &splice_slot};
                void *a[] = {&dj, &em.e, &bm.dsize, &bm.mask, &bm.err, &bm.detail, &code, &bit, &optional};
                if (nvcomp && gds_codec_launch_threads(c, K_ZSTD_SPLICE, grid, 1, 64, s, sp, st) < 0)
                    return -1;
                timer_mark(c, timer, s);
                if (gds_codec_launch(c, K_ZSTD_ASSEMBLE, parts_for(e->max_encoded), n32, s, a, st) < 0)
                    return -1;
            }
            else if (step->kind == GDS_STEP_LZ4) {
                void *a[] = {&dj, &n32, &em.e, &bm.dsize, &bm.mask, &bm.err, &bm.detail, &code, &bit, &optional};
                void *b[] = {&em.e, &ne64};
                if (gds_codec_launch(c, K_LZ4H5_LAYOUT, blocks_for(m), 1, s, a, st) < 0 ||
                    gds_codec_launch(c, K_ENTRY_COPY, grid, 1, s, b, st) < 0)
                    return -1;
            }
            else {
                unsigned long long cap = e->max_encoded;
                void *a[] = {&dj,  &n32,  &em.e, &bm.dsize, &bm.mask, &bm.err, &bm.detail, &code,
                             &bit, &optional, &cap};
                void *b[] = {&em.e, &ne64};
                if (gds_codec_launch(c, K_BSHUF_LAYOUT, blocks_for(m), 1, s, a, st) < 0 ||
                    gds_codec_launch(c, K_ENTRY_COPY, grid, 1, s, b, st) < 0)
                    return -1;
            }
            timer_mark(c, timer, s);
            break;
        }
        }
    }
    uint32_t *err = (uint32_t *)((char *)c->pinned + bm.pin_err);
    uint64_t *detail = (uint64_t *)((char *)c->pinned + bm.pin_detail);
    uint32_t *mask = (uint32_t *)((char *)c->pinned + bm.pin_mask);
    if ((rc = c->cu->MemcpyDtoHAsync(err, bm.err, m * 4, s)) != CUDA_SUCCESS ||
        (rc = c->cu->MemcpyDtoHAsync(detail, bm.detail, m * 8, s)) != CUDA_SUCCESS ||
        (rc = c->cu->MemcpyDtoHAsync(mask, bm.mask, m * 4, s)) != CUDA_SUCCESS ||
        (rc = c->cu->MemcpyDtoHAsync(dsize_h, bm.dsize, m * 8, s)) != CUDA_SUCCESS)
        return gds_codec_cuda_fail(st, "cuMemcpyDtoHAsync", rc);
    if (gds_codec_sync_stream(c, s, st) < 0)
        return -1;
    timer_report(c, timer, m);
    for (size_t j = 0; j < m; j++) {
        out_bytes[i0 + j] = dsize_h[j];
        out_mask[i0 + j] = mask[j];
        if (err[j])
            gds_codec_record_error(errors, i0 + j, err[j], detail[j]);
        else if (dsize_h[j] > e->max_encoded)
            gds_codec_record_error(errors, i0 + j, GDS_KERR_ENCODE, dsize_h[j]);
    }
    return 0;
}

int gds_codec_encode(gds_codec_t *c, const gds_codec_pipeline_t *p, const void *const *src, void *const *dst,
                     size_t *out_bytes, unsigned *out_mask, size_t n, CUstream stream, gds_status_t *st)
{
    if (!c || !p || (n && (!src || !dst || !out_bytes || !out_mask))) {
        gds_status_set(st, 22, "GPU codec: encode without a codec, pipeline or buffers");
        return -1;
    }
    char why[300];
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t ns = 0;
    if (gds_codec_plan_steps(p, 0, true, steps, &ns, why, sizeof why) < 0) {
        gds_status_set(st, 95, "GPU codec: cannot encode: %s", why);
        return -1;
    }
    if (!n)
        return 0;
    if (!gds_codec_lock_running(c, st))
        return -1;
    CUresult rc;
    void *prev = gds_cuda_enter(c->ctx, &rc);
    int ret = 0;
    error_list_t errors = {.first = SIZE_MAX};
    encode_plan_t e;
    if (rc != CUDA_SUCCESS)
        ret = gds_codec_cuda_fail(st, "making the codec's context current", rc);
    else if ((ret = gds_codec_follow(c, stream, &stream, st)) == 0)
        ret = encode_plan(c, p, src, n, steps, ns, &e, stream, st);
    if (ret == 0) {
        size_t m = encode_batch_size(c, &e, n);
        for (size_t i = 0; ret == 0 && i < n;) {
            size_t take = i + m <= n ? m : n - i;
            encode_timer_t timer = {{0}, 0, 0};
            ret = encode_batch(c, p, &e, src, dst, i, take, out_bytes, out_mask, &errors, &timer, stream, st);
            timer_free(c, &timer);
            if (ret < 0 && gds_codec_narrow_after_oom(c, take, st)) {
                size_t narrower = encode_batch_size(c, &e, n - i);
                m = narrower < take / 2 ? narrower : take / 2; /* the same chunks again */
                ret = 0;
                continue;
            }
            i += take;
        }
    }
    if (ret == 0 && errors.first != SIZE_MAX) {
        char text[300];
        gds_codec_error_text(p, errors.code, errors.detail, text, sizeof text);
        gds_status_set(st, 74, "GPU codec: encoding chunk %zu: %s", errors.first, text);
        ret = -1;
    }
    gds_cuda_restore(prev);
    pthread_mutex_unlock(&c->lock);
    return ret;
}

size_t gds_codec_write_batch_chunks(gds_codec_t *c, const gds_codec_pipeline_t *p, size_t max_chunks)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t ns = 0, per, temp;
    char why[300];
    gds_status_t ignored;
    encode_plan_t e;
    if (!c || !p || !p->chunk_bytes || gds_codec_plan_steps(p, 0, true, steps, &ns, why, sizeof why) < 0 ||
        encode_plan(c, p, NULL, 0, steps, ns, &e, NULL, &ignored) < 0)
        return 0;
    if (!e.comp || e.nblocks >= GDS_CODEC_MANY_STREAMS || !step_nvcomp(e.comp, e.comp_in))
        return 0;
    return encode_widest(c, &e, max_chunks ? max_chunks : 1, &per, &temp);
}

int gds_codec_encode_reserve(gds_codec_t *c, const gds_codec_pipeline_t *p, size_t n, gds_status_t *st)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t ns = 0;
    char why[300];
    if (!c || !p || !n || gds_codec_plan_steps(p, 0, true, steps, &ns, why, sizeof why) < 0)
        return 0; /* nothing to reserve; the encode says what is wrong */
    if (!gds_codec_lock_running(c, st))
        return -1;
    CUresult rc;
    void *prev = gds_cuda_enter(c->ctx, &rc);
    int ret = 0;
    encode_plan_t e;
    if (rc != CUDA_SUCCESS)
        ret = gds_codec_cuda_fail(st, "making the codec's context current", rc);
    else if ((ret = encode_plan(c, p, NULL, 0, steps, ns, &e, c->own, st)) == 0) {
        size_t m = encode_batch_size(c, &e, n);
        batch_mem_t bm;
        entries_mem_t em;
        if (reserve_work(c, &e, m, c->own, &bm, st) < 0 ||
            (e.comp && step_nvcomp(e.comp, e.comp_in) &&
             reserve_compressor(c, &e, e.comp, m, e.comp_in, c->own, &em, NULL, st) < 0))
            ret = -1;
    }
    gds_cuda_restore(prev);
    pthread_mutex_unlock(&c->lock);
    return ret;
}
