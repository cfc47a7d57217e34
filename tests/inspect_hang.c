/*
 * The job test_inspect.sh inspects: every rank does one allreduce (the
 * links are up), says "ready", then rank HANG_RANK sleeps HANG_S seconds
 * outside any collective while the others wait for it in the second
 * allreduce (or until the file RELEASE exists, when given); then it joins
 * and all check the sum (0 + 1 + ... + N-1).
 *
 * usage: inspect_hang HANG_RANK HANG_S [RELEASE]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nexar.h"

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s HANG_RANK HANG_S [RELEASE]\n", argv[0]);
    return 2;
  }
  int hang = atoi(argv[1]), secs = atoi(argv[2]);
  nexar_ctx_t *ctx;
  if (nexar_init(NULL, &ctx) < 0) {
    fprintf(stderr, "nexar_init: %s\n", nexar_last_error());
    return 1;
  }
  nexar_comm_t *world = nexar_comm_world(ctx);
  int rank, size;
  nexar_comm_rank(world, &rank);
  nexar_comm_size(world, &size);
  int64_t v = rank, sum = -1;
  int rc = nexar_allreduce(world, &v, &sum, 1, NEXAR_INT64, NEXAR_SUM);
  printf("rank %d: ready\n", rank);
  fflush(stdout);
  for (int t = 0; rank == hang && t < secs * 20; t++) {
    if (argc == 4 && access(argv[3], F_OK) == 0) break;
    usleep(50000);
  }
  if (rc == 0) rc = nexar_allreduce(world, &v, &sum, 1, NEXAR_INT64, NEXAR_SUM);
  if (rc == 0 && sum != (int64_t)size * (size - 1) / 2) rc = -1;
  printf("rank %d: %s sum %lld\n", rank, rc == 0 ? "ok" : "FAILED",
         (long long)sum);
  nexar_finalize(ctx);
  return rc == 0 ? 0 : 1;
}
