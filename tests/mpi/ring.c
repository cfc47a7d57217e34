/* ring: a token passed around the ranks (every rank adds its rank, rank 0
 * counts the laps), then a large array that every rank adds to on its way
 * round (past any eager limit), then the classic shift with MPI_Sendrecv. */
#include "mpitest.h"

#define LAPS 10
#define BIG (1 << 18) /* ints: 1 MiB */

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Status st;

  /* the token: LAPS times round, each rank adds its rank */
  long long token = 0;
  for (int lap = 0; lap < LAPS; lap++) {
    if (rank == 0) {
      MPI_Send(&token, 1, MPI_LONG_LONG, next, lap, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_LONG_LONG, prev, lap, MPI_COMM_WORLD, &st);
    } else {
      MPI_Recv(&token, 1, MPI_LONG_LONG, prev, lap, MPI_COMM_WORLD, &st);
      token += rank;
      MPI_Send(&token, 1, MPI_LONG_LONG, next, lap, MPI_COMM_WORLD);
    }
    CHECK_EQ(st.MPI_SOURCE, prev);
    CHECK_EQ(st.MPI_TAG, lap);
  }
  if (rank == 0) CHECK_EQ(token, (long long)LAPS * size * (size - 1) / 2);

  /* a 1 MiB array once round: element i ends as i + sum of ranks */
  int *a = malloc(BIG * sizeof(int));
  CHECK(a != NULL);
  if (rank == 0) {
    for (int i = 0; i < BIG; i++) a[i] = i;
    MPI_Send(a, BIG, MPI_INT, next, 99, MPI_COMM_WORLD);
    MPI_Recv(a, BIG, MPI_INT, prev, 99, MPI_COMM_WORLD, &st);
    int count;
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK_EQ(count, BIG);
    for (int i = 0; i < BIG; i++)
      if (a[i] != i + size * (size - 1) / 2)
        CHECK_EQ(a[i], i + size * (size - 1) / 2);
  } else {
    MPI_Recv(a, BIG, MPI_INT, prev, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < BIG; i++) a[i] += rank;
    MPI_Send(a, BIG, MPI_INT, next, 99, MPI_COMM_WORLD);
  }
  free(a);

  /* the shift: everyone sends right and receives from the left at once */
  int out[3] = {rank, rank * rank, -rank}, in[3] = {-1, -1, -1};
  MPI_Sendrecv(out, 3, MPI_INT, next, 7, in, 3, MPI_INT, prev, 7,
               MPI_COMM_WORLD, &st);
  CHECK_EQ(in[0], prev);
  CHECK_EQ(in[1], prev * prev);
  CHECK_EQ(in[2], -prev);
  CHECK_EQ(st.MPI_SOURCE, prev);

  mt_ok("ring");
  MPI_Finalize();
  return 0;
}
