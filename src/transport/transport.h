/*
 * The transport seam (model: nng's transport ops tables). A transport
 * carries links: reliable, ordered-per-stream channels between this process
 * and one other, each message (a frame: header, relay prefix, payload) on a
 * stream of its own, the streams of a lane opened in order. Transports know
 * nothing of matching, collectives, membership or RPC: what arrives goes up
 * through the handlers the engine's owner installed (nexar__ep_ops_t), and
 * the upper layers reach a link only through the nexar__link_* calls below,
 * which dispatch on the link's transport.
 *
 * Lifecycle: init (with the endpoint: sockets, epoll registration), links
 * made by dial (or accepted by the transport's input), then send / cancel /
 * close per link, fini (with the endpoint). Progress: the engine calls
 * input once per pass (and in a loop when it catches up after a pause),
 * then output, then flush, settle and expiry per link; a transport asks for
 * the engine through its file descriptors in ep->epfd and its links'
 * expiry times. Everything runs on whoever holds the engine lock.
 *
 * Streams: a transport numbers the streams of a link; on the receive side it
 * calls on_stream_data with the message the upper layer attached to the
 * stream (NULL until attach_in), and gives a stream no more credit than its
 * initial window (the eager limit plus a header) until extend grants it:
 * that is what bounds what an unmatched message can make a receiver hold.
 */
#ifndef NEXAR_TRANSPORT_H
#define NEXAR_TRANSPORT_H

#include "nexar_int.h"

/* Capability flags. */
enum {
  NEXAR__TP_RELIABLE = 1u << 0,  /* every lane is reliable and ordered */
  NEXAR__TP_SAME_HOST = 1u << 1, /* reaches only processes on this host */
  NEXAR__TP_ZCOPY_RX = 1u << 2,  /* can place payload in the receive buffer */
  NEXAR__TP_ENCRYPTED = 1u << 3  /* the wire is encrypted and authenticated */
};

/* Where and how to dial: the peer's QUIC address (a same-host transport
 * uses it only for log lines), role, world rank (-1: none) and, for a
 * client, the certificate fingerprint the peer must present (NULL: any, the
 * seed's proof then authenticates it), and where the peer runs (the
 * roster's host id: a same-host transport's rendezvous and credentials). */
typedef struct nexar__dial {
  const struct sockaddr_storage *to;
  socklen_t tolen;
  int role;
  int peer;
  const uint8_t *pin;
  const nexar__host_id_t *host; /* where the peer runs; NULL: unknown */
} nexar__dial_t;

typedef struct nexar__tp {
  const char *name;
  unsigned caps;      /* NEXAR__TP_* */
  uint64_t max_frame; /* bytes of one message; UINT64_MAX: no bound */
  /* ---- Endpoint lifecycle and progress. */
  int (*init)(nexar__ep_t *ep, const struct sockaddr_storage *bind,
              socklen_t len);
  void (*fini)(nexar__ep_t *ep);
  /* Reads what is queued (bounded); returns true when it stopped at its
   * budget with more to read. */
  bool (*input)(nexar__ep_t *ep);
  /* Before the links write: retries what the OS refused. Returns true
   * while it is still refused (the links wait; the transport's file
   * descriptor wakes the engine, or *next, lowered to a retry time). */
  bool (*output)(nexar__ep_t *ep, uint64_t *next);
  /* Before the engine sleeps on ep->epfd: arranges to be woken by new
   * input; false when input is already there (do not sleep). Optional. */
  bool (*arm)(nexar__ep_t *ep);
  /* Whether input may be waiting, looked at without a system call (a
   * caller that polls runs a pass only then). Optional: without it, a
   * pass runs on every poll. */
  bool (*ready)(nexar__ep_t *ep, uint64_t now);
  /* ---- Links. */
  int (*dial)(nexar__ep_t *ep, const nexar__dial_t *d, nexar__link_t **out);
  /* Writes what its queues and protocol allow (want_write was set). */
  void (*flush)(nexar__link_t *l);
  uint64_t (*expiry)(nexar__link_t *l); /* ns; UINT64_MAX: none */
  void (*on_expiry)(nexar__link_t *l, uint64_t now);
  /* Sends the close that nexar__link_close requested (once). */
  void (*send_close)(nexar__link_t *l);
  void (*free)(nexar__link_t *l);
  /* Streams may still complete on |l|: it is ready and not closing. */
  bool (*alive)(const nexar__link_t *l);
  /* The link's channel binding (RFC 5705 exporter of its authenticated
   * session); NEXAR_ERR_TRANSPORT when it has none. */
  int (*exporter)(nexar__link_t *l, uint8_t out[32]);
  /* ---- Streams. */
  /* Stops |m|'s stream at once (it was opened): nothing more is written,
   * and the peer learns it was cut. */
  void (*stop_out)(nexar__link_t *l, nexar__omsg_t *m);
  /* |m| leaves this link (rerouted): no further callbacks name it. */
  void (*forget_out)(nexar__link_t *l, nexar__omsg_t *m);
  /* Attaches |m| to the remote stream |sid|: later data comes with it. */
  void (*attach_in)(nexar__link_t *l, int64_t sid, nexar__imsg_t *m);
  /* |m| is delivered (or dropped): no further callbacks name it, and the
   * peer may open another stream in its place. */
  void (*done_in)(nexar__link_t *l, nexar__imsg_t *m);
  /* Grants |n| more bytes of credit on remote stream |sid|. */
  void (*extend)(nexar__link_t *l, int64_t sid, uint64_t n);
} nexar__tp_t;

extern const nexar__tp_t nexar__tp_quic;
extern const nexar__tp_t nexar__tp_shm;

/* ---- Links: what the upper layers call (core/link.c). */

/* Dials the peer with the transport the engine chose for it: shared
 * memory for a same-host peer that offers it, else QUIC
 * (NEXAR_TRANSPORT). */
int nexar__link_dial(nexar__ep_t *ep, const nexar__dial_t *d,
                     nexar__link_t **out);
/* Asks for |l| to be closed with application |code| and |reason| (sent
 * by the progress loop, never re-entrantly). */
void nexar__link_close(nexar__link_t *l, int code, const char *reason);
/* Marks |l| dead with |err|; the owner hears of it (on_closed) in the
 * progress loop. */
void nexar__link_fail(nexar__link_t *l, int err, const char *why);
/* Progress loop: sends a requested close, reports a dead link. */
void nexar__link_settle(nexar__link_t *l);
/* Enqueues an outgoing message; its stream opens when credit allows. */
void nexar__link_send(nexar__link_t *l, nexar__omsg_t *m);
/* Takes |m| off |l|'s queue (it stays allocated). */
void nexar__link_unqueue(nexar__link_t *l, nexar__omsg_t *m);
/* Whether a queued message has bytes not yet written (flow-control-blocked
 * ones excluded). */
bool nexar__link_tx_pending(const nexar__link_t *l);
/* Nothing unacknowledged or queued (a cancelled, never-opened message is
 * nothing). */
bool nexar__link_idle(const nexar__link_t *l);
/* Seed role: writes one frame on this side's stream. */
int nexar__link_seed_send(nexar__link_t *l, const uint8_t *frame, size_t len);
/* Records the outcome of a send to |l|'s peer: 0 (it worked) or the errno
 * of a failed send, whose bytes were dropped as lost. The first failure of
 * a spell is logged and starts l->tx_err_since. */
void nexar__link_tx_result(nexar__link_t *l, int err);
/* Frees a link and what is queued on it (requests end with its error). */
void nexar__link_free(nexar__link_t *l);
/* Sets up the fields every link has (transport constructors). */
void nexar__link_init(nexar__link_t *l, nexar__ep_t *ep, const nexar__tp_t *tp,
                      int role, bool server,
                      const struct sockaddr_storage *remote, socklen_t rlen);

static inline void nexar__link_extend(nexar__link_t *l, int64_t sid,
                                      uint64_t n) {
  if (l->state != NEXAR__CS_DEAD && n) l->tp->extend(l, sid, n);
}
static inline bool nexar__link_alive(const nexar__link_t *l) {
  return l->state == NEXAR__CS_READY && l->tp->alive(l);
}
static inline int nexar__link_exporter(nexar__link_t *l, uint8_t out[32]) {
  return l->tp->exporter(l, out);
}
static inline void nexar__link_stop_out(nexar__link_t *l, nexar__omsg_t *m) {
  if (l->state != NEXAR__CS_DEAD) l->tp->stop_out(l, m);
}
static inline void nexar__link_forget_out(nexar__link_t *l, nexar__omsg_t *m) {
  l->tp->forget_out(l, m);
}
static inline void nexar__link_attach_in(nexar__link_t *l, int64_t sid,
                                         nexar__imsg_t *m) {
  l->tp->attach_in(l, sid, m);
}
static inline void nexar__link_done_in(nexar__link_t *l, nexar__imsg_t *m) {
  if (l->state != NEXAR__CS_DEAD) l->tp->done_in(l, m);
}

#endif
