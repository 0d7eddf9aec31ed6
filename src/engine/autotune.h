/*
 * Autotuning of the device path's parallelism (threads x io_block_size)
 * for one file system, measured once and remembered.
 *
 * On the first device request of a file whose settings say `auto`, the
 * engine asks for the tuning of the file's file system and GPU:
 *   1. the process's own table (tuned before in this process);
 *   2. the per-user cache file, $XDG_CACHE_HOME/h5gds/tune.json (or
 *      ~/.cache/h5gds/tune.json), one JSON object per line, keyed by host,
 *      file system device id and type, and GPU; a line that does not parse,
 *      or of another format version, is ignored (that key is measured again);
 *      written atomically (temporary file + rename); a read-only or absent
 *      home means measuring once per process;
 *   3. a measurement: a small grid of (threads x block) of O_DIRECT writes
 *      (made durable) and reads on a scratch file in the file's directory,
 *      bounded to about 2 s and 256 MiB per point (16/8/4 threads x 32/16
 *      MiB blocks); the point with the best sum of write and read rate,
 *      each relative to the best seen, wins (among those within 10% of it,
 *      the one with the most threads).
 * Lustre: where the directory has a striping layout (the "lustre.lov"
 * extended attribute), blocks are whole multiples of the stripe size and
 * threads at least the stripe count (not measured on a real Lustre here:
 * the layout parser is unit-tested on synthetic attributes).
 */
#ifndef H5GDS_AUTOTUNE_H
#define H5GDS_AUTOTUNE_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"

typedef enum gds_tune_source {
    GDS_TUNE_FIXED = 0, /* the settings named threads and block: nothing tuned */
    GDS_TUNE_MEASURED,  /* measured now */
    GDS_TUNE_CACHED,    /* from this process's table or the cache file */
    GDS_TUNE_DEFAULTS   /* auto, but could not measure (reason in `why`) */
} gds_tune_source_t;

typedef struct gds_tuning {
    unsigned threads;
    size_t io_block_size;
    double write_gbps, read_gbps; /* at the chosen point (0 when not measured) */
    double seconds;               /* time the measurement took */
    gds_tune_source_t source;
    char why[256];                /* one line for the log */
} gds_tuning_t;

/* One measured point of the grid (for h5gds-bench --tune). */
typedef struct gds_tune_point {
    unsigned threads;
    size_t block;
    double write_gbps, read_gbps;
} gds_tune_point_t;

/* The tuning for the file system holding `path` and the GPU `gpu` (a name;
 * may be empty). `default_threads` / `default_block` are used when nothing
 * can be measured. Never fails: the reason goes into `out->why`. */
void gds_autotune(const char *path, const char *gpu, unsigned default_threads, size_t default_block,
                  gds_tuning_t *out);

/* Measures the whole grid in `dir` (no cache, no time bound beyond
 * `max_seconds`); returns the number of points written to `points`. */
size_t gds_autotune_grid(const char *dir, gds_tune_point_t *points, size_t max_points, double max_seconds,
                         gds_status_t *st);

/* Lustre's layout attribute (struct lov_user_md v1/v3): stripe size and
 * count; false when `buf` is not one. Exposed for tests. */
bool gds_lustre_parse_layout(const void *buf, size_t len, size_t *stripe_size, unsigned *stripe_count);

/* Forgets the process's table (tests). */
void gds_autotune_reset(void);

#endif
