/*
 * Shared-memory links to processes on this host (same boot, same network
 * namespace: the roster's host key). Runs only on the progress thread.
 *
 * Rendezvous: every worker listens on an abstract Unix socket named by the
 * random nonce it sent the seed (shm_os.c); the roster, which the seed gave
 * every member over its authenticated channel, carries each member's host
 * key, pid and nonce. The lower rank dials: it connects, checks with
 * SO_PEERCRED that the listener is the pid the roster names, creates a
 * sealed memfd segment of two rings (shm_ring.c) and two eventfds, and
 * sends them (SCM_RIGHTS) with its certificate fingerprint, its stream
 * window and stream limit. The listener checks the sender's credentials
 * against the roster (ops->verify_local) and the descriptors, attaches,
 * and answers with its own window and limit; the link is then ready on
 * both sides. Anything unexpected closes the socket: the dialer falls back
 * to QUIC when the check fails on its side (NEXAR_TRANSPORT=auto).
 *
 * Streams: as on QUIC, each message is a stream of its own (ids 0, 4, 8,
 * ... per direction), opened in lane order at its first record, with the
 * receiver's window (eager bytes + header) until it extends it (CREDIT),
 * and at most the receiver's stream limit open at once, returned in
 * batches (STREAMS) as messages are delivered. Records: DATA (a: stream,
 * b: offset, FIN flag), CREDIT (a: stream, b: new limit), RESET (a:
 * stream), STREAMS (a: count), HB (nothing). The ring holds the bytes, so a
 * record written is a record acknowledged.
 *
 * Everything read from the segment is untrusted: the ring checks its
 * records (shm_ring.c), and here every stream id, offset, length and
 * credit is checked against what this side allowed before it is used; a
 * violation fails the link with NEXAR_ERR_PROTO naming the peer.
 *
 * Failure: the socket stays open for the link's life; the peer's exit
 * closes it (checked at least every SOCK_CHECK_NS), which proves the
 * process gone, like a closed UDP port; a stopped peer writes no heartbeat
 * (a HB record when it wrote nothing for a heartbeat interval), and the
 * failure detector judges its silence as on QUIC. A close (finalize, fence,
 * leave) travels on the socket as a message with its code and reason.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/shm_ring.h"
#include "transport/transport.h"

#define HELLO_MAGIC 0x314f4c4c45484e58ull /* "XNHELLO1" */
#define CHUNK_BYTES (256u << 10)          /* payload of one DATA record */
#define RX_PASS_BYTES (1u << 20)          /* per link and pass */
#define SOCK_CHECK_NS 20000000ull         /* 20 ms */
#define SETUP_NS 10000000000ull           /* 10 s to finish the rendezvous */
#define ACCEPT_MAX 64                     /* links not yet identified */
#define ACCEPT_EVERY_NS 2000000ull        /* 2 ms between looks */

enum { R_DATA = 1, R_CREDIT = 2, R_RESET = 3, R_STREAMS = 4, R_HB = 5 };
enum { F_FIN = 1 };
enum { M_HELLO = 1, M_WELCOME = 2, M_CLOSE = 3 };

/* The rendezvous and close messages on the socket (host order: same host). */
typedef struct shm_msg {
  uint64_t magic;
  uint32_t type;
  uint32_t code;    /* M_CLOSE: application close code */
  uint64_t window;  /* stream bytes the sender grants a new stream */
  uint64_t streams; /* streams the sender lets the peer open at once */
  uint8_t fp[NEXAR__FP_BYTES];
  char reason[128]; /* M_CLOSE */
} shm_msg_t;

typedef struct rstream {
  int64_t sid;
  nexar__imsg_t *m;
  uint64_t got, max; /* bytes received; bytes allowed */
  uint64_t max_sent; /* the limit the peer was last told */
  bool orphan;       /* its message was dropped: the rest is read unseen */
} rstream_t;

typedef struct nexar__shm {
  nexar__link_t l;
  int sock, efd_mine, efd_peer;
  nexar__shm_seg_t seg;
  bool attached;
  uint64_t setup_deadline;
  uint64_t sock_check_at;
  uint64_t tx_at;        /* when a record was last written */
  int64_t next_sid;      /* the next stream this side opens */
  int64_t last_rsid;     /* the highest stream the peer opened */
  uint64_t window;       /* what the peer grants each new stream */
  uint64_t streams_left; /* streams this side may still open */
  uint64_t streams_max;  /* the peer's limit */
  uint64_t streams_owed; /* delivered streams not yet returned */
  uint64_t rstreams_max; /* this side's limit */
  rstream_t *rs;         /* open remote streams */
  int nrs;
  bool tx_full; /* the tx ring had no room: wait for a kick */
  /* The peer may have written efd_mine: a sleep flag went up since it was
   * last read. */
  bool may_kick;
} nexar__shm_t;

#define S(l) ((nexar__shm_t *)(l))

static void shm_fail(nexar__link_t *l, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void shm_fail(nexar__link_t *l, int err, const char *fmt, ...) {
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

static void kick_peer(nexar__shm_t *s) {
  uint64_t one = 1;
  ssize_t r = write(s->efd_peer, &one, sizeof(one));
  (void)r;
}

static int watch(nexar__ep_t *ep, int fd, bool add) {
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
  return epoll_ctl(ep->epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd,
                   add ? &ev : NULL);
}

static nexar__shm_t *shm_alloc(nexar__ep_t *ep, int sock, bool server,
                               const struct sockaddr_storage *remote,
                               socklen_t rlen) {
  nexar__shm_t *s = calloc(1, sizeof(*s));
  if (!s) return NULL;
  nexar__link_init(&s->l, ep, &nexar__tp_shm, NEXAR__ROLE_MESH, server, remote,
                   rlen);
  s->sock = sock;
  s->efd_mine = s->efd_peer = -1;
  s->seg.fd = -1;
  s->last_rsid = -4;
  s->rstreams_max = ep->prm ? (uint64_t)ep->prm->max_streams : 128;
  s->setup_deadline = nexar__now() + SETUP_NS;
  s->rs = calloc(s->rstreams_max, sizeof(*s->rs));
  if (!s->rs || nexar__ep_add_conn(ep, &s->l) < 0) {
    free(s->rs);
    free(s);
    return NULL;
  }
  watch(ep, sock, true);
  return s;
}

static uint64_t my_window(const nexar__ep_t *ep) {
  return (uint64_t)(ep->prm ? ep->prm->eager_bytes : 131072) + NEXAR__HDR_BYTES;
}

static void fill_msg(nexar__shm_t *s, shm_msg_t *m, uint32_t type) {
  memset(m, 0, sizeof(*m));
  m->magic = HELLO_MAGIC;
  m->type = type;
  m->window = my_window(s->l.ep);
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
  s->l.last_rx = s->tx_at = nexar__now();
  watch(s->l.ep, s->efd_mine, true);
  NEXAR__INFO(NEXAR__SUB_NET, "rank %d: shared-memory link to rank %d ready",
              s->l.ep->local_rank, s->l.peer);
  if (s->l.ep->ops->on_ready) s->l.ep->ops->on_ready(&s->l);
  s->l.want_write = true;
}

/* ---- Dial (the lower rank). */

static int shm_dial(nexar__ep_t *ep, const nexar__dial_t *d,
                    nexar__link_t **out) {
  if (!d->host || !d->host->key || !d->host->pid) return NEXAR_ERR_UNSUPPORTED;
  int sock = -1, fds[3] = {-1, -1, -1}, rc;
  nexar__shm_seg_t seg = {.fd = -1};
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
  NEXAR__CHECK_GOTO(nexar__shm_seg_create(ring, &seg), rc, fail);
  fds[0] = seg.fd;
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
  s->seg = seg;
  s->attached = true;
  s->efd_mine = fds[1];
  s->efd_peer = fds[2];
  shm_msg_t m;
  fill_msg(s, &m, M_HELLO);
  rc = nexar__shm_send_fds(sock, fds, 3, &m, sizeof(m));
  if (rc < 0) {
    /* The link owns everything now; it fails like any other. */
    shm_fail(&s->l, NEXAR_ERR_TRANSPORT, "cannot send the rendezvous: %s",
             nexar_strerror(rc == NEXAR__SHM_AGAIN ? NEXAR_ERR_TRANSPORT : rc));
  }
  *out = &s->l;
  return 0;
fail:
  nexar__shm_seg_close(&seg); /* closes fds[0] */
  if (fds[1] >= 0) close(fds[1]);
  if (fds[2] >= 0) close(fds[2]);
  if (sock >= 0) close(sock);
  return rc;
}

/* ---- Accept (the higher rank). */

static bool is_eventfd(int fd) {
  char path[64], link[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, link, sizeof(link) - 1);
  if (n <= 0) return false;
  link[n] = 0;
  return strcmp(link, "anon_inode:[eventfd]") == 0;
}

/* A dialer's HELLO: who it is (its fingerprint, vouched for by its pid),
 * the segment and the two eventfds. */
static void on_hello(nexar__shm_t *s) {
  nexar__link_t *l = &s->l;
  nexar__ep_t *ep = l->ep;
  shm_msg_t m;
  int fds[NEXAR__SHM_MAX_FDS], nfds = 0;
  nexar__shm_cred_t cred;
  int n = nexar__shm_recv_fds(s->sock, fds, 3, &nfds, &m, sizeof(m), &cred);
  if (n == NEXAR__SHM_AGAIN) return;
  if (n < 0) {
    shm_fail(l, NEXAR_ERR_PROTO, "rendezvous: %s", nexar_strerror(n));
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
  else if (!is_eventfd(fds[1]) || !is_eventfd(fds[2]))
    bad = "the descriptors are not eventfds";
  else if (take_limits(s, &m) < 0)
    bad = "its stream limits are out of range";
  else if (nexar__shm_seg_attach(fds[0], &s->seg) < 0)
    bad = "the segment is not a sealed nexar segment";
  if (bad) {
    for (int i = 0; i < nfds; i++) close(fds[i]);
    shm_fail(l, NEXAR_ERR_AUTH, "refused a same-host peer (pid %d): %s",
             (int)cred.pid, bad);
    return;
  }
  s->attached = true;
  s->efd_peer = fds[1];
  s->efd_mine = fds[2];
  l->peer = peer;
  snprintf(l->remote_str, sizeof(l->remote_str), "pid %d on this host",
           (int)cred.pid);
  shm_msg_t w;
  fill_msg(s, &w, M_WELCOME);
  if (nexar__shm_send_fds(s->sock, NULL, 0, &w, sizeof(w)) < 0) {
    shm_fail(l, NEXAR_ERR_TRANSPORT, "cannot answer the rendezvous");
    return;
  }
  ready(s);
}

static void on_welcome(nexar__shm_t *s) {
  shm_msg_t m;
  int nfds = 0, fds[1];
  nexar__shm_cred_t cred;
  int n = nexar__shm_recv_fds(s->sock, fds, 0, &nfds, &m, sizeof(m), &cred);
  if (n == NEXAR__SHM_AGAIN) return;
  if (n < 0 || (size_t)n != sizeof(m) || m.magic != HELLO_MAGIC ||
      m.type != M_WELCOME || take_limits(s, &m) < 0) {
    shm_fail(&s->l,
             n == NEXAR_ERR_PEER_FAILED ? NEXAR_ERR_AUTH : NEXAR_ERR_PROTO,
             "rank %d refused the shared-memory rendezvous", s->l.peer);
    return;
  }
  ready(s);
}

/* ---- Receiving. */

static rstream_t *rs_find(nexar__shm_t *s, int64_t sid) {
  for (int i = 0; i < s->nrs; i++)
    if (s->rs[i].sid == sid) return &s->rs[i];
  return NULL;
}

static void rs_drop(nexar__shm_t *s, rstream_t *r) {
  *r = s->rs[--s->nrs];
}

static nexar__omsg_t *out_find(nexar__shm_t *s, int64_t sid) {
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++)
    for (nexar__omsg_t *m = s->l.outq[lane]; m; m = m->next)
      if (m->sid == sid) return m;
  return NULL;
}

/* One DATA record. Returns 0, or NEXAR_ERR_PROTO with |why| set. */
static int on_data(nexar__shm_t *s, const nexar__shm_rec_t *r,
                   const char **why) {
  nexar__link_t *l = &s->l;
  int64_t sid = (int64_t)r->a;
  rstream_t *st = rs_find(s, sid);
  if (!st) {
    if (sid != s->last_rsid + 4 || r->b != 0) {
      *why = "a record for a stream that is not open";
      return NEXAR_ERR_PROTO;
    }
    if ((uint64_t)s->nrs >= s->rstreams_max) {
      *why = "more streams open than allowed";
      return NEXAR_ERR_PROTO;
    }
    s->last_rsid = sid;
    st = &s->rs[s->nrs++];
    memset(st, 0, sizeof(*st));
    st->sid = sid;
    st->max = st->max_sent = my_window(l->ep);
  }
  if (r->b != st->got || r->len > st->max - st->got) {
    *why = r->b != st->got ? "stream data out of order"
                           : "peer exceeded the stream window";
    return NEXAR_ERR_PROTO;
  }
  st->got += r->len;
  bool fin = (r->flags & F_FIN) != 0;
  nexar__imsg_t *m = st->m;
  int idx = (int)(st - s->rs);
  if (!st->orphan)
    l->ep->ops->on_stream_data(l, sid, m, r->payload, r->len, fin);
  if (l->state == NEXAR__CS_DEAD) return 0;
  if (fin) {
    st = &s->rs[idx];
    m = st->m;
    rs_drop(s, st);
    if (m) l->ep->ops->on_stream_close(l, m);
  }
  return 0;
}

static int on_record(nexar__shm_t *s, const nexar__shm_rec_t *r,
                     const char **why) {
  nexar__link_t *l = &s->l;
  switch (r->type) {
    case R_DATA:
      return on_data(s, r, why);
    case R_CREDIT: {
      nexar__omsg_t *m = out_find(s, (int64_t)r->a);
      if (m && r->b > m->tx_max) {
        m->tx_max = r->b; /* a window: it may reach past the message */
        m->blocked = false;
        l->want_write = true;
      }
      return 0;
    }
    case R_RESET: {
      rstream_t *st = rs_find(s, (int64_t)r->a);
      if (!st) return 0; /* never opened here, or already ended */
      nexar__imsg_t *m = st->m;
      rs_drop(s, st);
      if (m) l->ep->ops->on_stream_close(l, m);
      return 0;
    }
    case R_STREAMS:
      if (r->a > s->streams_max - s->streams_left) {
        *why = "more streams returned than were opened";
        return NEXAR_ERR_PROTO;
      }
      s->streams_left += r->a;
      l->want_write = true;
      return 0;
    case R_HB:
      return 0;
  }
  *why = "a record of unknown type";
  return NEXAR_ERR_PROTO;
}

/* Reads this link's records (at most RX_PASS_BYTES); true when more are
 * waiting. */
static bool drain(nexar__shm_t *s) {
  nexar__link_t *l = &s->l;
  uint64_t bytes = 0;
  bool any = false, more = false;
  while (l->state == NEXAR__CS_READY) {
    if (bytes >= RX_PASS_BYTES) {
      more = true;
      break;
    }
    nexar__shm_rec_t r;
    int rc = nexar__shm_ring_peek(&s->seg.rx, &r);
    if (rc == 0) break;
    const char *why = "its ring is corrupt";
    if (rc < 0 || on_record(s, &r, &why) < 0) {
      nexar__link_close(l, NEXAR__CLOSE_PROTO, why);
      shm_fail(l, NEXAR_ERR_PROTO, "%s", why);
      return false;
    }
    nexar__shm_ring_pop(&s->seg.rx);
    bytes += r.len + NEXAR__SHM_REC_HDR;
    any = true;
  }
  if (any) {
    l->last_rx = l->ep->pass_now;
    if (nexar__shm_ring_need_kick_space(&s->seg.rx)) kick_peer(s);
  }
  return more;
}

/* The socket: a close message, or the peer's end. */
static void check_sock(nexar__shm_t *s) {
  nexar__link_t *l = &s->l;
  shm_msg_t m;
  int nfds = 0, fds[1];
  nexar__shm_cred_t cred;
  int n = nexar__shm_recv_fds(s->sock, fds, 0, &nfds, &m, sizeof(m), &cred);
  if (n == NEXAR__SHM_AGAIN) return;
  /* What it wrote before it closed comes first. */
  drain(s);
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
    shm_fail(l, NEXAR_ERR_PEER_FAILED,
             "its process is gone (the shared-memory socket closed)");
    return;
  }
  shm_fail(l, NEXAR_ERR_PROTO, "unexpected message on the socket");
}

/* New connections on the rendezvous socket, looked for at most every
 * ACCEPT_EVERY_NS (a system call a pass would cost every message). */
static void accept_new(nexar__ep_t *ep, uint64_t now) {
  if (ep->shm_lfd < 0 || now < ep->shm_accept_at) return;
  ep->shm_accept_at = now + ACCEPT_EVERY_NS;
  for (int i = 0; i < ACCEPT_MAX; i++) {
    int fd;
    if (nexar__shm_accept(ep->shm_lfd, &fd) != 0) return;
    int pending = 0;
    for (int k = 0; k < ep->nconns; k++)
      pending += ep->conns[k]->tp == &nexar__tp_shm && ep->conns[k]->peer < 0;
    struct sockaddr_storage none = {.ss_family = AF_UNSPEC};
    nexar__shm_t *s =
        pending < ACCEPT_MAX ? shm_alloc(ep, fd, true, &none, 0) : NULL;
    if (!s) close(fd);
  }
}

static bool shm_input(nexar__ep_t *ep) {
  uint64_t now = ep->pass_now;
  accept_new(ep, now);
  bool more = false;
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *l = ep->conns[i];
    if (l->tp != &nexar__tp_shm || l->state == NEXAR__CS_DEAD) continue;
    nexar__shm_t *s = S(l);
    if (l->state == NEXAR__CS_HANDSHAKE) {
      /* A HELLO waits until the roster is known to judge it. */
      if (l->is_server && ep->accept_mesh)
        on_hello(s);
      else if (!l->is_server)
        on_welcome(s);
      continue;
    }
    if (s->may_kick) {
      uint64_t v;
      ssize_t r = read(s->efd_mine, &v, sizeof(v));
      (void)r;
      s->may_kick = false;
    }
    more |= drain(s);
    if (s->tx_full && nexar__shm_ring_free(&s->seg.tx) >= CHUNK_BYTES)
      l->want_write = true;
    if (now >= s->sock_check_at || ep->resuming) {
      s->sock_check_at = now + SOCK_CHECK_NS;
      check_sock(s);
    }
  }
  return more;
}

/* ---- Sending. */

/* Appends one record; false when the ring is full (wait for a kick). */
static bool put(nexar__shm_t *s, uint16_t type, uint16_t flags, uint64_t a,
                uint64_t b, const struct iovec *iov, int niov) {
  int rc = nexar__shm_ring_put(&s->seg.tx, type, flags, a, b, iov, niov);
  if (rc == 0) {
    s->tx_at = s->l.ep->pass_now;
    return true;
  }
  if (rc == NEXAR__SHM_AGAIN) {
    s->tx_full = true;
    /* Sleep on the kick unless room came meanwhile. */
    if (!nexar__shm_ring_producer_sleep(&s->seg.tx, CHUNK_BYTES))
      s->l.want_write = true;
    else
      s->may_kick = true;
  } else {
    nexar__link_close(&s->l, NEXAR__CLOSE_PROTO, "ring corrupt");
    shm_fail(&s->l, NEXAR_ERR_PROTO, "its ring is corrupt");
  }
  return false;
}

/* Control records owed: stream credit, returned streams. */
static bool put_credit(nexar__shm_t *s) {
  for (int i = 0; i < s->nrs; i++) {
    rstream_t *st = &s->rs[i];
    if (st->max_sent < st->max) {
      if (!put(s, R_CREDIT, 0, (uint64_t)st->sid, st->max, NULL, 0))
        return false;
      st->max_sent = st->max;
    }
  }
  uint64_t batch = s->rstreams_max / 4;
  if (s->streams_owed >= (batch ? batch : 1)) {
    if (!put(s, R_STREAMS, 0, s->streams_owed, 0, NULL, 0)) return false;
    s->streams_owed = 0;
  }
  return true;
}

/* Whether a new stream of |lane| may open: as on QUIC, data keeps half of
 * the peer's stream limit for the others, RPC a quarter for control. */
static bool may_open(const nexar__shm_t *s, int lane) {
  uint64_t quarter = s->streams_max / 4;
  uint64_t keep = lane == NEXAR__LANE_CONTROL ? 0
                  : lane == NEXAR__LANE_DATA  ? 2 * quarter
                                              : quarter;
  return s->streams_left > keep;
}

/* Writes what |m| may: returns false when the ring is full. */
static bool put_msg(nexar__shm_t *s, nexar__omsg_t *m, bool *closed) {
  nexar__link_t *l = &s->l;
  const nexar__ep_ops_t *ops = l->ep->ops;
  uint64_t total = nexar__omsg_total(m);
  *closed = false;
  if (m->stop) {
    /* Cut: the peer learns it (if it ever saw the stream), and it ends. */
    if (m->sid >= 0 && !put(s, R_RESET, 0, (uint64_t)m->sid, 0, NULL, 0))
      return false;
    nexar__link_unqueue(l, m);
    ops->on_out_closed(l, m);
    *closed = true;
    return true;
  }
  while (ops->frame_more(m) && !m->blocked) {
    if (m->sid < 0) {
      m->sid = s->next_sid;
      s->next_sid += 4;
      s->streams_left--;
      m->tx_max = s->window;
    }
    uint64_t room = m->tx_max > m->sent ? m->tx_max - m->sent : 0;
    if (!room) {
      m->blocked = true;
      break;
    }
    struct iovec v[4];
    bool fin;
    size_t nv = ops->frame_vecs(m, v, 4, &fin);
    uint64_t cap = room < CHUNK_BYTES ? room : CHUNK_BYTES, len = 0;
    size_t k = 0;
    for (; k < nv && len < cap; k++) {
      if (v[k].iov_len > cap - len) {
        v[k].iov_len = (size_t)(cap - len);
        fin = false;
      }
      len += v[k].iov_len;
    }
    if (k < nv) fin = false;
    fin = fin && m->sent + len == total;
    if (!put(s, R_DATA, fin ? F_FIN : 0, (uint64_t)m->sid, m->sent, v, (int)k))
      return false;
    m->sent += len;
    ops->on_acked(l, m, len);
    if (fin) {
      nexar__link_unqueue(l, m);
      ops->on_out_closed(l, m);
      *closed = true;
      return true;
    }
  }
  return true;
}

static const int lane_order[NEXAR__LANE_COUNT] = {
    NEXAR__LANE_CONTROL, NEXAR__LANE_RPC, NEXAR__LANE_DATA};

static void shm_flush(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  l->want_write = false;
  if (l->state != NEXAR__CS_READY) return;
  s->tx_full = false;
  bool room = put_credit(s);
  for (int k = 0; room && k < NEXAR__LANE_COUNT; k++) {
    int lane = lane_order[k];
    for (nexar__omsg_t *m = l->outq[lane], *next; room && m; m = next) {
      next = m->next;
      if (m->sid < 0 && !m->stop && !may_open(s, lane)) break; /* FIFO */
      if (m->sid < 0 && m->stop) {
        /* Cancelled before it opened: the peer never saw it. */
        nexar__link_unqueue(l, m);
        l->ep->ops->on_out_closed(l, m);
        continue;
      }
      bool closed;
      room = put_msg(s, m, &closed);
      if (l->state == NEXAR__CS_DEAD) return;
    }
  }
  if (nexar__shm_ring_need_kick(&s->seg.tx)) kick_peer(s);
}

/* ---- Timers: the rendezvous deadline, the heartbeat, the socket. */

static uint64_t shm_expiry(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  if (l->state == NEXAR__CS_HANDSHAKE) return s->setup_deadline;
  if (l->state != NEXAR__CS_READY) return UINT64_MAX;
  uint64_t hb = l->ep->prm ? (uint64_t)l->ep->prm->heartbeat_ms : 1000;
  uint64_t t = s->tx_at + hb * 1000000ull;
  return t < s->sock_check_at + SOCK_CHECK_NS
             ? t
             : s->sock_check_at + SOCK_CHECK_NS;
}

static void shm_on_expiry(nexar__link_t *l, uint64_t now) {
  nexar__shm_t *s = S(l);
  if (l->state == NEXAR__CS_HANDSHAKE) {
    if (now >= s->setup_deadline)
      shm_fail(l, NEXAR_ERR_TIMEOUT, "the rendezvous did not finish");
    return;
  }
  if (now >= s->sock_check_at) {
    s->sock_check_at = now + SOCK_CHECK_NS;
    check_sock(s);
  }
  uint64_t hb = l->ep->prm ? (uint64_t)l->ep->prm->heartbeat_ms : 1000;
  if (l->state == NEXAR__CS_READY && now >= s->tx_at + hb * 1000000ull) {
    if (put(s, R_HB, 0, 0, 0, NULL, 0) && nexar__shm_ring_need_kick(&s->seg.tx))
      kick_peer(s);
    s->tx_at = now; /* a full ring is not retried before the next beat */
  }
}

/* ---- The rest of the ops table. */

static void shm_send_close(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  if (s->sock < 0) return;
  shm_msg_t m;
  fill_msg(s, &m, M_CLOSE);
  m.code = (uint32_t)l->tx_code;
  snprintf(m.reason, sizeof(m.reason), "%s", l->tx_reason);
  (void)nexar__shm_send_fds(s->sock, NULL, 0, &m, sizeof(m));
}

static void shm_free(nexar__link_t *l) {
  nexar__shm_t *s = S(l);
  nexar__ep_t *ep = l->ep;
  if (s->sock >= 0) {
    watch(ep, s->sock, false);
    close(s->sock);
  }
  if (s->efd_mine >= 0) {
    watch(ep, s->efd_mine, false);
    close(s->efd_mine);
  }
  if (s->efd_peer >= 0) close(s->efd_peer);
  if (s->attached) nexar__shm_seg_close(&s->seg);
  free(s->rs);
}

static bool shm_alive(const nexar__link_t *l) {
  return S(l)->attached;
}

static int shm_exporter(nexar__link_t *l, uint8_t out[32]) {
  (void)l;
  (void)out;
  return NEXAR_ERR_TRANSPORT; /* peers are authenticated by the kernel */
}

static void shm_stop_out(nexar__link_t *l, nexar__omsg_t *m) {
  m->stop = true;
  l->want_write = true;
}

static void shm_forget_out(nexar__link_t *l, nexar__omsg_t *m) {
  /* Rerouted: the stream was opened here; the peer sees it cut. */
  (void)l;
  (void)m;
}

static void shm_attach_in(nexar__link_t *l, int64_t sid, nexar__imsg_t *m) {
  rstream_t *st = rs_find(S(l), sid);
  if (st) st->m = m;
}

static void shm_done_in(nexar__link_t *l, nexar__imsg_t *m) {
  nexar__shm_t *s = S(l);
  rstream_t *st = rs_find(s, m->sid);
  if (st && st->m == m) {
    st->m = NULL; /* later bytes are read and dropped */
    st->orphan = true;
  }
  s->streams_owed++;
  l->want_write = true;
}

static void shm_extend(nexar__link_t *l, int64_t sid, uint64_t n) {
  rstream_t *st = rs_find(S(l), sid);
  if (!st) return;
  st->max += n;
  l->want_write = true;
}

/* ---- Endpoint. */

static int shm_init(nexar__ep_t *ep, const struct sockaddr_storage *bind,
                    socklen_t len) {
  (void)bind;
  (void)len;
  ep->shm_lfd = -1;
  if (!ep->host || !ep->host->key) return 0;
  int rc = nexar__shm_listen(ep->host->nonce, &ep->shm_lfd);
  if (rc < 0) {
    NEXAR__INFO(NEXAR__SUB_NET,
                "no shared-memory rendezvous (%s): same-host peers use QUIC",
                nexar_strerror(rc));
    ep->shm_lfd = -1;
    return 0;
  }
  watch(ep, ep->shm_lfd, true);
  return 0;
}

static void shm_fini(nexar__ep_t *ep) {
  if (ep->shm_lfd >= 0) close(ep->shm_lfd);
  ep->shm_lfd = -1;
}

/* Before the engine sleeps: each ready link's consumer flag goes up (the
 * peer then kicks its eventfd); false when a ring already has records. */
static bool shm_arm(nexar__ep_t *ep) {
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *l = ep->conns[i];
    if (l->tp != &nexar__tp_shm || l->state != NEXAR__CS_READY) continue;
    S(l)->may_kick = true;
    if (nexar__shm_ring_consumer_sleep(&S(l)->seg.rx) != 1) return false;
  }
  return true;
}

static bool shm_ready(nexar__ep_t *ep, uint64_t now) {
  if (ep->shm_lfd >= 0 && now >= ep->shm_accept_at) return true;
  for (int i = 0; i < ep->nconns; i++) {
    nexar__link_t *l = ep->conns[i];
    if (l->tp != &nexar__tp_shm || l->state == NEXAR__CS_DEAD) continue;
    nexar__shm_t *s = S(l);
    nexar__shm_rec_t r;
    if (l->state != NEXAR__CS_READY || now >= s->sock_check_at ||
        nexar__shm_ring_peek(&s->seg.rx, &r) != 0 ||
        (s->tx_full && nexar__shm_ring_free(&s->seg.tx) >= CHUNK_BYTES))
      return true;
  }
  return false;
}

static bool shm_output(nexar__ep_t *ep, uint64_t *next) {
  (void)ep;
  (void)next;
  return false;
}

const nexar__tp_t nexar__tp_shm = {
    .name = "shm",
    .caps = NEXAR__TP_RELIABLE | NEXAR__TP_SAME_HOST,
    .max_frame = UINT64_MAX,
    .init = shm_init,
    .fini = shm_fini,
    .input = shm_input,
    .output = shm_output,
    .arm = shm_arm,
    .ready = shm_ready,
    .dial = shm_dial,
    .flush = shm_flush,
    .expiry = shm_expiry,
    .on_expiry = shm_on_expiry,
    .send_close = shm_send_close,
    .free = shm_free,
    .alive = shm_alive,
    .exporter = shm_exporter,
    .stop_out = shm_stop_out,
    .forget_out = shm_forget_out,
    .attach_in = shm_attach_in,
    .done_in = shm_done_in,
    .extend = shm_extend,
};

/* ---- Test hook: a hostile same-host peer (shm_test.h). */

#include "transport/shm_test.h"

typedef struct forge_arg {
  nexar_ctx_t *ctx;
  int peer, kind;
} forge_arg_t;

/* One raw record of |len| zero bytes; 0 or NEXAR_ERR_TRANSPORT (no room). */
static int forge_put(nexar__shm_t *s, uint16_t type, uint64_t a, uint64_t b,
                     uint32_t len) {
  void *p;
  if (nexar__shm_ring_reserve(&s->seg.tx, len, &p) != 0)
    return NEXAR_ERR_TRANSPORT;
  memset(p, 0, len);
  nexar__shm_ring_commit(&s->seg.tx, type, 0, a, b, len);
  return 0;
}

static int forge_fn(nexar__req_t *req) {
  forge_arg_t *f = req->cb_arg;
  nexar_ctx_t *ctx = f->ctx;
  if (f->peer < 0 || f->peer >= ctx->world || f->peer == ctx->rank)
    return NEXAR_ERR_INVALID_ARG;
  nexar__link_t *l = ctx->peers ? ctx->peers[f->peer] : NULL;
  if (!l || l->tp != &nexar__tp_shm || l->state != NEXAR__CS_READY)
    return NEXAR_ERR_UNSUPPORTED;
  nexar__shm_t *s = S(l);
  const uint64_t far = 1ull << 40; /* a stream id nobody opens */
  int64_t sid = s->next_sid;
  int rc = 0;
  switch (f->kind) {
    case NEXAR__SHM_FORGE_SID_JUMP:
      rc = forge_put(s, R_DATA, (uint64_t)sid + 4, 0, 64);
      break;
    case NEXAR__SHM_FORGE_OFFSET:
    case NEXAR__SHM_FORGE_WINDOW:
      s->next_sid += 4;
      s->streams_left--;
      if (f->kind == NEXAR__SHM_FORGE_WINDOW)
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
      uint16_t t = f->kind == NEXAR__SHM_FORGE_CREDIT ? R_CREDIT : R_RESET;
      if ((rc = forge_put(s, t, far, far, 0)) == 0)
        rc = forge_put(s, t, UINT64_MAX, far, 0);
      break;
    }
    case NEXAR__SHM_FORGE_RING:
      /* The shared head (the first word of the producer line) far ahead
       * of what was published; this side then stops producing. */
      atomic_store_explicit((_Atomic uint64_t *)(void *)s->seg.tx.ctl,
                            s->seg.tx.head + 3 * s->seg.tx.cap,
                            memory_order_release);
      s->seg.tx.broken = 1;
      break;
    default:
      return NEXAR_ERR_INVALID_ARG;
  }
  kick_peer(s);
  return rc;
}

int nexar__shm_test_forge(nexar_ctx_t *ctx, int peer, int kind) {
  forge_arg_t f = {ctx, peer, kind};
  return nexar__ep_call(&ctx->ep, forge_fn, &f, UINT64_MAX);
}
