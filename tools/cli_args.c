/* See cli_args.h. */
#include "cli_args.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *suffix;
    uint64_t mult;
} units[] = {{"B", 1},
             {"K", 1ull << 10}, {"KiB", 1ull << 10}, {"KB", 1000ull},
             {"M", 1ull << 20}, {"MiB", 1ull << 20}, {"MB", 1000000ull},
             {"G", 1ull << 30}, {"GiB", 1ull << 30}, {"GB", 1000000000ull},
             {"T", 1ull << 40}, {"TiB", 1ull << 40}, {"TB", 1000000000000ull}};

const char *cli_parse_size(const char *text, size_t *out)
{
    static const char not_size[] = "is not a size (e.g. 4096, 64KiB, 8MiB, 1GiB, 1G, 500MB)";
    /* Digits first: strtoull alone would take spaces, a sign and "0x". */
    if (*text < '0' || *text > '9')
        return not_size;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno == ERANGE)
        return "is too large";
    uint64_t mult = 1;
    if (*end) {
        bool found = false;
        /* Case-insensitive, as the configuration; a final lowercase b is refused below. */
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (strcasecmp(end, units[i].suffix) == 0) {
                mult = units[i].mult;
                found = true;
            }
        if (!found)
            return not_size;
        if (end[strlen(end) - 1] == 'b')
            return "has a unit with a lowercase b, which can mean bits: write KB (1000 bytes) or KiB (1024)";
    }
    if (v > UINT64_MAX / mult || v * mult > SIZE_MAX)
        return "is too large";
    *out = (size_t)(v * mult);
    return NULL;
}

const char *cli_parse_long(const char *text, long min, long max, long *out)
{
    static char why[64];
    const char *digits = text[0] == '-' ? text + 1 : text;
    if (*digits < '0' || *digits > '9') /* no spaces or '+' (strtol would take them) */
        return "is not a whole number";
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (*end)
        return "is not a whole number";
    if (errno == ERANGE || v < min || v > max) {
        snprintf(why, sizeof why, "is out of range (%ld..%ld)", min, max);
        return why;
    }
    *out = v;
    return NULL;
}

const char *cli_parse_double(const char *text, double min, double max, double *out)
{
    static char why[80];
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno == ERANGE || !isfinite(v))
        return "is not a number";
    if (!(v > min && v <= max)) {
        snprintf(why, sizeof why, "is out of range (more than %g, at most %g)", min, max);
        return why;
    }
    *out = v;
    return NULL;
}

const char *cli_format_size(size_t bytes, char *buf, size_t len)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, "%zu%s", bytes, names[u]);
    return buf;
}
