/* Between the HDF5 glue and the engine (gds_transfer.c). */
#ifndef H5GDS_TRANSFER_H
#define H5GDS_TRANSFER_H

#include <stdbool.h>

#include "H5FDgds.h"
#include "../engine/engine.h"

/* The stream ordering a transfer list asks for (H5Pset_dxpl_gds_stream),
 * into the request; legacy-stream ordering when it asks for none. */
void gds_transfer_order(hid_t dxpl_id, gds_request_t *req);

/* HDF5's H5FD_CTL_MEM_COPY: memcpy for host memory on both sides, the CUDA
 * driver when either side is device memory (`device` then true). 0, or -1
 * with an HDF5 error pushed. */
int gds_mem_copy(void *dst, const void *src, size_t len, bool *device);

void gds_stats_to_public(const gds_engine_stats_t *in, H5FD_gds_stats_t *out);

#endif
