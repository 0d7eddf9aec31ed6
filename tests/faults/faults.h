/*
 * The fault suite's shared parts (tests/faults/; test_faults.c says what
 * each family does and which file holds it).
 *
 * test_util.h's check counters belong to each source file: every family's
 * case ends with its own test_finish, and a shared helper that checks
 * (compare_writes) is static inline here, so that its checks count in the
 * family that runs it.
 */
#ifndef H5GDS_FAULTS_H
#define H5GDS_FAULTS_H

#include <stdbool.h>

#include "../test_util.h"

/* ---- this program run again as a child, with a time limit (children.c) ---- */

typedef enum outcome { OUT_OK, OUT_FAILED, OUT_CRASH, OUT_HANG } outcome_t;
extern const char *const outcome_names[];

typedef struct child_result {
    outcome_t outcome;
    int code; /* exit status (OUT_OK, OUT_FAILED) or signal (OUT_CRASH) */
} child_result_t;

/* This program's path (main finds it): the children run it. */
extern char self_exe[4096];

double now_s(void);
/* Runs this program with `args` (NULL-terminated) in a child, stdout to
 * `out_path` (or inherited), `env` ("K=V" strings, NULL-terminated) added;
 * killed after `timeout_s`. */
child_result_t run_child(const char *const *args, const char *const *env, const char *out_path, double timeout_s);
/* A fapl of `driver`: "gds" (with `config`, may be NULL), else sec2. */
hid_t driver_fapl(const char *driver, const char *config);
/* The value of the last "key=<number>" line of a file; -1: none. */
long read_long_file(const char *path, const char *key);
/* A text file's start into `buf`; false when it cannot be read. */
bool read_text_file(const char *path, char *buf, size_t size);

/* ---- the writer child and its check (writer.c): disk-full, fsize, truncated ---- */

/* Child role `write`: `pieces` writes of `piece` int64 each; prints
 * "written=<pieces>" and "closed=<0|1>". */
int role_write(const char *driver, const char *path, long piece, long pieces, const char *filler);

typedef struct write_report {
    child_result_t child;
    long written, closed, intact;
} write_report_t;

/* One driver's run of role_write and the check of its file. `prepare`
 * (may be NULL) runs first (a fresh tmpfs). */
write_report_t write_and_check(const char *driver, const char *dir, long piece, bool filler, const char *const *env,
                               int (*prepare)(const char *));

/* HDF5 1.10 crashes at exit after an H5Fclose that failed inside the file's
 * destruction (the file id is left dangling; fixed in 1.14). Write-behind's
 * background failure makes that close fail, as it must: there a crash after
 * closed=0 is HDF5's, the failure having been reported. */
static inline bool exit_crash_of_hdf5_110(const write_report_t *w)
{
#if H5_VERSION_GE(1, 14, 0)
    (void)w;
    return false;
#else
    return w->child.outcome == OUT_CRASH && w->closed == 0;
#endif
}

/* gds no worse than sec2: no crash or hang; its file opens if sec2's does;
 * and whatever a driver reported written (every call succeeded, close
 * included) reads back. */
static inline void compare_writes(const char *label, const write_report_t *s, const write_report_t *g_in, bool wb)
{
    write_report_t g_ok = *g_in;
    if (wb && exit_crash_of_hdf5_110(g_in)) {
        printf("%s: gds crashed at exit after its failed H5Fclose (HDF5 1.10's dangling file id)\n", label);
        g_ok.child.outcome = OUT_OK;
    }
    const write_report_t *g = &g_ok;
    printf("%s: sec2 %s written %ld closed %ld intact %ld | gds %s written %ld closed %ld intact %ld\n", label,
           outcome_names[s->child.outcome], s->written, s->closed, s->intact, outcome_names[g->child.outcome],
           g->written, g->closed, g->intact);
    CHECK_MSG(g->child.outcome == OUT_OK || s->child.outcome != OUT_OK, "%s: gds writer %s (%d)", label,
              outcome_names[g->child.outcome], g->child.code);
    CHECK_MSG(g->intact >= 0 || s->intact < 0, "%s: gds left a file that does not open; sec2's opens", label);
    const write_report_t *both[2] = {s, g};
    for (int d = 0; d < 2; d++)
        if (both[d]->child.outcome == OUT_OK && both[d]->closed == 1)
            CHECK_MSG(both[d]->intact == both[d]->written, "%s: %s: silent loss: %ld of %ld written pieces intact",
                      label, d ? "gds" : "sec2", both[d]->intact, both[d]->written);
}

/* ---- the families: each case (test_faults <family>) returns its
 * test_finish count, or 77 (skipped); role_*: their children's parts ---- */

/* malformed.c */
int case_malformed(void);
int role_walk(const char *driver, const char *path);
/* disk_full.c */
int case_disk_full(void);
int role_disk_full(const char *dir);
/* fsize.c */
int case_fsize(void);
/* pool_cycles.c */
int case_pool_cycles(void);
int role_pool_cycles(const char *path);
/* changed_file.c */
int case_changed_file(void);
int role_rewrite(const char *path, const char *how);
int role_reader(const char *driver, const char *path);
/* truncated.c */
int case_truncated(void);
/* stress.c */
int case_stress(void);

#endif
