/* Which memory a pointer lives in, asked of the CUDA driver only when the
 * application has loaded it (otherwise it cannot own GPU memory). */
#include "engine.h"
#include "../cuda/cuda_loader.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Start of the process's brk heap, read once from /proc/self/maps (or the
 * break at that moment when there is no heap yet); UINTPTR_MAX = unknown. */
static uintptr_t heap_start_address(void)
{
    static uintptr_t start; /* 0 = not read yet */
    uintptr_t s = __atomic_load_n(&start, __ATOMIC_ACQUIRE);
    if (s)
        return s;
    s = UINTPTR_MAX;
    FILE *maps = fopen("/proc/self/maps", "re");
    if (maps) {
        char line[512];
        while (fgets(line, sizeof line, maps)) {
            unsigned long lo = 0;
            if (strstr(line, "[heap]") && sscanf(line, "%lx-", &lo) == 1) {
                s = (uintptr_t)lo;
                break;
            }
        }
        fclose(maps);
    }
    if (s == UINTPTR_MAX) {
        void *brk_now = sbrk(0);
        if (brk_now != (void *)-1)
            s = (uintptr_t)brk_now;
    }
    __atomic_store_n(&start, s, __ATOMIC_RELEASE);
    return s;
}

/* Memory between the heap's start and the current program break belongs to
 * malloc's main arena: CUDA never maps device or managed memory there (its
 * allocations live in address ranges it reserves with mmap, which cannot
 * overlap the heap while it is mapped). Small buffers of the main thread
 * come from there, and asking the CUDA driver about them costs more than
 * 10% of a 4 KiB H5Dwrite. Pinned memory registered inside the heap is
 * answered as plain host memory, which every path treats the same way. */
static bool in_brk_heap(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr, lo = heap_start_address();
    if (lo == UINTPTR_MAX || p < lo)
        return false;
    void *brk_now = sbrk(0);
    return brk_now != (void *)-1 && p < (uintptr_t)brk_now;
}

static bool classify(const void *ptr, gds_buffer_info_t *info, bool want_range, bool exact)
{
    info->kind = GDS_MEMORY_HOST;
    info->context = NULL;
    info->device = -1;
    info->range_start = 0;
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!cu || !ptr || (!exact && in_brk_heap(ptr)))
        return true;

    unsigned memory_type = 0, is_managed = 0;
    CUcontext ctx = NULL;
    int ordinal = -1;
    CUdeviceptr start = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
    void *values[] = {&memory_type, &is_managed, &ctx, &ordinal, &start};
    /* For memory CUDA does not know, this returns success with zeroed values;
     * a failure (e.g. a context being torn down) is treated as host memory,
     * which is what a CPU pointer it cannot classify must be. */
    if (cu->PointerGetAttributes(want_range ? 5 : 4, attrs, values, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
        return false;
    if (is_managed) {
        info->kind = GDS_MEMORY_MANAGED;
    }
    else if (memory_type == CU_MEMORYTYPE_DEVICE) {
        info->kind = GDS_MEMORY_DEVICE;
    }
    else if (memory_type == CU_MEMORYTYPE_HOST) {
        info->kind = GDS_MEMORY_PINNED;
        return true;
    }
    else {
        return true;
    }
    /* Memory from a pool (cudaMallocAsync) belongs to no context: any
     * context of its device can copy it. */
    info->context = ctx ? ctx : gds_cuda_context_for_device(ordinal);
    info->device = ordinal;
    info->range_start = (uintptr_t)start;
    return true;
}

bool gds_classify_buffer(const void *ptr, gds_buffer_info_t *info)
{
    return classify(ptr, info, false, false);
}

bool gds_classify_buffer_exact(const void *ptr, gds_buffer_info_t *info)
{
    return classify(ptr, info, false, true);
}

bool gds_classify_buffer_range(const void *ptr, gds_buffer_info_t *info)
{
    return classify(ptr, info, true, false);
}
