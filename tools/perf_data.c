/*
 * nexar-perf: datatypes, reduction ops, deterministic inputs and expected
 * results, and the quantiles of measured times (see perf.h for the contract).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

/* In nccl-tests order, with nccl-tests' printed names. */
static const perf_type_t types[] = {
    {"int8", NULL, NEXAR_INT8, 1, PERF_SINT, INT8_MAX, 6},
    {"uint8", NULL, NEXAR_UINT8, 1, PERF_UINT, UINT8_MAX, 7},
    {"int32", NULL, NEXAR_INT32, 4, PERF_SINT, INT32_MAX, 30},
    {"uint32", NULL, NEXAR_UINT32, 4, PERF_UINT, UINT32_MAX, 31},
    {"int64", NULL, NEXAR_INT64, 8, PERF_SINT, INT64_C(1) << 62, 62},
    {"uint64", NULL, NEXAR_UINT64, 8, PERF_UINT, INT64_C(1) << 62, 62},
    {"half", "float16", NEXAR_FLOAT16, 2, PERF_HALF, 2048, 15},
    {"float", "float32", NEXAR_FLOAT32, 4, PERF_FLOAT, 1 << 24, 62},
    {"double", "float64", NEXAR_FLOAT64, 8, PERF_FLOAT, INT64_C(1) << 53, 62},
    {"bfloat16", "bf16", NEXAR_BFLOAT16, 2, PERF_BF16, 256, 62},
};

const perf_type_t *perf_type_find(const char *name) {
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (!strcmp(name, types[i].name) ||
        (types[i].alias && !strcmp(name, types[i].alias)))
      return &types[i];
  return NULL;
}

static const struct {
  const char *name;
  nexar_op_t op;
} redops[] = {
    {"sum", NEXAR_SUM}, {"prod", NEXAR_PROD}, {"max", NEXAR_MAX},
    {"min", NEXAR_MIN}, {"avg", NEXAR_AVG},   {"band", NEXAR_BAND},
    {"bor", NEXAR_BOR}, {"bxor", NEXAR_BXOR},
};

int perf_redop_find(const char *name, nexar_op_t *op) {
  for (size_t i = 0; i < sizeof redops / sizeof redops[0]; i++)
    if (!strcmp(name, redops[i].name)) {
      *op = redops[i].op;
      return 0;
    }
  return -1;
}

const char *perf_redop_name(nexar_op_t op) {
  for (size_t i = 0; i < sizeof redops / sizeof redops[0]; i++)
    if (redops[i].op == op) return redops[i].name;
  return "?";
}

/* ---- Input values. */

static int is_int(const perf_type_t *t) {
  return t->kind == PERF_SINT || t->kind == PERF_UINT;
}

/* Values 0..k-1 for SUM: n x (k - 1) stays within the exact range. */
static int64_t sum_range(const perf_t *p) {
  int64_t k = p->type->limit / p->n + 1;
  return k > 4 ? 4 : k;
}

/* Copying collectives and MIN/MAX: values 0..m-1, m a prime below the
 * exact range. */
static int64_t copy_range(const perf_t *p) {
  return p->type->limit >= 251 ? 251 : 127;
}

/* Bits a bitwise-op input may use; the sign bit stays clear so that every
 * value is a non-negative int64_t. */
static unsigned bit_width(const perf_t *p) {
  return (unsigned)(8 * p->type->size - 1);
}

int64_t perf_input(const perf_t *p, int reducing, int k, size_t i) {
  uint64_t uk = (uint64_t)k, ui = (uint64_t)i;
  if (!reducing)
    return (int64_t)((uk * 131 + ui * 7 + 3) % (uint64_t)copy_range(p));
  nexar_op_t op = p->redop;
  /* Bitwise ops on float types fail in the library; give them SUM inputs
   * so that the fill stays well defined. */
  if (!is_int(p->type) && op >= NEXAR_BAND) op = NEXAR_SUM;
  switch (op) {
    case NEXAR_PROD: {
      /* Mostly 1 with a 2 on every m-th rank: at most ceil(n / m) <=
       * max_exp2 factors of two per element. */
      int64_t m = (p->n + p->type->max_exp2 - 1) / p->type->max_exp2;
      if (m < 3) m = 3;
      return (ui + uk) % (uint64_t)m == 0 ? 2 : 1;
    }
    case NEXAR_MAX:
    case NEXAR_MIN:
      return (int64_t)((uk * 37 + ui * 11 + 5) % (uint64_t)copy_range(p));
    case NEXAR_AVG:
      if (!is_int(p->type)) {
        /* Rank k gives c + 2k: the sum over ranks 0..r is (r + 1)(c + r),
         * so AVG (and scan's AVG, which divides by r + 1) is exact. Needs
         * n (c + n - 1) <= limit; otherwise every rank gives c. */
        int64_t kc = p->type->limit / p->n - p->n + 2;
        if (kc > 4) kc = 4;
        if (kc >= 1) return (int64_t)(ui % (uint64_t)kc + 2 * uk);
      }
      return (int64_t)((ui + uk) % (uint64_t)sum_range(p));
    case NEXAR_BAND: {
      uint64_t mask = (UINT64_C(1) << bit_width(p)) - 1;
      return (int64_t)(mask ^ (UINT64_C(1) << ((ui + uk) % bit_width(p))));
    }
    case NEXAR_BOR:
      return (int64_t)(UINT64_C(1) << ((ui + 2 * uk) % bit_width(p)));
    case NEXAR_BXOR: {
      uint64_t x = (uk + 1) * UINT64_C(0x9E3779B97F4A7C15) ^
                   (ui + 1) * UINT64_C(0xBF58476D1CE4E5B9);
      x ^= x >> 31;
      return (int64_t)(x & ((UINT64_C(1) << bit_width(p)) - 1));
    }
    case NEXAR_SUM:
    default:
      return (int64_t)((ui + uk) % (uint64_t)sum_range(p));
  }
}

int64_t perf_reduced(const perf_t *p, int last, size_t i) {
  nexar_op_t op = p->redop;
  if (!is_int(p->type) && op >= NEXAR_BAND) op = NEXAR_SUM;
  int64_t acc = perf_input(p, 1, 0, i);
  for (int k = 1; k <= last; k++) {
    int64_t v = perf_input(p, 1, k, i);
    switch (op) {
      case NEXAR_PROD:
        acc *= v;
        break;
      case NEXAR_MAX:
        acc = v > acc ? v : acc;
        break;
      case NEXAR_MIN:
        acc = v < acc ? v : acc;
        break;
      case NEXAR_BAND:
        acc &= v;
        break;
      case NEXAR_BOR:
        acc |= v;
        break;
      case NEXAR_BXOR:
        acc ^= v;
        break;
      case NEXAR_SUM:
      case NEXAR_AVG:
      default:
        acc += v;
        break;
    }
  }
  /* Non-negative inputs: C's truncation is the library's for integers,
   * and float inputs make the quotient exact. */
  if (op == NEXAR_AVG) acc /= last + 1;
  return acc;
}

/* ---- Encoding. Values are integers exactly representable in the type
 * (perf_input guarantees it), so the conversions need no rounding. */

static uint16_t half_from_int(int64_t v) {
  if (v == 0) return 0;
  uint16_t sign = (uint16_t)(v < 0 ? 0x8000 : 0);
  uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  int e = 63 - __builtin_clzll(a);
  if (e > 15) return sign | 0x7c00; /* not representable: infinity */
  uint64_t m = e >= 10 ? a >> (e - 10) : a << (10 - e);
  return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (m & 0x3ff));
}

/* Writes the encoding of |v| to |out| (p->type->size bytes). */
static void encode(const perf_type_t *t, int64_t v, unsigned char *out) {
  switch (t->kind) {
    case PERF_SINT:
    case PERF_UINT: {
      uint64_t u = (uint64_t)v;
      uint8_t u8 = (uint8_t)u;
      uint32_t u32 = (uint32_t)u;
      if (t->size == 1) memcpy(out, &u8, 1);
      if (t->size == 4) memcpy(out, &u32, 4);
      if (t->size == 8) memcpy(out, &u, 8);
      break;
    }
    case PERF_FLOAT:
      if (t->size == 4) {
        float f = (float)v;
        memcpy(out, &f, 4);
      } else {
        double d = (double)v;
        memcpy(out, &d, 8);
      }
      break;
    case PERF_HALF: {
      uint16_t h = half_from_int(v);
      memcpy(out, &h, 2);
      break;
    }
    case PERF_BF16: {
      /* Exactly representable values have zero low 16 bits in float32. */
      float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      uint16_t b = (uint16_t)(bits >> 16);
      memcpy(out, &b, 2);
      break;
    }
  }
}

void perf_store(const perf_t *p, void *buf, size_t i, int64_t v) {
  encode(p->type, v, (unsigned char *)buf + i * p->type->size);
}

int perf_equal(const perf_t *p, const void *buf, size_t i, int64_t v) {
  unsigned char want[8];
  encode(p->type, v, want);
  return !memcmp((const unsigned char *)buf + i * p->type->size, want,
                 p->type->size);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void perf_sort_times(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
}

double perf_quantile(const double *t, int n, double q) {
  return t[(int)((double)(n - 1) * q)];
}
