/*
 * libh5gds_mpio_preload.so: runs an unmodified parallel-HDF5 program on the
 * gds_mpio driver.
 *
 *   LD_PRELOAD=/path/libh5gds_mpio_preload.so mpirun -np 4 ./app
 *   mpirun -np 4 -x LD_PRELOAD=/path/libh5gds_mpio_preload.so ./app
 *
 * Preloaded, its definitions come first in the symbol lookup: the program's
 * H5Pset_fapl_mpio(fapl, comm, info) becomes H5Pset_fapl_gds_mpio(fapl, comm,
 * info), same communicator and info; H5Pget_fapl_mpio answers for a fapl of
 * either driver (HDF5's own refuses any driver but mpio). Engine settings:
 * H5GDS_CONFIG.
 *
 * H5Dwrite / H5Dread with a device buffer go through the checked calls of
 * src/vfd/gds_dataset.c (a copy compiled in here): the buffer reaches the
 * driver when HDF5 will not touch it with the CPU (same types, no filters,
 * no transform, selection I/O on, ...), and is otherwise staged through
 * pinned host memory on that rank, so a type conversion or a filter never
 * makes HDF5's CPU read device memory. Staging changes nothing in the
 * calls' collective structure: every rank makes the same H5Dwrite.
 * H5GDS_MPIO_PRELOAD=off passes every call to HDF5 unchanged.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "H5FDgds_mpio.h"
#include "../engine/engine.h"

#define EXPORT __attribute__((visibility("default")))

static bool preload_off(void)
{
    const char *v = getenv("H5GDS_MPIO_PRELOAD");
    return v && (!strcmp(v, "off") || !strcmp(v, "0"));
}

typedef herr_t (*set_fapl_mpio_t)(hid_t, MPI_Comm, MPI_Info);
typedef herr_t (*get_fapl_mpio_t)(hid_t, MPI_Comm *, MPI_Info *);

/* HDF5's own definition, the next one in the lookup order. */
static void *next_symbol(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

EXPORT herr_t H5Pset_fapl_mpio(hid_t fapl_id, MPI_Comm comm, MPI_Info info)
{
    if (preload_off()) {
        set_fapl_mpio_t next = (set_fapl_mpio_t)next_symbol("H5Pset_fapl_mpio");
        return next ? next(fapl_id, comm, info) : -1;
    }
    return H5Pset_fapl_gds_mpio(fapl_id, comm, info);
}

EXPORT herr_t H5Pget_fapl_mpio(hid_t fapl_id, MPI_Comm *comm, MPI_Info *info)
{
    hid_t ours = H5FD_gds_mpio_init();
    if (!preload_off() && ours >= 0 && H5Pget_driver(fapl_id) == ours)
        return H5Pget_fapl_gds_mpio(fapl_id, comm, info);
    get_fapl_mpio_t next = (get_fapl_mpio_t)next_symbol("H5Pget_fapl_mpio");
    return next ? next(fapl_id, comm, info) : -1;
}

typedef herr_t (*dwrite_t)(hid_t, hid_t, hid_t, hid_t, hid_t, const void *);
typedef herr_t (*dread_t)(hid_t, hid_t, hid_t, hid_t, hid_t, void *);

/* The checked calls call H5Dwrite/H5Dread again: those reach HDF5's. */
static _Thread_local bool inside;

static bool device_buffer(const void *buf)
{
    gds_buffer_info_t info;
    return buf && gds_classify_buffer(buf, &info) && info.kind == GDS_MEMORY_DEVICE;
}

EXPORT herr_t H5Dwrite(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, const void *buf)
{
    static dwrite_t next;
    if (!next)
        next = (dwrite_t)next_symbol("H5Dwrite");
    if (!inside && !preload_off() && device_buffer(buf)) {
        inside = true;
        herr_t rc = H5Dwrite_gds(dset, mem_type, mem_space, file_space, dxpl, buf);
        inside = false;
        return rc;
    }
    return next ? next(dset, mem_type, mem_space, file_space, dxpl, buf) : -1;
}

EXPORT herr_t H5Dread(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void *buf)
{
    static dread_t next;
    if (!next)
        next = (dread_t)next_symbol("H5Dread");
    if (!inside && !preload_off() && device_buffer(buf)) {
        inside = true;
        herr_t rc = H5Dread_gds(dset, mem_type, mem_space, file_space, dxpl, buf);
        inside = false;
        return rc;
    }
    return next ? next(dset, mem_type, mem_space, file_space, dxpl, buf) : -1;
}
