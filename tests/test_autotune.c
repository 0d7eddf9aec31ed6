/*
 * Autotuning (src/engine/autotune.c), without HDF5: the measurement in a
 * scratch directory, the per-user cache file (written, reused, a corrupt
 * one replaced, an unwritable one tolerated), the process's own table, and
 * the Lustre layout parser on synthetic attributes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autotune.h"

static int failures;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
            failures++;                                                    \
        }                                                                  \
    } while (0)

#define MiB ((size_t)1 << 20)

static void test_lustre_parser(void)
{
    unsigned char lov[64] = {0};
    uint32_t magic = 0x0BD10BD0, size = 4 << 20;
    uint16_t count = 8;
    memcpy(lov, &magic, 4);
    memcpy(lov + 24, &size, 4);
    memcpy(lov + 28, &count, 2);
    size_t s = 0;
    unsigned c = 0;
    CHECK(gds_lustre_parse_layout(lov, sizeof lov, &s, &c) && s == (4 << 20) && c == 8, "v1 layout: %zu x %u", s, c);
    magic = 0x0BD30BD0;
    memcpy(lov, &magic, 4);
    CHECK(gds_lustre_parse_layout(lov, sizeof lov, &s, &c), "v3 layout");
    count = 0xFFFF; /* "all OSTs": not a count to follow */
    memcpy(lov + 28, &count, 2);
    CHECK(!gds_lustre_parse_layout(lov, sizeof lov, &s, &c), "stripe count -1 accepted");
    magic = 0x12345678;
    memcpy(lov, &magic, 4);
    CHECK(!gds_lustre_parse_layout(lov, sizeof lov, &s, &c), "bad magic accepted");
    CHECK(!gds_lustre_parse_layout(lov, 16, &s, &c), "short attribute accepted");
}

static bool in_grid(const gds_tuning_t *t)
{
    return (t->threads == 4 || t->threads == 8 || t->threads == 16) &&
           (t->io_block_size == 16 * MiB || t->io_block_size == 32 * MiB);
}

static bool file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char buf[4096] = "";
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    return strstr(buf, text) != NULL;
}

int main(void)
{
    test_lustre_parser();

    const char *dir = getenv("H5GDS_TEST_DIR");
    if (!dir)
        dir = "/tmp";
    char data_path[4096], cache_dir[4096], cache_file[4200];
    snprintf(data_path, sizeof data_path, "%s/data.h5", dir);
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", dir);
    snprintf(cache_file, sizeof cache_file, "%s/h5gds/tune.json", cache_dir);
    unlink(cache_file);
    setenv("XDG_CACHE_HOME", cache_dir, 1);

    /* Can this directory do O_DIRECT at all? (tmpfs cannot) */
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/odirect-probe", dir);
    int fd = open(probe, O_RDWR | O_CREAT | O_DIRECT, 0600);
    bool direct = fd >= 0;
    if (fd >= 0)
        close(fd);
    unlink(probe);

    gds_tuning_t t;
    gds_autotune(data_path, "test-gpu", 6, 2 * MiB, &t);
    printf("first:  threads=%u block=%zu source=%d (%s)\n", t.threads, t.io_block_size, (int)t.source, t.why);
    if (!direct) {
        CHECK(t.source == GDS_TUNE_DEFAULTS && t.threads == 6 && t.io_block_size == 2 * MiB,
              "without O_DIRECT the defaults are kept");
        CHECK(strstr(t.why, "O_DIRECT") != NULL, "the reason names O_DIRECT: %s", t.why);
        printf("test_autotune: %s (this directory has no O_DIRECT: measurement not exercised)\n",
               failures ? "FAILED" : "passed");
        return failures ? 1 : 0;
    }
    CHECK(t.source == GDS_TUNE_MEASURED || t.source == GDS_TUNE_DEFAULTS, "source %d", (int)t.source);
    if (t.source == GDS_TUNE_DEFAULTS) { /* e.g. less than 1 GiB free */
        printf("test_autotune: measured nothing: %s\n", t.why);
        return failures ? 1 : 0;
    }
    CHECK(in_grid(&t), "chosen point %u x %zu is not in the grid", t.threads, t.io_block_size);
    CHECK(t.write_gbps > 0 && t.read_gbps > 0, "rates %.3f %.3f", t.write_gbps, t.read_gbps);
    CHECK(file_has(cache_file, "\"key\":\"host="), "cache file %s not written", cache_file);
    CHECK(file_has(cache_file, "gpu=test-gpu"), "cache key lacks the GPU");
    gds_tuning_t first = t;

    /* the process's table */
    gds_autotune(data_path, "test-gpu", 6, 2 * MiB, &t);
    CHECK(t.source == GDS_TUNE_CACHED && t.threads == first.threads && t.io_block_size == first.io_block_size,
          "second call in the process: source %d", (int)t.source);

    /* the cache file, in a new process (table forgotten) */
    gds_autotune_reset();
    gds_autotune(data_path, "test-gpu", 6, 2 * MiB, &t);
    CHECK(t.source == GDS_TUNE_CACHED && t.threads == first.threads && t.io_block_size == first.io_block_size,
          "from the cache file: source %d, %u x %zu", (int)t.source, t.threads, t.io_block_size);
    CHECK(strstr(t.why, cache_file) != NULL, "the reason names the cache file: %s", t.why);

    /* another GPU is another key: measured, both kept */
    gds_autotune(data_path, "other-gpu", 6, 2 * MiB, &t);
    CHECK(t.source == GDS_TUNE_MEASURED, "another GPU: source %d", (int)t.source);
    CHECK(file_has(cache_file, "gpu=test-gpu") && file_has(cache_file, "gpu=other-gpu"), "both keys kept");

    /* a corrupt cache: measured again, and the file made valid */
    FILE *f = fopen(cache_file, "w");
    fputs("{\"format\":1,\"key\":\"garbage\nnot json at all\n\x01\x02\n", f);
    fclose(f);
    gds_autotune_reset();
    gds_autotune(data_path, "test-gpu", 6, 2 * MiB, &t);
    CHECK(t.source == GDS_TUNE_MEASURED, "corrupt cache: source %d", (int)t.source);
    CHECK(file_has(cache_file, "gpu=test-gpu") && !file_has(cache_file, "not json"), "cache rewritten");

    /* a foreign format version is not used */
    f = fopen(cache_file, "r");
    char line[1024] = "";
    if (f && fgets(line, sizeof line, f)) {
        fclose(f);
        char *v = strstr(line, "\"format\":1");
        if (v)
            v[9] = '9';
        f = fopen(cache_file, "w");
        fputs(line, f);
        fclose(f);
        gds_autotune_reset();
        gds_autotune(data_path, "test-gpu", 6, 2 * MiB, &t);
        CHECK(t.source == GDS_TUNE_MEASURED, "foreign cache format: source %d", (int)t.source);
    }
    else if (f)
        fclose(f);

    /* an unwritable cache: still tuned, per process */
    setenv("XDG_CACHE_HOME", "/proc/h5gds-no-such-dir", 1);
    gds_autotune_reset();
    gds_autotune(data_path, "test-gpu", 6, 2 * MiB, &t);
    CHECK(t.source == GDS_TUNE_MEASURED && strstr(t.why, "not cached"), "unwritable cache: %d %s", (int)t.source,
          t.why);
    CHECK(t.seconds < 20, "the measurement took %.1f s", t.seconds);

    /* the full grid, as h5gds-bench --tune prints it */
    gds_tune_point_t points[32];
    gds_status_t st;
    size_t n = gds_autotune_grid(dir, points, 32, 1.0, &st);
    CHECK(n >= 1, "grid: no point measured (%s)", st.msg);
    printf("test_autotune: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
