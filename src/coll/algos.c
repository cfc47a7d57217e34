/*
 * Collective algorithms as schedules. Every rank builds the same shape of
 * schedule, so message step ids agree on both ends of every transfer.
 */
#include "coll/sched.h"

#define ADD(...)                                                    \
  do {                                                              \
    nexar__step_t st_ = {__VA_ARGS__};                              \
    NEXAR__CHECK(nexar__sched_add(s, st_));                         \
  } while (0)

/* Dissemination barrier (Hensgen, Finkel & Manber 1988): in round k every
 * rank signals rank + 2^k and waits for rank - 2^k; ceil(log2 n) rounds. */
int nexar__build_barrier(nexar__sched_t *s) {
  int n = s->comm->size, r = s->comm->rank;
  uint32_t round = 0;
  for (int d = 1; d < n; d <<= 1, round++) {
    ADD(.kind = NEXAR__ST_SEND, .peer = (r + d) % n, .id = round,
        .round = round);
    ADD(.kind = NEXAR__ST_RECV, .peer = (r - d + n) % n, .id = round,
        .round = round);
  }
  return 0;
}

/* Binomial-tree broadcast (as in MPICH; Thakur, Rabenseifner & Gropp
 * 2005): receive once from the parent, then send to children farthest
 * first. */
int nexar__build_bcast(nexar__sched_t *s, int root, uint64_t bytes) {
  int n = s->comm->size, vr = (s->comm->rank - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      ADD(.kind = NEXAR__ST_RECV, .peer = (vr - mask + root) % n, .len = bytes,
          .round = 0);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < n)
      ADD(.kind = NEXAR__ST_SEND, .peer = (vr + mask + root) % n,
          .len = bytes, .round = 1);
  return 0;
}

/* Ring allreduce (Patarasuk & Yuan 2009): reduce-scatter then allgather
 * around the ring, n-1 rounds each. Chunks are cut on element boundaries
 * (the first count % n chunks get one more element), identically on every
 * rank. Each chunk is reduced along one path, so all ranks end bit-equal. */
int nexar__build_allreduce_ring(nexar__sched_t *s, uint64_t count,
                                size_t es) {
  int n = s->comm->size, r = s->comm->rank;
  uint64_t base = count / (uint64_t)n, extra = count % (uint64_t)n;
#define CH_CNT(c) (base + ((uint64_t)(c) < extra ? 1 : 0))
#define CH_OFF(c) \
  ((uint64_t)(c) * base + ((uint64_t)(c) < extra ? (uint64_t)(c) : extra))
  uint32_t round = 0;
  if (s->sendbuf)
    ADD(.kind = NEXAR__ST_COPY_IN, .off = 0, .len = count * es, .round = 0);
  int right = (r + 1) % n, left = (r - 1 + n) % n;
  for (int k = 0; k < n - 1; k++, round++) {
    int sc = (r - k + n) % n, rc = (r - k - 1 + n) % n;
    ADD(.kind = NEXAR__ST_SEND, .peer = right, .id = (uint32_t)k,
        .off = CH_OFF(sc) * es, .len = CH_CNT(sc) * es, .round = round + 1);
    ADD(.kind = NEXAR__ST_RECV, .peer = left, .id = (uint32_t)k,
        .buf = NEXAR__BUF_TMP, .off = 0, .len = CH_CNT(rc) * es,
        .round = round + 1);
    ADD(.kind = NEXAR__ST_REDUCE, .off = CH_OFF(rc) * es, .src_off = 0,
        .len = CH_CNT(rc), .round = round + 1);
  }
  int own = (r + 1) % n;
  ADD(.kind = NEXAR__ST_FINALIZE, .off = CH_OFF(own) * es, .len = CH_CNT(own),
      .round = round);
  for (int k = 0; k < n - 1; k++, round++) {
    int sc = (r + 1 - k + n) % n, rc = (r - k + n) % n;
    ADD(.kind = NEXAR__ST_SEND, .peer = right, .id = (uint32_t)(n - 1 + k),
        .off = CH_OFF(sc) * es, .len = CH_CNT(sc) * es, .round = round + 1);
    ADD(.kind = NEXAR__ST_RECV, .peer = left, .id = (uint32_t)(n - 1 + k),
        .off = CH_OFF(rc) * es, .len = CH_CNT(rc) * es, .round = round + 1);
  }
  return 0;
#undef CH_CNT
#undef CH_OFF
}
