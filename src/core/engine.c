/*
 * The progress engine: one UDP socket, every QUIC connection, their timers
 * and all matching state, guarded by one lock (emu). Whoever holds the lock
 * runs progress passes: a caller that posts an operation while the engine
 * is free runs it at once and writes its packets itself; a caller that
 * waits drives the engine (polls the socket, receives, completes) until its
 * request is done, so a round trip costs no thread hand-off. The progress
 * thread keeps everything moving when no caller is inside the library; it
 * stays off the socket while a caller drives and for NEXAR_PROGRESS_LINGER_US
 * after, so that it does not compete for the datagrams.
 *
 * Whoever leaves the engine (nexar__ep_leave) wakes the progress thread if the
 * next deadline is before the thread's planned wake-up, so no timer is missed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/flight.h"

static void ep_check_run(nexar__ep_t *ep);

int nexar__ep_init(nexar__ep_t *ep, const struct sockaddr_storage *bind_addr,
                   socklen_t len, const nexar__ep_ops_t *ops, void *owner,
                   const nexar__params_t *prm, const nexar__host_id_t *host) {
  int rc;
  memset(ep, 0, sizeof(*ep));
  ep->fd = ep->epfd = ep->evfd = ep->tfd = ep->pkfd = -1;
  ep->ops = ops;
  ep->owner = owner;
  ep->prm = prm;
  ep->host = host;
  ep->local_rank = -1;
  ep->check_run = ep_check_run;
  ep->complete = nexar__req_complete;
  pthread_mutex_init(&ep->emu, NULL);
  pthread_mutex_init(&ep->qmu, NULL);
  pthread_mutex_init(&ep->cmu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&ep->ccv, &ca);
  pthread_condattr_destroy(&ca);
  ep->txbuf = malloc(65536 + 4096);
  ep->rxbuf = malloc((size_t)NEXAR__RX_BATCH * NEXAR__RX_BUF);
  if (!ep->txbuf || !ep->rxbuf) return NEXAR_ERR_NOMEM;
  NEXAR__CHECK(nexar__identity_init(&ep->id));
  ep->epfd = epoll_create1(EPOLL_CLOEXEC);
  ep->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ep->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  ep->pkfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep->epfd < 0 || ep->evfd < 0 || ep->tfd < 0 || ep->pkfd < 0)
    return NEXAR_ERR_SYS;
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ep->evfd};
  epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->evfd, &ev);
  /* QUIC always (the seed and every host is reached through it); shared
   * memory for a worker that knows its host. */
  ep->tps[ep->ntps++] = &nexar__tp_quic;
  ep->shm_lfd = ep->shm_sfd = -1;
  ep->yield_every = 1024;
  atomic_init(&ep->home_cpu, -1);
  atomic_init(&ep->here, 1);
  atomic_init(&ep->crowded, false);
  atomic_init(&ep->parked, false);
  ep->slice = ep->slice_bulk =
      prm ? (uint64_t)prm->pass_slice_bytes : NEXAR__SLICE_DEFAULT;
  ep->slice_rpc = prm ? (uint64_t)prm->pass_slice_rpc_bytes : ep->slice_bulk;
  if (ep->slice_rpc > ep->slice_bulk) ep->slice_rpc = ep->slice_bulk;
  if (prm && ep->host && strcmp(prm->transport, "quic") != 0)
    ep->tps[ep->ntps++] = &nexar__tp_shm;
  for (int i = 0; i < ep->ntps; i++)
    NEXAR__CHECK_GOTO(ep->tps[i]->init(ep, bind_addr, len), rc, fail);
  return 0;
fail:
  return rc;
}

/* One receive pass of every transport; true when one stopped at its
 * budget. */
static bool ep_read(nexar__ep_t *ep) {
  bool more = false;
  for (int i = 0; i < ep->ntps; i++) more |= ep->tps[i]->input(ep);
  return more;
}

/* Wakes the progress thread from its sleep while a caller drives. */
void nexar__ep_wake_parked(nexar__ep_t *ep) {
  uint64_t one = 1;
  ssize_t r = write(ep->pkfd, &one, sizeof(one));
  (void)r;
}

/* Wakes whoever sleeps on the engine: a caller that drives (the kick
 * eventfd is in the engine's epoll set), else the progress thread. While
 * a caller drives, the progress thread, parked, is left asleep: the
 * caller runs what the kick is for, and waking the thread too cost a
 * context switch per operation for nothing (a post from another thread
 * kicks whenever the next pass is due sooner than the last sleep). */
static void kick(nexar__ep_t *ep) {
  uint64_t one = 1;
  ssize_t r = write(ep->evfd, &one, sizeof(one));
  (void)r;
  /* After the write: a pass that sees the flag finds the counter set. */
  atomic_store(&ep->ev_armed, true);
  if (!atomic_load(&ep->driving)) nexar__ep_wake_parked(ep);
}

/* Arms the progress thread's timer (tfd) to fire at |t| (emu held). */
void nexar__ep_arm_timer(nexar__ep_t *ep, uint64_t t) {
  if (t == 0) t = 1; /* due at once; a zero time would disarm it */
  struct itimerspec its = {{0, 0}, nexar__ns_to_ts(t)};
  timerfd_settime(ep->tfd, TFD_TIMER_ABSTIME, &its, NULL);
  ep->tmr_at = t;
}

/* A blocking call on this thread posts, then waits: the post's leave skips
 * its wake (defer_next) and notes the engine (defer_to); the wait's drive
 * ends with a leave of its own, or nexar__ep_settle does the wake. */
static _Thread_local bool defer_next;
static _Thread_local nexar__ep_t *defer_to;

void nexar__ep_defer_wake(void) {
  defer_next = true;
}

void nexar__ep_defer_end(void) {
  defer_next = false;
}

void nexar__ep_settle(void) {
  nexar__ep_t *ep = defer_to;
  defer_next = false;
  if (!ep) return;
  defer_to = NULL;
  /* A holder of the engine lock does the wake when it leaves. */
  if (pthread_mutex_trylock(&ep->emu) == 0) nexar__ep_leave(ep);
}

/* Releases the engine lock; wakes the progress thread if it would sleep
 * past the time the next pass is due by more than NEXAR__HANDBACK_NS. A
 * parked progress thread (its sleep watches tfd) gets its timer moved to
 * that time instead: one system call rather than a kick's three, and no
 * wake-up now, which on a host whose callers fill every CPU took one of
 * them from a caller (a ping-pong over QUIC kicked every 3-8 messages: after
 * a post's writes the next pass was due 0.1-1 ms ahead, the linger timer
 * 1-10 ms). */
void nexar__ep_leave(nexar__ep_t *ep) {
  if (defer_to == ep) defer_to = NULL; /* this leave does the wake */
  if (ep->due + NEXAR__HANDBACK_NS < ep->wake_at) {
    if (defer_next && !atomic_load(&ep->driving)) {
      /* A blocking call's post: its wait drives a moment later and runs
       * what is due itself (nexar__ep_defer_wake). Not while another
       * caller drives: that one sleeps until the time it knew, so it is
       * kicked. */
      defer_next = false;
      defer_to = ep;
    } else {
      ep->wake_at = ep->due;
      if (atomic_load(&ep->parked) && !atomic_load(&ep->driving))
        nexar__ep_arm_timer(ep, ep->due);
      else
        kick(ep);
    }
  }
  pthread_mutex_unlock(&ep->emu);
}

static uint64_t ep_pass(nexar__ep_t *ep);

/* Whether a transport may have input (a cheap look, no system call). */
bool nexar__ep_ready(nexar__ep_t *ep, uint64_t now) {
  for (int i = 0; i < ep->ntps; i++)
    if (!ep->tps[i]->ready || ep->tps[i]->ready(ep, now)) return true;
  return false;
}

/* Before sleeping on epfd: false when a transport already has input. */
bool nexar__ep_arm(nexar__ep_t *ep) {
  for (int i = 0; i < ep->ntps; i++)
    if (ep->tps[i]->arm && !ep->tps[i]->arm(ep)) return false;
  return true;
}

static int tp_index(const nexar__ep_t *ep, const nexar__tp_t *tp) {
  for (int i = 0; i < ep->ntps; i++)
    if (ep->tps[i] == tp) return i;
  return 0;
}

static bool run_ops(nexar__ep_t *ep);

/* RPC traffic keeps passes at the shorter bound for this long. */
#define RPC_SLICE_NS 50000000ull /* 50 ms */

void nexar__ep_rpc_seen(nexar__ep_t *ep) {
  atomic_store_explicit(&ep->rpc_until, nexar__now() + RPC_SLICE_NS,
                        memory_order_relaxed);
}

/* The bound of the pass starting at |now|: a call waits behind at most
 * that much bulk work on each side. */
static void set_slice(nexar__ep_t *ep, uint64_t now) {
  ep->slice = nexar__ep_rpc_recent(ep, now) ? ep->slice_rpc : ep->slice_bulk;
}

/* What a post runs once it has the engine lock: the queued operations and,
 * when one of them left something for it (writes, a close a control call
 * asked for, a link that ended), the output half. The input half is left to the
 * caller's wait or test, or to the progress thread: reading every transport and
 * running the ticks costs more than starting a small send does. */
static void post_run(nexar__ep_t *ep) {
  ep->pass_now = nexar__now();
  set_slice(ep, ep->pass_now);
  run_ops(ep);
  for (int i = 0; i < ep->nconns; i++)
    if (nexar__link_output_due(ep->conns[i])) {
      ep->due = nexar__ep_output(ep);
      return;
    }
}

void nexar__ep_post(nexar__ep_t *ep, nexar__req_t *req) {
  req->next = NULL;
  pthread_mutex_lock(&ep->qmu);
  bool was_empty = ep->q_head == NULL;
  if (ep->q_tail)
    ep->q_tail->next = req;
  else
    ep->q_head = req;
  ep->q_tail = req;
  atomic_store_explicit(&ep->q_any, true, memory_order_release);
  pthread_mutex_unlock(&ep->qmu);
  if (pthread_mutex_trylock(&ep->emu) == 0) {
    post_run(ep);
    nexar__ep_leave(ep);
    return;
  }
  /* The holder (or the engine itself, posting from a callback) runs it on
   * its next pass; the kick makes sure there is one. */
  if (was_empty) kick(ep);
}

void nexar__ep_progress(nexar__ep_t *ep) {
  if (pthread_mutex_trylock(&ep->emu) == 0) {
    ep_pass(ep);
    nexar__ep_leave(ep);
  }
}

void nexar__req_complete(nexar__req_t *req, int rc) {
  if (atomic_load_explicit(&req->done, memory_order_relaxed)) return;
  req->rc = rc;
  req->st.error = rc;
  if (req->flight) nexar__flight_end(req, rc);
  if (req->internal) {
    atomic_store_explicit(&req->done, 1, memory_order_release);
    if (req->cb) req->cb(req);
    return;
  }
  /* Sequentially consistent, then the waiters counted (see
   * nexar__ep_wake_waiters). The engine is read first: once |req| reads
   * done its owner may return and reuse its memory (a request in a
   * caller's frame: the express path's). */
  nexar__ep_t *ep = &req->comm->ctx->ep;
  atomic_store(&req->done, 1);
  nexar__ep_wake_waiters(ep);
}

void nexar__ep_wake_waiters(nexar__ep_t *ep) {
  /* A waiter counts itself, then looks at the requests and ep->driving,
   * all under cmu and sequentially consistent; the caller changed one of
   * those (sequentially consistent) before it counts the waiters here. So
   * either the waiter sees the change and does not sleep, or this sees
   * the waiter and wakes it: cmu is taken only when someone waits. */
  if (!atomic_load(&ep->waiters)) return;
  pthread_mutex_lock(&ep->cmu);
  pthread_cond_broadcast(&ep->ccv);
  pthread_mutex_unlock(&ep->cmu);
}

/* Consumes a kick so that the eventfd stops polling readable. */
static void drain_kick(nexar__ep_t *ep) {
  if (atomic_exchange(&ep->ev_armed, false)) {
    uint64_t v;
    ssize_t r = read(ep->evfd, &v, sizeof(v));
    (void)r;
  }
}

/* A waiting caller asks this every poll: no lock (a post sets the flag
 * under qmu before it kicks or tries the engine lock). */
bool nexar__ep_ops_queued(nexar__ep_t *ep) {
  return atomic_load_explicit(&ep->q_any, memory_order_acquire);
}

/* The operations of |req|'s kind; an unregistered kind ends the request
 * with NEXAR_ERR_INTERNAL. */
static void kind_missing(nexar__req_t *req) {
  nexar__req_complete(req, NEXAR_ERR_INTERNAL);
}
static void kind_missing_cancel(nexar__req_t *req, int rc) {
  nexar__req_complete(req, rc);
}
static void kind_missing_expire(nexar__req_t *req) {
  nexar__req_complete(req, NEXAR_ERR_TIMEOUT);
}
static const nexar__req_ops_t kind_none = {kind_missing, kind_missing_cancel,
                                           kind_missing_expire};

static const nexar__req_ops_t *req_kind(const nexar__ep_t *ep,
                                        const nexar__req_t *req) {
  const nexar__req_ops_t *k = req->kind >= 0 && req->kind < NEXAR__REQ_KINDS
                                  ? ep->kinds[req->kind]
                                  : NULL;
  return k ? k : &kind_none;
}

void nexar__ep_set_kind(nexar__ep_t *ep, int kind,
                        const nexar__req_ops_t *ops) {
  if (kind >= 0 && kind < NEXAR__REQ_KINDS && kind != NEXAR__REQ_CTRL)
    ep->kinds[kind] = ops;
}

void nexar__req_cancel(nexar__req_t *req, int rc) {
  req_kind(&req->comm->ctx->ep, req)->cancel(req, rc);
}

void nexar__req_expire(nexar__req_t *req) {
  req_kind(&req->comm->ctx->ep, req)->expire(req);
}

/* The flight recorder's entry of a user send or receive. */
static void flight_p2p(nexar__req_t *q) {
  nexar_ctx_t *ctx = q->comm->ctx;
  if (!ctx->flight || q->internal) return;
  const char *op = q->kind == NEXAR__REQ_SEND ? (q->sync ? "ssend" : "send")
                   : q->probe                 ? "probe"
                                              : "recv";
  nexar__flight_post(ctx, q, op, NULL, UINT64_MAX, -1, q->cap, q->comm_peer,
                     q->tag);
}

/* Starts the queued operations; true when there were some. */
static bool run_ops(nexar__ep_t *ep) {
  drain_kick(ep);
  if (!nexar__ep_ops_queued(ep)) return false;
  pthread_mutex_lock(&ep->qmu);
  nexar__req_t *q = ep->q_head;
  bool any = q != NULL;
  ep->q_head = ep->q_tail = NULL;
  atomic_store_explicit(&ep->q_any, false, memory_order_relaxed);
  pthread_mutex_unlock(&ep->qmu);
  while (q) {
    nexar__req_t *next = q->next;
    q->next = NULL;
    int revoked =
        q->kind == NEXAR__REQ_CTRL ? 0 : atomic_load(&q->comm->revoked);
    if (revoked) {
      /* A revoked communicator runs nothing until it is rebuilt: later
       * operations fail with NEXAR_ERR_REVOKED (or the process-wide
       * reason: aborted, excluded). */
      nexar__comm_set_error(q->comm, "%s", q->comm->revoke_msg);
      if (q->discard) q->discard(q); /* built, never started */
      nexar__req_complete(
          q, revoked == NEXAR_ERR_PEER_FAILED ? NEXAR_ERR_REVOKED : revoked);
      q = next;
      continue;
    }
    if (q->kind == NEXAR__REQ_CTRL) {
      nexar__req_complete(q, q->ctrl(q));
    } else {
      if (q->kind == NEXAR__REQ_SEND || q->kind == NEXAR__REQ_RECV)
        flight_p2p(q);
      req_kind(ep, q)->start(q);
    }
    q = next;
  }
  return any;
}

static void reap_dead(nexar__ep_t *ep) {
  for (int i = 0; i < ep->nconns;) {
    nexar__link_t *c = ep->conns[i];
    /* Anonymous connections (failed handshakes, the seed link) are freed
     * at once so that a stranger cannot make us hold memory; a mesh peer's
     * once the owner lets it go (its process left or failed: the worker's
     * peer_release detaches it), else at nexar_finalize. */
    if (c->state == NEXAR__CS_DEAD && c->notified &&
        (c->peer < 0 || (ep->ops->peer_release && ep->ops->peer_release(c)))) {
      ep->conns[i] = ep->conns[--ep->nconns];
      nexar__link_free(c);
      continue;
    }
    i++;
  }
}

static void ep_check_run(nexar__ep_t *ep) {
  if (!ep->resuming && nexar__run_paused(ep, nexar__now()))
    ep->resuming = ep->resume_due = true;
}

/* The process did not run for ep->run.unrun ns: read everything queued on
 * the socket, so that what the peers said meanwhile (a fencing close above
 * all) is known before this process judges anyone; ICMP reports read
 * meanwhile are only recorded (ep->resuming). What was queued fits in the
 * socket's receive buffer, so reading that many bytes (or until the socket
 * is empty) gets all of it; peers that keep sending cannot make it longer.
 * Then ops->on_resume judges. */
static void catch_up(nexar__ep_t *ep) {
  uint64_t idle = ep->run.unrun;
  ep->resuming = true;
  size_t bytes = 0;
  for (int i = 0; i < 4096 && bytes <= ep->rcvbuf_bytes; i++) {
    bool more = ep_read(ep);
    bytes += ep->rx_pass_bytes;
    if (!more) break;
  }
  ep->resuming = ep->resume_due = false;
  ep->run.unrun = 0;
  if (ep->ops->on_resume) ep->ops->on_resume(ep, idle);
}

/* First half of a progress pass (emu held): queued operations, received
 * datagrams, expired timers, the tick. A pause before or while reading
 * makes the reading a catch-up. */
void nexar__ep_input(nexar__ep_t *ep) {
  uint64_t now = ep->pass_now = nexar__now();
  set_slice(ep, now);
  nexar__run_pass_begin(ep, now);
  if (nexar__run_paused(ep, now)) catch_up(ep);
  if (run_ops(ep) && nexar__run_paused(ep, nexar__now())) catch_up(ep);
  ep->rx_more = ep_read(ep);
  now = nexar__now();
  if (ep->resume_due || nexar__run_paused(ep, now)) catch_up(ep);
  ep->run.unrun = 0;
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *c = ep->conns[i];
    if (c->state != NEXAR__CS_DEAD && c->tp->expiry(c) <= now)
      c->tp->on_expiry(c, now);
  }
  /* A link that ended while reading (a same-host peer's exit is seen at
   * once) is reported now: the verdict on its peer comes before an
   * operation of the next pass can use the link, even when the caller
   * leaves before this pass's output half. */
  for (int i = 0; i < ep->nconns; i++)
    if (ep->conns[i]->state == NEXAR__CS_DEAD && !ep->conns[i]->notified)
      nexar__link_settle(ep->conns[i]);
  if (ep->ops->on_tick) ep->ops->on_tick(ep, now);
  nexar__run_pass_end(ep, now);
}

/* Second half (emu held): writes, connection state. Returns when the next
 * pass is due (ns; 0 when there is more to do at once). */
uint64_t nexar__ep_output(nexar__ep_t *ep) {
  /* Operations posted while the input half ran (a call, an RPC handler's
   * response) start here, so that they are written in this pass: a post
   * that finds the engine busy waits for half a pass, not a whole one. */
  run_ops(ep);
  /* What a transport's OS refused goes out before anything new; while it
   * is still refused, the links of that transport wait for it (the
   * transport's file descriptor or retry time wakes the engine) rather
   * than spin on the writes it holds back. */
  uint64_t next = ep->pass_now + 50000000ull; /* ticks for deadlines */
  bool held[NEXAR__TP_MAX] = {false};
  for (int i = 0; i < ep->ntps; i++)
    held[i] = ep->tps[i]->output && ep->tps[i]->output(ep, &next);
  /* More queued input (a receive pass stopped at its budget) or more to
   * write: the next pass runs at once. */
  bool busy = ep->rx_more;
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *c = ep->conns[i];
    if (c->want_write && c->state != NEXAR__CS_DEAD &&
        c->state != NEXAR__CS_CLOSING)
      c->tp->flush(c);
    nexar__link_settle(c);
    busy |= c->want_write && !held[tp_index(ep, c->tp)];
  }
  reap_dead(ep);
  nexar__run_pass_end(ep, nexar__now());
  if (busy) return 0;
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *c = ep->conns[i];
    uint64_t e = c->state == NEXAR__CS_DEAD ? UINT64_MAX : c->tp->expiry(c);
    if (e < next) next = e;
  }
  return next;
}

/* One whole progress pass (emu held); records and returns the next due
 * time. */
static uint64_t ep_pass(nexar__ep_t *ep) {
  nexar__ep_input(ep);
  return ep->due = nexar__ep_output(ep);
}

/* The progress thread's sleep while callers drive (|driven|: one drives
 * now) or did within the linger: the linger timer, |ts| when given,
 * wake_parked, and a kick unless a caller drives wake it. */
static void park_sleep(nexar__ep_t *ep, const struct timespec *ts,
                       bool driven) {
  struct pollfd pf[3] = {
      {ep->pkfd, POLLIN, 0}, {ep->tfd, POLLIN, 0}, {ep->evfd, POLLIN, 0}};
  /* While set, nexar__ep_leave moves tfd sooner rather than kick: this
   * sleep watches tfd. Set after the unlock, so a leave in between kicks
   * (as before); cleared after, so one that arms tfd late leaves it
   * readable for the next sleep, which then returns at once. */
  atomic_store(&ep->parked, true);
  int n = ppoll(pf, driven ? 2 : 3, ts, NULL);
  atomic_store(&ep->parked, false);
  if (n <= 0) return;
  uint64_t v;
  if (pf[0].revents) {
    ssize_t r = read(ep->pkfd, &v, sizeof(v));
    (void)r;
  }
  if (pf[1].revents) {
    ssize_t r = read(ep->tfd, &v, sizeof(v));
    (void)r;
  }
  if (!driven && pf[2].revents) drain_kick(ep);
}

/* The progress thread takes the engine lock: waits for it unless callers
 * drove within the linger, where it only tries; false when it did not get
 * it. */
static bool ep_try_enter(nexar__ep_t *ep) {
  uint64_t quiet = atomic_load(&ep->drv_end) + ep->linger_ns;
  if (ep->linger_ns && nexar__now() < quiet)
    return pthread_mutex_trylock(&ep->emu) == 0;
  pthread_mutex_lock(&ep->emu);
  return true;
}

/* Sleeps on the engine's epoll set until input arrives or |ts| passes.
 * epoll_pwait2 (Linux 5.11+) keeps the nanoseconds; a kernel without it (or
 * valgrind) answers ENOSYS, and from then on epoll_wait sleeps to the next
 * whole millisecond instead. */
static int ep_sleep(nexar__ep_t *ep, struct epoll_event *evs, int max,
                    const struct timespec *ts) {
  static atomic_bool no_pwait2;
  if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
    int n = epoll_pwait2(ep->epfd, evs, max, ts, NULL);
    if (n >= 0 || errno != ENOSYS) return n;
    atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
  }
  int64_t ms = (int64_t)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
  return epoll_wait(ep->epfd, evs, max, ms > INT32_MAX ? INT32_MAX : (int)ms);
}

static void *ep_main(void *arg) {
  nexar__ep_t *ep = arg;
  struct epoll_event evs[4];
  uint64_t retry = NEXAR__HANDBACK_NS;
  while (!atomic_load(&ep->stop)) {
    if (ep->linger_ns && atomic_load(&ep->driving) &&
        !nexar__ep_ops_queued(ep)) {
      /* A caller drives: it does all the work; back to sleep without
       * contending for the engine lock. */
      park_sleep(ep, NULL, true);
      continue;
    }
    if (!ep_try_enter(ep)) {
      /* A caller that drove within the linger holds the engine lock: it
       * runs what is due itself. Queueing on the lock would get in its
       * way: on an oversubscribed host the holder is often preempted with
       * it, and its unlock would then cost it a futex wake and hand us
       * the engine, so that its next post finds the lock taken and must
       * kick. Look again later instead: HANDBACK_NS first, doubling up
       * to the linger, after which the lock is waited for. A plain sleep:
       * the kick eventfd may be readable for the holder's sleep, and
       * polling it would return at once. */
      struct timespec ts = nexar__ns_to_ts(retry);
      nanosleep(&ts, NULL);
      retry = retry * 2 < ep->linger_ns ? retry * 2 : ep->linger_ns;
      continue;
    }
    retry = NEXAR__HANDBACK_NS;
    uint64_t now = nexar__now();
    uint64_t quiet = atomic_load(&ep->drv_end) + ep->linger_ns;
    bool driven = atomic_load(&ep->driving);
    /* Parked: a caller drives (or just did), so stay off the socket and
     * run a pass only when something is due or work was queued. */
    bool park = ep->linger_ns && (driven || now < quiet);
    drain_kick(ep);
    if (!park || ep->due <= now || nexar__ep_ops_queued(ep)) {
      atomic_fetch_add_explicit(&ep->bg_passes, 1, memory_order_relaxed);
      ep_pass(ep);
    }
    /* While callers drive, sleep until a kick or the linger timer. */
    uint64_t wake = ep->due;
    if (park) wake = driven ? UINT64_MAX : wake < quiet ? wake : quiet;
    if (!park && !nexar__ep_arm(ep)) wake = 0; /* input is there: no sleep */
    ep->wake_at = wake;
    pthread_mutex_unlock(&ep->emu);
    now = nexar__now();
    struct timespec ts = nexar__ns_to_ts(wake > now ? wake - now : 0);
    if (park) {
      park_sleep(ep, wake == UINT64_MAX ? NULL : &ts, false);
    } else {
      if (ep_sleep(ep, evs, 4, &ts) < 0 && errno != EINTR) {
        NEXAR__WARN(NEXAR__SUB_NET,
                    "progress thread stops: epoll on fd %d failed: %s",
                    ep->epfd, strerror(errno));
        break;
      }
    }
  }
  return NULL;
}

int nexar__ep_start(nexar__ep_t *ep) {
  if (pthread_create(&ep->thread, NULL, ep_main, ep) != 0) return NEXAR_ERR_SYS;
  ep->thread_started = true;
  return 0;
}

void nexar__ep_stop(nexar__ep_t *ep) {
  if (!ep->thread_started) return;
  atomic_store(&ep->stop, true);
  kick(ep);
  nexar__ep_wake_parked(ep);
  pthread_join(ep->thread, NULL);
  ep->thread_started = false;
}

void nexar__ep_fini(nexar__ep_t *ep) {
  nexar__ep_stop(ep);
  for (int i = 0; i < ep->nconns; i++) nexar__link_free(ep->conns[i]);
  free(ep->conns);
  ep->conns = NULL;
  ep->nconns = 0;
  for (int i = 0; i < ep->ntps; i++) ep->tps[i]->fini(ep);
  ep->ntps = 0;
  if (ep->epfd >= 0) close(ep->epfd);
  if (ep->evfd >= 0) close(ep->evfd);
  if (ep->tfd >= 0) close(ep->tfd);
  if (ep->pkfd >= 0) close(ep->pkfd);
  ep->fd = ep->epfd = ep->evfd = ep->tfd = ep->pkfd = -1;
  nexar__identity_fini(&ep->id);
  free(ep->txbuf);
  free(ep->rxbuf);
  ep->txbuf = ep->rxbuf = NULL;
  pthread_mutex_destroy(&ep->emu);
  pthread_mutex_destroy(&ep->qmu);
  pthread_mutex_destroy(&ep->cmu);
  pthread_cond_destroy(&ep->ccv);
  nexar__run_release();
}
