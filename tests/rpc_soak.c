/*
 * RPC soak (`make rpc-soak`, docs/testing.md; not part of `make test`):
 * about a million RPCs, with the resident set size of every rank asserted
 * flat, in three phases on 3 processes (NEXAR_RECOVERY=manual):
 *
 *   live     every rank calls its neighbour: echo calls of 0..64 KiB in
 *            windows of 32 (each response checked byte for byte), every
 *            256th a handler that claims bytes it did not write (must be
 *            zeros), every 1024th a nested call that comes back to the
 *            caller (A->B->A);
 *   revoked  rank 2 has killed itself; ranks 0 and 1 retry their calls on
 *            the revoked world: every one fails with NEXAR_ERR_REVOKED
 *            (every 64th request 1 MiB);
 *   shrunk   ranks 0 and 1 go on as in "live" on nexar_comm_shrink's
 *            communicator.
 *
 * A phase's RSS is taken at each tenth of it; more than RSS_SLACK_KB of
 * growth from the end of the warm-up (the first 3 tenths) to the end fails
 * the run. NEXAR_SOAK_CALLS
 * sets the total (default 1000000: 300000 live, 400000 revoked, 300000
 * shrunk, shared by the ranks of each phase). Prints each rank's figures.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

enum { FN_ECHO = 1, FN_LAZY = 2, FN_NEST = 3 };
#define WINDOW 32
#define MAX_BYTES (1 << 20)
#define SMALL_MAX 65536
#define RSS_SLACK_KB 2048
#define STEPS 10 /* RSS samples per phase */
#define WARM 3   /* the warm-up: the first 3 tenths */

static long total_calls = 1000000;

static uint8_t pat(long i, size_t k) {
  return (uint8_t)(i * 131 + (long)k * 7 + (long)(k >> 9));
}

static size_t size_of(long i) {
  return (size_t)((i * 2654435761u) % 4096u) * (i % 97 == 0 ? 16u : 1u);
}

static int h_lazy(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                  void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn, (void)req, (void)resp;
  *out = n < cap ? n : cap;
  return 0;
}

static nexar_comm_t *_Atomic cur; /* the world, then the shrunk one */

/* Calls the caller's echo with the request and answers what it got. */
static int h_nest(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                  void *resp, size_t cap, size_t *out) {
  (void)ud, (void)fn;
  return nexar_rpc_call(cur, caller, FN_ECHO, req, n, resp, cap, out, 10000);
}

typedef struct phase {
  const char *name;
  long calls, done, failed;
  long rss[STEPS + 1]; /* KiB at 0, 10 %, ... 100 % of the phase */
  double ms;
} phase_t;

/* RSS at each tenth of the phase. */
static void rss_sample(phase_t *p, long i) {
  int k = (int)(i * STEPS / p->calls);
  if (k <= STEPS && p->rss[k] == 0) p->rss[k] = nt_rss_kb();
}

static void phase_print(int r, const phase_t *p) {
  char prof[STEPS * 12] = "", *e = prof;
  for (int k = 1; k <= STEPS; k++)
    e += snprintf(e, sizeof prof - (size_t)(e - prof), " %ld", p->rss[k]);
  printf(
      "rank %d %-8s %7ld calls, %5.1f s (%6.0f/s): RSS KiB at each tenth"
      "%s (%+ld after warm-up)\n",
      r, p->name, p->done, p->ms / 1e3, p->done / (p->ms / 1e3 + 1e-9), prof,
      p->rss[STEPS] - p->rss[WARM]);
}

static int rss_check(int r, phase_t *p) {
  phase_print(r, p);
  long grew = p->rss[STEPS] - p->rss[WARM];
  NT_CHECKF(p->rss[WARM] > 0 && grew <= RSS_SLACK_KB,
            "%s: RSS grew by %ld KiB after the warm-up", p->name, grew);
  return 0;
}

/* Echo windows, lazy and nested calls to |to| on |c|. */
static int live(nexar_comm_t *c, int to, phase_t *p, uint8_t *req,
                uint8_t *resp) {
  nexar_req_t *q[WINDOW];
  nexar_status_t st[WINDOW];
  double t0 = nt_now_ms();
  for (long i = 0; i < p->calls;) {
    rss_sample(p, i);
    int k = 0;
    for (; k < WINDOW && i + k < p->calls; k++) {
      long s = i + k;
      size_t len = size_of(s);
      uint8_t *b = req + (size_t)k * SMALL_MAX;
      for (size_t j = 0; j < len; j++) b[j] = pat(s, j);
      NT_OKC(c, nexar_rpc_icall(c, to, FN_ECHO, b, len,
                                resp + (size_t)k * SMALL_MAX, SMALL_MAX, 20000,
                                &q[k]));
    }
    NT_OKC(c, nexar_waitall((size_t)k, q, st));
    for (int j = 0; j < k; j++) {
      long s = i + j;
      size_t len = size_of(s);
      const uint8_t *b = resp + (size_t)j * SMALL_MAX;
      NT_CHECKF(st[j].bytes == len, "call %ld: %zu bytes", s, st[j].bytes);
      for (size_t m = 0; m < len; m++)
        NT_CHECKF(b[m] == pat(s, m), "call %ld byte %zu", s, m);
    }
    i += k;
    size_t got;
    if (i % 256 < WINDOW) {
      NT_OKC(c, nexar_rpc_call(c, to, FN_LAZY, req, 4096, resp, SMALL_MAX, &got,
                               20000));
      for (size_t m = 0; m < got; m++) NT_CHECK(resp[m] == 0);
      i++;
    }
    if (i % 1024 < WINDOW) {
      memset(req, (int)(i & 0xff), 512);
      NT_OKC(c, nexar_rpc_call(c, to, FN_NEST, req, 512, resp, SMALL_MAX, &got,
                               20000));
      NT_CHECK(got == 512 && memcmp(req, resp, 512) == 0);
      i += 2; /* the call and its nested call back */
    }
    p->done = i;
  }
  p->ms = nt_now_ms() - t0;
  p->rss[STEPS] = nt_rss_kb();
  return 0;
}

/* Retries on the revoked world: every call fails at once. */
static int revoked(nexar_comm_t *c, int to, phase_t *p, uint8_t *big,
                   uint8_t *resp) {
  double t0 = nt_now_ms();
  for (long i = 0; i < p->calls; i++) {
    rss_sample(p, i);
    size_t len = i % 64 == 0 ? MAX_BYTES : size_of(i);
    size_t got;
    int rc =
        nexar_rpc_call(c, to, FN_ECHO, big, len, resp, SMALL_MAX, &got, 1000);
    NT_CHECKF(rc == NEXAR_ERR_REVOKED, "retry %ld: %s", i, nexar_err_name(rc));
    p->failed++;
    p->done = i + 1;
  }
  p->ms = nt_now_ms() - t0;
  p->rss[STEPS] = nt_rss_kb();
  return 0;
}

static int worker(int index, void *arg) {
  (void)index, (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w, *s = NULL;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  NT_OKC(w, nexar_rpc_register(w, FN_ECHO, nt_rpc_echo, NULL));
  NT_OKC(w, nexar_rpc_register(w, FN_LAZY, h_lazy, NULL));
  cur = w;
  NT_OKC(w, nexar_rpc_register(w, FN_NEST, h_nest, NULL));
  uint8_t *req = malloc((size_t)WINDOW * SMALL_MAX + MAX_BYTES);
  uint8_t *resp = malloc((size_t)WINDOW * SMALL_MAX);
  NT_CHECK(req && resp);
  memset(req, 0x5a, (size_t)WINDOW * SMALL_MAX + MAX_BYTES);
  phase_t a = {.name = "live", .calls = total_calls * 3 / 10 / n};
  phase_t b = {.name = "revoked", .calls = total_calls * 4 / 10 / (n - 1)};
  phase_t c = {.name = "shrunk", .calls = total_calls * 3 / 10 / (n - 1)};
  NT_OKC(w, nexar_barrier(w));
  if (live(w, (r + 1) % n, &a, req, resp)) return 1;
  NT_OKC(w, nexar_barrier(w));
  if (r == n - 1) raise(SIGKILL);
  /* The survivors learn of it, then retry on the revoked world. */
  double t0 = nt_now_ms();
  int rc;
  size_t got;
  do {
    rc = nexar_rpc_call(w, 1 - r, FN_ECHO, req, 8, resp, SMALL_MAX, &got, 1000);
  } while (rc == NEXAR_OK && nt_now_ms() - t0 < 10000);
  NT_CHECKF(rc == NEXAR_ERR_REVOKED || rc == NEXAR_ERR_PEER_FAILED,
            "after the kill: %s", nexar_err_name(rc));
  if (revoked(w, 1 - r, &b, req, resp)) return 1;
  NT_OKC(w, nexar_comm_shrink(w, &s));
  cur = s;
  NT_OKC(s, nexar_barrier(s));
  if (live(s, 1 - r, &c, req, resp)) return 1;
  NT_OKC(s, nexar_barrier(s));
  if (rss_check(r, &a) || rss_check(r, &b) || rss_check(r, &c)) return 1;
  long calls = a.done + b.done + c.done, all = 0;
  int64_t mine = calls;
  NT_OKC(s, nexar_allreduce(s, &mine, &all, 1, NEXAR_INT64, NEXAR_SUM));
  if (r == 0)
    printf(
        "survivors made %ld RPCs (plus rank 2's %ld live ones), %ld of "
        "them retries on the revoked world\n",
        (long)all, a.done, b.done * 2);
  free(req);
  free(resp);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *v = getenv("NEXAR_SOAK_CALLS");
  if (v) total_calls = strtol(v, NULL, 10);
  if (total_calls < 1000) total_calls = 1000;
  nt_opts_t o = {.world_size = 3,
                 .timeout_ms = 3600000,
                 .tolerate_kill = 1,
                 .env =
                     "NEXAR_RECOVERY=manual\nNEXAR_HEARTBEAT_MS=100\n"
                     "NEXAR_HEARTBEAT_TIMEOUT_MS=1000\n"
                     "NEXAR_OP_TIMEOUT_MS=20000"};
  double t0 = nt_now_ms();
  int rc = nt_run(&o, worker, NULL);
  printf("%s rpc soak: %ld calls, %.0f s\n", rc ? "FAIL" : "ok", total_calls,
         (nt_now_ms() - t0) / 1e3);
  return rc ? 1 : 0;
}
