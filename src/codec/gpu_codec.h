/*
 * GPU codecs for HDF5's standard filter pipelines (no HDF5 here): chunks in
 * device memory are decoded (and encoded) on the GPU, bit-identical with
 * HDF5's own filters and hdf5plugin's: deflate (zlib stream, Adler-32
 * checked), shuffle, fletcher32 (checked, with HDF5's byte-swapped form for
 * old files), zstd (32015), LZ4 (32004, HDF5's LZ4 framing), bitshuffle
 * (32008, plain or with LZ4 / zstd), Blosc-1 (32001, hdf5plugin's and
 * PyTables' c-blosc 1.x chunks of lz4, lz4hc or zstd streams, byte or bit
 * shuffled, or stored as they are; encoded for lz4 and lz4hc, as LZ4
 * streams).
 *
 * The compressors are NVIDIA's nvCOMP (batched API), loaded at run time
 * (src/cuda/cuda_loader.c); the framing, shuffles and checksums are the
 * layer's own kernels, CUDA C compiled at run time by NVRTC for the device
 * (src/codec/codec_kernels.cu), launched through the driver API. A pipeline
 * may hold one size-changing filter (compressor) at most: can_decode says
 * why not otherwise, and the caller then uses HDF5's CPU path.
 */
#ifndef H5GDS_GPU_CODEC_H
#define H5GDS_GPU_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_loader.h" /* CUstream, CUcontext ... */
#include "engine.h"      /* gds_status_t, gds_status_set */

enum {
    GDS_FILTER_DEFLATE = 1,
    GDS_FILTER_SHUFFLE = 2,
    GDS_FILTER_FLETCHER32 = 3,
    GDS_FILTER_LZ4 = 32004,
    GDS_FILTER_BITSHUFFLE = 32008,
    GDS_FILTER_ZSTD = 32015,
    GDS_FILTER_BLOSC = 32001
};

/* HDF5's filter flags (H5Zpublic.h) that matter here. */
enum {
    GDS_FILTER_FLAG_OPTIONAL = 0x0001, /* H5Z_FLAG_OPTIONAL: may be skipped when it fails (encode) */
    GDS_FILTER_FLAG_SKIP_EDC = 0x0200  /* H5Z_FLAG_SKIP_EDC: fletcher32 not verified on read */
};

#define GDS_CODEC_MAX_FILTERS 16
#define GDS_CODEC_MAX_CD 20

typedef struct gds_codec_filter {
    unsigned id;
    unsigned flags; /* HDF5's filter flags (GDS_FILTER_FLAG_*) */
    size_t ncd;
    unsigned cd[GDS_CODEC_MAX_CD]; /* client data as stored in the dataset's pipeline */
} gds_codec_filter_t;

typedef struct gds_codec_pipeline {
    size_t nfilters;
    gds_codec_filter_t filter[GDS_CODEC_MAX_FILTERS]; /* HDF5 order: applied 0..n-1 when writing */
    size_t type_size;                                 /* bytes per element of the dataset's file type */
    size_t chunk_bytes;                               /* bytes of one whole decoded chunk */
} gds_codec_pipeline_t;

/* Whether the GPU can decode every filter of the pipeline (no GPU needed to
 * answer); why not in `why` (may be NULL). */
bool gds_codec_can_decode(const gds_codec_pipeline_t *p, char *why, size_t why_size);
bool gds_codec_can_encode(const gds_codec_pipeline_t *p, char *why, size_t why_size);

/* Whether encoding p on the GPU is slower than HDF5's CPU filter would be,
 * or not measured: a zstd block inside bitshuffle over 128 KiB (plain zstd
 * chunks are cut in pieces of at most 128 KiB and spliced, blosc's zstd
 * blocks are 32 KiB). */
bool gds_codec_encodes_slowly(const gds_codec_pipeline_t *p);

/* The pieces a plain zstd chunk is compressed in on the GPU, by the zstd
 * level: levels up to 2 32 KiB (fastest), 3-5 64 KiB, 6 and up 128 KiB
 * (better ratios, slower). */
size_t gds_codec_zstd_piece(int level);
/* Bytes of the pieces a Deflate chunk is compressed in, then joined into one
 * stream (deflate_splice.h; H5GDS_DEFLATE_PIECE_KIB, else
 * GDS_DEFLATE_PIECE); 0: chunks compressed whole. */
size_t gds_codec_deflate_piece(void);

/* The environment variables the codec reads while it decodes
 * (H5GDS_CODEC_DEBUG, H5GDS_CODEC_TEST_REDECODE, H5GDS_INFLATE_SEGMENT_KIB,
 * H5GDS_INFLATE_SPLIT, H5GDS_ZSTD_BLOCKS), copied: a caller that decodes
 * on a thread of its own copies them on its thread and has the decoding
 * thread use the copy, since getenv is not safe against a concurrent
 * setenv. */
#define GDS_CODEC_SETTINGS 5
typedef struct gds_codec_settings {
    char value[GDS_CODEC_SETTINGS][32];
    unsigned char set[GDS_CODEC_SETTINGS];
} gds_codec_settings_t;
void gds_codec_settings_copy(gds_codec_settings_t *s);
/* This thread's codec calls read s from now on instead of the environment
 * (NULL: the environment again); s must outlive that use. */
void gds_codec_settings_use(const gds_codec_settings_t *s);
/* H5GDS_CODEC_DEBUG set (not empty, not 0): the codec prints its batching
 * to stderr, and its callers their reads' and writes' batches. */
bool gds_codec_debug_on(void);

/* One per CUDA context: nvCOMP entry points, the NVRTC-compiled module,
 * cached temporary memory (kept until close up to what sub-batches within
 * 2 GiB make, 2.5 GiB, more given back by gds_codec_trim; a sub-batch's arenas and nvCOMP memory stay within
 * H5GDS_CODEC_TEMP_MIB, by default a quarter of the device's free memory,
 * at least 2 GiB and at most 16). Calls on
 * one codec are serialised (a lock). H5GDS_CODEC_DEBUG=1 prints each call's
 * batching to stderr; H5GDS_NVCOMP_LIB names the nvCOMP library to load. */
typedef struct gds_codec gds_codec_t;

/* Loads CUDA, NVRTC and nvCOMP and compiles the kernels for ctx's device
 * (the compiled code is cached per process and architecture); -1 with a
 * clear message when one is missing. ctx NULL: the calling thread's current
 * context. */
int gds_codec_open(gds_codec_t **out, CUcontext ctx, gds_status_t *st);
void gds_codec_close(gds_codec_t *c);

typedef struct gds_codec_chunk {
    const void *src;      /* device memory: the chunk as stored in the file */
    size_t src_bytes;
    unsigned filter_mask; /* HDF5's per-chunk mask: bit i set = filter i was skipped */
    void *dst;            /* device memory, pipeline->chunk_bytes */
} gds_codec_chunk_t;

/* Decodes n chunks in batches on `stream`, returns after they are done
 * (synchronises the stream). On failure -1, *bad = index of the first
 * (lowest-index) failing chunk, st says which filter and why (corrupt
 * stream, wrong decoded size, checksum mismatch, parameter not
 * supported...). `bad` may be NULL. The dst of a failing chunk holds
 * undefined bytes; the other chunks are decoded, except where the failure
 * is garbage that only the decompressor met ("corrupt data": nvCOMP's
 * decoders may then write past the chunk's slot of the codec's own
 * memory), which leaves the dst of every chunk of the call undefined.
 * st->err is ETIMEDOUT when the GPU's work did not finish within
 * H5GDS_CODEC_TIMEOUT_S (default 30 s; nvCOMP's Zstd decoder may never end
 * on such garbage): *bad is then unknown, and the codec has stopped
 * (gds_codec_stopped). st->err is 95
 * (EOPNOTSUPP) when nothing is wrong with the data but the GPU cannot
 * decode it (a blosc chunk whose header names blosclz, snappy or zlib:
 * the pipeline's cd_values name only the writer's wish): the caller reads
 * with HDF5's CPU filters instead. 74 (EBADMSG): a corrupt stream (a
 * malformed header, a size past the chunk's end, a decompressor's failure,
 * a checksum mismatch), in the filter gds_codec_failed_filter names; a
 * caller may let that filter's CPU implementation judge the chunk (zlib
 * reads a stream with bytes after its end, which the GPU refuses).
 * 34 (ERANGE): a chunk whose decoded, original or stored size is not the
 * one the pipeline gives (a stream that decodes past the chunk's size
 * included), or one too small for its filter's framing. */
int gds_codec_decode(gds_codec_t *c, const gds_codec_pipeline_t *p, const gds_codec_chunk_t *chunks, size_t n,
                     CUstream stream, size_t *bad, gds_status_t *st);

/* One chunk a decode found bad (gds_codec_decode_findings). */
typedef struct gds_codec_finding {
    size_t chunk;    /* its index among the call's chunks */
    int err;         /* EBADMSG, ERANGE or EOPNOTSUPP, as gds_codec_decode's st->err */
    unsigned filter; /* the HDF5 id of the filter whose stage found it; 0: the pipeline's sizes */
    unsigned code;   /* what was found, in the codec's terms (gds_codec_finding_text) */
    uint64_t detail;
} gds_codec_finding_t;

/* gds_codec_decode, reporting every chunk found bad rather than the first
 * alone, so that a caller can have another decoder read just those: with
 * `findings` (room for n), *nfound of them in index order. On such a
 * failure *others_decoded says whether every other chunk is decoded into
 * its dst (false where a decompressor met garbage: see gds_codec_decode,
 * the others' dst are then undefined and must be decoded again without
 * the bad ones; H5GDS_CODEC_TEST_REDECODE=1 says so after every finding,
 * for tests of that second decode). st, *bad and the return value as
 * gds_codec_decode's (st: the lowest bad chunk's finding). findings,
 * nfound, others_decoded may be NULL. */
int gds_codec_decode_findings(gds_codec_t *c, const gds_codec_pipeline_t *p, const gds_codec_chunk_t *chunks,
                              size_t n, CUstream stream, size_t *bad, gds_codec_finding_t *findings, size_t *nfound,
                              bool *others_decoded, gds_status_t *st);

/* A finding in words ("filter 0 (deflate): adler32 mismatch ..."). */
void gds_codec_finding_text(const gds_codec_pipeline_t *p, const gds_codec_finding_t *f, char *buf, size_t size);

/* The filter (its HDF5 id) whose stage found the chunk bad in this
 * thread's last gds_codec_decode that failed on a chunk's data (74 or
 * 34); 0 otherwise, or where the finding is the pipeline's. */
unsigned gds_codec_failed_filter(void);

/* How many chunks of p (stored with every filter, at most max_stored bytes
 * each) a read should give gds_codec_decode at once, at most max_chunks:
 * as many as one sub-batch of the codec's memory holds where each chunk is
 * one compressed stream (nvCOMP decodes a batch of those in about one
 * chunk's time); where a chunk holds many, max_chunks from a disk, and
 * where the stored bytes come fast (fast_input: from the page cache) those
 * of about 128 MiB decoded (the GPU is busy from there on, and a read
 * overlaps more of its decode with smaller batches), Blosc's one
 * sub-batch. max_chunks (at least 1) when p cannot be decoded. */
size_t gds_codec_read_batch_chunks(gds_codec_t *c, const gds_codec_pipeline_t *p, size_t max_stored,
                                   size_t max_chunks, bool fast_input);
/* The same without the codec's memory budget (no GPU needed). */
size_t gds_codec_read_batch_goal(const gds_codec_pipeline_t *p, size_t max_chunks, bool fast_input);
/* The chunks of a read's last batch that end it sooner after its last
 * byte than the widest batches, stored bytes coming at stored_bytes_per_s
 * (mean_stored a chunk, max_stored the largest): Deflate, whose last batch
 * the segments decode quicker than nvCOMP's one chunk's serial decode,
 * long enough in coming that the batch before it has decoded by then.
 * Fewer than max_chunks, or 0: none. No GPU needed. */
size_t gds_codec_read_tail_chunks(const gds_codec_pipeline_t *p, size_t max_stored, double mean_stored,
                                  double stored_bytes_per_s, size_t max_chunks);

/* How many chunks of p a write should give gds_codec_encode at once, at
 * most max_chunks: where nvCOMP compresses each chunk as one stream
 * (Deflate chunks of one piece, or compressed whole:
 * gds_codec_deflate_piece), as many as one sub-batch of the codec's memory
 * holds (a batch of those takes about one chunk's time); 0 where the
 * compression time follows the bytes (the writer chooses; Deflate chunks
 * in pieces among them). */
size_t gds_codec_write_batch_chunks(gds_codec_t *c, const gds_codec_pipeline_t *p, size_t max_chunks);

/* Reserves the codec's memory for encoding up to n chunks of p at once
 * (a write's largest batch), so that a write's first, smaller batch does
 * not make the next ones allocate again (every cuMemFree waits for the
 * whole device). */
int gds_codec_encode_reserve(gds_codec_t *c, const gds_codec_pipeline_t *p, size_t n, gds_status_t *st);

/* Gives back the codec's temporary device memory when it holds more than
 * sub-batches within the default budget (2 GiB) make, 2.5 GiB, once its
 * work is done: a large read or write does not keep it for the rest of
 * the process. */
void gds_codec_trim(gds_codec_t *c);

/* How many sub-batches ran again narrower since the codec opened, each
 * after the device's memory could not hold it (another process or this
 * one's allocator holding most of it): the budget is then halved until
 * gds_codec_trim. */
unsigned long gds_codec_narrowed(const gds_codec_t *c);

/* Bytes an encoded chunk of p may take (dst of gds_codec_encode); 0 when
 * the pipeline cannot be encoded. */
size_t gds_codec_max_encoded_bytes(const gds_codec_pipeline_t *p);

/* Encodes n whole chunks (src = decoded, chunk_bytes each; dst = device
 * buffers of at least gds_codec_max_encoded_bytes(p) each); out_bytes[i] =
 * stored size; out_mask[i] = filter mask to store (an optional filter whose
 * output is not smaller than its input is skipped). Synchronises the
 * stream. The compressed bytes are not those of HDF5's CPU filters, but
 * HDF5 / hdf5plugin decode them to the same data. */
int gds_codec_encode(gds_codec_t *c, const gds_codec_pipeline_t *p, const void *const *src, void *const *dst,
                     size_t *out_bytes, unsigned *out_mask, size_t n, CUstream stream, gds_status_t *st);

/* Whether the codec stopped: a batch's work never finished on the GPU
 * (H5GDS_CODEC_TIMEOUT_S, default 30 s; its calls failed with ETIMEDOUT):
 * every later call fails, and the caller should decode elsewhere and not
 * free device memory that work may still use. */
bool gds_codec_stopped(const gds_codec_t *c);

/* Which nvCOMP was loaded (path, major version) and the device's
 * architecture, for logs; "" before open. */
const char *gds_codec_describe(const gds_codec_t *c);

#endif
