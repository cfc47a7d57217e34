/*
 * The seed's protocol core (seed_core.c): admission as a state machine that
 * does no I/O and reads no clock, in the manner of ngtcp2. The driver
 * (seed.c: QUIC endpoint, progress thread) hands it events: a connection
 * is ready (with its TLS exporter value), a whole seed frame arrived, a
 * connection closed, time passed (|now| is an argument, monotonic ns). The
 * core answers with result codes and a queue of frames to send, each to a
 * connection handle the driver gave it. tests/seed_sim.c drives it with
 * simulated workers and a simulated clock.
 *
 * Cost: each event is O(1) amortized (connections, workers and requested
 * ranks are indexed, not searched), apart from formation, which is O(N) once
 * (rank assignment and one encoding of the roster, docs/performance.md,
 * "Start-up at scale"), and an elastic admission, O(ids + members).
 * Messages: PROOF, WELCOME, REJECT, JOIN and ADMITTED, as
 * docs/wire-protocol.md section 6 gives them.
 */
#ifndef NEXAR_SEED_CORE_H
#define NEXAR_SEED_CORE_H

#include "cluster/cluster.h"

typedef struct nexar__seedc nexar__seedc_t;

/* Optional allocator (tests count the core's memory with it): realloc
 * semantics (p NULL: allocate; the core never asks for 0 bytes) and free. */
typedef struct nexar__seedc_mem {
  void *(*realloc)(void *user, void *p, size_t n);
  void (*free)(void *user, void *p);
  void *user;
} nexar__seedc_mem_t;

/* The largest world the core takes (NEXAR_WORLD_SIZE's bound): it keeps a
 * table of world entries from the start. */
#define NEXAR__SEEDC_MAX_WORLD (1 << 20)

typedef struct nexar__seedc_cfg {
  int world;      /* workers that form the cluster, 1..NEXAR__SEEDC_MAX_WORLD */
  int max_world;  /* elastic: above world; else 0 */
  int timeout_ms; /* formation deadline after |now|, >= 1 */
  uint64_t now;   /* ns, the driver's monotonic clock */
  const uint8_t *key;            /* the 32-byte cluster key (copied) */
  const nexar__seedc_mem_t *mem; /* NULL: malloc/realloc/free */
} nexar__seedc_cfg_t;

/* One frame to send on |conn|: |head| then |shared| (shared_len bytes,
 * possibly 0). |head| is valid until the next call into the core other
 * than nexar__seedc_next; |shared| likewise unless |persistent|, in which
 * case it stays valid (and the same bytes) until nexar__seedc_free: the
 * roster that every WELCOME carries is encoded once and shared so. */
typedef struct nexar__seedc_msg {
  void *conn;
  const uint8_t *head;
  size_t head_len;
  const uint8_t *shared;
  size_t shared_len;
  bool persistent;
} nexar__seedc_msg_t;

/* Returns 0, NEXAR_ERR_INVALID_ARG (bad cfg) or NEXAR_ERR_NOMEM. */
int nexar__seedc_new(const nexar__seedc_cfg_t *cfg, nexar__seedc_t **out);
void nexar__seedc_free(nexar__seedc_t *s);

/*
 * Connection |conn| (the driver's handle, never NULL) finished its TLS
 * handshake: |exporter| is its TLS exporter value, |observed| the address
 * its packets come from, |name| a text for messages that stays valid while
 * the connection does. Queues the seed's PROOF. Returns the connection's
 * slot (>= 0; the driver passes it back with the connection's events) or
 * NEXAR_ERR_NOMEM.
 */
int nexar__seedc_open(nexar__seedc_t *s, void *conn,
                      const uint8_t exporter[NEXAR__MAC_BYTES],
                      const nexar__waddr_t *observed, const char *name);

/*
 * A whole seed frame (type, body of |len| bytes) on connection |slot|.
 * Returns 0 (refusals are a queued REJECT and still 0); NEXAR_ERR_PROTO
 * with *why set when the driver must close the connection for a protocol
 * violation (its close is then reported as any other); NEXAR_ERR_AUTH
 * with *why set for an observer's QUERY without the secret's proof (the
 * driver closes the connection, sending nothing);
 * NEXAR_ERR_INVALID_ARG for a slot that is not open; NEXAR_ERR_NOMEM or
 * NEXAR_ERR_INTERNAL (the formation then fails: see nexar__seedc_result).
 * The driver takes the queued frames (nexar__seedc_next) after every call.
 */
int nexar__seedc_frame(nexar__seedc_t *s, int slot, uint8_t type,
                       const uint8_t *body, size_t len, const char **why);

/* Connection |slot| closed, with close code |code| and text |reason|
 * (the peer's, or the transport's). The slot is released. */
void nexar__seedc_closed(nexar__seedc_t *s, int slot, int code,
                         const char *reason);

/*
 * Time passed: |now| in the clock of cfg->now. Before formation, the
 * deadline: a REJECT to everyone waiting and the result NEXAR_ERR_TIMEOUT.
 * After it, the result NEXAR_OK once every WELCOME is delivered: a
 * worker's connection closed, or |idle| (may be NULL: closing is then the
 * only proof) says its handle has nothing unacknowledged. Amortized O(1):
 * each worker is judged delivered once.
 */
void nexar__seedc_tick(nexar__seedc_t *s, uint64_t now,
                       bool (*idle)(void *conn));

/* Takes the next queued frame into *m: true, or false when none is left. */
bool nexar__seedc_next(nexar__seedc_t *s, nexar__seedc_msg_t *m);

/* Whether the formation ended (the seed's result is then fixed): *rc is
 * NEXAR_OK or the error, *err its text ("" for NEXAR_OK). */
bool nexar__seedc_result(const nexar__seedc_t *s, int *rc, const char **err);

/* Counters for tests and the simulation. */
typedef struct nexar__seedc_stats {
  int workers;         /* in the cluster being formed (or formed) */
  int pending;         /* elastic joiners waiting for a checkpoint */
  int ids;             /* elastic: stable ids assigned so far */
  size_t roster_bytes; /* the shared WELCOME frame, once formed */
  uint64_t sent_bytes; /* every frame queued so far, head and shared */
} nexar__seedc_stats_t;
void nexar__seedc_stats(const nexar__seedc_t *s, nexar__seedc_stats_t *st);

#endif /* NEXAR_SEED_CORE_H */
