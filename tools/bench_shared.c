/*
 * h5gds-bench's shared-file methods, under mpirun with a parallel HDF5:
 * one file, one dataset, every rank its part, collective H5Dwrite/H5Dread.
 *   GDS-SHARED  the gds_mpio driver, the data buffer (device memory) as is
 *   MPIO-HOST   HDF5's mpio driver, the data copied to pageable host memory
 *               first (write) or after (read): what parallel-HDF5 codes do
 * Decomposition: each rank one 1-D slab (rank r: bytes [r*S, (r+1)*S)), or
 * with --boundary N a 2-D dataset of S/N rows of ranks x N elements where
 * rank r owns columns [r*N, (r+1)*N) of every row: rank boundaries every N
 * elements in the file (N = 4099: almost every file-system block holds the
 * bytes of two ranks).
 * Durable write: H5Fcreate .. H5Fclose, then every rank fsyncs the file.
 */
#include "bench.h"

const char *shared_decomposition(void)
{
    static char text[96];
    if (opt.boundary)
        snprintf(text, sizeof text, "2-D blocks, rank boundaries every %zu elements", opt.boundary);
    else
        snprintf(text, sizeof text, "1-D slabs");
    return text;
}

#ifdef H5GDS_BENCH_MPIO
typedef struct shared_io {
    hid_t fapl, dxpl, file_space, mem_space;
} shared_io_t;

/* The fapl and dxpl of method m, the file's dataspace with this rank's part
 * selected and the memory dataspace of the buffer (b->size elements). */
static shared_io_t shared_begin(method_t m, buffers_t *b, const char *cfg)
{
    shared_io_t io;
    io.fapl = H5Pcreate(H5P_FILE_ACCESS);
    herr_t rc;
    if (m == M_GDS_SHARED)
        rc = H5Pset_fapl_gds_mpio(io.fapl, par_comm, MPI_INFO_NULL) < 0 ? -1
                                                                         : H5Pset_fapl_gds_mpio_config(io.fapl, cfg);
    else
        rc = H5Pset_fapl_mpio(io.fapl, par_comm, MPI_INFO_NULL);
    if (rc < 0)
        fail("cannot set up the %s file access (see the HDF5 error above)", method_names[m]);
    io.dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (H5Pset_dxpl_mpio(io.dxpl, H5FD_MPIO_COLLECTIVE) < 0)
        fail("cannot make the transfers collective");
    hsize_t nranks = (hsize_t)par.size, rank = (hsize_t)par.rank;
    if (opt.boundary) {
        hsize_t n = opt.boundary, rows = b->size / n;
        hsize_t dims[2] = {rows, nranks * n}, start[2] = {0, rank * n}, count[2] = {rows, n};
        io.file_space = H5Screate_simple(2, dims, NULL);
        rc = H5Sselect_hyperslab(io.file_space, H5S_SELECT_SET, start, NULL, count, NULL);
    }
    else {
        hsize_t dims[1] = {nranks * b->size}, start[1] = {rank * b->size}, count[1] = {b->size};
        io.file_space = H5Screate_simple(1, dims, NULL);
        rc = H5Sselect_hyperslab(io.file_space, H5S_SELECT_SET, start, NULL, count, NULL);
    }
    hsize_t mem_dims[1] = {b->size};
    io.mem_space = H5Screate_simple(1, mem_dims, NULL);
    if (io.file_space < 0 || io.mem_space < 0 || rc < 0)
        fail("cannot select this rank's part of the shared dataset");
    return io;
}

static void shared_end(shared_io_t *io)
{
    H5Sclose(io->mem_space);
    H5Sclose(io->file_space);
    H5Pclose(io->dxpl);
    H5Pclose(io->fapl);
}

double timed_write_shared(method_t m, buffers_t *b, const char *cfg)
{
    shared_io_t io = shared_begin(m, b, cfg);
    hid_t dcpl = bench_dcpl(b->size);
    /* a new file each time; deleting the previous one is not timed */
    if (par.rank == 0)
        unlink(files[3]);
    sync();
    par_barrier();
    double t0 = now();
    void *buf = write_source(m, b);
    hid_t f = H5Fcreate(files[3], H5F_ACC_TRUNC, H5P_DEFAULT, io.fapl);
    if (f < 0)
        fail("cannot create the shared file %s (see the HDF5 error above)", files[3]);
    hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_UCHAR, io.file_space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0 || H5Dwrite(d, H5T_NATIVE_UCHAR, io.mem_space, io.file_space, io.dxpl, buf) < 0)
        fail("%s: writing %zu bytes to %s failed (disk full?)", method_names[m], b->size, files[3]);
    H5Dclose(d);
    if (H5Fclose(f) < 0)
        fail("%s: closing %s failed (disk full?)", method_names[m], files[3]);
    /* durable: each rank's bytes (on a parallel file system, each client's) */
    fsync_path(files[3]);
    double t = now() - t0;
    H5Pclose(dcpl);
    shared_end(&io);
    return t;
}

double timed_read_shared(method_t m, buffers_t *b, const char *cfg)
{
    shared_io_t io = shared_begin(m, b, cfg);
    void *buf = io_buffer(m, b);
    par_barrier();
    double t0 = now();
    hid_t f = H5Fopen(files[3], H5F_ACC_RDONLY, io.fapl);
    if (f < 0)
        fail("cannot open the shared file %s (see the HDF5 error above)", files[3]);
    hid_t d = H5Dopen2(f, "data", H5P_DEFAULT);
    if (d < 0 || H5Dread(d, H5T_NATIVE_UCHAR, io.mem_space, io.file_space, io.dxpl, buf) < 0)
        fail("%s: reading %s failed", method_names[m], files[3]);
    H5Dclose(d);
    H5Fclose(f);
    read_finish(b, buf);
    double t = now() - t0;
    shared_end(&io);
    return t;
}
#else
/* Not reached: main refuses the shared methods in a build without gds_mpio. */
double timed_write_shared(method_t m, buffers_t *b, const char *cfg)
{
    (void)b, (void)cfg;
    fail("%s needs a build with parallel HDF5 >= 1.14 and gds_mpio", method_names[m]);
}
double timed_read_shared(method_t m, buffers_t *b, const char *cfg)
{
    (void)b, (void)cfg;
    fail("%s needs a build with parallel HDF5 >= 1.14 and gds_mpio", method_names[m]);
}
#endif
