/* h5gds-bench --tune: the autotuning grid, measured in --dir, and what the
 * driver's `auto` picks there (the engine's own code: src/engine/autotune.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autotune.h"
#include "bench.h"

int bench_tune(void)
{
    const char *dir = opt.dir ? opt.dir : ".";
    gds_tune_point_t points[32];
    gds_status_t st = {0, ""};
    printf("h5gds-bench --tune: O_DIRECT write (made durable) and read in %s, 64-128 MiB per point\n", dir);
    size_t n = gds_autotune_grid(dir, points, 32, 120.0, &st);
    if (n == 0) {
        fprintf(stderr, "h5gds-bench: nothing measured: %s\n", st.msg);
        return 1;
    }
    printf("%8s %10s %12s %12s\n", "threads", "block", "write GB/s", "read GB/s");
    for (size_t i = 0; i < n; i++)
        printf("%8u %9zuM %12.2f %12.2f\n", points[i].threads, points[i].block >> 20, points[i].write_gbps,
               points[i].read_gbps);
    char path[4096];
    snprintf(path, sizeof path, "%s/h5gds-tune-probe.h5", dir);
    gds_tuning_t t;
    gds_autotune(path, cuda.ok ? cuda.gpu_name : "", 16, 32u << 20, &t);
    printf("auto here: threads=%u io_block_size=%zuMiB (%s)\n", t.threads, t.io_block_size >> 20, t.why);
    return 0;
}
