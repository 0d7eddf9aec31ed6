/*
 * Snapshot memory for write-behind (write_behind.h), kept and prepared
 * outside any file: the memory of a closed file's snapshot arena is kept for
 * the next file, and a preparation allocates it ahead, before any file.
 * Write-behind takes its arena from here at a file's first snapshot and
 * gives it back when the file is destroyed; this file never calls
 * write-behind.
 */
#ifndef H5GDS_SNAPSHOT_MEMORY_H
#define H5GDS_SNAPSHOT_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

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

/* ---- for write-behind (write_behind.c) ---- */

/* One allocation of snapshot memory. */
typedef struct gds_snapshot_memory {
    char *base;
    size_t size;
    bool device, pinned; /* device memory; else host memory, pinned or plain */
    void *ctx;           /* the CUDA context (NULL: plain host memory of a process without one) */
} gds_snapshot_memory_t;

/* A file's arena while the file is open: listed, so that a preparation
 * finds it serving already (it is kept when the file closes) and
 * gds_wb_memory_info counts it. */
typedef struct gds_snapshot_memory_holder {
    gds_snapshot_memory_t memory;
    bool listed;
    struct gds_snapshot_memory_holder *next;
} gds_snapshot_memory_holder_t;

/* The kept memory of this kind (device, else host), at least `size` bytes,
 * for context `ctx`, moved into `*out`; false when none serves. A
 * preparation of this kind in progress is waited for first: the memory is
 * on its way, and allocating it a second time would take as long. */
bool gds_snapshot_memory_take_kept(bool device, size_t size, void *ctx, gds_snapshot_memory_t *out);
/* Keeps `memory` for the next file; of two of one kind and context the
 * larger one stays, else the newer one (the other is freed). */
void gds_snapshot_memory_keep(const gds_snapshot_memory_t *memory);
/* Frees it now (in its context; nothing when `base` is NULL). */
void gds_snapshot_memory_free(const gds_snapshot_memory_t *memory);
/* A file's arena, `holder->memory`, is in use: listed, and counted as found
 * ready (kept or prepared) or allocated at its first snapshot. */
void gds_snapshot_memory_opened(gds_snapshot_memory_holder_t *holder, bool was_ready);
/* Its file is destroyed: no longer listed (the caller keeps the memory). */
void gds_snapshot_memory_closed(gds_snapshot_memory_holder_t *holder);

#endif
