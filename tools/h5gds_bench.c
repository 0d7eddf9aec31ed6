/*
 * h5gds-bench: writes and reads HDF5 datasets from/to host or GPU memory and
 * reports the observed rate (bytes / wall-clock), the definition of the GDS
 * VFD paper, for the paper's methods and h5gds's own data paths, side by side
 * with the ceilings of the machine measured in the same run.
 *
 *   h5gds-bench [--quick|--full] [options]     (h5gds-bench --help)
 *
 * Phases: write (durable: H5Dwrite, H5Fclose, fsync), cold_read (page cache
 * dropped), warm_read (the same read again). Every read is verified.
 *
 * Under mpirun (when built with MPI): one rank per GPU, each writing its
 * slab of one global dataset into its own file through libh5gds_mpi (file
 * per rank + VDS master, the paper's Fig. 7-8), all ranks starting together;
 * per-rank rates and the aggregate (all bytes / slowest rank) are reported,
 * the ceilings being every rank's parallel O_DIRECT I/O at the same time.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "H5FDgds.h"
#include "bench_cuda.h"
#ifdef H5GDS_BENCH_MPI
#include <mpi.h>

#include "H5FDgds_mpi.h"
#endif

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define MAX_LIST 32

/* ---------------------------------------------------------------- options */

typedef enum { MEM_HOST, MEM_PINNED, MEM_DEVICE, MEM_MANAGED } memory_t;
static const char *const memory_names[] = {"host", "pinned", "device", "managed"};

typedef enum {
    M_SEC2, M_SEC2_PINNED, M_DIRECT, M_DIRECT_PINNED, M_GDS, M_GDS_STAGED, M_GDS_CUFILE, M_GDS_POSIX, N_METHODS
} method_t;
static const char *const method_names[] = {"SEC2", "SEC2+PINNED", "DIRECT", "DIRECT+PINNED",
                                           "GDS",  "GDS-staged",  "GDS-cufile", "GDS-posix"};
static const char *const gds_modes[] = {"", "", "", "", "auto", "staged", "cufile", "posix"};

enum { PH_WRITE, PH_COLD, PH_WARM, N_PHASES };
static const char *const phase_names[] = {"write", "cold_read", "warm_read"};

static struct {
    size_t sizes[MAX_LIST];
    int nsizes;
    bool methods[N_METHODS];
    bool methods_given;
    bool phases[N_PHASES];
    unsigned threads[MAX_LIST];
    int nthreads;
    size_t blocks[MAX_LIST];
    int nblocks;
    int repeat;
    memory_t memory;
    bool memory_given;
    int buffer_mode; /* -1: not given */
    bool ceilings;
    unsigned ceiling_threads;
    const char *dir;
    const char *csv;
    const char *config;
    bool plot;
    bool keep;
    bool inject_corruption; /* for the bench's own tests */
    int inject_failure_rank; /* for the bench's own tests: this rank's file cannot be created (-1: none) */
    size_t chunk; /* 0: contiguous dataset */
} opt;

static bench_cuda_t cuda;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: h5gds-bench [--quick | --full] [options]\n"
            "  --quick               64 MiB and 256 MiB, 2 repeats (default; under 2 minutes)\n"
            "  --full                the paper's sizes 64 MiB .. 2 GiB, 3 repeats\n"
            "  --sizes LIST          dataset sizes, e.g. 64MiB,1GiB,16GiB\n"
            "  --methods LIST        SEC2,SEC2+PINNED,DIRECT,DIRECT+PINNED,GDS,GDS-staged,GDS-cufile,GDS-posix\n"
            "                        (default: all that apply to the memory and the HDF5 build)\n"
            "  --phases LIST         write,cold_read,warm_read (default: all)\n"
            "  --memory KIND         device|managed|pinned|host (default: device with a GPU, else host)\n"
            "  --buffer-mode N       IOR buffer modes: 0 malloc/CPU init, 1 managed/CPU init,\n"
            "                        2 managed/GPU init, 3 cudaMalloc/GPU init\n"
            "  --threads LIST        gds I/O threads to sweep (paper Fig. 5), e.g. 1,2,4,8,16\n"
            "  --blocks LIST         gds I/O block sizes to sweep (paper Fig. 6), e.g. 1MiB,4MiB,16MiB\n"
            "  --config STR          extra gds configuration (key=value,...)\n"
            "  --chunk SIZE          chunked dataset with chunks of SIZE (chunk cache off), e.g. 8MiB\n"
            "  --repeat N            repeats per measurement (median, min, max are reported)\n"
            "  --no-ceilings         skip the O_DIRECT / page-cache / PCIe ceilings\n"
            "  --ceiling-threads N   threads of the ceiling measurements (default 16)\n"
            "  --dir DIR             where to put the test files (default: a new temporary directory)\n"
            "  --csv FILE            CSV output (default: h5gds-bench.csv)\n"
            "  --plot                PNG figures next to the CSV (needs python3 + matplotlib)\n"
            "  --keep                keep the test files\n"
            "  -h, --help            this text\n");
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "h5gds-bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    usage(stderr);
    exit(2);
}

static bool parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        return false;
    double v = strtod(s, &end);
    if (errno || v <= 0)
        return false;
    size_t mult = 1;
    if (!strcasecmp(end, "") || !strcasecmp(end, "b"))
        mult = 1;
    else if (!strcasecmp(end, "k") || !strcasecmp(end, "kib"))
        mult = 1 << 10;
    else if (!strcasecmp(end, "m") || !strcasecmp(end, "mib"))
        mult = MiB;
    else if (!strcasecmp(end, "g") || !strcasecmp(end, "gib"))
        mult = GiB;
    else
        return false;
    *out = (size_t)(v * (double)mult);
    return *out > 0;
}

/* Splits a comma list, calling `each` per item; false if any item is bad. */
static void parse_list(const char *arg, const char *what, void (*each)(const char *, const char *))
{
    char *copy = strdup(arg), *save = NULL;
    for (char *it = strtok_r(copy, ",", &save); it; it = strtok_r(NULL, ",", &save))
        each(it, what);
    free(copy);
}

static void add_size(const char *s, const char *what)
{
    size_t v;
    if (!parse_size(s, &v) || opt.nsizes == MAX_LIST)
        die_usage("bad size in --%s: '%s'", what, s);
    opt.sizes[opt.nsizes++] = v;
}
static void add_block(const char *s, const char *what)
{
    size_t v;
    (void)what;
    if (!parse_size(s, &v) || opt.nblocks == MAX_LIST)
        die_usage("bad size in --blocks: '%s'", s);
    opt.blocks[opt.nblocks++] = v;
}
static void add_threads(const char *s, const char *what)
{
    (void)what;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 256 || opt.nthreads == MAX_LIST)
        die_usage("bad thread count in --threads: '%s' (1..256)", s);
    opt.threads[opt.nthreads++] = (unsigned)v;
}
static void add_method(const char *s, const char *what)
{
    (void)what;
    for (int m = 0; m < N_METHODS; m++)
        if (!strcasecmp(s, method_names[m])) {
            opt.methods[m] = true;
            return;
        }
    die_usage("unknown method '%s'", s);
}
static void add_phase(const char *s, const char *what)
{
    (void)what;
    for (int p = 0; p < N_PHASES; p++)
        if (!strcmp(s, phase_names[p])) {
            opt.phases[p] = true;
            return;
        }
    die_usage("unknown phase '%s' (write, cold_read, warm_read)", s);
}

static void parse_args(int argc, char **argv)
{
    enum { O_QUICK = 256, O_FULL, O_SIZES, O_METHODS, O_PHASES, O_MEMORY, O_BUFMODE, O_THREADS, O_BLOCKS,
           O_CONFIG, O_REPEAT, O_NOCEIL, O_CEILT, O_DIR, O_CSV, O_PLOT, O_KEEP, O_INJECT, O_INJECT_RANK, O_CHUNK };
    static const struct option longopts[] = {
        {"quick", no_argument, 0, O_QUICK},         {"full", no_argument, 0, O_FULL},
        {"sizes", required_argument, 0, O_SIZES},   {"methods", required_argument, 0, O_METHODS},
        {"phases", required_argument, 0, O_PHASES}, {"memory", required_argument, 0, O_MEMORY},
        {"buffer-mode", required_argument, 0, O_BUFMODE}, {"threads", required_argument, 0, O_THREADS},
        {"blocks", required_argument, 0, O_BLOCKS}, {"config", required_argument, 0, O_CONFIG},
        {"repeat", required_argument, 0, O_REPEAT}, {"no-ceilings", no_argument, 0, O_NOCEIL},
        {"ceiling-threads", required_argument, 0, O_CEILT}, {"dir", required_argument, 0, O_DIR},
        {"csv", required_argument, 0, O_CSV},       {"plot", no_argument, 0, O_PLOT},
        {"keep", no_argument, 0, O_KEEP},           {"inject-corruption", no_argument, 0, O_INJECT},
        {"inject-failure-rank", required_argument, 0, O_INJECT_RANK},
        {"chunk", required_argument, 0, O_CHUNK},
        {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
    bool full = false;
    opt.repeat = 0;
    opt.buffer_mode = -1;
    opt.inject_failure_rank = -1;
    opt.ceilings = true;
    opt.ceiling_threads = 16;
    opt.csv = "h5gds-bench.csv";
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case O_QUICK: full = false; break;
        case O_FULL: full = true; break;
        case O_SIZES: parse_list(optarg, "sizes", add_size); break;
        case O_METHODS: parse_list(optarg, "methods", add_method); opt.methods_given = true; break;
        case O_PHASES: parse_list(optarg, "phases", add_phase); break;
        case O_MEMORY: {
            int m = -1;
            for (int i = 0; i < 4; i++)
                if (!strcmp(optarg, memory_names[i]))
                    m = i;
            if (m < 0)
                die_usage("unknown memory kind '%s' (device, managed, pinned, host)", optarg);
            opt.memory = (memory_t)m;
            opt.memory_given = true;
            break;
        }
        case O_BUFMODE:
            opt.buffer_mode = (int)strtol(optarg, &end, 10);
            if (*end || opt.buffer_mode < 0 || opt.buffer_mode > 3)
                die_usage("bad --buffer-mode '%s' (0..3)", optarg);
            break;
        case O_THREADS: parse_list(optarg, "threads", add_threads); break;
        case O_BLOCKS: parse_list(optarg, "blocks", add_block); break;
        case O_CONFIG: opt.config = optarg; break;
        case O_REPEAT:
            opt.repeat = (int)strtol(optarg, &end, 10);
            if (*end || opt.repeat < 1 || opt.repeat > 1000)
                die_usage("bad --repeat '%s' (1..1000)", optarg);
            break;
        case O_NOCEIL: opt.ceilings = false; break;
        case O_CEILT:
            opt.ceiling_threads = (unsigned)strtol(optarg, &end, 10);
            if (*end || opt.ceiling_threads < 1 || opt.ceiling_threads > 256)
                die_usage("bad --ceiling-threads '%s' (1..256)", optarg);
            break;
        case O_DIR: opt.dir = optarg; break;
        case O_CSV: opt.csv = optarg; break;
        case O_PLOT: opt.plot = true; break;
        case O_KEEP: opt.keep = true; break;
        case O_INJECT: opt.inject_corruption = true; break;
        case O_INJECT_RANK: opt.inject_failure_rank = atoi(optarg); break;
        case O_CHUNK:
            if (!parse_size(optarg, &opt.chunk))
                die_usage("bad --chunk '%s'", optarg);
            break;
        case 'h': usage(stdout); exit(0);
        default: die_usage("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        die_usage("unexpected argument '%s'", argv[optind]);
    if (opt.nsizes == 0) {
        static const size_t quick[] = {64 * MiB, 256 * MiB};
        static const size_t paper[] = {64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB, GiB, 2 * GiB};
        const size_t *s = full ? paper : quick;
        int n = full ? 6 : 2;
        for (int i = 0; i < n; i++)
            opt.sizes[opt.nsizes++] = s[i];
    }
    if (opt.repeat == 0)
        opt.repeat = full ? 3 : 2;
    if (!opt.phases[0] && !opt.phases[1] && !opt.phases[2])
        opt.phases[0] = opt.phases[1] = opt.phases[2] = true;
    if (opt.config) {
        H5FD_gds_config_t c;
        if (H5FD_gds_config_init(&c) < 0 || H5FD_gds_config_parse(&c, opt.config) < 0) {
            H5Eprint2(H5E_DEFAULT, stderr);
            die_usage("bad --config '%s'", opt.config);
        }
    }
}

/* ---------------------------------------------------------------- ranks */

/* One process, or one rank of an MPI job (all ranks run the same steps in
 * the same order; rank 0 alone prints and writes the CSV). */
static struct {
    bool on;
    int rank, size;
} par = {false, 0, 1};
#ifdef H5GDS_BENCH_MPI
static MPI_Comm par_comm = MPI_COMM_NULL;
#endif

/* Started by mpirun/mpiexec/srun? (Their launchers set one of these.) */
static bool par_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return true;
    return false;
}

static void par_barrier(void)
{
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        MPI_Barrier(par_comm);
#endif
}

/* ---------------------------------------------------------------- utilities */

static FILE *csv;
static char workdir[4096];
static bool own_workdir;
/* 0: the HDF5 file (under MPI: the collection's master), 1: the ceiling
 * file, 2: under MPI, this rank's file of the collection. */
static char files[3][4200];

static double now(void)
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

/* This process's files (under MPI, rank 0 owns the master). */
static void cleanup_files(void)
{
    if (opt.keep)
        return;
    for (int i = 0; i < 3; i++)
        if (files[i][0] && (i != 0 || par.rank == 0))
            remove(files[i]);
}

static void cleanup(void)
{
    cleanup_files();
    if (opt.keep)
        return;
    if (own_workdir && workdir[0] && par.rank == 0)
        nftw(workdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void on_signal(int sig)
{
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    if (par.on)
        fprintf(stderr, "\nh5gds-bench: rank %d: error: ", par.rank);
    else
        fprintf(stderr, "\nh5gds-bench: error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    cleanup();
    /* _exit, not exit: after a failed write HDF5 1.10's exit handler crashes
     * closing the file that is still open (seen with sec2 too); nothing is
     * left to flush but our own streams. */
    fflush(stdout);
    fflush(stderr);
    if (csv)
        fclose(csv);
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        MPI_Abort(par_comm, 1); /* the other ranks would wait for this one forever */
#endif
    _exit(1);
}

static void fill_random(unsigned char *p, size_t n, uint64_t seed)
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
static const char *cold_method = "none";
static void drop_cache(const char *path)
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

static void fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fsync(fd) < 0)
        fail("fsync %s: %s", path, strerror(errno));
    close(fd);
}

/* ---------------------------------------------------------------- results */

typedef struct result {
    const char *method;
    int phase;
    memory_t memory;
    size_t size;     /* per rank */
    unsigned threads;
    size_t block;
    int repeat;
    double seconds;  /* of the slowest rank for the aggregate */
    double bytes;    /* moved: size, or size x ranks for the aggregate */
    int rank;        /* -1: the aggregate (the only row without MPI) */
    char config[200];
} result_t;

static result_t *results;
static size_t nresults, cap_results;
static struct {
    char gpu[128], fs[32], kernel[128];
    long cpus;
} machine;

static void store(const char *method, int phase, memory_t memory, size_t size, unsigned threads, size_t block,
                  int repeat, double seconds, double bytes, int rank, const char *config)
{
    if (nresults == cap_results) {
        cap_results = cap_results ? 2 * cap_results : 256;
        results = realloc(results, cap_results * sizeof *results);
    }
    result_t *r = &results[nresults++];
    *r = (result_t){method, phase, memory, size, threads, block, repeat, seconds, bytes, rank, ""};
    snprintf(r->config, sizeof r->config, "%s", config ? config : "");
    if (opt.chunk && strncmp(method, "CEIL", 4)) /* the layout, in the same column */
        snprintf(r->config + strlen(r->config), sizeof r->config - strlen(r->config), "%schunk=%zu",
                 r->config[0] ? ";" : "", opt.chunk);
    /* Under MPI two more columns: ranks, and the rank ("all": the aggregate). */
    fprintf(csv, "%s,%s,%s,%.0f,%u,%zu,%d,%.6f,%.4f,\"%s\",%ld,%s,\"%s\",%u.%u.%u,\"%s\",%s", method,
            phase_names[phase], memory_names[memory], bytes, threads, block, repeat, seconds, bytes / seconds / 1e9,
            machine.gpu, machine.cpus, machine.fs, machine.kernel, H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE,
            r->config, cold_method);
    if (par.on && rank >= 0)
        fprintf(csv, ",%d,%d", par.size, rank);
    else if (par.on)
        fprintf(csv, ",%d,all", par.size);
    fputc('\n', csv);
    fflush(csv);
}

/* Called by every rank with its own time: rank 0 records each rank's row
 * and the aggregate, all bytes over the slowest rank (they start together). */
static void record(const char *method, int phase, memory_t memory, size_t size, unsigned threads, size_t block,
                   int repeat, double seconds, const char *config)
{
    double *all = &seconds;
#ifdef H5GDS_BENCH_MPI
    static double *gathered;
    if (par.on) {
        if (!gathered && !(gathered = malloc(sizeof(double) * (size_t)par.size)))
            fail("out of memory");
        MPI_Gather(&seconds, 1, MPI_DOUBLE, gathered, 1, MPI_DOUBLE, 0, par_comm);
        all = gathered;
    }
#endif
    if (par.rank != 0)
        return;
    double slowest = 0;
    for (int r = 0; r < par.size; r++) {
        if (par.on)
            store(method, phase, memory, size, threads, block, repeat, all[r], (double)size, r, config);
        slowest = all[r] > slowest ? all[r] : slowest;
    }
    store(method, phase, memory, size, threads, block, repeat, slowest, (double)size * par.size, -1, config);
}

static void progress(const char *what, size_t size, int phase, int rep)
{
    if (par.rank != 0 || !isatty(STDERR_FILENO))
        return;
    fprintf(stderr, "\r\033[K  %-14s %6zu MiB  %-9s  repeat %d/%d", what, size / MiB, phase_names[phase], rep + 1,
            opt.repeat);
}

/* ---------------------------------------------------------------- buffers */

typedef struct buffers {
    memory_t memory;
    void *data;          /* what H5Dwrite/H5Dread get for GDS methods (or the user's buffer) */
    unsigned char *host; /* pageable bounce buffer for SEC2/DIRECT */
    void *pinned;        /* pinned bounce buffer for +PINNED */
    unsigned char *expect;
    unsigned char *check;
    size_t size;
} buffers_t;

static void *alloc_memory(memory_t m, size_t size)
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

static void free_memory(memory_t m, void *p)
{
    if (!p)
        return;
    switch (m) {
    case MEM_HOST: free(p); break;
    case MEM_PINNED: cuda.api->MemFreeHost(p); break;
    default: cuda.api->MemFree((CUdeviceptr)(uintptr_t)p); break;
    }
}

static bool is_gpu_memory(memory_t m) { return m == MEM_DEVICE || m == MEM_MANAGED; }

/* Copies between the bench's source of truth and the data buffer. GPU init
 * (buffer modes 2, 3) copies on the device side; CPU init writes with the CPU. */
static void to_data(buffers_t *b, const void *src, bool gpu_init)
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

static void verify(buffers_t *b, const char *method, size_t size, int phase)
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

/* ---------------------------------------------------------------- HDF5 runs */

static bool have_direct(void)
{
#ifdef H5_HAVE_DIRECT
    return true;
#else
    return false;
#endif
}

static hid_t make_fapl(method_t m, const char *gds_config)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    switch (m) {
    case M_SEC2:
    case M_SEC2_PINNED: H5Pset_fapl_sec2(fapl); break;
    case M_DIRECT:
    case M_DIRECT_PINNED:
#ifdef H5_HAVE_DIRECT
        H5Pset_fapl_direct(fapl, 4096, 4096, 16 * MiB);
#endif
        break;
    default: {
        H5FD_gds_config_t c;
        if (H5FD_gds_config_init(&c) < 0 || H5FD_gds_config_parse(&c, gds_config) < 0 ||
            H5Pset_fapl_gds_config(fapl, &c) < 0)
            fail("cannot configure the gds driver with '%s'", gds_config);
    }
    }
    return fapl;
}

/* Where H5Dwrite/H5Dread point, and the bounce copy each method needs. */
static void *io_buffer(method_t m, buffers_t *b)
{
    if (!is_gpu_memory(b->memory) || m >= M_GDS)
        return b->data;
    return (m == M_SEC2_PINNED || m == M_DIRECT_PINNED) ? b->pinned : b->host;
}

/* Early allocation, no fill; with --chunk, chunks of that size (at most the
 * dataset), and no chunk cache so that HDF5 hands the chunks to the driver. */
static hid_t bench_dcpl(size_t size)
{
    hid_t dcpl = H5FD_gds_create_dcpl();
    if (opt.chunk) {
        hsize_t chunk[1] = {opt.chunk < size ? opt.chunk : size};
        if (H5Pset_chunk(dcpl, 1, chunk) < 0)
            fail("cannot set the chunk size");
    }
    return dcpl;
}

static double timed_write(method_t m, buffers_t *b, const char *path, const char *cfg)
{
    hid_t fapl = make_fapl(m, cfg);
    hid_t dcpl = bench_dcpl(b->size), dapl = H5FD_gds_create_dapl();
    hsize_t dims[1] = {b->size};
    /* A durable write creates a new file: deleting the previous one (freeing
     * its blocks takes ext4 a good part of a second per GiB) is not timed. */
    unlink(path);
    sync();
    double t0 = now();
    void *buf = io_buffer(m, b);
    if (buf != b->data && cuda.api->MemcpyDtoH(buf, (CUdeviceptr)(uintptr_t)b->data, b->size) != CUDA_SUCCESS)
        fail("device-to-host copy failed");
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f < 0)
        fail("cannot create %s (see the HDF5 error above)", path);
    hid_t s = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, dcpl, dapl);
    if (d < 0 || H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        fail("writing %zu bytes to %s failed (disk full?)", b->size, path);
    H5Dclose(d);
    H5Sclose(s);
    if (H5Fclose(f) < 0)
        fail("closing %s failed (disk full?)", path);
    fsync_path(path);
    double t = now() - t0;
    H5Pclose(fapl);
    H5Pclose(dcpl);
    H5Pclose(dapl);
    return t;
}

static double timed_read(method_t m, buffers_t *b, const char *path, const char *cfg)
{
    hid_t fapl = make_fapl(m, cfg);
    void *buf = io_buffer(m, b);
    double t0 = now();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f < 0)
        fail("cannot open %s", path);
    hid_t dapl = H5FD_gds_create_dapl();
    hid_t d = H5Dopen2(f, "data", dapl);
    H5Pclose(dapl);
    if (d < 0 || H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        fail("reading %s failed", path);
    H5Dclose(d);
    H5Fclose(f);
    if (buf != b->data) {
        if (cuda.api->MemcpyHtoD((CUdeviceptr)(uintptr_t)b->data, buf, b->size) != CUDA_SUCCESS)
            fail("host-to-device copy failed");
    }
    if (is_gpu_memory(b->memory))
        cuda.api->CtxSynchronize();
    double t = now() - t0;
    H5Pclose(fapl);
    return t;
}

#ifdef H5GDS_BENCH_MPI
/* Under MPI: every rank writes its slab of dataset "data" (global size:
 * ranks x size) into its own file with libh5gds_mpi (with --chunk, as a
 * chunked dataset), which then writes the VDS master; durable like
 * timed_write (the rank file is fsync'd). */
static double timed_write_mpi(method_t m, buffers_t *b, const char *cfg)
{
    hid_t fapl = make_fapl(m, cfg), dcpl = bench_dcpl(b->size);
    unlink(files[2]);
    if (par.rank == opt.inject_failure_rank) /* a directory in its place: this rank's create fails */
        mkdir(files[2], 0755);
    sync();
    par_barrier();
    double t0 = now();
    void *buf = io_buffer(m, b);
    if (buf != b->data && cuda.api->MemcpyDtoH(buf, (CUdeviceptr)(uintptr_t)b->data, b->size) != CUDA_SUCCESS)
        fail("device-to-host copy failed");
    hsize_t global = (hsize_t)b->size * (hsize_t)par.size, offset = (hsize_t)b->size * (hsize_t)par.rank,
            count = b->size;
    H5FD_gds_collection_t *c = H5FD_gds_mpi_begin(par_comm, files[0], fapl);
    if (!c) {
        H5Eprint2(H5E_DEFAULT, stderr);
        fail("cannot start the collection %s", files[0]);
    }
    herr_t rc = H5FD_gds_mpi_write_dcpl(c, "data", H5T_NATIVE_UCHAR, 1, &global, &offset, &count, buf, dcpl);
    if (H5FD_gds_mpi_finish(c) < 0 || rc < 0) {
        H5Eprint2(H5E_DEFAULT, stderr);
        fail("writing the collection %s failed (disk full?)", files[0]);
    }
    fsync_path(files[2]);
    double t = now() - t0;
    H5Pclose(fapl);
    H5Pclose(dcpl);
    return t;
}

/* Under MPI: every rank reads its own slab back (from its own file). */
static double timed_read_mpi(method_t m, buffers_t *b, const char *cfg)
{
    hid_t fapl = make_fapl(m, cfg);
    void *buf = io_buffer(m, b);
    hsize_t offset = (hsize_t)b->size * (hsize_t)par.rank, count = b->size;
    par_barrier();
    double t0 = now();
    if (H5FD_gds_mpi_read(par_comm, files[0], "data", H5T_NATIVE_UCHAR, 1, &offset, &count, buf, fapl) < 0) {
        H5Eprint2(H5E_DEFAULT, stderr);
        fail("reading the collection %s failed", files[0]);
    }
    if (buf != b->data && cuda.api->MemcpyHtoD((CUdeviceptr)(uintptr_t)b->data, buf, b->size) != CUDA_SUCCESS)
        fail("host-to-device copy failed");
    if (is_gpu_memory(b->memory))
        cuda.api->CtxSynchronize();
    double t = now() - t0;
    H5Pclose(fapl);
    return t;
}
#endif

static double bench_write(method_t m, buffers_t *b, const char *cfg)
{
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        return timed_write_mpi(m, b, cfg);
#endif
    return timed_write(m, b, files[0], cfg);
}

static double bench_read(method_t m, buffers_t *b, const char *cfg)
{
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        return timed_read_mpi(m, b, cfg);
#endif
    return timed_read(m, b, files[0], cfg);
}

static void corrupt_one_byte(const char *path, size_t size)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "data", H5P_DEFAULT);
    haddr_t off = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    int fd = open(path, O_RDWR);
    unsigned char byte;
    off_t at = (off_t)(off + size / 2 + 1);
    if (fd < 0 || pread(fd, &byte, 1, at) != 1)
        fail("cannot corrupt %s", path);
    byte ^= 0x40;
    if (pwrite(fd, &byte, 1, at) != 1)
        fail("cannot corrupt %s", path);
    close(fd);
}

/* One repeat of one method (and thread/block setting): write, then the
 * reads. Repeats are interleaved with the other methods and the ceilings,
 * so that all see the same drift of a shared disk. */
static void bench_method(method_t m, buffers_t *b, size_t size, unsigned threads, size_t block, int rep)
{
    char cfg[256] = "";
    if (m >= M_GDS) {
        int n = snprintf(cfg, sizeof cfg, "mode=%s", gds_modes[m]);
        if (threads)
            n += snprintf(cfg + n, sizeof cfg - (size_t)n, ",threads=%u", threads);
        if (block)
            n += snprintf(cfg + n, sizeof cfg - (size_t)n, ",io_block_size=%zu", block);
        if (opt.config)
            snprintf(cfg + n, sizeof cfg - (size_t)n, ",%s", opt.config);
    }
    unsigned t_col = threads;
    size_t b_col = block;
    if (m >= M_GDS && (!threads || !block)) {
        H5FD_gds_config_t c;
        H5FD_gds_config_init(&c);
        H5FD_gds_config_parse(&c, cfg);
        t_col = c.threads;
        b_col = c.io_block_size;
    }
    else if (m < M_GDS) {
        t_col = 1;
        b_col = 0;
    }
    /* the file whose bytes this process wrote */
    const char *path = par.on ? files[2] : files[0];
    /* Without the write phase, the file is still written once by each
     * setting before its reads (it may have been written by another). */
    static char last_writer[400];
    char writer[400];
    snprintf(writer, sizeof writer, "%s|%s|%zu|%u|%zu", method_names[m], cfg, size, threads, block);
    if (opt.phases[PH_WRITE] || strcmp(writer, last_writer) != 0) {
        snprintf(last_writer, sizeof last_writer, "%s", writer);
        progress(method_names[m], size, PH_WRITE, rep);
        double t = bench_write(m, b, cfg);
        if (opt.phases[PH_WRITE])
            record(method_names[m], PH_WRITE, b->memory, size, t_col, b_col, rep, t, cfg);
        if (opt.inject_corruption)
            corrupt_one_byte(path, size);
    }
    for (int ph = PH_COLD; ph <= PH_WARM; ph++) {
        if (!opt.phases[ph])
            continue;
        /* poison the buffer so the read must really fill it */
        memset(b->check, 0x5A, size);
        to_data(b, b->check, true);
        if (ph == PH_COLD)
            drop_cache(path);
        progress(method_names[m], size, ph, rep);
        double t = bench_read(m, b, cfg);
        verify(b, method_names[m], size, ph);
        record(method_names[m], ph, b->memory, size, t_col, b_col, rep, t, cfg);
    }
}

/* ---------------------------------------------------------------- ceilings */

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
static void bench_ceilings(size_t size, buffers_t *b, unsigned char *buf, size_t padded, int rep)
{
    const char *path = files[1];
    unsigned T = opt.ceiling_threads;
    char cfg[32];
    snprintf(cfg, sizeof cfg, "threads=%u", T);
    progress("CEIL-ODIRECT", size, PH_WRITE, rep);
    record("CEIL-ODIRECT", PH_WRITE, MEM_HOST, size, T, 16 * MiB, rep, parallel_io(path, true, true, buf, padded, T), cfg);
    drop_cache(path);
    progress("CEIL-ODIRECT", size, PH_COLD, rep);
    record("CEIL-ODIRECT", PH_COLD, MEM_HOST, size, T, 16 * MiB, rep, parallel_io(path, false, true, buf, padded, T), cfg);
    parallel_io(path, false, false, buf, padded, T); /* load the page cache */
    progress("CEIL-PAGECACHE", size, PH_WARM, rep);
    record("CEIL-PAGECACHE", PH_WARM, MEM_HOST, size, T, 16 * MiB, rep, parallel_io(path, false, false, buf, padded, T), cfg);
    if (cuda.ok && is_gpu_memory(b->memory)) {
        void *pinned = b->pinned;
        CUdeviceptr dev = (CUdeviceptr)(uintptr_t)b->data;
        par_barrier();
        double t0 = now();
        cuda.api->MemcpyHtoD(dev, pinned, size);
        cuda.api->CtxSynchronize();
        record("CEIL-H2D", PH_WARM, MEM_PINNED, size, 1, size, rep, now() - t0, "");
        par_barrier();
        t0 = now();
        cuda.api->MemcpyDtoH(pinned, dev, size);
        record("CEIL-D2H", PH_WRITE, MEM_PINNED, size, 1, size, rep, now() - t0, "");
    }
}

/* ---------------------------------------------------------------- summary */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median/min/max rate (GB/s) of the rows matching; false if none. */
static bool stats_for_rank(const char *method, int phase, size_t size, unsigned threads, size_t block, int rank,
                           double *med, double *lo, double *hi)
{
    double v[1024];
    int n = 0;
    for (size_t i = 0; i < nresults && n < 1024; i++) {
        result_t *r = &results[i];
        if (!strcmp(r->method, method) && r->phase == phase && r->size == size && r->rank == rank &&
            (threads == 0 || r->threads == threads) && (block == 0 || r->block == block))
            v[n++] = r->bytes / r->seconds / 1e9;
    }
    if (!n)
        return false;
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    *lo = v[0];
    *hi = v[n - 1];
    return true;
}

/* ... of the aggregate rows */
static bool stats_for(const char *method, int phase, size_t size, unsigned threads, size_t block, double *med,
                      double *lo, double *hi)
{
    return stats_for_rank(method, phase, size, threads, block, -1, med, lo, hi);
}

static double ceiling_for(int phase, size_t size, memory_t memory)
{
    double m, lo, hi;
    if (phase == PH_WRITE)
        return stats_for("CEIL-ODIRECT", PH_WRITE, size, 0, 0, &m, &lo, &hi) ? m : 0;
    if (phase == PH_COLD)
        return stats_for("CEIL-ODIRECT", PH_COLD, size, 0, 0, &m, &lo, &hi) ? m : 0;
    double pc = stats_for("CEIL-PAGECACHE", PH_WARM, size, 0, 0, &m, &lo, &hi) ? m : 0;
    if (is_gpu_memory(memory) && stats_for("CEIL-H2D", PH_WARM, size, 0, 0, &m, &lo, &hi) && m < pc)
        pc = m;
    return pc;
}

static void print_table(void)
{
    printf("\n%-14s %-10s %9s %7s %8s  %-22s %s\n", "method", "phase", "size", "threads", "block", "GB/s median (min-max)",
           "of ceiling");
    const char *seen[64];
    int nseen = 0;
    for (size_t i = 0; i < nresults; i++) {
        bool dup = false;
        for (int k = 0; k < nseen; k++)
            dup |= !strcmp(seen[k], results[i].method);
        if (!dup && nseen < 64)
            seen[nseen++] = results[i].method;
    }
    for (int si = 0; si < opt.nsizes; si++)
        for (int ph = 0; ph < N_PHASES; ph++)
            for (int k = 0; k < nseen; k++) {
                /* one line per (threads, block) combination that ran */
                unsigned tl[64];
                size_t bl[64];
                int nc = 0;
                for (size_t i = 0; i < nresults; i++) {
                    result_t *r = &results[i];
                    if (strcmp(r->method, seen[k]) || r->phase != ph || r->size != opt.sizes[si])
                        continue;
                    bool dup = false;
                    for (int c = 0; c < nc; c++)
                        dup |= tl[c] == r->threads && bl[c] == r->block;
                    if (!dup && nc < 64)
                        tl[nc] = r->threads, bl[nc] = r->block, nc++;
                }
                for (int c = 0; c < nc; c++) {
                    double med, lo, hi;
                    stats_for(seen[k], ph, opt.sizes[si], tl[c], bl[c] ? bl[c] : 0, &med, &lo, &hi);
                    char range[64], pct[16] = "";
                    snprintf(range, sizeof range, "%7.2f (%.2f-%.2f)", med, lo, hi);
                    double ceil = ceiling_for(ph, opt.sizes[si], opt.memory);
                    if (ceil > 0 && strncmp(seen[k], "CEIL", 4))
                        snprintf(pct, sizeof pct, "%5.0f%%", 100 * med / ceil);
                    char blk[16] = "-";
                    if (bl[c])
                        snprintf(blk, sizeof blk, "%zuM", bl[c] / MiB);
                    printf("%-14s %-10s %6zuMiB %7u %8s  %-22s %s\n", seen[k], phase_names[ph], opt.sizes[si] / MiB,
                           tl[c], blk, range, pct);
                }
            }
    if (par.on) {
        printf("\n%d ranks, size per rank; the table above is the aggregate (all ranks' bytes / the slowest rank,\n"
               "ceilings: every rank's parallel O_DIRECT I/O at the same time). Per rank, GB/s median:\n",
               par.size);
        for (int si = 0; si < opt.nsizes; si++)
            for (int ph = 0; ph < N_PHASES; ph++)
                for (int k = 0; k < nseen; k++) {
                    double med, lo, hi;
                    if (!stats_for_rank(seen[k], ph, opt.sizes[si], 0, 0, 0, &med, &lo, &hi))
                        continue;
                    printf("%-14s %-10s %6zuMiB ", seen[k], phase_names[ph], opt.sizes[si] / MiB);
                    for (int r = 0; r < par.size; r++)
                        if (stats_for_rank(seen[k], ph, opt.sizes[si], 0, 0, r, &med, &lo, &hi))
                            printf(" r%d %.2f", r, med);
                    printf("\n");
                }
    }
    printf("\nrates are bytes / wall-clock (GB = 1e9 bytes); cold reads: page cache dropped with %s%s\n", cold_method,
           strcmp(cold_method, "drop_caches") ? " (only this file's clean pages; run as root for drop_caches)" : "");
}

/* ---------------------------------------------------------------- main */

static void describe_machine(void)
{
    snprintf(machine.gpu, sizeof machine.gpu, "%s", cuda.ok ? cuda.gpu_name : "none");
    machine.cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(machine.kernel, sizeof machine.kernel, "%s", u.release);
    struct statfs sf;
    const char *fs = "unknown";
    if (statfs(workdir, &sf) == 0) {
        switch ((unsigned long)sf.f_type) {
        case 0xEF53: fs = "ext4"; break;
        case 0x58465342: fs = "xfs"; break;
        case 0x01021994: fs = "tmpfs"; break;
        case 0x9123683E: fs = "btrfs"; break;
        case 0x794c7630: fs = "overlayfs"; break;
        case 0x0BD00BD0: fs = "lustre"; break;
        case 0x6969: fs = "nfs"; break;
        }
    }
    snprintf(machine.fs, sizeof machine.fs, "%s", fs);
}

static int par_end(int rc)
{
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        MPI_Finalize();
#endif
    return rc;
}

int main(int argc, char **argv)
{
    int gpu_ordinal = 0;
#ifdef H5GDS_BENCH_MPI
    if (par_launched()) {
        MPI_Init(&argc, &argv);
        MPI_Comm_dup(MPI_COMM_WORLD, &par_comm);
        MPI_Comm_rank(par_comm, &par.rank);
        MPI_Comm_size(par_comm, &par.size);
        par.on = true;
        /* one rank per GPU: the node-local rank modulo the GPUs present */
        gpu_ordinal = H5FD_gds_mpi_local_rank(par_comm);
        if (gpu_ordinal < 0)
            gpu_ordinal = 0;
    }
#endif
    parse_args(argc, argv);
    signal(SIGXFSZ, SIG_IGN); /* a file size limit shows up as EFBIG, like a full disk */
    bench_cuda_init(&cuda, gpu_ordinal);

    /* memory */
    if (opt.buffer_mode >= 0) {
        static const memory_t by_mode[] = {MEM_HOST, MEM_MANAGED, MEM_MANAGED, MEM_DEVICE};
        opt.memory = by_mode[opt.buffer_mode];
    }
    else if (!opt.memory_given)
        opt.memory = cuda.ok ? MEM_DEVICE : MEM_HOST;
    if (opt.memory != MEM_HOST && !cuda.ok) {
        fprintf(stderr, "h5gds-bench: %s memory needs an NVIDIA GPU and none is usable here\n", memory_names[opt.memory]);
        return par_end(2);
    }
    bool gpu_init = opt.buffer_mode == 2 || opt.buffer_mode == 3 || (opt.buffer_mode < 0 && opt.memory == MEM_DEVICE);
    if (!opt.methods_given) {
        for (int m = 0; m < N_METHODS; m++)
            opt.methods[m] = true;
        if (!is_gpu_memory(opt.memory))
            opt.methods[M_SEC2_PINNED] = opt.methods[M_DIRECT_PINNED] = opt.methods[M_GDS_STAGED] =
                opt.methods[M_GDS_CUFILE] = opt.methods[M_GDS_POSIX] = false;
    }
    if (!have_direct()) {
        if (opt.methods_given && (opt.methods[M_DIRECT] || opt.methods[M_DIRECT_PINNED]))
            fprintf(stderr, "h5gds-bench: note: this HDF5 has no direct driver; DIRECT methods skipped\n");
        opt.methods[M_DIRECT] = opt.methods[M_DIRECT_PINNED] = false;
    }
    if (!is_gpu_memory(opt.memory) && (opt.methods[M_SEC2_PINNED] || opt.methods[M_DIRECT_PINNED])) {
        fprintf(stderr, "h5gds-bench: +PINNED methods need GPU memory (--memory device|managed)\n");
        return par_end(2);
    }

    /* working directory */
    if (opt.dir) {
        struct stat sb;
        if (stat(opt.dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
            fail("--dir %s: not a directory", opt.dir);
        snprintf(workdir, sizeof workdir, "%s/h5gds-bench.XXXXXX", opt.dir);
    }
    else {
        const char *tmp = getenv("TMPDIR");
        snprintf(workdir, sizeof workdir, "%s/h5gds-bench.XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
    }
    /* under MPI rank 0 creates it (a directory all ranks see) */
    int made = par.rank != 0 || mkdtemp(workdir) != NULL, why = errno;
#ifdef H5GDS_BENCH_MPI
    if (par.on) {
        MPI_Bcast(&made, 1, MPI_INT, 0, par_comm);
        MPI_Bcast(&why, 1, MPI_INT, 0, par_comm);
        MPI_Bcast(workdir, sizeof workdir, MPI_CHAR, 0, par_comm);
    }
#endif
    if (!made)
        fail("cannot create a directory in %s: %s", opt.dir ? opt.dir : "the temporary directory", strerror(why));
    own_workdir = true;
    snprintf(files[0], sizeof files[0], "%s/bench.h5", workdir);
    if (par.on) {
        snprintf(files[1], sizeof files[1], "%s/ceiling.rank%d.bin", workdir, par.rank);
        snprintf(files[2], sizeof files[2], "%s/bench.rank%d.h5", workdir, par.rank);
        /* the node's ceiling: its threads shared among the ranks */
        opt.ceiling_threads = opt.ceiling_threads / (unsigned)par.size ? opt.ceiling_threads / (unsigned)par.size : 1;
    }
    else
        snprintf(files[1], sizeof files[1], "%s/ceiling.bin", workdir);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    describe_machine();

    if (par.rank == 0) {
        csv = fopen(opt.csv, "w");
        if (!csv)
            fail("cannot write %s: %s", opt.csv, strerror(errno));
        fprintf(csv, "method,phase,memory,size_bytes,threads,block_bytes,repeat,seconds,rate_GBps,gpu,cpus,filesystem,"
                     "kernel,hdf5_version,driver_config,cold_cache%s\n", par.on ? ",ranks,rank" : "");
        printf("h5gds-bench: %s memory, GPU %s, %ld CPUs, %s in %s, HDF5 %u.%u.%u, %d repeats", memory_names[opt.memory],
               machine.gpu, machine.cpus, machine.fs, workdir, H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE,
               opt.repeat);
        if (par.on)
            printf(", %d MPI ranks (file per rank + VDS master)", par.size);
        if (opt.chunk)
            printf(", chunks of %zu bytes", opt.chunk);
        printf("\n");
    }

    for (int si = 0; si < opt.nsizes; si++) {
        size_t size = opt.sizes[si];
        buffers_t b = {.memory = opt.memory, .size = size};
        b.expect = malloc(size);
        b.check = malloc(size);
        if (!b.expect || !b.check)
            fail("cannot allocate %zu bytes of host memory", size);
        fill_random(b.expect, size, 1000 + (uint64_t)si + 7919 * (uint64_t)par.rank);
        b.data = alloc_memory(opt.memory, size);
        if (is_gpu_memory(opt.memory)) {
            b.host = malloc(size);
            b.pinned = alloc_memory(MEM_PINNED, size);
            if (!b.host)
                fail("cannot allocate %zu bytes of host memory", size);
        }
        to_data(&b, b.expect, gpu_init);
        size_t padded = (size + 4095) / 4096 * 4096;
        unsigned char *ceiling_buf = NULL;
        if (opt.ceilings) {
            if (!(ceiling_buf = aligned_alloc(4096, padded)))
                fail("cannot allocate %zu bytes of host memory", padded);
            memcpy(ceiling_buf, b.expect, size);
        }
        /* Repeats outermost: ceiling, then every method, then the next repeat. */
        for (int rep = 0; rep < opt.repeat; rep++) {
            if (opt.ceilings)
                bench_ceilings(size, &b, ceiling_buf, padded, rep);
            for (int m = 0; m < N_METHODS; m++) {
                if (!opt.methods[m])
                    continue;
                to_data(&b, b.expect, gpu_init); /* the ceilings' copies reuse the buffer */
                if (m >= M_GDS && (opt.nthreads || opt.nblocks)) {
                    int nt = opt.nthreads ? opt.nthreads : 1, nb = opt.nblocks ? opt.nblocks : 1;
                    for (int ti = 0; ti < nt; ti++)
                        for (int bi = 0; bi < nb; bi++)
                            bench_method((method_t)m, &b, size, opt.nthreads ? opt.threads[ti] : 0,
                                         opt.nblocks ? opt.blocks[bi] : 0, rep);
                }
                else
                    bench_method((method_t)m, &b, size, 0, 0, rep);
            }
        }
        unlink(files[1]);
        free(ceiling_buf);
        free_memory(opt.memory, b.data);
        if (b.pinned)
            free_memory(MEM_PINNED, b.pinned);
        free(b.host);
        free(b.expect);
        free(b.check);
    }
    cleanup_files();
    par_barrier(); /* every rank's files are gone: rank 0 removes the directory */
    cleanup();
    if (par.rank != 0)
        return par_end(0);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r\033[K");
    fclose(csv);
    print_table();
    printf("CSV: %s\n", opt.csv);
    if (opt.plot) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "python3 \"%s/plot_bench.py\" \"%s\"", H5GDS_TOOLS_DIR, opt.csv);
        if (system(cmd) != 0) {
            fprintf(stderr, "h5gds-bench: plotting failed (is matplotlib installed?)\n");
            return par_end(1);
        }
    }
    return par_end(0);
}
