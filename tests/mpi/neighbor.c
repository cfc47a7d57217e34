/* neighbor: a distributed graph built with MPI_Dist_graph_create_adjacent
 * (every rank sends to rank + 1 and rank + 2, receives from rank - 1 and
 * rank - 2, weighted), read back with MPI_Dist_graph_neighbors_count and
 * MPI_Dist_graph_neighbors, and every neighbourhood collective on it,
 * blocking and non-blocking: MPI_(I)neighbor_allgather(v) and
 * MPI_(I)neighbor_alltoall(v,w). Block k of the receive buffer comes from
 * sources[k]; block j of the send buffer goes to destinations[j]; here the
 * k-th source's k-th destination is this rank, which the checks use.
 * Then MPI_Neighbor_allgather on a Cartesian communicator. */
#include "mpitest.h"

static int rank, size, nb;

#define COLL(blocking, nonblocking)       \
  do {                                    \
    if (nb) {                             \
      MPI_Request rq_ = MPI_REQUEST_NULL; \
      nonblocking;                        \
      MPI_Wait(&rq_, MPI_STATUS_IGNORE);  \
    } else {                              \
      blocking;                           \
    }                                     \
  } while (0)

static int count_of(int s, int j) {
  return 1 + (s + j) % 3;
} /* alltoallv: s to its j-th */

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  int src[2] = {(rank + size - 1) % size, (rank + size - 2) % size};
  int dst[2] = {(rank + 1) % size, (rank + 2) % size};
  int sw[2] = {10 + src[0], 20 + src[1]}, dw[2] = {10 + rank, 20 + rank};
  MPI_Comm g;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, sw, 2, dst, dw,
                                 MPI_INFO_NULL, 0, &g);
  int indeg = -1, outdeg = -1, weighted = -1;
  MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted);
  CHECK_EQ(indeg, 2);
  CHECK_EQ(outdeg, 2);
  CHECK_EQ(weighted, 1);
  int s2[2], sw2[2], d2[2], dw2[2];
  MPI_Dist_graph_neighbors(g, 2, s2, sw2, 2, d2, dw2);
  for (int k = 0; k < 2; k++) { /* in the order given */
    CHECK_EQ(s2[k], src[k]);
    CHECK_EQ(sw2[k], sw[k]);
    CHECK_EQ(d2[k], dst[k]);
    CHECK_EQ(dw2[k], dw[k]);
  }

  for (nb = 0; nb < 2; nb++) {
    /* allgather: [rank, rank * 10 + nb] to both */
    int mine[2] = {rank, rank * 10 + nb}, got[4] = {-1, -1, -1, -1};
    COLL(MPI_Neighbor_allgather(mine, 2, MPI_INT, got, 2, MPI_INT, g),
         MPI_Ineighbor_allgather(mine, 2, MPI_INT, got, 2, MPI_INT, g, &rq_));
    for (int k = 0; k < 2; k++) {
      CHECK_EQ(got[2 * k], src[k]);
      CHECK_EQ(got[2 * k + 1], src[k] * 10 + nb);
    }

    /* allgatherv: s sends s % 3 + 1 ints; block k at offset 5k */
    int vals[3], rc[2], rd[2] = {0, 5}, gv[10];
    for (int i = 0; i < 3; i++) vals[i] = rank * 100 + i + nb;
    for (int k = 0; k < 2; k++) rc[k] = src[k] % 3 + 1;
    for (int i = 0; i < 10; i++) gv[i] = -1;
    COLL(MPI_Neighbor_allgatherv(vals, rank % 3 + 1, MPI_INT, gv, rc, rd,
                                 MPI_INT, g),
         MPI_Ineighbor_allgatherv(vals, rank % 3 + 1, MPI_INT, gv, rc, rd,
                                  MPI_INT, g, &rq_));
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < 5; i++)
        CHECK_EQ(gv[5 * k + i], i < rc[k] ? src[k] * 100 + i + nb : -1);

    /* alltoall: block j (3 ints) to destination j */
    int sb[6], rb[6];
    for (int j = 0; j < 2; j++)
      for (int i = 0; i < 3; i++) sb[3 * j + i] = rank * 1000 + j * 10 + i + nb;
    COLL(MPI_Neighbor_alltoall(sb, 3, MPI_INT, rb, 3, MPI_INT, g),
         MPI_Ineighbor_alltoall(sb, 3, MPI_INT, rb, 3, MPI_INT, g, &rq_));
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < 3; i++)
        CHECK_EQ(rb[3 * k + i], src[k] * 1000 + k * 10 + i + nb);

    /* alltoallv: count_of(rank, j) ints to destination j */
    int sc[2], sd[2] = {0, 4}, vc[2], vd[2] = {0, 4}, vs[8], vr[8];
    for (int j = 0; j < 2; j++) {
      sc[j] = count_of(rank, j);
      vc[j] = count_of(src[j], j);
      for (int i = 0; i < 4; i++) vs[4 * j + i] = rank * 1000 + j * 10 + i + nb;
    }
    for (int i = 0; i < 8; i++) vr[i] = -1;
    COLL(MPI_Neighbor_alltoallv(vs, sc, sd, MPI_INT, vr, vc, vd, MPI_INT, g),
         MPI_Ineighbor_alltoallv(vs, sc, sd, MPI_INT, vr, vc, vd, MPI_INT, g,
                                 &rq_));
    for (int k = 0; k < 2; k++)
      for (int i = 0; i < 4; i++)
        CHECK_EQ(vr[4 * k + i],
                 i < vc[k] ? src[k] * 1000 + k * 10 + i + nb : -1);

    /* alltoallw: 2 ints to the first destination, 1 double to the
     * second; byte displacements 0 and 8 */
    char ws[16], wr[16];
    int wc[2] = {2, 1};
    MPI_Aint wd[2] = {0, 8};
    MPI_Datatype wt[2] = {MPI_INT, MPI_DOUBLE};
    int two[2] = {rank, -rank - nb};
    double one = rank * 0.5 + nb;
    memcpy(ws, two, 8);
    memcpy(ws + 8, &one, 8);
    memset(wr, 0, sizeof wr);
    COLL(MPI_Neighbor_alltoallw(ws, wc, wd, wt, wr, wc, wd, wt, g),
         MPI_Ineighbor_alltoallw(ws, wc, wd, wt, wr, wc, wd, wt, g, &rq_));
    memcpy(two, wr, 8);
    memcpy(&one, wr + 8, 8);
    CHECK_EQ(two[0], src[0]);
    CHECK_EQ(two[1], -src[0] - nb);
    CHECK(one == src[1] * 0.5 + nb);
  }

  MPI_Comm_free(&g);

  /* a Cartesian grid (dimension 0 periodic, 1 not) as stencil codes use
   * it: receive block 2d is from the -1 neighbour of dimension d, block
   * 2d + 1 from the +1 one; MPI_PROC_NULL blocks stay untouched */
  int dims[2] = {0, 0}, periods[2] = {1, 0}, nbr[4], cg[8];
  MPI_Comm cart;
  MPI_Dims_create(size, 2, dims);
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  MPI_Cart_shift(cart, 0, 1, &nbr[0], &nbr[1]);
  MPI_Cart_shift(cart, 1, 1, &nbr[2], &nbr[3]);
  int crank, me[2];
  MPI_Comm_rank(cart, &crank);
  me[0] = crank;
  me[1] = -crank;
  for (int i = 0; i < 8; i++) cg[i] = -99;
  MPI_Neighbor_allgather(me, 2, MPI_INT, cg, 2, MPI_INT, cart);
  for (int k = 0; k < 4; k++) {
    CHECK_EQ(cg[2 * k], nbr[k] == MPI_PROC_NULL ? -99 : nbr[k]);
    CHECK_EQ(cg[2 * k + 1], nbr[k] == MPI_PROC_NULL ? -99 : -nbr[k]);
  }
  MPI_Comm_free(&cart);
  mt_ok("neighbor");
  MPI_Finalize();
  return 0;
}
