/*
 * Collective tests over real multi-process clusters (tests/harness.h: one
 * seed and N forked workers per world, each world under a hard deadline).
 *
 * Every collective of include/nexar.h, blocking and non-blocking (waited
 * with nexar_wait or polled with nexar_test), runs against a serial
 * reference computed in the test: every rank derives every rank's input
 * from (case seed, rank, element), so each rank knows the exact expected
 * contents of its buffers. Checks are bit-exact on whole allocations:
 * receive buffers (every element the call defines, every element it must
 * leave alone: gaps between v-form blocks, rank 0 of exscan, receive
 * buffers off the root), send buffers (never modified) and 64-byte guard
 * zones on both sides of every buffer (no overrun). Buffers are misaligned
 * by 0..3 bytes, in place is exercised in both spellings (NEXAR_IN_PLACE and
 * send buffer == receive buffer).
 *
 * Exactness: reduction inputs are chosen so that every partial result is
 * exactly representable in the dtype, so any combination order gives the
 * same bits and the reference needs no tolerance, float16 and bfloat16
 * included (sums of small integers: |sum| <= 2040 for float16, 11
 * significant bits; <= 248 for bfloat16, 8 bits; products of {0, +-1, 2, 3};
 * MIN/MAX of arbitrary finite normal values; AVG of float types uses inputs
 * c + 2 k e for rank k, whose sum over ranks 0..r is (r + 1)(c + r e), so
 * the quotient is an exact small integer; AVG of integer types checks the
 * truncation toward zero of arbitrary sums).
 *
 * The default run covers every collective at world sizes 1, 2, 3, 4, 5, 7
 * and 8 with counts 0, 1, n-1, n, n+1, 97 and roots 0, n/2, n-1 (dtype, op,
 * misalignment and completion mode rotate from case to case); the full
 * dtype x op matrix of the reducing collectives at n = 3 and 4; 2^20+3
 * elements at n = 4 and 5; every forced allreduce and bcast algorithm at
 * n = 2, 3, 4, 5, 7, 8; a 4 KiB NEXAR_SEG_BYTES ring pipeline; 9
 * non-blocking collectives in flight together with point-to-point traffic;
 * argument errors; NaN results. Forced settings reach every worker's
 * environment before nexar_init (nt_opts.env), identically on all ranks.
 * NEXAR_TEST_LONG=1 runs the full product (every dtype x op x count x root x
 * in-place form at every world size, under every forced algorithm);
 * NEXAR_TEST_LONG=2 also takes the 2^20+3 count through the whole dtype x
 * op matrix. NEXAR_TEST_FILTER=<substring> runs only the worlds whose label
 * ("every/4", "allreduce=ring/8") contains it, NEXAR_TEST_ONLY=i[-j] only
 * those case indices, NEXAR_TEST_LIST=1 prints the cases. See
 * docs/testing.md.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "harness.h"
#include "nexar.h"

/* ---- Collectives under test. */

enum {
  K_ALLREDUCE,
  K_BCAST,
  K_REDUCE,
  K_ALLGATHER,
  K_ALLGATHERV,
  K_REDUCE_SCATTER,
  K_RSB, /* reduce_scatter_block */
  K_ALLTOALL,
  K_ALLTOALLV,
  K_GATHER,
  K_GATHERV,
  K_SCATTER,
  K_SCATTERV,
  K_SCAN,
  K_EXSCAN,
  K_BARRIER,
  K_NUM
};

static const char *const kname[K_NUM] = {"allreduce",
                                         "bcast",
                                         "reduce",
                                         "allgather",
                                         "allgatherv",
                                         "reduce_scatter",
                                         "reduce_scatter_block",
                                         "alltoall",
                                         "alltoallv",
                                         "gather",
                                         "gatherv",
                                         "scatter",
                                         "scatterv",
                                         "scan",
                                         "exscan",
                                         "barrier"};

static int k_reducing(int k) {
  return k == K_ALLREDUCE || k == K_REDUCE || k == K_REDUCE_SCATTER ||
         k == K_RSB || k == K_SCAN || k == K_EXSCAN;
}

static int k_rooted(int k) {
  return k == K_BCAST || k == K_REDUCE || k == K_GATHER || k == K_GATHERV ||
         k == K_SCATTER || k == K_SCATTERV;
}

static int k_has_inplace(int k) {
  return k != K_BCAST && k != K_BARRIER;
}

/* ---- Datatypes and ops. */

static const nexar_dtype_t all_dts[] = {
    NEXAR_INT8,   NEXAR_UINT8,   NEXAR_INT32,   NEXAR_UINT32,  NEXAR_INT64,
    NEXAR_UINT64, NEXAR_FLOAT16, NEXAR_FLOAT32, NEXAR_FLOAT64, NEXAR_BFLOAT16};
#define N_DTS 10
static const nexar_op_t all_ops[] = {NEXAR_SUM, NEXAR_PROD, NEXAR_MAX,
                                     NEXAR_MIN, NEXAR_AVG,  NEXAR_BAND,
                                     NEXAR_BOR, NEXAR_BXOR};
#define N_OPS 8

static int dt_float(int dt) {
  return dt == NEXAR_FLOAT16 || dt == NEXAR_FLOAT32 || dt == NEXAR_FLOAT64 ||
         dt == NEXAR_BFLOAT16;
}

static int dt_signed(int dt) {
  return dt == NEXAR_INT8 || dt == NEXAR_INT32 || dt == NEXAR_INT64;
}

static size_t dt_size(int dt) {
  switch (dt) {
    case NEXAR_INT8:
    case NEXAR_UINT8:
      return 1;
    case NEXAR_FLOAT16:
    case NEXAR_BFLOAT16:
      return 2;
    case NEXAR_INT32:
    case NEXAR_UINT32:
    case NEXAR_FLOAT32:
      return 4;
    default:
      return 8;
  }
}

static const char *dt_name(int dt) {
  static const char *const n[] = {"i8",  "u8",  "i32", "u32", "i64",
                                  "u64", "f16", "f32", "f64", "bf16"};
  return dt >= 0 && dt < N_DTS ? n[dt] : "dtype?";
}

static const char *op_name(int op) {
  switch (op) {
    case NEXAR_SUM:
      return "sum";
    case NEXAR_PROD:
      return "prod";
    case NEXAR_MAX:
      return "max";
    case NEXAR_MIN:
      return "min";
    case NEXAR_AVG:
      return "avg";
    case NEXAR_BAND:
      return "band";
    case NEXAR_BOR:
      return "bor";
    case NEXAR_BXOR:
      return "bxor";
    default:
      return "op?";
  }
}

static uint64_t dt_mask(int dt) {
  size_t es = dt_size(dt);
  return es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
}

/* The valid (dtype, op) pairs: bitwise ops on integer types only. */
typedef struct pair {
  uint8_t dt, op;
} pair_t;
static pair_t pairs[N_DTS * N_OPS];
static int n_pairs;

static void init_pairs(void) {
  n_pairs = 0;
  for (int d = 0; d < N_DTS; d++)
    for (int o = 0; o < N_OPS; o++)
      if (!dt_float(all_dts[d]) || all_ops[o] < NEXAR_BAND)
        pairs[n_pairs++] = (pair_t){(uint8_t)all_dts[d], (uint8_t)all_ops[o]};
}

/* ---- Exact float conversions (values known to be representable). */

static double f16_dec(uint64_t h) {
  int s = (int)((h >> 15) & 1), e = (int)((h >> 10) & 31);
  double m = (double)(h & 1023);
  if (e == 31) return m != 0 ? NAN : s ? -INFINITY : INFINITY;
  double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
  return s ? -v : v;
}

static double f32_dec(uint64_t b) {
  uint32_t u = (uint32_t)b;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static double f64_dec(uint64_t b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

static double fdec(int dt, uint64_t b) {
  switch (dt) {
    case NEXAR_FLOAT16:
      return f16_dec(b);
    case NEXAR_BFLOAT16:
      return f32_dec(b << 16);
    case NEXAR_FLOAT32:
      return f32_dec(b);
    default:
      return f64_dec(b);
  }
}

/* Set when a reference value was not exactly representable: a bug in this
 * test, reported by the caller. */
static int inexact;

static uint64_t f16_enc(double v) {
  uint64_t s = signbit(v) ? 0x8000u : 0;
  double a = fabs(v);
  if (a == 0) return s;
  int e;
  frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
  e -= 1;       /* a = 1.f 2^e */
  double mant;
  uint64_t bits;
  if (e >= -14) {
    mant = ldexp(a, 10 - e) - 1024;
    bits = s | ((uint64_t)(e + 15) << 10) | (uint64_t)mant;
  } else {
    mant = ldexp(a, 24);
    bits = s | (uint64_t)mant;
  }
  if (e > 15 || mant != floor(mant)) inexact = 1;
  return bits;
}

static uint64_t fenc(int dt, double v) {
  if (dt == NEXAR_FLOAT64) {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
  }
  if (dt == NEXAR_FLOAT16) return f16_enc(v);
  float f = (float)v;
  if ((double)f != v) inexact = 1;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if (dt == NEXAR_FLOAT32) return u;
  if (u & 0xffffu) inexact = 1; /* bfloat16 keeps the top 16 bits */
  return u >> 16;
}

/* ---- Deterministic inputs. */

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* One test case: every rank runs the same list in the same order. */
typedef struct tcase {
  uint8_t coll, dt, op;
  uint8_t ip;    /* 0 out of place, 1 NEXAR_IN_PLACE, 2 sendbuf == recvbuf */
  uint8_t nb;    /* 0 blocking, 1 nexar_i* + nexar_wait, 2 + nexar_test */
  uint8_t soff;  /* misalignment of the send buffer, bytes */
  uint8_t roff;  /* misalignment of the receive buffer, bytes */
  uint8_t nulls; /* pass NULL for buffers/arrays the rank does not use */
  int root;
  size_t count;
  uint32_t seed;
} tcase_t;

static uint64_t hbits(const tcase_t *c, int k, size_t i, unsigned salt) {
  return mix(((uint64_t)c->seed << 32) ^ ((uint64_t)(k + 1) << 56) ^
             ((uint64_t)salt << 52) ^ (uint64_t)i);
}

/* A signed integer in [-lim, lim] as raw bits of |dt|. */
static uint64_t small_int(int dt, uint64_t h, int64_t lim) {
  int64_t v = (int64_t)(h % (uint64_t)(2 * lim + 1));
  if (dt_signed(dt) || dt_float(dt)) v -= lim;
  return dt_float(dt) ? fenc(dt, (double)v) : (uint64_t)v & dt_mask(dt);
}

/* Range of SUM/AVG inputs: at most 8 ranks, every partial sum exact. */
static int64_t sum_lim(int dt) {
  switch (dt) {
    case NEXAR_INT8:
      return 15;
    case NEXAR_UINT8:
      return 15; /* 0..30: sum <= 240 */
    case NEXAR_INT32:
    case NEXAR_UINT32:
      return 1 << 27;
    case NEXAR_INT64:
    case NEXAR_UINT64:
      return (int64_t)1 << 56;
    case NEXAR_FLOAT16:
      return 255; /* |sum| <= 2040 < 2^11 */
    case NEXAR_BFLOAT16:
      return 31; /* |sum| <= 248 < 2^8 */
    case NEXAR_FLOAT32:
      return 1 << 20;
    default:
      return (int64_t)1 << 49;
  }
}

/* A random finite, normal value (no zero, NaN or subnormal) of a float
 * type, raw bits. */
static uint64_t rand_normal(int dt, uint64_t h) {
  uint64_t s = (h >> 63) & 1, e, m;
  switch (dt) {
    case NEXAR_FLOAT16:
      e = 1 + (h >> 20) % 30;
      m = h & 1023;
      return s << 15 | e << 10 | m;
    case NEXAR_BFLOAT16:
      e = 1 + (h >> 20) % 254;
      m = h & 127;
      return s << 15 | e << 7 | m;
    case NEXAR_FLOAT32:
      e = 1 + (h >> 30) % 254;
      m = h & 0x7fffff;
      return s << 31 | e << 23 | m;
    default:
      e = 1 + (h >> 52) % 2046;
      m = mix(h) & 0xfffffffffffffull;
      return s << 63 | e << 52 | m;
  }
}

/* Input element |i| of rank |k| (raw bits of the dtype). */
static uint64_t inval(const tcase_t *c, int k, size_t i) {
  int dt = c->dt;
  uint64_t h = hbits(c, k, i, 1);
  if (!k_reducing(c->coll)) return h & dt_mask(dt);
  switch (c->op) {
    case NEXAR_SUM:
      return small_int(dt, h, sum_lim(dt));
    case NEXAR_AVG:
      if (dt_float(dt)) {
        /* c + 2 k e: every prefix sum over ranks 0..r is a multiple of
         * r + 1 (see the top of the file). */
        uint64_t hi = hbits(c, 0, i, 2);
        int v = (int)(hi % 4) + 2 * k * (int)((hi >> 8) & 1);
        return fenc(dt, (double)v);
      }
      return small_int(dt, h, sum_lim(dt));
    case NEXAR_PROD: {
      /* At most one 2, one 3 or -1 per element (8 ranks < 11, 13), some
       * zeros: the product is exact and its sign is order-independent. */
      int v = 1;
      if ((i * 5 + (size_t)k + c->seed) % 17 == 0)
        v = 0;
      else if ((i + (size_t)k + c->seed) % 11 == 0)
        v = 2;
      else if ((i * 3 + (size_t)k + c->seed) % 13 == 0)
        v = dt_signed(dt) || dt_float(dt) ? -1 : 3;
      return dt_float(dt) ? fenc(dt, (double)v) : (uint64_t)v & dt_mask(dt);
    }
    case NEXAR_MAX:
    case NEXAR_MIN:
      return dt_float(dt) ? rand_normal(dt, h) : h & dt_mask(dt);
    case NEXAR_BAND:
      return (h | mix(h)) & dt_mask(dt);
    default:
      return h & dt_mask(dt);
  }
}

static int64_t sext(int dt, uint64_t b) {
  switch (dt) {
    case NEXAR_INT8:
      return (int8_t)b;
    case NEXAR_INT32:
      return (int32_t)b;
    default:
      return (int64_t)b;
  }
}

/* The reference reduction of element |i| over ranks 0..last (inclusive) in
 * rank order; AVG divides by last + 1. */
static uint64_t ref_red(const tcase_t *c, int last, size_t i) {
  int dt = c->dt, op = c->op;
  uint64_t acc = inval(c, 0, i);
  if (dt_float(dt)) {
    double a = fdec(dt, acc);
    for (int k = 1; k <= last; k++) {
      uint64_t b = inval(c, k, i);
      double x = fdec(dt, b);
      switch (op) {
        case NEXAR_SUM:
        case NEXAR_AVG:
          a += x;
          break;
        case NEXAR_PROD:
          a *= x;
          break;
        case NEXAR_MAX:
          if (x > a) a = x, acc = b;
          break;
        default:
          if (x < a) a = x, acc = b;
          break;
      }
    }
    if (op == NEXAR_MAX || op == NEXAR_MIN) return acc;
    if (op == NEXAR_AVG) a /= (double)(last + 1);
    return fenc(dt, a);
  }
  int sg = dt_signed(dt);
  int64_t sacc = sext(dt, acc); /* for SUM/AVG of small values */
  for (int k = 1; k <= last; k++) {
    uint64_t b = inval(c, k, i);
    switch (op) {
      case NEXAR_SUM:
      case NEXAR_AVG:
        sacc += sg ? sext(dt, b) : (int64_t)b;
        break;
      case NEXAR_PROD:
        acc = (acc * b) & dt_mask(dt);
        break;
      case NEXAR_MAX:
        if (sg ? sext(dt, b) > sext(dt, acc) : b > acc) acc = b;
        break;
      case NEXAR_MIN:
        if (sg ? sext(dt, b) < sext(dt, acc) : b < acc) acc = b;
        break;
      case NEXAR_BAND:
        acc &= b;
        break;
      case NEXAR_BOR:
        acc |= b;
        break;
      default:
        acc ^= b;
        break;
    }
  }
  if (op == NEXAR_SUM) return (uint64_t)sacc & dt_mask(dt);
  if (op == NEXAR_AVG) {
    if (sg) return (uint64_t)(sacc / (int64_t)(last + 1)) & dt_mask(dt);
    return ((uint64_t)sacc / (uint64_t)(last + 1)) & dt_mask(dt);
  }
  return acc;
}

/* Self-check of the exactness claim, run by main before any world: the
 * reference (rank order, double precision) must equal a reduction in the
 * reverse order rounded to the dtype after every step, as the library's
 * kernels do, with every intermediate exactly representable. */
static int selfcheck_case(const tcase_t *c, int n) {
  int dt = c->dt, op = c->op;
  if (!k_reducing(c->coll) || !dt_float(dt)) return 0;
  size_t m = c->count < 4096 ? c->count : 4096;
  int lasts[2] = {n - 1, n / 2};
  for (int li = 0; li < 2; li++)
    for (size_t i = 0; i < m; i++) {
      int last = lasts[li];
      inexact = 0;
      uint64_t want = ref_red(c, last, i);
      uint64_t acc = inval(c, last, i);
      for (int k = last - 1; k >= 0; k--) {
        uint64_t b = inval(c, k, i);
        double a = fdec(dt, acc), x = fdec(dt, b), y;
        switch (op) {
          case NEXAR_SUM:
          case NEXAR_AVG:
            y = a + x;
            break;
          case NEXAR_PROD:
            y = a * x;
            break;
          case NEXAR_MAX:
            y = x > a ? x : a;
            break;
          default:
            y = x < a ? x : a;
            break;
        }
        if (dt != NEXAR_FLOAT64) y = (float)y;
        acc = fenc(dt, y);
      }
      if (op == NEXAR_AVG) {
        double y = fdec(dt, acc) / (double)(last + 1);
        if (dt != NEXAR_FLOAT64) y = (float)y;
        acc = fenc(dt, y);
      }
      if (inexact || acc != want) {
        fprintf(stderr,
                "test bug: %s %s %s element %zu over %d ranks is not exact "
                "(0x%llx vs 0x%llx)\n",
                kname[c->coll], dt_name(dt), op_name(op), i, last + 1,
                (unsigned long long)acc, (unsigned long long)want);
        return 1;
      }
    }
  return 0;
}

/* ---- Buffers with guard zones. */

#define GUARD 64

typedef struct tbuf {
  uint8_t *base; /* GUARD + off + bytes + GUARD (+ slack) */
  uint8_t *p;    /* what the call gets: base + GUARD + off */
  uint8_t *exp;  /* expected contents of the whole allocation */
  size_t bytes, alloc;
} tbuf_t;

static int tb_init(tbuf_t *b, size_t bytes, int off, uint32_t salt) {
  b->bytes = bytes;
  b->alloc = bytes + 2 * GUARD + 4;
  b->base = malloc(b->alloc);
  b->exp = malloc(b->alloc);
  if (!b->base || !b->exp) return -1;
  /* Background: bytes >= 0x80, unlike the small inputs of most cases. */
  for (size_t j = 0; j < b->alloc; j++)
    b->base[j] = (uint8_t)(0x80 | ((j * 37 + salt) & 0x7f));
  b->p = b->base + GUARD + off;
  return 0;
}

static void tb_free(tbuf_t *b) {
  free(b->base);
  free(b->exp);
  memset(b, 0, sizeof *b);
}

/* Snapshot after the inputs were written: the expectation starts as "no
 * byte changes". */
static void tb_seal(tbuf_t *b) {
  if (b->base) memcpy(b->exp, b->base, b->alloc);
}

static void put(uint8_t *p, size_t es, size_t i, uint64_t v) {
  memcpy(p + i * es, &v, es); /* little endian: the low bytes */
}

static uint64_t get(const uint8_t *p, size_t es, size_t i) {
  uint64_t v = 0;
  memcpy(&v, p + i * es, es);
  return v;
}

static uint8_t *tb_e(tbuf_t *b) {
  return b->exp + (b->p - b->base);
}

/* ---- Case state. */

typedef struct tstate {
  tcase_t c;
  int r, n;
  size_t es;
  tbuf_t s, v;    /* send and receive buffers (base NULL: none) */
  const void *sp; /* sendbuf argument */
  void *vp;       /* recvbuf argument */
  size_t *cnt, *dsp, *rcnt, *rdsp;
  const size_t *a_cnt, *a_dsp, *a_rcnt, *a_rdsp; /* as passed */
  size_t scount;       /* the scalar count of the v-forms */
  size_t dc_lo, dc_hi; /* receive elements whose value is unspecified */
} tstate_t;

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v && *v ? v : dflt;
}

static void describe(const tstate_t *t, char *out, size_t len) {
  const tcase_t *c = &t->c;
  static const char *const ipn[] = {"out-of-place", "IN_PLACE", "same-buf"};
  static const char *const nbn[] = {"blocking", "i+wait", "i+test"};
  snprintf(out, len,
           "%s n=%d count=%zu %s %s root=%d %s %s soff=%d roff=%d nulls=%d "
           "seed=%u [algo allreduce=%s bcast=%s seg=%s]",
           kname[c->coll], t->n, c->count, dt_name(c->dt),
           k_reducing(c->coll) ? op_name(c->op) : "-",
           k_rooted(c->coll) ? c->root : -1, ipn[c->ip], nbn[c->nb], c->soff,
           c->roff, c->nulls, c->seed, env_or("NEXAR_ALGO_ALLREDUCE", "auto"),
           env_or("NEXAR_ALGO_BCAST", "auto"),
           env_or("NEXAR_SEG_BYTES", "default"));
}

/* Per-rank counts of the v-forms: uneven, some blocks empty. */
static size_t vcount(const tcase_t *c, int k) {
  if (c->count == 0) return 0;
  if ((k + (int)c->seed) % 4 == 3) return 0;
  return c->count + (size_t)(k % 3);
}

/* Blocks in reverse rank order with a one-element gap before each; returns
 * the extent. */
static size_t layout(const size_t *cnt, size_t *dsp, int n) {
  size_t pos = 0;
  for (int k = n - 1; k >= 0; k--) {
    pos += 1;
    dsp[k] = pos;
    pos += cnt[k];
  }
  return pos + 1;
}

/* alltoallv: elements rank a sends to rank b. Symmetric when in place
 * (one set of counts describes both directions). */
static size_t pcount(const tcase_t *c, int a, int b) {
  if (c->count == 0) return 0;
  if (c->ip) {
    if ((a + b + (int)c->seed) % 4 == 3) return 0;
    return c->count + (size_t)((a * b) % 3);
  }
  if ((a * 3 + b + (int)c->seed) % 5 == 4) return 0;
  return c->count + (size_t)((a + 2 * b) % 3);
}

/* Send-side layout of rank a (out of place) or the in-place layout. */
static size_t a2av_layout(const tcase_t *c, int n, int a, size_t *cnt,
                          size_t *dsp) {
  for (int j = 0; j < n; j++) cnt[j] = pcount(c, a, j);
  return layout(cnt, dsp, n);
}

static void st_free(tstate_t *t) {
  tb_free(&t->s);
  tb_free(&t->v);
  free(t->cnt);
  free(t->dsp);
  free(t->rcnt);
  free(t->rdsp);
  t->cnt = t->dsp = t->rcnt = t->rdsp = NULL;
}

static int mkbuf(tstate_t *t, tbuf_t *b, size_t elems, int off, uint32_t salt) {
  return tb_init(b, elems * t->es, off, t->c.seed * 31 + salt);
}

/* Allocates and fills the buffers of case |c| on rank r of n and computes
 * the expected contents. Returns 0, or -1 when out of memory. */
static int prep(tstate_t *t, const tcase_t *c, int r, int n) {
  memset(t, 0, sizeof *t);
  t->c = *c;
  t->r = r;
  t->n = n;
  t->es = dt_size(c->dt);
  size_t es = t->es, cnt = c->count, un = (size_t)n;
  int root = c->root, isroot = r == root, ip = c->ip;
  t->cnt = calloc(un, sizeof(size_t));
  t->dsp = calloc(un, sizeof(size_t));
  t->rcnt = calloc(un, sizeof(size_t));
  t->rdsp = calloc(un, sizeof(size_t));
  if (!t->cnt || !t->dsp || !t->rcnt || !t->rdsp) return -1;
  tbuf_t *S = &t->s, *V = &t->v;
#define MK(b, elems, off, salt) \
  if (mkbuf(t, b, elems, off, salt)) return -1
  switch (c->coll) {
    case K_BARRIER:
      return 0;
    case K_ALLREDUCE:
    case K_SCAN:
    case K_EXSCAN: {
      MK(V, cnt, c->roff, 2);
      uint8_t *in = V->p;
      if (!ip) {
        MK(S, cnt, c->soff, 1);
        in = S->p;
      }
      for (size_t i = 0; i < cnt; i++) put(in, es, i, inval(c, r, i));
      tb_seal(S);
      tb_seal(V);
      t->sp = ip == 1 ? NEXAR_IN_PLACE : ip == 2 ? V->p : S->p;
      t->vp = V->p;
      int last = c->coll == K_ALLREDUCE ? n - 1 : c->coll == K_SCAN ? r : r - 1;
      if (last >= 0)
        for (size_t i = 0; i < cnt; i++)
          put(tb_e(V), es, i, ref_red(c, last, i));
      return 0;
    }
    case K_BCAST:
      MK(V, cnt, c->roff, 2);
      if (isroot)
        for (size_t i = 0; i < cnt; i++) put(V->p, es, i, inval(c, root, i));
      tb_seal(V);
      for (size_t i = 0; i < cnt; i++) put(tb_e(V), es, i, inval(c, root, i));
      t->vp = V->p;
      return 0;
    case K_REDUCE:
      if (isroot) {
        MK(V, cnt, c->roff, 2);
        uint8_t *in = V->p;
        if (!ip) {
          MK(S, cnt, c->soff, 1);
          in = S->p;
        }
        for (size_t i = 0; i < cnt; i++) put(in, es, i, inval(c, r, i));
        t->sp = ip == 1 ? NEXAR_IN_PLACE : ip == 2 ? V->p : S->p;
        t->vp = V->p;
      } else {
        MK(S, cnt, c->soff, 1);
        for (size_t i = 0; i < cnt; i++) put(S->p, es, i, inval(c, r, i));
        t->sp = S->p;
        if (!c->nulls) {
          MK(V, cnt, c->roff, 2); /* ignored: must stay as it is */
          t->vp = V->p;
        }
      }
      tb_seal(S);
      tb_seal(V);
      if (isroot)
        for (size_t i = 0; i < cnt; i++)
          put(tb_e(V), es, i, ref_red(c, n - 1, i));
      return 0;
    case K_ALLGATHER:
    case K_GATHER: {
      int gets = c->coll == K_ALLGATHER || isroot;
      int inplace = ip && gets;
      if (gets || !c->nulls) {
        MK(V, un * cnt, c->roff, 2);
        t->vp = V->p;
      }
      if (!inplace) MK(S, cnt, c->soff, 1);
      uint8_t *in = inplace ? V->p + (size_t)r * cnt * es : S->p;
      for (size_t i = 0; i < cnt; i++) put(in, es, i, inval(c, r, i));
      t->sp = !inplace ? S->p : ip == 1 ? NEXAR_IN_PLACE : V->p;
      tb_seal(S);
      tb_seal(V);
      if (gets)
        for (int k = 0; k < n; k++)
          for (size_t i = 0; i < cnt; i++)
            put(tb_e(V), es, (size_t)k * cnt + i, inval(c, k, i));
      return 0;
    }
    case K_ALLGATHERV:
    case K_GATHERV: {
      int gets = c->coll == K_ALLGATHERV || isroot;
      int inplace = ip && gets;
      for (int k = 0; k < n; k++) t->cnt[k] = vcount(c, k);
      size_t ext = layout(t->cnt, t->dsp, n);
      t->scount = t->cnt[r];
      t->a_cnt = t->cnt;
      t->a_dsp = t->dsp;
      if (c->coll == K_GATHERV && !isroot && c->nulls)
        t->a_cnt = t->a_dsp = NULL; /* matter at the root only */
      if (gets || !c->nulls) {
        MK(V, ext, c->roff, 2);
        t->vp = V->p;
      }
      if (!inplace) MK(S, t->scount, c->soff, 1);
      uint8_t *in = inplace ? V->p + t->dsp[r] * es : S->p;
      for (size_t i = 0; i < t->scount; i++) put(in, es, i, inval(c, r, i));
      t->sp = !inplace ? S->p : ip == 1 ? NEXAR_IN_PLACE : V->p;
      tb_seal(S);
      tb_seal(V);
      if (gets)
        for (int k = 0; k < n; k++)
          for (size_t i = 0; i < t->cnt[k]; i++)
            put(tb_e(V), es, t->dsp[k] + i, inval(c, k, i));
      return 0;
    }
    case K_REDUCE_SCATTER:
    case K_RSB: {
      size_t tot = 0, off = 0;
      for (int k = 0; k < n; k++) {
        t->cnt[k] = c->coll == K_RSB ? cnt : vcount(c, k);
        if (k < r) off += t->cnt[k];
        tot += t->cnt[k];
      }
      t->a_cnt = t->cnt;
      size_t mine = t->cnt[r];
      MK(V, ip ? tot : mine, c->roff, 2);
      if (!ip) MK(S, tot, c->soff, 1);
      uint8_t *in = ip ? V->p : S->p;
      for (size_t i = 0; i < tot; i++) put(in, es, i, inval(c, r, i));
      tb_seal(S);
      tb_seal(V);
      t->sp = ip == 1 ? NEXAR_IN_PLACE : ip == 2 ? V->p : S->p;
      t->vp = V->p;
      for (size_t i = 0; i < mine; i++)
        put(tb_e(V), es, i, ref_red(c, n - 1, off + i));
      if (ip) t->dc_lo = mine, t->dc_hi = tot; /* beyond the result */
      return 0;
    }
    case K_ALLTOALL: {
      MK(V, un * cnt, c->roff, 2);
      if (!ip) MK(S, un * cnt, c->soff, 1);
      uint8_t *in = ip ? V->p : S->p;
      for (size_t i = 0; i < un * cnt; i++) put(in, es, i, inval(c, r, i));
      tb_seal(S);
      tb_seal(V);
      t->sp = ip == 1 ? NEXAR_IN_PLACE : ip == 2 ? V->p : S->p;
      t->vp = V->p;
      for (int j = 0; j < n; j++)
        for (size_t i = 0; i < cnt; i++)
          put(tb_e(V), es, (size_t)j * cnt + i,
              inval(c, j, (size_t)r * cnt + i));
      return 0;
    }
    case K_ALLTOALLV: {
      /* Receive side: from rank j, pcount(j, r) elements at rdsp[j]. */
      for (int j = 0; j < n; j++) t->rcnt[j] = pcount(c, j, r);
      size_t rext = layout(t->rcnt, t->rdsp, n);
      t->a_rcnt = t->rcnt;
      t->a_rdsp = t->rdsp;
      MK(V, rext, c->roff, 2);
      t->vp = V->p;
      if (!ip) {
        size_t sext_ = a2av_layout(c, n, r, t->cnt, t->dsp);
        MK(S, sext_, c->soff, 1);
        for (size_t i = 0; i < sext_; i++) put(S->p, es, i, inval(c, r, i));
        t->a_cnt = t->cnt;
        t->a_dsp = t->dsp;
        t->sp = S->p;
      } else {
        for (int j = 0; j < n; j++)
          for (size_t i = 0; i < t->rcnt[j]; i++)
            put(V->p, es, t->rdsp[j] + i, inval(c, r, t->rdsp[j] + i));
        t->sp = ip == 1 ? NEXAR_IN_PLACE : V->p; /* counts ignored: NULL */
      }
      tb_seal(S);
      tb_seal(V);
      size_t *jc = malloc(un * sizeof(size_t)),
             *jd = malloc(un * sizeof(size_t));
      if (!jc || !jd) {
        free(jc);
        free(jd);
        return -1;
      }
      for (int j = 0; j < n; j++) {
        a2av_layout(c, n, j, jc, jd); /* where rank j keeps my block */
        for (size_t i = 0; i < t->rcnt[j]; i++)
          put(tb_e(V), es, t->rdsp[j] + i, inval(c, j, jd[r] + i));
      }
      free(jc);
      free(jd);
      return 0;
    }
    case K_SCATTER:
    case K_SCATTERV: {
      int v = c->coll == K_SCATTERV;
      for (int k = 0; k < n; k++) {
        t->cnt[k] = v ? vcount(c, k) : cnt;
        t->dsp[k] = (size_t)k * cnt;
      }
      size_t ext = v ? layout(t->cnt, t->dsp, n) : un * cnt;
      t->scount = t->cnt[r];
      t->a_cnt = t->cnt;
      t->a_dsp = t->dsp;
      if (isroot || !c->nulls) {
        MK(S, ext, c->soff, 1);
        t->sp = S->p;
      }
      if (isroot)
        for (size_t i = 0; i < ext; i++) put(S->p, es, i, inval(c, root, i));
      else if (v && c->nulls)
        t->a_cnt = t->a_dsp = NULL; /* matter at the root only */
      if (isroot && ip) {
        t->vp = ip == 1 ? (void *)NEXAR_IN_PLACE : S->p;
      } else {
        MK(V, t->scount, c->roff, 2);
        t->vp = V->p;
      }
      tb_seal(S);
      tb_seal(V);
      if (V->base)
        for (size_t i = 0; i < t->scount; i++)
          put(tb_e(V), es, i, inval(c, root, t->dsp[r] + i));
      return 0;
    }
  }
#undef MK
  return -1;
}

/* Starts (nb) or runs (blocking) the call. */
static int post(nexar_comm_t *w, tstate_t *t, nexar_req_t **rq) {
  const tcase_t *c = &t->c;
  nexar_dtype_t dt = (nexar_dtype_t)c->dt;
  nexar_op_t op = (nexar_op_t)c->op;
  int nb = c->nb != 0;
  size_t n = c->count;
  const void *s = t->sp;
  void *v = t->vp;
#define CALL(f, ...) (nb ? nexar_i##f(__VA_ARGS__, rq) : nexar_##f(__VA_ARGS__))
  switch (c->coll) {
    case K_ALLREDUCE:
      return CALL(allreduce, w, s, v, n, dt, op);
    case K_BCAST:
      return CALL(bcast, w, v, n, dt, c->root);
    case K_REDUCE:
      return CALL(reduce, w, s, v, n, dt, op, c->root);
    case K_ALLGATHER:
      return CALL(allgather, w, s, v, n, dt);
    case K_ALLGATHERV:
      return CALL(allgatherv, w, s, t->scount, v, t->a_cnt, t->a_dsp, dt);
    case K_REDUCE_SCATTER:
      return CALL(reduce_scatter, w, s, v, t->a_cnt, dt, op);
    case K_RSB:
      return CALL(reduce_scatter_block, w, s, v, n, dt, op);
    case K_ALLTOALL:
      return CALL(alltoall, w, s, v, n, dt);
    case K_ALLTOALLV:
      return CALL(alltoallv, w, s, t->a_cnt, t->a_dsp, v, t->a_rcnt, t->a_rdsp,
                  dt);
    case K_GATHER:
      return CALL(gather, w, s, v, n, dt, c->root);
    case K_GATHERV:
      return CALL(gatherv, w, s, t->scount, v, t->a_cnt, t->a_dsp, dt, c->root);
    case K_SCATTER:
      return CALL(scatter, w, s, v, n, dt, c->root);
    case K_SCATTERV:
      return CALL(scatterv, w, s, t->a_cnt, t->a_dsp, v, t->scount, dt,
                  c->root);
    case K_SCAN:
      return CALL(scan, w, s, v, n, dt, op);
    case K_EXSCAN:
      return CALL(exscan, w, s, v, n, dt, op);
    case K_BARRIER:
      return nb ? nexar_ibarrier(w, rq) : nexar_barrier(w);
  }
#undef CALL
  return NEXAR_ERR_INTERNAL;
}

/* Completes a started request: nexar_wait (nb 1) or nexar_test polling
 * (nb 2). */
static int complete(nexar_req_t **rq, int nb) {
  nexar_status_t st;
  memset(&st, 0x5a, sizeof st);
  int rc;
  if (nb == 1) {
    rc = nexar_wait(rq, &st);
  } else {
    int done = 0;
    for (;;) {
      rc = nexar_test(rq, &done, &st);
      if (rc < 0 || done) break;
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
  if (*rq != NULL) {
    nt_fail(__FILE__, __LINE__, "request not freed after completion");
    return NEXAR_ERR_INTERNAL;
  }
  if (st.error != rc) {
    nt_fail(__FILE__, __LINE__, "status.error %d but result %d", st.error, rc);
    return NEXAR_ERR_INTERNAL;
  }
  return rc;
}

/* Compares one buffer with its expectation; prints the first difference. */
static int cmp_buf(const tstate_t *t, tbuf_t *b, const char *what) {
  if (!b->base) return 0;
  if (memcmp(b->base, b->exp, b->alloc) == 0) return 0;
  size_t j = 0;
  while (b->base[j] == b->exp[j]) j++;
  size_t start = (size_t)(b->p - b->base);
  char d[400];
  describe(t, d, sizeof d);
  if (j < start || j >= start + b->bytes) {
    nt_fail(__FILE__, __LINE__,
            "%s: %s buffer written outside its %zu bytes (byte %+td)", d, what,
            b->bytes, (ptrdiff_t)j - (ptrdiff_t)start);
  } else {
    size_t e = (j - start) / t->es, bad = 0;
    for (size_t i = e; i < b->bytes / t->es; i++)
      bad += memcmp(b->p + i * t->es, tb_e(b) + i * t->es, t->es) != 0;
    nt_fail(__FILE__, __LINE__,
            "%s: %s buffer element %zu is 0x%" PRIx64 ", expected 0x%" PRIx64
            " (%zu of %zu elements differ)",
            d, what, e, get(b->p, t->es, e), get(tb_e(b), t->es, e), bad,
            b->bytes / t->es);
  }
  return 1;
}

static int verify(tstate_t *t) {
  if (t->dc_hi > t->dc_lo)
    memcpy(tb_e(&t->v) + t->dc_lo * t->es, t->v.p + t->dc_lo * t->es,
           (t->dc_hi - t->dc_lo) * t->es);
  int bad = cmp_buf(t, &t->v, "receive");
  bad |= cmp_buf(t, &t->s, "send");
  return bad;
}

static int fail_rc(const tstate_t *t, nexar_comm_t *w, const char *what,
                   int rc) {
  char d[400];
  describe(t, d, sizeof d);
  nt_fail(__FILE__, __LINE__, "%s: %s returned %s: %s", d, what,
          nexar_err_name(rc), nexar_comm_last_error(w));
  return 1;
}

/* Runs one case to completion and checks it. */
static int run_case(nexar_comm_t *w, const tcase_t *c, int r, int n) {
  tstate_t t;
  if (prep(&t, c, r, n)) {
    st_free(&t);
    nt_fail(__FILE__, __LINE__, "out of memory (count %zu)", c->count);
    return 1;
  }
  if (inexact) {
    char d[400];
    describe(&t, d, sizeof d);
    nt_fail(__FILE__, __LINE__, "%s: test bug: inexact reference", d);
    return 1;
  }
  nexar_req_t *rq = NULL;
  int rc = post(w, &t, &rq);
  if (rc == NEXAR_OK && c->nb) {
    if (!rq) {
      st_free(&t);
      return fail_rc(&t, w, "start (NULL request)", NEXAR_ERR_INTERNAL);
    }
    rc = complete(&rq, c->nb);
  }
  int bad = rc != NEXAR_OK ? fail_rc(&t, w, "call", rc) : verify(&t);
  st_free(&t);
  return bad;
}

/* ---- Case lists. */

/* Sweeps a world runs (plan_t.sweeps). */
enum {
  S_EVERY = 1 << 0,  /* every collective, small counts, all roots */
  S_MATRIX = 1 << 1, /* full dtype x op of the reducing collectives */
  S_BIG = 1 << 2,    /* 2^20 + 3 elements */
  S_AR = 1 << 3,     /* allreduce sweep (forced algorithms) */
  S_BC = 1 << 4,     /* bcast sweep (forced algorithms) */
  S_SEG = 1 << 5,    /* many pipeline segments (small NEXAR_SEG_BYTES) */
  S_CONC = 1 << 6,   /* 9 collectives in flight with p2p */
  S_ARGS = 1 << 7,   /* argument errors */
  S_NAN = 1 << 8     /* NaN inputs (and S_AR: rank-identical results) */
};

typedef struct plan {
  const char *name;
  int world;
  const char *env; /* "K=V\n..." for every worker */
  unsigned sweeps;
  int timeout_ms;
} plan_t;

static int long_level; /* NEXAR_TEST_LONG */

#define BIG ((size_t)(1u << 20) + 3)

/* Case-list builder: |out| NULL counts only. */
typedef struct builder {
  tcase_t *out;
  size_t n;
  unsigned rot; /* rotation of the secondary parameters */
} builder_t;

static void add(builder_t *b, int coll, size_t count, int dt, int op, int root,
                int ip) {
  unsigned k = b->rot++;
  if (b->out) {
    tcase_t *c = &b->out[b->n];
    memset(c, 0, sizeof *c);
    c->coll = (uint8_t)coll;
    c->count = count;
    c->dt = (uint8_t)dt;
    c->op = (uint8_t)op;
    c->root = k_rooted(coll) ? root : 0;
    c->ip = (uint8_t)(k_has_inplace(coll) ? ip : 0);
    c->nb = (uint8_t)(k % 3);
    c->soff = (uint8_t)(k % 4);
    c->roff = (uint8_t)((k / 4 + 1) % 4);
    c->nulls = (uint8_t)((k / 3) % 2);
    c->seed = k * 2654435761u + 12345u;
  }
  b->n++;
}

/* A rotating valid (dtype, op) for collective |coll|. */
static void pick(builder_t *b, int coll, int *dt, int *op) {
  unsigned k = b->rot;
  if (!k_reducing(coll)) {
    *dt = all_dts[(k * 3) % N_DTS];
    *op = NEXAR_SUM;
    return;
  }
  for (unsigned j = 0;; j++) {
    const pair_t *p = &pairs[((k + j) * 7) % (unsigned)n_pairs];
    if (coll == K_EXSCAN && p->op == NEXAR_AVG) continue;
    *dt = p->dt;
    *op = p->op;
    return;
  }
}

static int counts_of(int n, size_t *out) {
  const size_t base[] = {0, 1, (size_t)n - 1, (size_t)n, (size_t)n + 1, 97};
  int m = 0;
  for (int i = 0; i < 6; i++) {
    int dup = 0;
    for (int j = 0; j < m; j++) dup |= out[j] == base[i];
    if (!dup) out[m++] = base[i];
  }
  return m;
}

static int roots_of(int n, int *out) {
  int m = 0;
  out[m++] = 0;
  if (n / 2 != 0) out[m++] = n / 2;
  if (n - 1 != 0 && n - 1 != n / 2) out[m++] = n - 1;
  return m;
}

/* Every collective with the given counts; all roots, both placements. */
static void sweep_colls(builder_t *b, int n, const size_t *counts, int nc,
                        int full_matrix) {
  int roots[3], nr = roots_of(n, roots);
  for (int k = 0; k < K_NUM; k++) {
    if (k == K_BARRIER) {
      for (int i = 0; i < 3; i++) add(b, k, 0, NEXAR_UINT8, NEXAR_SUM, 0, 0);
      continue;
    }
    for (int ci = 0; ci < nc; ci++)
      for (int ri = 0; ri < (k_rooted(k) ? nr : 1); ri++)
        for (int ip = 0; ip < (k_has_inplace(k) ? 3 : 1); ip++) {
          /* The reduced sweep alternates the two in-place spellings. */
          if (!full_matrix && ip == 2) continue;
          int ipv = !full_matrix && ip == 1 ? 1 + (int)(b->rot % 2) : ip;
          if (full_matrix) {
            if (k_reducing(k)) {
              for (int p = 0; p < n_pairs; p++) {
                if (k == K_EXSCAN && pairs[p].op == NEXAR_AVG) continue;
                add(b, k, counts[ci], pairs[p].dt, pairs[p].op, roots[ri], ipv);
              }
            } else {
              for (int d = 0; d < N_DTS; d++)
                add(b, k, counts[ci], all_dts[d], NEXAR_SUM, roots[ri], ipv);
            }
          } else {
            int dt, op;
            pick(b, k, &dt, &op);
            add(b, k, counts[ci], dt, op, roots[ri], ipv);
          }
        }
  }
}

/* The reducing collectives over the whole dtype x op matrix. */
static void sweep_matrix(builder_t *b, int n) {
  const int colls[] = {K_ALLREDUCE, K_REDUCE, K_REDUCE_SCATTER,
                       K_RSB,       K_SCAN,   K_EXSCAN};
  const size_t counts[] = {1, 97};
  int roots[3], nr = roots_of(n, roots);
  for (int ki = 0; ki < 6; ki++)
    for (int p = 0; p < n_pairs; p++) {
      if (colls[ki] == K_EXSCAN && pairs[p].op == NEXAR_AVG) continue;
      for (int ci = 0; ci < 2; ci++)
        for (int ip = 0; ip < 2; ip++)
          add(b, colls[ki], counts[ci], pairs[p].dt, pairs[p].op,
              roots[(p + ci) % nr], ip ? 1 + p % 2 : 0);
    }
  /* Copying collectives: every element size. */
  const int copies[] = {K_BCAST,    K_ALLGATHER, K_ALLGATHERV,
                        K_ALLTOALL, K_ALLTOALLV, K_GATHER,
                        K_GATHERV,  K_SCATTER,   K_SCATTERV};
  for (int ki = 0; ki < 9; ki++)
    for (int d = 0; d < N_DTS; d++)
      add(b, copies[ki], 97, all_dts[d], NEXAR_SUM, roots[d % nr],
          d % 2 && k_has_inplace(copies[ki]));
}

/* 2^20 + 3 elements. */
static void sweep_big(builder_t *b, int n) {
  add(b, K_ALLREDUCE, BIG, NEXAR_FLOAT32, NEXAR_SUM, 0, 0);
  add(b, K_ALLREDUCE, BIG, NEXAR_BFLOAT16, NEXAR_SUM, 0, 1);
  add(b, K_ALLREDUCE, BIG, NEXAR_INT64, NEXAR_MAX, 0, 2);
  add(b, K_ALLREDUCE, BIG, NEXAR_FLOAT16, NEXAR_AVG, 0, 0);
  add(b, K_BCAST, BIG, NEXAR_FLOAT32, NEXAR_SUM, n - 1, 0);
  add(b, K_BCAST, BIG, NEXAR_UINT8, NEXAR_SUM, n / 2, 0);
  add(b, K_ALLGATHER, BIG, NEXAR_FLOAT32, NEXAR_SUM, 0, 0);
  add(b, K_ALLGATHER, BIG, NEXAR_INT8, NEXAR_SUM, 0, 1);
  add(b, K_REDUCE_SCATTER, BIG, NEXAR_FLOAT32, NEXAR_SUM, 0, 0);
  add(b, K_RSB, BIG, NEXAR_INT32, NEXAR_BXOR, 0, 1);
  add(b, K_REDUCE, BIG, NEXAR_FLOAT64, NEXAR_MIN, n - 1, 0);
}

/* Allreduce or bcast across message sizes that reach every algorithm's
 * threshold region. */
static void sweep_one(builder_t *b, int n, int coll) {
  size_t counts[16];
  int nc = counts_of(n, counts);
  const size_t more[] = {1031, 4099, 65537, 262147};
  for (int i = 0; i < 4; i++) counts[nc++] = more[i];
  int roots[3], nr = roots_of(n, roots);
  for (int ci = 0; ci < nc; ci++)
    for (int ri = 0; ri < (coll == K_BCAST ? nr : 1); ri++)
      for (int ip = 0; ip < (coll == K_BCAST ? 1 : 3); ip++) {
        if (long_level && (counts[ci] < 100000 || long_level >= 2)) {
          for (int p = 0; p < n_pairs; p++) {
            if (coll == K_BCAST && pairs[p].op != NEXAR_SUM) continue;
            add(b, coll, counts[ci], pairs[p].dt, pairs[p].op, roots[ri], ip);
          }
        } else {
          int dt, op;
          pick(b, coll, &dt, &op);
          add(b, coll, counts[ci], dt, op, roots[ri], ip);
        }
      }
  int dt, op;
  pick(b, coll, &dt, &op);
  add(b, coll, BIG, dt, op, n - 1, 0);
}

/* Many ring segments (run with a small NEXAR_SEG_BYTES). */
static void sweep_seg(builder_t *b, int n) {
  add(b, K_ALLREDUCE, 100003, NEXAR_FLOAT32, NEXAR_SUM, 0, 0);
  add(b, K_ALLREDUCE, 50001, NEXAR_FLOAT64, NEXAR_PROD, 0, 1);
  add(b, K_ALLREDUCE, 70001, NEXAR_BFLOAT16, NEXAR_AVG, 0, 2);
  add(b, K_ALLREDUCE, 200003, NEXAR_INT8, NEXAR_MIN, 0, 0);
  add(b, K_REDUCE_SCATTER, 60001, NEXAR_UINT32, NEXAR_SUM, 0, 0);
  add(b, K_RSB, 30011, NEXAR_FLOAT16, NEXAR_MAX, 0, 1);
  add(b, K_ALLGATHER, 30011, NEXAR_UINT64, NEXAR_SUM, 0, 0);
  add(b, K_ALLGATHERV, 20011, NEXAR_FLOAT16, NEXAR_SUM, 0, 1);
  add(b, K_BCAST, 300007, NEXAR_UINT8, NEXAR_SUM, n - 1, 0);
  add(b, K_REDUCE, 150001, NEXAR_INT32, NEXAR_BOR, n / 2, 0);
  add(b, K_REDUCE, 150001, NEXAR_FLOAT32, NEXAR_MAX, 0, 1);
}

static size_t build(const plan_t *pl, tcase_t *out) {
  builder_t b = {out, 0, 0};
  int n = pl->world;
  size_t counts[8];
  int nc = counts_of(n, counts);
  if (pl->sweeps & S_EVERY) {
    if (long_level) {
      sweep_colls(&b, n, counts, nc, 1);
      size_t big = BIG;
      sweep_colls(&b, n, &big, 1, long_level >= 2);
    } else {
      sweep_colls(&b, n, counts, nc, 0);
    }
  }
  if ((pl->sweeps & S_MATRIX) && !long_level) sweep_matrix(&b, n);
  if ((pl->sweeps & S_BIG) && !long_level) sweep_big(&b, n);
  if (pl->sweeps & S_AR) sweep_one(&b, n, K_ALLREDUCE);
  if (pl->sweeps & S_BC) sweep_one(&b, n, K_BCAST);
  if (pl->sweeps & S_SEG) sweep_seg(&b, n);
  return b.n;
}

/* ---- Special cases. */

/* 9 collectives of different kinds in flight at once, point-to-point
 * messages started between them, completed in a scrambled order. */
static int conc_case(nexar_comm_t *w, int r, int n, int rep, size_t *ncases) {
  /* Three eager-sized messages and one large one (rendezvous path). */
  enum { NC = 9, P2P = 4, PCNT = 5000, PBIG = 100003 };
  const size_t ptot = 3 * PCNT + PBIG;
  tcase_t cs[NC];
  const int kinds[NC] = {K_ALLREDUCE,      K_BCAST,     K_REDUCE,
                         K_ALLGATHER,      K_ALLTOALLV, K_SCAN,
                         K_REDUCE_SCATTER, K_GATHERV,   K_BARRIER};
  const int dts[NC] = {NEXAR_INT32,  NEXAR_FLOAT64, NEXAR_BFLOAT16,
                       NEXAR_UINT8,  NEXAR_INT64,   NEXAR_FLOAT32,
                       NEXAR_UINT32, NEXAR_FLOAT16, NEXAR_UINT8};
  const int ops[NC] = {NEXAR_SUM, NEXAR_SUM,  NEXAR_SUM, NEXAR_SUM, NEXAR_SUM,
                       NEXAR_MAX, NEXAR_BXOR, NEXAR_SUM, NEXAR_SUM};
  const size_t cnts[NC] = {50001, 30011, 4099, 10007, 97, 1001, 5003, 997, 0};
  tstate_t ts[NC];
  nexar_req_t *rq[NC + 2 * P2P];
  memset(rq, 0, sizeof rq);
  int32_t *pin = malloc(ptot * sizeof(int32_t));
  int32_t *pout = malloc(ptot * sizeof(int32_t));
  NT_CHECK(pin && pout);
  for (size_t i = 0; i < ptot; i++) {
    pout[i] = (int32_t)(i * 7 + (size_t)r * 100003 + (size_t)rep);
    pin[i] = -1;
  }
  int to = (r + 1) % n, from = (r - 1 + n) % n;
  for (int k = 0; k < NC; k++) {
    memset(&cs[k], 0, sizeof cs[k]);
    cs[k].coll = (uint8_t)kinds[k];
    cs[k].dt = (uint8_t)dts[k];
    cs[k].op = (uint8_t)ops[k];
    cs[k].count = cnts[k];
    cs[k].root = (rep + k) % n;
    cs[k].ip = (uint8_t)((k + rep) % 2 && k_has_inplace(kinds[k]));
    cs[k].nb = 1;
    cs[k].soff = (uint8_t)(k % 4);
    cs[k].roff = (uint8_t)((k + 1) % 4);
    cs[k].seed = (uint32_t)(1000 + rep * 16 + k);
    if (prep(&ts[k], &cs[k], r, n)) {
      nt_fail(__FILE__, __LINE__, "out of memory");
      return 1;
    }
  }
  int q = NC;
  for (int k = 0; k < NC; k++) {
    NT_OKC(w, post(w, &ts[k], &rq[k]));
    if (k % 2 == 0 && q < NC + 2 * P2P) {
      int m = (q - NC) / 2;
      size_t pc = m == 3 ? PBIG : PCNT, po = (size_t)m * PCNT;
      NT_OKC(w, nexar_irecv(w, pin + po, pc, NEXAR_INT32, from, 100 + m,
                            &rq[q++]));
      NT_OKC(w,
             nexar_isend(w, pout + po, pc, NEXAR_INT32, to, 100 + m, &rq[q++]));
    }
  }
  /* Complete in a scrambled order, polling. */
  int left = q, rounds = 0;
  while (left > 0) {
    for (int j = 0; j < q; j++) {
      int k = (j * 5 + rep) % q;
      if (!rq[k]) continue;
      int done = 0;
      int rc = nexar_test(&rq[k], &done, NULL);
      if (rc != NEXAR_OK) {
        nt_fail(__FILE__, __LINE__, "rep %d request %d (%s) failed: %s: %s",
                rep, k, k < NC ? kname[kinds[k]] : "p2p", nexar_err_name(rc),
                nexar_comm_last_error(w));
        return 1;
      }
      if (done) left--;
    }
    if (++rounds % 64 == 0) {
      struct timespec sl = {0, 100000};
      nanosleep(&sl, NULL);
    }
  }
  int bad = 0;
  for (int k = 0; k < NC; k++) {
    bad |= verify(&ts[k]);
    st_free(&ts[k]);
  }
  for (size_t i = 0; i < ptot; i++) {
    int32_t e = (int32_t)(i * 7 + (size_t)from * 100003 + (size_t)rep);
    NT_CHECKF(pin[i] == e, "rep %d p2p message %zu element %zu", rep,
              i / PCNT < 3 ? i / PCNT : 3, i);
  }
  free(pin);
  free(pout);
  *ncases += NC + P2P;
  return bad;
}

/* Expects |expr| to return |want|. */
#define EXPECT_RC(want, expr)                                        \
  do {                                                               \
    int e_rc_ = (expr);                                              \
    (*ncases)++;                                                     \
    NT_CHECKF(e_rc_ == (want), "%s returned %s, expected %s", #expr, \
              nexar_err_name(e_rc_), nexar_err_name(want));          \
  } while (0)

/* Argument errors: every one has no effect (the collective sequence is
 * not consumed), which the valid allreduce at the end checks. */
static int args_case(nexar_comm_t *w, int r, int n, size_t *ncases) {
  float a[8] = {0}, b[8] = {0};
  int32_t ia[8] = {0}, ib[8] = {0};
  nexar_req_t *rq = NULL;
  size_t cnt[8] = {0}, dsp[8] = {0};
  for (int k = 0; k < n; k++) cnt[k] = 1, dsp[k] = (size_t)k;
  const nexar_op_t bitops[] = {NEXAR_BAND, NEXAR_BOR, NEXAR_BXOR};
  const nexar_dtype_t fdts[] = {NEXAR_FLOAT16, NEXAR_FLOAT32, NEXAR_FLOAT64,
                                NEXAR_BFLOAT16};
  for (int d = 0; d < 4; d++)
    for (int o = 0; o < 3; o++) {
      nexar_dtype_t dt = fdts[d];
      nexar_op_t op = bitops[o];
      EXPECT_RC(NEXAR_ERR_UNSUPPORTED, nexar_allreduce(w, a, b, 1, dt, op));
      EXPECT_RC(NEXAR_ERR_UNSUPPORTED,
                nexar_iallreduce(w, a, b, 1, dt, op, &rq));
      EXPECT_RC(NEXAR_ERR_UNSUPPORTED, nexar_reduce(w, a, b, 1, dt, op, 0));
      EXPECT_RC(NEXAR_ERR_UNSUPPORTED,
                nexar_reduce_scatter_block(w, a, b, 1, dt, op));
      EXPECT_RC(NEXAR_ERR_UNSUPPORTED,
                nexar_reduce_scatter(w, a, b, cnt, dt, op));
      EXPECT_RC(NEXAR_ERR_UNSUPPORTED, nexar_scan(w, a, b, 1, dt, op));
      EXPECT_RC(NEXAR_ERR_UNSUPPORTED, nexar_exscan(w, a, b, 1, dt, op));
    }
  const nexar_dtype_t fp8[] = {NEXAR_FLOAT8_E4M3, NEXAR_FLOAT8_E5M2};
  for (int d = 0; d < 2; d++) {
    EXPECT_RC(NEXAR_ERR_UNSUPPORTED,
              nexar_allreduce(w, a, b, 1, fp8[d], NEXAR_SUM));
    EXPECT_RC(NEXAR_ERR_UNSUPPORTED, nexar_bcast(w, a, 1, fp8[d], 0));
    EXPECT_RC(NEXAR_ERR_UNSUPPORTED, nexar_allgather(w, a, b, 1, fp8[d]));
    EXPECT_RC(NEXAR_ERR_UNSUPPORTED, nexar_ibcast(w, a, 1, fp8[d], 0, &rq));
  }
  for (int op = 0; op < N_DTS; op++)
    EXPECT_RC(NEXAR_ERR_UNSUPPORTED,
              nexar_exscan(w, a, b, 1, all_dts[op], NEXAR_AVG));
  /* Not a dtype / not an op. */
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_allreduce(w, a, b, 1, (nexar_dtype_t)12, NEXAR_SUM));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG, nexar_bcast(w, a, 1, (nexar_dtype_t)-1, 0));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_allreduce(w, ia, ib, 1, NEXAR_INT32, (nexar_op_t)5));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_allreduce(w, ia, ib, 1, NEXAR_INT32, (nexar_op_t)11));
  /* Roots out of range. */
  const int badroots[] = {-1, n, n + 5};
  for (int i = 0; i < 3; i++) {
    int rt = badroots[i];
    EXPECT_RC(NEXAR_ERR_INVALID_ARG, nexar_bcast(w, a, 1, NEXAR_FLOAT32, rt));
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_ibcast(w, a, 1, NEXAR_FLOAT32, rt, &rq));
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_reduce(w, a, b, 1, NEXAR_FLOAT32, NEXAR_SUM, rt));
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_gather(w, a, b, 1, NEXAR_FLOAT32, rt));
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_gatherv(w, a, 1, b, cnt, dsp, NEXAR_FLOAT32, rt));
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_scatter(w, a, b, 1, NEXAR_FLOAT32, rt));
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_scatterv(w, a, cnt, dsp, b, 1, NEXAR_FLOAT32, rt));
  }
  /* NULL buffers with data to move. */
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_allreduce(w, a, NULL, 1, NEXAR_FLOAT32, NEXAR_SUM));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_allreduce(w, NULL, b, 1, NEXAR_FLOAT32, NEXAR_SUM));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG, nexar_bcast(w, NULL, 1, NEXAR_FLOAT32, 0));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_allgather(w, a, NULL, 1, NEXAR_FLOAT32));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_alltoall(w, NULL, b, 1, NEXAR_FLOAT32));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_scan(w, a, NULL, 1, NEXAR_FLOAT32, NEXAR_SUM));
  EXPECT_RC(
      NEXAR_ERR_INVALID_ARG,
      nexar_reduce_scatter_block(w, NULL, b, 1, NEXAR_FLOAT32, NEXAR_SUM));
  if (r == 0) {
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_reduce(w, a, NULL, 1, NEXAR_FLOAT32, NEXAR_SUM, 0));
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_gather(w, a, NULL, 1, NEXAR_FLOAT32, 0));
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_scatter(w, NULL, b, 1, NEXAR_FLOAT32, 0));
    EXPECT_RC(NEXAR_ERR_INVALID_ARG,
              nexar_gatherv(w, a, 1, b, NULL, dsp, NEXAR_FLOAT32, 0));
  }
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_allgatherv(w, a, 1, b, NULL, dsp, NEXAR_FLOAT32));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG, /* sendcount != recvcounts[rank] */
            nexar_allgatherv(w, a, 2, b, cnt, dsp, NEXAR_FLOAT32));
  /* NULL communicator / request. */
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_allreduce(NULL, a, b, 1, NEXAR_FLOAT32, NEXAR_SUM));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG, nexar_barrier(NULL));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG,
            nexar_iallreduce(w, a, b, 1, NEXAR_FLOAT32, NEXAR_SUM, NULL));
  EXPECT_RC(NEXAR_ERR_INVALID_ARG, nexar_ibarrier(w, NULL));
  /* A bad call on one rank only has no effect either. */
  if (r == n - 1)
    EXPECT_RC(NEXAR_ERR_UNSUPPORTED,
              nexar_allreduce(w, a, b, 1, NEXAR_FLOAT8_E4M3, NEXAR_SUM));
  /* The communicator still works and still agrees on the sequence. */
  for (int i = 0; i < 8; i++) ia[i] = r + i;
  NT_OKC(w, nexar_allreduce(w, NEXAR_IN_PLACE, ia, 8, NEXAR_INT32, NEXAR_SUM));
  for (int i = 0; i < 8; i++)
    NT_CHECKF(ia[i] == n * (n - 1) / 2 + n * i, "element %d: %d", i, ia[i]);
  (*ncases)++;
  return 0;
}

/* |v| cut to the 11 significant bits of float16 (normal range). */
static double f16_round(double v) {
  int e;
  double m = frexp(v, &e);
  return ldexp(floor(m * 2048) / 2048, e);
}

/* Inexact float inputs (the result depends on the combination order):
 * every rank must still get bit-identical allreduce results, as the header
 * promises for any algorithm. Checked with an allgather of the results. */
static int ident_case(nexar_comm_t *w, int r, int n, size_t *ncases) {
  const nexar_dtype_t fdts[] = {NEXAR_FLOAT16, NEXAR_FLOAT32, NEXAR_FLOAT64,
                                NEXAR_BFLOAT16};
  const nexar_op_t ops[] = {NEXAR_SUM, NEXAR_PROD, NEXAR_AVG};
  const size_t counts[] = {97, 65537};
  for (int d = 0; d < 4; d++)
    for (int o = 0; o < 3; o++)
      for (int ci = 0; ci < 2; ci++) {
        size_t cnt = counts[ci], es = dt_size(fdts[d]);
        uint8_t *buf = malloc(cnt * es), *all = malloc((size_t)n * cnt * es);
        NT_CHECK(buf && all);
        for (size_t i = 0; i < cnt; i++) {
          uint64_t h = mix((uint64_t)r << 40 ^ (uint64_t)(d * 8 + o) << 32 ^ i);
          /* Mantissas full of bits: +-[1, 2) x 2^(-3..3) for SUM/AVG,
           * [0.9, 1.1) for PROD (no overflow over 8 ranks). */
          double v = 1.0 + (double)(h >> 12) / 4503599627370496.0;
          if (ops[o] == NEXAR_PROD)
            v = 0.9 + (v - 1.0) * 0.2;
          else
            v = ldexp((h & 1) ? -v : v, (int)((h >> 1) % 7) - 3);
          float f = (float)v;
          uint32_t u;
          memcpy(&u, &f, sizeof u);
          uint64_t b = fdts[d] == NEXAR_FLOAT64    ? fenc(NEXAR_FLOAT64, v)
                       : fdts[d] == NEXAR_FLOAT32  ? u
                       : fdts[d] == NEXAR_BFLOAT16 ? u >> 16
                                                   : f16_enc(f16_round(v));
          put(buf, es, i, b);
        }
        inexact = 0;
        NT_OKC(w,
               nexar_allreduce(w, NEXAR_IN_PLACE, buf, cnt, fdts[d], ops[o]));
        NT_OKC(w, nexar_allgather(w, buf, all, cnt, fdts[d]));
        for (int k = 0; k < n; k++)
          NT_CHECKF(memcmp(all + (size_t)k * cnt * es, buf, cnt * es) == 0,
                    "allreduce %s %s count %zu: rank %d and rank %d got "
                    "different bits",
                    dt_name(fdts[d]), op_name(ops[o]), cnt, k, r);
        for (size_t i = 0; i < cnt; i++) {
          double x = fdec(fdts[d], get(buf, es, i));
          NT_CHECKF(x == x && x != INFINITY && x != -INFINITY,
                    "allreduce %s %s element %zu: %g", dt_name(fdts[d]),
                    op_name(ops[o]), i, x);
        }
        free(buf);
        free(all);
        (*ncases)++;
      }
  return 0;
}

/* NaN operands: MIN/MAX give a quiet NaN, SUM a NaN, identical on every
 * rank (checked with an allgather of the results). */
static int nan_case(nexar_comm_t *w, int r, int n, size_t *ncases) {
  const nexar_dtype_t fdts[] = {NEXAR_FLOAT16, NEXAR_FLOAT32, NEXAR_FLOAT64,
                                NEXAR_BFLOAT16};
  const nexar_op_t ops[] = {NEXAR_MAX, NEXAR_MIN, NEXAR_SUM, NEXAR_PROD};
  /* Signalling NaNs with payloads, both signs. */
  const uint64_t snan[] = {0xfd01u, 0xff800123u, 0x7ff0000000000abcull,
                           0xff81u};
  const uint64_t qbit[] = {0x200u, 0x400000u, 0x8000000000000ull, 0x40u};
  for (int d = 0; d < 4; d++)
    for (int o = 0; o < 4; o++) {
      enum { C = 37 };
      size_t es = dt_size(fdts[d]);
      uint8_t in[C * 8], out[C * 8], *all = malloc((size_t)n * C * 8);
      NT_CHECK(all);
      for (size_t i = 0; i < C; i++) {
        uint64_t v = fenc(fdts[d], (double)(1 + (i + (size_t)r) % 3));
        if (i % 5 == (size_t)r % 5 && r == (int)(i % (size_t)n))
          v = snan[d]; /* one rank's NaN per such element */
        put(in, es, i, v);
      }
      NT_OKC(w, nexar_allreduce(w, in, out, C, fdts[d], ops[o]));
      NT_OKC(w, nexar_allgather(w, out, all, C, fdts[d]));
      for (size_t i = 0; i < C; i++) {
        int has_nan = i % 5 == i % (size_t)n % 5;
        uint64_t g = get(out, es, i);
        double x = fdec(fdts[d], g);
        if (has_nan) {
          NT_CHECKF(x != x, "%s %s element %zu: 0x%" PRIx64 " is not NaN",
                    dt_name(fdts[d]), op_name(ops[o]), i, g);
          NT_CHECKF(g & qbit[d],
                    "%s %s element %zu: NaN 0x%" PRIx64 " is not quiet",
                    dt_name(fdts[d]), op_name(ops[o]), i, g);
        } else {
          NT_CHECKF(x == x, "%s %s element %zu: 0x%" PRIx64 " is NaN",
                    dt_name(fdts[d]), op_name(ops[o]), i, g);
        }
        for (int k = 0; k < n; k++)
          NT_CHECKF(get(all, es, (size_t)k * C + i) == g,
                    "%s %s element %zu: rank %d got 0x%" PRIx64
                    ", rank %d 0x%" PRIx64,
                    dt_name(fdts[d]), op_name(ops[o]), i, k,
                    get(all, es, (size_t)k * C + i), r, g);
      }
      free(all);
      (*ncases)++;
    }
  return 0;
}

/* ---- Worlds. */

/* Shared with the forked workers: rank 0 stores its case count here. */
static size_t *shared_cases;

static int worker(int index, void *arg) {
  const plan_t *pl = arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  double t0 = nt_now_ms();
  size_t ncases = build(pl, NULL);
  tcase_t *cs = malloc((ncases + 1) * sizeof *cs);
  NT_CHECK(cs);
  build(pl, cs);
  /* NEXAR_TEST_ONLY=i or i-j: run only those cases of the list (to
   * reproduce a failure without the cases before it). */
  size_t lo = 0, hi = ncases;
  const char *only = getenv("NEXAR_TEST_ONLY");
  if (only && *only) {
    char *end;
    lo = strtoul(only, &end, 10);
    hi = *end == '-' ? strtoul(end + 1, NULL, 10) + 1 : lo + 1;
    if (hi > ncases) hi = ncases;
  }
  if (getenv("NEXAR_TEST_LIST")) { /* print the list, run nothing */
    for (size_t i = lo; i < hi && r == 0; i++) {
      tstate_t t;
      memset(&t, 0, sizeof t);
      t.c = cs[i];
      t.n = n;
      char d[400];
      describe(&t, d, sizeof d);
      printf("%zu: %s\n", i, d);
    }
    lo = hi;
  }
  for (size_t i = lo; i < hi; i++)
    if (run_case(w, &cs[i], r, n)) {
      nt_fail(__FILE__, __LINE__, "case index %zu (NEXAR_TEST_ONLY=%zu)", i, i);
      return 1;
    }
  if (only && *only) ncases = hi > lo ? hi - lo : 0;
  free(cs);
  if (pl->sweeps & S_ARGS)
    if (args_case(w, r, n, &ncases)) return 1;
  if ((pl->sweeps & S_NAN) && n > 1)
    if (nan_case(w, r, n, &ncases)) return 1;
  if ((pl->sweeps & (S_NAN | S_AR)) && n > 1)
    if (ident_case(w, r, n, &ncases)) return 1;
  if (pl->sweeps & S_CONC)
    for (int rep = 0; rep < (long_level ? 20 : 4); rep++)
      if (conc_case(w, r, n, rep, &ncases)) return 1;
  NT_OKC(w, nexar_barrier(w));
  if (r == 0) {
    printf("%s world=%d: cases: %zu (%.1f s after joining)\n", pl->name, n,
           ncases, (nt_now_ms() - t0) / 1e3);
    fflush(stdout);
    *shared_cases = ncases;
  }
  NT_OK(nexar_finalize(ctx));
  return 0;
}

#define MAXPLANS 128

static int add_plan(plan_t *pl, int np, const char *name, int world,
                    const char *env, unsigned sweeps, int timeout_ms) {
  if (np >= MAXPLANS) return np;
  pl[np] = (plan_t){name, world, env, sweeps, timeout_ms};
  return np + 1;
}

static const char *const ar_env[] = {
    "NEXAR_ALGO_ALLREDUCE=ring", "NEXAR_ALGO_ALLREDUCE=rd",
    "NEXAR_ALGO_ALLREDUCE=rabenseifner", "NEXAR_ALGO_ALLREDUCE=direct"};
static const char *const ar_names[] = {"allreduce=ring", "allreduce=rd",
                                       "allreduce=rabenseifner",
                                       "allreduce=direct"};
#define N_AR_ALGOS (int)(sizeof ar_env / sizeof ar_env[0])
static const char *const bc_env[] = {"NEXAR_ALGO_BCAST=binomial",
                                     "NEXAR_ALGO_BCAST=scatter_allgather"};
static const char *const bc_names[] = {"bcast=binomial",
                                       "bcast=scatter_allgather"};
#define SEG_ENV "NEXAR_SEG_BYTES=4096\nNEXAR_ALGO_ALLREDUCE=ring"

static int make_plans(plan_t *pl) {
  static const int worlds[] = {1, 2, 3, 4, 5, 7, 8};
  int np = 0;
  if (!long_level) {
    for (int i = 0; i < 7; i++) {
      int n = worlds[i];
      unsigned s = S_EVERY | S_ARGS;
      if (n == 3 || n == 4) s |= S_MATRIX;
      if (n == 4 || n == 5) s |= S_BIG;
      if (n == 4 || n == 5 || n == 8) s |= S_CONC;
      if (n == 2 || n == 7) s |= S_NAN;
      np = add_plan(pl, np, "every", n, NULL, s, 240000);
    }
    /* Forced algorithms: powers of two and not, 2 to 8 ranks. */
    const int aw[] = {2, 3, 4, 5, 7, 8};
    for (int a = 0; a < N_AR_ALGOS; a++)
      for (int i = 0; i < 6; i++)
        np = add_plan(pl, np, ar_names[a], aw[i], ar_env[a], S_AR, 240000);
    for (int a = 0; a < 2; a++)
      for (int i = 0; i < 6; i++)
        np = add_plan(pl, np, bc_names[a], aw[i], bc_env[a], S_BC, 240000);
    np = add_plan(pl, np, "seg4096", 3, SEG_ENV, S_SEG | S_CONC, 240000);
    np = add_plan(pl, np, "seg4096", 4, SEG_ENV, S_SEG, 240000);
    np = add_plan(pl, np, "seg4096", 7, SEG_ENV, S_SEG | S_CONC, 240000);
    return np;
  }
  const int lt = 3600000;
  for (int i = 0; i < 7; i++) {
    int n = worlds[i];
    np = add_plan(pl, np, "every", n, NULL,
                  S_EVERY | S_ARGS | S_NAN | S_CONC | S_AR | S_BC | S_SEG, lt);
    for (int a = 0; a < N_AR_ALGOS; a++)
      np = add_plan(pl, np, ar_names[a], n, ar_env[a], S_AR | S_CONC, lt);
    for (int a = 0; a < 2; a++)
      np = add_plan(pl, np, bc_names[a], n, bc_env[a], S_BC | S_CONC, lt);
    np = add_plan(pl, np, "seg4096", n, SEG_ENV, S_SEG | S_AR | S_CONC, lt);
  }
  return np;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  init_pairs();
  const char *lv = getenv("NEXAR_TEST_LONG");
  long_level = lv ? atoi(lv) : 0;
  const char *filter = getenv("NEXAR_TEST_FILTER");
  static plan_t plans[MAXPLANS];
  shared_cases = mmap(NULL, sizeof(size_t), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared_cases == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  int np = make_plans(plans);
  int fails = 0, worlds = 0;
  size_t total = 0;
  double t0 = nt_now_ms();
  for (int i = 0; i < np; i++) {
    size_t m = build(&plans[i], NULL);
    tcase_t *cs = malloc((m + 1) * sizeof *cs);
    if (!cs) return 1;
    build(&plans[i], cs);
    for (size_t j = 0; j < m; j++)
      if (selfcheck_case(&cs[j], plans[i].world)) return 1;
    free(cs);
  }
  printf("reference self-check passed (%.1f s)\n", (nt_now_ms() - t0) / 1e3);
  for (int i = 0; i < np; i++) {
    const plan_t *pl = &plans[i];
    char label[64];
    snprintf(label, sizeof label, "%s/%d", pl->name, pl->world);
    if (filter && *filter && !strstr(label, filter)) continue;
    nt_opts_t o = {
        .world_size = pl->world, .timeout_ms = pl->timeout_ms, .env = pl->env};
    double t1 = nt_now_ms();
    *shared_cases = 0;
    int rc = nt_run(&o, worker, (void *)pl);
    size_t c = *shared_cases;
    printf("%s %s world=%d cases=%zu (%.1f s)\n", rc ? "FAIL" : "ok", pl->name,
           pl->world, c, (nt_now_ms() - t1) / 1e3);
    fflush(stdout);
    fails += rc ? 1 : 0;
    worlds++;
    total += c;
  }
  printf(
      "cases: %zu in %d worlds (long level %d), %.1f s, %d failed "
      "world(s)\n",
      total, worlds, long_level, (nt_now_ms() - t0) / 1e3, fails);
  return fails ? 1 : 0;
}
