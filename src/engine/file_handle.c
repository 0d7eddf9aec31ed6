/*
 * The engine's file handle: owns the O_DIRECT descriptor and the cuFile
 * registration, keeps the statistics. It knows no strategy and no
 * write-behind; the strategies, the dispatcher (transfer.c), write-behind
 * and the public entry points (file_io.c, which creates and destroys a
 * file's write-behind) use it through file_internal.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_internal.h"

/* Enough threads to overlap disk and PCIe and to copy out of the page
 * cache in parallel, without oversubscribing small machines too much. */
unsigned gds_default_threads(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    return ncpu < 4 ? 4 : ncpu > 16 ? 16 : (unsigned)ncpu;
}

uint64_t gds_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void gds_file_log(const gds_file_t *file, const char *fmt, ...)
{
    if (!file->cfg.log)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "h5gds: %s: %s\n", file->path, line); /* one call: lines of several threads do not mix */
}

int gds_file_handle_create(gds_file_t **out, const char *path, int fd, bool writable,
                           const gds_engine_settings_t *cfg, gds_status_t *st)
{
    gds_file_t *file = calloc(1, sizeof *file);
    if (!file || !(file->path = strdup(path))) {
        free(file);
        gds_status_set(st, ENOMEM, "out of memory opening %s", path);
        return -1;
    }
    file->fd = fd;
    file->direct_fd = -1;
    file->writable = writable;
    file->cfg = *cfg;
    file->tune_threads = cfg->threads == 0;
    file->tune_block = cfg->io_block_size == 0;
    if (file->tune_threads)
        file->cfg.threads = gds_default_threads();
    if (file->tune_block)
        file->cfg.io_block_size = GDS_DEFAULT_IO_BLOCK;
    file->device_cfg = file->cfg;
    pthread_mutex_init(&file->lock, NULL);
    *out = file;
    return 0;
}

void gds_file_handle_destroy(gds_file_t *file)
{
    if (file->cufile_handle) {
        const gds_cufile_api_t *cf = gds_cufile_load(NULL);
        if (cf)
            cf->HandleDeregister(file->cufile_handle);
    }
    if (file->direct_fd >= 0)
        close(file->direct_fd);
    pthread_mutex_destroy(&file->lock);
    free(file->path);
    free(file);
}

int gds_file_direct_fd(gds_file_t *file)
{
    pthread_mutex_lock(&file->lock);
    if (!file->direct_decided) {
        file->direct_decided = true;
        if (file->cfg.direct != GDS_OFF) {
            file->direct_fd = open(file->path, (file->writable ? O_RDWR : O_RDONLY) | O_DIRECT | O_CLOEXEC);
            /* The path may name another file by now (renamed over, a
             * relative path after chdir): only the same inode will do. */
            struct stat a, b;
            if (file->direct_fd >= 0 && (fstat(file->direct_fd, &a) != 0 || fstat(file->fd, &b) != 0 ||
                                         a.st_dev != b.st_dev || a.st_ino != b.st_ino)) {
                close(file->direct_fd);
                file->direct_fd = -1;
                errno = ESTALE;
            }
            if (file->direct_fd < 0) {
                gds_stat_add(&file->stats.direct_fallbacks, 1);
                gds_file_log(file, "O_DIRECT unavailable (%s); using buffered I/O",
                             errno == ESTALE ? "the path names another file now" : strerror(errno));
            }
        }
    }
    int dfd = file->direct_fd;
    pthread_mutex_unlock(&file->lock);
    return dfd;
}

void gds_file_count_calls(gds_file_t *file, bool write, gds_route_t route, size_t size, size_t calls, uint64_t ns)
{
    gds_engine_stats_t *s = &file->stats;
    gds_stat_add(write ? &s->write_bytes[route] : &s->read_bytes[route], size);
    gds_stat_add(write ? &s->write_calls[route] : &s->read_calls[route], calls);
    if (ns)
        gds_stat_add(write ? &s->write_ns : &s->read_ns, ns);
}

void gds_file_count(gds_file_t *file, bool write, gds_route_t route, size_t size, uint64_t ns)
{
    gds_file_count_calls(file, write, route, size, 1, ns);
}

void gds_file_count_host(gds_file_t *file, bool write, size_t size)
{
    gds_file_count(file, write, GDS_ROUTE_HOST, size, 0);
}

void gds_file_get_stats(gds_file_t *file, gds_engine_stats_t *stats)
{
    /* Each counter is read atomically; together they are a snapshot of a
     * moving target while requests are in flight, which is all a counter
     * can promise. */
    const uint64_t *src = (const uint64_t *)&file->stats;
    uint64_t *dst = (uint64_t *)stats;
    size_t n = offsetof(gds_engine_stats_t, device_route) / sizeof(uint64_t);
    for (size_t i = 0; i < n; i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    stats->device_route = __atomic_load_n(&file->stats.device_route, __ATOMIC_ACQUIRE);
}

const char *gds_route_name(gds_route_t route)
{
    static const char *const names[GDS_NROUTES] = {"none", "host", "staged", "cufile", "posix-bounce"};
    return (unsigned)route < GDS_NROUTES ? names[route] : "unknown";
}

/* A reservation allocates blocks that no write has covered yet (the
 * allocation below and after the write); a file left sparse by sec2 (a
 * large dataset written in part) must not take the disk of its holes.
 * Those blocks are held to max(64 MiB, 8 x the bytes written): a
 * checkpoint's run of leaves still reserves the file's next runs at once. */
#define RESERVE_SLACK_MIN ((uint64_t)64 << 20)
#define RESERVE_SLACK_PER_BYTE 8

uint64_t gds_file_reserve_space(gds_file_t *file, uint64_t written, uint64_t end, uint64_t upto)
{
    if (!file->writable)
        return 0;
    if (upto < end)
        upto = end;
    uint64_t set = 0;
    pthread_mutex_lock(&file->lock);
    if (!file->cannot_reserve && end > file->reserved_end) {
        uint64_t from = file->reserved_end;
        uint64_t slack = written > RESERVE_SLACK_MIN / RESERVE_SLACK_PER_BYTE ? written * RESERVE_SLACK_PER_BYTE
                                                                               : RESERVE_SLACK_MIN;
        uint64_t covered = written < end - from ? written : end - from;
        if (end - from - covered > slack) { /* a hole below the write: left as it is */
            pthread_mutex_unlock(&file->lock);
            return 0;
        }
        if (upto - from - covered > slack)
            upto = from + covered + slack;
        /* Only with room to spare: a reservation that fails half-way may keep
         * what it allocated, and must never be what fills the disk. */
        struct statvfs vfs;
        bool room = fstatvfs(file->fd, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize / 2 >= upto - from;
        if (!room) {
            pthread_mutex_unlock(&file->lock);
            return 0;
        }
        if (fallocate(file->fd, 0, (off_t)from, (off_t)(upto - from)) == 0) {
            file->reserved_end = upto;
            gds_stat_add(&file->stats.reserved_bytes, upto - from);
            set = upto;
        }
        else {
            file->cannot_reserve = true; /* unsupported, or no room: the writes themselves say so */
            gds_file_log(file, "no space reserved ahead of large writes (fallocate: %s)", strerror(errno));
        }
    }
    pthread_mutex_unlock(&file->lock);
    return set;
}
