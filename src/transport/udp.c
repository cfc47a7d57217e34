/*
 * The process's UDP socket: large buffers, GSO on send (one sendmsg for
 * up to 64 equal-sized datagrams), GRO and recvmmsg on receive. Every
 * connection of the endpoint shares it but the links' RPC connections,
 * which have a second socket of the same kind (quic_rpc.c; opened with
 * nexar__udp_open_more, whose full sends are dropped as lost).
 *
 * Send back-pressure: a batch the socket refuses (EAGAIN, ENOBUFS) is kept
 * in the endpoint's txbuf and nothing else is written until it is gone:
 * EAGAIN arms EPOLLOUT, ENOBUFS (which EPOLLOUT does not signal) retries
 * after a short pause, and a batch that waits longer than TX_WAIT_MAX_NS
 * is dropped, which QUIC recovers as loss.
 *
 * Unreachable peers: with IP_RECVERR the kernel reports ICMP errors for
 * this unconnected socket on its error queue (and once through the next
 * send or receive call). Each report goes to ep->ops->on_unreachable with
 * its errno: ECONNREFUSED (port unreachable) means the peer's process is
 * gone, which the engine learns in milliseconds instead of a heartbeat
 * timeout; the others (host or network unreachable, prohibited) say the
 * path is broken.
 *
 * Send errors: a send that fails with an earlier datagram's ICMP error is
 * tried again, a bounded number of times; any other error (or the same one
 * again: no route, a prohibiting route, an interface gone, an address of
 * the wrong family) is this send's own. The datagrams are then dropped,
 * which QUIC recovers as loss, and the error goes back to the caller once,
 * as -errno; nothing here ever loops on it (quic.c tells the engine, whose
 * detector declares a peer it cannot reach failed after the heartbeat
 * timeout).
 *
 * Receive passes are bounded (NEXAR_PASS_SLICE_BYTES) so that the progress loop
 * runs timers, user operations and writes between them, and within each
 * recvmmsg batch small datagrams are handed on first: they carry ACKs and
 * control-lane messages, which must not wait behind bulk data.
 */
#include <errno.h>
#include <time.h> /* linux/errqueue.h needs struct timespec */
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/quic.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

/* Datagrams (or GRO segments) at most this long are handled first. */
#define RX_SMALL_BYTES 1024
#define TX_WAIT_MAX_NS (200ull * 1000000ull)
#define TX_NOBUFS_RETRY_NS (500ull * 1000ull)
/* A send failing with an ICMP error is tried this many more times; after
 * that the error is the datagram's own. */
#define TX_STALE_ERR_RETRIES 4

static void set_buf(int fd, int opt_force, int opt, int bytes) {
  /* FORCE variants pass net.core.[rw]mem_max when we run as root. */
  if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
    setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

/* A worker endpoint uses its context's validated parameters; the seed has
 * none and reads the same variables (defaults where one is invalid). */
static const nexar__params_t *ep_params(const nexar__ep_t *ep,
                                        nexar__params_t *tmp) {
  if (ep->prm) return ep->prm;
  char err[256];
  (void)nexar__params_load(tmp, NULL, err, sizeof(err));
  return tmp;
}

/* A non-blocking UDP socket bound to |addr| with the buffers of |p|;
 * its descriptor, or -1 (errno set). */
static int sock_open(const struct sockaddr_storage *addr, socklen_t len,
                     const nexar__params_t *p) {
  int fd =
      socket(addr->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int bytes = (int)p->sockbuf_bytes;
  set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, bytes);
  set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, bytes);
  if (bind(fd, (const struct sockaddr *)addr, len) < 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

int nexar__udp_open(nexar__ep_t *ep, const struct sockaddr_storage *addr,
                    socklen_t len) {
  nexar__params_t tmp;
  const nexar__params_t *p = ep_params(ep, &tmp);
  int fd = sock_open(addr, len, p);
  if (fd < 0) return NEXAR_ERR_SYS;
  int got = 0;
  socklen_t gl = sizeof(got);
  ep->rcvbuf_bytes = (size_t)p->sockbuf_bytes;
  if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &gl) == 0 && got > 0)
    ep->rcvbuf_bytes = (size_t)got;
  ep->local_len = sizeof(ep->local);
  getsockname(fd, (struct sockaddr *)&ep->local, &ep->local_len);
  nexar__addr_str((struct sockaddr *)&ep->local, ep->local_str,
                  sizeof(ep->local_str));
  int on = 1;
  if (addr->ss_family == AF_INET6)
    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVERR, &on, sizeof(on));
  else
    setsockopt(fd, IPPROTO_IP, IP_RECVERR, &on, sizeof(on));
  ep->gso = p->gso != 0;
  ep->gro = p->gro < 0 ? ep->gso : p->gro != 0;
  if (ep->gro) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) < 0)
      ep->gro = false;
  }
  ep->rx_batch = (int)p->rx_batch;
  if (ep->rx_batch < 1 || ep->rx_batch > NEXAR__RX_BATCH)
    ep->rx_batch = NEXAR__RX_BATCH;
  ep->data_inflight = p->data_inflight_bytes;
  ep->data_inflight_rpc = p->data_inflight_rpc_bytes;
  ep->linger_ns = (uint64_t)p->progress_linger_us * 1000u;
  ep->spin_ns = (uint64_t)p->spin_us * 1000u;
  ep->fd = fd;
  int rc = nexar__loss_open(ep);
  if (rc < 0) {
    close(fd);
    ep->fd = -1;
  }
  return rc;
}

int nexar__udp_open_more(nexar__ep_t *ep, struct sockaddr_storage *local,
                         socklen_t *local_len) {
  nexar__params_t tmp;
  const nexar__params_t *p = ep_params(ep, &tmp);
  struct sockaddr_storage a = ep->local;
  if (a.ss_family == AF_INET6)
    ((struct sockaddr_in6 *)&a)->sin6_port = 0;
  else
    ((struct sockaddr_in *)&a)->sin_port = 0;
  int fd = sock_open(&a, ep->local_len, p);
  if (fd < 0) return NEXAR_ERR_SYS;
  if (ep->gro) {
    int one = 1;
    setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one));
  }
  *local_len = sizeof(*local);
  getsockname(fd, (struct sockaddr *)local, local_len);
  return fd;
}

/* Errors a send or receive call reports for an earlier datagram's ICMP
 * error (IP_RECVERR), or the call's own (no route). */
static bool unreach_errno(int e) {
  return e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH ||
         e == EHOSTDOWN;
}

/* Reads the socket's error queue: each ICMP destination-unreachable report
 * is passed to ops->on_unreachable with the address it was sent to and its
 * errno (ECONNREFUSED for "port unreachable"). */
static void drain_errors(nexar__ep_t *ep) {
  ep->errq = false;
  for (int i = 0; i < 64; i++) {
    struct sockaddr_storage to;
    uint8_t data[64];
    union {
      char buf[512];
      struct cmsghdr align;
    } u;
    struct iovec iov = {data, sizeof(data)};
    struct msghdr mh = {0};
    mh.msg_name = &to;
    mh.msg_namelen = sizeof(to);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = u.buf;
    mh.msg_controllen = sizeof(u.buf);
    if (recvmsg(ep->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm;
         cm = CMSG_NXTHDR(&mh, cm)) {
      bool v4 = cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_RECVERR;
      bool v6 = cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_RECVERR;
      if (!v4 && !v6) continue;
      struct sock_extended_err ee;
      memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
      /* ICMP type 3 / ICMPv6 type 1: destination unreachable. */
      bool unreach = v4 ? ee.ee_origin == SO_EE_ORIGIN_ICMP && ee.ee_type == 3
                        : ee.ee_origin == SO_EE_ORIGIN_ICMP6 && ee.ee_type == 1;
      if (unreach && ee.ee_errno && ep->ops->on_unreachable)
        ep->ops->on_unreachable(ep, &to, (int)ee.ee_errno);
    }
  }
}

/* Sends bytes [*off, len) of |data|, datagrams of |segsize| bytes (the last
 * may be shorter), advancing *off. Returns 0; -EAGAIN or -ENOBUFS when the
 * socket is full; or -errno of a send error, the rest of the bytes being
 * dropped (*off = len). */
static int send_from(nexar__ep_t *ep, int fd, const struct sockaddr_storage *to,
                     socklen_t tolen, const uint8_t *data, size_t *off,
                     size_t len, size_t segsize) {
  int stale = 0; /* sends retried after an ICMP error */
  while (*off < len) {
    size_t chunk = len - *off;
    struct iovec iov = {(void *)(data + *off), chunk};
    union {
      char buf[CMSG_SPACE(sizeof(uint16_t))];
      struct cmsghdr align;
    } u;
    struct msghdr mh = {0};
    mh.msg_name = (void *)to;
    mh.msg_namelen = tolen;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (ep->gso && chunk > segsize) {
      memset(&u, 0, sizeof(u));
      mh.msg_control = u.buf;
      mh.msg_controllen = sizeof(u.buf);
      struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
      cm->cmsg_level = IPPROTO_UDP;
      cm->cmsg_type = UDP_SEGMENT;
      cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      uint16_t seg = (uint16_t)segsize;
      memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
    } else if (chunk > segsize) {
      chunk = segsize;
      iov.iov_len = chunk;
    }
    ssize_t r = sendmsg(fd, &mh, 0);
    if (r < 0) {
      int e = errno;
      if (e == EINTR) continue;
      if (unreach_errno(e)) ep->errq = true;
      if (unreach_errno(e) && stale++ < TX_STALE_ERR_RETRIES) {
        /* Perhaps an earlier datagram's ICMP error, reported once: read
         * the queue later, send this one again now. */
        continue;
      }
      if (e == EAGAIN || e == EWOULDBLOCK) return -EAGAIN;
      if (e == ENOBUFS) return -ENOBUFS;
      if (ep->gso && (e == EIO || e == EINVAL) && chunk > segsize) {
        /* No GSO on this path: fall back to one datagram per call. */
        ep->gso = false;
        continue;
      }
      /* This send's own error: the datagrams are lost. */
      *off = len;
      return e > 0 ? -e : -EIO;
    }
    *off += chunk;
  }
  return 0;
}

static void set_pollout(nexar__ep_t *ep, bool on) {
  if (ep->tx_pollout == on || ep->epfd < 0) return;
  struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0u),
                           .data.fd = ep->fd};
  if (epoll_ctl(ep->epfd, EPOLL_CTL_MOD, ep->fd, &ev) == 0) ep->tx_pollout = on;
}

/* The socket refused the rest of a batch with |why| (-EAGAIN/-ENOBUFS). */
static void defer(nexar__ep_t *ep, int why, uint64_t now) {
  if (why == -EAGAIN) {
    ep->tx_retry_at = 0;
    set_pollout(ep, true);
  } else {
    /* ENOBUFS is not signalled by EPOLLOUT: poll again shortly. */
    ep->tx_retry_at = now + TX_NOBUFS_RETRY_NS;
    set_pollout(ep, false);
  }
}

/* Sends |len| bytes made of datagrams of |segsize| bytes (the last may be
 * shorter). Returns 0 when sent, 1 when the socket is full, or -errno when
 * the send failed and the datagrams were dropped (as lost). When the socket
 * is full and |data| is the endpoint's txbuf, the unsent rest stays there
 * for nexar__udp_resume and tx_blocked is set (the caller writes nothing
 * more until it clears); other data (a CONNECTION_CLOSE) is dropped. */
int nexar__udp_send(nexar__ep_t *ep, const struct sockaddr_storage *to,
                    socklen_t tolen, const uint8_t *data, size_t len,
                    size_t segsize) {
  if (ep->loss) return nexar__loss_send(ep, to, tolen, data, len, segsize);
  size_t off = 0;
  int rc = send_from(ep, ep->fd, to, tolen, data, &off, len, segsize);
  if (rc == 0 || (rc != -EAGAIN && rc != -ENOBUFS)) return rc;
  if (data != ep->txbuf) return 1;
  uint64_t now = nexar__now();
  ep->tx_blocked = true;
  ep->tx_off = off;
  ep->tx_len = len;
  ep->tx_seg = segsize;
  memcpy(&ep->tx_to, to, tolen);
  ep->tx_tolen = tolen;
  ep->tx_since = now;
  defer(ep, rc, now);
  return 1;
}

int nexar__udp_resume(nexar__ep_t *ep) {
  if (!ep->tx_blocked) return 0;
  uint64_t now = nexar__now();
  if (ep->tx_retry_at && now < ep->tx_retry_at) return 1;
  int rc = send_from(ep, ep->fd, &ep->tx_to, ep->tx_tolen, ep->txbuf,
                     &ep->tx_off, ep->tx_len, ep->tx_seg);
  if ((rc == -EAGAIN || rc == -ENOBUFS) &&
      now - ep->tx_since < TX_WAIT_MAX_NS) {
    defer(ep, rc, now);
    return 1;
  }
  if (rc == -EAGAIN || rc == -ENOBUFS) {
    char to[64];
    nexar__addr_str((const struct sockaddr *)&ep->tx_to, to, sizeof(to));
    NEXAR__WARN(NEXAR__SUB_NET,
                "rank %d (%s): UDP socket full for %llu ms, dropping %zu "
                "bytes to %s (QUIC retransmits them)",
                ep->local_rank, ep->local_str,
                (unsigned long long)((now - ep->tx_since) / 1000000ull),
                ep->tx_len - ep->tx_off, to);
    rc = 0;
  }
  ep->tx_blocked = false;
  ep->tx_retry_at = 0;
  set_pollout(ep, false);
  return rc;
}

/* A socket to read: its descriptor, |batch| receive buffers of
 * NEXAR__RX_BUF bytes at |buf|, about |budget| bytes per call; |between|,
 * when set, runs between its recvmmsg calls (another socket's turn). */
typedef struct rx_sock {
  int fd;
  uint8_t *buf;
  int batch;
  size_t budget;
  void (*between)(nexar__ep_t *ep);
  size_t bytes; /* out: bytes read */
  bool more;    /* out: stopped at the budget with more to read */
} rx_sock_t;

/* Reads datagrams from |s|: at most s->batch per recvmmsg call and about
 * s->budget bytes in all; GRO batches are split by segment size and small
 * datagrams go to |fn| before large ones of the same batch. Returns the
 * number of datagrams, or NEXAR_ERR_SYS. */
static int recv_sock(nexar__ep_t *ep, rx_sock_t *s, nexar__udp_rx_fn fn) {
  struct mmsghdr msgs[NEXAR__RX_BATCH];
  struct iovec iovs[NEXAR__RX_BATCH];
  struct sockaddr_storage from[NEXAR__RX_BATCH];
  size_t segs[NEXAR__RX_BATCH];
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl[NEXAR__RX_BATCH];
  int total = 0;
  size_t bytes = 0, largest = NEXAR__RX_BUF;
  s->more = false;
  for (int rounds = 0; rounds < 16; rounds++) {
    if (bytes >= s->budget) {
      s->more = true;
      break;
    }
    if (rounds && s->between) s->between(ep);
    /* Size the call so that a batch of datagrams as large as the largest
     * seen so far stays within the pass budget (at least one). */
    size_t fit = (s->budget - bytes) / largest;
    int vlen = s->batch;
    if (fit < (size_t)vlen) vlen = fit ? (int)fit : 1;
    if (vlen < 1 || vlen > NEXAR__RX_BATCH) vlen = 1;
    for (int i = 0; i < vlen; i++) {
      iovs[i].iov_base = s->buf + (size_t)i * NEXAR__RX_BUF;
      iovs[i].iov_len = NEXAR__RX_BUF;
      memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = ctl[i].buf;
      msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
    }
    int n = recvmmsg(s->fd, msgs, (unsigned)vlen, 0, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (unreach_errno(errno)) {
        ep->errq = true;
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return NEXAR_ERR_SYS;
    }
    if (n > vlen) n = vlen; /* never: recvmmsg fills at most vlen */
    largest = 1;
    for (int i = 0; i < n; i++) {
      size_t len = msgs[i].msg_len;
      size_t seg = len;
      struct msghdr *mh = &msgs[i].msg_hdr;
      for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm;
           cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level == IPPROTO_UDP && cm->cmsg_type == UDP_GRO) {
          int sz;
          memcpy(&sz, CMSG_DATA(cm), sizeof(sz));
          if (sz > 0) seg = (size_t)sz;
        }
      }
      segs[i] = seg ? seg : 1;
      bytes += len;
      if (len > largest) largest = len;
    }
    /* Pass 0 hands on the small datagrams, pass 1 the rest. Reordering
     * within a batch is harmless to QUIC and lets control messages and
     * ACKs overtake the bulk data received with them. */
    for (int pass = 0; pass < 2; pass++) {
      for (int i = 0; i < n; i++) {
        if ((segs[i] <= RX_SMALL_BYTES) != (pass == 0)) continue;
        size_t len = msgs[i].msg_len, seg = segs[i];
        const uint8_t *p = iovs[i].iov_base;
        for (size_t off = 0; off < len; off += seg) {
          size_t l = len - off < seg ? len - off : seg;
          fn(ep, p + off, l, &from[i], msgs[i].msg_hdr.msg_namelen);
          total++;
        }
      }
    }
    if (n < vlen) break;
    if (rounds == 15) s->more = true;
  }
  s->bytes = bytes;
  return total;
}

int nexar__udp_recv_all(nexar__ep_t *ep, nexar__udp_rx_fn fn,
                        void (*between)(nexar__ep_t *ep)) {
  rx_sock_t s = {.fd = ep->fd,
                 .buf = ep->rxbuf,
                 .batch = ep->rx_batch,
                 .budget = ep->slice,
                 .between = between};
  int total = recv_sock(ep, &s, fn);
  ep->rx_more = s.more;
  ep->rx_pass_bytes = s.bytes;
  if (ep->errq) {
    ep->check_run(ep); /* a pause: the reports are only recorded */
    drain_errors(ep);
  }
  return total;
}

int nexar__udp_recv_fd(nexar__ep_t *ep, int fd, uint8_t *buf, int batch,
                       size_t budget, nexar__udp_rx_fn fn) {
  rx_sock_t s = {.fd = fd, .buf = buf, .batch = batch, .budget = budget};
  return recv_sock(ep, &s, fn);
}

int nexar__udp_send_fd(nexar__ep_t *ep, int fd,
                       const struct sockaddr_storage *to, socklen_t tolen,
                       const uint8_t *data, size_t len, size_t segsize) {
  size_t off = 0;
  int rc = send_from(ep, fd, to, tolen, data, &off, len, segsize);
  return rc == -EAGAIN || rc == -ENOBUFS ? 0 : rc;
}
