/*
 * What every part of the GPU read/write of filtered datasets shares, apart
 * from device memory: the per-process codec cache (one codec per CUDA
 * context), the deferred first error of a read or write (pushed on the
 * error stack at its end), the dataset's pipeline as the codec takes it,
 * and small helpers: the decoded bytes per batch, the clock, a chunk's
 * coordinates as text.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gds_filtered_internal.h"

/* Decoded bytes per batch of a read, at most: nvCOMP decodes a batch's
 * chunks side by side, each chunk's Deflate, LZ4 or zstd stream on its
 * own, so a batch takes about one chunk's time up to the GPU's width and
 * wider batches decode faster (the codec says how wide within this:
 * gds_codec_read_batch_chunks); few enough that two batches of stored
 * bytes and one of scratch fit beside a training job's memory. Writes:
 * their first encode and last write overlap nothing, 256 MiB keeps those
 * short; chunks compressed as one stream each (Deflate) take about as long
 * for a batch of 64 as of 384, and there the codec's batches go up to
 * 512 MiB, as reads'. */
#define READ_BATCH_DECODED_BYTES ((size_t)512 << 20)
#define WRITE_BATCH_DECODED_BYTES ((size_t)256 << 20)
#define WRITE_ONE_STREAM_DECODED_BYTES ((size_t)512 << 20)

/* The decoded bytes per batch of a read or a write, or
 * H5GDS_DECODE_BATCH_MIB for both (tuning: wider batches decode faster, at
 * the cost of device memory). */
static size_t batch_bytes_set(void)
{
    const char *env = getenv("H5GDS_DECODE_BATCH_MIB");
    long mib = env ? atol(env) : 0;
    return mib > 0 && mib <= 65536 ? (size_t)mib << 20 : 0;
}

size_t gds_filtered_batch_decoded_bytes(bool writing)
{
    size_t set = batch_bytes_set();
    return set ? set : writing ? WRITE_BATCH_DECODED_BYTES : READ_BATCH_DECODED_BYTES;
}

/* READ_AHEAD, or H5GDS_DECODE_READ_AHEAD (tuning: a disk much faster or
 * slower than the decode may want more or fewer batches in flight). */
int gds_filtered_read_ahead(void)
{
    const char *env = getenv("H5GDS_DECODE_READ_AHEAD");
    long n = env ? atol(env) : 0;
    return n >= 1 && n <= STORED_BUFFERS - 1 ? (int)n : READ_AHEAD;
}

/* The first failure of this thread's read or write (gds_filtered_internal.h). */
_Thread_local gds_filtered_pending_t gds_filtered_pending;

void gds_filtered_error(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
{
    if (gds_filtered_pending.set)
        return;
    gds_filtered_pending.set = true;
    gds_filtered_pending.major = major;
    gds_filtered_pending.minor = minor;
    gds_filtered_pending.func = func;
    gds_filtered_pending.line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gds_filtered_pending.msg, sizeof gds_filtered_pending.msg, fmt, ap);
    va_end(ap);
}

bool gds_filtered_hdf5_judges(int err, unsigned filter)
{
    return err == EBADMSG && (filter == GDS_FILTER_DEFLATE || filter == GDS_FILTER_FLETCHER32);
}

double gds_filtered_seconds_now(void) { return 1e-9 * (double)gds_now_ns(); }

/* The pipeline as stored in the dataset's creation list (set_local values
 * included: HDF5 returns what the file holds). */
bool gds_filtered_describe_pipeline(hid_t dcpl, size_t type_size, const hsize_t *cdims, int rank, gds_codec_pipeline_t *p)
{
    memset(p, 0, sizeof *p);
    int nf = H5Pget_nfilters(dcpl);
    if (nf <= 0 || nf > GDS_CODEC_MAX_FILTERS)
        return false;
    p->nfilters = (size_t)nf;
    for (int i = 0; i < nf; i++) {
        size_t ncd = GDS_CODEC_MAX_CD;
        unsigned config = 0;
        char name[64];
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &p->filter[i].flags, &ncd, p->filter[i].cd, sizeof name,
                                         name, &config);
        if (id < 0 || ncd > GDS_CODEC_MAX_CD)
            return false;
        p->filter[i].id = (unsigned)id;
        p->filter[i].ncd = ncd;
    }
    p->type_size = type_size;
    p->chunk_bytes = type_size;
    for (int d = 0; d < rank; d++)
        p->chunk_bytes *= (size_t)cdims[d];
    return true;
}

/* One codec per CUDA context, opened on first use and kept (nvCOMP's and
 * the kernels' set-up is paid once per process), and the context's pool of
 * device memory for the reads' and writes' buffers. */
#define MAX_CODECS 16
static struct {
    CUcontext ctx;
    gds_codec_t *codec;
    bool failed;
    CUmemoryPool pool;
    bool pool_tried;
} codecs[MAX_CODECS];
static pthread_mutex_t codecs_lock = PTHREAD_MUTEX_INITIALIZER;

gds_codec_t *gds_filtered_codec_for(CUcontext ctx, gds_status_t *st)
{
    gds_codec_t *c = NULL;
    pthread_mutex_lock(&codecs_lock);
    int i = 0;
    while (i < MAX_CODECS && codecs[i].ctx && codecs[i].ctx != ctx)
        i++;
    if (i == MAX_CODECS)
        gds_status_set(st, 0, "more than %d CUDA contexts decode filtered data", MAX_CODECS);
    else if (codecs[i].ctx == ctx && (codecs[i].codec || codecs[i].failed)) {
        c = codecs[i].codec;
        if (!c)
            gds_status_set(st, 0, "the GPU codecs could not be loaded for this context");
    }
    else {
        codecs[i].ctx = ctx;
        if (gds_codec_open(&codecs[i].codec, ctx, st) == 0)
            c = codecs[i].codec;
        else
            codecs[i].failed = st->err != ENOMEM; /* out of device memory: tried again by the next call */
    }
    pthread_mutex_unlock(&codecs_lock);
    return c;
}

/* Freed bytes a pool keeps for the next read or write (more is given
 * back to the driver at the next synchronisation). */
#define POOL_KEEP_BYTES ((uint64_t)1 << 30)

/* A pool of h5gds's own on the current context's device, or NULL: a
 * driver without pools, a machine with nvidia-fs, where cuFile may DMA
 * straight into the buffers (memory from a pool is not made for that), or
 * H5GDS_DISABLE_DEVICE_POOL set (cuMemAlloc and cuMemFree then). */
static CUmemoryPool make_pool(const gds_cuda_api_t *cu)
{
    CUdevice dev;
    int supported = 0;
    if (gds_env_flag("H5GDS_DISABLE_DEVICE_POOL") || !cu->MemPoolCreate || !cu->MemPoolSetAttribute ||
        !cu->MemAllocFromPoolAsync || !cu->MemFreeAsync || gds_nvfs_present() ||
        cu->CtxGetDevice(&dev) != CUDA_SUCCESS ||
        cu->DeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev) != CUDA_SUCCESS ||
        !supported)
        return NULL;
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    CUmemoryPool pool = NULL;
    if (cu->MemPoolCreate(&pool, &props) != CUDA_SUCCESS)
        return NULL;
    uint64_t keep = POOL_KEEP_BYTES;
    (void)cu->MemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    return pool;
}

CUmemoryPool gds_filtered_pool_for(CUcontext ctx, const gds_cuda_api_t *cu)
{
    CUmemoryPool pool = NULL;
    pthread_mutex_lock(&codecs_lock);
    for (int i = 0; i < MAX_CODECS && codecs[i].ctx; i++)
        if (codecs[i].ctx == ctx) {
            if (!codecs[i].pool_tried) {
                codecs[i].pool_tried = true;
                codecs[i].pool = make_pool(cu);
            }
            pool = codecs[i].pool;
            break;
        }
    pthread_mutex_unlock(&codecs_lock);
    return pool;
}

void gds_filtered_release_device_memory(void)
{
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!cu || !cu->MemPoolTrimTo)
        return;
    pthread_mutex_lock(&codecs_lock);
    for (int i = 0; i < MAX_CODECS && codecs[i].ctx; i++)
        if (codecs[i].pool)
            (void)cu->MemPoolTrimTo(codecs[i].pool, 0);
    pthread_mutex_unlock(&codecs_lock);
}

void gds_filtered_chunk_text(const box_t *b, const hsize_t *lo, char *out, size_t size)
{
    size_t at = 0;
    at += (size_t)snprintf(out + at, size - at, "(");
    for (int d = 0; d < b->rank && at < size; d++)
        at += (size_t)snprintf(out + at, size - at, "%s%llu", d ? "," : "", (unsigned long long)lo[d]);
    if (at < size)
        snprintf(out + at, size - at, ")");
}

/* The ends of the batches s's chunks are cut into (the first `cap` in
 * `ends`), and how many; -1 if one would be empty or run past the end. */
static long long batch_ends(const read_state_t *s, bool writing, size_t *ends, size_t cap)
{
    size_t n = 0;
    for (size_t from = 0, to; from < s->nchunks; from = to, n++) {
        to = writing ? gds_filtered_write_batch_end(s, from) : gds_filtered_read_batch_end(s, from);
        if (to <= from || to > s->nchunks)
            return -1;
        if (n < cap)
            ends[n] = to;
    }
    return (long long)n;
}

long long gds_filtered_read_batches_tail(size_t nchunks, size_t chunk_bytes, size_t codec_chunks, size_t recut_from,
                                         size_t tail_chunks, size_t *ends, size_t cap)
{
    read_state_t s;
    memset(&s, 0, sizeof s);
    s.nchunks = nchunks;
    s.pipe.chunk_bytes = chunk_bytes;
    s.read_batch_chunks = codec_chunks;
    if (tail_chunks && recut_from < nchunks && tail_chunks < nchunks - recut_from) {
        s.recut_from = recut_from;
        s.tail_from = nchunks - tail_chunks;
    }
    return batch_ends(&s, false, ends, cap);
}

long long gds_filtered_batches(size_t nchunks, size_t chunk_bytes, bool writing, size_t codec_chunks, size_t *ends,
                               size_t cap)
{
    read_state_t s;
    memset(&s, 0, sizeof s);
    s.nchunks = nchunks;
    s.pipe.chunk_bytes = chunk_bytes;
    if (writing)
        s.write_batch_chunks = codec_chunks;
    else
        s.read_batch_chunks = codec_chunks;
    return batch_ends(&s, writing, ends, cap);
}

/* Chunks per batch: H5GDS_DECODE_BATCH_MIB's, else the codec's choice
 * (reads; writes of chunks it compresses as one stream each), else the
 * default decoded bytes'. */
static size_t chunks_per_batch(const read_state_t *s, bool writing)
{
    size_t codec = writing ? s->write_batch_chunks : s->read_batch_chunks;
    size_t per_batch =
        !batch_bytes_set() && codec ? codec : gds_filtered_batch_decoded_bytes(writing) / s->pipe.chunk_bytes;
    return per_batch ? per_batch : 1;
}

/* The end of the batch that starts at `from` when nchunks are cut into the
 * fewest batches of at most per_batch, all of one size (within a chunk). */
static size_t even_batch_end(size_t nchunks, size_t per_batch, size_t from)
{
    size_t nb = (nchunks + per_batch - 1) / per_batch;
    size_t base = nchunks / nb, longer = nchunks % nb; /* the first `longer` batches hold base + 1 */
    size_t k = from < longer * (base + 1) ? from / (base + 1) : longer + (from - longer * (base + 1)) / base;
    return from + (k < longer ? base + 1 : base);
}

size_t gds_filtered_read_batch_cap(size_t chunk_bytes)
{
    size_t n = chunk_bytes ? gds_filtered_batch_decoded_bytes(false) / chunk_bytes : 1;
    return n ? n : 1;
}

size_t gds_filtered_write_batch_cap(size_t chunk_bytes)
{
    size_t n = chunk_bytes ? (size_t)WRITE_ONE_STREAM_DECODED_BYTES / chunk_bytes : 1;
    return n ? n : 1;
}

/* The end of the read batch that starts at chunk `from`: the fewest batches
 * of at most chunks_per_batch, all of one size (within a chunk). nvCOMP's
 * decoders of whole chunks take about as long for a batch of 64 chunks as
 * for 512 (gds_codec_read_batch_chunks): every batch costs that time, so a short first or last
 * batch costs as much as a full one, and a read of n batches is fastest
 * when n is least and the first batch, which nothing overlaps, no larger
 * than it must be. */
size_t gds_filtered_read_batch_end(const read_state_t *s, size_t from)
{
    size_t per_batch = chunks_per_batch(s, false);
    if (s->tail_from && from >= s->tail_from)
        return s->nchunks;
    if (s->tail_from && from >= s->recut_from) /* up to the last batch, cut anew (gds_filtered_read_tail) */
        return s->recut_from + even_batch_end(s->tail_from - s->recut_from, per_batch, from - s->recut_from);
    return even_batch_end(s->nchunks, per_batch, from);
}

/* From a disk (not `cached`), with one batch read ahead (the default: the
 * first batch's read had the disk to itself, its time is the disk's), and
 * not where H5GDS_DECODE_BATCH_MIB sets the batches; the last batch
 * narrower than a full one (the batches' device memory as planned; a batch
 * before it may be wider than the planned ones, within that width, and its
 * stored-bytes buffer then grows). H5GDS_DECODE_TAIL: 0
 * never; N > 0 a last batch of N chunks in every read of more than one
 * batch (tests, tuning). */
bool gds_filtered_read_tail(read_state_t *s, size_t next, size_t stored_bytes, size_t nstored, size_t max_stored,
                            double seconds, bool cached)
{
    const char *env = getenv("H5GDS_DECODE_TAIL");
    char *end = NULL;
    long forced = env && *env ? strtol(env, &end, 10) : -1;
    if (end && (*end || forced < 0))
        forced = -1; /* not a count: as if unset */
    if (forced == 0 || next >= s->nchunks)
        return false;
    size_t left = s->nchunks - next, width = chunks_per_batch(s, false), tail = 0;
    if (forced > 0)
        tail = (size_t)forced;
    else if (!cached && gds_filtered_read_ahead() == 1 && !batch_bytes_set() && nstored && seconds > 0)
        tail = gds_codec_read_tail_chunks(&s->pipe, max_stored, (double)stored_bytes / (double)nstored,
                                          (double)stored_bytes / seconds, width < left ? width : left);
    if (!tail || tail >= left)
        return false;
    s->recut_from = next;
    s->tail_from = s->nchunks - tail;
    return true;
}

/* The end of the write batch that starts at chunk `from`. Where the codec
 * names a batch (chunks compressed as one stream each, which take about
 * as long in a batch of 64 as of 384: gds_codec_write_batch_chunks; not
 * Deflate chunks compressed in pieces), the
 * fewest batches of at most that, of one size. Else batches of
 * WRITE_BATCH_DECODED_BYTES decoded, except the first and the last, a
 * quarter of that: the first batch's encode and the last batch's write,
 * bound by the disk, overlap nothing, so small ones keep that small, while
 * the batches between stay wide for nvCOMP. (Batches growing by half from
 * the first to a full one, which keep the disk busy while the second
 * encodes, wrote no faster: bench/results/2026-11-27-h100-deflate-writes.) */
size_t gds_filtered_write_batch_end(const read_state_t *s, size_t from)
{
    size_t per_batch = chunks_per_batch(s, true);
    if (s->write_batch_chunks && !batch_bytes_set()) /* the codec's sub-batches, as reads */
        return even_batch_end(s->nchunks, per_batch, from);
    size_t edge = per_batch >= 8 ? per_batch / 4 : per_batch;
    size_t left = s->nchunks - from;
    if (left <= edge)
        return s->nchunks;
    if (from == 0)
        return edge;
    if (left <= per_batch + edge) /* the rest: one batch, then the small last one */
        return s->nchunks - edge;
    return from + per_batch;
}
