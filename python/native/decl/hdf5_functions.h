/*
 * h5gds's own declarations: the HDF5 functions and global ids the Python
 * package's native library uses (types in hdf5.h). Kept apart from the
 * types so that tests/declarations/ can include this file after HDF5's real
 * headers: C rejects a redeclaration that does not match.
 */
#ifndef H5GDS_DECL_HDF5_FUNCTIONS_H
#define H5GDS_DECL_HDF5_FUNCTIONS_H

/* library */
herr_t H5open(void);
herr_t H5get_libversion(unsigned *majnum, unsigned *minnum, unsigned *relnum);
herr_t H5is_library_threadsafe(hbool_t *is_ts);

/* global ids (hdf5.h's H5P_* and H5E_* macros) */
extern hid_t H5P_CLS_FILE_ACCESS_ID_g;
extern hid_t H5P_CLS_DATASET_CREATE_ID_g;
extern hid_t H5P_CLS_DATASET_ACCESS_ID_g;
extern hid_t H5P_CLS_DATASET_XFER_ID_g;
extern hid_t H5P_CLS_LINK_CREATE_ID_g;
extern hid_t H5P_LST_DATASET_XFER_ID_g;
extern hid_t H5E_ERR_CLS_g;
extern hid_t H5E_ARGS_g;
extern hid_t H5E_DATASET_g;
extern hid_t H5E_FILE_g;
extern hid_t H5E_IO_g;
extern hid_t H5E_PLINE_g;
extern hid_t H5E_PLIST_g;
extern hid_t H5E_RESOURCE_g;
extern hid_t H5E_VFL_g;
extern hid_t H5E_BADFILE_g;
extern hid_t H5E_BADTYPE_g;
extern hid_t H5E_BADVALUE_g;
extern hid_t H5E_CANTALLOC_g;
extern hid_t H5E_CANTCLOSEFILE_g;
extern hid_t H5E_CANTCOPY_g;
extern hid_t H5E_CANTCREATE_g;
extern hid_t H5E_CANTDELETEFILE_g;
extern hid_t H5E_CANTFLUSH_g;
extern hid_t H5E_CANTGET_g;
extern hid_t H5E_CANTINIT_g;
extern hid_t H5E_CANTLOCKFILE_g;
extern hid_t H5E_CANTOPENFILE_g;
extern hid_t H5E_CANTREGISTER_g;
extern hid_t H5E_CANTSET_g;
extern hid_t H5E_CANTUNLOCKFILE_g;
extern hid_t H5E_FCNTL_g;
extern hid_t H5E_NOSPACE_g;
extern hid_t H5E_OVERFLOW_g;
extern hid_t H5E_READERROR_g;
extern hid_t H5E_SEEKERROR_g;
extern hid_t H5E_UNSUPPORTED_g;
extern hid_t H5E_WRITEERROR_g;

/* H5E: error stacks */
herr_t H5Eauto_is_v2(hid_t err_stack, unsigned *is_stack);
herr_t H5Eclear2(hid_t err_stack);
herr_t H5Eget_auto1(H5E_auto1_t *func, void **client_data);
herr_t H5Eget_auto2(hid_t estack_id, H5E_auto2_t *func, void **client_data);
herr_t H5Eset_auto1(H5E_auto1_t func, void *client_data);
herr_t H5Eset_auto2(hid_t estack_id, H5E_auto2_t func, void *client_data);
hid_t H5Eget_current_stack(void);
herr_t H5Eclose_stack(hid_t stack_id);
herr_t H5Ewalk2(hid_t err_stack, H5E_direction_t direction, H5E_walk2_t func, void *client_data);
herr_t H5Eset_current_stack(hid_t err_stack_id);
herr_t H5Eprint2(hid_t err_stack, FILE *stream);
herr_t H5Epush2(hid_t err_stack, const char *file, const char *func, unsigned line, hid_t cls_id, hid_t maj_id,
                hid_t min_id, const char *msg, ...);
hid_t H5Eregister_class(const char *cls_name, const char *lib_name, const char *version);

/* H5I: identifiers */
H5I_type_t H5Iget_type(hid_t id);
htri_t H5Iis_valid(hid_t id);
hid_t H5Iget_file_id(hid_t id);
ssize_t H5Iget_name(hid_t id, char *name, size_t size);

/* H5F: files */
herr_t H5Fclose(hid_t file_id);
herr_t H5Fget_intent(hid_t file_id, unsigned *intent);
hid_t H5Fget_access_plist(hid_t file_id);
hid_t H5Fget_create_plist(hid_t file_id);
herr_t H5Fget_vfd_handle(hid_t file_id, hid_t fapl, void **file_handle);

/* H5G, H5L: groups, links */
hid_t H5Gcreate2(hid_t loc_id, const char *name, hid_t lcpl_id, hid_t gcpl_id, hid_t gapl_id);
herr_t H5Gclose(hid_t group_id);
htri_t H5Lexists(hid_t loc_id, const char *name, hid_t lapl_id);

/* H5D: datasets */
hid_t H5Dcreate2(hid_t loc_id, const char *name, hid_t type_id, hid_t space_id, hid_t lcpl_id, hid_t dcpl_id,
                 hid_t dapl_id);
herr_t H5Dclose(hid_t dset_id);
herr_t H5Dflush(hid_t dset_id);
hid_t H5Dget_space(hid_t dset_id);
hid_t H5Dget_type(hid_t dset_id);
hid_t H5Dget_create_plist(hid_t dset_id);
hid_t H5Dget_access_plist(hid_t dset_id);
haddr_t H5Dget_offset(hid_t dset_id);
herr_t H5Dget_space_status(hid_t dset_id, H5D_space_status_t *allocation);
herr_t H5Dread(hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id, hid_t dxpl_id,
               void *buf);
herr_t H5Dwrite(hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id, hid_t dxpl_id,
                const void *buf);
herr_t H5Dwrite_multi(size_t count, hid_t dset_id[], hid_t mem_type_id[], hid_t mem_space_id[],
                      hid_t file_space_id[], hid_t dxpl_id, const void *buf[]);
herr_t H5Dwrite_chunk(hid_t dset_id, hid_t dxpl_id, uint32_t filters, const hsize_t *offset, size_t data_size,
                      const void *buf);
herr_t H5Dget_chunk_info_by_coord(hid_t dset_id, const hsize_t *offset, unsigned *filter_mask, haddr_t *addr,
                                  hsize_t *size);
herr_t H5Dchunk_iter(hid_t dset_id, hid_t dxpl_id, H5D_chunk_iter_op_t cb, void *op_data);

/* H5S: dataspaces */
hid_t H5Screate(H5S_class_t type);
hid_t H5Screate_simple(int rank, const hsize_t dims[], const hsize_t maxdims[]);
hid_t H5Scopy(hid_t space_id);
herr_t H5Sclose(hid_t space_id);
int H5Sget_simple_extent_ndims(hid_t space_id);
int H5Sget_simple_extent_dims(hid_t space_id, hsize_t dims[], hsize_t maxdims[]);
hssize_t H5Sget_simple_extent_npoints(hid_t space_id);
H5S_sel_type H5Sget_select_type(hid_t spaceid);
hssize_t H5Sget_select_npoints(hid_t spaceid);
herr_t H5Sget_select_bounds(hid_t spaceid, hsize_t start[], hsize_t end[]);
herr_t H5Sselect_none(hid_t spaceid);
herr_t H5Sselect_hyperslab(hid_t space_id, H5S_seloper_t op, const hsize_t start[], const hsize_t stride[],
                           const hsize_t count[], const hsize_t block[]);

/* H5T: datatypes */
herr_t H5Tclose(hid_t type_id);
size_t H5Tget_size(hid_t type_id);
htri_t H5Tequal(hid_t type1_id, hid_t type2_id);
htri_t H5Tdetect_class(hid_t type_id, H5T_class_t cls);
htri_t H5Tis_variable_str(hid_t type_id);

/* H5P: property lists */
hid_t H5Pcreate(hid_t cls_id);
herr_t H5Pclose(hid_t plist_id);
htri_t H5Pisa_class(hid_t plist_id, hid_t pclass_id);
htri_t H5Pexist(hid_t plist_id, const char *name);
herr_t H5Pget(hid_t plist_id, const char *name, void *value);
herr_t H5Pset(hid_t plist_id, const char *name, const void *value);
herr_t H5Pinsert2(hid_t plist_id, const char *name, size_t size, void *value, H5P_prp_set_func_t set,
                  H5P_prp_get_func_t get, H5P_prp_delete_func_t prp_del, H5P_prp_copy_func_t copy,
                  H5P_prp_compare_func_t compare, H5P_prp_close_func_t close);
hid_t H5Pget_driver(hid_t plist_id);
const void *H5Pget_driver_info(hid_t plist_id);
herr_t H5Pset_driver(hid_t plist_id, hid_t driver_id, const void *driver_info);
herr_t H5Pset_driver_by_value(hid_t plist_id, H5FD_class_value_t driver_value, const char *driver_config);
ssize_t H5Pget_driver_config_str(hid_t fapl_id, char *config_buf, size_t buf_size);
herr_t H5Pget_file_locking(hid_t fapl_id, hbool_t *use_file_locking, hbool_t *ignore_when_disabled);
herr_t H5Pget_sieve_buf_size(hid_t fapl_id, size_t *size);
herr_t H5Pget_userblock(hid_t plist_id, hsize_t *size);
herr_t H5Pset_fapl_core(hid_t fapl_id, size_t increment, hbool_t backing_store);
H5D_layout_t H5Pget_layout(hid_t plist_id);
int H5Pget_chunk(hid_t plist_id, int max_ndims, hsize_t dim[]);
herr_t H5Pget_chunk_opts(hid_t plist_id, unsigned *opts);
H5Z_EDC_t H5Pget_edc_check(hid_t plist_id);
herr_t H5Pget_chunk_cache(hid_t dapl_id, size_t *rdcc_nslots, size_t *rdcc_nbytes, double *rdcc_w0);
herr_t H5Pset_chunk_cache(hid_t dapl_id, size_t rdcc_nslots, size_t rdcc_nbytes, double rdcc_w0);
int H5Pget_nfilters(hid_t plist_id);
H5Z_filter_t H5Pget_filter2(hid_t plist_id, unsigned idx, unsigned int *flags, size_t *cd_nelmts,
                            unsigned cd_values[], size_t namelen, char name[], unsigned *filter_config);
int H5Pget_external_count(hid_t plist_id);
herr_t H5Pset_alloc_time(hid_t plist_id, H5D_alloc_time_t alloc_time);
herr_t H5Pget_fill_time(hid_t plist_id, H5D_fill_time_t *fill_time);
herr_t H5Pset_fill_time(hid_t plist_id, H5D_fill_time_t fill_time);
herr_t H5Pfill_value_defined(hid_t plist, H5D_fill_value_t *status);
herr_t H5Pget_fill_value(hid_t plist_id, hid_t type_id, void *value);
ssize_t H5Pget_data_transform(hid_t plist_id, char *expression, size_t size);
herr_t H5Pget_selection_io(hid_t plist_id, H5D_selection_io_mode_t *selection_io_mode);
herr_t H5Pset_selection_io(hid_t plist_id, H5D_selection_io_mode_t selection_io_mode);
herr_t H5Pset_char_encoding(hid_t plist_id, H5T_cset_t encoding);

#endif
