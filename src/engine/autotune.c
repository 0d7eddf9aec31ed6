/* Autotuning of threads x io_block_size; see autotune.h. */
#include "autotune.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define TUNE_FORMAT 1
#define TUNE_BUDGET_SECONDS 1.8 /* stop starting new points after this; ~2 s in all */
#define TUNE_MIN_FREE (1024 * MiB)
#define LUSTRE_SUPER_MAGIC 0x0BD00BD0

/* Most promising first: when the time budget runs out, what is left is
 * what mattered least in the sweeps of the reference machine. Blocks below
 * 16 MiB are not candidates: a 2 s measurement of them is dominated by the
 * device's write cache (on the reference machine 4 x 8 MiB measured best
 * and then ran large requests at 55-85% of the best point). */
static const unsigned grid_threads[] = {16, 8, 4};
static const size_t grid_blocks[] = {32 * MiB, 16 * MiB};

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- one point: T threads moving blocks of B bytes with O_DIRECT ---- */

typedef struct phase {
    int fd;
    bool write;
    char *buf;       /* one aligned buffer shared by the threads: the data does not matter */
    size_t block;
    size_t nblocks;
    size_t next;     /* atomic */
    int error;       /* atomic: errno of the first failure */
} phase_t;

static void *phase_thread(void *arg)
{
    phase_t *p = arg;
    for (;;) {
        size_t i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
        if (i >= p->nblocks || __atomic_load_n(&p->error, __ATOMIC_RELAXED))
            return NULL;
        uint64_t off = (uint64_t)i * p->block;
        int rc = p->write ? gds_pwrite_full(p->fd, p->buf, p->block, off)
                          : (gds_pread_full(p->fd, p->buf, p->block, off) == (ssize_t)p->block ? 0 : -1);
        if (rc != 0) {
            int e = errno ? errno : EIO;
            __atomic_store_n(&p->error, e, __ATOMIC_RELAXED);
            return NULL;
        }
    }
}

/* GB/s of one phase, or -1 with errno. */
static double run_phase(int fd, bool write, char *buf, unsigned threads, size_t block, size_t bytes)
{
    phase_t p = {fd, write, buf, block, bytes / block, 0, 0};
    pthread_t tid[16];
    unsigned started = 0;
    double t0 = seconds_now();
    for (unsigned t = 0; t < threads && t < 16; t++)
        if (pthread_create(&tid[t], NULL, phase_thread, &p) == 0)
            started++;
    if (started == 0)
        phase_thread(&p);
    for (unsigned t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    if (write && !p.error && fdatasync(fd) != 0)
        p.error = errno;
    double dt = seconds_now() - t0;
    if (p.error) {
        errno = p.error;
        return -1;
    }
    return (double)(p.nblocks * block) / dt / 1e9;
}

/* Bytes per point: one block per thread, within 128..256 MiB (about
 * 0.15 s per point at the reference machine's 2 GB/s). */
static size_t point_bytes(unsigned threads, size_t block)
{
    size_t want = (size_t)threads * block;
    want = want < 128 * MiB ? 128 * MiB : want > 256 * MiB ? 256 * MiB : want;
    return want / block * block;
}

/* A scratch file in `dir`, opened with O_DIRECT and unlinked at once:
 * nothing is left behind, whatever happens. */
static int open_scratch(const char *dir, gds_status_t *st)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/.h5gds-tune-%ld-%lx", dir, (long)getpid(), (unsigned long)seconds_now());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0) {
        gds_status_set(st, errno, "cannot create an O_DIRECT scratch file in %s", dir);
        return -1;
    }
    unlink(path);
    return fd;
}

static size_t measure_grid(const char *dir, const size_t *blocks, size_t nblocks, const unsigned *threads,
                           size_t nthreads, gds_tune_point_t *points, size_t max_points, double budget,
                           gds_status_t *st)
{
    size_t max_block = 0;
    for (size_t b = 0; b < nblocks; b++)
        max_block = blocks[b] > max_block ? blocks[b] : max_block;
    int fd = open_scratch(dir, st);
    if (fd < 0)
        return 0;
    char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, max_block) != 0) {
        close(fd);
        gds_status_set(st, ENOMEM, "cannot allocate a %zu-byte buffer", max_block);
        return 0;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i + 8 <= max_block; i += 8) { /* not zeros: some devices compress */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
    size_t n = 0;
    double t0 = seconds_now();
    for (size_t b = 0; b < nblocks && n < max_points; b++) {
        for (size_t t = 0; t < nthreads && n < max_points; t++) {
            if (seconds_now() - t0 > budget)
                goto done;
            size_t bytes = point_bytes(threads[t], blocks[b]);
            if (ftruncate(fd, 0) != 0)
                goto fail;
            double w = run_phase(fd, true, buf, threads[t], blocks[b], bytes);
            double r = w < 0 ? -1 : run_phase(fd, false, buf, threads[t], blocks[b], bytes);
            if (w < 0 || r < 0)
                goto fail;
            points[n++] = (gds_tune_point_t){threads[t], blocks[b], w, r};
        }
    }
done:
    free(buf);
    close(fd);
    return n;
fail:
    gds_status_set(st, errno, "O_DIRECT %s in %s failed", "I/O", dir);
    free(buf);
    close(fd);
    return n;
}

size_t gds_autotune_grid(const char *dir, gds_tune_point_t *points, size_t max_points, double max_seconds,
                         gds_status_t *st)
{
    static const unsigned threads[] = {1, 2, 4, 8, 16};
    static const size_t blocks[] = {1 * MiB, 4 * MiB, 8 * MiB, 16 * MiB, 32 * MiB};
    return measure_grid(dir, blocks, 5, threads, 5, points, max_points, max_seconds, st);
}

/* The point with the best sum of write and read rate, each relative to the
 * best of the grid: durable writes and cold reads both count. Among points
 * within 10% of that (a short measurement's noise on a shared disk), the one
 * with the most threads, then the largest block: page-cache reads, which the
 * grid does not measure, scale with threads and want two staging pieces per
 * block (measured on the reference machine: 16 x 16 MiB blocks gave warm
 * reads at 87-89% of the ceiling, 16 x 32 MiB at 100%). */
static const gds_tune_point_t *best_point(const gds_tune_point_t *p, size_t n)
{
    double bw = 0, br = 0;
    for (size_t i = 0; i < n; i++) {
        bw = p[i].write_gbps > bw ? p[i].write_gbps : bw;
        br = p[i].read_gbps > br ? p[i].read_gbps : br;
    }
    double score[64], top = 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        score[i] = (bw > 0 ? p[i].write_gbps / bw : 0) + (br > 0 ? p[i].read_gbps / br : 0);
        top = score[i] > top ? score[i] : top;
    }
    const gds_tune_point_t *best = NULL;
    for (size_t i = 0; i < n && i < 64; i++) {
        if (score[i] < 0.90 * top)
            continue;
        if (!best || p[i].threads > best->threads || (p[i].threads == best->threads && p[i].block > best->block))
            best = &p[i];
    }
    return best;
}

/* ---- Lustre layout ---- */

bool gds_lustre_parse_layout(const void *buf, size_t len, size_t *stripe_size, unsigned *stripe_count)
{
    /* struct lov_user_md_v1/v3: u32 magic, u32 pattern, u64 object id,
     * u64 object seq, u32 stripe_size, u16 stripe_count, u16 offset ... */
    const unsigned char *p = buf;
    if (!buf || len < 32)
        return false;
    uint32_t magic, size;
    uint16_t count;
    memcpy(&magic, p, 4);
    memcpy(&size, p + 24, 4);
    memcpy(&count, p + 28, 2);
    if (magic != 0x0BD10BD0 && magic != 0x0BD30BD0) /* LOV_USER_MAGIC_V1 / V3 */
        return false;
    if (size == 0 || size % 65536 != 0 || count == 0 || count == 0xFFFF)
        return false; /* default layout (-1 = all OSTs) or nonsense */
    *stripe_size = size;
    *stripe_count = count;
    return true;
}

/* ---- the cache ---- */

typedef struct tune_entry {
    char key[256];
    gds_tuning_t tuning;
} tune_entry_t;

#define TUNE_TABLE 32
static struct {
    pthread_mutex_t lock;
    tune_entry_t entry[TUNE_TABLE];
    unsigned count;
} table = {.lock = PTHREAD_MUTEX_INITIALIZER};

void gds_autotune_reset(void)
{
    pthread_mutex_lock(&table.lock);
    table.count = 0;
    pthread_mutex_unlock(&table.lock);
}

static bool cache_path(char *out, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(out, size, "%s/h5gds/tune.json", xdg);
    else if (home && *home)
        snprintf(out, size, "%s/.cache/h5gds/tune.json", home);
    else
        return false;
    return true;
}

/* A line of the cache: {"format":1,"key":"...","threads":8,"io_block_size":16777216,
 * "write_gbps":2.61,"read_gbps":1.80}. Anything else is ignored. */
static bool parse_line(const char *line, const char *key, gds_tuning_t *t)
{
    int format = 0;
    char k[256];
    unsigned threads = 0;
    unsigned long long block = 0;
    double w = 0, r = 0;
    if (sscanf(line,
               "{\"format\":%d,\"key\":\"%255[^\"]\",\"threads\":%u,\"io_block_size\":%llu,\"write_gbps\":%lf,"
               "\"read_gbps\":%lf}",
               &format, k, &threads, &block, &w, &r) != 6)
        return false;
    if (format != TUNE_FORMAT || strcmp(k, key) != 0 || threads < 1 || threads > 256 || block < 4096 ||
        block > ((unsigned long long)1 << 30) || block % 4096 != 0)
        return false;
    t->threads = threads;
    t->io_block_size = (size_t)block;
    t->write_gbps = w;
    t->read_gbps = r;
    return true;
}

static bool cache_lookup(const char *key, gds_tuning_t *t, char *path, size_t path_size)
{
    if (!cache_path(path, path_size))
        return false;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = parse_line(line, key, t);
    fclose(f);
    return found;
}

/* Rewrites the cache with this key's line replaced (other keys kept),
 * through a temporary file and a rename: readers never see half a file. */
static bool cache_store(const char *key, const gds_tuning_t *t)
{
    char path[4096], dir[4096], tmp[4200];
    if (!cache_path(path, sizeof path))
        return false;
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    *slash = 0;
    /* the parents, one level at a time (~/.cache may not exist) */
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(dir, 0700);
            *p = '/';
        }
    mkdir(dir, 0700);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out)
        return false;
    FILE *in = fopen(path, "r");
    char line[1024], k[256];
    while (in && fgets(line, sizeof line, in)) {
        gds_tuning_t other;
        if (sscanf(line, "{\"format\":%*d,\"key\":\"%255[^\"]\"", k) == 1 && strcmp(k, key) != 0 &&
            parse_line(line, k, &other))
            fputs(line, out);
    }
    if (in)
        fclose(in);
    fprintf(out,
            "{\"format\":%d,\"key\":\"%s\",\"threads\":%u,\"io_block_size\":%zu,\"write_gbps\":%.3f,"
            "\"read_gbps\":%.3f}\n",
            TUNE_FORMAT, key, t->threads, t->io_block_size, t->write_gbps, t->read_gbps);
    bool ok = fflush(out) == 0 && fsync(fileno(out)) == 0;
    ok = fclose(out) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return false;
    }
    return true;
}

static void directory_of(const char *path, char *dir, size_t size)
{
    snprintf(dir, size, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, size, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
}

void gds_autotune(const char *path, const char *gpu, unsigned default_threads, size_t default_block,
                  gds_tuning_t *out)
{
    memset(out, 0, sizeof *out);
    out->threads = default_threads;
    out->io_block_size = default_block;
    out->source = GDS_TUNE_DEFAULTS;
    char dir[4096];
    directory_of(path, dir, sizeof dir);
    struct stat sb;
    struct statfs fs;
    if (stat(dir, &sb) != 0 || statfs(dir, &fs) != 0) {
        snprintf(out->why, sizeof out->why, "defaults: cannot stat %.100s (%s)", dir, strerror(errno));
        return;
    }
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char key[256];
    snprintf(key, sizeof key, "host=%s dev=%llu fs=%lx gpu=%s", host, (unsigned long long)sb.st_dev,
             (unsigned long)fs.f_type, gpu && *gpu ? gpu : "-");
    for (char *c = key; *c; c++)
        if (*c == '"' || *c == '\\' || *c == '\n')
            *c = '_';

    pthread_mutex_lock(&table.lock); /* one measurement at a time, the others wait for it */
    for (unsigned i = 0; i < table.count; i++)
        if (!strcmp(table.entry[i].key, key)) {
            *out = table.entry[i].tuning;
            out->source = GDS_TUNE_CACHED;
            pthread_mutex_unlock(&table.lock);
            return;
        }
    char cpath[4096] = "";
    gds_tuning_t t = *out;
    if (cache_lookup(key, &t, cpath, sizeof cpath)) {
        t.source = GDS_TUNE_CACHED;
        snprintf(t.why, sizeof t.why, "from %.180s", cpath);
    }
    else {
        /* Lustre: blocks follow the stripe. */
        size_t stripe = 0;
        unsigned stripes = 0;
        char lov[512];
        ssize_t n = (unsigned long)fs.f_type == LUSTRE_SUPER_MAGIC ? getxattr(dir, "lustre.lov", lov, sizeof lov) : -1;
        bool lustre = n > 0 && gds_lustre_parse_layout(lov, (size_t)n, &stripe, &stripes);
        size_t blocks[3];
        size_t nblocks = 0;
        if (lustre) {
            for (size_t m = 1; m <= 4 && nblocks < 3; m *= 2)
                if (stripe * m <= 64 * MiB)
                    blocks[nblocks++] = stripe * m;
        }
        else {
            memcpy(blocks, grid_blocks, sizeof grid_blocks);
            nblocks = sizeof grid_blocks / sizeof grid_blocks[0];
        }
        struct statvfs vfs;
        gds_status_t st = {0, ""};
        gds_tune_point_t points[16];
        size_t npoints = 0;
        double t0 = seconds_now();
        if (statvfs(dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < TUNE_MIN_FREE)
            snprintf(t.why, sizeof t.why, "defaults: less than 1 GiB free in %.100s to measure", dir);
        else if (nblocks == 0)
            snprintf(t.why, sizeof t.why, "defaults: Lustre stripe of %zu bytes is too large", stripe);
        else if ((npoints = measure_grid(dir, blocks, nblocks, grid_threads, 3, points, 16, TUNE_BUDGET_SECONDS,
                                         &st)) == 0)
            snprintf(t.why, sizeof t.why, "defaults: %.120s%s%s", st.msg, st.err ? ": " : "",
                     st.err ? strerror(st.err) : "");
        if (npoints) {
            const gds_tune_point_t *best = best_point(points, npoints);
            t.threads = best->threads;
            if (lustre && t.threads < stripes)
                t.threads = stripes > 256 ? 256 : stripes;
            t.io_block_size = best->block;
            t.write_gbps = best->write_gbps;
            t.read_gbps = best->read_gbps;
            t.seconds = seconds_now() - t0;
            t.source = GDS_TUNE_MEASURED;
            bool stored = cache_store(key, &t);
            snprintf(t.why, sizeof t.why, "measured %zu points in %.2f s%s%s%.80s: O_DIRECT write %.2f, read %.2f GB/s",
                     npoints, t.seconds, lustre ? " (Lustre stripe-aligned)" : "",
                     stored ? ", cached in " : ", not cached (", stored ? cpath : "cache not writable)",
                     t.write_gbps, t.read_gbps);
        }
    }
    if (table.count < TUNE_TABLE) {
        snprintf(table.entry[table.count].key, sizeof table.entry[0].key, "%s", key);
        table.entry[table.count++].tuning = t;
    }
    pthread_mutex_unlock(&table.lock);
    *out = t;
}
