/*
 * The `gds` driver's registration (H5FD_gds_init, shared with a plugin copy
 * of the library), its termination, and its file access property lists:
 * H5Pset_fapl_gds* / H5Pget_fapl_gds* and the class's fapl callbacks.
 */
#include <stdlib.h>

#include "gds_config.h"
#include "gds_vfd_file.h"

static hid_t gds_driver_id = H5I_INVALID_HID;

static hid_t driver_init(void)
{
    if (H5Iget_type(gds_driver_id) == H5I_VFL)
        return gds_driver_id;
    hid_t id = H5I_INVALID_HID;
#if H5GDS_HAVE_VFD_PLUGINS
    /* Loaded as a plugin and linked too: share the id HDF5 already has, so
     * that H5Pget_driver() comparisons agree. */
    if (H5FDis_driver_registered_by_value(H5FD_GDS_VALUE) > 0) {
        /* HDF5 has no public "id of a registered driver by value"; a scratch
         * fapl set by value holds it. */
        hid_t scratch = H5Pcreate(H5P_FILE_ACCESS);
        if (scratch >= 0 && H5Pset_driver_by_value(scratch, H5FD_GDS_VALUE, NULL) >= 0)
            id = H5Pget_driver(scratch);
        if (scratch >= 0)
            H5Pclose(scratch);
    }
#endif
    if (id < 0)
        id = H5FDregister(&H5FD_gds_class);
    if (id < 0)
        GDS_ERROR(H5E_VFL, H5E_CANTREGISTER, "cannot register the gds driver");
    gds_driver_id = id;
    return id;
}

hid_t H5FD_gds_init(void)
{
    gds_api_enter();
    hid_t id = driver_init();
    gds_api_leave(id < 0);
    return id;
}

/* HDF5 terminates the driver at H5close, H5FDunregister and before it
 * unloads the plugin: the worker threads stop here (after the work in
 * flight), so none runs the library's code once it may be unmapped. The
 * next request starts them again. */
herr_t gds_vfd_term(void)
{
    gds_driver_id = H5I_INVALID_HID;
    gds_engine_shutdown();
    return 0;
}

static herr_t set_fapl(hid_t fapl_id, const H5FD_gds_config_t *config)
{
    if (H5Pisa_class(fapl_id, H5P_FILE_ACCESS) <= 0) {
        GDS_ERROR(H5E_ARGS, H5E_BADTYPE, "not a file access property list");
        return -1;
    }
    if (gds_config_validate(config) < 0)
        return -1;
    hid_t driver = H5FD_gds_init();
    if (driver < 0)
        return -1;
    if (H5Pset_driver(fapl_id, driver, config) < 0) {
        GDS_ERROR(H5E_PLIST, H5E_CANTSET, "cannot set the gds driver on the file access property list");
        return -1;
    }
    return 0;
}

herr_t H5Pset_fapl_gds_config(hid_t fapl_id, const H5FD_gds_config_t *config)
{
    gds_api_enter();
    return gds_api_leave(set_fapl(fapl_id, config) < 0) ? -1 : 0;
}

herr_t H5Pset_fapl_gds(hid_t fapl_id, size_t alignment, size_t block_size, size_t cbuf_size)
{
    gds_api_enter();
    H5FD_gds_config_t config;
    if (gds_config_init(&config) < 0)
        return gds_api_leave(true) ? -1 : 0;
    if (alignment)
        config.alignment = alignment;
    if (block_size)
        config.fs_block_size = block_size;
    if (cbuf_size)
        config.staging_size = cbuf_size;
    return gds_api_leave(set_fapl(fapl_id, &config) < 0) ? -1 : 0;
}

static herr_t check_gds_fapl(hid_t fapl_id)
{
    hid_t driver = H5FD_gds_init();
    if (driver < 0)
        return -1;
    if (H5Pget_driver(fapl_id) != driver) {
        GDS_ERROR(H5E_PLIST, H5E_BADVALUE, "the file access property list does not use the gds driver");
        return -1;
    }
    return 0;
}

herr_t H5Pget_fapl_gds_config(hid_t fapl_id, H5FD_gds_config_t *config)
{
    gds_api_enter();
    if (!config) {
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "configuration pointer is NULL");
        return gds_api_leave(true) ? -1 : 0;
    }
    bool failed = check_gds_fapl(fapl_id) < 0 || gds_config_from_fapl(fapl_id, config, NULL) < 0;
    return gds_api_leave(failed) ? -1 : 0;
}

herr_t H5Pget_fapl_gds(hid_t fapl_id, size_t *alignment, size_t *block_size, size_t *cbuf_size)
{
    H5FD_gds_config_t config;
    if (H5Pget_fapl_gds_config(fapl_id, &config) < 0) /* a public call: it reports */
        return -1;
    if (alignment)
        *alignment = config.alignment;
    if (block_size)
        *block_size = config.fs_block_size;
    if (cbuf_size)
        *cbuf_size = config.staging_size;
    return 0;
}

void *gds_vfd_fapl_get(H5FD_t *_file)
{
    const gds_vfd_file_t *file = (const gds_vfd_file_t *)_file;
    /* A file opened without driver info (HDF5_DRIVER, H5Pset_driver_by_name)
     * reports none either, so its access list equals the one it was opened
     * with (HDF5's vol test checks this); the configuration string is
     * carried along by HDF5 itself. */
    if (!file->config_from_info)
        return NULL;
    return gds_vfd_fapl_copy(&file->config);
}

void *gds_vfd_fapl_copy(const void *info)
{
    H5FD_gds_config_t *copy = malloc(sizeof *copy);
    if (!copy) {
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory copying the gds configuration");
        return NULL;
    }
    *copy = *(const H5FD_gds_config_t *)info;
    return copy;
}

herr_t gds_vfd_fapl_free(void *info)
{
    free(info);
    return 0;
}
