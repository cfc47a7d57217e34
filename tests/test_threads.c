/*
 * Several user threads per process calling nexar at once: each thread runs
 * its own ring exchange on its own tag (blocking send/recv, or isend/irecv
 * completed by polling nexar_test), mixing 8-byte messages with 200 KB
 * rendezvous messages. Exercises the engine's caller-driven progress with
 * one driving caller at a time and the others waiting for completions, and
 * direct posts racing with a driver.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

enum { THREADS = 4, ITERS = 400, BIG = 200000 };

typedef struct {
  nexar_comm_t *w;
  int rank, size, tid, rc;
  char err[256];
} thr_t;

static uint8_t pat(size_t i, unsigned seed) {
  return (uint8_t)(i * 131u + seed * 7u + (i >> 8));
}

static unsigned seed_of(int rank, int tid, int it) {
  return (unsigned)(rank * 100003 + tid * 1009 + it);
}

/* Thread |t->tid| of every rank sends to the next rank and receives from
 * the previous one on tag = tid; odd threads complete by polling. */
static void *run(void *arg) {
  thr_t *t = arg;
  int next = (t->rank + 1) % t->size, prev = (t->rank - 1 + t->size) % t->size;
  uint8_t *sb = malloc(BIG), *rb = malloc(BIG);
  if (!sb || !rb) {
    snprintf(t->err, sizeof t->err, "out of memory");
    t->rc = 1;
    goto out;
  }
  for (int it = 0; it < ITERS; it++) {
    size_t n = it % 7 == 3 ? BIG : 8;
    unsigned s = seed_of(t->rank, t->tid, it);
    for (size_t i = 0; i < n; i++) sb[i] = pat(i, s);
    nexar_status_t st;
    int rc;
    if (t->tid % 2 == 0) {
      nexar_req_t *rr;
      rc = nexar_irecv(t->w, rb, n, NEXAR_UINT8, prev, t->tid, &rr);
      if (rc == NEXAR_OK)
        rc = nexar_send(t->w, sb, n, NEXAR_UINT8, next, t->tid);
      if (rc == NEXAR_OK) rc = nexar_wait(&rr, &st);
    } else {
      nexar_req_t *rs, *rr;
      int done = 0, polls = 0;
      rc = nexar_irecv(t->w, rb, n, NEXAR_UINT8, prev, t->tid, &rr);
      if (rc == NEXAR_OK)
        rc = nexar_isend(t->w, sb, n, NEXAR_UINT8, next, t->tid, &rs);
      while (rc == NEXAR_OK && !done && polls++ < 50000000)
        rc = nexar_test(&rr, &done, &st);
      if (rc == NEXAR_OK && !done) rc = NEXAR_ERR_TIMEOUT;
      if (rc == NEXAR_OK) rc = nexar_wait(&rs, NULL);
    }
    if (rc != NEXAR_OK) {
      snprintf(t->err, sizeof t->err, "thread %d iteration %d: %s: %s", t->tid,
               it, nexar_strerror(rc), nexar_comm_last_error(t->w));
      t->rc = 1;
      goto out;
    }
    unsigned ps = seed_of(prev, t->tid, it);
    for (size_t i = 0; i < n; i++) {
      if (rb[i] != pat(i, ps)) {
        snprintf(t->err, sizeof t->err,
                 "thread %d iteration %d: byte %zu of %zu from rank %d is %u, "
                 "want %u",
                 t->tid, it, i, n, prev, rb[i], pat(i, ps));
        t->rc = 1;
        goto out;
      }
    }
    if (st.bytes != n || st.source != prev || st.tag != t->tid) {
      snprintf(t->err, sizeof t->err,
               "thread %d iteration %d: status bytes %zu source %d tag %d",
               t->tid, it, st.bytes, st.source, st.tag);
      t->rc = 1;
      goto out;
    }
  }
out:
  free(sb);
  free(rb);
  return NULL;
}

static int worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  thr_t t[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    t[i] = (thr_t){.w = w, .rank = r, .size = n, .tid = i};
    NT_CHECK(pthread_create(&th[i], NULL, run, &t[i]) == 0);
  }
  int fails = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    if (t[i].rc) {
      nt_fail(__FILE__, __LINE__, "%s", t[i].err);
      fails++;
    }
  }
  NT_CHECK(fails == 0);
  NT_OKC(w, nexar_barrier(w));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  int fails = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int world = 2; world <= 3; world++) {
    nt_opts_t o = {.world_size = world, .timeout_ms = 120000};
    int rc = nt_run(&o, worker, NULL);
    printf("%s threads=%d world=%d\n", rc ? "FAIL" : "ok", THREADS, world);
    fails += rc ? 1 : 0;
  }
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
