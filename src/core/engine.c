/*
 * The progress engine: one thread per endpoint owns the UDP socket, every
 * QUIC connection, their timers and all matching state. User threads hand
 * it requests through a mutex-protected queue and an eventfd, and wait for
 * completions on a condition variable. Nothing else touches ngtcp2.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "nexar_int.h"

int nexar__ep_init(nexar__ep_t *ep, const struct sockaddr_storage *bind_addr,
                   socklen_t len, const nexar__ep_ops_t *ops, void *owner) {
  int rc;
  memset(ep, 0, sizeof(*ep));
  ep->fd = ep->epfd = ep->evfd = -1;
  ep->ops = ops;
  ep->owner = owner;
  ep->local_rank = -1;
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
  NEXAR__CHECK_GOTO(nexar__udp_open(ep, bind_addr, len), rc, fail);
  ep->epfd = epoll_create1(EPOLL_CLOEXEC);
  ep->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep->epfd < 0 || ep->evfd < 0) return NEXAR_ERR_SYS;
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ep->fd};
  epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->fd, &ev);
  ev.data.fd = ep->evfd;
  epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->evfd, &ev);
  return 0;
fail:
  return rc;
}

int nexar__ep_add_conn(nexar__ep_t *ep, nexar__conn_t *c) {
  if (ep->nconns == ep->cap_conns) {
    int cap = ep->cap_conns ? ep->cap_conns * 2 : 16;
    nexar__conn_t **n = realloc(ep->conns, (size_t)cap * sizeof(*n));
    if (!n) return NEXAR_ERR_NOMEM;
    ep->conns = n;
    ep->cap_conns = cap;
  }
  ep->conns[ep->nconns++] = c;
  return 0;
}

void nexar__ep_remove_conn(nexar__ep_t *ep, nexar__conn_t *c) {
  for (int i = 0; i < ep->nconns; i++) {
    if (ep->conns[i] == c) {
      ep->conns[i] = ep->conns[--ep->nconns];
      return;
    }
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
  pthread_mutex_unlock(&ep->qmu);
  if (was_empty) {
    uint64_t one = 1;
    ssize_t r = write(ep->evfd, &one, sizeof(one));
    (void)r;
  }
}

void nexar__req_complete(nexar__req_t *req, int rc) {
  if (atomic_load_explicit(&req->done, memory_order_relaxed)) return;
  req->rc = rc;
  req->st.error = rc;
  if (req->internal) {
    atomic_store_explicit(&req->done, 1, memory_order_release);
    if (req->cb) req->cb(req);
    return;
  }
  nexar__ep_t *ep = &req->comm->ctx->ep;
  pthread_mutex_lock(&ep->cmu);
  atomic_store_explicit(&req->done, 1, memory_order_release);
  if (ep->waiters) pthread_cond_broadcast(&ep->ccv);
  pthread_mutex_unlock(&ep->cmu);
}

int nexar__req_wait(nexar__ep_t *ep, nexar__req_t *req, uint64_t deadline) {
  if (atomic_load_explicit(&req->done, memory_order_acquire)) return 0;
  struct timespec ts = {(time_t)(deadline / 1000000000ull),
                        (long)(deadline % 1000000000ull)};
  int rc = 0;
  pthread_mutex_lock(&ep->cmu);
  ep->waiters++;
  while (!atomic_load_explicit(&req->done, memory_order_acquire)) {
    if (pthread_cond_timedwait(&ep->ccv, &ep->cmu, &ts) == ETIMEDOUT &&
        !atomic_load_explicit(&req->done, memory_order_acquire)) {
      rc = NEXAR_ERR_TIMEOUT;
      break;
    }
  }
  ep->waiters--;
  pthread_mutex_unlock(&ep->cmu);
  return rc;
}

typedef struct call_box {
  nexar__req_t req;
  struct nexar_comm comm; /* only ctx is used, for completion signalling */
} call_box_t;

int nexar__ep_call(nexar__ep_t *ep, int (*fn)(nexar__req_t *), void *arg,
                   uint64_t deadline) {
  /* Control calls are short; the progress thread always runs them, so we
   * wait without a deadline (the request lives on this stack). */
  (void)deadline;
  call_box_t box;
  memset(&box, 0, sizeof(box));
  box.comm.ctx = (nexar_ctx_t *)ep->owner;
  box.req.kind = NEXAR__REQ_CTRL;
  box.req.ctrl = fn;
  box.req.cb_arg = arg;
  box.req.comm = &box.comm;
  if (ep->ops != &nexar__worker_ops) {
    /* Seed endpoints have no ctx; signal through a private path. */
    box.req.internal = true;
  }
  nexar__ep_post(ep, &box.req);
  if (box.req.internal) {
    while (!atomic_load_explicit(&box.req.done, memory_order_acquire)) {
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
  } else {
    nexar__req_wait(ep, &box.req, UINT64_MAX);
  }
  return box.req.rc;
}

static void run_ops(nexar__ep_t *ep) {
  uint64_t v;
  ssize_t r = read(ep->evfd, &v, sizeof(v));
  (void)r;
  pthread_mutex_lock(&ep->qmu);
  nexar__req_t *q = ep->q_head;
  ep->q_head = ep->q_tail = NULL;
  pthread_mutex_unlock(&ep->qmu);
  while (q) {
    nexar__req_t *next = q->next;
    q->next = NULL;
    switch (q->kind) {
      case NEXAR__REQ_CTRL:
        nexar__req_complete(q, q->ctrl(q));
        break;
      case NEXAR__REQ_SEND:
      case NEXAR__REQ_RECV:
        nexar__p2p_start(q);
        break;
      case NEXAR__REQ_COLL:
        nexar__coll_start(q);
        break;
    }
    q = next;
  }
}

static void reap_dead(nexar__ep_t *ep) {
  for (int i = 0; i < ep->nconns;) {
    nexar__conn_t *c = ep->conns[i];
    /* Mesh peers stay until the context is finalized (errors refer to
     * them); anonymous connections (failed handshakes, the seed link) are
     * freed at once so that a stranger cannot make us hold memory. */
    if (c->state == NEXAR__CS_DEAD && c->notified && c->peer < 0) {
      ep->conns[i] = ep->conns[--ep->nconns];
      nexar__conn_free(c);
      continue;
    }
    i++;
  }
}

static void *ep_main(void *arg) {
  nexar__ep_t *ep = arg;
  struct epoll_event evs[4];
  while (!atomic_load(&ep->stop)) {
    run_ops(ep);
    nexar__udp_recv_all(ep, nexar__quic_on_datagram);
    if (ep->accept_mesh && ep->nstash) {
      int n = ep->nstash;
      ep->nstash = 0;
      for (int i = 0; i < n; i++) {
        nexar__quic_on_datagram(ep, ep->stash[i].data, ep->stash[i].len,
                                &ep->stash[i].from, ep->stash[i].fromlen);
        free(ep->stash[i].data);
      }
    }
    uint64_t now = nexar__now();
    for (int i = 0; i < ep->nconns; i++)
      if (nexar__conn_expiry(ep->conns[i]) <= now)
        nexar__conn_on_expiry(ep->conns[i], now);
    if (ep->ops->on_tick) ep->ops->on_tick(ep, now);
    /* A batch the socket refused goes out before anything new. */
    if (ep->tx_blocked) nexar__udp_resume(ep);
    /* More queued datagrams (a receive pass stopped at its budget) or
     * more to write: poll without sleeping. */
    bool busy = ep->rx_more;
    for (int i = 0; i < ep->nconns; i++) {
      nexar__conn_t *c = ep->conns[i];
      if (c->want_write) nexar__conn_flush(c);
      nexar__conn_settle(c);
      busy |= c->want_write;
    }
    /* A full socket: sleep until EPOLLOUT (or the ENOBUFS retry time)
     * rather than spin on the writes it holds back. */
    if (ep->tx_blocked) busy = ep->rx_more;
    reap_dead(ep);
    uint64_t next = UINT64_MAX;
    for (int i = 0; i < ep->nconns; i++) {
      uint64_t e = nexar__conn_expiry(ep->conns[i]);
      if (e < next) next = e;
    }
    /* Tick at least every 50 ms for bootstrap and other deadlines. */
    now = nexar__now();
    if (ep->tx_blocked && ep->tx_retry_at && ep->tx_retry_at < next)
      next = ep->tx_retry_at;
    uint64_t wait = next > now ? next - now : 0;
    if (wait > 50000000ull) wait = 50000000ull;
    if (busy) wait = 0;
    struct timespec ts = {(time_t)(wait / 1000000000ull),
                          (long)(wait % 1000000000ull)};
    int n = epoll_pwait2(ep->epfd, evs, 4, &ts, NULL);
    if (n < 0 && errno != EINTR) break;
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
  uint64_t one = 1;
  ssize_t r = write(ep->evfd, &one, sizeof(one));
  (void)r;
  pthread_join(ep->thread, NULL);
  ep->thread_started = false;
}

void nexar__ep_fini(nexar__ep_t *ep) {
  nexar__ep_stop(ep);
  for (int i = 0; i < ep->nconns; i++) nexar__conn_free(ep->conns[i]);
  free(ep->conns);
  ep->conns = NULL;
  ep->nconns = 0;
  for (int i = 0; i < ep->nstash; i++) free(ep->stash[i].data);
  ep->nstash = 0;
  if (ep->fd >= 0) close(ep->fd);
  if (ep->epfd >= 0) close(ep->epfd);
  if (ep->evfd >= 0) close(ep->evfd);
  ep->fd = ep->epfd = ep->evfd = -1;
  nexar__identity_fini(&ep->id);
  free(ep->txbuf);
  free(ep->rxbuf);
  ep->txbuf = ep->rxbuf = NULL;
  pthread_mutex_destroy(&ep->qmu);
  pthread_mutex_destroy(&ep->cmu);
  pthread_cond_destroy(&ep->ccv);
}
