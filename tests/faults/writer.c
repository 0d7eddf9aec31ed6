/* The writer child of the families that write until the file system says
 * no (disk-full, fsize, truncated): role `write`, and one driver's run of it
 * with the check of the file it leaves (faults.h). */
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>

#include "faults.h"

#define PIECES 256

/* Writes `filler` until the file system is full. */
static void fill_disk(const char *filler)
{
    int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char block[4096];
    memset(block, 1, sizeof block);
    while (fd >= 0 && write(fd, block, sizeof block) > 0)
        ;
    if (fd >= 0)
        close(fd);
}

/* Child: writes a dataset of `pieces` x `piece` int64 in piece-sized
 * H5Dwrites until one fails. With `filler`, all pieces are written and then
 * `filler` is written until the file system is full, so that only what the
 * driver still holds meets the full disk (at H5Fclose). Reports what
 * succeeded: "written=<pieces>", "closed=<0|1>". */
int role_write(const char *driver, const char *path, long piece, long pieces, const char *filler)
{
    if (!getenv("H5GDS_FAULTS_SHOW")) /* set it to see the error stacks when debugging a case */
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    signal(SIGXFSZ, SIG_IGN);
    const char *limit = getenv("H5GDS_FAULTS_FSIZE");
    if (limit) {
        struct rlimit rl = {(rlim_t)strtoull(limit, NULL, 0), (rlim_t)strtoull(limit, NULL, 0)};
        if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
            return 4;
    }
    hid_t fapl = driver_fapl(driver, NULL);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f < 0) {
        printf("written=0\nclosed=0\n");
        return 0;
    }
    hsize_t n = (hsize_t)(piece * pieces), count = (hsize_t)piece;
    hid_t space = H5Screate_simple(1, &n, NULL), mem = H5Screate_simple(1, &count, NULL);
    hid_t d = H5Dcreate2(f, "x", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int64_t *buf = malloc((size_t)piece * sizeof *buf);
    /* H5GDS_FAULTS_FILL_FIRST: the disk is full while the data is written
     * and has room again at close (the metadata fits): only the write
     * calls themselves, or the driver's memory of a failure, can say that
     * data is missing. */
    bool fill_first = filler && getenv("H5GDS_FAULTS_FILL_FIRST");
    /* H5GDS_FAULTS_TRUNCATE_AT=<piece>: the file is cut to nothing after that
     * piece is written, while it is open (another process's truncate). */
    const char *cut = getenv("H5GDS_FAULTS_TRUNCATE_AT");
    long truncate_at = cut ? atol(cut) : -1;
    if (fill_first)
        fill_disk(filler);
    long written = 0;
    for (long p = 0; d >= 0 && p < pieces; p++) {
        for (long i = 0; i < piece; i++)
            buf[i] = p * piece + i + 1;
        hsize_t start = (hsize_t)(p * piece);
        H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &count, NULL);
        if (H5Dwrite(d, H5T_NATIVE_INT64, mem, space, H5P_DEFAULT, buf) < 0)
            break;
        written++;
        if (truncate_at >= 0 && p == truncate_at && truncate(path, 0) < 0) /* as another process would */
            return 6;
    }
    printf("written=%ld\n", written);
    fflush(stdout);
    if (fill_first)
        unlink(filler);
    else if (filler)
        fill_disk(filler);
    herr_t rc = 0;
    if (d >= 0 && H5Dclose(d) < 0)
        rc = -1;
    H5Sclose(space);
    H5Sclose(mem);
    if (H5Fclose(f) < 0)
        rc = -1;
    printf("closed=%d\n", rc >= 0);
    fflush(stdout); /* before HDF5's exit handler (HDF5 1.10 may crash there after a failed close) */
    free(buf);
    H5Pclose(fapl);
    return 0;
}

/* After role_write: opens the file with sec2 and counts the written pieces
 * that read back intact. -1: the file does not open (or the dataset not). */
static long intact_pieces(const char *path, long piece, long written)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = sec2_fapl();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return -1;
    hid_t d = H5Dopen2(f, "x", H5P_DEFAULT);
    long intact = -1;
    if (d >= 0) {
        hid_t s = H5Dget_space(d);
        hssize_t n = H5Sget_simple_extent_npoints(s);
        int64_t *all = calloc((size_t)(n > 0 ? n : 1), sizeof *all);
        if (n > 0 && H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) >= 0) {
            intact = 0;
            for (long p = 0; p < written && (p + 1) * piece <= n; p++) {
                bool ok = true;
                for (long i = 0; i < piece && ok; i++)
                    ok = all[p * piece + i] == p * piece + i + 1;
                intact += ok;
            }
        }
        free(all);
        H5Sclose(s);
        H5Dclose(d);
    }
    H5Fclose(f);
    return intact;
}

write_report_t write_and_check(const char *driver, const char *dir, long piece, bool filler, const char *const *env,
                               int (*prepare)(const char *))
{
    write_report_t w = {{OUT_FAILED, -1}, -1, -1, -1};
    if (prepare && prepare(dir) < 0)
        return w;
    char path[4096], fill[4096], out[4096], piece_s[32], pieces_s[32];
    snprintf(path, sizeof path, "%s/%s.h5", dir, driver);
    snprintf(fill, sizeof fill, "%s/filler", dir);
    snprintf(out, sizeof out, "%s.out", test_path(driver));
    snprintf(piece_s, sizeof piece_s, "%ld", piece);
    snprintf(pieces_s, sizeof pieces_s, "%d", PIECES);
    unlink(path);
    unlink(fill);
    const char *args[] = {"write", driver, path, piece_s, pieces_s, filler ? fill : NULL, NULL};
    w.child = run_child(args, env, out, 60);
    w.written = read_long_file(out, "written");
    w.closed = read_long_file(out, "closed");
    unlink(fill);
    /* a crash after H5Fclose returned (closed= printed): the file is final */
    if (w.child.outcome == OUT_OK || (w.child.outcome == OUT_CRASH && w.closed >= 0))
        w.intact = intact_pieces(path, piece, w.written);
    return w;
}
