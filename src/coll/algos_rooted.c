/*
 * Rooted collectives as schedules: bcast, reduce, gather(v), scatter(v).
 *
 * Tree algorithms work on virtual ranks vr = (rank - root + n) % n, so the
 * root is virtual rank 0; a virtual rank v is comm rank (v + root) % n.
 * In a binomial tree over n ranks, virtual rank v > 0 has parent v - lowbit(v)
 * and owns the subtree [v, v + min(lowbit(v), n - v)); the root owns [0, n).
 */
#include <stdlib.h>

#include "coll/algos.h"

/* Comm rank of virtual rank |v|. */
static int real_rank(const nexar__sched_t *s, int v) {
  return (v + s->a.root) % s->gsize;
}

static int virt_rank(const nexar__sched_t *s) {
  int n = s->gsize;
  return (s->grank - s->a.root + n) % n;
}

static int lowbit(int v) {
  return v & -v;
}

static int min_int(int a, int b) {
  return a < b ? a : b;
}

/* Smallest power of two >= n. */
static int pof2_ceil(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

static void latch_nomem(nexar__sched_t *s) {
  if (s->build_rc == 0) s->build_rc = NEXAR_ERR_NOMEM;
}

/* ---- Bcast ---- */

/* Binomial-tree broadcast as in MPICH (Thakur, Rabenseifner & Gropp 2005):
 * receive the whole buffer from the parent, then send it to the children,
 * largest subtree first. */
static void bcast_binomial(nexar__sched_t *s) {
  int n = s->gsize, vr = virt_rank(s);
  uint64_t bytes = s->a.count * s->a.es;
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      nexar__sched_recv(s, NEXAR__BUF_WORK, 0, bytes, real_rank(s, vr - mask));
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n)
      nexar__sched_send(s, NEXAR__BUF_WORK, 0, bytes, real_rank(s, vr + mask));
}

/*
 * Scatter + ring allgather broadcast (van de Geijn et al. 1997; Barnett et
 * al. 1994), as MPICH's scatter_ring_allgather: the buffer is cut into n
 * blocks on element boundaries, block v belonging to virtual rank v. A
 * binomial scatter gives every virtual rank its subtree's blocks (a
 * contiguous range, since blocks are in virtual-rank order); a ring
 * allgather over virtual ranks, pipelined in segments, then circulates every
 * block. Ring receives into blocks a rank already got from the scatter wait
 * only for the scatter sends to its children, whose receives depend on
 * nothing, so they cannot deadlock.
 */
static void bcast_scatter_ag(nexar__sched_t *s) {
  int n = s->gsize, vr = virt_rank(s);
  uint64_t count = s->a.count, es = s->a.es;
#define BOFF(v) (nexar__blk_off(count, n, (v)) * es)
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      int hi = min_int(vr + mask, n);
      nexar__sched_recv(s, NEXAR__BUF_WORK, BOFF(vr), BOFF(hi) - BOFF(vr),
                        real_rank(s, vr - mask));
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    int lo = vr + mask;
    if (lo >= n) continue;
    int hi = min_int(lo + mask, n);
    nexar__sched_send(s, NEXAR__BUF_WORK, BOFF(lo), BOFF(hi) - BOFF(lo),
                      real_rank(s, lo));
  }
  int right = real_rank(s, (vr + 1) % n), left = real_rank(s, (vr - 1 + n) % n);
  for (int k = 0; k < n - 1; k++) {
    int sb = (vr - k + n) % n, rb = (vr - k - 1 + n) % n;
    nexar__send_segs(s, NEXAR__BUF_WORK, BOFF(sb), nexar__blk_cnt(count, n, sb),
                     right);
    nexar__recv_segs(s, NEXAR__BUF_WORK, BOFF(rb), nexar__blk_cnt(count, n, rb),
                     left);
  }
#undef BOFF
}

int nexar__build_bcast(nexar__sched_t *s) {
  if (s->gsize == 1) return s->build_rc;
  if (s->a.algo == NEXAR__ALGO_SCATTER_AG)
    bcast_scatter_ag(s);
  else
    bcast_binomial(s);
  return s->build_rc;
}

/* ---- Reduce ---- */

/*
 * Binomial-tree reduce as in MPICH (Thakur, Rabenseifner & Gropp 2005), for
 * commutative ops: in round i a virtual rank with bit i clear receives its
 * child vr + 2^i's partial result and combines it into its accumulator;
 * one with bit i set sends its accumulator to vr - 2^i and stops. The first
 * child's data is received straight into the accumulator (the root's
 * recvbuf, scratch elsewhere, since recvbuf is ignored off the root) and the
 * own input combined into it; later children get their own scratch so all
 * receives are posted at once. Leaves send their input as is.
 */
static void reduce_binomial(nexar__sched_t *s) {
  int n = s->gsize, vr = virt_rank(s);
  uint64_t bytes = s->a.count * s->a.es;
  int in_buf = s->a.in_place ? NEXAR__BUF_WORK : NEXAR__BUF_SEND;
  int acc_buf = in_buf; /* the input until a child arrives */
  uint64_t acc_off = 0;
  bool own_acc = false;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      nexar__sched_send(s, acc_buf, acc_off, bytes, real_rank(s, vr - mask));
      break;
    }
    int child = vr | mask;
    if (child >= n) continue;
    int from = real_rank(s, child);
    if (!own_acc && !(vr == 0 && s->a.in_place)) {
      int buf = vr == 0 ? NEXAR__BUF_WORK : NEXAR__BUF_TMP;
      uint64_t off = vr == 0 ? 0 : nexar__sched_tmp(s, bytes);
      nexar__sched_recv(s, buf, off, bytes, from);
      nexar__sched_reduce(s, buf, off, in_buf, 0, bytes);
      acc_buf = buf;
      acc_off = off;
    } else {
      uint64_t t = nexar__sched_tmp(s, bytes);
      nexar__sched_recv(s, NEXAR__BUF_TMP, t, bytes, from);
      nexar__sched_reduce(s, acc_buf, acc_off, NEXAR__BUF_TMP, t, bytes);
    }
    own_acc = true;
  }
  if (vr == 0) {
    nexar__sched_copy(s, NEXAR__BUF_WORK, 0, acc_buf, acc_off, bytes);
    nexar__sched_finalize(s, NEXAR__BUF_WORK, 0, bytes);
  }
}

/*
 * Reduce-scatter + gather (Rabenseifner 2004; Thakur, Rabenseifner & Gropp
 * 2005) for large vectors: a pipelined ring reduce-scatter leaves block r of
 * n (cut on element boundaries) fully combined on rank r, which sends it to
 * the root; the root finalizes each block as it lands.
 */
static void reduce_rs_gather(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank, root = s->a.root;
  uint64_t count = s->a.count, es = s->a.es;
  size_t *cnt = calloc((size_t)n, sizeof(*cnt));
  if (!cnt) {
    latch_nomem(s);
    return;
  }
  for (int b = 0; b < n; b++) cnt[b] = (size_t)nexar__blk_cnt(count, n, b);
  int in_buf = s->a.in_place ? NEXAR__BUF_WORK : NEXAR__BUF_SEND;
  int res_buf;
  uint64_t res_off;
  nexar__ring_reduce_scatter(s, in_buf, 0, cnt, &res_buf, &res_off);
  if (r != root) {
    nexar__sched_send(s, res_buf, res_off, cnt[r] * es, root);
  } else {
    /* In place, the receive from root - 1 waits for the ring's first send,
     * which reads that block of the input; the matching receive depends on
     * nothing, so this cannot deadlock. */
    for (int b = 0; b < n; b++) {
      uint64_t off = nexar__blk_off(count, n, b) * es;
      if (b == root)
        nexar__sched_copy(s, NEXAR__BUF_WORK, off, res_buf, res_off,
                          cnt[b] * es);
      else
        nexar__sched_recv(s, NEXAR__BUF_WORK, off, cnt[b] * es, b);
      nexar__sched_finalize(s, NEXAR__BUF_WORK, off, cnt[b] * es);
    }
  }
  free(cnt);
}

int nexar__build_reduce(nexar__sched_t *s) {
  if (s->a.algo == NEXAR__ALGO_RS_GATHER)
    reduce_rs_gather(s);
  else
    reduce_binomial(s);
  return s->build_rc;
}

/* ---- Gather ---- */

/* Direct gather(v): every rank sends its block to the root, which posts
 * all receives at once. */
static void gather_direct(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank, root = s->a.root;
  uint64_t es = s->a.es;
  bool v = s->a.coll == NEXAR__COLL_GATHERV;
  if (r != root) {
    nexar__sched_send(s, NEXAR__BUF_SEND, 0, s->a.count * es, root);
    return;
  }
  for (int i = 0; i < n; i++) {
    uint64_t cnt = v ? s->a.counts[i] : s->a.count;
    uint64_t off = (v ? s->a.displs[i] : (uint64_t)i * s->a.count) * es;
    if (i != root)
      nexar__sched_recv(s, NEXAR__BUF_WORK, off, cnt * es, i);
    else if (!s->a.in_place)
      nexar__sched_copy(s, NEXAR__BUF_WORK, off, NEXAR__BUF_SEND, 0, cnt * es);
  }
}

/*
 * Binomial-tree gather as in MPICH (Barnett et al. 1994): a virtual rank
 * collects its subtree's blocks in virtual-rank order, receiving child
 * vr + 2^i's subtree in round i, then sends them to its parent in one
 * message. The root stores each child's range straight into recvbuf unless
 * it wraps past the last comm rank, in which case it lands in scratch and
 * is copied in two pieces.
 */
static void gather_binomial(nexar__sched_t *s) {
  int n = s->gsize, vr = virt_rank(s), root = s->a.root;
  uint64_t bytes = s->a.count * s->a.es;
  if (vr == 0) {
    if (!s->a.in_place)
      nexar__sched_copy(s, NEXAR__BUF_WORK, (uint64_t)root * bytes,
                        NEXAR__BUF_SEND, 0, bytes);
    for (int mask = 1; mask < n; mask <<= 1) {
      int first = (mask + root) % n, len = min_int(mask, n - mask);
      if (first + len <= n) {
        nexar__sched_recv(s, NEXAR__BUF_WORK, (uint64_t)first * bytes,
                          (uint64_t)len * bytes, first);
        continue;
      }
      uint64_t t = nexar__sched_tmp(s, (uint64_t)len * bytes);
      uint64_t head = (uint64_t)(n - first) * bytes;
      nexar__sched_recv(s, NEXAR__BUF_TMP, t, (uint64_t)len * bytes, first);
      nexar__sched_copy(s, NEXAR__BUF_WORK, (uint64_t)first * bytes,
                        NEXAR__BUF_TMP, t, head);
      nexar__sched_copy(s, NEXAR__BUF_WORK, 0, NEXAR__BUF_TMP, t + head,
                        (uint64_t)len * bytes - head);
    }
    return;
  }
  int lb = lowbit(vr), sub = min_int(lb, n - vr);
  int parent = real_rank(s, vr - lb);
  int in_buf = s->a.in_place ? NEXAR__BUF_WORK : NEXAR__BUF_SEND;
  uint64_t in_off = s->a.in_place ? (uint64_t)s->grank * bytes : 0;
  if (sub == 1) {
    nexar__sched_send(s, in_buf, in_off, bytes, parent);
    return;
  }
  uint64_t t = nexar__sched_tmp(s, (uint64_t)sub * bytes);
  nexar__sched_copy(s, NEXAR__BUF_TMP, t, in_buf, in_off, bytes);
  for (int mask = 1; mask < lb; mask <<= 1) {
    int child = vr + mask;
    if (child >= n) break;
    int len = min_int(mask, n - child);
    nexar__sched_recv(s, NEXAR__BUF_TMP, t + (uint64_t)mask * bytes,
                      (uint64_t)len * bytes, real_rank(s, child));
  }
  nexar__sched_send(s, NEXAR__BUF_TMP, t, (uint64_t)sub * bytes, parent);
}

int nexar__build_gather(nexar__sched_t *s) {
  if (s->a.coll == NEXAR__COLL_GATHERV || s->a.algo == NEXAR__ALGO_DIRECT)
    gather_direct(s);
  else
    gather_binomial(s);
  return s->build_rc;
}

/* ---- Scatter ---- */

/* Direct scatter(v): the root sends every block in its own message. In
 * place at the root, recvbuf is absent and the root's block stays put. */
static void scatter_direct(nexar__sched_t *s) {
  int n = s->gsize, r = s->grank, root = s->a.root;
  uint64_t es = s->a.es;
  bool v = s->a.coll == NEXAR__COLL_SCATTERV;
  if (r != root) {
    nexar__sched_recv(s, NEXAR__BUF_WORK, 0, s->a.count * es, root);
    return;
  }
  for (int i = 0; i < n; i++) {
    uint64_t cnt = v ? s->a.counts[i] : s->a.count;
    uint64_t off = (v ? s->a.displs[i] : (uint64_t)i * s->a.count) * es;
    if (i != root)
      nexar__sched_send(s, NEXAR__BUF_SEND, off, cnt * es, i);
    else if (!s->a.in_place)
      nexar__sched_copy(s, NEXAR__BUF_WORK, 0, NEXAR__BUF_SEND, off, cnt * es);
  }
}

/*
 * Binomial-tree scatter as in MPICH (Barnett et al. 1994): a virtual rank
 * receives its subtree's blocks (in virtual-rank order) from its parent in
 * one message, keeps its own and forwards each child's range, largest
 * first. The root sends straight from sendbuf unless a child's range wraps
 * past the last comm rank; that one is assembled in scratch first.
 */
static void scatter_binomial(nexar__sched_t *s) {
  int n = s->gsize, vr = virt_rank(s), root = s->a.root;
  uint64_t bytes = s->a.count * s->a.es;
  if (vr == 0) {
    if (!s->a.in_place)
      nexar__sched_copy(s, NEXAR__BUF_WORK, 0, NEXAR__BUF_SEND,
                        (uint64_t)root * bytes, bytes);
    for (int mask = pof2_ceil(n) / 2; mask > 0; mask >>= 1) {
      int first = (mask + root) % n, len = min_int(mask, n - mask);
      if (first + len <= n) {
        nexar__sched_send(s, NEXAR__BUF_SEND, (uint64_t)first * bytes,
                          (uint64_t)len * bytes, first);
        continue;
      }
      uint64_t t = nexar__sched_tmp(s, (uint64_t)len * bytes);
      uint64_t head = (uint64_t)(n - first) * bytes;
      nexar__sched_copy(s, NEXAR__BUF_TMP, t, NEXAR__BUF_SEND,
                        (uint64_t)first * bytes, head);
      nexar__sched_copy(s, NEXAR__BUF_TMP, t + head, NEXAR__BUF_SEND, 0,
                        (uint64_t)len * bytes - head);
      nexar__sched_send(s, NEXAR__BUF_TMP, t, (uint64_t)len * bytes, first);
    }
    return;
  }
  int lb = lowbit(vr), sub = min_int(lb, n - vr);
  int parent = real_rank(s, vr - lb);
  if (sub == 1) {
    nexar__sched_recv(s, NEXAR__BUF_WORK, 0, bytes, parent);
    return;
  }
  uint64_t t = nexar__sched_tmp(s, (uint64_t)sub * bytes);
  nexar__sched_recv(s, NEXAR__BUF_TMP, t, (uint64_t)sub * bytes, parent);
  nexar__sched_copy(s, NEXAR__BUF_WORK, 0, NEXAR__BUF_TMP, t, bytes);
  for (int mask = lb / 2; mask > 0; mask >>= 1) {
    int child = vr + mask;
    if (child >= n) continue;
    int len = min_int(mask, n - child);
    nexar__sched_send(s, NEXAR__BUF_TMP, t + (uint64_t)mask * bytes,
                      (uint64_t)len * bytes, real_rank(s, child));
  }
}

int nexar__build_scatter(nexar__sched_t *s) {
  if (s->a.coll == NEXAR__COLL_SCATTERV || s->a.algo == NEXAR__ALGO_DIRECT)
    scatter_direct(s);
  else
    scatter_binomial(s);
  return s->build_rc;
}
