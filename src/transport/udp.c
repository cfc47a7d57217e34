/*
 * The process's one UDP socket: large buffers, GSO on send (one sendmsg for
 * up to 64 equal-sized datagrams), GRO and recvmmsg on receive. Every
 * connection of the endpoint shares it.
 */
#include <errno.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <unistd.h>

#include "nexar_int.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif


static void set_buf(int fd, int opt_force, int opt, int bytes) {
  /* FORCE variants pass net.core.[rw]mem_max when we run as root. */
  if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
    setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

int nexar__udp_open(nexar__ep_t *ep, const struct sockaddr_storage *addr,
                    socklen_t len) {
  int fd = socket(addr->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  0);
  if (fd < 0) return NEXAR_ERR_SYS;
  int bytes = 8 << 20;
  const char *e = getenv("NEXAR_SOCKBUF_BYTES");
  if (e && atoi(e) > 0) bytes = atoi(e);
  set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, bytes);
  set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, bytes);
  if (bind(fd, (const struct sockaddr *)addr, len) < 0) {
    int err = errno;
    close(fd);
    errno = err;
    return NEXAR_ERR_SYS;
  }
  ep->local_len = sizeof(ep->local);
  getsockname(fd, (struct sockaddr *)&ep->local, &ep->local_len);
  nexar__addr_str((struct sockaddr *)&ep->local, ep->local_str,
                  sizeof(ep->local_str));
  const char *g = getenv("NEXAR_GSO");
  ep->gso = !(g && g[0] == '0');
  if (ep->gso) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) < 0)
      ep->gso = false;
  }
  ep->fd = fd;
  return 0;
}

/* Sends |len| bytes made of datagrams of |segsize| bytes (the last may be
 * shorter). Returns 0, NEXAR_ERR_INPROGRESS-like 1 when the socket is full
 * (caller keeps the packets), or NEXAR_ERR_SYS. */
int nexar__udp_send(nexar__ep_t *ep, const struct sockaddr_storage *to,
                    socklen_t tolen, const uint8_t *data, size_t len,
                    size_t segsize) {
  size_t off = 0;
  while (off < len) {
    size_t chunk = len - off;
    struct iovec iov = {(void *)(data + off), chunk};
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
    ssize_t r = sendmsg(ep->fd, &mh, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
        return 1;
      if (ep->gso && (errno == EIO || errno == EINVAL) && chunk > segsize) {
        /* No GSO on this path: fall back to one datagram per call. */
        ep->gso = false;
        continue;
      }
      return NEXAR_ERR_SYS;
    }
    off += chunk;
  }
  return 0;
}

/* Drains the socket: every datagram (GRO batches split by segment size) is
 * handed to |fn|. Returns the number of datagrams, or NEXAR_ERR_SYS. */
int nexar__udp_recv_all(nexar__ep_t *ep, nexar__udp_rx_fn fn) {
  struct mmsghdr msgs[NEXAR__RX_BATCH];
  struct iovec iovs[NEXAR__RX_BATCH];
  struct sockaddr_storage from[NEXAR__RX_BATCH];
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl[NEXAR__RX_BATCH];
  int total = 0;
  for (int rounds = 0; rounds < 16; rounds++) {
    for (int i = 0; i < NEXAR__RX_BATCH; i++) {
      iovs[i].iov_base = ep->rxbuf + (size_t)i * NEXAR__RX_BUF;
      iovs[i].iov_len = NEXAR__RX_BUF;
      memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = ctl[i].buf;
      msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
    }
    int n = recvmmsg(ep->fd, msgs, NEXAR__RX_BATCH, 0, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return NEXAR_ERR_SYS;
    }
    for (int i = 0; i < n; i++) {
      size_t len = msgs[i].msg_len;
      size_t seg = len;
      struct msghdr *mh = &msgs[i].msg_hdr;
      for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm;
           cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level == IPPROTO_UDP && cm->cmsg_type == UDP_GRO) {
          int s;
          memcpy(&s, CMSG_DATA(cm), sizeof(s));
          if (s > 0) seg = (size_t)s;
        }
      }
      const uint8_t *p = iovs[i].iov_base;
      for (size_t off = 0; off < len; off += seg) {
        size_t l = len - off < seg ? len - off : seg;
        fn(ep, p + off, l, &from[i], mh->msg_namelen);
        total++;
      }
    }
    if (n < NEXAR__RX_BATCH) break;
  }
  return total;
}
