/*
 * Collective error paths over real multi-process clusters, one world per
 * scenario (a mismatch poisons the communicator for good):
 *
 * - mismatch: ranks disagree on the op, the count, the dtype, the root, the
 *   collective itself (allreduce vs bcast, barrier vs allreduce), the forced
 *   allreduce algorithm (NEXAR_ALGO_ALLREDUCE=ring on rank 0, rd elsewhere,
 *   set before nexar_init), the automatic choice (rank 0 turns the
 *   one-round allreduce of a small vector on one host off with
 *   NEXAR_ALLREDUCE_DIRECT_MAX_BYTES=0, so it alone runs rd where the
 *   others run direct) or the per-rank counts of a v-form. Every rank
 *   calls the mismatched collective and then nexar_barrier; the mismatched
 *   call returns NEXAR_ERR_MISMATCH, or NEXAR_OK with correct data (a rank
 *   whose own part finished, e.g. a bcast root), and the barrier returns
 *   NEXAR_ERR_MISMATCH on every rank, all well before NEXAR_OP_TIMEOUT_MS
 *   (5000 ms: both calls must be done within 3000 ms). The error text
 *   (nexar_comm_last_error) says "mismatch" and names both sides.
 * - deadline: one rank skips a collective the others call. The others get
 *   NEXAR_ERR_TIMEOUT after NEXAR_OP_TIMEOUT_MS (1500 ms) and the text lists
 *   the missing rank among the ranks that have not contributed; the world
 *   then finalizes cleanly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "nexar.h"

#define MM_TIMEOUT_MS 5000
#define MM_LIMIT_MS 3000
#define DL_TIMEOUT_MS 1500

enum {
  M_OP,
  M_COUNT,
  M_DTYPE,
  M_ROOT,
  M_COLL,
  M_BARRIER,
  M_ALGO,
  M_AUTO, /* the automatic choice: direct vs rd */
  M_RS_COUNTS,
  M_GATHERV,
  M_LATE, /* mismatch at a later collective number, non-blocking */
  D_ALLTOALL,
  D_ALLREDUCE,
  D_BARRIER
};

typedef struct scen {
  int kind;
  const char *name;
  int world;
  /* Words the error text must contain (besides "mismatch"). */
  const char *tok[3];
} scen_t;

static const scen_t scens[] = {
    {M_OP, "op sum vs prod", 3, {"allreduce", "sum", "prod"}},
    {M_OP, "op sum vs prod", 4, {"allreduce", "sum", "prod"}},
    {M_COUNT, "count 1024 vs 1000", 3, {"allreduce", "1024", "1000"}},
    {M_COUNT, "count 1024 vs 1000", 5, {"allreduce", "1024", "1000"}},
    {M_DTYPE, "dtype f32 vs i32", 3, {"allreduce", "f32", "i32"}},
    {M_ROOT, "bcast root 0 vs 1", 3, {"bcast", "root 0", "root 1"}},
    {M_ROOT, "bcast root 0 vs 1", 4, {"bcast", "root 0", "root 1"}},
    {M_COLL, "allreduce vs bcast", 3, {"allreduce", "bcast", NULL}},
    {M_COLL, "allreduce vs bcast", 4, {"allreduce", "bcast", NULL}},
    {M_BARRIER, "barrier vs allreduce", 3, {"barrier", "allreduce", NULL}},
    {M_BARRIER, "barrier vs allreduce", 5, {"barrier", "allreduce", NULL}},
    {M_ALGO, "algorithm ring vs rd", 3, {"allreduce", "ring", "rd"}},
    {M_ALGO, "algorithm ring vs rd", 4, {"allreduce", "ring", "rd"}},
    {M_AUTO, "automatic direct vs rd", 3, {"allreduce", "direct", "rd"}},
    {M_AUTO, "automatic direct vs rd", 5, {"allreduce", "direct", "rd"}},
    {M_RS_COUNTS, "reduce_scatter recvcounts", 3, {"reduce_scatter", NULL}},
    {M_GATHERV, "gatherv sendcount vs recvcounts", 3, {"gatherv", NULL}},
    {M_LATE, "late op mismatch, non-blocking", 4, {"allreduce", "max", "min"}},
    {D_ALLTOALL, "deadline alltoall, rank 2 absent", 3, {NULL}},
    {D_ALLREDUCE, "deadline allreduce, rank 1 absent", 2, {NULL}},
    {D_BARRIER, "deadline barrier, rank 3 absent", 4, {NULL}},
};
#define NSCEN (int)(sizeof scens / sizeof scens[0])

enum { CNT = 1024 };

static float fin(int r, int i) {
  return (float)((r * 3 + i) % 7);
}

/* The collective each rank calls in a mismatch scenario; checks its data
 * when it returns NEXAR_OK. *checked is set when the result was verified. */
static int mismatched(const scen_t *sc, nexar_comm_t *w, int r, int n,
                      int *rc_out) {
  float *s = malloc(CNT * sizeof(float)), *v = malloc(CNT * sizeof(float));
  NT_CHECK(s && v);
  for (int i = 0; i < CNT; i++) s[i] = fin(r, i), v[i] = -1.0f;
  int rc = NEXAR_ERR_INTERNAL;
  int kind = 0; /* what this rank's call computes: 0 sum, 1 bcast root 0 */
  size_t cnt = CNT;
  switch (sc->kind) {
    case M_OP:
      rc = nexar_allreduce(w, s, v, CNT, NEXAR_FLOAT32,
                           r == n - 1 ? NEXAR_PROD : NEXAR_SUM);
      kind = r == n - 1 ? 2 : 0;
      break;
    case M_COUNT:
      cnt = r == 1 ? 1000 : CNT;
      rc = nexar_allreduce(w, s, v, cnt, NEXAR_FLOAT32, NEXAR_SUM);
      break;
    case M_DTYPE:
      rc = nexar_allreduce(w, s, v, CNT, r == 0 ? NEXAR_INT32 : NEXAR_FLOAT32,
                           NEXAR_SUM);
      kind = r == 0 ? 3 : 0;
      break;
    case M_ROOT: {
      int root = r == n - 1 ? 1 : 0;
      memcpy(v, s, CNT * sizeof(float));
      if (r != root)
        for (int i = 0; i < CNT; i++) v[i] = -1.0f;
      rc = nexar_bcast(w, v, CNT, NEXAR_FLOAT32, root);
      kind = root == 0 ? 1 : 4;
      break;
    }
    case M_COLL:
      if (r == 1) {
        rc = nexar_allreduce(w, s, v, CNT, NEXAR_FLOAT32, NEXAR_SUM);
      } else {
        if (r == 0) memcpy(v, s, CNT * sizeof(float));
        rc = nexar_bcast(w, v, CNT, NEXAR_FLOAT32, 0);
        kind = 1;
      }
      break;
    case M_BARRIER:
      if (r == 0) {
        rc = nexar_barrier(w);
        kind = 5;
      } else {
        cnt = 4;
        rc = nexar_allreduce(w, s, v, cnt, NEXAR_FLOAT32, NEXAR_SUM);
      }
      break;
    case M_ALGO:
    case M_AUTO:
      rc = nexar_allreduce(w, s, v, CNT, NEXAR_FLOAT32, NEXAR_SUM);
      break;
    case M_RS_COUNTS: {
      /* Same total (and so the same fingerprint), different split. */
      size_t rc3[3] = {4, 4, 4};
      if (r == 2) rc3[1] = 5, rc3[2] = 3;
      rc = nexar_reduce_scatter(w, s, v, rc3, NEXAR_FLOAT32, NEXAR_SUM);
      kind = 6;
      break;
    }
    case M_GATHERV: {
      size_t cn[3] = {4, 4, 4}, ds[3] = {0, 4, 8};
      size_t mine = r == 1 ? 6 : 4; /* rank 1 sends more than expected */
      rc = nexar_gatherv(w, s, mine, v, cn, ds, NEXAR_FLOAT32, 0);
      kind = 7;
      break;
    }
    case M_LATE: {
      /* Three good non-blocking allreduces in flight, then the bad one. */
      float a[3][16];
      nexar_req_t *q[4] = {0};
      for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 16; i++) a[k][i] = (float)(r + i + k);
        NT_OKC(w, nexar_iallreduce(w, NEXAR_IN_PLACE, a[k], 16, NEXAR_FLOAT32,
                                   NEXAR_MAX, &q[k]));
      }
      NT_OKC(w, nexar_iallreduce(w, s, v, CNT, NEXAR_FLOAT32,
                                 r == 2 ? NEXAR_MIN : NEXAR_MAX, &q[3]));
      /* The three before it matched: they succeed with the right data,
       * or (the header does not promise more) fail with the mismatch. */
      for (int k = 0; k < 3; k++) {
        int grc = nexar_wait(&q[k], NULL);
        if (grc != NEXAR_OK)
          printf("[%d] %s: good allreduce %d before the mismatch: %s\n", r,
                 sc->name, k, nexar_err_name(grc));
        NT_CHECKF(grc == NEXAR_OK || grc == NEXAR_ERR_MISMATCH,
                  "good allreduce %d: %s", k, nexar_err_name(grc));
        for (int i = 0; i < 16 && grc == NEXAR_OK; i++)
          NT_CHECKF(a[k][i] == (float)(n - 1 + i + k),
                    "good allreduce %d element %d: %g", k, i, (double)a[k][i]);
      }
      rc = nexar_wait(&q[3], NULL);
      kind = r == 2 ? 8 : 9;
      break;
    }
  }
  *rc_out = rc;
  if (rc == NEXAR_OK) {
    /* Only a rank whose own part needed nothing from the others may
     * finish; its data must then be right. */
    for (size_t i = 0; i < cnt && kind != 5 && kind != 6 && kind != 7; i++) {
      float e = 0;
      if (kind == 1) {
        e = fin(0, (int)i);
      } else if (kind == 4) {
        e = fin(1, (int)i);
      } else {
        for (int k = 0; k < n; k++) e += fin(k, (int)i);
      }
      NT_CHECKF(v[i] == e,
                "%s: call returned NEXAR_OK with wrong data: element %zu is "
                "%g, expected %g",
                sc->name, i, (double)v[i], (double)e);
    }
    /* Every rank of a reduce_scatter receives, and so does the gatherv
     * root: they must see the disagreement. */
    NT_CHECKF(kind != 6 && !(kind == 7 && r == 0),
              "%s: %s returned NEXAR_OK despite disagreeing counts", sc->name,
              sc->tok[0]);
  }
  free(s);
  free(v);
  return 0;
}

static int check_text(const scen_t *sc, const char *what, const char *txt) {
  NT_CHECKF(strstr(txt, "mismatch") != NULL,
            "%s: %s error text lacks \"mismatch\": %s", sc->name, what, txt);
  for (int k = 0; k < 3 && sc->tok[k]; k++)
    NT_CHECKF(strstr(txt, sc->tok[k]) != NULL,
              "%s: %s error text lacks \"%s\": %s", sc->name, what, sc->tok[k],
              txt);
  return 0;
}

/* Parses the rank list after "not contributed" ("2" or "1, 3"); returns 1
 * when |rank| is in it. */
static int lists_rank(const char *txt, int rank) {
  const char *p = strstr(txt, "contributed");
  if (!p) return 0;
  p = strchr(p, ':');
  if (!p) return 0;
  p++;
  for (;;) {
    while (*p == ' ' || *p == ',') p++;
    if (*p < '0' || *p > '9') return 0;
    char *end;
    long v = strtol(p, &end, 10);
    if (v == rank) return 1;
    p = end;
  }
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int mm_worker(int index, void *arg) {
  const scen_t *sc = arg;
  if (sc->kind == M_ALGO) /* before nexar_init; the others use rd */
    setenv("NEXAR_ALGO_ALLREDUCE", index == 0 ? "ring" : "rd", 1);
  if (sc->kind == M_AUTO && index == 0)
    setenv("NEXAR_ALLREDUCE_DIRECT_MAX_BYTES", "0", 1);
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  /* A few good collectives first (not allreduce: under M_ALGO the ranks
   * disagree on every allreduce): the mismatch is not collective #0. */
  int32_t x[4] = {r, r, r, r};
  NT_OKC(w, nexar_bcast(w, x, 4, NEXAR_INT32, n - 1));
  NT_CHECK(x[0] == n - 1 && x[3] == n - 1);
  NT_OKC(w, nexar_barrier(w));

  if (sc->kind >= D_ALLTOALL) {
    int absent = n - 1;
    if (r == absent) {
      /* Skip the collective; arrive at finalize after the others timed
       * out. */
      nap_ms(DL_TIMEOUT_MS + 1000);
      nexar_finalize(ctx);
      return 0;
    }
    int32_t s[64], v[64];
    for (int i = 0; i < 64; i++) s[i] = r * 100 + i;
    double t0 = nt_now_ms();
    int rc;
    const char *what;
    if (sc->kind == D_ALLTOALL) {
      rc = nexar_alltoall(w, s, v, 16, NEXAR_INT32), what = "alltoall";
    } else if (sc->kind == D_ALLREDUCE) {
      rc = nexar_allreduce(w, s, v, 64, NEXAR_INT32, NEXAR_SUM);
      what = "allreduce";
    } else {
      rc = nexar_barrier(w), what = "barrier";
    }
    double dt = nt_now_ms() - t0;
    char txt[1024];
    snprintf(txt, sizeof txt, "%s", nexar_comm_last_error(w));
    printf("[%d] %s: %s after %.0f ms: %s\n", r, sc->name, nexar_err_name(rc),
           dt, txt);
    fflush(stdout);
    NT_CHECKF(rc == NEXAR_ERR_TIMEOUT, "%s: %s returned %s", sc->name, what,
              nexar_err_name(rc));
    NT_CHECKF(dt >= DL_TIMEOUT_MS - 50 && dt < DL_TIMEOUT_MS + 1000,
              "%s: timed out after %.0f ms, NEXAR_OP_TIMEOUT_MS=%d", sc->name,
              dt, DL_TIMEOUT_MS);
    NT_CHECKF(strstr(txt, "contributed") != NULL,
              "%s: text does not list the ranks that have not contributed: "
              "%s",
              sc->name, txt);
    /* Every rank of an alltoall or a 2-rank allreduce waits on the absent
     * rank directly; in the two-phase barrier only rank 0 does. */
    if (sc->kind != D_BARRIER || r == 0)
      NT_CHECKF(lists_rank(txt, absent),
                "%s: rank %d missing from the ranks that have not "
                "contributed: %s",
                sc->name, absent, txt);
    double tf = nt_now_ms();
    int frc = nexar_finalize(ctx);
    printf("[%d] %s: finalize %s after %.0f ms\n", r, sc->name,
           nexar_err_name(frc), nt_now_ms() - tf);
    return 0;
  }

  double t0 = nt_now_ms();
  int rc1 = NEXAR_ERR_INTERNAL;
  if (mismatched(sc, w, r, n, &rc1)) return 1;
  double t1 = nt_now_ms();
  char txt1[1024];
  snprintf(txt1, sizeof txt1, "%s", nexar_comm_last_error(w));
  int rc2 = nexar_barrier(w);
  double t2 = nt_now_ms();
  char txt2[1024];
  snprintf(txt2, sizeof txt2, "%s", nexar_comm_last_error(w));
  printf(
      "[%d] %s (n=%d): call %s after %.0f ms, barrier %s after %.0f ms: "
      "%s\n",
      r, sc->name, n, nexar_err_name(rc1), t1 - t0, nexar_err_name(rc2),
      t2 - t0, txt2);
  fflush(stdout);
  NT_CHECKF(rc1 == NEXAR_ERR_MISMATCH || rc1 == NEXAR_OK,
            "%s: mismatched call returned %s: %s", sc->name,
            nexar_err_name(rc1), txt1);
  NT_CHECKF(rc2 == NEXAR_ERR_MISMATCH,
            "%s: barrier after the mismatch returned %s (call: %s): %s",
            sc->name, nexar_err_name(rc2), nexar_err_name(rc1), txt2);
  NT_CHECKF(t2 - t0 < MM_LIMIT_MS,
            "%s: mismatch took %.0f ms to surface (NEXAR_OP_TIMEOUT_MS=%d)",
            sc->name, t2 - t0, MM_TIMEOUT_MS);
  if (rc1 == NEXAR_ERR_MISMATCH)
    if (check_text(sc, "call", txt1)) return 1;
  if (check_text(sc, "barrier", txt2)) return 1;
  /* Still poisoned: a third collective fails at once. */
  int32_t y = 1;
  int rc3 = nexar_allreduce(w, NEXAR_IN_PLACE, &y, 1, NEXAR_INT32, NEXAR_SUM);
  NT_CHECKF(rc3 == NEXAR_ERR_MISMATCH, "%s: later allreduce returned %s",
            sc->name, nexar_err_name(rc3));
  double tf = nt_now_ms();
  int frc = nexar_finalize(ctx); /* its barrier fails too: any result */
  NT_CHECKF(nt_now_ms() - tf < 10000, "%s: finalize took %.0f ms (%s)",
            sc->name, nt_now_ms() - tf, nexar_err_name(frc));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int fails = 0;
  double t0 = nt_now_ms();
  const char *filter = getenv("NEXAR_TEST_FILTER");
  for (int i = 0; i < NSCEN; i++) {
    const scen_t *sc = &scens[i];
    if (filter && *filter && !strstr(sc->name, filter)) continue;
    const char *tp = getenv("NEXAR_TRANSPORT");
    if (sc->kind == M_AUTO && tp && !strcmp(tp, "quic")) {
      printf("skip %s world=%d: the direct choice needs shared memory\n",
             sc->name, sc->world);
      continue;
    }
    char env[128];
    snprintf(env, sizeof env, "NEXAR_OP_TIMEOUT_MS=%d\n",
             sc->kind >= D_ALLTOALL ? DL_TIMEOUT_MS : MM_TIMEOUT_MS);
    nt_opts_t o = {.world_size = sc->world, .timeout_ms = 60000, .env = env};
    double t1 = nt_now_ms();
    int rc = nt_run(&o, mm_worker, (void *)sc);
    printf("%s %s world=%d (%.1f s)\n", rc ? "FAIL" : "ok", sc->name, sc->world,
           (nt_now_ms() - t1) / 1e3);
    fflush(stdout);
    fails += rc ? 1 : 0;
  }
  printf("cases: %d scenarios, %.1f s, %d failed\n", NSCEN,
         (nt_now_ms() - t0) / 1e3, fails);
  return fails ? 1 : 0;
}
