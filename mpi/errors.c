/*
 * Errors: nexar result codes to MPI error classes, error handlers
 * (MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN, user handlers), MPI_Error_string
 * and MPI_Error_class, and the argument checks every call shares.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_int.h"

static nxm_errh_t g_fatal = {NXM_MAGIC_ERRH, 1, NXM_ERRH_FATAL, NULL};
static nxm_errh_t g_return = {NXM_MAGIC_ERRH, 1, NXM_ERRH_RETURN, NULL};

/* Text of the last error of this thread ("MPI_Send (rank 3): ..."). */
static _Thread_local char t_last[MPI_MAX_ERROR_STRING];

/* Error classes added by MPI_Add_error_class (above the predefined). */
#define USER_CLASS_BASE 100
#define USER_CLASS_MAX 64
static int g_nuser;
static char *g_user_text[USER_CLASS_MAX];

int nxm_class_of_nexar(int rc) {
  switch (rc) {
    case NEXAR_OK:
    case NEXAR_ERR_CANCELLED:
      return MPI_SUCCESS;
    case NEXAR_ERR_INVALID_ARG:
      return MPI_ERR_ARG;
    case NEXAR_ERR_INVALID_USAGE:
      return MPI_ERR_OTHER;
    case NEXAR_ERR_NOMEM:
      return MPI_ERR_NO_MEM;
    case NEXAR_ERR_TRUNCATE:
      return MPI_ERR_TRUNCATE;
    case NEXAR_ERR_PEER_FAILED:
    case NEXAR_ERR_EXCLUDED:
      return MPI_ERR_PROC_FAILED;
    case NEXAR_ERR_REVOKED:
      return MPI_ERR_REVOKED;
    case NEXAR_ERR_ABORTED:
      return MPI_ERR_PROC_ABORTED;
    case NEXAR_ERR_UNSUPPORTED:
      return MPI_ERR_UNSUPPORTED_OPERATION;
    case NEXAR_ERR_INTERNAL:
      return MPI_ERR_INTERN;
    default:
      return MPI_ERR_OTHER; /* timeout, mismatch, transport, closed... */
  }
}

nxm_errh_t *nxm_errh_get(MPI_Errhandler h) {
  if (h == MPI_ERRORS_ARE_FATAL) return &g_fatal;
  if (h == MPI_ERRORS_RETURN) return &g_return;
  return nxm_obj_is(h, NXM_MAGIC_ERRH) ? (nxm_errh_t *)h : NULL;
}

void nxm_errh_ref(nxm_errh_t *e) {
  atomic_fetch_add(&e->refs, 1);
}

void nxm_errh_unref(nxm_errh_t *e) {
  if (!e || e == &g_fatal || e == &g_return) return;
  if (atomic_fetch_sub(&e->refs, 1) == 1) {
    nxm_obj_close(e);
    free(e);
  }
}

static MPI_Errhandler errh_handle(nxm_errh_t *e) {
  if (e == &g_fatal) return MPI_ERRORS_ARE_FATAL;
  if (e == &g_return) return MPI_ERRORS_RETURN;
  return (MPI_Errhandler)e;
}

static int verr(nxm_comm_t *c, int cls, const char *fn, const char *fmt,
                va_list ap) {
  char text[MPI_MAX_ERROR_STRING / 2];
  vsnprintf(text, sizeof text, fmt, ap);
  int rank = nxm_g.world ? nxm_g.world_rank : -1;
  char where[64] = "";
  if (c && c != nxm_g.world)
    snprintf(where, sizeof where, " on %s (rank %d of %d)",
             c->name[0] ? c->name : "a communicator", c->rank, c->size);
  snprintf(t_last, sizeof t_last, "%s (rank %d%s): %s", fn, rank, where, text);
  if (!c) c = nxm_g.world;
  nxm_errh_t *e = c ? c->errh : &g_fatal;
  if (e->kind == NXM_ERRH_RETURN) return cls;
  if (e->kind == NXM_ERRH_USER && e->fn) {
    MPI_Comm h = nxm_comm_handle(c);
    int code = cls;
    e->fn(&h, &code);
    return cls;
  }
  fprintf(stderr, "nexar-mpi: %s\nnexar-mpi: MPI_ERRORS_ARE_FATAL: aborting\n",
          t_last);
  fflush(stderr);
  if (nxm_g.ctx) nexar_abort(nxm_g.ctx);
  _exit(cls > 0 && cls < 256 ? cls : 1);
}

int nxm_err(nxm_comm_t *c, int cls, const char *fn, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = verr(c, cls, fn, fmt, ap);
  va_end(ap);
  return r;
}

int nxm_err_nexar(nxm_comm_t *c, const char *fn, int rc) {
  const char *detail = c && c->nc ? nexar_comm_last_error(c->nc) : "";
  return nxm_err(c, nxm_class_of_nexar(rc), fn, "%s%s%s", nexar_err_name(rc),
                 *detail ? ": " : "", detail);
}

int nxm_unsupported(const char *fn) {
  return nxm_err(NULL, MPI_ERR_UNSUPPORTED_OPERATION, fn,
                 "not supported by nexar's MPI layer (docs/mpi.md)");
}

int nxm_check_rank(nxm_comm_t *c, const char *fn, int rank, int any) {
  if (rank == MPI_PROC_NULL || (any && rank == MPI_ANY_SOURCE) ||
      (rank >= 0 && rank < c->size))
    return MPI_SUCCESS;
  return nxm_err(c, MPI_ERR_RANK, fn, "rank %d is not in 0..%d", rank,
                 c->size - 1);
}

int nxm_check_tag(nxm_comm_t *c, const char *fn, int tag, int any) {
  if ((any && tag == MPI_ANY_TAG) || (tag >= 0 && tag <= NEXAR_TAG_MAX))
    return MPI_SUCCESS;
  return nxm_err(c, MPI_ERR_TAG, fn, "tag %d is not in 0..MPI_TAG_UB", tag);
}

int nxm_check_root(nxm_comm_t *c, const char *fn, int root) {
  if (root >= 0 && root < c->size) return MPI_SUCCESS;
  return nxm_err(c, MPI_ERR_ROOT, fn, "root %d is not in 0..%d", root,
                 c->size - 1);
}

/* ---- MPI functions */

static const char *class_text(int cls) {
  static const char *const text[] = {
      [MPI_SUCCESS] = "no error",
      [MPI_ERR_BUFFER] = "invalid buffer pointer",
      [MPI_ERR_COUNT] = "invalid count argument",
      [MPI_ERR_TYPE] = "invalid datatype",
      [MPI_ERR_TAG] = "invalid tag",
      [MPI_ERR_COMM] = "invalid communicator",
      [MPI_ERR_RANK] = "invalid rank",
      [MPI_ERR_REQUEST] = "invalid request",
      [MPI_ERR_ROOT] = "invalid root",
      [MPI_ERR_GROUP] = "invalid group",
      [MPI_ERR_OP] = "invalid operation",
      [MPI_ERR_TOPOLOGY] = "invalid topology",
      [MPI_ERR_DIMS] = "invalid dimension argument",
      [MPI_ERR_ARG] = "invalid argument",
      [MPI_ERR_UNKNOWN] = "unknown error",
      [MPI_ERR_TRUNCATE] = "message truncated",
      [MPI_ERR_OTHER] = "other error",
      [MPI_ERR_INTERN] = "internal error",
      [MPI_ERR_PENDING] = "pending request",
      [MPI_ERR_IN_STATUS] = "error code is in status",
      [MPI_ERR_KEYVAL] = "invalid attribute key",
      [MPI_ERR_NO_MEM] = "out of memory",
      [MPI_ERR_INFO_KEY] = "invalid info key",
      [MPI_ERR_INFO_VALUE] = "invalid info value",
      [MPI_ERR_INFO_NOKEY] = "info key not defined",
      [MPI_ERR_INFO] = "invalid info object",
      [MPI_ERR_NAME] = "invalid name",
      [MPI_ERR_PROC_ABORTED] = "a process aborted",
      [MPI_ERR_UNSUPPORTED_OPERATION] = "unsupported operation",
      [MPI_ERR_WIN] = "invalid window",
      [MPI_ERR_ERRHANDLER] = "invalid error handler",
      [MPI_ERR_PROC_FAILED] = "a process failed",
      [MPI_ERR_PROC_FAILED_PENDING] = "a process failed (request pending)",
      [MPI_ERR_REVOKED] = "communicator revoked",
  };
  if (cls >= 0 && cls < (int)(sizeof text / sizeof text[0]) && text[cls])
    return text[cls];
  return NULL;
}

int MPI_Error_string(int errorcode, char *string, int *resultlen) {
  if (!string || !resultlen)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Error_string", "NULL argument");
  const char *t = class_text(errorcode);
  nxm_lock();
  if (!t && errorcode >= USER_CLASS_BASE &&
      errorcode < USER_CLASS_BASE + g_nuser)
    t = g_user_text[errorcode - USER_CLASS_BASE];
  int n = snprintf(string, MPI_MAX_ERROR_STRING, "%s",
                   t ? t : "unknown error code");
  nxm_unlock();
  if (!t && errorcode != MPI_SUCCESS && errorcode >= MPI_T_ERR_CANNOT_INIT &&
      errorcode <= MPI_T_ERR_PVAR_NO_ATOMIC)
    n = snprintf(string, MPI_MAX_ERROR_STRING, "MPI_T error %d", errorcode);
  *resultlen = n < MPI_MAX_ERROR_STRING ? n : MPI_MAX_ERROR_STRING - 1;
  return MPI_SUCCESS;
}

int MPI_Error_class(int errorcode, int *errorclass) {
  if (!errorclass)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Error_class", "NULL argument");
  if (class_text(errorcode) ||
      (errorcode >= USER_CLASS_BASE && errorcode < USER_CLASS_BASE + g_nuser) ||
      (errorcode >= MPI_T_ERR_CANNOT_INIT &&
       errorcode <= MPI_T_ERR_PVAR_NO_ATOMIC)) {
    *errorclass = errorcode;
    return MPI_SUCCESS;
  }
  return nxm_err(NULL, MPI_ERR_ARG, "MPI_Error_class",
                 "%d is not an error code", errorcode);
}

int MPI_Add_error_class(int *errorclass) {
  if (!errorclass)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Add_error_class", "NULL");
  nxm_lock();
  int ok = g_nuser < USER_CLASS_MAX;
  if (ok) *errorclass = USER_CLASS_BASE + g_nuser++;
  nxm_unlock();
  if (!ok)
    return nxm_err(NULL, MPI_ERR_OTHER, "MPI_Add_error_class",
                   "more than %d error classes", USER_CLASS_MAX);
  return MPI_SUCCESS;
}

/* Codes are classes in this layer: a new code is a new class. */
int MPI_Add_error_code(int errorclass, int *errorcode) {
  (void)errorclass;
  return MPI_Add_error_class(errorcode);
}

int MPI_Add_error_string(int errorcode, const char *string) {
  if (!string || errorcode < USER_CLASS_BASE ||
      errorcode >= USER_CLASS_BASE + g_nuser)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Add_error_string",
                   "error code %d was not added", errorcode);
  char *dup = strndup(string, MPI_MAX_ERROR_STRING - 1);
  if (!dup)
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Add_error_string",
                   "out of memory");
  nxm_lock();
  free(g_user_text[errorcode - USER_CLASS_BASE]);
  g_user_text[errorcode - USER_CLASS_BASE] = dup;
  nxm_unlock();
  return MPI_SUCCESS;
}

int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function *fn,
                               MPI_Errhandler *errhandler) {
  if (!fn || !errhandler)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Comm_create_errhandler", "NULL");
  nxm_errh_t *e = calloc(1, sizeof *e);
  if (!e)
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Comm_create_errhandler",
                   "out of memory");
  if (nxm_obj_open(e, NXM_MAGIC_ERRH) != MPI_SUCCESS) {
    free(e);
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Comm_create_errhandler",
                   "out of memory");
  }
  atomic_init(&e->refs, 1);
  e->kind = NXM_ERRH_USER;
  e->fn = fn;
  *errhandler = (MPI_Errhandler)e;
  return MPI_SUCCESS;
}

int MPI_Errhandler_create(MPI_Comm_errhandler_function *fn,
                          MPI_Errhandler *errhandler) {
  return MPI_Comm_create_errhandler(fn, errhandler);
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  nxm_comm_t *c = nxm_comm_get(comm);
  if (!c)
    return nxm_err(NULL, MPI_ERR_COMM, "MPI_Comm_set_errhandler",
                   "invalid communicator");
  nxm_errh_t *e = nxm_errh_get(errhandler);
  if (!e)
    return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_set_errhandler",
                   "invalid error handler");
  nxm_errh_ref(e);
  nxm_lock();
  nxm_errh_t *old = c->errh;
  c->errh = e;
  nxm_unlock();
  nxm_errh_unref(old);
  return MPI_SUCCESS;
}

int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler) {
  return MPI_Comm_set_errhandler(comm, errhandler);
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler) {
  nxm_comm_t *c = nxm_comm_get(comm);
  if (!c)
    return nxm_err(NULL, MPI_ERR_COMM, "MPI_Comm_get_errhandler",
                   "invalid communicator");
  if (!errhandler)
    return nxm_err(c, MPI_ERR_ARG, "MPI_Comm_get_errhandler", "NULL");
  nxm_errh_ref(c->errh);
  *errhandler = errh_handle(c->errh);
  return MPI_SUCCESS;
}

int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler *errhandler) {
  return MPI_Comm_get_errhandler(comm, errhandler);
}

int MPI_Errhandler_free(MPI_Errhandler *errhandler) {
  nxm_errh_t *e = errhandler ? nxm_errh_get(*errhandler) : NULL;
  if (!e)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Errhandler_free",
                   "invalid error handler");
  nxm_errh_unref(e);
  *errhandler = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}

int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
  nxm_comm_t *c = nxm_comm_get(comm);
  if (!c)
    return nxm_err(NULL, MPI_ERR_COMM, "MPI_Comm_call_errhandler",
                   "invalid communicator");
  nxm_err(c, errorcode, "MPI_Comm_call_errhandler", "error code %d", errorcode);
  return MPI_SUCCESS;
}
