/*
 * The GPU codecs: plans a batch of chunks (codec_plan.c), runs the filters'
 * stages on the caller's stream with the NVRTC-compiled kernels
 * (codec_kernels.cu) and nvCOMP's batched calls, one call per stage for all
 * the chunks of a sub-batch. See gpu_codec.h.
 *
 * Decoding a group of chunks (one filter mask) stage by stage, in the
 * reverse of the pipeline's order: sizes are known on the host (a pipeline
 * has one compressor at most), so only LZ4 and bitshuffle framing need the
 * host to read the chunks' first bytes (their block size) before their
 * stage: a device-to-host copy and a synchronisation. Everything else runs
 * without waiting; the errors the kernels record per chunk are read at the
 * end of each sub-batch. The data moves between the source, up to four
 * arenas of temporary memory (one slot per chunk) and the destination.
 */
#include "gpu_codec.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_plan.h"
#include "codec_shared.h"
#include "nvcomp_api.h"

/* Generated at build time from codec_kernels.cu and codec_shared.h. */
extern const unsigned char gds_codec_kernels_source[];
extern const unsigned char gds_codec_shared_source[];

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
    K_ZSTD_ASSEMBLE,
    K_LZ4H5_LAYOUT,
    K_BSHUF_LAYOUT,
    K_BLOSC_WALK,
    K_BLOSC_FINISH,
    K_COUNT
};
static const char *const kernel_names[K_COUNT] = {
    "codec_gather_head",   "codec_copy",          "codec_fletcher_sum",
    "codec_fletcher_check", "codec_fletcher_put", "codec_adler_sum",     "codec_adler_check",
    "codec_zlib_prep",     "codec_zstd_prep",  "codec_nvcomp_check",  "codec_entry_copy",
    "codec_lz4h5_walk",    "codec_bshuf_walk",    "codec_bitunshuffle",  "codec_bitshuffle",
    "codec_unshuffle",     "codec_shuffle",       "codec_blocks_plan",   "codec_zlib_assemble",
    "codec_zstd_assemble", "codec_lz4h5_layout",  "codec_bshuf_layout",  "codec_blosc_walk",
    "codec_blosc_finish",
};

#define THREADS 256u
#define MAX_BATCH 16384u   /* chunks per sub-batch (the grid's y dimension) */
#define NARENAS 4
#define SLOT_ALIGN 256u
#define DEFAULT_TEMP_BUDGET ((size_t)1 << 30)

enum { LOC_SRC = -1, LOC_DST = -2 };

/* Device memory that grows (freed and allocated again, bigger, once the
 * stream is idle). */
typedef struct dbuf {
    CUdeviceptr ptr;
    size_t size;
} dbuf_t;

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
    size_t budget;       /* arenas of one sub-batch, at most */
    char describe[640];
};

/* The dummies' layout: deflate (stored block of 1 byte), zstd (frame of 1
 * raw byte), LZ4 (block of 1 literal), scratch. */
enum { DUMMY_DEFLATE = 0, DUMMY_ZSTD = 16, DUMMY_LZ4 = 32, DUMMY_SCRATCH = 64, DUMMY_BYTES = 128 };
static const unsigned char dummy_deflate[] = {0x01, 0x01, 0x00, 0xfe, 0xff, 0x78};
static const unsigned char dummy_zstd[] = {0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x01, 0x09, 0x00, 0x00, 0x78};
static const unsigned char dummy_lz4[] = {0x10, 0x78};

/* ---- errors ---- */

static int cuda_fail(gds_status_t *st, const char *what, CUresult rc)
{
    gds_status_set(st, 0, "GPU codec: %s failed: %s", what, gds_cuda_error_text(rc));
    return -1;
}

static const char *nvcomp_text(const gds_codec_t *c, gds_nvcomp_status_t s)
{
    const char *t = c->nv->GetStatusString ? c->nv->GetStatusString(s) : NULL;
    return t ? t : "error";
}

/* ---- the kernels' module: compiled once per process and architecture ---- */

typedef struct image {
    int arch;
    char *data;
} image_t;
static pthread_mutex_t image_lock = PTHREAD_MUTEX_INITIALIZER;
static image_t images[8];
static int nimages;

static int compile_kernels(int arch, char **data, gds_status_t *st)
{
    const char *why = NULL;
    const gds_nvrtc_api_t *rtc = gds_nvrtc_load(&why);
    if (!rtc) {
        gds_status_set(st, 0, "GPU codec: %s", why);
        return -1;
    }
    /* cubin for the device; PTX of an older architecture when this NVRTC
     * does not know the device's (the driver compiles it) */
    char opt_arch[64];
    int tries[2] = {arch, 80};
    for (int t = 0; t < 2; t++) {
        bool ptx = t == 1;
        snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s_%d", ptx ? "compute" : "sm", tries[t]);
        const char *opts[] = {opt_arch, "--std=c++17", "-default-device"};
        const char *headers[] = {(const char *)gds_codec_shared_source};
        const char *names[] = {"codec_shared.h"};
        gds_nvrtc_program_t prog = NULL;
        int rc = rtc->CreateProgram(&prog, (const char *)gds_codec_kernels_source, "codec_kernels.cu", 1, headers, names);
        if (rc != 0) {
            gds_status_set(st, 0, "GPU codec: nvrtcCreateProgram failed: %s", rtc->GetErrorString(rc));
            return -1;
        }
        rc = rtc->CompileProgram(prog, 3, opts);
        if (rc != 0) {
            size_t log_size = 0;
            char log[600] = "";
            if (rtc->GetProgramLogSize(prog, &log_size) == 0 && log_size) {
                char *full = malloc(log_size + 1);
                if (full && rtc->GetProgramLog(prog, full) == 0)
                    snprintf(log, sizeof log, "%s", full);
                free(full);
            }
            rtc->DestroyProgram(&prog);
            if (t == 0 && tries[0] != 80)
                continue;
            gds_status_set(st, 0, "GPU codec: compiling the kernels for sm_%d with NVRTC %d.%d failed: %s: %s", arch,
                           rtc->major, rtc->minor, rtc->GetErrorString(rc), log);
            return -1;
        }
        size_t size = 0;
        rc = ptx ? rtc->GetPTXSize(prog, &size) : rtc->GetCUBINSize(prog, &size);
        char *image = rc == 0 ? malloc(size + 1) : NULL;
        if (image)
            rc = ptx ? rtc->GetPTX(prog, image) : rtc->GetCUBIN(prog, image);
        rtc->DestroyProgram(&prog);
        if (!image || rc != 0) {
            free(image);
            gds_status_set(st, 0, "GPU codec: NVRTC gave no code for sm_%d", arch);
            return -1;
        }
        image[size] = 0;
        *data = image;
        return 0;
    }
    return -1;
}

static int kernel_image(int arch, const char **data, gds_status_t *st)
{
    int rc = 0;
    pthread_mutex_lock(&image_lock);
    for (int i = 0; i < nimages; i++)
        if (images[i].arch == arch) {
            *data = images[i].data;
            pthread_mutex_unlock(&image_lock);
            return 0;
        }
    char *image = NULL;
    rc = compile_kernels(arch, &image, st);
    if (rc == 0) {
        if (nimages < (int)(sizeof images / sizeof images[0]))
            images[nimages++] = (image_t){arch, image};
        /* else (never: 8 architectures in one process) it stays allocated for the module's life */
        *data = image;
    }
    pthread_mutex_unlock(&image_lock);
    return rc;
}

/* ---- open / close ---- */

static int query_alignments(gds_codec_t *c, gds_status_t *st)
{
    const gds_nvcomp_api_t *nv = c->nv;
    gds_nvcomp_deflate_copts_t dc = {0};
    gds_nvcomp_deflate_dopts_t dd = {0};
    gds_nvcomp_lz4_copts_t lc = {0};
    gds_nvcomp_lz4_dopts_t ld = {0};
    gds_nvcomp_zstd_copts_t zc = {{0}};
    gds_nvcomp_zstd_dopts_t zd = {0};
    dc.algorithm = 1;
    if (nv->deflate.DecompressGetRequiredAlignments(dd, &c->deflate_dalign) ||
        nv->lz4.DecompressGetRequiredAlignments(ld, &c->lz4_dalign) ||
        nv->zstd.DecompressGetRequiredAlignments(zd, &c->zstd_dalign) ||
        nv->deflate.CompressGetRequiredAlignments(dc, &c->deflate_calign) ||
        nv->lz4.CompressGetRequiredAlignments(lc, &c->lz4_calign) ||
        nv->zstd.CompressGetRequiredAlignments(zc, &c->zstd_calign)) {
        gds_status_set(st, 0, "GPU codec: nvCOMP (%s) does not give its alignment requirements", nv->path);
        return -1;
    }
    /* Blocks of LZ4 and bitshuffle framing start anywhere: the decoders must
     * take any input alignment (nvCOMP 5 and 6 do). The deflate input is
     * staged to an aligned copy. */
    if (c->lz4_dalign.input > 1 || c->zstd_dalign.input > 1 || c->deflate_dalign.input > SLOT_ALIGN) {
        gds_status_set(st, 0, "GPU codec: nvCOMP (%s) needs input alignments (LZ4 %zu, zstd %zu) this codec does "
                              "not provide", nv->path, c->lz4_dalign.input, c->zstd_dalign.input);
        return -1;
    }
    return 0;
}

void gds_codec_close(gds_codec_t *c)
{
    if (!c)
        return;
    if (c->cu) {
        CUresult rc;
        void *prev = gds_cuda_enter(c->ctx, &rc);
        if (rc == CUDA_SUCCESS) {
            c->cu->CtxSynchronize();
            if (c->work.ptr)
                c->cu->MemFree(c->work.ptr);
            if (c->blocks.ptr)
                c->cu->MemFree(c->blocks.ptr);
            if (c->dummies)
                c->cu->MemFree(c->dummies);
            if (c->pinned)
                c->cu->MemFreeHost(c->pinned);
            if (c->module)
                c->cu->ModuleUnload(c->module);
        }
        gds_cuda_restore(prev);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int gds_codec_open(gds_codec_t **out, CUcontext ctx, gds_status_t *st)
{
    *out = NULL;
    const char *why = NULL;
    const gds_cuda_api_t *cu = gds_cuda_load(&why);
    if (!cu) {
        gds_status_set(st, 0, "GPU codec: CUDA unavailable: %s", why);
        return -1;
    }
    const gds_nvcomp_api_t *nv = gds_nvcomp_load(&why);
    if (!nv) {
        gds_status_set(st, 0, "GPU codec: %s", why);
        return -1;
    }
    if (!gds_nvrtc_load(&why)) {
        gds_status_set(st, 0, "GPU codec: %s", why);
        return -1;
    }
    if (!ctx && (cu->CtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)) {
        gds_status_set(st, 0, "GPU codec: no CUDA context given and none current");
        return -1;
    }
    gds_codec_t *c = calloc(1, sizeof *c);
    if (!c) {
        gds_status_set(st, 12, "GPU codec: out of memory");
        return -1;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->ctx = ctx;
    c->cu = cu;
    c->nv = nv;
    c->budget = DEFAULT_TEMP_BUDGET;
    const char *env = getenv("H5GDS_CODEC_TEMP_MIB");
    if (env && atol(env) > 0)
        c->budget = (size_t)atol(env) << 20;

    CUresult rc;
    void *prev = gds_cuda_enter(ctx, &rc);
    int ret = -1;
    CUdevice dev;
    const char *image = NULL;
    if (rc != CUDA_SUCCESS)
        cuda_fail(st, "making the context current", rc);
    else if ((rc = cu->CtxGetDevice(&dev)) != CUDA_SUCCESS)
        cuda_fail(st, "cuCtxGetDevice", rc);
    else if ((rc = cu->DeviceGetAttribute(&c->sm_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) !=
                 CUDA_SUCCESS ||
             (rc = cu->DeviceGetAttribute(&c->sm_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) !=
                 CUDA_SUCCESS)
        cuda_fail(st, "cuDeviceGetAttribute", rc);
    else if (kernel_image(c->sm_major * 10 + c->sm_minor, &image, st) < 0) {
        /* st set */
    }
    else if ((rc = cu->ModuleLoadData(&c->module, image)) != CUDA_SUCCESS)
        cuda_fail(st, "loading the kernels (cuModuleLoadData)", rc);
    else if (query_alignments(c, st) < 0) {
        /* st set */
    }
    else {
        ret = 0;
        for (int k = 0; k < K_COUNT && ret == 0; k++)
            if ((rc = cu->ModuleGetFunction(&c->fn[k], c->module, kernel_names[k])) != CUDA_SUCCESS)
                ret = cuda_fail(st, kernel_names[k], rc);
        unsigned char d[DUMMY_BYTES] = {0};
        memcpy(d + DUMMY_DEFLATE, dummy_deflate, sizeof dummy_deflate);
        memcpy(d + DUMMY_ZSTD, dummy_zstd, sizeof dummy_zstd);
        memcpy(d + DUMMY_LZ4, dummy_lz4, sizeof dummy_lz4);
        if (ret == 0 && ((rc = cu->MemAlloc(&c->dummies, DUMMY_BYTES)) != CUDA_SUCCESS ||
                         (rc = cu->MemcpyHtoD(c->dummies, d, DUMMY_BYTES)) != CUDA_SUCCESS))
            ret = cuda_fail(st, "allocating device memory", rc);
    }
    snprintf(c->describe, sizeof c->describe, "nvCOMP %d (%s), kernels for sm_%d%d", nv->major, nv->path,
             c->sm_major, c->sm_minor);
    gds_cuda_restore(prev);
    if (ret < 0) {
        gds_codec_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

const char *gds_codec_describe(const gds_codec_t *c) { return c ? c->describe : ""; }

/* ---- memory ---- */

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static int dbuf_reserve(gds_codec_t *c, dbuf_t *b, size_t need, CUstream s, gds_status_t *st)
{
    if (b->size >= need)
        return 0;
    CUresult rc = c->cu->StreamSynchronize(s); /* work queued may still use it */
    if (rc != CUDA_SUCCESS)
        return cuda_fail(st, "cuStreamSynchronize", rc);
    if (b->ptr)
        c->cu->MemFree(b->ptr);
    b->ptr = 0;
    b->size = 0;
    size_t size = align_up(need + need / 4, (size_t)2 << 20);
    if ((rc = c->cu->MemAlloc(&b->ptr, size)) != CUDA_SUCCESS) {
        gds_status_set(st, 12, "GPU codec: cannot allocate %zu MiB of device memory: %s", size >> 20,
                       gds_cuda_error_text(rc));
        return -1;
    }
    b->size = size;
    return 0;
}

static int pinned_reserve(gds_codec_t *c, size_t need, CUstream s, gds_status_t *st)
{
    if (c->pinned_size >= need)
        return 0;
    CUresult rc = c->cu->StreamSynchronize(s);
    if (rc != CUDA_SUCCESS)
        return cuda_fail(st, "cuStreamSynchronize", rc);
    if (c->pinned)
        c->cu->MemFreeHost(c->pinned);
    c->pinned = NULL;
    c->pinned_size = 0;
    size_t size = align_up(need + need / 4, (size_t)1 << 20);
    if ((rc = c->cu->MemHostAlloc(&c->pinned, size, 0)) != CUDA_SUCCESS) {
        gds_status_set(st, 12, "GPU codec: cannot allocate %zu MiB of pinned memory: %s", size >> 20,
                       gds_cuda_error_text(rc));
        return -1;
    }
    c->pinned_size = size;
    return 0;
}

/* Bump allocation inside a buffer. */
static size_t carve(size_t *off, size_t bytes, size_t align)
{
    size_t at = align_up(*off, align);
    *off = at + bytes;
    return at;
}

/* ---- launching ---- */

static int launch(gds_codec_t *c, int k, unsigned gx, unsigned gy, CUstream s, void **args, gds_status_t *st)
{
    if (gx == 0 || gy == 0)
        return 0;
    CUresult rc = c->cu->LaunchKernel(c->fn[k], gx, gy, 1, THREADS, 1, 1, 0, s, args, NULL);
    if (rc != CUDA_SUCCESS) {
        gds_status_set(st, 0, "GPU codec: launching %s failed: %s", kernel_names[k], gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

/* Thread blocks along x for a job of `bytes` bytes (16 per thread, a few thousand blocks at most). */
static unsigned parts_for(size_t bytes)
{
    size_t parts = (bytes + THREADS * 16 - 1) / (THREADS * 16);
    return parts < 1 ? 1 : parts > 2048 ? 2048 : (unsigned)parts;
}

static unsigned blocks_for(size_t threads) { return (unsigned)((threads + THREADS - 1) / THREADS); }

/* ---- batches ---- */

/* Where data is: LOC_SRC, LOC_DST or an arena; the first arena not in `busy`. */
static int free_arena(const int *busy, int nbusy)
{
    for (int a = 0; a < NARENAS; a++) {
        bool used = false;
        for (int i = 0; i < nbusy; i++)
            used |= busy[i] == a;
        if (!used)
            return a;
    }
    return 0; /* never: four arenas cover every stage */
}

typedef struct stage {
    const gds_codec_step_t *step; /* NULL: the final copy */
    int in, out, mid, mid2;       /* locations */
} stage_t;

typedef struct error_list {
    size_t first; /* lowest failing chunk index, or SIZE_MAX */
    unsigned code;
    uint64_t detail;
} error_list_t;

static void record_error(error_list_t *e, size_t chunk, unsigned code, uint64_t detail)
{
    if (chunk < e->first) {
        e->first = chunk;
        e->code = code;
        e->detail = detail;
    }
}

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

/* Bytes at the start of the work memory that nothing uses: a corrupt
 * stream's back-reference before an arena's first slot reads them instead
 * of unmapped memory (Deflate reaches back 32 KiB, LZ4 64 KiB; zstd frames
 * are checked first, their windows bounded by the chunk). */
#define WORK_GUARD ((size_t)1 << 20)

static size_t batch_bytes(const size_t *slot, size_t m, size_t njobs_arrays, batch_mem_t *bm)
{
    size_t off = 0;
    bm->m = m;
    bm->njobs_arrays = njobs_arrays;
    carve(&off, WORK_GUARD, 256); /* reads before an arena's first slot stay in this allocation */
    bm->err = carve(&off, m * 4, 256);
    bm->detail = carve(&off, m * 8, 256);
    bm->acc = carve(&off, m * 3 * 8, 256);
    bm->tail = carve(&off, m * 8, 256);
    bm->heads = carve(&off, m * GDS_HEAD_BYTES, 256);
    bm->dsize = carve(&off, m * 8, 256);
    bm->mask = carve(&off, m * 4, 256);
    bm->jobs = carve(&off, njobs_arrays * m * sizeof(gds_kjob_t), 256);
    for (int a = 0; a < NARENAS; a++) {
        bm->slot[a] = slot[a];
        bm->arena[a] = slot[a] ? carve(&off, m * slot[a], SLOT_ALIGN) : 0;
    }
    return off;
}

static size_t pinned_bytes(batch_mem_t *bm)
{
    size_t off = 0, m = bm->m;
    bm->pin_jobs = carve(&off, bm->njobs_arrays * m * sizeof(gds_kjob_t), 64);
    bm->pin_heads = carve(&off, m * GDS_HEAD_BYTES, 64);
    bm->pin_err = carve(&off, m * 4, 64);
    bm->pin_detail = carve(&off, m * 8, 64);
    bm->pin_dsize = carve(&off, m * 8, 64);
    bm->pin_mask = carve(&off, m * 4, 64);
    return off;
}

static void offset_batch(batch_mem_t *bm, CUdeviceptr base)
{
    bm->err += base;
    bm->detail += base;
    bm->acc += base;
    bm->tail += base;
    bm->heads += base;
    bm->dsize += base;
    bm->mask += base;
    bm->jobs += base;
    for (int a = 0; a < NARENAS; a++)
        if (bm->slot[a])
            bm->arena[a] += base;
}

/* nvCOMP's arrays for `ne` entries and `temp` bytes, in the blocks buffer. */
typedef struct entries_mem {
    gds_kentries_t e;
    CUdeviceptr temp;
    size_t temp_bytes;
} entries_mem_t;

static int entries_reserve(gds_codec_t *c, size_t ne, size_t temp, size_t extra, CUstream s, entries_mem_t *em,
                           CUdeviceptr *extra_at, gds_status_t *st)
{
    size_t off = 0;
    size_t in_ptrs = carve(&off, ne * 8, 256), in_bytes = carve(&off, ne * 8, 256);
    size_t out_cap = carve(&off, ne * 8, 256), out_actual = carve(&off, ne * 8, 256);
    size_t out_ptrs = carve(&off, ne * 8, 256), status = carve(&off, ne * 4, 256);
    size_t aux = carve(&off, ne * sizeof(gds_kentry_t), 256);
    size_t t = carve(&off, temp, 256);
    size_t x = carve(&off, extra, SLOT_ALIGN);
    if (dbuf_reserve(c, &c->blocks, off, s, st) < 0)
        return -1;
    CUdeviceptr b = c->blocks.ptr;
    em->e = (gds_kentries_t){b + in_ptrs, b + in_bytes, b + out_cap, b + out_actual, b + out_ptrs, b + status, b + aux};
    em->temp = b + t;
    em->temp_bytes = temp;
    if (extra_at)
        *extra_at = b + x;
    return 0;
}

/* ---- decoding ---- */

static bool step_lz4(gds_step_kind_t k) { return k == GDS_STEP_LZ4 || k == GDS_STEP_BSHUF_LZ4; }
static bool step_zstd(gds_step_kind_t k) { return k == GDS_STEP_ZSTD || k == GDS_STEP_BSHUF_ZSTD; }

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
    error_list_t *errors;
} decode_ctx_t;

static unsigned step_code(const gds_codec_step_t *s) { return (s->pos + 1) << 8; }

/* Per chunk, the sizes entering stage d (in[d]) and leaving it (out[d]);
 * 0 with them, or -1 with the host-found error. */
static int chunk_sizes(const decode_ctx_t *x, size_t stored, size_t *in, size_t *out, unsigned *code,
                       uint64_t *detail)
{
    size_t cur = stored;
    for (size_t d = 0; d < x->nsteps; d++) {
        size_t k = x->nsteps - 1 - d;
        const gds_codec_step_t *s = &x->steps[k];
        unsigned sc = step_code(s);
        if (x->forward[k + 1] != GDS_SIZE_UNKNOWN && cur != x->forward[k + 1]) {
            *code = sc | GDS_KERR_STORED;
            *detail = cur;
            return -1;
        }
        in[d] = cur;
        size_t min = s->kind == GDS_STEP_FLETCHER32 ? 4
                     : s->kind == GDS_STEP_DEFLATE  ? 7
                     : s->kind == GDS_STEP_ZSTD     ? 8
                     : (s->kind == GDS_STEP_LZ4 || s->kind == GDS_STEP_BSHUF_LZ4 || s->kind == GDS_STEP_BSHUF_ZSTD)
                         ? 12
                     : s->kind == GDS_STEP_BLOSC ? GDS_HEAD_BYTES
                                                 : 0;
        if (cur < min) {
            *code = sc | GDS_KERR_SHORT;
            *detail = cur;
            return -1;
        }
        if (s->kind == GDS_STEP_FLETCHER32)
            cur -= 4;
        else if (gds_codec_step_compresses(s->kind))
            cur = x->forward[k];
        else if (s->kind == GDS_STEP_BITSHUFFLE && cur % s->elem) {
            *code = sc | GDS_KERR_PARAM;
            *detail = cur;
            return -1;
        }
        out[d] = cur;
    }
    if (cur != x->p->chunk_bytes) {
        *code = GDS_KERR_STORED;
        *detail = stored;
        return -1;
    }
    return 0;
}

/* Locations of each stage (decode order) and the final copy. */
static void decode_stages(decode_ctx_t *x)
{
    int loc = LOC_SRC;
    x->nstages = 0;
    for (size_t d = 0; d < x->nsteps; d++) {
        const gds_codec_step_t *s = &x->steps[x->nsteps - 1 - d];
        stage_t *g = &x->stage[x->nstages++];
        g->step = s;
        g->in = loc;
        g->mid = g->mid2 = LOC_SRC;
        if (s->kind == GDS_STEP_FLETCHER32) {
            g->out = loc;
            continue;
        }
        int busy[3] = {loc, LOC_DST, LOC_DST};
        /* nvCOMP's decoders follow back-references of corrupt input before
         * the start of their output (seen: Deflate, a few KiB): they never
         * write into the caller's buffer, only into an arena, which has
         * mapped memory before it (WORK_GUARD); a copy stage follows. */
        bool nvcomp_out = s->kind == GDS_STEP_DEFLATE || s->kind == GDS_STEP_ZSTD || s->kind == GDS_STEP_LZ4;
        g->out = d == x->nsteps - 1 && !nvcomp_out ? LOC_DST : free_arena(busy, 1);
        if (s->kind == GDS_STEP_DEFLATE || s->kind == GDS_STEP_BSHUF_LZ4 || s->kind == GDS_STEP_BSHUF_ZSTD ||
            s->kind == GDS_STEP_BLOSC) {
            busy[1] = g->out;
            g->mid = free_arena(busy, 2);
        }
        loc = g->out;
    }
    if (loc != LOC_DST) {
        stage_t *g = &x->stage[x->nstages++];
        g->step = NULL;
        g->in = loc;
        g->out = LOC_DST;
        g->mid = g->mid2 = LOC_SRC;
    }
}

static CUdeviceptr loc_ptr(const batch_mem_t *bm, int loc, const gds_codec_chunk_t *ch, size_t j)
{
    if (loc == LOC_SRC)
        return (CUdeviceptr)(uintptr_t)ch->src;
    if (loc == LOC_DST)
        return (CUdeviceptr)(uintptr_t)ch->dst;
    return bm->arena[loc] + j * bm->slot[loc];
}

/* Uploads `n` jobs (built in pinned memory at job array `a`) and returns their device address. */
static int upload_jobs(gds_codec_t *c, const batch_mem_t *bm, size_t a, size_t n, CUstream s, CUdeviceptr *dev,
                       gds_status_t *st)
{
    size_t off = a * bm->m * sizeof(gds_kjob_t);
    *dev = bm->jobs + off;
    if (!n)
        return 0;
    CUresult rc = c->cu->MemcpyHtoDAsync(*dev, (char *)c->pinned + bm->pin_jobs + off, n * sizeof(gds_kjob_t), s);
    return rc == CUDA_SUCCESS ? 0 : cuda_fail(st, "cuMemcpyHtoDAsync", rc);
}

static gds_kjob_t *pinned_jobs(gds_codec_t *c, const batch_mem_t *bm, size_t a)
{
    return (gds_kjob_t *)((char *)c->pinned + bm->pin_jobs + a * bm->m * sizeof(gds_kjob_t));
}

static int memset_async(gds_codec_t *c, CUdeviceptr p, size_t bytes, CUstream s, gds_status_t *st)
{
    CUresult rc = c->cu->MemsetD8Async(p, 0, bytes, s);
    return rc == CUDA_SUCCESS ? 0 : cuda_fail(st, "cuMemsetD8Async", rc);
}

static int sync_stream(gds_codec_t *c, CUstream s, gds_status_t *st)
{
    CUresult rc = c->cu->StreamSynchronize(s);
    return rc == CUDA_SUCCESS ? 0 : cuda_fail(st, "the codec's work on the stream", rc);
}

/* nvCOMP decompression of the entries em (ne entries), max_out bytes per
 * entry at most, total_out in all. */
static int nvcomp_decompress(gds_codec_t *c, gds_step_kind_t kind, size_t ne, size_t max_out, size_t total_out,
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
    if (!run) {
        r = lz4    ? nv->lz4.DecompressGetTempSize(ne, max_out, ld, &temp, total_out, s)
            : zstd ? nv->zstd.DecompressGetTempSize(ne, max_out, zd, &temp, total_out, s)
                   : nv->deflate.DecompressGetTempSize(ne, max_out, dd, &temp, total_out, s);
        if (r != GDS_NVCOMP_SUCCESS) {
            gds_status_set(st, 0, "GPU codec: nvCOMP temp size for %zu chunks of %zu bytes: %s", ne, max_out,
                           nvcomp_text(c, r));
            return -1;
        }
        return entries_reserve(c, ne, temp, extra, s, em, extra_at, st);
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

/* The first GDS_HEAD_BYTES bytes of the nj jobs at dj, in pinned memory
 * (the stream synchronised). */
static int read_heads(gds_codec_t *c, const batch_mem_t *bm, CUdeviceptr dj, size_t nj, CUstream s,
                      unsigned char **heads, gds_status_t *st)
{
    unsigned n32 = (unsigned)nj;
    CUdeviceptr h = bm->heads;
    void *ah[] = {&dj, &n32, &h};
    *heads = (unsigned char *)c->pinned + bm->pin_heads;
    if (launch(c, K_GATHER_HEAD, blocks_for(nj * GDS_HEAD_BYTES), 1, s, ah, st) < 0)
        return -1;
    CUresult rc = c->cu->MemcpyDtoHAsync(*heads, bm->heads, nj * GDS_HEAD_BYTES, s);
    if (rc != CUDA_SUCCESS)
        return cuda_fail(st, "cuMemcpyDtoHAsync", rc);
    return sync_stream(c, s, st);
}

/* Blosc groups of a stage: chunks of LZ4 streams, of zstd streams, MEMCPYED ones. */
enum { BLOSC_LZ4, BLOSC_ZSTD, BLOSC_COPY, BLOSC_GROUPS };

/* The blosc stage (stage d) of the nj jobs built in pinned job array d:
 * headers read and checked on the host (chunks failing leave the batch),
 * the jobs regrouped by the compressor their header names, per group one
 * walk of the block-start tables and streams, one batched nvCOMP call and
 * the raw streams' copies, then every chunk unshuffled or copied into its
 * output. */
static int blosc_stage(decode_ctx_t *x, const batch_mem_t *bm, size_t d, size_t nj, const size_t *idx, bool *alive,
                       unsigned code, gds_status_t *st)
{
    gds_codec_t *c = x->c;
    CUstream s = x->s;
    gds_kjob_t *jobs = pinned_jobs(c, bm, d);
    CUdeviceptr dj;
    unsigned char *heads;
    if (upload_jobs(c, bm, d, nj, s, &dj, st) < 0 || read_heads(c, bm, dj, nj, s, &heads, st) < 0)
        return -1;
    gds_kjob_t *kept = malloc((nj + 1) * sizeof *kept);
    unsigned char *group = malloc(nj + 1);
    if (!kept || !group) {
        free(kept);
        free(group);
        gds_status_set(st, 12, "GPU codec: out of memory");
        return -1;
    }
    size_t count[BLOSC_GROUPS] = {0}, entries[BLOSC_GROUPS] = {0}, max_stream[BLOSC_GROUPS] = {0};
    size_t max_blocks[BLOSC_GROUPS] = {0}, total[BLOSC_GROUPS] = {0}, max_out = 0;
    for (size_t i = 0; i < nj; i++) {
        gds_kjob_t jb = jobs[i];
        gds_codec_blosc_t b;
        int r = gds_codec_parse_blosc(heads + i * GDS_HEAD_BYTES, jb.in_size, jb.out_size, &b);
        if (r < 0 || b.nentries > UINT32_MAX) {
            record_error(x->errors, idx[jb.chunk], code | (r < 0 ? (unsigned)b.reason : GDS_KERR_PARAM), b.detail);
            alive[jb.chunk] = false;
            group[i] = BLOSC_GROUPS;
            continue;
        }
        int g = b.memcpyed ? BLOSC_COPY : b.format == GDS_BLOSC_FORMAT_LZ4 ? BLOSC_LZ4 : BLOSC_ZSTD;
        group[i] = (unsigned char)g;
        jb.in_size = b.cbytes; /* c-blosc reads nothing past it */
        jb.p0 = b.typesize | (b.flags << 8);
        jb.p1 = (gds_u32)b.blocksize;
        jb.entry0 = entries[g];
        jb.nentries = (gds_u32)b.nentries;
        jobs[i] = jb;
        entries[g] += b.nentries;
        max_stream[g] = b.max_stream > max_stream[g] ? b.max_stream : max_stream[g];
        max_blocks[g] = b.nblocks > max_blocks[g] ? b.nblocks : max_blocks[g];
        total[g] += jb.out_size;
        max_out = jb.out_size > max_out ? jb.out_size : max_out;
        count[g]++;
    }
    size_t first[BLOSC_GROUPS], n = 0;
    for (int g = 0; g < BLOSC_GROUPS; g++) {
        first[g] = n;
        for (size_t i = 0; i < nj; i++)
            if (group[i] == g)
                kept[n++] = jobs[i];
    }
    memcpy(jobs, kept, n * sizeof *kept);
    free(kept);
    free(group);
    if (!n)
        return 0;
    if (upload_jobs(c, bm, d, n, s, &dj, st) < 0)
        return -1;
    CUdeviceptr scratch = c->dummies + DUMMY_SCRATCH;
    for (int g = BLOSC_LZ4; g <= BLOSC_ZSTD; g++) {
        if (!count[g])
            continue;
        bool zstd = g == BLOSC_ZSTD;
        const gds_nvcomp_alignments_t *al = zstd ? &c->zstd_dalign : &c->lz4_dalign;
        if (al->output > 1) { /* streams decode to any byte of a block */
            gds_status_set(st, 95, "GPU codec: nvCOMP (%s) needs %s outputs aligned to %zu bytes: blosc chunks take "
                                   "HDF5's CPU filter", c->nv->path, zstd ? "zstd" : "LZ4", al->output);
            return -1;
        }
        gds_step_kind_t kind = zstd ? GDS_STEP_ZSTD : GDS_STEP_LZ4;
        entries_mem_t em;
        if (nvcomp_decompress(c, kind, entries[g], max_stream[g], total[g], 0, &em, NULL, s, st, false) < 0)
            return -1;
        CUdeviceptr djg = dj + first[g] * sizeof(gds_kjob_t);
        CUdeviceptr din = c->dummies + (zstd ? DUMMY_ZSTD : DUMMY_LZ4);
        unsigned long long dlen = zstd ? sizeof dummy_zstd : sizeof dummy_lz4, ne = entries[g];
        unsigned z = zstd, ng = (unsigned)count[g];
        CUdeviceptr err = bm->err, det = bm->detail;
        void *aw[] = {&djg, &em.e, &err, &det, &code, &din, &dlen, &scratch, &z};
        void *ac[] = {&djg, &em.e, &ne, &err, &det, &code};
        void *ax[] = {&em.e, &ne};
        unsigned grid = ne < 65536 ? (unsigned)ne : 65536;
        if (launch(c, K_BLOSC_WALK, blocks_for(max_blocks[g]), ng, s, aw, st) < 0 ||
            nvcomp_decompress(c, kind, entries[g], max_stream[g], total[g], 0, &em, NULL, s, st, true) < 0 ||
            launch(c, K_NVCOMP_CHECK, blocks_for(ne), 1, s, ac, st) < 0 ||
            launch(c, K_ENTRY_COPY, grid, 1, s, ax, st) < 0)
            return -1;
    }
    CUdeviceptr err = bm->err;
    void *af[] = {&dj, &err};
    return launch(c, K_BLOSC_FINISH, parts_for(max_out), (unsigned)n, s, af, st);
}

/* Runs one sub-batch of a group: chunk indices idx[0..m). */
static int decode_batch(decode_ctx_t *x, const size_t *idx, size_t m, const size_t *slot, gds_status_t *st)
{
    gds_codec_t *c = x->c;
    CUstream s = x->s;
    batch_mem_t bm;
    size_t need = batch_bytes(slot, m, x->nstages, &bm);
    if (dbuf_reserve(c, &c->work, need, s, st) < 0)
        return -1;
    offset_batch(&bm, c->work.ptr);
    if (pinned_reserve(c, pinned_bytes(&bm), s, st) < 0)
        return -1;
    /* per chunk, per stage sizes; alive = not failed on the host */
    size_t ns = x->nsteps;
    size_t *in_sz = malloc(sizeof(size_t) * (m * (ns + 1) * 2 + 1));
    bool *alive = malloc(m + 1);
    if (!in_sz || !alive) {
        free(in_sz);
        free(alive);
        gds_status_set(st, 12, "GPU codec: out of memory");
        return -1;
    }
    size_t *out_sz = in_sz + m * (ns + 1);
    for (size_t j = 0; j < m; j++) {
        unsigned code = 0;
        uint64_t detail = 0;
        const gds_codec_chunk_t *ch = &x->chunks[idx[j]];
        alive[j] = chunk_sizes(x, ch->src_bytes, in_sz + j * (ns + 1), out_sz + j * (ns + 1), &code, &detail) == 0;
        if (!alive[j])
            record_error(x->errors, idx[j], code, detail);
    }
    int ret = -1;
    if (memset_async(c, bm.err, m * 4, s, st) < 0 || memset_async(c, bm.detail, m * 8, s, st) < 0)
        goto done;
    for (size_t d = 0; d < x->nstages; d++) {
        const stage_t *g = &x->stage[d];
        const gds_codec_step_t *step = g->step;
        gds_kjob_t *jobs = pinned_jobs(c, &bm, d);
        size_t nj = 0, max_in = 0, max_out = 0, total_out = 0;
        for (size_t j = 0; j < m; j++) {
            if (!alive[j])
                continue;
            const gds_codec_chunk_t *ch = &x->chunks[idx[j]];
            gds_kjob_t *jb = &jobs[nj++];
            memset(jb, 0, sizeof *jb);
            jb->in = loc_ptr(&bm, g->in, ch, j);
            jb->out = loc_ptr(&bm, g->out, ch, j);
            jb->mid = g->mid == LOC_SRC ? 0 : loc_ptr(&bm, g->mid, ch, j);
            jb->in_size = step ? in_sz[j * (ns + 1) + d] : x->p->chunk_bytes;
            jb->out_size = step ? out_sz[j * (ns + 1) + d] : x->p->chunk_bytes;
            jb->chunk = (gds_u32)j;
            jb->entry0 = nj - 1;
            jb->nentries = 1;
            if (step) {
                jb->p0 = step->elem;
                jb->p1 = step->block;
            }
            max_in = jb->in_size > max_in ? jb->in_size : max_in;
            max_out = jb->out_size > max_out ? jb->out_size : max_out;
            total_out += jb->out_size;
        }
        if (!nj)
            break;
        CUdeviceptr dj;
        unsigned n32 = (unsigned)nj;
        unsigned code = step ? step_code(step) : 0;
        CUdeviceptr none = 0;
        if (!step) { /* the final copy */
            if (upload_jobs(c, &bm, d, nj, s, &dj, st) < 0)
                goto done;
            void *a[] = {&dj, &none};
            if (launch(c, K_COPY, parts_for(max_out), n32, s, a, st) < 0)
                goto done;
            continue;
        }
        switch (step->kind) {
        case GDS_STEP_FLETCHER32: {
            if (!step->verify)
                break;
            if (upload_jobs(c, &bm, d, nj, s, &dj, st) < 0 || memset_async(c, bm.acc, nj * 3 * 8, s, st) < 0)
                goto done;
            unsigned trailer = 4;
            void *a1[] = {&dj, &none, &bm.acc, &trailer};
            void *a2[] = {&dj, &n32, &bm.acc, &bm.err, &bm.detail, &code};
            if (launch(c, K_FLETCHER_SUM, parts_for(max_in / 2), n32, s, a1, st) < 0 ||
                launch(c, K_FLETCHER_CHECK, blocks_for(nj), 1, s, a2, st) < 0)
                goto done;
            break;
        }
        case GDS_STEP_SHUFFLE: {
            unsigned T = step->elem;
            void *a[] = {&dj, &none, &T};
            if (upload_jobs(c, &bm, d, nj, s, &dj, st) < 0 || launch(c, K_UNSHUFFLE, parts_for(max_in), n32, s, a, st) < 0)
                goto done;
            break;
        }
        case GDS_STEP_BITSHUFFLE: {
            size_t block = step->block ? step->block : gds_bshuf_default_block(step->elem);
            for (size_t i = 0; i < nj; i++) {
                jobs[i].p1 = (gds_u32)block;
                jobs[i].mid = 0;
            }
            void *a[] = {&dj, &none, &bm.err};
            if (upload_jobs(c, &bm, d, nj, s, &dj, st) < 0 ||
                launch(c, K_BITUNSHUFFLE, parts_for(max_out / 8), n32, s, a, st) < 0)
                goto done;
            break;
        }
        case GDS_STEP_DEFLATE:
        case GDS_STEP_ZSTD: {
            bool deflate = step->kind == GDS_STEP_DEFLATE;
            entries_mem_t em;
            if (nvcomp_decompress(c, step->kind, nj, max_out, total_out, 0, &em, NULL, s, st, false) < 0 ||
                upload_jobs(c, &bm, d, nj, s, &dj, st) < 0)
                goto done;
            CUdeviceptr din = c->dummies + (deflate ? DUMMY_DEFLATE : DUMMY_ZSTD);
            unsigned long long dlen = deflate ? sizeof dummy_deflate : sizeof dummy_zstd;
            CUdeviceptr scratch = c->dummies + DUMMY_SCRATCH;
            unsigned long long ne = nj;
            if (deflate) {
                void *a[] = {&dj, &em.e, &bm.err, &bm.detail, &code, &din, &dlen, &scratch};
                if (launch(c, K_ZLIB_PREP, parts_for(max_in), n32, s, a, st) < 0)
                    goto done;
            }
            else {
                void *a[] = {&dj, &n32, &em.e, &bm.err, &bm.detail, &code, &din, &dlen, &scratch};
                if (launch(c, K_ZSTD_PREP, blocks_for(nj), 1, s, a, st) < 0)
                    goto done;
            }
            void *ac[] = {&dj, &em.e, &ne, &bm.err, &bm.detail, &code};
            if (nvcomp_decompress(c, step->kind, nj, max_out, total_out, 0, &em, NULL, s, st, true) < 0 ||
                launch(c, K_NVCOMP_CHECK, blocks_for(nj), 1, s, ac, st) < 0)
                goto done;
            if (deflate) {
                unsigned which = 0;
                void *a1[] = {&dj, &bm.acc, &which};
                void *a2[] = {&dj, &n32, &bm.acc, &bm.err, &bm.detail, &code};
                if (memset_async(c, bm.acc, nj * 2 * 8, s, st) < 0 ||
                    launch(c, K_ADLER_SUM, parts_for(max_out), n32, s, a1, st) < 0 ||
                    launch(c, K_ADLER_CHECK, blocks_for(nj), 1, s, a2, st) < 0)
                    goto done;
            }
            break;
        }
        case GDS_STEP_BLOSC:
            if (blosc_stage(x, &bm, d, nj, idx, alive, code, st) < 0)
                goto done;
            break;
        case GDS_STEP_LZ4:
        case GDS_STEP_BSHUF_LZ4:
        case GDS_STEP_BSHUF_ZSTD: {
            bool lz4 = step->kind == GDS_STEP_LZ4;
            /* the chunks' headers, read on the host */
            unsigned char *heads;
            if (upload_jobs(c, &bm, d, nj, s, &dj, st) < 0 || read_heads(c, &bm, dj, nj, s, &heads, st) < 0)
                goto done;
            /* plan the blocks; chunks whose header is wrong leave the batch */
            size_t ne = 0, kept = 0, max_block = 0, total = 0;
            for (size_t i = 0; i < nj; i++) {
                gds_kjob_t jb = jobs[i];
                gds_codec_blocks_t b;
                int r = lz4 ? gds_codec_parse_lz4h5(heads + i * GDS_HEAD_BYTES, jb.in_size, jb.out_size, &b)
                            : gds_codec_parse_bshuf(heads + i * GDS_HEAD_BYTES, jb.in_size, jb.out_size, step->elem,
                                                    &b);
                if (r < 0 || b.nblocks > UINT32_MAX || b.block > UINT32_MAX) {
                    record_error(x->errors, idx[jb.chunk], code | (r < 0 ? (unsigned)b.reason : GDS_KERR_PARAM),
                                 b.detail);
                    alive[jb.chunk] = false;
                    continue;
                }
                jb.entry0 = ne;
                jb.nentries = (gds_u32)b.nblocks;
                jb.p0 = lz4 ? 1 : step->elem;
                jb.p1 = (gds_u32)b.block;
                size_t bb = lz4 ? b.block : b.block * step->elem;
                max_block = bb > max_block ? bb : max_block;
                total += jb.out_size;
                ne += b.nblocks;
                jobs[kept++] = jb;
            }
            nj = kept;
            n32 = (unsigned)nj;
            if (!nj)
                break;
            entries_mem_t em;
            CUdeviceptr mid_base = 0;
            if (nvcomp_decompress(c, step->kind, ne, max_block, total, 0, &em, &mid_base, s, st, false) < 0 ||
                upload_jobs(c, &bm, d, nj, s, &dj, st) < 0)
                goto done;
            CUdeviceptr din = c->dummies + (step->kind == GDS_STEP_BSHUF_ZSTD ? DUMMY_ZSTD : DUMMY_LZ4);
            unsigned long long dlen = step->kind == GDS_STEP_BSHUF_ZSTD ? sizeof dummy_zstd : sizeof dummy_lz4;
            CUdeviceptr scratch = c->dummies + DUMMY_SCRATCH;
            unsigned long long ne64 = ne;
            if (lz4) {
                void *a[] = {&dj, &n32, &em.e, &bm.err, &bm.detail, &code, &din, &dlen, &scratch};
                if (launch(c, K_LZ4H5_WALK, blocks_for(nj), 1, s, a, st) < 0)
                    goto done;
            }
            else {
                unsigned zstd = step->kind == GDS_STEP_BSHUF_ZSTD;
                void *a[] = {&dj, &n32, &em.e, &bm.tail, &bm.err, &bm.detail, &code, &din, &dlen, &scratch, &zstd};
                if (launch(c, K_BSHUF_WALK, blocks_for(nj), 1, s, a, st) < 0)
                    goto done;
            }
            void *ac[] = {&dj, &em.e, &ne64, &bm.err, &bm.detail, &code};
            if (nvcomp_decompress(c, step->kind, ne, max_block, total, 0, &em, NULL, s, st, true) < 0 ||
                launch(c, K_NVCOMP_CHECK, blocks_for(ne), 1, s, ac, st) < 0)
                goto done;
            if (lz4) {
                void *a[] = {&em.e, &ne64};
                unsigned grid = ne < 65536 ? (unsigned)ne : 65536;
                if (launch(c, K_ENTRY_COPY, grid, 1, s, a, st) < 0)
                    goto done;
            }
            else {
                void *a[] = {&dj, &bm.tail, &bm.err};
                if (launch(c, K_BITUNSHUFFLE, parts_for(max_out / 8), n32, s, a, st) < 0)
                    goto done;
            }
            break;
        }
        }
    }
    /* results */
    {
        CUresult rc;
        uint32_t *err = (uint32_t *)((char *)c->pinned + bm.pin_err);
        uint64_t *detail = (uint64_t *)((char *)c->pinned + bm.pin_detail);
        if ((rc = c->cu->MemcpyDtoHAsync(err, bm.err, m * 4, s)) != CUDA_SUCCESS ||
            (rc = c->cu->MemcpyDtoHAsync(detail, bm.detail, m * 8, s)) != CUDA_SUCCESS) {
            cuda_fail(st, "cuMemcpyDtoHAsync", rc);
            goto done;
        }
        if (sync_stream(c, s, st) < 0)
            goto done;
        for (size_t j = 0; j < m; j++)
            if (alive[j] && err[j])
                record_error(x->errors, idx[j], err[j], detail[j]);
    }
    ret = 0;
done:
    free(in_sz);
    free(alive);
    return ret;
}

/* Bytes per chunk each arena needs for the group (the largest stored size: max_stored). */
static void decode_slots(const decode_ctx_t *x, size_t max_stored, size_t *slot)
{
    /* the sizes each stage sees, for the largest chunk (fletcher: 4 less) */
    size_t sizes_in[GDS_CODEC_MAX_FILTERS + 1], sizes_out[GDS_CODEC_MAX_FILTERS + 1];
    size_t cur = max_stored;
    for (size_t d = 0; d < x->nsteps; d++) {
        size_t k = x->nsteps - 1 - d;
        const gds_codec_step_t *s = &x->steps[k];
        sizes_in[d] = cur;
        if (s->kind == GDS_STEP_FLETCHER32)
            cur = cur >= 4 ? cur - 4 : 0;
        else if (gds_codec_step_compresses(s->kind))
            cur = x->forward[k];
        sizes_out[d] = cur;
    }
    for (int a = 0; a < NARENAS; a++)
        slot[a] = 0;
    for (size_t d = 0; d < x->nstages; d++) {
        const stage_t *g = &x->stage[d];
        size_t in = g->step ? sizes_in[d] : x->p->chunk_bytes, out = g->step ? sizes_out[d] : x->p->chunk_bytes;
        size_t big = in > out ? in : out;
        if (g->out >= 0)
            slot[g->out] = big > slot[g->out] ? big : slot[g->out];
        if (g->mid >= 0)
            slot[g->mid] = big > slot[g->mid] ? big : slot[g->mid];
    }
    for (int a = 0; a < NARENAS; a++)
        slot[a] = slot[a] ? align_up(slot[a], SLOT_ALIGN) : 0;
}

static bool debug_on(void)
{
    const char *e = getenv("H5GDS_CODEC_DEBUG");
    return e && *e && strcmp(e, "0") != 0;
}

/* Chunks per sub-batch: arenas, nvCOMP's arrays and temporary memory of the
 * group's compressor (its blocks as the filter's parameters give them) within
 * the codec's budget. */
static size_t decode_batch_size(gds_codec_t *c, const decode_ctx_t *x, const size_t *slot, size_t n)
{
    size_t per = 256;
    for (int a = 0; a < NARENAS; a++)
        per += slot[a];
    const gds_codec_step_t *comp = NULL;
    size_t expect = 0;
    for (size_t k = 0; k < x->nsteps; k++)
        if (gds_codec_step_compresses(x->steps[k].kind)) {
            comp = &x->steps[k];
            expect = x->forward[k];
        }
    size_t block = expect, nblocks = 1;
    if (comp && comp->kind == GDS_STEP_LZ4 && comp->block && comp->block < expect)
        block = comp->block;
    else if (comp && comp->kind == GDS_STEP_BLOSC) /* blocks known from the headers only: blosc's small ones */
        block = expect < 16384 ? expect : 16384;
    else if (comp && (comp->kind == GDS_STEP_BSHUF_LZ4 || comp->kind == GDS_STEP_BSHUF_ZSTD))
        block = (comp->block ? comp->block : gds_bshuf_default_block(comp->elem)) * comp->elem;
    if (comp && block)
        nblocks = (expect + block - 1) / block;
    size_t m = n < MAX_BATCH ? n : MAX_BATCH;
    for (;;) {
        size_t temp = 0;
        if (comp) {
            gds_nvcomp_deflate_dopts_t dd = {0};
            gds_nvcomp_lz4_dopts_t ld = {0};
            gds_nvcomp_zstd_dopts_t zd = {0};
            size_t ne = m * nblocks;
            if (step_lz4(comp->kind))
                c->nv->lz4.DecompressGetTempSize(ne, block, ld, &temp, m * expect, NULL);
            else if (step_zstd(comp->kind) || comp->kind == GDS_STEP_BLOSC) /* blosc: zstd's, the larger */
                c->nv->zstd.DecompressGetTempSize(ne, block, zd, &temp, m * expect, NULL);
            else
                c->nv->deflate.DecompressGetTempSize(ne, block, dd, &temp, m * expect, NULL);
            temp += ne * (6 * 8 + sizeof(gds_kentry_t));
        }
        if (m * per + temp <= c->budget || m == 1) {
            if (debug_on())
                fprintf(stderr, "h5gds codec: decode: %zu chunks in batches of %zu: arenas %zu B/chunk, nvCOMP "
                                "%zu B\n", n, m, per, temp);
            return m;
        }
        m = (m + 1) / 2;
    }
}

static int cmp_mask(const void *a, const void *b, void *chunks)
{
    const gds_codec_chunk_t *ch = chunks;
    unsigned ma = ch[*(const size_t *)a].filter_mask, mb = ch[*(const size_t *)b].filter_mask;
    size_t ia = *(const size_t *)a, ib = *(const size_t *)b;
    return ma != mb ? (ma < mb ? -1 : 1) : (ia < ib ? -1 : ia > ib);
}

int gds_codec_decode(gds_codec_t *c, const gds_codec_pipeline_t *p, const gds_codec_chunk_t *chunks, size_t n,
                     CUstream stream, size_t *bad, gds_status_t *st)
{
    if (bad)
        *bad = 0;
    if (!c || !p || (n && !chunks)) {
        gds_status_set(st, 22, "GPU codec: decode without a codec, pipeline or chunks");
        return -1;
    }
    char why[300];
    if (!gds_codec_can_decode(p, why, sizeof why)) {
        gds_status_set(st, 95, "GPU codec: cannot decode: %s", why);
        return -1;
    }
    if (!n)
        return 0;
    size_t *idx = malloc(n * sizeof *idx);
    if (!idx) {
        gds_status_set(st, 12, "GPU codec: out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp_mask, (void *)chunks);

    pthread_mutex_lock(&c->lock);
    CUresult rc;
    void *prev = gds_cuda_enter(c->ctx, &rc);
    int ret = 0;
    error_list_t errors = {SIZE_MAX, 0, 0};
    if (rc != CUDA_SUCCESS)
        ret = cuda_fail(st, "making the codec's context current", rc);
    for (size_t g0 = 0; ret == 0 && g0 < n;) {
        unsigned mask = chunks[idx[g0]].filter_mask;
        size_t g1 = g0, max_stored = 0;
        while (g1 < n && chunks[idx[g1]].filter_mask == mask) {
            size_t b = chunks[idx[g1]].src_bytes;
            max_stored = b > max_stored ? b : max_stored;
            g1++;
        }
        gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
        size_t forward[GDS_CODEC_MAX_FILTERS + 1];
        decode_ctx_t x = {.c = c, .p = p, .chunks = chunks, .s = stream, .steps = steps, .forward = forward,
                          .errors = &errors};
        if (gds_codec_plan_steps(p, mask, false, steps, &x.nsteps, why, sizeof why) < 0) {
            gds_status_set(st, 95, "GPU codec: cannot decode chunks of filter mask 0x%x: %s", mask, why);
            ret = -1;
            break;
        }
        forward[0] = p->chunk_bytes;
        for (size_t k = 0; k < x.nsteps; k++)
            forward[k + 1] = forward[k] == GDS_SIZE_UNKNOWN ? GDS_SIZE_UNKNOWN
                                                             : gds_codec_step_forward(&steps[k], forward[k]);
        decode_stages(&x);
        size_t slot[NARENAS];
        decode_slots(&x, max_stored, slot);
        size_t m = decode_batch_size(c, &x, slot, g1 - g0);
        for (size_t b = g0; ret == 0 && b < g1; b += m)
            ret = decode_batch(&x, idx + b, b + m <= g1 ? m : g1 - b, slot, st);
        g0 = g1;
    }
    if (ret == 0 && errors.first != SIZE_MAX) {
        char text[300];
        gds_codec_error_text(p, errors.code, errors.detail, text, sizeof text);
        /* 95: a chunk that is valid but has no GPU decoder (HDF5's CPU filter decodes it) */
        gds_status_set(st, (errors.code & 0xff) == GDS_KERR_UNSUPPORTED ? 95 : 74, "GPU codec: chunk %zu: %s",
                       errors.first, text);
        if (bad)
            *bad = errors.first;
        ret = -1;
    }
    else if (ret < 0 && bad)
        *bad = 0;
    gds_cuda_restore(prev);
    pthread_mutex_unlock(&c->lock);
    free(idx);
    return ret;
}

/* ---- encoding ---- */

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


/* nvCOMP's largest output for an input block, and its temp memory for
 * `ne` blocks of `max_in` (total_in in all). */
static int compress_sizes(gds_codec_t *c, const gds_codec_step_t *s, size_t ne, size_t max_in, size_t total_in,
                          CUstream stream, size_t *max_out, size_t *temp, gds_status_t *st)
{
    gds_nvcomp_deflate_copts_t dc;
    gds_nvcomp_lz4_copts_t lc;
    gds_nvcomp_zstd_copts_t zc;
    compress_opts(s, &dc, &lc, &zc);
    const gds_nvcomp_api_t *nv = c->nv;
    gds_nvcomp_status_t r;
    if (step_lz4(s->kind))
        r = nv->lz4.CompressGetMaxOutputChunkSize(max_in, lc, max_out);
    else if (step_zstd(s->kind))
        r = nv->zstd.CompressGetMaxOutputChunkSize(max_in, zc, max_out);
    else
        r = nv->deflate.CompressGetMaxOutputChunkSize(max_in, dc, max_out);
    if (r == GDS_NVCOMP_SUCCESS && temp) {
        if (step_lz4(s->kind))
            r = nv->lz4.CompressGetTempSize(ne, max_in, lc, temp, total_in, stream);
        else if (step_zstd(s->kind))
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

static int nvcomp_compress(gds_codec_t *c, const gds_codec_step_t *s, size_t ne, size_t max_in, entries_mem_t *em,
                           CUstream stream, gds_status_t *st)
{
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
        step_lz4(s->kind)    ? nv->lz4.CompressAsync(in_ptrs, in_bytes, max_in, ne, temp, em->temp_bytes, out_ptrs,
                                                     out_actual, lc, status, stream)
        : step_zstd(s->kind) ? nv->zstd.CompressAsync(in_ptrs, in_bytes, max_in, ne, temp, em->temp_bytes, out_ptrs,
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

typedef struct encode_plan {
    const gds_codec_step_t *steps;
    size_t nsteps;
    stage_t stage[2 * GDS_CODEC_MAX_FILTERS + 1];
    size_t nstages;
    size_t in_size[2 * GDS_CODEC_MAX_FILTERS + 1]; /* host-known input size of each stage (0: after the compressor) */
    size_t slot[NARENAS];
    size_t max_encoded;
    /* the compressor's blocks */
    size_t nblocks, block_in;  /* blocks per chunk, bytes of the largest */
    size_t block_out;          /* nvCOMP's slot per block */
    const gds_codec_step_t *comp; /* the compressor (NULL: none, or deflate level 0) */
    size_t comp_in;            /* bytes entering it */
} encode_plan_t;

/* Blocks per chunk of the compressor step s for `in` bytes: (count, bytes of a full block). */
static void encode_blocks(const gds_codec_step_t *s, size_t in, size_t *nblocks, size_t *block_in)
{
    if (s->kind == GDS_STEP_LZ4) {
        size_t bs = gds_lz4h5_encode_block(s, in);
        *nblocks = (in + bs - 1) / bs;
        *block_in = bs;
    }
    else if (s->kind == GDS_STEP_BSHUF_LZ4 || s->kind == GDS_STEP_BSHUF_ZSTD) {
        size_t bs = s->block ? s->block : gds_bshuf_default_block(s->elem);
        size_t full, last, left;
        gds_bshuf_layout(in / s->elem, bs, &full, &last, &left);
        *nblocks = full + (last ? 1 : 0);
        *block_in = (full ? bs : last) * s->elem;
    }
    else {
        *nblocks = 1;
        *block_in = in;
    }
}

static int encode_plan(gds_codec_t *c, const gds_codec_pipeline_t *p, const void *const *src, size_t n,
                       const gds_codec_step_t *steps, size_t ns, encode_plan_t *e, CUstream stream, gds_status_t *st)
{
    memset(e, 0, sizeof *e);
    e->steps = steps;
    e->nsteps = ns;
    e->max_encoded = gds_codec_max_encoded_bytes(p);
    int comp = -1;
    for (size_t k = 0; k < ns; k++)
        if (gds_codec_step_compresses(steps[k].kind))
            comp = (int)k;
    for (size_t k = (size_t)comp + 1; comp >= 0 && k < ns; k++)
        if (steps[k].kind != GDS_STEP_FLETCHER32) {
            gds_status_set(st, 95, "GPU codec: cannot encode: filter %u (%s) after the compressing filter", steps[k].pos,
                           gds_codec_filter_name(p->filter[steps[k].pos].id));
            return -1;
        }
    int loc = LOC_SRC;
    size_t size = p->chunk_bytes;
    for (size_t k = 0; k < ns; k++) {
        const gds_codec_step_t *s = &steps[k];
        bool later_moving = false;
        for (size_t l = k + 1; l < ns; l++)
            later_moving |= steps[l].kind != GDS_STEP_FLETCHER32;
        bool zstd_misaligned = false;
        if (step_zstd(s->kind) && s->kind == GDS_STEP_ZSTD && loc == LOC_SRC && c->zstd_calign.input > 1)
            for (size_t i = 0; i < n; i++)
                zstd_misaligned |= (uintptr_t)src[i] % c->zstd_calign.input != 0;
        if ((s->kind == GDS_STEP_FLETCHER32 && loc == LOC_SRC) || zstd_misaligned) {
            /* the data must move first: in place on the source is not allowed, or
             * nvCOMP wants it aligned */
            stage_t *g = &e->stage[e->nstages];
            int busy[1] = {LOC_SRC};
            g->step = NULL;
            g->in = loc;
            g->out = (s->kind == GDS_STEP_FLETCHER32 && !later_moving) ? LOC_DST : free_arena(busy, 1);
            g->mid = g->mid2 = LOC_SRC;
            e->in_size[e->nstages++] = size;
            loc = g->out;
        }
        stage_t *g = &e->stage[e->nstages];
        g->step = s;
        g->in = loc;
        g->mid = g->mid2 = LOC_SRC;
        e->in_size[e->nstages++] = size;
        if (s->kind == GDS_STEP_FLETCHER32)
            g->out = loc;
        else {
            int busy[2] = {loc, LOC_DST};
            g->out = later_moving ? free_arena(busy, 1) : LOC_DST;
            if (s->kind == GDS_STEP_BSHUF_LZ4 || s->kind == GDS_STEP_BSHUF_ZSTD) {
                busy[1] = g->out;
                g->mid = free_arena(busy, 2);
            }
        }
        if (gds_codec_step_compresses(s->kind)) {
            encode_blocks(s, size, &e->nblocks, &e->block_in);
            bool nvcomp = !(s->kind == GDS_STEP_DEFLATE && s->level == 0);
            if (nvcomp && compress_sizes(c, s, e->nblocks, e->block_in, size, stream, &e->block_out, NULL, st) < 0)
                return -1;
            e->comp = nvcomp ? s : NULL;
            e->comp_in = size;
        }
        loc = g->out;
        size = size == GDS_SIZE_UNKNOWN || gds_codec_step_compresses(s->kind) ? GDS_SIZE_UNKNOWN
                                                                               : gds_codec_step_forward(s, size);
    }
    if (loc != LOC_DST) {
        stage_t *g = &e->stage[e->nstages];
        g->step = NULL;
        g->in = loc;
        g->out = LOC_DST;
        g->mid = g->mid2 = LOC_SRC;
        e->in_size[e->nstages++] = p->chunk_bytes;
    }
    for (size_t d = 0; d < e->nstages; d++) {
        const stage_t *g = &e->stage[d];
        if (g->out >= 0)
            e->slot[g->out] = align_up(e->max_encoded, SLOT_ALIGN);
        if (g->mid >= 0)
            e->slot[g->mid] = align_up(e->in_size[d], SLOT_ALIGN);
    }
    return 0;
}

/* Chunks per sub-batch: arenas, nvCOMP's output slots, arrays and
 * temporary memory within the codec's budget. */
static size_t encode_batch_size(gds_codec_t *c, const encode_plan_t *e, size_t n, CUstream stream)
{
    size_t per = 256;
    for (int a = 0; a < NARENAS; a++)
        per += e->slot[a];
    size_t m = n < MAX_BATCH ? n : MAX_BATCH;
    for (;;) {
        size_t temp = 0, bo = 0;
        gds_status_t ignored;
        if (e->comp) {
            size_t ne = m * e->nblocks;
            if (compress_sizes(c, e->comp, ne, e->block_in, m * e->comp_in, stream, &bo, &temp, &ignored) < 0)
                temp = 0;
            temp += ne * (e->block_out + 6 * 8 + sizeof(gds_kentry_t));
        }
        if (m * per + temp <= c->budget || m == 1) {
            if (debug_on())
                fprintf(stderr, "h5gds codec: encode: %zu chunks in batches of %zu: arenas %zu B/chunk, nvCOMP %zu B\n",
                        n, m, per, temp);
            return m;
        }
        m = (m + 1) / 2;
    }
}

static int encode_batch(gds_codec_t *c, const gds_codec_pipeline_t *p, const encode_plan_t *e, const void *const *src,
                        void *const *dst, size_t i0, size_t m, size_t *out_bytes, unsigned *out_mask,
                        error_list_t *errors, CUstream s, gds_status_t *st)
{
    batch_mem_t bm;
    size_t need = batch_bytes(e->slot, m, e->nstages, &bm);
    if (dbuf_reserve(c, &c->work, need, s, st) < 0)
        return -1;
    offset_batch(&bm, c->work.ptr);
    if (pinned_reserve(c, pinned_bytes(&bm), s, st) < 0)
        return -1;
    uint64_t *dsize_h = (uint64_t *)((char *)c->pinned + bm.pin_dsize);
    for (size_t j = 0; j < m; j++)
        dsize_h[j] = p->chunk_bytes;
    CUresult rc;
    if ((rc = c->cu->MemcpyHtoDAsync(bm.dsize, dsize_h, m * 8, s)) != CUDA_SUCCESS)
        return cuda_fail(st, "cuMemcpyHtoDAsync", rc);
    if (memset_async(c, bm.err, m * 4, s, st) < 0 || memset_async(c, bm.detail, m * 8, s, st) < 0 ||
        memset_async(c, bm.mask, m * 4, s, st) < 0)
        return -1;
    unsigned n32 = (unsigned)m;
    CUdeviceptr none = 0;
    for (size_t d = 0; d < e->nstages; d++) {
        const stage_t *g = &e->stage[d];
        const gds_codec_step_t *step = g->step;
        gds_kjob_t *jobs = pinned_jobs(c, &bm, d);
        size_t in_size = e->in_size[d];
        bool nvcomp = step && gds_codec_step_compresses(step->kind) &&
                      !(step->kind == GDS_STEP_DEFLATE && step->level == 0);
        /* the compressor's entries and output slots */
        entries_mem_t em;
        memset(&em, 0, sizeof em);
        CUdeviceptr comp_base = 0;
        size_t ne = step && gds_codec_step_compresses(step->kind) ? m * e->nblocks : 0;
        if (nvcomp) {
            size_t bo, temp;
            if (compress_sizes(c, step, ne, e->block_in, in_size * m, s, &bo, &temp, st) < 0 ||
                entries_reserve(c, ne, temp, ne * e->block_out, s, &em, &comp_base, st) < 0)
                return -1;
        }
        for (size_t j = 0; j < m; j++) {
            gds_codec_chunk_t ch = {src[i0 + j], 0, 0, dst[i0 + j]};
            gds_kjob_t *jb = &jobs[j];
            memset(jb, 0, sizeof *jb);
            jb->in = loc_ptr(&bm, g->in, &ch, j);
            jb->out = loc_ptr(&bm, g->out, &ch, j);
            jb->mid = g->mid == LOC_SRC ? 0 : loc_ptr(&bm, g->mid, &ch, j);
            jb->in_size = in_size == GDS_SIZE_UNKNOWN ? 0 : in_size;
            jb->chunk = (gds_u32)j;
            jb->entry0 = j * (step && gds_codec_step_compresses(step->kind) ? e->nblocks : 1);
            jb->nentries = step && gds_codec_step_compresses(step->kind) ? (gds_u32)e->nblocks : 1;
            if (step) {
                jb->p0 = step->elem ? step->elem : 1;
                jb->p1 = step->block;
                if (step->kind == GDS_STEP_LZ4) {
                    jb->p0 = 1;
                    jb->p1 = (gds_u32)e->block_in;
                }
                else if (step->kind == GDS_STEP_BITSHUFFLE || step->kind == GDS_STEP_BSHUF_LZ4 ||
                         step->kind == GDS_STEP_BSHUF_ZSTD)
                    jb->p1 = (gds_u32)(step->block ? step->block : gds_bshuf_default_block(step->elem));
                else if (step->kind == GDS_STEP_DEFLATE || step->kind == GDS_STEP_ZSTD) {
                    jb->p0 = 1;
                    jb->p1 = (gds_u32)in_size;
                    jb->mid = comp_base + j * e->block_out;
                }
            }
        }
        CUdeviceptr dj;
        if (upload_jobs(c, &bm, d, m, s, &dj, st) < 0)
            return -1;
        unsigned code = step ? step_code(step) : 0;
        unsigned bit = step ? 1u << step->pos : 0;
        unsigned optional = step && step->optional;
        size_t big = in_size == GDS_SIZE_UNKNOWN ? e->max_encoded : in_size;
        if (!step) {
            void *a[] = {&dj, &none};
            if (launch(c, K_COPY, parts_for(big), n32, s, a, st) < 0)
                return -1;
            continue;
        }
        switch (step->kind) {
        case GDS_STEP_FLETCHER32: {
            unsigned trailer = 0;
            void *a1[] = {&dj, &bm.dsize, &bm.acc, &trailer};
            void *a2[] = {&dj, &n32, &bm.dsize, &bm.acc};
            if (memset_async(c, bm.acc, m * 3 * 8, s, st) < 0 ||
                launch(c, K_FLETCHER_SUM, parts_for(big / 2), n32, s, a1, st) < 0 ||
                launch(c, K_FLETCHER_PUT, blocks_for(m), 1, s, a2, st) < 0)
                return -1;
            break;
        }
        case GDS_STEP_SHUFFLE: {
            unsigned T = step->elem;
            void *a[] = {&dj, &none, &T};
            if (launch(c, K_SHUFFLE, parts_for(big), n32, s, a, st) < 0)
                return -1;
            break;
        }
        case GDS_STEP_BITSHUFFLE: {
            void *a[] = {&dj};
            if (launch(c, K_BITSHUFFLE, parts_for(big / 8), n32, s, a, st) < 0)
                return -1;
            break;
        }
        case GDS_STEP_BLOSC: /* never: gds_codec_plan_steps refuses to encode blosc */
            gds_status_set(st, 95, "GPU codec: no GPU encoder for blosc");
            return -1;
        case GDS_STEP_DEFLATE:
        case GDS_STEP_ZSTD:
        case GDS_STEP_LZ4:
        case GDS_STEP_BSHUF_LZ4:
        case GDS_STEP_BSHUF_ZSTD: {
            bool bshuf = step->kind == GDS_STEP_BSHUF_LZ4 || step->kind == GDS_STEP_BSHUF_ZSTD;
            if (bshuf) {
                void *a[] = {&dj};
                if (launch(c, K_BITSHUFFLE, parts_for(big / 8), n32, s, a, st) < 0)
                    return -1;
            }
            if (step->kind == GDS_STEP_DEFLATE) {
                unsigned which = 1;
                void *a[] = {&dj, &bm.acc, &which};
                if (memset_async(c, bm.acc, m * 2 * 8, s, st) < 0 ||
                    launch(c, K_ADLER_SUM, parts_for(big), n32, s, a, st) < 0)
                    return -1;
            }
            if (nvcomp) {
                unsigned long long slot = e->block_out, base = comp_base;
                unsigned bs32 = bshuf;
                void *a[] = {&dj, &n32, &em.e, &slot, &base, &bs32};
                if (launch(c, K_BLOCKS_PLAN, blocks_for(m), 1, s, a, st) < 0 ||
                    nvcomp_compress(c, step, ne, e->block_in, &em, s, st) < 0)
                    return -1;
            }
            unsigned long long ne64 = ne;
            unsigned grid = ne < 65536 ? (unsigned)ne : 65536;
            if (step->kind == GDS_STEP_DEFLATE) {
                unsigned flg = gds_codec_zlib_flg(step->level), stored_only = !nvcomp;
                void *a[] = {&dj, &em.e, &bm.dsize, &bm.mask, &bm.acc, &bm.err, &bm.detail, &code, &flg, &bit,
                             &optional, &stored_only};
                if (launch(c, K_ZLIB_ASSEMBLE, parts_for(e->max_encoded), n32, s, a, st) < 0)
                    return -1;
            }
            else if (step->kind == GDS_STEP_ZSTD) {
                void *a[] = {&dj, &em.e, &bm.dsize, &bm.mask, &bm.err, &bm.detail, &code, &bit, &optional};
                if (launch(c, K_ZSTD_ASSEMBLE, parts_for(e->max_encoded), n32, s, a, st) < 0)
                    return -1;
            }
            else if (step->kind == GDS_STEP_LZ4) {
                void *a[] = {&dj, &n32, &em.e, &bm.dsize, &bm.mask, &bm.err, &bm.detail, &code, &bit, &optional};
                void *b[] = {&em.e, &ne64};
                if (launch(c, K_LZ4H5_LAYOUT, blocks_for(m), 1, s, a, st) < 0 ||
                    launch(c, K_ENTRY_COPY, grid, 1, s, b, st) < 0)
                    return -1;
            }
            else {
                unsigned long long cap = e->max_encoded;
                void *a[] = {&dj,  &n32,  &em.e, &bm.dsize, &bm.mask, &bm.err, &bm.detail, &code,
                             &bit, &optional, &cap};
                void *b[] = {&em.e, &ne64};
                if (launch(c, K_BSHUF_LAYOUT, blocks_for(m), 1, s, a, st) < 0 ||
                    launch(c, K_ENTRY_COPY, grid, 1, s, b, st) < 0)
                    return -1;
            }
            break;
        }
        }
    }
    uint32_t *err = (uint32_t *)((char *)c->pinned + bm.pin_err);
    uint64_t *detail = (uint64_t *)((char *)c->pinned + bm.pin_detail);
    uint32_t *mask = (uint32_t *)((char *)c->pinned + bm.pin_mask);
    if ((rc = c->cu->MemcpyDtoHAsync(err, bm.err, m * 4, s)) != CUDA_SUCCESS ||
        (rc = c->cu->MemcpyDtoHAsync(detail, bm.detail, m * 8, s)) != CUDA_SUCCESS ||
        (rc = c->cu->MemcpyDtoHAsync(mask, bm.mask, m * 4, s)) != CUDA_SUCCESS ||
        (rc = c->cu->MemcpyDtoHAsync(dsize_h, bm.dsize, m * 8, s)) != CUDA_SUCCESS)
        return cuda_fail(st, "cuMemcpyDtoHAsync", rc);
    if (sync_stream(c, s, st) < 0)
        return -1;
    for (size_t j = 0; j < m; j++) {
        out_bytes[i0 + j] = dsize_h[j];
        out_mask[i0 + j] = mask[j];
        if (err[j])
            record_error(errors, i0 + j, err[j], detail[j]);
        else if (dsize_h[j] > e->max_encoded)
            record_error(errors, i0 + j, GDS_KERR_ENCODE, dsize_h[j]);
    }
    return 0;
}

int gds_codec_encode(gds_codec_t *c, const gds_codec_pipeline_t *p, const void *const *src, void *const *dst,
                     size_t *out_bytes, unsigned *out_mask, size_t n, CUstream stream, gds_status_t *st)
{
    if (!c || !p || (n && (!src || !dst || !out_bytes || !out_mask))) {
        gds_status_set(st, 22, "GPU codec: encode without a codec, pipeline or buffers");
        return -1;
    }
    char why[300];
    gds_codec_step_t steps[GDS_CODEC_MAX_FILTERS];
    size_t ns = 0;
    if (gds_codec_plan_steps(p, 0, true, steps, &ns, why, sizeof why) < 0) {
        gds_status_set(st, 95, "GPU codec: cannot encode: %s", why);
        return -1;
    }
    if (!n)
        return 0;
    pthread_mutex_lock(&c->lock);
    CUresult rc;
    void *prev = gds_cuda_enter(c->ctx, &rc);
    int ret = 0;
    error_list_t errors = {SIZE_MAX, 0, 0};
    encode_plan_t e;
    if (rc != CUDA_SUCCESS)
        ret = cuda_fail(st, "making the codec's context current", rc);
    else
        ret = encode_plan(c, p, src, n, steps, ns, &e, stream, st);
    if (ret == 0) {
        size_t m = encode_batch_size(c, &e, n, stream);
        for (size_t i = 0; ret == 0 && i < n; i += m)
            ret = encode_batch(c, p, &e, src, dst, i, i + m <= n ? m : n - i, out_bytes, out_mask, &errors, stream,
                               st);
    }
    if (ret == 0 && errors.first != SIZE_MAX) {
        char text[300];
        gds_codec_error_text(p, errors.code, errors.detail, text, sizeof text);
        gds_status_set(st, 74, "GPU codec: encoding chunk %zu: %s", errors.first, text);
        ret = -1;
    }
    gds_cuda_restore(prev);
    pthread_mutex_unlock(&c->lock);
    return ret;
}
