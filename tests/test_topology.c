/*
 * Sparse topologies (docs/topology.md) over real processes: the links each
 * rank holds, p2p between every pair (relayed when not neighbours), the
 * collectives, barrier, RPC and a child communicator, a forged relay
 * origin, and a failed relay routed around.
 */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"
#include "cluster/cluster.h"

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

/* The core collectives, each checked exactly (integers, and floats whose
 * sums are exact). */
static int colls(nexar_comm_t *w, int r, int n) {
  /* allreduce int64, small (recursive doubling) and large (ring or
   * Rabenseifner), bit-exact. */
  size_t counts[2] = {37, 200000};
  for (int k = 0; k < 2; k++) {
    size_t c = counts[k];
    int64_t *v = malloc(c * sizeof(*v));
    NT_CHECK(v);
    for (size_t i = 0; i < c; i++) v[i] = (int64_t)(r + 1) * (int64_t)i - r;
    NT_OKC(w, nexar_allreduce(w, NEXAR_IN_PLACE, v, c, NEXAR_INT64, NEXAR_SUM));
    int64_t tri = (int64_t)n * (n + 1) / 2, rs = (int64_t)n * (n - 1) / 2;
    for (size_t i = 0; i < c; i++)
      NT_CHECKF(v[i] == tri * (int64_t)i - rs, "allreduce[%zu] = %lld", i,
                (long long)v[i]);
    free(v);
  }
  float f[1000];
  for (int i = 0; i < 1000; i++) f[i] = (float)((r * 7 + i) % 13);
  NT_OKC(w,
         nexar_allreduce(w, NEXAR_IN_PLACE, f, 1000, NEXAR_FLOAT32, NEXAR_SUM));
  for (int i = 0; i < 1000; i++) {
    float want = 0;
    for (int q = 0; q < n; q++) want += (float)((q * 7 + i) % 13);
    NT_CHECKF(f[i] == want, "f32 allreduce[%d] = %g, want %g", i, f[i], want);
  }
  /* bcast from several roots, small and large (scatter + allgather). */
  int roots[3] = {0, n - 1, n / 2};
  size_t bsz[2] = {100, 700000};
  for (int k = 0; k < 3; k++)
    for (int z = 0; z < 2; z++) {
      uint8_t *b = malloc(bsz[z]);
      NT_CHECK(b);
      for (size_t i = 0; i < bsz[z]; i++)
        b[i] = r == roots[k] ? pat(i, (unsigned)k) : 0;
      NT_OKC(w, nexar_bcast(w, b, bsz[z], NEXAR_UINT8, roots[k]));
      for (size_t i = 0; i < bsz[z]; i++)
        NT_CHECKF(b[i] == pat(i, (unsigned)k), "bcast root %d byte %zu",
                  roots[k], i);
      free(b);
    }
  /* allgather, alltoall, reduce_scatter_block. */
  int64_t mine[3] = {r, 10 * r, 100 * r};
  int64_t *all = malloc((size_t)n * 3 * sizeof(int64_t));
  NT_CHECK(all);
  NT_OKC(w, nexar_allgather(w, mine, all, 3, NEXAR_INT64));
  for (int q = 0; q < n; q++)
    NT_CHECKF(all[3 * q] == q && all[3 * q + 1] == 10 * q &&
                  all[3 * q + 2] == 100 * q,
              "allgather block %d", q);
  int64_t *out = malloc((size_t)n * 2 * sizeof(int64_t));
  NT_CHECK(out);
  for (int q = 0; q < n; q++) {
    out[2 * q] = r * 1000 + q;
    out[2 * q + 1] = -(r * 1000 + q);
  }
  NT_OKC(w, nexar_alltoall(w, out, all, 2, NEXAR_INT64));
  for (int q = 0; q < n; q++)
    NT_CHECKF(all[2 * q] == q * 1000 + r && all[2 * q + 1] == -(q * 1000 + r),
              "alltoall from %d", q);
  int64_t *rs_in = malloc((size_t)n * 5 * sizeof(int64_t)), rs_out[5];
  NT_CHECK(rs_in);
  for (int i = 0; i < 5 * n; i++) rs_in[i] = (int64_t)i * (r + 1);
  NT_OKC(w, nexar_reduce_scatter_block(w, rs_in, rs_out, 5, NEXAR_INT64,
                                       NEXAR_SUM));
  for (int i = 0; i < 5; i++)
    NT_CHECKF(rs_out[i] == (int64_t)(5 * r + i) * n * (n + 1) / 2,
              "reduce_scatter_block[%d] = %lld", i, (long long)rs_out[i]);
  free(rs_in);
  free(out);
  free(all);
  for (int k = 0; k < 3; k++) NT_OKC(w, nexar_barrier(w));
  return 0;
}

/* RPC handler: returns the request times 3 and the caller's rank. */
static int triple(void *ud, int caller, uint16_t fn, const void *req,
                  size_t req_bytes, void *resp, size_t resp_cap,
                  size_t *resp_bytes) {
  int64_t v;
  if (req_bytes != sizeof(v) || resp_cap < 2 * sizeof(v)) return -1;
  memcpy(&v, req, sizeof(v));
  int64_t o[2] = {3 * v, caller};
  memcpy(resp, o, sizeof(o));
  *resp_bytes = sizeof(o);
  return 0;
}

/* An RPC to the farthest rank (not a neighbour), then a child
 * communicator of the even ranks in reverse order, whose members talk
 * through the world's relays: p2p ring, allreduce, bcast, barrier. */
static int rpc_and_child(nexar_comm_t *w, int r, int n) {
  NT_OKC(w, nexar_rpc_register(w, 9, triple, NULL));
  NT_OKC(w, nexar_barrier(w));
  int64_t q = 1000 + r, resp[2] = {0, 0};
  size_t got = 0;
  int far = (r + n / 2) % n;
  NT_OKC(w, nexar_rpc_call(w, far, 9, &q, sizeof(q), resp, sizeof(resp), &got,
                           20000));
  NT_CHECKF(got == sizeof(resp) && resp[0] == 3 * q && resp[1] == r,
            "rpc to %d: %lld, caller %lld", far, (long long)resp[0],
            (long long)resp[1]);
  NT_OKC(w, nexar_barrier(w));
  nexar_comm_t *c = NULL;
  NT_OKC(w, nexar_comm_split(w, r % 2 ? NEXAR_UNDEFINED : 0, -r, &c));
  if (r % 2) {
    NT_CHECK(c == NULL);
    return 0;
  }
  int cr, cn;
  NT_OK(nexar_comm_rank(c, &cr));
  NT_OK(nexar_comm_size(c, &cn));
  NT_CHECKF(cn == (n + 1) / 2 && cr == (cn - 1) - r / 2, "child %d of %d", cr,
            cn);
  int64_t v = cr, from = -1;
  nexar_req_t *rq[2];
  NT_OKC(c,
         nexar_irecv(c, &from, 1, NEXAR_INT64, (cr + cn - 1) % cn, 3, &rq[0]));
  NT_OKC(c, nexar_isend(c, &v, 1, NEXAR_INT64, (cr + 1) % cn, 3, &rq[1]));
  NT_OKC(c, nexar_waitall(2, rq, NULL));
  NT_CHECKF(from == (cr + cn - 1) % cn, "child ring got %lld", (long long)from);
  int64_t sum = cr;
  NT_OKC(c,
         nexar_allreduce(c, NEXAR_IN_PLACE, &sum, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(sum == (int64_t)cn * (cn - 1) / 2, "child allreduce %lld",
            (long long)sum);
  int64_t b = cr == cn - 1 ? 77 : 0;
  NT_OKC(c, nexar_bcast(c, &b, 1, NEXAR_INT64, cn - 1));
  NT_CHECKF(b == 77, "child bcast %lld", (long long)b);
  NT_OKC(c, nexar_barrier(c));
  NT_OKC(c, nexar_comm_free(&c));
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
  if (pairs(w, r, n) || colls(w, r, n) || rpc_and_child(w, r, n)) return 1;
  /* Messages to non-neighbours did go through relays, none was lost. */
  nexar__topo_stats_t st;
  nexar__topo_stats(ctx, &st);
  NT_CHECKF(st.sent > 0 && st.delivered > 0 && !st.rejected && !st.dropped,
            "relay frames: %llu sent, %llu delivered, %llu refused, %llu "
            "dropped",
            (unsigned long long)st.sent, (unsigned long long)st.delivered,
            (unsigned long long)st.rejected, (unsigned long long)st.dropped);
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

/* ---- A forged origin: on a ring of 6, rank 0 sends a relay frame to
 * rank 3 (through 1 and 2) claiming to be rank 5. Then a frame whose hop
 * limit is too low for its route. The destination must refuse
 * it (tag check), log it, and not deliver it; a genuine message after it
 * arrives. */
/* Polls this process's relay counters until |field| of them is nonzero
 * (at most 5 s) and returns them. */
static nexar__topo_stats_t wait_counter(nexar_ctx_t *ctx, size_t field) {
  nexar__topo_stats_t st = {0};
  for (int i = 0; i < 500; i++) {
    nexar__topo_stats(ctx, &st);
    if (*(uint64_t *)((char *)&st + field)) break;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  return st;
}

/* Whether this process's log (NEXAR_DEBUG_FILE, one file per process) has
 * a line containing |a| and |b|. */
static int logged(const char *a, const char *b) {
  fflush(NULL);
  char path[128], line[1024];
  snprintf(path, sizeof(path), "/tmp/nexar-topo-forge-%d.log", (int)getpid());
  FILE *f = fopen(path, "r");
  int found = 0;
  while (f && fgets(line, sizeof(line), f))
    found |= strstr(line, a) && strstr(line, b);
  if (f) fclose(f);
  return found;
}

static int worker_forge(int index, void *arg) {
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int dest = n / 2, hop, hops;
  NT_OK(nexar__topo_route(ctx, dest, &hop, &hops));
  if (r == 0) NT_CHECKF(hops >= 2, "rank %d is a neighbour of 0", dest);
  nexar_req_t *rq = NULL;
  int64_t got = -1;
  if (r == dest)
    NT_OKC(w, nexar_irecv(w, &got, 1, NEXAR_INT64, NEXAR_ANY_SOURCE, 42, &rq));
  NT_OKC(w, nexar_barrier(w));
  if (r == 0) {
    int64_t fake = 666, real = 777;
    nexar__topo_test_forge(ctx, n - 1);
    NT_OKC(w, nexar_send(w, &fake, 1, NEXAR_INT64, dest, 42));
    nexar__topo_test_forge(ctx, -1);
    NT_OKC(w, nexar_recv(w, NULL, 0, NEXAR_UINT8, dest, 43, NULL));
    NT_OKC(w, nexar_send(w, &real, 1, NEXAR_INT64, dest, 42));
  }
  if (r == dest) {
    int done = 0;
    nexar__topo_stats_t st =
        wait_counter(ctx, offsetof(nexar__topo_stats_t, rejected));
    NT_OKC(w, nexar_test(&rq, &done, NULL));
    NT_CHECKF(!done, "the forged message was delivered: %lld", (long long)got);
    NT_CHECKF(st.rejected == 1, "%llu relay frames refused",
              (unsigned long long)st.rejected);
    NT_CHECKF(logged("forged origin", "process 5"),
              "no log line about the forged frame");
    NT_OKC(w, nexar_send(w, NULL, 0, NEXAR_UINT8, 0, 43));
    nexar_status_t stt;
    NT_OKC(w, nexar_wait(&rq, &stt));
    NT_CHECKF(got == 777 && stt.source == 0, "got %lld from %d", (long long)got,
              stt.source);
  }
  NT_OKC(w, nexar_barrier(w));
  /* A hop limit of 1 on a frame that needs 3 hops: rank 1, the first
   * relay, drops it and logs why (the message is lost, so it is the last
   * data message from 0 to the destination here). */
  if (r == 0) {
    int64_t v = 5;
    nexar__topo_test_hops(ctx, 1);
    NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT64, dest, 44));
    nexar__topo_test_hops(ctx, 0);
  }
  if (r == 1) {
    nexar__topo_stats_t st =
        wait_counter(ctx, offsetof(nexar__topo_stats_t, dropped));
    NT_CHECKF(st.dropped == 1, "%llu frames dropped",
              (unsigned long long)st.dropped);
    NT_CHECKF(logged("hop limit 1 reached", "process 0"),
              "no log line about the hop limit");
  }
  NT_OKC(w, nexar_barrier(w));
  char path[128];
  snprintf(path, sizeof(path), "/tmp/nexar-topo-forge-%d.log", (int)getpid());
  unlink(path);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- Invalid settings: a clear error naming the variable. */
static int worker_invalid(int index, void *arg) {
  const char *want = arg;
  nexar_ctx_t *ctx = NULL;
  int rc = nexar_init(NULL, &ctx);
  NT_CHECKF(rc == NEXAR_ERR_INVALID_ARG, "nexar_init returned %d", rc);
  const char *e = nexar_last_error();
  NT_CHECKF(strstr(e, "NEXAR_TOPOLOGY") && strstr(e, want), "error: %s", e);
  return 0;
}

static int run_invalid(const char *topo, int n, const char *want) {
  char env[128];
  snprintf(env, sizeof(env), "NEXAR_TOPOLOGY=%s", topo);
  nt_opts_t o = {.world_size = n,
                 .env = env,
                 .timeout_ms = 20000,
                 .seed_must_form = NT_SEED_OPTIONAL};
  int rc = nt_run(&o, worker_invalid, (void *)want);
  fprintf(stderr, "invalid %s with %d ranks refused: %s\n", topo, n,
          rc ? "FAILED" : "ok");
  return rc;
}

/* ---- nexar_config_t.topology: set in the struct it wins over the
 * environment; a struct from an older header (whose size ends before the
 * field) is read without it. */
static int worker_config(int index, void *arg) {
  (void)arg;
  nexar_config_t cfg = NEXAR_CONFIG_INIT;
  cfg.topology = "kregular:9";
  nexar_ctx_t *ctx = NULL;
  int rc = nexar_init(&cfg, &ctx);
  NT_CHECKF(rc == NEXAR_ERR_INVALID_ARG &&
                strstr(nexar_last_error(), "NEXAR_TOPOLOGY=kregular:9"),
            "nexar_init: %d: %s", rc, nexar_last_error());
  cfg.topology = "no such topology";
  cfg.size = offsetof(nexar_config_t, topology);
  nexar_comm_t *w;
  NT_OK(nexar_init(&cfg, &ctx));
  w = nexar_comm_world(ctx);
  int links = nexar__topo_links(ctx), n;
  NT_OK(nexar_comm_size(w, &n));
  NT_CHECKF(links == 2, "%d links from NEXAR_TOPOLOGY=kregular:2", links);
  NT_OKC(w, nexar_barrier(w));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* A survivor's allreduces until the failure of process |victim| ends one
 * (PEER_FAILED, or REVOKED by another member's report); it is then the one
 * failure this process knows. */
static int until_failed(nexar_ctx_t *ctx, nexar_comm_t *w, int victim) {
  int64_t v = 1;
  int rc;
  while ((rc = nexar_allreduce(w, NEXAR_IN_PLACE, &v, 1, NEXAR_INT64,
                               NEXAR_SUM)) == NEXAR_OK)
    v = 1;
  NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED, "rc %d",
            rc);
  int nf = 0;
  nexar_failure_t f[4];
  NT_OK(nexar_failures(ctx, f, 4, &nf));
  NT_CHECKF(nf == 1 && f[0].id == victim, "%d failures, first id %d", nf,
            nf ? f[0].id : -1);
  return 0;
}

/* ---- A failed relay: on a ring of 6 (kregular:2), rank 1 carries the
 * traffic between ranks 0 and 2. It is killed; under automatic recovery
 * the survivors rebuild the world and 0 and 2 talk again, around it. */
static int exchange(nexar_comm_t *w, int me, int peer, int64_t v) {
  int64_t got = -1;
  nexar_req_t *rq[2];
  NT_OKC(w, nexar_irecv(w, &got, 1, NEXAR_INT64, peer, 21, &rq[0]));
  NT_OKC(w, nexar_isend(w, &v, 1, NEXAR_INT64, peer, 21, &rq[1]));
  NT_OKC(w, nexar_waitall(2, rq, NULL));
  NT_CHECKF(got == 1000 + peer, "rank %d got %lld from %d", me, (long long)got,
            peer);
  return 0;
}

static int worker_kill(int index, void *arg) {
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n, hop, hops;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  const int victim = 1;
  if (r == 0 || r == 2) {
    NT_OK(nexar__topo_route(ctx, 2 - r, &hop, &hops));
    NT_CHECKF(hop == victim && hops == 2, "route %d -> %d: via %d, %d hops", r,
              2 - r, hop, hops);
    if (exchange(w, r, 2 - r, 1000 + r)) return 1;
  }
  NT_OKC(w, nexar_barrier(w));
  if (r == victim) {
    /* Die once everyone has left the barrier (a kill is known within
     * milliseconds, so sooner could fail someone's barrier instead). */
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    raise(SIGKILL);
  }
  double t0 = nt_now_ms();
  if (until_failed(ctx, w, victim)) return 1;
  /* Rebuilt in place: 5 ranks, ids 0, 2, 3, 4, 5. */
  int nr, nn, id;
  NT_OK(nexar_comm_rank(w, &nr));
  NT_OK(nexar_comm_size(w, &nn));
  NT_OK(nexar_comm_id_of(w, nr, &id));
  NT_CHECKF(nn == n - 1 && id == r, "rank %d of %d, id %d", nr, nn, id);
  if (r == 0 || r == 2) {
    NT_OK(nexar__topo_route(ctx, 2 - r, &hop, &hops));
    NT_CHECKF(hop == (r == 0 ? 5 : 3) && hops == 4,
              "route %d -> %d after the failure: via %d, %d hops", r, 2 - r,
              hop, hops);
    if (exchange(w, nr, r == 0 ? 1 : 0, 1000 + nr)) return 1;
  }
  int64_t sum = nr;
  NT_OKC(w,
         nexar_allreduce(w, NEXAR_IN_PLACE, &sum, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(sum == (int64_t)nn * (nn - 1) / 2, "allreduce %lld",
            (long long)sum);
  NT_OKC(w, nexar_barrier(w));
  fprintf(stderr,
          "[%d] relay failure: rebuilt and talking again after %.0f ms\n", r,
          nt_now_ms() - t0);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- Relay cost (test_topology bench): rank 0 with ranks 1, 2 and 4 of a
 * ring of 8 (kregular:2: 1, 2 and 4 hops), and the same pairs on a full
 * mesh: 8-byte round trips and 4 MiB one-way transfers. */
static int worker_bench(int index, void *arg) {
  const char *topo = arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  const int peers[3] = {1, 2, 4};
  size_t big = 4u << 20;
  uint8_t *buf = malloc(big);
  NT_CHECK(buf);
  memset(buf, 1, big);
  for (int k = 0; k < 3; k++) {
    int p = peers[k], hop, hops = 1;
    if (r == 0) NT_OK(nexar__topo_route(ctx, p, &hop, &hops));
    NT_OKC(w, nexar_barrier(w));
    if (r != 0 && r != p) continue;
    int other = r == 0 ? p : 0;
    int64_t v = 0;
    double t0 = 0;
    for (int i = 0; i < 1100; i++) {
      if (i == 100) t0 = nt_now_ms();
      if (r == 0) {
        NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT64, other, 1));
        NT_OKC(w, nexar_recv(w, &v, 1, NEXAR_INT64, other, 1, NULL));
      } else {
        NT_OKC(w, nexar_recv(w, &v, 1, NEXAR_INT64, other, 1, NULL));
        NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT64, other, 1));
      }
    }
    double lat_us = (nt_now_ms() - t0) * 1000.0 / 2000.0;
    t0 = nt_now_ms();
    for (int i = 0; i < 20; i++) {
      if (r == 0)
        NT_OKC(w, nexar_send(w, buf, big, NEXAR_UINT8, other, 2));
      else
        NT_OKC(w, nexar_recv(w, buf, big, NEXAR_UINT8, other, 2, NULL));
    }
    if (r == 0)
      NT_OKC(w, nexar_recv(w, NULL, 0, NEXAR_UINT8, other, 3, NULL));
    else
      NT_OKC(w, nexar_send(w, NULL, 0, NEXAR_UINT8, other, 3));
    double mbs = 20.0 * (double)big / 1e6 / ((nt_now_ms() - t0) / 1000.0);
    if (r == 0)
      printf(
          "bench %-10s rank 0 <-> %d: %d hop(s): 8 B one-way %.1f us, "
          "4 MiB %.0f MB/s\n",
          topo, p, hops, lat_us, mbs);
  }
  free(buf);
  NT_OKC(w, nexar_barrier(w));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* A lazy mesh right after formation: the hypercube's links only. A small
 * allreduce of |*one| first: its partners (recursive doubling, n a power
 * of two) are the hypercube's, so it dials no one, and no rank dials
 * before every rank has counted (the barrier's dissemination would). */
static int lazy_formed(nexar_ctx_t *ctx, nexar_comm_t *w, int r, int n,
                       int64_t *one) {
  NT_OKC(w, nexar_allreduce(w, NEXAR_IN_PLACE, one, 1, NEXAR_INT64, NEXAR_SUM));
  int links = nexar__topo_links(ctx), deg = degree_of("hypercube", r, n);
  NT_CHECKF(links == deg, "rank %d holds %d links at formation, not %d", r,
            links, deg);
  return 0;
}

/* ---- The lazy mesh (docs/topology.md section 2), forced at 8 ranks by
 * NEXAR_MESH_LAZY_MIN=2: the hypercube's links at formation, every other
 * link dialled by its first message, by both ends at once for every pair
 * (crossing dials); no frame is relayed. */
static int worker_lazy(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int64_t one = 1;
  if (lazy_formed(ctx, w, r, n, &one)) return 1;
  int links, deg = degree_of("hypercube", r, n);
  /* The last rank comes late: the others' allreduce waits past
   * NEXAR_COLL_PROBE_MS (200 here) and sends its fingerprint probe, to the
   * linked ranks only (to every member, it dialled them all). */
  if (r == n - 1) {
    struct timespec ts = {0, 700 * 1000000L};
    nanosleep(&ts, NULL);
  }
  NT_OKC(w,
         nexar_allreduce(w, NEXAR_IN_PLACE, &one, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(one == n * n, "allreduce %lld", (long long)one);
  links = nexar__topo_links(ctx);
  NT_CHECKF(links == deg, "rank %d holds %d links after a probe, not %d", r,
            links, deg);
  NT_OKC(w,
         nexar_allreduce(w, NEXAR_IN_PLACE, &one, 1, NEXAR_INT64, NEXAR_SUM));
  if (pairs(w, r, n) || colls(w, r, n) || rpc_and_child(w, r, n)) return 1;
  links = nexar__topo_links(ctx);
  NT_CHECKF(links == n - 1, "rank %d holds %d links after traffic", r, links);
  nexar__topo_stats_t st;
  nexar__topo_stats(ctx, &st);
  NT_CHECKF(!st.sent && !st.forwarded && !st.delivered,
            "relay frames on a full mesh: %llu sent, %llu forwarded",
            (unsigned long long)st.sent, (unsigned long long)st.forwarded);
  /* Each pair without a formed link was dialled once, or twice when both
   * dialled at once (then the higher rank gave its own dial up). */
  int64_t c[2] = {(int64_t)st.dialled, (int64_t)st.crossed};
  NT_OKC(w, nexar_allreduce(w, NEXAR_IN_PLACE, c, 2, NEXAR_INT64, NEXAR_SUM));
  int64_t edges = 0;
  for (int q = 0; q < n; q++) edges += degree_of("hypercube", q, n);
  int64_t lazy_pairs = (int64_t)n * (n - 1) / 2 - edges / 2;
  NT_CHECKF(c[0] == lazy_pairs + c[1],
            "%lld dials, %lld given up, for %lld pairs", (long long)c[0],
            (long long)c[1], (long long)lazy_pairs);
  if (r == 0)
    fprintf(stderr, "lazy mesh: %lld pairs dialled on demand, %lld crossed\n",
            (long long)lazy_pairs, (long long)c[1]);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* A rank killed while rank 0 waits on its dial to it (not a neighbour:
 * 0 ^ 5 has two bits): the victim stops, rank 0 dials it (the handshake
 * cannot end), then kills it. Rank 0's receive and send end with an error;
 * every survivor hears of the failure over the hypercube. */
/* ---- Only rank 0 sets NEXAR_MESH_LAZY_MIN=2: every member forms rank
 * 0's mesh (a setting the job shares, docs/configuration.md), the
 * hypercube's links, then dials on demand. Before the setting joined the
 * roster's job section, ranks 1..7 formed the eager mesh and waited for
 * links rank 0 never dialled, until the bootstrap deadline. */
static int worker_lazy_rank0(int index, void *arg) {
  (void)arg;
  if (index == 0) setenv("NEXAR_MESH_LAZY_MIN", "2", 1);
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int64_t one = 1;
  if (lazy_formed(ctx, w, r, n, &one)) return 1;
  NT_OKC(w,
         nexar_allreduce(w, NEXAR_IN_PLACE, &one, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(one == n * n, "allreduce %lld", (long long)one);
  if (pairs(w, r, n)) return 1;
  int links = nexar__topo_links(ctx);
  NT_CHECKF(links == n - 1, "rank %d holds %d links after traffic", r, links);
  NT_OKC(w, nexar_barrier(w));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static int worker_lazy_kill(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  const int victim = 5;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  /* Recursive doubling (n a power of two): over the hypercube's links. */
  int64_t pid = getpid(), pids[8];
  NT_CHECK(n == 8);
  NT_OKC(w, nexar_allgather(w, &pid, pids, 1, NEXAR_INT64));
  if (r == victim) {
    raise(SIGSTOP);
    return 1; /* never resumed */
  }
  int rc;
  struct timespec ts = {0, 100 * 1000000L};
  if (r == 0) {
    nanosleep(&ts, NULL);
    int64_t v = 1, got = 0;
    nexar_req_t *q[2];
    rc = nexar_irecv(w, &got, 1, NEXAR_INT64, victim, 3, &q[0]);
    NT_CHECKF(rc == NEXAR_OK, "irecv: %d", rc);
    rc = nexar_isend(w, &v, 1, NEXAR_INT64, victim, 3, &q[1]);
    NT_CHECKF(rc == NEXAR_OK, "isend: %d", rc);
    nanosleep(&ts, NULL);
    int done = 0;
    NT_OK(nexar_test(&q[0], &done, NULL));
    NT_CHECKF(!done, "a receive from a stopped rank completed");
    kill((pid_t)pids[victim], SIGKILL);
    double t0 = nt_now_ms();
    rc = nexar_waitall(2, q, NULL);
    NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED,
              "p2p with the killed rank: %d", rc);
    fprintf(stderr,
            "lazy mesh: a wait on a dial to a killed rank ended "
            "after %.0f ms: %s\n",
            nt_now_ms() - t0, nexar_comm_last_error(w));
  }
  if (until_failed(ctx, w, victim)) return 1;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(int argc, char **argv) {
  int fails = 0;
  if (argc > 2) return run_basic(argv[1], atoi(argv[2]));
  if (argc > 1 && !strcmp(argv[1], "bench")) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *topos[2] = {"kregular:2", "full"};
    for (int i = 0; i < 2; i++) {
      char env[64];
      snprintf(env, sizeof(env), "NEXAR_TOPOLOGY=%s", topos[i]);
      nt_opts_t o = {.world_size = 8, .env = env, .timeout_ms = 120000};
      fails += nt_run(&o, worker_bench, (void *)topos[i]);
    }
    return fails ? 1 : 0;
  }
  const char *only = argc > 1 ? argv[1] : "";
  static const cfg_t matrix[] = {
      {"kregular:4", 7},  {"hypercube", 7},   {"kregular:3", 8},
      {"hypercube", 8},   {"kregular:4", 12}, {"hypercube", 12},
      {"kregular:4", 16}, {"hypercube", 16},  {"kregular:2", 12}};
  if (!*only || !strcmp(only, "matrix"))
    for (size_t i = 0; i < sizeof(matrix) / sizeof(matrix[0]); i++)
      fails += run_basic(matrix[i].topo, matrix[i].n);
  if (!*only || !strcmp(only, "invalid")) {
    fails += run_invalid("kregular:3", 7, "odd degree needs an even world");
    fails += run_invalid("kregular:8", 8, "at most the world size - 1 = 7");
    fails += run_invalid("kregular:1", 6, "not connected");
    fails += run_invalid("kregular:x", 4, "positive integer");
    fails += run_invalid("torus", 4, "not one of full, kregular:K, hypercube");
  }
  if (!*only || !strcmp(only, "invalid")) {
    nt_opts_t o = {.world_size = 8,
                   .timeout_ms = 30000,
                   .env = "NEXAR_TOPOLOGY=kregular:2"};
    int rc = nt_run(&o, worker_config, NULL);
    fprintf(stderr, "nexar_config_t.topology: %s\n", rc ? "FAILED" : "ok");
    fails += rc;
  }
  if (!*only || !strcmp(only, "forge")) {
    nt_opts_t o = {.world_size = 6,
                   .timeout_ms = 60000,
                   .env =
                       "NEXAR_TOPOLOGY=kregular:2\n"
                       "NEXAR_DEBUG_FILE=/tmp/nexar-topo-forge-%p.log"};
    int rc = nt_run(&o, worker_forge, NULL);
    fprintf(stderr, "forged relay origin refused, hop limit enforced: %s\n",
            rc ? "FAILED" : "ok");
    fails += rc;
  }
  if (!*only || !strcmp(only, "kill")) {
    nt_opts_t o = {.world_size = 6,
                   .timeout_ms = 60000,
                   .env =
                       "NEXAR_TOPOLOGY=kregular:2\n"
                       "NEXAR_RECOVERY=automatic\n"
                       "NEXAR_HEARTBEAT_MS=100\n"
                       "NEXAR_HEARTBEAT_TIMEOUT_MS=1000",
                   .tolerate_kill = 1};
    int rc = nt_run(&o, worker_kill, NULL);
    fprintf(stderr, "failed relay routed around: %s\n", rc ? "FAILED" : "ok");
    fails += rc;
  }
  /* The lazy mesh (not in the no-argument run: ctest runs each case over
   * shared memory and QUIC). */
  if (!strcmp(only, "lazy")) {
    nt_opts_t o = {.world_size = 8,
                   .timeout_ms = 60000,
                   .env = "NEXAR_MESH_LAZY_MIN=2\nNEXAR_COLL_PROBE_MS=200"};
    int rc = nt_run(&o, worker_lazy, NULL);
    fprintf(stderr, "lazy mesh: %s\n", rc ? "FAILED" : "ok");
    fails += rc;
  }
  if (!strcmp(only, "lazy_rank0")) {
    nt_opts_t o = {.world_size = 8,
                   .timeout_ms = 60000,
                   .env = "NEXAR_BOOTSTRAP_TIMEOUT_MS=10000"};
    int rc = nt_run(&o, worker_lazy_rank0, NULL);
    fprintf(stderr, "lazy mesh set by rank 0 alone: %s\n",
            rc ? "FAILED" : "ok");
    fails += rc;
  }
  if (!strcmp(only, "lazy_kill")) {
    nt_opts_t o = {.world_size = 8,
                   .timeout_ms = 60000,
                   .env =
                       "NEXAR_MESH_LAZY_MIN=2\n"
                       "NEXAR_HEARTBEAT_MS=100\n"
                       "NEXAR_HEARTBEAT_TIMEOUT_MS=1000",
                   .tolerate_kill = 1};
    int rc = nt_run(&o, worker_lazy_kill, NULL);
    fprintf(stderr, "lazy mesh, dial to a killed rank: %s\n",
            rc ? "FAILED" : "ok");
    fails += rc;
  }
  return fails ? 1 : 0;
}
