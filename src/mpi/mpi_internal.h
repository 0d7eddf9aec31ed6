/*
 * Inside libh5gds_mpi (include/H5FDgds_mpi.h): what its parts share.
 *
 *   mpi_call.c        a collective call: errors, status agreement, communicator, fapl; device selection
 *   mpi_names.c       rank file names, dataset names, VDS escapes, hashes
 *   mpi_collection.c  the collection: begin, write (checks on every rank), finish
 *   mpi_master.c      rank 0's VDS master file
 *   mpi_read.c        reading a slab, from the rank's own file or through the master
 *
 * Every collective call follows the same pattern, so that no rank can leave
 * early while the others wait in MPI:
 *   1. local work (argument checks, file I/O); a failure is recorded, not
 *      returned;
 *   2. agreement: MPI_Allreduce of the status (how many ranks failed, the
 *      lowest failing rank), on a private duplicate of the communicator
 *      with MPI_ERRORS_RETURN;
 *   3. every rank takes the same branch on the agreed status.
 *
 * Errors: the rank that fails pushes the reason on HDF5's error stack, under
 * the "h5gds-mpi" class, on top of HDF5's own errors. Each API function is a
 * public entry point (gds_api_enter/leave): a failed call prints its stack
 * once, on every rank, unless the application turned HDF5's printing off.
 * The errors are kept aside (H5Eget_current_stack) while the call cleans
 * up, because every HDF5 API call clears the stack, and are put back at the
 * end, topped by one message that every rank gets: what failed and on which
 * rank.
 */
#ifndef H5GDS_MPI_INTERNAL_H
#define H5GDS_MPI_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "../engine/engine.h" /* gds_fnv1a */
#include "H5FDgds_mpi.h"
#include "gds_error.h"

#define MAX_DIMS H5S_MAX_RANK /* 32 */
#define TMP_SUFFIX ".h5gds-tmp"

/* ---- a collective call (mpi_call.c) ---- */

/* The MPI layer's own error class, through the shared helper (gds_error.h). */
extern hid_t gds_mpi_error_class;

#define ERR(major, minor, ...)                                                                                     \
    gds_error_push_class(&gds_mpi_error_class, "h5gds-mpi", __func__, __LINE__, (major), (minor), __VA_ARGS__)

/* State of one API call: a public entry point (gds_api_enter: HDF5's
 * automatic printing is off while it runs, the stack is reported once at
 * its end), the first failure's error stack kept aside, and a summary
 * pushed last. */
typedef struct api {
    const char *func;
    hid_t saved;        /* the error stack of the first local failure */
    char summary[1024]; /* what every rank reports when the call fails */
} api_t;

void api_enter(api_t *a, const char *func);
/* Call right after pushing an error: keeps the current stack (HDF5's errors
 * and ours) for the end of the call. Later errors of the same call are
 * consequences and are dropped. */
void api_keep(api_t *a);
void api_summary(api_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends the call: no HDF5 API call may follow (it would clear the stack). */
herr_t api_leave(api_t *a, bool failed);

/* Outcome of a collective step, the same on every rank. */
typedef struct agreement {
    int nfail; /* ranks that failed (0: all succeeded) */
    int first; /* the lowest failing rank */
} agreement_t;

/* MPI_Allreduce of the status: how many ranks failed, and the first one. An
 * MPI error counts as a failure of this rank. */
agreement_t agree(api_t *a, MPI_Comm comm, int rank, bool ok);
/* A copy of `fapl`, or the gds driver with its defaults for H5P_DEFAULT. */
hid_t fapl_for(api_t *a, hid_t fapl);
/* A private duplicate of `comm` with MPI_ERRORS_RETURN. */
MPI_Comm private_comm(api_t *a, MPI_Comm comm);

/* ---- names (mpi_names.c) ---- */

uint64_t hash_string(const char *s);
/* "<master without .h5>.rank<r>.h5" (malloc'ed) */
char *rank_file_path(const char *master, int rank);
const char *base_name(const char *path);
char *concat(const char *a, const char *b);
/* VDS source names are printf-like ("%b" = block number): '%' is doubled. */
char *vds_escape(const char *s);
/* Undoes vds_escape; false when the name uses printf-like patterns. */
bool vds_unescape(char *s);
/* Dataset names compare without their leading '/'. */
const char *relative_name(const char *name);

/* ---- the collection (mpi_collection.c) ---- */

/* What each rank contributes to a write, gathered on every rank. */
typedef struct slab_rec {
    int32_t ok;    /* the rank's own argument checks passed */
    int32_t ndims;
    uint64_t name_hash;
    uint64_t type_hash;
    uint64_t dims[MAX_DIMS];
    uint64_t offset[MAX_DIMS];
    uint64_t count[MAX_DIMS];
} slab_rec_t;

/* A dataset written in the collection. */
typedef struct dset_rec {
    struct dset_rec *next;
    char *name;
    hid_t type;      /* rank 0: the type of the virtual dataset */
    int ndims;
    hsize_t dims[MAX_DIMS];
    hsize_t *slabs;  /* rank 0: for each rank, offset[ndims] then count[ndims] */
} dset_rec_t;

struct H5FD_gds_collection_t {
    MPI_Comm comm;     /* private duplicate, MPI_ERRORS_RETURN */
    int rank, size;
    char *master_path;
    char *rank_path;
    hid_t fapl;
    hid_t file;        /* this rank's file */
    bool created;      /* this rank created rank_path */
    bool failed;       /* an I/O step failed on some rank: finish fails */
    slab_rec_t *recs;  /* size records, for the Allgather of each write */
    int *order;        /* size ranks, sorted by slab offset (overlap check) */
    dset_rec_t *dsets, **tail;
};

void dset_rec_free(dset_rec_t *d);
void collection_free(H5FD_gds_collection_t *c);
/* Removes this rank's file when it was created by this collection. */
void remove_rank_file(H5FD_gds_collection_t *c);

/* ---- the master (mpi_master.c) ---- */

/* Rank 0: checks that every rank file is visible, writes the master under a
 * temporary name, renames it into place. */
bool write_master(api_t *a, H5FD_gds_collection_t *c);

#endif
