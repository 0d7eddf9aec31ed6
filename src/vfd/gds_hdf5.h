/* HDF5 headers for a driver built outside HDF5, on 1.10 and 1.14+. */
#ifndef H5GDS_HDF5_H
#define H5GDS_HDF5_H

#include <hdf5.h>
#if H5_VERSION_GE(1, 13, 0)
#include <H5FDdevelop.h> /* H5FD_class_t moved out of the public header in 1.13 */
#define H5GDS_HAVE_VFD_PLUGINS 1
#else
#define H5GDS_HAVE_VFD_PLUGINS 0
#endif

/* The driver's class table, shared with the plugin entry points. */
extern const H5FD_class_t H5FD_gds_class;

#include "../engine/engine.h"
/* The engine file of an open HDF5 file of this driver (NULL with an HDF5
 * error pushed). For callers that then wait on the engine without holding
 * an HDF5 lock (the Python package's checkpoints). */
gds_file_t *gds_vfd_engine_of(hid_t file_id);

#endif
