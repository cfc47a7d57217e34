/*
 * nexar-perf rpc: the RPC round trip and calls/s, first with the ranks
 * idle, then while every rank runs back-to-back allreduces of the load size
 * on a communicator of their own (one extra thread per rank). Rank 0 calls
 * an echo handler on rank 1 with a request of the given size; a barrier on
 * the world communicator is timed in both phases for comparison. The
 * report gives each loaded figure as a ratio to its idle one.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

#define FN_ECHO 0x7e57
#define RPC_TIMEOUT_MS 60000

typedef struct figures {
  double rtt_med, rtt_p99, rtt_mean, calls_s; /* us; calls per second */
  double bar_med, bar_p99;                    /* us */
  long long loads;                            /* allreduces meanwhile */
  double loads_s; /* allreduces/s during the calls made one at a time */
} figures_t;

/* The background load: allreduces on |comm| until rank 0 says stop. */
typedef struct load {
  perf_t p; /* comm = the load's communicator */
  float *buf;
  size_t count;
  atomic_int stop, failed;
  atomic_llong done;
} load_t;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int h_echo(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                  void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn;
  if (n > cap) return NEXAR_ERR_INVALID_ARG;
  memcpy(resp, req, n);
  *out = n;
  return 0;
}

static void *load_main(void *arg) {
  load_t *l = arg;
  for (;;) {
    int flag = atomic_load(&l->stop);
    int rc = nexar_allreduce(l->p.comm, NEXAR_IN_PLACE, l->buf, l->count,
                             NEXAR_FLOAT32, NEXAR_SUM);
    if (!rc)
      rc = nexar_allreduce(l->p.comm, NEXAR_IN_PLACE, &flag, 1, NEXAR_INT32,
                           NEXAR_MAX);
    if (rc) {
      perf_fail(&l->p, "nexar_allreduce (load)", rc);
      atomic_store(&l->failed, 1);
      return NULL;
    }
    atomic_fetch_add(&l->done, 1);
    if (flag) return NULL;
  }
}

/* Median and 99th percentile of |t| (sorted in place). */
static void quantiles(double *t, int n, double *med, double *p99) {
  perf_sort_times(t, n);
  *med = t[n / 2];
  *p99 = perf_quantile(t, n, 0.99);
}

/* One phase: rank 0 times |iters| calls one at a time, then calls/s with
 * |window| calls in flight; then every rank times |iters| barriers. */
static int phase(perf_t *p, const load_t *l, int iters, int warmup, int window,
                 double *t, figures_t *f) {
  nexar_req_t **reqs = p->reqs;
  PERF_CALL(p, "nexar_barrier", nexar_barrier(p->comm));
  if (p->rank == 0) {
    double c0 = 0;
    long long l0 = 0;
    for (int i = -warmup; i < iters; i++) {
      if (i == 0) {
        c0 = now_us();
        l0 = l ? atomic_load(&l->done) : 0;
      }
      size_t got = 0;
      double t0 = now_us();
      PERF_CALL(p, "nexar_rpc_call",
                nexar_rpc_call(p->comm, 1, FN_ECHO, p->sendbuf, p->size,
                               p->recvbuf, p->size, &got, RPC_TIMEOUT_MS));
      if (i >= 0) t[i] = now_us() - t0;
      if (got != p->size || memcmp(p->sendbuf, p->recvbuf, p->size))
        return perf_fail(p, "echo differs", NEXAR_ERR_INTERNAL);
    }
    if (l && iters > 0)
      f->loads_s =
          (double)(atomic_load(&l->done) - l0) / ((now_us() - c0) / 1e6);
    double sum = 0;
    for (int i = 0; i < iters; i++) sum += t[i];
    f->rtt_mean = sum / iters;
    quantiles(t, iters, &f->rtt_med, &f->rtt_p99);
    int rounds = iters / window > 0 ? iters / window : 1;
    double t0 = now_us();
    for (int k = 0; k < rounds; k++) {
      for (int j = 0; j < window; j++)
        PERF_CALL(p, "nexar_rpc_icall",
                  nexar_rpc_icall(p->comm, 1, FN_ECHO, p->sendbuf, p->size,
                                  (char *)p->recvbuf + (size_t)j * p->size,
                                  p->size, RPC_TIMEOUT_MS, &reqs[j]));
      PERF_CALL(p, "nexar_waitall (calls)",
                nexar_waitall((size_t)window, reqs, NULL));
    }
    f->calls_s = (double)rounds * window / ((now_us() - t0) / 1e6);
  }
  PERF_CALL(p, "nexar_barrier", nexar_barrier(p->comm));
  for (int i = 0; i < iters; i++) {
    double t0 = now_us();
    PERF_CALL(p, "nexar_barrier", nexar_barrier(p->comm));
    t[i] = now_us() - t0;
  }
  quantiles(t, iters, &f->bar_med, &f->bar_p99);
  return 0;
}

/* The loaded phase: starts the load, waits for its first allreduce, runs
 * the phase, stops the load. */
static int loaded(perf_t *p, load_t *l, int iters, int warmup, int window,
                  double *t, figures_t *f) {
  pthread_t th;
  if (pthread_create(&th, NULL, load_main, l))
    return perf_fail(p, "pthread_create", NEXAR_ERR_NOMEM);
  while (!atomic_load(&l->done) && !atomic_load(&l->failed)) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  long long before = atomic_load(&l->done);
  int rc = atomic_load(&l->failed) ? NEXAR_ERR_INTERNAL
                                   : phase(p, l, iters, warmup, window, t, f);
  f->loads = atomic_load(&l->done) - before;
  atomic_store(&l->stop, 1);
  pthread_join(th, NULL);
  return rc ? rc : atomic_load(&l->failed) ? NEXAR_ERR_INTERNAL : 0;
}

static void print_row(const char *name, const figures_t *f) {
  printf("%8s  %9.1f  %9.1f  %9.1f  %9.0f  %9.1f  %9.1f  %10lld\n", name,
         f->rtt_med, f->rtt_p99, f->rtt_mean, f->calls_s, f->bar_med,
         f->bar_p99, f->loads);
}

static void report(const perf_t *p, size_t load, int iters, int window,
                   const figures_t *idle, const figures_t *busy) {
  printf("# nexar-perf rpc: %d ranks, nexar %s\n", p->n, nexar_version());
  /* What the figures depend on most: cores to spare, and the settings
   * that bound how long a call waits behind bulk work. */
  double la[1] = {-1};
  if (getloadavg(la, 1) < 1) la[0] = -1;
  const char *tp = getenv("NEXAR_TRANSPORT"),
             *sl = getenv("NEXAR_PASS_SLICE_BYTES");
  printf(
      "# host: %ld CPUs online, load average %.2f; NEXAR_TRANSPORT=%s, "
      "NEXAR_PASS_SLICE_BYTES=%s\n",
      sysconf(_SC_NPROCESSORS_ONLN), la[0], tp ? tp : "(auto)",
      sl ? sl : "(262144)");
  printf(
      "# rank 0 calls an echo handler on rank 1: %zu-byte request and "
      "response,\n# %d calls one at a time, then calls/s with %d in flight; "
      "%d barriers on the\n# same communicator. loaded: every rank runs %zu-"
      "byte float sum allreduces on\n# a communicator of its own, one thread "
      "per rank, meanwhile.\n",
      p->size, iters, window, iters, load);
  printf("%8s  %9s  %9s  %9s  %9s  %9s  %9s  %10s\n", "# phase", "rtt_med",
         "rtt_p99", "rtt_mean", "calls/s", "bar_med", "bar_p99", "allreduces");
  printf("%8s  %9s  %9s  %9s  %9s  %9s  %9s  %10s\n", "#", "(us)", "(us)",
         "(us)", "", "(us)", "(us)", "");
  print_row("idle", idle);
  print_row("loaded", busy);
  printf(
      "# loaded/idle: rtt median %.2f, rtt p99 %.2f, calls/s %.2f, barrier "
      "median %.2f\n",
      busy->rtt_med / idle->rtt_med, busy->rtt_p99 / idle->rtt_p99,
      busy->calls_s / idle->calls_s, busy->bar_med / idle->bar_med);
  printf(
      "# load while the calls were made one at a time: %.1f allreduces/s "
      "(rank 0)\n",
      busy->loads_s);
  fflush(stdout);
}

int perf_rpc(perf_t *p, size_t bytes, size_t load, int iters, int warmup,
             int window) {
  int rc = NEXAR_ERR_NOMEM;
  load_t l;
  memset(&l, 0, sizeof l);
  l.p = *p;
  l.p.opname = "rpc load";
  l.count = load / sizeof(float);
  p->size = bytes;
  double *t = calloc((size_t)iters, sizeof *t);
  p->sendbuf = malloc(bytes + 1);
  p->recvbuf = malloc(bytes * (size_t)window + 1);
  p->reqs = calloc((size_t)window, sizeof *p->reqs);
  l.buf = calloc(l.count + 1, sizeof *l.buf);
  if (!t || !p->sendbuf || !p->recvbuf || !p->reqs || !l.buf) {
    perf_fail(p, "allocating buffers", rc);
    goto done;
  }
  for (size_t i = 0; i < bytes; i++)
    ((unsigned char *)p->sendbuf)[i] = (unsigned char)(i * 7 + 1);
  figures_t idle, busy;
  memset(&idle, 0, sizeof idle);
  memset(&busy, 0, sizeof busy);
  if ((rc = nexar_rpc_register(p->comm, FN_ECHO, h_echo, NULL))) {
    perf_fail(p, "nexar_rpc_register", rc);
    goto done;
  }
  if ((rc = nexar_comm_dup(p->comm, &l.p.comm))) {
    perf_fail(p, "nexar_comm_dup", rc);
    goto done;
  }
  if (!(rc = phase(p, NULL, iters, warmup, window, t, &idle)))
    rc = loaded(p, &l, iters, warmup, window, t, &busy);
  if (!rc && p->rank == 0) report(p, load, iters, window, &idle, &busy);
  /* Keep the others until rank 0 has reported (as run_sweep does). */
  if (!rc && (rc = nexar_barrier(p->comm))) perf_fail(p, "nexar_barrier", rc);
  nexar_comm_free(&l.p.comm);
done:
  free(l.buf);
  free(p->reqs);
  free(p->recvbuf);
  free(p->sendbuf);
  free(t);
  return rc ? 1 : 0;
}
