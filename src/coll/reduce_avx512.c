/*
 * AVX-512 reduction kernels (built with -mavx512f -mavx512bw -mavx512vl
 * -mf16c; chosen at run time only on CPUs with all four). The rules are
 * those of reduce_avx2.c: whole vectors only (the portable code in reduce.c
 * does the tail), results bit-identical to the portable code, canonical NaN
 * forced through an unordered-compare mask, max(b, a) / min(b, a) operand
 * order so that ties keep the left operand, float16 and bfloat16 widened to
 * float32 and rounded back to nearest even, no multiply followed by an add,
 * and unaligned loads and stores throughout.
 */
#include "coll/reduce_impl.h"

#if NEXAR__REDUCE_X86
#include <immintrin.h>

/* ---- Loads and stores. */

static inline __m512 ld_ps(const unsigned char *p) {
  return _mm512_loadu_ps(p);
}
static inline void st_ps(unsigned char *p, __m512 v) {
  _mm512_storeu_ps(p, v);
}
static inline __m512d ld_pd(const unsigned char *p) {
  return _mm512_loadu_pd(p);
}
static inline void st_pd(unsigned char *p, __m512d v) {
  _mm512_storeu_pd(p, v);
}
static inline __m512i ld_si(const unsigned char *p) {
  return _mm512_loadu_si512(p);
}
static inline void st_si(unsigned char *p, __m512i v) {
  _mm512_storeu_si512(p, v);
}

/* Sixteen float16 values widened to float32 (exact), and back. */
static inline __m512 ld_ph(const unsigned char *p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
static inline void st_ph(unsigned char *p, __m512 v) {
  _mm256_storeu_si256((__m256i *)(void *)p,
                      _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/* Sixteen bfloat16 values: a bfloat16 is the top half of a float32. The
 * hardware bfloat16 conversion (AVX512_BF16) is not used: it flushes
 * subnormals to zero and would differ from the portable code. */
static inline __m512 ld_bh(const unsigned char *p) {
  __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
/* Rounds to nearest even by adding 0x7fff plus the lowest kept bit, as the
 * portable conversion does; the narrowing move then keeps the low halves. */
static inline void st_bh(unsigned char *p, __m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __m512i lsb =
      _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  u = _mm512_srli_epi32(u, 16);
  _mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16(u));
}

/* ---- Float element operations. */

static inline __m512 fix_ps(__m512 r, __mmask16 nan) {
  __m512 q = _mm512_castsi512_ps(_mm512_set1_epi32((int)NEXAR__QNAN_F32));
  return _mm512_mask_mov_ps(r, nan, q);
}
static inline __m512 sum_ps(__m512 a, __m512 b) {
  __m512 r = _mm512_add_ps(a, b);
  return fix_ps(r, _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q));
}
static inline __m512 prod_ps(__m512 a, __m512 b) {
  __m512 r = _mm512_mul_ps(a, b);
  return fix_ps(r, _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q));
}
static inline __m512 max_ps(__m512 a, __m512 b) {
  return fix_ps(_mm512_max_ps(b, a), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q));
}
static inline __m512 min_ps(__m512 a, __m512 b) {
  return fix_ps(_mm512_min_ps(b, a), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q));
}

static inline __m512d fix_pd(__m512d r, __mmask8 nan) {
  __m512d q =
      _mm512_castsi512_pd(_mm512_set1_epi64((long long)NEXAR__QNAN_F64));
  return _mm512_mask_mov_pd(r, nan, q);
}
static inline __m512d sum_pd(__m512d a, __m512d b) {
  __m512d r = _mm512_add_pd(a, b);
  return fix_pd(r, _mm512_cmp_pd_mask(r, r, _CMP_UNORD_Q));
}
static inline __m512d prod_pd(__m512d a, __m512d b) {
  __m512d r = _mm512_mul_pd(a, b);
  return fix_pd(r, _mm512_cmp_pd_mask(r, r, _CMP_UNORD_Q));
}
static inline __m512d max_pd(__m512d a, __m512d b) {
  return fix_pd(_mm512_max_pd(b, a), _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q));
}
static inline __m512d min_pd(__m512d a, __m512d b) {
  return fix_pd(_mm512_min_pd(b, a), _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q));
}

/* ---- Integer element operations. */

static inline __m512i and_si(__m512i a, __m512i b) {
  return _mm512_and_si512(a, b);
}
static inline __m512i or_si(__m512i a, __m512i b) {
  return _mm512_or_si512(a, b);
}
static inline __m512i xor_si(__m512i a, __m512i b) {
  return _mm512_xor_si512(a, b);
}
static inline __m512i add8(__m512i a, __m512i b) {
  return _mm512_add_epi8(a, b);
}
static inline __m512i min_i8(__m512i a, __m512i b) {
  return _mm512_min_epi8(a, b);
}
static inline __m512i max_i8(__m512i a, __m512i b) {
  return _mm512_max_epi8(a, b);
}
static inline __m512i min_u8(__m512i a, __m512i b) {
  return _mm512_min_epu8(a, b);
}
static inline __m512i max_u8(__m512i a, __m512i b) {
  return _mm512_max_epu8(a, b);
}
static inline __m512i add32(__m512i a, __m512i b) {
  return _mm512_add_epi32(a, b);
}
static inline __m512i mul32(__m512i a, __m512i b) {
  return _mm512_mullo_epi32(a, b);
}
static inline __m512i min_i32(__m512i a, __m512i b) {
  return _mm512_min_epi32(a, b);
}
static inline __m512i max_i32(__m512i a, __m512i b) {
  return _mm512_max_epi32(a, b);
}
static inline __m512i min_u32(__m512i a, __m512i b) {
  return _mm512_min_epu32(a, b);
}
static inline __m512i max_u32(__m512i a, __m512i b) {
  return _mm512_max_epu32(a, b);
}
static inline __m512i add64(__m512i a, __m512i b) {
  return _mm512_add_epi64(a, b);
}
static inline __m512i min_i64(__m512i a, __m512i b) {
  return _mm512_min_epi64(a, b);
}
static inline __m512i max_i64(__m512i a, __m512i b) {
  return _mm512_max_epi64(a, b);
}
static inline __m512i min_u64(__m512i a, __m512i b) {
  return _mm512_min_epu64(a, b);
}
static inline __m512i max_u64(__m512i a, __m512i b) {
  return _mm512_max_epu64(a, b);
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

VKERNEL(k_sum_f32, 4, 16, __m512, ld_ps, st_ps, sum_ps)
VKERNEL(k_prod_f32, 4, 16, __m512, ld_ps, st_ps, prod_ps)
VKERNEL(k_max_f32, 4, 16, __m512, ld_ps, st_ps, max_ps)
VKERNEL(k_min_f32, 4, 16, __m512, ld_ps, st_ps, min_ps)
VKERNEL(k_sum_f64, 8, 8, __m512d, ld_pd, st_pd, sum_pd)
VKERNEL(k_prod_f64, 8, 8, __m512d, ld_pd, st_pd, prod_pd)
VKERNEL(k_max_f64, 8, 8, __m512d, ld_pd, st_pd, max_pd)
VKERNEL(k_min_f64, 8, 8, __m512d, ld_pd, st_pd, min_pd)
VKERNEL(k_sum_f16, 2, 16, __m512, ld_ph, st_ph, sum_ps)
VKERNEL(k_prod_f16, 2, 16, __m512, ld_ph, st_ph, prod_ps)
VKERNEL(k_max_f16, 2, 16, __m512, ld_ph, st_ph, max_ps)
VKERNEL(k_min_f16, 2, 16, __m512, ld_ph, st_ph, min_ps)
VKERNEL(k_sum_bf16, 2, 16, __m512, ld_bh, st_bh, sum_ps)
VKERNEL(k_prod_bf16, 2, 16, __m512, ld_bh, st_bh, prod_ps)
VKERNEL(k_max_bf16, 2, 16, __m512, ld_bh, st_bh, max_ps)
VKERNEL(k_min_bf16, 2, 16, __m512, ld_bh, st_bh, min_ps)

VKERNEL(k_sum_8, 1, 64, __m512i, ld_si, st_si, add8)
VKERNEL(k_min_i8, 1, 64, __m512i, ld_si, st_si, min_i8)
VKERNEL(k_max_i8, 1, 64, __m512i, ld_si, st_si, max_i8)
VKERNEL(k_min_u8, 1, 64, __m512i, ld_si, st_si, min_u8)
VKERNEL(k_max_u8, 1, 64, __m512i, ld_si, st_si, max_u8)
VKERNEL(k_sum_32, 4, 16, __m512i, ld_si, st_si, add32)
VKERNEL(k_prod_32, 4, 16, __m512i, ld_si, st_si, mul32)
VKERNEL(k_min_i32, 4, 16, __m512i, ld_si, st_si, min_i32)
VKERNEL(k_max_i32, 4, 16, __m512i, ld_si, st_si, max_i32)
VKERNEL(k_min_u32, 4, 16, __m512i, ld_si, st_si, min_u32)
VKERNEL(k_max_u32, 4, 16, __m512i, ld_si, st_si, max_u32)
VKERNEL(k_sum_64, 8, 8, __m512i, ld_si, st_si, add64)
VKERNEL(k_min_i64, 8, 8, __m512i, ld_si, st_si, min_i64)
VKERNEL(k_max_i64, 8, 8, __m512i, ld_si, st_si, max_i64)
VKERNEL(k_min_u64, 8, 8, __m512i, ld_si, st_si, min_u64)
VKERNEL(k_max_u64, 8, 8, __m512i, ld_si, st_si, max_u64)

/* Bitwise ops do not care about element boundaries; one kernel per element
 * size keeps the count in elements. */
#define BITWISE(ES)                                                \
  VKERNEL(k_band_##ES, ES, 64 / ES, __m512i, ld_si, st_si, and_si) \
  VKERNEL(k_bor_##ES, ES, 64 / ES, __m512i, ld_si, st_si, or_si)   \
  VKERNEL(k_bxor_##ES, ES, 64 / ES, __m512i, ld_si, st_si, xor_si)

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

/* 64-bit PROD needs AVX512DQ and 8-bit PROD has no instruction at all; both
 * stay portable. */
const struct nexar__reduce_family nexar__reduce_family_avx512 = {
    "avx512",
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
typedef int nexar__reduce_avx512_unused;
#endif
