/* Cutting requests into blocks that pool workers claim; see strategy.h. */
#include <stdlib.h>

#include "strategy.h"

/* The block each worker claims: io_block_size, halved (down to the staging
 * size, or to `floor` when the caller gives a smaller one) until every
 * worker has at least one block, so that mid-sized requests still use the
 * whole pool. Stays a multiple of fs_block_size. */
size_t gds_block_for(const gds_engine_settings_t *cfg, size_t size, unsigned workers, size_t floor_hint)
{
    size_t block = cfg->io_block_size;
    size_t floor = cfg->staging_size > cfg->fs_block_size ? cfg->staging_size : cfg->fs_block_size;
    if (floor_hint && floor_hint < floor)
        floor = floor_hint > cfg->fs_block_size ? floor_hint : cfg->fs_block_size;
    while (block / 2 >= floor && (block / 2) % cfg->fs_block_size == 0 && size / block < workers)
        block /= 2;
    return block;
}

int gds_task_map_init(gds_task_map_t *map, const gds_segment_t *seg, size_t nseg, size_t block)
{
    map->seg = seg;
    map->nseg = nseg;
    map->block = block;
    map->first = malloc((nseg + 1) * sizeof *map->first);
    if (!map->first)
        return -1;
    size_t t = 0;
    for (size_t i = 0; i < nseg; i++) {
        map->first[i] = t;
        t += seg[i].size ? gds_task_count(seg[i].offset, seg[i].size, block) : 0;
    }
    map->first[nseg] = t;
    return 0;
}

void gds_task_map_free(gds_task_map_t *map)
{
    free(map->first);
    map->first = NULL;
}

const gds_segment_t *gds_task_map_range(const gds_task_map_t *map, size_t task, uint64_t *lo, uint64_t *hi)
{
    /* The last segment whose first task is <= task: never an empty one
     * (it would share its first task with the next), for task < first[nseg]. */
    size_t a = 0, b = map->nseg - 1;
    while (a < b) {
        size_t mid = a + (b - a + 1) / 2;
        if (map->first[mid] <= task)
            a = mid;
        else
            b = mid - 1;
    }
    const gds_segment_t *seg = &map->seg[a];
    gds_task_range(seg->offset, seg->size, map->block, task - map->first[a], lo, hi);
    return seg;
}
