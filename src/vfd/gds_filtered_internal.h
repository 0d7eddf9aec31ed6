/*
 * What the files of the GPU read/write of filtered datasets share (private
 * to src/vfd): the state of one read or write, the deferred first error,
 * and the functions each file gives the others. The files, each calling
 * only those listed before it:
 *   gds_filtered_common.c   the per-process codec cache, the deferred first
 *                           error, small helpers (batch size, clock, a
 *                           chunk's coordinates as text)
 *   gds_filtered_buffers.c  device memory: the state's buffers, the fill
 *                           value, strided copies between a chunk and the box
 *   gds_filtered_locate.c   the box's chunks and their file extents (list,
 *                           by coordinates, by index walk, the user-block
 *                           base; gds_filtered_locate_chunks for tests)
 *   gds_filtered_refused.c  chunks the GPU refused, read by HDF5's filters
 *                           one at a time (reads and the loader's decodes)
 *   gds_filtered_given.c    stored chunks the caller read itself (the
 *                           loader's), decoded now or in the background
 *   gds_filtered_read.c     the read: batches, read-ahead, decode, placing
 *   gds_filtered_write.c    the write: encode batches, direct chunk writes
 *   gds_filtered.c          eligibility and set-up (filtered_io), the public
 *                           entry points (gds_filtered.h)
 * What is declared here is hidden (not exported by the library), whatever
 * the build's default visibility.
 */
#ifndef H5GDS_FILTERED_INTERNAL_H
#define H5GDS_FILTERED_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "H5FDgds.h"
#include "gds_filtered.h"
#include "gds_hdf5.h"
#include "../codec/gpu_codec.h"
#include "../cuda/cuda_loader.h"
#include "../engine/engine.h"

#pragma GCC visibility push(hidden)

/* Batches whose stored bytes are being read while one decodes. One: the
 * next batch comes off the disk at its full rate (two in flight share it,
 * and the one the GPU waits for comes later); cold reads of deflate and
 * zstd, where disk and decode are about as fast, were 7-19% faster with
 * one than with two (interleaved, on an H200 and an H100). H5GDS_DECODE_READ_AHEAD (1 to
 * STORED_BUFFERS - 1) tunes it (gds_filtered_read_ahead). */
#define READ_AHEAD 1

/* Device buffers of stored bytes: a read's batch decoding and READ_AHEAD
 * being read; a write's GDS_HELD_SLOTS batches being written and its
 * encode area (gds_filtered_write.c). */
#define STORED_BUFFERS 4
_Static_assert(STORED_BUFFERS >= READ_AHEAD + 1, "a read's batches need their stored-bytes buffers");

typedef struct box {
    int rank;
    hsize_t lo[H5S_MAX_RANK], n[H5S_MAX_RANK];
} box_t;

/* Everything the read needs to know about one chunk of the box. */
typedef struct chunk {
    hsize_t lo[H5S_MAX_RANK]; /* dataset coordinates of its first element */
    haddr_t addr;             /* HADDR_UNDEF: never written (fill value) */
    hsize_t stored;
    unsigned mask;
    void *dst;                /* where it decodes: the user's buffer, or scratch */
    bool in_place;
} chunk_t;

typedef struct read_state {
    const gds_cuda_api_t *cu;
    hid_t dset, fid;
    hid_t dxpl;      /* the caller's: HDF5's filters read a chunk the GPU refused with it */
    char name[256];
    box_t box;
    hsize_t dims[H5S_MAX_RANK], cdims[H5S_MAX_RANK];
    gds_codec_pipeline_t pipe;
    gds_codec_t *codec;
    CUmemoryPool pool; /* the buffers' pool (gds_filtered_pool_for); NULL: cuMemAlloc */
    CUstream stream;
    chunk_t *chunks;
    size_t nchunks;
    void *out;
    CUdeviceptr stored[STORED_BUFFERS], scratch, fill; /* stored bytes (STORED_BUFFERS says whose) */
    size_t stored_cap[STORED_BUFFERS], scratch_cap;
    H5FD_gds_decode_stats_t stats;
    H5FD_gds_encode_stats_t wstats;
    bool cpu_decode; /* a chunk the GPU cannot decode, whose data is fine: HDF5's filters read it all */
    bool abandoned;  /* the codec's work never finished: the buffers it uses are never freed */
    bool out_of_memory; /* the device's memory could not hold the batches: a read (a write that
                           stored nothing yet) takes HDF5's filters and the host instead */
    double memory_s; /* spent allocating and freeing the buffers (H5GDS_CODEC_DEBUG's trace) */
    size_t largest_stored; /* reads: the stored bytes of the largest batch */
    size_t read_batch_chunks; /* reads: chunks per batch the codec asks for (0: by decoded bytes) */
    size_t recut_from, tail_from; /* reads: chunks [recut_from, tail_from) cut anew, [tail_from, nchunks)
                                     the last batch (tail_from 0: none; gds_filtered_read_tail) */
    size_t write_batch_chunks; /* writes: chunks per batch the codec asks for (0: by decoded bytes) */
} read_state_t;

/* ---- gds_filtered_common.c ---- */

/* The first failure of a read, pushed on the error stack only at the end:
 * every HDF5 call made while cleaning up (closing the ids) clears the stack. */
typedef struct gds_filtered_pending {
    bool set;
    hid_t major, minor;
    const char *func;
    int line;
    char msg[1280]; /* a refused chunk's message: the dataset, the chunk, the GPU's finding and HDF5's */
} gds_filtered_pending_t;
extern _Thread_local gds_filtered_pending_t gds_filtered_pending;

#define FILTERED_ERROR(maj, mino, ...) gds_filtered_error(__func__, __LINE__, (maj), (mino), __VA_ARGS__)

void gds_filtered_error(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The pipeline as stored in the dataset's creation list (its filters and
 * their values, the type and chunk sizes); false where HDF5 cannot say or
 * it has more filters than the codec takes. */
bool gds_filtered_describe_pipeline(hid_t dcpl, size_t type_size, const hsize_t *cdims, int rank,
                                    gds_codec_pipeline_t *p);
size_t gds_filtered_batch_decoded_bytes(bool writing);
/* The end of the batch of a read (write) that starts at chunk `from`. */
size_t gds_filtered_read_batch_end(const read_state_t *s, size_t from);
/* After a read's first batch came from the disk (its stored bytes in
 * `seconds` from its submission, nothing else in flight; not `cached`):
 * the chunks from `next` on, the largest of them max_stored, cut anew with
 * a last batch that ends the read sooner (gds_codec_read_tail_chunks);
 * true where it chose one. */
bool gds_filtered_read_tail(read_state_t *s, size_t next, size_t stored_bytes, size_t nstored, size_t max_stored,
                            double seconds, bool cached);
/* The most chunks of chunk_bytes a read batch may hold (the decoded bytes'
 * limit), at least 1. */
size_t gds_filtered_read_batch_cap(size_t chunk_bytes);
size_t gds_filtered_write_batch_end(const read_state_t *s, size_t from);
/* The most chunks of chunk_bytes a write batch the codec chooses may hold
 * (WRITE_ONE_STREAM_DECODED_BYTES), at least 1. */
size_t gds_filtered_write_batch_cap(size_t chunk_bytes);
int gds_filtered_read_ahead(void);
double gds_filtered_seconds_now(void);
/* H5GDS_CODEC_DEBUG set: GPU writes print each batch's timeline to stderr. */
/* Whether a chunk the GPU refused (gds_codec_decode's error `err`) is for
 * HDF5's own filters to judge: a corrupt stream (EBADMSG) found by Deflate
 * or Fletcher-32, which HDF5 implements and checks itself (zlib's status
 * and Adler-32; its checksum, in either byte order). Not a chunk of the
 * wrong size (ERANGE): HDF5 checks no size after its filters, and its
 * Fletcher-32 reads outside a chunk of under 4 bytes. Not the plugins' ones:
 * hdf5plugin's Zstd filter, for one, takes a corrupt frame's error code for
 * its decoded size and passes on bytes it never wrote. */
bool gds_filtered_hdf5_judges(int err, unsigned filter);

gds_codec_t *gds_filtered_codec_for(CUcontext ctx, gds_status_t *st);
/* The pool of device memory of `ctx` (current), made on first use; NULL
 * where pools are not used. Its allocations and frees are ordered on the
 * read's or write's stream: a free does not wait for the whole device, as
 * cuMemFree does (36 ms behind a busy GPU, measured). */
CUmemoryPool gds_filtered_pool_for(CUcontext ctx, const gds_cuda_api_t *cu);
void gds_filtered_chunk_text(const box_t *b, const hsize_t *lo, char *out, size_t size);

/* ---- gds_filtered_buffers.c ---- */

CUresult gds_filtered_copy_box_part(const gds_cuda_api_t *cu, const box_t *b, const hsize_t *cdims,
                                    const hsize_t *clo, void *chunk_buf, void *box_buf, size_t esize, bool to_chunk,
                                    CUstream stream);
void gds_filtered_free_state(read_state_t *s);
herr_t gds_filtered_make_fill(read_state_t *s, hid_t dcpl, hid_t type);
/* *p holds at least `need` bytes; when it must grow, it takes at least
 * `largest` (the most any later batch needs: one allocation, not one per
 * growth; each cuMemFree waits for the whole device). */
herr_t gds_filtered_ensure(read_state_t *s, CUdeviceptr *p, size_t *cap, size_t need, size_t largest,
                           const char *what);

/* ---- gds_filtered_locate.c ---- */

herr_t gds_filtered_list_chunks(read_state_t *s);
herr_t gds_filtered_locate(read_state_t *s, gds_chunk_locate_t method, gds_chunk_locate_t *used);

/* ---- gds_filtered_refused.c ---- */

/* What reading a decode's refused chunks through HDF5 needs. */
typedef struct gds_refused {
    const gds_cuda_api_t *cu;
    gds_codec_t *codec;
    const gds_codec_pipeline_t *pipe;
    hid_t dset, dxpl;
    const char *name;
    int rank;
    const hsize_t *dims, *cdims;
    CUstream stream;
} gds_refused_t;

/* After a gds_codec_decode_findings of `batch` (n chunks, chunk k's first
 * element at lo[k]) that found chunks bad (found, nfound; others_decoded
 * as it said): the chunks HDF5 is the judge of (gds_filtered_hdf5_judges)
 * or that the GPU cannot decode although their data is fine (EOPNOTSUPP)
 * are read by HDF5's filters, each alone, into their dst (after the
 * others were decoded again without them where a decompressor met
 * garbage); *hdf5_chunks counts them. 0: every chunk of the batch is in
 * its dst (the copies queued on r->stream); -1: failed, FILTERED_ERROR set
 * (another finding, naming the chunk; HDF5 failing too, naming both; the
 * codec failing on the others, its errno in *codec_err). */
herr_t gds_filtered_refused(const gds_refused_t *r, const gds_codec_chunk_t *batch, const hsize_t *const *lo,
                            size_t n, gds_codec_finding_t *found, size_t nfound, bool others_decoded,
                            uint64_t *hdf5_chunks, int *codec_err);

/* ---- gds_filtered_read.c, gds_filtered_write.c ---- */

herr_t gds_filtered_read_all(read_state_t *s);
herr_t gds_filtered_write_all(read_state_t *s);

#pragma GCC visibility pop

#endif
