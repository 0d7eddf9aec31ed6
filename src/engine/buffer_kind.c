/* Which memory a pointer lives in, asked of the CUDA driver only when the
 * application has loaded it (otherwise it cannot own GPU memory). */
#include "engine.h"
#include "../cuda/cuda_loader.h"

bool gds_classify_buffer(const void *ptr, gds_buffer_info_t *info)
{
    info->kind = H5FD_GDS_MEMORY_HOST;
    info->context = NULL;
    info->device = -1;
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    if (!cu || !ptr)
        return true;

    unsigned memory_type = 0, is_managed = 0;
    CUcontext ctx = NULL;
    int ordinal = -1;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *values[] = {&memory_type, &is_managed, &ctx, &ordinal};
    /* For memory CUDA does not know, this returns success with zeroed values;
     * a failure (e.g. a context being torn down) is treated as host memory,
     * which is what a CPU pointer it cannot classify must be. */
    if (cu->PointerGetAttributes(4, attrs, values, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
        return false;
    if (is_managed) {
        info->kind = H5FD_GDS_MEMORY_MANAGED;
    }
    else if (memory_type == CU_MEMORYTYPE_DEVICE) {
        info->kind = H5FD_GDS_MEMORY_DEVICE;
    }
    else if (memory_type == CU_MEMORYTYPE_HOST) {
        info->kind = H5FD_GDS_MEMORY_PINNED;
        return true;
    }
    else {
        return true;
    }
    info->context = ctx;
    info->device = ordinal;
    return true;
}
