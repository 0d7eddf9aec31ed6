/*
 * The Python package's loader, compressed columns (through ctypes): stored
 * chunks the loader read itself, decoded on the GPU into their places.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "gds_filtered.h"
#include "pyglue_common.h"

/* ---- the loader's compressed columns: stored chunks it read itself,
 * decoded on the GPU into their places, in the background. Addresses as
 * integers, as ctypes hands them; chunk_lo: each chunk's first element,
 * `rank` coordinates a chunk (NULL: a refused chunk leaves them all to the
 * caller). */

/* The chunk arrays as the glue takes them (malloc'd; freed by free_given). */
typedef struct {
    const void **srcs;
    void **dsts;
    size_t *sizes;
    unsigned *mask;
    hsize_t *lo;
} given_t;

static void free_given(given_t *g)
{
    free(g->srcs);
    free(g->dsts);
    free(g->sizes);
    free(g->mask);
    free(g->lo);
}

static bool take_given(given_t *g, size_t n, const uint64_t *src, const uint64_t *src_bytes, const uint32_t *masks,
                       const uint64_t *dst, const uint64_t *chunk_lo, size_t rank)
{
    g->srcs = malloc(n * sizeof *g->srcs);
    g->dsts = malloc(n * sizeof *g->dsts);
    g->sizes = malloc(n * sizeof *g->sizes);
    g->mask = malloc(n * sizeof *g->mask);
    g->lo = chunk_lo ? malloc(n * rank * sizeof *g->lo) : NULL;
    if (!g->srcs || !g->dsts || !g->sizes || !g->mask || (chunk_lo && !g->lo))
        return false;
    for (size_t i = 0; i < n; i++) {
        g->srcs[i] = (const void *)(uintptr_t)src[i];
        g->dsts[i] = (void *)(uintptr_t)dst[i];
        g->sizes[i] = (size_t)src_bytes[i];
        g->mask[i] = masks ? (unsigned)masks[i] : 0u;
    }
    for (size_t i = 0; g->lo && i < n * rank; i++)
        g->lo[i] = (hsize_t)chunk_lo[i];
    return true;
}

/* A decode begun in the background (gds_filtered_decode_chunks_begin): 1
 * with *job (an address) to hand to h5gds_py_decode_chunks_end once, 0 not
 * taken, -1 failed (error stack); the arrays may be freed on return. */
API int h5gds_py_decode_chunks_begin(int64_t dset, size_t n, const uint64_t *src, const uint64_t *src_bytes,
                                     const uint32_t *masks, const uint64_t *dst, const uint64_t *chunk_lo,
                                     size_t rank, uint64_t stream, uint64_t *job)
{
    given_t g = {0};
    int rc = -1;
    gds_decode_job_t *j = NULL;
    *job = 0;
    if (take_given(&g, n, src, src_bytes, masks, dst, chunk_lo, rank))
        rc = gds_filtered_decode_chunks_begin((hid_t)dset, n, g.srcs, g.sizes, g.mask, g.dsts, g.lo, (int)rank,
                                              (void *)(uintptr_t)stream, &j);
    free_given(&g);
    if (rc == 1)
        *job = (uint64_t)(uintptr_t)j;
    return rc;
}

/* Ends a decode begun (waits for it): 1 decoded, the refused chunks HDF5
 * judges read by its filters (*hdf5_chunks of them); 0 not taken (HDF5's
 * filters must read them); -1 failed, with the HDF5 error stack set. */
API int h5gds_py_decode_chunks_end(uint64_t job, size_t *hdf5_chunks)
{
    return gds_filtered_decode_chunks_end((gds_decode_job_t *)(uintptr_t)job, hdf5_chunks);
}

/* Waits for a decode begun, calling no HDF5 function: the caller need not
 * hold h5py's lock (other threads' HDF5 calls go on meanwhile); its end
 * follows. */
API void h5gds_py_decode_chunks_wait(uint64_t job) { gds_filtered_decode_chunks_wait((gds_decode_job_t *)(uintptr_t)job); }
