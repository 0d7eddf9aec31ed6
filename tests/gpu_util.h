/* GPU helpers for tests: the CUDA driver API (through the library's own
 * loader), a context on device 0, and allocation of each memory kind.
 * gpu_init() returns false (the test then exits 77, "skipped") without a GPU. */
#ifndef H5GDS_GPU_UTIL_H
#define H5GDS_GPU_UTIL_H

#include "cuda_loader.h" /* the library's one CUDA loader (h5gds_cuda) */
#include "test_util.h"

/* The CUDA driver API, loaded by h5gds_cuda; filled by gpu_init(). */
static gds_cuda_api_t cu;

static const char *gpu_skip_reason = "";

static bool gpu_init(void)
{
    if (!gds_cuda_use_device(0, NULL, 0, &gpu_skip_reason))
        return false;
    cu = *gds_cuda_load(NULL);
    return true;
}

#define GPU_OK(call)                                                                   \
    do {                                                                               \
        CUresult rc_ = (call);                                                         \
        if (rc_ != CUDA_SUCCESS) {                                                     \
            fprintf(stderr, "FATAL %s:%d: %s = %d\n", __FILE__, __LINE__, #call, (int)rc_); \
            exit(100);                                                                 \
        }                                                                              \
    } while (0)

typedef enum { MEM_PAGEABLE, MEM_PINNED, MEM_DEVICE, MEM_MANAGED, MEM_NKINDS } mem_kind_t;
static const char *const mem_names[] = {"pageable", "pinned", "device", "managed"};

typedef struct test_buffer {
    mem_kind_t kind;
    void *ptr; /* what is handed to HDF5 */
    size_t size;
} test_buffer_t;

static test_buffer_t buffer_alloc(mem_kind_t kind, size_t size)
{
    test_buffer_t b = {kind, NULL, size};
    size_t n = size ? size : 1;
    CUdeviceptr d = 0;
    switch (kind) {
    case MEM_PAGEABLE: b.ptr = malloc(n); break;
    case MEM_PINNED: GPU_OK(cu.MemAllocHost(&b.ptr, n)); break;
    case MEM_DEVICE: GPU_OK(cu.MemAlloc(&d, n)); b.ptr = (void *)(uintptr_t)d; break;
    case MEM_MANAGED: GPU_OK(cu.MemAllocManaged(&d, n, CU_MEM_ATTACH_GLOBAL)); b.ptr = (void *)(uintptr_t)d; break;
    default: break;
    }
    return b;
}

static void buffer_free(test_buffer_t *b)
{
    switch (b->kind) {
    case MEM_PAGEABLE: free(b->ptr); break;
    case MEM_PINNED: cu.MemFreeHost(b->ptr); break;
    default: cu.MemFree((CUdeviceptr)(uintptr_t)b->ptr); break;
    }
    b->ptr = NULL;
}

/* Copies between a test buffer (any kind, at byte offset `at`) and host
 * memory, never touching device memory with the CPU. */
static void buffer_put(test_buffer_t *b, size_t at, const void *src, size_t n)
{
    if (b->kind == MEM_PAGEABLE || b->kind == MEM_PINNED)
        memcpy((char *)b->ptr + at, src, n);
    else
        GPU_OK(cu.MemcpyHtoD((CUdeviceptr)(uintptr_t)b->ptr + at, src, n));
}

static void buffer_get(test_buffer_t *b, size_t at, void *dst, size_t n)
{
    if (b->kind == MEM_PAGEABLE || b->kind == MEM_PINNED)
        memcpy(dst, (char *)b->ptr + at, n);
    else
        GPU_OK(cu.MemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)b->ptr + at, n));
}

static void buffer_fill(test_buffer_t *b, unsigned char byte)
{
    if (b->kind == MEM_PAGEABLE || b->kind == MEM_PINNED)
        memset(b->ptr, byte, b->size);
    else {
        GPU_OK(cu.MemsetD8((CUdeviceptr)(uintptr_t)b->ptr, byte, b->size));
        GPU_OK(cu.CtxSynchronize());
    }
}

#endif
