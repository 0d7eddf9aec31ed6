/* Error reporting for the HDF5 glue and the MPI layer: every failure goes
 * onto HDF5's error stack under the library's error class ("h5gds", or the
 * MPI layer's "h5gds-mpi"). Public entry points print the stack once, as
 * HDF5's own API calls do, through gds_api_enter/gds_api_leave. */
#ifndef H5GDS_ERROR_H
#define H5GDS_ERROR_H

#include <stdbool.h>

#include <hdf5.h>

/* Pushes an error (printf-style message) with HDF5 major/minor codes under
 * the "h5gds" class. The entries already on the stack (HDF5's own errors
 * that led to this one) are kept. */
void gds_error_push(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The same under the class that `*cls` holds, registered as `name` on first
 * use (and again after H5close invalidated it). */
void gds_error_push_class(hid_t *cls, const char *name, const char *func, int line, hid_t major, hid_t minor,
                          const char *fmt, ...) __attribute__((format(printf, 7, 8)));

#define GDS_ERROR(major, minor, ...) gds_error_push(__func__, __LINE__, (major), (minor), __VA_ARGS__)

/* Registers the "h5gds" error class (idempotent). Clears the error stack, as
 * every HDF5 API call does. */
hid_t gds_error_class(void);

/* Public entry points, as HDF5's API functions behave:
 *
 *   herr_t H5Xsomething(...)
 *   {
 *       gds_api_enter();
 *       herr_t ret = something(...);
 *       return gds_api_leave(ret < 0) ? -1 : ret;    (or: gds_api_leave(...); return ...)
 *   }
 *
 * The outermost call of a thread clears the error stack, turns HDF5's
 * automatic error printing off while it runs (the HDF5 calls it makes would
 * each print a part of the story), and at its end puts it back and, when
 * the call failed, reports the whole stack once through it (H5Eget_auto2 on
 * H5E_DEFAULT: nothing when the application turned printing off). Nested
 * public calls (one entry point calling another) only count the depth.
 * gds_api_leave returns `failed`. Never use them in callbacks HDF5 calls
 * (the VFD's): HDF5 reports those failures itself. */
void gds_api_enter(void);
bool gds_api_leave(bool failed);

#endif
