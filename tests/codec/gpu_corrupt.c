/*
 * test_codec_gpu's corrupt chunks: corrupt and truncated chunks give errors
 * that name the chunk and the filter, and leave the batch's other chunks
 * decoded (the manglers are in gpu_test_common.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "codec_plan.h"
#include "gpu_test_common.h"

/* ---- corrupt chunks ---- */

/* Encodes 6 chunks, corrupts chunk 3 with `fn`: the decode fails naming
 * chunk 3 and `want` is in the message; the other chunks decode right. */
static void corrupt_case(const char *name, const gds_codec_pipeline_t *p, data_kind_t kind, corrupt_fn fn,
                         const char *want, bool expect_ok)
{
    batch_t b;
    if (!batch_make(&b, p, kind, 6, NULL)) {
        printf("skip  corrupt %-33s (a compression library is missing)\n", name);
        batch_free(&b);
        return;
    }
    fn(&b.stored[3]);
    batch_upload(&b, p->chunk_bytes, false);
    gds_status_t st = {0, ""};
    size_t bad = SIZE_MAX;
    int rc = gds_codec_decode(codec, p, b.chunks, b.n, stream, &bad, &st);
    bool ok;
    if (expect_ok) {
        ok = rc == 0 && batch_compare(&b, p->chunk_bytes, SIZE_MAX) == 0;
        CHECK_MSG(ok, "%s: expected success: %s", name, st.msg);
    }
    else {
        ok = rc == -1 && bad == 3 && (!want || strstr(st.msg, want));
        CHECK_MSG(ok, "%s: rc %d, bad %zu, message '%s' (wanted '%s')", name, rc, bad, st.msg, want ? want : "");
        /* sizes (ERANGE) apart from corrupt streams (EBADMSG), and the filter
         * the message names is the one gds_codec_failed_filter gives */
        bool sizes = strstr(st.msg, "decoded to") || strstr(st.msg, "header says") || strstr(st.msg, "stored size") ||
                     strstr(st.msg, "too small");
        char named[64];
        snprintf(named, sizeof named, "(%s)", gds_codec_filter_name(gds_codec_failed_filter()));
        bool classed = st.err == (sizes ? ERANGE : EBADMSG) &&
                       (strstr(st.msg, "filter ") ? gds_codec_failed_filter() != 0 && strstr(st.msg, named) != NULL
                                                  : gds_codec_failed_filter() == 0);
        CHECK_MSG(classed, "%s: err %d, failed filter %u for '%s'", name, st.err, gds_codec_failed_filter(), st.msg);
        ok = ok && classed;
        /* a failure the checks find before decompressing leaves the other
         * chunks decoded; garbage only the decompressor meets ("corrupt
         * data") may make it write past its chunk's slot (nvCOMP's LZ4 does),
         * and the batch's other chunks are then undefined, as gpu_codec.h says */
        size_t diff = batch_compare(&b, p->chunk_bytes, 3);
        bool decompressor = strstr(st.msg, "corrupt data") != NULL;
        CHECK_MSG(diff == 0 || decompressor, "%s: %zu good chunks differ", name, diff);
        ok = ok && (diff == 0 || decompressor);
    }
    printf("%s corrupt %-33s %s\n", ok ? "ok   " : "FAIL ", name, expect_ok ? "(accepted)" : st.msg);
    batch_free(&b);
}

/* A chunk whose header names blosclz in a pipeline that says lz4: the
 * decode fails with EOPNOTSUPP (95) naming blosclz, the caller's cue to use
 * HDF5's CPU filter; the other chunks decode. */
static void blosc_fallback_case(void)
{
    gds_codec_pipeline_t p = pipe_new(256 * 1024, 4);
    const unsigned cd[] = {2, 2, 4, 256 * 1024, 5, 1, 1};
    pipe_add(&p, GDS_FILTER_BLOSC, GDS_FILTER_FLAG_OPTIONAL, 7, cd);
    batch_t b;
    if (!batch_make(&b, &p, DATA_FLOAT_FIELD, 6, NULL)) {
        printf("skip  blosc fallback (liblz4 missing)\n");
        batch_free(&b);
        return;
    }
    blosc_blosclz(&b.stored[3]);
    batch_upload(&b, p.chunk_bytes, false);
    gds_status_t st = {0, ""};
    size_t bad = SIZE_MAX;
    int rc = gds_codec_decode(codec, &p, b.chunks, b.n, stream, &bad, &st);
    bool ok = rc == -1 && bad == 3 && st.err == 95 && strstr(st.msg, "blosclz") && strstr(st.msg, "CPU");
    CHECK_MSG(ok, "blosc fallback: rc %d, bad %zu, err %d, '%s'", rc, bad, st.err, st.msg);
    size_t diff = batch_compare(&b, p.chunk_bytes, 3);
    CHECK_MSG(diff == 0, "blosc fallback: %zu good chunks differ", diff);
    printf("%s blosc chunk of blosclz                 err %d: %s\n", ok && !diff ? "ok   " : "FAIL ", st.err, st.msg);
    batch_free(&b);
}

void corrupt_tests(void)
{
    gds_codec_pipeline_t p;
    const size_t MB = 1 << 20;
    const unsigned bs_lz4[] = {0, 4, 4, 0, 2};
    const unsigned bs_zstd[] = {0, 4, 8, 0, 3, 5};
    const unsigned bl_lz4_shuf[] = {2, 2, 4, MB, 5, 1, 1};

    /* corrupt chunks: errors name the chunk and the filter */
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    corrupt_case("deflate: zlib header", &p, DATA_FLOAT_FIELD, flip_zlib_header, "zlib", false);
    corrupt_case("deflate: preset dictionary", &p, DATA_FLOAT_FIELD, zlib_dictionary, "zlib", false);
    corrupt_case("deflate: Adler-32 trailer", &p, DATA_FLOAT_FIELD, flip_last, "Adler-32", false);
    corrupt_case("deflate: data", &p, DATA_FLOAT_FIELD, flip_middle, "deflate", false);
    corrupt_case("deflate: truncated", &p, DATA_FLOAT_FIELD, truncate_half, "deflate", false);
    corrupt_case("deflate: 3 bytes", &p, DATA_FLOAT_FIELD, truncate_tiny, "too small", false);
    /* bytes after the zlib stream (zlib, so HDF5, stops at its end): an
     * Adler-32 mismatch, a corrupt stream HDF5's filters may judge */
    corrupt_case("deflate: bytes after the stream", &p, DATA_FLOAT_FIELD, pad_after_stream, "Adler-32", false);
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    pipe_add(&p, GDS_FILTER_FLETCHER32, 0, 0, NULL);
    corrupt_case("fletcher32: data", &p, DATA_FLOAT_FIELD, flip_middle, "fletcher32): checksum mismatch", false);
    corrupt_case("fletcher32: byte-swapped (HDF5 < 1.6.3)", &p, DATA_FLOAT_FIELD, swap_checksum, NULL, true);
    corrupt_case("fletcher32: 3 bytes", &p, DATA_FLOAT_FIELD, truncate_tiny, "too small", false);
    p = pipe_new(MB, 1);
    pipe_add(&p, GDS_FILTER_LZ4, OPT, 1, CD64K);
    corrupt_case("lz4: block size past the end", &p, DATA_IMAGE_U8, lz4_block_size_huge, "truncated", false);
    corrupt_case("lz4: block size one short", &p, DATA_IMAGE_U8, lz4_block_size_short, "lz4", false);
    corrupt_case("lz4: original size", &p, DATA_IMAGE_U8, header_orig_size, "header says", false);
    corrupt_case("lz4: truncated", &p, DATA_IMAGE_U8, truncate_half, "lz4", false);
    p = pipe_new(999 * 37 * 4, 4);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 5, bs_lz4);
    corrupt_case("bitshuffle: negative block size", &p, DATA_FLOAT_FIELD, bshuf_block_negative, "truncated", false);
    corrupt_case("bitshuffle: block of 3 elements", &p, DATA_FLOAT_FIELD, bshuf_block_size_zero, "not valid", false);
    corrupt_case("bitshuffle: size", &p, DATA_FLOAT_FIELD, header_orig_size, "header says", false);
    corrupt_case("bitshuffle: truncated", &p, DATA_FLOAT_FIELD, truncate_half, "bitshuffle", false);
    p = pipe_new(512 * 1024, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    corrupt_case("zstd: magic", &p, DATA_SPARSE_INT, zstd_magic, "malformed header", false);
    corrupt_case("zstd: reserved bit", &p, DATA_SPARSE_INT, zstd_reserved_bit, "malformed header", false);
    corrupt_case("zstd: content size", &p, DATA_SPARSE_INT, zstd_content_size, "header says", false);
    corrupt_case("zstd: truncated", &p, DATA_SPARSE_INT, truncate_half, "truncated", false);
    corrupt_case("zstd: last byte dropped", &p, DATA_SPARSE_INT, truncate_last, "truncated", false);
    p = pipe_new(333 * 61 * 8, 8);
    pipe_add(&p, GDS_FILTER_BITSHUFFLE, OPT, 6, bs_zstd);
    corrupt_case("bitshuffle+zstd: magic of block 0", &p, DATA_DOUBLE_FIELD, bshuf_zstd_magic, "malformed header",
                 false);
    p = pipe_new(500000, 4);
    pipe_add(&p, GDS_FILTER_SHUFFLE, OPT, 1, CD4);
    corrupt_case("shuffle: stored size", &p, DATA_SPARSE_INT, truncate_half, "stored size", false);
    p = pipe_new(MB, 4);
    pipe_add(&p, GDS_FILTER_BLOSC, OPT, 7, bl_lz4_shuf);
    corrupt_case("blosc: version", &p, DATA_FLOAT_FIELD, blosc_version, "malformed header", false);
    corrupt_case("blosc: nbytes", &p, DATA_FLOAT_FIELD, blosc_nbytes, "header says", false);
    corrupt_case("blosc: block start past the end", &p, DATA_FLOAT_FIELD, blosc_block_start, "truncated", false);
    corrupt_case("blosc: stream size past the end", &p, DATA_FLOAT_FIELD, blosc_stream_size, "truncated", false);
    corrupt_case("blosc: truncated", &p, DATA_FLOAT_FIELD, truncate_half, "truncated", false);
    corrupt_case("blosc: 3 bytes", &p, DATA_FLOAT_FIELD, truncate_tiny, "too small", false);
    corrupt_case("blosc: garbage in the streams", &p, DATA_IMAGE_U8, blosc_stream_garbage, "blosc", false);
    blosc_fallback_case();
    /* garbage behind valid headers: nvCOMP decodes it (an error, never a crash) */
    p = pipe_new(MB, 1);
    pipe_add(&p, GDS_FILTER_LZ4, OPT, 1, CD64K);
    corrupt_case("lz4: garbage", &p, DATA_IMAGE_U8, garbage_keep_head, "lz4", false);
    p = pipe_new(256 * 1024, 4);
    pipe_add(&p, GDS_FILTER_DEFLATE, OPT, 1, CD6);
    corrupt_case("deflate: garbage after the header", &p, DATA_FLOAT_FIELD, garbage_keep_head, "deflate", false);
    p = pipe_new(512 * 1024, 4);
    pipe_add(&p, GDS_FILTER_ZSTD, OPT, 1, CD3);
    corrupt_case("zstd: garbage", &p, DATA_SPARSE_INT, garbage, "zstd", false);
}
