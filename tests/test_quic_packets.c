/*
 * The sizes of a QUIC link's packets on loopback (src/transport/quic_tx.c,
 * packet_max). Until a connection's handshake is confirmed, its packets
 * stay at an unmeasured path's size (1452 bytes): ngtcp2 pads a datagram
 * that holds an Initial packet to the whole buffer it is given, and with
 * loopback's 65,000-byte packets every process sent 65,000-byte Initials.
 * At 256 ranks on 2 CPUs those and their retransmissions filled the
 * starved seed's 16 MiB receive buffer (1,386 datagrams dropped in one
 * start), the dropped handshakes backed off exponentially, and 119 workers
 * sat silent until the seed's 60 s deadline failed the job
 * (docs/performance.md, "Start-up at scale"). Once the handshake is
 * confirmed, bulk data takes loopback's large packets again.
 *
 * Two ranks over QUIC: each reads its link's counters
 * (src/transport/quic_test.h) after nexar_init: the largest packet written
 * before confirmation is above 0 and at most 1452 bytes (65,000 without
 * the rule); then each rank sends 4 MiB to the other (bit-exact), and each
 * one's largest packet is above 1452 bytes: the rule is lifted on both
 * sides, the dialling one (confirmed by HANDSHAKE_DONE) and the accepting
 * one (confirmed at completion, where ngtcp2 calls no confirmation
 * callback; a first version left that side at 1452 bytes for good).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "nexar.h"
#include "transport/quic_test.h"

#define PATH_PAYLOAD 1452u /* NEXAR__QUIC_PATH_PAYLOAD */
#define BULK (4u << 20)    /* bytes each rank sends */

static uint8_t pat(size_t i, int from) {
  return (uint8_t)(i * 131u + (i >> 12) + (size_t)from * 17u);
}

static int worker(int index, void *arg) {
  (void)index, (void)arg; /* one case */
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r;
  NT_OK(nt_join_world(&ctx, &w, &r, NULL));
  nexar__quic_test_stats_t s;
  NT_OK(nexar__quic_test_stats(ctx, 1 - r, &s));
  printf("rank %d: largest packet before the handshake was confirmed %llu B\n",
         r, (unsigned long long)s.hs_pkt_max);
  NT_CHECKF(s.hs_pkt_max > 0 && s.hs_pkt_max <= PATH_PAYLOAD,
            "rank %d: a packet of %llu B before the handshake to rank %d was "
            "confirmed (at most %u)",
            r, (unsigned long long)s.hs_pkt_max, 1 - r, PATH_PAYLOAD);
  uint8_t *buf = malloc(BULK);
  NT_CHECK(buf != NULL);
  for (int from = 0; from < 2; from++) {
    for (size_t i = 0; i < BULK; i++) buf[i] = r == from ? pat(i, from) : 0;
    if (r == from) {
      NT_OK(nexar_send(w, buf, BULK, NEXAR_UINT8, 1 - r, 5));
      continue;
    }
    NT_OK(nexar_recv(w, buf, BULK, NEXAR_UINT8, from, 5, NULL));
    for (size_t i = 0; i < BULK; i++)
      NT_CHECKF(buf[i] == pat(i, from),
                "rank %d: byte %zu of rank %d's 4 MiB message is %u", r, i,
                from, buf[i]);
  }
  free(buf);
  NT_OK(nexar_barrier(w));
  NT_OK(nexar__quic_test_stats(ctx, 1 - r, &s));
  printf("rank %d: largest packet %llu B\n", r, (unsigned long long)s.pkt_max);
  NT_CHECKF(s.pkt_max > PATH_PAYLOAD,
            "rank %d: 4 MiB went in packets of at most %llu B (loopback "
            "allows 65,000 once the handshake is confirmed)",
            r, (unsigned long long)s.pkt_max);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  nt_opts_t o = {
      .world_size = 2, .timeout_ms = 60000, .env = "NEXAR_TRANSPORT=quic"};
  return nt_run_case(&o, worker, 0, "quic_packets_small_until_confirmed");
}
