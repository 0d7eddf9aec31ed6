# Tests of the gds_mpio driver (label mpio; GPU ones also gpu), included from
# tests/CMakeLists.txt. Defined only when src/ built h5gds_mpio (HDF5 >= 1.14
# with parallel support).
if(NOT TARGET h5gds_mpio)
  return()
endif()
find_package(MPI COMPONENTS C REQUIRED)

add_executable(test_mpio mpio/test_mpio.c)
target_include_directories(test_mpio PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(test_mpio PRIVATE h5gds_mpio h5gds h5gds_cuda MPI::MPI_C)

execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE h5gds_mpiexec_version
                ERROR_VARIABLE h5gds_mpiexec_version RESULT_VARIABLE h5gds_mpiexec_rc)
set(h5gds_mpio_flags ${MPIEXEC_PREFLAGS})
set(h5gds_mpio_is_ompi OFF)
if(h5gds_mpiexec_version MATCHES "Open MPI|OpenRTE")
  list(APPEND h5gds_mpio_flags --oversubscribe)
  set(h5gds_mpio_is_ompi ON)
endif()
set(h5gds_mpio_preload $<TARGET_FILE:h5gds_mpio_preload>)

# h5gds_mpio_test(<name> <ranks> [PRELOAD] LABELS ... ENV ... ARGS ...)
function(h5gds_mpio_test name np)
  cmake_parse_arguments(T "PRELOAD" "" "LABELS;ENV;ARGS" ${ARGN})
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/scratch/${name})
  file(MAKE_DIRECTORY ${dir})
  set(flags ${h5gds_mpio_flags})
  if(T_PRELOAD)
    # only the ranks, not mpirun itself (Open MPI's -x)
    list(APPEND flags -x LD_PRELOAD=${h5gds_mpio_preload})
  endif()
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${flags}
                   $<TARGET_FILE:test_mpio> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "H5GDS_TEST_DIR=${dir};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;${T_ENV}"
    LABELS "${T_LABELS}" SKIP_RETURN_CODE 77 PROCESSORS ${np} TIMEOUT 600)
endfunction()

h5gds_mpio_test(mpio_np2 2 LABELS mpio)
h5gds_mpio_test(mpio_np3 3 LABELS mpio)
if(h5gds_mpio_is_ompi)
  h5gds_mpio_test(mpio_preload_np2 2 PRELOAD LABELS mpio ARGS --fapl mpio)
endif()
h5gds_mpio_test(mpio_plugin_np2 2 LABELS mpio
                ENV "HDF5_DRIVER=gds_mpio;HDF5_PLUGIN_PATH=${H5GDS_MPIO_PLUGIN_DIR};HDF5_DRIVER_CONFIG=threads=2"
                ARGS --fapl plugin slab1d cyclic4099 queries)

# GPU (device buffers; skipped without a GPU): 2 and 4 ranks sharing the GPUs.
h5gds_mpio_test(gpu_mpio_np2 2 LABELS "gpu;mpio" ARGS --device)
h5gds_mpio_test(gpu_mpio_np4 4 LABELS "gpu;mpio" ARGS --device)
h5gds_mpio_test(gpu_mpio_mixed_np2 2 LABELS "gpu;mpio" ARGS --mixed)
h5gds_mpio_test(gpu_mpio_mixed_np3 3 LABELS "gpu;mpio" ARGS --mixed)
if(h5gds_mpio_is_ompi)
  h5gds_mpio_test(gpu_mpio_preload_np4 4 PRELOAD LABELS "gpu;mpio" ARGS --device --fapl mpio)
  h5gds_mpio_test(gpu_mpio_preload_mixed_np2 2 PRELOAD LABELS "gpu;mpio" ARGS --mixed --fapl mpio)
endif()

# HDF5's own parallel test programs under the preload library, 2 and 3
# ranks, host buffers (label mpio): the build tree of scripts/build-hdf5.sh
# --parallel, or H5GDS_HDF5_TESTPAR_DIR (the GPU machine's carried copy).
set(H5GDS_HDF5_TESTPAR_DIR "" CACHE PATH "HDF5's parallel test programs (default: <H5GDS_HDF5_BUILD_TREE>/bin)")
set(testpar_dir "${H5GDS_HDF5_TESTPAR_DIR}")
if(NOT testpar_dir AND H5GDS_HDF5_BUILD_TREE)
  set(testpar_dir "${H5GDS_HDF5_BUILD_TREE}/bin")
endif()
if(h5gds_mpio_is_ompi AND testpar_dir AND EXISTS "${testpar_dir}/testphdf5")
  foreach(np 2 3)
    add_test(NAME hdf5_testpar_np${np}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mpio/run-hdf5-testpar.sh ${testpar_dir} ${h5gds_mpio_preload} ${np}
                     ${CMAKE_CURRENT_BINARY_DIR}/scratch/hdf5_testpar_np${np})
    set_tests_properties(hdf5_testpar_np${np} PROPERTIES LABELS mpio PROCESSORS ${np} TIMEOUT 1800
                         ENVIRONMENT "MPIEXEC=${MPIEXEC_EXECUTABLE}")
  endforeach()
elseif(NOT testpar_dir OR NOT EXISTS "${testpar_dir}/testphdf5")
  message(STATUS "h5gds: HDF5's parallel test programs not found (H5GDS_HDF5_BUILD_TREE / H5GDS_HDF5_TESTPAR_DIR): "
                 "hdf5_testpar tests not defined")
endif()
