/*
 * Every collective algorithm other than allreduce, against a serial
 * reference, bit-exact with int64 data, over real multi-process clusters
 * at world sizes 1, 2, 3, 4, 5, 7 and 8: bcast, reduce, gather(v),
 * scatter(v), allgather(v), reduce_scatter(_block), alltoall(v), scan,
 * exscan and barrier, from every root, at counts 0, 1, n-1, n, n+1, 97 and
 * 3000 (several NEXAR_SEG_BYTES segments), in place and out of place. Two
 * parameter sets force the two algorithm families: binomial trees and
 * recursive doubling; then scatter + allgather bcast, reduce-scatter +
 * gather reduce, direct gather/scatter and ring allgather, the latter with
 * a 1 KiB eager window so that most messages wait for their receive. Gaps in
 * the v-forms' layouts and buffers a call must not write are checked too.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

#define DT NEXAR_INT64
/* NEXAR_IN_PLACE as scatter's (non-const) receive buffer. */
#define SCATTER_IN_PLACE ((void *)(uintptr_t)NEXAR_IN_PLACE)
#define POISON ((int64_t)0x5a5a5a5a5a5a5a5aLL)

typedef struct cfg {
  const char *name, *env;
} cfg_t;

static const cfg_t cfgs[] = {
    {"binomial/rd",
     "NEXAR_ALGO_BCAST=binomial\nNEXAR_REDUCE_LARGE_BYTES=1073741824\n"
     "NEXAR_GATHER_DIRECT_MIN_BYTES=1073741824\n"
     "NEXAR_ALLGATHER_RD_MAX_BYTES=1073741824\nNEXAR_SEG_BYTES=4096"},
    {"scatter_ag/rs_gather/direct/ring",
     "NEXAR_ALGO_BCAST=scatter_allgather\nNEXAR_REDUCE_LARGE_BYTES=0\n"
     "NEXAR_GATHER_DIRECT_MIN_BYTES=0\nNEXAR_ALLGATHER_RD_MAX_BYTES=0\n"
     "NEXAR_SEG_BYTES=4096\nNEXAR_EAGER_BYTES=1024"},
};

/* Element i of rank k's contribution, distinct across ranks and indices;
 * |salt| varies it per call. Small enough that sums never overflow. */
static int64_t val(int k, size_t i, int salt) {
  return (int64_t)(((size_t)k * 7919 + i * 31 + (size_t)salt * 17) % 100003) -
         50000;
}

static int64_t combine(nexar_op_t op, int64_t a, int64_t b) {
  if (op == NEXAR_MAX) return a > b ? a : b;
  return a + b; /* SUM and AVG */
}

/* Reduction over ranks [0, upto) of element i, finalized for |op| with
 * divisor |div|. */
static int64_t reduced(nexar_op_t op, int upto, size_t i, int salt, int div) {
  int64_t acc = val(0, i, salt);
  for (int k = 1; k < upto; k++) acc = combine(op, acc, val(k, i, salt));
  return op == NEXAR_AVG ? acc / div : acc;
}

static int64_t *alloc(size_t n) {
  int64_t *p = malloc((n + 1) * sizeof(*p));
  if (p)
    for (size_t i = 0; i <= n; i++) p[i] = POISON;
  return p;
}

/* Per-rank counts for v-forms (some zero) and displacements with a gap of
 * two elements before each block; returns the total extent. */
static size_t vlayout(int n, size_t c, size_t *cnt, size_t *dsp) {
  size_t at = 0;
  for (int k = 0; k < n; k++) {
    cnt[k] = (k + (int)(c % 3)) % 3 == 0 ? 0 : c + (size_t)k;
    dsp[k] = at + 2;
    at = dsp[k] + cnt[k];
  }
  return at;
}

/* The failure context printed with every mismatch. */
#define CTX "%s count %zu root %d %s: element %zu is %lld, want %lld"
#define EXPECT(cond, what, i, got, want)                                \
  NT_CHECKF(cond, CTX, what, c, root, ip ? "in place" : "out of place", \
            (size_t)(i), (long long)(got), (long long)(want))

static int t_bcast(nexar_comm_t *w, int r, int n, size_t c, int root) {
  int ip = 0;
  int64_t *b = alloc(c);
  NT_CHECK(b);
  for (size_t i = 0; i < c; i++) b[i] = r == root ? val(root, i, 1) : -1;
  NT_OKC(w, nexar_bcast(w, b, c, DT, root));
  for (size_t i = 0; i < c; i++)
    EXPECT(b[i] == val(root, i, 1), "bcast", i, b[i], val(root, i, 1));
  EXPECT(b[c] == POISON, "bcast guard", c, b[c], POISON);
  (void)n;
  free(b);
  return 0;
}

static int t_reduce(nexar_comm_t *w, int r, int n, size_t c, int root, int ip,
                    nexar_op_t op) {
  int64_t *snd = alloc(c), *rcv = alloc(c);
  NT_CHECK(snd && rcv);
  bool inp = ip && r == root;
  for (size_t i = 0; i < c; i++) (inp ? rcv : snd)[i] = val(r, i, 2);
  NT_OKC(w, nexar_reduce(w, inp ? NEXAR_IN_PLACE : snd, r == root ? rcv : NULL,
                         c, DT, op, root));
  if (r == root)
    for (size_t i = 0; i <= c; i++) {
      int64_t want = i < c ? reduced(op, n, i, 2, n) : POISON;
      EXPECT(rcv[i] == want, "reduce", i, rcv[i], want);
    }
  if (!inp)
    for (size_t i = 0; i < c; i++)
      EXPECT(snd[i] == val(r, i, 2), "reduce sendbuf", i, snd[i], val(r, i, 2));
  free(snd);
  free(rcv);
  return 0;
}

static int t_gather(nexar_comm_t *w, int r, int n, size_t c, int root, int ip) {
  size_t tot = c * (size_t)n;
  int64_t *snd = alloc(c), *rcv = alloc(tot);
  NT_CHECK(snd && rcv);
  bool inp = ip && r == root;
  for (size_t i = 0; i < c; i++) {
    snd[i] = val(r, i, 3);
    if (inp) rcv[(size_t)r * c + i] = val(r, i, 3);
  }
  NT_OKC(w, nexar_gather(w, inp ? NEXAR_IN_PLACE : snd, r == root ? rcv : NULL,
                         c, DT, root));
  if (r == root)
    for (size_t i = 0; i <= tot; i++) {
      int64_t want = i < tot ? val((int)(i / c), i % c, 3) : POISON;
      EXPECT(rcv[i] == want, "gather", i, rcv[i], want);
    }
  free(snd);
  free(rcv);
  return 0;
}

static int t_gatherv(nexar_comm_t *w, int r, int n, size_t c, int root,
                     int ip) {
  size_t cnt[8], dsp[8], ext = vlayout(n, c, cnt, dsp);
  int64_t *snd = alloc(cnt[r]), *rcv = alloc(ext);
  NT_CHECK(snd && rcv);
  bool inp = ip && r == root;
  for (size_t i = 0; i < cnt[r]; i++) {
    snd[i] = val(r, i, 4);
    if (inp) rcv[dsp[r] + i] = val(r, i, 4);
  }
  NT_OKC(w, nexar_gatherv(w, inp ? NEXAR_IN_PLACE : snd, cnt[r],
                          r == root ? rcv : NULL, r == root ? cnt : NULL,
                          r == root ? dsp : NULL, DT, root));
  if (r == root)
    for (int k = 0, at = 0; k < n; k++) {
      for (; (size_t)at < dsp[k]; at++)
        EXPECT(rcv[at] == POISON, "gatherv gap", at, rcv[at], POISON);
      for (size_t i = 0; i < cnt[k]; i++, at++)
        EXPECT(rcv[at] == val(k, i, 4), "gatherv", at, rcv[at], val(k, i, 4));
    }
  free(snd);
  free(rcv);
  return 0;
}

static int t_scatter(nexar_comm_t *w, int r, int n, size_t c, int root,
                     int ip) {
  size_t tot = c * (size_t)n;
  int64_t *snd = alloc(tot), *rcv = alloc(c);
  NT_CHECK(snd && rcv);
  bool inp = ip && r == root;
  for (size_t i = 0; i < tot; i++) snd[i] = val((int)(i / c), i % c, 5);
  NT_OKC(w, nexar_scatter(w, r == root ? snd : NULL,
                          inp ? SCATTER_IN_PLACE : rcv, c, DT, root));
  for (size_t i = 0; i <= c; i++) {
    int64_t want = i < c && !inp ? val(r, i, 5) : POISON;
    EXPECT(rcv[i] == want, "scatter", i, rcv[i], want);
  }
  for (size_t i = 0; i < tot; i++)
    EXPECT(snd[i] == val((int)(i / c), i % c, 5), "scatter sendbuf", i, snd[i],
           val((int)(i / c), i % c, 5));
  free(snd);
  free(rcv);
  return 0;
}

static int t_scatterv(nexar_comm_t *w, int r, int n, size_t c, int root,
                      int ip) {
  size_t cnt[8], dsp[8], ext = vlayout(n, c, cnt, dsp);
  int64_t *snd = alloc(ext), *rcv = alloc(cnt[r]);
  NT_CHECK(snd && rcv);
  bool inp = ip && r == root;
  for (int k = 0; k < n; k++)
    for (size_t i = 0; i < cnt[k]; i++) snd[dsp[k] + i] = val(k, i, 6);
  NT_OKC(w, nexar_scatterv(w, r == root ? snd : NULL, r == root ? cnt : NULL,
                           r == root ? dsp : NULL, inp ? SCATTER_IN_PLACE : rcv,
                           cnt[r], DT, root));
  for (size_t i = 0; i <= cnt[r]; i++) {
    int64_t want = i < cnt[r] && !inp ? val(r, i, 6) : POISON;
    EXPECT(rcv[i] == want, "scatterv", i, rcv[i], want);
  }
  free(snd);
  free(rcv);
  return 0;
}

static int t_allgather(nexar_comm_t *w, int r, int n, size_t c, int ip) {
  int root = -1;
  size_t tot = c * (size_t)n;
  int64_t *snd = alloc(c), *rcv = alloc(tot);
  NT_CHECK(snd && rcv);
  for (size_t i = 0; i < c; i++) {
    snd[i] = val(r, i, 7);
    if (ip) rcv[(size_t)r * c + i] = val(r, i, 7);
  }
  NT_OKC(w, nexar_allgather(w, ip ? NEXAR_IN_PLACE : snd, rcv, c, DT));
  for (size_t i = 0; i <= tot; i++) {
    int64_t want = i < tot ? val((int)(i / c), i % c, 7) : POISON;
    EXPECT(rcv[i] == want, "allgather", i, rcv[i], want);
  }
  free(snd);
  free(rcv);
  return 0;
}

static int t_allgatherv(nexar_comm_t *w, int r, int n, size_t c, int ip) {
  int root = -1;
  size_t cnt[8], dsp[8], ext = vlayout(n, c, cnt, dsp);
  int64_t *snd = alloc(cnt[r]), *rcv = alloc(ext);
  NT_CHECK(snd && rcv);
  for (size_t i = 0; i < cnt[r]; i++) {
    snd[i] = val(r, i, 8);
    if (ip) rcv[dsp[r] + i] = val(r, i, 8);
  }
  NT_OKC(w, nexar_allgatherv(w, ip ? NEXAR_IN_PLACE : snd, cnt[r], rcv, cnt,
                             dsp, DT));
  for (int k = 0, at = 0; k < n; k++) {
    for (; (size_t)at < dsp[k]; at++)
      EXPECT(rcv[at] == POISON, "allgatherv gap", at, rcv[at], POISON);
    for (size_t i = 0; i < cnt[k]; i++, at++)
      EXPECT(rcv[at] == val(k, i, 8), "allgatherv", at, rcv[at], val(k, i, 8));
  }
  EXPECT(rcv[ext] == POISON, "allgatherv guard", ext, rcv[ext], POISON);
  free(snd);
  free(rcv);
  return 0;
}

/* reduce_scatter with v-layout counts (blocks contiguous in the input),
 * or reduce_scatter_block with |c| each when |block|. */
static int t_reduce_scatter(nexar_comm_t *w, int r, int n, size_t c, int ip,
                            nexar_op_t op, int block) {
  int root = -1;
  size_t cnt[8], dsp[8], tot = 0;
  vlayout(n, c, cnt, dsp);
  for (int k = 0; k < n; k++) {
    if (block) cnt[k] = c;
    dsp[k] = tot;
    tot += cnt[k];
  }
  int64_t *snd = alloc(tot), *rcv = alloc(ip ? tot : cnt[r]);
  NT_CHECK(snd && rcv);
  for (size_t i = 0; i < tot; i++) (ip ? rcv : snd)[i] = val(r, i, 9);
  if (block)
    NT_OKC(w, nexar_reduce_scatter_block(w, ip ? NEXAR_IN_PLACE : snd, rcv, c,
                                         DT, op));
  else
    NT_OKC(w, nexar_reduce_scatter(w, ip ? NEXAR_IN_PLACE : snd, rcv, cnt, DT,
                                   op));
  for (size_t i = 0; i < cnt[r]; i++) {
    int64_t want = reduced(op, n, dsp[r] + i, 9, n);
    EXPECT(rcv[i] == want, "reduce_scatter", i, rcv[i], want);
  }
  size_t end = ip ? tot : cnt[r];
  EXPECT(rcv[end] == POISON, "reduce_scatter guard", end, rcv[end], POISON);
  free(snd);
  free(rcv);
  return 0;
}

/* Alltoall(v) payload: element i of what rank a sends to rank b. */
static int64_t a2a(int a, int b, size_t i) {
  return val(a * 8 + b, i, 10);
}

/* Elements rank a sends to rank b in alltoallv: symmetric in place (one
 * layout describes both directions), asymmetric otherwise. */
static size_t a2a_cnt(int a, int b, size_t c, int ip) {
  return ip ? (size_t)(a + b) % 3 * c / 2 + (size_t)(a == b)
            : ((size_t)a * 2 + (size_t)b) % 4 * c / 3 + (size_t)(b & 1);
}

static int t_alltoall(nexar_comm_t *w, int r, int n, size_t c, int ip) {
  int root = -1;
  size_t tot = c * (size_t)n;
  int64_t *snd = alloc(tot), *rcv = alloc(tot);
  NT_CHECK(snd && rcv);
  for (size_t i = 0; i < tot; i++)
    (ip ? rcv : snd)[i] = a2a(r, (int)(i / c), i % c);
  NT_OKC(w, nexar_alltoall(w, ip ? NEXAR_IN_PLACE : snd, rcv, c, DT));
  for (size_t i = 0; i <= tot; i++) {
    int64_t want = i < tot ? a2a((int)(i / c), r, i % c) : POISON;
    EXPECT(rcv[i] == want, "alltoall", i, rcv[i], want);
  }
  free(snd);
  free(rcv);
  return 0;
}

static int t_alltoallv(nexar_comm_t *w, int r, int n, size_t c, int ip) {
  int root = -1;
  size_t sc[8], sd[8], rc[8], rd[8], st = 0, rt = 0;
  for (int k = n - 1; k >= 0; k--) { /* blocks in reverse rank order */
    sc[k] = a2a_cnt(r, k, c, ip);
    sd[k] = st + 1;
    st = sd[k] + sc[k];
    rc[k] = a2a_cnt(k, r, c, ip);
    rd[k] = rt + 3;
    rt = rd[k] + rc[k];
  }
  int64_t *snd = alloc(st), *rcv = alloc(rt);
  NT_CHECK(snd && rcv);
  for (int k = 0; k < n; k++)
    for (size_t i = 0; i < (ip ? rc[k] : sc[k]); i++)
      (ip ? rcv + rd[k] : snd + sd[k])[i] = a2a(r, k, i);
  NT_OKC(w, nexar_alltoallv(w, ip ? NEXAR_IN_PLACE : snd, ip ? NULL : sc,
                            ip ? NULL : sd, rcv, rc, rd, DT));
  for (int k = n - 1, at = 0; k >= 0; k--) {
    for (; (size_t)at < rd[k]; at++)
      EXPECT(rcv[at] == POISON, "alltoallv gap", at, rcv[at], POISON);
    for (size_t i = 0; i < rc[k]; i++, at++)
      EXPECT(rcv[at] == a2a(k, r, i), "alltoallv", at, rcv[at], a2a(k, r, i));
  }
  free(snd);
  free(rcv);
  return 0;
}

static int t_scan(nexar_comm_t *w, int r, int n, size_t c, int ip,
                  nexar_op_t op, int ex) {
  int root = -1;
  int64_t *snd = alloc(c), *rcv = alloc(c);
  NT_CHECK(snd && rcv);
  for (size_t i = 0; i < c; i++) (ip ? rcv : snd)[i] = val(r, i, 11);
  if (ex)
    NT_OKC(w, nexar_exscan(w, ip ? NEXAR_IN_PLACE : snd, rcv, c, DT, op));
  else
    NT_OKC(w, nexar_scan(w, ip ? NEXAR_IN_PLACE : snd, rcv, c, DT, op));
  for (size_t i = 0; i <= c; i++) {
    int64_t want;
    if (i == c)
      want = POISON;
    else if (ex && r == 0) /* left unchanged */
      want = ip ? val(r, i, 11) : POISON;
    else
      want = reduced(op, ex ? r : r + 1, i, 11, r + 1);
    EXPECT(rcv[i] == want, ex ? "exscan" : "scan", i, rcv[i], want);
  }
  (void)n;
  free(snd);
  free(rcv);
  return 0;
}

/* Several different collectives in flight together. */
static int t_concurrent(nexar_comm_t *w, int r, int n) {
  enum { C = 3001 };
  int64_t *a = alloc(C * (size_t)n), *b = alloc(C * (size_t)n);
  int64_t *d = alloc(C * (size_t)n), *e = alloc(C * (size_t)n);
  NT_CHECK(a && b && d && e);
  for (size_t i = 0; i < C * (size_t)n; i++) {
    a[i] = a2a(r, (int)(i / C), i % C);
    d[i] = val(r, i, 12);
  }
  for (size_t i = 0; i < C; i++) e[(size_t)r * C + i] = val(r, i, 13);
  nexar_req_t *q[4];
  NT_OKC(w, nexar_ialltoall(w, a, b, C, DT, &q[0]));
  NT_OKC(w, nexar_ireduce_scatter_block(w, NEXAR_IN_PLACE, d, C, DT, NEXAR_SUM,
                                        &q[1]));
  NT_OKC(w, nexar_iallgather(w, NEXAR_IN_PLACE, e, C, DT, &q[2]));
  NT_OKC(w, nexar_ibarrier(w, &q[3]));
  nexar_status_t st[4];
  NT_OKC(w, nexar_waitall(4, q, st));
  for (size_t i = 0; i < C * (size_t)n; i++) {
    NT_CHECKF(b[i] == a2a((int)(i / C), r, i % C), "ialltoall %zu", i);
    NT_CHECKF(e[i] == val((int)(i / C), i % C, 13), "iallgather %zu", i);
  }
  for (size_t i = 0; i < C; i++)
    NT_CHECKF(d[i] == reduced(NEXAR_SUM, n, (size_t)r * C + i, 12, n),
              "ireduce_scatter_block %zu", i);
  free(a);
  free(b);
  free(d);
  free(e);
  return 0;
}

static int worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  const size_t counts[] = {0,  1,   (size_t)n - 1, (size_t)n, (size_t)n + 1,
                           97, 3000};
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
    size_t c = counts[ci];
    for (int ip = 0; ip < 2; ip++) {
      for (int root = 0; root < n; root++) {
        if (!ip && t_bcast(w, r, n, c, root)) return 1;
        if (t_reduce(w, r, n, c, root, ip, NEXAR_SUM)) return 1;
        if (t_gather(w, r, n, c, root, ip)) return 1;
        if (t_gatherv(w, r, n, c, root, ip)) return 1;
        if (t_scatter(w, r, n, c, root, ip)) return 1;
        if (t_scatterv(w, r, n, c, root, ip)) return 1;
      }
      if (t_allgather(w, r, n, c, ip)) return 1;
      if (t_allgatherv(w, r, n, c, ip)) return 1;
      if (t_reduce_scatter(w, r, n, c, ip, NEXAR_SUM, 0)) return 1;
      if (t_reduce_scatter(w, r, n, c, ip, NEXAR_SUM, 1)) return 1;
      if (t_alltoall(w, r, n, c, ip)) return 1;
      if (t_alltoallv(w, r, n, c, ip)) return 1;
      if (t_scan(w, r, n, c, ip, NEXAR_SUM, 0)) return 1;
      if (t_scan(w, r, n, c, ip, NEXAR_SUM, 1)) return 1;
      if (c != 97) continue;
      const nexar_op_t more[] = {NEXAR_MAX, NEXAR_AVG};
      for (int o = 0; o < 2; o++) {
        if (t_reduce(w, r, n, c, n - 1, ip, more[o])) return 1;
        if (t_reduce_scatter(w, r, n, c, ip, more[o], 0)) return 1;
        if (t_scan(w, r, n, c, ip, more[o], 0)) return 1;
      }
      if (t_scan(w, r, n, c, ip, NEXAR_MAX, 1)) return 1;
    }
    NT_OKC(w, nexar_barrier(w));
  }
  if (t_concurrent(w, r, n)) return 1;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  const int worlds[] = {1, 2, 3, 4, 5, 7, 8};
  int fails = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (size_t wi = 0; wi < sizeof worlds / sizeof worlds[0]; wi++)
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
      nt_opts_t o = {
          .world_size = worlds[wi], .timeout_ms = 60000, .env = cfgs[ci].env};
      double t0 = nt_now_ms();
      int rc = nt_run(&o, worker, NULL);
      printf("%s %s world=%d (%.0f ms)\n", rc ? "FAIL" : "ok", cfgs[ci].name,
             worlds[wi], nt_now_ms() - t0);
      fails += rc ? 1 : 0;
    }
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
