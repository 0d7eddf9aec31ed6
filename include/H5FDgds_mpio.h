/*
 * h5gds-mpio: the `gds_mpio` HDF5 virtual file driver, parallel HDF5 from GPUs.
 *
 * One shared HDF5 file, opened by every rank of a communicator as with HDF5's
 * mpio driver (H5Pset_fapl_mpio), whose raw data moves between GPU (or host)
 * memory and the file through the gds engine (cuFile or the staged O_DIRECT
 * pipeline) instead of MPI-IO. Metadata, the end of allocation and of file,
 * truncation, flushing, closing and every MPI query of the library go to
 * HDF5's own mpio driver, opened underneath on the same file: collective
 * metadata, H5Pset_coll_metadata_write, H5Pset_all_coll_metadata_ops,
 * H5Dset_extent and parallel flush/close behave exactly as under mpio.
 *
 * Unmodified parallel-HDF5 programs:
 *   - HDF5_DRIVER=gds_mpio (plugin, HDF5 >= 1.14; communicator MPI_COMM_WORLD,
 *     settings in HDF5_DRIVER_CONFIG), or
 *   - LD_PRELOAD=libh5gds_mpio_preload.so: H5Pset_fapl_mpio(fapl, comm, info)
 *     becomes H5Pset_fapl_gds_mpio(fapl, comm, info) with the same arguments,
 *     and H5Pget_fapl_mpio answers for either driver.
 *
 * Requires HDF5 >= 1.14 built with parallel support (H5_HAVE_PARALLEL) and
 * the MPI that HDF5 was built with. Link -lh5gds_mpio -lhdf5 and MPI.
 */
#ifndef H5FDgds_mpio_H
#define H5FDgds_mpio_H

#include <mpi.h>

#include <H5FDgds.h>

#ifdef __cplusplus
extern "C" {
#endif

/* VFD value and name of the driver. The value is in the range HDF5 leaves
 * to drivers not registered with The HDF Group (256-511). */
#define H5FD_GDS_MPIO_VALUE 511
#define H5FD_GDS_MPIO_NAME "gds_mpio"
#define H5FD_GDS_MPIO (H5FD_gds_mpio_init())

/* Returns the driver id, registering the driver on first use (negative on error). */
H5GDS_API hid_t H5FD_gds_mpio_init(void);

/* The fapl uses the gds_mpio driver over `comm` (duplicated; MPI_COMM_NULL
 * refused) with MPI-IO hints `info` (duplicated; MPI_INFO_NULL allowed), as
 * H5Pset_fapl_mpio. Engine settings: defaults + H5GDS_CONFIG, or those of
 * H5Pset_fapl_gds_mpio_config. */
H5GDS_API herr_t H5Pset_fapl_gds_mpio(hid_t fapl_id, MPI_Comm comm, MPI_Info info);

/* Like H5Pget_fapl_mpio: `comm` and `info` (either may be NULL) receive
 * duplicates the caller frees (MPI_Comm_free, MPI_Info_free; an info is
 * MPI_INFO_NULL when none was set). Fails if the fapl uses another driver. */
H5GDS_API herr_t H5Pget_fapl_gds_mpio(hid_t fapl_id, MPI_Comm *comm /*out*/, MPI_Info *info /*out*/);

/* Engine settings of a gds_mpio fapl (call after H5Pset_fapl_gds_mpio):
 * the serial driver's "key=value,..." string (README, Configuration) applied
 * on top of the defaults and H5GDS_CONFIG. Every rank must give the same
 * settings. Malformed text fails naming the key; the fapl is unchanged. */
H5GDS_API herr_t H5Pset_fapl_gds_mpio_config(hid_t fapl_id, const char *config);
/* The same settings as a whole structure (H5FD_gds_config_init first). */
H5GDS_API herr_t H5Pset_fapl_gds_mpio_config_struct(hid_t fapl_id, const H5FD_gds_config_t *config);
H5GDS_API herr_t H5Pget_fapl_gds_mpio_config(hid_t fapl_id, H5FD_gds_config_t *config /*out*/);

/* This rank's statistics of an open file of the gds_mpio driver (the raw
 * data this rank moved through the engine, by route; metadata is mpio's and
 * not counted). Not collective. */
H5GDS_API herr_t H5FD_gds_mpio_get_stats(hid_t file_id, H5FD_gds_stats_t *stats /*out*/);

/* Whether an open file uses the gds_mpio driver (positive), another driver
 * (0), or the id is not an open file (negative). Not collective: it asks no
 * property list of the file (H5Fget_access_plist duplicates the MPI
 * communicator, which is collective). */
H5GDS_API htri_t H5FD_gds_mpio_is_file(hid_t file_id);

/* Makes the raw data this rank wrote so far durable (engine drain + fsync of
 * its descriptor), without HDF5's metadata. Not collective. */
H5GDS_API herr_t H5FD_gds_mpio_sync(hid_t file_id);

#ifdef __cplusplus
}
#endif

#endif /* H5FDgds_mpio_H */
