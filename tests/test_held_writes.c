/*
 * Held raw writes (src/vfd/gds_vfd_held.c): the path the GPU write of a
 * compressed dataset stores its chunks by, run without a GPU through a test
 * hook whose hold takes host buffers too. Checked:
 *   - a chunk stored with H5Dwrite_chunk while held is not in the file yet,
 *     and is once its batch is submitted (and waited for) or the hold ends;
 *   - a flush in the middle writes the held chunks before any metadata;
 *   - everything reads back through sec2 after the hold ends and the file
 *     closes;
 *   - a write that fails (RLIMIT_FSIZE: EFBIG, in a child) is reported by
 *     the end of the hold, never lost silently;
 *   - misuse: a second hold on the thread, a hold of a file of another driver.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test_util.h"
#include "../src/vfd/gds_vfd_raw.h"

#define CHUNK ((size_t)256 << 10) /* above the driver's 64 KiB window: straight to the engine */
#define NCHUNKS 16

static unsigned char *data; /* NCHUNKS chunks, one allocation: adjacent pieces merge */

static hid_t make_dataset(hid_t f, const char *name)
{
    hsize_t dims = NCHUNKS * CHUNK, chunk = CHUNK;
    hid_t space = H5Screate_simple(1, &dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    hid_t d = H5Dcreate2(f, name, H5T_NATIVE_UCHAR, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    return d;
}

static int store_chunk(hid_t d, int k)
{
    hsize_t off = (hsize_t)k * CHUNK;
    return H5Dwrite_chunk(d, H5P_DEFAULT, 0, &off, CHUNK, data + (size_t)k * CHUNK) < 0 ? -1 : 0;
}

/* Whether chunk k's bytes are in the file now (read with a descriptor of our own). */
static bool chunk_in_file(const char *path, hid_t d, int k)
{
    hsize_t off = (hsize_t)k * CHUNK;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    unsigned mask = 0;
    if (H5Dget_chunk_info_by_coord(d, &off, &mask, &addr, &size) < 0 || addr == HADDR_UNDEF)
        return false;
    int fd = open(path, O_RDONLY);
    unsigned char *got = malloc(CHUNK);
    bool same = fd >= 0 && got && pread(fd, got, CHUNK, (off_t)addr) == (ssize_t)CHUNK &&
                memcmp(got, data + (size_t)k * CHUNK, CHUNK) == 0;
    free(got);
    if (fd >= 0)
        close(fd);
    return same;
}

static void test_held_then_written(void)
{
    const char *path = test_path("held.h5");
    hid_t fapl = gds_fapl("write_behind=off"); /* what is tested, whatever H5GDS_CONFIG says */
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(f >= 0);
    hid_t d = make_dataset(f, "x");
    char err[512] = "";
    CHECK(gds_test_hold_begin(f) == 0);
    H5E_BEGIN_TRY { CHECK_MSG(gds_test_hold_begin(f) < 0, "a second hold on the same thread was opened"); }
    H5E_END_TRY;

    for (int k = 0; k < 4; k++)
        CHECK(store_chunk(d, k) == 0);
    for (int k = 0; k < 4; k++)
        CHECK_MSG(!chunk_in_file(path, d, k), "chunk %d reached the file while held", k);
    CHECK_MSG(gds_test_hold_submit(0, err, sizeof err) == 0, "submit: %s", err);
    for (int k = 4; k < 8; k++)
        CHECK(store_chunk(d, k) == 0);
    CHECK_MSG(gds_test_hold_submit(1, err, sizeof err) == 0, "submit: %s", err);
    /* submitting slot 0 again waits for its first batch */
    CHECK_MSG(gds_test_hold_submit(0, err, sizeof err) == 0, "submit: %s", err);
    for (int k = 0; k < 4; k++)
        CHECK_MSG(chunk_in_file(path, d, k), "chunk %d not in the file once its batch was waited for", k);

    /* A flush writes metadata: the held chunks go first. */
    for (int k = 8; k < 12; k++)
        CHECK(store_chunk(d, k) == 0);
    CHECK(H5Fflush(f, H5F_SCOPE_LOCAL) >= 0);
    for (int k = 8; k < 12; k++)
        CHECK_MSG(chunk_in_file(path, d, k), "chunk %d not in the file after a flush wrote metadata", k);

    for (int k = 12; k < NCHUNKS; k++)
        CHECK(store_chunk(d, k) == 0);
    CHECK_MSG(gds_test_hold_end(err, sizeof err) == 0, "end: %s", err);
    for (int k = 0; k < NCHUNKS; k++)
        CHECK_MSG(chunk_in_file(path, d, k), "chunk %d not in the file after the hold ended", k);
    H5Dclose(d);
    CHECK(H5Fclose(f) >= 0);
    H5Pclose(fapl);

    hid_t sec2 = sec2_fapl();
    f = H5Fopen(path, H5F_ACC_RDONLY, sec2);
    CHECK(f >= 0);
    d = H5Dopen2(f, "x", H5P_DEFAULT);
    unsigned char *got = malloc(NCHUNKS * CHUNK);
    CHECK(got && H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    CHECK_MSG(got && memcmp(got, data, NCHUNKS * CHUNK) == 0, "the dataset read back through sec2 differs");
    free(got);
    H5Dclose(d);
    H5Fclose(f);
    H5Pclose(sec2);

    /* a file of another driver cannot be held */
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5E_BEGIN_TRY { CHECK(gds_test_hold_begin(f) < 0); }
    H5E_END_TRY;
    H5Fclose(f);
}

/* Child: the file may not grow past 1.5 MiB; the held chunks beyond fail
 * with EFBIG, and the end of the hold must say so. */
static int child_fsize(const char *path)
{
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {(rlim_t)3 << 19, (rlim_t)3 << 19};
    if (setrlimit(RLIMIT_FSIZE, &lim) < 0)
        return 77;
    hid_t fapl = gds_fapl("write_behind=off");
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hid_t d = f >= 0 ? make_dataset(f, "x") : -1;
    if (d < 0 || gds_test_hold_begin(f) < 0)
        return 2;
    for (int k = 0; k < NCHUNKS; k++)
        if (store_chunk(d, k) < 0)
            return 3;
    char err[512] = "";
    int rc = gds_test_hold_end(err, sizeof err);
    printf("end of the hold: %s\n", rc < 0 ? err : "no failure");
    H5E_BEGIN_TRY
    {
        H5Dclose(d);
        H5Fclose(f);
    }
    H5E_END_TRY;
    return rc < 0 && strstr(err, strerror(EFBIG)) ? 0 : 4;
}

static void test_failed_write_reported(void)
{
    const char *path = test_path("held-fsize.h5");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = child_fsize(path);
        fflush(stdout); /* _exit does not */
        _exit(rc);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 77),
              "a held write past RLIMIT_FSIZE: child status %d (4: the end of the hold did not report EFBIG)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    unlink(path);
}

int main(void)
{
    data = malloc(NCHUNKS * CHUNK);
    fill_random(data, NCHUNKS * CHUNK, 42);
    test_held_then_written();
    test_failed_write_reported();
    free(data);
    return test_finish("test_held_writes");
}
