/*
 * The gds_mpio driver (include/H5FDgds_mpio.h): HDF5's mpio driver opened
 * underneath for everything but raw data, the gds engine for raw data.
 */
#ifndef H5GDS_MPIO_INTERNAL_H
#define H5GDS_MPIO_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <mpi.h>

#include <hdf5.h>
#include <H5FDdevelop.h>

#include "H5FDgds_mpio.h"
#include "../engine/engine.h"

#if !defined(H5_HAVE_PARALLEL)
#error "gds_mpio needs an HDF5 built with parallel support (H5_HAVE_PARALLEL)"
#endif

/* HDF5 1.14's API-context getters (src/H5CXprivate.h, exported by libhdf5):
 * the only way a driver learns the transfer mode of the call in progress
 * (H5D may have turned a collective request into an independent one) and
 * the MPI datatypes H5Dmpio put there for a collective plain read/write.
 * HDF5's own subfiling driver reads them the same way. */
herr_t H5CX_get_io_xfer_mode(H5FD_mpio_xfer_t *io_xfer_mode);
herr_t H5CX_get_mpi_coll_datatypes(MPI_Datatype *btype, MPI_Datatype *ftype);

/* An open file. The first members repeat the layout of HDF5's H5FD_mpio_t
 * (src/H5FDmpio.c): H5Fset_mpi_atomicity / H5Fget_mpi_atomicity cast the
 * top driver's file to that struct and call MPI_File_set_atomicity on its
 * handle; with this prefix they act on the MPI file of the mpio driver
 * underneath, as they would under mpio. */
typedef struct gds_mpio_file {
    H5FD_t pub;        /* must be first */
    MPI_File f;        /* the inner mpio driver's handle (mirror of H5FD_mpio_t) */
    MPI_Comm comm;     /* the inner driver's communicator (not ours to free) */
    MPI_Info info;     /* the inner driver's info (not ours to free) */
    int mpi_rank;
    int mpi_size;
    /* ---- ours ---- */
    H5FD_t *inner;           /* HDF5's mpio driver on the same file */
    const H5FD_class_t *icls; /* its class: callbacks called directly keep the API context */
    MPI_Comm agree;          /* private duplicate: status agreement of collective raw transfers */
    int fd;                  /* buffered descriptor handed to the engine */
    gds_file_t *engine;      /* raw data: own O_DIRECT descriptor / cuFile handle */
    H5FD_gds_config_t config;
    bool config_from_info;
    bool writable;
    char *name;
    uint64_t forwarded_bytes; /* raw bytes handed to mpio (collective, MPI derived datatypes, host buffers) */
    uint64_t forwarded_calls;
} gds_mpio_file_t;

extern const H5FD_class_t H5FD_gds_mpio_class;

/* Errors under the "h5gds-mpio" class. */
void gds_mpio_error(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define MPIO_ERROR(major, minor, ...) gds_mpio_error(__func__, __LINE__, (major), (minor), __VA_ARGS__)

/* The driver id (registered on first use; shares the id of a plugin copy). */
hid_t gds_mpio_driver_id(void);


/* The open file of a file id that uses this driver (NULL + error otherwise).
 * Not collective (no property list of the file is made). */
gds_mpio_file_t *gds_mpio_file_of(hid_t file_id);

/* A fapl property that get_handle fills with the file's struct (the same
 * layout in every copy of this library built from one source). */
#define GDS_MPIO_SELF_PROP "h5gds_mpio_file"

#endif
