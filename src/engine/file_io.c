/*
 * The engine's public entry points for files (engine.h): open and close,
 * requests, drain and sync, and the process-wide calls.
 *
 * The top of the engine's stack: write-behind (write_behind.c) stands on
 * the transfer layer (transfer.c), which stands on the strategies and the
 * file handle (file_handle.c). This file creates and destroys a file's
 * write-behind and sends each request down: raw writes to write-behind
 * when it takes them, everything else (after the background writes it
 * overlaps) to the transfer layer. No layer below calls up.
 */
#include <errno.h>
#include <unistd.h>

#include "strategy.h"
#include "transfer.h"
#include "write_behind.h"

int gds_file_open(gds_file_t **out, const char *path, int fd, bool writable, const gds_engine_settings_t *cfg,
                  gds_status_t *st)
{
    gds_file_t *file = NULL;
    if (gds_file_handle_create(&file, path, fd, writable, cfg, st) != 0)
        return -1;
    if (cfg->write_behind && !(file->wb = gds_wb_create(cfg->write_behind))) {
        gds_file_handle_destroy(file);
        gds_status_set(st, ENOMEM, "out of memory opening %s", path);
        return -1;
    }
    *out = file;
    return 0;
}

void gds_file_close(gds_file_t *file)
{
    if (!file)
        return;
    if (file->wb) {
        gds_status_t ignored;
        gds_wb_drain(file, &ignored); /* the snapshots must outlive their writes */
        gds_wb_destroy(file->wb);
    }
    gds_file_handle_destroy(file);
}

/* Before a request write-behind does not take: it waits for the background
 * writes it overlaps (and fails raw data after a background failure). */
static int before_transfer(gds_file_t *file, const gds_request_t *req, gds_status_t *st)
{
    if (!file->wb)
        return 0;
    bool raw = req->data == GDS_DATA_RAW;
    return gds_wb_before(file, raw, !req->write && raw, req->segs, req->nseg, st);
}

int gds_file_submit(gds_file_t *file, const gds_request_t *req, gds_io_t **io, gds_status_t *st)
{
    *io = NULL;
    if (before_transfer(file, req, st) != 0)
        return -1;
    return gds_transfer_submit(file, req, io, st);
}

int gds_file_transfer(gds_file_t *file, const gds_request_t *req, gds_status_t *st)
{
    /* raw writes become snapshots when they can */
    if (file->wb && req->write && req->data == GDS_DATA_RAW) {
        int taken = gds_wb_write(file, req, st);
        if (taken != 0)
            return taken > 0 ? 0 : -1;
    }
    if (before_transfer(file, req, st) != 0)
        return -1;
    return gds_transfer_run(file, req, st);
}

int gds_file_read(gds_file_t *file, uint64_t offset, size_t size, void *buf, gds_data_t data, gds_status_t *st)
{
    gds_segment_t seg = {offset, size, buf};
    gds_request_t req = {.write = false, .data = data, .nseg = 1, .segs = &seg};
    return gds_file_transfer(file, &req, st);
}

int gds_file_write(gds_file_t *file, uint64_t offset, size_t size, const void *buf, gds_data_t data,
                   gds_status_t *st)
{
    /* The engine never writes through `buf`; the cast only shares the code path. */
    gds_segment_t seg = {offset, size, (void *)buf};
    gds_request_t req = {.write = true, .data = data, .nseg = 1, .segs = &seg};
    return gds_file_transfer(file, &req, st);
}

int gds_file_drain(gds_file_t *file, gds_status_t *st)
{
    return gds_wb_drain(file, st);
}

int gds_file_sync(gds_file_t *file, gds_status_t *st)
{
    if (gds_wb_drain(file, st) != 0)
        return -1;
    if (fsync(file->fd) != 0) {
        gds_status_set(st, errno, "fsync of %s failed", file->path);
        return -1;
    }
    return 0;
}

uint64_t gds_file_reserve(gds_file_t *file, uint64_t written, uint64_t end, uint64_t upto)
{
    /* idle is asked before the file lock: write-behind takes its own lock
     * first; fallocate waits for direct writes in flight */
    if (!file->writable || (file->wb && !gds_wb_idle(file)))
        return 0;
    return gds_file_reserve_space(file, written, end, upto);
}

void gds_file_truncated(gds_file_t *file, uint64_t size)
{
    if (file->wb)
        gds_wb_space_cut(file, size);
    pthread_mutex_lock(&file->lock);
    if (file->reserved_end > size)
        file->reserved_end = size;
    pthread_mutex_unlock(&file->lock);
}

void gds_engine_shutdown(void)
{
    gds_pool_shutdown();
    gds_wb_release_kept();
    gds_cufile_release_cache(); /* no registration outlives the driver */
}

unsigned gds_engine_threads(void)
{
    return gds_pool_threads();
}

size_t gds_engine_pinned_bytes(void)
{
    return gds_staged_pinned_bytes();
}

int gds_file_page_cached(gds_file_t *file, uint64_t offset) { return gds_page_cached(file->fd, offset); }
