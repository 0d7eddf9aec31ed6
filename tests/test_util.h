/* Minimal test harness: the check macros (check.h) and the helpers of the
 * tests that use HDF5 (files, property lists, error stacks). */
#ifndef H5GDS_TEST_UTIL_H
#define H5GDS_TEST_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>
#if H5_VERSION_GE(1, 13, 0)
#include <H5FDdevelop.h>
#endif

#include "H5FDgds.h"
#include "check.h"

/* Deterministic pseudo-random bytes (xorshift64*), never all zeros. */
static inline void fill_random(void *buf, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
    unsigned char *p = buf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        uint64_t v = x * 0x2545F4914F6CDD1DULL;
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        p[i] = (unsigned char)(x * 0x2545F4914F6CDD1DULL >> 56);
    }
}

/* A path in this test program's scratch directory (under build/ when run by CTest). */
static inline const char *test_path(const char *name)
{
    static char buf[8][4096];
    static int slot;
    /* CTest sets H5GDS_TEST_DIR; a test run by hand writes to the temporary
     * directory, never into the current one (a checkout, say). */
    const char *dir = getenv("H5GDS_TEST_DIR");
    if (!dir || !*dir)
        dir = getenv("TMPDIR");
    char *out = buf[slot++ % 8];
    snprintf(out, sizeof buf[0], "%s/%s", dir && *dir ? dir : "/tmp", name);
    return out;
}

static inline hid_t gds_fapl(const char *config)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5FD_gds_config_t c;
    if (H5FD_gds_config_init(&c) < 0)
        return -1;
    if (config && H5FD_gds_config_parse(&c, config) < 0)
        return -1;
    if (H5Pset_fapl_gds_config(fapl, &c) < 0)
        return -1;
    return fapl;
}

static inline hid_t sec2_fapl(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_sec2(fapl);
    return fapl;
}

/* Collects the messages of the current error stack into one string. */
static char error_text[8192];
static herr_t collect_error(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    (void)data;
    size_t len = strlen(error_text);
    snprintf(error_text + len, sizeof error_text - len, "%s | ", e->desc ? e->desc : "");
    return 0;
}
static inline const char *error_stack_text(void)
{
    error_text[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, NULL);
    return error_text;
}

#endif
