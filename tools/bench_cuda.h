/* The CUDA driver API for h5gds-bench, loaded with dlopen so the bench
 * builds and runs (host memory only) on machines without CUDA. */
#ifndef H5GDS_BENCH_CUDA_H
#define H5GDS_BENCH_CUDA_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>

#include <cuda.h>

typedef struct bench_cuda {
    bool ok;
    char gpu_name[128];
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemAllocHost)(void **, size_t);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemAllocManaged)(CUdeviceptr *, size_t, unsigned);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*CtxSynchronize)(void);
} bench_cuda_t;

/* A context on device `ordinal` modulo the devices present (one rank per GPU). */
static inline bool bench_cuda_init(bench_cuda_t *c, int ordinal)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib)
        return false;
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    void **slots[] = {(void **)&Init, (void **)&DeviceGetCount, (void **)&DeviceGet, (void **)&DeviceGetName,
                      (void **)&DevicePrimaryCtxRetain, (void **)&CtxSetCurrent, (void **)&c->MemAlloc,
                      (void **)&c->MemFree, (void **)&c->MemAllocHost, (void **)&c->MemFreeHost,
                      (void **)&c->MemAllocManaged, (void **)&c->MemcpyHtoD, (void **)&c->MemcpyDtoH,
                      (void **)&c->CtxSynchronize};
    const char *names[] = {"cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
                           "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuMemAlloc_v2", "cuMemFree_v2",
                           "cuMemAllocHost_v2", "cuMemFreeHost", "cuMemAllocManaged", "cuMemcpyHtoD_v2",
                           "cuMemcpyDtoH_v2", "cuCtxSynchronize"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*slots[i] = dlsym(lib, names[i])))
            return false;
    int n = 0;
    CUdevice dev;
    CUcontext ctx;
    if (Init(0) != CUDA_SUCCESS || DeviceGetCount(&n) != CUDA_SUCCESS || n < 1 || DeviceGet(&dev, ordinal % n) != CUDA_SUCCESS ||
        DevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || CtxSetCurrent(ctx) != CUDA_SUCCESS)
        return false;
    DeviceGetName(c->gpu_name, sizeof c->gpu_name, dev);
    c->ok = true;
    return true;
}

#endif
