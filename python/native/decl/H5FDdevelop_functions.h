/* h5gds's own declarations: HDF5's driver functions that the Python package
 * uses (types in H5FDdevelop.h; see hdf5_functions.h for why apart). */
#ifndef H5GDS_DECL_H5FDDEVELOP_FUNCTIONS_H
#define H5GDS_DECL_H5FDDEVELOP_FUNCTIONS_H

hid_t H5FDregister(const H5FD_class_t *cls);
herr_t H5FDunregister(hid_t driver_id);
htri_t H5FDis_driver_registered_by_value(H5FD_class_value_t driver_value);
H5FD_t *H5FDopen(const char *name, unsigned flags, hid_t fapl_id, haddr_t maxaddr);
herr_t H5FDclose(H5FD_t *file);

#endif
