/* Point-to-point: a ring with MPI_ANY_SOURCE and MPI_Get_count, every send
 * mode (standard, synchronous, ready, buffered with MPI_Buffer_attach /
 * detach), sendrecv_replace, MPI_PROC_NULL, persistent requests restarted
 * several times, and the completion family (Test, Testany, Waitany,
 * Waitsome, Testsome, Testall, Request_get_status, Request_free). Values
 * are checked exactly. Needs 2 or more ranks. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define N 1000
#define ITERS 5

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  int rank, size;
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs 2 ranks, has %d", size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Comm w = MPI_COMM_WORLD;
  MPI_Status st;

  /* Ring: a message of rank + 1 doubles from the left, any source. */
  double out[64], in[64];
  for (int i = 0; i < 64; i++) out[i] = rank * 100.0 + i;
  MPI_Request rq;
  OK(MPI_Irecv(in, 64, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, w, &rq));
  OK(MPI_Send(out, rank + 1, MPI_DOUBLE, right, 40 + rank, w));
  OK(MPI_Wait(&rq, &st));
  CHECK(rq == MPI_REQUEST_NULL, "request not freed");
  int count;
  OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
  CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 40 + left && count == left + 1,
        "source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
  OK(MPI_Get_count(&st, MPI_BYTE, &count));
  CHECK(count == 8 * (left + 1), "bytes %d", count);
  for (int i = 0; i <= left; i++)
    CHECK(in[i] == left * 100.0 + i, "ring value %d = %g", i, in[i]);

  /* Synchronous and large: N ints both ways with Ssend / Issend. */
  int *big = malloc(N * sizeof(int)), *bigin = malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) big[i] = rank * N + i;
  OK(MPI_Irecv(bigin, N, MPI_INT, left, 5, w, &rq));
  if (rank % 2)
    OK(MPI_Ssend(big, N, MPI_INT, right, 5, w));
  else {
    MPI_Request sq;
    OK(MPI_Issend(big, N, MPI_INT, right, 5, w, &sq));
    OK(MPI_Wait(&sq, MPI_STATUS_IGNORE));
  }
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  for (int i = 0; i < N; i++)
    CHECK(bigin[i] == left * N + i, "ssend value %d", i);

  /* Ready mode: the receive is posted, then the sender is told. */
  int rv = -1, token = 0, val = rank + 7;
  OK(MPI_Irecv(&rv, 1, MPI_INT, left, 6, w, &rq));
  OK(MPI_Send(&token, 0, MPI_INT, left, 7, w));
  OK(MPI_Recv(&token, 0, MPI_INT, right, 7, w, MPI_STATUS_IGNORE));
  OK(MPI_Rsend(&val, 1, MPI_INT, right, 6, w));
  OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  CHECK(rv == left + 7, "rsend value %d", rv);

  /* Buffered: three messages through an attached buffer. */
  int bsize = 3 * (int)(sizeof(int) * 10 + MPI_BSEND_OVERHEAD);
  char *buf = malloc(bsize);
  OK(MPI_Buffer_attach(buf, bsize));
  int bvals[3][10];
  for (int m = 0; m < 3; m++) {
    for (int i = 0; i < 10; i++) bvals[m][i] = rank * 1000 + m * 10 + i;
    OK(MPI_Bsend(bvals[m], 10, MPI_INT, right, 20 + m, w));
    memset(bvals[m], 0, sizeof bvals[m]); /* reusable at once */
  }
  MPI_Errhandler_set(w, MPI_ERRORS_RETURN);
  int full = MPI_Bsend(big, N, MPI_INT, right, 30, w);
  CHECK(full == MPI_ERR_BUFFER, "bsend larger than the buffer: %d", full);
  MPI_Comm_set_errhandler(w, MPI_ERRORS_ARE_FATAL);
  for (int m = 2; m >= 0; m--) {
    int r[10];
    OK(MPI_Recv(r, 10, MPI_INT, left, 20 + m, w, MPI_STATUS_IGNORE));
    for (int i = 0; i < 10; i++)
      CHECK(r[i] == left * 1000 + m * 10 + i, "bsend value %d/%d", m, i);
  }
  void *dbuf;
  int dsize;
  OK(MPI_Buffer_detach(&dbuf, &dsize));
  CHECK(dbuf == buf && dsize == bsize, "detach");
  free(buf);

  /* Sendrecv_replace around the ring, and MPI_PROC_NULL. */
  int rep[4] = {rank, rank, rank, rank};
  OK(MPI_Sendrecv_replace(rep, 4, MPI_INT, right, 8, left, 8, w, &st));
  CHECK(rep[0] == left && rep[3] == left && st.MPI_SOURCE == left, "replace");
  OK(MPI_Recv(rep, 4, MPI_INT, MPI_PROC_NULL, 1, w, &st));
  OK(MPI_Get_count(&st, MPI_INT, &count));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG &&
            count == 0 && rep[0] == left,
        "proc null");
  OK(MPI_Send(rep, 4, MPI_INT, MPI_PROC_NULL, 1, w));

  /* Persistent ring, restarted ITERS times. */
  int pout = 0, pin = -1;
  MPI_Request pr[2];
  OK(MPI_Recv_init(&pin, 1, MPI_INT, left, 9, w, &pr[0]));
  OK(MPI_Send_init(&pout, 1, MPI_INT, right, 9, w, &pr[1]));
  for (int it = 0; it < ITERS; it++) {
    pout = rank * 100 + it;
    OK(MPI_Startall(2, pr));
    MPI_Status sts[2];
    OK(MPI_Waitall(2, pr, sts));
    CHECK(pr[0] != MPI_REQUEST_NULL, "persistent request freed");
    CHECK(pin == left * 100 + it && sts[0].MPI_SOURCE == left, "iter %d", it);
  }
  OK(MPI_Wait(&pr[0], &st)); /* inactive: returns at once */
  OK(MPI_Request_free(&pr[0]));
  OK(MPI_Request_free(&pr[1]));
  CHECK(pr[0] == MPI_REQUEST_NULL, "request_free");

  /* Completion family over 4 receives from the left, tags 50..53, sent in
   * reverse order. */
  int vals[4] = {-1, -1, -1, -1}, seen[4] = {0};
  MPI_Request rs[4];
  for (int i = 0; i < 4; i++)
    OK(MPI_Irecv(&vals[i], 1, MPI_INT, left, 50 + i, w, &rs[i]));
  int flag = 1;
  OK(MPI_Testall(4, rs, &flag, MPI_STATUSES_IGNORE));
  CHECK(!flag, "testall before any send");
  OK(MPI_Request_get_status(rs[0], &flag, &st));
  CHECK(!flag, "get_status before the send");
  /* The right neighbour sends only once this rank has tested. */
  OK(MPI_Send(&token, 0, MPI_INT, left, 49, w));
  OK(MPI_Recv(&token, 0, MPI_INT, right, 49, w, MPI_STATUS_IGNORE));
  for (int i = 3; i >= 0; i--) {
    int v = rank * 10 + i;
    OK(MPI_Send(&v, 1, MPI_INT, right, 50 + i, w));
  }
  int idx;
  OK(MPI_Waitany(4, rs, &idx, &st));
  CHECK(idx >= 0 && idx < 4 && st.MPI_TAG == 50 + idx, "waitany %d", idx);
  seen[idx] = 1;
  int done = 1;
  while (done < 4) {
    int outc, ids[4];
    MPI_Status sts[4];
    OK(MPI_Waitsome(4, rs, &outc, ids, sts));
    CHECK(outc >= 1, "waitsome %d", outc);
    for (int k = 0; k < outc; k++) {
      CHECK(!seen[ids[k]] && sts[k].MPI_TAG == 50 + ids[k], "waitsome ids");
      seen[ids[k]] = 1;
      done++;
    }
  }
  for (int i = 0; i < 4; i++) CHECK(vals[i] == left * 10 + i, "vals %d", i);
  OK(MPI_Testany(4, rs, &idx, &flag, &st));
  CHECK(flag && idx == MPI_UNDEFINED, "testany of null requests");
  int outc;
  OK(MPI_Testsome(4, rs, &outc, &idx, MPI_STATUSES_IGNORE));
  CHECK(outc == MPI_UNDEFINED, "testsome of null requests: %d", outc);

  /* MPI_Waitany blocking before any message came: tag 71 is sent after
   * the receiver's go, tag 70 once the receiver has seen 71. */
  int two_v[2] = {-1, -1};
  MPI_Request two[2];
  OK(MPI_Irecv(&two_v[0], 1, MPI_INT, left, 70, w, &two[0]));
  OK(MPI_Irecv(&two_v[1], 1, MPI_INT, left, 71, w, &two[1]));
  OK(MPI_Send(&token, 0, MPI_INT, left, 69, w));
  OK(MPI_Recv(&token, 0, MPI_INT, right, 69, w, MPI_STATUS_IGNORE));
  OK(MPI_Send(&rank, 1, MPI_INT, right, 71, w));
  OK(MPI_Waitany(2, two, &idx, &st));
  CHECK(idx == 1 && two_v[1] == left && st.MPI_TAG == 71, "waitany 1: %d", idx);
  OK(MPI_Send(&token, 0, MPI_INT, left, 68, w));
  OK(MPI_Recv(&token, 0, MPI_INT, right, 68, w, MPI_STATUS_IGNORE));
  OK(MPI_Send(&rank, 1, MPI_INT, right, 70, w));
  OK(MPI_Waitany(2, two, &idx, &st));
  CHECK(idx == 0 && two_v[0] == left && two[0] == MPI_REQUEST_NULL,
        "waitany 0: %d", idx);

  /* MPI_Test polled to completion, and a request freed while active. */
  int tv = -1, one = rank;
  OK(MPI_Irecv(&tv, 1, MPI_INT, left, 60, w, &rq));
  MPI_Request fr;
  OK(MPI_Isend(&one, 1, MPI_INT, right, 60, w, &fr));
  OK(MPI_Request_free(&fr));
  flag = 0;
  while (!flag) OK(MPI_Test(&rq, &flag, &st));
  CHECK(tv == left && rq == MPI_REQUEST_NULL, "test value %d", tv);

  free(big);
  free(bigin);
  OK(MPI_Finalize());
  if (rank == 0) printf("p2p: OK (%d ranks)\n", size);
  return 0;
}
