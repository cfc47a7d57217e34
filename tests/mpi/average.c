/* average: the textbook average of numbers spread with MPI_Scatter, the
 * partial averages brought back with MPI_Gather and shared with
 * MPI_Allgather; then uneven pieces (rank r holds r + 1 numbers) with
 * MPI_Scatterv / MPI_Gatherv, transformed on the way back. All values are
 * small integers, so every average is exact. */
#include "mpitest.h"

#define PER 1000

int main(int argc, char **argv) {
  int rank, size, root = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* 1. scatter PER numbers to each rank; number k is k % 97 */
  float *all = NULL;
  if (rank == root) {
    all = malloc(sizeof(float) * PER * size);
    CHECK(all != NULL);
    for (int k = 0; k < PER * size; k++) all[k] = (float)(k % 97);
  }
  float mine[PER];
  MPI_Scatter(all, PER, MPI_FLOAT, mine, PER, MPI_FLOAT, root, MPI_COMM_WORLD);
  double sum = 0, expect = 0;
  for (int k = 0; k < PER; k++) {
    CHECK_EQ(mine[k], (rank * PER + k) % 97);
    sum += mine[k];
    expect += (rank * PER + k) % 97;
  }
  double avg = sum / PER, avgs[128];
  CHECK(size <= 128);
  CHECK(avg == expect / PER);

  MPI_Gather(&avg, 1, MPI_DOUBLE, avgs, 1, MPI_DOUBLE, root, MPI_COMM_WORLD);
  if (rank == root) {
    double total = 0, direct = 0;
    for (int r = 0; r < size; r++) {
      double e = 0;
      for (int k = 0; k < PER; k++) e += (r * PER + k) % 97;
      CHECK(avgs[r] == e / PER);
      total += avgs[r] * PER;
    }
    for (int k = 0; k < PER * size; k++) direct += all[k];
    CHECK(total == direct);
    printf("average: %.6f over %d numbers\n", total / (PER * size), PER * size);
  }
  memset(avgs, 0, sizeof avgs);
  MPI_Allgather(&avg, 1, MPI_DOUBLE, avgs, 1, MPI_DOUBLE, MPI_COMM_WORLD);
  for (int r = 0; r < size; r++) {
    double e = 0;
    for (int k = 0; k < PER; k++) e += (r * PER + k) % 97;
    CHECK(avgs[r] == e / PER);
  }
  free(all);

  /* 2. uneven: rank r gets r + 1 ints from offset 2 r^2 (gaps between
   * the pieces), sends them back times 3 plus its rank to offset r^2 + r */
  int counts[128], displs[128], back[128], bdispl[128], n = 0, nb = 0;
  for (int r = 0; r < size; r++) {
    counts[r] = r + 1;
    displs[r] = 2 * r * r;
    back[r] = r + 1;
    bdispl[r] = r * r + r;
    n = displs[r] + counts[r];
    nb = bdispl[r] + back[r] + 1;
  }
  int *src = NULL, *dst = NULL, piece[128], got = rank + 1;
  if (rank == root) {
    src = malloc(sizeof(int) * n);
    dst = malloc(sizeof(int) * nb);
    CHECK(src && dst);
    for (int k = 0; k < n; k++) src[k] = 5 * k - 1;
    for (int k = 0; k < nb; k++) dst[k] = -7;
  }
  MPI_Scatterv(src, counts, displs, MPI_INT, piece, got, MPI_INT, root,
               MPI_COMM_WORLD);
  for (int k = 0; k < got; k++) {
    CHECK_EQ(piece[k], 5 * (2 * rank * rank + k) - 1);
    piece[k] = piece[k] * 3 + rank;
  }
  MPI_Gatherv(piece, got, MPI_INT, dst, back, bdispl, MPI_INT, root,
              MPI_COMM_WORLD);
  if (rank == root) {
    int k = 0;
    for (int r = 0; r < size; r++) {
      for (; k < bdispl[r]; k++) /* the gaps stay untouched */
        CHECK_EQ(dst[k], -7);
      for (int j = 0; j < back[r]; j++, k++)
        CHECK_EQ(dst[k], (5 * (2 * r * r + j) - 1) * 3 + r);
    }
    CHECK_EQ(dst[nb - 1], -7);
  }
  free(src);
  free(dst);

  mt_ok("average");
  MPI_Finalize();
  return 0;
}
