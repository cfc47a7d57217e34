/*
 * Faults that must become errors or recoveries, never freezes
 * (docs/fault-tolerance.md, "No fault freezes a job"):
 *
 *   route_loss     4 ranks, rank 2 bound to 127.0.0.3; a route rule makes
 *                  127.0.0.3 unreachable mid-job (every send to it fails,
 *                  its own packets still arrive). The others declare it
 *                  failed ("no route") within the heartbeat timeout and
 *                  rebuild without it (automatic, or nexar_comm_shrink
 *                  under manual); rank 2 stops with an error, and under
 *                  manual its shrink is refused (it may be the one cut
 *                  off). Bit-exact allreduces before and after.
 *   unroutable     nexar_init with a seed that has no route (only lo in the
 *                  namespace) ends at the bootstrap deadline, naming why.
 *   family         an IPv6 NEXAR_BIND_ADDR with an IPv4 seed: an error at
 *                  once, naming both settings.
 *   seed_gone      nothing listens at the seed address: said while waiting
 *                  and in the final error.
 *   late_resume    4 ranks, rank 3 SIGSTOPped; the others detect it, rebuild
 *                  (manual: nexar_comm_shrink; automatic), finish and exit;
 *                  only then is rank 3 continued. It must get
 *                  NEXAR_ERR_EXCLUDED and never complete another operation.
 *
 * The network cases run in a network namespace this test creates
 * (unshare(CLONE_NEWNET), so it needs root); they are skipped, saying so,
 * where that is not allowed. Each case runs in forked processes under the
 * harness's hard limit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

#define HB_MS 200
#define HB_TIMEOUT_MS 2000
#define NET_ENV                                               \
  "NEXAR_HEARTBEAT_MS=200\nNEXAR_HEARTBEAT_TIMEOUT_MS=2000\n" \
  "NEXAR_OP_TIMEOUT_MS=10000\n"
#define MAXW 8
#define CUT_AT 10 /* iterations before the route is cut */
#define ITERS 60

typedef struct shared {
  pid_t pid[MAXW];
  double t_fault;       /* CLOCK_MONOTONIC ms of the fault */
  double back_ms[MAXW]; /* when each rank's first failed call returned */
  int done;             /* survivors that finished (late_resume) */
} shared_t;

static shared_t *sh;
static bool have_netns;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int sh_cmd(const char *cmd) {
  int rc = system(cmd);
  if (rc != 0) fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
  return rc;
}

/* The expected allreduce result of iteration |it| on |comm|: the sum over
 * its members of (id + 1) * (it + 1) * (i + 1) for element i. */
static int check_sum(nexar_comm_t *comm, int it, const int64_t *got,
                     int count) {
  int n;
  NT_OK(nexar_comm_size(comm, &n));
  int64_t ids = 0;
  for (int r = 0; r < n; r++) {
    int id;
    NT_OK(nexar_comm_id_of(comm, r, &id));
    ids += id + 1;
  }
  for (int i = 0; i < count; i++)
    NT_CHECKF(got[i] == ids * (it + 1) * (i + 1),
              "iteration %d element %d: %lld, want %lld", it, i,
              (long long)got[i], (long long)(ids * (it + 1) * (i + 1)));
  return 0;
}

static int allreduce_it(nexar_comm_t *w, int id, int it, int64_t *a, int64_t *b,
                        int count) {
  for (int i = 0; i < count; i++) a[i] = (int64_t)(id + 1) * (it + 1) * (i + 1);
  return nexar_allreduce(w, a, b, count, NEXAR_INT64, NEXAR_SUM);
}

/* ---- route_loss ---- */

static int route_loss(int index, void *arg) {
  bool manual = arg != NULL;
  if (index == 2) setenv("NEXAR_BIND_ADDR", "127.0.0.3", 1);
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  enum { COUNT = 1024 };
  static int64_t a[COUNT], b[COUNT];
  int it = 0, rc = NEXAR_OK;
  for (; it < CUT_AT; it++) {
    NT_OKC(w, allreduce_it(w, index, it, a, b, COUNT));
    if (check_sum(w, it, b, COUNT)) return 1;
  }
  NT_OKC(w, nexar_barrier(w));
  if (index == 0) {
    sh->t_fault = nt_now_ms();
    /* Sends to 127.0.0.3 now fail with "no route"; its own still leave. */
    if (sh_cmd("ip rule add pref 50 to 127.0.0.3 unreachable")) return 1;
  }
  /* Until the first error. */
  for (; it < ITERS && rc == NEXAR_OK; it++) {
    rc = allreduce_it(w, index, it, a, b, COUNT);
    if (rc == NEXAR_OK && check_sum(w, it, b, COUNT)) return 1;
  }
  double back = nt_now_ms() - sh->t_fault;
  sh->back_ms[index] = back;
  const char *e = nexar_comm_last_error(w);
  if (index == 2) {
    /* Cut off: it hears nobody and cannot be heard; it is out, never on. */
    NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED ||
                  rc == NEXAR_ERR_EXCLUDED,
              "cut-off rank: %s: %s", nexar_err_name(rc), e);
    if (manual) {
      /* Everyone else went silent at once: it may be the one cut off, so
       * it must not go on as a world of one. */
      nexar_comm_t *nc = NULL;
      int src = nexar_comm_shrink(w, &nc);
      NT_CHECKF(src == NEXAR_ERR_PEER_FAILED || src == NEXAR_ERR_EXCLUDED,
                "cut-off rank shrank: %s", nexar_err_name(src));
      NT_CHECKF(src == NEXAR_ERR_EXCLUDED ||
                    strstr(nexar_comm_last_error(w), "cut off"),
                "shrink error: %s", nexar_comm_last_error(w));
      NT_CHECK(nc == NULL);
    }
    for (int k = 0; k < 3; k++) {
      double t0 = nt_now_ms();
      int r2 = allreduce_it(w, index, it, a, b, COUNT);
      NT_CHECKF(r2 != NEXAR_OK, "the cut-off rank completed an allreduce");
      NT_CHECKF(nt_now_ms() - t0 < 1000,
                "a call after the verdict took %.0f ms", nt_now_ms() - t0);
    }
    nexar_finalize(ctx);
    return 0;
  }
  NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED,
            "survivor: %s: %s", nexar_err_name(rc), e);
  NT_CHECKF(back <= HB_TIMEOUT_MS + 1500,
            "survivor failed %.0f ms after the cut", back);
  nexar_failure_t f[MAXW];
  int nf = 0;
  NT_OK(nexar_failures(ctx, f, MAXW, &nf));
  NT_CHECKF(nf >= 1 && f[0].id == 2, "failure list: %d entries, first id %d",
            nf, nf ? f[0].id : -1);
  NT_CHECKF(f[0].reason == NEXAR_FAIL_UNREACHABLE ||
                f[0].reason == NEXAR_FAIL_REPORTED,
            "reason %d", f[0].reason);
  /* Automatic: the world was rebuilt in place, without rank 2; manual: a
   * shrink builds that world. */
  if (manual) {
    nexar_comm_t *nc = NULL;
    NT_OKC(w, nexar_comm_shrink(w, &nc));
    w = nc;
  }
  NT_OK(nexar_comm_size(w, &n));
  NT_CHECKF(n == 3, "world of %d after the rebuild", n);
  /* A collective that failed on one survivor may have completed on
   * another (it got everything it needed before the verdict): the
   * survivors agree on where to go on, as an application resumes from the
   * latest step anyone finished. */
  int64_t at = it, next_it = 0;
  NT_OKC(w, nexar_allreduce(w, &at, &next_it, 1, NEXAR_INT64, NEXAR_MAX));
  it = (int)next_it;
  for (; it < ITERS; it++) {
    NT_OKC(w, allreduce_it(w, index, it, a, b, COUNT));
    if (check_sum(w, it, b, COUNT)) return 1;
  }
  NT_OKC(w, nexar_barrier(w));
  if (manual) NT_OK(nexar_comm_free(&w));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- unroutable, family, seed_gone: nexar_init alone ---- */

typedef struct init_case {
  const char *env; /* K=V;K=V */
  int want_rc;
  const char *want_text; /* in nexar_last_error */
  double max_ms;
  const char *want_log; /* in the log (NEXAR_DEBUG_FILE), or NULL */
} init_case_t;

/* In a child: sets the variables, runs nexar_init, checks code, text and
 * time; and its log (stderr): it holds |want_log|, but not the error
 * nexar_init returned (the library stays quiet about what it returns). */
static int init_child(const init_case_t *c) {
  setenv("NEXAR_SECRET", "0123456789abcdef0123456789abcdef", 1);
  setenv("NEXAR_WORLD_SIZE", "2", 1);
  unsetenv("NEXAR_SECRET_FILE");
  char logf[64];
  snprintf(logf, sizeof logf, "/tmp/nexar-ft-net-%d.log", (int)getpid());
  /* The log goes to stderr: keep it in |logf| (and show it below). */
  int logfd = open(logf, O_RDWR | O_CREAT | O_TRUNC, 0600);
  int saved = dup(2);
  if (logfd < 0 || saved < 0 || dup2(logfd, 2) < 0) return 1;
  close(logfd);
  char buf[512];
  snprintf(buf, sizeof buf, "%s", c->env);
  for (char *save = NULL, *kv = strtok_r(buf, ";", &save); kv;
       kv = strtok_r(NULL, ";", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq) return 1;
    *eq = 0;
    setenv(kv, eq + 1, 1);
  }
  double t0 = nt_now_ms();
  nexar_ctx_t *ctx = NULL;
  int rc = nexar_init(NULL, &ctx);
  double took = nt_now_ms() - t0;
  const char *e = nexar_last_error();
  printf("  %s -> %s after %.0f ms: %s\n", c->env, nexar_err_name(rc), took, e);
  if (rc == NEXAR_OK) nexar_finalize(ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  static char log[16384];
  FILE *f = fopen(logf, "r");
  size_t n = f ? fread(log, 1, sizeof log - 1, f) : 0;
  log[n] = 0;
  if (f) fclose(f);
  unlink(logf);
  fprintf(stderr, "%s", log);
  int bad = 0;
  if (rc != c->want_rc || !strstr(e, c->want_text) || took > c->max_ms) {
    fprintf(stderr, "  want %s within %.0f ms, text with '%s'\n",
            nexar_err_name(c->want_rc), c->max_ms, c->want_text);
    bad = 1;
  }
  if (c->want_log && !strstr(log, c->want_log)) {
    fprintf(stderr, "  the log lacks '%s':\n%s", c->want_log, log);
    bad = 1;
  }
  if (*e && strstr(log, e)) {
    fprintf(stderr, "  the returned error was also logged:\n%s", log);
    bad = 1;
  }
  fflush(NULL);
  return bad;
}

static int run_forked(int (*fn)(const init_case_t *), const init_case_t *c) {
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) _exit(fn(c));
  int st = 0;
  for (int i = 0; i < 300; i++) { /* 30 s at most */
    if (waitpid(p, &st, WNOHANG) == p)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    sleep_ms(100);
  }
  kill(p, SIGKILL);
  waitpid(p, &st, 0);
  fprintf(stderr, "  %s: hung, killed\n", c->env);
  return 1;
}

/* A UDP port nothing listens on: bound, read, closed. */
static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(0x7f000001);
  socklen_t l = sizeof a;
  bind(fd, (struct sockaddr *)&a, sizeof a);
  getsockname(fd, (struct sockaddr *)&a, &l);
  close(fd);
  return ntohs(a.sin_port);
}

static int init_cases(void) {
  char gone[160];
  snprintf(gone, sizeof gone,
           "NEXAR_SEED=127.0.0.1:%d;NEXAR_BOOTSTRAP_TIMEOUT_MS=5600",
           closed_port());
  init_case_t cs[] = {
      {"NEXAR_BIND_ADDR=::1;NEXAR_SEED=127.0.0.1:5000", NEXAR_ERR_INVALID_ARG,
       "NEXAR_BIND_ADDR", 1000, NULL},
      {gone, NEXAR_ERR_TIMEOUT, "nothing listens", 7600,
       "still waiting for the seed at 127.0.0.1:"},
      {"NEXAR_SEED=10.1.2.3:5000;NEXAR_BOOTSTRAP_TIMEOUT_MS=1500",
       NEXAR_ERR_TIMEOUT, "unreachable", 3000, NULL},
  };
  int fails = 0;
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    if (i == 2 && !have_netns) {
      printf("  skipped (no network namespace): %s\n", cs[i].env);
      continue;
    }
    fails += run_forked(init_child, &cs[i]) ? 1 : 0;
  }
  return fails;
}

/* ---- late_resume ---- */

static int late_resume(int index, void *arg) {
  bool manual = arg != NULL;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int64_t mine = getpid(), all[MAXW];
  NT_OKC(w, nexar_allgather(w, &mine, all, 1, NEXAR_INT64));
  for (int i = 0; i < n; i++) sh->pid[i] = (pid_t)all[i];
  const int victim = 3;
  NT_OKC(w, nexar_barrier(w));
  /* 1 MiB allreduces until the failure: the stop lands inside a progress
   * pass more often than not, and the others' data fills the victim's
   * receive buffer, so their fencing closes may be dropped. */
  enum { BIG = 1 << 17 };
  static int64_t ba[BIG], bb[BIG];
  if (index == victim) {
    /* Stopped in this loop; continued only after the others exited. */
    int rc = NEXAR_OK, it = 0;
    for (; it < 1000000 && rc == NEXAR_OK; it++)
      rc = allreduce_it(w, index, it, ba, bb, BIG);
    NT_CHECKF(sh->done == 3,
              "the barrier loop ended before the others were "
              "done: %s: %s",
              nexar_err_name(rc), nexar_comm_last_error(w));
    NT_CHECKF(rc == NEXAR_ERR_EXCLUDED, "after SIGCONT: %s: %s",
              nexar_err_name(rc), nexar_comm_last_error(w));
    /* Nothing goes on: not the world, not a shrink of it. */
    int64_t v = 1, s;
    NT_CHECK(nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM) ==
             NEXAR_ERR_EXCLUDED);
    nexar_comm_t *nc = NULL;
    int src = nexar_comm_shrink(w, &nc);
    NT_CHECKF(src == NEXAR_ERR_EXCLUDED, "shrink after the resume: %s",
              nexar_err_name(src));
    nexar_finalize(ctx);
    return 0;
  }
  if (index == 0) {
    sleep_ms(300);
    sh->t_fault = nt_now_ms();
    kill(sh->pid[victim], SIGSTOP);
  }
  int rc = NEXAR_OK;
  for (int i = 0; i < 1000000 && rc == NEXAR_OK; i++)
    rc = allreduce_it(w, index, i, ba, bb, BIG);
  NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED, "%s: %s",
            nexar_err_name(rc), nexar_comm_last_error(w));
  nexar_comm_t *c = w;
  if (manual) NT_OKC(w, nexar_comm_shrink(w, &c));
  NT_OK(nexar_comm_size(c, &n));
  NT_CHECKF(n == 3, "%d ranks after the failure", n);
  enum { COUNT = 256 };
  int64_t a[COUNT], b[COUNT];
  for (int it = 0; it < 20; it++) {
    NT_OKC(c, allreduce_it(c, index, it, a, b, COUNT));
    if (check_sum(c, it, b, COUNT)) return 1;
  }
  NT_OKC(c, nexar_barrier(c));
  if (manual) NT_OK(nexar_comm_free(&c));
  NT_OK(nexar_finalize(ctx));
  __atomic_add_fetch(&sh->done, 1, __ATOMIC_SEQ_CST);
  if (index == 0) {
    for (int i = 0; i < 200 && __atomic_load_n(&sh->done, __ATOMIC_SEQ_CST) < 3;
         i++)
      sleep_ms(20);
    sleep_ms(300); /* the others have exited: their ports are closed */
    kill(sh->pid[victim], SIGCONT);
  }
  return 0;
}

static int run_case(const char *name, int world, nt_worker_fn fn, void *arg,
                    const char *env) {
  memset(sh, 0, sizeof(*sh));
  nt_opts_t o = {
      .world_size = world, .timeout_ms = 60000, .env = env, .tolerate_kill = 0};
  int rc = nt_run(&o, fn, arg);
  double mx = 0;
  for (int k = 0; k < MAXW; k++)
    if (sh->back_ms[k] > mx) mx = sh->back_ms[k];
  printf("%s %s", rc ? "FAIL" : "ok", name);
  if (mx > 0) {
    printf(" (first error after the fault, ms, by rank:");
    for (int k = 0; k < world; k++) printf(" %.0f", sh->back_ms[k]);
    printf(")");
  }
  printf("\n");
  fflush(stdout);
  return rc ? 1 : 0;
}

/* A network namespace with only lo, up, and the local table moved behind a
 * free preference so that rules can go before it. */
static bool enter_netns(void) {
  if (unshare(CLONE_NEWNET) != 0) {
    printf(
        "network namespace not available (%s): the route and "
        "unroutable-seed cases are skipped\n",
        strerror(errno));
    return false;
  }
  if (sh_cmd("ip link set lo up") ||
      sh_cmd("ip rule add pref 100 lookup local") ||
      sh_cmd("ip rule del pref 0")) {
    printf(
        "cannot set up routing in the namespace (is iproute2 "
        "installed?): the route and unroutable-seed cases are skipped\n");
    return false;
  }
  return true;
}

int main(void) {
  sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  const char *only = getenv("NEXAR_FT_ONLY");
  have_netns = enter_netns();
  int fails = 0;
  if (!only || !strcmp(only, "init")) {
    int f = init_cases();
    printf("%s init (unroutable seed, address family, seed gone)\n",
           f ? "FAIL" : "ok");
    fails += f;
  }
  if ((!only || !strcmp(only, "route_loss")) && have_netns) {
    static int one = 1;
    fails += run_case("route_loss_automatic", 4, route_loss, NULL,
                      NET_ENV "NEXAR_RECOVERY=automatic\n");
    sh_cmd("ip rule del pref 50"); /* the route back for the next case */
    fails += run_case("route_loss_manual", 4, route_loss, &one,
                      NET_ENV "NEXAR_RECOVERY=manual\n");
    sh_cmd("ip rule del pref 50");
  }
  if (!only || !strcmp(only, "late_resume")) {
    static int one = 1;
    fails += run_case("late_resume_manual", 4, late_resume, &one,
                      NET_ENV "NEXAR_RECOVERY=manual\n");
    fails += run_case("late_resume_automatic", 4, late_resume, NULL,
                      NET_ENV "NEXAR_RECOVERY=automatic\n");
  }
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
