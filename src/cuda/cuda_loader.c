/* Run-time loading of libcuda and libcufile; see cuda_loader.h. */
#include "cuda_loader.h"

#include <dlfcn.h>
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
