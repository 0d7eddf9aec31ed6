/* h5gds's own declarations: the plugin entry points (types in H5PLextern.h;
 * see hdf5_functions.h for why apart). */
#ifndef H5GDS_DECL_H5PLEXTERN_FUNCTIONS_H
#define H5GDS_DECL_H5PLEXTERN_FUNCTIONS_H

H5PL_type_t H5PLget_plugin_type(void);
const void *H5PLget_plugin_info(void);

#endif
