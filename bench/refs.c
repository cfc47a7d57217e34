/*
 * refs: physical reference figures for bench/compare, measured on this host.
 * Each test prints one JSON object per line:
 *   {"ref": NAME, "size": BYTES, "GBps": X, "seconds": T, "note": "..."}
 * (GB = 10^9 bytes).
 *
 *   refs memcpy [BYTES...]   memcpy bandwidth, best of 9 samples per size
 *                            (default 64 KiB, 1 MiB, 64 MiB); bytes copied
 *                            per second, as reduce-bench counts it
 *   refs cipher [SECONDS]    GnuTLS AES-128-GCM and ChaCha20-Poly1305 on
 *                            64 KiB records (gnutls_cipher_*): encrypt
 *                            (set IV, add AAD, encrypt, tag) and decrypt,
 *                            one thread, each for SECONDS (default 1)
 *   refs udp [SECONDS]       one process sends 65000-byte datagrams over
 *                            127.0.0.1 to another for SECONDS (default 2,
 *                            after 0.2 s of warm-up); GB/s as received
 *                            (sent and received counted too)
 *   refs sealed [SECONDS]    refs udp with what an encrypted stream must do
 *                            per datagram, as nexar's QUIC path does it: the
 *                            sender copies 64,976 bytes from a 64 MiB buffer
 *                            into the datagram and seals them in place with
 *                            AES-128-GCM (8-byte sequence number as AAD and
 *                            nonce), the receiver opens each datagram into a
 *                            buffer of its own (the tag checked) and copies
 *                            it into a 64 MiB buffer; GB/s of plaintext
 *                            opened: the limit of one encrypted stream with
 *                            one core per side (the receiver reports what it
 *                            opened, the sender keeps at most 64 datagrams
 *                            unopened: no work is spent on drops)
 *   refs sealed-rails N [SECONDS]
 *                            N such encrypted streams at once, each from
 *                            its own sender process to its own receiver
 *                            (2N processes); GB/s opened, summed. With N
 *                            at least the CPU count, every CPU seals or
 *                            opens: the most an encrypted stream between
 *                            two ranks reaches on this host however many
 *                            threads (rails) it is spread over
 *   refs tcp [SECONDS]       the same over one TCP connection: once with
 *                            64 KiB writes and reads, once with 1 MiB ones
 *                            (fewer system calls: about 3x the GB/s here)
 *   refs sealed-ring N [SECONDS]
 *                            N processes in a ring, each with one thread
 *                            (as a rank has), doing an encrypted ring
 *                            allreduce's work with nothing on top: it
 *                            seals 65000-byte datagrams straight from a
 *                            64 MiB buffer and sends them to the next
 *                            process while it opens what the previous one
 *                            sends, in turn 16 datagrams into a buffer of
 *                            its own and summed (float32) with its own data
 *                            into the result (reduce-scatter), 16 straight
 *                            into the result (allgather); no copy but the
 *                            cipher's; its own key per sender; at most 64
 *                            datagrams unopened per sender); GB/s of
 *                            plaintext opened per process over SECONDS
 *                            (default 2) after 0.2 s of warm-up, the mean
 *                            over the N (the least in the note). A ring or
 *                            halving-doubling allreduce sends and receives
 *                            busbw bytes per second on each rank, so no
 *                            encrypted allreduce at np N reaches a busbw
 *                            above this figure on this host
 *   refs sealed-allreduce N SIZE [ITERS]
 *                            the time of one encrypted allreduce of SIZE
 *                            bytes at np N with nothing on top
 *                            (refs_allreduce.c)
 *   refs pauses [SECONDS]    how often and how long the host takes a CPU
 *                            from a process that never gives it up: one
 *                            clock-reading loop per CPU (refs_pauses.c)
 *
 * The UDP and TCP figures are what the kernel's loopback path gives one
 * plain sender and one plain receiver, no protocol work on top: an upper
 * bound for any transport over loopback sockets on this host.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "refs.h"

double refs_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void emit(const char *ref, size_t size, double gbps, double secs,
                 const char *note) {
  printf(
      "{\"ref\": \"%s\", \"size\": %zu, \"GBps\": %.4f, \"seconds\": %.3f, "
      "\"note\": \"%s\"}\n",
      ref, size, gbps, secs, note);
  fflush(stdout);
}

/* ---- memcpy ------------------------------------------------------------ */

static int t_memcpy(int argc, char **argv) {
  size_t defaults[] = {(size_t)64 << 10, (size_t)1 << 20, (size_t)64 << 20};
  int nsz = argc > 0 ? argc : 3;
  for (int k = 0; k < nsz; k++) {
    size_t bytes = argc > 0 ? strtoull(argv[k], NULL, 0) : defaults[k];
    if (!bytes) continue;
    /* Page-aligned, both: with malloc's 16-byte header the two blocks of
     * a small size lay 16 bytes apart modulo 4 KiB, and glibc's memcpy
     * (rep movsb) on AMD Zen runs 20x slower when the destination is 1-31
     * bytes ahead of the source modulo 4 KiB: 64 KiB copied at 1.9 GB/s
     * instead of 47 here. That figure belonged to the two addresses, not to
     * the size (a packet's copy meets it for 62 of 8191 offsets). */
    size_t round = (bytes + 4095) & ~(size_t)4095;
    char *a = aligned_alloc(4096, round), *b = aligned_alloc(4096, round);
    if (!a || !b) return 1;
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    /* Enough passes per sample for about 4 MiB of traffic at least. */
    size_t passes = bytes >= ((size_t)4 << 20) ? 1 : ((size_t)4 << 20) / bytes;
    double best = 1e30;
    for (int s = 0; s < 9; s++) {
      double t0 = refs_now_s();
      for (size_t p = 0; p < passes; p++) {
        memcpy(b, a, bytes);
        __asm__ volatile("" : : "r"(b) : "memory");
      }
      double dt = refs_now_s() - t0;
      if (dt < best) best = dt;
    }
    emit("memcpy", bytes, (double)bytes * passes / best / 1e9, best,
         "best of 9 samples, bytes copied per second");
    free(a);
    free(b);
  }
  return 0;
}

/* ---- GnuTLS AEAD ciphers ----------------------------------------------- */

static int one_cipher(gnutls_cipher_algorithm_t alg, const char *name,
                      double secs) {
  const size_t rec = 64 << 10, aadlen = 13, taglen = 16;
  unsigned char key[32], iv[12], aad[13], tag[16];
  for (size_t i = 0; i < sizeof key; i++) key[i] = (unsigned char)(i * 7 + 1);
  memset(iv, 0, sizeof iv);
  memset(aad, 0x5a, sizeof aad);
  unsigned char *pt = malloc(rec), *ct = malloc(rec);
  if (!pt || !ct) return 1;
  memset(pt, 0x33, rec);
  gnutls_datum_t k = {key, (unsigned)gnutls_cipher_get_key_size(alg)};
  gnutls_cipher_hd_t h;
  int rc = gnutls_cipher_init(&h, alg, &k, NULL);
  if (rc < 0) {
    fprintf(stderr, "refs: %s: %s\n", name, gnutls_strerror(rc));
    return 1;
  }
  for (int dir = 0; dir < 2; dir++) {
    size_t n = 0;
    double t0 = refs_now_s(), t;
    uint64_t seq = 0;
    do {
      for (int j = 0; j < 16; j++) {
        memcpy(iv + 4, &seq, sizeof seq);
        seq++;
        gnutls_cipher_set_iv(h, iv, sizeof iv);
        gnutls_cipher_add_auth(h, aad, aadlen);
        if (dir == 0) {
          rc = gnutls_cipher_encrypt2(h, pt, rec, ct, rec);
          if (!rc) rc = gnutls_cipher_tag(h, tag, taglen);
        } else {
          /* decrypt cost; the tag is not compared (no matching tag here) */
          rc = gnutls_cipher_decrypt2(h, ct, rec, pt, rec);
          if (!rc) rc = gnutls_cipher_tag(h, tag, taglen);
        }
        if (rc < 0) {
          fprintf(stderr, "refs: %s: %s\n", name, gnutls_strerror(rc));
          return 1;
        }
        n++;
      }
      t = refs_now_s() - t0;
    } while (t < secs);
    char ref[64];
    snprintf(ref, sizeof ref, "%s-%s", name, dir ? "decrypt" : "encrypt");
    emit(ref, rec, (double)n * rec / t / 1e9, t,
         "gnutls_cipher_* on 64 KiB records, 13-byte AAD, one thread");
  }
  gnutls_cipher_deinit(h);
  free(pt);
  free(ct);
  return 0;
}

static int t_cipher(int argc, char **argv) {
  double secs = argc > 0 ? atof(argv[0]) : 1.0;
  if (secs <= 0) secs = 1.0;
  gnutls_global_init();
  int rc = one_cipher(GNUTLS_CIPHER_AES_128_GCM, "aes-128-gcm", secs);
  rc |= one_cipher(GNUTLS_CIPHER_CHACHA20_POLY1305, "chacha20-poly1305", secs);
  gnutls_global_deinit();
  return rc;
}

/* ---- loopback sockets -------------------------------------------------- */

void refs_big_buffers(int fd) {
  int sz = 8 << 20;
  /* FORCE works as root beyond net.core.[rw]mem_max; plain as fallback. */
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz))
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz))
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
}

/* The per-datagram work of `refs sealed`: a 64 MiB user buffer on each side
 * and one AES-128-GCM key. A datagram is an 8-byte sequence number (AAD and
 * nonce) and SEAL_PT bytes sealed, tag last (refs.h: the format). */
#define SEAL_HDR REFS_SEAL_HDR
#define SEAL_TAG REFS_SEAL_TAG
#define SEAL_USER ((size_t)64 << 20)
/* Datagrams the sender may have unopened (4 MiB: within the 8 MiB socket
 * buffers); the receiver reports its count every SEAL_ACK_EVERY. Without
 * it a sender that outruns the receiver burns a CPU on datagrams that are
 * dropped, which on a shared host takes time from the receiver. */
#define SEAL_WINDOW 64
#define SEAL_ACK_EVERY 16
typedef struct {
  gnutls_aead_cipher_hd_t h;
  unsigned char *user, *plain; /* plain: the receiver's decrypt buffer */
  size_t off;
  uint64_t seq;
} seal_t;

int refs_key_init(gnutls_aead_cipher_hd_t *h, unsigned char who) {
  unsigned char key[16] = {7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 0, 4, 5, 2};
  key[0] ^= who;
  gnutls_datum_t k = {key, sizeof key};
  return gnutls_aead_cipher_init(h, GNUTLS_CIPHER_AES_128_GCM, &k) < 0 ? -1 : 0;
}

void refs_seal_nonce(unsigned char nonce[12], const unsigned char *hdr) {
  memset(nonce, 0, 12);
  memcpy(nonce + 4, hdr, REFS_SEAL_HDR);
}

/* |who| picks the key: each sender of `refs sealed-ring` has its own. */
static int seal_init(seal_t *z, size_t dg, unsigned char who) {
  memset(z, 0, sizeof *z);
  z->user = aligned_alloc(4096, SEAL_USER);
  z->plain = malloc(dg);
  if (!z->user || !z->plain || refs_key_init(&z->h, who)) return -1;
  memset(z->user, 0x33, SEAL_USER);
  return 0;
}

/* Sender: user bytes sealed into the datagram, copied in first and sealed
 * in place (as ngtcp2 does), or, |direct|, sealed straight from the user
 * buffer (no copy but the cipher's). */
static int seal_one(seal_t *z, unsigned char *d, size_t dg, bool direct) {
  size_t pt = dg - SEAL_HDR - SEAL_TAG, ct = pt + SEAL_TAG;
  unsigned char nonce[12];
  if (z->off + pt > SEAL_USER) z->off = 0;
  memcpy(d, &z->seq, SEAL_HDR);
  z->seq++;
  const unsigned char *src = z->user + z->off;
  if (!direct) src = memcpy(d + SEAL_HDR, src, pt);
  z->off += pt;
  refs_seal_nonce(nonce, d);
  return gnutls_aead_cipher_encrypt(z->h, nonce, 12, d, SEAL_HDR, SEAL_TAG, src,
                                    pt, d + SEAL_HDR, &ct);
}

/* out = a + b, vectorized (as nexar's kernels are); |out| may be |a|. */
__attribute__((optimize("O3"))) void refs_sum_f32(float *out, const float *a,
                                                  const float *restrict b,
                                                  size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* What a receiver does with a datagram's plaintext: opened into its own
 * buffer and copied into the user buffer (OPEN_COPY, refs sealed), opened
 * straight into the user buffer (OPEN_DIRECT), or opened into its own
 * buffer and summed as float32 with |own| into the user buffer at the
 * same offset (OPEN_FOLD: a folding receive). */
enum { OPEN_COPY, OPEN_DIRECT, OPEN_FOLD };

/* Opens one datagram (the tag checked). Returns the plaintext bytes, 0 for
 * a datagram that did not open. */
static size_t open_one(seal_t *z, const unsigned char *d, size_t len, int how,
                       const unsigned char *own) {
  if (len <= SEAL_HDR + SEAL_TAG) return 0;
  size_t pt = len - SEAL_HDR - SEAL_TAG;
  unsigned char nonce[12];
  if (z->off + pt > SEAL_USER) z->off = 0;
  unsigned char *at = z->user + z->off;
  refs_seal_nonce(nonce, d);
  if (gnutls_aead_cipher_decrypt(z->h, nonce, 12, d, SEAL_HDR, SEAL_TAG,
                                 d + SEAL_HDR, len - SEAL_HDR,
                                 how == OPEN_DIRECT ? at : z->plain, &pt) < 0)
    return 0;
  if (how == OPEN_COPY)
    memcpy(at, z->plain, pt);
  else if (how == OPEN_FOLD)
    refs_sum_f32((float *)(void *)at,
                 (const float *)(const void *)(own + z->off),
                 (const float *)(const void *)z->plain, pt / sizeof(float));
  z->off += pt;
  return pt;
}

/* ---- streams over loopback: refs udp, sealed, sealed-rails ------------ */

#define STREAM_WARM_S 0.2
#define STREAM_GRACE_S 0.3 /* after the window: keep opening, send nothing */
#define RAILS_MAX 16

/* |rails| streams at once, each from its own sender process to its own
 * receiver process over a connected UDP socket pair (fds[2i], fds[2i+1]),
 * counted over [t0 + STREAM_WARM_S, + secs). */
typedef struct {
  int rails;
  bool sealed;
  const int *fds;
  double secs;
} stream_t;

/* Sender of a stream: until the window's end, 65000-byte datagrams (sealed:
 * user bytes copied in and sealed in place, at most SEAL_WINDOW unopened).
 * Receiver: reads (sealed: opens and copies out) until the grace ends,
 * counting what came in the window. Each writes {bytes, seconds, datagrams
 * sent or received} to |out|. */
static int stream_proc(int r, void *arg, const int sync[2], int out) {
  const stream_t *g = arg;
  const size_t dg = 65000;
  int rail = r % g->rails, fd = g->fds[2 * rail + (r >= g->rails)];
  bool tx = r < g->rails;
  seal_t z;
  if (g->sealed && seal_init(&z, dg, (unsigned char)rail)) return 1;
  unsigned char *buf = calloc(1, dg);
  if (!buf) return 1;
  double t0;
  if (refs_group_sync(sync, &t0)) return 1;
  double t_meas = t0 + STREAM_WARM_S, t_end = t_meas + g->secs;
  double bytes = 0, dgs = 0, blocked = 0;
  uint64_t n = 0, acked = 0; /* sent or opened; the receiver's report */
  for (double t = refs_now_s(); t < t_end + (tx ? 0 : STREAM_GRACE_S);
       t = refs_now_s()) {
    if (tx) {
      uint64_t v;
      while (g->sealed && recv(fd, &v, sizeof v, MSG_DONTWAIT) == sizeof v)
        if (v > acked) acked = v;
      if (g->sealed && n - acked >= SEAL_WINDOW) {
        struct pollfd p = {fd, POLLIN, 0};
        if (!blocked) blocked = t;
        if (t - blocked > 0.1) acked = n; /* reports lost: go on */
        poll(&p, 1, 1);
        continue;
      }
      blocked = 0;
      if (g->sealed && seal_one(&z, buf, dg, false) < 0) return 1;
      if (send(fd, buf, dg, 0) > 0) n++, dgs++;
      continue;
    }
    ssize_t got = recv(fd, buf, dg, MSG_DONTWAIT);
    if (got <= 0) {
      struct pollfd p = {fd, POLLIN, 0};
      poll(&p, 1, 1);
      continue;
    }
    size_t pt = g->sealed ? open_one(&z, buf, (size_t)got, OPEN_COPY, NULL)
                          : (size_t)got;
    if (!pt) continue;
    if (g->sealed && ++n % SEAL_ACK_EVERY == 0) send(fd, &n, sizeof n, 0);
    if (t >= t_meas && t < t_end) bytes += (double)pt, dgs++;
  }
  double res[3] = {bytes, tx ? 0 : t_end - t_meas, dgs};
  return write(out, res, sizeof res) == sizeof res ? 0 : 1;
}

/* refs udp / sealed (one stream) and sealed-rails (|rails| streams). */
static int stream_run(int rails, double secs, bool sealed) {
  int fds[2 * RAILS_MAX];
  for (int i = 0; i < rails; i++) {
    struct sockaddr_in a[2];
    for (int k = 0; k < 2; k++) {
      memset(&a[k], 0, sizeof a[k]);
      a[k].sin_family = AF_INET;
      a[k].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t al = sizeof a[k];
      int fd = fds[2 * i + k] = socket(AF_INET, SOCK_DGRAM, 0);
      if (fd >= 0) refs_big_buffers(fd);
      if (fd < 0 || bind(fd, (struct sockaddr *)&a[k], sizeof a[k]) ||
          getsockname(fd, (struct sockaddr *)&a[k], &al)) {
        perror("refs: udp");
        return 1;
      }
    }
    if (connect(fds[2 * i], (struct sockaddr *)&a[1], sizeof a[1]) ||
        connect(fds[2 * i + 1], (struct sockaddr *)&a[0], sizeof a[0])) {
      perror("refs: udp connect");
      return 1;
    }
  }
  stream_t g = {rails, sealed, fds, secs};
  int results = refs_group_start(2 * rails, stream_proc, &g);
  if (results < 0) return 1;
  double gbps = 0, sent = 0, rcvd = 0, span = 0;
  int got = 0;
  for (double res[3]; read(results, res, sizeof res) == sizeof res; got++) {
    if (res[1] > 0) { /* a receiver */
      gbps += res[0] / res[1] / 1e9;
      rcvd += res[2];
      span = res[1];
    } else {
      sent += res[2];
    }
  }
  if (refs_group_end(2 * rails, got, results, "udp")) return 1;
  char note[600];
  if (rails == 1)
    snprintf(note, sizeof note,
             "65000-byte datagrams, one sender, one receiver%s; %.0f sent, "
             "%.0f received in the window",
             sealed ? ", AES-128-GCM sealed and opened, copied in and out" : "",
             sent, rcvd);
  else
    snprintf(note, sizeof note,
             "%d such streams at once (each a sender and a receiver process, "
             "so %d processes on this host's CPUs): 65000-byte datagrams, "
             "AES-128-GCM sealed and opened, copied in and out; GB/s opened, "
             "summed: the most an encrypted stream between two ranks reaches "
             "here with every CPU sealing or opening it",
             rails, 2 * rails);
  const char *name = !sealed      ? "udp-loopback"
                     : rails == 1 ? "udp-sealed"
                                  : "udp-sealed-rails";
  printf(
      "{\"ref\": \"%s\", \"size\": %zu, \"rails\": %d, \"GBps\": %.4f, "
      "\"seconds\": %.3f, \"note\": \"%s\"}\n",
      name, (size_t)65000, rails, gbps, span, note);
  return 0;
}

static int t_udp(int argc, char **argv, bool sealed) {
  double secs = argc > 0 ? atof(argv[0]) : 2.0;
  if (secs <= 0) secs = 2.0;
  if (sealed) gnutls_global_init();
  return stream_run(1, secs, sealed);
}

/* The arguments N [SECONDS] of |what|: N in |lo|..|hi| (default 2),
 * SECONDS (default 2) positive; 0, or 2 with a message. Initializes
 * GnuTLS. */
static int n_secs(int argc, char **argv, const char *what, int lo, int hi,
                  int *n, double *secs) {
  *n = argc > 0 ? atoi(argv[0]) : 2;
  *secs = argc > 1 ? atof(argv[1]) : 2.0;
  if (*n < lo || *n > hi || *secs <= 0) {
    fprintf(stderr, "refs: %s [SECONDS]: N in %d..%d\n", what, lo, hi);
    return 2;
  }
  gnutls_global_init();
  return 0;
}

static int t_sealed_rails(int argc, char **argv) {
  int rails;
  double secs;
  int rc = n_secs(argc, argv, "sealed-rails N", 1, RAILS_MAX, &rails, &secs);
  return rc ? rc : stream_run(rails, secs, true);
}

/* ---- a group of processes started together ---------------------------- */

int refs_group_start(int n, refs_proc_fn fn, void *arg) {
  /* pfd: the results; ready: each process says it is set up; go: then the
   * start time, the same for all. */
  int pfd[2], ready[2], go[2];
  if (pipe(pfd) || pipe(ready) || pipe(go)) return -1;
  for (int r = 0; r < n; r++)
    if (fork() == 0) {
      int sync[2] = {go[0], ready[1]};
      close(go[1]);
      close(ready[0]);
      close(pfd[0]);
      _exit(fn(r, arg, sync, pfd[1]));
    }
  close(pfd[1]);
  close(ready[1]);
  char c;
  for (int r = 0; r < n; r++)
    if (read(ready[0], &c, 1) != 1) break; /* one died first: wait() says */
  double t0 = refs_now_s();
  for (int r = 0; r < n; r++)
    if (write(go[1], &t0, sizeof t0) != sizeof t0) break;
  close(go[1]);
  close(ready[0]);
  return pfd[0];
}

int refs_group_end(int n, int got, int results, const char *what) {
  int bad = 0;
  close(results);
  for (int st, r = 0; r < n; r++)
    if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) bad = 1;
  if (!bad && got == n) return 0;
  fprintf(stderr, "refs: %s: %d of %d processes reported\n", what, got, n);
  return 1;
}

int refs_group_sync(const int sync[2], double *t0) {
  int said = write(sync[1], "r", 1) == 1;
  close(sync[1]); /* all closed: the parent reads the end, never waits on */
  return said && read(sync[0], t0, sizeof *t0) == sizeof *t0 ? 0 : -1;
}

/* ---- the encrypted ring: refs sealed-ring N -------------------------- */

#define RING_MAX 64
#define RING_WARM_S 0.2
#define RING_GRACE_S 0.3 /* after the window: keep opening, send nothing */
#define RING_HALF 16     /* datagrams folded, then as many placed, in turn */

typedef struct {
  int n;
  const int *fds;
  const struct sockaddr_in *addrs;
  double secs;
} ring_t;

/* One process of the ring: sends sealed datagrams to |next| and opens
 * those of the previous process until |t_end|, counting the plaintext
 * opened in [t_meas, t_end); then serves its inbox for RING_GRACE_S so
 * that no sender waits on it. Writes {bytes, seconds} to |out|. */
static int ring_proc(int r, void *arg, const int sync[2], int out) {
  const ring_t *g = arg;
  int fd = g->fds[r], n = g->n;
  const struct sockaddr_in *addrs = g->addrs;
  double secs = g->secs;
  const size_t dg = 65000;
  seal_t tx, rx;
  if (seal_init(&tx, dg, (unsigned char)r) ||
      seal_init(&rx, dg, (unsigned char)((r + n - 1) % n)))
    return 1;
  const struct sockaddr *next = (const struct sockaddr *)&addrs[(r + 1) % n];
  const struct sockaddr *prev =
      (const struct sockaddr *)&addrs[(r + n - 1) % n];
  unsigned char *sbuf = calloc(1, dg), *rbuf = malloc(dg);
  if (!sbuf || !rbuf) return 1;
  /* The clock starts once every process has its buffers: touching them
   * took seconds on a host whose page faults cost 40 us each. */
  double t0;
  if (refs_group_sync(sync, &t0)) return 1;
  double t_meas = t0 + RING_WARM_S, t_end = t_meas + secs;
  uint64_t nsent = 0, acked = 0, opened = 0;
  double bytes = 0;
  for (double t = refs_now_s(); t < t_end + RING_GRACE_S; t = refs_now_s()) {
    bool did = false;
    for (int i = 0; i < 16; i++) { /* the inbox: data and reports */
      ssize_t got = recv(fd, rbuf, dg, MSG_DONTWAIT);
      if (got <= 0) break;
      did = true;
      if (got == sizeof(uint64_t)) { /* the next process's report */
        uint64_t v;
        memcpy(&v, rbuf, sizeof v);
        if (v > acked) acked = v;
        continue;
      }
      /* Half of what a ring allreduce receives is combined with the
       * rank's own data (reduce-scatter), half is only placed. */
      int how = opened / RING_HALF % 2 == 0 ? OPEN_FOLD : OPEN_DIRECT;
      size_t pt = open_one(&rx, rbuf, (size_t)got, how, tx.user);
      if (!pt) continue;
      double now = refs_now_s();
      if (now >= t_meas && now < t_end) bytes += (double)pt;
      if (++opened % SEAL_ACK_EVERY == 0)
        sendto(fd, &opened, sizeof opened, 0, prev, sizeof addrs[0]);
    }
    for (int i = 0; i < 4 && t < t_end && nsent - acked < SEAL_WINDOW; i++) {
      if (seal_one(&tx, sbuf, dg, true) < 0) return 1;
      if (sendto(fd, sbuf, dg, 0, next, sizeof addrs[0]) > 0) nsent++;
      did = true;
    }
    if (!did) { /* nothing to open, nothing it may send: wait as a rank */
      struct pollfd p = {fd, POLLIN, 0};
      poll(&p, 1, 1);
    }
  }
  double res[2] = {bytes, t_end - t_meas};
  return write(out, res, sizeof res) == sizeof res ? 0 : 1;
}

static int t_sealed_ring(int argc, char **argv) {
  int n;
  double secs;
  int rc = n_secs(argc, argv, "sealed-ring N", 2, RING_MAX, &n, &secs);
  if (rc) return rc;
  int fds[RING_MAX];
  struct sockaddr_in addrs[RING_MAX];
  for (int r = 0; r < n; r++) {
    memset(&addrs[r], 0, sizeof addrs[r]);
    addrs[r].sin_family = AF_INET;
    addrs[r].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof addrs[r];
    fds[r] = socket(AF_INET, SOCK_DGRAM, 0);
    if (fds[r] < 0) {
      perror("refs: sealed-ring");
      return 1;
    }
    refs_big_buffers(fds[r]);
    if (bind(fds[r], (struct sockaddr *)&addrs[r], sizeof addrs[r]) ||
        getsockname(fds[r], (struct sockaddr *)&addrs[r], &al)) {
      perror("refs: sealed-ring");
      return 1;
    }
  }
  ring_t g = {n, fds, addrs, secs};
  int results = refs_group_start(n, ring_proc, &g);
  if (results < 0) return 1;
  double sum = 0, least = 0, span = 0;
  int got = 0;
  for (double res[2]; read(results, res, sizeof res) == sizeof res; got++) {
    double gbps = res[1] > 0 ? res[0] / res[1] / 1e9 : 0;
    sum += gbps;
    least = got == 0 || gbps < least ? gbps : least;
    span = res[1];
  }
  if (refs_group_end(n, got, results, "sealed-ring")) return 1;
  char note[800];
  snprintf(note, sizeof note,
           "%d processes in a ring, one thread each: 65000-byte datagrams "
           "sealed from the user buffer to the next, the previous one's "
           "opened, half summed with its own data into the result, half "
           "straight into it (AES-128-GCM, float32 sum, no other copy); GB/s "
           "opened per process, mean (least %.3f): the "
           "most busbw an encrypted allreduce at np %d reaches here",
           n, least, n);
  printf(
      "{\"ref\": \"udp-sealed-ring\", \"size\": 65000, \"np\": %d, "
      "\"GBps\": %.4f, \"seconds\": %.3f, \"note\": \"%s\"}\n",
      n, sum / n, span, note);
  return 0;
}

static int tcp_once(double secs, size_t chunk) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1) ||
      getsockname(lfd, (struct sockaddr *)&a, &al)) {
    perror("refs: tcp");
    return 1;
  }
  int pfd[2];
  if (pipe(pfd)) return 1;
  pid_t pid = fork();
  if (pid == 0) { /* receiver */
    close(pfd[0]);
    int c = accept(lfd, NULL, NULL);
    char *buf = malloc(chunk);
    double t0 = 0, tl = 0, bytes = 0;
    for (;;) {
      ssize_t r = read(c, buf, chunk);
      if (r <= 0) break;
      if (!t0)
        t0 = refs_now_s();
      else
        bytes += (double)r;
      tl = refs_now_s();
    }
    double res[2] = {bytes, tl - t0};
    if (write(pfd[1], res, sizeof res) != sizeof res) _exit(1);
    _exit(0);
  }
  close(pfd[1]);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(s, (struct sockaddr *)&a, sizeof a)) {
    perror("refs: tcp connect");
    return 1;
  }
  char *buf = calloc(1, chunk);
  double t0 = refs_now_s();
  while (refs_now_s() - t0 < secs) {
    size_t off = 0;
    while (off < chunk) {
      ssize_t w = write(s, buf + off, chunk - off);
      if (w <= 0) {
        perror("refs: tcp write");
        return 1;
      }
      off += (size_t)w;
    }
  }
  close(s);
  double res[2] = {0, 0};
  if (read(pfd[0], res, sizeof res) != sizeof res) return 1;
  waitpid(pid, NULL, 0);
  close(lfd);
  close(pfd[0]);
  free(buf);
  char note[120];
  snprintf(note, sizeof note,
           "one TCP connection, %zu KiB writes and reads, default buffers",
           chunk >> 10);
  emit("tcp-loopback", chunk, res[1] > 0 ? res[0] / res[1] / 1e9 : 0, res[1],
       note);
  return 0;
}

static int t_tcp(int argc, char **argv) {
  double secs = argc > 0 ? atof(argv[0]) : 2.0;
  return tcp_once(secs, (size_t)64 << 10) | tcp_once(secs, (size_t)1 << 20);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    fprintf(stderr,
            "usage: refs memcpy [BYTES...] | cipher [S] | udp [S] | "
            "sealed [S] | sealed-rails N [S] | sealed-ring N [S] | "
            "sealed-allreduce N SIZE "
            "[ITERS] | tcp [S] | pauses [S]\n");
    return 2;
  }
  if (!strcmp(argv[1], "memcpy")) return t_memcpy(argc - 2, argv + 2);
  if (!strcmp(argv[1], "cipher")) return t_cipher(argc - 2, argv + 2);
  if (!strcmp(argv[1], "udp")) return t_udp(argc - 2, argv + 2, false);
  if (!strcmp(argv[1], "sealed")) return t_udp(argc - 2, argv + 2, true);
  if (!strcmp(argv[1], "sealed-rails"))
    return t_sealed_rails(argc - 2, argv + 2);
  if (!strcmp(argv[1], "sealed-ring")) return t_sealed_ring(argc - 2, argv + 2);
  if (!strcmp(argv[1], "sealed-allreduce"))
    return refs_sealed_allreduce(argc - 2, argv + 2);
  if (!strcmp(argv[1], "tcp")) return t_tcp(argc - 2, argv + 2);
  if (!strcmp(argv[1], "pauses")) return refs_pauses(argc - 2, argv + 2);
  fprintf(stderr, "refs: unknown test '%s'\n", argv[1]);
  return 2;
}
