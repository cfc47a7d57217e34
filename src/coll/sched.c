/*
 * Schedule executor. A round's sends and receives are posted together; when
 * all of them have completed, the round's local steps (reduce, finalize)
 * run and the next round starts. Runs on the progress thread.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/reduce.h"
#include "coll/sched.h"

int nexar__sched_add(nexar__sched_t *s, nexar__step_t st) {
  if (s->nsteps == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    nexar__step_t *n = realloc(s->steps, cap * sizeof(*n));
    if (!n) return NEXAR_ERR_NOMEM;
    s->steps = n;
    s->cap = cap;
  }
  s->steps[s->nsteps++] = st;
  return 0;
}

void nexar__sched_free(nexar__sched_t *s) {
  if (!s) return;
  free(s->steps);
  free(s->tmp);
  free(s->reqs);
  free(s);
}

static void advance(nexar__sched_t *s);

static void finish(nexar__sched_t *s) {
  nexar__req_t *u = s->user;
  u->sched = NULL;
  int rc = s->rc;
  nexar__sched_free(s);
  nexar__req_complete(u, rc);
}

static void step_done(nexar__req_t *r) {
  nexar__sched_t *s = r->cb_arg;
  if (r->rc < 0 && s->rc == 0) s->rc = r->rc;
  if (--s->pending == 0) advance(s);
}

static uint8_t *bufp(nexar__sched_t *s, const nexar__step_t *st) {
  return (st->buf == NEXAR__BUF_TMP ? s->tmp : s->work) + st->off;
}

static void cancel_round(nexar__sched_t *s) {
  for (size_t i = 0; i < s->nreqs; i++) {
    nexar__req_t *r = &s->reqs[i];
    if (!atomic_load(&r->done)) {
      if (r->kind == NEXAR__REQ_RECV || r->omsg)
        nexar__p2p_cancel(r, s->rc);
    }
  }
}

/* Runs local steps of the finished round, then posts the next round. */
static void advance(nexar__sched_t *s) {
  nexar_dtype_t dt = (nexar_dtype_t)s->tmpl.dtype;
  nexar_op_t op = (nexar_op_t)s->tmpl.redop;
  for (;;) {
    if (s->rc < 0) {
      cancel_round(s);
      if (s->pending > 0) return; /* wait for the cancellations */
      finish(s);
      return;
    }
    /* Local steps belonging to the round just completed. */
    uint32_t round = s->cur < s->nsteps ? s->steps[s->cur].round : 0;
    while (s->cur < s->nsteps && s->steps[s->cur].round == round &&
           s->steps[s->cur].kind != NEXAR__ST_SEND &&
           s->steps[s->cur].kind != NEXAR__ST_RECV) {
      const nexar__step_t *st = &s->steps[s->cur++];
      if (st->kind == NEXAR__ST_REDUCE)
        nexar__reduce(s->work + st->off, s->tmp + st->src_off, st->len, dt,
                      op);
      else if (st->kind == NEXAR__ST_FINALIZE)
        nexar__reduce_finalize(s->work + st->off, st->len, dt, op,
                               s->nranks);
      else if (st->kind == NEXAR__ST_COPY_IN && st->len)
        memcpy(s->work + st->off, s->sendbuf + st->off, st->len);
    }
    if (s->cur >= s->nsteps) {
      finish(s);
      return;
    }
    /* Post the communication steps of the next round. */
    round = s->steps[s->cur].round;
    size_t end = s->cur;
    while (end < s->nsteps && s->steps[end].round == round &&
           (s->steps[end].kind == NEXAR__ST_SEND ||
            s->steps[end].kind == NEXAR__ST_RECV))
      end++;
    size_t n = end - s->cur;
    if (n == 0) continue; /* a round of local steps only */
    if (n > s->nreqs) {
      free(s->reqs);
      s->reqs = calloc(n, sizeof(*s->reqs));
      if (!s->reqs) {
        s->nreqs = 0;
        s->rc = NEXAR_ERR_NOMEM;
        continue;
      }
    } else {
      memset(s->reqs, 0, n * sizeof(*s->reqs));
    }
    s->nreqs = n;
    s->pending = (int)n + 1; /* +1 while posting: completions may be
                                synchronous */
    for (size_t i = 0; i < n; i++) {
      const nexar__step_t *st = &s->steps[s->cur + i];
      nexar__req_t *r = &s->reqs[i];
      r->comm = s->comm;
      r->internal = true;
      r->cb = step_done;
      r->cb_arg = s;
      r->lane = s->lane;
      r->comm_peer = st->peer;
      r->peer = s->comm->world_ranks[st->peer];
      r->buf = bufp(s, st);
      r->cap = st->len;
      r->hdr = s->tmpl;
      r->hdr.step = st->id;
      if (st->kind == NEXAR__ST_SEND) {
        r->kind = NEXAR__REQ_SEND;
        r->hdr.src_rank = (uint32_t)s->comm->rank;
      } else {
        r->kind = NEXAR__REQ_RECV;
        r->is_coll = true;
        r->tag = 0;
      }
      if (s->rc < 0) {
        nexar__req_complete(r, s->rc);
        continue;
      }
      nexar__p2p_start(r);
    }
    s->cur = end;
    if (--s->pending > 0) return;
  }
}

void nexar__coll_start(nexar__req_t *u) {
  nexar__sched_t *s = u->sched;
  s->tmpl.coll_seq = s->comm->coll_seq++;
  s->rc = 0;
  advance(s);
}

void nexar__coll_cancel(nexar__req_t *u, int rc) {
  nexar__sched_t *s = u->sched;
  if (!s || atomic_load(&u->done)) return;
  if (s->rc == 0) s->rc = rc;
  cancel_round(s);
  /* Each cancelled step completes and calls step_done; the last one
   * finishes the schedule. */
}
