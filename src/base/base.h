/*
 * The base every part stands on: the clock, address helpers, result-code
 * checks, logging (log.h) and the NEXAR_* parameter table (param.h). It
 * knows the wire's types and nothing above them.
 */
#ifndef NEXAR_BASE_H
#define NEXAR_BASE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/log.h"
#include "base/param.h"
#include "nexar.h"
#include "wire/wire.h"

#define NEXAR__ERRMSG_MAX 512

/* Single-exit cleanup (NCCL style): log file:line on the error path only. */
#define NEXAR__CHECK(call)                                              \
  do {                                                                  \
    int nexar__rc = (call);                                             \
    if (nexar__rc < 0) {                                                \
      NEXAR__LOG(NEXAR__LOG_INFO, NEXAR__SUB_INIT, "%s:%d: %s -> %s",   \
                 __FILE__, __LINE__, #call, nexar_err_name(nexar__rc)); \
      return nexar__rc;                                                 \
    }                                                                   \
  } while (0)
#define NEXAR__CHECK_GOTO(call, rc, label)                            \
  do {                                                                \
    (rc) = (call);                                                    \
    if ((rc) < 0) {                                                   \
      NEXAR__LOG(NEXAR__LOG_INFO, NEXAR__SUB_INIT, "%s:%d: %s -> %s", \
                 __FILE__, __LINE__, #call, nexar_err_name(rc));      \
      goto label;                                                     \
    }                                                                 \
  } while (0)

/* ---------------- clock and small helpers ---------------- */
uint64_t nexar__now(void); /* CLOCK_MONOTONIC in ns */
/* |n| zeroed bytes from malloc (NULL when out of memory). Unlike glibc's
 * calloc, which skips the per-thread cache, this takes small blocks from
 * it: the per-message objects of p2p use it (about 300 instructions less
 * per allocation, measured with callgrind). */
void *nexar__zalloc(size_t n);
/* |s| as "host", "host:port", "[ipv6]" or "[ipv6]:port" (port
 * |default_port| when none): a numeric IPv4 or IPv6 address, localhost
 * (127.0.0.1), or a host name resolved with getaddrinfo to its first
 * address of |family| (AF_UNSPEC: any family). Returns 0, or
 * NEXAR_ERR_INVALID_ARG with why it failed in |why| (syntax, or the
 * resolver's reason). Blocks while the resolver works. */
int nexar__resolve_addr(const char *s, int default_port, int family,
                        struct sockaddr_storage *ss, socklen_t *len, char *why,
                        size_t whylen);
/* nexar__resolve_addr with any family and no reason. */
int nexar__parse_addr(const char *s, int default_port,
                      struct sockaddr_storage *ss, socklen_t *len);
void nexar__addr_str(const struct sockaddr *sa, char *out, size_t n);
/* Whether |a| and |b| are the same IPv4/IPv6 address and port. */
bool nexar__addr_equal(const struct sockaddr_storage *a,
                       const struct sockaddr_storage *b);
void nexar__addr_to_wire(const struct sockaddr *sa, nexar__waddr_t *w);
int nexar__wire_to_addr(const nexar__waddr_t *w, struct sockaddr_storage *ss,
                        socklen_t *len);
int nexar__read_secret(const char *secret, const char *file, uint8_t key[32],
                       char *err, size_t errlen);

#endif /* NEXAR_BASE_H */
