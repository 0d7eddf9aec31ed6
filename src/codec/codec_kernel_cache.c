/*
 * The kernels NVRTC compiled, kept on disk between processes: compiling
 * codec_kernels.cu takes seconds that every process's first GPU-filtered
 * read or write would otherwise pay again. One file per (sources, options,
 * NVRTC version, architecture): $H5GDS_KERNEL_CACHE_DIR, else
 * $XDG_CACHE_HOME/h5gds/kernels, else ~/.cache/h5gds/kernels;
 * H5GDS_KERNEL_CACHE=0 turns it off. A file is used only when it is a
 * regular file of the process's user that no one else may write, whose
 * header names the key and whose checksum holds; it is written under a
 * temporary name and renamed, so that processes starting together (MPI
 * ranks) never read half of one. The cache only saves time: any failure
 * to read or write it means compiling, never an error.
 */
#include "codec_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "h5gdsKC1"
#define CACHE_MAX_IMAGE ((uint64_t)256 << 20)

typedef struct cache_header {
    char magic[8];
    uint64_t key;
    uint64_t size;     /* the image's bytes */
    uint64_t checksum; /* FNV-1a of the image */
    uint32_t ptx;      /* 1: PTX text, 0: CUBIN */
    uint32_t arch;
} cache_header_t;

uint64_t gds_codec_kernel_key(const char *const *parts, size_t nparts)
{
    uint64_t h = GDS_FNV1A_START;
    for (size_t i = 0; i < nparts; i++) {
        size_t n = parts[i] ? strlen(parts[i]) : 0;
        h = gds_fnv1a(h, &n, sizeof n); /* lengths keep ("ab","c") apart from ("a","bc") */
        if (n)
            h = gds_fnv1a(h, parts[i], n);
    }
    return h;
}

/* Makes each missing directory of `path` (0700), as mkdir -p. */
static bool make_dirs(char *path)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char was = *p;
        *p = '\0';
        bool ok = mkdir(path, 0700) == 0 || errno == EEXIST;
        *p = was;
        if (!ok)
            return false;
        if (was == '\0')
            return true;
    }
}

bool gds_codec_kernel_cache_path(uint64_t key, int arch, char *buf, size_t size)
{
    const char *off = getenv("H5GDS_KERNEL_CACHE");
    if (off && strcmp(off, "0") == 0)
        return false;
    const char *dir = getenv("H5GDS_KERNEL_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[PATH_MAX];
    int n;
    if (dir && *dir)
        n = snprintf(base, sizeof base, "%s", dir);
    else if (xdg && *xdg)
        n = snprintf(base, sizeof base, "%s/h5gds/kernels", xdg);
    else if (home && *home)
        n = snprintf(base, sizeof base, "%s/.cache/h5gds/kernels", home);
    else
        return false;
    if (n <= 0 || (size_t)n >= sizeof base || base[0] != '/')
        return false; /* a relative directory would follow the process's working directory */
    n = snprintf(buf, size, "%s/codec-sm%d-%016llx.bin", base, arch, (unsigned long long)key);
    return n > 0 && (size_t)n < size;
}

char *gds_codec_kernel_cache_load(const char *path, uint64_t key, int arch, size_t *size, bool *ptx)
{
    /* O_NONBLOCK: a FIFO put there opens at once (and is refused below) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat sb;
    cache_header_t h;
    char *image = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & (S_IWGRP | S_IWOTH)))
        goto out; /* not ours alone: another user could have put any code there */
    if (read(fd, &h, sizeof h) != (ssize_t)sizeof h || memcmp(h.magic, CACHE_MAGIC, 8) != 0 || h.key != key ||
        h.arch != (uint32_t)arch || h.size == 0 || h.size > CACHE_MAX_IMAGE ||
        (uint64_t)sb.st_size != sizeof h + h.size)
        goto out;
    image = malloc((size_t)h.size + 1);
    size_t got = 0;
    while (image && got < h.size) {
        ssize_t r = read(fd, image + got, (size_t)h.size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (!image || got != h.size || gds_fnv1a(GDS_FNV1A_START, image, got) != h.checksum) {
        free(image);
        image = NULL;
        goto out;
    }
    image[got] = '\0'; /* PTX is loaded as a string */
    *size = got;
    *ptx = h.ptx != 0;
out:
    close(fd);
    return image;
}

int gds_codec_kernel_cache_store(const char *path, uint64_t key, int arch, const char *image, size_t size, bool ptx)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 32];
    const char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) >= sizeof dir || size == 0 || size > CACHE_MAX_IMAGE)
        return -1;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    if (!dir[0] || !make_dirs(dir))
        return -1;
    /* a new file of our own (0600, O_EXCL): nothing another user put in
     * a shared folder is opened, truncated or followed */
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -1;
    cache_header_t h = {.key = key, .size = size, .ptx = ptx, .arch = (uint32_t)arch};
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.checksum = gds_fnv1a(GDS_FNV1A_START, image, size);
    bool ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h;
    for (size_t put = 0; ok && put < size;) {
        ssize_t w = write(fd, image + put, size - put);
        ok = w > 0;
        put += ok ? (size_t)w : 0;
    }
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}
