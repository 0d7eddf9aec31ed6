/* h5gds-bench (h5gds_bench.c says what it measures). */
/*
 * Shared by the parts of h5gds-bench:
 *   h5gds_bench.c     main: the runs in order
 *   bench_options.c   command line
 *   bench_methods.c   the timed HDF5 write / reads of each method
 *   bench_ceilings.c  the machine's ceilings
 *   bench_report.c    results: CSV, per-rank and aggregate table
 *   bench_util.c      work directory, failure exit, page cache, buffers
 *   bench_filter.c    --filter: the compressed datasets' pipelines and data
 *   bench_mpi.c       ranks under mpirun, collections through libh5gds_mpi
 *   bench_shared.c    under mpirun, one shared file through parallel HDF5
 *                     (gds_mpio from device memory, mpio from a host copy)
 */
#ifndef H5GDS_BENCH_H
#define H5GDS_BENCH_H

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
#ifdef H5GDS_BENCH_MPIO
#include "H5FDgds_mpio.h"
#endif

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define MAX_LIST 32

/* ---- options (bench_options.c) ---- */

typedef enum { MEM_HOST, MEM_PINNED, MEM_DEVICE, MEM_MANAGED } memory_t;
extern const char *const memory_names[];

typedef enum {
    M_SEC2, M_SEC2_PINNED, M_DIRECT, M_DIRECT_PINNED, M_GDS, M_GDS_STAGED, M_GDS_CUFILE, M_GDS_POSIX,
    M_GDS_SHARED, /* under mpirun: one shared file, gds_mpio, the data buffer (device memory) as is */
    M_MPIO_HOST,  /* under mpirun: one shared file, HDF5's mpio, through a pageable host copy */
    N_METHODS
} method_t;
extern const char *const method_names[];
extern const char *const gds_modes[];

enum { PH_WRITE, PH_COLD, PH_WARM, N_PHASES };
extern const char *const phase_names[];

/* Methods whose H5Dwrite/H5Dread get the data buffer itself and whose
 * driver takes the gds engine's settings (the "mode=..." of gds_modes). */
static inline bool uses_gds(method_t m) { return m >= M_GDS && m != M_MPIO_HOST; }
/* Methods of the shared file (one file, one dataset, every rank its part). */
static inline bool is_shared(method_t m) { return m == M_GDS_SHARED || m == M_MPIO_HOST; }
/* Did this build get parallel HDF5 >= 1.14 with the gds_mpio driver? */
static inline bool have_shared(void)
{
#ifdef H5GDS_BENCH_MPIO
    return true;
#else
    return false;
#endif
}

/* --filter: one compression pipeline of the compressed benchmark (as
 * h5py + hdf5plugin write it); bench_filter.c has the table. */
typedef struct bench_filter {
    const char *name;     /* as on the command line and in the CSV */
    H5Z_filter_t id;      /* the compressor's filter id */
    const char *what;     /* for the banner */
    bool byte_shuffle;    /* HDF5's shuffle filter before the compressor */
    size_t ncd;           /* the compressor's cd_values */
    unsigned cd[8];
} bench_filter_t;
extern const bench_filter_t bench_filters[];
extern const size_t n_bench_filters;

typedef struct bench_options {
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
    bool tune;              /* --tune: print the autotuning grid and exit */
    int inject_failure_rank; /* for the bench's own tests: this rank's file cannot be created (-1: none) */
    size_t chunk; /* 0: contiguous dataset */
    const bench_filter_t *filter; /* --filter (with --chunk): float32 data compressed; NULL: raw bytes */
    /* Shared-file methods: 0, each rank one 1-D slab of the dataset; N, a
     * 2-D dataset of rows of ranks x N elements, each rank an N-column block
     * of every row (rank boundaries every N elements in the file). */
    size_t boundary;
} bench_options_t;
extern bench_options_t opt;

/* The dataset's elements: float32 with --filter (the shuffles and the GPU
 * codecs work per element, and the data is a float field), else bytes. */
static inline hid_t bench_type(void) { return opt.filter ? H5T_NATIVE_FLOAT : H5T_NATIVE_UCHAR; }
static inline size_t bench_element_size(void) { return opt.filter ? sizeof(float) : 1; }

/* ---- ranks (bench_mpi.c) ---- */

/* One process, or one rank of an MPI job (all ranks run the same steps in
 * the same order; rank 0 alone prints and writes the CSV). */
typedef struct bench_ranks {
    bool on;
    int rank, size;
} bench_ranks_t;
extern bench_ranks_t par;
#ifdef H5GDS_BENCH_MPI
extern MPI_Comm par_comm;
#endif

/* ---- utilities (bench_util.c) ---- */

extern FILE *csv;
extern char workdir[4096];
extern bool own_workdir;
/* 0: the HDF5 file (under MPI: the collection's master), 1: the ceiling
 * file, 2: under MPI, this rank's file of the collection, 3: under MPI, the
 * shared file of GDS-SHARED and MPIO-HOST. */
extern char files[4][4200];
extern const char *cold_method;

typedef struct buffers {
    memory_t memory;
    void *data;          /* what H5Dwrite/H5Dread get for GDS methods (or the user's buffer) */
    unsigned char *host; /* pageable bounce buffer for SEC2/DIRECT */
    void *pinned;        /* pinned bounce buffer for +PINNED */
    unsigned char *expect;
    unsigned char *check;
    size_t size;
} buffers_t;

static inline bool is_gpu_memory(memory_t m) { return m == MEM_DEVICE || m == MEM_MANAGED; }

/* ---- results (bench_report.c) ---- */

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
    const char *filter; /* "none", or the --filter of the dataset this row wrote or read */
    double ratio;       /* decoded bytes / file bytes of that dataset; 0: no filter */
    const char *route;  /* H5FD_gds_last_route of the row's H5Dwrite_gds/H5Dread_gds; NULL: none */
} result_t;

/* What a row of a filtered dataset adds to its CSV line (NULL: raw data). */
typedef struct filter_note {
    double ratio;
    const char *route;
} filter_note_t;

extern result_t *results;
extern size_t nresults, cap_results;
typedef struct bench_machine {
    char gpu[128], fs[32], kernel[128];
    long cpus;
} bench_machine_t;
extern bench_machine_t machine;

/* the CUDA driver API (h5gds_bench.c) */
extern bench_cuda_t cuda;

/* ---- functions shared between the parts ---- */

void parse_args(int argc, char **argv);
void par_barrier(void);
int par_end(int rc);
bool par_launched(void);
double timed_read_mpi(method_t m, buffers_t *b, const char *cfg);
double timed_write_mpi(method_t m, buffers_t *b, const char *cfg);
double timed_read_shared(method_t m, buffers_t *b, const char *cfg);
double timed_write_shared(method_t m, buffers_t *b, const char *cfg);
const char *shared_decomposition(void);
void *alloc_memory(memory_t m, size_t size);
void cleanup(void);
void cleanup_files(void);
void drop_cache(const char *path);
void warm_cache(const char *path);
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* fail for a failure every rank reports at once (libh5gds_mpi's collective
 * calls agree on their outcome): the ranks clean up, rank 0 removes the
 * working directory after the others' files are gone, and all end without
 * MPI_Abort, whose kill would race rank 0's clean-up. One process: fail. */
void fail_all(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fill_random(unsigned char *p, size_t n, uint64_t seed);
void free_memory(memory_t m, void *p);
void fsync_path(const char *path);
double now(void);
void on_signal(int sig);
void to_data(buffers_t *b, const void *src, bool gpu_init);
void verify(buffers_t *b, const char *method, size_t size, int phase);
hid_t bench_dcpl(size_t size);
void bench_method(method_t m, buffers_t *b, size_t size, unsigned threads, size_t block, int rep);
bool have_direct(void);
/* --tune (bench_tune.c) */
int bench_tune(void);
void *io_buffer(method_t m, buffers_t *b);
void *write_source(method_t m, buffers_t *b);
void read_finish(buffers_t *b, void *buf);
hid_t make_fapl(method_t m, const char *gds_config);
double timed_write(method_t m, buffers_t *b, const char *path, const char *cfg);
void warm_up_gds(buffers_t *b);
void bench_ceilings(size_t size, buffers_t *b, unsigned char *buf, size_t padded, int rep);
void print_table(void);
void progress(const char *what, size_t size, int phase, int rep);
void record(const char *method, int phase, memory_t memory, size_t size, unsigned threads, size_t block,
            int repeat, double seconds, const char *config, const filter_note_t *filtered);
/* --filter (bench_filter.c) */
const bench_filter_t *find_filter(const char *name);
bool check_filter(const bench_filter_t *f);
void add_filter(hid_t dcpl, const bench_filter_t *f);
void fill_field(float *values, size_t count);

#endif
