/*
 * QUIC links: sending. Each message is one local stream; a link writes its
 * control lane first, then its RPC lane, then its data lane, a packet holds
 * control and RPC frames or data but never both, and packets are batched
 * for UDP GSO (pitfall list in
 * ../shared/reference/quic-ngtcp2.md, section 6). See quic.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "transport/quic.h"
#include "transport/quic_test.h"

#define Q(l) nexar__quic(l)

#define GSO_MAX_BYTES 65000
#define GSO_MAX_SEGS 64

/* ---- Sending ---- */

/* Whether |m| has bytes to write that flow control does not hold back. */
static bool unsent(const nexar__link_t *c, const nexar__omsg_t *m) {
  return c->ep->ops->frame_more(m) && !m->blocked;
}

/* Unlinks and frees a queued message that never got a stream. */
static void drop_unopened(nexar__link_t *c, nexar__omsg_t *m) {
  nexar__link_unqueue(c, m);
  if (m->owned && c->role == NEXAR__ROLE_MESH && c->eager_bytes >= m->len)
    c->eager_bytes -= m->len;
  c->ep->ops->frame_free(m);
}

/* The lanes in the order they are written. */
static const int lane_order[NEXAR__LANE_COUNT] = {
    NEXAR__LANE_CONTROL, NEXAR__LANE_RPC, NEXAR__LANE_DATA};

/* Whether a new stream of |lane| may open now. Every message of a mesh
 * link has a bidirectional stream of its own (used one way; the receiver
 * shuts the other direction, so both ends close it: ngtcp2 0.12 never
 * closes a remote unidirectional stream, and each one kept its state for
 * the life of the connection). The lanes share the peer's MAX_STREAMS
 * credit, so each keeps a share the lanes after it cannot take: data opens
 * only while more than half of it is left, RPC while more than a quarter
 * is, control while any is. Undelivered data can never hold back a call, a
 * barrier or a heartbeat, and a burst of calls cannot hold back a barrier. */
static bool may_open(nexar__quic_t *q, int lane) {
  if (lane == NEXAR__LANE_CONTROL || q->l.role != NEXAR__ROLE_MESH || q->is_rpc)
    return true;
  const ngtcp2_transport_params *tp =
      ngtcp2_conn_get_remote_transport_params(q->qc);
  uint64_t quarter = tp ? tp->initial_max_streams_bidi / 4 : 0;
  uint64_t keep = lane == NEXAR__LANE_DATA ? 2 * quarter : quarter;
  return ngtcp2_conn_get_streams_bidi_left(q->qc) > keep;
}

/* Whether connection |q| of link |c| writes |m| of the RPC lane: the RPC
 * connection writes what it opened and, once up, every message not opened
 * yet; the first connection the rest. */
static bool rpc_here(const nexar__quic_t *q, const nexar__link_t *c,
                     const nexar__omsg_t *m) {
  if (m->sid >= 0) return ((m->sid & NEXAR__RPC_SID) != 0) == q->is_rpc;
  return q->is_rpc || !nexar__qrpc_up(nexar__quic((nexar__link_t *)c));
}

/* The first message of link |c| with bytes to write on its connection
 * |q|, the lanes taken in lane_order; only the first |nlanes| of them may
 * write (the RPC connection writes only the RPC lane). */
static nexar__omsg_t *next_sendable(nexar__quic_t *q, nexar__link_t *c,
                                    int nlanes, int *err) {
  for (int k = 0; k < nlanes; k++) {
    int lane = lane_order[k];
    if (q->is_rpc && lane != NEXAR__LANE_RPC) continue;
    for (nexar__omsg_t *m = c->outq[lane], *next; m; m = next) {
      next = m->next;
      if (m->sid < 0 && !m->req && !m->fwd && m->sent >= nexar__omsg_total(m)) {
        /* Cancelled before its stream opened: ngtcp2 never saw it. */
        drop_unopened(c, m);
        continue;
      }
      if (!unsent(c, m)) continue;
      if (lane == NEXAR__LANE_RPC && !rpc_here(q, c, m)) continue;
      if (m->sid < 0) {
        if (!may_open(q, lane)) break; /* keep FIFO order */
        int rv = c->role == NEXAR__ROLE_MESH
                     ? ngtcp2_conn_open_bidi_stream(q->qc, &m->sid, m)
                     : ngtcp2_conn_open_uni_stream(q->qc, &m->sid, m);
        if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED) break; /* keep FIFO order */
        if (rv != 0) {
          *err = rv;
          return NULL;
        }
        if (q->is_rpc) m->sid |= NEXAR__RPC_SID;
        if (lane == NEXAR__LANE_RPC && nexar__qrpc_up(q)) q->rpc_main_opened++;
      }
      return m;
    }
  }
  return NULL;
}

static void account(nexar__omsg_t *m, ngtcp2_ssize n) {
  if (m && n > 0) m->sent += (uint64_t)n;
}

/* Notes which lane's bytes the packet being written got from |m|. */
static void note_lane(const nexar__omsg_t *m, ngtcp2_ssize n, bool *prio,
                      bool *data) {
  if (!m || n <= 0) return;
  if (m->lane == NEXAR__LANE_DATA)
    *data = true;
  else
    *prio = true;
}

/* How many lanes of lane_order may write now. Data waits while the
 * connection has more than cap = max(data_inflight, 2 x bandwidth-delay
 * product) bytes in flight: without that bound the congestion window
 * (inflated by batched ACKs) lets several MB of data queue in the
 * receiver's socket, and a control message sent after it waits until the
 * receiver has decrypted all of it, behind data of any peer since all share
 * one socket. While RPC traffic is recent (|rpc|), data waits above
 * data_inflight_rpc instead, when that is lower: a call's packet then finds
 * at most about that much data ahead of it in the receiver's socket (no
 * bandwidth-delay term here: the bound is what a call may wait behind).
 * The RPC lane has an allowance of its own on top: it waits only
 * above 2 x cap, so a call never waits for data to drain, and a burst of
 * large calls is bounded as data is. Control is never held back. */
static int writable_lanes(nexar__quic_t *q, bool rpc) {
  nexar__link_t *c = &q->l;
  int64_t floor = c->ep->data_inflight;
  int64_t rpc_cap = rpc ? c->ep->data_inflight_rpc : 0;
  if ((floor <= 0 && rpc_cap <= 0) || c->role != NEXAR__ROLE_MESH || q->is_rpc)
    return NEXAR__LANE_COUNT;
  ngtcp2_conn_stat cs;
  ngtcp2_conn_get_conn_stat(q->qc, &cs);
  uint64_t cap = floor > 0 ? (uint64_t)floor : UINT64_MAX;
  if (floor > 0 && cs.min_rtt != UINT64_MAX && cs.delivery_rate_sec) {
    /* Rates above 1 TB/s or RTTs above 1 s saturate rather than wrap. */
    uint64_t rate = cs.delivery_rate_sec < (1ull << 40) ? cs.delivery_rate_sec
                                                        : (1ull << 40);
    uint64_t rtt = cs.min_rtt < NGTCP2_SECONDS ? cs.min_rtt : NGTCP2_SECONDS;
    uint64_t bdp2 = 2 * (rate >> 10) * rtt / (NGTCP2_SECONDS >> 10);
    if (bdp2 > cap) cap = bdp2;
  }
  uint64_t data_cap =
      rpc_cap > 0 && (uint64_t)rpc_cap < cap ? (uint64_t)rpc_cap : cap;
  if (cs.bytes_in_flight < data_cap) return NEXAR__LANE_COUNT;
  return cap == UINT64_MAX || cs.bytes_in_flight < 2 * cap
             ? NEXAR__LANE_COUNT - 1
             : 1;
}

/* The largest packet a flush writes: the connection's, or while RPC
 * traffic is recent half of data_inflight_rpc (at least QUIC's minimum of
 * 1200 bytes), so that the in-flight bound admits more than one packet and
 * the receiver's passes, which read whole datagrams, stay short. */
static size_t packet_max(nexar__quic_t *q, bool rpc) {
  size_t pktmax = ngtcp2_conn_get_max_tx_udp_payload_size(q->qc);
  /* Until the handshake is confirmed, packets keep an unmeasured path's
   * size: ngtcp2 pads a datagram with an Initial packet to the whole buffer,
   * and 256 processes' 65,000-byte Initials and their retransmissions filled
   * a starved seed's 16 MiB receive buffer; the dropped ones backed off
   * exponentially, and workers sat silent past the bootstrap's deadline. */
  if (!q->confirmed && pktmax > NEXAR__QUIC_PATH_PAYLOAD)
    pktmax = NEXAR__QUIC_PATH_PAYLOAD;
  if (!rpc || q->is_rpc || q->l.ep->data_inflight_rpc <= 0) return pktmax;
  size_t half = (size_t)q->l.ep->data_inflight_rpc / 2;
  if (half < NGTCP2_MAX_UDP_PAYLOAD_SIZE) half = NGTCP2_MAX_UDP_PAYLOAD_SIZE;
  return half < pktmax ? half : pktmax;
}

/* A packet of |pkt| bytes with control or RPC frames (|prio|) or data was
 * written while RPC traffic was recent: what tests read through
 * nexar__quic_test_stats (quic_test.h). */
static void count_rpc_pkt(nexar__quic_t *q, size_t pkt, bool prio, bool data) {
  if (q->is_rpc) {
    if (q->parent && prio) q->parent->rpc_conn_pkts++;
    return;
  }
  if (prio && pkt > q->rpc_prio_pkt_max) q->rpc_prio_pkt_max = pkt;
  if (!data) return;
  ngtcp2_conn_stat cs;
  ngtcp2_conn_get_conn_stat(q->qc, &cs);
  q->rpc_data_pkts++;
  if (pkt > q->rpc_data_pkt_max) q->rpc_data_pkt_max = pkt;
  if (cs.bytes_in_flight > q->rpc_data_inflight_max)
    q->rpc_data_inflight_max = cs.bytes_in_flight;
}

/* Sends the |len| bytes of packets in txbuf. Returns 0; 1 when the socket
 * is full (the batch waits in txbuf, see udp.c); NEXAR_ERR_SYS when the
 * send failed, which QUIC recovers as loss. */
static int send_batch(nexar__quic_t *q, size_t len, size_t pktmax) {
  nexar__link_t *c = &q->l;
  nexar__ep_t *ep = c->ep;
  if (q->is_rpc) { /* the RPC socket: a batch it refuses is lost */
    nexar__udp_send_fd(ep, ep->quic->fd, &c->remote, c->remote_len,
                       ep->quic->txbuf, len, pktmax);
    return 0;
  }
  int rc =
      nexar__udp_send(ep, &c->remote, c->remote_len, ep->txbuf, len, pktmax);
  if (rc == 1)
    c->want_write = true;
  else if (rc < 0 || c->tx_err_since)
    nexar__link_tx_result(c, rc < 0 ? -rc : 0);
  return rc < 0 ? 0 : rc; /* a failed send is a loss QUIC recovers */
}

void nexar__ep_tx_failed(nexar__ep_t *ep, const struct sockaddr_storage *to,
                         int err) {
  for (int i = 0; i < ep->nconns; i++)
    if (nexar__addr_equal(&ep->conns[i]->remote, to))
      nexar__link_tx_result(ep->conns[i], err);
}

/* The next bytes of the note that connection |q| writes (the accepting
 * side of a link, quic_rpc.c): a new unidirectional stream for each note.
 * Returns false when there is none to write now. */
static bool note_vec(nexar__quic_t *q, ngtcp2_vec *v, int64_t *sid) {
  if (q->note_sid < 0) {
    if (!q->note_n ||
        ngtcp2_conn_open_uni_stream(q->qc, &q->note_sid, NULL) != 0)
      return false;
    nexar__qrpc_note_encode(q->note[q->note_q[0] - 1], q->note_q[0],
                            q->rpc_port);
    q->note_off = 0;
  }
  v->base = q->note[q->note_q[0] - 1] + q->note_off;
  v->len = NEXAR__RPC_NOTE_BYTES - q->note_off;
  *sid = q->note_sid;
  return true;
}

/* |n| bytes of the note were written. */
static void note_sent(nexar__quic_t *q, ngtcp2_ssize n) {
  if (n <= 0 || (q->note_off += (size_t)n) < NEXAR__RPC_NOTE_BYTES) return;
  q->note_sid = -1;
  q->note_q[0] = q->note_q[1];
  q->note_n--;
}

/* Writes what connection |q| of link |c| has to write: the link's first
 * connection all but what its RPC connection carries, the RPC connection
 * its RPC lane. */
void nexar__quic_flush_conn(nexar__quic_t *q, nexar__link_t *c) {
  nexar__link_t *w = &q->l;
  if (!q->qc || w->state == NEXAR__CS_DEAD || w->state == NEXAR__CS_CLOSING)
    return;
  nexar__ep_t *ep = c->ep;
  if (ep->tx_blocked && !q->is_rpc) {
    /* txbuf holds a batch the socket refused; come back once it is out. */
    w->want_write = true;
    return;
  }
  uint8_t *txbuf = q->is_rpc ? ep->quic->txbuf : ep->txbuf;
  uint64_t ts = nexar__now();
  bool rpc = nexar__ep_rpc_recent(ep, ts);
  size_t pktmax = packet_max(q, rpc);
  size_t quantum = ngtcp2_conn_get_send_quantum(q->qc);
  size_t batch_max = GSO_MAX_BYTES / pktmax;
  if (batch_max < 1) batch_max = 1;
  if (batch_max > GSO_MAX_SEGS) batch_max = GSO_MAX_SEGS;
  /* A GSO batch is |nseg| datagrams of |seg| bytes (the first packet's
   * size; the path's, once PMTU discovery settles, which can be below
   * pktmax), the last possibly shorter. */
  size_t off = 0, nseg = 0, seg = 0, total = 0;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi;
  w->want_write = false;
  /* The packet being written holds control or RPC frames, or data. */
  bool prio_in = false, data_in = false;
  for (int guard = 0; guard < 100000; guard++) {
    int err = 0;
    bool ready = w->state == NEXAR__CS_READY && c->state == NEXAR__CS_READY;
    ngtcp2_vec note;
    int64_t note_sid = -1;
    bool in_note = ready && !data_in && note_vec(q, &note, &note_sid);
    nexar__omsg_t *m = ready && !in_note
                           ? next_sendable(q, c, writable_lanes(q, rpc), &err)
                           : NULL;
    if (err) {
      nexar__link_fail(w, NEXAR_ERR_TRANSPORT, ngtcp2_strerror(err));
      return;
    }
    /* A packet holds control and RPC frames or data, never both: a call's
     * packet stays small, so it is encrypted, sent and decrypted on its
     * own, ahead of the data that follows, instead of inside a packet of
     * up to 64 KB of data. */
    if (m && (m->lane == NEXAR__LANE_DATA ? prio_in : data_in)) m = NULL;
    struct iovec iov[NEXAR__FRAME_VECS];
    ngtcp2_vec vec[NEXAR__FRAME_VECS];
    size_t nvec = 0;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
    int64_t sid = -1;
    if (in_note) {
      sid = note_sid;
      vec[0] = note;
      nvec = 1;
      flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    } else if (m) {
      bool fin;
      sid = m->sid & ~NEXAR__RPC_SID;
      nvec = ep->ops->frame_vecs(m, iov, NEXAR__FRAME_VECS, &fin);
      for (size_t i = 0; i < nvec; i++) {
        vec[i].base = iov[i].iov_base;
        vec[i].len = iov[i].iov_len;
      }
      if (fin) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    }
    ngtcp2_ssize ndata = -1;
    ngtcp2_ssize n =
        ngtcp2_conn_writev_stream(q->qc, &ps.path, &pi, txbuf + off, pktmax,
                                  &ndata, flags, sid, vec, nvec, ts);
    if (in_note && (n >= 0 || n == NGTCP2_ERR_WRITE_MORE)) {
      note_sent(q, ndata);
      prio_in |= ndata > 0;
    }
    if (n < 0) {
      if (n == NGTCP2_ERR_WRITE_MORE) {
        account(m, ndata);
        note_lane(m, ndata, &prio_in, &data_in);
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED && m) {
        m->blocked = true;
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_SHUT_WR && m) {
        m->sent = nexar__omsg_total(m);
        continue;
      }
      nexar__link_fail(w, NEXAR_ERR_TRANSPORT, ngtcp2_strerror((int)n));
      return;
    }
    account(m, ndata);
    note_lane(m, ndata, &prio_in, &data_in);
    if (n > 0 && (rpc || q->is_rpc))
      count_rpc_pkt(q, (size_t)n, prio_in, data_in);
    prio_in = data_in = false;
    if (n == 0) break;
    if (!q->confirmed && (uint64_t)n > q->hs_pkt_max) q->hs_pkt_max = n;
    if ((uint64_t)n > q->pkt_max) q->pkt_max = n;
    q->ack_waiting = 0; /* it carries the ACK if due, else ack_by sends it */
    total += (size_t)n;
    if (nseg == 0) {
      seg = (size_t)n;
    } else if ((size_t)n > seg) {
      /* A larger packet (a PMTU probe, or data after an ACK-only packet)
       * cannot join a batch of |seg|-byte datagrams: send the batch and
       * start the next one with it. Should the socket refuse the batch,
       * this one packet is lost (QUIC resends its frames); the batch
       * waits in txbuf. */
      size_t at = off;
      int sr = send_batch(q, at, seg);
      off = nseg = 0;
      if (sr == 1) break;
      memmove(txbuf, txbuf + at, (size_t)n);
      seg = (size_t)n;
    }
    off += (size_t)n;
    nseg++;
    if ((size_t)n < seg || nseg >= batch_max) {
      int sr = send_batch(q, off, seg);
      off = 0;
      nseg = 0;
      if (sr == 1) break;
    }
    if (total >= quantum) {
      /* Let other connections have their turn; come back next loop. */
      w->want_write = true;
      break;
    }
  }
  if (off) send_batch(q, off, seg);
  /* Pace only what stopped at the send quantum: a flush that wrote all
   * there was would otherwise leave a pacing deadline that is already due,
   * and the engine would take it for a timer to serve. */
  if (w->want_write) ngtcp2_conn_update_pkt_tx_time(q->qc, ts);
}

void nexar__quic_flush(nexar__link_t *c) {
  nexar__quic_t *q = Q(c);
  if (c->role == NEXAR__ROLE_MESH) nexar__qrpc_want(q);
  /* The RPC connection first: a call is sent before the data of the same
   * flush is encrypted and sent. It writes whenever the link does: what
   * the upper layers asked of the link (a new message, bytes of a relayed
   * one) may be its to write. */
  if (q->rpc) nexar__quic_flush_conn(q->rpc, c);
  nexar__quic_flush_conn(q, c);
  if (q->rpc) nexar__qrpc_settle(q, false);
}

/* Sends the close of one connection (see nexar__quic_send_close). */
static void send_close_conn(nexar__quic_t *q, int code, const char *reason) {
  nexar__link_t *c = &q->l;
  ngtcp2_conn *qc = q->qc;
  /* Before the handshake completes there may be no keys to protect an
   * application CONNECTION_CLOSE (ngtcp2 0.12 asserts on it), so a
   * stranger's bogus Initial is dropped silently. A handshake that TLS
   * refused (certificate not in the roster, wrong ALPN) has an alert
   * and keys: the peer gets a transport close carrying the alert and
   * learns at once instead of after its handshake timeout. */
  bool done = qc && ngtcp2_conn_get_handshake_completed(qc);
  uint8_t alert = qc && !done ? ngtcp2_conn_get_tls_alert(qc) : 0;
  if (!qc || !(done || alert) || ngtcp2_conn_is_in_closing_period(qc) ||
      ngtcp2_conn_is_in_draining_period(qc))
    return;
  ngtcp2_connection_close_error ce;
  ngtcp2_connection_close_error_default(&ce);
  if (done)
    ngtcp2_connection_close_error_set_application_error(
        &ce, (uint64_t)code, (const uint8_t *)reason, strlen(reason));
  else
    ngtcp2_connection_close_error_set_transport_error_tls_alert(
        &ce, alert, (const uint8_t *)reason, strlen(reason));
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi;
  /* Not txbuf: it may hold a batch waiting for the socket. */
  uint8_t buf[1200];
  ngtcp2_ssize n = ngtcp2_conn_write_connection_close(
      qc, &ps.path, &pi, buf, sizeof(buf), &ce, nexar__now());
  if (n <= 0) return;
  if (q->is_rpc)
    nexar__udp_send_fd(c->ep, c->ep->quic->fd, &c->remote, c->remote_len, buf,
                       (size_t)n, (size_t)n);
  else
    nexar__udp_send(c->ep, &c->remote, c->remote_len, buf, (size_t)n,
                    (size_t)n);
}

/* A link's close goes out on its first connection, then on its RPC
 * connection with the same code and reason. */
void nexar__quic_send_close(nexar__link_t *c) {
  send_close_conn(Q(c), c->tx_code, c->tx_reason);
  if (Q(c)->rpc) send_close_conn(Q(c)->rpc, c->tx_code, c->tx_reason);
}

/* An RPC connection's own close (a protocol error on it). */
void nexar__quic_send_close_rpc(nexar__quic_t *r) {
  send_close_conn(r, r->l.tx_code, r->l.tx_reason);
}

int nexar__quic_stats_link(nexar__link_t *l, nexar__quic_test_stats_t *out) {
  if (!l || l->tp != &nexar__tp_quic || !Q(l)->qc) return NEXAR_ERR_UNSUPPORTED;
  out->rpc_data_pkts = Q(l)->rpc_data_pkts;
  out->rpc_data_pkt_max = Q(l)->rpc_data_pkt_max;
  out->rpc_data_inflight_max = Q(l)->rpc_data_inflight_max;
  out->rpc_prio_pkt_max = Q(l)->rpc_prio_pkt_max;
  out->rpc_conn_pkts = Q(l)->rpc_conn_pkts;
  out->rpc_main_opened = Q(l)->rpc_main_opened;
  out->rpc_conn_up = nexar__qrpc_up(Q(l));
  out->hs_pkt_max = Q(l)->hs_pkt_max;
  out->pkt_max = Q(l)->pkt_max;
  return 0;
}
