/*
 * The multi-process test harness used by every network test.
 *
 * nt_run() starts a seed and forked workers through the launch core
 * (tools/launch.h), runs a test function in each worker, and fails when any
 * worker fails, dies of a signal or hangs past the limit. A worker joins the
 * cluster with nt_join() and checks its results with the NT_* macros, which
 * print "[index] file:line: ..." and make the worker function return 1.
 *
 *   static int worker(int index, void *arg) {
 *     nexar_ctx_t *ctx;
 *     NT_OK(nt_join(&ctx));
 *     nexar_comm_t *world = nexar_comm_world(ctx);
 *     int rank;
 *     NT_OK(nexar_comm_rank(world, &rank));
 *     NT_CHECK(rank == index);
 *     NT_OK(nexar_finalize(ctx));
 *     return 0;
 *   }
 *   ...
 *   nt_opts_t o = {.world_size = 4};
 *   assert_int_equal(nt_run(&o, worker, NULL), 0);
 *
 * nt_run must be called from a process that has no other thread (the
 * workers are forked), i.e. not after nexar_init in the test's own process.
 */
#ifndef NEXAR_TEST_HARNESS_H
#define NEXAR_TEST_HARNESS_H

#include "nexar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A worker body: runs in a forked child with the worker environment set.
 * |index| is 0..nprocs-1 and is also the requested NEXAR_RANK. Return 0 for
 * pass, anything else for fail. */
typedef int (*nt_worker_fn)(int index, void *arg);

/* Values of nt_opts.seed_must_form. */
#define NT_SEED_AUTO 0      /* must form when nprocs >= world_size */
#define NT_SEED_REQUIRED 1  /* must form (report cluster formation) */
#define NT_SEED_OPTIONAL -1 /* the seed's fate is ignored */

typedef struct nt_opts {
  int world_size;     /* NEXAR_WORLD_SIZE; must be >= 1 */
  int nprocs;         /* workers started; 0 => world_size */
  int timeout_ms;     /* hard limit for the whole run, ms; 0 => 60000 */
  int seed_must_form; /* NT_SEED_AUTO (0, default), _REQUIRED or _OPTIONAL */
  /* Optional "K=V\nK=V" set in every worker (and the seed) after the
   * harness's own variables, so it overrides them; a bare "K" unsets K. The
   * harness sets NEXAR_BOOTSTRAP_TIMEOUT_MS=10000 and
   * NEXAR_OP_TIMEOUT_MS=30000 unless this sets them. */
  const char *env;
  /* 1: a worker killed by SIGKILL (a fault-injection victim) does not fail
   * the run; the others go on. */
  int tolerate_kill;
} nt_opts_t;

/* Index of this worker in a worker process (-1 in the test's own process).
 * Used by the NT_* macros. */
extern int nt_worker_index;

/*
 * Runs |fn|(index, |arg|) in o->nprocs forked workers joined to a fresh
 * seed with a fresh secret, and waits for them, at most o->timeout_ms. When
 * a worker fails the others are stopped (SIGTERM, then SIGKILL after 2 s).
 * Returns 0 when every worker returned 0 within the limit and, if required
 * (see seed_must_form), the seed formed the cluster; otherwise prints which
 * worker failed, died of which signal or hung, and returns 1.
 */
int nt_run(const nt_opts_t *o, nt_worker_fn fn, void *arg);

/*
 * nt_run(o, fn, &c) for the test case numbered |c| and called |name| (fn
 * reads *(int *)arg): prints "ok NAME world=N" or "FAIL NAME world=N" and
 * returns 0 or 1.
 */
int nt_run_case(const nt_opts_t *o, nt_worker_fn fn, int c, const char *name);

/*
 * In a worker: joins the cluster with nexar_init(NULL, ctx), i.e. from the
 * environment nt_run set up. Returns nexar_init's result; on failure prints
 * the code name, nexar_strerror and nexar_last_error().
 */
int nt_join(nexar_ctx_t **ctx);

/*
 * In a worker: nt_join, then the world communicator, this process's rank and
 * the world size (|size| may be NULL). nt_run requests rank = worker index,
 * so a different rank is an error. Returns NEXAR_OK, nexar_init's error, or
 * NEXAR_ERR_INTERNAL (printed) when the rank is not the worker index.
 */
int nt_join_world(nexar_ctx_t **ctx, nexar_comm_t **world, int *rank,
                  int *size);

/* CLOCK_MONOTONIC in milliseconds, for measuring test phases. */
double nt_now_ms(void);

/* This process's resident set size (VmRSS) in KiB; -1 if unknown. */
long nt_rss_kb(void);

/* Test values: element |i| of rank |r| as an int64, and as a double that
 * sums exactly in any order (small multiples of 1/4). */
int64_t nt_ival(int r, int i);
double nt_dval(int r, size_t i);
/* Test bytes: fills |n| bytes with the pattern of |seed|; the index of the
 * first byte of |b| that differs from it, or |n| when none does. */
void nt_fill(uint8_t *b, size_t n, unsigned seed);
size_t nt_check_fill(const uint8_t *b, size_t n, unsigned seed);
/* Allgathers {nt_ival(r, 0), nt_ival(r, 1), r} on |w| (rank |r| of |n|, at
 * most 64) and checks every slot. Returns 0, or 1 after reporting. */
int nt_check_allgather(nexar_comm_t *w, int r, int n);

/* An RPC handler (nexar_rpc_handler_t) that answers with the request's
 * bytes; NEXAR_ERR_INVALID_ARG when they do not fit the response. */
int nt_rpc_echo(void *ud, int caller, uint16_t fn, const void *req, size_t n,
                void *resp, size_t cap, size_t *out);

/* Prints "[index] file:line: <formatted message>" to stderr in one write.
 * Used by the macros below. */
void nt_fail(const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prints "[index] file:line: check failed: <cond>: <formatted message>".
 * Used by NT_CHECKF. */
void nt_fail_check(const char *file, int line, const char *cond,
                   const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Prints the failure of |expr| with result |rc|: its code name, its text and
 * nexar_comm_last_error(comm) (comm may be NULL). Used by NT_OK/NT_OKC. */
void nt_fail_rc(const char *file, int line, const char *expr, int rc,
                const nexar_comm_t *comm);

/* In a worker function: fails (returns 1) when |cond| is false. */
#define NT_CHECK(cond)                                        \
  do {                                                        \
    if (!(cond)) {                                            \
      nt_fail(__FILE__, __LINE__, "check failed: %s", #cond); \
      return 1;                                               \
    }                                                         \
  } while (0)

/* As NT_CHECK, with a printf-style message: NT_CHECKF(x == 3, "x=%d", x). */
#define NT_CHECKF(cond, ...)                                 \
  do {                                                       \
    if (!(cond)) {                                           \
      nt_fail_check(__FILE__, __LINE__, #cond, __VA_ARGS__); \
      return 1;                                              \
    }                                                        \
  } while (0)

/* Fails (returns 1) when |expr| does not return NEXAR_OK; prints the code
 * and nexar_comm_last_error(NULL). */
#define NT_OK(expr)                                        \
  do {                                                     \
    int nt_rc_ = (expr);                                   \
    if (nt_rc_ != NEXAR_OK) {                              \
      nt_fail_rc(__FILE__, __LINE__, #expr, nt_rc_, NULL); \
      return 1;                                            \
    }                                                      \
  } while (0)

/* As NT_OK, printing the last error recorded on communicator |comm|. */
#define NT_OKC(comm, expr)                                   \
  do {                                                       \
    int nt_rc_ = (expr);                                     \
    if (nt_rc_ != NEXAR_OK) {                                \
      nt_fail_rc(__FILE__, __LINE__, #expr, nt_rc_, (comm)); \
      return 1;                                              \
    }                                                        \
  } while (0)

/* The relay tests' ring (test_relay_credit, test_relay_rdv, test_relay_rpc):
 * 5 or more processes on kregular:2, so messages two hops away are relayed,
 * with two data streams per link and the smallest eager and relay windows
 * (docs/topology.md section 10). Environment lines for nt_opts_t.env. */
#define NT_RELAY_RING                                                        \
  "NEXAR_TOPOLOGY=kregular:2\nNEXAR_MAX_STREAMS=4\nNEXAR_EAGER_BYTES=1024\n" \
  "NEXAR_RELAY_WINDOW_BYTES=1024\n"

#ifdef __cplusplus
}
#endif
#endif /* NEXAR_TEST_HARNESS_H */
