/*
 * RPC by function id (docs/rpc.md). Every rank registers two functions,
 * then calls them on every rank (itself included), shows what an unknown
 * function id and a handler error return, and makes 100 calls at once.
 *
 *   build/tools/nexar-run -n 3 -- build/examples/rpc
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nexar.h"

enum { FN_HELLO = 1, FN_SUM = 2, FN_FAIL = 3 };

static int my_rank;

/* Answers "hello <caller> from <me>: <request>". */
static int hello(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                 void *resp, size_t cap, size_t *out) {
  (void)ud;
  (void)fn;
  int k = snprintf(resp, cap, "hello %d from %d: %.*s", caller, my_rank, (int)n,
                   (const char *)req);
  *out = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap;
  return 0;
}

/* Sums the request's int64 values. */
static int sum(void *ud, int caller, uint16_t fn, const void *req, size_t n,
               void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn;
  if (n % 8 || cap < 8) return NEXAR_ERR_INVALID_ARG;
  int64_t s = 0, v;
  for (size_t i = 0; i < n; i += 8) {
    memcpy(&v, (const uint8_t *)req + i, 8);
    s += v;
  }
  memcpy(resp, &s, 8);
  *out = 8;
  return 0;
}

static int fail(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn, (void)req, (void)n, (void)resp, (void)cap;
  (void)out;
  return -42;
}

#define CHECK(call)                                               \
  do {                                                            \
    int rc_ = (call);                                             \
    if (rc_ != NEXAR_OK) {                                        \
      fprintf(stderr, "rank %d: %s: %s (%s)\n", my_rank, #call,   \
              nexar_err_name(rc_), nexar_comm_last_error(world)); \
      return 1;                                                   \
    }                                                             \
  } while (0)

int main(void) {
  nexar_ctx_t *ctx;
  int rc = nexar_init(NULL, &ctx);
  if (rc != NEXAR_OK) {
    fprintf(stderr, "nexar_init: %s: %s\n", nexar_err_name(rc),
            nexar_last_error());
    return 1;
  }
  nexar_comm_t *world = nexar_comm_world(ctx);
  int n;
  nexar_comm_rank(world, &my_rank);
  nexar_comm_size(world, &n);
  CHECK(nexar_rpc_register(world, FN_HELLO, hello, NULL));
  CHECK(nexar_rpc_register(world, FN_SUM, sum, NULL));
  CHECK(nexar_rpc_register(world, FN_FAIL, fail, NULL));
  /* Everyone has registered before anyone calls. */
  CHECK(nexar_barrier(world));

  for (int t = 0; t < n; t++) {
    char resp[128];
    size_t got;
    CHECK(nexar_rpc_call(world, t, FN_HELLO, "hi", 2, resp, sizeof resp - 1,
                         &got, 5000));
    resp[got] = '\0';
    printf("rank %d <- rank %d: %s\n", my_rank, t, resp);
  }

  /* 100 calls in flight at once, spread over the ranks. */
  int64_t vals[100][2], sums[100];
  nexar_req_t *reqs[100];
  for (int i = 0; i < 100; i++) {
    vals[i][0] = i;
    vals[i][1] = my_rank * 1000;
    CHECK(nexar_rpc_icall(world, i % n, FN_SUM, vals[i], sizeof vals[i],
                          &sums[i], sizeof sums[i], 5000, &reqs[i]));
  }
  CHECK(nexar_waitall(100, reqs, NULL));
  for (int i = 0; i < 100; i++)
    if (sums[i] != i + my_rank * 1000) {
      fprintf(stderr, "rank %d: call %d: wrong sum %lld\n", my_rank, i,
              (long long)sums[i]);
      return 1;
    }
  printf("rank %d: 100 concurrent sums ok\n", my_rank);

  /* Errors come back as distinct codes, never as silence. */
  int peer = (my_rank + 1) % n;
  rc = nexar_rpc_call(world, peer, 777, NULL, 0, NULL, 0, NULL, 5000);
  printf("rank %d: unknown function -> %s\n", my_rank, nexar_err_name(rc));
  nexar_req_t *q;
  nexar_status_t st;
  CHECK(nexar_rpc_icall(world, peer, FN_FAIL, NULL, 0, NULL, 0, 5000, &q));
  rc = nexar_wait(&q, &st);
  printf("rank %d: failing handler -> %s, code %d\n", my_rank,
         nexar_err_name(rc), st.rpc_code);

  CHECK(nexar_barrier(world));
  return nexar_finalize(ctx) == NEXAR_OK ? 0 : 1;
}
