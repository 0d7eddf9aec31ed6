/*
 * A process-wide pool of persistent I/O threads.
 *
 * A job is `ntasks` independent tasks (usually file blocks). Up to
 * `nworkers` threads join it; each runs the job function once, and the
 * function claims task indices with gds_job_next() until none are left, so a
 * worker can pipeline consecutive tasks (e.g. overlap disk I/O of one block
 * with the PCIe copy of the previous). The first failure stops further claims
 * and is returned by gds_job_wait. Jobs live on the heap: a submitter may
 * keep several in flight and collect them later, from any thread.
 *
 * Threads are created on demand, never per call, and stopped and joined by
 * gds_pool_shutdown (the driver's termination) after the jobs in flight.
 */
#ifndef H5GDS_WORKER_POOL_H
#define H5GDS_WORKER_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"

#define GDS_MAX_WORKERS 256

typedef struct gds_job gds_job_t;

/* Per-thread state a strategy may hang resources on (pinned buffers,
 * streams). `release` frees it when the thread stops; the strategy sets it
 * together with `staging`. A worker that helps with a job while it waits
 * for it (a job submitted from inside another) uses its `nested` state, so
 * the outer job's resources are never shared. */
typedef struct gds_worker {
    unsigned index;
    void *staging;
    void (*release)(void *staging);
    struct gds_worker *nested;
} gds_worker_t;

typedef int (*gds_job_fn)(gds_job_t *job, void *ctx, gds_worker_t *worker, gds_status_t *st);

/* Queues a job for up to `nworkers` pool threads; NULL with `st` when no
 * thread can be started. `ctx` must outlive the job. */
gds_job_t *gds_pool_submit(unsigned nworkers, size_t ntasks, gds_job_fn fn, void *ctx, gds_status_t *st);
/* Whether the job has ended (all tasks done, or failed and drained). */
bool gds_job_done(gds_job_t *job);
/* Waits for the job and frees it; 0, or -1 with the first failure. */
int gds_job_wait(gds_job_t *job, gds_status_t *st);
/* Submit + wait. */
int gds_pool_run(unsigned nworkers, size_t ntasks, gds_job_fn fn, void *ctx, gds_status_t *st);

/* Claims the next task; false when all are claimed or the job failed. */
bool gds_job_next(gds_job_t *job, size_t *index);

/* Waits for every job in flight, stops and joins the threads, releases
 * their state. Safe to call when no thread was started. */
void gds_pool_shutdown(void);
unsigned gds_pool_threads(void);

#endif
