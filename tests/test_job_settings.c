/*
 * Settings every member shares (docs/configuration.md, "Settings the job
 * shares"): NEXAR_EAGER_BYTES, NEXAR_RELAY_CREDIT_BYTES and NEXAR_SEG_BYTES
 * cut and number transfers on both ends (docs/topology.md section 10,
 * rules 5 to 7), so one rank with other values broke relayed traffic.
 * At formation every member adopts rank 0's values (the seed's roster
 * carries them), logged at INFO where they replace its own.
 *
 * On a ring of 5 (kregular:2, two data streams per link, eager size and
 * relay window 1024, credit 4096, segments 4096), one rank sets an eager
 * size, credit, segment and relay window of 8192, 65536, 8192 and 8192:
 * rank 3 (case 1: it adopts rank 0's) or rank 0 (case 2: every other rank
 * adopts rank 0's, and raises its relay window to the eager size). Each
 * case runs an allreduce of 6000 int64, an allgather of 900 int64 per
 * rank and an alltoall of 700 int64 per pair (steps above the eager size,
 * relayed, cut into credited pieces), then a 20000-byte message from
 * every rank to the rank two hops ahead, unexpected when it arrives, all
 * checked bit for bit. Case 3: rank 3 differs, point-to-point only: four
 * 20000-byte messages from every rank to the rank two hops ahead (rank 3
 * relays rank 2's to rank 4), received last first after a barrier.
 * NEXAR_TRANSPORT=quic (ctest test_job_settings_quic) runs the same over
 * QUIC. Before (main at 79e8098) cases 1 and 2 failed with a false
 * NEXAR_ERR_MISMATCH ("rank 3 sent 8192 bytes in step 0, rank 4 expected
 * 4096") and case 3 hung until the 10 s op deadline.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "nexar.h"

#define N_AR 6000
#define N_AG 900
#define N_A2A 700
#define LEN 20000
#define NMSG 4

static int worker(int index, void *arg) {
  int odd = *(int *)arg % 10; /* the rank whose settings differ */
  bool p2p_only = *(int *)arg >= 10;
  if (index == odd) {
    setenv("NEXAR_EAGER_BYTES", "8192", 1);
    setenv("NEXAR_RELAY_CREDIT_BYTES", "65536", 1);
    setenv("NEXAR_SEG_BYTES", "8192", 1);
    setenv("NEXAR_RELAY_WINDOW_BYTES", "8192", 1);
  }
  nexar_ctx_t *ctx;
  nexar_comm_t *world;
  int rank, size;
  NT_OK(nt_join_world(&ctx, &world, &rank, &size));
  static int64_t in[N_AR], out[N_AR], ag[5 * N_AG], a2a[2][5 * N_A2A];
  for (int i = 0; i < N_AR; i++) in[i] = (int64_t)rank * 1000003 + i;
  if (p2p_only) goto p2p;
  NT_OKC(world, nexar_allreduce(world, in, out, N_AR, NEXAR_INT64, NEXAR_SUM));
  for (int i = 0; i < N_AR; i++)
    NT_CHECKF(out[i] == (int64_t)10 * 1000003 + (int64_t)size * i,
              "allreduce element %d: %lld", i, (long long)out[i]);
  NT_OKC(world, nexar_allgather(world, in, ag, N_AG, NEXAR_INT64));
  for (int r = 0; r < size; r++)
    for (int i = 0; i < N_AG; i++)
      NT_CHECKF(ag[r * N_AG + i] == (int64_t)r * 1000003 + i,
                "allgather block %d element %d differs", r, i);
  for (int j = 0; j < size * N_A2A; j++) a2a[0][j] = rank * 100000 + j;
  NT_OKC(world, nexar_alltoall(world, a2a[0], a2a[1], N_A2A, NEXAR_INT64));
  for (int r = 0; r < size; r++)
    for (int i = 0; i < N_A2A; i++)
      NT_CHECKF(a2a[1][r * N_A2A + i] == r * 100000 + rank * N_A2A + i,
                "alltoall block from %d element %d differs", r, i);
p2p:;
  /* NMSG messages to the rank two hops ahead, received last first. */
  static uint8_t msg[2][NMSG][LEN];
  nexar_req_t *req[NMSG];
  for (int i = 0; i < NMSG; i++) {
    nt_fill(msg[0][i], LEN, (unsigned)(rank * 10 + i));
    NT_OKC(world, nexar_isend(world, msg[0][i], LEN, NEXAR_BYTE,
                              (rank + 2) % size, i, &req[i]));
  }
  NT_OKC(world, nexar_barrier(world)); /* every message sent before a recv */
  int from = (rank + size - 2) % size;
  for (int i = NMSG - 1; i >= 0; i--) {
    NT_OKC(world, nexar_recv(world, msg[1][i], LEN, NEXAR_BYTE, from, i, NULL));
    NT_CHECKF(nt_check_fill(msg[1][i], LEN, (unsigned)(from * 10 + i)) == LEN,
              "message %d from rank %d differs", i, from);
  }
  NT_OKC(world, nexar_waitall(NMSG, req, NULL));
  NT_OKC(world, nexar_barrier(world));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  nt_opts_t o = {.world_size = 5,
                 .timeout_ms = 60000,
                 .env = NT_RELAY_RING
                 "NEXAR_RELAY_CREDIT_BYTES=4096\n"
                 "NEXAR_SEG_BYTES=4096\n"
                 "NEXAR_OP_TIMEOUT_MS=10000"};
  int fails = nt_run_case(&o, worker, 3, "rank3_differs");
  fails += nt_run_case(&o, worker, 0, "rank0_differs");
  fails += nt_run_case(&o, worker, 13, "rank3_differs_p2p");
  return fails ? 1 : 0;
}
