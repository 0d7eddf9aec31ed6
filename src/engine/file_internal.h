/*
 * The file handle's interface to the layers of the engine that use it: the
 * strategies (host, staged, cuFile), the dispatcher (transfer.c),
 * write-behind and the public entry points (file_io.c). The strategies
 * depend on this and on strategy.h; the handle (file_handle.c) depends on
 * none of them.
 */
#ifndef H5GDS_FILE_INTERNAL_H
#define H5GDS_FILE_INTERNAL_H

#include <pthread.h>

#include "autotune.h"
#include "engine.h"
#include "../cuda/cuda_loader.h"

struct gds_file {
    char *path;
    int fd;              /* buffered descriptor, owned by the caller */
    int direct_fd;       /* O_DIRECT descriptor, owned here; -1 until needed or when unusable */
    bool writable;
    gds_engine_settings_t cfg;        /* threads and io_block_size resolved (auto: the defaults) */
    bool tune_threads, tune_block;    /* they were `auto`: tuned for device data */
    /* The settings of device transfers: cfg with the tuned values. Written
     * once, before device_route_decided is published; read after it. */
    gds_engine_settings_t device_cfg;
    gds_tuning_t tuning;

    pthread_mutex_t lock;        /* guards direct_decided and direct_fd */
    bool direct_decided;
    /* The device route (and device_cfg, cufile_handle) is decided once under
     * transfer.c's decision lock and published by this flag (atomic). */
    bool device_route_decided;
    gds_route_t device_route;
    CUfileHandle_t cufile_handle; /* valid when device_route == CUFILE */

    struct gds_wb *wb;           /* write-behind, or NULL (write_behind.h): created and destroyed by file_io.c */
    uint64_t reserved_end;       /* under lock: space reserved up to here (gds_file_reserve) */
    bool cannot_reserve;         /* under lock: fallocate failed once; not tried again */

    gds_engine_stats_t stats;    /* every field updated with atomics */
};

/* The handle alone (gds_file_open and gds_file_close add write-behind):
 * settings resolved, no descriptor opened yet. Destroy deregisters the file
 * from cuFile and closes the O_DIRECT descriptor. */
int gds_file_handle_create(gds_file_t **out, const char *path, int fd, bool writable,
                           const gds_engine_settings_t *cfg, gds_status_t *st);
void gds_file_handle_destroy(gds_file_t *file);
/* gds_file_reserve once no background write is in flight (the caller
 * checked): fallocate up to `upto` under the file's lock. */
uint64_t gds_file_reserve_space(gds_file_t *file, uint64_t written, uint64_t end, uint64_t upto);

/* The O_DIRECT descriptor, opened on first use; -1 when O_DIRECT is unusable
 * for this file (then buffered I/O is used and counted as a fallback). */
int gds_file_direct_fd(gds_file_t *file);

/* One line on stderr when the file's `log` setting is on. */
void gds_file_log(const gds_file_t *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Statistics, from any thread. */
static inline void gds_stat_add(uint64_t *counter, uint64_t n)
{
    __atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

static inline void gds_stat_max(uint64_t *counter, uint64_t value)
{
    uint64_t seen = __atomic_load_n(counter, __ATOMIC_RELAXED);
    while (value > seen && !__atomic_compare_exchange_n(counter, &seen, value, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* Pool workers busy with this file's requests (the concurrency statistics). */
static inline void gds_file_worker_enter(gds_file_t *file)
{
    gds_stat_max(&file->stats.workers_peak, __atomic_add_fetch(&file->stats.workers_busy, 1, __ATOMIC_RELAXED));
}

static inline void gds_file_worker_leave(gds_file_t *file)
{
    __atomic_sub_fetch(&file->stats.workers_busy, 1, __ATOMIC_RELAXED);
}
void gds_file_count(gds_file_t *file, bool write, gds_route_t route, size_t size, uint64_t ns);
/* The same for `calls` pieces of `size` bytes in all. */
void gds_file_count_calls(gds_file_t *file, bool write, gds_route_t route, size_t size, size_t calls, uint64_t ns);

#endif
