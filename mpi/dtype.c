/*
 * Datatypes: the predefined C types (a static table indexed by handle) and
 * the derived-type constructors, each flattened at creation into byte
 * blocks (mpi_int.h). Packing is in dtype_pack.c.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "mpi_int.h"

#define PRE_BASE 0x200u
#define PRE_COUNT 0xc0u

static nxm_dtype_t g_pre[PRE_COUNT];
static nxm_block_t g_pre_blocks[PRE_COUNT][2];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

struct fi {
  float a;
  int b;
};
struct di {
  double a;
  int b;
};
struct li {
  long a;
  int b;
};
struct ii {
  int a;
  int b;
};
struct si {
  short a;
  int b;
};
struct ldi {
  long double a;
  int b;
};

static void pre(MPI_Datatype h, const char *name, int tc, size_t size,
                int ndt) {
  nxm_dtype_t *t = &g_pre[(uintptr_t)h - PRE_BASE];
  t->magic = NXM_MAGIC_DTYPE;
  atomic_init(&t->refs, 1);
  t->kind = NXM_DT_PREDEF;
  t->committed = 1;
  t->ndt = ndt;
  t->tc = tc;
  t->basic = t;
  t->nbasic = 1;
  t->size = t->extent = t->true_extent = (MPI_Aint)size;
  /* Natural alignment (x86-64 and aarch64 ABIs): the size, the half of it
   * for a complex number, at most 16. */
  int complex =
      tc == NXM_TC_CFLOAT || tc == NXM_TC_CDOUBLE || tc == NXM_TC_CLDOUBLE;
  t->align = (MPI_Aint)(complex ? size / 2 : size);
  if (t->align > 16 || (t->align & (t->align - 1))) t->align = 16;
  if (t->align < 1) t->align = 1;
  t->contig = 1;
  t->nblocks = size ? 1 : 0;
  t->blocks = g_pre_blocks[(uintptr_t)h - PRE_BASE];
  t->blocks[0] = (nxm_block_t){0, (MPI_Aint)size};
  t->combiner = MPI_COMBINER_NAMED;
  snprintf(t->name, sizeof t->name, "%s", name);
}

/* A (value, int) pair type for MPI_MINLOC / MPI_MAXLOC. */
static void pair(MPI_Datatype h, const char *name, int tc, size_t a_size,
                 size_t b_off, size_t extent) {
  pre(h, name, tc, a_size + sizeof(int), NXM_DT_NONE);
  nxm_dtype_t *t = &g_pre[(uintptr_t)h - PRE_BASE];
  t->extent = (MPI_Aint)extent;
  t->true_extent = (MPI_Aint)(b_off + sizeof(int));
  t->align = (MPI_Aint)(a_size > sizeof(int) ? a_size : sizeof(int));
  if (b_off == a_size) {
    t->blocks[0].len = (MPI_Aint)(a_size + sizeof(int));
  } else {
    t->blocks[0].len = (MPI_Aint)a_size;
    t->blocks[1] = (nxm_block_t){(MPI_Aint)b_off, sizeof(int)};
    t->nblocks = 2;
  }
  t->contig = t->nblocks == 1 && t->extent == t->size;
}

static void init_table(void) {
  pre(MPI_AINT, "MPI_AINT", NXM_TC_INT64, 8, NEXAR_INT64);
  pre(MPI_COUNT, "MPI_COUNT", NXM_TC_INT64, 8, NEXAR_INT64);
  pre(MPI_OFFSET, "MPI_OFFSET", NXM_TC_INT64, 8, NEXAR_INT64);
  pre(MPI_PACKED, "MPI_PACKED", NXM_TC_BYTE, 1, NEXAR_UINT8);
  pre(MPI_SHORT, "MPI_SHORT", NXM_TC_INT16, sizeof(short), NXM_DT_NONE);
  pre(MPI_INT, "MPI_INT", NXM_TC_INT32, sizeof(int), NEXAR_INT32);
  pre(MPI_LONG, "MPI_LONG", NXM_TC_INT64, sizeof(long), NEXAR_INT64);
  pre(MPI_LONG_LONG, "MPI_LONG_LONG", NXM_TC_INT64, 8, NEXAR_INT64);
  pre(MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", NXM_TC_UINT16, 2, NXM_DT_NONE);
  pre(MPI_UNSIGNED, "MPI_UNSIGNED", NXM_TC_UINT32, 4, NEXAR_UINT32);
  pre(MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", NXM_TC_UINT64, 8, NEXAR_UINT64);
  pre(MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", NXM_TC_UINT64, 8,
      NEXAR_UINT64);
  pre(MPI_FLOAT, "MPI_FLOAT", NXM_TC_FLOAT, sizeof(float), NEXAR_FLOAT32);
  pre(MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", NXM_TC_CFLOAT, 8,
      NXM_DT_NONE);
  pre(MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX", NXM_TC_CFLOAT, 8,
      NXM_DT_NONE);
  pre(MPI_DOUBLE, "MPI_DOUBLE", NXM_TC_DOUBLE, sizeof(double), NEXAR_FLOAT64);
  pre(MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", NXM_TC_CDOUBLE, 16,
      NXM_DT_NONE);
  pre(MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX", NXM_TC_CDOUBLE, 16,
      NXM_DT_NONE);
  pre(MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", NXM_TC_LDOUBLE, sizeof(long double),
      NXM_DT_NONE);
  pre(MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX", NXM_TC_CLDOUBLE,
      2 * sizeof(long double), NXM_DT_NONE);
  pre(MPI_CXX_LONG_DOUBLE_COMPLEX, "MPI_CXX_LONG_DOUBLE_COMPLEX",
      NXM_TC_CLDOUBLE, 2 * sizeof(long double), NXM_DT_NONE);
  pair(MPI_FLOAT_INT, "MPI_FLOAT_INT", NXM_TC_FLOAT_INT, sizeof(float),
       offsetof(struct fi, b), sizeof(struct fi));
  pair(MPI_DOUBLE_INT, "MPI_DOUBLE_INT", NXM_TC_DOUBLE_INT, sizeof(double),
       offsetof(struct di, b), sizeof(struct di));
  pair(MPI_LONG_INT, "MPI_LONG_INT", NXM_TC_LONG_INT, sizeof(long),
       offsetof(struct li, b), sizeof(struct li));
  pair(MPI_2INT, "MPI_2INT", NXM_TC_2INT, sizeof(int), offsetof(struct ii, b),
       sizeof(struct ii));
  pair(MPI_SHORT_INT, "MPI_SHORT_INT", NXM_TC_SHORT_INT, sizeof(short),
       offsetof(struct si, b), sizeof(struct si));
  pair(MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT", NXM_TC_LDOUBLE_INT,
       sizeof(long double), offsetof(struct ldi, b), sizeof(struct ldi));
  pre(MPI_C_BOOL, "MPI_C_BOOL", NXM_TC_BOOL, sizeof(_Bool), NXM_DT_NONE);
  pre(MPI_CXX_BOOL, "MPI_CXX_BOOL", NXM_TC_BOOL, 1, NXM_DT_NONE);
  pre(MPI_WCHAR, "MPI_WCHAR", NXM_TC_INT32, sizeof(wchar_t), NEXAR_INT32);
  pre(MPI_INT8_T, "MPI_INT8_T", NXM_TC_INT8, 1, NEXAR_INT8);
  pre(MPI_UINT8_T, "MPI_UINT8_T", NXM_TC_UINT8, 1, NEXAR_UINT8);
  /* OSU's default type: MPI_CHAR reduced with MPI_SUM, as int8. */
  pre(MPI_CHAR, "MPI_CHAR", NXM_TC_INT8, 1, NEXAR_INT8);
  pre(MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", NXM_TC_INT8, 1, NEXAR_INT8);
  pre(MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", NXM_TC_UINT8, 1, NEXAR_UINT8);
  pre(MPI_BYTE, "MPI_BYTE", NXM_TC_BYTE, 1, NEXAR_UINT8);
  pre(MPI_INT16_T, "MPI_INT16_T", NXM_TC_INT16, 2, NXM_DT_NONE);
  pre(MPI_UINT16_T, "MPI_UINT16_T", NXM_TC_UINT16, 2, NXM_DT_NONE);
  pre(MPI_INT32_T, "MPI_INT32_T", NXM_TC_INT32, 4, NEXAR_INT32);
  pre(MPI_UINT32_T, "MPI_UINT32_T", NXM_TC_UINT32, 4, NEXAR_UINT32);
  pre(MPI_INT64_T, "MPI_INT64_T", NXM_TC_INT64, 8, NEXAR_INT64);
  pre(MPI_UINT64_T, "MPI_UINT64_T", NXM_TC_UINT64, 8, NEXAR_UINT64);
  pre(MPI_C_FLOAT16, "MPI_C_FLOAT16", NXM_TC_FLOAT16, 2, NEXAR_FLOAT16);
  pre(MPI_LB, "MPI_LB", NXM_TC_BYTE, 0, NXM_DT_NONE);
  pre(MPI_UB, "MPI_UB", NXM_TC_BYTE, 0, NXM_DT_NONE);
}

nxm_dtype_t *nxm_dtype_get(MPI_Datatype h) {
  uintptr_t v = (uintptr_t)h;
  if (v >= PRE_BASE && v < PRE_BASE + PRE_COUNT) {
    pthread_once(&g_once, init_table);
    nxm_dtype_t *t = &g_pre[v - PRE_BASE];
    return t->magic == NXM_MAGIC_DTYPE ? t : NULL;
  }
  return nxm_obj_is(h, NXM_MAGIC_DTYPE) ? (nxm_dtype_t *)h : NULL;
}

MPI_Datatype nxm_dtype_handle(const nxm_dtype_t *t) {
  if (t->kind == NXM_DT_PREDEF)
    return (MPI_Datatype)(uintptr_t)(PRE_BASE + (uintptr_t)(t - g_pre));
  return (MPI_Datatype)t;
}

void nxm_dtype_ref(nxm_dtype_t *t) {
  if (t->kind != NXM_DT_PREDEF) atomic_fetch_add(&t->refs, 1);
}

void nxm_dtype_unref(nxm_dtype_t *t) {
  if (!t || t->kind == NXM_DT_PREDEF) return;
  if (atomic_fetch_sub(&t->refs, 1) != 1) return;
  nxm_dtype_attr_delete_all(t);
  for (int i = 0; i < t->ntypes; i++)
    nxm_dtype_unref(nxm_dtype_get(t->types[i]));
  nxm_obj_close(t);
  free(t->blocks);
  free(t->ints);
  free(t->addrs);
  free(t->types);
  free(t);
}

int nxm_dtype_check(MPI_Datatype h, int count, nxm_dtype_t **out,
                    size_t *bytes) {
  nxm_dtype_t *t = nxm_dtype_get(h);
  if (!t || !t->committed) return MPI_ERR_TYPE;
  if (count < 0) return MPI_ERR_COUNT;
  if (t->size > 0 && (size_t)count > SIZE_MAX / 2 / (size_t)t->size)
    return MPI_ERR_COUNT;
  *out = t;
  *bytes = (size_t)count * (size_t)t->size;
  return MPI_SUCCESS;
}

/* ---- Construction. A derived type is described by |n| entries: entry i
 * is |bl[i]| elements of |types[i]| starting |disp[i]| bytes from the
 * element's start. */

typedef struct build {
  nxm_block_t *b;
  size_t n, cap;
  MPI_Aint lb, ub, tlb, tub;
  int any;
} build_t;

static int add_block(build_t *s, MPI_Aint disp, MPI_Aint len) {
  if (len == 0) return MPI_SUCCESS;
  if (s->n && s->b[s->n - 1].disp + s->b[s->n - 1].len == disp) {
    s->b[s->n - 1].len += len;
    return MPI_SUCCESS;
  }
  if (s->n == s->cap) {
    if (s->cap >= (size_t)NXM_MAX_ITEMS) return MPI_ERR_COUNT;
    size_t cap = s->cap ? 2 * s->cap : 8;
    nxm_block_t *nb = realloc(s->b, cap * sizeof *nb);
    if (!nb) return MPI_ERR_NO_MEM;
    s->b = nb;
    s->cap = cap;
  }
  s->b[s->n++] = (nxm_block_t){disp, len};
  return MPI_SUCCESS;
}

static int build_entries(int n, const int *bl, const MPI_Aint *disp,
                         nxm_dtype_t *const *types, nxm_dtype_t *t) {
  build_t s = {0};
  int rc = MPI_SUCCESS;
  MPI_Aint size = 0;
  const nxm_dtype_t *basic = NULL;
  int mixed = 0;
  t->align = 1;
  for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
    nxm_dtype_t *o = types[i];
    if (bl[i] == 0) continue;
    if (o->align > t->align) t->align = o->align;
    MPI_Aint lo = disp[i] + o->lb, hi = lo + (MPI_Aint)bl[i] * o->extent;
    if (o->extent < 0) {
      MPI_Aint x = lo;
      lo = hi;
      hi = x;
    }
    if (!s.any || lo < s.lb) s.lb = lo;
    if (!s.any || hi > s.ub) s.ub = hi;
    s.any = 1;
    size += (MPI_Aint)bl[i] * o->size;
    if (o->basic && (!basic || basic == o->basic))
      basic = o->basic;
    else
      mixed = 1;
    for (int j = 0; j < bl[i] && rc == MPI_SUCCESS; j++) {
      MPI_Aint base = disp[i] + (MPI_Aint)j * o->extent;
      if (o->contig && j == 0 && o->size == o->extent) {
        rc = add_block(&s, base, (MPI_Aint)bl[i] * o->size);
        break;
      }
      for (size_t k = 0; k < o->nblocks && rc == MPI_SUCCESS; k++)
        rc = add_block(&s, base + o->blocks[k].disp, o->blocks[k].len);
    }
  }
  if (rc != MPI_SUCCESS) {
    free(s.b);
    return rc;
  }
  t->blocks = s.b;
  t->nblocks = s.n;
  t->size = size;
  t->lb = s.any ? s.lb : 0;
  t->extent = s.any ? s.ub - s.lb : 0;
  MPI_Aint tlb = 0, tub = 0;
  for (size_t k = 0; k < s.n; k++) {
    if (k == 0 || s.b[k].disp < tlb) tlb = s.b[k].disp;
    if (k == 0 || s.b[k].disp + s.b[k].len > tub)
      tub = s.b[k].disp + s.b[k].len;
  }
  t->true_lb = tlb;
  t->true_extent = tub - tlb;
  t->basic = mixed ? NULL : basic;
  t->nbasic = t->basic && t->basic->size ? size / t->basic->size : 0;
  return MPI_SUCCESS;
}

static void set_contig(nxm_dtype_t *t) {
  t->contig =
      (t->size == 0 && t->extent == 0) ||
      (t->nblocks == 1 && t->blocks[0].disp == 0 &&
       t->blocks[0].len == t->size && t->lb == 0 && t->extent == t->size);
}

/* Makes a derived type from entries and records its envelope. */
static int make(const char *fn, int combiner, int n, const int *bl,
                const MPI_Aint *disp, nxm_dtype_t *const *types, int nints,
                const int *ints, int naddrs, const MPI_Aint *addrs, int ntypes,
                MPI_Datatype *newtype) {
  if (!newtype) return nxm_err(NULL, MPI_ERR_ARG, fn, "NULL newtype");
  nxm_dtype_t *t = calloc(1, sizeof *t);
  int rc = MPI_ERR_NO_MEM;
  if (!t || nxm_obj_open(t, NXM_MAGIC_DTYPE) != MPI_SUCCESS) goto fail;
  atomic_init(&t->refs, 1);
  t->kind = NXM_DT_DERIVED;
  t->ndt = NXM_DT_NONE;
  t->tc = -1;
  t->combiner = combiner;
  t->ints = malloc(((size_t)nints + 1) * sizeof *t->ints);
  t->addrs = malloc(((size_t)naddrs + 1) * sizeof *t->addrs);
  t->types = malloc(((size_t)ntypes + 1) * sizeof *t->types);
  if (!t->ints || !t->addrs || !t->types) goto fail;
  if (nints) memcpy(t->ints, ints, (size_t)nints * sizeof *ints);
  if (naddrs) memcpy(t->addrs, addrs, (size_t)naddrs * sizeof *addrs);
  rc = build_entries(n, bl, disp, types, t);
  if (rc != MPI_SUCCESS) goto fail;
  t->nints = nints;
  t->naddrs = naddrs;
  for (int i = 0; i < ntypes; i++) {
    nxm_dtype_ref(types[i]);
    t->types[i] = nxm_dtype_handle(types[i]);
  }
  t->ntypes = ntypes;
  set_contig(t);
  *newtype = (MPI_Datatype)t;
  return MPI_SUCCESS;
fail:
  if (t) {
    nxm_obj_close(t);
    free(t->ints);
    free(t->addrs);
    free(t->types);
    free(t);
  }
  return nxm_err(NULL, rc, fn, "cannot build the type");
}

#define GET_TYPE(var, h, fn)           \
  nxm_dtype_t *var = nxm_dtype_get(h); \
  if (!var) return nxm_err(NULL, MPI_ERR_TYPE, fn, "invalid datatype")

/* Checks a constructor's count and the arrays it needs. */
static int check_count(const char *fn, int count, int ok_arrays) {
  if (count < 0 || count > NXM_MAX_ITEMS)
    return nxm_err(NULL, MPI_ERR_COUNT, fn, "count %d", count);
  if (count > 0 && !ok_arrays)
    return nxm_err(NULL, MPI_ERR_ARG, fn, "NULL array");
  return MPI_SUCCESS;
}

/* Same old type |n| times, blocklengths |bl| (NULL: all |blk|), byte
 * displacements |disp|. */
static int make_same(const char *fn, int combiner, int n, const int *bl,
                     int blk, const MPI_Aint *disp, nxm_dtype_t *o,
                     const int *ints, int nints, const MPI_Aint *addrs,
                     int naddrs, MPI_Datatype *newtype) {
  int *b = malloc(((size_t)n + 1) * sizeof *b);
  nxm_dtype_t **ty = malloc(((size_t)n + 1) * sizeof *ty);
  int rc;
  if (!b || !ty) {
    rc = nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
    goto out;
  }
  ty[0] = o; /* the envelope's one type, also when n is 0 */
  for (int i = 0; i < n; i++) {
    b[i] = bl ? bl[i] : blk;
    ty[i] = o;
    if (b[i] < 0) {
      rc = nxm_err(NULL, MPI_ERR_ARG, fn, "blocklength %d", b[i]);
      goto out;
    }
  }
  rc = make(fn, combiner, n, b, disp, ty, nints, ints, naddrs, addrs, 1,
            newtype);
out:
  free(b);
  free(ty);
  return rc;
}

int MPI_Type_contiguous(int count, MPI_Datatype oldtype,
                        MPI_Datatype *newtype) {
  const char *fn = "MPI_Type_contiguous";
  GET_TYPE(o, oldtype, fn);
  int rc = check_count(fn, count, 1);
  if (rc != MPI_SUCCESS) return rc;
  MPI_Aint d = 0;
  int ints[1] = {count};
  return make_same(fn, MPI_COMBINER_CONTIGUOUS, 1, NULL, count, &d, o, ints, 1,
                   NULL, 0, newtype);
}

/* vector (stride in elements) and hvector (stride in bytes). */
static int vector(const char *fn, int combiner, int count, int blocklength,
                  MPI_Aint stride_bytes, MPI_Datatype oldtype, const int *ints,
                  int nints, const MPI_Aint *addrs, int naddrs,
                  MPI_Datatype *newtype) {
  GET_TYPE(o, oldtype, fn);
  int rc = check_count(fn, count, 1);
  if (rc != MPI_SUCCESS) return rc;
  MPI_Aint *d = malloc(((size_t)count + 1) * sizeof *d);
  if (!d) return nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
  for (int i = 0; i < count; i++) d[i] = (MPI_Aint)i * stride_bytes;
  rc = make_same(fn, combiner, count, NULL, blocklength, d, o, ints, nints,
                 addrs, naddrs, newtype);
  free(d);
  return rc;
}

int MPI_Type_vector(int count, int blocklength, int stride,
                    MPI_Datatype oldtype, MPI_Datatype *newtype) {
  nxm_dtype_t *o = nxm_dtype_get(oldtype);
  int ints[3] = {count, blocklength, stride};
  return vector("MPI_Type_vector", MPI_COMBINER_VECTOR, count, blocklength,
                o ? (MPI_Aint)stride * o->extent : 0, oldtype, ints, 3, NULL, 0,
                newtype);
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride,
                            MPI_Datatype oldtype, MPI_Datatype *newtype) {
  int ints[2] = {count, blocklength};
  return vector("MPI_Type_create_hvector", MPI_COMBINER_HVECTOR, count,
                blocklength, stride, oldtype, ints, 2, &stride, 1, newtype);
}

int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride,
                     MPI_Datatype oldtype, MPI_Datatype *newtype) {
  return MPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

/* indexed family: |idisp| in elements or |adisp| in bytes; |bl| NULL:
 * every block |blk| long. */
static int indexed(const char *fn, int combiner, int count, const int *bl,
                   int blk, const int *idisp, const MPI_Aint *adisp,
                   MPI_Datatype oldtype, MPI_Datatype *newtype) {
  GET_TYPE(o, oldtype, fn);
  int rc = check_count(fn, count, idisp || adisp);
  if (rc != MPI_SUCCESS) return rc;
  if (count > 0 && combiner != MPI_COMBINER_INDEXED_BLOCK &&
      combiner != MPI_COMBINER_HINDEXED_BLOCK && !bl)
    return nxm_err(NULL, MPI_ERR_ARG, fn, "NULL blocklengths");
  MPI_Aint *d = malloc(((size_t)count + 1) * sizeof *d);
  int *ints = malloc((2 * (size_t)count + 2) * sizeof *ints);
  if (!d || !ints) {
    free(d);
    free(ints);
    return nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
  }
  int ni = 0;
  ints[ni++] = count;
  if (bl)
    for (int i = 0; i < count; i++) ints[ni++] = bl[i];
  else
    ints[ni++] = blk;
  for (int i = 0; i < count; i++) {
    d[i] = idisp ? (MPI_Aint)idisp[i] * o->extent : adisp[i];
    if (idisp) ints[ni++] = idisp[i];
  }
  rc = make_same(fn, combiner, count, bl, blk, d, o, ints, ni,
                 adisp ? adisp : NULL, adisp ? count : 0, newtype);
  free(d);
  free(ints);
  return rc;
}

int MPI_Type_indexed(int count, const int array_of_blocklengths[],
                     const int array_of_displacements[], MPI_Datatype oldtype,
                     MPI_Datatype *newtype) {
  return indexed("MPI_Type_indexed", MPI_COMBINER_INDEXED, count,
                 array_of_blocklengths, 0, array_of_displacements, NULL,
                 oldtype, newtype);
}

int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                             const MPI_Aint array_of_displacements[],
                             MPI_Datatype oldtype, MPI_Datatype *newtype) {
  return indexed("MPI_Type_create_hindexed", MPI_COMBINER_HINDEXED, count,
                 array_of_blocklengths, 0, NULL, array_of_displacements,
                 oldtype, newtype);
}

int MPI_Type_hindexed(int count, int array_of_blocklengths[],
                      MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                      MPI_Datatype *newtype) {
  return MPI_Type_create_hindexed(count, array_of_blocklengths,
                                  array_of_displacements, oldtype, newtype);
}

int MPI_Type_create_indexed_block(int count, int blocklength,
                                  const int array_of_displacements[],
                                  MPI_Datatype oldtype, MPI_Datatype *newtype) {
  return indexed("MPI_Type_create_indexed_block", MPI_COMBINER_INDEXED_BLOCK,
                 count, NULL, blocklength, array_of_displacements, NULL,
                 oldtype, newtype);
}

int MPI_Type_create_hindexed_block(int count, int blocklength,
                                   const MPI_Aint array_of_displacements[],
                                   MPI_Datatype oldtype,
                                   MPI_Datatype *newtype) {
  return indexed("MPI_Type_create_hindexed_block", MPI_COMBINER_HINDEXED_BLOCK,
                 count, NULL, blocklength, NULL, array_of_displacements,
                 oldtype, newtype);
}

int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
                           const MPI_Aint array_of_displacements[],
                           const MPI_Datatype array_of_types[],
                           MPI_Datatype *newtype) {
  const char *fn = "MPI_Type_create_struct";
  int rc = check_count(
      fn, count,
      array_of_blocklengths && array_of_displacements && array_of_types);
  if (rc != MPI_SUCCESS) return rc;
  nxm_dtype_t **ty = malloc(((size_t)count + 1) * sizeof *ty);
  int *ints = malloc(((size_t)count + 1) * sizeof *ints);
  if (!ty || !ints) {
    rc = nxm_err(NULL, MPI_ERR_NO_MEM, fn, "out of memory");
    goto out;
  }
  ints[0] = count;
  for (int i = 0; i < count; i++) {
    ty[i] = nxm_dtype_get(array_of_types[i]);
    if (!ty[i] || array_of_blocklengths[i] < 0) {
      rc = nxm_err(NULL, ty[i] ? MPI_ERR_ARG : MPI_ERR_TYPE, fn, "entry %d", i);
      goto out;
    }
    ints[i + 1] = array_of_blocklengths[i];
  }
  rc = make(fn, MPI_COMBINER_STRUCT, count, array_of_blocklengths,
            array_of_displacements, ty, count + 1, ints, count,
            array_of_displacements, count, newtype);
  if (rc == MPI_SUCCESS) {
    /* The standard's epsilon (MPI 3.1, 4.1.6): the extent grows to the
     * next multiple of the strictest alignment, so that an array of the
     * struct type strides as the C array of the struct does. */
    nxm_dtype_t *t = nxm_dtype_get(*newtype);
    MPI_Aint r = t->extent % t->align;
    if (r) t->extent += t->align - r;
    set_contig(t);
  }
out:
  free(ty);
  free(ints);
  return rc;
}

int MPI_Type_struct(int count, int array_of_blocklengths[],
                    MPI_Aint array_of_displacements[],
                    MPI_Datatype array_of_types[], MPI_Datatype *newtype) {
  return MPI_Type_create_struct(count, array_of_blocklengths,
                                array_of_displacements, array_of_types,
                                newtype);
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype *newtype) {
  const char *fn = "MPI_Type_create_resized";
  GET_TYPE(o, oldtype, fn);
  int one = 1;
  MPI_Aint zero = 0, addrs[2] = {lb, extent};
  int rc = make(fn, MPI_COMBINER_RESIZED, 1, &one, &zero, &o, 0, NULL, 2, addrs,
                1, newtype);
  if (rc != MPI_SUCCESS) return rc;
  nxm_dtype_t *t = nxm_dtype_get(*newtype);
  t->lb = lb;
  t->extent = extent;
  set_contig(t);
  return MPI_SUCCESS;
}

int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype) {
  const char *fn = "MPI_Type_dup";
  GET_TYPE(o, oldtype, fn);
  int one = 1;
  MPI_Aint zero = 0;
  int rc = make(fn, MPI_COMBINER_DUP, 1, &one, &zero, &o, 0, NULL, 0, NULL, 1,
                newtype);
  if (rc != MPI_SUCCESS) return rc;
  nxm_dtype_t *t = nxm_dtype_get(*newtype);
  t->lb = o->lb;
  t->extent = o->extent;
  t->committed = o->committed;
  t->ndt = o->ndt;
  t->tc = o->tc;
  set_contig(t);
  return MPI_SUCCESS;
}

/* Row-major (C) or column-major subarray of |oldtype|, built as nested
 * hvectors resized to the full array. */
int MPI_Type_create_subarray(int ndims, const int sizes[], const int subsizes[],
                             const int starts[], int order,
                             MPI_Datatype oldtype, MPI_Datatype *newtype) {
  const char *fn = "MPI_Type_create_subarray";
  GET_TYPE(o, oldtype, fn);
  if (ndims <= 0 || ndims > 32 || !sizes || !subsizes || !starts || !newtype ||
      (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN))
    return nxm_err(NULL, MPI_ERR_ARG, fn, "bad arguments");
  for (int i = 0; i < ndims; i++)
    if (sizes[i] <= 0 || subsizes[i] <= 0 || starts[i] < 0 ||
        starts[i] + subsizes[i] > sizes[i])
      return nxm_err(NULL, MPI_ERR_ARG, fn, "dimension %d", i);
  MPI_Datatype cur = oldtype, next;
  MPI_Aint stride = o->extent, disp = 0;
  int rc = MPI_SUCCESS;
  for (int k = 0; k < ndims && rc == MPI_SUCCESS; k++) {
    int d = order == MPI_ORDER_C ? ndims - 1 - k : k;
    rc = MPI_Type_create_hvector(subsizes[d], 1, stride, cur, &next);
    disp += (MPI_Aint)starts[d] * stride;
    stride *= sizes[d];
    if (cur != oldtype) MPI_Type_free(&cur);
    cur = next;
  }
  if (rc != MPI_SUCCESS) return rc;
  int bl = 1;
  nxm_dtype_t *inner = nxm_dtype_get(cur);
  rc = make(fn, MPI_COMBINER_SUBARRAY, 1, &bl, &disp, &inner, 0, NULL, 0, NULL,
            0, newtype);
  MPI_Type_free(&cur);
  if (rc != MPI_SUCCESS) return rc;
  nxm_dtype_t *t = nxm_dtype_get(*newtype);
  t->lb = 0;
  t->extent = stride;
  set_contig(t);
  return MPI_SUCCESS;
}

int MPI_Type_commit(MPI_Datatype *datatype) {
  if (!datatype) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Type_commit", "NULL");
  GET_TYPE(t, *datatype, "MPI_Type_commit");
  t->committed = 1;
  return MPI_SUCCESS;
}

int MPI_Type_free(MPI_Datatype *datatype) {
  if (!datatype) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Type_free", "NULL");
  GET_TYPE(t, *datatype, "MPI_Type_free");
  if (t->kind == NXM_DT_PREDEF)
    return nxm_err(NULL, MPI_ERR_TYPE, "MPI_Type_free", "%s is predefined",
                   t->name);
  nxm_dtype_unref(t);
  *datatype = MPI_DATATYPE_NULL;
  return MPI_SUCCESS;
}

int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count *size) {
  GET_TYPE(t, datatype, "MPI_Type_size");
  if (!size) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Type_size", "NULL");
  *size = t->size;
  return MPI_SUCCESS;
}

int MPI_Type_size(MPI_Datatype datatype, int *size) {
  MPI_Count s = 0;
  int rc = MPI_Type_size_x(datatype, &s);
  if (rc == MPI_SUCCESS) *size = s > 0x7fffffff ? MPI_UNDEFINED : (int)s;
  return rc;
}

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent) {
  GET_TYPE(t, datatype, "MPI_Type_get_extent");
  if (!lb || !extent)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Type_get_extent", "NULL");
  *lb = t->lb;
  *extent = t->extent;
  return MPI_SUCCESS;
}

int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count *lb,
                          MPI_Count *extent) {
  MPI_Aint l = 0, e = 0;
  int rc = MPI_Type_get_extent(datatype, &l, &e);
  if (rc == MPI_SUCCESS) *lb = l, *extent = e;
  return rc;
}

int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb,
                             MPI_Aint *true_extent) {
  GET_TYPE(t, datatype, "MPI_Type_get_true_extent");
  if (!true_lb || !true_extent)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Type_get_true_extent", "NULL");
  *true_lb = t->true_lb;
  *true_extent = t->true_extent;
  return MPI_SUCCESS;
}

int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count *true_lb,
                               MPI_Count *true_extent) {
  MPI_Aint l = 0, e = 0;
  int rc = MPI_Type_get_true_extent(datatype, &l, &e);
  if (rc == MPI_SUCCESS) *true_lb = l, *true_extent = e;
  return rc;
}

int MPI_Type_extent(MPI_Datatype datatype, MPI_Aint *extent) {
  MPI_Aint lb;
  return MPI_Type_get_extent(datatype, &lb, extent);
}

int MPI_Type_lb(MPI_Datatype datatype, MPI_Aint *displacement) {
  MPI_Aint ext;
  return MPI_Type_get_extent(datatype, displacement, &ext);
}

int MPI_Type_ub(MPI_Datatype datatype, MPI_Aint *displacement) {
  MPI_Aint lb = 0, ext = 0;
  int rc = MPI_Type_get_extent(datatype, &lb, &ext);
  if (rc == MPI_SUCCESS) *displacement = lb + ext;
  return rc;
}

int MPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen) {
  GET_TYPE(t, datatype, "MPI_Type_get_name");
  if (!type_name || !resultlen)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Type_get_name", "NULL");
  *resultlen = snprintf(type_name, MPI_MAX_OBJECT_NAME, "%s", t->name);
  return MPI_SUCCESS;
}

int MPI_Type_set_name(MPI_Datatype datatype, const char *type_name) {
  GET_TYPE(t, datatype, "MPI_Type_set_name");
  if (!type_name || t->kind == NXM_DT_PREDEF)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Type_set_name", "bad arguments");
  snprintf(t->name, sizeof t->name, "%s", type_name);
  return MPI_SUCCESS;
}

int MPI_Type_match_size(int typeclass, int size, MPI_Datatype *datatype) {
  MPI_Datatype r = MPI_DATATYPE_NULL;
  if (typeclass == MPI_TYPECLASS_INTEGER)
    r = size == 1   ? MPI_INT8_T
        : size == 2 ? MPI_INT16_T
        : size == 4 ? MPI_INT32_T
        : size == 8 ? MPI_INT64_T
                    : r;
  else if (typeclass == MPI_TYPECLASS_REAL)
    r = size == 4    ? MPI_FLOAT
        : size == 8  ? MPI_DOUBLE
        : size == 16 ? MPI_LONG_DOUBLE
                     : r;
  else if (typeclass == MPI_TYPECLASS_COMPLEX)
    r = size == 8 ? MPI_C_FLOAT_COMPLEX : size == 16 ? MPI_C_DOUBLE_COMPLEX : r;
  if (!datatype || r == MPI_DATATYPE_NULL)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Type_match_size",
                   "no type of class %d and size %d", typeclass, size);
  *datatype = r;
  return MPI_SUCCESS;
}
