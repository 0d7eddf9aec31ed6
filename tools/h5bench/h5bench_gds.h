/*
 * h5gds's additions to h5bench's write/read kernels (h5bench_write,
 * h5bench_read of github.com/hpc-io/h5bench, not part of this repository):
 * tools/h5bench/apply.py inserts calls to these at a few places of their
 * sources, tools/h5bench/build.sh compiles the result with this file.
 *
 * Environment of the ranks:
 *   H5GDS_H5BENCH_FAPL    gds_mpio (default): the shared file through the gds_mpio
 *                         driver (H5Pset_fapl_gds_mpio, same communicator and
 *                         info); mpio: HDF5's mpio driver, as h5bench itself does
 *   H5GDS_H5BENCH_MEMORY  device (default): the 8 particle arrays in GPU memory
 *                         (cuMemAlloc, the GPU of the node-local rank modulo the GPUs),
 *                         H5Dwrite/H5Dread get device pointers; host: h5bench's own
 *                         malloc'd arrays
 *   H5GDS_H5BENCH_VERIFY  1: after an h5bench_read of the CONTIG_1D pattern,
 *                         check id_1[i] == i and id_2[i] == 2i of every rank's
 *                         particles (what h5bench_write's contiguous patterns write)
 * Device memory needs what moves device memory: the contiguous memory patterns
 * (CONTIG_CONTIG_*; compound ones make HDF5 convert types with the CPU), no
 * compression, no file per process (sec2 under it); anything else is refused.
 */
#ifndef H5BENCH_GDS_H
#define H5BENCH_GDS_H

#include <mpi.h>

#include <hdf5.h>

#include "h5bench_util.h"

/* In place of H5Pset_fapl_mpio(fapl, comm, info). */
herr_t h5bench_gds_set_fapl(hid_t fapl, MPI_Comm comm, MPI_Info info);

/* h5bench_write, after its data is prepared: with device memory, the
 * arrays of `data` (a data_contig_md of `pattern`) move to the GPU. */
void h5bench_gds_prepare_write(const bench_params *params, void *data);
/* ... before it frees `data`: the device arrays are freed (and NULL). */
void h5bench_gds_release_write(const bench_params *params, void *data);

/* h5bench_read, after BUF_STRUCT is allocated: device arrays instead. */
void h5bench_gds_prepare_read(const bench_params *params, data_contig_md *buf);
/* ... after the reads, before BUF_STRUCT is freed: the optional check,
 * then the device arrays are freed. */
void h5bench_gds_finish_read(const bench_params *params, data_contig_md *buf);

#endif
