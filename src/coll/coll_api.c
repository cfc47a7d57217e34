/*
 * Public collective entry points: argument checks, the call's fingerprint,
 * schedule construction (the algorithm choice is plan.c's), and the
 * blocking wrappers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/reduce.h"
#include "coll/sched.h"

static bool is_rooted(int coll) {
  return coll == NEXAR__COLL_BCAST || coll == NEXAR__COLL_REDUCE ||
         coll == NEXAR__COLL_GATHER || coll == NEXAR__COLL_GATHERV ||
         coll == NEXAR__COLL_SCATTER || coll == NEXAR__COLL_SCATTERV;
}

/* ---- Argument checks ---- */

static int bad(nexar_comm_t *comm, const nexar__coll_args_t *a, int rc,
               const char *why) {
  nexar__comm_set_error(comm,
                        "rank %d: %s on comm %llu: %s (dtype %d, op %d, "
                        "count %llu, root %d)",
                        comm->rank, nexar__coll_name(a->coll),
                        (unsigned long long)comm->id, why, (int)a->dtype,
                        (int)a->op, (unsigned long long)a->count, a->root);
  return rc;
}

/* Sum of n counts, or UINT64_MAX on overflow or a NULL array. */
static uint64_t sum_counts(const size_t *c, int n) {
  if (!c) return UINT64_MAX;
  uint64_t t = 0;
  for (int i = 0; i < n; i++) {
    if (c[i] > UINT64_MAX - t) return UINT64_MAX;
    t += c[i];
  }
  return t;
}

/* Every block [displs[i], displs[i] + counts[i]) fits below 2^64 bytes. */
static bool layout_ok(const size_t *counts, const size_t *displs, int n,
                      size_t es) {
  if (!counts || !displs) return false;
  for (int i = 0; i < n; i++) {
    uint64_t end = (uint64_t)displs[i] + counts[i];
    if (end < displs[i] || end > UINT64_MAX / es) return false;
  }
  return true;
}

static int check(nexar_comm_t *comm, nexar__coll_args_t *a, const void *sendbuf,
                 const void *recvbuf) {
  int n = comm->size, me = comm->rank, c = a->coll;
  a->es = nexar_dtype_size(a->dtype);
  if (c == NEXAR__COLL_BARRIER) return 0;
  if (!a->es) {
    int rc = (unsigned)a->dtype < NEXAR_NUM_DTYPES ? NEXAR_ERR_UNSUPPORTED
                                                   : NEXAR_ERR_INVALID_ARG;
    return bad(comm, a, rc, "invalid or reserved dtype");
  }
  if (nexar__coll_is_reducing(c)) {
    int rc = nexar__reduce_check(a->dtype, a->op);
    if (rc == 0 && c == NEXAR__COLL_EXSCAN && a->op == NEXAR_AVG)
      rc = NEXAR_ERR_UNSUPPORTED;
    if (rc < 0) return bad(comm, a, rc, "unsupported (dtype, op) pair");
  }
  if (is_rooted(c) && (a->root < 0 || a->root >= n))
    return bad(comm, a, NEXAR_ERR_INVALID_ARG, "root out of range");
  if (a->count > UINT64_MAX / a->es / (uint64_t)n)
    return bad(comm, a, NEXAR_ERR_INVALID_ARG, "count too large");
  bool root = is_rooted(c) && me == a->root;
  bool has = a->count > 0; /* data flows through this rank's buffers */
  switch (c) {
    case NEXAR__COLL_ALLGATHERV:
      if (!layout_ok(a->counts, a->displs, n, a->es))
        return bad(comm, a, NEXAR_ERR_INVALID_ARG, "bad recvcounts/displs");
      if (!a->in_place && a->counts[me] != a->count)
        return bad(comm, a, NEXAR_ERR_INVALID_ARG,
                   "sendcount differs from recvcounts[rank]");
      has = sum_counts(a->counts, n) > 0;
      break;
    case NEXAR__COLL_REDUCE_SCATTER:
      if (a->count == UINT64_MAX || a->count > UINT64_MAX / a->es)
        return bad(comm, a, NEXAR_ERR_INVALID_ARG, "bad recvcounts");
      break;
    case NEXAR__COLL_ALLTOALLV:
      if (!layout_ok(a->rcounts, a->rdispls, n, a->es) ||
          (!a->in_place && !layout_ok(a->counts, a->displs, n, a->es)))
        return bad(comm, a, NEXAR_ERR_INVALID_ARG, "bad counts/displs");
      has = sum_counts(a->rcounts, n) > 0 ||
            (!a->in_place && sum_counts(a->counts, n) > 0);
      break;
    case NEXAR__COLL_GATHERV:
    case NEXAR__COLL_SCATTERV:
      if (root && !layout_ok(a->counts, a->displs, n, a->es))
        return bad(comm, a, NEXAR_ERR_INVALID_ARG, "bad counts/displs");
      if (root && !a->in_place && a->counts[me] != a->count)
        return bad(comm, a, NEXAR_ERR_INVALID_ARG,
                   "own count differs from counts[root]");
      if (root) has = has || sum_counts(a->counts, n) > 0;
      break;
    default:
      break;
  }
  if (!has) return 0;
  /* Which pointers the call reads and writes on this rank. */
  bool need_send = !a->in_place, need_recv = true;
  if (c == NEXAR__COLL_BCAST) need_send = false;
  if ((c == NEXAR__COLL_REDUCE || c == NEXAR__COLL_GATHER ||
       c == NEXAR__COLL_GATHERV) &&
      !root)
    need_recv = false;
  if ((c == NEXAR__COLL_SCATTER || c == NEXAR__COLL_SCATTERV) && !root)
    need_send = false;
  if ((c == NEXAR__COLL_SCATTER || c == NEXAR__COLL_SCATTERV) && root &&
      a->in_place)
    need_recv = false, need_send = true;
  if ((need_send && !sendbuf) || (need_recv && !recvbuf))
    return bad(comm, a, NEXAR_ERR_INVALID_ARG, "NULL buffer");
  return 0;
}

/* ---- Device buffers ---- */

/*
 * The byte ranges of buffer |which| (NEXAR__BUF_SEND or NEXAR__BUF_WORK,
 * after in-place normalisation) that the call reads (|out| false) or
 * defines (|out| true) on this rank, appended to |r| when it is not NULL.
 * Returns how many non-empty ranges there are; *end gets the largest end
 * offset (0 when none). A buffer with no range at all is never touched by
 * the schedule. At most comm->size ranges.
 */
static size_t coll_ranges(const nexar_comm_t *comm, const nexar__coll_args_t *a,
                          int which, bool out, nexar__region_t *r,
                          uint64_t *end) {
  int n = comm->size, me = comm->rank, c = a->coll;
  uint64_t es = a->es, C = a->count * es;
  bool root = a->root == me, ip = a->in_place;
  size_t k = 0;
  *end = 0;
#define ADD(o, l)                              \
  do {                                         \
    uint64_t o_ = (o), l_ = (l);               \
    if (l_) {                                  \
      if (r) r[k] = (nexar__region_t){o_, l_}; \
      k++;                                     \
      if (o_ + l_ > *end) *end = o_ + l_;      \
    }                                          \
  } while (0)
  if (which == NEXAR__BUF_SEND) {
    if (out) return 0; /* only read */
    switch (c) {
      case NEXAR__COLL_BCAST:
      case NEXAR__COLL_BARRIER:
        break;
      case NEXAR__COLL_ALLTOALL:
        ADD(0, (uint64_t)n * C);
        break;
      case NEXAR__COLL_ALLTOALLV:
        for (int j = 0; j < n; j++) ADD(a->displs[j] * es, a->counts[j] * es);
        break;
      case NEXAR__COLL_SCATTER:
        if (root) ADD(0, (uint64_t)n * C);
        break;
      case NEXAR__COLL_SCATTERV:
        if (root)
          for (int j = 0; j < n; j++) ADD(a->displs[j] * es, a->counts[j] * es);
        break;
      default: /* the rank's own contribution of count elements */
        ADD(0, C);
    }
    return k;
  }
  switch (c) {
    case NEXAR__COLL_ALLREDUCE:
    case NEXAR__COLL_SCAN:
      if (out || ip) ADD(0, C);
      break;
    case NEXAR__COLL_EXSCAN: /* rank 0's result is left unchanged */
      if (out ? me > 0 : ip) ADD(0, C);
      break;
    case NEXAR__COLL_BCAST:
      if (out ? !root : root) ADD(0, C);
      break;
    case NEXAR__COLL_REDUCE:
      if (root && (out || ip)) ADD(0, C);
      break;
    case NEXAR__COLL_ALLGATHER:
    case NEXAR__COLL_GATHER:
      if (c == NEXAR__COLL_GATHER && !root) break;
      if (out)
        ADD(0, (uint64_t)n * C);
      else if (ip)
        ADD((uint64_t)me * C, C);
      break;
    case NEXAR__COLL_ALLGATHERV:
    case NEXAR__COLL_GATHERV:
      if (c == NEXAR__COLL_GATHERV && !root) break;
      if (out)
        for (int i = 0; i < n; i++) ADD(a->displs[i] * es, a->counts[i] * es);
      else if (ip)
        ADD(a->displs[me] * es, a->counts[me] * es);
      break;
    case NEXAR__COLL_REDUCE_SCATTER: /* count: the sum of the blocks */
      if (out)
        ADD(0, a->counts[me] * es);
      else if (ip)
        ADD(0, C);
      break;
    case NEXAR__COLL_ALLTOALL:
      if (out || ip) ADD(0, (uint64_t)n * C);
      break;
    case NEXAR__COLL_ALLTOALLV:
      if (out || ip)
        for (int i = 0; i < n; i++) ADD(a->rdispls[i] * es, a->rcounts[i] * es);
      break;
    case NEXAR__COLL_SCATTER:
    case NEXAR__COLL_SCATTERV:
      if (out && !ip) ADD(0, C);
      break;
    default:
      break;
  }
#undef ADD
  return k;
}

/* Classifies the buffers of a call and stages those in device memory:
 * *sendbuf and *recvbuf are replaced by bounce buffers, *st gets the
 * stage (NULL when every buffer is host memory). */
static int coll_stage(nexar_comm_t *comm, const nexar__coll_args_t *a,
                      const void **sendbuf, void **recvbuf,
                      nexar__stage_t **st) {
  nexar__dev_t *dev = &comm->ctx->dev;
  const char *what = nexar__coll_name(a->coll);
  *st = NULL;
  static const int bufs[2] = {NEXAR__BUF_WORK, NEXAR__BUF_SEND};
  for (int i = 0; i < 2; i++) {
    int which = bufs[i];
    bool send = which == NEXAR__BUF_SEND;
    void *ptr = send ? (void *)(uintptr_t)*sendbuf : *recvbuf;
    if (!ptr) continue;
    uint64_t end_in, end_out;
    size_t nin = coll_ranges(comm, a, which, false, NULL, &end_in);
    size_t nout = coll_ranges(comm, a, which, true, NULL, &end_out);
    uint64_t bytes = end_in > end_out ? end_in : end_out;
    if (!bytes) continue; /* the schedule does not touch it */
    const char *role = send ? "send" : "receive";
    int rc = nexar__dev_classify(dev, comm, what, role, ptr, bytes);
    if (rc == NEXAR_MEM_HOST) continue;
    nexar__region_t *r = NULL;
    if (rc >= 0) {
      r = malloc((nin + nout) * sizeof(*r));
      if (!r) rc = NEXAR_ERR_NOMEM;
    }
    uint8_t *host = NULL;
    if (rc >= 0) {
      coll_ranges(comm, a, which, false, r, &end_in);
      coll_ranges(comm, a, which, true, r + nin, &end_out);
      rc = nexar__stage_add(st, dev, comm, what, role, ptr, bytes, r, nin,
                            r + nin, nout, &host);
    }
    free(r);
    if (rc < 0) {
      nexar__stage_abort(*st);
      *st = NULL;
      return rc;
    }
    if (send)
      *sendbuf = host;
    else
      *recvbuf = host;
  }
  return 0;
}

/* The engine ends a call on a revoked communicator before it starts. */
static void coll_discard(nexar__req_t *u) {
  nexar__sched_free(u->sched);
  u->sched = NULL;
}

/* Validates, builds and posts the call; *req gets the request. */
static int post(nexar_comm_t *comm, nexar__coll_args_t a, const void *sendbuf,
                void *recvbuf, nexar__req_t **req) {
  if (!comm || !req) return NEXAR_ERR_INVALID_ARG;
  *req = NULL;
  bool scatter =
      a.coll == NEXAR__COLL_SCATTER || a.coll == NEXAR__COLL_SCATTERV;
  /* In place: the send buffer (the receive buffer for scatter) is
   * NEXAR_IN_PLACE or equals the other one. */
  const void *ip = scatter ? recvbuf : sendbuf;
  a.in_place = ip == NEXAR_IN_PLACE || (sendbuf && sendbuf == recvbuf);
  if (a.in_place && scatter) recvbuf = NULL;
  if (a.in_place && !scatter) sendbuf = NULL;
  if (!is_rooted(a.coll)) a.root = -1;
  /* In place is the root's business in rooted collectives. */
  if (a.in_place && a.coll != NEXAR__COLL_BCAST && is_rooted(a.coll) &&
      comm->rank != a.root)
    return bad(comm, &a, NEXAR_ERR_INVALID_ARG, "NEXAR_IN_PLACE off the root");
  int rc = check(comm, &a, sendbuf, recvbuf);
  if (rc < 0) return rc;
  nexar__stage_t *stage = NULL;
  if (!nexar__dev_host_only(&comm->ctx->dev) && a.coll != NEXAR__COLL_BARRIER) {
    rc = coll_stage(comm, &a, &sendbuf, &recvbuf, &stage);
    if (rc < 0) return rc;
  }
  nexar__sched_t *s = nexar__zalloc(sizeof(*s));
  nexar__req_t *u = nexar__zalloc(sizeof(*u));
  if (!s || !u) {
    free(s);
    free(u);
    nexar__stage_abort(stage);
    return NEXAR_ERR_NOMEM;
  }
  u->stage = stage;
  u->kind = NEXAR__REQ_COLL;
  u->comm = comm;
  u->peer = -1;
  u->sched = s;
  u->discard = coll_discard;
  s->user = u;
  s->comm = comm;
  s->a = a;
  s->a.avg_div = comm->size;
  s->bufs[NEXAR__BUF_WORK] = recvbuf;
  s->bufs[NEXAR__BUF_SEND] = (uint8_t *)(uintptr_t)sendbuf;
  s->lane =
      a.coll == NEXAR__COLL_BARRIER ? NEXAR__LANE_CONTROL : NEXAR__LANE_DATA;
  nexar__coll_plan(s, &comm->ctx->prm);
  /* The fingerprint: what every message of the call carries. v-forms
   * whose counts only the root knows carry count 0. */
  nexar__hdr_t *t = &s->tmpl;
  t->kind = NEXAR__KIND_COLL;
  t->coll_op = (uint8_t)a.coll;
  t->dtype = a.coll == NEXAR__COLL_BARRIER ? 0 : (uint8_t)a.dtype;
  t->redop = nexar__coll_is_reducing(a.coll) ? (uint8_t)a.op : 0;
  t->comm_id = comm->id;
  t->algo = (uint32_t)s->a.algo;
  t->tag = a.root >= 0 ? (uint32_t)a.root : 0xffffffffu;
  t->count = a.coll == NEXAR__COLL_BARRIER || a.coll == NEXAR__COLL_GATHERV ||
                     a.coll == NEXAR__COLL_SCATTERV ||
                     a.coll == NEXAR__COLL_ALLTOALLV
                 ? 0
                 : a.count;
  if (a.coll == NEXAR__COLL_ALLGATHERV)
    t->count = sum_counts(a.counts, comm->size);
  rc = nexar__sched_build(s);
  if (rc < 0) {
    nexar__sched_free(s);
    nexar__stage_abort(u->stage);
    free(u);
    return bad(comm, &a, rc, "cannot build the schedule");
  }
  u->t_start = nexar__now();
  nexar__ep_post(&comm->ctx->ep, u);
  *req = u;
  return NEXAR_OK;
}

/* The blocking form of non-blocking call |icall|, whose request is r
 * (passed by address: the call's argument order is unspecified); its post
 * leaves the progress thread's wake to the wait (nexar__wait_posted). */
#define WAIT_ONE(icall) \
  nexar__wait_posted((nexar__ep_defer_wake(), (icall)), &r, NULL)

/* Argument bundles. */
#define ARGS(c, cnt, dt, o, rt) \
  ((nexar__coll_args_t){        \
      .coll = (c), .count = (cnt), .dtype = (dt), .op = (o), .root = (rt)})

int nexar_iallreduce(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                     size_t count, nexar_dtype_t dtype, nexar_op_t op,
                     nexar_req_t **req) {
  return post(comm, ARGS(NEXAR__COLL_ALLREDUCE, count, dtype, op, -1), sendbuf,
              recvbuf, req);
}

int nexar_allreduce(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                    size_t count, nexar_dtype_t dtype, nexar_op_t op) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(
      nexar_iallreduce(comm, sendbuf, recvbuf, count, dtype, op, &r));
}

int nexar_ibcast(nexar_comm_t *comm, void *buf, size_t count,
                 nexar_dtype_t dtype, int root, nexar_req_t **req) {
  return post(comm, ARGS(NEXAR__COLL_BCAST, count, dtype, NEXAR_SUM, root),
              NULL, buf, req);
}

int nexar_bcast(nexar_comm_t *comm, void *buf, size_t count,
                nexar_dtype_t dtype, int root) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_ibcast(comm, buf, count, dtype, root, &r));
}

int nexar_ireduce(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                  size_t count, nexar_dtype_t dtype, nexar_op_t op, int root,
                  nexar_req_t **req) {
  /* Off the root the receive buffer is not used. */
  if (comm && comm->rank != root) recvbuf = NULL;
  return post(comm, ARGS(NEXAR__COLL_REDUCE, count, dtype, op, root), sendbuf,
              recvbuf, req);
}

int nexar_reduce(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                 size_t count, nexar_dtype_t dtype, nexar_op_t op, int root) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(
      nexar_ireduce(comm, sendbuf, recvbuf, count, dtype, op, root, &r));
}

int nexar_iallgather(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                     size_t count, nexar_dtype_t dtype, nexar_req_t **req) {
  return post(comm, ARGS(NEXAR__COLL_ALLGATHER, count, dtype, NEXAR_SUM, -1),
              sendbuf, recvbuf, req);
}

int nexar_allgather(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                    size_t count, nexar_dtype_t dtype) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_iallgather(comm, sendbuf, recvbuf, count, dtype, &r));
}

int nexar_iallgatherv(nexar_comm_t *comm, const void *sendbuf, size_t sendcount,
                      void *recvbuf, const size_t *recvcounts,
                      const size_t *displs, nexar_dtype_t dtype,
                      nexar_req_t **req) {
  nexar__coll_args_t a =
      ARGS(NEXAR__COLL_ALLGATHERV, sendcount, dtype, NEXAR_SUM, -1);
  a.counts = recvcounts;
  a.displs = displs;
  return post(comm, a, sendbuf, recvbuf, req);
}

int nexar_allgatherv(nexar_comm_t *comm, const void *sendbuf, size_t sendcount,
                     void *recvbuf, const size_t *recvcounts,
                     const size_t *displs, nexar_dtype_t dtype) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_iallgatherv(comm, sendbuf, sendcount, recvbuf,
                                    recvcounts, displs, dtype, &r));
}

int nexar_ireduce_scatter(nexar_comm_t *comm, const void *sendbuf,
                          void *recvbuf, const size_t *recvcounts,
                          nexar_dtype_t dtype, nexar_op_t op,
                          nexar_req_t **req) {
  nexar__coll_args_t a = ARGS(NEXAR__COLL_REDUCE_SCATTER, 0, dtype, op, -1);
  a.counts = recvcounts;
  a.count = comm ? sum_counts(recvcounts, comm->size) : 0;
  return post(comm, a, sendbuf, recvbuf, req);
}

int nexar_reduce_scatter(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                         const size_t *recvcounts, nexar_dtype_t dtype,
                         nexar_op_t op) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(
      nexar_ireduce_scatter(comm, sendbuf, recvbuf, recvcounts, dtype, op, &r));
}

int nexar_ireduce_scatter_block(nexar_comm_t *comm, const void *sendbuf,
                                void *recvbuf, size_t recvcount,
                                nexar_dtype_t dtype, nexar_op_t op,
                                nexar_req_t **req) {
  if (!comm || !req) return NEXAR_ERR_INVALID_ARG;
  size_t *counts = malloc((size_t)comm->size * sizeof(*counts));
  if (!counts) return NEXAR_ERR_NOMEM;
  for (int i = 0; i < comm->size; i++) counts[i] = recvcount;
  int rc =
      nexar_ireduce_scatter(comm, sendbuf, recvbuf, counts, dtype, op, req);
  free(counts); /* the schedule is built: counts are not kept */
  return rc;
}

int nexar_reduce_scatter_block(nexar_comm_t *comm, const void *sendbuf,
                               void *recvbuf, size_t recvcount,
                               nexar_dtype_t dtype, nexar_op_t op) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_ireduce_scatter_block(comm, sendbuf, recvbuf, recvcount,
                                              dtype, op, &r));
}

int nexar_ialltoall(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                    size_t count, nexar_dtype_t dtype, nexar_req_t **req) {
  return post(comm, ARGS(NEXAR__COLL_ALLTOALL, count, dtype, NEXAR_SUM, -1),
              sendbuf, recvbuf, req);
}

int nexar_alltoall(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                   size_t count, nexar_dtype_t dtype) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_ialltoall(comm, sendbuf, recvbuf, count, dtype, &r));
}

int nexar_ialltoallv(nexar_comm_t *comm, const void *sendbuf,
                     const size_t *sendcounts, const size_t *sdispls,
                     void *recvbuf, const size_t *recvcounts,
                     const size_t *rdispls, nexar_dtype_t dtype,
                     nexar_req_t **req) {
  nexar__coll_args_t a = ARGS(NEXAR__COLL_ALLTOALLV, 0, dtype, NEXAR_SUM, -1);
  a.counts = sendcounts;
  a.displs = sdispls;
  a.rcounts = recvcounts;
  a.rdispls = rdispls;
  return post(comm, a, sendbuf, recvbuf, req);
}

int nexar_alltoallv(nexar_comm_t *comm, const void *sendbuf,
                    const size_t *sendcounts, const size_t *sdispls,
                    void *recvbuf, const size_t *recvcounts,
                    const size_t *rdispls, nexar_dtype_t dtype) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_ialltoallv(comm, sendbuf, sendcounts, sdispls, recvbuf,
                                   recvcounts, rdispls, dtype, &r));
}

int nexar_igather(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                  size_t count, nexar_dtype_t dtype, int root,
                  nexar_req_t **req) {
  if (comm && comm->rank != root) recvbuf = NULL;
  return post(comm, ARGS(NEXAR__COLL_GATHER, count, dtype, NEXAR_SUM, root),
              sendbuf, recvbuf, req);
}

int nexar_gather(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                 size_t count, nexar_dtype_t dtype, int root) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(
      nexar_igather(comm, sendbuf, recvbuf, count, dtype, root, &r));
}

int nexar_igatherv(nexar_comm_t *comm, const void *sendbuf, size_t sendcount,
                   void *recvbuf, const size_t *recvcounts,
                   const size_t *displs, nexar_dtype_t dtype, int root,
                   nexar_req_t **req) {
  nexar__coll_args_t a =
      ARGS(NEXAR__COLL_GATHERV, sendcount, dtype, NEXAR_SUM, root);
  if (comm && comm->rank == root) {
    a.counts = recvcounts;
    a.displs = displs;
  } else {
    recvbuf = NULL;
  }
  return post(comm, a, sendbuf, recvbuf, req);
}

int nexar_gatherv(nexar_comm_t *comm, const void *sendbuf, size_t sendcount,
                  void *recvbuf, const size_t *recvcounts, const size_t *displs,
                  nexar_dtype_t dtype, int root) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_igatherv(comm, sendbuf, sendcount, recvbuf, recvcounts,
                                 displs, dtype, root, &r));
}

int nexar_iscatter(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                   size_t count, nexar_dtype_t dtype, int root,
                   nexar_req_t **req) {
  if (comm && comm->rank != root) sendbuf = NULL;
  return post(comm, ARGS(NEXAR__COLL_SCATTER, count, dtype, NEXAR_SUM, root),
              sendbuf, recvbuf, req);
}

int nexar_scatter(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                  size_t count, nexar_dtype_t dtype, int root) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(
      nexar_iscatter(comm, sendbuf, recvbuf, count, dtype, root, &r));
}

int nexar_iscatterv(nexar_comm_t *comm, const void *sendbuf,
                    const size_t *sendcounts, const size_t *displs,
                    void *recvbuf, size_t recvcount, nexar_dtype_t dtype,
                    int root, nexar_req_t **req) {
  nexar__coll_args_t a =
      ARGS(NEXAR__COLL_SCATTERV, recvcount, dtype, NEXAR_SUM, root);
  if (comm && comm->rank == root) {
    a.counts = sendcounts;
    a.displs = displs;
  } else {
    sendbuf = NULL;
  }
  return post(comm, a, sendbuf, recvbuf, req);
}

int nexar_scatterv(nexar_comm_t *comm, const void *sendbuf,
                   const size_t *sendcounts, const size_t *displs,
                   void *recvbuf, size_t recvcount, nexar_dtype_t dtype,
                   int root) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_iscatterv(comm, sendbuf, sendcounts, displs, recvbuf,
                                  recvcount, dtype, root, &r));
}

int nexar_iscan(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                size_t count, nexar_dtype_t dtype, nexar_op_t op,
                nexar_req_t **req) {
  return post(comm, ARGS(NEXAR__COLL_SCAN, count, dtype, op, -1), sendbuf,
              recvbuf, req);
}

int nexar_scan(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
               size_t count, nexar_dtype_t dtype, nexar_op_t op) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_iscan(comm, sendbuf, recvbuf, count, dtype, op, &r));
}

int nexar_iexscan(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                  size_t count, nexar_dtype_t dtype, nexar_op_t op,
                  nexar_req_t **req) {
  return post(comm, ARGS(NEXAR__COLL_EXSCAN, count, dtype, op, -1), sendbuf,
              recvbuf, req);
}

int nexar_exscan(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                 size_t count, nexar_dtype_t dtype, nexar_op_t op) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_iexscan(comm, sendbuf, recvbuf, count, dtype, op, &r));
}

int nexar_ibarrier(nexar_comm_t *comm, nexar_req_t **req) {
  return post(comm, ARGS(NEXAR__COLL_BARRIER, 0, NEXAR_UINT8, NEXAR_SUM, -1),
              NULL, NULL, req);
}

int nexar__coll_final_barrier(nexar_comm_t *comm) {
  nexar__coll_args_t a =
      ARGS(NEXAR__COLL_BARRIER, 0, NEXAR_UINT8, NEXAR_SUM, -1);
  a.final = true;
  nexar__req_t *r = NULL;
  return WAIT_ONE(post(comm, a, NULL, NULL, &r));
}

int nexar_barrier(nexar_comm_t *comm) {
  nexar__req_t *r = NULL;
  return WAIT_ONE(nexar_ibarrier(comm, &r));
}

/* ---- Local reduction ---- */

int nexar_reduce_local(nexar_ctx_t *ctx, const void *src, void *dst,
                       size_t count, nexar_dtype_t dtype, nexar_op_t op) {
  if (!ctx) return NEXAR_ERR_INVALID_ARG;
  nexar_comm_t *comm = ctx->world_comm;
  int rc = nexar__reduce_check(dtype, op);
  if (rc == 0 && op == NEXAR_AVG) rc = NEXAR_ERR_UNSUPPORTED;
  size_t es = nexar_dtype_size(dtype);
  if (rc == 0 && (count > UINT64_MAX / (es ? es : 1) || (count && !src) ||
                  (count && !dst)))
    rc = NEXAR_ERR_INVALID_ARG;
  if (rc < 0) {
    nexar__comm_set_error(comm,
                          "rank %d: reduce_local: invalid arguments or "
                          "unsupported (dtype %d, op %d) pair, or NEXAR_AVG: "
                          "%s",
                          comm->rank, (int)dtype, (int)op, nexar_err_name(rc));
    return rc;
  }
  if (!count) return NEXAR_OK;
  nexar__dev_t *dev = &ctx->dev;
  if (nexar__dev_host_only(dev)) {
    nexar__reduce(dst, src, count, dtype, op);
    return NEXAR_OK;
  }
  const char *what = "reduce_local";
  uint64_t bytes = (uint64_t)count * es;
  int ks = nexar__dev_classify(dev, comm, what, "source", src, bytes);
  if (ks < 0) return ks;
  int kd = nexar__dev_classify(dev, comm, what, "destination", dst, bytes);
  if (kd < 0) return kd;
  const nexar_device_ops_t *ops = &dev->ops;
  if (ks == NEXAR_MEM_DEVICE && kd == NEXAR_MEM_DEVICE && ops->reduce) {
    rc = ops->reduce(dev->ud, dst, src, count, dtype, op);
    if (rc == 0 && ops->synchronize) rc = ops->synchronize(dev->ud);
    if (rc != NEXAR_ERR_UNSUPPORTED) {
      if (rc < 0) {
        int code = nexar__dev_adapter_rc(rc);
        nexar__comm_set_error(comm,
                              "rank %d: %s: device adapter '%s': reduce of "
                              "%zu elements (dtype %d, op %d) failed: %s (%d)",
                              comm->rank, what, nexar__dev_ops_name(ops), count,
                              (int)dtype, (int)op, nexar_err_name(code), rc);
        return code;
      }
      return NEXAR_OK;
    }
  }
  /* Staged: device operands through host memory, host kernels. */
  nexar__stage_t *st = NULL;
  nexar__region_t all = {0, bytes};
  uint8_t *hs = (uint8_t *)(uintptr_t)src, *hd = dst;
  if (ks == NEXAR_MEM_DEVICE)
    rc = nexar__stage_add(&st, dev, comm, what, "source", (void *)hs, bytes,
                          &all, 1, NULL, 0, &hs);
  if (rc == 0 && kd == NEXAR_MEM_DEVICE)
    rc = nexar__stage_add(&st, dev, comm, what, "destination", dst, bytes, &all,
                          1, &all, 1, &hd);
  if (rc < 0) {
    nexar__stage_abort(st);
    return rc;
  }
  nexar__reduce(hd, hs, count, dtype, op);
  return st ? nexar__stage_finish(st, NEXAR_OK, UINT64_MAX) : NEXAR_OK;
}
