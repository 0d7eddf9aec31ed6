/*
 * The fault suite (CTest label `faults`): the gds driver against sec2 where
 * things go wrong. Every case runs both drivers, each in a child process with
 * a time limit, and fails when gds does worse than sec2 in one of the
 * probe's categories: crash, hang, unopenable file, stale data, silent loss.
 *
 *   test_faults malformed     a fixed, seeded set of mutations of a valid file
 *   test_faults disk-full     a small tmpfs (root and a private mount namespace; else skipped)
 *   test_faults fsize         RLIMIT_FSIZE (EFBIG, SIGXFSZ ignored)
 *   test_faults pool-cycles   200 H5open/H5close cycles reading a 64 MiB cached file through the
 *                             worker pool (H5GDS_TEST_NCPU=8); threads must not outlive H5close
 *   test_faults changed-file  another process rewrites or recreates a file that is open
 *   test_faults truncated     another process cuts a file to nothing while it is written
 *   test_faults stress        the timing-sensitive families repeated under CPU and I/O load
 *                             (label faults-stress; H5GDS_FAULTS_STRESS_SEED/_REPS replay a run)
 *
 * The other arguments are the child processes' roles.
 *
 * Each family is a file of its own: malformed.c, disk_full.c, fsize.c,
 * pool_cycles.c, changed_file.c, truncated.c, stress.c. They share
 * (faults.h) children.c, which runs this program again as a child with a
 * time limit, and writer.c, the writer child of disk-full, fsize and
 * truncated. This file finds the case or the role by its name.
 */
#include "faults.h"

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) {
        fprintf(stderr, "cannot find this program's path\n");
        return 1;
    }
    self_exe[n] = '\0';
    const char *what = argc > 1 ? argv[1] : "";
    /* Child roles */
    if (!strcmp(what, "walk") && argc == 4)
        return role_walk(argv[2], argv[3]);
    if (!strcmp(what, "write") && argc >= 6)
        return role_write(argv[2], argv[3], atol(argv[4]), atol(argv[5]), argc > 6 ? argv[6] : NULL);
    if (!strcmp(what, "disk-full-run") && argc == 3)
        return role_disk_full(argv[2]);
    if (!strcmp(what, "pool-cycles-run") && argc == 3)
        return role_pool_cycles(argv[2]);
    if (!strcmp(what, "rewrite") && argc == 4)
        return role_rewrite(argv[2], argv[3]);
    if (!strcmp(what, "reader") && argc == 4)
        return role_reader(argv[2], argv[3]);
    /* Cases: each ends with its own test_finish (faults.h) */
    if (!strcmp(what, "malformed"))
        return case_malformed();
    if (!strcmp(what, "disk-full"))
        return case_disk_full();
    if (!strcmp(what, "fsize"))
        return case_fsize();
    if (!strcmp(what, "pool-cycles"))
        return case_pool_cycles();
    if (!strcmp(what, "changed-file"))
        return case_changed_file();
    if (!strcmp(what, "truncated"))
        return case_truncated();
    if (!strcmp(what, "stress"))
        return case_stress();
    fprintf(stderr, "usage: test_faults malformed|disk-full|fsize|pool-cycles|changed-file|truncated|stress\n");
    return 2;
}
