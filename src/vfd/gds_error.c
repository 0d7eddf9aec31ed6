#include "gds_error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#ifndef H5GDS_VERSION
#define H5GDS_VERSION "0"
#endif

static hid_t error_class = H5I_INVALID_HID;
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

/* The class in *slot, registered again when HDF5 invalidated it (H5close
 * and a reopened library). H5Iis_valid and H5Eregister_class clear the
 * error stack. */
static hid_t class_in(hid_t *slot, const char *name)
{
    pthread_mutex_lock(&error_lock);
    if (*slot < 0 || H5Iis_valid(*slot) <= 0)
        *slot = H5Eregister_class(name, name, H5GDS_VERSION);
    hid_t cls = *slot;
    pthread_mutex_unlock(&error_lock);
    return cls;
}

hid_t gds_error_class(void)
{
    return class_in(&error_class, "h5gds");
}

static void push_va(hid_t *slot, const char *name, const char *func, int line, hid_t major, hid_t minor,
                    const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* Looking the class up clears the stack: the errors that led here
     * (HDF5's own) are set aside and put back under ours. */
    hid_t kept = H5Eget_current_stack();
    hid_t cls = class_in(slot, name);
    if (kept >= 0)
        H5Eset_current_stack(kept); /* also closes `kept` */
    if (cls < 0)
        cls = H5E_ERR_CLS;
    /* The message is passed as an argument, never as a format. */
    H5Epush2(H5E_DEFAULT, name, func, (unsigned)line, cls, major, minor, "%s", msg);
}

void gds_error_push(const char *func, int line, hid_t major, hid_t minor, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push_va(&error_class, "h5gds", func, line, major, minor, fmt, ap);
    va_end(ap);
}

void gds_error_push_class(hid_t *cls, const char *name, const char *func, int line, hid_t major, hid_t minor,
                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push_va(cls, name, func, line, major, minor, fmt, ap);
    va_end(ap);
}

/* ---- public entry points ---- */

/* Per thread, as HDF5's error stacks are (thread-safe builds). */
static _Thread_local unsigned api_depth;
static _Thread_local H5E_auto2_t api_auto_func;
static _Thread_local void *api_auto_data;
static _Thread_local bool api_auto_known;

void gds_api_enter(void)
{
    if (api_depth++ > 0)
        return;
    /* As HDF5's API calls: a failure reports this call's errors only. */
    H5Eclear2(H5E_DEFAULT);
    api_auto_func = NULL;
    api_auto_data = NULL;
    /* Fails when the application installed an H5Eset_auto1 handler: then
     * printing is left alone (HDF5 itself would call that handler). */
    api_auto_known = H5Eget_auto2(H5E_DEFAULT, &api_auto_func, &api_auto_data) >= 0;
    if (api_auto_known)
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    else
        H5Eclear2(H5E_DEFAULT);
}

bool gds_api_leave(bool failed)
{
    if (api_depth == 0 || --api_depth > 0)
        return failed;
    if (!api_auto_known)
        return failed;
    H5Eset_auto2(H5E_DEFAULT, api_auto_func, api_auto_data);
    if (failed && api_auto_func)
        api_auto_func(H5E_DEFAULT, api_auto_data);
    return failed;
}
