/*
 * Two ranks of one host that a wake-up left on one CPU (src/core/pace.c).
 * Each rank sets its affinity to the first CPU it may use and straight
 * back, which puts both on that CPU without binding either, then they
 * ping-pong 4-byte messages that carry the sender's CPU. Once both are
 * seen on one CPU, the rank whose yields keep running the other must move
 * to its home CPU within MOVE_BY round trips; the kernel's balancing alone
 * took 10-20 ms here, 700 or more round trips at 14 us each. Where the
 * kernel splits them at once (another process busy on that CPU), they are
 * put together again, up to ATTEMPTS times. Afterwards every rank's
 * affinity mask is the one it had: nothing was bound.
 *
 * crowded: four ranks on two CPUs (each limits its mask to the first two it
 * may use before it starts), all put on the first. Ranks 0 and 1 have the
 * first as home, 2 and 3 the second (cluster/host.c): within MOVE_BY
 * allgathers of their CPUs every rank must be seen at home in one round,
 * which the kernel's balancing alone gives by chance at best (it splits
 * them two and two, but not by rank). Over shared memory; a host with
 * fewer than two CPUs skips both.
 */
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

#define ROUNDS 3000
#define SETTLE 50   /* rounds within which both must share a CPU */
#define MOVE_BY 300 /* rounds within which one of them must have moved */
#define ATTEMPTS 5  /* times both are put on one CPU */

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
  int together = -1, apart = -1;
  for (int attempt = 0;; attempt++) {
    NT_OK(nexar_barrier(w));
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    NT_CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    NT_CHECK(sched_setaffinity(0, sizeof was, &was) == 0);
    together = apart = -1;
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
    /* The kernel may split them at once when another process keeps a CPU
     * busy (ctest runs two tests at a time): then nothing was tested, and
     * they are put together again, at most ATTEMPTS times. */
    int32_t again = rank == 0 && (together < 0 || together >= SETTLE) &&
                    attempt + 1 < ATTEMPTS;
    if (rank == 0) {
      if (again) printf("not on one CPU within %d rounds: again\n", SETTLE);
      NT_OK(nexar_send(w, &again, 1, NEXAR_INT32, 1, 8));
    } else {
      NT_OK(nexar_recv(w, &again, 1, NEXAR_INT32, 0, 8, NULL));
    }
    if (!again) break;
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

/* The first two CPUs of |set| in *a and *b; false when it has fewer. */
static bool first_two(const cpu_set_t *set, int *a, int *b) {
  *a = *b = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && *b < 0; cpu++) {
    if (!CPU_ISSET(cpu, set)) continue;
    if (*a < 0)
      *a = cpu;
    else
      *b = cpu;
  }
  return *b >= 0;
}

static int crowded(int index, void *arg) {
  (void)index;
  (void)arg;
  cpu_set_t all, two, one, now;
  int a, b;
  NT_CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
  bool skip = !first_two(&all, &a, &b);
  if (!skip) {
    CPU_ZERO(&two);
    CPU_SET(a, &two);
    CPU_SET(b, &two);
    NT_CHECK(sched_setaffinity(0, sizeof two, &two) == 0);
  }
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int rank;
  NT_OK(nt_join_world(&ctx, &w, &rank, NULL));
  if (skip) {
    if (rank == 0) printf("skipped: %d CPU(s)\n", CPU_COUNT(&all));
    NT_OK(nexar_finalize(ctx));
    return 0;
  }
  NT_OK(nexar_barrier(w));
  CPU_ZERO(&one);
  CPU_SET(a, &one);
  NT_CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
  NT_CHECK(sched_setaffinity(0, sizeof two, &two) == 0);
  int home_round = -1;
  for (int i = 0; i < MOVE_BY && home_round < 0; i++) {
    int32_t mine = sched_getcpu(), cpus[4];
    NT_OK(nexar_allgather(w, &mine, cpus, 1, NEXAR_INT32));
    bool home = true;
    for (int r = 0; r < 4; r++) home = home && cpus[r] == (r < 2 ? a : b);
    if (home) home_round = i;
  }
  if (rank == 0) printf("every rank at home from round %d\n", home_round);
  NT_CHECKF(home_round >= 0, "not every rank was at home within %d rounds",
            MOVE_BY);
  NT_CHECK(sched_getaffinity(0, sizeof now, &now) == 0);
  NT_CHECKF(CPU_EQUAL(&now, &two), "the affinity mask changed: %d CPUs of 2",
            CPU_COUNT(&now));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  nt_opts_t o = {.world_size = 2, .timeout_ms = 60000};
  int fails = nt_run_case(&o, worker, 0, "shared_cpu");
  nt_opts_t c = {.world_size = 4, .timeout_ms = 60000};
  fails += nt_run_case(&c, crowded, 0, "crowded");
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
