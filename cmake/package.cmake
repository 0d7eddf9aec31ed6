# The installed package, included from src/CMakeLists.txt after the targets:
# find_package(h5gds CONFIG) files (h5gds::h5gds, h5gds::h5gds_mpi when built)
# and pkg-config files (h5gds.pc, h5gds_mpi.pc). Both record the HDF5 h5gds
# was built against; both are relocatable (found relative to themselves).
include(CMakePackageConfigHelpers)
set(h5gds_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/h5gds)

# The HDF5 of this build, by real paths (build/deps may be a symlink).
set(H5GDS_RECORDED_HDF5_ROOT "")
if(DEFINED HDF5_ROOT AND NOT HDF5_ROOT STREQUAL "")
  file(REAL_PATH "${HDF5_ROOT}" H5GDS_RECORDED_HDF5_ROOT)
endif()
set(H5GDS_RECORDED_HDF5_INCLUDE_DIRS "")
set(H5GDS_PC_HDF5_CFLAGS "")
foreach(dir IN LISTS HDF5_C_INCLUDE_DIRS)
  file(REAL_PATH "${dir}" real)
  list(APPEND H5GDS_RECORDED_HDF5_INCLUDE_DIRS "${real}")
  string(APPEND H5GDS_PC_HDF5_CFLAGS " -I${real}")
endforeach()
foreach(def IN LISTS HDF5_C_DEFINITIONS)
  string(APPEND H5GDS_PC_HDF5_CFLAGS " ${def}")
endforeach()

# Library items as a linker takes them: imported targets (HDF5's CMake
# config gives "hdf5-shared") by their file, plain names as -l.
function(h5gds_link_flags out)
  set(paths "")
  set(flags "")
  foreach(lib IN LISTS ARGN)
    if(TARGET ${lib})
      get_target_property(lib ${lib} LOCATION)
    endif()
    if(IS_ABSOLUTE "${lib}")
      get_filename_component(name "${lib}" NAME)
      get_filename_component(dir "${lib}" DIRECTORY)
      file(REAL_PATH "${dir}" dir)
      set(lib "${dir}/${name}")
      list(APPEND paths "${lib}")
      string(APPEND flags " ${lib}")
    elseif(lib MATCHES "^-")
      list(APPEND paths "${lib}")
      string(APPEND flags " ${lib}")
    elseif(lib)
      list(APPEND paths "${lib}")
      string(APPEND flags " -l${lib}")
    endif()
  endforeach()
  set(${out}_PATHS "${paths}" PARENT_SCOPE)
  set(${out}_FLAGS "${flags}" PARENT_SCOPE)
endfunction()
h5gds_link_flags(hdf5_libs ${HDF5_C_LIBRARIES})
set(H5GDS_RECORDED_HDF5_LIBRARIES "${hdf5_libs_PATHS}")
set(H5GDS_PC_HDF5_LIBS "${hdf5_libs_FLAGS}")

install(EXPORT h5gdsTargets NAMESPACE h5gds:: DESTINATION ${h5gds_cmake_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/h5gdsConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/package/h5gdsConfig.cmake INSTALL_DESTINATION ${h5gds_cmake_dir})
# 0.x: minor versions may break the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/h5gdsConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/h5gdsConfig.cmake ${CMAKE_BINARY_DIR}/package/h5gdsConfigVersion.cmake
        DESTINATION ${h5gds_cmake_dir})

# pkg-config: prefix=${pcfiledir}/<back to the prefix>.
file(RELATIVE_PATH H5GDS_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" H5GDS_PC_TO_PREFIX "${H5GDS_PC_TO_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/h5gds.pc.in ${CMAKE_BINARY_DIR}/package/h5gds.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/h5gds.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(TARGET h5gds_mpi)
  install(EXPORT h5gds_mpiTargets NAMESPACE h5gds:: DESTINATION ${h5gds_cmake_dir})
  set(H5GDS_PC_MPI_CFLAGS "")
  foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
    string(APPEND H5GDS_PC_MPI_CFLAGS " -I${dir}")
  endforeach()
  foreach(opt IN LISTS MPI_C_COMPILE_DEFINITIONS)
    string(APPEND H5GDS_PC_MPI_CFLAGS " -D${opt}")
  endforeach()
  h5gds_link_flags(mpi_libs ${MPI_C_LIBRARIES})
  set(H5GDS_PC_MPI_LIBS "${mpi_libs_FLAGS}")
  configure_file(${CMAKE_SOURCE_DIR}/cmake/h5gds_mpi.pc.in ${CMAKE_BINARY_DIR}/package/h5gds_mpi.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/package/h5gds_mpi.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
