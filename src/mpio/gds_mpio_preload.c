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
 * H5GDS_CONFIG. H5GDS_MPIO_PRELOAD=off passes both calls to HDF5 unchanged.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "H5FDgds_mpio.h"

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
