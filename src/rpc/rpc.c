/*
 * Remote procedure calls by function id (docs/rpc.md).
 *
 * Caller side (engine, emu held): a call gets a call id from a per-process
 * counter (so it is unique on every connection), waits in a small hash
 * table of pending calls, and sends a request message (kind RPC, step
 * REQUEST, the time left to its deadline in count) on the RPC lane. The
 * response header takes it out of the table; a successful response's
 * payload flows straight into the caller's buffer (no copy), an error
 * response completes it with the status it carries. A call that times out
 * leaves the table, so its late response finds no call and is dropped.
 *
 * Callee side: a request header reserves a place in the service queue
 * (bounded by NEXAR_RPC_QUEUE; none left: a BUSY response at once, nothing
 * allocated), its payload (bounded by NEXAR_RPC_MAX_BYTES) is received into
 * a buffer of the announced size, and the request, with its caller's
 * deadline on this host's clock, is queued for the handler threads
 * (service.c), which run the handlers off the engine lock and post each
 * response to the engine as an internal operation. Calls to self skip the
 * network on both legs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"

/* A response on its way from a handler thread to the engine. */
typedef struct rpc_out {
  nexar__req_t req; /* internal control operation */
  nexar_comm_t *comm;
  int peer; /* world rank of the caller */
  uint16_t fn_id;
  uint64_t call_id;
  int status, code;
  uint8_t *data;
  size_t len;
} rpc_out_t;

/* An RPC message being sent: owns its payload until acknowledged. */
typedef struct rpc_send {
  nexar__req_t req;
  uint8_t *data;
} rpc_send_t;

static bool status_known(int st) {
  return st == NEXAR_OK || st == NEXAR_ERR_RPC_UNKNOWN_FN ||
         st == NEXAR_ERR_RPC_HANDLER || st == NEXAR_ERR_RPC_BUSY ||
         st == NEXAR_ERR_INVALID_ARG || st == NEXAR_ERR_NOMEM;
}

/* ---- Setup and teardown ---- */

int nexar__rpc_init(nexar_ctx_t *ctx) {
  nexar__rpc_t *p = &ctx->rpc;
  memset(p, 0, sizeof(*p));
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_cond_init(&p->wcv, &ca);
  pthread_condattr_destroy(&ca);
  p->next_id = 1;
  p->inited = true;
  return 0;
}

void nexar__rpc_item_free(nexar__rpc_item_t *it) {
  free(it->data);
  free(it);
}

void nexar__rpc_wake(nexar_ctx_t *ctx) {
  pthread_mutex_lock(&ctx->rpc.mu);
  pthread_cond_broadcast(&ctx->rpc.wcv);
  pthread_mutex_unlock(&ctx->rpc.mu);
}

void nexar__rpc_fini(nexar_ctx_t *ctx) {
  nexar__rpc_t *p = &ctx->rpc;
  if (!p->inited) return;
  nexar__rpc_stop(ctx);
  while (p->q_head) {
    nexar__rpc_item_t *it = p->q_head;
    p->q_head = it->next;
    nexar__rpc_item_free(it);
  }
  free(p->fns);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  pthread_cond_destroy(&p->wcv);
  p->inited = false;
}

/* ---- Engine side ---- */

static void send_done(nexar__req_t *r) {
  rpc_send_t *s = (rpc_send_t *)r;
  free(s->data);
  free(s);
}

/* Sends an RPC message to world rank |peer| (not self); takes |data|.
 * Returns 0 or a negative code (then |data| is freed). */
static int emit(nexar_ctx_t *ctx, nexar_comm_t *comm, int peer,
                const nexar__hdr_t *h, uint8_t *data, size_t len) {
  rpc_send_t *s = calloc(1, sizeof(*s));
  if (!s) {
    free(data);
    return NEXAR_ERR_NOMEM;
  }
  s->data = data;
  nexar__req_t *r = &s->req;
  r->kind = NEXAR__REQ_SEND;
  r->internal = true;
  r->cb = send_done;
  r->comm = comm;
  r->peer = peer;
  r->comm_peer = peer;
  r->lane = NEXAR__LANE_RPC;
  r->buf = data;
  r->cap = len;
  r->hdr = *h;
  int rc = nexar__p2p_post_send(ctx, r);
  if (rc < 0) send_done(r);
  return rc;
}

static nexar__req_t **bucket(nexar_ctx_t *ctx, uint64_t id) {
  return &ctx->rpc.pending[id % NEXAR__RPC_BUCKETS];
}

static void pending_remove(nexar_ctx_t *ctx, nexar__req_t *r) {
  nexar__req_t **b = bucket(ctx, r->rpc_id);
  if (r->prev)
    r->prev->next = r->next;
  else
    *b = r->next;
  if (r->next) r->next->prev = r->prev;
  r->next = r->prev = NULL;
  r->rpc_pending = false;
}

static nexar__req_t *pending_take(nexar_ctx_t *ctx, int peer, uint64_t id) {
  for (nexar__req_t *r = *bucket(ctx, id); r; r = r->next) {
    if (r->rpc_id == id && r->peer == peer) {
      pending_remove(ctx, r);
      return r;
    }
  }
  return NULL;
}

/* Completes call |r| with an error response's |status|. */
static void fail_call(nexar__req_t *r, int status, int code) {
  nexar_ctx_t *ctx = r->comm->ctx;
  r->st.rpc_code = code;
  r->st.bytes = 0;
  switch (status) {
    case NEXAR_ERR_RPC_UNKNOWN_FN:
      nexar__comm_set_error(r->comm,
                            "rank %d: rpc fn %d on rank %d (call %llu): rank "
                            "%d has no handler for function %d",
                            ctx->rank, r->tag, r->comm_peer,
                            (unsigned long long)r->rpc_id, r->comm_peer,
                            r->tag);
      break;
    case NEXAR_ERR_RPC_HANDLER:
      nexar__comm_set_error(r->comm,
                            "rank %d: rpc fn %d on rank %d (call %llu): the "
                            "handler returned %d (%s)",
                            ctx->rank, r->tag, r->comm_peer,
                            (unsigned long long)r->rpc_id, code,
                            nexar_err_name(code));
      break;
    case NEXAR_ERR_RPC_BUSY:
      nexar__comm_set_error(r->comm,
                            "rank %d: rpc fn %d on rank %d (call %llu): the "
                            "callee's queue is full (NEXAR_RPC_QUEUE)",
                            ctx->rank, r->tag, r->comm_peer,
                            (unsigned long long)r->rpc_id);
      break;
    default:
      nexar__comm_set_error(r->comm,
                            "rank %d: rpc fn %d on rank %d (call %llu): "
                            "refused by the callee: %s",
                            ctx->rank, r->tag, r->comm_peer,
                            (unsigned long long)r->rpc_id,
                            status == NEXAR_ERR_INVALID_ARG
                                ? "request larger than its NEXAR_RPC_MAX_BYTES"
                                : nexar_strerror(status));
  }
  nexar__req_complete(r, status);
}

static void truncated(nexar__req_t *r, uint64_t len) {
  nexar__comm_set_error(r->comm,
                        "rank %d: rpc fn %d on rank %d (call %llu): response "
                        "of %llu bytes truncated to the %llu-byte buffer",
                        r->comm->ctx->rank, r->tag, r->comm_peer,
                        (unsigned long long)r->rpc_id, (unsigned long long)len,
                        (unsigned long long)r->cap);
}

/* A response to this process's call from itself. Takes |data|. */
static void local_response(nexar_ctx_t *ctx, uint64_t id, int status, int code,
                           uint8_t *data, size_t len) {
  nexar__req_t *r = pending_take(ctx, ctx->rank, id);
  if (!r) {
    free(data);
    return;
  }
  if (status != NEXAR_OK) {
    free(data);
    fail_call(r, status, code);
    return;
  }
  r->st.rpc_code = code;
  r->st.bytes = len;
  size_t k = len < r->cap ? len : (size_t)r->cap;
  if (k) memcpy(r->buf, data, k);
  free(data);
  int rc = NEXAR_OK;
  if (len > r->cap) {
    truncated(r, len);
    rc = NEXAR_ERR_TRUNCATE;
  }
  nexar__req_complete(r, rc);
}

/* Sends a response to world rank |peer| (or delivers it locally). Takes
 * |data|. */
static void respond(nexar_ctx_t *ctx, nexar_comm_t *comm, int peer,
                    uint16_t fn_id, uint64_t id, int status, int code,
                    uint8_t *data, size_t len) {
  if (peer == ctx->rank) {
    local_response(ctx, id, status, code, data, len);
    return;
  }
  nexar__hdr_t h;
  memset(&h, 0, sizeof(h));
  h.kind = NEXAR__KIND_RPC;
  h.comm_id = comm->id;
  h.src_rank = (uint32_t)comm->rank;
  h.tag = fn_id;
  h.coll_seq = id;
  h.step = NEXAR__RPC_RESPONSE;
  h.count = (uint64_t)(uint32_t)status | ((uint64_t)(uint32_t)code << 32);
  int rc = emit(ctx, comm, peer, &h, data, len);
  if (rc < 0)
    NEXAR__WARN(NEXAR__SUB_P2P,
                "rank %d: rpc fn %u response to rank %d (call %llu) not "
                "sent: %s",
                ctx->rank, fn_id, peer, (unsigned long long)id,
                nexar_err_name(rc));
}

static int out_fn(nexar__req_t *r) {
  rpc_out_t *o = (rpc_out_t *)r;
  respond(o->comm->ctx, o->comm, o->peer, o->fn_id, o->call_id, o->status,
          o->code, o->data, o->len);
  o->data = NULL;
  return 0;
}

static void out_done(nexar__req_t *r) {
  rpc_out_t *o = (rpc_out_t *)r;
  free(o->data);
  free(o);
}

void nexar__rpc_answer(nexar_ctx_t *ctx, const nexar__rpc_item_t *it,
                       int status, int code, uint8_t *data, size_t len) {
  rpc_out_t *o = calloc(1, sizeof(*o));
  if (!o) {
    free(data); /* the caller times out */
    return;
  }
  o->req.kind = NEXAR__REQ_CTRL;
  o->req.internal = true;
  o->req.ctrl = out_fn;
  o->req.cb = out_done;
  o->comm = it->comm;
  o->peer = it->caller_world;
  o->fn_id = it->fn_id;
  o->call_id = it->call_id;
  o->status = status;
  o->code = code;
  o->data = data;
  o->len = len;
  nexar__ep_post(&ctx->ep, &o->req);
}

/* Takes a place in the service queue; false when it is full. */
static bool reserve(nexar__rpc_t *p, int qcap) {
  pthread_mutex_lock(&p->mu);
  bool ok = p->load < qcap;
  if (ok) p->load++;
  pthread_mutex_unlock(&p->mu);
  return ok;
}

static void enqueue(nexar__rpc_t *p, nexar__rpc_item_t *it) {
  pthread_mutex_lock(&p->mu);
  it->next = NULL;
  if (p->q_tail)
    p->q_tail->next = it;
  else
    p->q_head = it;
  p->q_tail = it;
  /* One request, one thread: waking every idle one would cost a context
   * switch each (they wait on wcv only), and on a busy host each of them
   * takes a core from the engine. */
  pthread_cond_signal(&p->wcv);
  pthread_mutex_unlock(&p->mu);
}

static void unreserve(nexar__rpc_t *p) {
  pthread_mutex_lock(&p->mu);
  p->load--;
  pthread_mutex_unlock(&p->mu);
}

/* What a request carries of its caller's deadline: the time left in
 * microseconds (hosts' clocks differ; the callee counts from arrival). */
static uint64_t budget_us(uint64_t deadline) {
  uint64_t now = nexar__now();
  uint64_t us = deadline > now ? (deadline - now) / 1000ull : 0;
  return us < NEXAR__RPC_BUDGET_MAX_US ? us : NEXAR__RPC_BUDGET_MAX_US;
}

void nexar__rpc_start(nexar__req_t *r) {
  nexar_comm_t *comm = r->comm;
  nexar_ctx_t *ctx = comm->ctx;
  uint8_t *data = r->rpc_tx;
  r->rpc_tx = NULL;
  r->rpc_id = ctx->rpc.next_id++;
  r->next = *bucket(ctx, r->rpc_id);
  r->prev = NULL;
  if (r->next) r->next->prev = r;
  *bucket(ctx, r->rpc_id) = r;
  r->rpc_pending = true;
  if (r->peer == ctx->rank) {
    if (!reserve(&ctx->rpc, ctx->prm.rpc_queue)) {
      free(data);
      pending_remove(ctx, r);
      fail_call(r, NEXAR_ERR_RPC_BUSY, 0);
      return;
    }
    nexar__rpc_item_t *it = calloc(1, sizeof(*it));
    if (!it) {
      unreserve(&ctx->rpc);
      free(data);
      pending_remove(ctx, r);
      nexar__req_complete(r, NEXAR_ERR_NOMEM);
      return;
    }
    it->comm = comm;
    it->caller = comm->rank;
    it->caller_world = ctx->rank;
    it->fn_id = (uint16_t)r->tag;
    it->call_id = r->rpc_id;
    it->deadline = r->rpc_deadline;
    it->data = data;
    it->len = (size_t)r->hdr.payload_len;
    enqueue(&ctx->rpc, it);
    return;
  }
  nexar__hdr_t h = r->hdr;
  h.coll_seq = r->rpc_id;
  h.count = budget_us(r->rpc_deadline);
  int rc = emit(ctx, comm, r->peer, &h, data, (size_t)r->hdr.payload_len);
  if (rc < 0) {
    pending_remove(ctx, r);
    nexar__req_complete(r, rc);
  }
}

static void rx_done(nexar__req_t *r) {
  nexar__rpc_item_t *it =
      (nexar__rpc_item_t *)((char *)r - offsetof(nexar__rpc_item_t, rx));
  nexar_ctx_t *ctx = it->comm->ctx;
  if (r->rc != NEXAR_OK) {
    unreserve(&ctx->rpc);
    nexar__rpc_item_free(it);
    return;
  }
  enqueue(&ctx->rpc, it);
}

static void on_request(nexar_ctx_t *ctx, nexar_comm_t *comm, nexar__imsg_t *m) {
  const nexar__hdr_t *h = &m->hdr;
  int caller_world = comm->world_ranks[h->src_rank];
  uint16_t fn = (uint16_t)h->tag;
  int status = NEXAR_OK;
  /* Never trust the announced size: refuse before allocating. A request
   * relayed in parts announces its whole length (rule 7). */
  uint64_t len = nexar__msg_bytes(h);
  if (len > (uint64_t)ctx->prm.rpc_max_bytes)
    status = NEXAR_ERR_INVALID_ARG;
  else if (!reserve(&ctx->rpc, ctx->prm.rpc_queue))
    status = NEXAR_ERR_RPC_BUSY;
  nexar__rpc_item_t *it = NULL;
  if (status == NEXAR_OK) {
    it = calloc(1, sizeof(*it));
    if (it && len) it->data = malloc((size_t)len);
    if (!it || (len && !it->data)) {
      if (it) nexar__rpc_item_free(it);
      unreserve(&ctx->rpc);
      status = NEXAR_ERR_NOMEM;
    }
  }
  if (status != NEXAR_OK) {
    NEXAR__INFO(NEXAR__SUB_P2P,
                "rank %d: rpc fn %u from rank %d (call %llu, %llu bytes) "
                "refused: %s",
                ctx->rank, fn, caller_world, (unsigned long long)h->coll_seq,
                (unsigned long long)len, nexar_err_name(status));
    uint64_t id = h->coll_seq;
    nexar__p2p_discard(ctx, m);
    respond(ctx, comm, caller_world, fn, id, status, 0, NULL, 0);
    return;
  }
  it->comm = comm;
  it->caller = (int)h->src_rank;
  it->caller_world = caller_world;
  it->fn_id = fn;
  it->call_id = h->coll_seq;
  it->deadline = nexar__now() + h->count * 1000ull; /* bounded by wire.c */
  it->len = (size_t)len;
  nexar__req_t *r = &it->rx;
  r->kind = NEXAR__REQ_RECV;
  r->comm = comm;
  r->internal = true;
  r->cb = rx_done;
  r->peer = caller_world;
  r->comm_peer = it->caller;
  r->buf = it->data;
  r->cap = len;
  nexar__p2p_bind(m, r);
}

static void on_response(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  const nexar__hdr_t *h = &m->hdr;
  nexar__req_t *r = pending_take(ctx, m->origin, h->coll_seq);
  if (!r) {
    /* A late response (the call timed out) or a stray one: dropped. */
    NEXAR__INFO(NEXAR__SUB_P2P,
                "rank %d: rpc response from rank %u for call %llu that is "
                "no longer waiting: dropped",
                ctx->rank, h->src_rank, (unsigned long long)h->coll_seq);
    nexar__p2p_discard(ctx, m);
    return;
  }
  int status = (int)(int32_t)(uint32_t)h->count;
  int code = (int)(int32_t)(uint32_t)(h->count >> 32);
  if (status != NEXAR_OK || h->tag != (uint32_t)r->tag) {
    nexar__p2p_discard(ctx, m);
    fail_call(r, status_known(status) && status ? status : NEXAR_ERR_PROTO,
              code);
    return;
  }
  r->st.rpc_code = code;
  if (nexar__msg_bytes(h) > r->cap) truncated(r, nexar__msg_bytes(h));
  nexar__p2p_bind(m, r);
}

void nexar__rpc_on_header(nexar_ctx_t *ctx, nexar_comm_t *comm,
                          nexar__imsg_t *m) {
  if (m->hdr.step == NEXAR__RPC_REQUEST)
    on_request(ctx, comm, m);
  else
    on_response(ctx, m);
}

void nexar__rpc_expire(nexar__req_t *r) {
  nexar__comm_set_error(
      r->comm,
      "rank %d: rpc fn %d on rank %d (call %llu) got no response within "
      "%llu ms; a late response is dropped",
      r->comm->ctx->rank, r->tag, r->comm_peer, (unsigned long long)r->rpc_id,
      (unsigned long long)((r->rpc_deadline - r->t_start) / 1000000ull));
  nexar__rpc_cancel(r, NEXAR_ERR_TIMEOUT);
}

void nexar__rpc_cancel(nexar__req_t *r, int rc) {
  if (atomic_load(&r->done)) return;
  nexar_ctx_t *ctx = r->comm->ctx;
  if (r->rpc_pending) {
    pending_remove(ctx, r);
  } else if (r->msg) {
    r->msg->req = NULL; /* the rest of the response is discarded */
    r->msg = NULL;
  }
  nexar__rdv_unlink(r); /* a response in parts: its later ones too */
  nexar__req_complete(r, rc);
}

void nexar__rpc_fail_peer(nexar_ctx_t *ctx, int peer, int err,
                          const char *why) {
  for (int b = 0; b < NEXAR__RPC_BUCKETS; b++) {
    for (nexar__req_t *r = ctx->rpc.pending[b], *next; r; r = next) {
      next = r->next;
      if (r->peer != peer) continue;
      pending_remove(ctx, r);
      nexar__comm_set_error(r->comm, "rank %d: rpc fn %d (call %llu) to %s",
                            ctx->rank, r->tag, (unsigned long long)r->rpc_id,
                            why);
      nexar__req_complete(r, err);
    }
  }
}

/* ---- Public API ---- */

/* The engine ends a call on a revoked communicator before it starts. */
static void call_discard(nexar__req_t *r) {
  free(r->rpc_tx);
  r->rpc_tx = NULL;
}

int nexar_rpc_icall(nexar_comm_t *comm, int rank, uint16_t fn_id,
                    const void *req_buf, size_t req_bytes, void *resp_buf,
                    size_t resp_cap, int timeout_ms, nexar_req_t **req) {
  if (!comm || !req) return NEXAR_ERR_INVALID_ARG;
  nexar_ctx_t *ctx = comm->ctx;
  if (rank < 0 || rank >= comm->size || (req_bytes && !req_buf) ||
      (resp_cap && !resp_buf)) {
    nexar__comm_set_error(comm,
                          "rank %d: rpc fn %u to rank %d (not sent): invalid "
                          "rank (size %d) or NULL buffer",
                          comm->rank, fn_id, rank, comm->size);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (req_bytes > (size_t)ctx->prm.rpc_max_bytes) {
    nexar__comm_set_error(comm,
                          "rank %d: rpc fn %u to rank %d (not sent): request "
                          "of %zu bytes exceeds NEXAR_RPC_MAX_BYTES=%lld",
                          comm->rank, fn_id, rank, req_bytes,
                          (long long)ctx->prm.rpc_max_bytes);
    return NEXAR_ERR_INVALID_ARG;
  }
  nexar__req_t *r = calloc(1, sizeof(*r));
  if (!r) return NEXAR_ERR_NOMEM;
  if (req_bytes) {
    r->rpc_tx = malloc(req_bytes);
    if (!r->rpc_tx) {
      free(r);
      return NEXAR_ERR_NOMEM;
    }
    memcpy(r->rpc_tx, req_buf, req_bytes);
  }
  r->kind = NEXAR__REQ_RPC;
  r->discard = call_discard;
  r->comm = comm;
  r->comm_peer = rank;
  r->peer = comm->world_ranks[rank];
  r->tag = fn_id;
  r->lane = NEXAR__LANE_RPC;
  r->buf = resp_buf;
  r->cap = resp_cap;
  r->st.source = rank;
  r->st.tag = fn_id;
  r->t_start = nexar__now();
  nexar__ep_rpc_seen(&ctx->ep);
  int64_t ms = timeout_ms > 0 ? timeout_ms : ctx->prm.op_timeout_ms;
  r->rpc_deadline = r->t_start + (uint64_t)ms * 1000000ull;
  /* A call made by a handler ends by its own caller's deadline. */
  uint64_t outer = nexar__rpc_handler_deadline(ctx);
  if (outer < r->rpc_deadline) r->rpc_deadline = outer;
  r->hdr.kind = NEXAR__KIND_RPC;
  r->hdr.comm_id = comm->id;
  r->hdr.src_rank = (uint32_t)comm->rank;
  r->hdr.tag = fn_id;
  r->hdr.step = NEXAR__RPC_REQUEST;
  r->hdr.payload_len = req_bytes;
  nexar__ep_post(&ctx->ep, r);
  *req = r;
  return NEXAR_OK;
}

int nexar_rpc_call(nexar_comm_t *comm, int rank, uint16_t fn_id,
                   const void *req_buf, size_t req_bytes, void *resp_buf,
                   size_t resp_cap, size_t *resp_bytes, int timeout_ms) {
  nexar_req_t *r;
  nexar_status_t st;
  if (resp_bytes) *resp_bytes = 0;
  int rc = nexar_rpc_icall(comm, rank, fn_id, req_buf, req_bytes, resp_buf,
                           resp_cap, timeout_ms, &r);
  if (rc < 0) return rc;
  rc = nexar_wait(&r, &st);
  if (resp_bytes) *resp_bytes = st.bytes;
  return rc;
}
