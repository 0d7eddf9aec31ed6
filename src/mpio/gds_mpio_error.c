/*
 * The gds_mpio driver's errors: HDF5's error stack under the "h5gds-mpio"
 * class, and engine failures reported with the rank and the file.
 */
#include "gds_mpio_internal.h"

#include <stdarg.h>
#include <stdio.h>

#include "../vfd/gds_error.h"

static hid_t mpio_error_class = H5I_INVALID_HID;

void gds_mpio_error(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    gds_error_push_class(&mpio_error_class, "h5gds-mpio", func, line, major, minor, "%s", msg);
}

void gds_mpio_engine_error(const gds_mpio_file_t *file, hid_t minor, const gds_status_t *st)
{
    MPIO_ERROR(H5E_IO, minor, "%s (rank %d of %d, %s)", st->msg[0] ? st->msg : "engine failure", file->mpi_rank,
               file->mpi_size, file->name);
}
