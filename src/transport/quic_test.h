/*
 * Test hook of the QUIC transport (quic_tx.c): what a link's data lane
 * did while RPC traffic was recent, and the sizes of its packets. Not part
 * of the public API; tests/test_rpc_quic.c and test_quic_packets.c use it.
 */
#ifndef NEXAR_QUIC_TEST_H
#define NEXAR_QUIC_TEST_H

#include <stdint.h>

#include "nexar.h"

typedef struct nexar__quic_test_stats {
  uint64_t rpc_data_pkts;         /* packets with data written meanwhile */
  uint64_t rpc_data_pkt_max;      /* the largest of them (bytes) */
  uint64_t rpc_data_inflight_max; /* most bytes in flight right after one */
  uint64_t rpc_prio_pkt_max; /* largest packet with control or RPC frames */
  /* The link's RPC connection (quic_rpc.c): packets with RPC frames
   * written on it, RPC-lane streams opened on the first connection while it
   * was up (0 by design), and whether it is up. */
  uint64_t rpc_conn_pkts;
  uint64_t rpc_main_opened;
  int rpc_conn_up;
  /* The link's first connection: its largest packet (UDP payload, bytes)
   * written before its handshake was confirmed, and its largest ever. */
  uint64_t hs_pkt_max;
  uint64_t pkt_max;
} nexar__quic_test_stats_t;

/*
 * Copies the counters of this process's QUIC link to world rank |peer|
 * into |out|, on the progress thread. Returns 0; NEXAR_ERR_INVALID_ARG for
 * a bad |peer| or NULL |out|; NEXAR_ERR_UNSUPPORTED when no QUIC link to
 * |peer| exists. Thread-safe (any user thread).
 */
int nexar__quic_test_stats(nexar_ctx_t *ctx, int peer,
                           nexar__quic_test_stats_t *out);
/*
 * Ends the RPC connection of this process's QUIC link to world rank |peer|
 * as a protocol error on it would (its close goes to the peer), on the
 * progress thread: the link then fails, at both ends. Returns 0;
 * NEXAR_ERR_INVALID_ARG for a bad |peer|; NEXAR_ERR_UNSUPPORTED when the
 * link has no RPC connection up. Thread-safe (any user thread).
 */
int nexar__quic_test_rpc_cut(nexar_ctx_t *ctx, int peer);
/* The transport's halves (quic_tx.c, quic_rpc.c; engine held), on link
 * |l|; NEXAR_ERR_UNSUPPORTED when |l| is not a QUIC link (or has no RPC
 * connection up). */
struct nexar__link;
int nexar__quic_stats_link(struct nexar__link *l,
                           nexar__quic_test_stats_t *out);
int nexar__quic_rpc_cut(struct nexar__link *l);

#endif /* NEXAR_QUIC_TEST_H */
