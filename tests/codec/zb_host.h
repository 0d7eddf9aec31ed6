/*
 * The zstd block decoder's five steps (src/codec/zstd_blocks.h) run on the
 * host as the kernels run them: for test_zstd_blocks.c and the libFuzzer
 * target fuzz_zstd_blocks.c. One lane does each step, or, built with
 * ZB_SIMULATED_LANES, the offsets and the execution run on a warp of 32
 * simulated lanes (zb_lanes.h; then check.h first, for CHECK_MSG).
 */
#ifndef H5GDS_ZB_HOST_H
#define H5GDS_ZB_HOST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zstd_blocks.h"
#ifdef ZB_SIMULATED_LANES
#include "zb_lanes.h"

typedef struct zb_execute_args {
    const uint8_t *frame;
    zb_block_t *b;
    const uint8_t *lits;
    const zb_seq_t *seqs;
    uint8_t *out;
    uint32_t *refs;
} zb_execute_args_t;

static void zb_execute_lane(unsigned lane, void *arg)
{
    zb_execute_args_t *a = arg;
    zb_execute(a->frame, a->b, a->lits, a->seqs, a->out, a->refs, lane, ZB_SIM_LANES);
}

typedef struct zb_offsets_args {
    zb_block_t *b;
    zb_seq_t *seqs;
} zb_offsets_args_t;

static void zb_offsets_lane(unsigned lane, void *arg)
{
    zb_offsets_args_t *a = arg;
    zb_offsets(a->b, a->seqs, lane, ZB_SIM_LANES);
}
#endif

/* What a frame decoded to, for a caller that counts its blocks' kinds. */
typedef void (*zb_host_seen_fn)(const zb_chunk_t *ch, const zb_block_t *blk, const zb_seq_t *seqs,
                                const uint32_t *refs, void *arg);

/* The kernels' five steps on the host: 0 and out[0 .. expect) when the
 * frame was taken (then seen(...) where given), else -1 (left to nvCOMP). */
static int zb_host_decode(const uint8_t *frame, size_t n, size_t expect, uint8_t *out, zb_host_seen_fn seen,
                          void *arg)
{
    zb_layout_t l = zb_layout(expect);
    uint8_t *mem = calloc(1, l.total);
    if (!mem) {
        fprintf(stderr, "out of memory for a frame of %zu bytes\n", expect);
        exit(100);
    }
    zb_chunk_t *ch = (zb_chunk_t *)mem;
    zb_block_t *blk = (zb_block_t *)(mem + l.blocks);
    uint8_t *lits = mem + l.lits;
    zb_seq_t *seqs = (zb_seq_t *)(mem + l.seqs);
    uint32_t *refs = (uint32_t *)(mem + l.refs);
    /* a kernel's shared memory holds what the block before left: the same
     * poison each frame, so that nothing can rest on an earlier frame's */
    static zb_work_t w;
    memset(&w, 0xA5, sizeof w);
    int r = zb_plan(frame, n, expect, blk, ch);
    if (r == 0) {
        for (uint32_t k = 0; k < ch->nblocks; k++) {
            zb_decode(frame, &blk[k], lits, seqs, &w, 0, 1);
#ifdef ZB_SIMULATED_LANES
            zb_offsets_args_t a = {&blk[k], seqs};
            CHECK_MSG(zb_sim_run(zb_offsets_lane, &a) == 0,
                      "block %u: the offsets' lanes did not pass the same barriers", k);
#else
            zb_offsets(&blk[k], seqs, 0, 1);
#endif
        }
        r = zb_link(blk, ch, expect);
    }
    if (r == 0) {
        for (uint32_t k = 0; k < ch->nblocks; k++) {
#ifdef ZB_SIMULATED_LANES
            zb_execute_args_t a = {frame, &blk[k], lits, seqs, out, refs};
            CHECK_MSG(zb_sim_run(zb_execute_lane, &a) == 0, "block %u: the lanes did not pass the same barriers", k);
#else
            zb_execute(frame, &blk[k], lits, seqs, out, refs, 0, 1);
#endif
        }
        for (uint32_t k = 0; k < ch->nblocks; k++)
            r |= blk[k].bad ? -1 : 0;
    }
    if (r == 0) {
        for (uint32_t k = 0; k < ch->nblocks; k++)
            zb_resolve(&blk[k], out, refs, 0, 1);
        if (seen)
            seen(ch, blk, seqs, refs, arg);
    }
    free(mem);
    return r;
}

#endif
