/*
 * The storage ceiling of the loader benchmark (python -m h5gds.bench loader):
 * random preads of one sample size at given file offsets, from `threads`
 * threads, buffered or O_DIRECT, into per-thread host buffers. No HDF5, no
 * engine: what the disk (cold) or the page cache (warm) gives a reader that
 * knows where every sample is.
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
