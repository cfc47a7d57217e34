/*
 * Compressed allreduce (nexar_allreduce_compressed) at world sizes 1 to 5:
 *
 * - exact: every rank derives every rank's inputs from a hash of (rank,
 *   step, element) and runs its own serial model of the algorithm as
 *   include/nexar.h states it (top-k by a full sort with ties to the lower
 *   index, random-k by its own selection sampling over splitmix64, error
 *   feedback, sums in float32 in rank order, one rounding); the library's
 *   result must equal it bit for bit at every step, and so must this
 *   rank's residual. float32, float16, bfloat16; SUM and AVG; k = 1, k =
 *   count, inputs with many ties. Random-k inputs are multiples of 2^-8
 *   (their sums are exact in any order: the dense allreduce may add in
 *   any order).
 * - conservation: with SUM, for every element, the sum over steps of the
 *   results plus the sum over ranks of the final residuals (one dense
 *   allreduce of the residuals) equals the sum of every input (float64
 *   from the generated values), to float rounding.
 * - bytes: nexar_comm_bytes_sent around one call equals the algorithm's
 *   formula: top-k (n - 1) k (4 + dtype size) on each rank; random-k the
 *   recursive-doubling allreduce of 4k bytes, summed over the ranks.
 * - bad input: k 0 with no ratio, k above count, count 0, a bad kind, an
 *   integer or invalid dtype, another count, dtype or communicator at the
 *   call, op MAX, NULL buffers: each a clear code, the residual and the
 *   step untouched, and the compressor still gives the exact result next.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/reduce.h"
#include "harness.h"
#include "nexar.h"

/* ---- Inputs ---- */

enum { GEN_FLOAT, GEN_DYADIC, GEN_TIES };

static uint64_t mix(uint64_t z) {
  z += UINT64_C(0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static float gen(int gen, nexar_dtype_t dt, int r, int t, size_t i) {
  uint64_t h = mix(mix(mix((uint64_t)r) ^ (uint64_t)t) ^ (uint64_t)i);
  if (gen == GEN_TIES) return (float)((int)(h % 5) - 2) * 0.5f;
  if (gen == GEN_DYADIC) {
    int m = dt == NEXAR_BFLOAT16 ? 127 : 1000;
    return (float)((int)(h % (uint64_t)(2 * m + 1)) - m) / 256.0f;
  }
  float u = (float)(h >> 40) / 16777216.0f;
  return (2.0f * u - 1.0f) * ldexpf(1.0f, (int)((h >> 8) % 8) - 4);
}

static size_t esize(nexar_dtype_t dt) {
  return dt == NEXAR_FLOAT32 ? 4 : 2;
}

static float widen(const void *b, size_t i, nexar_dtype_t dt) {
  if (dt == NEXAR_FLOAT32) return ((const float *)b)[i];
  uint16_t h = ((const uint16_t *)b)[i];
  return dt == NEXAR_FLOAT16 ? nexar__f16_to_f32(h) : nexar__bf16_to_f32(h);
}

static void narrow(void *b, size_t i, nexar_dtype_t dt, float f) {
  if (dt == NEXAR_FLOAT32)
    ((float *)b)[i] = f;
  else
    ((uint16_t *)b)[i] =
        dt == NEXAR_FLOAT16 ? nexar__f32_to_f16(f) : nexar__f32_to_bf16(f);
}

/* |f| rounded to |dt| and widened back. */
static float quant(nexar_dtype_t dt, float f) {
  if (dt == NEXAR_FLOAT32) return f;
  return dt == NEXAR_FLOAT16 ? nexar__f16_to_f32(nexar__f32_to_f16(f))
                             : nexar__bf16_to_f32(nexar__f32_to_bf16(f));
}

/* ---- The serial model ---- */

static uint32_t keyf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u & 0x7fffffffu;
}

static const float *sort_acc;
static int by_key(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  uint32_t kx = keyf(sort_acc[x]), ky = keyf(sort_acc[y]);
  if (kx != ky) return kx > ky ? -1 : 1;
  return x < y ? -1 : x > y;
}
static int by_index(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Top-k by a full sort: order, take k, sort the k by index. */
static void ref_topk(const float *acc, size_t count, size_t k, uint32_t *all,
                     uint32_t *idx) {
  for (size_t i = 0; i < count; i++) all[i] = (uint32_t)i;
  sort_acc = acc;
  qsort(all, count, sizeof(*all), by_key);
  memcpy(idx, all, k * sizeof(*idx));
  qsort(idx, k, sizeof(*idx), by_index);
}

/* Random-k as documented: selection sampling over splitmix64. */
static void ref_randk(uint64_t seed, uint64_t step, size_t count, size_t k,
                      uint32_t *idx) {
  uint64_t s = seed ^ (step * UINT64_C(0x9e3779b97f4a7c15)), n = 0;
  for (size_t i = 0; i < count && n < k; i++) {
    s += UINT64_C(0x9e3779b97f4a7c15);
    uint64_t z = s;
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    double u = (double)(z >> 11) / 9007199254740992.0;
    if (count - i <= k - n || (double)(count - i) * u < (double)(k - n))
      idx[n++] = (uint32_t)i;
  }
}

typedef struct cfg {
  nexar_compress_kind_t kind;
  nexar_dtype_t dtype;
  nexar_op_t op;
  size_t count, k;
  int gen, steps;
  const char *name;
} cfg_t;

static const cfg_t cfgs[] = {
    {NEXAR_COMPRESS_TOPK, NEXAR_FLOAT32, NEXAR_SUM, 1000, 37, GEN_FLOAT, 6,
     "topk f32 sum"},
    {NEXAR_COMPRESS_TOPK, NEXAR_FLOAT32, NEXAR_AVG, 777, 1, GEN_FLOAT, 5,
     "topk f32 avg k=1"},
    {NEXAR_COMPRESS_TOPK, NEXAR_FLOAT16, NEXAR_SUM, 1000, 50, GEN_FLOAT, 6,
     "topk f16 sum"},
    {NEXAR_COMPRESS_TOPK, NEXAR_BFLOAT16, NEXAR_AVG, 600, 30, GEN_FLOAT, 6,
     "topk bf16 avg"},
    {NEXAR_COMPRESS_TOPK, NEXAR_FLOAT32, NEXAR_SUM, 300, 41, GEN_TIES, 6,
     "topk f32 ties"},
    {NEXAR_COMPRESS_TOPK, NEXAR_FLOAT16, NEXAR_SUM, 64, 64, GEN_FLOAT, 3,
     "topk f16 k=count"},
    {NEXAR_COMPRESS_RANDK, NEXAR_FLOAT32, NEXAR_SUM, 1000, 100, GEN_DYADIC, 6,
     "randk f32 sum"},
    {NEXAR_COMPRESS_RANDK, NEXAR_FLOAT16, NEXAR_AVG, 500, 20, GEN_DYADIC, 6,
     "randk f16 avg"},
    {NEXAR_COMPRESS_RANDK, NEXAR_BFLOAT16, NEXAR_SUM, 333, 333, GEN_DYADIC, 3,
     "randk bf16 k=count"},
};
#define NCFG (sizeof(cfgs) / sizeof(cfgs[0]))
#define SEED UINT64_C(0x5eed)

/* One step of the model for every rank: res[r] (count floats each) gets
 * the inputs of step t and gives what it sends; out gets the result. */
static void model_step(const cfg_t *c, int n, int t, float *res, float *sum,
                       uint32_t *all, uint32_t *idx, float *vals, void *out) {
  size_t count = c->count, k = c->k;
  memset(sum, 0, count * sizeof(float));
  if (c->kind == NEXAR_COMPRESS_RANDK) {
    ref_randk(SEED, (uint64_t)t, count, k, idx);
    memset(vals, 0, k * sizeof(float));
  }
  for (int r = 0; r < n; r++) {
    float *a = res + (size_t)r * count;
    for (size_t i = 0; i < count; i++)
      a[i] += quant(c->dtype, gen(c->gen, c->dtype, r, t, i));
    if (c->kind == NEXAR_COMPRESS_TOPK) {
      ref_topk(a, count, k, all, idx);
      for (size_t j = 0; j < k; j++) {
        float v = quant(c->dtype, a[idx[j]]);
        a[idx[j]] -= v;
        sum[idx[j]] += v; /* rank order */
      }
    } else {
      for (size_t j = 0; j < k; j++) {
        vals[j] += a[idx[j]]; /* exact: dyadic inputs */
        a[idx[j]] = 0.0f;
      }
    }
  }
  if (c->kind == NEXAR_COMPRESS_RANDK)
    for (size_t j = 0; j < k; j++) sum[idx[j]] = vals[j];
  for (size_t i = 0; i < count; i++)
    narrow(out, i, c->dtype, c->op == NEXAR_AVG ? sum[i] / (float)n : sum[i]);
}

/* Runs one configuration; returns 0 or 1 (reported). */
static int run_cfg(nexar_comm_t *w, int me, int n, const cfg_t *c) {
  size_t count = c->count, k = c->k, es = esize(c->dtype);
  nexar_compressor_t *cp = NULL;
  NT_OKC(w, nexar_compressor_create(w, c->kind, c->dtype, count, k, 0.0, SEED,
                                    &cp));
  float *res = calloc((size_t)n * count, sizeof(float));
  float *sum = malloc(count * sizeof(float));
  float *mine = malloc(count * sizeof(float));
  uint32_t *all = malloc(count * sizeof(uint32_t));
  uint32_t *idx = malloc(count * sizeof(uint32_t));
  float *vals = malloc(count * sizeof(float));
  uint8_t *in = malloc(count * es), *out = malloc(count * es);
  uint8_t *want = malloc(count * es);
  double *in_sum = calloc(count, sizeof(double));
  double *out_sum = calloc(count, sizeof(double));
  NT_CHECK(res && sum && mine && all && idx && vals && in && out && want &&
           in_sum && out_sum);
  for (int t = 0; t < c->steps; t++) {
    for (size_t i = 0; i < count; i++) {
      narrow(in, i, c->dtype, gen(c->gen, c->dtype, me, t, i));
      for (int r = 0; r < n; r++)
        in_sum[i] += quant(c->dtype, gen(c->gen, c->dtype, r, t, i));
    }
    memset(out, 0xa5, count * es);
    bool in_place = t % 2 == 1;
    if (in_place) memcpy(out, in, count * es);
    uint64_t b0 = 0, b1 = 0;
    NT_OK(nexar_comm_bytes_sent(w, &b0));
    NT_OKC(w, nexar_allreduce_compressed(w, in_place ? NEXAR_IN_PLACE : in, out,
                                         count, c->dtype, c->op, cp));
    NT_OK(nexar_comm_bytes_sent(w, &b1));
    model_step(c, n, t, res, sum, all, idx, vals, want);
    for (size_t i = 0; i < count; i++) out_sum[i] += widen(out, i, c->dtype);
    size_t bad = count;
    for (size_t i = 0; i < count && bad == count; i++)
      if (memcmp(out + i * es, want + i * es, es)) bad = i;
    NT_CHECKF(bad == count, "%s n=%d step %d: element %zu is %a, model %a",
              c->name, n, t, bad, widen(out, bad, c->dtype),
              widen(want, bad, c->dtype));
    NT_OK(nexar_compressor_residual(cp, mine, count));
    NT_CHECKF(!memcmp(mine, res + (size_t)me * count, count * sizeof(float)),
              "%s n=%d step %d: residual differs from the model", c->name, n,
              t);
    /* Bytes: top-k exactly per rank; random-k summed over the ranks. */
    uint64_t d = b1 - b0;
    if (c->kind == NEXAR_COMPRESS_TOPK) {
      uint64_t f = (uint64_t)(n - 1) * k * (4 + es);
      NT_CHECKF(d == f, "%s n=%d: sent %llu bytes, formula %llu", c->name, n,
                (unsigned long long)d, (unsigned long long)f);
    } else {
      int64_t tot = (int64_t)d;
      NT_OKC(w, nexar_allreduce(w, NEXAR_IN_PLACE, &tot, 1, NEXAR_INT64,
                                NEXAR_SUM));
      int p = 1, lg = 0;
      while (p * 2 <= n) p *= 2, lg++;
      uint64_t f = ((uint64_t)p * (uint64_t)lg + 2u * (uint64_t)(n - p)) * 4u *
                   k; /* recursive doubling, fold in and out */
      /* The one-round allreduce (docs/configuration.md): every rank sends
       * its 4k bytes to the n - 1 others. */
      const char *tp = getenv("NEXAR_TRANSPORT");
      if (n >= 3 && n <= 16 && 4 * k <= 4096 && !(tp && !strcmp(tp, "quic")))
        f = (uint64_t)n * (uint64_t)(n - 1) * 4u * k;
      NT_CHECKF((uint64_t)tot == f, "%s n=%d: ranks sent %lld bytes, %llu",
                c->name, n, (long long)tot, (unsigned long long)f);
      if (me == 0 && t == 0)
        printf("bytes %s n=%d: %lld over all ranks (formula %llu)\n", c->name,
               n, (long long)tot, (unsigned long long)f);
    }
    if (me == 0 && t == 0 && c->kind == NEXAR_COMPRESS_TOPK)
      printf("bytes %s n=%d: %llu per rank (formula (n-1)k(4+%zu) = %llu)\n",
             c->name, n, (unsigned long long)d, es,
             (unsigned long long)((uint64_t)(n - 1) * k * (4 + es)));
  }
  uint64_t steps = 0;
  size_t kk = 0;
  NT_OK(nexar_compressor_info(cp, &kk, &steps));
  NT_CHECK(kk == k && steps == (uint64_t)c->steps);
  /* Conservation (SUM): results + residuals == inputs. */
  if (c->op == NEXAR_SUM) {
    NT_OKC(w, nexar_allreduce(w, NEXAR_IN_PLACE, mine, count, NEXAR_FLOAT32,
                              NEXAR_SUM));
    double ulp = c->dtype == NEXAR_FLOAT32   ? 0x1p-23
                 : c->dtype == NEXAR_FLOAT16 ? 0x1p-10
                                             : 0x1p-7;
    for (size_t i = 0; i < count; i++) {
      double got = out_sum[i] + mine[i];
      double tol = 4.0 * c->steps * n * ulp * (fabs(in_sum[i]) + 16.0);
      if (c->dtype == NEXAR_FLOAT32) tol = 1e-5 * (fabs(in_sum[i]) + 1.0);
      NT_CHECKF(fabs(got - in_sum[i]) <= tol,
                "%s n=%d: element %zu: results + residuals %.9g, inputs %.9g",
                c->name, n, i, got, in_sum[i]);
    }
  }
  NT_OK(nexar_compressor_free(&cp));
  NT_CHECK(cp == NULL);
  free(res), free(sum), free(mine), free(all), free(idx), free(vals);
  free(in), free(out), free(want), free(in_sum), free(out_sum);
  return 0;
}

/* Bad input: a clear code, nothing changed. */
static int bad_input(nexar_comm_t *w, int me, int n) {
  nexar_compressor_t *c = (nexar_compressor_t *)1;
  const nexar_compress_kind_t T = NEXAR_COMPRESS_TOPK;
  NT_CHECK(nexar_compressor_create(w, T, NEXAR_FLOAT32, 100, 0, 0.0, 1, &c) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(c == NULL);
  NT_CHECK(strstr(nexar_comm_last_error(w), "ratio"));
  NT_CHECK(nexar_compressor_create(w, T, NEXAR_FLOAT32, 100, 0, 1.5, 1, &c) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_compressor_create(w, T, NEXAR_FLOAT32, 100, 101, 0, 1, &c) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(strstr(nexar_comm_last_error(w), "k 101 above count 100"));
  NT_CHECK(nexar_compressor_create(w, T, NEXAR_FLOAT32, 0, 1, 0, 1, &c) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_compressor_create(w, (nexar_compress_kind_t)7, NEXAR_FLOAT32,
                                   100, 1, 0, 1, &c) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_compressor_create(w, T, NEXAR_INT32, 100, 1, 0, 1, &c) ==
           NEXAR_ERR_UNSUPPORTED);
  NT_CHECK(nexar_compressor_create(w, T, NEXAR_FLOAT64, 100, 1, 0, 1, &c) ==
           NEXAR_ERR_UNSUPPORTED);
  NT_CHECK(nexar_compressor_create(w, T, (nexar_dtype_t)99, 100, 1, 0, 1, &c) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_compressor_create(NULL, T, NEXAR_FLOAT32, 100, 1, 0, 1, &c) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_compressor_create(w, T, NEXAR_FLOAT32, 100, 1, 0, 1, NULL) ==
           NEXAR_ERR_INVALID_ARG);
  /* k from a ratio: ceil(0.01 x 1000) = 10; a tiny ratio gives 1. */
  size_t k = 0;
  NT_OKC(w, nexar_compressor_create(w, T, NEXAR_FLOAT32, 1000, 0, 0.01, 1, &c));
  NT_OK(nexar_compressor_info(c, &k, NULL));
  NT_CHECKF(k == 10, "k %zu", k);
  NT_OK(nexar_compressor_free(&c));
  NT_OKC(w, nexar_compressor_create(w, T, NEXAR_FLOAT32, 1000, 0, 1e-9, 1, &c));
  NT_OK(nexar_compressor_info(c, &k, NULL));
  NT_CHECKF(k == 1, "k %zu", k);
  NT_OK(nexar_compressor_free(&c));

  /* Misuse at the call: one step first so the residual is not zero. */
  const cfg_t *cf = &cfgs[0];
  size_t count = cf->count;
  NT_OKC(w, nexar_compressor_create(w, T, NEXAR_FLOAT32, count, cf->k, 0, SEED,
                                    &c));
  float *in = malloc(count * 4), *out = malloc(count * 4);
  float *r0 = malloc(count * 4), *r1 = malloc(count * 4);
  NT_CHECK(in && out && r0 && r1);
  for (size_t i = 0; i < count; i++)
    in[i] = gen(GEN_FLOAT, NEXAR_FLOAT32, me, 0, i);
  NT_OKC(w, nexar_allreduce_compressed(w, in, out, count, NEXAR_FLOAT32,
                                       NEXAR_SUM, c));
  NT_OK(nexar_compressor_residual(c, r0, count));
  nexar_comm_t *dup = NULL;
  NT_OKC(w, nexar_comm_dup(w, &dup));
  memset(out, 0x5a, count * 4);
  struct {
    int rc;
    nexar_comm_t *comm;
    const void *in;
    void *out;
    size_t count;
    nexar_dtype_t dt;
    nexar_op_t op;
    const char *say;
  } bad[] = {
      {NEXAR_ERR_INVALID_ARG, w, in, out, count - 1, NEXAR_FLOAT32, NEXAR_SUM,
       "count 999"},
      {NEXAR_ERR_INVALID_ARG, w, in, out, count, NEXAR_FLOAT16, NEXAR_SUM,
       "dtype 6"},
      {NEXAR_ERR_INVALID_ARG, dup, in, out, count, NEXAR_FLOAT32, NEXAR_SUM,
       "belongs to comm 0"},
      {NEXAR_ERR_UNSUPPORTED, w, in, out, count, NEXAR_FLOAT32, NEXAR_MAX,
       "sum or avg only"},
      {NEXAR_ERR_INVALID_ARG, w, NULL, out, count, NEXAR_FLOAT32, NEXAR_SUM,
       "NULL"},
      {NEXAR_ERR_INVALID_ARG, w, in, NULL, count, NEXAR_FLOAT32, NEXAR_SUM,
       "NULL"},
  };
  for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
    int rc = nexar_allreduce_compressed(bad[b].comm, bad[b].in, bad[b].out,
                                        bad[b].count, bad[b].dt, bad[b].op, c);
    const char *msg = nexar_comm_last_error(bad[b].comm);
    NT_CHECKF(rc == bad[b].rc && strstr(msg, bad[b].say) &&
                  strstr(msg, "allreduce_compressed"),
              "case %zu: %s: %s", b, nexar_err_name(rc), msg);
  }
  NT_CHECK(nexar_allreduce_compressed(w, in, out, count, NEXAR_FLOAT32,
                                      NEXAR_SUM,
                                      NULL) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_compressor_residual(c, r1, count - 1) ==
           NEXAR_ERR_INVALID_ARG);
  NT_OK(nexar_compressor_residual(c, r1, count));
  NT_CHECK(!memcmp(r0, r1, count * 4));
  for (size_t i = 0; i < count; i++)
    NT_CHECK(((uint32_t *)out)[i] == 0x5a5a5a5au);
  uint64_t steps = 0;
  NT_OK(nexar_compressor_info(c, NULL, &steps));
  NT_CHECK(steps == 1);
  /* Still exact: the second step matches the model of two steps. */
  for (size_t i = 0; i < count; i++)
    in[i] = gen(GEN_FLOAT, NEXAR_FLOAT32, me, 1, i);
  NT_OKC(w, nexar_allreduce_compressed(w, in, out, count, NEXAR_FLOAT32,
                                       NEXAR_SUM, c));
  float *res = calloc((size_t)n * count, sizeof(float));
  float *sum = malloc(count * 4), *want = malloc(count * 4);
  uint32_t *all = malloc(count * 4), *idx = malloc(count * 4);
  NT_CHECK(res && sum && want && all && idx);
  for (int t = 0; t < 2; t++)
    model_step(cf, n, t, res, sum, all, idx, NULL, want);
  NT_CHECK(!memcmp(out, want, count * 4));
  /* An infinity is sent and leaves a zero residual, not NaN. */
  nexar_compressor_t *ci = NULL;
  float x[8] = {1, 2, 3, INFINITY, 5, 6, 7, 8}, y[8], rr[8];
  NT_OKC(w, nexar_compressor_create(w, T, NEXAR_FLOAT32, 8, 1, 0, 0, &ci));
  NT_OKC(w,
         nexar_allreduce_compressed(w, x, y, 8, NEXAR_FLOAT32, NEXAR_SUM, ci));
  NT_OK(nexar_compressor_residual(ci, rr, 8));
  NT_CHECKF(isinf(y[3]) && y[3] > 0 && rr[3] == 0.0f && rr[4] == 5.0f,
            "inf: result %g, residual %g", y[3], rr[3]);
  NT_OK(nexar_compressor_free(&ci));
  NT_OKC(dup, nexar_comm_free(&dup));
  NT_OK(nexar_compressor_free(&c));
  NT_OK(nexar_compressor_free(NULL));
  free(in), free(out), free(r0), free(r1), free(res), free(sum), free(want);
  free(all), free(idx);
  return 0;
}

static int worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int me, n;
  NT_OK(nt_join_world(&ctx, &w, &me, &n));
  for (size_t i = 0; i < NCFG; i++)
    if (run_cfg(w, me, n, &cfgs[i])) return 1;
  if (bad_input(w, me, n)) return 1;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int fails = 0;
  for (int n = 1; n <= 5; n++) {
    nt_opts_t o = {.world_size = n, .timeout_ms = 60000};
    double t0 = nt_now_ms();
    int rc = nt_run(&o, worker, NULL);
    printf("%s compressed allreduce world=%d (%.1f s)\n", rc ? "FAIL" : "ok", n,
           (nt_now_ms() - t0) / 1e3);
    fails += rc != 0;
  }
  return fails ? 1 : 0;
}
