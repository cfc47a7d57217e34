/* coll_progress: MPI's progress rule for the collectives the layer builds
 * from point-to-point messages. A pending non-blocking collective must
 * advance while its process is inside any MPI call, not only when its own
 * request is tested or waited for.
 *
 * Each case starts, on every rank, an MPI_Iallreduce with a user op, an
 * MPI_Ireduce with MPI_MAXLOC to the last rank (both need rank 0 to
 * forward data in a later round), an MPI_Ialltoallw and an
 * MPI_Ineighbor_alltoallw on a ring. Then rank 0 enters one blocking call
 * (or a loop of MPI_Test / MPI_Iprobe) that returns only once the last
 * rank has completed its MPI_Waitall on those requests, which needs rank
 * 0's later rounds: a process that does not advance its schedules inside
 * that call deadlocks, and each rank's op timeout ends the job (run.sh
 * sets NEXAR_OP_TIMEOUT_MS=20000). Every result is checked bit-exact.
 * "coll_progress K" runs case K only (C_COUNT: the threads). Last, under
 * MPI_THREAD_MULTIPLE, two threads of rank 0 sit in blocking calls at
 * once, both stepping the same schedules. */
#include <pthread.h>

#include "ct.h"

#define N 1000  /* ints of the user-op allreduce */
#define NLOC 64 /* pairs of the MAXLOC reduce */
#define TAG 77  /* the last rank's signal to rank 0 */
#define TAG2 78 /* its signal to rank 0's second thread */
#define THREAD_ROUNDS 10
#define SPIN_S 60.0 /* a test loop gives up after this */

enum {
  C_RECV,
  C_PROBE,
  C_IPROBE,
  C_WAIT,
  C_TEST,
  C_WAITANY,
  C_WAITSOME,
  C_SENDRECV,
  C_SSEND,
  C_BARRIER,   /* native collective on another communicator */
  C_ALLREDUCE, /* layer-built blocking collective on another communicator */
  C_COUNT
};

static const char *const names[C_COUNT] = {
    "MPI_Recv",      "MPI_Probe",   "MPI_Iprobe loop",        "MPI_Wait",
    "MPI_Test loop", "MPI_Waitany", "MPI_Waitsome",           "MPI_Sendrecv",
    "MPI_Ssend",     "MPI_Barrier", "MPI_Allreduce (user op)"};

static MPI_Op add_op;
static MPI_Comm dup_comm, ring;

static void add_fn(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((const int *)in)[i];
}

/* The collectives left pending, their buffers and requests. */
typedef struct pend {
  MPI_Request rq[4];
  int ar_in[N], ar_out[N];
  int loc_in[2 * NLOC], loc_out[2 * NLOC];
  int a2a_in[16], a2a_out[16];
  int nb[2], nb_in[2], nb_out[2];
} pend_t;

static int loc_val(int rank, int i) {
  return (rank * 5 + i) % 7;
}

static void pend_start(pend_t *p) {
  int n = ct_size, last = n - 1;
  for (int i = 0; i < N; i++) p->ar_in[i] = ct_rank * N + i;
  for (int i = 0; i < NLOC; i++) {
    p->loc_in[2 * i] = loc_val(ct_rank, i);
    p->loc_in[2 * i + 1] = ct_rank;
    p->loc_out[2 * i] = p->loc_out[2 * i + 1] = -1;
  }
  int one[16], disp[16];
  MPI_Datatype ints[16];
  for (int k = 0; k < n; k++) {
    p->a2a_in[k] = 100 * ct_rank + k;
    p->a2a_out[k] = -1;
    one[k] = 1;
    disp[k] = k * (int)sizeof(int);
    ints[k] = MPI_INT;
  }
  MPI_Aint adisp[2] = {0, sizeof(int)};
  int ones[2] = {1, 1};
  MPI_Datatype int2[2] = {MPI_INT, MPI_INT};
  MPI_Cart_shift(ring, 0, 1, &p->nb[0], &p->nb[1]);
  for (int k = 0; k < 2; k++) {
    p->nb_in[k] = 1000 * ct_rank + k;
    p->nb_out[k] = -1;
  }
  CT_MPI(MPI_Iallreduce(p->ar_in, p->ar_out, N, MPI_INT, add_op, MPI_COMM_WORLD,
                        &p->rq[0]));
  CT_MPI(MPI_Ireduce(p->loc_in, p->loc_out, NLOC, MPI_2INT, MPI_MAXLOC, last,
                     MPI_COMM_WORLD, &p->rq[1]));
  CT_MPI(MPI_Ialltoallw(p->a2a_in, one, disp, ints, p->a2a_out, one, disp, ints,
                        MPI_COMM_WORLD, &p->rq[2]));
  CT_MPI(MPI_Ineighbor_alltoallw(p->nb_in, ones, adisp, int2, p->nb_out, ones,
                                 adisp, int2, ring, &p->rq[3]));
}

static void pend_finish(pend_t *p) {
  int n = ct_size;
  CT_MPI(MPI_Waitall(4, p->rq, MPI_STATUSES_IGNORE));
  for (int i = 0; i < N; i++)
    CT_EQ(p->ar_out[i], N * (n * (n - 1) / 2) + n * i);
  for (int i = 0; ct_rank == n - 1 && i < NLOC; i++) {
    int best = -1, at = -1;
    for (int r = 0; r < n; r++)
      if (loc_val(r, i) > best) best = loc_val(r, i), at = r;
    CT_EQ(p->loc_out[2 * i], best);
    CT_EQ(p->loc_out[2 * i + 1], at);
  }
  for (int k = 0; k < n; k++) CT_EQ(p->a2a_out[k], 100 * k + ct_rank);
  /* Block k comes from nb[k], which sent it towards us: its block k ^ 1. */
  for (int k = 0; k < 2; k++)
    CT_EQ(p->nb_out[k],
          p->nb[k] == MPI_PROC_NULL ? -1 : 1000 * p->nb[k] + (k ^ 1));
}

/* Rank 0's blocking call of case |c|: it returns only after the last rank
 * (|last|) has run last_rank(c). */
static void rank0(int c, int last) {
  int v = -1, flag = 0, idx = -1, out = -1, x = 5, sum[N];
  MPI_Request rq = MPI_REQUEST_NULL;
  MPI_Status st;
  double t0 = MPI_Wtime();
  if (c >= C_WAIT && c <= C_WAITSOME)
    CT_MPI(MPI_Irecv(&v, 1, MPI_INT, last, TAG, MPI_COMM_WORLD, &rq));
  switch (c) {
    case C_RECV:
      CT_MPI(MPI_Recv(&v, 1, MPI_INT, last, TAG, MPI_COMM_WORLD, &st));
      break;
    case C_PROBE:
      CT_MPI(MPI_Probe(last, TAG, MPI_COMM_WORLD, &st));
      CT_EQ(st.MPI_SOURCE, last);
      CT_MPI(MPI_Recv(&v, 1, MPI_INT, last, TAG, MPI_COMM_WORLD, &st));
      break;
    case C_IPROBE:
      while (!flag && MPI_Wtime() - t0 < SPIN_S)
        CT_MPI(MPI_Iprobe(last, TAG, MPI_COMM_WORLD, &flag, &st));
      CT_EQ(flag, 1);
      CT_MPI(MPI_Recv(&v, 1, MPI_INT, last, TAG, MPI_COMM_WORLD, &st));
      break;
    case C_WAIT:
      CT_MPI(MPI_Wait(&rq, &st));
      break;
    case C_TEST:
      while (!flag && MPI_Wtime() - t0 < SPIN_S)
        CT_MPI(MPI_Test(&rq, &flag, &st));
      CT_EQ(flag, 1);
      break;
    case C_WAITANY:
      CT_MPI(MPI_Waitany(1, &rq, &idx, &st));
      CT_EQ(idx, 0);
      break;
    case C_WAITSOME:
      CT_MPI(MPI_Waitsome(1, &rq, &out, &idx, &st));
      CT_EQ(out, 1);
      break;
    case C_SENDRECV:
      CT_MPI(MPI_Sendrecv(&x, 1, MPI_INT, last, TAG, &v, 1, MPI_INT, last, TAG,
                          MPI_COMM_WORLD, &st));
      break;
    case C_SSEND:
      CT_MPI(MPI_Ssend(&x, 1, MPI_INT, last, TAG, MPI_COMM_WORLD));
      v = last;
      break;
    case C_BARRIER:
      CT_MPI(MPI_Barrier(dup_comm));
      v = last;
      break;
    default: /* C_ALLREDUCE */
      for (int i = 0; i < N; i++) sum[i] = i;
      CT_MPI(MPI_Allreduce(MPI_IN_PLACE, sum, N, MPI_INT, add_op, dup_comm));
      for (int i = 0; i < N; i++) CT_EQ(sum[i], ct_size * i);
      v = last;
      break;
  }
  CT_EQ(v, last);
}

/* The last rank's side of case |c|, once its pending requests completed. */
static void last_rank(int c) {
  int v = ct_rank, x = -1;
  switch (c) {
    case C_SENDRECV:
      CT_MPI(MPI_Sendrecv(&v, 1, MPI_INT, 0, TAG, &x, 1, MPI_INT, 0, TAG,
                          MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CT_EQ(x, 5);
      break;
    case C_SSEND:
      CT_MPI(
          MPI_Recv(&x, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CT_EQ(x, 5);
      break;
    case C_BARRIER:
    case C_ALLREDUCE:
      break; /* every rank but 0 does it in others() */
    default:
      CT_MPI(MPI_Send(&v, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD));
      break;
  }
}

/* Ranks 1 .. n-1 join rank 0's collective on dup_comm after their wait. */
static void others(int c) {
  int sum[N];
  if (c == C_BARRIER) CT_MPI(MPI_Barrier(dup_comm));
  if (c != C_ALLREDUCE) return;
  for (int i = 0; i < N; i++) sum[i] = i;
  CT_MPI(MPI_Allreduce(MPI_IN_PLACE, sum, N, MPI_INT, add_op, dup_comm));
  for (int i = 0; i < N; i++) CT_EQ(sum[i], ct_size * i);
}

static void run_case(int c) {
  static pend_t p;
  int last = ct_size - 1;
  pend_start(&p);
  if (ct_rank == 0) {
    rank0(c, last);
    pend_finish(&p);
  } else {
    pend_finish(&p);
    if (ct_rank == last) last_rank(c);
    others(c);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (ct_rank == 0) printf("  progress inside %s: ok\n", names[c]);
}

static void *recv_thread(void *arg) {
  CT_MPI(MPI_Recv(arg, 1, MPI_INT, ct_size - 1, TAG2, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE));
  return NULL;
}

/* Rank 0 waits in MPI_Probe on its main thread and in MPI_Recv on a
 * second one while the collectives are pending: both step them (one
 * thread at a time per schedule), and the last rank's signals arrive
 * only after its MPI_Waitall. */
static void threads(void) {
  static pend_t p;
  int last = ct_size - 1, v = -1, w = -1;
  for (int round = 0; round < THREAD_ROUNDS; round++) {
    pend_start(&p);
    if (ct_rank == 0) {
      pthread_t th;
      MPI_Status st;
      CT_EQ(pthread_create(&th, NULL, recv_thread, &v), 0);
      CT_MPI(MPI_Probe(last, TAG, MPI_COMM_WORLD, &st));
      CT_MPI(MPI_Recv(&w, 1, MPI_INT, last, TAG, MPI_COMM_WORLD, &st));
      CT_EQ(pthread_join(th, NULL), 0);
      CT_EQ(v, last);
      CT_EQ(w, last);
      pend_finish(&p);
    } else {
      pend_finish(&p);
      if (ct_rank == last) {
        CT_MPI(MPI_Send(&last, 1, MPI_INT, 0, TAG2, MPI_COMM_WORLD));
        CT_MPI(MPI_Send(&last, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD));
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (ct_rank == 0) printf("  progress from two threads at once: ok\n");
}

int main(int argc, char **argv) {
  ct_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
  if (ct_size > 16) {
    if (ct_rank == 0) printf("coll_progress: at most 16 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Op_create(add_fn, 1, &add_op);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup_comm);
  /* At np 2 both ring neighbours are one process (see coll_topo.c). */
  int dims[1] = {ct_size}, periods[1] = {CT_NEXAR || ct_size > 2};
  CT_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
  if (ct_size == 1) {
    static pend_t p;
    pend_start(&p);
    pend_finish(&p);
  }
  /* An argument runs that case only (for a look at one of them). */
  int only = argc > 1 ? atoi(argv[1]) : -1;
  for (int c = 0; ct_size > 1 && c < C_COUNT; c++)
    if (only < 0 || c == only) run_case(c);
  if (ct_size > 1 && (only < 0 || only == C_COUNT)) threads();
  (void)ct_nb;
  (void)ct_rq;
  MPI_Comm_free(&ring);
  MPI_Comm_free(&dup_comm);
  MPI_Op_free(&add_op);
  ct_ok("coll_progress");
  MPI_Finalize();
  return 0;
}
