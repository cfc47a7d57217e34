/* p2p: the environment and point-to-point calls beyond plain send/recv.
 * MPI_Init_thread and the thread levels, MPI_Initialized / MPI_Finalized,
 * MPI_Wtime / MPI_Wtick, MPI_Get_processor_name, MPI_Get_version,
 * MPI_Get_library_version; MPI_Isend / MPI_Irecv completed by
 * MPI_Waitall, MPI_Waitany, MPI_Waitsome, MPI_Test, MPI_Testall,
 * MPI_Testany, MPI_Testsome; MPI_Request_free; MPI_Cancel of a receive and
 * MPI_Test_cancelled; MPI_Ssend / MPI_Issend (not complete before the
 * match), MPI_Rsend, MPI_Bsend with MPI_Buffer_attach / detach;
 * MPI_Sendrecv_replace; persistent MPI_Send_init / MPI_Recv_init with
 * MPI_Start and MPI_Startall. */
#include "mpitest.h"

static int rank, size;

static void environment(int provided) {
  int flag = 0, level = -1, v = 0, sv = -1, len = -1;
  CHECK(MPI_THREAD_SINGLE < MPI_THREAD_FUNNELED &&
        MPI_THREAD_FUNNELED < MPI_THREAD_SERIALIZED &&
        MPI_THREAD_SERIALIZED < MPI_THREAD_MULTIPLE);
  CHECK(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE);
  MPI_Query_thread(&level);
  CHECK_EQ(level, provided);
  MPI_Is_thread_main(&flag);
  CHECK_EQ(flag, 1);
  MPI_Initialized(&flag);
  CHECK_EQ(flag, 1);
  MPI_Finalized(&flag);
  CHECK_EQ(flag, 0);

  double t0 = MPI_Wtime(), tick = MPI_Wtick();
  CHECK(tick > 0 && tick <= 1e-3);
  double t1 = MPI_Wtime();
  CHECK(t1 >= t0);

  char name[MPI_MAX_PROCESSOR_NAME];
  memset(name, 'x', sizeof name);
  MPI_Get_processor_name(name, &len);
  CHECK(len > 0 && len < MPI_MAX_PROCESSOR_NAME);
  CHECK_EQ(strlen(name), len);

  MPI_Get_version(&v, &sv);
  CHECK_EQ(v, MPI_VERSION);
  CHECK_EQ(sv, MPI_SUBVERSION);
  CHECK(v >= 3);

  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  memset(lib, 'x', sizeof lib);
  MPI_Get_library_version(lib, &len);
  CHECK(len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING);
  /* Open MPI 4 counts the terminating NUL */
  CHECK(strlen(lib) == (size_t)len || strlen(lib) + 1 == (size_t)len);
  if (rank == 0)
    printf("p2p: MPI %d.%d, %.*s\n", v, sv, (int)strcspn(lib, "\n"), lib);
}

/* rank 0 receives one message from each other rank (tag = source) with
 * non-blocking receives completed by |how|: 0 waitany, 1 waitsome,
 * 2 testany, 3 testsome, 4 testall, 5 test each */
static void fan_in(int how) {
  MPI_Request rq[128];
  MPI_Status st[128];
  int val[128], done[128] = {0}, n = size - 1, left = size - 1;
  if (rank != 0) {
    int v = rank * 100 + how;
    MPI_Send(&v, 1, MPI_INT, 0, rank, MPI_COMM_WORLD);
    return;
  }
  for (int i = 0; i < n; i++)
    MPI_Irecv(&val[i], 1, MPI_INT, i + 1, i + 1, MPI_COMM_WORLD, &rq[i]);
  while (left > 0) {
    int idx = -1, cnt = 0, flag = 0, ids[128];
    CHECK_TIME();
    switch (how) {
      case 0:
        MPI_Waitany(n, rq, &idx, &st[0]);
        ids[0] = idx;
        cnt = 1;
        break;
      case 1:
        MPI_Waitsome(n, rq, &cnt, ids, st);
        CHECK(cnt >= 1);
        break;
      case 2:
        MPI_Testany(n, rq, &idx, &flag, &st[0]);
        if (flag) {
          ids[0] = idx;
          cnt = 1;
        }
        break;
      case 3:
        MPI_Testsome(n, rq, &cnt, ids, st);
        CHECK(cnt >= 0);
        break;
      case 4:
        MPI_Testall(n, rq, &flag, st);
        if (flag) {
          cnt = n;
          for (int i = 0; i < n; i++) ids[i] = i;
        }
        break;
      default:
        for (int i = 0; i < n; i++)
          if (!done[i]) {
            MPI_Test(&rq[i], &flag, &st[cnt]);
            if (flag) ids[cnt++] = i;
          }
    }
    for (int k = 0; k < cnt; k++) {
      int i = ids[k];
      CHECK(i >= 0 && i < n && !done[i]);
      CHECK(rq[i] == MPI_REQUEST_NULL);
      done[i] = 1;
      left--;
      CHECK_EQ(val[i], (i + 1) * 100 + how);
      CHECK_EQ(st[how == 4 ? i : k].MPI_SOURCE, i + 1);
      CHECK_EQ(st[how == 4 ? i : k].MPI_TAG, i + 1);
    }
  }
  /* nothing active: the "any"/"some" calls say MPI_UNDEFINED */
  int idx = 0, cnt = 0, flag = 0, ids[1];
  MPI_Waitany(n, rq, &idx, MPI_STATUS_IGNORE);
  CHECK_EQ(idx, MPI_UNDEFINED);
  MPI_Waitsome(n, rq, &cnt, ids, MPI_STATUSES_IGNORE);
  CHECK_EQ(cnt, MPI_UNDEFINED);
  MPI_Testany(n, rq, &idx, &flag, MPI_STATUS_IGNORE);
  CHECK_EQ(idx, MPI_UNDEFINED);
  CHECK_EQ(flag, 1);
}

static void modes(void) {
  int peer = rank ^ 1, v = -1;
  MPI_Status st;
  if (peer >= size) return;
  int lo = rank < peer;

  /* MPI_Ssend both ways; MPI_Issend that cannot finish before the peer,
   * which waits for a later message, posts its receive */
  if (lo) {
    int x = 10 + rank, go = 1, flag = 1;
    MPI_Request rq;
    MPI_Ssend(&x, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
    MPI_Recv(&v, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK_EQ(v, 10 + peer);
    MPI_Issend(&x, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, &rq);
    MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
    CHECK_EQ(flag, 0); /* not matched yet: the peer waits for tag 3 */
    MPI_Send(&go, 1, MPI_INT, peer, 3, MPI_COMM_WORLD);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
  } else {
    int x = 10 + rank, go = 0;
    MPI_Recv(&v, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK_EQ(v, 10 + peer);
    MPI_Ssend(&x, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
    MPI_Recv(&go, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK_EQ(go, 1);
    MPI_Recv(&v, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK_EQ(v, 10 + peer);
  }

  /* MPI_Rsend: the receive is posted before the pair's handshake */
  {
    MPI_Request rq;
    int x = 20 + rank, token = 0;
    MPI_Irecv(&v, 1, MPI_INT, peer, 4, MPI_COMM_WORLD, &rq);
    MPI_Sendrecv(&token, 1, MPI_INT, peer, 5, &token, 1, MPI_INT, peer, 5,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Rsend(&x, 1, MPI_INT, peer, 4, MPI_COMM_WORLD);
    MPI_Wait(&rq, &st);
    CHECK_EQ(v, 20 + peer);
    CHECK_EQ(st.MPI_SOURCE, peer);
  }

  /* MPI_Bsend: 8 messages of 1000 ints buffered, then detached */
  {
    int bytes = 8 * (1000 * (int)sizeof(int) + MPI_BSEND_OVERHEAD), dbytes = 0;
    char *buf = malloc(bytes), *dbuf = NULL;
    int *m = malloc(1000 * sizeof(int));
    CHECK(buf && m);
    MPI_Buffer_attach(buf, bytes);
    for (int k = 0; k < 8; k++) {
      for (int i = 0; i < 1000; i++) m[i] = rank * 100000 + k * 1000 + i;
      MPI_Bsend(m, 1000, MPI_INT, peer, 6, MPI_COMM_WORLD);
    }
    for (int k = 0; k < 8; k++) {
      MPI_Recv(m, 1000, MPI_INT, peer, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < 1000; i++)
        CHECK_EQ(m[i], peer * 100000 + k * 1000 + i);
    }
    MPI_Buffer_detach(&dbuf, &dbytes);
    CHECK(dbuf == buf);
    CHECK_EQ(dbytes, bytes);
    free(buf);
    free(m);
  }

  /* MPI_Request_free of a send: the receiver still gets it */
  {
    static int x[4];
    MPI_Request rq;
    int y[4];
    for (int i = 0; i < 4; i++) x[i] = rank * 4 + i;
    MPI_Isend(x, 4, MPI_INT, peer, 7, MPI_COMM_WORLD, &rq);
    MPI_Request_free(&rq);
    CHECK(rq == MPI_REQUEST_NULL);
    MPI_Recv(y, 4, MPI_INT, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < 4; i++) CHECK_EQ(y[i], peer * 4 + i);
    MPI_Sendrecv(&v, 0, MPI_INT, peer, 8, &v, 0, MPI_INT, peer, 8,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

static void cancel_and_replace(void) {
  /* a receive that nothing matches, cancelled */
  MPI_Request rq;
  MPI_Status st;
  int v = 0, flag = -1;
  MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 31999, MPI_COMM_WORLD, &rq);
  MPI_Cancel(&rq);
  MPI_Wait(&rq, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK_EQ(flag, 1);
  CHECK(rq == MPI_REQUEST_NULL);
  /* a receive that completed normally is not cancelled */
  int next = (rank + 1) % size, prev = (rank + size - 1) % size, x = rank;
  MPI_Irecv(&v, 1, MPI_INT, prev, 9, MPI_COMM_WORLD, &rq);
  MPI_Send(&x, 1, MPI_INT, next, 9, MPI_COMM_WORLD);
  MPI_Wait(&rq, &st);
  MPI_Test_cancelled(&st, &flag);
  CHECK_EQ(flag, 0);
  CHECK_EQ(v, prev);

  /* MPI_Sendrecv_replace: a 3-element array shifted round twice */
  int a[3] = {rank, 2 * rank, 3 * rank};
  for (int k = 1; k <= 2; k++) {
    MPI_Sendrecv_replace(a, 3, MPI_INT, next, 10, prev, 10, MPI_COMM_WORLD,
                         &st);
    int from = ((rank - k) % size + size) % size;
    CHECK_EQ(a[0], from);
    CHECK_EQ(a[2], 3 * from);
    CHECK_EQ(st.MPI_SOURCE, prev);
  }
}

/* persistent requests: a halo to both neighbours five times over */
static void persistent(void) {
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int out[2], in[2] = {-1, -1};
  MPI_Request rq[4];
  MPI_Send_init(&out[0], 1, MPI_INT, next, 11, MPI_COMM_WORLD, &rq[0]);
  MPI_Send_init(&out[1], 1, MPI_INT, prev, 12, MPI_COMM_WORLD, &rq[1]);
  MPI_Recv_init(&in[0], 1, MPI_INT, prev, 11, MPI_COMM_WORLD, &rq[2]);
  MPI_Recv_init(&in[1], 1, MPI_INT, next, 12, MPI_COMM_WORLD, &rq[3]);
  for (int it = 0; it < 5; it++) {
    out[0] = rank * 10 + it;
    out[1] = -(rank * 10 + it);
    if (it % 2) {
      MPI_Startall(4, rq);
    } else {
      for (int i = 3; i >= 0; i--) MPI_Start(&rq[i]);
    }
    MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
    CHECK(rq[0] != MPI_REQUEST_NULL); /* inactive, not freed */
    CHECK_EQ(in[0], prev * 10 + it);
    CHECK_EQ(in[1], -(next * 10 + it));
  }
  for (int i = 0; i < 4; i++) {
    MPI_Request_free(&rq[i]);
    CHECK(rq[i] == MPI_REQUEST_NULL);
  }
}

int main(int argc, char **argv) {
  int provided = -1, flag = 1;
  MPI_Initialized(&flag);
  CHECK_EQ(flag, 0);
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size <= 128);

  environment(provided);
  for (int how = 0; how < 6; how++) fan_in(how);
  modes();
  cancel_and_replace();
  persistent();

  /* MPI_Isend/MPI_Irecv both ways with MPI_Waitall and statuses */
  int next = (rank + 1) % size, prev = (rank + size - 1) % size,
      s[2] = {rank, rank}, r[2] = {-1, -1};
  MPI_Request rq[4];
  MPI_Status st[4];
  MPI_Irecv(&r[0], 1, MPI_INT, prev, 13, MPI_COMM_WORLD, &rq[0]);
  MPI_Irecv(&r[1], 1, MPI_INT, next, 14, MPI_COMM_WORLD, &rq[1]);
  MPI_Isend(&s[0], 1, MPI_INT, next, 13, MPI_COMM_WORLD, &rq[2]);
  MPI_Isend(&s[1], 1, MPI_INT, prev, 14, MPI_COMM_WORLD, &rq[3]);
  MPI_Waitall(4, rq, st);
  CHECK_EQ(r[0], prev);
  CHECK_EQ(r[1], next);
  CHECK_EQ(st[0].MPI_SOURCE, prev);
  CHECK_EQ(st[1].MPI_TAG, 14);

  mt_ok("p2p");
  MPI_Finalize();
  MPI_Finalized(&flag);
  CHECK_EQ(flag, 1);
  return 0;
}
