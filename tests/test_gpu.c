/* GPU data path: device, managed, pinned and pageable buffers through the
 * gds driver, at the VFD level (odd sizes, unaligned offsets, reads past EOF)
 * and the dataset level (contiguous, chunked, compact, hyperslabs, the
 * checked entry points on datasets that do and do not allow pass-through).
 * Random data, every byte compared.
 *   test_gpu CONFIG [--large]     CONFIG is a gds configuration string
 * Exits 77 (skipped) on machines without a GPU. */
#include <stdint.h>
#include <unistd.h>

#include "gpu_kernels.h"
#include "gpu_util.h"

static const char *config;

/* The device route this test run must see (H5GDS_EXPECT_ROUTE; "auto":
 * cuFile where nvidia-fs is loaded, else staged) and the cuFile fallbacks
 * each file must count (H5GDS_EXPECT_FALLBACKS). */
static const char *expected_route(void)
{
    const char *e = getenv("H5GDS_EXPECT_ROUTE");
    if (!e || !*e) {
        fprintf(stderr, "H5GDS_EXPECT_ROUTE is not set: a GPU test must say which route it expects\n");
        exit(2);
    }
    if (!strcmp(e, "auto"))
        return access("/proc/driver/nvidia-fs/version", F_OK) == 0 ? "cufile" : "staged";
    return e;
}

static uint64_t expected_fallbacks(void)
{
    const char *e = getenv("H5GDS_EXPECT_FALLBACKS");
    return e ? strtoull(e, NULL, 10) : 0;
}

/* The file's device traffic went the expected way, and only that way. */
static void check_route(hid_t f, const char *what)
{
    H5FD_gds_stats_t st;
    CHECK(H5FD_gds_get_stats(f, &st) >= 0);
    const char *expect = expected_route();
    CHECK_MSG(!strcmp(expect, H5FD_gds_route_name(st.device_route)), "%s: device route %s, expected %s", what,
              H5FD_gds_route_name(st.device_route), expect);
    CHECK_MSG(st.cufile_fallbacks == expected_fallbacks(), "%s: %llu cuFile fallbacks, expected %llu", what,
              (unsigned long long)st.cufile_fallbacks, (unsigned long long)expected_fallbacks());
    CHECK_MSG(st.device_path_failures == 0, "%s: %llu device requests failed", what,
              (unsigned long long)st.device_path_failures);
    /* threads / io_block_size left at auto: tuned for this file system */
    bool auto_tuned = !strstr(config, "threads=") && !strstr(config, "io_block_size=") && strcmp(expect, "posix-bounce");
    if (auto_tuned)
        CHECK_MSG(st.tuned == 1 || st.tuned == 2, "%s: auto settings not tuned (%d)", what, st.tuned);
    static bool said;
    if (!said) {
        said = true;
        printf("device transfers: %u threads x %zu-byte blocks (tuned: %d)\n", st.device_threads,
               st.device_block_size, st.tuned);
    }
    static const H5FD_gds_route_t device_routes[] = {H5FD_GDS_ROUTE_STAGED, H5FD_GDS_ROUTE_CUFILE,
                                                     H5FD_GDS_ROUTE_POSIX_BOUNCE};
    for (size_t i = 0; i < 3; i++) {
        H5FD_gds_route_t r = device_routes[i];
        uint64_t bytes = st.read_bytes[r] + st.write_bytes[r];
        bool expected = !strcmp(expect, H5FD_gds_route_name(r));
        CHECK_MSG(expected ? bytes > 0 : bytes == 0, "%s: %llu device bytes through %s (expected route %s)", what,
                  (unsigned long long)bytes, H5FD_gds_route_name(r), expect);
    }
}

static hid_t fapl_for_test(void)
{
    hid_t fapl = gds_fapl(config);
    if (fapl < 0) {
        fprintf(stderr, "bad configuration '%s'\n", config);
        exit(2);
    }
    return fapl;
}

static void test_classification(void)
{
    for (int k = 0; k < MEM_NKINDS; k++) {
        test_buffer_t b = buffer_alloc((mem_kind_t)k, 4096);
        H5FD_gds_memory_t expect[] = {H5FD_GDS_MEMORY_HOST, H5FD_GDS_MEMORY_PINNED, H5FD_GDS_MEMORY_DEVICE,
                                      H5FD_GDS_MEMORY_MANAGED};
        CHECK_MSG(H5FD_gds_memory_kind(b.ptr) == expect[k], "%s classified as %d", mem_names[k],
                  (int)H5FD_gds_memory_kind(b.ptr));
        CHECK_MSG(H5FD_gds_memory_kind((char *)b.ptr + 1001) == expect[k], "interior %s pointer", mem_names[k]);
        buffer_free(&b);
    }
    int on_stack;
    CHECK(H5FD_gds_memory_kind(&on_stack) == H5FD_GDS_MEMORY_HOST);
}

/* A small malloc'd buffer lives in the brk heap, which the driver answers as
 * host memory without asking CUDA; registered with cuMemHostRegister it is
 * still moved correctly, and the public query still says pinned. */
static void test_heap_registered(void)
{
    const gds_cuda_api_t *cu = gds_cuda_load(NULL);
    size_t n = 8192;
    unsigned char *heap = malloc(n), *expect = malloc(n);
    CHECK(heap && expect && (uintptr_t)heap < (uintptr_t)sbrk(0)); /* really in the brk heap */
    if (!heap || !expect || !cu)
        goto out;
    CHECK(H5FD_gds_memory_kind(heap) == H5FD_GDS_MEMORY_HOST);
    CHECK_MSG(cu->MemHostRegister(heap, n, 0) == CUDA_SUCCESS, "cuMemHostRegister of a heap buffer");
    CHECK_MSG(H5FD_gds_memory_kind(heap) == H5FD_GDS_MEMORY_PINNED, "registered heap buffer classified as %d",
              (int)H5FD_gds_memory_kind(heap));
    hid_t fapl = fapl_for_test();
    H5FD_t *f = H5FDopen(test_path("gpu_heap.bin"), H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC, fapl, HADDR_UNDEF);
    CHECK(f != NULL);
    if (f) {
        fill_random(heap, n, 77);
        memcpy(expect, heap, n);
        H5FDset_eoa(f, H5FD_MEM_DRAW, 3 * n);
        CHECK(H5FDwrite(f, H5FD_MEM_DRAW, H5P_DEFAULT, 100, n, heap) >= 0);
        memset(heap, 0, n);
        CHECK(H5FDread(f, H5FD_MEM_DRAW, H5P_DEFAULT, 100, n, heap) >= 0);
        CHECK_MSG(memcmp(heap, expect, n) == 0, "registered heap buffer: data differ after a round trip");
        CHECK(H5FDclose(f) >= 0);
    }
    H5Pclose(fapl);
    CHECK(cu->MemHostUnregister(heap) == CUDA_SUCCESS);
out:
    free(heap);
    free(expect);
}

/* Write `n` random bytes from a buffer of `kind` (at interior offset `at`)
 * to file offset `off`, read them back into a fresh buffer, compare. */
static void vfd_round_trip(H5FD_t *f, mem_kind_t kind, size_t n, haddr_t off, size_t at, uint64_t seed)
{
    unsigned char *src = malloc(n + 1), *got = malloc(n + 1);
    fill_random(src, n, seed);
    test_buffer_t w = buffer_alloc(kind, n + at), r = buffer_alloc(kind, n + at);
    buffer_put(&w, at, src, n);
    buffer_fill(&r, 0xCD);
    if (H5FDget_eoa(f, H5FD_MEM_DRAW) < off + n)
        H5FDset_eoa(f, H5FD_MEM_DRAW, off + n);
    CHECK_MSG(H5FDwrite(f, H5FD_MEM_DRAW, H5P_DEFAULT, off, n, (char *)w.ptr + at) >= 0, "%s write %zu at %llu",
              mem_names[kind], n, (unsigned long long)off);
    CHECK_MSG(H5FDread(f, H5FD_MEM_DRAW, H5P_DEFAULT, off, n, (char *)r.ptr + at) >= 0, "%s read %zu at %llu",
              mem_names[kind], n, (unsigned long long)off);
    buffer_get(&r, at, got, n);
    CHECK_MSG(memcmp(src, got, n) == 0, "%s: %zu bytes at file offset %llu (buffer +%zu) differ", mem_names[kind], n,
              (unsigned long long)off, at);
    if (at > 0) { /* the bytes before the interior pointer are untouched */
        unsigned char before[8];
        buffer_get(&r, at - 1, before, 1);
        CHECK_MSG(before[0] == 0xCD, "%s: byte before the buffer overwritten", mem_names[kind]);
    }
    buffer_free(&w);
    buffer_free(&r);
    free(src);
    free(got);
}

static void test_vfd_level(void)
{
    const char *path = test_path("gpu_vfd.bin");
    hid_t fapl = fapl_for_test();
    H5FD_t *f = H5FDopen(path, H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC, fapl, HADDR_UNDEF);
    CHECK(f != NULL);
    if (!f)
        return;
    static const size_t sizes[] = {1, 7, 4095, 4096, 4097, 65536 + 3, (1 << 20) + 13, (9 << 20) + 4099,
                                   (33 << 20) + 5};
    static const haddr_t offsets[] = {0, 1, 4093, 8192 + 17, (5 << 20) + 4096};
    uint64_t seed = 100;
    for (int k = 0; k < MEM_NKINDS; k++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (size_t j = 0; j < sizeof offsets / sizeof offsets[0]; j++) {
                if (sizes[i] > (4 << 20) && j % 2 == 1)
                    continue; /* enough big cases */
                vfd_round_trip(f, (mem_kind_t)k, sizes[i], offsets[j], k >= MEM_DEVICE ? 3 : 0, seed++);
            }

    /* read straddling EOF into device memory: the tail is zeroed on the GPU */
    haddr_t eof = H5FDget_eof(f, H5FD_MEM_DRAW);
    size_t n = (3 << 20) + 77, inside = 12345;
    H5FDset_eoa(f, H5FD_MEM_DRAW, eof + n);
    for (int k = MEM_DEVICE; k <= MEM_MANAGED; k++) {
        test_buffer_t r = buffer_alloc((mem_kind_t)k, n);
        buffer_fill(&r, 0xEE);
        CHECK(H5FDread(f, H5FD_MEM_DRAW, H5P_DEFAULT, eof - inside, n, r.ptr) >= 0);
        unsigned char *got = malloc(n), *expect = malloc(inside);
        buffer_get(&r, 0, got, n);
        CHECK(H5FDread(f, H5FD_MEM_DRAW, H5P_DEFAULT, eof - inside, inside, expect) >= 0);
        CHECK_MSG(memcmp(got, expect, inside) == 0, "%s: data before EOF", mem_names[k]);
        size_t nonzero = 0;
        for (size_t i = inside; i < n; i++)
            nonzero += got[i] != 0;
        CHECK_MSG(nonzero == 0, "%s: %zu bytes past EOF not zero", mem_names[k], nonzero);
        free(got);
        free(expect);
        buffer_free(&r);
    }
    /* EOF is kept current after device writes */
    test_buffer_t w = buffer_alloc(MEM_DEVICE, 5000);
    buffer_fill(&w, 0x5A);
    haddr_t end = H5FDget_eof(f, H5FD_MEM_DRAW) + 100000;
    H5FDset_eoa(f, H5FD_MEM_DRAW, end + 5000);
    CHECK(H5FDwrite(f, H5FD_MEM_DRAW, H5P_DEFAULT, end, 5000, w.ptr) >= 0);
    CHECK(H5FDget_eof(f, H5FD_MEM_DRAW) == end + 5000);
    buffer_free(&w);
    CHECK(H5FDclose(f) >= 0);
    H5Pclose(fapl);
}

/* Dataset-level cases. */
typedef struct dset_case {
    const char *name;
    int layout;           /* 0 contiguous, 1 chunked, 2 compact, 3 chunked+deflate */
    bool convert;         /* file type int64, memory type int32 */
    bool helpers;         /* use H5FD_gds_create_dcpl/dapl */
    H5FD_gds_route_t expect_write;
} dset_case_t;

static void test_dataset_case(hid_t f, const dset_case_t *c, mem_kind_t kind)
{
    const hsize_t rows = 300, cols = 1000; /* 1.2 MB of int32 */
    size_t n = rows * cols;
    int32_t *src = malloc(n * 4), *got = malloc(n * 4);
    fill_random(src, n * 4, 777 + (uint64_t)c->layout);
    hsize_t dims[2] = {rows, c->layout == 2 ? 10 : cols}; /* compact must fit in 64 KiB */
    if (c->layout == 2)
        n = rows * 10;
    hid_t s = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = c->helpers ? H5FD_gds_create_dcpl() : H5Pcreate(H5P_DATASET_CREATE);
    hid_t dapl = c->helpers ? H5FD_gds_create_dapl() : H5Pcreate(H5P_DATASET_ACCESS);
    hsize_t chunk[2] = {100, 500};
    if (c->layout == 1 || c->layout == 3)
        H5Pset_chunk(dcpl, 2, chunk);
    if (c->layout == 3)
        H5Pset_deflate(dcpl, 1);
    if (c->layout == 2)
        H5Pset_layout(dcpl, H5D_COMPACT);
    char name[128];
    snprintf(name, sizeof name, "%s_%s", c->name, mem_names[kind]);
    hid_t d = H5Dcreate2(f, name, c->convert ? H5T_STD_I64LE : H5T_STD_I32LE, s, H5P_DEFAULT, dcpl, dapl);
    CHECK(d >= 0);
    test_buffer_t b = buffer_alloc(kind, n * 4);
    buffer_put(&b, 0, src, n * 4);
    CHECK_MSG(H5Dwrite_gds(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0, "%s write", name);
    H5FD_gds_route_t route = H5FD_gds_last_route();
    /* whole chunks of device data into a deflate dataset are encoded on the
     * GPU where nvCOMP loads (the same search as the library's) */
    H5FD_gds_route_t expect = c->expect_write;
    const char *no_nvcomp = NULL;
    if (c->layout == 3 && gds_nvcomp_load(&no_nvcomp))
        expect = H5FD_GDS_ROUTE_GPU_ENCODE;
    if (kind == MEM_DEVICE)
        CHECK_MSG(route == expect, "%s: write route %s, expected %s", name, H5FD_gds_route_name(route),
                  H5FD_gds_route_name(expect));
    buffer_fill(&b, 0xAB);
    CHECK_MSG(H5Dread_gds(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0, "%s read", name);
    buffer_get(&b, 0, got, n * 4);
    CHECK_MSG(memcmp(src, got, n * 4) == 0, "%s: data differs", name);

    /* partial hyperslab into the middle of a device buffer: the rest is kept */
    hsize_t start[2] = {17, 3}, count[2] = {50, dims[1] - 5};
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(2, dims, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    H5Sselect_hyperslab(ms, H5S_SELECT_SET, start, NULL, count, NULL);
    buffer_fill(&b, 0x11);
    CHECK_MSG(H5Dread_gds(d, H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, b.ptr) >= 0, "%s hyperslab read", name);
    buffer_get(&b, 0, got, n * 4);
    size_t bad = 0;
    for (hsize_t i = 0; i < dims[0]; i++)
        for (hsize_t j = 0; j < dims[1]; j++) {
            bool in = i >= start[0] && i < start[0] + count[0] && j >= start[1] && j < start[1] + count[1];
            int32_t v = got[i * dims[1] + j];
            bad += in ? v != src[i * dims[1] + j] : v != 0x11111111;
        }
    CHECK_MSG(bad == 0, "%s: hyperslab read, %zu elements wrong", name, bad);
    H5Sclose(fs);
    H5Sclose(ms);
    buffer_free(&b);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Pclose(dapl);
    H5Sclose(s);
    free(src);
    free(got);
}

static void test_dataset_level(void)
{
    const char *path = test_path("gpu_dsets.h5");
    hid_t fapl = fapl_for_test();
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(f >= 0);
    static const dset_case_t cases[] = {
        {"contiguous", 0, false, false, H5FD_GDS_ROUTE_PASSTHROUGH},
        {"contiguous_helpers", 0, false, true, H5FD_GDS_ROUTE_PASSTHROUGH},
        {"chunked_helpers", 1, false, true, H5FD_GDS_ROUTE_PASSTHROUGH},
        {"chunked_cached", 1, false, false, H5FD_GDS_ROUTE_HOST_STAGED}, /* chunks fit the cache */
#if H5_VERSION_GE(1, 14, 0)
        {"compact", 2, false, true, H5FD_GDS_ROUTE_PASSTHROUGH}, /* the driver copies (ctl MEM_COPY) */
#else
        {"compact", 2, false, true, H5FD_GDS_ROUTE_HOST_STAGED},
#endif
        {"deflate", 3, false, true, H5FD_GDS_ROUTE_HOST_STAGED}, /* gpu-encode with nvCOMP */
        {"converted", 0, true, true, H5FD_GDS_ROUTE_HOST_STAGED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].layout == 3 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0)
            continue;
        for (int k = 0; k < MEM_NKINDS; k++)
            test_dataset_case(f, &cases[i], (mem_kind_t)k);
    }
    /* plain H5Dwrite/H5Dread with a device buffer on a pass-through dataset */
    hsize_t dims[1] = {(8 << 20) + 3};
    hid_t s = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(f, "plain", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    unsigned char *src = malloc(dims[0]), *got = malloc(dims[0]);
    fill_random(src, dims[0], 4242);
    test_buffer_t b = buffer_alloc(MEM_DEVICE, dims[0]);
    buffer_put(&b, 0, src, dims[0]);
    H5FD_gds_stats_t before;
    CHECK(H5FD_gds_get_stats(f, &before) >= 0);
    CHECK(H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    buffer_fill(&b, 0);
    CHECK(H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    buffer_get(&b, 0, got, dims[0]);
    CHECK(memcmp(src, got, dims[0]) == 0);
    H5FD_gds_stats_t st;
    CHECK(H5FD_gds_get_stats(f, &st) >= 0);
    uint64_t dev_bytes = st.write_bytes[H5FD_GDS_ROUTE_STAGED] + st.write_bytes[H5FD_GDS_ROUTE_CUFILE] +
                         st.write_bytes[H5FD_GDS_ROUTE_POSIX_BOUNCE];
    CHECK_MSG(dev_bytes >= dims[0], "device bytes counted: %llu", (unsigned long long)dev_bytes);
    printf("device route of this file: %s (cuFile fallbacks %llu)\n", H5FD_gds_route_name(st.device_route),
           (unsigned long long)st.cufile_fallbacks);
    check_route(f, "datasets file");
    /* register=on through cuFile: this new allocation was registered once
     * (the read reused the write's registration) */
    uint64_t registered = st.buffer_registrations - before.buffer_registrations;
    if (st.device_route == H5FD_GDS_ROUTE_CUFILE && strstr(config, "register=on"))
        CHECK_MSG(registered == 1, "buffer registrations: %llu, expected 1", (unsigned long long)registered);
    else
        CHECK(st.buffer_registrations == 0);
    buffer_free(&b);
    free(src);
    free(got);
    H5Dclose(d);
    H5Sclose(s);
    CHECK(H5Fclose(f) >= 0);
    H5Pclose(fapl);
}

/* Several files open at once, written alternately from device memory. */
static void test_several_files(void)
{
    enum { NF = 3 };
    hid_t fapl = fapl_for_test();
    hid_t f[NF], d[NF];
    size_t n = (6 << 20) + 11;
    unsigned char *src = malloc(n), *got = malloc(n);
    test_buffer_t b = buffer_alloc(MEM_DEVICE, n);
    hsize_t dims[1] = {n};
    hid_t s = H5Screate_simple(1, dims, NULL);
    for (int i = 0; i < NF; i++) {
        char name[64];
        snprintf(name, sizeof name, "gpu_multi_%d.h5", i);
        f[i] = H5Fcreate(test_path(name), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        d[i] = H5Dcreate2(f[i], "x", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    }
    for (int i = 0; i < NF; i++) {
        fill_random(src, n, 900 + (uint64_t)i);
        buffer_put(&b, 0, src, n);
        CHECK(H5Dwrite(d[i], H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    }
    for (int i = NF - 1; i >= 0; i--) {
        fill_random(src, n, 900 + (uint64_t)i);
        buffer_fill(&b, 0);
        CHECK(H5Dread(d[i], H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
        buffer_get(&b, 0, got, n);
        CHECK_MSG(memcmp(src, got, n) == 0, "file %d differs", i);
        check_route(f[i], "one of several files");
        H5Dclose(d[i]);
        CHECK(H5Fclose(f[i]) >= 0);
    }
    H5Sclose(s);
    buffer_free(&b);
    free(src);
    free(got);
    H5Pclose(fapl);
}


/* A compact dataset with plain H5Dwrite/H5Dread and a device pointer: on
 * HDF5 >= 1.14 the driver makes HDF5's copies (ctl H5FD_CTL_MEM_COPY) with
 * the CUDA driver; before, only H5Dwrite_gds/H5Dread_gds may be used. */
static void test_compact_plain(void)
{
#if H5_VERSION_GE(1, 14, 0)
    hid_t fapl = fapl_for_test();
    hid_t f = H5Fcreate(test_path("gpu_compact.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hsize_t dims[1] = {3000};
    hid_t s = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_COMPACT);
    hid_t d = H5Dcreate2(f, "compact", H5T_NATIVE_FLOAT, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    float src[3000], got[3000];
    fill_random(src, sizeof src, 5150);
    test_buffer_t b = buffer_alloc(MEM_DEVICE, sizeof src);
    buffer_put(&b, 0, src, sizeof src);
    H5FD_gds_stats_t before, after;
    CHECK(H5FD_gds_get_stats(f, &before) >= 0);
    CHECK(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    buffer_fill(&b, 0);
    CHECK(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    buffer_get(&b, 0, got, sizeof got);
    CHECK_MSG(memcmp(src, got, sizeof src) == 0, "compact dataset through plain H5Dwrite/H5Dread differs");
    CHECK(H5FD_gds_get_stats(f, &after) >= 0);
    CHECK_MSG(after.device_memcpys >= before.device_memcpys + 2, "device copies by the driver: %llu",
              (unsigned long long)(after.device_memcpys - before.device_memcpys));
    /* reopened: the bytes went into the object header */
    H5Dclose(d);
    CHECK(H5Fclose(f) >= 0);
    f = H5Fopen(test_path("gpu_compact.h5"), H5F_ACC_RDONLY, fapl);
    d = H5Dopen2(f, "compact", H5P_DEFAULT);
    memset(got, 0, sizeof got);
    CHECK(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    CHECK_MSG(memcmp(src, got, sizeof src) == 0, "compact dataset read back on the host differs");
    buffer_free(&b);
    H5Dclose(d);
    H5Fclose(f);
    H5Sclose(s);
    H5Pclose(dcpl);
    H5Pclose(fapl);
#endif
}

/* Stream ordering (H5Pset_dxpl_gds_stream): a kernel that writes a buffer
 * after a delay, then H5Dwrite of that buffer must store the kernel's
 * values when ordered against the kernel's stream; a read ordered "none"
 * returns while a long kernel still runs on the legacy default stream. */
static CUfunction spin_fill;

static void launch_spin_fill(CUstream stream, void *buf, size_t words, unsigned long long ns, unsigned value)
{
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)buf;
    unsigned long long n = words;
    void *args[] = {&p, &n, &ns, &value};
    GPU_OK(cu.LaunchKernel(spin_fill, 64, 1, 1, 256, 1, 1, 0, stream, args, NULL));
}

static void expected_fill(unsigned *out, size_t words, unsigned value)
{
    for (size_t i = 0; i < words; i++)
        out[i] = value ^ (unsigned)(i * 2654435761u);
}

static void test_stream_order(void)
{
    CUmodule module;
    GPU_OK(cu.ModuleLoadData(&module, gpu_kernels_ptx));
    GPU_OK(cu.ModuleGetFunction(&spin_fill, module, "spin_fill"));
    hid_t fapl = fapl_for_test();
    hid_t f = H5Fcreate(test_path("gpu_streams.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    const size_t words = (4 << 20) + 5;
    hsize_t dims[1] = {words};
    hid_t s = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(f, "x", H5T_NATIVE_UINT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    unsigned *expect = malloc(words * 4), *got = malloc(words * 4);
    test_buffer_t b = buffer_alloc(MEM_DEVICE, words * 4), r = buffer_alloc(MEM_DEVICE, words * 4);
    CUstream stream;
    GPU_OK(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    void *got_stream = NULL;
    CHECK(H5Pget_dxpl_gds_stream(dxpl, &got_stream) >= 0 && got_stream == H5FD_GDS_STREAM_LEGACY);
    CHECK(H5Pset_dxpl_gds_stream(H5P_DEFAULT, stream) < 0); /* the default list cannot change */

    /* 1. default ordering: the legacy stream's kernel finishes first */
    buffer_fill(&b, 0);
    launch_spin_fill(NULL, b.ptr, words, 50 * 1000 * 1000ull, 0xA1);
    CHECK(H5Dwrite(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    CHECK(H5Dread(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    expected_fill(expect, words, 0xA1);
    CHECK_MSG(memcmp(expect, got, words * 4) == 0, "legacy ordering: the write did not wait for the kernel");

    /* 2. the application's own stream, named on the transfer list */
    buffer_fill(&b, 0);
    CHECK(H5Pset_dxpl_gds_stream(dxpl, stream) >= 0);
    CHECK(H5Pget_dxpl_gds_stream(dxpl, &got_stream) >= 0 && got_stream == (void *)stream);
    launch_spin_fill(stream, b.ptr, words, 50 * 1000 * 1000ull, 0xB2);
    CHECK(H5Dwrite(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, dxpl, b.ptr) >= 0);
    CHECK(H5Dread(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    expected_fill(expect, words, 0xB2);
    CHECK_MSG(memcmp(expect, got, words * 4) == 0, "stream ordering: the write did not wait for the stream");
    /* and a read into device memory named on that stream is complete on return */
    CHECK(H5Dread(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, dxpl, r.ptr) >= 0);
    buffer_get(&r, 0, got, words * 4);
    CHECK_MSG(memcmp(expect, got, words * 4) == 0, "stream-ordered read differs");

    /* 3. "none": a read overlaps a long kernel on the legacy stream (the
     * staged path's copies run on streams of their own; cuFile's
     * compatibility mode makes its own copies, which we cannot order) */
    CHECK(H5Pset_dxpl_gds_stream(dxpl, H5FD_GDS_STREAM_NONE) >= 0);
    CHECK(H5Dread(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, dxpl, r.ptr) >= 0); /* warm the staging rings */
    CUevent kernel_done;
    GPU_OK(cu.EventCreate(&kernel_done, CU_EVENT_DISABLE_TIMING));
    buffer_fill(&r, 0); /* synchronous: done before the kernel starts */
    launch_spin_fill(NULL, b.ptr, 1, 3000 * 1000 * 1000ull, 0xC3); /* 3 s on the legacy stream */
    GPU_OK(cu.EventRecord(kernel_done, NULL));
    CHECK(H5Dread(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, dxpl, r.ptr) >= 0);
    CUresult q = cu.EventQuery(kernel_done);
    bool ours = !strcmp(expected_route(), "staged") || !strcmp(expected_route(), "posix-bounce");
    printf("read with ordering none while a 3 s kernel runs: kernel %s when the read returned\n",
           q == CUDA_ERROR_NOT_READY ? "still running" : "finished");
    if (ours)
        CHECK_MSG(q == CUDA_ERROR_NOT_READY, "ordering none: the read waited for the legacy stream's kernel");
    GPU_OK(cu.EventSynchronize(kernel_done));
    /* the read's data is complete (copied out with a synchronous call
     * that itself waits for the legacy stream: fine, the kernel is done) */
    buffer_get(&r, 0, got, words * 4);
    CHECK_MSG(memcmp(expect, got, words * 4) == 0, "ordering none: read data differs");
    /* legacy ordering: the read waits for the kernel */
    launch_spin_fill(NULL, b.ptr, 1, 300 * 1000 * 1000ull, 0xC3);
    GPU_OK(cu.EventRecord(kernel_done, NULL));
    CHECK(H5Dread(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.ptr) >= 0);
    CHECK_MSG(cu.EventQuery(kernel_done) == CUDA_SUCCESS, "legacy ordering: the read returned before the kernel");
    check_route(f, "stream-ordered file");

    GPU_OK(cu.EventDestroy(kernel_done));
    GPU_OK(cu.StreamDestroy(stream));
    buffer_free(&b);
    buffer_free(&r);
    free(expect);
    free(got);
    H5Pclose(dxpl);
    H5Dclose(d);
    H5Sclose(s);
    CHECK(H5Fclose(f) >= 0);
    H5Pclose(fapl);
}

/* Write-behind from device memory: the write returns after a snapshot (in
 * device memory, or pinned host memory with write_behind_memory=host); the
 * application overwrites its buffer at once; reads see the write; memory
 * stays within the budget. */
static void test_write_behind_device(const char *memory)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s%swrite_behind=64MiB,write_behind_memory=%s", config, *config ? "," : "", memory);
    hid_t fapl = gds_fapl(cfg);
    CHECK(fapl >= 0);
    hid_t f = H5Fcreate(test_path("gpu_wb.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    const size_t n = (40 << 20) + 7;
    hsize_t dims[1] = {n};
    hid_t s = H5Screate_simple(1, dims, NULL), dcpl = H5FD_gds_create_dcpl();
    hid_t d1 = H5Dcreate2(f, "a", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hid_t d2 = H5Dcreate2(f, "b", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    unsigned char *src1 = malloc(n), *src2 = malloc(n), *got = malloc(n);
    fill_random(src1, n, 71);
    fill_random(src2, n, 72);
    test_buffer_t b = buffer_alloc(MEM_DEVICE, n);
    buffer_put(&b, 0, src1, n);
    CHECK(H5Dwrite(d1, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    buffer_put(&b, 0, src2, n); /* reused at once */
    CHECK(H5Dwrite(d2, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0); /* waits for space */
    buffer_fill(&b, 0);
    CHECK(H5Dread(d1, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    buffer_get(&b, 0, got, n);
    CHECK_MSG(memcmp(src1, got, n) == 0, "write-behind (%s): first dataset differs", memory);
    CHECK(H5Dread(d2, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    CHECK_MSG(memcmp(src2, got, n) == 0, "write-behind (%s): second dataset differs", memory);
    H5FD_gds_stats_t st;
    CHECK(H5FD_gds_get_stats(f, &st) >= 0);
    printf("write-behind (%s memory): %llu snapshots, peak %llu bytes, %llu waits (%.3f s)\n", memory,
           (unsigned long long)st.wb_snapshots, (unsigned long long)st.wb_peak_bytes, (unsigned long long)st.wb_waits,
           st.wb_wait_seconds);
    CHECK_MSG(st.wb_snapshots == 2, "%llu snapshots, expected 2", (unsigned long long)st.wb_snapshots);
    /* memory held: at least the budget (a larger arena kept from an earlier file may be reused) */
    CHECK_MSG(st.wb_peak_bytes <= (64 << 20) && st.wb_memory_bytes >= (64 << 20), "peak %llu, memory %llu",
              (unsigned long long)st.wb_peak_bytes, (unsigned long long)st.wb_memory_bytes);
    CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0);
    buffer_free(&b);
    free(src1);
    free(src2);
    free(got);
    H5Dclose(d1);
    H5Dclose(d2);
    H5Sclose(s);
    H5Pclose(dcpl);
    CHECK(H5Fclose(f) >= 0);
    H5Pclose(fapl);
}

/* Write-behind with device snapshots does not make the CPU wait for the
 * snapshot copy: the write returns while a long kernel queued before it on
 * the legacy stream still runs; the file holds what that kernel wrote; a
 * kernel queued right after the write on the same stream, overwriting the
 * buffer, does not reach the file (the stream waits for the copy). */
static void test_write_behind_stream_order(void)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s%swrite_behind=64MiB,write_behind_memory=device", config, *config ? "," : "");
    hid_t fapl = gds_fapl(cfg);
    CHECK(fapl >= 0);
    hid_t f = H5Fcreate(test_path("gpu_wb_order.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    const size_t words = (size_t)4 << 20; /* 16 MiB */
    hsize_t dims[1] = {words};
    hid_t s = H5Screate_simple(1, dims, NULL), dcpl = H5FD_gds_create_dcpl();
    hid_t d0 = H5Dcreate2(f, "warm", H5T_NATIVE_UINT, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hid_t d = H5Dcreate2(f, "x", H5T_NATIVE_UINT, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    unsigned *expect = malloc(words * 4), *got = malloc(words * 4);
    test_buffer_t b = buffer_alloc(MEM_DEVICE, words * 4);
    buffer_fill(&b, 0);
    /* the file's snapshot memory and stream are made at its first snapshot */
    CHECK(H5Dwrite(d0, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0);

    CUevent kernel_done;
    GPU_OK(cu.EventCreate(&kernel_done, CU_EVENT_DISABLE_TIMING));
    launch_spin_fill(NULL, b.ptr, words, 500 * 1000 * 1000ull, 0xD1); /* 0.5 s, then the values */
    GPU_OK(cu.EventRecord(kernel_done, NULL));
    CHECK(H5Dwrite(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0);
    CUresult q = cu.EventQuery(kernel_done);
    printf("write-behind, device snapshot: kernel %s when the write returned\n",
           q == CUDA_ERROR_NOT_READY ? "still running" : "finished");
    CHECK_MSG(q == CUDA_ERROR_NOT_READY, "write-behind: the write waited on the CPU for the kernel before it");
    launch_spin_fill(NULL, b.ptr, words, 0, 0xE2); /* overwrites the buffer at once */
    CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0);
    CHECK(H5Dread(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    expected_fill(expect, words, 0xD1);
    CHECK_MSG(memcmp(expect, got, words * 4) == 0, "write-behind: the file does not hold the kernel's values");
    buffer_get(&b, 0, got, words * 4);
    expected_fill(expect, words, 0xE2);
    CHECK_MSG(memcmp(expect, got, words * 4) == 0, "the overwriting kernel did not run");
    H5FD_gds_stats_t st;
    CHECK(H5FD_gds_get_stats(f, &st) >= 0);
    CHECK_MSG(st.wb_stream_ordered == 2, "%llu stream-ordered snapshots, expected 2",
              (unsigned long long)st.wb_stream_ordered);
    GPU_OK(cu.EventDestroy(kernel_done));
    buffer_free(&b);
    free(expect);
    free(got);
    H5Dclose(d0);
    H5Dclose(d);
    H5Sclose(s);
    H5Pclose(dcpl);
    CHECK(H5Fclose(f) >= 0);
    H5Pclose(fapl);
}

/* Rewrites the stored chunk at row `row` of the 2-D dataset `d`: 16 bytes
 * after its zlib stream (pad) or its Adler-32's last byte flipped. */
static void rewrite_stored_chunk(hid_t d, hsize_t row, bool pad)
{
    hsize_t lo[2] = {row, 0}, stored = 0;
    uint32_t mask = 0;
    CHECK(H5Dget_chunk_storage_size(d, lo, &stored) >= 0 && stored > 4);
    unsigned char *bytes = malloc((size_t)stored + 16);
    CHECK(H5Dread_chunk(d, H5P_DEFAULT, lo, &mask, bytes) >= 0);
    if (pad)
        for (int i = 0; i < 16; i++)
            bytes[stored + (hsize_t)i] = (unsigned char)(i + 1);
    else
        bytes[stored - 1] ^= 0x5A;
    CHECK(H5Dwrite_chunk(d, H5P_DEFAULT, mask, lo, (size_t)stored + (pad ? 16 : 0), bytes) >= 0);
    free(bytes);
}

/* A Deflate chunk the GPU refuses is HDF5's to judge: bytes after its zlib
 * stream (zlib stops at the stream's end) read as HDF5 reads them, that
 * chunk through HDF5's filters and the others on the GPU; a damaged
 * Adler-32 fails with both findings; a damaged Fletcher-32 reads where the
 * transfer list disables error detection, as with HDF5. */
static void test_refused_deflate_chunks(void)
{
    const char *no_nvcomp = NULL;
    if (!gds_nvcomp_load(&no_nvcomp)) {
        printf("skipped: chunks the GPU refuses (no nvCOMP: %s)\n", no_nvcomp ? no_nvcomp : "?");
        return;
    }
    const hsize_t rows = 400, cols = 1000, dims[2] = {rows, cols}, chunk[2] = {100, cols};
    size_t n = (size_t)(rows * cols);
    int32_t *src = malloc(n * 4), *got = malloc(n * 4);
    for (size_t i = 0; i < n; i++) /* compresses like a smooth field with noise */
        src[i] = (int32_t)(i / 7 * 3 + (i * 2654435761u >> 28));
    const char *path = test_path("gpu_refused.h5");
    hid_t fapl = fapl_for_test();
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hid_t s = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_deflate(dcpl, 4);
    hid_t d = H5Dcreate2(f, "x", H5T_STD_I32LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, src) >= 0);
    rewrite_stored_chunk(d, 0, true);
    rewrite_stored_chunk(d, 200, true);
    test_buffer_t b = buffer_alloc(MEM_DEVICE, n * 4);
    buffer_fill(&b, 0xAB);
    CHECK_MSG(H5Dread_gds(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0,
              "padded chunks: %s", error_stack_text());
    H5FD_gds_decode_stats_t ds;
    CHECK(H5FD_gds_last_decode_stats(&ds) >= 0);
    CHECK_MSG(H5FD_gds_last_route() == H5FD_GDS_ROUTE_GPU_DECODE && ds.chunks == 4 && ds.hdf5_chunks == 2,
              "padded chunks: route %s, %llu chunks, %llu of them by HDF5's filters (want gpu-decode, 4, 2)",
              H5FD_gds_route_name(H5FD_gds_last_route()), (unsigned long long)ds.chunks,
              (unsigned long long)ds.hdf5_chunks);
    CHECK_MSG(H5Eget_num(H5E_DEFAULT) == 0, "padded chunks read, yet errors on the stack: %s", error_stack_text());
    buffer_get(&b, 0, got, n * 4);
    CHECK_MSG(memcmp(src, got, n * 4) == 0, "padded chunks: data differs from what was written");
    /* the others decoded a second time without the refused chunks, as after a decompressor's garbage */
    setenv("H5GDS_CODEC_TEST_REDECODE", "1", 1);
    buffer_fill(&b, 0xAB);
    CHECK_MSG(H5Dread_gds(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr) >= 0,
              "padded chunks, decoded again: %s", error_stack_text());
    unsetenv("H5GDS_CODEC_TEST_REDECODE");
    CHECK(H5FD_gds_last_decode_stats(&ds) >= 0);
    buffer_get(&b, 0, got, n * 4);
    CHECK_MSG(ds.hdf5_chunks == 2 && memcmp(src, got, n * 4) == 0,
              "padded chunks, decoded again: %llu chunks by HDF5's filters (want 2), data %s",
              (unsigned long long)ds.hdf5_chunks, memcmp(src, got, n * 4) ? "differs" : "equal");
    /* a data transform is HDF5's to apply: its filters and the host read it */
    hid_t plus_one = H5Pcreate(H5P_DATASET_XFER);
    CHECK(H5Pset_data_transform(plus_one, "x+1") >= 0);
    CHECK_MSG(H5Dread_gds(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, plus_one, b.ptr) >= 0, "a data transform: %s",
              error_stack_text());
    CHECK_MSG(H5FD_gds_last_route() == H5FD_GDS_ROUTE_HOST_STAGED, "a data transform: route %s",
              H5FD_gds_route_name(H5FD_gds_last_route()));
    buffer_get(&b, 0, got, n * 4);
    size_t untransformed = 0;
    for (size_t i = 0; i < n; i++)
        untransformed += got[i] != src[i] + 1;
    CHECK_MSG(untransformed == 0, "a data transform: %zu elements are not x+1", untransformed);
    H5Pclose(plus_one);
    /* a box cutting both padded chunks, rows 0 and 200 (decoded aside, then placed) */
    {
        hsize_t lo[2] = {50, 100}, cnt[2] = {200, 700};
        hid_t fsp = H5Dget_space(d), msp = H5Screate_simple(2, cnt, NULL);
        H5Sselect_hyperslab(fsp, H5S_SELECT_SET, lo, NULL, cnt, NULL);
        CHECK_MSG(H5Dread_gds(d, H5T_NATIVE_INT32, msp, fsp, H5P_DEFAULT, b.ptr) >= 0, "padded chunks, a box: %s",
                  error_stack_text());
        CHECK(H5FD_gds_last_decode_stats(&ds) >= 0);
        CHECK_MSG(H5FD_gds_last_route() == H5FD_GDS_ROUTE_GPU_DECODE && ds.chunks == 3 && ds.hdf5_chunks == 2,
                  "padded chunks, a box: route %s, %llu chunks by HDF5's filters (want 2 of 3)",
                  H5FD_gds_route_name(H5FD_gds_last_route()), (unsigned long long)ds.hdf5_chunks);
        buffer_get(&b, 0, got, (size_t)(cnt[0] * cnt[1] * 4));
        size_t wrong = 0;
        for (hsize_t r = 0; r < cnt[0]; r++)
            for (hsize_t c = 0; c < cnt[1]; c++)
                wrong += got[r * cnt[1] + c] != src[(lo[0] + r) * cols + lo[1] + c];
        CHECK_MSG(wrong == 0, "padded chunks, a box: %zu elements differ", wrong);
        H5Sclose(fsp);
        H5Sclose(msp);
    }
    /* rows of an unpadded chunk: the GPU's */
    hsize_t start[2] = {100, 0}, count[2] = {100, cols};
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(2, count, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    CHECK(H5Dread_gds(d, H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, b.ptr) >= 0);
    CHECK_MSG(H5FD_gds_last_route() == H5FD_GDS_ROUTE_GPU_DECODE, "an unpadded chunk: route %s",
              H5FD_gds_route_name(H5FD_gds_last_route()));
    buffer_get(&b, 0, got, (size_t)(count[0] * cols * 4));
    CHECK_MSG(memcmp(src + 100 * cols, got, (size_t)(count[0] * cols * 4)) == 0, "an unpadded chunk: data differs");
    /* a damaged Adler-32 (in a dataset of its own): HDF5's zlib fails too, and the error says both */
    hid_t y = H5Dcreate2(f, "y", H5T_STD_I32LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(y >= 0 && H5Dwrite(y, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, src) >= 0);
    rewrite_stored_chunk(y, 300, false);
    herr_t rc;
    H5E_BEGIN_TRY { rc = H5Dread_gds(y, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr); }
    H5E_END_TRY;
    const char *text = error_stack_text();
    CHECK_MSG(rc < 0, "a damaged Adler-32 read without an error");
    CHECK_MSG(strstr(text, "chunk at (300,0) could not be decoded on the GPU") && strstr(text, "Adler-32 mismatch") &&
                  strstr(text, "HDF5's own filters failed on it as well: H5Z"), /* HDF5's innermost error */
              "a damaged Adler-32: %s", text);
    /* a damaged Fletcher-32: an error, unless the transfer list disables
     * error detection, which the GPU then honours (no chunk for HDF5) */
    hid_t dcpl_f = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl_f, 2, chunk);
    H5Pset_deflate(dcpl_f, 4);
    H5Pset_fletcher32(dcpl_f); /* last, as h5py orders it: the chunk ends with its checksum */
    hid_t w = H5Dcreate2(f, "w", H5T_STD_I32LE, s, H5P_DEFAULT, dcpl_f, H5P_DEFAULT);
    CHECK(w >= 0 && H5Dwrite(w, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, src) >= 0);
    rewrite_stored_chunk(w, 100, false);
    H5E_BEGIN_TRY { rc = H5Dread_gds(w, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr); }
    H5E_END_TRY;
    text = error_stack_text();
    CHECK_MSG(rc < 0 && strstr(text, "chunk at (100,0)") && strstr(text, "(fletcher32): checksum mismatch") &&
                  strstr(text, "HDF5's own filters failed on it as well: H5Z"),
              "a damaged Fletcher-32: rc %d: %s", (int)rc, text);
    hid_t no_edc = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_edc_check(no_edc, H5Z_DISABLE_EDC);
    buffer_fill(&b, 0xAB);
    CHECK_MSG(H5Dread_gds(w, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, no_edc, b.ptr) >= 0,
              "a damaged Fletcher-32, error detection disabled: %s", error_stack_text());
    CHECK(H5FD_gds_last_decode_stats(&ds) >= 0);
    CHECK_MSG(H5FD_gds_last_route() == H5FD_GDS_ROUTE_GPU_DECODE && ds.hdf5_chunks == 0,
              "a damaged Fletcher-32, error detection disabled: route %s, %llu chunks by HDF5's filters (want 0)",
              H5FD_gds_route_name(H5FD_gds_last_route()), (unsigned long long)ds.hdf5_chunks);
    buffer_get(&b, 0, got, n * 4);
    CHECK_MSG(memcmp(src, got, n * 4) == 0, "a damaged Fletcher-32, error detection disabled: data differs");
    int32_t *host = malloc(n * 4);
    CHECK(H5Dread(w, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, no_edc, host) >= 0 && memcmp(src, host, n * 4) == 0);
    free(host);
    H5Pclose(no_edc);
    H5Dclose(w);
    H5Pclose(dcpl_f);
    /* a chunk too small for Fletcher-32's checksum: the GPU's error, not
     * HDF5's filters (whose Fletcher-32 would read before the chunk) */
    H5Pset_fletcher32(dcpl);
    hid_t z = H5Dcreate2(f, "z", H5T_STD_I32LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    const hsize_t first[2] = {0, 0};
    const unsigned char tiny[3] = {0x78, 0x9c, 0x03};
    CHECK(z >= 0 && H5Dwrite(z, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, src) >= 0);
    CHECK(H5Dwrite_chunk(z, H5P_DEFAULT, 0, first, sizeof tiny, tiny) >= 0);
    H5E_BEGIN_TRY { rc = H5Dread_gds(z, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.ptr); }
    H5E_END_TRY;
    text = error_stack_text();
    CHECK_MSG(rc < 0 && strstr(text, "chunk at (0,0)") && strstr(text, "too small") &&
                  !strstr(text, "HDF5's own filters"),
              "a 3-byte Fletcher-32 chunk: rc %d: %s", (int)rc, text);
    H5Dclose(z);
    H5Sclose(fs);
    H5Sclose(ms);
    buffer_free(&b);
    H5Dclose(y);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(s);
    CHECK(H5Fclose(f) >= 0);
    H5Pclose(fapl);
    unlink(path);
    free(src);
    free(got);
}

/* One request past 4 GiB from and to device memory. */
static void test_large_device(void)
{
    size_t n = ((size_t)4 << 30) + 4099;
    haddr_t off = 4097;
    const char *path = test_path("gpu_large.bin");
    hid_t fapl = fapl_for_test();
    H5FD_t *f = H5FDopen(path, H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC, fapl, HADDR_UNDEF);
    unsigned char *src = malloc(n), *got = malloc(n);
    fill_random(src, n, 31337);
    test_buffer_t w = buffer_alloc(MEM_DEVICE, n);
    buffer_put(&w, 0, src, n);
    H5FDset_eoa(f, H5FD_MEM_DRAW, off + n);
    CHECK(H5FDwrite(f, H5FD_MEM_DRAW, H5P_DEFAULT, off, n, w.ptr) >= 0);
    buffer_fill(&w, 0);
    CHECK(H5FDread(f, H5FD_MEM_DRAW, H5P_DEFAULT, off, n, w.ptr) >= 0);
    buffer_get(&w, 0, got, n);
    CHECK_MSG(memcmp(src, got, n) == 0, "4 GiB device round trip differs");
    buffer_free(&w);
    free(src);
    free(got);
    H5FDclose(f);
    unlink(path);
    H5Pclose(fapl);
}

int main(int argc, char **argv)
{
    if (!gpu_init()) {
        printf("SKIP: %s; GPU tests need an NVIDIA GPU\n", gpu_skip_reason);
        return 77;
    }
    config = argc > 1 ? argv[1] : "";
    bool large = argc > 2 && !strcmp(argv[2], "--large");
    printf("configuration: '%s'%s\n", config, large ? " (large)" : "");
    if (large) {
        test_large_device();
    }
    else {
        test_classification();
        test_heap_registered();
        test_vfd_level();
        test_dataset_level();
        test_several_files();
        test_compact_plain();
        test_stream_order();
        test_write_behind_device("device");
        test_write_behind_device("host");
        test_write_behind_stream_order();
        test_refused_deflate_chunks();
    }
    return test_finish("test_gpu");
}
