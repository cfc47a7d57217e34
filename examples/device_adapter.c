/*
 * Device buffers through a device adapter (docs/device-adapters.md).
 *
 * Every rank allreduces and broadcasts a buffer that lives in "device"
 * memory. With a usable GPU this is cudaMalloc'd memory under the CUDA
 * adapter (when run with NEXAR_DEVICE=cuda or --cuda); otherwise a toy
 * adapter whose device memory is a separate heap the engine must not touch,
 * and which counts its copies. The toy adapter is the smallest complete
 * example of writing one.
 *
 *   build/tools/nexar-run -n 4 -- build/examples/device_adapter
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nexar.h"

/* ---- A toy adapter: device memory is one arena, known by address. ---- */

typedef struct toy {
  uint8_t *arena; /* "device" memory: only the adapter copies touch it */
  size_t size, used;
  atomic_long to_host, from_host;
} toy_t;

static int toy_classify(void *ud, const void *p, size_t bytes) {
  toy_t *t = ud;
  const uint8_t *q = p;
  if (q < t->arena || q >= t->arena + t->size) return NEXAR_MEM_HOST;
  return q + bytes <= t->arena + t->size ? NEXAR_MEM_DEVICE
                                         : NEXAR_ERR_INVALID_ARG;
}

static int toy_to_host(void *ud, void *dst, const void *src, size_t n) {
  toy_t *t = ud;
  t->to_host++;
  memcpy(dst, src, n); /* a real adapter calls its runtime here */
  return NEXAR_OK;
}

static int toy_from_host(void *ud, void *dst, const void *src, size_t n) {
  toy_t *t = ud;
  t->from_host++;
  memcpy(dst, src, n);
  return NEXAR_OK;
}

static const nexar_device_ops_t toy_ops = {
    .size = sizeof(nexar_device_ops_t),
    .version = NEXAR_DEVICE_OPS_VERSION,
    .name = "toy",
    .classify = toy_classify,
    .copy_to_host = toy_to_host,
    .copy_from_host = toy_from_host,
};

static void *toy_alloc(toy_t *t, size_t n) {
  if (t->used + n > t->size) return NULL;
  void *p = t->arena + t->used;
  t->used += (n + 63) & ~(size_t)63;
  return p;
}

#define CHECK(call)                                               \
  do {                                                            \
    int rc_ = (call);                                             \
    if (rc_ != NEXAR_OK) {                                        \
      fprintf(stderr, "%s: %s: %s\n", #call, nexar_err_name(rc_), \
              nexar_comm_last_error(world));                      \
      return 1;                                                   \
    }                                                             \
  } while (0)

int main(void) {
  nexar_ctx_t *ctx;
  int rc = nexar_init(NULL, &ctx);
  if (rc != NEXAR_OK) {
    fprintf(stderr, "nexar_init: %s: %s\n", nexar_err_name(rc),
            nexar_last_error());
    return 1;
  }
  nexar_comm_t *world = nexar_comm_world(ctx);
  int rank, size;
  nexar_comm_rank(world, &rank);
  nexar_comm_size(world, &size);

  /* NEXAR_DEVICE=cuda installed the CUDA adapter already; this program
   * then only shows that host buffers keep working. Otherwise use the toy
   * adapter. */
  nexar_device_ops_t active;
  nexar_device_adapter_get(ctx, &active, NULL);
  toy_t toy = {.size = 1 << 20};
  bool use_toy = strcmp(active.name, "cpu") == 0;
  if (use_toy) {
    toy.arena = malloc(toy.size);
    if (!toy.arena) return 1;
    CHECK(nexar_device_adapter_set(ctx, &toy_ops, &toy));
  }

  enum { N = 1000 };
  float host[N];
  float *buf = use_toy ? toy_alloc(&toy, sizeof host) : host;
  for (int i = 0; i < N; i++) host[i] = (float)(rank + 1);
  if (use_toy) memcpy(buf, host, sizeof host); /* "upload" */

  /* In place on device memory: every element becomes 1 + 2 + ... + size. */
  CHECK(
      nexar_allreduce(world, NEXAR_IN_PLACE, buf, N, NEXAR_FLOAT32, NEXAR_SUM));
  CHECK(nexar_bcast(world, buf, N, NEXAR_FLOAT32, 0));
  if (use_toy) memcpy(host, buf, sizeof host); /* "download" */
  float want = (float)size * (float)(size + 1) / 2;
  int bad = 0;
  for (int i = 0; i < N; i++) bad += host[i] != want;
  printf("rank %d: adapter %s, %d wrong of %d, copies to host %ld, back %ld\n",
         rank, use_toy ? "toy" : active.name, bad, N, (long)toy.to_host,
         (long)toy.from_host);

  CHECK(nexar_finalize(ctx));
  free(toy.arena);
  return bad ? 1 : 0;
}
