/*
 * Dataset-level help for GPU buffers: properties that let HDF5 pass the
 * user's buffer straight to the driver, and H5Dwrite/H5Dread variants that
 * check those conditions and stage through pinned host memory when they do
 * not hold, so that HDF5 never touches device memory with the CPU.
 *
 * When HDF5 copies or converts with the CPU instead of passing the buffer on
 * (the rules this file checks):
 *   - memory type differs from the file type (conversion), or a data
 *     transform is set on the transfer list;
 *   - compact layout on HDF5 < 1.14 (data lives in the object header; from
 *     1.14 on HDF5 asks the driver to make that copy), external files, or
 *     virtual datasets;
 *   - chunked data with filters, or chunks small enough for the chunk cache;
 *   - reads of storage not yet allocated (HDF5 fills the buffer itself);
 *   - writes of unallocated chunks that need a fill value;
 *   - the file uses neither the gds driver nor gds_mpio.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "H5FDgds.h"
#include "gds_error.h"
#include "gds_filtered.h"
#include "../cuda/cuda_loader.h"
#include "../engine/engine.h"

/* The drivers whose files get the buffer passed through: gds, and the
 * parallel gds_mpio when a program has libh5gds_mpio loaded (linked, or
 * its preload library, which compiles this file again: src/mpio/). A
 * gds_mpio file is recognised with H5FD_gds_mpio_is_file, found at run
 * time: H5Fget_access_plist, which tells the driver of other files,
 * duplicates the communicator of a parallel file, which is collective, and
 * only ranks with device buffers get here. gds_mpio needs other rules, too:
 * HDF5 does not ask it to copy compact data; with selection I/O off a
 * collective call would reach it with MPI datatypes, which it refuses for
 * device memory; and its unfiltered datasets are always allocated (parallel
 * HDF5 allocates early), so no allocation status is asked (that reads
 * metadata, collectively when the file asks for collective metadata reads). */
typedef htri_t (*is_mpio_file_t)(hid_t);

static bool is_gds_mpio_file(hid_t fid)
{
    /* Looked up again while absent: libh5gds_mpio may be loaded later. */
    static is_mpio_file_t probe; /* atomic */
    is_mpio_file_t p = __atomic_load_n(&probe, __ATOMIC_ACQUIRE);
    if (!p) {
        p = (is_mpio_file_t)dlsym(RTLD_DEFAULT, "H5FD_gds_mpio_is_file");
        if (p)
            __atomic_store_n(&probe, p, __ATOMIC_RELEASE);
    }
    return p && p(fid) > 0;
}

#ifndef H5GDS_NO_GPU_DECODE
/* Whether a dataset's file is a gds_mpio one (errors quiet). */
static bool on_gds_mpio_file(hid_t dset)
{
    bool mpio = false;
    H5E_BEGIN_TRY
    {
        hid_t fid = H5Iget_file_id(dset);
        mpio = fid >= 0 && is_gds_mpio_file(fid);
        if (fid >= 0)
            H5Fclose(fid);
    }
    H5E_END_TRY;
    return mpio;
}
#endif

static _Thread_local H5FD_gds_route_t last_route = H5FD_GDS_ROUTE_NONE;

H5FD_gds_route_t H5FD_gds_last_route(void)
{
    return last_route;
}

H5FD_gds_memory_t H5FD_gds_memory_kind(const void *ptr)
{
    gds_buffer_info_t info;
    gds_classify_buffer_exact(ptr, &info);
    return (H5FD_gds_memory_t)info.kind; /* same values (gds_transfer.c) */
}

herr_t H5FD_gds_prepare_dcpl(hid_t dcpl_id)
{
    gds_api_enter();
    if (H5Pset_fill_time(dcpl_id, H5D_FILL_TIME_NEVER) < 0 || H5Pset_alloc_time(dcpl_id, H5D_ALLOC_TIME_EARLY) < 0) {
        GDS_ERROR(H5E_PLIST, H5E_CANTSET, "cannot set fill time/allocation time on the dataset creation list");
        return gds_api_leave(true) ? -1 : 0;
    }
    return gds_api_leave(false) ? -1 : 0;
}

hid_t H5FD_gds_create_dcpl(void)
{
    gds_api_enter();
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0 || H5FD_gds_prepare_dcpl(dcpl) < 0) {
        if (dcpl >= 0)
            H5Pclose(dcpl);
        GDS_ERROR(H5E_PLIST, H5E_CANTCREATE, "cannot create a dataset creation property list");
        gds_api_leave(true);
        return H5I_INVALID_HID;
    }
    gds_api_leave(false);
    return dcpl;
}

hid_t H5FD_gds_create_dapl(void)
{
    gds_api_enter();
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    /* No chunk cache: every chunk is "too large to cache" and goes direct. */
    if (dapl < 0 || H5Pset_chunk_cache(dapl, 0, 0, H5D_CHUNK_CACHE_W0_DEFAULT) < 0) {
        if (dapl >= 0)
            H5Pclose(dapl);
        GDS_ERROR(H5E_PLIST, H5E_CANTCREATE, "cannot create a dataset access property list");
        gds_api_leave(true);
        return H5I_INVALID_HID;
    }
    gds_api_leave(false);
    return dapl;
}

/* True when HDF5 will hand `buf` to the driver untouched. Any failure to
 * find out counts as "no": staging is always correct. */
static bool passes_through(hid_t dset, hid_t mem_type, hid_t dxpl, bool write)
{
    bool ok = false;
    hid_t file_type = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, dapl = H5I_INVALID_HID, fid = H5I_INVALID_HID,
          fapl = H5I_INVALID_HID;
    H5E_BEGIN_TRY
    {
        do {
            if (dxpl != H5P_DEFAULT && H5Pget_data_transform(dxpl, NULL, 0) > 0)
                break;
            if ((file_type = H5Dget_type(dset)) < 0 || H5Tequal(mem_type, file_type) <= 0)
                break;
            if (H5Tdetect_class(mem_type, H5T_VLEN) != 0 || H5Tis_variable_str(mem_type) != 0 ||
                H5Tdetect_class(mem_type, H5T_REFERENCE) != 0)
                break;
            if ((fid = H5Iget_file_id(dset)) < 0)
                break;
            bool mpio = is_gds_mpio_file(fid);
            if (!mpio && ((fapl = H5Fget_access_plist(fid)) < 0 || H5Pget_driver(fapl) != H5FD_gds_init()))
                break;
#if H5_VERSION_GE(1, 14, 0)
            H5D_selection_io_mode_t sel = H5D_SELECTION_IO_MODE_DEFAULT;
            if (mpio && dxpl != H5P_DEFAULT && (H5Pget_selection_io(dxpl, &sel) < 0 || sel == H5D_SELECTION_IO_MODE_OFF))
                break;
#endif
            if ((dcpl = H5Dget_create_plist(dset)) < 0)
                break;
            H5D_layout_t layout = H5Pget_layout(dcpl);
#if H5_VERSION_GE(1, 14, 0)
            /* Compact data is copied between the object header and the
             * user's buffer by the gds driver (H5FD_CTL_MEM_COPY, with the
             * CUDA driver for device memory): no CPU touches it. */
            if (layout == H5D_COMPACT && !mpio) {
                ok = true;
                break;
            }
#endif
            if (layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED)
                break;
            if (H5Pget_external_count(dcpl) != 0)
                break;
            H5D_space_status_t status = H5D_SPACE_STATUS_ALLOCATED;
            if (!mpio && H5Dget_space_status(dset, &status) < 0)
                break;
            if (mpio && !write) {
                /* Parallel HDF5 allocates storage at open only for files opened
                 * read-write: a read-only file keeps what a serial writer left,
                 * and HDF5 fills unallocated storage with the CPU. Chunks may be
                 * missing one by one: chunked reads of such files are staged. */
                unsigned intent = 0;
                if (H5Fget_intent(fid, &intent) < 0)
                    break;
                if (!(intent & H5F_ACC_RDWR) && (layout == H5D_CHUNKED || H5Dget_offset(dset) == HADDR_UNDEF))
                    break;
            }
            bool allocated = status == H5D_SPACE_STATUS_ALLOCATED;
            if (!write && !allocated)
                break;
            if (layout == H5D_CHUNKED) {
                if (H5Pget_nfilters(dcpl) != 0)
                    break;
                hsize_t dims[H5S_MAX_RANK];
                int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, dims);
                if (rank <= 0)
                    break;
                size_t chunk_bytes = H5Tget_size(file_type);
                for (int i = 0; i < rank; i++)
                    chunk_bytes *= (size_t)dims[i];
                size_t nslots, nbytes;
                double w0;
                if ((dapl = H5Dget_access_plist(dset)) < 0 || H5Pget_chunk_cache(dapl, &nslots, &nbytes, &w0) < 0)
                    break;
                if (chunk_bytes <= nbytes)
                    break;
                if (write && !allocated) {
                    H5D_fill_time_t fill_time;
                    if (H5Pget_fill_time(dcpl, &fill_time) < 0 || fill_time != H5D_FILL_TIME_NEVER)
                        break;
                }
            }
            ok = true;
        } while (0);
        if (file_type >= 0)
            H5Tclose(file_type);
        if (dcpl >= 0)
            H5Pclose(dcpl);
        if (dapl >= 0)
            H5Pclose(dapl);
        if (fapl >= 0)
            H5Pclose(fapl);
        if (fid >= 0)
            H5Fclose(fid);
    }
    H5E_END_TRY;
    return ok;
}

/* Bytes the application's buffer spans: the extent of the memory space (or
 * of the file space when the memory space is H5S_ALL). */
static herr_t buffer_extent(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, size_t *bytes)
{
    hid_t space = mem_space != H5S_ALL ? mem_space : file_space;
    hid_t owned = H5I_INVALID_HID;
    if (space == H5S_ALL && (space = owned = H5Dget_space(dset)) < 0)
        return -1;
    hssize_t n = H5Sget_simple_extent_npoints(space);
    size_t elem = H5Tget_size(mem_type);
    if (owned >= 0)
        H5Sclose(owned);
    if (n < 0 || elem == 0)
        return -1;
    *bytes = (size_t)n * elem;
    return 0;
}

typedef struct staging {
    const gds_cuda_api_t *cu;
    CUcontext saved;
    void *host;
    size_t bytes;
} staging_t;

static herr_t staging_begin(staging_t *s, const void *dev, hid_t dset, hid_t mem_type, hid_t mem_space,
                            hid_t file_space)
{
    const char *why = NULL;
    memset(s, 0, sizeof *s);
    if (H5Tdetect_class(mem_type, H5T_VLEN) != 0 || H5Tis_variable_str(mem_type) != 0) {
        GDS_ERROR(H5E_DATASET, H5E_UNSUPPORTED,
                  "variable-length data holds host pointers and cannot be read or written from GPU memory");
        return -1;
    }
    if (buffer_extent(dset, mem_type, mem_space, file_space, &s->bytes) < 0) {
        GDS_ERROR(H5E_DATASET, H5E_CANTGET, "cannot determine the size of the memory buffer");
        return -1;
    }
    if (!(s->cu = gds_cuda_load(&why))) {
        GDS_ERROR(H5E_DATASET, H5E_CANTINIT, "CUDA is unusable: %s", why);
        return -1;
    }
    gds_buffer_info_t info;
    gds_classify_buffer(dev, &info);
    s->cu->CtxGetCurrent(&s->saved);
    if (info.context && info.context != (void *)s->saved)
        s->cu->CtxSetCurrent((CUcontext)info.context);
    CUresult rc = s->cu->MemHostAlloc(&s->host, s->bytes ? s->bytes : 1, 0);
    if (rc != CUDA_SUCCESS) {
        s->host = NULL;
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "cannot allocate %zu bytes of pinned host memory: %s", s->bytes,
                  gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

static herr_t staging_copy(staging_t *s, void *dst, const void *src, bool to_device)
{
    if (s->bytes == 0)
        return 0;
    CUresult rc = to_device ? s->cu->MemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, s->bytes)
                            : s->cu->MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, s->bytes);
    if (rc != CUDA_SUCCESS) {
        GDS_ERROR(H5E_DATASET, H5E_CANTCOPY, "copy of %zu bytes %s failed: %s", s->bytes,
                  to_device ? "to the GPU" : "from the GPU", gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

static void staging_end(staging_t *s)
{
    if (s->host)
        s->cu->MemFreeHost(s->host);
    if (s->cu)
        s->cu->CtxSetCurrent(s->saved);
}

/* A rank of a gds_mpio file that cannot stage its buffer still takes part in
 * the (possibly collective) transfer the other ranks are in, with nothing
 * selected, and then fails: never a hang. */
static void take_part_empty(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, bool write)
{
    hid_t fid = H5Iget_file_id(dset);
    bool mpio = fid >= 0 && is_gds_mpio_file(fid);
    if (fid >= 0)
        H5Fclose(fid);
    if (!mpio)
        return;
    static unsigned char nothing[8];
    H5E_BEGIN_TRY
    {
        hid_t whole = H5Dget_space(dset);
        hid_t ms = H5Scopy(mem_space == H5S_ALL ? whole : mem_space);
        hid_t fs = H5Scopy(file_space == H5S_ALL ? whole : file_space);
        if (ms >= 0 && fs >= 0 && H5Sselect_none(ms) >= 0 && H5Sselect_none(fs) >= 0) {
            if (write)
                H5Dwrite(dset, mem_type, ms, fs, dxpl, nothing);
            else
                H5Dread(dset, mem_type, ms, fs, dxpl, nothing);
        }
        H5Sclose(ms);
        H5Sclose(fs);
        H5Sclose(whole);
    }
    H5E_END_TRY;
}

static herr_t write_checked(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, const void *buf)
{
    if (H5FD_gds_memory_kind(buf) != H5FD_GDS_MEMORY_DEVICE) {
        last_route = H5FD_GDS_ROUTE_HOST;
        return H5Dwrite(dset, mem_type, mem_space, file_space, dxpl, buf);
    }
    if (passes_through(dset, mem_type, dxpl, true)) {
        last_route = H5FD_GDS_ROUTE_PASSTHROUGH;
        return H5Dwrite(dset, mem_type, mem_space, file_space, dxpl, buf);
    }
#ifndef H5GDS_NO_GPU_DECODE
    /* Whole filtered chunks encoded on the GPU, where that path serves the write. */
    int encoded = on_gds_mpio_file(dset) ? 0 : gds_filtered_write(dset, mem_type, mem_space, file_space, dxpl, buf);
    if (encoded != 0) {
        last_route = H5FD_GDS_ROUTE_GPU_ENCODE;
        return encoded < 0 ? -1 : 0;
    }
#endif
    last_route = H5FD_GDS_ROUTE_HOST_STAGED;
    staging_t s;
    herr_t ret = staging_begin(&s, buf, dset, mem_type, mem_space, file_space);
    if (ret == 0)
        ret = staging_copy(&s, s.host, buf, false);
    if (ret == 0)
        ret = H5Dwrite(dset, mem_type, mem_space, file_space, dxpl, s.host);
    else
        take_part_empty(dset, mem_type, mem_space, file_space, dxpl, true);
    staging_end(&s);
    return ret;
}

static herr_t read_checked(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void *buf)
{
    if (H5FD_gds_memory_kind(buf) != H5FD_GDS_MEMORY_DEVICE) {
        last_route = H5FD_GDS_ROUTE_HOST;
        return H5Dread(dset, mem_type, mem_space, file_space, dxpl, buf);
    }
    if (passes_through(dset, mem_type, dxpl, false)) {
        last_route = H5FD_GDS_ROUTE_PASSTHROUGH;
        return H5Dread(dset, mem_type, mem_space, file_space, dxpl, buf);
    }
#ifndef H5GDS_NO_GPU_DECODE
    /* Filtered chunks decoded on the GPU, where that path serves the read
     * (not on gds_mpio files: its queries would be collective). */
    bool mpio = on_gds_mpio_file(dset);
    int decoded = mpio ? 0 : gds_filtered_read(dset, mem_type, mem_space, file_space, dxpl, buf);
    if (decoded != 0) {
        last_route = H5FD_GDS_ROUTE_GPU_DECODE;
        return decoded < 0 ? -1 : 0;
    }
#endif
    last_route = H5FD_GDS_ROUTE_HOST_STAGED;
    staging_t s;
    /* Unselected elements of the buffer must survive: copy it out first. */
    herr_t ret = staging_begin(&s, buf, dset, mem_type, mem_space, file_space);
    if (ret == 0)
        ret = staging_copy(&s, s.host, buf, false);
    if (ret == 0) {
        ret = H5Dread(dset, mem_type, mem_space, file_space, dxpl, s.host);
        if (ret == 0)
            ret = staging_copy(&s, buf, s.host, true);
    }
    else
        take_part_empty(dset, mem_type, mem_space, file_space, dxpl, false);
    staging_end(&s);
    return ret;
}

herr_t H5Dwrite_gds(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, const void *buf)
{
    gds_api_enter();
    herr_t ret = write_checked(dset, mem_type, mem_space, file_space, dxpl, buf);
    return gds_api_leave(ret < 0) ? -1 : ret;
}

herr_t H5Dread_gds(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void *buf)
{
    gds_api_enter();
    herr_t ret = read_checked(dset, mem_type, mem_space, file_space, dxpl, buf);
    return gds_api_leave(ret < 0) ? -1 : ret;
}
