/* Files past 4 GiB and single requests of 4 GiB and more (host memory):
 * offsets and lengths that do not fit 32 bits, and transfers longer than one
 * read/write system call may move. */
#include <sys/stat.h>

#include "test_util.h"

#define GiB ((size_t)1 << 30)

/* A sparse file: one small hyperslab far past 4 GiB in a 6 GiB dataset. */
static void test_sparse_offsets(void)
{
    const char *path = test_path("sparse.h5");
    hid_t fapl = gds_fapl(NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hsize_t dims[1] = {6 * GiB};
    hid_t s = H5Screate_simple(1, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t d = H5Dcreate2(f, "sparse", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0);
    size_t n = 3 << 20;
    unsigned char *w = malloc(n), *r = malloc(n);
    fill_random(w, n, 11);
    hsize_t start[1] = {5 * GiB + 12345}, count[1] = {n};
    hid_t ms = H5Screate_simple(1, count, NULL);
    H5Sselect_hyperslab(s, H5S_SELECT_SET, start, NULL, count, NULL);
    CHECK(H5Dwrite(d, H5T_NATIVE_UCHAR, ms, s, H5P_DEFAULT, w) >= 0);
    H5Dclose(d);
    CHECK(H5Fclose(f) >= 0);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (size_t)sb.st_size > 5 * GiB);

    /* read back with gds and with sec2 */
    for (int pass = 0; pass < 2; pass++) {
        hid_t fa = pass == 0 ? gds_fapl(NULL) : sec2_fapl();
        f = H5Fopen(path, H5F_ACC_RDONLY, fa);
        d = H5Dopen2(f, "sparse", H5P_DEFAULT);
        hid_t fs = H5Dget_space(d);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        memset(r, 0, n);
        CHECK(H5Dread(d, H5T_NATIVE_UCHAR, ms, fs, H5P_DEFAULT, r) >= 0);
        CHECK_MSG(memcmp(r, w, n) == 0, "pass %d: data past 4 GiB differs", pass);
        H5Sclose(fs);
        H5Dclose(d);
        H5Fclose(f);
        H5Pclose(fa);
    }
    H5Sclose(ms);
    H5Sclose(s);
    H5Pclose(dcpl);
    H5Pclose(fapl);
    free(w);
    free(r);
    unlink(path);
}

/* One H5Dwrite and one H5Dread of 4 GiB + 4 KiB + 3 bytes. */
static void test_huge_request(void)
{
    const char *path = test_path("huge.h5");
    size_t n = 4 * GiB + 4096 + 3;
    unsigned char *buf = malloc(n);
    if (!buf) {
        fprintf(stderr, "cannot allocate %zu bytes\n", n);
        CHECK(buf != NULL);
        return;
    }
    fill_random(buf, n, 12);
    hid_t fapl = gds_fapl(NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hsize_t dims[1] = {n};
    hid_t s = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(f, "huge", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(d);
    CHECK(H5Fclose(f) >= 0);
    memset(buf, 0, n);
    f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    d = H5Dopen2(f, "huge", H5P_DEFAULT);
    CHECK(H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(d);
    H5Fclose(f);
    /* every byte: regenerate the data 64 MiB at a time and compare */
    size_t step = 64u << 20;
    unsigned char *expect = malloc(n);
    fill_random(expect, n, 12);
    size_t bad = 0;
    for (size_t off = 0; off < n; off += step)
        bad += memcmp(buf + off, expect + off, n - off < step ? n - off : step) != 0;
    CHECK_MSG(bad == 0, "4 GiB round trip: %zu blocks differ", bad);
    free(expect);
    H5Sclose(s);
    H5Pclose(fapl);
    free(buf);
    unlink(path);
}

int main(void)
{
    test_sparse_offsets();
    test_huge_request();
    return test_finish("test_large");
}
