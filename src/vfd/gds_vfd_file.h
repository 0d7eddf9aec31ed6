/*
 * The `gds` driver's open file and what the driver's files share:
 *   gds_vfd.c          the class table and the callbacks of an open file
 *   gds_vfd_fapl.c     the driver's registration and its file access lists
 *   gds_vfd_rw.c       single reads and writes (raw data, metadata)
 *   gds_vfd_vector.c   vector I/O (HDF5 1.14's selection I/O ends there)
 *   gds_vfd_queries.c  statistics and the public calls on an open file
 *   gds_vfd_held.c     held raw writes (gds_vfd_raw.h): recorded, started per batch
 * Each calls only files listed below it, never one above.
 */
#ifndef H5GDS_VFD_FILE_H
#define H5GDS_VFD_FILE_H

#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

#include "H5FDgds.h"
#include "gds_error.h"
#include "gds_hdf5.h"
#include "gds_sieve.h"

/* HDF5 addresses are unsigned 64-bit; files are addressed by off_t. */
#define GDS_MAXADDR (((haddr_t)1 << (8 * sizeof(off_t) - 1)) - 1)
#define GDS_ADDR_OVERFLOW(a) ((a) == HADDR_UNDEF || ((a) & ~(haddr_t)GDS_MAXADDR))
#define GDS_REGION_OVERFLOW(a, z) \
    (GDS_ADDR_OVERFLOW(a) || (z) > (size_t)GDS_MAXADDR || (haddr_t)((a) + (z)) < (a) || \
     GDS_ADDR_OVERFLOW((haddr_t)((a) + (z))))

typedef struct gds_vfd_file {
    H5FD_t pub;             /* must be first: HDF5 casts between the two */
    int fd;                 /* buffered descriptor; H5Fget_vfd_handle returns &fd */
    haddr_t eoa;
    haddr_t eof;
    dev_t device;
    ino_t inode;
    bool ignore_disabled_locks;
    H5FD_gds_config_t config;
    bool config_from_info;  /* opened with explicit driver info (not defaults/strings) */
    gds_file_t *engine;
    gds_sieve_t sieve;      /* small host-memory raw data (gds_sieve.h) */
    uint64_t device_memcpys; /* H5FD_CTL_MEM_COPY requests with device memory */
    bool held_lost;         /* a held raw write failed: eof counts bytes that never landed */
    char *name;
} gds_vfd_file_t;

/* An engine failure onto HDF5's error stack: the file, what failed, errno's text. */
#define engine_error(file, minor, st)                                                                      \
    GDS_ERROR(H5E_IO, (minor), "file '%s': %s%s%s", (file)->name, (st)->msg, (st)->err ? ": " : "",          \
              (st)->err ? strerror((st)->err) : "")

/* ---- registration and file access lists (gds_vfd_fapl.c) ---- */
/* The terminate callback: the engine's worker threads stop here. */
herr_t gds_vfd_term(void);
void *gds_vfd_fapl_get(H5FD_t *file);
void *gds_vfd_fapl_copy(const void *info);
herr_t gds_vfd_fapl_free(void *info);

/* ---- single reads and writes (gds_vfd_rw.c) ---- */
herr_t gds_vfd_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf);
herr_t gds_vfd_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf);
/* After H5Fstart_swmr_write: the sieve window written out and dropped. */
int gds_vfd_sieve_off_if_swmr(gds_vfd_file_t *file);
/* Before a large raw write ending at `end`: the file's space reserved up to
 * the end of allocation. */
void gds_vfd_reserve_ahead(gds_vfd_file_t *file, size_t size, haddr_t end);

#if H5GDS_HAVE_VFD_PLUGINS
/* ---- vector I/O (gds_vfd_vector.c) ---- */
herr_t gds_vfd_read_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                           size_t sizes[], void *bufs[]);
herr_t gds_vfd_write_vector(H5FD_t *file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                            size_t sizes[], const void *bufs[]);
#endif

/* ---- held raw writes (gds_vfd_held.c; the callers' side in gds_vfd_raw.h) ---- */
typedef struct gds_held_writes gds_held_writes_t;
/* Opens a hold on the calling thread (NULL: one is open, or no memory);
 * host_too: host buffers are held too (tests; the GPU write holds device
 * memory only). */
gds_held_writes_t *gds_vfd_hold_begin(gds_vfd_file_t *file, bool host_too);
/* A raw write (of device memory when `device`): 1 when recorded by the
 * thread's hold of `file`, 0 when no such hold takes it, -1 with `st`. */
int gds_vfd_held_record(gds_vfd_file_t *file, haddr_t addr, size_t size, const void *buf, bool device,
                        gds_status_t *st);
/* Before a metadata write of `file`: what its hold recorded is written and
 * what it started is waited for (failures kept for the hold's owner). */
void gds_vfd_held_before_metadata(gds_vfd_file_t *file);

/* ---- statistics (gds_vfd_queries.c) ---- */
void gds_vfd_file_stats(const gds_vfd_file_t *file, H5FD_gds_stats_t *stats);
/* One summary on stderr (the `stats` setting, H5GDS_STATS). */
void gds_vfd_print_stats(const gds_vfd_file_t *file);

#endif
