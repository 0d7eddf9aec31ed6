/*
 * Blosc-1's decode stage (filter 32001): c-blosc 1.x chunks' headers read
 * and checked on the host, the chunks grouped by the compressor their
 * header names (LZ4 or LZ4HC streams, zstd streams, memcpyed), their block
 * tables walked and their streams decoded by nvCOMP on the GPU, then
 * unshuffled into the stage's output. Called by codec_decode.c.
 */
#include "codec_internal.h"

#include <stdlib.h>
#include <string.h>

/* Blosc groups of a stage: chunks of LZ4 streams, of zstd streams, MEMCPYED ones. */
enum { BLOSC_LZ4, BLOSC_ZSTD, BLOSC_COPY, BLOSC_GROUPS };

/* The blosc stage (stage d) of the nj jobs built in pinned job array d:
 * headers read and checked on the host (chunks failing leave the batch),
 * the jobs regrouped by the compressor their header names, per group one
 * walk of the block-start tables and streams, one batched nvCOMP call and
 * the raw streams' copies, then every chunk unshuffled or copied into its
 * output. */
int gds_codec_blosc_stage(decode_ctx_t *x, const batch_mem_t *bm, size_t d, size_t nj, const size_t *idx,
                          bool *alive, unsigned code, gds_status_t *st)
{
    gds_codec_t *c = x->c;
    CUstream s = x->s;
    gds_kjob_t *jobs = gds_codec_pinned_jobs(c, bm, d);
    CUdeviceptr dj;
    unsigned char *heads;
    if (gds_codec_upload_jobs(c, bm, d, nj, s, &dj, st) < 0 || gds_codec_read_heads(c, bm, dj, nj, s, &heads, st) < 0)
        return -1;
    gds_kjob_t *kept = malloc((nj + 1) * sizeof *kept);
    unsigned char *group = malloc(nj + 1);
    if (!kept || !group) {
        free(kept);
        free(group);
        gds_status_set(st, 12, "GPU codec: out of memory");
        return -1;
    }
    size_t count[BLOSC_GROUPS] = {0}, entries[BLOSC_GROUPS] = {0}, max_stream[BLOSC_GROUPS] = {0};
    size_t max_blocks[BLOSC_GROUPS] = {0}, total[BLOSC_GROUPS] = {0}, max_out = 0;
    for (size_t i = 0; i < nj; i++) {
        gds_kjob_t jb = jobs[i];
        gds_codec_blosc_t b;
        int r = gds_codec_parse_blosc(heads + i * GDS_HEAD_BYTES, jb.in_size, jb.out_size, &b);
        if (r < 0 || b.nentries > UINT32_MAX) {
            gds_codec_record_error(x->errors, idx[jb.chunk], code | (r < 0 ? (unsigned)b.reason : GDS_KERR_PARAM),
                                   b.detail);
            alive[jb.chunk] = false;
            group[i] = BLOSC_GROUPS;
            continue;
        }
        int g = b.memcpyed ? BLOSC_COPY : b.format == GDS_BLOSC_FORMAT_LZ4 ? BLOSC_LZ4 : BLOSC_ZSTD;
        group[i] = (unsigned char)g;
        jb.in_size = b.cbytes; /* c-blosc reads nothing past it */
        jb.p0 = b.typesize | (b.flags << 8);
        jb.p1 = (gds_u32)b.blocksize;
        jb.entry0 = entries[g];
        jb.nentries = (gds_u32)b.nentries;
        jobs[i] = jb;
        entries[g] += b.nentries;
        max_stream[g] = b.max_stream > max_stream[g] ? b.max_stream : max_stream[g];
        max_blocks[g] = b.nblocks > max_blocks[g] ? b.nblocks : max_blocks[g];
        total[g] += jb.out_size;
        max_out = jb.out_size > max_out ? jb.out_size : max_out;
        count[g]++;
    }
    size_t first[BLOSC_GROUPS], n = 0;
    for (int g = 0; g < BLOSC_GROUPS; g++) {
        first[g] = n;
        for (size_t i = 0; i < nj; i++)
            if (group[i] == g)
                kept[n++] = jobs[i];
    }
    memcpy(jobs, kept, n * sizeof *kept);
    free(kept);
    free(group);
    if (!n)
        return 0;
    if (gds_codec_upload_jobs(c, bm, d, n, s, &dj, st) < 0)
        return -1;
    CUdeviceptr scratch = c->dummies + DUMMY_SCRATCH;
    for (int g = BLOSC_LZ4; g <= BLOSC_ZSTD; g++) {
        if (!count[g])
            continue;
        bool zstd = g == BLOSC_ZSTD;
        const gds_nvcomp_alignments_t *al = zstd ? &c->zstd_dalign : &c->lz4_dalign;
        if (al->output > 1) { /* streams decode to any byte of a block */
            gds_status_set(st, 95, "GPU codec: nvCOMP (%s) needs %s outputs aligned to %zu bytes: blosc chunks take "
                                   "HDF5's CPU filter", c->nv->path, zstd ? "zstd" : "LZ4", al->output);
            return -1;
        }
        gds_step_kind_t kind = zstd ? GDS_STEP_ZSTD : GDS_STEP_LZ4;
        entries_mem_t em;
        if (gds_codec_nvcomp_decompress(c, kind, entries[g], max_stream[g], total[g], 0, &em, NULL, s, st, false) < 0)
            return -1;
        CUdeviceptr djg = dj + first[g] * sizeof(gds_kjob_t);
        CUdeviceptr din = c->dummies + (zstd ? DUMMY_ZSTD : DUMMY_LZ4);
        unsigned long long dlen = zstd ? sizeof gds_codec_dummy_zstd : sizeof gds_codec_dummy_lz4, ne = entries[g];
        unsigned z = zstd, ng = (unsigned)count[g];
        CUdeviceptr err = bm->err, det = bm->detail;
        void *aw[] = {&djg, &em.e, &err, &det, &code, &din, &dlen, &scratch, &z};
        void *ac[] = {&djg, &em.e, &ne, &err, &det, &code};
        void *ax[] = {&em.e, &ne};
        unsigned grid = ne < 65536 ? (unsigned)ne : 65536;
        if (gds_codec_launch(c, K_BLOSC_WALK, blocks_for(max_blocks[g]), ng, s, aw, st) < 0 ||
            gds_codec_nvcomp_decompress(c, kind, entries[g], max_stream[g], total[g], 0, &em, NULL, s, st, true) < 0 ||
            gds_codec_launch(c, K_NVCOMP_CHECK, blocks_for(ne), 1, s, ac, st) < 0 ||
            gds_codec_launch(c, K_ENTRY_COPY, grid, 1, s, ax, st) < 0)
            return -1;
    }
    CUdeviceptr err = bm->err;
    void *af[] = {&dj, &err};
    return gds_codec_launch(c, K_BLOSC_FINISH, parts_for(max_out), (unsigned)n, s, af, st);
}
