/* Result codes and their text. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"

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
  X(NEXAR_ERR_CANCELLED, "the request was cancelled")                  \
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
    case NEXAR_ERR_CANCELLED:
      return 0;
    default:
      return 1;
  }
}

const char *nexar_version(void) {
  return NEXAR_VERSION_STRING;
}
