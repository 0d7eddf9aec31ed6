/*
 * Write-behind: a raw-data write returns once its bytes are copied into a
 * snapshot buffer; the engine writes the snapshot to the file in the
 * background (an asynchronous request on the pool, through the usual
 * strategies) and frees it when that is done.
 *
 * Snapshots live in two arenas of the file, allocated on first use, whose
 * bytes in use together never exceed the budget: device data goes into a
 * device arena (a device-to-device copy, the fastest snapshot) when one
 * could be allocated, else into the host arena (pinned when CUDA is
 * loaded); host data goes into the host arena. When the arenas are full a
 * writer waits for the oldest background write (back-pressure, counted in
 * the statistics). A request larger than the budget is written through.
 *
 * Device snapshots of a request ordered against a stream (LEGACY or
 * STREAM) do not make the CPU wait for the copy: the copy is queued after
 * the application's work on that stream, an event is recorded after it,
 * and the application's stream waits for that event. The write returns at
 * once; GPU work queued afterwards on that stream (or on streams that
 * synchronise with it: blocking streams for LEGACY) runs after the copy, so
 * it may overwrite the buffer; cudaFree (synchronous) may free it. NOT
 * ordered: work on streams that do not synchronise with the ordering
 * stream (non-blocking streams, another thread's per-thread default
 * stream) and CPU writes through mapped host memory, until the
 * application synchronises with the ordering stream. The background write
 * waits for the event on the GPU (staged) or on its worker thread
 * (cuFile), so reads and drains still see the bytes; raw reads wait for
 * pending copies first (they may land in a buffer a copy still reads).
 * Ordering NONE, host and managed sources (the CPU may write those next),
 * and snapshots into host memory are complete when the call returns.
 *
 * Order and coherence: every other request of the file (reads, writes that
 * are not taken, metadata) first waits for the background writes that
 * overlap it; a new snapshot that overlaps a pending one waits for it too,
 * so writes land in the order they were made and reads see every earlier
 * write. A background failure is kept: it fails every later raw-data
 * request of the file and every drain, so the file is never reported
 * durable after it.
 */
#ifndef H5GDS_WRITE_BEHIND_H
#define H5GDS_WRITE_BEHIND_H

#include "file_internal.h"
/* The snapshot memory kept between files and prepared ahead
 * (gds_wb_prepare*, gds_wb_release_kept, gds_wb_memory_info): declared
 * there, reached through this header too. */
#include "snapshot_memory.h"

typedef struct gds_wb gds_wb_t;

gds_wb_t *gds_wb_create(size_t budget);
/* Frees the arenas; the caller drained first. */
void gds_wb_destroy(gds_wb_t *wb);

/* A raw write: snapshotted and started (1), not taken (0: the caller
 * writes it synchronously, after gds_wb_before), or failed (-1). */
int gds_wb_write(gds_file_t *file, const gds_request_t *req, gds_status_t *st);
/* Before any other request: waits for the overlapping background writes;
 * -1 when a background write has failed and the request is raw data (its
 * bytes may be the ones lost). The file's own metadata still goes out after
 * a failure, as with sec2 after a failed raw write: the file stays openable;
 * the failure is reported by the next raw request, drain, flush and close. */
int gds_wb_before(gds_file_t *file, bool raw, bool read, const gds_segment_t *segs, size_t nseg, gds_status_t *st);
/* Whether no background write is in flight (finished ones are retired). */
bool gds_wb_idle(gds_file_t *file);
/* The file was cut to `size`: claims past it are forgotten. */
void gds_wb_space_cut(gds_file_t *file, uint64_t size);
/* Waits for every background write; -1 with the first failure (kept). */
int gds_wb_drain(gds_file_t *file, gds_status_t *st);

#endif
