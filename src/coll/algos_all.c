/*
 * All-to-all collectives as schedules: allgather(v), reduce_scatter and
 * alltoall(v).
 */
#include <stdlib.h>

#include "coll/algos.h"

/* Alltoall steps in flight at once, as MPICH's bblock. */
#define ALLTOALL_WINDOW 8

/* ---- Ring reduce-scatter (shared with the large-message reduce) ---- */

/*
 * Patarasuk & Yuan 2009: in step k = 0..n-2 rank r sends block r-k-1 to
 * r+1 and receives block r-k-2 from r-1, which it combines with its own
 * input for that block; the block it sends in step k+1 is the one it
 * completed in step k, so after n-1 steps block r holds every rank's
 * contribution. Each block moves in NEXAR_SEG_BYTES segments, and every
 * segment depends only on its own predecessors, so the steps pipeline.
 * Received blocks land in a scratch image of the input layout, each range
 * written once: no receive ever waits for a send to complete.
 */
void nexar__ring_reduce_scatter(nexar__sched_t *s, int in_buf, uint64_t in_off,
                                const size_t *cnt, int *res_buf,
                                uint64_t *res_off) {
  int n = s->gsize, r = s->grank;
  uint64_t es = s->a.es;
  *res_buf = in_buf;
  *res_off = in_off;
  if (n == 1) return;
  uint64_t *dsp = malloc(((size_t)n + 1) * sizeof(*dsp));
  if (!dsp) {
    if (s->build_rc == 0) s->build_rc = NEXAR_ERR_NOMEM;
    return;
  }
  dsp[0] = 0;
  for (int b = 0; b < n; b++) dsp[b + 1] = dsp[b] + cnt[b];
  uint64_t t = nexar__sched_tmp(s, dsp[n] * es);
  int right = (r + 1) % n, left = (r - 1 + n) % n;
  for (int k = 0; k < n - 1; k++) {
    int sb = (r - k - 1 + n) % n, rb = (r - k - 2 + n) % n;
    if (k == 0)
      nexar__send_segs(s, in_buf, in_off + dsp[sb] * es, cnt[sb], right);
    else
      nexar__send_segs(s, NEXAR__BUF_TMP, t + dsp[sb] * es, cnt[sb], right);
    uint64_t at = dsp[rb] * es;
    nexar__recv_reduce_segs(s, left, cnt[rb], t + at, NEXAR__BUF_TMP, t + at,
                            in_buf, in_off + at);
  }
  *res_buf = NEXAR__BUF_TMP;
  *res_off = t + dsp[r] * es;
  free(dsp);
}

/* ---- Allgather(v) ---- */

/* Block b of the allgather result, in elements. */
static uint64_t ag_cnt(const nexar__sched_t *s, int b) {
  return s->a.coll == NEXAR__COLL_ALLGATHERV ? s->a.counts[b] : s->a.count;
}
static uint64_t ag_dsp(const nexar__sched_t *s, int b) {
  return s->a.coll == NEXAR__COLL_ALLGATHERV ? s->a.displs[b]
                                             : (uint64_t)b * s->a.count;
}

/*
 * Recursive doubling (Thakur, Rabenseifner & Gropp 2005), power-of-two
 * sizes: in round i rank r exchanges with r ^ 2^i the 2^i blocks its group
 * has gathered so far; after log2 n rounds everyone has everything.
 */
static void allgather_rd(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank;
  uint64_t bytes = s->a.count * s->a.es;
  for (int mask = 1; mask < n; mask <<= 1) {
    int peer = r ^ mask;
    uint64_t mine = (uint64_t)(r & ~(mask - 1)) * bytes;
    uint64_t theirs = (uint64_t)(peer & ~(mask - 1)) * bytes;
    nexar__sched_send(s, NEXAR__BUF_WORK, mine, (uint64_t)mask * bytes, peer);
    nexar__sched_recv(s, NEXAR__BUF_WORK, theirs, (uint64_t)mask * bytes, peer);
  }
}

/*
 * Ring (Barnett et al. 1994): in step k rank r forwards block r-k to r+1
 * and receives block r-k-1 from r-1, in segments, so a block's segments
 * pipeline around the ring.
 */
static void allgather_ring(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank;
  uint64_t es = s->a.es;
  int right = (r + 1) % n, left = (r - 1 + n) % n;
  for (int k = 0; k < n - 1; k++) {
    int sb = (r - k + n) % n, rb = (r - k - 1 + n) % n;
    nexar__send_segs(s, NEXAR__BUF_WORK, ag_dsp(s, sb) * es, ag_cnt(s, sb),
                     right);
    nexar__recv_segs(s, NEXAR__BUF_WORK, ag_dsp(s, rb) * es, ag_cnt(s, rb),
                     left);
  }
}

int nexar__build_allgather(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank;
  if (!s->a.in_place)
    nexar__sched_copy(s, NEXAR__BUF_WORK, ag_dsp(s, r) * s->a.es,
                      NEXAR__BUF_SEND, 0, ag_cnt(s, r) * s->a.es);
  if (s->a.coll == NEXAR__COLL_ALLGATHER && s->a.algo == NEXAR__ALGO_RD &&
      (n & (n - 1)) == 0)
    allgather_rd(s);
  else
    allgather_ring(s);
  return s->build_rc;
}

/* ---- Reduce-scatter ---- */

/* Ring reduce-scatter (Patarasuk & Yuan 2009), pipelined in segments;
 * rank r's block goes to the start of recvbuf and is finalized there. */
int nexar__build_reduce_scatter(nexar__sched_t *s) {
  int r = s->grank;
  uint64_t bytes = s->a.counts[r] * s->a.es;
  int in_buf = s->a.in_place ? NEXAR__BUF_WORK : NEXAR__BUF_SEND;
  int res_buf;
  uint64_t res_off;
  nexar__ring_reduce_scatter(s, in_buf, 0, s->a.counts, &res_buf, &res_off);
  nexar__sched_copy(s, NEXAR__BUF_WORK, 0, res_buf, res_off, bytes);
  nexar__sched_finalize(s, NEXAR__BUF_WORK, 0, bytes);
  return s->build_rc;
}

/* ---- Alltoall(v) ---- */

typedef struct {
  int buf;
  uint64_t off, len; /* bytes */
} a2a_blk_t;

/* What rank r sends to |j| (from the input) and receives from |j|. In
 * place, recvcounts/rdispls describe both directions. */
static a2a_blk_t a2a_send(const nexar__sched_t *s, int j) {
  const nexar__coll_args_t *a = &s->a;
  if (a->in_place) {
    if (a->coll == NEXAR__COLL_ALLTOALLV)
      return (a2a_blk_t){NEXAR__BUF_WORK, a->rdispls[j] * a->es,
                         a->rcounts[j] * a->es};
    return (a2a_blk_t){NEXAR__BUF_WORK, (uint64_t)j * a->count * a->es,
                       a->count * a->es};
  }
  if (a->coll == NEXAR__COLL_ALLTOALLV)
    return (a2a_blk_t){NEXAR__BUF_SEND, a->displs[j] * a->es,
                       a->counts[j] * a->es};
  return (a2a_blk_t){NEXAR__BUF_SEND, (uint64_t)j * a->count * a->es,
                     a->count * a->es};
}

static a2a_blk_t a2a_recv(const nexar__sched_t *s, int j) {
  const nexar__coll_args_t *a = &s->a;
  if (a->coll == NEXAR__COLL_ALLTOALLV)
    return (a2a_blk_t){NEXAR__BUF_WORK, a->rdispls[j] * a->es,
                       a->rcounts[j] * a->es};
  return (a2a_blk_t){NEXAR__BUF_WORK, (uint64_t)j * a->count * a->es,
                     a->count * a->es};
}

/*
 * Pairwise exchange (Thakur, Rabenseifner & Gropp 2005): in step k =
 * 1..n-1 rank r sends to r+k and receives from r-k; a fence after every
 * ALLTOALL_WINDOW steps bounds the messages in flight (every rank's window
 * w holds both ends of each of its transfers, so windows cannot deadlock).
 *
 * In place, block r-k received in step k must not overwrite recvbuf before
 * it has been sent in step n-k; it lands in scratch and is copied home
 * once both steps are built (step max(k, n-k)), so the copy waits for that
 * send while no receive ever does.
 */
int nexar__build_alltoall(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank;
  bool inp = s->a.in_place;
  a2a_blk_t own = a2a_recv(s, r);
  if (!inp) {
    a2a_blk_t src = a2a_send(s, r);
    /* The pair's counts must agree; never copy past either block. */
    uint64_t len = src.len < own.len ? src.len : own.len;
    nexar__sched_copy(s, own.buf, own.off, src.buf, src.off, len);
  }
  uint64_t *tmp = NULL; /* in place: scratch offset of step k's block */
  if (inp && n > 1) {
    tmp = malloc((size_t)n * sizeof(*tmp));
    if (!tmp) {
      if (s->build_rc == 0) s->build_rc = NEXAR_ERR_NOMEM;
      return s->build_rc;
    }
  }
  for (int k = 1; k < n; k++) {
    if (k > 1 && (k - 1) % ALLTOALL_WINDOW == 0) nexar__sched_fence(s);
    int dst = (r + k) % n, src = (r - k + n) % n;
    a2a_blk_t out = a2a_send(s, dst), in = a2a_recv(s, src);
    nexar__sched_send(s, out.buf, out.off, out.len, dst);
    if (!inp) {
      nexar__sched_recv(s, in.buf, in.off, in.len, src);
      continue;
    }
    tmp[k] = nexar__sched_tmp(s, in.len);
    nexar__sched_recv(s, NEXAR__BUF_TMP, tmp[k], in.len, src);
    /* Blocks whose send and receive are both built by now. */
    if (2 * k >= n)
      nexar__sched_copy(s, in.buf, in.off, NEXAR__BUF_TMP, tmp[k], in.len);
    if (2 * k > n) {
      a2a_blk_t early = a2a_recv(s, dst); /* received in step n-k */
      nexar__sched_copy(s, early.buf, early.off, NEXAR__BUF_TMP, tmp[n - k],
                        early.len);
    }
  }
  free(tmp);
  return s->build_rc;
}
