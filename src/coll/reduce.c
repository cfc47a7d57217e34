/*
 * Reduction kernels: the portable element-wise code, the float16/bfloat16
 * conversions, and the run-time choice of a vectorized kernel family.
 *
 * The portable kernels define the results: the vector families in
 * reduce_avx2.c and reduce_avx512.c must match them bit for bit, and they
 * finish every range the vector code leaves over. Elements are moved with
 * memcpy because the buffers come straight from the network and user code
 * and may have any alignment; compilers turn these copies into plain loads.
 *
 * Float results that are NaN are always replaced by the canonical quiet NaN
 * of the type, for SUM and PROD as well as MIN and MAX. IEEE 754 leaves the
 * payload and sign of a NaN produced by arithmetic unspecified, and x86
 * picks it from whichever operand the compiler happened to place first (or
 * returns a negative "default NaN" for inf - inf), so without this step two
 * code paths, or two ranks, could disagree on the bits of a NaN.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "coll/reduce.h"
#include "coll/reduce_impl.h"

#if NEXAR__REDUCE_X86 && defined(__clang__)
#include <cpuid.h>
#endif

/* ---- Bit casts. */

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline double f64_from_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* ---- float16 and bfloat16 conversions. These use integer arithmetic only,
 * so they give the same answer whatever the floating-point environment
 * (flush-to-zero, rounding mode) of the calling thread is. */

float nexar__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;

  if (exp == 0x1fu) {
    /* Infinity, or NaN made quiet with its payload kept (as F16C does). */
    u = sign | 0x7f800000u | (man << 13);
    if (man != 0) u |= 0x00400000u;
  } else if (exp != 0) {
    /* Normal: rebias the exponent from 15 to 127. */
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {
    /* Subnormal (man * 2^-24): every one is a normal float32. Shift the
     * leading one up to the implicit-bit position, lowering the exponent
     * from that of 2^-14 by one for each step. */
    uint32_t e = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      e--;
    }
    u = sign | (e << 23) | ((man & 0x3ffu) << 13);
  }
  return f32_from_bits(u);
}

uint16_t nexar__f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t mag = u & 0x7fffffffu;

  if (mag > 0x7f800000u) return NEXAR__QNAN_F16;
  /* 65520 and above (infinity included) round to infinity. */
  if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (mag >= 0x38800000u) {
    /* Normal result: rebias the exponent by 127 - 15 = 112, then round the
     * 13 dropped mantissa bits to nearest even. A carry out of the mantissa
     * correctly bumps the exponent. */
    uint32_t r = mag - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
  }
  /* Below 2^-14 the result is subnormal or zero; at most 2^-25 (half the
   * smallest subnormal, a tie) it rounds to zero. */
  if (mag <= 0x33000000u) return sign;
  {
    uint32_t e = mag >> 23;
    uint32_t man = (mag & 0x7fffffu) | 0x800000u;
    /* The value is man * 2^(e - 150) and the result unit is 2^-24, so the
     * result is man >> (126 - e), rounded; the shift is 14..24. */
    uint32_t shift = 126u - e;
    uint32_t q = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    /* q may reach 0x400, which is exactly the smallest normal. */
    return (uint16_t)(sign | q);
  }
}

float nexar__bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  /* Make a signalling NaN quiet, keeping its payload. */
  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
  return f32_from_bits(u);
}

uint16_t nexar__f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return NEXAR__QNAN_BF16;
  /* Round the low 16 bits to nearest even; a carry propagates into the
   * exponent and the largest values correctly become infinity. */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* ---- Element operations. */

static inline float canon_f32(float r) {
  return isnan(r) ? f32_from_bits(NEXAR__QNAN_F32) : r;
}

static inline double canon_f64(double r) {
  return isnan(r) ? f64_from_bits(NEXAR__QNAN_F64) : r;
}

/* Integers: SUM and PROD run in the unsigned type, where wrap-around is
 * defined; the bits are the two's complement result for signed types too.
 * The "1u *" promotes narrow types to unsigned int rather than int, so no
 * intermediate product can overflow a signed type. */
#define INT_ELEM_OPS(S, U, T)           \
  static inline U sum_u##S(U x, U y) {  \
    return (U)(1u * x + y);             \
  }                                     \
  static inline U prod_u##S(U x, U y) { \
    return (U)(1u * x * y);             \
  }                                     \
  static inline U band_u##S(U x, U y) { \
    return (U)(x & y);                  \
  }                                     \
  static inline U bor_u##S(U x, U y) {  \
    return (U)(x | y);                  \
  }                                     \
  static inline U bxor_u##S(U x, U y) { \
    return (U)(x ^ y);                  \
  }                                     \
  static inline U min_u##S(U x, U y) {  \
    return y < x ? y : x;               \
  }                                     \
  static inline U max_u##S(U x, U y) {  \
    return y > x ? y : x;               \
  }                                     \
  static inline T min_i##S(T x, T y) {  \
    return y < x ? y : x;               \
  }                                     \
  static inline T max_i##S(T x, T y) {  \
    return y > x ? y : x;               \
  }

INT_ELEM_OPS(8, uint8_t, int8_t)
INT_ELEM_OPS(32, uint32_t, int32_t)
INT_ELEM_OPS(64, uint64_t, int64_t)

/* Floats: MIN and MAX give NaN when either side is NaN, and the left
 * operand when the two compare equal (so -0.0 vs +0.0 keeps the left). */
static inline float sum_f32(float x, float y) {
  return canon_f32(x + y);
}
static inline float prod_f32(float x, float y) {
  return canon_f32(x * y);
}
static inline float max_f32(float x, float y) {
  if (isnan(x) || isnan(y)) return f32_from_bits(NEXAR__QNAN_F32);
  return y > x ? y : x;
}
static inline float min_f32(float x, float y) {
  if (isnan(x) || isnan(y)) return f32_from_bits(NEXAR__QNAN_F32);
  return y < x ? y : x;
}

static inline double sum_f64(double x, double y) {
  return canon_f64(x + y);
}
static inline double prod_f64(double x, double y) {
  return canon_f64(x * y);
}
static inline double max_f64(double x, double y) {
  if (isnan(x) || isnan(y)) return f64_from_bits(NEXAR__QNAN_F64);
  return y > x ? y : x;
}
static inline double min_f64(double x, double y) {
  if (isnan(x) || isnan(y)) return f64_from_bits(NEXAR__QNAN_F64);
  return y < x ? y : x;
}

/* float16 and bfloat16: widen, combine in float32, round back. MIN and MAX
 * return an operand's own bits, which is what rounding the exactly widened
 * value back would give anyway. */
#define HALF_ELEM_OPS(H, TO32, FROM32, QNAN)                \
  static inline uint16_t sum_##H(uint16_t x, uint16_t y) {  \
    return FROM32(TO32(x) + TO32(y));                       \
  }                                                         \
  static inline uint16_t prod_##H(uint16_t x, uint16_t y) { \
    return FROM32(TO32(x) * TO32(y));                       \
  }                                                         \
  static inline uint16_t max_##H(uint16_t x, uint16_t y) {  \
    float fx = TO32(x), fy = TO32(y);                       \
    if (isnan(fx) || isnan(fy)) return QNAN;                \
    return fy > fx ? y : x;                                 \
  }                                                         \
  static inline uint16_t min_##H(uint16_t x, uint16_t y) {  \
    float fx = TO32(x), fy = TO32(y);                       \
    if (isnan(fx) || isnan(fy)) return QNAN;                \
    return fy < fx ? y : x;                                 \
  }

HALF_ELEM_OPS(f16, nexar__f16_to_f32, nexar__f32_to_f16, NEXAR__QNAN_F16)
HALF_ELEM_OPS(bf16, nexar__bf16_to_f32, nexar__f32_to_bf16, NEXAR__QNAN_BF16)

/* ---- Portable kernels: one per (element type, op). Each element is read
 * from both inputs before the result is stored, so out may equal a or b.
 * The bulk goes through small local blocks: the compiler cannot know that
 * out is either equal to or disjoint from the inputs, and without the
 * copies it keeps the loop scalar, whereas the block loop on private arrays
 * vectorizes (on any target with vectors) without changing a single
 * result. */

typedef void (*kernel_fn)(void *out, const void *a, const void *b, size_t n);

#define BLOCK 64

#define KERNEL(NAME, T, OP)                                                 \
  static void k_##NAME(void *out, const void *a, const void *b, size_t n) { \
    unsigned char *po = out;                                                \
    const unsigned char *pa = a, *pb = b;                                   \
    size_t i = 0;                                                           \
    for (; i + BLOCK <= n; i += BLOCK) {                                    \
      T x[BLOCK], y[BLOCK], r[BLOCK];                                       \
      memcpy(x, pa + i * sizeof(T), sizeof x);                              \
      memcpy(y, pb + i * sizeof(T), sizeof y);                              \
      for (size_t j = 0; j < BLOCK; j++) r[j] = OP(x[j], y[j]);             \
      memcpy(po + i * sizeof(T), r, sizeof r);                              \
    }                                                                       \
    for (; i < n; i++) {                                                    \
      T x, y, r;                                                            \
      memcpy(&x, pa + i * sizeof(T), sizeof(T));                            \
      memcpy(&y, pb + i * sizeof(T), sizeof(T));                            \
      r = OP(x, y);                                                         \
      memcpy(po + i * sizeof(T), &r, sizeof(T));                            \
    }                                                                       \
  }

#define INT_KERNELS(S, U, T)      \
  KERNEL(sum_u##S, U, sum_u##S)   \
  KERNEL(prod_u##S, U, prod_u##S) \
  KERNEL(band_u##S, U, band_u##S) \
  KERNEL(bor_u##S, U, bor_u##S)   \
  KERNEL(bxor_u##S, U, bxor_u##S) \
  KERNEL(min_u##S, U, min_u##S)   \
  KERNEL(max_u##S, U, max_u##S)   \
  KERNEL(min_i##S, T, min_i##S)   \
  KERNEL(max_i##S, T, max_i##S)

INT_KERNELS(8, uint8_t, int8_t)
INT_KERNELS(32, uint32_t, int32_t)
INT_KERNELS(64, uint64_t, int64_t)

#define FLOAT_KERNELS(S, T)     \
  KERNEL(sum_##S, T, sum_##S)   \
  KERNEL(prod_##S, T, prod_##S) \
  KERNEL(min_##S, T, min_##S)   \
  KERNEL(max_##S, T, max_##S)

FLOAT_KERNELS(f32, float)
FLOAT_KERNELS(f64, double)
FLOAT_KERNELS(f16, uint16_t)
FLOAT_KERNELS(bf16, uint16_t)

/* Signed and unsigned integers share every kernel but MIN and MAX; AVG
 * reduces as SUM. */
#define INT_ROW(S, SIGN)                                          \
  {                                                               \
    [NEXAR_SUM] = k_sum_u##S, [NEXAR_PROD] = k_prod_u##S,         \
    [NEXAR_MAX] = k_max_##SIGN##S, [NEXAR_MIN] = k_min_##SIGN##S, \
    [NEXAR_AVG] = k_sum_u##S, [NEXAR_BAND] = k_band_u##S,         \
    [NEXAR_BOR] = k_bor_u##S, [NEXAR_BXOR] = k_bxor_u##S,         \
  }

#define FLOAT_ROW(S)                                                           \
  {                                                                            \
    [NEXAR_SUM] = k_sum_##S, [NEXAR_PROD] = k_prod_##S,                        \
    [NEXAR_MAX] = k_max_##S, [NEXAR_MIN] = k_min_##S, [NEXAR_AVG] = k_sum_##S, \
  }

/* NULL marks a rejected (dtype, op) pair. */
static const kernel_fn portable[NEXAR_NUM_DTYPES][NEXAR_NUM_OPS] = {
    [NEXAR_INT8] = INT_ROW(8, i),     [NEXAR_UINT8] = INT_ROW(8, u),
    [NEXAR_INT32] = INT_ROW(32, i),   [NEXAR_UINT32] = INT_ROW(32, u),
    [NEXAR_INT64] = INT_ROW(64, i),   [NEXAR_UINT64] = INT_ROW(64, u),
    [NEXAR_FLOAT16] = FLOAT_ROW(f16), [NEXAR_FLOAT32] = FLOAT_ROW(f32),
    [NEXAR_FLOAT64] = FLOAT_ROW(f64), [NEXAR_BFLOAT16] = FLOAT_ROW(bf16),
};

/* ---- Public helpers and checks. */

NEXAR_EXTERN size_t nexar_dtype_size(nexar_dtype_t dtype) {
  switch (dtype) {
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
    case NEXAR_INT64:
    case NEXAR_UINT64:
    case NEXAR_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

static int valid_pair(nexar_dtype_t dtype, nexar_op_t op) {
  /* The unsigned casts also reject negative values of the enums. */
  return (unsigned)dtype < NEXAR_NUM_DTYPES && (unsigned)op < NEXAR_NUM_OPS &&
         portable[dtype][op] != NULL;
}

int nexar__reduce_check(nexar_dtype_t dtype, nexar_op_t op) {
  if ((unsigned)dtype >= NEXAR_NUM_DTYPES || (unsigned)op >= NEXAR_NUM_OPS ||
      (op > NEXAR_AVG && op < NEXAR_BAND))
    return NEXAR_ERR_INVALID_ARG;
  /* What is left is a well-formed pair nexar does not implement: an fp8
   * type, or a bitwise op on a float type. */
  if (portable[dtype][op] == NULL) return NEXAR_ERR_UNSUPPORTED;
  return NEXAR_OK;
}

/* ---- Choice of the kernel family. */

static const struct nexar__reduce_family portable_family = {"portable",
                                                            {{NULL}}};

enum { ISA_PORTABLE, ISA_AVX2, ISA_AVX512, ISA_AUTO };

#if NEXAR__REDUCE_X86 && defined(__GNUC__)
static int cpu_has_f16c(void) {
#if defined(__clang__)
  /* Clang's __builtin_cpu_supports does not know "f16c"; ask CPUID (leaf 1,
   * ECX bit 29) directly. The AVX state it needs is checked by the callers'
   * "avx2" / "avx512f" tests. */
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
  return __builtin_cpu_supports("f16c");
#endif
}
#endif

static int cpu_level(void) {
#if NEXAR__REDUCE_X86 && defined(__GNUC__)
  /* The kernel files are built with these exact extensions enabled, so the
   * compiler may use any of them anywhere in those files. The checks also
   * cover operating-system support for the wider register state. */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && cpu_has_f16c())
    return ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      cpu_has_f16c())
    return ISA_AVX2;
#endif
  return ISA_PORTABLE;
}

static int isa_by_name(const char *name) {
  if (name == NULL) return ISA_AUTO;
  if (strcmp(name, "portable") == 0) return ISA_PORTABLE;
  if (strcmp(name, "avx2") == 0) return ISA_AVX2;
  if (strcmp(name, "avx512") == 0) return ISA_AVX512;
  return ISA_AUTO;
}

static const struct nexar__reduce_family *family_for(const char *name) {
  int want = isa_by_name(name);
  int have = cpu_level();
  int level = want < have ? want : have;
#if NEXAR__REDUCE_X86
  if (level == ISA_AVX512) return &nexar__reduce_family_avx512;
  if (level == ISA_AVX2) return &nexar__reduce_family_avx2;
#else
  (void)level;
#endif
  return &portable_family;
}

static pthread_once_t family_once = PTHREAD_ONCE_INIT;
static _Atomic(const struct nexar__reduce_family *) family_cur;

static void family_init(void) {
  atomic_store(&family_cur, family_for(getenv("NEXAR_REDUCE_ISA")));
}

/* Reductions run on the hot path; after the first call this is one load. */
static const struct nexar__reduce_family *family(void) {
  const struct nexar__reduce_family *f =
      atomic_load_explicit(&family_cur, memory_order_acquire);
  if (f != NULL) return f;
  pthread_once(&family_once, family_init);
  return atomic_load_explicit(&family_cur, memory_order_acquire);
}

const char *nexar__reduce_force_isa(const char *name) {
  /* Run the one-time initialisation first so that it cannot later replace
   * the forced choice. */
  pthread_once(&family_once, family_init);
  const struct nexar__reduce_family *f =
      name != NULL ? family_for(name) : family_for(getenv("NEXAR_REDUCE_ISA"));
  atomic_store_explicit(&family_cur, f, memory_order_release);
  return f->name;
}

const char *nexar__reduce_isa(void) {
  return family()->name;
}

/* ---- Reductions. */

void nexar__reduce3(void *out, const void *a, const void *b, size_t count,
                    nexar_dtype_t dtype, nexar_op_t op) {
  if (count == 0 || !valid_pair(dtype, op)) return;
  nexar__reduce_vfn vfn = family()->fn[dtype][op];
  size_t done = vfn != NULL ? vfn(out, a, b, count) : 0;
  if (done < count) {
    size_t off = done * nexar_dtype_size(dtype);
    portable[dtype][op]((unsigned char *)out + off,
                        (const unsigned char *)a + off,
                        (const unsigned char *)b + off, count - done);
  }
}

void nexar__reduce(void *inout, const void *in, size_t count,
                   nexar_dtype_t dtype, nexar_op_t op) {
  nexar__reduce3(inout, inout, in, count, dtype, op);
}

/* ---- AVG finalization. */

#define DIV_LOOP(T, EXPR)                       \
  do {                                          \
    unsigned char *p = buf;                     \
    for (size_t i = 0; i < count; i++) {        \
      T v;                                      \
      memcpy(&v, p + i * sizeof(T), sizeof(T)); \
      v = (T)(EXPR);                            \
      memcpy(p + i * sizeof(T), &v, sizeof(T)); \
    }                                           \
  } while (0)

void nexar__reduce_finalize(void *buf, size_t count, nexar_dtype_t dtype,
                            nexar_op_t op, int n) {
  /* A non-positive n is a caller bug with no meaningful answer; leaving the
   * data alone is the least harmful reaction. */
  if (op != NEXAR_AVG || n <= 0 || count == 0) return;
  /* C division truncates toward zero, for signed types too. */
  switch (dtype) {
    case NEXAR_INT8:
      DIV_LOOP(int8_t, v / n);
      break;
    case NEXAR_UINT8:
      DIV_LOOP(uint8_t, v / (unsigned)n);
      break;
    case NEXAR_INT32:
      DIV_LOOP(int32_t, v / n);
      break;
    case NEXAR_UINT32:
      DIV_LOOP(uint32_t, v / (uint32_t)n);
      break;
    case NEXAR_INT64:
      DIV_LOOP(int64_t, v / (int64_t)n);
      break;
    case NEXAR_UINT64:
      DIV_LOOP(uint64_t, v / (uint64_t)n);
      break;
    case NEXAR_FLOAT32:
      DIV_LOOP(float, canon_f32(v / (float)n));
      break;
    case NEXAR_FLOAT64:
      DIV_LOOP(double, canon_f64(v / (double)n));
      break;
    case NEXAR_FLOAT16:
      DIV_LOOP(uint16_t, nexar__f32_to_f16(nexar__f16_to_f32(v) / (float)n));
      break;
    case NEXAR_BFLOAT16:
      DIV_LOOP(uint16_t, nexar__f32_to_bf16(nexar__bf16_to_f32(v) / (float)n));
      break;
    default:
      break;
  }
}
