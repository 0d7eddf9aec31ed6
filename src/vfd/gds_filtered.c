/*
 * Filtered (compressed) chunked datasets read into device memory with the
 * decode on the GPU, and written from it with the encode on the GPU. Reads: HDF5 locates the chunks (their file extents and
 * filter masks), the driver's engine reads the stored bytes straight into
 * device memory as one batched request, the codec layer (src/codec/,
 * nvCOMP + run-time compiled kernels) decodes them in batches, and the
 * decoded chunks land in the user's selection: decoded in place when a
 * chunk is a contiguous slab of the destination, else decoded aside and
 * copied with strided device copies. Chunks never written get the fill
 * value. While batch k is decoded, batch k+1 is being read.
 *
 * Taken only when nothing would differ from HDF5's own read: a box
 * selection (one block, any memory shape with everything selected), no
 * type conversion, every filter of the pipeline decodable on the GPU,
 * partial edge chunks filtered like the others, a file of the gds driver,
 * and nvCOMP present. Otherwise the caller stages through HDF5's CPU
 * pipeline, as before.
 *
 * This file: whether a read or write is taken and its set-up
 * (filtered_io), and the entry points of gds_filtered.h except
 * gds_filtered_locate_chunks (gds_filtered_locate.c). The other parts:
 * gds_filtered_internal.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "H5FDgds.h"
#include "gds_error.h"
#include "gds_filtered.h"
#include "gds_filtered_internal.h"

static _Thread_local H5FD_gds_decode_stats_t last_stats;
static _Thread_local H5FD_gds_encode_stats_t last_encode_stats;

/* The success path calls no HDF5 function: a caller may ask right after a
 * failed read, whose error stack must stay, and from any thread. */
static herr_t null_stats(void)
{
    gds_api_enter();
    GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "stats pointer is NULL");
    gds_api_leave(true);
    return -1;
}

herr_t H5FD_gds_last_decode_stats(H5FD_gds_decode_stats_t *stats)
{
    if (!stats)
        return null_stats();
    *stats = last_stats;
    return 0;
}

herr_t H5FD_gds_last_encode_stats(H5FD_gds_encode_stats_t *stats)
{
    if (!stats)
        return null_stats();
    *stats = last_encode_stats;
    return 0;
}

/* Writes store every chunk through every filter, with filter mask 0, even
 * where an optional filter's output is not smaller than its input (HDF5's
 * own filters would skip it and set the chunk's mask bit). H5Dwrite_chunk
 * keeps the filter mask the chunk had before in HDF5's cache of the last
 * chunk looked up, and in the chunk index where the chunk keeps its size
 * (HDF5 1.10-2.0, H5D__chunk_direct_write): a chunk stored with another
 * mask than it had would be read with the old one by HDF5 in the same
 * session, or ever after (wrong data where a skipped compressor is taken as
 * applied or the other way round). New chunks look up as mask 0, so they
 * are stored with 0; chunks that exist with another mask (written by
 * HDF5's filters) send the write to HDF5's pipeline (chunks_masked). An
 * incompressible chunk costs its compressor's framing, a few bytes. */
static void keep_every_filter(gds_codec_pipeline_t *p)
{
    for (size_t i = 0; i < p->nfilters; i++)
        p->filter[i].flags &= ~(unsigned)GDS_FILTER_FLAG_OPTIONAL;
}

/* A read whose transfer list disables error detection
 * (H5Pset_edc_check(H5Z_DISABLE_EDC)): Fletcher-32 is not verified, as
 * HDF5's pipeline then tells its filter (H5Z_FLAG_SKIP_EDC). */
static void skip_checksums(gds_codec_pipeline_t *p)
{
    for (size_t i = 0; i < p->nfilters; i++)
        if (p->filter[i].id == GDS_FILTER_FLETCHER32)
            p->filter[i].flags |= GDS_FILTER_FLAG_SKIP_EDC;
}

/* Whether a chunk of the write exists with a filter skipped (mask not 0):
 * see keep_every_filter. */
static bool chunks_masked(const read_state_t *s)
{
    for (size_t k = 0; k < s->nchunks; k++)
        if (s->chunks[k].addr != HADDR_UNDEF && s->chunks[k].mask != 0)
            return true;
    return false;
}

/* The file selection as one box, if it is one (H5S_ALL: the whole extent). */
static bool selection_box(hid_t dset_space, hid_t file_space, box_t *b)
{
    int rank = H5Sget_simple_extent_ndims(dset_space);
    hsize_t dims[H5S_MAX_RANK];
    if (rank <= 0 || H5Sget_simple_extent_dims(dset_space, dims, NULL) < 0)
        return false;
    b->rank = rank;
    if (file_space == H5S_ALL || H5Sget_select_type(file_space) == H5S_SEL_ALL) {
        for (int d = 0; d < rank; d++)
            b->lo[d] = 0, b->n[d] = dims[d];
        return true;
    }
    if (H5Sget_select_type(file_space) != H5S_SEL_HYPERSLABS)
        return false;
    hsize_t start[H5S_MAX_RANK], end[H5S_MAX_RANK];
    if (H5Sget_select_bounds(file_space, start, end) < 0)
        return false;
    hsize_t count = 1;
    for (int d = 0; d < rank; d++) {
        b->lo[d] = start[d];
        b->n[d] = end[d] - start[d] + 1;
        count *= b->n[d];
    }
    return H5Sget_select_npoints(file_space) == (hssize_t)count;
}

/* Where a chunk may decode straight into the destination: wholly inside
 * the box and spanning the box in every dimension but the first, so that
 * its elements are one contiguous slab there. */
static bool decodes_in_place(const box_t *b, const hsize_t *cdims, const hsize_t *clo, const hsize_t *dims)
{
    for (int d = 0; d < b->rank; d++) {
        if (clo[d] + cdims[d] > dims[d] || clo[d] < b->lo[d] || clo[d] + cdims[d] > b->lo[d] + b->n[d])
            return false;
        if (d > 0 && cdims[d] != b->n[d])
            return false;
    }
    return true;
}

/* A write box covers whole chunks: it starts on chunk boundaries and ends
 * on one or at the dataset's extent (direct chunk writes replace whole
 * chunks; a partly covered chunk would need its old contents). */
static bool covers_whole_chunks(const read_state_t *s)
{
    for (int d = 0; d < s->box.rank; d++) {
        hsize_t end = s->box.lo[d] + s->box.n[d];
        if (s->box.lo[d] % s->cdims[d] != 0 || (end % s->cdims[d] != 0 && end != s->dims[d]))
            return false;
    }
    return true;
}

static int filtered_io(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void *buf,
                       bool write)
{
    read_state_t s;
    memset(&s, 0, sizeof s);
    gds_filtered_pending.set = false;
    s.dset = dset;
    s.dxpl = dxpl;
    s.fid = H5I_INVALID_HID;
    hid_t dcpl = H5I_INVALID_HID, ftype = H5I_INVALID_HID, dspace = H5I_INVALID_HID, fapl = H5I_INVALID_HID;
    int result = 0; /* not taken */
    bool pushed = false;
    H5E_BEGIN_TRY
    {
        do {
            if ((dcpl = H5Dget_create_plist(dset)) < 0 || H5Pget_layout(dcpl) != H5D_CHUNKED ||
                H5Pget_nfilters(dcpl) <= 0)
                break;
            unsigned opts = 0;
            if (H5Pget_chunk_opts(dcpl, &opts) < 0 || (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS))
                break;
            /* a data transform (H5Pset_data_transform) is HDF5's to apply, on the CPU */
            if (dxpl != H5P_DEFAULT && H5Pget_data_transform(dxpl, NULL, 0) > 0)
                break;
            if ((ftype = H5Dget_type(dset)) < 0 || H5Tequal(ftype, mem_type) <= 0 ||
                H5Tdetect_class(ftype, H5T_VLEN) != 0 || H5Tis_variable_str(ftype) != 0)
                break;
            if ((s.fid = H5Iget_file_id(dset)) < 0 || (fapl = H5Fget_access_plist(s.fid)) < 0 ||
                H5Pget_driver(fapl) != H5FD_gds_init())
                break;
            if ((dspace = H5Dget_space(dset)) < 0 || !selection_box(dspace, file_space, &s.box))
                break;
            if (H5Sget_simple_extent_dims(dspace, s.dims, NULL) < 0 ||
                H5Pget_chunk(dcpl, H5S_MAX_RANK, s.cdims) != s.box.rank)
                break;
            hsize_t npoints = 1;
            for (int d = 0; d < s.box.rank; d++)
                npoints *= s.box.n[d];
            if (npoints == 0) /* nothing selected: HDF5's own call does nothing */
                break;
            /* H5S_ALL memory with a partial file selection: the buffer has the
             * dataset's shape, each element at its own coordinates (not a packed box) */
            if (mem_space == H5S_ALL && file_space != H5S_ALL && H5Sget_select_type(file_space) != H5S_SEL_ALL)
                break;
            if (mem_space != H5S_ALL && (H5Sget_select_type(mem_space) != H5S_SEL_ALL ||
                                         H5Sget_select_npoints(mem_space) != (hssize_t)npoints))
                break;
            if (!gds_filtered_describe_pipeline(dcpl, H5Tget_size(ftype), s.cdims, s.box.rank, &s.pipe))
                break;
            if (write)
                keep_every_filter(&s.pipe);
            else if (dxpl != H5P_DEFAULT && H5Pget_edc_check(dxpl) == H5Z_DISABLE_EDC)
                skip_checksums(&s.pipe);
            char why[256];
            if (write ? !gds_codec_can_encode(&s.pipe, why, sizeof why) || !covers_whole_chunks(&s) ||
                            gds_codec_encodes_slowly(&s.pipe)
                      : !gds_codec_can_decode(&s.pipe, why, sizeof why))
                break;
            result = 1;
        } while (0);
    }
    H5E_END_TRY;
    gds_buffer_info_t info;
    gds_status_t st;
    if (result == 1) {
        s.cu = gds_cuda_if_loaded();
        gds_classify_buffer(buf, &info);
        if (!s.cu || info.kind != GDS_MEMORY_DEVICE ||
            !(s.codec = gds_filtered_codec_for((CUcontext)info.context, &st)) || gds_codec_stopped(s.codec))
            result = 0; /* no nvCOMP (or no CUDA, or its codec stopped): HDF5's own pipeline */
    }
    void *previous = NULL;
    bool trace = false;
    double moved_ms = 0, prepared_ms = 0;
    bool entered = false;
    if (result == 1) {
        CUresult erc;
        previous = gds_cuda_enter(info.context, &erc);
        entered = true;
        if (erc == CUDA_SUCCESS)
            s.pool = gds_filtered_pool_for((CUcontext)info.context, s.cu);
        H5Iget_name(dset, s.name, sizeof s.name);
        s.out = buf;
        void *stream = NULL;
        if (dxpl != H5P_DEFAULT)
            H5Pget_dxpl_gds_stream(dxpl, &stream); /* NULL: the legacy stream, as a plain copy would be ordered */
        s.stream = (CUstream)stream;
        unsigned intent = 0;
        /* Reads: chunks still in HDF5's cache or the driver's buffers reach
         * the file first. (Direct chunk writes replace cached chunks.) */
        if (erc != CUDA_SUCCESS || (!write && H5Fget_intent(s.fid, &intent) >= 0 && (intent & H5F_ACC_RDWR) &&
                                    H5Dflush(dset) < 0)) {
            FILTERED_ERROR(H5E_DATASET, H5E_CANTFLUSH, "dataset '%s': cannot prepare the GPU %s", s.name,
                           write ? "write" : "read");
            result = -1;
        }
        gds_chunk_locate_t located;
        double t_locate = gds_filtered_seconds_now();
        if (result == 1 && gds_filtered_locate(&s, GDS_LOCATE_AUTO, &located) < 0)
            result = -1;
        if (result == 1 && write && chunks_masked(&s))
            result = 0; /* HDF5's filters write it */
        bool any_fill = false;
        for (size_t k = 0; result == 1 && k < s.nchunks; k++) {
            chunk_t *c = &s.chunks[k];
            c->in_place = (write || c->addr != HADDR_UNDEF) && decodes_in_place(&s.box, s.cdims, c->lo, s.dims);
            any_fill |= write ? !c->in_place : c->addr == HADDR_UNDEF;
            if (c->in_place) {
                hsize_t slab = s.box.n[0] > 0 ? s.pipe.chunk_bytes / s.cdims[0] : 0; /* bytes per first-dim row */
                c->dst = (char *)buf + (size_t)((c->lo[0] - s.box.lo[0]) * slab);
            }
        }
        /* Reads of never-written chunks get the fill value as HDF5 gives it:
         * none when undefined or with fill time NEVER (the buffer is left as
         * it is); writes pad edge chunks with it (zeros when undefined). */
        H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
        H5D_fill_time_t fill_time = H5D_FILL_TIME_IFSET;
        bool fills = result == 1 && any_fill && H5Pfill_value_defined(dcpl, &defined) >= 0 &&
                     defined != H5D_FILL_VALUE_UNDEFINED &&
                     (write || (H5Pget_fill_time(dcpl, &fill_time) >= 0 && fill_time != H5D_FILL_TIME_NEVER));
        if (fills && gds_filtered_make_fill(&s, dcpl, mem_type) < 0)
            result = -1;
        double t0 = gds_filtered_seconds_now();
        /* 0: HDF5's filters read (write) the whole selection again, through
         * host memory. Out of device memory, a write takes that path only
         * while nothing is stored: HDF5 would store chunks written already
         * a second time. */
        if (result == 1 && (write ? gds_filtered_write_all(&s) : gds_filtered_read_all(&s)) < 0)
            result = s.cpu_decode || (s.out_of_memory && (!write || s.wstats.chunks == 0)) ? 0 : -1;
        if (!write && result == 1 && s.stats.hdf5_chunks && gds_codec_debug_on())
            fprintf(stderr, "h5gds read '%s': %llu chunks the GPU refused read by HDF5's filters\n", s.name,
                    (unsigned long long)s.stats.hdf5_chunks);
        s.stats.total_s = s.wstats.total_s = gds_filtered_seconds_now() - t0;
        trace = gds_codec_debug_on();
        moved_ms = 1e3 * s.stats.total_s;
        prepared_ms = 1e3 * (t0 - t_locate);
        if (result == 1 && !write)
            last_stats = s.stats;
        if (result == 1 && write)
            last_encode_stats = s.wstats;
        pushed = result < 0;
    }
    gds_filtered_free_state(&s); /* in the buffers' context */
    if (trace)
        fprintf(stderr, "h5gds %s '%s': %zu chunks located and prepared in %.1f ms, moved in %.1f ms; device "
                "memory allocated and freed in %.1f ms\n", write ? "write" : "read", s.name, s.nchunks, prepared_ms,
                moved_ms, 1e3 * s.memory_s);
    if (entered)
        gds_cuda_restore(previous);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (ftype >= 0)
        H5Tclose(ftype);
    if (dspace >= 0)
        H5Sclose(dspace);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (s.fid >= 0)
        H5Fclose(s.fid);
    if (pushed && gds_filtered_pending.set)
        gds_error_push(gds_filtered_pending.func, gds_filtered_pending.line, gds_filtered_pending.major,
                       gds_filtered_pending.minor, "%s", gds_filtered_pending.msg);
    else if (pushed)
        GDS_ERROR(H5E_DATASET, write ? H5E_WRITEERROR : H5E_READERROR, "dataset '%s': the GPU %s failed", s.name,
                  write ? "write" : "read");
    return result < 0 ? -1 : result;
}

int gds_filtered_read(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void *buf)
{
    return filtered_io(dset, mem_type, mem_space, file_space, dxpl, buf, false);
}

int gds_filtered_write(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, const void *buf)
{
    return filtered_io(dset, mem_type, mem_space, file_space, dxpl, (void *)buf, true);
}