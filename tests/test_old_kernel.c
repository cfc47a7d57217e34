/*
 * A kernel without epoll_pwait2 (Linux before 5.11, e.g. RHEL 8's 4.18; and
 * valgrind 3.19): a seccomp filter makes that system call fail with ENOSYS
 * in this process and the seed and workers it forks. A job of 3 must still
 * form and run p2p and an allreduce, bit-exact, over shared memory and over
 * QUIC. Before the engine fell back to epoll_wait, its progress thread
 * ended at the first ENOSYS and bootstrap waited for it until the deadline.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

#ifndef __NR_epoll_pwait2
#define __NR_epoll_pwait2 441
#endif

/* epoll_pwait2 → ENOSYS; every other call is allowed. */
static int deny_epoll_pwait2(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_epoll_pwait2, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  /* A ring of p2p messages, then an allreduce of exact values. */
  int64_t out[64], in[64];
  for (int i = 0; i < 64; i++) out[i] = nt_ival(r, i);
  NT_OKC(w, nexar_send(w, out, 64, NEXAR_INT64, (r + 1) % n, 3));
  NT_OKC(w, nexar_recv(w, in, 64, NEXAR_INT64, (r + n - 1) % n, 3, NULL));
  for (int i = 0; i < 64; i++)
    NT_CHECKF(in[i] == nt_ival((r + n - 1) % n, i), "ring element %d", i);
  NT_OKC(w, nexar_allreduce(w, out, in, 64, NEXAR_INT64, NEXAR_SUM));
  for (int i = 0; i < 64; i++) {
    int64_t want = 0;
    for (int k = 0; k < n; k++) want += nt_ival(k, i);
    NT_CHECKF(in[i] == want, "allreduce element %d", i);
  }
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (deny_epoll_pwait2() != 0) {
    printf("SKIP: seccomp not permitted here: %s\n", strerror(errno));
    return 77;
  }
  errno = 0;
  if (syscall(__NR_epoll_pwait2, -1, NULL, 0, NULL, NULL, 0) != -1 ||
      errno != ENOSYS) {
    printf("FAIL: the filter did not take effect\n");
    return 1;
  }
  int rc = 0;
  const char *envs[] = {"NEXAR_TRANSPORT=shm", "NEXAR_TRANSPORT=quic"};
  for (int i = 0; i < 2; i++) {
    nt_opts_t o = {.world_size = 3, .timeout_ms = 60000, .env = envs[i]};
    int k = nt_run(&o, worker, NULL);
    printf("%s no_epoll_pwait2 %s world=3\n", k ? "FAIL" : "ok", envs[i]);
    rc |= k;
  }
  return rc ? 1 : 0;
}
