/*
 * Live inspection, the rank's side (docs/debugging.md "Live inspection",
 * docs/wire-protocol.md 6.6). An observer (nexar-inspect, nexar-run on a
 * timeout) dials a rank's QUIC endpoint like a mesh peer, pinning the
 * rank's certificate by the roster the seed gave it, with its own ALPN
 * (NEXAR__ALPN_OBSERVE); the rank does not check the observer's
 * certificate and takes at most
 * NEXAR__OBSERVERS_MAX at once, each closed NEXAR__OBSERVE_MS after its
 * handshake. Its first and only frame must be INSPECT, carrying the MAC of
 * the cluster secret over the connection's TLS exporter; anything else
 * closes it with nothing sent. A proved observer gets one STATE frame: the
 * operations in progress (from the flight recorder), the links held with
 * their heartbeat ages and bytes in flight. It all runs in the engine (the
 * progress thread), so it answers while the application thread sleeps, and
 * costs nothing while no observer connects. Observer links are never
 * members: not in peers[], not seen by the failure detector.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/seed_int.h"
#include "cluster/cluster.h"
#include "core/flight.h"

int nexar__observe_admit(nexar_ctx_t *ctx) {
  int n = 0;
  for (int i = 0; i < ctx->ep.nconns; i++)
    n += ctx->ep.conns[i]->role == NEXAR__ROLE_OBSERVE &&
         ctx->ep.conns[i]->state != NEXAR__CS_DEAD;
  return n < NEXAR__OBSERVERS_MAX ? 0 : -1;
}

static void refuse(nexar__link_t *c, int code, int err, const char *why) {
  nexar__link_close(c, code, why);
  nexar__link_fail(c, err, why);
}

void nexar__observe_ready(nexar_ctx_t *ctx, nexar__link_t *c) {
  for (int i = 0; i < NEXAR__OBSERVERS_MAX; i++) {
    if (ctx->obs[i].c) continue;
    ctx->obs[i].c = c;
    ctx->obs[i].answered = false;
    ctx->obs[i].deadline =
        nexar__now() + (uint64_t)NEXAR__OBSERVE_MS * 1000000ull;
    return;
  }
  refuse(c, NEXAR__CLOSE_PROTO, NEXAR_ERR_PROTO, "too many observers");
}

void nexar__observe_closed(nexar_ctx_t *ctx, nexar__link_t *c) {
  for (int i = 0; i < NEXAR__OBSERVERS_MAX; i++)
    if (ctx->obs[i].c == c) ctx->obs[i].c = NULL;
}

void nexar__observe_tick(nexar_ctx_t *ctx, uint64_t now) {
  for (int i = 0; i < NEXAR__OBSERVERS_MAX; i++) {
    nexar__link_t *c = ctx->obs[i].c;
    if (!c || now < ctx->obs[i].deadline) continue;
    ctx->obs[i].c = NULL;
    refuse(c, NEXAR__CLOSE_OK, NEXAR_ERR_CLOSED, "observer time is up");
  }
}

/* Stream bytes queued to |c| and not yet acknowledged. */
static uint64_t in_flight(const nexar__link_t *c) {
  uint64_t n = 0;
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++)
    for (const nexar__omsg_t *m = c->outq[lane]; m; m = m->next) {
      uint64_t total = nexar__omsg_total(m);
      n += total > m->acked ? total - m->acked : 0;
    }
  return n;
}

/* Sends this rank's STATE on |c|. */
static int answer(nexar_ctx_t *ctx, nexar__link_t *c) {
  nexar__insp_state_t st;
  memset(&st, 0, sizeof st);
  uint64_t now = nexar__now();
  st.rank = (uint32_t)ctx->rank;
  st.world = (uint32_t)ctx->world;
  st.pid = (uint32_t)getpid();
  gethostname(st.host, NEXAR__HOST_MAX);
  st.host[NEXAR__HOST_MAX] = 0;
  for (char *p = st.host; *p; p++)
    if (*p < 33 || *p > 126) *p = '_';
  st.nops = (uint32_t)nexar__flight_live(ctx, now, st.ops, NEXAR__INSP_OPS);
  nexar__insp_peer_t *peers = calloc((size_t)ctx->world, sizeof(*peers));
  size_t cap = 2048 + (size_t)ctx->world * NEXAR__INSP_PEER_BYTES;
  uint8_t *frame = malloc(cap);
  int rc = NEXAR_ERR_NOMEM;
  if (!peers || !frame) goto out;
  for (int r = 0; r < ctx->world; r++) {
    const nexar__link_t *l = ctx->peers[r];
    if (r == ctx->rank || !l || ctx->dead[r]) continue;
    uint64_t age = now > l->last_rx ? (now - l->last_rx) / 1000000ull : 0;
    nexar__insp_peer_t *p = &peers[st.npeers++];
    p->rank = (uint32_t)r;
    p->hb_age_ms = age > UINT32_MAX ? UINT32_MAX : (uint32_t)age;
    p->inflight = in_flight(l);
  }
  rc = nexar__insp_state_encode(&st, peers, frame, cap);
  if (rc > 0) rc = nexar__link_seed_send(c, frame, (size_t)rc);
out:
  free(peers);
  free(frame);
  return rc < 0 ? rc : 0;
}

static int on_frame(nexar__link_t *c, uint8_t type, const uint8_t *body,
                    size_t len) {
  nexar_ctx_t *ctx = c->ep->owner;
  int slot = -1;
  for (int i = 0; i < NEXAR__OBSERVERS_MAX; i++)
    if (ctx->obs[i].c == c) slot = i;
  uint8_t mac[NEXAR__MAC_BYTES], exp[32], want[32];
  if (slot < 0 || ctx->obs[slot].answered || type != NEXAR__SEED_INSPECT ||
      nexar__seed_proof_decode(mac, body, len) < 0 ||
      nexar__link_exporter(c, exp) < 0)
    goto auth;
  nexar__mac(ctx->secret_key, NEXAR__OBSERVER_LABEL, exp, want);
  if (!nexar__ct_equal(mac, want, NEXAR__MAC_BYTES)) goto auth;
  ctx->obs[slot].answered = true;
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP, "rank %d: state sent to observer %s",
              ctx->rank, c->remote_str);
  return answer(ctx, c);
auth:
  NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
              "rank %d: observer %s did not prove the cluster secret; closed",
              ctx->rank, c->remote_str);
  refuse(c, NEXAR__CLOSE_AUTH, NEXAR_ERR_AUTH, "not authenticated");
  return 0;
}

void nexar__observe_data(nexar__link_t *c, const uint8_t *d, size_t n) {
  /* INSPECT is the one frame an observer sends: nothing larger is held. */
  if (c->sbuf_len + n > NEXAR__SEED_FRAME_HDR + NEXAR__MAC_BYTES) {
    refuse(c, NEXAR__CLOSE_AUTH, NEXAR_ERR_AUTH, "not authenticated");
    return;
  }
  int r = nexar__seed_feed(c, d, n, on_frame);
  if (r < 0 && c->state != NEXAR__CS_DEAD)
    refuse(c, NEXAR__CLOSE_PROTO, r, nexar_strerror(r));
}
