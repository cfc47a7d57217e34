/*
 * Live inspection, the observer's side (inspect.h; docs/debugging.md).
 *
 * One endpoint of its own (a fresh certificate, its own progress thread):
 *   1. QUIC to the seed (seed ALPN). The seed's PROOF is checked (the seed
 *      knows the secret), then QUERY carries this observer's proof; the
 *      seed answers ROSTER (a wrong proof: the connection is closed and
 *      nothing is sent).
 *   2. QUIC to every rank as an observer, NEXAR_MESH_DIALS handshakes at
 *      once (mesh ALPN, the rank's certificate
 *      pinned by the roster's fingerprint, so the answer is the rank's):
 *      INSPECT carries the proof over that connection's exporter; the rank
 *      answers STATE.
 * The caller waits for every answer or the deadline, then prints the table
 * from what came (inspect_table.c).
 */
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/inspect_int.h"
#include "cluster/seed_int.h"

static void finish(insp_t *s, int rc, const char *why) {
  pthread_mutex_lock(&s->mu);
  if (!s->done) {
    s->done = true;
    s->rc = rc;
    if (why) snprintf(s->err, sizeof s->err, "%s", why);
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
}

static int send_mac(insp_t *s, nexar__link_t *c, uint8_t type) {
  uint8_t exp[32], mac[32], frame[NEXAR__SEED_FRAME_HDR + NEXAR__MAC_BYTES];
  NEXAR__CHECK(nexar__link_exporter(c, exp));
  nexar__mac(s->key, NEXAR__OBSERVER_LABEL, exp, mac);
  if (s->wrong_proof == (type == NEXAR__SEED_QUERY ? 1 : 2)) mac[0] ^= 1;
  int n = nexar__seed_mac_encode(type, mac, frame, sizeof frame);
  return n < 0 ? n : nexar__link_seed_send(c, frame, (size_t)n);
}

static insp_rank_t *rank_of(insp_t *s, nexar__link_t *c) {
  for (int r = 0; r < s->world; r++)
    if (s->rk[r].c == c) return &s->rk[r];
  return NULL;
}

static int on_roster(insp_t *s, const uint8_t *body, size_t len) {
  nexar__seed_welcome_t w;
  NEXAR__CHECK(nexar__seed_welcome_decode(&w, body, len));
  s->rk = calloc(w.world_size, sizeof(*s->rk));
  if (!s->rk) return NEXAR_ERR_NOMEM;
  for (uint32_t i = 0; i < w.world_size; i++)
    NEXAR__CHECK(nexar__welcome_entry(&w, i, &s->rk[i].e));
  s->world = (int)w.world_size;
  s->dial = true;
  return 0;
}

static int on_state(insp_rank_t *k, const uint8_t *body, size_t len) {
  /* The decoded peers point into the body: keep a copy. */
  k->body = malloc(len ? len : 1);
  if (!k->body) return NEXAR_ERR_NOMEM;
  memcpy(k->body, body, len);
  if (nexar__insp_state_decode(&k->st, k->body, len) < 0) {
    snprintf(k->why, sizeof k->why, "malformed answer");
    return NEXAR_ERR_PROTO;
  }
  k->got = true;
  return 0;
}

static int on_frame(nexar__link_t *c, uint8_t type, const uint8_t *body,
                    size_t len) {
  insp_t *s = c->ep->owner;
  if (c == s->seed) {
    uint8_t mac[32], exp[32], want[32];
    if (type != NEXAR__SEED_PROOF) s->seed_rx += NEXAR__SEED_FRAME_HDR + len;
    if (type == NEXAR__SEED_PROOF) {
      NEXAR__CHECK(nexar__seed_proof_decode(mac, body, len));
      NEXAR__CHECK(nexar__link_exporter(c, exp));
      nexar__mac(s->key, "nexar seed proof v1", exp, want);
      if (!nexar__ct_equal(mac, want, 32)) {
        finish(s, NEXAR_ERR_AUTH,
               "the seed did not prove the cluster secret (wrong secret?)");
        return NEXAR_ERR_AUTH;
      }
      return send_mac(s, c, NEXAR__SEED_QUERY);
    }
    if (type == NEXAR__SEED_ROSTER && !s->rk) {
      int rc = on_roster(s, body, len);
      if (rc < 0) finish(s, rc, "malformed roster from the seed");
      nexar__link_close(c, NEXAR__CLOSE_OK, "roster received");
      return rc;
    }
    if (type == NEXAR__SEED_REJECT) {
      nexar__seed_reject_t r;
      NEXAR__CHECK(nexar__seed_reject_decode(&r, body, len));
      finish(s, r.code, r.reason);
      return 0;
    }
    return NEXAR_ERR_PROTO;
  }
  insp_rank_t *k = rank_of(s, c);
  if (k) k->rx += NEXAR__SEED_FRAME_HDR + len;
  if (!k || k->got || type != NEXAR__SEED_STATE) return NEXAR_ERR_PROTO;
  int rc = on_state(k, body, len);
  nexar__link_close(c, NEXAR__CLOSE_OK, "state received");
  if (rc == 0) s->answered++;
  return rc;
}

static void on_ready(nexar__link_t *c) {
  insp_t *s = c->ep->owner;
  /* The seed speaks first; a silent observer (tests) never does. */
  if (c->role != NEXAR__ROLE_OBSERVE || s->wrong_proof == 3) return;
  if (send_mac(s, c, NEXAR__SEED_INSPECT) < 0)
    nexar__link_fail(c, NEXAR_ERR_TRANSPORT, "TLS exporter failed");
}

static void on_data(nexar__link_t *c, const uint8_t *d, size_t n) {
  (void)nexar__seed_feed_or_close(c, d, n, on_frame);
}

static void on_closed(nexar__link_t *c) {
  insp_t *s = c->ep->owner;
  if (c == s->seed) {
    s->seed = NULL;
    if (!s->rk) {
      char why[200];
      snprintf(why, sizeof why,
               "the seed at %s closed the connection: %s (%llu bytes "
               "received after its proof)",
               c->remote_str, c->close_reason, (unsigned long long)s->seed_rx);
      finish(s,
             c->close_code == NEXAR__CLOSE_AUTH ? NEXAR_ERR_AUTH
                                                : NEXAR_ERR_TRANSPORT,
             why);
    }
    return;
  }
  insp_rank_t *k = rank_of(s, c);
  if (!k) return;
  k->c = NULL;
  if (k->got || k->failed) return;
  k->failed = true;
  snprintf(k->why, sizeof k->why, "%s (%llu bytes received)",
           c->close_reason[0] ? c->close_reason : "connection ended",
           (unsigned long long)k->rx);
  s->answered++;
}

/* Ranks dialled in the last slot_ns whose answer or end has not come. */
static int in_flight(const insp_t *s, uint64_t now) {
  int n = 0;
  for (int r = 0; r < s->next_dial; r++) {
    const insp_rank_t *k = &s->rk[r];
    n += !k->got && !k->failed && now - k->dialled_at < s->slot_ns;
  }
  return n;
}

/* Dials the next ranks, s->dials at a time (a job of hundreds of ranks
 * does not see hundreds of handshakes from one observer at once); a rank
 * that stays silent (stopped, say) gives its slot up after slot_ns while
 * its connection goes on. */
static void dial_more(nexar__ep_t *ep, insp_t *s, uint64_t now) {
  for (int busy = in_flight(s, now); busy < s->dials && s->next_dial < s->world;
       s->next_dial++) {
    insp_rank_t *k = &s->rk[s->next_dial];
    struct sockaddr_storage ss;
    socklen_t sl;
    nexar__dial_t d = {
        &ss, 0, NEXAR__ROLE_OBSERVE, s->next_dial, k->e.fingerprint, NULL};
    if (nexar__wire_to_addr(&k->e.addr, &ss, &sl) == 0) {
      d.tolen = sl;
      if (nexar__link_dial(ep, &d, &k->c) == 0) {
        k->dialled_at = now;
        busy++;
        continue;
      }
    }
    k->failed = true;
    snprintf(k->why, sizeof k->why, "cannot dial its address");
    s->answered++;
  }
}

static void on_tick(nexar__ep_t *ep, uint64_t now) {
  insp_t *s = ep->owner;
  if (s->dial) dial_more(ep, s, now);
  if (s->rk && s->answered >= s->world) finish(s, 0, NULL);
}

static int verify_client(nexar__ep_t *ep, const uint8_t *fp) {
  return -1; /* nobody dials an observer */
}

static const nexar__ep_ops_t insp_ops = {
    .on_ready = on_ready,
    .on_seed_data = on_data,
    .on_closed = on_closed,
    .on_tick = on_tick,
    .verify_client = verify_client,
    NEXAR__P2P_FRAME_OPS,
};

static int begin(nexar__req_t *req) {
  insp_t *s = req->cb_arg;
  nexar__dial_t d = {&s->seed_ss, s->seed_sl, NEXAR__ROLE_SEED, -1, NULL, NULL};
  int rc = nexar__link_dial(&s->ep, &d, &s->seed);
  if (rc < 0) finish(s, rc, "cannot start a connection to the seed");
  return 0;
}

/* Waits until finish() or |deadline| (CLOCK_REALTIME ns). */
static void wait_done(insp_t *s, uint64_t deadline) {
  struct timespec ts = {(time_t)(deadline / 1000000000ull),
                        (long)(deadline % 1000000000ull)};
  pthread_mutex_lock(&s->mu);
  while (!s->done)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0) break;
  pthread_mutex_unlock(&s->mu);
}

int nexar__inspect(const nexar__inspect_opts_t *o, FILE *out, char *err,
                   size_t errlen) {
  int rc;
  if (!o || !o->seed || !out || !err || !errlen) return NEXAR_ERR_INVALID_ARG;
  err[0] = 0;
  insp_t *s = calloc(1, sizeof(*s));
  if (!s) return NEXAR_ERR_NOMEM;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->wrong_proof = o->wrong_proof;
  nexar__params_t prm;
  rc = nexar__params_load(&prm, NULL, err, errlen);
  if (rc < 0) goto out;
  s->dials = (int)prm.mesh_dials;
  rc = nexar__read_secret(o->secret ? o->secret : prm.secret,
                          o->secret        ? NULL
                          : o->secret_file ? o->secret_file
                                           : prm.secret_file,
                          s->key, err, errlen);
  if (rc < 0) goto out;
  if (nexar__parse_addr(o->seed, 0, &s->seed_ss, &s->seed_sl) < 0) {
    snprintf(err, errlen, "cannot parse the seed address '%s'", o->seed);
    rc = NEXAR_ERR_INVALID_ARG;
    goto out;
  }
  struct sockaddr_storage any;
  socklen_t al;
  nexar__parse_addr(s->seed_ss.ss_family == AF_INET6 ? "[::]:0" : "0.0.0.0:0",
                    0, &any, &al);
  rc = nexar__ep_init(&s->ep, &any, al, &insp_ops, s, NULL, NULL);
  if (rc < 0) {
    snprintf(err, errlen, "cannot open a UDP socket");
    goto out;
  }
  s->ep_up = true;
  rc = nexar__ep_start(&s->ep);
  if (rc < 0) goto out;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int ms = o->timeout_ms > 0 ? o->timeout_ms : 5000;
  s->slot_ns = (uint64_t)ms * 1000000ull / 8;
  nexar__ep_call(&s->ep, begin, s, UINT64_MAX);
  wait_done(s, (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec +
                   (uint64_t)ms * 1000000ull);
  /* The engine stops before its state is read here. */
  nexar__ep_stop(&s->ep);
  if (!s->rk) {
    rc = s->done && s->rc < 0 ? s->rc : NEXAR_ERR_TIMEOUT;
    snprintf(err, errlen, "%s",
             s->err[0] ? s->err : "no roster from the seed in time");
    goto out;
  }
  nexar__inspect_table(s, out);
  rc = 0;
out:
  if (s->ep_up) nexar__ep_fini(&s->ep);
  for (int r = 0; s->rk && r < s->world; r++) free(s->rk[r].body);
  free(s->rk);
  gnutls_memset(s->key, 0, sizeof s->key);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
  return rc;
}
