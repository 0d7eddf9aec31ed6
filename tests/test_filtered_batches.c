/*
 * How a GPU read or write of a compressed dataset cuts its chunks into
 * batches (gds_filtered_batch_end, src/vfd/gds_filtered_common.c), without a
 * GPU: every chunk in exactly one batch, batches in order and never empty;
 * reads start with a sixteenth and then a quarter of a full batch, writes
 * with a quarter; the last batch is a quarter; tiny and huge chunks.
 */
#include <stdlib.h>

#include "check.h"
#include "../src/vfd/gds_filtered.h"

#define MiB ((size_t)1 << 20)

static void check_ends(const char *what, size_t nchunks, size_t chunk_bytes, bool read, const size_t *want,
                       size_t nwant)
{
    size_t ends[64];
    long long n = gds_filtered_batches(nchunks, chunk_bytes, read, ends, 64);
    CHECK_MSG(n == (long long)nwant, "%s: %lld batches, expected %zu", what, n, nwant);
    for (size_t i = 0; n == (long long)nwant && i < nwant; i++)
        CHECK_MSG(ends[i] == want[i], "%s: batch %zu ends at %zu, expected %zu", what, i, ends[i], want[i]);
}

int main(void)
{
    unsetenv("H5GDS_DECODE_BATCH_MIB"); /* the default: 256 MiB decoded per batch */

    /* 1 GiB in 1 MiB chunks: 256 chunks a full batch */
    const size_t read_1g[] = {16, 80, 336, 592, 848, 960, 1024};
    check_ends("read 1024 x 1 MiB", 1024, MiB, true, read_1g, 7);
    const size_t write_1g[] = {64, 320, 576, 832, 960, 1024};
    check_ends("write 1024 x 1 MiB", 1024, MiB, false, write_1g, 6);
    const size_t read_80[] = {16, 80}; /* a sixteenth, then the last quarter */
    check_ends("read 80 x 1 MiB", 80, MiB, true, read_80, 2);
    const size_t read_70[] = {6, 70}; /* the last batch stays a quarter */
    check_ends("read 70 x 1 MiB", 70, MiB, true, read_70, 2);
    const size_t one[] = {1};
    check_ends("read 1 chunk", 1, MiB, true, one, 1);
    /* 64 MiB chunks: 4 a batch, no ramp; the rest before the last batch in one */
    const size_t huge[] = {4, 6, 10}; /* the last batch a full one: 4 chunks */
    check_ends("read 10 x 64 MiB", 10, 64 * MiB, true, huge, 3);
    /* chunks larger than a batch: one a batch */
    const size_t larger[] = {1, 2, 3};
    check_ends("read 3 x 512 MiB", 3, 512 * MiB, true, larger, 3);

    /* Every size from 1 to 3000 chunks, reads and writes, three chunk
     * sizes: a partition of [0, n) into non-empty batches in order. */
    size_t ends[4096];
    const size_t sizes[] = {4096, MiB, 3 * MiB};
    for (int read = 0; read < 2; read++)
        for (size_t c = 0; c < 3; c++)
            for (size_t n = 1; n <= 3000; n++) {
                long long nb = gds_filtered_batches(n, sizes[c], read, ends, 4096);
                CHECK_MSG(nb > 0 && nb <= 4096, "%zu chunks of %zu bytes (%s): %lld batches", n, sizes[c],
                          read ? "read" : "write", nb);
                if (nb > 0 && nb <= 4096)
                    CHECK_MSG(ends[nb - 1] == n, "%zu chunks of %zu bytes (%s): the last batch ends at %zu", n,
                              sizes[c], read ? "read" : "write", ends[nb - 1]);
            }
    return test_finish("test_filtered_batches");
}
