/*
 * Device memory of a GPU read or write of a filtered dataset: the state's
 * buffers (grown as needed, freed at the end), the chunk-sized fill value,
 * and strided device copies between a chunk buffer and the box-shaped
 * destination (or, for writes, source).
 */
#include <stdlib.h>
#include <string.h>

#include "gds_filtered_internal.h"

/* Strided device copy of the part of a chunk buffer (chunk shape `cdims`,
 * first element at `clo`) that lies in the box, into the box-shaped
 * buffer, or (to_chunk) from it into the chunk buffer. The three innermost dimensions go in one 3-D copy; outer
 * ones loop. */
CUresult gds_filtered_copy_box_part(const gds_cuda_api_t *cu, const box_t *b, const hsize_t *cdims,
                                    const hsize_t *clo, void *chunk_buf, void *box_buf, size_t esize, bool to_chunk,
                                    CUstream stream)
{
    int r = b->rank;
    hsize_t lo[H5S_MAX_RANK], n[H5S_MAX_RANK];
    for (int d = 0; d < r; d++) {
        hsize_t a = clo[d] > b->lo[d] ? clo[d] : b->lo[d];
        hsize_t z = clo[d] + cdims[d] < b->lo[d] + b->n[d] ? clo[d] + cdims[d] : b->lo[d] + b->n[d];
        lo[d] = a;
        n[d] = z - a;
    }
    /* strides in elements, row-major */
    hsize_t cstride[H5S_MAX_RANK], bstride[H5S_MAX_RANK];
    cstride[r - 1] = bstride[r - 1] = 1;
    for (int d = r - 2; d >= 0; d--) {
        cstride[d] = cstride[d + 1] * cdims[d + 1];
        bstride[d] = bstride[d + 1] * b->n[d + 1];
    }
    int inner = r < 3 ? r : 3, outer = r - inner;
    hsize_t outer_total = 1;
    for (int d = 0; d < outer; d++)
        outer_total *= n[d];
    CUDA_MEMCPY3D m;
    memset(&m, 0, sizeof m);
    m.srcMemoryType = m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.WidthInBytes = (size_t)n[r - 1] * esize;
    m.Height = inner >= 2 ? (size_t)n[r - 2] : 1;
    m.Depth = inner >= 3 ? (size_t)n[r - 3] : 1;
    size_t chunk_pitch = (size_t)cdims[r - 1] * esize, box_pitch = (size_t)b->n[r - 1] * esize;
    size_t chunk_height = inner >= 2 ? (size_t)cdims[r - 2] : 1, box_height = inner >= 2 ? (size_t)b->n[r - 2] : 1;
    m.srcPitch = to_chunk ? box_pitch : chunk_pitch;
    m.dstPitch = to_chunk ? chunk_pitch : box_pitch;
    m.srcHeight = to_chunk ? box_height : chunk_height;
    m.dstHeight = to_chunk ? chunk_height : box_height;
    CUresult rc = CUDA_SUCCESS;
    for (hsize_t o = 0; o < outer_total && rc == CUDA_SUCCESS; o++) {
        /* the outer index o -> coordinates in the intersection */
        hsize_t rest = o, src_off = 0, dst_off = 0;
        for (int d = outer - 1; d >= 0; d--) {
            hsize_t i = rest % n[d];
            rest /= n[d];
            src_off += (lo[d] - clo[d] + i) * cstride[d];
            dst_off += (lo[d] - b->lo[d] + i) * bstride[d];
        }
        for (int d = outer; d < r; d++) {
            src_off += (lo[d] - clo[d]) * cstride[d];
            dst_off += (lo[d] - b->lo[d]) * bstride[d];
        }
        CUdeviceptr in_chunk = (CUdeviceptr)(uintptr_t)chunk_buf + (CUdeviceptr)(src_off * esize);
        CUdeviceptr in_box = (CUdeviceptr)(uintptr_t)box_buf + (CUdeviceptr)(dst_off * esize);
        m.srcDevice = to_chunk ? in_box : in_chunk;
        m.dstDevice = to_chunk ? in_chunk : in_box;
        rc = cu->Memcpy3DAsync(&m, stream);
    }
    return rc;
}

/* Device buffers from the state's pool, ordered on its stream, or from
 * cuMemAlloc. A pool's block is usable by the engine's streams once the
 * stream has run the allocation: the stream is synchronised here (it is
 * idle whenever a buffer is made or grown). */
static CUresult device_alloc(read_state_t *s, CUdeviceptr *p, size_t bytes)
{
    if (!s->pool)
        return s->cu->MemAlloc(p, bytes);
    CUresult rc = s->cu->MemAllocFromPoolAsync(p, bytes, s->pool, s->stream);
    if (rc == CUDA_SUCCESS && (rc = s->cu->StreamSynchronize(s->stream)) != CUDA_SUCCESS) {
        (void)s->cu->MemFreeAsync(*p, s->stream);
        *p = 0;
    }
    return rc;
}

/* Nothing queued uses `p` any more (every read into it was waited for, the
 * stream synchronised). */
static void device_free(read_state_t *s, CUdeviceptr p)
{
    if (s->pool)
        (void)s->cu->MemFreeAsync(p, s->stream);
    else
        (void)s->cu->MemFree(p);
}

void gds_filtered_free_state(read_state_t *s)
{
    if (s->abandoned) { /* work that never ends may still use them; freeing would wait for it */
        free(s->chunks);
        return;
    }
    double t0 = gds_filtered_seconds_now();
    for (int i = 0; i < STORED_BUFFERS; i++)
        if (s->stored[i])
            device_free(s, s->stored[i]);
    if (s->scratch)
        device_free(s, s->scratch);
    if (s->fill)
        device_free(s, s->fill);
    free(s->chunks);
    gds_codec_trim(s->codec); /* a large read's or write's scratch, not kept for the process */
    s->memory_s += gds_filtered_seconds_now() - t0;
}

/* A chunk-sized device buffer holding the fill value, for chunks never
 * written (HDF5 returns the fill value for those; zeros by default). */
herr_t gds_filtered_make_fill(read_state_t *s, hid_t dcpl, hid_t type)
{
    size_t esize = s->pipe.type_size, bytes = s->pipe.chunk_bytes;
    unsigned char *value = calloc(1, esize), *host = malloc(bytes);
    herr_t ret = -1;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (value && host && H5Pget_fill_value(dcpl, type, value) >= 0) {
        for (size_t at = 0; at < bytes; at += esize)
            memcpy(host + at, value, esize);
        rc = device_alloc(s, &s->fill, bytes);
        if (rc == CUDA_SUCCESS)
            /* on the read's stream: a copy from pageable memory may return
             * before its DMA lands, on the legacy stream, which a
             * non-blocking stream does not follow */
            rc = s->cu->MemcpyHtoDAsync(s->fill, host, bytes, s->stream);
        ret = rc == CUDA_SUCCESS ? 0 : -1;
    }
    if (ret < 0)
        FILTERED_ERROR(H5E_DATASET, H5E_CANTINIT, "dataset '%s': cannot prepare the fill value on the GPU: %s", s->name,
                  gds_cuda_error_text(rc));
    free(value);
    free(host);
    return ret;
}

herr_t gds_filtered_ensure(read_state_t *s, CUdeviceptr *p, size_t *cap, size_t need, size_t largest,
                           const char *what)
{
    if (*cap >= need)
        return 0;
    if (largest > need)
        need = largest;
    double t0 = gds_filtered_seconds_now();
    if (*p)
        device_free(s, *p);
    *p = 0;
    *cap = 0;
    CUresult rc = device_alloc(s, p, need ? need : 1);
    s->memory_s += gds_filtered_seconds_now() - t0;
    if (rc != CUDA_SUCCESS) {
        *p = 0;
        s->out_of_memory = rc == CUDA_ERROR_OUT_OF_MEMORY;
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "dataset '%s': cannot allocate %zu bytes of device memory for %s: %s",
                  s->name, need, what, gds_cuda_error_text(rc));
        return -1;
    }
    *cap = need;
    return 0;
}
