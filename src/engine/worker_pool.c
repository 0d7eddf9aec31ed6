/* Persistent worker threads; see worker_pool.h. */
#include "worker_pool.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

struct gds_job {
    gds_job_fn fn;
    void *ctx;
    size_t ntasks;
    size_t next;          /* next unclaimed task (atomic) */
    unsigned want;        /* most workers that may join */
    unsigned joined;      /* workers that have joined (under pool lock) */
    unsigned running;     /* workers still inside fn (under pool lock) */
    int failed;           /* atomic: set by the first failing worker */
    gds_status_t error;   /* first failure, written under pool lock */
    pthread_cond_t done;
    struct gds_job *queue_next;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;
    gds_job_t *head, *tail;
    unsigned nthreads;
    gds_worker_t workers[GDS_MAX_WORKERS];
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER};

static bool job_open(const gds_job_t *job)
{
    return job->joined < job->want && !__atomic_load_n(&job->failed, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&job->next, __ATOMIC_ACQUIRE) < job->ntasks;
}

/* First queued job that still takes workers; drops finished ones from the queue. */
static gds_job_t *pick_job_locked(void)
{
    gds_job_t **link = &pool.head, *prev = NULL;
    while (*link) {
        gds_job_t *job = *link;
        if (job_open(job))
            return job;
        /* No more workers will join this one: unlink it. */
        *link = job->queue_next;
        if (pool.tail == job)
            pool.tail = prev;
        job->queue_next = NULL;
    }
    return NULL;
}

static void *worker_main(void *arg)
{
    gds_worker_t *self = arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        gds_job_t *job;
        while (!(job = pick_job_locked()))
            pthread_cond_wait(&pool.work, &pool.lock);
        job->joined++;
        job->running++;
        pthread_mutex_unlock(&pool.lock);

        gds_status_t st = {0, ""};
        int rc = job->fn(job, job->ctx, self, &st);

        pthread_mutex_lock(&pool.lock);
        if (rc != 0 && !job->failed) {
            job->error = st;
            __atomic_store_n(&job->failed, 1, __ATOMIC_RELEASE);
        }
        if (--job->running == 0 && !job_open(job))
            pthread_cond_signal(&job->done);
    }
    return NULL;
}

/* A forked child has none of the parent's threads: start from an empty pool
 * (the staging rings are lost with the parent's CUDA context anyway). */
static void pool_reset_in_child(void)
{
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.work, NULL);
    pool.head = pool.tail = NULL;
    pool.nthreads = 0;
    for (unsigned i = 0; i < GDS_MAX_WORKERS; i++)
        pool.workers[i].staging = NULL;
}

static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, pool_reset_in_child);
}

static int ensure_threads_locked(unsigned n, gds_status_t *st)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_fork_handler);
    if (n > GDS_MAX_WORKERS)
        n = GDS_MAX_WORKERS;
    while (pool.nthreads < n) {
        pthread_t tid;
        pthread_attr_t attr;
        gds_worker_t *w = &pool.workers[pool.nthreads];
        w->index = pool.nthreads;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&tid, &attr, worker_main, w);
        pthread_attr_destroy(&attr);
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

int gds_pool_run(unsigned nworkers, size_t ntasks, gds_job_fn fn, void *ctx, gds_status_t *st)
{
    if (ntasks == 0)
        return 0;
    if (nworkers == 0)
        nworkers = 1;
    if (nworkers > ntasks)
        nworkers = (unsigned)ntasks;

    gds_job_t job;
    memset(&job, 0, sizeof job);
    job.fn = fn;
    job.ctx = ctx;
    job.ntasks = ntasks;
    job.want = nworkers;
    pthread_cond_init(&job.done, NULL);

    pthread_mutex_lock(&pool.lock);
    if (ensure_threads_locked(nworkers, st) != 0) {
        pthread_mutex_unlock(&pool.lock);
        pthread_cond_destroy(&job.done);
        return -1;
    }
    if (pool.tail)
        pool.tail->queue_next = &job;
    else
        pool.head = &job;
    pool.tail = &job;
    pthread_cond_broadcast(&pool.work);
    /* Done when nobody runs it and nobody can join it any more. */
    while (job.running > 0 || job_open(&job) || job.joined == 0)
        pthread_cond_wait(&job.done, &pool.lock);
    /* Unlink if still queued (a worker unlinks lazily). */
    for (gds_job_t **link = &pool.head, *prev = NULL; *link; prev = *link, link = &(*link)->queue_next) {
        if (*link == &job) {
            *link = job.queue_next;
            if (pool.tail == &job)
                pool.tail = prev;
            break;
        }
    }
    pthread_mutex_unlock(&pool.lock);
    pthread_cond_destroy(&job.done);

    if (job.failed) {
        *st = job.error;
        return -1;
    }
    return 0;
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
