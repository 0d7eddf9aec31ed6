/* The engine's per-file state, shared by the data paths (not by the VFD). */
#ifndef H5GDS_FILE_INTERNAL_H
#define H5GDS_FILE_INTERNAL_H

#include <pthread.h>

#include "engine.h"
#include "../cuda/cuda_loader.h"

struct gds_file {
    char *path;
    int fd;              /* buffered descriptor, owned by the VFD */
    int direct_fd;       /* O_DIRECT descriptor, owned here; -1 until needed or when unusable */
    bool writable;
    gds_engine_settings_t cfg;

    pthread_mutex_t lock;        /* guards the lazily decided state below */
    bool direct_decided;
    bool device_route_decided;
    H5FD_gds_route_t device_route;
    CUfileHandle_t cufile_handle; /* valid when device_route == CUFILE */

    /* statistics, updated with atomics */
    H5FD_gds_stats_t stats;
};

/* The O_DIRECT descriptor, opened on first use; -1 when O_DIRECT is unusable
 * for this file (then buffered I/O is used and counted as a fallback). */
int gds_file_direct_fd(gds_file_t *file);

/* Device data paths, over a list of segments whose buffers are device (or
 * managed) pointers of the context `ctx`. */
int gds_staged_transfer(gds_file_t *file, bool write, const gds_segment_t *segs, size_t nseg, void *ctx,
                        unsigned nworkers, unsigned ring_depth, bool allow_direct, gds_status_t *st);
int gds_cufile_transfer(gds_file_t *file, bool write, const gds_segment_t *segs, size_t nseg, void *ctx,
                        gds_status_t *st);
/* Registers the file with cuFile; false with a reason when it cannot be used. */
bool gds_cufile_register(gds_file_t *file, const char **why, char *why_buf, size_t why_size);

/* Block size for a request of `size` bytes over `workers` workers. */
size_t gds_block_for(const gds_engine_settings_t *cfg, size_t size, unsigned workers);

/* Makes `ctx` current on the calling thread (primary context of `device` if NULL). */
int gds_cuda_use_context(const gds_cuda_api_t *cu, void *ctx, gds_status_t *st);

/* Requests are cut into blocks aligned to multiples of `block` in the file,
 * so that interior block boundaries are O_DIRECT-aligned. Task t covers the
 * part of [offset, offset + size) inside the t-th such block. */
static inline size_t gds_task_count(uint64_t offset, size_t size, size_t block)
{
    return (size_t)((offset + size - 1) / block - offset / block + 1);
}

static inline void gds_task_range(uint64_t offset, size_t size, size_t block, size_t task, uint64_t *lo,
                                  uint64_t *hi)
{
    uint64_t b0 = (offset / block + task) * block, b1 = b0 + block;
    *lo = b0 > offset ? b0 : offset;
    *hi = b1 < offset + size ? b1 : offset + size;
}

/* The tasks of a list of segments: each segment is cut as above, and the
 * job's tasks are numbered across them (first[i] = first task of seg i). */
typedef struct gds_task_map {
    const gds_segment_t *seg;
    size_t nseg;
    size_t block;
    size_t *first; /* nseg + 1 entries; first[nseg] = number of tasks */
} gds_task_map_t;

/* Builds the map (allocates `first`); -1 when out of memory. */
int gds_task_map_init(gds_task_map_t *map, const gds_segment_t *seg, size_t nseg, size_t block);
void gds_task_map_free(gds_task_map_t *map);
/* The segment of `task` and the file range it covers. */
const gds_segment_t *gds_task_map_range(const gds_task_map_t *map, size_t task, uint64_t *lo, uint64_t *hi);

#define GDS_ROUND_DOWN(x, a) ((x) / (a) * (a))
#define GDS_ROUND_UP(x, a) (((x) + (a)-1) / (a) * (a))

#endif
