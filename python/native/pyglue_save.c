/*
 * The Python package's checkpoint save, called through ctypes: every leaf
 * of a state created and written in one call (h5gds_py_save_leaves), the
 * datasets it leaves open closed later (h5gds_py_close_datasets).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gds_hdf5.h"
#include "pyglue_common.h"

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
            char text[8192]; /* a whole HDF5 stack: the reason is in its last frames */
            h5gds_py_error_text(text, sizeof text);
            char msg[8192 + 512];
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
        char text[8192]; /* a whole HDF5 stack: the reason is in its last frames */
        h5gds_py_error_text(text, sizeof text);
        char msg[8192 + 512];
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
