/*
 * libh5gds_mpi: one rank per GPU, one file per rank, one logical dataset
 * (include/H5FDgds_mpi.h).
 *
 * Every collective call follows the same pattern, so that no rank can leave
 * early while the others wait in MPI:
 *   1. local work (argument checks, file I/O); a failure is recorded, not
 *      returned;
 *   2. agreement: MPI_Allreduce of the status (how many ranks failed, the
 *      lowest failing rank), on a private duplicate of the communicator
 *      with MPI_ERRORS_RETURN;
 *   3. every rank takes the same branch on the agreed status.
 *
 * Errors: the rank that fails pushes the reason on HDF5's error stack, under
 * the "h5gds-mpi" class, on top of HDF5's own errors. Each API function is a
 * public entry point (gds_api_enter/leave): a failed call prints its stack
 * once, on every rank, unless the application turned HDF5's printing off. Those are kept aside
 * (H5Eget_current_stack) while the call cleans up, because every HDF5 API
 * call clears the stack, and are put back at the end, topped by one message
 * that every rank gets: what failed and on which rank.
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

#include "H5FDgds_mpi.h"
#include "cuda_loader.h"
#include "gds_error.h"

#define MAX_DIMS H5S_MAX_RANK /* 32 */
#define TMP_SUFFIX ".h5gds-tmp"

/* ------------------------------------------------------------------------
 * Errors
 * --------------------------------------------------------------------- */

/* The MPI layer's own error class, through the shared helper (gds_error.h). */
static hid_t error_class_id = H5I_INVALID_HID;

#define ERR(major, minor, ...)                                                                                     \
    gds_error_push_class(&error_class_id, "h5gds-mpi", __func__, __LINE__, (major), (minor), __VA_ARGS__)

/* State of one API call: a public entry point (gds_api_enter: HDF5's
 * automatic printing is off while it runs, the stack is reported once at
 * its end), the first failure's error stack kept aside, and a summary
 * pushed last. */
typedef struct api {
    const char *func;
    hid_t saved;        /* the error stack of the first local failure */
    char summary[1024]; /* what every rank reports when the call fails */
} api_t;

static void api_enter(api_t *a, const char *func)
{
    memset(a, 0, sizeof *a);
    a->func = func;
    a->saved = H5I_INVALID_HID;
    gds_api_enter();
}

/* Call right after pushing an error: keeps the current stack (HDF5's errors
 * and ours) for the end of the call. Later errors of the same call are
 * consequences and are dropped. */
static void api_keep(api_t *a)
{
    if (a->saved < 0)
        a->saved = H5Eget_current_stack();
    else
        H5Eclear2(H5E_DEFAULT);
}

__attribute__((format(printf, 2, 3))) static void api_summary(api_t *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->summary, sizeof a->summary, fmt, ap);
    va_end(ap);
}

/* Ends the call: no HDF5 API call may follow (it would clear the stack). */
static herr_t api_leave(api_t *a, bool failed)
{
    if (a->saved >= 0) {
        if (failed)
            H5Eset_current_stack(a->saved);
        else
            H5Eclose_stack(a->saved);
        a->saved = H5I_INVALID_HID;
    }
    if (failed && a->summary[0])
        gds_error_push_class(&error_class_id, "h5gds-mpi", a->func, __LINE__, H5E_VFL, H5E_CANTOPERATE, "%s",
                             a->summary);
    return gds_api_leave(failed) ? -1 : 0;
}

/* ------------------------------------------------------------------------
 * Helpers
 * --------------------------------------------------------------------- */

/* Outcome of a collective step, the same on every rank. */
typedef struct agreement {
    int nfail; /* ranks that failed (0: all succeeded) */
    int first; /* the lowest failing rank */
} agreement_t;

/* MPI_Allreduce of the status: how many ranks failed, and the first one. An
 * MPI error counts as a failure of this rank. */
static agreement_t agree(api_t *a, MPI_Comm comm, int rank, bool ok)
{
    int mine[2] = {ok ? 0 : 1, ok ? INT_MAX : rank}, sum = 0, low = INT_MAX;
    agreement_t r = {0, INT_MAX};
    if (MPI_Allreduce(&mine[0], &sum, 1, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS ||
        MPI_Allreduce(&mine[1], &low, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
        ERR(H5E_VFL, H5E_MPI, "rank %d: MPI_Allreduce of the status failed", rank);
        api_keep(a);
        r.nfail = 1;
        r.first = rank;
        return r;
    }
    r.nfail = sum;
    r.first = low;
    return r;
}

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t hash_string(const char *s)
{
    return hash_bytes(0xcbf29ce484222325ULL, s, strlen(s));
}

/* "<master without .h5>.rank<r>.h5" */
static char *rank_file_path(const char *master, int rank)
{
    size_t n = strlen(master), stem = n;
    if (n > 3 && strcmp(master + n - 3, ".h5") == 0)
        stem = n - 3;
    size_t size = stem + 32;
    char *p = malloc(size);
    if (p)
        snprintf(p, size, "%.*s.rank%d.h5", (int)stem, master, rank);
    return p;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static char *concat(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *p = malloc(na + nb + 1);
    if (p) {
        memcpy(p, a, na);
        memcpy(p + na, b, nb + 1);
    }
    return p;
}

/* VDS source names are printf-like ("%b" = block number): '%' is doubled. */
static char *vds_escape(const char *s)
{
    size_t n = strlen(s), extra = 0;
    for (size_t i = 0; i < n; i++)
        extra += s[i] == '%';
    char *p = malloc(n + extra + 1), *q = p;
    if (!p)
        return NULL;
    for (size_t i = 0; i <= n; i++) {
        *q++ = s[i];
        if (s[i] == '%')
            *q++ = '%';
    }
    return p;
}

/* Dataset names compare without their leading '/'. */
static const char *relative_name(const char *name)
{
    while (*name == '/')
        name++;
    return name;
}

static bool is_file_access_plist(hid_t fapl)
{
    return fapl >= 0 && H5Pisa_class(fapl, H5P_FILE_ACCESS) > 0;
}

/* A copy of `fapl`, or the gds driver with its defaults for H5P_DEFAULT. */
static hid_t fapl_for(api_t *a, hid_t fapl)
{
    hid_t p = H5I_INVALID_HID;
    if (fapl == H5P_DEFAULT) {
        p = H5Pcreate(H5P_FILE_ACCESS);
        if (p < 0 || H5Pset_fapl_gds(p, 0, 0, 0) < 0) {
            ERR(H5E_PLIST, H5E_CANTCREATE, "cannot create a file access property list for the gds driver");
            api_keep(a);
            if (p >= 0)
                H5Pclose(p);
            return H5I_INVALID_HID;
        }
        return p;
    }
    if (!is_file_access_plist(fapl)) {
        ERR(H5E_ARGS, H5E_BADTYPE, "fapl is not a file access property list");
        api_keep(a);
        return H5I_INVALID_HID;
    }
    if ((p = H5Pcopy(fapl)) < 0) {
        ERR(H5E_PLIST, H5E_CANTCOPY, "cannot copy the file access property list");
        api_keep(a);
    }
    return p;
}

static MPI_Comm private_comm(api_t *a, MPI_Comm comm)
{
    MPI_Comm dup = MPI_COMM_NULL;
    if (comm == MPI_COMM_NULL) {
        ERR(H5E_ARGS, H5E_BADVALUE, "the communicator is MPI_COMM_NULL");
        api_keep(a);
        return MPI_COMM_NULL;
    }
    if (MPI_Comm_dup(comm, &dup) != MPI_SUCCESS) {
        ERR(H5E_VFL, H5E_MPI, "MPI_Comm_dup failed");
        api_keep(a);
        return MPI_COMM_NULL;
    }
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    return dup;
}

/* ------------------------------------------------------------------------
 * The collection
 * --------------------------------------------------------------------- */

/* What each rank contributes to a write, gathered on every rank. */
typedef struct slab_rec {
    int32_t ok;    /* the rank's own argument checks passed */
    int32_t ndims;
    uint64_t name_hash;
    uint64_t type_hash;
    uint64_t dims[MAX_DIMS];
    uint64_t offset[MAX_DIMS];
    uint64_t count[MAX_DIMS];
} slab_rec_t;

/* A dataset written in the collection. */
typedef struct dset_rec {
    struct dset_rec *next;
    char *name;
    hid_t type;      /* rank 0: the type of the virtual dataset */
    int ndims;
    hsize_t dims[MAX_DIMS];
    hsize_t *slabs;  /* rank 0: for each rank, offset[ndims] then count[ndims] */
} dset_rec_t;

struct H5FD_gds_collection_t {
    MPI_Comm comm;     /* private duplicate, MPI_ERRORS_RETURN */
    int rank, size;
    char *master_path;
    char *rank_path;
    hid_t fapl;
    hid_t file;        /* this rank's file */
    bool created;      /* this rank created rank_path */
    bool failed;       /* an I/O step failed on some rank: finish fails */
    slab_rec_t *recs;  /* size records, for the Allgather of each write */
    int *order;        /* size ranks, sorted by slab offset (overlap check) */
    dset_rec_t *dsets, **tail;
};

static void dset_rec_free(dset_rec_t *d)
{
    if (!d)
        return;
    if (d->type >= 0)
        H5Tclose(d->type);
    free(d->slabs);
    free(d->name);
    free(d);
}

static void collection_free(H5FD_gds_collection_t *c)
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
static void remove_rank_file(H5FD_gds_collection_t *c)
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
    me->type_hash = hash_bytes(0xcbf29ce484222325ULL, enc, enc_size);
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

herr_t H5FD_gds_mpi_write(H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                          const hsize_t global_dims[], const hsize_t offset[], const hsize_t count[], const void *buf)
{
    return H5FD_gds_mpi_write_dcpl(c, name, type, ndims, global_dims, offset, count, buf, H5P_DEFAULT);
}

herr_t H5FD_gds_mpi_write_dcpl(H5FD_gds_collection_t *c, const char *name, hid_t type, int ndims,
                               const hsize_t global_dims[], const hsize_t offset[], const hsize_t count[],
                               const void *buf, hid_t dcpl)
{
    api_t a;
    api_enter(&a, __func__);
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

/* Rank 0: one virtual dataset mapping every rank's slab. */
static bool write_vds(api_t *a, const H5FD_gds_collection_t *c, hid_t file, const dset_rec_t *d)
{
    bool ok = false;
    int nd = d->ndims;
    hid_t space = H5I_INVALID_HID, vsel = H5I_INVALID_HID, src = H5I_INVALID_HID, dcpl = H5I_INVALID_HID,
          lcpl = H5I_INVALID_HID, dset = H5I_INVALID_HID;
    char *src_dset = vds_escape(d->name), *path = NULL, *src_file = NULL;
    if (!src_dset) {
        ERR(H5E_RESOURCE, H5E_NOSPACE, "out of memory");
        goto done;
    }
    if ((space = H5Screate_simple(nd, d->dims, NULL)) < 0 || (vsel = H5Scopy(space)) < 0 ||
        (dcpl = H5Pcreate(H5P_DATASET_CREATE)) < 0 || H5Pset_layout(dcpl, H5D_VIRTUAL) < 0 ||
        (lcpl = H5Pcreate(H5P_LINK_CREATE)) < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        ERR(H5E_DATASET, H5E_CANTINIT, "cannot prepare the virtual dataset '%s'", d->name);
        goto done;
    }
    for (int r = 0; r < c->size; r++) {
        const hsize_t *off = d->slabs + (size_t)r * 2 * (size_t)nd, *cnt = off + nd;
        bool empty = false;
        for (int k = 0; k < nd; k++)
            empty |= cnt[k] == 0;
        if (empty)
            continue;
        /* The source file without a directory: found next to the master. */
        free(path);
        free(src_file);
        src_file = NULL;
        if (!(path = rank_file_path(c->master_path, r)) || !(src_file = vds_escape(base_name(path)))) {
            ERR(H5E_RESOURCE, H5E_NOSPACE, "out of memory");
            goto done;
        }
        if (H5Sselect_hyperslab(vsel, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
            (src = H5Screate_simple(nd, cnt, NULL)) < 0 || H5Pset_virtual(dcpl, vsel, src_file, src_dset, src) < 0) {
            ERR(H5E_DATASET, H5E_CANTSET, "cannot map the slab of rank %d into the virtual dataset '%s'", r,
                d->name);
            goto done;
        }
        H5Sclose(src);
        src = H5I_INVALID_HID;
    }
    if ((dset = H5Dcreate2(file, d->name, d->type, space, lcpl, dcpl, H5P_DEFAULT)) < 0) {
        ERR(H5E_DATASET, H5E_CANTCREATE, "cannot create the virtual dataset '%s' in the master file", d->name);
        goto done;
    }
    if (H5Dclose(dset) < 0) {
        dset = H5I_INVALID_HID;
        ERR(H5E_DATASET, H5E_CLOSEERROR, "cannot close the virtual dataset '%s'", d->name);
        goto done;
    }
    dset = H5I_INVALID_HID;
    ok = true;
done:
    if (!ok)
        api_keep(a);
    if (dset >= 0)
        H5Dclose(dset);
    if (src >= 0)
        H5Sclose(src);
    if (lcpl >= 0)
        H5Pclose(lcpl);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (vsel >= 0)
        H5Sclose(vsel);
    if (space >= 0)
        H5Sclose(space);
    free(src_dset);
    free(src_file);
    free(path);
    return ok;
}

/* Rank 0: checks that every rank file is visible, writes the master under a
 * temporary name, renames it into place. */
static bool write_master(api_t *a, H5FD_gds_collection_t *c)
{
    for (int r = 0; r < c->size; r++) {
        char *path = rank_file_path(c->master_path, r);
        struct stat st;
        if (!path) {
            ERR(H5E_RESOURCE, H5E_NOSPACE, "out of memory");
            api_keep(a);
            return false;
        }
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            ERR(H5E_FILE, H5E_NOTFOUND,
                "rank 0 does not see the file '%s' of rank %d (%s): the master would point at missing data "
                "(do all ranks write to one shared file system?)",
                path, r, errno ? strerror(errno) : "not a regular file");
            free(path);
            api_keep(a);
            return false;
        }
        free(path);
    }
    char *tmp = concat(c->master_path, TMP_SUFFIX);
    if (!tmp) {
        ERR(H5E_RESOURCE, H5E_NOSPACE, "out of memory");
        api_keep(a);
        return false;
    }
    bool ok = false;
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, c->fapl);
    if (f < 0) {
        ERR(H5E_FILE, H5E_CANTCREATE, "rank 0 cannot create the master file under its temporary name '%s'", tmp);
        api_keep(a);
        free(tmp);
        return false;
    }
    bool written = true;
    for (dset_rec_t *d = c->dsets; d && written; d = d->next)
        written = write_vds(a, c, f, d);
    if (H5Fclose(f) < 0 && written) {
        ERR(H5E_FILE, H5E_CLOSEERROR, "rank 0 cannot close the master file '%s'", tmp);
        api_keep(a);
        written = false;
    }
    if (written && rename(tmp, c->master_path) != 0) {
        ERR(H5E_FILE, H5E_CANTRENAME, "rank 0 cannot rename '%s' to '%s': %s", tmp, c->master_path,
            strerror(errno));
        api_keep(a);
    } else if (written) {
        ok = true;
    }
    if (!ok)
        unlink(tmp);
    free(tmp);
    return ok;
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

/* ------------------------------------------------------------------------
 * Reading
 * --------------------------------------------------------------------- */

static char *virtual_string(hid_t dcpl, size_t i, bool file)
{
    ssize_t n = file ? H5Pget_virtual_filename(dcpl, i, NULL, 0) : H5Pget_virtual_dsetname(dcpl, i, NULL, 0);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    ssize_t got = file ? H5Pget_virtual_filename(dcpl, i, s, (size_t)n + 1)
                       : H5Pget_virtual_dsetname(dcpl, i, s, (size_t)n + 1);
    if (got < 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* Undoes vds_escape; false when the name uses printf-like patterns. */
static bool vds_unescape(char *s)
{
    char *q = s;
    for (char *p = s; *p; p++) {
        if (*p == '%') {
            if (p[1] != '%')
                return false;
            p++;
        }
        *q++ = *p;
    }
    *q = '\0';
    return true;
}

/* Whether HDF5 will find a VDS source file: next to the master, or as given. */
static bool source_file_exists(const char *master, const char *file)
{
    /* HDF5_VDS_PREFIX (or a dapl prefix) may point elsewhere: let HDF5 look. */
    const char *prefix = getenv("HDF5_VDS_PREFIX");
    if ((prefix && *prefix) || strcmp(file, ".") == 0 || access(file, R_OK) == 0)
        return true;
    if (file[0] == '/')
        return false;
    const char *slash = strrchr(master, '/');
    if (!slash)
        return false;
    size_t dir = (size_t)(slash - master) + 1, n = strlen(file);
    char *p = malloc(dir + n + 1);
    if (!p)
        return true; /* cannot tell: let HDF5 try */
    memcpy(p, master, dir);
    memcpy(p + dir, file, n + 1);
    bool found = access(p, R_OK) == 0;
    free(p);
    return found;
}

typedef struct read_args {
    const char *master_path, *name;
    hid_t type;
    int ndims;
    const hsize_t *offset, *count;
    void *buf;
    hid_t fapl;
    int rank;
} read_args_t;

/* Looks at the master's mappings that the request touches: `*own` when the
 * request is exactly one mapping, to this rank's file; fails when a source
 * file the request needs is missing (HDF5 would return fill values). */
static bool inspect_mappings(api_t *a, const read_args_t *q, hid_t dcpl, bool *own)
{
    size_t n = 0;
    int nd = q->ndims;
    bool ok = false;
    char *my_path = rank_file_path(q->master_path, q->rank), *my_file = my_path ? vds_escape(base_name(my_path)) : NULL;
    char *file = NULL, *dset = NULL;
    hid_t vs = H5I_INVALID_HID;
    *own = false;
    if (!my_file) {
        ERR(H5E_RESOURCE, H5E_NOSPACE, "out of memory");
        goto done;
    }
    if (H5Pget_virtual_count(dcpl, &n) < 0) {
        ERR(H5E_DATASET, H5E_CANTGET, "cannot read the mappings of the virtual dataset '%s'", q->name);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        hsize_t start[MAX_DIMS], end[MAX_DIMS];
        hssize_t npoints;
        if ((vs = H5Pget_virtual_vspace(dcpl, i)) < 0 || H5Sget_simple_extent_ndims(vs) != nd ||
            (npoints = H5Sget_select_npoints(vs)) < 0) {
            ERR(H5E_DATASET, H5E_CANTGET, "cannot read mapping %zu of the virtual dataset '%s'", i, q->name);
            goto done;
        }
        if (npoints == 0) {
            H5Sclose(vs);
            vs = H5I_INVALID_HID;
            continue;
        }
        if (H5Sget_select_bounds(vs, start, end) < 0) {
            ERR(H5E_DATASET, H5E_CANTGET, "cannot read mapping %zu of the virtual dataset '%s'", i, q->name);
            goto done;
        }
        H5Sclose(vs);
        vs = H5I_INVALID_HID;
        bool touches = true, exact = true;
        uint64_t box = 1;
        for (int k = 0; k < nd; k++) {
            hsize_t lo = q->offset[k], hi = q->offset[k] + q->count[k]; /* [lo, hi) */
            touches &= start[k] < hi && end[k] >= lo;
            exact &= start[k] == lo && end[k] + 1 == hi;
            box *= end[k] - start[k] + 1;
        }
        if (!touches)
            continue;
        if (!(file = virtual_string(dcpl, i, true)) || !(dset = virtual_string(dcpl, i, false))) {
            ERR(H5E_DATASET, H5E_CANTGET, "cannot read the source of mapping %zu of '%s'", i, q->name);
            goto done;
        }
        if (exact && box == (uint64_t)npoints && strcmp(file, my_file) == 0) {
            char *my_dset = vds_escape(q->name);
            *own = my_dset && strcmp(relative_name(dset), relative_name(my_dset)) == 0;
            free(my_dset);
        }
        if (!*own && vds_unescape(file) && !source_file_exists(q->master_path, file)) {
            ERR(H5E_FILE, H5E_NOTFOUND,
                "rank %d: the file '%s' holding part of the requested slab of '%s' is missing (it should be next to "
                "the master '%s')",
                q->rank, file, q->name, q->master_path);
            goto done;
        }
        free(file);
        free(dset);
        file = dset = NULL;
        if (*own)
            break;
    }
    ok = true;
done:
    if (!ok)
        api_keep(a);
    if (vs >= 0)
        H5Sclose(vs);
    free(file);
    free(dset);
    free(my_file);
    free(my_path);
    return ok;
}

/* Reads the whole of dataset `name` of this rank's own file. */
static bool read_own(api_t *a, const read_args_t *q, hid_t fapl)
{
    bool ok = false;
    char *path = rank_file_path(q->master_path, q->rank);
    hid_t f = H5I_INVALID_HID, d = H5I_INVALID_HID, s = H5I_INVALID_HID, dapl = H5I_INVALID_HID;
    hsize_t dims[MAX_DIMS];
    if (!path) {
        ERR(H5E_RESOURCE, H5E_NOSPACE, "out of memory");
        goto done;
    }
    if ((dapl = H5FD_gds_create_dapl()) < 0 || (f = H5Fopen(path, H5F_ACC_RDONLY, fapl)) < 0 ||
        (d = H5Dopen2(f, q->name, dapl)) < 0) {
        ERR(H5E_FILE, H5E_CANTOPENFILE, "rank %d cannot open dataset '%s' of its file '%s'", q->rank, q->name, path);
        goto done;
    }
    if ((s = H5Dget_space(d)) < 0 || H5Sget_simple_extent_dims(s, dims, NULL) != q->ndims ||
        memcmp(dims, q->count, (size_t)q->ndims * sizeof(hsize_t)) != 0) {
        ERR(H5E_DATASET, H5E_BADVALUE, "rank %d: dataset '%s' of '%s' does not have the shape the master maps",
            q->rank, q->name, path);
        goto done;
    }
    if (H5Dread_gds(d, q->type, H5S_ALL, H5S_ALL, H5P_DEFAULT, q->buf) < 0) {
        ERR(H5E_DATASET, H5E_READERROR, "rank %d cannot read dataset '%s' of its file '%s'", q->rank, q->name, path);
        goto done;
    }
    ok = true;
done:
    if (!ok)
        api_keep(a);
    if (s >= 0)
        H5Sclose(s);
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
    if (dapl >= 0)
        H5Pclose(dapl);
    free(path);
    return ok;
}

static bool read_local(api_t *a, const read_args_t *q)
{
    bool ok = false, own = false;
    hid_t fapl = H5I_INVALID_HID, f = H5I_INVALID_HID, d = H5I_INVALID_HID, space = H5I_INVALID_HID,
          mem = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
    hsize_t dims[MAX_DIMS];
    uint64_t npoints = 1;
    if (H5Iget_type(q->type) != H5I_DATATYPE) {
        ERR(H5E_ARGS, H5E_BADTYPE, "rank %d: type is not a datatype", q->rank);
        goto fail;
    }
    if (!q->master_path || !*q->master_path || !q->name || !*q->name) {
        ERR(H5E_ARGS, H5E_BADVALUE, "rank %d: the master path or the dataset name is NULL or empty", q->rank);
        goto fail;
    }
    if (q->ndims < 1 || q->ndims > MAX_DIMS || !q->offset || !q->count) {
        ERR(H5E_ARGS, H5E_BADRANGE, "rank %d: ndims %d is outside 1..%d, or offset/count is NULL", q->rank, q->ndims,
            MAX_DIMS);
        goto fail;
    }
    for (int k = 0; k < q->ndims; k++)
        npoints *= q->count[k];
    if (npoints > 0 && !q->buf) {
        ERR(H5E_ARGS, H5E_BADVALUE, "rank %d: buf is NULL", q->rank);
        goto fail;
    }
    if ((fapl = fapl_for(a, q->fapl)) < 0)
        goto done;
    if ((f = H5Fopen(q->master_path, H5F_ACC_RDONLY, fapl)) < 0) {
        ERR(H5E_FILE, H5E_CANTOPENFILE, "rank %d cannot open the master file '%s'", q->rank, q->master_path);
        goto fail;
    }
    if ((d = H5Dopen2(f, q->name, H5P_DEFAULT)) < 0) {
        ERR(H5E_DATASET, H5E_CANTOPENOBJ, "rank %d: no dataset '%s' in the master file '%s'", q->rank, q->name,
            q->master_path);
        goto fail;
    }
    int nd;
    if ((space = H5Dget_space(d)) < 0 || (nd = H5Sget_simple_extent_dims(space, dims, NULL)) < 0) {
        ERR(H5E_DATASET, H5E_CANTGET, "rank %d cannot get the dataspace of '%s'", q->rank, q->name);
        goto fail;
    }
    if (nd != q->ndims) {
        ERR(H5E_ARGS, H5E_BADRANGE, "rank %d: dataset '%s' has %d dimensions, not %d", q->rank, q->name, nd,
            q->ndims);
        goto fail;
    }
    for (int k = 0; k < nd; k++)
        if (q->offset[k] > dims[k] || q->count[k] > dims[k] - q->offset[k]) {
            ERR(H5E_ARGS, H5E_BADRANGE,
                "rank %d: dimension %d: offset %llu + count %llu exceeds the size %llu of dataset '%s'", q->rank, k,
                (unsigned long long)q->offset[k], (unsigned long long)q->count[k], (unsigned long long)dims[k],
                q->name);
            goto fail;
        }
    if (npoints == 0) {
        ok = true;
        goto done;
    }
    if ((dcpl = H5Dget_create_plist(d)) < 0) {
        ERR(H5E_DATASET, H5E_CANTGET, "rank %d cannot get the creation properties of '%s'", q->rank, q->name);
        goto fail;
    }
    if (H5Pget_layout(dcpl) == H5D_VIRTUAL && !inspect_mappings(a, q, dcpl, &own))
        goto done;
    if (own) {
        /* Close the master first: its VDS may hold the rank file open. */
        H5Pclose(dcpl);
        H5Sclose(space);
        H5Dclose(d);
        H5Fclose(f);
        dcpl = space = d = f = H5I_INVALID_HID;
        ok = read_own(a, q, fapl);
        goto done;
    }
    if ((mem = H5Screate_simple(q->ndims, q->count, NULL)) < 0 ||
        H5Sselect_hyperslab(space, H5S_SELECT_SET, q->offset, NULL, q->count, NULL) < 0) {
        ERR(H5E_DATASPACE, H5E_CANTSELECT, "rank %d cannot select the slab of '%s'", q->rank, q->name);
        goto fail;
    }
    if (H5Dread_gds(d, q->type, mem, space, H5P_DEFAULT, q->buf) < 0) {
        ERR(H5E_DATASET, H5E_READERROR, "rank %d cannot read its slab of '%s' through the master file '%s'", q->rank,
            q->name, q->master_path);
        goto fail;
    }
    ok = true;
    goto done;
fail:
    api_keep(a);
done:
    if (mem >= 0)
        H5Sclose(mem);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
    if (fapl >= 0)
        H5Pclose(fapl);
    return ok;
}

herr_t H5FD_gds_mpi_read(MPI_Comm comm, const char *master_path, const char *name, hid_t type, int ndims,
                         const hsize_t offset[], const hsize_t count[], void *buf, hid_t fapl)
{
    api_t a;
    api_enter(&a, __func__);
    MPI_Comm dup = private_comm(&a, comm);
    if (dup == MPI_COMM_NULL)
        return api_leave(&a, true);
    read_args_t q = {master_path, name, type, ndims, offset, count, buf, fapl, 0};
    int size = 1;
    MPI_Comm_rank(dup, &q.rank);
    MPI_Comm_size(dup, &size);
    bool ok = read_local(&a, &q);
    agreement_t ag = agree(&a, dup, q.rank, ok);
    if (ag.nfail)
        api_summary(&a, "read of dataset '%s' of '%s' failed on rank %d (%d of %d ranks failed)",
                    name ? name : "(null)", master_path ? master_path : "(null)", ag.first, ag.nfail, size);
    MPI_Comm_free(&dup);
    return api_leave(&a, ag.nfail > 0);
}

/* ------------------------------------------------------------------------
 * Device selection
 * --------------------------------------------------------------------- */

int H5FD_gds_mpi_local_rank(MPI_Comm comm)
{
    api_t a;
    api_enter(&a, __func__);
    MPI_Comm node = MPI_COMM_NULL;
    int local = -1;
    if (comm == MPI_COMM_NULL) {
        ERR(H5E_ARGS, H5E_BADVALUE, "the communicator is MPI_COMM_NULL");
        api_leave(&a, true);
        return -1;
    }
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS ||
        MPI_Comm_rank(node, &local) != MPI_SUCCESS) {
        ERR(H5E_VFL, H5E_MPI, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
        if (node != MPI_COMM_NULL)
            MPI_Comm_free(&node);
        api_leave(&a, true);
        return -1;
    }
    MPI_Comm_free(&node);
    int n = gds_cuda_device_count(); /* 0 without a usable CUDA driver */
    api_leave(&a, false);
    return n > 0 ? local % n : local;
}
