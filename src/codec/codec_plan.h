/*
 * The host side of the GPU codecs that needs no GPU: which filters a
 * pipeline holds and whether they can run on the GPU, the sizes the data
 * has between filters, the chunk headers the host reads to plan a batch
 * (parsed here from host bytes, so the unit tests check them), bounds of
 * encoded sizes, and error texts.
 */
#ifndef H5GDS_CODEC_PLAN_H
#define H5GDS_CODEC_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_codec.h"

typedef enum gds_step_kind {
    GDS_STEP_FLETCHER32,
    GDS_STEP_SHUFFLE,
    GDS_STEP_BITSHUFFLE, /* bitshuffle without compression */
    GDS_STEP_DEFLATE,
    GDS_STEP_ZSTD,
    GDS_STEP_LZ4,
    GDS_STEP_BSHUF_LZ4,
    GDS_STEP_BSHUF_ZSTD,
    GDS_STEP_BLOSC /* Blosc-1 with LZ4 / LZ4HC / zstd streams (encoded: LZ4) */
} gds_step_kind_t;

/* One active filter of a chunk's pipeline. */
typedef struct gds_codec_step {
    gds_step_kind_t kind;
    unsigned pos;   /* the filter's position in the pipeline (its mask bit, its name in errors) */
    unsigned elem;  /* shuffle: bytes per element; bitshuffle: element size */
    unsigned block; /* bitshuffle: elements per block (0: bitshuffle's default); LZ4: block bytes (0: 1 GiB) */
    int level;      /* deflate 0-9; zstd */
    bool optional;  /* H5Z_FLAG_OPTIONAL */
    bool verify;    /* fletcher32: checked on read (not H5Z_FLAG_SKIP_EDC) */
    unsigned shuffle; /* blosc: 0 none, 1 byte, 2 bit shuffle (cd_values[5]); elem is its typesize, level its
                         clevel */
    unsigned compressor; /* blosc: the pipeline's c-blosc compressor code (GDS_BLOSC_CODE_*, cd_values[6]), the
                            one the encoder writes (decoding goes by each chunk's header) */
} gds_codec_step_t;

#define GDS_SIZE_UNKNOWN ((size_t)-1)

/* HDF5's LZ4 filter's default block (1 GiB), bitshuffle's constants. */
#define GDS_LZ4H5_DEFAULT_BLOCK (1u << 30)
#define GDS_BSHUF_TARGET_BLOCK_BYTES 8192u
#define GDS_BSHUF_MIN_BLOCK 128u
/* The LZ4 block the encoder writes when the filter's parameters give none
 * (the filter's own default is the whole chunk): the header records it, any
 * reader takes it, and blocks of LZ4's window size compress about as well
 * while giving the GPU many more blocks to work on. */
#define GDS_LZ4H5_ENCODE_BLOCK (64u << 10)
/* nvCOMP's largest LZ4 block to compress. */
#define GDS_NVCOMP_LZ4_MAX_BLOCK (1u << 24)

/* Blosc-1 encoding: each stream (one nvCOMP LZ4 entry) takes 64 KiB of a
 * block, nvCOMP's usual LZ4 chunk and LZ4's match window (longer streams
 * gain little ratio and give the GPU fewer entries to spread over): blocks
 * of typesize x 64 KiB split in typesize streams where c-blosc splits (see
 * gds_blosc_encode_blocksize), else 64 KiB. */
#define GDS_BLOSC_ENCODE_STREAM (64u << 10)
/* The block the encoder writes for blosc's zstd, whole (never split):
 * nvCOMP's zstd compression is fast on inputs of up to 32 KiB only. */
#define GDS_BLOSC_ENCODE_ZSTD_BLOCK (32u << 10)
/* c-blosc's smallest buffer to compress (MIN_BUFFERSIZE); smaller ones it memcpys */
#define GDS_BLOSC_MIN_COMPRESS 128u

/* The active filters (write order) of p for a chunk whose mask is `mask`;
 * `encode`: those the encoder supports. -1 with the reason. */
int gds_codec_plan_steps(const gds_codec_pipeline_t *p, unsigned mask, bool encode, gds_codec_step_t *steps,
                         size_t *nsteps, char *why, size_t why_size);

/* Whether the step changes the data's size in a way only the data decides. */
bool gds_codec_step_compresses(gds_step_kind_t kind);

/* The size after the step when writing, for `in` bytes before it;
 * GDS_SIZE_UNKNOWN for compressors. */
size_t gds_codec_step_forward(const gds_codec_step_t *s, size_t in);

/* The most bytes the GPU encoder writes for the step, `in` bytes before it. */
size_t gds_codec_step_bound(const gds_codec_step_t *s, size_t in);

/* bitshuffle's block size for an element size (bshuf_default_block_size). */
size_t gds_bshuf_default_block(size_t elem);

/* bitshuffle's block layout for `size` elements: full blocks, the elements
 * of the last partial block (a multiple of 8), the leftover elements. */
void gds_bshuf_layout(size_t size, size_t block, size_t *full, size_t *last, size_t *leftover);

/* The LZ4 block size the encoder uses (the cd value, else
 * GDS_LZ4H5_ENCODE_BLOCK; capped to the chunk and to nvCOMP's limit). */
size_t gds_lz4h5_encode_block(const gds_codec_step_t *s, size_t in);

/* A chunk's header parsed on the host (the first GDS_HEAD_BYTES bytes,
 * `stored` = the chunk's stored size): HDF5's LZ4 framing and bitshuffle's.
 * 0 with the block size and count, or -1 with an error code (GDS_KERR_*)
 * and its detail. `expect` = the decoded size the pipeline gives. */
typedef struct gds_codec_blocks {
    uint64_t block;   /* LZ4: block bytes; bitshuffle: block elements */
    uint64_t nblocks; /* compressed blocks */
    int reason;       /* GDS_KERR_* when -1 */
    uint64_t detail;
} gds_codec_blocks_t;
int gds_codec_parse_lz4h5(const unsigned char *head, size_t stored, size_t expect, gds_codec_blocks_t *b);
int gds_codec_parse_bshuf(const unsigned char *head, size_t stored, size_t expect, size_t elem, gds_codec_blocks_t *b);

/* hdf5plugin's Blosc filter: the compressor of cd_values[6] (c-blosc's
 * compressor codes; BLOSCLZ when the pipeline has fewer values). */
enum {
    GDS_BLOSC_CODE_BLOSCLZ = 0,
    GDS_BLOSC_CODE_LZ4 = 1,
    GDS_BLOSC_CODE_LZ4HC = 2,
    GDS_BLOSC_CODE_SNAPPY = 3,
    GDS_BLOSC_CODE_ZLIB = 4,
    GDS_BLOSC_CODE_ZSTD = 5
};
const char *gds_codec_blosc_code_name(unsigned code);

/* Whether an encoding step compresses with zstd: zstd, bitshuffle + zstd,
 * or blosc whose compressor is zstd. */
static inline bool gds_step_compresses_zstd(const gds_codec_step_t *s)
{
    return s->kind == GDS_STEP_ZSTD || s->kind == GDS_STEP_BSHUF_ZSTD ||
           (s->kind == GDS_STEP_BLOSC && s->compressor == GDS_BLOSC_CODE_ZSTD);
}
/* The compressor a chunk's header names (its flags >> 5: GDS_BLOSC_FORMAT_*). */
const char *gds_codec_blosc_format_name(unsigned format);

/* The typesize the encoder writes in blosc's header for the filter's
 * cd_values[2] (hdf5plugin's set_local writes the type's size there; c-blosc
 * takes 1 for 0 or more than 255). */
unsigned gds_blosc_encode_typesize(unsigned cd_typesize);

/* The block size the encoder writes for `in` bytes (typesize s->elem): a
 * whole number of 8 elements (c-blosc bit-shuffles only blocks whose
 * elements are a multiple of 8: every whole block is then transformed),
 * typesize x GDS_BLOSC_ENCODE_STREAM bytes where its blocks are split in
 * typesize streams, else GDS_BLOSC_ENCODE_STREAM (rounded down to 8
 * elements), at most the chunk's whole groups of 8 elements (the whole
 * chunk when it holds fewer). Any block size reads back: c-blosc's own
 * choice depends on clevel and the compressor, the reader takes the
 * header's. */
size_t gds_blosc_encode_blocksize(const gds_codec_step_t *s, size_t in);

/* The header flags the encoder writes for blocks of bs (GDS_BLOSC_*): the
 * shuffle's bit, LZ4's format (lz4 and lz4hc alike: LZ4 streams), and
 * DONT_SPLIT unless typesize <= 16 and the block holds 128 elements or
 * more: the streams are split exactly where c-blosc decoders from before
 * the flag (< 1.14, which ignore it) split them, as c-blosc's
 * forward-compatible split mode does, so every 1.x decoder reads them. */
unsigned gds_blosc_encode_flags(const gds_codec_step_t *s, size_t bs);

/* Whether the encoder stores a chunk of `in` bytes without compressing it
 * (MEMCPYED, as c-blosc does for clevel 0 and for chunks under 128 bytes). */
bool gds_blosc_encode_memcpy_only(const gds_codec_step_t *s, size_t in);

/* The streams of a chunk of `in` bytes (nvCOMP entries): their count and
 * the longest one's bytes. */
void gds_blosc_encode_streams(const gds_codec_step_t *s, size_t in, size_t *nstreams, size_t *longest);

/* A Blosc-1 chunk's header (its 16 bytes; `stored` = the chunk's stored
 * size, `expect` = the decoded size the pipeline gives), checked as c-blosc
 * 1.x checks it before decoding, plus what the GPU needs: every stream
 * must lie inside min(cbytes, stored). 0 with the layout; -1 with reason
 * (GDS_KERR_*: UNSUPPORTED for blosclz, snappy and zlib chunks, which HDF5's
 * CPU filter decodes) and detail. */
typedef struct gds_codec_blosc {
    unsigned flags;      /* header flags (GDS_BLOSC_* bits) */
    unsigned typesize;
    unsigned format;     /* GDS_BLOSC_FORMAT_* (flags >> 5) */
    bool memcpyed;       /* the data follows the header as it is */
    uint64_t blocksize;
    uint64_t cbytes;     /* the bytes the chunk's streams may use: the header's compressed size, at most
                            the stored size */
    uint64_t nblocks;    /* whole blocks, then one partial block when blocksize does not divide nbytes */
    uint64_t nsplits;    /* streams of each whole block (a partial block has one) */
    uint64_t nentries;   /* streams of the chunk */
    uint64_t max_stream; /* decoded bytes of its largest stream */
    int reason;          /* GDS_KERR_* when -1 */
    uint64_t detail;
} gds_codec_blosc_t;
int gds_codec_parse_blosc(const unsigned char *head, size_t stored, size_t expect, gds_codec_blosc_t *b);

/* zlib's 2-byte header as HDF5's inflate accepts it (CM 8, window <= 32K,
 * check bits, no preset dictionary); the kernel does the same. */
bool gds_codec_zlib_header_ok(unsigned cmf, unsigned flg);
/* The FLG byte the encoder writes for a deflate level (zlib's FLEVEL). */
unsigned gds_codec_zlib_flg(int level);

/* The most chunks m, 1 to `hi`, for which fits(arg, m) holds, where it
 * holds up to some width and not beyond (a sub-batch's memory grows with
 * its width); 1 when none does. A binary search: each call of fits may
 * ask nvCOMP for its sizes. */
size_t gds_codec_widest_fitting(size_t hi, bool (*fits)(void *arg, size_t m), void *arg);

/* A filter's name ("deflate", "lz4"...). */
const char *gds_codec_filter_name(unsigned id);

/* The message for a kernel's error code (see codec_shared.h) on pipeline p. */
void gds_codec_error_text(const gds_codec_pipeline_t *p, unsigned code, uint64_t detail, char *buf, size_t size);

/* The errno gds_codec_decode gives for a kernel's error code and detail
 * (gpu_codec.h): EOPNOTSUPP, ERANGE (sizes) or EBADMSG (a corrupt stream);
 * *filter (if given): the HDF5 id of the filter whose stage found it, 0
 * where the finding is the pipeline's. */
int gds_codec_error_errno(const gds_codec_pipeline_t *p, unsigned code, uint64_t detail, unsigned *filter);

#endif
