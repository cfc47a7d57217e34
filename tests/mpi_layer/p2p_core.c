/* The point-to-point calls that need nexar's probe, synchronous send and
 * cancel (nexar_iprobe, nexar_probe, nexar_issend, nexar_cancel): a
 * message of unknown length received after MPI_Probe + MPI_Get_count,
 * MPI_Iprobe polled until a message is there (and it stays queued), an
 * MPI_Issend that completes only once the receive is posted, and
 * MPI_Cancel of a receive that never matches. 2+ ranks. */
#include <stdlib.h>

#include "check.h"

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  int rank, size;
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs 2 ranks");
  MPI_Comm w = MPI_COMM_WORLD;
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Status st;

  /* Probe, then size the buffer from MPI_Get_count. */
  int n = 100 + 37 * rank;
  long *msg = malloc(n * sizeof(long));
  for (int i = 0; i < n; i++) msg[i] = rank * 100000L + i;
  MPI_Request sq;
  OK(MPI_Isend(msg, n, MPI_LONG, right, 7, w, &sq));
  OK(MPI_Probe(MPI_ANY_SOURCE, 7, w, &st));
  int count;
  OK(MPI_Get_count(&st, MPI_LONG, &count));
  CHECK(st.MPI_SOURCE == left && count == 100 + 37 * left, "probe %d %d",
        st.MPI_SOURCE, count);
  long *in = malloc(count * sizeof(long));
  OK(MPI_Recv(in, count, MPI_LONG, st.MPI_SOURCE, 7, w, &st));
  for (int i = 0; i < count; i++)
    CHECK(in[i] == left * 100000L + i, "value %d", i);
  OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));

  /* Iprobe until the message is there; it is still received after. */
  int v = rank, got = -1, flag = 0;
  OK(MPI_Isend(&v, 1, MPI_INT, right, 8, w, &sq));
  while (!flag) OK(MPI_Iprobe(left, 8, w, &flag, &st));
  OK(MPI_Get_count(&st, MPI_INT, &count));
  CHECK(count == 1 && st.MPI_TAG == 8, "iprobe count %d", count);
  OK(MPI_Iprobe(left, 9, w, &flag, &st));
  CHECK(!flag, "iprobe of a tag never sent");
  OK(MPI_Recv(&got, 1, MPI_INT, left, 8, w, MPI_STATUS_IGNORE));
  CHECK(got == left, "got %d", got);
  OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));

  /* Issend completes only after the receive is posted: the receiver posts
   * it after a go message that the sender sends after testing. */
  if (rank == 0) {
    OK(MPI_Issend(&v, 1, MPI_INT, 1, 10, w, &sq));
    for (int i = 0; i < 100; i++) {
      OK(MPI_Test(&sq, &flag, MPI_STATUS_IGNORE));
      CHECK(!flag, "issend completed before the receive was posted");
    }
    OK(MPI_Send(&v, 0, MPI_INT, 1, 11, w));
    OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));
  } else if (rank == 1) {
    OK(MPI_Recv(&got, 0, MPI_INT, 0, 11, w, MPI_STATUS_IGNORE));
    OK(MPI_Recv(&got, 1, MPI_INT, 0, 10, w, MPI_STATUS_IGNORE));
    CHECK(got == 0, "issend value %d", got);
  }

  /* Cancel a receive nobody matches. */
  MPI_Request rq;
  OK(MPI_Irecv(&got, 1, MPI_INT, left, 999, w, &rq));
  OK(MPI_Cancel(&rq));
  OK(MPI_Wait(&rq, &st));
  OK(MPI_Test_cancelled(&st, &flag));
  CHECK(flag, "receive not cancelled");

  free(msg);
  free(in);
  OK(MPI_Finalize());
  if (rank == 0) printf("p2p_core: OK (%d ranks)\n", size);
  return 0;
}
