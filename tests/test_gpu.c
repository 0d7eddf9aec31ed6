/* GPU data path: device, managed, pinned and pageable buffers through the
 * gds driver, at the VFD level (odd sizes, unaligned offsets, reads past EOF)
 * and the dataset level (contiguous, chunked, compact, hyperslabs, the
 * checked entry points on datasets that do and do not allow pass-through).
 * Random data, every byte compared.
 *   test_gpu CONFIG [--large]     CONFIG is a gds configuration string
 * Exits 77 (skipped) on machines without a GPU. */
#include "gpu_util.h"

static const char *config;

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
    if (kind == MEM_DEVICE)
        CHECK_MSG(route == c->expect_write, "%s: write route %s, expected %s", name, H5FD_gds_route_name(route),
                  H5FD_gds_route_name(c->expect_write));
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
        {"compact", 2, false, true, H5FD_GDS_ROUTE_HOST_STAGED},
        {"deflate", 3, false, true, H5FD_GDS_ROUTE_HOST_STAGED},
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
    const char *expect = getenv("H5GDS_EXPECT_DEVICE_ROUTE");
    if (expect && *expect)
        CHECK_MSG(!strcmp(expect, H5FD_gds_route_name(st.device_route)), "device route %s, expected %s",
                  H5FD_gds_route_name(st.device_route), expect);
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
        H5Dclose(d[i]);
        CHECK(H5Fclose(f[i]) >= 0);
    }
    H5Sclose(s);
    buffer_free(&b);
    free(src);
    free(got);
    H5Pclose(fapl);
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
        test_vfd_level();
        test_dataset_level();
        test_several_files();
    }
    return test_finish("test_gpu");
}
