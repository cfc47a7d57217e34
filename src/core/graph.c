/*
 * The connection graph over stable ids and the route table (ctx->topo):
 * the queries every part above asks (neighbours, next hops, the shape of a
 * communicator's exchanges). cluster/topology.c sets the graph up and
 * recomputes the routes.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Whether |a| and |b| are adjacent in the graph of kind |kind|. */
static bool adjacent(const nexar__topo_t *t, int kind, int a, int b) {
  if (a == b || a < 0 || b < 0 || a >= t->n || b >= t->n) return false;
  switch (kind) {
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

/* The kind of the graph of links made at formation. */
static int linked_kind(const nexar__topo_t *t) {
  return t->lazy ? NEXAR__TOPO_HYPERCUBE : t->kind;
}

bool nexar__topo_adjacent(const nexar__topo_t *t, int a, int b) {
  return adjacent(t, t->kind, a, b);
}

bool nexar__topo_linked(const nexar__topo_t *t, int a, int b) {
  return adjacent(t, linked_kind(t), a, b);
}

int nexar__topo_neighbours(const nexar__topo_t *t, int id, int *out) {
  int c = 0, n = t->n;
  switch (linked_kind(t)) {
    case NEXAR__TOPO_KREGULAR:
      for (int d = 1; d <= t->k / 2; d++) {
        out[c++] = (id + d) % n;
        out[c++] = (id - d + n) % n;
      }
      if (t->k % 2) out[c++] = (id + n / 2) % n;
      break;
    case NEXAR__TOPO_HYPERCUBE:
      for (int b = 1; b < n && b > 0; b <<= 1)
        if ((id ^ b) < n) out[c++] = id ^ b;
      break;
    default:
      for (int j = 0; j < n; j++)
        if (j != id) out[c++] = j;
      return c; /* already in order */
  }
  qsort(out, (size_t)c, sizeof(int), cmp_int);
  return c;
}

/* Breadth-first search from |src| over the ids |alive| accepts; fills
 * dist (-1: unreachable) and, when |next| is set, the first hop. */
void nexar__topo_bfs(const nexar__topo_t *t, int src, const uint8_t *dead,
                     int *dist, int *next, int *queue, int *nb) {
  for (int i = 0; i < t->n; i++) {
    dist[i] = -1;
    if (next) next[i] = -1;
  }
  int head = 0, tail = 0;
  dist[src] = 0;
  if (next) next[src] = src;
  queue[tail++] = src;
  while (head < tail) {
    int u = queue[head++];
    int c = nexar__topo_neighbours(t, u, nb);
    for (int j = 0; j < c; j++) {
      int v = nb[j];
      if (dist[v] >= 0 || (dead && dead[v])) continue;
      dist[v] = dist[u] + 1;
      if (next) next[v] = u == src ? v : next[u];
      queue[tail++] = v;
    }
  }
}

int nexar__topo_next(nexar_ctx_t *ctx, int dest) {
  const nexar__topo_t *t = &ctx->topo;
  if (dest < 0 || dest >= t->n || !t->next) return -1;
  return t->next[dest];
}

bool nexar__topo_comm_relayed(const nexar_comm_t *comm) {
  const nexar__topo_t *t = &comm->ctx->topo;
  if (t->kind == NEXAR__TOPO_FULL) return false;
  for (int a = 0; a < comm->size; a++)
    for (int b = a + 1; b < comm->size; b++)
      if (!nexar__topo_adjacent(t, comm->world_ranks[a], comm->world_ranks[b]))
        return true;
  return false;
}

unsigned nexar__topo_comm_shape(const nexar_comm_t *comm) {
  const nexar__topo_t *t = &comm->ctx->topo;
  int n = comm->size;
  const int *w = comm->world_ranks;
  if (t->kind == NEXAR__TOPO_FULL) return NEXAR__SHAPE_RING | NEXAR__SHAPE_XOR;
  unsigned shape = NEXAR__SHAPE_RING;
  for (int r = 0; r < n && n > 1; r++)
    if (!nexar__topo_adjacent(t, w[r], w[(r + 1) % n])) shape = 0;
  if (n > 1 && (n & (n - 1)) == 0) {
    bool ok = true;
    for (int r = 0; r < n && ok; r++)
      for (int b = 1; b < n && ok; b <<= 1)
        ok = nexar__topo_adjacent(t, w[r], w[r ^ b]);
    if (ok) shape |= NEXAR__SHAPE_XOR;
  }
  return shape;
}

int nexar__topo_comm_neighbours(const nexar_comm_t *comm, int *out) {
  const nexar__topo_t *t = &comm->ctx->topo;
  int c = 0;
  for (int r = 0; r < comm->size; r++)
    if (r != comm->rank && nexar__topo_linked(t, comm->world_ranks[comm->rank],
                                              comm->world_ranks[r]))
      out[c++] = r;
  return c;
}

int nexar__topo_flood_rounds(const nexar_comm_t *comm) {
  /* Twice the eccentricity of the comm's rank 0 in the graph its members
   * span bounds its diameter (d(a, b) <= d(a, 0) + d(0, b)), and every
   * member computes the same. */
  const nexar__topo_t *t = &comm->ctx->topo;
  int n = t->n, rounds = comm->size - 1;
  int *dist = malloc((size_t)n * sizeof(int));
  int *queue = malloc((size_t)n * sizeof(int));
  int *nb = malloc((size_t)n * sizeof(int));
  uint8_t *out = malloc((size_t)n);
  if (!dist || !queue || !nb || !out) goto done;
  memset(out, 1, (size_t)n);
  for (int r = 0; r < comm->size; r++) out[comm->world_ranks[r]] = 0;
  nexar__topo_bfs(t, comm->world_ranks[0], out, dist, NULL, queue, nb);
  int ecc = 0;
  for (int r = 0; r < comm->size; r++) {
    int d = dist[comm->world_ranks[r]];
    if (d < 0) goto done; /* not connected: the size bound */
    if (d > ecc) ecc = d;
  }
  if (2 * ecc < rounds) rounds = 2 * ecc;
done:
  free(dist);
  free(queue);
  free(nb);
  free(out);
  return rounds;
}
