/*
 * The gds_mpio driver's registration (shared with a plugin copy of the
 * library), its termination, the plugin entry points, and its file access
 * lists: H5Pset/get_fapl_gds_mpio* (MPI parameters and engine settings) and
 * the class's fapl callbacks.
 */
#include "gds_mpio_internal.h"

#include <stdlib.h>

#include <H5PLextern.h>

#include "../vfd/gds_config.h"
#include "../vfd/gds_error.h"

#define API_LEAVE(failed) (gds_api_leave(failed) ? -1 : 0)

static hid_t driver_id = H5I_INVALID_HID;

hid_t gds_mpio_driver_id(void)
{
    if (H5Iget_type(driver_id) == H5I_VFL)
        return driver_id;
    hid_t id = H5I_INVALID_HID;
    /* Loaded as a plugin and linked too: share the id HDF5 already has. */
    if (H5FDis_driver_registered_by_value(H5FD_GDS_MPIO_VALUE) > 0) {
        hid_t scratch = H5Pcreate(H5P_FILE_ACCESS);
        if (scratch >= 0 && H5Pset_driver_by_value(scratch, H5FD_GDS_MPIO_VALUE, NULL) >= 0)
            id = H5Pget_driver(scratch);
        if (scratch >= 0)
            H5Pclose(scratch);
    }
    if (id < 0)
        id = H5FDregister(&H5FD_gds_mpio_class);
    if (id < 0)
        MPIO_ERROR(H5E_VFL, H5E_CANTREGISTER, "cannot register the gds_mpio driver");
    driver_id = id;
    return id;
}

herr_t gds_mpio_term(void)
{
    driver_id = H5I_INVALID_HID;
    gds_engine_shutdown();
    return 0;
}

/* ---- fapl driver info: the engine configuration ---- */

void *gds_mpio_fapl_copy(const void *info)
{
    H5FD_gds_config_t *copy = malloc(sizeof *copy);
    if (!copy) {
        MPIO_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory copying the gds_mpio configuration");
        return NULL;
    }
    *copy = *(const H5FD_gds_config_t *)info;
    return copy;
}

herr_t gds_mpio_fapl_free(void *info)
{
    free(info);
    return 0;
}

void *gds_mpio_fapl_get(H5FD_t *_file)
{
    const gds_mpio_file_t *file = (const gds_mpio_file_t *)_file;
    if (!file->config_from_info)
        return NULL;
    return gds_mpio_fapl_copy(&file->config);
}


hid_t H5FD_gds_mpio_init(void)
{
    gds_api_enter();
    hid_t id = gds_mpio_driver_id();
    gds_api_leave(id < 0);
    return id;
}

static herr_t check_fapl(hid_t fapl_id, bool ours)
{
    if (H5Pisa_class(fapl_id, H5P_FILE_ACCESS) <= 0) {
        MPIO_ERROR(H5E_ARGS, H5E_BADTYPE, "not a file access property list");
        return -1;
    }
    if (!ours)
        return 0;
    hid_t driver = gds_mpio_driver_id();
    if (driver < 0)
        return -1;
    if (H5Pget_driver(fapl_id) != driver) {
        MPIO_ERROR(H5E_PLIST, H5E_BADVALUE, "the file access property list does not use the gds_mpio driver");
        return -1;
    }
    return 0;
}

static herr_t set_driver(hid_t fapl_id, const H5FD_gds_config_t *config)
{
    if (gds_config_validate(config) < 0)
        return -1;
    hid_t driver = gds_mpio_driver_id();
    if (driver < 0)
        return -1;
    if (H5Pset_driver(fapl_id, driver, config) < 0) {
        MPIO_ERROR(H5E_PLIST, H5E_CANTSET, "cannot set the gds_mpio driver on the file access property list");
        return -1;
    }
    return 0;
}

herr_t H5Pset_fapl_gds_mpio(hid_t fapl_id, MPI_Comm comm, MPI_Info info)
{
    gds_api_enter();
    bool failed = check_fapl(fapl_id, false) < 0;
    if (!failed && comm == MPI_COMM_NULL) {
        MPIO_ERROR(H5E_ARGS, H5E_BADVALUE, "MPI_COMM_NULL is not a valid communicator");
        failed = true;
    }
    H5FD_gds_config_t config;
    if (!failed && gds_config_init(&config) < 0)
        failed = true;
    /* HDF5 keeps (duplicates of) the communicator and info in the fapl's
     * MPI properties, as H5Pset_fapl_mpio does; mpio is opened with them. */
    if (!failed && H5Pset_mpi_params(fapl_id, comm, info) < 0) {
        MPIO_ERROR(H5E_PLIST, H5E_CANTSET, "cannot set the MPI communicator and info");
        failed = true;
    }
    if (!failed && set_driver(fapl_id, &config) < 0)
        failed = true;
    return API_LEAVE(failed);
}

herr_t H5Pget_fapl_gds_mpio(hid_t fapl_id, MPI_Comm *comm, MPI_Info *info)
{
    gds_api_enter();
    bool failed = check_fapl(fapl_id, true) < 0;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Info i = MPI_INFO_NULL;
    if (!failed && H5Pget_mpi_params(fapl_id, &c, &i) < 0) {
        MPIO_ERROR(H5E_PLIST, H5E_CANTGET, "cannot get the MPI communicator and info");
        failed = true;
    }
    if (!failed && (c == MPI_COMM_NULL || c == MPI_COMM_WORLD) && MPI_Comm_dup(MPI_COMM_WORLD, &c) != MPI_SUCCESS) {
        /* HDF5_DRIVER=gds_mpio: MPI_COMM_WORLD, as the files use (a
         * duplicate: the caller frees it) */
        MPIO_ERROR(H5E_PLIST, H5E_MPI, "MPI_Comm_dup failed");
        failed = true;
    }
    if (!failed) {
        if (comm)
            *comm = c;
        else if (c != MPI_COMM_NULL)
            MPI_Comm_free(&c);
        if (info)
            *info = i;
        else if (i != MPI_INFO_NULL)
            MPI_Info_free(&i);
    }
    return API_LEAVE(failed);
}

herr_t H5Pset_fapl_gds_mpio_config(hid_t fapl_id, const char *text)
{
    gds_api_enter();
    H5FD_gds_config_t config;
    bool failed = check_fapl(fapl_id, true) < 0 || gds_config_from_fapl(fapl_id, &config, NULL) < 0 ||
                  (text && gds_config_apply(&config, text, "H5Pset_fapl_gds_mpio_config") < 0) ||
                  set_driver(fapl_id, &config) < 0;
    return API_LEAVE(failed);
}

herr_t H5Pset_fapl_gds_mpio_config_struct(hid_t fapl_id, const H5FD_gds_config_t *config)
{
    gds_api_enter();
    bool failed = check_fapl(fapl_id, true) < 0;
    if (!failed && !config) {
        MPIO_ERROR(H5E_ARGS, H5E_BADVALUE, "configuration pointer is NULL");
        failed = true;
    }
    if (!failed && config->version != H5FD_GDS_CONFIG_VERSION) {
        MPIO_ERROR(H5E_ARGS, H5E_BADVALUE, "configuration version %u, expected %u (H5FD_gds_config_init)",
                   config->version, H5FD_GDS_CONFIG_VERSION);
        failed = true;
    }
    if (!failed && set_driver(fapl_id, config) < 0)
        failed = true;
    return API_LEAVE(failed);
}

herr_t H5Pget_fapl_gds_mpio_config(hid_t fapl_id, H5FD_gds_config_t *config)
{
    gds_api_enter();
    bool failed = false;
    if (!config) {
        MPIO_ERROR(H5E_ARGS, H5E_BADVALUE, "configuration pointer is NULL");
        failed = true;
    }
    failed = failed || check_fapl(fapl_id, true) < 0 || gds_config_from_fapl(fapl_id, config, NULL) < 0;
    return API_LEAVE(failed);
}

/* HDF5_DRIVER=gds_mpio HDF5_PLUGIN_PATH=<dir with libh5gds_mpio.so>. */
__attribute__((visibility("default"))) H5PL_type_t H5PLget_plugin_type(void)
{
    return H5PL_TYPE_VFD;
}

__attribute__((visibility("default"))) const void *H5PLget_plugin_info(void)
{
    return &H5FD_gds_mpio_class;
}
