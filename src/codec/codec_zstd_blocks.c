/*
 * zstd frames decoded block by block (zstd_blocks.h) before nvCOMP's
 * serial decoder: whether a batch is, the device memory it takes and its
 * five kernels' launches. Chunks made up leave nvCOMP's batch (their
 * entries become dummies); the others, and corrupt ones, stay in it, so
 * errors are reported as before.
 */
#include "codec_internal.h"
#include "zstd_blocks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nvCOMP decodes each frame serially: 24-31 ms for a batch of 1 MiB
 * chunks, whatever its width. Block by block, a batch takes about one
 * block's serial decode while the GPU has room for its blocks (1 MiB
 * chunks, H100: 14-16 ms for 128 of them), more once it is full (19-23
 * ms for 256, reads 1.1-1.2x nvCOMP's; 36-38 ms for 512, slower):
 * it is taken for chunks of more than one block (128 KiB) in batches of
 * up to BLOCKS_BATCH_MIB decoded (bench/results/2026-11-28-h100-zstd-
 * execute). H5GDS_ZSTD_BLOCKS: 0 never, 1 every batch (tuning, A/B). */
#define BLOCKS_BATCH_MIB 256u

/* The most chunks of `expect` decoded bytes a batch decoded block by block
 * holds: 0 where none is, SIZE_MAX where every one is (H5GDS_ZSTD_BLOCKS). */
static size_t widest_batch(size_t expect)
{
    const char *e = gds_codec_setting(GDS_SET_ZSTD_BLOCKS);
    if (expect >= ZB_SYM || (e && strcmp(e, "0") == 0))
        return 0;
    if (e && strcmp(e, "1") == 0)
        return SIZE_MAX;
    return expect > ZS_BLOCK_MAX ? (size_t)BLOCKS_BATCH_MIB * 1048576 / expect : 0;
}

bool gds_codec_zstd_blocks_batch(size_t n, size_t expect)
{
    size_t most = widest_batch(expect);
    return most && n <= most;
}

/* The device memory a sub-batch of n chunks counts for it: as for the
 * widest batch taken up to n, so that it grows with n (the codec's search
 * for the widest batch that fits relies on that). */
size_t gds_codec_zstd_blocks_reserve(size_t n, size_t expect)
{
    size_t most = widest_batch(expect);
    return gds_codec_zstd_blocks_bytes(n < most ? n : most, expect);
}

/* The chunks' areas, then the count of chunks made up. */
size_t gds_codec_zstd_blocks_bytes(size_t n, size_t expect) { return n ? n * zb_layout(expect).total + 256 : 0; }

int gds_codec_zstd_blocks(gds_codec_t *c, CUdeviceptr jobs, size_t nj, size_t expect, CUdeviceptr mem,
                          const entries_mem_t *em, CUdeviceptr err, CUstream s, gds_status_t *st)
{
    if (!nj)
        return 0;
    zb_layout_t l = zb_layout(expect);
    unsigned long long stride = l.total, ex = expect;
    CUdeviceptr made = mem + nj * l.total;
    unsigned n32 = (unsigned)nj, gx = zb_grid_blocks(expect);
    CUdeviceptr din = c->dummies + DUMMY_ZSTD, scratch = c->dummies + DUMMY_SCRATCH;
    unsigned long long dlen = sizeof gds_codec_dummy_zstd;
    gds_kentries_t e = em->e;
    bool debug = gds_codec_debug_on();
    double t[6] = {0, 0, 0, 0, 0, 0};
    if (debug && gds_codec_trace_wait(c, s, &t[0], st) < 0)
        return -1;
    void *ap[] = {&jobs, &n32, &err, &mem, &stride, &ex};
    void *ad[] = {&jobs, &mem, &stride, &ex};
    void *al[] = {&jobs, &n32, &mem, &stride, &ex};
    void *ar[] = {&jobs, &e, &mem, &stride, &ex, &err, &din, &dlen, &scratch, &made};
    if (gds_codec_memset_async(c, made, sizeof(uint32_t), s, st) < 0 ||
        gds_codec_launch_threads(c, K_ZSTD_PLAN, (n32 + 63) / 64, 1, 64, s, ap, st) < 0 ||
        (debug && gds_codec_trace_wait(c, s, &t[1], st) < 0) ||
        gds_codec_launch_threads(c, K_ZSTD_DECODE, gx, n32, 64, s, ad, st) < 0 ||
        (debug && gds_codec_trace_wait(c, s, &t[2], st) < 0) ||
        gds_codec_launch_threads(c, K_ZSTD_LINK, (n32 + 63) / 64, 1, 64, s, al, st) < 0 ||
        gds_codec_launch_threads(c, K_ZSTD_EXECUTE, gx, n32, 32, s, ad, st) < 0 ||
        (debug && gds_codec_trace_wait(c, s, &t[3], st) < 0) ||
        gds_codec_launch(c, K_ZSTD_RESOLVE, n32, 1, s, ar, st) < 0 ||
        (debug && gds_codec_trace_wait(c, s, &t[4], st) < 0))
        return -1;
    if (debug) {
        uint32_t done = 0;
        if (gds_codec_read_count(c, made, &done, st) < 0)
            return -1;
        fprintf(stderr,
                "h5gds codec: zstd block by block: %u of %zu chunks made up: plan %.1f ms, decode %.1f ms, "
                "execute %.1f ms, resolve %.1f ms\n",
                done, nj, 1e3 * (t[1] - t[0]), 1e3 * (t[2] - t[1]), 1e3 * (t[3] - t[2]), 1e3 * (t[4] - t[3]));
    }
    return 0;
}
