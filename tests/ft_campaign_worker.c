/*
 * The workload of one fault-campaign worker (tests/ft_campaign.c).
 *
 * A loop of iterations on the current communicator, each five verified
 * operations: a header bcast from rank 0 (go on or stop, the iteration's
 * random seed), a data bcast (8 B .. 1 MiB) from a rotating root, an
 * allreduce (uint64 sum, 8 B .. 4 MiB), a barrier and a p2p ring exchange
 * (8 B .. 32 KiB). Every value is a function of (trial seed, iteration,
 * sender's stable id, element), so every rank knows the exact bytes each
 * result must hold; wrapping uint64 sums make the allreduce exact in any
 * order. Sizes are log-uniform so most operations are small.
 *
 * On an error, by NEXAR_RECOVERY: abort finalizes and exits 3; manual
 * shrinks the communicator and goes on with the new one; automatic goes on
 * (the failing call rebuilt it), or stops with status 5 on "no majority".
 * NEXAR_ERR_EXCLUDED stops with 4, anything else with 6. After any error the
 * iteration restarts at the header bcast, so ranks that were an operation
 * apart meet again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft_campaign.h"
#include "nexar.h"

#define HDR_MAGIC 0x6e78636dULL /* "nxcm" */
#define RING_TAG 77

double fc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Element i of what process |id| contributes to operation |salt| of the
 * iteration with seed |s|: base + (id + 1) * step, so a sum over a set of
 * ids is n * base + (sum of id + 1) * step. */
static uint64_t base_of(uint64_t s, uint64_t salt, uint64_t i) {
  return fc_mix(s ^ (salt << 56) ^ i);
}
static uint64_t step_of(uint64_t s, uint64_t salt, uint64_t i) {
  return fc_mix(~s ^ (salt << 56) ^ (i * 0x2545f4914f6cdd1dULL)) | 1;
}
static uint64_t val(uint64_t s, uint64_t salt, int id, uint64_t i) {
  return base_of(s, salt, i) + (uint64_t)(id + 1) * step_of(s, salt, i);
}

/* A log-uniform count of uint64 elements, 1 .. 2^maxexp. */
static size_t draw_count(uint64_t *r, int maxexp) {
  *r = fc_mix(*r);
  int e = (int)(*r % (uint64_t)(maxexp + 1));
  *r = fc_mix(*r);
  return 1 + (size_t)(*r % (1ULL << e));
}

typedef struct worker {
  fc_shared_t *sh;
  fc_rec_t *me;
  nexar_ctx_t *ctx;
  nexar_comm_t *world, *c; /* c: the communicator the loop runs on */
  int rank, size, id, ids[FC_MAXW];
  uint32_t epoch, mask;
  uint64_t *a, *b; /* 4 MiB each */
  int iter;
  double t0; /* when the loop started here */
} worker_t;

/* Re-reads rank, size, epoch and members (a rebuild changes them); a new
 * epoch or membership restarts the count of operations on it. */
static void refresh(worker_t *w) {
  uint32_t epoch0 = w->epoch, mask0 = w->mask;
  nexar_comm_rank(w->c, &w->rank);
  nexar_comm_size(w->c, &w->size);
  nexar_comm_epoch(w->c, &w->epoch);
  w->mask = 0;
  for (int k = 0; k < w->size && k < FC_MAXW; k++) {
    nexar_comm_id_of(w->c, k, &w->ids[k]);
    w->mask |= 1u << w->ids[k];
  }
  w->id = w->ids[w->rank];
  if (w->epoch != epoch0 || w->mask != mask0) w->me->ops_final = 0;
  w->me->epoch = w->epoch; /* live, so that a hung process has them too */
  w->me->size = w->size;
  w->me->mask = w->mask;
}

static void phase(worker_t *w, const char *what, size_t bytes) {
  snprintf(w->me->phase, sizeof w->me->phase,
           "iteration %d, epoch %u, rank %d of %d: %s %zu B", w->iter, w->epoch,
           w->rank, w->size, what, bytes);
}

/* Notes a call that succeeded although it started (at |t|) after the
 * runner continued this process: wrong if it had been fenced meanwhile. */
static void after_resume(worker_t *w, double t, const char *what) {
  double resumed = w->sh->resume_ms;
  if (resumed > 0 && t > resumed && !w->me->ok_after_resume++)
    snprintf(w->me->after_what, sizeof w->me->after_what,
             "%s on a communicator of %d (epoch %u), %.0f ms after SIGCONT",
             what, w->size, w->epoch, t - resumed);
}

/* Counts a verified operation that succeeded (started at |t|). */
static void succeeded(worker_t *w, double t, const char *what) {
  w->me->ops++;
  w->me->ops_final++;
  after_resume(w, t, what);
}

static void wrong(worker_t *w, const char *what, size_t i, uint64_t got,
                  uint64_t want) {
  if (!w->me->wrong++)
    snprintf(w->me->wrong_what, sizeof w->me->wrong_what,
             "%s, iteration %d, epoch %u, size %d: element %zu is %016llx, "
             "not %016llx",
             what, w->iter, w->epoch, w->size, i, (unsigned long long)got,
             (unsigned long long)want);
}

/* One iteration; returns the first failing call's code. *go = 0 when rank
 * 0 said stop. */
static int iteration(worker_t *w, int *go) {
  uint64_t hdr[4] = {0, 0, 0, 0};
  double t = fc_now_ms();
  if (w->rank == 0) {
    hdr[0] = HDR_MAGIC;
    hdr[1] = (uint64_t)w->iter;
    hdr[2] = t - w->t0 < FC_WORK_MS && w->iter < FC_MAX_ITERS;
    hdr[3] = fc_mix(w->sh->seed ^ ((uint64_t)w->iter << 20) ^ w->epoch);
  }
  phase(w, "header bcast", sizeof hdr);
  int rc = nexar_bcast(w->c, hdr, 4, NEXAR_UINT64, 0);
  if (rc) return rc;
  if (hdr[0] != HDR_MAGIC) wrong(w, "header bcast", 0, hdr[0], HDR_MAGIC);
  succeeded(w, t, "header bcast");
  w->iter = (int)hdr[1];
  *go = hdr[2] != 0;
  if (!*go) return NEXAR_OK;
  uint64_t s = hdr[3], r = s;
  size_t nb = draw_count(&r, 17), na = draw_count(&r, 19);
  size_t nr = draw_count(&r, 12);
  int root = w->iter % w->size;

  t = fc_now_ms();
  for (size_t i = 0; i < nb; i++)
    w->a[i] = w->rank == root ? val(s, 1, w->id, i) : 0;
  phase(w, "bcast", nb * 8);
  rc = nexar_bcast(w->c, w->a, nb, NEXAR_UINT64, root);
  if (rc) return rc;
  for (size_t i = 0; i < nb; i++)
    if (w->a[i] != val(s, 1, w->ids[root], i)) {
      wrong(w, "bcast", i, w->a[i], val(s, 1, w->ids[root], i));
      break;
    }
  succeeded(w, t, "bcast");

  t = fc_now_ms();
  uint64_t idsum = 0;
  for (int k = 0; k < w->size; k++) idsum += (uint64_t)(w->ids[k] + 1);
  for (size_t i = 0; i < na; i++) w->a[i] = val(s, 2, w->id, i);
  phase(w, "allreduce", na * 8);
  rc = nexar_allreduce(w->c, w->a, w->b, na, NEXAR_UINT64, NEXAR_SUM);
  if (rc) return rc;
  for (size_t i = 0; i < na; i++) {
    uint64_t want =
        (uint64_t)w->size * base_of(s, 2, i) + idsum * step_of(s, 2, i);
    if (w->b[i] != want) {
      wrong(w, "allreduce", i, w->b[i], want);
      break;
    }
  }
  succeeded(w, t, "allreduce");

  t = fc_now_ms();
  phase(w, "barrier", 0);
  rc = nexar_barrier(w->c);
  if (rc) return rc;
  succeeded(w, t, "barrier");

  t = fc_now_ms();
  int left = (w->rank + w->size - 1) % w->size, right = (w->rank + 1) % w->size;
  for (size_t i = 0; i < nr; i++) {
    w->a[i] = val(s, 3, w->id, i);
    w->b[i] = 0;
  }
  phase(w, "p2p ring", nr * 8);
  nexar_req_t *q[2] = {NULL, NULL};
  rc = nexar_irecv(w->c, w->b, nr, NEXAR_UINT64, left, RING_TAG, &q[0]);
  if (rc) return rc;
  rc = nexar_isend(w->c, w->a, nr, NEXAR_UINT64, right, RING_TAG, &q[1]);
  int rc0 = nexar_wait(&q[0], NULL);
  int rc1 = q[1] ? nexar_wait(&q[1], NULL) : NEXAR_OK;
  if (rc || rc0 || rc1) return rc ? rc : rc0 ? rc0 : rc1;
  for (size_t i = 0; i < nr; i++)
    if (w->b[i] != val(s, 3, w->ids[left], i)) {
      wrong(w, "p2p ring", i, w->b[i], val(s, 3, w->ids[left], i));
      break;
    }
  succeeded(w, t, "p2p ring");
  w->iter++;
  return NEXAR_OK;
}

/* After a failed call: the status to stop with, or -1 to go on. */
static int on_error(worker_t *w, int rc, int *failures) {
  const char *e = nexar_comm_last_error(w->c);
  w->me->rc = rc;
  snprintf(w->me->err, sizeof w->me->err, "%s: %s", nexar_err_name(rc),
           e ? e : "");
  if (rc == NEXAR_ERR_EXCLUDED) return FC_ST_EXCLUDED;
  if (w->sh->policy == FC_ABORT) return FC_ST_ABORTED;
  if (rc != NEXAR_ERR_PEER_FAILED && rc != NEXAR_ERR_REVOKED)
    return FC_ST_FAILED;
  if (++*failures > FC_MAX_FAILED_RECOVERIES) return FC_ST_FAILED;
  if (w->sh->policy == FC_AUTOMATIC) {
    if (e && strstr(e, "no majority")) return FC_ST_NO_MAJORITY;
  } else {
    nexar_comm_t *nc = NULL;
    phase(w, "nexar_comm_shrink", 0);
    double t = fc_now_ms();
    int src = nexar_comm_shrink(w->c, &nc);
    if (src != NEXAR_OK) {
      const char *se = nexar_comm_last_error(w->c);
      w->me->rc = src;
      snprintf(w->me->err, sizeof w->me->err, "shrink: %s: %s",
               nexar_err_name(src), se ? se : "");
      return src == NEXAR_ERR_EXCLUDED ? FC_ST_EXCLUDED : FC_ST_FAILED;
    }
    if (w->c != w->world) nexar_comm_free(&w->c);
    w->c = nc;
    refresh(w);
    after_resume(w, t, "nexar_comm_shrink");
  }
  w->me->recoveries++;
  return -1;
}

/* Records where this process ended and what it knew failed. */
static void finish(worker_t *w, int status) {
  fc_rec_t *me = w->me;
  refresh(w);
  nexar_failure_t f[FC_MAXW * 2];
  int nf = 0;
  if (nexar_failures(w->ctx, f, FC_MAXW * 2, &nf) == NEXAR_OK)
    for (int k = 0; k < nf && k < FC_MAXW * 2; k++)
      if (f[k].id >= 0 && f[k].id < FC_MAXW) {
        me->failed_mask |= 1u << f[k].id;
        me->failed_at[f[k].id] = (double)f[k].when_ns / 1e6;
      }
  me->status = status;
  me->end_ms = fc_now_ms();
  me->ended = 1;
}

int fc_worker(fc_shared_t *sh, int index) {
  worker_t w;
  memset(&w, 0, sizeof w);
  w.sh = sh;
  w.me = &sh->rec[index];
  snprintf(w.me->phase, sizeof w.me->phase, "nexar_init");
  int rc = nexar_init(NULL, &w.ctx);
  if (rc != NEXAR_OK) {
    w.me->rc = rc;
    snprintf(w.me->err, sizeof w.me->err, "nexar_init: %s: %s",
             nexar_err_name(rc), nexar_last_error());
    w.me->status = FC_ST_INIT_FAILED;
    w.me->end_ms = fc_now_ms();
    w.me->ended = 1;
    return FC_ST_INIT_FAILED;
  }
  w.world = w.c = nexar_comm_world(w.ctx);
  w.a = malloc((1u << 19) * sizeof(uint64_t));
  w.b = malloc((1u << 19) * sizeof(uint64_t));
  refresh(&w);
  phase(&w, "first barrier", 0);
  rc = w.a && w.b ? nexar_barrier(w.c) : NEXAR_ERR_NOMEM;
  int status = -1;
  if (rc != NEXAR_OK) {
    w.me->rc = rc;
    snprintf(w.me->err, sizeof w.me->err, "first barrier: %s: %s",
             nexar_err_name(rc), nexar_comm_last_error(w.c));
    status = FC_ST_INIT_FAILED;
  }
  w.t0 = fc_now_ms();
  if (index == 0 && status < 0) sh->started_ms = w.t0;
  int failures = 0;
  while (status < 0) {
    int go = 1;
    refresh(&w);
    rc = iteration(&w, &go);
    if (rc == NEXAR_OK) {
      failures = 0;
      if (!go) status = FC_ST_DONE;
      continue;
    }
    status = on_error(&w, rc, &failures);
  }
  finish(&w, status);
  snprintf(w.me->phase, sizeof w.me->phase, "nexar_finalize (status %d)",
           status);
  if (w.c != w.world) nexar_comm_free(&w.c);
  nexar_finalize(w.ctx);
  free(w.a);
  free(w.b);
  return status;
}
