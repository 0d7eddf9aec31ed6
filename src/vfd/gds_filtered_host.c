/*
 * Reads of a few Deflate or zstd chunks decoded by CPU threads
 * (src/codec/host_codec.h) instead of the GPU.
 *
 * nvCOMP decodes a batch of whole Deflate or zstd chunks in about one
 * chunk's serial time, whatever the batch's width (1 MiB chunks: 25 ms for
 * zstd, 33-66 ms for Deflate on an H100), so a read of two chunks takes as
 * long as a read of five hundred. A CPU thread inflates a 1 MiB chunk in
 * 2-7 ms: a read whose chunks the CPU threads decode within that time
 * (and within HOST_READ_MAX_BYTES) is theirs: its stored bytes are read
 * into host memory, decoded into pinned memory as the reads land, and
 * copied to their places.
 *
 * How many bytes: the GPU's batch seconds per decoded byte of one chunk and
 * the CPU threads' decoded bytes per second (wall clock, reads included),
 * each measured by this process's reads (starting from an H100 host's
 * figures); threads: H5GDS_HOST_DECODE_THREADS (the online CPUs, at most
 * 16, by default; 0 turns this off).
 *
 * H5GDS_HOST_DECODE_CHUNKS=N leaves any read's last N chunks to the CPU
 * threads, the rest to the GPU: their reads start once the GPU's batches
 * are read, and they decode while the GPU's last batch does. Measured on
 * an H100, this did not make large reads faster (the GPU's batches take
 * as long with fewer chunks; bench/results/2026-11-27-h100-cpu-decode), so
 * it is a setting for tests and measurements, not the default.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gds_filtered_internal.h"
#include "gds_vfd_raw.h"
#include "../codec/host_codec.h"
#include "../engine/worker_pool.h"

/* Decoded bytes a read may leave to the CPU threads, at most (pinned
 * memory, kept for the next read until the driver terminates). */
#define HOST_READ_MAX_BYTES ((size_t)64 << 20)
#define DEFAULT_MAX_THREADS 16

/* What the estimate starts from (H100 host, 1 MiB chunks of the compressed
 * benchmark's data): the GPU's batch seconds per decoded byte of one chunk,
 * the CPU threads' decoded bytes per second per thread (wall clock, reads
 * included, divided by the threads). Index 0 Deflate, 1 zstd. */
static struct {
    pthread_mutex_t lock;
    double gpu_s_per_chunk_byte[2];
    double host_bytes_per_s[2];
    void *pinned; /* one pinned buffer kept for the next read */
    size_t pinned_cap;
} rates = {PTHREAD_MUTEX_INITIALIZER, {0.033 / (1 << 20), 0.025 / (1 << 20)}, {140e6, 350e6}, NULL, 0};

/* Chunks of less than this say little of the GPU's per-batch time (the
 * launches and the synchronisation weigh in). */
#define MEASURED_CHUNK_MIN ((size_t)256 << 10)

struct host_tail {
    read_state_t *s;
    int codec;               /* 0 Deflate, 1 zstd */
    unsigned threads;
    size_t from;             /* the CPU's chunks: [from, s->nchunks) */
    size_t nstored, *chunk;  /* the written ones among them, by index */
    size_t *at;              /* each one's stored bytes' offset in `stored` */
    unsigned char *stored;   /* host memory */
    unsigned char *decoded;  /* pinned where possible: chunk_bytes each */
    size_t decoded_cap;
    bool decoded_pinned;
    size_t ngroups, per_group;
    gds_io_t **io;           /* a read per group */
    gds_job_t *job;
    double started;
    double pinned_s, submit_s; /* host_start's parts (H5GDS_CODEC_DEBUG's trace) */
    double done_from;        /* when the reads were started (the wall-clock rate's start) */
    /* what the workers found */
    pthread_mutex_t lock;
    size_t bad;              /* the first failing chunk's place in `chunk` (SIZE_MAX: none) */
    gds_status_t bad_st;
    double decode_s;         /* summed over the threads */
};

static unsigned env_unsigned(const char *name, long fallback)
{
    const char *env = getenv(name);
    if (!env || !*env)
        return (unsigned)fallback;
    long v = atol(env);
    return v < 0 ? 0 : v > 4096 ? 4096 : (unsigned)v;
}

static unsigned host_threads(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    long fallback = online < 1 ? 1 : online > DEFAULT_MAX_THREADS ? DEFAULT_MAX_THREADS : online;
    unsigned n = env_unsigned("H5GDS_HOST_DECODE_THREADS", fallback);
    return n > GDS_MAX_WORKERS / 2 ? GDS_MAX_WORKERS / 2 : n;
}

void gds_filtered_host_note_gpu_batch(const read_state_t *s, double seconds)
{
    int compressor = gds_codec_host_compressor(&s->pipe, NULL, 0);
    if (compressor <= 0 || s->pipe.chunk_bytes < MEASURED_CHUNK_MIN || seconds <= 0)
        return;
    pthread_mutex_lock(&rates.lock);
    rates.gpu_s_per_chunk_byte[compressor == GDS_FILTER_ZSTD] = seconds / (double)s->pipe.chunk_bytes;
    pthread_mutex_unlock(&rates.lock);
}

/* How many of the read's last chunks the CPU threads decode: all of a
 * read they decode within one GPU batch's time, else none (unless set). */
static size_t host_chunks(const read_state_t *s, int codec, unsigned threads)
{
    const char *forced = getenv("H5GDS_HOST_DECODE_CHUNKS");
    if (forced && *forced) {
        long n = atol(forced);
        return n < 0 ? 0 : (size_t)n;
    }
    size_t written = 0;
    for (size_t k = 0; k < s->nchunks; k++)
        written += s->chunks[k].addr != HADDR_UNDEF;
    double bytes = (double)written * (double)s->pipe.chunk_bytes;
    pthread_mutex_lock(&rates.lock);
    double gpu_s = rates.gpu_s_per_chunk_byte[codec] * (double)s->pipe.chunk_bytes;
    double host_s = bytes / (rates.host_bytes_per_s[codec] * threads);
    pthread_mutex_unlock(&rates.lock);
    return host_s <= gpu_s && bytes <= (double)HOST_READ_MAX_BYTES ? s->nchunks : 0;
}

host_tail_t *gds_filtered_host_plan(read_state_t *s)
{
    s->read_end = s->nchunks;
    unsigned threads = host_threads();
    int compressor = threads ? gds_codec_host_compressor(&s->pipe, NULL, 0) : -1;
    if (compressor != GDS_FILTER_DEFLATE && compressor != GDS_FILTER_ZSTD)
        return NULL; /* none here, or the GPU's batches are short (no compressor) */
    int codec = compressor == GDS_FILTER_ZSTD;
    size_t n = host_chunks(s, codec, threads), cap = 4 * HOST_READ_MAX_BYTES / s->pipe.chunk_bytes;
    n = n > cap ? cap : n;
    n = n > s->nchunks ? s->nchunks : n;
    if (n == 0)
        return NULL;
    host_tail_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL; /* the GPU decodes it all */
    t->s = s;
    t->codec = codec;
    t->threads = threads;
    t->from = s->nchunks - n;
    t->bad = SIZE_MAX;
    pthread_mutex_init(&t->lock, NULL);
    s->read_end = t->from;
    return t;
}

static void *take_pinned(read_state_t *s, size_t bytes, bool *pinned)
{
    void *p = NULL;
    pthread_mutex_lock(&rates.lock);
    if (rates.pinned && rates.pinned_cap >= bytes) {
        p = rates.pinned;
        rates.pinned = NULL;
    }
    pthread_mutex_unlock(&rates.lock);
    *pinned = true;
    if (p)
        return p;
    /* portable: the buffer serves the reads of every context */
    if (s->cu->MemHostAlloc && s->cu->MemHostAlloc(&p, bytes, 0x01 /* CU_MEMHOSTALLOC_PORTABLE */) == CUDA_SUCCESS)
        return p;
    *pinned = false;
    return malloc(bytes);
}

static void give_pinned(const gds_cuda_api_t *cu, void *p, size_t cap, bool pinned)
{
    if (!pinned) {
        free(p);
        return;
    }
    void *drop = p;
    pthread_mutex_lock(&rates.lock);
    if (cap <= HOST_READ_MAX_BYTES && (!rates.pinned || rates.pinned_cap < cap)) { /* keep the larger one */
        drop = rates.pinned;
        rates.pinned = p;
        rates.pinned_cap = cap;
    }
    pthread_mutex_unlock(&rates.lock);
    if (drop)
        (void)cu->MemFreeHost(drop);
}

void gds_filtered_host_release(void)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    pthread_mutex_lock(&rates.lock);
    void *p = rates.pinned;
    rates.pinned = NULL;
    rates.pinned_cap = 0;
    pthread_mutex_unlock(&rates.lock);
    if (p && cu)
        (void)cu->MemFreeHost(p);
}

/* A worker: waits for a group's read, decodes its chunks. Failures are
 * recorded, never returned: every group's read must still be waited for
 * before its buffer goes. */
static int decode_groups(gds_job_t *job, void *ctx, gds_worker_t *worker, gds_status_t *st)
{
    (void)worker;
    (void)st;
    host_tail_t *t = ctx;
    const read_state_t *s = t->s;
    void *work = malloc(gds_codec_host_work_bytes(&s->pipe));
    size_t g;
    while (gds_job_next(job, &g)) { /* every group claimed is decoded or recorded as failed */
        size_t lo = g * t->per_group, hi = lo + t->per_group < t->nstored ? lo + t->per_group : t->nstored;
        gds_status_t rs = {0, ""};
        int rc = gds_io_wait(t->io[g], &rs);
        t->io[g] = NULL;
        if (rc == 0 && !work) {
            gds_status_set(&rs, ENOMEM, "out of host memory for the CPU's decode");
            rc = -1;
        }
        double t0 = gds_filtered_seconds_now();
        for (size_t i = lo; i < hi; i++) {
            const chunk_t *c = &s->chunks[t->chunk[i]];
            if (rc == 0)
                rc = gds_codec_host_decode(&s->pipe, c->mask, t->stored + t->at[i], (size_t)c->stored,
                                           t->decoded + i * s->pipe.chunk_bytes, work, &rs);
            if (rc < 0) {
                pthread_mutex_lock(&t->lock);
                if (i < t->bad) {
                    t->bad = i;
                    t->bad_st = rs;
                }
                pthread_mutex_unlock(&t->lock);
                break;
            }
        }
        double spent = gds_filtered_seconds_now() - t0;
        pthread_mutex_lock(&t->lock);
        t->decode_s += spent;
        pthread_mutex_unlock(&t->lock);
    }
    free(work);
    return 0;
}

herr_t gds_filtered_host_start(host_tail_t *t)
{
    read_state_t *s = t->s;
    size_t n = s->nchunks - t->from, bytes = 0;
    t->started = gds_filtered_seconds_now();
    t->chunk = malloc(n * sizeof *t->chunk);
    t->at = malloc(n * sizeof *t->at);
    if (!t->chunk || !t->at) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a read of %zu chunks", n);
        return -1;
    }
    for (size_t k = t->from; k < s->nchunks; k++)
        if (s->chunks[k].addr != HADDR_UNDEF) {
            t->chunk[t->nstored] = k;
            t->at[t->nstored++] = bytes;
            bytes += (size_t)s->chunks[k].stored;
        }
    if (t->nstored == 0)
        return 0;
    t->stored = malloc(bytes ? bytes : 1);
    t->decoded_cap = t->nstored * s->pipe.chunk_bytes;
    t->decoded = take_pinned(s, t->decoded_cap, &t->decoded_pinned);
    t->pinned_s = gds_filtered_seconds_now() - t->started;
    t->ngroups = t->nstored < 2 * (size_t)t->threads ? t->nstored : 2 * (size_t)t->threads;
    t->per_group = (t->nstored + t->ngroups - 1) / t->ngroups;
    t->ngroups = (t->nstored + t->per_group - 1) / t->per_group;
    t->io = calloc(t->ngroups, sizeof *t->io);
    gds_segment_t *segs = malloc(t->per_group * sizeof *segs);
    if (!t->stored || !t->decoded || !t->io || !segs) {
        free(segs);
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for the CPU's decode of %zu chunks", t->nstored);
        return -1;
    }
    for (size_t g = 0; g < t->ngroups; g++) {
        size_t lo = g * t->per_group, hi = lo + t->per_group < t->nstored ? lo + t->per_group : t->nstored;
        for (size_t i = lo; i < hi; i++) {
            const chunk_t *c = &s->chunks[t->chunk[i]];
            segs[i - lo] = (gds_segment_t){(uint64_t)c->addr, (size_t)c->stored, t->stored + t->at[i]};
            s->stats.chunks++;
            s->stats.stored_bytes += c->stored;
            s->stats.decoded_bytes += s->pipe.chunk_bytes;
        }
        gds_status_t st;
        if (gds_vfd_submit_raw_read(s->fid, segs, hi - lo, &t->io[g], &st) < 0) {
            free(segs);
            FILTERED_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': reading %zu stored chunks failed: %s", s->name,
                           hi - lo, st.msg);
            return -1;
        }
    }
    free(segs);
    t->done_from = gds_filtered_seconds_now();
    t->submit_s = t->done_from - t->started - t->pinned_s;
    gds_status_t st;
    t->job = gds_pool_submit(t->threads, t->ngroups, decode_groups, t, &st);
    if (!t->job) {
        FILTERED_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': cannot start the CPU's decode: %s", s->name,
                       st.msg);
        return -1;
    }
    return 0;
}

/* Copies the decoded chunks to their places (through scratch where a
 * chunk is cut by the selection) and fills the never-written ones. */
static herr_t place(host_tail_t *t)
{
    read_state_t *s = t->s;
    size_t esize = s->pipe.type_size, aside = 0, i = 0;
    for (size_t k = 0; k < t->nstored; k++)
        aside += !s->chunks[t->chunk[k]].in_place;
    if (gds_filtered_ensure(s, &s->scratch, &s->scratch_cap, aside * s->pipe.chunk_bytes, 0, "decoded chunks") < 0)
        return -1;
    CUresult rc = CUDA_SUCCESS;
    size_t scratch_at = 0;
    for (size_t k = t->from; k < s->nchunks && rc == CUDA_SUCCESS; k++) {
        chunk_t *c = &s->chunks[k];
        if (c->addr == HADDR_UNDEF) {
            if (s->fill)
                rc = gds_filtered_copy_box_part(s->cu, &s->box, s->cdims, c->lo, (void *)(uintptr_t)s->fill, s->out,
                                                esize, false, s->stream);
            continue;
        }
        const unsigned char *src = t->decoded + i++ * s->pipe.chunk_bytes;
        if (c->in_place) {
            rc = s->cu->MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)c->dst, src, s->pipe.chunk_bytes, s->stream);
            continue;
        }
        CUdeviceptr at = s->scratch + scratch_at;
        scratch_at += s->pipe.chunk_bytes;
        rc = s->cu->MemcpyHtoDAsync(at, src, s->pipe.chunk_bytes, s->stream);
        if (rc == CUDA_SUCCESS)
            rc = gds_filtered_copy_box_part(s->cu, &s->box, s->cdims, c->lo, (void *)(uintptr_t)at, s->out, esize,
                                            false, s->stream);
    }
    CUresult sync = s->cu->StreamSynchronize(s->stream); /* the host buffers go next */
    rc = rc == CUDA_SUCCESS ? sync : rc;
    if (rc != CUDA_SUCCESS) {
        FILTERED_ERROR(H5E_DATASET, H5E_CANTCOPY, "dataset '%s': placing chunks decoded on the CPU failed: %s",
                       s->name, gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

herr_t gds_filtered_host_finish(host_tail_t *t, bool ok)
{
    if (!t)
        return 0;
    read_state_t *s = t->s;
    herr_t ret = 0;
    double waited = gds_filtered_seconds_now();
    if (t->job) {
        gds_status_t st;
        if (gds_job_wait(t->job, &st) < 0 && ok) {
            FILTERED_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': the CPU's decode failed: %s", s->name, st.msg);
            ret = -1;
        }
    }
    for (size_t g = 0; g < t->ngroups && t->io; g++) /* reads no worker took: they end before their buffer goes */
        if (t->io[g]) {
            gds_status_t st;
            (void)gds_io_wait(t->io[g], &st);
        }
    double t0 = gds_filtered_seconds_now();
    if (ok && ret == 0 && t->bad != SIZE_MAX) {
        char where[128];
        gds_filtered_chunk_text(&s->box, s->chunks[t->chunk[t->bad]].lo, where, sizeof where);
        FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': chunk at %s could not be decoded: %s", s->name, where,
                       t->bad_st.msg);
        ret = -1;
    } else if (ok && ret == 0 && t->started > 0 && (t->nstored > 0 || s->fill)) {
        ret = place(t);
    }
    double t1 = gds_filtered_seconds_now();
    s->stats.decode_s += t1 - waited;
    if (ret == 0 && ok && t->nstored >= t->threads && t0 > t->done_from) { /* for the next read's estimate */
        double rate = (double)(t->nstored * s->pipe.chunk_bytes) / (t0 - t->done_from) / t->threads;
        pthread_mutex_lock(&rates.lock);
        rates.host_bytes_per_s[t->codec] = rate;
        pthread_mutex_unlock(&rates.lock);
    }
    if (gds_filtered_trace_on() && t->started > 0)
        fprintf(stderr, "h5gds read '%s': chunks [%zu, %zu) on %u CPU threads: %zu read and decoded by %.1f ms after "
                "their start (memory %.1f ms, reads started %.1f ms), waited %.1f ms, placed %.1f ms (%.0f MB/s a "
                "thread)\n", s->name, t->from, s->nchunks, t->threads, t->nstored, 1e3 * (t0 - t->started),
                1e3 * t->pinned_s, 1e3 * t->submit_s, 1e3 * (t0 - waited), 1e3 * (t1 - t0),
                t->decode_s > 0 ? (double)(t->nstored * s->pipe.chunk_bytes) / t->decode_s / 1e6 : 0.0);
    if (t->decoded)
        give_pinned(s->cu, t->decoded, t->decoded_cap, t->decoded_pinned);
    free(t->stored);
    free(t->io);
    free(t->chunk);
    free(t->at);
    pthread_mutex_destroy(&t->lock);
    free(t);
    return ret;
}
