/*
 * Rendezvous of relayed messages above the end-to-end credit
 * (docs/topology.md section 10), on a ring of 5 (kregular:2) with
 * NEXAR_MAX_STREAMS=4 (two data streams per link), NEXAR_EAGER_BYTES=1024
 * and NEXAR_RELAY_CREDIT_BYTES=4096: every message below is 5 to 20 times
 * the credit and travels two hops.
 *
 * Rank 0 sends rank 2 four messages of 20000 bytes (the third one
 * synchronous) and rank 2 sends rank 0 four back; each receiver waits
 * until all have arrived, probes the third (its status gives the whole
 * length), receives it first (blocking), then the first two in reverse,
 * then the fourth into a buffer too small for it (NEXAR_ERR_TRUNCATE, the
 * buffer's bytes right). Four unmatched messages per origin stay within
 * the unexpected store's bound (NEXAR_MAX_STREAMS first parts). Before the
 * rendezvous the first two unexpected messages held the last link's two
 * data streams and the program hung.
 * Case 2: a rendezvous send that no receive matches ends at its op
 * deadline (NEXAR_ERR_TIMEOUT, it waits for the clear-to-send), and every
 * process then passes a barrier and finalizes.
 * Case 3: vectored sends (nexar_isendv, entries of uneven sizes) of three
 * 20000-byte messages each way, unexpected, received last-first, one into
 * a contiguous buffer and two with nexar_recvv split differently, bit for
 * bit. Before vectored sends went by rendezvous they were cut through:
 * the first two held the last link's two data streams and it hung.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "harness.h"
#include "nexar.h"

#define NMSG 3
#define LEN 20000
#define SHORT 5000

static int worker(int index, void *arg) {
  int c = *(int *)arg;
  (void)index;
  nexar_ctx_t *ctx;
  nexar_comm_t *world;
  int rank, size;
  NT_OK(nt_join_world(&ctx, &world, &rank, &size));
  static uint8_t out[NMSG + 1][LEN], in[NMSG + 1][LEN];
  nexar_req_t *reqs[NMSG + 1];
  if (c == 1 && rank == 0) {
    int rc = nexar_send(world, out[0], LEN, NEXAR_BYTE, 2, 0);
    NT_CHECKF(rc == NEXAR_ERR_TIMEOUT, "unmatched send: %s, not a timeout",
              nexar_strerror(rc));
  } else if (c == 1) {
    struct timespec ts = {2, 0}; /* rank 0's deadline passes first */
    nanosleep(&ts, NULL);
  } else if (rank == 0 || rank == 2) {
    int peer = 2 - rank;
    for (int i = 0; i <= NMSG; i++) {
      nt_fill(out[i], LEN, (unsigned)(rank * 100 + i));
      if (i == NMSG - 1)
        NT_OKC(world,
               nexar_issend(world, out[i], LEN, NEXAR_BYTE, peer, i, &reqs[i]));
      else
        NT_OKC(world,
               nexar_isend(world, out[i], LEN, NEXAR_BYTE, peer, i, &reqs[i]));
    }
    struct timespec ts = {0, 300000000}; /* every first part arrives */
    nanosleep(&ts, NULL);
    nexar_status_t st;
    NT_OKC(world, nexar_probe(world, peer, NMSG - 1, &st));
    NT_CHECKF(st.bytes == LEN, "probe: %zu bytes, not %d", (size_t)st.bytes,
              LEN);
    NT_OKC(world, nexar_recv(world, in[NMSG - 1], LEN, NEXAR_BYTE, peer,
                             NMSG - 1, &st));
    NT_CHECKF(st.bytes == LEN && st.tag == NMSG - 1 && st.source == peer,
              "recv status: %zu bytes tag %d source %d", (size_t)st.bytes,
              st.tag, st.source);
    nexar_req_t *rr[NMSG];
    int n = 0;
    for (int i = NMSG - 2; i >= 0; i--)
      NT_OKC(world,
             nexar_irecv(world, in[i], LEN, NEXAR_BYTE, peer, i, &rr[n++]));
    NT_OKC(world, nexar_waitall((size_t)n, rr, NULL));
    int rc = nexar_recv(world, in[NMSG], SHORT, NEXAR_BYTE, peer, NMSG, &st);
    NT_CHECKF(rc == NEXAR_ERR_TRUNCATE, "short recv: %s, not truncated",
              nexar_strerror(rc));
    NT_CHECKF(
        nt_check_fill(in[NMSG], SHORT, (unsigned)(peer * 100 + NMSG)) == SHORT,
        "truncated message differs");
    for (int i = 0; i < NMSG; i++)
      NT_CHECKF(nt_check_fill(in[i], LEN, (unsigned)(peer * 100 + i)) == LEN,
                "message %d from rank %d differs", i, peer);
    NT_OKC(world, nexar_waitall(NMSG + 1, reqs, NULL));
  }
  NT_OKC(world, nexar_barrier(world));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* Entry |k| of a list over |buf| (|sender|: the send side's split); the
 * four entries cover LEN bytes in order. */
static nexar_iov_t entry(uint8_t *buf, int k, bool sender) {
  static const size_t cut[2][4] = {{1, 4999, 11000, 4000}, {7000, 3, 12996, 1}};
  size_t off = 0;
  for (int j = 0; j < k; j++) off += cut[sender][j];
  return (nexar_iov_t){buf + off, cut[sender][k]};
}

static int worker_v(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *world;
  int rank, size;
  NT_OK(nt_join_world(&ctx, &world, &rank, &size));
  static uint8_t out[NMSG][LEN], in[NMSG][LEN];
  if (rank == 0 || rank == 2) {
    int peer = 2 - rank;
    nexar_req_t *reqs[NMSG], *rr[NMSG];
    for (int i = 0; i < NMSG; i++) {
      nt_fill(out[i], LEN, (unsigned)(rank * 100 + i));
      nexar_iov_t v[4];
      for (int k = 0; k < 4; k++) v[k] = entry(out[i], k, true);
      NT_OKC(world, nexar_isendv(world, v, 4, peer, i, &reqs[i]));
    }
    struct timespec ts = {0, 300000000}; /* every first part arrives */
    nanosleep(&ts, NULL);
    /* The last first, blocking: the first two must have left the link. */
    for (int i = NMSG - 1; i >= 0; i--) {
      nexar_iov_t v[4];
      for (int k = 0; k < 4; k++) v[k] = entry(in[i], k, false);
      if (i == NMSG - 1)
        NT_OKC(world, nexar_recvv(world, v, 4, peer, i, NULL));
      else if (i == 0)
        NT_OKC(world,
               nexar_irecv(world, in[i], LEN, NEXAR_BYTE, peer, i, &rr[i]));
      else
        NT_OKC(world, nexar_irecvv(world, v, 4, peer, i, &rr[i]));
    }
    rr[NMSG - 1] = NULL;
    NT_OKC(world, nexar_waitall(NMSG, rr, NULL));
    for (int i = 0; i < NMSG; i++)
      NT_CHECKF(nt_check_fill(in[i], LEN, (unsigned)(peer * 100 + i)) == LEN,
                "vectored message %d from rank %d differs", i, peer);
    NT_OKC(world, nexar_waitall(NMSG, reqs, NULL));
  }
  NT_OKC(world, nexar_barrier(world));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

#define RING NT_RELAY_RING "NEXAR_RELAY_CREDIT_BYTES=4096\n"

int main(void) {
  nt_opts_t o = {.world_size = 5,
                 .timeout_ms = 60000,
                 .env = RING "NEXAR_OP_TIMEOUT_MS=15000"};
  nt_opts_t wait = {.world_size = 5,
                    .timeout_ms = 60000,
                    .env = RING "NEXAR_OP_TIMEOUT_MS=1500"};
  int fails = nt_run_case(&o, worker, 0, "rendezvous_reverse");
  fails += nt_run_case(&wait, worker, 1, "rendezvous_unmatched_deadline");
  fails += nt_run_case(&o, worker_v, 0, "rendezvous_vectored_reverse");
  return fails ? 1 : 0;
}
