/*
 * The facts of the real headers, and the compile-time half of the check:
 * every function and global declared in the declarations' *_functions.h
 * is declared again here, after the real headers (C rejects a
 * redeclaration that does not match), and so is every typedef (types.h).
 */
#ifdef H5GDS_DECL_HDF5
#include <hdf5.h>
#include <H5FDdevelop.h>
#include <H5PLextern.h>
/* Their constants call H5open() first; the values are what is compared
 * here, and this program never links libhdf5. */
#undef H5OPEN
#define H5OPEN
#undef H5CHECK
#define H5CHECK
#include H5GDS_DECL_TYPES
#include H5GDS_DECL_HDF5_FUNCTIONS
#include H5GDS_DECL_H5FD_FUNCTIONS
#include H5GDS_DECL_H5PL_FUNCTIONS
#else
#include <cuda.h>
#include <cufile.h>
#include H5GDS_DECL_TYPES
#endif

#define H5GDS_FACTS_REAL 1
#define H5GDS_FACTS_FUNCTION decl_facts_real
#include "record.h"
