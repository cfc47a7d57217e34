/* MPI_ERRORS_ARE_FATAL (the default): a send to a rank that does not exist
 * ends the job with a message naming the call and the rank. The driver
 * checks the exit status and the message. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, x = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
  printf("fatal: rank %d still running\n", rank);
  MPI_Finalize();
  return 0;
}
