/*
 * The CUDA adapter. The CUDA runtime (libcudart) is loaded with dlopen the
 * first time the adapter is asked for, so neither building nor running
 * libnexar needs CUDA: no CUDA header is included, and the few types and
 * constants used are declared here with the values of the runtime API
 * (stable since CUDA 10). Without the runtime, or without a device, the
 * adapter is reported as unsupported and the CPU adapter stays in use.
 *
 * Copies to the host use cudaMemcpy (synchronous for the host); copies to
 * the device use cudaMemcpyAsync on the legacy default stream from pinned
 * bounce buffers, completed by synchronize (cudaStreamSynchronize on that
 * stream). The legacy default stream orders these copies after earlier
 * work on blocking streams; work on non-blocking streams must be
 * synchronized by the application before a call, as with CUDA-aware MPI.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "device/device.h"

#ifndef NEXAR_CUDART_PATH
#define NEXAR_CUDART_PATH ""
#endif

/* Runtime API values (driver_types.h). */
enum {
  CU_SUCCESS = 0,
  CU_MEMTYPE_DEVICE = 2,  /* cudaMemoryTypeDevice */
  CU_MEMTYPE_MANAGED = 3, /* cudaMemoryTypeManaged */
  CU_MEMCPY_DEFAULT = 4   /* cudaMemcpyDefault: direction from the pointers */
};

/* struct cudaPointerAttributes (CUDA 11 and later: type, device,
 * devicePointer, hostPointer, then reserved words in CUDA 13), padded so
 * that any later growth fits. */
typedef struct cu_ptr_attr {
  int type;
  int device;
  void *device_pointer;
  void *host_pointer;
  long reserved[32];
} cu_ptr_attr_t;

static struct {
  int (*get_device_count)(int *count);
  int (*pointer_get_attributes)(cu_ptr_attr_t *attr, const void *ptr);
  int (*memcpy)(void *dst, const void *src, size_t bytes, int kind);
  int (*memcpy_async)(void *dst, const void *src, size_t bytes, int kind,
                      void *stream);
  int (*stream_synchronize)(void *stream);
  int (*host_alloc)(void **ptr, size_t bytes, unsigned flags);
  int (*free_host)(void *ptr);
  int (*get_last_error)(void);
  const char *(*get_error_string)(int err);
  int rc;        /* 0 once loaded and a device was found */
  char why[256]; /* otherwise, why not */
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static const char *cu_errstr(int err) {
  const char *s = cu.get_error_string ? cu.get_error_string(err) : NULL;
  return s ? s : "unknown CUDA error";
}

/* Logs a failed runtime call; returns NEXAR_ERR_DEVICE. */
static int cu_fail(const char *call, int err, size_t bytes) {
  NEXAR__INFO(NEXAR__SUB_INIT, "cuda adapter: %s (%zu bytes) failed: %s (%d)",
              call, bytes, cu_errstr(err), err);
  return NEXAR_ERR_DEVICE;
}

static int cu_classify(void *ud, const void *ptr, size_t bytes) {
  (void)ud;
  (void)bytes;
  cu_ptr_attr_t a;
  memset(&a, 0, sizeof(a));
  int err = cu.pointer_get_attributes(&a, ptr);
  if (err != CU_SUCCESS) {
    /* Runtimes before CUDA 11 fail for memory they do not know (plain
     * host memory) and leave the error sticky in the thread. */
    cu.get_last_error();
    return NEXAR_MEM_HOST;
  }
  /* Managed memory is staged too: copying it with cudaMemcpy is valid on
   * every system, touching it from the progress thread is not. */
  return a.type == CU_MEMTYPE_DEVICE || a.type == CU_MEMTYPE_MANAGED
             ? NEXAR_MEM_DEVICE
             : NEXAR_MEM_HOST;
}

static void *cu_alloc_host(void *ud, size_t bytes) {
  (void)ud;
  void *p = NULL;
  int err = cu.host_alloc(&p, bytes, 0 /* cudaHostAllocDefault */);
  if (err != CU_SUCCESS) {
    cu.get_last_error();
    NEXAR__INFO(NEXAR__SUB_INIT,
                "cuda adapter: cudaHostAlloc(%zu) failed: %s; using "
                "pageable memory",
                bytes, cu_errstr(err));
    return NULL;
  }
  return p;
}

static void cu_free_host(void *ud, void *ptr, size_t bytes) {
  (void)ud;
  (void)bytes;
  cu.free_host(ptr);
}

static int cu_to_host(void *ud, void *dst, const void *src, size_t bytes) {
  (void)ud;
  int err = cu.memcpy(dst, src, bytes, CU_MEMCPY_DEFAULT);
  return err == CU_SUCCESS ? NEXAR_OK : cu_fail("cudaMemcpy", err, bytes);
}

static int cu_from_host(void *ud, void *dst, const void *src, size_t bytes) {
  (void)ud;
  int err = cu.memcpy_async(dst, src, bytes, CU_MEMCPY_DEFAULT, NULL);
  return err == CU_SUCCESS ? NEXAR_OK : cu_fail("cudaMemcpyAsync", err, bytes);
}

static int cu_synchronize(void *ud) {
  (void)ud;
  int err = cu.stream_synchronize(NULL);
  return err == CU_SUCCESS ? NEXAR_OK
                           : cu_fail("cudaStreamSynchronize", err, 0);
}

static const nexar_device_ops_t cuda_ops = {
    .size = sizeof(nexar_device_ops_t),
    .version = NEXAR_DEVICE_OPS_VERSION,
    .name = "cuda",
    .classify = cu_classify,
    .alloc_host = cu_alloc_host,
    .free_host = cu_free_host,
    .copy_to_host = cu_to_host,
    .copy_from_host = cu_from_host,
    .synchronize = cu_synchronize,
};

/* Resolves |name| into |*fn|; false (with cu.why set) when missing. */
static bool cu_sym(void *lib, const char *name, void **fn) {
  *fn = dlsym(lib, name);
  if (*fn) return true;
  snprintf(cu.why, sizeof(cu.why), "the CUDA runtime has no symbol %s", name);
  return false;
}

static void cu_load(void) {
  cu.rc = NEXAR_ERR_UNSUPPORTED;
  /* The loader's search path first, then the toolkit found at build
   * time. The runtime is never unloaded. */
  const char *const names[] = {"libcudart.so", "libcudart.so.13",
                               "libcudart.so.12", "libcudart.so.11.0",
                               NEXAR_CUDART_PATH};
  void *lib = NULL;
  const char *tried = NULL;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !lib; i++) {
    if (!names[i][0]) continue;
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    tried = names[i];
  }
  if (!lib) {
    const char *e = dlerror();
    snprintf(cu.why, sizeof(cu.why),
             "cannot load the CUDA runtime (libcudart.so, last tried %s): %s",
             tried ? tried : "-", e ? e : "not found");
    return;
  }
  void **syms[] = {(void **)&cu.get_device_count,
                   (void **)&cu.pointer_get_attributes,
                   (void **)&cu.memcpy,
                   (void **)&cu.memcpy_async,
                   (void **)&cu.stream_synchronize,
                   (void **)&cu.host_alloc,
                   (void **)&cu.free_host,
                   (void **)&cu.get_last_error,
                   (void **)&cu.get_error_string};
  const char *const snames[] = {
      "cudaGetDeviceCount", "cudaPointerGetAttributes", "cudaMemcpy",
      "cudaMemcpyAsync",    "cudaStreamSynchronize",    "cudaHostAlloc",
      "cudaFreeHost",       "cudaGetLastError",         "cudaGetErrorString"};
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if (!cu_sym(lib, snames[i], syms[i])) return;
  int n = 0;
  int err = cu.get_device_count(&n);
  if (err != CU_SUCCESS || n < 1) {
    snprintf(cu.why, sizeof(cu.why),
             "the CUDA runtime reports no device (cudaGetDeviceCount: %s)",
             err != CU_SUCCESS ? cu_errstr(err) : "0 devices");
    cu.get_last_error();
    return;
  }
  cu.rc = 0;
  NEXAR__INFO(NEXAR__SUB_INIT, "cuda adapter: %s loaded, %d device(s)", tried,
              n);
}

int nexar__cuda_load(const nexar_device_ops_t **ops, char *err, size_t errlen) {
  pthread_once(&cu_once, cu_load);
  if (cu.rc < 0) {
    *ops = NULL;
    snprintf(err, errlen, "%s", cu.why);
    return cu.rc;
  }
  *ops = &cuda_ops;
  return 0;
}
