/* Result codes, their text, and per-communicator last-error strings. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

#define NEXAR__ERRORS(X)                                               \
  X(NEXAR_OK, "success")                                               \
  X(NEXAR_INPROGRESS, "operation in progress")                         \
  X(NEXAR_ERR_INVALID_ARG, "invalid argument")                         \
  X(NEXAR_ERR_INVALID_USAGE, "invalid usage")                          \
  X(NEXAR_ERR_NOMEM, "out of memory")                                  \
  X(NEXAR_ERR_TIMEOUT, "deadline passed")                              \
  X(NEXAR_ERR_PEER_FAILED, "a peer failed or is unreachable")          \
  X(NEXAR_ERR_REVOKED, "communicator revoked")                         \
  X(NEXAR_ERR_MISMATCH, "ranks called mismatched collectives")         \
  X(NEXAR_ERR_AUTH, "authentication failed")                           \
  X(NEXAR_ERR_PROTO, "protocol error")                                 \
  X(NEXAR_ERR_TRANSPORT, "transport error")                            \
  X(NEXAR_ERR_CLOSED, "object closed")                                 \
  X(NEXAR_ERR_UNSUPPORTED, "unsupported")                              \
  X(NEXAR_ERR_SYS, "operating-system error")                           \
  X(NEXAR_ERR_TRUNCATE, "message truncated")                           \
  X(NEXAR_ERR_DEVICE, "device adapter operation failed")               \
  X(NEXAR_ERR_RPC_UNKNOWN_FN, "no RPC handler for the function id")    \
  X(NEXAR_ERR_RPC_HANDLER, "RPC handler returned an error")            \
  X(NEXAR_ERR_RPC_BUSY, "RPC queue of the callee is full")             \
  X(NEXAR_ERR_ABORTED, "nexar_abort was called")                       \
  X(NEXAR_ERR_EXCLUDED, "this process was declared failed and fenced") \
  X(NEXAR_ERR_INTERNAL, "internal error")

const char *nexar_strerror(int code) {
#define STR(name, text) \
  if (code == name) return text;
  NEXAR__ERRORS(STR)
#undef STR
  return "unknown result code";
}

const char *nexar_err_name(int code) {
#define NAME(name, text) \
  if (code == name) return #name;
  NEXAR__ERRORS(NAME)
#undef NAME
  return "NEXAR_ERR_UNKNOWN";
}

int nexar_err_is_fatal(int code) {
  switch (code) {
    case NEXAR_OK:
    case NEXAR_INPROGRESS:
    case NEXAR_ERR_INVALID_ARG:
    case NEXAR_ERR_INVALID_USAGE:
    case NEXAR_ERR_UNSUPPORTED:
    case NEXAR_ERR_TRUNCATE:
    case NEXAR_ERR_RPC_UNKNOWN_FN:
    case NEXAR_ERR_RPC_HANDLER:
    case NEXAR_ERR_RPC_BUSY:
      return 0;
    default:
      return 1;
  }
}

const char *nexar_version(void) {
  return NEXAR_VERSION_STRING;
}

static _Thread_local char tl_init_error[NEXAR__ERRMSG_MAX];
static _Thread_local char tl_copy[NEXAR__ERRMSG_MAX];

void nexar__set_init_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tl_init_error, sizeof(tl_init_error), fmt, ap);
  va_end(ap);
  NEXAR__INFO(NEXAR__SUB_INIT, "%s", tl_init_error);
}

void nexar__comm_set_error(nexar_comm_t *comm, const char *fmt, ...) {
  char tmp[NEXAR__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&comm->err_mu);
  memcpy(comm->last_error, tmp, sizeof(tmp));
  pthread_mutex_unlock(&comm->err_mu);
  NEXAR__INFO(NEXAR__SUB_P2P, "%s", tmp);
}

const char *nexar_comm_last_error(const nexar_comm_t *comm) {
  if (!comm) {
    memcpy(tl_copy, tl_init_error, sizeof(tl_copy));
    return tl_copy;
  }
  nexar_comm_t *c = (nexar_comm_t *)comm;
  pthread_mutex_lock(&c->err_mu);
  memcpy(tl_copy, c->last_error, sizeof(tl_copy));
  pthread_mutex_unlock(&c->err_mu);
  return tl_copy;
}

const char *nexar_last_error(void) {
  return nexar_comm_last_error(NULL);
}
