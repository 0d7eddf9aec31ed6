/*
 * libh5gds_mpi: the master file rank 0 writes at H5FD_gds_mpi_finish: one
 * virtual dataset per written name, mapping every rank's slab.
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
bool write_master(api_t *a, H5FD_gds_collection_t *c)
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
