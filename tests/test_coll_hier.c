/*
 * Two-level collectives (docs/communicators.md), bit-exact against a serial
 * reference that the flat algorithms also meet: allreduce, bcast, reduce,
 * allgather and barrier over real multi-process clusters whose ranks are
 * placed on fake hosts with NEXAR_HOST_KEY:
 *   - 7 ranks on 3 hosts of 3 + 2 + 2, placed round robin (hosts' ranks
 *     not contiguous), algorithms automatic;
 *   - the same hosts placed in blocks, NEXAR_ALGO_*=hier;
 *   - 4 ranks on hosts of 2 + 1 + 1, NEXAR_ALGO_*=hier;
 *   - 7 ranks on one host with NEXAR_ALGO_*=hier (falls back to flat), the
 *     same checks;
 *   - 4 ranks on 2 + 2 hosts where one rank forces the ring allreduce: the
 *     call fails with NEXAR_ERR_MISMATCH naming [hier], which shows the
 *     others chose the two-level algorithm on their own.
 * Every root, in place and out of place, counts 0, 1, 7, 97, 4099 (the
 * leaders' allreduce is then Rabenseifner) and, in the first run, 2^20
 * elements (rs_gather, scatter + allgather and ring inside the phases),
 * int64 SUM, MAX and AVG and float32 SUM with exactly representable values.
 *
 * `test_coll_hier --check [big]` runs the same checks once in a process
 * joined from the environment, and `--mismatch` the last run's check
 * (tests/test_coll_hier_netns.sh, where the hosts are network
 * namespaces).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

#define POISON ((int64_t)0x5a5a5a5a5a5a5a5aLL)
#define BIG ((size_t)1 << 20)

/* Element i of rank k's contribution; small integers, so float32 sums of a
 * few ranks are exact and int64 never overflows. */
static int64_t val(int k, size_t i, int salt) {
  return (int64_t)(((size_t)k * 37 + i * 11 + (size_t)salt * 5) % 2003) - 1000;
}

static size_t esize(nexar_dtype_t dt) {
  return dt == NEXAR_FLOAT32 ? 4 : 8;
}

static void put(void *b, nexar_dtype_t dt, size_t i, int64_t v) {
  if (dt == NEXAR_FLOAT32)
    ((float *)b)[i] = (float)v;
  else
    ((int64_t *)b)[i] = v;
}

/* Element i as an integer (float32 values here are integers, exactly). */
static int64_t get(const void *b, nexar_dtype_t dt, size_t i) {
  if (dt == NEXAR_FLOAT32) return (int64_t)((const float *)b)[i];
  return ((const int64_t *)b)[i];
}

/* n elements and a guard element, all POISON. */
static void *alloc(size_t n, nexar_dtype_t dt) {
  void *p = malloc((n + 1) * esize(dt));
  if (p)
    for (size_t i = 0; i <= n; i++) put(p, dt, i, POISON);
  return p;
}

static bool guard_ok(const void *b, nexar_dtype_t dt, size_t n) {
  return dt == NEXAR_FLOAT32 ? ((const float *)b)[n] == (float)POISON
                             : get(b, dt, n) == POISON;
}

static int64_t reduced(nexar_op_t op, int n, size_t i, int salt) {
  int64_t acc = val(0, i, salt);
  for (int k = 1; k < n; k++) {
    int64_t v = val(k, i, salt);
    acc = op == NEXAR_MAX ? (v > acc ? v : acc) : acc + v;
  }
  return op == NEXAR_AVG ? acc / n : acc;
}

#define EXPECT(cond, what, i, got, want)                                    \
  NT_CHECKF(cond, "%s count %zu root %d%s: element %zu is %lld, want %lld", \
            what, c, root, ip ? " in place" : "", (size_t)(i),              \
            (long long)(got), (long long)(want))

static int t_allreduce(nexar_comm_t *w, int r, int n, size_t c,
                       nexar_dtype_t dt, nexar_op_t op, bool ip) {
  int root = -1;
  void *snd = alloc(c, dt), *rcv = alloc(c, dt);
  NT_CHECK(snd && rcv);
  for (size_t i = 0; i < c; i++) put(ip ? rcv : snd, dt, i, val(r, i, 1));
  NT_OKC(w, nexar_allreduce(w, ip ? NEXAR_IN_PLACE : snd, rcv, c, dt, op));
  for (size_t i = 0; i < c; i++) {
    int64_t want = reduced(op, n, i, 1);
    EXPECT(get(rcv, dt, i) == want, "allreduce", i, get(rcv, dt, i), want);
  }
  NT_CHECK(guard_ok(rcv, dt, c));
  free(snd);
  free(rcv);
  return 0;
}

static int t_reduce(nexar_comm_t *w, int r, int n, size_t c, nexar_dtype_t dt,
                    nexar_op_t op, int root, bool ip) {
  void *snd = alloc(c, dt), *rcv = alloc(c, dt);
  NT_CHECK(snd && rcv);
  bool inp = ip && r == root;
  for (size_t i = 0; i < c; i++) put(inp ? rcv : snd, dt, i, val(r, i, 2));
  NT_OKC(w, nexar_reduce(w, inp ? NEXAR_IN_PLACE : snd, r == root ? rcv : NULL,
                         c, dt, op, root));
  for (size_t i = 0; r == root && i < c; i++) {
    int64_t want = reduced(op, n, i, 2);
    EXPECT(get(rcv, dt, i) == want, "reduce", i, get(rcv, dt, i), want);
  }
  NT_CHECK(guard_ok(rcv, dt, c));
  for (size_t i = 0; !inp && i < c; i++)
    EXPECT(get(snd, dt, i) == val(r, i, 2), "reduce sendbuf", i,
           get(snd, dt, i), val(r, i, 2));
  free(snd);
  free(rcv);
  return 0;
}

static int t_bcast(nexar_comm_t *w, int r, size_t c, int root) {
  bool ip = false;
  nexar_dtype_t dt = NEXAR_INT64;
  void *b = alloc(c, dt);
  NT_CHECK(b);
  for (size_t i = 0; i < c; i++)
    put(b, dt, i, r == root ? val(root, i, 3) : -1);
  NT_OKC(w, nexar_bcast(w, b, c, dt, root));
  for (size_t i = 0; i < c; i++)
    EXPECT(get(b, dt, i) == val(root, i, 3), "bcast", i, get(b, dt, i),
           val(root, i, 3));
  NT_CHECK(guard_ok(b, dt, c));
  free(b);
  return 0;
}

static int t_allgather(nexar_comm_t *w, int r, int n, size_t c,
                       nexar_dtype_t dt, bool ip) {
  int root = -1;
  size_t tot = c * (size_t)n;
  void *snd = alloc(c, dt), *rcv = alloc(tot, dt);
  NT_CHECK(snd && rcv);
  for (size_t i = 0; i < c; i++) {
    put(snd, dt, i, val(r, i, 4));
    if (ip) put(rcv, dt, (size_t)r * c + i, val(r, i, 4));
  }
  NT_OKC(w, nexar_allgather(w, ip ? NEXAR_IN_PLACE : snd, rcv, c, dt));
  for (size_t i = 0; i < tot; i++) {
    int64_t want = val((int)(i / c), i % c, 4);
    EXPECT(get(rcv, dt, i) == want, "allgather", i, get(rcv, dt, i), want);
  }
  NT_CHECK(guard_ok(rcv, dt, tot));
  free(snd);
  free(rcv);
  return 0;
}

/* Every check at count |c|. */
static int checks_at(nexar_comm_t *w, int r, int n, size_t c) {
  static const nexar_op_t ops[] = {NEXAR_SUM, NEXAR_MAX, NEXAR_AVG};
  for (int ip = 0; ip < 2; ip++) {
    for (int o = 0; o < 3; o++)
      if (t_allreduce(w, r, n, c, NEXAR_INT64, ops[o], ip)) return 1;
    if (t_allreduce(w, r, n, c, NEXAR_FLOAT32, NEXAR_SUM, ip)) return 1;
    if (t_allgather(w, r, n, c, NEXAR_INT64, ip)) return 1;
    if (t_allgather(w, r, n, c, NEXAR_FLOAT32, ip)) return 1;
    for (int root = 0; root < n; root++) {
      if (t_reduce(w, r, n, c, NEXAR_INT64, ops[root % 3], root, ip)) return 1;
      if (t_reduce(w, r, n, c, NEXAR_FLOAT32, NEXAR_SUM, root, ip)) return 1;
    }
  }
  for (int root = 0; root < n; root++)
    if (t_bcast(w, r, c, root)) return 1;
  NT_OKC(w, nexar_barrier(w));
  return 0;
}

/* The whole suite on |w|; |big| adds 2^20-element calls. */
static int check_all(nexar_comm_t *w, bool big) {
  int r, n;
  NT_OK(nexar_comm_rank(w, &r));
  NT_OK(nexar_comm_size(w, &n));
  static const size_t counts[] = {0, 1, 7, 97, 4099};
  for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
    if (checks_at(w, r, n, counts[k])) return 1;
  if (big) {
    size_t c = BIG;
    int last = n - 1;
    if (t_allreduce(w, r, n, c, NEXAR_INT64, NEXAR_SUM, false) ||
        t_allreduce(w, r, n, c, NEXAR_FLOAT32, NEXAR_SUM, true) ||
        t_reduce(w, r, n, c, NEXAR_INT64, NEXAR_SUM, last, true) ||
        t_reduce(w, r, n, c, NEXAR_FLOAT32, NEXAR_MAX, 1, false) ||
        t_bcast(w, r, c, last) || t_bcast(w, r, c, 0) ||
        t_allgather(w, r, n, BIG / (size_t)n, NEXAR_FLOAT32, true))
      return 1;
  }
  /* Barriers in a row, and on a duplicate (its own host groups). */
  nexar_comm_t *d = NULL;
  NT_OKC(w, nexar_comm_dup(w, &d));
  for (int k = 0; k < 5; k++) NT_OKC(d, nexar_barrier(d));
  if (t_allreduce(d, r, n, 33, NEXAR_INT64, NEXAR_SUM, false)) return 1;
  NT_OK(nexar_comm_free(&d));
  return 0;
}

/* One rank forces the ring allreduce, the others chose the two-level one:
 * only the algorithm differs, and the mismatch notice names both. */
static int check_mismatch(nexar_comm_t *w, int r) {
  int64_t x = r, y = 0;
  int rc = nexar_allreduce(w, &x, &y, 1, NEXAR_INT64, NEXAR_SUM);
  const char *txt = nexar_comm_last_error(w);
  NT_CHECKF(rc == NEXAR_ERR_MISMATCH, "allreduce returned %s: %s",
            nexar_err_name(rc), txt);
  NT_CHECKF(strstr(txt, "[hier]") && strstr(txt, "[ring]"), "%s", txt);
  return 0;
}

/* ---- Runs under nt_run. */

typedef struct run {
  const char *name;
  int n;
  const int *host; /* fake host of each rank (NEXAR_HOST_KEY) */
  const char *env;
  bool big;
  int force_ring; /* this rank forces the ring allreduce (-1: none) */
} run_t;

static int worker(int index, void *arg) {
  const run_t *run = arg;
  char key[32];
  snprintf(key, sizeof key, "%x", 0x4000 + run->host[index]);
  setenv("NEXAR_HOST_KEY", key, 1);
  if (index == run->force_ring) setenv("NEXAR_ALGO_ALLREDUCE", "ring", 1);
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (run->force_ring < 0 ? check_all(w, run->big) : check_mismatch(w, r))
    return 1;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

#define HIER_ENV                                                         \
  "NEXAR_ALGO_ALLREDUCE=hier\nNEXAR_ALGO_BCAST=hier\nNEXAR_ALGO_REDUCE=" \
  "hier\nNEXAR_ALGO_ALLGATHER=hier\nNEXAR_ALGO_BARRIER=hier\n"

int main(int argc, char **argv) {
  bool mismatch = argc >= 2 && strcmp(argv[1], "--mismatch") == 0;
  if (mismatch || (argc >= 2 && strcmp(argv[1], "--check") == 0)) {
    nexar_ctx_t *ctx;
    nexar_comm_t *w;
    int r, n;
    nt_worker_index = atoi(getenv("NEXAR_RANK") ? getenv("NEXAR_RANK") : "0");
    if (nt_join_world(&ctx, &w, &r, &n) != NEXAR_OK) return 1;
    if (mismatch ? check_mismatch(w, r)
                 : check_all(w, argc >= 3 && strcmp(argv[2], "big") == 0))
      return 1;
    if (nexar_finalize(ctx) != NEXAR_OK) return 1;
    printf("test_coll_hier %s: rank %d of %d ok\n", argv[1], r, n);
    return 0;
  }
  static const int round_robin[] = {0, 1, 2, 0, 1, 0, 2}; /* 3 + 2 + 2 */
  static const int blocks[] = {0, 0, 0, 1, 1, 2, 2};
  static const int small[] = {0, 1, 0, 2}; /* 2 + 1 + 1 */
  static const int one[] = {5, 5, 5, 5, 5, 5, 5};
  static const int pairs[] = {0, 0, 1, 1};
  const run_t runs[] = {
      {"7 ranks, 3+2+2 round robin, auto", 7, round_robin,
       "NEXAR_SEG_BYTES=65536", true, -1},
      {"7 ranks, 3+2+2 in blocks, hier", 7, blocks,
       HIER_ENV "NEXAR_EAGER_BYTES=1024", false, -1},
      {"4 ranks, 2+1+1, hier", 4, small, HIER_ENV, false, -1},
      {"7 ranks on one host, hier (flat)", 7, one, HIER_ENV, false, -1},
      {"4 ranks, 2+2, one forcing ring", 4, pairs, "NEXAR_COLL_PROBE_MS=200",
       false, 3},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
    nt_opts_t o = {
        .world_size = runs[i].n, .timeout_ms = 120000, .env = runs[i].env};
    double t0 = nt_now_ms();
    int rc = nt_run(&o, worker, (void *)&runs[i]);
    printf("%s: %s (%.1f s)\n", runs[i].name, rc ? "FAILED" : "ok",
           (nt_now_ms() - t0) / 1000);
    bad |= rc;
  }
  return bad;
}
