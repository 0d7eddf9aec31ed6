/*
 * The storage ceilings of the benchmarks (python -m h5gds.bench loader,
 * compressed): random preads of one sample size at given file offsets, from
 * `threads` threads, buffered or O_DIRECT, into per-thread host buffers; and
 * the durable write of blocks at given offsets (O_DIRECT, then fsync). No
 * HDF5, no engine: what the disk (cold) or the page cache (warm) gives a
 * reader that knows where every sample is, and what the disk takes from a
 * writer that knows where every block goes.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define DIRECT_ALIGN 4096u

typedef struct ceiling {
    int fd;
    int direct;
    size_t sample;
    size_t n;
    const uint64_t *offsets;
    size_t next; /* atomic: the next offset to read */
    int err;     /* atomic: first errno */
} ceiling_t;

static void *reader(void *arg)
{
    ceiling_t *c = arg;
    /* O_DIRECT: the aligned range around the sample (offsets in an HDF5
     * file are not block-aligned). */
    size_t len = c->direct ? (c->sample + 2 * DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN : c->sample;
    void *buf = NULL;
    if (posix_memalign(&buf, DIRECT_ALIGN, len) != 0) {
        __atomic_store_n(&c->err, ENOMEM, __ATOMIC_RELAXED);
        return NULL;
    }
    for (;;) {
        size_t i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
        if (i >= c->n || __atomic_load_n(&c->err, __ATOMIC_RELAXED))
            break;
        uint64_t off = c->offsets[i];
        size_t want = c->sample;
        if (c->direct) {
            uint64_t lo = off / DIRECT_ALIGN * DIRECT_ALIGN;
            want = (size_t)((off + c->sample + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN - lo);
            off = lo;
        }
        ssize_t r;
        do
            r = pread(c->fd, buf, want, (off_t)off);
        while (r < 0 && errno == EINTR);
        if (r < 0) {
            __atomic_store_n(&c->err, errno, __ATOMIC_RELAXED);
            break;
        }
    }
    free(buf);
    return NULL;
}

/* Returns 0 and the seconds taken, or a negative errno with `err`. */
API int h5gds_py_ceiling_pread(const char *path, int direct, int threads, size_t sample, size_t n,
                               const uint64_t *offsets, double *seconds, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open %s%s: %s", path, direct ? " with O_DIRECT" : "", strerror(e));
        return -e;
    }
    if (threads < 1)
        threads = 1;
    ceiling_t c = {fd, direct, sample, n, offsets, 0, 0};
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    if (!tid) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, reader, &c) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(tid);
    close(fd);
    if (started == 0) {
        snprintf(err, errlen, "cannot start reader threads");
        return -EAGAIN;
    }
    if (c.err) {
        snprintf(err, errlen, "pread failed: %s", strerror(c.err));
        return -c.err;
    }
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return 0;
}

typedef struct ceiling_write {
    int fd;
    size_t block;
    size_t n;
    const uint64_t *offsets;
    void **buffers; /* one per thread, filled before the clock starts */
    int next_buffer; /* atomic: which buffer a starting thread takes */
    size_t next;     /* atomic: the next offset to write */
    int err;         /* atomic: first errno */
} ceiling_write_t;

static void *writer(void *arg)
{
    ceiling_write_t *c = arg;
    const char *buf = c->buffers[__atomic_fetch_add(&c->next_buffer, 1, __ATOMIC_RELAXED)];
    for (;;) {
        size_t i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
        if (i >= c->n || __atomic_load_n(&c->err, __ATOMIC_RELAXED))
            break;
        size_t done = 0;
        while (done < c->block) {
            ssize_t w = pwrite(c->fd, buf + done, c->block - done, (off_t)(c->offsets[i] + done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                __atomic_store_n(&c->err, w < 0 ? errno : EIO, __ATOMIC_RELAXED);
                return NULL;
            }
            done += (size_t)w;
        }
    }
    return NULL;
}

/* Non-zero pseudo-random bytes (xorshift64*, every byte's low bit set): a
 * block of zeros could be written sparsely or compressed by the file system,
 * which real data is not. */
static void fill_random(void *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1, *w = buf;
    for (size_t i = 0; i < len / sizeof *w; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        w[i] = (x * 0x2545F4914F6CDD1Dull) | 0x0101010101010101ull;
    }
    memset((char *)buf + len / sizeof *w * sizeof *w, 0x5a, len % sizeof *w);
}

/* Creates (or truncates) `path`, reserves the bytes the blocks cover
 * (fallocate, where the file system has it), writes `block` bytes at each of
 * `offsets` from `threads` threads (O_DIRECT when `direct`: offsets and block
 * multiples of 4096), then fsyncs. Returns 0 and the seconds of the
 * fallocate, the writes and the fsync, or a negative errno with `err`. */
API int h5gds_py_ceiling_pwrite(const char *path, int direct, int threads, size_t block, size_t n,
                                const uint64_t *offsets, double *seconds, char *err, size_t errlen)
{
    if (block == 0) {
        snprintf(err, errlen, "block of 0 bytes");
        return -EINVAL;
    }
    uint64_t end = 0;
    for (size_t i = 0; i < n; i++) {
        if (direct && (offsets[i] % DIRECT_ALIGN || block % DIRECT_ALIGN)) {
            snprintf(err, errlen, "O_DIRECT writes need offsets and a block in multiples of %u bytes "
                     "(offset %llu, block %zu)", DIRECT_ALIGN, (unsigned long long)offsets[i], block);
            return -EINVAL;
        }
        if (offsets[i] + block > end)
            end = offsets[i] + block;
    }
    if (threads < 1)
        threads = 1;
    if ((size_t)threads > n)
        threads = n > 0 ? (int)n : 1; /* no buffer for a thread with nothing to write */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0), 0644);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot create %s%s: %s", path, direct ? " with O_DIRECT" : "", strerror(e));
        return -e;
    }
    ceiling_write_t c = {fd, block, n, offsets, NULL, 0, 0, 0};
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    c.buffers = calloc((size_t)threads, sizeof *c.buffers);
    int rc = 0;
    if (!tid || !c.buffers) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto done;
    }
    for (int t = 0; t < threads; t++) {
        if (posix_memalign(&c.buffers[t], DIRECT_ALIGN, block) != 0) {
            c.buffers[t] = NULL;
            snprintf(err, errlen, "out of memory (%d buffers of %zu bytes)", threads, block);
            rc = -ENOMEM;
            goto done;
        }
        fill_random(c.buffers[t], block, (uint64_t)t + 1);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (end > 0 && fallocate(fd, 0, 0, (off_t)end) != 0 && errno != EOPNOTSUPP && errno != ENOSYS) {
        int e = errno;
        snprintf(err, errlen, "fallocate of %llu bytes in %s: %s", (unsigned long long)end, path, strerror(e));
        rc = -e;
        goto done;
    }
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, writer, &c) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    if (started == 0) {
        snprintf(err, errlen, "cannot start writer threads");
        rc = -EAGAIN;
        goto done;
    }
    if (c.err) {
        snprintf(err, errlen, "pwrite to %s failed: %s", path, strerror(c.err));
        rc = -c.err;
        goto done;
    }
    if (fsync(fd) != 0) {
        int e = errno;
        snprintf(err, errlen, "fsync of %s failed: %s", path, strerror(e));
        rc = -e;
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
done:
    if (c.buffers)
        for (int t = 0; t < threads; t++)
            free(c.buffers[t]);
    free(c.buffers);
    free(tid);
    if (close(fd) != 0 && rc == 0) {
        int e = errno;
        snprintf(err, errlen, "close of %s failed: %s", path, strerror(e));
        rc = -e;
    }
    return rc;
}
