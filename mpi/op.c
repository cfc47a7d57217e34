/*
 * Reduction operations: the predefined ops (mapped to nexar's where nexar
 * has them) and user ops (MPI_Op_create), and nxm_op_apply, the local
 * reduction every op and predefined type pair falls back on (logical ops,
 * MINLOC / MAXLOC on the pair types, short, long double, complex, user
 * functions). MPI_Reduce_local is here too.
 */
#include <complex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

#define OP_BASE 0x20u
#define OP_COUNT 0x20u

static nxm_op_t g_ops[OP_COUNT];

static void pre(MPI_Op h, int nop) {
  nxm_op_t *o = &g_ops[(uintptr_t)h - OP_BASE];
  *o = (nxm_op_t){NXM_MAGIC_OP, 1, 1, h, nop, 1, NULL};
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_ops(void) {
  pre(MPI_SUM, NEXAR_SUM);
  pre(MPI_MIN, NEXAR_MIN);
  pre(MPI_MAX, NEXAR_MAX);
  pre(MPI_PROD, NEXAR_PROD);
  pre(MPI_BAND, NEXAR_BAND);
  pre(MPI_BOR, NEXAR_BOR);
  pre(MPI_BXOR, NEXAR_BXOR);
  pre(MPI_LAND, NXM_OP_NONE);
  pre(MPI_LOR, NXM_OP_NONE);
  pre(MPI_LXOR, NXM_OP_NONE);
  pre(MPI_MINLOC, NXM_OP_NONE);
  pre(MPI_MAXLOC, NXM_OP_NONE);
  pre(MPI_REPLACE, NXM_OP_NONE);
  pre(MPI_NO_OP, NXM_OP_NONE);
}

nxm_op_t *nxm_op_get(MPI_Op h) {
  uintptr_t v = (uintptr_t)h;
  if (v > OP_BASE && v < OP_BASE + OP_COUNT) {
    pthread_once(&g_once, init_ops);
    nxm_op_t *o = &g_ops[v - OP_BASE];
    return o->magic == NXM_MAGIC_OP ? o : NULL;
  }
  return nxm_obj_is(h, NXM_MAGIC_OP) ? (nxm_op_t *)h : NULL;
}

int nxm_op_native(const nxm_op_t *op, const nxm_dtype_t *t, nexar_op_t *nop,
                  nexar_dtype_t *ndt, MPI_Aint *scale) {
  const nxm_dtype_t *b = t->basic;
  *scale = 1;
  if (op->nop == NXM_OP_NONE || !b || b->ndt == NXM_DT_NONE) return 0;
  int is_float = b->ndt == NEXAR_FLOAT16 || b->ndt == NEXAR_FLOAT32 ||
                 b->ndt == NEXAR_FLOAT64 || b->ndt == NEXAR_BFLOAT16;
  if (is_float &&
      (op->nop == NEXAR_BAND || op->nop == NEXAR_BOR || op->nop == NEXAR_BXOR))
    return 0;
  *nop = (nexar_op_t)op->nop;
  *ndt = (nexar_dtype_t)b->ndt;
  *scale = t->nbasic;
  return 1;
}

/* ---- Local kernels. inout[i] = in[i] op inout[i]. */

#define LOOP(T, EXPR)                \
  do {                               \
    const T *a = in;                 \
    T *b = inout;                    \
    for (size_t i = 0; i < n; i++) { \
      T x = a[i], y = b[i];          \
      b[i] = (T)(EXPR);              \
    }                                \
  } while (0)

#define ARITH(T)              \
  switch (o) {                \
    case 0x21:                \
      LOOP(T, x + y);         \
      return 0;               \
    case 0x24:                \
      LOOP(T, x *y);          \
      return 0;               \
    case 0x22:                \
      LOOP(T, x < y ? x : y); \
      return 0;               \
    case 0x23:                \
      LOOP(T, x > y ? x : y); \
      return 0;               \
    default:                  \
      break;                  \
  }

#define LOGIC(T)         \
  switch (o) {           \
    case 0x30:           \
      LOOP(T, x &&y);    \
      return 0;          \
    case 0x31:           \
      LOOP(T, x || y);   \
      return 0;          \
    case 0x32:           \
      LOOP(T, !x != !y); \
      return 0;          \
    default:             \
      break;             \
  }

#define BITS(T)       \
  switch (o) {        \
    case 0x28:        \
      LOOP(T, x &y);  \
      return 0;       \
    case 0x29:        \
      LOOP(T, x | y); \
      return 0;       \
    case 0x2a:        \
      LOOP(T, x ^ y); \
      return 0;       \
    default:          \
      break;          \
  }

#define INTEGER(T) \
  ARITH(T)         \
  LOGIC(T)         \
  BITS(T)          \
  return -1

/* MINLOC / MAXLOC on packed (value, index) pairs (no padding: |es| bytes
 * each): the better value wins; on a tie the smaller index. */
#define PAIR(T)                                                              \
  do {                                                                       \
    const size_t es = sizeof(T) + sizeof(int);                               \
    const char *a = in;                                                      \
    char *b = inout;                                                         \
    for (size_t i = 0; i < n; i++) {                                         \
      T av, bv;                                                              \
      int ak, bk;                                                            \
      memcpy(&av, a + i * es, sizeof av);                                    \
      memcpy(&bv, b + i * es, sizeof bv);                                    \
      memcpy(&ak, a + i * es + sizeof(T), sizeof ak);                        \
      memcpy(&bk, b + i * es + sizeof(T), sizeof bk);                        \
      int take = o == 0x38 ? av < bv : av > bv;                              \
      if (take || (av == bv && ak < bk)) memcpy(b + i * es, a + i * es, es); \
    }                                                                        \
    return 0;                                                                \
  } while (0)

static int kernel(int o, int tc, const void *in, void *inout, size_t n) {
  if (o == 0x38 || o == 0x39) {
    switch (tc) {
      case NXM_TC_FLOAT_INT:
        PAIR(float);
      case NXM_TC_DOUBLE_INT:
        PAIR(double);
      case NXM_TC_LONG_INT:
        PAIR(long);
      case NXM_TC_2INT:
        PAIR(int);
      case NXM_TC_SHORT_INT:
        PAIR(short);
      case NXM_TC_LDOUBLE_INT:
        PAIR(long double);
      default:
        return -1;
    }
  }
  switch (tc) {
    case NXM_TC_INT8:
      INTEGER(int8_t);
    case NXM_TC_UINT8:
      INTEGER(uint8_t);
    case NXM_TC_INT16:
      INTEGER(int16_t);
    case NXM_TC_UINT16:
      INTEGER(uint16_t);
    case NXM_TC_INT32:
      INTEGER(int32_t);
    case NXM_TC_UINT32:
      INTEGER(uint32_t);
    case NXM_TC_INT64:
      INTEGER(int64_t);
    case NXM_TC_UINT64:
      INTEGER(uint64_t);
    case NXM_TC_BYTE:
      BITS(uint8_t);
      return -1;
    case NXM_TC_BOOL:
      LOGIC(bool);
      return -1;
    case NXM_TC_FLOAT:
      ARITH(float);
      return -1;
    case NXM_TC_DOUBLE:
      ARITH(double);
      return -1;
    case NXM_TC_LDOUBLE:
      ARITH(long double);
      return -1;
    case NXM_TC_CFLOAT:
      if (o == 0x21)
        LOOP(float complex, x + y);
      else if (o == 0x24)
        LOOP(float complex, x *y);
      else
        return -1;
      return 0;
    case NXM_TC_CDOUBLE:
      if (o == 0x21)
        LOOP(double complex, x + y);
      else if (o == 0x24)
        LOOP(double complex, x *y);
      else
        return -1;
      return 0;
    case NXM_TC_CLDOUBLE:
      if (o == 0x21)
        LOOP(long double complex, x + y);
      else if (o == 0x24)
        LOOP(long double complex, x *y);
      else
        return -1;
      return 0;
    default:
      return -1;
  }
}

int nxm_op_apply(const nxm_op_t *op, const void *in, void *inout, size_t count,
                 const nxm_dtype_t *t) {
  if (op->user_fn) {
    if (count > 0x7fffffff) return MPI_ERR_COUNT;
    int len = (int)count;
    MPI_Datatype h = nxm_dtype_handle(t);
    op->user_fn((void *)in, inout, &len, &h);
    return MPI_SUCCESS;
  }
  const nxm_dtype_t *b = t->basic;
  if (!b) return MPI_ERR_OP;
  size_t n = count * (size_t)t->nbasic;
  int o = (int)(uintptr_t)op->handle;
  if (op->handle == MPI_NO_OP) return MPI_SUCCESS;
  if (op->handle == MPI_REPLACE) {
    memmove(inout, in, n * (size_t)b->size);
    return MPI_SUCCESS;
  }
  if (b->tc == NXM_TC_FLOAT16 && op->nop != NXM_OP_NONE && nxm_g.ctx) {
    int rc = nexar_reduce_local(nxm_g.ctx, in, inout, n, NEXAR_FLOAT16,
                                (nexar_op_t)op->nop);
    return rc == NEXAR_OK ? MPI_SUCCESS : MPI_ERR_OP;
  }
  return kernel(o, b->tc, in, inout, n) == 0 ? MPI_SUCCESS : MPI_ERR_OP;
}

/* ---- MPI functions */

int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op) {
  if (!user_fn || !op)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Op_create", "NULL");
  nxm_op_t *o = calloc(1, sizeof *o);
  if (!o)
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Op_create", "out of memory");
  if (nxm_obj_open(o, NXM_MAGIC_OP) != MPI_SUCCESS) {
    free(o);
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Op_create", "out of memory");
  }
  atomic_init(&o->refs, 1);
  o->nop = NXM_OP_NONE;
  o->commute = commute != 0;
  o->user_fn = user_fn;
  o->handle = (MPI_Op)o;
  *op = (MPI_Op)o;
  return MPI_SUCCESS;
}

void nxm_op_ref(const nxm_op_t *op) {
  if (op && !op->predefined) atomic_fetch_add(&((nxm_op_t *)op)->refs, 1);
}

void nxm_op_unref(const nxm_op_t *op) {
  nxm_op_t *o = (nxm_op_t *)op;
  if (o && !o->predefined && atomic_fetch_sub(&o->refs, 1) == 1) {
    nxm_obj_close(o);
    free(o);
  }
}

int MPI_Op_free(MPI_Op *op) {
  nxm_op_t *o = op ? nxm_op_get(*op) : NULL;
  if (!o || o->predefined)
    return nxm_err(NULL, MPI_ERR_OP, "MPI_Op_free", "invalid or predefined");
  nxm_op_unref(o);
  *op = MPI_OP_NULL;
  return MPI_SUCCESS;
}

int MPI_Op_commutative(MPI_Op op, int *commute) {
  nxm_op_t *o = nxm_op_get(op);
  if (!o || !commute)
    return nxm_err(NULL, MPI_ERR_OP, "MPI_Op_commutative", "invalid op");
  *commute = o->commute;
  return MPI_SUCCESS;
}

int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count,
                     MPI_Datatype datatype, MPI_Op op) {
  const char *fn = "MPI_Reduce_local";
  nxm_op_t *o = nxm_op_get(op);
  if (!o) return nxm_err(NULL, MPI_ERR_OP, fn, "invalid op");
  nxm_dtype_t *t;
  size_t bytes;
  int cls = nxm_dtype_check(datatype, count, &t, &bytes);
  if (cls != MPI_SUCCESS) return nxm_err(NULL, cls, fn, "count %d", count);
  if (o->user_fn || t->contig) {
    cls = nxm_op_apply(o, inbuf, inoutbuf, (size_t)count, t);
  } else {
    /* Packed copies of both operands, reduced, unpacked back. */
    nxm_view_t a, b;
    if (nxm_view_make(inbuf, (size_t)count, t, 1, &a) != MPI_SUCCESS)
      return nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
    if (nxm_view_make(inoutbuf, (size_t)count, t, 1, &b) != MPI_SUCCESS) {
      nxm_view_free(&a);
      return nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
    }
    cls = nxm_op_apply(o, a.ptr, b.ptr, (size_t)count, t);
    if (cls == MPI_SUCCESS)
      nxm_unpack(b.ptr, bytes, (size_t)count, t, inoutbuf);
    nxm_view_free(&a);
    nxm_view_free(&b);
  }
  if (cls != MPI_SUCCESS)
    return nxm_err(NULL, cls, fn, "op not defined for %s", t->name);
  return MPI_SUCCESS;
}
