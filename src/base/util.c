/* Clock, address parsing and formatting, and reading the cluster secret. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

uint64_t nexar__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Called through a volatile pointer: compilers turn malloc + memset(0)
 * back into calloc, which would undo the point of nexar__zalloc. */
static void *(*volatile zero_bytes)(void *, int, size_t) = memset;

void *nexar__zalloc(size_t n) {
  void *p = malloc(n);
  if (p) zero_bytes(p, 0, n);
  return p;
}

/* |host| (no port) as an address of |family| (AF_UNSPEC: any), port 0:
 * a numeric IPv4 or IPv6 address as it is (whatever |family|), localhost as
 * 127.0.0.1, any other name through getaddrinfo (the first address it
 * gives; the resolver's own timeouts bound the wait). Returns 0, or
 * NEXAR_ERR_INVALID_ARG with the resolver's reason in |why|. */
static int resolve_host(const char *host, int family,
                        struct sockaddr_storage *ss, socklen_t *len, char *why,
                        size_t whylen) {
  struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
  if (!strcmp(host, "localhost")) host = "127.0.0.1";
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    *len = sizeof(*a4);
    return 0;
  }
  if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    *len = sizeof(*a6);
    return 0;
  }
  if (!host[0]) {
    snprintf(why, whylen, "no host");
    return NEXAR_ERR_INVALID_ARG;
  }
  struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_DGRAM};
  struct addrinfo *res = NULL;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0 || !res || res->ai_addrlen > sizeof(*ss)) {
    snprintf(why, whylen, "%s",
             rc == EAI_SYSTEM ? strerror(errno)
             : rc             ? gai_strerror(rc)
                              : "no address");
    if (res) freeaddrinfo(res);
    return NEXAR_ERR_INVALID_ARG;
  }
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = (socklen_t)res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

int nexar__resolve_addr(const char *s, int default_port, int family,
                        struct sockaddr_storage *ss, socklen_t *len, char *why,
                        size_t whylen) {
  char host[128];
  int port = default_port;
  memset(ss, 0, sizeof(*ss));
  snprintf(why, whylen, "not host, host:port, [ipv6] or [ipv6]:port");
  if (!s || strlen(s) >= sizeof(host)) return NEXAR_ERR_INVALID_ARG;
  const char *colon = strrchr(s, ':');
  if (s[0] == '[') {
    const char *end = strchr(s, ']');
    if (!end) return NEXAR_ERR_INVALID_ARG;
    memcpy(host, s + 1, (size_t)(end - s - 1));
    host[end - s - 1] = 0;
    if (end[1] == ':')
      port = atoi(end + 2);
    else if (end[1])
      return NEXAR_ERR_INVALID_ARG;
  } else if (colon && strchr(s, ':') == colon) {
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = 0;
    char *e;
    long p = strtol(colon + 1, &e, 10);
    if (*e || e == colon + 1) return NEXAR_ERR_INVALID_ARG;
    port = (int)p;
  } else {
    snprintf(host, sizeof(host), "%s", s);
  }
  if (port < 0 || port > 65535) return NEXAR_ERR_INVALID_ARG;
  int rc = resolve_host(host, family, ss, len, why, whylen);
  if (rc < 0) return rc;
  if (ss->ss_family == AF_INET)
    ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
  return 0;
}

int nexar__parse_addr(const char *s, int default_port,
                      struct sockaddr_storage *ss, socklen_t *len) {
  char why[128];
  return nexar__resolve_addr(s, default_port, AF_UNSPEC, ss, len, why,
                             sizeof(why));
}

bool nexar__addr_equal(const struct sockaddr_storage *a,
                       const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return false;
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
    return x->sin_port == y->sin_port &&
           x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a->ss_family != AF_INET6) return false;
  const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
  return x->sin6_port == y->sin6_port &&
         !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
}

void nexar__addr_str(const struct sockaddr *sa, char *out, size_t n) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
    snprintf(out, n, "%s:%u", ip, ntohs(a->sin_port));
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
    snprintf(out, n, "[%s]:%u", ip, ntohs(a->sin6_port));
  } else {
    snprintf(out, n, "(unknown address family %d)", sa->sa_family);
  }
}

void nexar__addr_to_wire(const struct sockaddr *sa, nexar__waddr_t *w) {
  memset(w, 0, sizeof(*w));
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
    w->family = 4;
    w->port = ntohs(a->sin_port);
    memcpy(w->ip, &a->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
    w->family = 6;
    w->port = ntohs(a->sin6_port);
    memcpy(w->ip, &a->sin6_addr, 16);
  }
}

int nexar__wire_to_addr(const nexar__waddr_t *w, struct sockaddr_storage *ss,
                        socklen_t *len) {
  memset(ss, 0, sizeof(*ss));
  if (w->family == 4) {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons(w->port);
    memcpy(&a->sin_addr, w->ip, 4);
    *len = sizeof(*a);
    return 0;
  }
  if (w->family == 6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(w->port);
    memcpy(&a->sin6_addr, w->ip, 16);
    *len = sizeof(*a);
    return 0;
  }
  return NEXAR_ERR_PROTO;
}

/* Derives the 32-byte key K = SHA-256("nexar secret v1" || secret) from the
 * secret string or file. The secret itself is wiped from the stack and never
 * logged. */
int nexar__read_secret(const char *secret, const char *file, uint8_t key[32],
                       char *err, size_t errlen) {
  char buf[4096];
  size_t n = 0;
  /* Both given: the file would be ignored silently, even when missing or
   * holding another secret. Neither value is printed. */
  if (secret && *secret && file && *file) {
    snprintf(err, errlen,
             "a cluster secret (NEXAR_SECRET or the config field secret) and "
             "a secret file (NEXAR_SECRET_FILE, the config field secret_file "
             "or --secret-file) are both given: give the secret one way only");
    return NEXAR_ERR_INVALID_ARG;
  }
  if (secret && *secret) {
    n = strlen(secret);
    if (n >= sizeof(buf)) {
      snprintf(err, errlen, "NEXAR_SECRET is longer than %zu bytes",
               sizeof(buf) - 1);
      return NEXAR_ERR_INVALID_ARG;
    }
    memcpy(buf, secret, n);
  } else if (file && *file) {
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      snprintf(err, errlen, "cannot open NEXAR_SECRET_FILE '%s': %s", file,
               strerror(errno));
      return NEXAR_ERR_INVALID_ARG;
    }
    ssize_t r = read(fd, buf, sizeof(buf));
    close(fd);
    if (r <= 0 || (size_t)r >= sizeof(buf)) {
      snprintf(err, errlen, "NEXAR_SECRET_FILE '%s' is empty or too long",
               file);
      return NEXAR_ERR_INVALID_ARG;
    }
    n = (size_t)r;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
  }
  if (n == 0) {
    snprintf(err, errlen,
             "no cluster secret: set NEXAR_SECRET or NEXAR_SECRET_FILE");
    return NEXAR_ERR_INVALID_ARG;
  }
  static const char label[] = "nexar secret v1";
  uint8_t tmp[sizeof(label) - 1 + sizeof(buf)];
  memcpy(tmp, label, sizeof(label) - 1);
  memcpy(tmp + sizeof(label) - 1, buf, n);
  gnutls_hash_fast(GNUTLS_DIG_SHA256, tmp, sizeof(label) - 1 + n, key);
  gnutls_memset(tmp, 0, sizeof(tmp));
  gnutls_memset(buf, 0, sizeof(buf));
  return 0;
}
