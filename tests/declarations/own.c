/* The facts of h5gds's own declarations (python/native/decl). */
#ifdef H5GDS_DECL_HDF5
#include <hdf5.h>
#include <H5FDdevelop.h>
#include <H5PLextern.h>
#else
#include <cuda.h>
#include <cufile.h>
#endif

#define H5GDS_FACTS_FUNCTION decl_facts_own
#include "record.h"
