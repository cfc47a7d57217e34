/*
 * Prefix reductions (scan, exscan) and the barrier as schedules.
 */
#include <stdlib.h>

#include "coll/algos.h"

/*
 * Recursive-doubling scan and exscan (Hillis & Steele 1986), as MPICH's
 * scan/exscan for commutative ops. Each rank keeps a partial result (the
 * reduction over its current group of 2^i ranks) and its own result. In
 * round i rank r exchanges its partial result with r ^ 2^i (when that rank
 * exists); the received one is combined into the result when it comes from
 * a lower rank, and always into the partial result.
 *
 * Every round receives into fresh scratch, and the new partial result is
 * computed in that scratch (received op old partial), so no step ever
 * writes a range that a send is still reading: receives depend on nothing.
 * Out of place the first partial result is sendbuf itself; in place it is a
 * scratch copy of recvbuf, since recvbuf becomes the result.
 *
 * Scan: the result starts as the own input; AVG divides it by r + 1.
 * Exscan: the result is the first block received from a lower rank, then
 * combined with later ones; rank 0 receives none and recvbuf stays as is.
 */
int nexar__build_scan(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank;
  bool ex = s->a.coll == NEXAR__COLL_EXSCAN;
  uint64_t bytes = s->a.count * s->a.es;
  int pbuf = NEXAR__BUF_SEND;
  uint64_t poff = 0;
  if (s->a.in_place && n > 1) {
    pbuf = NEXAR__BUF_TMP;
    poff = nexar__sched_tmp(s, bytes);
    nexar__sched_copy(s, pbuf, poff, NEXAR__BUF_WORK, 0, bytes);
  }
  if (!ex && !s->a.in_place)
    nexar__sched_copy(s, NEXAR__BUF_WORK, 0, NEXAR__BUF_SEND, 0, bytes);
  /* The last round in which this rank sends: later rounds need no partial
   * result. */
  int last = 0;
  for (int mask = 1; mask < n; mask <<= 1)
    if ((r ^ mask) < n) last = mask;
  bool have = !ex; /* recvbuf holds a result to combine into */
  for (int mask = 1; mask < n; mask <<= 1) {
    int peer = r ^ mask;
    if (peer >= n) continue;
    nexar__sched_send(s, pbuf, poff, bytes, peer);
    uint64_t t = nexar__sched_tmp(s, bytes);
    nexar__sched_recv(s, NEXAR__BUF_TMP, t, bytes, peer);
    if (r > peer) {
      if (have)
        nexar__sched_reduce(s, NEXAR__BUF_WORK, 0, NEXAR__BUF_TMP, t, bytes);
      else
        nexar__sched_copy(s, NEXAR__BUF_WORK, 0, NEXAR__BUF_TMP, t, bytes);
      have = true;
    }
    if (mask < last) {
      nexar__sched_reduce(s, NEXAR__BUF_TMP, t, pbuf, poff, bytes);
      pbuf = NEXAR__BUF_TMP;
      poff = t;
    }
  }
  if (!ex) {
    s->a.avg_div = r + 1;
    nexar__sched_finalize(s, NEXAR__BUF_WORK, 0, bytes);
  }
  return s->build_rc;
}

/*
 * Barrier. Its messages carry no bytes, so the ranges imply no order: each
 * phase is closed with an explicit fence.
 *
 * Two-phase (small comms): every rank signals rank 0; rank 0, once it has
 * heard from all, releases them.
 *
 * Dissemination (Hensgen, Finkel & Manber 1988): in round k rank r signals
 * r + 2^k and waits for r - 2^k; after ceil(log2 n) rounds every rank has
 * heard, transitively, from every other.
 */
int nexar__build_barrier(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank, algo = s->a.algo;
  if (algo != NEXAR__ALGO_TWO_PHASE && algo != NEXAR__ALGO_DISSEMINATION &&
      algo != NEXAR__ALGO_RD && algo != NEXAR__ALGO_NEIGHBOUR)
    algo = n < 5 ? NEXAR__ALGO_TWO_PHASE : NEXAR__ALGO_DISSEMINATION;
  if (n == 1) return s->build_rc;
  if (algo == NEXAR__ALGO_RD) {
    /* Powers of two: in round k rank r and r ^ 2^k signal each other. */
    for (int d = 1; d < n; d <<= 1) {
      if (d > 1) nexar__sched_fence(s);
      nexar__sched_send(s, NEXAR__BUF_WORK, 0, 0, r ^ d);
      nexar__sched_recv(s, NEXAR__BUF_WORK, 0, 0, r ^ d);
    }
    return s->build_rc;
  }
  if (algo == NEXAR__ALGO_NEIGHBOUR) {
    /* Flooding over the links between members: in each round every rank
     * signals each neighbour and waits for each; after as many rounds as
     * the graph's diameter every rank has heard, through its neighbours,
     * from every other. */
    int *nb = malloc((size_t)n * sizeof(int));
    if (!nb) {
      s->build_rc = NEXAR_ERR_NOMEM;
      return s->build_rc;
    }
    int c = nexar__topo_comm_neighbours(s->comm, nb);
    int rounds = nexar__topo_flood_rounds(s->comm);
    for (int k = 0; k < rounds; k++) {
      if (k) nexar__sched_fence(s);
      for (int i = 0; i < c; i++)
        nexar__sched_send(s, NEXAR__BUF_WORK, 0, 0, nb[i]);
      for (int i = 0; i < c; i++)
        nexar__sched_recv(s, NEXAR__BUF_WORK, 0, 0, nb[i]);
    }
    free(nb);
    return s->build_rc;
  }
  if (algo == NEXAR__ALGO_TWO_PHASE) {
    if (r != 0) {
      nexar__sched_send(s, NEXAR__BUF_WORK, 0, 0, 0);
      nexar__sched_recv(s, NEXAR__BUF_WORK, 0, 0, 0);
      return s->build_rc;
    }
    for (int i = 1; i < n; i++) nexar__sched_recv(s, NEXAR__BUF_WORK, 0, 0, i);
    nexar__sched_fence(s);
    for (int i = 1; i < n; i++) nexar__sched_send(s, NEXAR__BUF_WORK, 0, 0, i);
    return s->build_rc;
  }
  for (int d = 1; d < n; d <<= 1) {
    if (d > 1) nexar__sched_fence(s);
    nexar__sched_send(s, NEXAR__BUF_WORK, 0, 0, (r + d) % n);
    nexar__sched_recv(s, NEXAR__BUF_WORK, 0, 0, (r - d + n) % n);
  }
  return s->build_rc;
}
