/*
 * AVX2 reduction kernels (built with -mavx2 -mf16c -mfma; chosen at run time
 * only on CPUs with all three). Each kernel handles whole vectors and leaves
 * the tail to the portable code in reduce.c, whose results it must match bit
 * for bit:
 * - float NaN results are replaced by the canonical quiet NaN through an
 *   unordered-compare mask and a blend, as the portable code does;
 * - MAXPS/MINPS return their second operand when the inputs compare equal
 *   or one is NaN, so they are called as max(b, a), which is exactly
 *   "b > a ? b : a" (NaN then being patched by the mask);
 * - float16 and bfloat16 are widened exactly, combined in float32 and
 *   rounded to nearest even; a canonical float32 NaN narrows to the
 *   canonical float16 / bfloat16 NaN, so no extra fix-up is needed;
 * - no kernel multiplies and then adds, so the FMA units (enabled for this
 *   file) can never be used to contract two roundings into one.
 * Loads and stores are unaligned throughout.
 */
#include "coll/reduce_impl.h"

#if NEXAR__REDUCE_X86
#include <immintrin.h>

/* ---- Loads and stores. */

static inline __m256 ld_ps(const unsigned char *p) {
  return _mm256_loadu_ps((const float *)(const void *)p);
}
static inline void st_ps(unsigned char *p, __m256 v) {
  _mm256_storeu_ps((float *)(void *)p, v);
}
static inline __m256d ld_pd(const unsigned char *p) {
  return _mm256_loadu_pd((const double *)(const void *)p);
}
static inline void st_pd(unsigned char *p, __m256d v) {
  _mm256_storeu_pd((double *)(void *)p, v);
}
static inline __m256i ld_si(const unsigned char *p) {
  return _mm256_loadu_si256((const __m256i *)(const void *)p);
}
static inline void st_si(unsigned char *p, __m256i v) {
  _mm256_storeu_si256((__m256i *)(void *)p, v);
}

/* Eight float16 values widened to float32 (exact), and back. */
static inline __m256 ld_ph(const unsigned char *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
static inline void st_ph(unsigned char *p, __m256 v) {
  _mm_storeu_si128((__m128i *)(void *)p,
                   _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* Eight bfloat16 values: a bfloat16 is the top half of a float32. */
static inline __m256 ld_bh(const unsigned char *p) {
  __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
/* Rounds to nearest even by adding 0x7fff plus the lowest kept bit, as the
 * portable conversion does. The packed values fit in 16 bits, so the
 * saturating pack is exact. */
static inline void st_bh(unsigned char *p, __m256 v) {
  __m256i u = _mm256_castps_si256(v);
  __m256i lsb =
      _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  u = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  u = _mm256_srli_epi32(u, 16);
  __m128i r = _mm_packus_epi32(_mm256_castsi256_si128(u),
                               _mm256_extracti128_si256(u, 1));
  _mm_storeu_si128((__m128i *)(void *)p, r);
}

/* ---- Float element operations. */

static inline __m256 fix_ps(__m256 r, __m256 nan) {
  __m256 q = _mm256_castsi256_ps(_mm256_set1_epi32((int)NEXAR__QNAN_F32));
  return _mm256_blendv_ps(r, q, nan);
}
static inline __m256 sum_ps(__m256 a, __m256 b) {
  __m256 r = _mm256_add_ps(a, b);
  return fix_ps(r, _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
}
static inline __m256 prod_ps(__m256 a, __m256 b) {
  __m256 r = _mm256_mul_ps(a, b);
  return fix_ps(r, _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
}
static inline __m256 max_ps(__m256 a, __m256 b) {
  return fix_ps(_mm256_max_ps(b, a), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}
static inline __m256 min_ps(__m256 a, __m256 b) {
  return fix_ps(_mm256_min_ps(b, a), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

static inline __m256d fix_pd(__m256d r, __m256d nan) {
  __m256d q =
      _mm256_castsi256_pd(_mm256_set1_epi64x((long long)NEXAR__QNAN_F64));
  return _mm256_blendv_pd(r, q, nan);
}
static inline __m256d sum_pd(__m256d a, __m256d b) {
  __m256d r = _mm256_add_pd(a, b);
  return fix_pd(r, _mm256_cmp_pd(r, r, _CMP_UNORD_Q));
}
static inline __m256d prod_pd(__m256d a, __m256d b) {
  __m256d r = _mm256_mul_pd(a, b);
  return fix_pd(r, _mm256_cmp_pd(r, r, _CMP_UNORD_Q));
}
static inline __m256d max_pd(__m256d a, __m256d b) {
  return fix_pd(_mm256_max_pd(b, a), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
}
static inline __m256d min_pd(__m256d a, __m256d b) {
  return fix_pd(_mm256_min_pd(b, a), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
}

/* ---- Integer element operations. */

static inline __m256i and_si(__m256i a, __m256i b) {
  return _mm256_and_si256(a, b);
}
static inline __m256i or_si(__m256i a, __m256i b) {
  return _mm256_or_si256(a, b);
}
static inline __m256i xor_si(__m256i a, __m256i b) {
  return _mm256_xor_si256(a, b);
}
static inline __m256i add8(__m256i a, __m256i b) {
  return _mm256_add_epi8(a, b);
}
static inline __m256i min_i8(__m256i a, __m256i b) {
  return _mm256_min_epi8(a, b);
}
static inline __m256i max_i8(__m256i a, __m256i b) {
  return _mm256_max_epi8(a, b);
}
static inline __m256i min_u8(__m256i a, __m256i b) {
  return _mm256_min_epu8(a, b);
}
static inline __m256i max_u8(__m256i a, __m256i b) {
  return _mm256_max_epu8(a, b);
}
static inline __m256i add32(__m256i a, __m256i b) {
  return _mm256_add_epi32(a, b);
}
static inline __m256i mul32(__m256i a, __m256i b) {
  return _mm256_mullo_epi32(a, b);
}
static inline __m256i min_i32(__m256i a, __m256i b) {
  return _mm256_min_epi32(a, b);
}
static inline __m256i max_i32(__m256i a, __m256i b) {
  return _mm256_max_epi32(a, b);
}
static inline __m256i min_u32(__m256i a, __m256i b) {
  return _mm256_min_epu32(a, b);
}
static inline __m256i max_u32(__m256i a, __m256i b) {
  return _mm256_max_epu32(a, b);
}
static inline __m256i add64(__m256i a, __m256i b) {
  return _mm256_add_epi64(a, b);
}
/* AVX2 has no 64-bit min/max: compare and blend. Unsigned order is signed
 * order with the sign bits flipped. */
static inline __m256i min_i64(__m256i a, __m256i b) {
  return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
}
static inline __m256i max_i64(__m256i a, __m256i b) {
  return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a));
}
static inline __m256i flip64(__m256i a) {
  return _mm256_xor_si256(a, _mm256_set1_epi64x((long long)(1ull << 63)));
}
static inline __m256i min_u64(__m256i a, __m256i b) {
  return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(flip64(a), flip64(b)));
}
static inline __m256i max_u64(__m256i a, __m256i b) {
  return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(flip64(b), flip64(a)));
}

/* ---- Kernels. W elements of ES bytes fill one vector; two vectors per
 * iteration keep both load ports busy. */

#define VKERNEL(NAME, ES, W, VT, LD, ST, OP)                              \
  static size_t NAME(void *out, const void *a, const void *b, size_t n) { \
    unsigned char *po = out;                                              \
    const unsigned char *pa = a, *pb = b;                                 \
    size_t i = 0;                                                         \
    for (; i + 2 * (W) <= n; i += 2 * (W)) {                              \
      VT x0 = LD(pa + i * (ES)), y0 = LD(pb + i * (ES));                  \
      VT x1 = LD(pa + (i + (W)) * (ES)), y1 = LD(pb + (i + (W)) * (ES));  \
      ST(po + i * (ES), OP(x0, y0));                                      \
      ST(po + (i + (W)) * (ES), OP(x1, y1));                              \
    }                                                                     \
    if (i + (W) <= n) {                                                   \
      ST(po + i * (ES), OP(LD(pa + i * (ES)), LD(pb + i * (ES))));        \
      i += (W);                                                           \
    }                                                                     \
    return i;                                                             \
  }

VKERNEL(k_sum_f32, 4, 8, __m256, ld_ps, st_ps, sum_ps)
VKERNEL(k_prod_f32, 4, 8, __m256, ld_ps, st_ps, prod_ps)
VKERNEL(k_max_f32, 4, 8, __m256, ld_ps, st_ps, max_ps)
VKERNEL(k_min_f32, 4, 8, __m256, ld_ps, st_ps, min_ps)
VKERNEL(k_sum_f64, 8, 4, __m256d, ld_pd, st_pd, sum_pd)
VKERNEL(k_prod_f64, 8, 4, __m256d, ld_pd, st_pd, prod_pd)
VKERNEL(k_max_f64, 8, 4, __m256d, ld_pd, st_pd, max_pd)
VKERNEL(k_min_f64, 8, 4, __m256d, ld_pd, st_pd, min_pd)
VKERNEL(k_sum_f16, 2, 8, __m256, ld_ph, st_ph, sum_ps)
VKERNEL(k_prod_f16, 2, 8, __m256, ld_ph, st_ph, prod_ps)
VKERNEL(k_max_f16, 2, 8, __m256, ld_ph, st_ph, max_ps)
VKERNEL(k_min_f16, 2, 8, __m256, ld_ph, st_ph, min_ps)
VKERNEL(k_sum_bf16, 2, 8, __m256, ld_bh, st_bh, sum_ps)
VKERNEL(k_prod_bf16, 2, 8, __m256, ld_bh, st_bh, prod_ps)
VKERNEL(k_max_bf16, 2, 8, __m256, ld_bh, st_bh, max_ps)
VKERNEL(k_min_bf16, 2, 8, __m256, ld_bh, st_bh, min_ps)

VKERNEL(k_sum_8, 1, 32, __m256i, ld_si, st_si, add8)
VKERNEL(k_min_i8, 1, 32, __m256i, ld_si, st_si, min_i8)
VKERNEL(k_max_i8, 1, 32, __m256i, ld_si, st_si, max_i8)
VKERNEL(k_min_u8, 1, 32, __m256i, ld_si, st_si, min_u8)
VKERNEL(k_max_u8, 1, 32, __m256i, ld_si, st_si, max_u8)
VKERNEL(k_sum_32, 4, 8, __m256i, ld_si, st_si, add32)
VKERNEL(k_prod_32, 4, 8, __m256i, ld_si, st_si, mul32)
VKERNEL(k_min_i32, 4, 8, __m256i, ld_si, st_si, min_i32)
VKERNEL(k_max_i32, 4, 8, __m256i, ld_si, st_si, max_i32)
VKERNEL(k_min_u32, 4, 8, __m256i, ld_si, st_si, min_u32)
VKERNEL(k_max_u32, 4, 8, __m256i, ld_si, st_si, max_u32)
VKERNEL(k_sum_64, 8, 4, __m256i, ld_si, st_si, add64)
VKERNEL(k_min_i64, 8, 4, __m256i, ld_si, st_si, min_i64)
VKERNEL(k_max_i64, 8, 4, __m256i, ld_si, st_si, max_i64)
VKERNEL(k_min_u64, 8, 4, __m256i, ld_si, st_si, min_u64)
VKERNEL(k_max_u64, 8, 4, __m256i, ld_si, st_si, max_u64)

/* Bitwise ops do not care about element boundaries; one kernel per element
 * size keeps the count in elements. */
#define BITWISE(ES)                                                \
  VKERNEL(k_band_##ES, ES, 32 / ES, __m256i, ld_si, st_si, and_si) \
  VKERNEL(k_bor_##ES, ES, 32 / ES, __m256i, ld_si, st_si, or_si)   \
  VKERNEL(k_bxor_##ES, ES, 32 / ES, __m256i, ld_si, st_si, xor_si)

BITWISE(1)
BITWISE(4)
BITWISE(8)

#define FLOAT_ROW(S)                                                           \
  {                                                                            \
    [NEXAR_SUM] = k_sum_##S, [NEXAR_PROD] = k_prod_##S,                        \
    [NEXAR_MAX] = k_max_##S, [NEXAR_MIN] = k_min_##S, [NEXAR_AVG] = k_sum_##S, \
  }

#define INT_ROW(SUM, PROD, MAX, MIN, ES)                              \
  {                                                                   \
    [NEXAR_SUM] = SUM, [NEXAR_PROD] = PROD, [NEXAR_MAX] = MAX,        \
    [NEXAR_MIN] = MIN, [NEXAR_AVG] = SUM, [NEXAR_BAND] = k_band_##ES, \
    [NEXAR_BOR] = k_bor_##ES, [NEXAR_BXOR] = k_bxor_##ES,             \
  }

const struct nexar__reduce_family nexar__reduce_family_avx2 = {
    "avx2",
    {
        [NEXAR_INT8] = INT_ROW(k_sum_8, NULL, k_max_i8, k_min_i8, 1),
        [NEXAR_UINT8] = INT_ROW(k_sum_8, NULL, k_max_u8, k_min_u8, 1),
        [NEXAR_INT32] = INT_ROW(k_sum_32, k_prod_32, k_max_i32, k_min_i32, 4),
        [NEXAR_UINT32] = INT_ROW(k_sum_32, k_prod_32, k_max_u32, k_min_u32, 4),
        [NEXAR_INT64] = INT_ROW(k_sum_64, NULL, k_max_i64, k_min_i64, 8),
        [NEXAR_UINT64] = INT_ROW(k_sum_64, NULL, k_max_u64, k_min_u64, 8),
        [NEXAR_FLOAT16] = FLOAT_ROW(f16),
        [NEXAR_FLOAT32] = FLOAT_ROW(f32),
        [NEXAR_FLOAT64] = FLOAT_ROW(f64),
        [NEXAR_BFLOAT16] = FLOAT_ROW(bf16),
    },
};

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int nexar__reduce_avx2_unused;
#endif
