/*
 * nvCOMP's batched calls for the codec's stages: decompression (its
 * temporary memory sized and reserved, then the call), compression (the
 * options a filter's level maps to, the largest output and temporary
 * memory, the call), over the entry arrays of codec_batch.c.
 */
#include "codec_internal.h"

#include <string.h>

static const char *nvcomp_text(const gds_codec_t *c, gds_nvcomp_status_t s)
{
    const char *t = c->nv->GetStatusString ? c->nv->GetStatusString(s) : NULL;
    return t ? t : "error";
}

/* nvCOMP decompression of the entries em (ne entries), max_out bytes per
 * entry at most, total_out in all. */
int gds_codec_nvcomp_decompress(gds_codec_t *c, gds_step_kind_t kind, size_t ne, size_t max_out, size_t total_out,
                                size_t extra, entries_mem_t *em, CUdeviceptr *extra_at, CUstream s, gds_status_t *st,
                                bool run)
{
    const gds_nvcomp_api_t *nv = c->nv;
    gds_nvcomp_status_t r;
    size_t temp = 0;
    gds_nvcomp_deflate_dopts_t dd = {0};
    gds_nvcomp_lz4_dopts_t ld = {0};
    gds_nvcomp_zstd_dopts_t zd = {0};
    bool lz4 = step_lz4(kind), zstd = step_zstd(kind);
    /* no entries (bitshuffle chunks of fewer than 8 elements are all
     * leftover bytes): nothing for nvCOMP, which refuses an empty batch */
    if (ne == 0)
        return run ? 0 : gds_codec_entries_reserve(c, 0, 0, extra, s, em, extra_at, st);
    if (!run) {
        r = lz4    ? nv->lz4.DecompressGetTempSize(ne, max_out, ld, &temp, total_out, s)
            : zstd ? gds_zstd_decompress_temp(nv, ne, max_out, total_out, &temp, s)
                   : nv->deflate.DecompressGetTempSize(ne, max_out, dd, &temp, total_out, s);
        if (r != GDS_NVCOMP_SUCCESS) {
            gds_status_set(st, 0, "GPU codec: nvCOMP temp size for %zu chunks of %zu bytes: %s", ne, max_out,
                           nvcomp_text(c, r));
            return -1;
        }
        return gds_codec_entries_reserve(c, ne, temp, extra, s, em, extra_at, st);
    }
    const gds_kentries_t *e = &em->e;
    const void *const *in_ptrs = (const void *const *)(uintptr_t)e->in_ptrs;
    const size_t *in_bytes = (const size_t *)(uintptr_t)e->in_bytes;
    const size_t *out_cap = (const size_t *)(uintptr_t)e->out_cap;
    size_t *out_actual = (size_t *)(uintptr_t)e->out_actual;
    void *const *out_ptrs = (void *const *)(uintptr_t)e->out_ptrs;
    gds_nvcomp_status_t *status = (gds_nvcomp_status_t *)(uintptr_t)e->status;
    void *temp_ptr = (void *)(uintptr_t)em->temp;
    r = lz4 ? nv->lz4.DecompressAsync(in_ptrs, in_bytes, out_cap, out_actual, ne, temp_ptr, em->temp_bytes, out_ptrs,
                                      ld, status, s)
        : zstd ? nv->zstd.DecompressAsync(in_ptrs, in_bytes, out_cap, out_actual, ne, temp_ptr, em->temp_bytes,
                                          out_ptrs, zd, status, s)
               : nv->deflate.DecompressAsync(in_ptrs, in_bytes, out_cap, out_actual, ne, temp_ptr, em->temp_bytes,
                                             out_ptrs, dd, status, s);
    if (r != GDS_NVCOMP_SUCCESS) {
        gds_status_set(st, 0, "GPU codec: nvCOMP batched decompression of %zu chunks failed to start: %s", ne,
                       nvcomp_text(c, r));
        return -1;
    }
    return 0;
}

static void compress_opts(const gds_codec_step_t *s, gds_nvcomp_deflate_copts_t *dc, gds_nvcomp_lz4_copts_t *lc,
                          gds_nvcomp_zstd_copts_t *zc)
{
    memset(dc, 0, sizeof *dc);
    memset(lc, 0, sizeof *lc);
    memset(zc, 0, sizeof *zc);
    /* zlib levels 1-3: nvCOMP's fast mode; 4-9: its medium one (its
     * slower modes cost much more time for a few percent) */
    dc->algorithm = s->level <= 3 ? 1 : 2;
    lc->data_type = GDS_NVCOMP_TYPE_CHAR;
    lc->bitshuffle_mode = GDS_NVCOMP_BITSHUFFLE_NONE;
}

/* The compressor of an encoding step: blosc's encoder writes zstd streams
 * for zstd (gds_step_compresses_zstd), LZ4 streams for lz4 and lz4hc alike. */
static bool compresses_lz4(const gds_codec_step_t *s)
{
    return step_lz4(s->kind) || (s->kind == GDS_STEP_BLOSC && !gds_step_compresses_zstd(s));
}

/* nvCOMP's largest output for an input block, and its temp memory for
 * `ne` blocks of `max_in` (total_in in all). */
int gds_codec_compress_sizes(gds_codec_t *c, const gds_codec_step_t *s, size_t ne, size_t max_in, size_t total_in,
                             CUstream stream, size_t *max_out, size_t *temp, gds_status_t *st)
{
    gds_nvcomp_deflate_copts_t dc;
    gds_nvcomp_lz4_copts_t lc;
    gds_nvcomp_zstd_copts_t zc;
    compress_opts(s, &dc, &lc, &zc);
    if (ne == 0 || max_in == 0) { /* nothing to compress (bitshuffle's chunks under 8 elements) */
        *max_out = 0;
        if (temp)
            *temp = 0;
        return 0;
    }
    const gds_nvcomp_api_t *nv = c->nv;
    gds_nvcomp_status_t r;
    if (compresses_lz4(s))
        r = nv->lz4.CompressGetMaxOutputChunkSize(max_in, lc, max_out);
    else if (gds_step_compresses_zstd(s))
        r = nv->zstd.CompressGetMaxOutputChunkSize(max_in, zc, max_out);
    else
        r = nv->deflate.CompressGetMaxOutputChunkSize(max_in, dc, max_out);
    if (r == GDS_NVCOMP_SUCCESS && temp) {
        if (compresses_lz4(s))
            r = nv->lz4.CompressGetTempSize(ne, max_in, lc, temp, total_in, stream);
        else if (gds_step_compresses_zstd(s))
            r = nv->zstd.CompressGetTempSize(ne, max_in, zc, temp, total_in, stream);
        else
            r = nv->deflate.CompressGetTempSize(ne, max_in, dc, temp, total_in, stream);
    }
    if (r != GDS_NVCOMP_SUCCESS) {
        gds_status_set(st, 0, "GPU codec: nvCOMP sizes for compressing blocks of %zu bytes: %s", max_in,
                       nvcomp_text(c, r));
        return -1;
    }
    *max_out = align_up(*max_out, SLOT_ALIGN);
    return 0;
}

int gds_codec_nvcomp_compress(gds_codec_t *c, const gds_codec_step_t *s, size_t ne, size_t max_in,
                              entries_mem_t *em, CUstream stream, gds_status_t *st)
{
    if (ne == 0) /* nothing to compress (bitshuffle's chunks under 8 elements); nvCOMP refuses empty batches */
        return 0;
    gds_nvcomp_deflate_copts_t dc;
    gds_nvcomp_lz4_copts_t lc;
    gds_nvcomp_zstd_copts_t zc;
    compress_opts(s, &dc, &lc, &zc);
    const gds_kentries_t *e = &em->e;
    const void *const *in_ptrs = (const void *const *)(uintptr_t)e->in_ptrs;
    const size_t *in_bytes = (const size_t *)(uintptr_t)e->in_bytes;
    size_t *out_actual = (size_t *)(uintptr_t)e->out_actual;
    void *const *out_ptrs = (void *const *)(uintptr_t)e->out_ptrs;
    gds_nvcomp_status_t *status = (gds_nvcomp_status_t *)(uintptr_t)e->status;
    void *temp = (void *)(uintptr_t)em->temp;
    const gds_nvcomp_api_t *nv = c->nv;
    gds_nvcomp_status_t r =
        compresses_lz4(s)    ? nv->lz4.CompressAsync(in_ptrs, in_bytes, max_in, ne, temp, em->temp_bytes, out_ptrs,
                                                     out_actual, lc, status, stream)
        : gds_step_compresses_zstd(s) ? nv->zstd.CompressAsync(in_ptrs, in_bytes, max_in, ne, temp, em->temp_bytes, out_ptrs,
                                                      out_actual, zc, status, stream)
                             : nv->deflate.CompressAsync(in_ptrs, in_bytes, max_in, ne, temp, em->temp_bytes,
                                                         out_ptrs, out_actual, dc, status, stream);
    if (r != GDS_NVCOMP_SUCCESS) {
        gds_status_set(st, 0, "GPU codec: nvCOMP batched compression of %zu blocks of %zu bytes failed to start: %s",
                       ne, max_in, nvcomp_text(c, r));
        return -1;
    }
    return 0;
}
