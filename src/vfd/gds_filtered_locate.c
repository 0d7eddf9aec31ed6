/*
 * Where the chunks of a box of a filtered (or any chunked) dataset are: the
 * box's chunks over the chunk grid, and each one's file extent and filter
 * mask, by one query per chunk or by one walk of the chunk index (HDF5 >=
 * 1.14), with the user block added where the running HDF5 leaves it out.
 * gds_filtered_locate_chunks (gds_filtered.h) gives the same to tests.
 */
#include <stdlib.h>
#include <string.h>

#include "gds_error.h"
#include "gds_filtered_internal.h"

/* The box's chunk grid: chunk coordinates of its first chunk and the number
 * of chunks along each dimension. Returns the number of chunks. */
static hsize_t box_chunk_grid(const box_t *b, const hsize_t *cdims, hsize_t *first, hsize_t *count)
{
    hsize_t total = 1;
    for (int d = 0; d < b->rank; d++) {
        first[d] = b->lo[d] / cdims[d];
        count[d] = (b->lo[d] + b->n[d] - 1) / cdims[d] - first[d] + 1;
        total *= count[d];
    }
    return total;
}

/* The chunks the box touches, by their first elements (row-major order). */
herr_t gds_filtered_list_chunks(read_state_t *s)
{
    const box_t *b = &s->box;
    hsize_t first[H5S_MAX_RANK], count[H5S_MAX_RANK];
    hsize_t total = box_chunk_grid(b, s->cdims, first, count);
    if (!(s->chunks = calloc((size_t)total, sizeof *s->chunks))) {
        FILTERED_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for %llu chunk records", (unsigned long long)total);
        return -1;
    }
    s->nchunks = (size_t)total;
    for (hsize_t k = 0; k < total; k++) {
        hsize_t rest = k;
        for (int d = b->rank - 1; d >= 0; d--) {
            s->chunks[k].lo[d] = (first[d] + rest % count[d]) * s->cdims[d];
            rest /= count[d];
        }
    }
    return 0;
}

/* Each chunk's file extent and filter mask, one query per chunk (HDF5 >=
 * 1.10.5). */
static herr_t locate_by_coord(read_state_t *s)
{
    for (size_t k = 0; k < s->nchunks; k++) {
        chunk_t *c = &s->chunks[k];
        if (H5Dget_chunk_info_by_coord(s->dset, c->lo, &c->mask, &c->addr, &c->stored) < 0) {
            char where[128];
            gds_filtered_chunk_text(&s->box, c->lo, where, sizeof where);
            FILTERED_ERROR(H5E_DATASET, H5E_CANTGET, "dataset '%s': cannot locate the chunk at %s", s->name, where);
            return -1;
        }
        if (c->addr != HADDR_UNDEF && c->stored == 0)
            c->addr = HADDR_UNDEF;
    }
    return 0;
}

#if H5_VERSION_GE(1, 14, 0)
/* H5Dget_chunk_info_by_coord finds a chunk by walking the dataset's chunk
 * index from its start until it meets it (HDF5 1.14.5 and its development
 * branch, H5D__get_chunk_info_by_coord: all of the index for a chunk never
 * written), so the queries of a box cost the sum of its chunks' positions
 * in the index: quadratic in the chunks read. One walk with H5Dchunk_iter
 * that stops once every chunk of the box was seen costs at most the
 * position of the last of them, never more than the queries together; it
 * is taken from this many chunks on. A box of one chunk costs the same
 * either way and keeps the query. */
#define LOCATE_WALK_MIN_CHUNKS 2

typedef struct index_walk {
    chunk_t *chunks; /* the box's chunks, row-major over its grid */
    size_t nchunks, found;
    int rank;
    const hsize_t *cdims;
    hsize_t first[H5S_MAX_RANK], count[H5S_MAX_RANK]; /* the box's chunk grid */
} index_walk_t;

/* One chunk of the index: recorded if it lies in the box. `offset` is the
 * chunk's first element in dataset elements (HDF5 1.14.x,
 * H5D__chunk_iter_cb: scaled coordinates times the chunk dimensions; 1.13
 * passed the scaled ones). `addr` is where the bytes are, the same address
 * H5Dget_chunk_info_by_coord gives (both count the user block from 1.14.4
 * on, neither before).
 * `size`: the headers of every 1.14 release and of 2.x declare it hsize_t,
 * but the library built once runs against any 1.14.x or 2.x libhdf5, and
 * earlier callers of this callback type (1.13, 1.12.2) passed a uint32_t,
 * which leaves the upper half of its 64-bit argument register undefined.
 * Only the low 32 bits are read: HDF5 keeps a chunk's stored size in 32
 * bits (H5D_chunk_rec_t.nbytes), so a chunk is below 4 GiB and nothing is
 * lost. */
static int walk_one_chunk(const hsize_t *offset, unsigned mask, haddr_t addr, hsize_t size, void *data)
{
    index_walk_t *w = data;
    size_t k = 0;
    for (int d = 0; d < w->rank; d++) {
        hsize_t at = offset[d] / w->cdims[d];
        if (at < w->first[d] || at - w->first[d] >= w->count[d])
            return H5_ITER_CONT; /* outside the box */
        k = k * (size_t)w->count[d] + (size_t)(at - w->first[d]);
    }
    uint32_t stored = (uint32_t)size;
    chunk_t *c = &w->chunks[k];
    if (c->addr == HADDR_UNDEF && stored != 0 && addr != HADDR_UNDEF)
        w->found++;
    c->addr = stored != 0 ? addr : HADDR_UNDEF;
    c->stored = stored;
    c->mask = mask;
    return w->found == w->nchunks ? H5_ITER_STOP : H5_ITER_CONT;
}

/* The same extents from one walk of the chunk index. Chunks of the box
 * that the walk does not report were never written (no address, as the
 * per-chunk query says). */
static herr_t locate_by_walk(read_state_t *s)
{
    index_walk_t w;
    memset(&w, 0, sizeof w);
    w.chunks = s->chunks;
    w.nchunks = s->nchunks;
    w.rank = s->box.rank;
    w.cdims = s->cdims;
    box_chunk_grid(&s->box, s->cdims, w.first, w.count);
    for (size_t k = 0; k < s->nchunks; k++) {
        s->chunks[k].addr = HADDR_UNDEF;
        s->chunks[k].stored = 0;
        s->chunks[k].mask = 0;
    }
    if (H5Dchunk_iter(s->dset, H5P_DEFAULT, walk_one_chunk, &w) < 0) {
        FILTERED_ERROR(H5E_DATASET, H5E_CANTGET, "dataset '%s': cannot walk the chunk index", s->name);
        return -1;
    }
    return 0;
}
#endif

/* What to add to the chunk addresses HDF5 reports to make them file
 * offsets: before 1.14.4 both queries left the user block out (HDF5 pull
 * request 4236). Asked of the libhdf5 that runs, which may be newer or
 * older than the headers this was built with (the Python package). */
static herr_t chunk_address_base(read_state_t *s, haddr_t *base)
{
    unsigned major = 0, minor = 0, release = 0;
    *base = 0;
    if (H5get_libversion(&major, &minor, &release) < 0)
        return -1;
    unsigned long version = major * 1000000ul + minor * 1000ul + release;
    if (version >= 1014004ul)
        return 0;
    hid_t file = H5Iget_file_id(s->dset), fcpl = H5I_INVALID_HID;
    hsize_t userblock = 0;
    herr_t rc = file >= 0 && (fcpl = H5Fget_create_plist(file)) >= 0 && H5Pget_userblock(fcpl, &userblock) >= 0 ? 0
                                                                                                              : -1;
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (file >= 0)
        H5Fclose(file);
    if (rc < 0)
        FILTERED_ERROR(H5E_DATASET, H5E_CANTGET, "dataset '%s': cannot get its file's user block size", s->name);
    *base = (haddr_t)userblock;
    return rc;
}

/* The box's chunks (gds_filtered_list_chunks) with each one's file offset,
 * stored size and filter mask, by the method asked for (GDS_LOCATE_AUTO:
 * the cheaper one). */
herr_t gds_filtered_locate(read_state_t *s, gds_chunk_locate_t method, gds_chunk_locate_t *used)
{
    haddr_t base = 0;
    if (gds_filtered_list_chunks(s) < 0 || chunk_address_base(s, &base) < 0)
        return -1;
    herr_t rc;
#if H5_VERSION_GE(1, 14, 0)
    if (method == GDS_LOCATE_WALK || (method == GDS_LOCATE_AUTO && s->nchunks >= LOCATE_WALK_MIN_CHUNKS)) {
        *used = GDS_LOCATE_WALK;
        rc = locate_by_walk(s);
    } else
#else
    if (method == GDS_LOCATE_WALK) {
        FILTERED_ERROR(H5E_ARGS, H5E_UNSUPPORTED, "dataset '%s': walking the chunk index needs HDF5 1.14 or later",
                       s->name);
        return -1;
    }
#endif
    {
        *used = GDS_LOCATE_BY_COORD;
        rc = locate_by_coord(s);
    }
    for (size_t k = 0; rc >= 0 && base != 0 && k < s->nchunks; k++)
        if (s->chunks[k].addr != HADDR_UNDEF)
            s->chunks[k].addr += base;
    return rc;
}

long long gds_filtered_locate_chunks(hid_t dset, const hsize_t *lo, const hsize_t *n, gds_chunk_locate_t method,
                                     gds_chunk_location_t *out, size_t cap, gds_chunk_locate_t *used)
{
    read_state_t s;
    memset(&s, 0, sizeof s);
    gds_filtered_pending.set = false;
    s.dset = dset;
    long long result = -1;
    hid_t dcpl = H5I_INVALID_HID, dspace = H5I_INVALID_HID;
    gds_chunk_locate_t located = GDS_LOCATE_AUTO;
    H5E_BEGIN_TRY
    {
        if (H5Iget_name(dset, s.name, sizeof s.name) < 0 || (dcpl = H5Dget_create_plist(dset)) < 0 ||
            (dspace = H5Dget_space(dset)) < 0)
            s.box.rank = -1;
        else
            s.box.rank = H5Sget_simple_extent_ndims(dspace);
    }
    H5E_END_TRY;
    bool valid = s.box.rank > 0 && H5Sget_simple_extent_dims(dspace, s.dims, NULL) >= 0 &&
                 H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, H5S_MAX_RANK, s.cdims) == s.box.rank &&
                 lo && n;
    for (int d = 0; valid && d < s.box.rank; d++) {
        s.box.lo[d] = lo[d];
        s.box.n[d] = n[d];
        valid = n[d] > 0 && lo[d] < s.dims[d] && n[d] <= s.dims[d] - lo[d];
    }
    if (!valid)
        GDS_ERROR(H5E_ARGS, H5E_BADVALUE, "dataset '%s': not a chunked dataset, or an empty box or one past its extent",
                  s.name);
    else if (gds_filtered_locate(&s, method, &located) < 0)
        gds_error_push(gds_filtered_pending.func, gds_filtered_pending.line, gds_filtered_pending.major,
                       gds_filtered_pending.minor, "%s", gds_filtered_pending.msg);
    else {
        for (size_t k = 0; k < s.nchunks && k < cap && out; k++) {
            memcpy(out[k].lo, s.chunks[k].lo, sizeof out[k].lo);
            out[k].addr = s.chunks[k].addr;
            out[k].stored = s.chunks[k].stored;
            out[k].mask = s.chunks[k].mask;
        }
        if (used)
            *used = located;
        result = (long long)s.nchunks;
    }
    free(s.chunks);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (dspace >= 0)
        H5Sclose(dspace);
    return result;
}
