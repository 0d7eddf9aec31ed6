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
 * fails that call.
 */
#ifndef H5GDS_SIEVE_H
#define H5GDS_SIEVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine/engine.h"

typedef struct gds_sieve {
    size_t capacity;   /* 0: no sieve (the fapl's sieve buffer size) */
    bool writable;
    unsigned char *buf;
    uint64_t addr;     /* file offset of buf[0] */
    size_t len;        /* valid bytes in buf */
    bool dirty;        /* file bytes [dirty_lo, dirty_hi) are newer here */
    uint64_t dirty_lo, dirty_hi;
} gds_sieve_t;

void gds_sieve_init(gds_sieve_t *sieve, size_t capacity, bool writable);
void gds_sieve_free(gds_sieve_t *sieve);

/* For requests gds_sieve_takes: served from the window, loading one (a
 * read, at most up to `eoa`) or starting one (a write) when it misses. */
int gds_sieve_read(gds_sieve_t *sieve, gds_file_t *engine, uint64_t eoa, uint64_t addr, size_t size, void *buf,
                   gds_status_t *st);
int gds_sieve_write(gds_sieve_t *sieve, gds_file_t *engine, uint64_t addr, size_t size, const void *buf,
                    gds_status_t *st);

/* Whether a raw request of `size` bytes goes through the sieve, its buffer
 * classified as `info` (NULL: CUDA could not say, so not for the CPU). */
bool gds_sieve_takes(const gds_sieve_t *sieve, bool write, size_t size, const gds_buffer_info_t *info);

/* Before any other request on [addr, addr + size): writes the window out if
 * it is dirty and overlaps; a write (`dropping`) also invalidates it. */
int gds_sieve_before_other(gds_sieve_t *sieve, gds_file_t *engine, uint64_t addr, size_t size, bool dropping,
                           gds_status_t *st);

/* Writes dirty bytes out (flush, truncate, close). */
int gds_sieve_flush(gds_sieve_t *sieve, gds_file_t *engine, gds_status_t *st);

#endif
