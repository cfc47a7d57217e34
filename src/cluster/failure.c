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
 * failure handler, which runs on an RPC handler thread.
 *
 * A peer this process cannot send to (no route: the sends fail, whether or
 * not its packets still arrive) is declared failed once that has lasted
 * half a heartbeat timeout (quic.c records the spell in
 * conn->tx_err_since).
 *
 * Resuming (engine.c catch_up): a process that did not run for a while
 * reads everything queued before it judges anyone, so the peers' fencing
 * closes come first. One that did not run for so long that its peers may
 * have declared it failed (a heartbeat timeout less one interval) also
 * proves it is still a member before going on: every live neighbour must
 * acknowledge a probe sent after the resume, within a heartbeat timeout.
 * A neighbour that cannot (its process is gone, its link closed, no
 * answer) may have declared this process failed and moved on without it,
 * so this process fences itself (NEXAR_ERR_EXCLUDED) instead of judging
 * that neighbour: a paused process never carries on beside the group
 * that excluded it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"

static const char *reason_text(int reason) {
  switch (reason) {
    case NEXAR_FAIL_HEARTBEAT:
      return "heartbeat timeout";
    case NEXAR_FAIL_CONNECTION:
      return "connection lost";
    case NEXAR_FAIL_REPORTED:
      return "reported by another member";
    case NEXAR_FAIL_UNREACHABLE:
      return "no route to it";
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
  /* NEXAR_HEARTBEAT_TIMEOUT_MS > NEXAR_HEARTBEAT_MS is checked with the
   * other rules between settings, in nexar__params_check. */
  ctx->hb_timeout_ns = (uint64_t)ctx->prm.heartbeat_timeout_ms * 1000000ull;
  /* Peers hear from a running process at least once per heartbeat
   * interval, so they may declare it failed once it has been silent for a
   * timeout less one interval. */
  uint64_t hb_ns = (uint64_t)ctx->prm.heartbeat_ms * 1000000ull;
  ctx->rs_check_ns = ctx->hb_timeout_ns - hb_ns;
  ctx->rs_fail_id = -1;
  pthread_mutex_init(&ctx->fmu, NULL);
  return 0;
}

uint64_t nexar__ft_pause_ns(const nexar_ctx_t *ctx) {
  uint64_t half = ctx->hb_timeout_ns / 2;
  return ctx->rs_check_ns < half ? ctx->rs_check_ns : half;
}

void nexar__ft_fini(nexar_ctx_t *ctx) {
  ctx->rs_active = false; /* probes still completing find nothing to do */
  free(ctx->rs_need);
  ctx->rs_need = NULL;
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

/* Appends to the list the application reads and wakes the handler threads,
 * one of which calls the handler. */
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
  ctx->hooks->rpc_wake(ctx);
}

/* Closes every link with |code| / |reason|, then fails what waits on any
 * peer with |err| / |why|. Links first: a send cancelled while its link
 * was up ends only once the link is down (p2p/match.c omsg_end). */
static void end_links(nexar_ctx_t *ctx, int code, const char *reason, int err,
                      const char *why) {
  for (int id = 0; ctx->peers && id < ctx->world; id++) {
    nexar__link_t *c = ctx->peers[id];
    if (!c || id == ctx->rank) continue;
    nexar__link_close(c, code, reason);
    nexar__link_fail(c, err, reason);
  }
  for (int id = 0; ctx->peers && id < ctx->world; id++)
    if (id != ctx->rank) nexar__p2p_fail_peer(ctx, id, err, why);
}

/* This process is out: every communicator fails with NEXAR_ERR_EXCLUDED
 * and |why|, every link closes. */
static void fence(nexar_ctx_t *ctx, const char *why) {
  if (ctx->fenced) return;
  ctx->fenced = true;
  ctx->rs_active = false;
  NEXAR__INFO(NEXAR__SUB_INIT, "%s", why);
  NEXAR__FOR_EACH_COMM(ctx, cm,
                       nexar__comm_revoke(cm, NEXAR_ERR_EXCLUDED, why));
  end_links(ctx, NEXAR__CLOSE_ABORT, "fenced out", NEXAR_ERR_EXCLUDED, why);
  nexar__agree_on_failure(ctx);
}

/* Another member declared this process failed: it is fenced out. */
static void fence_self(nexar_ctx_t *ctx, int by, const char *detail) {
  char why[NEXAR__ERRMSG_MAX];
  snprintf(why, sizeof(why),
           "rank %d: this process was declared failed by process %d (%s) "
           "and is fenced out of every communicator: it can only finalize",
           ctx->rank, by, detail);
  fence(ctx, why);
}

/* A resumed process could not prove that neighbour |id| still counts it as
 * a member: it fences itself (see the top of this file). */
static void resume_fail(nexar_ctx_t *ctx, int id, const char *detail) {
  char addr[64], why[NEXAR__ERRMSG_MAX];
  id_addr(ctx, id, addr, sizeof(addr));
  snprintf(why, sizeof(why),
           "rank %d: this process did not run for %llu ms, long enough for "
           "its peers to declare it failed (NEXAR_HEARTBEAT_TIMEOUT_MS=%lld), "
           "and process %d at %s cannot confirm that it is still a member "
           "(%s): it is fenced out of every communicator and can only "
           "finalize",
           ctx->rank, (unsigned long long)(ctx->rs_paused / 1000000ull),
           (long long)ctx->prm.heartbeat_timeout_ms, id, addr, detail);
  fence(ctx, why);
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
  if (reason != NEXAR_FAIL_REPORTED) ctx->dead_how[id] = (uint8_t)reason;
  if (ctx->rs_active && reason != NEXAR_FAIL_REPORTED && id < ctx->rs_n &&
      ctx->rs_need[id]) {
    /* Resuming: this process judges no one it still needs an answer
     * from; a neighbour that seems gone may have excluded it. */
    resume_fail(ctx, id, detail);
    return;
  }
  ctx->dead[id] = 1;
  char addr[64], what[256], why[NEXAR__ERRMSG_MAX];
  id_addr(ctx, id, addr, sizeof(addr));
  snprintf(what, sizeof(what), "process %d at %s failed (%s: %s)", id, addr,
           reason_text(reason), detail);
  NEXAR__INFO(NEXAR__SUB_INIT, "rank %d: %s", ctx->rank, what);
  record(ctx, id, reason, reporter);
  /* Fence it: a process that was only silent learns it is out. */
  nexar__link_t *c = ctx->peers[id];
  if (c && c->state != NEXAR__CS_DEAD) {
    char r[64];
    snprintf(r, sizeof(r), "declared failed by process %d", ctx->rank);
    nexar__link_close(c, NEXAR__CLOSE_FENCED, r);
    nexar__link_fail(c, NEXAR_ERR_PEER_FAILED, what);
  }
  nexar__p2p_fail_peer(ctx, id, NEXAR_ERR_PEER_FAILED, what);
  int code =
      reason == NEXAR_FAIL_REPORTED ? NEXAR_ERR_REVOKED : NEXAR_ERR_PEER_FAILED;
  bool all = ctx->recovery == NEXAR__RECOVERY_ABORT;
  NEXAR__FOR_EACH_COMM(ctx, cm, {
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
  nexar__put_u32(pl + 4,
                 ctx->dead_how[id] ? ctx->dead_how[id] : (uint32_t)reason);
  nexar__hdr_t h = {.kind = NEXAR__KIND_FAILED,
                    .comm_id = NEXAR__PROC_ID,
                    .src_rank = (uint32_t)ctx->rank};
  for (int p = 0; p < ctx->world; p++)
    if (p != ctx->rank && !ctx->dead[p] &&
        nexar__topo_linked(&ctx->topo, ctx->rank, p))
      nexar__ctl_send(ctx, p, &h, pl, sizeof(pl));
  nexar__agree_on_failure(ctx);
  /* New routes around it (topology.c); on a sparse graph (and over a lazy
   * mesh's hypercube) the notice above went to the neighbours only and
   * floods on from each of them. */
  nexar__topo_on_failure(ctx);
}

void nexar__ft_on_closed(nexar_ctx_t *ctx, nexar__link_t *c) {
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

#define PORT_CLOSED_DETAIL \
  "its UDP port is closed (ICMP port unreachable): the process is gone"

void nexar__ft_on_unreachable(nexar_ctx_t *ctx,
                              const struct sockaddr_storage *to) {
  /* Only a formed mesh: during bootstrap the deadline names who is
   * missing. While a resumed process reads what was queued, reports are
   * only recorded (conn->port_closed) and judged by nexar__ft_on_resume. */
  if (!ctx->prm.icmp_detect || !ctx->world_comm || !ctx->dead ||
      !ctx->ep.accept_mesh || ctx->ep.resuming)
    return;
  /* From the start of nexar_finalize a closed port is only recorded. A
   * peer that finalized first has closed its socket once what it sent was
   * acknowledged, and its CONNECTION_CLOSE may be lost: an ACK this process
   * still sends it comes back unreachable, and judging that failed the
   * final barrier of a process that needed nothing more from the peer
   * (test_loss at 30 % loss, once in about 15 runs). A peer that died
   * while this one still waits for it in the final barrier falls silent,
   * and the heartbeat judges it (NEXAR_HEARTBEAT_TIMEOUT_MS). */
  if (ctx->no_recovery) return;
  for (int id = 0; id < ctx->world; id++) {
    nexar__link_t *c = ctx->peers[id];
    /* A lazy mesh's link in its handshake: proof that the dial fails. */
    bool dialling = ctx->topo.lazy && c && c->state == NEXAR__CS_HANDSHAKE;
    if (!c || ctx->dead[id] || (c->state != NEXAR__CS_READY && !dialling) ||
        !nexar__addr_equal(&c->remote, to))
      continue;
    nexar__declare_failed(ctx, id, NEXAR_FAIL_CONNECTION, ctx->rank,
                          PORT_CLOSED_DETAIL);
  }
}

/* A membership probe (nexar__ctl_probe) ended: acknowledged, or its link
 * failed. Runs inside the engine's completion paths, so it only records;
 * nexar__ft_tick acts. */
typedef struct probe {
  nexar__req_t req; /* first: the callback gets &req */
  nexar_ctx_t *ctx;
  int id;
  uint32_t gen;
} probe_t;

static void probe_done(nexar__req_t *r) {
  probe_t *p = (probe_t *)r;
  nexar_ctx_t *ctx = p->ctx;
  if (ctx->rs_active && p->gen == ctx->rs_gen && p->id < ctx->rs_n &&
      ctx->rs_need[p->id]) {
    if (r->rc == NEXAR_OK) {
      ctx->rs_need[p->id] = 0;
      ctx->rs_left--;
    } else if (ctx->rs_fail_id < 0) {
      ctx->rs_fail_id = p->id;
      ctx->rs_fail_rc = r->rc;
    }
  }
  free(p);
}

void nexar__ft_on_resume(nexar_ctx_t *ctx, uint64_t paused_ns) {
  if (ctx->fenced || atomic_load(&ctx->aborted) || ctx->finalizing ||
      !ctx->dead)
    return;
  /* A verdict read meanwhile (a fencing close not yet handled) first. */
  for (int id = 0; id < ctx->world; id++) {
    nexar__link_t *c = ctx->peers[id];
    if (c && id != ctx->rank && c->peer_closed &&
        c->close_code == NEXAR__CLOSE_FENCED) {
      fence_self(ctx, id,
                 c->close_reason[0] ? c->close_reason : "no reason given");
      return;
    }
  }
  uint64_t now = nexar__now();
  bool check = paused_ns >= ctx->rs_check_ns;
  ctx->last_tick = now;
  NEXAR__WARN(NEXAR__SUB_INIT,
              "rank %d: this process did not run for %llu ms; %s", ctx->rank,
              (unsigned long long)(paused_ns / 1000000ull),
              check ? "its peers may have declared it failed meanwhile: it "
                      "asks every neighbour to confirm that it is still a "
                      "member before it judges anyone"
                    : "peers get a fresh heartbeat timeout");
  /* Silence from the peers while this process did not run proves
   * nothing: a fresh timeout for each. */
  for (int id = 0; id < ctx->world; id++)
    if (ctx->peers[id]) ctx->peers[id]->last_rx = now;
  if (!check) {
    /* What the ICMP reports read meanwhile said, judged now. */
    for (int id = 0; ctx->prm.icmp_detect && id < ctx->world; id++) {
      nexar__link_t *c = ctx->peers[id];
      if (c && c->port_closed && !ctx->dead[id] && c->state == NEXAR__CS_READY)
        nexar__declare_failed(ctx, id, NEXAR_FAIL_CONNECTION, ctx->rank,
                              PORT_CLOSED_DETAIL);
    }
    return;
  }
  uint8_t *need = calloc((size_t)ctx->world, 1);
  if (!need) {
    /* Cannot keep track of the answers: the safe side is out. */
    resume_fail(ctx, ctx->rank, "out of memory for the membership probes");
    return;
  }
  free(ctx->rs_need);
  ctx->rs_need = need;
  ctx->rs_n = ctx->world;
  ctx->rs_gen++;
  ctx->rs_left = 0;
  ctx->rs_fail_id = -1;
  ctx->rs_paused = paused_ns;
  ctx->rs_deadline = now + ctx->hb_timeout_ns;
  ctx->rs_active = true;
  for (int id = 0; id < ctx->world; id++) {
    nexar__link_t *c = ctx->peers[id];
    if (id == ctx->rank || ctx->dead[id] ||
        !nexar__topo_linked(&ctx->topo, ctx->rank, id))
      continue;
    need[id] = 1;
    ctx->rs_left++;
    if (!c || c->state != NEXAR__CS_READY || c->port_closed) {
      resume_fail(
          ctx, id,
          c && c->port_closed ? PORT_CLOSED_DETAIL : "its link is down");
      return;
    }
    probe_t *p = calloc(1, sizeof(*p));
    if (p) {
      p->ctx = ctx;
      p->id = id;
      p->gen = ctx->rs_gen;
      p->req.kind = NEXAR__REQ_SEND;
      p->req.internal = true;
      p->req.cb = probe_done;
      p->req.comm = ctx->world_comm;
    }
    if (!p || nexar__ctl_probe(ctx, id, &p->req) < 0) {
      free(p);
      resume_fail(ctx, id, "the probe could not be sent");
      return;
    }
  }
}

/* Resuming: acts on the probes' answers; true while the check goes on
 * (the heartbeat judges no one meanwhile). */
static bool resume_tick(nexar_ctx_t *ctx, uint64_t now) {
  if (!ctx->rs_active) return false;
  if (ctx->rs_fail_id >= 0) {
    char d[128];
    snprintf(d, sizeof(d), "its link failed: %s",
             nexar_strerror(ctx->rs_fail_rc));
    resume_fail(ctx, ctx->rs_fail_id, d);
    return true;
  }
  /* Declared failed or departed meanwhile (a confirming peer's notice, a
   * goodbye): no answer is needed from it. */
  for (int id = 0; id < ctx->rs_n && id < ctx->world; id++)
    if (ctx->rs_need[id] && ctx->dead[id]) {
      ctx->rs_need[id] = 0;
      ctx->rs_left--;
    }
  if (ctx->rs_left <= 0) {
    ctx->rs_active = false;
    NEXAR__WARN(NEXAR__SUB_INIT,
                "rank %d: every neighbour confirmed that this process is "
                "still a member; it goes on",
                ctx->rank);
    return false;
  }
  if (now < ctx->rs_deadline) return true;
  for (int id = 0; id < ctx->rs_n; id++)
    if (ctx->rs_need[id]) {
      char d[128];
      snprintf(d, sizeof(d), "no acknowledgement of a probe within %lld ms",
               (long long)ctx->prm.heartbeat_timeout_ms);
      resume_fail(ctx, id, d);
      break;
    }
  return true;
}

#define STARVED_GRACE 4 /* timeouts a starved same-host peer gets */

void nexar__ft_tick(nexar_ctx_t *ctx, uint64_t now) {
  if (ctx->fenced || atomic_load(&ctx->aborted) || ctx->finalizing) return;
  /* Judge only once what is queued has been read: the peers' verdict on
   * this process (a fencing close) may be waiting in the socket. */
  if (ctx->ep.rx_more) return;
  if (resume_tick(ctx, now)) return;
  uint64_t last = ctx->last_tick;
  ctx->last_tick = now;
  if (last && now - last > ctx->hb_timeout_ns / 2) {
    /* The socket was not read for a while (a long pass: this process was
     * busy, or did not run): silence from the peers meanwhile proves
     * nothing. Give them a full timeout from now. */
    NEXAR__WARN(NEXAR__SUB_INIT,
                "rank %d: the detector did not run for %llu ms; peers get a "
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
  uint64_t boot_ns = (uint64_t)ctx->prm.bootstrap_timeout_ms * 1000000ull;
  if (boot_ns < ctx->hb_timeout_ns) boot_ns = ctx->hb_timeout_ns;
  for (int id = 0; id < ctx->world; id++) {
    nexar__link_t *c = ctx->peers[id];
    if (!c || ctx->dead[id] || c->state != NEXAR__CS_READY) continue;
    char detail[160];
    if (c->tx_err_since && now >= c->tx_err_since + ctx->hb_timeout_ns / 2) {
      /* Its packets may still arrive; ours cannot leave. A failed send is
       * certain where silence is not, so half a timeout confirms it: the
       * cut-off process, which hears nothing, judges only after a whole
       * one, so its verdicts (fencing closes that can still reach us)
       * come after ours and are ignored. */
      snprintf(detail, sizeof(detail), "every send for %llu ms failed (%s)",
               (unsigned long long)((now - c->tx_err_since) / 1000000ull),
               strerror(c->tx_errno));
      nexar__declare_failed(ctx, id, NEXAR_FAIL_UNREACHABLE, ctx->rank, detail);
      continue;
    }
    /* A peer still forming its own mesh (busy with handshakes, or starved
     * of CPU by the others' on a crowded host) has the bootstrap's
     * deadline, not the heartbeat timeout: it says when it is done. */
    uint64_t limit = c->peer_meshed ? ctx->hb_timeout_ns : boot_ns;
    if (now < c->last_rx + limit) {
      c->starved_said = false;
      continue;
    }
    /* A same-host peer whose threads wait for a CPU is starved (ranks
     * outnumber cores), not stopped or hung: it gets STARVED_GRACE
     * timeouts in all, so that a crowded host is slow, not failed, while a
     * stopped or spinning-but-deaf peer is still judged. */
    if (now < c->last_rx + STARVED_GRACE * limit &&
        nexar__link_peer_runnable(c)) {
      if (!c->starved_said)
        NEXAR__WARN(NEXAR__SUB_INIT,
                    "rank %d: nothing from rank %d (%s) for %llu ms, but its "
                    "process waits for a CPU: judged after %llu ms",
                    ctx->rank, id, c->remote_str,
                    (unsigned long long)((now - c->last_rx) / 1000000ull),
                    (unsigned long long)(STARVED_GRACE * limit / 1000000ull));
      c->starved_said = true;
      continue;
    }
    snprintf(detail, sizeof(detail), "nothing received for %llu ms (%s=%lld)",
             (unsigned long long)((now - c->last_rx) / 1000000ull),
             c->peer_meshed ? "NEXAR_HEARTBEAT_TIMEOUT_MS"
                            : "NEXAR_BOOTSTRAP_TIMEOUT_MS: its mesh was not "
                              "formed yet",
             (long long)(c->peer_meshed ? ctx->prm.heartbeat_timeout_ms
                                        : ctx->prm.bootstrap_timeout_ms));
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
  nexar__failed_t fmsg;
  if (nexar__failed_decode(&fmsg, payload, len, (uint32_t)ctx->world) < 0)
    return;
  uint32_t id = fmsg.id, reason = fmsg.reason;
  /* The notice's reason is its first-hand one; proof that the process is
   * gone is kept even when this process already knew it failed. */
  if (reason == NEXAR_FAIL_CONNECTION || !ctx->dead_how[id])
    ctx->dead_how[id] = (uint8_t)reason;
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
  NEXAR__INFO(NEXAR__SUB_INIT, "%s", why);
  NEXAR__FOR_EACH_COMM(ctx, cm, nexar__comm_revoke(cm, NEXAR_ERR_ABORTED, why));
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
