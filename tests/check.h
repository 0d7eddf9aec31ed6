/* The check macros of every C test: CHECK records a failure and goes on; a
 * program's exit code is the number of failures (capped), so CTest sees each
 * test. No HDF5 here: the codec tests (tests/codec) build without it;
 * test_util.h adds the HDF5 helpers. */
#ifndef H5GDS_TEST_CHECK_H
#define H5GDS_TEST_CHECK_H

#include <stdio.h>

/* A test of several files has one count: each of its files defines
 * H5GDS_TEST_CHECK_EXTERN before including this, and one of them defines
 * the two counters. */
#ifdef H5GDS_TEST_CHECK_EXTERN
extern int test_failures;
extern int test_checks;
#else
static int test_failures;
static int test_checks;
#endif

#define CHECK(cond)                                                                 \
    do {                                                                            \
        test_checks++;                                                              \
        if (!(cond)) {                                                              \
            test_failures++;                                                        \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);         \
        }                                                                           \
    } while (0)

#define CHECK_MSG(cond, ...)                                                        \
    do {                                                                            \
        test_checks++;                                                              \
        if (!(cond)) {                                                              \
            test_failures++;                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

static inline int test_finish(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
    return test_failures > 100 ? 100 : test_failures;
}

#endif
