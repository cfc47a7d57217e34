/*
 * Sparse topologies (docs/topology.md): joins a ring (kregular:2, set
 * through nexar_config_t unless NEXAR_TOPOLOGY is in the environment), so
 * each process connects to two neighbours only; then every rank sends a
 * message to the rank opposite it on the ring, which the ranks in between
 * relay, and the world runs an allreduce.
 *
 *   build/tools/nexar-run -n 8 -- build/examples/topology
 *   NEXAR_TOPOLOGY=hypercube build/tools/nexar-run -n 8 --
 * build/examples/topology
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nexar.h"

int main(void) {
  nexar_config_t cfg = NEXAR_CONFIG_INIT;
  if (!getenv("NEXAR_TOPOLOGY")) cfg.topology = "kregular:2";
  nexar_ctx_t *ctx;
  int rc = nexar_init(&cfg, &ctx);
  if (rc < 0) {
    fprintf(stderr, "nexar_init: %s\n", nexar_last_error());
    return 1;
  }
  nexar_comm_t *world = nexar_comm_world(ctx);
  int rank, size;
  nexar_comm_rank(world, &rank);
  nexar_comm_size(world, &size);
  int to = (rank + size / 2) % size, from = (rank - size / 2 + size) % size;
  int64_t out = 1000 + rank, in = -1, sum = rank;
  nexar_req_t *reqs[2];
  rc = nexar_irecv(world, &in, 1, NEXAR_INT64, from, 1, &reqs[0]);
  if (rc == 0) rc = nexar_isend(world, &out, 1, NEXAR_INT64, to, 1, &reqs[1]);
  if (rc == 0) rc = nexar_waitall(2, reqs, NULL);
  if (rc == 0)
    rc =
        nexar_allreduce(world, NEXAR_IN_PLACE, &sum, 1, NEXAR_INT64, NEXAR_SUM);
  if (rc == 0)
    printf(
        "rank %d/%d: got %lld from rank %d across the graph; sum of "
        "ranks %lld\n",
        rank, size, (long long)in, from, (long long)sum);
  else
    fprintf(stderr, "rank %d: %s: %s\n", rank, nexar_err_name(rc),
            nexar_comm_last_error(world));
  int f = nexar_finalize(ctx);
  return rc < 0 || f < 0 ? 1 : 0;
}
