/* Raw file bytes through a gds file's own engine, for the glue above the
 * driver's callbacks (GPU decode of filtered chunks). */
#ifndef H5GDS_VFD_RAW_H
#define H5GDS_VFD_RAW_H

#include "gds_hdf5.h"
#include "../engine/engine.h"

/* Starts reading file ranges of the gds file `file_id` into the segments'
 * buffers (device memory too): the driver's buffered small writes and
 * write-behind's writes overlapping them reach the file first. The bytes
 * are read once (gds_request_t.read_once: O_DIRECT where not cached). -1 with
 * `st`; else the ticket in *io (gds_io_wait). */
int gds_vfd_submit_raw_read(hid_t file_id, const gds_segment_t *segs, size_t nseg, gds_io_t **io, gds_status_t *st);

/* Whether most of the file offsets (at least half) are in the page cache:
 * a warm read; false where the kernel cannot say for one of them (a read
 * is then sized for the disk) and for a file not of the gds driver. */
bool gds_vfd_raw_mostly_cached(hid_t file_id, const uint64_t *offsets, size_t n);

/* Held raw writes (gds_vfd_held.c), for the GPU write of filtered
 * datasets: from gds_vfd_hold_writes until gds_vfd_hold_end, the calling
 * thread's raw writes of device memory to the file are recorded, not
 * written; their buffers must stay unchanged until they are waited for.
 * gds_vfd_held_submit starts what is recorded as one engine request in
 * `slot` (< GDS_HELD_SLOTS), after waiting for the slot's previous one, and
 * reserves file space `ahead` bytes past it; gds_vfd_held_wait waits for a
 * slot. A metadata write of the file writes what is recorded and waits for
 * every slot first. Each returns the first failure of any held write (-1
 * with `st`). gds_vfd_hold_end writes what is left, waits for everything
 * and ends the hold; NULL from gds_vfd_hold_writes: an error pushed (not a
 * gds file, out of memory, a hold already open on the thread). The others
 * take a NULL hold too (nothing held: 0). */
/* Three batches in flight: a batch of 80-130 MB of stored bytes is 5-8
 * engine blocks of 16 MiB, and the disk's write ceiling was reached with 16
 * such writes at once (two slots kept about 10 in flight). */
#define GDS_HELD_SLOTS 3
typedef struct gds_held_writes gds_held_writes_t;
gds_held_writes_t *gds_vfd_hold_writes(hid_t file_id);
int gds_vfd_held_submit(gds_held_writes_t *h, unsigned slot, uint64_t ahead, gds_status_t *st);
int gds_vfd_held_wait(gds_held_writes_t *h, unsigned slot, gds_status_t *st);
int gds_vfd_hold_end(gds_held_writes_t *h, gds_status_t *st);
/* What a hold has done so far (for H5GDS_CODEC_DEBUG's trace). */
typedef struct gds_held_counts {
    unsigned submits;          /* engine requests started by gds_vfd_held_submit */
    size_t pieces;             /* their pieces after merging adjacent ones */
    unsigned metadata_waits;   /* metadata writes that found held writes to finish first */
    double metadata_wait_s;    /* the time those spent on them */
} gds_held_counts_t;
void gds_vfd_held_get_counts(const gds_held_writes_t *h, gds_held_counts_t *out);

/* For tests/test_held_writes.c only (exported, not public API): a hold of
 * the calling thread's raw writes to `file_id` that takes host buffers
 * too, so that the held path runs without a GPU. 0, or -1 (begin: an
 * HDF5 error pushed; the others: the reason in `err`). */
__attribute__((visibility("default"))) int gds_test_hold_begin(hid_t file_id);
__attribute__((visibility("default"))) int gds_test_hold_submit(unsigned slot, char *err, size_t errlen);
__attribute__((visibility("default"))) int gds_test_hold_end(char *err, size_t errlen);

#endif
