/*
 * What the host and the codec's kernels (codec_kernels.cu, compiled at run
 * time by NVRTC, which also gets this header) both see: the job and entry
 * records, error codes and limits. Plain fixed-size fields only, so that
 * the layout is the same on both sides.
 */
#ifndef H5GDS_CODEC_SHARED_H
#define H5GDS_CODEC_SHARED_H

#ifdef __CUDACC_RTC__
typedef unsigned long long gds_u64;
typedef unsigned int gds_u32;
#else
#include <stdint.h>
typedef uint64_t gds_u64;
typedef uint32_t gds_u32;
#endif

/* One chunk in one stage of a pipeline: where its input is and where its
 * output goes (device addresses). Sizes are known on the host when decoding
 * (one size-changing filter at most); when encoding, kernels read the
 * current sizes from a device array instead. */
typedef struct gds_kjob {
    gds_u64 in;       /* input */
    gds_u64 out;      /* output (or the same buffer, in place) */
    gds_u64 mid;      /* staging / intermediate buffer */
    gds_u64 in_size;  /* bytes of input */
    gds_u64 out_size; /* bytes of output expected */
    gds_u64 entry0;   /* first nvCOMP entry of this chunk */
    gds_u32 nentries; /* nvCOMP entries (blocks) of this chunk */
    gds_u32 chunk;    /* index into the error arrays */
    gds_u32 p0, p1;   /* stage parameters (element size, block size...) */
    gds_u32 dead;     /* nonzero: the chunk failed before this stage (treated as failed; the host
                         now leaves such chunks out of the stage instead, so it is 0) */
    gds_u32 pad;
} gds_kjob_t;

/* The arrays of one batched nvCOMP call (device addresses), plus our own
 * per-entry record (gds_kentry_t) of what each entry is. */
typedef struct gds_kentries {
    gds_u64 in_ptrs;    /* const void *[] */
    gds_u64 in_bytes;   /* size_t[] */
    gds_u64 out_cap;    /* size_t[] */
    gds_u64 out_actual; /* size_t[] */
    gds_u64 out_ptrs;   /* void *[] */
    gds_u64 status;     /* int[] */
    gds_u64 aux;        /* gds_kentry_t[] */
} gds_kentries_t;

enum { GDS_KENTRY_DUMMY = 1, GDS_KENTRY_COPY = 2 };

/* An entry's copy (a raw block; when encoding, a block's bytes to their place). */
typedef struct gds_kentry {
    gds_u64 copy_src;
    gds_u64 copy_dst;
    gds_u64 copy_len;
    gds_u32 chunk; /* job index */
    gds_u32 flags; /* GDS_KENTRY_* */
} gds_kentry_t;

/* Error codes: (filter position + 1) << 8 | reason. */
enum {
    GDS_KERR_HEADER = 1,    /* malformed header (zlib, zstd frame, blosc) */
    GDS_KERR_TRUNCATED = 2, /* a size in the framing runs past the end of the chunk */
    GDS_KERR_DECODE = 3,    /* the decompressor failed (detail: nvCOMP status) */
    GDS_KERR_SIZE = 4,      /* decoded size differs (detail: decoded size) */
    GDS_KERR_CHECKSUM = 5,  /* checksum mismatch (detail: stored << 32 | computed) */
    GDS_KERR_PARAM = 6,     /* a parameter in the chunk's header is not valid or not supported */
    GDS_KERR_ORIGSIZE = 7,  /* the header's original size differs from the expected one */
    GDS_KERR_SHORT = 8,     /* the chunk is too small for the filter's framing */
    GDS_KERR_ENCODE = 9,    /* the compressor failed (detail: nvCOMP status) */
    GDS_KERR_STORED = 10    /* the stored size differs from the one the filters give */
};

/* Bytes of an encoded deflate stored block's data and the zstd raw block. */
#define GDS_DEFLATE_STORED_MAX 65535u
#define GDS_ZSTD_RAW_BLOCK_MAX 131072u

/* The header bytes the host reads of a chunk to plan its blocks. */
#define GDS_HEAD_BYTES 16u

#endif
