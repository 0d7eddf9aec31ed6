/* Which memory a pointer lives in, asked of the CUDA driver only when the
 * application has loaded it (otherwise it cannot own GPU memory). */
#include "engine.h"
#include "../cuda/cuda_loader.h"

static bool classify(const void *ptr, gds_buffer_info_t *info, bool want_range)
{
    info->kind = GDS_MEMORY_HOST;
    info->context = NULL;
    info->device = -1;
    info->range_start = 0;
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!cu || !ptr)
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
    info->context = ctx;
    info->device = ordinal;
    info->range_start = (uintptr_t)start;
    return true;
}

bool gds_classify_buffer(const void *ptr, gds_buffer_info_t *info)
{
    return classify(ptr, info, false);
}

bool gds_classify_buffer_range(const void *ptr, gds_buffer_info_t *info)
{
    return classify(ptr, info, true);
}
