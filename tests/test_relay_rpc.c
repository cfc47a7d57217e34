/*
 * Relayed RPC messages above the end-to-end credit (docs/topology.md
 * section 10, rule 7), on a ring of 5 (kregular:2) with
 * NEXAR_MAX_STREAMS=4, minimal windows and NEXAR_RELAY_CREDIT_BYTES=4096:
 * every rank calls the rank two hops ahead around the ring CALLS times at
 * once, each request and response 20000 bytes (about five credited
 * frames), all in one direction, so every link carries relayed RPC frames
 * of two origins. The handler answers each request byte-reversed; both
 * legs are checked bit for bit. Before relayed RPC messages went in
 * credited frames they were cut through: each held a link's RPC stream
 * while waiting for the next one, around the ring (cycle 2), and the calls
 * ran into their deadline.
 */
#include <stdint.h>
#include <stdio.h>

#include "harness.h"
#include "nexar.h"

#define CALLS 8
#define LEN 20000
#define FN 7

static int reverse(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                   void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn;
  if (n > cap) return NEXAR_ERR_INVALID_ARG;
  for (size_t i = 0; i < n; i++)
    ((uint8_t *)resp)[i] = ((const uint8_t *)req)[n - 1 - i];
  *out = n;
  return 0;
}

static int worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *world;
  int rank, size;
  NT_OK(nt_join_world(&ctx, &world, &rank, &size));
  NT_OKC(world, nexar_rpc_register(world, FN, reverse, NULL));
  NT_OKC(world, nexar_barrier(world)); /* every handler is in place */
  static uint8_t out[CALLS][LEN], in[CALLS][LEN];
  nexar_req_t *reqs[CALLS];
  int peer = (rank + 2) % size;
  for (int i = 0; i < CALLS; i++) {
    nt_fill(out[i], LEN, (unsigned)(rank * 100 + i));
    NT_OKC(world, nexar_rpc_icall(world, peer, FN, out[i], LEN, in[i], LEN,
                                  20000, &reqs[i]));
  }
  nexar_status_t st[CALLS];
  NT_OKC(world, nexar_waitall(CALLS, reqs, st));
  for (int i = 0; i < CALLS; i++) {
    NT_CHECKF(st[i].bytes == LEN, "call %d: %zu bytes, not %d", i,
              (size_t)st[i].bytes, LEN);
    int bad = -1;
    for (int k = 0; k < LEN && bad < 0; k++)
      if (in[i][k] != out[i][LEN - 1 - k]) bad = k;
    NT_CHECKF(bad < 0, "call %d to rank %d: response byte %d differs", i, peer,
              bad);
  }
  NT_OKC(world, nexar_barrier(world));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  nt_opts_t o = {
      .world_size = 5,
      .timeout_ms = 60000,
      .env =
          "NEXAR_TOPOLOGY=kregular:2\nNEXAR_MAX_STREAMS=4\n"
          "NEXAR_EAGER_BYTES=1024\nNEXAR_RELAY_WINDOW_BYTES=1024\n"
          "NEXAR_RELAY_CREDIT_BYTES=4096\nNEXAR_OP_TIMEOUT_MS=20000"};
  return nt_run_case(&o, worker, 0, "relayed_rpc_ring") ? 1 : 0;
}
