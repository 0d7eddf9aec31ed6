/*
 * The C side of the Python package, called through ctypes.
 *
 * Built into libh5gds_py.so together with the driver's own sources; HDF5's
 * symbols come from the libhdf5 that h5py loaded. Three groups:
 *   - driver glue: the driver id, a fapl from a "key=value" string, the
 *     HDF5 error stack as text (the package puts it into its exceptions);
 *   - engine files for the sample loader: a batch of samples is ONE engine
 *     request (segments sorted by file offset, each pointing at its slot in
 *     the batch buffer), submitted asynchronously so the next batch is read
 *     while the current one is consumed; no HDF5 call per sample;
 *   - the HDF5 version these sources were compiled against.
 * Errors of engine calls come back as text in the caller's buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "H5FDgds.h"
#include "engine.h"
#include "write_behind.h"
#include "gds_config.h"
#include "gds_filtered.h"
#include "gds_hdf5.h"

#define API __attribute__((visibility("default")))

static void put_error(char *err, size_t errlen, const char *msg)
{
    if (err && errlen) {
        snprintf(err, errlen, "%s", msg);
    }
}

API void h5gds_py_compiled_hdf5(unsigned version[3])
{
    version[0] = H5_VERS_MAJOR;
    version[1] = H5_VERS_MINOR;
    version[2] = H5_VERS_RELEASE;
}

API int64_t h5gds_py_driver_id(void)
{
    return (int64_t)H5FD_gds_init();
}

/* Defaults, then H5GDS_CONFIG, then `text` (h5py's driver keywords). */
API int h5gds_py_set_fapl(int64_t fapl_id, const char *text)
{
    H5FD_gds_config_t config;
    if (H5FD_gds_config_init(&config) < 0)
        return -1;
    if (text && *text && H5FD_gds_config_parse(&config, text) < 0)
        return -1;
    return H5Pset_fapl_gds_config((hid_t)fapl_id, &config) < 0 ? -1 : 0;
}

/* The configuration a fapl carries, formatted (tests, repr). */
API int h5gds_py_get_fapl(int64_t fapl_id, char *buf, size_t size)
{
    H5FD_gds_config_t config;
    if (H5Pget_fapl_gds_config((hid_t)fapl_id, &config) < 0)
        return -1;
    return H5FD_gds_config_format(&config, buf, size) < 0 ? -1 : 0;
}

/* The calling thread's HDF5 error stack as H5Eprint2 writes it, then
 * cleared. H5Eprint2 is used rather than walking H5E_error2_t so that the
 * text does not depend on that struct's layout in the HDF5 h5py runs. */
API size_t h5gds_py_error_text(char *buf, size_t size)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 0;
    H5Eprint2(H5E_DEFAULT, f);
    fclose(f);
    H5Eclear2(H5E_DEFAULT);
    if (buf && size) {
        size_t n = len < size - 1 ? len : size - 1;
        memcpy(buf, text, n);
        buf[n] = '\0';
    }
    free(text);
    return len;
}

/* ---- engine files for the loader ---- */

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
 * them. Returns 0 with a ticket, or a negative errno with `err`. */
API int h5gds_py_file_submit(void *handle, int write, size_t n, const uint64_t *offsets, const uint64_t *sizes,
                             const uint64_t *addrs, const void *base, void **ticket, char *err, size_t errlen)
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
                         .known = known};
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

/* ---- the loader's compressed columns: stored chunks it read itself,
 * decoded on the GPU into their places (gds_filtered_decode_chunks: 1
 * decoded, 0 not taken (HDF5's filters must read them), -1 failed with the
 * HDF5 error stack set). Addresses as integers, as ctypes hands them. */
API int h5gds_py_decode_chunks(int64_t dset, size_t n, const uint64_t *src, const uint64_t *src_bytes,
                               const uint32_t *masks, const uint64_t *dst, uint64_t stream)
{
    const void **srcs = malloc(n * sizeof *srcs);
    void **dsts = malloc(n * sizeof *dsts);
    size_t *sizes = malloc(n * sizeof *sizes);
    unsigned *mask = malloc(n * sizeof *mask);
    int rc = -1;
    if (srcs && dsts && sizes && mask) {
        for (size_t i = 0; i < n; i++) {
            srcs[i] = (const void *)(uintptr_t)src[i];
            dsts[i] = (void *)(uintptr_t)dst[i];
            sizes[i] = (size_t)src_bytes[i];
            mask[i] = masks ? (unsigned)masks[i] : 0u;
        }
        rc = gds_filtered_decode_chunks((hid_t)dset, n, srcs, sizes, mask, dsts, (void *)(uintptr_t)stream);
    }
    free(srcs);
    free(dsts);
    free(sizes);
    free(mask);
    return rc;
}

/* ---- checkpoints: waiting for an HDF5 file's background writes ----
 * The engine file is taken under h5py's lock (an HDF5 call); the wait and
 * the fsync then run without it, and without the GIL (ctypes releases it),
 * so a training loop goes on while a checkpoint drains. */

API void *h5gds_py_engine_of(int64_t file_id)
{
    return gds_vfd_engine_of((hid_t)file_id);
}

API int h5gds_py_sync(void *engine, char *err, size_t errlen)
{
    gds_status_t st;
    if (gds_file_sync((gds_file_t *)engine, &st) == 0)
        return 0;
    char msg[512];
    snprintf(msg, sizeof msg, "%s%s%s", st.msg, st.err ? ": " : "", st.err ? strerror(st.err) : "");
    put_error(err, errlen, msg);
    return -1;
}

/* Write-behind counters of an HDF5 file: snapshots, bytes, waits, peak
 * snapshot bytes, snapshot memory held, failures, background writes in
 * flight at most, busy workers at most, stream-ordered snapshots, bytes
 * reserved ahead. */
API int h5gds_py_wb_stats(int64_t file_id, uint64_t out[10])
{
    H5FD_gds_stats_t st;
    if (H5FD_gds_get_stats((hid_t)file_id, &st) < 0)
        return -1;
    out[0] = st.wb_snapshots;
    out[1] = st.wb_bytes;
    out[2] = st.wb_waits;
    out[3] = st.wb_peak_bytes;
    out[4] = st.wb_memory_bytes;
    out[5] = st.wb_failures;
    out[6] = st.wb_peak_pending;
    out[7] = st.workers_peak;
    out[8] = st.wb_stream_ordered;
    out[9] = st.reserved_bytes;
    return 0;
}

/* ---- checkpoints: snapshot memory made ready ahead ----
 * h5gds.prepare_checkpoint calls the engine's preparations directly: no
 * HDF5 call, so no h5py lock is needed and the wait runs without the GIL;
 * the preparation's thread never touches HDF5. The memory is of the
 * context of `like` (a device pointer of the state, when given), else of
 * the calling thread's current context, as the save's first snapshot will
 * ask for it. */

API int h5gds_py_prepare_start(uint64_t bytes, int kind, const void *like, void **out, char *err, size_t errlen)
{
    *out = NULL;
    void *ctx = NULL;
    gds_buffer_info_t info;
    if (like && gds_classify_buffer(like, &info) && !gds_memory_is_host(info.kind))
        ctx = info.context;
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!ctx && cu && cu->CtxGetCurrent((CUcontext *)&ctx) != CUDA_SUCCESS)
        ctx = NULL;
    gds_status_t st = {0, ""};
    gds_wb_prep_t *prep = NULL;
    if (gds_wb_prepare_start((size_t)bytes, (gds_wb_memory_t)kind, ctx, &prep, &st) != 0) {
        put_error(err, errlen, st.msg);
        return st.err ? -st.err : -EIO;
    }
    *out = prep;
    return 0;
}

API int h5gds_py_prepare_done(void *prep)
{
    return gds_wb_prepare_done(prep) ? 1 : 0;
}

/* 0, or a negative errno with what failed (asked again: the same answer). */
API int h5gds_py_prepare_wait(void *prep, char *err, size_t errlen)
{
    gds_status_t st = {0, ""};
    if (gds_wb_prepare_wait(prep, &st) == 0)
        return 0;
    put_error(err, errlen, st.msg);
    return st.err ? -st.err : -EIO;
}

API void h5gds_py_prepare_free(void *prep)
{
    gds_wb_prepare_free(prep);
}

API void h5gds_py_release_snapshot_memory(void)
{
    gds_wb_release_kept();
}

/* Ready device bytes, ready host bytes, host pinned, bytes open files hold,
 * preparations running, files that found their memory ready, files that
 * allocated theirs, allocations made by preparations. */
API void h5gds_py_snapshot_memory_info(uint64_t out[8])
{
    gds_wb_memory_info_t in;
    gds_wb_memory_info(&in);
    out[0] = in.ready_device_bytes;
    out[1] = in.ready_host_bytes;
    out[2] = in.ready_host_pinned;
    out[3] = in.open_bytes;
    out[4] = in.preparing;
    out[5] = in.files_ready;
    out[6] = in.files_allocated;
    out[7] = in.prepared;
}

/* ---- checkpoints: every leaf of a state in one call ----
 * h5gds.save hands the whole state over at once: each dataset is created
 * (contiguous, allocated at creation: `dcpl`), then each is written, with
 * no Python between HDF5 calls. Creating all before writing any means the
 * end of allocation is final at the first write, so the driver reserves
 * the file's space once (gds_file_reserve) and the background writes of all
 * leaves land side by side. The caller holds h5py's lock; ctypes releases
 * the GIL. Leaf i: its path `names[i]` (intermediate groups created),
 * memory = file type `types[i]`, `ranks[i]` extents taken in order from
 * `dims`, `nbytes[i]` bytes at `addrs[i]`, transfer list `dxpls[i]`.
 * Writes go in runs of at most `group_bytes` (see write_leaf_runs).
 * `seconds` (2 entries, may be NULL) gets the time spent creating and
 * writing the datasets.
 * Returns 0, or -1 with the leaf and HDF5's error stack in `err`. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#if H5_VERSION_GE(1, 14, 0)
/* One run: H5Dwrite_multi of `k` leaves with selection I/O on. */
static int write_run(size_t k, hid_t *ids, hid_t *mtypes, hid_t *all, const void **bufs, hid_t dxpl)
{
    (void)H5Pset_selection_io(dxpl, H5D_SELECTION_IO_MODE_ON); /* a hint: without it, one write per leaf */
    return H5Dwrite_multi(k, ids, mtypes, all, all, dxpl, bufs) < 0 ? -1 : 0;
}

/* The leaves' writes in runs: leaves with one transfer list (one stream),
 * at most `group_bytes` together (at least one leaf), each run one
 * H5Dwrite_multi with selection I/O on. HDF5 hands the driver all of a
 * run's pieces in one vector call, which write-behind snapshots at once (one
 * event, one background job) instead of once per leaf. Leaves are grouped by
 * transfer list, not only consecutive ones (an optimizer's state alternates
 * host step counters with device tensors); every dataset exists already, so
 * the order of the writes is free. Runs stay within the snapshot budget so
 * that write-behind can take them. Returns 0, -1 with the first leaf of the
 * run that failed in `*failed`, or -2 (out of memory). */
static int write_leaf_runs(size_t n, const hid_t *dsets, const int64_t *types, const uint64_t *addrs,
                           const uint64_t *nbytes, const int64_t *dxpls, uint64_t group_bytes, size_t *failed)
{
    hid_t *ids = malloc(n * sizeof *ids), *mtypes = malloc(n * sizeof *mtypes), *all = malloc(n * sizeof *all);
    const void **bufs = malloc(n * sizeof *bufs);
    bool *taken = calloc(n, sizeof *taken);
    int rc = 0;
    if (!ids || !mtypes || !all || !bufs || !taken) {
        *failed = 0;
        rc = -2;
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        all[i] = H5S_ALL;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (taken[i] || !nbytes[i])
            continue; /* written in an earlier run, or nothing to write */
        hid_t dxpl = (hid_t)dxpls[i];
        size_t k = 0, first = i;
        uint64_t bytes = 0;
        for (size_t j = i; rc == 0 && j < n; j++) {
            if (taken[j] || !nbytes[j] || (hid_t)dxpls[j] != dxpl)
                continue;
            if (k && bytes + nbytes[j] > group_bytes) { /* this run is full */
                if (write_run(k, ids, mtypes, all, bufs, dxpl) != 0) {
                    *failed = first;
                    rc = -1;
                    break;
                }
                k = 0;
                bytes = 0;
                first = j;
            }
            taken[j] = true;
            ids[k] = dsets[j];
            mtypes[k] = (hid_t)types[j];
            bufs[k++] = (const void *)(uintptr_t)addrs[j];
            bytes += nbytes[j];
        }
        if (rc == 0 && k && write_run(k, ids, mtypes, all, bufs, dxpl) != 0) {
            *failed = first;
            rc = -1;
        }
    }
    free(ids);
    free(mtypes);
    free(all);
    free(bufs);
    free(taken);
    return rc;
}
#endif

/* Closes every dataset of `ids` (ids <= 0 skipped); the first failure is
 * reported in `err`, naming the dataset when `names` is given. */
static int close_all(size_t n, const int64_t *ids, const char *const *names, char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] > 0 && H5Dclose((hid_t)ids[i]) < 0 && rc == 0) {
            char text[1536];
            h5gds_py_error_text(text, sizeof text);
            char msg[2048];
            snprintf(msg, sizeof msg, "closing %s failed: %s", names ? names[i] : "a checkpoint dataset", text);
            put_error(err, errlen, msg);
            rc = -1;
        }
    return rc;
}

/* Closes the datasets a successful h5gds_py_save_leaves left open. */
API int h5gds_py_close_datasets(size_t n, const int64_t *ids, char *err, size_t errlen)
{
    return close_all(n, ids, NULL, err, errlen);
}

/* Makes the groups on the way to `name` ("/a/b/leaf": /a and /a/b) that do
 * not exist yet, with links named in UTF-8 as h5py names them (HDF5's own
 * intermediate groups get ASCII links). `made` is the last parent made or
 * found: leaves of one group come one after another, so most leaves cost
 * one comparison. Returns 0, or -1 with the HDF5 error stack set. */
static int make_parents(hid_t loc, const char *name, hid_t lcpl, char *made, size_t made_size)
{
    const char *slash = strrchr(name, '/');
    if (!slash || slash == name)
        return 0; /* in the root group */
    size_t parent_len = (size_t)(slash - name);
    if (parent_len < made_size && strncmp(made, name, parent_len) == 0 && made[parent_len] == '\0')
        return 0;
    char *path = strndup(name, parent_len);
    if (!path)
        return -1;
    int rc = 0;
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char keep = *p;
        *p = '\0';
        htri_t exists = H5Lexists(loc, path, H5P_DEFAULT);
        if (exists < 0 || (!exists && H5Gclose(H5Gcreate2(loc, path, lcpl, H5P_DEFAULT, H5P_DEFAULT)) < 0)) {
            rc = -1;
            break;
        }
        *p = keep;
        if (!keep)
            break;
    }
    if (rc == 0 && parent_len < made_size) {
        memcpy(made, path, parent_len);
        made[parent_len] = '\0';
    }
    free(path);
    return rc;
}

/* Creates and writes every leaf of a checkpoint. `opened` (n entries), when
 * given, receives the datasets' ids, left open on success for the caller to
 * close with h5gds_py_close_datasets off the caller's critical path (closing
 * 200 datasets takes milliseconds); on failure every one is closed here. */
API int h5gds_py_save_leaves(int64_t loc, size_t n, const char *const *names, const int64_t *types,
                             const int32_t *ranks, const uint64_t *dims, const uint64_t *addrs, const uint64_t *nbytes,
                             const int64_t *dxpls, int64_t dcpl, uint64_t group_bytes, double *seconds,
                             int64_t *opened, char *err, size_t errlen)
{
    double t0 = now_s(), t1 = t0, t2 = t0;
    hid_t *dsets = calloc(n ? n : 1, sizeof *dsets);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    char made[1024] = ""; /* the last parent group made or found (make_parents) */
    /* links named in UTF-8, as h5py names them */
    if (!dsets || lcpl < 0 || H5Pset_char_encoding(lcpl, H5T_CSET_UTF8) < 0) {
        free(dsets);
        if (lcpl >= 0)
            H5Pclose(lcpl);
        put_error(err, errlen, "checkpoint: out of memory for the dataset list");
        return -1;
    }
    int rc = 0;
    size_t failed = 0;
    const char *what = "";
    const uint64_t *d = dims;
    for (size_t i = 0; rc == 0 && i < n; d += ranks[i], i++) {
        if (make_parents((hid_t)loc, names[i], lcpl, made, sizeof made) != 0) {
            rc = -1;
            failed = i;
            what = "creating the groups of";
            break;
        }
        hid_t space = ranks[i] ? H5Screate_simple(ranks[i], (const hsize_t *)d, NULL) : H5Screate(H5S_SCALAR);
        dsets[i] = space < 0 ? -1 : H5Dcreate2((hid_t)loc, names[i], (hid_t)types[i], space, lcpl, (hid_t)dcpl, H5P_DEFAULT);
        if (space >= 0)
            H5Sclose(space);
        if (dsets[i] < 0) {
            rc = -1;
            failed = i;
            what = "creating";
        }
    }
    t1 = now_s();
#if H5_VERSION_GE(1, 14, 0)
    int runs = rc == 0 ? write_leaf_runs(n, dsets, types, addrs, nbytes, dxpls, group_bytes, &failed) : 0;
    if (runs == -2) {
        put_error(err, errlen, "checkpoint: out of memory for the list of writes");
        rc = -2;
    }
    else if (runs != 0) {
        rc = -1;
        what = "writing (from)";
    }
#else
    (void)group_bytes;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (nbytes[i] && H5Dwrite(dsets[i], (hid_t)types[i], H5S_ALL, H5S_ALL, (hid_t)dxpls[i],
                                  (const void *)(uintptr_t)addrs[i]) < 0) {
            rc = -1;
            failed = i;
            what = "writing";
        }
    }
#endif
    if (rc == -1) {
        char text[1536];
        h5gds_py_error_text(text, sizeof text);
        char msg[2048];
        snprintf(msg, sizeof msg, "%s %s failed: %s", what, names[failed], text);
        put_error(err, errlen, msg);
    }
    t2 = now_s();
    if (rc == 0 && opened) {
        for (size_t i = 0; i < n; i++)
            opened[i] = dsets[i];
    }
    else if (close_all(n, dsets, names, rc == 0 ? err : NULL, errlen) != 0 && rc == 0) {
        rc = -1;
    }
    H5Pclose(lcpl);
    free(dsets);
    if (seconds) {
        seconds[0] = t1 - t0;
        seconds[1] = t2 - t1;
    }
    return rc;
}
