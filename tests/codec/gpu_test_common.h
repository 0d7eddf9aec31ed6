/*
 * What the families of test_codec_gpu share (gpu_test_common.c): the CUDA
 * API, codec and stream, batches of chunks made with the CPU references and
 * uploaded to the device, pipelines, the chunk manglers of the corrupt and
 * hostile cases; and the families' entry points, which main
 * (test_codec_gpu.c) calls.
 *
 * tests/check.h's counters are extern here: one count for the program
 * (defined in gpu_test_common.c). codec_ref.h keeps its table of libraries
 * (ref) and its random state (rng_state) in statics, one copy per file:
 * each file that calls ref_encode / ref_decode loads its own table
 * (ref_load: main's and gpu_common_ref_load, then the family's entry
 * point), and what draws from the random state after making a batch (the
 * manglers) is in gpu_test_common.c, with batch_make.
 */
#ifndef H5GDS_GPU_TEST_COMMON_H
#define H5GDS_GPU_TEST_COMMON_H

#ifdef H5GDS_TEST_CHECK_H
#error "gpu_test_common.h comes before tests/check.h (one count for the program)"
#endif
#define H5GDS_TEST_CHECK_EXTERN
#include "codec_test.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "codec_ref.h"
#include "cuda_loader.h"
#include "gpu_codec.h"

extern const gds_cuda_api_t *cu;
extern gds_codec_t *codec;
extern CUstream stream;

#define GPU_OK(call)                                                                        \
    do {                                                                                    \
        CUresult rc_ = (call);                                                              \
        if (rc_ != CUDA_SUCCESS) {                                                          \
            fprintf(stderr, "FATAL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
                    gds_cuda_error_text(rc_));                                              \
            exit(100);                                                                      \
        }                                                                                   \
    } while (0)

double now(void);
CUdeviceptr dalloc(size_t n);

/* Loads gpu_test_common.c's copy of codec_ref.h's table (batch_make's
 * encoders). */
void gpu_common_ref_load(void);

/* ---- a batch of chunks on the device ---- */

typedef struct batch {
    size_t n;
    bytes_t *data;    /* decoded (host) */
    bytes_t *stored;  /* encoded (host) */
    unsigned *mask;
    CUdeviceptr src_buf, dst_buf;
    gds_codec_chunk_t *chunks;
} batch_t;

/* Uploads the stored chunks at odd offsets (alignment 1..3) and makes room for the decoded ones. */
void batch_upload(batch_t *b, size_t chunk_bytes, bool odd_dst);
void batch_free(batch_t *b);
/* Chunks whose decoded bytes differ from the data (skip = a chunk expected to fail). */
size_t batch_compare(const batch_t *b, size_t chunk_bytes, size_t skip);
/* Builds n chunks of `kind` data, encoded with the CPU references; false when a library is missing. */
bool batch_make(batch_t *b, const gds_codec_pipeline_t *p, data_kind_t kind, size_t n, const unsigned *masks);

/* ---- pipelines ---- */

gds_codec_pipeline_t pipe_new(size_t chunk_bytes, size_t type_size);

extern const unsigned CD1[], CD2[], CD4[], CD6[], CD8[], CD0[], CD3[];
extern const unsigned CD64K[];
#define OPT GDS_FILTER_FLAG_OPTIONAL

/* ---- chunk manglers (the corrupt and hostile cases) ---- */

typedef void (*corrupt_fn)(bytes_t *chunk);

/* Sets the random state the manglers draw from. */
void mangle_seed(uint64_t seed);

void flip_middle(bytes_t *c);
void flip_zlib_header(bytes_t *c);
void zlib_dictionary(bytes_t *c);
void flip_last(bytes_t *c);
void truncate_half(bytes_t *c);
void truncate_tiny(bytes_t *c);
void pad_after_stream(bytes_t *c); /* 16 bytes after the chunk's stream */
void truncate_last(bytes_t *c);
void bshuf_zstd_magic(bytes_t *c);
void swap_checksum(bytes_t *c);
void lz4_block_size_huge(bytes_t *c);
void lz4_block_size_short(bytes_t *c);
void header_orig_size(bytes_t *c);
void bshuf_block_negative(bytes_t *c);
void bshuf_block_size_zero(bytes_t *c);
void zstd_magic(bytes_t *c);
void zstd_content_size(bytes_t *c);
void zstd_reserved_bit(bytes_t *c);
void zstd_block_garbage(bytes_t *c);
void lz4h5_block_garbage(bytes_t *c);
void bshuf_block_garbage(bytes_t *c);
void garbage(bytes_t *c);
void garbage_keep_head(bytes_t *c);
void blosc_version(bytes_t *c);
void blosc_nbytes(bytes_t *c);
void blosc_block_start(bytes_t *c);
void blosc_stream_size(bytes_t *c);
void blosc_blosclz(bytes_t *c);
void blosc_stream_garbage(bytes_t *c);

/* ---- the families, one file each ---- */

/* gpu_roundtrip.c: every filter, CPU-encoded chunks decoded on the GPU and
 * GPU-encoded ones decoded on the CPU (and the GPU). */
void roundtrip_tests(void);
/* gpu_roundtrip.c: decoding and encoding with little of the device's
 * memory free (test_codec_gpu --pressure, a process of its own). */
void pressure_tests(void);
/* gpu_corrupt.c: corrupt and truncated chunks give errors. */
void corrupt_tests(void);
/* gpu_hostile.c: garbage inside valid framing. hostile_tests runs each case
 * in a child process and returns the number that ran (not skipped);
 * hostile_one runs case i in this process. */
int hostile_tests(void);
int hostile_one(int i);
/* gpu_fixtures.c: the chunks h5py + hdf5plugin wrote. */
void fixtures(const char *dir, const char *out, bool cpu);
/* gpu_bench.c: decode and encode throughput. */
void bench(size_t mib);
void widths(size_t nchunks);
void bench_deflate(size_t mib);

#endif
