/*
 * The dispatcher: classifies the buffers of a request, picks each piece's
 * strategy, starts the pool jobs and collects them (tickets).
 *
 * A ticket holds a private copy of the request's segments, grouped: host
 * pieces together, device pieces by CUDA context (one pool job per group,
 * so many small chunks keep every worker busy). Synchronous requests run
 * host pieces on the calling thread, as sec2 would; asynchronous ones run
 * everything on the pool.
 *
 * The transfer layer: write-behind and the public entry points (file_io.c)
 * stand on it; it never calls them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strategy.h"
#include "transfer.h"

#define GDS_MAX_GROUPS 8 /* device contexts in one request, plus host */

typedef struct io_group {
    bool host;
    gds_buffer_info_t info;  /* device groups: kind and context */
    size_t first, count;     /* its segments in io->segs */
    size_t bytes;
    gds_route_t route;
    CUevent after;           /* ordering event */
    bool own_after;          /* recorded here: destroyed at collection */
    gds_part_t part;         /* the pool job, once started */
    bool started;
} io_group_t;

struct gds_io {
    gds_file_t *file;
    bool write;
    bool raw;
    gds_segment_t *segs;
    size_t nseg;
    io_group_t group[GDS_MAX_GROUPS];
    unsigned ngroups;
    uint64_t t0;
};

/* The name of the current context's GPU (the autotuning key). */
static void device_name(char *name, size_t size)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    CUdevice dev;
    if (!cu || cu->CtxGetDevice(&dev) != CUDA_SUCCESS || cu->DeviceGetName(name, (int)size, dev) != CUDA_SUCCESS)
        name[0] = 0;
}

/* The path device requests of this file take, decided on the first one
 * (under the file's lock, so two threads never both register the file). */
static gds_route_t device_route(gds_file_t *file)
{
    if (__atomic_load_n(&file->device_route_decided, __ATOMIC_ACQUIRE))
        return file->device_route;

    gds_route_t route = GDS_ROUTE_STAGED;
    const char *why = NULL;
    char why_buf[256];
    static pthread_mutex_t decide_lock = PTHREAD_MUTEX_INITIALIZER; /* registration is rare: one lock for all files */
    pthread_mutex_lock(&decide_lock);
    if (__atomic_load_n(&file->device_route_decided, __ATOMIC_ACQUIRE)) {
        pthread_mutex_unlock(&decide_lock);
        return file->device_route;
    }
    switch (file->cfg.mode) {
    case GDS_MODE_POSIX:
        route = GDS_ROUTE_POSIX_BOUNCE;
        break;
    case GDS_MODE_STAGED:
        break;
    case GDS_MODE_AUTO:
        /* Without nvidia-fs, cuFile only runs its compatibility mode, which
         * bounces through its own buffers with O_DIRECT reads: the staged
         * path is as fast for writes and far faster for cached reads. */
        if (!gds_nvfs_present()) {
            why = "nvidia-fs is not loaded (no GPUDirect Storage)";
            break;
        }
        /* fall through */
    case GDS_MODE_CUFILE:
        if (file->cfg.direct == GDS_OFF)
            why = "cuFile needs O_DIRECT, and direct=off";
        else if (gds_cufile_register(file, &why, why_buf, sizeof why_buf))
            route = GDS_ROUTE_CUFILE;
        if (route != GDS_ROUTE_CUFILE)
            gds_stat_add(&file->stats.cufile_fallbacks, 1);
        break;
    }
    /* auto threads/block: tuned for this file system and GPU, once */
    if ((file->tune_threads || file->tune_block) && route != GDS_ROUTE_POSIX_BOUNCE) {
        char gpu[128] = "";
        device_name(gpu, sizeof gpu);
        gds_autotune(file->path, gpu, file->cfg.threads, file->cfg.io_block_size, &file->tuning);
        if (file->tune_threads) {
            /* within the configuration's pinned-memory limit, which assumed 16
             * threads for auto (a Lustre stripe count or a cache line may say more) */
            unsigned most = 16;
            file->device_cfg.threads = file->tuning.threads > most ? most : file->tuning.threads;
        }
        if (file->tune_block)
            file->device_cfg.io_block_size = file->tuning.io_block_size;
        /* two staging pieces per block, so that a worker overlaps the disk
         * and the copy of one block (a tuned block may be smaller than the
         * one the staging size was chosen for) */
        size_t half = file->device_cfg.io_block_size / 2 / file->device_cfg.fs_block_size * file->device_cfg.fs_block_size;
        if (file->device_cfg.staging_size > half && half >= file->device_cfg.fs_block_size)
            file->device_cfg.staging_size = half;
        gds_file_log(file, "device transfers: threads=%u io_block_size=%zu (%s)", file->device_cfg.threads,
                     file->device_cfg.io_block_size, file->tuning.why);
        gds_stat_add(&file->stats.tune_source, (uint64_t)file->tuning.source);
    }
    gds_stat_add(&file->stats.device_threads, file->device_cfg.threads);
    gds_stat_add(&file->stats.device_block, file->device_cfg.io_block_size);
    if (route == GDS_ROUTE_CUFILE)
        gds_file_log(file, "device data through cuFile");
    else
        gds_file_log(file, "device data through the %s path%s%s%s", gds_route_name(route),
                     why ? " (cuFile not used: " : "", why ? why : "", why ? ")" : "");
    /* published by the release store: readers load the flag with acquire */
    file->device_route = route;
    __atomic_store_n(&file->stats.device_route, route, __ATOMIC_RELEASE);
    __atomic_store_n(&file->device_route_decided, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&decide_lock);
    return route;
}

/* Records, on the stream the request is ordered against, the point the
 * engine's copies must wait for. */
static int record_order(const gds_request_t *req, io_group_t *g, gds_status_t *st)
{
    g->after = NULL;
    g->own_after = false;
    if (req->order == GDS_ORDER_NONE)
        return 0;
    if (req->order == GDS_ORDER_EVENT) { /* write-behind's copy event: its owner destroys it */
        g->after = (CUevent)req->stream;
        return 0;
    }
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!cu)
        return 0;
    CUresult rc = CUDA_SUCCESS;
    void *previous = g->info.context ? gds_cuda_enter(g->info.context, &rc) : NULL;
    CUstream stream = req->order == GDS_ORDER_STREAM ? (CUstream)req->stream : NULL;
    if (rc == CUDA_SUCCESS)
        rc = cu->EventCreate(&g->after, CU_EVENT_DISABLE_TIMING);
    if (rc == CUDA_SUCCESS && (rc = cu->EventRecord(g->after, stream)) != CUDA_SUCCESS) {
        cu->EventDestroy(g->after);
        g->after = NULL;
    }
    g->own_after = g->after != NULL;
    if (g->info.context)
        gds_cuda_restore(previous);
    if (rc != CUDA_SUCCESS) {
        gds_status_set(st, 0, "ordering against %s failed: %s",
                       req->order == GDS_ORDER_STREAM ? "the given CUDA stream" : "the default CUDA stream",
                       gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

static int start_device_group(gds_io_t *io, io_group_t *g, const gds_request_t *req, gds_status_t *st)
{
    if (record_order(req, g, st) != 0)
        return -1;
    gds_file_t *file = io->file;
    gds_device_order_t order = {g->after};
    const gds_segment_t *segs = io->segs + g->first;
    g->route = device_route(file);
    int rc;
    if (g->route == GDS_ROUTE_CUFILE)
        rc = gds_cufile_submit(file, io->write, segs, g->count, g->info.context, &order, &g->part, st);
    else if (g->route == GDS_ROUTE_POSIX_BOUNCE)
        rc = gds_staged_submit(file, io->write, segs, g->count, g->info.context, &order, 1, 1, GDS_DIRECT_NEVER,
                               &g->part, st);
    else
        rc = gds_staged_submit(file, io->write, segs, g->count, g->info.context, &order, file->device_cfg.threads,
                               file->device_cfg.staging_count, req->read_once ? GDS_DIRECT_IF_UNCACHED : GDS_DIRECT_CONFIG,
                               &g->part, st);
    g->started = rc == 0;
    return rc;
}

/* Waits for every started group, counts, frees; the first failure wins. */
static int collect(gds_io_t *io, int rc, gds_status_t *st)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    gds_status_t part_st;
    for (unsigned i = 0; i < io->ngroups; i++) {
        io_group_t *g = &io->group[i];
        if (g->started) {
            int prc = gds_job_wait(g->part.job, &part_st);
            g->part.finish(g->part.state);
            if (prc != 0 && rc == 0) {
                *st = part_st;
                rc = -1;
            }
            if (prc != 0 && !g->host)
                gds_stat_add(&io->file->stats.device_path_failures, 1);
        }
        if (g->after && g->own_after && cu)
            cu->EventDestroy(g->after);
    }
    if (rc == 0 && io->raw) {
        uint64_t ns = gds_now_ns() - io->t0;
        size_t total = 0;
        for (unsigned i = 0; i < io->ngroups; i++)
            total += io->group[i].started ? io->group[i].bytes : 0;
        for (unsigned i = 0; i < io->ngroups; i++) {
            io_group_t *g = &io->group[i];
            if (!g->started)
                continue;
            /* Calls by piece, as HDF5 sees them; time shared by bytes. One
             * update per group (a loader batch has thousands of pieces). */
            gds_file_count_calls(io->file, io->write, g->route, g->bytes, g->count,
                                 total ? (uint64_t)((double)ns * (double)g->bytes / (double)total) : 0);
        }
    }
    free(io->segs);
    free(io);
    return rc;
}

/* Whether piece b continues piece a in the file and in memory, within one
 * allocation (back-to-back allocations must not become one copy, nor one
 * registered cuFile buffer). */
static bool continues(const gds_segment_t *a, const gds_segment_t *b, uintptr_t range_a, uintptr_t range_b)
{
    return a->offset + a->size == b->offset && (char *)a->buf + a->size == (char *)b->buf && range_a &&
           range_a == range_b;
}

/* Builds the ticket: segments copied and grouped. Host pieces run inline
 * when `inline_host` (synchronous requests), else on the pool. */
static int submit(gds_file_t *file, const gds_request_t *req, bool inline_host, gds_io_t **out, gds_status_t *st)
{
    size_t n = req->nseg;
    gds_io_t *io = calloc(1, sizeof *io);
    gds_segment_t *segs = malloc((n ? n : 1) * sizeof *segs);
    gds_buffer_info_t *info = malloc((n ? n : 1) * sizeof *info);
    if (!io || !segs || !info) {
        free(io);
        free(segs);
        free(info);
        gds_status_set(st, ENOMEM, "out of memory for a request of %zu pieces", n);
        return -1;
    }
    io->file = file;
    io->write = req->write;
    io->raw = req->data == GDS_DATA_RAW;
    io->segs = segs;
    io->t0 = gds_now_ns();

    /* Classify once (the caller may have done it); only raw data can be
     * in device memory. */
    size_t nlive = 0;
    for (size_t i = 0; i < n; i++) {
        if (req->segs[i].size == 0)
            continue;
        gds_buffer_info_t bi = {GDS_MEMORY_HOST, NULL, -1, 0};
        if (io->raw) {
            if (req->known)
                bi = req->known[i];
            else
                gds_classify_buffer_range(req->segs[i].buf, &bi);
        }
        segs[nlive] = req->segs[i];
        info[nlive++] = bi;
    }

    /* Groups: host first, then one per device context, pieces in request
     * order within each; consecutive pieces of one allocation merged. */
    size_t nout = 0;
    int rc = 0;
    gds_segment_t *grouped = malloc((nlive ? nlive : 1) * sizeof *grouped);
    if (!grouped) {
        free(io);
        free(segs);
        free(info);
        gds_status_set(st, ENOMEM, "out of memory for a request of %zu pieces", n);
        return -1;
    }
    /* The groups, in order of first appearance (host first). */
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (size_t i = 0; i < nlive && rc == 0; i++) {
            bool host = gds_memory_is_host(info[i].kind);
            if (host != (pass == 0))
                continue;
            bool known = false;
            for (unsigned k = 0; k < io->ngroups && !known; k++)
                known = io->group[k].host == host && (host || io->group[k].info.context == info[i].context);
            if (known)
                continue;
            if (io->ngroups == GDS_MAX_GROUPS) {
                gds_status_set(st, EINVAL, "a request spans more than %d CUDA contexts", GDS_MAX_GROUPS - 1);
                rc = -1;
                break;
            }
            io_group_t *g = &io->group[io->ngroups++];
            g->host = host;
            g->info = info[i];
        }
    }
    /* Each group's pieces, contiguous in `grouped`, in request order. */
    for (unsigned k = 0; k < io->ngroups && rc == 0; k++) {
        io_group_t *g = &io->group[k];
        g->first = nout;
        uintptr_t last_range = 0;
        for (size_t i = 0; i < nlive; i++) {
            bool host = gds_memory_is_host(info[i].kind);
            if (host != g->host || (!host && info[i].context != g->info.context))
                continue;
            gds_segment_t *last = g->count ? &grouped[nout - 1] : NULL;
            if (!host && last && continues(last, &segs[i], last_range, info[i].range_start)) {
                last->size += segs[i].size;
            }
            else {
                grouped[nout++] = segs[i];
                g->count++;
            }
            last_range = info[i].range_start;
            g->bytes += segs[i].size;
        }
    }
    free(info);
    free(segs);
    io->segs = grouped;
    io->nseg = nout;
    if (rc != 0) {
        free(io->segs);
        free(io);
        return -1;
    }

    /* Device jobs first, so they run while host pieces are done inline. */
    for (unsigned k = 0; rc == 0 && k < io->ngroups; k++)
        if (!io->group[k].host)
            rc = start_device_group(io, &io->group[k], req, st);
    for (unsigned k = 0; rc == 0 && k < io->ngroups; k++) {
        io_group_t *g = &io->group[k];
        if (!g->host)
            continue;
        g->route = GDS_ROUTE_HOST;
        if (!inline_host) {
            rc = gds_host_submit(file, io->write, io->segs + g->first, g->count, &g->part, st);
            g->started = rc == 0;
            continue;
        }
        for (size_t j = 0; rc == 0 && j < g->count; j++) {
            const gds_segment_t *s = &io->segs[g->first + j];
            uint64_t t0 = gds_now_ns();
            rc = gds_host_transfer(file, io->write, s->offset, s->size, s->buf, io->raw, st);
            if (rc == 0 && io->raw)
                gds_file_count(file, io->write, GDS_ROUTE_HOST, s->size, gds_now_ns() - t0);
        }
    }
    if (rc != 0) {
        /* Jobs already started use the buffers: wait for them before failing. */
        collect(io, -1, st);
        return -1;
    }
    *out = io;
    return 0;
}

int gds_transfer_submit(gds_file_t *file, const gds_request_t *req, gds_io_t **io, gds_status_t *st)
{
    *io = NULL;
    return submit(file, req, false, io, st);
}

bool gds_io_done(gds_io_t *io)
{
    for (unsigned i = 0; i < io->ngroups; i++)
        if (io->group[i].started && !gds_job_done(io->group[i].part.job))
            return false;
    return true;
}

int gds_io_wait(gds_io_t *io, gds_status_t *st)
{
    return collect(io, 0, st);
}

int gds_transfer_run(gds_file_t *file, const gds_request_t *req, gds_status_t *st)
{
    /* The common small case, one host piece: no allocation, no ticket. */
    if (req->nseg == 1) {
        const gds_segment_t *s = &req->segs[0];
        if (s->size == 0)
            return 0;
        bool raw = req->data == GDS_DATA_RAW;
        gds_buffer_info_t bi = {GDS_MEMORY_HOST, NULL, -1, 0};
        if (raw) {
            if (req->known)
                bi = *req->known;
            else
                gds_classify_buffer(s->buf, &bi);
        }
        if (gds_memory_is_host(bi.kind)) {
            uint64_t t0 = raw ? gds_now_ns() : 0;
            int rc = gds_host_transfer(file, req->write, s->offset, s->size, s->buf, raw, st);
            if (rc == 0 && raw)
                gds_file_count(file, req->write, GDS_ROUTE_HOST, s->size, gds_now_ns() - t0);
            return rc;
        }
        gds_request_t known = *req;
        known.known = &bi;
        gds_io_t *io = NULL;
        if (submit(file, &known, true, &io, st) != 0)
            return -1;
        return collect(io, 0, st);
    }
    gds_io_t *io = NULL;
    if (submit(file, req, true, &io, st) != 0)
        return -1;
    return collect(io, 0, st);
}
