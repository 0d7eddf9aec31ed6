# The VFD plugin (HDF5 >= 1.14), included from src/CMakeLists.txt.
#
# HDF5 looks for plugins in HDF5_PLUGIN_PATH or, when that is unset, in the
# one directory compiled into it: H5_DEFAULT_PLUGINDIR of its H5pubconf.h
# (HDF5's configure --with-default-plugindir / CMake H5_DEFAULT_PLUGINDIR,
# "/usr/local/hdf5/lib/plugin" unless its builder chose otherwise; Debian's:
# /usr/lib/x86_64-linux-gnu/hdf5/serial/plugins). The plugin is installed
# there, so HDF5_DRIVER=gds works without HDF5_PLUGIN_PATH. It is a copy of
# libh5gds named libh5gds_plugin.so (HDF5 loads lib*.so files), in its own
# install component "plugin". H5GDS_PLUGIN_INSTALL_DIR overrides the place;
# a relative value is taken relative to the install prefix.
set(H5GDS_PLUGIN_DIR_FOR_CONFIG "")
set(H5GDS_PLUGIN_DIR_FOR_PC "")
if(NOT HDF5_VERSION VERSION_GREATER_EQUAL 1.14)
  return()
endif()
set(h5gds_hdf5_plugindir "")
foreach(dir IN LISTS HDF5_C_INCLUDE_DIRS)
  if(EXISTS "${dir}/H5pubconf.h")
    file(STRINGS "${dir}/H5pubconf.h" line REGEX "^#define H5_DEFAULT_PLUGINDIR ")
    if(line MATCHES "\"([^\"]*)\"")
      set(h5gds_hdf5_plugindir "${CMAKE_MATCH_1}")
      break()
    endif()
  endif()
endforeach()
if(NOT h5gds_hdf5_plugindir)
  set(h5gds_hdf5_plugindir /usr/local/hdf5/lib/plugin) # HDF5's own default
  message(STATUS "h5gds: H5_DEFAULT_PLUGINDIR not found in HDF5's H5pubconf.h, assuming ${h5gds_hdf5_plugindir}")
endif()
# STRING, not PATH: CMake would make a relative -D value absolute under the
# directory cmake runs in, where a relative one is meant under the prefix.
set(H5GDS_PLUGIN_INSTALL_DIR "${h5gds_hdf5_plugindir}" CACHE STRING
    "Where the gds VFD plugin is installed (default: the HDF5's H5_DEFAULT_PLUGINDIR; relative: under the prefix)")
set(h5gds_plugin_where "${H5GDS_PLUGIN_INSTALL_DIR}")
if(NOT IS_ABSOLUTE "${h5gds_plugin_where}")
  set(h5gds_plugin_where "<prefix>/${h5gds_plugin_where}")
endif()
message(STATUS "h5gds: the VFD plugin installs into ${h5gds_plugin_where} (HDF5's default plugin directory: "
               "${h5gds_hdf5_plugindir})")
install(FILES $<TARGET_FILE:h5gds> DESTINATION ${H5GDS_PLUGIN_INSTALL_DIR} RENAME libh5gds_plugin.so
        COMPONENT plugin)
if(IS_ABSOLUTE "${H5GDS_PLUGIN_INSTALL_DIR}")
  set(H5GDS_PLUGIN_DIR_FOR_CONFIG "${H5GDS_PLUGIN_INSTALL_DIR}")
  set(H5GDS_PLUGIN_DIR_FOR_PC "${H5GDS_PLUGIN_INSTALL_DIR}")
else()
  set(H5GDS_PLUGIN_DIR_FOR_CONFIG "\${PACKAGE_PREFIX_DIR}/${H5GDS_PLUGIN_INSTALL_DIR}")
  set(H5GDS_PLUGIN_DIR_FOR_PC "\${prefix}/${H5GDS_PLUGIN_INSTALL_DIR}")
endif()
