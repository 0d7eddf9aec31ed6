/*
 * The public calls on an open file of the gds_mpio driver: the driver's
 * struct behind a file id (gds_mpio_file_of, H5FD_gds_mpio_is_file),
 * statistics (H5FD_gds_mpio_get_stats, and the summary a file prints at
 * close), H5FD_gds_mpio_sync.
 */
#include "gds_mpio_internal.h"

#include <stdio.h>

#include "../vfd/gds_error.h"
#include "../vfd/gds_transfer.h"

#define API_LEAVE(failed) (gds_api_leave(failed) ? -1 : 0)

/* H5Fget_vfd_handle with a scratch fapl that carries this property: a
 * gds_mpio file (of any copy of the library: linked, or loaded as the
 * plugin) writes its struct's address into it (gds_mpio_get_handle); other
 * drivers leave it NULL. Not collective, unlike H5Fget_access_plist. */
static gds_mpio_file_t *lookup(hid_t file_id, bool *is_file)
{
    gds_mpio_file_t *file = NULL;
    void *handle = NULL;
    herr_t got = -1;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5E_BEGIN_TRY
    {
        if (fapl >= 0 && H5Pinsert2(fapl, GDS_MPIO_SELF_PROP, sizeof file, &file, NULL, NULL, NULL, NULL, NULL,
                                    NULL) >= 0)
            got = H5Fget_vfd_handle(file_id, fapl, &handle);
        if (got >= 0 && H5Pget(fapl, GDS_MPIO_SELF_PROP, &file) < 0)
            file = NULL;
    }
    H5E_END_TRY;
    if (fapl >= 0)
        H5Pclose(fapl);
    *is_file = got >= 0;
    return file;
}

gds_mpio_file_t *gds_mpio_file_of(hid_t file_id)
{
    bool is_file;
    gds_mpio_file_t *file = lookup(file_id, &is_file);
    if (!file)
        MPIO_ERROR(H5E_FILE, H5E_BADVALUE, is_file ? "the file does not use the gds_mpio driver" : "not an open file");
    return file;
}

htri_t H5FD_gds_mpio_is_file(hid_t file_id)
{
    gds_api_enter();
    bool is_file;
    gds_mpio_file_t *file = lookup(file_id, &is_file);
    if (!is_file)
        MPIO_ERROR(H5E_ARGS, H5E_BADTYPE, "not an open file");
    gds_api_leave(!is_file);
    return is_file ? (file != NULL) : -1;
}

herr_t H5FD_gds_mpio_get_stats(hid_t file_id, H5FD_gds_stats_t *stats)
{
    gds_api_enter();
    if (!stats) {
        MPIO_ERROR(H5E_ARGS, H5E_BADVALUE, "statistics pointer is NULL");
        return API_LEAVE(true);
    }
    gds_mpio_file_t *file = gds_mpio_file_of(file_id);
    if (file) {
        gds_engine_stats_t s;
        gds_file_get_stats(file->engine, &s);
        gds_stats_to_public(&s, stats);
    }
    return API_LEAVE(!file);
}

herr_t H5FD_gds_mpio_sync(hid_t file_id)
{
    gds_api_enter();
    gds_mpio_file_t *file = gds_mpio_file_of(file_id);
    bool failed = !file;
    if (file) {
        gds_status_t st;
        if (gds_file_sync(file->engine, &st) < 0) {
            MPIO_ERROR(H5E_IO, H5E_WRITEERROR, "%s (rank %d)", st.msg, file->mpi_rank);
            failed = true;
        }
    }
    return API_LEAVE(failed);
}

void gds_mpio_print_stats(const gds_mpio_file_t *file)
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

