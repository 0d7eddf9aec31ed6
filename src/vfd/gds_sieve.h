/*
 * The driver's sieve buffer: small raw-data requests on host memory are
 * served from one in-memory window of the file, as HDF5's own sieve buffer
 * does for sec2.
 *
 * Why here: HDF5 sieves only for drivers that set H5FD_FEAT_DATA_SIEVE, and
 * then copies with the CPU between its buffer and the user's, whatever
 * memory that is; the gds driver cannot allow that for GPU memory, so it
 * does not set the flag. Without a sieve, every small H5Dwrite/H5Dread
 * would be a system call where sec2 does a memcpy. The driver knows which
 * buffers are host memory, so it keeps the window itself, for those only.
 *
 * Coherence: every other request (metadata, device memory, large) that
 * overlaps the window flushes it first if dirty, and a write also drops it.
 * Dirty bytes reach the file at flush, truncate and close; a failure there
 * fails that call, and the bytes stay dirty for the next one.
 *
 * Other processes: HDF5's sieve belongs to a dataset and dies with it, so
 * sec2 shows another process's changes to a dataset closed and reopened.
 * The driver never learns of dataset closes (nothing reaches it), so a clean
 * window is checked against the file instead: at most once per tick of
 * CLOCK_REALTIME_COARSE (the clock file timestamps come from), on the first
 * use of the window in that tick, with one fstat: a changed mtime, ctime or
 * size drops it. A check of a file changed within the last second proves
 * nothing (a later change in the same tick, or on a file system keeping
 * whole seconds, leaves the timestamps equal), so the next check drops the
 * window too. Cost per hit: one vDSO clock read.
 */
#ifndef H5GDS_SIEVE_H
#define H5GDS_SIEVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../engine/engine.h"

typedef struct gds_sieve {
    size_t capacity;   /* 0: no sieve (the fapl's sieve buffer size) */
    bool writable;
    unsigned char *buf;
    uint64_t addr;     /* file offset of buf[0] */
    size_t len;        /* valid bytes in buf */
    bool dirty;        /* file bytes [dirty_lo, dirty_hi) are newer here */
    uint64_t dirty_lo, dirty_hi;
    /* The file as the last check saw it (see "Other processes" above). */
    int fd;
    struct timespec checked;          /* coarse tick of the last check */
    struct timespec seen_mtime, seen_ctime;
    int64_t seen_size;
    bool seen_valid;                  /* false: the next check drops the window */
    /* File space reserved for deferred writes (fallocate), [lo, hi). */
    uint64_t reserved_lo, reserved_hi;
    bool cannot_reserve;              /* the file system has no fallocate */
} gds_sieve_t;

/* `fd` is the file's descriptor, only ever fstat'ed. */
void gds_sieve_init(gds_sieve_t *sieve, size_t capacity, bool writable, int fd);
void gds_sieve_free(gds_sieve_t *sieve);

/* For requests gds_sieve_takes: served from the window, loading one (a
 * read, at most up to `eoa`) or starting one (a write) when it misses. */
int gds_sieve_read(gds_sieve_t *sieve, gds_file_t *engine, uint64_t eoa, uint64_t addr, size_t size, void *buf,
                   gds_status_t *st);
int gds_sieve_write(gds_sieve_t *sieve, gds_file_t *engine, uint64_t addr, size_t size, const void *buf,
                    gds_status_t *st);

/* Before a write is deferred into the window: makes sure the file system
 * has room for it (fallocate, ahead up to `eoa`), so that a full disk
 * fails the write that meets it, as with sec2, and not the flush or close
 * that would write it out (on HDF5 1.10 a failed H5Fclose leaves a dangling
 * file id that crashes the library at exit). 0: reserved; 1: this file
 * system has no fallocate (or H5GDS_TEST_NO_FALLOCATE is set); -1 with
 * errno: no room, write it directly instead. */
int gds_sieve_reserve(gds_sieve_t *sieve, uint64_t addr, size_t size, uint64_t eoa);

/* Whether a raw request of `size` bytes goes through the sieve, its buffer
 * classified as `info` (NULL: CUDA could not say, so not for the CPU). */
bool gds_sieve_takes(const gds_sieve_t *sieve, bool write, size_t size, const gds_buffer_info_t *info);

/* Before any other request on [addr, addr + size): writes the window out if
 * it is dirty and overlaps; a write (`dropping`) also invalidates it. */
int gds_sieve_before_other(gds_sieve_t *sieve, gds_file_t *engine, uint64_t addr, size_t size, bool dropping,
                           gds_status_t *st);

/* Writes dirty bytes out (flush, truncate, close). */
int gds_sieve_flush(gds_sieve_t *sieve, gds_file_t *engine, gds_status_t *st);

/* Forgets the window's bytes at and past `end` (truncate: HDF5's end of
 * allocation), dirty or not: they are past the end of the file. */
void gds_sieve_cut(gds_sieve_t *sieve, uint64_t end);

#endif
