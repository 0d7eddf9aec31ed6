/*
 * The gds_mpio driver's open, close and delete, collective as mpio's are.
 * open opens mpio underneath on the same file and then an engine handle of
 * its own (a buffered descriptor and the engine's O_DIRECT descriptor /
 * cuFile handle); the ranks agree at every step where one of them could
 * fail alone, so that a failure fails the open on every rank instead of
 * leaving the others in a collective call. close drains the engine's
 * writes before mpio closes the file.
 */
#include "gds_mpio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cuda/cuda_loader.h"
#include "../engine/autotune.h"
#include "../vfd/gds_config.h"

/* A communicator H5Pget_mpi_params handed out: a duplicate, or (no
 * communicator set: the plugin route) a predefined one, not ours to free. */
static void free_comm(MPI_Comm *comm)
{
    if (*comm != MPI_COMM_NULL && *comm != MPI_COMM_WORLD && *comm != MPI_COMM_SELF)
        MPI_Comm_free(comm);
    *comm = MPI_COMM_NULL;
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

H5FD_t *gds_mpio_open(const char *name, unsigned flags, hid_t fapl_id, haddr_t maxaddr)
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
    int first = gds_mpio_agree_failure(file, ok);
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

herr_t gds_mpio_close(H5FD_t *_file)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    herr_t ret = 0;
    /* The engine's bytes are in the file before mpio closes it. */
    if (gds_mpio_drain(file) < 0)
        ret = -1;
    if (file->config.stats || getenv("H5GDS_STATS"))
        gds_mpio_print_stats(file);
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

herr_t gds_mpio_delete(const char *name, hid_t fapl)
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
