/*
 * Point-to-point: control messages (membership probes, FAILED, AGREE, the
 * failure detector's traffic) and collective mismatch notices, received
 * whole into small buffers and handed to the parts that registered for
 * them. Engine thread, emu held.
 */
#include <stdlib.h>
#include <string.h>

#include "p2p/p2p.h"

/* A mismatch notice: received whole into a small buffer, then handled. */
typedef struct {
  nexar__req_t req;
  uint8_t buf[NEXAR__NOTICE_BYTES];
} notice_rx_t;

static void notice_done(nexar__req_t *r) {
  if (r->rc == NEXAR_OK)
    r->comm->ctx->hooks->coll_on_notice(
        r->comm, r->st.source, ((notice_rx_t *)r)->buf, (size_t)r->st.bytes);
  free(r);
}

void nexar__p2p_on_notice(nexar_ctx_t *ctx, nexar_comm_t *comm,
                          nexar__imsg_t *m) {
  notice_rx_t *n = calloc(1, sizeof(*n));
  if (!n) {
    nexar__p2p_discard(ctx, m);
    return;
  }
  nexar__req_t *r = &n->req;
  r->kind = NEXAR__REQ_RECV;
  r->comm = comm;
  r->internal = true;
  r->cb = notice_done;
  r->comm_peer = (int)m->hdr.src_rank;
  r->peer = comm->world_ranks[m->hdr.src_rank];
  r->buf = n->buf;
  r->cap = NEXAR__NOTICE_BYTES;
  nexar__p2p_bind(m, r);
}

/* Header |m| is next in its sequence: match it or make it unexpected. */
/* A process-level control message (kinds FAILED and AGREE): received whole
 * into a small buffer, then handed to failure.c. */
typedef struct ctl_rx {
  nexar__req_t req;
  nexar__hdr_t hdr;
  int from;
  uint8_t buf[];
} ctl_rx_t;

static void ctl_done(nexar__req_t *r) {
  ctl_rx_t *x = (ctl_rx_t *)r;
  nexar_ctx_t *ctx = r->comm->ctx;
  if (r->rc == NEXAR_OK)
    ctx->hooks->ctl(ctx, x->from, &x->hdr, x->buf, (size_t)r->st.bytes);
  free(x);
}

bool nexar__p2p_is_ctl(const nexar__req_t *r) {
  return r->cb == ctl_done;
}

void nexar__p2p_ctl_recv(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  /* The header bounds the payload (wire.c): 8 bytes, or 12 + 4 per id. */
  ctl_rx_t *x = calloc(1, sizeof(*x) + m->hdr.payload_len);
  if (!x) {
    nexar__p2p_discard(ctx, m);
    return;
  }
  x->hdr = m->hdr;
  x->from = m->origin;
  nexar__req_t *r = &x->req;
  r->kind = NEXAR__REQ_RECV;
  r->comm = ctx->world_comm;
  r->internal = true;
  r->cb = ctl_done;
  r->peer = x->from;
  r->comm_peer = NEXAR_ANY_SOURCE;
  r->buf = x->buf;
  r->cap = m->hdr.payload_len;
  nexar__p2p_bind(m, r);
}

int nexar__ctl_send(nexar_ctx_t *ctx, int to, const nexar__hdr_t *h,
                    const void *payload, size_t len) {
  nexar__link_t *c = ctx->peers ? ctx->peers[to] : NULL;
  /* A lazy mesh's link still in its handshake queues it. */
  if (c && c->state != NEXAR__CS_READY &&
      !(ctx->topo.lazy && c->state == NEXAR__CS_HANDSHAKE))
    return NEXAR_ERR_PEER_FAILED;
  nexar__hdr_t hd = *h;
  return nexar__p2p_emit(ctx, to, &hd, NEXAR__LANE_CONTROL, payload, len, true,
                         NULL, NULL);
}

int nexar__ctl_probe(nexar_ctx_t *ctx, int to, nexar__req_t *req) {
  nexar__link_t *c = ctx->peers ? ctx->peers[to] : NULL;
  if (!c || c->state != NEXAR__CS_READY || c->peer != to)
    return NEXAR_ERR_PEER_FAILED;
  nexar__hdr_t h = {.kind = NEXAR__KIND_HEARTBEAT,
                    .comm_id = NEXAR__PROC_ID,
                    .src_rank = (uint32_t)ctx->rank};
  return nexar__p2p_emit(ctx, to, &h, NEXAR__LANE_CONTROL, NULL, 0, false, req,
                         NULL);
}
