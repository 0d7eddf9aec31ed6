/*
 * The transfer layer (transfer.c): a request straight to the strategies,
 * past write-behind. The layers above it use it: write-behind
 * (write_behind.c) for its background writes, and the file's public entry
 * points (file_io.c) for every request write-behind does not take. It
 * never calls up.
 */
#ifndef H5GDS_TRANSFER_H
#define H5GDS_TRANSFER_H

#include "file_internal.h"

/* Asynchronous: every piece on the pool; the ticket is collected with
 * gds_io_wait (engine.h). */
int gds_transfer_submit(gds_file_t *file, const gds_request_t *req, gds_io_t **io, gds_status_t *st);

/* Synchronous: host pieces on the calling thread, as sec2 would. */
int gds_transfer_run(gds_file_t *file, const gds_request_t *req, gds_status_t *st);

#endif
