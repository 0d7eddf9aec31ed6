/*
 * libh5gds_mpi: what every collective call does (mpi_internal.h): its
 * errors and their report, the agreement of the ranks on its outcome, its
 * private communicator and file access list; and device selection.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda_loader.h"
#include "mpi_internal.h"

/* The MPI layer's own error class, through the shared helper (gds_error.h). */
hid_t gds_mpi_error_class = H5I_INVALID_HID;

void api_enter(api_t *a, const char *func)
{
    memset(a, 0, sizeof *a);
    a->func = func;
    a->saved = H5I_INVALID_HID;
    gds_api_enter();
}

/* Call right after pushing an error: keeps the current stack (HDF5's errors
 * and ours) for the end of the call. Later errors of the same call are
 * consequences and are dropped. */
void api_keep(api_t *a)
{
    if (a->saved < 0)
        a->saved = H5Eget_current_stack();
    else
        H5Eclear2(H5E_DEFAULT);
}

void api_summary(api_t *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->summary, sizeof a->summary, fmt, ap);
    va_end(ap);
}

/* Ends the call: no HDF5 API call may follow (it would clear the stack). */
herr_t api_leave(api_t *a, bool failed)
{
    if (a->saved >= 0) {
        if (failed)
            H5Eset_current_stack(a->saved);
        else
            H5Eclose_stack(a->saved);
        a->saved = H5I_INVALID_HID;
    }
    if (failed && a->summary[0])
        gds_error_push_class(&gds_mpi_error_class, "h5gds-mpi", a->func, __LINE__, H5E_VFL, H5E_CANTOPERATE, "%s",
                             a->summary);
    return gds_api_leave(failed) ? -1 : 0;
}

/* MPI_Allreduce of the status: how many ranks failed, and the first one. An
 * MPI error counts as a failure of this rank. */
agreement_t agree(api_t *a, MPI_Comm comm, int rank, bool ok)
{
    int mine[2] = {ok ? 0 : 1, ok ? INT_MAX : rank}, sum = 0, low = INT_MAX;
    agreement_t r = {0, INT_MAX};
    if (MPI_Allreduce(&mine[0], &sum, 1, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS ||
        MPI_Allreduce(&mine[1], &low, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
        ERR(H5E_VFL, H5E_MPI, "rank %d: MPI_Allreduce of the status failed", rank);
        api_keep(a);
        r.nfail = 1;
        r.first = rank;
        return r;
    }
    r.nfail = sum;
    r.first = low;
    return r;
}

static bool is_file_access_plist(hid_t fapl)
{
    return fapl >= 0 && H5Pisa_class(fapl, H5P_FILE_ACCESS) > 0;
}

/* A copy of `fapl`, or the gds driver with its defaults for H5P_DEFAULT. */
hid_t fapl_for(api_t *a, hid_t fapl)
{
    hid_t p = H5I_INVALID_HID;
    if (fapl == H5P_DEFAULT) {
        p = H5Pcreate(H5P_FILE_ACCESS);
        if (p < 0 || H5Pset_fapl_gds(p, 0, 0, 0) < 0) {
            ERR(H5E_PLIST, H5E_CANTCREATE, "cannot create a file access property list for the gds driver");
            api_keep(a);
            if (p >= 0)
                H5Pclose(p);
            return H5I_INVALID_HID;
        }
        return p;
    }
    if (!is_file_access_plist(fapl)) {
        ERR(H5E_ARGS, H5E_BADTYPE, "fapl is not a file access property list");
        api_keep(a);
        return H5I_INVALID_HID;
    }
    if ((p = H5Pcopy(fapl)) < 0) {
        ERR(H5E_PLIST, H5E_CANTCOPY, "cannot copy the file access property list");
        api_keep(a);
    }
    return p;
}

MPI_Comm private_comm(api_t *a, MPI_Comm comm)
{
    MPI_Comm dup = MPI_COMM_NULL;
    if (comm == MPI_COMM_NULL) {
        ERR(H5E_ARGS, H5E_BADVALUE, "the communicator is MPI_COMM_NULL");
        api_keep(a);
        return MPI_COMM_NULL;
    }
    if (MPI_Comm_dup(comm, &dup) != MPI_SUCCESS) {
        ERR(H5E_VFL, H5E_MPI, "MPI_Comm_dup failed");
        api_keep(a);
        return MPI_COMM_NULL;
    }
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    return dup;
}

/* ------------------------------------------------------------------------
 * Device selection
 * --------------------------------------------------------------------- */

int H5FD_gds_mpi_local_rank(MPI_Comm comm)
{
    api_t a;
    api_enter(&a, __func__);
    MPI_Comm node = MPI_COMM_NULL;
    int local = -1;
    if (comm == MPI_COMM_NULL) {
        ERR(H5E_ARGS, H5E_BADVALUE, "the communicator is MPI_COMM_NULL");
        api_leave(&a, true);
        return -1;
    }
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS ||
        MPI_Comm_rank(node, &local) != MPI_SUCCESS) {
        ERR(H5E_VFL, H5E_MPI, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
        if (node != MPI_COMM_NULL)
            MPI_Comm_free(&node);
        api_leave(&a, true);
        return -1;
    }
    MPI_Comm_free(&node);
    int n = gds_cuda_device_count(); /* 0 without a usable CUDA driver */
    api_leave(&a, false);
    return n > 0 ? local % n : local;
}
