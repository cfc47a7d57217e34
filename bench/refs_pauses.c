/*
 * refs pauses [SECONDS]: how often, and for how long, this host takes a
 * CPU away from a process that never gives it up. One process per online
 * CPU, each bound to its CPU, reads CLOCK_MONOTONIC in a tight loop for
 * SECONDS (default 2; no system call, no memory but its stack). A gap of
 * PAUSE_NS or more between two readings is a pause: the guest's own
 * interrupts (few on a tickless kernel: /proc/interrupts tells), another
 * thread of the guest (counted: involuntary context switches), or the
 * hypervisor running something else on the vCPU. Prints
 *   {"ref": "host-pauses", "size": 0, "GBps": null, "seconds": S,
 *    "note": "..."}
 * where the note gives, over the CPUs, the pauses a second of 20 us or
 * more, the share of the time lost to pauses, the longest, a count per
 * band and the involuntary context switches (where they are many, the
 * figures are not the host's alone). A job that keeps a CPU busy for T seconds
 * a call is paused about T x (pauses a second) times a call: the tail of any
 * CPU-bound call on this host, whoever makes it (docs/performance.md, "The 64
 * KiB QUIC call, step by step").
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "refs.h"

#define PAUSE_NS 5000ull /* a clock read costs well under 1 us */
#define BANDS 4
static const uint64_t band_lo_ns[BANDS] = {PAUSE_NS, 20000, 100000, 1000000};

typedef struct {
  double secs;
  uint64_t n[BANDS]; /* pauses per band */
  uint64_t lost_ns;  /* summed length of the pauses */
  uint64_t max_ns;
  long switches; /* involuntary context switches: the guest's scheduler */
} pause_t;

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int pause_proc(int r, void *arg, const int sync[2], int out) {
  pause_t p = *(const pause_t *)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(r, &set);
  (void)sched_setaffinity(0, sizeof set, &set); /* best effort */
  double t0;
  if (refs_group_sync(sync, &t0)) return 1;
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  uint64_t prev = now_ns();
  uint64_t end = prev + (uint64_t)(p.secs * 1e9);
  for (uint64_t t = prev; t < end; prev = t) {
    t = now_ns();
    uint64_t gap = t - prev;
    if (gap < PAUSE_NS) continue;
    int b = BANDS - 1;
    while (b > 0 && gap < band_lo_ns[b]) b--;
    p.n[b]++;
    p.lost_ns += gap;
    if (gap > p.max_ns) p.max_ns = gap;
  }
  getrusage(RUSAGE_SELF, &ru1);
  p.switches = ru1.ru_nivcsw - ru0.ru_nivcsw;
  return write(out, &p, sizeof p) == sizeof p ? 0 : 1;
}

int refs_pauses(int argc, char **argv) {
  double secs = argc > 0 ? atof(argv[0]) : 2.0;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (!(secs >= 0.1 && secs <= 600) || ncpu < 1) {
    fprintf(stderr, "refs: pauses [SECONDS]: 0.1 to 600 seconds\n");
    return 2;
  }
  if (ncpu > 256) ncpu = 256;
  pause_t arg = {.secs = secs};
  int results = refs_group_start((int)ncpu, pause_proc, &arg);
  if (results < 0) return 1;
  pause_t sum = {.secs = secs};
  int got = 0;
  for (pause_t p; read(results, &p, sizeof p) == sizeof p; got++) {
    for (int b = 0; b < BANDS; b++) sum.n[b] += p.n[b];
    sum.lost_ns += p.lost_ns;
    if (p.max_ns > sum.max_ns) sum.max_ns = p.max_ns;
    sum.switches += p.switches;
  }
  if (refs_group_end((int)ncpu, got, results, "pauses")) return 1;
  double cpu_s = secs * got;
  double big = (double)(sum.n[1] + sum.n[2] + sum.n[3]) / cpu_s;
  printf(
      "{\"ref\": \"host-pauses\", \"size\": 0, \"GBps\": null, "
      "\"seconds\": %.3f, \"note\": \"%d CPUs, each read its clock in a "
      "loop for %.1f s: %.0f pauses a second of 20 us or more per CPU, "
      "%.2f %% of the time lost to pauses of 5 us or more, the longest "
      "%.0f us; per CPU a second: %.0f of 5-20 us, %.0f of 20-100, %.1f "
      "of 100 us-1 ms, %.2f longer; %ld involuntary context switches in "
      "all (other threads of this guest: where they are many, the "
      "figures are not the host's alone)\"}\n",
      secs, got, secs, big, 100.0 * (double)sum.lost_ns / (cpu_s * 1e9),
      (double)sum.max_ns / 1e3, (double)sum.n[0] / cpu_s,
      (double)sum.n[1] / cpu_s, (double)sum.n[2] / cpu_s,
      (double)sum.n[3] / cpu_s, sum.switches);
  fflush(stdout);
  return 0;
}
