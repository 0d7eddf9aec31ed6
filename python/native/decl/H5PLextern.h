/*
 * h5gds's own declarations of HDF5's plugin entry points (H5PLextern.h):
 * what a plugin library exports so HDF5 can load it (src/vfd/gds_plugin.c
 * defines them). Not HDF5's header; see hdf5.h beside it.
 */
#ifndef H5GDS_DECL_H5PLEXTERN_H
#define H5GDS_DECL_H5PLEXTERN_H

#include "hdf5.h"

typedef enum H5PL_type_t {
    H5PL_TYPE_ERROR = -1,
    H5PL_TYPE_FILTER = 0,
    H5PL_TYPE_VOL = 1,
    H5PL_TYPE_VFD = 2,
    H5PL_TYPE_NONE = 3,
} H5PL_type_t;

#include "H5PLextern_functions.h"

#endif
