/* Entry points that let HDF5 >= 1.14 load this library as a VFD plugin
 * (HDF5_DRIVER=gds HDF5_PLUGIN_PATH=<dir>). */
#include "gds_hdf5.h"

#if H5GDS_HAVE_VFD_PLUGINS
#include <H5PLextern.h>

__attribute__((visibility("default"))) H5PL_type_t H5PLget_plugin_type(void)
{
    return H5PL_TYPE_VFD;
}

__attribute__((visibility("default"))) const void *H5PLget_plugin_info(void)
{
    return &H5FD_gds_class;
}
#else
/* HDF5 1.10 has no VFD plugins: applications link the library and call H5Pset_fapl_gds. */
typedef int h5gds_no_plugin_entry_points;
#endif
