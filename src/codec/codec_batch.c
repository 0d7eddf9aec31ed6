/*
 * One sub-batch of chunks in the codec's memory, as decode and encode both
 * lay it out: the work buffer carved into error arrays, job arrays (one per
 * stage) and up to four arenas of one slot per chunk; where a stage's data
 * lies; nvCOMP's entry arrays and temporary memory; the jobs built in
 * pinned memory and uploaded; the chunks' first bytes read back for the
 * host; the lowest failing chunk kept.
 */
#include <errno.h>
#include <time.h>

#include "codec_internal.h"

/* Bump allocation inside a buffer. */
/* Where data is: LOC_SRC, LOC_DST or an arena; the first arena not in `busy`. */
int gds_codec_free_arena(const int *busy, int nbusy)
{
    for (int a = 0; a < NARENAS; a++) {
        bool used = false;
        for (int i = 0; i < nbusy; i++)
            used |= busy[i] == a;
        if (!used)
            return a;
    }
    return 0; /* never: four arenas cover every stage */
}

void gds_codec_record_error(error_list_t *e, size_t chunk, unsigned code, uint64_t detail)
{
    unsigned reason = code & 0xff;
    e->garbage |= reason == GDS_KERR_DECODE || reason == GDS_KERR_SIZE;
    if (e->code_of && !e->code_of[chunk]) {
        e->code_of[chunk] = code;
        e->detail_of[chunk] = detail;
    }
    if (chunk < e->first) {
        e->first = chunk;
        e->code = code;
        e->detail = detail;
    }
}

/* Bytes at the start of the work memory that nothing uses: a corrupt
 * stream's back-reference before an arena's first slot reads them instead
 * of unmapped memory (Deflate reaches back 32 KiB, LZ4 64 KiB; zstd frames
 * are checked first, their windows bounded by the chunk). */
#define WORK_GUARD ((size_t)1 << 20)

size_t gds_codec_batch_bytes(const size_t *slot, size_t m, size_t njobs_arrays, batch_mem_t *bm)
{
    size_t off = 0;
    bm->m = m;
    bm->njobs_arrays = njobs_arrays;
    gds_codec_carve(&off, WORK_GUARD, 256); /* reads before an arena's first slot stay in this allocation */
    bm->err = gds_codec_carve(&off, m * 4, 256);
    bm->detail = gds_codec_carve(&off, m * 8, 256);
    bm->acc = gds_codec_carve(&off, m * 3 * 8, 256);
    bm->tail = gds_codec_carve(&off, m * 8, 256);
    bm->heads = gds_codec_carve(&off, m * GDS_HEAD_BYTES, 256);
    bm->dsize = gds_codec_carve(&off, m * 8, 256);
    bm->mask = gds_codec_carve(&off, m * 4, 256);
    bm->jobs = gds_codec_carve(&off, njobs_arrays * m * sizeof(gds_kjob_t), 256);
    for (int a = 0; a < NARENAS; a++) {
        bm->slot[a] = slot[a];
        bm->arena[a] = slot[a] ? gds_codec_carve(&off, m * slot[a], SLOT_ALIGN) : 0;
    }
    return off;
}

size_t gds_codec_pinned_bytes(batch_mem_t *bm)
{
    size_t off = 0, m = bm->m;
    bm->pin_jobs = gds_codec_carve(&off, bm->njobs_arrays * m * sizeof(gds_kjob_t), 64);
    bm->pin_heads = gds_codec_carve(&off, m * GDS_HEAD_BYTES, 64);
    bm->pin_err = gds_codec_carve(&off, m * 4, 64);
    bm->pin_detail = gds_codec_carve(&off, m * 8, 64);
    bm->pin_dsize = gds_codec_carve(&off, m * 8, 64);
    bm->pin_mask = gds_codec_carve(&off, m * 4, 64);
    return off;
}

void gds_codec_offset_batch(batch_mem_t *bm, CUdeviceptr base)
{
    bm->err += base;
    bm->detail += base;
    bm->acc += base;
    bm->tail += base;
    bm->heads += base;
    bm->dsize += base;
    bm->mask += base;
    bm->jobs += base;
    for (int a = 0; a < NARENAS; a++)
        if (bm->slot[a])
            bm->arena[a] += base;
}

int gds_codec_entries_reserve(gds_codec_t *c, size_t ne, size_t temp, size_t extra, CUstream s, entries_mem_t *em,
                              CUdeviceptr *extra_at, gds_status_t *st)
{
    size_t off = 0;
    size_t in_ptrs = gds_codec_carve(&off, ne * 8, 256), in_bytes = gds_codec_carve(&off, ne * 8, 256);
    size_t out_cap = gds_codec_carve(&off, ne * 8, 256), out_actual = gds_codec_carve(&off, ne * 8, 256);
    size_t out_ptrs = gds_codec_carve(&off, ne * 8, 256), status = gds_codec_carve(&off, ne * 4, 256);
    size_t aux = gds_codec_carve(&off, ne * sizeof(gds_kentry_t), 256);
    size_t t = gds_codec_carve(&off, temp, 256);
    size_t x = gds_codec_carve(&off, extra, SLOT_ALIGN);
    if (gds_codec_dbuf_reserve(c, &c->blocks, off, s, st) < 0)
        return -1;
    CUdeviceptr b = c->blocks.ptr;
    em->e = (gds_kentries_t){b + in_ptrs, b + in_bytes, b + out_cap, b + out_actual, b + out_ptrs, b + status, b + aux};
    em->temp = b + t;
    em->temp_bytes = temp;
    if (extra_at)
        *extra_at = b + x;
    return 0;
}

CUdeviceptr gds_codec_loc_ptr(const batch_mem_t *bm, int loc, const gds_codec_chunk_t *ch, size_t j)
{
    if (loc == LOC_SRC)
        return (CUdeviceptr)(uintptr_t)ch->src;
    if (loc == LOC_DST)
        return (CUdeviceptr)(uintptr_t)ch->dst;
    return bm->arena[loc] + j * bm->slot[loc];
}

/* Uploads `n` jobs (built in pinned memory at job array `a`) and returns their device address. */
int gds_codec_upload_jobs(gds_codec_t *c, const batch_mem_t *bm, size_t a, size_t n, CUstream s, CUdeviceptr *dev,
                          gds_status_t *st)
{
    size_t off = a * bm->m * sizeof(gds_kjob_t);
    *dev = bm->jobs + off;
    if (!n)
        return 0;
    CUresult rc = c->cu->MemcpyHtoDAsync(*dev, (char *)c->pinned + bm->pin_jobs + off, n * sizeof(gds_kjob_t), s);
    return rc == CUDA_SUCCESS ? 0 : gds_codec_cuda_fail(st, "cuMemcpyHtoDAsync", rc);
}

gds_kjob_t *gds_codec_pinned_jobs(gds_codec_t *c, const batch_mem_t *bm, size_t a)
{
    return (gds_kjob_t *)((char *)c->pinned + bm->pin_jobs + a * bm->m * sizeof(gds_kjob_t));
}

int gds_codec_memset_async(gds_codec_t *c, CUdeviceptr p, size_t bytes, CUstream s, gds_status_t *st)
{
    CUresult rc = c->cu->MemsetD8Async(p, 0, bytes, s);
    return rc == CUDA_SUCCESS ? 0 : gds_codec_cuda_fail(st, "cuMemsetD8Async", rc);
}

int gds_codec_trace_wait(gds_codec_t *c, CUstream s, double *when, gds_status_t *st)
{
    CUresult rc = c->cu->StreamSynchronize(s);
    *when = 1e-9 * (double)gds_now_ns();
    return rc == CUDA_SUCCESS ? 0 : gds_codec_cuda_fail(st, "waiting for the stream", rc);
}

int gds_codec_read_count(gds_codec_t *c, CUdeviceptr p, uint32_t *count, gds_status_t *st)
{
    CUresult rc = c->cu->MemcpyDtoH(count, p, sizeof *count);
    return rc == CUDA_SUCCESS ? 0 : gds_codec_cuda_fail(st, "reading a count back", rc);
}

/* Waits for the stream, at most c->timeout_s: nvCOMP's decoders may never
 * finish on garbage inside a compressed block (seen with Zstd), and a
 * caller is better served by an error than by a process that hangs. The
 * work then stays on the GPU: the codec is marked stuck (later calls fail,
 * its memory is never freed, since freeing would wait for that work). */
int gds_codec_sync_stream(gds_codec_t *c, CUstream s, gds_status_t *st)
{
    struct timespec t0, now, pause = {0, 20000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        CUresult rc = c->cu->StreamQuery(s);
        if (rc == CUDA_SUCCESS)
            return 0;
        if (rc != CUDA_ERROR_NOT_READY)
            return gds_codec_cuda_fail(st, "the codec's work on the stream", rc);
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9;
        if (waited > c->timeout_s) {
            __atomic_store_n(&c->stuck, true, __ATOMIC_RELEASE); /* gds_codec_stopped reads it unlocked */
            gds_status_set(st, ETIMEDOUT,
                           "GPU codec: the GPU's work on this batch did not finish within %.0f s (garbage inside a "
                           "compressed block can keep nvCOMP's decoder from ending; H5GDS_CODEC_TIMEOUT_S); it is "
                           "still running, so this process's GPU codecs are stopped and a device-wide "
                           "synchronisation would not return: read this file with HDF5's CPU filters",
                           c->timeout_s);
            return -1;
        }
        if (waited > 0.001)
            pause.tv_nsec = 200000; /* long work: check less often */
        nanosleep(&pause, NULL);
    }
}

/* The first GDS_HEAD_BYTES bytes of the nj jobs at dj, in pinned memory
 * (the stream synchronised). */
int gds_codec_read_heads(gds_codec_t *c, const batch_mem_t *bm, CUdeviceptr dj, size_t nj, CUstream s,
                         unsigned char **heads, gds_status_t *st)
{
    unsigned n32 = (unsigned)nj;
    CUdeviceptr h = bm->heads;
    void *ah[] = {&dj, &n32, &h};
    *heads = (unsigned char *)c->pinned + bm->pin_heads;
    if (gds_codec_launch(c, K_GATHER_HEAD, blocks_for(nj * GDS_HEAD_BYTES), 1, s, ah, st) < 0)
        return -1;
    CUresult rc = c->cu->MemcpyDtoHAsync(*heads, bm->heads, nj * GDS_HEAD_BYTES, s);
    if (rc != CUDA_SUCCESS)
        return gds_codec_cuda_fail(st, "cuMemcpyDtoHAsync", rc);
    return gds_codec_sync_stream(c, s, st);
}

size_t gds_codec_arena_bytes(const size_t *slot)
{
    size_t per = 256; /* the chunk's records: sizes, masks, errors, jobs */
    for (int a = 0; a < NARENAS; a++)
        per += slot[a];
    return per;
}

typedef struct {
    gds_codec_t *c;
    gds_codec_temp_fn temp_of;
    const void *plan;
    size_t per, budget;
} sub_batch_fit_t;

static bool sub_batch_fits(void *arg, size_t m)
{
    const sub_batch_fit_t *f = arg;
    return m * f->per + f->temp_of(f->c, f->plan, m) <= f->budget;
}

size_t gds_codec_widest_sub_batch(gds_codec_t *c, size_t per, size_t n, gds_codec_temp_fn temp, const void *plan,
                                  size_t *temp_out)
{
    sub_batch_fit_t f = {c, temp, plan, per, gds_codec_budget(c)};
    size_t m = gds_codec_widest_fitting(n == 0 ? 1 : n < MAX_BATCH ? n : MAX_BATCH, sub_batch_fits, &f);
    *temp_out = temp(c, plan, m);
    return m;
}
