/*
 * Did this process run? (the engine's pause detection; engine.c calls it
 * at the start and end of every pass, emu held.)
 *
 * A process that did not run for longer than ep->pause_ns (SIGSTOP, a
 * paused VM, a starved host) may have been declared failed meanwhile: it
 * reads everything queued before it judges anyone (catch_up). Not running
 * is counted since the socket was last read: the gaps between passes (a
 * running process passes at least every 50 ms), and within a pass the wall
 * time its thread was neither running nor waiting for a CPU (a long pass
 * that computes is work, one on an oversubscribed host is work delayed;
 * one that was stopped in the middle is not). Running is the thread's CPU
 * clock, waiting the run-queue time in /proc/thread-self/schedstat (without
 * it, waiting counts as not running). They cost system calls, so they are
 * sampled at most every RUN_SAMPLE_NS at the start of a pass and read
 * again only once a pass has run for RUN_LONG_NS.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

#define RUN_SAMPLE_NS 10000000ull /* 10 ms */
#define RUN_LONG_NS 20000000ull   /* 20 ms */

/* Each thread keeps its schedstat file open (a pread regenerates it): an
 * open and a close per sample cost a path walk each, and the passes of the
 * caller and the progress thread alternate. Closed when the thread ends,
 * and by the thread that tears an engine down (nexar__run_release), so a
 * process that has finalized holds no descriptor of nexar's. */
static pthread_key_t stat_key;
static pthread_once_t stat_once = PTHREAD_ONCE_INIT;
static _Thread_local int stat_fd; /* the descriptor + 1; 0: not open yet */

static void stat_close(void *p) {
  close((int)(intptr_t)p - 1);
}

/* A forked child's thread is another thread: its file is opened anew. */
static void stat_forget(void) {
  stat_fd = 0;
}

static void stat_key_make(void) {
  (void)pthread_key_create(&stat_key, stat_close);
  (void)pthread_atfork(NULL, NULL, stat_forget);
}

static int stat_open(void) {
  if (stat_fd) return stat_fd - 1;
  pthread_once(&stat_once, stat_key_make);
  int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1; /* tried again at the next sample */
  stat_fd = fd + 1;
  (void)pthread_setspecific(stat_key, (void *)(intptr_t)stat_fd);
  return fd;
}

void nexar__run_release(void) {
  if (!stat_fd) return;
  close(stat_fd - 1);
  stat_fd = 0;
  (void)pthread_setspecific(stat_key, NULL);
}

/* The calling thread's time running or runnable (ns). */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  /* "<ran> <waited on a run queue> <slices>"; ran is only brought up to
   * date at context switches, so the clock above stands for it. */
  int fd = stat_open();
  if (fd < 0) return t;
  char b[96];
  ssize_t n = pread(fd, b, sizeof(b) - 1, 0);
  unsigned long long ran, waited;
  if (n > 0) {
    b[n] = 0;
    if (sscanf(b, "%llu %llu", &ran, &waited) == 2) t += waited;
  }
  return t;
}

static void run_sample(nexar__ep_t *ep, uint64_t now, uint64_t cpu) {
  ep->run.s_wall = now;
  ep->run.s_cpu = cpu;
  ep->run.s_gaps = 0;
  ep->run.s_tid = pthread_self();
  ep->run.s_ok = true;
}

void nexar__run_pass_begin(nexar__ep_t *ep, uint64_t now) {
  if (ep->run.pass_end && now > ep->run.pass_end) {
    uint64_t gap = now - ep->run.pass_end;
    ep->run.unrun += gap;
    ep->run.s_gaps += gap;
  }
  ep->run.pass_start = now;
  if (!ep->run.s_ok || !pthread_equal(ep->run.s_tid, pthread_self()) ||
      now - ep->run.s_wall > RUN_SAMPLE_NS)
    run_sample(ep, now, thread_cpu_ns());
}

/* Counts the time since the sample that the pass's thread got no CPU, once
 * the pass (or its rest since the last count) has run for RUN_LONG_NS. */
static void run_settle(nexar__ep_t *ep, uint64_t now) {
  if (now - ep->run.pass_start < RUN_LONG_NS) return;
  uint64_t cpu = thread_cpu_ns();
  uint64_t wall = now - ep->run.s_wall;
  wall = wall > ep->run.s_gaps ? wall - ep->run.s_gaps : 0;
  uint64_t used = cpu - ep->run.s_cpu; /* ran or waited to */
  if (wall > used) ep->run.unrun += wall - used;
  run_sample(ep, now, cpu);
  ep->run.pass_start = now;
}

/* |now|: a fresh reading of the clock (one system-clock read costs as
 * much as a poll of a ring: a pass reads it only where time moved). */
void nexar__run_pass_end(nexar__ep_t *ep, uint64_t now) {
  run_settle(ep, now);
  ep->run.pass_end = now;
}

bool nexar__run_paused(nexar__ep_t *ep, uint64_t now) {
  if (!ep->pause_ns) return false;
  run_settle(ep, now);
  return ep->run.unrun > ep->pause_ns;
}
