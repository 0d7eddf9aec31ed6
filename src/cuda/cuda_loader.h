/*
 * Run-time loader for the CUDA driver API (libcuda) and cuFile (libcufile).
 *
 * Nothing here is linked: both libraries are dlopen'ed on first use, so the
 * library builds and runs its host path on machines without CUDA. Only the
 * types come from cuda.h / cufile.h. No other layer calls dlopen/dlsym:
 * the driver, the MPI layer, the tools and the tests all use this one
 * (built as the internal static library h5gds_cuda).
 */
#ifndef H5GDS_CUDA_LOADER_H
#define H5GDS_CUDA_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda.h>
#include <cufile.h>

typedef struct gds_cuda_api {
    CUresult (*Init)(unsigned);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*PointerGetAttributes)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventQuery)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*Memcpy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*Memcpy3DAsync)(const CUDA_MEMCPY3D *, CUstream); /* strided boxes (decoded chunks placed) */
    /* for tools and tests: devices, allocations, kernels */
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*CtxGetDevice)(CUdevice *);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemAllocHost)(void **, size_t);
    CUresult (*MemAllocManaged)(CUdeviceptr *, size_t, unsigned);
    CUresult (*MemHostRegister)(void *, size_t, unsigned);
    CUresult (*MemHostUnregister)(void *);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*MemGetInfo)(size_t *, size_t *);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
    /* for the GPU codecs (src/codec) */
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*MemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
    CUresult (*StreamQuery)(CUstream);
    /* Stream-ordered allocations (drivers of CUDA 11.2 on; NULL where the
     * driver lacks them): a free that does not wait for the whole device. */
    CUresult (*MemPoolCreate)(CUmemoryPool *, const CUmemPoolProps *);
    CUresult (*MemPoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
    CUresult (*MemPoolTrimTo)(CUmemoryPool, size_t);
    CUresult (*MemAllocFromPoolAsync)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
} gds_cuda_api_t;

typedef struct gds_cufile_api {
    CUfileError_t (*DriverOpen)(void);
    CUfileError_t (*HandleRegister)(CUfileHandle_t *, CUfileDescr_t *);
    void (*HandleDeregister)(CUfileHandle_t);
    ssize_t (*Read)(CUfileHandle_t, void *, size_t, off_t, off_t);
    ssize_t (*Write)(CUfileHandle_t, const void *, size_t, off_t, off_t);
    CUfileError_t (*BufRegister)(const void *, size_t, int);
    CUfileError_t (*BufDeregister)(const void *);
} gds_cufile_api_t;

/* The CUDA driver API when the application has already loaded libcuda (it
 * owns device memory only then), else NULL. Cheap after the first success:
 * while CUDA is absent each call costs one dl_iterate_phdr step (the set of
 * loaded objects is rescanned only when it changed). */
const gds_cuda_api_t *gds_cuda_if_loaded(void);

/* The CUDA driver API, loading libcuda if needed; NULL if unavailable.
 * `why` (may be NULL) receives a reason on failure. */
const gds_cuda_api_t *gds_cuda_load(const char **why);

/* The cuFile API with the driver opened once per process; NULL if
 * unavailable, with the reason in `why` (library missing, cuFileDriverOpen
 * status). The result is decided once and cached. */
const gds_cufile_api_t *gds_cufile_load(const char **why);

/* Makes `ctx` current on the calling thread (no call when it already is).
 * For the engine's own threads; on an application's thread use the pair
 * below, which puts the application's context back. */
CUresult gds_cuda_make_current(void *ctx);

/* Makes `ctx` current and returns the context that was (NULL if none),
 * for gds_cuda_restore; `rc` says whether the switch worked. */
void *gds_cuda_enter(void *ctx, CUresult *rc);

/* The context to use for device memory that names none (allocated from a
 * memory pool: cudaMallocAsync, cuMemAllocFromPoolAsync): the current
 * context when it is on device `ordinal`, else that device's primary
 * context (retained once). NULL without CUDA or with no such device. */
CUcontext gds_cuda_context_for_device(int ordinal);
void gds_cuda_restore(void *previous);

/* Devices visible to the process (0 without a usable driver). */
int gds_cuda_device_count(void);

/* Loads CUDA and makes the primary context of device `ordinal` (modulo the
 * devices present) current; its name into `name` when not NULL. False with
 * a reason in `why` when there is no usable GPU. For tools and tests. */
bool gds_cuda_use_device(int ordinal, char *name, size_t name_size, const char **why);

/* The cuFile API if an earlier gds_cufile_load opened it, else NULL (never
 * opens it). */
const gds_cufile_api_t *gds_cufile_if_loaded(void);

/* Text for a CUresult (never NULL). */
const char *gds_cuda_error_text(CUresult rc);

/* Text for a cuFile status (never NULL); uses a caller buffer for errno-style codes. */
const char *gds_cufile_error_text(CUfileError_t st, char *buf, size_t size);

/* True when the nvidia-fs kernel module (true GPUDirect Storage) is present. */
bool gds_nvfs_present(void);

/* ---- NVRTC: run-time compilation of CUDA C (the codec's kernels) ----
 * Declared here (nvrtc.h is not needed to build); results are nvrtcResult
 * values (0 = success). */
typedef struct gds_nvrtc_program *gds_nvrtc_program_t;
typedef struct gds_nvrtc_api {
    int major, minor; /* NVRTC version */
    const char *(*GetErrorString)(int);
    int (*CreateProgram)(gds_nvrtc_program_t *, const char *src, const char *name, int nheaders,
                         const char *const *headers, const char *const *include_names);
    int (*DestroyProgram)(gds_nvrtc_program_t *);
    int (*CompileProgram)(gds_nvrtc_program_t, int noptions, const char *const *options);
    int (*GetProgramLogSize)(gds_nvrtc_program_t, size_t *);
    int (*GetProgramLog)(gds_nvrtc_program_t, char *);
    int (*GetCUBINSize)(gds_nvrtc_program_t, size_t *);
    int (*GetCUBIN)(gds_nvrtc_program_t, char *);
    int (*GetPTXSize)(gds_nvrtc_program_t, size_t *);
    int (*GetPTX)(gds_nvrtc_program_t, char *);
} gds_nvrtc_api_t;

/* NVRTC (libnvrtc.so.13, .12, .11.2; also under $CUDA_HOME and
 * /usr/local/cuda), loaded once per process; NULL with the reason in `why`. */
const gds_nvrtc_api_t *gds_nvrtc_load(const char **why);

/* ---- nvCOMP (batched C API): see nvcomp_api.h ---- */
struct gds_nvcomp_api;
/* nvCOMP (libnvcomp.so.6 or .5), loaded once per process: the file named by
 * H5GDS_NVCOMP_LIB if set (and nothing else), else the soname through the
 * dynamic loader, else the Python wheels' folders (nvidia/libnvcomp/lib64 in
 * site-packages of $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local, /usr,
 * and $PYTHONPATH). NULL with the reason in `why`. */
const struct gds_nvcomp_api *gds_nvcomp_load(const char **why);

/* Testing hook: H5GDS_DISABLE_CUFILE=1 in the environment makes cuFile
 * unavailable, as on a machine without it. */

#endif
