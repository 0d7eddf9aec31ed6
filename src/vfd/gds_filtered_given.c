/*
 * Stored chunks the caller read itself (the Python loader's, with chunk
 * addresses it located once), decoded on the GPU into their places, in the
 * background (gds_filtered_decode_chunks_begin / _end).
 *
 * A decode is three parts: its set-up on the caller's thread (the
 * dataset's pipeline, the codec, the batch: HDF5 calls), the codec's work
 * (enqueued on the caller's stream, with the host waits the codec makes
 * for its checks), and its end on the caller's thread (the chunks the GPU
 * refused read by HDF5's filters, the error stack). In the background the
 * middle part runs on a thread of its own, which calls no HDF5 function
 * (libhdf5 may not be thread-safe): the caller's thread is free while the
 * GPU decodes, the loader's batches and the training step go on.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gds_error.h"
#include "gds_filtered.h"
#include "gds_filtered_internal.h"

struct gds_decode_job {
    /* set up on the caller's thread */
    hid_t dset;
    char name[256];
    int rank;
    hsize_t dims[H5S_MAX_RANK], cdims[H5S_MAX_RANK];
    gds_codec_pipeline_t pipe;
    const gds_cuda_api_t *cu;
    gds_codec_t *codec;
    void *context;
    CUstream stream;
    size_t n;
    gds_codec_chunk_t *batch;
    hsize_t *lo_all;        /* n x rank coordinates (NULL: none given) */
    const hsize_t **lo;     /* chunk k's at lo[k] */
    gds_codec_finding_t *found;
    gds_codec_settings_t settings; /* the codec's environment, read here: the thread must not call getenv */
    /* the codec's part (the background thread's, when there is one) */
    CUresult erc;
    int rc;
    size_t bad, nfound;
    bool others_decoded;
    gds_status_t st;
    unsigned failed_filter; /* gds_codec_failed_filter of the thread that decoded */
    pthread_t thread;
    bool threaded;
};

static void job_free(gds_decode_job_t *j)
{
    if (!j)
        return;
    free(j->batch);
    free(j->found);
    free(j->lo);
    free(j->lo_all);
    free(j);
}

/* The set-up: 1 with *out, 0 not taken (nothing done), -1 failed (error stack). */
static int job_prepare(hid_t dset, size_t n, const void *const *src, const size_t *src_bytes, const unsigned *masks,
                       void *const *dst, const hsize_t *chunk_lo, int chunk_rank, void *stream,
                       gds_decode_job_t **out)
{
    *out = NULL;
    gds_decode_job_t *j = calloc(1, sizeof *j);
    if (!j) {
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a decode of %zu chunks", n);
        return -1;
    }
    j->dset = dset;
    j->rank = -1;
    snprintf(j->name, sizeof j->name, "?");
    hid_t dcpl = H5I_INVALID_HID, ftype = H5I_INVALID_HID, space = H5I_INVALID_HID;
    bool described = false;
    H5E_BEGIN_TRY
    {
        H5Iget_name(dset, j->name, sizeof j->name);
        unsigned opts = 0;
        /* partial edge chunks stored unfiltered: HDF5's reads know which */
        if ((dcpl = H5Dget_create_plist(dset)) >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
            H5Pget_chunk_opts(dcpl, &opts) >= 0 && !(opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) &&
            (ftype = H5Dget_type(dset)) >= 0 && (j->rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, j->cdims)) > 0 &&
            (space = H5Dget_space(dset)) >= 0 && H5Sget_simple_extent_dims(space, j->dims, NULL) == j->rank)
            described = gds_filtered_describe_pipeline(dcpl, H5Tget_size(ftype), j->cdims, j->rank, &j->pipe);
    }
    H5E_END_TRY;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (ftype >= 0)
        H5Tclose(ftype);
    if (space >= 0)
        H5Sclose(space);
    if (!described || n == 0 || !gds_codec_can_decode(&j->pipe, NULL, 0)) {
        job_free(j);
        return 0;
    }
    if (chunk_lo && chunk_rank != j->rank) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "dataset '%s': chunk coordinates of rank %d for a dataset of rank %d",
                  j->name, chunk_rank, j->rank);
        job_free(j);
        return -1;
    }
    j->cu = gds_cuda_if_loaded();
    gds_buffer_info_t info;
    gds_classify_buffer(dst[0], &info);
    gds_status_t st;
    if (!j->cu || info.kind != GDS_MEMORY_DEVICE ||
        !(j->codec = gds_filtered_codec_for((CUcontext)info.context, &st)) || gds_codec_stopped(j->codec)) {
        job_free(j);
        return 0;
    }
    j->context = info.context;
    j->stream = (CUstream)stream;
    j->n = n;
    size_t rank = (size_t)j->rank;
    j->batch = malloc(n * sizeof *j->batch);
    if (chunk_lo) {
        j->found = malloc(n * sizeof *j->found);
        j->lo = malloc(n * sizeof *j->lo);
        j->lo_all = malloc(n * rank * sizeof *j->lo_all);
    }
    if (!j->batch || (chunk_lo && (!j->found || !j->lo || !j->lo_all))) {
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "dataset '%s': out of memory for a batch of %zu chunks", j->name, n);
        job_free(j);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        j->batch[i] = (gds_codec_chunk_t){src[i], src_bytes[i], masks ? masks[i] : 0u, dst[i]};
        if (chunk_lo) {
            memcpy(j->lo_all + i * rank, chunk_lo + i * rank, rank * sizeof *j->lo_all);
            j->lo[i] = j->lo_all + i * rank;
        }
    }
    j->bad = n;
    j->others_decoded = true;
    gds_codec_settings_copy(&j->settings);
    *out = j;
    return 1;
}

/* The codec's part: no HDF5 call here (it may run on a thread of its own). */
static void *job_run(void *arg)
{
    gds_decode_job_t *j = arg;
    gds_codec_settings_use(&j->settings);
    void *previous = gds_cuda_enter(j->context, &j->erc);
    j->rc = j->erc == CUDA_SUCCESS ? gds_codec_decode_findings(j->codec, &j->pipe, j->batch, j->n, j->stream, &j->bad,
                                                              j->found, &j->nfound, &j->others_decoded, &j->st)
                                   : -1;
    j->failed_filter = gds_codec_failed_filter();
    gds_cuda_restore(previous);
    gds_codec_settings_use(NULL);
    return NULL;
}

/* The end, on the caller's thread: as gds_filtered_decode_chunks_end
 * returns. Frees the job. */
static int job_finish(gds_decode_job_t *j, size_t *hdf5_chunks)
{
    if (hdf5_chunks)
        *hdf5_chunks = 0;
    gds_filtered_pending.set = false;
    const gds_cuda_api_t *cu = j->cu;
    int refused = 0; /* with the chunks' coordinates: the refused ones read by HDF5 (1), or failed (-1) */
    if (j->rc < 0 && j->erc == CUDA_SUCCESS && j->nfound > 0) {
        CUresult erc;
        void *previous = gds_cuda_enter(j->context, &erc);
        gds_refused_t r = {cu, j->codec, &j->pipe, j->dset, H5P_DEFAULT, j->name, j->rank, j->dims, j->cdims,
                           j->stream};
        uint64_t taken = 0;
        int codec_err = 0;
        if (erc != CUDA_SUCCESS) {
            FILTERED_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': cannot use the buffers' CUDA context: %s",
                           j->name, gds_cuda_error_text(erc));
            refused = -1;
        }
        else
            refused = gds_filtered_refused(&r, j->batch, j->lo, j->n, j->found, j->nfound, j->others_decoded,
                                           &taken, &codec_err) < 0
                          ? -1
                          : 1;
        CUresult sync = erc == CUDA_SUCCESS ? cu->StreamSynchronize(j->stream) : erc; /* the refused chunks' copies */
        if (refused == 1 && sync != CUDA_SUCCESS) {
            FILTERED_ERROR(H5E_DATASET, H5E_CANTCOPY, "dataset '%s': copying the chunks HDF5 read: %s", j->name,
                           gds_cuda_error_text(sync));
            refused = -1;
        }
        if (hdf5_chunks)
            *hdf5_chunks = (size_t)taken;
        if (refused < 0 && (codec_err == EOPNOTSUPP || codec_err == ECANCELED || codec_err == ENOMEM))
            refused = 0, gds_filtered_pending.set = false; /* the codec's own trouble: HDF5 reads them all */
        gds_cuda_restore(previous);
    }
    int ret;
    if (j->rc == 0 || refused == 1)
        ret = 1;
    else if (refused < 0) {
        gds_error_push(gds_filtered_pending.func, gds_filtered_pending.line, gds_filtered_pending.major,
                       gds_filtered_pending.minor, "%s", gds_filtered_pending.msg);
        ret = -1;
    }
    else if (j->nfound > 0) /* chunks found bad, then the codec's own trouble decoding the others again */
        ret = 0;
    /* not decodable here, a stopped codec, or not even one chunk at a time
     * fitted the device's memory: the caller reads them with HDF5's filters */
    else if (j->erc == CUDA_SUCCESS && (j->st.err == EOPNOTSUPP || j->st.err == ECANCELED || j->st.err == ENOMEM))
        ret = 0;
    else if (j->erc == CUDA_SUCCESS && gds_filtered_hdf5_judges(j->st.err, j->failed_filter))
        ret = 0; /* without the chunks' coordinates: the caller's HDF5 read judges them, as for h5py */
    else {
        if (j->erc != CUDA_SUCCESS)
            GDS_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': cannot use the buffers' CUDA context: %s", j->name,
                      gds_cuda_error_text(j->erc));
        else
            GDS_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': chunk %zu of %zu could not be decoded on the GPU: %s",
                      j->name, j->bad, j->n, j->st.msg);
        ret = -1;
    }
    job_free(j);
    return ret;
}

/* H5GDS_DECODE_BACKGROUND=0: the codec's part runs in the begin call, on
 * the caller's thread (what the loader did before; for comparisons). */
static bool in_background(void)
{
    const char *e = getenv("H5GDS_DECODE_BACKGROUND");
    return !(e && strcmp(e, "0") == 0);
}

int gds_filtered_decode_chunks_begin(hid_t dset, size_t n, const void *const *src, const size_t *src_bytes,
                                     const unsigned *masks, void *const *dst, const hsize_t *chunk_lo, int chunk_rank,
                                     void *stream, gds_decode_job_t **job)
{
    if (!job)
        return -1;
    int rc = job_prepare(dset, n, src, src_bytes, masks, dst, chunk_lo, chunk_rank, stream, job);
    if (rc != 1)
        return rc;
    /* Without a thread (none to be had) the decode runs now: the same result, later freedom lost. */
    (*job)->threaded = in_background() && pthread_create(&(*job)->thread, NULL, job_run, *job) == 0;
    if (!(*job)->threaded)
        job_run(*job);
    return 1;
}

int gds_filtered_decode_chunks_end(gds_decode_job_t *job, size_t *hdf5_chunks)
{
    if (hdf5_chunks)
        *hdf5_chunks = 0;
    if (!job) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "no decode begun");
        return -1;
    }
    gds_filtered_decode_chunks_wait(job);
    return job_finish(job, hdf5_chunks);
}

void gds_filtered_decode_chunks_wait(gds_decode_job_t *job)
{
    if (job && job->threaded) {
        pthread_join(job->thread, NULL);
        job->threaded = false;
    }
}
