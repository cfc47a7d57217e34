/*
 * Device adapters without a GPU: a fake "device" adapter over real
 * multi-process clusters (tests/harness.h).
 *
 * The fake device's memory is a registry of allocations, each a memfd
 * mapped twice: the "device" address, mapped PROT_NONE, and a shadow
 * mapping that only the adapter's copy operations (and the test's own
 * checks) use. classify looks a pointer up in the registry. Any direct
 * access to device memory by the engine (a missed staging) therefore
 * kills the worker with SIGSEGV, which fails the run. The adapter counts
 * every operation, so each case checks both the bit-exact result (whole
 * allocations compared, so bytes a call must leave alone are checked too)
 * and exactly how many classify / copy_to_host / copy_from_host /
 * synchronize calls it took: one classify per non-empty buffer, one
 * copy_to_host per device buffer the call reads, one copy_from_host per
 * contiguous range the call defines in a device buffer, one synchronize
 * per completion that copied data back.
 *
 * Cases, at world sizes 1 to 5: isend/irecv (eager and large messages,
 * shorter than the buffer, truncated), allreduce (every algorithm by size,
 * in place both ways, host/device mixes, count 0), bcast, reduce,
 * allgather(v) (with gaps), reduce_scatter(_block), alltoall(v), gather(v),
 * scatter(v), scan, exscan, in place where the call has it; a
 * non-blocking allreduce polled with nexar_test (the result reaches device
 * memory only at completion); nexar_reduce_local on the device and staged;
 * adapter errors (classify range, copy_to_host on every rank, copy_from_host
 * on one rank), with the communicator usable afterwards; adapter table
 * validation; the bounce-buffer cache (reuse, a zero cache, an alloc_host
 * that fails); NEXAR_DEVICE=bogus refused by nexar_init.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

/* ---- The fake device ---- */

#define FAKE_MAX 64
#define SENTINEL 0xA5

typedef struct fake_alloc {
  uint8_t *dev;    /* PROT_NONE: what the application and nexar see */
  uint8_t *shadow; /* read-write view of the same pages */
  size_t bytes;    /* requested size: classify refuses ranges past it */
  size_t map;      /* mapped size */
} fake_alloc_t;

typedef struct counts {
  long classify, to, to_bytes, from, from_bytes, alloc, freed, sync, reduce;
  long bad; /* copies with a wrong pointer: device as host or the reverse */
} counts_t;

static struct {
  pthread_mutex_t mu;
  fake_alloc_t a[FAKE_MAX];
  int n;
  _Atomic long classify, to, to_bytes, from, from_bytes, alloc, freed, sync,
      reduce, bad;
  _Atomic int fail_to, fail_from; /* fail the next copy of that kind */
  int alloc_null;                 /* alloc_host always returns NULL */
} F = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const fake_alloc_t *fake_find(const void *p) {
  const uint8_t *q = p;
  const fake_alloc_t *r = NULL;
  pthread_mutex_lock(&F.mu);
  for (int i = 0; i < F.n && !r; i++)
    if (q >= F.a[i].dev && q < F.a[i].dev + F.a[i].map) r = &F.a[i];
  pthread_mutex_unlock(&F.mu);
  return r;
}

/* The shadow address of [p, p + n) in device memory, or NULL when it is
 * not entirely inside one allocation. */
static uint8_t *shadow_of(const void *p, size_t n) {
  const fake_alloc_t *a = fake_find(p);
  if (!a) return NULL;
  size_t off = (size_t)((const uint8_t *)p - a->dev);
  if (off + n > a->bytes) return NULL;
  return a->shadow + off;
}

static void *dalloc(size_t bytes) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t map = (bytes + pg - 1) / pg * pg;
  if (!map) map = pg;
  int fd = memfd_create("nexar-fake-device", 0);
  if (fd < 0 || ftruncate(fd, (off_t)map) < 0) abort();
  uint8_t *dev = mmap(NULL, map, PROT_NONE, MAP_SHARED, fd, 0);
  uint8_t *sh = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (dev == MAP_FAILED || sh == MAP_FAILED) abort();
  memset(sh, SENTINEL, map);
  pthread_mutex_lock(&F.mu);
  if (F.n == FAKE_MAX) abort();
  F.a[F.n++] = (fake_alloc_t){dev, sh, bytes ? bytes : 1, map};
  pthread_mutex_unlock(&F.mu);
  return dev;
}

static void dfree(void *p) {
  pthread_mutex_lock(&F.mu);
  for (int i = 0; i < F.n; i++) {
    if (F.a[i].dev == p) {
      munmap(F.a[i].dev, F.a[i].map);
      munmap(F.a[i].shadow, F.a[i].map);
      F.a[i] = F.a[--F.n];
      break;
    }
  }
  pthread_mutex_unlock(&F.mu);
}

static int fake_classify(void *ud, const void *p, size_t bytes) {
  (void)ud;
  F.classify++;
  if (!fake_find(p)) return NEXAR_MEM_HOST;
  return shadow_of(p, bytes) ? NEXAR_MEM_DEVICE : NEXAR_ERR_INVALID_ARG;
}

static int fake_to_host(void *ud, void *dst, const void *src, size_t n) {
  (void)ud;
  F.to++;
  F.to_bytes += (long)n;
  if (F.fail_to) {
    F.fail_to = 0;
    return -1234; /* not a nexar code: becomes NEXAR_ERR_DEVICE */
  }
  uint8_t *s = shadow_of(src, n);
  if (!s || fake_find(dst)) {
    F.bad++;
    return NEXAR_ERR_INTERNAL;
  }
  memcpy(dst, s, n);
  return NEXAR_OK;
}

static int fake_from_host(void *ud, void *dst, const void *src, size_t n) {
  (void)ud;
  F.from++;
  F.from_bytes += (long)n;
  if (F.fail_from) {
    F.fail_from = 0;
    return NEXAR_ERR_DEVICE;
  }
  uint8_t *d = shadow_of(dst, n);
  if (!d || fake_find(src)) {
    F.bad++;
    return NEXAR_ERR_INTERNAL;
  }
  memcpy(d, src, n);
  return NEXAR_OK;
}

static void *fake_alloc_host(void *ud, size_t n) {
  (void)ud;
  F.alloc++;
  if (F.alloc_null) {
    F.freed++; /* nothing to free later */
    return NULL;
  }
  return malloc(n);
}

static void fake_free_host(void *ud, void *p, size_t n) {
  (void)ud;
  (void)n;
  F.freed++;
  free(p);
}

static int fake_sync(void *ud) {
  (void)ud;
  F.sync++;
  return NEXAR_OK;
}

/* Device reduction for int32 SUM only; everything else is declined. */
static int fake_reduce(void *ud, void *dst, const void *src, size_t count,
                       nexar_dtype_t dtype, nexar_op_t op) {
  (void)ud;
  F.reduce++;
  if (dtype != NEXAR_INT32 || op != NEXAR_SUM) return NEXAR_ERR_UNSUPPORTED;
  int32_t *d = (int32_t *)(void *)shadow_of(dst, count * 4);
  const int32_t *s = (const int32_t *)(void *)shadow_of(src, count * 4);
  if (!d || !s) {
    F.bad++;
    return NEXAR_ERR_INTERNAL;
  }
  for (size_t i = 0; i < count; i++)
    d[i] = (int32_t)((uint32_t)d[i] + (uint32_t)s[i]);
  return NEXAR_OK;
}

static const nexar_device_ops_t fake_ops = {
    .size = sizeof(nexar_device_ops_t),
    .version = NEXAR_DEVICE_OPS_VERSION,
    .name = "fake",
    .classify = fake_classify,
    .alloc_host = fake_alloc_host,
    .free_host = fake_free_host,
    .copy_to_host = fake_to_host,
    .copy_from_host = fake_from_host,
    .synchronize = fake_sync,
    .reduce = fake_reduce,
};

static counts_t snap(void) {
  return (counts_t){F.classify, F.to,    F.to_bytes, F.from,   F.from_bytes,
                    F.alloc,    F.freed, F.sync,     F.reduce, F.bad};
}

/* Checks the operations counted since |c0|: classify, copy_to_host,
 * copy_from_host, synchronize; |label| names the case. */
#define EXPECT_OPS(c0, cl, th, fh, sy)                                        \
  do {                                                                        \
    counts_t c1_ = snap();                                                    \
    long dcl_ = c1_.classify - (c0).classify, dth_ = c1_.to - (c0).to;        \
    long dfh_ = c1_.from - (c0).from, dsy_ = c1_.sync - (c0).sync;            \
    NT_CHECKF(dcl_ == (cl) && dth_ == (th) && dfh_ == (fh) && dsy_ == (sy) && \
                  c1_.bad == 0,                                               \
              "%s: classify %ld copy_to_host %ld copy_from_host %ld "         \
              "synchronize %ld bad %ld; expected %ld %ld %ld %ld 0",          \
              label, dcl_, dth_, dfh_, dsy_, c1_.bad, (long)(cl), (long)(th), \
              (long)(fh), (long)(sy));                                        \
  } while (0)

#define EXPECT_BYTES(c0, tb, fb)                                              \
  do {                                                                        \
    counts_t c1_ = snap();                                                    \
    long dtb_ = c1_.to_bytes - (c0).to_bytes;                                 \
    long dfb_ = c1_.from_bytes - (c0).from_bytes;                             \
    NT_CHECKF(dtb_ == (long)(tb) && dfb_ == (long)(fb),                       \
              "%s: copied %ld bytes to the host and %ld back; expected %ld, " \
              "%ld",                                                          \
              label, dtb_, dfb_, (long)(tb), (long)(fb));                     \
  } while (0)

/* ---- Buffers that are host or device memory ---- */

static void *balloc(int dev, size_t bytes) {
  if (dev) return dalloc(bytes);
  uint8_t *p = malloc(bytes ? bytes : 1);
  if (!p) abort();
  memset(p, SENTINEL, bytes);
  return p;
}

static void bfree(void *p) {
  if (fake_find(p))
    dfree(p);
  else
    free(p);
}

/* Host-side view of [p, p + n): the shadow for device memory. */
static uint8_t *view(void *p, size_t n) {
  uint8_t *s = shadow_of(p, n);
  return s ? s : p;
}

/* The test's values: rank q's element i (small, so that sums over 8 ranks
 * are exact in int32). */
static int32_t val(int q, size_t i, int salt) {
  return (int32_t)((q + 1) * 100003 + (int32_t)(i % 100000) * 7 + salt);
}

static void fill(void *p, size_t off, size_t cnt, int q, int salt) {
  int32_t *v = (int32_t *)(void *)view(p, (off + cnt) * 4);
  for (size_t i = 0; i < cnt; i++) v[off + i] = val(q, i, salt);
}

/* Expected contents of an allocation: the sentinel, then set per case. */
static int32_t *expect_new(size_t elems) {
  int32_t *e = malloc(elems ? elems * 4 : 4);
  if (!e) abort();
  memset(e, SENTINEL, elems * 4);
  return e;
}

/* Compares the whole allocation |p| of |elems| int32 with |e|; prints the
 * first difference. Returns 0 when equal. */
static int compare(const char *label, void *p, const int32_t *e, size_t elems) {
  const int32_t *v = (const int32_t *)(void *)view(p, elems * 4);
  for (size_t i = 0; i < elems; i++) {
    if (v[i] != e[i]) {
      nt_fail(__FILE__, __LINE__, "%s: element %zu is %d, expected %d", label,
              i, v[i], e[i]);
      return 1;
    }
  }
  return 0;
}

#define COMPARE(p, e, elems) NT_CHECK(compare(label, (p), (e), (elems)) == 0)

/* Sum over ranks lo..hi-1 of val(q, i, salt). */
static int32_t sum_range(int lo, int hi, size_t i, int salt) {
  int32_t s = 0;
  for (int q = lo; q < hi; q++) s += val(q, i, salt);
  return s;
}

/* ---- Point-to-point ---- */

/* A ring: rank r sends |k| elements to r + 1 and receives from r - 1
 * into a device buffer of k + 5 elements (the tail must stay untouched);
 * the send buffer is reused right after nexar_isend returns (staged). */
static int t_p2p(nexar_comm_t *w, int r, int n, size_t k) {
  char label[64];
  snprintf(label, sizeof label, "p2p ring k=%zu", k);
  int32_t *s = balloc(1, k * 4), *d = balloc(1, (k + 5) * 4);
  fill(s, 0, k, r, 1);
  counts_t c0 = snap();
  nexar_req_t *rq[2];
  NT_OKC(w, nexar_isend(w, s, k, NEXAR_INT32, (r + 1) % n, 7, &rq[0]));
  EXPECT_OPS(c0, 1, 1, 0, 0);
  fill(s, 0, k, r, 99); /* already captured */
  NT_OKC(w, nexar_irecv(w, d, k + 5, NEXAR_INT32, (r + n - 1) % n, 7, &rq[1]));
  nexar_status_t st[2];
  NT_OKC(w, nexar_waitall(2, rq, st));
  NT_CHECKF(st[1].bytes == k * 4, "%s: received %zu bytes", label, st[1].bytes);
  EXPECT_OPS(c0, 2, 1, 1, 1);
  EXPECT_BYTES(c0, k * 4, k * 4);
  int32_t *e = expect_new(k + 5);
  for (size_t i = 0; i < k; i++) e[i] = val((r + n - 1) % n, i, 1);
  COMPARE(d, e, k + 5);
  free(e);
  bfree(s);
  bfree(d);
  return 0;
}

/* A message longer than the device receive buffer: NEXAR_ERR_TRUNCATE and
 * the first |k| elements copied back. */
static int t_trunc(nexar_comm_t *w, int r, int n) {
  const char *label = "p2p truncate";
  size_t k = 10;
  int32_t *s = balloc(0, (k + 3) * 4), *d = balloc(1, k * 4);
  fill(s, 0, k + 3, r, 2);
  counts_t c0 = snap();
  nexar_req_t *sr;
  NT_OKC(w, nexar_isend(w, s, k + 3, NEXAR_INT32, (r + 1) % n, 8, &sr));
  nexar_status_t st;
  int rc = nexar_recv(w, d, k, NEXAR_INT32, (r + n - 1) % n, 8, &st);
  NT_CHECKF(rc == NEXAR_ERR_TRUNCATE, "%s: %s", label, nexar_err_name(rc));
  NT_OKC(w, nexar_wait(&sr, NULL));
  EXPECT_OPS(c0, 2, 0, 1, 1);
  EXPECT_BYTES(c0, 0, k * 4);
  int32_t *e = expect_new(k);
  for (size_t i = 0; i < k; i++) e[i] = val((r + n - 1) % n, i, 2);
  COMPARE(d, e, k);
  free(e);
  bfree(s);
  bfree(d);
  return 0;
}

/* ---- Allreduce ---- */

enum { M_DD, M_IP, M_IP_SAME, M_HD, M_DH, M_NUM };
static const char *const mname[M_NUM] = {
    "dev/dev", "in place", "in place (send == recv)", "host send/dev recv",
    "dev send/host recv"};

static int t_allreduce(nexar_comm_t *w, int r, int n, size_t k, int m) {
  char label[96];
  snprintf(label, sizeof label, "allreduce k=%zu %s", k, mname[m]);
  bool ip = m == M_IP || m == M_IP_SAME;
  int32_t *s = ip ? NULL : balloc(m != M_HD, k * 4);
  int32_t *d = balloc(m != M_DH, k * 4);
  fill(ip ? d : s, 0, k, r, 3);
  const void *sb = m == M_IP ? NEXAR_IN_PLACE : m == M_IP_SAME ? d : s;
  counts_t c0 = snap();
  NT_OKC(w, nexar_allreduce(w, sb, d, k, NEXAR_INT32, NEXAR_SUM));
  long cl = ip ? 1 : 2;
  long th = m == M_HD ? 0 : 1, fh = m == M_DH ? 0 : 1;
  EXPECT_OPS(c0, cl, th, fh, fh);
  EXPECT_BYTES(c0, th * k * 4, fh * k * 4);
  int32_t *e = expect_new(k);
  for (size_t i = 0; i < k; i++) e[i] = sum_range(0, n, i, 3);
  COMPARE(d, e, k);
  if (s) {
    for (size_t i = 0; i < k; i++) e[i] = val(r, i, 3);
    COMPARE(s, e, k); /* the send buffer is unchanged */
  }
  free(e);
  if (s) bfree(s);
  bfree(d);
  return 0;
}

/* Count 0 touches no buffer: nothing is classified or copied. */
static int t_zero(nexar_comm_t *w) {
  const char *label = "count 0";
  int32_t *d = balloc(1, 4);
  counts_t c0 = snap();
  NT_OKC(w, nexar_allreduce(w, d, d, 0, NEXAR_INT32, NEXAR_SUM));
  NT_OKC(w, nexar_bcast(w, d, 0, NEXAR_INT32, 0));
  EXPECT_OPS(c0, 0, 0, 0, 0);
  bfree(d);
  return 0;
}

/* Non-blocking: the data is taken at the call, the result reaches device
 * memory when nexar_test reports completion, not before. */
static int t_nonblocking(nexar_comm_t *w, int r, int n) {
  const char *label = "iallreduce + nexar_test";
  size_t k = 4096;
  int32_t *s = balloc(1, k * 4), *d = balloc(1, k * 4);
  fill(s, 0, k, r, 4);
  counts_t c0 = snap();
  nexar_req_t *rq;
  NT_OKC(w, nexar_iallreduce(w, s, d, k, NEXAR_INT32, NEXAR_SUM, &rq));
  EXPECT_OPS(c0, 2, 1, 0, 0);
  int done = 0;
  while (!done) {
    const uint8_t *v = view(d, k * 4);
    NT_CHECKF(v[0] == SENTINEL && v[k * 4 - 1] == SENTINEL,
              "%s: device memory written before completion", label);
    NT_OKC(w, nexar_test(&rq, &done, NULL));
    if (!done) usleep(100);
  }
  EXPECT_OPS(c0, 2, 1, 1, 1);
  int32_t *e = expect_new(k);
  for (size_t i = 0; i < k; i++) e[i] = sum_range(0, n, i, 4);
  COMPARE(d, e, k);
  free(e);
  bfree(s);
  bfree(d);
  return 0;
}

/* ---- Rooted and data-movement collectives ---- */

static int t_bcast(nexar_comm_t *w, int r, int n, size_t k, int root) {
  char label[64];
  snprintf(label, sizeof label, "bcast k=%zu root=%d", k, root);
  int32_t *d = balloc(1, k * 4);
  if (r == root) fill(d, 0, k, r, 5);
  counts_t c0 = snap();
  NT_OKC(w, nexar_bcast(w, d, k, NEXAR_INT32, root));
  bool rt = r == root;
  EXPECT_OPS(c0, 1, rt ? 1 : 0, rt ? 0 : 1, rt ? 0 : 1);
  int32_t *e = expect_new(k);
  for (size_t i = 0; i < k; i++) e[i] = val(root, i, 5);
  COMPARE(d, e, k);
  free(e);
  bfree(d);
  return 0;
}

static int t_reduce(nexar_comm_t *w, int r, int n, size_t k, int root,
                    bool ip) {
  char label[64];
  snprintf(label, sizeof label, "reduce k=%zu root=%d%s", k, root,
           ip ? " in place" : "");
  bool rt = r == root;
  bool inp = ip && rt; /* in place is the root's business */
  int32_t *s = inp ? NULL : balloc(1, k * 4);
  int32_t *d = rt ? balloc(1, k * 4) : NULL;
  fill(inp ? d : s, 0, k, r, 6);
  counts_t c0 = snap();
  NT_OKC(w, nexar_reduce(w, inp ? NEXAR_IN_PLACE : s, d, k, NEXAR_INT32,
                         NEXAR_SUM, root));
  if (rt)
    EXPECT_OPS(c0, inp ? 1 : 2, 1, 1, 1);
  else
    EXPECT_OPS(c0, 1, 1, 0, 0);
  if (rt) {
    int32_t *e = expect_new(k);
    for (size_t i = 0; i < k; i++) e[i] = sum_range(0, n, i, 6);
    COMPARE(d, e, k);
    free(e);
    bfree(d);
  }
  if (s) bfree(s);
  return 0;
}

static int t_allgather(nexar_comm_t *w, int r, int n, size_t k, bool ip) {
  char label[64];
  snprintf(label, sizeof label, "allgather k=%zu%s", k, ip ? " in place" : "");
  int32_t *s = ip ? NULL : balloc(1, k * 4);
  int32_t *d = balloc(1, (size_t)n * k * 4);
  if (ip)
    fill(d, (size_t)r * k, k, r, 7);
  else
    fill(s, 0, k, r, 7);
  counts_t c0 = snap();
  NT_OKC(w, nexar_allgather(w, ip ? NEXAR_IN_PLACE : s, d, k, NEXAR_INT32));
  EXPECT_OPS(c0, ip ? 1 : 2, 1, 1, 1);
  EXPECT_BYTES(c0, k * 4, (size_t)n * k * 4);
  int32_t *e = expect_new((size_t)n * k);
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < k; i++) e[(size_t)q * k + i] = val(q, i, 7);
  COMPARE(d, e, (size_t)n * k);
  free(e);
  if (s) bfree(s);
  bfree(d);
  return 0;
}

/* allgatherv with a one-element gap after every block: n separate ranges
 * come back, and the gaps keep their contents. */
static int t_allgatherv(nexar_comm_t *w, int r, int n, bool ip) {
  char label[64];
  snprintf(label, sizeof label, "allgatherv gaps%s", ip ? " in place" : "");
  size_t counts[8], displs[8], total = 0;
  for (int q = 0; q < n; q++) {
    counts[q] = (size_t)q + 2;
    displs[q] = total;
    total += counts[q] + 1;
  }
  int32_t *s = ip ? NULL : balloc(1, counts[r] * 4);
  int32_t *d = balloc(1, total * 4);
  if (ip)
    fill(d, displs[r], counts[r], r, 8);
  else
    fill(s, 0, counts[r], r, 8);
  counts_t c0 = snap();
  NT_OKC(w, nexar_allgatherv(w, ip ? NEXAR_IN_PLACE : s, counts[r], d, counts,
                             displs, NEXAR_INT32));
  EXPECT_OPS(c0, ip ? 1 : 2, 1, n, 1);
  int32_t *e = expect_new(total);
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < counts[q]; i++) e[displs[q] + i] = val(q, i, 8);
  COMPARE(d, e, total);
  free(e);
  if (s) bfree(s);
  bfree(d);
  return 0;
}

static int t_reduce_scatter(nexar_comm_t *w, int r, int n, size_t k, bool ip,
                            bool block) {
  char label[80];
  snprintf(label, sizeof label, "reduce_scatter%s k=%zu%s",
           block ? "_block" : "", k, ip ? " in place" : "");
  size_t counts[8], off[8], total = 0;
  for (int q = 0; q < n; q++) {
    counts[q] = block ? k : k + (size_t)q;
    off[q] = total;
    total += counts[q];
  }
  int32_t *s = ip ? NULL : balloc(1, total * 4);
  int32_t *d = balloc(1, (ip ? total : counts[r]) * 4);
  fill(ip ? d : s, 0, total, r, 9);
  counts_t c0 = snap();
  const void *sb = ip ? NEXAR_IN_PLACE : s;
  if (block)
    NT_OKC(w, nexar_reduce_scatter_block(w, sb, d, k, NEXAR_INT32, NEXAR_SUM));
  else
    NT_OKC(w, nexar_reduce_scatter(w, sb, d, counts, NEXAR_INT32, NEXAR_SUM));
  EXPECT_OPS(c0, ip ? 1 : 2, 1, 1, 1);
  EXPECT_BYTES(c0, total * 4, counts[r] * 4);
  size_t elems = ip ? total : counts[r];
  int32_t *e = expect_new(elems);
  for (size_t i = 0; i < counts[r]; i++) e[i] = sum_range(0, n, off[r] + i, 9);
  /* In place, the rest of the buffer holds the rank's input still. */
  for (size_t i = counts[r]; i < elems; i++) e[i] = val(r, i, 9);
  COMPARE(d, e, elems);
  free(e);
  if (s) bfree(s);
  bfree(d);
  return 0;
}

static int t_alltoall(nexar_comm_t *w, int r, int n, size_t k, bool ip) {
  char label[64];
  snprintf(label, sizeof label, "alltoall k=%zu%s", k, ip ? " in place" : "");
  size_t all = (size_t)n * k;
  int32_t *s = ip ? NULL : balloc(1, all * 4);
  int32_t *d = balloc(1, all * 4);
  /* Block j of rank q: val(q, j * k + i). */
  fill(ip ? d : s, 0, all, r, 10);
  counts_t c0 = snap();
  NT_OKC(w, nexar_alltoall(w, ip ? NEXAR_IN_PLACE : s, d, k, NEXAR_INT32));
  EXPECT_OPS(c0, ip ? 1 : 2, 1, 1, 1);
  int32_t *e = expect_new(all);
  for (int q = 0; q < n; q++)
    for (size_t i = 0; i < k; i++)
      e[(size_t)q * k + i] = val(q, (size_t)r * k + i, 10);
  COMPARE(d, e, all);
  free(e);
  if (s) bfree(s);
  bfree(d);
  return 0;
}

/* alltoallv with contiguous blocks of different sizes: the ranges merge
 * into one copy each way. */
static int t_alltoallv(nexar_comm_t *w, int r, int n) {
  const char *label = "alltoallv";
  /* Rank q sends q + j + 1 elements to rank j. */
  size_t sc[8], sd[8], rc[8], rd[8], st = 0, rt = 0;
  for (int j = 0; j < n; j++) {
    sc[j] = (size_t)(r + j + 1);
    sd[j] = st;
    st += sc[j];
    rc[j] = (size_t)(j + r + 1);
    rd[j] = rt;
    rt += rc[j];
  }
  int32_t *s = balloc(1, st * 4), *d = balloc(1, rt * 4);
  fill(s, 0, st, r, 11);
  counts_t c0 = snap();
  NT_OKC(w, nexar_alltoallv(w, s, sc, sd, d, rc, rd, NEXAR_INT32));
  EXPECT_OPS(c0, 2, 1, 1, 1);
  int32_t *e = expect_new(rt);
  for (int q = 0; q < n; q++) {
    /* Rank q's block for r starts at sum over j < r of (q + j + 1). */
    size_t qoff = 0;
    for (int j = 0; j < r; j++) qoff += (size_t)(q + j + 1);
    for (size_t i = 0; i < rc[q]; i++) e[rd[q] + i] = val(q, qoff + i, 11);
  }
  COMPARE(d, e, rt);
  free(e);
  bfree(s);
  bfree(d);
  return 0;
}

static int t_gather(nexar_comm_t *w, int r, int n, size_t k, int root,
                    bool ip) {
  char label[64];
  snprintf(label, sizeof label, "gather k=%zu root=%d%s", k, root,
           ip ? " in place" : "");
  bool rt = r == root, inp = ip && rt;
  int32_t *s = inp ? NULL : balloc(1, k * 4);
  int32_t *d = rt ? balloc(1, (size_t)n * k * 4) : NULL;
  if (inp)
    fill(d, (size_t)r * k, k, r, 12);
  else
    fill(s, 0, k, r, 12);
  counts_t c0 = snap();
  NT_OKC(w, nexar_gather(w, inp ? NEXAR_IN_PLACE : s, d, k, NEXAR_INT32, root));
  if (rt)
    EXPECT_OPS(c0, inp ? 1 : 2, 1, 1, 1);
  else
    EXPECT_OPS(c0, 1, 1, 0, 0);
  if (rt) {
    int32_t *e = expect_new((size_t)n * k);
    for (int q = 0; q < n; q++)
      for (size_t i = 0; i < k; i++) e[(size_t)q * k + i] = val(q, i, 12);
    COMPARE(d, e, (size_t)n * k);
    free(e);
    bfree(d);
  }
  if (s) bfree(s);
  return 0;
}

static int t_gatherv(nexar_comm_t *w, int r, int n, int root) {
  char label[64];
  snprintf(label, sizeof label, "gatherv root=%d", root);
  size_t counts[8], displs[8], total = 0;
  for (int q = 0; q < n; q++) {
    counts[q] = (size_t)(2 * q + 1);
    displs[q] = total;
    total += counts[q];
  }
  bool rt = r == root;
  int32_t *s = balloc(1, counts[r] * 4);
  int32_t *d = rt ? balloc(1, total * 4) : NULL;
  fill(s, 0, counts[r], r, 13);
  counts_t c0 = snap();
  NT_OKC(w,
         nexar_gatherv(w, s, counts[r], d, counts, displs, NEXAR_INT32, root));
  if (rt)
    EXPECT_OPS(c0, 2, 1, 1, 1);
  else
    EXPECT_OPS(c0, 1, 1, 0, 0);
  if (rt) {
    int32_t *e = expect_new(total);
    for (int q = 0; q < n; q++)
      for (size_t i = 0; i < counts[q]; i++) e[displs[q] + i] = val(q, i, 13);
    COMPARE(d, e, total);
    free(e);
    bfree(d);
  }
  bfree(s);
  return 0;
}

static int t_scatter(nexar_comm_t *w, int r, int n, size_t k, int root,
                     bool ip) {
  char label[64];
  snprintf(label, sizeof label, "scatter k=%zu root=%d%s", k, root,
           ip ? " in place" : "");
  bool rt = r == root, inp = ip && rt;
  int32_t *s = rt ? balloc(1, (size_t)n * k * 4) : NULL;
  int32_t *d = inp ? NULL : balloc(1, k * 4);
  if (rt) fill(s, 0, (size_t)n * k, r, 14);
  counts_t c0 = snap();
  NT_OKC(w,
         nexar_scatter(w, s, inp ? NEXAR_IN_PLACE : d, k, NEXAR_INT32, root));
  if (inp)
    EXPECT_OPS(c0, 1, 1, 0, 0);
  else if (rt)
    EXPECT_OPS(c0, 2, 1, 1, 1);
  else
    EXPECT_OPS(c0, 1, 0, 1, 1);
  if (d) {
    int32_t *e = expect_new(k);
    for (size_t i = 0; i < k; i++) e[i] = val(root, (size_t)r * k + i, 14);
    COMPARE(d, e, k);
    free(e);
    bfree(d);
  }
  if (s) bfree(s);
  return 0;
}

static int t_scatterv(nexar_comm_t *w, int r, int n, int root) {
  char label[64];
  snprintf(label, sizeof label, "scatterv root=%d", root);
  size_t counts[8], displs[8], total = 0;
  for (int q = 0; q < n; q++) {
    counts[q] = (size_t)(q + 3);
    displs[q] = total;
    total += counts[q];
  }
  bool rt = r == root;
  int32_t *s = rt ? balloc(1, total * 4) : NULL;
  int32_t *d = balloc(1, counts[r] * 4);
  if (rt) fill(s, 0, total, r, 15);
  counts_t c0 = snap();
  NT_OKC(w,
         nexar_scatterv(w, s, counts, displs, d, counts[r], NEXAR_INT32, root));
  EXPECT_OPS(c0, rt ? 2 : 1, rt ? 1 : 0, 1, 1);
  int32_t *e = expect_new(counts[r]);
  for (size_t i = 0; i < counts[r]; i++) e[i] = val(root, displs[r] + i, 15);
  COMPARE(d, e, counts[r]);
  free(e);
  if (s) bfree(s);
  bfree(d);
  return 0;
}

static int t_scan(nexar_comm_t *w, int r, int n, size_t k, bool ex, bool ip) {
  char label[64];
  snprintf(label, sizeof label, "%s k=%zu%s", ex ? "exscan" : "scan", k,
           ip ? " in place" : "");
  int32_t *s = ip ? NULL : balloc(1, k * 4);
  int32_t *d = balloc(1, k * 4);
  fill(ip ? d : s, 0, k, r, 16);
  const void *sb = ip ? NEXAR_IN_PLACE : s;
  counts_t c0 = snap();
  if (ex)
    NT_OKC(w, nexar_exscan(w, sb, d, k, NEXAR_INT32, NEXAR_SUM));
  else
    NT_OKC(w, nexar_scan(w, sb, d, k, NEXAR_INT32, NEXAR_SUM));
  /* exscan leaves rank 0's receive buffer alone: nothing comes back, and
   * unless it is the input (in place) it is not even classified. */
  bool untouched = ex && r == 0;
  long fh = untouched ? 0 : 1;
  EXPECT_OPS(c0, ip || untouched ? 1 : 2, 1, fh, fh);
  int32_t *e = expect_new(k);
  for (size_t i = 0; i < k; i++) {
    if (ex && r == 0)
      e[i] = ip ? val(r, i, 16) : (int32_t)0xA5A5A5A5u;
    else
      e[i] = sum_range(0, ex ? r : r + 1, i, 16);
  }
  COMPARE(d, e, k);
  free(e);
  if (s) bfree(s);
  bfree(d);
  return 0;
}

/* ---- nexar_reduce_local ---- */

static int t_reduce_local(nexar_ctx_t *ctx, int r) {
  const char *label = "reduce_local device";
  size_t k = 33;
  int32_t *a = balloc(1, k * 4), *b = balloc(1, k * 4);
  fill(a, 0, k, r, 17);
  fill(b, 0, k, r + 1, 17);
  counts_t c0 = snap();
  NT_OK(nexar_reduce_local(ctx, a, b, k, NEXAR_INT32, NEXAR_SUM));
  EXPECT_OPS(c0, 2, 0, 0, 1);
  NT_CHECK(snap().reduce - c0.reduce == 1);
  int32_t *e = expect_new(k);
  for (size_t i = 0; i < k; i++) e[i] = val(r, i, 17) + val(r + 1, i, 17);
  COMPARE(b, e, k);
  /* MAX is declined by the fake device: staged and reduced on the host. */
  label = "reduce_local staged";
  c0 = snap();
  NT_OK(nexar_reduce_local(ctx, a, b, k, NEXAR_INT32, NEXAR_MAX));
  EXPECT_OPS(c0, 2, 2, 1, 1);
  for (size_t i = 0; i < k; i++) e[i] = val(r, i, 17) + val(r + 1, i, 17);
  COMPARE(b, e, k);
  /* Host destination, device source: one copy in, none back. */
  label = "reduce_local host dst";
  int32_t *h = balloc(0, k * 4);
  fill(h, 0, k, r, 18);
  c0 = snap();
  NT_OK(nexar_reduce_local(ctx, a, h, k, NEXAR_INT32, NEXAR_SUM));
  EXPECT_OPS(c0, 2, 1, 0, 0);
  for (size_t i = 0; i < k; i++) e[i] = val(r, i, 18) + val(r, i, 17);
  COMPARE(h, e, k);
  int rc = nexar_reduce_local(ctx, a, b, k, NEXAR_INT32, NEXAR_AVG);
  NT_CHECKF(rc == NEXAR_ERR_UNSUPPORTED, "AVG: %s", nexar_err_name(rc));
  free(e);
  bfree(a);
  bfree(b);
  bfree(h);
  return 0;
}

/* ---- Errors ---- */

static int t_errors(nexar_comm_t *w, int r, int n) {
  const char *label = "errors";
  char want[64];
  /* A range past the end of a device allocation: the adapter's code, no
   * effect. */
  int32_t *d = balloc(1, 16 * 4);
  int rc = nexar_send(w, d, 17, NEXAR_INT32, (r + 1) % n, 9);
  NT_CHECKF(rc == NEXAR_ERR_INVALID_ARG, "classify: %s", nexar_err_name(rc));
  snprintf(want, sizeof want, "rank %d: send: device adapter 'fake'", r);
  NT_CHECKF(strstr(nexar_comm_last_error(w), want), "message: %s",
            nexar_comm_last_error(w));
  /* copy_to_host fails on every rank: the call fails at once everywhere
   * and the collective sequence is untouched. */
  F.fail_to = 1;
  rc = nexar_allreduce(w, d, d + 8, 8, NEXAR_INT32, NEXAR_SUM);
  NT_CHECKF(rc == NEXAR_ERR_DEVICE, "copy_to_host: %s", nexar_err_name(rc));
  snprintf(want, sizeof want, "rank %d: allreduce: device adapter", r);
  NT_CHECKF(strstr(nexar_comm_last_error(w), want) &&
                strstr(nexar_comm_last_error(w), "copy_to_host"),
            "message: %s", nexar_comm_last_error(w));
  /* copy_from_host fails on rank 0 only, after the collective finished. */
  if (r == 0) F.fail_from = 1;
  fill(d, 0, 8, r, 19);
  rc = nexar_allreduce(w, d, d + 8, 8, NEXAR_INT32, NEXAR_SUM);
  NT_CHECKF(rc == (r == 0 ? NEXAR_ERR_DEVICE : NEXAR_OK), "copy_from_host: %s",
            nexar_err_name(rc));
  if (r == 0)
    NT_CHECKF(strstr(nexar_comm_last_error(w), "copy_from_host"), "message: %s",
              nexar_comm_last_error(w));
  /* The communicator still works. */
  NT_OKC(w, nexar_allreduce(w, d, d + 8, 8, NEXAR_INT32, NEXAR_SUM));
  int32_t *e = expect_new(16);
  for (size_t i = 0; i < 8; i++) {
    e[i] = val(r, i, 19);
    e[8 + i] = sum_range(0, n, i, 19);
  }
  COMPARE(d, e, 16);
  free(e);
  bfree(d);
  return 0;
}

/* Table validation, the getter, and the CPU adapter. */
static int t_adapter_api(nexar_ctx_t *ctx) {
  nexar_device_ops_t o;
  void *ud = (void *)1;
  NT_OK(nexar_device_adapter_get(ctx, &o, &ud));
  NT_CHECK(o.name && strcmp(o.name, "cpu") == 0 && ud == NULL);
  NT_CHECK(nexar_device_adapter_cpu() &&
           strcmp(nexar_device_adapter_cpu()->name, "cpu") == 0);
  nexar_device_ops_t bad = fake_ops;
  bad.copy_to_host = NULL;
  NT_CHECK(nexar_device_adapter_set(ctx, &bad, NULL) == NEXAR_ERR_INVALID_ARG);
  bad = fake_ops;
  bad.free_host = NULL;
  NT_CHECK(nexar_device_adapter_set(ctx, &bad, NULL) == NEXAR_ERR_INVALID_ARG);
  bad = fake_ops;
  bad.size = sizeof(bad) - 1;
  NT_CHECK(nexar_device_adapter_set(ctx, &bad, NULL) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_device_adapter_set(NULL, &fake_ops, NULL) ==
           NEXAR_ERR_INVALID_ARG);
  NT_OK(nexar_device_adapter_get(ctx, &o, NULL));
  NT_CHECK(strcmp(o.name, "cpu") == 0); /* nothing changed */
  /* Set, restore the default, set again (from a copy on the stack). */
  NT_OK(nexar_device_adapter_set(ctx, &fake_ops, &F));
  NT_OK(nexar_device_adapter_set(ctx, NULL, NULL));
  NT_OK(nexar_device_adapter_get(ctx, &o, NULL));
  NT_CHECK(strcmp(o.name, "cpu") == 0);
  nexar_device_ops_t copy = fake_ops;
  NT_OK(nexar_device_adapter_set(ctx, &copy, &F));
  memset(&copy, 0, sizeof copy);
  NT_OK(nexar_device_adapter_get(ctx, &o, &ud));
  NT_CHECK(strcmp(o.name, "fake") == 0 && ud == &F &&
           o.classify == fake_classify);
  return 0;
}

/* Ten allreduces of one size reuse the bounce buffers of the first. */
static int t_cache(nexar_comm_t *w, int r, int n, bool zero_cache) {
  const char *label = zero_cache ? "no cache" : "cache";
  size_t k = 2000;
  int32_t *s = balloc(1, k * 4), *d = balloc(1, k * 4);
  fill(s, 0, k, r, 20);
  counts_t c0 = snap();
  for (int it = 0; it < 10; it++) {
    NT_OKC(w, nexar_allreduce(w, s, d, k, NEXAR_INT32, NEXAR_SUM));
    counts_t c = snap();
    if (zero_cache)
      NT_CHECKF(c.alloc - c0.alloc == 2 * (it + 1) && c.alloc == c.freed,
                "%s: iteration %d: alloc_host %ld free_host %ld", label, it,
                c.alloc - c0.alloc, c.freed - c0.freed);
  }
  counts_t c = snap();
  if (!zero_cache)
    NT_CHECKF(c.alloc - c0.alloc <= 2, "%s: alloc_host called %ld times", label,
              c.alloc - c0.alloc);
  int32_t *e = expect_new(k);
  for (size_t i = 0; i < k; i++) e[i] = sum_range(0, n, i, 20);
  COMPARE(d, e, k);
  free(e);
  bfree(s);
  bfree(d);
  return 0;
}

/* ---- Worlds ---- */

typedef struct wopts {
  int full;       /* every case; otherwise the cache checks only */
  int zero_cache; /* NEXAR_DEVICE_STAGE_CACHE_BYTES=0 */
  int alloc_null; /* alloc_host fails (pageable bounce buffers) */
} wopts_t;

static int run_cases(nexar_ctx_t *ctx, nexar_comm_t *w, int r, int n) {
  static const size_t ks[] = {1, 7, 5000, 300000};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    for (int m = 0; m < M_NUM; m++)
      if (t_allreduce(w, r, n, ks[i], m)) return 1;
  if (t_zero(w)) return 1;
  if (t_p2p(w, r, n, 5) || t_p2p(w, r, n, 100000) || t_trunc(w, r, n)) return 1;
  if (t_nonblocking(w, r, n)) return 1;
  int roots[2] = {0, n - 1};
  for (int ri = 0; ri < 2; ri++) {
    int root = roots[ri];
    if (t_bcast(w, r, n, 9, root) || t_bcast(w, r, n, 140000, root)) return 1;
    for (int ip = 0; ip < 2; ip++)
      if (t_reduce(w, r, n, 33, root, ip) || t_gather(w, r, n, 5, root, ip) ||
          t_scatter(w, r, n, 6, root, ip))
        return 1;
    if (t_gatherv(w, r, n, root) || t_scatterv(w, r, n, root)) return 1;
  }
  for (int ip = 0; ip < 2; ip++) {
    if (t_allgather(w, r, n, 3, ip) || t_allgather(w, r, n, 20000, ip) ||
        t_allgatherv(w, r, n, ip) || t_reduce_scatter(w, r, n, 4, ip, false) ||
        t_reduce_scatter(w, r, n, 6, ip, true) || t_alltoall(w, r, n, 3, ip) ||
        t_scan(w, r, n, 11, false, ip) || t_scan(w, r, n, 11, true, ip))
      return 1;
  }
  if (t_alltoallv(w, r, n)) return 1;
  if (t_reduce_local(ctx, r)) return 1;
  if (t_errors(w, r, n)) return 1;
  /* The same staging on a child communicator (two colours, reversed). */
  nexar_comm_t *c = NULL;
  NT_OKC(w, nexar_comm_split(w, r % 2, -r, &c));
  int cr, cn;
  NT_OKC(c, nexar_comm_rank(c, &cr));
  NT_OKC(c, nexar_comm_size(c, &cn));
  for (int m = 0; m < M_NUM; m++)
    if (t_allreduce(c, cr, cn, 5000, m)) return 1;
  if (t_p2p(c, cr, cn, 100000) || t_nonblocking(c, cr, cn) ||
      t_bcast(c, cr, cn, 140000, cn - 1) || t_allgather(c, cr, cn, 20000, 0) ||
      t_alltoall(c, cr, cn, 3, 1) || t_scan(c, cr, cn, 11, false, 0))
    return 1;
  NT_OKC(w, nexar_comm_free(&c));
  return 0;
}

static int worker(int index, void *arg) {
  const wopts_t *o = arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  (void)index;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  F.alloc_null = o->alloc_null;
  if (t_adapter_api(ctx)) return 1;
  if (o->full && run_cases(ctx, w, r, n)) return 1;
  if (t_cache(w, r, n, o->zero_cache)) return 1;
  NT_OK(nexar_finalize(ctx));
  /* Every bounce buffer went back to the adapter. */
  NT_CHECKF(F.alloc == F.freed, "alloc_host %ld, free_host %ld", (long)F.alloc,
            (long)F.freed);
  return 0;
}

/* NEXAR_DEVICE names an adapter that does not exist: nexar_init fails. */
static int bad_device_worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx = NULL;
  int rc = nexar_init(NULL, &ctx);
  NT_CHECKF(rc == NEXAR_ERR_INVALID_ARG && ctx == NULL, "nexar_init: %s",
            nexar_err_name(rc));
  NT_CHECKF(strstr(nexar_last_error(), "NEXAR_DEVICE=bogus"), "message: %s",
            nexar_last_error());
  return 0;
}

static int run_world(const char *what, int world, const wopts_t *o,
                     const char *env) {
  nt_opts_t no = {.world_size = world, .timeout_ms = 120000, .env = env};
  int rc = nt_run(&no, worker, (void *)o);
  printf("%s %s world=%d\n", rc ? "FAIL" : "ok", what, world);
  return rc ? 1 : 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int fails = 0;
  wopts_t full = {.full = 1};
  for (int world = 1; world <= 5; world++)
    fails += run_world("all cases", world, &full, NULL);
  wopts_t nocache = {.zero_cache = 1};
  fails += run_world("zero cache", 3, &nocache,
                     "NEXAR_DEVICE_STAGE_CACHE_BYTES=0\n");
  wopts_t pageable = {.alloc_null = 1};
  fails += run_world("alloc_host fails", 2, &pageable, NULL);
  nt_opts_t bad = {.world_size = 1,
                   .seed_must_form = NT_SEED_OPTIONAL,
                   .env = "NEXAR_DEVICE=bogus\n"};
  int rc = nt_run(&bad, bad_device_worker, NULL);
  printf("%s NEXAR_DEVICE=bogus\n", rc ? "FAIL" : "ok");
  fails += rc ? 1 : 0;
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
