/*
 * What the gds_mpio driver's collective raw-data calls share: the transfer
 * mode of the call in progress, the ranks' agreement on outcomes and on
 * what a call carries (MPI_Allreduce on the file's private communicator),
 * one engine request followed by the agreement on its outcome, so that a
 * failure on one rank fails the call on all; and the drain of the engine's
 * writes that comes before mpio acts on the file.
 */
#include "gds_mpio_internal.h"

#include <limits.h>

#include "../vfd/gds_transfer.h"

bool gds_mpio_call_is_collective(void)
{
    H5FD_mpio_xfer_t mode = H5FD_MPIO_INDEPENDENT;
    if (H5CX_get_io_xfer_mode(&mode) < 0)
        mode = H5FD_MPIO_INDEPENDENT;
    return mode == H5FD_MPIO_COLLECTIVE;
}

int gds_mpio_agree_failure(gds_mpio_file_t *file, bool ok)
{
    int mine = ok ? INT_MAX : file->mpi_rank, first = INT_MAX;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, file->agree) != MPI_SUCCESS)
        return file->mpi_rank;
    return first == INT_MAX ? -1 : first;
}

int gds_mpio_agree_or(gds_mpio_file_t *file, int mine, int *all)
{
    if (MPI_Allreduce(&mine, all, 1, MPI_INT, MPI_BOR, file->agree) != MPI_SUCCESS) {
        MPIO_ERROR(H5E_VFL, H5E_MPI, "MPI_Allreduce failed (rank %d)", file->mpi_rank);
        return -1;
    }
    return 0;
}

/* None while write-behind is refused at open; kept so that mpio never runs
 * ahead of the engine's bytes. */
herr_t gds_mpio_drain(gds_mpio_file_t *file)
{
    gds_status_t st;
    if (gds_file_drain(file->engine, &st) < 0) {
        gds_mpio_engine_error(file, H5E_WRITEERROR, &st);
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

herr_t gds_mpio_raw_transfer(gds_mpio_file_t *file, hid_t dxpl, bool write, size_t n, const gds_segment_t *segs,
                             bool collective, bool prepared)
{
    gds_status_t st = {0};
    int rc = -1;
    if (prepared && (rc = engine_transfer(file, dxpl, write, n, segs, &st)) < 0)
        gds_mpio_engine_error(file, write ? H5E_WRITEERROR : H5E_READERROR, &st);
    if (!collective)
        return rc < 0 ? -1 : 0;
    int first = gds_mpio_agree_failure(file, rc == 0);
    if (first >= 0 && rc == 0)
        MPIO_ERROR(H5E_IO, write ? H5E_WRITEERROR : H5E_READERROR,
                   "collective raw-data %s failed on rank %d (this rank %d succeeded)", write ? "write" : "read",
                   first, file->mpi_rank);
    return first >= 0 ? -1 : 0;
}
