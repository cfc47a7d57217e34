/*
 * A program built outside the source tree against an installed nexar
 * (tests/test_install.sh): checks that the header and the library loaded
 * are the same version, then sums rank + 1 over the world and prints
 * "rank R of N: sum S".
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <nexar.h>

int main(void) {
  if (strcmp(nexar_version(), NEXAR_VERSION_STRING) != 0) {
    fprintf(stderr, "header %s, library %s\n", NEXAR_VERSION_STRING,
            nexar_version());
    return 1;
  }
  nexar_ctx_t *ctx;
  int rc = nexar_init(NULL, &ctx);
  if (rc < 0) {
    fprintf(stderr, "nexar_init: %s: %s\n", nexar_err_name(rc),
            nexar_last_error());
    return 1;
  }
  nexar_comm_t *world = nexar_comm_world(ctx);
  int rank, size;
  nexar_comm_rank(world, &rank);
  nexar_comm_size(world, &size);
  int64_t v = rank + 1, sum = 0;
  rc = nexar_allreduce(world, &v, &sum, 1, NEXAR_INT64, NEXAR_SUM);
  if (rc < 0)
    fprintf(stderr, "allreduce: %s\n", nexar_comm_last_error(world));
  else
    printf("rank %d of %d: sum %lld\n", rank, size, (long long)sum);
  int f = nexar_finalize(ctx);
  return rc < 0 || f < 0 ? 1 : 0;
}
