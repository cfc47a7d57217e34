/*
 * What the parts above share through the process context: communicator
 * objects and ranks, the next free communicator id, and lookups in the route
 * table (ctx->topo, which cluster/topology.c computes).
 */
#include <stdlib.h>

#include "core/core.h"

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

bool nexar__topo_adjacent(const nexar__topo_t *t, int a, int b) {
  if (a == b || a < 0 || b < 0 || a >= t->n || b >= t->n) return false;
  switch (t->kind) {
    case NEXAR__TOPO_KREGULAR: {
      int d = (b - a + t->n) % t->n;
      int ring = d < t->n - d ? d : t->n - d;
      return ring <= t->k / 2 || (t->k % 2 && 2 * d == t->n);
    }
    case NEXAR__TOPO_HYPERCUBE: {
      unsigned x = (unsigned)(a ^ b);
      return (x & (x - 1)) == 0;
    }
    default:
      return true;
  }
}

int nexar__topo_next(nexar_ctx_t *ctx, int dest) {
  const nexar__topo_t *t = &ctx->topo;
  if (dest < 0 || dest >= t->n || !t->next) return -1;
  return t->next[dest];
}
