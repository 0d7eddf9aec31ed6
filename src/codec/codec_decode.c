/*
 * GPU decoding (gds_codec_decode, see gpu_codec.h): the chunks grouped by
 * filter mask, each group planned (codec_plan.c) into stages and cut into
 * sub-batches that fit the codec's temporary memory, each sub-batch run
 * stage by stage on the caller's stream with the NVRTC-compiled kernels
 * (codec_kernels.cu) and nvCOMP's batched calls, one call per stage for all
 * its chunks; the chunks' errors collected, the lowest failing one
 * reported.
 *
 * Decoding a group of chunks (one filter mask) stage by stage, in the
 * reverse of the pipeline's order: sizes are known on the host (a pipeline
 * has one compressor at most), so only LZ4 and bitshuffle framing need the
 * host to read the chunks' first bytes (their block size) before their
 * stage: a device-to-host copy and a synchronisation. Everything else runs
 * without waiting; the errors the kernels record per chunk are read at the
 * end of each sub-batch. The data moves between the source, up to four
 * arenas of temporary memory (one slot per chunk) and the destination.
 * Blosc's stage is codec_blosc.c's.
 */
#include "codec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per chunk, the sizes entering stage d (in[d]) and leaving it (out[d]);
 * 0 with them, or -1 with the host-found error. */
static int chunk_sizes(const decode_ctx_t *x, size_t stored, size_t *in, size_t *out, unsigned *code,
                       uint64_t *detail)
{
    size_t cur = stored;
    for (size_t d = 0; d < x->nsteps; d++) {
        size_t k = x->nsteps - 1 - d;
        const gds_codec_step_t *s = &x->steps[k];
        unsigned sc = step_code(s);
        if (x->forward[k + 1] != GDS_SIZE_UNKNOWN && cur != x->forward[k + 1]) {
            *code = sc | GDS_KERR_STORED;
            *detail = cur;
            return -1;
        }
        in[d] = cur;
        size_t min = s->kind == GDS_STEP_FLETCHER32 ? 4
                     : s->kind == GDS_STEP_DEFLATE  ? 7
                     : s->kind == GDS_STEP_ZSTD     ? 8
                     : (s->kind == GDS_STEP_LZ4 || s->kind == GDS_STEP_BSHUF_LZ4 || s->kind == GDS_STEP_BSHUF_ZSTD)
                         ? 12
                     : s->kind == GDS_STEP_BLOSC ? GDS_HEAD_BYTES
                                                 : 0;
        if (cur < min) {
            *code = sc | GDS_KERR_SHORT;
            *detail = cur;
            return -1;
        }
        if (s->kind == GDS_STEP_FLETCHER32)
            cur -= 4;
        else if (gds_codec_step_compresses(s->kind))
            cur = x->forward[k];
        else if (s->kind == GDS_STEP_BITSHUFFLE && cur % s->elem) {
            *code = sc | GDS_KERR_PARAM;
            *detail = cur;
            return -1;
        }
        out[d] = cur;
    }
    if (cur != x->p->chunk_bytes) {
        *code = GDS_KERR_STORED;
        *detail = stored;
        return -1;
    }
    return 0;
}

/* Locations of each stage (decode order) and the final copy. */
static void decode_stages(decode_ctx_t *x)
{
    int loc = LOC_SRC;
    x->nstages = 0;
    for (size_t d = 0; d < x->nsteps; d++) {
        const gds_codec_step_t *s = &x->steps[x->nsteps - 1 - d];
        stage_t *g = &x->stage[x->nstages++];
        g->step = s;
        g->in = loc;
        g->mid = g->mid2 = LOC_SRC;
        if (s->kind == GDS_STEP_FLETCHER32) {
            g->out = loc;
            continue;
        }
        int busy[3] = {loc, LOC_DST, LOC_DST};
        /* nvCOMP's decoders follow back-references of corrupt input before
         * the start of their output (seen: Deflate, a few KiB): they never
         * write into the caller's buffer, only into an arena, which has
         * mapped memory before it (WORK_GUARD); a copy stage follows. */
        bool nvcomp_out = s->kind == GDS_STEP_DEFLATE || s->kind == GDS_STEP_ZSTD || s->kind == GDS_STEP_LZ4;
        g->out = d == x->nsteps - 1 && !nvcomp_out ? LOC_DST : gds_codec_free_arena(busy, 1);
        if (s->kind == GDS_STEP_DEFLATE || s->kind == GDS_STEP_BSHUF_LZ4 || s->kind == GDS_STEP_BSHUF_ZSTD ||
            s->kind == GDS_STEP_BLOSC) {
            busy[1] = g->out;
            g->mid = gds_codec_free_arena(busy, 2);
        }
        loc = g->out;
    }
    if (loc != LOC_DST) {
        stage_t *g = &x->stage[x->nstages++];
        g->step = NULL;
        g->in = loc;
        g->out = LOC_DST;
        g->mid = g->mid2 = LOC_SRC;
    }
}

/* Runs one sub-batch of a group: chunk indices idx[0..m). */
static int decode_batch(decode_ctx_t *x, const size_t *idx, size_t m, const size_t *slot, gds_status_t *st)
{
    gds_codec_t *c = x->c;
    CUstream s = x->s;
    batch_mem_t bm;
    size_t need = gds_codec_batch_bytes(slot, m, x->nstages, &bm);
    if (gds_codec_dbuf_reserve(c, &c->work, need, s, st) < 0)
        return -1;
    gds_codec_offset_batch(&bm, c->work.ptr);
    if (gds_codec_pinned_reserve(c, gds_codec_pinned_bytes(&bm), s, st) < 0)
        return -1;
    /* per chunk, per stage sizes; alive = not failed on the host */
    size_t ns = x->nsteps;
    size_t *in_sz = malloc(sizeof(size_t) * (m * (ns + 1) * 2 + 1));
    bool *alive = malloc(m + 1);
    if (!in_sz || !alive) {
        free(in_sz);
        free(alive);
        gds_status_set(st, 12, "GPU codec: out of memory");
        return -1;
    }
    size_t *out_sz = in_sz + m * (ns + 1);
    for (size_t j = 0; j < m; j++) {
        unsigned code = 0;
        uint64_t detail = 0;
        const gds_codec_chunk_t *ch = &x->chunks[idx[j]];
        alive[j] = chunk_sizes(x, ch->src_bytes, in_sz + j * (ns + 1), out_sz + j * (ns + 1), &code, &detail) == 0;
        if (!alive[j])
            gds_codec_record_error(x->errors, idx[j], code, detail);
    }
    int ret = -1;
    /* the Deflate step's decode timed on the GPU (gds_codec_inflate_learn) */
    bool timed = false, timed_split = false;
    size_t t_n = 0, t_stored = 0, t_expect = 0;
    if (gds_codec_memset_async(c, bm.err, m * 4, s, st) < 0 || gds_codec_memset_async(c, bm.detail, m * 8, s, st) < 0)
        goto done;
    for (size_t d = 0; d < x->nstages; d++) {
        const stage_t *g = &x->stage[d];
        const gds_codec_step_t *step = g->step;
        gds_kjob_t *jobs = gds_codec_pinned_jobs(c, &bm, d);
        size_t nj = 0, max_in = 0, max_out = 0, total_out = 0;
        for (size_t j = 0; j < m; j++) {
            if (!alive[j])
                continue;
            const gds_codec_chunk_t *ch = &x->chunks[idx[j]];
            gds_kjob_t *jb = &jobs[nj++];
            memset(jb, 0, sizeof *jb);
            jb->in = gds_codec_loc_ptr(&bm, g->in, ch, j);
            jb->out = gds_codec_loc_ptr(&bm, g->out, ch, j);
            jb->mid = g->mid == LOC_SRC ? 0 : gds_codec_loc_ptr(&bm, g->mid, ch, j);
            jb->in_size = step ? in_sz[j * (ns + 1) + d] : x->p->chunk_bytes;
            jb->out_size = step ? out_sz[j * (ns + 1) + d] : x->p->chunk_bytes;
            jb->chunk = (gds_u32)j;
            jb->entry0 = nj - 1;
            jb->nentries = 1;
            if (step) {
                jb->p0 = step->elem;
                jb->p1 = step->block;
            }
            max_in = jb->in_size > max_in ? jb->in_size : max_in;
            max_out = jb->out_size > max_out ? jb->out_size : max_out;
            total_out += jb->out_size;
        }
        if (!nj)
            break;
        CUdeviceptr dj;
        unsigned n32 = (unsigned)nj;
        unsigned code = step ? step_code(step) : 0;
        CUdeviceptr none = 0;
        if (!step) { /* the final copy */
            if (gds_codec_upload_jobs(c, &bm, d, nj, s, &dj, st) < 0)
                goto done;
            void *a[] = {&dj, &none};
            if (gds_codec_launch(c, K_COPY, parts_for(max_out), n32, s, a, st) < 0)
                goto done;
            continue;
        }
        switch (step->kind) {
        case GDS_STEP_FLETCHER32: {
            if (!step->verify)
                break;
            if (gds_codec_upload_jobs(c, &bm, d, nj, s, &dj, st) < 0 ||
                gds_codec_memset_async(c, bm.acc, nj * 3 * 8, s, st) < 0)
                goto done;
            unsigned trailer = 4;
            void *a1[] = {&dj, &none, &bm.acc, &trailer};
            void *a2[] = {&dj, &n32, &bm.acc, &bm.err, &bm.detail, &code};
            if (gds_codec_launch(c, K_FLETCHER_SUM, parts_for(max_in / 2), n32, s, a1, st) < 0 ||
                gds_codec_launch(c, K_FLETCHER_CHECK, blocks_for(nj), 1, s, a2, st) < 0)
                goto done;
            break;
        }
        case GDS_STEP_SHUFFLE: {
            unsigned T = step->elem;
            void *a[] = {&dj, &none, &T};
            if (gds_codec_upload_jobs(c, &bm, d, nj, s, &dj, st) < 0 ||
                gds_codec_launch(c, K_UNSHUFFLE, parts_for(max_in), n32, s, a, st) < 0)
                goto done;
            break;
        }
        case GDS_STEP_BITSHUFFLE: {
            size_t block = step->block ? step->block : gds_bshuf_default_block(step->elem);
            for (size_t i = 0; i < nj; i++) {
                jobs[i].p1 = (gds_u32)block;
                jobs[i].mid = 0;
            }
            void *a[] = {&dj, &none, &bm.err};
            if (gds_codec_upload_jobs(c, &bm, d, nj, s, &dj, st) < 0 ||
                gds_codec_launch(c, K_BITUNSHUFFLE, parts_for(max_out / 8), n32, s, a, st) < 0)
                goto done;
            break;
        }
        case GDS_STEP_DEFLATE:
        case GDS_STEP_ZSTD: {
            bool deflate = step->kind == GDS_STEP_DEFLATE;
            entries_mem_t em;
            size_t split = !x->split ? 0
                           : deflate ? gds_codec_inflate_split_bytes(nj, max_out)
                                     : gds_codec_zstd_blocks_bytes(nj, max_out);
            CUdeviceptr split_at = 0;
            if (gds_codec_nvcomp_decompress(c, step->kind, nj, max_out, total_out, split, &em, &split_at, s, st,
                                            false) < 0 ||
                gds_codec_upload_jobs(c, &bm, d, nj, s, &dj, st) < 0)
                goto done;
            CUdeviceptr din = c->dummies + (deflate ? DUMMY_DEFLATE : DUMMY_ZSTD);
            unsigned long long dlen = deflate ? sizeof gds_codec_dummy_deflate : sizeof gds_codec_dummy_zstd;
            CUdeviceptr scratch = c->dummies + DUMMY_SCRATCH;
            unsigned long long ne = nj;
            if (deflate) {
                void *a[] = {&dj, &em.e, &bm.err, &bm.detail, &code, &din, &dlen, &scratch};
                timed = c->cu->EventRecord(c->inflate_t0, s) == CUDA_SUCCESS;
                timed_split = split != 0;
                t_n = nj, t_stored = max_in, t_expect = max_out;
                if (gds_codec_launch(c, K_ZLIB_PREP, parts_for(max_in), n32, s, a, st) < 0 ||
                    (split && gds_codec_inflate_split(c, dj, nj, max_out, split_at, &em, bm.err, s, st) < 0))
                    goto done;
            }
            else {
                void *a[] = {&dj, &n32, &em.e, &bm.err, &bm.detail, &code, &din, &dlen, &scratch};
                if (gds_codec_launch(c, K_ZSTD_PREP, blocks_for(nj), 1, s, a, st) < 0 ||
                    (split && gds_codec_zstd_blocks(c, dj, nj, max_out, split_at, &em, bm.err, s, st) < 0))
                    goto done;
            }
            void *ac[] = {&dj, &em.e, &ne, &bm.err, &bm.detail, &code};
            if (gds_codec_nvcomp_decompress(c, step->kind, nj, max_out, total_out, 0, &em, NULL, s, st, true) < 0)
                goto done;
            if (deflate && timed)
                timed = c->cu->EventRecord(c->inflate_t1, s) == CUDA_SUCCESS;
            if (gds_codec_launch(c, K_NVCOMP_CHECK, blocks_for(nj), 1, s, ac, st) < 0)
                goto done;
            if (deflate) {
                unsigned which = 0;
                void *a1[] = {&dj, &bm.acc, &which};
                void *a2[] = {&dj, &n32, &bm.acc, &bm.err, &bm.detail, &code};
                if (gds_codec_memset_async(c, bm.acc, nj * 2 * 8, s, st) < 0 ||
                    gds_codec_launch(c, K_ADLER_SUM, parts_for(max_out), n32, s, a1, st) < 0 ||
                    gds_codec_launch(c, K_ADLER_CHECK, blocks_for(nj), 1, s, a2, st) < 0)
                    goto done;
            }
            break;
        }
        case GDS_STEP_BLOSC:
            if (gds_codec_blosc_stage(x, &bm, d, nj, idx, alive, code, st) < 0)
                goto done;
            break;
        case GDS_STEP_LZ4:
        case GDS_STEP_BSHUF_LZ4:
        case GDS_STEP_BSHUF_ZSTD: {
            bool lz4 = step->kind == GDS_STEP_LZ4;
            /* the chunks' headers, read on the host */
            unsigned char *heads;
            if (gds_codec_upload_jobs(c, &bm, d, nj, s, &dj, st) < 0 ||
                gds_codec_read_heads(c, &bm, dj, nj, s, &heads, st) < 0)
                goto done;
            /* plan the blocks; chunks whose header is wrong leave the batch */
            size_t ne = 0, kept = 0, max_block = 0, total = 0;
            for (size_t i = 0; i < nj; i++) {
                gds_kjob_t jb = jobs[i];
                gds_codec_blocks_t b;
                int r = lz4 ? gds_codec_parse_lz4h5(heads + i * GDS_HEAD_BYTES, jb.in_size, jb.out_size, &b)
                            : gds_codec_parse_bshuf(heads + i * GDS_HEAD_BYTES, jb.in_size, jb.out_size, step->elem,
                                                    &b);
                if (r < 0 || b.nblocks > UINT32_MAX || b.block > UINT32_MAX) {
                    gds_codec_record_error(x->errors, idx[jb.chunk],
                                           code | (r < 0 ? (unsigned)b.reason : GDS_KERR_PARAM), b.detail);
                    alive[jb.chunk] = false;
                    continue;
                }
                jb.entry0 = ne;
                jb.nentries = (gds_u32)b.nblocks;
                jb.p0 = lz4 ? 1 : step->elem;
                jb.p1 = (gds_u32)b.block;
                size_t bb = lz4 ? b.block : b.block * step->elem;
                max_block = bb > max_block ? bb : max_block;
                total += jb.out_size;
                ne += b.nblocks;
                jobs[kept++] = jb;
            }
            nj = kept;
            n32 = (unsigned)nj;
            if (!nj)
                break;
            entries_mem_t em;
            CUdeviceptr mid_base = 0;
            if (gds_codec_nvcomp_decompress(c, step->kind, ne, max_block, total, 0, &em, &mid_base, s, st, false) < 0 ||
                gds_codec_upload_jobs(c, &bm, d, nj, s, &dj, st) < 0)
                goto done;
            CUdeviceptr din = c->dummies + (step->kind == GDS_STEP_BSHUF_ZSTD ? DUMMY_ZSTD : DUMMY_LZ4);
            unsigned long long dlen =
                step->kind == GDS_STEP_BSHUF_ZSTD ? sizeof gds_codec_dummy_zstd : sizeof gds_codec_dummy_lz4;
            CUdeviceptr scratch = c->dummies + DUMMY_SCRATCH;
            unsigned long long ne64 = ne;
            if (lz4) {
                void *a[] = {&dj, &n32, &em.e, &bm.err, &bm.detail, &code, &din, &dlen, &scratch};
                if (gds_codec_launch(c, K_LZ4H5_WALK, blocks_for(nj), 1, s, a, st) < 0)
                    goto done;
            }
            else {
                unsigned zstd = step->kind == GDS_STEP_BSHUF_ZSTD;
                void *a[] = {&dj, &n32, &em.e, &bm.tail, &bm.err, &bm.detail, &code, &din, &dlen, &scratch, &zstd};
                if (gds_codec_launch(c, K_BSHUF_WALK, blocks_for(nj), 1, s, a, st) < 0)
                    goto done;
            }
            void *ac[] = {&dj, &em.e, &ne64, &bm.err, &bm.detail, &code};
            if (gds_codec_nvcomp_decompress(c, step->kind, ne, max_block, total, 0, &em, NULL, s, st, true) < 0 ||
                gds_codec_launch(c, K_NVCOMP_CHECK, blocks_for(ne), 1, s, ac, st) < 0)
                goto done;
            if (lz4) {
                void *a[] = {&em.e, &ne64};
                unsigned grid = ne < 65536 ? (unsigned)ne : 65536;
                if (gds_codec_launch(c, K_ENTRY_COPY, grid, 1, s, a, st) < 0)
                    goto done;
            }
            else {
                void *a[] = {&dj, &bm.tail, &bm.err};
                if (gds_codec_launch(c, K_BITUNSHUFFLE, parts_for(max_out / 8), n32, s, a, st) < 0)
                    goto done;
            }
            break;
        }
        }
    }
    /* results */
    {
        CUresult rc;
        uint32_t *err = (uint32_t *)((char *)c->pinned + bm.pin_err);
        uint64_t *detail = (uint64_t *)((char *)c->pinned + bm.pin_detail);
        if ((rc = c->cu->MemcpyDtoHAsync(err, bm.err, m * 4, s)) != CUDA_SUCCESS ||
            (rc = c->cu->MemcpyDtoHAsync(detail, bm.detail, m * 8, s)) != CUDA_SUCCESS) {
            gds_codec_cuda_fail(st, "cuMemcpyDtoHAsync", rc);
            goto done;
        }
        if (gds_codec_sync_stream(c, s, st) < 0)
            goto done;
        float ms = 0; /* not while tracing: its host waits between the kernels would count */
        if (timed && !gds_codec_debug_on() &&
            c->cu->EventElapsedTime(&ms, c->inflate_t0, c->inflate_t1) == CUDA_SUCCESS)
            gds_codec_inflate_learn(&c->inflate, timed_split, t_n, t_stored, t_expect, 1e3 * (double)ms);
        for (size_t j = 0; j < m; j++)
            if (alive[j] && err[j])
                gds_codec_record_error(x->errors, idx[j], err[j], detail[j]);
    }
    ret = 0;
done:
    free(in_sz);
    free(alive);
    return ret;
}

/* Bytes per chunk each arena needs for the group (the largest stored size:
 * max_stored, kept in x). */
static void decode_slots(decode_ctx_t *x, size_t max_stored, size_t *slot)
{
    x->max_stored = max_stored;
    /* the sizes each stage sees, for the largest chunk (fletcher: 4 less) */
    size_t sizes_in[GDS_CODEC_MAX_FILTERS + 1], sizes_out[GDS_CODEC_MAX_FILTERS + 1];
    size_t cur = max_stored;
    for (size_t d = 0; d < x->nsteps; d++) {
        size_t k = x->nsteps - 1 - d;
        const gds_codec_step_t *s = &x->steps[k];
        sizes_in[d] = cur;
        if (s->kind == GDS_STEP_FLETCHER32)
            cur = cur >= 4 ? cur - 4 : 0;
        else if (gds_codec_step_compresses(s->kind))
            cur = x->forward[k];
        sizes_out[d] = cur;
    }
    for (int a = 0; a < NARENAS; a++)
        slot[a] = 0;
    for (size_t d = 0; d < x->nstages; d++) {
        const stage_t *g = &x->stage[d];
        size_t in = g->step ? sizes_in[d] : x->p->chunk_bytes, out = g->step ? sizes_out[d] : x->p->chunk_bytes;
        size_t big = in > out ? in : out;
        if (g->out >= 0)
            slot[g->out] = big > slot[g->out] ? big : slot[g->out];
        if (g->mid >= 0)
            slot[g->mid] = big > slot[g->mid] ? big : slot[g->mid];
    }
    for (int a = 0; a < NARENAS; a++)
        slot[a] = slot[a] ? align_up(slot[a], SLOT_ALIGN) : 0;
}

/* The group's compressor step (NULL: none) and the decoded bytes it yields. */
static const gds_codec_step_t *compressor_of(const decode_ctx_t *x, size_t *expect)
{
    const gds_codec_step_t *comp = NULL;
    *expect = 0;
    for (size_t k = 0; k < x->nsteps; k++)
        if (gds_codec_step_compresses(x->steps[k].kind)) {
            comp = &x->steps[k];
            *expect = x->forward[k];
        }
    return comp;
}

/* The compressed streams (nvCOMP's entries) of one chunk, and their largest
 * decoded size, as the filter's parameters give them: Blosc's are known
 * from its headers only (its small blocks assumed). */
static size_t streams_per_chunk(const gds_codec_step_t *comp, size_t expect, size_t *block_out)
{
    size_t block = expect;
    if (comp && comp->kind == GDS_STEP_LZ4 && comp->block && comp->block < expect)
        block = comp->block;
    else if (comp && comp->kind == GDS_STEP_BLOSC)
        block = expect < 16384 ? expect : 16384;
    else if (comp && (comp->kind == GDS_STEP_BSHUF_LZ4 || comp->kind == GDS_STEP_BSHUF_ZSTD))
        block = (comp->block ? comp->block : gds_bshuf_default_block(comp->elem)) * comp->elem;
    *block_out = block;
    return comp && block ? (expect + block - 1) / block : 1;
}

/* The temporary memory of m chunks of the group (gds_codec_temp_fn):
 * nvCOMP's arrays and its decompressor's scratch. */
static size_t decode_temp(gds_codec_t *c, const void *plan, size_t m)
{
    const decode_ctx_t *x = plan;
    size_t expect, block, temp = 0;
    const gds_codec_step_t *comp = compressor_of(x, &expect);
    size_t nblocks = streams_per_chunk(comp, expect, &block);
    if (comp) {
        gds_nvcomp_deflate_dopts_t dd = {0};
        gds_nvcomp_lz4_dopts_t ld = {0};
        size_t ne = m * nblocks;
        if (step_lz4(comp->kind))
            c->nv->lz4.DecompressGetTempSize(ne, block, ld, &temp, m * expect, NULL);
        else if (step_zstd(comp->kind) || comp->kind == GDS_STEP_BLOSC) /* blosc: zstd's, the larger */
            gds_zstd_decompress_temp(c->nv, ne, block, m * expect, &temp, NULL);
        else
            c->nv->deflate.DecompressGetTempSize(ne, block, dd, &temp, m * expect, NULL);
        temp += ne * (6 * 8 + sizeof(gds_kentry_t));
        if (comp->kind == GDS_STEP_ZSTD) /* beside nvCOMP's */
            temp += gds_codec_zstd_blocks_reserve(m, expect);
    }
    return temp;
}

/* The most chunks (up to n) one sub-batch of the group may hold. */
static size_t widest_batch(gds_codec_t *c, const decode_ctx_t *x, const size_t *slot, size_t n, size_t *per_out,
                           size_t *temp_out)
{
    *per_out = gds_codec_arena_bytes(slot);
    return gds_codec_widest_sub_batch(c, *per_out, n, decode_temp, x, temp_out);
}

/* Chunks per sub-batch: n cut into the fewest sub-batches that fit, all of
 * one size. nvCOMP decodes each Deflate, zstd or single-block LZ4 stream
 * serially, in about the time of one whatever the batch's width (H200,
 * 1 MiB chunks: 64 of them in 77 ms, 1024 in 95, Deflate), so a short
 * last sub-batch costs as long as a full one. */
static size_t decode_batch_size(gds_codec_t *c, decode_ctx_t *x, const size_t *slot, size_t n)
{
    size_t per, temp, m = widest_batch(c, x, slot, n, &per, &temp);
    size_t nb = (n + m - 1) / m;
    m = (n + nb - 1) / nb;
    /* Deflate in segments, decided once for this width (every sub-batch
     * is as wide or narrower) and only where its scratch fits too; zstd
     * block by block the same (its scratch is counted in decode_temp) */
    size_t expect;
    const gds_codec_step_t *comp = compressor_of(x, &expect);
    x->split = comp && comp->kind == GDS_STEP_DEFLATE &&
               m * per + decode_temp(c, x, m) + gds_codec_inflate_split_bytes(m, expect) <= gds_codec_budget(c) &&
               gds_codec_inflate_choose(&c->inflate, m, x->max_stored, expect);
    if (comp && comp->kind == GDS_STEP_ZSTD)
        x->split = gds_codec_zstd_blocks_batch(m, expect) && m * per + decode_temp(c, x, m) <= gds_codec_budget(c);
    if (gds_codec_debug_on() && comp && comp->kind == GDS_STEP_DEFLATE)
        fprintf(stderr, "h5gds codec: Deflate decoder: %s (measured / modelled time: nvCOMP %.2f, segments %.2f)\n",
                x->split ? "segments" : "nvCOMP", c->inflate.scale[0], c->inflate.scale[1]);
    if (gds_codec_debug_on())
        fprintf(stderr, "h5gds codec: decode: %zu chunks in batches of %zu: arenas %zu B/chunk, nvCOMP %zu B\n", n, m,
                per, temp);
    return m;
}

/* Plans the decode of chunks of p stored with every filter applied
 * (mask 0) and at most max_stored bytes each; -1 when p cannot be
 * decoded. */
static int plan_unmasked(const gds_codec_pipeline_t *p, size_t max_stored, decode_ctx_t *x, gds_codec_step_t *steps,
                         size_t *forward, size_t *slot)
{
    char why[300];
    memset(x, 0, sizeof *x);
    x->p = p;
    x->steps = steps;
    x->forward = forward;
    if (!gds_codec_can_decode(p, why, sizeof why) ||
        gds_codec_plan_steps(p, 0, false, steps, &x->nsteps, why, sizeof why) < 0)
        return -1;
    forward[0] = p->chunk_bytes;
    for (size_t k = 0; k < x->nsteps; k++)
        forward[k + 1] =
            forward[k] == GDS_SIZE_UNKNOWN ? GDS_SIZE_UNKNOWN : gds_codec_step_forward(&steps[k], forward[k]);
    decode_stages(x);
    decode_slots(x, max_stored, slot);
    return 0;
}

/* Read batches (gds_codec_read_batch_chunks). Chunks of one stream each
 * (Deflate, zstd, LZ4 in one block; LZ4 in fewer than GDS_CODEC_MANY_STREAMS blocks
 * is counted with them) decode in about one chunk's time up to
 * a thousand side by side: the widest batch the budget holds in one
 * sub-batch. Chunks of GDS_CODEC_MANY_STREAMS or more (bitshuffle's blocks, LZ4 in
 * blocks smaller than the chunk), or of none (shuffle, fletcher32 alone),
 * keep the GPU busy from about FILLING_BYTES decoded on (H200, 1 MiB
 * bitshuffle-LZ4 chunks: 128 in 2.3 ms, 1024 in 12.9): where the input
 * comes fast (the page cache), smaller batches let more of a read overlap
 * its decode (warm 1 GiB reads, H200: 37.3 and 43.7 GB/s in 128 MiB
 * batches, 32.3 and 37.8 in 512, 35.8 and 36.9 in 64); from a disk the
 * widest read fastest (cold: 7-21% slower in 128 MiB batches, even with
 * three read ahead), cut into sub-batches by the codec. Blosc's stage
 * costs about 3 ms a batch whatever its width: from the page cache as many
 * as one sub-batch holds (9-22% faster than two sub-batches), from a disk
 * the widest. Results: bench/results/2026-11-26-h200-batch-widths. */
#define FILLING_BYTES ((size_t)128 << 20)

/* The batch width a planned pipeline wants (gds_codec_read_batch_goal);
 * *one_stream: its chunks are one compressed stream each. */
static size_t read_goal(const decode_ctx_t *x, size_t max_chunks, bool fast_input, bool *one_stream)
{
    size_t expect, block;
    const gds_codec_step_t *comp = compressor_of(x, &expect);
    *one_stream = comp && comp->kind != GDS_STEP_BLOSC && streams_per_chunk(comp, expect, &block) < GDS_CODEC_MANY_STREAMS;
    if (!fast_input || *one_stream || (comp && comp->kind == GDS_STEP_BLOSC))
        return max_chunks;
    size_t fill = FILLING_BYTES / x->p->chunk_bytes;
    return fill == 0 ? 1 : fill < max_chunks ? fill : max_chunks;
}

size_t gds_codec_read_batch_goal(const gds_codec_pipeline_t *p, size_t max_chunks, bool fast_input)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t forward[GDS_CODEC_MAX_FILTERS + 1], slot[NARENAS];
    decode_ctx_t x;
    bool one_stream;
    if (max_chunks == 0)
        max_chunks = 1;
    if (!p || !p->chunk_bytes || plan_unmasked(p, p->chunk_bytes, &x, steps, forward, slot) < 0)
        return max_chunks;
    return read_goal(&x, max_chunks, fast_input, &one_stream);
}

size_t gds_codec_read_batch_chunks(gds_codec_t *c, const gds_codec_pipeline_t *p, size_t max_stored,
                                   size_t max_chunks, bool fast_input)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t forward[GDS_CODEC_MAX_FILTERS + 1], slot[NARENAS], per, temp;
    decode_ctx_t x;
    bool one_stream;
    if (max_chunks == 0)
        max_chunks = 1;
    if (!c || !p || !p->chunk_bytes || plan_unmasked(p, max_stored, &x, steps, forward, slot) < 0)
        return gds_codec_read_batch_goal(p, max_chunks, fast_input);
    x.c = c;
    size_t goal = read_goal(&x, max_chunks, fast_input, &one_stream);
    if (!one_stream && !fast_input)
        return goal; /* from a disk the widest: sub-batches of these decode fast */
    return widest_batch(c, &x, slot, goal, &per, &temp);
}

size_t gds_codec_read_tail_chunks(const gds_codec_pipeline_t *p, size_t max_stored, double mean_stored,
                                  double stored_bytes_per_s, size_t max_chunks)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t forward[GDS_CODEC_MAX_FILTERS + 1], slot[NARENAS], expect, block;
    decode_ctx_t x;
    if (!p || !p->chunk_bytes || max_chunks < 2 || plan_unmasked(p, max_stored, &x, steps, forward, slot) < 0)
        return 0;
    const gds_codec_step_t *comp = compressor_of(&x, &expect);
    if (!comp || comp->kind != GDS_STEP_DEFLATE || expect == GDS_SIZE_UNKNOWN ||
        streams_per_chunk(comp, expect, &block) != 1)
        return 0;
    return gds_codec_inflate_tail_chunks(expect, max_stored, mean_stored, stored_bytes_per_s, max_chunks);
}

static int cmp_mask(const void *a, const void *b, void *chunks)
{
    const gds_codec_chunk_t *ch = chunks;
    unsigned ma = ch[*(const size_t *)a].filter_mask, mb = ch[*(const size_t *)b].filter_mask;
    size_t ia = *(const size_t *)a, ib = *(const size_t *)b;
    return ma != mb ? (ma < mb ? -1 : 1) : (ia < ib ? -1 : ia > ib);
}

/* The filter of this thread's last finding on a chunk (gds_codec_failed_filter). */
static _Thread_local unsigned failed_filter;

unsigned gds_codec_failed_filter(void) { return failed_filter; }

int gds_codec_decode(gds_codec_t *c, const gds_codec_pipeline_t *p, const gds_codec_chunk_t *chunks, size_t n,
                     CUstream stream, size_t *bad, gds_status_t *st)
{
    return gds_codec_decode_findings(c, p, chunks, n, stream, bad, NULL, NULL, NULL, st);
}

/* H5GDS_CODEC_TEST_REDECODE=1 (tests): every failed call reports the
 * other chunks undefined, as after a decompressor's garbage, so that the
 * callers' second decode without the bad chunks runs on valid data. */
static bool redecode_asked(void) { return gds_codec_setting_on(GDS_SET_TEST_REDECODE); }

/* Every chunk found bad, in index order, from the call's per-chunk record. */
static size_t list_findings(const gds_codec_pipeline_t *p, const error_list_t *e, size_t n,
                            gds_codec_finding_t *findings)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (e->code_of[i]) {
            gds_codec_finding_t *f = &findings[k++];
            f->chunk = i;
            f->code = e->code_of[i];
            f->detail = e->detail_of[i];
            f->err = gds_codec_error_errno(p, f->code, f->detail, &f->filter);
        }
    return k;
}

void gds_codec_finding_text(const gds_codec_pipeline_t *p, const gds_codec_finding_t *f, char *buf, size_t size)
{
    gds_codec_error_text(p, f->code, f->detail, buf, size);
}

int gds_codec_decode_findings(gds_codec_t *c, const gds_codec_pipeline_t *p, const gds_codec_chunk_t *chunks,
                              size_t n, CUstream stream, size_t *bad, gds_codec_finding_t *findings, size_t *nfound,
                              bool *others_decoded, gds_status_t *st)
{
    failed_filter = 0;
    if (bad)
        *bad = 0;
    if (nfound)
        *nfound = 0;
    if (others_decoded)
        *others_decoded = true;
    if (!c || !p || (n && !chunks)) {
        gds_status_set(st, 22, "GPU codec: decode without a codec, pipeline or chunks");
        return -1;
    }
    char why[300];
    if (!gds_codec_can_decode(p, why, sizeof why)) {
        gds_status_set(st, 95, "GPU codec: cannot decode: %s", why);
        return -1;
    }
    if (!n)
        return 0;
    size_t *idx = malloc(n * sizeof *idx);
    error_list_t errors = {.first = SIZE_MAX};
    if (findings) {
        errors.code_of = calloc(n, sizeof *errors.code_of);
        errors.detail_of = calloc(n, sizeof *errors.detail_of);
    }
    if (!idx || (findings && (!errors.code_of || !errors.detail_of))) {
        free(idx);
        free(errors.code_of);
        free(errors.detail_of);
        gds_status_set(st, 12, "GPU codec: out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp_mask, (void *)chunks);

    if (!gds_codec_lock_running(c, st)) {
        free(idx);
        free(errors.code_of);
        free(errors.detail_of);
        return -1;
    }
    CUresult rc;
    void *prev = gds_cuda_enter(c->ctx, &rc);
    int ret = 0;
    if (rc != CUDA_SUCCESS)
        ret = gds_codec_cuda_fail(st, "making the codec's context current", rc);
    else
        ret = gds_codec_follow(c, stream, &stream, st);
    for (size_t g0 = 0; ret == 0 && g0 < n;) {
        unsigned mask = chunks[idx[g0]].filter_mask;
        size_t g1 = g0, max_stored = 0;
        while (g1 < n && chunks[idx[g1]].filter_mask == mask) {
            size_t b = chunks[idx[g1]].src_bytes;
            max_stored = b > max_stored ? b : max_stored;
            g1++;
        }
        gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
        size_t forward[GDS_CODEC_MAX_FILTERS + 1];
        decode_ctx_t x = {.c = c, .p = p, .chunks = chunks, .s = stream, .steps = steps, .forward = forward,
                          .errors = &errors};
        if (gds_codec_plan_steps(p, mask, false, steps, &x.nsteps, why, sizeof why) < 0) {
            gds_status_set(st, 95, "GPU codec: cannot decode chunks of filter mask 0x%x: %s", mask, why);
            ret = -1;
            break;
        }
        forward[0] = p->chunk_bytes;
        for (size_t k = 0; k < x.nsteps; k++)
            forward[k + 1] = forward[k] == GDS_SIZE_UNKNOWN ? GDS_SIZE_UNKNOWN
                                                             : gds_codec_step_forward(&steps[k], forward[k]);
        decode_stages(&x);
        size_t slot[NARENAS];
        decode_slots(&x, max_stored, slot);
        size_t m = decode_batch_size(c, &x, slot, g1 - g0);
        for (size_t b = g0; ret == 0 && b < g1;) {
            size_t take = b + m <= g1 ? m : g1 - b;
            ret = decode_batch(&x, idx + b, take, slot, st);
            if (ret < 0 && gds_codec_narrow_after_oom(c, take, st)) {
                size_t narrower = decode_batch_size(c, &x, slot, g1 - b);
                m = narrower < take / 2 ? narrower : take / 2; /* the same chunks again */
                ret = 0;
                continue;
            }
            b += take;
        }
        g0 = g1;
    }
    if (ret == 0 && errors.first != SIZE_MAX) {
        char text[300];
        gds_codec_error_text(p, errors.code, errors.detail, text, sizeof text);
        int err = gds_codec_error_errno(p, errors.code, errors.detail, &failed_filter);
        gds_status_set(st, err, "GPU codec: chunk %zu: %s", errors.first, text);
        if (bad)
            *bad = errors.first;
        if (findings && nfound)
            *nfound = list_findings(p, &errors, n, findings);
        if (others_decoded) /* H5GDS_CODEC_TEST_REDECODE=1: as if garbage (tests of the callers' second decode) */
            *others_decoded = !errors.garbage && !redecode_asked();
        ret = -1;
    }
    else if (ret < 0 && bad)
        *bad = 0;
    if (ret < 0 && st->err == ETIMEDOUT) { /* name the pipeline: the chunk is unknown */
        char names[160] = "", msg[sizeof st->msg];
        for (size_t i = 0, at = 0; i < p->nfilters && at < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? "+" : "",
                                   gds_codec_filter_name(p->filter[i].id));
        snprintf(msg, sizeof msg, "%s", st->msg);
        gds_status_set(st, ETIMEDOUT, "filters %s: %s", names, msg);
    }
    gds_cuda_restore(prev);
    pthread_mutex_unlock(&c->lock);
    free(idx);
    free(errors.code_of);
    free(errors.detail_of);
    return ret;
}
