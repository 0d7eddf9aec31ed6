/*
 * libh5gds_mpi: H5FD_gds_mpi_read: each rank reads a slab, from its own file
 * when the slab is exactly what it wrote, otherwise through the master.
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
