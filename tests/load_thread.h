/*
 * A load for tests of traffic under load (test_lanes, test_rpc_quic): a
 * thread of float allreduces of small integers (exact in float), not in
 * place, on a communicator of its own, each result checked bit for bit.
 * Two ranks: rank r adds r to every element.
 */
#ifndef NEXAR_TESTS_LOAD_THREAD_H
#define NEXAR_TESTS_LOAD_THREAD_H

#include <stdlib.h>

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

#endif
