#include "gds_error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#ifndef H5GDS_VERSION
#define H5GDS_VERSION "0"
#endif

static hid_t error_class = H5I_INVALID_HID;
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

hid_t gds_error_class(void)
{
    pthread_mutex_lock(&error_lock);
    /* HDF5 invalidates ids when the library is closed and reopened. */
    if (error_class < 0 || H5Iis_valid(error_class) <= 0)
        error_class = H5Eregister_class("h5gds", "h5gds", H5GDS_VERSION);
    hid_t cls = error_class;
    pthread_mutex_unlock(&error_lock);
    return cls;
}

void gds_error_push(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hid_t cls = gds_error_class();
    if (cls < 0)
        cls = H5E_ERR_CLS;
    /* The message is passed as an argument, never as a format. */
    H5Epush2(H5E_DEFAULT, "h5gds", func, (unsigned)line, cls, major, minor, "%s", msg);
}
