/*
 * Compressed allreduce: top-k and random-k sparsification with error
 * feedback (include/nexar.h, "Compressed allreduce"; docs/compression.md),
 * on top of the public allgather and allreduce. Selection, packing and the
 * sums run on the calling thread; the residual is float32 whatever the
 * tensor's dtype.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/compress.h"
#include "coll/reduce.h"
#include "coll/sched.h"

struct nexar_compressor {
  nexar_comm_t *comm;
  int kind;
  nexar_dtype_t dtype;
  size_t es; /* dtype size */
  size_t count, k;
  uint64_t seed, steps;
  float *res;     /* [count]: the residual */
  uint32_t *idx;  /* [k]: this call's indices */
  float *saved;   /* [k]: what the call took from the residual */
  float *vals;    /* RANDK [k]: the values allreduced */
  uint32_t *hist; /* TOPK [NEXAR__TOPK_BINS]: selection scratch */
  float *sum;     /* TOPK float16 / bfloat16 [count]: the float32 sum */
  uint8_t *xbuf;  /* TOPK: the allgather buffer, xn records */
  int xn;         /* world size xbuf holds */
};

/* Bytes of one rank's TOPK record: k uint32 indices, then k values. */
static size_t rec_bytes(const nexar_compressor_t *c) {
  return c->k * (4 + c->es);
}

static float widen(const void *buf, size_t i, nexar_dtype_t dt) {
  if (dt == NEXAR_FLOAT32) {
    float f;
    memcpy(&f, (const uint8_t *)buf + 4 * i, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, (const uint8_t *)buf + 2 * i, 2);
  return dt == NEXAR_FLOAT16 ? nexar__f16_to_f32(h) : nexar__bf16_to_f32(h);
}

/* Stores |f| rounded to |dt| (nearest even) as element |i| of |buf|. */
static void narrow(void *buf, size_t i, nexar_dtype_t dt, float f) {
  if (dt == NEXAR_FLOAT32) {
    memcpy((uint8_t *)buf + 4 * i, &f, 4);
    return;
  }
  uint16_t h =
      dt == NEXAR_FLOAT16 ? nexar__f32_to_f16(f) : nexar__f32_to_bf16(f);
  memcpy((uint8_t *)buf + 2 * i, &h, 2);
}

/* ---- Selection ---- */

static uint32_t key_of(const float *a, size_t i) {
  uint32_t u;
  memcpy(&u, &a[i], 4);
  return u & 0x7fffffffu;
}

/* The digit d (0: high, 1: low) where the k-th largest key falls among the
 * keys whose high digit is |hi| (pass 1: all keys); *above gets how many
 * keys above that digit were counted. */
static uint32_t find_digit(const float *acc, size_t count, int d, uint32_t hi,
                           size_t want, uint32_t *hist, size_t *above) {
  memset(hist, 0, NEXAR__TOPK_BINS * sizeof(*hist));
  for (size_t i = 0; i < count; i++) {
    uint32_t key = key_of(acc, i);
    if (d == 0)
      hist[key >> 16]++;
    else if ((key >> 16) == hi)
      hist[key & 0xffffu]++;
  }
  size_t cum = 0;
  uint32_t b = NEXAR__TOPK_BINS - 1;
  for (;; b--) {
    if (cum + hist[b] >= want || b == 0) break;
    cum += hist[b];
  }
  *above = cum;
  return b;
}

void nexar__topk_select(const float *acc, size_t count, size_t k,
                        uint32_t *hist, uint32_t *idx) {
  size_t gt_hi, gt_lo;
  uint32_t hi = find_digit(acc, count, 0, 0, k, hist, &gt_hi);
  uint32_t lo = find_digit(acc, count, 1, hi, k - gt_hi, hist, &gt_lo);
  uint32_t t = hi << 16 | lo;
  size_t ties = k - gt_hi - gt_lo, n = 0; /* keys == t to take, lowest first */
  for (size_t i = 0; i < count && n < k; i++) {
    uint32_t key = key_of(acc, i);
    if (key > t || (key == t && ties > 0)) {
      if (key == t) ties--;
      idx[n++] = (uint32_t)i;
    }
  }
}

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

void nexar__randk_select(uint64_t seed, uint64_t step, size_t count, size_t k,
                         uint32_t *idx) {
  uint64_t s = seed ^ (step * UINT64_C(0x9e3779b97f4a7c15));
  size_t n = 0;
  for (size_t i = 0; i < count && n < k; i++) {
    double u = (double)(splitmix64(&s) >> 11) * 0x1p-53;
    /* Take element i with probability (k - n) / (count - i); the first
     * test keeps rounding from ever leaving fewer than k. */
    if (count - i <= k - n || (double)(count - i) * u < (double)(k - n))
      idx[n++] = (uint32_t)i;
  }
}

/* ---- Create, free, query ---- */

/* Records "rank R: allreduce_compressed on comm C: <text>" on |comm|. */
__attribute__((format(printf, 3, 4))) static int fail(nexar_comm_t *comm,
                                                      int rc, const char *fmt,
                                                      ...) {
  if (!comm) return rc;
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  nexar__comm_set_error(comm, "rank %d: allreduce_compressed on comm %llu: %s",
                        comm->rank, (unsigned long long)comm->id, why);
  return rc;
}

static bool dtype_ok(nexar_dtype_t dt) {
  return dt == NEXAR_FLOAT32 || dt == NEXAR_FLOAT16 || dt == NEXAR_BFLOAT16;
}

/* Makes xbuf hold |n| records; bounds checked before allocating. */
static int xbuf_fit(nexar_compressor_t *c, int n) {
  if (c->kind != NEXAR_COMPRESS_TOPK || n <= c->xn) return 0;
  size_t rec = rec_bytes(c);
  if (rec > SIZE_MAX / (size_t)n)
    return fail(c->comm, NEXAR_ERR_INVALID_ARG,
                "exchange buffer of %d x %zu bytes overflows", n, rec);
  uint8_t *x = malloc(rec * (size_t)n);
  if (!x) return NEXAR_ERR_NOMEM;
  free(c->xbuf);
  c->xbuf = x;
  c->xn = n;
  return 0;
}

int nexar_compressor_free(nexar_compressor_t **pc) {
  if (!pc || !*pc) return NEXAR_OK;
  nexar_compressor_t *c = *pc;
  free(c->res);
  free(c->idx);
  free(c->saved);
  free(c->vals);
  free(c->hist);
  free(c->sum);
  free(c->xbuf);
  free(c);
  *pc = NULL;
  return NEXAR_OK;
}

int nexar_compressor_create(nexar_comm_t *comm, nexar_compress_kind_t kind,
                            nexar_dtype_t dtype, size_t count, size_t k,
                            double ratio, uint64_t seed,
                            nexar_compressor_t **out) {
  if (!out) return fail(comm, NEXAR_ERR_INVALID_ARG, "NULL out");
  *out = NULL;
  if (!comm) return NEXAR_ERR_INVALID_ARG;
  if (kind != NEXAR_COMPRESS_TOPK && kind != NEXAR_COMPRESS_RANDK)
    return fail(comm, NEXAR_ERR_INVALID_ARG, "bad kind %d", (int)kind);
  if (!dtype_ok(dtype))
    return fail(comm,
                (unsigned)dtype < NEXAR_NUM_DTYPES ? NEXAR_ERR_UNSUPPORTED
                                                   : NEXAR_ERR_INVALID_ARG,
                "dtype %d: float32, float16 or bfloat16 only", (int)dtype);
  if (count == 0 || count > UINT32_MAX)
    return fail(comm, NEXAR_ERR_INVALID_ARG,
                "count %zu outside 1 .. 4294967295", count);
  if (k == 0) {
    if (!(ratio > 0.0 && ratio <= 1.0))
      return fail(comm, NEXAR_ERR_INVALID_ARG,
                  "k 0 and ratio %g outside (0, 1]", ratio);
    double kk = ceil(ratio * (double)count);
    k = kk < 1.0 ? 1 : kk > (double)count ? count : (size_t)kk;
  }
  if (k > count)
    return fail(comm, NEXAR_ERR_INVALID_ARG, "k %zu above count %zu", k, count);
  nexar_compressor_t *c = calloc(1, sizeof(*c));
  if (!c) return NEXAR_ERR_NOMEM;
  c->comm = comm;
  c->kind = kind;
  c->dtype = dtype;
  c->es = nexar_dtype_size(dtype);
  c->count = count;
  c->k = k;
  c->seed = seed;
  bool topk = kind == NEXAR_COMPRESS_TOPK;
  c->res = calloc(count, sizeof(float));
  c->idx = malloc(k * sizeof(uint32_t));
  c->saved = malloc(k * sizeof(float));
  bool ok = c->res && c->idx && c->saved;
  if (topk) {
    c->hist = malloc(NEXAR__TOPK_BINS * sizeof(uint32_t));
    ok = ok && c->hist;
    if (dtype != NEXAR_FLOAT32) {
      c->sum = malloc(count * sizeof(float));
      ok = ok && c->sum;
    }
  } else {
    c->vals = malloc(k * sizeof(float));
    ok = ok && c->vals;
  }
  int rc = ok ? xbuf_fit(c, comm->size) : NEXAR_ERR_NOMEM;
  if (rc < 0) {
    nexar_compressor_free(&c);
    return rc == NEXAR_ERR_NOMEM
               ? fail(comm, rc, "no memory for a compressor of %zu elements",
                      count)
               : rc;
  }
  *out = c;
  return NEXAR_OK;
}

int nexar_compressor_info(const nexar_compressor_t *c, size_t *k,
                          uint64_t *steps) {
  if (!c) return NEXAR_ERR_INVALID_ARG;
  if (k) *k = c->k;
  if (steps) *steps = c->steps;
  return NEXAR_OK;
}

int nexar_compressor_residual(const nexar_compressor_t *c, float *out,
                              size_t count) {
  if (!c || count != c->count) return NEXAR_ERR_INVALID_ARG;
  if (out) memcpy(out, c->res, count * sizeof(float));
  return NEXAR_OK;
}

/* ---- The call ---- */

/* Gives the residual back what the call took from it. */
static void restore(nexar_compressor_t *c) {
  for (size_t j = 0; j < c->k; j++) c->res[c->idx[j]] = c->saved[j];
}

/* TOPK: select, pack this rank's record, allgather, check and sum. */
static int topk(nexar_compressor_t *c, void *recvbuf, nexar_op_t op) {
  nexar_comm_t *comm = c->comm;
  int n = comm->size, me = comm->rank;
  size_t k = c->k, rec = rec_bytes(c);
  nexar__topk_select(c->res, c->count, k, c->hist, c->idx);
  uint8_t *mine = c->xbuf + (size_t)me * rec;
  for (size_t j = 0; j < k; j++) {
    uint32_t i = c->idx[j];
    float a = c->res[i];
    c->saved[j] = a;
    memcpy(mine + 4 * j, &i, 4);
    narrow(mine + 4 * k, j, c->dtype, a);
    float v = widen(mine + 4 * k, j, c->dtype);
    c->res[i] = v == a ? 0.0f : a - v; /* an infinity sent leaves 0 */
  }
  int rc = nexar_allgather(comm, NEXAR_IN_PLACE, c->xbuf, rec, NEXAR_UINT8);
  if (rc < 0) return rc;
  /* No trust in a peer's indices. */
  for (int r = 0; r < n; r++)
    for (size_t j = 0; j < k; j++) {
      uint32_t i;
      memcpy(&i, c->xbuf + (size_t)r * rec + 4 * j, 4);
      if (i >= c->count)
        return fail(comm, NEXAR_ERR_PROTO,
                    "step %llu: rank %d sent index %u, count is %zu",
                    (unsigned long long)c->steps, r, i, c->count);
    }
  float *sum = c->dtype == NEXAR_FLOAT32 ? recvbuf : c->sum;
  memset(sum, 0, c->count * sizeof(float));
  for (int r = 0; r < n; r++) {
    const uint8_t *x = c->xbuf + (size_t)r * rec;
    for (size_t j = 0; j < k; j++) {
      uint32_t i;
      memcpy(&i, x + 4 * j, 4);
      sum[i] += widen(x + 4 * k, j, c->dtype);
    }
  }
  float div = (float)n;
  for (size_t i = 0; i < c->count; i++) {
    float v = op == NEXAR_AVG ? sum[i] / div : sum[i];
    narrow(recvbuf, i, c->dtype, v);
  }
  return 0;
}

/* RANDK: the shared indices, one float32 allreduce, scatter back. */
static int randk(nexar_compressor_t *c, void *recvbuf, nexar_op_t op) {
  size_t k = c->k;
  nexar__randk_select(c->seed, c->steps, c->count, k, c->idx);
  for (size_t j = 0; j < k; j++) {
    c->saved[j] = c->vals[j] = c->res[c->idx[j]];
    c->res[c->idx[j]] = 0.0f;
  }
  int rc = nexar_allreduce(c->comm, NEXAR_IN_PLACE, c->vals, k, NEXAR_FLOAT32,
                           NEXAR_SUM);
  if (rc < 0) return rc;
  memset(recvbuf, 0, c->count * c->es);
  float div = (float)c->comm->size;
  for (size_t j = 0; j < k; j++)
    narrow(recvbuf, c->idx[j], c->dtype,
           op == NEXAR_AVG ? c->vals[j] / div : c->vals[j]);
  return 0;
}

int nexar_allreduce_compressed(nexar_comm_t *comm, const void *sendbuf,
                               void *recvbuf, size_t count, nexar_dtype_t dtype,
                               nexar_op_t op, nexar_compressor_t *c) {
  if (!comm) return NEXAR_ERR_INVALID_ARG;
  if (!c || !recvbuf || !sendbuf)
    return fail(comm, NEXAR_ERR_INVALID_ARG, "NULL compressor or buffer");
  if (c->comm != comm)
    return fail(comm, NEXAR_ERR_INVALID_ARG,
                "the compressor belongs to comm %llu",
                (unsigned long long)c->comm->id);
  if (count != c->count || dtype != c->dtype)
    return fail(comm, NEXAR_ERR_INVALID_ARG,
                "count %zu, dtype %d; the compressor's: count %zu, dtype %d",
                count, (int)dtype, c->count, (int)c->dtype);
  if (op != NEXAR_SUM && op != NEXAR_AVG)
    return fail(comm, NEXAR_ERR_UNSUPPORTED, "op %d: sum or avg only", (int)op);
  if (sendbuf == NEXAR_IN_PLACE) sendbuf = recvbuf;
  nexar__dev_t *dev = &comm->ctx->dev;
  if (!nexar__dev_host_only(dev)) {
    const void *b[2] = {sendbuf, recvbuf};
    for (int i = 0; i < 2; i++) {
      int rc = nexar__dev_classify(dev, comm, "allreduce_compressed",
                                   i ? "receive" : "send", b[i], count * c->es);
      if (rc < 0) return rc;
      if (rc == NEXAR_MEM_DEVICE)
        return fail(comm, NEXAR_ERR_UNSUPPORTED,
                    "the %s buffer is device memory (host memory only)",
                    i ? "receive" : "send");
    }
  }
  int rc = xbuf_fit(c, comm->size);
  if (rc < 0) return rc;
  for (size_t i = 0; i < count; i++) c->res[i] += widen(sendbuf, i, dtype);
  rc = c->kind == NEXAR_COMPRESS_TOPK ? topk(c, recvbuf, op)
                                      : randk(c, recvbuf, op);
  if (rc < 0) {
    restore(c);
    return rc;
  }
  c->steps++;
  return NEXAR_OK;
}
