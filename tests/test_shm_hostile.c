/*
 * A hostile same-host peer at the transport level (src/transport/shm.c):
 * well-formed ring records with bad contents, written by the test hook
 * nexar__shm_test_forge (src/transport/shm_test.h). Three ranks on this
 * host over shared memory (NEXAR_TRANSPORT=shm, NEXAR_RECOVERY=manual):
 * rank 1 forges into its ring to rank 0, rank 2 looks on. One world per
 * kind:
 *   - fatal kinds (a DATA record for a stream never opened, at a wrong
 *     offset, past the stream window, an unknown record type, STREAMS
 *     returning more streams than were opened, a published record past
 *     the ring's end, a one-line small message too short for its header
 *     or naming the receiver as its source): rank 0's pending receive from rank
 * 1 fails with NEXAR_ERR_PEER_FAILED naming process 1 and the violation,
 * process 1 is in its failure list (connection); rank 2's world barrier fails
 * naming process 1; ranks 0 and 2 then exchange messages and an allreduce on
 * their own communicator bit-exact; rank 1, resumed, finds its calls failing
 * and finalizes;
 *   - harmless kinds (CREDIT and RESET for unknown streams, both ways):
 *     nothing changes, later messages of 0 B to 300 KB arrive bit-exact.
 * To make the outcome definite (rank 1, told of its violation, would
 * otherwise accuse rank 0 in a race with rank 0's notice), rank 1 stops
 * rank 0 before it forges and stops itself after; a helper process it
 * forks resumes rank 0 once rank 1 is stopped, and rank 2 resumes rank 1
 * after its checks.
 */
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"
#include "transport/shm_test.h"

#define VICTIM 0
#define FORGER 1
#define THIRD 2

static pid_t *pids; /* shared mapping: every worker's pid */

static const struct kind {
  int kind;
  const char *name;
  const char *why; /* the victim's log line; NULL: harmless */
} kinds[] = {
    {NEXAR__SHM_FORGE_SID_JUMP, "DATA for a stream never opened",
     "a record for a stream that is not open"},
    {NEXAR__SHM_FORGE_OFFSET, "DATA at a wrong offset",
     "stream data out of order"},
    {NEXAR__SHM_FORGE_WINDOW, "DATA past the stream window",
     "peer exceeded the stream window"},
    {NEXAR__SHM_FORGE_TYPE, "a record of unknown type",
     "a record of unknown type"},
    {NEXAR__SHM_FORGE_STREAMS, "STREAMS returning more than opened",
     "more streams returned than were opened"},
    {NEXAR__SHM_FORGE_RING, "a published record past the ring's end",
     "its ring is corrupt"},
    {NEXAR__SHM_FORGE_SMALL_LEN, "a one-line message too short for its header",
     "a small message of a bad length or datatype"},
    {NEXAR__SHM_FORGE_SMALL_SRC, "a one-line message naming another source",
     "source rank does not match the authenticated peer"},
    {0, "CREDIT and RESET for unknown streams", NULL},
};

static uint8_t pattern(int from, int salt, size_t i) {
  return (uint8_t)((size_t)from * 131 + (size_t)salt * 29 + i * 7 + (i >> 9));
}

/* Messages of 0 B to 300 KB (past the eager limit: credit) each way with
 * |peer| on |c|, checked byte for byte. */
static int exchange(nexar_comm_t *c, int peer, int salt) {
  static const size_t sizes[] = {0, 1, 4099, 300000};
  int me;
  NT_OK(nexar_comm_rank(c, &me));
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t n = sizes[k];
    uint8_t *out = malloc(n + 1), *in = malloc(n + 1);
    NT_CHECK(out && in);
    for (size_t i = 0; i < n; i++) out[i] = pattern(me, salt + (int)k, i);
    memset(in, 0xee, n + 1);
    nexar_req_t *q[2] = {NULL, NULL};
    NT_OKC(c, nexar_irecv(c, in, n, NEXAR_UINT8, peer, 10 + (int)k, &q[0]));
    NT_OKC(c, nexar_isend(c, out, n, NEXAR_UINT8, peer, 10 + (int)k, &q[1]));
    NT_OKC(c, nexar_waitall(2, q, NULL));
    for (size_t i = 0; i < n; i++)
      NT_CHECKF(in[i] == pattern(peer, salt + (int)k, i),
                "%zu B from %d: byte %zu is %u", n, peer, i, in[i]);
    NT_CHECK(in[n] == 0xee);
    free(out);
    free(in);
  }
  return 0;
}

/* An allreduce on |c|, checked. */
static int sum_check(nexar_comm_t *c) {
  int me, size;
  NT_OK(nexar_comm_rank(c, &me));
  NT_OK(nexar_comm_size(c, &size));
  int64_t v = me + 1, s = 0;
  NT_OKC(c, nexar_allreduce(c, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(s == (int64_t)size * (size + 1) / 2, "allreduce gave %lld",
            (long long)s);
  return 0;
}

/* Waits (at most 5 s) until every thread of |pid| is stopped. */
static bool wait_stopped(pid_t pid) {
  char dir[64], path[128], buf[256];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  for (int tries = 0; tries < 5000; tries++) {
    DIR *d = opendir(dir);
    bool all = d != NULL;
    for (struct dirent *e; all && (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
      FILE *f = fopen(path, "r");
      size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
      if (f) fclose(f);
      buf[n] = 0;
      const char *p = strrchr(buf, ')');
      all = p && (p[2] == 'T' || p[2] == 't');
    }
    if (d) closedir(d);
    if (all) return true;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return false;
}

/* Rank 1: stop rank 0, forge, stop; once resumed its calls fail. */
static int forger(nexar_ctx_t *ctx, nexar_comm_t *w, const struct kind *k) {
  /* Rank 0 has read everything it needs from this side. */
  NT_OKC(w, nexar_recv(w, NULL, 0, NEXAR_UINT8, VICTIM, 4, NULL));
  NT_CHECK(kill(pids[VICTIM], SIGSTOP) == 0);
  NT_CHECK(wait_stopped(pids[VICTIM]));
  int rc = nexar__shm_test_forge(ctx, VICTIM, k->kind);
  pid_t h = fork();
  if (h == 0) {
    wait_stopped(getppid());
    kill(pids[VICTIM], SIGCONT);
    _exit(0);
  }
  if (h < 0 || rc != 0) kill(pids[VICTIM], SIGCONT);
  NT_CHECKF(rc == 0, "forge: %s", nexar_err_name(rc));
  NT_CHECK(h > 0);
  raise(SIGSTOP);
  NT_CHECK(waitpid(h, NULL, 0) == h);
  rc = nexar_barrier(w);
  NT_CHECKF(rc == NEXAR_ERR_EXCLUDED || rc == NEXAR_ERR_PEER_FAILED ||
                rc == NEXAR_ERR_REVOKED,
            "the forger's barrier: %s: %s", nexar_err_name(rc),
            nexar_comm_last_error(w));
  nexar_finalize(ctx);
  return 0;
}

/* Rank 0: the receive from the forger fails naming it. */
static int victim(nexar_ctx_t *ctx, nexar_comm_t *w, nexar_comm_t *c,
                  const struct kind *k) {
  NT_OKC(w, nexar_send(w, NULL, 0, NEXAR_UINT8, FORGER, 4));
  int64_t x = -1;
  int rc = nexar_recv(w, &x, 1, NEXAR_INT64, FORGER, 5, NULL);
  const char *e = nexar_comm_last_error(w);
  /* PEER_FAILED when the verdict ends the receive, REVOKED when the world
   * was revoked first (a slow process, as under ASan): both name it. */
  NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED,
            "%s: receive from the forger: %s: %s", k->name, nexar_err_name(rc),
            e);
  NT_CHECKF(strstr(e, "process 1"), "%s: %s", k->name, e);
  NT_CHECKF(strstr(e, k->why), "%s: the error does not say \"%s\": %s", k->name,
            k->why, e);
  nexar_failure_t f[4];
  int nf = 0;
  NT_OK(nexar_failures(ctx, f, 4, &nf));
  NT_CHECKF(
      nf == 1 && f[0].id == FORGER && f[0].reason == NEXAR_FAIL_CONNECTION,
      "%s: %d failures, first id %d reason %d", k->name, nf, f[0].id,
      f[0].reason);
  if (exchange(c, 1, 3) || sum_check(c)) return 1;
  NT_OKC(c, nexar_barrier(c));
  return 0;
}

/* Rank 2: learns of the forger's failure, talks to rank 0, resumes it. */
static int third(nexar_comm_t *w, nexar_comm_t *c, const struct kind *k) {
  int rc = nexar_barrier(w);
  const char *e = nexar_comm_last_error(w);
  NT_CHECKF(rc == NEXAR_ERR_REVOKED || rc == NEXAR_ERR_PEER_FAILED,
            "%s: third rank's barrier: %s: %s", k->name, nexar_err_name(rc), e);
  NT_CHECKF(strstr(e, "process 1"), "%s: %s", k->name, e);
  if (exchange(c, 0, 3) || sum_check(c)) return 1;
  NT_OKC(c, nexar_barrier(c));
  kill(pids[FORGER], SIGCONT);
  return 0;
}

static int worker(int index, void *arg) {
  const struct kind *k = arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w, *c = NULL;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int64_t mine = getpid(), all[3];
  NT_OKC(w, nexar_allgather(w, &mine, all, 1, NEXAR_INT64));
  for (int i = 0; i < 3; i++) pids[i] = (pid_t)all[i];
  NT_OKC(w, nexar_comm_split(w, r == FORGER ? NEXAR_UNDEFINED : 0, r, &c));
  /* Traffic on every link first: rank 1 talks to both. */
  if (r != THIRD && exchange(w, r == VICTIM ? FORGER : VICTIM, 1)) return 1;
  if (r != VICTIM && exchange(w, r == FORGER ? THIRD : FORGER, 2)) return 1;
  if (sum_check(w)) return 1;
  int bad = 0;
  if (!k->why) {
    /* Harmless: both ways, then everything still arrives bit-exact. */
    if (r != THIRD) {
      int rc = nexar__shm_test_forge(ctx, r == VICTIM ? FORGER : VICTIM,
                                     NEXAR__SHM_FORGE_CREDIT);
      NT_CHECKF(rc == 0, "forge credit: %s", nexar_err_name(rc));
      rc = nexar__shm_test_forge(ctx, r == VICTIM ? FORGER : VICTIM,
                                 NEXAR__SHM_FORGE_RESET);
      NT_CHECKF(rc == 0, "forge reset: %s", nexar_err_name(rc));
      bad = exchange(w, r == VICTIM ? FORGER : VICTIM, 4);
    }
    if (!bad && r != VICTIM) bad = exchange(w, r == FORGER ? THIRD : FORGER, 5);
    if (!bad && c) bad = exchange(c, r == VICTIM ? 1 : 0, 6) || sum_check(c);
    if (!bad) bad = sum_check(w);
    int nf = -1;
    NT_OK(nexar_failures(ctx, NULL, 0, &nf));
    NT_CHECKF(nf == 0, "%d failures after harmless records", nf);
  } else if (r == FORGER) {
    return forger(ctx, w, k);
  } else {
    bad = r == VICTIM ? victim(ctx, w, c, k) : third(w, c, k);
  }
  if (c) nexar_comm_free(&c);
  if (!bad) NT_OK(nexar_finalize(ctx));
  return bad;
}

int main(void) {
  pids = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
              -1, 0);
  if (pids == MAP_FAILED) return 1;
  int bad = 0;
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    nt_opts_t o = {.world_size = 3,
                   .timeout_ms = 30000,
                   .env =
                       "NEXAR_TRANSPORT=shm\nNEXAR_RECOVERY=manual\n"
                       "NEXAR_HEARTBEAT_MS=200\n"
                       "NEXAR_HEARTBEAT_TIMEOUT_MS=4000\n"
                       "NEXAR_OP_TIMEOUT_MS=15000\n"};
    double t0 = nt_now_ms();
    int rc = nt_run(&o, worker, (void *)&kinds[i]);
    printf("%s: %s (%.1f s)\n", kinds[i].name, rc ? "FAILED" : "ok",
           (nt_now_ms() - t0) / 1000);
    fflush(stdout);
    bad |= rc;
  }
  return bad;
}
