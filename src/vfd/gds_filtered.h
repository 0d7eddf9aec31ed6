/* Filtered chunked datasets read into device memory with the decode on the
 * GPU, and written from it with the encode on the GPU (gds_filtered.c and
 * the files gds_filtered_internal.h lists). */
#ifndef H5GDS_FILTERED_H
#define H5GDS_FILTERED_H

#include <stdbool.h>
#include <stddef.h>

#include "gds_hdf5.h"

/* 1: read, decoded on the GPU (the chunks it refused that HDF5 is the
 * judge of, read by HDF5's filters one by one: a Deflate or Fletcher-32
 * finding, a Blosc chunk of a compressor nvCOMP lacks); 0: not taken
 * (another route must read it: a selection or pipeline the GPU path does
 * not serve, no nvCOMP, the device's memory full); -1: failed, on the
 * error stack (naming the dataset, chunk and filter, and HDF5's own
 * error where its filters failed on a refused chunk as well). The
 * transfer list's H5Pset_edc_check(H5Z_DISABLE_EDC) skips Fletcher-32's
 * check, as in HDF5. */
int gds_filtered_read(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void *buf);

/* The same for writes of whole chunks, encoded on the GPU and stored with
 * direct chunk writes: 1 written, 0 not taken, -1 failed (error stack). */
int gds_filtered_write(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, const void *buf);

/* Begins the decode of `n` stored chunks of the chunked, filtered dataset
 * `dset` that are already in device memory (src[i], src_bytes[i] bytes,
 * HDF5's filter mask masks[i]) into device buffers of one whole decoded
 * chunk each (dst[i]), on `stream` (a CUstream, NULL: the legacy stream),
 * in the CUDA context of dst[0]. For callers that read the stored bytes
 * themselves (the Python loader, with chunk addresses it located once).
 * The set-up runs here, on the caller's thread; the codec's work (enqueued
 * on `stream`, with the host waits of its checks) on a thread of its own
 * that calls no HDF5 function, so that the caller's thread goes on while
 * the GPU decodes. With chunk_lo (the dataset coordinates of each chunk's
 * first element, chunk_rank per chunk: the dataset's rank), the chunks the
 * GPU refuses that HDF5 is the judge of (a Deflate or Fletcher-32 finding,
 * a Blosc chunk of a compressor nvCOMP lacks) are read by HDF5's filters,
 * each alone, into their dst at the end. 1: begun, *job to be ended once
 * with gds_filtered_decode_chunks_end, on the same thread, before anything
 * that depends on dst is enqueued on `stream` and before src, dst or the
 * stream are reused; 0: not taken, nothing begun (a filter the GPU cannot
 * decode, no nvCOMP, a stopped codec); -1: failed, on the error stack. */
typedef struct gds_decode_job gds_decode_job_t;
int gds_filtered_decode_chunks_begin(hid_t dset, size_t n, const void *const *src, const size_t *src_bytes,
                                     const unsigned *masks, void *const *dst, const hsize_t *chunk_lo, int chunk_rank,
                                     void *stream, gds_decode_job_t **job);
/* Waits for the job's GPU work and does the rest (the refused chunks, the
 * error stack); frees the job. 1: decoded (the refused chunks HDF5 judges
 * read by its filters, *hdf5_chunks (if given) counting them); 0: not
 * taken, nothing usable written (not even one chunk at a time fitted the
 * device's memory, the codec stopped; and without chunk_lo a chunk the GPU
 * refused: HDF5's filters must read them all); -1: failed, with the
 * dataset, the chunk and the filter on the error stack (and HDF5's own
 * error where its filters failed on a refused chunk as well). */
int gds_filtered_decode_chunks_end(gds_decode_job_t *job, size_t *hdf5_chunks);
/* Waits for the job's GPU work only, calling no HDF5 function (a caller
 * that serialises its HDF5 calls with a lock waits here without it); on the
 * thread that ends the job, before its end, once or more. */
void gds_filtered_decode_chunks_wait(gds_decode_job_t *job);

/* Gives the device memory that the GPU reads and writes keep for the next
 * one back to the driver (called when the last file open with the driver
 * closes). */
void gds_filtered_release_device_memory(void);

/* How a read finds the file extents of its box's chunks. */
typedef enum gds_chunk_locate {
    GDS_LOCATE_AUTO,     /* as a GPU read chooses */
    GDS_LOCATE_BY_COORD, /* one H5Dget_chunk_info_by_coord per chunk */
    GDS_LOCATE_WALK      /* one H5Dchunk_iter over the chunk index (HDF5 >= 1.14) */
} gds_chunk_locate_t;

/* One chunk of a box, as located. */
typedef struct gds_chunk_location {
    hsize_t lo[H5S_MAX_RANK]; /* dataset coordinates of its first element */
    haddr_t addr;             /* HADDR_UNDEF: never written */
    hsize_t stored;           /* bytes stored in the file (0 if never written) */
    unsigned mask;            /* filters skipped when it was written */
} gds_chunk_location_t;

/* The chunks that the box [lo, lo + n) of the chunked dataset `dset`
 * touches, row-major over the chunk grid, located as a GPU read locates
 * them (no CUDA needed): the first `cap` go to `out`, `*used` (if given)
 * says which method ran. Returns the number of chunks of the box, or -1
 * with the error stack set. Exported for tests/test_chunk_locate.c only;
 * not part of the public API. */
__attribute__((visibility("default"))) long long gds_filtered_locate_chunks(hid_t dset, const hsize_t *lo,
                                                                            const hsize_t *n,
                                                                            gds_chunk_locate_t method,
                                                                            gds_chunk_location_t *out, size_t cap,
                                                                            gds_chunk_locate_t *used);

/* The batches a GPU read (writing false) or write of `nchunks` chunks of
 * `chunk_bytes` decoded bytes is cut into, the codec asking for
 * `codec_chunks` per batch (0: none): their ends, the first `cap` in
 * `ends`.
 * Returns the number of batches, or -1 if one would be empty or run past
 * the end. Exported for tests/test_filtered_batches.c only. */
__attribute__((visibility("default"))) long long gds_filtered_batches(size_t nchunks, size_t chunk_bytes, bool writing,
                                                                      size_t codec_chunks, size_t *ends, size_t cap);
/* The same for a read cut anew from chunk `recut_from` (a batch's end) with
 * a last batch of `tail_chunks` (gds_filtered_read_tail; 0: none). */
__attribute__((visibility("default"))) long long gds_filtered_read_batches_tail(size_t nchunks, size_t chunk_bytes,
                                                                                size_t codec_chunks,
                                                                                size_t recut_from,
                                                                                size_t tail_chunks, size_t *ends,
                                                                                size_t cap);

#endif
