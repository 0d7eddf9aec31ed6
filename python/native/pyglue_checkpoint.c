/*
 * The Python package's checkpoint glue around write-behind, called through
 * ctypes: the engine file of an HDF5 file and its sync (drain + fsync), the
 * write-behind counters of a file, and snapshot memory made ready ahead of
 * the first save (h5gds.prepare_checkpoint). Saving the leaves themselves:
 * pyglue_save.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "H5FDgds.h"
#include "engine.h"
#include "write_behind.h"
#include "gds_hdf5.h"
#include "pyglue_common.h"

/* ---- checkpoints: waiting for an HDF5 file's background writes ----
 * The engine file is taken under h5py's lock (an HDF5 call); the wait and
 * the fsync then run without it, and without the GIL (ctypes releases it),
 * so a training loop goes on while a checkpoint drains. */

API void *h5gds_py_engine_of(int64_t file_id)
{
    return gds_vfd_engine_of((hid_t)file_id);
}

API int h5gds_py_sync(void *engine, char *err, size_t errlen)
{
    gds_status_t st;
    if (gds_file_sync((gds_file_t *)engine, &st) == 0)
        return 0;
    char msg[512];
    snprintf(msg, sizeof msg, "%s%s%s", st.msg, st.err ? ": " : "", st.err ? strerror(st.err) : "");
    put_error(err, errlen, msg);
    return -1;
}

/* Write-behind counters of an HDF5 file: snapshots, bytes, waits, peak
 * snapshot bytes, snapshot memory held, failures, background writes in
 * flight at most, busy workers at most, stream-ordered snapshots, bytes
 * reserved ahead. */
API int h5gds_py_wb_stats(int64_t file_id, uint64_t out[10])
{
    H5FD_gds_stats_t st;
    if (H5FD_gds_get_stats((hid_t)file_id, &st) < 0)
        return -1;
    out[0] = st.wb_snapshots;
    out[1] = st.wb_bytes;
    out[2] = st.wb_waits;
    out[3] = st.wb_peak_bytes;
    out[4] = st.wb_memory_bytes;
    out[5] = st.wb_failures;
    out[6] = st.wb_peak_pending;
    out[7] = st.workers_peak;
    out[8] = st.wb_stream_ordered;
    out[9] = st.reserved_bytes;
    return 0;
}

/* ---- checkpoints: snapshot memory made ready ahead ----
 * h5gds.prepare_checkpoint calls the engine's preparations directly: no
 * HDF5 call, so no h5py lock is needed and the wait runs without the GIL;
 * the preparation's thread never touches HDF5. The memory is of the
 * context of `like` (a device pointer of the state, when given), else of
 * the calling thread's current context, as the save's first snapshot will
 * ask for it. */

API int h5gds_py_prepare_start(uint64_t bytes, int kind, const void *like, void **out, char *err, size_t errlen)
{
    *out = NULL;
    void *ctx = NULL;
    gds_buffer_info_t info;
    if (like && gds_classify_buffer(like, &info) && !gds_memory_is_host(info.kind))
        ctx = info.context;
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!ctx && cu && cu->CtxGetCurrent((CUcontext *)&ctx) != CUDA_SUCCESS)
        ctx = NULL;
    gds_status_t st = {0, ""};
    gds_wb_prep_t *prep = NULL;
    if (gds_wb_prepare_start((size_t)bytes, (gds_wb_memory_t)kind, ctx, &prep, &st) != 0) {
        put_error(err, errlen, st.msg);
        return st.err ? -st.err : -EIO;
    }
    *out = prep;
    return 0;
}

API int h5gds_py_prepare_done(void *prep)
{
    return gds_wb_prepare_done(prep) ? 1 : 0;
}

/* 0, or a negative errno with what failed (asked again: the same answer). */
API int h5gds_py_prepare_wait(void *prep, char *err, size_t errlen)
{
    gds_status_t st = {0, ""};
    if (gds_wb_prepare_wait(prep, &st) == 0)
        return 0;
    put_error(err, errlen, st.msg);
    return st.err ? -st.err : -EIO;
}

API void h5gds_py_prepare_free(void *prep)
{
    gds_wb_prepare_free(prep);
}

API void h5gds_py_release_snapshot_memory(void)
{
    gds_wb_release_kept();
}

/* Ready device bytes, ready host bytes, host pinned, bytes open files hold,
 * preparations running, files that found their memory ready, files that
 * allocated theirs, allocations made by preparations. */
API void h5gds_py_snapshot_memory_info(uint64_t out[8])
{
    gds_wb_memory_info_t in;
    gds_wb_memory_info(&in);
    out[0] = in.ready_device_bytes;
    out[1] = in.ready_host_bytes;
    out[2] = in.ready_host_pinned;
    out[3] = in.open_bytes;
    out[4] = in.preparing;
    out[5] = in.files_ready;
    out[6] = in.files_allocated;
    out[7] = in.prepared;
}
