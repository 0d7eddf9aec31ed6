/*
 * h5gds-engine-bench: the engine driven directly (no HDF5) by concurrent
 * callers, on a GPU machine. Two measurements, each repeated and
 * interleaved, CSV on stdout or --csv:
 *
 *   concurrent  two files read into device memory: by one thread (file A,
 *               then file B) and by two threads at once (one file each).
 *               The engine's pool is shared: two callers should get what
 *               one gets, not half of it. Warm (page cache) and cold.
 *   overlap     a read into device memory while a kernel runs on the legacy
 *               default stream: with ordering "none" (a loader's own
 *               buffers) the read should take the time of the read alone;
 *               with "legacy" it waits for the kernel first.
 *
 *   h5gds-engine-bench [--dir D] [--size 2GiB] [--repeat 3] [--kernel-ms 20]
 *                      [--overlap-size 1GiB] [--threads 16] [--csv FILE]
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "cli_args.h"
#include "cuda_loader.h"
#include "gpu_kernels.h"

static const gds_cuda_api_t *cu;
static CUcontext ctx;
static FILE *csv;
static unsigned threads = 16;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A wrong argument: one line, exit status 2. */
static void bad_arg(const char *option, const char *value, const char *why)
{
    fprintf(stderr, "h5gds-engine-bench: bad %s '%s': %s (--help for usage)\n", option, value, why);
    exit(2);
}

/* A positive size in the configuration's syntax (4096, 64KiB, 2GiB, 1G, 500MB). */
static size_t size_arg(const char *option, const char *value)
{
    size_t v = 0;
    const char *why = cli_parse_size(value, &v);
    if (why)
        bad_arg(option, value, why);
    if (v == 0)
        bad_arg(option, value, "is 0 bytes");
    return v;
}

static long long_arg(const char *option, const char *value, long min, long max)
{
    long v = 0;
    const char *why = cli_parse_long(value, min, max, &v);
    if (why)
        bad_arg(option, value, why);
    return v;
}

static void die(const char *what)
{
    fprintf(stderr, "h5gds-engine-bench: %s\n", what);
    exit(1);
}

static gds_engine_settings_t settings(void)
{
    gds_engine_settings_t s = {.mode = GDS_MODE_STAGED,
                               .threads = threads,
                               .io_block_size = 32 << 20,
                               .alignment = 4096,
                               .fs_block_size = 4096,
                               .direct = GDS_AUTO,
                               .staging_size = 16 << 20,
                               .staging_count = 2,
                               .parallel_threshold = 32 << 20};
    return s;
}

typedef struct bench_file {
    char path[4096];
    int fd;
    gds_file_t *engine;
} bench_file_t;

/* A file of `size` random bytes, written once with plain pwrite. */
static void make_file(bench_file_t *f, const char *dir, const char *name, size_t size, unsigned seed)
{
    snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
    f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (f->fd < 0)
        die("cannot create a scratch file");
    size_t chunk = 64 << 20;
    unsigned char *buf = malloc(chunk);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t off = 0; off < size; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        for (size_t i = 0; i + 8 <= n; i += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(buf + i, &x, 8);
        }
        if (gds_pwrite_full(f->fd, buf, n, off) != 0)
            die("cannot write a scratch file");
    }
    free(buf);
    fsync(f->fd);
    gds_engine_settings_t cfg = settings();
    gds_status_t st;
    if (gds_file_open(&f->engine, f->path, f->fd, false, &cfg, &st) != 0)
        die(st.msg);
}

static void drop_cache(bench_file_t *files, int n)
{
    for (int i = 0; i < n; i++) {
        fdatasync(files[i].fd);
        posix_fadvise(files[i].fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    FILE *f = fopen("/proc/sys/vm/drop_caches", "w"); /* root only; fadvise above otherwise */
    if (f) {
        fputs("3\n", f);
        fclose(f);
    }
}

static void warm_cache(bench_file_t *files, int n, size_t size)
{
    unsigned char *buf = malloc(64 << 20);
    for (int i = 0; i < n; i++)
        for (size_t off = 0; off < size; off += 64 << 20)
            if (gds_pread_full(files[i].fd, buf, 64 << 20, off) < 0)
                die("warm-up read failed");
    free(buf);
}

static void read_device(bench_file_t *f, void *dev, size_t size, gds_order_t order)
{
    gds_segment_t seg = {0, size, dev};
    gds_request_t req = {.write = false, .data = GDS_DATA_RAW, .nseg = 1, .segs = &seg, .order = order};
    gds_status_t st;
    if (gds_file_transfer(f->engine, &req, &st) != 0)
        die(st.msg);
}

typedef struct reader {
    bench_file_t *file;
    void *dev;
    size_t size;
    double seconds;
} reader_t;

static void *reader_main(void *p)
{
    reader_t *r = p;
    cu->CtxSetCurrent(ctx);
    double t0 = now();
    read_device(r->file, r->dev, r->size, GDS_ORDER_NONE);
    r->seconds = now() - t0;
    return NULL;
}

static void row(const char *bench, const char *cache, const char *method, size_t bytes, double seconds, int rep)
{
    fprintf(csv, "%s,%s,%s,%zu,%.6f,%.3f,%d\n", bench, cache, method, bytes, seconds, (double)bytes / seconds / 1e9,
            rep);
    fflush(csv);
    if (csv != stdout)
        printf("%-10s %-5s %-22s %6.2f GB/s (%.3f s)\n", bench, cache, method, (double)bytes / seconds / 1e9, seconds);
}

static void bench_concurrent(const char *dir, size_t size, int repeat)
{
    bench_file_t files[2];
    make_file(&files[0], dir, "engine-bench-a.bin", size, 1);
    make_file(&files[1], dir, "engine-bench-b.bin", size, 2);
    CUdeviceptr d[2];
    if (cu->MemAlloc(&d[0], size) != CUDA_SUCCESS || cu->MemAlloc(&d[1], size) != CUDA_SUCCESS)
        die("cannot allocate device memory");
    void *dev[2] = {(void *)(uintptr_t)d[0], (void *)(uintptr_t)d[1]};
    read_device(&files[0], dev[0], 64 << 20, GDS_ORDER_NONE); /* rings and threads up */
    for (int cold = 0; cold <= 1; cold++) {
        const char *cache = cold ? "cold" : "warm";
        for (int rep = 0; rep < repeat; rep++) {
            /* one reader of both files */
            cold ? drop_cache(files, 2) : warm_cache(files, 2, size);
            double t0 = now();
            read_device(&files[0], dev[0], size, GDS_ORDER_NONE);
            read_device(&files[1], dev[1], size, GDS_ORDER_NONE);
            row("concurrent", cache, "one-thread-both-files", 2 * size, now() - t0, rep);
            /* two readers at once */
            cold ? drop_cache(files, 2) : warm_cache(files, 2, size);
            reader_t r[2] = {{&files[0], dev[0], size, 0}, {&files[1], dev[1], size, 0}};
            pthread_t tid[2];
            t0 = now();
            for (int i = 0; i < 2; i++)
                pthread_create(&tid[i], NULL, reader_main, &r[i]);
            for (int i = 0; i < 2; i++)
                pthread_join(tid[i], NULL);
            row("concurrent", cache, "two-threads-one-file-each", 2 * size, now() - t0, rep);
        }
    }
    for (int i = 0; i < 2; i++) {
        gds_file_close(files[i].engine);
        close(files[i].fd);
        unlink(files[i].path);
        cu->MemFree(d[i]);
    }
}

static void bench_overlap(const char *dir, size_t size, int repeat, double kernel_ms)
{
    CUmodule module;
    CUfunction spin;
    if (cu->ModuleLoadData(&module, gpu_kernels_ptx) != CUDA_SUCCESS ||
        cu->ModuleGetFunction(&spin, module, "spin_fill") != CUDA_SUCCESS)
        die("cannot load the spin kernel");
    bench_file_t f;
    make_file(&f, dir, "engine-bench-overlap.bin", size, 3);
    CUdeviceptr d, k;
    if (cu->MemAlloc(&d, size) != CUDA_SUCCESS || cu->MemAlloc(&k, 4096) != CUDA_SUCCESS)
        die("cannot allocate device memory");
    void *dev = (void *)(uintptr_t)d;
    read_device(&f, dev, size, GDS_ORDER_NONE); /* warm: page cache, rings */
    unsigned long long ns = (unsigned long long)(kernel_ms * 1e6), one = 1;
    unsigned value = 1;
    void *args[] = {&k, &one, &ns, &value};
    for (int rep = 0; rep < repeat; rep++) {
        double t0 = now();
        cu->LaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
        cu->CtxSynchronize();
        row("overlap", "warm", "kernel-alone", 0, now() - t0, rep);
        t0 = now();
        read_device(&f, dev, size, GDS_ORDER_NONE);
        row("overlap", "warm", "read-alone", size, now() - t0, rep);
        /* the read is issued right after the kernel is queued */
        cu->LaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
        t0 = now();
        read_device(&f, dev, size, GDS_ORDER_NONE);
        row("overlap", "warm", "read-during-kernel-none", size, now() - t0, rep);
        cu->CtxSynchronize();
        cu->LaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
        t0 = now();
        read_device(&f, dev, size, GDS_ORDER_LEGACY);
        row("overlap", "warm", "read-during-kernel-legacy", size, now() - t0, rep);
        cu->CtxSynchronize();
    }
    gds_file_close(f.engine);
    close(f.fd);
    unlink(f.path);
    cu->MemFree(d);
    cu->MemFree(k);
}

int main(int argc, char **argv)
{
    const char *dir = ".", *csv_path = NULL;
    size_t size = (size_t)2 << 30, overlap_size = (size_t)1 << 30;
    int repeat = 3;
    double kernel_ms = 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: h5gds-engine-bench [--dir D] [--size 2GiB] [--overlap-size 1GiB] [--repeat 3]\n"
                   "                          [--kernel-ms 20] [--threads 16] [--csv FILE]\n"
                   "  sizes as in the gds configuration: 4096, 64KiB, 8MiB, 1G, 500MB\n");
            return 0;
        }
        static const char *const options[] = {"--dir", "--size", "--overlap-size", "--repeat", "--kernel-ms",
                                              "--threads", "--csv"};
        bool known = false;
        for (size_t k = 0; k < sizeof options / sizeof options[0]; k++)
            known |= !strcmp(a, options[k]);
        if (!known) {
            fprintf(stderr, "h5gds-engine-bench: unknown argument '%s' (--help for usage)\n", a);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "h5gds-engine-bench: option '%s' needs a value (--help for usage)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--dir"))
            dir = v;
        else if (!strcmp(a, "--size"))
            size = size_arg(a, v);
        else if (!strcmp(a, "--overlap-size"))
            overlap_size = size_arg(a, v);
        else if (!strcmp(a, "--repeat"))
            repeat = (int)long_arg(a, v, 1, 1000);
        else if (!strcmp(a, "--kernel-ms")) {
            const char *why = cli_parse_double(v, 0, 60000, &kernel_ms);
            if (why)
                bad_arg(a, v, why);
        }
        else if (!strcmp(a, "--threads"))
            threads = (unsigned)long_arg(a, v, 1, 256);
        else
            csv_path = v;
    }
    const char *why = NULL;
    char gpu[128] = "";
    if (!gds_cuda_use_device(0, gpu, sizeof gpu, &why)) {
        fprintf(stderr, "h5gds-engine-bench: needs a GPU: %s\n", why);
        return 77;
    }
    cu = gds_cuda_load(NULL);
    cu->CtxGetCurrent(&ctx);
    csv = csv_path ? fopen(csv_path, "w") : stdout;
    if (!csv)
        die("cannot open the CSV file");
    fprintf(csv, "bench,cache,method,bytes,seconds,GBps,repeat\n");
    printf("h5gds-engine-bench: %s, %u engine threads, files in %s\n", gpu, threads, dir);
    bench_concurrent(dir, size, repeat);
    bench_overlap(dir, overlap_size, repeat, kernel_ms);
    if (csv != stdout)
        fclose(csv);
    gds_engine_shutdown();
    return 0;
}
