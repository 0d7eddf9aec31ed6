/*
 * Statistics and the public calls on an open file of the `gds` driver:
 * H5FD_gds_get_stats, H5FD_gds_sync, and for the glue above the driver
 * (gds_vfd_raw.h, gds_hdf5.h) its engine and raw reads through it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gds_transfer.h"
#include "gds_vfd_file.h"
#include "gds_vfd_raw.h"

void gds_vfd_file_stats(const gds_vfd_file_t *file, H5FD_gds_stats_t *stats)
{
    gds_engine_stats_t es;
    gds_file_get_stats(file->engine, &es);
    gds_stats_to_public(&es, stats);
    stats->device_memcpys = __atomic_load_n(&file->device_memcpys, __ATOMIC_RELAXED);
}

void gds_vfd_print_stats(const gds_vfd_file_t *file)
{
    H5FD_gds_stats_t s;
    gds_vfd_file_stats(file, &s);
    fprintf(stderr,
            "h5gds stats: %s: device route %s, cufile fallbacks %llu, O_DIRECT fallbacks %llu, "
            "buffer registrations %llu\n",
            file->name, H5FD_gds_route_name(s.device_route), (unsigned long long)s.cufile_fallbacks,
            (unsigned long long)s.direct_fallbacks, (unsigned long long)s.buffer_registrations);
    for (int r = 0; r < H5FD_GDS_NROUTES; r++) {
        if (!s.read_calls[r] && !s.write_calls[r])
            continue;
        fprintf(stderr, "h5gds stats:   %-12s read %llu bytes in %llu calls, wrote %llu bytes in %llu calls\n",
                H5FD_gds_route_name((H5FD_gds_route_t)r), (unsigned long long)s.read_bytes[r],
                (unsigned long long)s.read_calls[r], (unsigned long long)s.write_bytes[r],
                (unsigned long long)s.write_calls[r]);
    }
    fprintf(stderr, "h5gds stats:   raw data time: read %.6f s, write %.6f s\n", s.read_seconds, s.write_seconds);
}

/* The driver's own struct behind an HDF5 file id (NULL with an error pushed). */
static gds_vfd_file_t *vfd_file_of(hid_t file_id)
{
    hid_t fapl = H5Fget_access_plist(file_id);
    if (fapl < 0) {
        GDS_ERROR(H5E_ARGS, H5E_BADTYPE, "not an open file");
        return NULL;
    }
    hid_t driver = H5FD_gds_init();
    bool is_gds = driver >= 0 && H5Pget_driver(fapl) == driver;
    void *handle = NULL;
    herr_t got = is_gds ? H5Fget_vfd_handle(file_id, fapl, &handle) : -1;
    /* Close before pushing: every HDF5 API call clears the error stack. */
    H5Pclose(fapl);
    if (!is_gds) {
        GDS_ERROR(H5E_FILE, H5E_BADVALUE, "the file does not use the gds driver");
        return NULL;
    }
    if (got < 0 || !handle) {
        GDS_ERROR(H5E_FILE, H5E_CANTGET, "cannot get the driver handle of the file");
        return NULL;
    }
    /* get_handle hands out &fd of our own file struct. */
    return (gds_vfd_file_t *)((char *)handle - offsetof(gds_vfd_file_t, fd));
}

static herr_t get_stats(hid_t file_id, H5FD_gds_stats_t *stats)
{
    if (!stats) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "stats pointer is NULL");
        return -1;
    }
    const gds_vfd_file_t *file = vfd_file_of(file_id);
    if (!file)
        return -1;
    gds_vfd_file_stats(file, stats);
    return 0;
}

herr_t H5FD_gds_get_stats(hid_t file_id, H5FD_gds_stats_t *stats)
{
    gds_api_enter();
    return gds_api_leave(get_stats(file_id, stats) < 0) ? -1 : 0;
}

gds_file_t *gds_vfd_engine_of(hid_t file_id)
{
    gds_vfd_file_t *file = vfd_file_of(file_id);
    return file ? file->engine : NULL;
}

int gds_vfd_submit_raw_read(hid_t file_id, const gds_segment_t *segs, size_t nseg, gds_io_t **io, gds_status_t *st)
{
    gds_vfd_file_t *file = vfd_file_of(file_id);
    if (!file) {
        gds_status_set(st, 0, "not a file of the gds driver");
        return -1;
    }
    /* The window's dirty bytes overlapping a range reach the file first
     * (write-behind's overlapping writes are waited for by the engine). */
    for (size_t i = 0; i < nseg; i++)
        if (gds_sieve_before_other(&file->sieve, file->engine, segs[i].offset, segs[i].size, false, st) < 0)
            return -1;
    gds_request_t req = {.write = false, .data = GDS_DATA_RAW, .nseg = nseg, .segs = segs, .order = GDS_ORDER_NONE,
                         .read_once = true};
    return gds_file_submit(file->engine, &req, io, st);
}

bool gds_vfd_raw_mostly_cached(hid_t file_id, const uint64_t *offsets, size_t n)
{
    gds_vfd_file_t *file = vfd_file_of(file_id);
    size_t cached = 0;
    for (size_t i = 0; file && i < n; i++) {
        int c = gds_file_page_cached(file->engine, offsets[i]);
        if (c < 0)
            return false;
        cached += (size_t)c;
    }
    return file && n && 2 * cached >= n;
}

gds_held_writes_t *gds_vfd_hold_writes(hid_t file_id)
{
    gds_vfd_file_t *file = vfd_file_of(file_id);
    if (!file)
        return NULL;
    gds_held_writes_t *h = gds_vfd_hold_begin(file, false);
    if (!h)
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "file '%s': cannot hold its raw writes (out of memory, or held already)",
                  file->name);
    return h;
}

/* ---- test hooks (gds_vfd_raw.h) ---- */

static _Thread_local gds_held_writes_t *test_hold;

static int test_failed(const gds_status_t *st, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s%s%s", st->msg, st->err ? ": " : "", st->err ? strerror(st->err) : "");
    return -1;
}

int gds_test_hold_begin(hid_t file_id)
{
    gds_vfd_file_t *file = vfd_file_of(file_id);
    if (!file || test_hold)
        return -1;
    test_hold = gds_vfd_hold_begin(file, true);
    return test_hold ? 0 : -1;
}

int gds_test_hold_submit(unsigned slot, char *err, size_t errlen)
{
    gds_status_t st;
    if (!test_hold || slot >= GDS_HELD_SLOTS)
        return snprintf(err, errlen, "no hold, or slot %u out of range", slot), -1;
    return gds_vfd_held_submit(test_hold, slot, 0, &st) < 0 ? test_failed(&st, err, errlen) : 0;
}

int gds_test_hold_end(char *err, size_t errlen)
{
    gds_status_t st;
    int rc = gds_vfd_hold_end(test_hold, &st);
    test_hold = NULL;
    return rc < 0 ? test_failed(&st, err, errlen) : 0;
}

static herr_t sync_file(hid_t file_id)
{
    gds_vfd_file_t *file = vfd_file_of(file_id);
    if (!file)
        return -1;
    gds_status_t st;
    /* the sieve window is raw data written before: it goes first */
    if (gds_sieve_flush(&file->sieve, file->engine, &st) < 0 || gds_file_sync(file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        return -1;
    }
    return 0;
}

herr_t H5FD_gds_sync(hid_t file_id)
{
    gds_api_enter();
    return gds_api_leave(sync_file(file_id) < 0) ? -1 : 0;
}
