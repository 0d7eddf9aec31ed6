/*
 * Write-behind snapshot memory made ready ahead (H5FDgds.h): the public
 * entry points over the engine's preparations (write_behind.h). The
 * engine's threads never call HDF5; failures reach the HDF5 error stack in
 * the caller's thread, here.
 */
#include <errno.h>
#include <stdlib.h>

#include "H5FDgds.h"
#include "gds_error.h"
#include "../cuda/cuda_loader.h"
#include "../engine/write_behind.h"

_Static_assert((int)H5FD_GDS_WB_MEMORY_AUTO == (int)GDS_WB_AUTO && (int)H5FD_GDS_WB_MEMORY_DEVICE == (int)GDS_WB_DEVICE &&
                   (int)H5FD_GDS_WB_MEMORY_HOST == (int)GDS_WB_HOST,
               "write-behind memory kinds");

struct H5FD_gds_snapshot_prep_t {
    gds_wb_prep_t *engine;
};

/* The CUDA context current on the calling thread, or NULL (no CUDA in the
 * process: it has no device memory to snapshot either). */
static void *current_context(void)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    CUcontext ctx = NULL;
    if (cu && cu->CtxGetCurrent(&ctx) != CUDA_SUCCESS)
        ctx = NULL;
    return ctx;
}

/* The engine's failure on the error stack, under the public function's name. */
static void push(const char *func, const gds_status_t *st)
{
    if (st->err == EINVAL)
        gds_error_push(func, __LINE__, H5E_ARGS, H5E_BADVALUE, "%s", st->msg);
    else
        gds_error_push(func, __LINE__, H5E_RESOURCE, H5E_CANTALLOC, "%s", st->msg);
}

/* The driver registered, so that HDF5's termination of it (H5close) joins
 * the preparations and frees the memory. */
static bool driver_ready(void)
{
    return H5FD_gds_init() >= 0;
}

herr_t H5FD_gds_prepare_snapshot_memory(size_t bytes, H5FD_gds_wb_memory_t memory)
{
    gds_api_enter();
    gds_status_t st = {0, ""};
    bool failed = !driver_ready();
    if (!failed && gds_wb_prepare(bytes, (gds_wb_memory_t)memory, current_context(), &st) != 0) {
        push(__func__, &st);
        failed = true;
    }
    return gds_api_leave(failed) ? -1 : 0;
}

H5FD_gds_snapshot_prep_t *H5FD_gds_prepare_snapshot_memory_start(size_t bytes, H5FD_gds_wb_memory_t memory)
{
    gds_api_enter();
    gds_status_t st = {0, ""};
    H5FD_gds_snapshot_prep_t *prep = NULL;
    bool failed = !driver_ready();
    if (!failed && !(prep = calloc(1, sizeof *prep))) {
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a preparation handle");
        failed = true;
    }
    if (!failed && gds_wb_prepare_start(bytes, (gds_wb_memory_t)memory, current_context(), &prep->engine, &st) != 0) {
        push(__func__, &st);
        failed = true;
    }
    if (failed) {
        free(prep);
        prep = NULL;
    }
    gds_api_leave(failed);
    return prep;
}

htri_t H5FD_gds_prepare_snapshot_memory_done(H5FD_gds_snapshot_prep_t *prep)
{
    gds_api_enter();
    if (!prep) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "preparation handle is NULL");
        gds_api_leave(true);
        return -1;
    }
    htri_t done = gds_wb_prepare_done(prep->engine) ? 1 : 0;
    gds_api_leave(false);
    return done;
}

herr_t H5FD_gds_prepare_snapshot_memory_wait(H5FD_gds_snapshot_prep_t *prep)
{
    gds_api_enter();
    if (!prep) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "preparation handle is NULL");
        return gds_api_leave(true) ? -1 : 0;
    }
    gds_status_t st = {0, ""};
    bool failed = gds_wb_prepare_wait(prep->engine, &st) != 0;
    if (failed)
        push(__func__, &st);
    gds_wb_prepare_free(prep->engine);
    free(prep);
    return gds_api_leave(failed) ? -1 : 0;
}

herr_t H5FD_gds_release_snapshot_memory(void)
{
    gds_api_enter();
    gds_wb_release_kept();
    gds_api_leave(false);
    return 0;
}

herr_t H5FD_gds_get_snapshot_memory_info(H5FD_gds_snapshot_memory_info_t *info)
{
    gds_api_enter();
    if (!info) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "info pointer is NULL");
        return gds_api_leave(true) ? -1 : 0;
    }
    gds_wb_memory_info_t in;
    gds_wb_memory_info(&in);
    *info = (H5FD_gds_snapshot_memory_info_t){
        .ready_device_bytes = in.ready_device_bytes,
        .ready_host_bytes = in.ready_host_bytes,
        .ready_host_pinned = in.ready_host_pinned,
        .open_bytes = in.open_bytes,
        .preparing = in.preparing,
        .files_ready = in.files_ready,
        .files_allocated = in.files_allocated,
        .prepared = in.prepared,
    };
    gds_api_leave(false);
    return 0;
}
