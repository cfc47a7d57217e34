/*
 * A load for tests of traffic under load (test_lanes, test_rpc_quic): a
 * thread of float allreduces of small integers (exact in float), not in
 * place, on a communicator of its own, each result checked bit for bit.
 * Two ranks: rank r adds r to every element.
 */
#ifndef NEXAR_TESTS_LOAD_THREAD_H
#define NEXAR_TESTS_LOAD_THREAD_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

typedef struct nt_load {
  nexar_comm_t *comm; /* of both ranks, used only by the load */
  size_t count;       /* floats per allreduce */
  int rounds, rank;
  int rc;            /* the first failure, or 0 */
  volatile int done; /* set (release) when the thread ends */
} nt_load_t;

static inline void *nt_load_main(void *arg) {
  nt_load_t *l = arg;
  float *in = malloc(l->count * sizeof *in);
  float *v = malloc(l->count * sizeof *v);
  l->rc = in && v ? 0 : NEXAR_ERR_NOMEM;
  for (int k = 0; k < l->rounds && l->rc == 0; k++) {
    for (size_t i = 0; i < l->count; i++)
      in[i] = (float)((i + (size_t)k) % 1000 + (size_t)l->rank);
    l->rc = nexar_allreduce(l->comm, in, v, l->count, NEXAR_FLOAT32, NEXAR_SUM);
    for (size_t i = 0; i < l->count && l->rc == 0; i++)
      if (v[i] != (float)(2 * ((i + (size_t)k) % 1000) + 1))
        l->rc = NEXAR_ERR_INTERNAL;
  }
  free(in);
  free(v);
  __atomic_store_n(&l->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Registers the echo handler |fn| on world |w| (rank |r| of 2), waits for
 * the other rank's, and starts load |l| on a duplicate of |w| on thread
 * |th|. 0, or 1 after reporting a failure (harness.h). */
static inline int nt_load_start(nexar_comm_t *w, int r, int fn, nt_load_t *l,
                                pthread_t *th) {
  l->rank = r;
  NT_OKC(w, nexar_comm_dup(w, &l->comm));
  NT_OKC(w, nexar_rpc_register(w, fn, nt_rpc_echo, NULL));
  NT_OKC(w, nexar_barrier(w)); /* both handlers registered */
  NT_CHECK(pthread_create(th, NULL, nt_load_main, l) == 0);
  return 0;
}

/* Call |i| of rank |r|: |n| bytes of |req| (already filled) to the other
 * rank's echo handler |fn|, checked bit for bit in |resp|. 0, or 1 after
 * reporting a failure. */
static inline int nt_echo_check(nexar_comm_t *w, int r, int fn, int i,
                                const uint8_t *req, uint8_t *resp, size_t n) {
  size_t got = 0;
  memset(resp, 0, n);
  NT_OKC(w, nexar_rpc_call(w, 1 - r, fn, req, n, resp, n, &got, 30000));
  NT_CHECKF(got == n && memcmp(req, resp, n) == 0,
            "rank %d: call %d echoed %zu of %zu bytes, or other bytes", r, i,
            got, n);
  return 0;
}

#endif
