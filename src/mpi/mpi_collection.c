/*
 * libh5gds_mpi: a collection's life: H5FD_gds_mpi_begin (every rank creates
 * its file), H5FD_gds_mpi_write (checked on every rank, then each writes its
 * slab), H5FD_gds_mpi_finish (files closed, rank 0 writes the master).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mpi_internal.h"

void dset_rec_free(dset_rec_t *d)
{
    if (!d)
        return;
    if (d->type >= 0)
        H5Tclose(d->type);
    free(d->slabs);
    free(d->name);
    free(d);
}

void collection_free(H5FD_gds_collection_t *c)
{
    if (!c)
        return;
    if (c->file >= 0)
        H5Fclose(c->file);
    if (c->fapl >= 0)
        H5Pclose(c->fapl);
    while (c->dsets) {
        dset_rec_t *d = c->dsets;
        c->dsets = d->next;
        dset_rec_free(d);
    }
    free(c->recs);
    free(c->order);
    free(c->master_path);
    free(c->rank_path);
    if (c->comm != MPI_COMM_NULL)
        MPI_Comm_free(&c->comm);
    free(c);
}

/* Removes this rank's file when it was created by this collection. */
void remove_rank_file(H5FD_gds_collection_t *c)
{
    if (c->file >= 0) {
        H5Fclose(c->file);
        c->file = H5I_INVALID_HID;
    }
    if (c->created && c->rank_path)
        unlink(c->rank_path);
    c->created = false;
}

H5FD_gds_collection_t *H5FD_gds_mpi_begin(MPI_Comm comm, const char *master_path, hid_t fapl)
{
    api_t a;
    api_enter(&a, __func__);
    MPI_Comm dup = private_comm(&a, comm);
    if (dup == MPI_COMM_NULL) {
        api_leave(&a, true);
        return NULL;
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(dup, &rank);
    MPI_Comm_size(dup, &size);

    /* 1. Arguments and memory, on every rank; the same master path everywhere. */
    bool ok = true;
    H5FD_gds_collection_t *c = calloc(1, sizeof *c);
    if (!c) {
        ERR(H5E_RESOURCE, H5E_NOSPACE, "rank %d: out of memory", rank);
        api_keep(&a);
        ok = false;
    } else {
        c->comm = dup;
        c->rank = rank;
        c->size = size;
        c->fapl = c->file = H5I_INVALID_HID;
        c->tail = &c->dsets;
    }
    if (ok && (!master_path || !*master_path)) {
        ERR(H5E_ARGS, H5E_BADVALUE, "rank %d: the master path is NULL or empty", rank);
        api_keep(&a);
        ok = false;
    }
    if (ok) {
        c->master_path = strdup(master_path);
        c->rank_path = rank_file_path(master_path, rank);
        c->recs = malloc((size_t)size * sizeof *c->recs);
        c->order = malloc((size_t)size * sizeof *c->order);
        if (!c->master_path || !c->rank_path || !c->recs || !c->order) {
            ERR(H5E_RESOURCE, H5E_NOSPACE, "rank %d: out of memory", rank);
            api_keep(&a);
            ok = false;
        }
    }
    if (ok && (c->fapl = fapl_for(&a, fapl)) < 0)
        ok = false;
    uint64_t h = ok ? hash_string(master_path) : 0, mine[2] = {h, ~h}, low[2] = {0, 0};
    agreement_t ag = agree(&a, dup, rank, ok);
    bool same_path = MPI_Allreduce(mine, low, 2, MPI_UINT64_T, MPI_MIN, dup) == MPI_SUCCESS && low[0] == ~low[1];
    if (ag.nfail) {
        api_summary(&a, "cannot start a collection: invalid arguments or no memory on rank %d (%d of %d ranks failed)",
                    ag.first, ag.nfail, size);
        goto fail;
    }
    if (!same_path) {
        api_summary(&a, "cannot start a collection: the ranks were given different master paths (rank %d: '%s')", rank,
                    master_path);
        goto fail;
    }

    /* 2. Rank 0 removes an existing master: the rank files are about to be
     * truncated and it would point at them. */
    ok = true;
    if (rank == 0 && unlink(c->master_path) != 0 && errno != ENOENT) {
        ERR(H5E_FILE, H5E_CANTDELETE, "cannot remove the existing master file '%s': %s", c->master_path,
            strerror(errno));
        api_keep(&a);
        ok = false;
    }
    ag = agree(&a, dup, rank, ok);
    if (ag.nfail) {
        api_summary(&a, "cannot start a collection: rank 0 cannot remove the existing master file '%s'",
                    c->master_path);
        goto fail;
    }

    /* 3. Each rank creates its file. */
    ok = true;
    c->file = H5Fcreate(c->rank_path, H5F_ACC_TRUNC, H5P_DEFAULT, c->fapl);
    if (c->file < 0) {
        ERR(H5E_FILE, H5E_CANTCREATE, "rank %d cannot create its file '%s'", rank, c->rank_path);
        api_keep(&a);
        ok = false;
    } else {
        c->created = true;
    }
    ag = agree(&a, dup, rank, ok);
    if (ag.nfail) {
        char *path = rank_file_path(c->master_path, ag.first);
        api_summary(&a, "cannot start a collection: rank %d cannot create its file '%s' (%d of %d ranks failed)",
                    ag.first, path ? path : "?", ag.nfail, size);
        free(path);
        remove_rank_file(c);
        goto fail;
    }
    api_leave(&a, false);
    return c;

fail:
    if (c)
        collection_free(c); /* frees dup */
    else
        MPI_Comm_free(&dup);
    api_leave(&a, true);
    return NULL;
}

/* A dataset creation list for the rank's slab: chunks of the slab's rank,
 * none larger than the slab (HDF5's rule for fixed-size datasets). */
static bool check_dcpl(H5FD_gds_collection_t *c, const char *name, int ndims, const hsize_t count[],
                       uint64_t npoints, hid_t dcpl)
{
    int r = c->rank;
    if (H5Pisa_class(dcpl, H5P_DATASET_CREATE) <= 0) {
        ERR(H5E_ARGS, H5E_BADTYPE, "rank %d: dcpl is not a dataset creation property list (dataset '%s')", r,
            name);
        return false;
    }
    if (npoints == 0 || H5Pget_layout(dcpl) != H5D_CHUNKED)
        return true;
    hsize_t chunk[MAX_DIMS];
    int rank = H5Pget_chunk(dcpl, MAX_DIMS, chunk);
    if (rank != ndims) {
        ERR(H5E_ARGS, H5E_BADRANGE, "rank %d: the chunks of dcpl have %d dimensions, the dataset '%s' %d", r, rank,
            name, ndims);
        return false;
    }
    for (int d = 0; d < ndims; d++)
        if (chunk[d] > count[d]) {
            ERR(H5E_ARGS, H5E_BADRANGE,
                "rank %d: dimension %d: chunk size %llu exceeds the slab's count %llu (dataset '%s')", r, d,
                (unsigned long long)chunk[d], (unsigned long long)count[d], name);
            return false;
        }
    return true;
}

/* The rank's own checks of a write's arguments; fills `me`. */
static bool check_write_args(api_t *a, H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                             const hsize_t global_dims[], const hsize_t offset[], const hsize_t count[],
                             const void *buf, hid_t dcpl, slab_rec_t *me)
{
    int r = c->rank;
    memset(me, 0, sizeof *me);
    if (c->failed) {
        ERR(H5E_VFL, H5E_BADVALUE, "the collection has failed (an earlier write failed on some rank)");
        goto bad;
    }
    /* HDF5 calls first: they clear the error stack. */
    if (H5Iget_type(type) != H5I_DATATYPE) {
        ERR(H5E_ARGS, H5E_BADTYPE, "rank %d: type is not a datatype", r);
        goto bad;
    }
    size_t esize = H5Tget_size(type), enc_size = 0;
    hid_t copy = H5Tcopy(type);
    unsigned char *enc = NULL;
    bool encoded = copy >= 0 && H5Tencode(copy, NULL, &enc_size) >= 0 && (enc = malloc(enc_size)) &&
                   H5Tencode(copy, enc, &enc_size) >= 0;
    if (copy >= 0)
        H5Tclose(copy);
    if (!encoded || esize == 0) {
        free(enc);
        ERR(H5E_DATATYPE, H5E_CANTENCODE, "rank %d: cannot encode the datatype", r);
        goto bad;
    }
    me->type_hash = gds_fnv1a(GDS_FNV1A_START, enc, enc_size);
    free(enc);
    if (!name || !*name || !*relative_name(name)) {
        ERR(H5E_ARGS, H5E_BADVALUE, "rank %d: the dataset name is NULL, empty or the root group", r);
        goto bad;
    }
    if (ndims < 1 || ndims > MAX_DIMS) {
        ERR(H5E_ARGS, H5E_BADRANGE, "rank %d: ndims %d is outside 1..%d (dataset '%s')", r, ndims, MAX_DIMS, name);
        goto bad;
    }
    if (!global_dims || !offset || !count) {
        ERR(H5E_ARGS, H5E_BADVALUE, "rank %d: global_dims, offset or count is NULL (dataset '%s')", r, name);
        goto bad;
    }
    uint64_t npoints = 1;
    for (int d = 0; d < ndims; d++) {
        if (global_dims[d] == 0) {
            ERR(H5E_ARGS, H5E_BADRANGE, "rank %d: global_dims[%d] is 0 (dataset '%s')", r, d, name);
            goto bad;
        }
        if (offset[d] > global_dims[d] || count[d] > global_dims[d] - offset[d]) {
            ERR(H5E_ARGS, H5E_BADRANGE,
                "rank %d: dimension %d: offset %llu + count %llu exceeds the global size %llu (dataset '%s')", r, d,
                (unsigned long long)offset[d], (unsigned long long)count[d], (unsigned long long)global_dims[d],
                name);
            goto bad;
        }
        if (count[d] && npoints > UINT64_MAX / count[d]) {
            ERR(H5E_ARGS, H5E_OVERFLOW, "rank %d: the slab is too large (dataset '%s')", r, name);
            goto bad;
        }
        npoints *= count[d];
        me->dims[d] = global_dims[d];
        me->offset[d] = offset[d];
        me->count[d] = count[d];
    }
    if (npoints > SIZE_MAX / esize) {
        ERR(H5E_ARGS, H5E_OVERFLOW, "rank %d: the slab is too large for memory (dataset '%s')", r, name);
        goto bad;
    }
    if (npoints > 0 && !buf) {
        ERR(H5E_ARGS, H5E_BADVALUE, "rank %d: buf is NULL for a slab of %llu elements (dataset '%s')", r,
            (unsigned long long)npoints, name);
        goto bad;
    }
    if (dcpl != H5P_DEFAULT && !check_dcpl(c, name, ndims, count, npoints, dcpl))
        goto bad;
    for (dset_rec_t *d = c->dsets; d; d = d->next)
        if (strcmp(relative_name(d->name), relative_name(name)) == 0) {
            ERR(H5E_DATASET, H5E_EXISTS, "dataset '%s' was already written in this collection", name);
            goto bad;
        }
    me->ok = 1;
    me->ndims = ndims;
    me->name_hash = hash_string(relative_name(name));
    return true;
bad:
    api_keep(a);
    return false;
}

static bool slab_empty(const slab_rec_t *s)
{
    for (int d = 0; d < s->ndims; d++)
        if (s->count[d] == 0)
            return true;
    return false;
}

static bool slabs_overlap(const slab_rec_t *s, const slab_rec_t *t)
{
    for (int d = 0; d < s->ndims; d++)
        if (s->offset[d] >= t->offset[d] + t->count[d] || t->offset[d] >= s->offset[d] + s->count[d])
            return false;
    return true;
}

/* Ranks by the first offset of their slab, then by rank: a total order, so
 * every rank sorts alike. */
static int by_first_offset(const void *x, const void *y, void *arg)
{
    const slab_rec_t *recs = arg;
    int a = *(const int *)x, b = *(const int *)y;
    uint64_t p = recs[a].offset[0], q = recs[b].offset[0];
    return p != q ? (p > q) - (p < q) : (a > b) - (a < b);
}

/* Finds two overlapping non-empty slabs: a sweep along the first dimension
 * (n log n for the usual decompositions, n^2 at worst). */
static bool find_overlap(H5FD_gds_collection_t *c, int *first, int *second)
{
    const slab_rec_t *recs = c->recs;
    int n = c->size, *order = c->order;
    for (int r = 0; r < n; r++)
        order[r] = r;
    qsort_r(order, (size_t)n, sizeof *order, by_first_offset, (void *)recs);
    for (int i = 0; i < n; i++) {
        const slab_rec_t *s = &recs[order[i]];
        if (slab_empty(s))
            continue;
        for (int j = i + 1; j < n && recs[order[j]].offset[0] < s->offset[0] + s->count[0]; j++)
            if (!slab_empty(&recs[order[j]]) && slabs_overlap(s, &recs[order[j]])) {
                *first = order[i] < order[j] ? order[i] : order[j];
                *second = order[i] < order[j] ? order[j] : order[i];
                return true;
            }
    }
    return false;
}

/* Checks the gathered records: the same answer on every rank. Sets the
 * summary and returns false when the write must not happen. */
static bool check_gathered(api_t *a, H5FD_gds_collection_t *c, const char *name)
{
    const slab_rec_t *recs = c->recs, *r0 = &recs[0];
    int nbad = 0, first = -1;
    for (int r = 0; r < c->size; r++)
        if (!recs[r].ok && nbad++ == 0)
            first = r;
    const char *shown = name ? name : "(null)";
    if (nbad) {
        api_summary(a, "write of dataset '%s': invalid arguments on rank %d (%d of %d ranks); nothing was written",
                    shown, first, nbad, c->size);
        return false;
    }
    for (int r = 1; r < c->size; r++) {
        const char *what = NULL;
        if (recs[r].name_hash != r0->name_hash)
            what = "dataset names";
        else if (recs[r].type_hash != r0->type_hash)
            what = "datatypes";
        else if (recs[r].ndims != r0->ndims)
            what = "ndims";
        else if (memcmp(recs[r].dims, r0->dims, sizeof r0->dims) != 0)
            what = "global_dims";
        if (what) {
            api_summary(a, "write of dataset '%s': ranks 0 and %d were given different %s; nothing was written",
                        shown, r, what);
            return false;
        }
    }
    int r1, r2;
    if (find_overlap(c, &r1, &r2)) {
        api_summary(a, "write of dataset '%s': the slabs of ranks %d and %d overlap; nothing was written", shown, r1,
                    r2);
        return false;
    }
    return true;
}

/* Creates dataset `name` (the rank's slab) in the rank file and writes it. */
static bool write_slab(api_t *a, H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                       const hsize_t count[], const void *buf, hid_t user_dcpl)
{
    bool ok = false, empty = false, created = false;
    hid_t space = H5I_INVALID_HID, dcpl = H5I_INVALID_HID, lcpl = H5I_INVALID_HID, dset = H5I_INVALID_HID,
          dapl = H5I_INVALID_HID;
    for (int d = 0; d < ndims; d++)
        empty |= count[d] == 0;
    /* The application's layout (an empty slab cannot have chunks), with fill
     * never and early allocation; no chunk cache, so that chunks go straight
     * between the buffer and the file. */
    if (user_dcpl != H5P_DEFAULT && !empty)
        dcpl = H5Pcopy(user_dcpl);
    else
        dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if ((space = H5Screate_simple(ndims, count, NULL)) < 0 || dcpl < 0 || H5FD_gds_prepare_dcpl(dcpl) < 0 ||
        (dapl = H5FD_gds_create_dapl()) < 0 || (lcpl = H5Pcreate(H5P_LINK_CREATE)) < 0 ||
        H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        ERR(H5E_DATASET, H5E_CANTINIT, "rank %d: cannot prepare dataset '%s'", c->rank, name);
        goto done;
    }
    if ((dset = H5Dcreate2(c->file, name, type, space, lcpl, dcpl, dapl)) < 0) {
        ERR(H5E_DATASET, H5E_CANTCREATE, "rank %d cannot create dataset '%s' in its file '%s'", c->rank, name,
            c->rank_path);
        goto done;
    }
    created = true;
    if (!empty && H5Dwrite_gds(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        ERR(H5E_DATASET, H5E_WRITEERROR, "rank %d cannot write dataset '%s' to its file '%s'", c->rank, name,
            c->rank_path);
        goto done;
    }
    if (H5Dclose(dset) < 0) {
        dset = H5I_INVALID_HID;
        ERR(H5E_DATASET, H5E_CLOSEERROR, "rank %d cannot close dataset '%s' in '%s'", c->rank, name, c->rank_path);
        goto done;
    }
    dset = H5I_INVALID_HID;
    /* Metadata too: "disk full" shows now, on this call, not at finish. */
    if (H5Fflush(c->file, H5F_SCOPE_LOCAL) < 0) {
        ERR(H5E_FILE, H5E_WRITEERROR, "rank %d cannot flush its file '%s'", c->rank, c->rank_path);
        goto done;
    }
    ok = true;
done:
    if (!ok)
        api_keep(a);
    if (dset >= 0)
        H5Dclose(dset);
    /* A dataset that could not be written is deleted: its space (allocated
     * early, at the end of the file) is freed and the file shrinks back, so
     * that closing the file can still succeed. (HDF5 1.10 leaves a dangling
     * identifier when H5Fclose fails, and crashes at exit.) */
    if (!ok && created)
        H5Ldelete(c->file, name, H5P_DEFAULT);
    if (lcpl >= 0)
        H5Pclose(lcpl);
    if (dapl >= 0)
        H5Pclose(dapl);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return ok;
}

static herr_t collection_write(const char *api, H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                               const hsize_t global_dims[], const hsize_t offset[], const hsize_t count[],
                               const void *buf, hid_t dcpl);

herr_t H5FD_gds_mpi_write(H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                          const hsize_t global_dims[], const hsize_t offset[], const hsize_t count[], const void *buf)
{
    return collection_write(__func__, c, name, type, ndims, global_dims, offset, count, buf, H5P_DEFAULT);
}

herr_t H5FD_gds_mpi_write_dcpl(H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                               const hsize_t global_dims[], const hsize_t offset[], const hsize_t count[],
                               const void *buf, hid_t dcpl)
{
    return collection_write(__func__, c, name, type, ndims, global_dims, offset, count, buf, dcpl);
}

/* Both entry points (`api` names the one called, on the error stack). */
static herr_t collection_write(const char *api, H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                               const hsize_t global_dims[], const hsize_t offset[], const hsize_t count[],
                               const void *buf, hid_t dcpl)
{
    api_t a;
    api_enter(&a, api);
    if (!c) {
        ERR(H5E_ARGS, H5E_BADVALUE, "the collection is NULL");
        return api_leave(&a, true);
    }
    slab_rec_t me;
    bool ok = check_write_args(&a, c, name, type, ndims, global_dims, offset, count, buf, dcpl, &me);

    /* Everybody sees everybody's slab, and decides the same. */
    if (MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, c->recs, (int)sizeof me, MPI_BYTE, c->comm) != MPI_SUCCESS) {
        ERR(H5E_VFL, H5E_MPI, "rank %d: MPI_Allgather failed", c->rank);
        api_keep(&a);
        c->failed = true; /* the ranks may now disagree: the final agreement decides */
        ok = false;
    } else if (!check_gathered(&a, c, name)) {
        return api_leave(&a, true); /* same decision everywhere: nothing written, collection usable */
    }

    /* The record of the dataset (rank 0 keeps every slab, for the master). */
    dset_rec_t *d = NULL;
    if (ok) {
        d = calloc(1, sizeof *d);
        if (d) {
            d->type = H5I_INVALID_HID;
            d->name = strdup(name);
            d->ndims = ndims;
            memcpy(d->dims, global_dims, (size_t)ndims * sizeof(hsize_t));
        }
        if (d && c->rank == 0) {
            d->slabs = malloc((size_t)c->size * 2 * (size_t)ndims * sizeof(hsize_t));
            d->type = H5Tcopy(type);
            if (d->slabs)
                for (int r = 0; r < c->size; r++)
                    for (int k = 0; k < ndims; k++) {
                        d->slabs[((size_t)r * 2) * (size_t)ndims + (size_t)k] = c->recs[r].offset[k];
                        d->slabs[((size_t)r * 2 + 1) * (size_t)ndims + (size_t)k] = c->recs[r].count[k];
                    }
        }
        if (!d || !d->name || (c->rank == 0 && (!d->slabs || d->type < 0))) {
            ERR(H5E_RESOURCE, H5E_NOSPACE, "rank %d: out of memory", c->rank);
            api_keep(&a);
            ok = false;
        }
    }
    if (ok)
        ok = write_slab(&a, c, name, type, ndims, count, buf, dcpl);

    agreement_t ag = agree(&a, c->comm, c->rank, ok);
    if (ag.nfail) {
        c->failed = true;
        dset_rec_free(d);
        api_summary(&a,
                    "write of dataset '%s' failed on rank %d (%d of %d ranks failed); the collection has failed: "
                    "H5FD_gds_mpi_finish will write no master file",
                    name, ag.first, ag.nfail, c->size);
        return api_leave(&a, true);
    }
    *c->tail = d;
    c->tail = &d->next;
    return api_leave(&a, false);
}

herr_t H5FD_gds_mpi_finish(H5FD_gds_collection_t *c)
{
    api_t a;
    api_enter(&a, __func__);
    if (!c) {
        ERR(H5E_ARGS, H5E_BADVALUE, "the collection is NULL");
        return api_leave(&a, true);
    }
    /* 1. Every rank closes its file (which flushes it). */
    bool ok = !c->failed;
    if (c->file >= 0) {
        herr_t rc = H5Fclose(c->file);
        c->file = H5I_INVALID_HID;
        if (rc < 0 && ok) {
            ERR(H5E_FILE, H5E_CLOSEERROR, "rank %d cannot close (flush) its file '%s'", c->rank, c->rank_path);
            api_keep(&a);
            ok = false;
        }
    }
    agreement_t ag = agree(&a, c->comm, c->rank, ok);
    bool failed = ag.nfail > 0;
    if (failed && c->failed) {
        api_summary(&a, "the collection '%s' failed in an earlier write: no master file was written", c->master_path);
    } else if (failed) {
        char *path = rank_file_path(c->master_path, ag.first);
        api_summary(&a, "rank %d cannot close its file '%s' (%d of %d ranks failed): no master file was written",
                    ag.first, path ? path : "?", ag.nfail, c->size);
        free(path);
    } else {
        /* 2. Rank 0 writes the master; everybody learns whether it did. */
        ok = c->rank != 0 || write_master(&a, c);
        ag = agree(&a, c->comm, c->rank, ok);
        if (ag.nfail) {
            failed = true;
            api_summary(&a, "rank %d could not write the master file '%s': no master file was written", ag.first,
                        c->master_path);
        }
    }
    if (failed)
        remove_rank_file(c); /* nothing points at it */
    collection_free(c);
    return api_leave(&a, failed);
}
