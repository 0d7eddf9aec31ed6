/*
 * What the host and the codec's kernels (codec_kernels.cu, compiled at run
 * time by NVRTC, which also gets this header) both see: the job and entry
 * records, error codes and limits (plain fixed-size fields only, so that
 * the layout is the same on both sides), and the checks of zlib headers
 * and zstd frames (plain C that CUDA C++ also compiles).
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
    GDS_KERR_STORED = 10,   /* the stored size differs from the one the filters give */
    GDS_KERR_UNSUPPORTED = 11 /* valid, but no GPU decoder (detail: what the header names); HDF5's CPU
                                 filter decodes it */
};

/* Bytes of an encoded deflate stored block's data and the zstd raw block. */
#define GDS_DEFLATE_STORED_MAX 65535u
#define GDS_ZSTD_RAW_BLOCK_MAX 131072u

/* The header bytes the host reads of a chunk to plan its blocks (blosc's
 * header is all of them). */
#define GDS_HEAD_BYTES 16u

/* Blosc-1 chunks (c-blosc 1.x, HDF5 filter 32001): a 16-byte header
 * (version, compressor format version, flags, typesize, then LE int32
 * nbytes, blocksize, cbytes), the data itself when MEMCPYED, else an LE
 * int32 start offset per block and, at each, the block's streams: an LE
 * int32 size and the bytes (stored raw when the size is the stream's
 * decoded size). Flag bits as c-blosc's blosc.h and blosc.c name them; the
 * compressor format is flags >> 5. */
#define GDS_BLOSC_VERSION 2u
#define GDS_BLOSC_DOSHUFFLE 0x01u
#define GDS_BLOSC_MEMCPYED 0x02u
#define GDS_BLOSC_DOBITSHUFFLE 0x04u
#define GDS_BLOSC_FUTURE_FLAG 0x08u /* c-blosc 1.x refuses chunks with it */
#define GDS_BLOSC_DONT_SPLIT 0x10u
enum {
    GDS_BLOSC_FORMAT_BLOSCLZ = 0,
    GDS_BLOSC_FORMAT_LZ4 = 1, /* LZ4 and LZ4HC */
    GDS_BLOSC_FORMAT_SNAPPY = 2,
    GDS_BLOSC_FORMAT_ZLIB = 3,
    GDS_BLOSC_FORMAT_ZSTD = 4
};
#define GDS_BLOSC_MAX_SPLITS 16u
#define GDS_BLOSC_MIN_BUFFERSIZE 128u
#define GDS_BLOSC_MAX_BLOCKSIZE ((0x7fffffffu - 255u * 4u) / 3u)

/* ---- checks of compressed framing, the same code for the kernels and
 * for the host (the unit tests run it on host bytes) ---- */

#ifdef __CUDACC_RTC__
#define GDS_HD __device__ __forceinline__
#else
#define GDS_HD static inline
#endif

/* zlib's 2-byte header as HDF5's inflate accepts it: CM 8, window <= 32K,
 * header check, no preset dictionary. */
GDS_HD int gds_zlib_header_ok(gds_u32 cmf, gds_u32 flg)
{
    return (cmf & 15) == 8 && (cmf >> 4) <= 7 && ((cmf << 8) | flg) % 31 == 0 && !(flg & 0x20);
}

/* A zstd frame as HDF5's zstd filter (and bitshuffle) reads it: one frame
 * and nothing after it, no dictionary; its blocks' sizes inside the data;
 * with need_fcs, a content size (the filter sizes its output from it). A
 * content size it gives must be `expect`, and its blocks must be able to
 * hold `expect` bytes. Checked before nvCOMP sees a frame: nvCOMP's decoder
 * does not keep its writes inside the output on a malformed one. 0, or the
 * reason (GDS_KERR_*) with a detail (a size or a byte position). */
GDS_HD gds_u32 gds_zstd_frame_check(const unsigned char *p, gds_u64 len, gds_u64 expect, int need_fcs,
                                    gds_u64 *det)
{
    *det = 0;
    if (len < 6 || ((gds_u32)p[0] | ((gds_u32)p[1] << 8) | ((gds_u32)p[2] << 16) | ((gds_u32)p[3] << 24)) !=
                       0xFD2FB528u)
        return GDS_KERR_HEADER;
    gds_u32 fhd = p[4];
    if (fhd & 0x08) /* reserved bit */
        return GDS_KERR_HEADER;
    gds_u32 fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, dflag = fhd & 3, checksum = (fhd >> 2) & 1;
    gds_u64 pos = 5, window = 0;
    if (!single) {
        gds_u32 wd = p[pos++];
        gds_u64 base = 1ull << (10 + (wd >> 3));
        window = base + (base >> 3) * (wd & 7);
    }
    gds_u32 dbytes = dflag == 3 ? 4 : dflag;
    gds_u32 fbytes = fcs_flag ? (1u << fcs_flag) : (single ? 1 : 0);
    if (pos + dbytes + fbytes > len)
        return GDS_KERR_TRUNCATED;
    gds_u64 dict = 0, fcs = 0;
    for (gds_u32 i = 0; i < dbytes; i++)
        dict |= (gds_u64)p[pos + i] << (8 * i);
    pos += dbytes;
    for (gds_u32 i = 0; i < fbytes; i++)
        fcs |= (gds_u64)p[pos + i] << (8 * i);
    pos += fbytes;
    if (fbytes == 2)
        fcs += 256;
    if (dict) {
        *det = dict;
        return GDS_KERR_PARAM;
    }
    if (fbytes && fcs != expect) {
        *det = fcs;
        return GDS_KERR_ORIGSIZE;
    }
    if (!fbytes && need_fcs)
        return GDS_KERR_HEADER;
    if (single)
        window = fcs;
    gds_u64 bmax = window < 131072 ? window : 131072;
    gds_u64 fixed = 0, ncomp = 0;
    for (;;) { /* each block moves pos on by 3 bytes at least */
        if (pos + 3 > len) {
            *det = pos;
            return GDS_KERR_TRUNCATED;
        }
        gds_u32 bh = (gds_u32)p[pos] | ((gds_u32)p[pos + 1] << 8) | ((gds_u32)p[pos + 2] << 16);
        gds_u32 last = bh & 1, type = (bh >> 1) & 3;
        gds_u64 bsize = bh >> 3, content = type == 1 ? 1 : bsize;
        if (type == 3 || bsize > bmax) {
            *det = pos;
            return GDS_KERR_HEADER;
        }
        pos += 3;
        if (content > len - pos) {
            *det = pos;
            return GDS_KERR_TRUNCATED;
        }
        pos += content;
        if (type == 2)
            ncomp++;
        else
            fixed += bsize;
        if (last)
            break;
    }
    if (checksum)
        pos += 4;
    if (pos != len) {
        *det = pos;
        return GDS_KERR_TRUNCATED;
    }
    if (fixed > expect || fixed + ncomp * bmax < expect) {
        *det = fixed;
        return GDS_KERR_SIZE;
    }
    return 0;
}

/* How many streams a block decodes from, as c-blosc's blosc_d decides it:
 * a whole (not the last, partial) block is split into typesize streams
 * unless the header's DONT_SPLIT flag is set, and only where typesize <= 16
 * and the block holds 128 elements or more (the rule from before the flag). */
GDS_HD gds_u32 gds_blosc_nsplits(gds_u32 flags, gds_u32 typesize, gds_u64 blocksize, int partial_block)
{
    if (!(flags & GDS_BLOSC_DONT_SPLIT) && typesize <= GDS_BLOSC_MAX_SPLITS && typesize &&
        blocksize / typesize >= GDS_BLOSC_MIN_BUFFERSIZE && !partial_block)
        return typesize;
    return 1;
}

/* The stream of a block at *off (its LE int32 size, then its bytes) in a
 * chunk whose header gives csize bytes, checked as blosc_d checks it: the
 * size field and the bytes lie inside csize. 0 with the stream's size in
 * *cs and *off moved past it; else GDS_KERR_TRUNCATED and *det = the size
 * field's position. An empty stream of a non-empty block fails too (no
 * decompressor makes bytes from nothing). */
GDS_HD gds_u32 gds_blosc_stream(const unsigned char *p, gds_u64 csize, long long *off, gds_u64 *cs, gds_u64 *det)
{
    long long o = *off;
    if (o < 0 || o + 4 > (long long)csize) {
        *det = o < 0 ? 0 : (gds_u64)o;
        return GDS_KERR_TRUNCATED;
    }
    long long c = (int)((gds_u32)p[o] | ((gds_u32)p[o + 1] << 8) | ((gds_u32)p[o + 2] << 16) |
                        ((gds_u32)p[o + 3] << 24));
    if (c <= 0 || c > (long long)csize - (o + 4)) {
        *det = (gds_u64)o;
        return GDS_KERR_TRUNCATED;
    }
    *cs = (gds_u64)c;
    *off = o + 4 + c;
    return 0;
}

/* Byte o of a decoded blosc block of bsize bytes, from the block as its
 * streams decoded (blk): c-blosc's per-block byte unshuffle (typesize > 1;
 * the bsize % typesize trailing bytes as they are), or its bit unshuffle
 * (bitshuffle's transform of the block's bsize / typesize elements when
 * that is a multiple of 8, the trailing bytes as they are; otherwise the
 * block was not transformed), or the byte itself. */
GDS_HD unsigned char gds_blosc_block_byte(const unsigned char *blk, gds_u32 flags, gds_u32 typesize, gds_u32 bsize,
                                          gds_u32 o)
{
    if ((flags & GDS_BLOSC_DOSHUFFLE) && typesize > 1) {
        gds_u32 n = bsize / typesize;
        return o < n * typesize ? blk[(o % typesize) * n + o / typesize] : blk[o];
    }
    if ((flags & GDS_BLOSC_DOBITSHUFFLE) && bsize >= typesize) {
        gds_u32 n = bsize / typesize;
        if (n % 8 || o >= n * typesize)
            return blk[o];
        gds_u32 e = o / typesize, j = o % typesize, row = n / 8;
        const unsigned char *col = blk + e / 8;
        gds_u32 v = 0;
        for (gds_u32 k = 0; k < 8; k++)
            v |= (gds_u32)((col[(j * 8 + k) * row] >> (e % 8)) & 1) << k;
        return (unsigned char)v;
    }
    return blk[o];
}

#endif
