/*
 * The public API: argument checking on the caller's thread, then requests
 * handed to the progress thread.
 */
#include <gnutls/gnutls.h>
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/flight.h"
#include "cluster/cluster.h"
#include "coll/sched.h"
#include "rpc/rpc_int.h"

/* The upper parts plugged into the engine: how each request kind starts and
 * is cancelled, and the handlers p2p and cluster call (core/core.h). */
static const nexar__req_ops_t p2p_kind = {nexar__p2p_start, nexar__p2p_cancel,
                                          nexar__p2p_expire};
static const nexar__req_ops_t coll_kind = {
    nexar__coll_start, nexar__coll_cancel, nexar__coll_expire};
static const nexar__req_ops_t rpc_kind = {nexar__rpc_start, nexar__rpc_cancel,
                                          nexar__rpc_expire};
static const nexar__hooks_t hooks = {
    .rpc_header = nexar__rpc_on_header,
    .rpc_fail_peer = nexar__rpc_fail_peer,
    .rpc_wake = nexar__rpc_wake,
    .coll_same_call = nexar__coll_same_call,
    .coll_screen = nexar__coll_screen,
    .coll_mismatch_hdr = nexar__coll_mismatch_hdr,
    .coll_on_notice = nexar__coll_on_notice,
    .coll_tick = nexar__coll_tick,
    .coll_fail_comm = nexar__coll_fail_comm,
    .ctl = nexar__ft_on_ctl,
    .agree_gone = nexar__agree_gone,
    .after = nexar__ft_after,
    .rpc_lend = nexar__rpc_lend,
    .rpc_unlend = nexar__rpc_unlend,
    .ft_dispatch = nexar__ft_dispatch,
    .agree_release = nexar__agree_release,
    .coll_waiting = nexar__coll_waiting,
};

/* Frees the unexpected messages of the self channel (no connection) left
 * on |c| once the endpoint is gone. */
static void comm_free_self_unexp(nexar_comm_t *c) {
  if (!c) return;
  for (nexar__imsg_t *m = c->unexp, *n; m; m = n) {
    n = m->next;
    free(m->buf);
    free(m);
  }
  c->unexp = c->unexp_tail = NULL;
}

/* Whether roster entries |a| and |b| have the same IP address. */
static bool same_host(const nexar__roster_entry_t *a,
                      const nexar__roster_entry_t *b) {
  struct sockaddr_storage x, y;
  socklen_t xl, yl;
  if (nexar__wire_to_addr(&a->addr, &x, &xl) < 0 ||
      nexar__wire_to_addr(&b->addr, &y, &yl) < 0 || x.ss_family != y.ss_family)
    return false;
  if (x.ss_family == AF_INET)
    return ((struct sockaddr_in *)&x)->sin_addr.s_addr ==
           ((struct sockaddr_in *)&y)->sin_addr.s_addr;
  return !memcmp(&((struct sockaddr_in6 *)&x)->sin6_addr,
                 &((struct sockaddr_in6 *)&y)->sin6_addr, 16);
}

/* The local rank and size: NEXAR_LOCAL_*, else the launcher's, else the
 * ranks of the roster at this process's address. */
static void local_ranks(nexar_ctx_t *ctx) {
  const nexar__launch_t *l = ctx->launch;
  int lr = ctx->prm.local_rank >= 0 ? (int)ctx->prm.local_rank : l->local_rank;
  int ls = ctx->prm.local_size > 0 ? (int)ctx->prm.local_size : l->local_size;
  if ((lr < 0 || ls <= 0) && ctx->roster) {
    int r = 0, n = 0;
    for (int i = 0; i < ctx->world; i++)
      if (same_host(&ctx->roster[i], &ctx->roster[ctx->rank])) {
        n++;
        if (i < ctx->rank) r++;
      }
    if (lr < 0) lr = r;
    if (ls <= 0) ls = n;
  }
  ctx->local_rank = lr;
  ctx->local_size = ls;
}

/* INFO: which launcher, why, and where the seed is. */
static void launch_log(const nexar__launch_t *l, const nexar__params_t *p) {
  NEXAR__INFO(NEXAR__SUB_INIT,
              "launcher: %s (%s); rank %lld of %lld; seed %s%s", l->name,
              l->why, (long long)p->rank, (long long)p->world_size,
              p->seed_addr ? p->seed_addr
              : l->pmix    ? "(shared by rank 0 through PMIx)"
                           : "(unset)",
              l->embedded ? ", run by this process (rank 0)" : "");
}

static void ctx_free(nexar_ctx_t *ctx) {
  nexar__launch_stop(ctx->launch);
  nexar__rpc_stop(ctx);
  nexar__ep_fini(&ctx->ep);
  nexar__relay_fini(ctx);
  nexar__agree_fini(ctx);
  nexar__rpc_fini(ctx);
  nexar__dev_fini(&ctx->dev);
  nexar__flight_fini(ctx);
  comm_free_self_unexp(ctx->world_comm);
  nexar__comm_free(ctx->world_comm);
  /* Communicators the application did not free. */
  for (int i = 0; i < ctx->ncomms; i++) {
    comm_free_self_unexp(ctx->comms[i]);
    nexar__comm_free(ctx->comms[i]);
  }
  free(ctx->comms);
  nexar__p2p_pool_fini(ctx);
  free(ctx->roster);
  free(ctx->peers);
  for (int i = 0; ctx->ps && i < ctx->world; i++) free(ctx->ps[i].seqs);
  free(ctx->ps);
  free(ctx->dead);
  free(ctx->dead_how);
  nexar__topo_fini(ctx);
  nexar__ft_fini(ctx);
  gnutls_memset(ctx->secret_key, 0, sizeof(ctx->secret_key));
  free(ctx->launch);
  free(ctx);
}

int nexar_init(const nexar_config_t *cfg, nexar_ctx_t **out) {
  nexar__log_init();
  if (!out) return NEXAR_ERR_INVALID_ARG;
  *out = NULL;
  nexar_ctx_t *ctx = calloc(1, sizeof(*ctx));
  if (!ctx) return NEXAR_ERR_NOMEM;
  ctx->hooks = &hooks;
  ctx->launch = calloc(1, sizeof(*ctx->launch));
  if (!ctx->launch) {
    free(ctx);
    return NEXAR_ERR_NOMEM;
  }
  char err[NEXAR__ERRMSG_MAX];
  bool ft_ready = false;
  struct sockaddr_storage ss;
  socklen_t sl;
  /* Every setting is checked here, before any socket, thread or
   * connection exists, so that a bad one fails within milliseconds with a
   * message naming it (docs/configuration.md). Nothing allocated so far
   * outlives a failure: nexar_init may be called again. */
  int rc = nexar__params_load(&ctx->prm, cfg, err, sizeof(err));
  /* Rank, world size and rendezvous from the launcher, where the NEXAR_*
   * settings leave them open (docs/launching.md). */
  if (rc == 0)
    rc = nexar__launch_detect(&ctx->prm, cfg, ctx->launch, err, sizeof(err));
  if (rc == 0) rc = nexar__params_check(&ctx->prm, err, sizeof(err));
  if (rc == 0) rc = nexar__coll_params_check(&ctx->prm, err, sizeof(err));
  if (rc == 0)
    rc = nexar__host_id_init(&ctx->host, ctx->prm.host_key, err, sizeof(err));
  if (rc == 0) {
    rc = nexar__ft_init(ctx, err, sizeof(err));
    ft_ready = rc == 0;
  }
  /* The topology's spelling now, and against the world size when it is
   * known here (else once the roster arrives). */
  if (rc == 0)
    rc = nexar__topo_parse(ctx->prm.topology, (int)ctx->prm.world_size,
                           &ctx->topo, err, sizeof(err));
  if (rc < 0) goto fail_early;
  launch_log(ctx->launch, &ctx->prm);
  nexar__params_dump(&ctx->prm);
  rc = nexar__launch_start(ctx->launch, &ctx->prm, err, sizeof(err));
  if (rc < 0) goto fail_early;
  if (!ctx->prm.seed_addr) {
    snprintf(err, sizeof(err),
             "NEXAR_SEED is not set (the seed's ip:port; see nexar-seed and "
             "nexar-run) and no launcher names a rendezvous "
             "(docs/launching.md)");
    rc = NEXAR_ERR_INVALID_ARG;
    goto fail_early;
  }
  rc = nexar__read_secret(ctx->prm.secret, ctx->prm.secret_file,
                          ctx->secret_key, err, sizeof(err));
  if (rc < 0) goto fail_early;
  if (nexar__parse_addr(ctx->prm.bind_addr, 0, &ss, &sl) < 0) {
    snprintf(err, sizeof(err), "cannot parse NEXAR_BIND_ADDR='%s'",
             ctx->prm.bind_addr);
    rc = NEXAR_ERR_INVALID_ARG;
    goto fail_early;
  }
  /* The adapter before the network: a NEXAR_DEVICE that cannot be
   * honoured fails fast. */
  rc = nexar__dev_init(&ctx->dev, ctx->prm.device,
                       (uint64_t)ctx->prm.device_stage_cache_bytes, err,
                       sizeof(err));
  if (rc < 0) {
    nexar__dev_fini(&ctx->dev);
    goto fail_early;
  }
  ctx->world_comm = nexar__comm_new(ctx);
  if (!ctx->world_comm) {
    nexar__dev_fini(&ctx->dev);
    snprintf(err, sizeof(err), "out of memory");
    rc = NEXAR_ERR_NOMEM;
    goto fail_early;
  }
  nexar__rpc_init(ctx);
  rc = nexar__ep_init(&ctx->ep, &ss, sl, &nexar__worker_ops, ctx, &ctx->prm,
                      &ctx->host);
  if (rc < 0) {
    nexar__set_init_error("nexar_init: cannot open the UDP socket on %s: %s",
                          ctx->prm.bind_addr, strerror(errno));
    ctx_free(ctx);
    return rc;
  }
  ctx->ep.pause_ns = nexar__ft_pause_ns(ctx);
  if (nexar__flight_init(ctx) < 0) {
    nexar__set_init_error(
        "nexar_init: out of memory for the flight recorder "
        "(NEXAR_FLIGHT_RECORDER=%lld)",
        (long long)ctx->prm.flight_recorder);
    ctx_free(ctx);
    return NEXAR_ERR_NOMEM;
  }
  nexar__ep_set_kind(&ctx->ep, NEXAR__REQ_SEND, &p2p_kind);
  nexar__ep_set_kind(&ctx->ep, NEXAR__REQ_RECV, &p2p_kind);
  nexar__ep_set_kind(&ctx->ep, NEXAR__REQ_COLL, &coll_kind);
  nexar__ep_set_kind(&ctx->ep, NEXAR__REQ_RPC, &rpc_kind);
  rc = nexar__ep_start(&ctx->ep);
  if (rc < 0) {
    ctx_free(ctx);
    return rc;
  }
  rc = nexar__bootstrap(ctx);
  if (rc == 0) {
    /* Every rank's mesh includes rank 0's: each has its welcome, and the
     * embedded seed has nothing left to do. */
    if (ctx->launch->seed_run) nexar_seed_wait(ctx->launch->seed_run, 2000);
    nexar__launch_stop(ctx->launch);
    local_ranks(ctx);
    rc = nexar__rpc_start_service(ctx);
  }
  if (rc == 0 && ctx->prm.join) rc = nexar__elastic_joined(ctx);
  if (rc < 0) {
    ctx_free(ctx);
    return rc;
  }
  *out = ctx;
  return NEXAR_OK;
fail_early:
  /* Before any socket or thread (a device adapter that was set up has
   * been finalised already): only the failure detector's mutex and the key
   * need undoing. */
  nexar__set_init_error("nexar_init: %s", err);
  if (ft_ready) nexar__ft_fini(ctx);
  nexar__launch_stop(ctx->launch);
  gnutls_memset(ctx->secret_key, 0, sizeof(ctx->secret_key));
  free(ctx->launch);
  free(ctx);
  return rc;
}

int nexar_local_rank(const nexar_ctx_t *ctx, int *local_rank, int *local_size) {
  if (!ctx) return NEXAR_ERR_INVALID_ARG;
  if (local_rank) *local_rank = ctx->local_rank;
  if (local_size) *local_size = ctx->local_size;
  return NEXAR_OK;
}

nexar_comm_t *nexar_comm_world(nexar_ctx_t *ctx) {
  return ctx ? ctx->world_comm : NULL;
}

int nexar_comm_rank(const nexar_comm_t *comm, int *rank) {
  if (!comm || !rank) return NEXAR_ERR_INVALID_ARG;
  *rank = comm->rank;
  return NEXAR_OK;
}

int nexar_comm_size(const nexar_comm_t *comm, int *size) {
  if (!comm || !size) return NEXAR_ERR_INVALID_ARG;
  *size = comm->size;
  return NEXAR_OK;
}

int nexar_comm_bytes_sent(const nexar_comm_t *comm, uint64_t *bytes) {
  if (!comm || !bytes) return NEXAR_ERR_INVALID_ARG;
  *bytes = atomic_load_explicit(&((nexar_comm_t *)comm)->tx_bytes,
                                memory_order_relaxed);
  return NEXAR_OK;
}

/* ---- Communicators ---- */

static int register_fn(nexar__req_t *ctl) {
  nexar_comm_t *c = ctl->cb_arg;
  return nexar__comm_register(c->ctx, c);
}

static int unregister_fn(nexar__req_t *ctl) {
  nexar_comm_t *c = ctl->cb_arg;
  nexar__comm_unregister(c->ctx, c);
  return 0;
}

nexar_comm_t *nexar__api_comm_alloc(nexar_ctx_t *ctx, uint64_t id, int n) {
  nexar_comm_t *c = nexar__comm_new(ctx);
  if (c) c->world_ranks = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
  if (!c || !c->world_ranks) {
    nexar__comm_free(c);
    return NULL;
  }
  c->id = id;
  c->size = n;
  return c;
}

int nexar__api_comm_add(nexar_comm_t **pc) {
  int rc = nexar__ep_call(&(*pc)->ctx->ep, register_fn, *pc, UINT64_MAX);
  if (rc < 0) {
    nexar__comm_free(*pc);
    *pc = NULL;
  }
  return rc;
}

void nexar__api_comm_drop(nexar_comm_t *c) {
  nexar__ep_call(&c->ctx->ep, unregister_fn, c, UINT64_MAX);
  nexar__comm_free(c);
}

typedef struct {
  int64_t key;
  int prank;
} split_member_t;

static int member_cmp(const void *a, const void *b) {
  const split_member_t *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->prank > y->prank) - (x->prank < y->prank);
}

int nexar_comm_split(nexar_comm_t *comm, int color, int key,
                     nexar_comm_t **newcomm) {
  if (!comm || !newcomm) return NEXAR_ERR_INVALID_ARG;
  *newcomm = NULL;
  if (color < 0 && color != NEXAR_UNDEFINED) {
    nexar__comm_set_error(comm, "rank %d: comm_split: invalid color %d",
                          comm->rank, color);
    return NEXAR_ERR_INVALID_ARG;
  }
  nexar_ctx_t *ctx = comm->ctx;
  /* The world is id 0: proposals start at 1. */
  nexar__bump_next_id(ctx, 1);
  int n = comm->size;
  int64_t mine[3] = {color, key, (int64_t)atomic_load(&ctx->next_free_id)};
  int64_t *all = malloc((size_t)n * 3 * sizeof(int64_t));
  split_member_t *mem = malloc((size_t)n * sizeof(*mem));
  if (!all || !mem) {
    free(all);
    free(mem);
    return NEXAR_ERR_NOMEM;
  }
  int rc = nexar_allgather(comm, mine, all, 3, NEXAR_INT64);
  if (rc < 0) {
    free(all);
    free(mem);
    return rc;
  }
  uint64_t id = 0;
  int cnt = 0;
  for (int r = 0; r < n; r++) {
    if ((uint64_t)all[3 * r + 2] > id) id = (uint64_t)all[3 * r + 2];
    if (color != NEXAR_UNDEFINED && all[3 * r] == color) {
      mem[cnt].key = all[3 * r + 1];
      mem[cnt].prank = r;
      cnt++;
    }
  }
  free(all);
  /* Every member of |comm| saw the same maximum: none proposes it again. */
  nexar__bump_next_id(ctx, id + 1);
  nexar_comm_t *c = NULL;
  if (color != NEXAR_UNDEFINED) {
    qsort(mem, (size_t)cnt, sizeof(*mem), member_cmp);
    c = nexar__api_comm_alloc(ctx, id, cnt);
    if (!c) {
      rc = NEXAR_ERR_NOMEM;
    } else {
      for (int i = 0; i < cnt; i++) {
        c->world_ranks[i] = comm->world_ranks[mem[i].prank];
        if (mem[i].prank == comm->rank) c->rank = i;
      }
      rc = nexar__api_comm_add(&c);
    }
  }
  free(mem);
  /* Nobody sends on the child before every member has registered it. The
   * barrier runs even after a local failure, so the others do not hang. */
  int brc = nexar_barrier(comm);
  if (rc == 0 && brc < 0) rc = brc;
  if (rc < 0) {
    if (c) nexar__api_comm_drop(c);
    return rc;
  }
  *newcomm = c;
  return NEXAR_OK;
}

int nexar_comm_dup(nexar_comm_t *comm, nexar_comm_t **newcomm) {
  if (!comm || !newcomm) return NEXAR_ERR_INVALID_ARG;
  return nexar_comm_split(comm, 0, comm->rank, newcomm);
}

int nexar_comm_free(nexar_comm_t **pcomm) {
  if (!pcomm || !*pcomm) return NEXAR_ERR_INVALID_ARG;
  nexar_comm_t *c = *pcomm;
  if (c == c->ctx->world_comm) {
    nexar__comm_set_error(c, "rank %d: comm_free: the world cannot be freed",
                          c->rank);
    return NEXAR_ERR_INVALID_ARG;
  }
  /* Collective: once every member is here, nothing more is sent on it. */
  int rc = c->size > 1 ? nexar_barrier(c) : NEXAR_OK;
  nexar__api_comm_drop(c);
  *pcomm = NULL;
  return rc < 0 ? rc : NEXAR_OK;
}

/* ---- Finalize ---- */

/* Whether everything sent has been acknowledged, on every link whose peer
 * can still acknowledge it: a peer whose port is closed (its process has
 * finalized and exited, and its CONNECTION_CLOSE was lost) never will. */
static int flushed_fn(nexar__req_t *ctl) {
  nexar_ctx_t *ctx = ctl->cb_arg;
  if (!nexar__credit_idle(ctx)) return 0; /* relay frames still to go */
  if (!nexar__lazy_idle(ctx)) return 0;   /* crossing dials' links */
  for (int r = 0; r < ctx->world; r++) {
    nexar__link_t *c = ctx->peers[r];
    if (c && c->state == NEXAR__CS_READY && !c->port_closed &&
        !nexar__link_idle(c))
      return 0;
  }
  return 1;
}

/* From here on, peers closing their connections are not failures. */
static int finalizing_fn(nexar__req_t *ctl) {
  nexar_ctx_t *ctx = ctl->cb_arg;
  ctx->finalizing = true;
  return 0;
}

static int close_fn(nexar__req_t *ctl) {
  nexar_ctx_t *ctx = ctl->cb_arg;
  char why[64];
  snprintf(why, sizeof(why), "rank %d finalized", ctx->rank);
  for (int r = 0; r < ctx->world; r++)
    if (ctx->peers[r]) nexar__link_close(ctx->peers[r], NEXAR__CLOSE_OK, why);
  nexar__lazy_close(ctx);
  return 0;
}

static double ms_since(uint64_t from, uint64_t to) {
  return (double)(to - from) / 1e6;
}

/* This process's CPU time (all its threads), ns. */
static uint64_t cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int nexar_finalize(nexar_ctx_t *ctx) {
  if (!ctx) return NEXAR_ERR_INVALID_ARG;
  int rc = NEXAR_OK, rank = ctx->rank;
  uint64_t t0 = nexar__now(), c0 = cpu_now();
  /* Collective like MPI_Finalize: once every rank is here, all user
   * traffic has been received, and closing cannot cut anything short. A
   * world that is revoked, aborted or fenced (or that this process left at
   * an elastic checkpoint) has no barrier to run. */
  bool broken = atomic_load(&ctx->world_comm->revoked) != 0;
  ctx->no_recovery = true; /* a failure now ends the barrier, nothing more */
  if (ctx->world_comm->size > 1 && !broken) {
    int brc = nexar__coll_final_barrier(ctx->world_comm);
    if (brc < 0) {
      /* The communicator, and its last error, are freed below: say now
       * which peer the barrier lost and why. */
      rc = brc;
      NEXAR__WARN(NEXAR__SUB_BOOTSTRAP, "rank %d: finalize: final barrier: %s",
                  rank, nexar_comm_last_error(ctx->world_comm));
    }
  }
  uint64_t t1 = nexar__now(), t2 = t1, c1 = cpu_now();
  /* No handler runs from here on; the responses it posted are sent (or
   * dropped with the connections) by the passes below. */
  nexar__rpc_stop(ctx);
  nexar__ep_call(&ctx->ep, finalizing_fn, ctx, UINT64_MAX);
  if (ctx->world > 1 && !atomic_load(&ctx->aborted)) {
    uint64_t deadline = nexar__now() + 5000000000ull;
    while (!nexar__ep_call(&ctx->ep, flushed_fn, ctx, UINT64_MAX)) {
      if (nexar__now() > deadline) {
        rc = NEXAR_ERR_TIMEOUT;
        break;
      }
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    t2 = nexar__now();
    nexar__ep_call(&ctx->ep, close_fn, ctx, UINT64_MAX);
    /* Give the progress loop one pass to send the CONNECTION_CLOSEs. */
    nexar__ep_call(&ctx->ep, flushed_fn, ctx, UINT64_MAX);
  }
  uint64_t t3 = nexar__now();
  ctx_free(ctx);
  uint64_t t4 = nexar__now(), c4 = cpu_now();
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP,
              "rank %d: finalize took %.1f ms (final barrier %.1f ms, "
              "acknowledgements %.1f ms, closing %.1f ms, freeing %.1f ms; "
              "CPU %.1f ms, %.1f ms of it after the barrier)",
              rank, ms_since(t0, t4), ms_since(t0, t1), ms_since(t1, t2),
              ms_since(t2, t3), ms_since(t3, t4), ms_since(c0, c4),
              ms_since(c1, c4));
  return rc;
}

/* ---- Flight recorder ---- */

typedef struct {
  nexar_ctx_t *ctx;
  const char *path;
} dump_args_t;

static int dump_fn(nexar__req_t *ctl) {
  dump_args_t *a = ctl->cb_arg;
  return nexar__flight_write(a->ctx, a->path);
}

int nexar_flight_dump(nexar_ctx_t *ctx, const char *path) {
  if (!ctx || (path && !*path)) return NEXAR_ERR_INVALID_ARG;
  dump_args_t a = {ctx, path};
  return nexar__ep_call(&ctx->ep, dump_fn, &a, UINT64_MAX);
}
