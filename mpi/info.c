/*
 * MPI_Info objects (ordered key/value lists; the layer reads no hints) and
 * the conversions of handles to and from Fortran integers (MPI_*_c2f /
 * _f2c): predefined handles convert to their constant, others to an index
 * into a table of the handles converted so far.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

typedef struct info_item {
  char *key, *value;
  struct info_item *next;
} info_item_t;

typedef struct nxm_info {
  uint32_t magic; /* NXM_MAGIC_INFO */
  int n;
  info_item_t *items;
} nxm_info_t;

static nxm_info_t g_env = {NXM_MAGIC_INFO, 0, NULL};

static nxm_info_t *info_get(MPI_Info h) {
  if (h == MPI_INFO_ENV) return &g_env;
  return nxm_obj_is(h, NXM_MAGIC_INFO) ? (nxm_info_t *)h : NULL;
}

#define GET_INFO(var, h, fn)     \
  nxm_info_t *var = info_get(h); \
  if (!var) return nxm_err(NULL, MPI_ERR_INFO, fn, "invalid info")

static int check_key(const char *key, const char *fn) {
  if (!key || !*key || strlen(key) >= MPI_MAX_INFO_KEY)
    return nxm_err(NULL, MPI_ERR_INFO_KEY, fn, "invalid key");
  return MPI_SUCCESS;
}

static info_item_t *find(nxm_info_t *i, const char *key) {
  for (info_item_t *it = i->items; it; it = it->next)
    if (strcmp(it->key, key) == 0) return it;
  return NULL;
}

int MPI_Info_create(MPI_Info *info) {
  if (!info) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Info_create", "NULL");
  nxm_info_t *i = calloc(1, sizeof *i);
  if (!i)
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Info_create", "out of memory");
  if (nxm_obj_open(i, NXM_MAGIC_INFO) != MPI_SUCCESS) {
    free(i);
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Info_create", "out of memory");
  }
  *info = (MPI_Info)i;
  return MPI_SUCCESS;
}

int MPI_Info_set(MPI_Info info, const char *key, const char *value) {
  GET_INFO(i, info, "MPI_Info_set");
  int cls = check_key(key, "MPI_Info_set");
  if (cls != MPI_SUCCESS) return cls;
  if (!value || strlen(value) >= MPI_MAX_INFO_VAL || i == &g_env)
    return nxm_err(NULL, MPI_ERR_INFO_VALUE, "MPI_Info_set", "bad value");
  char *v = strdup(value);
  if (!v) return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Info_set", "out of memory");
  info_item_t *it = find(i, key);
  if (it) {
    free(it->value);
    it->value = v;
    return MPI_SUCCESS;
  }
  it = calloc(1, sizeof *it);
  char *k = strdup(key);
  if (!it || !k) {
    free(it);
    free(k);
    free(v);
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Info_set", "out of memory");
  }
  it->key = k;
  it->value = v;
  info_item_t **p = &i->items;
  while (*p) p = &(*p)->next;
  *p = it;
  i->n++;
  return MPI_SUCCESS;
}

int MPI_Info_delete(MPI_Info info, const char *key) {
  GET_INFO(i, info, "MPI_Info_delete");
  int cls = check_key(key, "MPI_Info_delete");
  if (cls != MPI_SUCCESS) return cls;
  for (info_item_t **p = &i->items; *p; p = &(*p)->next)
    if (strcmp((*p)->key, key) == 0) {
      info_item_t *it = *p;
      *p = it->next;
      free(it->key);
      free(it->value);
      free(it);
      i->n--;
      return MPI_SUCCESS;
    }
  return nxm_err(NULL, MPI_ERR_INFO_NOKEY, "MPI_Info_delete", "no key %s", key);
}

int MPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value,
                 int *flag) {
  GET_INFO(i, info, "MPI_Info_get");
  int cls = check_key(key, "MPI_Info_get");
  if (cls != MPI_SUCCESS) return cls;
  if (!flag || valuelen < 0 || (!value && valuelen > 0))
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Info_get", "bad arguments");
  info_item_t *it = find(i, key);
  *flag = it != NULL;
  if (it && value) snprintf(value, (size_t)valuelen + 1, "%s", it->value);
  return MPI_SUCCESS;
}

int MPI_Info_get_valuelen(MPI_Info info, const char *key, int *valuelen,
                          int *flag) {
  GET_INFO(i, info, "MPI_Info_get_valuelen");
  int cls = check_key(key, "MPI_Info_get_valuelen");
  if (cls != MPI_SUCCESS) return cls;
  if (!valuelen || !flag)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Info_get_valuelen", "NULL");
  info_item_t *it = find(i, key);
  *flag = it != NULL;
  if (it) *valuelen = (int)strlen(it->value);
  return MPI_SUCCESS;
}

int MPI_Info_get_nkeys(MPI_Info info, int *nkeys) {
  GET_INFO(i, info, "MPI_Info_get_nkeys");
  if (!nkeys) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Info_get_nkeys", "NULL");
  *nkeys = i->n;
  return MPI_SUCCESS;
}

int MPI_Info_get_nthkey(MPI_Info info, int n, char *key) {
  GET_INFO(i, info, "MPI_Info_get_nthkey");
  if (!key || n < 0 || n >= i->n)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Info_get_nthkey", "n %d", n);
  info_item_t *it = i->items;
  for (int k = 0; k < n; k++) it = it->next;
  snprintf(key, MPI_MAX_INFO_KEY, "%s", it->key);
  return MPI_SUCCESS;
}

int MPI_Info_dup(MPI_Info info, MPI_Info *newinfo) {
  GET_INFO(i, info, "MPI_Info_dup");
  int cls = MPI_Info_create(newinfo);
  for (info_item_t *it = i->items; cls == MPI_SUCCESS && it; it = it->next)
    cls = MPI_Info_set(*newinfo, it->key, it->value);
  return cls;
}

int MPI_Info_free(MPI_Info *info) {
  if (!info) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Info_free", "NULL");
  GET_INFO(i, *info, "MPI_Info_free");
  if (i == &g_env)
    return nxm_err(NULL, MPI_ERR_INFO, "MPI_Info_free", "MPI_INFO_ENV");
  while (i->items) {
    info_item_t *it = i->items;
    i->items = it->next;
    free(it->key);
    free(it->value);
    free(it);
  }
  nxm_obj_close(i);
  free(i);
  *info = MPI_INFO_NULL;
  return MPI_SUCCESS;
}

/* ---- Fortran handle conversion */

#define F_MAX 65536
static void *g_f[F_MAX];
static int g_nf;

static MPI_Fint to_f(void *h) {
  if (NXM_IS_PREDEF(h)) return (MPI_Fint)(uintptr_t)h;
  nxm_lock();
  int idx = -1;
  for (int i = 0; i < g_nf; i++)
    if (g_f[i] == h) idx = i;
  if (idx < 0 && g_nf < F_MAX) {
    idx = g_nf++;
    g_f[idx] = h;
  }
  nxm_unlock();
  return idx < 0 ? -1 : (MPI_Fint)(NXM_PREDEF_MAX + (unsigned)idx);
}

static void *from_f(MPI_Fint f) {
  if (f >= 0 && (unsigned)f < NXM_PREDEF_MAX) return (void *)(uintptr_t)f;
  int idx = f - (int)NXM_PREDEF_MAX;
  nxm_lock();
  void *h = idx >= 0 && idx < g_nf ? g_f[idx] : NULL;
  nxm_unlock();
  return h;
}

#define CONVERT(T, name, nullh)    \
  MPI_Fint MPI_##name##_c2f(T h) { \
    return to_f((void *)h);        \
  }                                \
  T MPI_##name##_f2c(MPI_Fint f) { \
    void *h = from_f(f);           \
    return h ? (T)h : nullh;       \
  }

CONVERT(MPI_Comm, Comm, MPI_COMM_NULL)
CONVERT(MPI_Datatype, Type, MPI_DATATYPE_NULL)
CONVERT(MPI_Group, Group, MPI_GROUP_NULL)
CONVERT(MPI_Request, Request, MPI_REQUEST_NULL)
CONVERT(MPI_Op, Op, MPI_OP_NULL)
CONVERT(MPI_Info, Info, MPI_INFO_NULL)
CONVERT(MPI_Errhandler, Errhandler, MPI_ERRHANDLER_NULL)
CONVERT(MPI_Win, Win, MPI_WIN_NULL)
CONVERT(MPI_File, File, MPI_FILE_NULL)
CONVERT(MPI_Message, Message, MPI_MESSAGE_NULL)

int MPI_Status_c2f(const MPI_Status *c_status, MPI_Fint *f_status) {
  if (!c_status || !f_status)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Status_c2f", "NULL");
  memcpy(f_status, c_status, sizeof *c_status);
  return MPI_SUCCESS;
}

int MPI_Status_f2c(const MPI_Fint *f_status, MPI_Status *c_status) {
  if (!c_status || !f_status)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Status_f2c", "NULL");
  memcpy(c_status, f_status, sizeof *c_status);
  return MPI_SUCCESS;
}
