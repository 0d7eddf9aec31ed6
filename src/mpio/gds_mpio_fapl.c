/*
 * The public entry points of the gds_mpio driver (include/H5FDgds_mpio.h):
 * fapl setters and getters, statistics, sync, and the plugin entry points.
 */
#include "gds_mpio_internal.h"

#include <stdlib.h>
#include <string.h>

#include <H5PLextern.h>

#include "../vfd/gds_config.h"
#include "../vfd/gds_error.h"
#include "../vfd/gds_transfer.h"

#define API_LEAVE(failed) (gds_api_leave(failed) ? -1 : 0)

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

/* ---- the driver's struct behind a file id ---- */

/* H5Fget_vfd_handle with a scratch fapl that carries this property: a
 * gds_mpio file (of any copy of the library: linked, or loaded as the
 * plugin) writes its struct's address into it (mpio_get_handle); other
 * drivers leave it NULL. Not collective, unlike H5Fget_access_plist. */
static gds_mpio_file_t *lookup(hid_t file_id, bool *is_file)
{
    gds_mpio_file_t *file = NULL;
    void *handle = NULL;
    herr_t got = -1;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5E_BEGIN_TRY
    {
        if (fapl >= 0 && H5Pinsert2(fapl, GDS_MPIO_SELF_PROP, sizeof file, &file, NULL, NULL, NULL, NULL, NULL,
                                    NULL) >= 0)
            got = H5Fget_vfd_handle(file_id, fapl, &handle);
        if (got >= 0 && H5Pget(fapl, GDS_MPIO_SELF_PROP, &file) < 0)
            file = NULL;
    }
    H5E_END_TRY;
    if (fapl >= 0)
        H5Pclose(fapl);
    *is_file = got >= 0;
    return file;
}

gds_mpio_file_t *gds_mpio_file_of(hid_t file_id)
{
    bool is_file;
    gds_mpio_file_t *file = lookup(file_id, &is_file);
    if (!file)
        MPIO_ERROR(H5E_FILE, H5E_BADVALUE, is_file ? "the file does not use the gds_mpio driver" : "not an open file");
    return file;
}

htri_t H5FD_gds_mpio_is_file(hid_t file_id)
{
    gds_api_enter();
    bool is_file;
    gds_mpio_file_t *file = lookup(file_id, &is_file);
    if (!is_file)
        MPIO_ERROR(H5E_ARGS, H5E_BADTYPE, "not an open file");
    gds_api_leave(!is_file);
    return is_file ? (file != NULL) : -1;
}

herr_t H5FD_gds_mpio_get_stats(hid_t file_id, H5FD_gds_stats_t *stats)
{
    gds_api_enter();
    if (!stats) {
        MPIO_ERROR(H5E_ARGS, H5E_BADVALUE, "statistics pointer is NULL");
        return API_LEAVE(true);
    }
    gds_mpio_file_t *file = gds_mpio_file_of(file_id);
    if (file) {
        gds_engine_stats_t s;
        gds_file_get_stats(file->engine, &s);
        gds_stats_to_public(&s, stats);
    }
    return API_LEAVE(!file);
}

herr_t H5FD_gds_mpio_sync(hid_t file_id)
{
    gds_api_enter();
    gds_mpio_file_t *file = gds_mpio_file_of(file_id);
    bool failed = !file;
    if (file) {
        gds_status_t st;
        if (gds_file_sync(file->engine, &st) < 0) {
            MPIO_ERROR(H5E_IO, H5E_WRITEERROR, "%s (rank %d)", st.msg, file->mpi_rank);
            failed = true;
        }
    }
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
