/* Write-behind snapshots and their background writes; see write_behind.h.
 * Stacked on the transfer layer (transfer.h): it takes a write, snapshots
 * it and submits the snapshot below; the transfer layer never calls it.
 * The memory of the snapshot arenas, kept between files and prepared
 * ahead, is snapshot_memory.c's. */
#include "write_behind.h"

#include "strategy.h"
#include "transfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define WB_ALIGN 256

/* ---- an arena: one allocation, first-fit extents, coalesced on free ---- */

typedef struct extent {
    size_t off, len;
} extent_t;

typedef struct arena {
    char *base;
    size_t size;    /* the budget: what snapshots may use */
    size_t held;    /* the allocation (a kept arena taken again may be larger) */
    bool device;    /* device memory (else host: pinned when CUDA is loaded) */
    bool pinned;
    void *ctx;      /* the context it was allocated in (kept with it: freed there) */
    extent_t *free; /* sorted by offset */
    size_t nfree, cap;
} arena_t;

static bool arena_alloc(arena_t *a, size_t len, size_t *off)
{
    for (size_t i = 0; i < a->nfree; i++) {
        if (a->free[i].len < len)
            continue;
        *off = a->free[i].off;
        a->free[i].off += len;
        a->free[i].len -= len;
        if (a->free[i].len == 0) {
            memmove(&a->free[i], &a->free[i + 1], (a->nfree - i - 1) * sizeof a->free[0]);
            a->nfree--;
        }
        return true;
    }
    return false;
}

static bool arena_release(arena_t *a, size_t off, size_t len)
{
    size_t i = 0;
    while (i < a->nfree && a->free[i].off < off)
        i++;
    bool joins_prev = i > 0 && a->free[i - 1].off + a->free[i - 1].len == off;
    bool joins_next = i < a->nfree && off + len == a->free[i].off;
    if (joins_prev && joins_next) {
        a->free[i - 1].len += len + a->free[i].len;
        memmove(&a->free[i], &a->free[i + 1], (a->nfree - i - 1) * sizeof a->free[0]);
        a->nfree--;
    }
    else if (joins_prev)
        a->free[i - 1].len += len;
    else if (joins_next) {
        a->free[i].off = off;
        a->free[i].len += len;
    }
    else {
        if (a->nfree == a->cap) {
            size_t cap = a->cap ? 2 * a->cap : 16;
            extent_t *grown = realloc(a->free, cap * sizeof *grown);
            if (!grown)
                return false; /* the space is lost until close: never overlapping, never wrong */
            a->free = grown;
            a->cap = cap;
        }
        memmove(&a->free[i + 1], &a->free[i], (a->nfree - i) * sizeof a->free[0]);
        a->free[i] = (extent_t){off, len};
        a->nfree++;
    }
    return true;
}

/* ---- pending background writes ---- */

typedef struct pending {
    gds_segment_t *segs; /* file ranges (buffers: inside the arena) */
    size_t nseg;
    size_t arena_off, arena_len;
    CUevent copied;      /* the snapshot copy (stream-ordered snapshots), or NULL */
    gds_io_t *io;        /* NULL while held (H5GDS_TEST_WB_HOLD) */
    gds_request_t held;  /* the background request, while held */
    gds_buffer_info_t *held_info;
    struct pending *next;
} pending_t;

struct gds_wb {
    pthread_mutex_t lock; /* held while snapshotting and while waiting: one writer at a time */
    size_t budget;
    arena_t arena;        /* allocated at the first snapshot */
    bool arena_tried;
    gds_snapshot_memory_holder_t holder; /* the arena's memory, listed while this file holds it */
    void *ctx;            /* the CUDA context of device snapshots */
    CUstream stream;      /* snapshot copies */
    /* Events, made once per file rather than per write (a checkpoint is
     * hundreds of writes, each on the application's critical path): the
     * application's point each copy starts after (recorded again for each
     * write: a wait takes the event's state when it is queued), and spare
     * events for the ends of copies. */
    CUevent app_point;
    CUevent *spare;
    size_t nspare, spare_cap;
    pending_t *head, *tail;
    size_t npending;
    size_t in_use;
    bool failed;
    gds_status_t error;   /* the first background failure */
    /* The file space of deferred writes is claimed (fallocate) before the
     * write returns, so that a disk that fills up later cannot take it:
     * what a write reported done lands, as with sec2. */
    bool cannot_reserve;  /* the file system has no fallocate (or H5GDS_TEST_NO_FALLOCATE) */
    uint64_t reserved_lo, reserved_hi; /* the last range claimed, [lo, hi) */
    /* H5GDS_TEST_WB_HOLD (tests): background writes start only when waited
     * for (a later overlapping request, back-pressure, drain), the slowest
     * a background write can be: every write returns before any lands.
     * "random:<seed>" holds each write or not, at random. */
    bool hold;
    uint64_t hold_random; /* "random:<seed>": each write held with probability 1/2 (xorshift state) */
};

/* The arena's memory, as snapshot_memory.c keeps and lists it. */
static gds_snapshot_memory_t arena_memory(const gds_wb_t *wb)
{
    return (gds_snapshot_memory_t){wb->arena.base, wb->arena.held, wb->arena.device, wb->arena.pinned,
                                   wb->arena.ctx ? wb->arena.ctx : wb->ctx};
}

gds_wb_t *gds_wb_create(size_t budget)
{
    gds_wb_t *wb = calloc(1, sizeof *wb);
    if (!wb)
        return NULL;
    pthread_mutex_init(&wb->lock, NULL);
    wb->budget = budget;
    wb->cannot_reserve = gds_env_flag("H5GDS_TEST_NO_FALLOCATE");
    const char *hold = getenv("H5GDS_TEST_WB_HOLD");
    if (hold && strncmp(hold, "random:", 7) == 0)
        wb->hold_random = strtoull(hold + 7, NULL, 0) * 0x9E3779B97F4A7C15ULL | 1;
    else
        wb->hold = gds_env_flag("H5GDS_TEST_WB_HOLD");
    return wb;
}

void gds_wb_destroy(gds_wb_t *wb)
{
    if (!wb)
        return;
    gds_snapshot_memory_closed(&wb->holder);
    if (wb->arena.base) {
        gds_snapshot_memory_t memory = arena_memory(wb);
        gds_snapshot_memory_keep(&memory);
    }
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (cu && (wb->stream || wb->app_point || wb->nspare)) {
        CUresult rc;
        void *previous = gds_cuda_enter(wb->ctx, &rc);
        if (rc == CUDA_SUCCESS) {
            if (wb->stream)
                cu->StreamDestroy(wb->stream);
            if (wb->app_point)
                cu->EventDestroy(wb->app_point);
            for (size_t i = 0; i < wb->nspare; i++)
                cu->EventDestroy(wb->spare[i]);
        }
        gds_cuda_restore(previous);
    }
    free(wb->spare);
    free(wb->arena.free);
    pthread_mutex_destroy(&wb->lock);
    free(wb);
}

static bool overlaps(const pending_t *p, const gds_segment_t *segs, size_t nseg)
{
    for (size_t i = 0; i < p->nseg; i++)
        for (size_t j = 0; j < nseg; j++)
            if (p->segs[i].offset < segs[j].offset + segs[j].size && segs[j].offset < p->segs[i].offset + p->segs[i].size)
                return true;
    return false;
}

/* An event for the end of a snapshot copy (in the snapshots' context,
 * under wb->lock): a spare one, else a new one. Blocking synchronisation:
 * the pool's workers wait on these events while the application is still
 * queueing its writes, and spinning workers would take its cores. */
static CUresult take_event(gds_wb_t *wb, const gds_cuda_api_t *cu, CUevent *ev)
{
    if (wb->nspare) {
        *ev = wb->spare[--wb->nspare];
        return CUDA_SUCCESS;
    }
    return cu->EventCreate(ev, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING);
}

/* Gives an event back for reuse (in the snapshots' context, under
 * wb->lock); destroyed when the spare list cannot grow. */
static void give_event(gds_wb_t *wb, const gds_cuda_api_t *cu, CUevent ev)
{
    if (wb->nspare == wb->spare_cap) {
        size_t cap = wb->spare_cap ? 2 * wb->spare_cap : 64;
        CUevent *grown = realloc(wb->spare, cap * sizeof *grown);
        if (!grown) {
            cu->EventDestroy(ev);
            return;
        }
        wb->spare = grown;
        wb->spare_cap = cap;
    }
    wb->spare[wb->nspare++] = ev;
}

/* Waits, in the snapshots' CUDA context, until a stream-ordered snapshot
 * copy has run (it has read the application's buffer and filled its piece
 * of the arena), then gives its event back if `release` (the caller holds
 * wb->lock). NULL: nothing. */
static void sync_copy(gds_wb_t *wb, CUevent ev, bool release)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!ev || !cu)
        return;
    CUresult rc;
    void *previous = gds_cuda_enter(wb->ctx, &rc);
    cu->EventSynchronize(ev);
    if (release)
        give_event(wb, cu, ev);
    gds_cuda_restore(previous);
}

/* Waits for one background write, frees its snapshot, keeps a failure. */
static void retire_locked(gds_file_t *file, gds_wb_t *wb, pending_t *p)
{
    gds_status_t st;
    int rc = 0;
    if (!p->io) /* held: started now, the latest it can be */
        rc = gds_transfer_submit(file, &p->held, &p->io, &st);
    free(p->held_info);
    p->held_info = NULL;
    if (rc == 0)
        rc = gds_io_wait(p->io, &st);
    if (rc != 0 && !wb->failed) {
        wb->failed = true;
        gds_status_set(&wb->error, st.err, "background write (write-behind) of %zu piece%s from offset %llu failed: %.200s",
                       p->nseg, p->nseg == 1 ? "" : "s", (unsigned long long)p->segs[0].offset, st.msg);
        gds_stat_add(&file->stats.wb_failures, 1);
    }
    sync_copy(wb, p->copied, true); /* done already, unless the background write failed before waiting for it */
    arena_release(&wb->arena, p->arena_off, p->arena_len);
    wb->in_use -= p->arena_len;
    wb->npending--;
    pending_t **link = &wb->head, *prev = NULL;
    while (*link != p) {
        prev = *link;
        link = &(*link)->next;
    }
    *link = p->next;
    if (wb->tail == p)
        wb->tail = prev;
    free(p->segs);
    free(p);
}

static int sticky_error(const gds_wb_t *wb, gds_status_t *st)
{
    gds_status_set(st, wb->error.err, "%.300s", wb->error.msg);
    return -1;
}

/* Finished background writes are retired without waiting. */
static void reap_locked(gds_file_t *file, gds_wb_t *wb)
{
    while (wb->head && wb->head->io && gds_io_done(wb->head->io))
        retire_locked(file, wb, wb->head);
}

int gds_wb_before(gds_file_t *file, bool raw, bool read, const gds_segment_t *segs, size_t nseg, gds_status_t *st)
{
    gds_wb_t *wb = file->wb;
    pthread_mutex_lock(&wb->lock);
    reap_locked(file, wb);
    for (pending_t *p = wb->head, *next; p; p = next) {
        next = p->next;
        if (overlaps(p, segs, nseg))
            retire_locked(file, wb, p);
        else if (read)
            sync_copy(wb, p->copied, false); /* the read may land in memory that copy still reads */
    }
    int rc = wb->failed && raw ? sticky_error(wb, st) : 0;
    pthread_mutex_unlock(&wb->lock);
    return rc;
}

void gds_wb_space_cut(gds_file_t *file, uint64_t size)
{
    gds_wb_t *wb = file->wb;
    pthread_mutex_lock(&wb->lock);
    if (wb->reserved_lo >= size)
        wb->reserved_lo = wb->reserved_hi = 0;
    else if (wb->reserved_hi > size)
        wb->reserved_hi = size;
    pthread_mutex_unlock(&wb->lock);
}

bool gds_wb_idle(gds_file_t *file)
{
    gds_wb_t *wb = file->wb;
    pthread_mutex_lock(&wb->lock);
    reap_locked(file, wb);
    bool idle = wb->head == NULL;
    pthread_mutex_unlock(&wb->lock);
    return idle;
}

int gds_wb_drain(gds_file_t *file, gds_status_t *st)
{
    gds_wb_t *wb = file->wb;
    if (!wb)
        return 0;
    pthread_mutex_lock(&wb->lock);
    while (wb->head)
        retire_locked(file, wb, wb->head);
    int rc = wb->failed ? sticky_error(wb, st) : 0;
    pthread_mutex_unlock(&wb->lock);
    return rc;
}

/* The arena, at the first snapshot: device memory for device data when
 * allowed and available, else host memory (pinned when CUDA is loaded). */
static void make_arena_locked(gds_file_t *file, gds_wb_t *wb, const gds_buffer_info_t *first)
{
    wb->arena_tried = true;
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    size_t size = wb->budget;
    bool want_device = !gds_memory_is_host(first->kind) && file->cfg.write_behind_memory != GDS_WB_HOST;
    void *ctx = first->context;
    if (cu && !ctx) /* host data first: pinned memory of the thread's context, if it has one */
        cu->CtxGetCurrent((CUcontext *)&ctx);
    CUresult entered = CUDA_ERROR_INVALID_CONTEXT;
    void *previous = cu && ctx ? gds_cuda_enter(ctx, &entered) : NULL;
    bool ready = false; /* taken from the kept arenas (an earlier file's, or prepared) */
    if (cu && ctx && entered == CUDA_SUCCESS) {
        wb->ctx = ctx;
        if (cu->StreamCreate(&wb->stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            wb->stream = NULL;
        CUdeviceptr d = 0;
        gds_snapshot_memory_t k;
        if (want_device && gds_snapshot_memory_take_kept(true, size, ctx, &k)) {
            wb->arena.base = k.base;
            wb->arena.held = k.size;
            wb->arena.device = true;
            ready = true;
        }
        else if (want_device && cu->MemAlloc(&d, size) == CUDA_SUCCESS) {
            wb->arena.base = (char *)(uintptr_t)d;
            wb->arena.held = size;
            wb->arena.device = true;
        }
        else if (gds_snapshot_memory_take_kept(false, size, ctx, &k) &&
                 (k.pinned || (gds_snapshot_memory_free(&k), false))) {
            wb->arena.base = k.base; /* (a kept plain-host arena is freed: a CUDA process wants pinned) */
            wb->arena.held = k.size;
            wb->arena.pinned = true;
            ready = true;
        }
        else if (cu->MemHostAlloc((void **)&wb->arena.base, size, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS) {
            wb->arena.held = size;
            wb->arena.pinned = true;
        }
        else
            wb->arena.base = NULL;
    }
    if (cu && ctx)
        gds_cuda_restore(previous); /* the application's thread: its context back */
    if (!wb->arena.base && gds_memory_is_host(first->kind)) {
        gds_snapshot_memory_t k;
        if (gds_snapshot_memory_take_kept(false, size, NULL, &k)) {
            wb->arena.base = k.base; /* pinned memory is host memory too (e.g. prepared on a thread */
            wb->arena.held = k.size; /* with a context, taken by one without) */
            wb->arena.pinned = k.pinned;
            wb->arena.ctx = k.ctx;
            ready = true;
        }
        else if ((wb->arena.base = malloc(size))) /* no CUDA in the process: plain host memory */
            wb->arena.held = size;
    }
    if (!wb->arena.base) {
        gds_file_log(file, "write-behind: no %zu-byte snapshot memory could be allocated; writing through", size);
        return;
    }
    wb->arena.size = size;
    wb->arena.free = malloc(16 * sizeof *wb->arena.free);
    if (!wb->arena.free) {
        gds_snapshot_memory_t memory = arena_memory(wb);
        gds_snapshot_memory_keep(&memory);
        memset(&wb->arena, 0, sizeof wb->arena);
        gds_file_log(file, "write-behind: out of memory for the snapshot bookkeeping; writing through");
        return;
    }
    wb->arena.cap = 16;
    wb->arena.free[0] = (extent_t){0, size};
    wb->arena.nfree = 1;
    gds_stat_add(&file->stats.wb_arena_bytes, wb->arena.held);
    wb->holder.memory = arena_memory(wb);
    gds_snapshot_memory_opened(&wb->holder, ready);
    gds_file_log(file, "write-behind: %zu bytes of %s snapshot memory (%zu held, %s)", size,
                 wb->arena.device ? "device" : wb->arena.pinned ? "pinned host" : "host", wb->arena.held,
                 ready ? "ready: kept or prepared ahead" : "allocated now");
}

/* Copies the request's buffers into the arena at `dst`, ordered against
 * the application's stream as the request says. Device data into the
 * device arena with a stream to order against: the copy is only queued,
 * the application's stream waits for it, and `*copied` is the event
 * recorded after it (the background write waits for it). Otherwise the
 * copy is complete when it returns (`*copied` NULL). */
static int snapshot_locked(gds_wb_t *wb, const gds_request_t *req, const gds_buffer_info_t *info, char *dst,
                           CUevent *copied, gds_status_t *st)
{
    *copied = NULL;
    bool any_device = false;
    for (size_t i = 0; i < req->nseg; i++)
        any_device |= !gds_memory_is_host(info[i].kind);
    if (!any_device && !wb->arena.device) {
        for (size_t i = 0, at = 0; i < req->nseg; at += req->segs[i].size, i++)
            memcpy(dst + at, req->segs[i].buf, req->segs[i].size);
        return 0;
    }
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    CUresult rc;
    void *previous = gds_cuda_enter(wb->ctx, &rc); /* the application's thread: put back below */
    bool ordered = req->order == GDS_ORDER_LEGACY || req->order == GDS_ORDER_STREAM;
    CUstream app = req->order == GDS_ORDER_STREAM ? (CUstream)req->stream : NULL; /* NULL: the legacy stream */
    /* Without the CPU: only device data into device memory (the arena is
     * device memory only for device data), and only with a stream that
     * later work is ordered on. */
    /* Managed memory is written by the CPU after the call returns: its copy
     * completes before the return, as host data's does. */
    bool all_device = true;
    for (size_t i = 0; i < req->nseg; i++)
        all_device &= info[i].kind == GDS_MEMORY_DEVICE;
    bool gpu_ordered = ordered && wb->arena.device && all_device;
    CUevent done = NULL;
    if (rc == CUDA_SUCCESS && ordered) {
        if (!wb->app_point)
            rc = cu->EventCreate(&wb->app_point, CU_EVENT_DISABLE_TIMING);
        if (rc == CUDA_SUCCESS)
            rc = cu->EventRecord(wb->app_point, app);
        if (rc == CUDA_SUCCESS)
            rc = cu->StreamWaitEvent(wb->stream, wb->app_point, 0);
    }
    for (size_t i = 0, at = 0; rc == CUDA_SUCCESS && i < req->nseg; at += req->segs[i].size, i++)
        rc = cu->MemcpyAsync((CUdeviceptr)(uintptr_t)(dst + at), (CUdeviceptr)(uintptr_t)req->segs[i].buf,
                             req->segs[i].size, wb->stream);
    if (rc == CUDA_SUCCESS && gpu_ordered) {
        /* The application's later work on its stream comes after the copy;
         * this thread does not wait. */
        rc = take_event(wb, cu, &done);
        if (rc == CUDA_SUCCESS)
            rc = cu->EventRecord(done, wb->stream);
        if (rc == CUDA_SUCCESS)
            rc = cu->StreamWaitEvent(app, done, 0);
    }
    else if (rc == CUDA_SUCCESS)
        rc = cu->StreamSynchronize(wb->stream);
    if (rc != CUDA_SUCCESS) {
        cu->StreamSynchronize(wb->stream); /* no copy may still run into memory we give back */
        if (done)
            cu->EventDestroy(done); /* its state is unknown: not reused */
        done = NULL;
    }
    gds_cuda_restore(previous);
    if (rc != CUDA_SUCCESS) {
        gds_status_set(st, 0, "write-behind snapshot copy failed: %s", gds_cuda_error_text(rc));
        return -1;
    }
    *copied = done;
    return 0;
}

static int cmp_segment_offset(const void *a, const void *b)
{
    uint64_t x = ((const gds_segment_t *)a)->offset, y = ((const gds_segment_t *)b)->offset;
    return x < y ? -1 : x > y;
}

/* Claims the file space of a deferred write (fallocate, the size kept) so
 * that nothing else can take it before the background write lands: a disk
 * that fills up after the call returned (another file, another process)
 * then cannot make a write that was reported done go missing. 0: claimed,
 * or this file system cannot claim (no fallocate: the write is deferred
 * all the same); -1: no room (or past the size limit): the caller writes
 * it through, and meets the error itself as sec2 would. Contiguous
 * segments are claimed together; space reserved already is skipped. */
static int claim_space_locked(gds_file_t *file, gds_wb_t *wb, const gds_request_t *req)
{
    if (wb->cannot_reserve)
        return 0;
    gds_segment_t one, *sorted = &one;
    if (req->nseg > 1) {
        if (!(sorted = malloc(req->nseg * sizeof *sorted)))
            return -1; /* written through */
        memcpy(sorted, req->segs, req->nseg * sizeof *sorted);
        qsort(sorted, req->nseg, sizeof *sorted, cmp_segment_offset);
    }
    else
        one = req->segs[0];
    pthread_mutex_lock(&file->lock);
    uint64_t reserved_end = file->reserved_end; /* gds_file_reserve's: allocated from 0 */
    pthread_mutex_unlock(&file->lock);
    int rc = 0;
    for (size_t i = 0; i < req->nseg && rc == 0;) {
        uint64_t lo = sorted[i].offset, hi = lo + sorted[i].size;
        for (i++; i < req->nseg && sorted[i].offset <= hi; i++)
            if (sorted[i].offset + sorted[i].size > hi)
                hi = sorted[i].offset + sorted[i].size;
        if (hi <= reserved_end || (lo >= wb->reserved_lo && hi <= wb->reserved_hi))
            continue;
        /* fallocate does not check the file-size limit (ext4, tmpfs): past
         * it, written through, so that the call meets EFBIG as sec2's does */
        struct rlimit fsize;
        if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY && hi > fsize.rlim_cur) {
            rc = -1;
            break;
        }
        int r;
        do
            r = fallocate(file->fd, FALLOC_FL_KEEP_SIZE, (off_t)lo, (off_t)(hi - lo));
        while (r < 0 && errno == EINTR);
        if (r == 0) {
            wb->reserved_lo = lo;
            wb->reserved_hi = hi;
        }
        else if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
            rc = -1;
        else {
            wb->cannot_reserve = true; /* EOPNOTSUPP and the like: not asked again */
            gds_file_log(file, "write-behind: file space cannot be claimed ahead (fallocate: %s)", strerror(errno));
        }
    }
    if (sorted != &one)
        free(sorted);
    return rc;
}

int gds_wb_write(gds_file_t *file, const gds_request_t *req, gds_status_t *st)
{
    gds_wb_t *wb = file->wb;
    size_t total = 0;
    for (size_t i = 0; i < req->nseg; i++)
        total += req->segs[i].size;
    size_t need = (total + WB_ALIGN - 1) / WB_ALIGN * WB_ALIGN;
    if (total == 0 || need > wb->budget)
        return 0; /* larger than the whole budget: written through */
    gds_buffer_info_t *info = malloc(req->nseg * sizeof *info);
    gds_segment_t *segs = malloc(req->nseg * sizeof *segs);
    pending_t *p = calloc(1, sizeof *p);
    if (!info || !segs || !p) {
        free(info);
        free(segs);
        free(p);
        return 0;
    }
    for (size_t i = 0; i < req->nseg; i++)
        if (req->known)
            info[i] = req->known[i];
        else
            gds_classify_buffer(req->segs[i].buf, &info[i]);

    pthread_mutex_lock(&wb->lock);
    int rc = 0;
    reap_locked(file, wb);
    if (wb->failed) {
        rc = sticky_error(wb, st);
        goto out;
    }
    if (!wb->arena_tried)
        make_arena_locked(file, wb, &info[0]);
    if (!wb->arena.base)
        goto out; /* written through */
    for (size_t i = 0; i < req->nseg; i++) {
        bool host = gds_memory_is_host(info[i].kind);
        /* host data never goes into device memory; device data only from
         * the arena's context */
        if ((host && wb->arena.device) || (!host && info[i].context != wb->ctx))
            goto out;
    }
    /* earlier writes of the same bytes land first */
    for (pending_t *q = wb->head, *next; q; q = next) {
        next = q->next;
        if (overlaps(q, req->segs, req->nseg))
            retire_locked(file, wb, q);
    }
    if (claim_space_locked(file, wb, req) < 0) {
        gds_file_log(file, "write-behind: no room to claim for a deferred write; writing it through");
        goto out; /* no room for it: written through, failing as sec2's write does */
    }
    /* space: back-pressure on the oldest background write */
    uint64_t wait0 = 0;
    while (!arena_alloc(&wb->arena, need, &p->arena_off)) {
        if (!wb->head)
            goto out; /* fragmented beyond use (cannot happen when empty): write through */
        if (!wait0)
            wait0 = gds_now_ns();
        retire_locked(file, wb, wb->head);
        if (wb->failed) {
            rc = sticky_error(wb, st);
            goto out;
        }
    }
    if (wait0) {
        gds_stat_add(&file->stats.wb_wait_ns, gds_now_ns() - wait0);
        gds_stat_add(&file->stats.wb_waits, 1);
    }
    p->arena_len = need;
    char *dst = wb->arena.base + p->arena_off;
    CUevent copied = NULL;
    if (snapshot_locked(wb, req, info, dst, &copied, st) != 0) {
        arena_release(&wb->arena, p->arena_off, need);
        rc = -1;
        goto out;
    }
    for (size_t i = 0, at = 0; i < req->nseg; at += req->segs[i].size, i++)
        segs[i] = (gds_segment_t){req->segs[i].offset, req->segs[i].size, dst + at};
    gds_buffer_info_t snap = {wb->arena.device ? GDS_MEMORY_DEVICE : wb->arena.pinned ? GDS_MEMORY_PINNED : GDS_MEMORY_HOST,
                              wb->arena.device ? wb->ctx : NULL, -1, 0};
    gds_buffer_info_t *snap_info = malloc(req->nseg * sizeof *snap_info);
    if (!snap_info) {
        sync_copy(wb, copied, true); /* not written: no copy may still run into memory given back */
        arena_release(&wb->arena, p->arena_off, need);
        goto out; /* written through */
    }
    for (size_t i = 0; i < req->nseg; i++)
        snap_info[i] = snap;
    gds_request_t bg = {.write = true, .data = GDS_DATA_RAW, .nseg = req->nseg, .segs = segs,
                        .order = copied ? GDS_ORDER_EVENT : GDS_ORDER_NONE, .stream = copied, .known = snap_info};
    bool hold = wb->hold;
    if (wb->hold_random) {
        wb->hold_random ^= wb->hold_random << 13;
        wb->hold_random ^= wb->hold_random >> 7;
        wb->hold_random ^= wb->hold_random << 17;
        hold = wb->hold_random >> 63;
    }
    if (hold) {
        p->held = bg;
        p->held_info = snap_info;
        rc = 0;
    }
    else {
        rc = gds_transfer_submit(file, &bg, &p->io, st);
        free(snap_info);
    }
    if (rc != 0) {
        sync_copy(wb, copied, true); /* not written: no copy may still run into memory given back */
        arena_release(&wb->arena, p->arena_off, need);
        goto out;
    }
    p->copied = copied;
    if (copied)
        gds_stat_add(&file->stats.wb_stream_ordered, 1);
    p->segs = segs;
    p->nseg = req->nseg;
    segs = NULL;
    if (wb->tail)
        wb->tail->next = p;
    else
        wb->head = p;
    wb->tail = p;
    p = NULL;
    wb->npending++;
    gds_stat_max(&file->stats.wb_peak_pending, wb->npending);
    wb->in_use += need;
    gds_stat_add(&file->stats.wb_snapshots, 1);
    gds_stat_add(&file->stats.wb_bytes, total);
    uint64_t peak = __atomic_load_n(&file->stats.wb_peak_bytes, __ATOMIC_RELAXED);
    if (wb->in_use > peak)
        __atomic_store_n(&file->stats.wb_peak_bytes, wb->in_use, __ATOMIC_RELAXED);
    rc = 1;
out:
    pthread_mutex_unlock(&wb->lock);
    free(info);
    free(segs);
    free(p);
    return rc;
}
