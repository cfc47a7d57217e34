/*
 * What the parts above share through the process context: communicator
 * objects and ranks, the next free communicator id, and lookups in the route
 * table (ctx->topo, which cluster/topology.c computes), and the last-error
 * texts (per communicator, and per thread for nexar_init).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "transport/quic_test.h"
#include "transport/shm_test.h"

nexar_comm_t *nexar__comm_new(nexar_ctx_t *ctx) {
  nexar_comm_t *c = calloc(1, sizeof(*c));
  if (!c) return NULL;
  c->ctx = ctx;
  pthread_mutex_init(&c->err_mu, NULL);
  return c;
}

void nexar__comm_free(nexar_comm_t *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->err_mu);
  free(c->world_ranks);
  free(c->hosts);
  free(c->scratch);
  for (int i = 0; i < NEXAR__PLANS; i++) free(atomic_load(&c->plans[i]));
  free(c);
}

void nexar__bump_next_id(nexar_ctx_t *ctx, uint64_t v) {
  uint64_t cur = atomic_load(&ctx->next_free_id);
  while (cur < v && !atomic_compare_exchange_weak(&ctx->next_free_id, &cur, v))
    ;
}

int nexar__comm_rank_of(const nexar_comm_t *comm, int id) {
  for (int k = 0; k < comm->size; k++)
    if (comm->world_ranks[k] == id) return k;
  return -1;
}

static _Thread_local char tl_init_error[NEXAR__ERRMSG_MAX];
static _Thread_local char tl_copy[NEXAR__ERRMSG_MAX];

void nexar__set_init_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tl_init_error, sizeof(tl_init_error), fmt, ap);
  va_end(ap);
  NEXAR__INFO(NEXAR__SUB_INIT, "%s", tl_init_error);
}

void nexar__comm_set_error(nexar_comm_t *comm, const char *fmt, ...) {
  char tmp[NEXAR__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&comm->err_mu);
  memcpy(comm->last_error, tmp, sizeof(tmp));
  pthread_mutex_unlock(&comm->err_mu);
  NEXAR__INFO(NEXAR__SUB_P2P, "%s", tmp);
}

const char *nexar_comm_last_error(const nexar_comm_t *comm) {
  if (!comm) {
    memcpy(tl_copy, tl_init_error, sizeof(tl_copy));
    return tl_copy;
  }
  nexar_comm_t *c = (nexar_comm_t *)comm;
  pthread_mutex_lock(&c->err_mu);
  memcpy(tl_copy, c->last_error, sizeof(tl_copy));
  pthread_mutex_unlock(&c->err_mu);
  return tl_copy;
}

const char *nexar_last_error(void) {
  return nexar_comm_last_error(NULL);
}

/* ---- Test hook: a hostile same-host peer (transport/shm_test.h). */

typedef struct forge_arg {
  nexar_ctx_t *ctx;
  int peer, kind;
} forge_arg_t;

/* The test hooks' link to |peer| (NULL: none yet); INVALID_ARG when
 * |peer| is not another rank. */
static int hook_link(nexar_ctx_t *ctx, int peer, nexar__link_t **l) {
  if (peer < 0 || peer >= ctx->world || peer == ctx->rank)
    return NEXAR_ERR_INVALID_ARG;
  *l = ctx->peers ? ctx->peers[peer] : NULL;
  return 0;
}

static int forge_fn(nexar__req_t *req) {
  forge_arg_t *f = req->cb_arg;
  nexar__link_t *l;
  int rc = hook_link(f->ctx, f->peer, &l);
  return rc < 0 ? rc : nexar__shm_forge_link(l, f->kind);
}

int nexar__shm_test_forge(nexar_ctx_t *ctx, int peer, int kind) {
  forge_arg_t f = {ctx, peer, kind};
  return nexar__ep_call(&ctx->ep, forge_fn, &f, UINT64_MAX);
}

uint64_t nexar__test_bg_passes(nexar_ctx_t *ctx) {
  return atomic_load_explicit(&ctx->ep.bg_passes, memory_order_relaxed);
}

/* ---- Test hook: a QUIC link's counters (transport/quic_test.h). */

typedef struct stats_arg {
  nexar_ctx_t *ctx;
  int peer;
  nexar__quic_test_stats_t *out; /* NULL: cut the RPC connection */
} stats_arg_t;

static int stats_fn(nexar__req_t *req) {
  stats_arg_t *a = req->cb_arg;
  nexar__link_t *l;
  int rc = hook_link(a->ctx, a->peer, &l);
  if (rc < 0) return rc;
  return a->out ? nexar__quic_stats_link(l, a->out) : nexar__quic_rpc_cut(l);
}

int nexar__quic_test_stats(nexar_ctx_t *ctx, int peer,
                           nexar__quic_test_stats_t *out) {
  stats_arg_t a = {ctx, peer, out};
  if (!out) return NEXAR_ERR_INVALID_ARG;
  return nexar__ep_call(&ctx->ep, stats_fn, &a, UINT64_MAX);
}

int nexar__quic_test_rpc_cut(nexar_ctx_t *ctx, int peer) {
  stats_arg_t a = {ctx, peer, NULL};
  return nexar__ep_call(&ctx->ep, stats_fn, &a, UINT64_MAX);
}
