/*
 * The flight recorder (docs/debugging.md): a bounded ring of this process's
 * recent operations (collectives and user point-to-point requests), written
 * as JSON lines on a failure, on an operation's deadline, on SIGUSR1 and by
 * nexar_flight_dump. Recording runs in the engine (emu held): no lock and
 * no allocation of its own per operation, a few stores at post and at
 * completion.
 */
#ifndef NEXAR_FLIGHT_H
#define NEXAR_FLIGHT_H

#include "core/core.h"

enum nexar__flight_state {
  NEXAR__FL_POSTED = 1, /* started, not finished */
  NEXAR__FL_DONE = 2,
  NEXAR__FL_FAILED = 3
};

/* One operation (64-bit fields first; about 120 bytes). */
typedef struct nexar__flight_ent {
  uint64_t id;       /* this process's operation number, from 1; 0 empty */
  uint64_t comm;     /* communicator id */
  uint64_t seq;      /* collective sequence number; UINT64_MAX: p2p */
  uint64_t count;    /* elements (collectives), bytes (p2p) */
  uint64_t t_post;   /* CLOCK_MONOTONIC ns */
  uint64_t t_end;    /* 0 while posted */
  const char *op;    /* static name: "allreduce", "send", "recv" */
  const char *algo;  /* static algorithm name, or NULL */
  nexar__req_t *req; /* while posted: the request (the waits of a dump) */
  uint32_t epoch;    /* communicator epoch */
  int32_t crank;     /* this process's rank in the communicator */
  int32_t csize;     /* communicator size */
  int32_t dtype;     /* -1: none */
  int32_t root;      /* rooted collectives; p2p: the peer's comm rank */
  int32_t tag;       /* p2p tag (-1: collectives) */
  int32_t rc;        /* failed: the result code */
  uint8_t state;     /* enum nexar__flight_state */
  char wait[36];     /* failed collective: the comm ranks it waited for */
} nexar__flight_ent_t;

typedef struct nexar__flight {
  nexar__flight_ent_t *ring; /* cap entries; NULL: the recorder is off */
  uint32_t cap;              /* a power of two */
  uint64_t next;             /* id of the next operation */
  uint64_t last_auto;        /* when the last automatic dump ran (ns) */
  unsigned sig_seen;         /* SIGUSR1 requests handled */
  char dir[512]; /* automatic dumps: NEXAR_DEBUG_FILE's folder, or "" */
} nexar__flight_t;

/* Sets up |ctx|'s recorder (NEXAR_FLIGHT_RECORDER entries, the dump folder)
 * and the SIGUSR1 handler when the application has none. 0 or
 * NEXAR_ERR_NOMEM. */
int nexar__flight_init(nexar_ctx_t *ctx);
void nexar__flight_fini(nexar_ctx_t *ctx);

/* Engine: records the start of user request |req| (op: static name, algo:
 * static name or NULL, seq: UINT64_MAX for p2p) and links it to its entry
 * (req->flight). */
void nexar__flight_post(nexar_ctx_t *ctx, nexar__req_t *req, const char *op,
                        const char *algo, uint64_t seq, int dtype,
                        uint64_t count, int root, int tag);
/* Engine: a send of |bytes| to comm rank |peer| with |tag| on |comm| that
 * started and ended at once, with no request (the express path,
 * p2p/express.c): one finished entry, stamped with the engine's last
 * clock reading (ep.pass_now), as a request's end is. */
void nexar__flight_sent(nexar_ctx_t *ctx, nexar_comm_t *comm, uint64_t bytes,
                        int peer, int tag);
/* Engine: |req| ends with |rc| (nexar__req_complete). A failure that
 * names the state of the job (PEER_FAILED, TIMEOUT, REVOKED) dumps the
 * ring (at most once a second). */
void nexar__flight_end(nexar__req_t *req, int rc);
/* Engine: a collective is failing; |waits| names the comm ranks it still
 * waited for ("2, 5"). */
void nexar__flight_waits(nexar__req_t *req, const char *waits);
/* Engine, every pass: a SIGUSR1 since the last look dumps the ring. */
void nexar__flight_poll(nexar_ctx_t *ctx);
/* Engine: writes the ring to |path| (NULL: the automatic dump's file).
 * 0, NEXAR_ERR_INVALID_ARG (no path), NEXAR_ERR_SYS (cannot write). */
int nexar__flight_write(nexar_ctx_t *ctx, const char *path);

/* Engine: the operations still posted, newest first, at most |max| (live
 * inspection, docs/debugging.md): name, communicator, sequence number, how
 * long posted before |now| and the comm ranks each waits for. Returns how
 * many were written (0 with the recorder off). */
int nexar__flight_live(nexar_ctx_t *ctx, uint64_t now, nexar__insp_op_t *out,
                       int max);

#endif /* NEXAR_FLIGHT_H */
