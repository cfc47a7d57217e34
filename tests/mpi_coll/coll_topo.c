/* coll_topo: the collectives the layer builds from point-to-point
 * messages, blocking and non-blocking (ct_nb), bit-exact:
 *  - neighbourhood collectives on Cartesian topologies: a periodic ring
 *    (at np 2 both neighbours are the same process, so the block sent up
 *    must arrive as the one received from below), a non-periodic line
 *    (MPI_PROC_NULL ends leave their blocks untouched), a periodic 2-D
 *    grid and a grid with a dimension of size 1 (the process is its own
 *    neighbour), checked against MPI_Cart_shift;
 *  - a distributed graph with a self loop, with MPI_Neighbor_alltoallw
 *    mixing a vector against MPI_INTs;
 *  - MPI_Alltoallw with per-peer types, in place too;
 *  - the error classes of bad collective arguments under
 *    MPI_ERRORS_RETURN. */
#include "ct.h"

#define UNTOUCHED (-5)

/* A periodic dimension of size 1 or 2 makes one process both neighbours:
 * the block sent down must arrive as the one received from above (MPI 4.1
 * spells this out; nexar's MPI keeps the directions apart). Open MPI 4.1
 * and MPICH 4.0 match those messages in FIFO order, so with them such
 * dimensions are made non-periodic. */
static int periodic(int dim) {
  return CT_NEXAR || dim > 2;
}

/* Block k sent to neighbour k is 100 x rank + k. */
static void cart_check(MPI_Comm cart) {
  int ndims, me;
  MPI_Comm_rank(cart, &me);
  MPI_Cartdim_get(cart, &ndims);
  int m = 2 * ndims, nb[16], snd[16], rcv[16], one[16], dsp[16];
  for (int d = 0; d < ndims; d++)
    MPI_Cart_shift(cart, d, 1, &nb[2 * d], &nb[2 * d + 1]);
  for (int k = 0; k < m; k++) {
    snd[k] = 100 * me + k;
    rcv[k] = UNTOUCHED;
    one[k] = 1;
    dsp[k] = m - 1 - k;
  }
  CT_RUN(
      MPI_Neighbor_alltoall(snd, 1, MPI_INT, rcv, 1, MPI_INT, cart),
      MPI_Ineighbor_alltoall(snd, 1, MPI_INT, rcv, 1, MPI_INT, cart, &ct_rq));
  /* Block k comes from nb[k], which sent it towards us: its block k ^ 1. */
  for (int k = 0; k < m; k++)
    CT_EQ(rcv[k], nb[k] == MPI_PROC_NULL ? UNTOUCHED : 100 * nb[k] + (k ^ 1));
  for (int k = 0; k < m; k++) rcv[k] = UNTOUCHED;
  int mine = 7 * me + 1;
  CT_RUN(MPI_Neighbor_allgather(&mine, 1, MPI_INT, rcv, 1, MPI_INT, cart),
         MPI_Ineighbor_allgather(&mine, 1, MPI_INT, rcv, 1, MPI_INT, cart,
                                 &ct_rq));
  for (int k = 0; k < m; k++)
    CT_EQ(rcv[k], nb[k] == MPI_PROC_NULL ? UNTOUCHED : 7 * nb[k] + 1);
  for (int k = 0; k < m; k++) rcv[k] = UNTOUCHED;
  CT_RUN(
      MPI_Neighbor_allgatherv(&mine, 1, MPI_INT, rcv, one, dsp, MPI_INT, cart),
      MPI_Ineighbor_allgatherv(&mine, 1, MPI_INT, rcv, one, dsp, MPI_INT, cart,
                               &ct_rq));
  for (int k = 0; k < m; k++)
    CT_EQ(rcv[m - 1 - k], nb[k] == MPI_PROC_NULL ? UNTOUCHED : 7 * nb[k] + 1);
  for (int k = 0; k < m; k++) rcv[k] = UNTOUCHED;
  CT_RUN(MPI_Neighbor_alltoallv(snd, one, dsp, MPI_INT, rcv, one, dsp, MPI_INT,
                                cart),
         MPI_Ineighbor_alltoallv(snd, one, dsp, MPI_INT, rcv, one, dsp, MPI_INT,
                                 cart, &ct_rq));
  /* Block k went from snd[m - 1 - k] and lands in rcv[m - 1 - k]. */
  for (int k = 0; k < m; k++)
    CT_EQ(rcv[m - 1 - k],
          nb[k] == MPI_PROC_NULL ? UNTOUCHED : 100 * nb[k] + (m - 1 - (k ^ 1)));
}

static void cartesian(void) {
  int n = ct_size, dims[2] = {n, 1}, periods[2];
  MPI_Comm c;
  for (int p = 1; p >= 0; p--) { /* ring, then line */
    periods[0] = p && periodic(n);
    CT_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &c));
    cart_check(c);
    MPI_Comm_free(&c);
  }
  periods[0] = periodic(n);
  periods[1] = periodic(1);
  CT_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &c));
  cart_check(c); /* dimension 1 has size 1: self neighbours */
  MPI_Comm_free(&c);
  dims[0] = dims[1] = 0;
  MPI_Dims_create(n, 2, dims);
  periods[0] = periodic(dims[0]);
  periods[1] = periodic(dims[1]);
  CT_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &c));
  cart_check(c);
  MPI_Comm_free(&c);
}

/* Destinations r + 1 and r itself; sources r - 1 and r. */
static void graph(void) {
  int n = ct_size, me = ct_rank, up = (me + 1) % n, down = (me + n - 1) % n;
  int dst[2] = {up, me}, src[2] = {down, me};
  /* One process: both edges are self loops, matched in list order by
   * nexar's MPI (MPICH 4.0 does not). */
  if (n == 1 && !CT_NEXAR) return;
  MPI_Comm g;
  CT_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, MPI_UNWEIGHTED,
                                        2, dst, MPI_UNWEIGHTED, MPI_INFO_NULL,
                                        0, &g));
  int snd[2], rcv[2], from[2] = {down, me};
  for (int k = 0; k < 2; k++) snd[k] = 10 * me + k;
  CT_RUN(MPI_Neighbor_alltoall(snd, 1, MPI_INT, rcv, 1, MPI_INT, g),
         MPI_Ineighbor_alltoall(snd, 1, MPI_INT, rcv, 1, MPI_INT, g, &ct_rq));
  for (int k = 0; k < 2; k++) CT_EQ(rcv[k], 10 * from[k] + k);
  int two[2] = {1, 2}, at[2] = {1, 0},
      ag[3] = {UNTOUCHED, UNTOUCHED, UNTOUCHED};
  CT_RUN(
      MPI_Neighbor_allgatherv(&snd[1], 1, MPI_INT, ag, two + 0, at, MPI_INT, g),
      MPI_Ineighbor_allgatherv(&snd[1], 1, MPI_INT, ag, two + 0, at, MPI_INT, g,
                               &ct_rq));
  CT_EQ(ag[1], 10 * down + 1);
  CT_EQ(ag[0], 10 * me + 1);
  CT_EQ(ag[2], UNTOUCHED);
  /* Edge 0 carries a vector of 3 ints (stride 2) received as 3 MPI_INTs;
   * edge 1 (the self loop) one MPI_INT; byte displacements. */
  MPI_Datatype vec;
  MPI_Type_vector(3, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  int sv[8], rv[8];
  for (int i = 0; i < 8; i++) {
    sv[i] = 1000 * me + i;
    rv[i] = UNTOUCHED;
  }
  int sc[2] = {1, 1}, rc[2] = {3, 1};
  MPI_Aint sd[2] = {2 * sizeof(int), 7 * sizeof(int)};
  MPI_Aint rd[2] = {0, 5 * sizeof(int)};
  MPI_Datatype st[2] = {vec, MPI_INT}, rt[2] = {MPI_INT, MPI_INT};
  CT_RUN(MPI_Neighbor_alltoallw(sv, sc, sd, st, rv, rc, rd, rt, g),
         MPI_Ineighbor_alltoallw(sv, sc, sd, st, rv, rc, rd, rt, g, &ct_rq));
  CT_EQ(rv[0], 1000 * down + 2);
  CT_EQ(rv[1], 1000 * down + 4);
  CT_EQ(rv[2], 1000 * down + 6);
  CT_EQ(rv[3], UNTOUCHED);
  CT_EQ(rv[5], 1000 * me + 7);
  MPI_Type_free(&vec);
  MPI_Comm_free(&g);
}

/* Alltoallw: the block between ranks i and j is one MPI_INT (100 x
 * sender + receiver) when i + j is even, else two MPI_SHORTs (sender,
 * receiver); sent from byte n - 1 - j ints in, received at j ints in. */
static void alltoallw(void) {
  int n = ct_size, me = ct_rank;
  int *cnt = malloc(sizeof(int) * 3 * n), *sd = cnt + n, *rd = cnt + 2 * n;
  MPI_Datatype *t = malloc(sizeof(MPI_Datatype) * n);
  int *sbuf = malloc(sizeof(int) * n), *rbuf = malloc(sizeof(int) * n);
  for (int j = 0; j < n; j++) {
    int odd = (me + j) % 2;
    t[j] = odd ? MPI_SHORT : MPI_INT;
    cnt[j] = odd ? 2 : 1;
    sd[j] = (int)sizeof(int) * (n - 1 - j);
    rd[j] = (int)sizeof(int) * j;
    short pair[2] = {(short)me, (short)j};
    int v = 100 * me + j;
    memcpy(&sbuf[n - 1 - j], odd ? (void *)pair : (void *)&v, sizeof(int));
  }
  /* MPICH 4.0's MPI_Ialltoallw fails in place. */
  for (int ip = 0; ip < 2 - (ct_nb && !CT_NEXAR); ip++) {
    for (int j = 0; j < n; j++) /* in place: what goes out is in rbuf */
      memcpy(&rbuf[j], &sbuf[n - 1 - j], sizeof(int));
    CT_RUN(MPI_Alltoallw(ip ? MPI_IN_PLACE : sbuf, cnt, sd, t, rbuf, cnt, rd, t,
                         MPI_COMM_WORLD),
           MPI_Ialltoallw(ip ? MPI_IN_PLACE : sbuf, cnt, sd, t, rbuf, cnt, rd,
                          t, MPI_COMM_WORLD, &ct_rq));
    for (int i = 0; i < n; i++) {
      short *s = (short *)&rbuf[i];
      if ((me + i) % 2 == 0) {
        CT_EQ(rbuf[i], 100 * i + me);
      } else {
        CT_EQ(s[0], i);
        CT_EQ(s[1], me);
      }
    }
  }
  free(cnt);
  free(t);
  free(sbuf);
  free(rbuf);
}

static __attribute__((unused)) void errors(void) {
  int n = ct_size, x = 1, y, cls;
#define CT_CLASS(call, want)    \
  do {                          \
    int rc_ = (call);           \
    MPI_Error_class(rc_, &cls); \
    CT_EQ(cls, want);           \
  } while (0)
  CT_CLASS(MPI_Bcast(&x, 1, MPI_INT, n, MPI_COMM_WORLD), MPI_ERR_ROOT);
  CT_CLASS(MPI_Allreduce(&x, &y, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
           MPI_ERR_COUNT);
  CT_CLASS(MPI_Bcast(&x, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD),
           MPI_ERR_TYPE);
  CT_CLASS(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD),
           MPI_ERR_OP);
  double d = 1, e;
  CT_CLASS(MPI_Allreduce(&d, &e, 1, MPI_DOUBLE, MPI_LAND, MPI_COMM_WORLD),
           MPI_ERR_OP);
  CT_CLASS(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM);
  /* Open MPI 4.1 answers MPI_ERR_INTERN here. */
  if (CT_NEXAR)
    CT_CLASS(
        MPI_Neighbor_allgather(&x, 1, MPI_INT, &y, 1, MPI_INT, MPI_COMM_WORLD),
        MPI_ERR_TOPOLOGY);
  if (CT_NEXAR) { /* what Open MPI 4.1 does not check */
    int cnt[64] = {0};
    CT_CLASS(
        MPI_Alltoallw(&x, cnt, cnt, NULL, &y, cnt, cnt, NULL, MPI_COMM_WORLD),
        MPI_ERR_ARG);
    CT_CLASS(MPI_Allreduce(NULL, NULL, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
             MPI_ERR_BUFFER);
  }
  MPI_Request rq;
  CT_CLASS(MPI_Ireduce(&x, &y, 1, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD, &rq),
           MPI_ERR_ROOT);
  /* The communicator still works. */
  CT_MPI(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CT_EQ(y, n);
}

int main(int argc, char **argv) {
  ct_init(&argc, &argv);
  for (ct_nb = 0; ct_nb < 2; ct_nb++) {
    cartesian();
    graph();
    alltoallw();
  }
#if CT_NEXAR || defined(OPEN_MPI)
  errors(); /* Debian's MPICH 4.0 is built without argument checks */
#endif
  ct_ok("coll_topo");
  MPI_Finalize();
  return 0;
}
