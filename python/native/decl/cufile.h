/*
 * h5gds's own declarations of the cuFile types and constants that
 * src/cuda and src/engine use. Not NVIDIA's header: libcufile is loaded at
 * run time and called through src/cuda/cuda_loader.h's table, so no
 * function is declared. Checked against the real cufile.h by
 * tests/declarations/ where one is found. Format as in hdf5.h.
 */
#ifndef H5GDS_DECL_CUFILE_H
#define H5GDS_DECL_CUFILE_H

#include <sys/types.h> /* ssize_t, off_t: the types of cuFileRead/cuFileWrite */

#include "cuda.h"

/* cuFile's own error codes start above this; smaller ones are errno values. */
#define CUFILEOP_BASE_ERR 5000

typedef enum CUfileOpError {
    CU_FILE_SUCCESS = 0,
    CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
    CU_FILE_CUDA_DRIVER_ERROR = 5011,
    CU_FILE_MEMORY_ALREADY_REGISTERED = 5023,
    CU_FILE_HANDLE_NOT_REGISTERED = 5027,
} CUfileOpError;

typedef struct CUfileError {
    CUfileOpError err;
    CUresult cu_err;
} CUfileError_t;

enum CUfileFileHandleType {
    CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1,
};

typedef void *CUfileHandle_t;
typedef struct CUfileFSOps CUfileFSOps_t;

/* A file to register: its descriptor and kind. */
typedef struct CUfileDescr_t {
    enum CUfileFileHandleType type;
    union {
        int fd;
        void *handle;
    } handle;
    const CUfileFSOps_t *fs_ops;
} CUfileDescr_t;

#endif
