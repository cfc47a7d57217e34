/*
 * Yielding while a caller spins in a wait (engine.c's spin, express.c),
 * and moving off a CPU that another rank of this host shares.
 *
 * On a host with a CPU per rank, two ranks that wait for each other can
 * still end up on one CPU: a wake-up (the end of a barrier, say) places
 * the woken rank on its waker's CPU, and from then on both spin and yield
 * to each other and never sleep, so nothing places them again. The
 * scheduler's idle balancing leaves a task that ran within the last half
 * millisecond where it is, so it took 10-20 ms to move one while the other
 * CPU idled, and every message meanwhile cost a switch: 7-12 us one-way
 * against 0.4 (docs/performance.md, "Two ranks on one CPU after a
 * wake-up"). Open MPI's mpirun avoids it by binding each rank to a core.
 *
 * nexar binds nothing (threads the application starts inherit a binding,
 * and a training job's compute threads would all share one CPU). A yield
 * that returns after more than SHARED_NS ran another thread; after
 * SHARED_MAX of those in a row, the caller's thread moves to its home CPU
 * (ep->home_cpu, set by cluster/host.c: the CPU of index local rank modulo
 * the CPUs it may use) by setting its affinity to that CPU and straight
 * back to what it was, at most once per MOVE_GAP_NS. The kernel moves a
 * thread at once when its CPU leaves its mask, and restoring the mask
 * binds nothing: the scheduler may move it again as it likes.
 *
 * With more ranks than CPUs the same rule spreads them evenly: the kernel
 * left four ranks on two CPUs as three and one for the whole of a 20,000
 * allreduce run (the lone rank's yields were short, the others' long), at
 * 30-54 us per 64 B allreduce against 14-30 once spread.
 */
#include <pthread.h>
#include <sched.h>

#include "core/core.h"

#define SHARED_NS 3000u      /* a yield longer than this ran someone else */
#define SHARED_MAX 4u        /* such yields in a row before the move */
#define MOVE_GAP_NS 1000000u /* at most one move per millisecond */

/* Yields of this thread in a row that ran someone else; its last move. */
static _Thread_local unsigned shared_yields;
static _Thread_local uint64_t moved_at;

/* Moves the calling thread to |cpu| when it is not there and its mask
 * allows it; the mask is left as it was. True when it moved. */
static bool move_to(int cpu) {
  cpu_set_t was, home;
  pthread_t self = pthread_self();
  if (sched_getcpu() == cpu ||
      pthread_getaffinity_np(self, sizeof was, &was) != 0 ||
      !CPU_ISSET(cpu, &was))
    return false;
  CPU_ZERO(&home);
  CPU_SET(cpu, &home);
  if (pthread_setaffinity_np(self, sizeof home, &home) != 0) return false;
  (void)pthread_setaffinity_np(self, sizeof was, &was);
  return true;
}

void nexar__ep_yield(nexar__ep_t *ep) {
  int home = atomic_load_explicit(&ep->home_cpu, memory_order_relaxed);
  if (home < 0) {
    sched_yield();
    return;
  }
  uint64_t t0 = nexar__now();
  sched_yield();
  uint64_t t1 = nexar__now();
  if (t1 - t0 < SHARED_NS) {
    shared_yields = 0;
    return;
  }
  if (++shared_yields < SHARED_MAX || t1 - moved_at < MOVE_GAP_NS) return;
  shared_yields = 0;
  if (move_to(home)) {
    moved_at = t1;
    atomic_fetch_add_explicit(&ep->home_moves, 1, memory_order_relaxed);
  }
}
