/*
 * Links (src/transport/transport.h): what every transport's links share,
 * and the calls the upper layers make on them. The transport-specific
 * halves are behind the link's ops table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"

void nexar__link_init(nexar__link_t *l, nexar__ep_t *ep, const nexar__tp_t *tp,
                      int role, bool server,
                      const struct sockaddr_storage *remote, socklen_t rlen) {
  l->ep = ep;
  l->tp = tp;
  l->last_rx = nexar__now();
  l->role = role;
  l->is_server = server;
  l->peer = -1;
  memcpy(&l->remote, remote, rlen);
  l->remote_len = rlen;
  nexar__addr_str((const struct sockaddr *)remote, l->remote_str,
                  sizeof(l->remote_str));
}

/* Whether shared memory is the transport to the peer of |d|: it runs on
 * this host (same boot and network namespace) and NEXAR_TRANSPORT allows. */
static bool same_host(const nexar__ep_t *ep, const nexar__dial_t *d) {
  return d->role == NEXAR__ROLE_MESH && d->host && ep->host && ep->prm &&
         d->host->key && d->host->key == ep->host->key &&
         strcmp(ep->prm->transport, "quic") != 0;
}

int nexar__link_dial(nexar__ep_t *ep, const nexar__dial_t *d,
                     nexar__link_t **out) {
  if (same_host(ep, d)) {
    int rc = nexar__tp_shm.dial(ep, d, out);
    if (rc == 0 || !strcmp(ep->prm->transport, "shm")) return rc;
    NEXAR__INFO(NEXAR__SUB_NET,
                "rank %d: rank %d is on this host but shared memory cannot be "
                "set up (%s): QUIC instead",
                ep->local_rank, d->peer, nexar_strerror(rc));
  }
  return nexar__tp_quic.dial(ep, d, out);
}

void nexar__link_unqueue(nexar__link_t *c, nexar__omsg_t *m) {
  nexar__omsg_t **pp = &c->outq[m->lane], *prev = NULL;
  while (*pp && *pp != m) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (!*pp) return;
  *pp = m->next;
  if (c->outq_tail[m->lane] == m) c->outq_tail[m->lane] = prev;
}

void nexar__link_settle(nexar__link_t *c) {
  if (c->close_req && !c->close_sent) {
    c->close_sent = true;
    c->tp->send_close(c);
  }
  if (c->state == NEXAR__CS_DEAD && !c->notified) {
    c->notified = true;
    NEXAR__INFO(NEXAR__SUB_NET, "%s link to %s (rank %d) ended: %s",
                c->tp->name, c->remote_str, c->peer, c->close_reason);
    if (c->ep->ops->on_closed) c->ep->ops->on_closed(c);
  }
}

bool nexar__link_output_due(const nexar__link_t *c) {
  return c->want_write || (c->close_req && !c->close_sent) ||
         (c->state == NEXAR__CS_DEAD && !c->notified);
}

void nexar__link_free(nexar__link_t *c) {
  if (!c) return;
  const nexar__ep_ops_t *ops = c->ep->ops;
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++) {
    nexar__omsg_t *m = c->outq[lane];
    while (m) {
      nexar__omsg_t *next = m->next;
      if (m->req) c->ep->complete(m->req, c->err ? c->err : NEXAR_ERR_CLOSED);
      m->req = NULL;
      ops->frame_free(m);
      m = next;
    }
    c->outq[lane] = c->outq_tail[lane] = NULL;
  }
  if (c->role == NEXAR__ROLE_MESH && ops->on_teardown) ops->on_teardown(c);
  c->tp->free(c);
  free(c->sbuf);
  free(c);
}

/* Who the peer of |c| is, for log lines. */
static void conn_who(const nexar__link_t *c, char *out, size_t n) {
  if (c->peer >= 0)
    snprintf(out, n, "rank %d", c->peer);
  else
    snprintf(out, n, "%s",
             c->role != NEXAR__ROLE_SEED ? "a peer"
             : c->ep->server_alpn_seed   ? "a worker"
                                         : "the seed");
}

void nexar__link_tx_result(nexar__link_t *c, int err) {
  nexar__ep_t *ep = c->ep;
  uint64_t now = nexar__now();
  char who[32];
  conn_who(c, who, sizeof(who));
  if (!err) {
    if (c->tx_err_since)
      NEXAR__WARN(NEXAR__SUB_NET,
                  "rank %d (%s): sending to %s at %s works again after %llu "
                  "ms",
                  ep->local_rank, ep->local_str, who, c->remote_str,
                  (unsigned long long)((now - c->tx_err_since) / 1000000ull));
    c->tx_err_since = 0;
    return;
  }
  c->tx_errno = err;
  if (c->tx_err_since) return;
  c->tx_err_since = now;
  /* Once per spell: the datagrams are dropped as lost, and a peer that
   * stays unreachable is declared failed by the detector. */
  NEXAR__WARN(NEXAR__SUB_NET,
              "rank %d (%s): sending to %s at %s fails: %s (datagrams are "
              "dropped as lost until it works again)",
              ep->local_rank, ep->local_str, who, c->remote_str, strerror(err));
}

void nexar__link_close(nexar__link_t *c, int code, const char *reason) {
  if (c->close_req) return;
  c->close_req = true;
  c->tx_code = code;
  snprintf(c->tx_reason, sizeof(c->tx_reason), "%s", reason);
  if (c->state != NEXAR__CS_DEAD) c->state = NEXAR__CS_CLOSING;
}

void nexar__link_fail(nexar__link_t *c, int err, const char *why) {
  if (c->state == NEXAR__CS_DEAD) return;
  c->state = NEXAR__CS_DEAD;
  c->err = err;
  if (why != c->close_reason)
    snprintf(c->close_reason, sizeof(c->close_reason), "%s", why);
}

void nexar__link_send(nexar__link_t *c, nexar__omsg_t *m) {
  m->next = NULL;
  m->conn = c;
  if (c->outq_tail[m->lane])
    c->outq_tail[m->lane]->next = m;
  else
    c->outq[m->lane] = m;
  c->outq_tail[m->lane] = m;
  c->want_write = true;
}

int nexar__link_seed_send(nexar__link_t *c, const uint8_t *frame, size_t len) {
  return nexar__link_seed_sendv(c, frame, len, NULL, 0, false);
}

int nexar__link_seed_sendv(nexar__link_t *c, const uint8_t *head,
                           size_t head_len, const uint8_t *tail,
                           size_t tail_len, bool tail_ref) {
  /* Each seed frame travels on its own stream without a mesh header. The
   * seed exchange is strictly request/response (PROOF, HELLO, then WELCOME
   * or REJECT), so at most one frame is in flight per direction and the
   * receiver can append stream data in arrival order. A referenced tail is
   * the second entry of a gathered payload. */
  nexar__omsg_t *m = calloc(1, sizeof(*m));
  size_t own = head_len + (tail_ref ? 0 : tail_len);
  if (!m || !(m->owned = malloc(own ? own : 1)) ||
      (tail_ref && tail_len && !(m->segs = calloc(2, sizeof(*m->segs))))) {
    if (m) free(m->owned);
    free(m);
    return NEXAR_ERR_NOMEM;
  }
  memcpy(m->owned, head, head_len);
  if (tail_len && !tail_ref) memcpy(m->owned + head_len, tail, tail_len);
  if (m->segs) {
    m->segs[0] = (nexar__seg_t){.base = m->owned, .len = head_len, .off = 0};
    m->segs[1] = (nexar__seg_t){
        .base = (uint8_t *)tail, .len = tail_len, .off = head_len};
    m->nsegs = 2;
  } else {
    m->data = m->owned;
  }
  m->len = head_len + tail_len;
  m->sid = -1;
  m->lane = NEXAR__LANE_CONTROL;
  m->sent = NEXAR__HDR_BYTES; /* no mesh header on seed streams */
  m->acked = NEXAR__HDR_BYTES;
  nexar__link_send(c, m);
  return 0;
}

bool nexar__link_tx_pending(const nexar__link_t *c) {
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++)
    for (const nexar__omsg_t *m = c->outq[lane]; m; m = m->next)
      if (c->ep->ops->frame_more(m) && !m->blocked) return true;
  return false;
}

bool nexar__link_peer_runnable(const nexar__link_t *c) {
  return c->tp->peer_runnable && c->tp->peer_runnable(c);
}

bool nexar__link_idle(const nexar__link_t *c) {
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++)
    for (const nexar__omsg_t *m = c->outq[lane]; m; m = m->next)
      if (m->sid >= 0 || m->req || m->fwd || m->sent < nexar__omsg_total(m))
        return false; /* not a cancelled, never-opened leftover */
  return true;
}

int nexar__ep_add_conn(nexar__ep_t *ep, nexar__link_t *c) {
  if (ep->nconns == ep->cap_conns) {
    int cap = ep->cap_conns ? ep->cap_conns * 2 : 16;
    nexar__link_t **n = realloc(ep->conns, (size_t)cap * sizeof(*n));
    if (!n) return NEXAR_ERR_NOMEM;
    ep->conns = n;
    ep->cap_conns = cap;
  }
  ep->conns[ep->nconns++] = c;
  if (c->tp == &nexar__tp_quic) ep->quic_any = true; /* quic.c */
  return 0;
}

void nexar__ep_remove_conn(nexar__ep_t *ep, nexar__link_t *c) {
  for (int i = 0; i < ep->nconns; i++) {
    if (ep->conns[i] == c) {
      ep->conns[i] = ep->conns[--ep->nconns];
      return;
    }
  }
}
