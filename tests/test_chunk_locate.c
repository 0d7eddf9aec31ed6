/*
 * How a GPU read of a compressed dataset finds its chunks
 * (gds_filtered_locate_chunks, src/vfd/gds_filtered.c), without a GPU: for
 * each of HDF5's chunk indexes (single chunk, fixed array, extensible
 * array, version 2 B-tree, version 1 B-tree), boxes of every shape (whole,
 * one chunk, edges, interior), chunks never written, chunks stored with a
 * filter skipped, and a file with a user block, the per-chunk queries and
 * the walk of the index (HDF5 >= 1.14) must report the same extents, and
 * each extent must hold exactly the bytes H5Dread_chunk returns (so the
 * addresses are file offsets the engine can read).
 */
#include <fcntl.h>

#include "test_util.h"
#include "../src/vfd/gds_filtered.h"

#define MAX_CHUNKS 4096

typedef struct layout {
    const char *name;
    int rank;
    hsize_t dims[3], maxdims[3], cdims[3];
    H5F_libver_t low; /* H5F_LIBVER_EARLIEST: version 1 B-tree for chunked datasets with unlimited dims */
} layout_t;

static const layout_t layouts[] = {
    {"single", 2, {40, 30}, {40, 30}, {40, 30}, H5F_LIBVER_LATEST},
    {"fixed-1d", 1, {1000}, {1000}, {64}, H5F_LIBVER_LATEST},
    {"fixed-3d", 3, {9, 10, 11}, {9, 10, 11}, {4, 3, 5}, H5F_LIBVER_LATEST},
    {"extensible", 2, {50, 20}, {H5S_UNLIMITED, 20}, {7, 8}, H5F_LIBVER_LATEST},
    {"btree2", 2, {50, 20}, {H5S_UNLIMITED, H5S_UNLIMITED}, {7, 8}, H5F_LIBVER_LATEST},
    {"btree1", 2, {50, 20}, {H5S_UNLIMITED, H5S_UNLIMITED}, {7, 8}, H5F_LIBVER_EARLIEST},
};

/* The first element of chunk number k of the whole dataset (row-major). */
static void chunk_start(const layout_t *l, size_t k, hsize_t *lo)
{
    for (int d = l->rank - 1; d >= 0; d--) {
        hsize_t n = (l->dims[d] + l->cdims[d] - 1) / l->cdims[d];
        lo[d] = (k % n) * l->cdims[d];
        k /= n;
    }
}

static size_t chunk_count(const layout_t *l)
{
    size_t n = 1;
    for (int d = 0; d < l->rank; d++)
        n *= (size_t)((l->dims[d] + l->cdims[d] - 1) / l->cdims[d]);
    return n;
}

/* Writes every chunk but every fifth with H5Dwrite_chunk (compressible-ish
 * bytes of varying length, as if filtered), every seventh with the filter
 * mask 1 (stored unfiltered). */
static hid_t make_dataset(hid_t file, const layout_t *l)
{
    hid_t space = H5Screate_simple(l->rank, l->dims, l->maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, l->rank, l->cdims);
    H5Pset_deflate(dcpl, 1);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_INCR);
    hid_t dset = H5Dcreate2(file, l->name, H5T_NATIVE_UINT8, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (dset < 0)
        return dset;
    size_t csize = 1;
    for (int d = 0; d < l->rank; d++)
        csize *= (size_t)l->cdims[d];
    unsigned char *bytes = malloc(csize);
    size_t n = chunk_count(l);
    for (size_t k = 0; k < n; k++) {
        if (k % 5 == 3)
            continue; /* never written */
        hsize_t lo[3];
        chunk_start(l, k, lo);
        size_t len = 1 + (k * 37) % csize;
        fill_random(bytes, len, 1000 + k);
        uint32_t mask = k % 7 == 2 ? 1u : 0u;
        CHECK(H5Dwrite_chunk(dset, H5P_DEFAULT, mask, lo, len, bytes) >= 0);
    }
    free(bytes);
    return dset;
}

/* Checks the located chunks of the box [lo, lo + n): the same by both
 * methods, and each extent's bytes equal to H5Dread_chunk's. */
static void check_box(hid_t dset, int fd, const layout_t *l, const hsize_t *lo, const hsize_t *n)
{
    static gds_chunk_location_t by_coord[MAX_CHUNKS], walked[MAX_CHUNKS], automatic[MAX_CHUNKS];
    gds_chunk_locate_t used = GDS_LOCATE_AUTO;
    long long count = gds_filtered_locate_chunks(dset, lo, n, GDS_LOCATE_BY_COORD, by_coord, MAX_CHUNKS, &used);
    CHECK_MSG(count > 0 && count <= MAX_CHUNKS, "%s: %lld chunks", l->name, count);
    CHECK(used == GDS_LOCATE_BY_COORD);
    if (count <= 0 || count > MAX_CHUNKS)
        return;
    /* the box's chunk grid, row-major */
    hsize_t expect = 1;
    for (int d = 0; d < l->rank; d++)
        expect *= (lo[d] + n[d] - 1) / l->cdims[d] - lo[d] / l->cdims[d] + 1;
    CHECK_MSG((hsize_t)count == expect, "%s: %lld chunks, the box has %llu", l->name, count,
              (unsigned long long)expect);
    long long automatic_count =
        gds_filtered_locate_chunks(dset, lo, n, GDS_LOCATE_AUTO, automatic, MAX_CHUNKS, &used);
    CHECK(automatic_count == count);
#if H5_VERSION_GE(1, 14, 0)
    CHECK_MSG(used == (count >= 2 ? GDS_LOCATE_WALK : GDS_LOCATE_BY_COORD), "%s: auto used %d for %lld chunks",
              l->name, (int)used, count);
    long long walked_count = gds_filtered_locate_chunks(dset, lo, n, GDS_LOCATE_WALK, walked, MAX_CHUNKS, &used);
    CHECK(walked_count == count && used == GDS_LOCATE_WALK);
#else
    H5E_BEGIN_TRY
    {
        CHECK_MSG(gds_filtered_locate_chunks(dset, lo, n, GDS_LOCATE_WALK, walked, MAX_CHUNKS, &used) == -1,
                  "walking the chunk index needs HDF5 1.14: refused");
    }
    H5E_END_TRY;
    memcpy(walked, by_coord, sizeof(gds_chunk_location_t) * (size_t)count);
#endif
    unsigned char *stored = malloc(1 << 16), *from_file = malloc(1 << 16);
    for (long long k = 0; k < count; k++) {
        const gds_chunk_location_t *a = &by_coord[k], *w = &walked[k], *u = &automatic[k];
        CHECK_MSG(!memcmp(a->lo, w->lo, sizeof a->lo) && a->addr == w->addr && a->stored == w->stored &&
                      a->mask == w->mask,
                  "%s chunk %lld: by coordinates addr %llu size %llu mask %u, walked addr %llu size %llu mask %u",
                  l->name, k, (unsigned long long)a->addr, (unsigned long long)a->stored, a->mask,
                  (unsigned long long)w->addr, (unsigned long long)w->stored, w->mask);
        CHECK(!memcmp(a->lo, u->lo, sizeof a->lo) && a->addr == u->addr && a->stored == u->stored);
        for (int d = 0; d < l->rank; d++)
            CHECK(a->lo[d] % l->cdims[d] == 0 && a->lo[d] + l->cdims[d] > lo[d] && a->lo[d] < lo[d] + n[d]);
        /* H5Dget_chunk_storage_size says whether it was written */
        hsize_t size = 0;
        herr_t rc;
        H5E_BEGIN_TRY { rc = H5Dget_chunk_storage_size(dset, a->lo, &size); }
        H5E_END_TRY;
        if (rc < 0 || size == 0) {
            CHECK_MSG(a->addr == HADDR_UNDEF && a->stored == 0, "%s chunk %lld: never written, yet located",
                      l->name, k);
            continue;
        }
        CHECK_MSG(a->addr != HADDR_UNDEF && a->stored == size, "%s chunk %lld: stored %llu, HDF5 says %llu",
                  l->name, k, (unsigned long long)a->stored, (unsigned long long)size);
        if (a->addr == HADDR_UNDEF || size > (1 << 16))
            continue;
        uint32_t mask = 0;
        size_t got = (size_t)size;
        CHECK(H5Dread_chunk(dset, H5P_DEFAULT, a->lo, &mask, stored) >= 0);
        /* the mask make_dataset wrote (HDF5 1.10's H5Dread_chunk reports
         * all ones for a single-chunk index, so it is not the reference) */
        size_t index = 0;
        for (int d = 0; d < l->rank; d++)
            index = index * (size_t)((l->dims[d] + l->cdims[d] - 1) / l->cdims[d]) + (size_t)(a->lo[d] / l->cdims[d]);
        CHECK_MSG(a->mask == (index % 7 == 2 ? 1u : 0u), "%s chunk %lld: located mask %u", l->name, k, a->mask);
        CHECK_MSG(pread(fd, from_file, got, (off_t)a->addr) == (ssize_t)got && !memcmp(stored, from_file, got),
                  "%s chunk %lld: the bytes at file offset %llu are not the chunk's", l->name, k,
                  (unsigned long long)a->addr);
    }
    free(stored);
    free(from_file);
}

static void check_file(const char *path, hsize_t userblock)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        const layout_t *l = &layouts[i];
        hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
        H5Pset_libver_bounds(fapl, l->low, H5F_LIBVER_LATEST);
        if (userblock)
            H5Pset_userblock(fcpl, userblock);
        hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
        CHECK(file >= 0);
        hid_t dset = make_dataset(file, l);
        CHECK(dset >= 0);
        CHECK(H5Fflush(file, H5F_SCOPE_LOCAL) >= 0);
        int fd = open(path, O_RDONLY);
        CHECK(fd >= 0);
        hsize_t lo[3] = {0, 0, 0}, n[3];
        memcpy(n, l->dims, sizeof n);
        check_box(dset, fd, l, lo, n); /* the whole dataset */
        for (int d = 0; d < l->rank; d++) {
            lo[d] = l->dims[d] > 1 ? l->dims[d] / 3 : 0; /* interior, across chunk borders */
            n[d] = l->dims[d] - lo[d] > 2 ? (l->dims[d] - lo[d]) / 2 : 1;
        }
        check_box(dset, fd, l, lo, n);
        for (int d = 0; d < l->rank; d++) {
            lo[d] = l->dims[d] - 1; /* the last element: an edge chunk */
            n[d] = 1;
        }
        check_box(dset, fd, l, lo, n);
        for (int d = 0; d < l->rank; d++) {
            lo[d] = l->cdims[d] < l->dims[d] ? l->cdims[d] : 0; /* one chunk exactly */
            n[d] = l->cdims[d] < l->dims[d] - lo[d] ? l->cdims[d] : l->dims[d] - lo[d];
        }
        check_box(dset, fd, l, lo, n);
        /* a box past the extent, and a contiguous dataset: refused */
        hsize_t far[3] = {l->dims[0], 0, 0}, one[3] = {1, 1, 1};
        H5E_BEGIN_TRY
        {
            CHECK(gds_filtered_locate_chunks(dset, far, one, GDS_LOCATE_AUTO, NULL, 0, NULL) == -1);
        }
        H5E_END_TRY;
        close(fd);
        H5Dclose(dset);
        H5Fclose(file);
        H5Pclose(fapl);
        H5Pclose(fcpl);
    }
    /* a contiguous dataset is refused */
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t dims[1] = {100}, lo[1] = {0};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t dset = H5Dcreate2(file, "contiguous", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5E_BEGIN_TRY { CHECK(gds_filtered_locate_chunks(dset, lo, dims, GDS_LOCATE_AUTO, NULL, 0, NULL) == -1); }
    H5E_END_TRY;
    H5Dclose(dset);
    H5Sclose(space);
    H5Fclose(file);
}

int main(void)
{
    check_file(test_path("located.h5"), 0);
    check_file(test_path("located-userblock.h5"), 4096);
    return test_finish("test_chunk_locate");
}
