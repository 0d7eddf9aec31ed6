/* The driver's sieve buffer for small host-memory raw data (see gds_sieve.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gds_sieve.h"

void gds_sieve_init(gds_sieve_t *sieve, size_t capacity, bool writable)
{
    memset(sieve, 0, sizeof *sieve);
    sieve->capacity = capacity;
    sieve->writable = writable;
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
