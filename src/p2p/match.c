/*
 * Point-to-point messaging and MPI-style matching. Runs on the progress
 * thread only.
 *
 * - Ordering: each message carries seq, per (sender, receiver, comm, lane).
 *   Streams may arrive in any order; headers are matched strictly in seq
 *   order (a header that is early waits in the connection's reorder list),
 *   which gives FIFO per (source, tag, communicator).
 * - Matching: a header is matched against the communicator's posted
 *   receives in post order; unmatched, it joins the unexpected list in
 *   arrival order, and a later receive searches that list first.
 * - Memory: an unmatched message holds at most its stream window (the eager
 *   limit); the window is extended to the whole message only once a receive
 *   is bound to it, and MAX_STREAMS credit is returned only when a message
 *   is delivered. Unexpected memory per peer is thus bounded by
 *   max_streams x eager_bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p/p2p.h"

bool nexar__peer_gone(nexar_ctx_t *ctx, int peer) {
  if (ctx->dead && ctx->dead[peer]) return true;
  if (!nexar__topo_adjacent(&ctx->topo, ctx->rank, peer))
    return nexar__topo_next(ctx, peer) < 0;
  nexar__link_t *c = ctx->peers ? ctx->peers[peer] : NULL;
  /* A lazy mesh dials a peer when first needed: no link is no failure. */
  if (!c) return !ctx->topo.lazy || !ctx->peers;
  return c->state == NEXAR__CS_DEAD;
}

/* The communicator |id| of this process (registry in the ctx), or NULL. */
nexar_comm_t *nexar__find_comm(nexar_ctx_t *ctx, uint64_t id) {
  if (ctx->world_comm && id == ctx->world_comm->id) return ctx->world_comm;
  for (int i = 0; i < ctx->ncomms; i++)
    if (ctx->comms[i]->id == id) return ctx->comms[i];
  return NULL;
}

uint8_t *nexar__p2p_sink(nexar__link_t *c, nexar__imsg_t *m, size_t n) {
  (void)c;
  nexar__req_t *r = m ? m->req : NULL;
  if (!r || m->state != NEXAR__IM_MATCHED || r->fold || m->hash ||
      m->got + n > m->hdr.payload_len || m->got + n > r->cap)
    return NULL;
  if (!r->nsegs) return r->buf + m->got;
  /* A scattering receive: when the bytes fit one entry. */
  const nexar__seg_t *s = &r->segs[nexar__seg_find(r->segs, r->nsegs, m->got)];
  return m->got + n <= s->off + s->len ? s->base + (m->got - s->off) : NULL;
}

/* Copies |n| payload bytes at payload offset |off| of the gathered list
 * |s| (|ns| entries) out to |buf| (|to|), or from |buf| into the list. */
void nexar__seg_copy(const nexar__seg_t *s, uint32_t ns, uint64_t off,
                     uint8_t *buf, size_t n, bool to) {
  for (uint32_t i = n ? nexar__seg_find(s, ns, off) : ns; n && i < ns; i++) {
    uint64_t at = off - s[i].off;
    size_t k = s[i].len - at < n ? (size_t)(s[i].len - at) : n;
    if (to)
      memcpy(buf, s[i].base + at, k);
    else if (buf != s[i].base + at) /* else: landed (nexar__p2p_sink) */
      memcpy(s[i].base + at, buf, k);
    buf += k;
    off += k;
    n -= k;
  }
}

/* ---- Receive side ---- */

void nexar__p2p_unexp_remove(nexar_comm_t *comm, nexar__imsg_t *m) {
  if (m->prev)
    m->prev->next = m->next;
  else
    comm->unexp = m->next;
  if (m->next)
    m->next->prev = m->prev;
  else
    comm->unexp_tail = m->prev;
  m->next = m->prev = NULL;
}

void nexar__p2p_posted_remove(nexar_comm_t *comm, nexar__req_t *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    comm->posted = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    comm->posted_tail = r->prev;
  r->next = r->prev = NULL;
}

static int src_comm_rank(const nexar__imsg_t *m) {
  return (int)m->hdr.src_rank;
}

bool nexar__p2p_hdr_matches(const nexar__req_t *r, const nexar__hdr_t *h) {
  if (r->is_coll != (h->kind == NEXAR__KIND_COLL)) return false;
  if (r->is_coll)
    return r->comm_peer == (int)h->src_rank && r->hdr.coll_seq == h->coll_seq &&
           r->hdr.step == h->step;
  /* Group-creation messages meet the library's receives only. */
  if ((h->step == NEXAR__P2P_GROUP) != (r->hdr.step == NEXAR__P2P_GROUP))
    return false;
  return (r->comm_peer == NEXAR_ANY_SOURCE ||
          r->comm_peer == (int)h->src_rank) &&
         (r->tag == NEXAR_ANY_TAG || (uint32_t)r->tag == h->tag);
}

bool nexar__p2p_matches(const nexar__req_t *r, const nexar__imsg_t *m) {
  return nexar__p2p_hdr_matches(r, &m->hdr);
}

/* Remote unidirectional streams are not reported closed by ngtcp2 0.12,
 * so for them a delivered message whose FIN has arrived is the end; remote
 * bidirectional streams end with the stream_close callback. */
static bool finished(const nexar__imsg_t *m) {
  return m->stream_closed || !m->conn || ((m->sid & 2) && m->fin);
}

/* Takes |m| off its link (conn set): out of the link's list, and its
 * stream's credit back to the peer, which may open another stream. */
void nexar__p2p_link_release(nexar__imsg_t *m) {
  nexar__link_t *c = m->conn;
  if (m->aprev)
    m->aprev->anext = m->anext;
  else
    c->imsgs = m->anext;
  if (m->anext) m->anext->aprev = m->aprev;
  m->anext = m->aprev = NULL;
  nexar__link_done_in(c, m);
  if (m->e2e) nexar__credit_give_back(c->ep->owner, m);
}

static void imsg_free(nexar__imsg_t *m) {
  nexar__p2p_unrefuse(m);
  if (m->fwd) nexar__relay_in_gone(m);
  if (m->hash) gnutls_hash_deinit(m->hash, NULL);
  m->hash = NULL;
  if (m->conn) nexar__p2p_link_release(m); /* delivered */
  if (m->held) (*m->held)--;
  if (m->whole_of) *m->whole_of -= m->whole;
  free(m->buf);
  free(m);
}

static bool maybe_free(nexar__imsg_t *m) {
  if (m->state != NEXAR__IM_DONE || !finished(m)) return false;
  imsg_free(m);
  return true;
}

/* Frees |m| once done; a message detached or let in whole (rule 3) gives
 * its origin's room back, and that origin's refused messages are looked at
 * again (nothing is walked while none is refused); room beyond the
 * per-origin bounds (NEXAR_UNEXPECTED_BYTES) is every origin's. */
static void free_done(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  int origin = m->origin;
  bool room = m->held || m->whole_of;
  bool all = m->whole_of == &ctx->topo.beyond_bytes;
  if (!maybe_free(m) || !room) return;
  for (int o = all ? 0 : origin; o < (all ? ctx->topo.n : origin + 1); o++)
    if (ctx->topo.refused[o]) nexar__p2p_redetach(ctx, o);
}

static void deliver(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  nexar__req_t *r = m->req;
  m->req = NULL;
  m->state = NEXAR__IM_DONE;
  if (r && m->bad_hash) {
    /* Authenticated header, altered payload: never delivered. */
    r->msg = NULL;
    r->st.source = src_comm_rank(m);
    r->st.tag = (int)m->hdr.tag;
    r->st.bytes = m->hdr.payload_len;
    nexar__rdv_unlink(r);
    nexar__comm_set_error(
        r->comm,
        "rank %d: message from process %d (seq %llu) relayed through "
        "rank %d: its payload does not match the digest its origin "
        "authenticated; it was refused",
        r->comm->rank, m->origin, (unsigned long long)m->hdr.seq,
        m->conn ? m->conn->peer : -1);
    nexar__req_complete(r, NEXAR_ERR_AUTH);
  } else if (r && !nexar__rdv_first_in(r)) {
    nexar__p2p_recv_end(r, &m->hdr);
  }
  free_done(ctx, m);
}

void nexar__p2p_recv_end(nexar__req_t *r, const nexar__hdr_t *h) {
  r->msg = NULL;
  r->st.source = (int)h->src_rank;
  r->st.tag = (int)h->tag;
  r->st.bytes = h->payload_len;
  int rc = NEXAR_OK;
  if (!r->is_coll && h->payload_len > r->cap) {
    rc = NEXAR_ERR_TRUNCATE;
    /* An RPC call has its own message, set when it was bound. */
    if (r->kind != NEXAR__REQ_RPC)
      nexar__comm_set_error(
          r->comm,
          "rank %d: %s from rank %d tag %u (seq %llu): message of %llu "
          "bytes truncated to the %llu-byte %s",
          r->comm->rank, r->nsegs ? "recvv" : "recv", (int)h->src_rank, h->tag,
          (unsigned long long)h->seq, (unsigned long long)h->payload_len,
          (unsigned long long)r->cap, r->nsegs ? "receive list" : "buffer");
  }
  nexar__req_complete(r, rc);
}

/* Payload bytes [off, off + n) of |m| (they come in order) into its
 * request: copied, or for a folding receive combined element by element,
 * a partial element kept in m->carry until its rest lands. */
static void copy_in(nexar__imsg_t *m, uint64_t off, const uint8_t *d,
                    size_t n) {
  nexar__req_t *r = m->req;
  if (!r || off >= r->cap) return;
  size_t k = r->cap - off < n ? (size_t)(r->cap - off) : n;
  if (r->nsegs) {
    nexar__seg_copy(r->segs, r->nsegs, off, (uint8_t *)d, k, false);
    return;
  }
  if (!r->fold) {
    if (d != r->buf + off) memcpy(r->buf + off, d, k); /* else: landed */
    return;
  }
  size_t es = r->fold_es;
  if (m->carry_n) {
    size_t t = es - m->carry_n < k ? es - m->carry_n : k;
    memcpy(m->carry + m->carry_n, d, t);
    m->carry_n += (uint32_t)t;
    d += t;
    k -= t;
    off += t;
    if (m->carry_n < es) return;
    r->fold(r, r->buf + off - es, m->carry, es);
    m->carry_n = 0;
  }
  size_t whole = k - k % es;
  if (whole) r->fold(r, r->buf + off, d, whole);
  memcpy(m->carry, d + whole, k - whole);
  m->carry_n = (uint32_t)(k - whole);
}

/* Lets the rest of |m| arrive and drops it (credit is returned as for a
 * delivered message). */
void nexar__p2p_open_window(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  if (m->conn && !m->credited) {
    /* Open the stream window for the rest of the message. ngtcp2 only
     * announces a window increase of at least half the stream window
     * (MAX_STREAM_DATA is withheld otherwise), so a message just above
     * the eager size would stall: grant at least the eager size. The
     * header bounds what the peer may send, so the surplus is unused. */
    uint64_t win = (uint64_t)ctx->prm.eager_bytes;
    uint64_t rest = m->pre + m->hdr.payload_len; /* after the first header */
    if (rest > win) {
      uint64_t need = rest - win;
      nexar__link_extend(m->conn, m->sid, need < win ? win : need);
    }
    m->credited = true;
  }
}

/* |m| is matched and its unexpected prefix used (copied in or dropped):
 * the prefix's buffer goes back, the stream's window opens, and a message
 * whose bytes have all come is delivered. */
static void prefix_done(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  nexar__p2p_buf_put(ctx, m->buf, m->buf_pooled);
  m->buf = NULL;
  m->buf_len = 0;
  m->buf_pooled = false;
  nexar__p2p_open_window(ctx, m);
  if (m->got == m->hdr.payload_len) deliver(ctx, m);
}

static void discard(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  nexar__p2p_unrefuse(m);
  m->req = NULL;
  m->state = NEXAR__IM_MATCHED;
  prefix_done(ctx, m);
}

static void bind_msg(nexar__imsg_t *m, nexar__req_t *r) {
  nexar_ctx_t *ctx = r->comm->ctx;
  nexar__p2p_unrefuse(m);
  if (r->is_coll && (!ctx->hooks->coll_same_call(&m->hdr, &r->hdr) ||
                     m->hdr.payload_len != r->cap)) {
    nexar__hdr_t h = m->hdr, mine = r->hdr;
    uint64_t want = r->cap;
    discard(ctx, m);
    /* Fails every running collective of the comm, |r|'s schedule among
     * them; |r| is out of the posted list, so cancelling it only completes
     * it. |r| may be freed by then: not touched again. */
    ctx->hooks->coll_mismatch_hdr(r->comm, &mine, &h, want);
    return;
  }
  m->req = r;
  r->msg = m;
  m->state = NEXAR__IM_MATCHED;
  if (nexar__msg_parted(&m->hdr)) nexar__rdv_bound(m, r);
  if (m->hdr.kind == NEXAR__KIND_P2P &&
      (m->hdr.step == NEXAR__P2P_SYNC || m->hdr.step == NEXAR__P2P_RDV))
    nexar__p2p_ack_match(ctx, r->comm, m); /* RDV: the clear-to-send */
  if (m->buf_len) copy_in(m, 0, m->buf, m->buf_len);
  prefix_done(ctx, m);
}

void nexar__p2p_bind(nexar__imsg_t *m, nexar__req_t *r) {
  bind_msg(m, r);
}

void nexar__p2p_discard(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  discard(ctx, m);
}

static void on_header(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  if (m->hdr.kind == NEXAR__KIND_HEARTBEAT) {
    /* The sender's mesh is formed (bootstrap.c says so to each neighbour;
     * a resumed process's membership probe, failure.c, comes later still):
     * from now on the detector gives it the heartbeat timeout. The
     * transport's acknowledgement answers a probe; the message itself
     * carries nothing. */
    nexar__link_t *c = ctx->peers && m->origin >= 0 && m->origin < ctx->world
                           ? ctx->peers[m->origin]
                           : NULL;
    if (c && c->peer == m->origin) c->peer_meshed = true;
    discard(ctx, m);
    return;
  }
  if (m->hdr.kind == NEXAR__KIND_FAILED || m->hdr.kind == NEXAR__KIND_AGREE) {
    nexar__p2p_ctl_recv(ctx, m);
    return;
  }
  if (m->hdr.kind == NEXAR__KIND_CREDIT) {
    /* Only a destination of this process's relay frames gives credit. */
    if (m->relayed)
      nexar__credit_returned(ctx, m->origin, (int)m->hdr.tag, m->hdr.count);
    discard(ctx, m);
    return;
  }
  nexar_comm_t *comm = nexar__find_comm(ctx, m->hdr.comm_id);
  if (!comm) { /* freed meanwhile */
    discard(ctx, m);
    return;
  }
  if (m->hdr.kind == NEXAR__KIND_MISMATCH) {
    nexar__p2p_on_notice(ctx, comm, m);
    return;
  }
  if (m->hdr.kind == NEXAR__KIND_RPC && m->hdr.step == NEXAR__RPC_PART) {
    nexar__rdv_on_part(ctx, m); /* as RDV_DATA: consumed at once */
    return;
  }
  if (m->hdr.kind == NEXAR__KIND_RPC) {
    nexar__ep_rpc_seen(&ctx->ep);
    ctx->hooks->rpc_header(ctx, comm, m);
    return;
  }
  if (m->hdr.kind == NEXAR__KIND_P2P && m->hdr.step == NEXAR__P2P_MATCHED) {
    nexar__p2p_on_matched(comm, m->origin, m->hdr.coll_seq);
    discard(ctx, m);
    return;
  }
  if (m->hdr.kind == NEXAR__KIND_P2P && m->hdr.step == NEXAR__P2P_RDV_DATA) {
    nexar__rdv_on_part(ctx, m); /* consumed at once, never matched */
    return;
  }
  for (nexar__req_t *r = comm->posted, *next; r; r = next) {
    next = r->next;
    if (!nexar__p2p_matches(r, m)) continue;
    nexar__p2p_posted_remove(comm, r);
    if (r->probe) { /* it reports the message and leaves it to the rest */
      nexar__p2p_probed(r, m);
      continue;
    }
    bind_msg(m, r);
    return;
  }
  if (m->hdr.kind == NEXAR__KIND_COLL &&
      ctx->hooks->coll_screen(comm, &m->hdr)) {
    discard(ctx, m);
    return;
  }
  m->state = NEXAR__IM_UNEXPECTED;
  m->prev = comm->unexp_tail;
  m->next = NULL;
  if (comm->unexp_tail)
    comm->unexp_tail->next = m;
  else
    comm->unexp = m;
  comm->unexp_tail = m;
  nexar__p2p_take_whole(ctx, m);
  nexar__p2p_detach(ctx, m);
}

void nexar__p2p_screen_early(nexar_comm_t *comm, const nexar__hdr_t *mine) {
  const nexar__hooks_t *hooks = comm->ctx->hooks;
  for (nexar__imsg_t *m = comm->unexp, *next; m; m = next) {
    next = m->next;
    if (m->hdr.kind != NEXAR__KIND_COLL || m->hdr.coll_seq != mine->coll_seq ||
        hooks->coll_same_call(&m->hdr, mine))
      continue;
    nexar__hdr_t h = m->hdr;
    nexar__p2p_unexp_remove(comm, m);
    discard(comm->ctx, m);
    hooks->coll_mismatch_hdr(comm, mine, &h, 0);
    return;
  }
}

static void proto_error(nexar__link_t *c, const char *why) {
  NEXAR__WARN(NEXAR__SUB_P2P, "protocol error from rank %d at %s: %s", c->peer,
              c->remote_str, why);
  nexar__link_close(c, NEXAR__CLOSE_PROTO, why);
  nexar__link_fail(c, NEXAR_ERR_PROTO, why);
}

/* Unlinks |m| from the reorder list of its origin. */
void nexar__p2p_reorder_remove(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  nexar__peer_t *p = &ctx->ps[m->origin];
  if (m->prev)
    m->prev->next = m->next;
  else
    p->reorder = m->next;
  if (m->next) m->next->prev = m->prev;
  m->next = m->prev = NULL;
}

static void run_reorder(nexar_ctx_t *ctx, int origin) {
  for (bool progress = true; progress;) {
    progress = false;
    for (nexar__imsg_t *m = ctx->ps[origin].reorder; m; m = m->next) {
      nexar__seqs_t *sq = nexar__peer_seqs(ctx, origin, m->hdr.comm_id);
      if (m->hdr.seq != sq->next_rx[m->hdr.lane]) continue;
      nexar__p2p_reorder_remove(ctx, m);
      sq->next_rx[m->hdr.lane]++;
      on_header(ctx, m);
      progress = true;
      break;
    }
  }
}

void nexar__p2p_refuse(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m,
                       const char *why) {
  if (!m->relayed) {
    proto_error(c, why);
    return;
  }
  ctx->topo.st.rejected++;
  NEXAR__WARN(NEXAR__SUB_INIT,
              "rank %d: relayed message from process %d (kind %u, comm %llu, "
              "seq %llu) that rank %d at %s passed on was dropped: %s",
              ctx->rank, m->origin, m->hdr.kind,
              (unsigned long long)m->hdr.comm_id,
              (unsigned long long)m->hdr.seq, c->peer, c->remote_str, why);
  discard(ctx, m);
}

void nexar__p2p_admit(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m) {
  if (m->hdr.kind == NEXAR__KIND_FAILED || m->hdr.kind == NEXAR__KIND_AGREE ||
      m->hdr.kind == NEXAR__KIND_CREDIT ||
      (m->hdr.kind == NEXAR__KIND_HEARTBEAT &&
       m->hdr.comm_id == NEXAR__PROC_ID)) {
    /* Process-level control: the source is the sender's stable id. */
    if (m->hdr.src_rank != (uint32_t)m->origin) {
      nexar__p2p_refuse(ctx, c, m,
                        "source id does not match the authenticated peer");
      return;
    }
    if (m->hdr.kind == NEXAR__KIND_AGREE &&
        ctx->hooks->agree_gone(ctx, m->hdr.comm_id)) {
      discard(ctx, m); /* a finished agreement */
      return;
    }
    if (m->unordered) {
      /* Relayed: idempotent messages taken as they come, so that one lost
       * with a failed relay holds nothing back (docs/topology.md). */
      on_header(ctx, m);
      return;
    }
    goto ordered;
  }
  nexar_comm_t *comm = nexar__find_comm(ctx, m->hdr.comm_id);
  if (!comm && m->hdr.comm_id < ctx->comm_hwm) {
    /* A communicator this process has freed (ids are never reused): a
     * late message (e.g. a mismatch probe) is dropped. */
    discard(ctx, m);
    return;
  }
  if (!comm) {
    nexar__p2p_refuse(ctx, c, m, "message for an unknown communicator");
    return;
  }
  /* Never trust the claimed source: it must be the authenticated peer
   * (the link's, or the relayed message's authenticated origin). */
  if (m->hdr.kind == NEXAR__KIND_HEARTBEAT ||
      m->hdr.kind == NEXAR__KIND_RELAY || (int)m->hdr.src_rank >= comm->size ||
      comm->world_ranks[m->hdr.src_rank] != m->origin) {
    nexar__p2p_refuse(ctx, c, m,
                      "source rank does not match the authenticated peer");
    return;
  }
ordered:;
  nexar__seqs_t *sq = nexar__peer_seqs(ctx, m->origin, m->hdr.comm_id);
  if (!sq || m->hdr.seq < sq->next_rx[m->hdr.lane]) {
    nexar__p2p_refuse(ctx, c, m, "duplicate or stale sequence number");
    return;
  }
  if (m->hdr.seq > sq->next_rx[m->hdr.lane]) {
    nexar__peer_t *p = &ctx->ps[m->origin];
    m->state = NEXAR__IM_ORDER;
    m->next = p->reorder;
    m->prev = NULL;
    if (p->reorder) p->reorder->prev = m;
    p->reorder = m;
    return;
  }
  sq->next_rx[m->hdr.lane]++;
  on_header(ctx, m);
  run_reorder(ctx, m->origin);
}

static void header_done(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m) {
  const char *why = NULL;
  int r = nexar__hdr_decode(&m->hdr, m->hdrbuf, NEXAR__HDR_BYTES,
                            (uint64_t)ctx->prm.max_message_mb << 20, &why);
  if (r < 0) {
    proto_error(c, why ? why : "bad message header");
    return;
  }
  m->origin = c->peer;
  if (m->hdr.kind == NEXAR__KIND_RELAY) {
    /* The envelope and the inner header follow (relay.c). */
    m->state = NEXAR__IM_RELAY;
    m->pre = NEXAR__RELAY_PRE_BYTES;
    return;
  }
  nexar__p2p_admit(ctx, c, m);
}

void nexar__p2p_on_stream_data(nexar__link_t *c, int64_t sid, nexar__imsg_t *m,
                               const uint8_t *d, size_t n, bool fin) {
  nexar_ctx_t *ctx = c->ep->owner;
  if (!m) {
    m = nexar__zalloc(sizeof(*m));
    if (!m) {
      proto_error(c, "out of memory");
      return;
    }
    m->conn = c;
    m->sid = sid;
    m->anext = c->imsgs;
    if (c->imsgs) c->imsgs->aprev = m;
    c->imsgs = m;
    nexar__link_attach_in(c, sid, m);
  }
  if (m->hdr_got < NEXAR__HDR_BYTES) {
    size_t k =
        NEXAR__HDR_BYTES - m->hdr_got < n ? NEXAR__HDR_BYTES - m->hdr_got : n;
    memcpy(m->hdrbuf + m->hdr_got, d, k);
    m->hdr_got += k;
    d += k;
    n -= k;
    if (m->hdr_got < NEXAR__HDR_BYTES) {
      if (fin) proto_error(c, "stream ended inside a message header");
      return;
    }
    header_done(ctx, c, m);
    if (c->state == NEXAR__CS_DEAD) return;
  }
  if (m->state == NEXAR__IM_RELAY) {
    size_t k = m->pre - m->pre_got < n ? m->pre - m->pre_got : n;
    memcpy(m->rbuf + m->pre_got, d, k);
    m->pre_got += (uint32_t)k;
    d += k;
    n -= k;
    if (m->pre_got < m->pre) {
      if (fin) proto_error(c, "stream ended inside a relay envelope");
      return;
    }
    nexar__relay_on_prefix(ctx, c, m);
    if (c->state == NEXAR__CS_DEAD) return;
  }
  if (m->state == NEXAR__IM_FWD) {
    nexar__relay_fwd_data(c, m, d, n, fin);
    return;
  }
  if (m->got + n > m->hdr.payload_len) {
    proto_error(c, "more payload than the header announced");
    return;
  }
  if (n) {
    if (m->state == NEXAR__IM_MATCHED) {
      copy_in(m, m->got, d, n);
    } else if (m->state != NEXAR__IM_DONE) {
      /* Unexpected or waiting for order: keep the prefix, which the
       * stream window bounds by the eager limit. */
      uint64_t cap = m->hdr.payload_len < (uint64_t)ctx->prm.eager_bytes ||
                             m->credited /* relayed under credit */
                         ? m->hdr.payload_len
                         : (uint64_t)ctx->prm.eager_bytes;
      if (!m->buf) m->buf = nexar__p2p_buf_get(ctx, cap, &m->buf_pooled);
      if (!m->buf || m->buf_len + n > cap) {
        proto_error(c, "peer exceeded the stream window");
        return;
      }
      memcpy(m->buf + m->buf_len, d, n);
      m->buf_len += n;
    }
    if (m->hash) nexar__relay_digest(m, d, n);
    if (m->rdv) nexar__rdv_data(ctx, m, m->got, d, n);
    m->got += n;
  }
  if (fin) m->fin = true;
  if (fin && m->got != m->hdr.payload_len) {
    proto_error(c, "stream ended before the payload did");
    return;
  }
  if (m->state == NEXAR__IM_MATCHED && m->got == m->hdr.payload_len)
    deliver(ctx, m);
  else if (fin && m->state == NEXAR__IM_UNEXPECTED)
    nexar__p2p_detach(ctx, m);
  else if (fin)
    free_done(ctx, m);
}

void nexar__imsg_release(nexar__imsg_t *m) {
  m->state = NEXAR__IM_DONE;
  maybe_free(m);
}

void nexar__p2p_on_stream_close(nexar__link_t *c, nexar__imsg_t *m) {
  m->stream_closed = true;
  if (m->state == NEXAR__IM_DONE ||
      ((m->state == NEXAR__IM_FWD || m->state == NEXAR__IM_RELAY) && !m->fin)) {
    /* Delivered, or a frame in passing whose stream was cut: whatever it
     * still feeds downstream is abandoned (relay.c), and a later part cut
     * short ends what waits for it. */
    if (m->state == NEXAR__IM_DONE)
      nexar__rdv_cut(c->ep->owner, m, NEXAR_ERR_PEER_FAILED);
    m->state = NEXAR__IM_DONE;
    imsg_free(m);
    return;
  }
  /* A stream cut by the connection's end: the request fails when the
   * connection's end is handled (bootstrap.c on_closed), with its cause. */
  if (!m->fin && m->state == NEXAR__IM_MATCHED && m->req &&
      nexar__link_alive(c)) {
    nexar__req_t *r = m->req;
    m->req = NULL;
    r->msg = NULL;
    nexar__rdv_unlink(r);
    nexar__req_complete(r, NEXAR_ERR_PEER_FAILED);
    m->state = NEXAR__IM_DONE;
    imsg_free(m);
  }
}

/* Receive from self: the message is copied whole and matched at once. */
int nexar__p2p_self_send(nexar_ctx_t *ctx, nexar__req_t *req) {
  if (req->sync) {
    /* The acknowledgement finds the send by its seq, as from a peer. */
    nexar__seqs_t *sq = nexar__peer_seqs(ctx, ctx->rank, req->hdr.comm_id);
    if (!sq) return NEXAR_ERR_NOMEM;
    req->hdr.seq = sq->next_tx[req->lane]++;
  }
  nexar__imsg_t *m = nexar__zalloc(sizeof(*m));
  if (!m) return NEXAR_ERR_NOMEM;
  m->hdr = req->hdr;
  m->hdr.payload_len = req->cap;
  m->origin = ctx->rank;
  m->got = req->cap;
  m->fin = true;
  if (req->cap) {
    m->buf = malloc(req->cap);
    if (!m->buf) {
      free(m);
      return NEXAR_ERR_NOMEM;
    }
    if (req->nsegs)
      nexar__seg_copy(req->segs, req->nsegs, 0, m->buf, (size_t)req->cap, true);
    else
      memcpy(m->buf, req->buf, req->cap);
    m->buf_len = req->cap;
  }
  req->st.bytes = req->cap;
  nexar__p2p_complete(req, NEXAR_OK);
  on_header(ctx, m);
  return 0;
}

static void start_recv(nexar__req_t *r) {
  nexar_comm_t *comm = r->comm;
  for (nexar__imsg_t *m = comm->unexp; m; m = m->next) {
    if (nexar__p2p_matches(r, m)) {
      if (r->probe) {
        nexar__p2p_probed(r, m);
        return;
      }
      nexar__p2p_unexp_remove(comm, m);
      bind_msg(m, r);
      return;
    }
  }
  r->prev = comm->posted_tail;
  r->next = NULL;
  if (comm->posted_tail)
    comm->posted_tail->next = r;
  else
    comm->posted = r;
  comm->posted_tail = r;
  /* A receive from a peer already known dead fails at once. */
  nexar_ctx_t *ctx = comm->ctx;
  if (r->peer >= 0 && r->peer != ctx->rank && ctx->peers &&
      nexar__peer_gone(ctx, r->peer)) {
    nexar__p2p_posted_remove(comm, r);
    FAIL_TEXT(comm, "rank %d: recv from rank %d: peer is gone", ctx->rank,
              r->peer);
    nexar__req_complete(r, nexar__p2p_gone_code(ctx->peers[r->peer]));
  }
}

void nexar__p2p_start(nexar__req_t *req) {
  nexar_ctx_t *ctx = req->comm->ctx;
  if (req->kind == NEXAR__REQ_RECV) {
    start_recv(req);
    return;
  }
  if (req->sync) nexar__p2p_sync_link(req);
  int rc = req->peer == ctx->rank ? nexar__p2p_self_send(ctx, req)
                                  : nexar__p2p_post_send(ctx, req);
  if (rc < 0) nexar__p2p_complete(req, rc);
}
