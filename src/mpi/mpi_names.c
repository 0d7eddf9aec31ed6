/*
 * libh5gds_mpi: names of the files of a collection and of their datasets,
 * the escapes of VDS source names, and the hashes the ranks compare.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mpi_internal.h"

uint64_t hash_string(const char *s)
{
    return gds_fnv1a(GDS_FNV1A_START, s, strlen(s));
}

/* "<master without .h5>.rank<r>.h5" */
char *rank_file_path(const char *master, int rank)
{
    size_t n = strlen(master), stem = n;
    if (n > 3 && strcmp(master + n - 3, ".h5") == 0)
        stem = n - 3;
    size_t size = stem + 32;
    char *p = malloc(size);
    if (p)
        snprintf(p, size, "%.*s.rank%d.h5", (int)stem, master, rank);
    return p;
}

const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

char *concat(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *p = malloc(na + nb + 1);
    if (p) {
        memcpy(p, a, na);
        memcpy(p + na, b, nb + 1);
    }
    return p;
}

/* VDS source names are printf-like ("%b" = block number): '%' is doubled. */
char *vds_escape(const char *s)
{
    size_t n = strlen(s), extra = 0;
    for (size_t i = 0; i < n; i++)
        extra += s[i] == '%';
    char *p = malloc(n + extra + 1), *q = p;
    if (!p)
        return NULL;
    for (size_t i = 0; i <= n; i++) {
        *q++ = s[i];
        if (s[i] == '%')
            *q++ = '%';
    }
    return p;
}

/* Dataset names compare without their leading '/'. */
const char *relative_name(const char *name)
{
    while (*name == '/')
        name++;
    return name;
}

/* Undoes vds_escape; false when the name uses printf-like patterns. */
bool vds_unescape(char *s)
{
    char *q = s;
    for (char *p = s; *p; p++) {
        if (*p == '%') {
            if (p[1] != '%')
                return false;
            p++;
        }
        *q++ = *p;
    }
    *q = '\0';
    return true;
}
