/*
 * Multi-process parts of test_shm_ring (shm_procs.h). Every wait is
 * bounded by a deadline; a parent that fails kills its child.
 */
#include "shm_procs.h"

#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

uint64_t sp_rng(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static pid_t sp_fork(int (*fn)(void *), void *arg) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) _exit(fn(arg));
  return pid;
}

/* The child's exit status, 128 + signal, or -1 when it outlived
 * |timeout_ms| (then it is killed). */
static int sp_reap(pid_t pid, int timeout_ms) {
  double end = nt_now_ms() + timeout_ms;
  int st;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (nt_now_ms() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      fprintf(stderr, "child %d killed after %d ms\n", (int)pid, timeout_ms);
      return -1;
    }
    usleep(1000);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Waits until |fd| is readable, at most until |end| (ms); 0 when it is. */
static int wait_in(int fd, double end) {
  for (;;) {
    int left = (int)(end - nt_now_ms());
    if (left <= 0) return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, left);
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return -1;
  }
}

static void kick(int efd) {
  uint64_t one = 1;
  if (write(efd, &one, sizeof one) < 0 && errno != EAGAIN) perror("kick");
}

static void drain(int efd) {
  uint64_t v;
  if (read(efd, &v, sizeof v) < 0 && errno != EAGAIN) perror("drain");
}

/* ---- Corruption */

/* Where the consumer's tail lies in a ring's control block (shm_ring.c). */
#define CTL_TAIL 128

static void put64(uint8_t *p, uint64_t v) {
  __atomic_store_n((uint64_t *)(void *)p, v, __ATOMIC_RELEASE);
}

/* A record header {stamp, len, type} at ring position |pos| (stamp
 * |stamp|; the other fields zero). */
static void put_hdr(nexar__shm_ring_t *w, uint64_t pos, uint64_t stamp,
                    uint32_t len, uint16_t type) {
  uint8_t *at = w->data + (pos & (w->cap - 1));
  uint8_t hdr[NEXAR__SHM_REC_HDR - 8] = {0};
  memcpy(hdr, &len, 4);
  memcpy(hdr + 4, &type, 2);
  memcpy(at + 8, hdr, sizeof hdr);
  put64(at, stamp);
}

void sp_corrupt(nexar__shm_ring_t *w, uint64_t *s) {
  uint8_t *ctl = (uint8_t *)w->ctl;
  uint64_t cap = w->cap, mask = cap - 1;
  uint64_t tail =
      __atomic_load_n((uint64_t *)(void *)(ctl + CTL_TAIL), __ATOMIC_ACQUIRE);
  static const uint32_t lens[] = {0,    1,           40,          64,
                                  2000, 2016,        2017,        4064,
                                  4096, 0x7fffffffu, 0xffffffe0u, 0xffffffffu};
  int n = 1 + (int)(sp_rng(s) % 3);
  for (int k = 0; k < n; k++) {
    uint64_t x = sp_rng(s), y = sp_rng(s);
    uint32_t len = x & 1 ? lens[(x >> 1) % 12] : (uint32_t)(y >> 32);
    uint16_t type = (uint16_t)(y % 3 == 0 ? 0 : y >> 8);
    uint64_t at = (x >> 8) & mask & ~63ull;
    switch ((x >> 40) % 8) {
      case 0: /* the next record's header, stamped right */
        put_hdr(w, tail, tail ^ w->key, len, type);
        break;
      case 1: /* a few records on, stamped right for there */
        at = tail + 64 * (y % 40);
        put_hdr(w, at, at ^ w->key, len, type);
        break;
      case 2: /* any header anywhere, any stamp */
        put_hdr(w, at, y, len, type);
        break;
      case 3: /* the next record stamped for an earlier or a later lap */
        put_hdr(w, tail, (tail + cap * (y % 2 ? 1 : -1)) ^ w->key, 40, 5);
        break;
      case 4: /* a pad at the tail reaching the ring's end, or not */
        len = (uint32_t)(cap - (tail & mask) - NEXAR__SHM_REC_HDR +
                         64 * (y % 3) - 64);
        put_hdr(w, tail, tail ^ w->key, len, 0);
        break;
      case 5: /* a chain of stamped records of any length */
        for (uint64_t p = tail, i = 0; i < 1 + y % 6; i++) {
          uint32_t l = lens[(y >> (4 * i)) % 12];
          put_hdr(w, p, p ^ w->key, l, (uint16_t)(1 + i));
          p += (NEXAR__SHM_REC_HDR + (uint64_t)l + 63) & ~63ull;
        }
        break;
      case 6: /* bytes anywhere */
        for (int i = 0; i < 16; i++) w->data[sp_rng(s) & mask] = (uint8_t)y;
        break;
      default: /* everything, then the tail stamped */
        for (uint64_t i = 0; i < cap; i += 8) put64(w->data + i, sp_rng(s));
        put64(w->data + (tail & mask), tail ^ w->key);
        break;
    }
  }
}

/* ---- Hostile process */

typedef struct hostile {
  nexar__shm_seg_t seg;
  int ms;
  int *stop; /* shared with the child: the parent is done */
} hostile_t;

/* The parent may be starved on a loaded host, so the scribbler runs until
 * told to stop (or at a hard cap), not for a time of its own. */
#define HOSTILE_CAP_MS 30000

static int scribble_child(void *arg) {
  hostile_t *w = arg; /* the parent's mapping, inherited */
  uint64_t s = 0xbad;
  double end = nt_now_ms() + w->ms + HOSTILE_CAP_MS;
  while (nt_now_ms() < end && !__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
    sp_corrupt(&w->seg.tx, &s);
    if (sp_rng(&s) % 4 == 0) usleep(10);
  }
  return 0;
}

int sp_hostile_run(int ms, long *protos, long *recs) {
  hostile_t w = {.ms = ms};
  w.stop = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                -1, 0);
  NT_CHECKF(w.stop != MAP_FAILED, "mmap");
  NT_CHECKF(nexar__shm_seg_create(4096, &w.seg) == 0, "create");
  pid_t pid = sp_fork(scribble_child, &w);
  NT_CHECKF(pid > 0, "fork");
  /* At least |ms|, and on until 100 refusals were seen (a starved
   * scribbler may not have run yet), at most the cap. */
  double start = nt_now_ms(), end = start + ms, cap = end + HOSTILE_CAP_MS;
  int rc = 0;
  while (rc == 0 && nt_now_ms() < cap && (nt_now_ms() < end || *protos < 100)) {
    /* A fresh consumer of ring 0, reading from position 0 as on a new
     * segment: the tail the last one published is taken back, so that the
     * scribbler (who writes where the published tail says) aims at it. */
    nexar__shm_seg_t c;
    put64((uint8_t *)w.seg.tx.ctl + CTL_TAIL, 0);
    int fd = dup(w.seg.fd);
    if (nexar__shm_seg_attach(fd, &c) != 0) rc = 1;
    for (int i = 0; i < 1000 && rc == 0; i++) {
      nexar__shm_rec_t r;
      int got = nexar__shm_ring_peek(&c.rx, &r);
      if (got < 0) {
        if (got != NEXAR_ERR_PROTO) rc = 1;
        ++*protos;
        break;
      }
      if (got == 0) continue;
      const uint8_t *p = r.payload, *lo = c.rx.data, *hi = lo + c.rx.cap;
      if (p < lo + 24 || p > hi || r.len > (uint64_t)(hi - p) ||
          r.type == NEXAR__SHM_PAD)
        rc = 1;
      ++*recs;
      nexar__shm_ring_pop(&c.rx);
    }
    nexar__shm_seg_close(&c);
  }
  __atomic_store_n(w.stop, 1, __ATOMIC_RELAXED);
  if (rc) kill(pid, SIGKILL);
  int st = sp_reap(pid, 5000);
  nexar__shm_seg_close(&w.seg);
  munmap(w.stop, 4096);
  NT_CHECKF(rc == 0, "a bad record or result (%ld so far)", *recs);
  NT_CHECKF(st == 0, "scribbler status %d", st);
  return 0;
}

/* ---- Stream */

#define SRC_BYTES (4u << 20)
#define SPIN_ROUNDS 2000
#define BATCH 64

typedef struct gen {
  uint64_t s, left, i;
} gen_t;

/* The next record of a stream: 1 in 4 from the edge sizes, the rest
 * uniform up to the largest; 0 when |left| bytes were sent. */
static int gen_next(gen_t *g, uint32_t max, uint32_t *len, uint64_t *off) {
  if (g->left == 0) return 0;
  const uint32_t edge[] = {0,   1,    63,   64,      65, 127,
                           128, 4095, 4096, max - 1, max};
  uint64_t x = sp_rng(&g->s);
  uint32_t n = g->i % 4 == 0 ? edge[(x >> 8) % 11] : (x >> 8) % (max + 1ull);
  *len = n < g->left ? n : (uint32_t)g->left;
  *off = (x >> 40) % (SRC_BYTES - max);
  g->left -= *len;
  g->i++;
  return 1;
}

static uint8_t *src_make(uint64_t seed) {
  uint8_t *p = malloc(SRC_BYTES);
  if (!p) return NULL;
  for (size_t i = 0; i < SRC_BYTES; i += 8) {
    uint64_t v = sp_rng(&seed);
    memcpy(p + i, &v, 8);
  }
  return p;
}

typedef struct end {
  nexar__shm_seg_t seg;
  int wake, kick, ep;
  const uint8_t *src_tx, *src_rx;
  gen_t gtx, grx;
  double deadline;
  long sleeps;
} end_t;

static uint16_t type_of(uint64_t i) {
  return (uint16_t)(1 + i % 65535);
}
static uint16_t flags_of(uint64_t i) {
  return (uint16_t)(i * 2654435761u);
}

/* Record |i|: reserved and committed in place (1 in 3) or put from two
 * iovecs. */
static int put_rec(nexar__shm_ring_t *r, uint64_t i, const uint8_t *p,
                   uint32_t len, uint64_t off) {
  if (i % 3 == 0) {
    void *at;
    int rc = nexar__shm_ring_reserve(r, len, &at);
    if (rc != 0) return rc;
    memcpy(at, p, len);
    return nexar__shm_ring_commit(r, type_of(i), flags_of(i), i, off, len);
  }
  struct iovec v[2] = {{(void *)p, len / 2},
                       {(void *)(p + len / 2), len - len / 2}};
  return nexar__shm_ring_put(r, type_of(i), flags_of(i), i, off, v, 2);
}

static int stream_loop(end_t *e) {
  nexar__shm_ring_t *tx = &e->seg.tx, *rx = &e->seg.rx;
  const uint32_t max = nexar__shm_ring_max_payload(tx);
  uint32_t len = 0, rlen = 0;
  uint64_t off = 0, roff = 0, itx = 0, irx = 0;
  int have = gen_next(&e->gtx, max, &len, &off);
  int want = gen_next(&e->grx, max, &rlen, &roff);
  int idle = 0;
  while (have || want) {
    NT_CHECKF(nt_now_ms() < e->deadline, "sent %llu received %llu records",
              (unsigned long long)itx, (unsigned long long)irx);
    int moved = 0, ate = 0, rc = 0;
    for (; have && moved < BATCH; moved++) {
      rc = put_rec(tx, itx, e->src_tx + off, len, off);
      if (rc == NEXAR__SHM_AGAIN) break;
      NT_CHECKF(rc == 0, "put %d", rc);
      itx++;
      have = gen_next(&e->gtx, max, &len, &off);
    }
    if (moved && nexar__shm_ring_need_kick(tx)) kick(e->kick);
    nexar__shm_rec_t r;
    for (; want && ate < BATCH; ate++) {
      rc = nexar__shm_ring_peek(rx, &r);
      NT_CHECKF(rc >= 0, "peek %d at record %llu", rc, (unsigned long long)irx);
      if (rc == 0) break;
      NT_CHECKF(r.a == irx && r.len == rlen && r.b == roff &&
                    r.type == type_of(irx) && r.flags == flags_of(irx),
                "record %llu: len %u type %u a %llu", (unsigned long long)irx,
                r.len, r.type, (unsigned long long)r.a);
      NT_CHECKF(memcmp(r.payload, e->src_rx + roff, rlen) == 0,
                "payload of record %llu", (unsigned long long)irx);
      nexar__shm_ring_pop(rx);
      irx++;
      want = gen_next(&e->grx, max, &rlen, &roff);
    }
    if (ate && nexar__shm_ring_need_kick_space(rx)) kick(e->kick);
    if (moved || ate || ++idle < SPIN_ROUNDS) {
      idle = moved || ate ? 0 : idle;
      continue;
    }
    idle = 0;
    if (want && !nexar__shm_ring_consumer_sleep(rx)) continue;
    if (have && !nexar__shm_ring_producer_sleep(tx, len)) continue;
    /* No timeout but the deadline: a lost wakeup fails the test. */
    struct epoll_event ev[2];
    int n = epoll_wait(e->ep, ev, 2, (int)(e->deadline - nt_now_ms()) + 1);
    NT_CHECKF(n >= 0 || errno == EINTR, "epoll_wait: %s", strerror(errno));
    drain(e->wake);
    e->sleeps++;
  }
  return 0;
}

/* Sets up |e|'s epoll and sources, runs the stream, prints the rate. */
static int stream_side(end_t *e, const char *who, uint64_t bytes, int parent) {
  uint64_t seeds[2] = {0x1111, 0x2222};
  uint8_t *a = src_make(seeds[!parent]), *b = src_make(seeds[parent]);
  e->ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  NT_CHECKF(a && b && e->ep >= 0, "setup");
  NT_CHECKF(epoll_ctl(e->ep, EPOLL_CTL_ADD, e->wake, &ev) == 0, "epoll_ctl");
  e->src_tx = a;
  e->src_rx = b;
  e->gtx = (gen_t){.s = seeds[!parent] + 1, .left = bytes};
  e->grx = (gen_t){.s = seeds[parent] + 1, .left = bytes};
  double t0 = nt_now_ms();
  int rc = stream_loop(e);
  double dt = (nt_now_ms() - t0) / 1e3;
  if (rc == 0)
    printf(
        "stream (%s): %.0f MiB each way in %.2f s: %.2f GB/s each way, "
        "%.2f GB/s both; %llu records sent, %ld sleeps in epoll\n",
        who, bytes / 1048576.0, dt, bytes / dt / 1e9, 2 * bytes / dt / 1e9,
        (unsigned long long)e->gtx.i, e->sleeps);
  free(a);
  free(b);
  close(e->ep);
  return rc;
}

typedef struct stream_arg {
  uint8_t nonce[16];
  uint64_t bytes;
  int timeout_ms;
} stream_arg_t;

static int stream_child(void *arg) {
  stream_arg_t *sa = arg;
  end_t e = {.deadline = nt_now_ms() + sa->timeout_ms};
  int sock, fds[3], nfds;
  char msg[16];
  nexar__shm_cred_t cred;
  NT_CHECKF(nexar__shm_connect(sa->nonce, &sock) == 0, "connect");
  NT_CHECKF(nexar__shm_peer_cred(sock, &cred) == 0 && cred.pid == getppid(),
            "listener pid %d", (int)cred.pid);
  NT_CHECKF(wait_in(sock, e.deadline) == 0, "no segment");
  int n = nexar__shm_recv_fds(sock, fds, 3, &nfds, msg, sizeof msg, &cred);
  NT_CHECKF(n == 4 && nfds == 3 && memcmp(msg, "shm1", 4) == 0, "recv %d", n);
  NT_CHECKF(cred.pid == getppid() && cred.uid == getuid(), "sender pid %d",
            (int)cred.pid);
  NT_CHECKF(nexar__shm_seg_attach(fds[0], &e.seg) == 0, "attach");
  e.wake = fds[1];
  e.kick = fds[2];
  return stream_side(&e, "child", sa->bytes, 0);
}

/* The parent's side once the child runs: accept it, check that it is
 * the child, send the segment and the eventfds, stream. */
static int stream_parent(end_t *e, int lfd, pid_t pid, uint64_t bytes) {
  int sock;
  nexar__shm_cred_t cred;
  NT_CHECKF(wait_in(lfd, e->deadline) == 0, "no connection");
  NT_CHECKF(nexar__shm_accept(lfd, &sock) == 0, "accept");
  NT_CHECKF(nexar__shm_peer_cred(sock, &cred) == 0 && cred.pid == pid &&
                cred.uid == getuid(),
            "connected pid %d, child %d", (int)cred.pid, (int)pid);
  NT_CHECKF(nexar__shm_seg_create(1u << 20, &e->seg) == 0, "create");
  e->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  e->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  NT_CHECKF(e->wake >= 0 && e->kick >= 0, "eventfd");
  int fds[3] = {e->seg.fd, e->kick, e->wake}; /* child: wake = our kick */
  NT_CHECKF(nexar__shm_send_fds(sock, fds, 3, "shm1", 4) == 0, "send");
  close(sock);
  return stream_side(e, "parent", bytes, 1);
}

int sp_stream_run(uint64_t bytes, int timeout_ms) {
  stream_arg_t sa = {.bytes = bytes, .timeout_ms = timeout_ms};
  NT_CHECKF(getrandom(sa.nonce, 16, 0) == 16, "getrandom");
  int lfd, lfd2;
  NT_CHECKF(nexar__shm_listen(sa.nonce, &lfd) == 0, "listen");
  NT_CHECKF(nexar__shm_listen(sa.nonce, &lfd2) == NEXAR_ERR_TRANSPORT,
            "the name is taken");
  end_t e = {.deadline = nt_now_ms() + timeout_ms, .wake = -1, .kick = -1};
  pid_t pid = sp_fork(stream_child, &sa);
  NT_CHECKF(pid > 0, "fork");
  int rc = stream_parent(&e, lfd, pid, bytes);
  if (rc) kill(pid, SIGKILL);
  int st = sp_reap(pid, timeout_ms + 5000);
  close(lfd);
  close(e.wake);
  close(e.kick);
  nexar__shm_seg_close(&e.seg);
  NT_CHECKF(rc == 0 && st == 0, "parent %d, child status %d", rc, st);
  return 0;
}

/* ---- A segment over a socketpair, for the ping-pong and death tests. */

typedef struct pair {
  int sock[2];
  nexar__shm_seg_t seg;
  int efd; /* the parent's wake, written by the child */
  int rounds, ms;
} pair_t;

static int pair_open(pair_t *p, size_t ring) {
  NT_CHECKF(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p->sock) == 0,
            "socketpair");
  NT_CHECKF(nexar__shm_seg_create(ring, &p->seg) == 0, "create");
  p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  NT_CHECKF(p->efd >= 0, "eventfd");
  return 0;
}

/* In the child: the segment and the parent's eventfd from the parent,
 * whose credentials are checked. */
static int pair_child(pair_t *p, nexar__shm_seg_t *seg, int *efd) {
  int fds[2], nfds;
  char msg[8];
  nexar__shm_cred_t cred;
  close(p->sock[0]);
  nexar__shm_seg_close(&p->seg); /* the inherited mapping: use the fd */
  NT_CHECKF(wait_in(p->sock[1], nt_now_ms() + 10000) == 0, "no segment");
  int n =
      nexar__shm_recv_fds(p->sock[1], fds, 2, &nfds, msg, sizeof msg, &cred);
  NT_CHECKF(n == 1 && nfds == 2, "recv %d", n);
  NT_CHECKF(cred.pid == getppid() && cred.uid == getuid(), "sender");
  NT_CHECKF(nexar__shm_seg_attach(fds[0], seg) == 0, "attach");
  *efd = fds[1];
  return 0;
}

static int pair_send(pair_t *p) {
  close(p->sock[1]);
  int fds[2] = {p->seg.fd, p->efd};
  NT_CHECKF(nexar__shm_send_fds(p->sock[0], fds, 2, "s", 1) == 0, "send");
  return 0;
}

static void pair_close(pair_t *p) {
  close(p->sock[0]);
  close(p->efd);
  nexar__shm_seg_close(&p->seg);
}

static int pong_child(void *arg) {
  nexar__shm_seg_t seg;
  int efd;
  if (pair_child(arg, &seg, &efd)) return 1;
  double end = nt_now_ms() + 20000;
  for (uint64_t spins = 0;; spins++) {
    nexar__shm_rec_t r;
    int rc = nexar__shm_ring_peek(&seg.rx, &r);
    NT_CHECKF(rc >= 0, "peek %d", rc);
    if (rc == 0) {
      NT_CHECKF(spins % 4096 || nt_now_ms() < end, "no ping");
      continue;
    }
    uint64_t v;
    memcpy(&v, r.payload, 8);
    nexar__shm_ring_pop(&seg.rx);
    if (r.type == 2) return 0;
    struct iovec io = {&v, 8};
    NT_CHECKF(nexar__shm_ring_put(&seg.tx, 1, 0, r.a, 0, &io, 1) == 0, "put");
  }
}

int sp_pingpong_run(int rounds, int ms) {
  pair_t p;
  if (pair_open(&p, 65536)) return 1;
  pid_t pid = sp_fork(pong_child, &p);
  NT_CHECKF(pid > 0 && pair_send(&p) == 0, "start");
  double t0 = 0, end = nt_now_ms() + ms, stuck = end + 10000;
  int i, rc = 0, warm = 100;
  for (i = 0; i < warm + rounds && rc == 0; i++) {
    if (i == warm) t0 = nt_now_ms(), end = t0 + ms;
    if (i > warm && nt_now_ms() > end) break;
    uint64_t v = (uint64_t)i * 0x9e3779b97f4a7c15ull, back;
    struct iovec io = {&v, 8};
    nexar__shm_rec_t r;
    if (nexar__shm_ring_put(&p.seg.tx, 1, 0, (uint64_t)i, 0, &io, 1) != 0)
      rc = 1;
    for (uint64_t spins = 0; rc == 0; spins++) {
      int got = nexar__shm_ring_peek(&p.seg.rx, &r);
      if (got == 1) break;
      if (got < 0 || (spins % 4096 == 0 && nt_now_ms() > stuck)) rc = 1;
    }
    if (rc) break;
    memcpy(&back, r.payload, 8);
    rc = r.a != (uint64_t)i || r.len != 8 || back != v;
    nexar__shm_ring_pop(&p.seg.rx);
  }
  double dt = nt_now_ms() - t0;
  nexar__shm_ring_put(&p.seg.tx, 2, 0, 0, 0, &(struct iovec){&dt, 8}, 1);
  int st = sp_reap(pid, 15000);
  pair_close(&p);
  NT_CHECKF(rc == 0 && st == 0, "round %d: parent %d, child status %d", i, rc,
            st);
  printf(
      "ping-pong: %d round trips of an 8-byte record, busy polling: "
      "%.2f us per round trip\n",
      i - warm, dt * 1e3 / (i - warm));
  return 0;
}

/* ---- Cross-memory attach */

#define CMA_BYTES (1u << 20)
static uint8_t cma_buf[CMA_BYTES];

static void cma_fill(uint8_t *p) {
  uint64_t s = 77;
  for (size_t i = 0; i < CMA_BYTES; i += 8) {
    uint64_t v = sp_rng(&s);
    memcpy(p + i, &v, 8);
  }
}

static int cma_child(void *arg) {
  int *pipes = arg; /* ready[2], go[2] */
  close(pipes[0]);
  close(pipes[3]);
  cma_fill(cma_buf); /* after the fork: only this process has it */
  uint64_t addr = (uintptr_t)cma_buf;
  NT_CHECKF(write(pipes[1], &addr, 8) == 8, "ready");
  return wait_in(pipes[2], nt_now_ms() + 10000) ? 1 : 0;
}

/* As uid 65534: reading the (root) parent must be refused. */
static int cma_nobody(void *arg) {
  (void)arg;
  if (setgid(65534) != 0 || setuid(65534) != 0) return 77;
  uint8_t b[8];
  NT_CHECKF(nexar__shm_cma_probe(getppid()) == NEXAR_ERR_UNSUPPORTED, "probe");
  NT_CHECKF(nexar__shm_cma_read(getppid(), b, (uintptr_t)cma_buf, 8) ==
                NEXAR_ERR_UNSUPPORTED,
            "read");
  return 0;
}

int sp_cma_run(void) {
  int pipes[4], *ready = pipes, *go = pipes + 2;
  NT_CHECKF(pipe(ready) == 0 && pipe(go) == 0, "pipe");
  memset(cma_buf, 0, CMA_BYTES);
  pid_t pid = sp_fork(cma_child, pipes);
  NT_CHECKF(pid > 0, "fork");
  uint64_t addr = 0;
  int rc = wait_in(ready[0], nt_now_ms() + 10000) != 0 ||
           read(ready[0], &addr, 8) != 8;
  int probe = rc ? 0 : nexar__shm_cma_probe(pid);
  uint8_t *want = malloc(CMA_BYTES), *got = malloc(CMA_BYTES);
  if (!rc && probe == NEXAR_ERR_UNSUPPORTED) {
    printf("cma: process_vm_readv not permitted here (EPERM): skipped\n");
  } else if (!rc) {
    cma_fill(want);
    memset(got, 0, CMA_BYTES);
    rc = probe != 0 || nexar__shm_cma_read(pid, got, addr, CMA_BYTES) != 0 ||
         memcmp(got, want, CMA_BYTES) != 0 ||
         nexar__shm_cma_read(pid, got, 4096, 16) != NEXAR_ERR_PROTO ||
         nexar__shm_cma_read(pid, got, UINT64_MAX - 4, 16) != NEXAR_ERR_PROTO;
    if (!rc) printf("cma: 1 MiB read from the child, bit-exact\n");
  }
  close(go[1]); /* the child exits */
  int st = sp_reap(pid, 10000);
  NT_CHECKF(rc == 0 && st == 0, "probe %d, child status %d", probe, st);
  NT_CHECKF(nexar__shm_cma_read(pid, got, addr, 16) == NEXAR_ERR_PEER_FAILED,
            "a process gone");
  free(want);
  free(got);
  for (int i = 0; i < 2; i++) close(ready[i]), close(go[i]);
  if (geteuid() == 0) {
    st = sp_reap(sp_fork(cma_nobody, NULL), 10000);
    if (st == 77) printf("cma: cannot become uid 65534: EPERM check skipped\n");
    NT_CHECKF(st == 0 || st == 77, "uid 65534 child status %d", st);
  }
  return 0;
}

/* ---- A peer killed mid-stream */

#define DEATH_RECS 3000

static int death_child(void *arg) {
  nexar__shm_seg_t seg;
  int efd;
  uint8_t buf[1000];
  if (pair_child(arg, &seg, &efd)) return 1;
  double end = nt_now_ms() + 10000;
  for (uint64_t i = 0; i < DEATH_RECS;) {
    memset(buf, (int)(i & 0xff), sizeof buf);
    int rc = nexar__shm_ring_put(&seg.tx, 1, 0, i, 0,
                                 &(struct iovec){buf, sizeof buf}, 1);
    NT_CHECKF(rc == 0 || rc == NEXAR__SHM_AGAIN, "put %d", rc);
    NT_CHECKF(nt_now_ms() < end, "stuck at %llu", (unsigned long long)i);
    if (rc == 0) i++;
    if (nexar__shm_ring_need_kick(&seg.tx)) kick(efd);
    if (rc) sched_yield();
  }
  void *p; /* half a record, never committed */
  while (nexar__shm_ring_reserve(&seg.tx, 1000, &p) == NEXAR__SHM_AGAIN)
    sched_yield();
  memset(p, 0xee, 500);
  raise(SIGKILL);
  return 1;
}

int sp_death_run(void) {
  pair_t p;
  if (pair_open(&p, 65536)) return 1;
  pid_t pid = sp_fork(death_child, &p);
  NT_CHECKF(pid > 0, "fork");
  int pfd = nexar__shm_pidfd_open(pid);
  if (pfd < 0) {
    printf("pidfd_open unsupported (%s): death check skipped\n",
           strerror(errno));
    kill(pid, SIGKILL);
    sp_reap(pid, 5000);
    pair_close(&p);
    return 0;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC), rc = pair_send(&p);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = p.efd};
  epoll_ctl(ep, EPOLL_CTL_ADD, p.efd, &ev);
  ev.data.fd = pfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, pfd, &ev);
  uint64_t got = 0;
  int dead = 0;
  double end = nt_now_ms() + 10000;
  while (rc == 0 && nt_now_ms() < end) {
    nexar__shm_rec_t r;
    int n = nexar__shm_ring_peek(&p.seg.rx, &r);
    if (n == 1) {
      const uint8_t *b = r.payload;
      rc = r.a != got || r.len != 1000 || b[0] != (got & 0xff) ||
           b[999] != (got & 0xff);
      nexar__shm_ring_pop(&p.seg.rx);
      got++;
      continue;
    }
    if (n < 0 || dead) { /* after the death: everything was drained */
      rc = n < 0;
      break;
    }
    if (!nexar__shm_ring_consumer_sleep(&p.seg.rx)) continue;
    struct epoll_event out[2];
    int k = epoll_wait(ep, out, 2, (int)(end - nt_now_ms()) + 1);
    for (int i = 0; i < k; i++) {
      if (out[i].data.fd == pfd)
        dead = 1;
      else
        drain(p.efd);
    }
  }
  close(ep);
  close(pfd);
  int st = sp_reap(pid, 10000);
  pair_close(&p);
  NT_CHECKF(rc == 0 && dead, "rc %d, pidfd readable %d, %llu records", rc, dead,
            (unsigned long long)got);
  NT_CHECKF(got == DEATH_RECS, "%llu records", (unsigned long long)got);
  NT_CHECKF(st == 128 + SIGKILL, "child status %d", st);
  printf(
      "death: pidfd readable after SIGKILL, %d records intact, the "
      "half-written one absent\n",
      DEATH_RECS);
  return 0;
}

/* ---- Wake-ups raced: a consumer that sleeps as soon as its ring is empty,
 * a producer that writes one record at a time after a random pause. */

static int wake_child(void *arg) {
  pair_t *p = arg;
  nexar__shm_seg_t seg;
  int efd;
  if (pair_child(p, &seg, &efd)) return 1;
  uint64_t s = 77;
  double end = nt_now_ms() + 20000;
  for (uint64_t i = 0; i < (uint64_t)p->rounds;) {
    int rc = nexar__shm_ring_put(&seg.tx, 1, 0, i, ~i,
                                 &(struct iovec){&i, sizeof i}, 1);
    NT_CHECKF(rc == 0 || rc == NEXAR__SHM_AGAIN, "put %d", rc);
    NT_CHECKF(nt_now_ms() < end, "stuck at %llu", (unsigned long long)i);
    if (rc == 0) i++;
    if (nexar__shm_ring_need_kick(&seg.tx)) kick(efd);
    uint64_t x = sp_rng(&s), n = x % 4 == 0 ? 0 : (x >> 8) % 3000;
    for (volatile uint64_t k = 0; k < n; k++) {
    }
    if (x % 64 == 1) sched_yield();
    if (x % 32 == 2) usleep(20); /* long enough for the consumer to sleep */
  }
  return 0;
}

int sp_wake_run(int records, int *sleeps) {
  pair_t p;
  if (pair_open(&p, 4096)) return 1;
  p.rounds = records;
  pid_t pid = sp_fork(wake_child, &p);
  NT_CHECKF(pid > 0, "fork");
  int rc = pair_send(&p);
  struct pollfd pf = {.fd = p.efd, .events = POLLIN};
  uint64_t got = 0;
  *sleeps = 0;
  while (rc == 0 && got < (uint64_t)records) {
    nexar__shm_rec_t r;
    int n = nexar__shm_ring_peek(&p.seg.rx, &r);
    if (n == 1) {
      uint64_t v;
      memcpy(&v, r.payload, sizeof v);
      rc = r.a != got || r.b != ~got || r.len != sizeof v || v != got;
      nexar__shm_ring_pop(&p.seg.rx);
      got++;
      continue;
    }
    /* Stale kicks (of a flag the consumer took back) go first: a lost
     * one must not be covered by them. */
    drain(p.efd);
    if (n < 0 || nexar__shm_ring_consumer_sleep(&p.seg.rx) != 1) {
      rc = n < 0;
      continue;
    }
    /* A kick lost: the record waits, and this poll times out. */
    (*sleeps)++;
    int k = poll(&pf, 1, 3000);
    if (k == 1) drain(p.efd);
    rc = k != 1;
  }
  if (rc) kill(pid, SIGKILL);
  int st = sp_reap(pid, 10000);
  pair_close(&p);
  NT_CHECKF(rc == 0 && st == 0,
            "after %llu records (%d sleeps): rc %d, "
            "child %d",
            (unsigned long long)got, *sleeps, rc, st);
  printf("wake: %d records, %d sleeps each woken by its kick\n", records,
         *sleeps);
  return 0;
}
