/* A program built against an installed h5gds (tests/install/test_install.sh):
 * creates a file through the gds driver, writes a dataset, reads it back.
 *   consumer FILE          H5Pset_fapl_gds
 *   consumer FILE --env    the driver chosen by HDF5_DRIVER=gds (plugin)
 * Exit status 0 when the bytes come back and the file used the gds driver. */
#include <stdio.h>
#include <string.h>

#include <H5FDgds.h>

#define N 4096

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: consumer FILE [--env]\n");
        return 2;
    }
    int from_env = argc > 2 && strcmp(argv[2], "--env") == 0;
    static int out[N], in[N];
    for (int i = 0; i < N; i++)
        out[i] = i * 7 + 3;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || (!from_env && H5Pset_fapl_gds(fapl, 0, 0, 0) < 0))
        return 1;
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0)
        return 1;
    hid_t used = H5Fget_access_plist(file);
    int is_gds = used >= 0 && H5Pget_driver(used) == H5FD_gds_init();
    hsize_t n = N;
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = H5FD_gds_create_dcpl();
    hid_t dset = H5Dcreate2(file, "x", H5T_NATIVE_INT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    int ok = dset >= 0 && H5Dwrite_gds(dset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0 &&
             H5Dread_gds(dset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, in) >= 0 &&
             memcmp(in, out, sizeof in) == 0;
    H5Dclose(dset);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Pclose(used);
    ok = H5Fclose(file) >= 0 && ok;
    H5Pclose(fapl);
    printf("consumer: %s, driver %s\n", ok ? "bytes match" : "FAILED", is_gds ? "gds" : "NOT gds");
    return ok && is_gds ? 0 : 1;
}
