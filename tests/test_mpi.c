/* libh5gds_mpi (H5FDgds_mpi.h): every rank writes its slab of global arrays
 * into its own file, rank 0 writes the master of virtual datasets.
 *   mpiexec -n N test_mpi [--device]
 * Checks: the master read whole with sec2 on every rank (every element);
 * own slabs and windows across ranks through H5FD_gds_mpi_read; argument
 * errors that fail on every rank and leave the collection usable; a rank
 * that cannot create its file, a rank whose writes fail (file size limit:
 * "disk full"), rank 0 unable to write the master: every rank fails, no
 * master file is left; the set of files moved elsewhere; a missing rank
 * file; the master's format (1.10-compatible, relative source names).
 * Writes field.expected.bin for the h5dump test (tests/mpi.cmake).
 * --device: slabs in GPU memory (cuMemAlloc), the GPU chosen with
 * H5FD_gds_mpi_local_rank; exits 77 (skipped) without a GPU.
 * A watchdog (alarm) turns a hang into a failure. */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <mpi.h>

#include "H5FDgds_mpi.h"
#include "gpu_util.h"

static int rank, nranks;
static bool on_device;
static mem_kind_t data_kind = MEM_PAGEABLE;

#define RCHECK(cond) CHECK_MSG(cond, "rank %d", rank)
#define RCHECK_MSG(cond, fmt, ...) CHECK_MSG(cond, "rank %d: " fmt, rank, __VA_ARGS__)

static void barrier(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- paths ---- */

/* test_path's file (test_util.h), copied: its buffers rotate. */
static void path_of(char *out, const char *name)
{
    snprintf(out, 4096, "%s", test_path(name));
}

/* "<dir>/<stem>.rank<r>.h5" for master "<dir>/<stem>.h5" */
static void rank_path_of(char *out, const char *master, int r)
{
    size_t n = strlen(master);
    snprintf(out, 4096, "%.*s.rank%d.h5", (int)(n - 3), master, r);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static bool copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    bool ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        ok = false;
    return ok;
}

static bool error_has(const char *text)
{
    return strstr(error_stack_text(), text) != NULL;
}

/* ---- the datasets: shapes, slabs, values ---- */

typedef struct spec {
    int id;
    const char *name;
    hid_t type;
    size_t esize;
    int ndims;
    hsize_t dims[3];
} spec_t;

enum { FIELD, IDS, CUBE, NSPECS };
static spec_t specs[NSPECS];

static hsize_t field_rows(int r)
{
    return 40 + 23 * (hsize_t)r; /* uneven */
}

/* The slab of rank r. */
static void slab_of(const spec_t *s, int r, hsize_t off[], hsize_t cnt[])
{
    switch (s->id) {
    case FIELD: { /* rows */
        hsize_t start = 0;
        for (int q = 0; q < r; q++)
            start += field_rows(q);
        off[0] = start, cnt[0] = field_rows(r);
        off[1] = 0, cnt[1] = s->dims[1];
        break;
    }
    case IDS: { /* columns; rank 1 has none when there are 3+ ranks */
        hsize_t start = 0;
        for (int q = 0; q <= r; q++) {
            hsize_t n = (nranks >= 3 && q == 1) ? 0 : 100 + 31 * (hsize_t)q;
            if (q == r)
                off[1] = start, cnt[1] = n;
            start += n;
        }
        off[0] = 0, cnt[0] = s->dims[0];
        break;
    }
    default: /* CUBE: two planes each */
        off[0] = 2 * (hsize_t)r, cnt[0] = 2;
        off[1] = 0, cnt[1] = s->dims[1];
        off[2] = 0, cnt[2] = s->dims[2];
        break;
    }
}

static void setup_specs(void)
{
    hsize_t rows = 0, cols = 0;
    for (int r = 0; r < nranks; r++) {
        rows += field_rows(r);
        cols += (nranks >= 3 && r == 1) ? 0 : 100 + 31 * (hsize_t)r;
    }
    specs[FIELD] = (spec_t){FIELD, "field", H5T_NATIVE_DOUBLE, 8, 2, {rows, 301, 0}};
    specs[IDS] = (spec_t){IDS, "ids", H5T_NATIVE_INT32, 4, 2, {7, cols, 0}};
    specs[CUBE] = (spec_t){CUBE, "grp/sub/cube", H5T_NATIVE_UINT16, 2, 3, {2 * (hsize_t)nranks, 5, 9}};
}

static size_t npoints(int ndims, const hsize_t cnt[])
{
    size_t n = 1;
    for (int k = 0; k < ndims; k++)
        n *= (size_t)cnt[k];
    return n;
}

/* Rank r's slab of dataset s: random, no element zero. */
static void *slab_values(const spec_t *s, int r, size_t *bytes)
{
    hsize_t off[3], cnt[3];
    slab_of(s, r, off, cnt);
    size_t n = npoints(s->ndims, cnt);
    *bytes = n * s->esize;
    unsigned char *p = malloc(*bytes + 1);
    fill_random(p, *bytes, 1000 * (uint64_t)(s->id + 1) + (uint64_t)r);
    for (size_t i = 0; i < n; i++) {
        unsigned char *e = p + i * s->esize;
        if (s->id == FIELD) {
            uint64_t u;
            memcpy(&u, e, 8);
            double v = 1.0 + r + (double)(u >> 11) / 9007199254740992.0;
            memcpy(e, &v, 8);
        } else {
            e[0] |= 1;
        }
    }
    return p;
}

/* Copies between a slab [off, off+cnt) of an array of `dims` and a packed buffer. */
static void copy_box(int ndims, const hsize_t dims[], const hsize_t off[], const hsize_t cnt[], size_t esize,
                     unsigned char *array, unsigned char *packed, bool to_array)
{
    size_t n = npoints(ndims, cnt);
    for (size_t i = 0; i < n; i++) {
        size_t rest = i, lin = 0, stride = 1;
        for (int k = ndims - 1; k >= 0; k--) {
            size_t idx = rest % cnt[k];
            rest /= cnt[k];
            lin += (off[k] + idx) * stride;
            stride *= dims[k];
        }
        if (to_array)
            memcpy(array + lin * esize, packed + i * esize, esize);
        else
            memcpy(packed + i * esize, array + lin * esize, esize);
    }
}

/* The whole global array of s, as the ranks wrote it. */
static unsigned char *global_values(const spec_t *s)
{
    size_t total = npoints(s->ndims, s->dims) * s->esize, bytes;
    unsigned char *g = calloc(1, total + 1);
    for (int r = 0; r < nranks; r++) {
        hsize_t off[3], cnt[3];
        slab_of(s, r, off, cnt);
        unsigned char *v = slab_values(s, r, &bytes);
        copy_box(s->ndims, s->dims, off, cnt, s->esize, g, v, true);
        free(v);
    }
    return g;
}

static size_t count_diff(const unsigned char *a, const unsigned char *b, size_t n, size_t esize)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(a + i * esize, b + i * esize, esize) != 0;
    return bad;
}

/* A buffer of the test's memory kind holding `bytes` of `src`. */
static test_buffer_t put_buffer(const void *src, size_t bytes)
{
    test_buffer_t b = buffer_alloc(data_kind, bytes);
    if (bytes)
        buffer_put(&b, 0, src, bytes);
    /* A small cuMemcpyHtoD from pageable memory returns before its DMA is
     * done, and the driver's copies run on streams that do not wait for the
     * default stream: like any producer of device data (a kernel), the copy
     * must be complete before the buffer is handed to I/O. */
    if (data_kind == MEM_DEVICE)
        GPU_OK(cu.CtxSynchronize());
    return b;
}

static herr_t write_spec(H5FD_gds_collection_t *c, const spec_t *s)
{
    hsize_t off[3], cnt[3];
    size_t bytes;
    slab_of(s, rank, off, cnt);
    void *v = slab_values(s, rank, &bytes);
    test_buffer_t b = put_buffer(v, bytes);
    /* an empty slab may come with a NULL buffer */
    herr_t rc = H5FD_gds_mpi_write(c, s->name, s->type, s->ndims, s->dims, off, cnt, bytes ? b.ptr : NULL);
    if (rc < 0)
        H5Eprint2(H5E_DEFAULT, stderr);
    else if (bytes)
        RCHECK_MSG(H5FD_gds_last_route() == (on_device ? H5FD_GDS_ROUTE_PASSTHROUGH : H5FD_GDS_ROUTE_HOST),
                   "%s written through route %s", s->name, H5FD_gds_route_name(H5FD_gds_last_route()));
    buffer_free(&b);
    free(v);
    return rc;
}

/* Reads [off, off+cnt) of s from `master` with H5FD_gds_mpi_read into a
 * buffer of the test's kind; compares with `expect` when it succeeds. */
static herr_t read_and_compare(const char *master, const spec_t *s, const hsize_t off[], const hsize_t cnt[],
                               const unsigned char *expect, const char *what)
{
    size_t n = npoints(s->ndims, cnt), bytes = n * s->esize;
    test_buffer_t b = buffer_alloc(data_kind, bytes);
    buffer_fill(&b, 0);
    herr_t rc = H5FD_gds_mpi_read(MPI_COMM_WORLD, master, s->name, s->type, s->ndims, off, cnt,
                                  bytes ? b.ptr : NULL, H5P_DEFAULT);
    if (rc >= 0 && expect) {
        unsigned char *got = malloc(bytes + 1);
        buffer_get(&b, 0, got, bytes);
        size_t bad = count_diff(got, expect, n, s->esize);
        RCHECK_MSG(bad == 0, "%s of %s (%s memory): %zu of %zu elements differ", what, s->name, mem_names[data_kind],
                   bad, n);
        free(got);
    }
    buffer_free(&b);
    return rc;
}

/* ---- the main collection ---- */

static char master[4096];

static void test_argument_errors(H5FD_gds_collection_t *c)
{
    hsize_t g = 10 * (hsize_t)nranks, off = 10 * (hsize_t)rank, cnt = 10;
    unsigned char data[10];
    memset(data, 7, sizeof data);
    hid_t u8 = H5T_NATIVE_UINT8;
    int last = nranks - 1;
    char want[64];
    herr_t rc;

    /* the last rank's slab is out of bounds */
    hsize_t off_bad = rank == last ? off + 5 : off;
    rc = H5FD_gds_mpi_write(c, "bad", u8, 1, &g, &off_bad, &cnt, data);
    RCHECK(rc < 0);
    snprintf(want, sizeof want, "invalid arguments on rank %d", last);
    RCHECK_MSG(error_has(want), "error stack: %s", error_stack_text());
    if (rank == last)
        RCHECK_MSG(error_has("exceeds the global size"), "error stack: %s", error_stack_text());
    /* ndims 0 and 33 */
    RCHECK(H5FD_gds_mpi_write(c, "bad", u8, 0, &g, &off, &cnt, data) < 0);
    RCHECK_MSG(error_has("ndims 0 is outside"), "error stack: %s", error_stack_text());
    RCHECK(H5FD_gds_mpi_write(c, "bad", u8, 33, &g, &off, &cnt, data) < 0);
    /* different global dimensions */
    hsize_t g_bad = rank == 0 ? g + 1 : g;
    RCHECK(H5FD_gds_mpi_write(c, "bad", u8, 1, &g_bad, &off, &cnt, data) < 0);
    RCHECK_MSG(error_has("different global_dims"), "error stack: %s", error_stack_text());
    /* different names, different types */
    if (nranks > 1) {
        RCHECK(H5FD_gds_mpi_write(c, rank == 0 ? "bad" : "bad2", u8, 1, &g, &off, &cnt, data) < 0);
        RCHECK_MSG(error_has("different dataset names"), "error stack: %s", error_stack_text());
        RCHECK(H5FD_gds_mpi_write(c, "bad", rank == 0 ? H5T_NATIVE_INT8 : u8, 1, &g, &off, &cnt, data) < 0);
        RCHECK_MSG(error_has("different datatypes"), "error stack: %s", error_stack_text());
        /* overlapping slabs */
        hsize_t zero = 0;
        RCHECK(H5FD_gds_mpi_write(c, "bad", u8, 1, &g, &zero, &cnt, data) < 0);
        RCHECK_MSG(error_has("overlap"), "error stack: %s", error_stack_text());
    }
    /* not a datatype, NULL buffer */
    RCHECK(H5FD_gds_mpi_write(c, "bad", rank == 0 ? (hid_t)-1 : u8, 1, &g, &off, &cnt, data) < 0);
    RCHECK(H5FD_gds_mpi_write(c, "bad", u8, 1, &g, &off, &cnt, rank == 0 ? NULL : data) < 0);
    RCHECK_MSG(error_has("invalid arguments on rank 0"), "error stack: %s", error_stack_text());
    /* a name already written */
    hsize_t foff[3], fcnt[3];
    slab_of(&specs[FIELD], rank, foff, fcnt);
    RCHECK(H5FD_gds_mpi_write(c, "/field", H5T_NATIVE_DOUBLE, 2, specs[FIELD].dims, foff, fcnt, data) < 0);
    RCHECK_MSG(error_has("already written"), "error stack: %s", error_stack_text());
    RCHECK(H5FD_gds_mpi_write(NULL, "bad", u8, 1, &g, &off, &cnt, data) < 0);
    /* the collection is still usable */
    test_buffer_t b = put_buffer(data, sizeof data);
    rc = H5FD_gds_mpi_write(c, "after_errors", u8, 1, &g, &off, &cnt, b.ptr);
    RCHECK(rc >= 0);
    if (rc < 0)
        H5Eprint2(H5E_DEFAULT, stderr);
    buffer_free(&b);
}

static void test_collection(void)
{
    path_of(master, "master.h5");
    H5FD_gds_collection_t *c = H5FD_gds_mpi_begin(MPI_COMM_WORLD, master, H5P_DEFAULT);
    RCHECK(c != NULL);
    if (!c) {
        H5Eprint2(H5E_DEFAULT, stderr);
        return;
    }
    RCHECK(write_spec(c, &specs[FIELD]) >= 0);
    RCHECK(write_spec(c, &specs[IDS]) >= 0);
    test_argument_errors(c);
    RCHECK(write_spec(c, &specs[CUBE]) >= 0);
    herr_t rc = H5FD_gds_mpi_finish(c);
    RCHECK(rc >= 0);
    if (rc < 0)
        H5Eprint2(H5E_DEFAULT, stderr);
    RCHECK(exists(master));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.h5gds-tmp", master);
    RCHECK(!exists(tmp));
}

/* Every rank reads every dataset whole with sec2: no knowledge of ranks. */
static void test_read_master_sec2(const char *path, int only, size_t *zeros_in_rank1)
{
    hid_t fapl = sec2_fapl();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    RCHECK_MSG(f >= 0, "open %s", path);
    for (int i = 0; i < NSPECS && f >= 0; i++) {
        if (only >= 0 && i != only)
            continue;
        const spec_t *s = &specs[i];
        size_t n = npoints(s->ndims, s->dims);
        unsigned char *expect = global_values(s), *got = malloc(n * s->esize + 1);
        memset(got, 0xEE, n * s->esize);
        hid_t d = H5Dopen2(f, s->name, H5P_DEFAULT);
        RCHECK_MSG(d >= 0 && H5Dread(d, s->type, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0, "read %s", s->name);
        if (zeros_in_rank1) {
            /* rank 1's file is gone: HDF5 reads its rows as fill values (0) */
            hsize_t off[3], cnt[3];
            slab_of(s, 1, off, cnt);
            size_t m = npoints(s->ndims, cnt);
            unsigned char *part = malloc(m * s->esize + 1), *zero = calloc(1, m * s->esize + 1);
            copy_box(s->ndims, s->dims, off, cnt, s->esize, got, part, false);
            *zeros_in_rank1 = m - count_diff(part, zero, m, s->esize);
            free(part);
            free(zero);
        } else {
            size_t bad = count_diff(got, expect, n, s->esize);
            RCHECK_MSG(bad == 0, "%s: %zu of %zu elements differ reading %s with sec2", s->name, bad, n, path);
        }
        if (d >= 0)
            H5Dclose(d);
        free(expect);
        free(got);
    }
    if (f >= 0 && only < 0) {
        RCHECK(H5Lexists(f, "after_errors", H5P_DEFAULT) > 0);
        RCHECK(H5Lexists(f, "bad", H5P_DEFAULT) == 0);
    }
    if (f >= 0)
        H5Fclose(f);
    H5Pclose(fapl);
}

/* Own slabs (from the rank file) and windows across ranks (through the VDS). */
static void test_read_api(const char *path)
{
    for (int i = 0; i < NSPECS; i++) {
        const spec_t *s = &specs[i];
        hsize_t off[3], cnt[3];
        size_t bytes;
        slab_of(s, rank, off, cnt);
        unsigned char *own = slab_values(s, rank, &bytes);
        herr_t rc = read_and_compare(path, s, off, cnt, own, "own slab");
        RCHECK_MSG(rc >= 0, "read own slab of %s", s->name);
        if (rc < 0)
            H5Eprint2(H5E_DEFAULT, stderr);
        else if (bytes)
            RCHECK_MSG(H5FD_gds_last_route() == (on_device ? H5FD_GDS_ROUTE_PASSTHROUGH : H5FD_GDS_ROUTE_HOST),
                       "own slab of %s read through %s", s->name, H5FD_gds_route_name(H5FD_gds_last_route()));
        free(own);

        /* a window from the middle of this rank's slab into the next one's (the last rank: everything) */
        unsigned char *global = global_values(s);
        int dim = s->id == IDS ? 1 : 0;
        hsize_t woff[3], wcnt[3];
        for (int k = 0; k < s->ndims; k++)
            woff[k] = 0, wcnt[k] = s->dims[k];
        if (rank < nranks - 1) {
            hsize_t noff[3], ncnt[3];
            slab_of(s, rank + 1, noff, ncnt);
            woff[dim] = off[dim] + cnt[dim] / 2;
            wcnt[dim] = noff[dim] + ncnt[dim] / 2 + 1 - woff[dim];
        }
        if (s->ndims > 1 && dim == 0 && s->dims[1] > 10) /* and not all columns */
            woff[1] = 3, wcnt[1] = s->dims[1] - 7;
        size_t wn = npoints(s->ndims, wcnt);
        unsigned char *expect = malloc(wn * s->esize + 1);
        copy_box(s->ndims, s->dims, woff, wcnt, s->esize, global, expect, false);
        rc = read_and_compare(path, s, woff, wcnt, expect, "window");
        RCHECK_MSG(rc >= 0, "read a window of %s", s->name);
        if (rc < 0)
            H5Eprint2(H5E_DEFAULT, stderr);
        else if (on_device)
            RCHECK(H5FD_gds_last_route() == H5FD_GDS_ROUTE_HOST_STAGED);
        free(expect);
        free(global);
    }
    /* errors: no such dataset on one rank, out of bounds */
    const spec_t *s = &specs[FIELD];
    hsize_t off[2] = {0, 0}, cnt[2] = {1, 1}, big[2] = {s->dims[0] + 1, 1};
    double v;
    RCHECK(H5FD_gds_mpi_read(MPI_COMM_WORLD, path, rank == 0 ? "nothing" : "field", s->type, 2, off, cnt, &v,
                             H5P_DEFAULT) < 0);
    RCHECK_MSG(error_has("failed on rank 0"), "error stack: %s", error_stack_text());
    RCHECK(H5FD_gds_mpi_read(MPI_COMM_WORLD, path, "field", s->type, 2, off, big, &v, H5P_DEFAULT) < 0);
    RCHECK_MSG(error_has("exceeds the size"), "error stack: %s", error_stack_text());
}

/* The master as HDF5 1.10 expects it; the expected bytes for h5dump. */
static void test_format(void)
{
    if (rank != 0)
        return;
    hid_t fapl = sec2_fapl();
    hid_t f = H5Fopen(master, H5F_ACC_RDONLY, fapl);
    RCHECK(f >= 0);
    H5F_info2_t info;
    RCHECK(H5Fget_info2(f, &info) >= 0);
    RCHECK_MSG(info.super.version == 0, "superblock version %u (1.10-compatible defaults expected)",
               info.super.version);
    hid_t d = H5Dopen2(f, "field", H5P_DEFAULT), dcpl = H5Dget_create_plist(d);
    RCHECK(H5Pget_layout(dcpl) == H5D_VIRTUAL);
    size_t n = 0;
    RCHECK(H5Pget_virtual_count(dcpl, &n) >= 0 && n == (size_t)nranks);
    for (size_t i = 0; i < n; i++) {
        char name[4096];
        RCHECK(H5Pget_virtual_filename(dcpl, i, name, sizeof name) > 0);
        RCHECK_MSG(strchr(name, '/') == NULL, "source file '%s' has a directory", name);
        char want[64];
        snprintf(want, sizeof want, "master.rank%zu.h5", i);
        RCHECK_MSG(strcmp(name, want) == 0, "source file '%s'", name);
    }
    H5Pclose(dcpl);
    H5Dclose(d);
    /* the dataset where rank 1 has no columns (3+ ranks) maps the others only */
    d = H5Dopen2(f, "ids", H5P_DEFAULT);
    dcpl = H5Dget_create_plist(d);
    RCHECK(H5Pget_virtual_count(dcpl, &n) >= 0 && n == (size_t)(nranks >= 3 ? nranks - 1 : nranks));
    H5Pclose(dcpl);
    H5Dclose(d);
    H5Fclose(f);
    H5Pclose(fapl);

    char path[4096];
    path_of(path, "field.expected.bin");
    unsigned char *g = global_values(&specs[FIELD]);
    FILE *out = fopen(path, "wb");
    size_t bytes = npoints(2, specs[FIELD].dims) * 8;
    RCHECK(out && fwrite(g, 1, bytes, out) == bytes);
    if (out)
        fclose(out);
    free(g);
}

/* ---- failures ---- */

/* A small collection with one dataset; returns finish's result. */
static herr_t small_collection(const char *path)
{
    H5FD_gds_collection_t *c = H5FD_gds_mpi_begin(MPI_COMM_WORLD, path, H5P_DEFAULT);
    if (!c)
        return -1;
    hsize_t g = 4 * (hsize_t)nranks, off = 4 * (hsize_t)rank, cnt = 4;
    int32_t v[4] = {rank + 1, rank + 2, rank + 3, rank + 4};
    test_buffer_t b = put_buffer(v, sizeof v);
    H5FD_gds_mpi_write(c, "v", H5T_NATIVE_INT32, 1, &g, &off, &cnt, b.ptr);
    buffer_free(&b);
    return H5FD_gds_mpi_finish(c);
}

/* The rank files of a collection are all gone (checked by every rank). */
static bool no_rank_files(const char *path)
{
    char p[4096];
    for (int r = 0; r < nranks; r++) {
        rank_path_of(p, path, r);
        if (exists(p))
            return false;
    }
    return true;
}

static void test_begin_failure(void)
{
    char path[4096], victim[4096], want[4200];
    int last = nranks - 1;
    path_of(path, "fa.h5");
    RCHECK(small_collection(path) >= 0);
    RCHECK(exists(path));
    barrier();
    /* the last rank's file name is taken by a directory */
    rank_path_of(victim, path, last);
    if (rank == last) {
        unlink(victim);
        RCHECK(mkdir(victim, 0755) == 0);
    }
    barrier();
    H5FD_gds_collection_t *c = H5FD_gds_mpi_begin(MPI_COMM_WORLD, path, H5P_DEFAULT);
    RCHECK(c == NULL);
    snprintf(want, sizeof want, "rank %d cannot create its file '%s'", last, victim);
    RCHECK_MSG(error_has(want), "error stack: %s", error_stack_text());
    if (c)
        H5FD_gds_mpi_finish(c);
    barrier();
    /* the old master (pointing at the rank files) is gone, and the new rank files */
    RCHECK(!exists(path));
    char own[4096];
    rank_path_of(own, path, rank);
    if (rank != last)
        RCHECK_MSG(!exists(own), "%s left behind", own);
    barrier();
    if (rank == last)
        rmdir(victim);

    /* ranks given different master paths */
    if (nranks > 1) {
        char p0[4096], p1[4096];
        path_of(p0, "fm0.h5");
        path_of(p1, "fm1.h5");
        c = H5FD_gds_mpi_begin(MPI_COMM_WORLD, rank == 0 ? p0 : p1, H5P_DEFAULT);
        RCHECK(c == NULL);
        RCHECK_MSG(error_has("different master paths"), "error stack: %s", error_stack_text());
        RCHECK(!exists(p0) && !exists(p1));
    }
    RCHECK(H5FD_gds_mpi_begin(MPI_COMM_NULL, path, H5P_DEFAULT) == NULL);
    RCHECK(H5FD_gds_mpi_finish(NULL) < 0);
}

/* The last rank cannot write beyond 64 KiB (RLIMIT_FSIZE: as a full disk). */
static void test_write_failure(void)
{
    char path[4096], want[128];
    int last = nranks - 1;
    path_of(path, "fb.h5");
    H5FD_gds_collection_t *c = H5FD_gds_mpi_begin(MPI_COMM_WORLD, path, H5P_DEFAULT);
    RCHECK(c != NULL);
    if (!c)
        return;
    struct rlimit old, lim;
    if (rank == last) {
        signal(SIGXFSZ, SIG_IGN);
        getrlimit(RLIMIT_FSIZE, &old);
        lim = old;
        lim.rlim_cur = 64 << 10;
        RCHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    }
    size_t mib = 1 << 20;
    hsize_t g = mib * (hsize_t)nranks, off = mib * (hsize_t)rank, cnt = mib;
    unsigned char *v = malloc(mib);
    fill_random(v, mib, 77 + (uint64_t)rank);
    test_buffer_t b = put_buffer(v, mib);
    RCHECK(H5FD_gds_mpi_write(c, "big", H5T_NATIVE_UINT8, 1, &g, &off, &cnt, b.ptr) < 0);
    snprintf(want, sizeof want, "write of dataset 'big' failed on rank %d (1 of %d ranks failed)", last, nranks);
    RCHECK_MSG(error_has(want), "error stack: %s", error_stack_text());
    /* With write-behind (H5GDS_CONFIG=write_behind=...) the file-size
     * limit is checked before a write is deferred, so the write fails
     * itself; a failure met in the background instead (a disk that filled)
     * is reported by the flush each rank write ends with, in the same call. */
    if (rank == last)
        RCHECK_MSG(error_has("cannot write dataset 'big'") ||
                       (error_has("cannot flush its file") && error_has("background write (write-behind)") &&
                        error_has("File too large")),
                   "error stack: %s", error_stack_text());
    /* the collection has failed: later writes too, and finish */
    hsize_t o2 = (hsize_t)rank, c2 = 1, g2 = (hsize_t)nranks;
    RCHECK(H5FD_gds_mpi_write(c, "small", H5T_NATIVE_UINT8, 1, &g2, &o2, &c2, v) < 0);
    RCHECK_MSG(error_has("has failed"), "error stack: %s", error_stack_text());
    RCHECK(H5FD_gds_mpi_finish(c) < 0);
    RCHECK_MSG(error_has("no master file was written"), "error stack: %s", error_stack_text());
    if (rank == last)
        RCHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    barrier();
    RCHECK(!exists(path));
    RCHECK(no_rank_files(path));
    buffer_free(&b);
    free(v);
}

/* Rank 0 cannot create the master's temporary file. */
static void test_master_failure(void)
{
    char path[4096], tmp[4200];
    path_of(path, "fc.h5");
    snprintf(tmp, sizeof tmp, "%s.h5gds-tmp", path);
    if (rank == 0)
        RCHECK(mkdir(tmp, 0755) == 0);
    barrier();
    RCHECK(small_collection(path) < 0);
    RCHECK_MSG(error_has("rank 0 could not write the master file"), "error stack: %s", error_stack_text());
    if (rank == 0)
        RCHECK_MSG(error_has("cannot create the master file under its temporary name"), "error stack: %s",
                   error_stack_text());
    barrier();
    RCHECK(!exists(path));
    RCHECK(no_rank_files(path));
    barrier();
    if (rank == 0)
        rmdir(tmp);
}

/* The set of files moved elsewhere still reads; a missing rank file is an error. */
static void test_moved_and_missing(void)
{
    char dir[4096], moved[4200], from[4096], to[4200];
    path_of(dir, "moved");
    snprintf(moved, sizeof moved, "%s/master.h5", dir);
    if (rank == 0) {
        mkdir(dir, 0755);
        RCHECK(copy_file(master, moved));
        for (int r = 0; r < nranks; r++) {
            rank_path_of(from, master, r);
            snprintf(to, sizeof to, "%s/master.rank%d.h5", dir, r);
            RCHECK(copy_file(from, to));
        }
    }
    barrier();
    test_read_master_sec2(moved, -1, NULL);
    test_read_api(moved);
    barrier();
    if (nranks < 2)
        return;
    if (rank == 0) {
        snprintf(to, sizeof to, "%s/master.rank1.h5", dir);
        RCHECK(unlink(to) == 0);
    }
    barrier();
    /* HDF5 itself reads the missing part as fill values (so the VDS resolves
     * its sources in moved/, next to the master) ... */
    size_t zeros = 0;
    test_read_master_sec2(moved, FIELD, &zeros);
    RCHECK_MSG(zeros == field_rows(1) * specs[FIELD].dims[1], "%zu zeros where rank 1's rows were", zeros);
    /* ... H5FD_gds_mpi_read refuses */
    const spec_t *s = &specs[FIELD];
    hsize_t off[2] = {0, 0};
    RCHECK(read_and_compare(moved, s, off, s->dims, NULL, "whole") < 0);
    RCHECK_MSG(error_has("master.rank1.h5' holding part of the requested slab"), "error stack: %s",
               error_stack_text());
    /* and rank 1's own slab fails on every rank */
    hsize_t o[2], c[2];
    slab_of(s, rank, o, c);
    RCHECK(read_and_compare(moved, s, o, c, NULL, "own") < 0);
    RCHECK_MSG(error_has("failed on rank 1"), "error stack: %s", error_stack_text());
}

static void test_local_rank(void)
{
    int lr = H5FD_gds_mpi_local_rank(MPI_COMM_WORLD);
    RCHECK_MSG(lr >= 0 && lr < nranks, "local rank %d", lr);
    RCHECK(H5FD_gds_mpi_local_rank(MPI_COMM_NULL) == -1);
}

/* Files of an earlier run that would get in the way. */
static void clean_scratch(void)
{
    if (rank != 0)
        return;
    const char *names[] = {"fa.h5", "fb.h5", "fc.h5", "fm0.h5", "fm1.h5", "master.h5"};
    char p[4096], q[4200];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        path_of(p, names[i]);
        unlink(p);
        snprintf(q, sizeof q, "%s.h5gds-tmp", p);
        rmdir(q);
        for (int r = 0; r < nranks + 8; r++) {
            rank_path_of(q, p, r);
            if (rmdir(q) != 0)
                unlink(q);
        }
    }
    path_of(p, "moved");
    for (int r = 0; r < nranks + 8; r++) {
        snprintf(q, sizeof q, "%s/master.rank%d.h5", p, r);
        unlink(q);
    }
    snprintf(q, sizeof q, "%s/master.h5", p);
    unlink(q);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    alarm(240); /* a hang is a failure */
    on_device = argc > 1 && strcmp(argv[1], "--device") == 0;
    if (on_device) {
        int have = gpu_init(), all = 0;
        MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
            if (rank == 0)
                printf("test_mpi --device: skipped: %s\n", have ? "a rank has no GPU" : gpu_skip_reason);
            MPI_Finalize();
            return 77;
        }
        int ndev = 0, dev_index = H5FD_gds_mpi_local_rank(MPI_COMM_WORLD);
        CUdevice dev;
        CUcontext ctx;
        GPU_OK(cu.DeviceGetCount(&ndev));
        RCHECK(dev_index >= 0 && dev_index < ndev);
        dev_index = dev_index < 0 ? 0 : dev_index % ndev;
        GPU_OK(cu.DeviceGet(&dev, dev_index));
        GPU_OK(cu.DevicePrimaryCtxRetain(&ctx, dev));
        GPU_OK(cu.CtxSetCurrent(ctx));
        printf("rank %d: GPU %d of %d\n", rank, dev_index, ndev);
        data_kind = MEM_DEVICE;
    }
    setup_specs();
    clean_scratch();
    barrier();

    test_local_rank();
    test_collection();
    barrier();
    test_read_master_sec2(master, -1, NULL);
    test_read_api(master);
    test_format();
    barrier();
    test_begin_failure();
    barrier();
    test_write_failure();
    barrier();
    test_master_failure();
    barrier();
    test_moved_and_missing();
    barrier();

    char name[64];
    snprintf(name, sizeof name, "test_mpi%s rank %d of %d", on_device ? " --device" : "", rank, nranks);
    int failures = test_finish(name), total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi: %d failures on %d ranks\n", total, nranks);
    MPI_Finalize();
    return failures;
}
