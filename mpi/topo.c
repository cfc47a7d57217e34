/*
 * Virtual topologies: Cartesian grids, graphs and distributed graphs. Each
 * is a new communicator (a split of the old one; ranks are never
 * reordered) carrying an nxm_topo_t; the neighbourhood collectives read
 * its neighbour lists (Cartesian: -1/+1 in each dimension in order, as MPI
 * defines).
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

static int *dup_ints(const int *a, int n) {
  int *r = malloc(((size_t)n + 1) * sizeof *r);
  if (r && n > 0) memcpy(r, a, (size_t)n * sizeof *r);
  return r;
}

int nxm_topo_copy(const nxm_comm_t *from, nxm_comm_t *to) {
  const nxm_topo_t *f = from->topo;
  if (!f) return MPI_SUCCESS;
  nxm_topo_t *t = calloc(1, sizeof *t);
  if (!t) return MPI_ERR_NO_MEM;
  *t = *f;
  t->dims = dup_ints(f->dims, f->ndims);
  t->periods = dup_ints(f->periods, f->ndims);
  t->sources = dup_ints(f->sources, f->indegree);
  t->destinations = dup_ints(f->destinations, f->outdegree);
  t->sourceweights =
      f->sourceweights ? dup_ints(f->sourceweights, f->indegree) : NULL;
  t->destweights =
      f->destweights ? dup_ints(f->destweights, f->outdegree) : NULL;
  t->index = f->index ? dup_ints(f->index, f->nnodes) : NULL;
  t->edges = f->edges ? dup_ints(f->edges, f->nedges) : NULL;
  to->topo = t;
  if (!t->dims || !t->periods || !t->sources || !t->destinations)
    return MPI_ERR_NO_MEM;
  return MPI_SUCCESS;
}

#define GET_COMM(var, h, fn)         \
  nxm_comm_t *var = nxm_comm_get(h); \
  if (!var) return nxm_err(NULL, MPI_ERR_COMM, fn, "invalid communicator")

static nxm_topo_t *need(nxm_comm_t *c, int kind) {
  return c->topo && c->topo->kind == kind ? c->topo : NULL;
}

int MPI_Topo_test(MPI_Comm comm, int *status) {
  GET_COMM(c, comm, "MPI_Topo_test");
  if (!status) return nxm_err(c, MPI_ERR_ARG, "MPI_Topo_test", "NULL");
  *status = c->topo ? c->topo->kind : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

/* Balanced factorisation of nnodes over the free (0) entries of dims,
 * largest first. */
int MPI_Dims_create(int nnodes, int ndims, int dims[]) {
  const char *fn = "MPI_Dims_create";
  if (nnodes <= 0 || ndims < 0 || ndims > 64 || (ndims > 0 && !dims))
    return nxm_err(NULL, MPI_ERR_ARG, fn, "nnodes %d ndims %d", nnodes, ndims);
  int rest = nnodes, nfree = 0;
  for (int i = 0; i < ndims; i++) {
    if (dims[i] < 0) return nxm_err(NULL, MPI_ERR_DIMS, fn, "dims[%d]", i);
    if (dims[i] == 0) {
      nfree++;
    } else if (rest % dims[i]) {
      return nxm_err(NULL, MPI_ERR_DIMS, fn, "%d not divisible", nnodes);
    } else {
      rest /= dims[i];
    }
  }
  if (nfree == 0) {
    if (rest != 1) return nxm_err(NULL, MPI_ERR_DIMS, fn, "product");
    return MPI_SUCCESS;
  }
  int f[64];
  for (int i = 0; i < nfree; i++) f[i] = 1;
  /* Each prime factor, largest first, to the smallest free entry. */
  int primes[32], np = 0;
  for (int p = 2; rest > 1 && np < 32;) {
    if (rest % p == 0) {
      primes[np++] = p;
      rest /= p;
    } else {
      p = p * p > rest ? rest : p + 1;
    }
  }
  for (int k = np - 1; k >= 0; k--) {
    int m = 0;
    for (int i = 1; i < nfree; i++)
      if (f[i] < f[m]) m = i;
    f[m] *= primes[k];
  }
  /* Non-increasing order. */
  for (int i = 0; i < nfree; i++)
    for (int j = i + 1; j < nfree; j++)
      if (f[j] > f[i]) {
        int x = f[i];
        f[i] = f[j];
        f[j] = x;
      }
  for (int i = 0, k = 0; i < ndims; i++)
    if (dims[i] == 0) dims[i] = f[k++];
  return MPI_SUCCESS;
}

/* Coordinates of |rank| in a row-major grid. */
static void coords_of(const nxm_topo_t *t, int rank, int *coords) {
  for (int i = t->ndims - 1; i >= 0; i--) {
    coords[i] = rank % t->dims[i];
    rank /= t->dims[i];
  }
}

/* Rank of |coords| (periodic dimensions wrap), or MPI_PROC_NULL. */
static int rank_of(const nxm_topo_t *t, const int *coords) {
  int r = 0;
  for (int i = 0; i < t->ndims; i++) {
    int c = coords[i], d = t->dims[i];
    if (c < 0 || c >= d) {
      if (!t->periods[i]) return MPI_PROC_NULL;
      c = ((c % d) + d) % d;
    }
    r = r * d + c;
  }
  return r;
}

/* Fills the Cartesian neighbour lists of rank |rank|. */
static int cart_neighbours(nxm_topo_t *t, int rank) {
  int n = 2 * t->ndims;
  t->sources = malloc(((size_t)n + 1) * sizeof(int));
  t->destinations = malloc(((size_t)n + 1) * sizeof(int));
  if (!t->sources || !t->destinations) return MPI_ERR_NO_MEM;
  int coords[64];
  for (int d = 0; d < t->ndims; d++) {
    coords_of(t, rank, coords);
    coords[d] -= 1;
    t->sources[2 * d] = t->destinations[2 * d] = rank_of(t, coords);
    coords[d] += 2;
    t->sources[2 * d + 1] = t->destinations[2 * d + 1] = rank_of(t, coords);
  }
  t->indegree = t->outdegree = n;
  return MPI_SUCCESS;
}

/* Splits |c| keeping its first |keep| ranks, with topology |t| (owned). */
static int with_topo(nxm_comm_t *c, const char *fn, int keep, nxm_topo_t *t,
                     MPI_Comm *out) {
  MPI_Comm nc = MPI_COMM_NULL;
  int cls = MPI_Comm_split(nxm_comm_handle(c),
                           c->rank < keep ? 0 : MPI_UNDEFINED, c->rank, &nc);
  nxm_comm_t *n = cls == MPI_SUCCESS ? nxm_comm_get(nc) : NULL;
  if (n && t->kind == MPI_CART) cls = cart_neighbours(t, n->rank);
  if (n && cls == MPI_SUCCESS) {
    n->topo = t;
    t = NULL;
  }
  nxm_topo_free(t); /* NULL when the new communicator took it */
  if (cls != MPI_SUCCESS) {
    if (nc != MPI_COMM_NULL) MPI_Comm_free(&nc);
    return nxm_err(c, cls, fn, "cannot make the topology");
  }
  *out = nc;
  return MPI_SUCCESS;
}

static int cart(nxm_comm_t *c, const char *fn, int ndims, const int dims[],
                const int periods[], MPI_Comm *comm_cart) {
  if (ndims < 0 || ndims > 64 || (ndims > 0 && (!dims || !periods)) ||
      !comm_cart)
    return nxm_err(c, MPI_ERR_ARG, fn, "ndims %d", ndims);
  long prod = 1;
  for (int i = 0; i < ndims; i++) {
    if (dims[i] <= 0) return nxm_err(c, MPI_ERR_DIMS, fn, "dims[%d]", i);
    prod *= dims[i];
    if (prod > c->size)
      return nxm_err(c, MPI_ERR_TOPOLOGY, fn, "grid larger than the comm");
  }
  nxm_topo_t *t = calloc(1, sizeof *t);
  if (!t) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  t->kind = MPI_CART;
  t->ndims = ndims;
  t->dims = dup_ints(dims, ndims);
  t->periods = dup_ints(periods, ndims);
  for (int i = 0; t->periods && i < ndims; i++)
    t->periods[i] = t->periods[i] != 0;
  return with_topo(c, fn, (int)prod, t, comm_cart);
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[],
                    const int periods[], int reorder, MPI_Comm *comm_cart) {
  (void)reorder;
  GET_COMM(c, comm_old, "MPI_Cart_create");
  return cart(c, "MPI_Cart_create", ndims, dims, periods, comm_cart);
}

int MPI_Cart_map(MPI_Comm comm, int ndims, const int dims[],
                 const int periods[], int *newrank) {
  (void)periods;
  GET_COMM(c, comm, "MPI_Cart_map");
  long prod = 1;
  for (int i = 0; i < ndims && dims; i++) prod *= dims[i];
  if (!newrank || prod > c->size)
    return nxm_err(c, MPI_ERR_ARG, "MPI_Cart_map", "bad arguments");
  *newrank = c->rank < prod ? c->rank : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int MPI_Cartdim_get(MPI_Comm comm, int *ndims) {
  GET_COMM(c, comm, "MPI_Cartdim_get");
  nxm_topo_t *t = need(c, MPI_CART);
  if (!t || !ndims)
    return nxm_err(c, MPI_ERR_TOPOLOGY, "MPI_Cartdim_get", "no grid");
  *ndims = t->ndims;
  return MPI_SUCCESS;
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[],
                 int coords[]) {
  GET_COMM(c, comm, "MPI_Cart_get");
  nxm_topo_t *t = need(c, MPI_CART);
  if (!t) return nxm_err(c, MPI_ERR_TOPOLOGY, "MPI_Cart_get", "no grid");
  if (maxdims < t->ndims || (t->ndims && (!dims || !periods || !coords)))
    return nxm_err(c, MPI_ERR_ARG, "MPI_Cart_get", "maxdims %d", maxdims);
  int tmp[64];
  coords_of(t, c->rank, tmp);
  for (int i = 0; i < t->ndims; i++) {
    dims[i] = t->dims[i];
    periods[i] = t->periods[i];
    coords[i] = tmp[i];
  }
  return MPI_SUCCESS;
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank) {
  GET_COMM(c, comm, "MPI_Cart_rank");
  nxm_topo_t *t = need(c, MPI_CART);
  if (!t) return nxm_err(c, MPI_ERR_TOPOLOGY, "MPI_Cart_rank", "no grid");
  if (!rank || (t->ndims && !coords))
    return nxm_err(c, MPI_ERR_ARG, "MPI_Cart_rank", "NULL");
  int r = rank_of(t, coords);
  if (r == MPI_PROC_NULL)
    return nxm_err(c, MPI_ERR_RANK, "MPI_Cart_rank", "coordinates outside");
  *rank = r;
  return MPI_SUCCESS;
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  GET_COMM(c, comm, "MPI_Cart_coords");
  nxm_topo_t *t = need(c, MPI_CART);
  if (!t) return nxm_err(c, MPI_ERR_TOPOLOGY, "MPI_Cart_coords", "no grid");
  if (rank < 0 || rank >= c->size)
    return nxm_err(c, MPI_ERR_RANK, "MPI_Cart_coords", "rank %d", rank);
  if (maxdims < t->ndims || (t->ndims && !coords))
    return nxm_err(c, MPI_ERR_ARG, "MPI_Cart_coords", "maxdims %d", maxdims);
  coords_of(t, rank, coords);
  return MPI_SUCCESS;
}

int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source,
                   int *rank_dest) {
  GET_COMM(c, comm, "MPI_Cart_shift");
  nxm_topo_t *t = need(c, MPI_CART);
  if (!t) return nxm_err(c, MPI_ERR_TOPOLOGY, "MPI_Cart_shift", "no grid");
  if (direction < 0 || direction >= t->ndims || !rank_source || !rank_dest)
    return nxm_err(c, MPI_ERR_ARG, "MPI_Cart_shift", "direction %d", direction);
  int coords[64];
  coords_of(t, c->rank, coords);
  coords[direction] += disp;
  *rank_dest = rank_of(t, coords);
  coords[direction] -= 2 * disp;
  *rank_source = rank_of(t, coords);
  return MPI_SUCCESS;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
  const char *fn = "MPI_Cart_sub";
  GET_COMM(c, comm, fn);
  nxm_topo_t *t = need(c, MPI_CART);
  if (!t) return nxm_err(c, MPI_ERR_TOPOLOGY, fn, "no grid");
  if (!newcomm || (t->ndims && !remain_dims))
    return nxm_err(c, MPI_ERR_ARG, fn, "NULL");
  int coords[64], dims[64], periods[64], n = 0, color = 0, key = 0;
  coords_of(t, c->rank, coords);
  for (int i = 0; i < t->ndims; i++) {
    if (remain_dims[i]) {
      dims[n] = t->dims[i];
      periods[n++] = t->periods[i];
      key = key * t->dims[i] + coords[i];
    } else {
      color = color * t->dims[i] + coords[i];
    }
  }
  MPI_Comm split;
  int cls = MPI_Comm_split(comm, color, key, &split);
  if (cls != MPI_SUCCESS) return cls;
  nxm_comm_t *s = nxm_comm_get(split);
  cls = cart(s, fn, n, dims, periods, newcomm);
  MPI_Comm_free(&split);
  return cls;
}

/* ---- Graphs */

static int dist_graph(nxm_comm_t *c, const char *fn, int indegree,
                      const int sources[], const int sourceweights[],
                      int outdegree, const int destinations[],
                      const int destweights[], MPI_Comm *out) {
  if (indegree < 0 || outdegree < 0 || indegree > NXM_MAX_ITEMS ||
      outdegree > NXM_MAX_ITEMS || (indegree && !sources) ||
      (outdegree && !destinations) || !out)
    return nxm_err(c, MPI_ERR_ARG, fn, "degrees %d/%d", indegree, outdegree);
  for (int i = 0; i < indegree; i++)
    if (sources[i] < 0 || sources[i] >= c->size)
      return nxm_err(c, MPI_ERR_RANK, fn, "source %d", sources[i]);
  for (int i = 0; i < outdegree; i++)
    if (destinations[i] < 0 || destinations[i] >= c->size)
      return nxm_err(c, MPI_ERR_RANK, fn, "destination %d", destinations[i]);
  nxm_topo_t *t = calloc(1, sizeof *t);
  if (!t) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  t->kind = MPI_DIST_GRAPH;
  t->indegree = indegree;
  t->outdegree = outdegree;
  t->sources = dup_ints(sources, indegree);
  t->destinations = dup_ints(destinations, outdegree);
  t->weighted = sourceweights != MPI_UNWEIGHTED;
  if (t->weighted && sourceweights && sourceweights != MPI_WEIGHTS_EMPTY)
    t->sourceweights = dup_ints(sourceweights, indegree);
  if (t->weighted && destweights && destweights != MPI_WEIGHTS_EMPTY &&
      destweights != MPI_UNWEIGHTED)
    t->destweights = dup_ints(destweights, outdegree);
  return with_topo(c, fn, c->size, t, out);
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree,
                                   const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[],
                                   const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm *comm_dist_graph) {
  (void)info;
  (void)reorder;
  GET_COMM(c, comm_old, "MPI_Dist_graph_create_adjacent");
  return dist_graph(c, "MPI_Dist_graph_create_adjacent", indegree, sources,
                    sourceweights, outdegree, destinations, destweights,
                    comm_dist_graph);
}

/* MPI_Dist_graph_create: each process gives any edges; every edge s -> d
 * (weight w) is sent to s (an outgoing neighbour d) and to d (an incoming
 * neighbour s) with one alltoall of counts and one alltoallv of (kind,
 * peer, weight) triples on the layer's communicator. Each process lists
 * its neighbours in the order they arrive: by the rank that gave the edge,
 * then in the order it gave them. */
int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[],
                          const int degrees[], const int destinations[],
                          const int weights[], MPI_Info info, int reorder,
                          MPI_Comm *comm_dist_graph) {
  (void)info;
  (void)reorder;
  const char *fn = "MPI_Dist_graph_create";
  GET_COMM(c, comm_old, fn);
  if (n < 0 || n > NXM_MAX_ITEMS || (n && (!sources || !degrees)) ||
      !comm_dist_graph)
    return nxm_err(c, MPI_ERR_ARG, fn, "n %d", n);
  long nedges = 0;
  for (int i = 0; i < n; i++) {
    if (degrees[i] < 0 || sources[i] < 0 || sources[i] >= c->size)
      return nxm_err(c, MPI_ERR_ARG, fn, "source %d degree %d", sources[i],
                     degrees[i]);
    nedges += degrees[i];
    if (nedges > NXM_MAX_ITEMS / 2)
      return nxm_err(c, MPI_ERR_ARG, fn, "too many edges");
  }
  if (nedges && !destinations)
    return nxm_err(c, MPI_ERR_ARG, fn, "NULL destinations");
  for (long e = 0; e < nedges; e++)
    if (destinations[e] < 0 || destinations[e] >= c->size)
      return nxm_err(c, MPI_ERR_RANK, fn, "destination %d", destinations[e]);
  int weighted = weights != MPI_UNWEIGHTED;
  size_t p = (size_t)c->size;
  size_t *cnt = calloc(4 * p, sizeof *cnt);
  int32_t *out = malloc((6 * (size_t)nedges + 1) * sizeof *out);
  int32_t *in = NULL;
  int *lists = NULL, cls = MPI_SUCCESS;
  if (!cnt || !out) {
    cls = nxm_err(c, MPI_ERR_NO_MEM, fn, "%ld edges", nedges);
    goto out;
  }
  size_t *scount = cnt, *sdisp = cnt + p, *rcount = cnt + 2 * p,
         *rdisp = cnt + 3 * p;
  /* Count, then place, the triples for each rank. */
  for (int pass = 0; pass < 2; pass++) {
    long e = 0;
    for (int i = 0; i < n; i++)
      for (int k = 0; k < degrees[i]; k++, e++) {
        int s = sources[i], d = destinations[e];
        int w = weighted && weights ? weights[e] : 1;
        int32_t tri[2][3] = {{0, d, w}, {1, s, w}};
        int to[2] = {s, d};
        for (int j = 0; j < 2; j++) {
          if (pass == 0) {
            scount[to[j]] += 3;
          } else {
            memcpy(out + sdisp[to[j]] + rcount[to[j]], tri[j], sizeof tri[j]);
            rcount[to[j]] += 3; /* used as a fill cursor here */
          }
        }
      }
    if (pass == 0)
      for (size_t r = 1; r < p; r++) sdisp[r] = sdisp[r - 1] + scount[r - 1];
  }
  int rc = nexar_alltoall(c->cc, scount, rcount, 1, NEXAR_UINT64);
  size_t total = 0;
  for (size_t r = 0; rc == NEXAR_OK && r < p; r++) {
    rdisp[r] = total;
    total += rcount[r];
  }
  if (rc == NEXAR_OK && total > 6 * (size_t)NXM_MAX_ITEMS) rc = NEXAR_ERR_PROTO;
  in = rc == NEXAR_OK ? malloc((total + 1) * sizeof *in) : NULL;
  if (rc == NEXAR_OK && !in) rc = NEXAR_ERR_NOMEM;
  if (rc == NEXAR_OK)
    rc = nexar_alltoallv(c->cc, out, scount, sdisp, in, rcount, rdisp,
                         NEXAR_INT32);
  if (rc != NEXAR_OK) {
    cls = nxm_err_nexar(c, fn, rc);
    goto out;
  }
  /* Split the received triples into the two lists (with weights). */
  size_t ntri = total / 3;
  lists = malloc((4 * ntri + 4) * sizeof *lists);
  if (!lists) {
    cls = nxm_err(c, MPI_ERR_NO_MEM, fn, "%zu neighbours", ntri);
    goto out;
  }
  int *src = lists, *srcw = lists + ntri + 1, *dst = lists + 2 * ntri + 2,
      *dstw = lists + 3 * ntri + 3, nin = 0, nout = 0;
  for (size_t t = 0; t < ntri; t++) {
    const int32_t *x = in + 3 * t;
    if (x[1] < 0 || x[1] >= c->size) continue; /* never from a member */
    if (x[0] == 1) {
      src[nin] = x[1];
      srcw[nin++] = x[2];
    } else {
      dst[nout] = x[1];
      dstw[nout++] = x[2];
    }
  }
  cls = dist_graph(c, fn, nin, src, weighted ? srcw : MPI_UNWEIGHTED, nout, dst,
                   weighted ? dstw : MPI_UNWEIGHTED, comm_dist_graph);
out:
  free(cnt);
  free(out);
  free(in);
  free(lists);
  return cls;
}

int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int *indegree, int *outdegree,
                                   int *weighted) {
  GET_COMM(c, comm, "MPI_Dist_graph_neighbors_count");
  nxm_topo_t *t = need(c, MPI_DIST_GRAPH);
  if (!t || !indegree || !outdegree || !weighted)
    return nxm_err(c, MPI_ERR_TOPOLOGY, "MPI_Dist_graph_neighbors_count",
                   "not a distributed graph");
  *indegree = t->indegree;
  *outdegree = t->outdegree;
  *weighted = t->weighted;
  return MPI_SUCCESS;
}

int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[],
                             int sourceweights[], int maxoutdegree,
                             int destinations[], int destweights[]) {
  const char *fn = "MPI_Dist_graph_neighbors";
  GET_COMM(c, comm, fn);
  nxm_topo_t *t = need(c, MPI_DIST_GRAPH);
  if (!t) return nxm_err(c, MPI_ERR_TOPOLOGY, fn, "not a distributed graph");
  if (maxindegree < t->indegree || maxoutdegree < t->outdegree ||
      (t->indegree && !sources) || (t->outdegree && !destinations))
    return nxm_err(c, MPI_ERR_ARG, fn, "arrays too small");
  for (int i = 0; i < t->indegree; i++) {
    sources[i] = t->sources[i];
    if (t->sourceweights && sourceweights && sourceweights != MPI_UNWEIGHTED)
      sourceweights[i] = t->sourceweights[i];
  }
  for (int i = 0; i < t->outdegree; i++) {
    destinations[i] = t->destinations[i];
    if (t->destweights && destweights && destweights != MPI_UNWEIGHTED)
      destweights[i] = t->destweights[i];
  }
  return MPI_SUCCESS;
}

int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[],
                     const int edges[], int reorder, MPI_Comm *comm_graph) {
  (void)reorder;
  const char *fn = "MPI_Graph_create";
  GET_COMM(c, comm_old, fn);
  if (nnodes < 0 || nnodes > c->size || (nnodes && (!index || !edges)) ||
      !comm_graph)
    return nxm_err(c, MPI_ERR_ARG, fn, "nnodes %d", nnodes);
  int nedges = nnodes ? index[nnodes - 1] : 0;
  if (nedges < 0 || nedges > NXM_MAX_ITEMS)
    return nxm_err(c, MPI_ERR_ARG, fn, "edges %d", nedges);
  for (int i = 0; i < nedges; i++)
    if (edges[i] < 0 || edges[i] >= nnodes)
      return nxm_err(c, MPI_ERR_TOPOLOGY, fn, "edge %d", edges[i]);
  nxm_topo_t *t = calloc(1, sizeof *t);
  if (!t) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  t->kind = MPI_GRAPH;
  t->nnodes = nnodes;
  t->nedges = nedges;
  t->index = dup_ints(index, nnodes);
  t->edges = dup_ints(edges, nedges);
  int me = c->rank, lo = me > 0 && me < nnodes ? index[me - 1] : 0;
  int deg = me < nnodes ? index[me] - lo : 0;
  t->indegree = t->outdegree = deg;
  t->sources = dup_ints(edges + lo, deg);
  t->destinations = dup_ints(edges + lo, deg);
  return with_topo(c, fn, nnodes, t, comm_graph);
}

int MPI_Graphdims_get(MPI_Comm comm, int *nnodes, int *nedges) {
  GET_COMM(c, comm, "MPI_Graphdims_get");
  nxm_topo_t *t = need(c, MPI_GRAPH);
  if (!t || !nnodes || !nedges)
    return nxm_err(c, MPI_ERR_TOPOLOGY, "MPI_Graphdims_get", "no graph");
  *nnodes = t->nnodes;
  *nedges = t->nedges;
  return MPI_SUCCESS;
}

int MPI_Graph_get(MPI_Comm comm, int maxindex, int maxedges, int index[],
                  int edges[]) {
  GET_COMM(c, comm, "MPI_Graph_get");
  nxm_topo_t *t = need(c, MPI_GRAPH);
  if (!t || maxindex < t->nnodes || maxedges < t->nedges ||
      (t->nnodes && !index) || (t->nedges && !edges))
    return nxm_err(c, MPI_ERR_TOPOLOGY, "MPI_Graph_get", "no graph / small");
  if (t->nnodes) memcpy(index, t->index, (size_t)t->nnodes * sizeof(int));
  if (t->nedges) memcpy(edges, t->edges, (size_t)t->nedges * sizeof(int));
  return MPI_SUCCESS;
}

int MPI_Graph_neighbors_count(MPI_Comm comm, int rank, int *nneighbors) {
  GET_COMM(c, comm, "MPI_Graph_neighbors_count");
  nxm_topo_t *t = need(c, MPI_GRAPH);
  if (!t || !nneighbors || rank < 0 || rank >= t->nnodes)
    return nxm_err(c, MPI_ERR_TOPOLOGY, "MPI_Graph_neighbors_count",
                   "no graph or rank %d", rank);
  *nneighbors = t->index[rank] - (rank ? t->index[rank - 1] : 0);
  return MPI_SUCCESS;
}

int MPI_Graph_neighbors(MPI_Comm comm, int rank, int maxneighbors,
                        int neighbors[]) {
  int n = 0;
  int cls = MPI_Graph_neighbors_count(comm, rank, &n);
  if (cls != MPI_SUCCESS) return cls;
  nxm_topo_t *t = nxm_comm_get(comm)->topo;
  if (maxneighbors < n || (n && !neighbors))
    return nxm_err(nxm_comm_get(comm), MPI_ERR_ARG, "MPI_Graph_neighbors",
                   "array too small");
  int lo = rank ? t->index[rank - 1] : 0;
  for (int i = 0; i < n; i++) neighbors[i] = t->edges[lo + i];
  return MPI_SUCCESS;
}

int MPI_Graph_map(MPI_Comm comm, int nnodes, const int index[],
                  const int edges[], int *newrank) {
  (void)index;
  (void)edges;
  GET_COMM(c, comm, "MPI_Graph_map");
  if (!newrank || nnodes < 0 || nnodes > c->size)
    return nxm_err(c, MPI_ERR_ARG, "MPI_Graph_map", "nnodes %d", nnodes);
  *newrank = c->rank < nnodes ? c->rank : MPI_UNDEFINED;
  return MPI_SUCCESS;
}
