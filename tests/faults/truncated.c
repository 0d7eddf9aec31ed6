/* Fault family `truncated` (test_faults truncated): another process cuts a
 * file to nothing while it is written. */
#include <sys/stat.h>

#include "faults.h"

/* Another process cuts the file to nothing while it is being written: both
 * drivers' writers go on, neither may crash or hang, gds's file opens where
 * sec2's does and holds at least the pieces sec2's holds (sec2 loses those
 * written before the cut; write-behind's may still land after it). */
int case_truncated(void)
{
    char dir[4096]; /* test_path's buffers are reused */
    snprintf(dir, sizeof dir, "%s", test_path("truncated"));
    mkdir(dir, 0755);
    static const char *const modes[][4] = {
        {"", "H5GDS_FAULTS_TRUNCATE_AT=100", NULL, NULL},
        {", write-behind", "H5GDS_FAULTS_TRUNCATE_AT=100", "H5GDS_CONFIG=write_behind=4MiB", NULL},
        {", write-behind, held", "H5GDS_FAULTS_TRUNCATE_AT=100", "H5GDS_CONFIG=write_behind=4MiB",
         "H5GDS_TEST_WB_HOLD=1"}};
    static const long pieces[] = {32, 1024, 16384};
    for (size_t c = 0; c < sizeof pieces / sizeof pieces[0]; c++)
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            char label[160];
            snprintf(label, sizeof label, "truncated after 100 of 256 %ld-byte writes%s", pieces[c] * 8, modes[m][0]);
            const char *env[] = {modes[m][1], modes[m][2], modes[m][3], NULL};
            write_report_t s = write_and_check("sec2", dir, pieces[c], false, env, NULL);
            write_report_t g = write_and_check("gds", dir, pieces[c], false, env, NULL);
            printf("%s: sec2 %s written %ld closed %ld intact %ld | gds %s written %ld closed %ld intact %ld\n", label,
                   outcome_names[s.child.outcome], s.written, s.closed, s.intact, outcome_names[g.child.outcome],
                   g.written, g.closed, g.intact);
            CHECK_MSG(g.child.outcome == OUT_OK || s.child.outcome != OUT_OK, "%s: gds writer %s (%d)", label,
                      outcome_names[g.child.outcome], g.child.code);
            CHECK_MSG(g.intact >= 0 || s.intact < 0, "%s: gds left a file that does not open; sec2's opens", label);
            CHECK_MSG(g.intact >= s.intact, "%s: gds's file holds %ld intact pieces, sec2's %ld", label, g.intact,
                      s.intact);
        }
    return test_finish("truncated");
}
