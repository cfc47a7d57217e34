/*
 * MPI_Alltoallw and the neighbourhood collectives (MPI_Neighbor_allgather
 * (v), _alltoall(v, w)) with their MPI_I* forms, built by the layer from
 * point-to-point messages on c->cc: every receive and send of the call is
 * posted at once (one round of the schedule, coll_sched.c), each block
 * with its own datatype, so nothing is packed twice.
 *
 * Neighbours come from the communicator's topology: a Cartesian one has
 * 2 x ndims of them, in the order dimension 0 down, dimension 0 up,
 * dimension 1 down ... (MPI_PROC_NULL off a non-periodic edge); graph and
 * distributed-graph ones have their sources and destinations lists. On a
 * periodic dimension of size 1 or 2 both neighbours are the same process,
 * so each direction of each dimension has its own tag and the block sent
 * up is the one received from below.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_int.h"

/* One side (send or receive) of an exchange, block k of it being:
 *  SIDE_BLOCKS: |count| elements of |type| at buf + k x count elements;
 *  SIDE_SAME: the same |count| elements of |type| at buf for every k;
 *  SIDE_V: counts[k] elements of |type| at buf + idispls[k] elements;
 *  SIDE_W: counts[k] elements of types[k] at buf + idispls[k] or
 *          adispls[k] bytes (buf may be MPI_BOTTOM). */
enum { SIDE_BLOCKS, SIDE_SAME, SIDE_V, SIDE_W };

typedef struct side {
  int kind;
  const void *buf;
  int count;
  MPI_Datatype type;
  const int *counts;
  const int *idispls;
  const MPI_Aint *adispls;
  const MPI_Datatype *types;
} side_t;

/* Checks the arrays of |sd| for |n| blocks. */
static int side_check(nxm_comm_t *c, const char *fn, const side_t *sd, int n) {
  if (n == 0 || sd->kind < SIDE_V) return MPI_SUCCESS;
  const void *displs =
      sd->idispls ? (const void *)sd->idispls : (const void *)sd->adispls;
  int cls = nxm_coll_counts(c, fn, n, sd->counts, displs);
  if (cls == MPI_SUCCESS && sd->kind == SIDE_W && !sd->types)
    cls = nxm_err(c, MPI_ERR_ARG, fn, "NULL datatype array");
  return cls;
}

/* Checks block |k| of |sd| and resolves it. */
static int block(nxm_comm_t *c, const char *fn, const side_t *sd, int k,
                 const uint8_t **ptr, size_t *count, nxm_dtype_t **t) {
  int w = sd->kind == SIDE_W;
  int cnt = sd->kind >= SIDE_V ? sd->counts[k] : sd->count;
  const void *buf = w ? (const void *)1 : sd->buf; /* MPI_BOTTOM allowed */
  int cls = nxm_coll_type(c, fn, buf, cnt, w ? sd->types[k] : sd->type, t);
  if (cls != MPI_SUCCESS) return cls;
  MPI_Aint disp = 0;
  if (w)
    disp = sd->adispls ? sd->adispls[k] : sd->idispls[k];
  else if (sd->kind == SIDE_V)
    disp = (MPI_Aint)sd->idispls[k] * (*t)->extent;
  else if (sd->kind == SIDE_BLOCKS)
    disp = (MPI_Aint)k * cnt * (*t)->extent;
  *ptr = (const uint8_t *)sd->buf + disp;
  *count = (size_t)cnt;
  return MPI_SUCCESS;
}

/* The peers of one side: ranks and tags. */
typedef struct peers {
  int n;
  const int *rank;
  const int *tag; /* NULL: |tag0| for all */
  int tag0;
} peers_t;

/* Starts the exchange: block k of |snd| to sp.rank[k], block k of |rcv|
 * from rp.rank[k]. In place (|snd| NULL, alltoallw): the receive blocks
 * are sent from packed copies made now. */
static int exchange(nxm_comm_t *c, const char *fn, const side_t *snd,
                    const peers_t *sp, const side_t *rcv, const peers_t *rp,
                    nxm_req_t **out) {
  int cls = side_check(c, fn, rcv, rp->n);
  if (cls == MPI_SUCCESS && snd) cls = side_check(c, fn, snd, sp->n);
  if (cls != MPI_SUCCESS) return cls;
  nxm_cs_t *s = nxm_cs_new(c, NULL);
  if (!s) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  const uint8_t *p;
  size_t n;
  nxm_dtype_t *t;
  for (int k = 0; cls == MPI_SUCCESS && k < rp->n; k++) {
    cls = block(c, fn, rcv, k, &p, &n, &t);
    if (cls != MPI_SUCCESS) break;
    nxm_cs_ref(s, t);
    int tag = rp->tag ? rp->tag[k] : rp->tag0;
    nxm_cs_recv(s, (void *)p, n, t, rp->rank[k], tag);
    if (snd) continue;
    /* In place: send this block's current contents. */
    size_t bytes = n * (size_t)t->size;
    void *copy = nxm_cs_alloc(s, bytes);
    if (copy) nxm_pack(p, n, t, copy);
    nxm_cs_send(s, copy, bytes, nxm_byte(), sp->rank[k],
                sp->tag ? sp->tag[k] : sp->tag0);
  }
  for (int k = 0; snd && cls == MPI_SUCCESS && k < sp->n; k++) {
    cls = block(c, fn, snd, k, &p, &n, &t);
    if (cls != MPI_SUCCESS) break;
    nxm_cs_ref(s, t);
    nxm_cs_send(s, p, n, t, sp->rank[k], sp->tag ? sp->tag[k] : sp->tag0);
  }
  if (cls != MPI_SUCCESS) {
    nxm_cs_free(s);
    return cls;
  }
  nxm_cs_fence(s);
  return nxm_cs_start(s, fn, out);
}

/* ---- Alltoallw */

static int alltoallw_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                           const int *sendcounts, const int *sdispls,
                           const MPI_Datatype *sendtypes, void *recvbuf,
                           const int *recvcounts, const int *rdispls,
                           const MPI_Datatype *recvtypes, nxm_req_t **out) {
  int n = c->size;
  int *ranks = malloc((size_t)n * sizeof *ranks);
  if (!ranks) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  for (int i = 0; i < n; i++) ranks[i] = i;
  peers_t all = {n, ranks, NULL, nxm_coll_tag(c)};
  side_t snd = {.kind = SIDE_W,
                .buf = sendbuf,
                .counts = sendcounts,
                .idispls = sdispls,
                .types = sendtypes};
  side_t rcv = {.kind = SIDE_W,
                .buf = recvbuf,
                .counts = recvcounts,
                .idispls = rdispls,
                .types = recvtypes};
  int cls = exchange(c, fn, sendbuf == MPI_IN_PLACE ? NULL : &snd, &all, &rcv,
                     &all, out);
  free(ranks);
  return cls;
}

NXM_COLL_PAIR(Alltoallw, Ialltoallw, alltoallw_start,
              (const void *sendbuf, const int sendcounts[], const int sdispls[],
               const MPI_Datatype sendtypes[], void *recvbuf,
               const int recvcounts[], const int rdispls[],
               const MPI_Datatype recvtypes[], MPI_Comm comm),
              (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
               rdispls, recvtypes))

/* ---- Neighbourhood collectives */

/* The neighbours of |c|: sources (receive side) and destinations (send
 * side), with Cartesian per-direction tags in |buf| (4 x ndims ints). */
typedef struct nbrs {
  peers_t in, out;
  int *buf;
} nbrs_t;

/* Rank of the neighbour |dir| (-1 or +1) along dimension |d| of a
 * Cartesian |topo| (row-major ranks), or MPI_PROC_NULL. */
static int cart_shift(const nxm_topo_t *topo, int rank, int d, int dir) {
  int stride = 1;
  for (int i = topo->ndims - 1; i > d; i--) stride *= topo->dims[i];
  int coord = (rank / stride) % topo->dims[d];
  int to = coord + dir;
  if (to < 0 || to >= topo->dims[d]) {
    if (!topo->periods[d]) return MPI_PROC_NULL;
    to = (to + topo->dims[d]) % topo->dims[d];
  }
  return rank + (to - coord) * stride;
}

static int nbrs_get(nxm_comm_t *c, const char *fn, nbrs_t *nb) {
  const nxm_topo_t *topo = c->topo;
  memset(nb, 0, sizeof *nb);
  if (!topo || (topo->kind != MPI_CART && topo->kind != MPI_GRAPH &&
                topo->kind != MPI_DIST_GRAPH))
    return nxm_err(c, MPI_ERR_TOPOLOGY, fn, "communicator has no topology");
  if (topo->kind != MPI_CART) {
    nb->in = (peers_t){topo->indegree, topo->sources, NULL, nxm_coll_tag(c)};
    nb->out = (peers_t){topo->outdegree, topo->destinations, NULL, nb->in.tag0};
    return MPI_SUCCESS;
  }
  int m = 2 * topo->ndims;
  nb->buf = malloc((size_t)(2 * m + 1) * sizeof *nb->buf);
  if (!nb->buf) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  int *rank = nb->buf, *tag = nb->buf + m;
  for (int k = 0; k < m; k++) {
    rank[k] = cart_shift(topo, c->rank, k / 2, k % 2 ? 1 : -1);
    tag[k] = nxm_coll_tag(c);
  }
  /* Sent with tag[k] towards direction k; received from direction k with
   * the tag of the opposite direction. */
  int *rtag = malloc((size_t)(m ? m : 1) * sizeof *rtag);
  if (!rtag) {
    free(nb->buf);
    nb->buf = NULL;
    return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  }
  for (int k = 0; k < m; k++) rtag[k] = tag[k ^ 1];
  nb->out = (peers_t){m, rank, tag, 0};
  nb->in = (peers_t){m, rank, rtag, 0};
  return MPI_SUCCESS;
}

static void nbrs_free(nbrs_t *nb) {
  free(nb->buf);
  if (nb->in.tag) free((void *)nb->in.tag);
}

/* Runs |snd| / |rcv| over the neighbours of |c|. */
static int nbr_start(nxm_comm_t *c, const char *fn, const side_t *snd,
                     const side_t *rcv, nxm_req_t **out) {
  nbrs_t nb;
  int cls = nbrs_get(c, fn, &nb);
  if (cls != MPI_SUCCESS) return cls;
  cls = exchange(c, fn, snd, &nb.out, rcv, &nb.in, out);
  nbrs_free(&nb);
  return cls;
}

static int nag_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                     int sendcount, MPI_Datatype sendtype, void *recvbuf,
                     int recvcount, MPI_Datatype recvtype, nxm_req_t **out) {
  side_t snd = {
      .kind = SIDE_SAME, .buf = sendbuf, .count = sendcount, .type = sendtype};
  side_t rcv = {.kind = SIDE_BLOCKS,
                .buf = recvbuf,
                .count = recvcount,
                .type = recvtype};
  return nbr_start(c, fn, &snd, &rcv, out);
}

NXM_COLL_PAIR(Neighbor_allgather, Ineighbor_allgather, nag_start,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype,
               MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype))

static int nagv_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                      int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      const int *recvcounts, const int *displs,
                      MPI_Datatype recvtype, nxm_req_t **out) {
  side_t snd = {
      .kind = SIDE_SAME, .buf = sendbuf, .count = sendcount, .type = sendtype};
  side_t rcv = {.kind = SIDE_V,
                .buf = recvbuf,
                .type = recvtype,
                .counts = recvcounts,
                .idispls = displs};
  return nbr_start(c, fn, &snd, &rcv, out);
}

NXM_COLL_PAIR(Neighbor_allgatherv, Ineighbor_allgatherv, nagv_start,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, const int recvcounts[], const int displs[],
               MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
               recvtype))

static int na2a_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                      int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      int recvcount, MPI_Datatype recvtype, nxm_req_t **out) {
  side_t snd = {.kind = SIDE_BLOCKS,
                .buf = sendbuf,
                .count = sendcount,
                .type = sendtype};
  side_t rcv = {.kind = SIDE_BLOCKS,
                .buf = recvbuf,
                .count = recvcount,
                .type = recvtype};
  return nbr_start(c, fn, &snd, &rcv, out);
}

NXM_COLL_PAIR(Neighbor_alltoall, Ineighbor_alltoall, na2a_start,
              (const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype,
               MPI_Comm comm),
              (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype))

static int na2av_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                       const int *sendcounts, const int *sdispls,
                       MPI_Datatype sendtype, void *recvbuf,
                       const int *recvcounts, const int *rdispls,
                       MPI_Datatype recvtype, nxm_req_t **out) {
  side_t snd = {.kind = SIDE_V,
                .buf = sendbuf,
                .type = sendtype,
                .counts = sendcounts,
                .idispls = sdispls};
  side_t rcv = {.kind = SIDE_V,
                .buf = recvbuf,
                .type = recvtype,
                .counts = recvcounts,
                .idispls = rdispls};
  return nbr_start(c, fn, &snd, &rcv, out);
}

NXM_COLL_PAIR(Neighbor_alltoallv, Ineighbor_alltoallv, na2av_start,
              (const void *sendbuf, const int sendcounts[], const int sdispls[],
               MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
               const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm),
              (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
               rdispls, recvtype))

static int na2aw_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                       const int *sendcounts, const MPI_Aint *sdispls,
                       const MPI_Datatype *sendtypes, void *recvbuf,
                       const int *recvcounts, const MPI_Aint *rdispls,
                       const MPI_Datatype *recvtypes, nxm_req_t **out) {
  side_t snd = {.kind = SIDE_W,
                .buf = sendbuf,
                .counts = sendcounts,
                .adispls = sdispls,
                .types = sendtypes};
  side_t rcv = {.kind = SIDE_W,
                .buf = recvbuf,
                .counts = recvcounts,
                .adispls = rdispls,
                .types = recvtypes};
  return nbr_start(c, fn, &snd, &rcv, out);
}

NXM_COLL_PAIR(Neighbor_alltoallw, Ineighbor_alltoallw, na2aw_start,
              (const void *sendbuf, const int sendcounts[],
               const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
               void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[],
               const MPI_Datatype recvtypes[], MPI_Comm comm),
              (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
               rdispls, recvtypes))
