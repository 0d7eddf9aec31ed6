/* Fault family `pool-cycles` (test_faults pool-cycles): 200 H5open/H5close
 * cycles reading a 64 MiB cached file through the worker pool
 * (H5GDS_TEST_NCPU=8); its threads must not outlive H5close. */
#include <dirent.h>
#include <sys/stat.h>

#include "faults.h"

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

#define CYCLE_ELEMENTS ((size_t)8 << 20) /* 64 MiB of int64 */
#define CYCLES 200

int role_pool_cycles(const char *path)
{
    int64_t *buf = malloc(CYCLE_ELEMENTS * sizeof *buf);
    int baseline = count_threads(), used = 0, leaked = 0, bad = 0;
    for (int c = 0; c < CYCLES && !bad; c++) {
        H5open();
        hid_t fapl = gds_fapl("threads=4,io_block_size=4MiB,parallel_threshold=1MiB");
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
        hid_t d = f >= 0 ? H5Dopen2(f, "x", H5P_DEFAULT) : -1;
        memset(buf, 0, 4096);
        if (d < 0 || H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ||
            buf[0] != 1 || buf[CYCLE_ELEMENTS - 1] != (int64_t)CYCLE_ELEMENTS || buf[CYCLE_ELEMENTS / 2] != (int64_t)CYCLE_ELEMENTS / 2 + 1) {
            CHECK_MSG(0, "cycle %d: reading the 64 MiB dataset failed or read wrong data", c);
            bad = 1;
        }
        int during = count_threads();
        used += during > baseline;
        if (d >= 0)
            H5Dclose(d);
        if (f >= 0)
            H5Fclose(f);
        H5Pclose(fapl);
        H5close();
        /* A joined thread can still be listed for a moment: the kernel wakes
         * pthread_join when the thread releases its memory, a little before
         * it removes the task. Give it up to a second to go. */
        int after = count_threads();
        for (int wait = 0; wait < 1000 && after != baseline; wait++) {
            usleep(1000);
            after = count_threads();
        }
        if (after != baseline && !leaked++)
            CHECK_MSG(0, "cycle %d: %d threads after H5close, %d before the first H5open (workers outlive the library)",
                      c, after, baseline);
    }
    printf("pool-cycles: %d cycles; pool threads seen in %d, thread count changed after H5close in %d\n", CYCLES,
           used, leaked);
    CHECK_MSG(used > 0, "the worker pool never ran (is H5GDS_TEST_NCPU honoured?): the case proves nothing");
    CHECK(leaked == 0);
    free(buf);
    return test_finish("pool-cycles");
}

int case_pool_cycles(void)
{
    const char *path = test_path("pool-cycles.h5");
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_size < (off_t)(CYCLE_ELEMENTS * 8)) {
        hid_t fapl = sec2_fapl();
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        hsize_t n = CYCLE_ELEMENTS;
        hid_t s = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, "x", H5T_NATIVE_INT64, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        int64_t *buf = malloc(CYCLE_ELEMENTS * sizeof *buf);
        for (size_t i = 0; i < CYCLE_ELEMENTS; i++)
            buf[i] = (int64_t)i + 1;
        CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
        free(buf);
        H5Dclose(d);
        H5Sclose(s);
        CHECK(H5Fclose(f) >= 0);
        H5Pclose(fapl);
    }
    /* The library is not opened here before the child: its thread count
     * starts from a process that never ran the pool. */
    const char *args[] = {"pool-cycles-run", path, NULL};
    const char *env[] = {getenv("H5GDS_TEST_NCPU") ? NULL : "H5GDS_TEST_NCPU=8", NULL};
    char out[4096];
    snprintf(out, sizeof out, "%s", test_path("pool-cycles.out"));
    child_result_t r = run_child(args, env, out, 300);
    char text[4096] = "";
    read_text_file(out, text, sizeof text);
    printf("%s", text);
    CHECK_MSG(r.outcome == OUT_OK, "pool-cycles run: %s (%d)", outcome_names[r.outcome], r.code);
    return test_finish("pool-cycles");
}
