/* Groups and communicators: Comm_group, Group_incl / excl / union /
 * intersection / difference / translate_ranks / compare; Comm_split,
 * Comm_dup (attributes copied), Comm_create, Comm_create_group (the whole
 * group), Comm_compare, names, MPI_TAG_UB; Cartesian grids (Dims_create,
 * Cart_create / coords / rank / shift / get / sub) and distributed graphs
 * (Dist_graph_create_adjacent, Dist_graph_create, neighbors), Topo_test;
 * messages on each new communicator. Needs 2 or more ranks (4 covers more). */
#include <string.h>

#include "check.h"

static int copies, deletes;

static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out,
                   int *flag) {
  (void)c, (void)k, (void)extra;
  copies++;
  *(void **)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm c, int k, void *val, void *extra) {
  (void)c, (void)k, (void)val, (void)extra;
  deletes++;
  return MPI_SUCCESS;
}

/* Sends rank to the next rank of |c| and checks what comes from the
 * previous one. */
static void ring(MPI_Comm c, const char *what) {
  int r, n, got = -1;
  OK(MPI_Comm_rank(c, &r));
  OK(MPI_Comm_size(c, &n));
  OK(MPI_Sendrecv(&r, 1, MPI_INT, (r + 1) % n, 3, &got, 1, MPI_INT,
                  (r + n - 1) % n, 3, c, MPI_STATUS_IGNORE));
  CHECK(got == (r + n - 1) % n, "%s ring got %d", what, got);
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  int rank, size;
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs 2 ranks");

  /* Groups. */
  MPI_Group world, evens, odds, u, x, d;
  OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  int ne = (size + 1) / 2, er[64], gs, gr;
  for (int i = 0; i < ne; i++) er[i] = 2 * i;
  OK(MPI_Group_incl(world, ne, er, &evens));
  OK(MPI_Group_excl(world, ne, er, &odds));
  OK(MPI_Group_size(evens, &gs));
  OK(MPI_Group_rank(evens, &gr));
  CHECK(gs == ne && gr == (rank % 2 ? MPI_UNDEFINED : rank / 2), "evens");
  OK(MPI_Group_union(odds, evens, &u));
  OK(MPI_Group_intersection(world, odds, &x));
  OK(MPI_Group_difference(world, evens, &d));
  int cmp;
  OK(MPI_Group_compare(u, world, &cmp));
  CHECK(size == 2 ? cmp == MPI_SIMILAR : cmp == MPI_SIMILAR, "union %d", cmp);
  OK(MPI_Group_compare(x, odds, &cmp));
  CHECK(cmp == MPI_IDENT, "intersection %d", cmp);
  OK(MPI_Group_compare(d, odds, &cmp));
  CHECK(cmp == MPI_IDENT, "difference %d", cmp);
  int in[2] = {0, size - 1}, out[2];
  OK(MPI_Group_translate_ranks(world, 2, in, evens, out));
  CHECK(out[0] == 0 &&
            out[1] == ((size - 1) % 2 ? MPI_UNDEFINED : (size - 1) / 2),
        "translate %d %d", out[0], out[1]);

  /* Comm_create from the evens group: members get a communicator. */
  MPI_Comm ec;
  OK(MPI_Comm_create(MPI_COMM_WORLD, evens, &ec));
  CHECK((ec != MPI_COMM_NULL) == (rank % 2 == 0), "comm_create member");
  if (ec != MPI_COMM_NULL) {
    int er2;
    OK(MPI_Comm_rank(ec, &er2));
    CHECK(er2 == rank / 2, "rank in evens %d", er2);
    ring(ec, "evens");
    OK(MPI_Comm_free(&ec));
    CHECK(ec == MPI_COMM_NULL, "comm_free");
  }

  /* Split by parity, reversed order. */
  MPI_Comm sc;
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &sc));
  int sr, ss;
  OK(MPI_Comm_rank(sc, &sr));
  OK(MPI_Comm_size(sc, &ss));
  int same = (size - rank % 2 + 1) / 2;
  CHECK(ss == same && sr == same - 1 - rank / 2, "split %d/%d", sr, ss);
  ring(sc, "split");
  MPI_Comm none;
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &none));
  CHECK((none == MPI_COMM_NULL) == (rank != 0), "undefined color");
  if (none != MPI_COMM_NULL) OK(MPI_Comm_free(&none));

  /* Dup with an attribute; compare; names; MPI_TAG_UB. */
  int key;
  OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL));
  static int payload = 42;
  OK(MPI_Comm_set_attr(MPI_COMM_WORLD, key, &payload));
  MPI_Comm dup;
  OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  int *val, flag;
  OK(MPI_Comm_get_attr(dup, key, &val, &flag));
  CHECK(flag && val == &payload && copies == 1, "copied attribute");
  OK(MPI_Comm_compare(dup, MPI_COMM_WORLD, &cmp));
  CHECK(cmp == MPI_CONGRUENT, "dup compare %d", cmp);
  OK(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &cmp));
  CHECK(cmp == MPI_IDENT, "ident %d", cmp);
  OK(MPI_Comm_compare(sc, MPI_COMM_WORLD, &cmp));
  CHECK(cmp == MPI_UNEQUAL, "unequal %d", cmp);
  OK(MPI_Comm_set_name(dup, "my dup"));
  char name[MPI_MAX_OBJECT_NAME];
  int len;
  OK(MPI_Comm_get_name(dup, name, &len));
  CHECK(strcmp(name, "my dup") == 0 && len == 6, "name %s", name);
  OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
  CHECK(strcmp(name, "MPI_COMM_WORLD") == 0, "world name %s", name);
  int *ub;
  OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
  CHECK(flag && *ub >= 32767, "tag ub");
  ring(dup, "dup");
  OK(MPI_Comm_free(&dup));
  CHECK(deletes == 1, "delete callback %d", deletes);
  OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, key));
  OK(MPI_Comm_free_keyval(&key));

  /* Comm_create_group of the whole world (only the members call). */
  MPI_Comm cg;
  OK(MPI_Comm_create_group(MPI_COMM_WORLD, world, 77, &cg));
  ring(cg, "create_group");
  OK(MPI_Comm_free(&cg));

  /* A 2D periodic grid. */
  int dims[2] = {0, 0};
  OK(MPI_Dims_create(size, 2, dims));
  CHECK(dims[0] * dims[1] == size && dims[0] >= dims[1], "dims %d x %d",
        dims[0], dims[1]);
  int periods[2] = {1, 0};
  MPI_Comm grid;
  OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid));
  int topo;
  OK(MPI_Topo_test(grid, &topo));
  CHECK(topo == MPI_CART, "topo %d", topo);
  int coords[2], r2;
  OK(MPI_Cart_coords(grid, rank, 2, coords));
  CHECK(coords[0] == rank / dims[1] && coords[1] == rank % dims[1], "coords");
  OK(MPI_Cart_rank(grid, coords, &r2));
  CHECK(r2 == rank, "cart rank %d", r2);
  int src, dst;
  OK(MPI_Cart_shift(grid, 0, 1, &src, &dst));
  CHECK(dst == ((coords[0] + 1) % dims[0]) * dims[1] + coords[1] &&
            src == ((coords[0] + dims[0] - 1) % dims[0]) * dims[1] + coords[1],
        "shift dim 0: %d %d", src, dst);
  OK(MPI_Cart_shift(grid, 1, 1, &src, &dst));
  CHECK(dst == (coords[1] + 1 < dims[1] ? rank + 1 : MPI_PROC_NULL) &&
            src == (coords[1] > 0 ? rank - 1 : MPI_PROC_NULL),
        "shift dim 1 (not periodic): %d %d", src, dst);
  int got = -1;
  OK(MPI_Sendrecv(&rank, 1, MPI_INT, dst, 4, &got, 1, MPI_INT, src, 4, grid,
                  MPI_STATUS_IGNORE));
  CHECK(src == MPI_PROC_NULL ? got == -1 : got == src, "grid shift %d", got);
  int keep[2] = {0, 1};
  MPI_Comm row;
  OK(MPI_Cart_sub(grid, keep, &row));
  int rs, rr;
  OK(MPI_Comm_size(row, &rs));
  OK(MPI_Comm_rank(row, &rr));
  CHECK(rs == dims[1] && rr == coords[1], "row %d/%d", rr, rs);
  int gd[1], gp[1], gc[1];
  OK(MPI_Cart_get(row, 1, gd, gp, gc));
  CHECK(gd[0] == dims[1] && gp[0] == 0 && gc[0] == coords[1], "cart_get");
  OK(MPI_Comm_free(&row));
  OK(MPI_Comm_free(&grid));

  /* A directed ring as a distributed graph, weighted. */
  int from = (rank + size - 1) % size, to = (rank + 1) % size;
  int wf = 10 + from, wt = 10 + rank;
  MPI_Comm g;
  OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &from, &wf, 1, &to, &wt,
                                    MPI_INFO_NULL, 0, &g));
  int indeg, outdeg, weighted;
  OK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
  CHECK(indeg == 1 && outdeg == 1 && weighted, "counts");
  int s1, sw1, d1, dw1;
  OK(MPI_Dist_graph_neighbors(g, 1, &s1, &sw1, 1, &d1, &dw1));
  CHECK(s1 == from && sw1 == wf && d1 == to && dw1 == wt, "neighbors");
  OK(MPI_Topo_test(g, &topo));
  CHECK(topo == MPI_DIST_GRAPH, "topo %d", topo);
  ring(g, "graph");
  OK(MPI_Comm_free(&g));

  /* The same ring through MPI_Dist_graph_create, each rank giving the
   * edge that ends at it (left -> rank, weight 100 + left). */
  int one = 1, wl = 100 + from;
  OK(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &from, &one, &rank, &wl,
                           MPI_INFO_NULL, 0, &g));
  OK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
  CHECK(indeg == 1 && outdeg == 1 && weighted, "general counts %d %d", indeg,
        outdeg);
  OK(MPI_Dist_graph_neighbors(g, 1, &s1, &sw1, 1, &d1, &dw1));
  CHECK(s1 == from && sw1 == 100 + from && d1 == to && dw1 == 100 + rank,
        "general neighbors %d(%d) %d(%d)", s1, sw1, d1, dw1);
  OK(MPI_Comm_free(&g));

  OK(MPI_Group_free(&evens));
  OK(MPI_Group_free(&odds));
  OK(MPI_Group_free(&u));
  OK(MPI_Group_free(&x));
  OK(MPI_Group_free(&d));
  OK(MPI_Group_free(&world));
  OK(MPI_Comm_free(&sc));
  OK(MPI_Finalize());
  if (rank == 0) printf("comm: OK (%d ranks)\n", size);
  return 0;
}
