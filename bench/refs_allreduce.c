/*
 * refs sealed-allreduce N SIZE [ITERS]: the time of one encrypted allreduce
 * of SIZE bytes (float32 sum) at np N (a power of two), with nothing on top
 * of the work it cannot avoid: N processes, one thread each (as a rank
 * has), a connected UDP socket per pair over loopback, every byte sealed
 * with AES-128-GCM (GnuTLS, as nexar's TLS 1.3 priority picks) straight from
 * where it lies into 65,000-byte datagrams and opened by the receiver, the
 * reduction vectorized. No protocol, no copy but the cipher's and the
 * kernel's, no acknowledgements: each process may run 64 datagrams (4 MiB)
 * ahead of its partner in a step, which the 8 MiB socket buffers hold.
 *
 * Two textbook schedules run, each for ITERS calls (default: 5 x
 * 10^7 / SIZE, 5 to 10,000) after a tenth as many (at least one):
 *   - recursive doubling: log2 N steps, each exchanging the whole vector
 *     with partner r ^ 2^k and folding it in;
 *   - Rabenseifner: reduce-scatter by recursive halving, then allgather by
 *     recursive doubling (Thakur, Rabenseifner & Gropp 2005), each step
 *     sealing only the half or window being exchanged.
 * Three rounds of each, interleaved; each schedule's best round counts,
 * its time the mean over the processes (as nexar-perf reports). The faster
 * schedule's busbw, 2 (N - 1) / N x SIZE / time per call, is printed as
 *   {"ref": "udp-sealed-allreduce", "size": SIZE, "np": N, "GBps": X,
 *    "seconds": T, "note": "..."}
 * where T is that time per call. bench/compare sets nexar's allreduce over
 * QUIC against it at each size: it is what packet protection leaves on
 * this host at that size, latency included (a bulk rate such as refs
 * sealed-ring's is out of reach for a call of 64 KiB).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "refs.h"

#define AR_MAX 16   /* processes */
#define AR_DG 65000 /* datagram bytes */
#define AR_HDR REFS_SEAL_HDR
#define AR_TAG REFS_SEAL_TAG
#define AR_PT (AR_DG - AR_HDR - AR_TAG)
#define AR_WINDOW 64 /* datagrams ahead of the partner in a step */
/* Spin before poll(): 50 us. With 300 (nexar's NEXAR_SPIN_US) four
 * processes on two CPUs spun while their partners waited for the CPU:
 * 0.156 GB/s at 64 KiB against 0.26-0.31. */
#define AR_SPIN_S 50e-6
#define AR_ROUNDS 3         /* of each schedule, interleaved; the best counts */
#define AR_DEADLINE_S 120.0 /* a lost datagram fails the run, never hangs */

typedef struct {
  int r, n;
  int fd[AR_MAX];                         /* to and from each peer */
  gnutls_aead_cipher_hd_t tx, rx[AR_MAX]; /* own key; each peer's key */
  uint64_t txseq[AR_MAX];
  unsigned char dg[AR_DG], plain[AR_DG];
  double deadline;
} ar_t;

/* Seals |len| bytes at |src| into one datagram to |peer| and sends it.
 * Returns 1 when sent, 0 when the socket is full (try again), -1 on
 * error. The sequence number advances only when it was sent. */
static int send_one(ar_t *a, int peer, const unsigned char *src, size_t len) {
  unsigned char nonce[12];
  size_t ct = len + AR_TAG;
  memcpy(a->dg, &a->txseq[peer], AR_HDR);
  refs_seal_nonce(nonce, a->dg);
  if (gnutls_aead_cipher_encrypt(a->tx, nonce, 12, a->dg, AR_HDR, AR_TAG, src,
                                 len, a->dg + AR_HDR, &ct) < 0)
    return -1;
  ssize_t w = send(a->fd[peer], a->dg, AR_HDR + ct, MSG_DONTWAIT);
  if (w < 0) return errno == EAGAIN || errno == ENOBUFS ? 0 : -1;
  a->txseq[peer]++;
  return 1;
}

/* Receives one datagram from |peer| and opens it: into |dst| when |own| is
 * NULL, else summed with |own| into |dst|. Returns the plaintext bytes, 0
 * when none waits, -1 on error (a datagram that does not open, or is
 * longer than |room|). */
static ssize_t recv_one(ar_t *a, int peer, float *dst, const float *own,
                        size_t room) {
  ssize_t got = recv(a->fd[peer], a->dg, AR_DG, MSG_DONTWAIT);
  if (got < 0) return errno == EAGAIN ? 0 : -1;
  if ((size_t)got <= AR_HDR + AR_TAG) return -1;
  size_t pt = (size_t)got - AR_HDR - AR_TAG;
  if (pt > room) return -1;
  unsigned char nonce[12];
  refs_seal_nonce(nonce, a->dg);
  unsigned char *out = own ? a->plain : (unsigned char *)dst;
  if (gnutls_aead_cipher_decrypt(a->rx[peer], nonce, 12, a->dg, AR_HDR, AR_TAG,
                                 a->dg + AR_HDR, (size_t)got - AR_HDR, out,
                                 &pt) < 0)
    return -1;
  if (own)
    refs_sum_f32(dst, own, (const float *)(const void *)a->plain,
                 pt / sizeof(float));
  return (ssize_t)pt;
}

static size_t dgrams(size_t bytes) {
  return (bytes + AR_PT - 1) / AR_PT;
}

/* One step: sends |sn| bytes at |src| to |peer| while it receives |rn|
 * bytes from it into |dst| (summed with |own| at the same offsets when
 * |own|). A datagram goes only while the partner has sent at most
 * AR_WINDOW fewer (or all of its own). Where |dst| is |src| (recursive
 * doubling after its first step), datagram k is received only after
 * datagram k was sent, so that no sum is sent in place of an operand.
 * Spins AR_SPIN_S, then polls. */
static int step(ar_t *a, int peer, const unsigned char *src, size_t sn,
                float *dst, const float *own, size_t rn) {
  size_t sent = 0, got = 0, nsd = dgrams(sn), nrd = dgrams(rn), sd = 0, rd = 0;
  bool same = (const unsigned char *)dst == src;
  double idle_since = 0;
  while (sd < nsd || rd < nrd) {
    bool did = false;
    if (sd < nsd && (sd < rd + AR_WINDOW || rd == nrd)) {
      size_t len = sn - sent < AR_PT ? sn - sent : AR_PT;
      int rv = send_one(a, peer, src + sent, len);
      if (rv < 0) return -1;
      if (rv > 0) sent += len, sd++, did = true;
    }
    if (rd < nrd && (!same || rd < sd || sd == nsd)) {
      size_t off = got / sizeof(float);
      ssize_t rv =
          recv_one(a, peer, dst + off, own ? own + off : NULL, rn - got);
      if (rv < 0) return -1;
      if (rv > 0) got += (size_t)rv, rd++, did = true;
    }
    if (did) {
      idle_since = 0;
      continue;
    }
    double t = refs_now_s();
    if (t > a->deadline) return -1;
    if (idle_since == 0) idle_since = t;
    if (t - idle_since < AR_SPIN_S) continue;
    struct pollfd p = {a->fd[peer], rd < nrd ? POLLIN : POLLOUT, 0};
    poll(&p, 1, 10);
  }
  return got == rn ? 0 : -1;
}

/* Recursive doubling: |res| = the sum of every process's |in|. */
static int call_rd(ar_t *a, const float *in, float *res, size_t cnt) {
  const float *cur = in;
  for (int mask = 1; mask < a->n; mask <<= 1) {
    if (step(a, a->r ^ mask, (const unsigned char *)cur, cnt * sizeof(float),
             res, cur, cnt * sizeof(float)))
      return -1;
    cur = res;
  }
  return 0;
}

/* Rabenseifner: reduce-scatter by recursive halving, allgather by
 * recursive doubling over the same windows in reverse. */
static int call_rab(ar_t *a, const float *in, float *res, size_t cnt) {
  size_t lo[32], hi[32];
  int k = 0;
  size_t l = 0, h = cnt;
  const float *cur = in;
  for (int mask = a->n >> 1; mask >= 1; mask >>= 1, k++) {
    size_t mid = l + (h - l) / 2;
    bool lower = (a->r & mask) == 0;
    size_t kl = lower ? l : mid, kh = lower ? mid : h; /* kept */
    size_t sl = lower ? mid : l, sh = lower ? h : mid; /* sent */
    if (step(a, a->r ^ mask, (const unsigned char *)(cur + sl),
             (sh - sl) * sizeof(float), res + kl, cur + kl,
             (kh - kl) * sizeof(float)))
      return -1;
    lo[k] = l, hi[k] = h;
    l = kl, h = kh;
    cur = res;
  }
  for (int mask = 1; mask < a->n; mask <<= 1) {
    k--;
    /* The partner holds the other part of [lo[k], hi[k]). */
    size_t ol = l == lo[k] ? h : lo[k], oh = l == lo[k] ? hi[k] : l;
    if (step(a, a->r ^ mask, (const unsigned char *)(res + l),
             (h - l) * sizeof(float), res + ol, NULL,
             (oh - ol) * sizeof(float)))
      return -1;
    l = lo[k], h = hi[k];
  }
  return 0;
}

typedef int (*call_fn)(ar_t *, const float *, float *, size_t);

/* Runs |warm| then |iters| calls of |fn|; checks the last result (every
 * element is n (n + 1) / 2: process r gives r + 1). Returns the seconds
 * per call, or -1. */
static double run_calls(ar_t *a, call_fn fn, const float *in, float *res,
                        size_t cnt, int warm, int iters) {
  for (int i = 0; i < warm; i++)
    if (fn(a, in, res, cnt)) return -1;
  double t0 = refs_now_s();
  for (int i = 0; i < iters; i++)
    if (fn(a, in, res, cnt)) return -1;
  double dt = (refs_now_s() - t0) / iters;
  float want = (float)(a->n * (a->n + 1) / 2);
  for (size_t i = 0; i < cnt; i++)
    if (res[i] != want) return -1;
  return dt;
}

/* One process: both schedules, |iters| calls each after a tenth as many;
 * writes {recursive doubling, Rabenseifner} seconds per call to |out|. */
static int ar_proc(ar_t *a, size_t cnt, int iters, const int sync[2], int out) {
  size_t bytes = (cnt * sizeof(float) + 63) & ~(size_t)63; /* C11: k x 64 */
  float *in = aligned_alloc(64, bytes), *res = aligned_alloc(64, bytes);
  if (!in || !res || refs_key_init(&a->tx, (unsigned char)a->r)) return 1;
  for (int p = 0; p < a->n; p++)
    if (p != a->r && refs_key_init(&a->rx[p], (unsigned char)p)) return 1;
  for (size_t i = 0; i < cnt; i++) in[i] = (float)(a->r + 1);
  memset(res, 0, cnt * sizeof(float));
  double t0;
  if (refs_group_sync(sync, &t0)) return 1;
  a->deadline = t0 + AR_DEADLINE_S;
  int warm = iters / 10 > 1 ? iters / 10 : 1;
  double t[2 * AR_ROUNDS];
  for (int k = 0; k < AR_ROUNDS; k++) {
    t[2 * k] = run_calls(a, call_rd, in, res, cnt, warm, iters);
    t[2 * k + 1] = run_calls(a, call_rab, in, res, cnt, warm, iters);
    if (t[2 * k] < 0 || t[2 * k + 1] < 0) return 1;
  }
  return write(out, t, sizeof t) == sizeof t ? 0 : 1;
}

typedef struct {
  ar_t *ars;
  size_t cnt;
  int iters;
} ar_run_t;

static int ar_start(int r, void *arg, const int sync[2], int out) {
  ar_run_t *run = arg;
  return ar_proc(&run->ars[r], run->cnt, run->iters, sync, out);
}

int refs_sealed_allreduce(int argc, char **argv) {
  int n = argc > 0 ? atoi(argv[0]) : 2;
  size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 65536;
  int iters = argc > 2 ? atoi(argv[2]) : 0;
  size_t cnt = size / sizeof(float);
  if (n < 2 || n > AR_MAX || (n & (n - 1)) || cnt < (size_t)n ||
      size > ((size_t)1 << 30) || iters < 0) {
    fprintf(stderr,
            "refs: sealed-allreduce N SIZE [ITERS]: N a power of two "
            "in 2..%d, SIZE at least 4 N bytes and at most 1 GiB\n",
            AR_MAX);
    return 2;
  }
  if (iters == 0) /* about 0.2 s a round at 0.25 GB/s of busbw */
    iters = (int)(50e6 / (double)size);
  iters = iters < 5 ? 5 : iters > 10000 ? 10000 : iters;
  gnutls_global_init();
  static ar_t ars[AR_MAX];
  struct sockaddr_in addr[AR_MAX][AR_MAX];
  for (int r = 0; r < n; r++)
    for (int p = 0; p < n; p++) {
      if (p == r) continue;
      socklen_t al = sizeof addr[r][p];
      memset(&addr[r][p], 0, sizeof addr[r][p]);
      addr[r][p].sin_family = AF_INET;
      addr[r][p].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      int fd = socket(AF_INET, SOCK_DGRAM, 0);
      if (fd >= 0) refs_big_buffers(fd);
      if (fd < 0 ||
          bind(fd, (struct sockaddr *)&addr[r][p], sizeof addr[r][p]) ||
          getsockname(fd, (struct sockaddr *)&addr[r][p], &al)) {
        perror("refs: sealed-allreduce");
        return 1;
      }
      ars[r].fd[p] = fd;
    }
  for (int r = 0; r < n; r++)
    for (int p = 0; p < n; p++)
      if (p != r && connect(ars[r].fd[p], (struct sockaddr *)&addr[p][r],
                            sizeof addr[p][r])) {
        perror("refs: sealed-allreduce");
        return 1;
      }
  for (int r = 0; r < n; r++) ars[r].r = r, ars[r].n = n;
  ar_run_t run = {ars, cnt, iters};
  int results = refs_group_start(n, ar_start, &run);
  if (results < 0) return 1;
  double sum[2 * AR_ROUNDS] = {0};
  int got = 0;
  for (double t[2 * AR_ROUNDS]; read(results, t, sizeof t) == sizeof t; got++)
    for (int k = 0; k < 2 * AR_ROUNDS; k++) sum[k] += t[k];
  if (refs_group_end(n, got, results, "sealed-allreduce")) return 1;
  /* The mean over the processes per round and schedule; the best round of
   * each schedule (this host's calls swing by 2x from run to run). */
  double rd = sum[0] / n, rab = sum[1] / n;
  for (int k = 1; k < AR_ROUNDS; k++) {
    if (sum[2 * k] / n < rd) rd = sum[2 * k] / n;
    if (sum[2 * k + 1] / n < rab) rab = sum[2 * k + 1] / n;
  }
  double best = rd < rab ? rd : rab;
  double busbw = 2.0 * (n - 1) / n * (double)size / best / 1e9;
  char note[600];
  snprintf(note, sizeof note,
           "%d processes, one thread each, %d rounds of %d calls: the "
           "faster of recursive doubling (%.1f us a call, best round) and "
           "Rabenseifner (%.1f us), every byte "
           "sealed (AES-128-GCM) from where it lies into 65000-byte "
           "datagrams and opened by its receiver, float32 sum, nothing else: "
           "the busbw an encrypted allreduce of this size reaches here",
           n, AR_ROUNDS, iters, rd * 1e6, rab * 1e6);
  printf(
      "{\"ref\": \"udp-sealed-allreduce\", \"size\": %zu, \"np\": %d, "
      "\"GBps\": %.4f, \"seconds\": %.9f, \"note\": \"%s\"}\n",
      size, n, busbw, best, note);
  fflush(stdout);
  return 0;
}
