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

typedef struct gds_wb gds_wb_t;

gds_wb_t *gds_wb_create(size_t budget);
/* Frees the arenas; the caller drained first. */
void gds_wb_destroy(gds_wb_t *wb);

/* Snapshot memory of closed files is kept for the next one (pinning is
 * slow), one arena per kind (device, host), the larger one when two meet.
 * Freed here (after any preparation in progress, below has ended), at
 * engine shutdown or when the application asks; arenas of open files are
 * not touched (kept again when their file closes). */
void gds_wb_release_kept(void);

/* ---- snapshot memory made ready ahead ----
 * A file allocates its snapshot memory at its first snapshot, on the
 * writer's critical path: pinning or allocating gigabytes takes a second or
 * more, so a process's first checkpoint stalls that long and later ones do
 * not. A preparation allocates it ahead, as the kept arena the next file
 * with write-behind takes instead of allocating (one whose budget is at
 * most `bytes`, whose memory kind it wants, in the same CUDA context).
 *   kind DEVICE: device memory of context `ctx` (required);
 *   kind HOST:   pinned host memory usable from `ctx` (portable), or with
 *                no context plain host memory with every page touched (a
 *                process without CUDA snapshots into that);
 *   kind AUTO:   DEVICE when `ctx` is given and the device has the room,
 *                else HOST.
 * Nothing is allocated when a kept arena, or one an open file holds (kept
 * when that file closes), already serves. A file whose first snapshot
 * comes while a preparation of the kind it wants is in progress waits for
 * it rather than allocating a second arena. Failures: EINVAL (no context
 * for device memory, 0 bytes), ENOMEM (more than the device or the machine
 * has), with the reason in `st`. */
int gds_wb_prepare(size_t bytes, gds_wb_memory_t kind, void *ctx, gds_status_t *st);

/* The same on a thread of its own: returns once started (the arguments
 * checked: the failures above that need no allocation come back here). */
typedef struct gds_wb_prep gds_wb_prep_t;
int gds_wb_prepare_start(size_t bytes, gds_wb_memory_t kind, void *ctx, gds_wb_prep_t **out, gds_status_t *st);
/* Whether the preparation has ended. */
bool gds_wb_prepare_done(gds_wb_prep_t *prep);
/* Waits for its end: 0, or -1 with what failed (may be asked again). */
int gds_wb_prepare_wait(gds_wb_prep_t *prep, gds_status_t *st);
/* Gives the handle back; a preparation in progress goes on (and its thread
 * is joined later: by the next preparation, or at shutdown). */
void gds_wb_prepare_free(gds_wb_prep_t *prep);

/* The process's snapshot memory, for diagnostics and tests. */
typedef struct gds_wb_memory_info {
    size_t ready_device_bytes; /* kept device arena: what the next file can take (0: none) */
    size_t ready_host_bytes;   /* kept host arena */
    bool ready_host_pinned;    /* that host arena is pinned */
    size_t open_bytes;         /* arenas open files hold */
    unsigned preparing;        /* preparations in progress */
    uint64_t files_ready;      /* files that found their arena ready (kept or prepared) */
    uint64_t files_allocated;  /* files that allocated theirs at their first snapshot */
    uint64_t prepared;         /* arenas preparations allocated */
} gds_wb_memory_info_t;
void gds_wb_memory_info(gds_wb_memory_info_t *info);

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
