/*
 * Test only: a loss, reorder and duplicate injector in the UDP send path
 * (`tc netem` needs privileges and a network namespace; this needs
 * neither). Compiled in, inert unless the environment sets
 *
 *   NEXAR_TEST_LOSS="drop=2%,reorder=1%,dup=1%,seed=N"
 *
 * (any subset, in any order; percentages 0 .. 100 with decimals). Each
 * datagram sent is then, independently: dropped with probability drop;
 * else held back and sent after the next datagram with probability
 * reorder; else sent twice with probability dup. The draws come from a
 * xorshift generator seeded with seed (default 1) mixed with the process
 * id, so that the processes of one job draw differently. GSO batches are
 * split into single datagrams, and a datagram the socket refuses (full) is
 * dropped too (QUIC recovers both as loss). Not for production: it is a
 * test of the transport's recovery (docs/testing.md, "Loss").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/quic.h"

typedef struct nexar__loss nexar__loss_t;
struct nexar__loss {
  uint32_t drop, reorder, dup; /* per million datagrams */
  uint64_t rng;
  uint8_t held[65536]; /* a datagram held back (reorder) */
  size_t held_len;
  struct sockaddr_storage held_to;
  socklen_t held_tolen;
  uint64_t sent, dropped, reordered, duplicated;
};

/* "2%" or "2.5" (percent) into per million; -1 when not 0 .. 100. */
static int64_t per_million(const char *v, size_t n) {
  char b[32];
  if (n == 0 || n >= sizeof(b)) return -1;
  memcpy(b, v, n);
  b[n] = 0;
  if (b[n - 1] == '%') b[n - 1] = 0;
  char *end;
  double d = strtod(b, &end);
  if (end == b || *end || !(d >= 0 && d <= 100)) return -1;
  return (int64_t)(d * 10000.0 + 0.5);
}

/* Parses |s| into |l|; 0, or -1 with |bad| pointing at the bad item. */
static int parse(nexar__loss_t *l, const char *s, const char **bad) {
  uint64_t seed = 1;
  for (const char *p = s; *p;) {
    size_t n = strcspn(p, ",");
    const char *eq = memchr(p, '=', n);
    *bad = p;
    if (!eq) return -1;
    size_t kn = (size_t)(eq - p), vn = n - kn - 1;
    if (kn == 4 && !strncmp(p, "seed", 4)) {
      char b[24], *end;
      if (vn == 0 || vn >= sizeof(b)) return -1;
      memcpy(b, eq + 1, vn);
      b[vn] = 0;
      seed = strtoull(b, &end, 10);
      if (*end) return -1;
    } else {
      int64_t v = per_million(eq + 1, vn);
      if (v < 0) return -1;
      if (kn == 4 && !strncmp(p, "drop", 4))
        l->drop = (uint32_t)v;
      else if (kn == 7 && !strncmp(p, "reorder", 7))
        l->reorder = (uint32_t)v;
      else if (kn == 3 && !strncmp(p, "dup", 3))
        l->dup = (uint32_t)v;
      else
        return -1;
    }
    p += n;
    if (*p == ',') p++;
  }
  l->rng = (seed ^ ((uint64_t)getpid() * 0x9e3779b97f4a7c15ull)) | 1;
  return 0;
}

int nexar__loss_open(nexar__ep_t *ep) {
  const char *s = getenv("NEXAR_TEST_LOSS");
  if (!s || !*s) return 0;
  nexar__loss_t *l = calloc(1, sizeof(*l));
  if (!l) return NEXAR_ERR_NOMEM;
  const char *bad = s;
  if (parse(l, s, &bad) < 0) {
    NEXAR__WARN(NEXAR__SUB_ENV,
                "NEXAR_TEST_LOSS='%s': '%s' is not drop=P%%, reorder=P%%, "
                "dup=P%% (0 .. 100) or seed=N",
                s, bad);
    free(l);
    return NEXAR_ERR_INVALID_ARG;
  }
  NEXAR__WARN(NEXAR__SUB_ENV,
              "NEXAR_TEST_LOSS is set (test only): datagrams from %s are "
              "dropped, reordered and duplicated at random (%s)",
              ep->local_str, s);
  ep->loss = l;
  return 0;
}

void nexar__loss_close(nexar__ep_t *ep) {
  nexar__loss_t *l = ep->loss;
  if (!l) return;
  NEXAR__INFO(NEXAR__SUB_ENV,
              "NEXAR_TEST_LOSS on %s: %llu datagrams sent, %llu dropped, "
              "%llu reordered, %llu duplicated",
              ep->local_str, (unsigned long long)l->sent,
              (unsigned long long)l->dropped, (unsigned long long)l->reordered,
              (unsigned long long)l->duplicated);
  free(l);
  ep->loss = NULL;
}

static bool draw(nexar__loss_t *l, uint32_t ppm) {
  if (!ppm) return false;
  l->rng ^= l->rng << 13;
  l->rng ^= l->rng >> 7;
  l->rng ^= l->rng << 17;
  return l->rng % 1000000u < ppm;
}

/* One datagram; a full socket drops it. Returns 0 or -errno. */
static int send_one(nexar__ep_t *ep, const struct sockaddr_storage *to,
                    socklen_t tolen, const uint8_t *d, size_t n) {
  for (int i = 0; i < 4; i++) {
    ssize_t r = sendto(ep->fd, d, n, 0, (const struct sockaddr *)to, tolen);
    if (r >= 0) return 0;
    int e = errno;
    if (e == EINTR) continue;
    if (e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH) {
      ep->errq = true; /* perhaps an earlier datagram's ICMP error */
      continue;
    }
    if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS) return 0;
    return -e;
  }
  return 0;
}

int nexar__loss_send(nexar__ep_t *ep, const struct sockaddr_storage *to,
                     socklen_t tolen, const uint8_t *data, size_t len,
                     size_t segsize) {
  nexar__loss_t *l = ep->loss;
  int rc = 0;
  if (!segsize) segsize = len;
  for (size_t off = 0; off < len && rc == 0; off += segsize) {
    size_t n = len - off < segsize ? len - off : segsize;
    const uint8_t *d = data + off;
    l->sent++;
    if (draw(l, l->drop)) {
      l->dropped++;
      continue;
    }
    if (!l->held_len && n <= sizeof(l->held) && draw(l, l->reorder)) {
      l->reordered++;
      memcpy(l->held, d, n);
      l->held_len = n;
      memcpy(&l->held_to, to, tolen);
      l->held_tolen = tolen;
      continue;
    }
    rc = send_one(ep, to, tolen, d, n);
    if (rc == 0 && draw(l, l->dup)) {
      l->duplicated++;
      rc = send_one(ep, to, tolen, d, n);
    }
    if (l->held_len) { /* the held one goes after this one */
      send_one(ep, &l->held_to, l->held_tolen, l->held, l->held_len);
      l->held_len = 0;
    }
  }
  return rc;
}
