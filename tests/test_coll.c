/*
 * Collective tests over real multi-process clusters at world sizes 1..5:
 * allreduce against a serial reference (bit-exact, every dtype x op x count
 * x in-place combination with exactly representable inputs), bcast from
 * every root, repeated barriers, and non-blocking collectives in flight
 * together.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

enum { C_ALLREDUCE, C_BCAST, C_BARRIER, C_NONBLOCKING };

/* Input of rank |k| at element |i| for |op|: small integers whose
 * reduction over at most 5 ranks is exact in every tested dtype. */
static int64_t input(nexar_op_t op, int k, size_t i) {
  switch (op) {
  case NEXAR_SUM: return (int64_t)((k + i) % 4);
  case NEXAR_PROD:
    if ((i + (size_t)k) % 11 == 0) return 2;
    if ((i * 3 + (size_t)k) % 13 == 0) return -1;
    return 1;
  default: return (int64_t)(((size_t)k * 7 + i) % 13) - 6;
  }
}

static void store(void *buf, nexar_dtype_t dt, size_t i, int64_t v) {
  switch (dt) {
  case NEXAR_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case NEXAR_FLOAT64: ((double *)buf)[i] = (double)v; break;
  case NEXAR_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  default: ((int64_t *)buf)[i] = v; break;
  }
}

static int64_t combine(nexar_op_t op, int64_t a, int64_t b) {
  switch (op) {
  case NEXAR_SUM: return a + b;
  case NEXAR_PROD: return a * b;
  case NEXAR_MIN: return a < b ? a : b;
  default: return a > b ? a : b;
  }
}

static const char *dt_name(nexar_dtype_t dt) {
  switch (dt) {
  case NEXAR_FLOAT32: return "f32";
  case NEXAR_FLOAT64: return "f64";
  case NEXAR_INT32: return "i32";
  default: return "i64";
  }
}

static const char *op_name(nexar_op_t op) {
  switch (op) {
  case NEXAR_SUM: return "sum";
  case NEXAR_PROD: return "prod";
  case NEXAR_MIN: return "min";
  default: return "max";
  }
}

static int one_allreduce(nexar_comm_t *w, int r, int n, size_t count,
                         nexar_dtype_t dt, nexar_op_t op, int inplace) {
  size_t es = nexar_dtype_size(dt);
  size_t bytes = count * es + 1; /* never malloc(0) */
  uint8_t *snd = malloc(bytes), *rcv = malloc(bytes), *ref = malloc(bytes);
  NT_CHECK(snd && rcv && ref);
  for (size_t i = 0; i < count; i++) {
    int64_t acc = input(op, 0, i);
    for (int k = 1; k < n; k++) acc = combine(op, acc, input(op, k, i));
    store(ref, dt, i, acc);
    store(inplace ? rcv : snd, dt, i, input(op, r, i));
  }
  if (!inplace) memset(rcv, 0xa5, bytes);
  int rc = nexar_allreduce(w, inplace ? NEXAR_IN_PLACE : snd, rcv, count, dt,
                           op);
  if (rc != NEXAR_OK) {
    nt_fail_rc(__FILE__, __LINE__, "nexar_allreduce", rc, w);
    nt_fail(__FILE__, __LINE__, "count %zu %s %s %s", count, dt_name(dt),
            op_name(op), inplace ? "in-place" : "out-of-place");
    return 1;
  }
  if (count && memcmp(rcv, ref, count * es) != 0) {
    size_t i = 0;
    while (memcmp(rcv + i * es, ref + i * es, es) == 0) i++;
    nt_fail(__FILE__, __LINE__,
            "allreduce count %zu %s %s %s: first mismatch at element %zu",
            count, dt_name(dt), op_name(op),
            inplace ? "in-place" : "out-of-place", i);
    return 1;
  }
  if (!inplace) /* the send buffer must be left alone */
    for (size_t i = 0; i < count; i++) {
      uint8_t tmp[8];
      store(tmp, dt, 0, input(op, r, i));
      NT_CHECKF(memcmp(snd + i * es, tmp, es) == 0, "sendbuf changed at %zu",
                i);
    }
  free(snd);
  free(rcv);
  free(ref);
  return 0;
}

static int case_allreduce(nexar_comm_t *w, int r, int n) {
  const nexar_dtype_t dts[] = {NEXAR_FLOAT32, NEXAR_FLOAT64, NEXAR_INT32,
                               NEXAR_INT64};
  const nexar_op_t ops[] = {NEXAR_SUM, NEXAR_PROD, NEXAR_MIN, NEXAR_MAX};
  size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 97};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
    for (int d = 0; d < 4; d++)
      for (int o = 0; o < 4; o++)
        for (int ip = 0; ip < 2; ip++)
          if (one_allreduce(w, r, n, counts[c], dts[d], ops[o], ip)) return 1;
  const size_t large = ((size_t)1 << 20) + 3;
  for (int ip = 0; ip < 2; ip++) {
    if (one_allreduce(w, r, n, large, NEXAR_FLOAT32, NEXAR_SUM, ip)) return 1;
    if (one_allreduce(w, r, n, large, NEXAR_INT64, NEXAR_MAX, ip)) return 1;
  }
  return 0;
}

static int32_t bval(int root, size_t i) {
  return (int32_t)(i * 31u + (size_t)root * 1000003u);
}

static int case_bcast(nexar_comm_t *w, int r, int n) {
  const size_t counts[] = {1, 100003};
  int32_t *b = malloc(100003 * sizeof *b);
  NT_CHECK(b);
  for (int ci = 0; ci < 2; ci++)
    for (int root = 0; root < n; root++) {
      size_t cnt = counts[ci];
      for (size_t i = 0; i < cnt; i++) b[i] = r == root ? bval(root, i) : -1;
      NT_OKC(w, nexar_bcast(w, b, cnt, NEXAR_INT32, root));
      for (size_t i = 0; i < cnt; i++)
        NT_CHECKF(b[i] == bval(root, i), "root %d count %zu: bad element %zu",
                  root, cnt, i);
    }
  free(b);
  return 0;
}

static int case_barrier(nexar_comm_t *w) {
  for (int i = 0; i < 100; i++) NT_OKC(w, nexar_barrier(w));
  return 0;
}

static int case_nonblocking(nexar_comm_t *w, int r, int n) {
  enum { CNT = 10007 };
  int32_t *a = malloc(CNT * sizeof *a), *b = malloc(CNT * sizeof *b);
  NT_CHECK(a && b);
  for (int rep = 0; rep < 5; rep++) {
    int root = rep % n;
    for (size_t i = 0; i < CNT; i++) {
      a[i] = (int32_t)((size_t)r * 3 + i + (size_t)rep);
      b[i] = r == root ? bval(root, i) : 0;
    }
    nexar_req_t *reqs[3] = {0};
    NT_OKC(w, nexar_iallreduce(w, NEXAR_IN_PLACE, a, CNT, NEXAR_INT32,
                               NEXAR_SUM, &reqs[0]));
    NT_OKC(w, nexar_ibcast(w, b, CNT, NEXAR_INT32, root, &reqs[1]));
    NT_OKC(w, nexar_ibarrier(w, &reqs[2]));
    nexar_status_t st[3];
    NT_OKC(w, nexar_waitall(3, reqs, st));
    for (size_t i = 0; i < CNT; i++) {
      int32_t e = 0;
      for (int k = 0; k < n; k++) e += (int32_t)((size_t)k * 3 + i + (size_t)rep);
      NT_CHECKF(a[i] == e, "rep %d iallreduce element %zu: %d vs %d", rep, i,
                a[i], e);
      NT_CHECKF(b[i] == bval(root, i), "rep %d ibcast element %zu", rep, i);
    }
  }
  free(a);
  free(b);
  return 0;
}

static int worker(int index, void *arg) {
  int c = *(const int *)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int rc = 1;
  switch (c) {
  case C_ALLREDUCE: rc = case_allreduce(w, r, n); break;
  case C_BCAST: rc = case_bcast(w, r, n); break;
  case C_BARRIER: rc = case_barrier(w); break;
  case C_NONBLOCKING: rc = case_nonblocking(w, r, n); break;
  }
  if (rc) return rc;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static const char *const names[] = {"allreduce", "bcast", "barrier_x100",
                                    "iallreduce_ibcast_ibarrier"};

int main(void) {
  int fails = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int world = 1; world <= 5; world++)
    for (int c = C_ALLREDUCE; c <= C_NONBLOCKING; c++) {
      nt_opts_t o = {.world_size = world, .timeout_ms = 120000};
      int rc = nt_run(&o, worker, &c);
      printf("%s %s world=%d\n", rc ? "FAIL" : "ok", names[c], world);
      fails += rc ? 1 : 0;
    }
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
