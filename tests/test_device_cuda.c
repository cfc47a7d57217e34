/*
 * The CUDA device adapter on a real GPU, over real multi-process clusters
 * (tests/harness.h). Skipped (exit 77, CTest SKIP_RETURN_CODE) when
 * libnexar was built without the adapter, the CUDA runtime cannot be
 * loaded or it reports no device; in that case it still checks that
 * nexar_device_adapter_cuda and NEXAR_DEVICE=cuda fail cleanly with
 * NEXAR_ERR_UNSUPPORTED.
 *
 * The probe runs in a forked child: CUDA must not be initialised in the
 * process that forks the workers.
 *
 * With a GPU, at world sizes 2 and 3, each worker joins with
 * NEXAR_DEVICE=cuda and uses cudaMalloc'd buffers: isend/irecv ring,
 * allreduce (recursive doubling, Rabenseifner and ring sizes, in place),
 * bcast, allgather, reduce_scatter_block, alltoall, scan, a host receive
 * buffer under the CUDA adapter, managed memory, and nexar_reduce_local
 * (staged: the CUDA adapter has no device reduction). Results are copied
 * back with cudaMemcpy and compared bit for bit.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

#define SKIP 77

#ifndef NEXAR_CUDART_PATH
#define NEXAR_CUDART_PATH ""
#endif

/* The few runtime calls the test itself needs (values of the runtime API:
 * cudaMemcpyDefault = 4, cudaMemAttachGlobal = 1). */
static struct {
  int (*malloc_)(void **p, size_t n);
  int (*malloc_managed)(void **p, size_t n, unsigned flags);
  int (*free_)(void *p);
  int (*memcpy_)(void *d, const void *s, size_t n, int kind);
  int (*memset_)(void *p, int v, size_t n);
  int (*sync)(void);
} cu;

static int cu_open(void) {
  const char *const names[] = {"libcudart.so", "libcudart.so.13",
                               "libcudart.so.12", "libcudart.so.11.0",
                               NEXAR_CUDART_PATH};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    if (names[i][0]) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) return -1;
  *(void **)&cu.malloc_ = dlsym(lib, "cudaMalloc");
  *(void **)&cu.malloc_managed = dlsym(lib, "cudaMallocManaged");
  *(void **)&cu.free_ = dlsym(lib, "cudaFree");
  *(void **)&cu.memcpy_ = dlsym(lib, "cudaMemcpy");
  *(void **)&cu.memset_ = dlsym(lib, "cudaMemset");
  *(void **)&cu.sync = dlsym(lib, "cudaDeviceSynchronize");
  return cu.malloc_ && cu.malloc_managed && cu.free_ && cu.memcpy_ &&
                 cu.memset_ && cu.sync
             ? 0
             : -1;
}

static float *dmalloc(size_t n) {
  void *p = NULL;
  if (cu.malloc_(&p, n * sizeof(float) + 1) != 0) return NULL;
  cu.memset_(p, 0xA5, n * sizeof(float));
  return p;
}

static void to_dev(float *d, const float *h, size_t n) {
  cu.memcpy_(d, h, n * sizeof(float), 4);
}

static void from_dev(float *h, const float *d, size_t n) {
  cu.memcpy_(h, d, n * sizeof(float), 4);
}

/* Small integers: float sums are exact in any order. */
static float val(int q, size_t i) {
  return (float)((q + 1) * 64 + (int)(i % 1000));
}

static float sum_to(int hi, size_t i) {
  float s = 0;
  for (int q = 0; q < hi; q++) s += val(q, i);
  return s;
}

/* Compares host copy |h| of |n| floats with |e|. */
static int same(const char *label, const float *h, const float *e, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (memcmp(&h[i], &e[i], sizeof(float)) != 0) {
      nt_fail(__FILE__, __LINE__, "%s: element %zu is %g, expected %g", label,
              i, (double)h[i], (double)e[i]);
      return 1;
    }
  }
  return 0;
}

static int worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n)); /* NEXAR_DEVICE=cuda */
  NT_CHECK(cu_open() == 0);
  nexar_device_ops_t o;
  NT_OK(nexar_device_adapter_get(ctx, &o, NULL));
  NT_CHECK(o.name && strcmp(o.name, "cuda") == 0);

  size_t max = (size_t)n * 300000;
  float *h = malloc(max * sizeof(float)), *e = malloc(max * sizeof(float));
  float *s = dmalloc(max), *d = dmalloc(max);
  NT_CHECK(h && e && s && d);

  /* allreduce at recursive-doubling, Rabenseifner and ring sizes. */
  static const size_t ks[] = {7, 5000, 300000};
  for (size_t t = 0; t < 3; t++) {
    size_t k = ks[t];
    for (size_t i = 0; i < k; i++) h[i] = val(r, i);
    to_dev(s, h, k);
    NT_OKC(w, nexar_allreduce(w, s, d, k, NEXAR_FLOAT32, NEXAR_SUM));
    from_dev(h, d, k);
    for (size_t i = 0; i < k; i++) e[i] = sum_to(n, i);
    NT_CHECK(same("allreduce", h, e, k) == 0);
    NT_OKC(w,
           nexar_allreduce(w, NEXAR_IN_PLACE, s, k, NEXAR_FLOAT32, NEXAR_SUM));
    from_dev(h, s, k);
    NT_CHECK(same("allreduce in place", h, e, k) == 0);
  }

  /* isend / irecv ring. */
  size_t k = 100000;
  for (size_t i = 0; i < k; i++) h[i] = val(r, i);
  to_dev(s, h, k);
  nexar_req_t *rq[2];
  NT_OKC(w, nexar_isend(w, s, k, NEXAR_FLOAT32, (r + 1) % n, 1, &rq[0]));
  NT_OKC(w, nexar_irecv(w, d, k, NEXAR_FLOAT32, (r + n - 1) % n, 1, &rq[1]));
  NT_OKC(w, nexar_waitall(2, rq, NULL));
  from_dev(h, d, k);
  for (size_t i = 0; i < k; i++) e[i] = val((r + n - 1) % n, i);
  NT_CHECK(same("p2p", h, e, k) == 0);

  /* bcast from the last rank. */
  k = 140000;
  if (r == n - 1) {
    for (size_t i = 0; i < k; i++) h[i] = val(r, i);
    to_dev(d, h, k);
  }
  NT_OKC(w, nexar_bcast(w, d, k, NEXAR_FLOAT32, n - 1));
  from_dev(h, d, k);
  for (size_t i = 0; i < k; i++) e[i] = val(n - 1, i);
  NT_CHECK(same("bcast", h, e, k) == 0);

  /* allgather, reduce_scatter_block, alltoall, scan. */
  k = 1000;
  for (size_t i = 0; i < k; i++) h[i] = val(r, i);
  to_dev(s, h, k);
  NT_OKC(w, nexar_allgather(w, s, d, k, NEXAR_FLOAT32));
  from_dev(h, d, (size_t)n * k);
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < k; i++) e[(size_t)q * k + i] = val(q, i);
  NT_CHECK(same("allgather", h, e, (size_t)n * k) == 0);

  for (size_t i = 0; i < (size_t)n * k; i++) h[i] = val(r, i);
  to_dev(s, h, (size_t)n * k);
  NT_OKC(w, nexar_reduce_scatter_block(w, s, d, k, NEXAR_FLOAT32, NEXAR_SUM));
  from_dev(h, d, k);
  for (size_t i = 0; i < k; i++) e[i] = sum_to(n, (size_t)r * k + i);
  NT_CHECK(same("reduce_scatter_block", h, e, k) == 0);

  NT_OKC(w, nexar_alltoall(w, s, d, k, NEXAR_FLOAT32));
  from_dev(h, d, (size_t)n * k);
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < k; i++)
      e[(size_t)q * k + i] = val(q, (size_t)r * k + i);
  NT_CHECK(same("alltoall", h, e, (size_t)n * k) == 0);

  for (size_t i = 0; i < k; i++) h[i] = val(r, i);
  to_dev(s, h, k);
  NT_OKC(w, nexar_scan(w, s, d, k, NEXAR_FLOAT32, NEXAR_SUM));
  from_dev(h, d, k);
  for (size_t i = 0; i < k; i++) e[i] = sum_to(r + 1, i);
  NT_CHECK(same("scan", h, e, k) == 0);

  /* Host receive buffer with the CUDA adapter: used directly. */
  NT_OKC(w, nexar_allreduce(w, s, h, k, NEXAR_FLOAT32, NEXAR_SUM));
  for (size_t i = 0; i < k; i++) e[i] = sum_to(n, i);
  NT_CHECK(same("allreduce to host", h, e, k) == 0);

  /* Managed memory is staged like device memory. */
  float *m = NULL;
  NT_CHECK(cu.malloc_managed((void **)&m, k * sizeof(float), 1) == 0);
  cu.sync();
  for (size_t i = 0; i < k; i++) m[i] = val(r, i);
  NT_OKC(w, nexar_allreduce(w, NEXAR_IN_PLACE, m, k, NEXAR_FLOAT32, NEXAR_SUM));
  NT_CHECK(same("allreduce managed", m, e, k) == 0);

  /* reduce_local: staged (no device reduction in the CUDA adapter). */
  for (size_t i = 0; i < k; i++) h[i] = val(r, i);
  to_dev(s, h, k);
  to_dev(d, h, k);
  NT_OK(nexar_reduce_local(ctx, s, d, k, NEXAR_FLOAT32, NEXAR_SUM));
  from_dev(h, d, k);
  for (size_t i = 0; i < k; i++) e[i] = 2 * val(r, i);
  NT_CHECK(same("reduce_local", h, e, k) == 0);

  cu.free_(m);
  cu.free_(s);
  cu.free_(d);
  free(h);
  free(e);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* Without CUDA: NEXAR_DEVICE=cuda makes nexar_init fail cleanly. */
static int no_cuda_worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx = NULL;
  int rc = nexar_init(NULL, &ctx);
  NT_CHECKF(rc == NEXAR_ERR_UNSUPPORTED && !ctx, "nexar_init: %s",
            nexar_err_name(rc));
  NT_CHECKF(strstr(nexar_last_error(), "NEXAR_DEVICE=cuda"), "message: %s",
            nexar_last_error());
  return 0;
}

/* In a child process: 0 when the CUDA adapter is available, SKIP (with
 * the reason on stdout) when not, 1 when it misbehaves. */
static int probe(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    const nexar_device_ops_t *ops = (const nexar_device_ops_t *)1;
    int rc = nexar_device_adapter_cuda(&ops);
    if (rc == NEXAR_OK && ops && strcmp(ops->name, "cuda") == 0) _exit(0);
    if (rc == NEXAR_ERR_UNSUPPORTED && !ops && nexar_last_error()[0]) {
      printf("SKIP: no usable CUDA: %s\n", nexar_last_error());
      fflush(stdout);
      _exit(SKIP);
    }
    printf("nexar_device_adapter_cuda: %s, ops %p, message '%s'\n",
           nexar_err_name(rc), (const void *)ops, nexar_last_error());
    fflush(stdout);
    _exit(1);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st)) return 1;
  return WEXITSTATUS(st);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int p = probe();
  if (p == SKIP) {
    nt_opts_t o = {.world_size = 1,
                   .seed_must_form = NT_SEED_OPTIONAL,
                   .env = "NEXAR_DEVICE=cuda\n"};
    if (nt_run(&o, no_cuda_worker, NULL)) {
      printf("FAIL NEXAR_DEVICE=cuda without CUDA\n");
      return 1;
    }
    printf(
        "ok NEXAR_DEVICE=cuda refused without CUDA; skipping the GPU "
        "cases\n");
    return SKIP;
  }
  if (p != 0) {
    printf("FAIL probe\n");
    return 1;
  }
  int fails = 0;
  for (int world = 2; world <= 3; world++) {
    nt_opts_t o = {.world_size = world,
                   .timeout_ms = 120000,
                   .env = "NEXAR_DEVICE=cuda\n"};
    int rc = nt_run(&o, worker, NULL);
    printf("%s cuda world=%d\n", rc ? "FAIL" : "ok", world);
    fails += rc ? 1 : 0;
  }
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
