/* The stress driver (test_faults stress, CTest faults-stress): the
 * timing-sensitive families run again and again under load. */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "faults.h"

/* faults-stress: the timing-sensitive families again and again, with two
 * CPU hogs and an I/O hog beside them and write-behind's background writes
 * held at random (each with probability 1/2, from the repetition's seed),
 * so that interleavings a quiet machine never shows are tried. The seed
 * and the count are printed; H5GDS_FAULTS_STRESS_SEED and
 * H5GDS_FAULTS_STRESS_REPS replay a run. */
static pid_t start_hog(bool io, const char *scratch)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    alarm(900); /* never outlives a broken parent for long */
    if (!io)
        for (volatile unsigned long x = 0;; x++)
            ;
    static char block[1 << 20] __attribute__((aligned(4096)));
    memset(block, 0x3C, sizeof block);
    for (;;) {
        int fd = open(scratch, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
        if (fd < 0)
            fd = open(scratch, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (int i = 0; fd >= 0 && i < 64; i++)
            if (write(fd, block, sizeof block) < 0)
                break;
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
    }
}

int case_stress(void)
{
    const char *seed_s = getenv("H5GDS_FAULTS_STRESS_SEED"), *reps_s = getenv("H5GDS_FAULTS_STRESS_REPS");
    unsigned long seed = seed_s ? strtoul(seed_s, NULL, 0) : (unsigned long)time(NULL);
    long reps = reps_s ? atol(reps_s) : 15;
    printf("faults-stress: seed %lu, %ld repetitions (replay: H5GDS_FAULTS_STRESS_SEED=%lu H5GDS_FAULTS_STRESS_REPS=%ld "
           "test_faults stress)\n",
           seed, reps, seed, reps);
    char scratch[4096];
    snprintf(scratch, sizeof scratch, "%s", test_path("io-hog"));
    pid_t hogs[3] = {start_hog(false, NULL), start_hog(false, NULL), start_hog(true, scratch)};
    static const char *const families[] = {"disk-full", "fsize", "truncated", "changed-file"};
    int failed = 0;
    double t0 = now_s();
    for (long r = 0; r < reps; r++)
        for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
            char hold[64];
            snprintf(hold, sizeof hold, "H5GDS_TEST_WB_HOLD=random:%lu", seed + (unsigned long)r);
            const char *args[] = {families[f], NULL}, *env[] = {hold, NULL};
            char out[4096];
            snprintf(out, sizeof out, "%s", test_path("stress.out"));
            child_result_t c = run_child(args, env, out, 300);
            bool ok = c.outcome == OUT_OK || (c.outcome == OUT_FAILED && c.code == 77);
            if (!ok) {
                failed++;
                printf("FAILED: repetition %ld (H5GDS_TEST_WB_HOLD=random:%lu) %s: %s (%d); its output:\n", r,
                       seed + (unsigned long)r, families[f], outcome_names[c.outcome], c.code);
                FILE *log = fopen(out, "r");
                char line[1024];
                while (log && fgets(line, sizeof line, log))
                    if (strstr(line, "FAIL"))
                        fputs(line, stdout);
                if (log)
                    fclose(log);
            }
        }
    for (int h = 0; h < 3; h++)
        if (hogs[h] > 0) {
            kill(hogs[h], SIGKILL);
            waitpid(hogs[h], NULL, 0);
        }
    unlink(scratch);
    printf("faults-stress: %ld repetitions of %zu families in %.0f s under load, %d failed (seed %lu)\n", reps,
           sizeof families / sizeof families[0], now_s() - t0, failed, seed);
    CHECK_MSG(failed == 0, "%d runs failed under load (replay with the seed above)", failed);
    return test_finish("stress");
}
