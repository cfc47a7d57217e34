/*
 * Connection graphs (NEXAR_TOPOLOGY, docs/topology.md) over stable ids and
 * the routes from this process.
 *
 * - full: every pair of processes is connected (the default).
 * - kregular:K: the circulant graph C_n(1, .., K/2) (Boesch & Tindell,
 *   "Circulants and their connectivity", J. Graph Theory 8, 1984): i is
 *   connected to i +- 1 .. i +- K/2 (mod n), and to i + n/2 when K is odd
 *   (n must then be even). Every process has exactly K neighbours;
 *   1 <= K <= n - 1, and K = 1 (a perfect matching) only for n = 2, since
 *   the graph must be connected.
 * - hypercube: i is connected to i ^ 2^b for every b with i ^ 2^b < n.
 *   Connected for every n: clearing the highest set bit of i > 0 gives a
 *   smaller id that is a neighbour, so every id reaches 0.
 *
 * Routes: breadth-first search from this process over the processes not
 * known failed or gone, neighbours taken in increasing id order, so the
 * tables are a function of the graph and the dead set alone (every process
 * with the same knowledge computes the same paths). A next hop is on a
 * shortest path, so each hop strictly lowers the distance left and, with
 * consistent tables, a frame cannot loop; while failure knowledge differs
 * between processes the hop limit ends any loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"

int nexar__topo_parse(const char *spec, int n, nexar__topo_t *t, char *err,
                      size_t len) {
  const char *s = spec && *spec ? spec : "full";
  t->k = 0;
  if (!strcmp(s, "full") || !strcmp(s, "full_mesh")) {
    t->kind = NEXAR__TOPO_FULL;
    snprintf(t->name, sizeof(t->name), "full");
  } else if (!strcmp(s, "hypercube")) {
    t->kind = NEXAR__TOPO_HYPERCUBE;
    snprintf(t->name, sizeof(t->name), "hypercube");
  } else if (!strncmp(s, "kregular:", 9)) {
    char *end;
    long k = strtol(s + 9, &end, 10);
    if (end == s + 9 || *end || k < 1 || k > (1 << 20)) {
      snprintf(err, len,
               "NEXAR_TOPOLOGY='%s': the degree K of kregular:K must be a "
               "positive integer",
               s);
      return NEXAR_ERR_INVALID_ARG;
    }
    t->kind = NEXAR__TOPO_KREGULAR;
    t->k = (int)k;
    snprintf(t->name, sizeof(t->name), "kregular:%d", t->k);
  } else {
    snprintf(err, len,
             "NEXAR_TOPOLOGY='%s' is not one of full, kregular:K, hypercube",
             s);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (n <= 0 || t->kind != NEXAR__TOPO_KREGULAR) return 0;
  if (t->k > n - 1) {
    snprintf(err, len,
             "NEXAR_TOPOLOGY=%s: the degree K must be at most the world size "
             "- 1 = %d",
             t->name, n - 1);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (t->k % 2 && n % 2) {
    snprintf(err, len,
             "NEXAR_TOPOLOGY=%s: an odd degree needs an even world size "
             "(each rank's odd neighbour is the opposite one, i + n/2), and "
             "the world size is %d",
             t->name, n);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (t->k == 1 && n > 2) {
    snprintf(err, len,
             "NEXAR_TOPOLOGY=%s: with %d ranks the graph is not connected "
             "(only the pairs i, i + n/2); use K >= 2",
             t->name, n);
    return NEXAR_ERR_INVALID_ARG;
  }
  return 0;
}

/* Recomputes this process's routes from ctx->dead. */
static void routes(nexar_ctx_t *ctx) {
  nexar__topo_t *t = &ctx->topo;
  if (t->kind == NEXAR__TOPO_FULL) {
    /* Every live process is one hop away. */
    for (int i = 0; i < t->n; i++) {
      bool up = i == ctx->rank || !ctx->dead[i];
      t->next[i] = up ? i : -1;
      t->dist[i] = i == ctx->rank ? 0 : up ? 1 : -1;
    }
    return;
  }
  int *nb = t->queue + t->n;
  nexar__topo_bfs(t, ctx->rank, ctx->dead, t->dist, t->next, t->queue, nb);
}

int nexar__topo_init(nexar_ctx_t *ctx, int n, char *err, size_t len) {
  nexar__topo_t *t = &ctx->topo;
  int rc = nexar__topo_parse(ctx->prm.topology, n, t, err, len);
  if (rc < 0) return rc;
  t->n = n;
  t->forge_as = -1;
  /* A joiner is only admitted to a full mesh formed eagerly (growth is
   * refused on a lazy one, below), so it forms one too. */
  int64_t lazy_min = ctx->prm.mesh_lazy_min;
  t->lazy = t->kind == NEXAR__TOPO_FULL && lazy_min > 0 && n >= lazy_min &&
            !ctx->prm.join;
  t->next = malloc((size_t)n * sizeof(int));
  t->dist = malloc((size_t)n * sizeof(int));
  t->queue = malloc((size_t)2 * (size_t)n * sizeof(int));
  if (!t->next || !t->dist || !t->queue) return NEXAR_ERR_NOMEM;
  if (t->kind != NEXAR__TOPO_FULL) {
    t->pub = calloc((size_t)n, sizeof(*t->pub));
    t->ktx = calloc((size_t)n, sizeof(*t->ktx));
    t->krx = calloc((size_t)n, sizeof(*t->krx));
    t->key_state = calloc((size_t)n, 1);
    t->parked = calloc((size_t)n, sizeof(*t->parked));
    t->detached = calloc((size_t)n, sizeof(*t->detached));
    t->detached_bytes = calloc((size_t)n, sizeof(*t->detached_bytes));
    t->refused = calloc((size_t)n, sizeof(*t->refused));
    t->credit = calloc((size_t)n * 2, sizeof(*t->credit));
    t->whole = calloc((size_t)n, sizeof(*t->whole));
    if (!t->pub || !t->ktx || !t->krx || !t->key_state || !t->parked ||
        !t->detached || !t->detached_bytes || !t->refused || !t->credit ||
        !t->whole)
      return NEXAR_ERR_NOMEM;
    /* Until a roster key is read, an id has no usable key. */
    memset(t->key_state, 2, (size_t)n);
  }
  t->degree = nexar__topo_neighbours(t, ctx->rank, t->queue);
  routes(ctx);
  return 0;
}

int nexar__topo_grow(nexar_ctx_t *ctx, int n) {
  nexar__topo_t *t = &ctx->topo;
  if (!t->next || n <= t->n) return 0;
  /* A lazy mesh is refused before this (nexar__ctx_grow_ids). */
  if (t->kind != NEXAR__TOPO_FULL) return NEXAR_ERR_UNSUPPORTED;
  int *next = realloc(t->next, (size_t)n * sizeof(int));
  if (next) t->next = next;
  int *dist = realloc(t->dist, (size_t)n * sizeof(int));
  if (dist) t->dist = dist;
  int *queue = realloc(t->queue, (size_t)2 * (size_t)n * sizeof(int));
  if (queue) t->queue = queue;
  if (!next || !dist || !queue) return NEXAR_ERR_NOMEM;
  t->n = n;
  t->degree = n - 1;
  routes(ctx);
  return 0;
}

void nexar__topo_refresh(nexar_ctx_t *ctx) {
  if (ctx->topo.next) routes(ctx);
}

void nexar__topo_fini(nexar_ctx_t *ctx) {
  nexar__topo_t *t = &ctx->topo;
  free(t->next);
  free(t->dist);
  free(t->queue);
  free(t->pub);
  if (t->ktx) gnutls_memset(t->ktx, 0, (size_t)t->n * sizeof(*t->ktx));
  if (t->krx) gnutls_memset(t->krx, 0, (size_t)t->n * sizeof(*t->krx));
  free(t->ktx);
  free(t->krx);
  free(t->key_state);
  free(t->parked);
  free(t->detached);
  free(t->detached_bytes);
  free(t->refused);
  free(t->credit);
  free(t->whole);
  memset(t, 0, sizeof(*t));
}

void nexar__topo_on_failure(nexar_ctx_t *ctx) {
  nexar__topo_t *t = &ctx->topo;
  if (!t->next) return;
  routes(ctx);
  if (t->kind == NEXAR__TOPO_FULL) return;
  nexar__relay_reroute(ctx);
  /* A process no route reaches cannot be told apart from a failed one: it
   * is declared failed (so fenced), as a silent peer would be; unless only
   * processes that left cut it off (every process leaves at finalize,
   * neighbours first or last), then it is gone as they are. The second
   * search counts the departed as links. */
  bool cut = false;
  for (int id = 0; id < t->n && !cut; id++)
    cut = id != ctx->rank && !ctx->dead[id] && t->dist[id] < 0;
  if (!cut) goto resend;
  uint8_t *failed = malloc((size_t)t->n);
  int *via_left = malloc((size_t)t->n * sizeof(int));
  if (!failed || !via_left) {
    free(failed);
    free(via_left);
    goto resend;
  }
  for (int id = 0; id < t->n; id++) failed[id] = ctx->dead[id] == 1;
  nexar__topo_bfs(t, ctx->rank, failed, via_left, NULL, t->queue,
                  t->queue + t->n);
  for (int id = 0; id < t->n; id++) {
    if (id == ctx->rank || ctx->dead[id] || t->dist[id] >= 0) continue;
    char detail[160];
    if (via_left[id] >= 0) {
      snprintf(detail, sizeof(detail),
               "rank %d: process %d is unreachable: the processes on every "
               "path to it have left",
               ctx->rank, id);
      ctx->dead[id] = 2;
      nexar__p2p_fail_peer(ctx, id, NEXAR_ERR_PEER_FAILED, detail);
      continue;
    }
    snprintf(detail, sizeof(detail),
             "unreachable: every path to it in the %s graph crosses failed "
             "processes",
             t->name);
    nexar__declare_failed(ctx, id, NEXAR_FAIL_CONNECTION, ctx->rank, detail);
  }
  free(failed);
  free(via_left);
resend:
  nexar__agree_resend(ctx);
}

/* ---- Test and diagnostic access (user threads, through the engine). */

static int links_fn(nexar__req_t *ctl) {
  nexar_ctx_t *ctx = ctl->cb_arg;
  int c = 0;
  for (int id = 0; ctx->peers && id < ctx->world; id++)
    if (id != ctx->rank && ctx->peers[id] &&
        ctx->peers[id]->state == NEXAR__CS_READY)
      c++;
  return c;
}

int nexar__topo_links(nexar_ctx_t *ctx) {
  return nexar__ep_call(&ctx->ep, links_fn, ctx, UINT64_MAX);
}

typedef struct {
  nexar_ctx_t *ctx;
  nexar__topo_stats_t *out;
  int as;        /* forge: the origin to claim; route: the destination */
  int hop, hops; /* route: next hop and distance */
} topo_arg_t;

static int route_fn(nexar__req_t *ctl) {
  topo_arg_t *a = ctl->cb_arg;
  const nexar__topo_t *t = &a->ctx->topo;
  if (a->as < 0 || a->as >= t->n || !t->next) return NEXAR_ERR_INVALID_ARG;
  a->hop = t->next[a->as];
  a->hops = t->dist[a->as];
  return 0;
}

int nexar__topo_route(nexar_ctx_t *ctx, int dest, int *hop, int *hops) {
  topo_arg_t a = {ctx, NULL, dest, -1, -1};
  int rc = nexar__ep_call(&ctx->ep, route_fn, &a, UINT64_MAX);
  *hop = a.hop;
  *hops = a.hops;
  return rc;
}

static int stats_fn(nexar__req_t *ctl) {
  topo_arg_t *a = ctl->cb_arg;
  *a->out = a->ctx->topo.st;
  return 0;
}

void nexar__topo_stats(nexar_ctx_t *ctx, nexar__topo_stats_t *out) {
  topo_arg_t a = {ctx, out, 0, 0, 0};
  nexar__ep_call(&ctx->ep, stats_fn, &a, UINT64_MAX);
}

/* The test hooks: |as| is stored in the field |hops| names (0: forge_as,
 * 1: test_limit). */
static int hook_fn(nexar__req_t *ctl) {
  topo_arg_t *a = ctl->cb_arg;
  *(a->hops ? &a->ctx->topo.test_limit : &a->ctx->topo.forge_as) = a->as;
  return 0;
}

void nexar__topo_test_forge(nexar_ctx_t *ctx, int as) {
  topo_arg_t a = {ctx, NULL, as, 0, 0};
  nexar__ep_call(&ctx->ep, hook_fn, &a, UINT64_MAX);
}

void nexar__topo_test_hops(nexar_ctx_t *ctx, int limit) {
  topo_arg_t a = {ctx, NULL, limit, 0, 1};
  nexar__ep_call(&ctx->ep, hook_fn, &a, UINT64_MAX);
}
