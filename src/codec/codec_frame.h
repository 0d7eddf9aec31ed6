/*
 * Checks of compressed framing shared by the host (unit tests, on host
 * bytes) and the kernels (codec_kernels.cu, through NVRTC): the same code
 * on both sides. Plain C that CUDA C++ also compiles.
 */
#ifndef H5GDS_CODEC_FRAME_H
#define H5GDS_CODEC_FRAME_H

#include "codec_shared.h"

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

#endif
