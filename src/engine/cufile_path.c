/*
 * Device memory <-> file through NVIDIA cuFile (GPUDirect Storage).
 *
 * The file is registered once (cuFileHandleRegister on the O_DIRECT
 * descriptor). A request (one range or a vector) is cut into io_block_size
 * blocks that pool workers pass to cuFileRead/cuFileWrite, which are thread safe. Every return value
 * is checked: negative (errno or cuFile code), short (end of file on reads:
 * the rest of the device range is zeroed; never acceptable on writes).
 *
 * With register=on, each device allocation a request touches is registered
 * with cuFileBufRegister once, and the registration is cached for the
 * process, keyed by the allocation's CUDA buffer ID: an ID is never reused,
 * so memory freed and allocated again at the same address is a new entry,
 * never a stale registration. Registration failing is not an error (cuFile
 * then bounces through its own buffers, as for unregistered memory); the
 * failure is remembered per buffer ID and logged once, not retried.
 *
 * Entries are reference counted: a request holds the entries its segments
 * use until its job has ended, and an entry is deregistered only when no
 * request holds it, so another thread's eviction never pulls a registration
 * from under a transfer.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy.h"

/* ---- registration cache ---- */

#define GDS_REGISTRATIONS 64
#define GDS_FAILED_IDS 64

typedef struct registration {
    unsigned long long buffer_id;
    CUdeviceptr base;
    size_t size;
    bool ours;      /* registered by us (not by the application): we deregister it */
    unsigned refs;  /* requests using it now */
    bool listed;    /* still in the cache (else freed when refs drops to 0) */
} registration_t;

static struct {
    pthread_mutex_t lock;
    registration_t *entry[GDS_REGISTRATIONS];
    unsigned count, next_victim;
    unsigned long long failed[GDS_FAILED_IDS]; /* buffer IDs cuFile refused, newest last */
    unsigned nfailed;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void destroy_registration(const gds_cufile_api_t *cf, registration_t *r)
{
    if (r->ours) /* the memory may be freed by now: cuFile then just forgets it */
        cf->BufDeregister((const void *)(uintptr_t)r->base);
    free(r);
}

/* Takes entry i out of the cache; it goes when its last user lets go. */
static void unlist_locked(const gds_cufile_api_t *cf, unsigned i)
{
    registration_t *r = cache.entry[i];
    cache.entry[i] = cache.entry[--cache.count];
    r->listed = false;
    if (r->refs == 0)
        destroy_registration(cf, r);
}

static bool failed_before_locked(unsigned long long id)
{
    for (unsigned i = 0; i < cache.nfailed; i++)
        if (cache.failed[i] == id)
            return true;
    return false;
}

/* The registration of the allocation holding `ptr`, registering it on first
 * use, with a reference the caller returns with release_registration; NULL
 * when it cannot be (then `ptr` goes unregistered). */
static registration_t *acquire_registration(gds_file_t *file, const gds_cufile_api_t *cf, const gds_cuda_api_t *cu,
                                            const void *ptr)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    unsigned long long id = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void *values[] = {&base, &size, &id};
    if (cu->PointerGetAttributes(3, attrs, values, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS || !base || !size)
        return NULL;
    pthread_mutex_lock(&cache.lock);
    registration_t *found = NULL;
    for (unsigned i = 0; i < cache.count && !found; i++)
        if (cache.entry[i]->buffer_id == id)
            found = cache.entry[i];
    if (!found && !failed_before_locked(id)) {
        bool busy_overlap = false;
        /* An entry overlapping this allocation is one since freed. */
        for (unsigned i = 0; i < cache.count;) {
            registration_t *r = cache.entry[i];
            if (r->base < base + size && base < r->base + r->size) {
                busy_overlap |= r->refs > 0;
                unlist_locked(cf, i);
            }
            else
                i++;
        }
        /* Full: evict an entry nobody uses (none free: go unregistered). */
        for (unsigned tries = 0; cache.count == GDS_REGISTRATIONS && tries < GDS_REGISTRATIONS; tries++) {
            unsigned v = cache.next_victim++ % GDS_REGISTRATIONS;
            if (cache.entry[v]->refs == 0)
                unlist_locked(cf, v);
        }
        if (!busy_overlap && cache.count < GDS_REGISTRATIONS) {
            CUfileError_t rc = cf->BufRegister((const void *)(uintptr_t)base, size, 0);
            bool ours = rc.err == CU_FILE_SUCCESS;
            registration_t *r = NULL;
            /* The application's own registration is used too. */
            if ((ours || rc.err == CU_FILE_MEMORY_ALREADY_REGISTERED) && (r = malloc(sizeof *r)) != NULL) {
                *r = (registration_t){id, base, size, ours, 0, true};
                cache.entry[cache.count++] = r;
                found = r;
                if (ours)
                    gds_stat_add(&file->stats.buffer_registrations, 1);
            }
            else if (ours) {
                cf->BufDeregister((const void *)(uintptr_t)base); /* out of memory for the entry */
            }
            else {
                if (cache.nfailed == GDS_FAILED_IDS)
                    memmove(cache.failed, cache.failed + 1, sizeof cache.failed[0] * --cache.nfailed);
                cache.failed[cache.nfailed++] = id;
                gds_stat_add(&file->stats.registration_failures, 1);
                char text[200];
                gds_file_log(file, "cuFileBufRegister of %zu bytes failed (%s); this allocation goes unregistered",
                             size, gds_cufile_error_text(rc, text, sizeof text));
            }
        }
    }
    if (found)
        found->refs++;
    pthread_mutex_unlock(&cache.lock);
    return found;
}

void gds_cufile_forget_range(const void *ptr, size_t size)
{
    const gds_cufile_api_t *cf = gds_cufile_if_loaded();
    CUdeviceptr lo = (CUdeviceptr)(uintptr_t)ptr, hi = lo + size;
    if (!cf || !size)
        return;
    pthread_mutex_lock(&cache.lock);
    for (unsigned i = 0; i < cache.count;) {
        registration_t *r = cache.entry[i];
        if (r->base < hi && lo < r->base + r->size)
            unlist_locked(cf, i);
        else
            i++;
    }
    pthread_mutex_unlock(&cache.lock);
}

void gds_cufile_release_cache(void)
{
    const gds_cufile_api_t *cf = gds_cufile_if_loaded();
    if (!cf)
        return;
    pthread_mutex_lock(&cache.lock);
    while (cache.count)
        unlist_locked(cf, cache.count - 1);
    cache.nfailed = 0;
    pthread_mutex_unlock(&cache.lock);
}

static void release_registration(const gds_cufile_api_t *cf, registration_t *r)
{
    pthread_mutex_lock(&cache.lock);
    if (--r->refs == 0 && !r->listed)
        destroy_registration(cf, r);
    pthread_mutex_unlock(&cache.lock);
}

typedef struct cufile_job {
    gds_file_t *file;
    const gds_cufile_api_t *cf;
    const gds_cuda_api_t *cu;
    bool write;
    CUevent after;        /* the application's work to wait for, or NULL */
    gds_task_map_t tasks; /* segments (device pointers) cut into blocks */
    CUcontext ctx;
    /* per segment: the base address cuFile is given (the registered base
     * with register=on, else the segment's own pointer), and the
     * registration held while the job runs */
    const char **base;
    registration_t **reg;
} cufile_job_t;

bool gds_cufile_register(gds_file_t *file, const char **why, char *why_buf, size_t why_size)
{
    const gds_cufile_api_t *cf = gds_cufile_load(why);
    if (!cf)
        return false;
    int dfd = gds_file_direct_fd(file);
    if (dfd < 0) {
        *why = "the file cannot be opened with O_DIRECT";
        return false;
    }
    CUfileDescr_t descr;
    memset(&descr, 0, sizeof descr);
    descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    descr.handle.fd = dfd;
    CUfileError_t rc = cf->HandleRegister(&file->cufile_handle, &descr);
    if (rc.err != CU_FILE_SUCCESS) {
        char text[200];
        snprintf(why_buf, why_size, "cuFileHandleRegister failed: %s", gds_cufile_error_text(rc, text, sizeof text));
        *why = why_buf;
        file->cufile_handle = NULL;
        return false;
    }
    return true;
}

static void describe_cufile_failure(gds_status_t *st, bool write, ssize_t n, size_t len, uint64_t off)
{
    const char *op = write ? "cuFileWrite" : "cuFileRead";
    if (n == -1)
        gds_status_set(st, errno, "%s of %zu bytes at offset %llu failed", op, len, (unsigned long long)off);
    else if (n < 0) {
        char text[200];
        CUfileError_t e = {.err = (CUfileOpError)(-n), .cu_err = CUDA_SUCCESS};
        gds_status_set(st, 0, "%s of %zu bytes at offset %llu failed: %s", op, len, (unsigned long long)off,
                       gds_cufile_error_text(e, text, sizeof text));
    }
    else
        gds_status_set(st, EIO, "%s of %zu bytes at offset %llu stopped after %zd bytes", op, len,
                       (unsigned long long)off, n);
}

/* Zeroes device memory past the end of the file on a stream of our own:
 * the legacy default stream may be busy with the application's kernels. */
static int zero_device(const gds_cuda_api_t *cu, CUdeviceptr dst, size_t len, gds_status_t *st)
{
    CUstream stream = NULL;
    CUresult rc = cu->StreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    if (rc == CUDA_SUCCESS)
        rc = cu->MemsetD8Async(dst, 0, len, stream);
    if (rc == CUDA_SUCCESS)
        rc = cu->StreamSynchronize(stream);
    if (stream)
        cu->StreamDestroy(stream);
    if (rc != CUDA_SUCCESS) {
        gds_status_set(st, 0, "zero-filling device memory past end of file failed: %s", gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

static int cufile_worker_run(gds_job_t *gjob, void *arg, gds_worker_t *worker, gds_status_t *st)
{
    (void)worker;
    const cufile_job_t *job = arg;
    CUresult crc = gds_cuda_make_current(job->ctx);
    /* cuFile cannot wait on a stream: this thread waits for the
     * application's work before its first transfer. */
    if (crc == CUDA_SUCCESS && job->after)
        crc = job->cu->EventSynchronize(job->after);
    if (crc != CUDA_SUCCESS) {
        gds_status_set(st, 0, "preparing a cuFile transfer failed: %s", gds_cuda_error_text(crc));
        return -1;
    }
    size_t task;
    while (gds_job_next(gjob, &task)) {
        uint64_t lo, hi;
        const gds_segment_t *seg = gds_task_map_range(&job->tasks, task, &lo, &hi);
        /* cuFile takes a base and an offset from it: for registered memory
         * the base must be the registered one. */
        const char *base = job->base[seg - job->tasks.seg];
        size_t done = 0, len = (size_t)(hi - lo);
        off_t dev_off = (off_t)((const char *)seg->buf - base) + (off_t)(lo - seg->offset);
        while (done < len) {
            ssize_t n = job->write ? job->cf->Write(job->file->cufile_handle, base, len - done, (off_t)(lo + done),
                                                    dev_off + (off_t)done)
                                   : job->cf->Read(job->file->cufile_handle, (void *)base, len - done,
                                                   (off_t)(lo + done), dev_off + (off_t)done);
            if (n == -1 && errno == EINTR)
                continue;
            if (n < 0 || (n == 0 && job->write)) {
                describe_cufile_failure(st, job->write, n, len - done, lo + done);
                return -1;
            }
            if (n == 0) { /* read at end of file: zero the rest on the device */
                CUdeviceptr rest = (CUdeviceptr)(uintptr_t)base + (CUdeviceptr)dev_off + done;
                if (zero_device(job->cu, rest, len - done, st) != 0)
                    return -1;
                break;
            }
            done += (size_t)n;
        }
    }
    return 0;
}

/* Counted as a busy worker of the file while it works on the job. */
static int cufile_worker(gds_job_t *gjob, void *arg, gds_worker_t *worker, gds_status_t *st)
{
    gds_file_t *file = ((cufile_job_t *)arg)->file;
    gds_file_worker_enter(file);
    int rc = cufile_worker_run(gjob, arg, worker, st);
    gds_file_worker_leave(file);
    return rc;
}

static void cufile_job_finish(void *state)
{
    cufile_job_t *job = state;
    for (size_t i = 0; i < job->tasks.nseg; i++)
        if (job->reg[i])
            release_registration(job->cf, job->reg[i]);
    gds_task_map_free(&job->tasks);
    free(job->base);
    free(job->reg);
    free(job);
}

int gds_cufile_submit(gds_file_t *file, bool write, const gds_segment_t *segs, size_t nseg, void *ctx,
                      const gds_device_order_t *order, gds_part_t *part, gds_status_t *st)
{
    const char *why = NULL;
    const gds_cufile_api_t *cf = gds_cufile_load(&why);
    const gds_cuda_api_t *cu = gds_cuda_load(&why);
    if (!cf || !cu) {
        gds_status_set(st, 0, "cuFile unavailable: %s", why);
        return -1;
    }
    if (!ctx) {
        gds_status_set(st, 0, "device buffer without a CUDA context");
        return -1;
    }
    size_t total = 0;
    for (size_t i = 0; i < nseg; i++)
        total += segs[i].size;
    cufile_job_t *job = calloc(1, sizeof *job);
    if (job) {
        job->base = malloc(nseg * sizeof *job->base);
        job->reg = calloc(nseg, sizeof *job->reg);
    }
    if (!job || !job->base || !job->reg ||
        gds_task_map_init(&job->tasks, segs, nseg, gds_block_for(&file->device_cfg, total, file->device_cfg.threads, 0)) != 0) {
        if (job) {
            free(job->base);
            free(job->reg);
        }
        free(job);
        gds_status_set(st, ENOMEM, "out of memory splitting a request of %zu pieces", nseg);
        return -1;
    }
    job->file = file;
    job->cf = cf;
    job->cu = cu;
    job->write = write;
    job->after = order ? order->after : NULL;
    job->ctx = ctx;
    for (size_t i = 0; i < nseg; i++) {
        job->reg[i] = file->device_cfg.register_buffers ? acquire_registration(file, cf, cu, segs[i].buf) : NULL;
        job->base[i] = job->reg[i] ? (const char *)(uintptr_t)job->reg[i]->base : (const char *)segs[i].buf;
    }
    part->job = gds_pool_submit(file->device_cfg.threads, gds_task_map_count(&job->tasks), cufile_worker, job, st);
    if (!part->job) {
        cufile_job_finish(job);
        return -1;
    }
    part->finish = cufile_job_finish;
    part->state = job;
    return 0;
}
