/*
 * The multi-process test harness: a thin layer over the launch core
 * (tools/launch.c) that adds the test defaults (time limits, seed policy)
 * and the failure-reporting helpers behind the NT_* macros.
 */
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"

#define NT_DEFAULT_TIMEOUT_MS 60000
/* Bootstrap and per-call limits in workers: far below the run's limit, so
 * that a stuck call fails with a message from the library instead of the
 * worker being killed silently at the deadline. */
#define NT_DEFAULT_ENV \
  "NEXAR_BOOTSTRAP_TIMEOUT_MS=10000\nNEXAR_OP_TIMEOUT_MS=30000\n"
/* Once every worker has ended, how long the seed may take to report that
 * the cluster formed. Formation completes before any worker's nexar_init
 * returns, so this is only reached by a seed that never formed. */
#define NT_SEED_GRACE_MS 5000

int nt_worker_index = -1;

/* What the worker trampoline needs: the user's function and argument. */
typedef struct nt_call {
  nt_worker_fn fn;
  void *arg;
} nt_call_t;

/* Runs in the worker: records the index for the NT_* macros, then calls
 * the test's function. */
static int nt_trampoline(int index, void *p) {
  const nt_call_t *call = p;
  nt_worker_index = index;
  return call->fn(index, call->arg);
}

int nt_run(const nt_opts_t *o, nt_worker_fn fn, void *arg) {
  if (!o || !fn || o->world_size < 1 || o->nprocs < 0) {
    fprintf(stderr, "nt_run: bad options (world_size must be >= 1)\n");
    return 1;
  }
  int nprocs = o->nprocs > 0 ? o->nprocs : o->world_size;
  int must_form =
      o->seed_must_form == NT_SEED_REQUIRED ||
      (o->seed_must_form == NT_SEED_AUTO && nprocs >= o->world_size);

  /* The harness defaults come first so that o->env, applied after them,
   * overrides them. */
  size_t envlen = strlen(NT_DEFAULT_ENV) + (o->env ? strlen(o->env) : 0) + 1;
  char *env = malloc(envlen);
  if (!env) {
    fprintf(stderr, "nt_run: out of memory\n");
    return 1;
  }
  snprintf(env, envlen, "%s%s", NT_DEFAULT_ENV, o->env ? o->env : "");

  nt_call_t call = {fn, arg};
  nexar_launch_opts_t lo;
  memset(&lo, 0, sizeof lo);
  lo.nprocs = nprocs;
  lo.world_size = o->world_size;
  lo.timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : NT_DEFAULT_TIMEOUT_MS;
  /* A seed whose fate is ignored is stopped as soon as the workers end. */
  lo.seed_grace_ms = must_form ? NT_SEED_GRACE_MS : 1;
  lo.env = env;
  lo.tolerate_kill = o->tolerate_kill;
  lo.fn = nt_trampoline;
  lo.fn_arg = &call;

  nexar_launch_t l;
  int failed = 0;
  if (launch_start(&l, &lo) < 0) {
    fprintf(stderr, "nt_run: cannot start %d workers: %s\n", nprocs, l.error);
    failed = 1;
  } else {
    launch_outcome_t outcome = launch_wait(&l);
    launch_report(&l, stderr, "nt_run");
    failed = outcome != LAUNCH_OK;
    if (outcome == LAUNCH_OK && must_form &&
        l.seed_state != LAUNCH_SEED_FORMED) {
      char d[700];
      fprintf(stderr, "nt_run: every worker passed but the seed %s\n",
              launch_describe(&l, -1, d, sizeof d));
      failed = 1;
    }
  }
  launch_free(&l);
  free(env);
  return failed;
}

int nt_join(nexar_ctx_t **ctx) {
  int rc = nexar_init(NULL, ctx);
  if (rc != NEXAR_OK)
    fprintf(stderr, "[%d] nexar_init failed: %s (%s): %s\n", nt_worker_index,
            nexar_err_name(rc), nexar_strerror(rc), nexar_last_error());
  return rc;
}

int nt_join_world(nexar_ctx_t **ctx, nexar_comm_t **world, int *rank,
                  int *size) {
  int rc = nt_join(ctx);
  if (rc != NEXAR_OK) return rc;
  *world = nexar_comm_world(*ctx);
  nexar_comm_rank(*world, rank);
  if (size) nexar_comm_size(*world, size);
  if (*rank != nt_worker_index) {
    fprintf(stderr, "[%d] got rank %d, requested %d\n", nt_worker_index, *rank,
            nt_worker_index);
    return NEXAR_ERR_INTERNAL;
  }
  return NEXAR_OK;
}

int nt_run_case(const nt_opts_t *o, nt_worker_fn fn, int c, const char *name) {
  int rc = nt_run(o, fn, &c);
  printf("%s %s world=%d\n", rc ? "FAIL" : "ok", name, o->world_size);
  fflush(stdout);
  return rc ? 1 : 0;
}

double nt_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int64_t nt_ival(int r, int i) {
  return (int64_t)(r + 1) * 1000003 + 7 * i;
}

double nt_dval(int r, size_t i) {
  return (double)((r + 1) * (int)(i % 1000)) + 0.25 * r;
}

static uint8_t pat(size_t i, unsigned seed) {
  return (uint8_t)(i * 131u + seed * 7u + (i >> 8) + (i >> 16) * 3u);
}

void nt_fill(uint8_t *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = pat(i, seed);
}

size_t nt_check_fill(const uint8_t *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != pat(i, seed)) return i;
  return n;
}

int nt_check_allgather(nexar_comm_t *w, int r, int n) {
  int64_t mine[3] = {nt_ival(r, 0), nt_ival(r, 1), r}, all[3 * 64];
  NT_CHECK(n <= 64);
  NT_OKC(w, nexar_allgather(w, mine, all, 3, NEXAR_INT64));
  for (int k = 0; k < n; k++)
    NT_CHECKF(all[3 * k] == nt_ival(k, 0) && all[3 * k + 1] == nt_ival(k, 1) &&
                  all[3 * k + 2] == k,
              "allgather slot %d", k);
  return 0;
}

long nt_rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

int nt_rpc_echo(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                void *resp, size_t cap, size_t *out) {
  (void)ud, (void)caller, (void)fn;
  if (n > cap) return NEXAR_ERR_INVALID_ARG;
  memcpy(resp, req, n);
  *out = n;
  return 0;
}

/* Writes "[index] file:line: " + the formatted text + "\n" to stderr in one
 * write, so that lines of concurrent workers do not interleave. */
static void nt_vprint(const char *file, int line, const char *head,
                      const char *fmt, va_list ap) {
  char buf[2048];
  int n = snprintf(buf, sizeof buf, "[%d] %s:%d: %s", nt_worker_index, file,
                   line, head ? head : "");
  if (n < 0) return;
  if ((size_t)n < sizeof buf) {
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    if (m > 0) n += m;
  }
  if ((size_t)n > sizeof buf - 2) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  fflush(stdout);
  ssize_t w = write(2, buf, (size_t)n);
  (void)w;
}

void nt_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nt_vprint(file, line, NULL, fmt, ap);
  va_end(ap);
}

void nt_fail_check(const char *file, int line, const char *cond,
                   const char *fmt, ...) {
  char head[512];
  snprintf(head, sizeof head, "check failed: %s: ", cond);
  va_list ap;
  va_start(ap, fmt);
  nt_vprint(file, line, head, fmt, ap);
  va_end(ap);
}

void nt_fail_rc(const char *file, int line, const char *expr, int rc,
                const nexar_comm_t *comm) {
  nt_fail(file, line, "%s failed: %s (%s): %s", expr, nexar_err_name(rc),
          nexar_strerror(rc), nexar_comm_last_error(comm));
}
