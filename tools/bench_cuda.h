/* The CUDA driver API for h5gds-bench: the one loader (h5gds_cuda), so the
 * bench builds and runs (host memory only) on machines without CUDA. */
#ifndef H5GDS_BENCH_CUDA_H
#define H5GDS_BENCH_CUDA_H

#include <stdbool.h>

#include "cuda_loader.h"

typedef struct bench_cuda {
    bool ok;
    char gpu_name[128];
    const gds_cuda_api_t *api; /* when ok */
} bench_cuda_t;

/* A context on device `ordinal` modulo the devices present (one rank per GPU). */
static inline bool bench_cuda_init(bench_cuda_t *c, int ordinal)
{
    if (!gds_cuda_use_device(ordinal, c->gpu_name, sizeof c->gpu_name, NULL))
        return false;
    c->api = gds_cuda_load(NULL);
    c->ok = c->api != NULL;
    return c->ok;
}

#endif
