/*
 * The gds_mpio driver: a layer over HDF5's mpio driver. Its class table,
 * and the callbacks of an open file that mpio answers (features, EOA/EOF,
 * the MPI file handle, flush, truncate, ctl).
 *
 * Everything but raw data is forwarded to mpio through its class
 * callbacks, called directly: HDF5's API context of the call in progress
 * (collective mode, MPI datatypes, collective metadata flags) stays the one
 * mpio reads, which forwarding through the public H5FD* calls would replace
 * with a fresh one.
 *
 * Raw data (H5FD_MEM_DRAW) goes through the engine, host and device buffers
 * alike, so every rank takes the same path in a collective call whatever its
 * buffer kind, and no device pointer ever reaches MPI-IO:
 *   - selection calls (HDF5 keeps selection I/O on with this driver: one
 *     call per H5Dwrite/H5Dread on every rank), raw-data vectors, and plain
 *     calls whose MPI datatypes are MPI_BYTE (contiguous) are one engine
 *     request each; in collective mode the ranks then agree on the outcome
 *     (MPI_Allreduce), so a failure on one rank fails the call on all;
 *   - a collective plain call with MPI derived datatypes (selection I/O off:
 *     type conversion, H5Pset_selection_io off, collective chunk fill) is
 *     handed to mpio when no rank has a device buffer (MPI-IO decodes the
 *     datatypes), and refused on every rank otherwise.
 * Collective vector calls first agree on what they carry (gds_mpio_vector.c).
 * Before mpio's flush, truncate, close and end-of-file logic run, the
 * engine's writes are complete (write-behind drained).
 * The driver's other files: gds_mpio_internal.h.
 */
#include "gds_mpio_internal.h"

/* Callbacks of this file, in class-table order. */
static herr_t gds_mpio_query(const H5FD_t *file, unsigned long *flags);
static haddr_t gds_mpio_get_eoa(const H5FD_t *file, H5FD_mem_t type);
static herr_t gds_mpio_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr);
static haddr_t gds_mpio_get_eof(const H5FD_t *file, H5FD_mem_t type);
static herr_t gds_mpio_get_handle(H5FD_t *file, hid_t fapl, void **handle);
static herr_t gds_mpio_flush(H5FD_t *file, hid_t dxpl, hbool_t closing);
static herr_t gds_mpio_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing);
static herr_t gds_mpio_ctl(H5FD_t *file, uint64_t op, uint64_t flags, const void *input, void **output);

const H5FD_class_t H5FD_gds_mpio_class = {
    .version = H5FD_CLASS_VERSION,
    .value = H5FD_GDS_MPIO_VALUE,
    .name = H5FD_GDS_MPIO_NAME,
    .maxaddr = HADDR_MAX,
    .fc_degree = H5F_CLOSE_SEMI, /* as mpio */
    .terminate = gds_mpio_term,
    .fapl_size = sizeof(H5FD_gds_config_t),
    .fapl_get = gds_mpio_fapl_get,
    .fapl_copy = gds_mpio_fapl_copy,
    .fapl_free = gds_mpio_fapl_free,
    .open = gds_mpio_open,
    .close = gds_mpio_close,
    .query = gds_mpio_query,
    .get_eoa = gds_mpio_get_eoa,
    .set_eoa = gds_mpio_set_eoa,
    .get_eof = gds_mpio_get_eof,
    .get_handle = gds_mpio_get_handle,
    .read = gds_mpio_read,
    .write = gds_mpio_write,
    .read_vector = gds_mpio_read_vector,
    .write_vector = gds_mpio_write_vector,
    .read_selection = gds_mpio_read_selection,
    .write_selection = gds_mpio_write_selection,
    .flush = gds_mpio_flush,
    .truncate = gds_mpio_truncate,
    .del = gds_mpio_delete,
    .ctl = gds_mpio_ctl,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

/* ---- queries, EOA/EOF, handle: mpio's ---- */

static herr_t gds_mpio_query(const H5FD_t *_file, unsigned long *flags)
{
    (void)_file;
    if (flags)
        *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_HAS_MPI |
                 H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
    return 0;
}

static haddr_t gds_mpio_get_eoa(const H5FD_t *_file, H5FD_mem_t type)
{
    const gds_mpio_file_t *file = (const gds_mpio_file_t *)_file;
    return file->icls->get_eoa(file->inner, type);
}

static herr_t gds_mpio_set_eoa(H5FD_t *_file, H5FD_mem_t type, haddr_t addr)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    return file->icls->set_eoa(file->inner, type, addr);
}

static haddr_t gds_mpio_get_eof(const H5FD_t *_file, H5FD_mem_t type)
{
    const gds_mpio_file_t *file = (const gds_mpio_file_t *)_file;
    return file->icls->get_eof(file->inner, type);
}

static herr_t gds_mpio_get_handle(H5FD_t *_file, hid_t fapl, void **handle)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    if (!handle) {
        MPIO_ERROR(H5E_ARGS, H5E_BADVALUE, "file handle not valid");
        return -1;
    }
    /* The MPI file, as mpio hands out; and this struct to gds_mpio_file_of,
     * when it asks with its property. */
    *handle = &file->f;
    if (fapl != H5P_DEFAULT && H5Pexist(fapl, GDS_MPIO_SELF_PROP) > 0 && H5Pset(fapl, GDS_MPIO_SELF_PROP, &file) < 0)
        return -1;
    return 0;
}

/* ---- flush, truncate, ctl ---- */

static herr_t gds_mpio_flush(H5FD_t *_file, hid_t dxpl, hbool_t closing)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    bool failed = gds_mpio_drain(file) < 0;
    if (!failed && !closing && file->config.fsync_on_flush) {
        gds_status_t st;
        if (gds_file_sync(file->engine, &st) < 0) {
            gds_mpio_engine_error(file, H5E_WRITEERROR, &st);
            failed = true;
        }
    }
    /* mpio's flush: MPI_File_sync (an fsync of the file, our bytes too),
     * collective: taken part in even after a failure here, or the other
     * ranks would wait for this one forever. */
    herr_t inner = file->icls->flush ? file->icls->flush(file->inner, dxpl, closing) : 0;
    return failed || inner < 0 ? -1 : 0;
}

static herr_t gds_mpio_truncate(H5FD_t *_file, hid_t dxpl, hbool_t closing)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    /* Rank 0 asks the file's size inside mpio's truncate: every rank's
     * writes have landed: they completed before the raw-data calls
     * returned (write-behind is refused at open). */
    herr_t rc = gds_mpio_drain(file);
    if (file->icls->truncate(file->inner, dxpl, closing) < 0) {
        MPIO_ERROR(H5E_IO, H5E_WRITEERROR, "the mpio driver underneath failed to truncate %s", file->name);
        return -1;
    }
    return rc;
}

static herr_t gds_mpio_ctl(H5FD_t *_file, uint64_t op, uint64_t flags, const void *input, void **output)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    /* Every opcode is mpio's (the MPI queries, FILE_SYNC, and whatever a
     * later HDF5 adds): our raw bytes are already in the file whenever the
     * library asks (engine requests complete before the callbacks return;
     * write-behind is drained at flush, truncate and close). */
    if (op == H5FD_CTL_GET_MPI_FILE_SYNC_OPCODE && gds_mpio_drain(file) < 0)
        return -1;
    return file->icls->ctl(file->inner, op, flags, input, output);
}
