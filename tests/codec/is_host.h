/*
 * Deflate decoded in segments (src/codec/inflate_split.h) on the host as
 * the codec's kernels run it: each segment's start found, decoded, mended,
 * chained and resolved. For test_inflate_split.c and the libFuzzer target
 * fuzz_inflate_split.c.
 */
#ifndef H5GDS_IS_HOST_H
#define H5GDS_IS_HOST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "inflate_split.h"

typedef struct split_result {
    int made_up;       /* the segments made up the stream */
    uint32_t segments; /* segments tried */
    uint32_t active;   /* with a start found */
    uint64_t end;      /* made up: the bit after the final block */
} split_result_t;

/* A stream's scratch as the kernels have it: the pool of pages, the
 * pages handed out, each segment's list. */
typedef struct scratch {
    uint16_t *pool;
    uint32_t *lists, next, npages;
    ds_work_t w;
} scratch_t;

static void scratch_new(scratch_t *x, size_t expect, uint32_t segments)
{
    x->npages = is_pages(expect, segments);
    x->pool = malloc((size_t)x->npages * IS_PAGE * sizeof *x->pool);
    x->lists = malloc((size_t)segments * x->npages * sizeof *x->lists);
    x->next = 0;
    if (!x->pool || !x->lists) {
        fprintf(stderr, "out of memory for the segments of %zu bytes\n", expect);
        exit(100);
    }
}

/* Each segment's start, as codec_inflate_find finds it. */
static void find_starts(const uint8_t *p, size_t n, is_segment_t *seg, uint32_t segments)
{
    uint8_t lens[320];
    for (uint32_t s = 0; s < segments; s++)
        seg[s].start = s == 0 ? 0 : is_find(p, n, 8 * is_nominal(n, segments, s), 8 * is_nominal(n, segments, s + 1), lens);
}

static void decode_segments(const uint8_t *p, size_t n, is_segment_t *seg, uint32_t segments, scratch_t *x)
{
    for (uint32_t s = 0; s < segments; s = is_next(seg, segments, s)) {
        uint32_t t = is_next(seg, segments, s);
        is_out_t o = {x->pool, &x->next, x->npages, x->lists + (size_t)s * x->npages, 0, 0, NULL};
        is_decode(p, n, seg[s].start, t < segments ? seg[t].start : IS_NO_START, s == 0, &o, &x->w, &seg[s]);
    }
}

/* The segments' decode of the raw stream p[0, n), expected to give
 * `expect` bytes, into out (expect bytes), as the kernels do it. */
static split_result_t split_inflate(const uint8_t *p, size_t n, size_t expect, size_t per, uint8_t *out)
{
    split_result_t r = {0, is_segments(n, per), 0, 0};
    is_segment_t seg[IS_MAX_SEGMENTS];
    ds_u64 at[IS_MAX_SEGMENTS] = {0};
    scratch_t x;
    scratch_new(&x, expect, r.segments);
    find_starts(p, n, seg, r.segments);
    decode_segments(p, n, seg, r.segments, &x);
    is_mend(p, n, seg, r.segments, x.pool, &x.next, x.npages, x.lists, &x.w);
    for (uint32_t s = 0; s < r.segments; s = is_next(seg, r.segments, s)) {
        r.active++;
        r.end = seg[s].end;
    }
    if (is_chain(seg, r.segments, expect, at)) {
        r.made_up = 1;
        for (uint32_t s = 0; s < r.segments && r.made_up; s = is_next(seg, r.segments, s))
            for (uint64_t i = 0; i < seg[s].count && r.made_up; i++)
                if (is_byte(out, at[s], i, is_symbol(x.pool, x.lists + (size_t)s * x.npages, i)) < 0)
                    r.made_up = 0;
    }
    free(x.pool);
    free(x.lists);
    return r;
}

#endif
