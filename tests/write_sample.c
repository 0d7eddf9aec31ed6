/* Writes the same small sample (groups, attributes, contiguous, chunked,
 * compact data) with a given driver: `write_sample FILE gds|sec2|default`.
 * Used by interop.sh to compare files with h5dump, h5ls and h5diff. */
#include "test_util.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: write_sample FILE gds|sec2|default\n");
        return 2;
    }
    hid_t fapl = !strcmp(argv[2], "gds") ? gds_fapl(NULL) : !strcmp(argv[2], "sec2") ? sec2_fapl() : H5Pcreate(H5P_FILE_ACCESS);
    hid_t f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f < 0)
        return 1;
    static int data[256][300];
    fill_random(data, sizeof data, 21);
    hsize_t dims[2] = {256, 300}, chunk[2] = {64, 64};
    hid_t s = H5Screate_simple(2, dims, NULL);
    hid_t g = H5Gcreate2(f, "group", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d = H5Dcreate2(g, "contiguous", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int bad = H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0;
    hid_t as = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(d, "scale", H5T_IEEE_F64LE, as, H5P_DEFAULT, H5P_DEFAULT);
    double scale = 0.125;
    bad |= H5Awrite(a, H5T_NATIVE_DOUBLE, &scale) < 0;
    H5Aclose(a);
    H5Sclose(as);
    H5Dclose(d);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    d = H5Dcreate2(g, "chunked", H5T_STD_I32LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    bad |= H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0;
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(s);
    hsize_t cd[1] = {100};
    s = H5Screate_simple(1, cd, NULL);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_COMPACT);
    d = H5Dcreate2(f, "compact", H5T_STD_I32LE, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    bad |= H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0;
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(s);
    H5Gclose(g);
    hid_t used = H5Fget_access_plist(f);
    printf("driver: %s\n", H5Pget_driver(used) == H5FD_GDS ? "gds" : "other");
    H5Pclose(used);
    bad |= H5Fclose(f) < 0;
    H5Pclose(fapl);
    return bad;
}
