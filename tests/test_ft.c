/*
 * Failures with real processes and real signals (docs/fault-tolerance.md).
 *
 *   kill_allreduce  SIGKILL a rank during a 64 MiB allreduce (abort policy)
 *   kill_barrier    a rank SIGKILLs itself between barriers
 *   kill_root       the root of a 64 MiB bcast is SIGKILLed
 *   sigstop         SIGSTOP a rank: detected, the others rebuild without it
 *                   (automatic); after SIGCONT it is fenced (EXCLUDED)
 *   automatic       5 ranks, kill one, survivors agree and renumber; a second
 *                   rank SIGKILLs itself from its failure handler (during the
 *                   recovery); allreduce, bcast, barrier and p2p are right
 *                   on the 3 left
 *   manual          nexar_comm_shrink after a kill; the old world stays
 *                   revoked; of two children only the one with the victim
 *                   is hit, and it shrinks too
 *   idle            4 heartbeat timeouts without a call: nobody is declared
 *                   failed
 *   abort           nexar_abort from another thread while every peer is
 *                   silent (stopped, undetected): <= 1 s, twice, then only
 *                   finalize
 *
 * Every survivor must return NEXAR_ERR_PEER_FAILED or NEXAR_ERR_REVOKED
 * within heartbeat timeout + 1 s of the kill, naming the dead process. Kill
 * times and detection times go through a shared mapping made before the
 * workers are forked.
 */
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

#define HB_TIMEOUT_MS 1000
#define FT_ENV                                                \
  "NEXAR_HEARTBEAT_MS=100\nNEXAR_HEARTBEAT_TIMEOUT_MS=1000\n" \
  "NEXAR_OP_TIMEOUT_MS=20000\n"
#define MAXW 16

typedef struct shared {
  pid_t pid[MAXW];
  double t_kill; /* CLOCK_MONOTONIC ms of the (last) kill */
  double detect_ms[MAXW];
  int stopped_done; /* sigstop: survivors finished their checks */
  int passed;       /* manual: survivors that left the first barrier */
} shared_t;

static shared_t *sh;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Every rank learns every pid (before any fault). */
static int share_pids(nexar_comm_t *w, int r) {
  int64_t mine = getpid(), all[MAXW];
  int n;
  nexar_comm_size(w, &n);
  NT_OKC(w, nexar_allgather(w, &mine, all, 1, NEXAR_INT64));
  for (int i = 0; i < n; i++) sh->pid[i] = (pid_t)all[i];
  (void)r;
  return 0;
}

static void kill_rank(int victim) {
  sh->t_kill = nt_now_ms();
  kill(sh->pid[victim], SIGKILL);
}

/* A survivor's verdict on a failed call: the right code, naming a failed
 * process, saying the buffers are unspecified; |victim| known failed within
 * heartbeat timeout + 1 s of the kill (detect_ms[r]), and the call itself
 * back by then unless it also ran a recovery (automatic policy). */
static int check_failed(nexar_ctx_t *ctx, nexar_comm_t *w, int rc, int victim,
                        int r, int recovered) {
  double back = nt_now_ms() - sh->t_kill;
  const char *e = nexar_comm_last_error(w);
  NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED,
            "got %s: %s", nexar_err_name(rc), e);
  NT_CHECKF(strstr(e, "unspecified"),
            "error does not say buffers are unspecified: %s", e);
  nexar_failure_t f[MAXW];
  int nf = 0, named = 0;
  double det = -1;
  NT_OK(nexar_failures(ctx, f, MAXW, &nf));
  for (int k = 0; k < nf && k < MAXW; k++) {
    char want[32];
    snprintf(want, sizeof want, "process %d ", f[k].id);
    named |= strstr(e, want) != NULL;
    if (f[k].id == victim) det = (double)f[k].when_ns / 1e6 - sh->t_kill;
  }
  NT_CHECKF(named, "error names no failed process: %s", e);
  NT_CHECKF(det >= 0, "process %d is not in the failure list", victim);
  sh->detect_ms[r] = det;
  NT_CHECKF(det <= HB_TIMEOUT_MS + 1000, "learnt of it after %.0f ms", det);
  NT_CHECKF(recovered || back <= HB_TIMEOUT_MS + 1000,
            "the call failed after %.0f ms", back);
  return 0;
}

/* ---- kill_allreduce / kill_root ---- */

static int big_op(int index, void *arg) {
  int root_dies = arg != NULL;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (share_pids(w, r)) return 1;
  size_t cnt = 16u << 20; /* 64 MiB of f32 */
  float *a = malloc(cnt * sizeof(float)), *b = malloc(cnt * sizeof(float));
  NT_CHECK(a && b);
  int victim = root_dies ? 0 : 2, killer = root_dies ? 1 : 0;
  /* The bcast's receivers start from other values, so that one whose part
   * was done before the kill can show it got the root's data whole. */
  for (size_t i = 0; i < cnt; i++)
    a[i] = root_dies && r != victim ? -1.0f : (float)(i % 7);
  nexar_req_t *q = NULL;
  if (root_dies)
    NT_OKC(w, nexar_ibcast(w, a, cnt, NEXAR_FLOAT32, 0, &q));
  else
    NT_OKC(w, nexar_iallreduce(w, a, b, cnt, NEXAR_FLOAT32, NEXAR_SUM, &q));
  if (r == killer) {
    sleep_ms(30);
    kill_rank(victim);
  }
  int rc = nexar_wait(&q, NULL);
  (void)index;
  if (root_dies && rc == NEXAR_OK) {
    /* This rank's part ended before the kill (a loaded host can delay the
     * killer's 30 ms past the whole bcast): legal if its data is whole; the
     * failure then shows in the next call. */
    for (size_t i = 0; i < cnt; i++)
      NT_CHECKF(a[i] == (float)(i % 7), "bcast returned OK with a[%zu] = %g", i,
                (double)a[i]);
  } else if (check_failed(ctx, w, rc, victim, r, 0)) {
    return 1;
  }
  /* Abort policy: the world is revoked for good. */
  NT_CHECK(nexar_barrier(w) == NEXAR_ERR_REVOKED ||
           nexar_barrier(w) == NEXAR_ERR_PEER_FAILED);
  free(a);
  free(b);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- kill_barrier ---- */

static int barrier_loop(int index, void *arg) {
  (void)arg;
  (void)index;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int victim = n - 1;
  for (int i = 0; i < 100000; i++) {
    if (r == victim && i == 50) {
      sh->t_kill = nt_now_ms();
      raise(SIGKILL);
    }
    int rc = nexar_barrier(w);
    if (rc == NEXAR_OK) continue;
    /* The victim dies after barrier 49 returned to it: its last message
     * of that barrier may still have been queued in it (an eager send
     * completes once buffered), so barrier 49 may fail; none before. */
    NT_CHECKF(i >= 49, "barrier %d failed early", i);
    if (check_failed(ctx, w, rc, victim, r, 0)) return 1;
    break;
  }
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- automatic ---- */

static void die_on_failure(nexar_ctx_t *ctx, const nexar_failure_t *f,
                           void *ud) {
  (void)ctx;
  (void)f;
  (void)ud;
  raise(SIGKILL); /* a second failure, during the recovery of the first */
}

/* Sum of id + 1 over the members of |c|: what an allreduce must give. */
static int64_t members_sum(nexar_comm_t *c) {
  int n;
  int64_t s = 0;
  nexar_comm_size(c, &n);
  for (int k = 0; k < n; k++) {
    int id;
    nexar_comm_id_of(c, k, &id);
    s += id + 1;
  }
  return s;
}

/* The checks every survivor runs on a rebuilt communicator. */
static int check_rebuilt(nexar_comm_t *w, int want_size, uint32_t want_epoch) {
  int r, n;
  uint32_t ep;
  NT_OK(nexar_comm_rank(w, &r));
  NT_OK(nexar_comm_size(w, &n));
  NT_OK(nexar_comm_epoch(w, &ep));
  NT_CHECKF(n == want_size && ep >= want_epoch, "size %d epoch %u", n, ep);
  /* Everybody agrees on the membership: ids in rank order, ascending. */
  int prev = -1;
  for (int k = 0; k < n; k++) {
    int id;
    NT_OK(nexar_comm_id_of(w, k, &id));
    NT_CHECKF(id > prev, "ids not in the old order");
    prev = id;
  }
  int64_t mine[2] = {members_sum(w), ep}, all[2 * MAXW];
  NT_OKC(w, nexar_allgather(w, mine, all, 2, NEXAR_INT64));
  for (int k = 0; k < n; k++)
    NT_CHECKF(all[2 * k] == mine[0] && all[2 * k + 1] == mine[1],
              "rank %d sees members %lld epoch %lld", k, (long long)all[2 * k],
              (long long)all[2 * k + 1]);
  /* allreduce, bcast, barrier, p2p ring */
  int id;
  nexar_comm_id_of(w, r, &id);
  int64_t v = id + 1, s = 0;
  NT_OKC(w, nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(s == members_sum(w), "allreduce %lld", (long long)s);
  double d[1000];
  for (int i = 0; i < 1000; i++) d[i] = r == n - 1 ? i * 0.5 : -1;
  NT_OKC(w, nexar_bcast(w, d, 1000, NEXAR_FLOAT64, n - 1));
  for (int i = 0; i < 1000; i++) NT_CHECK(d[i] == i * 0.5);
  NT_OKC(w, nexar_barrier(w));
  int32_t out = 100 * r, in = -1;
  nexar_req_t *q;
  NT_OKC(w, nexar_irecv(w, &in, 1, NEXAR_INT32, (r + n - 1) % n, 9, &q));
  NT_OKC(w, nexar_send(w, &out, 1, NEXAR_INT32, (r + 1) % n, 9));
  NT_OKC(w, nexar_wait(&q, NULL));
  NT_CHECKF(in == 100 * ((r + n - 1) % n), "ring got %d", in);
  return 0;
}

static int automatic(int index, void *arg) {
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (index == 3) NT_OK(nexar_set_failure_handler(ctx, die_on_failure, NULL));
  int errors = 0;
  for (int i = 0; i < 400; i++) {
    int size;
    nexar_comm_size(w, &size);
    if (size == 3) break;
    if (index == 4 && i == 20) {
      sh->t_kill = nt_now_ms();
      raise(SIGKILL);
    }
    if (index == 1 && i == 10) {
      /* A message of epoch 0 nobody receives: it must never be delivered
       * in a later epoch. */
      int32_t stale = -7;
      NT_OKC(w, nexar_send(w, &stale, 1, NEXAR_INT32, 2, 7));
    }
    int64_t v = index + 1, s = 0;
    int rc = nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM);
    if (rc == NEXAR_OK) {
      NT_CHECKF(s == members_sum(w), "iteration %d: %lld", i, (long long)s);
      continue;
    }
    if (!errors++ && check_failed(ctx, w, rc, 4, index, 1)) return 1;
    /* Automatic: the call that failed has rebuilt the world already. */
    NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED, "%s: %s",
              nexar_err_name(rc), nexar_comm_last_error(w));
  }
  if (check_rebuilt(w, 3, 1)) return 1;
  nexar_failure_t f[4];
  int nf;
  NT_OK(nexar_failures(ctx, f, 4, &nf));
  NT_CHECKF(nf == 2, "%d failures known", nf);
  /* The epoch-0 message was dropped with its epoch. */
  if (index == 1) {
    int32_t fresh = 8;
    NT_OKC(w, nexar_send(w, &fresh, 1, NEXAR_INT32, 2, 8));
  }
  if (index == 2) {
    int32_t got = 0;
    nexar_status_t st;
    NT_OKC(w, nexar_recv(w, &got, 1, NEXAR_INT32, NEXAR_ANY_SOURCE,
                         NEXAR_ANY_TAG, &st));
    NT_CHECKF(got == 8 && st.tag == 8 && st.source == 1,
              "got %d tag %d from %d: a stale message was delivered", got,
              st.tag, st.source);
  }
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- manual ---- */

static int manual(int index, void *arg) {
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  /* Children {0, 2} and {1, 3}: only the one with the victim is hit. */
  nexar_comm_t *c = NULL;
  NT_OKC(w, nexar_comm_split(w, r % 2, r, &c));
  if (index == 3) {
    NT_OKC(w, nexar_barrier(w));
    /* A barrier can end here before its last message has left this
     * process: die only once every survivor is out of it. */
    for (int i = 0;
         i < 10000 && __atomic_load_n(&sh->passed, __ATOMIC_ACQUIRE) < 3; i++)
      sleep_ms(1);
    sh->t_kill = nt_now_ms();
    raise(SIGKILL);
  }
  NT_OKC(w, nexar_barrier(w));
  __atomic_add_fetch(&sh->passed, 1, __ATOMIC_RELEASE);
  int64_t v = 1, s;
  int rc = nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM);
  if (check_failed(ctx, w, rc, 3, r, 0)) return 1;
  v = r;
  rc = nexar_allreduce(c, &v, &s, 1, NEXAR_INT64, NEXAR_SUM);
  if (r % 2 == 0) {
    NT_OKC(c, rc); /* {0, 2} does not contain the failed process */
    NT_CHECK(s == 2);
  } else {
    NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED,
              "child with the victim: %s", nexar_err_name(rc));
    nexar_comm_t *cs = NULL;
    NT_OKC(c, nexar_comm_shrink(c, &cs));
    int cn = 0;
    NT_OKC(cs, nexar_comm_size(cs, &cn));
    NT_CHECK(cn == 1);
    NT_OKC(cs, nexar_allreduce(cs, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
    NT_CHECK(s == 1);
    NT_OKC(cs, nexar_comm_free(&cs));
  }
  nexar_comm_free(&c);
  nexar_comm_t *nc = NULL;
  NT_OKC(w, nexar_comm_shrink(w, &nc));
  NT_CHECK(nc != NULL);
  if (check_rebuilt(nc, 3, 1)) return 1;
  /* The old world stays revoked; a second shrink of it is refused. */
  NT_CHECK(nexar_barrier(w) == NEXAR_ERR_REVOKED);
  nexar_comm_t *again = NULL;
  NT_CHECK(nexar_comm_shrink(w, &again) == NEXAR_ERR_INVALID_USAGE);
  NT_OKC(nc, nexar_comm_free(&nc));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- sigstop ---- */

static int sigstop(int index, void *arg) {
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (share_pids(w, r)) return 1;
  int victim = 3;
  NT_OKC(w, nexar_barrier(w));
  if (index == 0) {
    sleep_ms(50); /* everyone has left the barrier: stop the victim in the
                     loop below */
    sh->t_kill = nt_now_ms();
    kill(sh->pid[victim], SIGSTOP);
  }
  if (index == victim) {
    /* Stopped around here; once continued, everything fails: fenced. */
    int rc = NEXAR_OK;
    for (int i = 0; i < 100000 && rc == NEXAR_OK; i++) rc = nexar_barrier(w);
    NT_CHECKF(rc == NEXAR_ERR_EXCLUDED, "after SIGCONT: %s: %s",
              nexar_err_name(rc), nexar_comm_last_error(w));
    NT_CHECK(nexar_barrier(w) == NEXAR_ERR_EXCLUDED);
    int64_t v = 1, s;
    NT_CHECK(nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM) ==
             NEXAR_ERR_EXCLUDED);
    NT_OK(nexar_finalize(ctx));
    return 0;
  }
  int rc = NEXAR_OK;
  for (int i = 0; i < 100000 && rc == NEXAR_OK; i++) rc = nexar_barrier(w);
  if (check_failed(ctx, w, rc, victim, r, 0)) return 1;
  NT_CHECKF(sh->detect_ms[r] >= HB_TIMEOUT_MS / 2,
            "declared dead after %.0f ms: before half the timeout",
            sh->detect_ms[r]);
  if (check_rebuilt(w, 3, 1)) return 1;
  NT_OKC(w, nexar_barrier(w));
  if (r == 0) kill(sh->pid[victim], SIGCONT);
  /* The survivors go on undisturbed while the fenced rank wakes up. */
  for (int i = 0; i < 20; i++) {
    int64_t v = 1, s;
    NT_OKC(w, nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
    NT_CHECK(s == 3);
    sleep_ms(10);
  }
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- idle: no false verdicts ---- */

/* Ranks that do nothing for four heartbeat timeouts (the progress thread
 * keeps the heartbeat going), then communicate: nobody is declared failed. */
static int idle(int index, void *arg) {
  (void)arg;
  (void)index;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  NT_OKC(w, nexar_barrier(w));
  sleep_ms(4 * 500);
  int64_t v = 1, s = 0;
  NT_OKC(w, nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECK(s == n);
  int nf = -1;
  NT_OK(nexar_failures(ctx, NULL, 0, &nf));
  NT_CHECKF(nf == 0, "%d failures after an idle spell", nf);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* ---- abort ---- */

typedef struct abort_arg {
  nexar_ctx_t *ctx;
  double ms[2];
} abort_arg_t;

static void *abort_thread(void *p) {
  abort_arg_t *a = p;
  sleep_ms(200);
  for (int k = 0; k < 2; k++) {
    double t0 = nt_now_ms();
    nexar_abort(a->ctx);
    a->ms[k] = nt_now_ms() - t0;
  }
  return NULL;
}

static int aborting(int index, void *arg) {
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (share_pids(w, r)) return 1;
  NT_OKC(w, nexar_barrier(w));
  /* Every peer of rank 0 goes silent: stopped, so not even the kernel
   * answers for them, and not yet declared failed (60 s timeout). */
  if (index != 0) raise(SIGSTOP);
  sleep_ms(100);
  int32_t x;
  nexar_req_t *q;
  NT_OKC(w, nexar_irecv(w, &x, 1, NEXAR_INT32, 1, 0, &q));
  abort_arg_t a = {ctx, {0, 0}};
  pthread_t t;
  NT_CHECK(pthread_create(&t, NULL, abort_thread, &a) == 0);
  double t0 = nt_now_ms();
  int rc = nexar_wait(&q, NULL);
  double waited = nt_now_ms() - t0;
  pthread_join(t, NULL);
  NT_CHECKF(rc == NEXAR_ERR_ABORTED, "wait: %s", nexar_err_name(rc));
  NT_CHECKF(waited < 1500, "wait ended after %.0f ms", waited);
  NT_CHECKF(a.ms[0] <= 1000 && a.ms[1] <= 1000, "abort took %.1f / %.1f ms",
            a.ms[0], a.ms[1]);
  NT_CHECK(nexar_barrier(w) == NEXAR_ERR_ABORTED);
  NT_CHECK(nexar_send(w, &x, 1, NEXAR_INT32, 1, 0) == NEXAR_ERR_ABORTED);
  printf("abort: %.2f ms, again %.3f ms (peers stopped, undetected)\n", a.ms[0],
         a.ms[1]);
  for (int k = 1; k < n; k++) kill(sh->pid[k], SIGKILL);
  double f0 = nt_now_ms();
  NT_OK(nexar_finalize(ctx));
  NT_CHECKF(nt_now_ms() - f0 < 1000, "finalize after abort took %.0f ms",
            nt_now_ms() - f0);
  return 0;
}

/* ---- randomized trials ---- */

#define TRIAL_WORLD 8
#define KILLS_PER_WORLD 5 /* 8 -> 3: each step keeps a majority */
#define MAX_TRIALS 1000
#define TRIAL_HB_TIMEOUT_MS 600
#define TRIAL_ENV                                            \
  "NEXAR_HEARTBEAT_MS=100\nNEXAR_HEARTBEAT_TIMEOUT_MS=600\n" \
  "NEXAR_OP_TIMEOUT_MS=20000\nNEXAR_RECOVERY=automatic\n"

enum {
  OP_ALLREDUCE,
  OP_BCAST,
  OP_ALLGATHER,
  OP_ALLTOALL,
  OP_BARRIER,
  OP_RING,
  OP_COUNT
};
static const char *op_names[] = {"allreduce", "bcast",   "allgather",
                                 "alltoall",  "barrier", "p2p ring"};

typedef struct trial {
  int victim, op, count, delay_ms; /* delay -1: killed before the op */
} trial_t;

typedef struct trials {
  trial_t t[KILLS_PER_WORLD];
  double det[KILLS_PER_WORLD][TRIAL_WORLD]; /* detection ms per survivor */
} trials_t;

static trials_t *tr;

static int64_t tv(int id, int i) {
  return (int64_t)id * 1000003 + i;
}

/* Posts trial |p|'s operation on |w| (buffers sized for its size now). */
static int post_op(nexar_comm_t *w, const trial_t *p, int64_t *a, int64_t *b,
                   int32_t *ring, nexar_req_t **q) {
  int r, n, id;
  nexar_comm_rank(w, &r);
  nexar_comm_size(w, &n);
  nexar_comm_id_of(w, r, &id);
  size_t c = (size_t)p->count;
  for (size_t i = 0; i < c * (size_t)n; i++) a[i] = tv(id, (int)i);
  switch (p->op) {
    case OP_ALLREDUCE:
      return nexar_iallreduce(w, a, b, c, NEXAR_INT64, NEXAR_SUM, q);
    case OP_BCAST:
      return nexar_ibcast(w, a, c, NEXAR_INT64, (int)(c % (size_t)n), q);
    case OP_ALLGATHER:
      return nexar_iallgather(w, a, b, c, NEXAR_INT64, q);
    case OP_ALLTOALL:
      return nexar_ialltoall(w, a, b, c, NEXAR_INT64, q);
    case OP_BARRIER:
      return nexar_ibarrier(w, q);
    default:
      q[1] = NULL;
      ring[0] = id;
      NT_OKC(w, nexar_irecv(w, ring + 1, 1, NEXAR_INT32, (r + n - 1) % n, 5,
                            &q[1]));
      return nexar_isend(w, ring, 1, NEXAR_INT32, (r + 1) % n, 5, q);
  }
}

/* Checks a trial operation that completed before the failure hit it. */
static int check_op(nexar_comm_t *w, const trial_t *p, int64_t *a, int64_t *b,
                    const int32_t *ring) {
  int r, n;
  nexar_comm_rank(w, &r);
  nexar_comm_size(w, &n);
  size_t c = (size_t)p->count;
  int ids[TRIAL_WORLD];
  for (int k = 0; k < n; k++) nexar_comm_id_of(w, k, &ids[k]);
  for (size_t i = 0; i < c; i++) {
    int64_t want = 0;
    switch (p->op) {
      case OP_ALLREDUCE:
        for (int k = 0; k < n; k++) want += tv(ids[k], (int)i);
        NT_CHECK(b[i] == want);
        break;
      case OP_BCAST:
        NT_CHECK(a[i] == tv(ids[c % (size_t)n], (int)i));
        break;
      case OP_ALLGATHER:
        for (int k = 0; k < n; k++)
          NT_CHECK(b[k * c + i] == tv(ids[k], (int)i));
        break;
      case OP_ALLTOALL:
        for (int k = 0; k < n; k++)
          NT_CHECK(b[k * c + i] == tv(ids[k], (int)(r * c + i)));
        break;
      default:
        break;
    }
  }
  if (p->op == OP_RING) NT_CHECK(ring[1] == ids[(r + n - 1) % n]);
  return 0;
}

static int trials_worker(int index, void *arg) {
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (share_pids(w, r)) return 1;
  size_t cap = 1u << 17; /* elements per rank and block */
  int64_t *a = malloc(cap * TRIAL_WORLD * sizeof(int64_t));
  int64_t *b = malloc(cap * TRIAL_WORLD * sizeof(int64_t));
  NT_CHECK(a && b);
  int32_t ring[2];
  for (int t = 0; t < KILLS_PER_WORLD; t++) {
    const trial_t *p = &tr->t[t];
    int size0;
    uint32_t ep0;
    nexar_comm_size(w, &size0);
    nexar_comm_epoch(w, &ep0);
    int killer = -1;
    for (int k = 0; k < size0 && killer < 0; k++) {
      int id;
      nexar_comm_id_of(w, k, &id);
      if (id != p->victim) killer = id;
    }
    /* The killer may leave this barrier (and kill) before the others have:
     * then their barrier is what fails. */
    int rc = nexar_barrier(w);
    nexar_req_t *q[2] = {NULL, NULL};
    bool posted = false;
    if (rc == NEXAR_OK) {
      if (index == killer && p->delay_ms < 0) kill_rank(p->victim);
      rc = post_op(w, p, a, b, ring, q);
      posted = rc == NEXAR_OK;
      if (index == killer && p->delay_ms >= 0) {
        sleep_ms(p->delay_ms);
        kill_rank(p->victim);
      }
      if (rc == NEXAR_OK) rc = nexar_wait(&q[0], NULL);
      if (q[1]) {
        int rc2 = nexar_wait(&q[1], NULL);
        if (rc == NEXAR_OK) rc = rc2;
      }
    }
    if (rc == NEXAR_OK && posted) {
      if (index != p->victim && check_op(w, p, a, b, ring)) return 1;
      /* The failure has not reached this rank yet: it will. */
      double t0 = nt_now_ms();
      while (rc == NEXAR_OK && nt_now_ms() - t0 < 10000) rc = nexar_barrier(w);
    }
    NT_CHECKF(index != p->victim, "trial %d: the victim survived", t);
    if (check_failed(ctx, w, rc, p->victim, index, 1)) {
      fprintf(stderr, "[%d] trial %d: %s of %d elements, victim %d, %d ms\n",
              index, t, op_names[p->op], p->count, p->victim, p->delay_ms);
      return 1;
    }
    tr->det[t][index] = sh->detect_ms[index];
    int size1;
    uint32_t ep1;
    nexar_comm_size(w, &size1);
    nexar_comm_epoch(w, &ep1);
    if (size1 != size0 - 1) { /* who else was judged failed, and how */
      nexar_failure_t f[MAXW];
      int nf = 0;
      nexar_failures(ctx, f, MAXW, &nf);
      for (int k = 0; k < nf && k < MAXW; k++)
        fprintf(stderr,
                "[%d] trial %d: failure of %d, reason %d, reporter %d, %.0f "
                "ms after the kill\n",
                index, t, f[k].id, f[k].reason, f[k].reporter,
                (double)f[k].when_ns / 1e6 - sh->t_kill);
    }
    NT_CHECKF(size1 == size0 - 1 && ep1 == ep0 + 1,
              "trial %d: size %d -> %d, epoch %u -> %u", t, size0, size1, ep0,
              ep1);
    for (int k = 0; k < size1; k++) {
      int id;
      nexar_comm_id_of(w, k, &id);
      NT_CHECK(id != p->victim);
    }
    int64_t v, s = 0;
    int me;
    nexar_comm_id_of(w, (nexar_comm_rank(w, &me), me), &me);
    v = me + 1;
    NT_OKC(w, nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
    NT_CHECKF(s == members_sum(w), "trial %d: allreduce after recovery", t);
  }
  free(a);
  free(b);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static void report(const char *how, double *d, int nd) {
  qsort(d, (size_t)nd, sizeof(double), cmp_double);
  printf(
      "  detection %s over %d survivor verdicts: median %.0f ms, max %.0f "
      "ms\n",
      how, nd, nd ? d[nd / 2] : 0.0, nd ? d[nd - 1] : 0.0);
}

/* Worlds of TRIAL_WORLD processes, KILLS_PER_WORLD random trials each;
 * every other world detects by heartbeat only (NEXAR_ICMP_DETECT=0). */
static int run_trials(int ntrials, unsigned seed) {
  tr = mmap(NULL, sizeof(*tr), PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  double *dets[2];
  int nd[2] = {0, 0};
  for (int m = 0; m < 2; m++)
    dets[m] = malloc((size_t)ntrials * TRIAL_WORLD * sizeof(double));
  if (tr == MAP_FAILED || !dets[0] || !dets[1]) return 1;
  srand(seed);
  int fails = 0, done = 0;
  for (int world = 0; done < ntrials; world++) {
    int hb_only = world % 2;
    memset(tr, 0, sizeof(*tr));
    memset(sh, 0, sizeof(*sh));
    for (int t = 0; t < KILLS_PER_WORLD; t++)
      for (int k = 0; k < TRIAL_WORLD; k++) tr->det[t][k] = -1;
    int alive[TRIAL_WORLD], na = TRIAL_WORLD;
    for (int i = 0; i < TRIAL_WORLD; i++) alive[i] = i;
    for (int t = 0; t < KILLS_PER_WORLD; t++) {
      int k = rand() % na;
      tr->t[t].victim = alive[k];
      alive[k] = alive[--na];
      tr->t[t].op = rand() % OP_COUNT;
      static const int counts[] = {1, 7, 1000, 16384, 131072};
      tr->t[t].count = counts[rand() % 5];
      tr->t[t].delay_ms = rand() % 4 == 0 ? -1 : rand() % 30;
    }
    nt_opts_t o = {
        .world_size = TRIAL_WORLD,
        .timeout_ms = 120000,
        .env = hb_only ? TRIAL_ENV "NEXAR_ICMP_DETECT=0\n" : TRIAL_ENV,
        .tolerate_kill = 1};
    int rc = nt_run(&o, trials_worker, NULL);
    if (rc) {
      fails++;
      printf("FAIL trials world %d (seed %u%s): plan", world, seed,
             hb_only ? ", heartbeat only" : "");
      for (int t = 0; t < KILLS_PER_WORLD; t++)
        printf(" [victim %d %s x%d at %d ms]", tr->t[t].victim,
               op_names[tr->t[t].op], tr->t[t].count, tr->t[t].delay_ms);
      printf("\n");
    }
    for (int t = 0; t < KILLS_PER_WORLD; t++)
      for (int k = 0; k < TRIAL_WORLD; k++)
        if (tr->det[t][k] >= 0) dets[hb_only][nd[hb_only]++] = tr->det[t][k];
    done += KILLS_PER_WORLD;
  }
  printf("%s trials: %d kills (seed %u, %d worlds failed)\n",
         fails ? "FAIL" : "ok", done, seed, fails);
  report("with ICMP", dets[0], nd[0]);
  report("by heartbeat only (NEXAR_HEARTBEAT_TIMEOUT_MS=600)", dets[1], nd[1]);
  free(dets[0]);
  free(dets[1]);
  munmap(tr, sizeof(*tr));
  return fails;
}

typedef struct scenario {
  const char *name;
  int world;
  nt_worker_fn fn;
  void *arg;
  const char *env;
} scenario_t;

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  static int one = 1;
  const scenario_t sc[] = {
      {"kill_allreduce", 4, big_op, NULL, FT_ENV},
      {"kill_allreduce_hb", 4, big_op, NULL, FT_ENV "NEXAR_ICMP_DETECT=0\n"},
      {"kill_barrier", 4, barrier_loop, NULL, FT_ENV},
      {"kill_root", 4, big_op, &one, FT_ENV},
      {"kill_root_hb", 4, big_op, &one, FT_ENV "NEXAR_ICMP_DETECT=0\n"},
      {"sigstop", 4, sigstop, NULL, FT_ENV "NEXAR_RECOVERY=automatic\n"},
      {"automatic", 5, automatic, NULL, FT_ENV "NEXAR_RECOVERY=automatic\n"},
      {"manual", 4, manual, NULL, FT_ENV "NEXAR_RECOVERY=manual\n"},
      {"idle", 4, idle, NULL,
       "NEXAR_HEARTBEAT_MS=100\nNEXAR_HEARTBEAT_TIMEOUT_MS=500\n"},
      {"abort", 3, aborting, NULL,
       "NEXAR_HEARTBEAT_MS=1000\nNEXAR_HEARTBEAT_TIMEOUT_MS=60000\n"},
  };
  const char *only = getenv("NEXAR_FT_ONLY");
  int fails = 0;
  for (size_t i = 0; i < sizeof(sc) / sizeof(sc[0]); i++) {
    if (only && strcmp(only, sc[i].name)) continue;
    memset(sh, 0, sizeof(*sh));
    nt_opts_t o = {.world_size = sc[i].world,
                   .timeout_ms = 60000,
                   .env = sc[i].env,
                   .tolerate_kill = 1};
    int rc = nt_run(&o, sc[i].fn, sc[i].arg);
    double mx = 0;
    for (int k = 0; k < MAXW; k++)
      if (sh->detect_ms[k] > mx) mx = sh->detect_ms[k];
    printf("%s %s world=%d", rc ? "FAIL" : "ok", sc[i].name, sc[i].world);
    if (mx > 0)
      printf(" (slowest survivor failed %.0f ms after the fault)", mx);
    printf("\n");
    fails += rc ? 1 : 0;
  }
  if (!only || !strcmp(only, "trials")) {
    const char *e = getenv("NEXAR_FT_TRIALS");
    int n = e ? atoi(e) : 50;
    const char *se = getenv("NEXAR_FT_SEED");
    unsigned seed = se ? (unsigned)strtoul(se, NULL, 10) : (unsigned)time(NULL);
    if (n > MAX_TRIALS) n = MAX_TRIALS;
    if (n > 0) fails += run_trials(n, seed);
  }
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
