/* Persistent worker threads; see worker_pool.h. */
#include "worker_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* How deep a pool thread may nest helping (a job waited for from inside a
 * job waited for from inside a job...). Deeper waits just block, which is
 * safe: the job is then being worked on by other threads. */
#define GDS_MAX_HELP_DEPTH 4

struct gds_job {
    gds_job_fn fn;
    void *ctx;
    size_t ntasks;
    size_t next;          /* next unclaimed task (atomic) */
    unsigned want;        /* most workers that may join (helpers excepted) */
    unsigned joined;      /* workers that have joined (under pool lock) */
    unsigned running;     /* workers still inside fn (under pool lock) */
    bool ended;           /* under pool lock */
    bool queued;          /* in the pool's queue (under pool lock) */
    int failed;           /* atomic: set by the first failing worker */
    gds_status_t error;   /* first failure, written under pool lock */
    pthread_cond_t done;
    struct gds_job *queue_next;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;  /* workers wait here for jobs (or the stop) */
    pthread_cond_t idle;  /* shutdown waits here for the jobs in flight */
    gds_job_t *head, *tail;
    unsigned nthreads;
    unsigned inflight;    /* jobs submitted and not yet ended */
    bool stopping;
    pthread_t tids[GDS_MAX_WORKERS];
    gds_worker_t workers[GDS_MAX_WORKERS];
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

/* Shutdowns one at a time; submissions wait while one runs. */
static pthread_mutex_t shutdown_lock = PTHREAD_MUTEX_INITIALIZER;

/* The pool worker the calling thread is (NULL on other threads), and how
 * deep it is in helping. */
static _Thread_local gds_worker_t *current_worker;
static _Thread_local unsigned help_depth;

static bool tasks_left(const gds_job_t *job)
{
    return !__atomic_load_n(&job->failed, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&job->next, __ATOMIC_ACQUIRE) < job->ntasks;
}

static bool job_open(const gds_job_t *job)
{
    return job->joined < job->want && tasks_left(job);
}

static void unlink_locked(gds_job_t *job)
{
    if (!job->queued)
        return;
    for (gds_job_t **link = &pool.head, *prev = NULL; *link; prev = *link, link = &(*link)->queue_next) {
        if (*link == job) {
            *link = job->queue_next;
            if (pool.tail == job)
                pool.tail = prev;
            break;
        }
    }
    job->queue_next = NULL;
    job->queued = false;
}

/* First queued job that still takes workers; drops closed ones from the queue. */
static gds_job_t *pick_job_locked(void)
{
    gds_job_t *job = pool.head;
    while (job) {
        gds_job_t *next = job->queue_next;
        if (job_open(job))
            return job;
        unlink_locked(job); /* no more workers will join this one */
        job = next;
    }
    return NULL;
}

/* A worker left the job (after fn returned rc): record a failure, and end
 * the job when nobody runs it and nobody can join it any more. */
static void leave_job_locked(gds_job_t *job, int rc, const gds_status_t *st)
{
    if (rc != 0 && !__atomic_load_n(&job->failed, __ATOMIC_RELAXED)) {
        job->error = *st;
        __atomic_store_n(&job->failed, 1, __ATOMIC_RELEASE);
    }
    if (--job->running == 0 && !job_open(job) && !job->ended) {
        job->ended = true;
        unlink_locked(job);
        pthread_cond_broadcast(&job->done);
        if (--pool.inflight == 0)
            pthread_cond_broadcast(&pool.idle);
    }
}

static void run_job(gds_job_t *job, gds_worker_t *worker)
{
    gds_status_t st = {0, ""};
    int rc = job->fn(job, job->ctx, worker, &st);
    pthread_mutex_lock(&pool.lock);
    leave_job_locked(job, rc, &st);
}

static void release_worker_state(gds_worker_t *self)
{
    gds_worker_t *nested = self->nested;
    if (self->staging && self->release)
        self->release(self->staging);
    self->staging = NULL;
    self->release = NULL;
    self->nested = NULL;
    while (nested) { /* helpers' states, on the heap */
        gds_worker_t *next = nested->nested;
        if (nested->staging && nested->release)
            nested->release(nested->staging);
        free(nested);
        nested = next;
    }
}

static void *worker_main(void *arg)
{
    gds_worker_t *self = arg;
    current_worker = self;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        gds_job_t *job;
        while (!(job = pick_job_locked()) && !pool.stopping)
            pthread_cond_wait(&pool.work, &pool.lock);
        if (!job)
            break; /* stopping, and nothing left to do */
        job->joined++;
        job->running++;
        pthread_mutex_unlock(&pool.lock);
        run_job(job, self); /* returns with the lock held */
    }
    pthread_mutex_unlock(&pool.lock);
    /* Free what the strategies hung on this thread (pinned rings, streams)
     * from the thread that used it. */
    release_worker_state(self);
    current_worker = NULL;
    return NULL;
}

/* A forked child has none of the parent's threads: start from an empty pool
 * (the staging rings are lost with the parent's CUDA context anyway). */
static void pool_reset_in_child(void)
{
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.work, NULL);
    pthread_cond_init(&pool.idle, NULL);
    pthread_mutex_init(&shutdown_lock, NULL);
    pool.head = pool.tail = NULL;
    pool.nthreads = 0;
    pool.inflight = 0;
    pool.stopping = false;
    for (unsigned i = 0; i < GDS_MAX_WORKERS; i++)
        memset(&pool.workers[i], 0, sizeof pool.workers[i]);
}

static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, pool_reset_in_child);
}

static int ensure_threads_locked(unsigned n, gds_status_t *st)
{
    if (n > GDS_MAX_WORKERS)
        n = GDS_MAX_WORKERS;
    while (pool.nthreads < n) {
        gds_worker_t *w = &pool.workers[pool.nthreads];
        memset(w, 0, sizeof *w);
        w->index = pool.nthreads;
        int rc = pthread_create(&pool.tids[pool.nthreads], NULL, worker_main, w);
        if (rc != 0) {
            if (pool.nthreads > 0)
                return 0; /* run with the threads we have */
            gds_status_set(st, rc, "cannot start I/O worker thread");
            return -1;
        }
        pool.nthreads++;
    }
    return 0;
}

gds_job_t *gds_pool_submit(unsigned nworkers, size_t ntasks, gds_job_fn fn, void *ctx, gds_status_t *st)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_fork_handler);
    gds_job_t *job = calloc(1, sizeof *job);
    if (!job) {
        gds_status_set(st, ENOMEM, "out of memory for an I/O job");
        return NULL;
    }
    if (nworkers == 0)
        nworkers = 1;
    /* The pool grows to what the caller may use, not to this job's task
     * count: many small jobs in flight at once (write-behind's drains, one
     * job per snapshot of one or two blocks) each take a different worker. */
    unsigned grow_to = nworkers;
    if (nworkers > ntasks)
        nworkers = ntasks ? (unsigned)ntasks : 1;
    job->fn = fn;
    job->ctx = ctx;
    job->ntasks = ntasks;
    job->want = nworkers;
    pthread_cond_init(&job->done, NULL);
    if (ntasks == 0) {
        job->ended = true;
        return job;
    }
    /* Not while a shutdown joins the threads: wait for it to finish. */
    pthread_mutex_lock(&shutdown_lock);
    pthread_mutex_lock(&pool.lock);
    pthread_mutex_unlock(&shutdown_lock);
    if (ensure_threads_locked(grow_to, st) != 0) {
        pthread_mutex_unlock(&pool.lock);
        pthread_cond_destroy(&job->done);
        free(job);
        return NULL;
    }
    if (pool.tail)
        pool.tail->queue_next = job;
    else
        pool.head = job;
    pool.tail = job;
    job->queued = true;
    pool.inflight++;
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    return job;
}

bool gds_job_done(gds_job_t *job)
{
    pthread_mutex_lock(&pool.lock);
    bool ended = job->ended;
    pthread_mutex_unlock(&pool.lock);
    return ended;
}

/* The state a pool thread uses when it helps at the current depth. */
static gds_worker_t *helper_state(gds_worker_t *self, unsigned depth)
{
    gds_worker_t *w = self;
    for (unsigned d = 0; d < depth; d++) {
        if (!w->nested) {
            w->nested = calloc(1, sizeof *w->nested);
            if (!w->nested)
                return NULL;
            w->nested->index = self->index;
        }
        w = w->nested;
    }
    return w;
}

int gds_job_wait(gds_job_t *job, gds_status_t *st)
{
    pthread_mutex_lock(&pool.lock);
    while (!job->ended) {
        /* A pool thread waiting for a job works on it instead, so waiting
         * never depends on another thread being free (a pool of one). */
        gds_worker_t *helper = NULL;
        if (current_worker && help_depth < GDS_MAX_HELP_DEPTH && tasks_left(job))
            helper = helper_state(current_worker, help_depth + 1);
        if (helper) {
            job->joined++;
            job->running++;
            pthread_mutex_unlock(&pool.lock);
            help_depth++;
            run_job(job, helper); /* returns with the lock held */
            help_depth--;
            continue;
        }
        pthread_cond_wait(&job->done, &pool.lock);
    }
    pthread_mutex_unlock(&pool.lock);
    int failed = __atomic_load_n(&job->failed, __ATOMIC_ACQUIRE);
    if (failed)
        *st = job->error;
    pthread_cond_destroy(&job->done);
    free(job);
    return failed ? -1 : 0;
}

int gds_pool_run(unsigned nworkers, size_t ntasks, gds_job_fn fn, void *ctx, gds_status_t *st)
{
    if (ntasks == 0)
        return 0;
    gds_job_t *job = gds_pool_submit(nworkers, ntasks, fn, ctx, st);
    return job ? gds_job_wait(job, st) : -1;
}

bool gds_job_next(gds_job_t *job, size_t *index)
{
    if (__atomic_load_n(&job->failed, __ATOMIC_ACQUIRE))
        return false;
    size_t i = __atomic_fetch_add(&job->next, 1, __ATOMIC_ACQ_REL);
    if (i >= job->ntasks)
        return false;
    *index = i;
    return true;
}

void gds_pool_shutdown(void)
{
    if (current_worker)
        return; /* a worker cannot join itself; never called from a job */
    pthread_mutex_lock(&shutdown_lock);
    pthread_mutex_lock(&pool.lock);
    while (pool.inflight > 0)
        pthread_cond_wait(&pool.idle, &pool.lock);
    unsigned n = pool.nthreads;
    pool.stopping = true;
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    for (unsigned i = 0; i < n; i++)
        pthread_join(pool.tids[i], NULL);
    pthread_mutex_lock(&pool.lock);
    pool.nthreads = 0;
    pool.stopping = false;
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&shutdown_lock);
}

unsigned gds_pool_threads(void)
{
    pthread_mutex_lock(&pool.lock);
    unsigned n = pool.nthreads;
    pthread_mutex_unlock(&pool.lock);
    return n;
}
