/*
 * Relayed RPC messages above the end-to-end credit (docs/topology.md
 * section 10, rule 7), on a ring of 5 (kregular:2) with
 * NEXAR_MAX_STREAMS=4, minimal windows and NEXAR_RELAY_CREDIT_BYTES=4096:
 * every rank calls the rank two hops ahead around the ring CALLS times at
 * once, each request and response 20000 bytes (about five credited
 * frames), all in one direction, so every link carries relayed RPC frames
 * of two origins. The handler answers each request byte-reversed; both
 * legs are checked bit for bit, and one more call with a 5000-byte
 * response buffer ends NEXAR_ERR_TRUNCATE with the full length and the
 * buffer's bytes right. Before relayed RPC messages went in credited
 * frames they were cut through: each held a link's RPC stream while
 * waiting for the next one, around the ring (cycle 2), and the calls ran
 * into their deadline.
 * Case 2: NEXAR_RPC_QUEUE=1 and a slow handler, so the callee refuses most
 * of the calls (NEXAR_ERR_RPC_BUSY) after their first part: the later
 * parts of each refused request are dropped, and the calls that were
 * taken, and one more call each afterwards, arrive bit for bit.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "harness.h"
#include "nexar.h"

#define CALLS 8
#define LEN 20000
#define FN 7
#define SHORT 5000

static int reverse(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                   void *resp, size_t cap, size_t *out) {
  (void)caller, (void)fn;
  if (n > cap) return NEXAR_ERR_INVALID_ARG;
  if (ud) { /* case 2: keep the service queue full a while */
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  for (size_t i = 0; i < n; i++)
    ((uint8_t *)resp)[i] = ((const uint8_t *)req)[n - 1 - i];
  *out = n;
  return 0;
}

/* Whether the first |n| bytes of response |in| are request |out|
 * reversed (LEN bytes); -1, or the first byte that differs. */
static int first_bad(const uint8_t *in, const uint8_t *out, int n) {
  for (int k = 0; k < n; k++)
    if (in[k] != out[LEN - 1 - k]) return k;
  return -1;
}

static int worker(int index, void *arg) {
  (void)index;
  int c = *(int *)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *world;
  int rank, size;
  NT_OK(nt_join_world(&ctx, &world, &rank, &size));
  NT_OKC(world, nexar_rpc_register(world, FN, reverse, c ? world : NULL));
  NT_OKC(world, nexar_barrier(world)); /* every handler is in place */
  static uint8_t out[CALLS + 1][LEN], in[CALLS + 1][LEN];
  nexar_req_t *reqs[CALLS + 1];
  int peer = (rank + 2) % size;
  for (int i = 0; i <= CALLS; i++) {
    nt_fill(out[i], LEN, (unsigned)(rank * 100 + i));
    NT_OKC(world, nexar_rpc_icall(world, peer, FN, out[i], LEN, in[i],
                                  i < CALLS ? LEN : SHORT, 20000, &reqs[i]));
  }
  int taken = 0;
  for (int i = 0; i <= CALLS; i++) {
    nexar_status_t st;
    int rc = nexar_wait(&reqs[i], &st);
    if (c && rc == NEXAR_ERR_RPC_BUSY) continue;
    NT_CHECKF(rc == (i < CALLS ? NEXAR_OK : NEXAR_ERR_TRUNCATE),
              "call %d to rank %d: %s", i, peer, nexar_strerror(rc));
    NT_CHECKF(st.bytes == LEN, "call %d: %zu bytes, not %d", i,
              (size_t)st.bytes, LEN);
    int bad = first_bad(in[i], out[i], i < CALLS ? LEN : SHORT);
    NT_CHECKF(bad < 0, "call %d to rank %d: response byte %d differs", i, peer,
              bad);
    taken++;
  }
  NT_CHECKF(taken > 0, "no call to rank %d was taken", peer);
  NT_OKC(world, nexar_barrier(world));
  if (c) { /* the lane still works after the dropped parts */
    size_t got = 0;
    NT_OKC(world, nexar_rpc_call(world, peer, FN, out[0], LEN, in[0], LEN, &got,
                                 20000));
    NT_CHECKF(got == LEN && first_bad(in[0], out[0], LEN) < 0,
              "last call to rank %d: %zu bytes or bytes differ", peer, got);
    NT_OKC(world, nexar_barrier(world));
  }
  NT_OK(nexar_finalize(ctx));
  return 0;
}

#define RING \
  NT_RELAY_RING "NEXAR_RELAY_CREDIT_BYTES=4096\nNEXAR_OP_TIMEOUT_MS=20000\n"

int main(void) {
  nt_opts_t o = {.world_size = 5, .timeout_ms = 60000, .env = RING};
  nt_opts_t busy = {
      .world_size = 5, .timeout_ms = 60000, .env = RING "NEXAR_RPC_QUEUE=1"};
  int fails = nt_run_case(&o, worker, 0, "relayed_rpc_ring");
  fails += nt_run_case(&busy, worker, 1, "relayed_rpc_busy");
  return fails ? 1 : 0;
}
