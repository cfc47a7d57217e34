/*
 * A mesh link's RPC connection (docs/architecture.md, "The RPC
 * connection"): a second QUIC connection between the same two processes,
 * each end on a UDP socket of its own (the RPC socket, opened when first
 * needed), that carries the link's RPC lane. A call's packets then never
 * wait in the receiver's socket behind the link's data, nor inside a data
 * packet; the engine reads the RPC socket first and again between the
 * receive batches of the data socket (quic.c quic_input).
 *
 * Set-up, lazy: the accepting side of a link's first connection writes,
 * once that connection is up, a PORT note (its RPC socket's port) on a
 * unidirectional stream of it (a mesh link uses only bidirectional streams
 * otherwise). The dialling side dials the RPC connection to that port when
 * the link first has an RPC frame to write, or when the accepting side
 * writes a DIAL note because it has one. Until the RPC connection is up,
 * RPC frames go on the first connection; a message stays on the
 * connection whose stream it opened.
 *
 * Authentication: exactly as for the first connection (tls.c verify_mesh):
 * mutual TLS, the dialling side pinning the fingerprint the roster gives
 * for the rank, the accepting side mapping the client's certificate to a
 * rank through ops->verify_client; ALPN NEXAR__ALPN_RPC. An accepted RPC
 * connection is bound, once its handshake is over, to the one link this
 * process accepted from that rank, from the same IP address, that is up
 * and has no RPC connection yet; none: it is refused. So only the holder
 * of the rank's key can attach a connection, and only to its own link.
 * Before that, at most NEXAR__RPC_PENDING handshakes are held (each until
 * the bootstrap's deadline, as on the link socket), and an Initial from an
 * IP address that no such link has is dropped.
 *
 * Failure: an RPC connection that fails fails its link (its error and
 * reason); a close from the peer ends the link once what the first
 * connection holds was read (the peer closes both with the same code and
 * reason, the first connection first). Closing or freeing a link closes
 * or frees its RPC connection.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "transport/quic.h"
#include "transport/quic_test.h"

static const uint8_t kNoteMagic[4] = {'N', 'X', 'R', '1'};

void nexar__qrpc_note_encode(uint8_t b[NEXAR__RPC_NOTE_BYTES], int kind,
                             uint16_t port) {
  memcpy(b, kNoteMagic, sizeof(kNoteMagic));
  b[4] = (uint8_t)kind;
  b[5] = 0;
  b[6] = (uint8_t)(port >> 8);
  b[7] = (uint8_t)port;
}

int nexar__qrpc_note_decode(const uint8_t *b, size_t n, int *kind,
                            uint16_t *port) {
  if (!b || n != NEXAR__RPC_NOTE_BYTES ||
      memcmp(b, kNoteMagic, sizeof(kNoteMagic)) != 0 || b[5] != 0 ||
      (b[4] != NEXAR__RPC_NOTE_PORT && b[4] != NEXAR__RPC_NOTE_DIAL))
    return NEXAR_ERR_PROTO;
  uint16_t p = (uint16_t)((b[6] << 8) | b[7]);
  if (!p) return NEXAR_ERR_PROTO;
  *kind = b[4];
  *port = p;
  return 0;
}

static uint16_t addr_port(const struct sockaddr_storage *a) {
  return ntohs(a->ss_family == AF_INET6
                   ? ((const struct sockaddr_in6 *)a)->sin6_port
                   : ((const struct sockaddr_in *)a)->sin_port);
}

/* Whether |a| and |b| are the same IP address (ports aside). */
static bool same_ip(const struct sockaddr_storage *a,
                    const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return false;
  if (a->ss_family == AF_INET6)
    return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                   &((const struct sockaddr_in6 *)b)->sin6_addr,
                   sizeof(struct in6_addr));
  return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
         ((const struct sockaddr_in *)b)->sin_addr.s_addr;
}

/* The endpoint's RPC socket, opened at the first call; NULL when it
 * cannot be (the RPC lanes then stay on the first connections). */
static nexar__quic_ep_t *rpc_sock(nexar__ep_t *ep) {
  nexar__quic_ep_t *x = ep->quic;
  if (x) return x->fd >= 0 ? x : NULL;
  if (!(x = calloc(1, sizeof(*x)))) return NULL;
  x->fd = -1;
  ep->quic = x;
  x->txbuf = malloc(NEXAR__RX_BUF + 4096);
  x->rxbuf = malloc((size_t)NEXAR__RPC_RX_BATCH * NEXAR__RX_BUF);
  int fd = x->txbuf && x->rxbuf
               ? nexar__udp_open_more(ep, &x->local, &x->local_len)
               : NEXAR_ERR_NOMEM;
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
  if (fd >= 0 && epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
    close(fd);
    fd = NEXAR_ERR_SYS;
  }
  if (fd < 0) {
    NEXAR__WARN(NEXAR__SUB_NET,
                "rank %d (%s): no RPC socket (%s): RPC stays on the links' "
                "first connections",
                ep->local_rank, ep->local_str, nexar_strerror(fd));
    return NULL;
  }
  x->fd = fd;
  x->port = addr_port(&x->local);
  return x;
}

/* Queues a note of |kind| on link |q| (the accepting side). */
static void note_push(nexar__quic_t *q, int kind) {
  if (q->note_n >= 2) return;
  q->note_q[q->note_n++] = (uint8_t)kind;
  q->l.want_write = true;
}

void nexar__qrpc_link_ready(nexar__quic_t *q) {
  if (!q->l.is_server || q->is_rpc) return;
  nexar__quic_ep_t *x = rpc_sock(q->l.ep);
  if (!x) return;
  q->rpc_port = x->port;
  note_push(q, NEXAR__RPC_NOTE_PORT);
}

/* The dialling side: dials the RPC connection of link |q|. */
static void rpc_dial(nexar__quic_t *q) {
  nexar__link_t *c = &q->l;
  if (q->rpc || q->rpc_off || !q->rpc_port || c->state != NEXAR__CS_READY)
    return;
  nexar__ep_t *ep = c->ep;
  struct sockaddr_storage to = c->remote;
  if (to.ss_family == AF_INET6)
    ((struct sockaddr_in6 *)&to)->sin6_port = htons(q->rpc_port);
  else
    ((struct sockaddr_in *)&to)->sin_port = htons(q->rpc_port);
  nexar__quic_t *r = rpc_sock(ep)
                         ? nexar__quic_new(ep, NEXAR__ROLE_MESH, false, &to,
                                           c->remote_len, NULL, true)
                         : NULL;
  if (!r) {
    q->rpc_off = true;
    NEXAR__WARN(NEXAR__SUB_NET,
                "rank %d: no RPC connection to rank %d at %s: RPC stays on "
                "the link's first connection",
                ep->local_rank, c->peer, c->remote_str);
    return;
  }
  r->l.peer = c->peer;
  r->pin_set = q->pin_set;
  memcpy(r->pin, q->pin, sizeof(r->pin));
  r->parent = q;
  q->rpc = r;
  ep->quic->nrpc++;
  c->want_write = true;
}

void nexar__qrpc_note_data(nexar__quic_t *q, int64_t sid, uint64_t off,
                           const uint8_t *d, size_t n, bool fin) {
  nexar__link_t *c = &q->l;
  uint64_t k = (uint64_t)sid >> 2; /* the peer's k-th such stream */
  const char *bad = NULL;
  if (c->is_server || k >= 2)
    bad = "unexpected unidirectional stream";
  else if (off > NEXAR__RPC_NOTE_BYTES || n > NEXAR__RPC_NOTE_BYTES - off)
    bad = "RPC note too long";
  if (!bad) {
    memcpy(q->note_rx[k] + off, d, n);
    if (off + n > q->note_rx_got[k]) q->note_rx_got[k] = (uint8_t)(off + n);
    if (!fin) return;
    int kind;
    uint16_t port;
    if (nexar__qrpc_note_decode(q->note_rx[k], q->note_rx_got[k], &kind,
                                &port) < 0)
      bad = "malformed RPC note";
    else if (q->rpc_port && port != q->rpc_port)
      bad = "RPC note names another port";
    if (!bad) {
      q->rpc_port = port;
      if (kind == NEXAR__RPC_NOTE_DIAL) rpc_dial(q);
      return;
    }
  }
  NEXAR__WARN(NEXAR__SUB_NET, "rank %d: rank %d at %s: %s", c->ep->local_rank,
              c->peer, c->remote_str, bad);
  nexar__link_close(c, NEXAR__CLOSE_PROTO, bad);
  nexar__link_fail(c, NEXAR_ERR_PROTO, bad);
}

void nexar__qrpc_want(nexar__quic_t *q) {
  if (q->rpc || q->rpc_off || q->is_rpc || q->l.state != NEXAR__CS_READY ||
      !q->l.outq[NEXAR__LANE_RPC])
    return;
  if (!q->l.is_server) {
    rpc_dial(q); /* once the PORT note is in */
  } else if (!q->dial_asked && q->rpc_port) {
    q->dial_asked = true;
    note_push(q, NEXAR__RPC_NOTE_DIAL);
  }
}

static void pending_drop(nexar__quic_ep_t *x, int i) {
  x->pending[i] = x->pending[--x->npending];
  x->pending[x->npending] = NULL;
}

/* The link this process accepted from the IP address of |from| that is up
 * and has no RPC connection: from rank |peer|, or (-1) from any rank. */
static nexar__quic_t *link_for(nexar__ep_t *ep, int peer,
                               const struct sockaddr_storage *from) {
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *c = ep->conns[i];
    if (c->tp == &nexar__tp_quic && c->role == NEXAR__ROLE_MESH &&
        c->is_server && c->state == NEXAR__CS_READY &&
        (peer < 0 || c->peer == peer) && !nexar__quic(c)->rpc &&
        same_ip(&c->remote, from))
      return nexar__quic(c);
  }
  return NULL;
}

void nexar__qrpc_conn_ready(nexar__quic_t *r) {
  nexar__link_t *l = &r->l;
  nexar__ep_t *ep = l->ep;
  if (!l->is_server) {
    NEXAR__INFO(NEXAR__SUB_NET, "rank %d: RPC connection to rank %d at %s up",
                ep->local_rank, l->peer, l->remote_str);
    if (r->parent) r->parent->l.want_write = true;
    return;
  }
  nexar__quic_t *q = l->peer >= 0 ? link_for(ep, l->peer, &l->remote) : NULL;
  if (!q) {
    NEXAR__WARN(NEXAR__SUB_NET,
                "rank %d: refused an RPC connection from rank %d at %s: no "
                "link from it to bind it to",
                ep->local_rank, l->peer, l->remote_str);
    nexar__link_close(l, NEXAR__CLOSE_PROTO, "no link to bind to");
    nexar__link_fail(l, NEXAR_ERR_PROTO, "no link to bind to");
    return;
  }
  nexar__quic_ep_t *x = ep->quic;
  for (int i = 0; i < x->npending; i++)
    if (x->pending[i] == r) pending_drop(x, i);
  r->parent = q;
  q->rpc = r;
  x->nrpc++;
  q->l.want_write = true;
  NEXAR__INFO(NEXAR__SUB_NET, "rank %d: RPC connection from rank %d at %s up",
              ep->local_rank, l->peer, l->remote_str);
}

void nexar__qrpc_settle(nexar__quic_t *q, bool settled) {
  nexar__quic_t *r = q->rpc;
  if (!r) return;
  nexar__link_t *c = &q->l, *l = &r->l;
  if (l->want_write) c->want_write = true;
  if (l->close_req && !l->close_sent) {
    l->close_sent = true;
    nexar__quic_send_close_rpc(r);
  }
  if (l->state != NEXAR__CS_DEAD || c->state == NEXAR__CS_DEAD) return;
  if (l->peer_closed) {
    if (!settled) return;
    c->close_code = l->close_code;
    c->peer_closed = true;
    nexar__link_fail(c, l->err, l->close_reason);
    return;
  }
  char why[sizeof(c->close_reason)];
  snprintf(why, sizeof(why), "RPC connection: %s", l->close_reason);
  if (l->close_req) nexar__link_close(c, l->tx_code, l->tx_reason);
  nexar__link_fail(c, l->err, why);
}

/* The RPC connection (bound or accepted) that |vc| names, or NULL. */
static nexar__quic_t *find_rpc(nexar__ep_t *ep, const ngtcp2_version_cid *vc) {
  if (vc->dcidlen < 8) return NULL;
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *c = ep->conns[i];
    nexar__quic_t *r = c->tp == &nexar__tp_quic ? nexar__quic(c)->rpc : NULL;
    if (r && !memcmp(vc->dcid, r->cid_prefix, 8)) return r;
  }
  nexar__quic_ep_t *x = ep->quic;
  for (int i = 0; i < x->npending; i++)
    if (!memcmp(vc->dcid, x->pending[i]->cid_prefix, 8)) return x->pending[i];
  return NULL;
}

static void rpc_datagram(nexar__ep_t *ep, const uint8_t *data, size_t len,
                         const struct sockaddr_storage *from,
                         socklen_t fromlen) {
  ngtcp2_version_cid vc;
  if (ngtcp2_pkt_decode_version_cid(&vc, data, len, NEXAR__QUIC_SCID_LEN) != 0)
    return;
  nexar__quic_ep_t *x = ep->quic;
  nexar__quic_t *r = find_rpc(ep, &vc);
  if (!r) {
    ngtcp2_pkt_hd hd;
    if (ngtcp2_accept(&hd, data, len) != 0) return;
    /* A repeated Initial before this side's connection id was learnt. */
    for (int i = 0; i < x->npending && !r; i++)
      if (nexar__addr_equal(&x->pending[i]->l.remote, from) &&
          x->pending[i]->l.state == NEXAR__CS_HANDSHAKE)
        r = x->pending[i];
    /* A new one: only from the address of a link that could take it. */
    if (!r) {
      if (!ep->accept_mesh || x->npending >= NEXAR__RPC_PENDING ||
          !link_for(ep, -1, from))
        return;
      r = nexar__quic_new(ep, NEXAR__ROLE_MESH, true, from, fromlen, &hd, true);
      if (!r) return;
      x->pending[x->npending++] = r;
    }
  }
  if (r->l.remote_len != fromlen || memcmp(&r->l.remote, from, fromlen) != 0)
    return; /* connection migration is off: from another address */
  nexar__quic_read(r, data, len);
}

void nexar__qrpc_input(nexar__ep_t *ep) {
  nexar__quic_ep_t *x = ep->quic;
  if (!x || x->fd < 0) return;
  uint64_t now = nexar__now();
  if (!x->nrpc && !x->npending && !ep->resuming && now < x->read_at) return;
  x->read_at = now + 1000000ull;
  nexar__udp_recv_fd(ep, x->fd, x->rxbuf, NEXAR__RPC_RX_BATCH, ep->slice,
                     rpc_datagram);
  /* Accepted connections not bound yet have no link for the engine to
   * run: their timers, writes and ends are run here. */
  now = nexar__now();
  for (int i = 0; i < x->npending;) {
    nexar__quic_t *p = x->pending[i];
    nexar__link_t *l = &p->l;
    if (l->state != NEXAR__CS_DEAD && nexar__quic_conn_expiry(p) <= now)
      nexar__quic_expire(l, now);
    if (l->state != NEXAR__CS_DEAD && l->want_write)
      nexar__quic_flush_conn(p, l);
    if (l->close_req && !l->close_sent) {
      l->close_sent = true;
      nexar__quic_send_close_rpc(p);
    }
    if (l->state == NEXAR__CS_DEAD) {
      pending_drop(x, i);
      nexar__quic_conn_free(p);
      continue;
    }
    i++;
  }
}

void nexar__qrpc_between(nexar__ep_t *ep) {
  if (ep->quic->nrpc && nexar__ep_rpc_recent(ep, ep->pass_now))
    nexar__qrpc_input(ep);
}

void nexar__qrpc_fini(nexar__ep_t *ep) {
  nexar__quic_ep_t *x = ep->quic;
  if (!x) return;
  for (int i = 0; i < x->npending; i++) nexar__quic_conn_free(x->pending[i]);
  if (x->fd >= 0) close(x->fd);
  free(x->txbuf);
  free(x->rxbuf);
  free(x);
  ep->quic = NULL;
}

int nexar__quic_rpc_cut(nexar__link_t *l) {
  if (!l || l->tp != &nexar__tp_quic || !nexar__qrpc_up(nexar__quic(l)))
    return NEXAR_ERR_UNSUPPORTED;
  nexar__link_t *r = &nexar__quic(l)->rpc->l;
  nexar__link_close(r, NEXAR__CLOSE_PROTO, "test: RPC connection cut");
  nexar__link_fail(r, NEXAR_ERR_PROTO, "test: RPC connection cut");
  nexar__qrpc_settle(nexar__quic(l), true);
  return 0;
}
