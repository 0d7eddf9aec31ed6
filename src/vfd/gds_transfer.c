/*
 * Between the HDF5 glue and the engine: the transfer property that says how
 * device buffers are ordered against the application's streams, HDF5's
 * memory-copy requests (ctl), and the translation of the engine's
 * statistics and enums into the public ones.
 */
#include <string.h>

#include "H5FDgds.h"
#include "gds_error.h"
#include "gds_transfer.h"
#include "../cuda/cuda_loader.h"

/* The engine has its own enums; the public ones must keep the same values. */
_Static_assert((int)H5FD_GDS_MODE_AUTO == (int)GDS_MODE_AUTO && (int)H5FD_GDS_MODE_POSIX == (int)GDS_MODE_POSIX,
               "mode values");
_Static_assert((int)H5FD_GDS_OFF == (int)GDS_OFF && (int)H5FD_GDS_SWITCH_AUTO == (int)GDS_AUTO, "switch values");
_Static_assert((int)H5FD_GDS_MEMORY_MANAGED == (int)GDS_MEMORY_MANAGED, "memory kinds");
_Static_assert((int)H5FD_GDS_ROUTE_POSIX_BOUNCE == (int)GDS_ROUTE_POSIX_BOUNCE && GDS_NROUTES <= H5FD_GDS_NROUTES,
               "routes");

/* A temporary property inserted into the application's list. */
#define STREAM_PROPERTY "h5gds_device_stream"

static herr_t set_stream(hid_t dxpl_id, void *stream)
{
    if (dxpl_id == H5P_DEFAULT || dxpl_id == H5P_DATASET_XFER_DEFAULT) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE,
                  "the default transfer property list cannot be changed: create one with H5Pcreate(H5P_DATASET_XFER)");
        return -1;
    }
    if (H5Pisa_class(dxpl_id, H5P_DATASET_XFER) <= 0) {
        GDS_ERROR(H5E_ARGS, H5E_BADTYPE, "not a dataset transfer property list");
        return -1;
    }
    htri_t exists = H5Pexist(dxpl_id, STREAM_PROPERTY);
    herr_t rc = exists > 0 ? H5Pset(dxpl_id, STREAM_PROPERTY, &stream)
                           : H5Pinsert2(dxpl_id, STREAM_PROPERTY, sizeof stream, &stream, NULL, NULL, NULL, NULL,
                                        NULL, NULL);
    if (exists < 0 || rc < 0) {
        GDS_ERROR(H5E_PLIST, H5E_CANTSET, "cannot set the device stream on the transfer property list");
        return -1;
    }
    return 0;
}

static herr_t get_stream(hid_t dxpl_id, void **stream)
{
    if (!stream) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "stream pointer is NULL");
        return -1;
    }
    if (dxpl_id == H5P_DEFAULT) {
        *stream = H5FD_GDS_STREAM_LEGACY;
        return 0;
    }
    if (H5Pisa_class(dxpl_id, H5P_DATASET_XFER) <= 0) {
        GDS_ERROR(H5E_ARGS, H5E_BADTYPE, "not a dataset transfer property list");
        return -1;
    }
    *stream = H5FD_GDS_STREAM_LEGACY;
    htri_t exists = H5Pexist(dxpl_id, STREAM_PROPERTY);
    if (exists < 0 || (exists > 0 && H5Pget(dxpl_id, STREAM_PROPERTY, stream) < 0)) {
        GDS_ERROR(H5E_PLIST, H5E_CANTGET, "cannot read the device stream of the transfer property list");
        return -1;
    }
    return 0;
}

herr_t H5Pset_dxpl_gds_stream(hid_t dxpl_id, void *stream)
{
    gds_api_enter();
    return gds_api_leave(set_stream(dxpl_id, stream) < 0) ? -1 : 0;
}

herr_t H5Pget_dxpl_gds_stream(hid_t dxpl_id, void **stream)
{
    gds_api_enter();
    return gds_api_leave(get_stream(dxpl_id, stream) < 0) ? -1 : 0;
}

void gds_transfer_order(hid_t dxpl_id, gds_request_t *req)
{
    req->order = GDS_ORDER_LEGACY;
    req->stream = NULL;
    void *stream = H5FD_GDS_STREAM_LEGACY;
    if (dxpl_id < 0 || dxpl_id == H5P_DEFAULT || dxpl_id == H5P_DATASET_XFER_DEFAULT)
        return;
    H5E_BEGIN_TRY
    {
        if (H5Pexist(dxpl_id, STREAM_PROPERTY) > 0 && H5Pget(dxpl_id, STREAM_PROPERTY, &stream) < 0)
            stream = H5FD_GDS_STREAM_LEGACY;
    }
    H5E_END_TRY;
    if (stream == H5FD_GDS_STREAM_NONE)
        req->order = GDS_ORDER_NONE;
    else if (stream != H5FD_GDS_STREAM_LEGACY && stream != (void *)CU_STREAM_LEGACY) {
        req->order = GDS_ORDER_STREAM;
        req->stream = stream;
    }
}

int gds_mem_copy(void *dst, const void *src, size_t len, bool *device)
{
    *device = false;
    if (len == 0)
        return 0;
    gds_buffer_info_t di, si;
    bool dst_known = gds_classify_buffer(dst, &di), src_known = gds_classify_buffer(src, &si);
    if (dst_known && src_known && gds_memory_is_host(di.kind) && gds_memory_is_host(si.kind)) {
        memcpy(dst, src, len);
        return 0;
    }
    /* A device (or managed, or unanswered) side: the CUDA driver copies,
     * through unified addressing, in the device buffer's context; cuMemcpy
     * is ordered after the legacy default stream, like cudaMemcpy. */
    *device = true;
    const char *why = NULL;
    const gds_cuda_api_t *cu = gds_cuda_load(&why);
    if (!cu) {
        GDS_ERROR(H5E_VFL, H5E_CANTCOPY, "copy of %zu bytes involving device memory, but CUDA is unusable: %s", len,
                  why);
        return -1;
    }
    void *ctx = !gds_memory_is_host(di.kind) ? di.context : si.context;
    CUresult rc = CUDA_SUCCESS;
    void *previous = ctx ? gds_cuda_enter(ctx, &rc) : NULL;
    if (rc == CUDA_SUCCESS)
        rc = cu->Memcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len);
    if (ctx)
        gds_cuda_restore(previous);
    if (rc != CUDA_SUCCESS) {
        GDS_ERROR(H5E_VFL, H5E_CANTCOPY, "copy of %zu bytes involving device memory failed: %s", len,
                  gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

void gds_stats_to_public(const gds_engine_stats_t *in, H5FD_gds_stats_t *out)
{
    memset(out, 0, sizeof *out);
    for (int r = 0; r < GDS_NROUTES; r++) {
        out->read_bytes[r] = in->read_bytes[r];
        out->read_calls[r] = in->read_calls[r];
        out->write_bytes[r] = in->write_bytes[r];
        out->write_calls[r] = in->write_calls[r];
    }
    out->read_seconds = (double)in->read_ns * 1e-9;
    out->write_seconds = (double)in->write_ns * 1e-9;
    out->cufile_fallbacks = in->cufile_fallbacks;
    out->direct_fallbacks = in->direct_fallbacks;
    out->device_route = (H5FD_gds_route_t)in->device_route;
    out->buffer_registrations = in->buffer_registrations;
    out->registration_failures = in->registration_failures;
    out->device_path_failures = in->device_path_failures;
    out->device_threads = (unsigned)in->device_threads;
    out->device_block_size = (size_t)in->device_block;
    out->tuned = (int)in->tune_source;
    out->wb_snapshots = in->wb_snapshots;
    out->wb_bytes = in->wb_bytes;
    out->wb_waits = in->wb_waits;
    out->wb_wait_seconds = (double)in->wb_wait_ns * 1e-9;
    out->wb_peak_bytes = in->wb_peak_bytes;
    out->wb_memory_bytes = in->wb_arena_bytes;
    out->wb_failures = in->wb_failures;
    out->wb_peak_pending = in->wb_peak_pending;
    out->wb_stream_ordered = in->wb_stream_ordered;
    out->workers_peak = in->workers_peak;
    out->reserved_bytes = in->reserved_bytes;
}

const char *H5FD_gds_route_name(H5FD_gds_route_t route)
{
    if (route == H5FD_GDS_ROUTE_PASSTHROUGH)
        return "passthrough";
    if (route == H5FD_GDS_ROUTE_HOST_STAGED)
        return "host-staged";
    if (route == H5FD_GDS_ROUTE_GPU_DECODE)
        return "gpu-decode";
    if (route == H5FD_GDS_ROUTE_GPU_ENCODE)
        return "gpu-encode";
    return gds_route_name((gds_route_t)route);
}

herr_t H5FD_gds_get_engine_info(H5FD_gds_engine_info_t *info)
{
    if (!info) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "info pointer is NULL");
        return -1;
    }
    info->threads = gds_engine_threads();
    info->pinned_bytes = gds_engine_pinned_bytes();
    return 0;
}
