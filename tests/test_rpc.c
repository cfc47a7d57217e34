/*
 * RPC tests over real multi-process clusters (3 ranks, and 1 rank for the
 * self-only path): echo and sum handlers checked bit for bit (self
 * included), 1000 concurrent non-blocking calls per rank each checked
 * against its own request, an unknown function id, a handler error with
 * its code, a timeout against a slow handler (within the deadline, the
 * late response dropped, later calls fine), over-size requests refused,
 * truncated responses, a handler that claims bytes it did not write (zeros,
 * not an earlier caller's bytes), and unregistering. With
 * NEXAR_RPC_THREADS=1: nested call cycles through busy ranks (self,
 * A->B->A, A->B->C->A, every rank at once) complete within 5 s, a lazy
 * handler on the thread that wrote 200 KB and 1 MiB before, expired
 * requests are dropped before they run, a handler reads its time left. A
 * callee killed during a call (the failure time is printed), then 1 MiB
 * calls on the revoked world: NEXAR_ERR_REVOKED and RSS flat.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <time.h>

#include "harness.h"
#include "nexar.h"

enum {
  FN_ECHO = 1,
  FN_SUM = 2,
  FN_FAIL = 3,
  FN_SLOW = 4,
  FN_BIG = 5,
  FN_LAZY = 6,
  FN_DIE = 7,
  FN_NEST = 8,
  FN_NAP = 9,
  FN_NAPS = 10,
  FN_LEFT = 11
};
#define MAX_BYTES 65536
#define FAIL_CODE (-1234)
#define SLOW_MS 1500
#define NCALLS 1000

static int rank_g;
static int join(nexar_ctx_t **ctx, nexar_comm_t **w, int *r, int *n);

/* Sum of the request's uint64 values, then the callee's rank. */
static int h_sum(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                 void *resp, size_t cap, size_t *out) {
  (void)ud;
  (void)caller;
  (void)fn;
  (void)cap;
  uint64_t s = 0, v, me = (uint64_t)rank_g;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    memcpy(&v, (const uint8_t *)req + i, 8);
    s += v;
  }
  memcpy(resp, &s, 8);
  memcpy((uint8_t *)resp + 8, &me, 8);
  *out = 16;
  return 0;
}

static int h_fail(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                  void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn, (void)req, (void)n, (void)resp, (void)cap;
  (void)out;
  return FAIL_CODE;
}

static int h_slow(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                  void *resp, size_t cap, size_t *out) {
  struct timespec ts = {SLOW_MS / 1000, (SLOW_MS % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  return nt_rpc_echo(ud, caller, fn, req, n, resp, cap, out);
}

/* Writes as many bytes as the request asks for (uint32), bytes i & 0xff,
 * and sends them, or only as many as a second uint32 says. */
static int h_big(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                 void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn;
  uint32_t want[2];
  if (n != 4 && n != 8) return NEXAR_ERR_INVALID_ARG;
  memcpy(want, req, n);
  if (want[0] > cap || (n == 8 && want[1] > want[0]))
    return NEXAR_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < want[0]; i++) ((uint8_t *)resp)[i] = (uint8_t)i;
  *out = n == 8 ? want[1] : want[0];
  return 0;
}

/* Claims the response length the request asks for (uint32) and writes
 * nothing: what the caller gets must not be an earlier caller's bytes. */
static int h_lazy(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                  void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn, (void)resp;
  uint32_t want;
  if (n != 4) return NEXAR_ERR_INVALID_ARG;
  memcpy(&want, req, 4);
  if (want > cap) return NEXAR_ERR_INVALID_ARG;
  *out = want;
  return 0;
}

static uint8_t pat(int a, int b, int i, size_t k) {
  return (uint8_t)(a * 31 + b * 17 + i * 7 + k * 13 + (k >> 8));
}

/* FN_BIG writes |want| bytes on |to| (and sends them, or only 1), then
 * FN_LAZY claims as many without writing them: all must arrive as zeros. */
static int lazy(nexar_comm_t *w, int to, uint32_t want, int sent) {
  uint8_t *resp = malloc(want);
  uint32_t big[2] = {want, sent ? want : 1};
  size_t got;
  NT_CHECK(resp);
  NT_OKC(w, nexar_rpc_call(w, to, FN_BIG, big, sizeof big, resp, want, &got,
                           10000));
  NT_CHECK(got == big[1] && resp[got - 1] == (uint8_t)(got - 1));
  memset(resp, 0xee, want);
  NT_OKC(w, nexar_rpc_call(w, to, FN_LAZY, &want, 4, resp, want, &got, 10000));
  NT_CHECK(got == want);
  for (uint32_t i = 0; i < want; i++)
    NT_CHECKF(resp[i] == 0, "lazy response from %d: byte %u is %u", to, i,
              resp[i]);
  free(resp);
  return 0;
}

static int basic(nexar_comm_t *w, int r, int n) {
  static uint8_t req[4096], resp[4096];
  for (int t = 0; t < n; t++) {
    for (int i = 0; i < 3; i++) {
      size_t len = i == 0 ? 0 : (i == 1 ? 1 : sizeof req);
      for (size_t k = 0; k < len; k++) req[k] = pat(r, t, i, k);
      size_t got = 99;
      memset(resp, 0xee, sizeof resp);
      NT_OKC(w, nexar_rpc_call(w, t, FN_ECHO, req, len, resp, sizeof resp, &got,
                               10000));
      NT_CHECKF(got == len, "echo from %d: %zu bytes, want %zu", t, got, len);
      NT_CHECKF(memcmp(req, resp, len) == 0, "echo from %d differs", t);
    }
    uint64_t vals[100], sum = 0, out[2] = {0, 0};
    for (int i = 0; i < 100; i++) {
      vals[i] = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)i * t;
      sum += vals[i];
    }
    size_t got = 0;
    NT_OKC(w, nexar_rpc_call(w, t, FN_SUM, vals, sizeof vals, out, sizeof out,
                             &got, 10000));
    NT_CHECKF(got == 16 && out[0] == sum && out[1] == (uint64_t)t,
              "sum from %d: %zu bytes, %llu (want %llu), rank %llu", t, got,
              (unsigned long long)out[0], (unsigned long long)sum,
              (unsigned long long)out[1]);
  }
  return 0;
}

/* NCALLS calls from every rank, to every rank in turn, all in flight. */
static int concurrent(nexar_comm_t *w, int r, int n) {
  uint8_t(*req)[64] = calloc(NCALLS, 64);
  uint8_t(*resp)[64] = calloc(NCALLS, 64);
  nexar_req_t **reqs = calloc(NCALLS, sizeof(*reqs));
  nexar_status_t *st = calloc(NCALLS, sizeof(*st));
  NT_CHECK(req && resp && reqs && st);
  for (int i = 0; i < NCALLS; i++) {
    size_t len = 8 + (size_t)(i % 57);
    for (size_t k = 0; k < len; k++) req[i][k] = pat(r, i % n, i, k);
    NT_OKC(w, nexar_rpc_icall(w, i % n, FN_ECHO, req[i], len, resp[i], 64,
                              20000, &reqs[i]));
  }
  /* Complete some with nexar_test, the rest with nexar_waitall. */
  for (int i = 0; i < NCALLS; i += 7) {
    int done = 0;
    while (!done) NT_OKC(w, nexar_test(&reqs[i], &done, &st[i]));
  }
  NT_OKC(w, nexar_waitall(NCALLS, reqs, NULL));
  for (int i = 0; i < NCALLS; i++) {
    size_t len = 8 + (size_t)(i % 57);
    for (size_t k = 0; k < len; k++)
      NT_CHECKF(resp[i][k] == pat(r, i % n, i, k), "call %d byte %zu", i, k);
    if (len < 64)
      NT_CHECKF(resp[i][len] == 0, "call %d wrote past its response", i);
  }
  free(req);
  free(resp);
  free(reqs);
  free(st);
  return 0;
}

static int errors(nexar_comm_t *w, int r, int n) {
  int t = (r + 1) % n;
  uint8_t buf[64];
  size_t got = 5;
  double t0 = nt_now_ms();
  int rc = nexar_rpc_call(w, t, 999, "x", 1, buf, sizeof buf, &got, 10000);
  NT_CHECKF(rc == NEXAR_ERR_RPC_UNKNOWN_FN, "unknown fn: %s (%s)",
            nexar_err_name(rc), nexar_comm_last_error(w));
  NT_CHECKF(nt_now_ms() - t0 < 5000, "unknown fn took %.0f ms",
            nt_now_ms() - t0);
  NT_CHECK(strstr(nexar_comm_last_error(w), "999") != NULL);

  /* Handler error, with its code. */
  nexar_req_t *q;
  nexar_status_t st;
  NT_OKC(w,
         nexar_rpc_icall(w, t, FN_FAIL, NULL, 0, buf, sizeof buf, 10000, &q));
  rc = nexar_wait(&q, &st);
  NT_CHECKF(rc == NEXAR_ERR_RPC_HANDLER && st.rpc_code == FAIL_CODE,
            "handler error: %s, code %d", nexar_err_name(rc), st.rpc_code);
  rc = nexar_rpc_call(w, r, FN_FAIL, NULL, 0, buf, sizeof buf, &got, 10000);
  NT_CHECKF(rc == NEXAR_ERR_RPC_HANDLER, "self handler error: %s",
            nexar_err_name(rc));
  NT_CHECK(strstr(nexar_comm_last_error(w), "-1234") != NULL);

  /* Over-size request: refused at once. */
  static uint8_t big[MAX_BYTES + 1];
  rc = nexar_rpc_call(w, t, FN_ECHO, big, sizeof big, buf, sizeof buf, &got,
                      10000);
  NT_CHECKF(rc == NEXAR_ERR_INVALID_ARG, "over-size: %s", nexar_err_name(rc));
  NT_CHECK(strstr(nexar_comm_last_error(w), "NEXAR_RPC_MAX_BYTES") != NULL);
  /* At the bound: fine. Longer than the caller's buffer: truncated. */
  static uint8_t resp[MAX_BYTES];
  uint32_t want = MAX_BYTES;
  NT_OKC(w, nexar_rpc_call(w, t, FN_BIG, &want, 4, resp, sizeof resp, &got,
                           10000));
  NT_CHECK(got == MAX_BYTES);
  for (uint32_t i = 0; i < want; i++) NT_CHECK(resp[i] == (uint8_t)i);
  want = 1000;
  memset(buf, 0, sizeof buf);
  rc = nexar_rpc_call(w, t, FN_BIG, &want, 4, buf, sizeof buf, &got, 10000);
  NT_CHECKF(rc == NEXAR_ERR_TRUNCATE && got == 1000, "truncate: %s, %zu",
            nexar_err_name(rc), got);
  for (size_t i = 0; i < sizeof buf; i++) NT_CHECK(buf[i] == (uint8_t)i);
  /* A handler that claims bytes it did not write sends zeros, never what
   * it sent an earlier caller (whichever handler thread runs it). */
  for (int k = 0; k < 8; k++)
    if (lazy(w, k % 2 ? t : r, k < 4 ? 4096 : MAX_BYTES, k % 3)) return 1;
  return 0;
}

/* Rank 0 calls the slow handler of rank 1 (itself in a world of one). */
static int timeout(nexar_comm_t *w, int r, int n) {
  if (r != 0) return 0;
  int t = n > 1 ? 1 : 0;
  uint8_t buf[16] = {0};
  size_t got;
  double t0 = nt_now_ms();
  int rc = nexar_rpc_call(w, t, FN_SLOW, "slow", 4, buf, sizeof buf, &got, 300);
  double el = nt_now_ms() - t0;
  NT_CHECKF(rc == NEXAR_ERR_TIMEOUT, "slow call: %s", nexar_err_name(rc));
  NT_CHECKF(el >= 290 && el < 800, "timeout after %.0f ms", el);
  NT_CHECK(strstr(nexar_comm_last_error(w), "no response") != NULL);
  /* The next call waits for the slow one's handler, whose late response
   * arrives first and is dropped. */
  memset(buf, 0, sizeof buf);
  NT_OKC(w, nexar_rpc_call(w, t, FN_ECHO, "after", 5, buf, sizeof buf, &got,
                           10000));
  NT_CHECK(got == 5 && memcmp(buf, "after", 5) == 0);
  return 0;
}

/* NEXAR_RPC_QUEUE=2: rank 0 sends 12 slow calls at once to rank 1, whose
 * service thread runs one and queues two; the others are answered BUSY at
 * once, never dropped or left to time out. */
enum { BUSY_CALLS = 12 };
static int busy_worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  if (join(&ctx, &w, &r, &n)) return 1;
  NT_OKC(w, nexar_barrier(w));
  if (r == 0) {
    nexar_req_t *q[BUSY_CALLS];
    uint8_t bufs[BUSY_CALLS][8];
    for (int i = 0; i < BUSY_CALLS; i++)
      NT_OKC(w, nexar_rpc_icall(w, 1, FN_SLOW, "busy", 4, bufs[i], 8, 20000,
                                &q[i]));
    int ok = 0, busy = 0;
    for (int i = 0; i < BUSY_CALLS; i++) {
      nexar_status_t st;
      int rc = nexar_wait(&q[i], &st);
      if (rc == NEXAR_OK && st.bytes == 4 && memcmp(bufs[i], "busy", 4) == 0)
        ok++;
      else if (rc == NEXAR_ERR_RPC_BUSY)
        busy++;
      else
        NT_CHECKF(0, "call %d: %s", i, nexar_err_name(rc));
    }
    NT_CHECKF(ok >= 1 && ok <= 3 && busy == BUSY_CALLS - ok,
              "%d answered, %d busy of %d", ok, busy, BUSY_CALLS);
  }
  NT_OKC(w, nexar_barrier(w));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- Nested calls and deadlines (NEXAR_RPC_THREADS=1) ---- */

#define MAX_HOPS 8
#define NAP_MS 500
static _Atomic int naps; /* FN_NAP handlers run on this process */

/* The request is a path of ranks (int32): calls FN_NEST on the first with
 * the rest, and answers the ranks the call went through, last first, then
 * its own. An empty path answers the own rank. */
static int h_nest(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                  void *resp, size_t cap, size_t *out) {
  nexar_comm_t *w = ud;
  (void)caller, (void)fn;
  int32_t me = rank_g, got[MAX_HOPS + 1];
  size_t k = 0;
  if (n % 4 || n / 4 > MAX_HOPS || cap < sizeof got) return -1;
  if (n) {
    int32_t to;
    memcpy(&to, req, 4);
    int rc = nexar_rpc_call(w, to, FN_NEST, (const uint8_t *)req + 4, n - 4,
                            got, sizeof got, &k, 20000);
    if (rc < 0) return rc;
  }
  memcpy(resp, got, k);
  memcpy((uint8_t *)resp + k, &me, 4);
  *out = k + 4;
  return 0;
}

static int h_nap(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                 void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn, (void)req, (void)n, (void)resp, (void)cap;
  (void)out;
  naps++;
  struct timespec ts = {0, NAP_MS * 1000000L};
  nanosleep(&ts, NULL);
  return 0;
}

static int h_naps(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                  void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn, (void)req, (void)n, (void)cap;
  int v = naps;
  memcpy(resp, &v, sizeof v);
  *out = sizeof v;
  return 0;
}

static int h_left(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                  void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn, (void)req, (void)n, (void)cap;
  int64_t v = nexar_rpc_time_left_ms();
  memcpy(resp, &v, sizeof v);
  *out = sizeof v;
  return 0;
}

/* Rank |from| calls FN_NEST on |to| with |path| (k hops); the answer must
 * be the ranks in reverse, within 5 s (the inner deadlines are 20 s). */
static int nest(nexar_comm_t *w, int to, const int32_t *path, size_t k) {
  int32_t got[MAX_HOPS + 1];
  size_t bytes = 0;
  double t0 = nt_now_ms();
  NT_OKC(w, nexar_rpc_call(w, to, FN_NEST, path, k * 4, got, sizeof got, &bytes,
                           20000));
  double el = nt_now_ms() - t0;
  NT_CHECKF(bytes == (k + 1) * 4, "nested answer of %zu bytes", bytes);
  for (size_t i = 0; i < k; i++)
    NT_CHECKF(got[i] == path[k - 1 - i], "hop %zu: %d", i, got[i]);
  NT_CHECK(got[k] == to);
  printf("rank %d: nested call to %d over %zu hops: %.1f ms\n", rank_g, to, k,
         el);
  NT_CHECKF(el < 5000, "nested call took %.0f ms", el);
  return 0;
}

/* Cycles that come back to a rank whose one handler thread is busy: a
 * handler calling its own rank, A->B->A and A->B->C->A started by a
 * handler of A, and every rank calling its neighbour's nested handler at
 * once. Then deadlines: ten calls that time out before the callee's one
 * thread reaches them are dropped there (one runs, the next call is
 * answered in time), and a handler reads the time left. */
static int nested(nexar_comm_t *w, int r, int n) {
  if (r == 0) {
    /* First, while each rank has its one handler thread: the same thread
     * serves both calls, past the 64 KiB it clears with memset. */
    if (lazy(w, 1, 200000, 1) || lazy(w, 1, 200000, 0) ||
        lazy(w, 0, 1 << 20, 0))
      return 1;
    int32_t self[] = {0}, aba[] = {1, 0}, abca[] = {1, 2, 0};
    if (nest(w, 0, self, 1) || nest(w, 0, aba, 2) || nest(w, 0, abca, 3))
      return 1;
  }
  NT_OKC(w, nexar_barrier(w));
  int32_t next[] = {(r + 2) % n};
  if (nest(w, (r + 1) % n, next, 1)) return 1;
  NT_OKC(w, nexar_barrier(w));
  if (r != 0) return 0;
  nexar_req_t *q[10];
  uint8_t buf[16];
  size_t got;
  for (int i = 0; i < 10; i++)
    NT_OKC(w,
           nexar_rpc_icall(w, 1, FN_NAP, NULL, 0, buf, sizeof buf, 300, &q[i]));
  for (int i = 0; i < 10; i++) {
    int rc = nexar_wait(&q[i], NULL);
    NT_CHECKF(rc == NEXAR_ERR_TIMEOUT, "nap %d: %s", i, nexar_err_name(rc));
  }
  double t0 = nt_now_ms();
  NT_OKC(w, nexar_rpc_call(w, 1, FN_ECHO, "fresh", 5, buf, sizeof buf, &got,
                           1000));
  printf("a 1 s call after ten expired ones: %.0f ms\n", nt_now_ms() - t0);
  int ran = -1;
  NT_OKC(w,
         nexar_rpc_call(w, 1, FN_NAPS, NULL, 0, &ran, sizeof ran, &got, 10000));
  printf("expired calls: %d of 10 ran\n", ran);
  NT_CHECKF(ran == 1, "%d of the 10 expired calls ran", ran);
  int64_t left = -2;
  NT_OKC(w, nexar_rpc_call(w, 1, FN_LEFT, NULL, 0, &left, sizeof left, &got,
                           2000));
  NT_CHECKF(left > 1000 && left <= 2000, "time left %lld ms", (long long)left);
  NT_CHECK(nexar_rpc_time_left_ms() == -1);
  return 0;
}

static int nested_worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  if (join(&ctx, &w, &r, &n)) return 1;
  NT_OKC(w, nexar_barrier(w));
  if (nested(w, r, n)) return 1;
  NT_OKC(w, nexar_barrier(w));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- A killed callee, and calls on the revoked world ---- */

#define FT_ENV                                                \
  "NEXAR_HEARTBEAT_MS=100\nNEXAR_HEARTBEAT_TIMEOUT_MS=1000\n" \
  "NEXAR_OP_TIMEOUT_MS=20000"
#define REVOKED_CALLS 64
#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif
#define MIB (1 << 20)
static double *t_kill; /* shared: CLOCK_MONOTONIC ms of the kill */

/* Rank 2 dies in the middle of serving a call. */
static int h_die(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                 void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn, (void)req, (void)n, (void)resp, (void)cap;
  (void)out;
  struct timespec ts = {0, 200 * 1000000L};
  nanosleep(&ts, NULL);
  *t_kill = nt_now_ms();
  raise(SIGKILL);
  return 0;
}

/* Rank 0 calls rank 2, which is killed while its handler runs: the call
 * fails within the heartbeat timeout (the figure is printed). Then ranks
 * 0 and 1 make REVOKED_CALLS calls of 1 MiB each on the revoked world:
 * every one fails with NEXAR_ERR_REVOKED and none keeps its request copy. */
static int revoked_worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  if (join(&ctx, &w, &r, &n)) return 1;
  NT_OKC(w, nexar_barrier(w));
  uint8_t buf[16];
  size_t got;
  int rc;
  if (r == 2) {
    struct timespec ts = {30, 0};
    nanosleep(&ts, NULL); /* killed in h_die */
    return 1;
  }
  if (r == 0) {
    rc = nexar_rpc_call(w, 2, FN_DIE, NULL, 0, buf, sizeof buf, &got, 20000);
    double back = nt_now_ms() - *t_kill;
    printf("rpc to a killed callee: %s %.0f ms after the kill\n",
           nexar_err_name(rc), back);
    NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED,
              "call to the killed rank: %s (%s)", nexar_err_name(rc),
              nexar_comm_last_error(w));
    NT_CHECKF(back < 2000, "failed %.0f ms after the kill", back);
  }
  /* Rank 1 learns of the failure from the detector or rank 0's notice. */
  double t0 = nt_now_ms();
  do {
    rc = nexar_rpc_call(w, 1 - r, FN_ECHO, "x", 1, buf, sizeof buf, &got, 1000);
  } while (rc == NEXAR_OK && nt_now_ms() - t0 < 10000);
  NT_CHECKF(rc == NEXAR_ERR_REVOKED, "on the revoked world: %s",
            nexar_err_name(rc));
  uint8_t *big = malloc(MIB);
  NT_CHECK(big);
  memset(big, r + 1, MIB);
  long before = nt_rss_kb();
  for (int i = 0; i < REVOKED_CALLS; i++) {
    rc = nexar_rpc_call(w, 1 - r, FN_ECHO, big, MIB, buf, sizeof buf, &got,
                        1000);
    NT_CHECKF(rc == NEXAR_ERR_REVOKED, "call %d: %s", i, nexar_err_name(rc));
  }
  long grew = nt_rss_kb() - before;
  free(big);
  printf("rank %d: %d calls of 1 MiB on the revoked world: RSS %+ld KiB\n", r,
         REVOKED_CALLS, grew);
  /* AddressSanitizer keeps freed memory in quarantine (its leak check at
   * exit finds a lost copy instead). */
  NT_CHECKF(ASAN || grew < 8192, "RSS grew by %ld KiB", grew);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* Joins the world and registers every handler (user data: the world). */
static int join(nexar_ctx_t **ctx, nexar_comm_t **w, int *r, int *n) {
  static const struct {
    uint16_t fn;
    nexar_rpc_handler_t h;
  } hs[] = {{FN_ECHO, nt_rpc_echo}, {FN_SUM, h_sum},   {FN_FAIL, h_fail},
            {FN_SLOW, h_slow},      {FN_BIG, h_big},   {FN_LAZY, h_lazy},
            {FN_DIE, h_die},        {FN_NEST, h_nest}, {FN_NAP, h_nap},
            {FN_NAPS, h_naps},      {FN_LEFT, h_left}};
  NT_OK(nt_join_world(ctx, w, r, n));
  rank_g = *r;
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
    NT_OKC(*w, nexar_rpc_register(*w, hs[i].fn, hs[i].h, *w));
  return 0;
}

static int worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  if (join(&ctx, &w, &r, &n)) return 1;
  NT_CHECK(nexar_rpc_register(w, FN_ECHO, nt_rpc_echo, NULL) ==
           NEXAR_ERR_INVALID_USAGE);
  NT_OKC(w, nexar_barrier(w));
  if (basic(w, r, n)) return 1;
  NT_OKC(w, nexar_barrier(w));
  if (concurrent(w, r, n)) return 1;
  NT_OKC(w, nexar_barrier(w));
  if (errors(w, r, n)) return 1;
  NT_OKC(w, nexar_barrier(w));
  if (timeout(w, r, n)) return 1;
  NT_OKC(w, nexar_barrier(w));
  /* Unregistered: unknown from then on. */
  NT_OKC(w, nexar_rpc_unregister(w, FN_SUM));
  NT_CHECK(nexar_rpc_unregister(w, FN_SUM) == NEXAR_ERR_INVALID_ARG);
  NT_OKC(w, nexar_barrier(w));
  uint8_t buf[16];
  size_t got;
  int rc = nexar_rpc_call(w, (r + 1) % n, FN_SUM, NULL, 0, buf, sizeof buf,
                          &got, 10000);
  NT_CHECKF(rc == NEXAR_ERR_RPC_UNKNOWN_FN, "after unregister: %s",
            nexar_err_name(rc));
  NT_OKC(w, nexar_barrier(w));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  int fails = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int world = 1; world <= 3; world += 2) {
    nt_opts_t o = {.world_size = world,
                   .timeout_ms = 120000,
                   .env = "NEXAR_RPC_MAX_BYTES=65536"};
    int rc = nt_run(&o, worker, NULL);
    printf("%s rpc world=%d\n", rc ? "FAIL" : "ok", world);
    fails += rc ? 1 : 0;
  }
  nt_opts_t b = {
      .world_size = 2, .timeout_ms = 120000, .env = "NEXAR_RPC_QUEUE=2"};
  int brc = nt_run(&b, busy_worker, NULL);
  printf("%s rpc busy world=2\n", brc ? "FAIL" : "ok");
  fails += brc ? 1 : 0;
  nt_opts_t c = {
      .world_size = 3, .timeout_ms = 120000, .env = "NEXAR_RPC_THREADS=1"};
  int crc = nt_run(&c, nested_worker, NULL);
  printf("%s rpc nested world=3\n", crc ? "FAIL" : "ok");
  fails += crc ? 1 : 0;
  t_kill = mmap(NULL, sizeof *t_kill, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  nt_opts_t k = {
      .world_size = 3, .timeout_ms = 120000, .env = FT_ENV, .tolerate_kill = 1};
  int krc = t_kill == MAP_FAILED ? 1 : nt_run(&k, revoked_worker, NULL);
  printf("%s rpc revoked world=3\n", krc ? "FAIL" : "ok");
  fails += krc ? 1 : 0;
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
