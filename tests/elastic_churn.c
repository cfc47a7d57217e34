/*
 * Membership churn (elastic_churn.h). Workers 0-2 are long-lived members;
 * worker 3 is the first rotating member; worker 4 never joins: it forks one
 * joiner per cycle when member 0 asks (it has no threads, so forking is
 * safe) and reaps them. A rotating member leaves at the first checkpoint
 * after its own admission; the long-lived members call checkpoints until a
 * joiner is admitted, so every cycle admits exactly one.
 */
#include "elastic_churn.h"

#include <errno.h>
#include <malloc.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"
#include "cluster/cluster.h"

#define LIVED 3   /* long-lived members: workers 0..2 */
#define FACTORY 4 /* the worker that forks the joiners */

static int spawn_pipe[2], started_pipe[2];
static const churn_opts_t *opt;

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* One byte from |fd| within |ms|, or -1. */
static int get_byte(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int r;
  do r = poll(&p, 1, ms);
  while (r < 0 && errno == EINTR);
  char c;
  return r == 1 && read(fd, &c, 1) == 1 ? c : -1;
}

static int put_byte(int fd, char c) {
  return write(fd, &c, 1) == 1 ? 0 : -1;
}

/* VmRSS of this process in KiB, or -1. */
static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

/* A rotating member: leaves at the next checkpoint, then finalizes. */
static int rotate_out(nexar_ctx_t *ctx) {
  nexar_comm_t *w = nexar_comm_world(ctx);
  nexar_membership_t m;
  NT_OKC(w, nexar_elastic_checkpoint(ctx, 1, &m));
  NT_CHECKF(m.new_rank == -1 && m.left >= 1, "leave: new rank %d, %d left",
            m.new_rank, m.left);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static void joiner(void) {
  unsetenv("NEXAR_RANK");
  setenv("NEXAR_JOIN", "1", 1);
  put_byte(started_pipe[1], 's');
  nexar_ctx_t *ctx = NULL;
  int rc = nt_join(&ctx);
  _exit(rc == 0 ? rotate_out(ctx) : 1);
}

static int factory(void) {
  int kids = 0, bad = 0, st;
  pid_t p;
  for (;;) {
    int c = get_byte(spawn_pipe[0], 60000);
    NT_CHECKF(c == 'j' || c == 'q', "factory: no word from member 0 (%d)", c);
    if (c == 'q') break;
    p = fork();
    NT_CHECK(p >= 0);
    if (p == 0) joiner();
    kids++;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
      bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  for (int waited = 0; waited < 20000 && (p = waitpid(-1, &st, WNOHANG)) >= 0;
       waited += p ? 0 : 10) {
    if (p > 0)
      bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    else
      nap_ms(10);
  }
  NT_CHECKF(bad == 0 && p < 0, "%d of %d joiners failed or hung", bad, kids);
  return 0;
}

/* Engine: connections this process still holds that belong to no live
 * member (ended ones of departed or failed processes, anonymous ones). */
static int held_fn(nexar__req_t *req) {
  nexar_ctx_t *ctx = req->cb_arg;
  int n = 0;
  for (int i = 0; i < ctx->ep.nconns; i++) {
    const nexar__link_t *c = ctx->ep.conns[i];
    n += c->peer < 0 || c->peer >= ctx->world || ctx->dead[c->peer];
  }
  return n;
}

/* Waits (at most 5 s) until the departed processes' connections are gone. */
static int settled(nexar_ctx_t *ctx, int cycle) {
  int held = 0;
  for (int t = 0; t < 500; t++) {
    held = nexar__ep_call(&ctx->ep, held_fn, ctx, 0);
    if (held == 0) return 0;
    nap_ms(10);
  }
  NT_CHECKF(held == 0,
            "after cycle %d: still %d connections of departed processes (of "
            "%d in all)",
            cycle, held, ctx->ep.nconns);
  return 0;
}

/* One cycle on a long-lived member: checkpoints until one joiner is in. */
static int cycle(nexar_ctx_t *ctx, int me, int c) {
  if (me == 0) {
    NT_CHECK(put_byte(spawn_pipe[1], 'j') == 0);
    NT_CHECKF(get_byte(started_pipe[0], 20000) == 's', "joiner %d not started",
              c);
  }
  nexar_comm_t *w = nexar_comm_world(ctx);
  nexar_membership_t m = {0};
  for (int tries = 0; m.joined == 0; tries++) {
    NT_CHECKF(tries < 200, "cycle %d: no joiner after %d checkpoints", c,
              tries);
    if (me == 0 && tries > 0) nap_ms(5);
    NT_OKC(w, nexar_elastic_checkpoint(ctx, 0, &m));
  }
  NT_CHECKF(m.joined == 1 && m.new_size <= LIVED + 1 && m.new_rank == me,
            "cycle %d: joined %d, left %d, size %d, rank %d", c, m.joined,
            m.left, m.new_size, m.new_rank);
  return settled(ctx, c);
}

static int lived(int me) {
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  long base = rss_kb(), start = base, top = base;
  double t0 = nt_now_ms();
  for (int c = 0; c < opt->cycles; c++) {
    if (cycle(ctx, me, c)) return 1;
    long now = rss_kb();
    if (c + 1 == opt->warmup) base = now;
    if (c + 1 > opt->warmup && now > top) top = now;
    if (me == 0 && opt->report_every && (c + 1) % opt->report_every == 0)
      printf(
          "[%d] cycle %d: RSS %ld KiB, heap in use %zu KiB, %d ids (%.1f "
          "ms per cycle)\n",
          me, c + 1, now, mallinfo2().uordblks / 1024, ctx->world,
          (nt_now_ms() - t0) / (c + 1));
  }
  /* The last joiner leaves. */
  nexar_membership_t m;
  NT_OKC(w, nexar_elastic_checkpoint(ctx, 0, &m));
  NT_CHECKF(m.new_size == LIVED && m.joined == 0, "end: size %d, %d joined",
            m.new_size, m.joined);
  if (settled(ctx, opt->cycles)) return 1;
  if (me == 0) NT_CHECK(put_byte(spawn_pipe[1], 'q') == 0);
  long end = rss_kb();
  if (end > top) top = end;
  printf(
      "[%d] %d cycles: RSS %ld KiB at start, %ld after %d warm-up "
      "cycles, %ld at the end, peak after warm-up %ld (+%ld KiB)\n",
      me, opt->cycles, start, base, opt->warmup, end, top, top - base);
  NT_CHECKF(!opt->rss_max_kb || top - base <= opt->rss_max_kb,
            "RSS grew %ld KiB after warm-up (limit %ld)", top - base,
            opt->rss_max_kb);
  int nf = -1;
  NT_OK(nexar_failures(ctx, NULL, 0, &nf));
  NT_CHECKF(nf == 0, "%d failures recorded", nf);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static int churn_worker(int index, void *arg) {
  (void)arg;
  if (index == FACTORY) return factory();
  if (index == LIVED) {
    nexar_ctx_t *ctx;
    NT_OK(nt_join(&ctx));
    return rotate_out(ctx);
  }
  return lived(index);
}

int churn_run(const churn_opts_t *o) {
  if (pipe(spawn_pipe) < 0 || pipe(started_pipe) < 0) return 1;
  opt = o;
  char env[512];
  snprintf(env, sizeof(env), "NEXAR_MAX_WORLD_SIZE=%d\n%s", LIVED + 2,
           o->env ? o->env : "");
  nt_opts_t no = {.world_size = LIVED + 1,
                  .nprocs = FACTORY + 1,
                  .timeout_ms = o->timeout_ms,
                  .env = env};
  int rc = nt_run(&no, churn_worker, NULL);
  close(spawn_pipe[0]);
  close(spawn_pipe[1]);
  close(started_pipe[0]);
  close(started_pipe[1]);
  return rc;
}
