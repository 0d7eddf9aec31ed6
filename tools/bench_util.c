/*
 * h5gds-bench utilities: the work directory and its files, failure exit,
 * page-cache dropping, and the buffers of each memory kind.
 */
#include "bench.h"

FILE *csv;
char workdir[4096];
bool own_workdir;
/* 0: the HDF5 file (under MPI: the collection's master), 1: the ceiling
 * file, 2: under MPI, this rank's file of the collection, 3: under MPI, the
 * shared file. */
char files[4][4200];

double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* This process's files (under MPI, rank 0 owns the master and the shared file). */
void cleanup_files(void)
{
    if (opt.keep)
        return;
    for (int i = 0; i < 4; i++)
        if (files[i][0] && ((i != 0 && i != 3) || par.rank == 0))
            remove(files[i]);
}

void cleanup(void)
{
    cleanup_files();
    if (opt.keep)
        return;
    if (own_workdir && workdir[0] && par.rank == 0)
        nftw(workdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

void on_signal(int sig)
{
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((format(printf, 1, 0))) static void report(const char *fmt, va_list ap)
{
    if (par.on)
        fprintf(stderr, "\nh5gds-bench: rank %d: error: ", par.rank);
    else
        fprintf(stderr, "\nh5gds-bench: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
}

/* _exit, not exit, after these: after a failed write HDF5 1.10's exit
 * handler crashes closing the file that is still open (seen with sec2
 * too); nothing is left to flush but our own streams. */
static void close_streams(void)
{
    fflush(stdout);
    fflush(stderr);
    if (csv)
        fclose(csv);
}

void fail_all(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(fmt, ap);
    va_end(ap);
#ifdef H5GDS_BENCH_MPI
    if (par.on) { /* every rank's own files gone before rank 0 removes the directory */
        cleanup_files();
        MPI_Barrier(par_comm);
    }
#endif
    cleanup();
    close_streams();
#ifdef H5GDS_BENCH_MPI
    if (par.on) { /* no rank exits (mpirun then kills the others) before rank 0's directory is gone */
        MPI_Barrier(par_comm);
        MPI_Finalize();
    }
#endif
    _exit(1);
}

void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(fmt, ap);
    va_end(ap);
    cleanup();
    close_streams();
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        MPI_Abort(par_comm, 1); /* the other ranks would wait for this one forever */
#endif
    _exit(1);
}

void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        uint64_t v = x * 0x2545F4914F6CDD1DULL;
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++)
        p[i] = (unsigned char)(i * 131 + 7);
}

/* Drops the file's pages from the page cache: all caches when root may,
 * else the file's clean pages with fadvise. Under MPI every rank calls it
 * (with its own file); rank 0 drops the caches of the node. */
const char *cold_method = "none";
void drop_cache(const char *path)
{
    sync();
    par_barrier(); /* every rank's data is on disk */
    int dropped = 0;
    if (par.rank == 0) {
        int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
        if (fd >= 0) {
            dropped = write(fd, "3\n", 2) == 2;
            close(fd);
        }
    }
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        MPI_Bcast(&dropped, 1, MPI_INT, 0, par_comm);
#endif
    /* Every rank also drops its own file's pages: drop_caches reached only
     * rank 0's node. */
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    cold_method = dropped ? "drop_caches" : fd >= 0 ? "fadvise" : "none";
    par_barrier();
}

/* Reads the whole file through the page cache (untimed), so that a warm
 * read finds it there whatever the cold read before it did: O_DIRECT reads
 * (the DIRECT method, GPU-decoded chunks read once) leave nothing cached. */
void warm_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return; /* the timed read says why the file cannot be read */
    static char chunk[1 << 20];
    while (read(fd, chunk, sizeof chunk) > 0)
        ;
    close(fd);
}

void fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fsync(fd) < 0)
        fail("fsync %s: %s", path, strerror(errno));
    close(fd);
}



void *alloc_memory(memory_t m, size_t size)
{
    CUdeviceptr d = 0;
    void *p = NULL;
    switch (m) {
    case MEM_HOST: p = aligned_alloc(4096, (size + 4095) / 4096 * 4096); break;
    case MEM_PINNED: if (cuda.api->MemAllocHost(&p, size) != CUDA_SUCCESS) p = NULL; break;
    case MEM_DEVICE: if (cuda.api->MemAlloc(&d, size) == CUDA_SUCCESS) p = (void *)(uintptr_t)d; break;
    case MEM_MANAGED: if (cuda.api->MemAllocManaged(&d, size, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS) p = (void *)(uintptr_t)d; break;
    }
    if (!p)
        fail("cannot allocate %zu bytes of %s memory", size, memory_names[m]);
    return p;
}

void free_memory(memory_t m, void *p)
{
    if (!p)
        return;
    switch (m) {
    case MEM_HOST: free(p); break;
    case MEM_PINNED: cuda.api->MemFreeHost(p); break;
    default: cuda.api->MemFree((CUdeviceptr)(uintptr_t)p); break;
    }
}


/* Copies between the bench's source of truth and the data buffer. GPU init
 * (buffer modes 2, 3) copies on the device side; CPU init writes with the CPU. */
void to_data(buffers_t *b, const void *src, bool gpu_init)
{
    if (b->memory == MEM_DEVICE || (b->memory == MEM_MANAGED && gpu_init)) {
        if (cuda.api->MemcpyHtoD((CUdeviceptr)(uintptr_t)b->data, src, b->size) != CUDA_SUCCESS)
            fail("host-to-device copy failed");
        cuda.api->CtxSynchronize();
    }
    else
        memcpy(b->data, src, b->size);
}

static void from_data(buffers_t *b, void *dst)
{
    if (is_gpu_memory(b->memory)) {
        if (cuda.api->MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)b->data, b->size) != CUDA_SUCCESS)
            fail("device-to-host copy failed");
    }
    else
        memcpy(dst, b->data, b->size);
}

void verify(buffers_t *b, const char *method, size_t size, int phase)
{
    from_data(b, b->check);
    if (memcmp(b->check, b->expect, size) != 0) {
        size_t i = 0;
        while (b->check[i] == b->expect[i])
            i++;
        fail("verification failed: %s %s of %zu bytes: first difference at byte %zu", method, phase_names[phase],
             size, i);
    }
}
