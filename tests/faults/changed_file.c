/* Fault family `changed-file` (test_faults changed-file): another process
 * rewrites or recreates a file that is open; gds must see every change
 * sec2 sees (the driver's window is never stale). */
#include "faults.h"

#define CHANGED_N 8192 /* int64: 64 KiB, one sieve window */

/* Child: rewrites both datasets with `value` (sec2, no locking: the reader
 * holds the file open), or ("recreate") replaces the file's contents. */
int role_rewrite(const char *path, const char *how)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = sec2_fapl();
    H5Pset_file_locking(fapl, 0, 1);
    int64_t *buf = malloc(CHANGED_N * sizeof *buf);
    int rc = 0;
    if (strcmp(how, "recreate") == 0) {
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        hsize_t n = 100;
        hid_t s = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, "other", H5T_NATIVE_INT64, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        memset(buf, 0x5A, 100 * sizeof *buf);
        rc = f < 0 || d < 0 || H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0;
        H5Dclose(d);
        H5Sclose(s);
        rc |= H5Fclose(f) < 0;
    }
    else {
        long value = strtol(how, NULL, 10);
        for (int i = 0; i < CHANGED_N; i++)
            buf[i] = value * 1000000 + i;
        hid_t f = H5Fopen(path, H5F_ACC_RDWR, fapl);
        for (int k = 0; k < 2; k++) {
            hid_t d = H5Dopen2(f, k ? "chunked" : "contiguous", H5P_DEFAULT);
            rc |= d < 0 || H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0;
            H5Dclose(d);
        }
        rc |= f < 0 || H5Fclose(f) < 0;
    }
    H5Pclose(fapl);
    free(buf);
    return rc;
}

/* Which value the dataset holds: v for all v*1000000+i, -1 mixed/other, -2 unreadable. */
static long dataset_value(hid_t file, const char *name)
{
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    int64_t *buf = calloc(CHANGED_N, sizeof *buf);
    long value = -2;
    if (d >= 0 && H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0) {
        value = (long)(buf[0] / 1000000);
        for (int i = 0; i < CHANGED_N; i++)
            if (buf[i] != value * 1000000 + i)
                value = -1;
    }
    if (d >= 0)
        H5Dclose(d);
    free(buf);
    return value;
}

static void other_process(const char *path, const char *how)
{
    const char *args[] = {"rewrite", path, how, NULL};
    child_result_t r = run_child(args, NULL, NULL, 30);
    if (r.outcome != OUT_OK)
        printf("the rewriting process failed: %s (%d)\n", outcome_names[r.outcome], r.code);
    /* The driver looks at the file once per coarse clock tick (1-10 ms). */
    usleep(30000);
}

static bool make_changed_file(const char *path)
{
    hid_t fapl = sec2_fapl();
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hsize_t n = CHANGED_N, chunk = 1024;
    hid_t s = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t d1 = H5Dcreate2(f, "contiguous", H5T_NATIVE_INT64, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d2 = H5Dcreate2(f, "chunked", H5T_NATIVE_INT64, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    bool ok = f >= 0 && d1 >= 0 && d2 >= 0;
    H5Dclose(d1);
    H5Dclose(d2);
    H5Pclose(dcpl);
    H5Sclose(s);
    ok &= H5Fclose(f) >= 0;
    H5Pclose(fapl);
    return ok;
}

/* Child: one driver's reader. Prints "<scenario>=<value seen>" lines:
 * values are 1 (before the change), 2, 3 (after), -1 mixed, -2 an error. */
int role_reader(const char *driver, const char *path)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    alarm(60);
    /* The file, as before every case: both datasets hold 1. */
    if (!make_changed_file(path) || role_rewrite(path, "1") != 0)
        return 5;
    hid_t fapl = driver_fapl(driver, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f < 0)
        return 6;
    /* Each case first reads the dataset (the driver keeps it in its
     * window), then another process changes it, then it is read again. */
    printf("before=%ld\n", dataset_value(f, "contiguous"));
    other_process(path, "2");
    /* A dataset closed and reopened (dataset_value opens it anew). */
    printf("reopened_contiguous=%ld\n", dataset_value(f, "contiguous"));
    dataset_value(f, "chunked");
    other_process(path, "3");
    printf("reopened_chunked=%ld\n", dataset_value(f, "chunked"));
    dataset_value(f, "contiguous");
    other_process(path, "4");
    /* The file opened again, read-only, while the first handle is open (HDF5
     * shares the driver's file between them). */
    hid_t f2 = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    printf("opened_again=%ld\n", f2 >= 0 ? dataset_value(f2, "contiguous") : -2);
    if (f2 >= 0)
        H5Fclose(f2);
    H5Fclose(f);
    /* A new open after another change. */
    other_process(path, "5");
    f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    printf("new_open=%ld\n", f >= 0 ? dataset_value(f, "contiguous") : -2);
    /* Another process replaces the file's contents while it is open: the
     * cached metadata now points at other bytes. No crash, no hang. */
    other_process(path, "recreate");
    printf("recreated=%ld\n", f >= 0 ? dataset_value(f, "contiguous") : -2);
    if (f >= 0)
        H5Fclose(f);
    H5Pclose(fapl);
    return 0;
}

int case_changed_file(void)
{
    const char *path = test_path("changed.h5");

    static const char *const keys[] = {"before", "reopened_contiguous", "reopened_chunked", "opened_again",
                                       "new_open", "recreated"};
    static const long fresh[] = {1, 2, 3, 4, 5, -99};
    long seen[2][6];
    child_result_t r[2];
    for (int drv = 0; drv < 2; drv++) {
        const char *driver = drv ? "gds" : "sec2";
        char out[4096];
        snprintf(out, sizeof out, "%s", test_path(drv ? "changed-gds.out" : "changed-sec2.out"));
        const char *args[] = {"reader", driver, path, NULL};
        r[drv] = run_child(args, NULL, out, 90);
        for (int k = 0; k < 6; k++)
            seen[drv][k] = read_long_file(out, keys[k]);
        printf("changed-file %-4s: %s;", driver, outcome_names[r[drv].outcome]);
        for (int k = 0; k < 6; k++)
            printf(" %s=%ld", keys[k], seen[drv][k]);
        printf("\n");
    }
    CHECK_MSG(r[1].outcome == OUT_OK || r[0].outcome != OUT_OK, "gds reader %s (%d), sec2 reader %s",
              outcome_names[r[1].outcome], r[1].code, outcome_names[r[0].outcome]);
    for (int k = 0; k < 5; k++) {
        /* sec2 shows the change in each of these: so must gds. */
        CHECK_MSG(seen[0][k] == fresh[k], "sec2 %s: saw %ld, expected %ld (the case is broken)", keys[k], seen[0][k],
                  fresh[k]);
        CHECK_MSG(seen[1][k] == fresh[k] || seen[0][k] != fresh[k], "gds %s: saw %ld (stale), sec2 saw %ld", keys[k],
                  seen[1][k], seen[0][k]);
    }
    /* The replaced file: HDF5's cached metadata points into other bytes;
     * both drivers must read the same ones. */
    CHECK_MSG(seen[1][5] == seen[0][5], "gds recreated: saw %ld, sec2 %ld", seen[1][5], seen[0][5]);
    return test_finish("changed-file");
}
