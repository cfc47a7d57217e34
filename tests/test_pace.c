/*
 * Two ranks of one host that a wake-up left on one CPU (src/core/pace.c).
 * Each rank sets its affinity to the first CPU it may use and straight
 * back, which puts both on that CPU without binding either, then they
 * ping-pong 4-byte messages that carry the sender's CPU. The rank whose
 * yields keep running the other must move to its home CPU within MOVE_BY
 * round trips; the kernel's balancing alone took 10-20 ms here, 700 or
 * more round trips at 14 us each. Afterwards
 * every rank's affinity mask is the one it had: nothing was bound. Then
 * four ranks put on two CPUs as three and one must end up spread evenly
 * (spread_worker).
 * Over shared memory; a host with fewer than two CPUs skips both.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

#define ROUNDS 3000
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
  /* Both start on |first|; rank 0 notes the rounds they were seen
   * together and the first they were apart (the move may even come before
   * the first round ends, while one waits for the other). */
  int together = 0, apart = -1;
  for (int i = 0; i < ROUNDS; i++) {
    int32_t mine = sched_getcpu(), theirs = -1;
    if (rank == 0) {
      NT_OK(nexar_send(w, &mine, 1, NEXAR_INT32, 1, 7));
      NT_OK(nexar_recv(w, &theirs, 1, NEXAR_INT32, 1, 7, NULL));
      mine = sched_getcpu();
      together += mine == theirs;
      if (apart < 0 && mine != theirs) apart = i;
    } else {
      NT_OK(nexar_recv(w, &theirs, 1, NEXAR_INT32, 0, 7, NULL));
      NT_OK(nexar_send(w, &mine, 1, NEXAR_INT32, 0, 7));
    }
  }
  if (rank == 0) {
    printf("apart from round %d; on one CPU in %d of %d rounds\n", apart,
           together, ROUNDS);
    NT_CHECKF(apart >= 0 && apart < MOVE_BY,
              "still on one CPU after %d rounds (apart from round %d)", MOVE_BY,
              apart);
  }
  NT_CHECK(sched_getaffinity(0, sizeof now, &now) == 0);
  NT_CHECKF(CPU_EQUAL(&now, &was), "the affinity mask changed: %d CPUs of %d",
            CPU_COUNT(&now), CPU_COUNT(&was));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* Four ranks put on two CPUs as three and one run 64 B allreduces; over
 * the last SAMPLES of them, each rank notes its CPU after every call. At
 * least half of those moments must find the ranks spread evenly over the
 * CPUs they may use (at most ceil(4 / CPUs) on one). The kernel alone left
 * them as three and one for whole runs on two CPUs (with the move turned
 * off, this case failed in 1 of 3 runs here; the kernel spread them in the
 * others). */
#define SPREAD_OPS 3000
#define SAMPLES 200

static int spread_worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int rank, size;
  NT_OK(nt_join_world(&ctx, &w, &rank, &size));
  cpu_set_t was, one;
  NT_CHECK(sched_getaffinity(0, sizeof was, &was) == 0);
  int cpus = CPU_COUNT(&was);
  if (cpus < 2) {
    if (rank == 0) printf("skipped: %d CPU(s)\n", cpus);
    NT_OK(nexar_finalize(ctx));
    return 0;
  }
  /* Three and one: the last rank on the second CPU, the others on the
   * first, as the kernel left them. */
  int cpu = 0;
  for (int n = rank == size - 1 ? 2 : 1; n; cpu++)
    n -= CPU_ISSET(cpu, &was) ? 1 : 0;
  NT_OK(nexar_barrier(w));
  CPU_ZERO(&one);
  CPU_SET(cpu - 1, &one);
  NT_CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
  NT_CHECK(sched_setaffinity(0, sizeof was, &was) == 0);
  static int32_t mine[SAMPLES], all[4 * SAMPLES];
  float in[16], out[16];
  for (int i = 0; i < 16; i++) in[i] = (float)(rank + i);
  for (int i = 0; i < SPREAD_OPS; i++) {
    NT_OK(nexar_allreduce(w, in, out, 16, NEXAR_FLOAT32, NEXAR_SUM));
    NT_CHECK(out[3] == (float)(size * 3 + size * (size - 1) / 2));
    if (i >= SPREAD_OPS - SAMPLES)
      mine[i - (SPREAD_OPS - SAMPLES)] = sched_getcpu();
  }
  NT_OK(nexar_allgather(w, mine, all, SAMPLES, NEXAR_INT32));
  if (rank == 0) {
    int most = (size + cpus - 1) / cpus, even = 0;
    for (int k = 0; k < SAMPLES; k++) {
      int worst = 0;
      for (int a = 0; a < size; a++) {
        int same = 0;
        for (int b = 0; b < size; b++)
          same += all[b * SAMPLES + k] == all[a * SAMPLES + k];
        if (same > worst) worst = same;
      }
      even += worst <= most;
    }
    printf("spread evenly at %d of %d moments\n", even, SAMPLES);
    NT_CHECKF(even >= SAMPLES / 2,
              "the ranks were spread evenly at only %d of %d moments", even,
              SAMPLES);
  }
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  nt_opts_t o = {.world_size = 2, .timeout_ms = 60000};
  int fails = nt_run_case(&o, worker, 0, "shared_cpu");
  nt_opts_t o4 = {.world_size = 4, .timeout_ms = 60000};
  fails += nt_run_case(&o4, spread_worker, 1, "spread");
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
