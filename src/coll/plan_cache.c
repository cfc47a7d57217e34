/*
 * The plan cache: a built and sealed schedule is kept per communicator
 * (NEXAR__PLANS of them, replaced in turn) and copied for the next call
 * with the same arguments instead of being built again, as NCCL and the MPI
 * libraries keep the plans of repeated calls. Building a small allreduce
 * costs several thousand instructions (steps, hazard edges, successor
 * lists); a copy costs a few hundred.
 *
 * Schedules are built on the calling thread, so the slots are taken out
 * with an atomic exchange while one is read or replaced: two threads that
 * post collectives on one communicator at once (which the API leaves
 * unordered) find a slot empty rather than read one being freed.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/sched.h"

struct nexar__plan {
  nexar__coll_args_t key; /* counts, displs: NULL (v-forms are not kept) */
  uint32_t epoch;
  int size, rank;
  uint64_t tmp_bytes;
  size_t nsteps, nsucc;
  nexar__step_t *steps; /* in the same allocation, after the plan */
  uint32_t *succ;       /* likewise, after the steps */
};

/* Whether the call |s| describes may be kept: v-forms carry per-call
 * count arrays that the key does not hold. */
static bool keepable(const nexar__sched_t *s) {
  return !s->a.counts && !s->a.displs && !s->a.rcounts && !s->a.rdispls;
}

static bool same_call(const nexar__plan_t *p, const nexar__sched_t *s) {
  const nexar__coll_args_t *a = &p->key, *b = &s->a;
  return a->coll == b->coll && a->algo == b->algo && a->dtype == b->dtype &&
         a->op == b->op && a->es == b->es && a->count == b->count &&
         a->root == b->root && a->in_place == b->in_place &&
         a->avg_div == b->avg_div && a->final == b->final &&
         p->epoch == s->comm->epoch && p->size == s->comm->size &&
         p->rank == s->comm->rank;
}

int nexar__plan_use(nexar__sched_t *s) {
  if (!keepable(s)) return 0;
  nexar_comm_t *c = s->comm;
  for (int i = 0; i < NEXAR__PLANS; i++) {
    nexar__plan_t *p = atomic_exchange(&c->plans[i], NULL);
    if (!p) continue;
    bool hit = same_call(p, s);
    int rc = 1;
    if (hit) {
      size_t n = p->nsteps;
      s->steps = malloc((n ? n : 1) * sizeof(*s->steps));
      s->succ = malloc((p->nsucc ? p->nsucc : 1) * sizeof(*s->succ));
      s->ready = malloc((n ? n : 1) * sizeof(*s->ready));
      s->reqs = nexar__zalloc((n ? n : 1) * sizeof(*s->reqs));
      if (!s->steps || !s->succ || !s->ready || !s->reqs) {
        rc = NEXAR_ERR_NOMEM; /* the caller frees what was allocated */
      } else {
        if (n) memcpy(s->steps, p->steps, n * sizeof(*s->steps));
        if (p->nsucc) memcpy(s->succ, p->succ, p->nsucc * sizeof(*s->succ));
        s->nsteps = s->cap = n;
        s->nedges = p->nsucc;
        s->tmp_bytes = p->tmp_bytes;
      }
    }
    nexar__plan_t *none = NULL;
    if (!atomic_compare_exchange_strong(&c->plans[i], &none, p)) free(p);
    if (hit) return rc;
  }
  return 0;
}

void nexar__plan_keep(const nexar__sched_t *s) {
  if (!keepable(s)) return;
  size_t n = s->nsteps, ns = s->nedges;
  nexar__plan_t *p =
      malloc(sizeof(*p) + n * sizeof(*s->steps) + ns * sizeof(*s->succ));
  if (!p) return; /* only a cache */
  p->key = s->a;
  p->epoch = s->comm->epoch;
  p->size = s->comm->size;
  p->rank = s->comm->rank;
  p->tmp_bytes = s->tmp_bytes;
  p->nsteps = n;
  p->nsucc = ns;
  p->steps = (nexar__step_t *)(p + 1);
  p->succ = (uint32_t *)(p->steps + n);
  if (n) memcpy(p->steps, s->steps, n * sizeof(*s->steps));
  if (ns) memcpy(p->succ, s->succ, ns * sizeof(*s->succ));
  nexar_comm_t *c = s->comm;
  unsigned i = atomic_fetch_add(&c->plan_next, 1u) % NEXAR__PLANS;
  free(atomic_exchange(&c->plans[i], p));
}
