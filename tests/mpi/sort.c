/* sort: the parallel bucket sort of textbooks. Every rank draws N numbers
 * (a fixed LCG per rank), puts each into the bucket of the rank that owns
 * its value range, exchanges the bucket sizes with MPI_Alltoall and the
 * numbers with MPI_Alltoallv, and sorts locally. Checked: every rank's
 * numbers lie in its range and are sorted, the ranks' ranges are in order,
 * and rank 0 gathers input and output (MPI_Gatherv) and finds the output a
 * permutation of the input, element by element. */
#include "mpitest.h"

#define N 2000
#define RANGE (1u << 24)

static int cmp(const void *a, const void *b) {
  unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
  return (x > y) - (x < y);
}

/* all of |v| (|n| on this rank) at rank 0, sorted; NULL elsewhere */
static unsigned *gather_sorted(unsigned *v, int n, int rank, int size,
                               int *total) {
  int counts[128], displs[128];
  unsigned *all = NULL;
  MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    *total = 0;
    for (int r = 0; r < size; r++) {
      displs[r] = *total;
      *total += counts[r];
    }
    all = malloc(sizeof(unsigned) * (*total + 1));
    CHECK(all != NULL);
  }
  MPI_Gatherv(v, n, MPI_UNSIGNED, all, counts, displs, MPI_UNSIGNED, 0,
              MPI_COMM_WORLD);
  if (rank == 0) qsort(all, *total, sizeof(unsigned), cmp);
  return all;
}

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size <= 128);

  unsigned *in = malloc(sizeof(unsigned) * N),
           *out = malloc(sizeof(unsigned) * N), x = 12345u + 977u * rank;
  CHECK(in && out);
  /* skewed on purpose: a quarter of the numbers fall into rank 0's range */
  for (int k = 0; k < N; k++) {
    x = x * 1103515245u + 12345u;
    in[k] = (k % 4 == 0) ? (x >> 8) % (RANGE / size) : (x >> 8) % RANGE;
  }

  /* buckets: value v belongs to rank v * size / RANGE */
  int scount[128] = {0}, sdispl[128], rcount[128], rdispl[128];
  for (int k = 0; k < N; k++)
    scount[(unsigned long long)in[k] * size / RANGE]++;
  for (int r = 0, off = 0; r < size; r++) {
    sdispl[r] = off;
    off += scount[r];
  }
  int fill[128];
  memcpy(fill, sdispl, sizeof(int) * size);
  for (int k = 0; k < N; k++)
    out[fill[(unsigned long long)in[k] * size / RANGE]++] = in[k];

  MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, MPI_COMM_WORLD);
  int mine = 0;
  for (int r = 0; r < size; r++) {
    rdispl[r] = mine;
    mine += rcount[r];
  }
  unsigned *sorted = malloc(sizeof(unsigned) * (mine + 1));
  CHECK(sorted != NULL);
  MPI_Alltoallv(out, scount, sdispl, MPI_UNSIGNED, sorted, rcount, rdispl,
                MPI_UNSIGNED, MPI_COMM_WORLD);
  qsort(sorted, mine, sizeof(unsigned), cmp);

  /* my range, sorted */
  unsigned lo = (unsigned)((unsigned long long)RANGE * rank / size);
  for (int k = 0; k < mine; k++) {
    CHECK((unsigned long long)sorted[k] * size / RANGE ==
          (unsigned long long)rank);
    CHECK(sorted[k] >= lo);
    if (k > 0) CHECK(sorted[k - 1] <= sorted[k]);
  }
  /* the ranks in order: my first >= the previous rank's last */
  unsigned last = mine ? sorted[mine - 1] : 0, prevlast = 0;
  int next = rank + 1 < size ? rank + 1 : MPI_PROC_NULL,
      prev = rank > 0 ? rank - 1 : MPI_PROC_NULL;
  MPI_Sendrecv(&last, 1, MPI_UNSIGNED, next, 1, &prevlast, 1, MPI_UNSIGNED,
               prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (rank > 0 && mine > 0) CHECK(prevlast <= sorted[0]);

  /* a permutation: the same multiset, element by element */
  int tin = 0, tout = 0;
  unsigned *a = gather_sorted(in, N, rank, size, &tin);
  unsigned *b = gather_sorted(sorted, mine, rank, size, &tout);
  if (rank == 0) {
    CHECK_EQ(tin, N * size);
    CHECK_EQ(tout, N * size);
    for (int k = 0; k < tin; k++)
      if (a[k] != b[k]) CHECK_EQ(b[k], a[k]);
    printf("sort: %d numbers, rank 0 holds %d\n", tout, mine);
  }
  free(a);
  free(b);
  free(in);
  free(out);
  free(sorted);
  mt_ok("sort");
  MPI_Finalize();
  return 0;
}
