/* Run with HDF5_DRIVER=gds HDF5_PLUGIN_PATH=<copy of the library>
 * HDF5_DRIVER_CONFIG=threads=3,io_block_size=2MiB (see CMakeLists.txt):
 * an unmodified default fapl uses the plugin; the linked copy of the library
 * shares its driver id (registered twice, one id), reads the configuration
 * string, and a malformed string makes H5Fcreate fail with a clear error. */
#include "test_util.h"

int main(void)
{
    const char *path = test_path("plugin.h5");
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(f >= 0);
    hid_t fapl = H5Fget_access_plist(f);
    CHECK(H5Pget_driver(fapl) == H5FD_GDS);
    H5FD_gds_config_t c;
    CHECK(H5Pget_fapl_gds_config(fapl, &c) >= 0);
    CHECK_MSG(c.threads == 3 && c.io_block_size == (2u << 20), "threads %u io_block_size %zu", c.threads,
              c.io_block_size);
    /* raw data goes through the plugin's driver: its statistics see it */
    hsize_t n[1] = {4096};
    hid_t s = H5Screate_simple(1, n, NULL);
    hid_t d = H5Dcreate2(f, "x", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int v[4096];
    fill_random(v, sizeof v, 5);
    CHECK(H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5FD_gds_stats_t st;
    CHECK(H5FD_gds_get_stats(f, &st) >= 0 && st.write_bytes[H5FD_GDS_ROUTE_HOST] >= sizeof v);
    H5Dclose(d);
    H5Sclose(s);
    H5Pclose(fapl);
    CHECK(H5Fclose(f) >= 0);
    /* an explicit H5Pset_fapl_gds gives the same id */
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_fapl_gds(fapl, 0, 0, 0) >= 0);
    f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    CHECK(f >= 0);
    hid_t used = H5Fget_access_plist(f);
    CHECK(H5Pget_driver(used) == H5Pget_driver(fapl));
    H5Pclose(used);
    H5Fclose(f);
    H5Pclose(fapl);
    /* a malformed configuration string: H5Fcreate fails, naming key and value */
    setenv("HDF5_DRIVER_CONFIG", "threads=zero", 1);
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_driver_by_name(fapl, "gds", "threads=zero") >= 0);
    H5E_BEGIN_TRY { f = H5Fcreate(test_path("plugin_bad.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, fapl); }
    H5E_END_TRY;
    CHECK(f < 0);
    CHECK_MSG(strstr(error_stack_text(), "threads") && strstr(error_stack_text(), "zero"), "%s", error_stack_text());
    H5Pclose(fapl);
    return test_finish("test_plugin");
}
