/*
 * Worker bootstrap: join through the seed, then form the mesh.
 *
 * Phases (one deadline, NEXAR_BOOTSTRAP_TIMEOUT_MS, covers them all):
 *   SEED  - QUIC to the seed; check its PROOF, send HELLO.
 *   ROSTER- wait for WELCOME (or REJECT, which ends the bootstrap).
 *   MESH  - dial every higher neighbour (pinning its certificate
 *           fingerprint), accept every lower neighbour (whose certificate
 *           must be its roster entry), until the links to all neighbours of
 *           the topology are up (every other rank on a full mesh, K on
 *           kregular:K; docs/topology.md). A lazy full mesh forms the
 *           hypercube's links only, and accepts any member's connection
 *           (p2p/lazy.c dials the others when first needed).
 * Runs on the progress thread; nexar_init waits on ctx->boot_state.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/seed_int.h"
#include "cluster/cluster.h"
#include "core/flight.h"

enum { BOOT_SEED = 1, BOOT_MESH = 2, BOOT_DONE = 3, BOOT_FAILED = 4 };

/* Every change of boot_state is made under cmu: nexar_init waits on it. */
static void boot_set(nexar_ctx_t *ctx, int state) {
  nexar__ep_t *ep = &ctx->ep;
  pthread_mutex_lock(&ep->cmu);
  ctx->boot_state = state;
  if (state >= BOOT_DONE) pthread_cond_broadcast(&ep->ccv);
  pthread_mutex_unlock(&ep->cmu);
}

static void boot_fail(nexar_ctx_t *ctx, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void boot_fail(nexar_ctx_t *ctx, int rc, const char *fmt, ...) {
  if (ctx->boot_state >= BOOT_DONE) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->boot_err, sizeof(ctx->boot_err), fmt, ap);
  va_end(ap);
  ctx->boot_rc = rc;
  boot_set(ctx, BOOT_FAILED);
}

static bool neighbour(nexar_ctx_t *ctx, int r) {
  return nexar__topo_linked(&ctx->topo, ctx->rank, r);
}

/* Whether this process forms a link to |r|: a member of its world
 * (dead[r] == 0; all of them after a classic welcome) that the topology
 * makes a neighbour (on a lazy mesh, a hypercube neighbour). */
static bool link_peer(nexar_ctx_t *ctx, int r) {
  return r != ctx->rank && !ctx->dead[r] && neighbour(ctx, r);
}

/* Links this process forms: the topology's degree when all are members. */
static int mesh_peers(nexar_ctx_t *ctx) {
  int n = 0;
  for (int r = 0; r < ctx->world; r++) n += link_peer(ctx, r);
  return n;
}

static int connected_peers(nexar_ctx_t *ctx) {
  int n = 0;
  for (int r = 0; r < ctx->world; r++)
    if (link_peer(ctx, r) && ctx->peers[r] &&
        ctx->peers[r]->state == NEXAR__CS_READY)
      n++;
  return n;
}

/* Tells neighbour |r| that this process's mesh is formed: until it hears
 * so, its failure detector judges this process by the bootstrap's deadline,
 * not the heartbeat timeout (a process busy forming its mesh is not
 * silent by choice). */
static void say_meshed(nexar_ctx_t *ctx, int r) {
  nexar__link_t *c = ctx->peers[r];
  if (c && c->state == NEXAR__CS_READY && c->peer == r)
    nexar__ctl_probe(ctx, r, NULL);
}

static void boot_done(nexar_ctx_t *ctx) {
  boot_set(ctx, BOOT_DONE);
  /* Every link up (on a lazy mesh, those dialled here on demand too). */
  for (int r = 0; r < ctx->world; r++)
    if (r != ctx->rank && !ctx->dead[r]) say_meshed(ctx, r);
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP,
              "rank %d: mesh of %d formed (topology %s): %d links", ctx->rank,
              ctx->world, ctx->topo.name, connected_peers(ctx));
}

static void check_mesh(nexar_ctx_t *ctx) {
  if (ctx->boot_state == BOOT_MESH && connected_peers(ctx) == mesh_peers(ctx))
    boot_done(ctx);
}

int nexar__seed_proof_answer(nexar_ctx_t *ctx, nexar__link_t *c,
                             const uint8_t *body, size_t len,
                             uint8_t proof[NEXAR__MAC_BYTES]) {
  uint8_t mac[32], exp[32], want[32];
  if (nexar__seed_proof_decode(mac, body, len) < 0) return NEXAR_ERR_PROTO;
  NEXAR__CHECK(nexar__link_exporter(c, exp));
  nexar__mac(ctx->secret_key, "nexar seed proof v1", exp, want);
  if (!nexar__ct_equal(mac, want, 32)) {
    nexar__link_close(c, NEXAR__CLOSE_AUTH,
                      "the seed did not prove the cluster secret");
    nexar__link_fail(c, NEXAR_ERR_AUTH, "seed authentication failed");
    return NEXAR_ERR_AUTH;
  }
  nexar__mac(ctx->secret_key, "nexar worker proof v1", exp, proof);
  return 0;
}

static int send_hello(nexar_ctx_t *ctx, nexar__link_t *c,
                      const uint8_t proof[NEXAR__MAC_BYTES]) {
  nexar__seed_hello_t h;
  memset(&h, 0, sizeof(h));
  memcpy(h.proof, proof, NEXAR__MAC_BYTES);
  /* A joiner gets its id and the world from the checkpoint that admits it:
   * a requested rank or world size means nothing then. */
  h.join = ctx->prm.join ? 1 : 0;
  h.rank = h.join ? -1 : (int32_t)ctx->prm.rank;
  h.world_size = h.join ? 0 : (int32_t)ctx->prm.world_size;
  if (ctx->advertise_sl) {
    nexar__addr_to_wire((struct sockaddr *)&ctx->advertise_ss, &h.advertise);
    h.has_addr = 1;
  }
  memcpy(h.fingerprint, ctx->ep.id.fingerprint, NEXAR__FP_BYTES);
  /* The certificate (so that the roster carries the relay key bound to the
   * fingerprint) and the topology (which the seed checks is the same for
   * every worker). */
  memcpy(h.cert, ctx->ep.id.cert, ctx->ep.id.cert_len);
  h.cert_len = ctx->ep.id.cert_len;
  snprintf(h.topo, sizeof(h.topo), "%s", ctx->topo.name);
  nexar__params_job_get(&ctx->prm, &h.job); /* rank 0's become the job's */
  h.pid = ctx->host.pid;
  h.host_key = ctx->host.key;
  memcpy(h.nonce, ctx->host.nonce, NEXAR__NONCE_BYTES);
  gethostname(h.host, NEXAR__HOST_MAX);
  for (char *p = h.host; *p; p++)
    if (*p < 33 || *p > 126) *p = '_';
  uint8_t frame[512 + NEXAR__CERT_MAX];
  int n = nexar__seed_hello_encode(&h, frame, sizeof(frame));
  if (n < 0) return n;
  return nexar__link_seed_send(c, frame, (size_t)n);
}

/* Whether this process dialled |r| and the handshake is not over. */
static bool dialling(nexar_ctx_t *ctx, int r) {
  nexar__link_t *c = ctx->peers[r];
  return r > ctx->rank && c && !c->is_server && c->state != NEXAR__CS_READY &&
         c->state != NEXAR__CS_DEAD;
}

/* Lower ids dial higher ones: this process dials every higher member that
 * is its neighbour, nearest first and NEXAR_MESH_DIALS at a time (a job of
 * N ranks does not start N(N-1)/2 handshakes at once; each process also
 * receives about that many from the ranks just below it). Called again on
 * every tick while the mesh forms. */
static int dial_more(nexar_ctx_t *ctx) {
  if (ctx->dial_next <= ctx->rank) ctx->dial_next = ctx->rank + 1;
  int busy = 0;
  for (int r = ctx->rank + 1; r < ctx->dial_next && r < ctx->world; r++)
    busy += dialling(ctx, r);
  for (; ctx->dial_next < ctx->world && busy < ctx->prm.mesh_dials;
       ctx->dial_next++) {
    int r = ctx->dial_next;
    if (!link_peer(ctx, r) || ctx->peers[r]) continue;
    NEXAR__CHECK(nexar__dial_peer(ctx, r));
    busy++;
  }
  return 0;
}

/* The roster is known: accept lower members, dial the higher ones. */
static int mesh_begin(nexar_ctx_t *ctx, nexar__link_t *c) {
  ctx->ep.local_rank = ctx->rank;
  ctx->ep.accept_mesh = true;
  boot_set(ctx, BOOT_MESH);
  /* Done with the seed: it is never on the data path. */
  nexar__link_close(c, NEXAR__CLOSE_OK, "welcome received");
  nexar__link_fail(c, NEXAR_ERR_CLOSED, "welcome received");
  ctx->dial_next = 0;
  NEXAR__CHECK(dial_more(ctx));
  check_mesh(ctx);
  return 0;
}

/* Sparse topologies: every other rank's relay key, from its certificate in
 * the roster, which must hash to the fingerprint the roster pins. */
static int roster_keys(nexar_ctx_t *ctx, const nexar__seed_welcome_t *w,
                       char *err, size_t len) {
  nexar__topo_t *t = &ctx->topo;
  if (t->kind == NEXAR__TOPO_FULL) return 0;
  if (!w->certs) {
    snprintf(err, len,
             "NEXAR_TOPOLOGY=%s needs the ranks' certificates in the roster, "
             "and the seed sent none",
             t->name);
    return NEXAR_ERR_PROTO;
  }
  size_t pos = 0;
  for (uint32_t i = 0; i < w->world_size; i++) {
    const uint8_t *der;
    uint16_t cl;
    if (nexar__welcome_cert(w, &pos, &der, &cl) < 0) return NEXAR_ERR_PROTO;
    if ((int)i == ctx->rank) continue;
    int rc = cl ? nexar__cert_relay_key(der, cl, ctx->roster[i].fingerprint,
                                        t->pub[i])
                : NEXAR_ERR_PROTO;
    if (rc < 0) {
      snprintf(err, len, "the roster's certificate for rank %u (%u bytes) %s",
               i, cl,
               rc == NEXAR_ERR_AUTH ? "is not the one its fingerprint pins"
                                    : "carries no relay key");
      return rc == NEXAR_ERR_AUTH ? rc : NEXAR_ERR_PROTO;
    }
    t->key_state[i] = 0; /* the pair key is derived on first use */
  }
  return 0;
}

static int on_welcome(nexar_ctx_t *ctx, nexar__link_t *c, const uint8_t *body,
                      size_t len) {
  nexar__seed_welcome_t w;
  if (nexar__seed_welcome_decode(&w, body, len) < 0) return NEXAR_ERR_PROTO;
  ctx->rank = (int)w.rank;
  ctx->world = (int)w.world_size;
  ctx->roster = calloc(w.world_size, sizeof(*ctx->roster));
  ctx->peers = calloc(w.world_size, sizeof(*ctx->peers));
  ctx->ps = calloc(w.world_size, sizeof(*ctx->ps));
  ctx->dead = calloc(w.world_size, 1);
  ctx->dead_how = calloc(w.world_size, 1);
  if (!ctx->roster || !ctx->peers || !ctx->ps || !ctx->dead || !ctx->dead_how)
    return NEXAR_ERR_NOMEM;
  for (uint32_t i = 0; i < w.world_size; i++)
    if (nexar__welcome_entry(&w, i, &ctx->roster[i]) < 0)
      return NEXAR_ERR_PROTO;
  if (!nexar__ct_equal(ctx->roster[ctx->rank].fingerprint,
                       ctx->ep.id.fingerprint, NEXAR__FP_BYTES))
    return NEXAR_ERR_PROTO;
  char err[NEXAR__ERRMSG_MAX];
  /* Rank 0's values of the settings every member shares, before anything
   * uses them (links, topology, credit). */
  int rc = nexar__params_job_adopt(&ctx->prm, &w.job, ctx->rank, 0, err,
                                   sizeof(err));
  if (rc == 0) rc = nexar__topo_init(ctx, ctx->world, err, sizeof(err));
  if (rc == 0) rc = roster_keys(ctx, &w, err, sizeof(err));
  if (rc < 0) {
    nexar__link_close(c, NEXAR__CLOSE_OK, "welcome received");
    nexar__link_fail(c, NEXAR_ERR_CLOSED, "welcome received");
    boot_fail(ctx, rc, "rank %d: %s", ctx->rank, err);
    return 0;
  }
  nexar__host_pace(ctx);
  nexar_comm_t *wc = ctx->world_comm;
  wc->world_ranks = malloc(w.world_size * sizeof(int));
  if (!wc->world_ranks) return NEXAR_ERR_NOMEM;
  for (uint32_t i = 0; i < w.world_size; i++) wc->world_ranks[i] = (int)i;
  wc->rank = ctx->rank;
  wc->size = ctx->world;
  /* NEXAR_MAX_WORLD_SIZE at most the world size: the job is not elastic
   * (nor is a seed with the same setting), so no checkpoint asks it. */
  int64_t maxw = ctx->prm.max_world_size;
  ctx->seed_no_admit = maxw && maxw <= (int64_t)w.world_size;
  return mesh_begin(ctx, c);
}

static int worker_on_frame(nexar__link_t *c, uint8_t type, const uint8_t *body,
                           size_t len) {
  nexar_ctx_t *ctx = c->ep->owner;
  if (type == NEXAR__SEED_PROOF) {
    uint8_t proof[NEXAR__MAC_BYTES];
    int r = nexar__seed_proof_answer(ctx, c, body, len, proof);
    if (r == NEXAR_ERR_AUTH) {
      boot_fail(ctx, NEXAR_ERR_AUTH,
                "the seed at %s did not prove knowledge of the cluster "
                "secret (the secrets differ, or it is not a nexar seed)",
                c->remote_str);
      return 0;
    }
    NEXAR__CHECK(r);
    return send_hello(ctx, c, proof);
  }
  if (type == NEXAR__SEED_WELCOME && !ctx->prm.join)
    return on_welcome(ctx, c, body, len);
  if (type == NEXAR__SEED_JOIN && ctx->prm.join) {
    NEXAR__CHECK(nexar__elastic_on_join(ctx, body, len));
    return mesh_begin(ctx, c);
  }
  if (type == NEXAR__SEED_REJECT) {
    nexar__seed_reject_t r;
    if (nexar__seed_reject_decode(&r, body, len) < 0) return NEXAR_ERR_PROTO;
    boot_fail(ctx, r.code, "the seed at %s refused this worker: %s",
              c->remote_str, r.reason);
    nexar__link_close(c, NEXAR__CLOSE_REJECT, "rejected");
    nexar__link_fail(c, r.code, "rejected by the seed");
    return 0;
  }
  return NEXAR_ERR_PROTO;
}

static void worker_on_ready(nexar__link_t *c) {
  nexar_ctx_t *ctx = c->ep->owner;
  if (c->role == NEXAR__ROLE_OBSERVE) nexar__observe_ready(ctx, c);
  if (c->role != NEXAR__ROLE_MESH) return;
  if (c->is_server && c->peer >= 0) {
    if (ctx->peers[c->peer] && ctx->peers[c->peer] != c &&
        !nexar__lazy_cross(ctx, c)) {
      nexar__link_close(c, NEXAR__CLOSE_PROTO, "duplicate connection");
      c->peer = -1;
      nexar__link_fail(c, NEXAR_ERR_PROTO, "duplicate connection");
      return;
    }
    if (c->retired) return;
    ctx->peers[c->peer] = c;
    nexar__relay_unpark(ctx, c->peer);
  }
  if (ctx->boot_state >= BOOT_DONE) { /* a link made later (elastic) */
    if (c->peer >= 0) say_meshed(ctx, c->peer);
    return;
  }
  check_mesh(ctx);
}

static void worker_on_seed_data(nexar__link_t *c, const uint8_t *d, size_t n) {
  nexar_ctx_t *ctx = c->ep->owner;
  if (c->role == NEXAR__ROLE_OBSERVE) {
    nexar__observe_data(c, d, n);
    return;
  }
  if (c->role_data) { /* an admission at an elastic checkpoint */
    nexar__elastic_seed_data(c, d, n);
    return;
  }
  int r = nexar__seed_feed(c, d, n, worker_on_frame);
  if (r < 0 && c->state != NEXAR__CS_DEAD) {
    boot_fail(ctx, r, "bad message from the seed at %s: %s", c->remote_str,
              nexar_strerror(r));
    nexar__link_close(c, NEXAR__CLOSE_PROTO, nexar_strerror(r));
    nexar__link_fail(c, r, nexar_strerror(r));
  }
}

/* What the network said about the seed link |c| (may be NULL): the text
 * an error or warning about reaching the seed ends with. */
static const char *seed_cause(const nexar__link_t *c, char *out, size_t n) {
  if (c && c->port_closed)
    snprintf(out, n,
             "nothing listens at that address (ICMP port unreachable): the "
             "seed has exited or was never started");
  else if (c && c->tx_err_since)
    snprintf(out, n, "sending to it fails: %s", strerror(c->tx_errno));
  else
    snprintf(out, n, "no QUIC connection could be made");
  return out;
}

static void worker_on_closed(nexar__link_t *c) {
  nexar_ctx_t *ctx = c->ep->owner;
  if (c->role == NEXAR__ROLE_OBSERVE) {
    nexar__observe_closed(ctx, c);
    return;
  }
  if (c->role_data) {
    nexar__elastic_seed_closed(c);
    return;
  }
  if (c == ctx->seed_conn) {
    ctx->seed_conn = NULL;
    char cause[160] = "";
    if (ctx->boot_state == BOOT_SEED && !c->peer_closed &&
        (c->port_closed || c->tx_err_since))
      seed_cause(c, cause, sizeof(cause));
    if (ctx->boot_state == BOOT_SEED)
      boot_fail(ctx,
                c->err == NEXAR_ERR_PEER_FAILED ? NEXAR_ERR_TRANSPORT : c->err,
                "lost the seed at %s before the welcome: %s%s%s", c->remote_str,
                c->close_reason, cause[0] ? "; " : "", cause);
    return;
  }
  if (c->peer < 0) return;
  /* A crossing dial's loser, or an accepted link that never became the
   * peer's (lazy mesh): no one's failure. */
  nexar__lazy_gone(ctx, c);
  if (c->retired || (ctx->topo.lazy && ctx->peers[c->peer] != c)) return;
  /* A link dialled on demand (lazy mesh) to this forming process: the
   * mesh's deadline judges only the links it forms. */
  if (ctx->boot_state == BOOT_MESH && !link_peer(ctx, c->peer)) return;
  if (ctx->boot_state == BOOT_MESH) {
    boot_fail(ctx,
              c->err == NEXAR_ERR_AUTH ? NEXAR_ERR_AUTH : NEXAR_ERR_TRANSPORT,
              "rank %d: connection to rank %d at %s failed during mesh "
              "formation: %s",
              ctx->rank, c->peer, c->remote_str, c->close_reason);
    return;
  }
  nexar__ft_on_closed(ctx, c);
}

/* Every BOOT_SAY_NS without a connection to the seed: how long this
 * process has waited, of how long, and what the network says. */
#define BOOT_SAY_NS 5000000000ull
static void say_waiting(nexar_ctx_t *ctx, uint64_t now) {
  nexar__link_t *c = ctx->seed_conn;
  if (c && c->state == NEXAR__CS_READY) return;
  uint64_t begun =
      ctx->boot_deadline - (uint64_t)ctx->prm.bootstrap_timeout_ms * 1000000ull;
  if (!ctx->boot_say_at) ctx->boot_say_at = begun + BOOT_SAY_NS;
  if (now < ctx->boot_say_at) return;
  ctx->boot_say_at = now + BOOT_SAY_NS;
  char cause[160];
  NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
              "still waiting for the seed at %s (%llu s of "
              "NEXAR_BOOTSTRAP_TIMEOUT_MS=%lld): %s",
              ctx->prm.seed_addr,
              (unsigned long long)((now - begun) / 1000000000ull),
              (long long)ctx->prm.bootstrap_timeout_ms,
              seed_cause(c, cause, sizeof(cause)));
}

/* Mesh handshakes in progress with peer |r| (dialled by either side; -1:
 * accepted ones whose client has not shown its certificate yet, so whose
 * rank is not known). */
static int handshakes(nexar_ctx_t *ctx, int r) {
  int n = 0;
  for (int i = 0; i < ctx->ep.nconns; i++) {
    nexar__link_t *c = ctx->ep.conns[i];
    n += c->peer == r && c->role == NEXAR__ROLE_MESH &&
         c->state != NEXAR__CS_READY && c->state != NEXAR__CS_DEAD;
  }
  return n;
}

/* The mesh's deadline passed: the error names the links still missing and
 * how far each got (in its handshake, not yet dialled, or no connection
 * from the lower rank identified yet), as many as the message holds. */
static void mesh_timeout(nexar_ctx_t *ctx) {
  char missing[320] = "";
  size_t o = 0;
  int n = 0, shown = 0;
  for (int r = 0; r < ctx->world; r++) {
    if (!link_peer(ctx, r) ||
        (ctx->peers[r] && ctx->peers[r]->state == NEXAR__CS_READY))
      continue;
    n++;
    if (o >= sizeof(missing) - 64) continue;
    char a[64];
    struct sockaddr_storage ss;
    socklen_t sl;
    nexar__wire_to_addr(&ctx->roster[r].addr, &ss, &sl);
    nexar__addr_str((struct sockaddr *)&ss, a, sizeof(a));
    const char *how =
        handshakes(ctx, r) ? "handshake in progress"
        : r < ctx->rank ? "no connection from it, or not yet at its certificate"
                        : "not dialled yet";
    o += (size_t)snprintf(missing + o, sizeof(missing) - o, "%s%d at %s (%s)",
                          o ? ", " : "", r, a, how);
    shown++;
  }
  if (n > shown)
    snprintf(missing + o, sizeof(missing) - o, " and %d more", n - shown);
  boot_fail(ctx, NEXAR_ERR_TIMEOUT,
            "rank %d: mesh formation timed out after %lld ms "
            "(NEXAR_BOOTSTRAP_TIMEOUT_MS): %d of %d neighbours (topology %s) "
            "connected, %d accepted handshakes before the client's "
            "certificate; missing rank %s",
            ctx->rank, (long long)ctx->prm.bootstrap_timeout_ms,
            connected_peers(ctx), mesh_peers(ctx), ctx->topo.name,
            handshakes(ctx, -1), missing);
}

static void worker_on_tick(nexar__ep_t *ep, uint64_t now) {
  nexar_ctx_t *ctx = ep->owner;
  if (ctx->boot_state >= BOOT_DONE) {
    nexar__ft_tick(ctx, now);
    nexar__observe_tick(ctx, now);
    if (ctx->flight) nexar__flight_poll(ctx);
    if (ctx->world_comm) ctx->hooks->coll_tick(ctx->world_comm, now);
    for (int i = 0; i < ctx->ncomms; i++)
      ctx->hooks->coll_tick(ctx->comms[i], now);
    return;
  }
  if (ctx->boot_state == BOOT_SEED && now < ctx->boot_deadline)
    say_waiting(ctx, now);
  /* The next dials, outside any link's callback. */
  if (ctx->boot_state == BOOT_MESH && now < ctx->boot_deadline) {
    int rc = dial_more(ctx);
    if (rc < 0) {
      boot_fail(ctx, rc, "rank %d: cannot dial the next neighbours: %s",
                ctx->rank, nexar_strerror(rc));
      return;
    }
  }
  /* Not begun (boot_begin sets the deadline), or not yet due. */
  if (!ctx->boot_state || now < ctx->boot_deadline) return;
  /* While connected to the seed, give its verdict (which names the missing
   * ranks) 2 s to arrive before reporting our own timeout; a pending joiner
   * gets no verdict. */
  if (ctx->boot_state == BOOT_SEED && ctx->seed_conn &&
      ctx->seed_conn->state == NEXAR__CS_READY && !ctx->prm.join &&
      now < ctx->boot_deadline + 2000000000ull)
    return;
  if (ctx->boot_state == BOOT_SEED) {
    bool up = ctx->seed_conn && ctx->seed_conn->state == NEXAR__CS_READY;
    char cause[160];
    seed_cause(ctx->seed_conn, cause, sizeof(cause));
    /* Tell the seed: a pending joiner is then forgotten at once, not when
     * its connection idles out (the close goes out in this pass). */
    if (ctx->seed_conn)
      nexar__link_close(ctx->seed_conn, NEXAR__CLOSE_OK, "bootstrap timed out");
    boot_fail(ctx, NEXAR_ERR_TIMEOUT,
              "bootstrap timed out after %lld ms: no welcome from the seed "
              "at %s (%s)",
              (long long)ctx->prm.bootstrap_timeout_ms, ctx->prm.seed_addr,
              !up ? cause
              : ctx->prm.join
                  ? "connected and pending as a joiner; no elastic checkpoint "
                    "of the members admitted it"
                  : "connected; the seed is still waiting for other workers");
    return;
  }
  mesh_timeout(ctx);
}

/* Whether a connection from member |r| is taken: a lower neighbour's, or
 * on a lazy mesh any live member's. */
static bool accepts(nexar_ctx_t *ctx, int r) {
  if (ctx->topo.lazy) return r != ctx->rank && !ctx->dead[r];
  return r < ctx->rank && link_peer(ctx, r);
}

static int worker_verify_client(nexar__ep_t *ep, const uint8_t *fp) {
  nexar_ctx_t *ctx = ep->owner;
  if (!ctx->roster) return -1;
  /* Only lower neighbours dial us, and only members of our world; on a
   * lazy mesh any member may (p2p/lazy.c). */
  for (int r = 0; r < ctx->world; r++)
    if (accepts(ctx, r) &&
        nexar__ct_equal(ctx->roster[r].fingerprint, fp, NEXAR__FP_BYTES))
      return r;
  return -1;
}

/* An observer (live inspection, observe.c), once the mesh is formed. */
static int worker_verify_observer(nexar__ep_t *ep) {
  nexar_ctx_t *ctx = ep->owner;
  return ctx->boot_state >= BOOT_DONE ? nexar__observe_admit(ctx) : -1;
}

/* A same-host transport's peer: the roster member below us (only lower
 * neighbours dial; any member on a lazy mesh) with this fingerprint, host
 * key and pid. */
static int worker_verify_local(nexar__ep_t *ep, const uint8_t *fp,
                               uint32_t pid) {
  nexar_ctx_t *ctx = ep->owner;
  if (!ctx->roster || !ctx->host.key) return -1;
  /* The pid (vouched for by the kernel) picks the candidates cheaply; the
   * fingerprint is then compared in constant time. */
  for (int r = 0; r < ctx->world; r++)
    if (ctx->roster[r].host.pid == pid &&
        ctx->roster[r].host.key == ctx->host.key && accepts(ctx, r) &&
        nexar__ct_equal(ctx->roster[r].fingerprint, fp, NEXAR__FP_BYTES))
      return r;
  return -1;
}

/* An ICMP destination-unreachable report for a datagram to |to|: a port
 * unreachable marks every connection to that address (a seed that is not
 * there is said once, while the bootstrap goes on until its deadline; a
 * mesh peer's goes to the failure detector). */
static void worker_on_unreachable(nexar__ep_t *ep,
                                  const struct sockaddr_storage *to, int err) {
  nexar_ctx_t *ctx = ep->owner;
  if (err != ECONNREFUSED) return; /* path trouble: the heartbeat judges */
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *c = ep->conns[i];
    if (!nexar__addr_equal(&c->remote, to)) continue;
    bool first = !c->port_closed;
    c->port_closed = true;
    if (first && c == ctx->seed_conn && ctx->boot_state == BOOT_SEED) {
      char cause[160];
      NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                  "no reply from the seed at %s: %s; trying until "
                  "NEXAR_BOOTSTRAP_TIMEOUT_MS=%lld ends",
                  c->remote_str, seed_cause(c, cause, sizeof(cause)),
                  (long long)ctx->prm.bootstrap_timeout_ms);
    }
  }
  if (ctx->boot_state >= BOOT_DONE) nexar__ft_on_unreachable(ctx, to);
}

static void worker_on_resume(nexar__ep_t *ep, uint64_t idle_ns) {
  nexar_ctx_t *ctx = ep->owner;
  if (ctx->boot_state >= BOOT_DONE) nexar__ft_on_resume(ctx, idle_ns);
}

const nexar__ep_ops_t nexar__worker_ops = {
    .on_ready = worker_on_ready,
    .on_seed_data = worker_on_seed_data,
    .on_closed = worker_on_closed,
    .on_tick = worker_on_tick,
    .verify_client = worker_verify_client,
    .verify_observer = worker_verify_observer,
    .verify_local = worker_verify_local,
    .on_unreachable = worker_on_unreachable,
    .on_resume = worker_on_resume,
    .peer_release = nexar__peer_release,
    .on_teardown = nexar__p2p_conn_teardown,
    NEXAR__P2P_FRAME_OPS,
};

static int boot_begin(nexar__req_t *req) {
  nexar_ctx_t *ctx = req->cb_arg;
  ctx->boot_deadline =
      nexar__now() + (uint64_t)ctx->prm.bootstrap_timeout_ms * 1000000ull;
  const struct sockaddr_storage ss = ctx->seed_ss;
  socklen_t sl = ctx->seed_sl;
  if (ss.ss_family != ctx->ep.local.ss_family) {
    boot_fail(ctx, NEXAR_ERR_INVALID_ARG,
              "NEXAR_BIND_ADDR='%s' is an IPv%c address but NEXAR_SEED='%s' "
              "is IPv%c: the socket cannot reach the seed",
              ctx->prm.bind_addr,
              ctx->ep.local.ss_family == AF_INET6 ? '6' : '4',
              ctx->prm.seed_addr, ss.ss_family == AF_INET6 ? '6' : '4');
    return 0;
  }
  boot_set(ctx, BOOT_SEED);
  nexar__dial_t d = {&ss, sl, NEXAR__ROLE_SEED, -1, NULL, NULL};
  int rc = nexar__link_dial(&ctx->ep, &d, &ctx->seed_conn);
  if (rc < 0)
    boot_fail(ctx, rc, "cannot start a connection to the seed at %s",
              ctx->prm.seed_addr);
  return 0;
}

/* The address setting |name|=|value| (host names resolved here, outside
 * the engine, in the family of the local socket) into |ss|; the port when
 * it has none: |port|. */
static int resolve_setting(nexar_ctx_t *ctx, const char *name,
                           const char *value, int port,
                           struct sockaddr_storage *ss, socklen_t *sl) {
  char why[128];
  int family = ctx->ep.local.ss_family;
  if (nexar__resolve_addr(value, port, family, ss, sl, why, sizeof(why)) == 0)
    return 0;
  nexar__set_init_error(
      "nexar_init: %s='%s' has no IPv%c address (%s; NEXAR_BIND_ADDR='%s')",
      name, value, family == AF_INET6 ? '6' : '4', why, ctx->prm.bind_addr);
  return NEXAR_ERR_INVALID_ARG;
}

int nexar__bootstrap(nexar_ctx_t *ctx) {
  uint64_t t0 = nexar__now();
  /* No port in NEXAR_ADVERTISE_ADDR: the bound one. */
  int port = ntohs(((struct sockaddr_in *)&ctx->ep.local)->sin_port);
  if (resolve_setting(ctx, "NEXAR_SEED", ctx->prm.seed_addr, 0, &ctx->seed_ss,
                      &ctx->seed_sl) < 0 ||
      (ctx->prm.advertise_addr &&
       resolve_setting(ctx, "NEXAR_ADVERTISE_ADDR", ctx->prm.advertise_addr,
                       port, &ctx->advertise_ss, &ctx->advertise_sl) < 0))
    return NEXAR_ERR_INVALID_ARG;
  nexar__ep_call(&ctx->ep, boot_begin, ctx, UINT64_MAX);
  nexar__ep_t *ep = &ctx->ep;
  pthread_mutex_lock(&ep->cmu);
  while (ctx->boot_state < BOOT_DONE) pthread_cond_wait(&ep->ccv, &ep->cmu);
  pthread_mutex_unlock(&ep->cmu);
  if (ctx->boot_state == BOOT_FAILED) {
    nexar__set_init_error("nexar_init: %s", ctx->boot_err);
    return ctx->boot_rc;
  }
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP, "rank %d: bootstrap took %.1f ms",
              ctx->rank, (double)(nexar__now() - t0) / 1e6);
  return 0;
}
