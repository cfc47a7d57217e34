/*
 * Point-to-point tests over real multi-process clusters: ring exchange,
 * FIFO ordering, wildcard receives, truncation, empty messages, a 64 MiB
 * message, 10 000 unexpected small messages (bounded store + flow control),
 * concurrent isend/irecv in both directions, messages that reuse pooled
 * buffers (eager copies, unexpected prefixes), and a 64 MiB send whose
 * sender makes no call until it has arrived (shared memory and QUIC).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

enum {
  C_RING,
  C_ORDER,
  C_ANY,
  C_TRUNC,
  C_ZERO,
  C_BIG,
  C_MANY,
  C_BIDIR,
  C_POOL,
  C_IDLE
};

static int case_ring(nexar_comm_t *w, int r, int n) {
  int v = r * 10 + 3, got = -1;
  nexar_status_t st;
  NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT32, (r + 1) % n, 7));
  NT_OKC(w, nexar_recv(w, &got, 1, NEXAR_INT32, (r - 1 + n) % n, 7, &st));
  NT_CHECKF(got == ((r - 1 + n) % n) * 10 + 3, "got %d", got);
  NT_CHECKF(st.source == (r - 1 + n) % n && st.tag == 7 && st.bytes == 4,
            "status src %d tag %d bytes %zu", st.source, st.tag, st.bytes);
  return 0;
}

/* Sender rank 0, receiver rank 1 (or 0 itself in a world of one). */
static int case_order(nexar_comm_t *w, int r, int n) {
  int dst = n > 1 ? 1 : 0;
  int vals[100];
  nexar_req_t *reqs[100] = {0};
  if (r == 0)
    for (int i = 0; i < 100; i++) {
      vals[i] = i;
      NT_OKC(w, nexar_isend(w, &vals[i], 1, NEXAR_INT32, dst, 11, &reqs[i]));
    }
  if (r == dst)
    for (int i = 0; i < 100; i++) {
      int got = -1;
      NT_OKC(w, nexar_recv(w, &got, 1, NEXAR_INT32, 0, 11, NULL));
      NT_CHECKF(got == i, "message %d carried %d", i, got);
    }
  if (r == 0) NT_OKC(w, nexar_waitall(100, reqs, NULL));
  return 0;
}

static int case_any(nexar_comm_t *w, int r, int n) {
  if (r != 0) {
    int v = r * 1000;
    NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT32, 0, r));
    return 0;
  }
  int seen[8] = {0};
  for (int k = 0; k < n - 1; k++) {
    int got = -1;
    nexar_status_t st;
    NT_OKC(w, nexar_recv(w, &got, 1, NEXAR_INT32, NEXAR_ANY_SOURCE,
                         NEXAR_ANY_TAG, &st));
    NT_CHECKF(st.source >= 1 && st.source < n, "source %d", st.source);
    NT_CHECKF(st.tag == st.source, "tag %d source %d", st.tag, st.source);
    NT_CHECKF(st.bytes == 4, "bytes %zu", st.bytes);
    NT_CHECKF(got == st.source * 1000, "value %d from %d", got, st.source);
    NT_CHECKF(!seen[st.source], "source %d arrived twice", st.source);
    seen[st.source] = 1;
  }
  return 0;
}

static int case_trunc(nexar_comm_t *w, int r, int n) {
  int dst = n > 1 ? 1 : 0;
  uint8_t big[100], small[50], next[16];
  nexar_req_t *reqs[2] = {0};
  nt_fill(big, sizeof big, 5);
  nt_fill(next, sizeof next, 6);
  if (r == 0) {
    NT_OKC(w, nexar_isend(w, big, sizeof big, NEXAR_BYTE, dst, 5, &reqs[0]));
    NT_OKC(w, nexar_isend(w, next, sizeof next, NEXAR_BYTE, dst, 5, &reqs[1]));
  }
  if (r == dst) {
    nexar_status_t st;
    memset(small, 0, sizeof small);
    int rc = nexar_recv(w, small, sizeof small, NEXAR_BYTE, 0, 5, &st);
    NT_CHECKF(rc == NEXAR_ERR_TRUNCATE, "rc %s", nexar_err_name(rc));
    NT_CHECKF(st.bytes == 100, "status.bytes %zu", st.bytes);
    NT_CHECKF(nt_check_fill(small, 50, 5) == 50, "first 50 bytes differ");
    uint8_t got[16] = {0};
    NT_OKC(w, nexar_recv(w, got, sizeof got, NEXAR_BYTE, 0, 5, &st));
    NT_CHECKF(st.bytes == 16 && nt_check_fill(got, 16, 6) == 16,
              "follow-up message wrong (bytes %zu)", st.bytes);
  }
  if (r == 0) NT_OKC(w, nexar_waitall(2, reqs, NULL));
  return 0;
}

static int case_zero(nexar_comm_t *w, int r, int n) {
  int dst = n > 1 ? 1 : 0;
  nexar_req_t *req = NULL;
  int dummy = 0;
  if (r == 0) NT_OKC(w, nexar_isend(w, &dummy, 0, NEXAR_INT32, dst, 9, &req));
  if (r == dst) {
    int buf[4] = {77, 77, 77, 77};
    nexar_status_t st;
    NT_OKC(w, nexar_recv(w, buf, 4, NEXAR_INT32, 0, 9, &st));
    NT_CHECKF(st.bytes == 0 && st.source == 0 && st.tag == 9,
              "bytes %zu src %d tag %d", st.bytes, st.source, st.tag);
    NT_CHECK(buf[0] == 77);
  }
  if (r == 0) NT_OKC(w, nexar_wait(&req, NULL));
  return 0;
}

/* Sizes around the eager limit (128 KiB by default: the stream window
 * before a receive is matched), where the window extension is smallest,
 * then 64 MiB; each sent once to a posted receive and once unexpected. */
static int case_big(nexar_comm_t *w, int r) {
  const size_t eager = 131072;
  const size_t sizes[] = {eager - 1,     eager,         eager + 1,       140000,
                          eager * 3 / 2, eager * 2 + 1, (size_t)64 << 20};
  size_t nmax = (size_t)64 << 20;
  uint8_t *b = malloc(nmax);
  NT_CHECK(b);
  for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    for (int late = 0; late < 2; late++) {
      size_t n = sizes[i];
      unsigned seed = 42 + i * 2 + (unsigned)late;
      if (r == 0) {
        nt_fill(b, n, seed);
        NT_OKC(w, nexar_send(w, b, n, NEXAR_BYTE, 1, 1));
      } else {
        if (late) {
          struct timespec ts = {0, 20 * 1000000};
          nanosleep(&ts, NULL); /* the message arrives unexpected */
        }
        memset(b, 0, n);
        nexar_status_t st;
        NT_OKC(w, nexar_recv(w, b, n, NEXAR_BYTE, 0, 1, &st));
        NT_CHECKF(st.bytes == n, "bytes %zu of %zu", st.bytes, n);
        size_t bad = nt_check_fill(b, n, seed);
        NT_CHECKF(bad == n, "%zu-byte message: mismatch at byte %zu", n, bad);
      }
    }
  }
  free(b);
  return 0;
}

#define MANY 10000
static int case_many(nexar_comm_t *w, int r) {
  int64_t *v = calloc(MANY, sizeof *v);
  nexar_req_t **reqs = calloc(MANY, sizeof *reqs);
  NT_CHECK(v && reqs);
  if (r == 0) {
    for (int i = 0; i < MANY; i++) {
      v[i] = (int64_t)i * 1000003 + 17;
      NT_OKC(w, nexar_isend(w, &v[i], 1, NEXAR_INT64, 1, 3, &reqs[i]));
    }
    /* Every isend is issued: let rank 1 start receiving. The barrier runs
     * on the control lane, so the data backlog must not hold it up. */
    NT_OKC(w, nexar_barrier(w));
    NT_OKC(w, nexar_waitall(MANY, reqs, NULL));
  } else {
    NT_OKC(w, nexar_barrier(w));
    usleep(200 * 1000); /* let the unexpected store fill up */
    for (int i = 0; i < MANY; i++) {
      int64_t got = -1;
      NT_OKC(w, nexar_recv(w, &got, 1, NEXAR_INT64, 0, 3, NULL));
      NT_CHECKF(got == (int64_t)i * 1000003 + 17, "message %d carried %lld", i,
                (long long)got);
    }
  }
  free(v);
  free(reqs);
  return 0;
}

/* Eager copies and unexpected prefixes from 16 KiB to the eager size come
 * from a pool of eager-sized buffers and go back to it (p2p/send.c): each
 * message lands in a buffer that held an earlier, longer one. Every message
 * has a fill of its own; the sender overwrites its buffer as soon as a send
 * returns (an eager send is copied by then); every other receive is posted
 * late, so that its message waits unexpected. */
#define POOL_MSGS 96
static size_t pool_size(int i) {
  const size_t lo = 16384, hi = 131072;
  if (i % 8 == 0) return i % 16 ? lo - 1 : hi; /* around the pool's bounds */
  return lo + ((size_t)i * 7919u * 13u) % (hi - lo + 1);
}

static int case_pool(nexar_comm_t *w, int r) {
  uint8_t *b = malloc(131072);
  NT_CHECK(b);
  for (int i = 0; i < POOL_MSGS; i++) {
    size_t n = pool_size(i);
    unsigned seed = 900 + (unsigned)i;
    if (r == 0) {
      nt_fill(b, n, seed);
      NT_OKC(w, nexar_send(w, b, n, NEXAR_BYTE, 1, 7));
      memset(b, 0xA5, 131072);
    } else {
      if (i % 2) {
        struct timespec ts = {0, 2 * 1000000};
        nanosleep(&ts, NULL); /* the message arrives unexpected */
      }
      memset(b, 0x5A, 131072);
      nexar_status_t st;
      NT_OKC(w, nexar_recv(w, b, n, NEXAR_BYTE, 0, 7, &st));
      NT_CHECKF(st.bytes == n, "message %d: bytes %zu of %zu", i, st.bytes, n);
      size_t bad = nt_check_fill(b, n, seed);
      NT_CHECKF(bad == n, "message %d (%zu bytes): mismatch at byte %zu", i, n,
                bad);
    }
  }
  free(b);
  return 0;
}

#define BIDIR_MSGS 64
static size_t bidir_size(int k) {
  /* 1 B .. 1 MiB, spread over powers of two plus odd offsets. */
  size_t s = (size_t)1 << (k % 21);
  if (k % 3 == 1) s += (size_t)k * 7;
  if (s > ((size_t)1 << 20)) s = (size_t)1 << 20;
  return s;
}

static int case_bidir(nexar_comm_t *w, int r, int n) {
  size_t per = 0;
  for (int k = 0; k < BIDIR_MSGS; k++) per += bidir_size(k);
  size_t nreq = (size_t)2 * BIDIR_MSGS * (size_t)(n - 1);
  uint8_t *sbuf = malloc(per * (size_t)n), *rbuf = malloc(per * (size_t)n);
  nexar_req_t **reqs = calloc(nreq, sizeof *reqs);
  NT_CHECK(sbuf && rbuf && reqs);
  memset(rbuf, 0, per * (size_t)n);
  size_t q = 0;
  for (int p = 0; p < n; p++) {
    if (p == r) continue;
    size_t off = per * (size_t)p;
    for (int k = 0; k < BIDIR_MSGS; k++) {
      size_t s = bidir_size(k);
      NT_OKC(w, nexar_irecv(w, rbuf + off, s, NEXAR_BYTE, p, k, &reqs[q++]));
      off += s;
    }
  }
  for (int p = 0; p < n; p++) {
    if (p == r) continue;
    size_t off = per * (size_t)p;
    for (int k = 0; k < BIDIR_MSGS; k++) {
      size_t s = bidir_size(k);
      nt_fill(sbuf + off, s, (unsigned)(r * 100 + p * 10 + k));
      NT_OKC(w, nexar_isend(w, sbuf + off, s, NEXAR_BYTE, p, k, &reqs[q++]));
      off += s;
    }
  }
  NT_OKC(w, nexar_waitall(q, reqs, NULL));
  for (int p = 0; p < n; p++) {
    if (p == r) continue;
    size_t off = per * (size_t)p;
    for (int k = 0; k < BIDIR_MSGS; k++) {
      size_t s = bidir_size(k);
      size_t bad =
          nt_check_fill(rbuf + off, s, (unsigned)(p * 100 + r * 10 + k));
      NT_CHECKF(bad == s, "from %d msg %d (%zu B): mismatch at %zu", p, k, s,
                bad);
      off += s;
    }
  }
  free(sbuf);
  free(rbuf);
  free(reqs);
  return 0;
}

/* Set by rank 1 of case_idle once the whole message has arrived; shared
 * by the forked workers (mapped in main). */
static volatile int *idle_done;
#define IDLE_WAIT_MS 60000

/* A sender that walks away: rank 0 posts a 64 MiB isend (many passes of
 * writes, each held by the link's in-flight bound or ring) right after a
 * barrier, so its progress thread is parked, and then makes no nexar call
 * until rank 1 says through shared memory that the message has arrived.
 * Only the progress thread can carry it meanwhile: it must wake when the
 * post's next pass is due (core/engine.c, nexar__ep_leave moves its timer)
 * and, once callers stop driving, watch the transport for the receiver's
 * credit. */
static int case_idle(nexar_comm_t *w, int r) {
  const size_t n = (size_t)64 << 20;
  uint8_t *b = malloc(n);
  NT_CHECK(b);
  NT_OKC(w, nexar_barrier(w));
  if (r == 0) {
    nt_fill(b, n, 77);
    nexar_req_t *req = NULL;
    NT_OKC(w, nexar_isend(w, b, n, NEXAR_BYTE, 1, 9, &req));
    double t0 = nt_now_ms();
    while (!*idle_done && nt_now_ms() - t0 < IDLE_WAIT_MS) {
      struct timespec ts = {0, 2 * 1000000};
      nanosleep(&ts, NULL);
    }
    NT_CHECKF(*idle_done,
              "the 64 MiB message did not arrive in %d ms while "
              "its sender made no call",
              IDLE_WAIT_MS);
    NT_OKC(w, nexar_wait(&req, NULL));
  } else {
    nexar_status_t st;
    NT_OKC(w, nexar_recv(w, b, n, NEXAR_BYTE, 0, 9, &st));
    *idle_done = 1;
    NT_CHECKF(st.bytes == n, "bytes %zu of %zu", st.bytes, n);
    size_t bad = nt_check_fill(b, n, 77);
    NT_CHECKF(bad == n, "mismatch at byte %zu", bad);
  }
  free(b);
  return 0;
}

static int worker(int index, void *arg) {
  int c = *(const int *)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int rc = 0;
  switch (c) {
    case C_RING:
      rc = case_ring(w, r, n);
      break;
    case C_ORDER:
      rc = case_order(w, r, n);
      break;
    case C_ANY:
      rc = case_any(w, r, n);
      break;
    case C_TRUNC:
      rc = case_trunc(w, r, n);
      break;
    case C_ZERO:
      rc = case_zero(w, r, n);
      break;
    case C_BIG:
      rc = case_big(w, r);
      break;
    case C_MANY:
      rc = case_many(w, r);
      break;
    case C_BIDIR:
      rc = case_bidir(w, r, n);
      break;
    case C_POOL:
      rc = case_pool(w, r);
      break;
    case C_IDLE:
      rc = case_idle(w, r);
      break;
    default:
      rc = 1;
  }
  if (rc) return rc;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static const char *const names[] = {"ring",
                                    "order",
                                    "any_source_tag",
                                    "truncate",
                                    "zero",
                                    "big_eager_to_64MiB",
                                    "many_10000_unexpected",
                                    "bidir",
                                    "pooled_buffers",
                                    "idle_sender"};

static int run_case_env(int c, int world, int timeout_ms, const char *env) {
  nt_opts_t o = {.world_size = world, .timeout_ms = timeout_ms, .env = env};
  return nt_run_case(&o, worker, c, names[c]);
}

static int run_case(int c, int world, int timeout_ms) {
  return run_case_env(c, world, timeout_ms, NULL);
}

int main(void) {
  int fails = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* A fresh cluster per case and world size (bootstrap is cheap). */
  for (int world = 1; world <= 5; world++) {
    fails += run_case(C_RING, world, 60000);
    fails += run_case(C_ORDER, world, 60000);
    if (world > 1) fails += run_case(C_ANY, world, 60000);
    fails += run_case(C_TRUNC, world, 60000);
    fails += run_case(C_ZERO, world, 60000);
  }
  fails += run_case(C_BIG, 2, 120000);
  fails += run_case(C_MANY, 2, 120000);
  fails += run_case(C_BIDIR, 2, 120000);
  fails += run_case(C_BIDIR, 4, 120000);
  fails += run_case(C_POOL, 2, 60000);
  idle_done = mmap(NULL, sizeof *idle_done, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (idle_done == MAP_FAILED) return 1;
  const char *transports[] = {"NEXAR_TRANSPORT=auto", "NEXAR_TRANSPORT=quic"};
  for (int t = 0; t < 2; t++) {
    *idle_done = 0;
    printf("idle_sender: %s\n", transports[t]);
    fails += run_case_env(C_IDLE, 2, 120000, transports[t]);
  }
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
