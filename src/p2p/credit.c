/*
 * End-to-end credit of relayed messages (docs/topology.md section 10).
 * Engine only.
 *
 * A relay stores and forwards a frame its origin holds credit for: it
 * takes the whole frame into a buffer and returns the inbound stream's
 * credit as soon as the frame has arrived, whatever the next hop does, so
 * that a relayed frame never holds a link while it waits for another (the
 * cyclic wait of wormhole routing, section 10 cycle 2). What bounds those
 * buffers is the origin: per destination and lane (data, RPC) it keeps at
 * most NEXAR_RELAY_CREDIT_BYTES of credited frames in flight, and the
 * destination gives the bytes back (a CREDIT control message) as each
 * frame leaves its link: delivered, detached whole into the unexpected
 * store, or dropped. A frame that does not fit waits here, in a FIFO per
 * destination and lane (the order its sequence numbers need), on no link.
 * Frames larger than the credit are cut through as before, but wait their
 * turn in the same FIFO.
 *
 * Credit goes back in batches: the destination sends CREDIT once half the
 * window's bytes have left its links, or at once when the origin asked.
 * An origin whose next frame does not fit asks (a CREDIT with count 0)
 * whenever no request of its is answered yet, so owed credit never strands
 * a waiting frame: while the frame waits, the origin's credit in flight is
 * not zero, so some of it is owed or still travelling, and the next frame
 * to leave the destination's links, or the request itself, returns it. The
 * control lane needs no credit: its messages are few, bounded by the protocols
 * that send them, and consumed at once.
 */
#include <stdlib.h>

#include "p2p/p2p.h"

static nexar__credit_t *slot(nexar_ctx_t *ctx, int dest, int lane) {
  nexar__topo_t *t = &ctx->topo;
  if (!t->credit || dest < 0 || dest >= t->n || lane == NEXAR__LANE_CONTROL)
    return NULL;
  return &t->credit[dest * 2 + (lane == NEXAR__LANE_RPC)];
}

uint64_t nexar__credit_frame(const nexar_ctx_t *ctx) {
  return ctx->topo.credit
             ? (uint64_t)ctx->prm.relay_credit_bytes - NEXAR__RELAY_PRE_BYTES
             : 0;
}

bool nexar__credit_wants(nexar_ctx_t *ctx, int lane, uint64_t len) {
  return ctx->topo.credit && lane != NEXAR__LANE_CONTROL &&
         len <= nexar__credit_frame(ctx);
}

/* The credit relay frame |m| needs (bytes after its outer header; 0 when
 * it is cut through). */
static uint64_t need(nexar_ctx_t *ctx, const nexar__omsg_t *m) {
  return nexar__credit_wants(ctx, m->lane, m->len) ? m->pre_len + m->len : 0;
}

/* Sends stable id |to| a CREDIT of |n| bytes on |lane| (0: a request). */
static void credit_send(nexar_ctx_t *ctx, int to, int lane, uint64_t n) {
  nexar__hdr_t h = {.kind = NEXAR__KIND_CREDIT,
                    .comm_id = NEXAR__PROC_ID,
                    .src_rank = (uint32_t)ctx->rank,
                    .tag = (uint32_t)lane,
                    .count = n};
  /* Lost only with the route, and then forgiven (nexar__credit_reset). */
  (void)nexar__ctl_send(ctx, to, &h, NULL, 0);
}

/* Origin: the head frame towards |dest| does not fit: asks for what the
 * destination owes, unless a request is already out. */
static void ask(nexar_ctx_t *ctx, int dest, int lane, nexar__credit_t *q) {
  if (q->requested || !ctx->dead || ctx->dead[dest]) return;
  q->requested = true;
  credit_send(ctx, dest, lane, 0);
}

bool nexar__credit_admit(nexar_ctx_t *ctx, nexar__omsg_t *m) {
  nexar__credit_t *q = m->pre ? slot(ctx, m->dest, m->lane) : NULL;
  if (!q) return true;
  uint64_t n = need(ctx, m);
  if (!q->head && q->used + n <= (uint64_t)ctx->prm.relay_credit_bytes) {
    q->used += n;
    return true;
  }
  m->next = NULL;
  m->conn = NULL;
  m->cwait = true;
  if (q->tail)
    q->tail->next = m;
  else
    q->head = m;
  q->tail = m;
  ask(ctx, m->dest, m->lane, q);
  return false;
}

/* Destination: gives origin |to| what it is owed on |lane|. */
static void give(nexar_ctx_t *ctx, int to, int lane, nexar__credit_t *q) {
  uint64_t n = q->owed;
  q->owed = 0;
  q->asked = false;
  if (n) credit_send(ctx, to, lane, n);
}

/* Sends what the credit towards |dest| on |lane| now allows, in order. */
static void pump(nexar_ctx_t *ctx, nexar__credit_t *q) {
  nexar__omsg_t *m;
  while ((m = q->head)) {
    uint64_t n = need(ctx, m);
    if (q->used + n > (uint64_t)ctx->prm.relay_credit_bytes) {
      ask(ctx, m->dest, m->lane, q);
      return;
    }
    q->head = m->next;
    if (!q->head) q->tail = NULL;
    m->next = NULL;
    m->cwait = false;
    q->used += n;
    nexar__p2p_launch(ctx, m);
  }
}

void nexar__credit_returned(nexar_ctx_t *ctx, int from, int lane, uint64_t n) {
  nexar__credit_t *q = slot(ctx, from, lane);
  if (!q) return;
  if (!n) { /* a request: what is owed goes back now, or with the next */
    if (q->owed)
      give(ctx, from, lane, q);
    else
      q->asked = true;
    return;
  }
  q->requested = false;
  q->used -= n < q->used ? n : q->used;
  pump(ctx, q);
}

void nexar__credit_give_back(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  uint64_t n = m->e2e;
  m->e2e = 0;
  if (!n || !ctx->dead || ctx->dead[m->origin]) return;
  nexar__credit_t *q = slot(ctx, m->origin, m->hdr.lane);
  if (!q) {
    credit_send(ctx, m->origin, m->hdr.lane, n);
    return;
  }
  q->owed += n;
  if (q->asked || q->owed >= (uint64_t)ctx->prm.relay_credit_bytes / 2)
    give(ctx, m->origin, m->hdr.lane, q);
}

void nexar__credit_unwait(nexar_ctx_t *ctx, nexar__omsg_t *m) {
  nexar__credit_t *q = slot(ctx, m->dest, m->lane);
  if (!q || !m->cwait) return;
  nexar__omsg_t *prev = NULL;
  for (nexar__omsg_t **pp = &q->head; *pp; prev = *pp, pp = &(*pp)->next) {
    if (*pp != m) continue;
    *pp = m->next;
    if (q->tail == m) q->tail = prev;
    break;
  }
  m->next = NULL;
  m->cwait = false;
  pump(ctx, q);
}

void nexar__credit_fail(nexar_ctx_t *ctx, int peer, nexar_comm_t *comm, int err,
                        const char *why) {
  nexar__topo_t *t = &ctx->topo;
  for (int id = 0; t->credit && id < t->n; id++) {
    if (peer >= 0 && id != peer) continue;
    for (int k = 0; k < 2; k++) {
      nexar__credit_t *q = &t->credit[id * 2 + k];
      /* Ending a request may start others: take the matching frames out
       * first, then end them. */
      nexar__omsg_t *out = NULL, *prev = NULL;
      for (nexar__omsg_t *m = q->head, *next; m; m = next) {
        next = m->next;
        if (comm && !(m->req && m->req->comm == comm)) {
          prev = m;
          continue;
        }
        if (prev)
          prev->next = next;
        else
          q->head = next;
        if (q->tail == m) q->tail = prev;
        m->cwait = false;
        m->next = out;
        out = m;
      }
      while (out) {
        nexar__omsg_t *m = out;
        out = m->next;
        m->next = NULL;
        if (comm)
          nexar__p2p_cancel(m->req, err);
        else
          nexar__omsg_fail(m, err, why);
        nexar__omsg_free(m);
      }
    }
  }
}

void nexar__credit_reset(nexar_ctx_t *ctx) {
  nexar__topo_t *t = &ctx->topo;
  for (int i = 0; t->credit && i < 2 * t->n; i++) {
    nexar__credit_t *q = &t->credit[i];
    q->used = q->owed = 0;
    q->requested = q->asked = false;
    pump(ctx, q);
  }
}

bool nexar__credit_idle(nexar_ctx_t *ctx) {
  nexar__topo_t *t = &ctx->topo;
  for (int i = 0; t->credit && i < 2 * t->n; i++)
    if (t->credit[i].head) return false;
  return true;
}

void nexar__credit_fini(nexar_ctx_t *ctx) {
  nexar__topo_t *t = &ctx->topo;
  for (int i = 0; t->credit && i < 2 * t->n; i++) {
    nexar__credit_t *q = &t->credit[i];
    while (q->head) {
      nexar__omsg_t *m = q->head;
      q->head = m->next;
      if (m->req && ctx->ep.complete) {
        m->req->omsg = NULL;
        ctx->ep.complete(m->req, NEXAR_ERR_CLOSED);
      }
      m->req = NULL;
      nexar__omsg_free(m);
    }
    q->tail = NULL;
  }
}
