/*
 * h5gds-mpi: one rank per GPU, one file per rank, one logical dataset.
 *
 * Every rank of a communicator writes its slab of a global array, from GPU
 * or host memory, into its own file through the `gds` driver (no
 * coordination on the data path). H5FD_gds_mpi_finish then has rank 0 write
 * a small master file holding one HDF5 virtual dataset (VDS) per written
 * name, which maps every rank's slab into the global dataset. Any HDF5 1.10+
 * program (h5dump, h5py, ...) reads the master as one ordinary dataset.
 *
 *   master:     <dir>/<stem>.h5             (metadata only: the VDS mappings)
 *   rank r:     <dir>/<stem>.rank<r>.h5     (dataset `name` = rank r's slab)
 *
 * ("<stem>" is the master path without its ".h5" suffix; a master path with
 * another suffix keeps it: "out.hdf" -> "out.hdf.rank0.h5".) The master names
 * the rank files without a directory, so HDF5 finds them next to the master
 * wherever the set of files is moved. All ranks must see the same directory
 * (a shared file system) for the master to be written.
 *
 * Collective semantics: every function taking a communicator or a collection
 * must be called by all of its ranks, with the same name/dimensions/type.
 * The ranks agree on the outcome (MPI_Allreduce of a status): either every
 * rank returns success or every rank returns failure, never a hang. On
 * failure the HDF5 error stack of each rank says what failed and on which
 * rank (the failing rank also has the detailed HDF5 errors). As with HDF5's
 * own API calls, a failed call prints that stack once on each rank, unless
 * the application turned printing off (H5Eset_auto2(H5E_DEFAULT, NULL,
 * NULL)); then H5Eprint2(H5E_DEFAULT, stderr) shows it. The library never exits.
 * MPI errors on the library's private communicators are returned, not fatal.
 *
 * Files on failure: a master file exists only when every rank file was
 * written and closed successfully. H5FD_gds_mpi_begin removes an existing
 * master of the same path first (the rank files it then truncates would
 * otherwise be referenced by it); a failed collection removes its rank files.
 * The master is written as "<master>.h5gds-tmp" and renamed into place.
 *
 * Build: libh5gds_mpi (link -lh5gds_mpi -lh5gds -lhdf5 and MPI). It does not
 * link CUDA; device buffers go through H5Dwrite_gds/H5Dread_gds of libh5gds.
 */
#ifndef H5FDgds_mpi_H
#define H5FDgds_mpi_H

#include <mpi.h>

#include "H5FDgds.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct H5FD_gds_collection_t H5FD_gds_collection_t;

/* Collective. Starts a collection whose master file is `master_path` (same
 * string on every rank). Removes an existing master of that path, then each
 * rank r creates (truncates) "<stem>.rank<r>.h5" through `fapl` (H5P_DEFAULT:
 * the gds driver with its defaults; the property list is copied). The master
 * is later written through the same fapl. Returns NULL on every rank when
 * any rank fails (e.g. cannot create its file). */
H5GDS_API H5FD_gds_collection_t *H5FD_gds_mpi_begin(MPI_Comm comm, const char *master_path, hid_t fapl);

/* Collective. Each rank writes its slab [offset, offset+count) of a global
 * array of `ndims` (1..32) dimensions `global_dims` into its own file as
 * dataset `name` (intermediate groups are created). `buf` holds the slab
 * contiguously in C order (count[0] x ... x count[ndims-1] elements of
 * `type`), in host, pinned, managed or device memory (H5Dwrite_gds: device
 * buffers are never touched by the CPU). A rank may contribute an empty slab
 * (a zero in `count`; `buf` may then be NULL).
 *
 * Checked on all ranks before any I/O: arguments valid on every rank; the
 * same name, type, ndims and global_dims everywhere; every slab within
 * global_dims; slabs pairwise disjoint; `name` not yet written in this
 * collection. Such a failure leaves the collection usable. A failure during
 * the I/O (file not writable, disk full) marks the collection failed: later
 * writes fail at once and H5FD_gds_mpi_finish fails, writing no master. */
H5GDS_API herr_t H5FD_gds_mpi_write(H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                                    const hsize_t global_dims[], const hsize_t offset[], const hsize_t count[],
                                    const void *buf);

/* Collective. H5FD_gds_mpi_write with the layout of each rank's dataset
 * taken from `dcpl` (H5P_DEFAULT: contiguous, as H5FD_gds_mpi_write), e.g.
 * chunked (H5Pset_chunk with `ndims` dimensions, no chunk larger than the
 * rank's slab; an empty slab is written contiguous). Fill time never and
 * early allocation are set on a copy; the chunk cache is off, so chunks go
 * straight between `buf` and the file. The master's virtual dataset is the
 * same whatever the layout. */
H5GDS_API herr_t H5FD_gds_mpi_write_dcpl(H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                                         const hsize_t global_dims[], const hsize_t offset[],
                                         const hsize_t count[], const void *buf, hid_t dcpl);

/* Collective. Closes every rank file; when all closed without error, rank 0
 * checks that it sees every rank file, writes the master (one VDS per
 * written name, 1.10-compatible file format: readable by HDF5 1.10+) to a
 * temporary name and renames it to `master_path`. If any rank failed at any
 * point, every rank returns failure, no master exists and each rank removes
 * its rank file. Always frees the collection (also on failure). */
H5GDS_API herr_t H5FD_gds_mpi_finish(H5FD_gds_collection_t *c);

/* Collective. Each rank reads [offset, offset+count) of dataset `name` of the
 * collection at `master_path` into `buf` (host or device memory; `type` is
 * the memory type, converted as H5Dread does). When the slab is exactly the
 * one this rank (its rank in `comm`) wrote, it is read from the rank's own
 * file, with the GPU data path; otherwise through the master's VDS (HDF5
 * reads into pinned host memory, then it is copied to the device). Files
 * are opened with `fapl` (H5P_DEFAULT: the gds driver). A rank file the
 * requested slab needs that is missing is an error (HDF5 itself would
 * silently return fill values). Ranks may read different slabs, or nothing
 * (a zero in `count`). */
H5GDS_API herr_t H5FD_gds_mpi_read(MPI_Comm comm, const char *master_path, const char *name, hid_t type, int ndims,
                                   const hsize_t offset[], const hsize_t count[], void *buf, hid_t fapl);

/* Collective. Device selection helper: the rank within the node
 * (MPI_Comm_split_type MPI_COMM_TYPE_SHARED) modulo the number of CUDA
 * devices visible to the process (CUDA driver loaded with dlopen; when it is
 * missing or reports no device, the node-local rank itself). Use it as
 * cudaSetDevice(H5FD_gds_mpi_local_rank(comm)). Returns -1 on error. */
H5GDS_API int H5FD_gds_mpi_local_rank(MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* H5FDgds_mpi_H */
