/* sec2 semantics of the driver at the H5FD level and through H5F: EOA/EOF,
 * zero-filled reads past EOF, writes that extend the file, truncate, open
 * flags, locking, cmp, the file handle, error messages, statistics. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test_util.h"

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static void test_h5fd_level(void)
{
    const char *path = test_path("h5fd.bin");
    unlink(path);
    hid_t fapl = gds_fapl(NULL);
    H5FD_t *f = H5FDopen(path, H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC, fapl, HADDR_UNDEF);
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(H5FDget_eof(f, H5FD_MEM_DEFAULT) == 0);
    CHECK(H5FDset_eoa(f, H5FD_MEM_DEFAULT, 1 << 20) >= 0);
    CHECK(H5FDget_eoa(f, H5FD_MEM_DEFAULT) == 1 << 20);

    char w[10000], r[12000];
    fill_random(w, sizeof w, 7);
    /* a write past EOF extends the file */
    CHECK(H5FDwrite(f, H5FD_MEM_DRAW, H5P_DEFAULT, 5000, sizeof w, w) >= 0);
    CHECK(H5FDget_eof(f, H5FD_MEM_DEFAULT) == 5000 + sizeof w);
    /* the hole reads as zeros, the data as written, past EOF zeros */
    memset(r, 0xAB, sizeof r);
    CHECK(H5FDread(f, H5FD_MEM_DRAW, H5P_DEFAULT, 4000, sizeof r, r) >= 0);
    int ok = 1;
    for (int i = 0; i < 1000; i++)
        ok &= r[i] == 0;
    CHECK_MSG(ok, "hole not zero");
    CHECK(memcmp(r + 1000, w, sizeof w) == 0);
    ok = 1;
    for (size_t i = 1000 + sizeof w; i < sizeof r; i++)
        ok &= r[i] == 0;
    CHECK_MSG(ok, "past EOF not zero-filled");
    /* metadata type requests take the same path */
    CHECK(H5FDwrite(f, H5FD_MEM_OHDR, H5P_DEFAULT, 0, 100, w) >= 0);
    CHECK(H5FDread(f, H5FD_MEM_OHDR, H5P_DEFAULT, 0, 100, r) >= 0 && memcmp(r, w, 100) == 0);
    /* reads beyond the EOA are refused (HDF5 or the driver) */
    herr_t rc;
    H5E_BEGIN_TRY { rc = H5FDread(f, H5FD_MEM_DRAW, H5P_DEFAULT, (1 << 20) - 10, 100, r); }
    H5E_END_TRY;
    CHECK(rc < 0);
    /* truncate sets the file size to the EOA, both ways */
    CHECK(H5FDtruncate(f, H5P_DEFAULT, 0) >= 0);
    CHECK(file_size(path) == 1 << 20);
    CHECK(H5FDget_eof(f, H5FD_MEM_DEFAULT) == 1 << 20);
    CHECK(H5FDset_eoa(f, H5FD_MEM_DEFAULT, 7000) >= 0);
    CHECK(H5FDtruncate(f, H5P_DEFAULT, 1) >= 0);
    CHECK(file_size(path) == 7000);
    /* the handle is a POSIX descriptor of this file */
    int *fdp = NULL;
    CHECK(H5FDget_vfd_handle(f, fapl, (void **)&fdp) >= 0 && fdp);
    struct stat a, b;
    CHECK(fdp && fstat(*fdp, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino);
    /* cmp: same file -> 0, another file -> nonzero, consistently ordered */
    H5FD_t *same = H5FDopen(path, H5F_ACC_RDONLY, fapl, HADDR_UNDEF);
    const char *other_path = test_path("h5fd_other.bin");
    H5FD_t *other = H5FDopen(other_path, H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC, fapl, HADDR_UNDEF);
    CHECK(same && other);
    if (same && other) {
        CHECK(H5FDcmp(f, same) == 0);
        int c1 = H5FDcmp(f, other), c2 = H5FDcmp(other, f);
        CHECK(c1 != 0 && c1 == -c2);
        /* a read-only open cannot write */
        CHECK(H5FDset_eoa(same, H5FD_MEM_DEFAULT, 1 << 20) >= 0);
        H5E_BEGIN_TRY { rc = H5FDwrite(same, H5FD_MEM_DRAW, H5P_DEFAULT, 0, 10, w); }
        H5E_END_TRY;
        CHECK(rc < 0);
        CHECK(strstr(error_stack_text(), "Bad file descriptor") != NULL);
        /* locks: exclusive on one open conflicts with a second */
        CHECK(H5FDlock(f, 1) >= 0);
        H5E_BEGIN_TRY { rc = H5FDlock(same, 0); }
        H5E_END_TRY;
        CHECK(rc < 0);
        CHECK(strstr(error_stack_text(), "unable to lock file") != NULL);
        CHECK(H5FDunlock(f) >= 0);
        CHECK(H5FDlock(same, 0) >= 0);
        CHECK(H5FDunlock(same) >= 0);
    }
    if (same)
        H5FDclose(same);
    if (other)
        H5FDclose(other);
    CHECK(H5FDclose(f) >= 0);
    H5Pclose(fapl);
    H5Eclear2(H5E_DEFAULT);
}

/* Runs this program again as `--try-open PATH`, a fresh HDF5 in another
 * process; returns its exit code (0: opened, 1: refused). */
static int open_in_other_process(const char *path, const char *locking)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (locking)
            setenv("HDF5_USE_FILE_LOCKING", locking, 1);
        execl("/proc/self/exe", "test_semantics", "--try-open", path, (char *)NULL);
        _exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int try_open(const char *path)
{
    hid_t fapl = gds_fapl(NULL), f;
    H5E_BEGIN_TRY { f = H5Fopen(path, H5F_ACC_RDONLY, fapl); }
    H5E_END_TRY;
    if (f < 0)
        return 1;
    H5Fclose(f);
    return 0;
}

static void test_open_flags(void)
{
    const char *path = test_path("flags.h5");
    unlink(path);
    hid_t fapl = gds_fapl(NULL);
    hid_t f;
    /* opening a missing file fails with errno text in the driver's message */
    H5E_BEGIN_TRY { f = H5Fopen(path, H5F_ACC_RDONLY, fapl); }
    H5E_END_TRY;
    CHECK(f < 0);
    CHECK_MSG(strstr(error_stack_text(), "No such file or directory") != NULL, "%s", error_stack_text());
    f = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    CHECK(f >= 0);
    CHECK(H5Fclose(f) >= 0);
    H5E_BEGIN_TRY { f = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, fapl); }
    H5E_END_TRY;
    CHECK(f < 0); /* exists */
    CHECK(strstr(error_stack_text(), "File exists") != NULL);
    f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(f >= 0);
    /* the open file is locked: a second process cannot open it (as sec2) */
    CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0); /* a complete superblock for the other process */
    CHECK_MSG(open_in_other_process(path, NULL) == 1, "second process opened a locked file");
    /* with HDF5_USE_FILE_LOCKING=FALSE it can */
    CHECK_MSG(open_in_other_process(path, "FALSE") == 0, "HDF5_USE_FILE_LOCKING=FALSE not honoured");
    /* the same file opened twice in one process is recognised (cmp) */
    hid_t f2 = H5Fopen(path, H5F_ACC_RDWR, fapl);
    CHECK(f2 >= 0);
    if (f2 >= 0)
        H5Fclose(f2);
    /* statistics count raw data by route */
    hsize_t n[1] = {1000};
    hid_t s = H5Screate_simple(1, n, NULL);
    hid_t d = H5Dcreate2(f, "x", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int v[1000];
    fill_random(v, sizeof v, 9);
    CHECK(H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5FD_gds_stats_t st;
    CHECK(H5FD_gds_get_stats(f, &st) >= 0);
    CHECK(st.write_bytes[H5FD_GDS_ROUTE_HOST] >= sizeof v && st.write_calls[H5FD_GDS_ROUTE_HOST] >= 1);
    CHECK(st.write_bytes[H5FD_GDS_ROUTE_STAGED] == 0);
    H5Dclose(d);
    H5Sclose(s);
    CHECK(H5Fclose(f) >= 0);
    /* statistics of a file not using gds: a clear failure */
    hid_t sfapl = sec2_fapl();
    f = H5Fopen(path, H5F_ACC_RDONLY, sfapl);
    herr_t rc;
    H5E_BEGIN_TRY { rc = H5FD_gds_get_stats(f, &st); }
    H5E_END_TRY;
    CHECK(rc < 0);
    CHECK_MSG(strstr(error_stack_text(), "does not use the gds driver") != NULL, "%s", error_stack_text());
    H5Fclose(f);
    H5Pclose(sfapl);
    /* the file's access list reports the gds configuration */
    f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    hid_t fa = H5Fget_access_plist(f);
    size_t al = 0, bs = 0, cb = 0;
    CHECK(H5Pget_driver(fa) == H5FD_GDS);
    CHECK(H5Pget_fapl_gds(fa, &al, &bs, &cb) >= 0 && al == 4096 && bs == 4096 && cb > 0);
    H5Pclose(fa);
    H5Fclose(f);
    /* H5Fdelete (1.14+) removes the file through the driver */
#if H5_VERSION_GE(1, 13, 0)
    CHECK(H5Fdelete(path, fapl) >= 0);
    CHECK(access(path, F_OK) != 0);
#endif
    H5Pclose(fapl);
    H5Eclear2(H5E_DEFAULT);
}

static void test_flush_fsync(void)
{
    const char *path = test_path("flush.h5");
    hid_t fapl = gds_fapl("fsync=on");
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(f >= 0);
    CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0);
    CHECK(H5Fclose(f) >= 0);
    H5Pclose(fapl);
}

/* Large cached host reads use the worker pool; a forked child must still be
 * able to read (its pool starts empty instead of waiting for the parent's
 * threads). The pool serves host reads only with 4 cores or more (half the
 * cores), so on smaller machines this runs the single-read path. */
static void test_pool_after_fork(void)
{
    const char *path = test_path("fork.h5");
    hid_t fapl = gds_fapl("threads=4,parallel_threshold=1MiB,io_block_size=256KiB");
    size_t n = 8 << 20;
    unsigned char *w = malloc(n), *r = malloc(n);
    fill_random(w, n, 55);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hsize_t dims[1] = {n};
    hid_t s = H5Screate_simple(1, dims, NULL);
    hid_t d = H5Dcreate2(f, "x", H5T_NATIVE_UCHAR, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, w) >= 0);
    CHECK(H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, r) >= 0); /* starts the pool */
    CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60); /* a hang fails the test instead of blocking it */
        memset(r, 0, n);
        int fd = open(path, O_RDONLY);
        bool ok = H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, r) >= 0 && memcmp(r, w, n) == 0;
        close(fd);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "read in a forked child failed (status %d)", status);
    H5Dclose(d);
    H5Sclose(s);
    H5Fclose(f);
    H5Pclose(fapl);
    free(w);
    free(r);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--try-open"))
        return try_open(argv[2]);
    test_h5fd_level();
    test_open_flags();
    test_flush_fsync();
    test_pool_after_fork();
    return test_finish("test_semantics");
}
