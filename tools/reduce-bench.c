/*
 * reduce-bench: throughput of the float32 SUM reduction kernel for each
 * kernel family the CPU has, next to memcpy on the same size.
 *
 *   reduce-bench [bytes]     (default 64 MiB; k, m, g suffixes allowed)
 *
 * Each line gives GB/s counted as bytes of the inout buffer processed per
 * second (10^9 bytes per GB), best of several samples. The reduction reads
 * two buffers and writes one, memcpy reads one and writes one, so on sizes
 * far beyond the caches the reduction is expected to be somewhat slower
 * than memcpy even when it is purely memory bound.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/reduce.h"
#include "coll/reduce_impl.h"

#define SAMPLES 9

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_bytes(const char *s, size_t *out) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned long long mul = 1;
  if (end == s) return -1;
  if (*end == 'k' || *end == 'K')
    mul = 1ull << 10, end++;
  else if (*end == 'm' || *end == 'M')
    mul = 1ull << 20, end++;
  else if (*end == 'g' || *end == 'G')
    mul = 1ull << 30, end++;
  if (*end != '\0' || v == 0 || v > SIZE_MAX / mul) return -1;
  *out = (size_t)(v * mul);
  return 0;
}

/* Small buffers are timed over several passes per sample so that one
 * sample lasts long enough for the clock to resolve it. */
static unsigned passes_for(size_t bytes) {
  size_t target = (size_t)4 << 20;
  return bytes >= target ? 1u : (unsigned)(target / bytes);
}

static void report(const char *what, size_t bytes, unsigned passes,
                   double best) {
  printf("%-20s %12zu bytes  %8.2f GB/s\n", what, bytes,
         (double)bytes * passes / best / 1e9);
}

int main(int argc, char **argv) {
  size_t bytes = (size_t)64 << 20;
  if (argc > 2 || (argc == 2 && parse_bytes(argv[1], &bytes) != 0)) {
    fprintf(stderr, "usage: %s [bytes]\n", argv[0]);
    return 2;
  }
  size_t count = bytes / sizeof(float);
  if (count == 0) {
    fprintf(stderr, "%s: need at least %zu bytes\n", argv[0], sizeof(float));
    return 2;
  }
  bytes = count * sizeof(float);
  float *inout = malloc(bytes), *in = malloc(bytes);
  if (inout == NULL || in == NULL) {
    fprintf(stderr, "%s: out of memory\n", argv[0]);
    free(inout);
    free(in);
    return 1;
  }
  /* Ordinary finite values that stay far from overflow and from the
   * subnormal range (which is slow on some CPUs) however many passes run.
   * Writing every page also keeps page faults out of the timings. */
  for (size_t i = 0; i < count; i++) {
    inout[i] = (float)(i % 1000) * 0.5f;
    in[i] = 1.0f / 1024.0f;
  }
  unsigned passes = passes_for(bytes);

  static const char *isas[] = {"portable", "avx2", "avx512"};
  for (size_t k = 0; k < sizeof isas / sizeof isas[0]; k++) {
    char label[32];
    snprintf(label, sizeof label, "f32 sum %s", isas[k]);
    if (strcmp(nexar__reduce_force_isa(isas[k]), isas[k]) != 0) {
      printf("%-20s not available on this CPU\n", label);
      continue;
    }
    nexar__reduce(inout, in, count, NEXAR_FLOAT32, NEXAR_SUM); /* warm-up */
    double best = 1e30;
    for (int s = 0; s < SAMPLES; s++) {
      double t0 = now_s();
      for (unsigned p = 0; p < passes; p++)
        nexar__reduce(inout, in, count, NEXAR_FLOAT32, NEXAR_SUM);
      double t = now_s() - t0;
      if (t < best) best = t;
    }
    report(label, bytes, passes, best);
  }
  nexar__reduce_force_isa(NULL);

  memcpy(inout, in, bytes); /* warm-up */
  double best = 1e30;
  for (int s = 0; s < SAMPLES; s++) {
    double t0 = now_s();
    for (unsigned p = 0; p < passes; p++) {
      memcpy(inout, in, bytes);
      /* Keeps the compiler from merging or dropping the repeated copies. */
      __asm__ volatile("" : : "r"(inout) : "memory");
    }
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  report("memcpy", bytes, passes, best);

  free(inout);
  free(in);
  return 0;
}
