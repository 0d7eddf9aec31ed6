/*
 * The GPU write of a filtered dataset's box of whole chunks: in batches,
 * the chunks encoded on the GPU (from the source in place where a chunk is
 * a contiguous slab of it, else gathered into whole chunks first) and
 * stored with direct chunk writes, the stored bytes going from device
 * memory to the driver untouched. The driver holds those writes
 * (gds_vfd_raw.h) and each batch is written as one engine request while
 * the next ones encode, GDS_HELD_SLOTS batches in flight at most.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gds_filtered_internal.h"
#include "gds_vfd_raw.h"

/* Encoded chunks land max_enc bytes apart in the encode area. */
#define ENCODE_AREA GDS_HELD_SLOTS
_Static_assert(ENCODE_AREA < STORED_BUFFERS, "the encode area and the held slots are stored-bytes buffers");

/* The batch's encoded chunks copied end to end into the slot's buffer, in
 * the order they are stored: HDF5 gives consecutive chunks consecutive
 * file space, so the batch reaches the engine as a few large pieces instead
 * of one small unaligned write per chunk (measured: about half the disk's
 * write rate for 0.3 MB chunks). dst[] is repointed at the packed copies. */
static herr_t pack_batch(read_state_t *s, void **dst, const size_t *bytes, size_t m, unsigned slot)
{
    size_t total = 0;
    for (size_t i = 0; i < m; i++)
        total += bytes[i];
    if (gds_filtered_ensure(s, &s->stored[slot], &s->stored_cap[slot], total, 0, "packed chunks") < 0)
        return -1;
    CUresult rc = CUDA_SUCCESS;
    size_t at = 0;
    for (size_t i = 0; i < m && rc == CUDA_SUCCESS; i++) {
        CUdeviceptr to = s->stored[slot] + at;
        if (bytes[i])
            rc = s->cu->MemcpyAsync(to, (CUdeviceptr)(uintptr_t)dst[i], bytes[i], s->stream);
        dst[i] = (void *)(uintptr_t)to;
        at += bytes[i];
    }
    if (rc == CUDA_SUCCESS)
        rc = s->cu->StreamSynchronize(s->stream); /* the held writes are started unordered */
    else
        (void)s->cu->StreamSynchronize(s->stream);
    if (rc != CUDA_SUCCESS) {
        FILTERED_ERROR(H5E_DATASET, H5E_CANTCOPY, "dataset '%s': packing encoded chunks failed: %s", s->name,
                       gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

/* Encodes the box's chunks [from, to) on the GPU and stores them with
 * direct chunk writes: a chunk that is a contiguous slab of the source is
 * encoded from it in place, the others are gathered into whole chunks
 * first (the part past the dataset's extent holds the fill value, as HDF5
 * pads edge chunks). */
static herr_t encode_batch(read_state_t *s, size_t from, size_t to, size_t max_enc, unsigned slot)
{
    size_t m = to - from, esize = s->pipe.type_size, gathered = 0;
    for (size_t k = from; k < to; k++)
        gathered += !s->chunks[k].in_place;
    /* the encode area holds the largest batch already (gds_filtered_write_all) */
    if (gds_filtered_ensure(s, &s->scratch, &s->scratch_cap, gathered * s->pipe.chunk_bytes, 0, "whole chunks") < 0)
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
    size_t gathered_at = 0;
    for (size_t k = from; ret == 0 && k < to && rc == CUDA_SUCCESS; k++) {
        chunk_t *c = &s->chunks[k];
        dst[k - from] = (void *)(uintptr_t)(s->stored[ENCODE_AREA] + (k - from) * max_enc);
        if (c->in_place) {
            src[k - from] = c->dst;
            continue;
        }
        CUdeviceptr whole = s->scratch + gathered_at++ * s->pipe.chunk_bytes;
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
    double t0 = gds_filtered_seconds_now();
    if (ret == 0 && gds_codec_encode(s->codec, &s->pipe, src, dst, bytes, mask, m, s->stream, &st) < 0) {
        if (st.err == ETIMEDOUT) /* work that never ends may still use the buffers: never freed */
            s->abandoned = true;
        s->out_of_memory = st.err == ENOMEM; /* not even one chunk at a time fitted */
        FILTERED_ERROR(H5E_PLINE, H5E_WRITEERROR, "dataset '%s': GPU compression of %zu chunks failed: %s", s->name,
                       m, st.msg);
        ret = -1;
    }
    s->wstats.encode_s += gds_filtered_seconds_now() - t0; /* the compression alone, not the packing */
    if (ret == 0 && pack_batch(s, dst, bytes, m, slot) < 0)
        ret = -1;
    /* Recorded by the driver's hold, written when the batch is submitted. */
    for (size_t k = from; ret == 0 && k < to; k++) {
        chunk_t *c = &s->chunks[k];
        if (H5Dwrite_chunk(s->dset, H5P_DEFAULT, mask[k - from], c->lo, bytes[k - from], dst[k - from]) < 0) {
            char where[128];
            gds_filtered_chunk_text(&s->box, c->lo, where, sizeof where);
            FILTERED_ERROR(H5E_DATASET, H5E_WRITEERROR, "dataset '%s': storing the chunk at %s failed", s->name,
                           where);
            ret = -1;
            break;
        }
        s->wstats.chunks++;
        s->wstats.stored_bytes += bytes[k - from];
        s->wstats.decoded_bytes += s->pipe.chunk_bytes;
    }
    free(src);
    free(dst);
    free(bytes);
    free(mask);
    return ret;
}

static herr_t held_failed(read_state_t *s, const gds_status_t *st)
{
    FILTERED_ERROR(H5E_DATASET, H5E_WRITEERROR, "dataset '%s': writing stored chunks failed: %s%s%s", s->name,
                   st->msg, st->err ? ": " : "", st->err ? strerror(st->err) : "");
    return -1;
}

/* Batch k is encoded into slot k % GDS_HELD_SLOTS once that slot's
 * previous batch is written, and started as one engine request; the next
 * batches encode while it is written. */
herr_t gds_filtered_write_all(read_state_t *s)
{
    size_t max_enc = gds_codec_max_encoded_bytes(&s->pipe);
    if (max_enc == 0) {
        FILTERED_ERROR(H5E_PLINE, H5E_WRITEERROR, "dataset '%s': the GPU cannot encode this pipeline", s->name);
        return -1;
    }
    /* A thread-safe libhdf5 lets other threads use the file between our
     * H5Dwrite_chunk calls (a flush would write the index before the held
     * chunks): there each chunk is written as it is stored, as HDF5 does. */
    hbool_t threadsafe = 0;
    gds_held_writes_t *held = NULL;
    if (H5is_library_threadsafe(&threadsafe) >= 0 && !threadsafe) {
        held = gds_vfd_hold_writes(s->fid);
        if (!held) {
            FILTERED_ERROR(H5E_DATASET, H5E_WRITEERROR, "dataset '%s': cannot hold the driver's writes", s->name);
            return -1;
        }
    }
    herr_t rc = 0;
    gds_status_t st;
    unsigned slot = 0;
    bool trace = gds_codec_debug_on();
    s->write_batch_chunks = gds_codec_write_batch_chunks(s->codec, &s->pipe, gds_filtered_write_batch_cap(s->pipe.chunk_bytes));
    size_t largest_m = 0;
    for (size_t from = 0, to; from < s->nchunks; from = to) {
        to = gds_filtered_write_batch_end(s, from);
        largest_m = to - from > largest_m ? to - from : largest_m;
    }
    double start = gds_filtered_seconds_now();
    /* The encode area first: where the device is nearly full, the codec
     * can narrow its sub-batches, this buffer cannot shrink. The codec's
     * reservation is not fatal: without it each sub-batch takes what it
     * needs (and narrows when that does not fit). */
    if (gds_filtered_ensure(s, &s->stored[ENCODE_AREA], &s->stored_cap[ENCODE_AREA], largest_m * max_enc, 0,
                            "encoded chunks") < 0)
        rc = -1;
    else
        (void)gds_codec_encode_reserve(s->codec, &s->pipe, largest_m, &st);
    for (size_t from = 0, to; rc == 0 && from < s->nchunks; from = to, slot = (slot + 1) % GDS_HELD_SLOTS) {
        to = gds_filtered_write_batch_end(s, from);
        double t0 = gds_filtered_seconds_now();
        if (gds_vfd_held_wait(held, slot, &st) < 0) {
            rc = held_failed(s, &st);
            break;
        }
        double t1 = gds_filtered_seconds_now(), enc0 = s->wstats.encode_s;
        s->wstats.store_wait_s += t1 - t0;
        uint64_t stored0 = s->wstats.stored_bytes;
        rc = encode_batch(s, from, to, max_enc, slot);
        double t2 = gds_filtered_seconds_now();
        /* Space for what is left, at the ratio so far (a quarter more). */
        double ratio = s->wstats.decoded_bytes ? (double)s->wstats.stored_bytes / (double)s->wstats.decoded_bytes : 1;
        uint64_t ahead = (uint64_t)(1.25 * ratio * (double)((s->nchunks - to) * s->pipe.chunk_bytes));
        if (rc == 0 && gds_vfd_held_submit(held, slot, ahead, &st) < 0)
            rc = held_failed(s, &st);
        if (trace)
            fprintf(stderr,
                    "h5gds write '%s': chunks [%zu, %zu) slot %u at %.1f ms: waited %.1f ms, encoded %.1f ms, "
                    "packed and stored %.1f ms (%llu bytes), submitted %.1f ms\n",
                    s->name, from, to, slot, 1e3 * (t0 - start), 1e3 * (t1 - t0), 1e3 * (s->wstats.encode_s - enc0),
                    1e3 * (t2 - t1 - (s->wstats.encode_s - enc0)),
                    (unsigned long long)(s->wstats.stored_bytes - stored0), 1e3 * (gds_filtered_seconds_now() - t2));
    }
    double t0 = gds_filtered_seconds_now();
    gds_held_counts_t counts;
    gds_vfd_held_get_counts(held, &counts);
    if (gds_vfd_hold_end(held, &st) < 0 && rc == 0) /* after a failure too: nothing in flight uses the slots */
        rc = held_failed(s, &st);
    s->wstats.store_wait_s += gds_filtered_seconds_now() - t0;
    if (trace)
        fprintf(stderr,
                "h5gds write '%s': end waited %.1f ms at %.1f ms; %u requests of %zu pieces, %u metadata writes "
                "waited %.1f ms for held writes%s\n",
                s->name, 1e3 * (gds_filtered_seconds_now() - t0), 1e3 * (gds_filtered_seconds_now() - start),
                counts.submits, counts.pieces, counts.metadata_waits, 1e3 * counts.metadata_wait_s,
                held ? "" : " (nothing held)");
    return rc;
}
