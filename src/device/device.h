/*
 * Device adapters (include/nexar.h, docs/device-adapters.md): the adapter
 * state of a context and the staging of device buffers through host bounce
 * buffers.
 *
 * Everything here runs on application threads (the thread that makes a
 * call, and the thread that completes its request), never on the progress
 * thread, which only ever sees host memory. A call that uses a device
 * buffer carries a stage (nexar__stage_t) in its request: the bounce
 * buffers that replace the device pointers, and the byte ranges to copy
 * back when the request completes.
 */
#ifndef NEXAR_DEVICE_H
#define NEXAR_DEVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nexar.h"

typedef struct nexar__bounce nexar__bounce_t;
typedef struct nexar__stage nexar__stage_t;

/* A byte range [off, off + len) of a user buffer. */
typedef struct nexar__region {
  uint64_t off, len;
} nexar__region_t;

/* The adapter state of a context. |ops|, |ud| and |host_only| change only
 * in nexar__dev_set, which the API forbids concurrently with other calls,
 * so calls read them without the lock; |mu| guards the bounce cache. */
typedef struct nexar__dev {
  nexar_device_ops_t ops; /* copy of the active table */
  void *ud;
  bool host_only; /* the CPU adapter: nothing is classified or staged */
  uint64_t gen;   /* bumped by every set; older bounces are not cached */
  pthread_mutex_t mu;
  nexar__bounce_t *cache; /* free bounce buffers, most recent first */
  uint64_t cached;        /* bytes in |cache| */
  uint64_t cache_max;     /* NEXAR_DEVICE_STAGE_CACHE_BYTES */
} nexar__dev_t;

/* Whether |ops| is the CPU adapter's table (device_cpu.c). */
bool nexar__dev_is_cpu(const nexar_device_ops_t *ops);

/* Loads the CUDA adapter (device_cuda.c, or a stub when it is not built).
 * Returns 0 with *ops set, or NEXAR_ERR_UNSUPPORTED with |err| saying
 * why. Thread-safe; the runtime is loaded once per process. */
int nexar__cuda_load(const nexar_device_ops_t **ops, char *err, size_t errlen);

/* True for the CPU adapter: no buffer needs classifying. */
static inline bool nexar__dev_host_only(const nexar__dev_t *dev) {
  return dev->host_only;
}

#endif /* NEXAR_DEVICE_H */
