/*
 * The algorithm of a collective call: a function of the call's fingerprint,
 * the communicator's membership (its hosts, its links) and the parameter
 * table only, so every rank with the same settings chooses alike (and
 * ranks with different settings fail with a mismatch, not a hang).
 */
#include <stdio.h>
#include <string.h>

#include "coll/sched.h"

static int algo_from(const char *v, const char *const names[], const int ids[],
                     int n) {
  for (int i = 0; i < n; i++)
    if (v && strcmp(v, names[i]) == 0) return ids[i];
  return -1;
}

/* NEXAR_ALGO_*: the collectives whose algorithm a setting forces. */
typedef struct {
  int coll;
  const char *env, *expect;
  const char *const *names;
  const int *ids;
  int n;
} algo_setting_t;

#define D NEXAR__ALGO_DEFAULT
#define H NEXAR__ALGO_HIER
static const char *const ar_names[] = {"auto",         "ring",   "rd",
                                       "rabenseifner", "direct", "hier"};
static const int ar_ids[] = {D,
                             NEXAR__ALGO_RING,
                             NEXAR__ALGO_RD,
                             NEXAR__ALGO_RABENSEIFNER,
                             NEXAR__ALGO_DIRECT,
                             H};
static const char *const bc_names[] = {"auto", "binomial", "scatter_allgather",
                                       "hier"};
static const int bc_ids[] = {D, NEXAR__ALGO_BINOMIAL, NEXAR__ALGO_SCATTER_AG,
                             H};
static const char *const re_names[] = {"auto", "binomial", "rs_gather", "hier"};
static const int re_ids[] = {D, NEXAR__ALGO_BINOMIAL, NEXAR__ALGO_RS_GATHER, H};
static const char *const ag_names[] = {"auto", "ring", "rd", "hier"};
static const int ag_ids[] = {D, NEXAR__ALGO_RING, NEXAR__ALGO_RD, H};
static const char *const ba_names[] = {"auto", "two_phase", "dissemination",
                                       "hier"};
static const int ba_ids[] = {D, NEXAR__ALGO_TWO_PHASE,
                             NEXAR__ALGO_DISSEMINATION, H};
#undef D
#undef H
static const algo_setting_t settings[] = {
    {NEXAR__COLL_ALLREDUCE, "NEXAR_ALGO_ALLREDUCE",
     "auto, ring, rd, rabenseifner, direct or hier", ar_names, ar_ids, 6},
    {NEXAR__COLL_BCAST, "NEXAR_ALGO_BCAST",
     "auto, binomial, scatter_allgather or hier", bc_names, bc_ids, 4},
    {NEXAR__COLL_REDUCE, "NEXAR_ALGO_REDUCE",
     "auto, binomial, rs_gather or hier", re_names, re_ids, 4},
    {NEXAR__COLL_ALLGATHER, "NEXAR_ALGO_ALLGATHER", "auto, ring, rd or hier",
     ag_names, ag_ids, 4},
    {NEXAR__COLL_BARRIER, "NEXAR_ALGO_BARRIER",
     "auto, two_phase, dissemination or hier", ba_names, ba_ids, 4},
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

/* The value of setting |i| in |p|, in the order of settings[]. */
static const char *setting_value(const nexar__params_t *p, size_t i) {
  const char *v[NSETTINGS] = {p->algo_allreduce, p->algo_bcast, p->algo_reduce,
                              p->algo_allgather, p->algo_barrier};
  return v[i];
}

/* The algorithm NEXAR_ALGO_* forces for |coll|: NEXAR__ALGO_DEFAULT when
 * auto or when no setting names the collective. */
static int forced_algo(const nexar__params_t *p, int coll) {
  for (size_t i = 0; i < NSETTINGS; i++)
    if (settings[i].coll == coll)
      return algo_from(setting_value(p, i), settings[i].names, settings[i].ids,
                       settings[i].n);
  return NEXAR__ALGO_DEFAULT;
}

int nexar__coll_params_check(const nexar__params_t *p, char *err, size_t len) {
  for (size_t i = 0; i < NSETTINGS; i++) {
    const char *v = setting_value(p, i);
    if (algo_from(v, settings[i].names, settings[i].ids, settings[i].n) < 0) {
      snprintf(err, len, "%s=%s: expected %s", settings[i].env,
               v ? v : "(null)", settings[i].expect);
      return NEXAR_ERR_INVALID_ARG;
    }
  }
  return 0;
}

/* Sparse topologies (docs/topology.md): where the comm's ring (r, r + 1)
 * or its recursive-doubling partners (r, r ^ 2^b) are all links, the
 * algorithm whose messages follow them is preferred, so nothing is
 * relayed; the final barrier floods over links only, so that no process
 * is needed as a relay once it has left it. Applied to automatic choices
 * only (and always to the final barrier). The same on every member: it
 * depends on the membership, the graph and the call. */
static int sparse_plan(const nexar__sched_t *s, const nexar__params_t *p,
                       int a) {
  unsigned shape = nexar__topo_comm_shape(s->comm);
  bool on_xor = (shape & NEXAR__SHAPE_XOR) != 0;
  bool on_ring = (shape & NEXAR__SHAPE_RING) != 0;
  uint64_t bytes = s->a.count * s->a.es;
  switch (s->a.coll) {
    case NEXAR__COLL_BARRIER:
      if (s->a.final) return NEXAR__ALGO_NEIGHBOUR;
      return on_xor ? NEXAR__ALGO_RD : a;
    case NEXAR__COLL_ALLREDUCE:
      if (on_xor)
        return bytes <= (uint64_t)p->allreduce_rd_max_bytes
                   ? NEXAR__ALGO_RD
                   : NEXAR__ALGO_RABENSEIFNER;
      /* The ring at every size: even for 8 bytes its 2(n - 1) steps along
       * links measured no slower than recursive doubling's relayed rounds
       * (docs/topology.md section 8). */
      return on_ring ? NEXAR__ALGO_RING : a;
    case NEXAR__COLL_ALLGATHER:
      return on_xor ? NEXAR__ALGO_RD : on_ring ? NEXAR__ALGO_RING : a;
    default:
      return a;
  }
}

int nexar__coll_flat_algo(const nexar__sched_t *s, const nexar__params_t *p,
                          int n) {
  uint64_t bytes = s->a.count * s->a.es;
  bool pof2 = (n & (n - 1)) == 0;
  switch (s->a.coll) {
    case NEXAR__COLL_BARRIER:
      return n < 5 ? NEXAR__ALGO_TWO_PHASE : NEXAR__ALGO_DISSEMINATION;
    case NEXAR__COLL_ALLREDUCE:
      return bytes <= (uint64_t)p->allreduce_rd_max_bytes ? NEXAR__ALGO_RD
             : bytes < (uint64_t)p->allreduce_ring_min_bytes
                 ? NEXAR__ALGO_RABENSEIFNER
                 : NEXAR__ALGO_RING;
    case NEXAR__COLL_BCAST:
      return bytes >= (uint64_t)p->bcast_large_bytes && n > 2
                 ? NEXAR__ALGO_SCATTER_AG
                 : NEXAR__ALGO_BINOMIAL;
    case NEXAR__COLL_REDUCE:
      return bytes >= (uint64_t)p->reduce_large_bytes && n > 2
                 ? NEXAR__ALGO_RS_GATHER
                 : NEXAR__ALGO_BINOMIAL;
    case NEXAR__COLL_ALLGATHER:
      return pof2 && bytes * (uint64_t)n <= (uint64_t)p->allgather_rd_max_bytes
                 ? NEXAR__ALGO_RD
                 : NEXAR__ALGO_RING;
    case NEXAR__COLL_ALLGATHERV:
    case NEXAR__COLL_REDUCE_SCATTER:
      return NEXAR__ALGO_RING;
    case NEXAR__COLL_ALLTOALL:
    case NEXAR__COLL_ALLTOALLV:
      return NEXAR__ALGO_PAIRWISE;
    case NEXAR__COLL_GATHER:
    case NEXAR__COLL_SCATTER:
      return bytes < (uint64_t)p->gather_direct_min_bytes ? NEXAR__ALGO_BINOMIAL
                                                          : NEXAR__ALGO_DIRECT;
    case NEXAR__COLL_GATHERV:
    case NEXAR__COLL_SCATTERV:
      return NEXAR__ALGO_DIRECT;
    default: /* scan, exscan */
      return NEXAR__ALGO_RD;
  }
}

/* Two-level algorithms (docs/communicators.md): automatic, or forced with
 * NEXAR_ALGO_*=hier, for the five collectives that have one, when the
 * comm spans several hosts and some host holds several of its ranks;
 * forced elsewhere, the flat choice. Never for nexar_finalize's barrier. */
static bool hier_fits(const nexar__sched_t *s) {
  int c = s->a.coll;
  return (c == NEXAR__COLL_BARRIER || c == NEXAR__COLL_BCAST ||
          c == NEXAR__COLL_ALLREDUCE || c == NEXAR__COLL_REDUCE ||
          c == NEXAR__COLL_ALLGATHER) &&
         !s->a.final && nexar__comm_multi_host(s->comm);
}

/* The one-round (direct) allreduce for a small vector on a communicator of
 * 3 to 16 ranks that all share this host over shared memory, on a full,
 * eagerly formed mesh. There every round of recursive doubling costs each
 * rank a turn on a CPU (and a fold when n is not a power of two), and one
 * round of n - 1 eager messages measured faster: 64 B at np 3, 4, 6, 8
 * and 16 on 2 CPUs, 10.7-11.2 against 17.0-17.8 us at np 3, 80-84 against
 * 105-122 at np 8 (docs/performance.md). At n = 2 it is recursive
 * doubling. */
static bool direct_fits(const nexar__sched_t *s, const nexar__params_t *p,
                        const nexar__topo_t *t) {
  int n = s->comm->size;
  return s->a.coll == NEXAR__COLL_ALLREDUCE && n >= 3 && n <= 16 &&
         s->a.count * s->a.es <= (uint64_t)p->allreduce_direct_max_bytes &&
         t->kind == NEXAR__TOPO_FULL && !t->lazy && !s->a.final &&
         strcmp(p->transport, "quic") != 0 && nexar__comm_one_host(s->comm);
}

void nexar__coll_plan(nexar__sched_t *s, const nexar__params_t *p) {
  int a = forced_algo(p, s->a.coll);
  if ((a == NEXAR__ALGO_DEFAULT || a == NEXAR__ALGO_HIER) && hier_fits(s)) {
    s->a.algo = NEXAR__ALGO_HIER;
    return;
  }
  bool forced = a != NEXAR__ALGO_DEFAULT && a != NEXAR__ALGO_HIER;
  const nexar__topo_t *t = &s->comm->ctx->topo;
  if (!forced)
    a = direct_fits(s, p, t) ? NEXAR__ALGO_DIRECT
                             : nexar__coll_flat_algo(s, p, s->comm->size);
  if (t->kind != NEXAR__TOPO_FULL && (!forced || s->a.final))
    a = sparse_plan(s, p, a);
  /* A lazy mesh's final barrier floods over the links it formed (the
   * hypercube's): finalize dials no one. */
  else if (t->lazy && s->a.final)
    a = NEXAR__ALGO_NEIGHBOUR;
  s->a.algo = a;
}
