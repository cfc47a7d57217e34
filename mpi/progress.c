/*
 * Progress of the layer-built schedules (mpi_int.h): the list of active
 * schedules, the step that advances them from any MPI call, and the wait
 * loops that keep them moving while a blocking call waits.
 *
 * Locking: the list and its links are under g_lock; a request is stepped
 * only by the thread holding its |busy| flag. nxm_progress takes the flags
 * of a batch under g_lock, steps them without it (a step may run a user
 * op, or a finish hook that takes nxm_lock), then relinks them under
 * g_lock. nxm_progress_remove unlinks under g_lock and then takes the
 * flag, so a request is never freed while a step runs; a caller must not
 * hold nxm_lock there (mpi/req.c frees orphans outside it).
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "mpi_int.h"

/* Schedules stepped per nxm_progress call: bounds the work (and the stack)
 * of one call whatever the number of active schedules; the rest come
 * first next time. */
#define STEP_BATCH 16
/* Wait-loop turns that only yield before the sleeps begin, and the
 * longest sleep (ns). */
#define SPIN_YIELDS 1024u
#define SPIN_MAX_SLEEP_NS 50000L

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static nxm_req_t *g_head, *g_tail;
static atomic_int g_nactive;
/* Set while this thread steps schedules: a nested call does nothing. */
static _Thread_local int t_stepping;

static void unlink_req(nxm_req_t *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    g_head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    g_tail = r->prev;
  r->prev = r->next = NULL;
  r->listed = 0;
  atomic_fetch_sub(&g_nactive, 1);
}

static void append_req(nxm_req_t *r) {
  r->prev = g_tail;
  r->next = NULL;
  if (g_tail)
    g_tail->next = r;
  else
    g_head = r;
  g_tail = r;
  r->listed = 1;
  atomic_fetch_add(&g_nactive, 1);
}

void nxm_progress_add(nxm_req_t *r) {
  r->sched = 1;
  pthread_mutex_lock(&g_lock);
  append_req(r);
  pthread_mutex_unlock(&g_lock);
}

void nxm_progress_remove(nxm_req_t *r) {
  if (!r->sched) return;
  pthread_mutex_lock(&g_lock);
  if (r->listed) unlink_req(r);
  pthread_mutex_unlock(&g_lock);
  /* A step begun before the unlink ends soon: it never blocks. */
  while (atomic_exchange(&r->busy, 1)) sched_yield();
}

int nxm_progress_active(void) {
  return atomic_load_explicit(&g_nactive, memory_order_acquire) != 0;
}

void nxm_progress(const nxm_req_t *skip) {
  if (!nxm_progress_active() || t_stepping) return;
  if (pthread_mutex_trylock(&g_lock) != 0) return; /* another thread steps */
  nxm_req_t *batch[STEP_BATCH];
  int done[STEP_BATCH];
  size_t n = 0;
  for (nxm_req_t *r = g_head; r && n < STEP_BATCH; r = r->next)
    if (r != skip && !atomic_exchange(&r->busy, 1)) batch[n++] = r;
  pthread_mutex_unlock(&g_lock);
  if (n == 0) return;
  t_stepping = 1;
  for (size_t i = 0; i < n; i++) {
    done[i] = 0;
    nxm_req_step(batch[i], &done[i]);
  }
  t_stepping = 0;
  /* Finished ones leave the list, the others go to its end. */
  pthread_mutex_lock(&g_lock);
  for (size_t i = 0; i < n; i++) {
    nxm_req_t *r = batch[i];
    if (r->listed) {
      unlink_req(r);
      if (!done[i]) append_req(r);
    }
    atomic_store(&r->busy, 0);
  }
  pthread_mutex_unlock(&g_lock);
}

/* ---- Wait loops */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* nexar's op timeout (NEXAR_OP_TIMEOUT_MS, default 300 s): how long one
 * wait of the layer may last. */
static double op_timeout_ms(void) {
  const char *v = getenv("NEXAR_OP_TIMEOUT_MS");
  long ms = v ? strtol(v, NULL, 10) : 0;
  return ms > 0 ? (double)ms : 300000.0;
}

void nxm_spin_init(nxm_spin_t *sp) {
  sp->deadline_ms = now_ms() + op_timeout_ms();
  sp->turns = 0;
}

int nxm_spin(nxm_spin_t *sp, const nxm_req_t *skip) {
  nxm_progress(skip);
  if (sp->turns < SPIN_YIELDS) {
    sched_yield();
  } else {
    unsigned k = sp->turns - SPIN_YIELDS;
    long ns = k < 16 ? 1000L << k : SPIN_MAX_SLEEP_NS;
    if (ns > SPIN_MAX_SLEEP_NS) ns = SPIN_MAX_SLEEP_NS;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
  }
  if (sp->turns < SPIN_YIELDS + 16) sp->turns++;
  return now_ms() <= sp->deadline_ms;
}

int nxm_wait_nexar(nexar_req_t **q, nexar_status_t *st) {
  nexar_status_t tmp;
  if (!st) st = &tmp;
  nxm_spin_t sp;
  nxm_spin_init(&sp);
  /* nexar_test enforces the op timeout itself; past the layer's own
   * deadline nexar_wait completes the request (timed out by then). */
  while (nxm_progress_active()) {
    int done = 0;
    int rc = nexar_test(q, &done, st);
    if (done || rc != NEXAR_OK) return rc;
    if (!nxm_spin(&sp, NULL)) break;
  }
  return nexar_wait(q, st);
}

int nxm_probe_nexar(nexar_comm_t *nc, int source, int tag, nexar_status_t *st) {
  nxm_spin_t sp;
  nxm_spin_init(&sp);
  while (nxm_progress_active()) {
    int flag = 0;
    int rc = nexar_iprobe(nc, source, tag, &flag, st);
    if (flag || rc != NEXAR_OK) return rc;
    if (!nxm_spin(&sp, NULL)) return NEXAR_ERR_TIMEOUT;
  }
  return nexar_probe(nc, source, tag, st);
}
