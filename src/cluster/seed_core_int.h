/* The seed core's state, shared by seed_core.c and seed_admit.c only. */
#ifndef NEXAR_SEED_CORE_INT_H
#define NEXAR_SEED_CORE_INT_H

#include <stdlib.h>

#include "cluster/seed_core.h"

/* A WELCOME's or JOIN's own bytes: the frame header and the body's first
 * field (rank or id); the rest is the same for every recipient. */
#define WELCOME_HEAD (NEXAR__SEED_FRAME_HDR + 4u)

enum nexar__seedc_kind {
  NEXAR__SEEDC_FREE = 0, /* slot unused */
  NEXAR__SEEDC_NEW,      /* ready, no HELLO or ADMIT taken yet */
  NEXAR__SEEDC_WORKER,   /* a worker of the cluster (idx into w) */
  NEXAR__SEEDC_JOINER,   /* a pending elastic joiner (idx into jw) */
  NEXAR__SEEDC_ADMITTED  /* a joiner sent its JOIN: nothing more to take */
};

/* One connection, found by its slot (the driver keeps it beside its own
 * record of the connection). */
typedef struct nexar__seedc_conn {
  void *h; /* the driver's handle */
  const char *name;
  nexar__waddr_t observed;
  uint8_t exp[NEXAR__MAC_BYTES]; /* its TLS exporter value */
  int kind;
  int idx; /* into w or jw; the next free slot while free */
} nexar__seedc_conn_t;

/* A worker or pending joiner: what its roster entry and messages need. */
typedef struct nexar__seedc_worker {
  int slot; /* connection slot; -1 once closed (or a forgotten joiner) */
  int req;  /* requested rank, or -1 */
  int rank;
  bool delivered;
  nexar__roster_entry_t e;
  uint8_t *cert; /* its certificate, kept on sparse topologies only */
  uint16_t cert_len;
  char host[NEXAR__HOST_MAX + 1];
  nexar__job_t job; /* its settings the job shares (HELLO) */
} nexar__seedc_worker_t;

/* A queued frame: head bytes in s->ob at |off|. */
typedef struct nexar__seedc_out {
  void *conn;
  size_t off, len;
  const uint8_t *shared;
  size_t shared_len;
  bool persistent;
} nexar__seedc_out_t;

struct nexar__seedc {
  nexar__seedc_mem_t mem;
  uint8_t key[32];
  int world, max_world, timeout_ms;
  uint64_t deadline;
  /* Connections: slots, reused through a free list. */
  nexar__seedc_conn_t *cs;
  int ncs, free_slot;
  size_t cs_cap;
  /* The workers in arrival order, and each requested rank's holder (index
   * into w, or -1; world entries). */
  nexar__seedc_worker_t *w;
  int nw;
  size_t w_cap;
  int *req;
  char topo[NEXAR__TOPO_MAX + 1]; /* every worker's NEXAR_TOPOLOGY */
  nexar__job_t job; /* the job's settings: rank 0's, in WELCOME and JOIN */
  nexar__seed_hello_t hello; /* the HELLO being read */
  bool formed;
  uint8_t *wf; /* the WELCOME frame, encoded once (rank 0) */
  size_t wf_len;
  int dcur; /* workers before it are delivered */
  /* Elastic: the roster of every id assigned (nids), the members as of the
   * last admission, the joiners waiting in arrival order: jw[jhead, jlen)
   * with njw of them still there (forgotten ones have slot -1). */
  nexar__roster_entry_t *ids;
  size_t ids_cap;
  int nids, current;
  nexar__seedc_worker_t *jw;
  int jhead, jlen, njw;
  size_t jw_cap;
  /* Output: queued frames, their heads, and buffers freed once the queue
   * is taken. */
  nexar__seedc_out_t *oq;
  size_t noq, oq_pos, oq_cap;
  uint8_t *ob;
  size_t ob_len, ob_cap;
  uint8_t **tmp;
  size_t ntmp, tmp_cap;
  uint64_t sent_bytes;
  /* The result. */
  bool done;
  int rc;
  char err[NEXAR__ERRMSG_MAX];
};

void *nexar__seedc_realloc(nexar__seedc_t *s, void *p, size_t n);
void nexar__seedc_dealloc(nexar__seedc_t *s, void *p);
/* Grows the array at |*(void **)p| of |*cap| elements of |size| bytes to
 * hold |need|, doubling. Returns 0 or NEXAR_ERR_NOMEM. */
int nexar__seedc_grow(nexar__seedc_t *s, void *p, size_t *cap, size_t need,
                      size_t size);
/* Queues a frame for slot |slot|'s connection (|head| is copied). Returns
 * 0 or NEXAR_ERR_NOMEM. */
int nexar__seedc_queue(nexar__seedc_t *s, int slot, const uint8_t *head,
                       size_t head_len, const uint8_t *shared,
                       size_t shared_len, bool persistent);
/* Queues a REJECT (refuse: logged too). */
void nexar__seedc_reject(nexar__seedc_t *s, int slot, int code,
                         const char *reason);
void nexar__seedc_refuse(nexar__seedc_t *s, int slot, int code,
                         const char *why);
void nexar__seedc_release(nexar__seedc_t *s, int slot);
/* Checks a worker proof on |slot|'s session (constant time): 0, or
 * NEXAR_ERR_AUTH with |why| (NEXAR__REASON_MAX bytes) set. */
int nexar__seedc_check_proof(nexar__seedc_t *s, int slot, const uint8_t *proof,
                             char *why);
bool nexar__seedc_loopback(const nexar__waddr_t *a);
/* Fills |w| from HELLO |h| on |slot|. */
void nexar__seedc_record(nexar__seedc_t *s, int slot,
                         const nexar__seed_hello_t *h,
                         nexar__seedc_worker_t *w);
/* seed_admit.c: a HELLO with the join flag (in s->hello); an ADMIT; a
 * pending joiner (index into jw) is gone. */
int nexar__seedc_join_hello(nexar__seedc_t *s, int slot);
int nexar__seedc_admit(nexar__seedc_t *s, int slot, const uint8_t *body,
                       size_t len, const char **why);
void nexar__seedc_forget_joiner(nexar__seedc_t *s, int i);

#endif /* NEXAR_SEED_CORE_INT_H */
