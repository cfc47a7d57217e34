/*
 * Host identity (docs/wire-protocol.md section 6.5): which processes share
 * a machine and a network namespace, learned through the seed's roster.
 *
 * The host key is the first 8 bytes of SHA-256 over the kernel's boot id
 * and the device and inode numbers of this process's network namespace:
 * processes of one boot in one namespace share it, and processes in
 * different namespaces (containers, `ip netns`) do not, since they cannot
 * reach each other's abstract Unix sockets. NEXAR_HOST_KEY overrides it
 * (tests, and containers that share a boot id and namespace inode numbers
 * across machines). The nonce is random per process; it will name the
 * process's shared-memory rendezvous.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/cluster.h"

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
#define NETNS_PATH "/proc/self/ns/net"

/* NEXAR_HOST_KEY: 1 to 16 hex digits, not all zero (0 means unknown). */
static int parse_key(const char *s, uint64_t *key) {
  size_t n = strlen(s);
  uint64_t v = 0;
  if (n < 1 || n > 16) return NEXAR_ERR_INVALID_ARG;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return NEXAR_ERR_INVALID_ARG;
    v = v << 4 | (uint64_t)d;
  }
  if (!v) return NEXAR_ERR_INVALID_ARG;
  *key = v;
  return 0;
}

/* The key of this boot and network namespace. */
static int host_key(uint64_t *key, char *err, size_t len) {
  char boot[64];
  struct stat st;
  int fd = open(BOOT_ID_PATH, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read(fd, boot, sizeof(boot));
  int e = errno;
  if (fd >= 0) close(fd);
  if (n <= 0) {
    snprintf(err, len, "cannot read %s: %s (set NEXAR_HOST_KEY)", BOOT_ID_PATH,
             n == 0 ? "empty" : strerror(e));
    return NEXAR_ERR_INTERNAL;
  }
  if (stat(NETNS_PATH, &st) != 0) {
    snprintf(err, len, "cannot stat %s: %s (set NEXAR_HOST_KEY)", NETNS_PATH,
             strerror(errno));
    return NEXAR_ERR_INTERNAL;
  }
  uint8_t in[sizeof(boot) + 16], md[32];
  uint64_t dev = (uint64_t)st.st_dev, ino = (uint64_t)st.st_ino;
  memcpy(in, boot, (size_t)n);
  nexar__put_u64(in + n, dev);
  nexar__put_u64(in + n + 8, ino);
  if (gnutls_hash_fast(GNUTLS_DIG_SHA256, in, (size_t)n + 16, md) < 0) {
    snprintf(err, len, "SHA-256 of the host identity failed");
    return NEXAR_ERR_INTERNAL;
  }
  *key = nexar__get_u64(md);
  if (!*key) *key = 1; /* 0 means unknown */
  return 0;
}

int nexar__host_id_init(nexar__host_id_t *h, const char *override, char *err,
                        size_t len) {
  memset(h, 0, sizeof(*h));
  if (override && parse_key(override, &h->key) < 0) {
    snprintf(err, len,
             "NEXAR_HOST_KEY='%.32s': expected 1 to 16 hexadecimal digits, "
             "not all zero",
             override);
    return NEXAR_ERR_INVALID_ARG;
  }
  int rc = override ? 0 : host_key(&h->key, err, len);
  if (rc < 0) return rc;
  h->pid = (uint32_t)getpid();
  if (gnutls_rnd(GNUTLS_RND_NONCE, h->nonce, sizeof(h->nonce)) < 0) {
    snprintf(err, len, "cannot draw the shared-memory nonce (gnutls_rnd)");
    return NEXAR_ERR_INTERNAL;
  }
  return 0;
}

/* Descriptors a shared-memory link holds (its socket, two eventfds, the
 * segment's memfd), and a margin for the rest of the process. */
#define FDS_PER_SHM_LINK 4
#define FDS_SPARE 128

/* Raises RLIMIT_NOFILE's soft limit (never above the hard one) so that
 * this process can hold a link to each of the |here| - 1 other ranks on
 * its host; warns when the hard limit is too low for that. */
static void fd_budget(nexar_ctx_t *ctx, int here) {
  rlim_t need =
      (rlim_t)(here > 1 ? here - 1 : 0) * FDS_PER_SHM_LINK + FDS_SPARE;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need) return;
  bool room = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need;
  rl.rlim_cur = room ? need : rl.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &rl);
  if (!room)
    NEXAR__WARN(NEXAR__SUB_INIT,
                "rank %d: %d ranks share this host; links to all of them need "
                "about %llu descriptors, and RLIMIT_NOFILE's hard limit is "
                "%llu: the links beyond it fail (raise it with ulimit -n, or "
                "use a sparse NEXAR_TOPOLOGY)",
                ctx->rank, here, (unsigned long long)need,
                (unsigned long long)rl.rlim_max);
}

/* The |index|-th CPU (from 0) of |set|, or -1. */
static int nth_cpu(const cpu_set_t *set, int index) {
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, set) && index-- == 0) return cpu;
  return -1;
}

void nexar__host_pace(nexar_ctx_t *ctx) {
  int here = 0, below = 0;
  for (int id = 0; ctx->roster && id < ctx->world; id++) {
    bool local = ctx->host.key && ctx->roster[id].host.key == ctx->host.key &&
                 !(ctx->dead && ctx->dead[id]);
    here += local;
    below += local && id < ctx->rank;
  }
  cpu_set_t set;
  bool known = sched_getaffinity(0, sizeof(set), &set) == 0;
  int cpus = known ? CPU_COUNT(&set) : 1;
  /* A yield is a system call (about 1.2 us on the paravirtualized VM of
   * docs/performance.md): with a CPU per rank, one every 64 polls cost a
   * 512 B ping-pong at np 2 1.7-2.0 us one-way, against 0.8-1.1 with one
   * every 1,024 (five rounds). Ranks that outnumber CPUs yield at every
   * empty poll: the rank they wait for may need this CPU. */
  ctx->ep.yield_every = here > cpus ? 1 : 1024;
  /* A spinning rank that finds its CPU shared moves to its home CPU
   * (core/pace.c): the local rank's own where there is a CPU per rank,
   * else its share of them in blocks of consecutive local ranks (as a
   * mapping by slot places them; neighbours share a CPU's caches).
   * Measured at np 4 on 2 CPUs: blocks left 4 MiB allreduces as they
   * were, ranks dealt round the CPUs made them 15-40 % slower. */
  int home =
      here > cpus && here > 0 ? (int)((int64_t)below * cpus / here) : below;
  atomic_store(&ctx->ep.here, here);
  atomic_store(&ctx->ep.crowded, here > cpus);
  atomic_store(&ctx->ep.home_cpu, known && here > 1 ? nth_cpu(&set, home) : -1);
  fd_budget(ctx, here);
}
