/*
 * The core: the engine (progress, requests, the operation queue), the
 * process context and communicators that every part above shares, the route
 * table, and the slots through which the parts above plug in: request kinds
 * (nexar__ep_set_kind) and handlers (nexar__hooks_t). The core calls no
 * part above it by name.
 */
#ifndef NEXAR_CORE_H
#define NEXAR_CORE_H

#include <time.h>

#include "device/device.h"
#include "transport/transport.h"

typedef struct nexar__sched nexar__sched_t;
typedef struct nexar__peer nexar__peer_t;
typedef struct nexar__hooks nexar__hooks_t;

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
  uint64_t cap; /* receive capacity / send length in bytes */
  /* Vectored p2p (nexar_sendv, nexar_recvv): the payload gathered from /
   * scattered into nsegs entries (buf NULL; allocated with the request). */
  nexar__seg_t *segs;
  uint32_t nsegs;
  nexar__hdr_t hdr; /* send: header to send; recv (coll): expected */
  bool is_coll;
  /* A probe (nexar_probe): posted like a receive, it completes with the
   * status of the first message it matches and leaves that message to
   * the receives. */
  bool probe;
  /* A synchronous-mode send (nexar_issend), or a relayed send above the
   * end-to-end credit (rendezvous): NEXAR__SYNC_* bits (p2p/p2p.h); 0 for
   * every other request. */
  uint8_t sync;
  /* A receive bound to a rendezvous message (p2p/rdv.c), linked in its
   * communicator's rdv list until its last byte is in: the message's
   * origin (stable id), its first part's seq, its length and the bytes of
   * its later parts still to come, and its lane (data, or RPC: p2p/rdv.c
   * also takes relayed RPC messages in parts). */
  nexar__req_t *rdv_next;
  bool rdv_linked;
  uint8_t rdv_lane;
  int rdv_origin;
  uint64_t rdv_seq, rdv_total, rdv_left;
  /* A collective's folding receive: payload is combined into buf (whole
   * elements of fold_es bytes) instead of copied; NULL: copied. */
  void (*fold)(const struct nexar_req *r, uint8_t *dst, const uint8_t *src,
               size_t n);
  uint32_t fold_es;
  /* Non-NULL: the fold's own operand is read here, at the offset dst has
   * in buf, and buf is only written (no copy of it into buf first). */
  const uint8_t *fold_own;
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
  /* The flight recorder's entry of this user request (core/flight.h); 0:
   * none. */
  uint64_t flight;
};

/* ---- Communicator. */
#define NEXAR__FP_RING 64 /* collective fingerprints kept per comm */
#define NEXAR__PLANS 4    /* built schedules kept per comm */
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
  /* Receives waiting for the later parts of a rendezvous message. */
  nexar__req_t *rdv;
  /* Synchronous sends whose match acknowledgement has not come yet. */
  nexar__req_t *ssend;
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
  /* Built schedules kept for repeated calls (coll/plan_cache.c; one
   * allocation each), replaced in turn. */
  _Atomic(struct nexar__plan *) plans[NEXAR__PLANS];
  _Atomic unsigned plan_next;
  /* Payload bytes of the messages this process sent to other processes
   * on the comm (p2p/match.c; nexar_comm_bytes_sent). */
  _Atomic uint64_t tx_bytes;
  int coll_poison;     /* sticky NEXAR_ERR_MISMATCH */
  uint64_t poison_seq; /* from this collective on */
  char poison_msg[NEXAR__ERRMSG_MAX];
};

/* ---- RPC service (rpc/rpc.c; held by value in the context, its other
 * types in rpc/rpc_int.h). */
typedef struct nexar__rpc_item nexar__rpc_item_t;
typedef struct nexar__rpc_fn nexar__rpc_fn_t;
typedef struct nexar__rpc_worker nexar__rpc_worker_t;
#define NEXAR__RPC_BUCKETS 256
typedef struct nexar__rpc {
  bool inited;
  pthread_mutex_t mu; /* everything below up to the engine part */
  pthread_cond_t cv;  /* a handler finished (nexar_rpc_unregister waits) */
  pthread_cond_t wcv; /* idle handler threads: a request (one is woken),
                         stop, a failure, a place freed (all are) */
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
 * keys (queries: graph.c; set up by cluster/topology.c; used by
 * p2p/relay.c; docs/topology.md). */
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
  uint64_t dialled;   /* lazy mesh: links dialled on demand */
  uint64_t crossed;   /* lazy mesh: own dials given up for a lower rank's */
} nexar__topo_stats_t;
/* End-to-end relay credit of this process towards one destination on one
 * lane (p2p/credit.c; docs/topology.md section 10). */
typedef struct nexar__credit {
  uint64_t used;              /* bytes of credited frames in flight */
  nexar__omsg_t *head, *tail; /* relay frames waiting their turn, FIFO */
  bool requested;             /* a credit request is out (no CREDIT since) */
  /* As that process's destination: bytes of its frames that left their
   * links, not yet given back (returned in batches), and whether it asked
   * for them (the next frame to leave gives them back). */
  uint64_t owed;
  bool asked;
} nexar__credit_t;
typedef struct nexar__topo {
  int kind;
  int k;                          /* kregular: the degree */
  int n;                          /* stable ids the graph spans */
  char name[NEXAR__TOPO_MAX + 1]; /* canonical spelling, e.g. "kregular:4" */
  /* Routes from this process (engine): next hop and hop count per stable
   * id (-1: unreachable), over the processes not known failed or gone. */
  int *next, *dist, *queue;
  int degree; /* neighbours in the graph (connections when all live) */
  /* A full topology formed lazily (NEXAR_MESH_LAZY_MIN, docs/topology.md
   * section 2): every route is direct (kind stays FULL), but only the
   * hypercube's links are made at formation, watched by the failure
   * detector and flooded over; the others are dialled when first needed
   * (p2p/send.c). */
  bool lazy;
  int lazy_retired; /* crossing dials' losing links still open */
  /* Relay keys: each id's X25519 public key from its roster certificate,
   * and the pair keys derived on first use (relay.c). */
  uint8_t (*pub)[32];
  uint8_t (*ktx)[32], (*krx)[32];
  uint8_t *key_state; /* 0 not derived, 1 ready, 2 unusable */
  nexar__topo_stats_t st;
  /* Frames for a neighbour whose link is not up yet here (mesh forming),
   * FIFO per stable id (relay.c). */
  nexar__omsg_t **parked;
  /* Per origin: whole unexpected messages detached from their streams
   * (p2p/match.c maybe_detach) other than those let in whole (below):
   * their bytes (payload and record), at most NEXAR_RELAY_CREDIT_BYTES,
   * then how many more, at most NEXAR_MAX_STREAMS. */
  uint64_t *detached_bytes;
  uint32_t *detached;
  /* Per origin: unexpected messages refused by nexar__p2p_detach or
   * nexar__p2p_take_whole (p2p/detach.c), still on their streams; looked
   * at again when room comes back. */
  uint32_t *refused;
  /* Per destination and lane (data, RPC): the end-to-end credit of
   * relayed frames, [id * 2 + (lane == RPC)] (p2p/credit.c). */
  nexar__credit_t *credit;
  /* Per origin: bytes of unexpected messages above the eager size let in
   * whole (p2p/match.c maybe_take_whole), at most NEXAR_RELAY_CREDIT_BYTES. */
  uint64_t *whole;
  /* Bytes of whole unexpected messages taken off their streams beyond
   * those per-origin bounds, all origins together (p2p/detach.c), at most
   * NEXAR_UNEXPECTED_BYTES. */
  uint64_t beyond_bytes;
  int forge_as;   /* test hook (nexar__topo_test_forge): -1 */
  int test_limit; /* test hook (nexar__topo_test_hops): 0 */
} nexar__topo_t;

/* Observer connections a rank serves at once (live inspection). */
#define NEXAR__OBSERVERS_MAX 4
/* How long an observer connection lives after its handshake (ms). */
#define NEXAR__OBSERVE_MS 3000

/* ---- Process context. */
/* Buffers of eager bytes kept for reuse (nexar_ctx.pool): at most
 * NEXAR__POOL_MAX of them and NEXAR__POOL_BYTES in all; requests under
 * NEXAR__POOL_MIN bytes are not pooled. */
#define NEXAR__POOL_MAX 16
#define NEXAR__POOL_BYTES (4u << 20)
#define NEXAR__POOL_MIN 16384u

struct nexar_ctx {
  const nexar__hooks_t *hooks; /* the upper parts' handlers (api.c) */
  nexar__ep_t ep;
  nexar__params_t prm;
  nexar__dev_t dev; /* device adapter and bounce cache */
  nexar__rpc_t rpc; /* RPC handlers, handler threads, pending calls */
  /* Eager copies' and unexpected prefixes' buffers, kept for the next
   * (p2p/send.c, engine): a malloc and free of one grew and trimmed the
   * heap each time, and a page fault costs 40 us on some VMs. */
  uint8_t *pool[NEXAR__POOL_MAX];
  int npool;
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
   * and the ranks on this host (launcher.c, nexar_local_rank; owned by
   * api.c). */
  struct nexar__launch *launch;
  int local_rank, local_size;
  /* Bootstrap state (progress thread). */
  int boot_state;
  int boot_rc;
  char boot_err[NEXAR__ERRMSG_MAX];
  uint64_t boot_deadline;
  uint64_t boot_say_at; /* next "still waiting for the seed" (bootstrap.c) */
  int dial_next;        /* the next higher rank the staged mesh dials */
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
  uint32_t rs_gen;              /* which check a probe belongs to */
  int rs_fail_id;               /* a probe whose link failed (-1: none) */
  int rs_fail_rc;               /* and how */
  uint64_t rs_paused;           /* how long this process did not run (ns) */
  uint64_t rs_deadline;         /* when unanswered neighbours count as gone */
  struct nexar__agree *ags;     /* agreements in progress (agree.c, engine) */
  struct nexar__flight *flight; /* recent operations (flight.c); NULL: off */
  /* Observer connections (live inspection, cluster/observe.c; engine):
   * each is closed at its deadline, answered or not. */
  struct {
    nexar__link_t *c; /* NULL: free slot */
    uint64_t deadline;
    bool answered;
  } obs[NEXAR__OBSERVERS_MAX];
};

/* Runs |body| with |cm| bound to the world and then to each communicator
 * in ctx->comms (which does not hold the world); |body| may `continue` or
 * `break`. Engine thread. */
#define NEXAR__FOR_EACH_COMM(ctx, cm, ...)                              \
  do {                                                                  \
    for (int i_ = -1; i_ < (ctx)->ncomms; i_++) {                       \
      nexar_comm_t *cm = i_ < 0 ? (ctx)->world_comm : (ctx)->comms[i_]; \
      if (!cm) continue;                                                \
      __VA_ARGS__;                                                      \
    }                                                                   \
  } while (0)

/* ---------------- run.c ---------------- */
/* Pause detection (emu held): a pass begins and ends at |now|; whether
 * this process did not run for longer than ep->pause_ns since the socket
 * was last read (ep->run.unrun, which the engine clears after a
 * catch-up). */
void nexar__run_pass_begin(nexar__ep_t *ep, uint64_t now);
void nexar__run_pass_end(nexar__ep_t *ep, uint64_t now);
bool nexar__run_paused(nexar__ep_t *ep, uint64_t now);
/* Closes the calling thread's schedstat descriptor (reopened on its next
 * sample); called where an engine is torn down. */
void nexar__run_release(void);

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
/* How soon after the last caller stops driving the progress thread takes
 * over work that is due at once (a caller usually comes back sooner). */
#define NEXAR__HANDBACK_NS 50000ull
/* Starts |req| (kind CTRL or a p2p/coll start): at once on the calling
 * thread when the engine is free, else queued for whoever holds it. */
void nexar__ep_post(nexar__ep_t *ep, nexar__req_t *req);
/* Any thread: RPC traffic was seen (a call posted, a request or response
 * received), so passes use NEXAR_PASS_SLICE_RPC_BYTES for the next 50 ms:
 * a call then waits behind less bulk work on each side. */
void nexar__ep_rpc_seen(nexar__ep_t *ep);
/* User thread: one non-blocking progress pass if the engine is free. */
void nexar__ep_progress(nexar__ep_t *ep);
/* Engine (emu held): marks |req| finished with |rc| and wakes waiters. */
void nexar__req_complete(nexar__req_t *req, int rc);
/* Wakes the callers waiting on ep->ccv, if any, after the caller changed
 * (sequentially consistent) what they wait for: a request's done flag or
 * ep->driving. */
void nexar__ep_wake_waiters(nexar__ep_t *ep);
/* User thread: waits until |req| is done or |deadline| (ns) passes,
 * driving progress itself while no other caller does. Returns 0 when
 * done, NEXAR_ERR_TIMEOUT otherwise. */
int nexar__req_wait(nexar__ep_t *ep, nexar__req_t *req, uint64_t deadline);
/* User thread: as nexar__req_wait, until any of the |n| requests (NULL
 * entries skipped) is done. */
int nexar__req_wait_any(nexar__ep_t *ep, nexar__req_t *const *reqs, size_t n,
                        uint64_t deadline);
/* User thread: runs |fn| in the engine and waits for it. */
int nexar__ep_call(nexar__ep_t *ep, int (*fn)(nexar__req_t *), void *arg,
                   uint64_t deadline);
/* Whether a transport may have input (a cheap look, no system call). */
bool nexar__ep_ready(nexar__ep_t *ep, uint64_t now);
/* Engine lock held: releases it, waking the progress thread if the next
 * pass is due before its planned wake-up. */
void nexar__ep_leave(nexar__ep_t *ep);
/* Blocking calls (nexar_allreduce, nexar_send, ...), on the calling
 * thread: nexar__ep_defer_wake before the post lets the post's leave skip
 * waking the progress thread for what falls due next, since the call's
 * wait drives at once and runs it (a wake-up then costs a context switch
 * on a full host, for nothing: a QUIC post often leaves an ACK due a few
 * microseconds ahead). nexar__ep_defer_end after the post; the wait ends
 * with nexar__ep_settle, which does a skipped wake when the wait did not
 * drive (the request was done at once, or another thread drove). */
void nexar__ep_defer_wake(void);
void nexar__ep_defer_end(void);
void nexar__ep_settle(void);
/* Arms the progress thread's timer to fire at |t| (ns; emu held). */
void nexar__ep_arm_timer(nexar__ep_t *ep, uint64_t t);
/* The engine's halves of a pass and what a driving caller needs of them
 * (engine.c; drive.c runs them). Engine lock held: the input half (queued
 * operations, every transport's input, expired timers, the tick) and the
 * output half (writes), which returns when the next pass is due (ns; 0:
 * at once). */
void nexar__ep_input(nexar__ep_t *ep);
uint64_t nexar__ep_output(nexar__ep_t *ep);
/* Engine lock held, before a sleep on the epoll set: false when a
 * transport already has input. */
bool nexar__ep_arm(nexar__ep_t *ep);
/* Whether another thread queued an operation (no lock). */
bool nexar__ep_ops_queued(nexar__ep_t *ep);
/* Wakes the progress thread from its sleep while a caller drives. */
void nexar__ep_wake_parked(nexar__ep_t *ep);
static inline struct timespec nexar__ns_to_ts(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull),
                        (long)(ns % 1000000000ull)};
  return ts;
}
/* Engine lock held by a caller that drove (ep->driving set) until |end|
 * (ns, its last clock reading): the drive's end (the progress thread's
 * linger timer), then nexar__ep_leave. */
void nexar__ep_drive_end(nexar__ep_t *ep, uint64_t end);

/* ---------------- express.c: the express path's engine half ----------------
 * A small blocking send or receive between ranks of one host may run on
 * the caller's thread without a queued request or a whole pass
 * (p2p/express.c); these give it the engine and a wait that reads one
 * link only. */
/* User thread: takes the engine lock when it is free and no operation is
 * queued (every operation posted before is started, so a new one may
 * start here in order); false otherwise (post the general way). */
bool nexar__ep_try_own(nexar__ep_t *ep);
/* Engine lock held (nexar__ep_try_own): waits for |req| by reading the
 * input of link |l| only (l->tp->poll_link), as a driving caller: for at
 * most NEXAR_SPIN_US from req->t_start, and not past |deadline|, the
 * next due pass, an operation queued by another thread, input on any
 * other transport or link (nexar__ep_ready), or |l| leaving the ready
 * state. Returns with the lock released; true when |req| is done, false
 * when the caller must wait the general way (nexar__req_wait). */
bool nexar__ep_wait_link(nexar__ep_t *ep, nexar__req_t *req, nexar__link_t *l,
                         uint64_t deadline);
/* pace.c: a spinning caller's yield (emu not held). Where the rank has a
 * home CPU (ep->home_cpu >= 0: cluster/host.c), a thread whose yields keep
 * running another thread moves there without being bound there; where
 * ranks outnumber the host's CPUs, only while it waits on a collective of
 * at least as many ranks as the host holds (|all_here|). */
void nexar__ep_yield(nexar__ep_t *ep, bool all_here);
/* User thread (wait.c): nexar_wait for a request that lives in the
 * caller's frame (not freed; no RPC lending): waits until its
 * NEXAR_OP_TIMEOUT_MS deadline, expires it then, copies its status into
 * |status| when given and returns its result through the hooks (as
 * nexar_wait). */
int nexar__req_wait_local(nexar__req_t *r, nexar_status_t *status);
/* User thread (wait.c): the end of a blocking call whose post
 * (nexar__ep_defer_wake before it) returned |rc| and request *preq: |rc|
 * when it failed, else nexar_wait(preq, status). */
int nexar__wait_posted(int rc, nexar__req_t **preq, nexar_status_t *status);

/* Handlers of the parts above p2p that p2p and cluster call (one table per
 * process, ctx->hooks, filled by src/api/api.c): what arrives for RPC and
 * the collectives, control messages for the cluster, and per-pass work. */
typedef struct nexar__hooks {
  /* RPC: a header of kind RPC is next in order on |comm|; world rank
   * |peer| failed (its calls fail); a failure was queued (the service
   * thread that reports it wakes). */
  void (*rpc_header)(nexar_ctx_t *ctx, nexar_comm_t *comm, nexar__imsg_t *m);
  void (*rpc_fail_peer)(nexar_ctx_t *ctx, int peer, int err, const char *why);
  void (*rpc_wake)(nexar_ctx_t *ctx);
  /* Collectives (coll/mismatch.c, coll/sched.c; nexar__coll_* in
   * coll/sched.h say what each does). */
  bool (*coll_same_call)(const nexar__hdr_t *a, const nexar__hdr_t *b);
  bool (*coll_screen)(nexar_comm_t *comm, const nexar__hdr_t *h);
  void (*coll_mismatch_hdr)(nexar_comm_t *comm, const nexar__hdr_t *mine,
                            const nexar__hdr_t *h, uint64_t want_bytes);
  void (*coll_on_notice)(nexar_comm_t *comm, int from, const uint8_t *payload,
                         size_t len);
  void (*coll_tick)(nexar_comm_t *comm, uint64_t now);
  /* Fails every collective running on |comm| with |rc|. */
  void (*coll_fail_comm)(nexar_comm_t *comm, int rc);
  /* Cluster: a process-level control message (FAILED, AGREE) with its
   * whole payload from stable id |from|; whether messages for agreement id
   * |id| may be dropped; frees |comm|'s agreement. */
  void (*ctl)(nexar_ctx_t *ctx, int from, const nexar__hdr_t *h,
              const uint8_t *payload, size_t len);
  bool (*agree_gone)(nexar_ctx_t *ctx, uint64_t id);
  /* User thread, after an operation on |comm| ended with |rc|: the code
   * the call returns (nexar__ft_after: automatic recovery). */
  int (*after)(nexar_comm_t *comm, int rc);
  /* An RPC handler thread waits for a nested call: it lends its place
   * (true: unlend after the wait; nexar__rpc_lend). */
  bool (*rpc_lend)(nexar_ctx_t *ctx);
  void (*rpc_unlend)(nexar_ctx_t *ctx);
  /* The RPC service thread: calls the failure handler for the failures
   * not yet reported (|seen|: how many were). */
  void (*ft_dispatch)(nexar_ctx_t *ctx, int *seen);
  void (*agree_release)(nexar_ctx_t *ctx, nexar_comm_t *comm);
  /* The flight recorder's dump: the comm ranks running collective |req|
   * still waits for, as "2, 5" ("none" when none). */
  void (*coll_waiting)(const nexar__req_t *req, char *out, size_t len);
} nexar__hooks_t;

/* How the part that owns a request kind starts it (engine, emu held) and
 * cancels it (a timeout, a revoked communicator: ends it with |rc|). The
 * parts register theirs at nexar_init (src/api/api.c). */
typedef struct nexar__req_ops {
  void (*start)(nexar__req_t *req);
  void (*cancel)(nexar__req_t *req, int rc);
  /* The request ran past its deadline: records why on its communicator
   * and cancels it with NEXAR_ERR_TIMEOUT. */
  void (*expire)(nexar__req_t *req);
} nexar__req_ops_t;
/* Registers |ops| for request kind |kind| (not CTRL) on |ep|. */
void nexar__ep_set_kind(nexar__ep_t *ep, int kind, const nexar__req_ops_t *ops);
/* Engine: cancels |req| through its kind's operations; expires it (past
 * its deadline). */
void nexar__req_cancel(nexar__req_t *req, int rc);
void nexar__req_expire(nexar__req_t *req);

/* ---------------- ctx.c, graph.c: errors, communicators, routes -------- */
/* The last-error texts: of this thread's nexar_init, of |comm|. */
void nexar__set_init_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void nexar__comm_set_error(nexar_comm_t *comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The pseudo communicator id of process-level control messages (failure
 * notices); agreement messages use the retired comm id | NEXAR__AGREE_BIT.
 * Communicator ids never have the top bit set. */
#define NEXAR__AGREE_BIT (1ull << 63)
#define NEXAR__PROC_ID UINT64_MAX
/* Communicator objects. */
nexar_comm_t *nexar__comm_new(nexar_ctx_t *ctx);
void nexar__comm_free(nexar_comm_t *c);
/* Raises the next communicator id this process may propose to at least |v|
 * (user threads). */
void nexar__bump_next_id(nexar_ctx_t *ctx, uint64_t v);
/* Rank of stable id |id| in |comm|, or -1 when it is not a member. */
int nexar__comm_rank_of(const nexar_comm_t *comm, int id);
/* Whether stable ids |a| != |b| are neighbours. */
bool nexar__topo_adjacent(const nexar__topo_t *t, int a, int b);
/* Whether |a| != |b| share a link made at formation and kept for the
 * job: neighbours, but on a lazy full topology the hypercube's pairs only
 * (the links failures and the final barrier flood over). */
bool nexar__topo_linked(const nexar__topo_t *t, int a, int b);
/* Next hop towards |dest| (itself when a neighbour), or -1. */
int nexar__topo_next(nexar_ctx_t *ctx, int dest);

/* Breadth-first search in the graph from |src| over ids not |dead| (NULL:
 * all): hop counts into |dist| (-1: unreached) and, when |next| is set, the
 * first hop towards each; |queue| and |nb| have room for t->n ids. */
void nexar__topo_bfs(const nexar__topo_t *t, int src, const uint8_t *dead,
                     int *dist, int *next, int *queue, int *nb);
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
/* Comm ranks of |comm|'s members linked to this process
 * (nexar__topo_linked), in increasing order; returns their number. */
int nexar__topo_comm_neighbours(const nexar_comm_t *comm, int *out);
/* The ids linked to |id| (nexar__topo_linked) in increasing order into
 * |out| (room for t->n); returns their number. */
int nexar__topo_neighbours(const nexar__topo_t *t, int id, int *out);

/* ---------------- stage.c: device buffers staged through host memory,
 * the context's adapter ---------------- */
/* Sets up |dev| with the adapter NEXAR_DEVICE names (cpu, cuda or auto).
 * Returns 0, or NEXAR_ERR_INVALID_ARG / NEXAR_ERR_UNSUPPORTED with |err|
 * naming the variable. */
int nexar__dev_init(nexar__dev_t *dev, const char *which, uint64_t cache_max,
                    char *err, size_t errlen);
/* Frees the bounce cache. Every staged request must have completed. */
void nexar__dev_fini(nexar__dev_t *dev);

/*
 * Classifies [ptr, ptr + bytes) for call |what| ("send", "allreduce") of
 * |comm|, role |role| ("send", "receive"). Returns NEXAR_MEM_HOST,
 * NEXAR_MEM_DEVICE or a negative code (message recorded on |comm|).
 */
int nexar__dev_classify(nexar__dev_t *dev, nexar_comm_t *comm, const char *what,
                        const char *role, const void *ptr, uint64_t bytes);

/*
 * Stages the device buffer |ptr| of a call: allocates a bounce buffer of
 * |bytes| (every region lies below it), copies the |in| regions to it, and
 * records the |out| regions for nexar__stage_finish. Region lists may be
 * unsorted and overlapping (they are merged here) and are not kept.
 * Creates *st on the first buffer. On success *host is the bounce buffer.
 * Returns 0, NEXAR_ERR_NOMEM or the adapter's error (message recorded on
 * |comm|); on failure *st is left for nexar__stage_abort.
 */
int nexar__stage_add(nexar__stage_t **st, nexar__dev_t *dev, nexar_comm_t *comm,
                     const char *what, const char *role, void *ptr,
                     uint64_t bytes, const nexar__region_t *in, size_t nin,
                     const nexar__region_t *out, size_t nout, uint8_t **host);

/*
 * Completes a staged request whose result is |rc|: when rc is NEXAR_OK or
 * NEXAR_ERR_TRUNCATE copies the out regions (clipped to [0, limit)) back
 * to device memory and synchronizes, then releases the bounce buffers and
 * frees |st|. Returns |rc|, or the adapter's error when rc was NEXAR_OK
 * (message recorded on the call's communicator).
 */
int nexar__stage_finish(nexar__stage_t *st, int rc, uint64_t limit);
/* Releases |st| (may be NULL) without copying anything back. */
void nexar__stage_abort(nexar__stage_t *st);

/* An adapter's name for messages ("(unnamed)" when it has none). */
const char *nexar__dev_ops_name(const nexar_device_ops_t *ops);
/* An adapter's negative result as a result code of the API: known codes
 * pass through, anything else is NEXAR_ERR_DEVICE. */
int nexar__dev_adapter_rc(int rc);

#endif /* NEXAR_CORE_H */
