/*
 * Engine files for the Python package's sample loader, called through
 * ctypes: a batch of samples is ONE engine request (segments sorted by file
 * offset, each pointing at its slot in the batch buffer), submitted
 * asynchronously so the next batch is read while the current one is
 * consumed; no HDF5 call per sample. Also the files' statistics, route
 * names and the memory kind of a pointer. Errors of engine calls come back
 * as text in the caller's buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "H5FDgds.h"
#include "engine.h"
#include "gds_config.h"
#include "gds_hdf5.h"
#include "pyglue_common.h"

typedef struct py_file {
    gds_file_t *engine;
    int fd;
} py_file_t;

API int h5gds_py_file_open(const char *path, const char *config_text, int writable, void **out, char *err,
                           size_t errlen)
{
    *out = NULL;
    H5FD_gds_config_t config;
    /* Same settings as a gds fapl (defaults, H5GDS_CONFIG, then the
     * caller's keys), so the loader and h5py.File(driver="gds") agree. */
    if (H5FD_gds_config_init(&config) < 0 ||
        (config_text && *config_text && H5FD_gds_config_parse(&config, config_text) < 0)) {
        char text[600];
        h5gds_py_error_text(text, sizeof text);
        put_error(err, errlen, text);
        return -EINVAL;
    }
    gds_engine_settings_t settings;
    gds_config_to_engine(&config, &settings, NULL, 0);
    int fd = open(path, writable ? O_RDWR : O_RDONLY);
    /* The loader reads samples in random order: read-ahead would fetch
     * bytes nobody asked for (at 64 KiB samples, about half the disk). */
    if (fd >= 0 && !writable)
        posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    if (fd < 0) {
        int e = errno;
        char msg[512];
        snprintf(msg, sizeof msg, "cannot open %s: %s", path, strerror(e));
        put_error(err, errlen, msg);
        return -e;
    }
    py_file_t *pf = calloc(1, sizeof *pf);
    gds_status_t st = {0, ""};
    if (!pf || gds_file_open(&pf->engine, path, fd, writable != 0, &settings, &st) != 0) {
        put_error(err, errlen, pf ? st.msg : "out of memory");
        int e = pf && st.err ? st.err : ENOMEM;
        free(pf);
        close(fd);
        return -e;
    }
    pf->fd = fd;
    *out = pf;
    return 0;
}

API void h5gds_py_file_close(void *handle)
{
    py_file_t *pf = handle;
    if (!pf)
        return;
    gds_file_close(pf->engine);
    close(pf->fd);
    free(pf);
}

/* One request of `n` segments: file offsets, sizes and destination (or
 * source) addresses. All buffers lie in one allocation starting at `base`,
 * classified once here instead of once per segment. Ordering NONE: the
 * loader owns its buffers, nothing on the application's streams concerns
 * them. `read_once`: bytes nobody reads again (O_DIRECT where not cached,
 * as the GPU-decoded reads of stored chunks do). Returns 0 with a ticket,
 * or a negative errno with `err`. */
API int h5gds_py_file_submit(void *handle, int write, int read_once, size_t n, const uint64_t *offsets,
                             const uint64_t *sizes, const uint64_t *addrs, const void *base, void **ticket, char *err,
                             size_t errlen)
{
    py_file_t *pf = handle;
    *ticket = NULL;
    gds_segment_t *segs = malloc((n ? n : 1) * sizeof *segs);
    gds_buffer_info_t *known = malloc((n ? n : 1) * sizeof *known);
    if (!segs || !known) {
        free(segs);
        free(known);
        put_error(err, errlen, "out of memory for a batch request");
        return -ENOMEM;
    }
    gds_buffer_info_t info = {GDS_MEMORY_HOST, NULL, -1, 0};
    gds_classify_buffer_range(base, &info);
    for (size_t i = 0; i < n; i++) {
        segs[i].offset = offsets[i];
        segs[i].size = (size_t)sizes[i];
        segs[i].buf = (void *)(uintptr_t)addrs[i];
        known[i] = info;
    }
    gds_request_t req = {.write = write != 0,
                         .data = GDS_DATA_RAW,
                         .nseg = n,
                         .segs = segs,
                         .order = GDS_ORDER_NONE,
                         .stream = NULL,
                         .known = known,
                         .read_once = !write && read_once != 0};
    gds_status_t st = {0, ""};
    gds_io_t *io = NULL;
    int rc = gds_file_submit(pf->engine, &req, &io, &st); /* segments are copied at submission */
    free(segs);
    free(known);
    if (rc != 0) {
        put_error(err, errlen, st.msg);
        return st.err ? -st.err : -EIO;
    }
    *ticket = io;
    return 0;
}

API int h5gds_py_io_done(void *ticket)
{
    return gds_io_done(ticket) ? 1 : 0;
}

/* Waits for and frees the ticket. */
API int h5gds_py_io_wait(void *ticket, char *err, size_t errlen)
{
    gds_status_t st = {0, ""};
    if (gds_io_wait(ticket, &st) != 0) {
        put_error(err, errlen, st.msg);
        return st.err ? -st.err : -EIO;
    }
    return 0;
}

/* Statistics of a loader file: bytes read per route (GDS_NROUTES entries),
 * and the route device requests take. */
API int h5gds_py_file_stats(void *handle, uint64_t *read_bytes, size_t nroutes)
{
    py_file_t *pf = handle;
    gds_engine_stats_t s;
    gds_file_get_stats(pf->engine, &s);
    for (size_t i = 0; i < nroutes && i < GDS_NROUTES; i++)
        read_bytes[i] = s.read_bytes[i];
    return (int)s.device_route;
}

API const char *h5gds_py_route_name(int route)
{
    return gds_route_name((gds_route_t)route);
}

API int h5gds_py_memory_kind(const void *ptr)
{
    return (int)H5FD_gds_memory_kind(ptr);
}
