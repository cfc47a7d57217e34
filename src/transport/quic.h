/*
 * QUIC links (quic.c, tls.c): ngtcp2 connections with GnuTLS sessions over
 * the endpoint's UDP socket (udp.c). Private to src/transport.
 */
#ifndef NEXAR_QUIC_H
#define NEXAR_QUIC_H

#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include "transport/transport.h"

/* The RPC connection (quic_rpc.c): a mesh link's second QUIC connection,
 * on a UDP socket of its own at each end, which carries the link's RPC
 * lane. Stream ids of its streams carry this bit when the upper layers see
 * them (QUIC stream ids are below 2^62). */
#define NEXAR__RPC_SID (INT64_C(1) << 62)
/* The transport-internal note on a unidirectional stream of a link's
 * first connection (the server's side writes it): "NXR1", a kind, a zero
 * byte, the RPC socket's port (big-endian). */
#define NEXAR__RPC_NOTE_BYTES 8
enum { NEXAR__RPC_NOTE_PORT = 1, NEXAR__RPC_NOTE_DIAL = 2 };
/* Decodes a note of |n| bytes: its kind and port. Returns 0, or
 * NEXAR_ERR_PROTO when it is not a note (length, magic, kind, port 0). */
int nexar__qrpc_note_decode(const uint8_t *b, size_t n, int *kind,
                            uint16_t *port);
void nexar__qrpc_note_encode(uint8_t b[NEXAR__RPC_NOTE_BYTES], int kind,
                             uint16_t port);

typedef struct nexar__quic nexar__quic_t;
struct nexar__quic {
  nexar__link_t l; /* first: a link is a nexar__quic when l.tp is QUIC's;
                      an RPC connection's l is not in ep->conns: its
                      parent's link stands for it there */
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
  /* Packets written on the RPC connection, and RPC-lane streams opened on
   * the first connection while the RPC connection was up (tests). */
  uint64_t rpc_conn_pkts, rpc_main_opened;
  uint64_t hs_pkt_max, pkt_max; /* largest packet unconfirmed, and ever */
  uint64_t handshake_deadline;
  /* Small packets whose ACK (and the frames that go with it: the
   * RESET_STREAM of a delivered message's stream) waits for this
   * connection's next packet, and the time it waits until (quic.c
   * nexar__quic_read); 0: none waits. */
  uint32_t ack_waiting;
  uint64_t ack_by;
  /* ---- The RPC connection (quic_rpc.c). */
  bool is_rpc;           /* this is an RPC connection */
  bool confirmed;        /* QUIC handshake confirmed (packet_max) */
  nexar__quic_t *parent; /* an RPC connection: its link (NULL until an
                            accepted one is bound) */
  nexar__quic_t *rpc;    /* a link: its RPC connection, or NULL */
  uint16_t rpc_port;     /* dialling side: the peer's RPC port; 0: none */
  bool rpc_off;          /* no RPC connection for this link (failed to set
                            up locally): the RPC lane stays here */
  bool dial_asked;       /* accepting side: the DIAL note is queued */
  /* Accepting side: notes to write (kinds, in order) and the one being
   * written; dialling side: the note being read. */
  uint8_t note_q[2];
  int note_n;
  /* The bytes of each note by kind (PORT, DIAL): ngtcp2 reads a stream's
   * bytes from here until they are acknowledged. */
  uint8_t note[2][NEXAR__RPC_NOTE_BYTES];
  size_t note_off;
  int64_t note_sid; /* -1: none open */
  /* Dialling side: the notes being read (the peer's first two
   * unidirectional streams; a third is a protocol error). */
  uint8_t note_rx[2][NEXAR__RPC_NOTE_BYTES];
  uint8_t note_rx_got[2];
};

/* The endpoint's RPC socket and the RPC connections accepted on it that
 * are not bound to a link yet (quic_rpc.c); ep->quic, NULL until the socket
 * is first needed. */
#define NEXAR__QUIC_SCID_LEN 16 /* bytes of the connection ids we issue */
/* The UDP payload of a path that was not measured (a 1500-byte Ethernet MTU
 * less IPv6 and UDP headers), and of every packet before the handshake
 * is confirmed, loopback included (quic_tx.c packet_max). */
#define NEXAR__QUIC_PATH_PAYLOAD 1452
#define NEXAR__RPC_PENDING 16
#define NEXAR__RPC_RX_BATCH 8
typedef struct nexar__quic_ep {
  int fd;
  struct sockaddr_storage local;
  socklen_t local_len;
  uint16_t port;
  uint8_t *txbuf, *rxbuf;
  nexar__quic_t *pending[NEXAR__RPC_PENDING];
  int npending;
  int nrpc;         /* RPC connections of links (dialled or bound) */
  uint64_t read_at; /* with none: next read of the socket (ns) */
} nexar__quic_ep_t;

static inline nexar__quic_t *nexar__quic(nexar__link_t *l) {
  return (nexar__quic_t *)l;
}

int nexar__tls_session(nexar__quic_t *q, const char *alpn);

/* quic.c: what quic_rpc.c shares. A new connection: a client to |to|
 * (pinning |pin|) or a server for the Initial |hd| from |to|, on the RPC
 * socket when |rpc|; NULL when it cannot be made. Not added to ep->conns. */
nexar__quic_t *nexar__quic_new(nexar__ep_t *ep, int role, bool server,
                               const struct sockaddr_storage *to,
                               socklen_t tolen, const ngtcp2_pkt_hd *hd,
                               bool rpc);
/* Reads one datagram into connection |q|. */
void nexar__quic_read(nexar__quic_t *q, const uint8_t *data, size_t len);
void nexar__quic_conn_free(nexar__quic_t *q);
void nexar__quic_expire(nexar__link_t *c, uint64_t now);
uint64_t nexar__quic_conn_expiry(nexar__quic_t *q);

/* quic_rpc.c */
/* A link's first connection finished its handshake: the accepting side
 * queues its PORT note (opening the RPC socket). */
void nexar__qrpc_link_ready(nexar__quic_t *q);
/* An RPC connection finished its handshake: an accepted one is bound to
 * the link of the rank its certificate names, or refused. */
void nexar__qrpc_conn_ready(nexar__quic_t *r);
/* Bytes [off, off + n) of the note on remote unidirectional stream |sid|
 * of link |q| (the dialling side reads notes). */
void nexar__qrpc_note_data(nexar__quic_t *q, int64_t sid, uint64_t off,
                           const uint8_t *d, size_t n, bool fin);
/* Before link |q| writes: dials its RPC connection, or asks for it, when
 * RPC frames wait. */
void nexar__qrpc_want(nexar__quic_t *q);
/* What an RPC connection's state means for its link: its close is sent,
 * its wishes to write are the link's, and its failure fails the link (a
 * close from the peer only once |settled|: the first connection read). */
void nexar__qrpc_settle(nexar__quic_t *q, bool settled);
/* Reads the RPC socket (bounded); runs the timers and writes of the
 * connections accepted there and not yet bound. With no RPC connection the
 * socket carries only new ones: it is then read at most every millisecond
 * while the engine polls, and at once after a sleep (quic.c quic_arm). */
void nexar__qrpc_input(nexar__ep_t *ep);
/* Between the receive batches of the endpoint's socket while RPC traffic
 * is recent and RPC connections exist: the RPC socket's turn. */
void nexar__qrpc_between(nexar__ep_t *ep);
void nexar__qrpc_fini(nexar__ep_t *ep);
/* Whether the RPC connection of |q| carries its RPC lane now. */
static inline bool nexar__qrpc_up(const nexar__quic_t *q) {
  return q->rpc && q->rpc->l.state == NEXAR__CS_READY;
}
/* The connection of |q| that stream |sid| (as the upper layers see it)
 * is on, and its id there. */
static inline nexar__quic_t *nexar__sid_conn(nexar__quic_t *q, int64_t *sid) {
  if (*sid < 0 || !(*sid & NEXAR__RPC_SID)) return q;
  *sid &= ~NEXAR__RPC_SID;
  return q->rpc;
}

/* quic_tx.c: writes what the link's queues and ngtcp2 allow; sends the
 * close nexar__link_close asked for. */
void nexar__quic_flush(nexar__link_t *c);
void nexar__quic_send_close(nexar__link_t *c);
void nexar__quic_send_close_rpc(nexar__quic_t *r);
/* Writes what connection |q| of link |c| has to write (|q| is c's first
 * connection or its RPC connection). */
void nexar__quic_flush_conn(nexar__quic_t *q, nexar__link_t *c);
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
/* Reads the endpoint's socket (a pass's worth); |between| (optional)
 * runs between its recvmmsg calls. */
int nexar__udp_recv_all(nexar__ep_t *ep, nexar__udp_rx_fn fn,
                        void (*between)(nexar__ep_t *ep));
/* Another socket of the endpoint: opened on the endpoint's address with
 * a port of its own (its descriptor, or NEXAR_ERR_SYS; its address in
 * *local); read with |batch| buffers at |buf| and about |budget| bytes per
 * call; written with datagrams dropped (as lost) when it is full. */
int nexar__udp_open_more(nexar__ep_t *ep, struct sockaddr_storage *local,
                         socklen_t *local_len);
int nexar__udp_recv_fd(nexar__ep_t *ep, int fd, uint8_t *buf, int batch,
                       size_t budget, nexar__udp_rx_fn fn);
int nexar__udp_send_fd(nexar__ep_t *ep, int fd,
                       const struct sockaddr_storage *to, socklen_t tolen,
                       const uint8_t *data, size_t len, size_t segsize);
/* Retries a refused batch (see nexar__ep.tx_blocked). Returns 0 when the
 * socket took it (or it was dropped after waiting too long), 1 while the
 * socket is still full, or -errno when the send failed (the batch is
 * dropped, as lost). */
int nexar__udp_resume(nexar__ep_t *ep);
/* nexar__link_tx_result for every link to address |to|. */
void nexar__ep_tx_failed(nexar__ep_t *ep, const struct sockaddr_storage *to,
                         int err);

#endif
