/*
 * Internal declarations shared by the parts of libnexar: the endpoint
 * (progress thread, UDP socket, QUIC connections), messages, requests and
 * communicators. Everything in here is owned by the progress thread unless
 * a comment says otherwise.
 */
#ifndef NEXAR_INT_H
#define NEXAR_INT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "core/log.h"
#include "core/param.h"
#include "cluster/launcher.h"
#include "device/device.h"
#include "nexar.h"
#include "wire/wire.h"

#define NEXAR__ERRMSG_MAX 512
#define NEXAR__TP_MAX 4       /* transports of one endpoint */
#define NEXAR__FOLD_MAX_ES 32 /* largest element a receive folds in */
/* Receive batch: datagrams per recvmmsg, bytes per (GRO) datagram. */
#define NEXAR__RX_BATCH 32
#define NEXAR__RX_BUF 65536
#define NEXAR__ALPN_MESH "nexar/1"
#define NEXAR__ALPN_SEED "nexar-seed/1"

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

/* Single-exit cleanup (NCCL style): log file:line on the error path only. */
#define NEXAR__CHECK(call)                                              \
  do {                                                                  \
    int nexar__rc = (call);                                             \
    if (nexar__rc < 0) {                                                \
      NEXAR__LOG(NEXAR__LOG_INFO, NEXAR__SUB_INIT, "%s:%d: %s -> %s",   \
                 __FILE__, __LINE__, #call, nexar_err_name(nexar__rc)); \
      return nexar__rc;                                                 \
    }                                                                   \
  } while (0)
#define NEXAR__CHECK_GOTO(call, rc, label)                            \
  do {                                                                \
    (rc) = (call);                                                    \
    if ((rc) < 0) {                                                   \
      NEXAR__LOG(NEXAR__LOG_INFO, NEXAR__SUB_INIT, "%s:%d: %s -> %s", \
                 __FILE__, __LINE__, #call, nexar_err_name(rc));      \
      goto label;                                                     \
    }                                                                 \
  } while (0)

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

/* ---- Outgoing message: one stream carrying hdr, then pre, then data
 * (a frame forwarded for others carries hdr, then bytes of fwd's ring). */
struct nexar__omsg {
  nexar__omsg_t *next;
  uint8_t hdr[NEXAR__HDR_BYTES];
  const uint8_t *data; /* payload: the user's buffer or |owned| */
  uint8_t *owned;      /* eager copy, freed when the stream closes */
  uint64_t len;        /* payload bytes */
  uint8_t *pre;        /* relay envelope + inner header (owned), or NULL */
  uint32_t pre_len;
  uint64_t sent;  /* stream bytes handed to ngtcp2 (header included) */
  uint64_t acked; /* stream bytes acknowledged */
  int64_t sid;    /* -1 until opened */
  int lane;
  int dest;            /* stable id of the final destination */
  nexar__link_t *conn; /* the link it is queued on (nexar__link_send) */
  nexar__fwd_t *fwd;   /* forwarded frame (p2p/relay.c), or NULL */
  bool blocked;        /* stream flow control blocked */
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
  nexar__req_t *req; /* matched request */
  bool fin;          /* stream finished */
  bool stream_closed;
  bool credited; /* stream window extended to the whole message */
  /* The sender: the link's peer, or a relayed message's origin (stable
   * id); this process for a message to itself. */
  int origin;
  /* Relay frames (p2p/relay.c): bytes between the first header and the
   * payload (the envelope and inner header), read into rbuf. */
  uint32_t pre, pre_got;
  uint8_t rbuf[NEXAR__RELAY_PRE_BYTES];
  bool relayed;   /* delivered here from a relay frame (hdr is the inner) */
  bool unordered; /* relayed FAILED/AGREE: idempotent, taken as they come */
  bool bad_hash;  /* the payload does not match the authenticated digest */
  gnutls_hash_hd_t hash; /* relayed: digest of the payload so far */
  uint8_t want[32];      /* relayed: the authenticated digest */
  nexar__fwd_t *fwd;     /* forwarded to the next hop, or NULL */
};

/* ---- Links (to a peer rank, to the seed, or from a worker). */
enum nexar__link_role { NEXAR__ROLE_MESH = 0, NEXAR__ROLE_SEED = 1 };
enum nexar__link_state {
  NEXAR__CS_HANDSHAKE,
  NEXAR__CS_READY,
  NEXAR__CS_CLOSING,
  NEXAR__CS_DEAD
};

/* Per (comm, lane) sequence numbers of one peer. */
typedef struct nexar__seqs {
  uint64_t comm_id;
  uint64_t next_tx[NEXAR__LANE_COUNT];
  uint64_t next_rx[NEXAR__LANE_COUNT];
} nexar__seqs_t;

/* End-to-end state of this process with one other process (by stable id),
 * whichever links its messages take: sequence numbers are assigned by the
 * origin and checked by the destination, so the order per (sender,
 * receiver, comm, lane) holds across relays and reroutes. */
typedef struct nexar__peer {
  nexar__seqs_t *seqs; /* one per live communicator shared with it */
  int nseqs, cap_seqs;
  nexar__imsg_t *reorder; /* headers waiting for an earlier seq */
} nexar__peer_t;

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
};

/* ---- Requests: user-visible p2p, collective and internal steps. */
enum nexar__req_kind {
  NEXAR__REQ_SEND,
  NEXAR__REQ_RECV,
  NEXAR__REQ_COLL,
  NEXAR__REQ_CTRL, /* engine-internal operation (flush, cancel, ...) */
  NEXAR__REQ_RPC   /* an RPC call: waits for its response */
};

struct nexar_req {
  nexar__req_t *next, *prev; /* op queue, then posted-receive list */
  int kind;
  nexar_comm_t *comm;
  _Atomic int done;
  int rc;
  uint64_t t_start; /* user requests: when posted (ns), for the deadline */
  nexar_status_t st;
  bool internal; /* owned by a schedule: cb is called, nobody waits */
  void (*cb)(nexar__req_t *req);
  /* Set by the layer that built the operation: frees what it owns when
   * the engine ends it without starting it (a revoked communicator);
   * NULL when it owns nothing until started. */
  void (*discard)(nexar__req_t *req);
  void *cb_arg;
  /* Send / receive. */
  int peer;      /* world rank (send: dest; recv: source or ANY) */
  int comm_peer; /* rank in comm (recv: source or NEXAR_ANY_SOURCE) */
  int tag;
  int lane;
  uint8_t *buf;
  uint64_t cap;     /* receive capacity / send length in bytes */
  nexar__hdr_t hdr; /* send: header to send; recv (coll): expected */
  bool is_coll;
  /* A collective's folding receive: payload is combined into buf (whole
   * elements of fold_es bytes) instead of copied; NULL: copied. */
  void (*fold)(const struct nexar_req *r, uint8_t *dst, const uint8_t *src,
               size_t n);
  uint32_t fold_es;
  nexar__imsg_t *msg;
  nexar__omsg_t *omsg;
  /* Collective. */
  nexar__sched_t *sched;
  /* Control. */
  int (*ctrl)(nexar__req_t *req);
  /* Device buffers staged through host memory (user threads only): copied
   * back when the request is completed; NULL on the host path. */
  nexar__stage_t *stage;
  /* RPC call: the request payload (moved to the send when started), the
   * deadline (ns), the call id and whether it waits in the pending table
   * (linked through next/prev). */
  uint8_t *rpc_tx;
  uint64_t rpc_deadline;
  uint64_t rpc_id;
  bool rpc_pending;
};

/* ---- Communicator. */
#define NEXAR__FP_RING 64 /* collective fingerprints kept per comm */
struct nexar_comm {
  nexar_ctx_t *ctx;
  uint64_t id;
  int rank, size;
  int *world_ranks;     /* comm rank -> world rank */
  uint64_t coll_seq;    /* next collective number (progress thread) */
  nexar__req_t *posted; /* posted receives, in post order */
  nexar__req_t *posted_tail;
  nexar__imsg_t *unexp; /* unexpected messages, in arrival order */
  nexar__imsg_t *unexp_tail;
  pthread_mutex_t err_mu;
  char last_error[NEXAR__ERRMSG_MAX];
  /* Collectives (progress thread). */
  nexar__sched_t *active;              /* running schedules */
  nexar__fp_t fp_ring[NEXAR__FP_RING]; /* fingerprints of recent calls */
  uint64_t fp_seq[NEXAR__FP_RING];     /* their coll_seq + 1 (0: empty) */
  /* Failures (engine, emu): 0, or the code every operation on the comm
   * fails with (NEXAR_ERR_REVOKED, _PEER_FAILED, _ABORTED, _EXCLUDED) until
   * it is rebuilt; revoke_msg says why. */
  _Atomic int revoked;
  char revoke_msg[NEXAR__ERRMSG_MAX];
  uint32_t epoch;          /* +1 at each rebuild (shrink, grow) */
  struct nexar__agree *ag; /* the agreement that retires this id, or NULL */
  /* The members' host groups for two-level collectives (algos_hier.c;
   * one allocation), computed for one epoch and size, or NULL. */
  struct nexar__hosts *hosts;
  /* Scratch of the last collective that needed one, kept for the next
   * (a fresh allocation of megabytes costs a page fault per page, each
   * call); busy while a running schedule uses it. Progress thread. */
  uint8_t *scratch;
  uint64_t scratch_bytes;
  bool scratch_busy;
  int coll_poison;     /* sticky NEXAR_ERR_MISMATCH */
  uint64_t poison_seq; /* from this collective on */
  char poison_msg[NEXAR__ERRMSG_MAX];
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
} nexar__ep_ops_t;

struct nexar__ep {
  int fd, epfd, evfd, tfd; /* socket, epoll, kick eventfd, linger timer */
  struct sockaddr_storage local;
  socklen_t local_len;
  char local_str[64];
  bool gso;
  nexar__identity_t id;
  const nexar__ep_ops_t *ops;
  void *owner;                  /* nexar_ctx_t or nexar_seed_t */
  const nexar__params_t *prm;   /* the owner's settings; NULL: the seed's */
  const nexar__host_id_t *host; /* where this process runs; NULL: unknown */
  int shm_lfd;            /* the shared-memory rendezvous listener, or -1 */
  uint64_t shm_accept_at; /* when it is next looked at (shm.c) */
  uint64_t udp_read_at;   /* with no QUIC link: next read of it (quic.c) */
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
  uint64_t due;          /* when the next pass must run (emu) */
  uint64_t wake_at;      /* when a sleeper (progress thread or driving caller)
                            next enters the engine (emu) */
  atomic_bool driving;   /* a caller drives progress in a wait (one at a
                            time; the others wait on ccv) */
  atomic_ullong drv_end; /* when the last of them stopped (ns) */
  uint64_t linger_ns;    /* NEXAR_PROGRESS_LINGER_US in ns */
  uint64_t tmr_at;       /* when tfd is armed to fire; 0: not armed (emu) */
  uint64_t spin_ns;      /* NEXAR_SPIN_US in ns */
  unsigned yield_every;  /* polls between yields while spinning: 1 on an
                            oversubscribed host (cluster/host.c), else 8 */
  /* Operation queue from threads that found the engine busy. */
  pthread_mutex_t qmu;
  nexar__req_t *q_head, *q_tail;
  atomic_bool ev_armed; /* evfd was written and not yet read */
  /* Completion signalling to user threads that do not drive. */
  pthread_mutex_t cmu;
  pthread_cond_t ccv;
  int waiters;
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
  bool resuming;         /* inside that catch-up read */
  bool resume_due;       /* a pause was seen while reading (udp.c) */
  size_t rcvbuf_bytes;   /* the socket's receive buffer (udp.c) */
  size_t rx_pass_bytes;  /* bytes the last receive pass read */
  int rx_batch;          /* datagrams per recvmmsg call */
  int64_t data_inflight; /* data-lane bytes-in-flight floor; 0: none */
  /* A batch in txbuf the socket refused (EAGAIN/ENOBUFS): bytes
   * [tx_off, tx_len) of datagrams of tx_seg bytes to tx_to, sent by
   * nexar__udp_resume. While tx_blocked nothing else is written. */
  bool tx_blocked;
  bool tx_pollout; /* EPOLLOUT is armed on the socket */
  size_t tx_off, tx_len, tx_seg;
  struct sockaddr_storage tx_to;
  socklen_t tx_tolen;
  uint64_t tx_since;    /* when the batch was refused (ns) */
  uint64_t tx_retry_at; /* ENOBUFS: next attempt (ns); 0: wait EPOLLOUT */
};

/* ---- RPC service (rpc/rpc.c). */
typedef struct nexar__rpc_item nexar__rpc_item_t;
typedef struct nexar__rpc_fn {
  uint16_t fn_id;
  nexar_rpc_handler_t handler;
  void *user_data;
} nexar__rpc_fn_t;
#define NEXAR__RPC_BUCKETS 256
/* Handler threads beyond NEXAR_RPC_THREADS, one for each handler waiting
 * in a nested call (docs/rpc.md). */
#define NEXAR__RPC_LEND_MAX 64
/* One handler thread. */
typedef struct nexar__rpc_worker {
  nexar_ctx_t *ctx;
  pthread_t th;
  int fn;            /* function id whose handler runs, or -1 (mu) */
  bool lent;         /* its handler waits in a nested call (mu) */
  uint64_t deadline; /* the running request's caller's deadline (ns) */
  uint8_t *resp;     /* response buffer, zero at each handler's start */
} nexar__rpc_worker_t;
typedef struct nexar__rpc {
  bool inited;
  pthread_mutex_t mu; /* everything below up to the engine part */
  pthread_cond_t cv;  /* queue, stop, failure, or a handler finished */
  bool started, stop;
  nexar__rpc_fn_t *fns; /* registered handlers */
  int nfns, cap_fns;
  nexar__rpc_worker_t *w; /* nw started of maxw */
  int nw, maxw;
  int limit;  /* NEXAR_RPC_THREADS */
  int active; /* handlers running and not lent to a nested call */
  int idle;   /* threads waiting for work */
  int fseen;  /* failures handed to the application's handler */
  bool dispatching;
  nexar__rpc_item_t *q_head, *q_tail;
  int load; /* requests being received, queued or running */
  /* Engine part (emu): calls waiting for their response header. */
  uint64_t next_id;
  nexar__req_t *pending[NEXAR__RPC_BUCKETS];
} nexar__rpc_t;

/* ---- Topology: the connection graph over stable ids, next hops, relay
 * keys (cluster/topology.c, p2p/relay.c; docs/topology.md). */
enum nexar__topo_kind {
  NEXAR__TOPO_FULL = 0,      /* every pair connected */
  NEXAR__TOPO_KREGULAR = 1,  /* circulant graph of degree k */
  NEXAR__TOPO_HYPERCUBE = 2, /* i ~ i ^ 2^b, for ids below n */
};
typedef struct nexar__topo_stats {
  uint64_t sent;      /* relay frames this process originated */
  uint64_t forwarded; /* frames passed on to a next hop */
  uint64_t delivered; /* relayed messages accepted here */
  uint64_t rejected;  /* relayed messages refused (bad tag, bad origin) */
  uint64_t dropped;   /* frames dropped (hop limit, no route) */
  uint64_t rerouted;  /* frames moved off a failed link */
} nexar__topo_stats_t;
typedef struct nexar__topo {
  int kind;
  int k;                          /* kregular: the degree */
  int n;                          /* stable ids the graph spans */
  char name[NEXAR__TOPO_MAX + 1]; /* canonical spelling, e.g. "kregular:4" */
  /* Routes from this process (engine): next hop and hop count per stable
   * id (-1: unreachable), over the processes not known failed or gone. */
  int *next, *dist, *queue;
  int degree; /* neighbours in the graph (connections when all live) */
  /* Relay keys: each id's X25519 public key from its roster certificate,
   * and the pair keys derived on first use (relay.c). */
  uint8_t (*pub)[32];
  uint8_t (*ktx)[32], (*krx)[32];
  uint8_t *key_state; /* 0 not derived, 1 ready, 2 unusable */
  nexar__topo_stats_t st;
  /* Frames for a neighbour whose link is not up yet here (mesh forming),
   * FIFO per stable id (relay.c). */
  nexar__omsg_t **parked;
  int forge_as;   /* test hook (nexar__topo_test_forge): -1 */
  int test_limit; /* test hook (nexar__topo_test_hops): 0 */
} nexar__topo_t;

/* ---- Process context. */
struct nexar_ctx {
  nexar__ep_t ep;
  nexar__params_t prm;
  nexar__dev_t dev; /* device adapter and bounce cache */
  nexar__rpc_t rpc; /* RPC handlers, handler threads, pending calls */
  /* This process's stable id (its world rank when it joined; ranks in a
   * communicator are comm->rank) and the number of ids ever assigned: the
   * size of roster, peers and dead. */
  int rank, world;
  /* Stable id -> address, fingerprint and host (roster[id].host: key, pid,
   * shared-memory nonce, all zero when the seed sent no host section). */
  nexar__roster_entry_t *roster;
  /* This process's host id (host.c), sent in HELLO. */
  nexar__host_id_t host;
  nexar__link_t **peers; /* stable id -> link (neighbours only) */
  nexar__peer_t *ps;     /* stable id -> end-to-end sequence state */
  nexar__topo_t topo;    /* connection graph and routes (engine) */
  /* Stable id -> 0 member or candidate, 1 declared failed, 2 departed (left
   * gracefully, or never a member of this process's world). Engine. */
  uint8_t *dead;
  /* [world]: why each failed process failed, first-hand (the reason of
   * this process's own verdict, or the one a notice carried):
   * NEXAR_FAIL_CONNECTION proves its process gone (port closed, its
   * connection ended); HEARTBEAT and UNREACHABLE say only that it went
   * silent or out of reach, which a network partition looks like too. */
  uint8_t *dead_how;
  nexar_comm_t *world_comm;
  /* Communicators other than the world (engine, emu): id -> comm. */
  nexar_comm_t **comms;
  int ncomms, cap_comms;
  uint64_t comm_hwm; /* 1 + the largest id ever registered (engine) */
  /* Next communicator id this process may propose (user threads). */
  _Atomic uint64_t next_free_id;
  nexar__link_t *seed_conn;
  /* NEXAR_SEED and NEXAR_ADVERTISE_ADDR (0 length: not set) resolved
   * once, before the bootstrap, in the family of the local socket; elastic
   * checkpoints dial the seed there again. */
  struct sockaddr_storage seed_ss, advertise_ss;
  socklen_t seed_sl, advertise_sl;
  /* Elastic membership (elastic.c, user threads): this process left the
   * job at a checkpoint; the seed cannot admit joiners (not elastic or
   * unreachable), so later checkpoints do not ask it. */
  bool left;
  bool seed_no_admit;
  uint8_t secret_key[32];
  /* The launcher this process was started by, its embedded seed (rank 0)
   * and the ranks on this host (launcher.c, nexar_local_rank). */
  nexar__launch_t launch;
  int local_rank, local_size;
  /* Bootstrap state (progress thread). */
  int boot_state;
  int boot_rc;
  char boot_err[NEXAR__ERRMSG_MAX];
  uint64_t boot_deadline;
  uint64_t boot_say_at; /* next "still waiting for the seed" (bootstrap.c) */
  bool finalizing;      /* engine: past the final barrier */
  bool no_recovery; /* user: nexar_finalize started (no automatic rebuild) */
  /* Failures (failure.c). The list and the handler are guarded by fmu;
   * nfail is published after the entry is written. */
  int recovery; /* enum nexar__recovery */
  pthread_mutex_t fmu;
  nexar_failure_t *failures;
  _Atomic int nfail;
  nexar_failure_fn fail_fn;
  void *fail_ud;
  _Atomic bool aborted;
  bool fenced;            /* another member declared this process failed */
  uint64_t hb_timeout_ns; /* NEXAR_HEARTBEAT_TIMEOUT_MS in ns */
  uint64_t last_tick;     /* when the detector last ran (engine) */
  uint64_t hb_scan_at;    /* when it next checks the peers (engine) */
  /* Resuming after a long pause (failure.c; engine): the neighbours whose
   * probe is still unanswered. */
  uint64_t rs_check_ns; /* pauses at least this long are checked */
  bool rs_active;
  uint8_t *rs_need; /* [rs_n]: 1 while id |i| must still answer */
  int rs_n, rs_left;
  uint32_t rs_gen;          /* which check a probe belongs to */
  int rs_fail_id;           /* a probe whose link failed (-1: none) */
  int rs_fail_rc;           /* and how */
  uint64_t rs_paused;       /* how long this process did not run (ns) */
  uint64_t rs_deadline;     /* when unanswered neighbours count as gone */
  struct nexar__agree *ags; /* agreements in progress (agree.c, engine) */
};

/* ---------------- clock and small helpers ---------------- */
uint64_t nexar__now(void); /* CLOCK_MONOTONIC in ns */
void nexar__set_init_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void nexar__comm_set_error(nexar_comm_t *comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* |s| as "host", "host:port", "[ipv6]" or "[ipv6]:port" (port
 * |default_port| when none): a numeric IPv4 or IPv6 address, localhost
 * (127.0.0.1), or a host name resolved with getaddrinfo to its first
 * address of |family| (AF_UNSPEC: any family). Returns 0, or
 * NEXAR_ERR_INVALID_ARG with why it failed in |why| (syntax, or the
 * resolver's reason). Blocks while the resolver works. */
int nexar__resolve_addr(const char *s, int default_port, int family,
                        struct sockaddr_storage *ss, socklen_t *len, char *why,
                        size_t whylen);
/* nexar__resolve_addr with any family and no reason. */
int nexar__parse_addr(const char *s, int default_port,
                      struct sockaddr_storage *ss, socklen_t *len);
void nexar__addr_str(const struct sockaddr *sa, char *out, size_t n);
/* Whether |a| and |b| are the same IPv4/IPv6 address and port. */
bool nexar__addr_equal(const struct sockaddr_storage *a,
                       const struct sockaddr_storage *b);
void nexar__addr_to_wire(const struct sockaddr *sa, nexar__waddr_t *w);
int nexar__wire_to_addr(const nexar__waddr_t *w, struct sockaddr_storage *ss,
                        socklen_t *len);
int nexar__read_secret(const char *secret, const char *file, uint8_t key[32],
                       char *err, size_t errlen);

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

/* ---------------- engine.c ---------------- */
/* Opens the endpoint's transports on |bind_addr|; |prm| are the owner's
 * validated settings (NULL for the seed, which reads the defaults), |host|
 * where it runs (NULL: unknown, no same-host transport). */
int nexar__ep_init(nexar__ep_t *ep, const struct sockaddr_storage *bind_addr,
                   socklen_t len, const nexar__ep_ops_t *ops, void *owner,
                   const nexar__params_t *prm, const nexar__host_id_t *host);
int nexar__ep_start(nexar__ep_t *ep);
void nexar__ep_stop(nexar__ep_t *ep);
void nexar__ep_fini(nexar__ep_t *ep);
int nexar__ep_add_conn(nexar__ep_t *ep, nexar__link_t *c);
void nexar__ep_remove_conn(nexar__ep_t *ep, nexar__link_t *c);
/* Called by the transport before it judges what it read (ICMP reports):
 * when this process did not run for longer than ep->pause_ns since the
 * socket was last read, the rest of the reading is a catch-up
 * (ep->resuming, ep->resume_due; the engine ends it). */
void nexar__ep_check_run(nexar__ep_t *ep);
/* How long a caller whose request completed may leave the writes of that
 * pass (ACKs, credit) for its next call: the ACK delay we advertise. */
#define NEXAR__WRITE_DEFER_NS 1000000ull
/* How soon after the last caller stops driving the progress thread takes
 * over work that is due at once (a caller usually comes back sooner). */
#define NEXAR__HANDBACK_NS 50000ull
/* Starts |req| (kind CTRL or a p2p/coll start): at once on the calling
 * thread when the engine is free, else queued for whoever holds it. */
void nexar__ep_post(nexar__ep_t *ep, nexar__req_t *req);
/* User thread: one non-blocking progress pass if the engine is free. */
void nexar__ep_progress(nexar__ep_t *ep);
/* Engine (emu held): marks |req| finished with |rc| and wakes waiters. */
void nexar__req_complete(nexar__req_t *req, int rc);
/* User thread: waits until |req| is done or |deadline| (ns) passes,
 * driving progress itself while no other caller does. Returns 0 when
 * done, NEXAR_ERR_TIMEOUT otherwise. */
int nexar__req_wait(nexar__ep_t *ep, nexar__req_t *req, uint64_t deadline);
/* User thread: runs |fn| in the engine and waits for it. */
int nexar__ep_call(nexar__ep_t *ep, int (*fn)(nexar__req_t *), void *arg,
                   uint64_t deadline);

/* ---------------- p2p/match.c ---------------- */
/* Starts a send or receive on the progress thread. */
void nexar__p2p_start(nexar__req_t *req);
/* Data arrived on a remote mesh stream. */
void nexar__p2p_on_stream_data(nexar__link_t *c, int64_t sid, nexar__imsg_t *m,
                               const uint8_t *d, size_t n, bool fin);
/* Frees every incoming message of a connection being torn down. */
void nexar__p2p_conn_teardown(nexar__link_t *c);
/* Delivers a message a rank sends to itself. */
int nexar__p2p_self_send(nexar_ctx_t *ctx, nexar__req_t *req);
void nexar__p2p_on_stream_close(nexar__link_t *c, nexar__imsg_t *m);
/* Fails every request that depends on world rank |peer|. */
void nexar__p2p_fail_peer(nexar_ctx_t *ctx, int peer, int err, const char *why);
/* Checks the unexpected collective messages of the call |mine| (its
 * header template) against its fingerprint, as the call starts. */
void nexar__p2p_screen_early(nexar_comm_t *comm, const nexar__hdr_t *mine);
/* Cancels a pending request (progress thread). */
void nexar__p2p_cancel(nexar__req_t *req, int rc);
void nexar__omsg_acked(nexar__link_t *c, nexar__omsg_t *m);
/* Transport upcalls (nexar__ep_ops_t): acknowledged bytes of |m|; the
 * stream of |m| closed. */
void nexar__p2p_on_acked(nexar__link_t *c, nexar__omsg_t *m, uint64_t n);
void nexar__p2p_on_out_closed(nexar__link_t *c, nexar__omsg_t *m);
uint8_t *nexar__p2p_sink(nexar__link_t *c, nexar__imsg_t *m, size_t n);
/* The frame handlers every endpoint's ops table installs (a worker's
 * also on_teardown = nexar__p2p_conn_teardown). */
#define NEXAR__P2P_FRAME_OPS                                                  \
  .on_stream_data = nexar__p2p_on_stream_data,                                \
  .on_stream_close = nexar__p2p_on_stream_close,                              \
  .on_acked = nexar__p2p_on_acked, .on_out_closed = nexar__p2p_on_out_closed, \
  .frame_vecs = nexar__omsg_vecs, .frame_more = nexar__omsg_more,             \
  .frame_free = nexar__omsg_free, .frame_sink = nexar__p2p_sink
/* Ends the send waiting on |m|, if any, with |err|; |why| becomes its
 * communicator's error text. */
void nexar__omsg_fail(nexar__omsg_t *m, int err, const char *why);
void nexar__omsg_free(nexar__omsg_t *m);
/* Sequence state of (this process, stable id |peer|, comm |comm_id|), made
 * on first use (the table grows); NULL when out of memory. */
nexar__seqs_t *nexar__peer_seqs(nexar_ctx_t *ctx, int peer, uint64_t comm_id);
/* Drops the sequence state of |id| with |peer| (a finished agreement). */
void nexar__peer_forget_seqs(nexar_ctx_t *ctx, int peer, uint64_t id);
/* Whether stable id |peer| can no longer be reached: known failed or gone,
 * or a neighbour whose link is down. */
bool nexar__peer_gone(nexar_ctx_t *ctx, int peer);
/* Continues an incoming stream after its first header (relay.c hands a
 * relayed message back here once it is authenticated): source checks,
 * ordering, matching. */
void nexar__p2p_admit(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m);
/* Refuses message |m| from link |c|: a direct message is a protocol error
 * (the link closes); a relayed one is dropped and logged, since the link's
 * peer may only have passed it on. */
void nexar__p2p_refuse(nexar_ctx_t *ctx, nexar__link_t *c, nexar__imsg_t *m,
                       const char *why);
/* Communicator registry (engine, emu held): add, remove (the comm's
 * unexpected messages, waiting headers and per-connection sequence state are
 * dropped). */
int nexar__comm_register(nexar_ctx_t *ctx, nexar_comm_t *comm);
nexar_comm_t *nexar__find_comm(nexar_ctx_t *ctx, uint64_t id);
void nexar__comm_unregister(nexar_ctx_t *ctx, nexar_comm_t *comm);
/* Fails every p2p request of |comm| (posted, matched, queued) with |err|. */
void nexar__p2p_fail_comm(nexar_ctx_t *ctx, nexar_comm_t *comm, int err);
/* Builds and enqueues a message to world rank |peer| for |req| (a send). */
int nexar__p2p_post_send(nexar_ctx_t *ctx, nexar__req_t *req);

/* Binds message |m| to receive request |r| (its payload flows into r's
 * buffer; r completes when it has all arrived). */
void nexar__p2p_bind(nexar__imsg_t *m, nexar__req_t *r);
/* Lets the rest of |m| arrive and drops it. */
void nexar__p2p_discard(nexar_ctx_t *ctx, nexar__imsg_t *m);
/* |m| needs nothing more: freed once its stream has ended (credit is
 * returned to the peer then). */
void nexar__imsg_release(nexar__imsg_t *m);

/* ---------------- p2p/relay.c ---------------- */
/* Turns |m| (hdr = the message's own header, pre NULL) into a relay frame
 * for stable id |dest| with hop limit |limit|: the envelope (payload digest
 * and the pair-key tag) and inner header go to m->pre, the outer header to
 * m->hdr. |payload| is the |m->len| bytes to digest. Returns 0,
 * NEXAR_ERR_AUTH (no usable key for |dest|), NEXAR_ERR_NOMEM. */
int nexar__relay_wrap(nexar_ctx_t *ctx, int dest, int limit, nexar__omsg_t *m,
                      const uint8_t *payload);
/* A relay frame's envelope and inner header are in m->rbuf (m->hdr is the
 * outer header): forwards it, or delivers it here after checking its tag,
 * or drops it. */
void nexar__relay_on_prefix(nexar_ctx_t *ctx, nexar__link_t *c,
                            nexar__imsg_t *m);
/* Bytes of a frame being forwarded; returns false when |c| failed. */
bool nexar__relay_fwd_data(nexar__link_t *c, nexar__imsg_t *m, const uint8_t *d,
                           size_t n, bool fin);
/* A relayed message's payload bytes in stream order (digest). */
void nexar__relay_digest(nexar__imsg_t *m, const uint8_t *d, size_t n);
/* Stream bytes of |m| from m->sent on, up to what is available: at most
 * |max| vectors; *fin when they reach the end of the stream. */
size_t nexar__omsg_vecs(const nexar__omsg_t *m, struct iovec *v, size_t max,
                        bool *fin);
/* Whether |m| has stream bytes available beyond m->sent. */
bool nexar__omsg_more(const nexar__omsg_t *m);
/* The downstream link acknowledged more of forwarded frame |m|. */
void nexar__relay_acked(nexar__omsg_t *m);
/* Cut the links between a forwarded frame and its streams as either side
 * goes away (omsg freed, imsg freed). */
void nexar__relay_out_gone(nexar__omsg_t *m);
void nexar__relay_in_gone(nexar__imsg_t *m);
/* Frames queued on failed links that the failed neighbour never
 * acknowledged go out again along the new routes; the others are lost
 * (their sends fail). */
void nexar__relay_reroute(nexar_ctx_t *ctx);
/* The link to neighbour |id| is up: frames parked for it are queued. */
void nexar__relay_unpark(nexar_ctx_t *ctx, int id);
/* Frees what is still parked (context teardown, before the endpoint). */
void nexar__relay_fini(nexar_ctx_t *ctx);

/* ---------------- cluster/topology.c ---------------- */
/* Reads NEXAR_TOPOLOGY for a world of |n| ids (n 0: syntax only) into
 * |t|'s kind, k and name. Returns 0, or NEXAR_ERR_INVALID_ARG with |err|
 * naming the variable and the rule broken. */
int nexar__topo_parse(const char *spec, int n, nexar__topo_t *t, char *err,
                      size_t len);
/* Sets up ctx->topo for a world of |n| stable ids (after the roster): the
 * graph, routes, and each id's relay key from |certs| (may be NULL on a
 * full mesh). Returns 0, NEXAR_ERR_INVALID_ARG (err set), NEXAR_ERR_NOMEM,
 * NEXAR_ERR_AUTH / _PROTO (a certificate that is not its fingerprint's). */
int nexar__topo_init(nexar_ctx_t *ctx, int n, char *err, size_t len);
/* Elastic growth to |n| stable ids (engine): NEXAR_ERR_UNSUPPORTED on a
 * sparse topology, NEXAR_ERR_NOMEM. */
int nexar__topo_grow(nexar_ctx_t *ctx, int n);
/* Recomputes the routes after ctx->dead changed other than by a failure
 * (an elastic join or leave). */
void nexar__topo_refresh(nexar_ctx_t *ctx);
void nexar__topo_fini(nexar_ctx_t *ctx);
/* Whether stable ids |a| != |b| are neighbours. */
bool nexar__topo_adjacent(const nexar__topo_t *t, int a, int b);
/* Neighbours of |id| in increasing order into |out| (room for t->n);
 * returns their number. */
int nexar__topo_neighbours(const nexar__topo_t *t, int id, int *out);
/* Next hop towards |dest| (itself when a neighbour), or -1. */
int nexar__topo_next(nexar_ctx_t *ctx, int dest);
/* A process was declared failed or left (engine): routes are recomputed,
 * frames on dead links rerouted, processes no route reaches declared
 * failed, and running agreements re-sent to the members behind relays. */
void nexar__topo_on_failure(nexar_ctx_t *ctx);
/* Whether some pair of |comm|'s members are not neighbours (their messages
 * cross other processes). */
bool nexar__topo_comm_relayed(const nexar_comm_t *comm);
/* Which exchanges of |comm| are links: NEXAR__SHAPE_RING (r, r + 1 for
 * every r) and NEXAR__SHAPE_XOR (size a power of two and r, r ^ 2^b for
 * every r, b). Every member computes the same. */
#define NEXAR__SHAPE_RING 1u
#define NEXAR__SHAPE_XOR 2u
unsigned nexar__topo_comm_shape(const nexar_comm_t *comm);
/* Rounds of the neighbour barrier of |comm| (at least the diameter of the
 * graph its members span; the same on every member). */
int nexar__topo_flood_rounds(const nexar_comm_t *comm);
/* Comm ranks of |comm|'s members that are this process's neighbours, in
 * increasing order; returns their number. */
int nexar__topo_comm_neighbours(const nexar_comm_t *comm, int *out);
/* For tests: mesh links of this process that are up, and the relay
 * counters (engine copies; thread-safe). */
int nexar__topo_links(nexar_ctx_t *ctx);
void nexar__topo_stats(nexar_ctx_t *ctx, nexar__topo_stats_t *out);
/* The route to stable id |dest| now: next hop and hop count (-1, -1 when
 * unreachable). Returns 0 or NEXAR_ERR_INVALID_ARG. */
int nexar__topo_route(nexar_ctx_t *ctx, int dest, int *hop, int *hops);
/* Test hook: relay frames this process originates from now on claim to
 * come from stable id |as| (-1: off), which their destinations must refuse. */
void nexar__topo_test_forge(nexar_ctx_t *ctx, int as);
/* Test hook: relay frames this process originates from now on carry hop
 * limit |limit| (0: the normal one), so that a relay must drop them. */
void nexar__topo_test_hops(nexar_ctx_t *ctx, int limit);

/* ---------------- rpc/rpc.c ---------------- */
/* Sets up the RPC state of |ctx| (before the endpoint starts). */
int nexar__rpc_init(nexar_ctx_t *ctx);
/* Starts the handler threads (NEXAR_RPC_THREADS). */
int nexar__rpc_start_service(nexar_ctx_t *ctx);
/* Stops and joins the handler threads (idempotent). */
void nexar__rpc_stop(nexar_ctx_t *ctx);
/* nexar_wait on an RPC call: when the caller is a handler thread of |ctx|,
 * its place goes to other requests while it waits (true: call
 * nexar__rpc_unlend after the wait). */
bool nexar__rpc_lend(nexar_ctx_t *ctx);
void nexar__rpc_unlend(nexar_ctx_t *ctx);
/* Frees the RPC state (after the endpoint is gone). */
void nexar__rpc_fini(nexar_ctx_t *ctx);
/* Engine: starts an RPC call request. */
void nexar__rpc_start(nexar__req_t *req);
/* Engine: a header of kind RPC from |m|'s connection is next in order. */
void nexar__rpc_on_header(nexar_ctx_t *ctx, nexar_comm_t *comm,
                          nexar__imsg_t *m);
/* Engine: ends call |req| with |rc| (timeout), dropping a late response. */
void nexar__rpc_cancel(nexar__req_t *req, int rc);
/* Engine: fails every call waiting on world rank |peer|. */
void nexar__rpc_fail_peer(nexar_ctx_t *ctx, int peer, int err, const char *why);

/* ---------------- coll ---------------- */
void nexar__coll_start(nexar__req_t *req);
/* Fails a running collective with |rc|; the error text names the ranks it
 * still waits for when rc is NEXAR_ERR_TIMEOUT. */
void nexar__coll_cancel(nexar__req_t *req, int rc);
void nexar__sched_free(nexar__sched_t *s);
/* Mismatch detection (coll/mismatch.c), progress thread. started: records
 * the call's fingerprint and checks messages that arrived early; returns 0
 * or NEXAR_ERR_MISMATCH. finished: forgets a schedule. */
int nexar__coll_started(nexar__sched_t *s);
void nexar__coll_finished(nexar__sched_t *s);
/* Whether two collective headers carry the same call fingerprint
 * (collective, dtype, op, count, root, algorithm). */
bool nexar__coll_same_call(const nexar__hdr_t *a, const nexar__hdr_t *b);
/* A collective message header |h| with no posted receive: returns true
 * when it must be discarded (mismatched or stale). */
bool nexar__coll_screen(nexar_comm_t *comm, const nexar__hdr_t *h);
/* Fingerprints of |h| and the local call |mine| disagree (or the payload
 * length does): fails the comm's collectives and notifies every member. */
void nexar__coll_mismatch_hdr(nexar_comm_t *comm, const nexar__hdr_t *mine,
                              const nexar__hdr_t *h, uint64_t want_bytes);
/* Progress thread, every loop: collectives running longer than
 * NEXAR_COLL_PROBE_MS send their fingerprint to every member once. */
void nexar__coll_tick(nexar_comm_t *comm, uint64_t now);
/* A mismatch notice arrived from |from| (comm rank). */
void nexar__coll_on_notice(nexar_comm_t *comm, int from, const uint8_t *payload,
                           size_t len);
/* The barrier of nexar_finalize: numbered outside the collective sequence
 * and run even on a communicator poisoned by a mismatch. */
int nexar__coll_final_barrier(nexar_comm_t *comm);
/* Checks the NEXAR_ALGO_* settings; 0 or NEXAR_ERR_INVALID_ARG. */
int nexar__coll_params_check(const nexar__params_t *p, char *err, size_t len);

/* ---------------- cluster ---------------- */
enum nexar__recovery {
  NEXAR__RECOVERY_ABORT = 0,
  NEXAR__RECOVERY_MANUAL = 1,
  NEXAR__RECOVERY_AUTOMATIC = 2
};
/* The pseudo communicator id of process-level control messages (failure
 * notices); agreement messages use the retired comm id | NEXAR__AGREE_BIT.
 * Communicator ids never have the top bit set. */
#define NEXAR__AGREE_BIT (1ull << 63)
#define NEXAR__PROC_ID UINT64_MAX
/* failure.c. Setup (before the endpoint starts) and teardown. */
int nexar__ft_init(nexar_ctx_t *ctx, char *err, size_t errlen);
void nexar__ft_fini(nexar_ctx_t *ctx);
/* Engine: declares stable id |id| failed (idempotent): fails what needs it,
 * revokes every communicator that contains it (all of them under the abort
 * policy), closes its connection (fencing it), tells every live peer and
 * queues the application's notification. |reporter| is the id whose
 * detector saw it; |detail| says how. */
void nexar__declare_failed(nexar_ctx_t *ctx, int id, int reason, int reporter,
                           const char *detail);
/* Engine (ep ops peer_release): when the process of the ended mesh
 * connection |c| has left or failed, detaches |c| from ctx->peers and
 * frees that process's sequence state; returns whether |c| may be freed
 * (not while it holds a whole message still unreceived). Error texts and
 * nexar_failures keep its id and the roster's address. */
bool nexar__peer_release(nexar__link_t *c);
/* Engine: the |n| processes |ids| left at the checkpoint that made world
 * epoch |epoch|: every registered communicator (not the world) that
 * contains one of them is revoked (NEXAR_ERR_REVOKED), so that no member
 * waits on it. */
void nexar__comm_revoke_departed(nexar_ctx_t *ctx, const int *ids, int n,
                                 uint32_t epoch);
/* Engine: a mesh connection is gone (bootstrap.c on_closed). */
void nexar__ft_on_closed(nexar_ctx_t *ctx, nexar__link_t *c);
/* Engine: an ICMP port unreachable for |to| (after the mesh formed). */
void nexar__ft_on_unreachable(nexar_ctx_t *ctx,
                              const struct sockaddr_storage *to);
/* Engine: the process did not run for |idle_ns| and has read what was
 * queued since: fresh timeouts, and after a long pause the membership
 * check (failure.c). */
void nexar__ft_on_resume(nexar_ctx_t *ctx, uint64_t idle_ns);
/* The pass gap that counts as "this process did not run" (ep->pause_ns). */
uint64_t nexar__ft_pause_ns(const nexar_ctx_t *ctx);
/* Engine, every pass after formation: the heartbeat timeout check. */
void nexar__ft_tick(nexar_ctx_t *ctx, uint64_t now);
/* Engine: a process-level control message (kind FAILED or AGREE) with its
 * whole payload, from the authenticated stable id |from|. */
void nexar__ft_on_ctl(nexar_ctx_t *ctx, int from, const nexar__hdr_t *h,
                      const uint8_t *payload, size_t len);
/* Engine: sends a control-lane message with a copy of |payload| to stable
 * id |to| (header fields other than seq, lane and length come from |h|). */
/* Sends neighbour |to| an empty process-level HEARTBEAT message on the
 * control lane; |req| (internal, comm = the world) completes when the peer's
 * transport acknowledges it, or fails with the link. */
int nexar__ctl_probe(nexar_ctx_t *ctx, int to, nexar__req_t *req);
int nexar__ctl_send(nexar_ctx_t *ctx, int to, const nexar__hdr_t *h,
                    const void *payload, size_t len);
/* Service thread: calls the failure handler for failures not yet reported;
 * returns whether there were any. */
void nexar__ft_dispatch(nexar_ctx_t *ctx, int *seen);
/* User thread, after an operation on |comm| ended with |rc|: under the
 * automatic policy rebuilds a revoked |comm| in place. Returns the code the
 * call should return. */
int nexar__ft_after(nexar_comm_t *comm, int rc);
/* agree.c. Engine: a member failed (re-evaluates running agreements); an
 * agreement message arrived. */
void nexar__agree_on_failure(nexar_ctx_t *ctx);
void nexar__agree_on_msg(nexar_ctx_t *ctx, int from, const nexar__hdr_t *h,
                         const uint8_t *payload, size_t len);
/* Engine, on a sparse topology after a route changed: re-sends every
 * message of the running agreements to the members reached through
 * relays (one may have been lost with a failed relay). */
void nexar__agree_resend(nexar_ctx_t *ctx);
/* Frees the agreement attached to |comm| (its id is retired). */
void nexar__agree_release(nexar_ctx_t *ctx, nexar_comm_t *comm);
/* Frees every agreement (context teardown). */
void nexar__agree_fini(nexar_ctx_t *ctx);
/* Whether a message for agreement id |id| may be dropped: no agreement is
 * kept under it and its communicator id is retired (a kept agreement takes
 * every message, even after its calls ended). */
bool nexar__agree_gone(nexar_ctx_t *ctx, uint64_t id);
/* User thread: agreement on the failed members of |comm|, then either a
 * rebuild in place (|out| NULL) or a new communicator in *out. |comm| has
 * one agreement, kept until its id is retired or it is freed: a call after
 * one that failed joins it again, and a decided one answers at once (no
 * majority in place: the same NEXAR_ERR_PEER_FAILED and text each time). */
int nexar__recover(nexar_comm_t *comm, nexar_comm_t **out);
/* Communicator objects (core/api.c). */
nexar_comm_t *nexar__comm_new(nexar_ctx_t *ctx);
void nexar__comm_free(nexar_comm_t *c);
/* membership.c (engine, emu held). Revokes |comm|: every pending and later
 * operation on it fails with |code| (the first reason sticks) and |why|
 * becomes its error text, until it is rebuilt. */
void nexar__comm_revoke(nexar_comm_t *comm, int code, const char *why);
/* Rank of stable id |id| in |comm|, or -1 when it is not a member. */
int nexar__comm_rank_of(const nexar_comm_t *comm, int id);
/* Rebuilds |comm| in place: members |ids| (stable ids, in new rank order),
 * wire id |new_id| (never used before), epoch + 1; the old epoch's pending
 * operations fail and its messages are dropped. Returns 0,
 * NEXAR_ERR_EXCLUDED when this process is not in |ids|, NEXAR_ERR_NOMEM. */
int nexar__comm_rebuild(nexar_ctx_t *ctx, nexar_comm_t *comm, const int *ids,
                        int n, uint64_t new_id);
int nexar__bootstrap(nexar_ctx_t *ctx);
extern const nexar__ep_ops_t nexar__worker_ops;
/* bootstrap.c (engine): dials stable id |id| at its roster address, pinning
 * its certificate; sets ctx->peers[id]. */
int nexar__dial_peer(nexar_ctx_t *ctx, int id);
/* Raises the next communicator id this process may propose to at least |v|
 * (core/api.c; user threads). */
void nexar__bump_next_id(nexar_ctx_t *ctx, uint64_t v);
/* elastic.c. Engine: grows roster, peers and dead to |n| stable ids (the new
 * ones: no connection, dead = 2 until they are made members). Returns 0,
 * NEXAR_ERR_INVALID_ARG above NEXAR__ELASTIC_MAX_IDS, NEXAR_ERR_NOMEM. */
int nexar__ctx_grow_ids(nexar_ctx_t *ctx, int n);
/* host.c: this process's host id: the key from |override| (NEXAR_HOST_KEY,
 * hex; NULL: from the boot id and network namespace), pid, a fresh nonce.
 * Returns 0, NEXAR_ERR_INVALID_ARG (bad override) or NEXAR_ERR_INTERNAL;
 * |err| says why. */
int nexar__host_id_init(nexar__host_id_t *h, const char *override, char *err,
                        size_t len);
/* host.c: how often a polling caller yields: every poll when this host
 * runs more of the job's ranks than this process has CPUs (they take
 * turns), else every few polls. Called when the roster changes. */
void nexar__host_pace(nexar_ctx_t *ctx);
/* Engine: a joiner's JOIN from the seed: id, roster and world set up. */
int nexar__elastic_on_join(nexar_ctx_t *ctx, const uint8_t *body, size_t len);
/* Engine: bytes from, and the end of, the admission connection to the seed
 * (conn role_data set) of a checkpoint's leader. */
void nexar__elastic_seed_data(nexar__link_t *c, const uint8_t *d, size_t n);
void nexar__elastic_seed_closed(nexar__link_t *c);
/* User thread, end of a joiner's nexar_init: the first barrier of the new
 * world, which the members' checkpoint ends with. */
int nexar__elastic_joined(nexar_ctx_t *ctx);

#endif /* NEXAR_INT_H */
