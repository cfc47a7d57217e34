/*
 * Yielding while a caller spins in a wait (drive.c's spin, express.c),
 * and moving off a CPU that another rank of this host shares.
 *
 * On a host with a CPU per rank, two ranks that wait for each other can
 * still end up on one CPU: a wake-up (the end of a barrier, say) places
 * the woken rank on its waker's CPU, and from then on both spin and yield
 * to each other and never sleep, so nothing places them again. The
 * scheduler's idle balancing leaves a task that ran within the last half
 * millisecond where it is, so it took 10-20 ms to move one while the other
 * CPU idled, and every message meanwhile cost a switch: 7-12 us one-way
 * against 0.4 (docs/performance.md, "Page faults on a ring's first lap,
 * the flight recorder's first lap, and two ranks on one CPU"). Open MPI's
 * mpirun avoids it by binding each rank to a core.
 *
 * nexar binds nothing (threads the application starts inherit a binding,
 * and a training job's compute threads would all share one CPU). A yield
 * that returns after more than SHARED_NS ran another thread; after
 * SHARED_MAX of those in a row, the caller's thread moves to its home CPU
 * (ep->home_cpu, set by cluster/host.c) by setting its affinity to that
 * CPU and straight back to what it was. The kernel moves a thread at once
 * when its CPU leaves its mask, and restoring the mask binds nothing: the
 * scheduler may move it again as it likes.
 *
 * Where the host has a CPU per rank, the home is the local rank's own.
 * Where ranks outnumber CPUs, every yield runs someone else and each rank
 * has a home in blocks of consecutive local ranks (two ranks a CPU at 4 on
 * 2): the scheduler left 3 of 4 ranks on one CPU and the fourth alone on
 * the other, which slept between its partners' turns, for tens of
 * milliseconds after start-up, and the first few hundred 64 B allreduces
 * at np 4 took 40-80 us instead of 20-30 (docs/performance.md, "Small
 * collectives when ranks outnumber CPUs"). There a thread moves home only
 * while it waits on a collective of at least as many ranks as the host
 * holds, when every rank here is busy: two ranks that exchange messages
 * while the others sleep would otherwise be held on one CPU, and an 8 B
 * ping-pong at np 4 took 8-21 us instead of 2.5-9.
 */
#include <pthread.h>
#include <sched.h>

#include "core/core.h"

#define SHARED_NS 3000u /* a yield longer than this ran someone else */
#define SHARED_MAX 4u   /* such yields in a row before the move */

/* Yields of this thread in a row that ran someone else. */
static _Thread_local unsigned shared_yields;

/* Moves the calling thread to |cpu| when it is not there and its mask
 * allows it; the mask is left as it was. */
static void move_to(int cpu) {
  cpu_set_t was, home;
  pthread_t self = pthread_self();
  if (sched_getcpu() == cpu ||
      pthread_getaffinity_np(self, sizeof was, &was) != 0 ||
      !CPU_ISSET(cpu, &was))
    return;
  CPU_ZERO(&home);
  CPU_SET(cpu, &home);
  if (pthread_setaffinity_np(self, sizeof home, &home) == 0)
    (void)pthread_setaffinity_np(self, sizeof was, &was);
}

void nexar__ep_yield(nexar__ep_t *ep, bool all_here) {
  int home = atomic_load_explicit(&ep->home_cpu, memory_order_relaxed);
  if (home < 0 ||
      (!all_here && atomic_load_explicit(&ep->crowded, memory_order_relaxed))) {
    sched_yield();
    return;
  }
  uint64_t t0 = nexar__now();
  sched_yield();
  if (nexar__now() - t0 < SHARED_NS) {
    shared_yields = 0;
    return;
  }
  if (++shared_yields < SHARED_MAX) return;
  shared_yields = 0;
  move_to(home);
}
