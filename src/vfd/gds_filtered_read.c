/*
 * The GPU read of a filtered dataset's box, once located: the chunks in
 * batches, the stored bytes of batches k+1 and k+2 read straight into
 * device memory (gds_vfd_submit_raw_read) while batch k decodes on the GPU,
 * each decoded chunk in place in the destination or decoded aside and
 * placed with strided copies, never-written chunks given the fill value.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "gds_filtered_internal.h"
#include "gds_vfd_raw.h"

/* Stored chunks packed back to back: chunks adjacent in the file are then
 * adjacent in memory too, and the engine reads each run of them as one
 * large request (the codecs take any alignment). */
#define STORED_ALIGN 1

/* The bytes a chunk's stored form takes in a stored buffer. */
static size_t packed_bytes(const chunk_t *c)
{
    return ((size_t)c->stored + STORED_ALIGN - 1) / STORED_ALIGN * STORED_ALIGN;
}

/* The stored bytes of chunks [from, to) packed (chunks never written take
 * none), and how many chunks they hold. */
static size_t batch_stored_bytes(const read_state_t *s, size_t from, size_t to, size_t *nstored)
{
    size_t bytes = 0, n = 0;
    for (size_t k = from; k < to; k++)
        if (s->chunks[k].addr != HADDR_UNDEF) {
            bytes += packed_bytes(&s->chunks[k]);
            n++;
        }
    if (nstored)
        *nstored = n;
    return bytes;
}

/* Starts reading the stored bytes of chunks [from, to) into stored buffer
 * `slot`, packed; *submitted: when the read went to the engine (after the
 * buffer's allocation). */
static herr_t start_batch_read(read_state_t *s, size_t from, size_t to, int slot, gds_io_t **io, size_t *nread,
                               double *submitted)
{
    size_t nseg, need = batch_stored_bytes(s, from, to, &nseg);
    *io = NULL;
    *nread = nseg;
    if (nseg == 0)
        return 0;
    if (gds_filtered_ensure(s, &s->stored[slot], &s->stored_cap[slot], need, s->largest_stored, "stored chunks") < 0)
        return -1;
    gds_segment_t *segs = malloc(nseg * sizeof *segs);
    if (!segs) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a read of %zu chunks", nseg);
        return -1;
    }
    size_t at = 0, i = 0;
    for (size_t k = from; k < to; k++) {
        chunk_t *c = &s->chunks[k];
        if (c->addr == HADDR_UNDEF)
            continue;
        segs[i++] = (gds_segment_t){(uint64_t)c->addr, (size_t)c->stored, (void *)(uintptr_t)(s->stored[slot] + at)};
        s->stats.chunks++;
        s->stats.stored_bytes += c->stored;
        s->stats.decoded_bytes += s->pipe.chunk_bytes;
        at += packed_bytes(c);
    }
    gds_status_t st;
    *submitted = gds_filtered_seconds_now();
    int rc = gds_vfd_submit_raw_read(s->fid, segs, nseg, io, &st);
    free(segs);
    if (rc < 0) {
        FILTERED_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': reading %zu stored chunks failed: %s", s->name, nseg,
                  st.msg);
        return -1;
    }
    return 0;
}

/* Decodes chunks [from, to), whose stored bytes are in `slot`, into their
 * places; copies the ones decoded aside and fills the ones never written. */
static herr_t decode_batch(read_state_t *s, size_t from, size_t to, int slot)
{
    size_t esize = s->pipe.type_size, n = 0, aside = 0;
    for (size_t k = from; k < to; k++)
        if (s->chunks[k].addr != HADDR_UNDEF && !s->chunks[k].in_place)
            aside++;
    if (gds_filtered_ensure(s, &s->scratch, &s->scratch_cap, aside * s->pipe.chunk_bytes, 0, "decoded chunks") < 0)
        return -1;
    gds_codec_chunk_t *batch = malloc((to - from) * sizeof *batch);
    size_t *index = malloc((to - from) * sizeof *index);
    gds_codec_finding_t *found = malloc((to - from) * sizeof *found); /* the chunks the decode finds bad */
    const hsize_t **lo = malloc((to - from) * sizeof *lo);              /* each batch chunk's first element */
    if (!batch || !index || !found || !lo) {
        free(batch);
        free(index);
        free(found);
        free(lo);
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a batch of %zu chunks", to - from);
        return -1;
    }
    size_t at = 0, scratch_at = 0;
    for (size_t k = from; k < to; k++) {
        chunk_t *c = &s->chunks[k];
        if (c->addr == HADDR_UNDEF)
            continue;
        if (!c->in_place) {
            c->dst = (void *)(uintptr_t)(s->scratch + scratch_at);
            scratch_at += s->pipe.chunk_bytes;
        }
        batch[n] = (gds_codec_chunk_t){(const void *)(uintptr_t)(s->stored[slot] + at), (size_t)c->stored, c->mask,
                                       c->dst};
        lo[n] = c->lo;
        index[n++] = k;
        at += packed_bytes(c);
    }
    herr_t ret = 0;
    gds_status_t st;
    size_t bad = 0, nfound = 0;
    bool others_decoded = true;
    int decoded = n ? gds_codec_decode_findings(s->codec, &s->pipe, batch, n, s->stream, &bad, found, &nfound,
                                                &others_decoded, &st)
                    : 0;
    if (decoded < 0 && nfound > 0) { /* chunks found bad: HDF5's filters read those that are theirs */
        gds_refused_t r = {s->cu, s->codec, &s->pipe, s->dset, s->dxpl, s->name, s->box.rank, s->dims, s->cdims,
                           s->stream};
        int codec_err = 0;
        ret = gds_filtered_refused(&r, batch, lo, n, found, nfound, others_decoded, &s->stats.hdf5_chunks,
                                   &codec_err);
        s->abandoned = codec_err == ETIMEDOUT;
        s->out_of_memory = codec_err == ENOMEM;
        s->cpu_decode = codec_err == ECANCELED;
    } else if (decoded < 0 && (st.err == EOPNOTSUPP || st.err == ECANCELED)) {
        /* e.g. a blosc chunk compressed with blosclz in a dataset whose
         * parameters name LZ4, or a codec another thread's read stopped:
         * not an error, HDF5's filters read it */
        s->cpu_decode = true;
        ret = -1;
    } else if (decoded < 0 && st.err == ETIMEDOUT) {
        char first[128], last[128];
        gds_filtered_chunk_text(&s->box, s->chunks[from].lo, first, sizeof first);
        gds_filtered_chunk_text(&s->box, s->chunks[to - 1].lo, last, sizeof last);
        s->abandoned = true;
        FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': the batch of chunks %s to %s: %s", s->name, first,
                       last, st.msg);
        free(batch);
        free(index);
        free(found);
        free(lo);
        return -1;
    } else if (decoded < 0) {
        s->out_of_memory = st.err == ENOMEM; /* not even one chunk at a time fitted */
        char where[128] = "?";
        if (bad < n)
            gds_filtered_chunk_text(&s->box, s->chunks[index[bad]].lo, where, sizeof where);
        FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': chunk at %s could not be decoded on the GPU: %s", s->name,
                  where, st.msg);
        ret = -1;
    }
    CUresult rc = CUDA_SUCCESS;
    for (size_t k = from; ret == 0 && k < to && rc == CUDA_SUCCESS; k++) {
        chunk_t *c = &s->chunks[k];
        if (c->addr == HADDR_UNDEF && s->fill)
            rc = gds_filtered_copy_box_part(s->cu, &s->box, s->cdims, c->lo, (void *)(uintptr_t)s->fill, s->out,
                                            esize, false, s->stream);
        else if (c->addr != HADDR_UNDEF && !c->in_place)
            rc = gds_filtered_copy_box_part(s->cu, &s->box, s->cdims, c->lo, c->dst, s->out, esize, false, s->stream);
    }
    if (ret == 0 && rc == CUDA_SUCCESS)
        rc = s->cu->StreamSynchronize(s->stream);
    else
        (void)s->cu->StreamSynchronize(s->stream); /* nothing queued may still use the buffers freed next */
    if (ret == 0 && rc != CUDA_SUCCESS) {
        FILTERED_ERROR(H5E_DATASET, H5E_CANTCOPY, "dataset '%s': placing decoded chunks failed: %s", s->name,
                  gds_cuda_error_text(rc));
        ret = -1;
    }
    free(batch);
    free(index);
    free(found);
    free(lo);
    return ret;
}

static herr_t wait_read(read_state_t *s, gds_io_t *io)
{
    if (!io)
        return 0;
    gds_status_t st;
    double t0 = gds_filtered_seconds_now();
    int rc = gds_io_wait(io, &st);
    s->stats.read_wait_s += gds_filtered_seconds_now() - t0;
    if (rc < 0) {
        FILTERED_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': reading stored chunks failed: %s", s->name, st.msg);
        return -1;
    }
    return 0;
}

/* The largest stored chunk from chunk `from` on. */
static size_t largest_from(const read_state_t *s, size_t from)
{
    size_t most = 0;
    for (size_t k = from; k < s->nchunks; k++)
        if (s->chunks[k].addr != HADDR_UNDEF && s->chunks[k].stored > most)
            most = (size_t)s->chunks[k].stored;
    return most;
}

/* Whether the stored chunks are mostly in the page cache: the middles of
 * the written chunks a quarter, half and three quarters of the way. */
static bool stored_bytes_cached(const read_state_t *s)
{
    size_t written = 0, seen = 0, n = 0;
    uint64_t at[3];
    for (size_t k = 0; k < s->nchunks; k++)
        written += s->chunks[k].addr != HADDR_UNDEF;
    for (size_t k = 0; k < s->nchunks && n < 3; k++) {
        const chunk_t *c = &s->chunks[k];
        if (c->addr == HADDR_UNDEF)
            continue;
        if (seen++ == written * (n + 1) / 4)
            at[n++] = (uint64_t)c->addr + (uint64_t)c->stored / 2;
    }
    return n > 0 && gds_vfd_raw_mostly_cached(s->fid, at, n);
}

/* The batches (gds_filtered_read_batch_end): batches k + 1 .. k + ahead
 * (gds_filtered_read_ahead) are read while batch k decodes, each into a
 * stored-bytes slot of its own. From a disk, the first batch's read gives
 * the disk's rate, and the rest may be cut anew with a last batch that
 * ends the read sooner (gds_filtered_read_tail). */
herr_t gds_filtered_read_all(read_state_t *s)
{
    const int ahead = gds_filtered_read_ahead(), slots = ahead + 1;
    size_t from[STORED_BUFFERS], to[STORED_BUFFERS], nread;
    double submitted[STORED_BUFFERS] = {0};
    gds_io_t *io[STORED_BUFFERS] = {NULL};
    size_t next = 0; /* the first chunk not yet being read */
    int issued = 0, decoded = 0;
    herr_t rc = 0;
    bool trace = gds_codec_debug_on();
    size_t largest = largest_from(s, 0);
    bool cached = stored_bytes_cached(s);
    s->read_batch_chunks = gds_codec_read_batch_chunks(s->codec, &s->pipe, largest,
                                                       gds_filtered_read_batch_cap(s->pipe.chunk_bytes), cached);
    s->recut_from = s->tail_from = 0;
    s->largest_stored = 0;
    for (size_t a = 0, b; a < s->nchunks; a = b) {
        b = gds_filtered_read_batch_end(s, a);
        size_t bytes = batch_stored_bytes(s, a, b, NULL);
        s->largest_stored = bytes > s->largest_stored ? bytes : s->largest_stored;
    }
    double start = gds_filtered_seconds_now();
    while (rc == 0 && issued < ahead && next < s->nchunks) { /* the first `ahead` in flight: decode as they come */
        int k = issued % slots;
        from[k] = next;
        to[k] = next = gds_filtered_read_batch_end(s, next);
        if (start_batch_read(s, from[k], to[k], k, &io[k], &nread, &submitted[k]) < 0)
            rc = -1;
        else
            issued++;
    }
    while (rc == 0 && decoded < issued) {
        int k = decoded % slots;
        double w0 = gds_filtered_seconds_now();
        rc = wait_read(s, io[k]);
        io[k] = NULL;
        if (rc < 0)
            break;
        if (decoded == 0 && next < s->nchunks) {
            size_t nstored, bytes = batch_stored_bytes(s, from[k], to[k], &nstored);
            double secs = gds_filtered_seconds_now() - submitted[k];
            if (gds_filtered_read_tail(s, next, bytes, nstored, largest_from(s, next), secs, cached) && trace)
                fprintf(stderr, "h5gds read '%s': its first batch came at %.2f GB/s: the last batch from chunk %zu\n",
                        s->name, 1e-9 * (double)bytes / secs, s->tail_from);
        }
        if (next < s->nchunks) { /* the slot after the ones in flight is free: the batch `ahead` on */
            int j = issued % slots;
            from[j] = next;
            to[j] = next = gds_filtered_read_batch_end(s, next);
            if (start_batch_read(s, from[j], to[j], j, &io[j], &nread, &submitted[j]) < 0) {
                rc = -1;
                break;
            }
            issued++;
        }
        double t0 = gds_filtered_seconds_now();
        rc = decode_batch(s, from[k], to[k], k);
        double t1 = gds_filtered_seconds_now();
        s->stats.decode_s += t1 - t0;
        decoded++;
        if (trace)
            fprintf(stderr, "h5gds read '%s': chunks [%zu, %zu) at %.1f ms: waited %.1f ms for its read, decoded %.1f ms\n",
                    s->name, from[k], to[k], 1e3 * (w0 - start), 1e3 * (t0 - w0), 1e3 * (t1 - t0));
    }
    for (int k = 0; k < slots; k++) /* after a failure: reads still in flight end before their buffers go */
        if (io[k])
            wait_read(s, io[k]);
    return rc;
}
