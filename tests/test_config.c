/* Configuration: every key, units, every kind of malformed input, the
 * reference-compatible fapl calls, the environment variable and (1.14+)
 * HDF5_DRIVER_CONFIG through H5Pset_driver_by_name. */
#include <fcntl.h>

#include "test_util.h"

static H5FD_gds_config_t base(void)
{
    H5FD_gds_config_t c;
    unsetenv("H5GDS_CONFIG");
    CHECK(H5FD_gds_config_init(&c) == 0);
    return c;
}

/* Parses `text` expecting failure; the config must be untouched and the
 * HDF5 error must name `key` and `value`. */
static void expect_reject(const char *text, const char *key, const char *value)
{
    H5FD_gds_config_t c = base(), before = c;
    herr_t rc;
    H5E_BEGIN_TRY { rc = H5FD_gds_config_parse(&c, text); }
    H5E_END_TRY;
    const char *msg = error_stack_text();
    CHECK_MSG(rc < 0, "'%s' was accepted", text);
    CHECK_MSG(memcmp(&c, &before, sizeof c) == 0, "'%s' changed the config", text);
    if (key)
        CHECK_MSG(strstr(msg, key) != NULL, "error for '%s' does not name key %s: %s", text, key, msg);
    if (value)
        CHECK_MSG(strstr(msg, value) != NULL, "error for '%s' does not name value %s: %s", text, value, msg);
    H5Eclear2(H5E_DEFAULT);
}

/* threads and io_block_size are `auto` (0) by default: tuned on first use
 * of device memory; "auto" parses, formats and validates. */
static void test_auto(void)
{
    H5FD_gds_config_t c = base();
    CHECK(c.threads == 0 && c.io_block_size == 0);
    char text[512];
    CHECK(H5FD_gds_config_format(&c, text, sizeof text) == 0);
    CHECK_MSG(strstr(text, "threads=auto") && strstr(text, "io_block_size=auto"), "format: %s", text);
    CHECK(H5FD_gds_config_parse(&c, "threads=8,io_block_size=16MiB") == 0 && c.threads == 8 &&
          c.io_block_size == 16 << 20);
    CHECK(H5FD_gds_config_parse(&c, "threads=AUTO,io_block_size=auto") == 0 && c.threads == 0 &&
          c.io_block_size == 0);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_fapl_gds_config(fapl, &c) == 0); /* the struct with 0 = auto validates */
    H5Pclose(fapl);
    expect_reject("threads=0", "threads", "0");
    expect_reject("io_block_size=0", "io_block_size", "0");
    expect_reject("staging_size=auto", "staging_size", "auto");
}

static void test_keys(void)
{
    H5FD_gds_config_t c = base();
    CHECK(c.version == H5FD_GDS_CONFIG_VERSION);
    CHECK(c.mode == H5FD_GDS_MODE_AUTO);
    CHECK(H5FD_gds_config_parse(&c, "mode=staged, threads=7,io_block_size=2MiB,alignment=512,fs_block_size=8KiB,"
                                    "direct=off,staging_size=1MiB,staging_count=4,parallel_threshold=0,stats=on,"
                                    "log=yes,fsync=true,register=on") == 0);
    CHECK(c.mode == H5FD_GDS_MODE_STAGED);
    CHECK(c.threads == 7);
    CHECK(c.io_block_size == 2u << 20);
    CHECK(c.alignment == 512);
    CHECK(c.fs_block_size == 8192);
    CHECK(c.direct == H5FD_GDS_OFF);
    CHECK(c.staging_size == 1u << 20);
    CHECK(c.staging_count == 4);
    CHECK(c.parallel_threshold == 0);
    CHECK(c.stats == 1 && c.log == 1 && c.fsync_on_flush == 1 && c.register_buffers == 1);
    CHECK(H5FD_gds_config_parse(&c, "register=off") == 0 && c.register_buffers == 0);

    CHECK(H5FD_gds_config_parse(&c, "mode=cufile") == 0 && c.mode == H5FD_GDS_MODE_CUFILE);
    CHECK(H5FD_gds_config_parse(&c, "mode=POSIX") == 0 && c.mode == H5FD_GDS_MODE_POSIX);
    CHECK(H5FD_gds_config_parse(&c, "mode=auto") == 0 && c.mode == H5FD_GDS_MODE_AUTO);
    CHECK(H5FD_gds_config_parse(&c, "direct=on") == 0 && c.direct == H5FD_GDS_ON);
    CHECK(H5FD_gds_config_parse(&c, "direct=auto") == 0 && c.direct == H5FD_GDS_SWITCH_AUTO);
    CHECK(H5FD_gds_config_parse(&c, "stats=off,log=0,fsync=no") == 0 && !c.stats && !c.log && !c.fsync_on_flush);
    CHECK(H5FD_gds_config_parse(&c, "") == 0);
    CHECK(H5FD_gds_config_parse(&c, " , threads = 3 ,") == 0 && c.threads == 3);
    CHECK(H5FD_gds_config_parse(&c, "THREADS=5") == 0 && c.threads == 5);

    /* format -> parse round trip */
    char text[1024];
    H5FD_gds_config_t d = base();
    CHECK(H5FD_gds_config_format(&c, text, sizeof text) == 0);
    CHECK(H5FD_gds_config_parse(&d, text) == 0);
    CHECK(memcmp(&c, &d, sizeof c) == 0);
    CHECK(H5FD_gds_config_format(&c, text, 10) < 0);
    H5Eclear2(H5E_DEFAULT);
}

static void test_units(void)
{
    static const struct {
        const char *text;
        size_t value;
    } cases[] = {
        {"8192", 8192},         {"8k", 8192},           {"8K", 8192},         {"8KiB", 8192},
        {"8KIB", 8192},         {"8kB", 8000},          {"3M", 3u << 20},     {"3MiB", 3u << 20},
        {"3MB", 3000000},       {"1G", 1u << 30},       {"1GiB", 1u << 30},   {"1GB", 1000000000},
        {"8KB", 8000},          {"4096B", 4096},        {"2mB", 2000000},     {"2miB", 2u << 20},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        H5FD_gds_config_t c = base();
        char text[64];
        snprintf(text, sizeof text, "io_block_size=%s", cases[i].text);
        CHECK_MSG(H5FD_gds_config_parse(&c, text) == 0 && c.io_block_size == cases[i].value, "%s -> %zu", text,
                  c.io_block_size);
    }
    H5FD_gds_config_t c = base();
    CHECK(H5FD_gds_config_parse(&c, "parallel_threshold=1TiB") == 0 && c.parallel_threshold == (size_t)1 << 40);
    /* A lowercase b can mean bits: refused, naming the key and the value. */
    static const char *const bits[] = {"1Kb", "8kb", "8kib", "3mb", "3Mb", "1gb", "65536b", "2Mib"};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "io_block_size=%s", bits[i]);
        expect_reject(text, "io_block_size", bits[i]);
    }
}

/* What the device path cannot honour exactly is rounded up when a file is
 * opened, and the `log` line says so; the file works. */
static void test_rounding(void)
{
    const char *path = test_path("rounding.h5"), *log_path = test_path("rounding.log");
    static const struct {
        const char *config;
        const char *expect; /* in the log line; NULL: no rounding line */
    } cases[] = {
        {"log=on,io_block_size=5000", "io_block_size 5000 rounded up to 8192 (a multiple of fs_block_size)"},
        {"log=on,staging_size=10000", "staging_size 10000 rounded up to 12288"},
        {"log=on,alignment=512,staging_size=6000", "alignment 512 rounded up to 4096"},
        {"log=on,fs_block_size=8KiB,io_block_size=12KiB,staging_size=20KiB",
         "io_block_size 12288 rounded up to 16384"},
        {"log=on,io_block_size=64KiB,staging_size=8KiB", NULL},
        {"log=off,io_block_size=5000", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fflush(stderr);
        int saved = dup(2), fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        close(fd);
        hid_t fapl = gds_fapl(cases[i].config);
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        int data[1000], back[1000];
        for (int k = 0; k < 1000; k++)
            data[k] = k * 3;
        hsize_t n = 1000;
        hid_t sp = H5Screate_simple(1, &n, NULL);
        hid_t d = f >= 0 ? H5Dcreate2(f, "x", H5T_NATIVE_INT, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
        bool ok = d >= 0 && H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0 &&
                  H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0 &&
                  memcmp(data, back, sizeof data) == 0;
        H5Dclose(d);
        H5Sclose(sp);
        ok &= f >= 0 && H5Fclose(f) >= 0;
        H5Pclose(fapl);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        char text[4096] = "";
        FILE *lf = fopen(log_path, "r");
        size_t got = lf ? fread(text, 1, sizeof text - 1, lf) : 0;
        text[got] = '\0';
        if (lf)
            fclose(lf);
        CHECK_MSG(ok, "%s: the file did not work", cases[i].config);
        if (cases[i].expect)
            CHECK_MSG(strstr(text, cases[i].expect) != NULL, "%s: log has no '%s': %s", cases[i].config,
                      cases[i].expect, text);
        else
            CHECK_MSG(strstr(text, "rounded") == NULL, "%s: unexpected rounding line: %s", cases[i].config, text);
    }
}

static void test_malformed(void)
{
    expect_reject("bogus=1", "bogus", "1");
    expect_reject("threads", NULL, "threads");
    expect_reject("threads=", "threads", NULL);
    expect_reject("threads=abc", "threads", "abc");
    expect_reject("threads=4k", "threads", "4k");
    expect_reject("threads=-1", "threads", "-1");
    expect_reject("threads=0", "threads", "0");
    expect_reject("threads=257", "threads", "257");
    expect_reject("threads=3.5", "threads", "3.5");
    expect_reject("io_block_size=12XB", "io_block_size", "12XB");
    expect_reject("io_block_size=2TiB", "io_block_size", "2TiB");
    expect_reject("io_block_size=1", "io_block_size", "1");
    expect_reject("io_block_size=99999999999999999999999", "io_block_size", "99999999999999999999999");
    expect_reject("io_block_size=18446744073709551615GiB", "io_block_size", NULL);
    expect_reject("alignment=0", "alignment", "0");
    expect_reject("alignment=3000", "alignment", "3000");
    expect_reject("alignment=2MiB", "alignment", "2MiB");
    expect_reject("fs_block_size=1000", "fs_block_size", "1000");
    expect_reject("fs_block_size=256", "fs_block_size", "256");
    expect_reject("staging_size=0", "staging_size", "0");
    expect_reject("staging_count=0", "staging_count", "0");
    expect_reject("staging_count=17", "staging_count", "17");
    expect_reject("mode=fast", "mode", "fast");
    expect_reject("direct=maybe", "direct", "maybe");
    expect_reject("stats=2", "stats", "2");
    expect_reject("log=loud", "log", "loud");
    expect_reject("fsync=sometimes", "fsync", "sometimes");
    expect_reject("register=maybe", "register", "maybe");
    /* A good key before a bad one must not leak into the config. */
    expect_reject("threads=9,alignment=7", "alignment", "7");
    /* Bounded pinned memory: 256 x 16 x 1 GiB. */
    expect_reject("threads=256,staging_count=16,staging_size=1GiB", "pinned", NULL);
}

static void test_struct_validation(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5FD_gds_config_t c = base();
    herr_t rc;
    c.version = 99;
    H5E_BEGIN_TRY { rc = H5Pset_fapl_gds_config(fapl, &c); }
    H5E_END_TRY;
    CHECK(rc < 0);
    CHECK(strstr(error_stack_text(), "version 99") != NULL);
    c = base();
    c.alignment = 100;
    H5E_BEGIN_TRY { rc = H5Pset_fapl_gds_config(fapl, &c); }
    H5E_END_TRY;
    CHECK(rc < 0);
    CHECK(strstr(error_stack_text(), "alignment") != NULL);
    c = base();
    c.mode = (H5FD_gds_mode_t)42;
    H5E_BEGIN_TRY { rc = H5Pset_fapl_gds_config(fapl, &c); }
    H5E_END_TRY;
    CHECK(rc < 0);
    H5E_BEGIN_TRY { rc = H5Pset_fapl_gds_config(fapl, NULL); }
    H5E_END_TRY;
    CHECK(rc < 0);
    H5E_BEGIN_TRY { rc = H5Pset_fapl_gds(H5P_DEFAULT, 4096, 4096, 0); }
    H5E_END_TRY;
    CHECK(rc < 0); /* not a fapl id */
    H5Pclose(fapl);
    H5Eclear2(H5E_DEFAULT);
}

static void test_reference_api(void)
{
    unsetenv("H5GDS_CONFIG");
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    size_t a = 0, b = 0, cb = 0;
    herr_t rc;
    /* Not a gds fapl yet. */
    H5E_BEGIN_TRY { rc = H5Pget_fapl_gds(fapl, &a, &b, &cb); }
    H5E_END_TRY;
    CHECK(rc < 0);
    CHECK(H5Pset_fapl_gds(fapl, 8192, 16384, 1 << 22) == 0);
    CHECK(H5Pget_driver(fapl) == H5FD_GDS);
    CHECK(H5Pget_fapl_gds(fapl, &a, &b, &cb) == 0);
    CHECK(a == 8192 && b == 16384 && cb == (1u << 22));
    /* zero keeps the default */
    CHECK(H5Pset_fapl_gds(fapl, 0, 0, 0) == 0);
    H5FD_gds_config_t c, d = base();
    CHECK(H5Pget_fapl_gds_config(fapl, &c) == 0);
    CHECK(c.alignment == d.alignment && c.fs_block_size == d.fs_block_size && c.staging_size == d.staging_size);
    /* malformed arguments fail */
    H5E_BEGIN_TRY { rc = H5Pset_fapl_gds(fapl, 3000, 4096, 0); }
    H5E_END_TRY;
    CHECK(rc < 0);
    CHECK(strstr(error_stack_text(), "alignment") != NULL && strstr(error_stack_text(), "3000") != NULL);
    /* copies of the fapl carry the config */
    CHECK(H5Pset_fapl_gds(fapl, 4096, 4096, 1 << 21) == 0);
    hid_t copy = H5Pcopy(fapl);
    CHECK(H5Pget_fapl_gds(copy, &a, &b, &cb) == 0 && cb == (1u << 21));
    H5Pclose(copy);
    H5Pclose(fapl);
    H5Eclear2(H5E_DEFAULT);
}

static void test_environment(void)
{
    setenv("H5GDS_CONFIG", "threads=3,mode=posix", 1);
    H5FD_gds_config_t c;
    CHECK(H5FD_gds_config_init(&c) == 0 && c.threads == 3 && c.mode == H5FD_GDS_MODE_POSIX);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_fapl_gds(fapl, 0, 0, 0) == 0);
    CHECK(H5Pget_fapl_gds_config(fapl, &c) == 0 && c.threads == 3);
    /* explicit arguments win over the environment */
    setenv("H5GDS_CONFIG", "staging_size=1MiB", 1);
    CHECK(H5Pset_fapl_gds(fapl, 0, 0, 2 << 20) == 0);
    CHECK(H5Pget_fapl_gds_config(fapl, &c) == 0 && c.staging_size == (2u << 20));
    /* a malformed environment makes the call fail, naming the variable */
    setenv("H5GDS_CONFIG", "threads=many", 1);
    herr_t rc;
    H5E_BEGIN_TRY { rc = H5Pset_fapl_gds(fapl, 0, 0, 0); }
    H5E_END_TRY;
    CHECK(rc < 0);
    const char *msg = error_stack_text();
    CHECK_MSG(strstr(msg, "H5GDS_CONFIG") && strstr(msg, "threads") && strstr(msg, "many"), "%s", msg);
    unsetenv("H5GDS_CONFIG");
    H5Pclose(fapl);
    H5Eclear2(H5E_DEFAULT);
}

static void test_driver_config_string(void)
{
#if H5_VERSION_GE(1, 13, 0)
    unsetenv("H5GDS_CONFIG");
    (void)H5FD_GDS;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_driver_by_name(fapl, "gds", "threads=3,io_block_size=1MiB") == 0);
    H5FD_gds_config_t c;
    CHECK(H5Pget_fapl_gds_config(fapl, &c) == 0);
    CHECK(c.threads == 3 && c.io_block_size == (1u << 20));
    /* a malformed string fails at open time, naming key and value */
    CHECK(H5Pset_driver_by_name(fapl, "gds", "threads=lots") == 0);
    hid_t f;
    H5E_BEGIN_TRY { f = H5Fcreate(test_path("config_bad.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, fapl); }
    H5E_END_TRY;
    CHECK(f < 0);
    const char *msg = error_stack_text();
    CHECK_MSG(strstr(msg, "HDF5_DRIVER_CONFIG") && strstr(msg, "lots"), "%s", msg);
    H5Pclose(fapl);
    H5Eclear2(H5E_DEFAULT);
#endif
}

int main(void)
{
    test_auto();
    test_keys();
    test_units();
    test_rounding();
    test_malformed();
    test_struct_validation();
    test_reference_api();
    test_environment();
    test_driver_config_string();
    return test_finish("test_config");
}
