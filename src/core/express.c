/*
 * The engine's half of the express path (p2p/express.c): a caller that
 * finds the engine free and nothing queued owns it for one small
 * operation, and a blocking receive from a neighbour on this host waits by
 * reading that neighbour's link only, instead of queueing a request and
 * running whole passes (every transport read, the timers, the ticks).
 *
 * The wait is a drive (ep->driving is set, so the progress thread stays
 * parked and other waiting callers wait for completions) of bounded
 * length: it ends, and the caller goes on with the general wait, at the
 * end of the spin (NEXAR_SPIN_US), at the deadline, when a pass is due
 * (timers, the failure detector's ticks), when another thread queued an
 * operation, when any transport may have input (other links, the sockets'
 * sweep, a QUIC datagram) and when the link is no longer ready (a failure
 * is then settled by the pass that follows). So nothing the general wait
 * would do is left undone for longer than one spin, and what the link owes
 * its peer (credit, streams) is written as soon as the records that owe it
 * are read.
 */
#include <sched.h>

#include "core/core.h"

#define EXPRESS_CLOCK_EVERY 16u /* polls between clock reads */

bool nexar__ep_try_own(nexar__ep_t *ep) {
  if (atomic_load_explicit(&ep->q_any, memory_order_acquire) ||
      pthread_mutex_trylock(&ep->emu) != 0)
    return false;
  /* A post sets the flag before it tries the lock: seen here, its
   * operation is queued and must start first. */
  if (!atomic_load_explicit(&ep->q_any, memory_order_acquire)) return true;
  nexar__ep_leave(ep);
  return false;
}

static bool done(const nexar__req_t *r) {
  return atomic_load_explicit(&r->done, memory_order_acquire);
}

bool nexar__ep_wait_link(nexar__ep_t *ep, nexar__req_t *req, nexar__link_t *l,
                         uint64_t deadline) {
  bool idle = false;
  if (!l->tp->poll_link ||
      !atomic_compare_exchange_strong(&ep->driving, &idle, true)) {
    nexar__ep_leave(ep);
    return false;
  }
  /* The time records read now are stamped with (the link's last input,
   * which the failure detector judges): the caller read it at the start. */
  ep->pass_now = req->t_start;
  uint64_t until = req->t_start + ep->spin_ns;
  if (until > deadline) until = deadline;
  unsigned polls = 0;
  while (!done(req)) {
    /* Records read (of this request or others) count as polls too: a
     * link that never stops bringing others ends the wait all the same. */
    int got = l->tp->poll_link(l);
    if (got < 0 || atomic_load_explicit(&ep->q_any, memory_order_acquire))
      break;
    /* What the link owes its peer goes at once: the credit of a message
     * above the eager size (granted when the records arrive, or when the
     * receive was posted on a prefix that had come first), streams
     * returned. The peer may be waiting for it; left to the pass after
     * this wait, it cost a whole spin per such message (a 256 KiB
     * ping-pong took 143 us one-way, 563 with NEXAR_SPIN_US=1000). */
    if (l->want_write) l->tp->flush(l);
    ++polls;
    if (!got && polls % ep->yield_every == 0) {
      pthread_mutex_unlock(&ep->emu);
      nexar__ep_yield(ep, false);
      pthread_mutex_lock(&ep->emu);
    }
    if (polls % EXPRESS_CLOCK_EVERY == 0) {
      uint64_t now = ep->pass_now = nexar__now();
      if (now >= until || now >= ep->due) break;
      /* Input elsewhere (a record of this link may have come since the
       * poll above: it is read first). */
      if (!got && nexar__ep_ready(ep, now) && l->tp->poll_link(l) == 0) break;
    }
  }
  nexar__ep_drive_end(ep, ep->pass_now);
  /* Callers that waited while this one drove look again. */
  nexar__ep_wake_waiters(ep);
  return done(req);
}
