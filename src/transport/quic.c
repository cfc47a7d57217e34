/*
 * QUIC connections over the endpoint's single UDP socket (ngtcp2 0.12 with
 * GnuTLS). Runs only on the progress thread.
 *
 * Routing: every SCID we issue starts with the connection's random 8-byte
 * prefix, so a short-header packet finds its connection by prefix; a
 * client's Initials before it learns our SCID are matched by their original
 * DCID.
 *
 * Sending: each message is one local stream; a connection writes its
 * control lane first, then its RPC lane, then its data lane, and packets
 * are batched for UDP GSO (pitfall list in
 * ../shared/reference/quic-ngtcp2.md, section 6).
 */
#include <errno.h>
#include <stdarg.h>
#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nexar_int.h"

#define SCID_LEN 16
#define GSO_MAX_BYTES 65000
#define GSO_MAX_SEGS 64

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref) {
  nexar__conn_t *c = ref->user_data;
  return c->qc;
}

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx) {
  gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

static int new_cid_cb(ngtcp2_conn *qc, ngtcp2_cid *cid, uint8_t *token,
                      size_t cidlen, void *ud) {
  nexar__conn_t *c = ud;
  uint8_t buf[NGTCP2_MAX_CIDLEN];
  if (cidlen < 8 || cidlen > sizeof(buf)) return NGTCP2_ERR_CALLBACK_FAILURE;
  memcpy(buf, c->cid_prefix, 8);
  gnutls_rnd(GNUTLS_RND_NONCE, buf + 8, cidlen - 8);
  ngtcp2_cid_init(cid, buf, cidlen);
  gnutls_rnd(GNUTLS_RND_NONCE, token, NGTCP2_STATELESS_RESET_TOKENLEN);
  return 0;
}

static int handshake_completed_cb(ngtcp2_conn *qc, void *ud) {
  nexar__conn_t *c = ud;
  c->state = NEXAR__CS_READY;
  NEXAR__INFO(NEXAR__SUB_NET, "QUIC handshake with %s (rank %d) done",
              c->remote_str, c->peer);
  if (c->ep->ops->on_ready) c->ep->ops->on_ready(c);
  c->want_write = true;
  return 0;
}

static int recv_stream_data_cb(ngtcp2_conn *qc, uint32_t flags, int64_t sid,
                               uint64_t offset, const uint8_t *data, size_t len,
                               void *ud, void *sud) {
  nexar__conn_t *c = ud;
  bool fin = (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0;
  if (c->role == NEXAR__ROLE_SEED) {
    if (len && c->ep->ops->on_seed_data) c->ep->ops->on_seed_data(c, data, len);
    /* Seed frames are bounded by the reassembly buffer: grant at once. */
    ngtcp2_conn_extend_max_stream_offset(qc, sid, len);
  } else {
    if (!sud && !(sid & 2) && ((sid & 1) != 0) != c->is_server)
      ngtcp2_conn_shutdown_stream_write(qc, sid, 0); /* one-way use */
    nexar__p2p_on_stream_data(c, sid, sud, data, len, fin);
  }
  /* Connection-level credit is returned at once: what bounds memory is
   * the per-stream window, extended only for matched messages. */
  ngtcp2_conn_extend_max_offset(qc, len);
  return c->state == NEXAR__CS_DEAD ? NGTCP2_ERR_CALLBACK_FAILURE : 0;
}

static int acked_cb(ngtcp2_conn *qc, int64_t sid, uint64_t offset, uint64_t len,
                    void *ud, void *sud) {
  nexar__omsg_t *m = sud;
  if (!m) return 0;
  m->acked += len;
  if (m->fwd) nexar__relay_acked(m);
  if (m->acked >= (m->ending ? m->end_at : nexar__omsg_total(m)))
    nexar__omsg_acked(ud, m);
  return 0;
}

void nexar__conn_unqueue(nexar__conn_t *c, nexar__omsg_t *m) {
  nexar__omsg_t **pp = &c->outq[m->lane], *prev = NULL;
  while (*pp && *pp != m) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (!*pp) return;
  *pp = m->next;
  if (c->outq_tail[m->lane] == m) c->outq_tail[m->lane] = prev;
}

static int stream_close_cb(ngtcp2_conn *qc, uint32_t flags, int64_t sid,
                           uint64_t app_error, void *ud, void *sud) {
  nexar__conn_t *c = ud;
  bool local = ((sid & 1) != 0) == c->is_server;
  if (!sud) return 0;
  if (local) {
    nexar__omsg_t *m = sud;
    nexar__conn_unqueue(c, m);
    if (m->req) nexar__omsg_acked(c, m);
    if (m->owned && c->role == NEXAR__ROLE_MESH && c->eager_bytes >= m->len)
      c->eager_bytes -= m->len;
    nexar__omsg_free(m);
  } else if (c->role == NEXAR__ROLE_MESH) {
    nexar__p2p_on_stream_close(c, sud);
  }
  return 0;
}

static int extend_stream_cb(ngtcp2_conn *qc, int64_t sid, uint64_t max,
                            void *ud, void *sud) {
  nexar__omsg_t *m = sud;
  if (m) m->blocked = false;
  ((nexar__conn_t *)ud)->want_write = true;
  return 0;
}

static int extend_streams_cb(ngtcp2_conn *qc, uint64_t max, void *ud) {
  ((nexar__conn_t *)ud)->want_write = true;
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

static void fill_settings(nexar__conn_t *c, ngtcp2_settings *st,
                          ngtcp2_transport_params *tp) {
  const nexar__params_t *p = c->ep->owner && c->ep->ops == &nexar__worker_ops
                                 ? &((nexar_ctx_t *)c->ep->owner)->prm
                                 : NULL;
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
  st->handshake_timeout = 30 * NGTCP2_SECONDS;
  /* Large packets on loopback (64 KB: +87 % measured); the Initial stays
   * small because shaping is only switched off for loopback paths. */
  int64_t payload = p && p->udp_payload ? p->udp_payload : 0;
  if (!payload) payload = is_loopback(&c->remote) ? 65000 : 1452;
  st->max_tx_udp_payload_size = (size_t)payload;
  if (payload > 1452) st->no_tx_udp_payload_size_shaping = 1;
  if (getenv("NEXAR_QUIC_LOG")) st->log_printf = quic_log;
  ngtcp2_transport_params_default(tp);
  tp->initial_max_data = 64u << 20;
  tp->initial_max_stream_data_bidi_local = 0; /* we never read those */
  tp->initial_max_stream_data_bidi_remote =
      c->role == NEXAR__ROLE_SEED ? 0 : (uint64_t)(eager + NEXAR__HDR_BYTES);
  /* The per-stream window is the eager limit: an unmatched message can
   * push at most this much (plus its header) before a receive is posted. */
  tp->initial_max_stream_data_uni = c->role == NEXAR__ROLE_SEED
                                        ? (NEXAR__SEED_MAX_BODY + 64)
                                        : (uint64_t)(eager + NEXAR__HDR_BYTES);
  tp->initial_max_streams_bidi =
      c->role == NEXAR__ROLE_SEED ? 0 : (uint64_t)streams;
  tp->initial_max_streams_uni =
      c->role == NEXAR__ROLE_SEED ? 4 : (uint64_t)streams;
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
static void set_keepalive(nexar__conn_t *c) {
  if (c->ep->ops != &nexar__worker_ops) return;
  int64_t ms = ((nexar_ctx_t *)c->ep->owner)->prm.heartbeat_ms;
  if (ms > 0)
    ngtcp2_conn_set_keep_alive_timeout(c->qc,
                                       (uint64_t)ms * NGTCP2_MILLISECONDS);
}

static nexar__conn_t *conn_alloc(nexar__ep_t *ep, int role, bool server,
                                 const struct sockaddr_storage *remote,
                                 socklen_t rlen) {
  nexar__conn_t *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->ep = ep;
  c->last_rx = nexar__now();
  c->role = role;
  c->is_server = server;
  c->peer = -1;
  c->seed_tx_sid = -1;
  memcpy(&c->remote, remote, rlen);
  c->remote_len = rlen;
  nexar__addr_str((const struct sockaddr *)remote, c->remote_str,
                  sizeof(c->remote_str));
  gnutls_rnd(GNUTLS_RND_NONCE, c->cid_prefix, sizeof(c->cid_prefix));
  c->ref.get_conn = get_conn;
  c->ref.user_data = c;
  return c;
}

static ngtcp2_path make_path(nexar__conn_t *c) {
  ngtcp2_path path;
  path.local.addr = (ngtcp2_sockaddr *)&c->ep->local;
  path.local.addrlen = c->ep->local_len;
  path.remote.addr = (ngtcp2_sockaddr *)&c->remote;
  path.remote.addrlen = c->remote_len;
  path.user_data = NULL;
  return path;
}

int nexar__conn_dial(nexar__ep_t *ep, const struct sockaddr_storage *to,
                     socklen_t tolen, int role, int peer, const uint8_t *pin,
                     nexar__conn_t **out) {
  nexar__conn_t *c = conn_alloc(ep, role, false, to, tolen);
  if (!c) return NEXAR_ERR_NOMEM;
  c->peer = peer;
  if (pin) {
    c->pin_set = true;
    memcpy(c->pin, pin, NEXAR__FP_BYTES);
  }
  uint8_t d[SCID_LEN], s[SCID_LEN];
  gnutls_rnd(GNUTLS_RND_NONCE, d, sizeof(d));
  memcpy(s, c->cid_prefix, 8);
  gnutls_rnd(GNUTLS_RND_NONCE, s + 8, sizeof(s) - 8);
  ngtcp2_cid dcid, scid;
  ngtcp2_cid_init(&dcid, d, sizeof(d));
  ngtcp2_cid_init(&scid, s, sizeof(s));
  ngtcp2_callbacks cb;
  ngtcp2_settings st;
  ngtcp2_transport_params tp;
  fill_callbacks(&cb, false);
  fill_settings(c, &st, &tp);
  ngtcp2_path path = make_path(c);
  int rc;
  if (ngtcp2_conn_client_new(&c->qc, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1,
                             &cb, &st, &tp, NULL, c) != 0) {
    rc = NEXAR_ERR_NOMEM;
    goto fail;
  }
  NEXAR__CHECK_GOTO(
      nexar__tls_session(
          c, role == NEXAR__ROLE_SEED ? NEXAR__ALPN_SEED : NEXAR__ALPN_MESH),
      rc, fail);
  ngtcp2_conn_set_tls_native_handle(c->qc, c->tls);
  set_keepalive(c);
  NEXAR__CHECK_GOTO(nexar__ep_add_conn(ep, c), rc, fail);
  c->want_write = true;
  *out = c;
  return 0;
fail:
  nexar__conn_free(c);
  return rc;
}

static nexar__conn_t *find_conn(nexar__ep_t *ep, const ngtcp2_version_cid *vc) {
  for (int i = 0; i < ep->nconns; i++) {
    nexar__conn_t *c = ep->conns[i];
    if (vc->dcidlen >= 8 && memcmp(vc->dcid, c->cid_prefix, 8) == 0) return c;
  }
  return NULL;
}

static nexar__conn_t *find_odcid(nexar__ep_t *ep, const ngtcp2_pkt_hd *hd,
                                 const struct sockaddr_storage *from,
                                 socklen_t fromlen) {
  for (int i = 0; i < ep->nconns; i++) {
    nexar__conn_t *c = ep->conns[i];
    if (c->is_server && c->remote_len == fromlen &&
        memcmp(&c->remote, from, fromlen) == 0 && c->handshake_deadline != 0 &&
        c->state == NEXAR__CS_HANDSHAKE)
      return c;
  }
  return NULL;
}

static nexar__conn_t *accept_conn(nexar__ep_t *ep, const ngtcp2_pkt_hd *hd,
                                  const struct sockaddr_storage *from,
                                  socklen_t fromlen) {
  int role = ep->server_alpn_seed ? NEXAR__ROLE_SEED : NEXAR__ROLE_MESH;
  nexar__conn_t *c = conn_alloc(ep, role, true, from, fromlen);
  if (!c) return NULL;
  uint8_t s[SCID_LEN];
  memcpy(s, c->cid_prefix, 8);
  gnutls_rnd(GNUTLS_RND_NONCE, s + 8, sizeof(s) - 8);
  ngtcp2_cid scid;
  ngtcp2_cid_init(&scid, s, sizeof(s));
  ngtcp2_callbacks cb;
  ngtcp2_settings st;
  ngtcp2_transport_params tp;
  fill_callbacks(&cb, true);
  fill_settings(c, &st, &tp);
  tp.original_dcid = hd->dcid;
  tp.stateless_reset_token_present = 1;
  gnutls_rnd(GNUTLS_RND_NONCE, tp.stateless_reset_token,
             sizeof(tp.stateless_reset_token));
  ngtcp2_path path = make_path(c);
  if (ngtcp2_conn_server_new(&c->qc, &hd->scid, &scid, &path, hd->version, &cb,
                             &st, &tp, NULL, c) != 0 ||
      nexar__tls_session(c, role == NEXAR__ROLE_SEED ? NEXAR__ALPN_SEED
                                                     : NEXAR__ALPN_MESH) < 0 ||
      nexar__ep_add_conn(ep, c) < 0) {
    nexar__conn_free(c);
    return NULL;
  }
  ngtcp2_conn_set_tls_native_handle(c->qc, c->tls);
  set_keepalive(c);
  /* A client that never finishes its handshake is dropped (no ngtcp2 timer
   * covers a silent server-side connection for long). */
  c->handshake_deadline = nexar__now() + 10ull * 1000000000ull;
  return c;
}

static void on_read_error(nexar__conn_t *c, int rv) {
  if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_CLOSING) {
    ngtcp2_connection_close_error cev;
    ngtcp2_conn_get_connection_close_error(c->qc, &cev);
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
    nexar__conn_fail(c, NEXAR_ERR_PEER_FAILED,
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
  nexar__conn_close(c, NEXAR__CLOSE_PROTO, why);
  nexar__conn_fail(c, err, why);
}

void nexar__quic_on_datagram(nexar__ep_t *ep, const uint8_t *data, size_t len,
                             const struct sockaddr_storage *from,
                             socklen_t fromlen) {
  ngtcp2_version_cid vc;
  int rv = ngtcp2_pkt_decode_version_cid(&vc, data, len, SCID_LEN);
  if (rv != 0) return; /* garbage or a version we do not speak: drop */
  nexar__conn_t *c = find_conn(ep, &vc);
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
  if (c->state == NEXAR__CS_DEAD) return;
  /* Connection migration is off: drop packets from another address. */
  if (c->remote_len != fromlen || memcmp(&c->remote, from, fromlen) != 0)
    return;
  ngtcp2_path path = make_path(c);
  ngtcp2_pkt_info pi = {0};
  uint64_t now = nexar__now();
  rv = ngtcp2_conn_read_pkt(c->qc, &path, &pi, data, len, now);
  if (rv != 0) {
    on_read_error(c, rv);
    return;
  }
  c->last_rx = now; /* the failure detector judges by what is received */
  c->want_write = true;
}

/* ---- Sending ---- */

/* Whether |m| has bytes to write that flow control does not hold back. */
static bool unsent(const nexar__omsg_t *m) {
  return nexar__omsg_more(m) && !m->blocked;
}

/* Unlinks and frees a queued message that never got a stream. */
static void drop_unopened(nexar__conn_t *c, nexar__omsg_t *m) {
  nexar__conn_unqueue(c, m);
  if (m->owned && c->role == NEXAR__ROLE_MESH && c->eager_bytes >= m->len)
    c->eager_bytes -= m->len;
  nexar__omsg_free(m);
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
static bool may_open(nexar__conn_t *c, int lane) {
  if (lane == NEXAR__LANE_CONTROL || c->role != NEXAR__ROLE_MESH) return true;
  const ngtcp2_transport_params *tp =
      ngtcp2_conn_get_remote_transport_params(c->qc);
  uint64_t quarter = tp ? tp->initial_max_streams_bidi / 4 : 0;
  uint64_t keep = lane == NEXAR__LANE_DATA ? 2 * quarter : quarter;
  return ngtcp2_conn_get_streams_bidi_left(c->qc) > keep;
}

/* The first message with bytes to write, the lanes taken in lane_order;
 * only the first |nlanes| of them may write. */
static nexar__omsg_t *next_sendable(nexar__conn_t *c, int nlanes, int *err) {
  for (int k = 0; k < nlanes; k++) {
    int lane = lane_order[k];
    for (nexar__omsg_t *m = c->outq[lane], *next; m; m = next) {
      next = m->next;
      if (m->sid < 0 && !m->req && !m->fwd && m->sent >= nexar__omsg_total(m)) {
        /* Cancelled before its stream opened: ngtcp2 never saw it. */
        drop_unopened(c, m);
        continue;
      }
      if (!unsent(m)) continue;
      if (m->sid < 0) {
        if (!may_open(c, lane)) break; /* keep FIFO order */
        int rv = c->role == NEXAR__ROLE_MESH
                     ? ngtcp2_conn_open_bidi_stream(c->qc, &m->sid, m)
                     : ngtcp2_conn_open_uni_stream(c->qc, &m->sid, m);
        if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED) break; /* keep FIFO order */
        if (rv != 0) {
          *err = rv;
          return NULL;
        }
      }
      return m;
    }
  }
  return NULL;
}

static void account(nexar__omsg_t *m, ngtcp2_ssize n) {
  if (m && n > 0) m->sent += (uint64_t)n;
}

/* How many lanes of lane_order may write now. Data waits while the
 * connection has more than cap = max(data_inflight, 2 x bandwidth-delay
 * product) bytes in flight: without that bound the congestion window
 * (inflated by batched ACKs) lets several MB of data queue in the
 * receiver's socket, and a control message sent after it waits until the
 * receiver has decrypted all of it, behind data of any peer since all share
 * one socket. The RPC lane has an allowance of its own on top: it waits
 * only above 2 x cap, so a call never waits for data to drain, and a burst
 * of large calls is bounded as data is. Control is never held back. */
static int writable_lanes(nexar__conn_t *c) {
  int64_t floor = c->ep->data_inflight;
  if (floor <= 0 || c->role != NEXAR__ROLE_MESH) return NEXAR__LANE_COUNT;
  ngtcp2_conn_stat cs;
  ngtcp2_conn_get_conn_stat(c->qc, &cs);
  uint64_t cap = (uint64_t)floor;
  if (cs.min_rtt != UINT64_MAX && cs.delivery_rate_sec) {
    /* Rates above 1 TB/s or RTTs above 1 s saturate rather than wrap. */
    uint64_t rate = cs.delivery_rate_sec < (1ull << 40) ? cs.delivery_rate_sec
                                                        : (1ull << 40);
    uint64_t rtt = cs.min_rtt < NGTCP2_SECONDS ? cs.min_rtt : NGTCP2_SECONDS;
    uint64_t bdp2 = 2 * (rate >> 10) * rtt / (NGTCP2_SECONDS >> 10);
    if (bdp2 > cap) cap = bdp2;
  }
  if (cs.bytes_in_flight < cap) return NEXAR__LANE_COUNT;
  return cs.bytes_in_flight < 2 * cap ? NEXAR__LANE_COUNT - 1 : 1;
}

/* Sends the |len| bytes of packets in txbuf. Returns 0; 1 when the socket
 * is full (the batch waits in txbuf, see udp.c); NEXAR_ERR_SYS when the
 * send failed, which QUIC recovers as loss. */
static int send_batch(nexar__conn_t *c, size_t len, size_t pktmax) {
  nexar__ep_t *ep = c->ep;
  int rc =
      nexar__udp_send(ep, &c->remote, c->remote_len, ep->txbuf, len, pktmax);
  if (rc == 1)
    c->want_write = true;
  else if (rc < 0 || c->tx_err_since)
    nexar__conn_tx_result(c, rc < 0 ? -rc : 0);
  return rc < 0 ? 0 : rc; /* a failed send is a loss QUIC recovers */
}

/* Who the peer of |c| is, for log lines. */
static void conn_who(const nexar__conn_t *c, char *out, size_t n) {
  if (c->peer >= 0)
    snprintf(out, n, "rank %d", c->peer);
  else
    snprintf(out, n, "%s",
             c->role != NEXAR__ROLE_SEED ? "a peer"
             : c->ep->server_alpn_seed   ? "a worker"
                                         : "the seed");
}

void nexar__conn_tx_result(nexar__conn_t *c, int err) {
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

void nexar__ep_tx_failed(nexar__ep_t *ep, const struct sockaddr_storage *to,
                         int err) {
  for (int i = 0; i < ep->nconns; i++)
    if (nexar__addr_equal(&ep->conns[i]->remote, to))
      nexar__conn_tx_result(ep->conns[i], err);
}

void nexar__conn_flush(nexar__conn_t *c) {
  if (!c->qc || c->state == NEXAR__CS_DEAD || c->state == NEXAR__CS_CLOSING)
    return;
  nexar__ep_t *ep = c->ep;
  if (ep->tx_blocked) {
    /* txbuf holds a batch the socket refused; come back once it is out. */
    c->want_write = true;
    return;
  }
  uint64_t ts = nexar__now();
  size_t pktmax = ngtcp2_conn_get_max_tx_udp_payload_size(c->qc);
  size_t quantum = ngtcp2_conn_get_send_quantum(c->qc);
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
  c->want_write = false;
  for (int guard = 0; guard < 100000; guard++) {
    int err = 0;
    nexar__omsg_t *m = c->state == NEXAR__CS_READY
                           ? next_sendable(c, writable_lanes(c), &err)
                           : NULL;
    if (err) {
      nexar__conn_fail(c, NEXAR_ERR_TRANSPORT, ngtcp2_strerror(err));
      return;
    }
    ngtcp2_vec vec[4];
    size_t nvec = 0;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
    int64_t sid = -1;
    if (m) {
      bool fin;
      sid = m->sid;
      nvec = nexar__omsg_vecs(m, vec, 4, &fin);
      if (fin) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    }
    ngtcp2_ssize ndata = -1;
    ngtcp2_ssize n =
        ngtcp2_conn_writev_stream(c->qc, &ps.path, &pi, ep->txbuf + off, pktmax,
                                  &ndata, flags, sid, vec, nvec, ts);
    if (n < 0) {
      if (n == NGTCP2_ERR_WRITE_MORE) {
        account(m, ndata);
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
      nexar__conn_fail(c, NEXAR_ERR_TRANSPORT, ngtcp2_strerror((int)n));
      return;
    }
    account(m, ndata);
    if (n == 0) break;
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
      int sr = send_batch(c, at, seg);
      off = nseg = 0;
      if (sr == 1) break;
      memmove(ep->txbuf, ep->txbuf + at, (size_t)n);
      seg = (size_t)n;
    }
    off += (size_t)n;
    nseg++;
    if ((size_t)n < seg || nseg >= batch_max) {
      int sr = send_batch(c, off, seg);
      off = 0;
      nseg = 0;
      if (sr == 1) break;
    }
    if (total >= quantum) {
      /* Let other connections have their turn; come back next loop. */
      c->want_write = true;
      break;
    }
  }
  if (off) send_batch(c, off, seg);
  /* Pace only what stopped at the send quantum: a flush that wrote all
   * there was would otherwise leave a pacing deadline that is already due,
   * and the engine would take it for a timer to serve. */
  if (c->want_write) ngtcp2_conn_update_pkt_tx_time(c->qc, ts);
}

uint64_t nexar__conn_expiry(nexar__conn_t *c) {
  if (!c->qc || c->state == NEXAR__CS_DEAD) return UINT64_MAX;
  uint64_t e = ngtcp2_conn_get_expiry(c->qc);
  if (c->state == NEXAR__CS_HANDSHAKE && c->handshake_deadline &&
      c->handshake_deadline < e)
    e = c->handshake_deadline;
  return e;
}

void nexar__conn_on_expiry(nexar__conn_t *c, uint64_t now) {
  if (c->state == NEXAR__CS_DEAD) return;
  if (c->state == NEXAR__CS_HANDSHAKE && c->handshake_deadline &&
      now >= c->handshake_deadline) {
    nexar__conn_fail(c, NEXAR_ERR_TIMEOUT, "QUIC handshake did not finish");
    return;
  }
  int rv = ngtcp2_conn_handle_expiry(c->qc, now);
  if (rv != 0) {
    const char *why = rv == NGTCP2_ERR_IDLE_CLOSE
                          ? "idle timeout: nothing received from the peer"
                          : ngtcp2_strerror(rv);
    nexar__conn_fail(c,
                     rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT ? NEXAR_ERR_TIMEOUT
                                                        : NEXAR_ERR_PEER_FAILED,
                     why);
    return;
  }
  c->want_write = true;
}

void nexar__conn_close(nexar__conn_t *c, int code, const char *reason) {
  if (c->close_req) return;
  c->close_req = true;
  c->tx_code = code;
  snprintf(c->tx_reason, sizeof(c->tx_reason), "%s", reason);
  if (c->state != NEXAR__CS_DEAD) c->state = NEXAR__CS_CLOSING;
}

void nexar__conn_fail(nexar__conn_t *c, int err, const char *why) {
  if (c->state == NEXAR__CS_DEAD) return;
  c->state = NEXAR__CS_DEAD;
  c->err = err;
  if (why != c->close_reason)
    snprintf(c->close_reason, sizeof(c->close_reason), "%s", why);
}

void nexar__conn_settle(nexar__conn_t *c) {
  if (c->close_req && !c->close_sent) {
    c->close_sent = true;
    /* Before the handshake completes there may be no keys to protect an
     * application CONNECTION_CLOSE (ngtcp2 0.12 asserts on it), so a
     * stranger's bogus Initial is dropped silently. A handshake that TLS
     * refused (certificate not in the roster, wrong ALPN) has an alert
     * and keys: the peer gets a transport close carrying the alert and
     * learns at once instead of after its handshake timeout. */
    bool done = c->qc && ngtcp2_conn_get_handshake_completed(c->qc);
    uint8_t alert = c->qc && !done ? ngtcp2_conn_get_tls_alert(c->qc) : 0;
    if (c->qc && (done || alert) && !ngtcp2_conn_is_in_closing_period(c->qc) &&
        !ngtcp2_conn_is_in_draining_period(c->qc)) {
      ngtcp2_connection_close_error ce;
      ngtcp2_connection_close_error_default(&ce);
      if (done)
        ngtcp2_connection_close_error_set_application_error(
            &ce, (uint64_t)c->tx_code, (const uint8_t *)c->tx_reason,
            strlen(c->tx_reason));
      else
        ngtcp2_connection_close_error_set_transport_error_tls_alert(
            &ce, alert, (const uint8_t *)c->tx_reason, strlen(c->tx_reason));
      ngtcp2_path_storage ps;
      ngtcp2_path_storage_zero(&ps);
      ngtcp2_pkt_info pi;
      /* Not txbuf: it may hold a batch waiting for the socket. */
      uint8_t buf[1200];
      ngtcp2_ssize n = ngtcp2_conn_write_connection_close(
          c->qc, &ps.path, &pi, buf, sizeof(buf), &ce, nexar__now());
      if (n > 0)
        nexar__udp_send(c->ep, &c->remote, c->remote_len, buf, (size_t)n,
                        (size_t)n);
    }
  }
  if (c->state == NEXAR__CS_DEAD && !c->notified) {
    c->notified = true;
    NEXAR__INFO(NEXAR__SUB_NET, "connection to %s (rank %d) ended: %s",
                c->remote_str, c->peer, c->close_reason);
    if (c->ep->ops->on_closed) c->ep->ops->on_closed(c);
  }
}

void nexar__conn_free(nexar__conn_t *c) {
  if (!c) return;
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++) {
    nexar__omsg_t *m = c->outq[lane];
    while (m) {
      nexar__omsg_t *next = m->next;
      if (m->req)
        nexar__req_complete(m->req, c->err ? c->err : NEXAR_ERR_CLOSED);
      m->req = NULL;
      nexar__omsg_free(m);
      m = next;
    }
    c->outq[lane] = c->outq_tail[lane] = NULL;
  }
  if (c->role == NEXAR__ROLE_MESH && c->ep->ops == &nexar__worker_ops)
    nexar__p2p_conn_teardown(c);
  if (c->qc) ngtcp2_conn_del(c->qc);
  if (c->tls) gnutls_deinit(c->tls);
  free(c->sbuf);
  free(c);
}

void nexar__conn_send(nexar__conn_t *c, nexar__omsg_t *m) {
  m->next = NULL;
  m->conn = c;
  if (c->outq_tail[m->lane])
    c->outq_tail[m->lane]->next = m;
  else
    c->outq[m->lane] = m;
  c->outq_tail[m->lane] = m;
  c->want_write = true;
}

int nexar__conn_seed_send(nexar__conn_t *c, const uint8_t *frame, size_t len) {
  /* Each seed frame travels on its own stream without a mesh header. The
   * seed exchange is strictly request/response (PROOF, HELLO, then WELCOME
   * or REJECT), so at most one frame is in flight per direction and the
   * receiver can append stream data in arrival order. */
  nexar__omsg_t *m = calloc(1, sizeof(*m));
  if (!m) return NEXAR_ERR_NOMEM;
  m->owned = malloc(len);
  if (!m->owned) {
    free(m);
    return NEXAR_ERR_NOMEM;
  }
  memcpy(m->owned, frame, len);
  m->data = m->owned;
  m->len = len;
  m->sid = -1;
  m->lane = NEXAR__LANE_CONTROL;
  m->sent = NEXAR__HDR_BYTES; /* no mesh header on seed streams */
  m->acked = NEXAR__HDR_BYTES;
  nexar__conn_send(c, m);
  return 0;
}

int nexar__conn_extend_stream(nexar__conn_t *c, int64_t sid, uint64_t n) {
  if (!c->qc || c->state == NEXAR__CS_DEAD || n == 0) return 0;
  ngtcp2_conn_extend_max_stream_offset(c->qc, sid, n);
  c->want_write = true;
  return 0;
}

bool nexar__conn_tx_pending(const nexar__conn_t *c) {
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++)
    for (const nexar__omsg_t *m = c->outq[lane]; m; m = m->next)
      if (unsent(m)) return true;
  return false;
}

bool nexar__conn_idle(nexar__conn_t *c) {
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++)
    for (nexar__omsg_t *m = c->outq[lane]; m; m = m->next)
      if (m->sid >= 0 || m->req || m->fwd || m->sent < nexar__omsg_total(m))
        return false; /* not a cancelled, never-opened leftover */
  return true;
}
