/*
 * A start-up whose progress thread does not spin (src/transport/shm.c,
 * shm_arm): during nexar_init each rank's progress thread runs a bounded
 * number of passes (test hook nexar__test_bg_passes, shm_test.h).
 *
 * The shared-memory set (kicks, sockets, the listener) sits in the
 * engine's epoll set. A peer's connection that no pass swept (the sweep
 * ran only every 20 ms before there was a ready link) left it readable,
 * and the progress thread woke at once from every sleep and ran an empty
 * pass: 1,100-1,450 passes and 14-17 ms of CPU in one rank of two, against
 * 2.5-4.4 ms. Passes are counted, not timed: a slower host runs fewer of
 * the empty ones, and the normal ones are a handful per message of the
 * start-up.
 */
#include <stdio.h>

#include "harness.h"
#include "nexar.h"
#include "transport/shm_test.h"

/* Passes of the progress thread during nexar_init that a start-up may
 * run (5-15 here at np 2 and 4; 1,600-4,300 in a spinning rank). */
static const uint64_t limit = 400;

static int worker(int index, void *arg) {
  (void)arg;
  nexar_ctx_t *ctx;
  NT_OK(nt_join(&ctx));
  uint64_t n = nexar__test_bg_passes(ctx);
  printf("rank %d: %llu passes of the progress thread during init\n", index,
         (unsigned long long)n);
  NT_CHECKF(n < limit,
            "rank %d: the progress thread ran %llu passes (limit %llu)", index,
            (unsigned long long)n, (unsigned long long)limit);
  NT_OK(nexar_barrier(nexar_comm_world(ctx)));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int fails = 0;
  for (int np = 2; np <= 4; np += 2) {
    nt_opts_t o = {.world_size = np, .timeout_ms = 60000};
    char name[32];
    snprintf(name, sizeof name, "np%d", np);
    fails += nt_run_case(&o, worker, np, name);
  }
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
