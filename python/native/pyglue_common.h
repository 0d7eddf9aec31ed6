/*
 * What the files of the Python package's ctypes glue (pyglue_*.c) share:
 * the export macro and errors handed back as text in the caller's buffer.
 *
 * The glue is built into libh5gds_py.so together with the driver's own
 * sources; HDF5's symbols come from the libhdf5 that h5py loaded. One job
 * per file:
 *   - pyglue_driver.c: the driver id, a fapl from a "key=value" string, the
 *     HDF5 error stack as text (the package puts it into its exceptions),
 *     the HDF5 version these sources were compiled against;
 *   - pyglue_engine.c: engine files for the sample loader;
 *   - pyglue_decode.c: the loader's compressed columns decoded on the GPU;
 *   - pyglue_checkpoint.c: checkpoints' background writes waited for, their
 *     counters, snapshot memory made ready ahead;
 *   - pyglue_save.c: every leaf of a checkpoint created and written in one
 *     call.
 */
#ifndef H5GDS_PYGLUE_COMMON_H
#define H5GDS_PYGLUE_COMMON_H

#include <stddef.h>
#include <stdio.h>

#define API __attribute__((visibility("default")))

static inline void put_error(char *err, size_t errlen, const char *msg)
{
    if (err && errlen) {
        snprintf(err, errlen, "%s", msg);
    }
}

/* The calling thread's HDF5 error stack as text, then cleared
 * (pyglue_driver.c). */
API size_t h5gds_py_error_text(char *buf, size_t size);

#endif
