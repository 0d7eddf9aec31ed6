/*
 * The gds_mpio driver's vector and selection I/O. A collective vector
 * first has the ranks agree on what it carries (raw data, or metadata
 * written collectively by HDF5's cache, whose global heap blocks come typed
 * as raw data): a rank with nothing to transfer (count 0) cannot tell, and
 * must join mpio's collective call when the others write metadata. A vector
 * with any metadata in it goes to mpio whole; raw-data vectors and
 * selections (HDF5 keeps selection I/O on with this driver: one call per
 * H5Dwrite/H5Dread on every rank) are one engine request each.
 */
#include "gds_mpio_internal.h"

#include <stdlib.h>

enum { CARRIES_RAW = 1, CARRIES_META = 2 };

/* What a vector carries: raw data, metadata, or nothing (count 0). */
static int vector_kind(uint32_t count, const H5FD_mem_t types[])
{
    int kind = 0;
    H5FD_mem_t t = H5FD_MEM_DEFAULT;
    for (uint32_t i = 0; i < count; i++) {
        /* H5FD_MEM_NOLIST: the rest have the type before it. */
        if (types[i] != H5FD_MEM_NOLIST)
            t = types[i];
        kind |= t == H5FD_MEM_DRAW ? CARRIES_RAW : CARRIES_META;
        if (types[i] == H5FD_MEM_NOLIST)
            break;
    }
    return kind;
}

/* Sizes of a vector: an entry of 0 ends the array, the one before it
 * holds for the rest (the entries after it are not read: the array may be
 * shorter than the vector). */
static size_t vector_size(const size_t sizes[], uint32_t i, size_t *last, bool *fixed)
{
    if (!*fixed && sizes[i] == 0)
        *fixed = true;
    if (!*fixed)
        *last = sizes[i];
    return *last;
}

static herr_t vector_io(gds_mpio_file_t *file, bool write, hid_t dxpl, uint32_t count, H5FD_mem_t types[],
                        haddr_t addrs[], size_t sizes[], void *bufs[])
{
    bool collective = gds_mpio_call_is_collective();
    int kind = vector_kind(count, types);
    if (collective) {
        int all = 0;
        if (gds_mpio_agree_or(file, kind, &all) < 0)
            return -1;
        kind = all;
    }
    if (kind & CARRIES_META) {
        /* Metadata (HDF5's cache writes or reads it collectively as one
         * vector, global heap blocks among it typed as raw data): mpio, on
         * every rank. */
        herr_t rc = write ? file->icls->write_vector(file->inner, dxpl, count, types, addrs, sizes,
                                                     (const void **)bufs)
                          : file->icls->read_vector(file->inner, dxpl, count, types, addrs, sizes, bufs);
        if (rc < 0)
            MPIO_ERROR(H5E_IO, write ? H5E_WRITEERROR : H5E_READERROR,
                       "the mpio driver underneath failed a metadata vector %s", write ? "write" : "read");
        return rc;
    }
    gds_segment_t stack_segs[16];
    gds_segment_t *segs = count <= 16 ? stack_segs : malloc(count * sizeof *segs);
    bool ok = segs != NULL;
    if (!ok)
        MPIO_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for a vector of %u pieces", count);
    size_t n = 0, last = 0;
    bool fixed = false;
    for (uint32_t i = 0; ok && i < count; i++) {
        size_t size = vector_size(sizes, i, &last, &fixed);
        if (size)
            segs[n++] = (gds_segment_t){.offset = addrs[i], .size = size, .buf = bufs[i]};
    }
    herr_t rc = gds_mpio_raw_transfer(file, dxpl, write, n, segs, collective, ok);
    if (segs != stack_segs)
        free(segs);
    return rc;
}

herr_t gds_mpio_read_vector(H5FD_t *_file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                            size_t sizes[], void *bufs[])
{
    return vector_io((gds_mpio_file_t *)_file, false, dxpl, count, types, addrs, sizes, bufs);
}

herr_t gds_mpio_write_vector(H5FD_t *_file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                             size_t sizes[], const void *bufs[])
{
    return vector_io((gds_mpio_file_t *)_file, true, dxpl, count, types, addrs, sizes, (void **)bufs);
}

/* ---- selection I/O: raw data only, turned into one engine request ---- */

typedef struct seg_list {
    gds_segment_t *v;
    size_t n, cap;
} seg_list_t;

static int seg_push(seg_list_t *l, uint64_t offset, size_t size, void *buf)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        gds_segment_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (gds_segment_t){.offset = offset, .size = size, .buf = buf};
    return 0;
}

#define SEQ_BATCH 256

/* The pieces of one (memory space, file space) pair: the file's byte runs
 * matched with the memory's, as HDF5 does when it turns a selection into a
 * vector. Only pointer arithmetic on `buf`: device memory is never touched. */
static herr_t selection_pieces(seg_list_t *l, hid_t mem_space, hid_t file_space, haddr_t base, size_t esize,
                               char *buf)
{
    herr_t rc = -1;
    hid_t fit = H5Ssel_iter_create(file_space, esize, 0), mit = H5Ssel_iter_create(mem_space, esize, 0);
    hsize_t foff[SEQ_BATCH], moff[SEQ_BATCH];
    size_t flen[SEQ_BATCH], mlen[SEQ_BATCH], fn = 0, mn = 0, fi = 0, mi = 0, nbytes;
    if (fit < 0 || mit < 0)
        goto done;
    for (;;) {
        if (fi == fn) {
            if (H5Ssel_iter_get_seq_list(fit, SEQ_BATCH, SIZE_MAX, &fn, &nbytes, foff, flen) < 0)
                goto done;
            fi = 0;
        }
        if (mi == mn) {
            if (H5Ssel_iter_get_seq_list(mit, SEQ_BATCH, SIZE_MAX, &mn, &nbytes, moff, mlen) < 0)
                goto done;
            mi = 0;
        }
        if (fn == 0 || mn == 0) {
            if (fn != mn) { /* one selection ended before the other */
                MPIO_ERROR(H5E_DATASPACE, H5E_BADSELECT, "memory and file selections differ in size");
                goto done;
            }
            break;
        }
        size_t len = flen[fi] < mlen[mi] ? flen[fi] : mlen[mi];
        if (len && seg_push(l, base + foff[fi], len, buf + moff[mi]) < 0) {
            MPIO_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory for the pieces of a selection");
            goto done;
        }
        foff[fi] += len;
        moff[mi] += len;
        if (!(flen[fi] -= len))
            fi++;
        if (!(mlen[mi] -= len))
            mi++;
    }
    rc = 0;
done:
    if (fit >= 0)
        H5Ssel_iter_close(fit);
    if (mit >= 0)
        H5Ssel_iter_close(mit);
    return rc;
}

static herr_t selection_io(gds_mpio_file_t *file, bool write, H5FD_mem_t type, hid_t dxpl, size_t count,
                           hid_t mem_spaces[], hid_t file_spaces[], haddr_t offsets[], size_t element_sizes[],
                           void *bufs[])
{
    if (type != H5FD_MEM_DRAW) { /* HDF5 1.14 selects raw data only; mpio would take anything else */
        herr_t rc = write ? file->icls->write_selection(file->inner, type, dxpl, count, mem_spaces, file_spaces,
                                                        offsets, element_sizes, (const void **)bufs)
                          : file->icls->read_selection(file->inner, type, dxpl, count, mem_spaces, file_spaces,
                                                       offsets, element_sizes, bufs);
        if (rc < 0)
            MPIO_ERROR(H5E_IO, write ? H5E_WRITEERROR : H5E_READERROR,
                       "the mpio driver underneath failed a selection %s", write ? "write" : "read");
        return rc;
    }
    bool collective = gds_mpio_call_is_collective();
    seg_list_t l = {0};
    bool ok = true;
    size_t esize = 0;
    void *buf = NULL;
    bool esize_fixed = false, buf_fixed = false;
    for (size_t i = 0; ok && i < count; i++) {
        /* element_sizes: a 0 ends the array (the one before holds for the
         * rest); bufs: likewise with NULL */
        if (!esize_fixed && element_sizes[i] == 0)
            esize_fixed = true;
        if (!esize_fixed)
            esize = element_sizes[i];
        if (!buf_fixed && bufs[i] == NULL)
            buf_fixed = true;
        if (!buf_fixed)
            buf = bufs[i];
        ok = selection_pieces(&l, mem_spaces[i], file_spaces[i], offsets[i], esize, buf) == 0;
    }
    herr_t rc = gds_mpio_raw_transfer(file, dxpl, write, l.n, l.v, collective, ok);
    free(l.v);
    return rc;
}

herr_t gds_mpio_read_selection(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, size_t count, hid_t mem_spaces[],
                               hid_t file_spaces[], haddr_t offsets[], size_t element_sizes[], void *bufs[])
{
    return selection_io((gds_mpio_file_t *)_file, false, type, dxpl, count, mem_spaces, file_spaces, offsets,
                        element_sizes, bufs);
}

herr_t gds_mpio_write_selection(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, size_t count, hid_t mem_spaces[],
                                hid_t file_spaces[], haddr_t offsets[], size_t element_sizes[],
                                const void *bufs[])
{
    return selection_io((gds_mpio_file_t *)_file, true, type, dxpl, count, mem_spaces, file_spaces, offsets,
                        element_sizes, (void **)bufs);
}
