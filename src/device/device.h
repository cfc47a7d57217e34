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

/* Sets up |dev| with the adapter NEXAR_DEVICE names (cpu, cuda or auto).
 * Returns 0, or NEXAR_ERR_INVALID_ARG / NEXAR_ERR_UNSUPPORTED with |err|
 * naming the variable. */
int nexar__dev_init(nexar__dev_t *dev, const char *which, uint64_t cache_max,
                    char *err, size_t errlen);
/* Frees the bounce cache. Every staged request must have completed. */
void nexar__dev_fini(nexar__dev_t *dev);

/* True for the CPU adapter: no buffer needs classifying. */
static inline bool nexar__dev_host_only(const nexar__dev_t *dev) {
  return dev->host_only;
}

/*
 * Classifies [ptr, ptr + bytes) for call |what| ("send", "allreduce") of
 * |comm|, role |role| ("send", "receive"). Returns NEXAR_MEM_HOST,
 * NEXAR_MEM_DEVICE or a negative code (message recorded on |comm|).
 */
int nexar__dev_classify(nexar__dev_t *dev, nexar_comm_t *comm, const char *what,
                        const char *role, const void *ptr, uint64_t bytes);

/*
 * Stages the device buffer |ptr| of a call: allocates a bounce buffer of
 * |bytes| (every region lies below it), copies the |in| regions to it, and
 * records the |out| regions for nexar__stage_finish. Region lists may be
 * unsorted and overlapping (they are merged here) and are not kept.
 * Creates *st on the first buffer. On success *host is the bounce buffer.
 * Returns 0, NEXAR_ERR_NOMEM or the adapter's error (message recorded on
 * |comm|); on failure *st is left for nexar__stage_abort.
 */
int nexar__stage_add(nexar__stage_t **st, nexar__dev_t *dev, nexar_comm_t *comm,
                     const char *what, const char *role, void *ptr,
                     uint64_t bytes, const nexar__region_t *in, size_t nin,
                     const nexar__region_t *out, size_t nout, uint8_t **host);

/*
 * Completes a staged request whose result is |rc|: when rc is NEXAR_OK or
 * NEXAR_ERR_TRUNCATE copies the out regions (clipped to [0, limit)) back
 * to device memory and synchronizes, then releases the bounce buffers and
 * frees |st|. Returns |rc|, or the adapter's error when rc was NEXAR_OK
 * (message recorded on the call's communicator).
 */
int nexar__stage_finish(nexar__stage_t *st, int rc, uint64_t limit);
/* Releases |st| (may be NULL) without copying anything back. */
void nexar__stage_abort(nexar__stage_t *st);

/* An adapter's name for messages ("(unnamed)" when it has none). */
const char *nexar__dev_ops_name(const nexar_device_ops_t *ops);
/* An adapter's negative result as a result code of the API: known codes
 * pass through, anything else is NEXAR_ERR_DEVICE. */
int nexar__dev_adapter_rc(int rc);

#endif /* NEXAR_DEVICE_H */
