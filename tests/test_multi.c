/*
 * Bucketed multi-tensor allreduce (nexar_multi_*, nexar_allreduce_multi,
 * nexar_iallreduce_multi) over real multi-process clusters with small
 * buckets (NEXAR_BUCKET_BYTES=65536), world sizes 1..5:
 *   exact   80 float32 tensors of random sizes (empty ones, ones alone in a
 *           bucket, ones packed together), each written just before
 *           it is marked ready, in a different random order on every
 *           rank (a bucket started early would reduce garbage), three steps of
 * one object: every element equals the exact sum (small integers); the blocking
 *           form on int32 equals per-tensor nexar_allreduce bit for bit;
 *           the non-blocking form completed by nexar_multi_test; the info
 *           counts buckets and packed bytes as the cut predicts
 *   bad     a NULL or empty list, mixed dtypes, overlapping buffers, a NULL
 *           buffer with elements, an unsupported (dtype, op) pair, an index
 *           out of range, a tensor marked twice, a wait with a tensor not
 *           marked: each a clear error, the buffers untouched, and the
 *           object still completes its step correctly afterwards
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

enum { C_EXACT, C_BAD, C_COUNT };

#define NT 80
#define BUCKET 65536

/* The tensor sizes: the same on every rank (fixed seed). */
static void make_sizes(size_t *cnt) {
  unsigned s = 12345;
  for (int i = 0; i < NT; i++) {
    s = s * 1103515245u + 12345u;
    unsigned k = (s >> 8) % 10;
    cnt[i] = k == 0   ? 0                             /* empty */
             : k == 1 ? BUCKET / 4 + (s >> 4) % 30000 /* alone */
                      : (s >> 4) % 3000;              /* packed */
  }
}

static float val(int r, int step, int i, size_t j) {
  return (float)((r + 1) * (int)((i * 7 + (int)j) % 13) - 6 + step);
}

/* A random permutation of 0..n-1 from |seed|. */
static void shuffle(size_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = i;
  for (size_t i = n; i > 1; i--) {
    seed = seed * 1103515245u + 12345u;
    size_t j = (seed >> 8) % i, t = p[i - 1];
    p[i - 1] = p[j];
    p[j] = t;
  }
}

static int case_exact(nexar_comm_t *w, int r, int n) {
  size_t cnt[NT], order[NT];
  make_sizes(cnt);
  float *buf[NT];
  nexar_tensor_t t[NT];
  for (int i = 0; i < NT; i++) {
    buf[i] = malloc(cnt[i] * sizeof(float) + 1);
    NT_CHECK(buf[i]);
    t[i] = (nexar_tensor_t){buf[i], cnt[i], NEXAR_FLOAT32};
  }
  nexar_multi_t *m;
  NT_OK(nexar_multi_create(w, t, NT, NEXAR_SUM, &m));
  for (int step = 0; step < 3; step++) {
    /* Each tensor gets its input just before it is marked ready (garbage
     * until then): a bucket started early would reduce garbage. */
    for (int i = 0; i < NT; i++)
      for (size_t j = 0; j < cnt[i]; j++) buf[i][j] = 1e30f;
    shuffle(order, NT, (unsigned)(r * 977 + step * 31 + 1));
    for (int k = 0; k < NT; k++) {
      int i = (int)order[k];
      for (size_t j = 0; j < cnt[i]; j++) buf[i][j] = val(r, step, i, j);
      NT_OK(nexar_multi_ready(m, order[k]));
    }
    NT_OK(nexar_multi_wait(m));
    for (int i = 0; i < NT; i++)
      for (size_t j = 0; j < cnt[i]; j++) {
        float want = 0;
        for (int q = 0; q < n; q++) want += val(q, step, i, j);
        if (buf[i][j] != want) {
          printf("[%d] step %d tensor %d [%zu]: %g, want %g\n", r, step, i, j,
                 (double)buf[i][j], (double)want);
          return 1;
        }
      }
  }
  /* The cut: consecutive tensors while they fit a bucket. */
  nexar_multi_info_t info;
  NT_OK(nexar_multi_get_info(m, &info));
  size_t nb = 0, packed = 0;
  uint64_t bytes = 0, pbytes = 0, in = 0;
  size_t members = 0;
  for (int i = 0; i < NT; i++) {
    uint64_t b = cnt[i] * sizeof(float);
    if (i == 0 || in + b > BUCKET) {
      if (members > 1 && in) packed++, pbytes += in;
      nb++;
      in = 0;
      members = 0;
    }
    in += b;
    members++;
    bytes += b;
  }
  if (members > 1 && in) packed++, pbytes += in;
  NT_CHECK(info.buckets == nb && info.packed == packed && packed > 2 &&
           info.bytes == bytes && info.packed_bytes == pbytes &&
           info.steps == 3 && info.comm_ns >= info.wait_ns);
  NT_OK(nexar_multi_free(&m));
  NT_CHECK(m == NULL);

  /* int32: the blocking form against per-tensor allreduce, bit for bit. */
  int32_t *a[NT], *b[NT];
  nexar_tensor_t ti[NT];
  for (int i = 0; i < NT; i++) {
    a[i] = malloc(cnt[i] * 4 + 1);
    b[i] = malloc(cnt[i] * 4 + 1);
    NT_CHECK(a[i] && b[i]);
    for (size_t j = 0; j < cnt[i]; j++)
      a[i][j] = b[i][j] = (int32_t)nt_ival(r, (int)(i * 5000 + (int)j));
    ti[i] = (nexar_tensor_t){a[i], cnt[i], NEXAR_INT32};
  }
  NT_OK(nexar_allreduce_multi(w, ti, NT, NEXAR_SUM));
  for (int i = 0; i < NT; i++) {
    NT_OK(nexar_allreduce(w, NEXAR_IN_PLACE, b[i], cnt[i], NEXAR_INT32,
                          NEXAR_SUM));
    NT_CHECK(memcmp(a[i], b[i], cnt[i] * 4) == 0);
  }
  /* The non-blocking form, completed by polling (MAX this time). */
  for (int i = 0; i < NT; i++)
    for (size_t j = 0; j < cnt[i]; j++) a[i][j] = (int32_t)(r * 3 + (int)j % 7);
  NT_OK(nexar_iallreduce_multi(w, ti, NT, NEXAR_MAX, &m));
  int done = 0;
  while (!done) NT_OK(nexar_multi_test(m, &done));
  NT_OK(nexar_multi_free(&m));
  for (int i = 0; i < NT; i++)
    for (size_t j = 0; j < cnt[i]; j++)
      NT_CHECK(a[i][j] == (int32_t)((n - 1) * 3 + (int)j % 7));
  for (int i = 0; i < NT; i++) {
    free(buf[i]);
    free(a[i]);
    free(b[i]);
  }
  NT_OK(nexar_barrier(w));
  return 0;
}

static int case_bad(nexar_comm_t *w, int r, int n) {
  float x[64], y[64];
  int32_t z[8];
  for (int i = 0; i < 64; i++) x[i] = y[i] = (float)(r + i);
  nexar_multi_t *m = (nexar_multi_t *)&m;
  NT_CHECK(nexar_multi_create(w, NULL, 2, NEXAR_SUM, &m) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(m == NULL);
  nexar_tensor_t one = {x, 4, NEXAR_FLOAT32};
  NT_CHECK(nexar_multi_create(w, &one, 0, NEXAR_SUM, &m) ==
           NEXAR_ERR_INVALID_ARG);
  nexar_tensor_t mixed[2] = {{x, 4, NEXAR_FLOAT32}, {z, 8, NEXAR_INT32}};
  NT_CHECK(nexar_allreduce_multi(w, mixed, 2, NEXAR_SUM) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(strstr(nexar_comm_last_error(w), "tensor 1 has another dtype"));
  nexar_tensor_t over[3] = {
      {y, 8, NEXAR_FLOAT32}, {x, 10, NEXAR_FLOAT32}, {x + 9, 3, NEXAR_FLOAT32}};
  NT_CHECK(nexar_allreduce_multi(w, over, 3, NEXAR_SUM) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(strstr(nexar_comm_last_error(w), "tensors 1 and 2 overlap"));
  nexar_tensor_t nul[2] = {{x, 4, NEXAR_FLOAT32}, {NULL, 4, NEXAR_FLOAT32}};
  NT_CHECK(nexar_allreduce_multi(w, nul, 2, NEXAR_SUM) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_allreduce_multi(w, &one, 1, NEXAR_BAND) ==
           NEXAR_ERR_UNSUPPORTED);
  for (int i = 0; i < 64; i++) NT_CHECK(x[i] == (float)(r + i));
  /* Usage errors on a live object; then its step still completes. */
  nexar_tensor_t two[3] = {{x, 10, NEXAR_FLOAT32},
                           {NULL, 0, NEXAR_FLOAT32},
                           {x + 10, 30, NEXAR_FLOAT32}};
  NT_OK(nexar_multi_create(w, two, 3, NEXAR_SUM, &m));
  NT_CHECK(nexar_multi_ready(m, 3) == NEXAR_ERR_INVALID_ARG);
  NT_OK(nexar_multi_ready(m, 2));
  NT_CHECK(nexar_multi_ready(m, 2) == NEXAR_ERR_INVALID_USAGE);
  NT_CHECK(nexar_multi_wait(m) == NEXAR_ERR_INVALID_USAGE);
  NT_CHECK(strstr(nexar_comm_last_error(w), "tensor 0 not marked"));
  NT_OK(nexar_multi_ready(m, 1));
  NT_OK(nexar_multi_ready(m, 0));
  NT_OK(nexar_multi_wait(m));
  NT_OK(nexar_multi_free(&m));
  for (int i = 0; i < 64; i++) {
    float want = i < 40 ? (float)(n * (n - 1) / 2 + n * i) : (float)(r + i);
    NT_CHECK(x[i] == want);
  }
  NT_CHECK(nexar_multi_free(NULL) == NEXAR_OK);
  NT_OK(nexar_barrier(w));
  return 0;
}

typedef int (*case_fn)(nexar_comm_t *w, int r, int n);
static const case_fn cases[C_COUNT] = {case_exact, case_bad};
static const char *const names[C_COUNT] = {"exact", "bad"};

static int worker(int index, void *arg) {
  int c = *(const int *)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  (void)index;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (cases[c](w, r, n)) return 1;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static int run_case(int c, int world) {
  nt_opts_t o = {.world_size = world,
                 .timeout_ms = 60000,
                 .env = "NEXAR_BUCKET_BYTES=65536"};
  return nt_run_case(&o, worker, c, names[c]);
}

int main(void) {
  int fails = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int np = 1; np <= 5; np++) fails += run_case(C_EXACT, np);
  fails += run_case(C_BAD, 2);
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
