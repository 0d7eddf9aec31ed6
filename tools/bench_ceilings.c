/*
 * h5gds-bench's ceilings: what the machine itself reaches (parallel
 * O_DIRECT, page cache, pinned host-to-device), in the same run.
 */
#include "bench.h"

typedef struct ceiling_job {
    int fd;
    bool write;
    size_t size, block;
    unsigned nthreads;
    size_t next; /* atomic */
    unsigned char *buf;
    int error;
} ceiling_job_t;

static void *ceiling_worker(void *arg)
{
    ceiling_job_t *j = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        size_t off = i * j->block;
        if (off >= j->size)
            break;
        size_t len = j->size - off < j->block ? j->size - off : j->block;
        len = (len + 4095) / 4096 * 4096;
        ssize_t n = j->write ? pwrite(j->fd, j->buf + off, len, (off_t)off) : pread(j->fd, j->buf + off, len, (off_t)off);
        if (n < 0)
            __atomic_store_n(&j->error, errno, __ATOMIC_RELAXED);
    }
    return NULL;
}

static double parallel_io(const char *path, bool write, bool direct, unsigned char *buf, size_t size, unsigned nthreads)
{
    int flags = (write ? O_RDWR | O_CREAT | O_TRUNC : O_RDONLY) | (direct ? O_DIRECT : 0);
    if (write) { /* as timed_write: a new file, the old one deleted untimed */
        unlink(path);
        sync();
    }
    par_barrier(); /* under MPI all ranks together: the node's ceiling */
    double t0 = now();
    int fd = open(path, flags, 0644);
    if (fd < 0)
        fail("cannot open %s%s: %s", path, direct ? " with O_DIRECT" : "", strerror(errno));
    ceiling_job_t j = {fd, write, size, 16 * MiB, nthreads, 0, buf, 0};
    pthread_t tids[256];
    for (unsigned i = 0; i < nthreads; i++)
        pthread_create(&tids[i], NULL, ceiling_worker, &j);
    for (unsigned i = 0; i < nthreads; i++)
        pthread_join(tids[i], NULL);
    if (write && fsync(fd) < 0)
        j.error = errno;
    double t = now() - t0;
    close(fd);
    if (j.error)
        fail("%s of %s failed: %s", write ? "writing" : "reading", path, strerror(j.error));
    return t;
}

/* One repeat of the ceilings; `buf` (aligned, `padded` bytes) holds the data. */
void bench_ceilings(size_t size, buffers_t *b, unsigned char *buf, size_t padded, int rep)
{
    const char *path = files[1];
    unsigned T = opt.ceiling_threads;
    char cfg[32];
    snprintf(cfg, sizeof cfg, "threads=%u", T);
    progress("CEIL-ODIRECT", size, PH_WRITE, rep);
    record("CEIL-ODIRECT", PH_WRITE, MEM_HOST, size, T, 16 * MiB, rep, parallel_io(path, true, true, buf, padded, T),
           cfg, NULL);
    drop_cache(path);
    progress("CEIL-ODIRECT", size, PH_COLD, rep);
    record("CEIL-ODIRECT", PH_COLD, MEM_HOST, size, T, 16 * MiB, rep, parallel_io(path, false, true, buf, padded, T),
           cfg, NULL);
    parallel_io(path, false, false, buf, padded, T); /* load the page cache */
    progress("CEIL-PAGECACHE", size, PH_WARM, rep);
    record("CEIL-PAGECACHE", PH_WARM, MEM_HOST, size, T, 16 * MiB, rep, parallel_io(path, false, false, buf, padded, T),
           cfg, NULL);
    if (cuda.ok && is_gpu_memory(b->memory)) {
        void *pinned = b->pinned;
        CUdeviceptr dev = (CUdeviceptr)(uintptr_t)b->data;
        par_barrier();
        double t0 = now();
        cuda.api->MemcpyHtoD(dev, pinned, size);
        cuda.api->CtxSynchronize();
        record("CEIL-H2D", PH_WARM, MEM_PINNED, size, 1, size, rep, now() - t0, "", NULL);
        par_barrier();
        t0 = now();
        cuda.api->MemcpyDtoH(pinned, dev, size);
        record("CEIL-D2H", PH_WRITE, MEM_PINNED, size, 1, size, rep, now() - t0, "", NULL);
    }
}
