/*
 * A process-wide pool of persistent I/O threads.
 *
 * A job is `ntasks` independent tasks (usually file blocks). Up to
 * `nworkers` threads join it; each runs the job function once, and the
 * function claims task indices with gds_job_next() until none are left, so a
 * worker can pipeline consecutive tasks (e.g. overlap disk I/O of one block
 * with the PCIe copy of the previous). The first failure stops further claims
 * and is returned to the caller. Threads are created on demand and never
 * exit; no thread is created per call.
 */
#ifndef H5GDS_WORKER_POOL_H
#define H5GDS_WORKER_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"

#define GDS_MAX_WORKERS 256

typedef struct gds_job gds_job_t;

/* Per-thread state a data path may hang resources on (pinned buffers, streams). */
typedef struct gds_worker {
    unsigned index;
    void *staging; /* owned by staged_path.c */
} gds_worker_t;

typedef int (*gds_job_fn)(gds_job_t *job, void *ctx, gds_worker_t *worker, gds_status_t *st);

/* Runs the job to completion on up to `nworkers` pool threads. */
int gds_pool_run(unsigned nworkers, size_t ntasks, gds_job_fn fn, void *ctx, gds_status_t *st);

/* Claims the next task; false when all are claimed or the job failed. */
bool gds_job_next(gds_job_t *job, size_t *index);

#endif
