/*
 * Two ranks of one host that a wake-up left on one CPU (src/core/pace.c).
 * Each rank sets its affinity to the first CPU it may use and straight
 * back, which puts both on that CPU without binding either, then they
 * ping-pong 4-byte messages that carry the sender's CPU. Once both are
 * seen on one CPU, the rank whose yields keep running the other must move
 * to its home CPU within MOVE_BY round trips; the kernel's balancing alone
 * took 10-20 ms here, 700 or more round trips at 14 us each. Afterwards
 * every rank's affinity mask is the one it had: nothing was bound. Over
 * shared memory; a host with fewer than two CPUs skips it.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

#define ROUNDS 3000
#define SETTLE 50   /* rounds within which both must share a CPU */
#define MOVE_BY 300 /* rounds within which one of them must have moved */

static int worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int rank;
  NT_OK(nt_join_world(&ctx, &w, &rank, NULL));
  cpu_set_t was, one, now;
  NT_CHECK(sched_getaffinity(0, sizeof was, &was) == 0);
  if (CPU_COUNT(&was) < 2) {
    if (rank == 0) printf("skipped: %d CPU(s)\n", CPU_COUNT(&was));
    NT_OK(nexar_finalize(ctx));
    return 0;
  }
  int first = 0;
  while (!CPU_ISSET(first, &was)) first++;
  NT_OK(nexar_barrier(w));
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  NT_CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
  NT_CHECK(sched_setaffinity(0, sizeof was, &was) == 0);
  int together = -1, apart = -1;
  for (int i = 0; i < ROUNDS; i++) {
    int32_t mine = sched_getcpu(), theirs = -1;
    if (rank == 0) {
      NT_OK(nexar_send(w, &mine, 1, NEXAR_INT32, 1, 7));
      NT_OK(nexar_recv(w, &theirs, 1, NEXAR_INT32, 1, 7, NULL));
      mine = sched_getcpu();
      if (together < 0 && mine == theirs) together = i;
      if (together >= 0 && apart < 0 && mine != theirs) apart = i;
    } else {
      NT_OK(nexar_recv(w, &theirs, 1, NEXAR_INT32, 0, 7, NULL));
      NT_OK(nexar_send(w, &mine, 1, NEXAR_INT32, 0, 7));
    }
  }
  if (rank == 0) {
    printf("on one CPU from round %d, apart from round %d\n", together, apart);
    NT_CHECKF(together >= 0 && together < SETTLE,
              "the ranks were not on one CPU within %d rounds (from %d)",
              SETTLE, together);
    NT_CHECKF(apart >= 0 && apart - together < MOVE_BY,
              "still on one CPU %d rounds after round %d (apart from %d)",
              MOVE_BY, together, apart);
  }
  NT_CHECK(sched_getaffinity(0, sizeof now, &now) == 0);
  NT_CHECKF(CPU_EQUAL(&now, &was), "the affinity mask changed: %d CPUs of %d",
            CPU_COUNT(&now), CPU_COUNT(&was));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  nt_opts_t o = {.world_size = 2, .timeout_ms = 60000};
  int fails = nt_run_case(&o, worker, 0, "shared_cpu");
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
