/*
 * Allreduce schedules: ring (pipelined), recursive doubling and
 * Rabenseifner. The result ends in WORK on every rank. Out of place, the
 * ring and a power-of-two Rabenseifner read the input from SEND where
 * they first send or combine it (no copy of the whole vector into WORK
 * first); recursive doubling and the others copy it in first.
 */
#include "coll/algos.h"

#define W NEXAR__BUF_WORK
#define T NEXAR__BUF_TMP

/* Ring allreduce (Patarasuk & Yuan 2009): n-1 rounds of reduce-scatter,
 * then n-1 rounds of allgather, each chunk cut into segments. The
 * dependencies the ranges imply let segment k of round i+1 leave while
 * segment k+1 of round i is still arriving. Chunk c is reduced along one
 * path (c+1, c+2, ..., c), so every rank ends with the same bits. */
static void ring(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank;
  uint64_t es = s->a.es, count = s->a.count;
#define CB(c) (nexar__blk_cnt(count, n, (c)) * es)
#define CO(c) (nexar__blk_off(count, n, (c)) * es)
  uint64_t tmp = nexar__sched_tmp(s, CB(0));
  /* Out of place, the input stays in SEND: the own chunk leaves from
   * there, and each chunk that comes in is combined with SEND's into W,
   * which holds nothing of the input before. */
  int in = s->a.in_place ? W : NEXAR__BUF_SEND;
  int right = (r + 1) % n, left = (r - 1 + n) % n;
  for (int k = 0; k < n - 1; k++) {
    int sc = (r - k + n) % n, rc = (r - k - 1 + n) % n;
    nexar__send_segs(s, k == 0 ? in : W, CO(sc), CB(sc) / es, right);
    if (in == W)
      nexar__recv_reduce_segs(s, left, CB(rc) / es, tmp, W, CO(rc), T, tmp);
    else
      nexar__recv_reduce_own_segs(s, left, CB(rc) / es, tmp, W, CO(rc), in,
                                  CO(rc));
  }
  int own = (r + 1) % n;
  nexar__sched_finalize(s, W, CO(own), CB(own));
  for (int k = 0; k < n - 1; k++) {
    int sc = (r + 1 - k + n) % n, rc = (r - k + n) % n;
    nexar__send_segs(s, W, CO(sc), CB(sc) / es, right);
    nexar__recv_segs(s, W, CO(rc), CB(rc) / es, left);
  }
#undef CB
#undef CO
}

/* Non-powers of two (Rabenseifner & Traeff 2004, as in MPICH): of the
 * first 2*rem ranks, each even one hands its vector to the odd one above
 * and sits out; the remaining pof2 ranks get new ranks 0..pof2-1. */
typedef struct {
  int pof2, rem, newrank; /* newrank -1: sits out */
} fold_t;

static fold_t fold_in(nexar__sched_t *s, uint64_t bytes, uint64_t tmp) {
  int n = s->gsize, r = s->grank;
  fold_t f = {nexar__pof2_floor(n), 0, 0};
  f.rem = n - f.pof2;
  if (r < 2 * f.rem) {
    if (r % 2 == 0) {
      nexar__sched_send(s, W, 0, bytes, r + 1);
      f.newrank = -1;
    } else {
      nexar__sched_recv(s, T, tmp, bytes, r - 1);
      nexar__sched_reduce(s, W, 0, T, tmp, bytes);
      f.newrank = r / 2;
    }
  } else {
    f.newrank = r - f.rem;
  }
  return f;
}

static int fold_real(const fold_t *f, int newrank) {
  return newrank < f->rem ? newrank * 2 + 1 : newrank + f->rem;
}

static void fold_out(nexar__sched_t *s, const fold_t *f, uint64_t bytes) {
  int r = s->grank;
  if (r >= 2 * f->rem) return;
  if (r % 2 == 0)
    nexar__sched_recv(s, W, 0, bytes, r + 1);
  else
    nexar__sched_send(s, W, 0, bytes, r - 1);
}

/* Combines the partner's data (in TMP) into WORK with the lower rank's
 * operand on the left on both sides, so that both compute the same bits
 * even where an op is not bitwise commutative (MIN/MAX of -0.0 and +0.0). */
static void combine(nexar__sched_t *s, uint64_t off, uint64_t tmp, uint64_t len,
                    bool partner_lower) {
  if (!partner_lower) {
    nexar__sched_reduce(s, W, off, T, tmp, len);
    return;
  }
  nexar__sched_reduce(s, T, tmp, W, off, len);
  nexar__sched_copy(s, W, off, T, tmp, len);
}

/* Recursive doubling (Thakur, Rabenseifner & Gropp 2005): log2(pof2)
 * rounds, each exchanging the whole vector with rank ^ 2^k. */
static void rd(nexar__sched_t *s) {
  uint64_t bytes = s->a.count * s->a.es;
  uint64_t tmp = nexar__sched_tmp(s, bytes);
  fold_t f = fold_in(s, bytes, tmp);
  if (f.newrank >= 0) {
    for (int mask = 1; mask < f.pof2; mask <<= 1) {
      int dst = fold_real(&f, f.newrank ^ mask);
      nexar__sched_send(s, W, 0, bytes, dst);
      nexar__sched_recv(s, T, tmp, bytes, dst);
      combine(s, 0, tmp, bytes, dst < s->grank);
    }
    nexar__sched_finalize(s, W, 0, bytes);
  }
  fold_out(s, &f, bytes);
}

/* Rabenseifner (2004): reduce-scatter by recursive halving, then allgather
 * by recursive doubling, over pof2 blocks cut on element boundaries. After
 * the halving, new rank i holds the reduced block i. */
static void rabenseifner(nexar__sched_t *s) {
  uint64_t es = s->a.es, count = s->a.count, bytes = count * es;
  uint64_t tmp = nexar__sched_tmp(s, bytes);
  fold_t f = fold_in(s, bytes, tmp);
  if (f.newrank >= 0) {
    int p = f.pof2, me = f.newrank;
#define BO(i) (nexar__blk_off(count, p, (i)) * es) /* block i's offset */
    int lo = 0, hi = p; /* blocks this rank still reduces */
    /* Out of place with no ranks folded in, the first round reads the
     * input from SEND (build_allreduce copied nothing into W). */
    int in = s->a.in_place || f.rem ? W : NEXAR__BUF_SEND;
    for (int d = p / 2; d >= 1; d /= 2) {
      int dst = fold_real(&f, me ^ d), mid = lo + (hi - lo) / 2;
      bool upper = (me & d) != 0;
      int klo = upper ? mid : lo, khi = upper ? hi : mid; /* kept */
      int slo = upper ? lo : mid, shi = upper ? mid : hi; /* sent */
      int from = d == p / 2 ? in : W;
      nexar__sched_send(s, from, BO(slo), BO(shi) - BO(slo), dst);
      /* The kept half is not the half being sent: fold it in as it lands,
       * the lower rank's operand on the left. */
      nexar__sched_recv_fold_own(s, W, BO(klo), from, BO(klo),
                                 BO(khi) - BO(klo), dst, dst < s->grank);
      lo = klo;
      hi = khi;
    }
    nexar__sched_finalize(s, W, BO(lo), BO(hi) - BO(lo));
    for (int d = 1; d < p; d *= 2) {
      int dst = fold_real(&f, me ^ d), size = hi - lo;
      int plo = (me & d) ? lo - size : hi; /* the partner's blocks */
      nexar__sched_send(s, W, BO(lo), BO(hi) - BO(lo), dst);
      nexar__sched_recv(s, W, BO(plo), BO(plo + size) - BO(plo), dst);
      if (plo < lo)
        lo = plo;
      else
        hi = plo + size;
    }
#undef BO
  }
  fold_out(s, &f, bytes);
}

/* Direct (one round): every rank sends its whole vector to every other
 * rank and combines all n in rank order, v0 op v1 op ... op v(n-1), so
 * every rank computes the same bits. One synchronisation instead of
 * log2(n): for small vectors when ranks outnumber CPUs, where each round
 * costs every rank a turn on a CPU. */
static void direct(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank;
  uint64_t bytes = s->a.count * s->a.es;
  uint64_t tmp = nexar__sched_tmp(s, bytes * (uint64_t)n);
#define SLOT(p) (tmp + (uint64_t)(p)*bytes)
  for (int k = 1; k < n; k++) nexar__sched_send(s, W, 0, bytes, (r + k) % n);
  for (int k = 1; k < n; k++) {
    int p = (r - k + n) % n;
    nexar__sched_recv(s, T, SLOT(p), bytes, p);
  }
  if (r == 0) {
    for (int p = 1; p < n; p++) nexar__sched_reduce(s, W, 0, T, SLOT(p), bytes);
  } else {
    for (int p = 1; p < n; p++)
      nexar__sched_reduce(s, T, SLOT(0), p == r ? W : T, p == r ? 0 : SLOT(p),
                          bytes);
    nexar__sched_copy(s, W, 0, T, SLOT(0), bytes);
  }
#undef SLOT
  nexar__sched_finalize(s, W, 0, bytes);
}

int nexar__build_allreduce(nexar__sched_t *s) {
  uint64_t bytes = s->a.count * s->a.es;
  if (s->gsize == 1) {
    if (!s->a.in_place) nexar__sched_copy(s, W, 0, NEXAR__BUF_SEND, 0, bytes);
    nexar__sched_finalize(s, W, 0, bytes);
    return s->build_rc;
  }
  if (s->a.algo == NEXAR__ALGO_RING) {
    ring(s);
    return s->build_rc;
  }
  bool pof2 = (s->gsize & (s->gsize - 1)) == 0;
  bool reads_send = s->a.algo == NEXAR__ALGO_RABENSEIFNER && pof2;
  if (!s->a.in_place && !reads_send)
    nexar__sched_copy(s, W, 0, NEXAR__BUF_SEND, 0, bytes);
  if (s->a.algo == NEXAR__ALGO_RD)
    rd(s);
  else if (s->a.algo == NEXAR__ALGO_DIRECT)
    direct(s);
  else
    rabenseifner(s);
  return s->build_rc;
}
