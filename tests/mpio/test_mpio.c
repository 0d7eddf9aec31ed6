/*
 * The gds_mpio driver under mpirun: every rank writes its part of one
 * dataset in one shared file, reads it back, and rank 0 then reads the whole
 * file with sec2 and compares it byte for byte with what the ranks wrote.
 *
 *   mpirun -np N test_mpio [--device | --mixed] [--fapl api|mpio|plugin] [CASE...]
 *
 * Buffers: host (default), --device (device memory on every rank; exit 77
 * without a GPU), --mixed (device memory on even ranks, host on odd ones, in
 * the same collective calls). fapl: api (H5Pset_fapl_gds_mpio, default),
 * mpio (H5Pset_fapl_mpio: the preload library must turn it into gds_mpio),
 * plugin (the default fapl: HDF5_DRIVER=gds_mpio).
 *
 * Cases (all by default): decompositions (1-D slabs, block-cyclic runs of
 * 4099 elements whose boundaries share file-system blocks, 2-D and 3-D
 * blocks, strided rows, a rank with nothing to transfer), each contiguous
 * and chunked, independent and collective; then conversion, filters,
 * extend, selection I/O off, a failing rank (also one failing right after
 * mpio's open), and the MPI queries.
 * The engine's statistics must account for exactly the raw bytes of each
 * rank's selection: the raw data took the engine's path.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>

#include <mpi.h>

#include "H5FDgds_mpio.h"
#include "gpu_util.h"

static int rank, nranks;
static const char *dir = ".";
static enum { BUF_HOST, BUF_DEVICE, BUF_MIXED } buffers = BUF_HOST;
static enum { FAPL_API, FAPL_MPIO, FAPL_PLUGIN } fapl_kind = FAPL_API;

static uint32_t value_at(uint64_t idx, uint32_t salt)
{
    uint64_t x = (idx + 1) * 0x9E3779B97F4A7C15ULL ^ salt;
    x ^= x >> 29;
    return (uint32_t)(x * 0xBF58476D1CE4E5B9ULL >> 32);
}

static mem_kind_t my_kind(void)
{
    if (buffers == BUF_DEVICE || (buffers == BUF_MIXED && rank % 2 == 0))
        return MEM_DEVICE;
    return MEM_PAGEABLE;
}

static hid_t make_fapl(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl_kind == FAPL_API)
        CHECK(H5Pset_fapl_gds_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) >= 0);
    else if (fapl_kind == FAPL_MPIO)
        CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) >= 0);
    /* every file of this test must be on gds_mpio, whichever route */
    CHECK_MSG(H5Pget_driver(fapl) == H5FD_gds_mpio_init(), "the fapl does not use gds_mpio (route %d)",
              (int)fapl_kind);
    return fapl;
}

static void path_of(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s.h5", dir, name);
}

/* True on every rank when it is true on all. */
static bool all_true(bool mine)
{
    int in = mine, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return out != 0;
}

/* ---- decompositions ---- */

typedef enum { D_SLAB1, D_CYCLIC4099, D_BLOCK2, D_BLOCK3, D_STRIDED, D_EMPTY0 } decomp_t;
static const char *const decomp_names[] = {"slab1d", "cyclic4099", "block2d", "block3d", "strided", "empty-rank0"};

typedef struct layout {
    int ndims;
    hsize_t dims[3];
    hsize_t chunk[3]; /* 0: contiguous */
} layout_t;

static layout_t layout_of(decomp_t d, bool chunked)
{
    layout_t l = {0};
    switch (d) {
    case D_SLAB1: l.ndims = 1; l.dims[0] = (hsize_t)nranks * 65536; break;      /* 256 KiB per rank: aligned */
    case D_CYCLIC4099: l.ndims = 1; l.dims[0] = (hsize_t)nranks * 4099 * 9; break;
    case D_EMPTY0: l.ndims = 1; l.dims[0] = (hsize_t)nranks * 5000 + 17; break;
    case D_BLOCK2: l.ndims = 2; l.dims[0] = 120; l.dims[1] = 250; break;
    case D_BLOCK3: l.ndims = 3; l.dims[0] = 18; l.dims[1] = 22; l.dims[2] = 40; break;
    case D_STRIDED: l.ndims = 2; l.dims[0] = 97; l.dims[1] = 1031; break;
    }
    if (chunked)
        for (int i = 0; i < l.ndims; i++)  /* chunks that straddle the ranks' parts */
            l.chunk[i] = l.ndims == 1 ? 3001 : (l.dims[i] + 2) / 3;
    return l;
}

static void grid_of(int ndims, int *g)
{
    for (int i = 0; i < 3; i++)
        g[i] = 0;
    MPI_Dims_create(nranks, ndims, g);
}

/* Whether `r` owns the element at row-major index `idx`. */
static bool owns(decomp_t d, const layout_t *l, int r, uint64_t idx)
{
    hsize_t c[3] = {0}, rest = idx;
    for (int i = l->ndims - 1; i >= 0; i--) {
        c[i] = rest % l->dims[i];
        rest /= l->dims[i];
    }
    switch (d) {
    case D_SLAB1: return c[0] / (l->dims[0] / (hsize_t)nranks) == (hsize_t)r;
    case D_CYCLIC4099: return (c[0] / 4099) % (hsize_t)nranks == (hsize_t)r;
    case D_EMPTY0: {
        if (nranks == 1)
            return true;
        hsize_t per = (l->dims[0] + (hsize_t)nranks - 2) / (hsize_t)(nranks - 1);
        return r > 0 && c[0] / per == (hsize_t)(r - 1);
    }
    case D_STRIDED: return c[0] % (hsize_t)nranks == (hsize_t)r;
    case D_BLOCK2:
    case D_BLOCK3: {
        int g[3], pos[3], rr = r;
        grid_of(l->ndims, g);
        for (int i = l->ndims - 1; i >= 0; i--) {
            pos[i] = rr % g[i];
            rr /= g[i];
        }
        for (int i = 0; i < l->ndims; i++) {
            hsize_t per = (l->dims[i] + (hsize_t)g[i] - 1) / (hsize_t)g[i];
            if (c[i] / per != (hsize_t)pos[i])
                return false;
        }
        return true;
    }
    }
    return false;
}

static uint64_t total_of(const layout_t *l)
{
    uint64_t n = 1;
    for (int i = 0; i < l->ndims; i++)
        n *= l->dims[i];
    return n;
}

/* This rank's selection, from `owns`: runs of the innermost dimension. */
static hid_t select_mine(decomp_t d, const layout_t *l, hid_t space, uint64_t *count)
{
    H5Sselect_none(space);
    uint64_t total = total_of(l), n = 0;
    hsize_t inner = l->dims[l->ndims - 1];
    for (uint64_t row = 0; row * inner < total; row++) {
        for (hsize_t j = 0; j < inner;) {
            if (!owns(d, l, rank, row * inner + j)) {
                j++;
                continue;
            }
            hsize_t k = j;
            while (k < inner && owns(d, l, rank, row * inner + k))
                k++;
            hsize_t start[3], cnt[3];
            uint64_t rest = row;
            for (int i = l->ndims - 2; i >= 0; i--) {
                start[i] = rest % l->dims[i];
                rest /= l->dims[i];
                cnt[i] = 1;
            }
            start[l->ndims - 1] = j;
            cnt[l->ndims - 1] = k - j;
            H5Sselect_hyperslab(space, H5S_SELECT_OR, start, NULL, cnt, NULL);
            n += k - j;
            j = k;
        }
    }
    *count = n;
    return space;
}

/* ---- one decomposition: write, read back, sec2 check ---- */

/* Raw bytes the engine moved for this rank: all routes, or the device ones
 * (staged, cuFile, bounce). */
static uint64_t engine_bytes_of(hid_t file, bool write, bool device_only)
{
    H5FD_gds_stats_t s;
    memset(&s, 0, sizeof s);
    CHECK(H5FD_gds_mpio_get_stats(file, &s) >= 0);
    uint64_t b = 0;
    for (int r = device_only ? H5FD_GDS_ROUTE_STAGED : 0; r <= H5FD_GDS_ROUTE_POSIX_BOUNCE; r++)
        b += write ? s.write_bytes[r] : s.read_bytes[r];
    return b;
}

static uint64_t engine_bytes(hid_t file, bool write)
{
    return engine_bytes_of(file, write, false);
}

/* Rank 0 reads the dataset with sec2 and compares every element. */
static void check_with_sec2(const char *path, const char *dset, uint64_t total, uint32_t salt, hid_t mem_type,
                            int width)
{
    int bad = 0;
    if (rank == 0) {
        hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
        H5Pset_fapl_sec2(fapl);
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
        hid_t ds = f >= 0 ? H5Dopen2(f, dset, H5P_DEFAULT) : -1;
        unsigned char *buf = malloc(total * (size_t)width);
        if (ds < 0 || !buf || H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
            bad = 1;
        for (uint64_t i = 0; !bad && i < total; i++) {
            uint64_t got = width == 4 ? ((uint32_t *)buf)[i] : ((uint64_t *)buf)[i];
            if (got != value_at(i, salt)) {
                fprintf(stderr, "FAIL sec2 read of %s:%s element %llu: %llx, expected %x\n", path, dset,
                        (unsigned long long)i, (unsigned long long)got, value_at(i, salt));
                bad = 1;
            }
        }
        free(buf);
        if (ds >= 0)
            H5Dclose(ds);
        if (f >= 0)
            H5Fclose(f);
        H5Pclose(fapl);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK_MSG(!bad, "sec2 sees other bytes in %s:%s", path, dset);
}

static void run_decomp(decomp_t d, bool chunked, bool collective)
{
    char name[128], path[512];
    snprintf(name, sizeof name, "%s-%s-%s", decomp_names[d], chunked ? "chunked" : "contig",
             collective ? "coll" : "indep");
    path_of(path, sizeof path, name);
    layout_t l = layout_of(d, chunked);
    uint64_t total = total_of(&l), mine = 0;
    uint32_t salt = (uint32_t)d * 7919u + chunked * 31u + collective;
    int failures_before = test_failures;

    hid_t fapl = make_fapl();
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file >= 0);
    hid_t space = H5Screate_simple(l.ndims, l.dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked)
        H5Pset_chunk(dcpl, l.ndims, l.chunk);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t ds = H5Dcreate2(file, "x", H5T_NATIVE_UINT32, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(ds >= 0);
    hid_t fspace = select_mine(d, &l, H5Scopy(space), &mine);
    /* The buffer spans the whole extent; the memory selection is the file's:
     * pieces sit at their global positions (strided in memory too). */
    hid_t mspace = H5Scopy(fspace);
    size_t bytes = total * 4;
    test_buffer_t b = buffer_alloc(my_kind(), bytes);
    uint32_t *host = malloc(bytes);
    for (uint64_t i = 0; i < total; i++)
        host[i] = value_at(i, salt);
    buffer_put(&b, 0, host, bytes);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);

    uint64_t w0 = engine_bytes(file, true), wd0 = engine_bytes_of(file, true, true);
    CHECK(H5Dwrite(ds, H5T_NATIVE_UINT32, mspace, fspace, dxpl, b.ptr) >= 0);
    CHECK(H5FD_gds_mpio_sync(file) >= 0); /* with write-behind: the bytes are counted once written */
    uint64_t wrote = engine_bytes(file, true) - w0;
    CHECK_MSG(wrote == mine * 4, "%s rank %d: the engine wrote %llu bytes, the selection has %llu", name, rank,
              (unsigned long long)wrote, (unsigned long long)(mine * 4));
    /* Device memory handed to the driver takes a device route (under the
     * preload library, chunks that fit HDF5's chunk cache are staged by the
     * checked calls: host bytes then). */
    if (my_kind() == MEM_DEVICE && fapl_kind != FAPL_MPIO) {
        uint64_t dev = engine_bytes_of(file, true, true) - wd0;
        CHECK_MSG(dev == mine * 4, "%s rank %d: %llu bytes took a device route, expected %llu", name, rank,
                  (unsigned long long)dev, (unsigned long long)(mine * 4));
    }

    /* Read back into a buffer of sentinels: the selection comes back, the
     * rest is untouched. */
    MPI_Barrier(MPI_COMM_WORLD);
    buffer_fill(&b, 0xA5);
    uint64_t r0 = engine_bytes(file, false);
    CHECK(H5Dread(ds, H5T_NATIVE_UINT32, mspace, fspace, dxpl, b.ptr) >= 0);
    uint64_t read = engine_bytes(file, false) - r0;
    CHECK_MSG(read == mine * 4, "%s rank %d: the engine read %llu bytes, the selection has %llu", name, rank,
              (unsigned long long)read, (unsigned long long)(mine * 4));
    buffer_get(&b, 0, host, bytes);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < total; i++) {
        uint32_t want = owns(d, &l, rank, i) ? value_at(i, salt) : 0xA5A5A5A5u;
        wrong += host[i] != want;
    }
    CHECK_MSG(wrong == 0, "%s rank %d: %llu elements read back wrong", name, rank, (unsigned long long)wrong);

    H5Pclose(dxpl);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    CHECK(H5Fclose(file) >= 0);
    H5Pclose(fapl);
    buffer_free(&b);
    free(host);
    MPI_Barrier(MPI_COMM_WORLD);
    check_with_sec2(path, "x", total, salt, H5T_NATIVE_UINT32, 4);
    bool ok = all_true(test_failures == failures_before);
    if (rank == 0)
        printf("%-4s %s (%d ranks, %s buffers)\n", ok ? "ok" : "FAIL", name, nranks,
               buffers == BUF_HOST ? "host" : buffers == BUF_DEVICE ? "device" : "mixed");
}

/* ---- the other cases ---- */

/* A whole 1-D dataset written collectively by slabs with a dcpl / dxpl
 * variant; returns the per-rank H5Dwrite status agreed or not. */
typedef struct variant {
    const char *name;
    hid_t file_type;
    bool deflate;
    bool selection_off;
    /* With device memory on some rank: HDF5 would touch it with the CPU
     * (conversion, filters): H5Dwrite under the preload library, whose
     * H5Dwrite stages it, else H5Dwrite_gds; or the driver itself refuses it
     * on every rank (selection I/O off: MPI derived datatypes), unless
     * preloaded. */
    bool device_needs_preload;
    bool device_refused_unless_preloaded;
} variant_t;

static void run_variant(const variant_t *v)
{
    char path[512];
    path_of(path, sizeof path, v->name);
    hsize_t n = (hsize_t)nranks * 10007, per = 10007;
    uint32_t salt = 4242;
    int failures_before = test_failures;
    hid_t fapl = make_fapl();
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (v->deflate) {
        hsize_t chunk = 4096;
        H5Pset_chunk(dcpl, 1, &chunk);
        H5Pset_deflate(dcpl, 1);
    }
    hid_t ds = H5Dcreate2(file, "x", v->file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(ds >= 0);
    hsize_t start = (hsize_t)rank * per;
    hid_t fspace = H5Scopy(space);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &per, NULL);
    hid_t mspace = H5Screate_simple(1, &per, NULL);
    uint32_t *host = malloc(per * 4);
    for (hsize_t i = 0; i < per; i++)
        host[i] = value_at(start + i, salt);
    test_buffer_t b = buffer_alloc(my_kind(), per * 4);
    buffer_put(&b, 0, host, per * 4);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    if (v->selection_off)
        H5Pset_selection_io(dxpl, H5D_SELECTION_IO_MODE_OFF);
    bool any_device = !all_true(my_kind() != MEM_DEVICE);
    bool preloaded = fapl_kind == FAPL_MPIO;
    /* Without the preload library, a program whose device buffer HDF5
     * would touch calls H5Dwrite_gds (libh5gds), which stages it. */
    bool checked = v->device_needs_preload && !preloaded;
    herr_t rc;
    H5E_BEGIN_TRY
    {
        rc = checked ? H5Dwrite_gds(ds, H5T_NATIVE_UINT32, mspace, fspace, dxpl, b.ptr)
                     : H5Dwrite(ds, H5T_NATIVE_UINT32, mspace, fspace, dxpl, b.ptr);
    }
    H5E_END_TRY;
    if (checked && rc >= 0 && my_kind() == MEM_DEVICE)
        CHECK_MSG(H5FD_gds_last_route() == H5FD_GDS_ROUTE_HOST_STAGED, "%s rank %d: H5Dwrite_gds route %s",
                  v->name, rank, H5FD_gds_route_name(H5FD_gds_last_route()));
    bool must_fail = v->device_refused_unless_preloaded && any_device && !preloaded;
    CHECK_MSG((rc < 0) == must_fail, "%s rank %d: H5Dwrite returned %d, expected %s", v->name, rank, (int)rc,
              must_fail ? "a failure" : "success");
    H5Pclose(dxpl);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    CHECK(H5Fclose(file) >= 0);
    H5Pclose(fapl);
    buffer_free(&b);
    free(host);
    MPI_Barrier(MPI_COMM_WORLD);
    if (!must_fail)
        check_with_sec2(path, "x", n, salt, H5T_NATIVE_UINT64, 8);
    bool ok = all_true(test_failures == failures_before);
    if (rank == 0)
        printf("%-4s %s%s\n", ok ? "ok" : "FAIL", v->name, must_fail ? " (refused on every rank, as it must)" : "");
}

/* H5Dset_extent on a chunked dataset, then a collective write of the new part. */
/* A file written serially, its storage partly unallocated (a contiguous
 * dataset never written, a chunked one with one chunk written), opened
 * read-only: parallel HDF5 does not allocate at open then, and fills what is
 * missing with the CPU, so a device buffer must be staged (H5Dread_gds, or
 * the preload library's H5Dread) and the fill values arrive on every rank. */
/* A collective read of elements [start, start + per) of the 1-D uint32
 * dataset `name` into a buffer of this rank's kind, copied into `got`
 * (host memory): H5Dread under the preload library, H5Dread_gds otherwise. */
static herr_t read_my_slab(hid_t file, const char *name, hid_t dapl, hsize_t start, hsize_t per, uint32_t *got)
{
    hid_t ds = H5Dopen2(file, name, dapl);
    hid_t fs = H5Dget_space(ds), ms = H5Screate_simple(1, &per, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &per, NULL);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    test_buffer_t b = buffer_alloc(my_kind(), per * 4);
    buffer_fill(&b, 0xEE);
    herr_t rc = fapl_kind == FAPL_MPIO ? H5Dread(ds, H5T_NATIVE_UINT32, ms, fs, dxpl, b.ptr)
                                       : H5Dread_gds(ds, H5T_NATIVE_UINT32, ms, fs, dxpl, b.ptr);
    buffer_get(&b, 0, got, per * 4);
    buffer_free(&b);
    H5Pclose(dxpl);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(ds);
    return rc;
}

static void run_readonly_unallocated(void)
{
    char path[512];
    path_of(path, sizeof path, "readonly-unallocated");
    int failures_before = test_failures;
    hsize_t n = (hsize_t)nranks * 5000, chunk = 4096;
    if (rank == 0) {
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hid_t space = H5Screate_simple(1, &n, NULL);
        hid_t x = H5Dcreate2(f, "x", H5T_NATIVE_UINT32, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(dcpl, 1, &chunk);
        hid_t c = H5Dcreate2(f, "c", H5T_NATIVE_UINT32, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        uint32_t *first = malloc(chunk * 4);
        for (hsize_t i = 0; i < chunk; i++)
            first[i] = value_at(i, 99);
        hid_t fs = H5Scopy(space), ms = H5Screate_simple(1, &chunk, NULL);
        hsize_t zero = 0;
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &zero, NULL, &chunk, NULL);
        CHECK(x >= 0 && c >= 0 && H5Dwrite(c, H5T_NATIVE_UINT32, ms, fs, H5P_DEFAULT, first) >= 0);
        free(first);
        H5Sclose(fs);
        H5Sclose(ms);
        H5Pclose(dcpl);
        H5Dclose(x);
        H5Dclose(c);
        H5Sclose(space);
        CHECK(H5Fclose(f) >= 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    hid_t fapl = make_fapl();
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK(file >= 0);
    hsize_t per = n / (hsize_t)nranks, start = (hsize_t)rank * per;
    const char *names[] = {"x", "c"};
    for (int k = 0; k < 2 && file >= 0; k++) {
        uint32_t *got = malloc(per * 4);
        CHECK_MSG(read_my_slab(file, names[k], H5P_DEFAULT, start, per, got) >= 0,
                  "readonly-unallocated %s rank %d: read failed", names[k], rank);
        hsize_t wrong = 0;
        for (hsize_t i = 0; i < per; i++) {
            hsize_t at = start + i;
            /* "x": the fill value (0) everywhere. "c": the written chunk only;
             * HDF5 1.14.5's parallel read leaves the elements of chunks that
             * were never allocated untouched, under its own mpio driver too */
            if (k == 1 && at >= chunk)
                continue;
            wrong += got[i] != (k == 1 ? value_at(at, 99) : 0);
        }
        CHECK_MSG(wrong == 0, "readonly-unallocated %s rank %d: %llu elements wrong", names[k], rank,
                  (unsigned long long)wrong);
        free(got);
    }
    if (file >= 0)
        CHECK(H5Fclose(file) >= 0);
    H5Pclose(fapl);
    bool ok = all_true(test_failures == failures_before);
    if (rank == 0)
        printf("%-4s readonly-unallocated (fill values through the CPU: device buffers staged)\n", ok ? "ok" : "FAIL");
}

/* A file opened read-only whose chunks HDF5's chunk cache holds (16 KiB
 * here): HDF5 turns selection I/O off for such reads (cause 0x40), so a
 * collective read reaches the driver with MPI derived datatypes, which it
 * hands to mpio (host buffers; the data right). With the dataset's chunk
 * cache off the reads are selections again: the engine moves every byte. */
static void run_readonly_small_chunks(void)
{
    char path[512];
    path_of(path, sizeof path, "readonly-small-chunks");
    int failures_before = test_failures;
    hsize_t per = 65536, n = (hsize_t)nranks * per, chunk = 4096;
    if (rank == 0) {
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hid_t space = H5Screate_simple(1, &n, NULL);
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(dcpl, 1, &chunk);
        hid_t c = H5Dcreate2(f, "c", H5T_NATIVE_UINT32, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        uint32_t *all = malloc(n * 4);
        for (hsize_t i = 0; i < n; i++)
            all[i] = value_at(i, 7);
        CHECK(c >= 0 && H5Dwrite(c, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) >= 0);
        free(all);
        H5Pclose(dcpl);
        H5Dclose(c);
        H5Sclose(space);
        CHECK(H5Fclose(f) >= 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    hid_t fapl = make_fapl();
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK(file >= 0);
    hsize_t start = (hsize_t)rank * per;
    for (int cache_off = buffers == BUF_HOST ? 0 : 1; cache_off < 2 && file >= 0; cache_off++) {
        hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
        if (cache_off)
            H5Pset_chunk_cache(dapl, 0, 0, 1.0);
        uint32_t *got = malloc(per * 4);
        uint64_t before = engine_bytes(file, false);
        herr_t rc = read_my_slab(file, "c", dapl, start, per, got);
        uint64_t moved = engine_bytes(file, false) - before;
        CHECK_MSG(rc >= 0, "readonly-small-chunks (chunk cache %s) rank %d: read failed", cache_off ? "off" : "on",
                  rank);
        hsize_t wrong = 0;
        for (hsize_t i = 0; i < per; i++)
            wrong += got[i] != value_at(start + i, 7);
        CHECK_MSG(wrong == 0, "readonly-small-chunks (chunk cache %s) rank %d: %llu elements wrong",
                  cache_off ? "off" : "on", rank, (unsigned long long)wrong);
        if (cache_off)
            CHECK_MSG(moved >= per * 4, "readonly-small-chunks, chunk cache off, rank %d: the engine read %llu bytes, "
                      "not %llu", rank, (unsigned long long)moved, (unsigned long long)(per * 4));
        free(got);
        H5Pclose(dapl);
    }
    if (file >= 0)
        CHECK(H5Fclose(file) >= 0);
    H5Pclose(fapl);
    bool ok = all_true(test_failures == failures_before);
    if (rank == 0)
        printf("%-4s readonly-small-chunks (the chunk cache's reads through mpio; off: the engine)\n", ok ? "ok" : "FAIL");
}

static void run_extend(void)
{
    char path[512];
    path_of(path, sizeof path, "extend");
    int failures_before = test_failures;
    hsize_t per = 3000, dims = (hsize_t)nranks * per, maxd = H5S_UNLIMITED, chunk = 1024;
    hid_t fapl = make_fapl();
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hid_t space = H5Screate_simple(1, &dims, &maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t ds = H5Dcreate2(file, "x", H5T_NATIVE_UINT32, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    uint32_t *host = malloc(per * 4);
    test_buffer_t b = buffer_alloc(my_kind(), per * 4);
    hid_t mspace = H5Screate_simple(1, &per, NULL);
    for (int round = 0; round < 2; round++) {
        hsize_t newdims = (hsize_t)(round + 1) * nranks * per;
        CHECK(H5Dset_extent(ds, &newdims) >= 0);
        hid_t fspace = H5Dget_space(ds);
        hsize_t start = (hsize_t)round * nranks * per + (hsize_t)rank * per;
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &per, NULL);
        for (hsize_t i = 0; i < per; i++)
            host[i] = value_at(start + i, 99);
        buffer_put(&b, 0, host, per * 4);
        CHECK(H5Dwrite(ds, H5T_NATIVE_UINT32, mspace, fspace, dxpl, b.ptr) >= 0);
        H5Sclose(fspace);
    }
    H5Sclose(mspace);
    H5Pclose(dxpl);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    CHECK(H5Fclose(file) >= 0);
    H5Pclose(fapl);
    buffer_free(&b);
    free(host);
    MPI_Barrier(MPI_COMM_WORLD);
    check_with_sec2(path, "x", 2 * (uint64_t)nranks * per, 99, H5T_NATIVE_UINT32, 4);
    bool ok = all_true(test_failures == failures_before);
    if (rank == 0)
        printf("%-4s extend (H5Dset_extent, collective writes of the new part)\n", ok ? "ok" : "FAIL");
}

/* The last rank cannot write (RLIMIT_FSIZE below its part): a collective
 * H5Dwrite fails on every rank, an independent one only there; no hang, and
 * the file closes. */
static void run_failing_rank(void)
{
    char path[512];
    path_of(path, sizeof path, "failing-rank");
    int failures_before = test_failures;
    hsize_t per = 262144, n = (hsize_t)nranks * per; /* 1 MiB per rank */
    int victim = nranks - 1;
    hid_t fapl = make_fapl();
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t ds = H5Dcreate2(file, "x", H5T_NATIVE_UINT32, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hsize_t start = (hsize_t)rank * per;
    hid_t fspace = H5Scopy(space);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &per, NULL);
    hid_t mspace = H5Screate_simple(1, &per, NULL);
    test_buffer_t b = buffer_alloc(my_kind(), per * 4);
    buffer_fill(&b, 0x5A);
    H5Fflush(file, H5F_SCOPE_GLOBAL);
    for (int coll = 0; coll < 2; coll++) {
        hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
        H5Pset_dxpl_mpio(dxpl, coll ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);
        struct rlimit old;
        getrlimit(RLIMIT_FSIZE, &old);
        if (rank == victim) {
            struct rlimit lim = old;
            lim.rlim_cur = 4096; /* below every rank's part */
            setrlimit(RLIMIT_FSIZE, &lim);
        }
        herr_t rc;
        H5E_BEGIN_TRY
        {
            rc = H5Dwrite(ds, H5T_NATIVE_UINT32, mspace, fspace, dxpl, b.ptr);
        }
        H5E_END_TRY;
        if (rank == victim)
            setrlimit(RLIMIT_FSIZE, &old);
        bool must_fail = coll || rank == victim;
        CHECK_MSG((rc < 0) == must_fail, "%s write, rank %d: returned %d, expected %s",
                  coll ? "collective" : "independent", rank, (int)rc, must_fail ? "a failure" : "success");
        H5Pclose(dxpl);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    CHECK(H5Fclose(file) >= 0);
    H5Pclose(fapl);
    buffer_free(&b);
    bool ok = all_true(test_failures == failures_before);
    if (rank == 0)
        printf("%-4s failing rank %d (collective: every rank fails; independent: that rank only)\n",
               ok ? "ok" : "FAIL", victim);
}

/* H5Fset/get_mpi_atomicity, H5Pget_fapl_gds_mpio (and H5Pget_fapl_mpio
 * through the preload library) on a file of the driver. */
static void run_queries(void)
{
    char path[512];
    path_of(path, sizeof path, "queries");
    int failures_before = test_failures;
    hid_t fapl = make_fapl();
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file >= 0);
    /* Not collective: rank 0 alone asks (a collective call would hang here,
     * and the test time out). */
    if (rank == 0) {
        H5FD_gds_stats_t st;
        CHECK(H5FD_gds_mpio_is_file(file) > 0);
        CHECK(H5FD_gds_mpio_get_stats(file, &st) >= 0);
        CHECK(H5FD_gds_mpio_sync(file) >= 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    hbool_t flag = 0;
    CHECK(H5Fset_mpi_atomicity(file, 1) >= 0);
    CHECK(H5Fget_mpi_atomicity(file, &flag) >= 0 && flag);
    CHECK(H5Fset_mpi_atomicity(file, 0) >= 0);
    CHECK(H5Fget_mpi_atomicity(file, &flag) >= 0 && !flag);
    hid_t acc = H5Fget_access_plist(file);
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Info info = MPI_INFO_NULL;
    CHECK(H5Pget_fapl_gds_mpio(acc, &comm, &info) >= 0);
    int size = 0, cmp = MPI_UNEQUAL;
    if (comm != MPI_COMM_NULL) {
        MPI_Comm_size(comm, &size);
        MPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
        MPI_Comm_free(&comm);
    }
    CHECK(size == nranks && cmp == MPI_CONGRUENT);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    if (fapl_kind == FAPL_API) {
        /* HDF5's own H5Pget_fapl_mpio refuses another driver: cleanly */
        herr_t got;
        H5E_BEGIN_TRY
        {
            got = H5Pget_fapl_mpio(acc, &comm, NULL);
        }
        H5E_END_TRY;
        CHECK(got < 0);
    }
    if (fapl_kind == FAPL_MPIO) {
        /* the program's own H5Pget_fapl_mpio, answered by the preload library */
        comm = MPI_COMM_NULL;
        CHECK(H5Pget_fapl_mpio(acc, &comm, NULL) >= 0);
        size = 0;
        if (comm != MPI_COMM_NULL) {
            MPI_Comm_size(comm, &size);
            MPI_Comm_free(&comm);
        }
        CHECK(size == nranks);
    }
    H5Pclose(acc);
    /* a fapl of another driver is refused, cleanly */
    hid_t other = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_sec2(other);
    herr_t rc;
    H5E_BEGIN_TRY
    {
        rc = H5Pget_fapl_gds_mpio(other, &comm, &info);
    }
    H5E_END_TRY;
    CHECK(rc < 0);
    H5Pclose(other);
    CHECK(H5Fclose(file) >= 0);
    H5Pclose(fapl);
    bool ok = all_true(test_failures == failures_before);
    if (rank == 0)
        printf("%-4s queries (atomicity, H5Pget_fapl_gds_mpio)\n", ok ? "ok" : "FAIL");
}

/* H5Fcreate of `path` with `fapl`, its error stack silenced: checks that it
 * fails (`expect_fail`) or succeeds on this rank, and closes what opened. */
static void create_expecting(const char *path, hid_t fapl, bool expect_fail)
{
    hid_t file;
    H5E_BEGIN_TRY
    {
        file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    }
    H5E_END_TRY;
    CHECK_MSG((file < 0) == expect_fail, "rank %d: H5Fcreate returned %lld", rank, (long long)file);
    if (file >= 0)
        CHECK(H5Fclose(file) >= 0);
}

/* Settings one rank refuses (write_behind, set on rank 1 only): the open
 * fails on every rank, before mpio's collective open, without a hang. */
static void run_config_mismatch(void)
{
    char path[512];
    path_of(path, sizeof path, "config-mismatch");
    int failures_before = test_failures;
    hid_t fapl = make_fapl();
    if (rank == nranks - 1 && fapl_kind != FAPL_PLUGIN)
        CHECK(H5Pset_fapl_gds_mpio_config(fapl, "write_behind=1MiB") >= 0);
    create_expecting(path, fapl, nranks > 0 && fapl_kind != FAPL_PLUGIN);
    H5Pclose(fapl);
    bool ok = all_true(test_failures == failures_before);
    if (rank == 0)
        printf("%-4s settings refused by one rank: the open fails on every rank\n", ok ? "ok" : "FAIL");
}

/* One rank failing right after mpio's collective open (injected with
 * H5GDS_TEST_MPIO_FAIL_AFTER_OPEN, on the last rank): every rank's open
 * fails, none waits in the collective calls that follow. */
static void run_fail_after_open(void)
{
    char path[512], last[16];
    path_of(path, sizeof path, "fail-after-open");
    int failures_before = test_failures;
    snprintf(last, sizeof last, "%d", nranks - 1);
    setenv("H5GDS_TEST_MPIO_FAIL_AFTER_OPEN", last, 1);
    hid_t fapl = make_fapl();
    create_expecting(path, fapl, true);
    unsetenv("H5GDS_TEST_MPIO_FAIL_AFTER_OPEN");
    create_expecting(path, fapl, false); /* and the same file opens afterwards */
    H5Pclose(fapl);
    bool ok = all_true(test_failures == failures_before);
    if (rank == 0)
        printf("%-4s a rank failing after mpio's open: the open fails on every rank\n", ok ? "ok" : "FAIL");
}

static bool wanted(int argc, char **argv, int first, const char *name)
{
    if (first >= argc)
        return true;
    for (int i = first; i < argc; i++)
        if (!strcmp(argv[i], name) || !strncmp(name, argv[i], strlen(argv[i])))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    signal(SIGXFSZ, SIG_IGN); /* EFBIG instead (the failing-rank case) */
    if (getenv("H5GDS_TEST_DIR"))
        dir = getenv("H5GDS_TEST_DIR");
    int first = 1;
    for (; first < argc && !strncmp(argv[first], "--", 2); first++) {
        if (!strcmp(argv[first], "--device"))
            buffers = BUF_DEVICE;
        else if (!strcmp(argv[first], "--mixed"))
            buffers = BUF_MIXED;
        else if (!strcmp(argv[first], "--fapl") && first + 1 < argc) {
            first++;
            fapl_kind = !strcmp(argv[first], "mpio") ? FAPL_MPIO : !strcmp(argv[first], "plugin") ? FAPL_PLUGIN
                                                                                                  : FAPL_API;
        }
    }
    /* CUDA: on every rank that allocates device memory; all skip together. */
    bool gpu_ok = true;
    if (buffers != BUF_HOST)
        gpu_ok = all_true(my_kind() != MEM_DEVICE || gpu_init());
    else
        gpu_init(); /* pageable buffers only; the loader is there for classification */
    if (!gpu_ok) {
        if (rank == 0)
            printf("SKIP: no usable GPU on every rank (%s)\n", gpu_skip_reason);
        MPI_Finalize();
        return 77;
    }

    for (int d = D_SLAB1; d <= D_EMPTY0; d++)
        if (wanted(argc, argv, first, decomp_names[d]))
            for (int chunked = 0; chunked < 2; chunked++)
                for (int coll = 0; coll < 2; coll++)
                    run_decomp((decomp_t)d, chunked, coll);
    const variant_t variants[] = {
        {"convert", H5T_STD_U64LE, false, false, true, false},
        {"deflate", H5T_NATIVE_UINT32, true, false, true, false},
        /* selection I/O off, no conversion: a plain collective call with MPI
         * datatypes, refused with device buffers (HDF5 never touches them) */
        {"selection-off", H5T_NATIVE_UINT32, false, true, false, true},
        /* off with a conversion: HDF5 gathers with memcpy before the driver is
         * reached, so a device buffer must be staged first (H5Dwrite_gds) */
        {"selection-off-convert", H5T_STD_U64LE, false, true, true, false},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (wanted(argc, argv, first, variants[i].name))
            run_variant(&variants[i]);
    if (wanted(argc, argv, first, "readonly-unallocated"))
        run_readonly_unallocated();
    if (wanted(argc, argv, first, "readonly-small-chunks"))
        run_readonly_small_chunks();
    if (wanted(argc, argv, first, "extend"))
        run_extend();
    if (wanted(argc, argv, first, "failing-rank"))
        run_failing_rank();
    if (wanted(argc, argv, first, "queries"))
        run_queries();
    if (wanted(argc, argv, first, "config-mismatch"))
        run_config_mismatch();
    if (wanted(argc, argv, first, "fail-after-open"))
        run_fail_after_open();

    int mine = test_failures, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpio: %d ranks, %d failures over all ranks\n", nranks, all);
    H5close();
    MPI_Finalize();
    return all > 100 ? 100 : all;
}
