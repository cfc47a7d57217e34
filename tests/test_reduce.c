/*
 * Tests of the reduction kernels (src/coll/reduce.c and the vector families)
 * against an independent scalar reference written here: integer results
 * are computed in 64-bit unsigned arithmetic and truncated, float16 and
 * bfloat16 conversions use a generic integer rounding routine rather than
 * the library's bit tricks. Every kernel family the CPU has is forced in
 * turn, and each must match the reference bit for bit (NaN included) on
 * every (dtype, op), on many counts and on misaligned buffers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/reduce.h"
#include "coll/reduce_impl.h"

/* ---- Deterministic random numbers (splitmix64). */

static uint64_t rnd(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint64_t bits_of64(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static double double_of(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* ---- Reference conversions for a binary format with |eb| exponent bits
 * and |mb| stored mantissa bits (float16: 5, 10; bfloat16: 8, 7). */

static int top_bit(uint64_t v) {
  return 63 - __builtin_clzll(v);
}

/* Widening: value = sig * 2^e, then placed into a float32. */
static uint32_t ref_widen(uint16_t h, int eb, int mb) {
  int bias = (1 << (eb - 1)) - 1;
  uint32_t sign = (uint32_t)(h >> (eb + mb)) << 31;
  int exp = (h >> mb) & ((1 << eb) - 1);
  uint32_t man = h & ((1u << mb) - 1u);
  if (exp == (1 << eb) - 1) {
    if (man == 0) return sign | 0x7f800000u;
    /* Quiet NaN keeping the payload bits. */
    return sign | 0x7fc00000u | (man << (23 - mb));
  }
  uint32_t sig = exp != 0 ? (man | (1u << mb)) : man;
  if (sig == 0) return sign;
  int e = (exp != 0 ? exp : 1) - bias - mb;
  int p = top_bit(sig);
  int unbiased = p + e;
  if (unbiased < -126) {
    /* Only bfloat16 subnormals land here: float32 subnormal, exact. */
    return sign | (sig << (e + 149));
  }
  return sign | ((uint32_t)(unbiased + 127) << 23) |
         ((sig << (23 - p)) & 0x7fffffu);
}

/* Narrowing with round to nearest, ties to even; any NaN becomes the
 * canonical quiet NaN (sign clear, top mantissa bit set). */
static uint16_t ref_round(uint32_t u, int eb, int mb) {
  int bias = (1 << (eb - 1)) - 1;
  int emax_field = (1 << eb) - 1;
  uint16_t sign = (uint16_t)((u >> 31) << (eb + mb));
  uint16_t inf = (uint16_t)(emax_field << mb);
  uint32_t exp = (u >> 23) & 0xffu;
  uint32_t man = u & 0x7fffffu;
  if (exp == 0xff) {
    if (man != 0) return (uint16_t)(inf | (1u << (mb - 1)));
    return (uint16_t)(sign | inf);
  }
  uint64_t sig = exp != 0 ? (man | 0x800000u) : man;
  if (sig == 0) return sign;
  int e = (exp != 0 ? (int)exp : 1) - 150;
  int unbiased = top_bit(sig) + e;
  int emin = 1 - bias;
  /* Exponent of the unit in the last place of the result. */
  int q = (unbiased < emin ? emin : unbiased) - mb;
  int shift = q - e;
  uint64_t m;
  if (shift <= 0) {
    m = sig << -shift;
  } else if (shift > 40) {
    m = 0; /* far below half a unit */
  } else {
    uint64_t rem = sig & ((1ull << shift) - 1);
    uint64_t half = 1ull << (shift - 1);
    m = sig >> shift;
    if (rem > half || (rem == half && (m & 1))) m++;
  }
  /* m * 2^q is the rounded magnitude; renormalize after a carry. */
  if (m == (2ull << mb)) {
    m >>= 1;
    q++;
  }
  if (m < (1ull << mb)) return (uint16_t)(sign | m); /* subnormal or 0 */
  int field = q + mb + bias;
  if (field >= emax_field) return (uint16_t)(sign | inf);
  return (uint16_t)(sign | ((unsigned)field << mb) | (m & ((1u << mb) - 1u)));
}

static uint32_t ref_f16_to_f32(uint16_t h) {
  return ref_widen(h, 5, 10);
}
static uint16_t ref_f32_to_f16(uint32_t u) {
  return ref_round(u, 5, 10);
}
static uint32_t ref_bf16_to_f32(uint16_t h) {
  return ref_widen(h, 8, 7);
}
static uint16_t ref_f32_to_bf16(uint32_t u) {
  return ref_round(u, 8, 7);
}

static int is_nan16(uint16_t h, int eb, int mb) {
  int exp = (h >> mb) & ((1 << eb) - 1);
  return exp == (1 << eb) - 1 && (h & ((1u << mb) - 1u)) != 0;
}

/* ---- Reference element operations. */

static int is_float(nexar_dtype_t dt) {
  return dt == NEXAR_FLOAT16 || dt == NEXAR_FLOAT32 || dt == NEXAR_FLOAT64 ||
         dt == NEXAR_BFLOAT16;
}

static int is_signed(nexar_dtype_t dt) {
  return dt == NEXAR_INT8 || dt == NEXAR_INT32 || dt == NEXAR_INT64;
}

static size_t elem_size(nexar_dtype_t dt) {
  static const size_t sz[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return sz[dt];
}

static uint64_t load_u(const unsigned char *p, size_t es) {
  uint8_t v8;
  uint16_t v16;
  uint32_t v32;
  uint64_t v64;
  switch (es) {
    case 1:
      memcpy(&v8, p, 1);
      return v8;
    case 2:
      memcpy(&v16, p, 2);
      return v16;
    case 4:
      memcpy(&v32, p, 4);
      return v32;
    default:
      memcpy(&v64, p, 8);
      return v64;
  }
}

static void store_u(unsigned char *p, size_t es, uint64_t v) {
  uint8_t v8 = (uint8_t)v;
  uint16_t v16 = (uint16_t)v;
  uint32_t v32 = (uint32_t)v;
  switch (es) {
    case 1:
      memcpy(p, &v8, 1);
      break;
    case 2:
      memcpy(p, &v16, 2);
      break;
    case 4:
      memcpy(p, &v32, 4);
      break;
    default:
      memcpy(p, &v, 8);
      break;
  }
}

/* Two's complement reading of the low es*8 bits, without relying on
 * implementation-defined conversions. */
static int64_t sext(uint64_t v, size_t es) {
  if (es == 8) return v >> 63 ? -(int64_t)(~v) - 1 : (int64_t)v;
  uint64_t m = 1ull << (es * 8 - 1);
  return v & m ? (int64_t)(v & (m - 1)) - (int64_t)m : (int64_t)v;
}

static uint64_t ref_int(nexar_dtype_t dt, nexar_op_t op, uint64_t a,
                        uint64_t b) {
  size_t es = elem_size(dt);
  int less; /* b < a */
  if (is_signed(dt))
    less = sext(b, es) < sext(a, es);
  else
    less = b < a;
  switch (op) {
    case NEXAR_SUM:
    case NEXAR_AVG:
      return a + b;
    case NEXAR_PROD:
      return a * b;
    case NEXAR_MAX:
      return (!less && a != b) ? b : a;
    case NEXAR_MIN:
      return less ? b : a;
    case NEXAR_BAND:
      return a & b;
    case NEXAR_BOR:
      return a | b;
    default:
      return a ^ b;
  }
}

/* float32 semantics; returns the result bits. */
static uint32_t ref_f32(nexar_op_t op, uint32_t ua, uint32_t ub) {
  float a = float_of(ua), b = float_of(ub), r;
  if (isnan(a) || isnan(b)) return 0x7fc00000u;
  switch (op) {
    case NEXAR_MAX:
      return b > a ? ub : ua;
    case NEXAR_MIN:
      return b < a ? ub : ua;
    case NEXAR_PROD:
      r = a * b;
      break;
    default:
      r = a + b;
      break;
  }
  return isnan(r) ? 0x7fc00000u : bits_of(r);
}

static uint64_t ref_f64(nexar_op_t op, uint64_t ua, uint64_t ub) {
  double a = double_of(ua), b = double_of(ub), r;
  if (isnan(a) || isnan(b)) return 0x7ff8000000000000ull;
  switch (op) {
    case NEXAR_MAX:
      return b > a ? ub : ua;
    case NEXAR_MIN:
      return b < a ? ub : ua;
    case NEXAR_PROD:
      r = a * b;
      break;
    default:
      r = a + b;
      break;
  }
  return isnan(r) ? 0x7ff8000000000000ull : bits_of64(r);
}

static void ref_elem(nexar_dtype_t dt, nexar_op_t op, const unsigned char *x,
                     const unsigned char *y, unsigned char *r) {
  size_t es = elem_size(dt);
  uint64_t a = load_u(x, es), b = load_u(y, es);
  uint64_t v;
  switch (dt) {
    case NEXAR_FLOAT32:
      v = ref_f32(op, (uint32_t)a, (uint32_t)b);
      break;
    case NEXAR_FLOAT64:
      v = ref_f64(op, a, b);
      break;
    case NEXAR_FLOAT16:
      v = ref_f32_to_f16(ref_f32(op, ref_f16_to_f32((uint16_t)a),
                                 ref_f16_to_f32((uint16_t)b)));
      break;
    case NEXAR_BFLOAT16:
      v = ref_f32_to_bf16(ref_f32(op, ref_bf16_to_f32((uint16_t)a),
                                  ref_bf16_to_f32((uint16_t)b)));
      break;
    default:
      v = ref_int(dt, op, a, b);
      break;
  }
  store_u(r, es, v);
}

/* ---- Input generation. */

/* Exactly representable small values (k/4 .. k*16 for |k| <= 64) so that
 * sums and products are mostly exact in every float type. */
static uint64_t gen_exact(nexar_dtype_t dt, uint64_t *s) {
  uint64_t r = rnd(s);
  double v = ldexp((double)((int)(r % 129) - 64), (int)((r >> 8) % 9) - 4);
  switch (dt) {
    case NEXAR_FLOAT64:
      return bits_of64(v);
    case NEXAR_FLOAT32:
      return bits_of((float)v);
    case NEXAR_FLOAT16:
      return ref_f32_to_f16(bits_of((float)v));
    default:
      return ref_f32_to_bf16(bits_of((float)v));
  }
}

/* Bit patterns biased toward the interesting cases: zeros, infinities,
 * quiet and signalling NaNs with random payloads and signs, subnormals, the
 * extremes, values near 1 (so sums round) and fully random patterns. */
static uint64_t gen_special(nexar_dtype_t dt, uint64_t *s) {
  int eb, mb;
  switch (dt) {
    case NEXAR_FLOAT64:
      eb = 11, mb = 52;
      break;
    case NEXAR_FLOAT32:
      eb = 8, mb = 23;
      break;
    case NEXAR_FLOAT16:
      eb = 5, mb = 10;
      break;
    default:
      eb = 8, mb = 7;
      break;
  }
  uint64_t r = rnd(s);
  uint64_t sign = (r >> 63) << (eb + mb);
  uint64_t mmask = (1ull << mb) - 1;
  uint64_t emax = (1ull << eb) - 1;
  uint64_t bias = emax >> 1;
  uint64_t m = (r >> 8) & mmask;
  switch (r % 16) {
    case 0:
      return sign;
    case 1:
      return sign | (emax << mb);
    case 2:
      return sign | (emax << mb) | (1ull << (mb - 1)) | m;
    case 3:
      return sign | (emax << mb) | ((m & (mmask >> 1)) | 1);
    case 4:
      return sign | (m ? m : 1);
    case 5:
      return sign | ((emax - 1) << mb) | mmask;
    case 6:
      return sign | (1ull << mb) | (m & 3);
    case 7:
    case 8:
    case 9:
    case 10:
      return sign | ((bias + (r >> 4) % 7 - 3) << mb) | m;
    default: {
      uint64_t full = rnd(s);
      int width = 1 + eb + mb;
      return width == 64 ? full : full & ((1ull << width) - 1);
    }
  }
}

static void fill(unsigned char *p, size_t n, nexar_dtype_t dt, int mode,
                 uint64_t *s) {
  size_t es = elem_size(dt);
  for (size_t i = 0; i < n; i++) {
    uint64_t v;
    if (is_float(dt)) {
      v = mode == 0 ? gen_exact(dt, s) : gen_special(dt, s);
    } else {
      v = rnd(s);
      /* Mix in the extremes, where wrap-around and signed order matter. */
      switch (v % 8) {
        case 0:
          v = 0;
          break;
        case 1:
          v = ~0ull;
          break;
        case 2:
          v = 1ull << (es * 8 - 1);
          break;
        case 3:
          v = (1ull << (es * 8 - 1)) - 1;
          break;
        default:
          break;
      }
    }
    store_u(p + i * es, es, v);
  }
}

/* ---- Helpers around the library. */

static const size_t counts[] = {0,  1,  2,  3,  7,  15,  16,   17,
                                31, 33, 63, 64, 65, 127, 1000, 4099};
#define NCOUNTS (sizeof counts / sizeof counts[0])
#define MAXCOUNT 4099
#define PAD 16
#define GUARD 0xa5

static const nexar_dtype_t dtypes[] = {
    NEXAR_INT8,   NEXAR_UINT8,   NEXAR_INT32,   NEXAR_UINT32,  NEXAR_INT64,
    NEXAR_UINT64, NEXAR_FLOAT16, NEXAR_FLOAT32, NEXAR_FLOAT64, NEXAR_BFLOAT16};
static const nexar_op_t ops[] = {NEXAR_SUM, NEXAR_PROD, NEXAR_MAX, NEXAR_MIN,
                                 NEXAR_AVG, NEXAR_BAND, NEXAR_BOR, NEXAR_BXOR};

static const char *dt_name(nexar_dtype_t dt) {
  static const char *n[] = {"int8",    "uint8",   "int32",   "uint32",
                            "int64",   "uint64",  "float16", "float32",
                            "float64", "bfloat16"};
  return n[dt];
}

static const char *op_name(nexar_op_t op) {
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
    default:
      return "bxor";
  }
}

/* Fails with the first differing element described. */
static void expect_same(const unsigned char *got, const unsigned char *want,
                        size_t n, nexar_dtype_t dt, nexar_op_t op,
                        const char *what, const unsigned char *a,
                        const unsigned char *b) {
  size_t es = elem_size(dt);
  if (memcmp(got, want, n * es) == 0) return;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(got + i * es, want + i * es, es) != 0) {
      print_error(
          "%s %s %s [%s] n=%zu i=%zu: a=%#llx b=%#llx got=%#llx "
          "want=%#llx\n",
          nexar__reduce_isa(), dt_name(dt), op_name(op), what, n, i,
          (unsigned long long)load_u(a + i * es, es),
          (unsigned long long)load_u(b + i * es, es),
          (unsigned long long)load_u(got + i * es, es),
          (unsigned long long)load_u(want + i * es, es));
      break;
    }
  }
  fail();
}

static void expect_guard(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) assert_int_equal(p[i], GUARD);
}

/* ---- Conversion tests. */

static void test_f16_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    float f = nexar__f16_to_f32((uint16_t)h);
    assert_int_equal(bits_of(f), ref_f16_to_f32((uint16_t)h));
    uint16_t back = nexar__f32_to_f16(f);
    if (is_nan16((uint16_t)h, 5, 10)) {
      assert_true(isnan(f));
      assert_int_equal(back, 0x7e00);
    } else {
      assert_int_equal(back, h);
    }
  }
}

static void test_bf16_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000u; h++) {
    float f = nexar__bf16_to_f32((uint16_t)h);
    assert_int_equal(bits_of(f), ref_bf16_to_f32((uint16_t)h));
    uint16_t back = nexar__f32_to_bf16(f);
    if (is_nan16((uint16_t)h, 8, 7)) {
      assert_true(isnan(f));
      assert_int_equal(back, 0x7fc0);
    } else {
      assert_int_equal(back, h);
    }
  }
}

/* Exactly halfway between two neighbouring float16 values the even one
 * wins; one float32 step either side picks the nearer one. */
static void test_f16_ties(void **state) {
  (void)state;
  for (uint32_t sign = 0; sign <= 0x8000u; sign += 0x8000u) {
    for (uint32_t h = 0; h < 0x7bffu; h++) {
      double lo = (double)float_of(ref_f16_to_f32((uint16_t)(h | sign)));
      double hi = (double)float_of(ref_f16_to_f32((uint16_t)((h + 1) | sign)));
      float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
      uint16_t even = (uint16_t)(((h & 1) ? h + 1 : h) | sign);
      assert_int_equal(nexar__f32_to_f16(mid), even);
      float toward0 = nextafterf(mid, 0.0f);
      float away = nextafterf(mid, sign ? -INFINITY : INFINITY);
      assert_int_equal(nexar__f32_to_f16(toward0), h | sign);
      assert_int_equal(nexar__f32_to_f16(away), (h + 1) | sign);
    }
  }
  /* Overflow: 65520 is the tie between 65504 and 2^16, the even side being
   * infinity. */
  assert_int_equal(nexar__f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(nexar__f32_to_f16(nextafterf(65520.0f, 0.0f)), 0x7bff);
  assert_int_equal(nexar__f32_to_f16(65520.0f), 0x7c00);
  assert_int_equal(nexar__f32_to_f16(-65520.0f), 0xfc00);
  assert_int_equal(nexar__f32_to_f16(1e10f), 0x7c00);
  assert_int_equal(nexar__f32_to_f16(3.4028235e38f), 0x7c00);
  assert_int_equal(nexar__f32_to_f16(INFINITY), 0x7c00);
  assert_int_equal(nexar__f32_to_f16(-INFINITY), 0xfc00);
  /* Underflow: 2^-25 ties to zero, just above it to the smallest
   * subnormal; subnormal float32 inputs become signed zeros. */
  assert_int_equal(nexar__f32_to_f16(ldexpf(1.0f, -25)), 0x0000);
  assert_int_equal(nexar__f32_to_f16(nextafterf(ldexpf(1.0f, -25), 1.0f)),
                   0x0001);
  assert_int_equal(nexar__f32_to_f16(-ldexpf(1.0f, -25)), 0x8000);
  assert_int_equal(nexar__f32_to_f16(ldexpf(3.0f, -25)), 0x0002);
  assert_int_equal(nexar__f32_to_f16(float_of(0x00000001u)), 0x0000);
  assert_int_equal(nexar__f32_to_f16(float_of(0x80000001u)), 0x8000);
  assert_int_equal(nexar__f32_to_f16(nextafterf(ldexpf(1.0f, -14), 0.0f)),
                   0x0400);
  /* NaNs of any sign and payload become the canonical quiet NaN. */
  assert_int_equal(nexar__f32_to_f16(float_of(0xffc00001u)), 0x7e00);
  assert_int_equal(nexar__f32_to_f16(float_of(0x7f800001u)), 0x7e00);
}

static void test_bf16_ties(void **state) {
  (void)state;
  for (uint32_t sign = 0; sign <= 0x8000u; sign += 0x8000u) {
    /* Up to 0x7f7f, whose upper neighbour is infinity. */
    for (uint32_t h = 0; h <= 0x7f7fu; h++) {
      uint32_t mid = ((h | sign) << 16) | 0x8000u;
      uint32_t even = ((h & 1) ? h + 1 : h) | sign;
      assert_int_equal(nexar__f32_to_bf16(float_of(mid)), even);
      assert_int_equal(nexar__f32_to_bf16(float_of(mid - 1)), h | sign);
      assert_int_equal(nexar__f32_to_bf16(float_of(mid + 1)), (h + 1) | sign);
    }
  }
  assert_int_equal(nexar__f32_to_bf16(3.4028235e38f), 0x7f80);
  assert_int_equal(nexar__f32_to_bf16(-INFINITY), 0xff80);
  assert_int_equal(nexar__f32_to_bf16(float_of(0x7f800001u)), 0x7fc0);
  assert_int_equal(nexar__f32_to_bf16(float_of(0xffffffffu)), 0x7fc0);
}

/* Ten million float32 patterns from a fixed seed plus edge cases, through
 * both narrowing conversions, against the reference rounding. */
static void test_narrow_sampled(void **state) {
  (void)state;
  static const uint32_t edges[] = {
      0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x00800000u,
      0x33000000u, 0x33000001u, 0x337fffffu, 0x38800000u, 0x387fffffu,
      0x3f800000u, 0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477fffffu,
      0x47800000u, 0x7f7fffffu, 0x7f7f7fffu, 0x7f7f8000u, 0x7f800000u,
      0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0xffc00000u, 0xff800000u,
      0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    for (uint32_t sign = 0; sign <= 1; sign++) {
      uint32_t u = edges[i] ^ (sign << 31);
      assert_int_equal(nexar__f32_to_f16(float_of(u)), ref_f32_to_f16(u));
      assert_int_equal(nexar__f32_to_bf16(float_of(u)), ref_f32_to_bf16(u));
    }
  }
  uint64_t s = 0x6e65786172ull;
  for (uint32_t i = 0; i < 10000000u; i++) {
    uint64_t r = rnd(&s);
    uint32_t u = (uint32_t)r;
    /* Every other pattern gets an exponent near the float16 range, where
     * the float16 rounding actually does something. */
    if (i & 1) u = (u & 0x807fffffu) | ((uint32_t)(100 + (r >> 32) % 46) << 23);
    uint16_t h = nexar__f32_to_f16(float_of(u));
    uint16_t b = nexar__f32_to_bf16(float_of(u));
    if (h != ref_f32_to_f16(u) || b != ref_f32_to_bf16(u)) {
      print_error("pattern %#x: f16 %#x (want %#x), bf16 %#x (want %#x)\n", u,
                  h, ref_f32_to_f16(u), b, ref_f32_to_bf16(u));
      fail();
    }
  }
}

/* ---- Check and size. */

static void test_check(void **state) {
  (void)state;
  for (int dt = -2; dt < NEXAR_NUM_DTYPES + 2; dt++) {
    for (int op = -2; op < NEXAR_NUM_OPS + 2; op++) {
      int want;
      if (dt < 0 || dt >= NEXAR_NUM_DTYPES || op < 0 || op >= NEXAR_NUM_OPS ||
          (op > NEXAR_AVG && op < NEXAR_BAND))
        want = NEXAR_ERR_INVALID_ARG;
      else if (dt == NEXAR_FLOAT8_E4M3 || dt == NEXAR_FLOAT8_E5M2)
        want = NEXAR_ERR_UNSUPPORTED;
      else if (is_float((nexar_dtype_t)dt) && op >= NEXAR_BAND)
        want = NEXAR_ERR_UNSUPPORTED;
      else
        want = NEXAR_OK;
      int got = nexar__reduce_check((nexar_dtype_t)dt, (nexar_op_t)op);
      if (got != want) {
        print_error("dtype %d op %d: got %d want %d\n", dt, op, got, want);
        fail();
      }
    }
  }
}

static void test_dtype_size(void **state) {
  (void)state;
  for (int dt = 0; dt < 10; dt++)
    assert_int_equal(nexar_dtype_size((nexar_dtype_t)dt),
                     elem_size((nexar_dtype_t)dt));
  assert_int_equal(nexar_dtype_size(NEXAR_FLOAT8_E4M3), 0);
  assert_int_equal(nexar_dtype_size(NEXAR_FLOAT8_E5M2), 0);
  assert_int_equal(nexar_dtype_size(NEXAR_NUM_DTYPES), 0);
  assert_int_equal(nexar_dtype_size((nexar_dtype_t)-1), 0);
  assert_int_equal(nexar_dtype_size(NEXAR_BYTE), 1);
}

/* ---- Kernel tests, one per family. */

struct bufs {
  unsigned char *a, *b, *out, *want, *work;
};

/* One (dtype, op, count, alignment, data) case through the three call
 * forms: separate output, in place on the left (out == a) and in place on
 * the right (out == b). */
static void run_case(struct bufs *B, nexar_dtype_t dt, nexar_op_t op, size_t n,
                     unsigned off, int mode, uint64_t *s) {
  size_t es = elem_size(dt), bytes = n * es;
  unsigned oa = off, ob = (off * 3 + 5) % 8, oo = (off + 3) % 8;
  unsigned char *a = B->a + oa, *b = B->b + ob;
  fill(a, n, dt, mode, s);
  fill(b, n, dt, mode, s);
  for (size_t i = 0; i < n; i++)
    ref_elem(dt, op, a + i * es, b + i * es, B->want + i * es);

  /* out separate; a and b stay untouched; nothing written outside. */
  memset(B->out, GUARD, bytes + PAD);
  unsigned char *out = B->out + oo;
  memcpy(B->work, a, bytes);
  memcpy(B->work + bytes, b, bytes);
  nexar__reduce3(out, a, b, n, dt, op);
  expect_same(out, B->want, n, dt, op, "reduce3", a, b);
  expect_guard(B->out, oo);
  expect_guard(out + bytes, PAD - oo);
  assert_true(memcmp(B->work, a, bytes) == 0);
  assert_true(memcmp(B->work + bytes, b, bytes) == 0);

  /* inout == a, through both entry points. */
  memset(B->out, GUARD, bytes + PAD);
  memcpy(out, a, bytes);
  nexar__reduce(out, b, n, dt, op);
  expect_same(out, B->want, n, dt, op, "reduce", a, b);
  expect_guard(out + bytes, PAD - oo);
  memcpy(out, a, bytes);
  nexar__reduce3(out, out, b, n, dt, op);
  expect_same(out, B->want, n, dt, op, "reduce3 out==a", a, b);

  /* out == b. */
  memcpy(out, b, bytes);
  nexar__reduce3(out, a, out, n, dt, op);
  expect_same(out, B->want, n, dt, op, "reduce3 out==b", a, b);
  expect_guard(B->out, oo);
  expect_guard(out + bytes, PAD - oo);
}

static void kernels_for(const char *isa) {
  const char *got = nexar__reduce_force_isa(isa);
  if (strcmp(got, isa) != 0) {
    nexar__reduce_force_isa(NULL);
    print_message("[  SKIP    ] %s kernels not available on this CPU\n", isa);
    skip();
  }
  struct bufs B;
  size_t cap = 2 * MAXCOUNT * 8 + PAD;
  B.a = malloc(cap);
  B.b = malloc(cap);
  B.out = malloc(cap);
  B.want = malloc(cap);
  B.work = malloc(cap);
  assert_true(B.a && B.b && B.out && B.want && B.work);
  uint64_t s = 42;
  size_t cases = 0;
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      nexar_dtype_t dt = dtypes[d];
      nexar_op_t op = ops[o];
      if (nexar__reduce_check(dt, op) != NEXAR_OK) continue;
      int modes = is_float(dt) ? 2 : 1;
      for (size_t c = 0; c < NCOUNTS; c++)
        for (unsigned off = 0; off < 8; off++)
          for (int mode = 0; mode < modes; mode++) {
            run_case(&B, dt, op, counts[c], off, mode, &s);
            cases++;
          }
    }
  }
  print_message("[          ] %s: %zu cases\n", isa, cases);
  /* Count 0 must not touch the pointers at all. */
  nexar__reduce(NULL, NULL, 0, NEXAR_FLOAT32, NEXAR_SUM);
  nexar__reduce3(NULL, NULL, NULL, 0, NEXAR_INT8, NEXAR_MAX);
  free(B.a);
  free(B.b);
  free(B.out);
  free(B.want);
  free(B.work);
  assert_string_equal(nexar__reduce_isa(), isa);
  nexar__reduce_force_isa(NULL);
}

static void test_kernels_portable(void **state) {
  (void)state;
  kernels_for("portable");
}

static void test_kernels_avx2(void **state) {
  (void)state;
  kernels_for("avx2");
}

static void test_kernels_avx512(void **state) {
  (void)state;
  kernels_for("avx512");
}

/* Every family must also agree on one long buffer of hostile float bits,
 * compared directly with each other rather than through the reference. */
static void test_families_agree(void **state) {
  (void)state;
  static const char *isas[] = {"portable", "avx2", "avx512"};
  size_t n = 100003;
  unsigned char *a = malloc(n * 8 + 8), *b = malloc(n * 8 + 8);
  unsigned char *first = malloc(n * 8), *out = malloc(n * 8 + 8);
  assert_true(a && b && first && out);
  uint64_t s = 7;
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
    nexar_dtype_t dt = dtypes[d];
    size_t es = elem_size(dt);
    fill(a + 1, n, dt, 1, &s);
    fill(b + 3, n, dt, 1, &s);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      nexar_op_t op = ops[o];
      if (nexar__reduce_check(dt, op) != NEXAR_OK) continue;
      for (size_t k = 0; k < 3; k++) {
        if (strcmp(nexar__reduce_force_isa(isas[k]), isas[k]) != 0) continue;
        nexar__reduce3(out + 5, a + 1, b + 3, n, dt, op);
        if (k == 0)
          memcpy(first, out + 5, n * es);
        else
          expect_same(out + 5, first, n, dt, op, "vs portable", a + 1, b + 3);
      }
    }
  }
  nexar__reduce_force_isa(NULL);
  free(a);
  free(b);
  free(first);
  free(out);
}

/* ---- Dispatch. */

static void test_isa_choice(void **state) {
  (void)state;
  const char *def = nexar__reduce_isa();
  assert_true(strcmp(def, "portable") == 0 || strcmp(def, "avx2") == 0 ||
              strcmp(def, "avx512") == 0);
  assert_string_equal(nexar__reduce_force_isa("portable"), "portable");
  assert_string_equal(nexar__reduce_isa(), "portable");
  /* Asking for more than the CPU has falls back, never up. */
  const char *best = nexar__reduce_force_isa("avx512");
  const char *avx2 = nexar__reduce_force_isa("avx2");
  assert_true(strcmp(avx2, "avx2") == 0 || strcmp(avx2, "portable") == 0);
  if (strcmp(avx2, "portable") == 0) assert_string_equal(best, "portable");
  assert_string_equal(nexar__reduce_force_isa("no-such-isa"), best);
  /* NULL restores the default, which is the environment's choice. */
  assert_string_equal(nexar__reduce_force_isa(NULL), def);
}

/* ---- AVG finalize. */

static void test_finalize_int(void **state) {
  (void)state;
  /* Fixed cases: truncation toward zero for negative sums. */
  int8_t i8[] = {-7, 7, -128, 127, -1, 0, -3};
  nexar__reduce_finalize(i8, 7, NEXAR_INT8, NEXAR_AVG, 2);
  int8_t i8w[] = {-3, 3, -64, 63, 0, 0, -1};
  assert_memory_equal(i8, i8w, sizeof i8);
  int32_t i32[] = {-7, INT32_MIN, INT32_MAX, -2};
  nexar__reduce_finalize(i32, 4, NEXAR_INT32, NEXAR_AVG, 3);
  int32_t i32w[] = {-2, -715827882, 715827882, 0};
  assert_memory_equal(i32, i32w, sizeof i32);
  int64_t i64[] = {INT64_MIN, -5, 5};
  nexar__reduce_finalize(i64, 3, NEXAR_INT64, NEXAR_AVG, 4);
  int64_t i64w[] = {INT64_MIN / 4, -1, 1};
  assert_memory_equal(i64, i64w, sizeof i64);
  uint8_t u8[] = {255, 200, 1};
  nexar__reduce_finalize(u8, 3, NEXAR_UINT8, NEXAR_AVG, 3);
  uint8_t u8w[] = {85, 66, 0};
  assert_memory_equal(u8, u8w, sizeof u8);
  uint64_t u64[] = {UINT64_MAX, 10};
  nexar__reduce_finalize(u64, 2, NEXAR_UINT64, NEXAR_AVG, 3);
  uint64_t u64w[] = {UINT64_MAX / 3, 3};
  assert_memory_equal(u64, u64w, sizeof u64);

  /* Random values, misaligned, against a sign-magnitude reference. */
  uint64_t s = 99;
  unsigned char buf[8 * 257 + 8], want[8 * 257];
  for (size_t d = 0; d < 6; d++) {
    nexar_dtype_t dt = dtypes[d];
    size_t es = elem_size(dt);
    for (int n = 1; n <= 9; n++) {
      unsigned char *p = buf + n % 8;
      fill(p, 257, dt, 0, &s);
      for (size_t i = 0; i < 257; i++) {
        uint64_t v = load_u(p + i * es, es), q;
        if (is_signed(dt)) {
          int64_t x = sext(v, es);
          uint64_t mag = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
          q = mag / (uint64_t)n;
          if (x < 0) q = 0 - q;
        } else {
          q = v / (uint64_t)n;
        }
        store_u(want + i * es, es, q);
      }
      nexar__reduce_finalize(p, 257, dt, NEXAR_AVG, n);
      if (memcmp(p, want, 257 * es) != 0) {
        print_error("%s avg n=%d differs\n", dt_name(dt), n);
        fail();
      }
    }
  }
}

static void test_finalize_float(void **state) {
  (void)state;
  float f[] = {1.0f, -3.0f, 0.0f, -0.0f, INFINITY, float_of(0xffc00123u)};
  nexar__reduce_finalize(f, 6, NEXAR_FLOAT32, NEXAR_AVG, 3);
  assert_int_equal(bits_of(f[0]), 0x3eaaaaabu);
  assert_int_equal(bits_of(f[1]), 0xbf800000u);
  assert_int_equal(bits_of(f[2]), 0x00000000u);
  assert_int_equal(bits_of(f[3]), 0x80000000u);
  assert_int_equal(bits_of(f[4]), 0x7f800000u);
  assert_int_equal(bits_of(f[5]), 0x7fc00000u);
  double d[] = {1.0, -7.0};
  nexar__reduce_finalize(d, 2, NEXAR_FLOAT64, NEXAR_AVG, 3);
  assert_true(bits_of64(d[0]) == 0x3fd5555555555555ull);
  assert_true(d[1] == -7.0 / 3.0);
  /* float16 1/3: 0.33333334f rounds to 0x3555; bfloat16 to 0x3eab. */
  uint16_t h[] = {0x3c00, 0xfc00, 0x7d00, 0x0001};
  nexar__reduce_finalize(h, 4, NEXAR_FLOAT16, NEXAR_AVG, 3);
  assert_int_equal(h[0], 0x3555);
  assert_int_equal(h[1], 0xfc00);
  assert_int_equal(h[2], 0x7e00);
  assert_int_equal(h[3], 0x0000); /* 2^-24 / 3 rounds to zero */
  uint16_t bh[] = {0x3f80, 0x4040};
  nexar__reduce_finalize(bh, 2, NEXAR_BFLOAT16, NEXAR_AVG, 3);
  assert_int_equal(bh[0], 0x3eab);
  assert_int_equal(bh[1], 0x3f80);

  /* Random values, misaligned, against x / (float)n through the reference
   * conversions. */
  uint64_t s = 5;
  unsigned char buf[8 * 101 + 8], want[8 * 101];
  for (size_t d2 = 6; d2 < 10; d2++) {
    nexar_dtype_t dt = dtypes[d2];
    size_t es = elem_size(dt);
    for (int n = 1; n <= 8; n++) {
      unsigned char *p = buf + (n * 3) % 8;
      fill(p, 101, dt, 1, &s);
      for (size_t i = 0; i < 101; i++) {
        uint64_t v = load_u(p + i * es, es), q;
        float x;
        switch (dt) {
          case NEXAR_FLOAT64: {
            double y = double_of(v) / (double)n;
            q = isnan(y) ? 0x7ff8000000000000ull : bits_of64(y);
            break;
          }
          case NEXAR_FLOAT32:
            x = float_of((uint32_t)v) / (float)n;
            q = isnan(x) ? 0x7fc00000u : bits_of(x);
            break;
          case NEXAR_FLOAT16:
            x = float_of(ref_f16_to_f32((uint16_t)v)) / (float)n;
            q = ref_f32_to_f16(bits_of(x));
            break;
          default:
            x = float_of(ref_bf16_to_f32((uint16_t)v)) / (float)n;
            q = ref_f32_to_bf16(bits_of(x));
            break;
        }
        store_u(want + i * es, es, q);
      }
      nexar__reduce_finalize(p, 101, dt, NEXAR_AVG, n);
      if (memcmp(p, want, 101 * es) != 0) {
        print_error("%s avg n=%d differs\n", dt_name(dt), n);
        fail();
      }
    }
  }
}

/* Finalize only acts on AVG, and leaves data alone for a bad n. */
static void test_finalize_noop(void **state) {
  (void)state;
  int32_t v[] = {-7, 9};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    if (ops[o] == NEXAR_AVG) continue;
    nexar__reduce_finalize(v, 2, NEXAR_INT32, ops[o], 3);
  }
  nexar__reduce_finalize(v, 2, NEXAR_INT32, NEXAR_AVG, 0);
  nexar__reduce_finalize(v, 2, NEXAR_INT32, NEXAR_AVG, -2);
  assert_int_equal(v[0], -7);
  assert_int_equal(v[1], 9);
  nexar__reduce_finalize(v, 2, NEXAR_INT32, NEXAR_AVG, 1);
  assert_int_equal(v[0], -7);
  nexar__reduce_finalize(NULL, 0, NEXAR_FLOAT32, NEXAR_AVG, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_check),
      cmocka_unit_test(test_dtype_size),
      cmocka_unit_test(test_f16_all),
      cmocka_unit_test(test_bf16_all),
      cmocka_unit_test(test_f16_ties),
      cmocka_unit_test(test_bf16_ties),
      cmocka_unit_test(test_narrow_sampled),
      cmocka_unit_test(test_isa_choice),
      cmocka_unit_test(test_kernels_portable),
      cmocka_unit_test(test_kernels_avx2),
      cmocka_unit_test(test_kernels_avx512),
      cmocka_unit_test(test_families_agree),
      cmocka_unit_test(test_finalize_int),
      cmocka_unit_test(test_finalize_float),
      cmocka_unit_test(test_finalize_noop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
