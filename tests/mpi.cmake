# Tests of libh5gds_mpi (label mpi), included from tests/CMakeLists.txt.
# Defined only when src/ found MPI and built h5gds_mpi.
if(NOT TARGET h5gds_mpi)
  message(STATUS "h5gds: no MPI, the mpi tests are not defined")
  return()
endif()
# MPI::MPI_C is an imported target of src/mpi's scope: find it here too.
find_package(MPI COMPONENTS C REQUIRED)

add_executable(test_mpi test_mpi.c)
target_link_libraries(test_mpi PRIVATE h5gds_mpi h5gds h5gds_cuda MPI::MPI_C)

# Open MPI: more ranks than cores needs --oversubscribe; as root, the two
# variables below (the same as --allow-run-as-root, which other MPIs reject).
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE h5gds_mpiexec_version
                ERROR_VARIABLE h5gds_mpiexec_version RESULT_VARIABLE h5gds_mpiexec_rc)
set(h5gds_mpiexec_flags ${MPIEXEC_PREFLAGS})
if(h5gds_mpiexec_version MATCHES "Open MPI|OpenRTE")
  list(APPEND h5gds_mpiexec_flags --oversubscribe)
endif()

# h5gds_mpi_test(<name> <ranks> LABELS ... ARGS ...): test_mpi on <ranks> ranks,
# in its own scratch directory.
function(h5gds_mpi_test name np)
  cmake_parse_arguments(T "" "" "LABELS;ARGS;ENV" ${ARGN})
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/scratch/${name})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${h5gds_mpiexec_flags}
                   $<TARGET_FILE:test_mpi> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "H5GDS_TEST_DIR=${dir};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;${T_ENV}"
    LABELS "${T_LABELS}"
    SKIP_RETURN_CODE 77
    PROCESSORS ${np}
    TIMEOUT 600)
endfunction()

h5gds_mpi_test(mpi_np2 2 LABELS mpi)
h5gds_mpi_test(mpi_np4 4 LABELS mpi)
h5gds_mpi_test(gpu_mpi_np2 2 LABELS gpu mpi ARGS --device)
# The same with write-behind in every rank's configuration (rank writes go
# through snapshots; the flush each rank write ends with reports a background
# failure). HDF5 1.14 only: after the failure case's rank file fails to close,
# HDF5 1.10 crashes at exit (its file id is left dangling; see docs/write-behind.md).
if(HDF5_VERSION VERSION_GREATER_EQUAL 1.14)
  h5gds_mpi_test(mpi_np2_write_behind 2 LABELS mpi ENV H5GDS_CONFIG=write_behind=4MiB)
  h5gds_mpi_test(gpu_mpi_np2_write_behind 2 LABELS gpu mpi ARGS --device ENV H5GDS_CONFIG=write_behind=4MiB)
endif()
set_tests_properties(mpi_np4 PROPERTIES FIXTURES_SETUP mpi_master)

# The master written by test_mpi (4 ranks) read by h5dump, knowing nothing of
# ranks: the distribution's h5dump (HDF5 1.10, also for the 1.14 build: the
# master's format must be 1.10-compatible) and, when different, the h5dump of
# the HDF5 built against. Compared byte for byte with what the ranks wrote.
find_program(H5GDS_SYSTEM_H5DUMP h5dump PATHS /usr/bin NO_DEFAULT_PATH)
set(h5dumps)
if(H5GDS_SYSTEM_H5DUMP)
  list(APPEND h5dumps system ${H5GDS_SYSTEM_H5DUMP} "")
endif()
if(H5GDS_H5DUMP AND NOT H5GDS_H5DUMP STREQUAL H5GDS_SYSTEM_H5DUMP)
  list(APPEND h5dumps built ${H5GDS_H5DUMP} "${HDF5_ROOT}/lib")
endif()
set(dir ${CMAKE_CURRENT_BINARY_DIR}/scratch/mpi_np4)
while(h5dumps)
  list(POP_FRONT h5dumps kind exe libdir)
  add_test(NAME mpi_master_h5dump_${kind}
           COMMAND sh -c "\"$0\" -d /field -b NATIVE -o \"$1/field.h5dump-${kind}.bin\" \"$1/master.h5\" >/dev/null && cmp \"$1/field.h5dump-${kind}.bin\" \"$1/field.expected.bin\""
                   ${exe} ${dir})
  set_tests_properties(mpi_master_h5dump_${kind} PROPERTIES LABELS mpi FIXTURES_REQUIRED mpi_master
                       ENVIRONMENT "LD_LIBRARY_PATH=${libdir}")
endwhile()

# h5gds-bench under mpirun (2 ranks, host memory): per-rank and aggregate rows.
if(TARGET h5gds-bench)
  add_test(NAME bench_mpi_np2
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_mpi.sh $<TARGET_FILE:h5gds-bench>
                   ${CMAKE_CURRENT_BINARY_DIR}/scratch/bench_mpi
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${h5gds_mpiexec_flags})
  set_tests_properties(bench_mpi_np2 PROPERTIES LABELS mpi PROCESSORS 2 TIMEOUT 600
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endif()

# The MPI layer's entry points: their failures printed once per rank.
add_executable(test_errors_mpi test_errors.c)
target_compile_definitions(test_errors_mpi PRIVATE TEST_ERRORS_MPI=1)
target_link_libraries(test_errors_mpi PRIVATE h5gds_mpi h5gds MPI::MPI_C)
set(dir ${CMAKE_CURRENT_BINARY_DIR}/scratch/errors_mpi)
file(MAKE_DIRECTORY ${dir})
add_test(NAME errors_mpi_np2
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${h5gds_mpiexec_flags}
                 $<TARGET_FILE:test_errors_mpi> ${MPIEXEC_POSTFLAGS} --mpi)
set_tests_properties(errors_mpi_np2 PROPERTIES LABELS mpi PROCESSORS 2 SKIP_RETURN_CODE 77 TIMEOUT 300
                     ENVIRONMENT "H5GDS_TEST_DIR=${dir};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;${T_ENV}")
