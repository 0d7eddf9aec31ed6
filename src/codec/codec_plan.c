/* The GPU codecs' host-only logic; see codec_plan.h. */
#include "codec_plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codec_shared.h"

/* bitshuffle's compression choice (cd[4]) */
enum { BSHUF_COMPRESS_LZ4 = 2, BSHUF_COMPRESS_ZSTD = 3 };
/* the decoded sizes nvCOMP's decompressors take (zstd's is the smallest) */
#define GDS_CODEC_MAX_DECODED ((size_t)INT32_MAX)

static void say(char *why, size_t why_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t why_size, const char *fmt, ...)
{
    if (!why || !why_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
}

const char *gds_codec_filter_name(unsigned id)
{
    switch (id) {
    case GDS_FILTER_DEFLATE: return "deflate";
    case GDS_FILTER_SHUFFLE: return "shuffle";
    case GDS_FILTER_FLETCHER32: return "fletcher32";
    case GDS_FILTER_LZ4: return "lz4";
    case GDS_FILTER_BITSHUFFLE: return "bitshuffle";
    case GDS_FILTER_ZSTD: return "zstd";
    case GDS_FILTER_BLOSC: return "blosc";
    case 4: return "szip";
    case 5: return "nbit";
    case 6: return "scaleoffset";
    case 307: return "bzip2";
    case 32000: return "lzf";
    case 32017: return "sz";
    case 32026: return "blosc2";
    default: return "unknown";
    }
}

bool gds_codec_step_compresses(gds_step_kind_t kind)
{
    return kind == GDS_STEP_DEFLATE || kind == GDS_STEP_ZSTD || kind == GDS_STEP_LZ4 || kind == GDS_STEP_BSHUF_LZ4 ||
           kind == GDS_STEP_BSHUF_ZSTD || kind == GDS_STEP_BLOSC;
}

size_t gds_bshuf_default_block(size_t elem)
{
    size_t block = elem ? GDS_BSHUF_TARGET_BLOCK_BYTES / elem : 0;
    block = block / 8 * 8;
    return block > GDS_BSHUF_MIN_BLOCK ? block : GDS_BSHUF_MIN_BLOCK;
}

void gds_bshuf_layout(size_t size, size_t block, size_t *full, size_t *last, size_t *leftover)
{
    *full = block ? size / block : 0;
    *last = block ? (size % block) / 8 * 8 : 0;
    *leftover = size % 8;
}

/* One filter of the pipeline as a step; -1 with the reason. */
static int filter_step(const gds_codec_filter_t *f, unsigned pos, bool encode, gds_codec_step_t *s, char *why,
                       size_t why_size)
{
    memset(s, 0, sizeof *s);
    s->pos = pos;
    s->optional = (f->flags & GDS_FILTER_FLAG_OPTIONAL) != 0;
    const char *name = gds_codec_filter_name(f->id);
    if (f->ncd > GDS_CODEC_MAX_CD) {
        say(why, why_size, "filter %u (%s): %zu parameters (at most %d)", pos, name, f->ncd, GDS_CODEC_MAX_CD);
        return -1;
    }
    switch (f->id) {
    case GDS_FILTER_DEFLATE:
        /* HDF5's deflate filter fails on anything else */
        if (f->ncd != 1 || f->cd[0] > 9) {
            say(why, why_size, "filter %u (deflate): invalid level parameters (%zu values, level %u)", pos, f->ncd,
                f->ncd ? f->cd[0] : 0);
            return -1;
        }
        s->kind = GDS_STEP_DEFLATE;
        s->level = (int)f->cd[0];
        return 0;
    case GDS_FILTER_SHUFFLE:
        if (f->ncd != 1 || f->cd[0] == 0) {
            say(why, why_size, "filter %u (shuffle): invalid parameters (%zu values)", pos, f->ncd);
            return -1;
        }
        s->kind = GDS_STEP_SHUFFLE;
        s->elem = f->cd[0];
        return 0;
    case GDS_FILTER_FLETCHER32:
        s->kind = GDS_STEP_FLETCHER32;
        s->verify = (f->flags & GDS_FILTER_FLAG_SKIP_EDC) == 0;
        return 0;
    case GDS_FILTER_ZSTD:
        s->kind = GDS_STEP_ZSTD;
        s->level = f->ncd > 0 ? (int)f->cd[0] : 3;
        return 0;
    case GDS_FILTER_LZ4:
        s->kind = GDS_STEP_LZ4;
        s->block = f->ncd > 0 ? f->cd[0] : 0;
        return 0;
    case GDS_FILTER_BITSHUFFLE: {
        if (f->ncd < 3 || f->cd[2] == 0) {
            say(why, why_size, "filter %u (bitshuffle): invalid parameters (%zu values, element size %u)", pos,
                f->ncd, f->ncd >= 3 ? f->cd[2] : 0);
            return -1;
        }
        s->elem = f->cd[2];
        s->block = f->ncd > 3 ? f->cd[3] : 0;
        unsigned comp = f->ncd > 4 ? f->cd[4] : 0;
        s->level = f->ncd > 5 ? (int)f->cd[5] : 0;
        s->kind = comp == BSHUF_COMPRESS_LZ4    ? GDS_STEP_BSHUF_LZ4
                  : comp == BSHUF_COMPRESS_ZSTD ? GDS_STEP_BSHUF_ZSTD
                                                : GDS_STEP_BITSHUFFLE;
        /* the block size of the parameters is the one used without
         * compression, and the one written when encoding */
        if ((s->kind == GDS_STEP_BITSHUFFLE || encode) && s->block % 8) {
            say(why, why_size, "filter %u (bitshuffle): block size %u is not a multiple of 8", pos, s->block);
            return -1;
        }
        return 0;
    }
    case GDS_FILTER_BLOSC: {
        /* the writer's compressor; each chunk's header says again which one
         * wrote it (checked per chunk: UNSUPPORTED where it is another) */
        unsigned code = f->ncd > 6 ? f->cd[6] : GDS_BLOSC_CODE_BLOSCLZ;
        /* hdf5plugin's defaults where the values stop short */
        unsigned clevel = f->ncd > 4 ? f->cd[4] : 5, shuffle = f->ncd > 5 ? f->cd[5] : 1;
        if (encode && code != GDS_BLOSC_CODE_LZ4 && code != GDS_BLOSC_CODE_LZ4HC && code != GDS_BLOSC_CODE_ZSTD) {
            say(why, why_size,
                "filter %u (blosc): compressor %s has no GPU encoder (the GPU encodes blosc's lz4, lz4hc and zstd; "
                "HDF5's CPU filter compresses the others)",
                pos, gds_codec_blosc_code_name(code));
            return -1;
        }
        if (!encode && code != GDS_BLOSC_CODE_LZ4 && code != GDS_BLOSC_CODE_LZ4HC && code != GDS_BLOSC_CODE_ZSTD) {
            say(why, why_size,
                "filter %u (blosc): compressor %s has no GPU decoder (nvCOMP decodes blosc's lz4, lz4hc and "
                "zstd; HDF5's CPU filter decodes the others)",
                pos, gds_codec_blosc_code_name(code));
            return -1;
        }
        /* c-blosc refuses these when compressing: HDF5's filter gives the error */
        if (encode && (clevel > 9 || shuffle > 2)) {
            say(why, why_size, "filter %u (blosc): clevel %u or shuffle %u is not c-blosc's (0-9; 0, 1 or 2)", pos,
                clevel, shuffle);
            return -1;
        }
        s->kind = GDS_STEP_BLOSC;
        s->level = (int)clevel;
        s->shuffle = shuffle;
        s->compressor = code;
        /* decoding: the header's typesize is the one used */
        s->elem = encode ? gds_blosc_encode_typesize(f->ncd > 2 ? f->cd[2] : 0) : f->ncd > 2 && f->cd[2] ? f->cd[2] : 1;
        return 0;
    }
    default:
        say(why, why_size, "filter %u (id %u, %s) has no GPU codec", pos, f->id, name);
        return -1;
    }
}

static const char *name_of(const gds_codec_pipeline_t *p, size_t i) { return gds_codec_filter_name(p->filter[i].id); }

int gds_codec_plan_steps(const gds_codec_pipeline_t *p, unsigned mask, bool encode, gds_codec_step_t *steps,
                         size_t *nsteps, char *why, size_t why_size)
{
    *nsteps = 0;
    if (!p) {
        say(why, why_size, "no pipeline");
        return -1;
    }
    if (p->nfilters > GDS_CODEC_MAX_FILTERS) {
        say(why, why_size, "%zu filters (at most %d)", p->nfilters, GDS_CODEC_MAX_FILTERS);
        return -1;
    }
    if (p->chunk_bytes == 0) {
        say(why, why_size, "chunk size of 0 bytes");
        return -1;
    }
    if (p->chunk_bytes > GDS_CODEC_MAX_DECODED) {
        say(why, why_size, "chunks of %zu bytes (at most %zu on the GPU)", p->chunk_bytes, GDS_CODEC_MAX_DECODED);
        return -1;
    }
    int compressor = -1;
    size_t size = p->chunk_bytes;
    for (size_t i = 0; i < p->nfilters; i++) {
        if (mask & (1u << i))
            continue;
        gds_codec_step_t *s = &steps[*nsteps];
        if (filter_step(&p->filter[i], (unsigned)i, encode, s, why, why_size) < 0)
            return -1;
        if (gds_codec_step_compresses(s->kind)) {
            if (compressor >= 0) {
                say(why, why_size,
                    "filters %d (%s) and %zu (%s) both compress: a pipeline with more than one compressing "
                    "filter has no GPU codec",
                    compressor, gds_codec_filter_name(p->filter[compressor].id), i,
                    gds_codec_filter_name(p->filter[i].id));
                return -1;
            }
            compressor = (int)i;
        }
        /* the encoder keeps sizes on the GPU after the compressor: only a
         * checksum may follow it there */
        if (encode && compressor >= 0 && compressor != (int)i && s->kind != GDS_STEP_FLETCHER32) {
            say(why, why_size, "filter %zu (%s) after the compressing filter %d (%s): no GPU encoder for that order",
                i, name_of(p, i), compressor, name_of(p, (size_t)compressor));
            return -1;
        }
        /* sizes known up to the compressor: what bitshuffle needs of them */
        if (size != GDS_SIZE_UNKNOWN &&
            (s->kind == GDS_STEP_BITSHUFFLE || s->kind == GDS_STEP_BSHUF_LZ4 || s->kind == GDS_STEP_BSHUF_ZSTD) &&
            size % s->elem) {
            say(why, why_size, "filter %zu (bitshuffle): %zu bytes are not a whole number of %u-byte elements", i,
                size, s->elem);
            return -1;
        }
        /* c-blosc's largest buffer: a frame's sizes are int32 */
        if (encode && s->kind == GDS_STEP_BLOSC && size != GDS_SIZE_UNKNOWN && size > GDS_CODEC_MAX_DECODED - 16) {
            say(why, why_size, "filter %zu (blosc): chunks of %zu bytes (blosc takes at most %zu)", i, size,
                GDS_CODEC_MAX_DECODED - 16);
            return -1;
        }
        if (size != GDS_SIZE_UNKNOWN)
            size = gds_codec_step_forward(s, size);
        if (size != GDS_SIZE_UNKNOWN && size > GDS_CODEC_MAX_DECODED) {
            say(why, why_size, "chunks of %zu bytes (at most %zu on the GPU)", size, GDS_CODEC_MAX_DECODED);
            return -1;
        }
        (*nsteps)++;
    }
    return 0;
}

size_t gds_codec_step_forward(const gds_codec_step_t *s, size_t in)
{
    switch (s->kind) {
    case GDS_STEP_FLETCHER32: return in + 4;
    case GDS_STEP_SHUFFLE:
    case GDS_STEP_BITSHUFFLE: return in;
    default: return GDS_SIZE_UNKNOWN;
    }
}

size_t gds_lz4h5_encode_block(const gds_codec_step_t *s, size_t in)
{
    size_t bs = s->block ? s->block : GDS_LZ4H5_ENCODE_BLOCK;
    if (bs > in)
        bs = in;
    if (bs > GDS_NVCOMP_LZ4_MAX_BLOCK)
        bs = GDS_NVCOMP_LZ4_MAX_BLOCK;
    return bs ? bs : 1;
}

static size_t lz4_bound(size_t n) { return n + n / 255 + 16 + 64; }
static size_t zstd_bound(size_t n) { return n + (n >> 8) + (n < (128u << 10) ? ((128u << 10) - n) >> 11 : 0) + 64; }

static size_t bshuf_bound(const gds_codec_step_t *s, size_t in, size_t (*bound)(size_t))
{
    size_t size = in / s->elem, bs = s->block ? s->block : gds_bshuf_default_block(s->elem);
    size_t full, last, left;
    gds_bshuf_layout(size, bs, &full, &last, &left);
    size_t b = 12 + full * (4 + bound(bs * s->elem)) + (last ? 4 + bound(last * s->elem) : 0) + left * s->elem +
               in % s->elem;
    return b > in ? b : in;
}

size_t gds_codec_step_bound(const gds_codec_step_t *s, size_t in)
{
    switch (s->kind) {
    case GDS_STEP_FLETCHER32: return in + 4;
    case GDS_STEP_SHUFFLE:
    case GDS_STEP_BITSHUFFLE: return in;
    case GDS_STEP_DEFLATE: {
        size_t nstored = in ? (in + GDS_DEFLATE_STORED_MAX - 1) / GDS_DEFLATE_STORED_MAX : 1;
        return 2 + in + 5 * nstored + 4;
    }
    case GDS_STEP_ZSTD: {
        size_t nraw = in ? (in + GDS_ZSTD_RAW_BLOCK_MAX - 1) / GDS_ZSTD_RAW_BLOCK_MAX : 1;
        return 13 + 3 * nraw + in;
    }
    case GDS_STEP_LZ4: {
        size_t bs = gds_lz4h5_encode_block(s, in);
        size_t nb = in ? (in + bs - 1) / bs : 1;
        return 12 + 4 * nb + in;
    }
    case GDS_STEP_BSHUF_LZ4: return bshuf_bound(s, in, lz4_bound);
    case GDS_STEP_BSHUF_ZSTD: return bshuf_bound(s, in, zstd_bound);
    case GDS_STEP_BLOSC: return in + 16; /* a frame only where smaller than the MEMCPYED form */
    }
    return GDS_SIZE_UNKNOWN;
}

unsigned gds_blosc_encode_typesize(unsigned cd_typesize)
{
    return cd_typesize == 0 || cd_typesize > 255 ? 1 : cd_typesize;
}

/* c-blosc's rule (blosc_d) for splitting a whole block in typesize streams,
 * before its DONT_SPLIT flag */
static bool blosc_splits(size_t typesize, size_t bs)
{
    return typesize <= GDS_BLOSC_MAX_SPLITS && bs / typesize >= GDS_BLOSC_MIN_BUFFERSIZE;
}

/* zstd blocks (gds_step_compresses_zstd) are written whole (DONT_SPLIT), as
 * c-blosc 1.x writes them: zstd came with the split flag (c-blosc 1.11), so
 * every decoder that reads zstd honours it; and no larger than
 * GDS_BLOSC_ENCODE_ZSTD_BLOCK: nvCOMP's zstd compression is fast on inputs
 * of up to 32 KiB only */
size_t gds_blosc_encode_blocksize(const gds_codec_step_t *s, size_t in)
{
    size_t ts = s->elem ? s->elem : 1, group = 8 * ts;
    size_t bs = gds_step_compresses_zstd(s)           ? GDS_BLOSC_ENCODE_ZSTD_BLOCK / group * group
                : ts <= GDS_BLOSC_MAX_SPLITS ? ts * GDS_BLOSC_ENCODE_STREAM
                                             : GDS_BLOSC_ENCODE_STREAM / group * group;
    size_t whole = in / group * group;
    if (bs > whole)
        bs = whole;
    return bs ? bs : in;
}

unsigned gds_blosc_encode_flags(const gds_codec_step_t *s, size_t bs)
{
    unsigned flags = (unsigned)(gds_step_compresses_zstd(s) ? GDS_BLOSC_FORMAT_ZSTD : GDS_BLOSC_FORMAT_LZ4) << 5;
    if (s->shuffle == 1)
        flags |= GDS_BLOSC_DOSHUFFLE;
    else if (s->shuffle == 2)
        flags |= GDS_BLOSC_DOBITSHUFFLE;
    if (gds_step_compresses_zstd(s) || !blosc_splits(s->elem ? s->elem : 1, bs))
        flags |= GDS_BLOSC_DONT_SPLIT;
    return flags;
}

bool gds_blosc_encode_memcpy_only(const gds_codec_step_t *s, size_t in)
{
    return s->level == 0 || in < GDS_BLOSC_MIN_COMPRESS;
}

void gds_blosc_encode_streams(const gds_codec_step_t *s, size_t in, size_t *nstreams, size_t *longest)
{
    size_t bs = gds_blosc_encode_blocksize(s, in), ts = s->elem ? s->elem : 1;
    size_t ns = !gds_step_compresses_zstd(s) && blosc_splits(ts, bs) ? ts : 1, nfull = in / bs, last = in % bs;
    *nstreams = nfull * ns + (last ? 1 : 0);
    *longest = nfull ? bs / ns : 0;
    if (last > *longest)
        *longest = last;
}

const char *gds_codec_blosc_code_name(unsigned code)
{
    switch (code) {
    case GDS_BLOSC_CODE_BLOSCLZ: return "blosclz";
    case GDS_BLOSC_CODE_LZ4: return "lz4";
    case GDS_BLOSC_CODE_LZ4HC: return "lz4hc";
    case GDS_BLOSC_CODE_SNAPPY: return "snappy";
    case GDS_BLOSC_CODE_ZLIB: return "zlib";
    case GDS_BLOSC_CODE_ZSTD: return "zstd";
    default: return "an unknown compressor";
    }
}

const char *gds_codec_blosc_format_name(unsigned format)
{
    switch (format) {
    case GDS_BLOSC_FORMAT_BLOSCLZ: return "blosclz";
    case GDS_BLOSC_FORMAT_LZ4: return "lz4";
    case GDS_BLOSC_FORMAT_SNAPPY: return "snappy";
    case GDS_BLOSC_FORMAT_ZLIB: return "zlib";
    case GDS_BLOSC_FORMAT_ZSTD: return "zstd";
    default: return "an unknown compressor";
    }
}

static uint64_t read_be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static int blocks_fail(gds_codec_blocks_t *b, int reason, uint64_t detail)
{
    b->reason = reason;
    b->detail = detail;
    return -1;
}

int gds_codec_parse_lz4h5(const unsigned char *head, size_t stored, size_t expect, gds_codec_blocks_t *b)
{
    memset(b, 0, sizeof *b);
    if (stored < 12)
        return blocks_fail(b, GDS_KERR_SHORT, stored);
    uint64_t orig = read_be(head, 8), bs = read_be(head + 8, 4);
    if (orig != expect)
        return blocks_fail(b, GDS_KERR_ORIGSIZE, orig);
    if (bs > orig)
        bs = orig; /* as the filter does */
    if (bs == 0)
        return blocks_fail(b, GDS_KERR_PARAM, 0);
    b->block = bs;
    b->nblocks = (orig + bs - 1) / bs;
    /* each block takes 4 + 1 bytes at least */
    if (b->nblocks > (stored - 12) / 5)
        return blocks_fail(b, GDS_KERR_TRUNCATED, stored);
    return 0;
}

int gds_codec_parse_bshuf(const unsigned char *head, size_t stored, size_t expect, size_t elem, gds_codec_blocks_t *b)
{
    memset(b, 0, sizeof *b);
    if (stored < 12)
        return blocks_fail(b, GDS_KERR_SHORT, stored);
    uint64_t nbytes = read_be(head, 8), block_bytes = read_be(head + 8, 4);
    if (nbytes != expect)
        return blocks_fail(b, GDS_KERR_ORIGSIZE, nbytes);
    if (!elem || nbytes % elem)
        return blocks_fail(b, GDS_KERR_PARAM, elem);
    uint64_t block = block_bytes / elem;
    if (block == 0)
        block = gds_bshuf_default_block(elem); /* as bshuf_blocked_wrap_fun does */
    if (block % 8)
        return blocks_fail(b, GDS_KERR_PARAM, block);
    size_t full, last, left;
    gds_bshuf_layout((size_t)(nbytes / elem), (size_t)block, &full, &last, &left);
    b->block = block;
    b->nblocks = full + (last ? 1 : 0);
    if (b->nblocks > (stored - 12) / 5 || 12 + 5 * b->nblocks + left * elem > stored)
        return blocks_fail(b, GDS_KERR_TRUNCATED, stored);
    return 0;
}

static int64_t read_le_i32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
}

static int blosc_fail(gds_codec_blosc_t *b, int reason, uint64_t detail)
{
    b->reason = reason;
    b->detail = detail;
    return -1;
}

int gds_codec_parse_blosc(const unsigned char *head, size_t stored, size_t expect, gds_codec_blosc_t *b)
{
    memset(b, 0, sizeof *b);
    if (stored < GDS_HEAD_BYTES)
        return blosc_fail(b, GDS_KERR_SHORT, stored);
    /* in blosc_run_decompression_with_context's order, the decoded size
     * first (hdf5plugin sizes its output from it) */
    int64_t nbytes = read_le_i32(head + 4), blocksize = read_le_i32(head + 8), cbytes = read_le_i32(head + 12);
    if (head[0] != GDS_BLOSC_VERSION)
        return blosc_fail(b, GDS_KERR_HEADER, head[0]);
    if (nbytes < 0 || (uint64_t)nbytes != expect)
        return blosc_fail(b, GDS_KERR_ORIGSIZE, (uint64_t)(uint32_t)nbytes);
    b->flags = head[2];
    b->typesize = head[3];
    b->format = b->flags >> 5;
    if (blocksize <= 0 || blocksize > nbytes || blocksize > GDS_BLOSC_MAX_BLOCKSIZE)
        return blosc_fail(b, GDS_KERR_PARAM, (uint64_t)(uint32_t)blocksize);
    if (b->typesize == 0)
        return blosc_fail(b, GDS_KERR_PARAM, 0);
    if (b->flags & GDS_BLOSC_FUTURE_FLAG)
        return blosc_fail(b, GDS_KERR_HEADER, b->flags);
    /* c-blosc bounds its reads by cbytes alone; the GPU by the stored chunk too */
    if (cbytes < GDS_HEAD_BYTES)
        return blosc_fail(b, GDS_KERR_TRUNCATED, 12);
    b->blocksize = (uint64_t)blocksize;
    b->cbytes = (uint64_t)cbytes < stored ? (uint64_t)cbytes : stored;
    uint64_t nfull = (uint64_t)nbytes / b->blocksize, partial = (uint64_t)nbytes % b->blocksize;
    b->nblocks = nfull + (partial ? 1 : 0);
    if (b->flags & GDS_BLOSC_MEMCPYED) {
        if ((uint64_t)cbytes != (uint64_t)nbytes + GDS_HEAD_BYTES)
            return blosc_fail(b, GDS_KERR_PARAM, (uint64_t)cbytes);
        if ((uint64_t)cbytes > stored)
            return blosc_fail(b, GDS_KERR_TRUNCATED, 12);
        b->memcpyed = true;
        return 0;
    }
    if (head[1] != 1 || b->format > GDS_BLOSC_FORMAT_ZSTD) /* every format's version is 1 */
        return blosc_fail(b, GDS_KERR_PARAM, b->format > GDS_BLOSC_FORMAT_ZSTD ? b->format : head[1]);
    if (b->format != GDS_BLOSC_FORMAT_LZ4 && b->format != GDS_BLOSC_FORMAT_ZSTD)
        return blosc_fail(b, GDS_KERR_UNSUPPORTED, b->format);
    if (b->nblocks > (b->cbytes - GDS_HEAD_BYTES) / 4)
        return blosc_fail(b, GDS_KERR_TRUNCATED, GDS_HEAD_BYTES);
    b->nsplits = gds_blosc_nsplits(b->flags, b->typesize, b->blocksize, 0);
    /* split streams that do not fill the block leave c-blosc's output short */
    if (b->blocksize % b->nsplits)
        return blosc_fail(b, GDS_KERR_PARAM, b->blocksize);
    b->nentries = nfull * b->nsplits + (partial ? 1 : 0);
    b->max_stream = nfull ? b->blocksize / b->nsplits : 0;
    if (partial > b->max_stream)
        b->max_stream = partial;
    return 0;
}

bool gds_codec_zlib_header_ok(unsigned cmf, unsigned flg) { return gds_zlib_header_ok(cmf, flg) != 0; }

unsigned gds_codec_zlib_flg(int level)
{
    unsigned flevel = level < 2 ? 0 : level < 6 ? 1 : level == 6 ? 2 : 3;
    unsigned flg = flevel << 6;
    flg += 31 - ((0x78u << 8) | flg) % 31;
    return flg;
}

int gds_codec_error_errno(const gds_codec_pipeline_t *p, unsigned code, uint64_t detail, unsigned *filter)
{
    unsigned reason = code & 0xff, pos = (code >> 8) - 1;
    if (filter)
        *filter = code >> 8 && p && pos < p->nfilters ? p->filter[pos].id : 0;
    /* a chunk that is valid but has no GPU decoder (HDF5's CPU filter decodes it), one whose sizes
     * disagree with the pipeline's (or too small for its framing; nvCOMP's status 15, "output
     * buffer too small": a stream decoding past the chunk), or a corrupt stream */
    bool sizes = reason == GDS_KERR_SIZE || reason == GDS_KERR_ORIGSIZE || reason == GDS_KERR_STORED ||
                 reason == GDS_KERR_SHORT || (reason == GDS_KERR_DECODE && detail == 15);
    return reason == GDS_KERR_UNSUPPORTED ? EOPNOTSUPP : sizes ? ERANGE : EBADMSG;
}

static const char *nvcomp_status_name(uint64_t st)
{
    switch (st) {
    case 10: return "invalid value";
    case 11: return "not supported";
    case 12: return "cannot decompress";
    case 13: return "bad checksum";
    case 15: return "output buffer too small";
    case 18: return "chunk size too large";
    case 19: return "cannot compress";
    case 20: return "wrong input length";
    case 1000: return "CUDA error";
    case 10000: return "internal error";
    default: return "error";
    }
}

void gds_codec_error_text(const gds_codec_pipeline_t *p, unsigned code, uint64_t detail, char *buf, size_t size)
{
    unsigned pos = (code >> 8) - 1, reason = code & 0xff;
    unsigned id = p && pos < p->nfilters ? p->filter[pos].id : 0;
    char who[64];
    if (code >> 8)
        snprintf(who, sizeof who, "filter %u (%s)", pos, gds_codec_filter_name(id));
    else
        snprintf(who, sizeof who, "pipeline");
    switch (reason) {
    case GDS_KERR_HEADER:
        if (id == GDS_FILTER_DEFLATE)
            snprintf(buf, size, "%s: not a zlib stream HDF5 reads (header bytes 0x%02x 0x%02x)", who,
                     (unsigned)(detail >> 8) & 0xff, (unsigned)detail & 0xff);
        else
            snprintf(buf, size, "%s: malformed header", who);
        break;
    case GDS_KERR_TRUNCATED:
        snprintf(buf, size, "%s: corrupt or truncated chunk (a size at byte %" PRIu64 " runs past its end)", who,
                 detail);
        break;
    case GDS_KERR_DECODE:
        snprintf(buf, size, "%s: corrupt data: nvCOMP could not decompress it (status %" PRIu64 ", %s)", who, detail,
                 nvcomp_status_name(detail));
        break;
    case GDS_KERR_SIZE:
        snprintf(buf, size, "%s: corrupt data: decoded to %" PRIu64 " bytes, not the size the pipeline gives", who,
                 detail);
        break;
    case GDS_KERR_CHECKSUM:
        snprintf(buf, size, "%s: %s mismatch: data error detected (stored 0x%08x, computed 0x%08x)", who,
                 id == GDS_FILTER_DEFLATE ? "Adler-32" : "checksum", (unsigned)(detail >> 32), (unsigned)detail);
        break;
    case GDS_KERR_PARAM:
        snprintf(buf, size, "%s: a parameter in the chunk's header is not valid (%" PRIu64 ")", who, detail);
        break;
    case GDS_KERR_ORIGSIZE:
        snprintf(buf, size, "%s: the chunk's header says %" PRIu64 " decoded bytes, not the size the pipeline gives",
                 who, detail);
        break;
    case GDS_KERR_SHORT:
        snprintf(buf, size, "%s: a chunk of %" PRIu64 " bytes is too small for the filter's framing", who, detail);
        break;
    case GDS_KERR_ENCODE:
        snprintf(buf, size, "%s: nvCOMP could not compress (status %" PRIu64 ", %s)", who, detail,
                 nvcomp_status_name(detail));
        break;
    case GDS_KERR_STORED:
        snprintf(buf, size, "%s: stored size %" PRIu64 " differs from the size the filters give", who, detail);
        break;
    case GDS_KERR_UNSUPPORTED:
        if (id == GDS_FILTER_BLOSC)
            snprintf(buf, size,
                     "%s: the chunk is compressed with %s, which has no GPU decoder (HDF5's CPU filter decodes it)",
                     who, gds_codec_blosc_format_name((unsigned)detail));
        else
            snprintf(buf, size, "%s: the chunk needs a decoder the GPU does not have (%" PRIu64 ")", who, detail);
        break;
    default: snprintf(buf, size, "%s: error %u (%" PRIu64 ")", who, reason, detail); break;
    }
}

bool gds_codec_can_decode(const gds_codec_pipeline_t *p, char *why, size_t why_size)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t n;
    if (why && why_size)
        why[0] = 0;
    return gds_codec_plan_steps(p, 0, false, steps, &n, why, why_size) == 0;
}

bool gds_codec_can_encode(const gds_codec_pipeline_t *p, char *why, size_t why_size)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t n;
    if (why && why_size)
        why[0] = 0;
    return gds_codec_plan_steps(p, 0, true, steps, &n, why, why_size) == 0;
}

size_t gds_codec_max_encoded_bytes(const gds_codec_pipeline_t *p)
{
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t n;
    if (gds_codec_plan_steps(p, 0, true, steps, &n, NULL, 0) < 0)
        return 0;
    size_t size = p->chunk_bytes;
    for (size_t i = 0; i < n; i++) {
        size_t b = gds_codec_step_bound(&steps[i], size);
        size = b > size ? b : size; /* an optional filter skipped leaves `size` */
    }
    return size;
}

size_t gds_codec_widest_fitting(size_t hi, bool (*fits)(void *arg, size_t m), void *arg)
{
    size_t lo = 1;
    if (hi <= 1 || fits(arg, hi))
        return hi ? hi : 1;
    hi--;
    while (lo < hi) { /* lo fits (or is 1), hi + 1 does not */
        size_t mid = lo + (hi - lo + 1) / 2;
        if (fits(arg, mid))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}
