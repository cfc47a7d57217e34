/*
 * Collective schedules: a collective is compiled into rounds of steps
 * (send, receive, reduce, copy over byte ranges) that the progress engine
 * advances; the blocking API waits on the schedule's request. Messages of a
 * collective are told apart by (communicator, collective sequence number,
 * step), never by tag arithmetic.
 */
#ifndef NEXAR_SCHED_H
#define NEXAR_SCHED_H

#include "nexar_int.h"

enum nexar__step_kind {
  NEXAR__ST_SEND,
  NEXAR__ST_RECV,
  NEXAR__ST_REDUCE,   /* work[off..] = work[off..] op tmp[src_off..] */
  NEXAR__ST_FINALIZE, /* AVG division of work[off..] */
  NEXAR__ST_COPY_IN   /* work[off..] = sendbuf[off..] */
};

enum nexar__buf { NEXAR__BUF_WORK = 0, NEXAR__BUF_TMP = 1 };

typedef struct nexar__step {
  uint8_t kind;
  uint8_t buf;      /* for SEND/RECV: which buffer */
  int peer;         /* comm rank (SEND/RECV) */
  uint32_t id;      /* message step id (SEND/RECV) */
  uint64_t off;     /* byte offset in buf (or work for local steps) */
  uint64_t len;     /* bytes (SEND/RECV) or elements (REDUCE/FINALIZE) */
  uint64_t src_off; /* REDUCE: offset in tmp */
  uint32_t round;
} nexar__step_t;

struct nexar__sched {
  nexar__req_t *user;
  nexar_comm_t *comm;
  nexar__hdr_t tmpl; /* header template: coll_op, dtype, redop, count ... */
  int lane;
  const uint8_t *sendbuf;
  uint8_t *work, *tmp;
  nexar__step_t *steps;
  size_t nsteps, cap;
  size_t cur;       /* first step of the current round */
  int pending;      /* communication steps in flight (+1 while posting) */
  int rc;
  nexar__req_t *reqs; /* internal requests of the current round */
  size_t nreqs;
  int nranks;       /* AVG divisor */
};

/* Builders append steps; each returns 0 or NEXAR_ERR_NOMEM. */
int nexar__sched_add(nexar__sched_t *s, nexar__step_t st);

/* Algorithms (algos.c): fill |s| for the call described by s->tmpl. */
int nexar__build_barrier(nexar__sched_t *s);
int nexar__build_bcast(nexar__sched_t *s, int root, uint64_t bytes);
int nexar__build_allreduce_ring(nexar__sched_t *s, uint64_t count,
                                size_t esize);

#endif /* NEXAR_SCHED_H */
