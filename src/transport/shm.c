/*
 * Shared-memory links to processes on this host (same boot, same network
 * namespace: the roster's host key). Runs only on the progress thread.
 *
 * Rendezvous: every worker listens on an abstract Unix socket named by the
 * random nonce it sent the seed (shm_os.c); the roster, which the seed gave
 * every member over its authenticated channel, carries each member's host
 * key, pid and nonce. The lower rank dials: it connects, checks with
 * SO_PEERCRED that the listener is the pid the roster names, creates a
 * sealed memfd segment of two rings (shm_ring.c) and two eventfds, and
 * sends them (SCM_RIGHTS) with its certificate fingerprint, its stream
 * window and stream limit. The listener checks the sender's credentials
 * against the roster (ops->verify_local) and the descriptors, attaches,
 * and answers with its own window and limit; the link is then ready on
 * both sides. Anything unexpected closes the socket: the dialer falls back
 * to QUIC when the check fails on its side (NEXAR_TRANSPORT=auto).
 *
 * Streams: as on QUIC, each message is a stream of its own (ids 0, 4, 8,
 * ... per direction), opened in lane order at its first record, with the
 * receiver's window (eager bytes + header) until it extends it (CREDIT),
 * and at most the receiver's stream limit open at once, returned in
 * batches (STREAMS) as messages are delivered. Records: DATA (a: stream,
 * b: offset, FIN flag), CREDIT (a: stream, b: new limit), RESET (a:
 * stream), STREAMS (a: count), HB (nothing). The ring holds the bytes, so a
 * record written is a record acknowledged.
 *
 * Everything read from the segment is untrusted: the ring checks its
 * records (shm_ring.c), and here every stream id, offset, length and
 * credit is checked against what this side allowed before it is used; a
 * violation fails the link with NEXAR_ERR_PROTO naming the peer.
 *
 * Failure: the socket stays open for the link's life; the peer's exit
 * closes it (checked at least every SOCK_CHECK_NS), which proves the
 * process gone, like a closed UDP port; a stopped peer writes no heartbeat
 * (a HB record when it wrote nothing for a heartbeat interval), and the
 * failure detector judges its silence as on QUIC. A close (finalize, fence,
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

/* One DATA record. Returns 0, or NEXAR_ERR_PROTO with |why| set. */
static int on_data(nexar__shm_t *s, const nexar__shm_rec_t *r,
                   const char **why) {
  nexar__link_t *l = &s->l;
  int64_t sid = (int64_t)r->a;
  rstream_t *st = rs_find(s, sid);
  if (!st) {
    if (sid != s->last_rsid + 4 || r->b != 0) {
      *why = "a record for a stream that is not open";
      return NEXAR_ERR_PROTO;
    }
    if ((uint64_t)s->nrs >= s->rstreams_max) {
      *why = "more streams open than allowed";
      return NEXAR_ERR_PROTO;
    }
    s->last_rsid = sid;
    st = &s->rs[s->nrs++];
    memset(st, 0, sizeof(*st));
    st->sid = sid;
    st->max = st->max_sent = nexar__shm_window(l->ep);
  }
  if (r->b != st->got || r->len > st->max - st->got) {
    *why = r->b != st->got ? "stream data out of order"
                           : "peer exceeded the stream window";
    return NEXAR_ERR_PROTO;
  }
  st->got += r->len;
  bool fin = (r->flags & F_FIN) != 0;
  nexar__imsg_t *m = st->m;
  int idx = (int)(st - s->rs);
  if (!st->orphan)
    l->ep->ops->on_stream_data(l, sid, m, r->payload, r->len, fin);
  if (l->state == NEXAR__CS_DEAD) return 0;
  if (fin) {
    st = &s->rs[idx];
    m = st->m;
    rs_drop(s, st);
    if (m) l->ep->ops->on_stream_close(l, m);
  }
  return 0;
}

static int on_record(nexar__shm_t *s, const nexar__shm_rec_t *r,
                     const char **why) {
  nexar__link_t *l = &s->l;
  switch (r->type) {
    case R_DATA:
      return on_data(s, r, why);
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

/* Reads this link's records (at most RX_PASS_BYTES); true when more are
 * waiting. */
bool nexar__shm_drain(nexar__shm_t *s) {
  nexar__link_t *l = &s->l;
  uint64_t bytes = 0;
  bool any = false, more = false;
  while (l->state == NEXAR__CS_READY) {
    if (bytes >= RX_PASS_BYTES) {
      more = true;
      break;
    }
    nexar__shm_rec_t r;
    int rc = nexar__shm_ring_peek(&s->seg.rx, &r);
    if (rc == 0) break;
    const char *why = "its ring is corrupt";
    if (rc < 0 || on_record(s, &r, &why) < 0) {
      nexar__link_close(l, NEXAR__CLOSE_PROTO, why);
      nexar__shm_fail(l, NEXAR_ERR_PROTO, "%s", why);
      return false;
    }
    nexar__shm_ring_pop(&s->seg.rx);
    bytes += r.len + NEXAR__SHM_REC_HDR;
    any = true;
  }
  if (any) {
    l->last_rx = l->ep->pass_now;
    if (nexar__shm_ring_need_kick_space(&s->seg.rx)) nexar__shm_kick(s);
  }
  return more;
}

static bool shm_input(nexar__ep_t *ep) {
  uint64_t now = ep->pass_now;
  nexar__shm_accept_new(ep, now);
  bool more = false;
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *l = ep->conns[i];
    if (l->tp != &nexar__tp_shm || l->state == NEXAR__CS_DEAD) continue;
    nexar__shm_t *s = S(l);
    if (l->state == NEXAR__CS_HANDSHAKE) {
      /* A HELLO waits until the roster is known to judge it. */
      if (l->is_server && ep->accept_mesh)
        nexar__shm_on_hello(s);
      else if (!l->is_server)
        nexar__shm_on_welcome(s);
      continue;
    }
    if (s->may_kick) {
      uint64_t v;
      ssize_t r = read(s->efd_mine, &v, sizeof(v));
      (void)r;
      s->may_kick = false;
    }
    more |= nexar__shm_drain(s);
    if (s->tx_full && nexar__shm_ring_free(&s->seg.tx) >= CHUNK_BYTES)
      l->want_write = true;
    if (now >= s->sock_check_at || ep->resuming) {
      s->sock_check_at = now + SOCK_CHECK_NS;
      nexar__shm_check_sock(s);
    }
  }
  return more;
}

/* ---- Sending. */

/* Appends one record; false when the ring is full (wait for a kick). */
static bool put(nexar__shm_t *s, uint16_t type, uint16_t flags, uint64_t a,
                uint64_t b, const struct iovec *iov, int niov) {
  int rc = nexar__shm_ring_put(&s->seg.tx, type, flags, a, b, iov, niov);
  if (rc == 0) {
    s->tx_at = s->l.ep->pass_now;
    return true;
  }
  if (rc == NEXAR__SHM_AGAIN) {
    s->tx_full = true;
    /* Sleep on the kick unless room came meanwhile. */
    if (!nexar__shm_ring_producer_sleep(&s->seg.tx, CHUNK_BYTES))
      s->l.want_write = true;
    else
      s->may_kick = true;
  } else {
    nexar__link_close(&s->l, NEXAR__CLOSE_PROTO, "ring corrupt");
    nexar__shm_fail(&s->l, NEXAR_ERR_PROTO, "its ring is corrupt");
  }
  return false;
}

/* Control records owed: stream credit, returned streams. */
static bool put_credit(nexar__shm_t *s) {
  for (int i = 0; i < s->nrs; i++) {
    rstream_t *st = &s->rs[i];
    if (st->max_sent < st->max) {
      if (!put(s, R_CREDIT, 0, (uint64_t)st->sid, st->max, NULL, 0))
        return false;
      st->max_sent = st->max;
    }
  }
  uint64_t batch = s->rstreams_max / 4;
  if (s->streams_owed >= (batch ? batch : 1)) {
    if (!put(s, R_STREAMS, 0, s->streams_owed, 0, NULL, 0)) return false;
    s->streams_owed = 0;
  }
  return true;
}

/* Whether a new stream of |lane| may open: as on QUIC, data keeps half of
 * the peer's stream limit for the others, RPC a quarter for control. */
static bool may_open(const nexar__shm_t *s, int lane) {
  uint64_t quarter = s->streams_max / 4;
  uint64_t keep = lane == NEXAR__LANE_CONTROL ? 0
                  : lane == NEXAR__LANE_DATA  ? 2 * quarter
                                              : quarter;
  return s->streams_left > keep;
}

/* Writes what |m| may: returns false when the ring is full. */
static bool put_msg(nexar__shm_t *s, nexar__omsg_t *m, bool *closed) {
  nexar__link_t *l = &s->l;
  const nexar__ep_ops_t *ops = l->ep->ops;
  uint64_t total = nexar__omsg_total(m);
  *closed = false;
  if (m->stop) {
    /* Cut: the peer learns it (if it ever saw the stream), and it ends. */
    if (m->sid >= 0 && !put(s, R_RESET, 0, (uint64_t)m->sid, 0, NULL, 0))
      return false;
    nexar__link_unqueue(l, m);
    ops->on_out_closed(l, m);
    *closed = true;
    return true;
  }
  while (ops->frame_more(m) && !m->blocked) {
    if (m->sid < 0) {
      m->sid = s->next_sid;
      s->next_sid += 4;
      s->streams_left--;
      m->tx_max = s->window;
    }
    uint64_t room = m->tx_max > m->sent ? m->tx_max - m->sent : 0;
    if (!room) {
      m->blocked = true;
      break;
    }
    struct iovec v[4];
    bool fin;
    size_t nv = ops->frame_vecs(m, v, 4, &fin);
    uint64_t cap = room < CHUNK_BYTES ? room : CHUNK_BYTES, len = 0;
    size_t k = 0;
    for (; k < nv && len < cap; k++) {
      if (v[k].iov_len > cap - len) {
        v[k].iov_len = (size_t)(cap - len);
        fin = false;
      }
      len += v[k].iov_len;
    }
    if (k < nv) fin = false;
    fin = fin && m->sent + len == total;
    if (!put(s, R_DATA, fin ? F_FIN : 0, (uint64_t)m->sid, m->sent, v, (int)k))
      return false;
    m->sent += len;
    ops->on_acked(l, m, len);
    if (fin) {
      nexar__link_unqueue(l, m);
      ops->on_out_closed(l, m);
      *closed = true;
      return true;
    }
  }
  return true;
}

static const int lane_order[NEXAR__LANE_COUNT] = {
    NEXAR__LANE_CONTROL, NEXAR__LANE_RPC, NEXAR__LANE_DATA};

static void shm_flush(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  l->want_write = false;
  if (l->state != NEXAR__CS_READY) return;
  s->tx_full = false;
  bool room = put_credit(s);
  for (int k = 0; room && k < NEXAR__LANE_COUNT; k++) {
    int lane = lane_order[k];
    for (nexar__omsg_t *m = l->outq[lane], *next; room && m; m = next) {
      next = m->next;
      if (m->sid < 0 && !m->stop && !may_open(s, lane)) break; /* FIFO */
      if (m->sid < 0 && m->stop) {
        /* Cancelled before it opened: the peer never saw it. */
        nexar__link_unqueue(l, m);
        l->ep->ops->on_out_closed(l, m);
        continue;
      }
      bool closed;
      room = put_msg(s, m, &closed);
      if (l->state == NEXAR__CS_DEAD) return;
    }
  }
  if (nexar__shm_ring_need_kick(&s->seg.tx)) nexar__shm_kick(s);
}

/* ---- Timers: the rendezvous deadline, the heartbeat, the socket. */

static uint64_t shm_expiry(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  if (l->state == NEXAR__CS_HANDSHAKE) return s->setup_deadline;
  if (l->state != NEXAR__CS_READY) return UINT64_MAX;
  uint64_t hb = l->ep->prm ? (uint64_t)l->ep->prm->heartbeat_ms : 1000;
  uint64_t t = s->tx_at + hb * 1000000ull;
  return t < s->sock_check_at + SOCK_CHECK_NS
             ? t
             : s->sock_check_at + SOCK_CHECK_NS;
}

static void shm_on_expiry(nexar__link_t *l, uint64_t now) {
  nexar__shm_t *s = S(l);
  if (l->state == NEXAR__CS_HANDSHAKE) {
    if (now >= s->setup_deadline)
      nexar__shm_fail(l, NEXAR_ERR_TIMEOUT, "the rendezvous did not finish");
    return;
  }
  if (now >= s->sock_check_at) {
    s->sock_check_at = now + SOCK_CHECK_NS;
    nexar__shm_check_sock(s);
  }
  uint64_t hb = l->ep->prm ? (uint64_t)l->ep->prm->heartbeat_ms : 1000;
  if (l->state == NEXAR__CS_READY && now >= s->tx_at + hb * 1000000ull) {
    if (put(s, R_HB, 0, 0, 0, NULL, 0) && nexar__shm_ring_need_kick(&s->seg.tx))
      nexar__shm_kick(s);
    s->tx_at = now; /* a full ring is not retried before the next beat */
  }
}

/* ---- The rest of the ops table. */

static void shm_free(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  nexar__ep_t *ep = l->ep;
  if (s->sock >= 0) {
    nexar__shm_watch(ep, s->sock, false);
    close(s->sock);
  }
  if (s->efd_mine >= 0) {
    nexar__shm_watch(ep, s->efd_mine, false);
    close(s->efd_mine);
  }
  if (s->efd_peer >= 0) close(s->efd_peer);
  if (s->attached) nexar__shm_seg_close(&s->seg);
  free(s->rs);
}

static bool shm_alive(const nexar__link_t *l) {
  return S(l)->attached;
}

static int shm_exporter(nexar__link_t *l, uint8_t out[32]) {
  (void)l;
  (void)out;
  return NEXAR_ERR_TRANSPORT; /* peers are authenticated by the kernel */
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
  s->streams_owed++;
  l->want_write = true;
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
  ep->shm_lfd = -1;
  if (!ep->host || !ep->host->key) return 0;
  int rc = nexar__shm_listen(ep->host->nonce, &ep->shm_lfd);
  if (rc < 0) {
    NEXAR__INFO(NEXAR__SUB_NET,
                "no shared-memory rendezvous (%s): same-host peers use QUIC",
                nexar_strerror(rc));
    ep->shm_lfd = -1;
    return 0;
  }
  nexar__shm_watch(ep, ep->shm_lfd, true);
  return 0;
}

static void shm_fini(nexar__ep_t *ep) {
  if (ep->shm_lfd >= 0) close(ep->shm_lfd);
  ep->shm_lfd = -1;
}

/* Before the engine sleeps: each ready link's consumer flag goes up (the
 * peer then kicks its eventfd); false when a ring already has records. */
static bool shm_arm(nexar__ep_t *ep) {
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *l = ep->conns[i];
    if (l->tp != &nexar__tp_shm || l->state != NEXAR__CS_READY) continue;
    S(l)->may_kick = true;
    if (nexar__shm_ring_consumer_sleep(&S(l)->seg.rx) != 1) return false;
  }
  return true;
}

static bool shm_ready(nexar__ep_t *ep, uint64_t now) {
  if (ep->shm_lfd >= 0 && now >= ep->shm_accept_at) return true;
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *l = ep->conns[i];
    if (l->tp != &nexar__tp_shm || l->state == NEXAR__CS_DEAD) continue;
    nexar__shm_t *s = S(l);
    nexar__shm_rec_t r;
    if (l->state != NEXAR__CS_READY || now >= s->sock_check_at ||
        nexar__shm_ring_peek(&s->seg.rx, &r) != 0 ||
        (s->tx_full && nexar__shm_ring_free(&s->seg.tx) >= CHUNK_BYTES))
      return true;
  }
  return false;
}

static bool shm_output(nexar__ep_t *ep, uint64_t *next) {
  (void)ep;
  (void)next;
  return false;
}

const nexar__tp_t nexar__tp_shm = {
    .name = "shm",
    .caps = NEXAR__TP_RELIABLE | NEXAR__TP_SAME_HOST,
    .max_frame = UINT64_MAX,
    .init = shm_init,
    .fini = shm_fini,
    .input = shm_input,
    .output = shm_output,
    .arm = shm_arm,
    .ready = shm_ready,
    .dial = nexar__shm_dial,
    .flush = shm_flush,
    .expiry = shm_expiry,
    .on_expiry = shm_on_expiry,
    .send_close = nexar__shm_send_close,
    .free = shm_free,
    .alive = shm_alive,
    .exporter = shm_exporter,
    .stop_out = shm_stop_out,
    .forget_out = shm_forget_out,
    .attach_in = shm_attach_in,
    .done_in = shm_done_in,
    .extend = shm_extend,
};
