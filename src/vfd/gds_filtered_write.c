/*
 * The GPU write of a filtered dataset's box of whole chunks: in batches,
 * the chunks encoded on the GPU (from the source in place where a chunk is
 * a contiguous slab of it, else gathered into whole chunks first) and
 * stored with direct chunk writes, the stored bytes going from device
 * memory to the driver untouched.
 */
#include <errno.h>
#include <stdlib.h>

#include "gds_filtered_internal.h"

/* Encodes the box's chunks [from, to) on the GPU and stores them with
 * direct chunk writes: a chunk that is a contiguous slab of the source is
 * encoded from it in place, the others are gathered into whole chunks
 * first (the part past the dataset's extent holds the fill value, as HDF5
 * pads edge chunks). */
static herr_t encode_batch(read_state_t *s, size_t from, size_t to, size_t max_enc)
{
    size_t m = to - from, esize = s->pipe.type_size, gathered = 0;
    for (size_t k = from; k < to; k++)
        gathered += !s->chunks[k].in_place;
    if (gds_filtered_ensure(s, &s->scratch, &s->scratch_cap, gathered * s->pipe.chunk_bytes, "whole chunks") < 0 ||
        gds_filtered_ensure(s, &s->stored[0], &s->stored_cap[0], m * max_enc, "encoded chunks") < 0)
        return -1;
    const void **src = malloc(m * sizeof *src);
    void **dst = malloc(m * sizeof *dst);
    size_t *bytes = malloc(m * sizeof *bytes);
    unsigned *mask = malloc(m * sizeof *mask);
    herr_t ret = 0;
    if (!src || !dst || !bytes || !mask) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a batch of %zu chunks", m);
        ret = -1;
    }
    CUresult rc = CUDA_SUCCESS;
    size_t slot = 0;
    for (size_t k = from; ret == 0 && k < to && rc == CUDA_SUCCESS; k++) {
        chunk_t *c = &s->chunks[k];
        dst[k - from] = (void *)(uintptr_t)(s->stored[0] + (k - from) * max_enc);
        if (c->in_place) {
            src[k - from] = c->dst;
            continue;
        }
        CUdeviceptr whole = s->scratch + slot++ * s->pipe.chunk_bytes;
        src[k - from] = (const void *)(uintptr_t)whole;
        rc = s->fill ? s->cu->MemcpyAsync(whole, s->fill, s->pipe.chunk_bytes, s->stream)
                     : s->cu->MemsetD8Async(whole, 0, s->pipe.chunk_bytes, s->stream);
        if (rc == CUDA_SUCCESS)
            rc = gds_filtered_copy_box_part(s->cu, &s->box, s->cdims, c->lo, (void *)(uintptr_t)whole, s->out,
                                            esize, true, s->stream);
    }
    if (ret == 0 && rc != CUDA_SUCCESS) {
        FILTERED_ERROR(H5E_DATASET, H5E_CANTCOPY, "dataset '%s': gathering chunks on the GPU failed: %s", s->name,
                       gds_cuda_error_text(rc));
        ret = -1;
    }
    gds_status_t st;
    if (ret == 0 && gds_codec_encode(s->codec, &s->pipe, src, dst, bytes, mask, m, s->stream, &st) < 0) {
        if (st.err == ETIMEDOUT) /* work that never ends may still use the buffers: never freed */
            s->abandoned = true;
        FILTERED_ERROR(H5E_PLINE, H5E_WRITEERROR, "dataset '%s': GPU compression of %zu chunks failed: %s", s->name,
                       m, st.msg);
        ret = -1;
    }
    for (size_t k = from; ret == 0 && k < to; k++) {
        chunk_t *c = &s->chunks[k];
        /* the stored bytes go from device memory to the driver untouched */
        if (H5Dwrite_chunk(s->dset, H5P_DEFAULT, mask[k - from], c->lo, bytes[k - from], dst[k - from]) < 0) {
            char where[128];
            gds_filtered_chunk_text(&s->box, c->lo, where, sizeof where);
            FILTERED_ERROR(H5E_DATASET, H5E_WRITEERROR, "dataset '%s': storing the chunk at %s failed", s->name,
                           where);
            ret = -1;
        }
        s->stats.chunks++;
        s->stats.stored_bytes += bytes[k - from];
        s->stats.decoded_bytes += s->pipe.chunk_bytes;
    }
    free(src);
    free(dst);
    free(bytes);
    free(mask);
    return ret;
}

herr_t gds_filtered_write_all(read_state_t *s)
{
    size_t max_enc = gds_codec_max_encoded_bytes(&s->pipe);
    if (max_enc == 0) {
        FILTERED_ERROR(H5E_PLINE, H5E_WRITEERROR, "dataset '%s': the GPU cannot encode this pipeline", s->name);
        return -1;
    }
    size_t per_batch = gds_filtered_batch_decoded_bytes() / s->pipe.chunk_bytes;
    if (per_batch == 0)
        per_batch = 1;
    for (size_t from = 0; from < s->nchunks; from += per_batch) {
        size_t to = from + per_batch < s->nchunks ? from + per_batch : s->nchunks;
        double t0 = gds_filtered_seconds_now();
        herr_t rc = encode_batch(s, from, to, max_enc);
        s->stats.decode_s += gds_filtered_seconds_now() - t0;
        if (rc < 0)
            return -1;
    }
    return 0;
}
