/*
 * Collective schedules.
 *
 * A collective call is compiled, on the calling thread, into a schedule: a
 * list of steps (send, receive, reduce, copy, finalize) over byte ranges of
 * three buffers (the user's receive buffer, the user's send buffer and a
 * scratch buffer). Builders write an algorithm as if it ran sequentially;
 * the schedule infers the dependencies between steps from the byte ranges
 * they read and write (read-after-write, write-after-read and
 * write-after-write hazards, as in task-dataflow runtimes) and the progress
 * engine runs every step as soon as the steps it depends on are done. A
 * segmented algorithm therefore pipelines by itself: segment k of round
 * i+1 goes out while segment k+1 of round i is still arriving.
 *
 * Messages of a collective are told apart by (communicator, collective
 * sequence number, step id), never by tag arithmetic. Step ids are
 * numbered per peer and direction in build order, so the j-th send from A
 * to B matches B's j-th receive from A as long as both ranks build their
 * schedules in the same order, which every algorithm here does.
 */
#ifndef NEXAR_SCHED_H
#define NEXAR_SCHED_H

#include "p2p/p2p.h"

/* ---------------- coll ---------------- */
void nexar__coll_start(nexar__req_t *req);
/* Fails a running collective with |rc|; the error text names the ranks it
 * still waits for when rc is NEXAR_ERR_TIMEOUT. */
void nexar__coll_cancel(nexar__req_t *req, int rc);
/* A collective ran past NEXAR_OP_TIMEOUT_MS: its error text names the
 * ranks it still waits for, and it is cancelled with NEXAR_ERR_TIMEOUT. */
void nexar__coll_expire(nexar__req_t *req);
void nexar__sched_free(nexar__sched_t *s);
/* Fails every collective running on |comm| with |rc| (a revoke). */
void nexar__coll_fail_comm(nexar_comm_t *comm, int rc);
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

enum nexar__step_kind {
  NEXAR__ST_SEND,     /* send buf[off, off+len) to peer */
  NEXAR__ST_RECV,     /* receive len bytes from peer into buf[off..] */
  NEXAR__ST_REDUCE,   /* buf[off..] = buf[off..] op src_buf[src_off..] */
  NEXAR__ST_COPY,     /* buf[off..] = src_buf[src_off..], len bytes */
  NEXAR__ST_FINALIZE, /* AVG: divide buf[off, off+len) by the world size */
  NEXAR__ST_FENCE     /* orders every earlier step before every later one */
};

/* The buffers a step may name. */
enum nexar__buf {
  NEXAR__BUF_WORK = 0, /* the user's receive buffer (written) */
  NEXAR__BUF_TMP = 1,  /* scratch owned by the schedule */
  NEXAR__BUF_SEND = 2, /* the user's send buffer (only read) */
  NEXAR__BUF_COUNT = 3
};

typedef struct nexar__step {
  uint8_t kind, buf, src_buf;
  uint8_t state;  /* run time: waiting, ready, posted, done */
  bool fold;      /* RECV: buf = buf op incoming, as it lands */
  bool fold_left; /* ... or buf = incoming op buf */
  bool fold_own;  /* ... buf's operand read from src_buf[src_off..] */
  int peer;       /* comm rank (SEND/RECV) */
  uint32_t id;    /* message step id (SEND/RECV) */
  uint64_t off, len, src_off; /* bytes */
  uint32_t ndeps;             /* unfinished predecessors (run time) */
  uint32_t succ, nsucc;       /* successors: s->succ[succ .. succ+nsucc) */
} nexar__step_t;

/* The call a schedule implements: what the public API received. Counts
 * and displacements are in elements. */
typedef struct nexar__coll_args {
  int coll; /* enum nexar__coll_op */
  int algo; /* enum nexar__algo, chosen by nexar__coll_plan */
  nexar_dtype_t dtype;
  nexar_op_t op;
  size_t es;      /* element size, bytes */
  uint64_t count; /* per-call count (see each collective) */
  int root;       /* rooted collectives; -1 otherwise */
  bool in_place;
  int avg_div; /* AVG divisor of FINALIZE steps (world size) */
  bool final;  /* nexar_finalize's barrier: outside the sequence */
  const size_t *counts, *displs;   /* v-forms: per-rank counts/displs */
  const size_t *rcounts, *rdispls; /* alltoallv: the receive side */
} nexar__coll_args_t;

/* Algorithms (documented, with sources, in include/nexar.h). The id
 * travels in every message of the call and is part of its fingerprint,
 * so ranks that chose differently fail with NEXAR_ERR_MISMATCH. */
enum nexar__algo {
  NEXAR__ALGO_DEFAULT = 0,
  NEXAR__ALGO_RING = 1,
  NEXAR__ALGO_RD = 2, /* recursive doubling */
  NEXAR__ALGO_RABENSEIFNER = 3,
  NEXAR__ALGO_BINOMIAL = 4,
  NEXAR__ALGO_SCATTER_AG = 5, /* scatter + ring allgather */
  NEXAR__ALGO_RS_GATHER = 6,  /* reduce-scatter + gather */
  NEXAR__ALGO_DIRECT = 7,     /* one message per peer */
  NEXAR__ALGO_PAIRWISE = 8,
  NEXAR__ALGO_DISSEMINATION = 9,
  NEXAR__ALGO_TWO_PHASE = 10, /* fan-in to rank 0, fan-out */
  NEXAR__ALGO_NEIGHBOUR = 11, /* barrier over graph links only (topology) */
  NEXAR__ALGO_HIER = 12,      /* two-level: same host, then host leaders */
  NEXAR__ALGO_MAX = 12
};

struct nexar__sched {
  nexar__sched_t *next, *prev; /* comm->active list (progress thread) */
  nexar__req_t *user;
  nexar_comm_t *comm;
  nexar__coll_args_t a;
  nexar__hdr_t tmpl; /* header template: the call's fingerprint */
  int lane;
  uint8_t *bufs[NEXAR__BUF_COUNT];
  uint64_t tmp_bytes; /* scratch size, allocated when the schedule starts */
  bool tmp_shared;    /* the scratch is the communicator's (comm->scratch) */
  nexar__step_t *steps;
  size_t nsteps, cap;
  /* Build time. */
  int build_rc; /* first builder error (sticky) */
  /* The group the builders run over: |gsize| ranks, this one at index
   * |grank|; peers named by builders are group indices, gmap[i] the comm
   * rank of index i (NULL: the whole comm, index = comm rank). Two-level
   * algorithms (algos_hier.c) run the flat builders over a host's ranks
   * or the hosts' leaders this way. */
  int gsize, grank;
  const int *gmap;
  /* Steps that name buffer b name alias[b] at alias_off[b] + offset
   * instead (identity unless a two-level phase keeps a partial result in
   * scratch); FINALIZE steps are dropped while hold_final is set. */
  uint8_t alias[NEXAR__BUF_COUNT];
  uint64_t alias_off[NEXAR__BUF_COUNT];
  bool hold_final;
  size_t fence; /* index of the latest fence, or SIZE_MAX */
  /* Per peer: step ids handed out; from index comm->size on, the
   * clear-to-send ids (NEXAR__COLL_STEP_CTS, sched.c xfer). */
  uint32_t *nsent, *nrecvd;
  uint32_t (*edges)[2]; /* (from, to) */
  size_t nedges, cap_edges;
  /* Run time. */
  uint32_t *succ;
  uint32_t *ready; /* FIFO of runnable steps */
  size_t ready_head, ready_tail;
  size_t ndone;
  int inflight; /* posted communication steps */
  bool running;
  /* A local step (reduce, copy, finalize) runs NEXAR_PASS_SLICE_BYTES at
   * a time: |part| bytes of the step at ready_head are done, and while
   * |resuming| the rest waits for |resume|, an engine operation posted to
   * go on in the next half pass (finishing waits for it too). */
  uint64_t part;
  bool resuming;
  nexar__req_t resume;
  bool probed; /* fingerprint probe sent (mismatch.c) */
  int rc;
  nexar__req_t *reqs; /* one per step, used by SEND/RECV */
};

/* ---- Builder primitives. Each appends one step; errors are latched in
 * s->build_rc (NEXAR_ERR_NOMEM), so builders check once at the end. Zero
 * length transfers are real messages (they carry the fingerprint). */
void nexar__sched_send(nexar__sched_t *s, int buf, uint64_t off, uint64_t bytes,
                       int peer);
void nexar__sched_recv(nexar__sched_t *s, int buf, uint64_t off, uint64_t bytes,
                       int peer);
/* Receives |bytes| from |peer| and combines them into buf at |off| as they
 * land: buf[off..] = buf[off..] op incoming, or incoming op buf[off..] when
 * |left| (no scratch, no second pass). The range must not be one a step
 * that runs meanwhile sends (the receive waits for it, and a large send
 * waits for the peer's receive). */
void nexar__sched_recv_fold(nexar__sched_t *s, int buf, uint64_t off,
                            uint64_t bytes, int peer, bool left);
/* The same with the own operand read from |own| at |own_off| instead of
 * buf: buf[off..] = own[own_off..] op incoming (or incoming op own when
 * |left|), so that an out-of-place call's input needs no copy into buf
 * before it is combined. */
void nexar__sched_recv_fold_own(nexar__sched_t *s, int buf, uint64_t off,
                                int own, uint64_t own_off, uint64_t bytes,
                                int peer, bool left);
/* dst = dst op src over |bytes| bytes (a multiple of the element size). */
void nexar__sched_reduce(nexar__sched_t *s, int dst, uint64_t dst_off, int src,
                         uint64_t src_off, uint64_t bytes);
void nexar__sched_copy(nexar__sched_t *s, int dst, uint64_t dst_off, int src,
                       uint64_t src_off, uint64_t bytes);
void nexar__sched_finalize(nexar__sched_t *s, int buf, uint64_t off,
                           uint64_t bytes);
/* Every later step waits for every earlier one (for steps that carry no
 * bytes, such as barrier signals, whose order the ranges cannot show). */
void nexar__sched_fence(nexar__sched_t *s);
/* Reserves |bytes| of scratch; returns its offset in NEXAR__BUF_TMP. */
uint64_t nexar__sched_tmp(nexar__sched_t *s, uint64_t bytes);

/* ---- Algorithms: each fills |s| for the call in s->a (sizes in s->a),
 * over the group s->gsize / s->grank. */
int nexar__build_barrier(nexar__sched_t *s);
int nexar__build_bcast(nexar__sched_t *s);
int nexar__build_allreduce(nexar__sched_t *s);
int nexar__build_reduce(nexar__sched_t *s);
int nexar__build_allgather(nexar__sched_t *s); /* and allgatherv */
int nexar__build_reduce_scatter(nexar__sched_t *s);
int nexar__build_alltoall(nexar__sched_t *s); /* and alltoallv */
int nexar__build_gather(nexar__sched_t *s);   /* and gatherv */
int nexar__build_scatter(nexar__sched_t *s);  /* and scatterv */
int nexar__build_scan(nexar__sched_t *s);     /* scan and exscan */
/* The builder of s->a.coll, by s->a.algo (flat algorithms). */
int nexar__build_flat(nexar__sched_t *s);
/* Two-level forms (algos_hier.c) of barrier, bcast, allreduce, reduce and
 * allgather, for s->a.algo == NEXAR__ALGO_HIER. */
int nexar__build_hier(nexar__sched_t *s);

/* Whether the comm's ranks span several hosts and some host holds more
 * than one of them (the ranks' host keys; algos_hier.c). Computed once per
 * membership (comm->hosts, one block); false when out of memory. */
bool nexar__comm_multi_host(nexar_comm_t *comm);
/* Whether every rank of the comm has this one known host key (false when
 * out of memory). */
bool nexar__comm_one_host(nexar_comm_t *comm);

/* Picks s->a.algo for the call (thresholds and NEXAR_ALGO_* in the
 * parameter table), the same way on every rank. */
void nexar__coll_plan(nexar__sched_t *s, const nexar__params_t *prm);
/* The flat algorithm auto would choose for s->a's collective over a group
 * of |n| ranks (a two-level call's phases). */
int nexar__coll_flat_algo(const nexar__sched_t *s, const nexar__params_t *p,
                          int n);

/* Creates the schedule of a call: validates nothing (the API did), builds,
 * and seals the dependency graph. Returns 0, NEXAR_ERR_NOMEM. */
int nexar__sched_build(nexar__sched_t *s);
/* The plan cache (plan_cache.c). nexar__plan_use fills |s| (steps,
 * successors, run-time arrays, scratch size) from a kept schedule of the
 * same call: 1 when it did, 0 when none is kept (build it), or
 * NEXAR_ERR_NOMEM (nexar__sched_free releases what it took).
 * nexar__plan_keep keeps a copy of |s|, sealed and not yet started. Both
 * run on the calling thread. */
typedef struct nexar__plan nexar__plan_t;
int nexar__plan_use(nexar__sched_t *s);
void nexar__plan_keep(const nexar__sched_t *s);

/* Names of collectives and algorithms, for messages. */
const char *nexar__coll_name(int coll);
const char *nexar__algo_name(int algo);

/* Appends to |out| the comm ranks of receive steps not yet done (the ranks
 * that have not contributed), as "3, 5"; "none" when there are none. */
void nexar__sched_missing(const nexar__sched_t *s, char *out, size_t len);
/* The same for running collective |req| (the flight recorder's hook). */
void nexar__coll_waiting(const nexar__req_t *req, char *out, size_t len);

/* Collectives that combine data with a reduction op (and carry it in
 * their fingerprint). */
static inline bool nexar__coll_is_reducing(int coll) {
  return coll == NEXAR__COLL_ALLREDUCE || coll == NEXAR__COLL_REDUCE ||
         coll == NEXAR__COLL_REDUCE_SCATTER || coll == NEXAR__COLL_SCAN ||
         coll == NEXAR__COLL_EXSCAN;
}

/* Tiny helpers shared by the builders. */
static inline int nexar__pof2_floor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/* Block c of |count| elements cut into n blocks on element boundaries, the
 * first count % n blocks one element longer. */
static inline uint64_t nexar__blk_cnt(uint64_t count, int n, int c) {
  return count / (uint64_t)n + ((uint64_t)c < count % (uint64_t)n ? 1 : 0);
}
static inline uint64_t nexar__blk_off(uint64_t count, int n, int c) {
  uint64_t base = count / (uint64_t)n, extra = count % (uint64_t)n;
  return (uint64_t)c * base + ((uint64_t)c < extra ? (uint64_t)c : extra);
}

#endif /* NEXAR_SCHED_H */
