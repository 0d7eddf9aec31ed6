/*
 * Deflate chunks decoded in segments side by side (inflate_split.h) before
 * nvCOMP's serial decoder: the device memory it takes and its three
 * kernels' launches. Chunks the segments make up leave nvCOMP's batch (their
 * entries become dummies); the others, and corrupt ones, stay in it, so
 * errors are reported as before.
 */
#include "codec_internal.h"
#include "inflate_split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Compressed bytes per segment: H5GDS_INFLATE_SEGMENT_KIB, else IS_SEGMENT_BYTES. */
static size_t segment_bytes(void)
{
    const char *e = gds_codec_setting(GDS_SET_INFLATE_SEGMENT_KIB);
    long kib = e ? atol(e) : 0;
    return kib > 0 && kib <= 65536 ? (size_t)kib << 10 : IS_SEGMENT_BYTES;
}

typedef struct split_mem {
    size_t segs, next, made, pool, lists, total;
    uint32_t npages;
} split_mem_t;

static split_mem_t split_layout(size_t n, size_t expect)
{
    split_mem_t m;
    size_t off = 0;
    m.npages = is_pages(expect, IS_MAX_SEGMENTS);
    m.segs = gds_codec_carve(&off, n * IS_MAX_SEGMENTS * sizeof(is_segment_t), 256);
    m.next = gds_codec_carve(&off, n * sizeof(uint32_t), 256);
    m.made = gds_codec_carve(&off, sizeof(uint32_t), 256);
    m.pool = gds_codec_carve(&off, n * (size_t)m.npages * IS_PAGE * sizeof(uint16_t), 256);
    m.lists = gds_codec_carve(&off, n * IS_MAX_SEGMENTS * (size_t)m.npages * sizeof(uint32_t), 256);
    m.total = gds_codec_carve(&off, 0, 256);
    return m;
}

/* Whether the segments beat nvCOMP on a batch, by a model of both fitted
 * to H100 measurements (bench/results/2026-11-27-h100-inflate-split and
 * 2026-11-27-h100-inflate-refill): nvCOMP takes about one chunk's serial
 * decode whatever the width, about 0.115 ms per KiB of the largest stored
 * chunk (1 MiB chunks of 0.23, 0.48 and 0.68 MB stored: 28, 60 and
 * 67-78 ms); the segments about 13.5 ms plus 0.125 ms per MiB decoded
 * (1, 32, 128, 256 and 512 chunks: 13-15, 18-20, 29-33, 45-50 and
 * 73-87 ms). The segments are taken where they are expected to take at
 * most 0.9x nvCOMP's time. H5GDS_INFLATE_SPLIT: 0 never, 1 always
 * (tuning, A/B). */
#define NVCOMP_US_PER_KIB 115u
#define SPLIT_US 13500u
#define SPLIT_US_PER_MIB 125u

double gds_codec_inflate_model_us(bool split, size_t n, size_t max_stored, size_t expect)
{
    return split ? SPLIT_US + SPLIT_US_PER_MIB * (double)n * (double)expect / (1024.0 * 1024.0)
                 : NVCOMP_US_PER_KIB * (double)max_stored / 1024.0;
}

/* H5GDS_INFLATE_SPLIT: 0 never (0), 1 always (1), else -1 */
static int split_forced(void)
{
    const char *e = gds_codec_setting(GDS_SET_INFLATE_SPLIT);
    if (e && strcmp(e, "0") == 0)
        return 0;
    if (e && strcmp(e, "1") == 0)
        return 1;
    return -1;
}

bool gds_codec_inflate_split_batch(size_t n, size_t max_stored, size_t expect)
{
    gds_inflate_fit_t unmeasured = {{0, 0}, {0, 0}}; /* the model alone: nothing to try */
    return gds_codec_inflate_choose(&unmeasured, n, max_stored, expect);
}

/* The model was fitted to one GPU and h5py's chunks; other GPUs and data
 * move each side (H200, 256 chunks of 2 MiB, about 1 MiB stored, gzip
 * level 1: the segments 95 ms where the model says 77.5, nvCOMP 128 where
 * it says 124). So each decoder's time is scaled by what this process
 * measured of it on the GPU (measured / modelled, halfway towards each new
 * measurement; kept per codec, so per GPU context). A decoder not yet
 * measured is tried once where the model puts it within 2x of the other's
 * measured time, and a measured one again after EXPLORE_EVERY choices of
 * the other (one choice per decode call and filter mask: its sub-batches
 * all take it), where within 1.25x: a slower call now and then, and the
 * faster decoder on this machine's data where the model picks the wrong
 * one. A read's last batch is still cut by the model alone
 * (gds_codec_inflate_tail_chunks). */
#define EXPLORE_EVERY 32u

bool gds_codec_inflate_choose(gds_inflate_fit_t *fit, size_t n, size_t max_stored, size_t expect)
{
    int forced = split_forced();
    if (forced >= 0)
        return forced == 1;
    double est[2];
    for (int k = 0; k < 2; k++)
        est[k] = gds_codec_inflate_model_us(k == 1, n, max_stored, expect) * (fit->scale[k] > 0 ? fit->scale[k] : 1.0);
    int pick = est[1] <= 0.9 * est[0] ? 1 : 0, other = 1 - pick;
    if (fit->scale[pick] > 0 && ((fit->scale[other] == 0 && est[other] <= 2.0 * est[pick]) ||
                                 (fit->scale[other] > 0 && fit->since[other] >= EXPLORE_EVERY &&
                                  est[other] <= 1.25 * est[pick])))
        pick = other;
    fit->since[pick] = 0;
    fit->since[1 - pick]++;
    return pick == 1;
}

void gds_codec_inflate_learn(gds_inflate_fit_t *fit, bool split, size_t n, size_t max_stored, size_t expect,
                             double us)
{
    double model = gds_codec_inflate_model_us(split, n, max_stored, expect);
    if (!(us > 0) || !(model > 0))
        return;
    double r = us / model, *scale = &fit->scale[split ? 1 : 0];
    *scale = *scale > 0 ? 0.5 * (*scale + r) : r;
}

/* A read from a disk slower than nvCOMP's decode of wide batches ends with
 * one such decode after its last byte (1 MiB float chunks from h5py: 66 ms,
 * H100 or H200). A last batch whose stored bytes take at least that long to
 * come, so that the batch before it has decoded when they are in, and which
 * the segments decode quicker, ends it sooner. Not a chain of narrow
 * batches in segments: each costs the longest zlib block of its chunks,
 * 21-29 ms for h5py's float chunks where the model says 13.5, and a read
 * of those fell behind the disk (bench/results/2026-11-27-h200-read-tail). */
size_t gds_codec_inflate_tail_chunks(size_t expect, size_t max_stored, double mean_stored, double bytes_per_s,
                                     size_t max_chunks)
{
    if (!(bytes_per_s > 0) || !(mean_stored > 0))
        return 0;
    double read_us = 1e6 * mean_stored / bytes_per_s; /* a chunk's stored bytes from the disk */
    double n = NVCOMP_US_PER_KIB * (double)max_stored / 1024.0 / read_us;
    if (!(n < (double)max_chunks))
        return 0;
    size_t chunks = (size_t)n + 1;
    /* the model's choice for that batch, H5GDS_INFLATE_SPLIT's where set (0: no last batch) */
    return chunks < max_chunks && gds_codec_inflate_split_batch(chunks, max_stored, expect) ? chunks : 0;
}

size_t gds_codec_inflate_split_bytes(size_t n, size_t expect) { return n ? split_layout(n, expect).total : 0; }

int gds_codec_inflate_split(gds_codec_t *c, CUdeviceptr jobs, size_t nj, size_t expect, CUdeviceptr mem,
                            const entries_mem_t *em, CUdeviceptr err, CUstream s, gds_status_t *st)
{
    if (!nj)
        return 0;
    split_mem_t m = split_layout(nj, expect);
    CUdeviceptr segs = mem + m.segs, next = mem + m.next, made = mem + m.made, pool = mem + m.pool,
                lists = mem + m.lists;
    unsigned long long per = segment_bytes();
    unsigned npages = m.npages, n32 = (unsigned)nj;
    CUdeviceptr din = c->dummies + DUMMY_DEFLATE, scratch = c->dummies + DUMMY_SCRATCH;
    unsigned long long dlen = sizeof gds_codec_dummy_deflate;
    gds_kentries_t e = em->e;
    bool debug = gds_codec_debug_on();
    /* the trace times each kernel alone: it waits for the stream before and after each */
    double t[4] = {0, 0, 0, 0};
    if (debug && gds_codec_trace_wait(c, s, &t[0], st) < 0)
        return -1;
    void *af[] = {&jobs, &segs, &next, &per};
    void *ad[] = {&jobs, &segs, &next, &pool, &lists, &npages, &per};
    void *ar[] = {&jobs, &e, &segs, &pool, &lists, &npages, &per, &err, &din, &dlen, &scratch, &made};
    if (gds_codec_memset_async(c, made, sizeof(uint32_t), s, st) < 0 ||
        gds_codec_launch_threads(c, K_INFLATE_FIND, IS_MAX_SEGMENTS / GDS_INFLATE_WARPS, n32,
                                 32 * GDS_INFLATE_WARPS, s, af, st) < 0 ||
        (debug && gds_codec_trace_wait(c, s, &t[1], st) < 0) ||
        gds_codec_launch_threads(c, K_INFLATE_SEGMENTS, IS_MAX_SEGMENTS / GDS_INFLATE_WARPS, n32,
                                 32 * GDS_INFLATE_WARPS, s, ad, st) < 0 ||
        gds_codec_launch_threads(c, K_INFLATE_MEND, n32, 1, 32, s, ad, st) < 0 ||
        (debug && gds_codec_trace_wait(c, s, &t[2], st) < 0) ||
        gds_codec_launch(c, K_INFLATE_RESOLVE, n32, 1, s, ar, st) < 0 ||
        (debug && gds_codec_trace_wait(c, s, &t[3], st) < 0))
        return -1;
    if (debug) {
        uint32_t done = 0;
        if (gds_codec_read_count(c, made, &done, st) < 0)
            return -1;
        fprintf(stderr,
                "h5gds codec: Deflate in segments: %u of %zu chunks made up (%zu KiB a segment): find %.1f ms, "
                "decode and mend %.1f ms, resolve %.1f ms\n",
                done, nj, (size_t)(per >> 10), 1e3 * (t[1] - t[0]), 1e3 * (t[2] - t[1]), 1e3 * (t[3] - t[2]));
    }
    return 0;
}
