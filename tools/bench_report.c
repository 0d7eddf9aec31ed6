/*
 * h5gds-bench's results: recorded per rank and aggregated, written to the
 * CSV, summarised in the table beside the ceilings.
 */
#include "bench.h"
#include "cli_args.h"

result_t *results;
size_t nresults, cap_results;
bench_machine_t machine;

static void store(const char *method, int phase, memory_t memory, size_t size, unsigned threads, size_t block,
                  int repeat, double seconds, double bytes, int rank, const char *config, const filter_note_t *filtered)
{
    if (nresults == cap_results) {
        cap_results = cap_results ? 2 * cap_results : 256;
        results = realloc(results, cap_results * sizeof *results);
    }
    result_t *r = &results[nresults++];
    *r = (result_t){method, phase, memory, size, threads, block, repeat, seconds, bytes, rank, "",
                    filtered ? opt.filter->name : "none", filtered ? filtered->ratio : 0,
                    filtered ? filtered->route : NULL};
    snprintf(r->config, sizeof r->config, "%s", config ? config : "");
    if (opt.boundary && (!strcmp(method, "GDS-SHARED") || !strcmp(method, "MPIO-HOST")))
        snprintf(r->config + strlen(r->config), sizeof r->config - strlen(r->config), "%sboundary=%zu",
                 r->config[0] ? ";" : "", opt.boundary);
    if (opt.chunk && strncmp(method, "CEIL", 4)) /* the layout, in the same column */
        snprintf(r->config + strlen(r->config), sizeof r->config - strlen(r->config), "%schunk=%zu",
                 r->config[0] ? ";" : "", opt.chunk);
    if (r->route) /* the checked call's route, in the same column (no CSV column of its own) */
        snprintf(r->config + strlen(r->config), sizeof r->config - strlen(r->config), "%sroute=%s",
                 r->config[0] ? ";" : "", r->route);
    /* filter and ratio (empty without a filter); under MPI two more columns:
     * ranks, and the rank ("all": the aggregate). */
    char ratio[32] = "";
    if (r->ratio > 0)
        snprintf(ratio, sizeof ratio, "%.4f", r->ratio);
    fprintf(csv, "%s,%s,%s,%.0f,%u,%zu,%d,%.6f,%.4f,\"%s\",%ld,%s,\"%s\",%u.%u.%u,\"%s\",%s,%s,%s", method,
            phase_names[phase], memory_names[memory], bytes, threads, block, repeat, seconds, bytes / seconds / 1e9,
            machine.gpu, machine.cpus, machine.fs, machine.kernel, H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE,
            r->config, cold_method, r->filter, ratio);
    if (par.on && rank >= 0)
        fprintf(csv, ",%d,%d", par.size, rank);
    else if (par.on)
        fprintf(csv, ",%d,all", par.size);
    fputc('\n', csv);
    fflush(csv);
}

/* Called by every rank with its own time: rank 0 records each rank's row
 * and the aggregate, all bytes over the slowest rank (they start together). */
void record(const char *method, int phase, memory_t memory, size_t size, unsigned threads, size_t block,
            int repeat, double seconds, const char *config, const filter_note_t *filtered)
{
    double *all = &seconds;
#ifdef H5GDS_BENCH_MPI
    static double *gathered;
    if (par.on) {
        if (!gathered && !(gathered = malloc(sizeof(double) * (size_t)par.size)))
            fail("out of memory");
        MPI_Gather(&seconds, 1, MPI_DOUBLE, gathered, 1, MPI_DOUBLE, 0, par_comm);
        all = gathered;
    }
#endif
    if (par.rank != 0)
        return;
    double slowest = 0;
    for (int r = 0; r < par.size; r++) {
        if (par.on)
            store(method, phase, memory, size, threads, block, repeat, all[r], (double)size, r, config, filtered);
        slowest = all[r] > slowest ? all[r] : slowest;
    }
    store(method, phase, memory, size, threads, block, repeat, slowest, (double)size * par.size, -1, config,
          filtered);
}

void progress(const char *what, size_t size, int phase, int rep)
{
    if (par.rank != 0 || !isatty(STDERR_FILENO))
        return;
    char sz[32];
    fprintf(stderr, "\r\033[K  %-14s %9s  %-9s  repeat %d/%d", what, cli_format_size(size, sz, sizeof sz),
            phase_names[phase], rep + 1, opt.repeat);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median/min/max rate (GB/s) of the rows matching; false if none. exact:
 * threads and block as given (0 is auto, a combination of its own), else 0
 * matches any. */
static bool stats_matching(const char *method, int phase, size_t size, unsigned threads, size_t block, int rank,
                           bool exact, double *med, double *lo, double *hi)
{
    double v[1024];
    int n = 0;
    for (size_t i = 0; i < nresults && n < 1024; i++) {
        result_t *r = &results[i];
        if (!strcmp(r->method, method) && r->phase == phase && r->size == size && r->rank == rank &&
            ((!exact && threads == 0) || r->threads == threads) && ((!exact && block == 0) || r->block == block))
            v[n++] = r->bytes / r->seconds / 1e9;
    }
    if (!n)
        return false;
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    *lo = v[0];
    *hi = v[n - 1];
    return true;
}

static bool stats_for_rank(const char *method, int phase, size_t size, unsigned threads, size_t block, int rank,
                           double *med, double *lo, double *hi)
{
    return stats_matching(method, phase, size, threads, block, rank, false, med, lo, hi);
}

/* ... of the aggregate rows */
static bool stats_for(const char *method, int phase, size_t size, unsigned threads, size_t block, double *med,
                      double *lo, double *hi)
{
    return stats_for_rank(method, phase, size, threads, block, -1, med, lo, hi);
}

static double ceiling_for(int phase, size_t size, memory_t memory)
{
    double m, lo, hi;
    if (phase == PH_WRITE)
        return stats_for("CEIL-ODIRECT", PH_WRITE, size, 0, 0, &m, &lo, &hi) ? m : 0;
    if (phase == PH_COLD)
        return stats_for("CEIL-ODIRECT", PH_COLD, size, 0, 0, &m, &lo, &hi) ? m : 0;
    double pc = stats_for("CEIL-PAGECACHE", PH_WARM, size, 0, 0, &m, &lo, &hi) ? m : 0;
    if (is_gpu_memory(memory) && stats_for("CEIL-H2D", PH_WARM, size, 0, 0, &m, &lo, &hi) && m < pc)
        pc = m;
    return pc;
}

/* The last aggregate row of a line of the table (its ratio and route). */
static const result_t *last_row(const char *method, int phase, size_t size, unsigned threads, size_t block)
{
    const result_t *last = NULL;
    for (size_t i = 0; i < nresults; i++) {
        const result_t *r = &results[i];
        if (!strcmp(r->method, method) && r->phase == phase && r->size == size && r->rank == -1 &&
            r->threads == threads && r->block == block)
            last = r;
    }
    return last;
}

void print_table(void)
{
    int pct_width = opt.filter ? 10 : 0; /* (no trailing blanks without the filter's columns) */
    printf("\n%-14s %-10s %9s %7s %8s  %-22s %-*s%s\n", "method", "phase", "size", "threads", "block",
           "GB/s median (min-max)", pct_width, "of ceiling", opt.filter ? " ratio  route (last call)" : "");
    const char *seen[64];
    int nseen = 0;
    for (size_t i = 0; i < nresults; i++) {
        bool dup = false;
        for (int k = 0; k < nseen; k++)
            dup |= !strcmp(seen[k], results[i].method);
        if (!dup && nseen < 64)
            seen[nseen++] = results[i].method;
    }
    for (int si = 0; si < opt.nsizes; si++)
        for (int ph = 0; ph < N_PHASES; ph++)
            for (int k = 0; k < nseen; k++) {
                /* one line per (threads, block) combination that ran */
                unsigned tl[64];
                size_t bl[64];
                int nc = 0;
                for (size_t i = 0; i < nresults; i++) {
                    result_t *r = &results[i];
                    if (strcmp(r->method, seen[k]) || r->phase != ph || r->size != opt.sizes[si])
                        continue;
                    bool dup = false;
                    for (int c = 0; c < nc; c++)
                        dup |= tl[c] == r->threads && bl[c] == r->block;
                    if (!dup && nc < 64)
                        tl[nc] = r->threads, bl[nc] = r->block, nc++;
                }
                for (int c = 0; c < nc; c++) {
                    double med, lo, hi;
                    /* Combinations come from every row, ranks' own among them: one with
                     * no aggregate row has nothing to show here. */
                    if (!stats_matching(seen[k], ph, opt.sizes[si], tl[c], bl[c], -1, true, &med, &lo, &hi))
                        continue;
                    char range[64], pct[16] = "";
                    snprintf(range, sizeof range, "%7.2f (%.2f-%.2f)", med, lo, hi);
                    double ceil = ceiling_for(ph, opt.sizes[si], opt.memory);
                    if (ceil > 0 && strncmp(seen[k], "CEIL", 4))
                        snprintf(pct, sizeof pct, "%5.0f%%", 100 * med / ceil);
                    char blk[32] = "-", sz[32];
                    if (bl[c])
                        cli_format_size(bl[c], blk, sizeof blk);
                    char filtered[64] = "";
                    const result_t *last = opt.filter ? last_row(seen[k], ph, opt.sizes[si], tl[c], bl[c]) : NULL;
                    if (last && last->ratio > 0)
                        snprintf(filtered, sizeof filtered, " %5.2f  %s", last->ratio, last->route ? last->route : "-");
                    printf("%-14s %-10s %9s %7u %8s  %-22s %-*s%s\n", seen[k], phase_names[ph],
                           cli_format_size(opt.sizes[si], sz, sizeof sz), tl[c], blk, range, pct_width, pct, filtered);
                }
            }
    if (par.on) {
        printf("\n%d ranks, size per rank; the table above is the aggregate (all ranks' bytes / the slowest rank,\n"
               "ceilings: every rank's parallel O_DIRECT I/O at the same time). Per rank, GB/s median:\n",
               par.size);
        for (int si = 0; si < opt.nsizes; si++)
            for (int ph = 0; ph < N_PHASES; ph++)
                for (int k = 0; k < nseen; k++) {
                    double med, lo, hi;
                    if (!stats_for_rank(seen[k], ph, opt.sizes[si], 0, 0, 0, &med, &lo, &hi))
                        continue;
                    char sz[32];
                    printf("%-14s %-10s %9s ", seen[k], phase_names[ph], cli_format_size(opt.sizes[si], sz, sizeof sz));
                    for (int r = 0; r < par.size; r++)
                        if (stats_for_rank(seen[k], ph, opt.sizes[si], 0, 0, r, &med, &lo, &hi))
                            printf(" r%d %.2f", r, med);
                    printf("\n");
                }
    }
    printf("\nrates are bytes / wall-clock (GB = 1e9 bytes); cold reads: page cache dropped with %s%s\n", cold_method,
           strcmp(cold_method, "drop_caches") ? " (only this file's clean pages; run as root for drop_caches)" : "");
    if (opt.filter)
        printf("filter %s: rates are of decoded bytes; ratio = decoded bytes / file bytes of the write\n",
               opt.filter->name);
}
