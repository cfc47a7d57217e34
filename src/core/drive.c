/*
 * Callers that wait on the engine (core.h: nexar__req_wait,
 * nexar__req_wait_any, nexar__ep_call). One waiting caller at a time
 * drives: it holds the engine lock and runs the passes itself (engine.c's
 * input and output halves), polling without sleeping for NEXAR_SPIN_US
 * (over shared memory, from the last bytes a ring brought) and then
 * sleeping on the engine's epoll set; the progress thread stays parked
 * meanwhile. The other waiting callers sleep on a condition variable until
 * a completion or the end of the drive.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

static bool req_done(const nexar__req_t *req) {
  return atomic_load_explicit(&req->done, memory_order_acquire);
}

/* Whether one of the |n| requests (NULL entries skipped) is done. */
static bool any_done(nexar__req_t *const *reqs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (reqs[i] && req_done(reqs[i])) return true;
  return false;
}

/* any_done, sequentially consistent (a waiter's look before it sleeps:
 * nexar__ep_wake_waiters). */
static bool any_done_sc(nexar__req_t *const *reqs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (reqs[i] && atomic_load(&reqs[i]->done)) return true;
  return false;
}

/* Whether a message of any connection has bytes still to write. */
static bool data_waiting(nexar__ep_t *ep) {
  for (int i = 0; i < ep->nconns; i++)
    if (nexar__link_tx_pending(ep->conns[i])) return true;
  return false;
}

/* Runs passes on the calling thread, which has set ep->driving, until one
 * of the |n| requests |reqs| is done or |deadline|, sleeping in poll on the
 * socket and the kick eventfd between them; clears ep->driving at the end. */
#define CLOCK_EVERY 16u /* polls between clock reads while spinning */
#define UNLOCK_EVERY 8u /* polls between letting go of the engine lock */
#define DONE_PASSES 4u  /* passes a done waiter runs for input left over */

/* Polls without sleeping (see drive) until |spin_until|, the next due
 * time, one of the requests is done, an operation was posted or a
 * transport may have input; *now is the last clock reading. */
static void spin(nexar__ep_t *ep, nexar__req_t *const *reqs, size_t n,
                 uint64_t spin_until, unsigned *polls, uint64_t *now) {
  bool all_here = n == 1 && reqs[0] && reqs[0]->kind == NEXAR__REQ_COLL &&
                  reqs[0]->comm->size >= atomic_load(&ep->here);
  do {
    bool yield = ++*polls % ep->yield_every == 0;
    if (yield || *polls % UNLOCK_EVERY == 0) {
      pthread_mutex_unlock(&ep->emu);
      if (yield) nexar__ep_yield(ep, all_here);
      pthread_mutex_lock(&ep->emu);
    }
    /* The clock costs as much as a poll: read every CLOCK_EVERY. */
    if (*polls % CLOCK_EVERY == 0) *now = nexar__now();
  } while (*now < spin_until && *now < ep->due && !any_done(reqs, n) &&
           !nexar__ep_ops_queued(ep) && !nexar__ep_ready(ep, *now));
}

static void drive(nexar__ep_t *ep, nexar__req_t *const *reqs, size_t n,
                  uint64_t deadline) {
  pthread_mutex_lock(&ep->emu);
  uint64_t now = nexar__now();
  uint64_t spin_until = now + ep->spin_ns;
  uint64_t seen = ep->rx_seen;
  unsigned polls = 0, extra = 0;
  /* A wait that begins right after its post (a receive, a collective)
   * finds nothing new most of the time: the post ran the operations and
   * the writes, and no transport has input yet. It polls first rather
   * than run a whole pass (every transport read, the timers and ticks)
   * for nothing; the pass runs once something may have come, or when one
   * is due. */
  if (now < ep->due && now < deadline && !nexar__ep_ops_queued(ep) &&
      !nexar__ep_ready(ep, now))
    spin(ep, reqs, n, spin_until, &polls, &now);
  for (;;) {
    nexar__ep_input(ep);
    if (ep->rx_seen != seen) {
      /* Bytes came through a ring (ep->rx_seen): the operation is moving,
       * and its next part will come soon. The spin counts from the last
       * arrival, so a transfer longer than NEXAR_SPIN_US does not sleep
       * between its parts: a 1 MiB allreduce over shared memory took
       * 322-344 us at np 2 and 1,320-1,408 at np 4 with a sleep and a
       * wake-up per part, 184-215 and 788-972 without. */
      seen = ep->rx_seen;
      spin_until = ep->pass_now + ep->spin_ns;
    }
    if (any_done(reqs, n) && !ep->rx_more && !data_waiting(ep)) {
      /* Our request is done: leave the writes this pass would make (ACKs,
       * credit) for the caller's next call, whose packet carries them, or
       * for the progress thread within the ACK delay we advertise. A
       * reply then costs one packet, not two. */
      ep->due = nexar__now() + NEXAR__WRITE_DEFER_NS;
      break;
    }
    ep->due = nexar__ep_output(ep);
    /* Done, the caller returns; but input the pass left at its budget
     * (rx_more) is read first, for at most DONE_PASSES more passes. Left
     * to the progress thread, it woke, took the engine, and the caller's
     * next call found it busy: a 256 KiB allreduce at np 2 over shared
     * memory (two 128 KiB records in flight, a 256 KiB pass budget) took
     * 94 us with 1.1 context switches per call, 37 us and 0.25 without. */
    if ((any_done(reqs, n) && (!ep->rx_more || ++extra > DONE_PASSES)) ||
        atomic_load(&ep->stop))
      break;
    now = ep->run.pass_end; /* read as the pass ended */
    if (now >= deadline) break;
    if (now < spin_until) {
      /* Poll without sleeping for a while: a reply that comes soon costs
       * no wake-up. A poll runs no pass until something may have come (a
       * ring has a record, a datagram may wait, an operation was posted, a
       * timer is due), and yields every ep->yield_every polls so that an
       * oversubscribed host runs the others. The engine lock is let go
       * every UNLOCK_EVERY polls (and at each yield): a poll holding it
       * costs half as much, and other threads post through the queue. */
      spin(ep, reqs, n, spin_until, &polls, &now);
      continue;
    }
    uint64_t until = ep->due < deadline ? ep->due : deadline;
    /* Whoever changes the deadlines while we sleep kicks us
     * (nexar__ep_leave). */
    ep->wake_at = until;
    /* Every transport's descriptors and the kick are in epfd. */
    struct pollfd pf[1] = {{ep->epfd, POLLIN, 0}};
    bool armed = nexar__ep_arm(ep);
    pthread_mutex_unlock(&ep->emu);
    if (until > now && armed) {
      struct timespec ts = nexar__ns_to_ts(until - now);
      ppoll(pf, 1, &ts, NULL);
    }
    pthread_mutex_lock(&ep->emu);
  }
  nexar__ep_drive_end(ep, nexar__now());
}

void nexar__ep_drive_end(nexar__ep_t *ep, uint64_t end) {
  atomic_store(&ep->drv_end, end);
  atomic_store(&ep->driving, false);
  /* An operation posted while we drove, and not run by us: its kick left
   * the parked progress thread asleep. */
  if (nexar__ep_ops_queued(ep)) nexar__ep_wake_parked(ep);
  if (ep->linger_ns) {
    /* The progress thread sleeps while callers drive; the timer (pushed
     * back by every drive that ends) wakes it once they have stopped, or
     * when the next pass is due if that is sooner. */
    uint64_t t = end + ep->linger_ns;
    uint64_t soon = end + NEXAR__HANDBACK_NS;
    if (ep->due < t) t = ep->due > soon ? ep->due : soon;
    /* A timer still to fire is left alone unless this one is sooner, or
     * later by half the linger or more: callers that keep driving push it
     * back (one timerfd_settime per half linger at most) instead of
     * letting it wake the parked thread only to find them driving. Those
     * wake-ups came every 1 ms and took a CPU from a caller each time:
     * 0.44 context switches per 64 KiB allreduce at np 2 over QUIC, where
     * Open MPI's TCP calls make none. A timer set by the next due time
     * rather than the linger is not pushed back call by call. */
    bool fired = ep->tmr_at <= end, sooner = t < ep->tmr_at;
    bool push = t >= ep->tmr_at + ep->linger_ns / 2;
    if (fired || sooner || push) nexar__ep_arm_timer(ep, t);
    ep->wake_at = ep->tmr_at;
  }
  nexar__ep_leave(ep);
}

int nexar__req_wait(nexar__ep_t *ep, nexar__req_t *req, uint64_t deadline) {
  return nexar__req_wait_any(ep, &req, 1, deadline);
}

static int wait_any(nexar__ep_t *ep, nexar__req_t *const *reqs, size_t n,
                    uint64_t deadline) {
  while (!any_done(reqs, n)) {
    if (nexar__now() >= deadline)
      return any_done(reqs, n) ? 0 : NEXAR_ERR_TIMEOUT;
    bool idle = false;
    if (atomic_compare_exchange_strong(&ep->driving, &idle, true)) {
      /* One caller drives at a time; the others wait for completions. */
      drive(ep, reqs, n, deadline);
      nexar__ep_wake_waiters(ep);
      continue;
    }
    /* The driver clears ep->driving before it counts us to wake us
     * (nexar__ep_wake_waiters), so the check below and the wait cannot
     * miss it. */
    struct timespec ts = nexar__ns_to_ts(deadline);
    pthread_mutex_lock(&ep->cmu);
    atomic_fetch_add(&ep->waiters, 1);
    while (!any_done_sc(reqs, n) && atomic_load(&ep->driving) &&
           pthread_cond_timedwait(&ep->ccv, &ep->cmu, &ts) != ETIMEDOUT) {
    }
    atomic_fetch_sub(&ep->waiters, 1);
    pthread_mutex_unlock(&ep->cmu);
  }
  return 0;
}

int nexar__req_wait_any(nexar__ep_t *ep, nexar__req_t *const *reqs, size_t n,
                        uint64_t deadline) {
  int rc = wait_any(ep, reqs, n, deadline);
  nexar__ep_settle(); /* a wake a blocking call's post left to this wait */
  return rc;
}

typedef struct call_box {
  nexar__req_t req;
  struct nexar_comm comm; /* only ctx is used, for completion signalling */
} call_box_t;

int nexar__ep_call(nexar__ep_t *ep, int (*fn)(nexar__req_t *), void *arg,
                   uint64_t deadline) {
  /* Control calls are short and always run, so we wait without a deadline
   * (the request lives on this stack). */
  (void)deadline;
  call_box_t box;
  memset(&box, 0, sizeof(box));
  box.comm.ctx = (nexar_ctx_t *)ep->owner;
  box.req.kind = NEXAR__REQ_CTRL;
  box.req.ctrl = fn;
  box.req.cb_arg = arg;
  box.req.comm = &box.comm;
  if (!ep->prm) {
    /* Seed endpoints have no ctx; signal through a private path. */
    box.req.internal = true;
  }
  nexar__ep_post(ep, &box.req);
  if (box.req.internal) {
    while (!req_done(&box.req)) {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
  } else {
    nexar__req_wait(ep, &box.req, UINT64_MAX);
  }
  return box.req.rc;
}
