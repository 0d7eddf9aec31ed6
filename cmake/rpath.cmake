# Where installed libraries and tools look for the libraries they need,
# included from the top-level CMakeLists.txt once HDF5 (and MPI) are found.
#
# Each gets "$ORIGIN" (the bench: $ORIGIN/../<libdir>): a program linked
# with --as-needed to libh5gds_mpi alone reaches libh5gds only through
# libh5gds_mpi's own RUNPATH, which the program's does not replace. Then the
# folders of the HDF5 (and MPI) libraries linked, wherever they are:
# INSTALL_RPATH_USE_LINK_PATH leaves out folders under the source or build
# tree (an HDF5 built into build/deps), and the compiler's own folders are
# left out here. A CMAKE_INSTALL_RPATH given by the user stands instead.
set(H5GDS_LINKED_LIB_DIRS "")
foreach(lib IN LISTS HDF5_C_LIBRARIES MPI_C_LIBRARIES)
  if(TARGET ${lib})
    get_target_property(lib ${lib} LOCATION)
  endif()
  if(IS_ABSOLUTE "${lib}")
    get_filename_component(dir "${lib}" DIRECTORY)
    file(REAL_PATH "${dir}" dir)
    if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES AND NOT dir IN_LIST H5GDS_LINKED_LIB_DIRS)
      list(APPEND H5GDS_LINKED_LIB_DIRS "${dir}")
    endif()
  endif()
endforeach()

function(h5gds_install_rpath target origin)
  if(NOT CMAKE_INSTALL_RPATH)
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "${origin};${H5GDS_LINKED_LIB_DIRS}")
  endif()
  set_target_properties(${target} PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
endfunction()
