/*
 * Filtered (compressed) chunked datasets read into device memory with the
 * decode on the GPU, and written from it with the encode on the GPU. Reads: HDF5 locates the chunks (their file extents and
 * filter masks), the driver's engine reads the stored bytes straight into
 * device memory as one batched request, the codec layer (src/codec/,
 * nvCOMP + run-time compiled kernels) decodes them in batches, and the
 * decoded chunks land in the user's selection: decoded in place when a
 * chunk is a contiguous slab of the destination, else decoded aside and
 * copied with strided device copies. Chunks never written get the fill
 * value. While batch k is decoded, batch k+1 is being read.
 *
 * Taken only when nothing would differ from HDF5's own read: a box
 * selection (one block, any memory shape with everything selected), no
 * type conversion, every filter of the pipeline decodable on the GPU,
 * partial edge chunks filtered like the others, a file of the gds driver,
 * and nvCOMP present. Otherwise the caller stages through HDF5's CPU
 * pipeline, as before.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "H5FDgds.h"
#include "gds_error.h"
#include "gds_filtered.h"
#include "gds_vfd_raw.h"
#include "../codec/gpu_codec.h"
#include "../cuda/cuda_loader.h"
#include "../engine/engine.h"

/* Decoded bytes per batch: enough chunks to keep nvCOMP's batch wide, few
 * enough that two batches of stored bytes and one of scratch fit beside a
 * training job's memory. */
#define BATCH_DECODED_BYTES ((size_t)256 << 20)

/* BATCH_DECODED_BYTES, or H5GDS_DECODE_BATCH_MIB (tuning: wider batches
 * feed nvCOMP's Deflate more chunks at once, at the cost of memory). */
static size_t batch_decoded_bytes(void)
{
    const char *env = getenv("H5GDS_DECODE_BATCH_MIB");
    long mib = env ? atol(env) : 0;
    return mib > 0 && mib <= 65536 ? (size_t)mib << 20 : BATCH_DECODED_BYTES;
}
/* Stored chunks packed back to back: chunks adjacent in the file are then
 * adjacent in memory too, and the engine reads each run of them as one
 * large request (the codecs take any alignment). */
#define STORED_ALIGN 1
/* Batches whose stored bytes are being read while one decodes: with one,
 * the disk idles from the end of that read to the end of the decode; two
 * keep a request at the disk all along when reading and decoding take
 * about as long. */
#define READ_AHEAD 2

static _Thread_local H5FD_gds_decode_stats_t last_stats;

/* The first failure of a read, pushed on the error stack only at the end:
 * every HDF5 call made while cleaning up (closing the ids) clears the stack. */
static _Thread_local struct {
    bool set;
    hid_t major, minor;
    const char *func;
    int line;
    char msg[768];
} pending;

#define FILTERED_ERROR(maj, mino, ...) filtered_error(__func__, __LINE__, (maj), (mino), __VA_ARGS__)

static void filtered_error(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void filtered_error(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
{
    if (pending.set)
        return;
    pending.set = true;
    pending.major = major;
    pending.minor = minor;
    pending.func = func;
    pending.line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pending.msg, sizeof pending.msg, fmt, ap);
    va_end(ap);
}

herr_t H5FD_gds_last_decode_stats(H5FD_gds_decode_stats_t *stats)
{
    if (!stats)
        return -1;
    *stats = last_stats;
    return 0;
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct box {
    int rank;
    hsize_t lo[H5S_MAX_RANK], n[H5S_MAX_RANK];
} box_t;

/* One codec per CUDA context, opened on first use and kept (nvCOMP's and
 * the kernels' set-up is paid once per process). */
#define MAX_CODECS 16
static struct {
    CUcontext ctx;
    gds_codec_t *codec;
    bool failed;
} codecs[MAX_CODECS];
static pthread_mutex_t codecs_lock = PTHREAD_MUTEX_INITIALIZER;

static gds_codec_t *codec_for(CUcontext ctx, gds_status_t *st)
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
            codecs[i].failed = true;
    }
    pthread_mutex_unlock(&codecs_lock);
    return c;
}

/* The pipeline as stored in the dataset's creation list (set_local values
 * included: HDF5 returns what the file holds). */
static bool describe_pipeline(hid_t dcpl, size_t type_size, const hsize_t *cdims, int rank, gds_codec_pipeline_t *p)
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

/* The file selection as one box, if it is one (H5S_ALL: the whole extent). */
static bool selection_box(hid_t dset_space, hid_t file_space, box_t *b)
{
    int rank = H5Sget_simple_extent_ndims(dset_space);
    hsize_t dims[H5S_MAX_RANK];
    if (rank <= 0 || H5Sget_simple_extent_dims(dset_space, dims, NULL) < 0)
        return false;
    b->rank = rank;
    if (file_space == H5S_ALL || H5Sget_select_type(file_space) == H5S_SEL_ALL) {
        for (int d = 0; d < rank; d++)
            b->lo[d] = 0, b->n[d] = dims[d];
        return true;
    }
    if (H5Sget_select_type(file_space) != H5S_SEL_HYPERSLABS)
        return false;
    hsize_t start[H5S_MAX_RANK], end[H5S_MAX_RANK];
    if (H5Sget_select_bounds(file_space, start, end) < 0)
        return false;
    hsize_t count = 1;
    for (int d = 0; d < rank; d++) {
        b->lo[d] = start[d];
        b->n[d] = end[d] - start[d] + 1;
        count *= b->n[d];
    }
    return H5Sget_select_npoints(file_space) == (hssize_t)count;
}

/* Everything the read needs to know about one chunk of the box. */
typedef struct chunk {
    hsize_t lo[H5S_MAX_RANK]; /* dataset coordinates of its first element */
    haddr_t addr;             /* HADDR_UNDEF: never written (fill value) */
    hsize_t stored;
    unsigned mask;
    void *dst;                /* where it decodes: the user's buffer, or scratch */
    bool in_place;
} chunk_t;

/* Strided device copy of the part of a chunk buffer (chunk shape `cdims`,
 * first element at `clo`) that lies in the box, into the box-shaped
 * buffer, or (to_chunk) from it into the chunk buffer. The three innermost dimensions go in one 3-D copy; outer
 * ones loop. */
static CUresult copy_box_part(const gds_cuda_api_t *cu, const box_t *b, const hsize_t *cdims, const hsize_t *clo,
                              void *chunk_buf, void *box_buf, size_t esize, bool to_chunk, CUstream stream)
{
    int r = b->rank;
    hsize_t lo[H5S_MAX_RANK], n[H5S_MAX_RANK];
    for (int d = 0; d < r; d++) {
        hsize_t a = clo[d] > b->lo[d] ? clo[d] : b->lo[d];
        hsize_t z = clo[d] + cdims[d] < b->lo[d] + b->n[d] ? clo[d] + cdims[d] : b->lo[d] + b->n[d];
        lo[d] = a;
        n[d] = z - a;
    }
    /* strides in elements, row-major */
    hsize_t cstride[H5S_MAX_RANK], bstride[H5S_MAX_RANK];
    cstride[r - 1] = bstride[r - 1] = 1;
    for (int d = r - 2; d >= 0; d--) {
        cstride[d] = cstride[d + 1] * cdims[d + 1];
        bstride[d] = bstride[d + 1] * b->n[d + 1];
    }
    int inner = r < 3 ? r : 3, outer = r - inner;
    hsize_t outer_total = 1;
    for (int d = 0; d < outer; d++)
        outer_total *= n[d];
    CUDA_MEMCPY3D m;
    memset(&m, 0, sizeof m);
    m.srcMemoryType = m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.WidthInBytes = (size_t)n[r - 1] * esize;
    m.Height = inner >= 2 ? (size_t)n[r - 2] : 1;
    m.Depth = inner >= 3 ? (size_t)n[r - 3] : 1;
    size_t chunk_pitch = (size_t)cdims[r - 1] * esize, box_pitch = (size_t)b->n[r - 1] * esize;
    size_t chunk_height = inner >= 2 ? (size_t)cdims[r - 2] : 1, box_height = inner >= 2 ? (size_t)b->n[r - 2] : 1;
    m.srcPitch = to_chunk ? box_pitch : chunk_pitch;
    m.dstPitch = to_chunk ? chunk_pitch : box_pitch;
    m.srcHeight = to_chunk ? box_height : chunk_height;
    m.dstHeight = to_chunk ? chunk_height : box_height;
    CUresult rc = CUDA_SUCCESS;
    for (hsize_t o = 0; o < outer_total && rc == CUDA_SUCCESS; o++) {
        /* the outer index o -> coordinates in the intersection */
        hsize_t rest = o, src_off = 0, dst_off = 0;
        for (int d = outer - 1; d >= 0; d--) {
            hsize_t i = rest % n[d];
            rest /= n[d];
            src_off += (lo[d] - clo[d] + i) * cstride[d];
            dst_off += (lo[d] - b->lo[d] + i) * bstride[d];
        }
        for (int d = outer; d < r; d++) {
            src_off += (lo[d] - clo[d]) * cstride[d];
            dst_off += (lo[d] - b->lo[d]) * bstride[d];
        }
        CUdeviceptr in_chunk = (CUdeviceptr)(uintptr_t)chunk_buf + (CUdeviceptr)(src_off * esize);
        CUdeviceptr in_box = (CUdeviceptr)(uintptr_t)box_buf + (CUdeviceptr)(dst_off * esize);
        m.srcDevice = to_chunk ? in_box : in_chunk;
        m.dstDevice = to_chunk ? in_chunk : in_box;
        rc = cu->Memcpy3DAsync(&m, stream);
    }
    return rc;
}

/* Where a chunk may decode straight into the destination: wholly inside
 * the box and spanning the box in every dimension but the first, so that
 * its elements are one contiguous slab there. */
static bool decodes_in_place(const box_t *b, const hsize_t *cdims, const hsize_t *clo, const hsize_t *dims)
{
    for (int d = 0; d < b->rank; d++) {
        if (clo[d] + cdims[d] > dims[d] || clo[d] < b->lo[d] || clo[d] + cdims[d] > b->lo[d] + b->n[d])
            return false;
        if (d > 0 && cdims[d] != b->n[d])
            return false;
    }
    return true;
}

static void chunk_text(const box_t *b, const hsize_t *lo, char *out, size_t size)
{
    size_t at = 0;
    at += (size_t)snprintf(out + at, size - at, "(");
    for (int d = 0; d < b->rank && at < size; d++)
        at += (size_t)snprintf(out + at, size - at, "%s%llu", d ? "," : "", (unsigned long long)lo[d]);
    if (at < size)
        snprintf(out + at, size - at, ")");
}

typedef struct read_state {
    const gds_cuda_api_t *cu;
    hid_t dset, fid;
    char name[256];
    box_t box;
    hsize_t dims[H5S_MAX_RANK], cdims[H5S_MAX_RANK];
    gds_codec_pipeline_t pipe;
    gds_codec_t *codec;
    CUstream stream;
    chunk_t *chunks;
    size_t nchunks;
    void *out;
    CUdeviceptr stored[READ_AHEAD + 1], scratch, fill; /* stored bytes: one slot decoding, READ_AHEAD reading */
    size_t stored_cap[READ_AHEAD + 1], scratch_cap;
    H5FD_gds_decode_stats_t stats;
    bool cpu_decode; /* a chunk the GPU cannot decode, whose data is fine: HDF5's filters read it all */
    bool abandoned;  /* the codec's work never finished: the buffers it uses are never freed */
} read_state_t;

static void free_state(read_state_t *s)
{
    if (s->abandoned) { /* work that never ends may still use them; freeing would wait for it */
        free(s->chunks);
        return;
    }
    for (int i = 0; i < READ_AHEAD + 1; i++)
        if (s->stored[i])
            s->cu->MemFree(s->stored[i]);
    if (s->scratch)
        s->cu->MemFree(s->scratch);
    if (s->fill)
        s->cu->MemFree(s->fill);
    free(s->chunks);
}

/* The box's chunk grid: chunk coordinates of its first chunk and the number
 * of chunks along each dimension. Returns the number of chunks. */
static hsize_t box_chunk_grid(const box_t *b, const hsize_t *cdims, hsize_t *first, hsize_t *count)
{
    hsize_t total = 1;
    for (int d = 0; d < b->rank; d++) {
        first[d] = b->lo[d] / cdims[d];
        count[d] = (b->lo[d] + b->n[d] - 1) / cdims[d] - first[d] + 1;
        total *= count[d];
    }
    return total;
}

/* The chunks the box touches, by their first elements (row-major order). */
static herr_t list_chunks(read_state_t *s)
{
    const box_t *b = &s->box;
    hsize_t first[H5S_MAX_RANK], count[H5S_MAX_RANK];
    hsize_t total = box_chunk_grid(b, s->cdims, first, count);
    if (!(s->chunks = calloc((size_t)total, sizeof *s->chunks))) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for %llu chunk records", (unsigned long long)total);
        return -1;
    }
    s->nchunks = (size_t)total;
    for (hsize_t k = 0; k < total; k++) {
        hsize_t rest = k;
        for (int d = b->rank - 1; d >= 0; d--) {
            s->chunks[k].lo[d] = (first[d] + rest % count[d]) * s->cdims[d];
            rest /= count[d];
        }
    }
    return 0;
}

/* Each chunk's file extent and filter mask, one query per chunk (HDF5 >=
 * 1.10.5). */
static herr_t locate_by_coord(read_state_t *s)
{
    for (size_t k = 0; k < s->nchunks; k++) {
        chunk_t *c = &s->chunks[k];
        if (H5Dget_chunk_info_by_coord(s->dset, c->lo, &c->mask, &c->addr, &c->stored) < 0) {
            char where[128];
            chunk_text(&s->box, c->lo, where, sizeof where);
            FILTERED_ERROR(H5E_DATASET, H5E_CANTGET, "dataset '%s': cannot locate the chunk at %s", s->name, where);
            return -1;
        }
        if (c->addr != HADDR_UNDEF && c->stored == 0)
            c->addr = HADDR_UNDEF;
    }
    return 0;
}

#if H5_VERSION_GE(1, 14, 0)
/* H5Dget_chunk_info_by_coord finds a chunk by walking the dataset's chunk
 * index from its start until it meets it (HDF5 1.14.5 and its development
 * branch, H5D__get_chunk_info_by_coord: all of the index for a chunk never
 * written), so the queries of a box cost the sum of its chunks' positions
 * in the index: quadratic in the chunks read. One walk with H5Dchunk_iter
 * that stops once every chunk of the box was seen costs at most the
 * position of the last of them, never more than the queries together; it
 * is taken from this many chunks on. A box of one chunk costs the same
 * either way and keeps the query. */
#define LOCATE_WALK_MIN_CHUNKS 2

typedef struct index_walk {
    chunk_t *chunks; /* the box's chunks, row-major over its grid */
    size_t nchunks, found;
    int rank;
    const hsize_t *cdims;
    hsize_t first[H5S_MAX_RANK], count[H5S_MAX_RANK]; /* the box's chunk grid */
} index_walk_t;

/* One chunk of the index: recorded if it lies in the box. `offset` is the
 * chunk's first element in dataset elements (HDF5 1.14.x,
 * H5D__chunk_iter_cb: scaled coordinates times the chunk dimensions; 1.13
 * passed the scaled ones). `addr` is where the bytes are, the same address
 * H5Dget_chunk_info_by_coord gives (both count the user block from 1.14.4
 * on, neither before).
 * `size`: the headers of every 1.14 release and of 2.x declare it hsize_t,
 * but the library built once runs against any 1.14.x or 2.x libhdf5, and
 * earlier callers of this callback type (1.13, 1.12.2) passed a uint32_t,
 * which leaves the upper half of its 64-bit argument register undefined.
 * Only the low 32 bits are read: HDF5 keeps a chunk's stored size in 32
 * bits (H5D_chunk_rec_t.nbytes), so a chunk is below 4 GiB and nothing is
 * lost. */
static int walk_one_chunk(const hsize_t *offset, unsigned mask, haddr_t addr, hsize_t size, void *data)
{
    index_walk_t *w = data;
    size_t k = 0;
    for (int d = 0; d < w->rank; d++) {
        hsize_t at = offset[d] / w->cdims[d];
        if (at < w->first[d] || at - w->first[d] >= w->count[d])
            return H5_ITER_CONT; /* outside the box */
        k = k * (size_t)w->count[d] + (size_t)(at - w->first[d]);
    }
    uint32_t stored = (uint32_t)size;
    chunk_t *c = &w->chunks[k];
    if (c->addr == HADDR_UNDEF && stored != 0 && addr != HADDR_UNDEF)
        w->found++;
    c->addr = stored != 0 ? addr : HADDR_UNDEF;
    c->stored = stored;
    c->mask = mask;
    return w->found == w->nchunks ? H5_ITER_STOP : H5_ITER_CONT;
}

/* The same extents from one walk of the chunk index. Chunks of the box
 * that the walk does not report were never written (no address, as the
 * per-chunk query says). */
static herr_t locate_by_walk(read_state_t *s)
{
    index_walk_t w;
    memset(&w, 0, sizeof w);
    w.chunks = s->chunks;
    w.nchunks = s->nchunks;
    w.rank = s->box.rank;
    w.cdims = s->cdims;
    box_chunk_grid(&s->box, s->cdims, w.first, w.count);
    for (size_t k = 0; k < s->nchunks; k++) {
        s->chunks[k].addr = HADDR_UNDEF;
        s->chunks[k].stored = 0;
        s->chunks[k].mask = 0;
    }
    if (H5Dchunk_iter(s->dset, H5P_DEFAULT, walk_one_chunk, &w) < 0) {
        FILTERED_ERROR(H5E_DATASET, H5E_CANTGET, "dataset '%s': cannot walk the chunk index", s->name);
        return -1;
    }
    return 0;
}
#endif

/* What to add to the chunk addresses HDF5 reports to make them file
 * offsets: before 1.14.4 both queries left the user block out (HDF5 pull
 * request 4236). Asked of the libhdf5 that runs, which may be newer or
 * older than the headers this was built with (the Python package). */
static herr_t chunk_address_base(read_state_t *s, haddr_t *base)
{
    unsigned major = 0, minor = 0, release = 0;
    *base = 0;
    if (H5get_libversion(&major, &minor, &release) < 0)
        return -1;
    unsigned long version = major * 1000000ul + minor * 1000ul + release;
    if (version >= 1014004ul)
        return 0;
    hid_t file = H5Iget_file_id(s->dset), fcpl = H5I_INVALID_HID;
    hsize_t userblock = 0;
    herr_t rc = file >= 0 && (fcpl = H5Fget_create_plist(file)) >= 0 && H5Pget_userblock(fcpl, &userblock) >= 0 ? 0
                                                                                                              : -1;
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (file >= 0)
        H5Fclose(file);
    if (rc < 0)
        FILTERED_ERROR(H5E_DATASET, H5E_CANTGET, "dataset '%s': cannot get its file's user block size", s->name);
    *base = (haddr_t)userblock;
    return rc;
}

/* The box's chunks (list_chunks) with each one's file offset, stored size
 * and filter mask, by the method asked for (GDS_LOCATE_AUTO: the cheaper
 * one). */
static herr_t locate_chunks(read_state_t *s, gds_chunk_locate_t method, gds_chunk_locate_t *used)
{
    haddr_t base = 0;
    if (list_chunks(s) < 0 || chunk_address_base(s, &base) < 0)
        return -1;
    herr_t rc;
#if H5_VERSION_GE(1, 14, 0)
    if (method == GDS_LOCATE_WALK || (method == GDS_LOCATE_AUTO && s->nchunks >= LOCATE_WALK_MIN_CHUNKS)) {
        *used = GDS_LOCATE_WALK;
        rc = locate_by_walk(s);
    } else
#else
    if (method == GDS_LOCATE_WALK) {
        FILTERED_ERROR(H5E_ARGS, H5E_UNSUPPORTED, "dataset '%s': walking the chunk index needs HDF5 1.14 or later",
                       s->name);
        return -1;
    }
#endif
    {
        *used = GDS_LOCATE_BY_COORD;
        rc = locate_by_coord(s);
    }
    for (size_t k = 0; rc >= 0 && base != 0 && k < s->nchunks; k++)
        if (s->chunks[k].addr != HADDR_UNDEF)
            s->chunks[k].addr += base;
    return rc;
}

/* A chunk-sized device buffer holding the fill value, for chunks never
 * written (HDF5 returns the fill value for those; zeros by default). */
static herr_t make_fill(read_state_t *s, hid_t dcpl, hid_t type)
{
    size_t esize = s->pipe.type_size, bytes = s->pipe.chunk_bytes;
    unsigned char *value = calloc(1, esize), *host = malloc(bytes);
    herr_t ret = -1;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (value && host && H5Pget_fill_value(dcpl, type, value) >= 0) {
        for (size_t at = 0; at < bytes; at += esize)
            memcpy(host + at, value, esize);
        rc = s->cu->MemAlloc(&s->fill, bytes);
        if (rc == CUDA_SUCCESS)
            rc = s->cu->MemcpyHtoD(s->fill, host, bytes);
        ret = rc == CUDA_SUCCESS ? 0 : -1;
    }
    if (ret < 0)
        FILTERED_ERROR(H5E_DATASET, H5E_CANTINIT, "dataset '%s': cannot prepare the fill value on the GPU: %s", s->name,
                  gds_cuda_error_text(rc));
    free(value);
    free(host);
    return ret;
}

static herr_t ensure(read_state_t *s, CUdeviceptr *p, size_t *cap, size_t need, const char *what)
{
    if (*cap >= need)
        return 0;
    if (*p)
        s->cu->MemFree(*p);
    *p = 0;
    *cap = 0;
    CUresult rc = s->cu->MemAlloc(p, need ? need : 1);
    if (rc != CUDA_SUCCESS) {
        *p = 0;
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "dataset '%s': cannot allocate %zu bytes of device memory for %s: %s",
                  s->name, need, what, gds_cuda_error_text(rc));
        return -1;
    }
    *cap = need;
    return 0;
}

/* Starts reading the stored bytes of chunks [from, to) into stored buffer
 * `slot`, packed. */
static herr_t start_batch_read(read_state_t *s, size_t from, size_t to, int slot, gds_io_t **io, size_t *nread)
{
    size_t need = 0, nseg = 0;
    for (size_t k = from; k < to; k++)
        if (s->chunks[k].addr != HADDR_UNDEF) {
            need += ((size_t)s->chunks[k].stored + STORED_ALIGN - 1) / STORED_ALIGN * STORED_ALIGN;
            nseg++;
        }
    *io = NULL;
    *nread = nseg;
    if (nseg == 0)
        return 0;
    if (ensure(s, &s->stored[slot], &s->stored_cap[slot], need, "stored chunks") < 0)
        return -1;
    gds_segment_t *segs = malloc(nseg * sizeof *segs);
    if (!segs) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a read of %zu chunks", nseg);
        return -1;
    }
    size_t at = 0, i = 0;
    for (size_t k = from; k < to; k++) {
        chunk_t *c = &s->chunks[k];
        if (c->addr == HADDR_UNDEF)
            continue;
        segs[i++] = (gds_segment_t){(uint64_t)c->addr, (size_t)c->stored, (void *)(uintptr_t)(s->stored[slot] + at)};
        s->stats.chunks++;
        s->stats.stored_bytes += c->stored;
        s->stats.decoded_bytes += s->pipe.chunk_bytes;
        at += ((size_t)c->stored + STORED_ALIGN - 1) / STORED_ALIGN * STORED_ALIGN;
    }
    gds_status_t st;
    int rc = gds_vfd_submit_raw_read(s->fid, segs, nseg, io, &st);
    free(segs);
    if (rc < 0) {
        FILTERED_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': reading %zu stored chunks failed: %s", s->name, nseg,
                  st.msg);
        return -1;
    }
    return 0;
}

/* Decodes chunks [from, to), whose stored bytes are in `slot`, into their
 * places; copies the ones decoded aside and fills the ones never written. */
static herr_t decode_batch(read_state_t *s, size_t from, size_t to, int slot)
{
    size_t esize = s->pipe.type_size, n = 0, aside = 0;
    for (size_t k = from; k < to; k++)
        if (s->chunks[k].addr != HADDR_UNDEF && !s->chunks[k].in_place)
            aside++;
    if (ensure(s, &s->scratch, &s->scratch_cap, aside * s->pipe.chunk_bytes, "decoded chunks") < 0)
        return -1;
    gds_codec_chunk_t *batch = malloc((to - from) * sizeof *batch);
    size_t *index = malloc((to - from) * sizeof *index);
    if (!batch || !index) {
        free(batch);
        free(index);
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a batch of %zu chunks", to - from);
        return -1;
    }
    size_t at = 0, scratch_at = 0;
    for (size_t k = from; k < to; k++) {
        chunk_t *c = &s->chunks[k];
        if (c->addr == HADDR_UNDEF)
            continue;
        if (!c->in_place) {
            c->dst = (void *)(uintptr_t)(s->scratch + scratch_at);
            scratch_at += s->pipe.chunk_bytes;
        }
        batch[n] = (gds_codec_chunk_t){(const void *)(uintptr_t)(s->stored[slot] + at), (size_t)c->stored, c->mask,
                                       c->dst};
        index[n++] = k;
        at += ((size_t)c->stored + STORED_ALIGN - 1) / STORED_ALIGN * STORED_ALIGN;
    }
    herr_t ret = 0;
    gds_status_t st;
    size_t bad = 0;
    int decoded = n ? gds_codec_decode(s->codec, &s->pipe, batch, n, s->stream, &bad, &st) : 0;
    if (decoded < 0 && st.err == EOPNOTSUPP) {
        /* e.g. a blosc chunk compressed with blosclz in a dataset whose
         * parameters name LZ4: not an error, another decoder's work */
        s->cpu_decode = true;
        ret = -1;
    } else if (decoded < 0 && st.err == ETIMEDOUT) {
        char first[128], last[128];
        chunk_text(&s->box, s->chunks[from].lo, first, sizeof first);
        chunk_text(&s->box, s->chunks[to - 1].lo, last, sizeof last);
        s->abandoned = true;
        FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': the batch of chunks %s to %s: %s", s->name, first,
                       last, st.msg);
        free(batch);
        free(index);
        return -1;
    } else if (decoded < 0) {
        char where[128] = "?";
        if (bad < n)
            chunk_text(&s->box, s->chunks[index[bad]].lo, where, sizeof where);
        FILTERED_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': chunk at %s could not be decoded on the GPU: %s", s->name,
                  where, st.msg);
        ret = -1;
    }
    CUresult rc = CUDA_SUCCESS;
    for (size_t k = from; ret == 0 && k < to && rc == CUDA_SUCCESS; k++) {
        chunk_t *c = &s->chunks[k];
        if (c->addr == HADDR_UNDEF && s->fill)
            rc = copy_box_part(s->cu, &s->box, s->cdims, c->lo, (void *)(uintptr_t)s->fill, s->out, esize, false,
                               s->stream);
        else if (c->addr != HADDR_UNDEF && !c->in_place)
            rc = copy_box_part(s->cu, &s->box, s->cdims, c->lo, c->dst, s->out, esize, false, s->stream);
    }
    if (ret == 0 && rc == CUDA_SUCCESS)
        rc = s->cu->StreamSynchronize(s->stream);
    else
        (void)s->cu->StreamSynchronize(s->stream); /* nothing queued may still use the buffers freed next */
    if (ret == 0 && rc != CUDA_SUCCESS) {
        FILTERED_ERROR(H5E_DATASET, H5E_CANTCOPY, "dataset '%s': placing decoded chunks failed: %s", s->name,
                  gds_cuda_error_text(rc));
        ret = -1;
    }
    free(batch);
    free(index);
    return ret;
}

static herr_t wait_read(read_state_t *s, gds_io_t *io)
{
    if (!io)
        return 0;
    gds_status_t st;
    double t0 = seconds_now();
    int rc = gds_io_wait(io, &st);
    s->stats.read_wait_s += seconds_now() - t0;
    if (rc < 0) {
        FILTERED_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': reading stored chunks failed: %s", s->name, st.msg);
        return -1;
    }
    return 0;
}

/* The end of the batch that starts at chunk `from`. Batches hold
 * BATCH_DECODED_BYTES decoded, except the first and the last, a quarter of
 * that: the first batch's read and the last batch's decode overlap nothing,
 * so a cold read costs max(reading, decoding) plus those two; small ones
 * keep that small, while the batches between stay wide for nvCOMP. */
static size_t batch_end(const read_state_t *s, size_t from)
{
    size_t per_batch = batch_decoded_bytes() / s->pipe.chunk_bytes;
    if (per_batch == 0)
        per_batch = 1;
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

/* The batches (batch_end): batches k + 1 .. k + READ_AHEAD are read while
 * batch k decodes, each into a stored-bytes slot of its own. */
static herr_t read_all(read_state_t *s)
{
    enum { SLOTS = READ_AHEAD + 1 };
    size_t from[SLOTS], to[SLOTS], nread;
    gds_io_t *io[SLOTS] = {NULL};
    size_t next = 0; /* the first chunk not yet being read */
    int issued = 0, decoded = 0;
    herr_t rc = 0;
    while (rc == 0 && issued < READ_AHEAD + 1 && next < s->nchunks) {
        int k = issued % SLOTS;
        from[k] = next;
        to[k] = next = batch_end(s, next);
        if (start_batch_read(s, from[k], to[k], k, &io[k], &nread) < 0)
            rc = -1;
        else
            issued++;
        if (issued == READ_AHEAD) /* the first READ_AHEAD are in flight: decode as they come */
            break;
    }
    while (rc == 0 && decoded < issued) {
        int k = decoded % SLOTS;
        rc = wait_read(s, io[k]);
        io[k] = NULL;
        if (rc < 0)
            break;
        if (next < s->nchunks) { /* the slot after the ones in flight is free: the batch READ_AHEAD on */
            int j = issued % SLOTS;
            from[j] = next;
            to[j] = next = batch_end(s, next);
            if (start_batch_read(s, from[j], to[j], j, &io[j], &nread) < 0) {
                rc = -1;
                break;
            }
            issued++;
        }
        double t0 = seconds_now();
        rc = decode_batch(s, from[k], to[k], k);
        s->stats.decode_s += seconds_now() - t0;
        decoded++;
    }
    for (int k = 0; k < SLOTS; k++) /* after a failure: reads still in flight end before their buffers go */
        if (io[k])
            wait_read(s, io[k]);
    return rc;
}

/* Encodes the box's chunks [from, to) on the GPU and stores them with
 * direct chunk writes: a chunk that is a contiguous slab of the source is
 * encoded from it in place, the others are gathered into whole chunks
 * first (the part past the dataset's extent holds the fill value, as HDF5
 * pads edge chunks). */
static herr_t encode_batch(read_state_t *s, size_t from, size_t to, size_t max_enc)
{
    size_t m = to - from, esize = s->pipe.type_size, gathered = 0;
    for (size_t k = from; k < to; k++)
        gathered += !s->chunks[k].in_place;
    if (ensure(s, &s->scratch, &s->scratch_cap, gathered * s->pipe.chunk_bytes, "whole chunks") < 0 ||
        ensure(s, &s->stored[0], &s->stored_cap[0], m * max_enc, "encoded chunks") < 0)
        return -1;
    const void **src = malloc(m * sizeof *src);
    void **dst = malloc(m * sizeof *dst);
    size_t *bytes = malloc(m * sizeof *bytes);
    unsigned *mask = malloc(m * sizeof *mask);
    herr_t ret = 0;
    if (!src || !dst || !bytes || !mask) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a batch of %zu chunks", m);
        ret = -1;
    }
    CUresult rc = CUDA_SUCCESS;
    size_t slot = 0;
    for (size_t k = from; ret == 0 && k < to && rc == CUDA_SUCCESS; k++) {
        chunk_t *c = &s->chunks[k];
        dst[k - from] = (void *)(uintptr_t)(s->stored[0] + (k - from) * max_enc);
        if (c->in_place) {
            src[k - from] = c->dst;
            continue;
        }
        CUdeviceptr whole = s->scratch + slot++ * s->pipe.chunk_bytes;
        src[k - from] = (const void *)(uintptr_t)whole;
        rc = s->fill ? s->cu->MemcpyAsync(whole, s->fill, s->pipe.chunk_bytes, s->stream)
                     : s->cu->MemsetD8Async(whole, 0, s->pipe.chunk_bytes, s->stream);
        if (rc == CUDA_SUCCESS)
            rc = copy_box_part(s->cu, &s->box, s->cdims, c->lo, (void *)(uintptr_t)whole, s->out, esize, true,
                               s->stream);
    }
    if (ret == 0 && rc != CUDA_SUCCESS) {
        FILTERED_ERROR(H5E_DATASET, H5E_CANTCOPY, "dataset '%s': gathering chunks on the GPU failed: %s", s->name,
                       gds_cuda_error_text(rc));
        ret = -1;
    }
    gds_status_t st;
    if (ret == 0 && gds_codec_encode(s->codec, &s->pipe, src, dst, bytes, mask, m, s->stream, &st) < 0) {
        FILTERED_ERROR(H5E_PLINE, H5E_WRITEERROR, "dataset '%s': GPU compression of %zu chunks failed: %s", s->name,
                       m, st.msg);
        ret = -1;
    }
    for (size_t k = from; ret == 0 && k < to; k++) {
        chunk_t *c = &s->chunks[k];
        /* the stored bytes go from device memory to the driver untouched */
        if (H5Dwrite_chunk(s->dset, H5P_DEFAULT, mask[k - from], c->lo, bytes[k - from], dst[k - from]) < 0) {
            char where[128];
            chunk_text(&s->box, c->lo, where, sizeof where);
            FILTERED_ERROR(H5E_DATASET, H5E_WRITEERROR, "dataset '%s': storing the chunk at %s failed", s->name,
                           where);
            ret = -1;
        }
        s->stats.chunks++;
        s->stats.stored_bytes += bytes[k - from];
        s->stats.decoded_bytes += s->pipe.chunk_bytes;
    }
    free(src);
    free(dst);
    free(bytes);
    free(mask);
    return ret;
}

static herr_t write_all(read_state_t *s)
{
    size_t max_enc = gds_codec_max_encoded_bytes(&s->pipe);
    if (max_enc == 0) {
        FILTERED_ERROR(H5E_PLINE, H5E_WRITEERROR, "dataset '%s': the GPU cannot encode this pipeline", s->name);
        return -1;
    }
    size_t per_batch = batch_decoded_bytes() / s->pipe.chunk_bytes;
    if (per_batch == 0)
        per_batch = 1;
    for (size_t from = 0; from < s->nchunks; from += per_batch) {
        size_t to = from + per_batch < s->nchunks ? from + per_batch : s->nchunks;
        double t0 = seconds_now();
        herr_t rc = encode_batch(s, from, to, max_enc);
        s->stats.decode_s += seconds_now() - t0;
        if (rc < 0)
            return -1;
    }
    return 0;
}


/* nvCOMP's zstd compression ran at 0.013 GB/s in the compressed benchmark
 * (1 GiB float field, H100), 8x slower than HDF5's CPU filter: pipelines
 * that compress with zstd (alone or inside bitshuffle, cd[4] == 3) are left
 * to HDF5 until that is understood. */
static bool encodes_faster_on_cpu(const gds_codec_pipeline_t *p)
{
    for (size_t i = 0; i < p->nfilters; i++) {
        const gds_codec_filter_t *f = &p->filter[i];
        if (f->id == GDS_FILTER_ZSTD || (f->id == GDS_FILTER_BITSHUFFLE && f->ncd > 4 && f->cd[4] == 3))
            return true;
    }
    return false;
}

/* A write box covers whole chunks: it starts on chunk boundaries and ends
 * on one or at the dataset's extent (direct chunk writes replace whole
 * chunks; a partly covered chunk would need its old contents). */
static bool covers_whole_chunks(const read_state_t *s)
{
    for (int d = 0; d < s->box.rank; d++) {
        hsize_t end = s->box.lo[d] + s->box.n[d];
        if (s->box.lo[d] % s->cdims[d] != 0 || (end % s->cdims[d] != 0 && end != s->dims[d]))
            return false;
    }
    return true;
}

static int filtered_io(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void *buf,
                       bool write)
{
    read_state_t s;
    memset(&s, 0, sizeof s);
    pending.set = false;
    s.dset = dset;
    s.fid = H5I_INVALID_HID;
    hid_t dcpl = H5I_INVALID_HID, ftype = H5I_INVALID_HID, dspace = H5I_INVALID_HID, fapl = H5I_INVALID_HID;
    int result = 0; /* not taken */
    bool pushed = false;
    H5E_BEGIN_TRY
    {
        do {
            if ((dcpl = H5Dget_create_plist(dset)) < 0 || H5Pget_layout(dcpl) != H5D_CHUNKED ||
                H5Pget_nfilters(dcpl) <= 0)
                break;
            unsigned opts = 0;
            if (H5Pget_chunk_opts(dcpl, &opts) < 0 || (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS))
                break;
            if ((ftype = H5Dget_type(dset)) < 0 || H5Tequal(ftype, mem_type) <= 0 ||
                H5Tdetect_class(ftype, H5T_VLEN) != 0 || H5Tis_variable_str(ftype) != 0)
                break;
            if ((s.fid = H5Iget_file_id(dset)) < 0 || (fapl = H5Fget_access_plist(s.fid)) < 0 ||
                H5Pget_driver(fapl) != H5FD_gds_init())
                break;
            if ((dspace = H5Dget_space(dset)) < 0 || !selection_box(dspace, file_space, &s.box))
                break;
            if (H5Sget_simple_extent_dims(dspace, s.dims, NULL) < 0 ||
                H5Pget_chunk(dcpl, H5S_MAX_RANK, s.cdims) != s.box.rank)
                break;
            hsize_t npoints = 1;
            for (int d = 0; d < s.box.rank; d++)
                npoints *= s.box.n[d];
            if (npoints == 0) /* nothing selected: HDF5's own call does nothing */
                break;
            /* H5S_ALL memory with a partial file selection: the buffer has the
             * dataset's shape, each element at its own coordinates (not a packed box) */
            if (mem_space == H5S_ALL && file_space != H5S_ALL && H5Sget_select_type(file_space) != H5S_SEL_ALL)
                break;
            if (mem_space != H5S_ALL && (H5Sget_select_type(mem_space) != H5S_SEL_ALL ||
                                         H5Sget_select_npoints(mem_space) != (hssize_t)npoints))
                break;
            if (!describe_pipeline(dcpl, H5Tget_size(ftype), s.cdims, s.box.rank, &s.pipe))
                break;
            char why[256];
            if (write ? !gds_codec_can_encode(&s.pipe, why, sizeof why) || !covers_whole_chunks(&s) ||
                            encodes_faster_on_cpu(&s.pipe)
                      : !gds_codec_can_decode(&s.pipe, why, sizeof why))
                break;
            result = 1;
        } while (0);
    }
    H5E_END_TRY;
    gds_buffer_info_t info;
    gds_status_t st;
    if (result == 1) {
        s.cu = gds_cuda_if_loaded();
        gds_classify_buffer(buf, &info);
        if (!s.cu || info.kind != GDS_MEMORY_DEVICE || !(s.codec = codec_for((CUcontext)info.context, &st)) ||
            gds_codec_stopped(s.codec))
            result = 0; /* no nvCOMP (or no CUDA, or its codec stopped): HDF5's own pipeline */
    }
    void *previous = NULL;
    bool entered = false;
    if (result == 1) {
        CUresult erc;
        previous = gds_cuda_enter(info.context, &erc);
        entered = true;
        H5Iget_name(dset, s.name, sizeof s.name);
        s.out = buf;
        void *stream = NULL;
        if (dxpl != H5P_DEFAULT)
            H5Pget_dxpl_gds_stream(dxpl, &stream); /* NULL: the legacy stream, as a plain copy would be ordered */
        s.stream = (CUstream)stream;
        unsigned intent = 0;
        /* Reads: chunks still in HDF5's cache or the driver's buffers reach
         * the file first. (Direct chunk writes replace cached chunks.) */
        if (erc != CUDA_SUCCESS || (!write && H5Fget_intent(s.fid, &intent) >= 0 && (intent & H5F_ACC_RDWR) &&
                                    H5Dflush(dset) < 0)) {
            FILTERED_ERROR(H5E_DATASET, H5E_CANTFLUSH, "dataset '%s': cannot prepare the GPU %s", s.name,
                           write ? "write" : "read");
            result = -1;
        }
        gds_chunk_locate_t located;
        if (result == 1 && (write ? list_chunks(&s) : locate_chunks(&s, GDS_LOCATE_AUTO, &located)) < 0)
            result = -1;
        bool any_fill = false;
        for (size_t k = 0; result == 1 && k < s.nchunks; k++) {
            chunk_t *c = &s.chunks[k];
            c->in_place = (write || c->addr != HADDR_UNDEF) && decodes_in_place(&s.box, s.cdims, c->lo, s.dims);
            any_fill |= write ? !c->in_place : c->addr == HADDR_UNDEF;
            if (c->in_place) {
                hsize_t slab = s.box.n[0] > 0 ? s.pipe.chunk_bytes / s.cdims[0] : 0; /* bytes per first-dim row */
                c->dst = (char *)buf + (size_t)((c->lo[0] - s.box.lo[0]) * slab);
            }
        }
        /* Reads of never-written chunks get the fill value as HDF5 gives it:
         * none when undefined or with fill time NEVER (the buffer is left as
         * it is); writes pad edge chunks with it (zeros when undefined). */
        H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
        H5D_fill_time_t fill_time = H5D_FILL_TIME_IFSET;
        bool fills = result == 1 && any_fill && H5Pfill_value_defined(dcpl, &defined) >= 0 &&
                     defined != H5D_FILL_VALUE_UNDEFINED &&
                     (write || (H5Pget_fill_time(dcpl, &fill_time) >= 0 && fill_time != H5D_FILL_TIME_NEVER));
        if (fills && make_fill(&s, dcpl, mem_type) < 0)
            result = -1;
        double t0 = seconds_now();
        if (result == 1 && (write ? write_all(&s) : read_all(&s)) < 0)
            result = s.cpu_decode ? 0 : -1; /* 0: HDF5's filters read the whole selection again */
        s.stats.total_s = seconds_now() - t0;
        if (result == 1 && !write)
            last_stats = s.stats;
        pushed = result < 0;
    }
    free_state(&s); /* in the buffers' context */
    if (entered)
        gds_cuda_restore(previous);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (ftype >= 0)
        H5Tclose(ftype);
    if (dspace >= 0)
        H5Sclose(dspace);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (s.fid >= 0)
        H5Fclose(s.fid);
    if (pushed && pending.set)
        gds_error_push(pending.func, pending.line, pending.major, pending.minor, "%s", pending.msg);
    else if (pushed)
        GDS_ERROR(H5E_DATASET, write ? H5E_WRITEERROR : H5E_READERROR, "dataset '%s': the GPU %s failed", s.name,
                  write ? "write" : "read");
    return result < 0 ? -1 : result;
}

int gds_filtered_read(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, void *buf)
{
    return filtered_io(dset, mem_type, mem_space, file_space, dxpl, buf, false);
}

int gds_filtered_write(hid_t dset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl, const void *buf)
{
    return filtered_io(dset, mem_type, mem_space, file_space, dxpl, (void *)buf, true);
}

long long gds_filtered_locate_chunks(hid_t dset, const hsize_t *lo, const hsize_t *n, gds_chunk_locate_t method,
                                     gds_chunk_location_t *out, size_t cap, gds_chunk_locate_t *used)
{
    read_state_t s;
    memset(&s, 0, sizeof s);
    pending.set = false;
    s.dset = dset;
    long long result = -1;
    hid_t dcpl = H5I_INVALID_HID, dspace = H5I_INVALID_HID;
    gds_chunk_locate_t located = GDS_LOCATE_AUTO;
    H5E_BEGIN_TRY
    {
        if (H5Iget_name(dset, s.name, sizeof s.name) < 0 || (dcpl = H5Dget_create_plist(dset)) < 0 ||
            (dspace = H5Dget_space(dset)) < 0)
            s.box.rank = -1;
        else
            s.box.rank = H5Sget_simple_extent_ndims(dspace);
    }
    H5E_END_TRY;
    bool valid = s.box.rank > 0 && H5Sget_simple_extent_dims(dspace, s.dims, NULL) >= 0 &&
                 H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, H5S_MAX_RANK, s.cdims) == s.box.rank &&
                 lo && n;
    for (int d = 0; valid && d < s.box.rank; d++) {
        s.box.lo[d] = lo[d];
        s.box.n[d] = n[d];
        valid = n[d] > 0 && lo[d] < s.dims[d] && n[d] <= s.dims[d] - lo[d];
    }
    if (!valid)
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "dataset '%s': not a chunked dataset, or an empty box or one past its extent",
                  s.name);
    else if (locate_chunks(&s, method, &located) < 0)
        gds_error_push(pending.func, pending.line, pending.major, pending.minor, "%s", pending.msg);
    else {
        for (size_t k = 0; k < s.nchunks && k < cap && out; k++) {
            memcpy(out[k].lo, s.chunks[k].lo, sizeof out[k].lo);
            out[k].addr = s.chunks[k].addr;
            out[k].stored = s.chunks[k].stored;
            out[k].mask = s.chunks[k].mask;
        }
        if (used)
            *used = located;
        result = (long long)s.nchunks;
    }
    free(s.chunks);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (dspace >= 0)
        H5Sclose(dspace);
    return result;
}

int gds_filtered_decode_chunks(hid_t dset, size_t n, const void *const *src, const size_t *src_bytes,
                               const unsigned *masks, void *const *dst, void *stream)
{
    char name[256] = "?";
    gds_codec_pipeline_t pipe;
    hsize_t cdims[H5S_MAX_RANK];
    hid_t dcpl = H5I_INVALID_HID, ftype = H5I_INVALID_HID;
    bool described = false;
    H5E_BEGIN_TRY
    {
        H5Iget_name(dset, name, sizeof name);
        int rank = -1;
        if ((dcpl = H5Dget_create_plist(dset)) >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
            (ftype = H5Dget_type(dset)) >= 0 && (rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims)) > 0)
            described = describe_pipeline(dcpl, H5Tget_size(ftype), cdims, rank, &pipe);
    }
    H5E_END_TRY;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (ftype >= 0)
        H5Tclose(ftype);
    if (!described || n == 0 || !gds_codec_can_decode(&pipe, NULL, 0))
        return 0;
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    gds_buffer_info_t info;
    gds_classify_buffer(dst[0], &info);
    gds_status_t st;
    gds_codec_t *codec = NULL;
    if (!cu || info.kind != GDS_MEMORY_DEVICE || !(codec = codec_for((CUcontext)info.context, &st)) ||
        gds_codec_stopped(codec))
        return 0;
    gds_codec_chunk_t *batch = malloc(n * sizeof *batch);
    if (!batch) {
        GDS_ERROR(H5E_RESOURCE, H5E_NOSPACE, "dataset '%s': out of memory for a batch of %zu chunks", name, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        batch[i] = (gds_codec_chunk_t){src[i], src_bytes[i], masks ? masks[i] : 0u, dst[i]};
    CUresult erc;
    void *previous = gds_cuda_enter(info.context, &erc);
    size_t bad = n;
    int rc = erc == CUDA_SUCCESS ? gds_codec_decode(codec, &pipe, batch, n, (CUstream)stream, &bad, &st) : -1;
    gds_cuda_restore(previous);
    free(batch);
    if (rc == 0)
        return 1;
    if (erc == CUDA_SUCCESS && st.err == EOPNOTSUPP)
        return 0;
    if (erc != CUDA_SUCCESS)
        GDS_ERROR(H5E_DATASET, H5E_READERROR, "dataset '%s': cannot use the buffers' CUDA context: %s", name,
                  gds_cuda_error_text(erc));
    else
        GDS_ERROR(H5E_PLINE, H5E_READERROR, "dataset '%s': chunk %zu of %zu could not be decoded on the GPU: %s", name,
                  bad, n, st.msg);
    return -1;
}
