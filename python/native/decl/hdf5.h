/*
 * h5gds's own declarations of the part of HDF5's C API that the Python
 * package's native library uses (src/vfd, src/engine, python/native), so that
 * `pip install ./python` needs no HDF5 headers. Written for this project;
 * not HDF5's header. The library never links libhdf5: these symbols resolve
 * at import to the libhdf5 that h5py loaded (python/src/h5gds/_lib.py).
 *
 * What they describe: the API and ABI of HDF5 1.14.1 and later, which
 * HDF5 2.x keeps for everything declared here (the driver class struct
 * included; see H5FDdevelop.h). tests/declarations/ checks every type size,
 * member offset, constant and prototype here against real HDF5 headers.
 *
 * Format, which tests/declarations/gen_facts.py reads: one constant per
 * `#define` line or enum line, one member per struct line; function
 * prototypes live in hdf5_functions.h.
 */
#ifndef H5GDS_DECL_HDF5_H
#define H5GDS_DECL_HDF5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The API level described: 1.14.1 added H5Pset_selection_io, the newest
 * call used here. Sources test it with H5_VERSION_GE. */
#define H5_VERS_MAJOR 1
#define H5_VERS_MINOR 14
#define H5_VERS_RELEASE 1
#define H5_VERSION_GE(maj, min, rel)                                                                         \
    ((H5_VERS_MAJOR == (maj) && H5_VERS_MINOR == (min) && H5_VERS_RELEASE >= (rel)) ||                       \
     (H5_VERS_MAJOR == (maj) && H5_VERS_MINOR > (min)) || H5_VERS_MAJOR > (maj))

/* ---- basic types ---- */
typedef int herr_t;
typedef int htri_t;
typedef bool hbool_t;
typedef uint64_t hsize_t;
typedef int64_t hssize_t;
typedef uint64_t haddr_t;
typedef int64_t hid_t;

#define HADDR_UNDEF UINT64_MAX
#define H5I_INVALID_HID (-1)
#define H5P_DEFAULT 0
#define H5E_DEFAULT 0
#define H5S_ALL 0
#define H5S_MAX_RANK 32
#define H5_ITER_ERROR (-1)
#define H5_ITER_CONT (0)
#define H5_ITER_STOP (1)

/* Ids that HDF5 keeps in global variables, valid once the library is
 * initialised; the macros initialise it first, as HDF5's own do. */
#define H5GDS_DECL_GLOBAL_ID(global) (H5open(), global)

/* ---- H5I ---- */
typedef enum H5I_type_t {
    H5I_UNINIT = -2,
    H5I_BADID = -1,
    H5I_FILE = 1,
    H5I_GROUP = 2,
    H5I_DATATYPE = 3,
    H5I_DATASPACE = 4,
    H5I_DATASET = 5,
    H5I_MAP = 6,
    H5I_ATTR = 7,
    H5I_VFL = 8,
    H5I_VOL = 9,
    H5I_GENPROP_CLS = 10,
    H5I_GENPROP_LST = 11,
    H5I_ERROR_CLASS = 12,
    H5I_ERROR_MSG = 13,
    H5I_ERROR_STACK = 14,
    H5I_SPACE_SEL_ITER = 15,
    H5I_EVENTSET = 16,
} H5I_type_t;

/* ---- H5F ---- */
#define H5F_ACC_RDONLY 0x0000u
#define H5F_ACC_RDWR 0x0001u
#define H5F_ACC_TRUNC 0x0002u
#define H5F_ACC_EXCL 0x0004u
#define H5F_ACC_CREAT 0x0010u
#define H5F_ACC_SWMR_WRITE 0x0020u
#define H5F_ACC_SWMR_READ 0x0040u

typedef enum H5F_close_degree_t {
    H5F_CLOSE_DEFAULT = 0,
    H5F_CLOSE_WEAK = 1,
    H5F_CLOSE_SEMI = 2,
    H5F_CLOSE_STRONG = 3,
} H5F_close_degree_t;

/* Kinds of file memory (H5FD_mem_t): what a driver's read/write is for. */
typedef enum H5F_mem_t {
    H5FD_MEM_NOLIST = -1,
    H5FD_MEM_DEFAULT = 0,
    H5FD_MEM_SUPER = 1,
    H5FD_MEM_BTREE = 2,
    H5FD_MEM_DRAW = 3,
    H5FD_MEM_GHEAP = 4,
    H5FD_MEM_LHEAP = 5,
    H5FD_MEM_OHDR = 6,
    H5FD_MEM_NTYPES = 7,
} H5F_mem_t;
typedef enum H5F_mem_t H5FD_mem_t;

/* ---- H5FD (public part) ---- */
typedef int H5FD_class_value_t;
#define H5_VFD_SEC2 0
#define H5_VFD_CORE 1

#define H5FD_FEAT_AGGREGATE_METADATA 0x00000001
#define H5FD_FEAT_ACCUMULATE_METADATA_WRITE 0x00000002
#define H5FD_FEAT_ACCUMULATE_METADATA_READ 0x00000004
#define H5FD_FEAT_ACCUMULATE_METADATA 0x00000006
#define H5FD_FEAT_DATA_SIEVE 0x00000008
#define H5FD_FEAT_AGGREGATE_SMALLDATA 0x00000010
#define H5FD_FEAT_POSIX_COMPAT_HANDLE 0x00000080
#define H5FD_FEAT_SUPPORTS_SWMR_IO 0x00001000
#define H5FD_FEAT_DEFAULT_VFD_COMPATIBLE 0x00008000
#define H5FD_FEAT_MEMMANAGE 0x00010000

#define H5FD_CTL_MEM_ALLOC 5
#define H5FD_CTL_MEM_FREE 6
#define H5FD_CTL_MEM_COPY 7
#define H5FD_CTL_FAIL_IF_UNKNOWN_FLAG 0x0001
#define H5FD_CTL_ROUTE_TO_TERMINAL_VFD_FLAG 0x0002

/* The input of ctl H5FD_CTL_MEM_COPY. */
typedef struct H5FD_ctl_memcpy_args_t {
    void *dstbuf;
    hsize_t dst_off;
    const void *srcbuf;
    hsize_t src_off;
    size_t len;
} H5FD_ctl_memcpy_args_t;

/* ---- H5S ---- */
typedef enum H5S_class_t {
    H5S_NO_CLASS = -1,
    H5S_SCALAR = 0,
    H5S_SIMPLE = 1,
    H5S_NULL = 2,
} H5S_class_t;

typedef enum {
    H5S_SEL_ERROR = -1,
    H5S_SEL_NONE = 0,
    H5S_SEL_POINTS = 1,
    H5S_SEL_HYPERSLABS = 2,
    H5S_SEL_ALL = 3,
} H5S_sel_type;

typedef enum H5S_seloper_t {
    H5S_SELECT_NOOP = -1,
    H5S_SELECT_SET = 0,
    H5S_SELECT_OR = 1,
} H5S_seloper_t;

/* ---- H5T ---- */
typedef enum H5T_class_t {
    H5T_NO_CLASS = -1,
    H5T_INTEGER = 0,
    H5T_FLOAT = 1,
    H5T_TIME = 2,
    H5T_STRING = 3,
    H5T_BITFIELD = 4,
    H5T_OPAQUE = 5,
    H5T_COMPOUND = 6,
    H5T_REFERENCE = 7,
    H5T_ENUM = 8,
    H5T_VLEN = 9,
    H5T_ARRAY = 10,
} H5T_class_t;

typedef enum H5T_cset_t {
    H5T_CSET_ERROR = -1,
    H5T_CSET_ASCII = 0,
    H5T_CSET_UTF8 = 1,
} H5T_cset_t;

/* ---- H5Z ---- */
typedef int H5Z_filter_t;
#define H5Z_FLAG_MANDATORY 0x0000
#define H5Z_FLAG_OPTIONAL 0x0001
#define H5Z_FLAG_REVERSE 0x0100
#define H5Z_FLAG_SKIP_EDC 0x0200

typedef enum H5Z_EDC_t {
    H5Z_ERROR_EDC = -1,
    H5Z_DISABLE_EDC = 0,
    H5Z_ENABLE_EDC = 1,
    H5Z_NO_EDC = 2,
} H5Z_EDC_t;

/* ---- H5D ---- */
typedef enum H5D_layout_t {
    H5D_LAYOUT_ERROR = -1,
    H5D_COMPACT = 0,
    H5D_CONTIGUOUS = 1,
    H5D_CHUNKED = 2,
    H5D_VIRTUAL = 3,
} H5D_layout_t;

typedef enum H5D_alloc_time_t {
    H5D_ALLOC_TIME_ERROR = -1,
    H5D_ALLOC_TIME_DEFAULT = 0,
    H5D_ALLOC_TIME_EARLY = 1,
    H5D_ALLOC_TIME_LATE = 2,
    H5D_ALLOC_TIME_INCR = 3,
} H5D_alloc_time_t;

typedef enum H5D_space_status_t {
    H5D_SPACE_STATUS_ERROR = -1,
    H5D_SPACE_STATUS_NOT_ALLOCATED = 0,
    H5D_SPACE_STATUS_PART_ALLOCATED = 1,
    H5D_SPACE_STATUS_ALLOCATED = 2,
} H5D_space_status_t;

typedef enum H5D_fill_time_t {
    H5D_FILL_TIME_ERROR = -1,
    H5D_FILL_TIME_ALLOC = 0,
    H5D_FILL_TIME_NEVER = 1,
    H5D_FILL_TIME_IFSET = 2,
} H5D_fill_time_t;

typedef enum H5D_fill_value_t {
    H5D_FILL_VALUE_ERROR = -1,
    H5D_FILL_VALUE_UNDEFINED = 0,
    H5D_FILL_VALUE_DEFAULT = 1,
    H5D_FILL_VALUE_USER_DEFINED = 2,
} H5D_fill_value_t;

typedef enum H5D_selection_io_mode_t {
    H5D_SELECTION_IO_MODE_DEFAULT = 0,
    H5D_SELECTION_IO_MODE_OFF = 1,
    H5D_SELECTION_IO_MODE_ON = 2,
} H5D_selection_io_mode_t;

#define H5D_CHUNK_CACHE_W0_DEFAULT (-1.0)
#define H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS (0x0002u)

/* One stored chunk, for H5Dchunk_iter. */
typedef int (*H5D_chunk_iter_op_t)(const hsize_t *offset, unsigned filter_mask, haddr_t addr, hsize_t size,
                                   void *op_data);

/* ---- H5P ---- */
typedef herr_t (*H5P_prp_cb1_t)(const char *name, size_t size, void *value);
typedef herr_t (*H5P_prp_cb2_t)(hid_t prop_id, const char *name, size_t size, void *value);
typedef H5P_prp_cb2_t H5P_prp_set_func_t;
typedef H5P_prp_cb2_t H5P_prp_get_func_t;
typedef H5P_prp_cb2_t H5P_prp_delete_func_t;
typedef H5P_prp_cb1_t H5P_prp_copy_func_t;
typedef int (*H5P_prp_compare_func_t)(const void *value1, const void *value2, size_t size);
typedef H5P_prp_cb1_t H5P_prp_close_func_t;

#define H5P_FILE_ACCESS H5GDS_DECL_GLOBAL_ID(H5P_CLS_FILE_ACCESS_ID_g)
#define H5P_DATASET_CREATE H5GDS_DECL_GLOBAL_ID(H5P_CLS_DATASET_CREATE_ID_g)
#define H5P_DATASET_ACCESS H5GDS_DECL_GLOBAL_ID(H5P_CLS_DATASET_ACCESS_ID_g)
#define H5P_DATASET_XFER H5GDS_DECL_GLOBAL_ID(H5P_CLS_DATASET_XFER_ID_g)
#define H5P_LINK_CREATE H5GDS_DECL_GLOBAL_ID(H5P_CLS_LINK_CREATE_ID_g)
#define H5P_DATASET_XFER_DEFAULT H5GDS_DECL_GLOBAL_ID(H5P_LST_DATASET_XFER_ID_g)

/* ---- H5E ---- */
typedef herr_t (*H5E_auto1_t)(void *client_data);
typedef herr_t (*H5E_auto2_t)(hid_t estack, void *client_data);

typedef enum H5E_direction_t {
    H5E_WALK_UPWARD = 0,
    H5E_WALK_DOWNWARD = 1,
} H5E_direction_t;

typedef struct H5E_error2_t {
    hid_t cls_id;
    hid_t maj_num;
    hid_t min_num;
    unsigned line;
    const char *func_name;
    const char *file_name;
    const char *desc;
} H5E_error2_t;

typedef herr_t (*H5E_walk2_t)(unsigned n, const H5E_error2_t *err_desc, void *client_data);

#define H5E_ERR_CLS H5GDS_DECL_GLOBAL_ID(H5E_ERR_CLS_g)
/* major error classes */
#define H5E_ARGS H5GDS_DECL_GLOBAL_ID(H5E_ARGS_g)
#define H5E_DATASET H5GDS_DECL_GLOBAL_ID(H5E_DATASET_g)
#define H5E_FILE H5GDS_DECL_GLOBAL_ID(H5E_FILE_g)
#define H5E_IO H5GDS_DECL_GLOBAL_ID(H5E_IO_g)
#define H5E_PLINE H5GDS_DECL_GLOBAL_ID(H5E_PLINE_g)
#define H5E_PLIST H5GDS_DECL_GLOBAL_ID(H5E_PLIST_g)
#define H5E_RESOURCE H5GDS_DECL_GLOBAL_ID(H5E_RESOURCE_g)
#define H5E_VFL H5GDS_DECL_GLOBAL_ID(H5E_VFL_g)
/* minor error classes */
#define H5E_BADFILE H5GDS_DECL_GLOBAL_ID(H5E_BADFILE_g)
#define H5E_BADTYPE H5GDS_DECL_GLOBAL_ID(H5E_BADTYPE_g)
#define H5E_BADVALUE H5GDS_DECL_GLOBAL_ID(H5E_BADVALUE_g)
#define H5E_CANTALLOC H5GDS_DECL_GLOBAL_ID(H5E_CANTALLOC_g)
#define H5E_CANTCLOSEFILE H5GDS_DECL_GLOBAL_ID(H5E_CANTCLOSEFILE_g)
#define H5E_CANTCOPY H5GDS_DECL_GLOBAL_ID(H5E_CANTCOPY_g)
#define H5E_CANTCREATE H5GDS_DECL_GLOBAL_ID(H5E_CANTCREATE_g)
#define H5E_CANTDELETEFILE H5GDS_DECL_GLOBAL_ID(H5E_CANTDELETEFILE_g)
#define H5E_CANTFLUSH H5GDS_DECL_GLOBAL_ID(H5E_CANTFLUSH_g)
#define H5E_CANTGET H5GDS_DECL_GLOBAL_ID(H5E_CANTGET_g)
#define H5E_CANTINIT H5GDS_DECL_GLOBAL_ID(H5E_CANTINIT_g)
#define H5E_CANTLOCKFILE H5GDS_DECL_GLOBAL_ID(H5E_CANTLOCKFILE_g)
#define H5E_CANTOPENFILE H5GDS_DECL_GLOBAL_ID(H5E_CANTOPENFILE_g)
#define H5E_CANTREGISTER H5GDS_DECL_GLOBAL_ID(H5E_CANTREGISTER_g)
#define H5E_CANTSET H5GDS_DECL_GLOBAL_ID(H5E_CANTSET_g)
#define H5E_CANTUNLOCKFILE H5GDS_DECL_GLOBAL_ID(H5E_CANTUNLOCKFILE_g)
#define H5E_FCNTL H5GDS_DECL_GLOBAL_ID(H5E_FCNTL_g)
#define H5E_NOSPACE H5GDS_DECL_GLOBAL_ID(H5E_NOSPACE_g)
#define H5E_OVERFLOW H5GDS_DECL_GLOBAL_ID(H5E_OVERFLOW_g)
#define H5E_READERROR H5GDS_DECL_GLOBAL_ID(H5E_READERROR_g)
#define H5E_SEEKERROR H5GDS_DECL_GLOBAL_ID(H5E_SEEKERROR_g)
#define H5E_UNSUPPORTED H5GDS_DECL_GLOBAL_ID(H5E_UNSUPPORTED_g)
#define H5E_WRITEERROR H5GDS_DECL_GLOBAL_ID(H5E_WRITEERROR_g)

#include "hdf5_functions.h"

/* Silences the default error stack's automatic printing for a block, and
 * restores whichever handler (the current one or an old-style H5Eset_auto1
 * one) was installed. Used as H5E_BEGIN_TRY { ... } H5E_END_TRY. */
#define H5E_BEGIN_TRY                                                                                        \
    {                                                                                                        \
        unsigned h5gds_decl_auto_is_v2 = 0;                                                                  \
        H5E_auto1_t h5gds_decl_auto1 = NULL;                                                                 \
        H5E_auto2_t h5gds_decl_auto2 = NULL;                                                                 \
        void *h5gds_decl_auto_data = NULL;                                                                   \
        (void)H5Eauto_is_v2(H5E_DEFAULT, &h5gds_decl_auto_is_v2);                                            \
        if (h5gds_decl_auto_is_v2) {                                                                         \
            (void)H5Eget_auto2(H5E_DEFAULT, &h5gds_decl_auto2, &h5gds_decl_auto_data);                       \
            (void)H5Eset_auto2(H5E_DEFAULT, NULL, NULL);                                                     \
        } else {                                                                                             \
            (void)H5Eget_auto1(&h5gds_decl_auto1, &h5gds_decl_auto_data);                                    \
            (void)H5Eset_auto1(NULL, NULL);                                                                  \
        }
#define H5E_END_TRY                                                                                          \
        if (h5gds_decl_auto_is_v2)                                                                           \
            (void)H5Eset_auto2(H5E_DEFAULT, h5gds_decl_auto2, h5gds_decl_auto_data);                         \
        else                                                                                                 \
            (void)H5Eset_auto1(h5gds_decl_auto1, h5gds_decl_auto_data);                                      \
    }

#endif
