/*
 * At import: does the running libhdf5 (h5py's) lay out the driver class and
 * file structs as the declarations this library was compiled with? HDF5
 * 1.14.x and 2.x both do (tests/declarations/ compares the declarations
 * with 1.14.5's and 2.x headers); this checks the library itself, whatever
 * version h5py brings. It opens an in-memory file with HDF5's core driver
 * (nothing touches the disk) through H5FDopen and reads the core class
 * HDF5 hands back through our H5FD_t and H5FD_class_t: its version, value,
 * name, close degree, callbacks near both ends and the free-list map, the
 * last member, which moves if any member before it changes size or order.
 */
#include <stdio.h>
#include <string.h>

#include "gds_hdf5.h"

#define API __attribute__((visibility("default")))

static int mismatch(char *err, size_t errlen, const char *what)
{
    unsigned maj = 0, min = 0, rel = 0;
    (void)H5get_libversion(&maj, &min, &rel);
    snprintf(err, errlen,
             "the running HDF5 %u.%u.%u does not lay out %s as the declarations h5gds was compiled with "
             "(HDF5 %d.%d.%d); rebuild h5gds against that HDF5's headers (H5GDS_REAL_HEADERS=1 "
             "HDF5_ROOT=<its prefix> pip install ./python)",
             maj, min, rel, what, H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE);
    return -1;
}

/* 0 when the layouts agree; -1 with the reason in err. */
API int h5gds_py_check_hdf5_abi(char *err, size_t errlen)
{
    static const H5FD_mem_t dichotomy[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;
    int rc = -1;
    H5FD_t *file = NULL;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0) {
        snprintf(err, errlen, "cannot make a core-driver file access property list to check HDF5's layout");
        goto done;
    }
    H5E_BEGIN_TRY
    {
        /* HADDR_UNDEF: the class's own maximum address (0 is refused) */
        file = H5FDopen("h5gds-layout-probe", H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC, fapl, HADDR_UNDEF);
    }
    H5E_END_TRY
    if (!file) {
        snprintf(err, errlen, "cannot open an in-memory file with HDF5's core driver to check HDF5's layout");
        goto done;
    }
    const H5FD_class_t *cls = file->cls;
    if (!cls || file->driver_id != H5Pget_driver(fapl))
        rc = mismatch(err, errlen, "the file struct (H5FD_t)");
    else if (cls->version != H5FD_CLASS_VERSION)
        rc = mismatch(err, errlen, "the driver class struct (its version)");
    else if (cls->value != H5_VFD_CORE || !cls->name || strcmp(cls->name, "core") != 0 ||
             cls->fc_degree != H5F_CLOSE_WEAK)
        rc = mismatch(err, errlen, "the driver class struct (value, name, close degree)");
    else if (!cls->open || !cls->close || !cls->get_eoa || !cls->read || !cls->write || !cls->truncate ||
             !cls->del)
        rc = mismatch(err, errlen, "the driver class struct (its callbacks)");
    else if (memcmp(cls->fl_map, dichotomy, sizeof dichotomy) != 0)
        rc = mismatch(err, errlen, "the driver class struct (the free-list map at its end)");
    else
        rc = 0;
    H5FDclose(file);
done:
    if (fapl >= 0)
        H5Pclose(fapl);
    if (rc < 0)
        H5Eclear2(H5E_DEFAULT);
    return rc;
}
