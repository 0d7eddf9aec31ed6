/*
 * What the dispatcher (transfer.c) asks of a strategy, and the helpers the
 * strategies share: cutting requests into blocks (task_map.c).
 *
 * A strategy turns a list of segments into one pool job (a "part" of a
 * ticket) and says how to clean up after it; it does not wait for it. The
 * segments stay valid until `finish` runs.
 */
#ifndef H5GDS_STRATEGY_H
#define H5GDS_STRATEGY_H

#include "file_internal.h"
#include "worker_pool.h"

/* A pool job and what to free once it has ended. */
typedef struct gds_part {
    gds_job_t *job;
    void (*finish)(void *state);
    void *state;
} gds_part_t;

/* How a device job is ordered against the application's GPU work: the
 * workers make their first copy wait for `after` (NULL: nothing to wait for). */
typedef struct gds_device_order {
    CUevent after;
} gds_device_order_t;

/* Host memory: each segment's blocks as pool tasks of pread/pwrite. */
int gds_host_submit(gds_file_t *file, bool write, const gds_segment_t *segs, size_t nseg, gds_part_t *part,
                    gds_status_t *st);
/* Host memory, on the calling thread (large cached reads split over the pool). */
int gds_host_transfer(gds_file_t *file, bool write, uint64_t offset, size_t size, void *buf, bool raw,
                      gds_status_t *st);

/* When the staged path uses O_DIRECT: never (the posix bounce baseline), as
 * the `direct` setting says, or as it says and also for reads whose pages
 * are not cached (gds_request_t.read_once). */
typedef enum gds_direct_use { GDS_DIRECT_NEVER, GDS_DIRECT_CONFIG, GDS_DIRECT_IF_UNCACHED } gds_direct_use_t;

/* Device (or managed) memory of context `ctx`, through pinned staging rings. */
int gds_staged_submit(gds_file_t *file, bool write, const gds_segment_t *segs, size_t nseg, void *ctx,
                      const gds_device_order_t *order, unsigned nworkers, unsigned ring_depth,
                      gds_direct_use_t direct_use, gds_part_t *part, gds_status_t *st);
/* Whether the page holding `offset` is in the page cache (a read that must
 * not wait: RWF_NOWAIT): 1 yes, 0 no, -1 where that cannot be asked
 * (gds_file_page_cached). */
int gds_page_cached(int fd, uint64_t offset);
/* The same through cuFile; the file must be registered (gds_cufile_register). */
int gds_cufile_submit(gds_file_t *file, bool write, const gds_segment_t *segs, size_t nseg, void *ctx,
                      const gds_device_order_t *order, gds_part_t *part, gds_status_t *st);
/* The cuFile registration cache (register=on): entries overlapping memory
 * about to be freed are deregistered first; at engine shutdown, all. */
void gds_cufile_forget_range(const void *ptr, size_t size);
void gds_cufile_release_cache(void);
/* Registers the file with cuFile; false with a reason when it cannot be used. */
bool gds_cufile_register(gds_file_t *file, const char **why, char *why_buf, size_t why_size);

/* Pinned staging bytes held by all workers (staged_path.c). */
size_t gds_staged_pinned_bytes(void);

/* ---- blocks (task_map.c) ---- */

/* Block size for a request of `size` bytes over `workers` workers; with
 * `floor` > 0, halving may go down to it (below the staging size). */
size_t gds_block_for(const gds_engine_settings_t *cfg, size_t size, unsigned workers, size_t floor);

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
static inline size_t gds_task_map_count(const gds_task_map_t *map)
{
    return map->first[map->nseg];
}
/* The segment of `task` and the file range it covers. */
const gds_segment_t *gds_task_map_range(const gds_task_map_t *map, size_t task, uint64_t *lo, uint64_t *hi);

#define GDS_ROUND_DOWN(x, a) ((x) / (a) * (a))
#define GDS_ROUND_UP(x, a) (((x) + (a)-1) / (a) * (a))

#endif
