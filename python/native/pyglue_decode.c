/*
 * The Python package's loader, compressed columns (through ctypes): stored
 * chunks the loader read itself, decoded on the GPU into their places.
 */
#include <stdint.h>
#include <stdlib.h>

#include "gds_filtered.h"
#include "pyglue_common.h"

/* ---- the loader's compressed columns: stored chunks it read itself,
 * decoded on the GPU into their places (gds_filtered_decode_chunks: 1
 * decoded, the refused chunks HDF5 judges read by its filters, *hdf5_chunks
 * of them; 0 not taken (HDF5's filters must read them), -1 failed with the
 * HDF5 error stack set). Addresses as integers, as ctypes hands them;
 * chunk_lo: each chunk's first element, `rank` coordinates a chunk (NULL:
 * a refused chunk leaves them all to the caller). */
API int h5gds_py_decode_chunks(int64_t dset, size_t n, const uint64_t *src, const uint64_t *src_bytes,
                               const uint32_t *masks, const uint64_t *dst, const uint64_t *chunk_lo, size_t rank,
                               size_t *hdf5_chunks, uint64_t stream)
{
    const void **srcs = malloc(n * sizeof *srcs);
    void **dsts = malloc(n * sizeof *dsts);
    size_t *sizes = malloc(n * sizeof *sizes);
    unsigned *mask = malloc(n * sizeof *mask);
    hsize_t *lo = chunk_lo ? malloc(n * rank * sizeof *lo) : NULL;
    int rc = -1;
    if (srcs && dsts && sizes && mask && (!chunk_lo || lo)) {
        for (size_t i = 0; i < n; i++) {
            srcs[i] = (const void *)(uintptr_t)src[i];
            dsts[i] = (void *)(uintptr_t)dst[i];
            sizes[i] = (size_t)src_bytes[i];
            mask[i] = masks ? (unsigned)masks[i] : 0u;
        }
        for (size_t i = 0; lo && i < n * rank; i++)
            lo[i] = (hsize_t)chunk_lo[i];
        rc = gds_filtered_decode_chunks((hid_t)dset, n, srcs, sizes, mask, dsts, lo, (int)rank, hdf5_chunks,
                                        (void *)(uintptr_t)stream);
    }
    free(srcs);
    free(dsts);
    free(sizes);
    free(mask);
    free(lo);
    return rc;
}
