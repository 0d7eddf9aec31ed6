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
/* Deflate chunks are compressed in pieces of this many bytes, joined into
 * one stream (deflate_splice.h, gds_codec_deflate_piece). 256 MiB of 1 MiB
 * chunks (shuffle + level 4, a float field) compressed at 3.3, 3.2, 2.9
 * and 2.4 GB/s in pieces of 16, 32, 64 and 128 KiB, 1.5 whole; the ratio
 * 1.47-1.49 in pieces, 1.37 whole (H100, tests/codec --bench-deflate;
 * 3.6 at 32 KiB once the join's tables moved to shared memory). */
#define GDS_DEFLATE_PIECE 32768u
/* codec_deflate_join's launch: a warp a piece, this many warps a block
 * (its walk tables in shared memory, one set a warp). */
#define GDS_DEFLATE_JOIN_WARPS 4u
/* Warps a block of codec_inflate_segments (a segment each): a divisor of IS_MAX_SEGMENTS. */
#define GDS_INFLATE_WARPS 4u
/* Plain zstd chunks are compressed in pieces, then spliced into one frame
 * (zstd_splice.h): nvCOMP compresses a batch of 32 KiB pieces fastest, and
 * larger ones better (longer matches found), up to a block's 128 KiB; the
 * zstd level chooses (gds_codec_zstd_piece). */
#define GDS_ZSTD_PIECE_MIN 32768u
#define GDS_ZSTD_PIECE_MAX 131072u
/* The splice kernel's decoder checkpoints (one every 128 sequences,
 * ZS_SEG): enough for a block of the largest piece, whose matches are 3
 * bytes at least. */
#define GDS_ZSTD_SPLICE_CHECKPOINTS (GDS_ZSTD_PIECE_MAX / 3 / 128 + 1)

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

/* ---- Blosc-1 encoding: the GPU writes c-blosc 1.x frames that c-blosc's
 * blosc_d (and gds_blosc_block_byte above) read back; the same code for the
 * kernels and the unit tests ---- */

/* 8x8 bit transpose of a little-endian word: bit t of byte k <-> bit k of byte t. */
GDS_HD gds_u64 gds_bit_transpose8(gds_u64 x)
{
    gds_u64 t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
    x = x ^ t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
    x = x ^ t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
    x = x ^ t ^ (t << 28);
    return x;
}

/* The units of work of one block's shuffle when encoding (one GPU thread
 * each), the transform blosc_d undoes: byte shuffle (typesize > 1) one per
 * element; bit shuffle (the block's elements a multiple of 8, as c-blosc
 * 1.x requires, else the block is not transformed) one per 8 elements;
 * then one per trailing byte (bsize % typesize, kept as they are); a block
 * not transformed, one per byte. */
GDS_HD gds_u32 gds_blosc_shuffle_units(gds_u32 flags, gds_u32 typesize, gds_u32 bsize)
{
    gds_u32 n = bsize / typesize;
    if ((flags & GDS_BLOSC_DOSHUFFLE) && typesize > 1)
        return n + (bsize - n * typesize);
    if ((flags & GDS_BLOSC_DOBITSHUFFLE) && bsize >= typesize && n % 8 == 0)
        return n / 8 + (bsize - n * typesize);
    return bsize;
}

/* Unit u of a block's shuffle: from blk (the block of the data) into out
 * (the block as its streams take it). Byte shuffle: byte t of element i at
 * t * n + i. Bit shuffle: bit k of byte j of element e at bit e % 8 of
 * byte e / 8 of row 8 j + k (rows of n / 8 bytes). */
GDS_HD void gds_blosc_shuffle_unit(const unsigned char *blk, unsigned char *out, gds_u32 flags, gds_u32 typesize,
                                   gds_u32 bsize, gds_u32 u)
{
    gds_u32 n = bsize / typesize;
    if ((flags & GDS_BLOSC_DOSHUFFLE) && typesize > 1) {
        if (u < n)
            for (gds_u32 t = 0; t < typesize; t++)
                out[t * n + u] = blk[u * typesize + t];
        else
            out[n * typesize + (u - n)] = blk[n * typesize + (u - n)];
        return;
    }
    if ((flags & GDS_BLOSC_DOBITSHUFFLE) && bsize >= typesize && n % 8 == 0) {
        gds_u32 row = n / 8;
        if (u >= row) {
            out[n * typesize + (u - row)] = blk[n * typesize + (u - row)];
            return;
        }
        for (gds_u32 j = 0; j < typesize; j++) {
            gds_u64 x = 0;
            for (gds_u32 t = 0; t < 8; t++)
                x |= (gds_u64)blk[(8 * u + t) * typesize + j] << (8 * t);
            x = gds_bit_transpose8(x);
            for (gds_u32 k = 0; k < 8; k++)
                out[(j * 8 + k) * row + u] = (unsigned char)(x >> (8 * k));
        }
        return;
    }
    out[u] = blk[u];
}

/* A chunk's shuffle (len bytes in blocks of bs, the last partial): its
 * units of work, and unit u of them done from the chunk at in into mid.
 * The partial block may have more units than a whole one (not
 * transformed: one per byte), so units are counted whole blocks first. */
GDS_HD gds_u64 gds_blosc_shuffle_total(gds_u32 flags, gds_u32 typesize, gds_u64 len, gds_u64 bs)
{
    gds_u64 nfull = len / bs, last = len - nfull * bs;
    return nfull * gds_blosc_shuffle_units(flags, typesize, (gds_u32)bs) +
           (last ? gds_blosc_shuffle_units(flags, typesize, (gds_u32)last) : 0);
}
GDS_HD void gds_blosc_shuffle_at(const unsigned char *in, unsigned char *mid, gds_u32 flags, gds_u32 typesize,
                                 gds_u64 len, gds_u64 bs, gds_u64 u)
{
    gds_u64 nfull = len / bs, ufull = gds_blosc_shuffle_units(flags, typesize, (gds_u32)bs);
    gds_u64 k = u < nfull * ufull ? u / ufull : nfull;
    gds_u64 bsize = k < nfull ? bs : len - nfull * bs;
    gds_blosc_shuffle_unit(in + k * bs, mid + k * bs, flags, typesize, (gds_u32)bsize, (gds_u32)(u - k * ufull));
}

/* Stream i of an encoded chunk of nbytes in blocks of bs (ns streams per
 * whole block, one for the partial last block): its offset in the chunk
 * (the blocks' bytes are contiguous streams), its length in *len and its
 * block in *block. */
GDS_HD gds_u64 gds_blosc_stream_at(gds_u64 i, gds_u64 nbytes, gds_u64 bs, gds_u32 ns, gds_u64 *len, gds_u64 *block)
{
    gds_u64 nfull = nbytes / bs, per = bs / ns;
    if (i < nfull * ns) {
        *len = per;
        *block = i / ns;
        return i * per;
    }
    *len = nbytes - nfull * bs;
    *block = nfull;
    return nfull * bs;
}

/* How an encoded blosc chunk is stored (gds_blosc_frame). */
enum { GDS_BLOSC_STORE_STREAMS = 0, GDS_BLOSC_STORE_MEMCPYED = 1, GDS_BLOSC_STORE_SKIPPED = 2 };

GDS_HD void gds_blosc_put_le32(unsigned char *p, gds_u64 v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (unsigned char)(v >> (8 * b));
}

/* One chunk's Blosc-1 frame (the encoder's layout kernel, and the unit
 * tests on the host): nbytes of data at address `in`, their shuffled
 * blocks at `shuffled` (the raw streams' bytes), blocks of bs, the header's
 * flags and typesize; nstreams streams (gds_blosc_stream_at), stream i
 * compressed to csize[i] bytes at address cptr[i] (csize NULL: none was
 * compressed: clevel 0, or a chunk under 128 bytes, as c-blosc memcpys
 * those). A stream is stored raw when its compressed form is not smaller
 * (its size field then equals its length, which blosc_d copies). The frame
 * (16-byte header, LE int32 block starts, per stream an LE int32 size and
 * the bytes) is kept when it is smaller than the MEMCPYED form (header and
 * data as they are), which is written otherwise; an optional filter whose
 * output would not be smaller than its input is skipped (HDF5's rule: the
 * data as it is, *how SKIPPED). Writes the header, the table and the size
 * fields at out and sets copy[i] to the copy that puts stream i's bytes (in
 * the other forms, the input's bytes of stream i) in place, every field of
 * it. Returns the stored bytes. */
GDS_HD gds_u64 gds_blosc_frame(unsigned char *out, gds_u64 in, gds_u64 shuffled, gds_u64 nbytes, gds_u64 bs,
                               gds_u32 flags, gds_u32 typesize, const gds_u64 *csize, const gds_u64 *cptr,
                               gds_u64 nstreams, int optional, gds_kentry_t *copy, gds_u32 *how)
{
    gds_u32 ns = gds_blosc_nsplits(flags, typesize, bs, 0);
    gds_u64 nblocks = (nbytes + bs - 1) / bs, len, block;
    gds_u64 frame = 16 + 4 * nblocks;
    for (gds_u64 i = 0; csize && i < nstreams; i++) {
        gds_blosc_stream_at(i, nbytes, bs, ns, &len, &block);
        frame += 4 + (csize[i] < len ? csize[i] : len);
    }
    gds_u64 total = csize && frame < nbytes + 16 ? frame : nbytes + 16;
    *how = csize && frame < nbytes + 16 ? GDS_BLOSC_STORE_STREAMS : GDS_BLOSC_STORE_MEMCPYED;
    if (optional && total >= nbytes) {
        *how = GDS_BLOSC_STORE_SKIPPED;
        total = nbytes;
    }
    gds_u64 pos = 16 + 4 * nblocks, data_at = *how == GDS_BLOSC_STORE_MEMCPYED ? 16 : 0;
    for (gds_u64 i = 0; i < nstreams; i++) {
        gds_u64 off = gds_blosc_stream_at(i, nbytes, bs, ns, &len, &block);
        gds_kentry_t *x = &copy[i];
        x->flags = GDS_KENTRY_COPY;
        x->chunk = 0;
        if (*how != GDS_BLOSC_STORE_STREAMS) {
            x->copy_src = in + off;
            x->copy_dst = (gds_u64)out + data_at + off;
            x->copy_len = len;
            continue;
        }
        if (off == block * bs) /* the block's first stream */
            gds_blosc_put_le32(out + 16 + 4 * block, pos);
        int raw = csize[i] >= len;
        gds_u64 n = raw ? len : csize[i];
        gds_blosc_put_le32(out + pos, n);
        x->copy_src = raw ? shuffled + off : cptr[i];
        x->copy_dst = (gds_u64)out + pos + 4;
        x->copy_len = n;
        pos += 4 + n;
    }
    if (*how != GDS_BLOSC_STORE_SKIPPED) {
        out[0] = GDS_BLOSC_VERSION;
        out[1] = 1; /* LZ4's format version (c-blosc writes the compressor's even when MEMCPYED) */
        out[2] = (unsigned char)(flags | (*how == GDS_BLOSC_STORE_MEMCPYED ? GDS_BLOSC_MEMCPYED : 0u));
        out[3] = (unsigned char)typesize;
        gds_blosc_put_le32(out + 4, nbytes);
        gds_blosc_put_le32(out + 8, bs);
        gds_blosc_put_le32(out + 12, total);
    }
    return total;
}

#endif
