/*
 * How a GPU read or write of a compressed dataset cuts its chunks into
 * batches (gds_filtered_read_batch_end, gds_filtered_write_batch_end,
 * src/vfd/gds_filtered_common.c), without a GPU: every chunk in exactly one
 * batch, batches in order and never empty; reads in the fewest batches of
 * one size, writes with a first and a last batch a quarter of a full one;
 * tiny and huge chunks; the codec's choice of batch; H5GDS_DECODE_BATCH_MIB;
 * a read cut anew after its first batch with a last batch of its own
 * (gds_filtered_read_tail).
 */
#include <stdlib.h>

#include "check.h"
#include "../src/vfd/gds_filtered.h"

#define MiB ((size_t)1 << 20)

static void check_ends_codec(const char *what, bool writing, size_t nchunks, size_t chunk_bytes, size_t codec,
                             const size_t *want, size_t nwant)
{
    size_t ends[64];
    long long n = gds_filtered_batches(nchunks, chunk_bytes, writing, codec, ends, 64);
    CHECK_MSG(n == (long long)nwant, "%s: %lld batches, expected %zu", what, n, nwant);
    for (size_t i = 0; n == (long long)nwant && i < nwant; i++)
        CHECK_MSG(ends[i] == want[i], "%s: batch %zu ends at %zu, expected %zu", what, i, ends[i], want[i]);
}

static void check_ends(const char *what, bool writing, size_t nchunks, size_t chunk_bytes, const size_t *want,
                       size_t nwant)
{
    check_ends_codec(what, writing, nchunks, chunk_bytes, 0, want, nwant);
}

int main(void)
{
    unsetenv("H5GDS_DECODE_BATCH_MIB"); /* the defaults: 512 MiB decoded per read batch, 256 per write batch */

    size_t ends[4096], ends_tail[2048];

    /* Reads. 1 GiB in 1 MiB chunks: two full batches */
    const size_t gib[] = {512, 1024};
    check_ends("read 1024 x 1 MiB", false, 1024, MiB, gib, 2);
    const size_t uneven[] = {367, 734, 1100}; /* three of 366-367, not two full and a short one */
    check_ends("read 1100 x 1 MiB", false, 1100, MiB, uneven, 3);
    const size_t odd2[] = {343, 685, 1027}; /* 1027 = 3 x 342 + 1: the first batch one chunk longer */
    check_ends("read 1027 x 1 MiB", false, 1027, MiB, odd2, 3);
    const size_t few_r[] = {100};
    check_ends("read 100 x 1 MiB", false, 100, MiB, few_r, 1);
    const size_t one[] = {1};
    check_ends("read 1 chunk", false, 1, MiB, one, 1);
    const size_t huge_r[] = {4, 7, 10}; /* 128 MiB chunks, 4 a batch: three batches, 4 + 3 + 3 */
    check_ends("read 10 x 128 MiB", false, 10, 128 * MiB, huge_r, 3);
    const size_t larger[] = {1, 2, 3}; /* chunks larger than a batch: one a batch */
    check_ends("read 3 x 512 MiB", false, 3, 512 * MiB, larger, 3);

    /* Writes. 1 GiB in 1 MiB chunks: 256 chunks a full batch, 64 the first and the last */
    const size_t gib_w[] = {64, 320, 576, 832, 960, 1024};
    check_ends("write 1024 x 1 MiB", true, 1024, MiB, gib_w, 6);
    const size_t few[] = {64, 100}; /* the first batch, then the rest */
    check_ends("write 100 x 1 MiB", true, 100, MiB, few, 2);
    check_ends("write 1 chunk", true, 1, MiB, one, 1);
    /* 64 MiB chunks: 4 a batch, each a full one; the rest before the last batch in one */
    const size_t huge[] = {4, 6, 10};
    check_ends("write 10 x 64 MiB", true, 10, 64 * MiB, huge, 3);
    check_ends("write 3 x 512 MiB", true, 3, 512 * MiB, larger, 3);

    /* The codec's choice of chunks per read batch (gds_codec_read_batch_chunks)
     * or write batch (gds_codec_write_batch_chunks, Deflate): the fewest
     * batches of at most that many, of one size */
    const size_t codec128[] = {128, 256, 384, 512, 640, 768, 896, 1024};
    check_ends_codec("read 1024 x 1 MiB, codec 128", false, 1024, MiB, 128, codec128, 8);
    const size_t codec300[] = {256, 512, 768, 1024}; /* 4 batches of 256, not 300 + 300 + 300 + 124 */
    check_ends_codec("read 1024 x 1 MiB, codec 300", false, 1024, MiB, 300, codec300, 4);
    check_ends_codec("write 1024 x 1 MiB, codec 128", true, 1024, MiB, 128, codec128, 8);
    check_ends_codec("write 1024 x 1 MiB, codec 300", true, 1024, MiB, 300, codec300, 4);
    const size_t codec400[] = {342, 683, 1024}; /* 1024 in three of 341-342 */
    check_ends_codec("write 1024 x 1 MiB, codec 400", true, 1024, MiB, 400, codec400, 3);
    check_ends_codec("write 1024 x 1 MiB, codec 0", true, 1024, MiB, 0, gib_w, 6);
    setenv("H5GDS_DECODE_BATCH_MIB", "512", 1); /* the environment wins */
    check_ends_codec("read 1024 x 1 MiB, codec 128, 512 MiB set", false, 1024, MiB, 128, gib, 2);
    const size_t env512_w[] = {128, 640, 896, 1024}; /* 512 a full batch, 128 the first and the last */
    check_ends_codec("write 1024 x 1 MiB, codec 128, 512 MiB set", true, 1024, MiB, 128, env512_w, 4);
    unsetenv("H5GDS_DECODE_BATCH_MIB");

    /* the environment sets the batch: 16 MiB, 16 chunks of 1 MiB */
    setenv("H5GDS_DECODE_BATCH_MIB", "16", 1);
    const size_t env_r[] = {14, 27, 40}; /* 40 in three batches: 14, 13, 13 */
    check_ends("read 40 x 1 MiB, 16 MiB batches", false, 40, MiB, env_r, 3);
    const size_t env_w[] = {4, 20, 36, 40}; /* 4 the first and the last */
    check_ends("write 40 x 1 MiB, 16 MiB batches", true, 40, MiB, env_w, 4);
    unsetenv("H5GDS_DECODE_BATCH_MIB");

    /* A read cut anew after its first batch with a last batch of its own
     * (gds_filtered_read_tail): the first batch as planned, the chunks up to
     * the last batch in the fewest batches of at most a full one, of one
     * size, then the last batch */
    const size_t tail1[] = {512, 874, 1024}; /* after the first, 362 chunks in one batch, the last 150 */
    long long nt = gds_filtered_read_batches_tail(1024, MiB, 0, 512, 150, ends_tail, 64);
    CHECK_MSG(nt == 3, "read of 1024 x 1 MiB, a last batch of 150: %lld batches, expected 3", nt);
    for (long long i = 0; nt == 3 && i < 3; i++)
        CHECK_MSG(ends_tail[i] == tail1[i], "last batch of 150: batch %lld ends at %zu, expected %zu", i, ends_tail[i],
                  tail1[i]);
    const size_t tail2[] = {367, 684, 1000, 1100}; /* 633 chunks before the last 100: two of 316-317 */
    nt = gds_filtered_read_batches_tail(1100, MiB, 0, 367, 100, ends_tail, 64);
    CHECK_MSG(nt == 4, "read of 1100 x 1 MiB, a last batch of 100: %lld batches, expected 4", nt);
    for (long long i = 0; nt == 4 && i < 4; i++)
        CHECK_MSG(ends_tail[i] == tail2[i], "last batch of 100: batch %lld ends at %zu, expected %zu", i, ends_tail[i],
                  tail2[i]);
    nt = gds_filtered_read_batches_tail(1024, MiB, 0, 512, 512, ends_tail, 64); /* all that is left: the plan */
    CHECK_MSG(nt == 2 && ends_tail[0] == 512 && ends_tail[1] == 1024, "a last batch of all that is left: %lld", nt);
    for (size_t n = 2; n <= 1600; n += 7)
        for (size_t tail = 1; tail <= 700; tail += 37) {
            size_t first; /* the planned first batch */
            long long planned = gds_filtered_batches(n, MiB, false, n < 512 ? n / 2 : 0, &first, 1);
            CHECK_MSG(planned >= 2, "a read of %zu chunks planned in %lld batches", n, planned);
            if (planned < 2)
                continue;
            size_t full = n < 512 ? n / 2 : 512;
            nt = gds_filtered_read_batches_tail(n, MiB, n < 512 ? n / 2 : 0, first, tail, ends_tail, 2048);
            CHECK_MSG(nt >= 2 && ends_tail[0] == first && ends_tail[nt - 1] == n,
                      "read of %zu from %zu, last batch %zu: %lld batches", n, first, tail, nt);
            if (nt < 2 || tail >= n - first)
                continue;
            CHECK_MSG(ends_tail[nt - 2] == n - tail, "read of %zu, last batch %zu: it begins at %zu", n, tail,
                      ends_tail[nt - 2]);
            size_t lo = (size_t)-1, hi = 0, head = n - tail - first;
            for (long long i = 1; i < nt - 1; i++) {
                size_t w = ends_tail[i] - ends_tail[i - 1];
                lo = w < lo ? w : lo;
                hi = w > hi ? w : hi;
            }
            CHECK_MSG(hi <= full && hi - lo <= 1 && (size_t)(nt - 2) == (head + full - 1) / full,
                      "read of %zu from %zu, last batch %zu: %lld batches of %zu to %zu before it", n, first, tail,
                      nt, lo, hi);
        }

    /* Every size from 1 to 3000 chunks, three chunk sizes, reads and writes:
     * a partition of [0, n) into non-empty batches in order, no batch
     * wider than a full one; reads' batches within one chunk of each other. */
    const size_t sizes[] = {4096, MiB, 3 * MiB};
    for (int writing = 0; writing < 2; writing++)
        for (size_t c = 0; c < 3; c++)
            for (size_t n = 1; n <= 3000; n++) {
                long long nb = gds_filtered_batches(n, sizes[c], writing, 0, ends, 4096);
                CHECK_MSG(nb > 0 && nb <= 4096, "%zu chunks of %zu bytes: %lld batches", n, sizes[c], nb);
                if (nb <= 0 || nb > 4096)
                    continue;
                CHECK_MSG(ends[nb - 1] == n, "%zu chunks of %zu bytes: the last batch ends at %zu", n, sizes[c],
                          ends[nb - 1]);
                size_t full = ((size_t)(writing ? 256 : 512) << 20) / sizes[c], lo = (size_t)-1, hi = 0;
                full = full ? full : 1;
                for (long long i = 0; i < nb; i++) {
                    size_t w = ends[i] - (i ? ends[i - 1] : 0);
                    lo = w < lo ? w : lo;
                    hi = w > hi ? w : hi;
                }
                CHECK_MSG(hi <= full, "%zu chunks of %zu bytes: a batch of %zu chunks (full: %zu)", n, sizes[c], hi,
                          full);
                if (!writing)
                    CHECK_MSG(hi - lo <= 1 && nb == (long long)((n + full - 1) / full),
                              "read of %zu chunks of %zu bytes: %lld batches of %zu to %zu", n, sizes[c], nb, lo, hi);
            }
    return test_finish("test_filtered_batches");
}
