/* Fault family `disk-full` (test_faults disk-full): writes on a 1 MiB tmpfs
 * mounted in a private mount namespace (root only; else skipped), with and
 * without fallocate, with write-behind and its background writes held. */
#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "faults.h"

static int fresh_tmpfs(const char *dir)
{
    umount2(dir, MNT_DETACH);
    if (mount("h5gds-faults", dir, "tmpfs", 0, "size=1m") < 0) {
        fprintf(stderr, "mount tmpfs on %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Child, in its own mount namespace: the disk-full cases on a 1 MiB tmpfs. */
int role_disk_full(const char *dir)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("h5gds-faults", dir, "tmpfs", 0, "size=1m") < 0) {
        printf("cannot mount a tmpfs in a private mount namespace: %s\n", strerror(errno));
        return 77;
    }
    /* 256 pieces: of 1 KiB int64s (8 KiB, through the driver's window) the
     * dataset (2 MiB) does not fit; with the filler every piece fits and
     * only the deferred bytes meet the full disk at close. */
    /* "no fallocate": as on a file system where the driver cannot reserve
     * room for the bytes it defers, so that they meet the full disk at close. */
    static const char *const no_fallocate[] = {"H5GDS_TEST_NO_FALLOCATE=1", NULL};
    /* Write-behind: the writes return after a snapshot; their file space is
     * claimed first (fallocate), so a disk that fills up afterwards cannot
     * take it: what was reported written lands, and the file holds at least
     * what sec2's holds. 128 KiB writes are not reserved ahead by the driver
     * (below its 1 MiB); 1 MiB writes are, and the reservation itself finds
     * the disk full. "held": every background write starts only when waited
     * for (H5GDS_TEST_WB_HOLD), the slowest the background can be, which a
     * loaded machine only sometimes reaches. */
    static const char *const write_behind[] = {"H5GDS_CONFIG=write_behind=4MiB", NULL};
    static const char *const write_behind_held[] = {"H5GDS_CONFIG=write_behind=4MiB", "H5GDS_TEST_WB_HOLD=1", NULL};
    /* Without fallocate nothing can be claimed: the deferred bytes meet the
     * full disk in the background, and the failure must reach a later write
     * or the close (never closed=1 with pieces missing), the file still
     * opening wherever sec2's does. */
    static const char *const write_behind_no_fallocate_held[] = {
        "H5GDS_CONFIG=write_behind=4MiB", "H5GDS_TEST_WB_HOLD=1", "H5GDS_TEST_NO_FALLOCATE=1", NULL};
    static const char *const write_behind_fill_first[] = {"H5GDS_CONFIG=write_behind=4MiB", "H5GDS_TEST_NO_FALLOCATE=1",
                                                          "H5GDS_FAULTS_FILL_FIRST=1", NULL};
    static const struct {
        const char *label;
        long piece;
        bool filler;
        const char *const *env;
        bool write_behind;
        bool at_least_sec2; /* gds's file holds at least the pieces sec2's holds */
    } cases[] = {
        {"disk-full 8KiB writes", 1024, false, NULL, false, true},
        {"disk-full 32KiB writes", 4096, false, NULL, false, true},
        {"disk-full 256B writes, disk filled before close", 32, true, NULL, false, true},
        {"disk-full 8KiB writes, disk filled before close", 256, true, NULL, false, true},
        {"disk-full 8KiB writes, no fallocate", 1024, false, no_fallocate, false, false},
        {"disk-full 256B writes, disk filled before close, no fallocate", 32, true, no_fallocate, false, false},
        {"disk-full 8KiB writes, disk filled before close, no fallocate", 256, true, no_fallocate, false, false},
        {"disk-full 128KiB writes, write-behind", 16384, false, write_behind, true, true},
        {"disk-full 1MiB writes, write-behind", 131072, false, write_behind, true, true},
        {"disk-full 8KiB writes, disk filled before close, write-behind", 1024, true, write_behind, true, true},
        {"disk-full 128KiB writes, write-behind, held", 16384, false, write_behind_held, true, true},
        {"disk-full 8KiB writes, disk filled before close, write-behind, held", 1024, true, write_behind_held, true,
         true},
        {"disk-full 8KiB writes, disk filled before close, write-behind, held, no fallocate", 1024, true,
         write_behind_no_fallocate_held, true, false},
        {"disk-full 128KiB writes, disk full while writing, room at close, write-behind, no fallocate", 16384, true,
         write_behind_fill_first, true, false}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_report_t s = write_and_check("sec2", dir, cases[c].piece, cases[c].filler, cases[c].env, fresh_tmpfs);
        write_report_t g = write_and_check("gds", dir, cases[c].piece, cases[c].filler, cases[c].env, fresh_tmpfs);
        compare_writes(cases[c].label, &s, &g, cases[c].write_behind);
        if (cases[c].filler)
            CHECK_MSG(g.closed == 0 || g.intact == g.written, "%s: gds's deferred bytes were lost silently",
                      cases[c].label);
        if (cases[c].at_least_sec2)
            CHECK_MSG(g.intact >= s.intact, "%s: gds's file holds %ld intact pieces, sec2's %ld", cases[c].label,
                      g.intact, s.intact);
        if (cases[c].env == write_behind_fill_first) /* the background ENOSPC itself must have been reported */
            CHECK_MSG(g.written > 0 && g.closed == 0, "%s: gds: %ld writes returned, closed %ld", cases[c].label,
                      g.written, g.closed);
    }
    umount2(dir, MNT_DETACH);
    return test_finish("disk-full");
}

int case_disk_full(void)
{
    if (getuid() != 0) {
        printf("SKIPPED: not root: cannot mount a small tmpfs\n");
        return 77;
    }
    const char *dir = test_path("tmpfs");
    mkdir(dir, 0755);
    const char *args[] = {"disk-full-run", dir, NULL};
    child_result_t r = run_child(args, NULL, NULL, 240);
    if (r.outcome == OUT_FAILED && r.code == 77) {
        printf("SKIPPED: cannot mount a tmpfs here (needs root and unshare/mount)\n");
        return 77;
    }
    CHECK_MSG(r.outcome == OUT_OK, "disk-full run: %s (%d)", outcome_names[r.outcome], r.code);
    return test_finish("disk-full");
}
