/*
 * Point-to-point: how requests end without their message (timeouts,
 * cancels, a failed peer or communicator, a link torn down), and the
 * communicator registry. Engine thread, emu held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p/p2p.h"

/* Ends the request of queued message |m| with |rc| (an error) and stops
 * its stream: nothing more of it is written, and ngtcp2 drops the frames of
 * a reset stream instead of retransmitting them, so the request's buffer is
 * not read again once it has ended. */
static void omsg_end(nexar__omsg_t *m, int rc) {
  nexar__req_t *r = m->req;
  nexar__link_t *c = m->conn;
  if (m->cwait && r) {
    /* Waiting for relay credit, on no link: nothing of it went out. */
    nexar__credit_unwait(r->comm->ctx, m);
    nexar__p2p_sync_unlink(r);
    m->req = NULL;
    r->omsg = NULL;
    nexar__omsg_free(m);
    nexar__p2p_complete(r, rc);
    return;
  }
  bool live = c && c->state == NEXAR__CS_READY;
  if (r) nexar__p2p_sync_unlink(r); /* no acknowledgement ends it now */
  uint64_t written = m->ending ? m->end_at : m->sent;
  if (live) {
    if (m->sid >= 0 && !m->ending) nexar__link_stop_out(c, m);
    /* The RESET_STREAM goes out; a message never opened leaves the queue
     * (quic.c next_sendable). */
    c->want_write = true;
  }
  bool user_buf = nexar__omsg_has_payload(m) && !m->owned;
  m->sent = nexar__omsg_total(m);
  m->data = NULL;
  m->nsegs = 0;
  if (!r) return;
  if (live && m->sid >= 0 && (user_buf || m->ending) && m->acked < written) {
    /* Frames of the reset stream already lost may still be resent from
     * the caller's buffer (ngtcp2 keeps pointers to it): the request ends
     * once the bytes written so far are acknowledged, the stream closes
     * or the link goes (omsg_fail, conn_free), an RTT or so later. */
    m->ending = true;
    m->end_rc = rc;
    m->end_at = written;
    return;
  }
  m->req = NULL;
  r->omsg = NULL;
  nexar__p2p_complete(r, rc);
}

void nexar__p2p_expire(nexar__req_t *r) {
  nexar_ctx_t *ctx = r->comm->ctx;
  nexar__comm_set_error(
      r->comm,
      "rank %d: %s did not finish within NEXAR_OP_TIMEOUT_MS=%lld (peer "
      "rank %d); receive buffers are unspecified",
      ctx->rank,
      r->kind != NEXAR__REQ_SEND ? (r->probe ? "probe" : "recv")
      : r->sync                  ? "synchronous send (no receive matched it)"
                                 : "send",
      (long long)ctx->prm.op_timeout_ms, r->comm_peer);
  nexar__p2p_cancel(r, NEXAR_ERR_TIMEOUT);
}

void nexar__p2p_cancel(nexar__req_t *r, int rc) {
  if (atomic_load(&r->done)) {
    nexar__p2p_sync_unlink(r);
    return;
  }
  nexar__rdv_unlink(r); /* an RPC call's response in parts too */
  if (r->kind == NEXAR__REQ_RECV) {
    if (r->msg) {
      r->msg->req = NULL; /* the rest of the message is discarded */
      r->msg = NULL;
    } else if (r->prev || r->next || r->comm->posted == r) {
      nexar__p2p_posted_remove(r->comm, r);
    }
  } else if (r->omsg) {
    omsg_end(r->omsg, rc); /* completes r */
    return;
  }
  nexar__p2p_complete(r, rc); /* a synchronous send leaves its list */
}

static void fail_posted(nexar_ctx_t *ctx, nexar_comm_t *comm, int peer, int err,
                        const char *why) {
  /* Completing a receive may end its collective, which frees its other
   * receives: start over from the head after each one. */
  for (bool again = true; again;) {
    again = false;
    for (nexar__req_t *r = comm->posted; r; r = r->next) {
      if (r->peer != peer && r->comm_peer != NEXAR_ANY_SOURCE) continue;
      nexar__p2p_posted_remove(comm, r);
      FAIL_TEXT(comm, "rank %d: recv from %s", ctx->rank, why);
      nexar__req_complete(r, err);
      again = true;
      break;
    }
  }
}

void nexar__omsg_fail(nexar__omsg_t *m, int err, const char *why) {
  nexar__req_t *r = m->req;
  if (!r) return;
  FAIL_TEXT(r->comm, "%s", why);
  /* A relayed message leaves on a live link: stop it there too. */
  omsg_end(m, err);
}

void nexar__p2p_fail_peer(nexar_ctx_t *ctx, int peer, int err,
                          const char *why) {
  char send_why[NEXAR__ERRMSG_MAX], recv_why[NEXAR__ERRMSG_MAX];
  snprintf(send_why, sizeof(send_why), "rank %d: send to %s", ctx->rank, why);
  snprintf(recv_why, sizeof(recv_why), "rank %d: recv from %s", ctx->rank, why);
  ctx->hooks->rpc_fail_peer(ctx, peer, err, why);
  /* Pending sends to the peer, on whichever link they leave (relayed ones
   * on the first link of their route). */
  for (int id = 0; id < ctx->world; id++) {
    nexar__link_t *c = id == ctx->rank ? NULL : ctx->peers[id];
    for (int lane = 0; c && lane < NEXAR__LANE_COUNT; lane++)
      for (nexar__omsg_t *m = c->outq[lane]; m; m = m->next)
        if (m->dest == peer) nexar__omsg_fail(m, err, send_why);
  }
  nexar__credit_fail(ctx, peer, NULL, err, send_why);
  /* Receives that wait on the peer (ANY_SOURCE included: it could have
   * been the sender), on every communicator. A communicator the peer is
   * not a member of has no receive naming it; ANY_SOURCE receives there
   * fail too only when the peer is a member. */
  nexar__p2p_sync_fail_peer(ctx, peer, err, send_why);
  fail_posted(ctx, ctx->world_comm, peer, err, why);
  nexar__rdv_fail_peer(ctx, peer, err, recv_why);
  for (int i = 0; i < ctx->ncomms; i++) {
    nexar_comm_t *cm = ctx->comms[i];
    if (nexar__comm_rank_of(cm, peer) >= 0)
      fail_posted(ctx, cm, peer, err, why);
  }
  /* Messages from the peer still arriving (through relays too). */
  for (int id = 0; id < ctx->world; id++) {
    nexar__link_t *c = id == ctx->rank ? NULL : ctx->peers[id];
    for (nexar__imsg_t *m = c ? c->imsgs : NULL; m; m = m->anext) {
      nexar__req_t *r = m->req;
      if (!r || m->origin != peer) continue;
      m->req = NULL;
      r->msg = NULL;
      nexar__rdv_unlink(r);
      FAIL_TEXT(r->comm, "%s", recv_why);
      nexar__req_complete(r, err);
    }
  }
}

void nexar__p2p_fail_comm(nexar_ctx_t *ctx, nexar_comm_t *comm, int err) {
  while (comm->posted) nexar__p2p_cancel(comm->posted, err);
  while (comm->ssend) nexar__p2p_cancel(comm->ssend, err);
  while (comm->rdv) nexar__p2p_cancel(comm->rdv, err);
  /* Every link: a member's messages may travel on any of them. */
  for (int w = 0; ctx->peers && w < ctx->world; w++) {
    nexar__link_t *c = w == ctx->rank ? NULL : ctx->peers[w];
    if (!c) continue;
    /* Cancelling stops the stream, so nothing reads a user buffer after
     * its request has ended. */
    for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++)
      for (nexar__omsg_t *m = c->outq[lane]; m; m = m->next)
        if (m->req && m->req->comm == comm) nexar__p2p_cancel(m->req, err);
    for (nexar__imsg_t *m = c->imsgs; m; m = m->anext)
      if (m->req && m->req->comm == comm && !nexar__p2p_is_ctl(m->req))
        nexar__p2p_cancel(m->req, err);
  }
  nexar__credit_fail(ctx, -1, comm, err, NULL);
}

void nexar__p2p_conn_teardown(nexar__link_t *c) {
  nexar_ctx_t *ctx = c->ep->owner;
  while (c->imsgs) {
    nexar__imsg_t *m = c->imsgs;
    nexar_comm_t *cm = nexar__find_comm(ctx, m->hdr.comm_id);
    if (m->state == NEXAR__IM_UNEXPECTED && cm) nexar__p2p_unexp_remove(cm, m);
    if (m->state == NEXAR__IM_ORDER) nexar__p2p_reorder_remove(ctx, m);
    if (m->fwd) nexar__relay_in_gone(m);
    nexar__rdv_cut(ctx, m, NEXAR_ERR_CLOSED);
    if (m->hash) gnutls_hash_deinit(m->hash, NULL);
    m->hash = NULL;
    if (m->req) {
      m->req->msg = NULL;
      nexar__rdv_unlink(m->req);
      nexar__req_complete(m->req, NEXAR_ERR_CLOSED);
    }
    m->stream_closed = false; /* no credit to return */
    m->conn = NULL;
    if (m->whole_of) *m->whole_of -= m->whole;
    if (m->refused_of) (*m->refused_of)--;
    c->imsgs = m->anext;
    free(m->buf);
    free(m);
  }
}

/* ---- Communicator registry and sequence state (engine, emu held) ---- */

/* Sequence state entries exist only for communicators this process has
 * registered and agreements it runs (a peer's message for an unknown id never
 * gets this far), so the table is bounded by local state, not by the peer. The
 * pointer returned is valid until the next call. */
nexar__seqs_t *nexar__peer_seqs(nexar_ctx_t *ctx, int peer, uint64_t comm_id) {
  nexar__peer_t *p = &ctx->ps[peer];
  for (int i = 0; i < p->nseqs; i++)
    if (p->seqs[i].comm_id == comm_id) return &p->seqs[i];
  if (p->nseqs == p->cap_seqs) {
    int cap = p->cap_seqs ? 2 * p->cap_seqs : 4;
    nexar__seqs_t *n = realloc(p->seqs, (size_t)cap * sizeof(*n));
    if (!n) return NULL;
    p->seqs = n;
    p->cap_seqs = cap;
  }
  nexar__seqs_t *s = &p->seqs[p->nseqs++];
  memset(s, 0, sizeof(*s));
  s->comm_id = comm_id;
  return s;
}

void nexar__peer_forget_seqs(nexar_ctx_t *ctx, int peer, uint64_t id) {
  nexar__peer_t *p = &ctx->ps[peer];
  for (int i = 0; i < p->nseqs; i++) {
    if (p->seqs[i].comm_id != id) continue;
    p->seqs[i] = p->seqs[--p->nseqs];
    return;
  }
}

int nexar__comm_register(nexar_ctx_t *ctx, nexar_comm_t *comm) {
  if (ctx->ncomms == ctx->cap_comms) {
    int cap = ctx->cap_comms ? 2 * ctx->cap_comms : 8;
    nexar_comm_t **n = realloc(ctx->comms, (size_t)cap * sizeof(*n));
    if (!n) return NEXAR_ERR_NOMEM;
    ctx->comms = n;
    ctx->cap_comms = cap;
  }
  ctx->comms[ctx->ncomms++] = comm;
  if (comm->id + 1 > ctx->comm_hwm) ctx->comm_hwm = comm->id + 1;
  return 0;
}

void nexar__comm_unregister(nexar_ctx_t *ctx, nexar_comm_t *comm) {
  if (comm->ag) ctx->hooks->agree_release(ctx, comm);
  for (int i = 0; i < ctx->ncomms; i++) {
    if (ctx->comms[i] != comm) continue;
    ctx->comms[i] = ctx->comms[--ctx->ncomms];
    break;
  }
  /* Messages nobody will receive: dropped (their streams still drain). */
  while (comm->unexp) {
    nexar__imsg_t *m = comm->unexp;
    nexar__p2p_unexp_remove(comm, m);
    nexar__p2p_discard(ctx, m);
  }
  /* Receives still posted, synchronous sends still waiting (a user error:
   * free with requests pending). */
  while (comm->ssend) nexar__p2p_cancel(comm->ssend, NEXAR_ERR_CLOSED);
  while (comm->posted) {
    nexar__req_t *r = comm->posted;
    nexar__p2p_posted_remove(comm, r);
    nexar__req_complete(r, NEXAR_ERR_CLOSED);
  }
  /* End-to-end state of the comm with each member: waiting headers and
   * sequences. */
  for (int k = 0; ctx->ps && k < comm->size; k++) {
    int w = comm->world_ranks[k]; /* this process too: its synchronous
                                     sends to itself are numbered */
    for (nexar__imsg_t *m = ctx->ps[w].reorder, *next; m; m = next) {
      next = m->next;
      if (m->hdr.comm_id != comm->id) continue;
      nexar__p2p_reorder_remove(ctx, m);
      nexar__p2p_discard(ctx, m);
    }
    nexar__peer_forget_seqs(ctx, w, comm->id);
  }
}
