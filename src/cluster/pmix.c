/*
 * PMIx (docs/launching.md): when a PMIx server started this process
 * (Open MPI's mpirun, srun --mpi=pmix), rank, world size, local rank and
 * local size come from it, and rank 0 shares the embedded seed's address
 * and a freshly generated cluster secret through its key-value store and a
 * fence. libpmix.so.2 is loaded at run time with the few functions used,
 * declared from the PMIx headers when the build found them: a nexar built
 * or run without PMIx works everywhere else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/launcher.h"
#include "cluster/cluster.h"

#ifndef NEXAR_HAVE_PMIX

int nexar__pmix_open(nexar__launch_t *l, char *err, size_t errlen) {
  (void)l;
  (void)err;
  (void)errlen;
  NEXAR__INFO(NEXAR__SUB_INIT,
              "launcher: PMIX_NAMESPACE is set but this nexar was built "
              "without the PMIx headers (libpmix-dev): PMIx not used");
  return 0;
}

int nexar__pmix_exchange(nexar__launch_t *l, int timeout_ms, char *err,
                         size_t errlen) {
  (void)l;
  (void)timeout_ms;
  snprintf(err, errlen, "PMIx support is not built");
  return NEXAR_ERR_UNSUPPORTED;
}

void nexar__pmix_close(nexar__launch_t *l) {
  (void)l;
}

#else

#include <dlfcn.h>
#include <gnutls/gnutls.h>
#include <pmix.h>

typedef struct pmix {
  void *dl;
  pmix_proc_t me;
  __typeof__(PMIx_Init) *init;
  __typeof__(PMIx_Finalize) *finalize;
  __typeof__(PMIx_Get) *get;
  __typeof__(PMIx_Put) *put;
  __typeof__(PMIx_Commit) *commit;
  __typeof__(PMIx_Fence) *fence;
  __typeof__(PMIx_Value_destruct) *value_destruct;
  __typeof__(PMIx_Error_string) *error_string;
} pmix_t;

static const char *pmix_err(const pmix_t *x, pmix_status_t st) {
  return x->error_string ? x->error_string(st) : "PMIx error";
}

static void value_free(const pmix_t *x, pmix_value_t *v) {
  if (!v) return;
  x->value_destruct(v);
  free(v);
}

/* An unsigned job or process value of |rank| as an int: 0, or -1. */
static int get_uint(const pmix_t *x, pmix_rank_t rank, const char *key,
                    int *out) {
  pmix_proc_t p = x->me;
  p.rank = rank;
  pmix_value_t *v = NULL;
  if (x->get(&p, key, NULL, 0, &v) != PMIX_SUCCESS || !v) return -1;
  int rc = 0;
  switch (v->type) {
    case PMIX_UINT32:
      *out = (int)v->data.uint32;
      break;
    case PMIX_UINT16:
      *out = v->data.uint16;
      break;
    case PMIX_INT:
      *out = v->data.integer;
      break;
    default:
      rc = -1;
  }
  value_free(x, v);
  return rc;
}

static void *sym(void *dl, const char *name, bool *ok) {
  void *f = dlsym(dl, name);
  if (!f) *ok = false;
  return f;
}

int nexar__pmix_open(nexar__launch_t *l, char *err, size_t errlen) {
  pmix_t *x = calloc(1, sizeof(*x));
  if (!x) return NEXAR_ERR_NOMEM;
  x->dl = dlopen("libpmix.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!x->dl) {
    NEXAR__INFO(NEXAR__SUB_INIT,
                "launcher: PMIX_NAMESPACE is set but libpmix.so.2 does not "
                "load (%s): PMIx not used",
                dlerror());
    free(x);
    return 0;
  }
  bool ok = true;
  *(void **)&x->init = sym(x->dl, "PMIx_Init", &ok);
  *(void **)&x->finalize = sym(x->dl, "PMIx_Finalize", &ok);
  *(void **)&x->get = sym(x->dl, "PMIx_Get", &ok);
  *(void **)&x->put = sym(x->dl, "PMIx_Put", &ok);
  *(void **)&x->commit = sym(x->dl, "PMIx_Commit", &ok);
  *(void **)&x->fence = sym(x->dl, "PMIx_Fence", &ok);
  *(void **)&x->value_destruct = sym(x->dl, "PMIx_Value_destruct", &ok);
  *(void **)&x->error_string = dlsym(x->dl, "PMIx_Error_string");
  if (!ok) {
    NEXAR__INFO(NEXAR__SUB_INIT,
                "launcher: libpmix.so.2 lacks a function nexar uses: PMIx "
                "not used");
    dlclose(x->dl);
    free(x);
    return 0;
  }
  pmix_status_t st = x->init(&x->me, NULL, 0);
  if (st != PMIX_SUCCESS) {
    /* PMIX_NAMESPACE without a server that answers: not under PMIx. */
    NEXAR__INFO(NEXAR__SUB_INIT,
                "launcher: PMIX_NAMESPACE is set but PMIx_Init failed (%s): "
                "PMIx not used",
                pmix_err(x, st));
    dlclose(x->dl);
    free(x);
    return 0;
  }
  l->pmix = x;
  l->rank = (int)x->me.rank;
  if (get_uint(x, PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, &l->size) < 0 ||
      l->size < 1 || l->rank < 0 || l->rank >= l->size) {
    snprintf(err, errlen,
             "PMIx (namespace %.64s): no usable job size for rank %d "
             "(PMIX_JOB_SIZE)",
             x->me.nspace, l->rank);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (get_uint(x, x->me.rank, PMIX_LOCAL_RANK, &l->local_rank) < 0)
    l->local_rank = -1;
  if (get_uint(x, PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, &l->local_size) < 0)
    l->local_size = 0;
  (void)errlen;
  return 1;
}

static void info_bool(pmix_info_t *i, const char *key) {
  memset(i, 0, sizeof(*i));
  snprintf(i->key, sizeof(i->key), "%s", key);
  i->value.type = PMIX_BOOL;
  i->value.data.flag = true;
}

static int put_str(pmix_t *x, const char *key, const char *s) {
  pmix_value_t v;
  memset(&v, 0, sizeof(v));
  v.type = PMIX_STRING;
  v.data.string = (char *)s;
  return x->put(PMIX_GLOBAL, key, &v) == PMIX_SUCCESS ? 0 : -1;
}

static int get_str(pmix_t *x, const char *key, char *out, size_t n) {
  pmix_proc_t p = x->me;
  p.rank = 0;
  pmix_value_t *v = NULL;
  pmix_status_t st = x->get(&p, key, NULL, 0, &v);
  int rc = st == PMIX_SUCCESS && v && v->type == PMIX_STRING &&
                   v->data.string && strlen(v->data.string) < n
               ? 0
               : -1;
  if (rc == 0) snprintf(out, n, "%s", v->data.string);
  if (v && v->type == PMIX_STRING && v->data.string)
    gnutls_memset(v->data.string, 0, strlen(v->data.string));
  value_free(x, v);
  return rc;
}

int nexar__pmix_exchange(nexar__launch_t *l, int timeout_ms, char *err,
                         size_t errlen) {
  pmix_t *x = l->pmix;
  int rc = 0;
  if (l->rank == 0 && (put_str(x, "nexar.seed", l->seed) < 0 ||
                       put_str(x, "nexar.secret", l->secret) < 0 ||
                       x->commit() != PMIX_SUCCESS)) {
    snprintf(err, errlen,
             "rank 0: cannot publish the seed's address through PMIx "
             "(namespace %.64s)",
             x->me.nspace);
    rc = NEXAR_ERR_SYS;
    goto done;
  }
  pmix_info_t info[2];
  info_bool(&info[0], PMIX_COLLECT_DATA);
  memset(&info[1], 0, sizeof(info[1]));
  snprintf(info[1].key, sizeof(info[1].key), "%s", PMIX_TIMEOUT);
  info[1].value.type = PMIX_INT;
  info[1].value.data.integer = (timeout_ms + 999) / 1000;
  pmix_status_t st = x->fence(NULL, 0, info, 2);
  if (st != PMIX_SUCCESS) {
    snprintf(err, errlen,
             "rank %d: the PMIx fence of namespace %.64s failed: %s "
             "(NEXAR_BOOTSTRAP_TIMEOUT_MS=%d)",
             l->rank, x->me.nspace, pmix_err(x, st), timeout_ms);
    rc = st == PMIX_ERR_TIMEOUT ? NEXAR_ERR_TIMEOUT : NEXAR_ERR_SYS;
    goto done;
  }
  if (l->rank != 0 &&
      (get_str(x, "nexar.seed", l->seed, sizeof(l->seed)) < 0 ||
       get_str(x, "nexar.secret", l->secret, sizeof(l->secret)) < 0)) {
    snprintf(err, errlen,
             "rank %d: rank 0 published no seed address through PMIx "
             "(namespace %.64s)",
             l->rank, x->me.nspace);
    rc = NEXAR_ERR_SYS;
  }
done:
  nexar__pmix_close(l);
  return rc;
}

void nexar__pmix_close(nexar__launch_t *l) {
  pmix_t *x = l->pmix;
  if (!x) return;
  x->finalize(NULL, 0);
  /* libpmix stays loaded: its progress thread and atexit handlers may
   * still refer to it. */
  free(x);
  l->pmix = NULL;
}

#endif /* NEXAR_HAVE_PMIX */
