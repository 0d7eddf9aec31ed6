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

/* The innermost error of the current HDF5 error stack as "func(): text"
 * (empty if none), the stack cleared. */
static void innermost_hdf5_error(char *out, size_t size);

/* HDF5's own filters read chunk c (its part inside the dataset's extent)
 * into host memory laid out as a decoded chunk, which goes to c->dst:
 * for a chunk the GPU refused. HDF5's innermost error in `why` if it
 * fails. */
static herr_t hdf5_reads_chunk(read_state_t *s, const chunk_t *c, char *why, size_t why_size)
{
    int r = s->box.rank;
    hsize_t count[H5S_MAX_RANK], zero[H5S_MAX_RANK];
    for (int d = 0; d < r; d++) {
        zero[d] = 0;
        count[d] = c->lo[d] + s->cdims[d] <= s->dims[d] ? s->cdims[d] : s->dims[d] - c->lo[d];
    }
    void *host = malloc(s->pipe.chunk_bytes);
    hid_t ftype = H5I_INVALID_HID, fspace = H5I_INVALID_HID, mspace = H5I_INVALID_HID;
    herr_t ret = -1;
    why[0] = 0;
    H5E_BEGIN_TRY
    {
        if (host && (ftype = H5Dget_type(s->dset)) >= 0 && (fspace = H5Dget_space(s->dset)) >= 0 &&
            (mspace = H5Screate_simple(r, s->cdims, NULL)) >= 0 &&
            H5Sselect_hyperslab(fspace, H5S_SELECT_SET, c->lo, NULL, count, NULL) >= 0 &&
            H5Sselect_hyperslab(mspace, H5S_SELECT_SET, zero, NULL, count, NULL) >= 0)
            ret = H5Dread(s->dset, ftype, mspace, fspace, s->dxpl, host);
    }
    H5E_END_TRY;
    if (ret < 0)
        innermost_hdf5_error(why, why_size);
    if (ftype >= 0)
        H5Tclose(ftype);
    if (fspace >= 0)
        H5Sclose(fspace);
    if (mspace >= 0)
        H5Sclose(mspace);
    if (ret == 0) { /* from pageable memory: returns once the bytes are staged, so `host` may go */
        CUresult rc = s->cu->MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)c->dst, host, s->pipe.chunk_bytes, s->stream);
        if (rc != CUDA_SUCCESS) {
            snprintf(why, why_size, "copying it to the device: %s", gds_cuda_error_text(rc));
            ret = -1;
        }
    }
    if (!host)
        snprintf(why, why_size, "out of host memory");
    free(host);
    return ret;
}

static herr_t innermost_entry(unsigned n, const H5E_error2_t *e, void *out)
{
    (void)n;
    char *text = out;
    if (!text[0]) /* walking upward, the first entry is the innermost */
        snprintf(text, 256, "%s(): %s", e->func_name ? e->func_name : "?", e->desc ? e->desc : "?");
    return 0;
}

static void innermost_hdf5_error(char *out, size_t size)
{
    char text[256] = "";
    hid_t stack = H5Eget_current_stack();
    if (stack >= 0) {
        H5Ewalk2(stack, H5E_WALK_UPWARD, innermost_entry, text);
        H5Eclose_stack(stack);
    }
    snprintf(out, size, "%s", text[0] ? text : "no error recorded");
}

/* The chunks the GPU refused in a batch (findings, indices into the batch
 * `batch` of n, whose chunk k is s->chunks[index[k]]): a finding HDF5 is
 * the judge of (a corrupt stream in Deflate or Fletcher-32:
 * gds_filtered_hdf5_judges) or a chunk the GPU cannot decode although its
 * data is fine (EOPNOTSUPP) is read by HDF5's filters, that chunk alone;
 * any other finding (a wrong size, a plugin filter's finding) fails the
 * read. Where the decoder met garbage the other chunks are decoded again
 * without the refused ones first. 0: every chunk of the batch is in place;
 * -1: failed (FILTERED_ERROR set, naming the chunk and both findings). */
static herr_t refused_chunks(read_state_t *s, const gds_codec_chunk_t *batch, const size_t *index, size_t n,
                             gds_codec_finding_t *found, size_t nfound, bool others_decoded)
{
    bool *refused = calloc(n, sizeof *refused);
    gds_codec_finding_t *finding_of = malloc(n * sizeof *finding_of); /* a refused chunk's first finding */
    gds_codec_chunk_t *again = malloc(n * sizeof *again);
    size_t *again_at = malloc(n * sizeof *again_at);
    gds_codec_finding_t *more = malloc(n * sizeof *more);
    herr_t ret = 0;
    if (!refused || !finding_of || !again || !again_at || !more) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a batch of %zu chunks", n);
        ret = -1;
    }
    while (ret == 0) {
        for (size_t i = 0; i < nfound; i++) {
            const gds_codec_finding_t *f = &found[i];
            if (f->err != EOPNOTSUPP && !gds_filtered_hdf5_judges(f->err, f->filter)) {
                char where[128], text[300];
                gds_filtered_chunk_text(&s->box, s->chunks[index[f->chunk]].lo, where, sizeof where);
                gds_codec_finding_text(&s->pipe, f, text, sizeof text);
                FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': chunk at %s could not be decoded on the GPU: %s",
                               s->name, where, text);
                ret = -1;
                break;
            }
            if (!refused[f->chunk])
                finding_of[f->chunk] = *f;
            refused[f->chunk] = true;
        }
        if (ret < 0 || others_decoded)
            break;
        /* the others again, without the refused chunks */
        size_t m = 0;
        for (size_t k = 0; k < n; k++)
            if (!refused[k]) {
                again_at[m] = k;
                again[m++] = batch[k];
            }
        gds_status_t st;
        size_t bad = 0;
        if (m == 0 || gds_codec_decode_findings(s->codec, &s->pipe, again, m, s->stream, &bad, more, &nfound,
                                                &others_decoded, &st) == 0)
            break;
        if (nfound == 0) { /* not the data's: the codec's own failure */
            s->abandoned = st.err == ETIMEDOUT;
            s->out_of_memory = st.err == ENOMEM;
            s->cpu_decode = st.err == ECANCELED;
            FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': decoding a batch again without the chunks it "
                           "refused: %s", s->name, st.msg);
            ret = -1;
            break;
        }
        for (size_t i = 0; i < nfound; i++) {
            found[i] = more[i];
            found[i].chunk = again_at[more[i].chunk];
        }
    }
    for (size_t k = 0; ret == 0 && k < n; k++) {
        if (!refused[k])
            continue;
        const chunk_t *c = &s->chunks[index[k]];
        char why[300];
        if (hdf5_reads_chunk(s, c, why, sizeof why) < 0) {
            char where[128], text[300];
            gds_filtered_chunk_text(&s->box, c->lo, where, sizeof where);
            gds_codec_finding_text(&s->pipe, &finding_of[k], text, sizeof text);
            FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': chunk at %s could not be decoded on the GPU: %s; "
                           "HDF5's own filters failed on it as well: %s", s->name, where, text, why);
            ret = -1;
        }
        else
            s->stats.hdf5_chunks++;
    }
    free(refused);
    free(finding_of);
    free(again);
    free(again_at);
    free(more);
    return ret;
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
    if (!batch || !index) {
        free(batch);
        free(index);
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
        index[n++] = k;
        at += packed_bytes(c);
    }
    herr_t ret = 0;
    gds_status_t st;
    size_t bad = 0, nfound = 0;
    bool others_decoded = true;
    gds_codec_finding_t *found = n ? malloc(n * sizeof *found) : NULL;
    int decoded = 0;
    if (n && !found) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a batch of %zu chunks", n);
        decoded = -1;
        st.err = ENOMEM;
    }
    else if (n)
        decoded = gds_codec_decode_findings(s->codec, &s->pipe, batch, n, s->stream, &bad, found, &nfound,
                                            &others_decoded, &st);
    if (decoded < 0 && nfound > 0) { /* chunks found bad: HDF5's filters read those that are theirs */
        ret = refused_chunks(s, batch, index, n, found, nfound, others_decoded);
    } else if (!found && n) {
        ret = -1;
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
    bool trace = gds_filtered_trace_on();
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
