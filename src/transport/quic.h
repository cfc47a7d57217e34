/*
 * QUIC links (quic.c, tls.c): ngtcp2 connections with GnuTLS sessions over
 * the endpoint's UDP socket (udp.c). Private to src/transport.
 */
#ifndef NEXAR_QUIC_H
#define NEXAR_QUIC_H

#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include "transport/transport.h"

typedef struct nexar__quic {
  nexar__link_t l; /* first: a link is a nexar__quic when l.tp is QUIC's */
  ngtcp2_conn *qc;
  gnutls_session_t tls;
  ngtcp2_crypto_conn_ref ref;
  uint8_t cid_prefix[8]; /* every SCID we issue starts with this */
  bool pin_set;          /* client: expected server certificate */
  uint8_t pin[NEXAR__FP_BYTES];
  /* Streams of delivered messages not yet returned to the peer as
   * MAX_STREAMS credit: returned in batches, so that a message does not
   * cost a packet of its own for the credit. [0] uni, [1] bidi. */
  uint32_t streams_owed[2];
  int64_t seed_tx_sid;
  /* Packets with data written while RPC traffic was recent (quic_tx.c),
   * the largest of them, the most bytes in flight right after one, and the
   * largest packet with control or RPC frames meanwhile: tests read them
   * (nexar__quic_test_stats, quic_test.h). */
  uint64_t rpc_data_pkts, rpc_data_pkt_max, rpc_data_inflight_max;
  uint64_t rpc_prio_pkt_max;
  uint64_t handshake_deadline;
} nexar__quic_t;

static inline nexar__quic_t *nexar__quic(nexar__link_t *l) {
  return (nexar__quic_t *)l;
}

int nexar__tls_session(nexar__quic_t *q, const char *alpn);

/* quic_tx.c: writes what the link's queues and ngtcp2 allow; sends the
 * close nexar__link_close asked for. */
void nexar__quic_flush(nexar__link_t *c);
void nexar__quic_send_close(nexar__link_t *c);
int nexar__tls_exporter(nexar__link_t *l, uint8_t out[32]);

/* udp.c */
int nexar__udp_open(nexar__ep_t *ep, const struct sockaddr_storage *addr,
                    socklen_t len);
/* Test only (udp_loss.c): the NEXAR_TEST_LOSS injector. open sets ep->loss
 * when the variable is set (NEXAR_ERR_INVALID_ARG when it cannot be read);
 * send stands for nexar__udp_send while it is on. */
int nexar__loss_open(nexar__ep_t *ep);
void nexar__loss_close(nexar__ep_t *ep);
int nexar__loss_send(nexar__ep_t *ep, const struct sockaddr_storage *to,
                     socklen_t tolen, const uint8_t *data, size_t len,
                     size_t segsize);
int nexar__udp_send(nexar__ep_t *ep, const struct sockaddr_storage *to,
                    socklen_t tolen, const uint8_t *data, size_t len,
                    size_t segsize);
typedef void (*nexar__udp_rx_fn)(nexar__ep_t *ep, const uint8_t *data,
                                 size_t len,
                                 const struct sockaddr_storage *from,
                                 socklen_t fromlen);
int nexar__udp_recv_all(nexar__ep_t *ep, nexar__udp_rx_fn fn);
/* Retries a refused batch (see nexar__ep.tx_blocked). Returns 0 when the
 * socket took it (or it was dropped after waiting too long), 1 while the
 * socket is still full, or -errno when the send failed (the batch is
 * dropped, as lost). */
int nexar__udp_resume(nexar__ep_t *ep);
/* nexar__link_tx_result for every link to address |to|. */
void nexar__ep_tx_failed(nexar__ep_t *ep, const struct sockaddr_storage *to,
                         int err);

#endif
