/*
 * nexar-perf: a first benchmark (run under nexar-run).
 *   nexar-perf latency  [-n ITERS]          8-byte ping-pong between ranks 0
 *                                           and 1; median one-way latency
 *   nexar-perf bw       [-b BYTES] [-n N]   rank 0 sends BYTES to rank 1;
 *                                           median throughput
 *   nexar-perf allreduce [-b BYTES] [-n N]  float32 sum; median time, algbw
 *                                           and busbw (2(n-1)/n)
 * Each iteration starts after a barrier; the median over ranks' maxima is
 * reported by rank 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nexar.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define CHECK(x)                                                             \
  do {                                                                       \
    int rc_ = (x);                                                           \
    if (rc_) {                                                               \
      fprintf(stderr, "nexar-perf: %s: %s\n", #x, nexar_comm_last_error(w)); \
      return 1;                                                              \
    }                                                                        \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: nexar-perf latency|bw|allreduce [-b BYTES] "
            "[-n ITERS]\n");
    return 2;
  }
  const char *op = argv[1];
  size_t bytes = 8;
  int iters = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b"))
      bytes = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "-n"))
      iters = atoi(argv[i + 1]);
  }
  nexar_ctx_t *ctx;
  nexar_comm_t *w = NULL;
  int rc = nexar_init(NULL, &ctx);
  if (rc) {
    fprintf(stderr, "nexar-perf: init: %s\n", nexar_last_error());
    return 1;
  }
  w = nexar_comm_world(ctx);
  int r, n;
  nexar_comm_rank(w, &r);
  nexar_comm_size(w, &n);
  if (!iters) iters = !strcmp(op, "latency") ? 10000 : 10;
  size_t count = bytes / 4 ? bytes / 4 : 1;
  char *buf = calloc(1, bytes < 8 ? 8 : bytes);
  double *t = calloc((size_t)iters, sizeof(double));
  if (!buf || !t) return 1;
  if (!strcmp(op, "latency")) {
    for (int i = -100; i < iters; i++) {
      double t0 = now_us();
      if (r == 0) {
        CHECK(nexar_send(w, buf, 8, NEXAR_UINT8, 1, 0));
        CHECK(nexar_recv(w, buf, 8, NEXAR_UINT8, 1, 0, NULL));
      } else if (r == 1) {
        CHECK(nexar_recv(w, buf, 8, NEXAR_UINT8, 0, 0, NULL));
        CHECK(nexar_send(w, buf, 8, NEXAR_UINT8, 0, 0));
      }
      if (i >= 0) t[i] = (now_us() - t0) / 2;
    }
  } else {
    for (int i = -2; i < iters; i++) {
      CHECK(nexar_barrier(w));
      double t0 = now_us();
      if (!strcmp(op, "bw")) {
        if (r == 0) CHECK(nexar_send(w, buf, bytes, NEXAR_UINT8, 1, 1));
        if (r == 1) CHECK(nexar_recv(w, buf, bytes, NEXAR_UINT8, 0, 1, NULL));
        if (r == 1) CHECK(nexar_send(w, buf, 1, NEXAR_UINT8, 0, 2));
        if (r == 0) CHECK(nexar_recv(w, buf, 1, NEXAR_UINT8, 1, 2, NULL));
      } else {
        CHECK(nexar_allreduce(w, NEXAR_IN_PLACE, buf, count, NEXAR_FLOAT32,
                              NEXAR_SUM));
      }
      double dt = now_us() - t0;
      CHECK(
          nexar_allreduce(w, NEXAR_IN_PLACE, &dt, 1, NEXAR_FLOAT64, NEXAR_MAX));
      if (i >= 0) t[i] = dt;
    }
  }
  qsort(t, (size_t)iters, sizeof(double), cmp);
  double med = t[iters / 2];
  if (r == 0) {
    if (!strcmp(op, "latency"))
      printf(
          "latency 8 B: median %.1f us one-way (p99 %.1f us) over %d "
          "round trips\n",
          med, t[(size_t)iters * 99 / 100], iters);
    else if (!strcmp(op, "bw"))
      printf("bw %zu B: median %.1f ms, %.2f GB/s (%.2f Gbit/s)\n", bytes,
             med / 1e3, bytes / med / 1e3, bytes * 8 / med / 1e3);
    else
      printf(
          "allreduce %zu B float32 sum on %d ranks: median %.2f ms, "
          "algbw %.2f GB/s, busbw %.2f GB/s\n",
          bytes, n, med / 1e3, bytes / med / 1e3,
          bytes / med / 1e3 * 2.0 * (n - 1) / n);
  }
  free(buf);
  free(t);
  return nexar_finalize(ctx) ? 1 : 0;
}
