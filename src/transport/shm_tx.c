/*
 * Shared-memory links, the sending half (shm.c has the receiving half and
 * the ops table; shm.h the link). Runs only on the progress thread.
 *
 * Two rings per direction: the bulk ring (seg) carries the data lane, the
 * priority ring (pseg) the control and RPC lanes and the flow-control
 * records (ACK, CREDIT, STREAMS; a RESET goes with its stream). The
 * receiver reads the priority ring before every record of the bulk ring,
 * so a barrier's or an RPC's message never waits behind bulk data written
 * before it; only behind the record being copied or reduced when it
 * arrived (at most NEXAR_PASS_SLICE_BYTES).
 */
#include <string.h>

#include "transport/shm.h"

/* ---- Ring rules. */

static nexar__shm_ring_t *tx_ring(nexar__shm_t *s, int q) {
  return q == Q_PRIO ? &s->pseg.tx : &s->seg.tx;
}

/* Whether at most half of the ring |r| is unread: the data lane writes
 * only then (half_unread), so that the bulk ring is never filled by one
 * message, and waits for it (TX_UNREAD). A producer whose record did not
 * fit (TX_FIT) waits until half of the ring is free (half_free: a pad
 * that the consumer has yet to pass then counts as used, so that it waits
 * for the consumer's kick rather than trying again each pass). */
static bool half_unread(nexar__shm_ring_t *r) {
  return nexar__shm_ring_unread_within(r, r->cap / 2);
}

static bool half_free(nexar__shm_ring_t *r) {
  return nexar__shm_ring_has_free(r, r->cap / 2);
}

static bool room_again(nexar__shm_t *s, int q) {
  nexar__shm_ring_t *r = tx_ring(s, q);
  return s->tx_full[q] == TX_UNREAD ? half_unread(r)
         : s->tx_full[q] == TX_FIT  ? half_free(r)
                                    : false;
}

bool nexar__shm_tx_room(nexar__shm_t *s) {
  return room_again(s, Q_BULK) || room_again(s, Q_PRIO);
}

/* The consumer kicks at any release and takes the flag, even when what it
 * released leaves the producer short: before each block the flag goes up
 * again, then the room is looked at. Without it, a data lane that woke
 * with more than half of its ring still unread slept on with no flag up
 * until the engine's 50 ms tick, and so did its peer once the ring was
 * read: bw 64 MiB at np 4 lost 50 ms in about one run of five. */
bool nexar__shm_tx_arm(nexar__shm_t *s) {
  for (int q = 0; q < 2; q++)
    if (s->tx_full[q]) nexar__shm_ring_producer_wait(tx_ring(s, q));
  if (!nexar__shm_tx_room(s)) return true;
  s->l.want_write = true;
  return false;
}

/* The most payload one record of ring |q| carries: a chunk, at most
 * NEXAR_PASS_SLICE_BYTES (the unit of a pass's work), never more than the
 * ring's largest (a small NEXAR_SHM_RING_KIB). */
static uint64_t record_max(nexar__shm_t *s, int q) {
  uint64_t max = nexar__shm_ring_max_payload(tx_ring(s, q));
  if (max > CHUNK_BYTES) max = CHUNK_BYTES;
  return max < s->l.ep->slice ? max : s->l.ep->slice;
}

/* Whether a message of |len| payload bytes goes as descriptors (the peer
 * reads it from this process's memory), its header in a record alone. */
static bool by_desc(const nexar__shm_t *s, uint64_t len) {
  return s->peer_reads && s->cma_min && len >= s->cma_min;
}

/* ---- Sending. */

/* Appends one record to ring |q|; false when it is full (wait for a
 * kick). */
static bool put(nexar__shm_t *s, int q, uint16_t type, uint16_t flags,
                uint64_t a, uint64_t b, const struct iovec *iov, int niov) {
  nexar__shm_ring_t *r = tx_ring(s, q);
  int rc = nexar__shm_ring_put(r, type, flags, a, b, iov, niov);
  if (rc == 0) {
    s->tx_at = s->l.ep->pass_now;
    return true;
  }
  if (rc == NEXAR__SHM_AGAIN) {
    size_t len = 0;
    for (int i = 0; i < niov; i++) len += iov[i].iov_len;
    s->tx_full[q] = TX_FIT;
    nexar__shm_unpark(s); /* polled while it waits for room */
    /* Sleep on the kick unless room for this record came meanwhile. */
    if (!nexar__shm_ring_producer_sleep(r, (uint32_t)len))
      s->l.want_write = true;
    else
      s->l.ep->shm_kicks = true;
  } else {
    nexar__link_close(&s->l, NEXAR__CLOSE_PROTO, "ring corrupt");
    nexar__shm_fail(&s->l, NEXAR_ERR_PROTO, "its ring is corrupt");
  }
  return false;
}

/* Control records owed: stream credit, returned streams. */
static bool put_credit(nexar__shm_t *s) {
  while (s->nacks) {
    int i = s->nacks - 1;
    if (!put(s, Q_PRIO, R_ACK, 0, (uint64_t)s->acks[i].sid, s->acks[i].n, NULL,
             0))
      return false;
    s->nacks--;
  }
  for (int i = 0; i < s->nrs; i++) {
    rstream_t *st = &s->rs[i];
    if (st->max_sent < st->max) {
      if (!put(s, Q_PRIO, R_CREDIT, 0, (uint64_t)st->sid, st->max, NULL, 0))
        return false;
      st->max_sent = st->max;
    }
  }
  if (s->streams_owed >= nexar__shm_stream_batch(s)) {
    if (!put(s, Q_PRIO, R_STREAMS, 0, s->streams_owed, 0, NULL, 0))
      return false;
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

/* Whether the data lane may write (half_unread). Else it waits until
 * half_unread holds (TX_UNREAD): every pass looks (nexar__shm_tx_room), and
 * before the engine blocks nexar__shm_tx_arm raises the flag for the
 * consumer's kick. A recycled ring is nearly all pad until the consumer
 * passes it; counted as unread, it held back the next message of a 64 B
 * allreduce at np 4 until the partner had run and kicked (0.3-1.3 ms, each
 * time the small records recycled). */
static bool data_room(nexar__shm_t *s) {
  if (half_unread(&s->seg.tx)) return true;
  s->tx_full[Q_BULK] = TX_UNREAD;
  return false;
}

/* |m| written whole (or cut): it ends once the peer has read every
 * descriptor of it. */
static void written(nexar__shm_t *s, nexar__omsg_t *m, bool *closed) {
  m->tx_fin = true;
  if (m->acked < m->tx_out) return; /* on_ack ends it */
  nexar__link_unqueue(&s->l, m);
  s->l.ep->ops->on_out_closed(&s->l, m);
  *closed = true;
}

/* The payload bytes of |m| from m->sent on that may go as one descriptor
 * (the peer reads this process's memory; a long enough run of the
 * caller's buffer, within one entry of a gathered payload), else 0; *at
 * is where they start. */
static uint64_t desc_bytes(const nexar__shm_t *s, const nexar__omsg_t *m,
                           uint64_t room, const uint8_t **at) {
  uint64_t pend = NEXAR__HDR_BYTES + m->pre_len, total = nexar__omsg_total(m);
  if (!s->peer_reads || !s->cma_min || m->fwd || !nexar__omsg_has_payload(m) ||
      m->sent < pend || total - m->sent < s->cma_min)
    return 0;
  uint64_t n;
  *at = nexar__omsg_run(m, m->sent - pend, &n);
  if (n < s->cma_min) return 0; /* a short gathered entry: copied */
  if (n > room) n = room;
  uint64_t max =
      s->l.ep->slice < DESC_MAX_BYTES ? s->l.ep->slice : DESC_MAX_BYTES;
  return n > max ? max : n;
}

/* A stream's first record went out on ring |q|: its id and a stream are
 * used. */
static void open_stream(nexar__shm_t *s, int q) {
  s->next_sid[q] += SID_STEP;
  s->streams_left--;
}

static void opened(nexar__shm_t *s, int q, bool *opening) {
  if (!*opening) return;
  *opening = false;
  open_stream(s, q);
}

/* A stream's first record found no room: it is not open yet. */
static bool unopen(nexar__omsg_t *m, bool opening) {
  if (opening) m->sid = -1;
  return false;
}

/* Writes what |m| may, adding its payload bytes to *bytes: returns false
 * when its ring is full. */
static bool put_msg(nexar__shm_t *s, nexar__omsg_t *m, bool *closed,
                    uint64_t *bytes) {
  nexar__link_t *l = &s->l;
  const nexar__ep_ops_t *ops = l->ep->ops;
  uint64_t total = nexar__omsg_total(m);
  int q = LANE_Q(m->lane);
  *closed = false;
  if (m->tx_fin) return true; /* waiting for acknowledgements */
  bool opening = false;
  if (m->stop) {
    /* Cut: the peer learns it (if it ever saw the stream), and it ends. */
    if (m->sid >= 0 && !put(s, q, R_RESET, 0, (uint64_t)m->sid, 0, NULL, 0))
      return false;
    written(s, m, closed);
    return true;
  }
  while (ops->frame_more(m) && !m->blocked) {
    if (q == Q_BULK && !data_room(s)) return false;
    if (m->sid < 0) {
      /* Opened by its first record: ids reach the peer in order (per ring)
       * even when the ring is full now and another lane's message goes
       * first. */
      m->sid = s->next_sid[q];
      m->tx_max = s->window;
      opening = true;
    }
    uint64_t room = m->tx_max > m->sent ? m->tx_max - m->sent : 0;
    if (!room) {
      m->blocked = true;
      break;
    }
    const uint8_t *at = NULL;
    uint64_t dn = desc_bytes(s, m, room, &at);
    if (dn) {
      shm_desc_t d = {(uint64_t)(uintptr_t)at, dn};
      struct iovec v = {&d, sizeof(d)};
      bool fin = m->sent + dn == total;
      if (!put(s, q, R_DESC, fin ? F_FIN : 0, (uint64_t)m->sid, m->sent, &v, 1))
        return unopen(m, opening);
      opened(s, q, &opening);
      m->sent += dn;
      m->tx_out += dn;
      if (fin) written(s, m, closed);
      if (fin) return true;
      continue;
    }
    struct iovec v[NEXAR__FRAME_VECS];
    bool fin;
    size_t nv = ops->frame_vecs(m, v, NEXAR__FRAME_VECS, &fin);
    uint64_t chunk = record_max(s, q);
    uint64_t cap = room < chunk ? room : chunk, len = 0;
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
    /* The header goes alone when descriptors follow it. */
    if (by_desc(s, m->len) && m->sent < NEXAR__HDR_BYTES + m->pre_len &&
        !m->fwd && nexar__omsg_has_payload(m)) {
      uint64_t head = NEXAR__HDR_BYTES + m->pre_len - m->sent;
      if (len > head) {
        len = 0;
        for (k = 0; k < nv && len < head; k++) {
          if (v[k].iov_len > head - len) v[k].iov_len = (size_t)(head - len);
          len += v[k].iov_len;
        }
        fin = false;
      }
    }
    if (!put(s, q, R_DATA, fin ? F_FIN : 0, (uint64_t)m->sid, m->sent, v,
             (int)k))
      return unopen(m, opening);
    opened(s, q, &opening);
    m->sent += len;
    m->tx_out += len;
    *bytes += len;
    ops->on_acked(l, m, len);
    if (fin) {
      written(s, m, closed);
      return true;
    }
    if (*bytes >= l->ep->slice) {
      /* A pass copies about a slice: the rest goes in the next one. */
      l->want_write = true;
      return false;
    }
  }
  return true;
}

static const int lane_order[NEXAR__LANE_COUNT] = {
    NEXAR__LANE_CONTROL, NEXAR__LANE_RPC, NEXAR__LANE_DATA};

void nexar__shm_flush(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  l->want_write = false;
  if (l->state != NEXAR__CS_READY) return;
  s->tx_full[Q_BULK] = s->tx_full[Q_PRIO] = 0;
  bool room[2];
  room[Q_BULK] = true;
  room[Q_PRIO] = put_credit(s);
  uint64_t bytes = 0;
  for (int k = 0; k < NEXAR__LANE_COUNT; k++) {
    int lane = lane_order[k], q = LANE_Q(lane);
    for (nexar__omsg_t *m = l->outq[lane], *next; room[q] && m; m = next) {
      next = m->next;
      if (m->sid < 0 && !m->stop && !may_open(s, lane)) break; /* FIFO */
      if (m->sid < 0 && m->stop) {
        /* Cancelled before it opened: the peer never saw it. */
        nexar__link_unqueue(l, m);
        l->ep->ops->on_out_closed(l, m);
        continue;
      }
      bool closed;
      room[q] = put_msg(s, m, &closed, &bytes);
      if (l->state == NEXAR__CS_DEAD) return;
    }
  }
  /* Both flags are taken (a kick covers both rings). */
  bool kick = nexar__shm_ring_need_kick(&s->seg.tx);
  if (nexar__shm_ring_need_kick(&s->pseg.tx) || kick) nexar__shm_kick(s);
}

/* Whether |h| with |len| payload bytes goes as one R_SMALL record (shm.h):
 * a standard point-to-point message of the data lane whose other header
 * fields are zero. */
static bool small_ok(const nexar__hdr_t *h, uint64_t len) {
  return len <= SMALL_MAX && h->kind == NEXAR__KIND_P2P &&
         h->lane == NEXAR__LANE_DATA && h->step == NEXAR__P2P_STANDARD &&
         h->payload_len == len && !h->coll_op && !h->redop && !h->coll_seq &&
         !h->algo && !h->count;
}

/* |h| and its payload as one R_SMALL record of the bulk ring. */
static int put_small(nexar__shm_ring_t *r, const nexar__hdr_t *h,
                     const uint8_t *data, uint64_t len) {
  uint8_t *p;
  int rc = nexar__shm_ring_reserve(r, SMALL_PRE + (uint32_t)len, (void **)&p);
  if (rc != 0) return rc;
  const uint32_t pre[2] = {h->src_rank, h->tag};
  memcpy(p, pre, SMALL_PRE);
  if (len) memcpy(p + SMALL_PRE, data, (size_t)len);
  return nexar__shm_ring_commit(r, R_SMALL, h->dtype, h->seq, h->comm_id,
                                SMALL_PRE + (uint32_t)len);
}

/* The fast path for small messages (tp->send_now): one record that opens
 * and ends its stream (R_SMALL when the message fits one line, else DATA
 * with FIN), written under the same rules as put_msg's (stream limit,
 * window, the data lane's half of the ring) but with no message object,
 * no copy and no flush. */
bool nexar__shm_send_now(nexar__link_t *l, int lane, const nexar__hdr_t *h,
                         const uint8_t *hdr, const uint8_t *data,
                         uint64_t len) {
  nexar__shm_t *s = S(l);
  int q = LANE_Q(lane);
  nexar__shm_ring_t *r = tx_ring(s, q);
  uint64_t total = NEXAR__HDR_BYTES + len;
  /* No |data| for |len| bytes: a gathered payload, which the queued
   * path writes. */
  if ((!data && len) || l->state != NEXAR__CS_READY || l->outq[lane] ||
      s->tx_full[q] || !may_open(s, lane) || total > s->window ||
      total > record_max(s, q) || by_desc(s, len) ||
      (q == Q_BULK && !half_unread(r)))
    return false;
  int rc;
  if (q == Q_BULK && small_ok(h, len)) {
    rc = put_small(r, h, data, len);
  } else {
    uint8_t enc[NEXAR__HDR_BYTES];
    if (!hdr) nexar__hdr_encode(h, enc);
    struct iovec v[2] = {{(void *)(uintptr_t)(hdr ? hdr : enc), sizeof enc},
                         {(void *)(uintptr_t)data, (size_t)len}};
    rc = nexar__shm_ring_put(r, R_DATA, F_FIN, (uint64_t)s->next_sid[q], 0, v,
                             len ? 2 : 1);
  }
  if (rc != 0) return false; /* full (or corrupt: the queued path says so) */
  s->tx_at = l->ep->pass_now;
  open_stream(s, q);
  if (nexar__shm_ring_need_kick(r)) nexar__shm_kick(s);
  return true;
}
