/*
 * The gds_mpio driver: a layer over HDF5's mpio driver.
 *
 * open opens mpio underneath on the same file (collective, as mpio's open
 * is) and then an engine handle of its own (a buffered descriptor and the
 * engine's O_DIRECT descriptor / cuFile handle). Everything but raw data is
 * forwarded to mpio through its class callbacks, called directly: HDF5's
 * API context of the call in progress (collective mode, MPI datatypes,
 * collective metadata flags) stays the one mpio reads, which forwarding
 * through the public H5FD* calls would replace with a fresh one.
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
 * Collective vector calls first agree on what they carry (raw data, or
 * metadata written collectively by HDF5's cache, whose global heap blocks
 * come typed as raw data): a rank with nothing to transfer (count 0) cannot
 * tell, and must join mpio's collective call when the others write
 * metadata. A vector with any metadata in it goes to mpio whole.
 * Before mpio's flush, truncate, close and end-of-file logic run, the
 * engine's writes are complete (write-behind drained).
 */
#include "gds_mpio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cuda/cuda_loader.h"
#include "../engine/autotune.h"
#include "../vfd/gds_config.h"
#include "../vfd/gds_error.h"
#include "../vfd/gds_transfer.h"

static hid_t mpio_error_class = H5I_INVALID_HID;

/* A communicator H5Pget_mpi_params handed out: a duplicate, or (no
 * communicator set: the plugin route) a predefined one, not ours to free. */
static void free_comm(MPI_Comm *comm)
{
    if (*comm != MPI_COMM_NULL && *comm != MPI_COMM_WORLD && *comm != MPI_COMM_SELF)
        MPI_Comm_free(comm);
    *comm = MPI_COMM_NULL;
}

void gds_mpio_error(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gds_error_push_class(&mpio_error_class, "h5gds-mpio", func, line, major, minor, "%s", msg);
}

static hid_t driver_id = H5I_INVALID_HID;

hid_t gds_mpio_driver_id(void)
{
    if (H5Iget_type(driver_id) == H5I_VFL)
        return driver_id;
    hid_t id = H5I_INVALID_HID;
    /* Loaded as a plugin and linked too: share the id HDF5 already has. */
    if (H5FDis_driver_registered_by_value(H5FD_GDS_MPIO_VALUE) > 0) {
        hid_t scratch = H5Pcreate(H5P_FILE_ACCESS);
        if (scratch >= 0 && H5Pset_driver_by_value(scratch, H5FD_GDS_MPIO_VALUE, NULL) >= 0)
            id = H5Pget_driver(scratch);
        if (scratch >= 0)
            H5Pclose(scratch);
    }
    if (id < 0)
        id = H5FDregister(&H5FD_gds_mpio_class);
    if (id < 0)
        MPIO_ERROR(H5E_VFL, H5E_CANTREGISTER, "cannot register the gds_mpio driver");
    driver_id = id;
    return id;
}

static herr_t mpio_term(void)
{
    driver_id = H5I_INVALID_HID;
    gds_engine_shutdown();
    return 0;
}

/* ---- fapl driver info: the engine configuration ---- */

static void *mpio_fapl_copy(const void *info)
{
    H5FD_gds_config_t *copy = malloc(sizeof *copy);
    if (!copy) {
        MPIO_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory copying the gds_mpio configuration");
        return NULL;
    }
    *copy = *(const H5FD_gds_config_t *)info;
    return copy;
}

static herr_t mpio_fapl_free(void *info)
{
    free(info);
    return 0;
}

static void *mpio_fapl_get(H5FD_t *_file)
{
    const gds_mpio_file_t *file = (const gds_mpio_file_t *)_file;
    if (!file->config_from_info)
        return NULL;
    return mpio_fapl_copy(&file->config);
}

/* ---- helpers ---- */

static void engine_error(const gds_mpio_file_t *file, hid_t minor, const gds_status_t *st)
{
    MPIO_ERROR(H5E_IO, minor, "%s (rank %d of %d, %s)", st->msg[0] ? st->msg : "engine failure", file->mpi_rank,
               file->mpi_size, file->name);
}

static H5FD_mpio_xfer_t xfer_mode(void)
{
    H5FD_mpio_xfer_t mode = H5FD_MPIO_INDEPENDENT;
    if (H5CX_get_io_xfer_mode(&mode) < 0)
        mode = H5FD_MPIO_INDEPENDENT;
    return mode;
}

/* Collective: every rank gives its outcome, every rank learns the lowest
 * failing rank (or -1). An MPI failure counts as a failure here. */
static int agree_failure(gds_mpio_file_t *file, bool ok)
{
    int mine = ok ? INT_MAX : file->mpi_rank, first = INT_MAX;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, file->agree) != MPI_SUCCESS)
        return file->mpi_rank;
    return first == INT_MAX ? -1 : first;
}

/* Collective: the bitwise OR of every rank's flags. */
static int agree_or(gds_mpio_file_t *file, int mine, int *all)
{
    if (MPI_Allreduce(&mine, all, 1, MPI_INT, MPI_BOR, file->agree) != MPI_SUCCESS) {
        MPIO_ERROR(H5E_VFL, H5E_MPI, "MPI_Allreduce failed (rank %d)", file->mpi_rank);
        return -1;
    }
    return 0;
}

static bool is_device(const void *buf)
{
    gds_buffer_info_t info;
    gds_classify_buffer(buf, &info);
    return info.kind == GDS_MEMORY_DEVICE;
}

/* Waits for the engine's background writes of this rank (none while
 * write-behind is refused at open; kept so that mpio never runs ahead of
 * the engine's bytes). */
static herr_t drain(gds_mpio_file_t *file)
{
    gds_status_t st;
    if (gds_file_drain(file->engine, &st) < 0) {
        engine_error(file, H5E_WRITEERROR, &st);
        return -1;
    }
    return 0;
}

/* One engine request of raw data; local. */
static int engine_transfer(gds_mpio_file_t *file, hid_t dxpl, bool write, size_t n, const gds_segment_t *segs,
                           gds_status_t *st)
{
    if (n == 0)
        return 0;
    gds_request_t req = {.write = write, .data = GDS_DATA_RAW, .nseg = n, .segs = segs};
    gds_transfer_order(dxpl, &req);
    return gds_file_transfer(file->engine, &req, st);
}

/* The engine request, then (collective mode) agreement on the outcome.
 * `prepared` false: this rank failed before it could issue the request (an
 * error is already pushed), and still joins the agreement. */
static herr_t raw_transfer(gds_mpio_file_t *file, hid_t dxpl, bool write, size_t n, const gds_segment_t *segs,
                           bool collective, bool prepared)
{
    gds_status_t st = {0};
    int rc = -1;
    if (prepared && (rc = engine_transfer(file, dxpl, write, n, segs, &st)) < 0)
        engine_error(file, write ? H5E_WRITEERROR : H5E_READERROR, &st);
    if (!collective)
        return rc < 0 ? -1 : 0;
    int first = agree_failure(file, rc == 0);
    if (first >= 0 && rc == 0)
        MPIO_ERROR(H5E_IO, write ? H5E_WRITEERROR : H5E_READERROR,
                   "collective raw-data %s failed on rank %d (this rank %d succeeded)", write ? "write" : "read",
                   first, file->mpi_rank);
    return first >= 0 ? -1 : 0;
}

/* With threads/io_block_size auto, the engine measures the file system at
 * a file's first device request, unless its cache already knows it. Ranks
 * measuring at once would each see a share of the disk and cache that: one
 * rank per node measures first (or finds the cache), alone, while the others
 * wait; their own first device requests then read its result from the cache
 * (same host, file system and GPU name). Collective (a barrier per node);
 * nothing is measured without a CUDA context (host data is not tuned). */
static void tune_once_per_node(gds_mpio_file_t *file)
{
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(file->agree, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return;
    int node_rank = 0;
    MPI_Comm_rank(node, &node_rank);
    bool autotuned = file->config.threads == 0 || file->config.io_block_size == 0;
    const gds_cuda_api_t *cu = gds_cuda_if_loaded();
    CUcontext ctx = NULL;
    CUdevice dev;
    char gpu[128];
    if (node_rank == 0 && autotuned && file->config.mode != H5FD_GDS_MODE_POSIX && cu &&
        cu->CtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx && cu->CtxGetDevice(&dev) == CUDA_SUCCESS &&
        cu->DeviceGetName(gpu, (int)sizeof gpu, dev) == CUDA_SUCCESS) {
        gds_tuning_t t;
        gds_autotune(file->name, gpu, gds_default_threads(), GDS_DEFAULT_IO_BLOCK, &t);
        if (file->config.log)
            fprintf(stderr, "h5gds-mpio: %s: tuned once for this node (rank %d): %s\n", file->name, file->mpi_rank,
                    t.why);
    }
    MPI_Barrier(node);
    MPI_Comm_free(&node);
}

/* ---- open / close ---- */

static herr_t mpio_close(H5FD_t *_file);

/* Tests: H5GDS_TEST_MPIO_FAIL_AFTER_OPEN=<rank> makes that rank fail right
 * after mpio's collective open (the other ranks must fail too, not hang). */
static bool test_fail_after_open(MPI_Comm comm)
{
    const char *e = getenv("H5GDS_TEST_MPIO_FAIL_AFTER_OPEN");
    int me = -1;
    if (!e || !*e || MPI_Comm_rank(comm, &me) != MPI_SUCCESS)
        return false;
    return atoi(e) == me;
}

static H5FD_t *mpio_open(const char *name, unsigned flags, hid_t fapl_id, haddr_t maxaddr)
{
    gds_mpio_file_t *file = NULL;
    hid_t inner_fapl = H5I_INVALID_HID;
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Info info = MPI_INFO_NULL;
    (void)maxaddr;

    if (!name || !*name) {
        MPIO_ERROR(H5E_ARGS, H5E_BADVALUE, "invalid file name");
        return NULL;
    }
    int mpi_ready = 0;
    MPI_Initialized(&mpi_ready);
    if (!mpi_ready) {
        MPIO_ERROR(H5E_VFL, H5E_CANTOPENFILE, "MPI is not initialized (the gds_mpio driver needs MPI_Init first)");
        return NULL;
    }
    if (!(file = calloc(1, sizeof *file))) {
        MPIO_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory");
        return NULL;
    }
    file->fd = -1;
    file->agree = MPI_COMM_NULL;
    /* mpio underneath, with the fapl's communicator and info; the plugin
     * route (HDF5_DRIVER=gds_mpio) sets none: MPI_COMM_WORLD. */
    /* A rank that cannot read its fapl still takes part in the agreement
     * below (on MPI_COMM_WORLD, the plugin route's communicator), so that
     * the others fail instead of waiting for it. */
    bool params_ok = H5Pget_mpi_params(fapl_id, &comm, &info) >= 0;
    if (!params_ok) {
        MPIO_ERROR(H5E_PLIST, H5E_CANTGET, "cannot get the MPI communicator and info of the fapl");
        comm = MPI_COMM_NULL;
        info = MPI_INFO_NULL;
    }
    /* The settings (H5GDS_CONFIG, HDF5_DRIVER_CONFIG may differ by rank):
     * every rank learns whether all can go on before mpio's collective open. */
    bool config_ok = params_ok && gds_config_from_fapl(fapl_id, &file->config, &file->config_from_info) == 0;
    if (config_ok && file->config.write_behind) {
        /* Its background writes would fail outside the collective calls
         * whose outcome the ranks agree on. */
        MPIO_ERROR(H5E_VFL, H5E_UNSUPPORTED, "write_behind is not supported by the gds_mpio driver");
        config_ok = false;
    }
    if (config_ok && !(file->name = strdup(name))) {
        MPIO_ERROR(H5E_RESOURCE, H5E_NOSPACE, "out of memory");
        config_ok = false;
    }
    MPI_Comm outer = comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm;
    int mine_ok = config_ok, all_ok = 0;
    if (MPI_Allreduce(&mine_ok, &all_ok, 1, MPI_INT, MPI_LAND, outer) != MPI_SUCCESS)
        all_ok = 0;
    if (!all_ok) {
        if (config_ok && params_ok)
            MPIO_ERROR(H5E_VFL, H5E_CANTOPENFILE, "another rank refused the gds_mpio settings for %s", name);
        goto fail;
    }
    /* The fapl of mpio underneath (copying it and setting its communicator
     * duplicate the communicator: collective, so after the agreement, on
     * every rank); a rank that cannot make it must not leave the others in
     * mpio's collective open. */
    mine_ok = (inner_fapl = H5Pcopy(fapl_id)) >= 0 && H5Pset_mpi_params(inner_fapl, outer, info) >= 0 &&
              H5Pset_driver(inner_fapl, H5FD_MPIO, NULL) >= 0;
    if (!mine_ok)
        MPIO_ERROR(H5E_PLIST, H5E_CANTSET, "cannot make the mpio file access property list");
    if (MPI_Allreduce(&mine_ok, &all_ok, 1, MPI_INT, MPI_LAND, outer) != MPI_SUCCESS)
        all_ok = 0;
    if (!all_ok)
        goto fail;
    /* mpio's open is collective; what follows it until the file's own
     * communicator exists (queries, MPI_Comm_dup, also collective) is
     * agreed on first, so that one rank failing there fails every rank
     * instead of leaving the others in MPI_Comm_dup. */
    bool opened = (file->inner = H5FDopen(name, flags, inner_fapl, maxaddr)) != NULL;
    if (!opened)
        MPIO_ERROR(H5E_VFL, H5E_CANTOPENFILE, "the mpio driver underneath cannot open %s", name);
    void *handle = NULL;
    if (opened) {
        file->icls = file->inner->cls;
        /* The mirror of H5FD_mpio_t's first members (see gds_mpio_internal.h). */
        MPI_Comm *pcomm = &file->comm;
        MPI_Info *pinfo = &file->info;
        int *prank = &file->mpi_rank, *psize = &file->mpi_size;
        if (file->icls->get_handle(file->inner, inner_fapl, &handle) < 0 || !handle ||
            file->icls->ctl(file->inner, H5FD_CTL_GET_MPI_COMMUNICATOR_OPCODE, H5FD_CTL_FAIL_IF_UNKNOWN_FLAG, NULL,
                            (void **)&pcomm) < 0 ||
            file->icls->ctl(file->inner, H5FD_CTL_GET_MPI_INFO_OPCODE, H5FD_CTL_FAIL_IF_UNKNOWN_FLAG, NULL,
                            (void **)&pinfo) < 0 ||
            file->icls->ctl(file->inner, H5FD_CTL_GET_MPI_RANK_OPCODE, H5FD_CTL_FAIL_IF_UNKNOWN_FLAG, NULL,
                            (void **)&prank) < 0 ||
            file->icls->ctl(file->inner, H5FD_CTL_GET_MPI_SIZE_OPCODE, H5FD_CTL_FAIL_IF_UNKNOWN_FLAG, NULL,
                            (void **)&psize) < 0 || test_fail_after_open(outer)) {
            MPIO_ERROR(H5E_VFL, H5E_CANTGET, "cannot query the mpio driver underneath");
            handle = NULL;
        }
    }
    mine_ok = handle != NULL;
    if (MPI_Allreduce(&mine_ok, &all_ok, 1, MPI_INT, MPI_LAND, outer) != MPI_SUCCESS)
        all_ok = 0;
    if (!all_ok) {
        if (mine_ok)
            MPIO_ERROR(H5E_VFL, H5E_CANTOPENFILE, "another rank could not open %s with mpio underneath", name);
        goto fail;
    }
    file->f = *(MPI_File *)handle;
    if (MPI_Comm_dup(file->comm, &file->agree) != MPI_SUCCESS) {
        MPIO_ERROR(H5E_VFL, H5E_MPI, "MPI_Comm_dup failed");
        goto fail;
    }

    /* The engine's handle; mpio created / truncated the file, collectively.
     * Every rank must open it: the outcome is agreed. */
    file->writable = (flags & H5F_ACC_RDWR) != 0;
    gds_status_t st = {0};
    bool ok = true;
    file->fd = open(name, file->writable ? O_RDWR : O_RDONLY);
    if (file->fd < 0) {
        gds_status_set(&st, errno, "cannot open %s for the engine: %s", name, strerror(errno));
        ok = false;
    }
    if (ok) {
        gds_engine_settings_t settings;
        char note[512] = "";
        gds_config_to_engine(&file->config, &settings, note, sizeof note);
        if (settings.log && note[0] && file->mpi_rank == 0)
            fprintf(stderr, "h5gds-mpio: %s: %s\n", name, note);
        if (gds_file_open(&file->engine, name, file->fd, file->writable, &settings, &st) < 0)
            ok = false;
    }
    if (!ok)
        MPIO_ERROR(H5E_VFL, H5E_CANTOPENFILE, "%s (rank %d)", st.msg, file->mpi_rank);
    int first = agree_failure(file, ok);
    if (first >= 0) {
        if (ok)
            MPIO_ERROR(H5E_VFL, H5E_CANTOPENFILE, "rank %d could not open %s for the engine", first, name);
        goto fail;
    }
    tune_once_per_node(file);
    H5Pclose(inner_fapl);
    free_comm(&comm);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    return &file->pub;

fail:
    if (file) {
        if (file->engine)
            gds_file_close(file->engine);
        if (file->fd >= 0)
            close(file->fd);
        if (file->agree != MPI_COMM_NULL)
            MPI_Comm_free(&file->agree);
        if (file->inner) {
            hid_t kept = H5Eget_current_stack(); /* H5FDclose starts with an empty stack */
            H5FDclose(file->inner);
            if (kept >= 0)
                H5Eset_current_stack(kept);
        }
        free(file->name);
        free(file);
    }
    if (inner_fapl >= 0)
        H5Pclose(inner_fapl);
    free_comm(&comm);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    return NULL;
}

static void print_stats(const gds_mpio_file_t *file)
{
    gds_engine_stats_t s;
    gds_file_get_stats(file->engine, &s);
    uint64_t wd = 0, rd = 0;
    for (int r = GDS_ROUTE_STAGED; r < GDS_NROUTES; r++) {
        wd += s.write_bytes[r];
        rd += s.read_bytes[r];
    }
    fprintf(stderr,
            "h5gds-mpio stats: rank %d/%d %s: engine write %llu B (%llu calls; host %llu B, device %llu B), "
            "read %llu B (%llu calls; host %llu B, device %llu B), handed to mpio %llu B (%llu calls)\n",
            file->mpi_rank, file->mpi_size, file->name,
            (unsigned long long)(s.write_bytes[GDS_ROUTE_HOST] + wd),
            (unsigned long long)(s.write_calls[GDS_ROUTE_HOST] + s.write_calls[GDS_ROUTE_STAGED] +
                                 s.write_calls[GDS_ROUTE_CUFILE] + s.write_calls[GDS_ROUTE_POSIX_BOUNCE]),
            (unsigned long long)s.write_bytes[GDS_ROUTE_HOST], (unsigned long long)wd,
            (unsigned long long)(s.read_bytes[GDS_ROUTE_HOST] + rd),
            (unsigned long long)(s.read_calls[GDS_ROUTE_HOST] + s.read_calls[GDS_ROUTE_STAGED] +
                                 s.read_calls[GDS_ROUTE_CUFILE] + s.read_calls[GDS_ROUTE_POSIX_BOUNCE]),
            (unsigned long long)s.read_bytes[GDS_ROUTE_HOST], (unsigned long long)rd,
            (unsigned long long)file->forwarded_bytes, (unsigned long long)file->forwarded_calls);
}

static herr_t mpio_close(H5FD_t *_file)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    herr_t ret = 0;
    /* The engine's bytes are in the file before mpio closes it. */
    if (drain(file) < 0)
        ret = -1;
    if (file->config.stats || getenv("H5GDS_STATS"))
        print_stats(file);
    gds_file_close(file->engine);
    if (file->fd >= 0 && close(file->fd) < 0 && ret == 0) {
        MPIO_ERROR(H5E_IO, H5E_CLOSEERROR, "closing %s: %s", file->name, strerror(errno));
        ret = -1;
    }
    MPI_Comm_free(&file->agree);
    /* mpio's close is collective (MPI_File_close). H5FDclose, an API call,
     * starts with an empty error stack: ours is put back after it. */
    hid_t kept = H5Eget_current_stack();
    herr_t closed = H5FDclose(file->inner);
    if (kept >= 0)
        H5Eset_current_stack(kept);
    if (closed < 0) {
        MPIO_ERROR(H5E_VFL, H5E_CANTCLOSEFILE, "the mpio driver underneath failed to close %s", file->name);
        ret = -1;
    }
    free(file->name);
    free(file);
    return ret;
}

/* ---- queries, EOA/EOF, handle: mpio's ---- */

static herr_t mpio_query(const H5FD_t *_file, unsigned long *flags)
{
    (void)_file;
    if (flags)
        *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_HAS_MPI |
                 H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
    return 0;
}

static haddr_t mpio_get_eoa(const H5FD_t *_file, H5FD_mem_t type)
{
    const gds_mpio_file_t *file = (const gds_mpio_file_t *)_file;
    return file->icls->get_eoa(file->inner, type);
}

static herr_t mpio_set_eoa(H5FD_t *_file, H5FD_mem_t type, haddr_t addr)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    return file->icls->set_eoa(file->inner, type, addr);
}

static haddr_t mpio_get_eof(const H5FD_t *_file, H5FD_mem_t type)
{
    const gds_mpio_file_t *file = (const gds_mpio_file_t *)_file;
    return file->icls->get_eof(file->inner, type);
}

static herr_t mpio_get_handle(H5FD_t *_file, hid_t fapl, void **handle)
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

/* ---- raw data and metadata ---- */

static herr_t forward_read(gds_mpio_file_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    if (file->icls->read(file->inner, type, dxpl, addr, size, buf) < 0) {
        MPIO_ERROR(H5E_IO, H5E_READERROR, "the mpio driver underneath failed to read %zu bytes at %llu", size,
                   (unsigned long long)addr);
        return -1;
    }
    return 0;
}

static herr_t forward_write(gds_mpio_file_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size,
                            const void *buf)
{
    if (file->icls->write(file->inner, type, dxpl, addr, size, buf) < 0) {
        MPIO_ERROR(H5E_IO, H5E_WRITEERROR, "the mpio driver underneath failed to write %zu bytes at %llu", size,
                   (unsigned long long)addr);
        return -1;
    }
    return 0;
}

enum { HAS_DERIVED = 1, HAS_DEVICE = 2 };

/* A collective plain raw read/write: contiguous (MPI_BYTE) through the
 * engine; MPI derived datatypes through mpio when no rank has a device
 * buffer, refused everywhere otherwise. */
static herr_t plain_raw(gds_mpio_file_t *file, bool write, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    bool collective = xfer_mode() == H5FD_MPIO_COLLECTIVE;
    if (collective) {
        MPI_Datatype btype = MPI_BYTE, ftype = MPI_BYTE;
        if (H5CX_get_mpi_coll_datatypes(&btype, &ftype) < 0) {
            btype = MPI_DATATYPE_NULL; /* unknown: treat as derived */
            ftype = MPI_DATATYPE_NULL;
        }
        int mine = (btype != MPI_BYTE || ftype != MPI_BYTE) ? HAS_DERIVED : 0, all = 0;
        if (size > 0 && is_device(buf))
            mine |= HAS_DEVICE;
        if (agree_or(file, mine, &all) < 0)
            return -1;
        if (all & HAS_DERIVED) {
            if (all & HAS_DEVICE) {
                MPIO_ERROR(H5E_IO, write ? H5E_WRITEERROR : H5E_READERROR,
                           "collective raw-data %s with MPI derived datatypes from device memory (rank %d: %s "
                           "buffer): HDF5 chose this path because selection I/O is off for this call (type "
                           "conversion, H5Pset_selection_io off, or a filtered dataset); use selection I/O "
                           "(the default), independent transfers, or H5Dwrite_gds/H5Dread_gds staging",
                           write ? "write" : "read", file->mpi_rank, (mine & HAS_DEVICE) ? "device" : "host");
                return -1;
            }
            if (drain(file) < 0)
                return -1;
            file->forwarded_bytes += size;
            file->forwarded_calls++;
            return write ? forward_write(file, H5FD_MEM_DRAW, dxpl, addr, size, buf)
                         : forward_read(file, H5FD_MEM_DRAW, dxpl, addr, size, buf);
        }
    }
    gds_segment_t seg = {.offset = addr, .size = size, .buf = buf};
    return raw_transfer(file, dxpl, write, size ? 1 : 0, &seg, collective, true);
}

static herr_t mpio_read(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    if (type != H5FD_MEM_DRAW)
        return forward_read(file, type, dxpl, addr, size, buf);
    return plain_raw(file, false, dxpl, addr, size, buf);
}

static herr_t mpio_write(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    if (type != H5FD_MEM_DRAW)
        return forward_write(file, type, dxpl, addr, size, buf);
    return plain_raw(file, true, dxpl, addr, size, (void *)buf);
}

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
    bool collective = xfer_mode() == H5FD_MPIO_COLLECTIVE;
    int kind = vector_kind(count, types);
    if (collective) {
        int all = 0;
        if (agree_or(file, kind, &all) < 0)
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
    herr_t rc = raw_transfer(file, dxpl, write, n, segs, collective, ok);
    if (segs != stack_segs)
        free(segs);
    return rc;
}

static herr_t mpio_read_vector(H5FD_t *_file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
                               size_t sizes[], void *bufs[])
{
    return vector_io((gds_mpio_file_t *)_file, false, dxpl, count, types, addrs, sizes, bufs);
}

static herr_t mpio_write_vector(H5FD_t *_file, hid_t dxpl, uint32_t count, H5FD_mem_t types[], haddr_t addrs[],
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
    bool collective = xfer_mode() == H5FD_MPIO_COLLECTIVE;
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
    herr_t rc = raw_transfer(file, dxpl, write, l.n, l.v, collective, ok);
    free(l.v);
    return rc;
}

static herr_t mpio_read_selection(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, size_t count, hid_t mem_spaces[],
                                  hid_t file_spaces[], haddr_t offsets[], size_t element_sizes[], void *bufs[])
{
    return selection_io((gds_mpio_file_t *)_file, false, type, dxpl, count, mem_spaces, file_spaces, offsets,
                        element_sizes, bufs);
}

static herr_t mpio_write_selection(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, size_t count, hid_t mem_spaces[],
                                   hid_t file_spaces[], haddr_t offsets[], size_t element_sizes[],
                                   const void *bufs[])
{
    return selection_io((gds_mpio_file_t *)_file, true, type, dxpl, count, mem_spaces, file_spaces, offsets,
                        element_sizes, (void **)bufs);
}

/* ---- flush, truncate, delete, ctl ---- */

static herr_t mpio_flush(H5FD_t *_file, hid_t dxpl, hbool_t closing)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    bool failed = drain(file) < 0;
    if (!failed && !closing && file->config.fsync_on_flush) {
        gds_status_t st;
        if (gds_file_sync(file->engine, &st) < 0) {
            engine_error(file, H5E_WRITEERROR, &st);
            failed = true;
        }
    }
    /* mpio's flush: MPI_File_sync (an fsync of the file, our bytes too),
     * collective: taken part in even after a failure here, or the other
     * ranks would wait for this one forever. */
    herr_t inner = file->icls->flush ? file->icls->flush(file->inner, dxpl, closing) : 0;
    return failed || inner < 0 ? -1 : 0;
}

static herr_t mpio_truncate(H5FD_t *_file, hid_t dxpl, hbool_t closing)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    /* Rank 0 asks the file's size inside mpio's truncate: every rank's
     * writes have landed: they completed before the raw-data calls
     * returned (write-behind is refused at open). */
    herr_t rc = drain(file);
    if (file->icls->truncate(file->inner, dxpl, closing) < 0) {
        MPIO_ERROR(H5E_IO, H5E_WRITEERROR, "the mpio driver underneath failed to truncate %s", file->name);
        return -1;
    }
    return rc;
}

static herr_t mpio_delete(const char *name, hid_t fapl)
{
    /* mpio's delete (collective), with an mpio fapl of the same
     * communicator and info. H5FDdelete, an API call, starts with an empty
     * error stack. */
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Info info = MPI_INFO_NULL;
    hid_t inner_fapl = H5I_INVALID_HID;
    herr_t rc = -1;
    if (H5Pget_mpi_params(fapl, &comm, &info) >= 0 && (inner_fapl = H5Pcopy(fapl)) >= 0 &&
        H5Pset_mpi_params(inner_fapl, comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, info) >= 0 &&
        H5Pset_driver(inner_fapl, H5FD_MPIO, NULL) >= 0)
        rc = H5FDdelete(name, inner_fapl);
    if (rc < 0)
        MPIO_ERROR(H5E_VFL, H5E_CANTDELETEFILE, "the mpio driver underneath cannot delete %s", name);
    if (inner_fapl >= 0)
        H5Pclose(inner_fapl);
    free_comm(&comm);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    return rc;
}

static herr_t mpio_ctl(H5FD_t *_file, uint64_t op, uint64_t flags, const void *input, void **output)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    /* Every opcode is mpio's (the MPI queries, FILE_SYNC, and whatever a
     * later HDF5 adds): our raw bytes are already in the file whenever the
     * library asks (engine requests complete before the callbacks return;
     * write-behind is drained at flush, truncate and close). */
    if (op == H5FD_CTL_GET_MPI_FILE_SYNC_OPCODE && drain(file) < 0)
        return -1;
    return file->icls->ctl(file->inner, op, flags, input, output);
}

const H5FD_class_t H5FD_gds_mpio_class = {
    .version = H5FD_CLASS_VERSION,
    .value = H5FD_GDS_MPIO_VALUE,
    .name = H5FD_GDS_MPIO_NAME,
    .maxaddr = HADDR_MAX,
    .fc_degree = H5F_CLOSE_SEMI, /* as mpio */
    .terminate = mpio_term,
    .fapl_size = sizeof(H5FD_gds_config_t),
    .fapl_get = mpio_fapl_get,
    .fapl_copy = mpio_fapl_copy,
    .fapl_free = mpio_fapl_free,
    .open = mpio_open,
    .close = mpio_close,
    .query = mpio_query,
    .get_eoa = mpio_get_eoa,
    .set_eoa = mpio_set_eoa,
    .get_eof = mpio_get_eof,
    .get_handle = mpio_get_handle,
    .read = mpio_read,
    .write = mpio_write,
    .read_vector = mpio_read_vector,
    .write_vector = mpio_write_vector,
    .read_selection = mpio_read_selection,
    .write_selection = mpio_write_selection,
    .flush = mpio_flush,
    .truncate = mpio_truncate,
    .del = mpio_delete,
    .ctl = mpio_ctl,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};
