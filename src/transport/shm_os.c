/*
 * Operating-system pieces of the shared-memory transport (shm_ring.h):
 * abstract AF_UNIX SOCK_SEQPACKET sockets named from a nonce, descriptor
 * passing with SCM_RIGHTS and the peer's SO_PEERCRED credentials,
 * cross-memory attach (process_vm_readv) and pidfds. Everything is
 * non-blocking and bounded; a descriptor received in a message that is
 * refused is closed before returning.
 */
#include "transport/shm_ring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define NAME_PREFIX "nexar-shm-"
#define MSG_MAX 65536u
#define EINTR_TRIES 16         /* interrupted calls retried, at most */
#define CMA_CHUNK (1ull << 30) /* bytes per process_vm_readv */
#define CMA_PASSES_EXTRA 16    /* partial reads beyond one per chunk */

/* The abstract address "\0nexar-shm-<32 hex digits>"; returns its length. */
static socklen_t nonce_addr(const uint8_t nonce[16], struct sockaddr_un *a) {
  static const char hex[] = "0123456789abcdef";
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  char *p = a->sun_path + 1; /* sun_path[0] = 0: abstract namespace */
  memcpy(p, NAME_PREFIX, sizeof NAME_PREFIX - 1);
  p += sizeof NAME_PREFIX - 1;
  for (unsigned i = 0; i < NEXAR__SHM_NONCE_BYTES; i++) {
    *p++ = hex[nonce[i] >> 4];
    *p++ = hex[nonce[i] & 15];
  }
  return (socklen_t)(p - (char *)a);
}

static int seqpacket(void) {
  return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

int nexar__shm_listen(const uint8_t nonce[16], int *fd) {
  if (!nonce || !fd) return NEXAR_ERR_INVALID_ARG;
  *fd = -1;
  struct sockaddr_un a;
  socklen_t alen = nonce_addr(nonce, &a);
  int rc = NEXAR_ERR_SYS;
  int s = seqpacket();
  if (s < 0) return NEXAR_ERR_SYS;
  if (bind(s, (struct sockaddr *)&a, alen) != 0) {
    if (errno == EADDRINUSE) rc = NEXAR_ERR_TRANSPORT;
    goto fail;
  }
  /* Every rank of the host may dial at once (the kernel caps SOMAXCONN
   * at net.core.somaxconn). */
  if (listen(s, SOMAXCONN) != 0) goto fail;
  *fd = s;
  return 0;
fail:
  close(s);
  return rc;
}

int nexar__shm_accept(int lfd, int *fd) {
  if (lfd < 0 || !fd) return NEXAR_ERR_INVALID_ARG;
  *fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (*fd >= 0) return 0;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
      errno == ECONNABORTED)
    return NEXAR__SHM_AGAIN;
  return NEXAR_ERR_SYS;
}

int nexar__shm_connect(const uint8_t nonce[16], int *fd) {
  if (!nonce || !fd) return NEXAR_ERR_INVALID_ARG;
  *fd = -1;
  struct sockaddr_un a;
  socklen_t alen = nonce_addr(nonce, &a);
  int s = seqpacket();
  if (s < 0) return NEXAR_ERR_SYS;
  if (connect(s, (struct sockaddr *)&a, alen) == 0) {
    *fd = s;
    return 0;
  }
  int e = errno;
  close(s);
  if (e == EAGAIN || e == EINTR) return NEXAR__SHM_AGAIN;
  if (e == ECONNREFUSED || e == ENOENT) return NEXAR_ERR_PEER_FAILED;
  return NEXAR_ERR_SYS;
}

int nexar__shm_peer_cred(int sock, nexar__shm_cred_t *cred) {
  struct ucred uc;
  socklen_t n = sizeof uc;
  if (!cred) return NEXAR_ERR_INVALID_ARG;
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &n) != 0 || n != sizeof uc)
    return NEXAR_ERR_SYS;
  *cred = (nexar__shm_cred_t){.pid = uc.pid, .uid = uc.uid, .gid = uc.gid};
  return 0;
}

/* Control space for NEXAR__SHM_MAX_FDS descriptors, aligned for cmsghdr. */
typedef union {
  char buf[CMSG_SPACE(sizeof(int) * NEXAR__SHM_MAX_FDS)];
  struct cmsghdr align;
} fd_ctl_t;

/* A socket error as a result: the peer gone, "not now", or the system's. */
static int sock_err(int e) {
  if (e == EAGAIN || e == EWOULDBLOCK) return NEXAR__SHM_AGAIN;
  if (e == EPIPE || e == ECONNRESET || e == ENOTCONN)
    return NEXAR_ERR_PEER_FAILED;
  return NEXAR_ERR_SYS;
}

int nexar__shm_send_fds(int sock, const int *fds, int nfds, const void *msg,
                        size_t len) {
  if (sock < 0 || nfds < 0 || nfds > NEXAR__SHM_MAX_FDS || (nfds > 0 && !fds) ||
      !msg || len == 0 || len > MSG_MAX)
    return NEXAR_ERR_INVALID_ARG;
  fd_ctl_t ctl;
  memset(&ctl, 0, sizeof ctl);
  struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds > 0) {
    m.msg_control = ctl.buf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
  }
  for (int i = 0; i < EINTR_TRIES; i++) {
    ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == (ssize_t)len) return 0;
    if (n >= 0) return NEXAR_ERR_SYS; /* a seqpacket send is all or none */
    if (errno != EINTR) return sock_err(errno);
  }
  return NEXAR__SHM_AGAIN;
}

/* Collects the SCM_RIGHTS descriptors of |m| into |got| (at most
 * NEXAR__SHM_MAX_FDS, the control buffer's room) and their count into |n|;
 * returns 1 when there was control data of another kind too. */
static int collect_fds(struct msghdr *m, int *got, int *n) {
  int bad = 0;
  *n = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len < CMSG_LEN(0)) {
      bad = 1;
      continue;
    }
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k && *n < NEXAR__SHM_MAX_FDS; i++)
      memcpy(&got[(*n)++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  return bad;
}

int nexar__shm_recv_fds(int sock, int *fds, int max_fds, int *nfds, void *msg,
                        size_t cap, nexar__shm_cred_t *cred) {
  if (sock < 0 || max_fds < 0 || max_fds > NEXAR__SHM_MAX_FDS ||
      (max_fds > 0 && !fds) || !nfds || !msg || cap == 0 || !cred)
    return NEXAR_ERR_INVALID_ARG;
  *nfds = 0;
  fd_ctl_t ctl;
  int got[NEXAR__SHM_MAX_FDS];
  int ngot = 0, rc;
  ssize_t n = -1;
  struct iovec iov = {.iov_base = msg, .iov_len = cap};
  struct msghdr m = {.msg_iov = &iov,
                     .msg_iovlen = 1,
                     .msg_control = ctl.buf,
                     .msg_controllen = sizeof ctl.buf};
  for (int i = 0; i < EINTR_TRIES && n < 0; i++) {
    n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && errno != EINTR) return sock_err(errno);
  }
  if (n < 0) return NEXAR__SHM_AGAIN;
  rc = NEXAR_ERR_PROTO;
  if (collect_fds(&m, got, &ngot)) goto fail;
  if (n == 0 && ngot == 0) return NEXAR_ERR_PEER_FAILED; /* closed */
  if ((m.msg_flags & MSG_CTRUNC) || ngot > max_fds) goto fail;
  rc = NEXAR_ERR_TRUNCATE;
  if (m.msg_flags & MSG_TRUNC) goto fail;
  rc = nexar__shm_peer_cred(sock, cred);
  if (rc != 0) goto fail;
  if (ngot > 0) memcpy(fds, got, sizeof(int) * (size_t)ngot);
  *nfds = ngot;
  return (int)n;
fail:
  for (int i = 0; i < ngot; i++) close(got[i]);
  return rc;
}

/* A process_vm_readv errno as a result. */
static int cma_err(int e) {
  switch (e) {
    case EPERM:
    case EACCES:
    case ENOSYS:
      return NEXAR_ERR_UNSUPPORTED;
    case ESRCH:
      return NEXAR_ERR_PEER_FAILED;
    case EFAULT:
      return NEXAR_ERR_PROTO;
    case ENOMEM:
      return NEXAR_ERR_NOMEM;
    default:
      return NEXAR_ERR_SYS;
  }
}

int nexar__shm_cma_read(pid_t pid, void *dst, uint64_t remote_addr,
                        size_t len) {
  if (pid <= 0 || (!dst && len)) return NEXAR_ERR_INVALID_ARG;
  if (remote_addr + len < remote_addr) return NEXAR_ERR_PROTO;
  size_t done = 0;
  int passes = (int)(len / CMA_CHUNK) + CMA_PASSES_EXTRA;
  for (int i = 0; done < len; i++) {
    if (i == passes) return NEXAR_ERR_PROTO; /* no end of partial reads */
    size_t want = len - done < CMA_CHUNK ? len - done : CMA_CHUNK;
    struct iovec l = {.iov_base = (char *)dst + done, .iov_len = want};
    struct iovec r = {.iov_base = (void *)(uintptr_t)(remote_addr + done),
                      .iov_len = want};
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return cma_err(errno);
    if (n == 0) return NEXAR_ERR_PROTO;
    done += (size_t)n;
  }
  return 0;
}

int nexar__shm_cma_probe(pid_t pid) {
  if (pid <= 0) return NEXAR_ERR_INVALID_ARG;
  char c;
  struct iovec l = {.iov_base = &c, .iov_len = 1};
  struct iovec r = {.iov_base = NULL, .iov_len = 1};
  for (int i = 0; i < EINTR_TRIES; i++) {
    if (process_vm_readv(pid, &l, 1, &r, 1, 0) >= 0) return 0;
    if (errno == EFAULT) return 0; /* permitted; address 0 is unmapped */
    if (errno != EINTR) return cma_err(errno);
  }
  return NEXAR_ERR_SYS;
}

/* The state letter of the stat file at |path| ('?' when unreadable): the
 * field after the command, which is in parentheses and may hold any byte. */
static char task_state(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return '?';
  char b[512];
  ssize_t n = read(fd, b, sizeof(b) - 1);
  close(fd);
  if (n <= 0) return '?';
  b[n] = 0;
  const char *p = strrchr(b, ')');
  return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

bool nexar__shm_pid_runnable(pid_t pid) {
  if (pid <= 0) return false;
  char dir[64];
  snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  if (!d) return false;
  bool runs = false;
  struct dirent *e;
  for (int i = 0; !runs && i < NEXAR__SHM_TASKS_MAX && (e = readdir(d)); i++) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[128];
    snprintf(path, sizeof(path), "%s/%.16s/stat", dir, e->d_name);
    runs = task_state(path) == 'R';
  }
  closedir(d);
  return runs;
}

int nexar__shm_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}
