/*
 * The public entry points report failures as HDF5's own API calls do: with
 * HDF5's automatic error printing on (the default), a failed call prints the
 * whole error stack once (HDF5's entries and the library's); with printing
 * turned off (H5Eset_auto2(H5E_DEFAULT, NULL, NULL)) it prints nothing and
 * the stack is there for H5Eprint2. stderr is captured by pointing fd 2 at a
 * temporary file around each call.
 *
 *   test_errors          the driver's entry points
 *   test_errors --mpi    (built with MPI, under mpirun) the MPI layer's
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "H5FDgds.h"
#include "test_util.h"
#ifdef TEST_ERRORS_MPI
#include "H5FDgds_mpi.h"
#endif

/* One failing call: what it prints must hold each marker exactly once. */
typedef struct error_case {
    const char *name;
    int (*call)(void); /* negative when the call failed, as it must */
    const char *markers[3];
    /* Entry points in files another change converts (gds_vfd.c, gds_config.c,
     * gds_transfer.c): reported, not counted, until it is applied. */
    bool pending;
} error_case_t;

static char captured[65536];

/* Runs `call` with fd 2 pointing at a temporary file; its output into `captured`. */
static int run_captured(int (*call)(void))
{
    char path[] = "/tmp/h5gds-test-errors-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(1);
    }
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int rc = call();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, captured, sizeof captured - 1, 0);
    captured[n > 0 ? n : 0] = '\0';
    close(fd);
    return rc;
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* ---- the driver's entry points ---- */

static hid_t scratch_fapl = H5I_INVALID_HID, scratch_file = H5I_INVALID_HID, scratch_dcpl = H5I_INVALID_HID;

static int prepare_dcpl_on_fapl(void)
{
    return H5FD_gds_prepare_dcpl(scratch_fapl);
}

static int write_gds_bad_dataset(void)
{
    int v = 0;
    return H5Dwrite_gds(scratch_fapl, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
}

static int read_gds_bad_dataset(void)
{
    int v = 0;
    return H5Dread_gds(scratch_fapl, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v);
}

static int set_fapl_on_dcpl(void)
{
    return H5Pset_fapl_gds(scratch_dcpl, 0, 0, 0);
}

static int set_fapl_config_null(void)
{
    return H5Pset_fapl_gds_config(scratch_fapl, NULL);
}

static int get_fapl_of_sec2(void)
{
    H5FD_gds_config_t c;
    return H5Pget_fapl_gds_config(scratch_fapl, &c);
}

static int parse_unknown_key(void)
{
    H5FD_gds_config_t c;
    if (H5FD_gds_config_init(&c) < 0)
        return 0; /* not the failure wanted */
    return H5FD_gds_config_parse(&c, "no_such_key=1");
}

static int stats_of_sec2_file(void)
{
    H5FD_gds_stats_t s;
    return H5FD_gds_get_stats(scratch_file, &s);
}

static int stream_on_default_dxpl(void)
{
    return H5Pset_dxpl_gds_stream(H5P_DEFAULT, NULL);
}

static int decode_stats_null(void) { return H5FD_gds_last_decode_stats(NULL); }

static int encode_stats_null(void) { return H5FD_gds_last_encode_stats(NULL); }

static const error_case_t driver_cases[] = {
    /* HDF5's failure (H5Pset_fill_time) and the library's message, in one print. */
    {"H5FD_gds_prepare_dcpl", prepare_dcpl_on_fapl, {"cannot set fill time", "H5Pset_fill_time", NULL}, false},
    /* Nested: H5Dwrite fails inside H5Dwrite_gds; printed once, not twice. */
    {"H5Dwrite_gds", write_gds_bad_dataset, {"H5Dwrite(): ", NULL}, false},
    {"H5Dread_gds", read_gds_bad_dataset, {"H5Dread(): ", NULL}, false},
    {"H5Pset_fapl_gds", set_fapl_on_dcpl, {"not a file access property list", NULL}, false},
    {"H5Pset_fapl_gds_config", set_fapl_config_null, {"configuration pointer is NULL", NULL}, false},
    {"H5Pget_fapl_gds_config", get_fapl_of_sec2, {"does not use the gds driver", NULL}, false},
    {"H5FD_gds_config_parse", parse_unknown_key, {"no_such_key", NULL}, false},
    {"H5FD_gds_get_stats", stats_of_sec2_file, {"does not use the gds driver", NULL}, false},
    {"H5Pset_dxpl_gds_stream", stream_on_default_dxpl, {"cannot be changed", NULL}, false},
    {"H5FD_gds_last_decode_stats", decode_stats_null, {"stats pointer is NULL", NULL}, false},
    {"H5FD_gds_last_encode_stats", encode_stats_null, {"stats pointer is NULL", NULL}, false},
};

static int pending_failures;

static void check_case(const error_case_t *t)
{
    int before = test_failures;
    /* Printing on (HDF5's default): the stack, once. */
    H5Eset_auto2(H5E_DEFAULT, (H5E_auto2_t)H5Eprint2, NULL);
    int rc = run_captured(t->call);
    CHECK_MSG(rc < 0, "%s: the call did not fail", t->name);
    for (int i = 0; i < 3 && t->markers[i]; i++)
        CHECK_MSG(count_of(captured, t->markers[i]) == 1, "%s, printing on: '%s' printed %d times, not once:\n%s",
                  t->name, t->markers[i], count_of(captured, t->markers[i]), captured);
    /* Printing off: nothing printed, the stack kept for the application. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    rc = run_captured(t->call);
    CHECK_MSG(rc < 0, "%s: the call did not fail", t->name);
    CHECK_MSG(captured[0] == '\0', "%s, printing off: printed:\n%s", t->name, captured);
    CHECK_MSG(H5Eget_num(H5E_DEFAULT) > 0, "%s, printing off: the error stack is empty", t->name);
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, (H5E_auto2_t)H5Eprint2, NULL);
    if (t->pending && test_failures != before) {
        /* Known: counted apart until the entry point is converted. */
        pending_failures += test_failures - before;
        test_failures = before;
        printf("test_errors: %s: PENDING (entry point not converted yet)\n", t->name);
    }
    else if (t->pending) {
        printf("test_errors: %s: passes: drop its pending mark\n", t->name);
    }
}

static herr_t count_handler(hid_t stack, void *data)
{
    (void)stack;
    ++*(int *)data;
    return 0;
}

static void test_driver(void)
{
    scratch_fapl = sec2_fapl();
    scratch_file = H5Fcreate(test_path("errors.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, scratch_fapl);
    scratch_dcpl = H5Pcreate(H5P_DATASET_CREATE);
    CHECK(scratch_fapl >= 0 && scratch_file >= 0 && scratch_dcpl >= 0);
    for (size_t i = 0; i < sizeof driver_cases / sizeof driver_cases[0]; i++)
        check_case(&driver_cases[i]);

    /* A successful call after a failed one leaves no stale errors behind
     * and prints nothing. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    prepare_dcpl_on_fapl();
    H5Eset_auto2(H5E_DEFAULT, (H5E_auto2_t)H5Eprint2, NULL);
    hid_t dapl = H5FD_gds_create_dapl();
    CHECK(dapl >= 0);
    CHECK_MSG(H5Eget_num(H5E_DEFAULT) == 0, "a successful call left %zd errors on the stack",
              (ssize_t)H5Eget_num(H5E_DEFAULT));
    H5Pclose(dapl);

    /* A handler of the application's, set with H5Eset_auto2, is the one
     * called, once, with its data. */
    int calls = 0;
    H5Eset_auto2(H5E_DEFAULT, count_handler, &calls);
    CHECK(run_captured(prepare_dcpl_on_fapl) < 0);
    CHECK_MSG(calls == 1 && captured[0] == '\0', "custom handler called %d times (output: %s)", calls, captured);
    H5Eset_auto2(H5E_DEFAULT, (H5E_auto2_t)H5Eprint2, NULL);
    H5Fclose(scratch_file);
    H5Pclose(scratch_fapl);
    H5Pclose(scratch_dcpl);
}

#ifdef TEST_ERRORS_MPI
/* ---- the MPI layer's entry points (every rank fails alike) ---- */

static int mpi_write_null_collection(void)
{
    hsize_t dims[1] = {1}, off[1] = {0}, cnt[1] = {0};
    return H5FD_gds_mpi_write(NULL, "x", H5T_NATIVE_INT, 1, dims, off, cnt, NULL);
}

static int mpi_begin_missing_directory(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/no-such-directory/master.h5", test_path(""));
    H5FD_gds_collection_t *c = H5FD_gds_mpi_begin(MPI_COMM_WORLD, path, H5P_DEFAULT);
    if (c)
        H5FD_gds_mpi_finish(c);
    return c ? 0 : -1;
}

static const error_case_t mpi_cases[] = {
    {"H5FD_gds_mpi_write", mpi_write_null_collection, {"the collection is NULL", NULL}, false},
    /* Nested: H5Fcreate fails inside; HDF5's entries and both messages of
     * the MPI layer in one print. */
    {"H5FD_gds_mpi_begin", mpi_begin_missing_directory,
     {"cannot start a collection", "H5Fcreate(): ", "gds_open(): "}, false},
};
#endif

int main(int argc, char **argv)
{
    bool mpi = argc > 1 && strcmp(argv[1], "--mpi") == 0;
#ifdef TEST_ERRORS_MPI
    if (mpi) {
        MPI_Init(&argc, &argv);
        for (size_t i = 0; i < sizeof mpi_cases / sizeof mpi_cases[0]; i++)
            check_case(&mpi_cases[i]);
        int failures = test_finish("test_errors --mpi");
        MPI_Finalize();
        return failures;
    }
#else
    if (mpi) {
        printf("test_errors --mpi: built without MPI\n");
        return 77;
    }
#endif
    test_driver();
    if (pending_failures)
        printf("test_errors: %d checks of entry points not converted yet failed (not counted)\n", pending_failures);
    return test_finish("test_errors");
}
