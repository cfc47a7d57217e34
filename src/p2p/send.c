/*
 * The send side of point-to-point messaging: routing a message to its next
 * hop, the eager copy or the caller's buffer, the same-host fast path
 * (tp->send_now) and what happens as a message's bytes are acknowledged.
 * Runs on the progress thread only; matching is in match.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p/p2p.h"

/* ---- Pooled buffers of eager bytes (nexar_ctx.pool) ---- */

uint8_t *nexar__p2p_buf_get(nexar_ctx_t *ctx, uint64_t len, bool *pooled) {
  uint64_t eager = (uint64_t)ctx->prm.eager_bytes;
  *pooled = false;
  if (len < NEXAR__POOL_MIN || len > eager || eager > NEXAR__POOL_BYTES)
    return malloc(len ? len : 1);
  *pooled = true;
  if (ctx->npool > 0) return ctx->pool[--ctx->npool];
  return malloc(eager);
}

void nexar__p2p_buf_put(nexar_ctx_t *ctx, uint8_t *buf, bool pooled) {
  uint64_t eager = (uint64_t)ctx->prm.eager_bytes;
  int keep = eager ? (int)(NEXAR__POOL_BYTES / eager) : 0;
  if (keep > NEXAR__POOL_MAX) keep = NEXAR__POOL_MAX;
  if (buf && pooled && ctx->npool < keep)
    ctx->pool[ctx->npool++] = buf;
  else
    free(buf);
}

void nexar__p2p_pool_fini(nexar_ctx_t *ctx) {
  while (ctx->npool > 0) free(ctx->pool[--ctx->npool]);
}

void nexar__omsg_free(nexar__omsg_t *m) {
  if (!m) return;
  if (m->fwd) nexar__relay_out_gone(m);
  free(m->owned);
  free(m->segs);
  free(m->pre);
  free(m);
}

void nexar__omsg_acked(nexar__link_t *c, nexar__omsg_t *m) {
  (void)c;
  if (m->req) {
    nexar__req_t *r = m->req;
    m->req = NULL;
    r->omsg = NULL;
    r->st.bytes = m->ending ? 0 : m->len;
    nexar__p2p_complete(r, m->ending ? m->end_rc : NEXAR_OK);
  }
}

void nexar__p2p_on_acked(nexar__link_t *c, nexar__omsg_t *m, uint64_t n) {
  m->acked += n;
  if (m->fwd) nexar__relay_acked(m);
  if (m->acked >= (m->ending ? m->end_at : nexar__omsg_total(m)))
    nexar__omsg_acked(c, m);
}

void nexar__p2p_on_out_closed(nexar__link_t *c, nexar__omsg_t *m) {
  if (m->req) nexar__omsg_acked(c, m);
  if (m->owned && c->role == NEXAR__ROLE_MESH && c->eager_bytes >= m->len)
    c->eager_bytes -= m->len;
  if (m->owned_pooled) {
    nexar__p2p_buf_put(c->ep->owner, m->owned, true);
    m->owned = NULL;
  }
  nexar__omsg_free(m);
}

/* What an operation needing the peer of the dead connection |c| fails
 * with: the peer's verdict that this process is fenced, if it sent one. */
int nexar__p2p_gone_code(const nexar__link_t *c) {
  return c && c->peer_closed && c->close_code == NEXAR__CLOSE_FENCED
             ? NEXAR_ERR_EXCLUDED
             : NEXAR_ERR_PEER_FAILED;
}

/* The link a message to stable id |dest| leaves on (the next hop), or NULL
 * with *why set. */
static nexar__link_t *route(nexar_ctx_t *ctx, int dest, const char **why) {
  if (dest < 0 || dest >= ctx->world || !ctx->peers) {
    *why = "no such process";
    return NULL;
  }
  if (ctx->dead[dest]) {
    *why = ctx->dead[dest] == 1 ? "it was declared failed" : "it has left";
    return NULL;
  }
  int hop = nexar__topo_next(ctx, dest);
  nexar__link_t *c = hop >= 0 ? ctx->peers[hop] : NULL;
  /* A lazy mesh's first frame to |dest| dials it (lazy.c). */
  if (!c && hop >= 0 && ctx->topo.lazy) return nexar__lazy_dial(ctx, hop, why);
  if (!c || c->state == NEXAR__CS_DEAD) {
    *why = c         ? c->close_reason
           : hop < 0 ? "no route: every path crosses failed processes"
                     : "peer not connected";
    return NULL;
  }
  return c;
}

/* Queues one message to stable id |dest| with header |h| (seq, lane and
 * length are set here) and payload |data| of |len| bytes: copied when
 * |copy|, else read from |data| until acknowledged, which completes
 * |req|. A non-neighbour's message leaves as a relay frame on the first
 * link of its route, end-to-end sequenced and tagged. */
int nexar__p2p_emit(nexar_ctx_t *ctx, int dest, nexar__hdr_t *h, int lane,
                    const uint8_t *data, uint64_t len, bool copy,
                    nexar__req_t *req, nexar_comm_t *comm) {
  const char *why = NULL;
  nexar__link_t *c = route(ctx, dest, &why);
  if (!c) {
    if (comm)
      FAIL_TEXT(comm, "rank %d: send to process %d failed: %s", ctx->rank, dest,
                why);
    nexar__link_t *d = ctx->peers ? ctx->peers[dest] : NULL;
    return nexar__p2p_gone_code(
        d && nexar__topo_adjacent(&ctx->topo, ctx->rank, dest) ? d : NULL);
  }
  nexar__seqs_t *sq = nexar__peer_seqs(ctx, dest, h->comm_id);
  if (!sq) return NEXAR_ERR_INTERNAL;
  h->lane = (uint8_t)lane;
  h->payload_len = len;
  h->seq = sq->next_tx[lane];
  uint8_t hdr[NEXAR__HDR_BYTES];
  nexar__hdr_encode(h, hdr);
  /* An eager message to a neighbour whose transport writes it at once
   * needs no message object and no copy. */
  if (copy && c->peer == dest && c->tp->send_now &&
      c->tp->send_now(c, lane, h, hdr, data, len)) {
    sq->next_tx[lane]++;
    if (req) {
      req->st.bytes = len;
      nexar__p2p_complete(req, NEXAR_OK);
    }
    return 0;
  }
  nexar__omsg_t *m = nexar__zalloc(sizeof(*m));
  if (!m) return NEXAR_ERR_NOMEM;
  memcpy(m->hdr, hdr, NEXAR__HDR_BYTES);
  m->len = len;
  m->sid = -1;
  m->lane = lane;
  m->dest = dest;
  int rc = 0;
  /* A gathered payload (a vectored send) is packed when it is copied or
   * relayed (the relay digest reads one buffer), else read in place. */
  uint32_t nsegs = req ? req->nsegs : 0;
  if (nsegs && c->peer != dest) copy = true;
  if (copy && len) {
    m->owned = nexar__p2p_buf_get(ctx, len, &m->owned_pooled);
    if (!m->owned) {
      rc = NEXAR_ERR_NOMEM;
      goto fail;
    }
    if (nsegs)
      nexar__seg_copy(req->segs, nsegs, 0, m->owned, (size_t)len, true);
    else
      memcpy(m->owned, data, len);
  } else if (nsegs) {
    m->segs = malloc(nsegs * sizeof(*m->segs));
    if (!m->segs) {
      rc = NEXAR_ERR_NOMEM;
      goto fail;
    }
    memcpy(m->segs, req->segs, nsegs * sizeof(*m->segs));
    m->nsegs = nsegs;
  }
  m->data = copy ? m->owned : nsegs ? NULL : data;
  bool credited = c->peer != dest && nexar__credit_wants(ctx, lane, len);
  if (c->peer != dest) {
    int limit = ctx->topo.test_limit ? ctx->topo.test_limit
                                     : 2 * ctx->topo.dist[dest] + 2;
    rc = nexar__relay_wrap(
        ctx, dest,
        limit < (int)NEXAR__RELAY_MAX_HOPS ? limit : (int)NEXAR__RELAY_MAX_HOPS,
        m, m->data, credited);
    if (rc < 0) {
      if (comm)
        nexar__comm_set_error(comm,
                              "rank %d: send to process %d failed: no relay "
                              "key for it (%s)",
                              ctx->rank, dest, nexar_strerror(rc));
      goto fail;
    }
  }
  /* A frame forged by the test hook claims another origin's sequence
   * space, so it leaves ours as it was. */
  if (c->peer == dest || ctx->topo.forge_as < 0) sq->next_tx[lane]++;
  if (nexar__credit_admit(ctx, m)) {
    if (copy) c->eager_bytes += len;
    nexar__link_send(c, m);
  }
  if (!copy) {
    m->req = req;
    if (req) req->omsg = m;
  } else if (req) {
    req->st.bytes = len;
    nexar__p2p_complete(req, NEXAR_OK);
  }
  return 0;
fail:
  nexar__omsg_free(m);
  return rc;
}

void nexar__p2p_launch(nexar_ctx_t *ctx, nexar__omsg_t *m) {
  const char *why = NULL;
  nexar__link_t *c = route(ctx, m->dest, &why);
  if (c) {
    if (m->owned) c->eager_bytes += m->len;
    nexar__link_send(c, m);
    return;
  }
  char text[NEXAR__ERRMSG_MAX];
  snprintf(text, sizeof(text), "rank %d: send to process %d failed: %s",
           ctx->rank, m->dest, why);
  nexar__omsg_fail(m, nexar__p2p_gone_code(NULL), text);
  nexar__omsg_free(m);
}

int nexar__p2p_post_send(nexar_ctx_t *ctx, nexar__req_t *req) {
  const char *why = NULL;
  nexar__link_t *c = route(ctx, req->peer, &why);
  bool copy = c && req->cap <= (uint64_t)ctx->prm.eager_bytes &&
              c->eager_bytes + req->cap <= NEXAR__EAGER_COPY_CAP;
  /* nexar_comm_bytes_sent counts data, not RPC replies or control
   * messages, which come here too. Read before the send: an eager send
   * completes inside it, and an internal request is freed then. */
  nexar_comm_t *comm = req->comm;
  uint64_t bytes = req->lane == NEXAR__LANE_DATA ? req->cap : 0;
  bool relayed = c && c->peer != req->peer;
  int rc = nexar__rdv_wants(ctx, req, relayed) ? nexar__rdv_send(ctx, req)
           : nexar__rdv_rpc_wants(ctx, req, relayed)
               ? nexar__rdv_rpc_send(ctx, req)
               : nexar__p2p_emit(ctx, req->peer, &req->hdr, req->lane, req->buf,
                                 req->cap, copy, req, comm);
  if (rc == 0 && comm && bytes) nexar__comm_count_tx(comm, bytes);
  return rc;
}
