/*
 * h5gds-bench under mpirun: ranks, their barrier and end, and the timed
 * write/read of a collection through libh5gds_mpi (one file per rank).
 */
#include "bench.h"

bench_ranks_t par = {false, 0, 1};
#ifdef H5GDS_BENCH_MPI
MPI_Comm par_comm = MPI_COMM_NULL;
#endif

/* Started by mpirun/mpiexec/srun? (Their launchers set one of these.) */
bool par_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return true;
    return false;
}

void par_barrier(void)
{
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        MPI_Barrier(par_comm);
#endif
}

int par_end(int rc)
{
#ifdef H5GDS_BENCH_MPI
    if (par.on)
        MPI_Finalize();
#endif
    return rc;
}

#ifdef H5GDS_BENCH_MPI
/* Under MPI: every rank writes its slab of dataset "data" (global size:
 * ranks x size) into its own file with libh5gds_mpi (with --chunk, as a
 * chunked dataset), which then writes the VDS master; durable like
 * timed_write (the rank file is fsync'd). */
double timed_write_mpi(method_t m, buffers_t *b, const char *cfg)
{
    hid_t fapl = make_fapl(m, cfg), dcpl = bench_dcpl(b->size);
    unlink(files[2]);
    if (par.rank == opt.inject_failure_rank) /* a directory in its place: this rank's create fails */
        mkdir(files[2], 0755);
    sync();
    par_barrier();
    double t0 = now();
    void *buf = write_source(m, b);
    hsize_t global = (hsize_t)b->size * (hsize_t)par.size, offset = (hsize_t)b->size * (hsize_t)par.rank,
            count = b->size;
    H5FD_gds_collection_t *c = H5FD_gds_mpi_begin(par_comm, files[0], fapl);
    if (!c) /* the library printed the error stack */
        fail_all("cannot start the collection %s", files[0]);
    herr_t rc = H5FD_gds_mpi_write_dcpl(c, "data", H5T_NATIVE_UCHAR, 1, &global, &offset, &count, buf, dcpl);
    if (H5FD_gds_mpi_finish(c) < 0 || rc < 0)
        fail_all("writing the collection %s failed (disk full?)", files[0]);
    fsync_path(files[2]);
    double t = now() - t0;
    H5Pclose(fapl);
    H5Pclose(dcpl);
    return t;
}

/* Under MPI: every rank reads its own slab back (from its own file). */
double timed_read_mpi(method_t m, buffers_t *b, const char *cfg)
{
    hid_t fapl = make_fapl(m, cfg);
    void *buf = io_buffer(m, b);
    hsize_t offset = (hsize_t)b->size * (hsize_t)par.rank, count = b->size;
    par_barrier();
    double t0 = now();
    if (H5FD_gds_mpi_read(par_comm, files[0], "data", H5T_NATIVE_UCHAR, 1, &offset, &count, buf, fapl) < 0)
        fail_all("reading the collection %s failed", files[0]);
    read_finish(b, buf);
    double t = now() - t0;
    H5Pclose(fapl);
    return t;
}
#endif
