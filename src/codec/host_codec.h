/*
 * The CPU decode of whole chunks, for the pipelines the system's own
 * libraries decode as HDF5's filters do: deflate (zlib), zstd (libzstd,
 * hdf5plugin's 32015), shuffle and fletcher32 (checked as HDF5 checks it).
 * Host memory in, host memory out; no HDF5, no CUDA. zlib and libzstd are
 * loaded at run time (dlopen): without one, its pipelines are not
 * host-decodable and the GPU decodes them.
 *
 * Why on the CPU at all: nvCOMP decodes a batch of whole chunks in about
 * one chunk's serial time (1 MiB chunks: 25-65 ms, whatever the batch's
 * width), while a CPU thread inflates such a chunk in 2-6 ms. A read's last
 * chunks, decoded by CPU threads while the GPU decodes the batch before
 * them, shorten the read's tail; a read of a few chunks is faster on the
 * CPU altogether (src/vfd/gds_filtered_read.c decides).
 */
#ifndef H5GDS_HOST_CODEC_H
#define H5GDS_HOST_CODEC_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu_codec.h"

/* The compressor of p's pipeline the host decodes (GDS_FILTER_DEFLATE or
 * GDS_FILTER_ZSTD), 0 when it holds none; -1 when a filter of p cannot be
 * decoded on the host (or its library is missing): `why` says which. */
int gds_codec_host_compressor(const gds_codec_pipeline_t *p, char *why, size_t why_size);

/* Bytes of host scratch one gds_codec_host_decode call needs. */
size_t gds_codec_host_work_bytes(const gds_codec_pipeline_t *p);

/* Decodes one chunk: src (src_bytes, as stored, filter mask `mask`) into
 * dst (p->chunk_bytes), with `work` (gds_codec_host_work_bytes) as scratch.
 * -1 with st (err EBADMSG: corrupt data, naming the filter as the GPU's
 * errors do; EOPNOTSUPP: a filter the host cannot decode). Thread-safe. */
int gds_codec_host_decode(const gds_codec_pipeline_t *p, unsigned mask, const void *src, size_t src_bytes, void *dst,
                          void *work, gds_status_t *st);

/* HDF5's Fletcher-32 (H5_checksum_fletcher32) of n bytes; for tests. */
unsigned gds_codec_host_fletcher32(const void *data, size_t n);

#endif
