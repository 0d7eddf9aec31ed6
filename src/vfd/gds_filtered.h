/* Filtered chunked datasets read into device memory with the decode on the
 * GPU, and written from it with the encode on the GPU (gds_filtered.c). */
#ifndef H5GDS_FILTERED_H
#define H5GDS_FILTERED_H

#include "gds_hdf5.h"

/* 1: read, decoded on the GPU; 0: not taken (another route must read it:
 * a selection or pipeline the GPU path does not serve, or no nvCOMP);
 * -1: failed, on the error stack (naming the dataset, chunk and filter). */
int gds_filtered_read(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void *buf);

/* The same for writes of whole chunks, encoded on the GPU and stored with
 * direct chunk writes: 1 written, 0 not taken, -1 failed (error stack). */
int gds_filtered_write(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, const void *buf);

#endif
