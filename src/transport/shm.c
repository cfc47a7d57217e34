/*
 * Shared-memory links to processes on this host (same boot, same network
 * namespace: the roster's host key). Runs only on the progress thread.
 *
 * Rendezvous: every worker listens on an abstract Unix socket named by the
 * random nonce it sent the seed (shm_os.c); the roster, which the seed gave
 * every member over its authenticated channel, carries each member's host
 * key, pid and nonce. The lower rank dials: it connects, checks with
 * SO_PEERCRED that the listener is the pid the roster names, creates a
 * sealed memfd of two segments of two rings each (shm_ring.c: the bulk
 * rings and the priority rings, shm_tx.c) and two eventfds, and
 * sends them (SCM_RIGHTS) with its certificate fingerprint, its stream
 * window and stream limit. The listener checks the sender's credentials
 * against the roster (ops->verify_local) and the descriptors, attaches,
 * and answers with its own window and limit; the link is then ready on
 * both sides. Anything unexpected closes the socket: the dialer falls back
 * to QUIC when the check fails on its side (NEXAR_TRANSPORT=auto).
 *
 * Streams: as on QUIC, each message is a stream of its own, opened in
 * lane order at its first record (ids 0, 8, 16, ... per direction on the
 * bulk ring, 4, 12, 20, ... on the priority ring, shm_tx.c), with the
 * receiver's window (eager bytes + header) until it extends it (CREDIT),
 * and at most the receiver's stream limit open at once, returned in
 * batches (STREAMS) as messages are delivered. Records: DATA (a: stream,
 * b: offset, FIN flag), SMALL (a whole small message in one line, standing
 * for the next stream's DATA with FIN; shm.h), CREDIT (a: stream, b: new
 * limit), RESET (a: stream), STREAMS (a: count), HB (nothing; accepted, no
 * longer sent).
 * The ring holds the bytes, so a record written is a record acknowledged.
 *
 * Everything read from the segment is untrusted: the ring checks its
 * records (shm_ring.c), and here every stream id, offset, length and
 * credit is checked against what this side allowed before it is used; a
 * violation fails the link with NEXAR_ERR_PROTO naming the peer.
 *
 * Failure: the socket stays open for the link's life; the peer's exit
 * closes it (the socket is in the engine's epoll set), which proves the
 * process gone, like a closed UDP port; a stopped peer counts no heartbeat
 * (a link that wrote nothing for a heartbeat interval bumps a counter in
 * its ring's producer line: no record, no kick, nobody woken; the
 * receiver looks at the counters every SOCK_CHECK_NS), and the failure
 * detector judges its silence as on QUIC. A close (finalize, fence,
 * leave) travels on the socket as a message with its code and reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/shm.h"

/* ---- Receiving. */

static rstream_t *rs_find(nexar__shm_t *s, int64_t sid) {
  for (int i = 0; i < s->nrs; i++)
    if (s->rs[i].sid == sid) return &s->rs[i];
  return NULL;
}

static void rs_drop(nexar__shm_t *s, rstream_t *r) {
  *r = s->rs[--s->nrs];
}

static nexar__omsg_t *out_find(nexar__shm_t *s, int64_t sid) {
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++)
    for (nexar__omsg_t *m = s->l.outq[lane]; m; m = m->next)
      if (m->sid == sid) return m;
  return NULL;
}

/* Doubles the stream table (from 8, up to this side's stream limit). */
static int rs_grow(nexar__shm_t *s) {
  uint64_t cap = s->rs_cap ? 2 * (uint64_t)s->rs_cap : 8;
  if (cap > s->rstreams_max) cap = s->rstreams_max;
  rstream_t *rs = realloc(s->rs, cap * sizeof(*rs));
  if (!rs) return NEXAR_ERR_NOMEM;
  s->rs = rs;
  s->rs_cap = (int)cap;
  return 0;
}

/* The stream of a DATA or DESC record of |len| bytes at offset |off|,
 * opened if it is the next one; NULL (|why| set) when the peer broke the
 * stream rules. */
static rstream_t *rs_take(nexar__shm_t *s, int64_t sid, uint64_t off,
                          uint64_t len, const char **why) {
  rstream_t *st = rs_find(s, sid);
  if (!st) {
    if (sid != s->last_rsid[s->rx_q] + SID_STEP || off != 0) {
      *why = "a record for a stream that is not open";
      return NULL;
    }
    if ((uint64_t)s->nrs >= s->rstreams_max) {
      *why = "more streams open than allowed";
      return NULL;
    }
    if (s->nrs == s->rs_cap && rs_grow(s) < 0) {
      *why = "out of memory (its stream table)";
      return NULL;
    }
    s->last_rsid[s->rx_q] = sid;
    st = &s->rs[s->nrs++];
    memset(st, 0, sizeof(*st));
    st->sid = sid;
    st->max = st->max_sent = nexar__shm_window(s->l.ep);
  }
  if (off != st->got || len > st->max - st->got) {
    *why = off != st->got ? "stream data out of order"
                          : "peer exceeded the stream window";
    return NULL;
  }
  return st;
}

/* Hands |n| bytes at |d| of stream |st| up; on FIN the stream ends. */
static void deliver(nexar__shm_t *s, rstream_t *st, const uint8_t *d, size_t n,
                    bool fin) {
  nexar__link_t *l = &s->l;
  int64_t sid = st->sid;
  int idx = (int)(st - s->rs);
  if (!st->orphan) l->ep->ops->on_stream_data(l, sid, st->m, d, n, fin);
  if (l->state == NEXAR__CS_DEAD || !fin) return;
  st = &s->rs[idx];
  nexar__imsg_t *m = st->m;
  rs_drop(s, st);
  if (m) l->ep->ops->on_stream_close(l, m);
}

/* A remote stream ended: a flush is asked for once a batch is owed. */
static void owe_stream(nexar__shm_t *s) {
  if (++s->streams_owed >= nexar__shm_stream_batch(s)) s->l.want_write = true;
}

/* A record that opens and ends the next stream (a whole small message),
 * taken by ops->on_whole when it can match it and copy it out at once: the
 * stream then opened and ended here, its credit owed as at shm_done_in.
 * False: the general path reads it (and reports broken stream rules). */
static bool take_whole(nexar__shm_t *s, const nexar__shm_rec_t *r) {
  nexar__link_t *l = &s->l;
  if (!(r->flags & F_FIN) || r->b != 0 ||
      (int64_t)r->a != s->last_rsid[s->rx_q] + SID_STEP ||
      (uint64_t)s->nrs >= s->rstreams_max ||
      r->len > nexar__shm_window(l->ep) || !l->ep->ops->on_whole ||
      !l->ep->ops->on_whole(l, r->payload, r->len))
    return false;
  s->last_rsid[s->rx_q] = (int64_t)r->a;
  owe_stream(s);
  return true;
}

/* take_whole for an R_SMALL record's rebuilt header |h| (its payload
 * |d| already copied out): the next stream of the bulk ring. */
static bool take_small(nexar__shm_t *s, const nexar__hdr_t *h,
                       const uint8_t *d) {
  nexar__link_t *l = &s->l;
  if ((uint64_t)s->nrs >= s->rstreams_max || h->dtype >= NEXAR_NUM_DTYPES ||
      h->tag > NEXAR_TAG_MAX || !l->ep->ops->on_whole_hdr ||
      !l->ep->ops->on_whole_hdr(l, h, d))
    return false;
  s->last_rsid[Q_BULK] += SID_STEP;
  owe_stream(s);
  return true;
}

/* One DATA record. Returns 0, or NEXAR_ERR_PROTO with |why| set. */
static int on_data(nexar__shm_t *s, const nexar__shm_rec_t *r,
                   const char **why) {
  if (take_whole(s, r)) return 0;
  rstream_t *st = rs_take(s, (int64_t)r->a, r->b, r->len, why);
  if (!st) return NEXAR_ERR_PROTO;
  st->got += r->len;
  deliver(s, st, r->payload, r->len, (r->flags & F_FIN) != 0);
  return 0;
}

/* Descriptor bytes of stream |sid| to acknowledge (written by put_acks). */
static void ack_owe(nexar__shm_t *s, int64_t sid, uint64_t n) {
  for (int i = 0; i < s->nacks; i++)
    if (s->acks[i].sid == sid) {
      s->acks[i].n += n;
      return;
    }
  /* Room is there: drain stops reading while the table is full. */
  s->acks[s->nacks].sid = sid;
  s->acks[s->nacks++].n = n;
  s->l.want_write = true;
}

/* A DESC record: the bytes are read straight from the sender's buffer,
 * into the matched receive when they can land there, else through the
 * bounce buffer a chunk at a time. */
static int on_desc(nexar__shm_t *s, const nexar__shm_rec_t *r,
                   const char **why) {
  nexar__link_t *l = &s->l;
  shm_desc_t d;
  if (r->len != sizeof(d) || !s->reads_peer) {
    *why = "a descriptor it was not offered";
    return NEXAR_ERR_PROTO;
  }
  memcpy(&d, r->payload, sizeof(d)); /* out of shared memory, once */
  if (d.len == 0 || d.len > DESC_MAX_BYTES) {
    *why = "a descriptor of a bad length";
    return NEXAR_ERR_PROTO;
  }
  if (!s->acks && !(s->acks = calloc(ACKS_MAX(s), sizeof(*s->acks)))) {
    *why = "out of memory (its acknowledgement table)";
    return NEXAR_ERR_PROTO;
  }
  rstream_t *st = rs_take(s, (int64_t)r->a, r->b, d.len, why);
  if (!st) return NEXAR_ERR_PROTO;
  st->got += d.len;
  bool fin = (r->flags & F_FIN) != 0;
  int64_t sid = st->sid;
  ack_owe(s, sid, d.len);
  const nexar__ep_ops_t *ops = l->ep->ops;
  uint8_t *dst = st->orphan || !ops->frame_sink
                     ? NULL
                     : ops->frame_sink(l, st->m, (size_t)d.len);
  int rc = 0;
  if (st->orphan) {
    /* Dropped unread: only the acknowledgement matters. */
    deliver(s, st, NULL, 0, fin);
    return 0;
  }
  if (dst) {
    rc = nexar__shm_cma_read((pid_t)s->peer_pid, dst, d.addr, (size_t)d.len);
    if (rc == 0) deliver(s, st, dst, (size_t)d.len, fin);
  } else {
    if (!s->bounce && !(s->bounce = malloc(CHUNK_BYTES))) {
      *why = "out of memory";
      return NEXAR_ERR_PROTO;
    }
    for (uint64_t at = 0; rc == 0 && at < d.len; at += CHUNK_BYTES) {
      size_t k = (size_t)(d.len - at < CHUNK_BYTES ? d.len - at : CHUNK_BYTES);
      int idx = (int)(st - s->rs);
      rc = nexar__shm_cma_read((pid_t)s->peer_pid, s->bounce, d.addr + at, k);
      if (rc == 0) deliver(s, st, s->bounce, k, fin && at + k == d.len);
      if (l->state == NEXAR__CS_DEAD || at + k == d.len) break;
      st = &s->rs[idx];
    }
  }
  if (rc == NEXAR_ERR_PEER_FAILED) {
    *why = "its process is gone (reading its buffer)";
    return rc;
  }
  if (rc < 0) *why = "a descriptor of memory it does not have";
  return rc < 0 ? NEXAR_ERR_PROTO : 0;
}

/* The peer read |n| more descriptor bytes of |m|: they are acknowledged,
 * and a message written whole (or cut) and all acknowledged ends. */
static int on_ack(nexar__shm_t *s, const nexar__shm_rec_t *r,
                  const char **why) {
  nexar__link_t *l = &s->l;
  nexar__omsg_t *m = out_find(s, (int64_t)r->a);
  if (!m || r->b > m->tx_out - m->acked) {
    *why = "an acknowledgement of bytes never sent";
    return NEXAR_ERR_PROTO;
  }
  l->ep->ops->on_acked(l, m, r->b);
  if (m->tx_fin && m->acked >= m->tx_out) {
    nexar__link_unqueue(l, m);
    l->ep->ops->on_out_closed(l, m);
  }
  return 0;
}

/* An R_SMALL record (shm.h): copied out of shared memory once and its
 * header rebuilt; taken whole when it can be (with the checks that
 * nexar__hdr_decode makes of what the record sets: datatype, tag), else
 * encoded and read as the DATA record with FIN of the next stream that it
 * stands for (every check and refusal of the general path). */
static int on_small(nexar__shm_t *s, const nexar__shm_rec_t *r,
                    const char **why) {
  if (s->rx_q != Q_BULK || r->len < SMALL_PRE ||
      r->len > SMALL_PRE + SMALL_MAX || r->flags > UINT8_MAX) {
    *why = "a small message of a bad length or datatype";
    return NEXAR_ERR_PROTO;
  }
  uint8_t msg[NEXAR__HDR_BYTES + SMALL_MAX];
  uint32_t pre[2];
  uint32_t n = r->len - SMALL_PRE;
  memcpy(pre, r->payload, SMALL_PRE);
  memcpy(msg + NEXAR__HDR_BYTES, (const uint8_t *)r->payload + SMALL_PRE, n);
  const nexar__hdr_t h = {.kind = NEXAR__KIND_P2P,
                          .lane = NEXAR__LANE_DATA,
                          .dtype = (uint8_t)r->flags,
                          .comm_id = r->b,
                          .src_rank = pre[0],
                          .tag = pre[1],
                          .seq = r->a,
                          .step = NEXAR__P2P_STANDARD,
                          .payload_len = n};
  if (take_small(s, &h, msg + NEXAR__HDR_BYTES)) return 0;
  nexar__hdr_encode(&h, msg);
  const nexar__shm_rec_t d = {.len = NEXAR__HDR_BYTES + n,
                              .type = R_DATA,
                              .flags = F_FIN,
                              .a = (uint64_t)(s->last_rsid[Q_BULK] + SID_STEP),
                              .payload = msg};
  return on_data(s, &d, why);
}

static int on_record(nexar__shm_t *s, const nexar__shm_rec_t *r,
                     const char **why) {
  nexar__link_t *l = &s->l;
  switch (r->type) {
    case R_DATA:
      return on_data(s, r, why);
    case R_SMALL:
      return on_small(s, r, why);
    case R_DESC:
      return on_desc(s, r, why);
    case R_ACK:
      return on_ack(s, r, why);
    case R_CREDIT: {
      nexar__omsg_t *m = out_find(s, (int64_t)r->a);
      if (m && r->b > m->tx_max) {
        m->tx_max = r->b; /* a window: it may reach past the message */
        m->blocked = false;
        l->want_write = true;
      }
      return 0;
    }
    case R_RESET: {
      rstream_t *st = rs_find(s, (int64_t)r->a);
      if (!st) return 0; /* never opened here, or already ended */
      nexar__imsg_t *m = st->m;
      rs_drop(s, st);
      if (m) l->ep->ops->on_stream_close(l, m);
      return 0;
    }
    case R_STREAMS:
      if (r->a > s->streams_max - s->streams_left) {
        *why = "more streams returned than were opened";
        return NEXAR_ERR_PROTO;
      }
      s->streams_left += r->a;
      l->want_write = true;
      return 0;
    case R_HB:
      return 0;
  }
  *why = "a record of unknown type";
  return NEXAR_ERR_PROTO;
}

/* Reads this link's records (about NEXAR_PASS_SLICE_BYTES: the pass that
 * copies or reduces them ends there, and the next one reads what came
 * meanwhile on the other links and sockets); true when more are waiting. */
bool nexar__shm_drain(nexar__shm_t *s) {
  nexar__link_t *l = &s->l;
  uint64_t bytes = 0;
  bool any = false, more = false;
  while (l->state == NEXAR__CS_READY) {
    if (bytes >= l->ep->slice) {
      more = true;
      break;
    }
    if ((uint64_t)s->nacks >= ACKS_MAX(s)) {
      /* The acknowledgements go out first (flush), then reading goes on. */
      l->want_write = true;
      break;
    }
    /* The priority ring first, before every record of the bulk ring. */
    nexar__shm_rec_t r;
    nexar__shm_ring_t *ring = &s->pseg.rx;
    s->rx_q = Q_PRIO;
    int rc = nexar__shm_ring_peek(ring, &r);
    if (rc == 0) {
      ring = &s->seg.rx;
      s->rx_q = Q_BULK;
      rc = nexar__shm_ring_peek(ring, &r);
    }
    if (rc == 0) break;
    const char *why = "its ring is corrupt";
    if (rc < 0 || on_record(s, &r, &why) < 0) {
      nexar__link_close(l, NEXAR__CLOSE_PROTO, why);
      nexar__shm_fail(l, NEXAR_ERR_PROTO, "%s", why);
      return false;
    }
    nexar__shm_ring_pop(ring);
    bytes += r.len + NEXAR__SHM_REC_HDR +
             (r.type == R_DESC && r.len == sizeof(shm_desc_t)
                  ? ((const shm_desc_t *)r.payload)->len
                  : 0);
    any = true;
  }
  if (any) {
    l->last_rx = s->rx_at = l->ep->pass_now;
    l->ep->rx_seen += bytes;
    bool kick = nexar__shm_ring_need_kick_space(&s->seg.rx);
    if (nexar__shm_ring_need_kick_space(&s->pseg.rx) || kick)
      nexar__shm_kick(s);
  }
  return more;
}

/* A peer that ran since the last look (its heartbeat count changed) was
 * heard from: heartbeats wake nobody (shm_on_expiry). Looked at every
 * BEAT_LOOK_NS, and only where nothing came for a heartbeat interval (the
 * count lies in the peer's page: a cache and TLB miss per link). */
static void shm_beats(nexar__ep_t *ep, uint64_t now) {
  uint64_t hb = (ep->prm ? (uint64_t)ep->prm->heartbeat_ms : 1000) * 1000000ull;
  ep->shm_beat_at = now + hb / BEAT_LOOKS;
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *l = ep->conns[i];
    if (l->tp == &nexar__tp_shm && l->state == NEXAR__CS_READY &&
        now - l->last_rx >= hb && nexar__shm_ring_beat_seen(&S(l)->pseg.rx))
      l->last_rx = now;
  }
}

/* ---- The polled links: ep->shm_poll holds every link in its rendezvous
 * or ready and not parked (a waiting rank's passes and polls look at those
 * only: O(links talking), not O(links)). Room for every link is reserved
 * when it is made (nexar__shm_poll_reserve), so adding never fails. */

int nexar__shm_poll_reserve(nexar__ep_t *ep) {
  if (ep->shm_npoll_cap > ep->shm_nlinks) return 0;
  int cap = ep->shm_npoll_cap ? 2 * ep->shm_npoll_cap : 16;
  nexar__link_t **p = realloc(ep->shm_poll, (size_t)cap * sizeof(*p));
  if (!p) return NEXAR_ERR_NOMEM;
  ep->shm_poll = p;
  ep->shm_npoll_cap = cap;
  return 0;
}

void nexar__shm_poll_add(nexar__shm_t *s) {
  nexar__ep_t *ep = s->l.ep;
  if (s->polled) return;
  s->polled = true;
  ep->shm_poll[ep->shm_npoll++] = &s->l;
}

static void poll_remove_at(nexar__ep_t *ep, int i) {
  S(ep->shm_poll[i])->polled = false;
  ep->shm_poll[i] = ep->shm_poll[--ep->shm_npoll];
}

void nexar__shm_poll_forget(nexar__shm_t *s) {
  nexar__ep_t *ep = s->l.ep;
  for (int i = 0; s->polled && i < ep->shm_npoll; i++)
    if (ep->shm_poll[i] == &s->l) poll_remove_at(ep, i);
}

/* Parks a link that was idle for NEXAR_SHM_PARK_US: both sleep flags up, unless
 * a record came meanwhile (then it stays polled). A link waiting for room in a
 * tx ring stays polled (its consumer's kick and shm_tx_room). */
static bool park(nexar__shm_t *s) {
  if (s->tx_full[Q_BULK] || s->tx_full[Q_PRIO] ||
      nexar__shm_ring_consumer_sleep(&s->seg.rx) != 1 ||
      nexar__shm_ring_consumer_sleep(&s->pseg.rx) != 1)
    return false;
  s->parked = true;
  s->l.ep->shm_parked++;
  return true;
}

void nexar__shm_unpark(nexar__shm_t *s) {
  if (!s->parked) return;
  s->parked = false;
  s->rx_at = s->l.ep->pass_now;
  s->l.ep->shm_parked--;
  if (s->l.state != NEXAR__CS_DEAD) nexar__shm_poll_add(s);
}

/* Whether the parked links' kicks are due to be read: passes that do not
 * sleep read them every PARK_LOOK_NS (a sleep wakes for them). */
static bool park_look_due(const nexar__ep_t *ep, uint64_t now) {
  return ep->shm_parked > 0 && now >= ep->shm_park_look;
}

static bool shm_input(nexar__ep_t *ep) {
  uint64_t now = ep->pass_now;
  uint64_t park_ns = ep->prm ? (uint64_t)ep->prm->shm_park_us * 1000u : 0;
  bool more = false, setup = false;
  /* A catch-up after a pause reads every ring, parked or not. */
  for (int i = 0; ep->resuming && ep->shm_parked && i < ep->nconns; i++)
    if (ep->conns[i]->tp == &nexar__tp_shm) nexar__shm_unpark(S(ep->conns[i]));
  for (int i = 0; i < ep->shm_npoll;) {
    nexar__link_t *l = ep->shm_poll[i];
    nexar__shm_t *s = S(l);
    if (l->state == NEXAR__CS_DEAD) {
      poll_remove_at(ep, i);
      continue;
    }
    i++;
    if (l->state == NEXAR__CS_HANDSHAKE) {
      setup = true; /* its socket is read by the sweep */
      continue;
    }
    if (nexar__shm_tx_room(s)) l->want_write = true;
    bool m = nexar__shm_drain(s);
    more |= m;
    if (!m && park_ns && l->state == NEXAR__CS_READY &&
        now - s->rx_at >= park_ns && park(s))
      poll_remove_at(ep, --i);
  }
  if (ep->shm_held && ep->accept_mesh) nexar__shm_release_held(ep);
  /* The peers' heartbeat counts, BEAT_LOOKS times per heartbeat interval
   * and at once after a pause (the detector judges after this half). */
  if (ep->resuming || now >= ep->shm_beat_at) shm_beats(ep, now);
  /* The sockets and eventfds: every pass while a rendezvous runs, after a
   * sleep flag went up, at once after a pause (what a peer said before it
   * closed is read before anyone is judged), else every SOCK_CHECK_NS. */
  if (setup || ep->shm_kicks || ep->resuming || now >= ep->shm_sock_at ||
      park_look_due(ep, now))
    nexar__shm_sweep(ep, now);
  return more;
}

/* ---- Timers: the rendezvous deadline, the heartbeat, the socket. */

static uint64_t shm_expiry(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  if (l->state == NEXAR__CS_HANDSHAKE) return s->setup_deadline;
  if (l->state != NEXAR__CS_READY) return UINT64_MAX;
  uint64_t hb = l->ep->prm ? (uint64_t)l->ep->prm->heartbeat_ms : 1000;
  /* The sockets and kicks need no timer: their set is in the engine's, so
   * a sleeping engine wakes for them (the sweep every SOCK_CHECK_NS is
   * for busy passes). */
  return s->tx_at + hb * 1000000ull;
}

static void shm_on_expiry(nexar__link_t *l, uint64_t now) {
  nexar__shm_t *s = S(l);
  if (l->state == NEXAR__CS_HANDSHAKE) {
    if (now >= s->setup_deadline)
      nexar__shm_fail(l, NEXAR_ERR_TIMEOUT, "the rendezvous did not finish");
    return;
  }
  uint64_t hb = l->ep->prm ? (uint64_t)l->ep->prm->heartbeat_ms : 1000;
  if (l->state == NEXAR__CS_READY && now >= s->tx_at + hb * 1000000ull) {
    /* A count in shared memory, not a record: the peer is not woken. */
    nexar__shm_ring_beat(&s->pseg.tx);
    s->tx_at = now;
  }
}

/* ---- The rest of the ops table. */

static void shm_free(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  nexar__ep_t *ep = l->ep;
  if (s->parked) ep->shm_parked--;
  if (s->held) ep->shm_held--;
  nexar__shm_poll_forget(s);
  ep->shm_nlinks--;
  if (s->sock >= 0) {
    nexar__shm_watch_fd(ep, s->sock, s, W_SOCK, false);
    close(s->sock);
  }
  if (s->efd_mine >= 0) {
    nexar__shm_watch_fd(ep, s->efd_mine, s, W_KICK, false);
    close(s->efd_mine);
  }
  if (s->efd_peer >= 0) close(s->efd_peer);
  nexar__shm_seg_close(&s->pseg); /* owns nothing: in seg's mapping */
  nexar__shm_seg_close(&s->seg);  /* a zeroed or closed one is fine */
  free(s->rs);
  free(s->acks);
  free(s->bounce);
}

static bool shm_alive(const nexar__link_t *l) {
  return S(l)->attached;
}

static int shm_exporter(nexar__link_t *l, uint8_t out[32]) {
  (void)l;
  (void)out;
  return NEXAR_ERR_TRANSPORT; /* peers are authenticated by the kernel */
}

static bool shm_peer_runnable(const nexar__link_t *l) {
  return nexar__shm_pid_runnable((pid_t)S(l)->peer_pid);
}

static void shm_stop_out(nexar__link_t *l, nexar__omsg_t *m) {
  m->stop = true;
  l->want_write = true;
}

static void shm_forget_out(nexar__link_t *l, nexar__omsg_t *m) {
  /* Rerouted: the stream was opened here; the peer sees it cut. */
  (void)l;
  (void)m;
}

static void shm_attach_in(nexar__link_t *l, int64_t sid, nexar__imsg_t *m) {
  rstream_t *st = rs_find(S(l), sid);
  if (st) st->m = m;
}

static void shm_done_in(nexar__link_t *l, nexar__imsg_t *m) {
  nexar__shm_t *s = S(l);
  rstream_t *st = rs_find(s, m->sid);
  if (st && st->m == m) {
    st->m = NULL; /* later bytes are read and dropped */
    st->orphan = true;
  }
  owe_stream(s);
}

static void shm_extend(nexar__link_t *l, int64_t sid, uint64_t n) {
  rstream_t *st = rs_find(S(l), sid);
  if (!st) return;
  st->max += n;
  l->want_write = true;
}

/* ---- Endpoint. */

static int shm_init(nexar__ep_t *ep, const struct sockaddr_storage *bind,
                    socklen_t len) {
  (void)bind;
  (void)len;
  ep->shm_lfd = ep->shm_sfd = -1;
  if (!ep->host || !ep->host->key) return 0;
  ep->shm_sfd = epoll_create1(EPOLL_CLOEXEC);
  if (ep->shm_sfd < 0 || nexar__shm_watch(ep, ep->shm_sfd, true) < 0) {
    NEXAR__INFO(NEXAR__SUB_NET,
                "no shared-memory links (epoll: %s): same-host peers use QUIC",
                strerror(errno));
    if (ep->shm_sfd >= 0) close(ep->shm_sfd);
    ep->shm_sfd = -1;
    return 0;
  }
  int rc = nexar__shm_listen(ep->host->nonce, &ep->shm_lfd);
  if (rc == 0 && nexar__shm_watch_fd(ep, ep->shm_lfd, NULL, W_SOCK, true) < 0)
    rc = NEXAR_ERR_SYS;
  if (rc < 0) {
    NEXAR__INFO(NEXAR__SUB_NET,
                "no shared-memory rendezvous (%s): same-host peers use QUIC",
                nexar_strerror(rc));
    if (ep->shm_lfd >= 0) close(ep->shm_lfd);
    ep->shm_lfd = -1;
  }
  return 0;
}

static void shm_fini(nexar__ep_t *ep) {
  free(ep->shm_poll);
  ep->shm_poll = NULL;
  ep->shm_npoll = ep->shm_npoll_cap = 0;
  if (ep->shm_lfd >= 0) close(ep->shm_lfd);
  if (ep->shm_sfd >= 0) close(ep->shm_sfd);
  ep->shm_lfd = ep->shm_sfd = -1;
}

/* Before the engine sleeps: each polled ready link's consumer flags go up
 * (the peer then kicks its eventfd; a parked link's are up already), and
 * the producer flags of its rings that wait for room (nexar__shm_tx_arm);
 * false when a ring already has records or room came. */
static bool shm_arm(nexar__ep_t *ep) {
  /* The set (kicks, sockets, the listener) is in the engine's: whatever
   * wakes the sleep may be in it, so the next pass sweeps it. Swept only
   * every SOCK_CHECK_NS before there was a ready link, a peer's connection
   * that came while the roster was awaited left the set readable, and the
   * progress thread woke and ran an empty pass every 7-9 us for up to
   * 20 ms of each start-up (1,100-1,450 passes at np 2). */
  if (ep->shm_sfd >= 0) ep->shm_kicks = true;
  for (int i = 0; i < ep->shm_npoll; i++) {
    nexar__link_t *l = ep->shm_poll[i];
    if (l->state != NEXAR__CS_READY) continue;
    if (!nexar__shm_tx_arm(S(l)) ||
        nexar__shm_ring_consumer_sleep(&S(l)->seg.rx) != 1 ||
        nexar__shm_ring_consumer_sleep(&S(l)->pseg.rx) != 1)
      return false;
  }
  return true;
}

static bool shm_ready(nexar__ep_t *ep, uint64_t now) {
  if (ep->shm_sfd >= 0 && now >= ep->shm_sock_at) return true;
  if (park_look_due(ep, now)) return true;
  for (int i = 0; i < ep->shm_npoll; i++) {
    nexar__link_t *l = ep->shm_poll[i];
    if (l->state == NEXAR__CS_DEAD) continue;
    nexar__shm_t *s = S(l);
    nexar__shm_rec_t r;
    if (l->state != NEXAR__CS_READY ||
        nexar__shm_ring_peek(&s->pseg.rx, &r) != 0 ||
        nexar__shm_ring_peek(&s->seg.rx, &r) != 0 || nexar__shm_tx_room(s))
      return true;
  }
  return false;
}

/* tp->poll_link: this link's rings, as shm_input reads them. A link that
 * is parked or not polled is left to the passes (its kick and flags). */
static int shm_poll_link(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  if (l->state != NEXAR__CS_READY || !s->polled) return -1;
  nexar__shm_rec_t r;
  if (nexar__shm_ring_peek(&s->pseg.rx, &r) == 0 &&
      nexar__shm_ring_peek(&s->seg.rx, &r) == 0)
    return 0;
  nexar__shm_drain(s);
  return 1;
}

const nexar__tp_t nexar__tp_shm = {
    .name = "shm",
    .caps = NEXAR__TP_RELIABLE | NEXAR__TP_SAME_HOST | NEXAR__TP_DONE_FORGETS,
    .max_frame = UINT64_MAX,
    .init = shm_init,
    .fini = shm_fini,
    .input = shm_input,
    .arm = shm_arm,
    .ready = shm_ready,
    .dial = nexar__shm_dial,
    .flush = nexar__shm_flush,
    .send_now = nexar__shm_send_now,
    .poll_link = shm_poll_link,
    .expiry = shm_expiry,
    .on_expiry = shm_on_expiry,
    .send_close = nexar__shm_send_close,
    .free = shm_free,
    .alive = shm_alive,
    .exporter = shm_exporter,
    .peer_runnable = shm_peer_runnable,
    .stop_out = shm_stop_out,
    .forget_out = shm_forget_out,
    .attach_in = shm_attach_in,
    .done_in = shm_done_in,
    .extend = shm_extend,
};
