/*
 * What the GPU codec's files share (private to src/codec): the codec
 * object's struct, the kernels' ids, a sub-batch's layout in memory, the
 * stages' locations, the decode context, and the functions each file gives
 * the others. The files, each calling only those listed before it:
 *   gpu_codec.c     the codec object: open/close, the NVRTC-compiled kernels
 *                   (cached) and their launch, growing device/pinned buffers
 *   codec_batch.c   a sub-batch's memory, job arrays, uploads, error list
 *   codec_nvcomp.c  nvCOMP's batched decompression and compression
 *   codec_blosc.c   Blosc-1's decode stage
 *   codec_decode.c  gds_codec_decode: groups, sub-batches, per-filter stages
 *   codec_encode.c  gds_codec_encode: plan, sub-batches, per-filter stages
 * (codec_plan.c, the host-only logic, calls none of them; codec_settings.c,
 * the environment variables read while decoding, is called by all;
 * codec_kernel_cache.c, the compiled kernels kept on disk, by gpu_codec.c.)
 */
#ifndef H5GDS_CODEC_INTERNAL_H
#define H5GDS_CODEC_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec_plan.h"
#include "codec_shared.h"
#include "gpu_codec.h"
#include "nvcomp_api.h"

/* The settings of gds_codec_settings_t (codec_settings.c names them). */
enum codec_setting {
    GDS_SET_CODEC_DEBUG,
    GDS_SET_TEST_REDECODE,
    GDS_SET_INFLATE_SEGMENT_KIB,
    GDS_SET_INFLATE_SPLIT,
    GDS_SET_ZSTD_BLOCKS,
    GDS_SET_COUNT
};
/* A setting's value: this thread's copy where it uses one
 * (gds_codec_settings_use), else the environment's; NULL where unset. */
const char *gds_codec_setting(int which);
/* Whether a flag setting is on: set, not empty and not "0". */
bool gds_codec_setting_on(int which);

/* The compiled kernels kept on disk between processes
 * (codec_kernel_cache.c). The key of a compilation: its sources, options
 * and NVRTC version, in order. The cache's file for it in buf, false where
 * there is none (H5GDS_KERNEL_CACHE=0, no directory). Load: the image
 * (malloc'd, NUL after its *size bytes), NULL where the file is absent,
 * another user's or writable by others, or does not hold this key, arch
 * and checksum. Store: 0, or -1 where it could not be written (no error:
 * the kernels are compiled again next time). */
uint64_t gds_codec_kernel_key(const char *const *parts, size_t nparts);
bool gds_codec_kernel_cache_path(uint64_t key, int arch, char *buf, size_t size);
char *gds_codec_kernel_cache_load(const char *path, uint64_t key, int arch, size_t *size, bool *ptx);
int gds_codec_kernel_cache_store(const char *path, uint64_t key, int arch, const char *image, size_t size, bool ptx);

/* The kernels of codec_kernels.cu (names: gpu_codec.c). */
enum kernel_id {
    K_GATHER_HEAD,
    K_COPY,
    K_FLETCHER_SUM,
    K_FLETCHER_CHECK,
    K_FLETCHER_PUT,
    K_ADLER_SUM,
    K_ADLER_CHECK,
    K_ZLIB_PREP,
    K_ZSTD_PREP,
    K_NVCOMP_CHECK,
    K_ENTRY_COPY,
    K_LZ4H5_WALK,
    K_BSHUF_WALK,
    K_BITUNSHUFFLE,
    K_BITSHUFFLE,
    K_UNSHUFFLE,
    K_SHUFFLE,
    K_BLOCKS_PLAN,
    K_ZLIB_ASSEMBLE,
    K_ZSTD_SPLICE,
    K_ZSTD_ASSEMBLE,
    K_LZ4H5_LAYOUT,
    K_BSHUF_LAYOUT,
    K_BLOSC_WALK,
    K_BLOSC_FINISH,
    K_BLOSC_SHUFFLE,
    K_BLOSC_LAYOUT,
    K_DEFLATE_JOIN,
    K_INFLATE_FIND,
    K_INFLATE_SEGMENTS,
    K_INFLATE_MEND,
    K_INFLATE_RESOLVE,
    K_ZSTD_PLAN,
    K_ZSTD_DECODE,
    K_ZSTD_LINK,
    K_ZSTD_EXECUTE,
    K_ZSTD_RESOLVE,
    K_COUNT
};

#define THREADS 256u
#define MAX_BATCH 16384u   /* chunks per sub-batch (the grid's y dimension) */
#define NARENAS 4
#define SLOT_ALIGN 256u
/* Device memory a sub-batch's temporaries may take (H5GDS_CODEC_TEMP_MIB):
 * 2 GiB lets zstd decode 256 chunks of 1 MiB at once (nvCOMP's scratch is
 * 6x the decoded bytes, GDS_ZSTD_SCRATCH_FACTOR), 1 GiB only 128: warm zstd
 * reads 6.7-7.4 GB/s against 4.6-5.1 on an H100 (results
 * 2026-11-26-h100-zstd-writes, zstd-budget-*). The other codecs stay well
 * under 1 GiB. */
#define DEFAULT_TEMP_BUDGET ((size_t)2 << 30)
/* Without H5GDS_CODEC_TEMP_MIB, a sub-batch may take a quarter of the
 * device's free memory (what the codec holds counted as free), between
 * DEFAULT_TEMP_BUDGET and MAX_TEMP_BUDGET: nvCOMP's Deflate compressor
 * takes about 12 MB of scratch per 1 MiB chunk, and a batch of 384 such
 * chunks compresses in 323 ms where 128 take 251 (H100). */
#define MAX_TEMP_BUDGET ((size_t)16 << 30)
/* Chunks of fewer compressed streams than this (Deflate, zstd, LZ4 in one
 * block) are decoded and encoded by nvCOMP a stream per chunk, serially,
 * the chunks side by side: a sub-batch takes about one chunk's time however
 * wide (gds_codec_read_batch_chunks, gds_codec_write_batch_chunks). */
#define GDS_CODEC_MANY_STREAMS 8

enum { LOC_SRC = -1, LOC_DST = -2 };

/* Device memory that grows (freed and allocated again, bigger, once the
 * stream is idle). */
typedef struct dbuf {
    CUdeviceptr ptr;
    size_t size;
} dbuf_t;

/* The two Deflate decoders (0: nvCOMP, 1: segments) as timed on this
 * GPU's batches: measured / modelled time (0: not measured yet), and the
 * batches since each was last taken. gds_codec_inflate_choose picks one
 * for a batch of n chunks (trying the other now and then),
 * gds_codec_inflate_learn takes a batch's time (us) in. */
typedef struct gds_inflate_fit {
    double scale[2];
    unsigned since[2];
} gds_inflate_fit_t;

struct gds_codec {
    pthread_mutex_t lock;
    CUcontext ctx;
    const gds_cuda_api_t *cu;
    const gds_nvcomp_api_t *nv;
    CUmodule module;
    CUfunction fn[K_COUNT];
    int sm_major, sm_minor;
    gds_nvcomp_alignments_t deflate_dalign, lz4_dalign, zstd_dalign;
    gds_nvcomp_alignments_t deflate_calign, lz4_calign, zstd_calign;
    dbuf_t work;   /* jobs, error arrays, arenas */
    dbuf_t blocks; /* nvCOMP's entry arrays and temporary memory */
    CUdeviceptr dummies; /* tiny valid streams (see codec_kernels.cu's set_dummy) and their scratch output */
    void *pinned;        /* host staging of uploads and results */
    size_t pinned_size;
    size_t budget;       /* the least a sub-batch may take, or H5GDS_CODEC_TEMP_MIB's fixed amount (gds_codec_budget) */
    bool budget_set;     /* by H5GDS_CODEC_TEMP_MIB: fixed */
    size_t held;         /* work.size + blocks.size, read without the lock (atomic) */
    size_t cap;          /* after a device allocation failed: the most a sub-batch may take until
                            gds_codec_trim (0: no cap; atomic) */
    unsigned long narrowed; /* sub-batches run again narrower after an allocation failed (atomic) */
    CUstream own;        /* the codec's work runs here, after the caller's (gds_codec_follow) */
    CUevent entry;       /* recorded on the caller's stream at each call */
    double timeout_s;    /* a sub-batch's work may take this long (H5GDS_CODEC_TIMEOUT_S) */
    bool stuck;          /* work that never finished is still on the GPU: no more calls, nothing freed */
    gds_inflate_fit_t inflate; /* Deflate's two decoders timed here (under the lock) */
    CUevent inflate_t0, inflate_t1; /* around a sub-batch's Deflate decode (timing; made at open) */
    char describe[640];
};

/* The dummies' layout: deflate (stored block of 1 byte), zstd (frame of 1
 * raw byte), LZ4 (block of 1 literal), scratch. Uploaded at open
 * (gpu_codec.c). */
enum { DUMMY_DEFLATE = 0, DUMMY_ZSTD = 16, DUMMY_LZ4 = 32, DUMMY_SCRATCH = 64, DUMMY_BYTES = 128 };
enum { DUMMY_DEFLATE_LEN = 6, DUMMY_ZSTD_LEN = 10, DUMMY_LZ4_LEN = 2 };
extern const unsigned char gds_codec_dummy_deflate[DUMMY_DEFLATE_LEN];
extern const unsigned char gds_codec_dummy_zstd[DUMMY_ZSTD_LEN];
extern const unsigned char gds_codec_dummy_lz4[DUMMY_LZ4_LEN];

/* A stage of a sub-batch: where its input, output and scratch lie
 * (LOC_SRC, LOC_DST or an arena). */
typedef struct stage {
    const gds_codec_step_t *step; /* NULL: the final copy */
    int in, out, mid, mid2;       /* locations */
} stage_t;

/* The lowest failing chunk of a call and its error; with `code_of`, every
 * failing chunk's (decodes that report them all: gds_codec_decode_findings). */
typedef struct error_list {
    size_t first; /* lowest failing chunk index, or SIZE_MAX */
    unsigned code;
    uint64_t detail;
    unsigned *code_of;  /* NULL, or one per chunk of the call: 0 = none found (the first finding kept) */
    uint64_t *detail_of;
    bool garbage;       /* a decompressor met garbage (GDS_KERR_DECODE, _SIZE): other chunks may be undefined */
} error_list_t;

/* The layout of one sub-batch in the work buffer. */
typedef struct batch_mem {
    size_t m;             /* chunks */
    CUdeviceptr err, detail, acc, tail, heads, dsize, mask, jobs;
    CUdeviceptr arena[NARENAS];
    size_t slot[NARENAS]; /* bytes per chunk in each arena */
    size_t njobs_arrays;  /* job arrays (one per stage) */
    /* pinned staging */
    size_t pin_jobs, pin_heads, pin_err, pin_detail, pin_dsize, pin_mask;
} batch_mem_t;

/* nvCOMP's arrays for `ne` entries and `temp` bytes, in the blocks buffer. */
typedef struct entries_mem {
    gds_kentries_t e;
    CUdeviceptr temp;
    size_t temp_bytes;
} entries_mem_t;

/* One decode call's group of chunks (one filter mask) and its stages. */
typedef struct decode_ctx {
    gds_codec_t *c;
    const gds_codec_pipeline_t *p;
    const gds_codec_chunk_t *chunks;
    CUstream s;
    const gds_codec_step_t *steps; /* write order */
    size_t nsteps;
    stage_t stage[GDS_CODEC_MAX_FILTERS + 1];
    size_t nstages;
    size_t *forward; /* sizes before each step when writing (nsteps + 1) */
    size_t max_stored; /* the largest stored chunk planned for */
    bool split;        /* Deflate in segments (codec_inflate.c) or zstd block by block (codec_zstd_blocks.c),
                          decided for the group's sub-batch width */
    error_list_t *errors;
} decode_ctx_t;

static inline size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
/* `bytes` laid out at the next multiple of `align` from *off: where they begin (*off moves past them). */
static inline size_t gds_codec_carve(size_t *off, size_t bytes, size_t align)
{
    size_t at = align_up(*off, align);
    *off = at + bytes;
    return at;
}

/* Thread blocks along x for a job of `bytes` bytes (16 per thread, a few thousand blocks at most). */
static inline unsigned parts_for(size_t bytes)
{
    size_t parts = (bytes + THREADS * 16 - 1) / (THREADS * 16);
    return parts < 1 ? 1 : parts > 2048 ? 2048 : (unsigned)parts;
}

static inline unsigned blocks_for(size_t threads) { return (unsigned)((threads + THREADS - 1) / THREADS); }

static inline bool step_lz4(gds_step_kind_t k) { return k == GDS_STEP_LZ4 || k == GDS_STEP_BSHUF_LZ4; }
/* nvCOMP 6's zstd decoder asks for scratch of about 3x the decoded bytes
 * and overruns it on valid frames dense in sequences (about one per 3
 * bytes; or many small blocks, as zstd's level 19 writes for some data):
 * it prints "scratch buffer allocation exceeded" and the CUDA context is
 * lost. It is asked for the scratch of twice the decoded bytes, which
 * decoded every frame that overran it (16 KiB-1 MiB chunks; extra scratch
 * of a fixed 256 KiB per chunk did not, for 1 MiB chunks: results
 * 2026-11-26-h100-zstd-writes, zstd-scratch.txt). */
#define GDS_ZSTD_SCRATCH_FACTOR 2

/* nvCOMP's zstd decompression scratch for ne chunks of at most max_out
 * decoded bytes (total_out in all), asked as for GDS_ZSTD_SCRATCH_FACTOR
 * times those: the one place the factor is applied. */
static inline gds_nvcomp_status_t gds_zstd_decompress_temp(const gds_nvcomp_api_t *nv, size_t ne, size_t max_out,
                                                           size_t total_out, size_t *temp, CUstream s)
{
    gds_nvcomp_zstd_dopts_t zd = {0};
    return nv->zstd.DecompressGetTempSize(ne, max_out * GDS_ZSTD_SCRATCH_FACTOR, zd, temp,
                                          total_out * GDS_ZSTD_SCRATCH_FACTOR, s);
}

static inline bool step_zstd(gds_step_kind_t k) { return k == GDS_STEP_ZSTD || k == GDS_STEP_BSHUF_ZSTD; }

/* The error code of a step (its position; GDS_KERR_* added). */
static inline unsigned step_code(const gds_codec_step_t *s) { return (s->pos + 1) << 8; }

/* ---- gpu_codec.c: the codec object ---- */

/* Sets st to "GPU codec: <what> failed: <CUDA's error>"; -1. */
int gds_codec_cuda_fail(gds_status_t *st, const char *what, CUresult rc);
/* The stream a call's work goes to: the codec's own, once the caller's
 * stream has done what it held (waited for without a time limit: the
 * caller's work, not the codec's). A decoder that never ends then holds
 * only the codec's stream, and H5GDS_CODEC_TIMEOUT_S counts the codec's
 * work alone. */
int gds_codec_follow(gds_codec_t *c, CUstream caller, CUstream *own, gds_status_t *st);
/* Takes the codec's lock for a call: true, or false (lock not held, st set:
 * ECANCELED) when an earlier call's work never finished and it stopped. */
bool gds_codec_lock_running(gds_codec_t *c, gds_status_t *st);
/* Grows b (device memory) to `need` bytes at least, once the stream is idle. */
int gds_codec_dbuf_reserve(gds_codec_t *c, dbuf_t *b, size_t need, CUstream s, gds_status_t *st);
/* The device memory one sub-batch may take now (DEFAULT_TEMP_BUDGET,
 * MAX_TEMP_BUDGET, H5GDS_CODEC_TEMP_MIB; lower after an allocation failed). */
size_t gds_codec_budget(gds_codec_t *c);
/* After a sub-batch of m chunks failed: true where it failed for want of
 * memory (st->err ENOMEM) and can run again narrower. The codec's buffers
 * are then given back (once its own stream is idle) and its budget halved
 * until gds_codec_trim; the caller runs the same chunks again, at most
 * m / 2 at a time. False (st untouched) otherwise. */
bool gds_codec_narrow_after_oom(gds_codec_t *c, size_t m, gds_status_t *st);
/* A sub-batch's temporary memory for m chunks beside their arenas, by the
 * caller's plan (a decode group's, an encode's). */
typedef size_t (*gds_codec_temp_fn)(gds_codec_t *c, const void *plan, size_t m);
/* Bytes of a chunk's arenas (slot: NARENAS sizes) and its records. */
size_t gds_codec_arena_bytes(const size_t *slot);
/* The most chunks, 1 to n (at most MAX_BATCH), whose arenas (per bytes
 * each) and temporary memory fit the codec's budget; *temp_out: that many's
 * temporary memory. */
size_t gds_codec_widest_sub_batch(gds_codec_t *c, size_t per, size_t n, gds_codec_temp_fn temp, const void *plan,
                                  size_t *temp_out);
/* Grows the pinned staging to `need` bytes at least, once the stream is idle. */
int gds_codec_pinned_reserve(gds_codec_t *c, size_t need, CUstream s, gds_status_t *st);
/* Launches kernel k on a grid of gx x gy blocks of THREADS (nothing when empty). */
int gds_codec_launch(gds_codec_t *c, int k, unsigned gx, unsigned gy, CUstream s, void **args, gds_status_t *st);
/* The same with `threads` threads a block (kernels that size their own shared memory). */
int gds_codec_launch_threads(gds_codec_t *c, int k, unsigned gx, unsigned gy, unsigned threads, CUstream s,
                             void **args, gds_status_t *st);
/* Kernel k's name (NULL past the last): the unit tests compile the kernels
 * with NVRTC and look for each. */
const char *gds_codec_kernel_name(int k);

/* ---- codec_batch.c: a sub-batch's memory and jobs ---- */

/* The first arena not in busy[0..nbusy). */
int gds_codec_free_arena(const int *busy, int nbusy);
/* Keeps the error of the lowest chunk index. */
void gds_codec_record_error(error_list_t *e, size_t chunk, unsigned code, uint64_t detail);
/* The layout of m chunks in the work buffer (offsets from its start, see
 * gds_codec_offset_batch): its bytes. */
size_t gds_codec_batch_bytes(const size_t *slot, size_t m, size_t njobs_arrays, batch_mem_t *bm);
/* The layout of bm's pinned staging: its bytes. */
size_t gds_codec_pinned_bytes(batch_mem_t *bm);
/* bm's offsets made addresses in the work buffer at base. */
void gds_codec_offset_batch(batch_mem_t *bm, CUdeviceptr base);
/* nvCOMP's arrays for `ne` entries, `temp` bytes of its temporary memory
 * and `extra` bytes (at *extra_at, when not NULL) in the blocks buffer. */
int gds_codec_entries_reserve(gds_codec_t *c, size_t ne, size_t temp, size_t extra, CUstream s, entries_mem_t *em,
                              CUdeviceptr *extra_at, gds_status_t *st);
/* Where chunk j's data is at location loc. */
CUdeviceptr gds_codec_loc_ptr(const batch_mem_t *bm, int loc, const gds_codec_chunk_t *ch, size_t j);
/* Uploads `n` jobs (built in pinned memory at job array `a`) and returns their device address. */
int gds_codec_upload_jobs(gds_codec_t *c, const batch_mem_t *bm, size_t a, size_t n, CUstream s, CUdeviceptr *dev,
                          gds_status_t *st);
/* Job array `a` in pinned memory. */
gds_kjob_t *gds_codec_pinned_jobs(gds_codec_t *c, const batch_mem_t *bm, size_t a);
int gds_codec_memset_async(gds_codec_t *c, CUdeviceptr p, size_t bytes, CUstream s, gds_status_t *st);
/* The traces' timing (H5GDS_CODEC_DEBUG): waits for the stream, *when the
 * time it ended; and a count the kernels kept, read back. */
int gds_codec_trace_wait(gds_codec_t *c, CUstream s, double *when, gds_status_t *st);
int gds_codec_read_count(gds_codec_t *c, CUdeviceptr p, uint32_t *count, gds_status_t *st);
/* Deflate in segments (codec_inflate.c): whether a batch is, the device
 * memory it takes for n chunks of `expect` decoded bytes, and its launch
 * on nj jobs (raw streams in their mid, codec_zlib_prep's) before nvCOMP's
 * decode of the same entries: chunks made up become dummies there. */
bool gds_codec_inflate_split_batch(size_t n, size_t max_stored, size_t expect); /* of n chunks, by the model */
/* gds_codec_inflate_choose and _learn take and update it. */
double gds_codec_inflate_model_us(bool split, size_t n, size_t max_stored, size_t expect);
bool gds_codec_inflate_choose(gds_inflate_fit_t *fit, size_t n, size_t max_stored, size_t expect);
void gds_codec_inflate_learn(gds_inflate_fit_t *fit, bool split, size_t n, size_t max_stored, size_t expect,
                             double us);
size_t gds_codec_inflate_split_bytes(size_t n, size_t expect);
size_t gds_codec_inflate_tail_chunks(size_t expect, size_t max_stored, double mean_stored, double bytes_per_s,
                                     size_t max_chunks); /* gds_codec_read_tail_chunks */
int gds_codec_inflate_split(gds_codec_t *c, CUdeviceptr jobs, size_t nj, size_t expect, CUdeviceptr mem,
                            const entries_mem_t *em, CUdeviceptr err, CUstream s, gds_status_t *st);
/* zstd block by block (codec_zstd_blocks.c): whether a batch of n chunks
 * of `expect` decoded bytes is, the device memory it takes, and the launch
 * on nj jobs (codec_zstd_prep's) before nvCOMP's decode of the same
 * entries: chunks made up become dummies there. */
bool gds_codec_zstd_blocks_batch(size_t n, size_t expect);
size_t gds_codec_zstd_blocks_reserve(size_t n, size_t expect); /* counted in a sub-batch of n, growing with n */
size_t gds_codec_zstd_blocks_bytes(size_t n, size_t expect);
int gds_codec_zstd_blocks(gds_codec_t *c, CUdeviceptr jobs, size_t nj, size_t expect, CUdeviceptr mem,
                          const entries_mem_t *em, CUdeviceptr err, CUstream s, gds_status_t *st);
int gds_codec_sync_stream(gds_codec_t *c, CUstream s, gds_status_t *st);
/* The first GDS_HEAD_BYTES bytes of the nj jobs at dj, in pinned memory
 * (the stream synchronised). */
int gds_codec_read_heads(gds_codec_t *c, const batch_mem_t *bm, CUdeviceptr dj, size_t nj, CUstream s,
                         unsigned char **heads, gds_status_t *st);

/* ---- codec_nvcomp.c: nvCOMP's batched calls ---- */

/* Decompression of the entries em (ne entries), max_out bytes per entry at
 * most, total_out in all: run false reserves the memory (and `extra` bytes
 * at *extra_at), run true starts the call. */
int gds_codec_nvcomp_decompress(gds_codec_t *c, gds_step_kind_t kind, size_t ne, size_t max_out, size_t total_out,
                                size_t extra, entries_mem_t *em, CUdeviceptr *extra_at, CUstream s, gds_status_t *st,
                                bool run);
/* nvCOMP's largest output for an input block, and its temp memory for
 * `ne` blocks of `max_in` (total_in in all; temp may be NULL). */
int gds_codec_compress_sizes(gds_codec_t *c, const gds_codec_step_t *s, size_t ne, size_t max_in, size_t total_in,
                             CUstream stream, size_t *max_out, size_t *temp, gds_status_t *st);
/* Starts the compression of the entries em (ne blocks of max_in bytes at most). */
int gds_codec_nvcomp_compress(gds_codec_t *c, const gds_codec_step_t *s, size_t ne, size_t max_in,
                              entries_mem_t *em, CUstream stream, gds_status_t *st);

/* ---- codec_blosc.c ---- */

/* The blosc stage (stage d) of the nj jobs built in pinned job array d;
 * chunks whose header fails leave the batch (alive[] false, the error
 * recorded). */
int gds_codec_blosc_stage(decode_ctx_t *x, const batch_mem_t *bm, size_t d, size_t nj, const size_t *idx,
                          bool *alive, unsigned code, gds_status_t *st);

#endif
