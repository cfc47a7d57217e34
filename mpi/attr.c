/*
 * Attribute caching on communicators and datatypes (keyvals, set / get /
 * delete with the copy and delete callbacks), the predefined attributes of
 * MPI_COMM_WORLD (MPI_TAG_UB...), and MPI_Info objects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

/* Keyvals: user keyvals are numbered from KEY_BASE, one table for
 * communicators and datatypes (their callbacks differ only in the handle
 * type of their first argument). */
#define KEY_BASE 100
#define KEY_MAX 1024

typedef struct keyval {
  int used;
  int is_type;
  void *copy_fn; /* MPI_Comm_copy_attr_function* or the type one; 0 / 1:
                    the NULL_COPY / DUP predefined callbacks */
  void *delete_fn;
  void *extra_state;
} keyval_t;

static keyval_t g_keys[KEY_MAX];

static int key_alloc(int is_type, void *copy_fn, void *delete_fn, void *extra,
                     int *out, const char *fn) {
  if (!out) return nxm_err(NULL, MPI_ERR_ARG, fn, "NULL keyval");
  nxm_lock();
  int k = -1;
  for (int i = 0; i < KEY_MAX; i++)
    if (!g_keys[i].used) {
      g_keys[i] = (keyval_t){1, is_type, copy_fn, delete_fn, extra};
      k = i;
      break;
    }
  nxm_unlock();
  if (k < 0) return nxm_err(NULL, MPI_ERR_OTHER, fn, "out of keyvals");
  *out = KEY_BASE + k;
  return MPI_SUCCESS;
}

static keyval_t *key_get(int keyval) {
  if (keyval < KEY_BASE || keyval >= KEY_BASE + KEY_MAX) return NULL;
  keyval_t *k = &g_keys[keyval - KEY_BASE];
  return k->used ? k : NULL;
}

static int key_free(int *keyval, const char *fn) {
  if (!keyval || !key_get(*keyval))
    return nxm_err(NULL, MPI_ERR_KEYVAL, fn, "invalid keyval");
  nxm_lock();
  g_keys[*keyval - KEY_BASE].used = 0;
  nxm_unlock();
  *keyval = MPI_KEYVAL_INVALID;
  return MPI_SUCCESS;
}

/* Calls the delete callback of |a| for the object |h|. */
static int call_delete(nxm_attr_t *a, void *h) {
  keyval_t *k = key_get(a->keyval);
  if (!k || (uintptr_t)k->delete_fn <= 1) return MPI_SUCCESS;
  if (k->is_type)
    return ((MPI_Type_delete_attr_function *)k->delete_fn)(
        (MPI_Datatype)h, a->keyval, a->value, k->extra_state);
  return ((MPI_Comm_delete_attr_function *)k->delete_fn)(
      (MPI_Comm)h, a->keyval, a->value, k->extra_state);
}

static int attr_set(nxm_attr_t **list, void *h, int keyval, void *value) {
  for (nxm_attr_t *a = *list; a; a = a->next)
    if (a->keyval == keyval) {
      int rc = call_delete(a, h);
      if (rc != MPI_SUCCESS) return rc;
      a->value = value;
      return MPI_SUCCESS;
    }
  nxm_attr_t *a = malloc(sizeof *a);
  if (!a) return MPI_ERR_NO_MEM;
  *a = (nxm_attr_t){keyval, value, *list};
  *list = a;
  return MPI_SUCCESS;
}

static int attr_delete(nxm_attr_t **list, void *h, int keyval) {
  for (nxm_attr_t **p = list; *p; p = &(*p)->next)
    if ((*p)->keyval == keyval) {
      nxm_attr_t *a = *p;
      int rc = call_delete(a, h);
      if (rc != MPI_SUCCESS) return rc;
      *p = a->next;
      free(a);
      return MPI_SUCCESS;
    }
  return MPI_ERR_KEYVAL;
}

static void delete_all(nxm_attr_t **list, void *h) {
  while (*list) {
    nxm_attr_t *a = *list;
    call_delete(a, h);
    *list = a->next;
    free(a);
  }
}

void nxm_attr_delete_all(nxm_comm_t *c) {
  delete_all(&c->attrs, nxm_comm_handle(c));
}

void nxm_dtype_attr_delete_all(nxm_dtype_t *t) {
  delete_all(&t->attrs, nxm_dtype_handle(t));
}

int nxm_attr_copy_all(nxm_comm_t *from, nxm_comm_t *to) {
  for (nxm_attr_t *a = from->attrs; a; a = a->next) {
    keyval_t *k = key_get(a->keyval);
    if (!k || (uintptr_t)k->copy_fn == 0) continue;
    void *out = a->value;
    int flag = 1;
    if ((uintptr_t)k->copy_fn != 1) {
      flag = 0;
      int rc = ((MPI_Comm_copy_attr_function *)k->copy_fn)(
          nxm_comm_handle(from), a->keyval, k->extra_state, a->value, &out,
          &flag);
      if (rc != MPI_SUCCESS) return rc;
    }
    if (flag && attr_set(&to->attrs, nxm_comm_handle(to), a->keyval, out))
      return MPI_ERR_NO_MEM;
  }
  return MPI_SUCCESS;
}

/* ---- Communicator attributes */

static int g_tag_ub = NEXAR_TAG_MAX;
static int g_host = MPI_PROC_NULL;
static int g_io = MPI_ANY_SOURCE;
static int g_wtime_global = 0;
static int g_universe;
static int g_lastcode = MPI_ERR_LASTCODE;

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy_fn,
                           MPI_Comm_delete_attr_function *delete_fn,
                           int *comm_keyval, void *extra_state) {
  return key_alloc(0, (void *)copy_fn, (void *)delete_fn, extra_state,
                   comm_keyval, "MPI_Comm_create_keyval");
}

int MPI_Comm_free_keyval(int *comm_keyval) {
  return key_free(comm_keyval, "MPI_Comm_free_keyval");
}

int MPI_Keyval_create(MPI_Copy_function *copy_fn,
                      MPI_Delete_function *delete_fn, int *keyval,
                      void *extra_state) {
  return key_alloc(0, (void *)copy_fn, (void *)delete_fn, extra_state, keyval,
                   "MPI_Keyval_create");
}

int MPI_Keyval_free(int *keyval) {
  return key_free(keyval, "MPI_Keyval_free");
}

int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val) {
  nxm_comm_t *c = nxm_comm_get(comm);
  if (!c) return nxm_err(NULL, MPI_ERR_COMM, "MPI_Comm_set_attr", "invalid");
  keyval_t *k = key_get(comm_keyval);
  if (!k || k->is_type)
    return nxm_err(c, MPI_ERR_KEYVAL, "MPI_Comm_set_attr", "keyval %d",
                   comm_keyval);
  nxm_lock();
  int rc = attr_set(&c->attrs, comm, comm_keyval, attribute_val);
  nxm_unlock();
  return rc == MPI_SUCCESS ? rc
                           : nxm_err(c, rc, "MPI_Comm_set_attr", "cannot set");
}

int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val,
                      int *flag) {
  nxm_comm_t *c = nxm_comm_get(comm);
  if (!c) return nxm_err(NULL, MPI_ERR_COMM, "MPI_Comm_get_attr", "invalid");
  if (!attribute_val || !flag)
    return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_get_attr", "NULL");
  int *pre = NULL;
  g_universe = nxm_g.world_size;
  switch (comm_keyval) {
    case MPI_TAG_UB:
      pre = &g_tag_ub;
      break;
    case MPI_HOST:
      pre = &g_host;
      break;
    case MPI_IO:
      pre = &g_io;
      break;
    case MPI_WTIME_IS_GLOBAL:
      pre = &g_wtime_global;
      break;
    case MPI_UNIVERSE_SIZE:
      pre = &g_universe;
      break;
    case MPI_LASTUSEDCODE:
      pre = &g_lastcode;
      break;
    case MPI_APPNUM:
      *flag = 0;
      return MPI_SUCCESS;
    default:
      break;
  }
  if (pre) {
    void *p = pre;
    memcpy(attribute_val, &p, sizeof p);
    *flag = 1;
    return MPI_SUCCESS;
  }
  keyval_t *k = key_get(comm_keyval);
  if (!k || k->is_type)
    return nxm_err(c, MPI_ERR_KEYVAL, "MPI_Comm_get_attr", "keyval %d",
                   comm_keyval);
  *flag = 0;
  nxm_lock();
  for (nxm_attr_t *a = c->attrs; a; a = a->next)
    if (a->keyval == comm_keyval) {
      memcpy(attribute_val, &a->value, sizeof a->value);
      *flag = 1;
    }
  nxm_unlock();
  return MPI_SUCCESS;
}

int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval) {
  nxm_comm_t *c = nxm_comm_get(comm);
  if (!c) return nxm_err(NULL, MPI_ERR_COMM, "MPI_Comm_delete_attr", "invalid");
  nxm_lock();
  int rc = attr_delete(&c->attrs, comm, comm_keyval);
  nxm_unlock();
  return rc == MPI_SUCCESS
             ? rc
             : nxm_err(c, rc, "MPI_Comm_delete_attr", "keyval %d", comm_keyval);
}

int MPI_Attr_put(MPI_Comm comm, int keyval, void *attribute_val) {
  return MPI_Comm_set_attr(comm, keyval, attribute_val);
}

int MPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag) {
  return MPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}

int MPI_Attr_delete(MPI_Comm comm, int keyval) {
  return MPI_Comm_delete_attr(comm, keyval);
}

/* ---- Datatype attributes */

int MPI_Type_create_keyval(MPI_Type_copy_attr_function *copy_fn,
                           MPI_Type_delete_attr_function *delete_fn,
                           int *type_keyval, void *extra_state) {
  return key_alloc(1, (void *)copy_fn, (void *)delete_fn, extra_state,
                   type_keyval, "MPI_Type_create_keyval");
}

int MPI_Type_free_keyval(int *type_keyval) {
  return key_free(type_keyval, "MPI_Type_free_keyval");
}

int MPI_Type_set_attr(MPI_Datatype datatype, int type_keyval,
                      void *attribute_val) {
  nxm_dtype_t *t = nxm_dtype_get(datatype);
  keyval_t *k = key_get(type_keyval);
  if (!t) return nxm_err(NULL, MPI_ERR_TYPE, "MPI_Type_set_attr", "invalid");
  if (!k || !k->is_type || t->kind == NXM_DT_PREDEF)
    return nxm_err(NULL, MPI_ERR_KEYVAL, "MPI_Type_set_attr", "keyval %d",
                   type_keyval);
  nxm_lock();
  int rc = attr_set(&t->attrs, datatype, type_keyval, attribute_val);
  nxm_unlock();
  return rc == MPI_SUCCESS
             ? rc
             : nxm_err(NULL, rc, "MPI_Type_set_attr", "cannot set");
}

int MPI_Type_get_attr(MPI_Datatype datatype, int type_keyval,
                      void *attribute_val, int *flag) {
  nxm_dtype_t *t = nxm_dtype_get(datatype);
  if (!t) return nxm_err(NULL, MPI_ERR_TYPE, "MPI_Type_get_attr", "invalid");
  if (!attribute_val || !flag || !key_get(type_keyval))
    return nxm_err(NULL, MPI_ERR_KEYVAL, "MPI_Type_get_attr", "keyval %d",
                   type_keyval);
  *flag = 0;
  nxm_lock();
  for (nxm_attr_t *a = t->attrs; a; a = a->next)
    if (a->keyval == type_keyval) {
      memcpy(attribute_val, &a->value, sizeof a->value);
      *flag = 1;
    }
  nxm_unlock();
  return MPI_SUCCESS;
}

int MPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval) {
  nxm_dtype_t *t = nxm_dtype_get(datatype);
  if (!t) return nxm_err(NULL, MPI_ERR_TYPE, "MPI_Type_delete_attr", "invalid");
  nxm_lock();
  int rc = attr_delete(&t->attrs, datatype, type_keyval);
  nxm_unlock();
  return rc == MPI_SUCCESS
             ? rc
             : nxm_err(NULL, rc, "MPI_Type_delete_attr", "no such attribute");
}
