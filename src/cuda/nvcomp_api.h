/*
 * The part of nvCOMP's batched C API the GPU codecs call, declared here from
 * nvCOMP 6's headers (include/nvcomp/{shared_types,deflate,lz4,zstd}.h of the
 * nvidia-libnvcomp-cu13 wheel) so that building needs no nvCOMP. nvCOMP 5
 * differs, for these calls, only in the temp-size queries (named
 * ...GetTempSizeAsync, without the stream argument): the loader hides that.
 * nvCOMP's cudaStream_t is the driver's CUstream.
 */
#ifndef H5GDS_NVCOMP_API_H
#define H5GDS_NVCOMP_API_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

typedef int gds_nvcomp_status_t; /* nvcompStatus_t: 0 = nvcompSuccess */
enum {
    GDS_NVCOMP_SUCCESS = 0,
    GDS_NVCOMP_ERROR_INVALID_VALUE = 10,
    GDS_NVCOMP_ERROR_NOT_SUPPORTED = 11,
    GDS_NVCOMP_ERROR_CANNOT_DECOMPRESS = 12,
    GDS_NVCOMP_ERROR_CUDA = 1000,
    GDS_NVCOMP_ERROR_INTERNAL = 10000
};
enum { GDS_NVCOMP_BACKEND_DEFAULT = 0 }; /* nvcompDecompressBackend_t */
enum { GDS_NVCOMP_TYPE_CHAR = 0 };       /* nvcompType_t */
enum { GDS_NVCOMP_BITSHUFFLE_NONE = 0 }; /* nvcompBitshuffleMode_t */

typedef struct gds_nvcomp_alignments { /* nvcompAlignmentRequirements_t */
    size_t input, output, temp;
} gds_nvcomp_alignments_t;

/* Options, passed by value; unused bytes must be zero. */
typedef struct { int algorithm; char reserved[60]; } gds_nvcomp_deflate_copts_t;
typedef struct { int backend; int sort_before_hw_decompress; char reserved[56]; } gds_nvcomp_deflate_dopts_t;
typedef struct { int data_type; int bitshuffle_mode; char reserved[56]; } gds_nvcomp_lz4_copts_t;
typedef struct {
    int backend;
    int sort_before_hw_decompress;
    int data_type;
    int bitshuffle_mode;
    char reserved[48];
} gds_nvcomp_lz4_dopts_t;
typedef struct { char reserved[64]; } gds_nvcomp_zstd_copts_t;
typedef struct { int backend; char reserved[60]; } gds_nvcomp_zstd_dopts_t;

/* One algorithm's entry points; `O` is its compress options, `D` its
 * decompress options (each algorithm's own struct, all 64 bytes). */
#define GDS_NVCOMP_ALGO_TABLE(C, D)                                                                           \
    struct {                                                                                                  \
        gds_nvcomp_status_t (*CompressGetRequiredAlignments)(C, gds_nvcomp_alignments_t *);                   \
        gds_nvcomp_status_t (*CompressGetTempSize)(size_t nchunks, size_t max_chunk, C, size_t *temp,         \
                                                   size_t max_total, CUstream);                               \
        gds_nvcomp_status_t (*CompressGetMaxOutputChunkSize)(size_t max_chunk, C, size_t *max_out);           \
        gds_nvcomp_status_t (*CompressAsync)(const void *const *in_ptrs, const size_t *in_bytes,              \
                                             size_t max_in_chunk, size_t nchunks, void *temp, size_t temp_bytes, \
                                             void *const *out_ptrs, size_t *out_bytes, C,                     \
                                             gds_nvcomp_status_t *statuses, CUstream);                        \
        gds_nvcomp_status_t (*DecompressGetRequiredAlignments)(D, gds_nvcomp_alignments_t *);                 \
        gds_nvcomp_status_t (*DecompressGetTempSize)(size_t nchunks, size_t max_chunk, D, size_t *temp,       \
                                                     size_t max_total, CUstream);                             \
        gds_nvcomp_status_t (*DecompressAsync)(const void *const *in_ptrs, const size_t *in_bytes,            \
                                               const size_t *out_buffer_bytes, size_t *out_actual_bytes,      \
                                               size_t nchunks, void *const temp, size_t temp_bytes,           \
                                               void *const *out_ptrs, D, gds_nvcomp_status_t *statuses,       \
                                               CUstream);                                                     \
    }

typedef struct gds_nvcomp_api {
    int major; /* 5 or 6 */
    char path[512]; /* where it was loaded from */
    const char *(*GetStatusString)(gds_nvcomp_status_t); /* may be NULL */
    GDS_NVCOMP_ALGO_TABLE(gds_nvcomp_deflate_copts_t, gds_nvcomp_deflate_dopts_t) deflate;
    GDS_NVCOMP_ALGO_TABLE(gds_nvcomp_lz4_copts_t, gds_nvcomp_lz4_dopts_t) lz4;
    GDS_NVCOMP_ALGO_TABLE(gds_nvcomp_zstd_copts_t, gds_nvcomp_zstd_dopts_t) zstd;
} gds_nvcomp_api_t;

#endif
