/*
 * The GPU's Blosc-1 encoder run on the host, for the tests without a GPU:
 * the code its kernels share with the host (codec_shared.h, codec_plan.c)
 * driven as codec_encode.c's blosc stage drives them, with liblz4 in
 * nvCOMP's place. test_codec_unit reads its frames back with c-blosc's
 * rules and the GPU decoder's model; test_codec_gpu --fixtures --cpu
 * writes them for h5_fixtures.py verify, which has HDF5 + hdf5plugin's
 * c-blosc read them.
 */
#ifndef H5GDS_BLOSC_ENCODE_MODEL_H
#define H5GDS_BLOSC_ENCODE_MODEL_H

#include "codec_plan.h"
#include "codec_ref.h"
#include "codec_shared.h"

/* The blosc step gds_codec_encode plans for p (blosc alone); false when it
 * would not encode it on the GPU. The model compresses with liblz4 only: a
 * step that compresses with zstd (gds_step_compresses_zstd) is not its. */
static inline bool blosc_encode_step(const gds_codec_pipeline_t *p, gds_codec_step_t *s)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t ns = 0;
    memset(steps, 0, sizeof steps);
    if (gds_codec_plan_steps(p, 0, true, steps, &ns, NULL, 0) < 0 || ns != 1 || steps[0].kind != GDS_STEP_BLOSC)
        return false;
    *s = steps[0];
    return true;
}

/* What the encoder does with a chunk: the job's block size and flags
 * (gds_blosc_encode_*), the blocks shuffled unit by unit
 * (gds_blosc_shuffle_at: codec_blosc_shuffle), the streams
 * (gds_blosc_stream_at: codec_blocks_plan) compressed by liblz4 as nvCOMP's
 * LZ4 would (any LZ4 block; force_raw: stream 0's compressed size made its
 * length, as when LZ4 does not shrink it), the frame (gds_blosc_frame:
 * codec_blosc_layout) and its copies (codec_entry_copy). How it was stored
 * (GDS_BLOSC_STORE_*; *raw = streams stored raw), or -1: liblz4 missing or
 * failing, or a stream or copy outside its buffer (an encoder bug). */
static inline int blosc_encode_model(const gds_codec_step_t *s, const bytes_t *in, bool force_raw, bytes_t *out,
                                     size_t *raw)
{
    size_t n = in->n, bs = gds_blosc_encode_blocksize(s, n), nstreams, longest;
    unsigned flags = gds_blosc_encode_flags(s, bs), ts = s->elem;
    gds_blosc_encode_streams(s, n, &nstreams, &longest);
    bool compress = !gds_blosc_encode_memcpy_only(s, n);
    if (compress && !ref.lz4)
        return -1;
    bool transform = compress && ((s->shuffle == 1 && ts > 1) || s->shuffle == 2);
    unsigned char *mid = transform ? malloc(n) : NULL;
    for (gds_u64 u = 0; transform && u < gds_blosc_shuffle_total(flags, ts, n, bs); u++)
        gds_blosc_shuffle_at(in->p, mid, flags, ts, n, bs, u);
    const unsigned char *streams = transform ? mid : in->p;
    size_t bound = compress ? (size_t)ref.LZ4_compressBound((int)longest) : 0;
    gds_u64 *csize = calloc(nstreams + 1, sizeof *csize), *cptr = calloc(nstreams + 1, sizeof *cptr);
    unsigned char *cbuf = malloc(nstreams * bound + 1);
    gds_u32 ns = gds_blosc_nsplits(flags, ts, bs, 0);
    bool ok = true;
    for (size_t i = 0; ok && compress && i < nstreams; i++) {
        gds_u64 len, blk, off = gds_blosc_stream_at(i, n, bs, ns, &len, &blk);
        ok = len <= longest && off + len <= n && blk * bs <= off;
        int c = ok ? ref.LZ4_compress_default((const char *)streams + off, (char *)cbuf + i * bound, (int)len,
                                              (int)bound)
                   : 0;
        ok = ok && c > 0;
        csize[i] = force_raw && i == 0 ? len : (gds_u64)c;
        cptr[i] = (gds_u64)(uintptr_t)(cbuf + i * bound);
    }
    *out = bytes_new(n + 16);
    memset(out->p, 0xee, n + 16);
    gds_kentry_t *copy = calloc(nstreams + 1, sizeof *copy);
    gds_u32 how = 99;
    gds_u64 total = ok ? gds_blosc_frame(out->p, (gds_u64)(uintptr_t)in->p, (gds_u64)(uintptr_t)streams, n, bs, flags,
                                         ts, compress ? csize : NULL, cptr, nstreams, s->optional, copy, &how)
                       : 0;
    ok = ok && total <= n + 16 && how <= GDS_BLOSC_STORE_SKIPPED;
    *raw = 0;
    for (size_t i = 0; ok && i < nstreams; i++) {
        uintptr_t dst = (uintptr_t)copy[i].copy_dst, at = (uintptr_t)out->p;
        ok = copy[i].flags == GDS_KENTRY_COPY && dst >= at && dst + copy[i].copy_len <= at + total;
        if (ok)
            memcpy((void *)dst, (const void *)(uintptr_t)copy[i].copy_src, copy[i].copy_len);
        *raw += how == GDS_BLOSC_STORE_STREAMS && copy[i].copy_src != cptr[i];
    }
    out->n = total;
    free(copy);
    free(cbuf);
    free(csize);
    free(cptr);
    free(mid);
    return ok ? (int)how : -1;
}

#endif
