/*
 * The gds_mpio driver (include/H5FDgds_mpio.h): HDF5's mpio driver opened
 * underneath for everything but raw data, the gds engine for raw data.
 * The open file and what the driver's files share:
 *   gds_mpio_vfd.c        the class table; the callbacks forwarded to mpio
 *                         (EOA/EOF, handle, flush, truncate, ctl)
 *   gds_mpio_fapl.c       registration, terminate, the plugin entry points,
 *                         file access lists (H5Pset/get_fapl_gds_mpio*)
 *   gds_mpio_open.c       open, close and delete (collective)
 *   gds_mpio_vector.c     vector and selection I/O
 *   gds_mpio_rw.c         single reads and writes
 *   gds_mpio_queries.c    the file behind a file id, statistics, sync
 *   gds_mpio_agree.c      the ranks' agreement on collective raw-data calls,
 *                         engine requests, drain
 *   gds_mpio_error.c      errors under the "h5gds-mpio" class
 * Each calls only files listed below it, never one above.
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

/* A fapl property that get_handle fills with the file's struct (the same
 * layout in every copy of this library built from one source). */
#define GDS_MPIO_SELF_PROP "h5gds_mpio_file"

/* ---- registration and file access lists (gds_mpio_fapl.c) ---- */
/* The driver id (registered on first use; shares the id of a plugin copy). */
hid_t gds_mpio_driver_id(void);
/* The terminate callback: the engine's worker threads stop here. */
herr_t gds_mpio_term(void);
void *gds_mpio_fapl_get(H5FD_t *file);
void *gds_mpio_fapl_copy(const void *info);
herr_t gds_mpio_fapl_free(void *info);

/* ---- open, close, delete (gds_mpio_open.c) ---- */
H5FD_t *gds_mpio_open(const char *name, unsigned flags, hid_t fapl_id, haddr_t maxaddr);
herr_t gds_mpio_close(H5FD_t *file);
herr_t gds_mpio_delete(const char *name, hid_t fapl);

/* ---- vector and selection I/O (gds_mpio_vector.c) ---- */
herr_t gds_mpio_read_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                            size_t sizes[], void *bufs[]);
herr_t gds_mpio_write_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                             size_t sizes[], const void *bufs[]);
herr_t gds_mpio_read_selection(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, size_t count, hid_t mem_spaces[],
                               hid_t file_spaces[], haddr_t offsets[], size_t element_sizes[], void *bufs[]);
herr_t gds_mpio_write_selection(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, size_t count, hid_t mem_spaces[],
                                hid_t file_spaces[], haddr_t offsets[], size_t element_sizes[], const void *bufs[]);

/* ---- single reads and writes (gds_mpio_rw.c) ---- */
herr_t gds_mpio_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf);
herr_t gds_mpio_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf);

/* ---- the file behind a file id, statistics (gds_mpio_queries.c) ---- */
/* The open file of a file id that uses this driver (NULL + error otherwise).
 * Not collective (no property list of the file is made). */
gds_mpio_file_t *gds_mpio_file_of(hid_t file_id);
/* One summary line on stderr (the `stats` setting, H5GDS_STATS). */
void gds_mpio_print_stats(const gds_mpio_file_t *file);

/* ---- collective raw data: agreement, engine requests (gds_mpio_agree.c) ---- */
/* Whether the call in progress is collective (its API context's transfer mode). */
bool gds_mpio_call_is_collective(void);
/* Collective: every rank gives its outcome, every rank learns the lowest
 * failing rank (or -1). An MPI failure counts as a failure here. */
int gds_mpio_agree_failure(gds_mpio_file_t *file, bool ok);
/* Collective: the bitwise OR of every rank's flags. */
int gds_mpio_agree_or(gds_mpio_file_t *file, int mine, int *all);
/* The engine request, then (collective) agreement on the outcome.
 * `prepared` false: this rank failed before it could issue the request (an
 * error is already pushed), and still joins the agreement. */
herr_t gds_mpio_raw_transfer(gds_mpio_file_t *file, hid_t dxpl, bool write, size_t n, const gds_segment_t *segs,
                             bool collective, bool prepared);
/* Waits for the engine's background writes of this rank. */
herr_t gds_mpio_drain(gds_mpio_file_t *file);

/* ---- errors (gds_mpio_error.c) ---- */
/* Errors under the "h5gds-mpio" class. */
void gds_mpio_error(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define MPIO_ERROR(major, minor, ...) gds_mpio_error(__func__, __LINE__, (major), (minor), __VA_ARGS__)
/* An engine failure onto the stack, with the rank and the file. */
void gds_mpio_engine_error(const gds_mpio_file_t *file, hid_t minor, const gds_status_t *st);

#endif
