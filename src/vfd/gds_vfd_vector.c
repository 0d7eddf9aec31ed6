/*
 * The `gds` driver's vector I/O (HDF5 >= 1.14): the pieces of one
 * H5Dread/H5Dwrite as one engine request.
 */
#include <stdlib.h>

#include "gds_transfer.h"
#include "gds_vfd_file.h"

#if H5GDS_HAVE_VFD_PLUGINS
typedef struct extent {
    haddr_t addr;
    size_t size;
} extent_t;

static int cmp_extent(const void *a, const void *b)
{
    haddr_t x = ((const extent_t *)a)->addr, y = ((const extent_t *)b)->addr;
    return x < y ? -1 : x > y;
}

/* Whether any two of the pieces overlap (then a write is done in order). */
static bool pieces_overlap(extent_t *ext, size_t n)
{
    qsort(ext, n, sizeof *ext, cmp_extent);
    for (size_t i = 1; i < n; i++)
        if (ext[i - 1].addr + ext[i - 1].size > ext[i].addr)
            return true;
    return false;
}

/* HDF5's vector I/O (1.14's selection I/O ends here): the pieces of one
 * H5Dread/H5Dwrite, e.g. all its chunks. Raw pieces on device memory go to
 * the engine as one request, so that many chunks keep every worker busy;
 * small host pieces go through the sieve window, as single calls would.
 * Writes that mix in metadata or overlap are done piece by piece, in order. */
static herr_t gds_io_vector(gds_vfd_file_t *file, bool write, hid_t dxpl, uint32_t count, const H5FD_mem_t types[],
                            const haddr_t addrs[], const size_t sizes[], void *const bufs[])
{
    if (count == 0)
        return 0;
    if (gds_vfd_sieve_off_if_swmr(file) < 0)
        return -1;
    if (count == 1) /* the common case of small requests: no bookkeeping */
        return write ? gds_vfd_write(&file->pub, types[0], dxpl, addrs[0], sizes[0], bufs[0])
                     : gds_vfd_read(&file->pub, types[0], dxpl, addrs[0], sizes[0], bufs[0]);
    gds_segment_t *segs = malloc(count * sizeof *segs);
    gds_buffer_info_t *info = malloc(count * sizeof *info);
    extent_t *ext = malloc(count * sizeof *ext);
    H5FD_mem_t *ptype = malloc(count * sizeof *ptype);
    size_t *psize = malloc(count * sizeof *psize);
    if (!segs || !info || !ext || !ptype || !psize) {
        free(segs);
        free(info);
        free(ext);
        free(ptype);
        free(psize);
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a vector of %u pieces", count);
        return -1;
    }
    /* Each piece's type and size: a zero size or an H5FD_MEM_NOLIST type
     * means "as the previous piece" for the rest. */
    bool in_order = false, more_types = true, more_sizes = true;
    for (uint32_t i = 0; i < count; i++) {
        more_types = more_types && types[i] != H5FD_MEM_NOLIST;
        more_sizes = more_sizes && sizes[i] != 0;
        ptype[i] = more_types ? types[i] : ptype[i - 1];
        psize[i] = more_sizes ? sizes[i] : psize[i - 1];
        ext[i] = (extent_t){addrs[i], psize[i]};
        in_order |= write && ptype[i] != H5FD_MEM_DRAW;
    }
    in_order = in_order || (write && pieces_overlap(ext, count));

    herr_t ret = 0;
    size_t nseg = 0;
    gds_status_t st;
    for (uint32_t i = 0; ret == 0 && i < count; i++) {
        H5FD_mem_t type = ptype[i];
        size_t size = psize[i];
        /* Pieces that are not raw data for the engine go the single-call way.
         * Raw pieces are classified once, with their allocation's start so
         * the engine can merge neighbours of one allocation. */
        gds_buffer_info_t *bi = &info[nseg];
        bool answered = in_order || type != H5FD_MEM_DRAW || gds_classify_buffer_range(bufs[i], bi);
        if (in_order || type != H5FD_MEM_DRAW || gds_sieve_takes(&file->sieve, write, size, answered ? bi : NULL)) {
            ret = write ? gds_vfd_write(&file->pub, type, dxpl, addrs[i], size, bufs[i])
                        : gds_vfd_read(&file->pub, type, dxpl, addrs[i], size, bufs[i]);
            continue;
        }
        if (GDS_REGION_OVERFLOW(addrs[i], size)) {
            GDS_ERROR(H5E_ARGS, H5E_OVERFLOW, "addr overflow, addr = %llu, size = %zu", (unsigned long long)addrs[i],
                      size);
            ret = -1;
            break;
        }
        if (gds_sieve_before_other(&file->sieve, file->engine, addrs[i], size, write, &st) < 0) {
            engine_error(file, write ? H5E_WRITEERROR : H5E_READERROR, &st);
            ret = -1;
            break;
        }
        segs[nseg++] = (gds_segment_t){addrs[i], size, bufs[i]};
    }
    if (ret == 0 && nseg && write) {
        haddr_t end = 0;
        size_t total = 0;
        for (size_t k = 0; k < nseg; k++) {
            end = segs[k].offset + segs[k].size > end ? segs[k].offset + segs[k].size : end;
            total += segs[k].size;
        }
        gds_vfd_reserve_ahead(file, total, end);
    }
    if (ret == 0 && nseg) {
        gds_request_t req = {.write = write, .data = GDS_DATA_RAW, .nseg = nseg, .segs = segs, .known = info};
        gds_transfer_order(dxpl, &req);
        int rc = gds_file_transfer(file->engine, &req, &st);
        if (rc < 0) {
            engine_error(file, write ? H5E_WRITEERROR : H5E_READERROR, &st);
            ret = -1;
        }
        for (size_t k = 0; rc == 0 && write && k < nseg; k++)
            if (segs[k].offset + segs[k].size > file->eof)
                file->eof = segs[k].offset + segs[k].size;
    }
    free(segs);
    free(info);
    free(ext);
    free(ptype);
    free(psize);
    return ret;
}

herr_t gds_vfd_read_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                              size_t sizes[], void *bufs[])
{
    return gds_io_vector((gds_vfd_file_t *)file, false, dxpl, count, types, addrs, sizes, bufs);
}

herr_t gds_vfd_write_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                               size_t sizes[], const void *bufs[])
{
    /* The engine never writes through the buffers; the cast only shares the code. */
    return gds_io_vector((gds_vfd_file_t *)file, true, dxpl, count, types, addrs, sizes, (void *const *)bufs);
}
#endif
