/*
 * Reductions: MPI_Reduce, Allreduce, Reduce_scatter(_block), Scan, Exscan
 * and their MPI_I* forms. An (op, datatype) pair nexar reduces
 * (nxm_op_native) goes to the nexar collective on c->nc, contiguous
 * buffers as they are, derived types of one basic type packed. Every other
 * pair (user ops, commutative or not; MPI_MINLOC / MAXLOC; logical ops;
 * types nexar lacks) is reduced by the layer from point-to-point messages
 * on c->cc in rank order, so that a non-commutative op sees the canonical
 * order (((x0 op x1) op x2) ...):
 *  - reduce: binomial tree to rank 0 in which each parent combines its
 *    lower block with the higher one received (Thakur, Rabenseifner &
 *    Gropp 2005, "Optimization of collective communication operations in
 *    MPICH", the non-commutative form), then rank 0 to the root;
 *  - allreduce: that reduce, then a binomial-tree bcast from rank 0;
 *  - reduce_scatter(_block): that reduce, then rank 0 sends each block;
 *  - scan / exscan: a linear chain, rank r combining the prefix from
 *    r - 1 with its own data and passing it to r + 1.
 */
#include <stdint.h>
#include <stdlib.h>

#include "coll_int.h"

enum { RED_REDUCE, RED_ALLREDUCE, RED_RS, RED_SCAN, RED_EXSCAN };

typedef struct red {
  int kind; /* RED_* */
  const char *fn;
  const void *sendbuf; /* MPI_IN_PLACE: the input is in recvbuf */
  void *recvbuf;
  size_t count;      /* input elements */
  const int *counts; /* RED_RS: output elements of each rank */
  int block;         /* RED_RS: reduce_scatter_block (equal counts) */
  int root;          /* RED_REDUCE */
  nxm_dtype_t *t;
  nxm_op_t *op;
} red_t;

/* Element |i| of a buffer of work type |wt|. */
static void *at(void *buf, size_t i, const nxm_dtype_t *wt) {
  return (uint8_t *)buf + (MPI_Aint)i * wt->extent;
}

/* Binomial-tree reduce to rank 0 in rank order; returns the buffer that
 * holds this rank's last data (the result on rank 0). */
static void *tree_reduce(nxm_cs_t *s, nxm_comm_t *c, const red_t *a, void *acc,
                         void *tmp, size_t wc, const nxm_dtype_t *wt, int tag) {
  int r = c->rank, n = c->size;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (r & mask) {
      nxm_cs_send(s, acc, wc, wt, r - mask, tag);
      nxm_cs_fence(s);
      return acc;
    }
    if (r + mask < n) {
      nxm_cs_recv(s, tmp, wc, wt, r + mask, tag);
      nxm_cs_fence(s);
      /* Ranks [r, r + mask) op ranks [r + mask, r + 2 mask). */
      nxm_cs_apply(s, acc, tmp, a->count, a->t);
      void *x = acc;
      acc = tmp;
      tmp = x;
    }
  }
  return acc;
}

/* Binomial-tree bcast of |buf| from rank 0. */
static void tree_bcast(nxm_cs_t *s, nxm_comm_t *c, void *buf, size_t wc,
                       const nxm_dtype_t *wt, int tag) {
  int r = c->rank, n = c->size, mask = 1;
  for (; mask < n; mask <<= 1) {
    if (r & mask) {
      nxm_cs_recv(s, buf, wc, wt, r - mask, tag);
      nxm_cs_fence(s);
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (r + mask < n) nxm_cs_send(s, buf, wc, wt, r + mask, tag);
  nxm_cs_fence(s);
}

/* The layer-built schedule of |a|. */
static int build(nxm_comm_t *c, const red_t *a, nxm_req_t **out) {
  nxm_cs_t *s = nxm_cs_new(c, a->op);
  if (!s) return nxm_err(c, MPI_ERR_NO_MEM, a->fn, "out of memory");
  const nxm_dtype_t *t = a->t, *wt;
  size_t scale;
  nxm_coll_work(a->op, t, &wt, &scale);
  size_t wc = a->count * scale;
  nxm_cs_ref(s, t);
  int tag = nxm_coll_tag(c), r = c->rank, n = c->size;
  const void *in = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
  void *acc = nxm_cs_tbuf(s, wc, wt), *tmp = nxm_cs_tbuf(s, wc, wt);
  if (!acc || !tmp || nxm_copy(in, a->count, t, acc, wc, wt) != MPI_SUCCESS) {
    nxm_cs_free(s);
    return nxm_err(c, MPI_ERR_NO_MEM, a->fn, "out of memory");
  }
  void *res;
  switch (a->kind) {
    case RED_REDUCE:
      res = tree_reduce(s, c, a, acc, tmp, wc, wt, tag);
      if (a->root == 0 && r == 0)
        nxm_cs_copy(s, res, wc, wt, a->recvbuf, a->count, t);
      if (a->root != 0 && r == 0) nxm_cs_send(s, res, wc, wt, a->root, tag);
      if (a->root != 0 && r == a->root)
        nxm_cs_recv(s, a->recvbuf, a->count, t, 0, tag);
      break;
    case RED_ALLREDUCE:
      res = tree_reduce(s, c, a, acc, tmp, wc, wt, tag);
      tree_bcast(s, c, res, wc, wt, tag);
      nxm_cs_copy(s, res, wc, wt, a->recvbuf, a->count, t);
      break;
    case RED_RS:
      res = tree_reduce(s, c, a, acc, tmp, wc, wt, tag);
      if (r != 0) {
        nxm_cs_recv(s, a->recvbuf, (size_t)a->counts[r], t, 0, tag);
        break;
      }
      for (size_t i = 0, off = 0; i < (size_t)n; i++) {
        size_t k = (size_t)a->counts[i];
        void *blk = at(res, off * scale, wt);
        if (i == 0)
          nxm_cs_copy(s, blk, k * scale, wt, a->recvbuf, k, t);
        else
          nxm_cs_send(s, blk, k * scale, wt, (int)i, tag);
        off += k;
      }
      break;
    case RED_SCAN:
      if (r > 0) {
        nxm_cs_recv(s, tmp, wc, wt, r - 1, tag);
        nxm_cs_fence(s);
        nxm_cs_apply(s, tmp, acc, a->count, t); /* (x0 ... x(r-1)) op xr */
      }
      if (r + 1 < n) nxm_cs_send(s, acc, wc, wt, r + 1, tag);
      nxm_cs_copy(s, acc, wc, wt, a->recvbuf, a->count, t);
      break;
    default: /* RED_EXSCAN */
      if (r > 0) {
        nxm_cs_recv(s, tmp, wc, wt, r - 1, tag);
        nxm_cs_fence(s);
        nxm_cs_copy(s, tmp, wc, wt, a->recvbuf, a->count, t);
        if (r + 1 < n) nxm_cs_apply(s, tmp, acc, a->count, t);
      }
      if (r + 1 < n) nxm_cs_send(s, acc, wc, wt, r + 1, tag);
      break;
  }
  nxm_cs_fence(s);
  return nxm_cs_start(s, a->fn, out);
}

/* An image for a reduce-scatter's output: |total| input elements when in
 * place (the result, |mine| elements, goes to the start of recvbuf). */
static void *rs_image(nxm_cs_t *s, const red_t *a, size_t total, size_t mine) {
  if (a->sendbuf != MPI_IN_PLACE)
    return nxm_cs_image(s, a->recvbuf, mine, a->t, 0, 1);
  void *img = nxm_cs_image(s, a->recvbuf, total, a->t, 1, 0);
  if (img && img != a->recvbuf) {
    nxm_cs_ref(s, a->t);
    nxm_cs_copy(s, img, mine * (size_t)a->t->size, nxm_byte(), a->recvbuf, mine,
                a->t);
  }
  return img;
}

/* The blocking fast path of native(): MPI_Allreduce / MPI_Reduce on
 * contiguous buffers, while no layer-built schedule needs this thread's
 * progress (mpi/progress.c), is the blocking nexar collective on the
 * user's buffers: no request, no state. Returns -1 when it does not
 * apply. */
static int native_now(nxm_comm_t *c, const red_t *a, nexar_op_t nop,
                      nexar_dtype_t ndt, size_t nel) {
  if ((a->kind != RED_ALLREDUCE && a->kind != RED_REDUCE) || !a->t->contig ||
      nxm_progress_active())
    return -1;
  const void *s = a->sendbuf == MPI_IN_PLACE ? NEXAR_IN_PLACE : a->sendbuf;
  int rc = a->kind == RED_ALLREDUCE
               ? nexar_allreduce(c->nc, s, a->recvbuf, nel, ndt, nop)
               : nexar_reduce(c->nc, s, c->rank == a->root ? a->recvbuf : NULL,
                              nel, ndt, nop, a->root);
  return rc == NEXAR_OK ? MPI_SUCCESS : nxm_err_nexar(c, a->fn, rc);
}

/* The nexar collective of |a| on (nop, ndt), counts scaled by |scale|. */
static int native(nxm_comm_t *c, const red_t *a, nexar_op_t nop,
                  nexar_dtype_t ndt, size_t scale, nxm_req_t **out) {
  if (*out == NXM_REQ_BLOCKING) {
    int cls = native_now(c, a, nop, ndt, a->count * scale);
    if (cls != -1) {
      *out = NULL;
      return cls;
    }
  }
  nxm_cs_t *s = nxm_cs_new(c, a->op);
  if (!s) return nxm_err(c, MPI_ERR_NO_MEM, a->fn, "out of memory");
  int ip = a->sendbuf == MPI_IN_PLACE, n = c->size;
  const nxm_dtype_t *t = a->t;
  size_t nel = a->count * scale, *counts = NULL;
  const void *simg =
      ip ? NEXAR_IN_PLACE : nxm_cs_image(s, a->sendbuf, a->count, t, 1, 0);
  void *rimg = NULL;
  if (a->kind == RED_RS) {
    counts = nxm_cs_alloc(s, (size_t)n * sizeof *counts);
    for (int i = 0; counts && i < n; i++)
      counts[i] = (size_t)a->counts[i] * scale;
    rimg = rs_image(s, a, a->count, (size_t)a->counts[c->rank]);
  } else if (a->kind != RED_REDUCE || c->rank == a->root) {
    /* Exscan leaves rank 0's buffer as it was: pack it too. */
    rimg = nxm_cs_image(s, a->recvbuf, a->count, t, ip || a->kind == RED_EXSCAN,
                        1);
  }
  nxm_req_t *r;
  int cls = nxm_cs_native(s, a->fn, &r);
  if (cls != MPI_SUCCESS) return cls;
  nexar_comm_t *nc = c->nc;
  nexar_req_t **q = &r->sub[0];
  int rc;
  switch (a->kind) {
    case RED_REDUCE:
      rc = nexar_ireduce(nc, simg, rimg, nel, ndt, nop, a->root, q);
      break;
    case RED_ALLREDUCE:
      rc = nexar_iallreduce(nc, simg, rimg, nel, ndt, nop, q);
      break;
    case RED_RS:
      rc = a->block
               ? nexar_ireduce_scatter_block(nc, simg, rimg, counts[0], ndt,
                                             nop, q)
               : nexar_ireduce_scatter(nc, simg, rimg, counts, ndt, nop, q);
      break;
    case RED_SCAN:
      rc = nexar_iscan(nc, simg, rimg, nel, ndt, nop, q);
      break;
    default:
      rc = nexar_iexscan(nc, simg, rimg, nel, ndt, nop, q);
      break;
  }
  if (rc != NEXAR_OK) return nxm_cs_fail(r, a->fn, rc);
  *out = r;
  return MPI_SUCCESS;
}

/* Checks |a| (its counts already), then starts it. */
static int red_start(nxm_comm_t *c, red_t *a, MPI_Datatype datatype, MPI_Op op,
                     int count, nxm_req_t **out) {
  const char *fn = a->fn;
  int ip = a->sendbuf == MPI_IN_PLACE;
  int root = a->kind != RED_REDUCE || c->rank == a->root;
  int cls = MPI_SUCCESS;
  if (a->kind == RED_REDUCE) cls = nxm_check_root(c, fn, a->root);
  if (cls == MPI_SUCCESS && ip && !root)
    cls = nxm_err(c, MPI_ERR_BUFFER, fn, "MPI_IN_PLACE off the root");
  if (cls == MPI_SUCCESS)
    cls = nxm_coll_type(c, fn, ip ? a->recvbuf : a->sendbuf, count, datatype,
                        &a->t);
  if (cls == MPI_SUCCESS && root && a->kind != RED_RS)
    cls = nxm_coll_buf(c, fn, a->recvbuf, count, a->t);
  if (cls == MPI_SUCCESS && a->count > SIZE_MAX / 4 / ((size_t)a->t->size + 1))
    cls = nxm_err(c, MPI_ERR_COUNT, fn, "count too large");
  if (cls == MPI_SUCCESS) cls = nxm_coll_op(c, fn, op, a->t, &a->op);
  if (cls != MPI_SUCCESS) return cls;
  nexar_op_t nop;
  nexar_dtype_t ndt;
  MPI_Aint scale;
  if (nxm_op_native(a->op, a->t, &nop, &ndt, &scale))
    return native(c, a, nop, ndt, (size_t)scale, out);
  return build(c, a, out);
}

static int reduce_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                        void *recvbuf, int count, MPI_Datatype datatype,
                        MPI_Op op, int root, nxm_req_t **out) {
  red_t a = {.kind = RED_REDUCE,
             .fn = fn,
             .sendbuf = sendbuf,
             .recvbuf = recvbuf,
             .count = (size_t)count,
             .root = root};
  return red_start(c, &a, datatype, op, count, out);
}

NXM_COLL_PAIR(Reduce, Ireduce, reduce_start,
              (const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm),
              (sendbuf, recvbuf, count, datatype, op, root))

/* MPI_<Name> / MPI_<IName>(sendbuf, recvbuf, count, datatype, op, comm)
 * as a reduction of kind |K|. */
#define RED_PAIR(Name, IName, K)                                              \
  static int start_##Name(nxm_comm_t *c, const char *fn, const void *sendbuf, \
                          void *recvbuf, int count, MPI_Datatype datatype,    \
                          MPI_Op op, nxm_req_t **out) {                       \
    red_t a = {.kind = K,                                                     \
               .fn = fn,                                                      \
               .sendbuf = sendbuf,                                            \
               .recvbuf = recvbuf,                                            \
               .count = (size_t)count};                                       \
    return red_start(c, &a, datatype, op, count, out);                        \
  }                                                                           \
  NXM_COLL_PAIR(Name, IName, start_##Name,                                    \
                (const void *sendbuf, void *recvbuf, int count,               \
                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),            \
                (sendbuf, recvbuf, count, datatype, op))

RED_PAIR(Allreduce, Iallreduce, RED_ALLREDUCE)
RED_PAIR(Scan, Iscan, RED_SCAN)
RED_PAIR(Exscan, Iexscan, RED_EXSCAN)

/* Reduce_scatter with per-rank |counts| (reduce_scatter_block passes
 * |size| copies of its count). */
static int rs_common(nxm_comm_t *c, const char *fn, const void *sendbuf,
                     void *recvbuf, const int *counts, int block,
                     MPI_Datatype datatype, MPI_Op op, nxm_req_t **out) {
  int cls = nxm_coll_counts(c, fn, c->size, counts, counts);
  if (cls != MPI_SUCCESS) return cls;
  size_t total = 0;
  for (int i = 0; i < c->size; i++) total += (size_t)counts[i];
  if (total > INT32_MAX)
    return nxm_err(c, MPI_ERR_COUNT, fn, "%zu elements in all", total);
  red_t a = {.kind = RED_RS,
             .fn = fn,
             .sendbuf = sendbuf,
             .recvbuf = recvbuf,
             .count = total,
             .counts = counts,
             .block = block};
  cls = red_start(c, &a, datatype, op, (int)total, out);
  return cls;
}

static int rs_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                    void *recvbuf, const int *counts, MPI_Datatype datatype,
                    MPI_Op op, nxm_req_t **out) {
  return rs_common(c, fn, sendbuf, recvbuf, counts, 0, datatype, op, out);
}

static int rsb_start(nxm_comm_t *c, const char *fn, const void *sendbuf,
                     void *recvbuf, int recvcount, MPI_Datatype datatype,
                     MPI_Op op, nxm_req_t **out) {
  if (recvcount < 0)
    return nxm_err(c, MPI_ERR_COUNT, fn, "recvcount %d", recvcount);
  int *counts = malloc((size_t)c->size * sizeof *counts);
  if (!counts) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  for (int i = 0; i < c->size; i++) counts[i] = recvcount;
  int cls = rs_common(c, fn, sendbuf, recvbuf, counts, 1, datatype, op, out);
  free(counts);
  return cls;
}

NXM_COLL_PAIR(Reduce_scatter, Ireduce_scatter, rs_start,
              (const void *sendbuf, void *recvbuf, const int recvcounts[],
               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
              (sendbuf, recvbuf, recvcounts, datatype, op))

NXM_COLL_PAIR(Reduce_scatter_block, Ireduce_scatter_block, rsb_start,
              (const void *sendbuf, void *recvbuf, int recvcount,
               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
              (sendbuf, recvbuf, recvcount, datatype, op))
