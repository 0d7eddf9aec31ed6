# Benchmark clients of the gds_mpio driver (label mpio), included from
# tests/CMakeLists.txt: h5gds-bench's shared-file methods and HDF5's h5perf
# under the preload library, 2 ranks, host buffers, seconds each.
# The parallel-file-system model of docs/shared-file-mode.md: its per-stripe
# counting against a brute-force enumeration (any build, a second).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME shared_file_model_check COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tools/shared_file_model.py --check)
  set_tests_properties(shared_file_model_check PROPERTIES LABELS bench)
endif()
if(NOT TARGET h5gds-bench)
  return()
endif()
if(NOT TARGET h5gds_mpio)
  # A build without parallel HDF5: the shared-file methods say why they are not there.
  add_test(NAME bench_shared_unavailable
           COMMAND sh -c "\"$0\" --memory host --methods GDS-SHARED --sizes 1MiB --csv /dev/null 2>&1; test $? -eq 2"
                   $<TARGET_FILE:h5gds-bench>)
  set_tests_properties(bench_shared_unavailable PROPERTIES
    PASS_REGULAR_EXPRESSION "GDS-SHARED and MPIO-HOST need h5gds-bench built against a parallel HDF5" LABELS bench)
  return()
endif()
find_package(MPI COMPONENTS C REQUIRED)
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE h5gds_mpiobench_mpiexec_version
                ERROR_VARIABLE h5gds_mpiobench_mpiexec_version)
# the scripts pass Open MPI's -x (environment of the ranks only)
if(NOT h5gds_mpiobench_mpiexec_version MATCHES "Open MPI|OpenRTE")
  message(STATUS "h5gds: the h5perf and shared-file bench tests need Open MPI's mpirun; not defined")
  return()
endif()
set(h5gds_mpiobench_launch ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS} --oversubscribe)

add_test(NAME bench_shared_np2
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_shared.sh $<TARGET_FILE:h5gds-bench>
                 ${CMAKE_CURRENT_BINARY_DIR}/scratch/bench_shared ${h5gds_mpiobench_launch})
set_tests_properties(bench_shared_np2 PROPERTIES LABELS "mpio;bench" PROCESSORS 2 TIMEOUT 600)

# h5perf of the parallel HDF5 built against (its install or build tree, or
# the GPU machine's carried copy of its programs: H5GDS_HDF5_TESTPAR_DIR).
find_program(H5GDS_H5PERF h5perf PATHS ${HDF5_ROOT}/bin ${H5GDS_HDF5_BUILD_TREE}/bin ${H5GDS_HDF5_TESTPAR_DIR}
             NO_DEFAULT_PATH)
if(H5GDS_H5PERF)
  add_test(NAME h5perf_preload_np2
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_h5perf_preload.sh ${H5GDS_H5PERF}
                   $<TARGET_FILE:h5gds_mpio_preload> ${CMAKE_CURRENT_BINARY_DIR}/scratch/h5perf 2
                   ${h5gds_mpiobench_launch})
  set_tests_properties(h5perf_preload_np2 PROPERTIES LABELS mpio PROCESSORS 2 TIMEOUT 600)
else()
  message(STATUS "h5gds: no h5perf in ${HDF5_ROOT}/bin or ${H5GDS_HDF5_BUILD_TREE}/bin: h5perf_preload_np2 "
                 "not defined (the parallel HDF5 build needs HDF5_BUILD_TOOLS=ON, its default, and target h5perf)")
endif()
