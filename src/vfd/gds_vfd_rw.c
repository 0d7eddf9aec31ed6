/*
 * The `gds` driver's single reads and writes (the read and write callbacks,
 * and each piece of a vector that goes alone): small raw data through the
 * sieve window (gds_sieve.h), everything else to the engine.
 */
#include "gds_transfer.h"
#include "gds_vfd_file.h"

/* H5Fstart_swmr_write turns SWMR on for an open file, and with it HDF5
 * turns off H5FD_FEAT_ACCUMULATE_METADATA in the driver's feature flags:
 * from then on the sieve window is written out and no longer used. */
int gds_vfd_sieve_off_if_swmr(gds_vfd_file_t *file)
{
    if (!file->sieve.capacity || (file->pub.feature_flags & H5FD_FEAT_ACCUMULATE_METADATA))
        return 0;
    gds_status_t st;
    if (gds_sieve_flush(&file->sieve, file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        return -1;
    }
    gds_sieve_free(&file->sieve);
    file->sieve.capacity = 0;
    return 0;
}

/* One request to the engine: the buffer classified by the caller, device
 * buffers ordered as the transfer list asks. */
static int engine_transfer(gds_vfd_file_t *file, bool write, hid_t dxpl, haddr_t addr, size_t size, void *buf,
                           bool raw, const gds_buffer_info_t *info, gds_status_t *st)
{
    gds_segment_t seg = {addr, size, buf};
    gds_request_t req = {.write = write, .data = raw ? GDS_DATA_RAW : GDS_DATA_DRIVER, .nseg = 1, .segs = &seg,
                         .known = raw ? info : NULL};
    if (raw && !gds_memory_is_host(info->kind))
        gds_transfer_order(dxpl, &req);
    return gds_file_transfer(file->engine, &req, st);
}

herr_t gds_vfd_read(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    if (GDS_REGION_OVERFLOW(addr, size)) {
        GDS_ERROR(H5E_ARGS, H5E_OVERFLOW, "addr overflow, addr = %llu, size = %zu", (unsigned long long)addr, size);
        return -1;
    }
    if (gds_vfd_sieve_off_if_swmr(file) < 0)
        return -1;
    gds_status_t st;
    int rc;
    bool raw = type == H5FD_MEM_DRAW;
    gds_buffer_info_t info = {GDS_MEMORY_HOST, NULL, -1, 0};
    bool answered = !raw || gds_classify_buffer(buf, &info); /* once, for the sieve and the engine */
    if (raw && gds_sieve_takes(&file->sieve, false, size, answered ? &info : NULL)) {
        rc = gds_sieve_read(&file->sieve, file->engine, file->eoa, addr, size, buf, &st);
    }
    else {
        /* A dirty window overlapping the request reaches the file first. */
        rc = gds_sieve_before_other(&file->sieve, file->engine, addr, size, false, &st);
        if (rc == 0)
            rc = engine_transfer(file, false, dxpl, addr, size, buf, raw, &info, &st);
    }
    if (rc < 0) {
        engine_error(file, H5E_READERROR, &st);
        return -1;
    }
    return 0;
}

/* Whether a small write may wait in the sieve window: only where the file
 * system has room for it (gds_sieve_reserve), and on HDF5 1.10 only where
 * that room could be reserved: there a deferred write that fails at
 * H5Fclose makes the library crash at exit (the failed close leaves a
 * dangling file id), so without fallocate small writes go straight out. */
static bool may_defer(gds_vfd_file_t *file, haddr_t addr, size_t size)
{
    int reserved = gds_sieve_reserve(&file->sieve, addr, size, file->eoa);
#if H5_VERSION_GE(1, 14, 0)
    return reserved >= 0;
#else
    return reserved == 0;
#endif
}

/* Large raw writes: the file's space up to the end of allocation is
 * reserved first (gds_file_reserve), so that the engine's direct writes of
 * this and of the following datasets run side by side. Creating every
 * dataset before writing any (h5gds.save does) makes that one call. */
#define GDS_RESERVE_MIN ((size_t)1 << 20)

void gds_vfd_reserve_ahead(gds_vfd_file_t *file, size_t size, haddr_t end)
{
    if (size < GDS_RESERVE_MIN || end <= file->eof)
        return;
    uint64_t set = gds_file_reserve(file->engine, size, end, file->eoa);
    if (set > file->eof)
        file->eof = set;
}

herr_t gds_vfd_write(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf)
{
    gds_vfd_file_t *file = (gds_vfd_file_t *)_file;
    if (GDS_REGION_OVERFLOW(addr, size)) {
        GDS_ERROR(H5E_ARGS, H5E_OVERFLOW, "addr overflow, addr = %llu, size = %zu", (unsigned long long)addr, size);
        return -1;
    }
    if (gds_vfd_sieve_off_if_swmr(file) < 0)
        return -1;
    gds_status_t st;
    int rc;
    bool raw = type == H5FD_MEM_DRAW;
    gds_buffer_info_t info = {GDS_MEMORY_HOST, NULL, -1, 0};
    bool answered = !raw || gds_classify_buffer(buf, &info);
    if (raw && gds_sieve_takes(&file->sieve, true, size, answered ? &info : NULL) && may_defer(file, addr, size)) {
        rc = gds_sieve_write(&file->sieve, file->engine, addr, size, buf, &st);
    }
    else if (raw && answered &&
             (rc = gds_vfd_held_record(file, addr, size, buf, !gds_memory_is_host(info.kind), &st)) != 0) {
        /* recorded by the thread's hold (1), started later as one request */
    }
    else {
        /* Metadata is written only after the raw data written before it, as
         * with sec2: no reader ever sees metadata pointing at bytes still in
         * the window. If those bytes cannot be written (disk full), the
         * metadata is written all the same: sec2's raw write would already
         * have failed, and its metadata still makes an openable file. The
         * bytes stay dirty; the next flush, truncate or close retries them
         * and fails with the reason. An overlapping window is written out
         * and dropped. */
        if (!raw) {
            gds_vfd_held_before_metadata(file);
            (void)gds_sieve_flush(&file->sieve, file->engine, &st);
        }
        rc = gds_sieve_before_other(&file->sieve, file->engine, addr, size, true, &st);
        if (rc == 0 && raw)
            gds_vfd_reserve_ahead(file, size, addr + size);
        if (rc == 0)
            rc = engine_transfer(file, true, dxpl, addr, size, (void *)buf, raw, &info, &st);
    }
    if (rc < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        return -1;
    }
    if (addr + size > file->eof)
        file->eof = addr + size;
    return 0;
}
