/* coll_paths: the two paths of the layer's reductions and the packing of
 * derived datatypes, blocking and non-blocking (ct_nb), checked bit-exact
 * against values computed here.
 *  - layer-built reductions: a non-commutative user op (2x2 integer
 *    matrix product, on a contiguous type of 4 ints) through MPI_Reduce at
 *    every root (in place at the root too), Allreduce, Reduce_scatter,
 *    Reduce_scatter_block, Scan and Exscan, each checked in rank order;
 *    a commutative user op; MPI_MINLOC / MAXLOC on MPI_DOUBLE_INT (a pair
 *    with padding) and MPI_2INT; MPI_SHORT and long double sums; MPI_LAND;
 *  - derived datatypes on the native path: a vector of ints (data with
 *    gaps that must stay untouched) in Bcast, Gather (vector against
 *    MPI_INT on the other side), Scatterv, Allgatherv, Alltoall,
 *    Allreduce (in place too), Reduce_scatter_block and Scan;
 *  - several non-blocking collectives of both paths in flight at once. */
#include "ct.h"

/* Predefined ops on a derived type of one predefined type: nexar's MPI
 * reduces them; MPICH 4.0 rejects them. */
#define VEC_OPS CT_NEXAR

#define K 3 /* matrices per rank */
static MPI_Datatype mat;
static MPI_Op matop, plus1;

/* M(r, k) = [[r + 1 + k, 1], [1, 0]]: products differ by order. */
static void mat_of(int r, int k, int *m) {
  m[0] = r + 1 + k;
  m[1] = 1;
  m[2] = 1;
  m[3] = 0;
}

static void mul(const int *a, int *b) { /* b = a b */
  int c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
              a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
  memcpy(b, c, sizeof c);
}

static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  for (int i = 0; i < *len; i++) mul((int *)in + 4 * i, (int *)inout + 4 * i);
}

/* The product M(lo, k) ... M(hi, k) in rank order. */
static void prod(int lo, int hi, int k, int *out) {
  int m[4];
  mat_of(hi, k, out);
  for (int r = hi - 1; r >= lo; r--) {
    mat_of(r, k, m);
    mul(m, out);
  }
}

static void check_prod(const int *got, int lo, int hi, int k) {
  int e[4];
  prod(lo, hi, k, e);
  for (int i = 0; i < 4; i++) CT_EQ(got[i], e[i]);
}

static void plus1_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i] + 1;
}

static void mine(int *buf, int n) { /* n matrices M(rank, k) */
  for (int k = 0; k < n; k++) mat_of(ct_rank, k, buf + 4 * k);
}

static void user_ops(void) {
  int n = ct_size, me = ct_rank;
  int in[4 * K], out[4 * K];
  for (int root = 0; root < n; root++) {
    int ip = root % 2 && me == root;
    mine(ip ? out : in, K);
    CT_RUN(MPI_Reduce(ip ? MPI_IN_PLACE : in, out, K, mat, matop, root,
                      MPI_COMM_WORLD),
           MPI_Ireduce(ip ? MPI_IN_PLACE : in, out, K, mat, matop, root,
                       MPI_COMM_WORLD, &ct_rq));
    for (int k = 0; me == root && k < K; k++)
      check_prod(out + 4 * k, 0, n - 1, k);
  }
  for (int ip = 0; ip < 2; ip++) {
    mine(ip ? out : in, K);
    CT_RUN(MPI_Allreduce(ip ? MPI_IN_PLACE : in, out, K, mat, matop,
                         MPI_COMM_WORLD),
           MPI_Iallreduce(ip ? MPI_IN_PLACE : in, out, K, mat, matop,
                          MPI_COMM_WORLD, &ct_rq));
    for (int k = 0; k < K; k++) check_prod(out + 4 * k, 0, n - 1, k);
    mine(ip ? out : in, K);
    CT_RUN(MPI_Scan(ip ? MPI_IN_PLACE : in, out, K, mat, matop, MPI_COMM_WORLD),
           MPI_Iscan(ip ? MPI_IN_PLACE : in, out, K, mat, matop, MPI_COMM_WORLD,
                     &ct_rq));
    for (int k = 0; k < K; k++) check_prod(out + 4 * k, 0, me, k);
    mine(ip ? out : in, K);
    CT_RUN(
        MPI_Exscan(ip ? MPI_IN_PLACE : in, out, K, mat, matop, MPI_COMM_WORLD),
        MPI_Iexscan(ip ? MPI_IN_PLACE : in, out, K, mat, matop, MPI_COMM_WORLD,
                    &ct_rq));
    for (int k = 0; me > 0 && k < K; k++) check_prod(out + 4 * k, 0, me - 1, k);
  }
  /* Reduce_scatter(_block): n x 2 matrices in, rank r gets its blocks. */
  int *rin = malloc(sizeof(int) * 4 * 2 * n),
      *rout = malloc(sizeof(int) * 4 * 2 * n);
  int *counts = malloc(sizeof(int) * n);
  for (int ip = 0; ip < 2; ip++) {
    mine(ip ? rout : rin, 2 * n);
    CT_RUN(MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : rin, rout, 2, mat,
                                    matop, MPI_COMM_WORLD),
           MPI_Ireduce_scatter_block(ip ? MPI_IN_PLACE : rin, rout, 2, mat,
                                     matop, MPI_COMM_WORLD, &ct_rq));
    for (int k = 0; k < 2; k++) check_prod(rout + 4 * k, 0, n - 1, 2 * me + k);
    int first = 0, total = 0;
    for (int i = 0; i < n; i++) {
      counts[i] = i % 2 + 1;
      if (i < me) first += counts[i];
      total += counts[i];
    }
    mine(ip ? rout : rin, total);
    CT_RUN(MPI_Reduce_scatter(ip ? MPI_IN_PLACE : rin, rout, counts, mat, matop,
                              MPI_COMM_WORLD),
           MPI_Ireduce_scatter(ip ? MPI_IN_PLACE : rin, rout, counts, mat,
                               matop, MPI_COMM_WORLD, &ct_rq));
    for (int k = 0; k < counts[me]; k++)
      check_prod(rout + 4 * k, 0, n - 1, first + k);
  }
  free(rin);
  free(rout);
  free(counts);
  /* Commutative: x0 + x1 + ... + (n - 1). */
  int v[2] = {me, 2 * me}, r[2];
  CT_RUN(MPI_Allreduce(v, r, 2, MPI_INT, plus1, MPI_COMM_WORLD),
         MPI_Iallreduce(v, r, 2, MPI_INT, plus1, MPI_COMM_WORLD, &ct_rq));
  CT_EQ(r[0], n * (n - 1) / 2 + n - 1);
  CT_EQ(r[1], n * (n - 1) + n - 1);
}

/* Ops and types nexar does not reduce. */
static void predefined(void) {
  int n = ct_size, me = ct_rank;
  struct di {
    double v;
    int k;
  } a[4], b[4];
  for (int i = 0; i < 4; i++) a[i] = (struct di){((me + i) % 3) * 0.5, me};
  for (int mx = 0; mx < 2; mx++) {
    MPI_Op op = mx ? MPI_MAXLOC : MPI_MINLOC;
    CT_RUN(MPI_Allreduce(a, b, 4, MPI_DOUBLE_INT, op, MPI_COMM_WORLD),
           MPI_Iallreduce(a, b, 4, MPI_DOUBLE_INT, op, MPI_COMM_WORLD, &ct_rq));
    for (int i = 0; i < 4; i++) {
      struct di e = {((0 + i) % 3) * 0.5, 0};
      for (int r = 1; r < n; r++) {
        double v = ((r + i) % 3) * 0.5;
        if (mx ? v > e.v : v < e.v) e = (struct di){v, r};
      }
      CT_EQ(b[i].v * 2, e.v * 2);
      CT_EQ(b[i].k, e.k);
    }
  }
  int p[2] = {me % 2, me}, q[2];
  CT_RUN(MPI_Scan(p, q, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD),
         MPI_Iscan(p, q, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD, &ct_rq));
  CT_EQ(q[0], me > 0);
  CT_EQ(q[1], me > 0);
  short s[3] = {(short)(me + 1), (short)(-me), 300}, sr[3];
  CT_RUN(MPI_Allreduce(s, sr, 3, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD),
         MPI_Iallreduce(s, sr, 3, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD, &ct_rq));
  CT_EQ(sr[0], n * (n + 1) / 2);
  CT_EQ(sr[1], -n * (n - 1) / 2);
  CT_EQ(sr[2], 300 * n);
  CT_RUN(MPI_Exscan(s, sr, 3, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD),
         MPI_Iexscan(s, sr, 3, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD, &ct_rq));
  if (me > 0) CT_EQ(sr[0], me * (me + 1) / 2);
  long double ld = me + 0.25L, ldr = 0;
  CT_RUN(
      MPI_Reduce(&ld, &ldr, 1, MPI_LONG_DOUBLE, MPI_SUM, n - 1, MPI_COMM_WORLD),
      MPI_Ireduce(&ld, &ldr, 1, MPI_LONG_DOUBLE, MPI_SUM, n - 1, MPI_COMM_WORLD,
                  &ct_rq));
  if (me == n - 1) CT_EQ(ldr * 4, n * (n - 1) * 2 + n);
  int l[2] = {1, me != 1}, lr[2];
  CT_RUN(MPI_Allreduce(l, lr, 2, MPI_INT, MPI_LAND, MPI_COMM_WORLD),
         MPI_Iallreduce(l, lr, 2, MPI_INT, MPI_LAND, MPI_COMM_WORLD, &ct_rq));
  CT_EQ(lr[0], 1);
  CT_EQ(lr[1], n < 2);
}

/* A vector of 3 ints with stride 2 (extent 5 ints); gaps hold -7. */
#define GAP (-7)
static MPI_Datatype vec;
static int vdata(int e, int j) {
  return ct_rank * 100 + e * 10 + j;
}
static void vfill(int *buf, int nel, int (*val)(int, int)) {
  for (int i = 0; i < 5 * nel; i++) buf[i] = GAP;
  for (int e = 0; e < nel; e++)
    for (int j = 0; j < 3; j++) buf[5 * e + 2 * j] = val ? val(e, j) : 0;
}
/* Element e, item j of |buf| is |v|, the gaps untouched. */
static void vcheck(const int *buf, int e, int j, int v) {
  CT_EQ(buf[5 * e + 2 * j], v);
  if (j < 2) CT_EQ(buf[5 * e + 2 * j + 1], GAP);
}

static void derived(void) {
  int n = ct_size, me = ct_rank, root = 1 % n;
  int *buf = malloc(sizeof(int) * 5 * 2 * n),
      *flat = malloc(sizeof(int) * 6 * n);
  /* Bcast of 2 vectors. */
  vfill(buf, 2, me == root ? vdata : NULL);
  CT_RUN(MPI_Bcast(buf, 2, vec, root, MPI_COMM_WORLD),
         MPI_Ibcast(buf, 2, vec, root, MPI_COMM_WORLD, &ct_rq));
  for (int e = 0; e < 2; e++)
    for (int j = 0; j < 3; j++) vcheck(buf, e, j, root * 100 + e * 10 + j);
  /* Gather: one vector from each rank into MPI_INTs at the root. */
  vfill(buf, 1, vdata);
  CT_RUN(
      MPI_Gather(buf, 1, vec, flat, 3, MPI_INT, root, MPI_COMM_WORLD),
      MPI_Igather(buf, 1, vec, flat, 3, MPI_INT, root, MPI_COMM_WORLD, &ct_rq));
  for (int r = 0; me == root && r < n; r++)
    for (int j = 0; j < 3; j++) CT_EQ(flat[3 * r + j], r * 100 + j);
  /* Scatterv of MPI_INTs into a vector (rank r gets r % 2 + 1 vectors). */
  int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
  for (int i = 0; i < 6 * n; i++) flat[i] = 1000 + i;
  for (int r = 0; r < n; r++) {
    counts[r] = 3 * (r % 2 + 1);
    displs[r] = 6 * (n - 1 - r);
  }
  vfill(buf, 2, NULL);
  CT_RUN(MPI_Scatterv(flat, counts, displs, MPI_INT, buf, me % 2 + 1, vec, root,
                      MPI_COMM_WORLD),
         MPI_Iscatterv(flat, counts, displs, MPI_INT, buf, me % 2 + 1, vec,
                       root, MPI_COMM_WORLD, &ct_rq));
  for (int e = 0; e < me % 2 + 1; e++)
    for (int j = 0; j < 3; j++)
      vcheck(buf, e, j, 1000 + 6 * (n - 1 - me) + 3 * e + j);
  /* Allgatherv into vectors, blocks in reverse rank order. */
  int *all = malloc(sizeof(int) * 5 * (n + 2));
  for (int r = 0; r < n; r++) {
    counts[r] = 1;
    displs[r] = n - 1 - r;
  }
  int three[3] = {me, me * 2, me * 3};
  vfill(all, n, NULL);
  CT_RUN(MPI_Allgatherv(three, 3, MPI_INT, all, counts, displs, vec,
                        MPI_COMM_WORLD),
         MPI_Iallgatherv(three, 3, MPI_INT, all, counts, displs, vec,
                         MPI_COMM_WORLD, &ct_rq));
  for (int r = 0; r < n; r++)
    for (int j = 0; j < 3; j++) vcheck(all, n - 1 - r, j, r * (j + 1));
  /* Alltoall of vectors: block j of rank r is (r, j). */
  int *src = malloc(sizeof(int) * 5 * (n + 2));
  vfill(src, n, vdata);
  vfill(all, n, NULL);
  CT_RUN(MPI_Alltoall(src, 1, vec, all, 1, vec, MPI_COMM_WORLD),
         MPI_Ialltoall(src, 1, vec, all, 1, vec, MPI_COMM_WORLD, &ct_rq));
  for (int r = 0; r < n; r++)
    for (int j = 0; j < 3; j++) vcheck(all, r, j, r * 100 + me * 10 + j);
  /* In place on vectors: the image carries this rank's own data. */
  vfill(all, n, vdata); /* block e of rank r: (r, e) */
  CT_RUN(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, vec,
                      MPI_COMM_WORLD),
         MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, vec,
                       MPI_COMM_WORLD, &ct_rq));
  for (int r = 0; r < n; r++)
    for (int j = 0; j < 3; j++) vcheck(all, r, j, r * 100 + me * 10 + j);
  vfill(all, n, NULL);
  for (int j = 0; j < 3; j++) all[5 * me + 2 * j] = me * 7 + j;
  CT_RUN(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, vec,
                       MPI_COMM_WORLD),
         MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, vec,
                        MPI_COMM_WORLD, &ct_rq));
  for (int r = 0; r < n; r++)
    for (int j = 0; j < 3; j++) vcheck(all, r, j, r * 7 + j);
  vfill(all, n, NULL);
  for (int r = 0; r < n; r++) {
    counts[r] = 1;
    displs[r] = (r + 1) % n;
  }
  for (int j = 0; j < 3; j++) all[5 * displs[me] + 2 * j] = me * 9 + j;
  vfill(buf, 1, NULL);
  for (int j = 0; j < 3; j++) buf[2 * j] = me * 9 + j;
  CT_RUN(MPI_Gatherv(me == root ? MPI_IN_PLACE : buf, 1, vec, all, counts,
                     displs, vec, root, MPI_COMM_WORLD),
         MPI_Igatherv(me == root ? MPI_IN_PLACE : buf, 1, vec, all, counts,
                      displs, vec, root, MPI_COMM_WORLD, &ct_rq));
  for (int r = 0; me == root && r < n; r++)
    for (int j = 0; j < 3; j++) vcheck(all, displs[r], j, r * 9 + j);
  /* Allreduce over vectors (native: nexar sums the packed ints). */
  for (int ip = 0; VEC_OPS && ip < 2; ip++) {
    vfill(src, 2, vdata);
    vfill(buf, 2, ip ? vdata : NULL);
    CT_RUN(MPI_Allreduce(ip ? MPI_IN_PLACE : src, buf, 2, vec, MPI_SUM,
                         MPI_COMM_WORLD),
           MPI_Iallreduce(ip ? MPI_IN_PLACE : src, buf, 2, vec, MPI_SUM,
                          MPI_COMM_WORLD, &ct_rq));
    for (int e = 0; e < 2; e++)
      for (int j = 0; j < 3; j++)
        vcheck(buf, e, j, 100 * n * (n - 1) / 2 + n * (e * 10 + j));
  }
  /* Reduce_scatter_block in place: n vectors in, one out. */
  if (!VEC_OPS) goto out;
  vfill(all, n, vdata);
  CT_RUN(MPI_Reduce_scatter_block(MPI_IN_PLACE, all, 1, vec, MPI_SUM,
                                  MPI_COMM_WORLD),
         MPI_Ireduce_scatter_block(MPI_IN_PLACE, all, 1, vec, MPI_SUM,
                                   MPI_COMM_WORLD, &ct_rq));
  for (int j = 0; j < 3; j++)
    vcheck(all, 0, j, 100 * n * (n - 1) / 2 + n * (me * 10 + j));
  /* Scan of one vector. */
  vfill(src, 1, vdata);
  vfill(buf, 1, NULL);
  CT_RUN(MPI_Scan(src, buf, 1, vec, MPI_SUM, MPI_COMM_WORLD),
         MPI_Iscan(src, buf, 1, vec, MPI_SUM, MPI_COMM_WORLD, &ct_rq));
  for (int j = 0; j < 3; j++)
    vcheck(buf, 0, j, 100 * me * (me + 1) / 2 + (me + 1) * j);
  /* Exscan leaves rank 0's vector as it was. */
  vfill(buf, 1, vdata);
  CT_RUN(MPI_Exscan(src, buf, 1, vec, MPI_SUM, MPI_COMM_WORLD),
         MPI_Iexscan(src, buf, 1, vec, MPI_SUM, MPI_COMM_WORLD, &ct_rq));
  for (int j = 0; j < 3; j++)
    vcheck(buf, 0, j, me ? 100 * me * (me - 1) / 2 + me * j : j);
out:
  free(buf);
  free(flat);
  free(counts);
  free(displs);
  free(all);
  free(src);
}

/* Native and layer-built collectives in flight together. */
static void in_flight(void) {
  int n = ct_size, me = ct_rank;
  MPI_Request rq[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL,
                       MPI_REQUEST_NULL};
  int x = me + 1, xs, m[4], mr[4], b[5] = {0};
  short s = (short)me, ss = 0;
  mine(m, 1);
  if (me == 0)
    for (int i = 0; i < 5; i++) b[i] = 40 + i;
  CT_MPI(MPI_Iallreduce(&x, &xs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[0]));
  /* An op and a type freed while the collective using them runs. */
  MPI_Op op;
  MPI_Datatype m4;
  MPI_Op_create(matmul, 0, &op);
  MPI_Type_contiguous(4, MPI_INT, &m4);
  MPI_Type_commit(&m4);
  CT_MPI(MPI_Iallreduce(m, mr, 1, m4, op, MPI_COMM_WORLD, &rq[1]));
  MPI_Op_free(&op);
  MPI_Type_free(&m4);
  CT_MPI(MPI_Ibcast(b, 5, MPI_INT, 0, MPI_COMM_WORLD, &rq[2]));
  CT_MPI(MPI_Iscan(&s, &ss, 1, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD, &rq[3]));
  CT_MPI(MPI_Waitall(4, rq, MPI_STATUSES_IGNORE));
  CT_EQ(xs, n * (n + 1) / 2);
  check_prod(mr, 0, n - 1, 0);
  for (int i = 0; i < 5; i++) CT_EQ(b[i], 40 + i);
  CT_EQ(ss, me * (me + 1) / 2);
}

int main(int argc, char **argv) {
  ct_init(&argc, &argv);
  MPI_Type_contiguous(4, MPI_INT, &mat);
  MPI_Type_commit(&mat);
  MPI_Type_vector(3, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  MPI_Op_create(matmul, 0, &matop);
  MPI_Op_create(plus1_fn, 1, &plus1);
  for (ct_nb = 0; ct_nb < 2; ct_nb++) {
    user_ops();
    predefined();
    derived();
  }
  in_flight();
  MPI_Op_free(&matop);
  MPI_Op_free(&plus1);
  MPI_Type_free(&mat);
  MPI_Type_free(&vec);
  ct_ok("coll_paths");
  MPI_Finalize();
  return 0;
}
