/*
 * The I/O engine: moves bytes between a buffer (host or GPU) and a file.
 *
 * It knows nothing of HDF5. The VFD layer opens one gds_file_t per HDF5
 * file and calls gds_file_read/gds_file_write with a file offset, a length
 * and a buffer; the engine classifies the buffer and picks a path:
 *
 *   host memory   -> posix_io (pread/pwrite, large reads split over the pool)
 *   device memory -> cufile_path (cuFile) when usable, else staged_path
 *                    (pinned ring + O_DIRECT, pipelined over the pool), or
 *                    the single bounce buffer of mode=posix.
 *
 * Failures are reported through gds_status_t (message + errno), never printed.
 */
#ifndef H5GDS_ENGINE_H
#define H5GDS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "H5FDgds.h" /* only for the shared enums and the stats struct */

/* The settings the engine uses (the VFD translates its config into this). */
typedef struct gds_engine_settings {
    H5FD_gds_mode_t mode;
    unsigned threads;
    size_t io_block_size;
    size_t alignment;
    size_t fs_block_size;
    H5FD_gds_switch_t direct;
    size_t staging_size;
    unsigned staging_count;
    size_t parallel_threshold;
    bool log;
    bool register_buffers; /* cuFile path: cuFileBufRegister each allocation once */
} gds_engine_settings_t;

/* An error: what failed, with errno when the OS said why. */
typedef struct gds_status {
    int err;          /* errno, or 0 */
    char msg[320];
} gds_status_t;

void gds_status_set(gds_status_t *st, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

typedef struct gds_file gds_file_t;

/* Takes over nothing: `fd` stays owned by the caller (the VFD); the engine
 * may open a second, O_DIRECT descriptor on `path` and owns that one. */
int gds_file_open(gds_file_t **out, const char *path, int fd, bool writable, const gds_engine_settings_t *cfg,
                  gds_status_t *st);
void gds_file_close(gds_file_t *file);

/* Whose buffer a request carries. Only the application's raw data can be in
 * device memory, and only it is counted in the statistics; HDF5's metadata
 * and the driver's own host buffers (its sieve window) are neither. */
typedef enum gds_data { GDS_DATA_DRIVER, GDS_DATA_RAW } gds_data_t;

/* Reads past the end of the file are zero-filled, in device memory too.
 * Return 0 on success, -1 with `st` filled. */
int gds_file_read(gds_file_t *file, uint64_t offset, size_t size, void *buf, gds_data_t data, gds_status_t *st);
int gds_file_write(gds_file_t *file, uint64_t offset, size_t size, const void *buf, gds_data_t data,
                   gds_status_t *st);

/* One piece of a vector request: a file range and the buffer it maps to. */
typedef struct gds_segment {
    uint64_t offset;
    size_t size;
    void *buf;
} gds_segment_t;

/* Raw data in several pieces at once (HDF5's vector I/O: the chunks of one
 * H5Dread). Device pieces of one CUDA context share one pool job, so many
 * small chunks keep every worker busy. Pieces must not overlap. */
int gds_file_read_vector(gds_file_t *file, size_t n, const gds_segment_t *segs, gds_status_t *st);
int gds_file_write_vector(gds_file_t *file, size_t n, const gds_segment_t *segs, gds_status_t *st);

void gds_file_get_stats(gds_file_t *file, H5FD_gds_stats_t *stats);
/* Counts raw data the driver served from memory (its sieve window): bytes
 * and calls, no time. */
void gds_file_count_host(gds_file_t *file, bool write, size_t size);

/* ---- buffer classification (buffer_kind.c) ---- */
typedef struct gds_buffer_info {
    H5FD_gds_memory_t kind;
    void *context;  /* CUcontext owning device/managed memory */
    int device;     /* device ordinal */
} gds_buffer_info_t;
/* Returns false when CUDA is loaded but could not say (the kind is then
 * reported as host): callers that would touch the memory with the CPU must
 * not rely on such an answer. */
bool gds_classify_buffer(const void *ptr, gds_buffer_info_t *info);

/* ---- plain POSIX helpers (posix_io.c): full transfers, EINTR and short
 * counts retried, at most 1 GiB per system call. ---- */
/* Reads up to `size`; returns bytes read (< size only at end of file) or -1. */
ssize_t gds_pread_full(int fd, void *buf, size_t size, uint64_t offset);
/* Writes all of `size` bytes or returns -1. */
int gds_pwrite_full(int fd, const void *buf, size_t size, uint64_t offset);

#endif
