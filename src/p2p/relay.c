/*
 * Relay: messages between processes that are not neighbours
 * (docs/topology.md, docs/wire-protocol.md section 2.6). Engine only.
 *
 * - Origin: the message's own header and payload go out unchanged behind
 *   an outer RELAY header and an envelope: the SHA-256 of the payload and
 *   an HMAC-SHA256 tag over (origin, destination, inner header, digest)
 *   under the pair key that only origin and destination can derive (X25519
 *   of their static keys, whose public halves the roster's certificates
 *   carry). Sequence numbers are the origin's, per (origin, destination,
 *   comm, lane), so the destination orders relayed messages as it orders
 *   direct ones.
 * - Relay: checks the hop limit, picks the next hop and streams the frame
 *   on (cut-through). The bytes in transit sit in a ring of the eager size;
 *   the inbound stream's window grows only as the next hop acknowledges,
 *   so flow control (and so the rendezvous of large messages) holds end to
 *   end, and a relay holds at most one window per frame. The inbound
 *   stream's credit is returned only when the frame has been delivered to
 *   the next hop, so a stalled route pushes back to the origin.
 * - Destination: verifies the tag before anything is matched (a relay
 *   cannot forge an origin or alter a header), then digests the payload as
 *   it arrives; a payload that does not match is never delivered.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p/p2p.h"

struct nexar__fwd {
  nexar__imsg_t *in;  /* inbound stream, NULL once gone */
  nexar__omsg_t *out; /* outbound stream, NULL once gone */
  uint8_t *ring;      /* bytes [done, rx) after the outer header */
  uint64_t cap;       /* ring size: min(total, eager bytes) */
  uint64_t rx;        /* bytes after the outer header received */
  uint64_t done;      /* of those, acknowledged by the next hop */
  uint64_t total;     /* bytes after the outer header (its payload_len) */
  bool whole;         /* stored and forwarded (credited): ring = frame */
};

/* Whether frame |m| (outer header in m->hdr) is taken whole: its origin
 * holds end-to-end credit for it, or it is a control message (few, bounded
 * by the protocols that send them: CREDIT by the credited frames, FAILED
 * and AGREE by failures, MATCHED by synchronous sends), and it is within
 * this process's bound. */
static bool credited_whole(nexar_ctx_t *ctx, const nexar__imsg_t *m) {
  return (m->hdr.count == 1 || m->hdr.lane == NEXAR__LANE_CONTROL) &&
         m->hdr.payload_len <= (uint64_t)ctx->prm.relay_credit_bytes;
}

/* Opens the window of |m|'s stream on |c| to the whole |total| bytes after
 * its first header (it starts at the eager size). ngtcp2 announces only
 * an increase of at least half the window: at least the eager size is
 * granted; the header bounds what the peer may send. */
static void open_whole(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m,
                       uint64_t total) {
  uint64_t eager = (uint64_t)ctx->prm.eager_bytes;
  if (total > eager)
    nexar__link_extend(c, m->sid,
                       total - eager < eager ? eager : total - eager);
}

/* The pair keys with |peer| (derived on first use). */
static int pair_key(nexar_ctx_t *ctx, int peer, const uint8_t **tx,
                    const uint8_t **rx) {
  nexar__topo_t *t = &ctx->topo;
  if (peer < 0 || peer >= t->n || !t->key_state) return NEXAR_ERR_AUTH;
  if (t->key_state[peer] == 0) {
    int rc = nexar__pair_keys(&ctx->ep.id, (uint32_t)ctx->rank, (uint32_t)peer,
                              t->pub[peer], t->ktx[peer], t->krx[peer]);
    t->key_state[peer] = rc == 0 ? 1 : 2;
    if (rc < 0)
      NEXAR__WARN(NEXAR__SUB_INIT,
                  "rank %d: no relay key with process %d: its public key is "
                  "unusable (%s)",
                  ctx->rank, peer, nexar_strerror(rc));
  }
  if (t->key_state[peer] != 1) return NEXAR_ERR_AUTH;
  *tx = t->ktx[peer];
  *rx = t->krx[peer];
  return 0;
}

int nexar__relay_wrap(nexar_ctx_t *ctx, int dest, int limit, nexar__omsg_t *m,
                      const uint8_t *payload, bool credited) {
  const uint8_t *ktx, *krx;
  int rc = pair_key(ctx, dest, &ktx, &krx);
  if (rc < 0) return rc;
  uint8_t *pre = malloc(NEXAR__RELAY_PRE_BYTES);
  if (!pre) return NEXAR_ERR_NOMEM;
  int origin = ctx->rank;
  uint8_t *inner = pre + NEXAR__RELAY_ENV_BYTES;
  memcpy(inner, m->hdr, NEXAR__HDR_BYTES);
  if (ctx->topo.forge_as >= 0) {
    /* Test hook: claim another origin (and, on the world and for
     * process-level messages, its rank); the tag stays ours. */
    origin = ctx->topo.forge_as;
    if (nexar__get_u64(inner + 8) == 0 || (nexar__get_u64(inner + 8) >> 63))
      nexar__put_u32(inner + 16, (uint32_t)origin);
  }
  nexar__relay_env_t env;
  gnutls_hash_fast(GNUTLS_DIG_SHA256, payload, (size_t)m->len,
                   env.payload_hash);
  nexar__relay_tag(ktx, (uint32_t)origin, (uint32_t)dest, inner,
                   env.payload_hash, env.tag);
  nexar__relay_env_encode(&env, pre);
  nexar__hdr_t out = {.kind = NEXAR__KIND_RELAY,
                      .lane = (uint8_t)m->lane,
                      .src_rank = (uint32_t)origin,
                      .tag = (uint32_t)dest,
                      .step = 1,
                      .algo = (uint32_t)limit,
                      .count = credited,
                      .payload_len = NEXAR__RELAY_PRE_BYTES + m->len};
  nexar__hdr_encode(&out, m->hdr);
  m->pre = pre;
  m->pre_len = NEXAR__RELAY_PRE_BYTES;
  ctx->topo.st.sent++;
  return 0;
}

/* Drops relay frame |m| (outer header in m->hdr): the rest of its stream
 * drains unread. |refused|: counted as rejected (a forgery or a frame that
 * breaks the rules) rather than as undeliverable. */
static void drop(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m,
                 bool refused, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void drop(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m,
                 bool refused, const char *fmt, ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  if (refused)
    ctx->topo.st.rejected++;
  else
    ctx->topo.st.dropped++;
  NEXAR__WARN(NEXAR__SUB_INIT,
              "rank %d: relay frame from process %u to process %u (hop %u of "
              "at most %u) received from rank %d at %s %s: %s",
              ctx->rank, m->hdr.src_rank, m->hdr.tag, m->hdr.step, m->hdr.algo,
              c->peer, c->remote_str, refused ? "refused" : "dropped", why);
  m->hdr.payload_len -= NEXAR__RELAY_PRE_BYTES;
  m->state = NEXAR__IM_HDR;
  nexar__p2p_discard(ctx, m);
}

/* Passes frame |m| on towards its destination. */
static void forward(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m) {
  uint32_t dest = m->hdr.tag;
  if (m->hdr.step >= m->hdr.algo) {
    drop(ctx, c, m, false, "hop limit %u reached", m->hdr.algo);
    return;
  }
  if (ctx->dead[dest]) {
    drop(ctx, c, m, false, "the destination %s",
         ctx->dead[dest] == 1 ? "was declared failed" : "has left");
    return;
  }
  int hop = nexar__topo_next(ctx, (int)dest);
  nexar__link_t *n = hop >= 0 ? ctx->peers[hop] : NULL;
  /* A neighbour whose link this process has not accepted yet (the mesh
   * is still forming here): the frame waits for it (nexar__relay_unpark). */
  bool park = hop >= 0 && !n && !ctx->dead[hop];
  if (!park && (!n || n->state == NEXAR__CS_DEAD)) {
    drop(ctx, c, m, false, "no route to the destination");
    return;
  }
  nexar__fwd_t *f = calloc(1, sizeof(*f));
  nexar__omsg_t *o = calloc(1, sizeof(*o));
  /* The ring: the stream's initial window (the eager size), widened to
   * NEXAR_RELAY_WINDOW_BYTES at once so that a large frame keeps a useful
   * amount in flight on both links. */
  uint64_t total = m->hdr.payload_len, eager = (uint64_t)ctx->prm.eager_bytes;
  uint64_t win = (uint64_t)ctx->prm.relay_window_bytes;
  if (win < eager) win = eager;
  /* A credited frame is stored and forwarded: the ring holds all of it. */
  bool whole = credited_whole(ctx, m);
  uint64_t cap = whole || total < win ? total : win;
  uint8_t *ring = f && o ? malloc(cap) : NULL;
  if (!ring) {
    free(f);
    free(o);
    drop(ctx, c, m, false, "out of memory");
    return;
  }
  memcpy(ring, m->rbuf, NEXAR__RELAY_PRE_BYTES);
  f->ring = ring;
  f->cap = cap;
  f->rx = NEXAR__RELAY_PRE_BYTES;
  f->total = total;
  f->whole = whole;
  nexar__hdr_t h = m->hdr;
  h.step++;
  nexar__hdr_encode(&h, o->hdr);
  o->len = total;
  o->sid = -1;
  o->lane = m->hdr.lane;
  o->dest = (int)dest;
  o->fwd = f;
  f->in = m;
  f->out = o;
  m->fwd = f;
  m->state = NEXAR__IM_FWD;
  if (whole)
    open_whole(ctx, c, m, total);
  else if (cap > eager)
    nexar__link_extend(c, m->sid, cap - eager);
  ctx->topo.st.forwarded++;
  if (!park) {
    nexar__link_send(n, o);
    return;
  }
  nexar__omsg_t **pp = &ctx->topo.parked[hop];
  while (*pp) pp = &(*pp)->next;
  *pp = o;
}

void nexar__relay_unpark(nexar_ctx_t *ctx, int id) {
  nexar__topo_t *t = &ctx->topo;
  nexar__link_t *c = ctx->peers ? ctx->peers[id] : NULL;
  if (!t->parked || !c) return;
  while (t->parked[id]) {
    nexar__omsg_t *o = t->parked[id];
    t->parked[id] = o->next;
    nexar__link_send(c, o);
  }
}

void nexar__relay_fini(nexar_ctx_t *ctx) {
  nexar__topo_t *t = &ctx->topo;
  nexar__credit_fini(ctx);
  for (int id = 0; t->parked && id < t->n; id++) {
    while (t->parked[id]) {
      nexar__omsg_t *o = t->parked[id];
      t->parked[id] = o->next;
      nexar__omsg_free(o);
    }
  }
}

/* Ends the digest of a relayed payload and compares it. */
static void digest_end(nexar__imsg_t *m) {
  uint8_t got[32];
  gnutls_hash_deinit(m->hash, got);
  m->hash = NULL;
  if (nexar__ct_equal(got, m->want, 32)) return;
  m->bad_hash = true;
  nexar_ctx_t *ctx = m->conn->ep->owner;
  ctx->topo.st.rejected++;
  NEXAR__WARN(NEXAR__SUB_INIT,
              "rank %d: relayed message from process %d (comm %llu, seq %llu, "
              "%llu bytes) received from rank %d at %s: the payload does not "
              "match the digest its origin authenticated; not delivered",
              ctx->rank, m->origin, (unsigned long long)m->hdr.comm_id,
              (unsigned long long)m->hdr.seq,
              (unsigned long long)m->hdr.payload_len, m->conn->peer,
              m->conn->remote_str);
}

void nexar__relay_digest(nexar__imsg_t *m, const uint8_t *d, size_t n) {
  gnutls_hash(m->hash, d, n);
  if (m->got + n == m->hdr.payload_len) digest_end(m);
}

void nexar__relay_on_prefix(nexar_ctx_t *ctx, nexar__link_t *c,
                            nexar__imsg_t *m) {
  nexar__topo_t *t = &ctx->topo;
  uint32_t origin = m->hdr.src_rank, dest = m->hdr.tag;
  if (t->kind == NEXAR__TOPO_FULL || origin >= (uint32_t)t->n ||
      dest >= (uint32_t)t->n) {
    char why[96];
    snprintf(why, sizeof(why), "relay frame from %u to %u in a %s world of %d",
             origin, dest, t->name, t->n);
    nexar__p2p_refuse(ctx, c, m, why);
    return;
  }
  if (origin == (uint32_t)ctx->rank) {
    drop(ctx, c, m, true, "it claims to come from this process");
    return;
  }
  if (dest != (uint32_t)ctx->rank) {
    forward(ctx, c, m);
    return;
  }
  /* Here: authenticate before anything else looks at the inner header. */
  nexar__relay_env_t env;
  nexar__hdr_t in;
  const char *why = NULL;
  const uint8_t *inner = m->rbuf + NEXAR__RELAY_ENV_BYTES;
  nexar__relay_env_decode(&env, m->rbuf);
  const uint8_t *ktx, *krx;
  if (pair_key(ctx, (int)origin, &ktx, &krx) < 0) {
    drop(ctx, c, m, true, "no relay key for process %u", origin);
    return;
  }
  uint8_t tag[32];
  nexar__relay_tag(krx, origin, dest, inner, env.payload_hash, tag);
  if (!nexar__ct_equal(tag, env.tag, 32)) {
    drop(ctx, c, m, true,
         "its tag does not verify under the pair key of process %u (a "
         "forged origin or an altered header)",
         origin);
    return;
  }
  if (nexar__hdr_decode(&in, inner, NEXAR__HDR_BYTES,
                        (uint64_t)ctx->prm.max_message_mb << 20, &why) < 0 ||
      in.payload_len != m->hdr.payload_len - NEXAR__RELAY_PRE_BYTES ||
      in.kind == NEXAR__KIND_RELAY || in.kind == NEXAR__KIND_HEARTBEAT ||
      in.lane != m->hdr.lane) {
    drop(ctx, c, m, true, "bad inner header (%s)", why ? why : "length/kind");
    return;
  }
  if (m->hdr.count == 1) {
    /* Its origin holds credit for it: given back as it leaves the link;
     * within our bound, the whole message may arrive unmatched. */
    m->e2e = m->hdr.payload_len;
    if (m->hdr.payload_len <= (uint64_t)ctx->prm.relay_credit_bytes) {
      open_whole(ctx, c, m, m->hdr.payload_len);
      m->credited = true;
    }
  }
  m->hdr = in;
  m->origin = (int)origin;
  m->relayed = true;
  m->unordered = in.kind == NEXAR__KIND_FAILED ||
                 in.kind == NEXAR__KIND_AGREE || in.kind == NEXAR__KIND_CREDIT;
  m->state = NEXAR__IM_HDR;
  memcpy(m->want, env.payload_hash, 32);
  if (gnutls_hash_init(&m->hash, GNUTLS_DIG_SHA256) < 0) {
    m->hash = NULL;
    m->bad_hash = true;
  } else if (in.payload_len == 0) {
    digest_end(m);
  }
  t->st.delivered++;
  nexar__p2p_admit(ctx, c, m);
}

bool nexar__relay_fwd_data(nexar__link_t *c, nexar__imsg_t *m, const uint8_t *d,
                           size_t n, bool fin) {
  nexar__fwd_t *f = m->fwd;
  const char *bad = NULL;
  if (f->rx + n > f->total)
    bad = "relay frame longer than its header announced";
  else if (f->rx + n - f->done > f->cap)
    bad = "peer exceeded the relay stream window";
  else if (fin && f->rx + n != f->total)
    bad = "stream ended before the relay frame did";
  if (bad) {
    NEXAR__WARN(NEXAR__SUB_INIT, "protocol error from rank %d at %s: %s",
                c->peer, c->remote_str, bad);
    nexar__link_close(c, NEXAR__CLOSE_PROTO, bad);
    nexar__link_fail(c, NEXAR_ERR_PROTO, bad);
    return false;
  }
  while (n) {
    uint64_t at = f->rx % f->cap;
    size_t k = f->cap - at < n ? (size_t)(f->cap - at) : n;
    memcpy(f->ring + at, d, k);
    f->rx += k;
    d += k;
    n -= k;
  }
  if (fin) m->fin = true;
  if (f->out && f->out->conn) f->out->conn->want_write = true;
  if (fin && f->whole) {
    /* Stored whole: the inbound stream's credit returns now, whatever the
     * next hop does (docs/topology.md section 10, cycle 2). */
    f->in = NULL;
    m->fwd = NULL;
    nexar__imsg_release(m);
  }
  return true;
}

size_t nexar__omsg_vecs(const nexar__omsg_t *m, struct iovec *v, size_t max,
                        bool *fin) {
  uint64_t off = m->sent, total = nexar__omsg_total(m);
  uint64_t avail = m->fwd ? NEXAR__HDR_BYTES + m->fwd->rx : total;
  size_t n = 0;
  if (off < NEXAR__HDR_BYTES && n < max) {
    v[n].iov_base = (uint8_t *)m->hdr + off;
    v[n++].iov_len = NEXAR__HDR_BYTES - off;
    off = NEXAR__HDR_BYTES;
  }
  if (m->fwd) {
    const nexar__fwd_t *f = m->fwd;
    while (off < avail && n < max) {
      uint64_t at = (off - NEXAR__HDR_BYTES) % f->cap;
      uint64_t k = f->cap - at < avail - off ? f->cap - at : avail - off;
      v[n].iov_base = f->ring + at;
      v[n++].iov_len = (size_t)k;
      off += k;
    }
  } else {
    uint64_t pend = NEXAR__HDR_BYTES + m->pre_len;
    if (off < pend && n < max) {
      v[n].iov_base = m->pre + (off - NEXAR__HDR_BYTES);
      v[n++].iov_len = (size_t)(pend - off);
      off = pend;
    }
    /* The payload: one run, or one per gathered entry. */
    while (off < total && n < max) {
      uint64_t k;
      const uint8_t *p = nexar__omsg_run(m, off - pend, &k);
      v[n].iov_base = (uint8_t *)p;
      v[n++].iov_len = (size_t)k;
      off += k;
    }
  }
  *fin = off == total;
  return n;
}

bool nexar__omsg_more(const nexar__omsg_t *m) {
  uint64_t avail =
      m->fwd ? NEXAR__HDR_BYTES + m->fwd->rx : nexar__omsg_total(m);
  return m->sent < avail;
}

void nexar__relay_acked(nexar__omsg_t *m) {
  nexar__fwd_t *f = m->fwd;
  if (!f) return;
  uint64_t a = m->acked > NEXAR__HDR_BYTES ? m->acked - NEXAR__HDR_BYTES : 0;
  if (a > f->rx) a = f->rx;
  if (a <= f->done) return;
  uint64_t delta = a - f->done;
  f->done = a;
  /* Room in the ring: the previous hop may send that much more. */
  if (f->in && f->in->conn && f->rx < f->total)
    nexar__link_extend(f->in->conn, f->in->sid, delta);
}

void nexar__relay_out_gone(nexar__omsg_t *o) {
  nexar__fwd_t *f = o->fwd;
  o->fwd = NULL;
  f->out = NULL;
  nexar__imsg_t *in = f->in;
  if (in) {
    in->fwd = NULL;
    if (f->done >= f->total) {
      /* Delivered to the next hop: the inbound stream's credit returns. */
      nexar__imsg_release(in);
    } else {
      /* The next hop is gone: the rest of the frame drains unread. */
      nexar_ctx_t *ctx = in->conn->ep->owner;
      in->hdr.payload_len = f->total - NEXAR__RELAY_PRE_BYTES;
      in->got = f->rx - NEXAR__RELAY_PRE_BYTES;
      in->state = NEXAR__IM_HDR;
      nexar__p2p_discard(ctx, in);
    }
  }
  free(f->ring);
  free(f);
}

void nexar__relay_in_gone(nexar__imsg_t *in) {
  nexar__fwd_t *f = in->fwd;
  in->fwd = NULL;
  f->in = NULL;
  nexar__omsg_t *o = f->out;
  if (!o) {
    free(f->ring);
    free(f);
    return;
  }
  if (f->rx >= f->total) return; /* the ring goes with the omsg */
  /* The frame can never be completed downstream: reset its stream (its
   * destination then fails the receive) or unqueue it. */
  nexar__link_t *c = o->conn;
  o->sent = nexar__omsg_total(o);
  if (o->sid >= 0) {
    if (c) nexar__link_stop_out(c, o);
    return;
  }
  if (c) {
    nexar__link_unqueue(c, o);
  } else {
    /* Still parked for a link that never came up. */
    nexar__topo_t *t = &((nexar_ctx_t *)in->conn->ep->owner)->topo;
    for (int id = 0; t->parked && id < t->n; id++)
      for (nexar__omsg_t **pp = &t->parked[id]; *pp; pp = &(*pp)->next)
        if (*pp == o) {
          *pp = o->next;
          break;
        }
  }
  nexar__omsg_free(o);
}

void nexar__relay_reroute(nexar_ctx_t *ctx) {
  for (int id = 0; ctx->peers && id < ctx->world; id++) {
    nexar__link_t *c = id == ctx->rank ? NULL : ctx->peers[id];
    if (!c || (c->state != NEXAR__CS_DEAD && !ctx->dead[id])) continue;
    /* Frames arriving from the dead neighbour will not finish. */
    for (nexar__imsg_t *m = c->imsgs; m; m = m->anext)
      if (m->fwd) nexar__relay_in_gone(m);
    for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++) {
      for (nexar__omsg_t *m = c->outq[lane], *next; m; m = next) {
        next = m->next;
        if (m->dest == id) continue; /* for the failed one: failed with it */
        /* Untouched by the failed neighbour (it acknowledged nothing), so
         * every byte is still here: send it again along the new route. */
        bool intact = m->acked == 0 && (!m->fwd || m->fwd->done == 0) &&
                      (m->fwd || nexar__omsg_has_payload(m) || !m->len);
        int hop = nexar__topo_next(ctx, m->dest);
        nexar__link_t *n = hop >= 0 ? ctx->peers[hop] : NULL;
        nexar__link_unqueue(c, m);
        nexar__link_forget_out(c, m);
        if (m->owned) c->eager_bytes -= c->eager_bytes < m->len ? 0 : m->len;
        if (intact && n && n->state == NEXAR__CS_READY) {
          m->sid = -1;
          m->sent = 0;
          m->blocked = false;
          if (m->owned) n->eager_bytes += m->len;
          ctx->topo.st.rerouted++;
          nexar__link_send(n, m);
          continue;
        }
        ctx->topo.st.dropped++;
        NEXAR__INFO(NEXAR__SUB_P2P,
                    "rank %d: a frame for process %d was lost with rank %d "
                    "(%s)",
                    ctx->rank, m->dest, id,
                    intact ? "no route left" : "partly passed on");
        char why[160];
        snprintf(why, sizeof(why),
                 "rank %d: send to process %d failed: lost with relay rank %d",
                 ctx->rank, m->dest, id);
        nexar__omsg_fail(m, NEXAR_ERR_PEER_FAILED, why);
        nexar__omsg_free(m);
      }
    }
  }
  nexar__credit_reset(ctx);
}
