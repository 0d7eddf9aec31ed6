/* Snapshot memory kept for the next file and prepared ahead; see
 * snapshot_memory.h. Write-behind (write_behind.c) takes its arenas from
 * here and gives them back; nothing here calls write-behind. */
#include "snapshot_memory.h"

#include "strategy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- arenas kept for the next file ----
 * Pinning gigabytes takes about a second, and a checkpoint every few
 * minutes would pay it each time: a destroyed file's arena is kept (one per
 * kind) for the next file with write-behind, and freed at engine shutdown.
 * A preparation (gds_wb_prepare) allocates one ahead, before any file. */

static gds_snapshot_memory_t kept[2]; /* [0]: device, [1]: host */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
/* Under kept_lock: preparations in progress per kind (as kept[]), and the
 * condition broadcast when one ends. */
static unsigned preparing[2];
static pthread_cond_t kept_cond = PTHREAD_COND_INITIALIZER;
/* Under kept_lock: the arenas open files hold (gds_snapshot_memory_opened). */
static gds_snapshot_memory_holder_t *open_arenas;
/* Atomic counters (gds_wb_memory_info). */
static uint64_t files_ready, files_allocated, prepared_count;

void gds_snapshot_memory_free(const gds_snapshot_memory_t *k)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!k->base)
        return;
    if (!k->device && !k->pinned) {
        free(k->base);
        return;
    }
    /* cuFile may hold a registration of it (register=on) */
    gds_cufile_forget_range(k->base, k->size);
    CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
    void *previous = cu ? gds_cuda_enter(k->ctx, &rc) : NULL;
    if (cu && (rc == CUDA_SUCCESS || !k->device)) { /* pinned memory is portable: freed from any context */
        if (k->device)
            cu->MemFree((CUdeviceptr)(uintptr_t)k->base);
        else
            cu->MemFreeHost(k->base);
    }
    if (cu)
        gds_cuda_restore(previous);
}

/* Whether an arena serves a file whose first snapshot wants `device`
 * memory (else host) of at least `size` bytes in context `ctx`, as
 * write_behind.c's make_arena_locked takes one: device memory of that
 * context; with a context, pinned memory of it (a plain host arena is not
 * wanted then); without one, any host memory (pinned memory is host memory:
 * a file written from a thread without a context takes what a thread with
 * one prepared). */
static bool serves(size_t held, bool device, bool pinned, void *arena_ctx, bool want_device, size_t size, void *ctx)
{
    if (held < size || device != want_device)
        return false;
    if (device)
        return arena_ctx == ctx;
    return ctx ? pinned && arena_ctx == ctx : true; /* without a context any host memory serves */
}

bool gds_snapshot_memory_take_kept(bool device, size_t size, void *ctx, gds_snapshot_memory_t *out)
{
    pthread_mutex_lock(&kept_lock);
    int slot = device ? 0 : 1;
    while (preparing[slot])
        pthread_cond_wait(&kept_cond, &kept_lock);
    gds_snapshot_memory_t *k = &kept[slot];
    /* device memory serves its own context; pinned host memory its own, or
     * a thread without one (it is host memory, portable); plain host memory
     * any (a caller with a context frees it and pins its own) */
    bool ok = k->base && k->size >= size && (k->device ? k->ctx == ctx : !k->pinned || !ctx || k->ctx == ctx);
    if (ok) {
        *out = *k;
        memset(k, 0, sizeof *k);
    }
    pthread_mutex_unlock(&kept_lock);
    return ok;
}

void gds_snapshot_memory_keep(const gds_snapshot_memory_t *a)
{
    pthread_mutex_lock(&kept_lock);
    gds_snapshot_memory_t *k = &kept[a->device ? 0 : 1];
    gds_snapshot_memory_t drop = *k;
    if (k->base && k->size > a->size && k->ctx == a->ctx && k->pinned == a->pinned)
        drop = *a;
    else
        *k = *a;
    pthread_mutex_unlock(&kept_lock);
    gds_snapshot_memory_free(&drop);
}

static void join_preparations(void);

void gds_wb_release_kept(void)
{
    join_preparations(); /* what they allocate is kept: freed below */
    pthread_mutex_lock(&kept_lock);
    gds_snapshot_memory_t k0 = kept[0], k1 = kept[1];
    memset(kept, 0, sizeof kept);
    pthread_mutex_unlock(&kept_lock);
    gds_snapshot_memory_free(&k0);
    gds_snapshot_memory_free(&k1);
}

/* ---- arenas open files hold ---- */

void gds_snapshot_memory_opened(gds_snapshot_memory_holder_t *holder, bool was_ready)
{
    gds_stat_add(was_ready ? &files_ready : &files_allocated, 1);
    pthread_mutex_lock(&kept_lock);
    holder->next = open_arenas;
    open_arenas = holder;
    holder->listed = true;
    pthread_mutex_unlock(&kept_lock);
}

void gds_snapshot_memory_closed(gds_snapshot_memory_holder_t *holder)
{
    if (!holder->listed)
        return;
    pthread_mutex_lock(&kept_lock);
    for (gds_snapshot_memory_holder_t **link = &open_arenas; *link; link = &(*link)->next)
        if (*link == holder) {
            *link = holder->next;
            break;
        }
    pthread_mutex_unlock(&kept_lock);
}

/* ---- snapshot memory made ready ahead (see snapshot_memory.h) ---- */

struct gds_wb_prep {
    size_t bytes;
    gds_wb_memory_t kind;
    void *ctx;
    int slot;            /* the kind marked in preparing[] */
    pthread_t thread;
    /* under kept_lock */
    bool finished, joined, abandoned;
    int rc;
    gds_status_t st;     /* written by the thread before `finished` */
    gds_wb_prep_t *next; /* in `preps` until given back and joined */
};

static gds_wb_prep_t *preps; /* under kept_lock */

/* Whether memory that serves such a file is kept, or held by an open file
 * (kept when it closes). Under kept_lock. */
static bool ready_locked(bool device, size_t bytes, void *ctx)
{
    const gds_snapshot_memory_t *k = &kept[device ? 0 : 1];
    if (k->base && serves(k->size, k->device, k->pinned, k->ctx, device, bytes, ctx))
        return true;
    for (const gds_snapshot_memory_holder_t *h = open_arenas; h; h = h->next)
        if (serves(h->memory.size, h->memory.device, h->memory.pinned, h->memory.ctx, device, bytes, ctx))
            return true;
    return false;
}

static uint64_t machine_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
}

/* The device's memory (free, total) in context `ctx`; false when CUDA
 * cannot say. */
static bool device_memory(void *ctx, size_t *free_bytes, size_t *total_bytes)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    CUresult rc = CUDA_ERROR_NOT_INITIALIZED;
    void *previous = cu ? gds_cuda_enter(ctx, &rc) : NULL;
    if (rc == CUDA_SUCCESS)
        rc = cu->MemGetInfo(free_bytes, total_bytes);
    if (cu)
        gds_cuda_restore(previous);
    return rc == CUDA_SUCCESS;
}

/* What can be told before allocating: the kind exists, device memory has
 * a context, and the memory asked for is not more than the device (or the
 * machine) has at all. Returns the kind marked in preparing[] (0: device,
 * 1: host), or -1 with `st`. */
static int prepare_check(size_t bytes, gds_wb_memory_t kind, void *ctx, gds_status_t *st)
{
    if (kind != GDS_WB_AUTO && kind != GDS_WB_DEVICE && kind != GDS_WB_HOST) {
        gds_status_set(st, EINVAL, "snapshot memory: unknown kind %d (auto, device or host)", (int)kind);
        return -1;
    }
    if (bytes == 0) {
        gds_status_set(st, EINVAL, "snapshot memory: 0 bytes asked for");
        return -1;
    }
    if (ctx && !gds_cuda_if_loaded()) {
        gds_status_set(st, EINVAL, "snapshot memory: a CUDA context was given, but CUDA is not loaded");
        return -1;
    }
    if (kind == GDS_WB_DEVICE && !ctx) {
        gds_status_set(st, EINVAL, "device snapshot memory needs a CUDA context: none is current on the calling "
                                   "thread (no GPU work done there yet, or CUDA not loaded)");
        return -1;
    }
    bool device = kind == GDS_WB_DEVICE || (kind == GDS_WB_AUTO && ctx);
    size_t free_bytes = 0, total = 0;
    bool device_fits = device && (!device_memory(ctx, &free_bytes, &total) || bytes <= total);
    if (device && !device_fits && kind == GDS_WB_DEVICE) {
        gds_status_set(st, ENOMEM, "%zu bytes of device snapshot memory: more than the device's %zu bytes", bytes,
                       total);
        return -1;
    }
    uint64_t machine = machine_memory();
    if (!device_fits && bytes > machine) { /* host memory, or auto falling back to it */
        gds_status_set(st, ENOMEM, "%zu bytes of host snapshot memory: more than this machine's %llu bytes%s", bytes,
                       (unsigned long long)machine, device ? " (and the device's)" : "");
        return -1;
    }
    return device ? 0 : 1;
}

/* One allocation of `bytes` of the kind, or -1 with `st`. Pinned and device
 * memory is backed at once; plain host memory has every page touched here,
 * so the first snapshots do not pay the page faults either. */
static int allocate(size_t bytes, bool device, void *ctx, gds_snapshot_memory_t *a, gds_status_t *st)
{
    memset(a, 0, sizeof *a);
    if (!ctx) {
        if (!(a->base = malloc(bytes))) {
            gds_status_set(st, ENOMEM, "cannot allocate %zu bytes of host snapshot memory", bytes);
            return -1;
        }
        long page = sysconf(_SC_PAGESIZE);
        for (size_t at = 0; at < bytes; at += page > 0 ? (size_t)page : 4096)
            ((volatile char *)a->base)[at] = 0;
        a->size = bytes;
        return 0;
    }
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    CUresult rc;
    void *previous = gds_cuda_enter(ctx, &rc);
    size_t free_bytes = 0, total = 0;
    if (rc == CUDA_SUCCESS && device) {
        CUdeviceptr d = 0;
        rc = cu->MemAlloc(&d, bytes);
        if (rc == CUDA_SUCCESS)
            a->base = (char *)(uintptr_t)d;
        else if (cu->MemGetInfo(&free_bytes, &total) != CUDA_SUCCESS)
            free_bytes = total = 0;
    }
    else if (rc == CUDA_SUCCESS)
        rc = cu->MemHostAlloc((void **)&a->base, bytes, CU_MEMHOSTALLOC_PORTABLE);
    gds_cuda_restore(previous);
    if (rc != CUDA_SUCCESS) {
        int err = rc == CUDA_ERROR_OUT_OF_MEMORY ? ENOMEM : 0;
        if (device)
            gds_status_set(st, err, "cannot allocate %zu bytes of device snapshot memory: %s (%zu of %zu bytes free)",
                           bytes, gds_cuda_error_text(rc), free_bytes, total);
        else
            gds_status_set(st, err, "cannot allocate %zu bytes of pinned host snapshot memory: %s", bytes,
                           gds_cuda_error_text(rc));
        a->base = NULL;
        return -1;
    }
    a->size = bytes;
    a->device = device;
    a->pinned = !device;
    a->ctx = ctx;
    return 0;
}

/* The preparation itself; `*slot` is the kind marked in preparing[] (auto
 * moves the mark to host memory when the device has no room). */
static int prepare_run(size_t bytes, gds_wb_memory_t kind, void *ctx, int *slot, gds_status_t *st)
{
    for (;;) {
        bool device = *slot == 0;
        pthread_mutex_lock(&kept_lock);
        bool ready = ready_locked(device, bytes, ctx);
        pthread_mutex_unlock(&kept_lock);
        if (ready)
            return 0;
        gds_snapshot_memory_t a;
        if (allocate(bytes, device, ctx, &a, st) == 0) {
            gds_snapshot_memory_keep(&a);
            gds_stat_add(&prepared_count, 1);
            return 0;
        }
        if (!device || kind != GDS_WB_AUTO || bytes > machine_memory())
            return -1;
        pthread_mutex_lock(&kept_lock); /* auto: pinned host memory instead */
        preparing[1]++;
        preparing[0]--;
        *slot = 1;
        pthread_cond_broadcast(&kept_cond);
        pthread_mutex_unlock(&kept_lock);
    }
}

static void prepare_end(int slot)
{
    pthread_mutex_lock(&kept_lock);
    preparing[slot]--;
    pthread_cond_broadcast(&kept_cond);
    pthread_mutex_unlock(&kept_lock);
}

int gds_wb_prepare(size_t bytes, gds_wb_memory_t kind, void *ctx, gds_status_t *st)
{
    int slot = prepare_check(bytes, kind, ctx, st);
    if (slot < 0)
        return -1;
    pthread_mutex_lock(&kept_lock);
    preparing[slot]++;
    pthread_mutex_unlock(&kept_lock);
    int rc = prepare_run(bytes, kind, ctx, &slot, st);
    prepare_end(slot);
    return rc;
}

static void *prepare_main(void *arg)
{
    gds_wb_prep_t *p = arg;
    gds_status_t st = {0, ""};
    int slot = p->slot;
    int rc = prepare_run(p->bytes, p->kind, p->ctx, &slot, &st);
    pthread_mutex_lock(&kept_lock);
    p->rc = rc;
    p->st = st;
    p->finished = true;
    preparing[slot]--;
    pthread_cond_broadcast(&kept_cond);
    pthread_mutex_unlock(&kept_lock); /* the thread's last use of anything shared */
    return NULL;
}

/* Joins and frees the preparations given back that have ended (a joined
 * thread has only its return left to run). Under kept_lock. */
static void reap_preparations_locked(void)
{
    for (gds_wb_prep_t **link = &preps; *link;) {
        gds_wb_prep_t *p = *link;
        if (p->abandoned && p->finished) {
            if (!p->joined)
                pthread_join(p->thread, NULL);
            *link = p->next;
            free(p);
        }
        else
            link = &p->next;
    }
}

int gds_wb_prepare_start(size_t bytes, gds_wb_memory_t kind, void *ctx, gds_wb_prep_t **out, gds_status_t *st)
{
    *out = NULL;
    int slot = prepare_check(bytes, kind, ctx, st);
    if (slot < 0)
        return -1;
    gds_wb_prep_t *p = calloc(1, sizeof *p);
    if (!p) {
        gds_status_set(st, ENOMEM, "snapshot memory: out of memory for the preparation");
        return -1;
    }
    *p = (gds_wb_prep_t){.bytes = bytes, .kind = kind, .ctx = ctx, .slot = slot};
    pthread_mutex_lock(&kept_lock);
    reap_preparations_locked();
    preparing[slot]++; /* before the call returns: a file opened next waits for this memory */
    int rc = pthread_create(&p->thread, NULL, prepare_main, p);
    if (rc == 0) {
        p->next = preps;
        preps = p;
    }
    else {
        preparing[slot]--;
        pthread_cond_broadcast(&kept_cond);
    }
    pthread_mutex_unlock(&kept_lock);
    if (rc != 0) {
        free(p);
        gds_status_set(st, rc, "snapshot memory: cannot start a thread to prepare it");
        return -1;
    }
    *out = p;
    return 0;
}

bool gds_wb_prepare_done(gds_wb_prep_t *prep)
{
    pthread_mutex_lock(&kept_lock);
    bool done = prep->finished;
    pthread_mutex_unlock(&kept_lock);
    return done;
}

int gds_wb_prepare_wait(gds_wb_prep_t *prep, gds_status_t *st)
{
    pthread_mutex_lock(&kept_lock);
    while (!prep->finished)
        pthread_cond_wait(&kept_cond, &kept_lock);
    if (!prep->joined) {
        pthread_join(prep->thread, NULL);
        prep->joined = true;
    }
    int rc = prep->rc;
    if (rc != 0)
        *st = prep->st;
    pthread_mutex_unlock(&kept_lock);
    return rc;
}

void gds_wb_prepare_free(gds_wb_prep_t *prep)
{
    if (!prep)
        return;
    pthread_mutex_lock(&kept_lock);
    prep->abandoned = true;
    reap_preparations_locked();
    pthread_mutex_unlock(&kept_lock);
}

/* Waits for every preparation in progress and joins its thread (engine
 * shutdown: no thread may run the library's code after it). */
static void join_preparations(void)
{
    pthread_mutex_lock(&kept_lock);
    for (;;) {
        bool running = false;
        for (gds_wb_prep_t *p = preps; p; p = p->next)
            running |= !p->finished;
        if (!running)
            break;
        pthread_cond_wait(&kept_cond, &kept_lock);
    }
    for (gds_wb_prep_t *p = preps; p; p = p->next)
        if (!p->joined) {
            pthread_join(p->thread, NULL);
            p->joined = true;
        }
    reap_preparations_locked();
    pthread_mutex_unlock(&kept_lock);
}

void gds_wb_memory_info(gds_wb_memory_info_t *info)
{
    memset(info, 0, sizeof *info);
    pthread_mutex_lock(&kept_lock);
    info->ready_device_bytes = kept[0].base ? kept[0].size : 0;
    info->ready_host_bytes = kept[1].base ? kept[1].size : 0;
    info->ready_host_pinned = kept[1].base && kept[1].pinned;
    for (const gds_snapshot_memory_holder_t *h = open_arenas; h; h = h->next)
        info->open_bytes += h->memory.size;
    info->preparing = preparing[0] + preparing[1];
    pthread_mutex_unlock(&kept_lock);
    info->files_ready = __atomic_load_n(&files_ready, __ATOMIC_RELAXED);
    info->files_allocated = __atomic_load_n(&files_allocated, __ATOMIC_RELAXED);
    info->prepared = __atomic_load_n(&prepared_count, __ATOMIC_RELAXED);
}
