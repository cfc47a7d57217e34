/*
 * Communicators: nexar_comm_split (two and three colours, NEXAR_UNDEFINED,
 * reversed keys), nexar_comm_dup and nexar_comm_free. On every child:
 * allreduce (bit-exact), bcast, allgather, barrier, a p2p ring with
 * ANY_SOURCE, messages with the same tag on the child and the world kept
 * apart, an RPC call, and world collectives interleaved with the child's.
 * dup + free 50 times (leaks show in the ASan build); 40 dups alive at once;
 * one child is left for nexar_finalize to free.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

static int64_t val(int wr) {
  return (int64_t)(wr + 1) * 1000003 + 7;
}

static int rpc_echo(void *ud, int caller, uint16_t fn, const void *req,
                    size_t req_bytes, void *resp, size_t cap,
                    size_t *resp_bytes) {
  (void)ud;
  (void)fn;
  if (req_bytes != sizeof(int32_t) || cap < 2 * sizeof(int32_t)) return -1;
  int32_t out[2];
  memcpy(&out[0], req, sizeof(int32_t));
  out[1] = caller;
  memcpy(resp, out, sizeof(out));
  *resp_bytes = sizeof(out);
  return 0;
}

/* |members|: world ranks of the child in child rank order. */
/* The other collectives on a child, values that identify sender and slot:
 * x(a, b) = 1000 * world rank a + b. */
static int64_t x(int a, int b) {
  return 1000 * (int64_t)a + b;
}

static int rooted_and_more(nexar_comm_t *c, const int *mem, int m, int cr) {
  int wr = mem[cr];
  int64_t *sb = calloc((size_t)m, sizeof(int64_t));
  int64_t *rb = calloc((size_t)m, sizeof(int64_t));
  NT_CHECK(sb && rb);
  /* reduce to child rank 0 of one value per rank */
  int64_t v = x(wr, 1), r = -1, want = 0;
  for (int i = 0; i < m; i++) want += x(mem[i], 1);
  NT_OKC(c, nexar_reduce(c, &v, &r, 1, NEXAR_INT64, NEXAR_SUM, 0));
  if (cr == 0) NT_CHECKF(r == want, "reduce %lld", (long long)r);
  /* reduce_scatter_block: slot j of rank i is x(i, j); rank j gets sum_i */
  for (int j = 0; j < m; j++) sb[j] = x(wr, j);
  NT_OKC(c, nexar_reduce_scatter_block(c, sb, &r, 1, NEXAR_INT64, NEXAR_SUM));
  want = 0;
  for (int i = 0; i < m; i++) want += x(mem[i], cr);
  NT_CHECKF(r == want, "reduce_scatter_block %lld", (long long)r);
  /* alltoall: rank j receives x(i, j) from every i */
  NT_OKC(c, nexar_alltoall(c, sb, rb, 1, NEXAR_INT64));
  for (int i = 0; i < m; i++)
    NT_CHECKF(rb[i] == x(mem[i], cr), "alltoall[%d] %lld", i, (long long)rb[i]);
  /* gather to the last child rank, scatter from it */
  v = x(wr, 2);
  NT_OKC(c, nexar_gather(c, &v, rb, 1, NEXAR_INT64, m - 1));
  if (cr == m - 1)
    for (int i = 0; i < m; i++)
      NT_CHECKF(rb[i] == x(mem[i], 2), "gather[%d] %lld", i, (long long)rb[i]);
  for (int j = 0; j < m; j++) sb[j] = x(wr, 10 + j);
  NT_OKC(c, nexar_scatter(c, sb, &r, 1, NEXAR_INT64, m - 1));
  NT_CHECKF(r == x(mem[m - 1], 10 + cr), "scatter %lld", (long long)r);
  /* inclusive scan in child rank order */
  v = x(wr, 3);
  NT_OKC(c, nexar_scan(c, &v, &r, 1, NEXAR_INT64, NEXAR_SUM));
  want = 0;
  for (int i = 0; i <= cr; i++) want += x(mem[i], 3);
  NT_CHECKF(r == want, "scan %lld, want %lld", (long long)r, (long long)want);
  free(sb);
  free(rb);
  return 0;
}

static int child_ops(nexar_comm_t *c, nexar_comm_t *w, const int *members,
                     int m, int wr, int wn) {
  int cr = -1, cn = -1;
  NT_OKC(c, nexar_comm_rank(c, &cr));
  NT_OKC(c, nexar_comm_size(c, &cn));
  NT_CHECKF(cn == m, "child size %d, want %d", cn, m);
  NT_CHECKF(cr >= 0 && cr < m && members[cr] == wr, "child rank %d (world %d)",
            cr, wr);
  /* allreduce: integers and doubles whose sums are exact. */
  int64_t v = val(wr), s = 0, want = 0;
  double dv = (double)wr * 0.5 + 1.0, ds = 0, dwant = 0;
  for (int i = 0; i < m; i++) {
    want += val(members[i]);
    dwant += (double)members[i] * 0.5 + 1.0;
  }
  NT_OKC(c, nexar_allreduce(c, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(s == want, "child allreduce %lld, want %lld", (long long)s,
            (long long)want);
  /* The parent between two child operations. */
  int64_t ws = 0, wwant = 0;
  for (int i = 0; i < wn; i++) wwant += val(i);
  NT_OKC(w, nexar_allreduce(w, &v, &ws, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(ws == wwant, "world allreduce %lld, want %lld", (long long)ws,
            (long long)wwant);
  NT_OKC(c, nexar_allreduce(c, &dv, &ds, 1, NEXAR_FLOAT64, NEXAR_SUM));
  NT_CHECKF(memcmp(&ds, &dwant, sizeof ds) == 0, "child f64 sum %g want %g", ds,
            dwant);
  /* bcast from the last child rank. */
  int32_t b = cr == m - 1 ? 4200 + wr : -1;
  NT_OKC(c, nexar_bcast(c, &b, 1, NEXAR_INT32, m - 1));
  NT_CHECKF(b == 4200 + members[m - 1], "bcast %d", b);
  /* allgather of world ranks: the child's order. */
  int32_t me = wr, *all = calloc((size_t)m, sizeof(int32_t));
  NT_CHECK(all);
  NT_OKC(c, nexar_allgather(c, &me, all, 1, NEXAR_INT32));
  for (int i = 0; i < m; i++)
    NT_CHECKF(all[i] == members[i], "allgather[%d] = %d, want %d", i, all[i],
              members[i]);
  free(all);
  if (rooted_and_more(c, members, m, cr)) return 1;
  NT_OKC(c, nexar_barrier(c));
  /* p2p ring on the child, the same tag on the world at the same time. */
  int32_t cs = 100000 + wr, wsend = 200000 + wr, cg = -1, wg = -1;
  nexar_req_t *rq[2];
  NT_OKC(c, nexar_isend(c, &cs, 1, NEXAR_INT32, (cr + 1) % m, 9, &rq[0]));
  NT_OKC(w, nexar_isend(w, &wsend, 1, NEXAR_INT32, (wr + 1) % wn, 9, &rq[1]));
  nexar_status_t st;
  NT_OKC(c, nexar_recv(c, &cg, 1, NEXAR_INT32, NEXAR_ANY_SOURCE, 9, &st));
  NT_CHECKF(
      cg == 100000 + members[(cr - 1 + m) % m] && st.source == (cr - 1 + m) % m,
      "child ring got %d from %d", cg, st.source);
  NT_OKC(w, nexar_recv(w, &wg, 1, NEXAR_INT32, (wr - 1 + wn) % wn, 9, NULL));
  NT_CHECKF(wg == 200000 + (wr - 1 + wn) % wn, "world ring got %d", wg);
  NT_OKC(c, nexar_waitall(2, rq, NULL));
  /* RPC on the child: the caller is named by its child rank. */
  int32_t q = 7000 + cr, resp[2] = {-1, -1};
  size_t rb = 0;
  NT_OKC(c, nexar_rpc_call(c, (cr + 1) % m, 1, &q, sizeof q, resp, sizeof resp,
                           &rb, 10000));
  NT_CHECKF(rb == sizeof resp && resp[0] == q && resp[1] == cr,
            "rpc resp %d %d (%zu B)", resp[0], resp[1], rb);
  NT_OKC(c, nexar_barrier(c));
  return 0;
}

static int worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  NT_OKC(w, nexar_rpc_register(w, 1, rpc_echo, NULL));
  int members[8], m;

  /* Two colours, keys = world rank. */
  nexar_comm_t *c2 = NULL;
  NT_OKC(w, nexar_comm_split(w, r % 2, r, &c2));
  NT_CHECK(c2);
  m = 0;
  for (int i = 0; i < n; i++)
    if (i % 2 == r % 2) members[m++] = i;
  if (child_ops(c2, w, members, m, r, n)) return 1;

  /* Three colours from the two-colour child's parent, reversed keys, rank 1
   * in no child; c2 stays alive meanwhile. */
  int color = r == 1 ? NEXAR_UNDEFINED : r % 3;
  nexar_comm_t *c3 = (nexar_comm_t *)&c3;
  NT_OKC(w, nexar_comm_split(w, color, -r, &c3));
  if (color == NEXAR_UNDEFINED) {
    NT_CHECK(c3 == NULL);
    /* The world allreduce the members run inside child_ops. */
    int64_t v = val(r), ws = 0;
    NT_OKC(w, nexar_allreduce(w, &v, &ws, 1, NEXAR_INT64, NEXAR_SUM));
    /* and the same-tag world ring message child_ops sends and expects. */
    int32_t wsend = 200000 + r, wg = -1;
    nexar_req_t *rq;
    NT_OKC(w, nexar_isend(w, &wsend, 1, NEXAR_INT32, (r + 1) % n, 9, &rq));
    NT_OKC(w, nexar_recv(w, &wg, 1, NEXAR_INT32, (r - 1 + n) % n, 9, NULL));
    NT_CHECKF(wg == 200000 + (r - 1 + n) % n, "world ring got %d", wg);
    NT_OKC(w, nexar_wait(&rq, NULL));
  } else {
    NT_CHECK(c3);
    m = 0;
    for (int i = n - 1; i >= 0; i--)
      if (i != 1 && i % 3 == color) members[m++] = i;
    if (child_ops(c3, w, members, m, r, n)) return 1;
  }
  /* The older child still works after the newer one was made. */
  m = 0;
  for (int i = 0; i < n; i++)
    if (i % 2 == r % 2) members[m++] = i;
  if (child_ops(c2, w, members, m, r, n)) return 1;

  /* A split of a child (ids agreed within the child only). */
  nexar_comm_t *g = NULL;
  int c2r;
  NT_OKC(c2, nexar_comm_rank(c2, &c2r));
  NT_OKC(c2, nexar_comm_dup(c2, &g));
  NT_CHECK(g);
  NT_OKC(g, nexar_barrier(g));

  /* dup + free in a loop; the world must still work after each. */
  for (int i = 0; i < 50; i++) {
    nexar_comm_t *d = NULL;
    NT_OKC(w, nexar_comm_dup(w, &d));
    int dr = -1, dn = -1;
    NT_OKC(d, nexar_comm_rank(d, &dr));
    NT_OKC(d, nexar_comm_size(d, &dn));
    NT_CHECKF(dr == r && dn == n, "dup rank %d size %d", dr, dn);
    int64_t v = val(r) + i, s = 0, want = 0;
    for (int k = 0; k < n; k++) want += val(k) + i;
    NT_OKC(d, nexar_allreduce(d, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
    NT_CHECKF(s == want, "dup %d allreduce %lld", i, (long long)s);
    /* A message left unreceived on the dup is dropped by the free. */
    if (i % 10 == 0 && n > 1) {
      int32_t x = i;
      NT_OKC(d, nexar_send(d, &x, 1, NEXAR_INT32, (r + 1) % n, 3));
    }
    NT_OKC(w, nexar_comm_free(&d));
    NT_CHECK(d == NULL);
  }
  /* Many communicators alive at once over the same pairs of ranks. */
  enum { LIVE = 40 };
  nexar_comm_t *live[LIVE];
  for (int i = 0; i < LIVE; i++) NT_OKC(w, nexar_comm_dup(w, &live[i]));
  for (int i = LIVE - 1; i >= 0; i--) {
    int64_t v = val(r) * (i + 1), s = 0, want = 0;
    for (int k = 0; k < n; k++) want += val(k) * (i + 1);
    NT_OKC(live[i],
           nexar_allreduce(live[i], &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
    NT_CHECKF(s == want, "live comm %d: %lld", i, (long long)s);
  }
  for (int i = 0; i < LIVE; i++) NT_OKC(w, nexar_comm_free(&live[i]));
  NT_CHECK(nexar_comm_free(&w) == NEXAR_ERR_INVALID_ARG);
  NT_OKC(w, nexar_barrier(w));

  NT_OKC(g, nexar_comm_free(&g));
  NT_OKC(c2, nexar_comm_free(&c2));
  /* c3 is left for nexar_finalize. */
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  int fails = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int world = 4; world <= 5; world++) {
    nt_opts_t o = {.world_size = world, .timeout_ms = 120000};
    int rc = nt_run(&o, worker, NULL);
    printf("%s comm world=%d\n", rc ? "FAIL" : "ok", world);
    fails += rc ? 1 : 0;
  }
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
