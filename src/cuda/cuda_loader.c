/* Run-time loading of libcuda and libcufile; see cuda_loader.h. */
#include "cuda_loader.h"
#include "nvcomp_api.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gds_cuda_api_t cuda_api;
static const gds_cuda_api_t *cuda_ready; /* set once, then read without locks */
static const char *cuda_failure;
static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;

static gds_cufile_api_t cufile_api;
static const gds_cufile_api_t *cufile_ready;
static const char *cufile_failure;
static char cufile_failure_buf[256];
static pthread_once_t cufile_once = PTHREAD_ONCE_INIT;

/* Resolves every symbol or none; `names` pairs the struct slot with the
 * exported (possibly _v2) symbol the header macros would select. */
typedef struct symbol_slot {
    void **slot;
    const char *name;
} symbol_slot_t;

static bool resolve_all(void *lib, const symbol_slot_t *syms, size_t n, const char **missing)
{
    for (size_t i = 0; i < n; i++) {
        void *p = dlsym(lib, syms[i].name);
        if (!p) {
            *missing = syms[i].name;
            return false;
        }
        *syms[i].slot = p;
    }
    return true;
}

#define SLOT(field, sym) {(void **)&cuda_api.field, sym}
static const symbol_slot_t cuda_symbols[] = {
    SLOT(Init, "cuInit"),
    SLOT(GetErrorString, "cuGetErrorString"),
    SLOT(PointerGetAttributes, "cuPointerGetAttributes"),
    SLOT(CtxGetCurrent, "cuCtxGetCurrent"),
    SLOT(CtxSetCurrent, "cuCtxSetCurrent"),
    SLOT(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    SLOT(MemHostAlloc, "cuMemHostAlloc"),
    SLOT(MemFreeHost, "cuMemFreeHost"),
    SLOT(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    SLOT(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    SLOT(MemcpyHtoD, "cuMemcpyHtoD_v2"),
    SLOT(MemcpyDtoH, "cuMemcpyDtoH_v2"),
    SLOT(MemsetD8Async, "cuMemsetD8Async"),
    SLOT(StreamCreate, "cuStreamCreate"),
    SLOT(StreamDestroy, "cuStreamDestroy_v2"),
    SLOT(StreamSynchronize, "cuStreamSynchronize"),
    SLOT(EventCreate, "cuEventCreate"),
    SLOT(EventDestroy, "cuEventDestroy_v2"),
    SLOT(EventRecord, "cuEventRecord"),
    SLOT(EventSynchronize, "cuEventSynchronize"),
    SLOT(EventQuery, "cuEventQuery"),
    SLOT(EventElapsedTime, "cuEventElapsedTime"),
    SLOT(StreamWaitEvent, "cuStreamWaitEvent"),
    SLOT(Memcpy, "cuMemcpy"),
    SLOT(MemcpyAsync, "cuMemcpyAsync"),
    SLOT(Memcpy3DAsync, "cuMemcpy3DAsync_v2"),
    SLOT(DeviceGetCount, "cuDeviceGetCount"),
    SLOT(DeviceGet, "cuDeviceGet"),
    SLOT(DeviceGetName, "cuDeviceGetName"),
    SLOT(CtxGetDevice, "cuCtxGetDevice"),
    SLOT(CtxSynchronize, "cuCtxSynchronize"),
    SLOT(MemAlloc, "cuMemAlloc_v2"),
    SLOT(MemFree, "cuMemFree_v2"),
    SLOT(MemAllocHost, "cuMemAllocHost_v2"),
    SLOT(MemAllocManaged, "cuMemAllocManaged"),
    SLOT(MemHostRegister, "cuMemHostRegister_v2"),
    SLOT(MemHostUnregister, "cuMemHostUnregister"),
    SLOT(MemsetD8, "cuMemsetD8_v2"),
    SLOT(MemGetInfo, "cuMemGetInfo_v2"),
    SLOT(ModuleLoadData, "cuModuleLoadData"),
    SLOT(ModuleGetFunction, "cuModuleGetFunction"),
    SLOT(LaunchKernel, "cuLaunchKernel"),
    SLOT(DeviceGetAttribute, "cuDeviceGetAttribute"),
    SLOT(ModuleUnload, "cuModuleUnload"),
    SLOT(MemsetD32Async, "cuMemsetD32Async"),
    SLOT(StreamQuery, "cuStreamQuery"),
};
/* Resolved where present; a driver without them still loads. */
static const symbol_slot_t cuda_optional_symbols[] = {
    SLOT(MemPoolCreate, "cuMemPoolCreate"),
    SLOT(MemPoolSetAttribute, "cuMemPoolSetAttribute"),
    SLOT(MemPoolTrimTo, "cuMemPoolTrimTo"),
    SLOT(MemAllocFromPoolAsync, "cuMemAllocFromPoolAsync"),
    SLOT(MemFreeAsync, "cuMemFreeAsync"),
};
#undef SLOT

static const gds_cuda_api_t *cuda_open(int dlflags)
{
    const gds_cuda_api_t *ready = __atomic_load_n(&cuda_ready, __ATOMIC_ACQUIRE);
    if (ready)
        return ready;
    pthread_mutex_lock(&cuda_lock);
    if (!__atomic_load_n(&cuda_ready, __ATOMIC_RELAXED)) {
        void *lib = dlopen("libcuda.so.1", dlflags);
        const char *missing = NULL;
        if (!lib) {
            if (!(dlflags & RTLD_NOLOAD))
                cuda_failure = "libcuda.so.1 not found (no NVIDIA driver)";
        }
        else if (!resolve_all(lib, cuda_symbols, sizeof cuda_symbols / sizeof cuda_symbols[0], &missing)) {
            cuda_failure = "libcuda.so.1 lacks a required symbol (driver too old)";
            dlclose(lib);
        }
        else {
            for (size_t i = 0; i < sizeof cuda_optional_symbols / sizeof cuda_optional_symbols[0]; i++)
                *cuda_optional_symbols[i].slot = dlsym(lib, cuda_optional_symbols[i].name);
            CUresult rc = cuda_api.Init(0);
            if (rc == CUDA_SUCCESS)
                __atomic_store_n(&cuda_ready, &cuda_api, __ATOMIC_RELEASE);
            else
                cuda_failure = "cuInit failed (no usable GPU)";
        }
    }
    pthread_mutex_unlock(&cuda_lock);
    return __atomic_load_n(&cuda_ready, __ATOMIC_ACQUIRE);
}

/* Is libcuda among the loaded objects? dl_iterate_phdr reads the loader's
 * list in memory; a dlopen(RTLD_NOLOAD) would search the disk for a library
 * that is not there (18 us and several failed openat per call, measured:
 * enough to slow HDF5's own tests several times). The list is scanned only
 * when objects were added since the last scan (dlpi_adds). */
typedef struct loaded_scan {
    unsigned long long adds;
    bool found;
} loaded_scan_t;

static int scan_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    loaded_scan_t *scan = arg;
    (void)size;
    scan->adds = info->dlpi_adds;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcuda.so"))
        scan->found = true;
    return scan->found;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1; /* the counter is the same in every entry: stop at the first */
}

static unsigned long long scanned_adds = ~0ULL;

const gds_cuda_api_t *gds_cuda_if_loaded(void)
{
    const gds_cuda_api_t *api = __atomic_load_n(&cuda_ready, __ATOMIC_ACQUIRE);
    if (api)
        return api;
    unsigned long long adds = 0;
    dl_iterate_phdr(read_adds, &adds);
    if (adds == __atomic_load_n(&scanned_adds, __ATOMIC_RELAXED))
        return NULL; /* nothing loaded since we last found no libcuda */
    loaded_scan_t scan = {0, false};
    dl_iterate_phdr(scan_object, &scan);
    if (scan.found && (api = cuda_open(RTLD_NOW | RTLD_NOLOAD)) != NULL)
        return api;
    /* No libcuda, or one that cannot be used (cuInit fails: a driver without
     * a GPU): do not try again until the set of loaded objects changes. */
    __atomic_store_n(&scanned_adds, adds, __ATOMIC_RELAXED);
    return NULL;
}

const gds_cuda_api_t *gds_cuda_load(const char **why)
{
    const gds_cuda_api_t *api = cuda_open(RTLD_NOW | RTLD_LOCAL);
    if (!api && why) {
        pthread_mutex_lock(&cuda_lock);
        *why = cuda_failure ? cuda_failure : "CUDA unavailable";
        pthread_mutex_unlock(&cuda_lock);
    }
    return api;
}

CUresult gds_cuda_make_current(void *ctx)
{
    const gds_cuda_api_t *cu = __atomic_load_n(&cuda_ready, __ATOMIC_ACQUIRE);
    if (!cu)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext current = NULL;
    if (cu->CtxGetCurrent(&current) == CUDA_SUCCESS && current == (CUcontext)ctx)
        return CUDA_SUCCESS;
    return cu->CtxSetCurrent((CUcontext)ctx);
}

void *gds_cuda_enter(void *ctx, CUresult *rc)
{
    const gds_cuda_api_t *cu = __atomic_load_n(&cuda_ready, __ATOMIC_ACQUIRE);
    CUcontext previous = NULL;
    if (cu)
        cu->CtxGetCurrent(&previous);
    *rc = gds_cuda_make_current(ctx);
    return previous;
}

void gds_cuda_restore(void *previous)
{
    const gds_cuda_api_t *cu = __atomic_load_n(&cuda_ready, __ATOMIC_ACQUIRE);
    CUcontext current = NULL;
    if (cu && cu->CtxGetCurrent(&current) == CUDA_SUCCESS && current != (CUcontext)previous)
        cu->CtxSetCurrent((CUcontext)previous);
}

/* Primary contexts retained for memory that names no context, by device
 * ordinal; kept for the process, as the CUDA runtime keeps its own. */
#define MAX_PRIMARY 64
static CUcontext primary[MAX_PRIMARY];
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;

CUcontext gds_cuda_context_for_device(int ordinal)
{
    const gds_cuda_api_t *cu = __atomic_load_n(&cuda_ready, __ATOMIC_ACQUIRE);
    if (!cu || ordinal < 0)
        return NULL;
    CUcontext current = NULL;
    CUdevice dev = -1;
    if (cu->CtxGetCurrent(&current) == CUDA_SUCCESS && current && cu->CtxGetDevice(&dev) == CUDA_SUCCESS &&
        dev == ordinal)
        return current;
    if (ordinal >= MAX_PRIMARY)
        return NULL;
    pthread_mutex_lock(&primary_lock);
    CUcontext ctx = primary[ordinal];
    if (!ctx && cu->DeviceGet(&dev, ordinal) == CUDA_SUCCESS && cu->DevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
        ctx = NULL;
    primary[ordinal] = ctx;
    pthread_mutex_unlock(&primary_lock);
    return ctx;
}

int gds_cuda_device_count(void)
{
    const gds_cuda_api_t *cu = gds_cuda_load(NULL);
    int n = 0;
    if (!cu || cu->DeviceGetCount(&n) != CUDA_SUCCESS)
        return 0;
    return n;
}

bool gds_cuda_use_device(int ordinal, char *name, size_t name_size, const char **why)
{
    const char *reason = NULL;
    const gds_cuda_api_t *cu = gds_cuda_load(&reason);
    int n = 0;
    CUdevice dev;
    CUcontext ctx;
    if (!cu) {
        /* keep the loader's reason */
    }
    else if (cu->DeviceGetCount(&n) != CUDA_SUCCESS || n < 1)
        reason = "no CUDA device";
    else if (cu->DeviceGet(&dev, (ordinal < 0 ? 0 : ordinal) % n) != CUDA_SUCCESS ||
             cu->DevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cu->CtxSetCurrent(ctx) != CUDA_SUCCESS)
        reason = "cannot create a context on the device";
    else {
        if (name && name_size && cu->DeviceGetName(name, (int)name_size, dev) != CUDA_SUCCESS)
            name[0] = 0;
        return true;
    }
    if (why)
        *why = reason ? reason : "CUDA unavailable";
    return false;
}

const char *gds_cuda_error_text(CUresult rc)
{
    const char *text = NULL;
    if (__atomic_load_n(&cuda_ready, __ATOMIC_ACQUIRE) && cuda_api.GetErrorString(rc, &text) == CUDA_SUCCESS && text)
        return text;
    return "unknown CUDA error";
}

#define FSLOT(field, sym) {(void **)&cufile_api.field, sym}
static const symbol_slot_t cufile_symbols[] = {
    FSLOT(DriverOpen, "cuFileDriverOpen"),
    FSLOT(HandleRegister, "cuFileHandleRegister"),
    FSLOT(HandleDeregister, "cuFileHandleDeregister"),
    FSLOT(Read, "cuFileRead"),
    FSLOT(Write, "cuFileWrite"),
    FSLOT(BufRegister, "cuFileBufRegister"),
    FSLOT(BufDeregister, "cuFileBufDeregister"),
};
#undef FSLOT

static void cufile_open_once(void)
{
    const char *env = getenv("H5GDS_DISABLE_CUFILE");
    if (env && *env && strcmp(env, "0") != 0) {
        cufile_failure = "disabled by H5GDS_DISABLE_CUFILE";
        return;
    }
    if (!gds_cuda_load(&cufile_failure))
        return;
    void *lib = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        lib = dlopen("libcufile.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        cufile_failure = "libcufile.so.0 not found";
        return;
    }
    const char *missing = NULL;
    if (!resolve_all(lib, cufile_symbols, sizeof cufile_symbols / sizeof cufile_symbols[0], &missing)) {
        snprintf(cufile_failure_buf, sizeof cufile_failure_buf, "libcufile lacks %s", missing);
        cufile_failure = cufile_failure_buf;
        return; /* keep lib loaded: unloading cuFile is not safe */
    }
    CUfileError_t st = cufile_api.DriverOpen();
    if (st.err != CU_FILE_SUCCESS) {
        char text[128];
        snprintf(cufile_failure_buf, sizeof cufile_failure_buf, "cuFileDriverOpen failed: %s",
                 gds_cufile_error_text(st, text, sizeof text));
        cufile_failure = cufile_failure_buf;
        return;
    }
    /* The cuFile driver stays open for the life of the process: closing it
     * from an exit handler races with the CUDA runtime's own teardown (seen
     * with cupy/h5py), and process exit releases it anyway. */
    __atomic_store_n(&cufile_ready, &cufile_api, __ATOMIC_RELEASE);
}

const gds_cufile_api_t *gds_cufile_if_loaded(void)
{
    return __atomic_load_n(&cufile_ready, __ATOMIC_ACQUIRE);
}

const gds_cufile_api_t *gds_cufile_load(const char **why)
{
    pthread_once(&cufile_once, cufile_open_once);
    if (!cufile_ready && why)
        *why = cufile_failure ? cufile_failure : "cuFile unavailable";
    return cufile_ready;
}

const char *gds_cufile_error_text(CUfileError_t st, char *buf, size_t size)
{
    if (st.err == CU_FILE_CUDA_DRIVER_ERROR) {
        snprintf(buf, size, "CUDA driver error: %s", gds_cuda_error_text(st.cu_err));
        return buf;
    }
    /* cufile.h maps codes to text through a macro table; keep our own short form. */
    if (st.err > 0 && st.err < CUFILEOP_BASE_ERR) {
        snprintf(buf, size, "%s", strerror((int)st.err));
        return buf;
    }
    snprintf(buf, size, "cuFile error %d%s", (int)st.err,
             st.err == CU_FILE_HANDLE_NOT_REGISTERED ? " (file handle not registered: file system or "
                                                       "volume not supported by GPUDirect Storage)"
             : st.err == CU_FILE_DRIVER_NOT_INITIALIZED ? " (driver not initialised)"
                                                        : "");
    return buf;
}

bool gds_nvfs_present(void)
{
    return access("/proc/driver/nvidia-fs/version", F_OK) == 0 || access("/sys/module/nvidia_fs", F_OK) == 0;
}

/* ---- NVRTC ---- */

static gds_nvrtc_api_t nvrtc_api;
static const gds_nvrtc_api_t *nvrtc_ready;
static char nvrtc_failure[800];
static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;

#define RSLOT(field, sym) {(void **)&nvrtc_api.field, sym}
static const symbol_slot_t nvrtc_symbols[] = {
    RSLOT(GetErrorString, "nvrtcGetErrorString"),
    RSLOT(CreateProgram, "nvrtcCreateProgram"),
    RSLOT(DestroyProgram, "nvrtcDestroyProgram"),
    RSLOT(CompileProgram, "nvrtcCompileProgram"),
    RSLOT(GetProgramLogSize, "nvrtcGetProgramLogSize"),
    RSLOT(GetProgramLog, "nvrtcGetProgramLog"),
    RSLOT(GetCUBINSize, "nvrtcGetCUBINSize"),
    RSLOT(GetCUBIN, "nvrtcGetCUBIN"),
    RSLOT(GetPTXSize, "nvrtcGetPTXSize"),
    RSLOT(GetPTX, "nvrtcGetPTX"),
};
#undef RSLOT

/* dlopen of `name` in each folder of `dirs` (NULL-terminated; an empty
 * entry means the dynamic loader's own search). */
static void *open_in(const char *const *dirs, const char *name, char *path, size_t path_size)
{
    for (size_t i = 0; dirs[i]; i++) {
        if (!dirs[i][0])
            snprintf(path, path_size, "%s", name);
        else
            snprintf(path, path_size, "%s/%s", dirs[i], name);
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (lib)
            return lib;
    }
    return NULL;
}

static void nvrtc_open_once(void)
{
    char home[400] = "";
    const char *cuda_home = getenv("CUDA_HOME");
    if (!cuda_home || !*cuda_home)
        cuda_home = getenv("CUDA_PATH");
    if (cuda_home && *cuda_home)
        snprintf(home, sizeof home, "%s/lib64", cuda_home);
    const char *dirs[] = {"", home[0] ? home : "/usr/local/cuda/lib64", "/usr/local/cuda/lib64",
                          "/usr/local/cuda/targets/x86_64-linux/lib", NULL};
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"};
    char path[600];
    void *lib = NULL;
    for (size_t i = 0; !lib && i < sizeof names / sizeof names[0]; i++)
        lib = open_in(dirs, names[i], path, sizeof path);
    if (!lib) {
        snprintf(nvrtc_failure, sizeof nvrtc_failure,
                 "NVRTC not found (libnvrtc.so.13 or .12): install the CUDA toolkit's NVRTC "
                 "(or the nvidia-cuda-nvrtc wheel) and put it on LD_LIBRARY_PATH");
        return;
    }
    const char *missing = NULL;
    if (!resolve_all(lib, nvrtc_symbols, sizeof nvrtc_symbols / sizeof nvrtc_symbols[0], &missing)) {
        snprintf(nvrtc_failure, sizeof nvrtc_failure, "%s lacks %s (NVRTC too old)", path, missing);
        dlclose(lib);
        return;
    }
    int (*version)(int *, int *) = (int (*)(int *, int *))dlsym(lib, "nvrtcVersion");
    if (!version || version(&nvrtc_api.major, &nvrtc_api.minor) != 0)
        nvrtc_api.major = nvrtc_api.minor = 0;
    __atomic_store_n(&nvrtc_ready, &nvrtc_api, __ATOMIC_RELEASE);
}

const gds_nvrtc_api_t *gds_nvrtc_load(const char **why)
{
    pthread_once(&nvrtc_once, nvrtc_open_once);
    const gds_nvrtc_api_t *api = __atomic_load_n(&nvrtc_ready, __ATOMIC_ACQUIRE);
    if (!api && why)
        *why = nvrtc_failure;
    return api;
}

/* ---- nvCOMP ---- */

static gds_nvcomp_api_t nvcomp_api;
static const gds_nvcomp_api_t *nvcomp_ready;
static char nvcomp_failure[700];
static pthread_once_t nvcomp_once = PTHREAD_ONCE_INIT;

/* nvCOMP 5's temp-size queries take no stream: called through these. */
typedef gds_nvcomp_status_t (*temp5_deflate_c)(size_t, size_t, gds_nvcomp_deflate_copts_t, size_t *, size_t);
typedef gds_nvcomp_status_t (*temp5_deflate_d)(size_t, size_t, gds_nvcomp_deflate_dopts_t, size_t *, size_t);
typedef gds_nvcomp_status_t (*temp5_lz4_c)(size_t, size_t, gds_nvcomp_lz4_copts_t, size_t *, size_t);
typedef gds_nvcomp_status_t (*temp5_lz4_d)(size_t, size_t, gds_nvcomp_lz4_dopts_t, size_t *, size_t);
typedef gds_nvcomp_status_t (*temp5_zstd_c)(size_t, size_t, gds_nvcomp_zstd_copts_t, size_t *, size_t);
typedef gds_nvcomp_status_t (*temp5_zstd_d)(size_t, size_t, gds_nvcomp_zstd_dopts_t, size_t *, size_t);
static temp5_deflate_c v5_deflate_c;
static temp5_deflate_d v5_deflate_d;
static temp5_lz4_c v5_lz4_c;
static temp5_lz4_d v5_lz4_d;
static temp5_zstd_c v5_zstd_c;
static temp5_zstd_d v5_zstd_d;
#define V5_WRAP(fn, ptr, opts_t)                                                                 \
    static gds_nvcomp_status_t fn(size_t n, size_t mx, opts_t o, size_t *t, size_t tot, CUstream s) \
    {                                                                                            \
        (void)s;                                                                                 \
        return ptr(n, mx, o, t, tot);                                                            \
    }
V5_WRAP(v5_deflate_c_wrap, v5_deflate_c, gds_nvcomp_deflate_copts_t)
V5_WRAP(v5_deflate_d_wrap, v5_deflate_d, gds_nvcomp_deflate_dopts_t)
V5_WRAP(v5_lz4_c_wrap, v5_lz4_c, gds_nvcomp_lz4_copts_t)
V5_WRAP(v5_lz4_d_wrap, v5_lz4_d, gds_nvcomp_lz4_dopts_t)
V5_WRAP(v5_zstd_c_wrap, v5_zstd_c, gds_nvcomp_zstd_copts_t)
V5_WRAP(v5_zstd_d_wrap, v5_zstd_d, gds_nvcomp_zstd_dopts_t)
#undef V5_WRAP

/* Fills one algorithm's table (the seven slots, in GDS_NVCOMP_ALGO_TABLE's
 * order) from `lib`; false with the missing symbol. */
static bool nvcomp_algo(void *lib, void *table, const char *name, int major, const char **missing)
{
    static const char *const parts[] = {"CompressGetRequiredAlignments", "CompressGetTempSize",
                                        "CompressGetMaxOutputChunkSize", "CompressAsync",
                                        "DecompressGetRequiredAlignments", "DecompressGetTempSize",
                                        "DecompressAsync"};
    static char symbol[7][96];
    void **slots = (void **)table;
    symbol_slot_t syms[7];
    for (size_t i = 0; i < 7; i++) {
        bool temp = strstr(parts[i], "TempSize") != NULL;
        snprintf(symbol[i], sizeof symbol[i], "nvcompBatched%s%s%s", name, parts[i], temp && major < 6 ? "Async" : "");
        syms[i].slot = &slots[i];
        syms[i].name = symbol[i];
    }
    return resolve_all(lib, syms, 7, missing);
}

_Static_assert(sizeof(((gds_nvcomp_api_t *)0)->deflate) == 7 * sizeof(void *), "nvCOMP table: seven slots");

static bool nvcomp_bind(void *lib, int major, const char **missing)
{
    gds_nvcomp_api_t *a = &nvcomp_api;
    if (!nvcomp_algo(lib, &a->deflate, "Deflate", major, missing) || !nvcomp_algo(lib, &a->lz4, "LZ4", major, missing) ||
        !nvcomp_algo(lib, &a->zstd, "Zstd", major, missing))
        return false;
    if (major < 6) {
        /* the slots hold nvCOMP 5's stream-less functions: route them through the wrappers */
        v5_deflate_c = (temp5_deflate_c)(void *)a->deflate.CompressGetTempSize;
        v5_deflate_d = (temp5_deflate_d)(void *)a->deflate.DecompressGetTempSize;
        v5_lz4_c = (temp5_lz4_c)(void *)a->lz4.CompressGetTempSize;
        v5_lz4_d = (temp5_lz4_d)(void *)a->lz4.DecompressGetTempSize;
        v5_zstd_c = (temp5_zstd_c)(void *)a->zstd.CompressGetTempSize;
        v5_zstd_d = (temp5_zstd_d)(void *)a->zstd.DecompressGetTempSize;
        a->deflate.CompressGetTempSize = v5_deflate_c_wrap;
        a->deflate.DecompressGetTempSize = v5_deflate_d_wrap;
        a->lz4.CompressGetTempSize = v5_lz4_c_wrap;
        a->lz4.DecompressGetTempSize = v5_lz4_d_wrap;
        a->zstd.CompressGetTempSize = v5_zstd_c_wrap;
        a->zstd.DecompressGetTempSize = v5_zstd_d_wrap;
    }
    a->GetStatusString = (const char *(*)(gds_nvcomp_status_t))dlsym(lib, "nvcompGetStatusString");
    a->major = major;
    return true;
}

/* The major version of an opened nvCOMP: from nvcompGetProperties (version
 * = major*1000 + minor*100 + patch), else from the file name. */
static int nvcomp_major(void *lib, const char *path)
{
    typedef struct { uint32_t version, cudart_version; } props_t;
    gds_nvcomp_status_t (*props)(props_t *) = (gds_nvcomp_status_t (*)(props_t *))dlsym(lib, "nvcompGetProperties");
    props_t p = {0, 0};
    if (props && props(&p) == 0 && p.version >= 1000)
        return (int)(p.version / 1000);
    const char *so = strstr(path, ".so.");
    return so ? atoi(so + 4) : 0;
}

static bool nvcomp_try(const char *path, char *why, size_t why_size)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, why_size, "%s", e ? e : "cannot be opened");
        return false;
    }
    int major = nvcomp_major(lib, path);
    const char *missing = NULL;
    if (major != 5 && major != 6) {
        snprintf(why, why_size, "%s is nvCOMP %d (5 or 6 needed)", path, major);
        dlclose(lib);
        return false;
    }
    if (!nvcomp_bind(lib, major, &missing)) {
        snprintf(why, why_size, "%s lacks %s", path, missing);
        dlclose(lib);
        return false;
    }
    snprintf(nvcomp_api.path, sizeof nvcomp_api.path, "%s", path);
    return true;
}

/* The Python wheels' folders: <prefix>/lib/python3.X/site-packages/nvidia/... */
static bool nvcomp_try_wheels(char *why, size_t why_size)
{
    const char *home = getenv("HOME");
    const char *venv = getenv("VIRTUAL_ENV");
    const char *conda = getenv("CONDA_PREFIX");
    char home_local[400] = "";
    if (home && *home)
        snprintf(home_local, sizeof home_local, "%s/.local", home);
    const char *prefixes[] = {venv, conda, home_local, "/usr/local", "/usr", NULL};
    static const char *const tails[] = {"nvidia/libnvcomp/lib64/libnvcomp.so.6", "nvidia/libnvcomp/lib/libnvcomp.so.6",
                                        "nvidia/nvcomp/lib64/libnvcomp.so.6",    "nvidia/nvcomp/lib/libnvcomp.so.6",
                                        "nvidia/libnvcomp/lib64/libnvcomp.so.5", "nvidia/nvcomp/lib64/libnvcomp.so.5"};
    char pattern[900];
    for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0] - 1; i++) {
            if (!prefixes[i] || !*prefixes[i])
                continue;
            snprintf(pattern, sizeof pattern, "%s/lib/python3*/*-packages/%s", prefixes[i], tails[t]);
            glob_t g;
            if (glob(pattern, 0, NULL, &g) == 0) {
                for (size_t k = 0; k < g.gl_pathc; k++)
                    if (nvcomp_try(g.gl_pathv[k], why, why_size)) {
                        globfree(&g);
                        return true;
                    }
                globfree(&g);
            }
        }
        /* $PYTHONPATH entries hold packages directly */
        const char *pp = getenv("PYTHONPATH");
        while (pp && *pp) {
            const char *end = strchr(pp, ':');
            size_t len = end ? (size_t)(end - pp) : strlen(pp);
            if (len && len < 400) {
                snprintf(pattern, sizeof pattern, "%.*s/%s", (int)len, pp, tails[t]);
                if (access(pattern, R_OK) == 0 && nvcomp_try(pattern, why, why_size))
                    return true;
            }
            pp = end ? end + 1 : NULL;
        }
    }
    return false;
}

static void nvcomp_open_once(void)
{
    char why[400] = "";
    const char *explicit_path = getenv("H5GDS_NVCOMP_LIB");
    if (explicit_path && *explicit_path) {
        if (!nvcomp_try(explicit_path, why, sizeof why)) {
            snprintf(nvcomp_failure, sizeof nvcomp_failure, "nvCOMP from H5GDS_NVCOMP_LIB=%s: %s", explicit_path,
                     why);
            return;
        }
    }
    else if (!nvcomp_try("libnvcomp.so.6", why, sizeof why) && !nvcomp_try("libnvcomp.so.5", why, sizeof why) &&
             !nvcomp_try_wheels(why, sizeof why)) {
        snprintf(nvcomp_failure, sizeof nvcomp_failure,
                 "nvCOMP not found: install nvidia-libnvcomp-cu13 (pip) or set H5GDS_NVCOMP_LIB to the path of "
                 "libnvcomp.so.6");
        return;
    }
    __atomic_store_n(&nvcomp_ready, &nvcomp_api, __ATOMIC_RELEASE);
}

const gds_nvcomp_api_t *gds_nvcomp_load(const char **why)
{
    pthread_once(&nvcomp_once, nvcomp_open_once);
    const gds_nvcomp_api_t *api = __atomic_load_n(&nvcomp_ready, __ATOMIC_ACQUIRE);
    if (!api && why)
        *why = nvcomp_failure;
    return api;
}
