/* Fault family `fsize` (test_faults fsize): writes that meet RLIMIT_FSIZE
 * (EFBIG, SIGXFSZ ignored), with the driver's defaults and with write-behind. */
#include <sys/stat.h>

#include "faults.h"

int case_fsize(void)
{
    char dir[4096]; /* test_path's buffers are reused */
    snprintf(dir, sizeof dir, "%s", test_path("fsize"));
    mkdir(dir, 0755);
    /* Limits that fall inside a window of small writes, inside a 32 KiB
     * write, and inside a 1 MiB write (one write-behind defers). */
    static const struct {
        const char *limit;
        long piece;
    } cases[] = {{"400000", 1024}, {"1000000", 4096}, {"65536", 32}, {"10000", 1024}, {"3000000", 131072}};
    /* Each with the driver's defaults, with write-behind, and with
     * write-behind's background writes held to the last moment. */
    static const char *const modes[][3] = {{"", NULL, NULL},
                                           {", write-behind", "H5GDS_CONFIG=write_behind=4MiB", NULL},
                                           {", write-behind, held", "H5GDS_CONFIG=write_behind=4MiB",
                                            "H5GDS_TEST_WB_HOLD=1"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            char env_s[64], label[160];
            snprintf(env_s, sizeof env_s, "H5GDS_FAULTS_FSIZE=%s", cases[c].limit);
            snprintf(label, sizeof label, "RLIMIT_FSIZE %s, %ld-byte writes%s", cases[c].limit, cases[c].piece * 8,
                     modes[m][0]);
            const char *env[] = {env_s, modes[m][1], modes[m][2], NULL};
            write_report_t s = write_and_check("sec2", dir, cases[c].piece, false, env, NULL);
            write_report_t g = write_and_check("gds", dir, cases[c].piece, false, env, NULL);
            compare_writes(label, &s, &g, m > 0);
            CHECK_MSG(g.intact >= s.intact, "%s: gds's file holds %ld intact pieces, sec2's %ld", label, g.intact,
                      s.intact);
            /* the limit is known before a write is deferred: the write that
             * crosses it fails in the call, as sec2's (not at a later flush) */
            CHECK_MSG(g.written == s.written, "%s: gds's writes failed after %ld pieces, sec2's after %ld", label,
                      g.written, s.written);
        }
    return test_finish("fsize");
}
