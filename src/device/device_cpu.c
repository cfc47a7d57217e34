/*
 * The CPU adapter, the default of every context: all memory is host memory.
 * The engine recognises it (nexar__dev_is_cpu) and then calls none of its
 * operations; they exist so that the table is a complete adapter that an
 * application may install, inspect or wrap.
 */
#include <string.h>

#include "device/device.h"

static int cpu_classify(void *user_data, const void *ptr, size_t bytes) {
  (void)user_data;
  (void)ptr;
  (void)bytes;
  return NEXAR_MEM_HOST;
}

static int cpu_copy(void *user_data, void *dst, const void *src, size_t bytes) {
  (void)user_data;
  if (bytes) memcpy(dst, src, bytes);
  return NEXAR_OK;
}

static const nexar_device_ops_t cpu_ops = {
    .size = sizeof(nexar_device_ops_t),
    .version = NEXAR_DEVICE_OPS_VERSION,
    .name = "cpu",
    .classify = cpu_classify,
    .copy_to_host = cpu_copy,
    .copy_from_host = cpu_copy,
};

const nexar_device_ops_t *nexar_device_adapter_cpu(void) {
  return &cpu_ops;
}

bool nexar__dev_is_cpu(const nexar_device_ops_t *ops) {
  return ops->classify == cpu_classify;
}
