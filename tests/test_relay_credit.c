/*
 * End-to-end relay credit and whole unexpected messages (docs/topology.md
 * section 10), on a ring of 5 (kregular:2) with NEXAR_MAX_STREAMS=4 (two
 * data streams per link) and NEXAR_EAGER_BYTES=1024.
 *
 * 1. Unexpected messages above the eager size, the last one first:
 *    rank 0 (two hops away) and rank 1 (a neighbour) each send rank 2
 *    6 messages of 2000 bytes; rank 2 receives only later, the last
 *    message of each origin first (blocking), then the others, so every
 *    message first waits unexpected. Within
 *    NEXAR_RELAY_CREDIT_BYTES=16384 each is let in whole and leaves its
 *    stream; before that the first two of each origin held the last
 *    link's two data streams at the eager size and the program hung.
 * 2. A send waiting for credit ends at its op deadline: with
 *    NEXAR_RELAY_CREDIT_BYTES=4096, NEXAR_UNEXPECTED_BYTES=0 (nothing
 *    beyond the per-origin bounds) and rank 2 receiving nothing, rank 2
 *    lets in whole and detaches 2 of rank 0's 12 messages by the bytes of
 *    those above the eager size, 1 by the bytes of the others (2000 and
 *    its record) and 4 by count, the 8th holds its stream and its credit,
 *    and the rest wait at rank 0 for credit; its nexar_waitall fails
 *    with NEXAR_ERR_TIMEOUT after NEXAR_OP_TIMEOUT_MS, and every process
 *    then passes a barrier and finalizes.
 * 3. Unexpected messages of at most the eager size, more than
 *    NEXAR_MAX_STREAMS of them from one origin, ahead of a relayed one
 *    (relay_stress configuration 0, seed 4: a ring allgather running
 *    ahead of a late rank): rank 1 sends its neighbour rank 2 8 messages
 *    of 100 bytes, which rank 2 receives only later, then tells rank 0,
 *    which sends rank 2 a message through rank 1. Rank 2 receives rank
 *    0's message first. Rank 1's messages detach from their streams
 *    within NEXAR_RELAY_CREDIT_BYTES of that origin's bytes; before,
 *    only NEXAR_MAX_STREAMS (4) did, the 5th and 6th held link 1 -> 2's
 *    two data streams, rank 0's frame waited behind the 7th and 8th at
 *    rank 1, and the receive ended at its op deadline. Over shared
 *    memory and QUIC.
 * 4. Refused messages detach once room comes back: with
 *    NEXAR_RELAY_CREDIT_BYTES=1760 and NEXAR_UNEXPECTED_BYTES=0, rank 1
 *    sends its neighbour rank 2 9 messages of 100 bytes. Rank 2 polls
 *    (nexar_iprobe) until the 8th is in, so
 *    the 1st and 2nd have detached by bytes (each costs its payload and
 *    its record, about 600 bytes; rank 1's empty barrier message, which
 *    arrives among them, fits beside the two but not a third), the 3rd
 *    to 6th by count, and the 7th and 8th, refused, hold link 1 -> 2's
 *    two data streams, the 9th waiting at rank 1.
 *    Rank 2 receives the 1st and 2nd, then the 9th: the 7th and 8th
 *    must detach by the bytes that came back for it to arrive. Before,
 *    nothing looked at them again and the receive ended at its op
 *    deadline. Over shared memory and QUIC.
 * 5. A message above the eager size not let in whole is let in once room
 *    comes back: with NEXAR_RELAY_CREDIT_BYTES=4096 and
 *    NEXAR_UNEXPECTED_BYTES=0, rank 1 sends its
 *    neighbour rank 2 4 messages of 2000 bytes. The 1st and 2nd are let
 *    in whole (topo.whole), the 3rd and 4th are not and hold link
 *    1 -> 2's two data streams at the eager size; rank 1 then tells rank
 *    0, which sends rank 2 a message through rank 1, queued behind them.
 *    Rank 2 polls until the 4th is in, receives the 1st and 2nd, then rank 0's
 *    message: the 3rd and 4th must be let in whole by the bytes that
 *    came back for it to pass. Before, nothing looked at them again and
 *    the receive ended at its op deadline. Over shared memory and QUIC.
 * 6. Beyond the per-origin bounds: with NEXAR_RELAY_CREDIT_BYTES=1760,
 *    rank 1 sends its neighbour rank 2 16 messages of 100 bytes, then
 *    tells rank 0, which sends rank 2 a message through rank 1, queued
 *    behind them. Rank 2 receives rank 0's message first, then rank 1's
 *    in order. The 7th and 8th fit neither per-origin bound; they detach
 *    within NEXAR_UNEXPECTED_BYTES (the process-wide bound) and so do the
 *    rest. Before, they held link 1 -> 2's two data streams, the 9th to
 *    16th and rank 0's frame waited at rank 1, and the receive ended at
 *    its op deadline. Over shared memory and QUIC.
 * 7. Past the process-wide bound a clear error, not a hang: case 6 with
 *    NEXAR_UNEXPECTED_BYTES=0 and rank 2's receive of rank 0's message
 *    posted before rank 1 sends: it ends with NEXAR_ERR_NOMEM, the
 *    communicator's last error naming the setting; rank 2 then receives
 *    rank 1's 16 in order (each refused one leaves its stream when
 *    matched) and rank 0's, bit for bit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "nexar.h"

#define NMSG 12 /* case 1; case 0 sends half as many */
#define LEN 2000
#define NSMALL 8 /* case 2 */
#define SMALL 100
#define NREFUSED 9 /* case 3 */
#define NLARGE 4   /* case 4 */
#define NBEYOND 16 /* cases 5 and 6 */

/* Until rank 1's message |tag| is in: nexar_iprobe, so that no
 * operation waits when cases 2 to 4 pass NEXAR_UNEXPECTED_BYTES=0 (a
 * refused message would fail a waiting probe with NEXAR_ERR_NOMEM). */
static int until_in(nexar_comm_t *world, int tag) {
  int in = 0, rc = NEXAR_OK;
  while (!in && rc == NEXAR_OK) rc = nexar_iprobe(world, 1, tag, &in, NULL);
  return rc;
}

/* Cases 5 and 6: rank 2 receives rank 0's relayed message (filled with
 * 9) into |buf| and checks it. 0, or 1 on a failure. */
static int relayed_from_0(nexar_comm_t *world, uint8_t *buf) {
  NT_OKC(world, nexar_recv(world, buf, SMALL, NEXAR_BYTE, 0, 1, NULL));
  NT_CHECKF(nt_check_fill(buf, SMALL, 9) == SMALL,
            "the relayed message from rank 0 differs");
  return 0;
}

/* Cases 5 and 6 (|tiny|: NEXAR_UNEXPECTED_BYTES=0, rank 2's first
 * receive fails with NEXAR_ERR_NOMEM). 0, or 1 on a failure. */
static int beyond(nexar_comm_t *world, int rank, int tiny) {
  static uint8_t small[NBEYOND + 1][SMALL];
  nexar_req_t *reqs[NBEYOND], *first = NULL;
  if (rank == 2 && tiny) /* posted before rank 1 sends */
    NT_OKC(world,
           nexar_irecv(world, small[NBEYOND], SMALL, NEXAR_BYTE, 0, 1, &first));
  /* Rank 1 sends once rank 2 is ready (a send: NEXAR_ERR_NOMEM ends only
   * receives, probes and collectives, which a barrier here would be). */
  if (rank == 2)
    NT_OKC(world, nexar_send(world, small[0], 1, NEXAR_BYTE, 1, 98));
  if (rank == 1) {
    NT_OKC(world, nexar_recv(world, small[0], 1, NEXAR_BYTE, 2, 98, NULL));
    for (int i = 0; i < NBEYOND; i++) {
      nt_fill(small[i], SMALL, (unsigned)(400 + i));
      NT_OKC(world, nexar_isend(world, small[i], SMALL, NEXAR_BYTE, 2, 40 + i,
                                &reqs[i]));
    }
    NT_OKC(world, nexar_send(world, small[0], 1, NEXAR_BYTE, 0, 99));
    NT_OKC(world, nexar_waitall(NBEYOND, reqs, NULL));
  } else if (rank == 0) { /* after rank 1's: queued behind them */
    NT_OKC(world, nexar_recv(world, small[0], 1, NEXAR_BYTE, 1, 99, NULL));
    nt_fill(small[NBEYOND], SMALL, 9);
    NT_OKC(world, nexar_send(world, small[NBEYOND], SMALL, NEXAR_BYTE, 2, 1));
  } else if (rank == 2) {
    if (tiny) {
      int rc = nexar_wait(&first, NULL);
      NT_CHECKF(rc == NEXAR_ERR_NOMEM, "receive: %s, not NEXAR_ERR_NOMEM",
                nexar_strerror(rc));
      const char *e = nexar_comm_last_error(world);
      NT_CHECKF(strstr(e, "NEXAR_UNEXPECTED_BYTES=0") && strstr(e, "rank 2") &&
                    strstr(e, "process 1"),
                "last error: %s", e);
    } else if (relayed_from_0(world, small[NBEYOND])) {
      return 1;
    }
    for (int i = 0; i < NBEYOND; i++) {
      NT_OKC(world,
             nexar_recv(world, small[i], SMALL, NEXAR_BYTE, 1, 40 + i, NULL));
      NT_CHECKF(nt_check_fill(small[i], SMALL, (unsigned)(400 + i)) == SMALL,
                "message %d from rank 1 differs", i);
    }
    if (tiny && relayed_from_0(world, small[NBEYOND])) return 1;
  }
  return 0;
}

static int worker(int index, void *arg) {
  int c = *(int *)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *world;
  int rank, size;
  NT_OK(nt_join_world(&ctx, &world, &rank, &size));
  (void)index;
  static uint8_t buf[2][NMSG][LEN];
  nexar_req_t *reqs[2 * NMSG];
  int nmsg = c == 0 ? NMSG / 2 : NMSG;
  if (c == 0 && (rank == 0 || rank == 1)) {
    for (int i = 0; i < nmsg; i++) {
      nt_fill(buf[0][i], LEN, (unsigned)(rank * 100 + i));
      NT_OKC(world,
             nexar_isend(world, buf[0][i], LEN, NEXAR_BYTE, 2, i, &reqs[i]));
    }
    NT_OKC(world, nexar_waitall((size_t)nmsg, reqs, NULL));
  } else if (c == 0 && rank == 2) {
    struct timespec ts = {0, 300000000}; /* every message arrives first */
    nanosleep(&ts, NULL);
    /* The last message of each origin first, alone and blocking: the
     * earlier ones must have left their streams for it to pass. */
    for (int src = 0; src < 2; src++)
      NT_OKC(world, nexar_recv(world, buf[src][nmsg - 1], LEN, NEXAR_BYTE, src,
                               nmsg - 1, NULL));
    int n = 0;
    for (int src = 0; src < 2; src++)
      for (int i = nmsg - 2; i >= 0; i--)
        NT_OKC(world, nexar_irecv(world, buf[src][i], LEN, NEXAR_BYTE, src, i,
                                  &reqs[n++]));
    NT_OKC(world, nexar_waitall((size_t)n, reqs, NULL));
    for (int src = 0; src < 2; src++)
      for (int i = 0; i < nmsg; i++)
        NT_CHECKF(
            nt_check_fill(buf[src][i], LEN, (unsigned)(src * 100 + i)) == LEN,
            "message %d from rank %d differs", i, src);
  } else if (c == 2) {
    static uint8_t small[NSMALL + 1][SMALL];
    if (rank == 1) {
      for (int i = 0; i < NSMALL; i++) {
        nt_fill(small[i], SMALL, (unsigned)(100 + i));
        NT_OKC(world, nexar_isend(world, small[i], SMALL, NEXAR_BYTE, 2, 10 + i,
                                  &reqs[i]));
      }
      NT_OKC(world, nexar_waitall(NSMALL, reqs, NULL));
      NT_OKC(world, nexar_send(world, small[0], 1, NEXAR_BYTE, 0, 99));
    } else if (rank == 0) { /* after rank 1's: queued behind them */
      NT_OKC(world, nexar_recv(world, small[0], 1, NEXAR_BYTE, 1, 99, NULL));
      nt_fill(small[NSMALL], SMALL, 7);
      NT_OKC(world, nexar_send(world, small[NSMALL], SMALL, NEXAR_BYTE, 2, 1));
    } else if (rank == 2) {
      NT_OKC(world,
             nexar_recv(world, small[NSMALL], SMALL, NEXAR_BYTE, 0, 1, NULL));
      NT_CHECKF(nt_check_fill(small[NSMALL], SMALL, 7) == SMALL,
                "the relayed message from rank 0 differs");
      for (int i = 0; i < NSMALL; i++) {
        NT_OKC(world,
               nexar_recv(world, small[i], SMALL, NEXAR_BYTE, 1, 10 + i, NULL));
        NT_CHECKF(nt_check_fill(small[i], SMALL, (unsigned)(100 + i)) == SMALL,
                  "message %d from rank 1 differs", i);
      }
    }
  } else if (c == 3 && rank == 1) {
    static uint8_t small[NREFUSED][SMALL];
    for (int i = 0; i < NREFUSED; i++) {
      nt_fill(small[i], SMALL, (unsigned)(200 + i));
      NT_OKC(world, nexar_isend(world, small[i], SMALL, NEXAR_BYTE, 2, 20 + i,
                                &reqs[i]));
    }
    NT_OKC(world, nexar_waitall(NREFUSED, reqs, NULL));
  } else if (c == 3 && rank == 2) {
    static uint8_t small[NREFUSED][SMALL];
    /* The 1st and 2nd, the 9th (after the refused 7th and 8th), the rest. */
    static const int order[NREFUSED] = {0, 1, 8, 2, 3, 4, 5, 6, 7};
    NT_OKC(world, until_in(world, 20 + NREFUSED - 2));
    for (int k = 0; k < NREFUSED; k++) {
      int i = order[k];
      NT_OKC(world,
             nexar_recv(world, small[i], SMALL, NEXAR_BYTE, 1, 20 + i, NULL));
      NT_CHECKF(nt_check_fill(small[i], SMALL, (unsigned)(200 + i)) == SMALL,
                "message %d from rank 1 differs", i);
    }
  } else if (c == 4 && rank == 1) {
    for (int i = 0; i < NLARGE; i++) {
      nt_fill(buf[1][i], LEN, (unsigned)(300 + i));
      NT_OKC(world, nexar_isend(world, buf[1][i], LEN, NEXAR_BYTE, 2, 30 + i,
                                &reqs[i]));
    }
    NT_OKC(world, nexar_send(world, buf[1][0], 1, NEXAR_BYTE, 0, 99));
    NT_OKC(world, nexar_waitall(NLARGE, reqs, NULL));
  } else if (c == 4 && rank == 0) { /* after rank 1's: queued behind them */
    NT_OKC(world, nexar_recv(world, buf[0][0], 1, NEXAR_BYTE, 1, 99, NULL));
    nt_fill(buf[0][1], SMALL, 8);
    NT_OKC(world, nexar_send(world, buf[0][1], SMALL, NEXAR_BYTE, 2, 1));
  } else if (c == 4 && rank == 2) {
    /* The 1st and 2nd, rank 0's, the 3rd and 4th. */
    NT_OKC(world, until_in(world, 30 + NLARGE - 1));
    for (int k = 0; k < NLARGE + 1; k++) {
      int i = k < 2 ? k : k - 1;
      if (k == 2) {
        NT_OKC(world,
               nexar_recv(world, buf[0][0], SMALL, NEXAR_BYTE, 0, 1, NULL));
        NT_CHECKF(nt_check_fill(buf[0][0], SMALL, 8) == SMALL,
                  "the relayed message from rank 0 differs");
        continue;
      }
      NT_OKC(world,
             nexar_recv(world, buf[1][i], LEN, NEXAR_BYTE, 1, 30 + i, NULL));
      NT_CHECKF(nt_check_fill(buf[1][i], LEN, (unsigned)(300 + i)) == LEN,
                "message %d from rank 1 differs", i);
    }
  } else if (c >= 5) {
    if (beyond(world, rank, c == 6)) return 1;
  } else if (c == 1 && rank == 0) {
    for (int i = 0; i < nmsg; i++)
      NT_OKC(world,
             nexar_isend(world, buf[0][i], LEN, NEXAR_BYTE, 2, i, &reqs[i]));
    int rc = nexar_waitall((size_t)nmsg, reqs, NULL);
    NT_CHECKF(rc == NEXAR_ERR_TIMEOUT, "waitall: %s, not NEXAR_ERR_TIMEOUT",
              nexar_strerror(rc));
  } else if (c == 1) {
    struct timespec ts = {2, 0}; /* rank 0's deadline passes first */
    nanosleep(&ts, NULL);
  }
  NT_OKC(world, nexar_barrier(world));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

#define RING NT_RELAY_RING

int main(void) {
  nt_opts_t whole = {.world_size = 5,
                     .timeout_ms = 60000,
                     .env = RING
                     "NEXAR_RELAY_CREDIT_BYTES=16384\n"
                     "NEXAR_OP_TIMEOUT_MS=15000"};
  nt_opts_t wait = {.world_size = 5,
                    .timeout_ms = 60000,
                    .env = RING
                    "NEXAR_RELAY_CREDIT_BYTES=4096\n"
                    "NEXAR_UNEXPECTED_BYTES=0\n"
                    "NEXAR_OP_TIMEOUT_MS=1500"};
  nt_opts_t small = {.world_size = 5,
                     .timeout_ms = 60000,
                     .env = RING "NEXAR_OP_TIMEOUT_MS=5000"};
  nt_opts_t small_quic = small;
  small_quic.env = RING "NEXAR_OP_TIMEOUT_MS=5000\nNEXAR_TRANSPORT=quic";
  nt_opts_t refused = {.world_size = 5,
                       .timeout_ms = 60000,
                       .env = RING
                       "NEXAR_RELAY_CREDIT_BYTES=1760\n"
                       "NEXAR_UNEXPECTED_BYTES=0\n"
                       "NEXAR_OP_TIMEOUT_MS=5000"};
  nt_opts_t refused_quic = refused;
  refused_quic.env = RING
      "NEXAR_RELAY_CREDIT_BYTES=1760\nNEXAR_UNEXPECTED_BYTES=0\n"
      "NEXAR_OP_TIMEOUT_MS=5000\nNEXAR_TRANSPORT=quic";
  nt_opts_t large = {.world_size = 5,
                     .timeout_ms = 60000,
                     .env = RING
                     "NEXAR_RELAY_CREDIT_BYTES=4096\n"
                     "NEXAR_UNEXPECTED_BYTES=0\n"
                     "NEXAR_OP_TIMEOUT_MS=5000"};
  nt_opts_t large_quic = large;
  large_quic.env = RING
      "NEXAR_RELAY_CREDIT_BYTES=4096\nNEXAR_UNEXPECTED_BYTES=0\n"
      "NEXAR_OP_TIMEOUT_MS=5000\nNEXAR_TRANSPORT=quic";
#define BEYOND RING "NEXAR_RELAY_CREDIT_BYTES=1760\nNEXAR_OP_TIMEOUT_MS=5000\n"
  nt_opts_t beyond = {.world_size = 5, .timeout_ms = 60000, .env = BEYOND};
  nt_opts_t beyond_quic = beyond;
  beyond_quic.env = BEYOND "NEXAR_TRANSPORT=quic";
  nt_opts_t past = beyond;
  past.env = BEYOND "NEXAR_UNEXPECTED_BYTES=0";
  int fails = nt_run_case(&whole, worker, 0, "unexpected_whole_reverse");
  fails += nt_run_case(&wait, worker, 1, "credit_wait_deadline");
  fails += nt_run_case(&small, worker, 2, "unexpected_small_over_count");
  fails +=
      nt_run_case(&small_quic, worker, 2, "unexpected_small_over_count_quic");
  fails += nt_run_case(&refused, worker, 3, "refused_detach_on_room");
  fails += nt_run_case(&refused_quic, worker, 3, "refused_detach_on_room_quic");
  fails += nt_run_case(&large, worker, 4, "large_whole_on_room");
  fails += nt_run_case(&large_quic, worker, 4, "large_whole_on_room_quic");
  fails += nt_run_case(&beyond, worker, 5, "unexpected_beyond_origin_bounds");
  fails += nt_run_case(&beyond_quic, worker, 5,
                       "unexpected_beyond_origin_bounds_quic");
  fails += nt_run_case(&past, worker, 6, "unexpected_past_process_bound");
  return fails ? 1 : 0;
}
