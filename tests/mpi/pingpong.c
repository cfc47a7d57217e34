/* pingpong: rank 0 serves the others without knowing who sends what: it
 * probes (MPI_ANY_SOURCE, MPI_ANY_TAG), sizes the buffer with
 * MPI_Get_count, receives exactly that message and answers it doubled.
 * Then the classic ping-pong between ranks 0 and 1 over sizes 1 B..1 MiB,
 * timed with MPI_Wtime, every byte checked; then MPI_Iprobe polling. */
#include "mpitest.h"

#define MSGS 4
#define ROUNDS 5

static int len_of(int src, int i) {
  return 1 + 97 * src + 1000 * i;
}
static int val_of(int src, int i, int k) {
  return src * 1000003 + i * 7919 + k;
}

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Status st;

  /* 1. rank 0 serves MSGS messages of each other rank in any order */
  if (rank == 0) {
    int seen[64][MSGS] = {{0}};
    CHECK(size <= 64);
    for (int m = 0; m < (size - 1) * MSGS; m++) {
      MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      int src = st.MPI_SOURCE, tag = st.MPI_TAG, count, bytes;
      CHECK(src > 0 && src < size);
      CHECK(tag >= 0 && tag < MSGS);
      CHECK(!seen[src][tag]);
      seen[src][tag] = 1;
      MPI_Get_count(&st, MPI_INT, &count);
      MPI_Get_count(&st, MPI_BYTE, &bytes);
      CHECK_EQ(count, len_of(src, tag));
      CHECK_EQ(bytes, count * (int)sizeof(int));
      if (count > 1) { /* 4k+1.. bytes are no whole number of doubles */
        int nd;
        MPI_Get_count(&st, MPI_DOUBLE, &nd);
        if (count % 2)
          CHECK_EQ(nd, MPI_UNDEFINED);
        else
          CHECK_EQ(nd, count / 2);
      }
      int *buf = malloc(count * sizeof(int));
      CHECK(buf != NULL);
      MPI_Recv(buf, count, MPI_INT, src, tag, MPI_COMM_WORLD, &st);
      CHECK_EQ(st.MPI_SOURCE, src);
      CHECK_EQ(st.MPI_TAG, tag);
      for (int k = 0; k < count; k++) {
        CHECK_EQ(buf[k], val_of(src, tag, k));
        buf[k] *= 2;
      }
      MPI_Send(buf, count, MPI_INT, src, 100 + tag, MPI_COMM_WORLD);
      free(buf);
    }
  } else {
    for (int i = 0; i < MSGS; i++) {
      int n = len_of(rank, i);
      int *buf = malloc(n * sizeof(int));
      CHECK(buf != NULL);
      for (int k = 0; k < n; k++) buf[k] = val_of(rank, i, k);
      MPI_Send(buf, n, MPI_INT, 0, i, MPI_COMM_WORLD);
      memset(buf, 0, n * sizeof(int));
      MPI_Recv(buf, n, MPI_INT, 0, 100 + i, MPI_COMM_WORLD, &st);
      for (int k = 0; k < n; k++) CHECK_EQ(buf[k], 2 * val_of(rank, i, k));
      free(buf);
    }
  }

  /* 2. ping-pong 0 <-> 1, 1 B .. 1 MiB */
  char *b = malloc(1 << 20);
  CHECK(b != NULL);
  for (int n = 1; n <= (1 << 20); n *= 4) {
    double t0 = MPI_Wtime();
    for (int r = 0; r < ROUNDS; r++) {
      if (rank == 0) {
        for (int k = 0; k < n; k++) b[k] = (char)(k * 31 + r + n);
        MPI_Send(b, n, MPI_CHAR, 1, r, MPI_COMM_WORLD);
        MPI_Recv(b, n, MPI_CHAR, 1, r, MPI_COMM_WORLD, &st);
        for (int k = 0; k < n; k++) CHECK_EQ(b[k], (char)(k * 31 + r + n + 1));
      } else if (rank == 1) {
        MPI_Recv(b, n, MPI_CHAR, 0, r, MPI_COMM_WORLD, &st);
        int count;
        MPI_Get_count(&st, MPI_CHAR, &count);
        CHECK_EQ(count, n);
        for (int k = 0; k < n; k++) b[k]++;
        MPI_Send(b, n, MPI_CHAR, 0, r, MPI_COMM_WORLD);
      }
    }
    double dt = MPI_Wtime() - t0;
    CHECK(dt >= 0);
    if (rank == 0 && n == (1 << 20))
      printf("pingpong: 1 MiB round trip %.1f us\n", dt / ROUNDS * 1e6);
  }
  free(b);

  /* 3. MPI_Iprobe: nothing pending, then a message from the last rank */
  int flag = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Iprobe(MPI_ANY_SOURCE, 555, MPI_COMM_WORLD, &flag, &st);
  CHECK_EQ(flag, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) {
    double v[3] = {0.5, -2.25, 1e300};
    MPI_Send(v, 3, MPI_DOUBLE, 0, 555, MPI_COMM_WORLD);
  } else if (rank == 0) {
    do {
      CHECK_TIME();
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    } while (!flag);
    int count;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    CHECK_EQ(count, 3);
    CHECK_EQ(st.MPI_SOURCE, size - 1);
    CHECK_EQ(st.MPI_TAG, 555);
    double v[3];
    MPI_Recv(v, 3, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    CHECK(v[0] == 0.5 && v[1] == -2.25 && v[2] == 1e300);
  }

  mt_ok("pingpong");
  MPI_Finalize();
  return 0;
}
