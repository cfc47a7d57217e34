/*
 * Shared-memory links: the rendezvous (dial, HELLO, WELCOME), the socket
 * kept for the link's life (a close with its reason; the peer's end) and
 * the test hook that plays a hostile peer. See shm.c for the design.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transport/shm.h"

void nexar__shm_fail(nexar__link_t *l, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void nexar__shm_fail(nexar__link_t *l, int err, const char *fmt, ...) {
  char why[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  if (l->state == NEXAR__CS_DEAD) return;
  NEXAR__WARN(NEXAR__SUB_NET, "rank %d: shared-memory link to rank %d (%s): %s",
              l->ep->local_rank, l->peer, l->remote_str, why);
  nexar__link_fail(l, err, why);
}

void nexar__shm_kick(nexar__shm_t *s) {
  uint64_t one = 1;
  ssize_t r = write(s->efd_peer, &one, sizeof(one));
  (void)r;
}

int nexar__shm_watch(nexar__ep_t *ep, int fd, bool add) {
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
  return epoll_ctl(ep->epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd,
                   add ? &ev : NULL);
}

/* The set's entries carry the link's address with W_KICK in bit 0
 * (allocations are aligned). */
int nexar__shm_watch_fd(nexar__ep_t *ep, int fd, nexar__shm_t *s, int what,
                        bool add) {
  struct epoll_event ev = {.events = EPOLLIN,
                           .data.u64 = (uintptr_t)s | (uintptr_t)what};
  return epoll_ctl(ep->shm_sfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd,
                   add ? &ev : NULL);
}

static nexar__shm_t *shm_alloc(nexar__ep_t *ep, int sock, bool server,
                               const struct sockaddr_storage *remote,
                               socklen_t rlen) {
  if (nexar__shm_poll_reserve(ep) < 0) return NULL;
  nexar__shm_t *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  nexar__link_init(&s->l, ep, &nexar__tp_shm, NEXAR__ROLE_MESH, server, remote,
                   rlen);
  s->sock = sock;
  s->efd_mine = s->efd_peer = -1;
  s->seg.fd = s->pseg.fd = -1;
  s->next_sid[Q_PRIO] = SID_STEP / 2;
  s->last_rsid[Q_BULK] = -SID_STEP;
  s->last_rsid[Q_PRIO] = SID_STEP / 2 - SID_STEP;
  s->rstreams_max = ep->prm ? (uint64_t)ep->prm->max_streams : 128;
  s->setup_deadline = nexar__now() + SETUP_NS;
  s->cma_min = ep->prm ? (uint64_t)ep->prm->shm_cma_bytes : 0;
  /* The stream table grows as streams open (shm.c rs_take) and the
   * acknowledgement table comes with the first descriptor: most of a full
   * mesh's links carry a few small messages. */
  if (nexar__ep_add_conn(ep, &s->l) < 0) {
    free(s);
    return NULL;
  }
  ep->shm_nlinks++;
  nexar__shm_poll_add(s); /* its rendezvous is watched every pass */
  if (nexar__shm_watch_fd(ep, sock, s, W_SOCK, true) < 0) {
    /* Unwatched, it would never be read: the rendezvous fails now. */
    nexar__shm_fail(&s->l, NEXAR_ERR_SYS, "cannot watch its socket (%s)",
                    strerror(errno));
  }
  return s;
}

uint64_t nexar__shm_window(const nexar__ep_t *ep) {
  return (uint64_t)(ep->prm ? ep->prm->eager_bytes : 131072) + NEXAR__HDR_BYTES;
}

static void fill_msg(nexar__shm_t *s, shm_msg_t *m, uint32_t type) {
  memset(m, 0, sizeof(*m));
  m->magic = HELLO_MAGIC;
  m->type = type;
  m->window = nexar__shm_window(s->l.ep);
  m->streams = s->rstreams_max;
  memcpy(m->fp, s->l.ep->id.fingerprint, NEXAR__FP_BYTES);
}

/* The peer's window and stream limit, bounded so that nothing it says
 * can make this side do more than a sane peer would ask. */
static int take_limits(nexar__shm_t *s, const shm_msg_t *m) {
  if (m->window < NEXAR__HDR_BYTES || m->window > (1ull << 40) ||
      m->streams < 4 || m->streams > 4096)
    return NEXAR_ERR_PROTO;
  s->window = m->window;
  s->streams_max = s->streams_left = m->streams;
  return 0;
}

static void ready(nexar__shm_t *s) {
  s->l.state = NEXAR__CS_READY;
  s->l.last_rx = s->tx_at = s->rx_at = nexar__now();
  if (nexar__shm_watch_fd(s->l.ep, s->efd_mine, s, W_KICK, true) < 0) {
    /* Unwatched, this side would sleep through the peer's records. */
    nexar__shm_fail(&s->l, NEXAR_ERR_SYS, "cannot watch its eventfd (%s)",
                    strerror(errno));
    return;
  }
  NEXAR__INFO(NEXAR__SUB_NET, "rank %d: shared-memory link to rank %d ready",
              s->l.ep->local_rank, s->l.peer);
  if (s->l.ep->ops->on_ready) s->l.ep->ops->on_ready(&s->l);
  s->l.want_write = true;
}

/* ---- Dial (the lower rank). */

int nexar__shm_dial(nexar__ep_t *ep, const nexar__dial_t *d,
                    nexar__link_t **out) {
  if (!d->host || !d->host->key || !d->host->pid) return NEXAR_ERR_UNSUPPORTED;
  int sock = -1, fds[3] = {-1, -1, -1}, rc;
  nexar__shm_seg_t segs[2] = {{.fd = -1}, {.fd = -1}};
  rc = nexar__shm_connect(d->host->nonce, &sock);
  if (rc < 0) return rc == NEXAR__SHM_AGAIN ? NEXAR_ERR_TRANSPORT : rc;
  nexar__shm_cred_t cred;
  NEXAR__CHECK_GOTO(nexar__shm_peer_cred(sock, &cred), rc, fail);
  if ((uint32_t)cred.pid != d->host->pid || cred.uid != geteuid()) {
    NEXAR__INFO(NEXAR__SUB_NET,
                "rank %d: the shared-memory socket of rank %d belongs to pid "
                "%d uid %d, not the roster's pid %u: not used",
                ep->local_rank, d->peer, (int)cred.pid, (int)cred.uid,
                d->host->pid);
    rc = NEXAR_ERR_AUTH;
    goto fail;
  }
  size_t ring = (size_t)(ep->prm ? ep->prm->shm_ring_kib : 4096) << 10;
  /* The bulk and the priority rings: two segments in one memfd. */
  const size_t rings[2] = {ring, PRIO_RING_BYTES(ring)};
  NEXAR__CHECK_GOTO(nexar__shm_segs_create(rings, 2, segs), rc, fail);
  fds[0] = segs[0].fd;
  fds[1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* ours */
  fds[2] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* the peer's */
  if (fds[1] < 0 || fds[2] < 0) {
    rc = NEXAR_ERR_SYS;
    goto fail;
  }
  nexar__shm_t *s = shm_alloc(ep, sock, false, d->to, d->tolen);
  if (!s) {
    rc = NEXAR_ERR_NOMEM;
    goto fail;
  }
  s->l.peer = d->peer;
  s->peer_pid = d->host->pid;
  s->reads_peer = s->cma_min && nexar__shm_cma_probe((pid_t)s->peer_pid) == 0;
  s->seg = segs[0];
  s->pseg = segs[1];
  s->attached = true;
  s->efd_mine = fds[1];
  s->efd_peer = fds[2];
  shm_msg_t m;
  fill_msg(s, &m, M_HELLO);
  m.cma = s->reads_peer;
  rc = nexar__shm_send_fds(sock, fds, 3, &m, sizeof(m));
  if (rc < 0) {
    /* The link owns everything now; it fails like any other. */
    nexar__shm_fail(
        &s->l, NEXAR_ERR_TRANSPORT, "cannot send the rendezvous: %s",
        nexar_strerror(rc == NEXAR__SHM_AGAIN ? NEXAR_ERR_TRANSPORT : rc));
  }
  *out = &s->l;
  return 0;
fail:
  nexar__shm_seg_close(&segs[1]); /* owns nothing */
  nexar__shm_seg_close(&segs[0]); /* closes fds[0], unmaps both */
  if (fds[1] >= 0) close(fds[1]);
  if (fds[2] >= 0) close(fds[2]);
  if (sock >= 0) close(sock);
  return rc;
}

/* ---- Accept (the higher rank). */

/* Whether |fd| is an anonymous-inode file like the engine's own eventfd
 * (the kernel shares one inode among eventfds, timerfds, epoll sets and
 * signalfds; a write to any but an eventfd fails at once): not a pipe,
 * socket or file, which a kick could block on or write into. Two fstat
 * calls, where /proc/self/fd/N cost a path lookup and a dentry each. */
static bool is_eventfd(const nexar__ep_t *ep, int fd) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && fstat(ep->evfd, &b) == 0 &&
         a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
         (a.st_mode & S_IFMT) == (b.st_mode & S_IFMT);
}

/* A dialer's HELLO: who it is (its fingerprint, vouched for by its pid),
 * the memfd of the two segments (bulk and priority rings) and the two
 * eventfds. */
void nexar__shm_on_hello(nexar__shm_t *s) {
  nexar__link_t *l = &s->l;
  nexar__ep_t *ep = l->ep;
  shm_msg_t m;
  int fds[NEXAR__SHM_MAX_FDS], nfds = 0;
  nexar__shm_cred_t cred;
  int n = nexar__shm_recv_fds(s->sock, fds, 3, &nfds, &m, sizeof(m), &cred);
  if (n == NEXAR__SHM_AGAIN) return;
  if (n < 0) {
    nexar__shm_fail(l, NEXAR_ERR_PROTO, "rendezvous: %s", nexar_strerror(n));
    return;
  }
  const char *bad = NULL;
  int peer = -1;
  if ((size_t)n != sizeof(m) || m.magic != HELLO_MAGIC || m.type != M_HELLO ||
      nfds != 3)
    bad = "not a rendezvous message";
  else if (cred.uid != geteuid())
    bad = "a process of another user";
  else if (!ep->ops->verify_local ||
           (peer = ep->ops->verify_local(ep, m.fp, (uint32_t)cred.pid)) < 0)
    bad = "its pid and certificate are no member's on this host";
  else if (!is_eventfd(ep, fds[1]) || !is_eventfd(ep, fds[2]))
    bad = "the descriptors are not eventfds";
  else if (take_limits(s, &m) < 0)
    bad = "its stream limits are out of range";
  else {
    nexar__shm_seg_t segs[2];
    if (nexar__shm_segs_attach(fds[0], 2, segs) < 0) {
      bad = "the segments are not sealed nexar segments";
    } else {
      s->seg = segs[0];
      s->pseg = segs[1];
    }
  }
  if (bad) {
    for (int i = 0; i < nfds; i++)
      if (fds[i] >= 0) close(fds[i]);
    nexar__shm_fail(l, NEXAR_ERR_AUTH, "refused a same-host peer (pid %d): %s",
                    (int)cred.pid, bad);
    return;
  }
  s->attached = true;
  s->efd_peer = fds[1];
  s->efd_mine = fds[2];
  l->peer = peer;
  s->peer_pid = (uint32_t)cred.pid;
  s->peer_reads = m.cma == 1;
  s->reads_peer = s->cma_min && nexar__shm_cma_probe(cred.pid) == 0;
  snprintf(l->remote_str, sizeof(l->remote_str), "pid %d on this host",
           (int)cred.pid);
  shm_msg_t w;
  fill_msg(s, &w, M_WELCOME);
  w.cma = s->reads_peer;
  if (nexar__shm_send_fds(s->sock, NULL, 0, &w, sizeof(w)) < 0) {
    nexar__shm_fail(l, NEXAR_ERR_TRANSPORT, "cannot answer the rendezvous");
    return;
  }
  ready(s);
}

void nexar__shm_on_welcome(nexar__shm_t *s) {
  shm_msg_t m;
  int nfds = 0, fds[1];
  nexar__shm_cred_t cred;
  int n = nexar__shm_recv_fds(s->sock, fds, 0, &nfds, &m, sizeof(m), &cred);
  if (n == NEXAR__SHM_AGAIN) return;
  if (n < 0 || (size_t)n != sizeof(m) || m.magic != HELLO_MAGIC ||
      m.type != M_WELCOME || m.cma > 1 || take_limits(s, &m) < 0) {
    nexar__shm_fail(
        &s->l, n == NEXAR_ERR_PEER_FAILED ? NEXAR_ERR_AUTH : NEXAR_ERR_PROTO,
        "rank %d refused the shared-memory rendezvous", s->l.peer);
    return;
  }
  s->peer_reads = m.cma == 1;
  ready(s);
}

/* The socket: a close message, or the peer's end. */
void nexar__shm_check_sock(nexar__shm_t *s) {
  nexar__link_t *l = &s->l;
  shm_msg_t m;
  int nfds = 0, fds[1];
  nexar__shm_cred_t cred;
  int n = nexar__shm_recv_fds(s->sock, fds, 0, &nfds, &m, sizeof(m), &cred);
  if (n == NEXAR__SHM_AGAIN) return;
  /* What it wrote before it closed comes first. */
  nexar__shm_drain(s);
  if (n >= 0 && (size_t)n == sizeof(m) && m.magic == HELLO_MAGIC &&
      m.type == M_CLOSE) {
    l->close_code = (int)m.code;
    l->peer_closed = true;
    m.reason[sizeof(m.reason) - 1] = 0;
    for (char *p = m.reason; *p; p++)
      if (*p < 32 || *p > 126) *p = '?';
    nexar__link_fail(l, NEXAR_ERR_PEER_FAILED,
                     m.reason[0] ? m.reason : "peer closed");
    return;
  }
  if (n == NEXAR_ERR_PEER_FAILED) {
    /* The peer's end of the socket closed without a word: its process is
     * gone (as good a proof as a closed UDP port). */
    l->port_closed = true;
    nexar__shm_fail(l, NEXAR_ERR_PEER_FAILED,
                    "its process is gone (the shared-memory socket closed)");
    return;
  }
  nexar__shm_fail(l, NEXAR_ERR_PROTO, "unexpected message on the socket");
}

/* New connections on the rendezvous socket (it was readable). At most
 * ACCEPT_MAX links wait to be identified (their HELLO is judged once the
 * roster is known); further dialers wait in the listen backlog: closing
 * them would read, on their side, as this process gone. */
void nexar__shm_accept_new(nexar__ep_t *ep) {
  if (ep->shm_lfd < 0) return;
  int pending = 0;
  for (int k = 0; k < ep->nconns; k++)
    pending += ep->conns[k]->tp == &nexar__tp_shm && ep->conns[k]->peer < 0;
  struct sockaddr_storage none = {.ss_family = AF_UNSPEC};
  for (; pending < ACCEPT_MAX; pending++) {
    int fd;
    if (nexar__shm_accept(ep->shm_lfd, &fd) != 0) return;
    if (!shm_alloc(ep, fd, true, &none, 0)) {
      close(fd);
      return;
    }
  }
}

#define SWEEP_EVENTS 64
#define SWEEP_ROUNDS 8 /* bounds one sweep: the rest waits for the next */

/* A HELLO that came before the roster waits for it out of the set: left
 * in, level-triggered, it would wake every sleep of the engine until the
 * roster came. nexar__shm_release_held puts it back. */
static void hold(nexar__shm_t *s, bool on) {
  if (s->held == on) return;
  struct epoll_event ev = {.events = on ? 0u : (uint32_t)EPOLLIN,
                           .data.u64 = (uintptr_t)s | (uintptr_t)W_SOCK};
  if (epoll_ctl(s->l.ep->shm_sfd, EPOLL_CTL_MOD, s->sock, &ev) < 0) return;
  s->held = on;
  s->l.ep->shm_held += on ? 1 : -1;
}

void nexar__shm_release_held(nexar__ep_t *ep) {
  for (int i = 0; ep->shm_held && i < ep->shm_npoll; i++) {
    nexar__shm_t *s = S(ep->shm_poll[i]);
    if (s->held) hold(s, false);
  }
  ep->shm_kicks = true; /* swept in this pass */
}

void nexar__shm_sweep(nexar__ep_t *ep, uint64_t now) {
  ep->shm_sock_at = now + SOCK_CHECK_NS;
  ep->shm_park_look = now + PARK_LOOK_NS;
  ep->shm_kicks = false;
  if (ep->shm_sfd < 0) return;
  struct epoll_event ev[SWEEP_EVENTS];
  for (int round = 0; round < SWEEP_ROUNDS; round++) {
    int n = epoll_wait(ep->shm_sfd, ev, SWEEP_EVENTS, 0);
    for (int i = 0; i < n; i++) {
      uintptr_t v = (uintptr_t)ev[i].data.u64;
      nexar__shm_t *s = (nexar__shm_t *)(v & ~(uintptr_t)W_KICK);
      if (!s) {
        nexar__shm_accept_new(ep);
        continue;
      }
      nexar__link_t *l = &s->l;
      /* Links are freed only by the engine's reap, never in a sweep. */
      if (l->state == NEXAR__CS_DEAD) continue;
      if (v & W_KICK) {
        uint64_t count;
        ssize_t r = read(s->efd_mine, &count, sizeof(count));
        (void)r; /* the records are read by the drain that follows */
        nexar__shm_unpark(s);
      } else if (l->state != NEXAR__CS_HANDSHAKE) {
        nexar__shm_check_sock(s);
      } else if (!l->is_server) {
        nexar__shm_on_welcome(s);
      } else if (ep->accept_mesh) { /* a HELLO is judged by the roster */
        nexar__shm_on_hello(s);
      } else {
        hold(s, true);
      }
    }
    /* Level-triggered: what is left comes again at the back of the set's
     * list, so a full batch means more. */
    if (n < SWEEP_EVENTS) return;
  }
}

void nexar__shm_send_close(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  if (s->sock < 0) return;
  shm_msg_t m;
  fill_msg(s, &m, M_CLOSE);
  m.code = (uint32_t)l->tx_code;
  snprintf(m.reason, sizeof(m.reason), "%s", l->tx_reason);
  (void)nexar__shm_send_fds(s->sock, NULL, 0, &m, sizeof(m));
}

/* ---- Test hook: a hostile same-host peer (shm_test.h). */

#include "transport/shm_test.h"

/* One raw record of |len| zero bytes; 0 or NEXAR_ERR_TRANSPORT (no room). */
/* A record of |len| payload bytes, zero but for the first |nb| from |pre|
 * (NULL: none). */
static int forge_rec(nexar__shm_t *s, uint16_t type, uint64_t a, uint64_t b,
                     uint32_t len, const void *pre, size_t nb) {
  uint8_t *p;
  if (nexar__shm_ring_reserve(&s->seg.tx, len, (void **)&p) != 0)
    return NEXAR_ERR_TRANSPORT;
  memset(p, 0, len);
  if (pre) memcpy(p, pre, nb < len ? nb : len);
  nexar__shm_ring_commit(&s->seg.tx, type, 0, a, b, len);
  return 0;
}

static int forge_put(nexar__shm_t *s, uint16_t type, uint64_t a, uint64_t b,
                     uint32_t len) {
  return forge_rec(s, type, a, b, len, NULL, 0);
}

int nexar__shm_forge_link(nexar__link_t *l, int kind) {
  if (!l || l->tp != &nexar__tp_shm || l->state != NEXAR__CS_READY)
    return NEXAR_ERR_UNSUPPORTED;
  nexar__shm_t *s = S(l);
  const uint64_t far = 1ull << 40; /* a stream id nobody opens */
  int64_t sid = s->next_sid[Q_BULK];
  int rc = 0;
  switch (kind) {
    case NEXAR__SHM_FORGE_SID_JUMP:
      rc = forge_put(s, R_DATA, (uint64_t)sid + SID_STEP, 0, 64);
      break;
    case NEXAR__SHM_FORGE_OFFSET:
    case NEXAR__SHM_FORGE_WINDOW:
      s->next_sid[Q_BULK] += SID_STEP;
      s->streams_left--;
      if (kind == NEXAR__SHM_FORGE_WINDOW)
        rc = forge_put(s, R_DATA, (uint64_t)sid, 0, (uint32_t)s->window + 64);
      else if ((rc = forge_put(s, R_DATA, (uint64_t)sid, 0, 0)) == 0)
        rc = forge_put(s, R_DATA, (uint64_t)sid, 64, 64);
      break;
    case NEXAR__SHM_FORGE_TYPE:
      rc = forge_put(s, 0x7e57, 0, 0, 0);
      break;
    case NEXAR__SHM_FORGE_STREAMS:
      rc = forge_put(s, R_STREAMS, s->rstreams_max + 1, 0, 0);
      break;
    case NEXAR__SHM_FORGE_CREDIT:
    case NEXAR__SHM_FORGE_RESET: {
      /* A far id, and -1: the id of the peer's messages not yet opened. */
      uint16_t t = kind == NEXAR__SHM_FORGE_CREDIT ? R_CREDIT : R_RESET;
      if ((rc = forge_put(s, t, far, far, 0)) == 0)
        rc = forge_put(s, t, UINT64_MAX, far, 0);
      break;
    }
    case NEXAR__SHM_FORGE_RING: {
      /* A record published whole, then its length (the header's second
       * word) scribbled past the ring's end; this side then stops
       * producing. */
      uint64_t at = s->seg.tx.head & (s->seg.tx.cap - 1);
      if ((rc = forge_put(s, R_DATA, (uint64_t)sid, 0, 0)) == 0) {
        uint32_t len = (uint32_t)s->seg.tx.cap;
        memcpy(s->seg.tx.data + at + 8, &len, sizeof len);
      }
      s->seg.tx.broken = 1;
      break;
    }
    case NEXAR__SHM_FORGE_SMALL_LEN:
    case NEXAR__SHM_FORGE_SMALL_SRC: {
      /* The receiver's own rank as the source, with a valid length; or 4
       * bytes, too short for a source and a tag. */
      const uint32_t pre[2] = {(uint32_t)l->peer, 5};
      s->next_sid[Q_BULK] += SID_STEP;
      s->streams_left--;
      rc = forge_rec(s, R_SMALL, 0, 0,
                     kind == NEXAR__SHM_FORGE_SMALL_SRC ? SMALL_PRE + 8 : 4,
                     pre, sizeof pre);
      break;
    }
    default:
      return NEXAR_ERR_INVALID_ARG;
  }
  nexar__shm_kick(s);
  return rc;
}
