/* Links against an installed libh5gds_mpi (tests/install/test_install.sh);
 * run without arguments, it calls nothing. */
#include <H5FDgds_mpi.h>

int main(int argc, char **argv)
{
    (void)argv;
    return argc > 1 ? H5FD_gds_mpi_local_rank(MPI_COMM_SELF) : 0;
}
