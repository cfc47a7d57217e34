/*
 * Communicators (docs/communicators.md): splits the world into "rows" of
 * two ranks, sums within each row, and keeps the world working alongside.
 *
 *   build/tools/nexar-run -n 4 -- build/examples/split
 */
#include <stdint.h>
#include <stdio.h>

#include "nexar.h"

int main(void) {
  nexar_ctx_t *ctx;
  int rc = nexar_init(NULL, &ctx);
  if (rc < 0) {
    fprintf(stderr, "nexar_init: %s\n", nexar_last_error());
    return 1;
  }
  nexar_comm_t *world = nexar_comm_world(ctx), *row = NULL;
  int rank, size, rrank, rsize;
  nexar_comm_rank(world, &rank);
  nexar_comm_size(world, &size);
  /* Ranks 0,1 form row 0, ranks 2,3 row 1, ...; keys keep world order. */
  rc = nexar_comm_split(world, rank / 2, rank, &row);
  if (rc < 0) {
    fprintf(stderr, "split: %s\n", nexar_comm_last_error(world));
    nexar_finalize(ctx);
    return 1;
  }
  nexar_comm_rank(row, &rrank);
  nexar_comm_size(row, &rsize);
  int64_t v = rank, row_sum = 0, world_sum = 0;
  rc = nexar_allreduce(row, &v, &row_sum, 1, NEXAR_INT64, NEXAR_SUM);
  if (rc == 0)
    rc = nexar_allreduce(world, &v, &world_sum, 1, NEXAR_INT64, NEXAR_SUM);
  if (rc == 0)
    printf(
        "world rank %d/%d: row %d rank %d/%d, row sum %lld, world sum %lld\n",
        rank, size, rank / 2, rrank, rsize, (long long)row_sum,
        (long long)world_sum);
  int frc = nexar_comm_free(&row);
  if (rc == 0) rc = frc;
  if (rc < 0) fprintf(stderr, "rank %d: %s\n", rank, nexar_err_name(rc));
  int f = nexar_finalize(ctx);
  return rc < 0 || f < 0 ? 1 : 0;
}
