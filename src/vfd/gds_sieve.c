/* The driver's sieve buffer for small host-memory raw data (see gds_sieve.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gds_sieve.h"

static bool same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Records the file as it is now (see gds_sieve.h, "Other processes"). */
static void look_at_file(gds_sieve_t *sieve, struct timespec now)
{
    struct stat sb;
    sieve->checked = now;
    sieve->seen_valid = fstat(sieve->fd, &sb) == 0;
    if (!sieve->seen_valid)
        return;
    sieve->seen_mtime = sb.st_mtim;
    sieve->seen_ctime = sb.st_ctim;
    sieve->seen_size = (int64_t)sb.st_size;
    /* Changed in this very tick: a second change in it would leave the
     * timestamps as they are. "This tick" is taken as this second or the
     * one before: file systems that keep whole seconds, or a server's clock
     * a little apart, would hide a change within the same second. */
    time_t newest = sb.st_mtim.tv_sec > sb.st_ctim.tv_sec ? sb.st_mtim.tv_sec : sb.st_ctim.tv_sec;
    if (newest >= now.tv_sec - 1)
        sieve->seen_valid = false;
}

/* A clean window is dropped when the file changed since the last check;
 * checked at most once per clock tick. A dirty window is this process
 * writing there: kept, as HDF5 keeps a dataset's dirty sieve. */
static void drop_if_file_changed(gds_sieve_t *sieve)
{
    if (!sieve->len || sieve->dirty)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    if (same_time(now, sieve->checked))
        return;
    bool was_valid = sieve->seen_valid;
    struct timespec mtime = sieve->seen_mtime, ctime = sieve->seen_ctime;
    int64_t size = sieve->seen_size;
    look_at_file(sieve, now);
    /* Unchanged only if both looks succeeded and agree (a racy look has
     * seen_valid false, so it never vouches for a window). */
    if (!was_valid || !sieve->seen_valid || size != sieve->seen_size || !same_time(mtime, sieve->seen_mtime) ||
        !same_time(ctime, sieve->seen_ctime))
        sieve->len = 0;
}

void gds_sieve_init(gds_sieve_t *sieve, size_t capacity, bool writable, int fd)
{
    memset(sieve, 0, sizeof *sieve);
    sieve->capacity = capacity;
    sieve->writable = writable;
    sieve->fd = fd;
    /* Tests: behave as on a file system without fallocate. */
    sieve->cannot_reserve = gds_env_flag("H5GDS_TEST_NO_FALLOCATE");
    if (capacity) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME_COARSE, &now);
        look_at_file(sieve, now);
    }
}

void gds_sieve_free(gds_sieve_t *sieve)
{
    free(sieve->buf);
    sieve->buf = NULL;
    sieve->len = 0;
}

bool gds_sieve_takes(const gds_sieve_t *sieve, bool write, size_t size, const gds_buffer_info_t *info)
{
    /* Writes to a read-only file go to the engine, which fails them at once. */
    if (size == 0 || size > sieve->capacity || (write && !sieve->writable))
        return false;
    /* Only memory the CPU may copy: managed memory would migrate, and
     * device memory must never be touched. An unanswered query is not good
     * enough for a memcpy: such requests go to the engine, where a device
     * pointer fails (EFAULT) instead. */
    return info && gds_memory_is_host(info->kind);
}

static int ensure_buffer(gds_sieve_t *sieve, gds_status_t *st)
{
    if (!sieve->buf && !(sieve->buf = malloc(sieve->capacity))) {
        gds_status_set(st, ENOMEM, "cannot allocate the %zu-byte sieve buffer", sieve->capacity);
        return -1;
    }
    return 0;
}

int gds_sieve_flush(gds_sieve_t *sieve, gds_file_t *engine, gds_status_t *st)
{
    if (!sieve->dirty)
        return 0;
    /* Kept dirty on failure: a later flush (or close) tries again. */
    if (gds_file_write(engine, sieve->dirty_lo, (size_t)(sieve->dirty_hi - sieve->dirty_lo),
                       sieve->buf + (sieve->dirty_lo - sieve->addr), GDS_DATA_DRIVER, st) < 0)
        return -1;
    sieve->dirty = false;
    return 0;
}

static bool overlaps_window(const gds_sieve_t *sieve, uint64_t addr, size_t size)
{
    return sieve->len && addr < sieve->addr + sieve->len && sieve->addr < addr + size;
}

int gds_sieve_read(gds_sieve_t *sieve, gds_file_t *engine, uint64_t eoa, uint64_t addr, size_t size, void *buf,
                   gds_status_t *st)
{
    drop_if_file_changed(sieve);
    if (!sieve->len || addr < sieve->addr || addr + size > sieve->addr + sieve->len) {
        /* A miss: load the window that starts here, as far as HDF5 has
         * allocated the file (reads past the end of the file give zeros). */
        if (gds_sieve_flush(sieve, engine, st) < 0 || ensure_buffer(sieve, st) < 0)
            return -1;
        size_t window = sieve->capacity;
        if (eoa > addr && eoa - addr < window)
            window = (size_t)(eoa - addr);
        if (window < size)
            window = size;
        sieve->len = 0;
        if (gds_file_read(engine, addr, window, sieve->buf, GDS_DATA_DRIVER, st) < 0)
            return -1;
        sieve->addr = addr;
        sieve->len = window;
    }
    memcpy(buf, sieve->buf + (addr - sieve->addr), size);
    gds_file_count_host(engine, false, size);
    return 0;
}

int gds_sieve_write(gds_sieve_t *sieve, gds_file_t *engine, uint64_t addr, size_t size, const void *buf,
                    gds_status_t *st)
{
    drop_if_file_changed(sieve);
    /* Inside the window, or extending it at its end within capacity. */
    bool fits = sieve->len && addr >= sieve->addr && addr <= sieve->addr + sieve->len &&
                addr + size - sieve->addr <= sieve->capacity;
    if (!fits) {
        /* Elsewhere: write out what the window holds and start a new one
         * holding exactly these bytes (nothing is read). */
        if (gds_sieve_flush(sieve, engine, st) < 0 || ensure_buffer(sieve, st) < 0)
            return -1;
        sieve->addr = addr;
        sieve->len = 0;
    }
    memcpy(sieve->buf + (addr - sieve->addr), buf, size);
    if (addr + size - sieve->addr > sieve->len)
        sieve->len = (size_t)(addr + size - sieve->addr);
    if (!sieve->dirty) {
        sieve->dirty = true;
        sieve->dirty_lo = addr;
        sieve->dirty_hi = addr + size;
    }
    else {
        if (addr < sieve->dirty_lo)
            sieve->dirty_lo = addr;
        if (addr + size > sieve->dirty_hi)
            sieve->dirty_hi = addr + size;
    }
    gds_file_count_host(engine, true, size);
    return 0;
}

int gds_sieve_before_other(gds_sieve_t *sieve, gds_file_t *engine, uint64_t addr, size_t size, bool dropping,
                           gds_status_t *st)
{
    if (!overlaps_window(sieve, addr, size))
        return 0;
    if (gds_sieve_flush(sieve, engine, st) < 0)
        return -1;
    if (dropping)
        sieve->len = 0;
    return 0;
}

void gds_sieve_cut(gds_sieve_t *sieve, uint64_t end)
{
    /* A shrinking ftruncate frees the reserved blocks past the new end. */
    if (sieve->reserved_hi > end)
        sieve->reserved_hi = end > sieve->reserved_lo ? end : sieve->reserved_lo;
    if (!sieve->len || sieve->addr + sieve->len <= end)
        return;
    if (sieve->addr >= end) {
        sieve->len = 0;
        sieve->dirty = false;
        return;
    }
    sieve->len = (size_t)(end - sieve->addr);
    if (sieve->dirty && sieve->dirty_lo >= end)
        sieve->dirty = false;
    else if (sieve->dirty && sieve->dirty_hi > end)
        sieve->dirty_hi = end;
}

/* Reserved ahead of a write, so that a run of small writes costs one
 * fallocate per this many bytes. */
#define RESERVE_AHEAD ((uint64_t)1 << 20)

int gds_sieve_reserve(gds_sieve_t *sieve, uint64_t addr, size_t size, uint64_t eoa)
{
    if (sieve->cannot_reserve)
        return 1;
    if (addr >= sieve->reserved_lo && addr + size <= sieve->reserved_hi)
        return 0;
    uint64_t end = addr + RESERVE_AHEAD;
    if (end > eoa)
        end = eoa;
    if (end < addr + size)
        end = addr + size;
    int rc;
    /* KEEP_SIZE: the file looks as before until the bytes are written. A
     * write past RLIMIT_FSIZE is not caught here, but then HDF5's end of
     * allocation is past the limit too, and sec2's close fails likewise. */
    do
        rc = fallocate(sieve->fd, FALLOC_FL_KEEP_SIZE, (off_t)addr, (off_t)(end - addr));
    while (rc < 0 && errno == EINTR);
    if (rc < 0 && errno != ENOSPC && errno != EDQUOT && errno != EFBIG) {
        /* No fallocate here (EOPNOTSUPP), or not a regular file. */
        sieve->cannot_reserve = true;
        return 1;
    }
    if (rc < 0)
        return -1;
    sieve->reserved_lo = addr;
    sieve->reserved_hi = end;
    return 0;
}
