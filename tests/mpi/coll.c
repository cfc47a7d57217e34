/* coll: every collective, blocking and then its non-blocking form (the
 * same checks, MPI_I... + MPI_Wait), with MPI_IN_PLACE where MPI allows
 * it; the predefined reduction operators on MPI_INT, MPI_MINLOC /
 * MPI_MAXLOC on MPI_2INT and MPI_DOUBLE_INT, and MPI_Op_create user
 * operators (commutative, and a non-commutative 2x2 matrix product that
 * must come out in rank order); then several non-blocking collectives in
 * flight at once. Inputs are small integers: every result is exact. */
#include "mpitest.h"

#define N 300
static int rank, size, nb;
static MPI_Comm comm = MPI_COMM_WORLD;

/* the blocking call, or the non-blocking one (given rq_) and MPI_Wait */
#define COLL(blocking, nonblocking)                 \
  do {                                              \
    if (nb) {                                       \
      MPI_Request rq_ = MPI_REQUEST_NULL;           \
      CHECK_MPI(nonblocking);                       \
      CHECK_MPI(MPI_Wait(&rq_, MPI_STATUS_IGNORE)); \
    } else {                                        \
      CHECK_MPI(blocking);                          \
    }                                               \
  } while (0)

static int val(int r, int i) {
  return r * 100 + i + nb;
}
static int sumval(int i) {
  return 100 * size * (size - 1) / 2 + size * (i + nb);
}

static void bcast_reduce(void) {
  int a[N], b[N], root = size - 1;
  for (int i = 0; i < N; i++) a[i] = rank == root ? i * 3 + 7 + nb : -1;
  COLL(MPI_Bcast(a, N, MPI_INT, root, comm),
       MPI_Ibcast(a, N, MPI_INT, root, comm, &rq_));
  for (int i = 0; i < N; i++) CHECK_EQ(a[i], i * 3 + 7 + nb);

  root = 1 % size;
  for (int i = 0; i < N; i++) {
    a[i] = val(rank, i);
    b[i] = -1;
  }
  COLL(MPI_Reduce(a, b, N, MPI_INT, MPI_SUM, root, comm),
       MPI_Ireduce(a, b, N, MPI_INT, MPI_SUM, root, comm, &rq_));
  for (int i = 0; i < N; i++) CHECK_EQ(b[i], rank == root ? sumval(i) : -1);
  /* in place at the root */
  const void *src = rank == root ? MPI_IN_PLACE : a;
  COLL(MPI_Reduce(src, a, N, MPI_INT, MPI_SUM, root, comm),
       MPI_Ireduce(src, a, N, MPI_INT, MPI_SUM, root, comm, &rq_));
  for (int i = 0; i < N; i++)
    CHECK_EQ(a[i], rank == root ? sumval(i) : val(rank, i));

  COLL(MPI_Barrier(comm), MPI_Ibarrier(comm, &rq_));
}

/* every predefined operator on MPI_INT through allreduce */
static void allreduce_ops(void) {
  int a[N], b[N];
  MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX,  MPI_MIN, MPI_LAND,
                  MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
  for (unsigned o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    for (int i = 0; i < N; i++) {
      a[i] = o == 1             ? (rank + i) % 3 + 1
             : o >= 4 && o <= 6 ? (rank + i) % 3 == 0
                                : (rank * 37 + i * 11) % 64;
      b[i] = -7;
    }
    COLL(MPI_Allreduce(a, b, N, MPI_INT, ops[o], comm),
         MPI_Iallreduce(a, b, N, MPI_INT, ops[o], comm, &rq_));
    for (int i = 0; i < N; i++) {
      long long e = o == 1 ? 1 : o == 3 || o == 4 || o == 7 ? -1 : 0;
      for (int r = 0; r < size; r++) {
        int x = o == 1             ? (r + i) % 3 + 1
                : o >= 4 && o <= 6 ? (r + i) % 3 == 0
                                   : (r * 37 + i * 11) % 64;
        switch (o) {
          case 0:
            e += x;
            break;
          case 1:
            e *= x;
            break;
          case 2:
            e = x > e ? x : e;
            break;
          case 3:
            e = (e < 0 || x < e) ? x : e;
            break;
          case 4:
            e = (e < 0 ? 1 : e) && x;
            break;
          case 5:
            e = e || x;
            break;
          case 6:
            e = !e != !x;
            break;
          case 7:
            e = e & x;
            break;
          case 8:
            e = e | x;
            break;
          default:
            e = e ^ x;
        }
      }
      CHECK_EQ(b[i], e);
    }
  }
  /* in place */
  for (int i = 0; i < N; i++) a[i] = val(rank, i);
  COLL(MPI_Allreduce(MPI_IN_PLACE, a, N, MPI_INT, MPI_SUM, comm),
       MPI_Iallreduce(MPI_IN_PLACE, a, N, MPI_INT, MPI_SUM, comm, &rq_));
  for (int i = 0; i < N; i++) CHECK_EQ(a[i], sumval(i));
}

static void gathers(void) {
  int root = size / 2, mine[3] = {rank, rank * rank, nb}, all[3 * 128], k;
  for (k = 0; k < 3 * size; k++) all[k] = -1;
  COLL(MPI_Gather(mine, 3, MPI_INT, all, 3, MPI_INT, root, comm),
       MPI_Igather(mine, 3, MPI_INT, all, 3, MPI_INT, root, comm, &rq_));
  for (int r = 0; rank == root && r < size; r++) {
    CHECK_EQ(all[3 * r], r);
    CHECK_EQ(all[3 * r + 1], r * r);
    CHECK_EQ(all[3 * r + 2], nb);
  }
  /* in place at the root: its own block is already there */
  if (rank == root)
    for (k = 0; k < 3 * size; k++) all[k] = k / 3 == root ? 1000 + k : -1;
  const void *src = rank == root ? MPI_IN_PLACE : mine;
  COLL(MPI_Gather(src, 3, MPI_INT, all, 3, MPI_INT, root, comm),
       MPI_Igather(src, 3, MPI_INT, all, 3, MPI_INT, root, comm, &rq_));
  for (int r = 0; rank == root && r < size; r++)
    CHECK_EQ(all[3 * r + 1], r == root ? 1000 + 3 * r + 1 : r * r);

  /* gatherv: rank r sends r + 1 ints to offset 2r^2 */
  int counts[128], displs[128], piece[128], total = 0;
  for (int r = 0; r < size; r++) {
    counts[r] = r + 1;
    displs[r] = 2 * r * r;
    total = displs[r] + counts[r];
  }
  int *v = malloc(sizeof(int) * (total + 1));
  CHECK(v != NULL);
  for (k = 0; k <= rank; k++) piece[k] = rank * 1000 + k + nb;
  for (k = 0; k < total; k++) v[k] = -1;
  COLL(MPI_Gatherv(piece, rank + 1, MPI_INT, v, counts, displs, MPI_INT, root,
                   comm),
       MPI_Igatherv(piece, rank + 1, MPI_INT, v, counts, displs, MPI_INT, root,
                    comm, &rq_));
  for (int r = 0; rank == root && r < size; r++)
    for (k = 0; k <= r; k++) CHECK_EQ(v[displs[r] + k], r * 1000 + k + nb);

  /* allgather, in place too, and allgatherv */
  for (k = 0; k < 3 * size; k++) all[k] = -1;
  COLL(MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, comm),
       MPI_Iallgather(mine, 3, MPI_INT, all, 3, MPI_INT, comm, &rq_));
  for (int r = 0; r < size; r++) CHECK_EQ(all[3 * r + 1], r * r);
  for (k = 0; k < 3 * size; k++) all[k] = k / 3 == rank ? k * 5 : -1;
  COLL(MPI_Allgather(MPI_IN_PLACE, 3, MPI_INT, all, 3, MPI_INT, comm),
       MPI_Iallgather(MPI_IN_PLACE, 3, MPI_INT, all, 3, MPI_INT, comm, &rq_));
  for (k = 0; k < 3 * size; k++) CHECK_EQ(all[k], k * 5);
  for (k = 0; k < total; k++) v[k] = -1;
  COLL(MPI_Allgatherv(piece, rank + 1, MPI_INT, v, counts, displs, MPI_INT,
                      comm),
       MPI_Iallgatherv(piece, rank + 1, MPI_INT, v, counts, displs, MPI_INT,
                       comm, &rq_));
  for (int r = 0; r < size; r++)
    for (k = 0; k <= r; k++) CHECK_EQ(v[displs[r] + k], r * 1000 + k + nb);
  for (int r = 0; r + 1 < size; r++) /* the gaps stay untouched */
    for (k = displs[r] + counts[r]; k < displs[r + 1]; k++) CHECK_EQ(v[k], -1);
  free(v);
}

static void scatters(void) {
  int root = size - 1, all[4 * 128], mine[4], k;
  for (k = 0; k < 4 * size; k++) all[k] = k * 7 + nb;
  COLL(MPI_Scatter(all, 4, MPI_INT, mine, 4, MPI_INT, root, comm),
       MPI_Iscatter(all, 4, MPI_INT, mine, 4, MPI_INT, root, comm, &rq_));
  for (k = 0; k < 4; k++) CHECK_EQ(mine[k], (4 * rank + k) * 7 + nb);
  /* in place at the root: its block stays in the send buffer */
  void *dst = rank == root ? MPI_IN_PLACE : mine;
  COLL(MPI_Scatter(all, 4, MPI_INT, dst, 4, MPI_INT, root, comm),
       MPI_Iscatter(all, 4, MPI_INT, dst, 4, MPI_INT, root, comm, &rq_));
  for (k = 0; rank != root && k < 4; k++)
    CHECK_EQ(mine[k], (4 * rank + k) * 7 + nb);

  /* scatterv: rank r gets (r % 3) + 1 ints from offset 4r */
  int counts[128], displs[128];
  for (int r = 0; r < size; r++) {
    counts[r] = r % 3 + 1;
    displs[r] = 4 * r;
  }
  for (k = 0; k < 4; k++) mine[k] = -1;
  COLL(MPI_Scatterv(all, counts, displs, MPI_INT, mine, counts[rank], MPI_INT,
                    root, comm),
       MPI_Iscatterv(all, counts, displs, MPI_INT, mine, counts[rank], MPI_INT,
                     root, comm, &rq_));
  for (k = 0; k < 4; k++)
    CHECK_EQ(mine[k], k < counts[rank] ? (4 * rank + k) * 7 + nb : -1);
}

static void alltoalls(void) {
  int s[3 * 128], r[3 * 128], k;
  /* block j of rank i holds i*1000 + j*10 + k */
  for (int j = 0; j < size; j++)
    for (k = 0; k < 3; k++) {
      s[3 * j + k] = rank * 1000 + j * 10 + k + nb;
      r[3 * j + k] = -1;
    }
  COLL(MPI_Alltoall(s, 3, MPI_INT, r, 3, MPI_INT, comm),
       MPI_Ialltoall(s, 3, MPI_INT, r, 3, MPI_INT, comm, &rq_));
  for (int j = 0; j < size; j++)
    for (k = 0; k < 3; k++)
      CHECK_EQ(r[3 * j + k], j * 1000 + rank * 10 + k + nb);
  if (!nb) { /* in place (MPI 2.2; no non-blocking form before MPI 4) */
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s, 3, MPI_INT, comm);
    for (int j = 0; j < size; j++)
      for (k = 0; k < 3; k++) CHECK_EQ(s[3 * j + k], j * 1000 + rank * 10 + k);
  }

  /* alltoallv: i sends (i + j) % 3 + 1 ints to j, packed */
  int sc[128], sd[128], rc[128], rd[128], so = 0, ro = 0;
  for (int j = 0; j < size; j++) {
    sc[j] = (rank + j) % 3 + 1;
    rc[j] = (j + rank) % 3 + 1;
    sd[j] = so;
    rd[j] = ro + j; /* a one-element gap before each block */
    so += sc[j];
    ro += rc[j] + 1;
    for (k = 0; k < sc[j]; k++) s[sd[j] + k] = rank * 1000 + j * 10 + k + nb;
  }
  for (k = 0; k < ro + size; k++) r[k] = -1;
  COLL(MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, comm),
       MPI_Ialltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, comm, &rq_));
  for (int j = 0; j < size; j++) {
    for (k = 0; k < rc[j]; k++)
      CHECK_EQ(r[rd[j] + k], j * 1000 + rank * 10 + k + nb);
    CHECK_EQ(r[rd[j] + rc[j]], -1);
  }

  /* alltoallw: to and from j, 2 ints when i + j is even, else 1 double;
   * byte displacements */
  char sb[16 * 128], rb[16 * 128];
  int wc[128], wd[128];
  MPI_Datatype wt[128];
  for (int j = 0; j < size; j++) {
    int even = (rank + j) % 2 == 0;
    wc[j] = even ? 2 : 1;
    wt[j] = even ? MPI_INT : MPI_DOUBLE;
    wd[j] = 16 * j;
    if (even) {
      int x[2] = {rank * 100 + j, -(rank * 100 + j) - nb};
      memcpy(sb + 16 * j, x, sizeof x);
    } else {
      double d = rank + j / 4.0 + nb;
      memcpy(sb + 16 * j, &d, sizeof d);
    }
  }
  memset(rb, 0, sizeof rb);
  COLL(MPI_Alltoallw(sb, wc, wd, wt, rb, wc, wd, wt, comm),
       MPI_Ialltoallw(sb, wc, wd, wt, rb, wc, wd, wt, comm, &rq_));
  for (int j = 0; j < size; j++) {
    if ((rank + j) % 2 == 0) {
      int x[2];
      memcpy(x, rb + 16 * j, sizeof x);
      CHECK_EQ(x[0], j * 100 + rank);
      CHECK_EQ(x[1], -(j * 100 + rank) - nb);
    } else {
      double d;
      memcpy(&d, rb + 16 * j, sizeof d);
      CHECK(d == j + rank / 4.0 + nb);
    }
  }
}

static void scans(void) {
  int a[N], b[N], k;
  /* reduce_scatter: rank r gets r + 1 sums */
  int counts[128], total = 0, off = 0;
  for (int r = 0; r < size; r++) {
    counts[r] = r + 1;
    if (r < rank) off += r + 1;
    total += r + 1;
  }
  CHECK(total <= N);
  for (k = 0; k < N; k++) a[k] = val(rank, k);
  COLL(MPI_Reduce_scatter(a, b, counts, MPI_INT, MPI_SUM, comm),
       MPI_Ireduce_scatter(a, b, counts, MPI_INT, MPI_SUM, comm, &rq_));
  for (k = 0; k <= rank; k++) CHECK_EQ(b[k], sumval(off + k));
  /* reduce_scatter_block: 2 each, and in place */
  COLL(MPI_Reduce_scatter_block(a, b, 2, MPI_INT, MPI_SUM, comm),
       MPI_Ireduce_scatter_block(a, b, 2, MPI_INT, MPI_SUM, comm, &rq_));
  CHECK_EQ(b[0], sumval(2 * rank));
  CHECK_EQ(b[1], sumval(2 * rank + 1));
  COLL(MPI_Reduce_scatter_block(MPI_IN_PLACE, a, 2, MPI_INT, MPI_SUM, comm),
       MPI_Ireduce_scatter_block(MPI_IN_PLACE, a, 2, MPI_INT, MPI_SUM, comm,
                                 &rq_));
  CHECK_EQ(a[0], sumval(2 * rank));
  CHECK_EQ(a[1], sumval(2 * rank + 1));

  /* scan and exscan of rank + 1: prefix sums */
  int x = rank + 1 + nb, y = -1;
  COLL(MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, comm),
       MPI_Iscan(&x, &y, 1, MPI_INT, MPI_SUM, comm, &rq_));
  CHECK_EQ(y, (rank + 1) * (rank + 2) / 2 + (rank + 1) * nb);
  y = -1;
  COLL(MPI_Exscan(&x, &y, 1, MPI_INT, MPI_SUM, comm),
       MPI_Iexscan(&x, &y, 1, MPI_INT, MPI_SUM, comm, &rq_));
  if (rank > 0) /* undefined on rank 0 */
    CHECK_EQ(y, rank * (rank + 1) / 2 + rank * nb);
  COLL(MPI_Scan(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, comm),
       MPI_Iscan(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, comm, &rq_));
  CHECK_EQ(x, rank + 1 + nb);
}

static void locs(void) {
  struct {
    int v, i;
  } a[4], b[4];
  struct {
    double v;
    int i;
  } c[4], d[4];
  for (int k = 0; k < 4; k++) {
    a[k].v = (rank * 5 + k) % 3;
    a[k].i = rank;
    c[k].v = ((rank * 7 + k) % 4) * 0.5;
    c[k].i = rank + 10;
  }
  for (int m = 0; m < 2; m++) {
    MPI_Op op = m ? MPI_MAXLOC : MPI_MINLOC;
    COLL(MPI_Allreduce(a, b, 4, MPI_2INT, op, comm),
         MPI_Iallreduce(a, b, 4, MPI_2INT, op, comm, &rq_));
    COLL(MPI_Allreduce(c, d, 4, MPI_DOUBLE_INT, op, comm),
         MPI_Iallreduce(c, d, 4, MPI_DOUBLE_INT, op, comm, &rq_));
    for (int k = 0; k < 4; k++) {
      int bv = -1, bi = -1, di = -1;
      double dv = -1;
      for (int r = 0; r < size; r++) { /* ties: the lowest index */
        int v = (r * 5 + k) % 3;
        double w = ((r * 7 + k) % 4) * 0.5;
        if (bi < 0 || (m ? v > bv : v < bv)) {
          bv = v;
          bi = r;
        }
        if (di < 0 || (m ? w > dv : w < dv)) {
          dv = w;
          di = r + 10;
        }
      }
      CHECK_EQ(b[k].v, bv);
      CHECK_EQ(b[k].i, bi);
      CHECK(d[k].v == dv);
      CHECK_EQ(d[k].i, di);
    }
  }
}

/* user operators: |x| max (commutative), 2x2 matrix product mod 1009 */
static void absmax(void *in, void *inout, int *len, MPI_Datatype *t) {
  int *a = in, *b = inout;
  (void)t;
  for (int i = 0; i < *len; i++) {
    int x = a[i] < 0 ? -a[i] : a[i], y = b[i] < 0 ? -b[i] : b[i];
    b[i] = x > y ? x : y;
  }
}
static void matmul(void *in, void *inout, int *len, MPI_Datatype *t) {
  int *a = in, *b = inout;
  (void)t;
  for (int k = 0; k < *len; k++, a += 4, b += 4) {
    int m[4] = {
        (a[0] * b[0] + a[1] * b[2]) % 1009, (a[0] * b[1] + a[1] * b[3]) % 1009,
        (a[2] * b[0] + a[3] * b[2]) % 1009, (a[2] * b[1] + a[3] * b[3]) % 1009};
    memcpy(b, m, sizeof m);
  }
}
static void mat_of(int r, int k, int *m) {
  m[0] = r + 1 + k;
  m[1] = 2 + r * k;
  m[2] = r + 3;
  m[3] = 1 + k;
}

static void user_ops(void) {
  MPI_Op amax, mm;
  MPI_Datatype mat;
  MPI_Op_create(absmax, 1, &amax);
  MPI_Op_create(matmul, 0, &mm);
  MPI_Type_contiguous(4, MPI_INT, &mat);
  MPI_Type_commit(&mat);

  int a[N], b[N];
  for (int i = 0; i < N; i++)
    a[i] = (rank * 13 + i) % 50 * ((rank + i) % 2 ? -1 : 1);
  COLL(MPI_Allreduce(a, b, N, MPI_INT, amax, comm),
       MPI_Iallreduce(a, b, N, MPI_INT, amax, comm, &rq_));
  for (int i = 0; i < N; i++) {
    int e = 0;
    for (int r = 0; r < size; r++)
      e = (r * 13 + i) % 50 > e ? (r * 13 + i) % 50 : e;
    CHECK_EQ(b[i], e);
  }

  /* M_0 M_1 ... M_{n-1} at the root, for all, and the prefixes (scan) */
  int m[3][4], out[3][4], e[128][3][4];
  for (int k = 0; k < 3; k++) mat_of(rank, k, m[k]);
  for (int k = 0; k < 3; k++) {
    mat_of(0, k, e[0][k]);
    for (int r = 1; r < size; r++) {
      int x[4], one = 1;
      memcpy(e[r][k], e[r - 1][k], sizeof x);
      mat_of(r, k, x);
      memcpy(out[0], e[r][k], sizeof x); /* product so far, then x */
      matmul(out[0], x, &one, &mat);
      memcpy(e[r][k], x, sizeof x);
    }
  }
  memset(out, 0, sizeof out);
  COLL(MPI_Reduce(m, out, 3, mat, mm, 0, comm),
       MPI_Ireduce(m, out, 3, mat, mm, 0, comm, &rq_));
  if (rank == 0) CHECK(memcmp(out, e[size - 1], sizeof out) == 0);
  memset(out, 0, sizeof out);
  COLL(MPI_Allreduce(m, out, 3, mat, mm, comm),
       MPI_Iallreduce(m, out, 3, mat, mm, comm, &rq_));
  CHECK(memcmp(out, e[size - 1], sizeof out) == 0);
  memset(out, 0, sizeof out);
  COLL(MPI_Scan(m, out, 3, mat, mm, comm),
       MPI_Iscan(m, out, 3, mat, mm, comm, &rq_));
  CHECK(memcmp(out, e[rank], sizeof out) == 0);

  MPI_Op_free(&amax);
  MPI_Op_free(&mm);
  CHECK(mm == MPI_OP_NULL);
  MPI_Type_free(&mat);
}

/* four non-blocking collectives in flight at once, completed together */
static void overlapped(void) {
  MPI_Request rq[4];
  int a[N], b[N], c = rank == 0 ? 77 : -1, s[128], r[128];
  for (int i = 0; i < N; i++) a[i] = val(rank, i);
  for (int j = 0; j < size; j++) s[j] = rank * 1000 + j;
  MPI_Iallreduce(a, b, N, MPI_INT, MPI_SUM, comm, &rq[0]);
  MPI_Ibcast(&c, 1, MPI_INT, 0, comm, &rq[1]);
  MPI_Ibarrier(comm, &rq[2]);
  MPI_Ialltoall(s, 1, MPI_INT, r, 1, MPI_INT, comm, &rq[3]);
  MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
  for (int i = 0; i < N; i++) CHECK_EQ(b[i], sumval(i));
  CHECK_EQ(c, 77);
  for (int j = 0; j < size; j++) CHECK_EQ(r[j], j * 1000 + rank);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size <= 128);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN); /* CHECK_MPI sees codes */
  for (nb = 0; nb < 2; nb++) {
    bcast_reduce();
    allreduce_ops();
    gathers();
    scatters();
    alltoalls();
    scans();
    locs();
    user_ops();
  }
  overlapped();
  mt_ok("coll");
  MPI_Finalize();
  return 0;
}
