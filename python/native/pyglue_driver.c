/*
 * The Python package's driver glue, called through ctypes: the driver id, a
 * fapl from a "key=value" string and the configuration a fapl carries, the
 * HDF5 error stack as text (the package puts it into its exceptions), and
 * the HDF5 version these sources were compiled against.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "H5FDgds.h"
#include "gds_config.h"
#include "gds_hdf5.h"
#include "pyglue_common.h"

API void h5gds_py_compiled_hdf5(unsigned version[3])
{
    version[0] = H5_VERS_MAJOR;
    version[1] = H5_VERS_MINOR;
    version[2] = H5_VERS_RELEASE;
}

API int64_t h5gds_py_driver_id(void)
{
    return (int64_t)H5FD_gds_init();
}

/* Defaults, then H5GDS_CONFIG, then `text` (h5py's driver keywords). */
API int h5gds_py_set_fapl(int64_t fapl_id, const char *text)
{
    H5FD_gds_config_t config;
    if (H5FD_gds_config_init(&config) < 0)
        return -1;
    if (text && *text && H5FD_gds_config_parse(&config, text) < 0)
        return -1;
    return H5Pset_fapl_gds_config((hid_t)fapl_id, &config) < 0 ? -1 : 0;
}

/* The configuration a fapl carries, formatted (tests, repr). */
API int h5gds_py_get_fapl(int64_t fapl_id, char *buf, size_t size)
{
    H5FD_gds_config_t config;
    if (H5Pget_fapl_gds_config((hid_t)fapl_id, &config) < 0)
        return -1;
    return H5FD_gds_config_format(&config, buf, size) < 0 ? -1 : 0;
}

/* The calling thread's HDF5 error stack as H5Eprint2 writes it, then
 * cleared. H5Eprint2 is used rather than walking H5E_error2_t so that the
 * text does not depend on that struct's layout in the HDF5 h5py runs. */
API size_t h5gds_py_error_text(char *buf, size_t size)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 0;
    H5Eprint2(H5E_DEFAULT, f);
    fclose(f);
    H5Eclear2(H5E_DEFAULT);
    if (buf && size) {
        size_t n = len < size - 1 ? len : size - 1;
        memcpy(buf, text, n);
        buf[n] = '\0';
    }
    free(text);
    return len;
}
