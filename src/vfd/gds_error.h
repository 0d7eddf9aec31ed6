/* Error reporting for the HDF5 glue: every failure goes onto HDF5's error
 * stack under the "h5gds" error class; nothing is printed. */
#ifndef H5GDS_ERROR_H
#define H5GDS_ERROR_H

#include <hdf5.h>

/* Pushes an error (printf-style message) with HDF5 major/minor codes. */
void gds_error_push(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define GDS_ERROR(major, minor, ...) gds_error_push(__func__, __LINE__, (major), (minor), __VA_ARGS__)

/* Registers the error class (idempotent). */
hid_t gds_error_class(void);

#endif
