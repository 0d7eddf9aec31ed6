/*
 * Device memory <-> file through pinned host staging buffers.
 *
 * The request (one range, or HDF5's vector of several) is cut into blocks
 * of io_block_size (aligned to absolute file offsets) that pool workers
 * claim; each block is moved in pieces of at most
 * staging_size through the worker's ring of pinned slots. Per worker:
 *   write: the D2H copy of piece n+1 runs (async, on the worker's stream)
 *          while piece n is written to the file;
 *   read:  piece n+1 is read from the file while the H2D copy of piece n runs.
 * Across workers, many disk requests and copies are in flight at once.
 *
 * O_DIRECT is used for the file-block-aligned middle of each piece: a slot's
 * base maps to the aligned file offset below the piece, so that middle lands
 * on an aligned host address. The unaligned head and tail use the buffered
 * descriptor. Reads: short reads at end of file are zero-filled in the slot
 * before the H2D copy, so device memory past EOF is zeroed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "strategy.h"

#define GDS_MAX_RING 16
#define GDS_MAX_CONTEXTS 8
/* The smallest block of a read-once request found in the page cache. */
#define CACHED_READ_FLOOR ((size_t)2 << 20)

typedef struct ring_slot {
    char *mem;           /* aligned start inside the pinned allocation */
    CUevent copied;      /* recorded after the slot's async copy */
    bool pending;        /* a copy was issued and not yet waited for */
    /* what the slot holds (writes: still to be written to the file) */
    uint64_t file_offset;
    size_t size;
} ring_slot_t;

typedef struct staging_ring {
    CUcontext ctx;
    CUstream stream;
    size_t slot_bytes;   /* usable bytes per slot, including alignment slack */
    size_t slot_alloc;   /* bytes of each pinned allocation */
    unsigned nslots;
    void *alloc[GDS_MAX_RING];
    ring_slot_t slot[GDS_MAX_RING];
} staging_ring_t;

/* Each worker keeps one ring per CUDA context it has served. */
typedef struct worker_staging {
    staging_ring_t rings[GDS_MAX_CONTEXTS];
    unsigned nrings;
} worker_staging_t;

typedef struct staged_job {
    gds_file_t *file;
    CUevent after;       /* the application's work to wait for, or NULL */
    const gds_cuda_api_t *cu;
    bool write;
    gds_task_map_t tasks; /* segments (device pointers) cut into blocks */
    CUcontext ctx;
    size_t piece;        /* staging slot payload */
    size_t fsb;          /* O_DIRECT granularity */
    size_t align;        /* staging memory alignment */
    unsigned depth;
    int direct_fd;       /* -1: buffered only */
} staged_job_t;

/* Pinned bytes all rings hold (tests check that nothing leaks). */
static size_t pinned_bytes;

size_t gds_staged_pinned_bytes(void)
{
    return __atomic_load_n(&pinned_bytes, __ATOMIC_RELAXED);
}

static void ring_release(const gds_cuda_api_t *cu, staging_ring_t *ring)
{
    for (unsigned i = 0; i < ring->nslots; i++) {
        if (ring->slot[i].copied)
            cu->EventDestroy(ring->slot[i].copied);
        if (ring->alloc[i]) {
            cu->MemFreeHost(ring->alloc[i]);
            __atomic_sub_fetch(&pinned_bytes, ring->slot_alloc, __ATOMIC_RELAXED);
        }
    }
    if (ring->stream)
        cu->StreamDestroy(ring->stream);
    memset(ring, 0, sizeof *ring);
}

static int cuda_check(CUresult rc, const char *what, gds_status_t *st)
{
    if (rc == CUDA_SUCCESS)
        return 0;
    gds_status_set(st, 0, "%s failed: %s (CUDA error %d)", what, gds_cuda_error_text(rc), (int)rc);
    return -1;
}

/* Frees a worker's rings when its thread stops (gds_pool_shutdown), each
 * in its own context; failures are ignored (the context may be gone). */
static void worker_staging_release(void *state)
{
    worker_staging_t *ws = state;
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    for (unsigned i = 0; cu && i < ws->nrings; i++) {
        /* Pinned memory is portable, freed whatever is current; the stream
         * and events need their context, which may be gone (then their
         * destruction fails and the driver reclaims them with it). */
        gds_cuda_make_current(ws->rings[i].ctx);
        ring_release(cu, &ws->rings[i]);
    }
    free(ws);
}

/* A ring whose (re)build failed leaves the worker's list, so that dead
 * entries never push out live ones. */
static void drop_ring(worker_staging_t *ws, staging_ring_t *ring)
{
    unsigned i = (unsigned)(ring - ws->rings);
    ws->rings[i] = ws->rings[--ws->nrings];
    memset(&ws->rings[ws->nrings], 0, sizeof ws->rings[0]);
}

/* The worker's ring for this job's context, (re)built when too small. */
static staging_ring_t *ring_for(gds_worker_t *worker, const staged_job_t *job, gds_status_t *st)
{
    const gds_cuda_api_t *cu = job->cu;
    worker_staging_t *ws = worker->staging;
    if (!ws) {
        ws = calloc(1, sizeof *ws);
        if (!ws) {
            gds_status_set(st, ENOMEM, "cannot allocate staging state");
            return NULL;
        }
        worker->staging = ws;
        worker->release = worker_staging_release;
    }
    staging_ring_t *ring = NULL;
    for (unsigned i = 0; i < ws->nrings; i++)
        if (ws->rings[i].ctx == job->ctx)
            ring = &ws->rings[i];
    if (!ring) {
        if (ws->nrings == GDS_MAX_CONTEXTS) {
            /* rare: many GPUs; recycle the oldest, in its own context */
            gds_cuda_make_current(ws->rings[0].ctx);
            ring_release(cu, &ws->rings[0]);
            gds_cuda_make_current(job->ctx);
            memmove(&ws->rings[0], &ws->rings[1], sizeof ws->rings[0] * (GDS_MAX_CONTEXTS - 1));
            ws->nrings--;
            memset(&ws->rings[ws->nrings], 0, sizeof ws->rings[0]);
        }
        ring = &ws->rings[ws->nrings++];
        ring->ctx = job->ctx;
    }
    size_t need = job->piece + job->fsb; /* head slack so the aligned middle stays aligned */
    if (ring->stream && ring->slot_bytes >= need && ring->nslots >= job->depth)
        return ring;

    ring_release(cu, ring);
    ring->ctx = job->ctx;
    ring->slot_alloc = need + job->align;
    if (cuda_check(cu->StreamCreate(&ring->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", st) != 0) {
        drop_ring(ws, ring);
        return NULL;
    }
    for (unsigned i = 0; i < job->depth; i++) {
        CUresult rc = cu->MemHostAlloc(&ring->alloc[i], need + job->align, CU_MEMHOSTALLOC_PORTABLE);
        if (rc != CUDA_SUCCESS) {
            ring->alloc[i] = NULL;
            ring->nslots = i;
            ring_release(cu, ring);
            drop_ring(ws, ring);
            gds_status_set(st, ENOMEM, "cannot allocate %zu bytes of pinned staging memory: %s", need,
                           gds_cuda_error_text(rc));
            return NULL;
        }
        __atomic_add_fetch(&pinned_bytes, ring->slot_alloc, __ATOMIC_RELAXED);
        uintptr_t p = (uintptr_t)ring->alloc[i];
        ring->slot[i].mem = (char *)GDS_ROUND_UP(p, job->align);
        ring->nslots = i + 1;
        if (cuda_check(cu->EventCreate(&ring->slot[i].copied, CU_EVENT_DISABLE_TIMING), "cuEventCreate", st) != 0) {
            ring_release(cu, ring);
            drop_ring(ws, ring);
            return NULL;
        }
    }
    ring->slot_bytes = need;
    return ring;
}

/* Reads [off, off+len) of the file into `dst`, whose address corresponds to
 * file offset `off` with the slot's alignment. Zero-fills past EOF. */
static int piece_read(const staged_job_t *job, char *slot_base, uint64_t base, uint64_t off, size_t len,
                      gds_status_t *st)
{
    int fd = job->file->fd;
    char *dst = slot_base + (off - base);
    size_t done = 0;
    if (job->direct_fd >= 0) {
        uint64_t a0 = GDS_ROUND_UP(off, job->fsb), a1 = GDS_ROUND_DOWN(off + len, job->fsb);
        if (a1 > a0) {
            ssize_t n = gds_pread_full(fd, dst, (size_t)(a0 - off), off);
            if (n < 0)
                goto fail;
            if ((size_t)n == a0 - off) {
                ssize_t m = gds_pread_full(job->direct_fd, slot_base + (a0 - base), (size_t)(a1 - a0), a0);
                if (m < 0)
                    goto fail;
                done = (size_t)(a0 - off) + (size_t)m;
                /* A short O_DIRECT read ends at EOF; the buffered read below
                 * confirms that and picks up any unaligned remainder. */
            }
            else {
                done = (size_t)n;
            }
        }
    }
    if (done < len) {
        ssize_t n = gds_pread_full(fd, dst + done, len - done, off + done);
        if (n < 0)
            goto fail;
        done += (size_t)n;
    }
    if (done < len)
        memset(dst + done, 0, len - done); /* past end of file */
    return 0;
fail:
    gds_status_set(st, errno, "read of %zu bytes at offset %llu failed", len, (unsigned long long)off);
    return -1;
}

static int piece_write(const staged_job_t *job, char *slot_base, uint64_t base, uint64_t off, size_t len,
                       gds_status_t *st)
{
    int fd = job->file->fd;
    const char *src = slot_base + (off - base);
    uint64_t a0 = GDS_ROUND_UP(off, job->fsb), a1 = GDS_ROUND_DOWN(off + len, job->fsb);
    if (job->direct_fd >= 0 && a1 > a0) {
        if (gds_pwrite_full(fd, src, (size_t)(a0 - off), off) != 0 ||
            gds_pwrite_full(job->direct_fd, slot_base + (a0 - base), (size_t)(a1 - a0), a0) != 0 ||
            gds_pwrite_full(fd, src + (a1 - off), (size_t)(off + len - a1), a1) != 0)
            goto fail;
        return 0;
    }
    if (gds_pwrite_full(fd, src, len, off) == 0)
        return 0;
fail:
    gds_status_set(st, errno, "write of %zu bytes at offset %llu failed", len, (unsigned long long)off);
    return -1;
}

/* Finishes the slot's outstanding work: waits for its copy; for a write,
 * then stores its bytes in the file. */
static int slot_retire(const staged_job_t *job, ring_slot_t *slot, gds_status_t *st)
{
    if (!slot->pending)
        return 0;
    slot->pending = false;
    if (cuda_check(job->cu->EventSynchronize(slot->copied), job->write ? "device-to-host copy" : "host-to-device copy",
                   st) != 0)
        return -1;
    if (job->write)
        return piece_write(job, slot->mem, GDS_ROUND_DOWN(slot->file_offset, job->fsb), slot->file_offset,
                           slot->size, st);
    return 0;
}

static int staged_worker_run(gds_job_t *gjob, void *arg, gds_worker_t *worker, gds_status_t *st)
{
    const staged_job_t *job = arg;
    const gds_cuda_api_t *cu = job->cu;
    if (cuda_check(gds_cuda_make_current(job->ctx), "cuCtxSetCurrent", st) != 0)
        return -1;
    staging_ring_t *ring = ring_for(worker, job, st);
    if (!ring)
        return -1;
    /* The application's work on its stream comes first: the GPU holds our
     * copies back until then; this thread does not wait for it. */
    if (job->after && cuda_check(cu->StreamWaitEvent(ring->stream, job->after, 0), "cuStreamWaitEvent", st) != 0)
        return -1;

    unsigned next_slot = 0;
    int rc = 0;
    size_t task;
    while (rc == 0 && gds_job_next(gjob, &task)) {
        uint64_t lo, hi;
        const gds_segment_t *seg = gds_task_map_range(&job->tasks, task, &lo, &hi);
        for (uint64_t off = lo; rc == 0 && off < hi; off += job->piece) {
            size_t len = (size_t)((hi - off) < job->piece ? hi - off : job->piece);
            ring_slot_t *slot = &ring->slot[next_slot];
            next_slot = (next_slot + 1) % job->depth;
            if ((rc = slot_retire(job, slot, st)) != 0)
                break;
            uint64_t base = GDS_ROUND_DOWN(off, job->fsb);
            char *host = slot->mem + (off - base);
            CUdeviceptr dev = (CUdeviceptr)(uintptr_t)seg->buf + (off - seg->offset);
            if (job->write) {
                rc = cuda_check(cu->MemcpyDtoHAsync(host, dev, len, ring->stream), "cuMemcpyDtoHAsync", st);
            }
            else {
                rc = piece_read(job, slot->mem, base, off, len, st);
                if (rc == 0)
                    rc = cuda_check(cu->MemcpyHtoDAsync(dev, host, len, ring->stream), "cuMemcpyHtoDAsync", st);
            }
            if (rc == 0)
                rc = cuda_check(cu->EventRecord(slot->copied, ring->stream), "cuEventRecord", st);
            if (rc == 0) {
                slot->pending = true;
                slot->file_offset = off;
                slot->size = len;
            }
        }
    }
    /* Drain in issue order; on failure still wait for every copy in flight so
     * no slot is reused (or freed) while the GPU reads or writes it. */
    for (unsigned i = 0; i < job->depth; i++) {
        ring_slot_t *slot = &ring->slot[(next_slot + i) % job->depth];
        if (rc == 0) {
            rc = slot_retire(job, slot, st);
        }
        else if (slot->pending) {
            slot->pending = false;
            cu->EventSynchronize(slot->copied);
        }
    }
    return rc;
}

/* Counted as a busy worker of the file while it works on the job. */
static int staged_worker(gds_job_t *gjob, void *arg, gds_worker_t *worker, gds_status_t *st)
{
    gds_file_t *file = ((staged_job_t *)arg)->file;
    gds_file_worker_enter(file);
    int rc = staged_worker_run(gjob, arg, worker, st);
    gds_file_worker_leave(file);
    return rc;
}

int gds_page_cached(int fd, uint64_t offset)
{
    /* A read that must not wait. (cachestat(2) would not start read-ahead
     * where the page is missing, but on overlayfs it counts no page ever,
     * and its number differs between architectures.) */
    char byte;
    struct iovec iov = {&byte, 1};
    ssize_t r = preadv2(fd, &iov, 1, (off_t)offset, RWF_NOWAIT);
    return r >= 0 ? 1 : errno == EAGAIN ? 0 : -1;
}

/* Whether a read-once request's bytes are mostly out of the page cache:
 * three pages inside it are asked (at a quarter, half and three quarters of
 * its bytes), not its first and last, which it may share with metadata HDF5
 * just read or with the batch read before it. */
static bool mostly_uncached(int fd, const gds_segment_t *segs, size_t nseg, size_t total)
{
    int uncached = 0;
    for (size_t q = 1; q <= 3; q++) {
        size_t want = total / 4 * q, i = 0;
        while (i + 1 < nseg && want >= segs[i].size) {
            want -= segs[i].size;
            i++;
        }
        if (want >= segs[i].size)
            want = segs[i].size ? segs[i].size - 1 : 0;
        uncached += gds_page_cached(fd, segs[i].offset + want) == 0; /* unknown (an old kernel): buffered */
    }
    return uncached >= 2;
}

static void staged_job_finish(void *state)
{
    staged_job_t *job = state;
    gds_task_map_free(&job->tasks);
    free(job);
}

int gds_staged_submit(gds_file_t *file, bool write, const gds_segment_t *segs, size_t nseg, void *ctx,
                      const gds_device_order_t *order, unsigned nworkers, unsigned ring_depth,
                      gds_direct_use_t direct_use, gds_part_t *part, gds_status_t *st)
{
    const char *why = NULL;
    const gds_cuda_api_t *cu = gds_cuda_load(&why);
    if (!cu) {
        gds_status_set(st, 0, "device buffer but CUDA is unusable: %s", why);
        return -1;
    }
    if (!ctx) {
        gds_status_set(st, 0, "device buffer without a CUDA context");
        return -1;
    }
    size_t total = 0;
    for (size_t i = 0; i < nseg; i++)
        total += segs[i].size;
    staged_job_t *job = calloc(1, sizeof *job);
    if (!job) {
        gds_status_set(st, ENOMEM, "out of memory for a request of %zu pieces", nseg);
        return -1;
    }
    *job = (staged_job_t){
        .file = file,
        .after = order ? order->after : NULL,
        .cu = cu,
        .write = write,
        .ctx = ctx,
        .piece = file->device_cfg.staging_size,
        .fsb = file->device_cfg.fs_block_size,
        .align = file->device_cfg.alignment > file->device_cfg.fs_block_size ? file->device_cfg.alignment : file->device_cfg.fs_block_size,
        .depth = ring_depth < 1 ? 1 : ring_depth > GDS_MAX_RING ? GDS_MAX_RING : ring_depth,
        .direct_fd = -1,
    };
    /* O_DIRECT: writes by default (durable, no page-cache copy); reads when
     * forced, or when read once and not cached (read_once), since buffered
     * reads keep the page cache warm for the next reader and reached the
     * cold-read rate with read-ahead for large raw reads. */
    bool direct = direct_use != GDS_DIRECT_NEVER &&
                  (file->device_cfg.direct == GDS_ON || (write && file->device_cfg.direct == GDS_AUTO));
    if (!direct && !write && direct_use == GDS_DIRECT_IF_UNCACHED && file->device_cfg.direct == GDS_AUTO && nseg > 0 &&
        total > 0)
        direct = mostly_uncached(file->fd, segs, nseg, total);
    if (direct)
        job->direct_fd = gds_file_direct_fd(file);
    /* Bytes read once that are in the page cache: a worker copies a block
     * at a few GB/s, so blocks of the staging size would leave a batch of
     * GPU-decoded chunks to a few workers while the GPU waits for it (a
     * 47 MB batch: 3 workers, 6.6 ms). Smaller blocks spread it over all. */
    size_t floor = !write && direct_use == GDS_DIRECT_IF_UNCACHED && !direct ? CACHED_READ_FLOOR : 0;
    if (gds_task_map_init(&job->tasks, segs, nseg, gds_block_for(&file->device_cfg, total, nworkers, floor)) != 0) {
        free(job);
        gds_status_set(st, ENOMEM, "out of memory splitting a request of %zu pieces", nseg);
        return -1;
    }
    if (job->piece > job->tasks.block)
        job->piece = job->tasks.block;
    part->job = gds_pool_submit(nworkers, gds_task_map_count(&job->tasks), staged_worker, job, st);
    if (!part->job) {
        staged_job_finish(job);
        return -1;
    }
    part->finish = staged_job_finish;
    part->state = job;
    return 0;
}
