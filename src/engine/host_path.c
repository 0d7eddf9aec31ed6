/*
 * Host memory <-> file: pread/pwrite on the buffered descriptor, as sec2
 * does. Large reads of data already in the page cache are split across the
 * pool (parallel page-cache copies are several times faster than one
 * thread); asynchronous host requests run entirely on the pool.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "strategy.h"

typedef struct host_job {
    gds_file_t *file;
    bool write;
    bool lookahead;  /* asynchronous reads: probe, and read ahead what is not cached */
    int no_nowait;   /* atomic: RWF_NOWAIT is refused here, do not probe again */
    gds_task_map_t tasks;
} host_job_t;

static int read_rest(const host_job_t *job, char *p, size_t len, uint64_t lo, gds_status_t *st)
{
    ssize_t n = gds_pread_full(job->file->fd, p, len, lo);
    if (n < 0) {
        gds_status_set(st, errno, "read of %zu bytes at offset %llu failed", len, (unsigned long long)lo);
        return -1;
    }
    if ((size_t)n < len)
        memset(p + n, 0, len - (size_t)n); /* past end of file */
    return 0;
}

/* Asynchronous reads of many small pieces (a loader's samples): each piece
 * is first read with RWF_NOWAIT, which copies it if it is in the page cache
 * (warm data: that one call is the read) and fails at once if not. A piece
 * that missed gets POSIX_FADV_WILLNEED, which starts its disk read without
 * waiting, and waits in a short list while the worker goes on probing: so
 * each worker keeps up to HOST_LOOKAHEAD pieces (HOST_LOOKAHEAD_BYTES, at
 * least two pieces) in flight on the disk instead of one: blocking preads
 * give a queue depth of `threads`, and random 4 KiB reads need far more
 * (measured on the 2-core machine, 16 threads: 0.21 -> 0.45 GB/s at 4 KiB,
 * 0.89 -> 1.34 at 64 KiB; deeper per-worker queues were slower at 64 KiB).
 * Missed pieces are then read normally, from the page cache the read-ahead
 * filled; the data stays cached for the next epoch, as with any buffered
 * read (O_DIRECT would not leave it there, and a RWF_NOWAIT miss already
 * starts a buffered read of the piece on current kernels). */
#define HOST_LOOKAHEAD 16
#define HOST_LOOKAHEAD_BYTES ((size_t)256 << 10)
#define HOST_LOOKAHEAD_MAX 128

/* H5GDS_TEST_LOOKAHEAD=<pieces>,<bytes>: other depths than the above, for
 * measurements that compare them (bench/tools/loader-profile.py). */
static void lookahead_depth(size_t *pieces, size_t *bytes)
{
    static size_t depth[2]; /* atomic: computed once, same values from any thread */
    if (!__atomic_load_n(&depth[0], __ATOMIC_ACQUIRE)) {
        size_t p = HOST_LOOKAHEAD, b = HOST_LOOKAHEAD_BYTES;
        const char *e = getenv("H5GDS_TEST_LOOKAHEAD");
        unsigned long long ep, eb;
        if (e && sscanf(e, "%llu,%llu", &ep, &eb) == 2 && ep >= 1 && ep <= HOST_LOOKAHEAD_MAX && eb >= 1) {
            p = (size_t)ep;
            b = (size_t)eb;
        }
        __atomic_store_n(&depth[1], b, __ATOMIC_RELAXED);
        __atomic_store_n(&depth[0], p, __ATOMIC_RELEASE);
    }
    *pieces = __atomic_load_n(&depth[0], __ATOMIC_ACQUIRE);
    *bytes = __atomic_load_n(&depth[1], __ATOMIC_RELAXED);
}

typedef struct pending_read {
    char *p;
    size_t len;
    uint64_t lo;
} pending_read_t;

static int lookahead_worker(gds_job_t *gjob, host_job_t *job, gds_status_t *st)
{
    int fd = job->file->fd;
    pending_read_t pend[HOST_LOOKAHEAD_MAX];
    size_t head = 0, count = 0, bytes = 0, max_pieces, max_bytes;
    lookahead_depth(&max_pieces, &max_bytes);
    bool more = true;
    for (;;) {
        size_t task;
        bool room = count < max_pieces && (count < 2 || bytes < max_bytes);
        if (more && room && (more = gds_job_next(gjob, &task))) {
            uint64_t lo, hi;
            const gds_segment_t *seg = gds_task_map_range(&job->tasks, task, &lo, &hi);
            char *p = (char *)seg->buf + (lo - seg->offset);
            size_t len = (size_t)(hi - lo), done = 0;
            if (!__atomic_load_n(&job->no_nowait, __ATOMIC_RELAXED)) {
                struct iovec iov = {p, len};
                ssize_t n;
                do
                    n = preadv2(fd, &iov, 1, (off_t)lo, RWF_NOWAIT);
                while (n < 0 && errno == EINTR);
                if (n == (ssize_t)len)
                    continue; /* cached: read */
                if (n > 0)
                    done = (size_t)n;
                else if (n < 0 && errno != EAGAIN)
                    __atomic_store_n(&job->no_nowait, 1, __ATOMIC_RELAXED); /* EOPNOTSUPP, EINVAL: old kernel */
                /* 0 bytes: end of file, or a file system that answers a miss so;
                 * the read below tells them apart (and zero-fills past EOF) */
            }
            /* a hint: its errors are ignored (the read below reports real ones) */
            posix_fadvise(fd, (off_t)(lo + done), (off_t)(len - done), POSIX_FADV_WILLNEED);
            pend[(head + count++) % HOST_LOOKAHEAD_MAX] = (pending_read_t){p + done, len - done, lo + done};
            bytes += len - done;
            continue;
        }
        if (!count)
            return 0;
        pending_read_t *r = &pend[head];
        head = (head + 1) % HOST_LOOKAHEAD_MAX;
        count--;
        bytes -= r->len;
        if (read_rest(job, r->p, r->len, r->lo, st) != 0)
            return -1;
        /* a failure elsewhere stops claiming; the pieces already hinted are still read, the job fails anyway */
    }
}

/* H5GDS_TEST_NO_LOOKAHEAD=1: plain preads, for tests and measurements that
 * compare the two. */
static bool lookahead_off(void)
{
    static int off = -1; /* atomic: computed once, same value from any thread */
    int v = __atomic_load_n(&off, __ATOMIC_RELAXED);
    if (v < 0) {
        v = gds_env_flag("H5GDS_TEST_NO_LOOKAHEAD");
        __atomic_store_n(&off, v, __ATOMIC_RELAXED);
    }
    return v != 0;
}

static int host_worker_run(gds_job_t *gjob, void *arg, gds_worker_t *worker, gds_status_t *st)
{
    (void)worker;
    host_job_t *job = arg;
    if (job->lookahead)
        return lookahead_worker(gjob, job, st);
    size_t task;
    while (gds_job_next(gjob, &task)) {
        uint64_t lo, hi;
        const gds_segment_t *seg = gds_task_map_range(&job->tasks, task, &lo, &hi);
        char *p = (char *)seg->buf + (lo - seg->offset);
        size_t len = (size_t)(hi - lo);
        if (job->write) {
            if (gds_pwrite_full(job->file->fd, p, len, lo) != 0) {
                gds_status_set(st, errno, "write of %zu bytes at offset %llu failed", len, (unsigned long long)lo);
                return -1;
            }
        }
        else if (read_rest(job, p, len, lo, st) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Counted as a busy worker of the file while it works on the job. */
static int host_worker(gds_job_t *gjob, void *arg, gds_worker_t *worker, gds_status_t *st)
{
    gds_file_t *file = ((host_job_t *)arg)->file;
    gds_file_worker_enter(file);
    int rc = host_worker_run(gjob, arg, worker, st);
    gds_file_worker_leave(file);
    return rc;
}

/* Page-cache copies are CPU work that saturates memory bandwidth with about
 * half the cores; more threads only add contention (on 2 cores, measured
 * slower than one pread). H5GDS_TEST_NCPU=<n> makes the engine believe it
 * has n CPUs, so tests can force the pool on small machines. */
static unsigned host_read_workers(unsigned threads)
{
    static long ncpu; /* atomic: computed once, same value from any thread */
    long n = __atomic_load_n(&ncpu, __ATOMIC_RELAXED);
    if (!n) {
        const char *forced = getenv("H5GDS_TEST_NCPU");
        n = forced && atol(forced) > 0 ? atol(forced) : sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1)
            n = 1;
        __atomic_store_n(&ncpu, n, __ATOMIC_RELAXED);
    }
    long cap = n / 2 > 1 ? n / 2 : 1;
    return (long)threads > cap ? (unsigned)cap : threads;
}

static void host_job_finish(void *state)
{
    host_job_t *job = state;
    gds_task_map_free(&job->tasks);
    free(job);
}

int gds_host_submit(gds_file_t *file, bool write, const gds_segment_t *segs, size_t nseg, gds_part_t *part,
                    gds_status_t *st)
{
    host_job_t *job = calloc(1, sizeof *job);
    if (!job || gds_task_map_init(&job->tasks, segs, nseg, file->cfg.io_block_size) != 0) {
        free(job);
        gds_status_set(st, ENOMEM, "out of memory splitting a request of %zu pieces", nseg);
        return -1;
    }
    job->file = file;
    job->write = write;
    job->lookahead = !write && !lookahead_off();
    /* Asynchronous host requests are many independent pieces (a loader's
     * samples, write-behind's drains): their workers mostly wait for the
     * disk, so all `threads` take part (the cap above is for copies out of
     * the page cache, which are CPU work). */
    part->job = gds_pool_submit(file->cfg.threads, gds_task_map_count(&job->tasks), host_worker, job, st);
    if (!part->job) {
        host_job_finish(job);
        return -1;
    }
    part->finish = host_job_finish;
    part->state = job;
    return 0;
}

int gds_host_transfer(gds_file_t *file, bool write, uint64_t offset, size_t size, void *buf, bool raw,
                      gds_status_t *st)
{
    /* Buffered parallel writes gain nothing (the inode lock serialises
     * them), and parallel reads of data not in the page cache defeat
     * read-ahead. So only large raw-data reads of cached data are split: the
     * first block is read with RWF_NOWAIT, which fails instead of going to
     * the disk; if it comes back whole, the rest is read in parallel. */
    unsigned workers = host_read_workers(file->cfg.threads);
    if (raw && !write && workers > 1 && size >= file->cfg.parallel_threshold) {
        size_t first_len = file->cfg.io_block_size - (size_t)(offset % file->cfg.io_block_size);
        if (first_len > size) /* parallel_threshold below io_block_size */
            first_len = size;
        struct iovec iov = {buf, first_len};
        ssize_t n;
        do
            n = preadv2(file->fd, &iov, 1, (off_t)offset, RWF_NOWAIT);
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)first_len && first_len == size)
            return 0;
        if (n == (ssize_t)first_len) {
            host_job_t job = {.file = file, .write = write};
            gds_segment_t rest = {offset + first_len, size - first_len, (char *)buf + first_len};
            if (gds_task_map_init(&job.tasks, &rest, 1, gds_block_for(&file->cfg, rest.size, workers, 0)) != 0) {
                gds_status_set(st, ENOMEM, "out of memory splitting a read of %zu bytes", size);
                return -1;
            }
            int rc = gds_pool_run(workers, gds_task_map_count(&job.tasks), host_worker, &job, st);
            gds_task_map_free(&job.tasks);
            return rc;
        }
        /* Not cached (EAGAIN), partly cached, or no RWF_NOWAIT here: one
         * sequential read, like sec2, from where the probe stopped. */
        size_t done = n > 0 ? (size_t)n : 0;
        offset += done;
        buf = (char *)buf + done;
        size -= done;
    }
    if (write) {
        if (gds_pwrite_full(file->fd, buf, size, offset) == 0)
            return 0;
        gds_status_set(st, errno, "write of %zu bytes at offset %llu failed", size, (unsigned long long)offset);
        return -1;
    }
    ssize_t n = gds_pread_full(file->fd, buf, size, offset);
    if (n < 0) {
        gds_status_set(st, errno, "read of %zu bytes at offset %llu failed", size, (unsigned long long)offset);
        return -1;
    }
    if ((size_t)n < size)
        memset((char *)buf + n, 0, size - (size_t)n); /* past end of file */
    return 0;
}
