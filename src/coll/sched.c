/*
 * Schedule construction (dependency inference) and execution. Building
 * runs on the calling thread; execution runs on the progress thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/reduce.h"
#include "coll/sched.h"
#include "core/flight.h"

enum { ST_WAITING = 0, ST_READY, ST_POSTED, ST_DONE };

/* ---- Building ---- */

static void latch(nexar__sched_t *s, int rc) {
  if (s->build_rc == 0) s->build_rc = rc;
}

static void add_edge(nexar__sched_t *s, size_t from, size_t to) {
  if (s->nedges == s->cap_edges) {
    size_t cap = s->cap_edges ? s->cap_edges * 2 : 64;
    uint32_t(*e)[2] = realloc(s->edges, cap * sizeof(*e));
    if (!e) {
      latch(s, NEXAR_ERR_NOMEM);
      return;
    }
    s->edges = e;
    s->cap_edges = cap;
  }
  s->edges[s->nedges][0] = (uint32_t)from;
  s->edges[s->nedges][1] = (uint32_t)to;
  s->nedges++;
}

/* The byte ranges a step reads and writes: at most two reads, one write. */
typedef struct {
  int buf;
  uint64_t off, len;
} range_t;

static int reads(const nexar__step_t *st, range_t r[2]) {
  switch (st->kind) {
    case NEXAR__ST_RECV:
      if (st->fold_own)
        r[0] = (range_t){st->src_buf, st->src_off, st->len};
      else
        r[0] = (range_t){st->buf, st->off, st->len};
      return st->fold ? 1 : 0;
    case NEXAR__ST_SEND:
      r[0] = (range_t){st->buf, st->off, st->len};
      return 1;
    case NEXAR__ST_REDUCE:
      r[0] = (range_t){st->buf, st->off, st->len};
      r[1] = (range_t){st->src_buf, st->src_off, st->len};
      return 2;
    case NEXAR__ST_COPY:
      r[0] = (range_t){st->src_buf, st->src_off, st->len};
      return 1;
    case NEXAR__ST_FINALIZE:
      r[0] = (range_t){st->buf, st->off, st->len};
      return 1;
    default:
      return 0;
  }
}

static bool writes(const nexar__step_t *st, range_t *w) {
  if (st->kind == NEXAR__ST_SEND || st->kind == NEXAR__ST_FENCE) return false;
  *w = (range_t){st->buf, st->off, st->len};
  return true;
}

static bool overlap(range_t a, range_t b) {
  return a.buf == b.buf && a.len && b.len && a.off < b.off + b.len &&
         b.off < a.off + a.len;
}

static bool conflicts(const nexar__step_t *a, const nexar__step_t *b) {
  range_t ra[2], rb[2], wa = {0, 0, 0}, wb = {0, 0, 0};
  int na = reads(a, ra), nb = reads(b, rb);
  bool ha = writes(a, &wa), hb = writes(b, &wb);
  if (ha && hb && overlap(wa, wb)) return true;
  for (int i = 0; ha && i < nb; i++)
    if (overlap(wa, rb[i])) return true;
  for (int i = 0; hb && i < na; i++)
    if (overlap(wb, ra[i])) return true;
  return false;
}

static void add_step(nexar__sched_t *s, nexar__step_t st) {
  if (s->build_rc) return;
  if (st.kind != NEXAR__ST_FENCE) {
    st.off += s->alias_off[st.buf];
    st.buf = s->alias[st.buf];
    if (st.kind == NEXAR__ST_REDUCE || st.kind == NEXAR__ST_COPY) {
      st.src_off += s->alias_off[st.src_buf];
      st.src_buf = s->alias[st.src_buf];
    }
    if (st.kind == NEXAR__ST_COPY && st.buf == st.src_buf &&
        st.off == st.src_off)
      return; /* a copy onto itself */
  }
  if (s->nsteps == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 32;
    nexar__step_t *n =
        cap > UINT32_MAX ? NULL : realloc(s->steps, cap * sizeof(*n));
    if (!n) {
      latch(s, NEXAR_ERR_NOMEM);
      return;
    }
    s->steps = n;
    s->cap = cap;
  }
  size_t j = s->nsteps++;
  s->steps[j] = st;
  /* Dependencies: hazards with every step since the latest fence, and
   * the fence itself (which stands for everything before it). */
  size_t lo = s->fence == SIZE_MAX ? 0 : s->fence + 1;
  if (st.kind == NEXAR__ST_FENCE) {
    for (size_t i = lo; i < j; i++) add_edge(s, i, j);
    if (s->fence != SIZE_MAX) add_edge(s, s->fence, j);
    s->fence = j;
    return;
  }
  if (s->fence != SIZE_MAX) add_edge(s, s->fence, j);
  for (size_t i = lo; i < j; i++)
    if (conflicts(&s->steps[i], &s->steps[j])) add_edge(s, i, j);
}

/* The comm rank of group index |peer|, or -1 (latched) when out of range. */
static int peer_rank(nexar__sched_t *s, int peer) {
  if (peer < 0 || peer >= s->gsize) {
    latch(s, NEXAR_ERR_INTERNAL);
    return -1;
  }
  return s->gmap ? s->gmap[peer] : peer;
}

/* One credited relay frame's payload in whole elements (at least one
 * element); 0 on a full mesh, which relays nothing. */
static uint64_t credited(const nexar__sched_t *s) {
  uint64_t p = nexar__credit_frame(s->comm->ctx), es = s->a.es ? s->a.es : 1;
  return !p ? 0 : p > es ? p - p % es : es;
}

/* The most bytes a transfer sends without waiting for a clear-to-send:
 * NEXAR_EAGER_BYTES, at most one credited frame |p|. */
static uint64_t eager(const nexar__sched_t *s, uint64_t p) {
  uint64_t e = (uint64_t)s->comm->ctx->prm.eager_bytes;
  return e < p ? e : p;
}

/* Appends transfer |st| (SEND or RECV, its peer a comm rank) of |bytes| at
 * st.off (docs/topology.md section 10, rule 6). On a sparse topology a
 * transfer above the eager size waits for a clear-to-send: the receiver
 * sends an empty message (step id NEXAR__COLL_STEP_CTS | its number among
 * such transfers from that peer) once it has posted the receives (the CTS
 * step has every predecessor of every piece and comes after them in the
 * ready queue), and the sender's steps wait for it, so none of its bytes
 * arrive unexpected. To a peer that is not a neighbour it is also cut into
 * pieces of one credited frame, which relays store and forward under
 * end-to-end credit. Each piece takes the next step id for its peer and
 * direction; both ends cut the same way (the graph is undirected, the
 * settings the job's). */
static void xfer(nexar__sched_t *s, nexar__step_t st, uint64_t bytes) {
  const nexar_comm_t *c = s->comm;
  uint64_t p = credited(s), off = st.off, src_off = st.src_off;
  bool send = st.kind == NEXAR__ST_SEND, cts = p && bytes > eager(s, p);
  uint64_t max =
      cts && !nexar__topo_adjacent(&c->ctx->topo, c->world_ranks[c->rank],
                                   c->world_ranks[st.peer])
          ? p
          : 0;
  uint32_t *ids = send ? s->nsent : s->nrecvd;
  int n = c->size;
  size_t first = s->nsteps, e0 = s->nedges, wait = 0;
  if (cts && send) { /* the clear-to-send, posted at once */
    wait = s->nsteps;
    add_step(s, (nexar__step_t){
                    .kind = NEXAR__ST_RECV,
                    .peer = st.peer,
                    .id = NEXAR__COLL_STEP_CTS | s->nrecvd[n + st.peer]++});
    first = s->nsteps;
  }
  uint64_t o = 0;
  do {
    st.len = max && bytes - o > max ? max : bytes - o;
    st.off = off + o;
    st.src_off = src_off + o; /* a fold's own operand moves with it */
    st.id = ids[st.peer]++;
    add_step(s, st);
    if (cts && send && !s->build_rc) add_edge(s, wait, s->nsteps - 1);
    o += st.len;
  } while (o < bytes);
  if (!cts || send || s->build_rc) return;
  size_t last = s->nsteps, e1 = s->nedges;
  add_step(
      s, (nexar__step_t){.kind = NEXAR__ST_SEND,
                         .peer = st.peer,
                         .id = NEXAR__COLL_STEP_CTS | s->nsent[n + st.peer]++});
  for (size_t e = e0; e < e1 && !s->build_rc; e++)
    if (s->edges[e][1] >= first && s->edges[e][0] < first)
      add_edge(s, s->edges[e][0], last);
}

void nexar__sched_send(nexar__sched_t *s, int buf, uint64_t off, uint64_t bytes,
                       int peer) {
  if ((peer = peer_rank(s, peer)) < 0) return;
  xfer(s,
       (nexar__step_t){.kind = NEXAR__ST_SEND,
                       .buf = (uint8_t)buf,
                       .peer = peer,
                       .off = off},
       bytes);
}

void nexar__sched_recv(nexar__sched_t *s, int buf, uint64_t off, uint64_t bytes,
                       int peer) {
  if ((peer = peer_rank(s, peer)) < 0) return;
  xfer(s,
       (nexar__step_t){.kind = NEXAR__ST_RECV,
                       .buf = (uint8_t)buf,
                       .peer = peer,
                       .off = off},
       bytes);
}

void nexar__sched_recv_fold_own(nexar__sched_t *s, int buf, uint64_t off,
                                int own, uint64_t own_off, uint64_t bytes,
                                int peer, bool left) {
  if ((peer = peer_rank(s, peer)) < 0) return;
  xfer(s,
       (nexar__step_t){.kind = NEXAR__ST_RECV,
                       .fold = bytes != 0,
                       .fold_left = left,
                       .fold_own = own != buf || own_off != off,
                       .buf = (uint8_t)buf,
                       .src_buf = (uint8_t)own,
                       .peer = peer,
                       .off = off,
                       .src_off = own_off},
       bytes);
}

void nexar__sched_recv_fold(nexar__sched_t *s, int buf, uint64_t off,
                            uint64_t bytes, int peer, bool left) {
  nexar__sched_recv_fold_own(s, buf, off, buf, off, bytes, peer, left);
}

void nexar__sched_reduce(nexar__sched_t *s, int dst, uint64_t dst_off, int src,
                         uint64_t src_off, uint64_t bytes) {
  if (!bytes) return;
  add_step(s, (nexar__step_t){.kind = NEXAR__ST_REDUCE,
                              .buf = (uint8_t)dst,
                              .src_buf = (uint8_t)src,
                              .off = dst_off,
                              .src_off = src_off,
                              .len = bytes});
}

void nexar__sched_copy(nexar__sched_t *s, int dst, uint64_t dst_off, int src,
                       uint64_t src_off, uint64_t bytes) {
  if (!bytes) return;
  add_step(s, (nexar__step_t){.kind = NEXAR__ST_COPY,
                              .buf = (uint8_t)dst,
                              .src_buf = (uint8_t)src,
                              .off = dst_off,
                              .src_off = src_off,
                              .len = bytes});
}

void nexar__sched_finalize(nexar__sched_t *s, int buf, uint64_t off,
                           uint64_t bytes) {
  if (!bytes || s->a.op != NEXAR_AVG || s->hold_final) return;
  add_step(s, (nexar__step_t){.kind = NEXAR__ST_FINALIZE,
                              .buf = (uint8_t)buf,
                              .off = off,
                              .len = bytes});
}

void nexar__sched_fence(nexar__sched_t *s) {
  add_step(s, (nexar__step_t){.kind = NEXAR__ST_FENCE});
}

uint64_t nexar__sched_tmp(nexar__sched_t *s, uint64_t bytes) {
  uint64_t off = s->tmp_bytes;
  s->tmp_bytes += (bytes + 63) & ~(uint64_t)63;
  return off;
}

static int seal(nexar__sched_t *s) {
  size_t n = s->nsteps;
  s->succ = malloc((s->nedges ? s->nedges : 1) * sizeof(*s->succ));
  s->ready = malloc((n ? n : 1) * sizeof(*s->ready));
  s->reqs = nexar__zalloc((n ? n : 1) * sizeof(*s->reqs));
  if (!s->succ || !s->ready || !s->reqs) return NEXAR_ERR_NOMEM;
  /* Counting sort of the edges by source: successor lists. */
  for (size_t i = 0; i < n; i++) s->steps[i].nsucc = s->steps[i].ndeps = 0;
  for (size_t e = 0; e < s->nedges; e++) {
    s->steps[s->edges[e][0]].nsucc++;
    s->steps[s->edges[e][1]].ndeps++;
  }
  uint32_t pos = 0;
  for (size_t i = 0; i < n; i++) {
    s->steps[i].succ = pos;
    pos += s->steps[i].nsucc;
    s->steps[i].nsucc = 0;
  }
  for (size_t e = 0; e < s->nedges; e++) {
    nexar__step_t *from = &s->steps[s->edges[e][0]];
    s->succ[from->succ + from->nsucc++] = s->edges[e][1];
  }
  free(s->edges);
  s->edges = NULL;
  return 0;
}

int nexar__build_flat(nexar__sched_t *s) {
  switch (s->a.coll) {
    case NEXAR__COLL_BARRIER:
      return nexar__build_barrier(s);
    case NEXAR__COLL_BCAST:
      return nexar__build_bcast(s);
    case NEXAR__COLL_ALLREDUCE:
      return nexar__build_allreduce(s);
    case NEXAR__COLL_REDUCE:
      return nexar__build_reduce(s);
    case NEXAR__COLL_ALLGATHER:
    case NEXAR__COLL_ALLGATHERV:
      return nexar__build_allgather(s);
    case NEXAR__COLL_REDUCE_SCATTER:
      return nexar__build_reduce_scatter(s);
    case NEXAR__COLL_ALLTOALL:
    case NEXAR__COLL_ALLTOALLV:
      return nexar__build_alltoall(s);
    case NEXAR__COLL_GATHER:
    case NEXAR__COLL_GATHERV:
      return nexar__build_gather(s);
    case NEXAR__COLL_SCATTER:
    case NEXAR__COLL_SCATTERV:
      return nexar__build_scatter(s);
    case NEXAR__COLL_SCAN:
    case NEXAR__COLL_EXSCAN:
      return nexar__build_scan(s);
    default:
      return NEXAR_ERR_INTERNAL;
  }
}

int nexar__sched_build(nexar__sched_t *s) {
  int hit = nexar__plan_use(s);
  if (hit) return hit < 0 ? hit : 0;
  int n = s->comm->size;
  s->fence = SIZE_MAX;
  s->gsize = n;
  s->grank = s->comm->rank;
  s->gmap = NULL;
  for (int b = 0; b < NEXAR__BUF_COUNT; b++) {
    s->alias[b] = (uint8_t)b;
    s->alias_off[b] = 0;
  }
  s->nsent = calloc((size_t)n * 2, sizeof(*s->nsent));
  s->nrecvd = calloc((size_t)n * 2, sizeof(*s->nrecvd));
  if (!s->nsent || !s->nrecvd) return NEXAR_ERR_NOMEM;
  int rc = s->a.algo == NEXAR__ALGO_HIER ? nexar__build_hier(s)
                                         : nexar__build_flat(s);
  if (rc == 0) rc = s->build_rc;
  free(s->nsent);
  free(s->nrecvd);
  s->nsent = s->nrecvd = NULL;
  if (rc == 0) rc = seal(s);
  if (rc == 0) nexar__plan_keep(s);
  return rc;
}

void nexar__sched_free(nexar__sched_t *s) {
  if (!s) return;
  free(s->steps);
  free(s->edges);
  free(s->nsent);
  free(s->nrecvd);
  free(s->succ);
  free(s->ready);
  free(s->reqs);
  if (s->tmp_shared)
    s->comm->scratch_busy = false;
  else
    free(s->bufs[NEXAR__BUF_TMP]);
  free(s);
}

/* Scratch for |s|: the communicator's when it is free (grown if need be,
 * kept up to SCRATCH_KEEP_MAX bytes), else an allocation of its own. */
#define SCRATCH_KEEP_MAX (256ull << 20)
static uint8_t *take_scratch(nexar__sched_t *s) {
  nexar_comm_t *c = s->comm;
  if (c->scratch_busy || s->tmp_bytes > SCRATCH_KEEP_MAX)
    return malloc((size_t)s->tmp_bytes);
  if (c->scratch_bytes < s->tmp_bytes) {
    free(c->scratch);
    c->scratch = malloc((size_t)s->tmp_bytes);
    c->scratch_bytes = c->scratch ? s->tmp_bytes : 0;
    if (!c->scratch) return NULL;
  }
  c->scratch_busy = true;
  s->tmp_shared = true;
  return c->scratch;
}

/* ---- Running (progress thread) ---- */

static void finish(nexar__sched_t *s) {
  nexar__req_t *u = s->user;
  int rc = s->rc;
  nexar__coll_finished(s);
  u->sched = NULL;
  nexar__sched_free(s);
  nexar__req_complete(u, rc);
}

static void make_ready(nexar__sched_t *s, uint32_t i) {
  s->steps[i].state = ST_READY;
  s->ready[s->ready_tail++] = i;
}

static void step_done(nexar__sched_t *s, uint32_t i) {
  nexar__step_t *st = &s->steps[i];
  st->state = ST_DONE;
  s->ndone++;
  for (uint32_t k = 0; k < st->nsucc; k++) {
    uint32_t j = s->succ[st->succ + k];
    if (--s->steps[j].ndeps == 0) make_ready(s, j);
  }
}

/* The flight recorder notes whom a failing collective waited for. */
static void flight_waits(nexar__sched_t *s) {
  if (!s->user->flight) return;
  char missing[256];
  nexar__sched_missing(s, missing, sizeof missing);
  nexar__flight_waits(s->user, strcmp(missing, "none") ? missing : "");
}

/* Fails the schedule: cancels every posted step. Their completions come
 * back through comm_done while |running| keeps them from finishing the
 * schedule under our feet. */
static void fail(nexar__sched_t *s, int rc) {
  if (s->rc == 0) {
    flight_waits(s);
    s->rc = rc;
  }
  bool was = s->running;
  s->running = true;
  for (size_t i = 0; i < s->nsteps; i++)
    if (s->steps[i].state == ST_POSTED) nexar__p2p_cancel(&s->reqs[i], s->rc);
  s->running = was;
}

static void run(nexar__sched_t *s);

static void comm_done(nexar__req_t *r) {
  nexar__sched_t *s = r->cb_arg;
  s->inflight--;
  if (r->rc < 0 && s->rc == 0) flight_waits(s); /* before |r| counts done */
  step_done(s, (uint32_t)(r - s->reqs));
  if (r->rc < 0 && s->rc == 0) fail(s, r->rc);
  run(s);
}

/* A folding receive's payload, whole elements at |dst| (p2p/match.c keeps
 * a partial element until the rest of it lands). */
static void fold(const nexar__req_t *r, uint8_t *dst, const uint8_t *src,
                 size_t n) {
  const nexar__sched_t *s = r->cb_arg;
  if (r->fold_own)
    nexar__reduce3(dst, r->fold_own + (dst - r->buf), src, n / s->a.es,
                   s->a.dtype, s->a.op);
  else
    nexar__reduce(dst, src, n / s->a.es, s->a.dtype, s->a.op);
}

static void fold_left(const nexar__req_t *r, uint8_t *dst, const uint8_t *src,
                      size_t n) {
  const nexar__sched_t *s = r->cb_arg;
  const uint8_t *own = r->fold_own ? r->fold_own + (dst - r->buf) : dst;
  nexar__reduce3(dst, src, own, n / s->a.es, s->a.dtype, s->a.op);
}

static void post(nexar__sched_t *s, uint32_t i) {
  const nexar__step_t *st = &s->steps[i];
  nexar__req_t *r = &s->reqs[i];
  r->comm = s->comm;
  r->internal = true;
  r->cb = comm_done;
  r->cb_arg = s;
  r->lane = s->lane;
  r->comm_peer = st->peer;
  r->peer = s->comm->world_ranks[st->peer];
  r->buf = st->len ? s->bufs[st->buf] + st->off : NULL;
  r->cap = st->len;
  r->hdr = s->tmpl;
  r->hdr.step = st->id;
  if (st->kind == NEXAR__ST_SEND) {
    r->kind = NEXAR__REQ_SEND;
    r->hdr.src_rank = (uint32_t)s->comm->rank;
  } else {
    r->kind = NEXAR__REQ_RECV;
    r->is_coll = true;
    r->fold = !st->fold ? NULL : st->fold_left ? fold_left : fold;
    r->fold_es = (uint32_t)s->a.es;
    r->fold_own =
        st->fold && st->fold_own ? s->bufs[st->src_buf] + st->src_off : NULL;
  }
  s->steps[i].state = ST_POSTED;
  s->inflight++;
  nexar__p2p_start(r);
}

/* Runs at most |budget| bytes (whole elements; at least one) of the rest
 * of local step |st| from s->part on, or all of it when a copy's ranges
 * overlap (memmove's order); returns the bytes run. */
static uint64_t exec_local(nexar__sched_t *s, const nexar__step_t *st,
                           uint64_t budget) {
  uint64_t es = s->a.es, left = st->len - s->part, n = left;
  if (!left) return 0; /* a fence */
  bool overlap = st->kind == NEXAR__ST_COPY && st->buf == st->src_buf &&
                 st->off < st->src_off + st->len &&
                 st->src_off < st->off + st->len;
  if (n > budget && !overlap) n = budget > es ? budget - budget % es : es;
  uint8_t *dst = s->bufs[st->buf] + st->off + s->part;
  if (st->kind == NEXAR__ST_REDUCE)
    nexar__reduce(dst, s->bufs[st->src_buf] + st->src_off + s->part,
                  (size_t)(n / es), s->a.dtype, s->a.op);
  else if (st->kind == NEXAR__ST_COPY)
    memmove(dst, s->bufs[st->src_buf] + st->src_off + s->part, (size_t)n);
  else if (st->kind == NEXAR__ST_FINALIZE)
    nexar__reduce_finalize(dst, (size_t)(n / es), s->a.dtype, s->a.op,
                           s->a.avg_div);
  s->part += n;
  return n;
}

static int resume_start(nexar__req_t *r) {
  (void)r;
  return 0;
}

/* The engine ran |s|'s resume operation: the local work goes on. */
static void resume_done(nexar__req_t *r) {
  nexar__sched_t *s = r->cb_arg;
  s->resuming = false;
  run(s); /* may finish and free |s|: |r| is not touched after this */
}

/* A slice of local work is done: the rest runs from the engine's queue,
 * after what the engine has read and before it writes, so that a pass
 * holds the engine for about a slice of it (control and RPC messages,
 * and other threads' posts, are handled in between). */
static void defer(nexar__sched_t *s) {
  nexar__req_t *r = &s->resume;
  memset(r, 0, sizeof(*r));
  r->kind = NEXAR__REQ_CTRL;
  r->internal = true;
  r->ctrl = resume_start;
  r->cb = resume_done;
  r->cb_arg = s;
  r->comm = s->comm;
  s->resuming = true;
  nexar__ep_post(&s->comm->ctx->ep, r);
}

/* Runs ready steps until none is left, the local ones about
 * NEXAR_PASS_SLICE_BYTES per call (defer); re-entrant calls (completions
 * that happen inside a post) only queue work for the outer loop. */
static void run(nexar__sched_t *s) {
  if (s->running || s->resuming) return;
  s->running = true;
  uint64_t budget = s->comm->ctx->ep.slice;
  while (s->rc == 0 && s->ready_head < s->ready_tail) {
    uint32_t i = s->ready[s->ready_head];
    nexar__step_t *st = &s->steps[i];
    if (st->kind == NEXAR__ST_SEND || st->kind == NEXAR__ST_RECV) {
      s->ready_head++;
      post(s, i);
      continue;
    }
    if (!budget && st->len > s->part) {
      defer(s);
      break;
    }
    uint64_t n = exec_local(s, st, budget);
    budget = n < budget ? budget - n : 0;
    if (s->part == st->len) {
      s->part = 0;
      s->ready_head++;
      step_done(s, i);
    }
  }
  s->running = false;
  if (!s->resuming && s->inflight == 0 && (s->rc < 0 || s->ndone == s->nsteps))
    finish(s);
}

void nexar__coll_start(nexar__req_t *u) {
  nexar__sched_t *s = u->sched;
  /* The finalize barrier has a number of its own, so it works even when
   * the ranks disagree on the sequence (after a mismatch or a timeout). */
  s->tmpl.coll_seq = s->a.final ? UINT64_MAX : s->comm->coll_seq++;
  nexar__flight_post(
      s->comm->ctx, u,
      s->a.final ? "finalize_barrier" : nexar__coll_name(s->a.coll),
      nexar__algo_name(s->a.algo), s->tmpl.coll_seq,
      s->a.coll == NEXAR__COLL_BARRIER ? -1 : (int)s->a.dtype, s->a.count,
      s->a.root, -1);
  /* A mismatch found while starting fails |s|; |running| keeps that from
   * finishing (freeing) it before we are done here. */
  s->running = true;
  int rc = nexar__coll_started(s);
  if (rc < 0 && s->rc == 0) s->rc = rc;
  if (s->rc == 0 && s->tmp_bytes) {
    s->bufs[NEXAR__BUF_TMP] = take_scratch(s);
    if (!s->bufs[NEXAR__BUF_TMP]) s->rc = NEXAR_ERR_NOMEM;
  }
  for (uint32_t i = 0; s->rc == 0 && i < s->nsteps; i++)
    if (s->steps[i].ndeps == 0) make_ready(s, i);
  s->running = false;
  run(s);
}

void nexar__coll_fail_comm(nexar_comm_t *comm, int rc) {
  /* Cancelling one may finish and free others, so start over after each. */
  for (bool again = true; again;) {
    again = false;
    for (nexar__sched_t *s = comm->active; s; s = s->next) {
      if (s->rc) continue; /* already failing */
      nexar__coll_cancel(s->user, rc);
      again = true;
      break;
    }
  }
}

void nexar__coll_expire(nexar__req_t *r) {
  nexar_ctx_t *ctx = r->comm->ctx;
  nexar__sched_t *s = r->sched;
  char missing[256];
  nexar__sched_missing(s, missing, sizeof missing);
  nexar__comm_set_error(
      r->comm,
      "rank %d: %s (collective #%llu of comm %llu) did not finish within "
      "NEXAR_OP_TIMEOUT_MS=%lld; ranks that have not contributed: %s; "
      "receive buffers are unspecified",
      ctx->rank, nexar__coll_name(s->a.coll),
      (unsigned long long)s->tmpl.coll_seq, (unsigned long long)r->comm->id,
      (long long)ctx->prm.op_timeout_ms, missing);
  nexar__coll_cancel(r, NEXAR_ERR_TIMEOUT);
}

void nexar__coll_cancel(nexar__req_t *u, int rc) {
  nexar__sched_t *s = u->sched;
  if (!s || atomic_load(&u->done)) return;
  fail(s, rc);
  run(s); /* finishes the schedule once nothing is in flight */
}

void nexar__coll_waiting(const nexar__req_t *req, char *out, size_t len) {
  nexar__sched_missing(req->sched, out, len);
}

void nexar__sched_missing(const nexar__sched_t *s, char *out, size_t len) {
  size_t used = 0;
  out[0] = 0;
  int n = s->comm->size;
  for (int p = 0; p < n; p++) {
    bool waiting = false;
    for (size_t i = 0; i < s->nsteps && !waiting; i++)
      waiting = s->steps[i].kind == NEXAR__ST_RECV && s->steps[i].peer == p &&
                s->steps[i].state != ST_DONE;
    if (!waiting) continue;
    int k = snprintf(out + used, len - used, "%s%d", used ? ", " : "", p);
    if (k < 0 || (size_t)k >= len - used) break;
    used += (size_t)k;
  }
  if (!used) snprintf(out, len, "none");
}
