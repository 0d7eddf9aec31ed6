/*
 * Chunks the GPU refused in a decode, read by HDF5's own filters one chunk
 * at a time while the GPU's decode of the others stands: the chunks HDF5
 * is the judge of (a corrupt stream in Deflate or Fletcher-32, which HDF5
 * implements and checks itself, as for h5py) and those the GPU cannot
 * decode although their data is fine (a Blosc chunk of a compressor nvCOMP
 * lacks). Any other finding fails the read. Used by GPU reads
 * (gds_filtered_read.c) and the loader's decodes (gds_filtered.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "gds_filtered_internal.h"

static herr_t innermost_entry(unsigned n, const H5E_error2_t *e, void *out)
{
    (void)n;
    char *text = out;
    if (!text[0]) /* walking upward, the first entry is the innermost */
        snprintf(text, 256, "%s(): %s", e->func_name ? e->func_name : "?", e->desc ? e->desc : "?");
    return 0;
}

/* The innermost error of the current HDF5 error stack as "func(): text",
 * the stack cleared. */
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

/* HDF5's own filters read the chunk whose first element is at `lo` (its
 * part inside the dataset's extent) into host memory laid out as a decoded
 * chunk, which goes to `dst` in device memory. -1: HDF5 failed (its
 * innermost error in `why`); -2: the copy to the device failed (why). */
static int hdf5_reads_chunk(const gds_refused_t *r, const hsize_t *lo, void *dst, char *why, size_t why_size)
{
    hsize_t count[H5S_MAX_RANK], zero[H5S_MAX_RANK];
    for (int d = 0; d < r->rank; d++) {
        zero[d] = 0;
        count[d] = lo[d] + r->cdims[d] <= r->dims[d] ? r->cdims[d] : r->dims[d] - lo[d];
    }
    void *host = calloc(1, r->pipe->chunk_bytes); /* an edge chunk's part past the extent: zeros, never placed */
    hid_t ftype = H5I_INVALID_HID, fspace = H5I_INVALID_HID, mspace = H5I_INVALID_HID;
    int ret = -1;
    why[0] = 0;
    H5E_BEGIN_TRY
    {
        if (host && (ftype = H5Dget_type(r->dset)) >= 0 && (fspace = H5Dget_space(r->dset)) >= 0 &&
            (mspace = H5Screate_simple(r->rank, r->cdims, NULL)) >= 0 &&
            H5Sselect_hyperslab(fspace, H5S_SELECT_SET, lo, NULL, count, NULL) >= 0 &&
            H5Sselect_hyperslab(mspace, H5S_SELECT_SET, zero, NULL, count, NULL) >= 0)
            ret = H5Dread(r->dset, ftype, mspace, fspace, r->dxpl, host);
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
        CUresult rc = r->cu->MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, host, r->pipe->chunk_bytes, r->stream);
        if (rc != CUDA_SUCCESS) {
            snprintf(why, why_size, "%s", gds_cuda_error_text(rc));
            ret = -2;
        }
    }
    if (!host) {
        snprintf(why, why_size, "out of host memory for a chunk of %zu bytes", r->pipe->chunk_bytes);
        ret = -2;
    }
    free(host);
    return ret;
}

/* Whether HDF5's filters read a chunk of this finding in the GPU's place. */
static bool hdf5_reads(const gds_codec_finding_t *f)
{
    return f->err == EOPNOTSUPP || gds_filtered_hdf5_judges(f->err, f->filter);
}

herr_t gds_filtered_refused(const gds_refused_t *r, const gds_codec_chunk_t *batch, const hsize_t *const *lo,
                            size_t n, gds_codec_finding_t *found, size_t nfound, bool others_decoded,
                            uint64_t *hdf5_chunks, int *codec_err)
{
    bool *refused = calloc(n, sizeof *refused);
    gds_codec_finding_t *finding_of = malloc(n * sizeof *finding_of); /* a refused chunk's first finding */
    gds_codec_chunk_t *again = malloc(n * sizeof *again);
    size_t *again_at = malloc(n * sizeof *again_at);
    gds_codec_finding_t *more = malloc(n * sizeof *more);
    herr_t ret = 0;
    *codec_err = 0;
    box_t where_box = {.rank = r->rank}; /* for the chunks' coordinates as text */
    if (!refused || !finding_of || !again || !again_at || !more) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a batch of %zu chunks", n);
        ret = -1;
    }
    while (ret == 0) {
        /* Where a decompressor met garbage, another chunk's finding may be
         * its doing: the chunks HDF5 reads leave, and the others are
         * decoded again, their findings then the ones that count. */
        const gds_codec_finding_t *fatal = NULL;
        bool more_refused = false;
        for (size_t i = 0; i < nfound; i++) {
            const gds_codec_finding_t *f = &found[i];
            if (!hdf5_reads(f)) {
                fatal = fatal ? fatal : f;
                continue;
            }
            if (!refused[f->chunk])
                finding_of[f->chunk] = *f, more_refused = true;
            refused[f->chunk] = true;
        }
        if (fatal && (others_decoded || !more_refused)) {
            char where[128], text[300];
            gds_filtered_chunk_text(&where_box, lo[fatal->chunk], where, sizeof where);
            gds_codec_finding_text(r->pipe, fatal, text, sizeof text);
            FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': chunk at %s could not be decoded on the GPU: %s",
                           r->name, where, text);
            ret = -1;
        }
        if (ret < 0 || others_decoded)
            break;
        /* a decompressor met garbage: the others again, without the refused chunks */
        size_t m = 0;
        for (size_t k = 0; k < n; k++)
            if (!refused[k]) {
                again_at[m] = k;
                again[m++] = batch[k];
            }
        gds_status_t st;
        size_t bad = 0;
        if (m == 0 || gds_codec_decode_findings(r->codec, r->pipe, again, m, r->stream, &bad, more, &nfound,
                                                &others_decoded, &st) == 0)
            break;
        if (nfound == 0) { /* not the data's: the codec's own failure */
            *codec_err = st.err;
            FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': decoding a batch again without the chunks it "
                           "refused: %s", r->name, st.msg);
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
        char why[300];
        int got = hdf5_reads_chunk(r, lo[k], batch[k].dst, why, sizeof why);
        if (got < 0) {
            char where[128], text[300];
            gds_filtered_chunk_text(&where_box, lo[k], where, sizeof where);
            gds_codec_finding_text(r->pipe, &finding_of[k], text, sizeof text);
            if (got == -1)
                FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': chunk at %s could not be decoded on the GPU: "
                               "%s; HDF5's own filters failed on it as well: %s", r->name, where, text, why);
            else
                FILTERED_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': chunk at %s, which the GPU refused (%s), "
                               "read by HDF5's filters, could not be placed: %s", r->name, where, text, why);
            ret = -1;
        }
        else if (hdf5_chunks)
            (*hdf5_chunks)++;
    }
    free(refused);
    free(finding_of);
    free(again);
    free(again_at);
    free(more);
    return ret;
}
