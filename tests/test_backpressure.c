/*
 * Send back-pressure: when the UDP socket refuses a batch (EAGAIN or
 * ENOBUFS) the endpoint keeps the packets and sends them once the socket
 * takes them again (EPOLLOUT, or a short pause for ENOBUFS), instead of
 * dropping them and leaving QUIC to retransmit.
 *
 * The library is linked statically, so its sendmsg calls resolve to the
 * sendmsg defined below, which fails every FAIL_EVERY-th UDP send with the
 * chosen error. Loopback never refuses a send by itself (the kernel hands
 * the packet to the receiver at once), hence the injection. Rank 0 sends
 * 64 MiB to rank 1 while sends are refused on both ranks. The data must
 * arrive intact; the send after each refusal must offer the very same
 * bytes (the kept batch; a dropped batch would be followed by a new packet,
 * its data going out again later under a new packet number); and an
 * ENOBUFS retry must wait its pause rather than spin.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

#define BIG ((size_t)64 << 20)
#define FAIL_EVERY 5

/* Injection state of this (worker) process. Only the progress thread
 * sends; the atomics keep the user thread's reads well defined. */
static _Atomic int inject_errno; /* 0: off */
static _Atomic long n_calls, n_injected, n_same, n_other;
static _Atomic long long t_injected_ns, min_retry_gap_ns = -1;
/* The refused datagram batch (its start and length), for comparison. */
static uint8_t refused[256];
static size_t refused_len, refused_cmp;

static long long now_ns(void) {
  return (long long)(nt_now_ms() * 1e6);
}

static int is_udp(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
         type == SOCK_DGRAM;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  int e = atomic_load(&inject_errno);
  if (e && is_udp(fd) && msg->msg_iovlen == 1) {
    const uint8_t *p = msg->msg_iov[0].iov_base;
    size_t len = msg->msg_iov[0].iov_len;
    long k = atomic_fetch_add(&n_calls, 1);
    long long t = now_ns(), ti = atomic_load(&t_injected_ns);
    if (ti) {
      /* The first send after a refusal: the kept batch, retried? */
      long long gap = t - ti, m = atomic_load(&min_retry_gap_ns);
      if (m < 0 || gap < m) atomic_store(&min_retry_gap_ns, gap);
      atomic_store(&t_injected_ns, 0);
      bool same = len == refused_len && memcmp(p, refused, refused_cmp) == 0;
      atomic_fetch_add(same ? &n_same : &n_other, 1);
    }
    if (k % FAIL_EVERY == FAIL_EVERY - 1) {
      atomic_fetch_add(&n_injected, 1);
      refused_len = len;
      refused_cmp = len < sizeof refused ? len : sizeof refused;
      memcpy(refused, p, refused_cmp);
      atomic_store(&t_injected_ns, t);
      errno = e;
      return -1;
    }
  }
  return syscall(SYS_sendmsg, fd, msg, flags);
}

static inline uint8_t pat(size_t i) {
  return (uint8_t)(i * 131u + (i >> 8) * 7u + (i >> 20));
}

static int worker(int index, void *arg) {
  int err = *(const int *)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r;
  (void)index;
  NT_OK(nt_join_world(&ctx, &w, &r, NULL));
  uint8_t *b = malloc(BIG);
  NT_CHECK(b);
  for (size_t i = 0; i < BIG; i++) b[i] = r == 0 ? pat(i) : 0;
  NT_OKC(w, nexar_barrier(w));
  atomic_store(&inject_errno, err);
  double t0 = nt_now_ms();
  if (r == 0) NT_OKC(w, nexar_send(w, b, BIG, NEXAR_BYTE, 1, 7));
  if (r == 1) NT_OKC(w, nexar_recv(w, b, BIG, NEXAR_BYTE, 0, 7, NULL));
  NT_OKC(w, nexar_barrier(w));
  double el = nt_now_ms() - t0;
  atomic_store(&inject_errno, 0);
  long inj = atomic_load(&n_injected), same = atomic_load(&n_same),
       other = atomic_load(&n_other);
  long long gap = atomic_load(&min_retry_gap_ns);
  printf(
      "rank %d (%s every %d sends): %.0f ms, %ld sends refused, %ld "
      "retried as they were, %ld followed by other data; shortest retry "
      "%.3f ms\n",
      r, strerror(err), FAIL_EVERY, el, inj, same, other, gap / 1e6);
  fflush(stdout);
  NT_CHECKF(inj > 0, "no send was refused");
  if (r == 1)
    for (size_t i = 0; i < BIG; i++)
      NT_CHECKF(b[i] == pat(i), "mismatch at byte %zu", i);
  NT_CHECKF(other == 0 && same >= inj - 1,
            "%ld of %ld refused batches were not retried (dropped)", other,
            inj);
  /* ENOBUFS is retried after a 0.5 ms pause (not signalled by EPOLLOUT). */
  if (err == ENOBUFS)
    NT_CHECKF(gap >= 400000, "ENOBUFS retried after %lld ns", gap);
  free(b);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int fails = 0;
  /* The third case sends 1452-byte packets one datagram per call, so
   * refusals fall inside a batch and its rest must follow. */
  static const struct {
    int err;
    const char *env, *name;
  } cases[] = {
      {EAGAIN, NULL, "eagain"},
      {ENOBUFS, NULL, "enobufs"},
      {EAGAIN, "NEXAR_UDP_PAYLOAD=1452\nNEXAR_GSO=0\n", "eagain_in_batch"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    nt_opts_t o = {.world_size = 2, .timeout_ms = 60000, .env = cases[k].env};
    int err = cases[k].err;
    int rc = nt_run(&o, worker, &err);
    printf("%s send_refused_%s\n", rc ? "FAIL" : "ok", cases[k].name);
    fails += rc;
  }
  return fails ? 1 : 0;
}
