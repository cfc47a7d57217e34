/*
 * Failure detection and notification (docs/fault-tolerance.md).
 *
 * Detector: liveness is judged by what is received. Every datagram a
 * connection processes stamps conn->last_rx; a connection that has received
 * nothing for a heartbeat interval sends a QUIC PING (quic.c), which a live
 * peer acknowledges, so the heartbeat needs no stream and waits behind no
 * queue. A peer not heard from for NEXAR_HEARTBEAT_TIMEOUT_MS (SIGSTOP, a
 * hung host, a cut link) or whose connection breaks (SIGKILL, abort) is
 * declared failed.
 *
 * Declaration (engine, idempotent, monotonic): the operations that need the
 * process fail with NEXAR_ERR_PEER_FAILED, every communicator containing it
 * is revoked, its connection is closed with NEXAR__CLOSE_FENCED (a process
 * that was only slow learns that it is out when it runs again), every other
 * live process gets a FAILED notice and declares it too (so the others'
 * operations fail with NEXAR_ERR_REVOKED within a round trip, not a
 * timeout), and the application is told through nexar_failures and the
 * failure handler, which runs on the service thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nexar_int.h"

static const char *reason_text(int reason) {
  switch (reason) {
    case NEXAR_FAIL_HEARTBEAT:
      return "heartbeat timeout";
    case NEXAR_FAIL_CONNECTION:
      return "connection lost";
    case NEXAR_FAIL_REPORTED:
      return "reported by another member";
  }
  return "unknown";
}

int nexar__ft_init(nexar_ctx_t *ctx, char *err, size_t errlen) {
  const char *r = ctx->prm.recovery;
  if (!strcmp(r, "abort"))
    ctx->recovery = NEXAR__RECOVERY_ABORT;
  else if (!strcmp(r, "manual"))
    ctx->recovery = NEXAR__RECOVERY_MANUAL;
  else if (!strcmp(r, "automatic"))
    ctx->recovery = NEXAR__RECOVERY_AUTOMATIC;
  else {
    snprintf(err, errlen,
             "NEXAR_RECOVERY='%s' is not one of abort, manual, automatic", r);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (ctx->prm.heartbeat_timeout_ms <= ctx->prm.heartbeat_ms) {
    snprintf(err, errlen,
             "NEXAR_HEARTBEAT_TIMEOUT_MS=%lld must be larger than "
             "NEXAR_HEARTBEAT_MS=%lld",
             (long long)ctx->prm.heartbeat_timeout_ms,
             (long long)ctx->prm.heartbeat_ms);
    return NEXAR_ERR_INVALID_ARG;
  }
  ctx->hb_timeout_ns = (uint64_t)ctx->prm.heartbeat_timeout_ms * 1000000ull;
  pthread_mutex_init(&ctx->fmu, NULL);
  return 0;
}

void nexar__ft_fini(nexar_ctx_t *ctx) {
  pthread_mutex_destroy(&ctx->fmu);
  free(ctx->failures);
  ctx->failures = NULL;
}

static void id_addr(nexar_ctx_t *ctx, int id, char *out, size_t n) {
  struct sockaddr_storage ss;
  socklen_t sl;
  snprintf(out, n, "?");
  if (ctx->roster && nexar__wire_to_addr(&ctx->roster[id].addr, &ss, &sl) == 0)
    nexar__addr_str((struct sockaddr *)&ss, out, n);
}

/* Appends to the list the application reads and wakes the service thread,
 * which calls the handler. */
static void record(nexar_ctx_t *ctx, int id, int reason, int reporter) {
  pthread_mutex_lock(&ctx->fmu);
  int n = atomic_load(&ctx->nfail);
  /* Each id fails once, so the list never outgrows the id count. */
  nexar_failure_t *f = realloc(ctx->failures, (size_t)(n + 1) * sizeof(*f));
  if (f) {
    ctx->failures = f;
    f += n;
    memset(f, 0, sizeof(*f));
    f->id = id;
    f->reporter = reporter;
    f->reason = reason;
    f->when_ns = nexar__now();
    id_addr(ctx, id, f->addr, sizeof(f->addr));
    atomic_store(&ctx->nfail, n + 1);
  }
  pthread_mutex_unlock(&ctx->fmu);
  pthread_mutex_lock(&ctx->rpc.mu);
  pthread_cond_broadcast(&ctx->rpc.cv);
  pthread_mutex_unlock(&ctx->rpc.mu);
}

/* Applies |fn| to the world and every registered communicator. */
#define FOR_EACH_COMM(ctx, cm, body)                                    \
  do {                                                                  \
    for (int i_ = -1; i_ < (ctx)->ncomms; i_++) {                       \
      nexar_comm_t *cm = i_ < 0 ? (ctx)->world_comm : (ctx)->comms[i_]; \
      if (!cm) continue;                                                \
      body;                                                             \
    }                                                                   \
  } while (0)

/* Closes every link with |code| / |reason|, then fails what waits on any
 * peer with |err| / |why|. Links first: a send cancelled while its link
 * was up ends only once the link is down (p2p/match.c omsg_end). */
static void end_links(nexar_ctx_t *ctx, int code, const char *reason, int err,
                      const char *why) {
  for (int id = 0; ctx->peers && id < ctx->world; id++) {
    nexar__conn_t *c = ctx->peers[id];
    if (!c || id == ctx->rank) continue;
    nexar__conn_close(c, code, reason);
    nexar__conn_fail(c, err, reason);
  }
  for (int id = 0; ctx->peers && id < ctx->world; id++)
    if (id != ctx->rank) nexar__p2p_fail_peer(ctx, id, err, why);
}

/* Another member declared this process failed: it is fenced out. */
static void fence_self(nexar_ctx_t *ctx, int by, const char *detail) {
  if (ctx->fenced) return;
  ctx->fenced = true;
  char why[NEXAR__ERRMSG_MAX];
  snprintf(why, sizeof(why),
           "rank %d: this process was declared failed by process %d (%s) "
           "and is fenced out of every communicator: it can only finalize",
           ctx->rank, by, detail);
  NEXAR__WARN(NEXAR__SUB_INIT, "%s", why);
  FOR_EACH_COMM(ctx, cm, nexar__comm_revoke(cm, NEXAR_ERR_EXCLUDED, why));
  end_links(ctx, NEXAR__CLOSE_ABORT, "fenced out", NEXAR_ERR_EXCLUDED, why);
  nexar__agree_on_failure(ctx);
}

void nexar__declare_failed(nexar_ctx_t *ctx, int id, int reason, int reporter,
                           const char *detail) {
  if (id < 0 || id >= ctx->world || ctx->fenced || atomic_load(&ctx->aborted) ||
      ctx->finalizing)
    return;
  if (id == ctx->rank) {
    fence_self(ctx, reporter, detail);
    return;
  }
  if (ctx->dead[id]) return; /* known failed, or departed */
  ctx->dead[id] = 1;
  char addr[64], what[256], why[NEXAR__ERRMSG_MAX];
  id_addr(ctx, id, addr, sizeof(addr));
  snprintf(what, sizeof(what), "process %d at %s failed (%s: %s)", id, addr,
           reason_text(reason), detail);
  NEXAR__WARN(NEXAR__SUB_INIT, "rank %d: %s", ctx->rank, what);
  record(ctx, id, reason, reporter);
  /* Fence it: a process that was only silent learns it is out. */
  nexar__conn_t *c = ctx->peers[id];
  if (c && c->state != NEXAR__CS_DEAD) {
    char r[64];
    snprintf(r, sizeof(r), "declared failed by process %d", ctx->rank);
    nexar__conn_close(c, NEXAR__CLOSE_FENCED, r);
    nexar__conn_fail(c, NEXAR_ERR_PEER_FAILED, what);
  }
  nexar__p2p_fail_peer(ctx, id, NEXAR_ERR_PEER_FAILED, what);
  int code =
      reason == NEXAR_FAIL_REPORTED ? NEXAR_ERR_REVOKED : NEXAR_ERR_PEER_FAILED;
  bool all = ctx->recovery == NEXAR__RECOVERY_ABORT;
  FOR_EACH_COMM(ctx, cm, {
    int pr = nexar__comm_rank_of(cm, id);
    /* Sparse topology: a communicator whose messages cross other processes
     * may have lost some with the failed one (docs/topology.md). */
    bool relayed = pr < 0 && nexar__topo_comm_relayed(cm);
    if (!all && pr < 0 && !relayed) continue;
    char peer[48] = "";
    if (pr >= 0) snprintf(peer, sizeof(peer), " (its rank %d here)", pr);
    if (relayed)
      snprintf(peer, sizeof(peer), " (it may have relayed messages here)");
    snprintf(
        why, sizeof(why),
        "rank %d of communicator %llu (epoch %u): %s%s; the operation "
        "failed (its receive buffers are unspecified)%s",
        cm->rank, (unsigned long long)cm->id, cm->epoch, what, peer,
        all ? " and NEXAR_RECOVERY=abort: only nexar_finalize may follow" : "");
    nexar__comm_revoke(cm, code, why);
  });
  /* Tell every other live process (each forwards once: the notice reaches
   * everyone even when its first sender dies half-way). */
  uint8_t pl[NEXAR__FAILED_BYTES];
  nexar__put_u32(pl, (uint32_t)id);
  nexar__put_u32(pl + 4, (uint32_t)reason);
  nexar__hdr_t h = {.kind = NEXAR__KIND_FAILED,
                    .comm_id = NEXAR__PROC_ID,
                    .src_rank = (uint32_t)ctx->rank};
  for (int p = 0; p < ctx->world; p++)
    if (p != ctx->rank && !ctx->dead[p] &&
        nexar__topo_adjacent(&ctx->topo, ctx->rank, p))
      nexar__ctl_send(ctx, p, &h, pl, sizeof(pl));
  nexar__agree_on_failure(ctx);
  /* New routes around it (topology.c); on a sparse graph the notice above
   * went to the neighbours only and floods on from each of them. */
  nexar__topo_on_failure(ctx);
}

void nexar__ft_on_closed(nexar_ctx_t *ctx, nexar__conn_t *c) {
  int id = c->peer;
  if (id < 0 || id >= ctx->world || ctx->dead[id]) return;
  char detail[200];
  snprintf(detail, sizeof(detail), "%s%s",
           c->peer_closed ? "it closed the connection: " : "",
           c->close_reason[0] ? c->close_reason : "no reason given");
  if (c->peer_closed && c->close_code == NEXAR__CLOSE_FENCED) {
    fence_self(ctx, id, detail);
    return;
  }
  if (c->peer_closed && (c->close_code == NEXAR__CLOSE_OK ||
                         c->close_code == NEXAR__CLOSE_LEFT)) {
    /* Finalized or left: not a failure, but whatever waits on it ends. */
    ctx->dead[id] = 2;
    char why[256];
    snprintf(why, sizeof(why), "rank %d at %s: %s", id, c->remote_str, detail);
    nexar__p2p_fail_peer(ctx, id, NEXAR_ERR_PEER_FAILED, why);
    nexar__topo_on_failure(ctx);
    return;
  }
  nexar__declare_failed(ctx, id, NEXAR_FAIL_CONNECTION, ctx->rank, detail);
}

static bool same_addr(const struct sockaddr_storage *a,
                      const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return false;
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
    return x->sin_port == y->sin_port &&
           x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
  return x->sin6_port == y->sin6_port &&
         !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
}

void nexar__ft_on_unreachable(nexar__ep_t *ep,
                              const struct sockaddr_storage *to) {
  nexar_ctx_t *ctx = ep->owner;
  /* Only a formed mesh: during bootstrap the deadline names who is
   * missing. */
  if (!ctx->prm.icmp_detect || !ctx->world_comm || !ctx->dead ||
      !ctx->ep.accept_mesh)
    return;
  for (int id = 0; id < ctx->world; id++) {
    nexar__conn_t *c = ctx->peers[id];
    if (!c || ctx->dead[id] || c->state != NEXAR__CS_READY ||
        !same_addr(&c->remote, to))
      continue;
    nexar__declare_failed(ctx, id, NEXAR_FAIL_CONNECTION, ctx->rank,
                          "its UDP port is closed (ICMP port unreachable): "
                          "the process is gone");
  }
}

void nexar__ft_tick(nexar_ctx_t *ctx, uint64_t now) {
  if (ctx->fenced || atomic_load(&ctx->aborted) || ctx->finalizing) return;
  /* Judge only once what is queued has been read: the peers' verdict on
   * this process (a fencing close) may be waiting in the socket. */
  if (ctx->ep.rx_more) return;
  uint64_t last = ctx->last_tick;
  ctx->last_tick = now;
  if (last && now - last > ctx->hb_timeout_ns / 2) {
    /* This process itself did not run (SIGSTOP, a paused VM): silence
     * from the peers meanwhile proves nothing. Give them a full timeout
     * from now. */
    NEXAR__WARN(NEXAR__SUB_INIT,
                "rank %d: this process did not run for %llu ms; peers get a "
                "fresh heartbeat timeout",
                ctx->rank, (unsigned long long)((now - last) / 1000000ull));
    for (int id = 0; id < ctx->world; id++)
      if (ctx->peers[id]) ctx->peers[id]->last_rx = now;
    return;
  }
  /* The scan over the peers runs a few times per timeout, not on every
   * pass (passes come once per message on a busy engine). */
  if (now < ctx->hb_scan_at) return;
  ctx->hb_scan_at = now + ctx->hb_timeout_ns / 32;
  for (int id = 0; id < ctx->world; id++) {
    nexar__conn_t *c = ctx->peers[id];
    if (!c || ctx->dead[id] || c->state != NEXAR__CS_READY) continue;
    if (now < c->last_rx + ctx->hb_timeout_ns) continue;
    char detail[128];
    snprintf(detail, sizeof(detail),
             "nothing received for %llu ms (NEXAR_HEARTBEAT_TIMEOUT_MS=%lld)",
             (unsigned long long)((now - c->last_rx) / 1000000ull),
             (long long)ctx->prm.heartbeat_timeout_ms);
    nexar__declare_failed(ctx, id, NEXAR_FAIL_HEARTBEAT, ctx->rank, detail);
  }
}

void nexar__ft_on_ctl(nexar_ctx_t *ctx, int from, const nexar__hdr_t *h,
                      const uint8_t *payload, size_t len) {
  if (from < 0 || from >= ctx->world || ctx->dead[from] == 1) return;
  if (h->kind == NEXAR__KIND_AGREE) {
    nexar__agree_on_msg(ctx, from, h, payload, len);
    return;
  }
  if (len != NEXAR__FAILED_BYTES) return;
  uint32_t id = nexar__get_u32(payload);
  uint32_t reason = nexar__get_u32(payload + 4);
  if (id >= (uint32_t)ctx->world) return;
  char detail[128];
  snprintf(detail, sizeof(detail), "process %d reported it (%s)", from,
           reason_text((int)reason));
  nexar__declare_failed(ctx, (int)id, NEXAR_FAIL_REPORTED, from, detail);
}

void nexar__ft_dispatch(nexar_ctx_t *ctx, int *seen) {
  while (*seen < atomic_load(&ctx->nfail)) {
    pthread_mutex_lock(&ctx->fmu);
    nexar_failure_t f = ctx->failures[*seen];
    nexar_failure_fn fn = ctx->fail_fn;
    void *ud = ctx->fail_ud;
    pthread_mutex_unlock(&ctx->fmu);
    (*seen)++;
    if (fn) fn(ctx, &f, ud);
  }
}

int nexar__ft_after(nexar_comm_t *comm, int rc) {
  if (rc != NEXAR_ERR_PEER_FAILED && rc != NEXAR_ERR_REVOKED) return rc;
  nexar_ctx_t *ctx = comm->ctx;
  if (ctx->recovery != NEXAR__RECOVERY_AUTOMATIC || ctx->no_recovery) return rc;
  /* Each round removes at least one process, so size rounds suffice. */
  for (int i = 0; i <= comm->size; i++) {
    int why = atomic_load(&comm->revoked);
    if (why != NEXAR_ERR_PEER_FAILED && why != NEXAR_ERR_REVOKED) break;
    int r = nexar__recover(comm, NULL);
    if (r < 0) return r;
  }
  return rc;
}

/* ---- Public API ---- */

int nexar_set_failure_handler(nexar_ctx_t *ctx, nexar_failure_fn fn,
                              void *user_data) {
  if (!ctx) return NEXAR_ERR_INVALID_ARG;
  pthread_mutex_lock(&ctx->fmu);
  ctx->fail_fn = fn;
  ctx->fail_ud = user_data;
  pthread_mutex_unlock(&ctx->fmu);
  return NEXAR_OK;
}

int nexar_failures(nexar_ctx_t *ctx, nexar_failure_t *out, int max,
                   int *count) {
  if (!ctx || !count || max < 0 || (max > 0 && !out))
    return NEXAR_ERR_INVALID_ARG;
  pthread_mutex_lock(&ctx->fmu);
  int n = atomic_load(&ctx->nfail);
  for (int i = 0; i < n && i < max; i++) out[i] = ctx->failures[i];
  pthread_mutex_unlock(&ctx->fmu);
  *count = n;
  return NEXAR_OK;
}

int nexar_comm_id_of(const nexar_comm_t *comm, int rank, int *id) {
  if (!comm || !id || rank < 0 || rank >= comm->size)
    return NEXAR_ERR_INVALID_ARG;
  *id = comm->world_ranks[rank];
  return NEXAR_OK;
}

int nexar_comm_epoch(const nexar_comm_t *comm, uint32_t *epoch) {
  if (!comm || !epoch) return NEXAR_ERR_INVALID_ARG;
  *epoch = comm->epoch;
  return NEXAR_OK;
}

static int abort_fn(nexar__req_t *ctl) {
  nexar_ctx_t *ctx = ctl->cb_arg;
  char why[NEXAR__ERRMSG_MAX], r[64];
  snprintf(why, sizeof(why),
           "rank %d: nexar_abort was called; only nexar_finalize may follow",
           ctx->rank);
  snprintf(r, sizeof(r), "rank %d aborted", ctx->rank);
  NEXAR__WARN(NEXAR__SUB_INIT, "%s", why);
  FOR_EACH_COMM(ctx, cm, nexar__comm_revoke(cm, NEXAR_ERR_ABORTED, why));
  end_links(ctx, NEXAR__CLOSE_ABORT, r, NEXAR_ERR_ABORTED, why);
  nexar__agree_on_failure(ctx);
  return 0;
}

int nexar_abort(nexar_ctx_t *ctx) {
  if (!ctx) return NEXAR_ERR_INVALID_ARG;
  if (atomic_exchange(&ctx->aborted, true)) return NEXAR_OK;
  /* Engine passes are short and never wait for a peer: this returns as
   * soon as the engine has run it once. */
  nexar__ep_call(&ctx->ep, abort_fn, ctx, UINT64_MAX);
  return NEXAR_OK;
}
