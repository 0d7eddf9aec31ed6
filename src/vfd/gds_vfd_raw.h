/* Raw file bytes through a gds file's own engine, for the glue above the
 * driver's callbacks (GPU decode of filtered chunks). */
#ifndef H5GDS_VFD_RAW_H
#define H5GDS_VFD_RAW_H

#include "gds_hdf5.h"
#include "../engine/engine.h"

/* Starts reading file ranges of the gds file `file_id` into the segments'
 * buffers (device memory too): the driver's buffered small writes and
 * write-behind's writes overlapping them reach the file first. -1 with
 * `st`; else the ticket in *io (gds_io_wait). */
int gds_vfd_submit_raw_read(hid_t file_id, const gds_segment_t *segs, size_t nseg, gds_io_t **io, gds_status_t *st);

#endif
