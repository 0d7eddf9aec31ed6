/*
 * The engine's file handle: owns the O_DIRECT descriptor and the cuFile
 * registration, classifies each raw-data buffer and sends the request down
 * one path (see engine.h). Statistics are kept here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "file_internal.h"
#include "worker_pool.h"

static void log_line(const gds_file_t *file, const char *fmt, const char *a, const char *b)
{
    if (!file->cfg.log)
        return;
    fprintf(stderr, "h5gds: %s: ", file->path);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

int gds_file_open(gds_file_t **out, const char *path, int fd, bool writable, const gds_engine_settings_t *cfg,
                  gds_status_t *st)
{
    gds_file_t *file = calloc(1, sizeof *file);
    if (!file || !(file->path = strdup(path))) {
        free(file);
        gds_status_set(st, ENOMEM, "out of memory opening %s", path);
        return -1;
    }
    file->fd = fd;
    file->direct_fd = -1;
    file->writable = writable;
    file->cfg = *cfg;
    pthread_mutex_init(&file->lock, NULL);
    *out = file;
    return 0;
}

void gds_file_close(gds_file_t *file)
{
    if (!file)
        return;
    if (file->cufile_handle) {
        const gds_cufile_api_t *cf = gds_cufile_load(NULL);
        if (cf)
            cf->HandleDeregister(file->cufile_handle);
    }
    if (file->direct_fd >= 0)
        close(file->direct_fd);
    pthread_mutex_destroy(&file->lock);
    free(file->path);
    free(file);
}

int gds_file_direct_fd(gds_file_t *file)
{
    pthread_mutex_lock(&file->lock);
    if (!file->direct_decided) {
        file->direct_decided = true;
        if (file->cfg.direct != H5FD_GDS_OFF) {
            file->direct_fd = open(file->path, (file->writable ? O_RDWR : O_RDONLY) | O_DIRECT | O_CLOEXEC);
            if (file->direct_fd < 0) {
                __atomic_add_fetch(&file->stats.direct_fallbacks, 1, __ATOMIC_RELAXED);
                log_line(file, "O_DIRECT unavailable (%s%s); using buffered I/O", strerror(errno), "");
            }
        }
    }
    int dfd = file->direct_fd;
    pthread_mutex_unlock(&file->lock);
    return dfd;
}

/* The path device requests of this file take, decided on the first one. */
static H5FD_gds_route_t device_route(gds_file_t *file)
{
    pthread_mutex_lock(&file->lock);
    bool decided = file->device_route_decided;
    pthread_mutex_unlock(&file->lock);
    if (decided)
        return file->device_route;

    H5FD_gds_route_t route = H5FD_GDS_ROUTE_STAGED;
    const char *why = NULL;
    char why_buf[256];
    switch (file->cfg.mode) {
    case H5FD_GDS_MODE_POSIX:
        route = H5FD_GDS_ROUTE_POSIX_BOUNCE;
        break;
    case H5FD_GDS_MODE_STAGED:
        break;
    case H5FD_GDS_MODE_AUTO:
        /* Without nvidia-fs, cuFile only runs its compatibility mode, which
         * bounces through its own buffers with O_DIRECT reads: our staged
         * path is as fast for writes and far faster for cached reads. */
        if (!gds_nvfs_present()) {
            why = "nvidia-fs is not loaded (no GPUDirect Storage)";
            break;
        }
        /* fall through */
    case H5FD_GDS_MODE_CUFILE:
        if (file->cfg.direct == H5FD_GDS_OFF)
            why = "cuFile needs O_DIRECT, and direct=off";
        else if (gds_cufile_register(file, &why, why_buf, sizeof why_buf))
            route = H5FD_GDS_ROUTE_CUFILE;
        if (route != H5FD_GDS_ROUTE_CUFILE)
            __atomic_add_fetch(&file->stats.cufile_fallbacks, 1, __ATOMIC_RELAXED);
        break;
    }
    pthread_mutex_lock(&file->lock);
    if (!file->device_route_decided) {
        file->device_route = route;
        file->device_route_decided = true;
        file->stats.device_route = route;
        if (route == H5FD_GDS_ROUTE_CUFILE)
            log_line(file, "device data through cuFile%s%s", "", "");
        else
            log_line(file, "device data through the %s path%s", H5FD_gds_route_name(route),
                     why ? (snprintf(why_buf, sizeof why_buf, " (cuFile not used: %s)", why), why_buf) : "");
    }
    route = file->device_route;
    pthread_mutex_unlock(&file->lock);
    return route;
}

/* The block each worker claims: io_block_size, halved (down to the staging
 * size) until every worker has at least one block, so that mid-sized
 * requests still use the whole pool. Stays a multiple of fs_block_size. */
size_t gds_block_for(const gds_engine_settings_t *cfg, size_t size, unsigned workers)
{
    size_t block = cfg->io_block_size;
    size_t floor = cfg->staging_size > cfg->fs_block_size ? cfg->staging_size : cfg->fs_block_size;
    while (block / 2 >= floor && (block / 2) % cfg->fs_block_size == 0 && size / block < workers)
        block /= 2;
    return block;
}

int gds_task_map_init(gds_task_map_t *map, const gds_segment_t *seg, size_t nseg, size_t block)
{
    map->seg = seg;
    map->nseg = nseg;
    map->block = block;
    map->first = malloc((nseg + 1) * sizeof *map->first);
    if (!map->first)
        return -1;
    size_t t = 0;
    for (size_t i = 0; i < nseg; i++) {
        map->first[i] = t;
        t += seg[i].size ? gds_task_count(seg[i].offset, seg[i].size, block) : 0;
    }
    map->first[nseg] = t;
    return 0;
}

void gds_task_map_free(gds_task_map_t *map)
{
    free(map->first);
    map->first = NULL;
}

const gds_segment_t *gds_task_map_range(const gds_task_map_t *map, size_t task, uint64_t *lo, uint64_t *hi)
{
    /* The last segment whose first task is <= task: never an empty one
     * (it would share its first task with the next), for task < first[nseg]. */
    size_t a = 0, b = map->nseg - 1;
    while (a < b) {
        size_t mid = a + (b - a + 1) / 2;
        if (map->first[mid] <= task)
            a = mid;
        else
            b = mid - 1;
    }
    const gds_segment_t *seg = &map->seg[a];
    gds_task_range(seg->offset, seg->size, map->block, task - map->first[a], lo, hi);
    return seg;
}

/* Host memory, large reads split across the pool: parallel page-cache copies
 * are several times faster than one thread. */
typedef struct host_job {
    int fd;
    bool write;
    uint64_t offset;
    size_t size;
    char *buf;
    size_t block;
} host_job_t;

static int host_worker(gds_job_t *gjob, void *arg, gds_worker_t *worker, gds_status_t *st)
{
    (void)worker;
    const host_job_t *job = arg;
    size_t task;
    while (gds_job_next(gjob, &task)) {
        uint64_t lo, hi;
        gds_task_range(job->offset, job->size, job->block, task, &lo, &hi);
        char *p = job->buf + (lo - job->offset);
        if (job->write) {
            if (gds_pwrite_full(job->fd, p, (size_t)(hi - lo), lo) != 0) {
                gds_status_set(st, errno, "write of %llu bytes at offset %llu failed", (unsigned long long)(hi - lo),
                               (unsigned long long)lo);
                return -1;
            }
        }
        else {
            ssize_t n = gds_pread_full(job->fd, p, (size_t)(hi - lo), lo);
            if (n < 0) {
                gds_status_set(st, errno, "read of %llu bytes at offset %llu failed", (unsigned long long)(hi - lo),
                               (unsigned long long)lo);
                return -1;
            }
            if ((size_t)n < hi - lo)
                memset(p + n, 0, (size_t)(hi - lo) - (size_t)n); /* past end of file */
        }
    }
    return 0;
}

/* Page-cache copies are CPU work that saturates memory bandwidth with about
 * half the cores; more threads only add contention (on 2 cores, measured
 * slower than one pread). */
static unsigned host_read_workers(unsigned threads)
{
    static long ncpu;
    if (!ncpu)
        ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    long cap = ncpu / 2 > 1 ? ncpu / 2 : 1;
    return (long)threads > cap ? (unsigned)cap : threads;
}

static int host_transfer(gds_file_t *file, bool write, uint64_t offset, size_t size, void *buf, bool raw,
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
            host_job_t job = {file->fd, write, offset + first_len, size - first_len, (char *)buf + first_len,
                              gds_block_for(&file->cfg, size, workers)};
            return gds_pool_run(workers, gds_task_count(job.offset, job.size, job.block), host_worker, &job, st);
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

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void count(gds_file_t *file, bool write, H5FD_gds_route_t route, size_t size, double seconds)
{
    H5FD_gds_stats_t *s = &file->stats;
    /* One writer (the thread in the HDF5 call; HDF5 serialises them), so
     * plain relaxed stores suffice: readers see whole 64-bit values. */
    uint64_t *bytes = write ? &s->write_bytes[route] : &s->read_bytes[route];
    uint64_t *calls = write ? &s->write_calls[route] : &s->read_calls[route];
    __atomic_store_n(bytes, __atomic_load_n(bytes, __ATOMIC_RELAXED) + size, __ATOMIC_RELAXED);
    __atomic_store_n(calls, __atomic_load_n(calls, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    if (seconds == 0)
        return;
    /* Seconds are a sum of doubles: guarded by the lock. */
    pthread_mutex_lock(&file->lock);
    if (write)
        s->write_seconds += seconds;
    else
        s->read_seconds += seconds;
    pthread_mutex_unlock(&file->lock);
}

static int sync_legacy_stream(const gds_buffer_info_t *info, gds_status_t *st)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!cu)
        return 0;
    CUcontext previous = NULL;
    cu->CtxGetCurrent(&previous);
    bool switch_ctx = info->context && (CUcontext)info->context != previous;
    if (switch_ctx && cu->CtxSetCurrent((CUcontext)info->context) != CUDA_SUCCESS)
        switch_ctx = false;
    CUresult rc = cu->StreamSynchronize(NULL);
    if (switch_ctx)
        cu->CtxSetCurrent(previous);
    if (rc != CUDA_SUCCESS) {
        gds_status_set(st, 0, "waiting for earlier GPU work failed: %s", gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

/* Device (or managed) segments, all of context info->context, down the
 * file's device route. */
static int device_transfer(gds_file_t *file, bool write, const gds_segment_t *segs, size_t n,
                           const gds_buffer_info_t *info, H5FD_gds_route_t *route, gds_status_t *st)
{
    /* Order against the application's earlier GPU work, as cudaMemcpy
     * would: kernels (or a pageable cuMemcpyHtoD, which returns before its
     * DMA ends) on the legacy default stream may still be producing the
     * data we write, or reading the buffer we are about to fill. Our own
     * streams do not wait for it. */
    if (sync_legacy_stream(info, st) != 0)
        return -1;
    *route = device_route(file);
    if (*route == H5FD_GDS_ROUTE_CUFILE)
        return gds_cufile_transfer(file, write, segs, n, info->context, st);
    if (*route == H5FD_GDS_ROUTE_POSIX_BOUNCE)
        return gds_staged_transfer(file, write, segs, n, info->context, 1, 1, false, st);
    return gds_staged_transfer(file, write, segs, n, info->context, file->cfg.threads, file->cfg.staging_count, true,
                               st);
}

static int transfer(gds_file_t *file, bool write, uint64_t offset, size_t size, void *buf, gds_data_t data,
                    gds_status_t *st)
{
    if (size == 0)
        return 0;
    bool raw = data == GDS_DATA_RAW;
    gds_buffer_info_t info = {H5FD_GDS_MEMORY_HOST, NULL, -1};
    if (raw)
        gds_classify_buffer(buf, &info);
    double t0 = raw ? now_seconds() : 0;
    H5FD_gds_route_t route = H5FD_GDS_ROUTE_HOST;
    int rc;
    if (info.kind == H5FD_GDS_MEMORY_HOST || info.kind == H5FD_GDS_MEMORY_PINNED) {
        rc = host_transfer(file, write, offset, size, buf, raw, st);
    }
    else {
        gds_segment_t seg = {offset, size, buf};
        rc = device_transfer(file, write, &seg, 1, &info, &route, st);
    }
    if (raw && rc == 0)
        count(file, write, route, size, now_seconds() - t0);
    return rc;
}

/* Whether two device pointers lie in one allocation: pieces adjacent in
 * memory may still be two back-to-back allocations, which one copy (or one
 * registered cuFile buffer) must not span. */
static bool same_allocation(const void *a, const void *b)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    CUdeviceptr start_a = 0, start_b = 0;
    CUpointer_attribute attr[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
    void *va[] = {&start_a}, *vb[] = {&start_b};
    return cu && cu->PointerGetAttributes(1, attr, va, (CUdeviceptr)(uintptr_t)a) == CUDA_SUCCESS &&
           cu->PointerGetAttributes(1, attr, vb, (CUdeviceptr)(uintptr_t)b) == CUDA_SUCCESS && start_a && start_a == start_b;
}

/* A vector: host pieces one by one (each as a single request would go),
 * device pieces of one context together in one job. */
static int transfer_vector(gds_file_t *file, bool write, size_t n, const gds_segment_t *segs, gds_status_t *st)
{
    gds_segment_t *group = malloc(n * sizeof *group);
    if (!group) {
        gds_status_set(st, ENOMEM, "out of memory for a request of %zu pieces", n);
        return -1;
    }
    gds_buffer_info_t group_info = {H5FD_GDS_MEMORY_HOST, NULL, -1};
    size_t ngroup = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i <= n; i++) {
        gds_buffer_info_t info = {H5FD_GDS_MEMORY_HOST, NULL, -1};
        if (i < n) {
            if (segs[i].size == 0)
                continue;
            gds_classify_buffer(segs[i].buf, &info);
            if (info.kind == H5FD_GDS_MEMORY_HOST || info.kind == H5FD_GDS_MEMORY_PINNED) {
                double t0 = now_seconds();
                rc = host_transfer(file, write, segs[i].offset, segs[i].size, segs[i].buf, true, st);
                if (rc == 0)
                    count(file, write, H5FD_GDS_ROUTE_HOST, segs[i].size, now_seconds() - t0);
                continue;
            }
        }
        /* the device group ends at the end, or where the context changes */
        if (ngroup && (i == n || info.context != group_info.context)) {
            H5FD_gds_route_t route;
            double t0 = now_seconds();
            size_t total = 0;
            for (size_t k = 0; k < ngroup; k++)
                total += group[k].size;
            rc = device_transfer(file, write, group, ngroup, &group_info, &route, st);
            double seconds = now_seconds() - t0;
            for (size_t k = 0; rc == 0 && k < ngroup; k++)
                count(file, write, route, group[k].size, seconds * (double)group[k].size / (double)total);
            ngroup = 0;
        }
        if (i < n) {
            group_info = info;
            /* Pieces that continue the previous one both in the file and in
             * memory (consecutive chunks of a 1-D dataset) become one: fewer,
             * larger disk requests. */
            gds_segment_t *last = ngroup ? &group[ngroup - 1] : NULL;
            if (last && last->offset + last->size == segs[i].offset &&
                (char *)last->buf + last->size == (char *)segs[i].buf && same_allocation(last->buf, segs[i].buf))
                last->size += segs[i].size;
            else
                group[ngroup++] = segs[i];
        }
    }
    free(group);
    return rc;
}

int gds_file_read_vector(gds_file_t *file, size_t n, const gds_segment_t *segs, gds_status_t *st)
{
    return transfer_vector(file, false, n, segs, st);
}

int gds_file_write_vector(gds_file_t *file, size_t n, const gds_segment_t *segs, gds_status_t *st)
{
    return transfer_vector(file, true, n, segs, st);
}

int gds_file_read(gds_file_t *file, uint64_t offset, size_t size, void *buf, gds_data_t data, gds_status_t *st)
{
    return transfer(file, false, offset, size, buf, data, st);
}

int gds_file_write(gds_file_t *file, uint64_t offset, size_t size, const void *buf, gds_data_t data,
                   gds_status_t *st)
{
    /* The engine never writes through `buf`; the cast only shares the code path. */
    return transfer(file, true, offset, size, (void *)buf, data, st);
}

void gds_file_count_host(gds_file_t *file, bool write, size_t size)
{
    count(file, write, H5FD_GDS_ROUTE_HOST, size, 0);
}

void gds_file_get_stats(gds_file_t *file, H5FD_gds_stats_t *stats)
{
    pthread_mutex_lock(&file->lock);
    *stats = file->stats;
    pthread_mutex_unlock(&file->lock);
}

const char *H5FD_gds_route_name(H5FD_gds_route_t route)
{
    static const char *const names[H5FD_GDS_NROUTES] = {"none",   "host",        "staged",     "cufile",
                                                        "posix-bounce", "passthrough", "host-staged"};
    return (unsigned)route < H5FD_GDS_NROUTES ? names[route] : "unknown";
}
