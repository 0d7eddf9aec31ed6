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
 * decoded, 0 not taken (HDF5's filters must read them), -1 failed with the
 * HDF5 error stack set). Addresses as integers, as ctypes hands them. */
API int h5gds_py_decode_chunks(int64_t dset, size_t n, const uint64_t *src, const uint64_t *src_bytes,
                               const uint32_t *masks, const uint64_t *dst, uint64_t stream)
{
    const void **srcs = malloc(n * sizeof *srcs);
    void **dsts = malloc(n * sizeof *dsts);
    size_t *sizes = malloc(n * sizeof *sizes);
    unsigned *mask = malloc(n * sizeof *mask);
    int rc = -1;
    if (srcs && dsts && sizes && mask) {
        for (size_t i = 0; i < n; i++) {
            srcs[i] = (const void *)(uintptr_t)src[i];
            dsts[i] = (void *)(uintptr_t)dst[i];
            sizes[i] = (size_t)src_bytes[i];
            mask[i] = masks ? (unsigned)masks[i] : 0u;
        }
        rc = gds_filtered_decode_chunks((hid_t)dset, n, srcs, sizes, mask, dsts, (void *)(uintptr_t)stream);
    }
    free(srcs);
    free(dsts);
    free(sizes);
    free(mask);
    return rc;
}

/* After h5gds_py_decode_chunks returned 0 for a chunk whose stream the
 * GPU found corrupt: what it found (NULL otherwise; gds_filtered_refusal). */
API const char *h5gds_py_gpu_refusal(void) { return gds_filtered_refusal(); }
