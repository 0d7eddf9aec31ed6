/*
 * The GPU codec object (see gpu_codec.h): open and close, the kernels of
 * codec_kernels.cu compiled by NVRTC (kept per process and architecture, and
 * on disk: codec_kernel_cache.c)
 * and their launch, nvCOMP's alignment needs, the tiny valid streams the
 * kernels substitute for failing ones, the device and pinned buffers that
 * grow with the batches and are kept until close. Decoding is
 * codec_decode.c's, encoding codec_encode.c's; codec_internal.h lists the
 * files of the layer.
 */
#include "codec_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated at build time from codec_kernels.cu, codec_shared.h, zstd_splice.h, deflate_splice.h,
 * inflate_split.h and zstd_blocks.h. */
extern const unsigned char gds_codec_kernels_source[];
extern const unsigned char gds_codec_shared_source[];
extern const unsigned char gds_codec_zstd_splice_source[];
extern const unsigned char gds_codec_deflate_splice_source[];
extern const unsigned char gds_codec_inflate_split_source[];
extern const unsigned char gds_codec_zstd_blocks_source[];

static const char *const kernel_names[K_COUNT] = {
    "codec_gather_head",   "codec_copy",          "codec_fletcher_sum",
    "codec_fletcher_check", "codec_fletcher_put", "codec_adler_sum",     "codec_adler_check",
    "codec_zlib_prep",     "codec_zstd_prep",  "codec_nvcomp_check",  "codec_entry_copy",
    "codec_lz4h5_walk",    "codec_bshuf_walk",    "codec_bitunshuffle",  "codec_bitshuffle",
    "codec_unshuffle",     "codec_shuffle",       "codec_blocks_plan",   "codec_zlib_assemble",
    "codec_zstd_splice",   "codec_zstd_assemble", "codec_lz4h5_layout",  "codec_bshuf_layout",  "codec_blosc_walk",
    "codec_blosc_finish",  "codec_blosc_shuffle", "codec_blosc_layout",
    "codec_deflate_join",  "codec_inflate_find",  "codec_inflate_segments", "codec_inflate_mend",
    "codec_inflate_resolve", "codec_zstd_plan",   "codec_zstd_decode",   "codec_zstd_link",
    "codec_zstd_execute",  "codec_zstd_resolve",
};

/* The dummies (layout: codec_internal.h's DUMMY_*). */
const unsigned char gds_codec_dummy_deflate[DUMMY_DEFLATE_LEN] = {0x01, 0x01, 0x00, 0xfe, 0xff, 0x78};
const unsigned char gds_codec_dummy_zstd[DUMMY_ZSTD_LEN] = {0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x01, 0x09, 0x00, 0x00, 0x78};
const unsigned char gds_codec_dummy_lz4[DUMMY_LZ4_LEN] = {0x10, 0x78};

/* ---- errors ---- */

int gds_codec_cuda_fail(gds_status_t *st, const char *what, CUresult rc)
{
    /* ENOMEM: the callers narrow their batches, or try again later */
    gds_status_set(st, rc == CUDA_ERROR_OUT_OF_MEMORY ? ENOMEM : 0, "GPU codec: %s failed: %s", what,
                   gds_cuda_error_text(rc));
    return -1;
}

/* ---- the kernels' module: compiled once per architecture, kept in the process and on disk ---- */

typedef struct image {
    int arch;
    char *data;
} image_t;
static pthread_mutex_t image_lock = PTHREAD_MUTEX_INITIALIZER;
static image_t images[8];
static int nimages;

/* -lineinfo: profilers map the kernels' time to their source lines */
#define COMPILE_OPTIONS "--std=c++17", "-default-device", "-lineinfo"

static const char *const header_names[] = {"codec_shared.h", "zstd_splice.h", "deflate_splice.h", "inflate_split.h",
                                           "zstd_blocks.h"};

static const char *header_source(int i)
{
    const unsigned char *const sources[] = {gds_codec_shared_source, gds_codec_zstd_splice_source,
                                            gds_codec_deflate_splice_source, gds_codec_inflate_split_source,
                                            gds_codec_zstd_blocks_source};
    return (const char *)sources[i];
}

/* The disk cache's key of this compilation: sources, options, NVRTC's version. */
static uint64_t compile_key(const gds_nvrtc_api_t *rtc)
{
    char version[32];
    snprintf(version, sizeof version, "nvrtc %d.%d", rtc->major, rtc->minor);
    const char *parts[] = {"h5gds codec kernels 1", version, COMPILE_OPTIONS, (const char *)gds_codec_kernels_source,
                           header_source(0), header_source(1), header_source(2), header_source(3), header_source(4)};
    return gds_codec_kernel_key(parts, sizeof parts / sizeof *parts);
}

static int compile_kernels(const gds_nvrtc_api_t *rtc, int arch, char **data, size_t *size_out, bool *ptx_out,
                           gds_status_t *st)
{
    /* cubin for the device; PTX of an older architecture when this NVRTC
     * does not know the device's (the driver compiles it) */
    char opt_arch[64];
    int tries[2] = {arch, 80};
    for (int t = 0; t < 2; t++) {
        bool ptx = t == 1;
        snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s_%d", ptx ? "compute" : "sm", tries[t]);
        const char *opts[] = {opt_arch, COMPILE_OPTIONS};
        const char *headers[] = {header_source(0), header_source(1), header_source(2), header_source(3),
                                 header_source(4)};
        gds_nvrtc_program_t prog = NULL;
        int rc = rtc->CreateProgram(&prog, (const char *)gds_codec_kernels_source, "codec_kernels.cu", 5, headers,
                                    header_names);
        if (rc != 0) {
            gds_status_set(st, 0, "GPU codec: nvrtcCreateProgram failed: %s", rtc->GetErrorString(rc));
            return -1;
        }
        rc = rtc->CompileProgram(prog, (int)(sizeof opts / sizeof *opts), opts);
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
        *size_out = ptx ? strlen(image) + 1 : size;
        *ptx_out = ptx;
        return 0;
    }
    return -1;
}

/* The kernels' image for `arch`: this process's, else the disk cache's
 * (*from_disk), else compiled and stored there. anew: compiled again
 * whatever either holds (a cached image the driver refused). */
static int kernel_image(int arch, bool anew, const char **data, bool *from_disk, gds_status_t *st)
{
    *from_disk = false;
    pthread_mutex_lock(&image_lock);
    int slot = -1;
    for (int i = 0; i < nimages; i++)
        if (images[i].arch == arch)
            slot = i;
    if (slot >= 0 && !anew) {
        *data = images[slot].data;
        pthread_mutex_unlock(&image_lock);
        return 0;
    }
    const char *why = NULL;
    const gds_nvrtc_api_t *rtc = gds_nvrtc_load(&why);
    if (!rtc) {
        pthread_mutex_unlock(&image_lock);
        gds_status_set(st, 0, "GPU codec: %s", why);
        return -1;
    }
    uint64_t key = compile_key(rtc);
    char path[PATH_MAX + 64];
    bool cache = gds_codec_kernel_cache_path(key, arch, path, sizeof path), debug = gds_codec_debug_on(), ptx = false;
    size_t size = 0;
    char *image = cache && !anew ? gds_codec_kernel_cache_load(path, key, arch, &size, &ptx) : NULL;
    int rc = 0;
    if (image) {
        *from_disk = true;
        if (debug)
            fprintf(stderr, "h5gds codec: kernels for sm_%d from %s\n", arch, path);
    }
    else {
        uint64_t t0 = gds_now_ns();
        rc = compile_kernels(rtc, arch, &image, &size, &ptx, st);
        int stored = rc == 0 && cache ? gds_codec_kernel_cache_store(path, key, arch, image, size, ptx) : -1;
        if (rc == 0 && debug)
            fprintf(stderr, "h5gds codec: kernels for sm_%d compiled by NVRTC %d.%d in %.1f s%s%s\n", arch, rtc->major,
                    rtc->minor, 1e-9 * (double)(gds_now_ns() - t0), stored == 0 ? ", kept in " : cache ? ", not kept in " : "",
                    cache ? path : "");
    }
    if (rc == 0) {
        /* a replaced image stays allocated: another thread may be loading it */
        if (slot >= 0)
            images[slot].data = image;
        else if (nimages < (int)(sizeof images / sizeof images[0]))
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
    if (c->cu && !c->stuck) { /* stuck: freeing would wait for work that never ends */
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
            if (c->entry)
                c->cu->EventDestroy(c->entry);
            if (c->inflate_t0)
                c->cu->EventDestroy(c->inflate_t0);
            if (c->inflate_t1)
                c->cu->EventDestroy(c->inflate_t1);
            if (c->own)
                c->cu->StreamDestroy(c->own);
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
    if (env && atol(env) > 0) {
        c->budget = (size_t)atol(env) << 20;
        c->budget_set = true;
    }
    /* a sub-batch (at most the budget above) decodes in well under a
     * second; this bounds a decoder that never ends */
    c->timeout_s = 30;
    if ((env = getenv("H5GDS_CODEC_TIMEOUT_S")) && atof(env) > 0)
        c->timeout_s = atof(env);

    CUresult rc;
    void *prev = gds_cuda_enter(ctx, &rc);
    int ret = -1;
    CUdevice dev;
    const char *image = NULL;
    bool from_disk = false;
    if (rc != CUDA_SUCCESS)
        gds_codec_cuda_fail(st, "making the context current", rc);
    else if ((rc = cu->CtxGetDevice(&dev)) != CUDA_SUCCESS)
        gds_codec_cuda_fail(st, "cuCtxGetDevice", rc);
    else if ((rc = cu->DeviceGetAttribute(&c->sm_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) !=
                 CUDA_SUCCESS ||
             (rc = cu->DeviceGetAttribute(&c->sm_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) !=
                 CUDA_SUCCESS)
        gds_codec_cuda_fail(st, "cuDeviceGetAttribute", rc);
    else if (kernel_image(c->sm_major * 10 + c->sm_minor, false, &image, &from_disk, st) < 0) {
        /* st set */
    }
    else if ((rc = cu->ModuleLoadData(&c->module, image)) != CUDA_SUCCESS && from_disk &&
             kernel_image(c->sm_major * 10 + c->sm_minor, true, &image, &from_disk, st) < 0) {
        /* the disk's image refused, and compiling anew failed: st set */
    }
    else if (rc != CUDA_SUCCESS && (rc = cu->ModuleLoadData(&c->module, image)) != CUDA_SUCCESS)
        gds_codec_cuda_fail(st, "loading the kernels (cuModuleLoadData)", rc);
    else if (query_alignments(c, st) < 0) {
        /* st set */
    }
    else {
        ret = 0;
        for (int k = 0; k < K_COUNT && ret == 0; k++)
            if ((rc = cu->ModuleGetFunction(&c->fn[k], c->module, kernel_names[k])) != CUDA_SUCCESS)
                ret = gds_codec_cuda_fail(st, kernel_names[k], rc);
        unsigned char d[DUMMY_BYTES] = {0};
        memcpy(d + DUMMY_DEFLATE, gds_codec_dummy_deflate, sizeof gds_codec_dummy_deflate);
        memcpy(d + DUMMY_ZSTD, gds_codec_dummy_zstd, sizeof gds_codec_dummy_zstd);
        memcpy(d + DUMMY_LZ4, gds_codec_dummy_lz4, sizeof gds_codec_dummy_lz4);
        if (ret == 0 && ((rc = cu->StreamCreate(&c->own, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS ||
                         (rc = cu->EventCreate(&c->entry, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS ||
                         (rc = cu->EventCreate(&c->inflate_t0, CU_EVENT_DEFAULT)) != CUDA_SUCCESS ||
                         (rc = cu->EventCreate(&c->inflate_t1, CU_EVENT_DEFAULT)) != CUDA_SUCCESS))
            ret = gds_codec_cuda_fail(st, "creating the codec's stream", rc);
        /* on the codec's own stream, waited for: a plain copy from pageable
         * memory may return before its DMA lands, on the legacy stream,
         * which the codec's non-blocking stream does not follow */
        if (ret == 0 && ((rc = cu->MemAlloc(&c->dummies, DUMMY_BYTES)) != CUDA_SUCCESS ||
                         (rc = cu->MemcpyHtoDAsync(c->dummies, d, DUMMY_BYTES, c->own)) != CUDA_SUCCESS ||
                         (rc = cu->StreamSynchronize(c->own)) != CUDA_SUCCESS))
            ret = gds_codec_cuda_fail(st, "allocating device memory", rc);
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

bool gds_codec_lock_running(gds_codec_t *c, gds_status_t *st)
{
    pthread_mutex_lock(&c->lock);
    if (!c->stuck)
        return true;
    pthread_mutex_unlock(&c->lock);
    gds_status_set(st, ECANCELED, "GPU codec: stopped: an earlier batch's work never finished on the GPU "
                                  "(corrupt data?); HDF5's CPU filters must read in this process");
    return false;
}

int gds_codec_follow(gds_codec_t *c, CUstream caller, CUstream *own, gds_status_t *st)
{
    CUresult rc = c->cu->EventRecord(c->entry, caller);
    if (rc == CUDA_SUCCESS)
        rc = c->cu->EventSynchronize(c->entry);
    if (rc != CUDA_SUCCESS)
        return gds_codec_cuda_fail(st, "waiting for the caller's stream", rc);
    *own = c->own;
    return 0;
}

bool gds_codec_stopped(const gds_codec_t *c)
{
    if (!c)
        return false;
    /* not under the lock: a caller asks while another thread's decode holds it */
    return __atomic_load_n(&c->stuck, __ATOMIC_ACQUIRE);
}

/* ---- memory ---- */

int gds_codec_dbuf_reserve(gds_codec_t *c, dbuf_t *b, size_t need, CUstream s, gds_status_t *st)
{
    if (b->size >= need)
        return 0;
    CUresult rc = c->cu->StreamSynchronize(s); /* work queued may still use it */
    if (rc != CUDA_SUCCESS)
        return gds_codec_cuda_fail(st, "cuStreamSynchronize", rc);
    if (b->ptr)
        c->cu->MemFree(b->ptr);
    b->ptr = 0;
    b->size = 0;
    __atomic_store_n(&c->held, c->work.size + c->blocks.size, __ATOMIC_RELAXED);
    size_t size = align_up(need + need / 4, (size_t)2 << 20);
    /* the quarter over saves later growth; without room for it, what is needed */
    if ((rc = c->cu->MemAlloc(&b->ptr, size)) == CUDA_ERROR_OUT_OF_MEMORY)
        rc = c->cu->MemAlloc(&b->ptr, size = align_up(need, (size_t)2 << 20));
    if (rc != CUDA_SUCCESS) {
        gds_status_set(st, 12, "GPU codec: cannot allocate %zu MiB of device memory: %s", size >> 20,
                       gds_cuda_error_text(rc));
        return -1;
    }
    b->size = size;
    __atomic_store_n(&c->held, c->work.size + c->blocks.size, __ATOMIC_RELAXED);
    return 0;
}

size_t gds_codec_budget(gds_codec_t *c)
{
    if (c->budget_set)
        return c->budget;
    size_t free_bytes = 0, total = 0;
    CUresult rc;
    void *prev = gds_cuda_enter(c->ctx, &rc);
    if (rc != CUDA_SUCCESS || c->cu->MemGetInfo(&free_bytes, &total) != CUDA_SUCCESS)
        free_bytes = 0;
    gds_cuda_restore(prev);
    size_t b = (free_bytes + __atomic_load_n(&c->held, __ATOMIC_RELAXED)) / 4;
    b = b < c->budget ? c->budget : b > MAX_TEMP_BUDGET ? MAX_TEMP_BUDGET : b;
    size_t cap = __atomic_load_n(&c->cap, __ATOMIC_RELAXED);
    return cap && cap < b ? cap : b;
}

/* Frees the work and blocks buffers; the caller holds the lock and the
 * codec's stream is idle. */
static void free_buffers(gds_codec_t *c)
{
    dbuf_t *bufs[] = {&c->work, &c->blocks};
    for (int i = 0; i < 2; i++)
        if (bufs[i]->ptr) {
            c->cu->MemFree(bufs[i]->ptr);
            bufs[i]->ptr = 0;
            bufs[i]->size = 0;
        }
    __atomic_store_n(&c->held, (size_t)0, __ATOMIC_RELAXED);
}

bool gds_codec_narrow_after_oom(gds_codec_t *c, size_t m, gds_status_t *st)
{
    /* Another process (or this one's own allocator: PyTorch's and CuPy's
     * pools keep what they freed) may hold most of the device: a read or
     * write then runs in narrower sub-batches instead of failing. */
    if (st->err != ENOMEM || m <= 1 || c->stuck)
        return false;
    size_t budget = gds_codec_budget(c);
    /* the calls' work runs on the codec's own stream (gds_codec_follow) */
    if (budget / 2 < ((size_t)1 << 20) || c->cu->StreamSynchronize(c->own) != CUDA_SUCCESS)
        return false;
    free_buffers(c);
    __atomic_store_n(&c->cap, budget / 2, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->narrowed, 1, __ATOMIC_RELAXED);
    if (gds_codec_debug_on())
        fprintf(stderr, "h5gds codec: %zu chunks did not fit the device's free memory (%s): budget now %zu MiB\n", m,
                st->msg, (budget / 2) >> 20);
    return true;
}

unsigned long gds_codec_narrowed(const gds_codec_t *c)
{
    return c ? __atomic_load_n(&c->narrowed, __ATOMIC_RELAXED) : 0;
}

void gds_codec_trim(gds_codec_t *c)
{
    if (!c || pthread_mutex_lock(&c->lock) != 0)
        return;
    /* more than sub-batches within the default budget make (each buffer a
     * quarter over its need, rounded to 2 MiB: gds_codec_dbuf_reserve) */
    if (!c->stuck && c->work.size + c->blocks.size > DEFAULT_TEMP_BUDGET + DEFAULT_TEMP_BUDGET / 4 + ((size_t)4 << 20)) {
        CUresult rc;
        void *prev = gds_cuda_enter(c->ctx, &rc);
        /* the codec's work runs on its own stream: done there, nothing uses them */
        if (rc == CUDA_SUCCESS && c->cu->StreamSynchronize(c->own) == CUDA_SUCCESS)
            free_buffers(c);
        gds_cuda_restore(prev);
    }
    __atomic_store_n(&c->cap, (size_t)0, __ATOMIC_RELAXED); /* the next read or write tries the device's free memory again */
    pthread_mutex_unlock(&c->lock);
}

int gds_codec_pinned_reserve(gds_codec_t *c, size_t need, CUstream s, gds_status_t *st)
{
    if (c->pinned_size >= need)
        return 0;
    CUresult rc = c->cu->StreamSynchronize(s);
    if (rc != CUDA_SUCCESS)
        return gds_codec_cuda_fail(st, "cuStreamSynchronize", rc);
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

/* ---- launching ---- */

int gds_codec_launch(gds_codec_t *c, int k, unsigned gx, unsigned gy, CUstream s, void **args, gds_status_t *st)
{
    return gds_codec_launch_threads(c, k, gx, gy, THREADS, s, args, st);
}

int gds_codec_launch_threads(gds_codec_t *c, int k, unsigned gx, unsigned gy, unsigned threads, CUstream s,
                             void **args, gds_status_t *st)
{
    if (gx == 0 || gy == 0)
        return 0;
    CUresult rc = c->cu->LaunchKernel(c->fn[k], gx, gy, 1, threads, 1, 1, 0, s, args, NULL);
    if (rc != CUDA_SUCCESS) {
        gds_status_set(st, 0, "GPU codec: launching %s failed: %s", kernel_names[k], gds_cuda_error_text(rc));
        return -1;
    }
    return 0;
}

const char *gds_codec_kernel_name(int k) { return k >= 0 && k < K_COUNT ? kernel_names[k] : NULL; }

bool gds_codec_debug_on(void) { return gds_codec_setting_on(GDS_SET_CODEC_DEBUG); }
