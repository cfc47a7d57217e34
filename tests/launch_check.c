/*
 * launch_check: the program the launcher tests start under each scheduler
 * (test_launchers.sh, test_mpirun.sh, test_slurm.sh). It joins with
 * nexar_init(NULL) and nothing but the launcher's environment, runs an
 * allreduce of 1000 doubles (element i of rank r: r * 1000 + i) and a
 * sum of the local ranks, checks both bit for bit, and prints
 *
 *   launch_check: rank R of W, local L of S, allreduce ok
 *
 * Exit status 0 when every check held, 1 otherwise (the reason printed).
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "nexar.h"

#define N 1000

int main(void) {
  nexar_ctx_t *ctx;
  int rc = nexar_init(NULL, &ctx);
  if (rc != NEXAR_OK) {
    fprintf(stderr, "launch_check: nexar_init: %s: %s\n", nexar_strerror(rc),
            nexar_last_error());
    return 1;
  }
  nexar_comm_t *w = nexar_comm_world(ctx);
  int rank, size, lr, ls;
  nexar_comm_rank(w, &rank);
  nexar_comm_size(w, &size);
  nexar_local_rank(ctx, &lr, &ls);
  static double v[N];
  for (int i = 0; i < N; i++) v[i] = rank * 1000.0 + i;
  int bad = 0;
  rc = nexar_allreduce(w, NEXAR_IN_PLACE, v, N, NEXAR_FLOAT64, NEXAR_SUM);
  /* Sum over r of (1000 r + i): exact in double at these sizes. */
  for (int i = 0; rc == NEXAR_OK && i < N; i++)
    if (v[i] != 1000.0 * size * (size - 1) / 2 + (double)i * size) bad++;
  /* Local ranks: on each host 0 .. S-1, so the world sums S(S-1)/2 per
   * host; checked as: every local rank is below its local size. */
  int32_t ok = lr >= 0 && lr < ls, all = 0;
  if (rc == NEXAR_OK)
    rc = nexar_allreduce(w, &ok, &all, 1, NEXAR_INT32, NEXAR_SUM);
  if (rc != NEXAR_OK || bad || all != size) {
    fprintf(stderr,
            "launch_check: rank %d: allreduce %s, %d wrong values, %d of %d "
            "local ranks in range\n",
            rank, nexar_strerror(rc), bad, all, size);
    nexar_finalize(ctx);
    return 1;
  }
  printf("launch_check: rank %d of %d, local %d of %d, allreduce ok\n", rank,
         size, lr, ls);
  fflush(stdout);
  return nexar_finalize(ctx) == NEXAR_OK ? 0 : 1;
}
