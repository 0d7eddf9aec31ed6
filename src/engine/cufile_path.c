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
 * then bounces through its own buffers, as for unregistered memory).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_internal.h"
#include "worker_pool.h"

typedef struct cufile_job {
    gds_file_t *file;
    const gds_cufile_api_t *cf;
    const gds_cuda_api_t *cu;
    bool write;
    gds_task_map_t tasks; /* segments (device pointers) cut into blocks */
    CUcontext ctx;
    /* per segment: the base address cuFile is given (the registered base
     * with register=on, else the segment's own pointer) */
    const char **base;
} cufile_job_t;

/* ---- registration cache ---- */

#define GDS_REGISTRATIONS 64

typedef struct registration {
    unsigned long long buffer_id;
    CUdeviceptr base;
    size_t size;
    bool ours; /* registered by us (not by the application): we deregister it */
} registration_t;

static registration_t registrations[GDS_REGISTRATIONS];
static unsigned nregistrations, next_victim;
static pthread_mutex_t registration_lock = PTHREAD_MUTEX_INITIALIZER;

static void drop_registration(const gds_cufile_api_t *cf, unsigned i)
{
    if (registrations[i].ours) /* the memory may be freed by now: cuFile then just forgets it */
        cf->BufDeregister((const void *)(uintptr_t)registrations[i].base);
    registrations[i] = registrations[--nregistrations];
}

/* The registered base of the allocation holding `ptr`, registering it on
 * first use; NULL when it cannot be (then `ptr` goes unregistered). */
static const char *registered_base(gds_file_t *file, const gds_cufile_api_t *cf, const gds_cuda_api_t *cu,
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
    pthread_mutex_lock(&registration_lock);
    const char *found = NULL;
    for (unsigned i = 0; i < nregistrations && !found; i++)
        if (registrations[i].buffer_id == id)
            found = (const char *)(uintptr_t)registrations[i].base;
    if (!found) {
        /* An entry overlapping this allocation is one since freed. */
        for (unsigned i = 0; i < nregistrations;)
            if (registrations[i].base < base + size && base < registrations[i].base + registrations[i].size)
                drop_registration(cf, i);
            else
                i++;
        if (nregistrations == GDS_REGISTRATIONS)
            drop_registration(cf, next_victim++ % GDS_REGISTRATIONS);
        CUfileError_t rc = cf->BufRegister((const void *)(uintptr_t)base, size, 0);
        bool ours = rc.err == CU_FILE_SUCCESS;
        if (ours || rc.err == CU_FILE_MEMORY_ALREADY_REGISTERED) { /* the application's own registration is used too */
            registrations[nregistrations++] = (registration_t){id, base, size, ours};
            found = (const char *)(uintptr_t)base;
            if (ours)
                __atomic_add_fetch(&file->stats.buffer_registrations, 1, __ATOMIC_RELAXED);
        }
        else if (file->cfg.log) {
            char text[200];
            fprintf(stderr, "h5gds: %s: cuFileBufRegister of %zu bytes failed (%s); unregistered I/O\n", file->path,
                    size, gds_cufile_error_text(rc, text, sizeof text));
        }
    }
    pthread_mutex_unlock(&registration_lock);
    return found;
}

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

static int cufile_worker(gds_job_t *gjob, void *arg, gds_worker_t *worker, gds_status_t *st)
{
    (void)worker;
    const cufile_job_t *job = arg;
    if (gds_cuda_use_context(job->cu, job->ctx, st) != 0)
        return -1;
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
                CUresult rc = job->cu->MemsetD8Async(rest, 0, len - done, NULL);
                if (rc == CUDA_SUCCESS)
                    rc = job->cu->StreamSynchronize(NULL);
                if (rc != CUDA_SUCCESS) {
                    gds_status_set(st, 0, "zero-filling device memory past end of file failed: %s",
                                   gds_cuda_error_text(rc));
                    return -1;
                }
                break;
            }
            done += (size_t)n;
        }
    }
    return 0;
}

int gds_cufile_transfer(gds_file_t *file, bool write, const gds_segment_t *segs, size_t nseg, void *ctx,
                        gds_status_t *st)
{
    const char *why = NULL;
    cufile_job_t job = {
        .file = file,
        .cf = gds_cufile_load(&why),
        .cu = gds_cuda_load(&why),
        .write = write,
        .ctx = ctx,
    };
    if (!job.cf || !job.cu) {
        gds_status_set(st, 0, "cuFile unavailable: %s", why);
        return -1;
    }
    size_t total = 0;
    for (size_t i = 0; i < nseg; i++)
        total += segs[i].size;
    job.base = malloc(nseg * sizeof *job.base);
    if (!job.base || gds_task_map_init(&job.tasks, segs, nseg, gds_block_for(&file->cfg, total, file->cfg.threads)) != 0) {
        free(job.base);
        gds_status_set(st, ENOMEM, "out of memory splitting a request of %zu pieces", nseg);
        return -1;
    }
    for (size_t i = 0; i < nseg; i++) {
        const char *reg = file->cfg.register_buffers ? registered_base(file, job.cf, job.cu, segs[i].buf) : NULL;
        job.base[i] = reg ? reg : (const char *)segs[i].buf;
    }
    int rc = gds_pool_run(file->cfg.threads, job.tasks.first[nseg], cufile_worker, &job, st);
    gds_task_map_free(&job.tasks);
    free(job.base);
    return rc;
}
