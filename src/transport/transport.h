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

#include <pthread.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "base/base.h"

#define NEXAR__TP_MAX 4       /* transports of one endpoint */
#define NEXAR__FOLD_MAX_ES 32 /* largest element a receive folds in */
/* Vectors a transport asks a frame for per write (frame_vecs): the header,
 * the relay prefix and the payload's runs (one per entry of a gathered
 * payload, nexar_sendv). */
#define NEXAR__FRAME_VECS 16
#define NEXAR__REQ_KINDS 5 /* request kinds (enum nexar__req_kind) */
/* Receive batch: datagrams per recvmmsg, bytes per (GRO) datagram. */
#define NEXAR__RX_BATCH 32
/* NEXAR_PASS_SLICE_BYTES of an endpoint without settings (a seed). */
#define NEXAR__SLICE_DEFAULT (256u << 10)
#define NEXAR__RX_BUF 65536
#define NEXAR__ALPN_MESH "nexar/1"
#define NEXAR__ALPN_SEED "nexar-seed/1"
#define NEXAR__ALPN_OBSERVE "nexar-observe/1" /* live inspection */
#define NEXAR__ALPN_RPC "nexar-rpc/1"         /* a mesh link's RPC connection */

/* Application error codes carried in QUIC CONNECTION_CLOSE. */
enum nexar__close_code {
  NEXAR__CLOSE_OK = 0,     /* finalize / normal end */
  NEXAR__CLOSE_AUTH = 1,   /* authentication failed */
  NEXAR__CLOSE_PROTO = 2,  /* protocol violation */
  NEXAR__CLOSE_REJECT = 3, /* seed refused the worker */
  NEXAR__CLOSE_ABORT = 4,  /* process aborted */
  NEXAR__CLOSE_FENCED = 5, /* the receiver was declared failed (fenced) */
  NEXAR__CLOSE_LEFT = 6    /* the sender left the job gracefully */
};

typedef struct nexar__ep nexar__ep_t;
typedef struct nexar__link nexar__link_t;
typedef struct nexar__omsg nexar__omsg_t;
typedef struct nexar__imsg nexar__imsg_t;
typedef struct nexar_req nexar__req_t;
typedef struct nexar__sched nexar__sched_t;

/* ---- Local identity: a key pair and self-signed certificate generated in
 * this process; only the certificate's fingerprint leaves it. */
typedef struct nexar__identity {
  gnutls_certificate_credentials_t cred;
  uint8_t fingerprint[NEXAR__FP_BYTES];
  /* The certificate (DER), sent in HELLO so that the roster binds the
   * relay key below to the fingerprint. */
  uint8_t cert[NEXAR__CERT_MAX];
  uint16_t cert_len;
  /* X25519 key pair for relay pair keys (docs/topology.md); the public
   * half is in the certificate's subjectAltName. Never leaves the process
   * otherwise. */
  uint8_t relay_sk[32], relay_pk[32];
} nexar__identity_t;

typedef struct nexar__fwd nexar__fwd_t;

/* ---- A gathered payload (nexar_sendv / nexar_recvv): entry |i| holds
 * payload bytes [off, off + len) at |base|; offsets ascend, zero-length
 * entries are left out. */
typedef struct nexar__seg {
  uint8_t *base;
  uint64_t len;
  uint64_t off;
} nexar__seg_t;
/* The entry of the |n| in |s| that holds payload byte |off| (< the total):
 * binary search. */
static inline uint32_t nexar__seg_find(const nexar__seg_t *s, uint32_t n,
                                       uint64_t off) {
  uint32_t lo = 0, hi = n;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (s[mid].off <= off)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* ---- Outgoing message: one stream carrying hdr, then pre, then data
 * (a frame forwarded for others carries hdr, then bytes of fwd's ring). */
struct nexar__omsg {
  nexar__omsg_t *next;
  uint8_t hdr[NEXAR__HDR_BYTES];
  const uint8_t *data; /* payload: the user's buffer or |owned| */
  uint8_t *owned;      /* eager copy, freed when the stream closes */
  bool owned_pooled;   /* owned came from the ctx's pool (p2p/send.c) */
  /* Or a gathered payload read from the caller's buffers (data NULL):
   * nsegs entries of segs (owned; nsegs 0 once the message is cut). */
  nexar__seg_t *segs;
  uint32_t nsegs;
  uint64_t len; /* payload bytes */
  uint8_t *pre; /* relay envelope + inner header (owned), or NULL */
  uint32_t pre_len;
  uint64_t sent;  /* stream bytes handed to ngtcp2 (header included) */
  uint64_t acked; /* stream bytes acknowledged */
  int64_t sid;    /* -1 until opened */
  int lane;
  int dest;            /* stable id of the final destination */
  nexar__link_t *conn; /* the link it is queued on (nexar__link_send) */
  nexar__fwd_t *fwd;   /* forwarded frame (p2p/relay.c), or NULL */
  bool blocked;        /* stream flow control blocked */
  bool cwait;          /* waiting for end-to-end relay credit, on no link (conn
                          NULL; p2p/credit.c) */
  bool stop;           /* the stream is to be cut (transports that queue it) */
  uint64_t tx_max;     /* stream bytes the receiver allows (transports that
                          keep stream credit here) */
  uint64_t tx_out; /* stream bytes handed on (by transports that track it) */
  bool tx_fin;     /* nothing more of it will be written (same) */
  /* Ended (failed or cancelled) while ngtcp2 may still resend bytes of
   * the caller's buffer (a reset stream's lost frames): the request
   * completes with end_rc once those end_at stream bytes are acknowledged
   * or the stream or link is gone (p2p/match.c omsg_end). */
  bool ending;
  int end_rc;
  uint64_t end_at;
  nexar__req_t *req; /* completed when acked; NULL when already done */
};

/* Stream bytes of |m|: header, relay prefix and payload. */
static inline uint64_t nexar__omsg_total(const nexar__omsg_t *m) {
  return NEXAR__HDR_BYTES + m->pre_len + m->len;
}
/* Whether |m|'s payload is still to be read from memory (not cut). */
static inline bool nexar__omsg_has_payload(const nexar__omsg_t *m) {
  return m->data || m->nsegs;
}
/* The contiguous run of |m|'s payload at payload offset |off| (< m->len):
 * its address, and its length in *n (to the end of the payload, or of the
 * gathered entry holding |off|). */
static inline const uint8_t *nexar__omsg_run(const nexar__omsg_t *m,
                                             uint64_t off, uint64_t *n) {
  if (!m->nsegs) {
    *n = m->len - off;
    return m->data + off;
  }
  const nexar__seg_t *s = &m->segs[nexar__seg_find(m->segs, m->nsegs, off)];
  *n = s->len - (off - s->off);
  return s->base + (off - s->off);
}

/* ---- Incoming message: one remote unidirectional stream. */
enum nexar__imsg_state {
  NEXAR__IM_HDR,        /* reading the 64-byte header */
  NEXAR__IM_RELAY,      /* reading a relay envelope and inner header */
  NEXAR__IM_FWD,        /* a relay frame flowing on to the next hop */
  NEXAR__IM_ORDER,      /* header read, waiting for earlier seq numbers */
  NEXAR__IM_UNEXPECTED, /* in the unexpected store (prefix buffered) */
  NEXAR__IM_MATCHED,    /* payload flows into a request's buffer */
  NEXAR__IM_DONE        /* delivered; waiting for the stream to close */
};

struct nexar__imsg {
  nexar__imsg_t *next; /* in the reorder list or the unexpected list */
  nexar__imsg_t *prev;
  nexar__imsg_t *anext, *aprev; /* every live imsg of the connection */
  nexar__link_t *conn;
  int64_t sid;
  int state;
  uint8_t hdrbuf[NEXAR__HDR_BYTES];
  size_t hdr_got;
  nexar__hdr_t hdr;
  uint64_t got;                      /* payload bytes received */
  uint8_t carry[NEXAR__FOLD_MAX_ES]; /* a folding receive's partial element */
  uint32_t carry_n;
  uint8_t *buf;      /* unexpected prefix (<= eager bytes) */
  uint64_t buf_len;  /* bytes held in buf */
  bool buf_pooled;   /* buf came from the ctx's pool (p2p/send.c) */
  nexar__req_t *req; /* matched request */
  bool fin;          /* stream finished */
  bool stream_closed;
  bool credited; /* stream window extended to the whole message */
  /* A whole unexpected message detached from its stream by count (conn
   * NULL, credit returned; p2p/detach.c): the per-origin count it holds. */
  uint32_t *held;
  /* A relayed message whose origin holds end-to-end credit for it: the
   * frame's bytes, given back when it leaves the link (p2p/credit.c). */
  uint64_t e2e;
  /* An unexpected message above the eager size let in whole (p2p/detach.c
   * nexar__p2p_take_whole), or one of at most the eager size detached by bytes
   * (nexar__p2p_detach): its bytes, counted in *whole_of until it is freed. */
  uint64_t whole;
  uint64_t *whole_of;
  /* A whole unexpected message that nexar__p2p_detach left on its stream (no
   * room): the per-origin count of such messages it is in, until it
   * detaches, is matched or is freed. */
  uint32_t *refused_of;
  /* The sender: the link's peer, or a relayed message's origin (stable
   * id); this process for a message to itself. */
  int origin;
  /* Relay frames (p2p/relay.c): bytes between the first header and the
   * payload (the envelope and inner header), read into rbuf. */
  uint32_t pre, pre_got;
  uint8_t rbuf[NEXAR__RELAY_PRE_BYTES];
  bool relayed;   /* delivered here from a relay frame (hdr is the inner) */
  bool rdv;       /* a later part of a rendezvous message (p2p/rdv.c) */
  bool unordered; /* relayed FAILED/AGREE: idempotent, taken as they come */
  bool bad_hash;  /* the payload does not match the authenticated digest */
  gnutls_hash_hd_t hash; /* relayed: digest of the payload so far */
  uint8_t want[32];      /* relayed: the authenticated digest */
  nexar__fwd_t *fwd;     /* forwarded to the next hop, or NULL */
};

/* ---- Links (to a peer rank, to the seed, or from a worker). */
/* OBSERVE: live inspection (docs/debugging.md). An observer dials a rank
 * with ALPN NEXAR__ALPN_OBSERVE, pinning the rank's roster fingerprint and
 * presenting a certificate of its own, which the rank does not check
 * (verify_observer decides whether it takes one more observer). The link
 * then carries seed-style frames; the observer must prove the cluster
 * secret before it is answered, and is never a member. A client offering
 * the mesh ALPN still needs a roster certificate. */
enum nexar__link_role {
  NEXAR__ROLE_MESH = 0,
  NEXAR__ROLE_SEED = 1,
  NEXAR__ROLE_OBSERVE = 2
};
enum nexar__link_state {
  NEXAR__CS_HANDSHAKE,
  NEXAR__CS_READY,
  NEXAR__CS_CLOSING,
  NEXAR__CS_DEAD
};

/* A link: this process's channel to one other process (a peer rank, the
 * seed, or a worker at the seed) over one transport. The engine's peer
 * table holds links; what a transport keeps besides (QUIC's connection and
 * TLS session, shared memory's rings) lives in the transport's own struct,
 * which starts with this one (src/transport/transport.h). */
struct nexar__link {
  nexar__ep_t *ep;
  const struct nexar__tp *tp; /* the transport carrying it */
  struct sockaddr_storage remote;
  socklen_t remote_len;
  char remote_str[64];
  int role;
  int state;
  bool is_server; /* accepted (not dialled) by this process */
  bool want_write;
  int peer;         /* world rank of the peer, -1 if not a mesh peer */
  int close_code;   /* why it closed (application code) */
  bool peer_closed; /* close_code came in the peer's CONNECTION_CLOSE */
  char close_reason[128];
  int err; /* NEXAR_ERR_* that ended it */
  /* Closing and failure are recorded inside transport callbacks and
   * carried out by the progress loop (nexar__link_settle), never
   * re-entrantly. */
  bool close_req, close_sent, notified;
  int tx_code;
  char tx_reason[128];
  /* Outgoing messages per lane, FIFO; streams are opened in order. */
  nexar__omsg_t *outq[NEXAR__LANE_COUNT];
  nexar__omsg_t *outq_tail[NEXAR__LANE_COUNT];
  size_t eager_bytes; /* bytes of eager copies not yet acknowledged */
  /* Receive side. */
  nexar__imsg_t *imsgs; /* all live incoming messages (for teardown) */
  /* Seed role: frame reassembly on the single remote stream. */
  uint8_t *sbuf;
  size_t sbuf_len, sbuf_cap;
  void *role_data;  /* seed: per-worker record */
  uint64_t last_rx; /* when a packet from the peer was last processed (ns) */
  /* Sends to the peer failing (no route, ...): since when (ns; 0: they
   * work) and the last errno. The detector declares the peer failed when
   * this lasts a heartbeat timeout. */
  uint64_t tx_err_since;
  int tx_errno;
  bool port_closed; /* an ICMP port unreachable came back from its address */
  /* The peer said its own mesh is formed (a process-level HEARTBEAT): until
   * then the failure detector gives it the bootstrap's deadline, not the
   * heartbeat timeout (failure.c). */
  bool peer_meshed;
  bool starved_said; /* a starved silence of the peer's was logged */
  /* A crossing dial's losing link (lazy mesh, p2p/lazy.c): in no peer
   * table; it carries what was started on it, then closes. */
  bool retired;
};

/* ---- Endpoint: one UDP socket, one progress thread, many connections. */
typedef struct nexar__ep_ops {
  /* A connection finished its handshake. */
  void (*on_ready)(nexar__link_t *c);
  /* Bytes on a remote stream of a seed-role connection. */
  void (*on_seed_data)(nexar__link_t *c, const uint8_t *d, size_t n);
  /* A connection is gone (closed by either side, failed, timed out). */
  void (*on_closed)(nexar__link_t *c);
  /* Called each loop iteration with the current time (deadlines). */
  void (*on_tick)(nexar__ep_t *ep, uint64_t now);
  /* Server side: verify a client certificate fingerprint; return the peer
   * rank (>= 0), -1 to refuse, or -2 to accept as a non-mesh (seed)
   * client. */
  int (*verify_client)(nexar__ep_t *ep, const uint8_t *fp);
  /* Server side, a client that negotiated NEXAR__ALPN_OBSERVE: 0 to take
   * it as an observer (role OBSERVE), -1 to refuse (optional: without it
   * the observer ALPN is not offered). */
  int (*verify_observer)(nexar__ep_t *ep);
  /* A same-host transport's peer presented certificate fingerprint |fp|
   * and the kernel vouches for its process id |pid|: returns the peer
   * rank when the roster says that rank has this host key and pid, else
   * -1 (optional). */
  int (*verify_local)(nexar__ep_t *ep, const uint8_t *fp, uint32_t pid);
  /* An ICMP destination-unreachable report came back for a datagram sent
   * to |to|; |err| is its errno, ECONNREFUSED for "port unreachable"
   * (optional). */
  void (*on_unreachable)(nexar__ep_t *ep, const struct sockaddr_storage *to,
                         int err);
  /* The process did not run for |idle_ns| (longer than ep->pause_ns);
   * everything queued on the socket has been read since (optional). */
  void (*on_resume)(nexar__ep_t *ep, uint64_t idle_ns);
  /* A mesh connection ended and was reported (on_closed): returns true
   * when it may be freed now, having detached it from the owner's tables
   * (optional; without it mesh connections live until ep_fini). */
  bool (*peer_release)(nexar__link_t *c);
  /* ---- Frames: what a transport calls on mesh links (p2p installs
   * them; src/transport/transport.h). */
  /* Bytes on remote stream |sid|; |m| is what attach_in attached, or
   * NULL for a new stream. */
  void (*on_stream_data)(nexar__link_t *c, int64_t sid, nexar__imsg_t *m,
                         const uint8_t *d, size_t n, bool fin);
  /* The remote stream of |m| closed (completed, or cut). */
  void (*on_stream_close)(nexar__link_t *c, nexar__imsg_t *m);
  /* |n| more stream bytes of outgoing |m| were acknowledged. */
  void (*on_acked)(nexar__link_t *c, nexar__omsg_t *m, uint64_t n);
  /* The stream of |m| closed; the transport took it off the queue. */
  void (*on_out_closed)(nexar__link_t *c, nexar__omsg_t *m);
  /* |c| is being freed: its incoming messages end. */
  void (*on_teardown)(nexar__link_t *c);
  /* What of |m| is ready to write from m->sent on: up to |max| pieces in
   * |v|; *fin when they reach its end. */
  size_t (*frame_vecs)(const nexar__omsg_t *m, struct iovec *v, size_t max,
                       bool *fin);
  /* Whether |m| has bytes ready to write beyond m->sent. */
  bool (*frame_more)(const nexar__omsg_t *m);
  /* Where the next |n| payload bytes of |m| go when they may be written
   * there directly (matched, copied as is, room for all of them); NULL
   * otherwise (optional). */
  uint8_t *(*frame_sink)(nexar__link_t *c, nexar__imsg_t *m, size_t n);
  void (*frame_free)(nexar__omsg_t *m);
  /* A whole message in one piece: the |n| bytes at |d| (header and
   * payload) opened and ended a remote stream of |c| at once. Returns true
   * when the upper layer took it (matched and delivered it): the stream is
   * then done, as after on_stream_close; false leaves it, untouched, to
   * on_stream_data. |d| may be memory the peer can still write: each byte
   * is read once (optional). */
  bool (*on_whole)(nexar__link_t *c, const uint8_t *d, size_t n);
  /* As on_whole, for a message whose header the transport rebuilt from a
   * compact form and checked as nexar__hdr_decode would: |h|, and its
   * h->payload_len bytes at |payload| (already copied out of memory the
   * peer can write). Optional. */
  bool (*on_whole_hdr)(nexar__link_t *c, const nexar__hdr_t *h,
                       const uint8_t *payload);
} nexar__ep_ops_t;

struct nexar__ep {
  int fd, epfd, evfd, tfd; /* socket, epoll, kick eventfd, linger timer */
  int pkfd; /* wakes the progress thread parked while a caller drives */
  struct sockaddr_storage local;
  socklen_t local_len;
  char local_str[64];
  bool gso;
  nexar__identity_t id;
  const nexar__ep_ops_t *ops;
  /* What the engine installs (engine.c) for the transports and links:
   * check_run is called by a transport before it judges what it read (ICMP
   * reports): when this process did not run for longer than pause_ns since
   * the socket was last read, the rest of the reading is a catch-up
   * (resuming, resume_due; the engine ends it); complete ends a request
   * (emu held). */
  void (*check_run)(nexar__ep_t *ep);
  void (*complete)(nexar__req_t *req, int rc);
  /* Per request kind: how the engine starts and cancels it (core.h,
   * nexar__ep_set_kind). */
  const struct nexar__req_ops *kinds[NEXAR__REQ_KINDS];
  void *owner;                  /* nexar_ctx_t or nexar_seed_t */
  const nexar__params_t *prm;   /* the owner's settings; NULL: the seed's */
  const nexar__host_id_t *host; /* where this process runs; NULL: unknown */
  int shm_lfd; /* the shared-memory rendezvous listener, or -1 */
  int shm_sfd; /* epoll set of the listener and the links' sockets (in epfd),
                  or -1 */
  uint64_t shm_sock_at; /* when the sockets are next looked at (shm.c) */
  bool shm_kicks; /* a sleep flag went up: a peer may have kicked (shm.c) */
  int shm_parked; /* links whose rings are not polled: their kick wakes */
  int shm_held;   /* HELLOs that came before the roster, out of the set */
  int shm_nlinks; /* shared-memory links (shm.c) */
  struct nexar__link **shm_poll; /* those polled: rendezvous, or ready and
                                    not parked (shm.c) */
  int shm_npoll, shm_npoll_cap;
  uint64_t shm_park_look; /* when the parked links' kicks are next read */
  uint64_t shm_beat_at;   /* when the peers' heartbeat counts are read */
  uint64_t udp_read_at;   /* with no QUIC link: next read of it (quic.c) */
  bool quic_any;          /* a QUIC link is up or coming up (quic.c) */
  /* QUIC's RPC socket and what is accepted there (quic.h); NULL until
   * first needed. */
  struct nexar__quic_ep *quic;
  uint64_t pass_now; /* when the running pass began (ns; transports' timers) */
  /* Transports, in the order their input is read (engine.c). */
  const struct nexar__tp *tps[NEXAR__TP_MAX];
  int ntps;
  bool server_alpn_seed; /* accepts seed connections (the seed) */
  nexar__link_t **conns;
  int nconns, cap_conns;
  pthread_t thread;
  bool thread_started;
  atomic_bool stop;
  /* The engine lock: whoever holds it may run a progress pass (the
   * progress thread, a caller that waits, a caller that posts). */
  pthread_mutex_t emu;
  uint64_t due;            /* when the next pass must run (emu) */
  uint64_t wake_at;        /* when a sleeper (progress thread or driving caller)
                              next enters the engine (emu) */
  atomic_bool driving;     /* a caller drives progress in a wait (one at a
                              time; the others wait on ccv) */
  atomic_ullong drv_end;   /* when the last of them stopped (ns) */
  atomic_ullong bg_passes; /* passes the progress thread ran (test hook) */
  uint64_t linger_ns;      /* NEXAR_PROGRESS_LINGER_US in ns */
  uint64_t tmr_at;         /* when tfd is armed to fire; 0: not armed (emu) */
  atomic_bool parked;      /* the progress thread sleeps (or is about to)
                              where tfd wakes it (engine.c's park_sleep) */
  uint64_t spin_ns;        /* NEXAR_SPIN_US in ns */
  unsigned yield_every;    /* polls between yields while spinning: 1 on an
                              oversubscribed host (cluster/host.c), else 1024 */
  /* Where a spinning caller whose yields find its CPU shared moves
   * (core/pace.c): this rank's CPU when the host has one per rank, its
   * block's when ranks outnumber CPUs (cluster/host.c), else -1. */
  atomic_int home_cpu;
  /* Ranks on this host (cluster/host.c); more than its CPUs: only a wait
   * on a collective of at least that many ranks moves home (pace.c). */
  atomic_int here;
  atomic_bool crowded;
  /* Operation queue from threads that found the engine busy. */
  pthread_mutex_t qmu;
  nexar__req_t *q_head, *q_tail;
  atomic_bool q_any;    /* q_head != NULL, readable without qmu */
  atomic_bool ev_armed; /* evfd was written and not yet read */
  /* Completion signalling to user threads that do not drive. */
  pthread_mutex_t cmu;
  pthread_cond_t ccv;
  /* Callers waiting on ccv for another's drive (under cmu; atomic so that
   * whoever ends a request or a drive wakes them only when there are some:
   * see nexar__ep_wake_waiters). */
  atomic_int waiters;
  /* Datagrams from unknown clients held until the roster is known. */
  struct {
    uint8_t *data;
    size_t len;
    struct sockaddr_storage from;
    socklen_t fromlen;
  } stash[32];
  int nstash;
  bool accept_mesh; /* roster known: mesh clients may connect */
  int local_rank;   /* for log lines */
  uint8_t *txbuf;   /* GSO batch buffer */
  uint8_t *rxbuf;   /* GRO receive buffers */
  /* Transport settings and send back-pressure (udp.c, quic.c). */
  bool gro;     /* UDP_GRO is on for the socket */
  bool errq;    /* the socket's error queue needs reading */
  bool rx_more; /* the last receive pass stopped at its budget */
  /* "The process did not run" (engine.c catch_up): not running for longer
   * than pause_ns (0: never checked) since the socket was last read makes
   * the engine read it empty before anything else and then call
   * ops->on_resume. */
  uint64_t pause_ns;
  struct {
    uint64_t unrun;      /* not running since the last read (ns) */
    uint64_t pass_start; /* start of the pass, or of its unaccounted rest */
    uint64_t pass_end;   /* when the last pass (or half of one) ended */
    uint64_t s_wall;     /* a sample of the passing thread's CPU clock: */
    uint64_t s_cpu;      /*   when, its value, */
    uint64_t s_gaps;     /*   gaps between passes since, already counted */
    pthread_t s_tid;     /*   and the thread */
    bool s_ok;
  } run;
  bool resuming;        /* inside that catch-up read */
  bool resume_due;      /* a pause was seen while reading (udp.c) */
  size_t rcvbuf_bytes;  /* the socket's receive buffer (udp.c) */
  size_t rx_pass_bytes; /* bytes the last receive pass read */
  /* Bytes the transports whose polls cost no system call (shared memory)
   * have received; only grows. A waiting caller spins on while it grows
   * (drive.c). QUIC does not count: its spinning polls are whole
   * passes (a recvmmsg each), and spinning on through a transfer made the
   * 256 KiB allreduce at np 2 slower (310-433 against 267-304 us). */
  uint64_t rx_seen;
  int rx_batch;            /* datagrams per recvmmsg call */
  uint64_t slice;          /* this pass's bound: slice_bulk, or slice_rpc
                              while rpc_until is ahead (engine.c) */
  uint64_t slice_bulk;     /* NEXAR_PASS_SLICE_BYTES (docs/configuration.md) */
  uint64_t slice_rpc;      /* NEXAR_PASS_SLICE_RPC_BYTES */
  atomic_ullong rpc_until; /* RPC traffic seen: nexar__ep_rpc_seen (ns) */
  int64_t data_inflight;   /* data-lane bytes-in-flight floor; 0: none */
  int64_t data_inflight_rpc; /* the bound while rpc_until is ahead; 0: none */
  /* A batch in txbuf the socket refused (EAGAIN/ENOBUFS): bytes
   * [tx_off, tx_len) of datagrams of tx_seg bytes to tx_to, sent by
   * nexar__udp_resume. While tx_blocked nothing else is written. */
  bool tx_blocked;
  bool tx_pollout;          /* EPOLLOUT is armed on the socket */
  struct nexar__loss *loss; /* test only: NEXAR_TEST_LOSS (udp_loss.c) */
  size_t tx_off, tx_len, tx_seg;
  struct sockaddr_storage tx_to;
  socklen_t tx_tolen;
  uint64_t tx_since;    /* when the batch was refused (ns) */
  uint64_t tx_retry_at; /* ENOBUFS: next attempt (ns); 0: wait EPOLLOUT */
};

/* Whether RPC traffic was seen in the last 50 ms (nexar__ep_rpc_seen):
 * passes and QUIC data then keep to their shorter bounds. */
static inline bool nexar__ep_rpc_recent(nexar__ep_t *ep, uint64_t now) {
  return now < atomic_load_explicit(&ep->rpc_until, memory_order_relaxed);
}

/* ---------------- tls.c ---------------- */
int nexar__identity_init(nexar__identity_t *id);
void nexar__identity_fini(nexar__identity_t *id);
void nexar__mac(const uint8_t key[32], const char *label,
                const uint8_t exporter[32], uint8_t out[32]);
int nexar__ct_equal(const uint8_t *a, const uint8_t *b, size_t n);
/* Checks that SHA-256(|der|) is |fp| and reads the relay public key from
 * the certificate (subjectAltName URI NEXAR__RELAY_KEY_URI + 64 hex
 * digits). Returns 0, NEXAR_ERR_AUTH when the digest differs,
 * NEXAR_ERR_PROTO when the certificate does not parse or has no key. */
#define NEXAR__RELAY_KEY_URI "urn:nexar:relay-x25519:"
int nexar__cert_relay_key(const uint8_t *der, size_t len, const uint8_t fp[32],
                          uint8_t pub[32]);
/* Pair keys of this process (|me|) with |peer| whose relay public key is
 * |pub|: X25519 of the two static keys, HKDF-SHA256 (RFC 5869) with salt
 * "nexar pair v1", expanded to one key per direction (info "nexar relay v1"
 * || u32 from || u32 to). Returns 0, or NEXAR_ERR_AUTH when the shared
 * secret is all zero (a low-order public key). */
int nexar__pair_keys(const nexar__identity_t *id, uint32_t me, uint32_t peer,
                     const uint8_t pub[32], uint8_t tx[32], uint8_t rx[32]);
/* The relay tag: HMAC-SHA256(key, "nexar relay v1" || u32 origin ||
 * u32 dest || inner header || payload hash). */
void nexar__relay_tag(const uint8_t key[32], uint32_t origin, uint32_t dest,
                      const uint8_t hdr[NEXAR__HDR_BYTES],
                      const uint8_t hash[32], uint8_t tag[32]);

/* How long a caller whose request completed may leave the writes of that
 * pass (ACKs, credit) for its next call (engine.c): the ACK delay we
 * advertise. */
#define NEXAR__WRITE_DEFER_NS 1000000ull
/* The endpoint's table of links (link.c), which the engine walks. */
int nexar__ep_add_conn(nexar__ep_t *ep, nexar__link_t *c);
void nexar__ep_remove_conn(nexar__ep_t *ep, nexar__link_t *c);

/* Capability flags. */
enum {
  NEXAR__TP_RELIABLE = 1u << 0,  /* every lane is reliable and ordered */
  NEXAR__TP_SAME_HOST = 1u << 1, /* reaches only processes on this host */
  NEXAR__TP_ZCOPY_RX = 1u << 2,  /* can place payload in the receive buffer */
  NEXAR__TP_ENCRYPTED = 1u << 3, /* the wire is encrypted and authenticated */
  /* done_in drops every reference to the message: no later callback names
   * it, so it may outlive its stream (a message that has arrived whole). */
  NEXAR__TP_DONE_FORGETS = 1u << 4
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
   * descriptor wakes the engine, or *next, lowered to a retry time).
   * Optional: a transport whose writes the OS never refuses has none. */
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
  /* Writes a whole small message of |lane| now: its header |h| (with
   * |hdr| its 64-byte encoding, or NULL: encoded here when needed) and
   * |len| payload bytes from |data|, when nothing of that lane waits in
   * l->outq, a stream may open and the message fits one record. Returns
   * true when written (the peer will receive it as if it had been queued
   * and flushed; the caller keeps no copy), false when nothing was written
   * (the caller queues it; always when |data| is NULL and |len| is not:
   * a gathered payload). Optional: the same-host fast path. */
  bool (*send_now)(nexar__link_t *l, int lane, const nexar__hdr_t *h,
                   const uint8_t *hdr, const uint8_t *data, uint64_t len);
  /* Reads |l|'s input now, outside a pass (the engine lock held; records
   * are stamped with ep->pass_now), as the transport's input would: 1 when
   * it read something, 0 when there was nothing, negative when it cannot
   * (the link is not ready, or is not polled): the caller then runs
   * passes. Optional: the express path's receive (core/express.c). */
  int (*poll_link)(nexar__link_t *l);
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
  /* Whether the peer's process is seen to want a CPU (a thread running or
   * waiting on a run queue): only a transport whose peer is on this host
   * can tell (NULL: never). A silent peer that wants a CPU is starved,
   * not stopped. */
  bool (*peer_runnable)(const nexar__link_t *l);
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

/* ---- Links: what the upper layers call (link.c). */

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
/* Whether the output half of a pass has work on |l|: writes it wants, or
 * what nexar__link_settle would do. */
bool nexar__link_output_due(const nexar__link_t *l);
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
/* The transport's peer_runnable (false where it cannot tell). */
bool nexar__link_peer_runnable(const nexar__link_t *l);
/* Seed role: writes one frame on this side's stream. */
int nexar__link_seed_send(nexar__link_t *l, const uint8_t *frame, size_t len);
/* The same for a frame of two parts: |head| (head_len > 0 bytes, copied)
 * then |tail| (tail_len bytes), copied too unless |tail_ref|: then it is
 * referenced and must stay valid and unchanged until the link is freed
 * (the seed's roster, one buffer for every worker). Returns 0 or
 * NEXAR_ERR_NOMEM. */
int nexar__link_seed_sendv(nexar__link_t *l, const uint8_t *head,
                           size_t head_len, const uint8_t *tail,
                           size_t tail_len, bool tail_ref);
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
