/* The point-to-point calls that need nexar's probe, synchronous send and
 * cancel (nexar_iprobe, nexar_probe, nexar_issend, nexar_cancel): a
 * message of unknown length received after MPI_Probe + MPI_Get_count,
 * MPI_Iprobe polled until a message is there (and it stays queued), an
 * MPI_Issend that completes only once the receive is posted, and
 * matched probes (MPI_Mprobe / MPI_Mrecv, MPI_Improbe / MPI_Imrecv) and
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
  MPI_Request rq0;

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

  /* Matched probe: MPI_Mprobe + MPI_Mrecv, MPI_Improbe + MPI_Imrecv. */
  int pair[2] = {rank, -rank}, pin[2] = {0, 0};
  MPI_Message m;
  OK(MPI_Isend(pair, 2, MPI_INT, right, 12, w, &sq));
  OK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, w, &m, &st));
  OK(MPI_Get_count(&st, MPI_INT, &count));
  CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 12 && count == 2, "mprobe");
  OK(MPI_Mrecv(pin, count, MPI_INT, &m, &st));
  CHECK(m == MPI_MESSAGE_NULL && pin[0] == left && pin[1] == -left, "mrecv");
  OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));
  OK(MPI_Isend(pair, 1, MPI_INT, right, 13, w, &sq));
  flag = 0;
  while (!flag) OK(MPI_Improbe(left, 13, w, &flag, &m, &st));
  OK(MPI_Imrecv(pin, 1, MPI_INT, &m, &rq0));
  OK(MPI_Wait(&rq0, &st));
  CHECK(pin[0] == left && st.MPI_TAG == 13, "imrecv %d", pin[0]);
  OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));
  OK(MPI_Mprobe(MPI_PROC_NULL, 0, w, &m, &st));
  CHECK(m == MPI_MESSAGE_NO_PROC, "mprobe of MPI_PROC_NULL");
  OK(MPI_Mrecv(pin, 1, MPI_INT, &m, &st));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "mrecv of MPI_MESSAGE_NO_PROC");

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
