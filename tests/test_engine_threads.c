/*
 * The engine driven directly (no HDF5) from 16 threads at once: mixed
 * synchronous and asynchronous reads and writes, single and vector
 * requests, on one shared file (each thread its own region, plus a zone
 * every thread writes with the same bytes: overlapping writes whose order
 * does not matter) and on a file of each thread's own. Every byte is
 * compared with a shadow copy, during the run and at the end.
 *
 *   test_engine_threads [--gpu]
 *
 * Host buffers always (and pinned ones when a GPU is present); with --gpu,
 * device buffers too (skipped, exit 77, without a GPU). Built twice: plain
 * (engine_threads) and with ThreadSanitizer (engine_threads_tsan), which
 * must report nothing.
 *
 * Also: a job that waits for a job it submitted, on a pool of one thread
 * (waiting must not need a free pool thread); poll-then-wait tickets;
 * shutdown and restart of the pool with a constant thread count.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "file_internal.h"
#include "strategy.h"
#include "worker_pool.h"
#include "cuda_loader.h"

enum {
    NTHREADS = 16,
    REGION = 256 << 10,      /* bytes each thread owns in the shared file */
    ZONE = 64 << 10,         /* written by every thread with the same bytes */
    OWN = 512 << 10,         /* each thread's own file */
    OPS = 120,               /* operations per thread */
    MAX_IO = 96 << 10,
};
#define ZONE_OFFSET ((uint64_t)NTHREADS * REGION)

static int failures;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

#define FAIL(...)                                                \
    do {                                                         \
        pthread_mutex_lock(&report_lock);                        \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);     \
        fprintf(stderr, __VA_ARGS__);                            \
        fputc('\n', stderr);                                     \
        failures++;                                              \
        pthread_mutex_unlock(&report_lock);                      \
    } while (0)

static const gds_cuda_api_t *cu; /* with --gpu, or when pinned memory is available */
static CUcontext gpu_ctx;
static bool use_device;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(rng_next(&s) >> 24);
}

/* The zone's bytes: the same whoever writes them. */
static unsigned char zone_byte(uint64_t off)
{
    return (unsigned char)(off * 131 + 7);
}

static gds_engine_settings_t settings(void)
{
    gds_engine_settings_t s = {
        .mode = GDS_MODE_STAGED,
        .threads = 4,
        .io_block_size = 32 << 10,
        .alignment = 4096,
        .fs_block_size = 4096,
        .direct = GDS_AUTO,
        .staging_size = 16 << 10,
        .staging_count = 2,
        .parallel_threshold = 64 << 10, /* host reads this large go through the pool */
        .log = false,
        .register_buffers = false,
    };
    return s;
}

typedef enum { BUF_HOST, BUF_PINNED, BUF_DEVICE } buf_kind_t;

typedef struct buffer {
    buf_kind_t kind;
    void *ptr;
} buffer_t;

static buffer_t buffer_new(buf_kind_t kind, size_t n)
{
    buffer_t b = {kind, NULL};
    CUdeviceptr d = 0;
    if (kind == BUF_HOST)
        b.ptr = malloc(n);
    else if (kind == BUF_PINNED && cu->MemAllocHost(&b.ptr, n) != CUDA_SUCCESS)
        b.ptr = NULL;
    else if (kind == BUF_DEVICE && cu->MemAlloc(&d, n) == CUDA_SUCCESS)
        b.ptr = (void *)(uintptr_t)d;
    if (!b.ptr) {
        fprintf(stderr, "cannot allocate a %zu-byte buffer\n", n);
        exit(2);
    }
    return b;
}

static void buffer_free(buffer_t *b)
{
    if (b->kind == BUF_HOST)
        free(b->ptr);
    else if (b->kind == BUF_PINNED)
        cu->MemFreeHost(b->ptr);
    else
        cu->MemFree((CUdeviceptr)(uintptr_t)b->ptr);
}

/* Host bytes in and out of a buffer of any kind, never touching device
 * memory with the CPU. */
static void put(buffer_t *b, size_t at, const void *src, size_t n)
{
    if (b->kind == BUF_DEVICE) {
        if (cu->MemcpyHtoD((CUdeviceptr)(uintptr_t)b->ptr + at, src, n) != CUDA_SUCCESS)
            FAIL("cuMemcpyHtoD");
    }
    else
        memcpy((char *)b->ptr + at, src, n);
}

static void get(buffer_t *b, size_t at, void *dst, size_t n)
{
    if (b->kind == BUF_DEVICE) {
        if (cu->MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)b->ptr + at, n) != CUDA_SUCCESS)
            FAIL("cuMemcpyDtoH");
    }
    else
        memcpy(dst, (char *)b->ptr + at, n);
}

typedef struct worker_arg {
    int index;
    gds_file_t *shared;
    gds_file_t *own;
    unsigned char *shadow_shared; /* this thread's region */
    unsigned char *shadow_own;
} worker_arg_t;

static int request(gds_file_t *f, bool write, const gds_segment_t *segs, size_t n, bool async, gds_order_t order,
                   uint64_t *rng)
{
    gds_request_t req = {.write = write, .data = GDS_DATA_RAW, .nseg = n, .segs = segs, .order = order};
    gds_status_t st;
    int rc;
    if (async) {
        gds_io_t *io = NULL;
        rc = gds_file_submit(f, &req, &io, &st);
        if (rc == 0) {
            while (!gds_io_done(io) && (rng_next(rng) & 1)) /* sometimes poll first */
                sched_yield();
            rc = gds_io_wait(io, &st);
        }
    }
    else
        rc = gds_file_transfer(f, &req, &st);
    if (rc != 0)
        FAIL("%s of %zu pieces failed: %s (%s)", write ? "write" : "read", n, st.msg, strerror(st.err));
    return rc;
}

static void *worker(void *p)
{
    worker_arg_t *a = p;
    if (cu && gpu_ctx)
        cu->CtxSetCurrent(gpu_ctx);
    uint64_t rng = 1000 + (uint64_t)a->index;
    unsigned char *data = malloc(2 * MAX_IO), *got = malloc(2 * MAX_IO);
    buf_kind_t kinds[3] = {BUF_HOST, BUF_PINNED, BUF_DEVICE};
    int nkinds = use_device ? 3 : cu ? 2 : 1;
    buffer_t bufs[3];
    for (int k = 0; k < nkinds; k++)
        bufs[k] = buffer_new(kinds[k], 2 * MAX_IO);
    uint64_t region = (uint64_t)a->index * REGION;
    for (int op = 0; op < OPS && !failures; op++) {
        buffer_t *b = &bufs[rng_next(&rng) % (uint64_t)nkinds];
        bool own = rng_next(&rng) & 1;
        gds_file_t *f = own ? a->own : a->shared;
        unsigned char *shadow = own ? a->shadow_own : a->shadow_shared;
        uint64_t limit = own ? OWN : REGION, base = own ? 0 : region;
        size_t len = 1 + (size_t)(rng_next(&rng) % MAX_IO);
        if (len > limit)
            len = (size_t)limit;
        uint64_t at = rng_next(&rng) % (limit - len + 1);
        bool async = rng_next(&rng) & 1;
        gds_order_t order = b->kind == BUF_DEVICE ? (gds_order_t)(rng_next(&rng) % 3) : GDS_ORDER_LEGACY;
        if (order == GDS_ORDER_STREAM)
            order = GDS_ORDER_NONE; /* no stream of our own here: tested in test_gpu */
        switch (rng_next(&rng) % 4) {
        case 0: { /* write one piece */
            fill(data, len, rng_next(&rng));
            put(b, 0, data, len);
            gds_segment_t s = {base + at, len, b->ptr};
            if (request(f, true, &s, 1, async, order, &rng) == 0)
                memcpy(shadow + at, data, len);
            break;
        }
        case 1: { /* read one piece */
            gds_segment_t s = {base + at, len, b->ptr};
            if (request(f, false, &s, 1, async, order, &rng) == 0) {
                get(b, 0, got, len);
                if (memcmp(got, shadow + at, len) != 0)
                    FAIL("thread %d: read of %zu bytes at %llu (%s file) differs", a->index, len,
                         (unsigned long long)(base + at), own ? "own" : "shared");
            }
            break;
        }
        case 2: { /* a vector: two or three pieces, not overlapping */
            size_t piece = len / 3 + 1;
            gds_segment_t s[3];
            size_t n = 0;
            for (size_t k = 0; k < 3 && (k + 1) * piece <= limit; k++) {
                uint64_t o = (at + k * piece * 2) % (limit - piece + 1);
                bool clash = false;
                for (size_t j = 0; j < n; j++)
                    clash |= o < s[j].offset - base + s[j].size && s[j].offset - base < o + piece;
                if (!clash)
                    s[n++] = (gds_segment_t){base + o, piece, (char *)b->ptr + k * piece};
            }
            bool write = rng_next(&rng) & 1;
            if (write) {
                fill(data, n * piece, rng_next(&rng));
                put(b, 0, data, n * piece);
            }
            if (request(f, write, s, n, async, order, &rng) == 0) {
                for (size_t k = 0; k < n; k++) {
                    uint64_t o = s[k].offset - base;
                    if (write) {
                        memcpy(shadow + o, data + k * piece, piece);
                        continue;
                    }
                    get(b, k * piece, got, piece);
                    if (memcmp(got, shadow + o, piece) != 0)
                        FAIL("thread %d: vector piece %zu differs", a->index, k);
                }
            }
            break;
        }
        default: { /* the zone, written by everyone with the same bytes */
            size_t zlen = len < ZONE ? len : ZONE;
            uint64_t zat = rng_next(&rng) % (ZONE - zlen + 1);
            for (size_t i = 0; i < zlen; i++)
                data[i] = zone_byte(zat + i);
            put(b, 0, data, zlen);
            gds_segment_t s = {ZONE_OFFSET + zat, zlen, b->ptr};
            request(a->shared, true, &s, 1, async, order, &rng);
            break;
        }
        }
    }
    for (int k = 0; k < nkinds; k++)
        buffer_free(&bufs[k]);
    free(data);
    free(got);
    return NULL;
}

/* A job whose only task submits a job and waits for it. */
static int inner_fn(gds_job_t *job, void *ctx, gds_worker_t *w, gds_status_t *st)
{
    (void)w;
    (void)st;
    size_t t;
    while (gds_job_next(job, &t))
        __atomic_add_fetch((int *)ctx, 1, __ATOMIC_RELAXED);
    return 0;
}

static int outer_fn(gds_job_t *job, void *ctx, gds_worker_t *w, gds_status_t *st)
{
    (void)w;
    size_t t;
    while (gds_job_next(job, &t))
        if (gds_pool_run(4, 10, inner_fn, ctx, st) != 0)
            return -1;
    return 0;
}

static void test_nested_wait(void)
{
    int count = 0;
    gds_status_t st;
    /* One pool thread (fresh pool): the outer job occupies it; the inner
     * job can only run if the waiting worker runs it itself. */
    gds_engine_shutdown();
    if (gds_pool_run(1, 3, outer_fn, &count, &st) != 0)
        FAIL("nested job failed: %s", st.msg);
    if (count != 30)
        FAIL("nested jobs ran %d tasks, expected 30", count);
}

/* Jobs of one task each, submitted for up to 4 workers (write-behind's
 * drains: one small job per snapshot): the pool must grow to 4 threads so
 * that 4 such jobs run at once. Each task waits (up to 10 s) until 4 tasks
 * are inside at the same time; with fewer threads the count never reaches 4. */
typedef struct gather {
    int inside, most;
} gather_t;

static void gather_note(gather_t *g, int now)
{
    int seen = __atomic_load_n(&g->most, __ATOMIC_RELAXED);
    while (now > seen && !__atomic_compare_exchange_n(&g->most, &seen, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static int gather_fn(gds_job_t *job, void *ctx, gds_worker_t *w, gds_status_t *st)
{
    (void)w;
    (void)st;
    gather_t *g = ctx;
    size_t t;
    while (gds_job_next(job, &t)) {
        gather_note(g, __atomic_add_fetch(&g->inside, 1, __ATOMIC_ACQ_REL));
        for (int spins = 0; spins < 5000 && __atomic_load_n(&g->most, __ATOMIC_ACQUIRE) < 4; spins++) {
            usleep(1000);
            gather_note(g, __atomic_load_n(&g->inside, __ATOMIC_ACQUIRE));
        }
        __atomic_sub_fetch(&g->inside, 1, __ATOMIC_ACQ_REL);
    }
    return 0;
}

static void test_small_jobs_spread(void)
{
    gds_engine_shutdown(); /* a fresh pool, no thread yet */
    gather_t g = {0, 0};
    gds_status_t st;
    gds_job_t *jobs[4];
    for (int i = 0; i < 4; i++)
        if (!(jobs[i] = gds_pool_submit(4, 1, gather_fn, &g, &st)))
            FAIL("submit: %s", st.msg);
    for (int i = 0; i < 4; i++)
        if (jobs[i] && gds_job_wait(jobs[i], &st) != 0)
            FAIL("job failed: %s", st.msg);
    if (g.most < 4)
        FAIL("one-task jobs for 4 workers: at most %d ran at once (the pool did not grow to 4 threads)", g.most);
    gds_engine_shutdown();
}

/* Blocks: halved until every worker has one, not below the staging size,
 * unless the caller gives a smaller floor (cached reads read once). */
static void test_block_sizes(void)
{
    const size_t MiB = (size_t)1 << 20;
    gds_engine_settings_t cfg = {.io_block_size = 32 * MiB, .fs_block_size = 4096, .staging_size = 16 * MiB};
    struct { size_t size, floor, want; } cases[] = {
        {1024 * MiB, 0, 32 * MiB},   /* large: the configured block */
        {256 * MiB, 0, 16 * MiB},    /* 8 blocks of 32 MiB for 16 workers: halved once, to the staging size */
        {47 * MiB, 0, 16 * MiB},     /* 3 blocks: the staging size is the floor */
        {47 * MiB, 2 * MiB, 2 * MiB}, /* with a 2 MiB floor: 23 blocks, every worker busy */
        {187 * MiB, 2 * MiB, 8 * MiB}, /* halved only until every worker has one (23 blocks) */
        {47 * MiB, 1000, 2 * MiB},   /* a floor below the file-system block: halving still stops once every worker has one */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t got = gds_block_for(&cfg, cases[i].size, 16, cases[i].floor);
        if (got != cases[i].want)
            FAIL("block for %zu MiB, floor %zu: %zu bytes, expected %zu", cases[i].size / MiB, cases[i].floor, got,
                 cases[i].want);
    }
}

static void test_restart(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/engine_restart.bin", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    gds_engine_settings_t cfg = settings();
    gds_file_t *f = NULL;
    gds_status_t st;
    if (fd < 0 || gds_file_open(&f, path, fd, true, &cfg, &st) != 0) {
        FAIL("cannot open %s", path);
        return;
    }
    size_t n = 1 << 20;
    unsigned char *src = malloc(n), *got = malloc(n);
    unsigned before = 0;
    for (int cycle = 0; cycle < 20; cycle++) {
        fill(src, n, (uint64_t)cycle);
        gds_segment_t s = {0, n, src};
        gds_request_t w = {.write = true, .data = GDS_DATA_RAW, .nseg = 1, .segs = &s};
        gds_io_t *io = NULL;
        /* asynchronous host requests run on the pool */
        if (gds_file_submit(f, &w, &io, &st) != 0 || gds_io_wait(io, &st) != 0)
            FAIL("cycle %d: write: %s", cycle, st.msg);
        s.buf = got;
        gds_request_t r = {.write = false, .data = GDS_DATA_RAW, .nseg = 1, .segs = &s};
        if (gds_file_submit(f, &r, &io, &st) != 0 || gds_io_wait(io, &st) != 0)
            FAIL("cycle %d: read: %s", cycle, st.msg);
        if (memcmp(src, got, n) != 0)
            FAIL("cycle %d: data differs", cycle);
        unsigned running = gds_engine_threads();
        if (cycle == 0)
            before = running;
        else if (running != before)
            FAIL("cycle %d: %u pool threads, %u after the first cycle", cycle, running, before);
        gds_engine_shutdown();
        if (gds_engine_threads() != 0)
            FAIL("cycle %d: %u threads after shutdown", cycle, gds_engine_threads());
    }
    gds_file_close(f);
    close(fd);
    unlink(path);
    free(src);
    free(got);
}

static int open_file(const char *path, gds_file_t **f)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    gds_engine_settings_t cfg = settings();
    gds_status_t st;
    if (fd < 0 || gds_file_open(f, path, fd, true, &cfg, &st) != 0) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        exit(2);
    }
    return fd;
}

static void check_file(int fd, const unsigned char *expect, uint64_t off, size_t n, const char *what)
{
    unsigned char *got = malloc(n);
    ssize_t r = pread(fd, got, n, (off_t)off);
    if (r != (ssize_t)n || memcmp(got, expect, n) != 0)
        FAIL("%s: final file contents differ", what);
    free(got);
}

/* gds_page_cached (the staged path's O_DIRECT choice for read-once
 * batches): a page just read is cached; one dropped with DONTNEED, where
 * the kernel reports it gone, is cached again once read. */
static void test_page_cached(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/engine_page_cached.bin", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        FAIL("open %s", path);
    static unsigned char block[1 << 16];
    memset(block, 0x5A, sizeof block);
    char back;
    if (pwrite(fd, block, sizeof block, 0) != (ssize_t)sizeof block || fsync(fd) != 0 || pread(fd, &back, 1, 8192) != 1)
        FAIL("preparing %s", path);
    if (!gds_page_cached(fd, 8192))
        FAIL("a page just read is reported not cached");
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (!gds_page_cached(fd, 8192)) { /* dropped: reading brings it back */
        if (pread(fd, &back, 1, 8192) != 1 || !gds_page_cached(fd, 8192))
            FAIL("a page read again is reported not cached");
        printf("page cache probe: a dropped page reported not cached, then cached once read\n");
    }
    else
        printf("page cache probe: the page stayed cached (or the file system cannot say)\n");
    close(fd);
    unlink(path);
}

/* The O_DIRECT descriptor is opened by path: once another file has been
 * renamed over that path, it is refused (buffered I/O instead), never a
 * descriptor of the other file. */
static void test_direct_fd_of_a_replaced_path(const char *dir)
{
    char path[4096], other[4096];
    snprintf(path, sizeof path, "%s/engine_direct_replaced.bin", dir);
    snprintf(other, sizeof other, "%s/engine_direct_other.bin", dir);
    gds_file_t *f = NULL;
    int fd = open_file(path, &f);
    int ofd = open(other, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (ofd < 0 || rename(other, path) != 0)
        FAIL("replacing %s", path);
    close(ofd);
    if (gds_file_direct_fd(f) >= 0)
        FAIL("an O_DIRECT descriptor of the file now at %s, not of the open one", path);
    gds_file_close(f);
    close(fd);
    unlink(path);
}

int main(int argc, char **argv)
{
    use_device = argc > 1 && !strcmp(argv[1], "--gpu");
    const char *why = NULL;
    if (gds_cuda_use_device(0, NULL, 0, &why)) {
        cu = gds_cuda_load(NULL);
        cu->CtxGetCurrent(&gpu_ctx);
    }
    else if (use_device) {
        printf("SKIP: %s; the --gpu run needs an NVIDIA GPU\n", why);
        return 77;
    }
    const char *dir = getenv("H5GDS_TEST_DIR");
    if (!dir)
        dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    printf("engine_threads: %d threads, buffers: host%s%s\n", NTHREADS, cu ? ", pinned" : "",
           use_device ? ", device" : "");

    test_nested_wait();
    test_small_jobs_spread();
    test_block_sizes();
    test_page_cached(dir);
    test_direct_fd_of_a_replaced_path(dir);

    char path[4096];
    snprintf(path, sizeof path, "%s/engine_shared.bin", dir);
    gds_file_t *shared = NULL, *own[NTHREADS];
    int shared_fd = open_file(path, &shared), own_fd[NTHREADS];
    unsigned char *shadow_shared = calloc(NTHREADS, REGION), *shadow_own = calloc(NTHREADS, OWN);
    /* Start from known contents: zeros everywhere. */
    unsigned char *zeros = calloc(1, OWN > REGION * NTHREADS + ZONE ? OWN : REGION * NTHREADS + ZONE);
    if (pwrite(shared_fd, zeros, REGION * NTHREADS + ZONE, 0) < 0)
        FAIL("initial write");
    pthread_t tid[NTHREADS];
    worker_arg_t args[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        char own_path[4096];
        snprintf(own_path, sizeof own_path, "%s/engine_own_%d.bin", dir, t);
        own_fd[t] = open_file(own_path, &own[t]);
        if (pwrite(own_fd[t], zeros, OWN, 0) < 0)
            FAIL("initial write");
        args[t] = (worker_arg_t){t, shared, own[t], shadow_shared + (size_t)t * REGION, shadow_own + (size_t)t * OWN};
    }
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&tid[t], NULL, worker, &args[t]);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(tid[t], NULL);

    /* Final contents, every byte: each region, each own file, the zone
     * (whatever byte of it was written holds the zone's value, others 0). */
    check_file(shared_fd, shadow_shared, 0, (size_t)NTHREADS * REGION, "shared file regions");
    unsigned char *zone = malloc(ZONE);
    if (pread(shared_fd, zone, ZONE, (off_t)ZONE_OFFSET) != ZONE)
        FAIL("zone read");
    size_t wrong = 0;
    for (size_t i = 0; i < ZONE; i++)
        wrong += zone[i] != 0 && zone[i] != zone_byte(i);
    if (wrong)
        FAIL("zone: %zu bytes neither untouched nor the zone's value", wrong);
    for (int t = 0; t < NTHREADS; t++) {
        check_file(own_fd[t], shadow_own + (size_t)t * OWN, 0, OWN, "own file");
        gds_file_close(own[t]);
        close(own_fd[t]);
        char own_path[4096];
        snprintf(own_path, sizeof own_path, "%s/engine_own_%d.bin", dir, t);
        unlink(own_path);
    }
    gds_engine_stats_t stats;
    gds_file_get_stats(shared, &stats);
    uint64_t calls = 0;
    for (int r = 0; r < GDS_NROUTES; r++)
        calls += stats.read_calls[r] + stats.write_calls[r];
    if (calls == 0)
        FAIL("no request counted on the shared file");
    if (use_device && stats.write_calls[GDS_ROUTE_STAGED] == 0)
        FAIL("device buffers did not take the staged route");
    gds_file_close(shared);
    close(shared_fd);
    unlink(path);

    test_restart(dir);
    gds_engine_shutdown();
    if (cu && gds_engine_pinned_bytes() != 0)
        FAIL("%zu bytes of pinned staging memory left after shutdown", gds_engine_pinned_bytes());
    free(zone);
    free(zeros);
    free(shadow_shared);
    free(shadow_own);
    printf("engine_threads: %s (%d failures)\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
