/*
 * Held raw writes: the GPU write of a filtered dataset stores each encoded
 * chunk with H5Dwrite_chunk, one driver write per chunk. Written one by one,
 * every chunk would wait for the disk before the next is stored and the GPU
 * would idle. While a hold is open on the calling thread, the driver's raw
 * writes of device memory to the held file are recorded instead, and the
 * caller starts them as one engine request per batch (gds_vfd_held_submit),
 * which runs while the next batch encodes.
 *
 * The order that makes a file openable after a crash is kept: a metadata
 * write of the held file first writes what is recorded and waits for what
 * was started, so metadata never reaches the file before the raw data it
 * points to (as with sec2).
 */
#include <errno.h>
#include <stdlib.h>

#include "gds_vfd_file.h"
#include "gds_vfd_raw.h"

struct gds_held_writes {
    gds_vfd_file_t *file;
    gds_segment_t *seg; /* recorded, not yet started */
    size_t nseg, cap;
    gds_io_t *io[GDS_HELD_SLOTS];
    uint64_t reserved_to; /* file space reserved up to here (0: none yet) */
    gds_status_t first;   /* the first failure, reported by the next wait or the end */
    bool failed;
    bool host_too;        /* tests: host buffers are held too */
    gds_held_counts_t counts;
};

static _Thread_local gds_held_writes_t *held;

static void keep_failure(gds_held_writes_t *h, const gds_status_t *st)
{
    h->file->held_lost = true; /* the end of file counted them: truncate asks the file system */
    if (!h->failed) {
        h->first = *st;
        h->failed = true;
    }
}

gds_held_writes_t *gds_vfd_hold_begin(gds_vfd_file_t *file, bool host_too)
{
    if (held) /* one hold per thread: a nested one would reorder the outer's writes */
        return NULL;
    gds_held_writes_t *h = calloc(1, sizeof *h);
    if (h) {
        h->file = file;
        h->host_too = host_too;
        held = h;
    }
    return h;
}

int gds_vfd_held_record(gds_vfd_file_t *file, haddr_t addr, size_t size, const void *buf, bool device,
                        gds_status_t *st)
{
    gds_held_writes_t *h = held;
    if (!h || h->file != file || (!device && !h->host_too))
        return 0;
    /* A dirty window of small host writes overlapping the range goes first. */
    if (gds_sieve_before_other(&file->sieve, file->engine, addr, size, true, st) < 0)
        return -1;
    if (h->nseg == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 256;
        gds_segment_t *seg = realloc(h->seg, cap * sizeof *seg);
        if (!seg) {
            gds_status_set(st, ENOMEM, "out of memory for %zu held writes", cap);
            return -1;
        }
        h->seg = seg;
        h->cap = cap;
    }
    h->seg[h->nseg++] = (gds_segment_t){addr, size, (void *)buf};
    return 1;
}

/* Pieces adjacent in the file and in memory become one (the caller packs
 * a batch's chunks in the order HDF5 gives them file space): the engine
 * then cuts large aligned blocks instead of writing each small piece with
 * unaligned ends. Recorded in call order, so a run needs no sort. */
static void merge_adjacent(gds_held_writes_t *h)
{
    size_t n = 0;
    for (size_t i = 0; i < h->nseg; i++) {
        gds_segment_t *last = n ? &h->seg[n - 1] : NULL;
        if (last && last->offset + last->size == h->seg[i].offset &&
            (char *)last->buf + last->size == (char *)h->seg[i].buf)
            last->size += h->seg[i].size;
        else
            h->seg[n++] = h->seg[i];
    }
    h->nseg = n;
}

/* Waits for started writes of slot k; a failure is kept. */
static void wait_slot(gds_held_writes_t *h, unsigned k)
{
    if (!h->io[k])
        return;
    gds_status_t st;
    if (gds_io_wait(h->io[k], &st) < 0)
        keep_failure(h, &st);
    h->io[k] = NULL;
}

/* Writes what is recorded now and waits for it (metadata is about to
 * follow). Submitted and waited for, not gds_file_transfer: with
 * write-behind that would return before the bytes land, as a batch never
 * does. */
static void write_recorded(gds_held_writes_t *h)
{
    if (h->nseg == 0)
        return;
    gds_request_t req = {.write = true, .data = GDS_DATA_RAW, .nseg = h->nseg, .segs = h->seg,
                         .order = GDS_ORDER_NONE};
    gds_status_t st;
    gds_io_t *io = NULL;
    if (gds_file_submit(h->file->engine, &req, &io, &st) < 0 || gds_io_wait(io, &st) < 0)
        keep_failure(h, &st);
    h->nseg = 0;
}

void gds_vfd_held_before_metadata(gds_vfd_file_t *file)
{
    gds_held_writes_t *h = held;
    if (!h || h->file != file)
        return;
    bool busy = h->nseg > 0;
    for (unsigned k = 0; k < GDS_HELD_SLOTS; k++)
        busy = busy || h->io[k];
    if (!busy)
        return;
    uint64_t t0 = gds_now_ns();
    for (unsigned k = 0; k < GDS_HELD_SLOTS; k++)
        wait_slot(h, k);
    write_recorded(h);
    h->counts.metadata_waits++;
    h->counts.metadata_wait_s += 1e-9 * (double)(gds_now_ns() - t0);
}

void gds_vfd_held_get_counts(const gds_held_writes_t *h, gds_held_counts_t *out)
{
    *out = h ? h->counts : (gds_held_counts_t){0};
}

int gds_vfd_held_submit(gds_held_writes_t *h, unsigned slot, uint64_t ahead, gds_status_t *st)
{
    if (!h)
        return 0;
    wait_slot(h, slot);
    if (h->failed) {
        *st = h->first;
        return -1;
    }
    if (h->nseg == 0)
        return 0;
    gds_vfd_file_t *file = h->file;
    merge_adjacent(h);
    uint64_t end = 0;
    size_t total = 0;
    for (size_t i = 0; i < h->nseg; i++) {
        uint64_t e = h->seg[i].offset + h->seg[i].size;
        end = e > end ? e : end;
        total += h->seg[i].size;
    }
    /* ext4 serialises direct writes that extend the file: the space is
     * reserved first, `ahead` bytes past the batch (the caller's guess of
     * what follows) so that later batches need no reservation, which would
     * wait for the writes in flight. */
    if (end > h->reserved_to && total > 0) {
        uint64_t upto = end + ahead > file->eoa ? end + ahead : file->eoa;
        uint64_t set = gds_file_reserve(file->engine, total, end, upto);
        h->reserved_to = set ? set : end; /* 0: reserved already, or not possible (cheap to ask again) */
        if (set > file->eof)
            file->eof = set;
    }
    gds_request_t req = {.write = true, .data = GDS_DATA_RAW, .nseg = h->nseg, .segs = h->seg,
                         .order = GDS_ORDER_NONE};
    if (gds_file_submit(file->engine, &req, &h->io[slot], st) < 0) {
        keep_failure(h, st); /* kept recorded: the end writes them in this thread, or says why not */
        return -1;
    }
    h->counts.submits++;
    h->counts.pieces += h->nseg;
    h->nseg = 0; /* the request copied the segments */
    return 0;
}

int gds_vfd_held_wait(gds_held_writes_t *h, unsigned slot, gds_status_t *st)
{
    if (!h)
        return 0;
    wait_slot(h, slot);
    if (h->failed) {
        *st = h->first;
        return -1;
    }
    return 0;
}

int gds_vfd_hold_end(gds_held_writes_t *h, gds_status_t *st)
{
    if (!h)
        return 0;
    /* Chunks HDF5 already indexed are written even after a failure: better
     * their bytes than garbage where the index points. */
    for (unsigned k = 0; k < GDS_HELD_SLOTS; k++)
        wait_slot(h, k);
    write_recorded(h);
    int rc = 0;
    if (h->failed) {
        *st = h->first;
        rc = -1;
    }
    if (held == h)
        held = NULL;
    free(h->seg);
    free(h);
    return rc;
}
