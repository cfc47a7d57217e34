/*
 * QUIC connections over the endpoint's single UDP socket (ngtcp2 0.12 with
 * GnuTLS). Runs only on the progress thread.
 *
 * Routing: every SCID we issue starts with the connection's random 8-byte
 * prefix, so a short-header packet finds its connection by prefix; a
 * client's Initials before it learns our SCID are matched by their original
 * DCID.
 *
 * Sending (quic_tx.c): each message is one local stream, the control lane
 * written first, then RPC, then data, packets batched for UDP GSO. A mesh
 * link's RPC lane moves to a second connection on a socket of its own once
 * the link carries calls (quic_rpc.c).
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

#define Q(l) nexar__quic(l)

#define SCID_LEN NEXAR__QUIC_SCID_LEN
#define IDLE_READ_NS 1000000ull /* 1 ms */

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref) {
  nexar__link_t *c = ref->user_data;
  return Q(c)->qc;
}

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx) {
  gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

static int new_cid_cb(ngtcp2_conn *qc, ngtcp2_cid *cid, uint8_t *token,
                      size_t cidlen, void *ud) {
  nexar__link_t *c = ud;
  uint8_t buf[NGTCP2_MAX_CIDLEN];
  if (cidlen < 8 || cidlen > sizeof(buf)) return NGTCP2_ERR_CALLBACK_FAILURE;
  memcpy(buf, Q(c)->cid_prefix, 8);
  gnutls_rnd(GNUTLS_RND_NONCE, buf + 8, cidlen - 8);
  ngtcp2_cid_init(cid, buf, cidlen);
  gnutls_rnd(GNUTLS_RND_NONCE, token, NGTCP2_STATELESS_RESET_TOKENLEN);
  return 0;
}

/* The link that the upper layers know |c| by: its parent's for an RPC
 * connection. */
static nexar__link_t *up(nexar__link_t *c) {
  return Q(c)->parent ? &Q(c)->parent->l : c;
}

/* Confirmed (a client at HANDSHAKE_DONE; a server at completion, below,
 * where ngtcp2 calls no confirmation callback): no more Initial packets,
 * so packets may take the path's whole size (quic_tx.c). */
static int handshake_confirmed_cb(ngtcp2_conn *qc, void *ud) {
  Q((nexar__link_t *)ud)->confirmed = true;
  return 0;
}

static int handshake_completed_cb(ngtcp2_conn *qc, void *ud) {
  nexar__link_t *c = ud;
  c->state = NEXAR__CS_READY;
  if (c->is_server) Q(c)->confirmed = true;
  c->want_write = true;
  if (Q(c)->is_rpc) {
    nexar__qrpc_conn_ready(Q(c));
    return 0;
  }
  NEXAR__INFO(NEXAR__SUB_NET, "QUIC handshake with %s (rank %d) done",
              c->remote_str, c->peer);
  if (c->ep->ops->on_ready) c->ep->ops->on_ready(c);
  if (c->role == NEXAR__ROLE_MESH && c->state == NEXAR__CS_READY)
    nexar__qrpc_link_ready(Q(c));
  return 0;
}

static int recv_stream_data_cb(ngtcp2_conn *qc, uint32_t flags, int64_t sid,
                               uint64_t offset, const uint8_t *data, size_t len,
                               void *ud, void *sud) {
  nexar__link_t *c = ud;
  bool fin = (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0;
  if (c->role != NEXAR__ROLE_MESH) { /* seed and observer frames */
    if (len && c->ep->ops->on_seed_data) c->ep->ops->on_seed_data(c, data, len);
    /* Seed frames are bounded by the reassembly buffer: grant at once. */
    ngtcp2_conn_extend_max_stream_offset(qc, sid, len);
  } else if ((sid & 2) && !Q(c)->is_rpc) {
    /* The only unidirectional stream of a mesh link: the RPC note. */
    if (((sid & 1) != 0) != c->is_server)
      nexar__qrpc_note_data(Q(c), sid, offset, data, len, fin);
  } else if (Q(c)->parent || !Q(c)->is_rpc) {
    if (!sud && !(sid & 2) && ((sid & 1) != 0) != c->is_server)
      ngtcp2_conn_shutdown_stream_write(qc, sid, 0); /* one-way use */
    int64_t usid = Q(c)->is_rpc ? sid | NEXAR__RPC_SID : sid;
    c->ep->ops->on_stream_data(up(c), usid, sud, data, len, fin);
  }
  /* Connection-level credit is returned at once: what bounds memory is
   * the per-stream window, extended only for matched messages. */
  ngtcp2_conn_extend_max_offset(qc, len);
  return c->state == NEXAR__CS_DEAD ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int acked_cb(ngtcp2_conn *qc, int64_t sid, uint64_t offset, uint64_t len,
                    void *ud, void *sud) {
  nexar__link_t *c = ud;
  if (sud) c->ep->ops->on_acked(up(c), sud, len);
  return 0;
}

static int stream_close_cb(ngtcp2_conn *qc, uint32_t flags, int64_t sid,
                           uint64_t app_error, void *ud, void *sud) {
  nexar__link_t *c = ud;
  bool local = ((sid & 1) != 0) == c->is_server;
  if (!sud) return 0;
  if (local) {
    nexar__link_unqueue(up(c), sud);
    c->ep->ops->on_out_closed(up(c), sud);
  } else if (c->role == NEXAR__ROLE_MESH) {
    c->ep->ops->on_stream_close(up(c), sud);
  }
  return 0;
}

static int extend_stream_cb(ngtcp2_conn *qc, int64_t sid, uint64_t max,
                            void *ud, void *sud) {
  nexar__omsg_t *m = sud;
  if (m) m->blocked = false;
  ((nexar__link_t *)ud)->want_write = true;
  up(ud)->want_write = true;
  return 0;
}

static int extend_streams_cb(ngtcp2_conn *qc, uint64_t max, void *ud) {
  ((nexar__link_t *)ud)->want_write = true;
  up(ud)->want_write = true;
  return 0;
}

static void fill_callbacks(ngtcp2_callbacks *cb, bool server) {
  memset(cb, 0, sizeof(*cb));
  if (server) {
    cb->recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
  } else {
    cb->client_initial = ngtcp2_crypto_client_initial_cb;
    cb->recv_retry = ngtcp2_crypto_recv_retry_cb;
  }
  cb->recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  cb->encrypt = ngtcp2_crypto_encrypt_cb;
  cb->decrypt = ngtcp2_crypto_decrypt_cb;
  cb->hp_mask = ngtcp2_crypto_hp_mask_cb;
  cb->rand = rand_cb;
  cb->get_new_connection_id = new_cid_cb;
  cb->update_key = ngtcp2_crypto_update_key_cb;
  cb->delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  cb->delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  cb->handshake_completed = handshake_completed_cb;
  cb->handshake_confirmed = handshake_confirmed_cb;
  cb->recv_stream_data = recv_stream_data_cb;
  cb->acked_stream_data_offset = acked_cb;
  cb->stream_close = stream_close_cb;
  cb->extend_max_stream_data = extend_stream_cb;
  cb->extend_max_local_streams_uni = extend_streams_cb;
  cb->extend_max_local_streams_bidi = extend_streams_cb;
}

static bool is_loopback(const struct sockaddr_storage *ss) {
  if (ss->ss_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) ==
           127;
  if (ss->ss_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
  return false;
}

static void quic_log(void *ud, const char *fmt, ...) {
  (void)ud;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static void fill_settings(nexar__link_t *c, ngtcp2_settings *st,
                          ngtcp2_transport_params *tp) {
  const nexar__params_t *p = c->ep->prm;
  int64_t eager = p ? p->eager_bytes : 131072;
  int64_t streams = p ? p->max_streams : 128;
  int64_t idle = p ? p->idle_timeout_ms : 60000;
  ngtcp2_settings_default(st);
  st->initial_ts = nexar__now();
  st->cc_algo = NGTCP2_CC_ALGO_BBR2;
  st->initial_rtt = 10 * NGTCP2_MILLISECONDS;
  st->max_window = 64u << 20;
  /* No stream-window auto-tuning: a stream's window grows only as the
   * application extends it (the whole rest of a matched message at once;
   * a relayed frame as the next hop acknowledges, which bounds what a relay
   * holds to its ring, relay.c). */
  st->max_stream_window = 0;
  /* A handshake ends with the bootstrap's deadline, not before: on a
   * crowded host one may wait long for its turn on a CPU. */
  int64_t hs_ms = p ? p->bootstrap_timeout_ms : 30000;
  st->handshake_timeout = (uint64_t)hs_ms * NGTCP2_MILLISECONDS;
  /* Large packets on loopback (64 KB: +87 % measured); until the handshake
   * is confirmed quic_tx.c's packet_max keeps them, the padded Initial
   * above all, at NEXAR__QUIC_PATH_PAYLOAD. */
  int64_t payload = p && p->udp_payload ? p->udp_payload : 0;
  if (!payload)
    payload = is_loopback(&c->remote) ? 65000 : NEXAR__QUIC_PATH_PAYLOAD;
  st->max_tx_udp_payload_size = (size_t)payload;
  if (payload > NEXAR__QUIC_PATH_PAYLOAD)
    st->no_tx_udp_payload_size_shaping = 1;
  if (getenv("NEXAR_QUIC_LOG")) st->log_printf = quic_log;
  ngtcp2_transport_params_default(tp);
  tp->initial_max_data = 64u << 20;
  tp->initial_max_stream_data_bidi_local = 0; /* we never read those */
  tp->initial_max_stream_data_bidi_remote =
      c->role != NEXAR__ROLE_MESH ? 0 : (uint64_t)(eager + NEXAR__HDR_BYTES);
  /* The per-stream window is the eager limit: an unmatched message can
   * push at most this much (plus its header) before a receive is posted. */
  tp->initial_max_stream_data_uni = c->role != NEXAR__ROLE_MESH
                                        ? (NEXAR__SEED_MAX_BODY + 64)
                                        : (uint64_t)(eager + NEXAR__HDR_BYTES);
  tp->initial_max_streams_bidi =
      c->role != NEXAR__ROLE_MESH ? 0 : (uint64_t)streams;
  tp->initial_max_streams_uni =
      c->role != NEXAR__ROLE_MESH ? 4 : (uint64_t)streams;
  tp->max_idle_timeout = (uint64_t)idle * NGTCP2_MILLISECONDS;
  tp->active_connection_id_limit = 2;
  tp->disable_active_migration = 1;
  /* What a caller that got its reply may leave unwritten (engine.c). */
  tp->max_ack_delay = NEXAR__WRITE_DEFER_NS;
}

/* The heartbeat: a connection that has received nothing for a heartbeat
 * interval sends a QUIC PING, which the peer acknowledges; so a live peer is
 * heard from at least once per interval, on no stream and behind no queue
 * (failure.c judges by what is received). */
static void set_keepalive(nexar__link_t *c) {
  if (!c->ep->prm) return;
  int64_t ms = c->ep->prm->heartbeat_ms;
  if (ms > 0)
    ngtcp2_conn_set_keep_alive_timeout(Q(c)->qc,
                                       (uint64_t)ms * NGTCP2_MILLISECONDS);
}

static nexar__link_t *conn_alloc(nexar__ep_t *ep, int role, bool server,
                                 const struct sockaddr_storage *remote,
                                 socklen_t rlen) {
  nexar__quic_t *q = calloc(1, sizeof(*q));
  if (!q) return NULL;
  nexar__link_init(&q->l, ep, &nexar__tp_quic, role, server, remote, rlen);
  q->seed_tx_sid = -1;
  q->note_sid = -1;
  gnutls_rnd(GNUTLS_RND_NONCE, q->cid_prefix, sizeof(q->cid_prefix));
  q->ref.get_conn = get_conn;
  q->ref.user_data = &q->l;
  return &q->l;
}

static ngtcp2_path make_path(nexar__link_t *c) {
  ngtcp2_path path;
  bool rpc = Q(c)->is_rpc;
  path.local.addr =
      (ngtcp2_sockaddr *)(rpc ? &c->ep->quic->local : &c->ep->local);
  path.local.addrlen = rpc ? c->ep->quic->local_len : c->ep->local_len;
  path.remote.addr = (ngtcp2_sockaddr *)&c->remote;
  path.remote.addrlen = c->remote_len;
  path.user_data = NULL;
  return path;
}

static const char *alpn_of(int role, bool rpc) {
  return rpc                           ? NEXAR__ALPN_RPC
         : role == NEXAR__ROLE_SEED    ? NEXAR__ALPN_SEED
         : role == NEXAR__ROLE_OBSERVE ? NEXAR__ALPN_OBSERVE
                                       : NEXAR__ALPN_MESH;
}

nexar__quic_t *nexar__quic_new(nexar__ep_t *ep, int role, bool server,
                               const struct sockaddr_storage *to,
                               socklen_t tolen, const ngtcp2_pkt_hd *hd,
                               bool rpc) {
  nexar__link_t *c = conn_alloc(ep, role, server, to, tolen);
  if (!c) return NULL;
  Q(c)->is_rpc = rpc;
  uint8_t d[SCID_LEN], s[SCID_LEN];
  gnutls_rnd(GNUTLS_RND_NONCE, d, sizeof(d));
  memcpy(s, Q(c)->cid_prefix, 8);
  gnutls_rnd(GNUTLS_RND_NONCE, s + 8, sizeof(s) - 8);
  ngtcp2_cid dcid, scid;
  ngtcp2_cid_init(&dcid, d, sizeof(d));
  ngtcp2_cid_init(&scid, s, sizeof(s));
  ngtcp2_callbacks cb;
  ngtcp2_settings st;
  ngtcp2_transport_params tp;
  fill_callbacks(&cb, server);
  fill_settings(c, &st, &tp);
  ngtcp2_path path = make_path(c);
  int rv;
  if (server) {
    tp.original_dcid = hd->dcid;
    tp.stateless_reset_token_present = 1;
    gnutls_rnd(GNUTLS_RND_NONCE, tp.stateless_reset_token,
               sizeof(tp.stateless_reset_token));
    rv = ngtcp2_conn_server_new(&Q(c)->qc, &hd->scid, &scid, &path, hd->version,
                                &cb, &st, &tp, NULL, c);
  } else {
    rv = ngtcp2_conn_client_new(&Q(c)->qc, &dcid, &scid, &path,
                                NGTCP2_PROTO_VER_V1, &cb, &st, &tp, NULL, c);
  }
  if (rv != 0 || nexar__tls_session(Q(c), alpn_of(role, rpc)) < 0) {
    nexar__quic_conn_free(Q(c));
    return NULL;
  }
  ngtcp2_conn_set_tls_native_handle(Q(c)->qc, Q(c)->tls);
  set_keepalive(c);
  if (server) {
    /* A client that never finishes its handshake is dropped (no ngtcp2
     * timer covers a silent server-side connection for long), at the
     * bootstrap's deadline: on a crowded host (hundreds of ranks forming
     * their meshes) this side may not run for seconds, and a client that
     * has finished its half would be left with a link that leads
     * nowhere. */
    int64_t hs_ms = ep->prm ? ep->prm->bootstrap_timeout_ms : 10000;
    Q(c)->handshake_deadline = nexar__now() + (uint64_t)hs_ms * 1000000ull;
  }
  c->want_write = true;
  return Q(c);
}

void nexar__quic_conn_free(nexar__quic_t *q) {
  if (q->qc) ngtcp2_conn_del(q->qc);
  if (q->tls) gnutls_deinit(q->tls);
  free(q);
}

static int quic_dial(nexar__ep_t *ep, const nexar__dial_t *dl,
                     nexar__link_t **out) {
  nexar__quic_t *q =
      nexar__quic_new(ep, dl->role, false, dl->to, dl->tolen, NULL, false);
  if (!q) return NEXAR_ERR_NOMEM;
  nexar__link_t *c = &q->l;
  c->peer = dl->peer;
  if (dl->pin) {
    q->pin_set = true;
    memcpy(q->pin, dl->pin, NEXAR__FP_BYTES);
  }
  int rc = nexar__ep_add_conn(ep, c);
  if (rc < 0) {
    nexar__link_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

static nexar__link_t *find_conn(nexar__ep_t *ep, const ngtcp2_version_cid *vc) {
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *c = ep->conns[i];
    if (vc->dcidlen >= 8 && memcmp(vc->dcid, Q(c)->cid_prefix, 8) == 0)
      return c;
  }
  return NULL;
}

static nexar__link_t *find_odcid(nexar__ep_t *ep, const ngtcp2_pkt_hd *hd,
                                 const struct sockaddr_storage *from,
                                 socklen_t fromlen) {
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *c = ep->conns[i];
    if (c->is_server && c->remote_len == fromlen &&
        memcmp(&c->remote, from, fromlen) == 0 &&
        Q(c)->handshake_deadline != 0 && c->state == NEXAR__CS_HANDSHAKE)
      return c;
  }
  return NULL;
}

static nexar__link_t *accept_conn(nexar__ep_t *ep, const ngtcp2_pkt_hd *hd,
                                  const struct sockaddr_storage *from,
                                  socklen_t fromlen) {
  int role = ep->server_alpn_seed ? NEXAR__ROLE_SEED : NEXAR__ROLE_MESH;
  nexar__quic_t *q = nexar__quic_new(ep, role, true, from, fromlen, hd, false);
  if (!q) return NULL;
  if (nexar__ep_add_conn(ep, &q->l) < 0) {
    nexar__link_free(&q->l);
    return NULL;
  }
  return &q->l;
}

static void on_read_error(nexar__link_t *c, int rv) {
  if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_CLOSING) {
    ngtcp2_connection_close_error cev;
    ngtcp2_conn_get_connection_close_error(Q(c)->qc, &cev);
    const ngtcp2_connection_close_error *ce = &cev;
    c->close_code = (int)ce->error_code;
    c->peer_closed = true;
    size_t rl = ce->reasonlen < sizeof(c->close_reason) - 1
                    ? ce->reasonlen
                    : sizeof(c->close_reason) - 1;
    for (size_t i = 0; i < rl; i++) {
      char ch = (char)ce->reason[i];
      c->close_reason[i] = (ch >= 32 && ch < 127) ? ch : '?';
    }
    c->close_reason[rl] = 0;
    nexar__link_fail(c, NEXAR_ERR_PEER_FAILED,
                     c->close_reason[0] ? c->close_reason : "peer closed");
    return;
  }
  const char *why = ngtcp2_strerror(rv);
  int err = NEXAR_ERR_TRANSPORT;
  if (rv == NGTCP2_ERR_CRYPTO || rv == NGTCP2_ERR_CALLBACK_FAILURE) {
    err = c->state == NEXAR__CS_HANDSHAKE ? NEXAR_ERR_AUTH : err;
    why = c->state == NEXAR__CS_HANDSHAKE
              ? "TLS handshake failed (certificate not accepted)"
              : why;
  }
  nexar__link_close(c, NEXAR__CLOSE_PROTO, why);
  nexar__link_fail(c, err, why);
}

void nexar__quic_on_datagram(nexar__ep_t *ep, const uint8_t *data, size_t len,
                             const struct sockaddr_storage *from,
                             socklen_t fromlen) {
  ngtcp2_version_cid vc;
  int rv = ngtcp2_pkt_decode_version_cid(&vc, data, len, SCID_LEN);
  if (rv != 0) return; /* garbage or a version we do not speak: drop */
  nexar__link_t *c = find_conn(ep, &vc);
  if (!c) {
    ngtcp2_pkt_hd hd;
    if (ngtcp2_accept(&hd, data, len) != 0) return;
    c = find_odcid(ep, &hd, from, fromlen);
    if (!c) {
      if (!ep->server_alpn_seed && !ep->accept_mesh) {
        /* Roster not known yet: hold a few Initials and replay them. */
        if (ep->nstash < (int)(sizeof(ep->stash) / sizeof(ep->stash[0]))) {
          uint8_t *copy = malloc(len);
          if (!copy) return;
          memcpy(copy, data, len);
          ep->stash[ep->nstash].data = copy;
          ep->stash[ep->nstash].len = len;
          memcpy(&ep->stash[ep->nstash].from, from, fromlen);
          ep->stash[ep->nstash].fromlen = fromlen;
          ep->nstash++;
        }
        return;
      }
      c = accept_conn(ep, &hd, from, fromlen);
      if (!c) return;
    }
  }
  if (c->remote_len != fromlen || memcmp(&c->remote, from, fromlen) != 0)
    return; /* connection migration is off: from another address */
  nexar__quic_read(Q(c), data, len);
}

/* How long the ACK of a small packet may wait for the next packet to its
 * sender: half the ACK delay we advertise (NEXAR__WRITE_DEFER_NS), so that
 * a late pass still acknowledges within it. */
#define ACK_WAIT_NS (NEXAR__WRITE_DEFER_NS / 2)
/* Datagrams at most this long are small: a reply, a collective's step, a
 * heartbeat, an ACK; a bulk transfer's packets are larger. */
#define ACK_WAIT_MAX_BYTES 1024
/* At most this many small packets wait unacknowledged: a peer that sends
 * a stream of them gets an ACK at least every ACK_WAIT_MAX_PKTS. */
#define ACK_WAIT_MAX_PKTS 4

/* Whether what ngtcp2 has to write after reading the |len|-byte datagram
 * of |q| (its ACK, and the RESET_STREAM that shuts a delivered message's
 * unused direction) may wait for the next packet to that peer, up to
 * ACK_WAIT_NS. A rank that answers, or sends its next step to the same
 * peer, within that time carries them in that packet; one that turns to
 * another peer (a collective's next round) costs no datagram for them,
 * where the next flush of the link wrote them at once and ngtcp2 (which
 * leaves an ACK out of a packet written within an eighth of the RTT of
 * what it acknowledges) then sent the ACK alone. Not when this side has
 * data to write to that peer (the ACK's freed window lets it go on), nor
 * for large datagrams (a bulk sender waits for the ACKs of its few packets
 * in flight), nor past ACK_WAIT_MAX_PKTS, nor for RPC connections, seed
 * links or handshakes. What the upper layers ask for while reading (a
 * stream's credit, MAX_STREAMS) sets want_write itself and goes out at
 * once. */
static bool ack_may_wait(nexar__quic_t *q, size_t len) {
  nexar__link_t *c = &q->l;
  return len <= ACK_WAIT_MAX_BYTES && q->ack_waiting < ACK_WAIT_MAX_PKTS &&
         !q->is_rpc && c->role == NEXAR__ROLE_MESH &&
         c->state == NEXAR__CS_READY && !nexar__link_tx_pending(c);
}

void nexar__quic_read(nexar__quic_t *q, const uint8_t *data, size_t len) {
  nexar__link_t *c = &q->l;
  if (c->state == NEXAR__CS_DEAD || up(c)->state == NEXAR__CS_DEAD) return;
  ngtcp2_path path = make_path(c);
  ngtcp2_pkt_info pi = {0};
  uint64_t now = nexar__now();
  int rv = ngtcp2_conn_read_pkt(q->qc, &path, &pi, data, len, now);
  if (rv != 0) {
    on_read_error(c, rv);
    return;
  }
  /* The failure detector judges by what is received. */
  c->last_rx = up(c)->last_rx = now;
  if (ack_may_wait(q, len)) {
    q->ack_waiting++;
    if (!q->ack_by) q->ack_by = now + ACK_WAIT_NS; /* the first's time */
    return;
  }
  q->ack_waiting = 0;
  q->ack_by = 0;
  c->want_write = up(c)->want_write = true;
}

uint64_t nexar__quic_conn_expiry(nexar__quic_t *q) {
  nexar__link_t *c = &q->l;
  if (!q->qc || c->state == NEXAR__CS_DEAD) return UINT64_MAX;
  uint64_t e = ngtcp2_conn_get_expiry(q->qc);
  /* A waiting ACK holds back ngtcp2's timers (its ACK delay above all:
   * a packet written meanwhile carries the ACK once ngtcp2 finds it due)
   * until its own time, while nothing waits to be written; the timers are
   * then at most ACK_WAIT_NS late. */
  if (q->ack_by && e < q->ack_by && !nexar__link_tx_pending(c)) e = q->ack_by;
  if (c->state == NEXAR__CS_HANDSHAKE && q->handshake_deadline &&
      q->handshake_deadline < e)
    e = q->handshake_deadline;
  return e;
}

/* A link's timers: its first connection's and its RPC connection's. */
static uint64_t quic_expiry(nexar__link_t *c) {
  uint64_t e = nexar__quic_conn_expiry(Q(c));
  if (Q(c)->rpc && c->state != NEXAR__CS_DEAD) {
    uint64_t r = nexar__quic_conn_expiry(Q(c)->rpc);
    if (r < e) e = r;
  }
  return e;
}

static void quic_on_expiry(nexar__link_t *c, uint64_t now) {
  if (nexar__quic_conn_expiry(Q(c)) <= now) nexar__quic_expire(c, now);
  nexar__quic_t *r = Q(c)->rpc;
  if (r && c->state != NEXAR__CS_DEAD) {
    if (nexar__quic_conn_expiry(r) <= now) nexar__quic_expire(&r->l, now);
    nexar__qrpc_settle(Q(c), false);
  }
}

void nexar__quic_expire(nexar__link_t *c, uint64_t now) {
  if (c->state == NEXAR__CS_DEAD) return;
  if (c->state == NEXAR__CS_HANDSHAKE && Q(c)->handshake_deadline &&
      now >= Q(c)->handshake_deadline) {
    nexar__link_fail(c, NEXAR_ERR_TIMEOUT, "QUIC handshake did not finish");
    return;
  }
  if (Q(c)->ack_by <= now) /* ngtcp2's timers again */
    Q(c)->ack_by = Q(c)->ack_waiting = 0;
  int rv = ngtcp2_conn_handle_expiry(Q(c)->qc, now);
  if (rv != 0) {
    const char *why = rv == NGTCP2_ERR_IDLE_CLOSE
                          ? "idle timeout: nothing received from the peer"
                          : ngtcp2_strerror(rv);
    nexar__link_fail(c,
                     rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT ? NEXAR_ERR_TIMEOUT
                                                        : NEXAR_ERR_PEER_FAILED,
                     why);
    return;
  }
  c->want_write = true;
}

static void quic_free(nexar__link_t *c) {
  if (Q(c)->rpc) {
    nexar__quic_conn_free(Q(c)->rpc);
    c->ep->quic->nrpc--;
  }
  Q(c)->rpc = NULL;
  if (Q(c)->qc) ngtcp2_conn_del(Q(c)->qc);
  if (Q(c)->tls) gnutls_deinit(Q(c)->tls);
}

static void quic_extend(nexar__link_t *c, int64_t sid, uint64_t n) {
  nexar__quic_t *q = nexar__sid_conn(Q(c), &sid);
  if (!q || !q->qc) return;
  ngtcp2_conn_extend_max_stream_offset(q->qc, sid, n);
  q->l.want_write = c->want_write = true;
}

static bool quic_alive(const nexar__link_t *c) {
  ngtcp2_conn *qc = nexar__quic((nexar__link_t *)c)->qc;
  return qc && !ngtcp2_conn_is_in_draining_period(qc) &&
         !ngtcp2_conn_is_in_closing_period(qc);
}

static void quic_stop_out(nexar__link_t *c, nexar__omsg_t *m) {
  int64_t sid = m->sid;
  nexar__quic_t *q = nexar__sid_conn(Q(c), &sid);
  if (q && q->qc && sid >= 0) ngtcp2_conn_shutdown_stream(q->qc, sid, 1);
  if (q) q->l.want_write = true;
  /* |c| is a live link (the analyzer takes q == NULL for c == NULL: q is
   * c's own connection or its RPC connection, which may be absent). */
  c->want_write = true;  // NOLINT(clang-analyzer-core.NullDereference)
}

static void quic_forget_out(nexar__link_t *c, nexar__omsg_t *m) {
  int64_t sid = m->sid;
  nexar__quic_t *q = nexar__sid_conn(Q(c), &sid);
  if (q && q->qc && sid >= 0)
    ngtcp2_conn_set_stream_user_data(q->qc, sid, NULL);
}

static void quic_attach_in(nexar__link_t *c, int64_t sid, nexar__imsg_t *m) {
  nexar__quic_t *q = nexar__sid_conn(Q(c), &sid);
  if (q && q->qc) ngtcp2_conn_set_stream_user_data(q->qc, sid, m);
}

/* A delivered message: a stream not closed yet forgets it (a
 * unidirectional one, which ngtcp2 0.12 never reports closed, or a
 * bidirectional one whose message has arrived whole and leaves it early,
 * p2p/detach.c nexar__p2p_detach: its later close finds no message); the
 * stream's credit goes back to the peer a quarter of the window at a
 * time, so the peer keeps at least three quarters of its credit and credit
 * rides on few packets. */
static void quic_done_in(nexar__link_t *c, nexar__imsg_t *m) {
  int64_t sid = m->sid;
  nexar__quic_t *q = nexar__sid_conn(Q(c), &sid);
  if (!q || !q->qc) return;
  bool uni = (sid & 2) != 0;
  if (!m->stream_closed) ngtcp2_conn_set_stream_user_data(q->qc, sid, NULL);
  uint32_t batch = c->ep->prm ? (uint32_t)c->ep->prm->max_streams / 4 : 1;
  if (++q->streams_owed[!uni] >= (batch ? batch : 1)) {
    if (uni)
      ngtcp2_conn_extend_max_streams_uni(q->qc, q->streams_owed[0]);
    else
      ngtcp2_conn_extend_max_streams_bidi(q->qc, q->streams_owed[1]);
    q->streams_owed[!uni] = 0;
    q->l.want_write = c->want_write = true;
  }
}

static int quic_init(nexar__ep_t *ep, const struct sockaddr_storage *bind,
                     socklen_t len) {
  NEXAR__CHECK(nexar__udp_open(ep, bind, len));
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ep->fd};
  if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->fd, &ev) < 0) return NEXAR_ERR_SYS;
  return 0;
}

static void quic_fini(nexar__ep_t *ep) {
  nexar__qrpc_fini(ep);
  for (int i = 0; i < ep->nstash; i++) free(ep->stash[i].data);
  ep->nstash = 0;
  nexar__loss_close(ep);
  if (ep->fd >= 0) close(ep->fd);
  ep->fd = -1;
}

/* Whether a QUIC link is up or coming up: looked up by quic_input and
 * kept in ep->quic_any, which a new link sets at once; polls between
 * passes (quic_ready) read that rather than walk every link. */
static bool quic_links(nexar__ep_t *ep) {
  ep->quic_any = false;
  for (int i = 0; i < ep->nconns && !ep->quic_any; i++)
    ep->quic_any = ep->conns[i]->tp == &nexar__tp_quic &&
                   ep->conns[i]->state != NEXAR__CS_DEAD;
  return ep->quic_any;
}

/* Reads a pass of datagrams, then replays Initials held until the roster
 * was known. With no QUIC link (every peer over shared memory) the socket
 * carries only strangers, ICMP reports and late packets: it is then read
 * at most every IDLE_READ_NS while the engine polls, not on every pass (a
 * system call per message otherwise), and at once after a sleep (quic_arm). */
static bool quic_input(nexar__ep_t *ep) {
  uint64_t now = ep->pass_now;
  if (!ep->resuming && now < ep->udp_read_at && !quic_links(ep)) return false;
  ep->udp_read_at = now + IDLE_READ_NS;
  /* The RPC socket first, and again between the batches of this one: a
   * call's packets never wait behind a pass of data. */
  nexar__qrpc_input(ep);
  nexar__udp_recv_all(ep, nexar__quic_on_datagram,
                      ep->quic ? nexar__qrpc_between : NULL);
  if (ep->accept_mesh && ep->nstash) {
    int n = ep->nstash;
    ep->nstash = 0;
    for (int i = 0; i < n; i++) {
      nexar__quic_on_datagram(ep, ep->stash[i].data, ep->stash[i].len,
                              &ep->stash[i].from, ep->stash[i].fromlen);
      free(ep->stash[i].data);
    }
  }
  /* Links' RPC connections: walked only while some exist. */
  for (int i = 0; ep->quic && ep->quic->nrpc && i < ep->nconns; i++)
    if (ep->conns[i]->tp == &nexar__tp_quic && Q(ep->conns[i])->rpc)
      nexar__qrpc_settle(Q(ep->conns[i]), !ep->rx_more);
  return ep->rx_more;
}

/* Whether a pass may find input: a QUIC link is up or coming up, or the
 * idle socket's next read is due (quic_input). */
static bool quic_ready(nexar__ep_t *ep, uint64_t now) {
  return now >= ep->udp_read_at || ep->quic_any;
}

static bool quic_arm(nexar__ep_t *ep) {
  ep->udp_read_at = 0; /* whatever woke the engine is read first */
  if (ep->quic) ep->quic->read_at = 0;
  return true;
}

/* A batch the socket refused goes out before anything new; while the
 * socket stays full, sleep until EPOLLOUT (or the ENOBUFS retry time)
 * rather than spin on the writes it holds back. */
static bool quic_output(nexar__ep_t *ep, uint64_t *next) {
  if (!ep->tx_blocked) return false;
  int rc = nexar__udp_resume(ep);
  if (rc < 0) nexar__ep_tx_failed(ep, &ep->tx_to, -rc);
  if (!ep->tx_blocked) return false;
  if (ep->tx_retry_at && ep->tx_retry_at < *next) *next = ep->tx_retry_at;
  return true;
}

const nexar__tp_t nexar__tp_quic = {
    .name = "quic",
    .caps = NEXAR__TP_RELIABLE | NEXAR__TP_ENCRYPTED | NEXAR__TP_DONE_FORGETS,
    .max_frame = UINT64_MAX,
    .init = quic_init,
    .fini = quic_fini,
    .input = quic_input,
    .output = quic_output,
    .arm = quic_arm,
    .ready = quic_ready,
    .dial = quic_dial,
    .flush = nexar__quic_flush,
    .expiry = quic_expiry,
    .on_expiry = quic_on_expiry,
    .send_close = nexar__quic_send_close,
    .free = quic_free,
    .alive = quic_alive,
    .exporter = nexar__tls_exporter,
    .stop_out = quic_stop_out,
    .forget_out = quic_forget_out,
    .attach_in = quic_attach_in,
    .done_in = quic_done_in,
    .extend = quic_extend,
};
