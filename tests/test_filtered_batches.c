/*
 * How a GPU read or write of a compressed dataset cuts its chunks into
 * batches (gds_filtered_batch_end, src/vfd/gds_filtered_common.c), without a
 * GPU: every chunk in exactly one batch, batches in order and never empty;
 * the first and the last a quarter of a full batch; tiny and huge chunks;
 * H5GDS_DECODE_BATCH_MIB.
 */
#include <stdlib.h>

#include "check.h"
#include "../src/vfd/gds_filtered.h"

#define MiB ((size_t)1 << 20)

static void check_ends(const char *what, size_t nchunks, size_t chunk_bytes, const size_t *want, size_t nwant)
{
    size_t ends[64];
    long long n = gds_filtered_batches(nchunks, chunk_bytes, ends, 64);
    CHECK_MSG(n == (long long)nwant, "%s: %lld batches, expected %zu", what, n, nwant);
    for (size_t i = 0; n == (long long)nwant && i < nwant; i++)
        CHECK_MSG(ends[i] == want[i], "%s: batch %zu ends at %zu, expected %zu", what, i, ends[i], want[i]);
}

int main(void)
{
    unsetenv("H5GDS_DECODE_BATCH_MIB"); /* the default: 256 MiB decoded per batch */

    /* 1 GiB in 1 MiB chunks: 256 chunks a full batch, 64 the first and the last */
    const size_t gib[] = {64, 320, 576, 832, 960, 1024};
    check_ends("1024 x 1 MiB", 1024, MiB, gib, 6);
    const size_t few[] = {64, 100}; /* the first batch, then the rest */
    check_ends("100 x 1 MiB", 100, MiB, few, 2);
    const size_t one[] = {1};
    check_ends("1 chunk", 1, MiB, one, 1);
    /* 64 MiB chunks: 4 a batch, each a full one; the rest before the last batch in one */
    const size_t huge[] = {4, 6, 10};
    check_ends("10 x 64 MiB", 10, 64 * MiB, huge, 3);
    /* chunks larger than a batch: one a batch */
    const size_t larger[] = {1, 2, 3};
    check_ends("3 x 512 MiB", 3, 512 * MiB, larger, 3);
    /* the environment sets the batch: 16 MiB, 16 chunks of 1 MiB, 4 the first and the last */
    setenv("H5GDS_DECODE_BATCH_MIB", "16", 1);
    const size_t env[] = {4, 20, 36, 40};
    check_ends("40 x 1 MiB, 16 MiB batches", 40, MiB, env, 4);
    unsetenv("H5GDS_DECODE_BATCH_MIB");

    /* Every size from 1 to 3000 chunks, three chunk sizes: a partition of
     * [0, n) into non-empty batches in order. */
    size_t ends[4096];
    const size_t sizes[] = {4096, MiB, 3 * MiB};
    for (size_t c = 0; c < 3; c++)
        for (size_t n = 1; n <= 3000; n++) {
            long long nb = gds_filtered_batches(n, sizes[c], ends, 4096);
            CHECK_MSG(nb > 0 && nb <= 4096, "%zu chunks of %zu bytes: %lld batches", n, sizes[c], nb);
            if (nb > 0 && nb <= 4096)
                CHECK_MSG(ends[nb - 1] == n, "%zu chunks of %zu bytes: the last batch ends at %zu", n, sizes[c],
                          ends[nb - 1]);
        }
    return test_finish("test_filtered_batches");
}
