/* HDF5 round trips on host memory through the gds driver, compared with
 * sec2: the same program writes one file with each driver; each file is read
 * back with both drivers; contiguous raw data must be byte-identical on disk. */
#include <fcntl.h>

#include "test_util.h"

typedef hid_t (*fapl_fn)(void);
static hid_t make_gds(void) { return gds_fapl("threads=4,parallel_threshold=1MiB,io_block_size=256KiB"); }
static hid_t make_sec2(void) { return sec2_fapl(); }

#define N_SMALL 3000
#define BIG_ELEMS (6u << 20) /* 6 Mi doubles = 48 MiB: parallel reads */

static double *big_data;
static int small_data[N_SMALL];
static int compact_data[64];
static unsigned char chunk_data[100][200];

/* Writes the sample content: every kind of object the issue lists. */
static int write_sample(const char *path, fapl_fn make)
{
    hid_t fapl = make();
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return -1;
    int bad = 0;
    /* contiguous, big */
    hsize_t big_dims[1] = {BIG_ELEMS};
    hid_t s = H5Screate_simple(1, big_dims, NULL);
    hid_t d = H5Dcreate2(f, "contig", H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    bad |= H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, big_data) < 0;
    /* attribute on the dataset */
    hid_t as = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(d, "units", H5T_NATIVE_INT, as, H5P_DEFAULT, H5P_DEFAULT);
    int units = 42;
    bad |= H5Awrite(a, H5T_NATIVE_INT, &units) < 0;
    H5Aclose(a);
    H5Sclose(as);
    H5Dclose(d);
    H5Sclose(s);

    /* groups, nested */
    hid_t g = H5Gcreate2(f, "/a", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g2 = H5Gcreate2(g, "b", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);

    /* compact */
    hsize_t cdims[1] = {64};
    s = H5Screate_simple(1, cdims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_COMPACT);
    d = H5Dcreate2(g2, "compact", H5T_STD_I32LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    bad |= H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, compact_data) < 0;
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(s);

    /* chunked 2-D */
    hsize_t dims2[2] = {100, 200}, chunk2[2] = {16, 32};
    s = H5Screate_simple(2, dims2, NULL);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk2);
    d = H5Dcreate2(g, "chunked", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    bad |= H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, chunk_data) < 0;
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(s);

    /* extendible, written in thousands of small appends */
    hsize_t one[1] = {1}, zero[1] = {0}, maxd[1] = {H5S_UNLIMITED}, ch[1] = {128};
    s = H5Screate_simple(1, zero, maxd);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, ch);
    d = H5Dcreate2(g, "appended", H5T_NATIVE_INT, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Sclose(s);
    H5Pclose(dcpl);
    hid_t ms = H5Screate_simple(1, one, NULL);
    for (hsize_t i = 0; i < N_SMALL && !bad; i++) {
        hsize_t size[1] = {i + 1}, start[1] = {i};
        bad |= H5Dset_extent(d, size) < 0;
        hid_t fs = H5Dget_space(d);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, one, NULL);
        bad |= H5Dwrite(d, H5T_NATIVE_INT, ms, fs, H5P_DEFAULT, &small_data[i]) < 0;
        H5Sclose(fs);
    }
    H5Sclose(ms);
    H5Dclose(d);

    /* thousands of small contiguous datasets' worth of writes: one element at a time */
    hsize_t sd[1] = {N_SMALL};
    s = H5Screate_simple(1, sd, NULL);
    d = H5Dcreate2(g2, "small_writes", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ms = H5Screate_simple(1, one, NULL);
    for (hsize_t i = 0; i < N_SMALL && !bad; i++) {
        hsize_t start[1] = {i};
        H5Sselect_hyperslab(s, H5S_SELECT_SET, start, NULL, one, NULL);
        bad |= H5Dwrite(d, H5T_NATIVE_INT, ms, s, H5P_DEFAULT, &small_data[i]) < 0;
    }
    H5Sclose(ms);
    H5Dclose(d);
    H5Sclose(s);
    H5Gclose(g2);
    H5Gclose(g);
    bad |= H5Fclose(f) < 0;
    return bad ? -1 : 0;
}

static void verify_sample(const char *path, fapl_fn make, const char *label)
{
    hid_t fapl = make();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    CHECK_MSG(f >= 0, "%s: open %s", label, path);
    if (f < 0)
        return;
    double *big = malloc(BIG_ELEMS * sizeof(double));
    hid_t d = H5Dopen2(f, "contig", H5P_DEFAULT);
    CHECK(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, big) >= 0);
    CHECK_MSG(memcmp(big, big_data, BIG_ELEMS * sizeof(double)) == 0, "%s: contig differs", label);
    /* partial hyperslab: every 3rd element of a middle block */
    hsize_t start[1] = {12345}, stride[1] = {3}, count[1] = {100000}, mdims[1] = {100000};
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, mdims, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, stride, count, NULL);
    memset(big, 0, 100000 * sizeof(double));
    CHECK(H5Dread(d, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, big) >= 0);
    int ok = 1;
    for (size_t i = 0; i < 100000; i++)
        ok &= big[i] == big_data[12345 + 3 * i];
    CHECK_MSG(ok, "%s: strided hyperslab differs", label);
    H5Sclose(fs);
    H5Sclose(ms);
    int units = 0;
    hid_t a = H5Aopen(d, "units", H5P_DEFAULT);
    CHECK(H5Aread(a, H5T_NATIVE_INT, &units) >= 0 && units == 42);
    H5Aclose(a);
    H5Dclose(d);
    free(big);

    int ints[N_SMALL];
    d = H5Dopen2(f, "/a/b/compact", H5P_DEFAULT);
    CHECK(d >= 0 && H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ints) >= 0);
    CHECK_MSG(memcmp(ints, compact_data, sizeof compact_data) == 0, "%s: compact differs", label);
    H5Dclose(d);

    unsigned char chunk[100][200];
    d = H5Dopen2(f, "/a/chunked", H5P_DEFAULT);
    CHECK(d >= 0 && H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, chunk) >= 0);
    CHECK_MSG(memcmp(chunk, chunk_data, sizeof chunk) == 0, "%s: chunked differs", label);
    /* partial 2-D block crossing chunk boundaries */
    hsize_t s2[2] = {10, 20}, c2[2] = {30, 50}, m2[2] = {30, 50};
    unsigned char part[30][50];
    fs = H5Dget_space(d);
    ms = H5Screate_simple(2, m2, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, s2, NULL, c2, NULL);
    CHECK(H5Dread(d, H5T_NATIVE_UCHAR, ms, fs, H5P_DEFAULT, part) >= 0);
    ok = 1;
    for (int i = 0; i < 30; i++)
        ok &= memcmp(part[i], &chunk_data[10 + i][20], 50) == 0;
    CHECK_MSG(ok, "%s: chunked hyperslab differs", label);
    H5Sclose(fs);
    H5Sclose(ms);
    H5Dclose(d);

    d = H5Dopen2(f, "/a/appended", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    CHECK(H5Sget_simple_extent_npoints(sp) == N_SMALL);
    H5Sclose(sp);
    CHECK(H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ints) >= 0);
    CHECK_MSG(memcmp(ints, small_data, sizeof small_data) == 0, "%s: appended differs", label);
    H5Dclose(d);
    d = H5Dopen2(f, "/a/b/small_writes", H5P_DEFAULT);
    CHECK(H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ints) >= 0);
    CHECK_MSG(memcmp(ints, small_data, sizeof small_data) == 0, "%s: small_writes differs", label);
    H5Dclose(d);
    CHECK(H5Fclose(f) >= 0);
}

/* The raw bytes of the contiguous dataset in the file must be exactly the
 * little-endian doubles the program wrote. */
static void verify_raw_bytes(const char *path)
{
    hid_t fapl = sec2_fapl();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    hid_t d = H5Dopen2(f, "contig", H5P_DEFAULT);
    haddr_t off = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    CHECK(off != HADDR_UNDEF);
    int fd = open(path, O_RDONLY);
    size_t n = BIG_ELEMS * sizeof(double);
    char *raw = malloc(n);
    CHECK(pread(fd, raw, n, (off_t)off) == (ssize_t)n);
    CHECK_MSG(memcmp(raw, big_data, n) == 0, "raw bytes of %s differ", path);
    close(fd);
    free(raw);
}

int main(void)
{
    big_data = malloc(BIG_ELEMS * sizeof(double));
    fill_random(big_data, BIG_ELEMS * sizeof(double), 1);
    for (size_t i = 0; i < BIG_ELEMS; i++) /* no NaNs: compare as values too */
        if (big_data[i] != big_data[i])
            big_data[i] = (double)i;
    fill_random(small_data, sizeof small_data, 2);
    fill_random(compact_data, sizeof compact_data, 3);
    fill_random(chunk_data, sizeof chunk_data, 4);

    const char *gds_file = test_path("sample_gds.h5"), *sec2_file = test_path("sample_sec2.h5");
    CHECK(write_sample(gds_file, make_gds) == 0);
    CHECK(write_sample(sec2_file, make_sec2) == 0);
    verify_sample(gds_file, make_gds, "gds->gds");
    verify_sample(gds_file, make_sec2, "gds->sec2");
    verify_sample(sec2_file, make_gds, "sec2->gds");
    verify_sample(sec2_file, make_sec2, "sec2->sec2");
    verify_raw_bytes(gds_file);
    verify_raw_bytes(sec2_file);
    free(big_data);
    return test_finish("test_roundtrip");
}
