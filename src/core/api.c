/*
 * The public API: argument checking on the caller's thread, then requests
 * handed to the progress thread.
 */
#include <gnutls/gnutls.h>
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "coll/reduce.h"
#include "coll/sched.h"
#include "nexar_int.h"

static uint64_t op_deadline(nexar_ctx_t *ctx) {
  return nexar__now() + (uint64_t)ctx->prm.op_timeout_ms * 1000000ull;
}

static nexar_comm_t *comm_new(nexar_ctx_t *ctx) {
  nexar_comm_t *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->ctx = ctx;
  pthread_mutex_init(&c->err_mu, NULL);
  return c;
}

static void comm_free(nexar_comm_t *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->err_mu);
  free(c->world_ranks);
  free(c);
}

static void ctx_free(nexar_ctx_t *ctx) {
  nexar__ep_fini(&ctx->ep);
  /* Unexpected messages of the self channel (no connection). */
  if (ctx->world_comm) {
    for (nexar__imsg_t *m = ctx->world_comm->unexp, *n; m; m = n) {
      n = m->next;
      free(m->buf);
      free(m);
    }
  }
  comm_free(ctx->world_comm);
  free(ctx->roster);
  free(ctx->peers);
  gnutls_memset(ctx->secret_key, 0, sizeof(ctx->secret_key));
  free(ctx);
}

int nexar_init(const nexar_config_t *cfg, nexar_ctx_t **out) {
  nexar__log_init();
  if (!out) return NEXAR_ERR_INVALID_ARG;
  *out = NULL;
  nexar_ctx_t *ctx = calloc(1, sizeof(*ctx));
  if (!ctx) return NEXAR_ERR_NOMEM;
  char err[NEXAR__ERRMSG_MAX];
  int rc = nexar__params_load(&ctx->prm, cfg, err, sizeof(err));
  if (rc < 0) {
    nexar__set_init_error("nexar_init: %s", err);
    free(ctx);
    return rc;
  }
  nexar__params_dump(&ctx->prm);
  if (!ctx->prm.seed_addr) {
    nexar__set_init_error("nexar_init: NEXAR_SEED is not set (the seed's "
                          "ip:port; see nexar-seed and nexar-run)");
    free(ctx);
    return NEXAR_ERR_INVALID_ARG;
  }
  rc = nexar__read_secret(ctx->prm.secret, ctx->prm.secret_file,
                          ctx->secret_key, err, sizeof(err));
  if (rc < 0) {
    nexar__set_init_error("nexar_init: %s", err);
    free(ctx);
    return rc;
  }
  struct sockaddr_storage ss;
  socklen_t sl;
  if (nexar__parse_addr(ctx->prm.bind_addr, 0, &ss, &sl) < 0) {
    nexar__set_init_error("nexar_init: cannot parse NEXAR_BIND_ADDR='%s'",
                          ctx->prm.bind_addr);
    free(ctx);
    return NEXAR_ERR_INVALID_ARG;
  }
  ctx->world_comm = comm_new(ctx);
  if (!ctx->world_comm) {
    free(ctx);
    return NEXAR_ERR_NOMEM;
  }
  rc = nexar__ep_init(&ctx->ep, &ss, sl, &nexar__worker_ops, ctx);
  if (rc < 0) {
    nexar__set_init_error("nexar_init: cannot open the UDP socket on %s: %s",
                          ctx->prm.bind_addr, strerror(errno));
    ctx_free(ctx);
    return rc;
  }
  rc = nexar__ep_start(&ctx->ep);
  if (rc < 0) {
    ctx_free(ctx);
    return rc;
  }
  rc = nexar__bootstrap(ctx);
  if (rc < 0) {
    ctx_free(ctx);
    return rc;
  }
  *out = ctx;
  return NEXAR_OK;
}

nexar_comm_t *nexar_comm_world(nexar_ctx_t *ctx) {
  return ctx ? ctx->world_comm : NULL;
}

int nexar_comm_rank(const nexar_comm_t *comm, int *rank) {
  if (!comm || !rank) return NEXAR_ERR_INVALID_ARG;
  *rank = comm->rank;
  return NEXAR_OK;
}

int nexar_comm_size(const nexar_comm_t *comm, int *size) {
  if (!comm || !size) return NEXAR_ERR_INVALID_ARG;
  *size = comm->size;
  return NEXAR_OK;
}

/* ---- Requests ---- */

static int req_finish(nexar__req_t **preq, nexar_status_t *status) {
  nexar__req_t *r = *preq;
  int rc = r->rc;
  if (status) *status = r->st;
  free(r);
  *preq = NULL;
  return rc;
}

static int cancel_fn(nexar__req_t *ctl) {
  nexar__req_t *r = ctl->cb_arg;
  if (r->kind == NEXAR__REQ_COLL)
    nexar__coll_cancel(r, NEXAR_ERR_TIMEOUT);
  else
    nexar__p2p_cancel(r, NEXAR_ERR_TIMEOUT);
  return 0;
}

int nexar_wait(nexar__req_t **preq, nexar_status_t *status) {
  if (!preq) return NEXAR_ERR_INVALID_ARG;
  nexar__req_t *r = *preq;
  if (!r) return NEXAR_OK;
  nexar_ctx_t *ctx = r->comm->ctx;
  if (nexar__req_wait(&ctx->ep, r, op_deadline(ctx)) < 0) {
    nexar__ep_call(&ctx->ep, cancel_fn, r, UINT64_MAX);
    /* A collective finishes once its cancelled steps have completed. */
    nexar__req_wait(&ctx->ep, r, UINT64_MAX);
    nexar__comm_set_error(
        r->comm, "rank %d: %s did not finish within NEXAR_OP_TIMEOUT_MS=%lld "
                 "(peer rank %d); receive buffers are unspecified",
        ctx->rank,
        r->kind == NEXAR__REQ_COLL ? "collective"
        : r->kind == NEXAR__REQ_SEND ? "send"
                                     : "recv",
        (long long)ctx->prm.op_timeout_ms, r->peer);
    r->rc = NEXAR_ERR_TIMEOUT;
    r->st.error = NEXAR_ERR_TIMEOUT;
  }
  return req_finish(preq, status);
}

int nexar_test(nexar__req_t **preq, int *done, nexar_status_t *status) {
  if (!preq || !done) return NEXAR_ERR_INVALID_ARG;
  if (!*preq) {
    *done = 1;
    return NEXAR_OK;
  }
  if (!atomic_load_explicit(&(*preq)->done, memory_order_acquire)) {
    *done = 0;
    return NEXAR_OK;
  }
  *done = 1;
  return req_finish(preq, status);
}

int nexar_waitall(size_t n, nexar__req_t **reqs, nexar_status_t *statuses) {
  if (n && !reqs) return NEXAR_ERR_INVALID_ARG;
  int first = NEXAR_OK;
  for (size_t i = 0; i < n; i++) {
    int rc = nexar_wait(&reqs[i], statuses ? &statuses[i] : NULL);
    if (rc < 0 && first == NEXAR_OK) first = rc;
  }
  return first;
}

/* ---- Point-to-point ---- */

static int p2p_req(nexar_comm_t *comm, const void *buf, size_t count,
                   nexar_dtype_t dtype, int peer, int tag, bool send,
                   nexar__req_t **out) {
  if (!comm || !out) return NEXAR_ERR_INVALID_ARG;
  size_t es = nexar_dtype_size(dtype);
  if (!es || (count && !buf)) {
    nexar__comm_set_error(comm, "rank %d: %s: invalid dtype %d or NULL buffer",
                          comm->rank, send ? "send" : "recv", (int)dtype);
    return NEXAR_ERR_INVALID_ARG;
  }
  bool any_src = !send && peer == NEXAR_ANY_SOURCE;
  bool any_tag = !send && tag == NEXAR_ANY_TAG;
  if ((!any_src && (peer < 0 || peer >= comm->size)) ||
      (!any_tag && (tag < 0 || tag > NEXAR_TAG_MAX)) ||
      count > UINT64_MAX / es) {
    nexar__comm_set_error(comm,
                          "rank %d: %s: invalid peer rank %d (world size %d) "
                          "or tag %d",
                          comm->rank, send ? "send" : "recv", peer,
                          comm->size, tag);
    return NEXAR_ERR_INVALID_ARG;
  }
  nexar__req_t *r = calloc(1, sizeof(*r));
  if (!r) return NEXAR_ERR_NOMEM;
  r->kind = send ? NEXAR__REQ_SEND : NEXAR__REQ_RECV;
  r->comm = comm;
  r->comm_peer = peer;
  r->peer = any_src ? NEXAR_ANY_SOURCE : comm->world_ranks[peer];
  r->tag = tag;
  r->lane = NEXAR__LANE_DATA;
  r->buf = (uint8_t *)buf;
  r->cap = (uint64_t)count * es;
  r->st.source = peer;
  r->st.tag = tag;
  if (send) {
    r->hdr.kind = NEXAR__KIND_P2P;
    r->hdr.comm_id = comm->id;
    r->hdr.src_rank = (uint32_t)comm->rank;
    r->hdr.tag = (uint32_t)tag;
    r->hdr.dtype = (uint8_t)dtype;
  }
  nexar__ep_post(&comm->ctx->ep, r);
  *out = r;
  return NEXAR_OK;
}

int nexar_isend(nexar_comm_t *comm, const void *buf, size_t count,
                nexar_dtype_t dtype, int dest, int tag, nexar_req_t **req) {
  return p2p_req(comm, buf, count, dtype, dest, tag, true, req);
}

int nexar_irecv(nexar_comm_t *comm, void *buf, size_t count,
                nexar_dtype_t dtype, int source, int tag, nexar_req_t **req) {
  return p2p_req(comm, buf, count, dtype, source, tag, false, req);
}

int nexar_send(nexar_comm_t *comm, const void *buf, size_t count,
               nexar_dtype_t dtype, int dest, int tag) {
  nexar__req_t *r;
  int rc = nexar_isend(comm, buf, count, dtype, dest, tag, &r);
  return rc < 0 ? rc : nexar_wait(&r, NULL);
}

int nexar_recv(nexar_comm_t *comm, void *buf, size_t count,
               nexar_dtype_t dtype, int source, int tag,
               nexar_status_t *status) {
  nexar__req_t *r;
  int rc = nexar_irecv(comm, buf, count, dtype, source, tag, &r);
  return rc < 0 ? rc : nexar_wait(&r, status);
}

/* ---- Collectives ---- */

static int coll_req(nexar_comm_t *comm, int coll_op, const void *sendbuf,
                    void *recvbuf, size_t count, nexar_dtype_t dtype,
                    nexar_op_t op, int root, nexar__req_t **out) {
  if (!comm || !out) return NEXAR_ERR_INVALID_ARG;
  size_t es = nexar_dtype_size(dtype);
  int rc = NEXAR_OK;
  if (coll_op == NEXAR__COLL_ALLREDUCE) rc = nexar__reduce_check(dtype, op);
  else if (!es && coll_op != NEXAR__COLL_BARRIER) rc = NEXAR_ERR_INVALID_ARG;
  if (rc == NEXAR_OK && coll_op != NEXAR__COLL_BARRIER &&
      ((count && !recvbuf) || count > UINT64_MAX / (es ? es : 1)))
    rc = NEXAR_ERR_INVALID_ARG;
  if (rc == NEXAR_OK && coll_op == NEXAR__COLL_BCAST &&
      (root < 0 || root >= comm->size))
    rc = NEXAR_ERR_INVALID_ARG;
  if (rc < 0) {
    nexar__comm_set_error(comm,
                          "rank %d: collective op %d: invalid arguments "
                          "(dtype %d, op %d, count %zu, root %d): %s",
                          comm->rank, coll_op, (int)dtype, (int)op, count,
                          root, nexar_strerror(rc));
    return rc;
  }
  nexar__sched_t *s = calloc(1, sizeof(*s));
  nexar__req_t *u = calloc(1, sizeof(*u));
  if (!s || !u) {
    free(s);
    free(u);
    return NEXAR_ERR_NOMEM;
  }
  u->kind = NEXAR__REQ_COLL;
  u->comm = comm;
  u->peer = -1;
  u->sched = s;
  s->user = u;
  s->comm = comm;
  s->nranks = comm->size;
  s->work = recvbuf;
  s->lane =
      coll_op == NEXAR__COLL_BARRIER ? NEXAR__LANE_CONTROL : NEXAR__LANE_DATA;
  s->tmpl.kind = NEXAR__KIND_COLL;
  s->tmpl.coll_op = (uint8_t)coll_op;
  s->tmpl.dtype = coll_op == NEXAR__COLL_BARRIER ? 0 : (uint8_t)dtype;
  s->tmpl.redop = coll_op == NEXAR__COLL_ALLREDUCE ? (uint8_t)op : 0;
  s->tmpl.comm_id = comm->id;
  s->tmpl.count = coll_op == NEXAR__COLL_BARRIER ? 0 : count;
  s->tmpl.tag = root >= 0 ? (uint32_t)root : 0xffffffffu;
  if (coll_op == NEXAR__COLL_BARRIER) {
    rc = nexar__build_barrier(s);
  } else if (coll_op == NEXAR__COLL_BCAST) {
    rc = nexar__build_bcast(s, root, (uint64_t)count * es);
  } else {
    bool in_place = sendbuf == NEXAR_IN_PLACE || sendbuf == recvbuf;
    s->sendbuf = in_place ? NULL : sendbuf;
    if (count && !in_place && !sendbuf) rc = NEXAR_ERR_INVALID_ARG;
    if (rc == 0) rc = nexar__build_allreduce_ring(s, count, es);
    uint64_t chunk = (count + (uint64_t)comm->size - 1) / (uint64_t)comm->size;
    if (rc == 0 && comm->size > 1 && chunk) {
      s->tmp = malloc(chunk * es);
      if (!s->tmp) rc = NEXAR_ERR_NOMEM;
    }
  }
  if (rc < 0) {
    nexar__sched_free(s);
    free(u);
    return rc;
  }
  nexar__ep_post(&comm->ctx->ep, u);
  *out = u;
  return NEXAR_OK;
}

int nexar_iallreduce(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                     size_t count, nexar_dtype_t dtype, nexar_op_t op,
                     nexar_req_t **req) {
  return coll_req(comm, NEXAR__COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype,
                  op, -1, req);
}

int nexar_allreduce(nexar_comm_t *comm, const void *sendbuf, void *recvbuf,
                    size_t count, nexar_dtype_t dtype, nexar_op_t op) {
  nexar__req_t *r;
  int rc = nexar_iallreduce(comm, sendbuf, recvbuf, count, dtype, op, &r);
  return rc < 0 ? rc : nexar_wait(&r, NULL);
}

int nexar_ibcast(nexar_comm_t *comm, void *buf, size_t count,
                 nexar_dtype_t dtype, int root, nexar_req_t **req) {
  return coll_req(comm, NEXAR__COLL_BCAST, NULL, buf, count, dtype, NEXAR_SUM,
                  root, req);
}

int nexar_bcast(nexar_comm_t *comm, void *buf, size_t count,
                nexar_dtype_t dtype, int root) {
  nexar__req_t *r;
  int rc = nexar_ibcast(comm, buf, count, dtype, root, &r);
  return rc < 0 ? rc : nexar_wait(&r, NULL);
}

int nexar_ibarrier(nexar_comm_t *comm, nexar_req_t **req) {
  return coll_req(comm, NEXAR__COLL_BARRIER, NULL, NULL, 0, NEXAR_UINT8,
                  NEXAR_SUM, -1, req);
}

int nexar_barrier(nexar_comm_t *comm) {
  nexar__req_t *r;
  int rc = nexar_ibarrier(comm, &r);
  return rc < 0 ? rc : nexar_wait(&r, NULL);
}

/* ---- Finalize ---- */

static int flushed_fn(nexar__req_t *ctl) {
  nexar_ctx_t *ctx = ctl->cb_arg;
  for (int r = 0; r < ctx->world; r++) {
    nexar__conn_t *c = ctx->peers[r];
    if (c && c->state == NEXAR__CS_READY && !nexar__conn_idle(c)) return 0;
  }
  return 1;
}

static int close_fn(nexar__req_t *ctl) {
  nexar_ctx_t *ctx = ctl->cb_arg;
  char why[64];
  snprintf(why, sizeof(why), "rank %d finalized", ctx->rank);
  for (int r = 0; r < ctx->world; r++)
    if (ctx->peers[r]) nexar__conn_close(ctx->peers[r], NEXAR__CLOSE_OK, why);
  return 0;
}

int nexar_finalize(nexar_ctx_t *ctx) {
  if (!ctx) return NEXAR_ERR_INVALID_ARG;
  int rc = NEXAR_OK;
  /* Collective like MPI_Finalize: once every rank is here, all user
   * traffic has been received, and closing cannot cut anything short. */
  if (ctx->world > 1) {
    int brc = nexar_barrier(ctx->world_comm);
    if (brc < 0) rc = brc;
    uint64_t deadline = nexar__now() + 5000000000ull;
    while (!nexar__ep_call(&ctx->ep, flushed_fn, ctx, UINT64_MAX)) {
      if (nexar__now() > deadline) {
        rc = NEXAR_ERR_TIMEOUT;
        break;
      }
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    nexar__ep_call(&ctx->ep, close_fn, ctx, UINT64_MAX);
    /* Give the progress loop one pass to send the CONNECTION_CLOSEs. */
    nexar__ep_call(&ctx->ep, flushed_fn, ctx, UINT64_MAX);
  }
  ctx_free(ctx);
  return rc;
}
