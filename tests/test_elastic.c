/*
 * Elastic membership (docs/elastic.md), real processes over loopback.
 *
 * grow: a world of 4 and an elastic seed (NEXAR_MAX_WORLD_SIZE=6). Two
 * processes start with NEXAR_JOIN=1 once the 4 are running and are admitted
 * at the members' checkpoints (called until the world has 6); then
 * allreduce (int64 and a 1.6 MB f64 one, bit-exact), bcast, allgather,
 * barrier and p2p between every pair on the 6. A seventh joiner, started
 * once the world is full, is refused at once with a message saying so. One
 * rank leaves (it may only finalize: its world fails with
 * NEXAR_ERR_INVALID_USAGE), the collectives are checked again on the 5,
 * and a leave that would go below NEXAR_MIN_WORLD_SIZE=5 is refused on
 * every rank with nobody leaving. The processes sit on fake hosts
 * (NEXAR_HOST_KEY: ranks 0, 2 and the second joiner on one, 1 and 3 on
 * another, the first joiner alone), so every collective is two-level
 * (docs/communicators.md) before and after each change. The joiners set
 * their own NEXAR_SEG_BYTES and NEXAR_EAGER_BYTES and adopt the job's (rank
 * 0's, in JOIN; docs/configuration.md): before, the 1.6 MB allreduce's
 * segments differed.
 *
 * noseed: the seed of a world of 3 is not elastic and exits once the world
 * is formed. The first checkpoint learns it at once (its closed port), a
 * leave works, and a later checkpoint runs one collective, as a barrier.
 * With NEXAR_MAX_WORLD_SIZE = world size nobody asks the seed, a leave
 * included. silent: a seed that never answers and an op timeout no longer
 * than the bootstrap timeout: every member's checkpoint still succeeds.
 * child: a leave revokes a child communicator with the leaver in it, so the
 * others fail at once (NEXAR_ERR_REVOKED), not after the op timeout.
 *
 * abandon: first a joiner gives up while pending (its bootstrap deadline):
 * the seed forgets it, so it is never admitted. Then a joiner advertises an
 * address nobody answers on. The members cannot connect to it within
 * NEXAR_OP_TIMEOUT_MS, so every member's checkpoint fails alike, naming
 * that joiner (id 3: the one that gave up got no id), and nothing changes;
 * the world works and the next checkpoint is a plain one. The joiner's
 * nexar_init fails at its own bootstrap deadline, the one that gave up
 * within 500 ms of its NEXAR_BOOTSTRAP_TIMEOUT_MS.
 *
 * churn (elastic_churn.c): 6 joiners in and out of a world of 4; no
 * connection of a departed process outlives its checkpoint.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "elastic_churn.h"
#include "harness.h"
#include "nexar.h"
#include "cluster/cluster.h"

#define MEMBERS 4
#define MAXW 6
#define EXTRA MAXW /* worker index of the joiner beyond the max */
#define LEAVER 2   /* world rank that leaves */

/* Pipes created before nt_run, inherited by every worker: rank 0 writes to
 * go_join once the members are up, to go_extra once the world is full. */
static int go_join[2], go_extra[2];
/* The joiner beyond the max tells rank 0 it was refused: the leave, which
 * makes room again, must not come before its HELLO. */
static int go_refused[2];

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* Waits (at most 20 s) for one byte on |fd|. */
static int wait_go(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int r;
  do r = poll(&p, 1, 20000);
  while (r < 0 && errno == EINTR);
  char c;
  return r == 1 && read(fd, &c, 1) == 1 ? 0 : -1;
}

static int say(int fd, int n) {
  for (int i = 0; i < n; i++)
    if (write(fd, "g", 1) != 1) return -1;
  return 0;
}

/* Collectives and p2p on |w| (size n, this rank r), all checked. */
static int check_world(nexar_comm_t *w, int n, int r) {
  /* allreduce int64 */
  int64_t iv[16], is[16];
  for (int i = 0; i < 16; i++) iv[i] = nt_ival(r, i);
  NT_OKC(w, nexar_allreduce(w, iv, is, 16, NEXAR_INT64, NEXAR_SUM));
  for (int i = 0; i < 16; i++) {
    int64_t want = 0;
    for (int k = 0; k < n; k++) want += nt_ival(k, i);
    NT_CHECKF(is[i] == want, "allreduce int64[%d] %lld want %lld", i,
              (long long)is[i], (long long)want);
  }
  /* allreduce f64, large enough for the ring, bit-exact */
  size_t cnt = 200000;
  double *dv = malloc(cnt * sizeof(double)), *ds = malloc(cnt * sizeof(double));
  NT_CHECK(dv && ds);
  for (size_t i = 0; i < cnt; i++) dv[i] = nt_dval(r, i);
  NT_OKC(w, nexar_allreduce(w, dv, ds, cnt, NEXAR_FLOAT64, NEXAR_SUM));
  for (size_t i = 0; i < cnt; i++) {
    double want = 0;
    for (int k = 0; k < n; k++) want += nt_dval(k, i);
    if (memcmp(&want, &ds[i], sizeof(double)) != 0) {
      nt_fail(__FILE__, __LINE__, "allreduce f64[%zu] %.17g want %.17g", i,
              ds[i], want);
      return 1;
    }
  }
  free(dv);
  free(ds);
  /* bcast from the last rank */
  int64_t b[1000];
  for (int i = 0; i < 1000; i++) b[i] = r == n - 1 ? nt_ival(n - 1, i) : -1;
  NT_OKC(w, nexar_bcast(w, b, 1000, NEXAR_INT64, n - 1));
  for (int i = 0; i < 1000; i++)
    NT_CHECKF(b[i] == nt_ival(n - 1, i), "bcast[%d] %lld", i, (long long)b[i]);
  /* allgather: slot k holds rank k's values */
  if (nt_check_allgather(w, r, n)) return 1;
  NT_OKC(w, nexar_barrier(w));
  /* p2p between every pair, all at once */
  nexar_req_t *rq[2 * MAXW];
  int32_t out[MAXW], in[MAXW];
  int nr = 0;
  for (int k = 0; k < n; k++) {
    if (k == r) continue;
    out[k] = 1000 * r + k;
    in[k] = -1;
    NT_OKC(w, nexar_irecv(w, &in[k], 1, NEXAR_INT32, k, 40 + r, &rq[nr++]));
    NT_OKC(w, nexar_isend(w, &out[k], 1, NEXAR_INT32, k, 40 + k, &rq[nr++]));
  }
  NT_OKC(w, nexar_waitall((size_t)nr, rq, NULL));
  for (int k = 0; k < n; k++)
    if (k != r) NT_CHECKF(in[k] == 1000 * k + r, "p2p from %d: %d", k, in[k]);
  return 0;
}

/* Rank k of |w| must have stable id ids[k], and the epoch must be |ep|. */
static int check_ids(nexar_comm_t *w, const int *ids, int n, uint32_t ep) {
  for (int k = 0; k < n; k++) {
    int id = -1;
    NT_OKC(w, nexar_comm_id_of(w, k, &id));
    NT_CHECKF(id == ids[k], "rank %d has id %d, want %d", k, id, ids[k]);
  }
  uint32_t e = 0;
  NT_OKC(w, nexar_comm_epoch(w, &e));
  NT_CHECKF(e == ep, "epoch %u, want %u", e, ep);
  return 0;
}

/* Checkpoints until the world has MAXW members (bounded). */
static int grow_to_max(nexar_ctx_t *ctx, nexar_comm_t *w) {
  int n = 0;
  NT_OK(nexar_comm_size(w, &n));
  for (int tries = 0; n < MAXW; tries++) {
    NT_CHECKF(tries < 400, "world still %d after %d checkpoints", n, tries);
    nexar_membership_t m;
    NT_OKC(w, nexar_elastic_checkpoint(ctx, 0, &m));
    NT_CHECKF(m.old_size == n && m.new_size >= n && m.left == 0 &&
                  m.new_size == n + m.joined,
              "membership %d -> %d, joined %d left %d", m.old_size, m.new_size,
              m.joined, m.left);
    int r;
    NT_OK(nexar_comm_rank(w, &r));
    NT_OK(nexar_comm_size(w, &n));
    NT_CHECKF(n == m.new_size && r == m.new_rank, "rank %d size %d", r, n);
    if (n < MAXW) sleep_ms(20);
  }
  return 0;
}

static int extra_joiner(void) {
  NT_CHECK(wait_go(go_extra[0]) == 0);
  setenv("NEXAR_JOIN", "1", 1);
  nexar_ctx_t *ctx = NULL;
  double t0 = nt_now_ms();
  int rc = nexar_init(NULL, &ctx);
  const char *e = nexar_last_error();
  NT_CHECKF(rc == NEXAR_ERR_INVALID_USAGE && strstr(e, "full"),
            "a joiner beyond the max: %s: %s", nexar_err_name(rc), e);
  NT_CHECKF(nt_now_ms() - t0 < 5000, "refused after %.0f ms", nt_now_ms() - t0);
  NT_CHECK(say(go_refused[1], 1) == 0);
  return 0;
}

static int grow_worker(int index, void *arg) {
  (void)arg;
  if (index == EXTRA) return extra_joiner();
  /* Fake hosts: the world spans several, some holding two ranks or more,
   * so its collectives are two-level; a joiner's host key reaches the
   * members in ADMITTED and theirs reach it in JOIN, or the two sides
   * would group the ranks differently. */
  static const char *const host[MAXW] = {"a1", "b2", "a1", "b2", "c3", "a1"};
  setenv("NEXAR_HOST_KEY", host[index], 1);
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  if (index >= MEMBERS) {
    /* A late process: joins while the members are running. */
    NT_CHECK(wait_go(go_join[0]) == 0);
    unsetenv("NEXAR_RANK");
    setenv("NEXAR_JOIN", "1", 1);
    /* Settings every member shares, other than the members': the joiner
     * adopts theirs (JOIN), or the ring allreduce's segments differ. */
    setenv("NEXAR_SEG_BYTES", "65536", 1);
    setenv("NEXAR_EAGER_BYTES", "4096", 1);
    NT_OK(nt_join(&ctx));
    w = nexar_comm_world(ctx);
    NT_OK(nexar_comm_rank(w, &r));
    NT_OK(nexar_comm_size(w, &n));
    NT_CHECKF(r >= MEMBERS && r < n, "joiner got rank %d of %d", r, n);
  } else {
    NT_OK(nt_join_world(&ctx, &w, &r, &n));
    NT_CHECK(n == MEMBERS);
    if (r == 0) NT_CHECK(say(go_join[1], MAXW - MEMBERS) == 0);
  }
  if (grow_to_max(ctx, w)) return 1;
  NT_OK(nexar_comm_rank(w, &r));
  NT_OK(nexar_comm_size(w, &n));
  /* Joiners get the next stable ids, in the order they are admitted. */
  static const int grown[MAXW] = {0, 1, 2, 3, 4, 5};
  uint32_t ep = 0;
  NT_OKC(w, nexar_comm_epoch(w, &ep));
  NT_CHECKF(ep >= 1, "epoch %u after growing", ep);
  if (check_ids(w, grown, n, ep)) return 1;
  if (r == 0) NT_CHECK(say(go_extra[1], 1) == 0);
  if (check_world(w, n, r)) return 1;
  if (r == 0) NT_CHECK(wait_go(go_refused[0]) == 0);

  /* One rank leaves. */
  nexar_membership_t m;
  int leaving = r == LEAVER;
  NT_OKC(w, nexar_elastic_checkpoint(ctx, leaving, &m));
  NT_CHECKF(m.old_rank == r && m.old_size == MAXW && m.left == 1 &&
                m.joined == 0 && m.new_size == MAXW - 1,
            "leave: %d/%d -> %d/%d, left %d joined %d", m.old_rank, m.old_size,
            m.new_rank, m.new_size, m.left, m.joined);
  if (leaving) {
    NT_CHECKF(m.new_rank == -1, "leaver new_rank %d", m.new_rank);
    int rc = nexar_barrier(w);
    NT_CHECKF(rc == NEXAR_ERR_INVALID_USAGE &&
                  strstr(nexar_comm_last_error(w), "left"),
              "barrier after leaving: %s: %s", nexar_err_name(rc),
              nexar_comm_last_error(w));
    rc = nexar_elastic_checkpoint(ctx, 0, NULL);
    NT_CHECKF(rc == NEXAR_ERR_INVALID_USAGE, "checkpoint after leaving: %s",
              nexar_err_name(rc));
    NT_OK(nexar_finalize(ctx));
    return 0;
  }
  NT_CHECKF(m.new_rank == (r < LEAVER ? r : r - 1), "new rank %d (was %d)",
            m.new_rank, r);
  NT_OK(nexar_comm_rank(w, &r));
  NT_OK(nexar_comm_size(w, &n));
  NT_CHECKF(n == MAXW - 1 && r == m.new_rank && m.epoch == ep + 1,
            "rank %d size %d epoch %u", r, n, m.epoch);
  static const int left[MAXW - 1] = {0, 1, 3, 4, 5};
  if (check_ids(w, left, n, ep + 1)) return 1;
  if (check_world(w, n, r)) return 1;

  /* Below NEXAR_MIN_WORLD_SIZE: refused everywhere, nobody leaves. */
  int rc = nexar_elastic_checkpoint(ctx, r == 0, &m);
  NT_CHECKF(rc == NEXAR_ERR_INVALID_ARG &&
                strstr(nexar_comm_last_error(w), "NEXAR_MIN_WORLD_SIZE"),
            "leave below the minimum: %s: %s", nexar_err_name(rc),
            nexar_comm_last_error(w));
  NT_OK(nexar_comm_size(w, &n));
  NT_CHECK(n == MAXW - 1);
  if (check_world(w, n, r)) return 1;
  if (check_ids(w, left, n, ep + 1)) return 1;
  /* Leaving and joining are no failures. */
  int nf = -1;
  NT_OK(nexar_failures(ctx, NULL, 0, &nf));
  NT_CHECKF(nf == 0, "%d failures recorded", nf);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* Collectives the world has run (its next collective number). */
static uint64_t world_colls(nexar_ctx_t *ctx) {
  return nexar_comm_world(ctx)->coll_seq;
}

/* A plain checkpoint (nobody leaves, nobody joins), timed: NEXAR_OK on
 * every member within |ms|, the world unchanged; *colls: the collectives it
 * ran on the world. */
static int plain_checkpoint(nexar_ctx_t *ctx, int n, double ms,
                            uint64_t *colls) {
  nexar_comm_t *w = nexar_comm_world(ctx);
  nexar_membership_t m;
  uint64_t c0 = world_colls(ctx);
  double t0 = nt_now_ms();
  NT_OKC(w, nexar_elastic_checkpoint(ctx, 0, &m));
  double took = nt_now_ms() - t0;
  *colls = world_colls(ctx) - c0;
  NT_CHECKF(took < ms && m.new_size == n && m.joined == 0 && m.left == 0,
            "plain checkpoint: %.0f ms (limit %.0f), size %d, joined %d, "
            "left %d",
            took, ms, m.new_size, m.joined, m.left);
  return 0;
}

/* A seed that is gone (a classic one exits after formation): the first
 * checkpoint learns it at once from its closed port, the others do not ask;
 * a plain checkpoint then runs one collective, as a barrier would. With
 * NEXAR_MAX_WORLD_SIZE=3 (arg) nobody ever asks, a leave included. */
static int noseed_worker(int index, void *arg) {
  (void)index;
  bool escape = arg != NULL;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  uint64_t colls;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (!escape && plain_checkpoint(ctx, 3, 1000, &colls)) return 1;
  nexar_membership_t m;
  double t0 = nt_now_ms();
  NT_OKC(w, nexar_elastic_checkpoint(ctx, r == 2, &m));
  NT_CHECKF(m.new_size == 2 && m.joined == 0 && m.left == 1,
            "size %d joined %d left %d", m.new_size, m.joined, m.left);
  NT_CHECKF(nt_now_ms() - t0 < 1000, "leave with the seed gone: %.0f ms",
            nt_now_ms() - t0);
  if (r == 2) {
    NT_OK(nexar_finalize(ctx));
    return 0;
  }
  if (plain_checkpoint(ctx, 2, 1000, &colls)) return 1;
  NT_CHECKF(colls == 1,
            "a checkpoint with no seed to ask ran %llu "
            "collectives, not one",
            (unsigned long long)colls);
  if (check_world(w, 2, m.new_rank)) return 1;
  int nf = -1;
  NT_OK(nexar_failures(ctx, NULL, 0, &nf));
  NT_CHECKF(nf == 0, "%d failures recorded", nf);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* A seed that is there but silent (NEXAR_OP_TIMEOUT_MS=2000 is not above
 * NEXAR_BOOTSTRAP_TIMEOUT_MS=2000): the leader (rank 0, whose NEXAR_SEED is
 * pointed at a UDP port that never answers) gives up in time for the
 * others, who wait for its answer in a broadcast: every member's
 * checkpoint succeeds; the next one does not ask. */
static int silent_worker(int index, void *arg) {
  (void)index;
  const char *hole = arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  uint64_t colls;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  /* The seed's address was resolved at init: point both at the hole. */
  if (r == 0) {
    ctx->prm.seed_addr = hole;
    NT_CHECK(nexar__parse_addr(hole, 0, &ctx->seed_ss, &ctx->seed_sl) == 0);
  }
  if (plain_checkpoint(ctx, 3, 2000, &colls)) return 1;
  if (plain_checkpoint(ctx, 3, 1000, &colls)) return 1;
  NT_CHECKF(colls == 1,
            "after a silent seed a checkpoint ran %llu "
            "collectives, not one",
            (unsigned long long)colls);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* A child communicator (a dup of the world) with a member that leaves:
 * every staying member's next operation on it fails at once with
 * NEXAR_ERR_REVOKED naming the leave, not after NEXAR_OP_TIMEOUT_MS. */
static int child_worker(int index, void *arg) {
  (void)index;
  (void)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w, *child = NULL;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  NT_OKC(w, nexar_comm_dup(w, &child));
  int64_t v = r + 1, sum = 0;
  NT_OKC(child, nexar_allreduce(child, &v, &sum, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(sum == 6, "allreduce on the child: %lld", (long long)sum);
  nexar_membership_t m;
  NT_OKC(w, nexar_elastic_checkpoint(ctx, r == 2, &m));
  if (r == 2) {
    NT_OK(nexar_finalize(ctx));
    return 0;
  }
  /* Rank 0 sends first: rank 1's first step waits on rank 0, a survivor. */
  double t0 = nt_now_ms();
  int rc = nexar_bcast(child, &v, 1, NEXAR_INT64, 0);
  double ms = nt_now_ms() - t0;
  NT_CHECKF(rc == NEXAR_ERR_REVOKED &&
                strstr(nexar_comm_last_error(child), "left the job") &&
                ms < 2000,
            "bcast on a child with a leaver: %s after %.0f ms: %s",
            nexar_err_name(rc), ms, nexar_comm_last_error(child));
  rc = nexar_comm_free(&child);
  NT_CHECKF(rc == NEXAR_ERR_REVOKED && child == NULL, "comm_free: %s",
            nexar_err_name(rc));
  if (check_world(w, 2, m.new_rank)) return 1;
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* A UDP socket on loopback that never answers; its address in |out|. */
static int bind_hole(char *out, size_t n) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
      getsockname(fd, (struct sockaddr *)&a, &al) < 0)
    return -1;
  snprintf(out, n, "127.0.0.1:%d", ntohs(a.sin_port));
  return fd;
}

static int go_quit[2]; /* the joiner that gave up tells the members */

static int abandon_worker(int index, void *arg) {
  (void)arg;
  if (index == 4) {
    NT_CHECK(wait_go(go_extra[0]) == 0);
    unsetenv("NEXAR_RANK");
    setenv("NEXAR_JOIN", "1", 1);
    setenv("NEXAR_BOOTSTRAP_TIMEOUT_MS", "300", 1);
    nexar_ctx_t *ctx = NULL;
    double t0 = nt_now_ms();
    int rc = nexar_init(NULL, &ctx);
    double ms = nt_now_ms() - t0;
    NT_CHECKF(rc == NEXAR_ERR_TIMEOUT &&
                  strstr(nexar_last_error(), "pending as a joiner"),
              "a joiner that gives up: %s: %s", nexar_err_name(rc),
              nexar_last_error());
    /* Its own deadline, with no grace for a verdict it never gets. */
    NT_CHECKF(ms < 300 + 500,
              "a joiner never admitted gave up after %.0f ms "
              "(NEXAR_BOOTSTRAP_TIMEOUT_MS=300)",
              ms);
    NT_CHECK(say(go_quit[1], 3) == 0);
    return 0;
  }
  if (index == 3) {
    NT_CHECK(wait_go(go_join[0]) == 0);
    unsetenv("NEXAR_RANK");
    setenv("NEXAR_JOIN", "1", 1);
    setenv("NEXAR_ADVERTISE_ADDR", "127.0.0.1:9", 1); /* nobody answers */
    setenv("NEXAR_TRANSPORT", "quic", 1);             /* nor on this host */
    setenv("NEXAR_BOOTSTRAP_TIMEOUT_MS", "4000", 1);
    nexar_ctx_t *ctx = NULL;
    int rc = nexar_init(NULL, &ctx);
    NT_CHECKF(rc == NEXAR_ERR_TIMEOUT, "unreachable joiner: %s: %s",
              nexar_err_name(rc), nexar_last_error());
    return 0;
  }
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (r == 0) NT_CHECK(say(go_extra[1], 1) == 0);
  NT_CHECK(wait_go(go_quit[0]) == 0);
  if (r == 0) NT_CHECK(say(go_join[1], 1) == 0);
  nexar_membership_t m;
  int rc = NEXAR_OK;
  for (int tries = 0; rc == NEXAR_OK; tries++) {
    NT_CHECKF(tries < 400, "the joiner was never taken in");
    rc = nexar_elastic_checkpoint(ctx, 0, &m);
    NT_CHECKF(rc != NEXAR_OK || m.joined == 0, "joined %d", m.joined);
    int go = rc == NEXAR_OK;
    /* Rank 0 decides, so that every member stops at the same checkpoint. */
    NT_OKC(w, nexar_bcast(w, &go, 1, NEXAR_INT32, 0));
    if (go && rc == NEXAR_OK) sleep_ms(20);
    if (!go) break;
  }
  NT_CHECKF(rc == NEXAR_ERR_TIMEOUT &&
                strstr(nexar_comm_last_error(w), "abandoned") &&
                strstr(nexar_comm_last_error(w), "joiner id 3 at 127.0.0.1:9"),
            "checkpoint with an unreachable joiner: %s: %s", nexar_err_name(rc),
            nexar_comm_last_error(w));
  if (r == 0) printf("[0] as expected: %s\n", nexar_comm_last_error(w));
  uint32_t ep = 1;
  NT_OKC(w, nexar_comm_epoch(w, &ep));
  NT_OK(nexar_comm_size(w, &n));
  NT_CHECKF(n == 3 && ep == 0, "size %d epoch %u after abandoning", n, ep);
  if (check_world(w, n, r)) return 1;
  NT_OKC(w, nexar_elastic_checkpoint(ctx, 0, &m));
  NT_CHECKF(m.joined == 0 && m.new_size == 3 && m.epoch == 0,
            "joined %d size %d epoch %u", m.joined, m.new_size, m.epoch);
  int nf = -1;
  NT_OK(nexar_failures(ctx, NULL, 0, &nf));
  NT_CHECKF(nf == 0, "%d failures recorded", nf);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

typedef struct world {
  const char *what;
  nt_worker_fn fn; /* NULL: the churn (elastic_churn.c runs its own) */
  void *arg;
  nt_opts_t o;
} world_t;

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  char hole[64];
  int hfd = bind_hole(hole, sizeof(hole));
  if (pipe(go_join) < 0 || pipe(go_extra) < 0 || pipe(go_quit) < 0 ||
      pipe(go_refused) < 0 || hfd < 0)
    return 1;
  const world_t worlds[] = {
      {"grow 4 -> 6, leave -> 5",
       grow_worker,
       NULL,
       {.world_size = MEMBERS,
        .nprocs = MAXW + 1,
        .timeout_ms = 45000,
        .env = "NEXAR_MAX_WORLD_SIZE=6\nNEXAR_MIN_WORLD_SIZE=5\n"}},
      {"checkpoints with a seed that is gone",
       noseed_worker,
       NULL,
       {.world_size = 3,
        .timeout_ms = 20000,
        .env = "NEXAR_OP_TIMEOUT_MS=3000\n"}},
      {"leave, NEXAR_MAX_WORLD_SIZE = world size: the seed is never asked",
       noseed_worker,
       "escape",
       {.world_size = 3,
        .timeout_ms = 20000,
        .env = "NEXAR_MAX_WORLD_SIZE=3\n"}},
      {"checkpoint with a silent seed, op timeout = bootstrap timeout",
       silent_worker,
       hole,
       {.world_size = 3,
        .timeout_ms = 20000,
        .env = "NEXAR_MAX_WORLD_SIZE=4\nNEXAR_OP_TIMEOUT_MS=2000\n"
               "NEXAR_BOOTSTRAP_TIMEOUT_MS=2000\n"}},
      {"leave revokes the child communicators with the leaver",
       child_worker,
       NULL,
       {.world_size = 3,
        .timeout_ms = 30000,
        .env = "NEXAR_MAX_WORLD_SIZE=4\nNEXAR_OP_TIMEOUT_MS=10000\n"}},
      {"checkpoint abandoned for an unreachable joiner",
       abandon_worker,
       NULL,
       {.world_size = 3,
        .nprocs = 5,
        .timeout_ms = 20000,
        .env = "NEXAR_MAX_WORLD_SIZE=4\nNEXAR_OP_TIMEOUT_MS=1500\n"}},
      {"churn: 6 joiners in and out of a world of 4, departed connections "
       "freed",
       NULL,
       NULL,
       {0}},
  };
  int fails = 0;
  for (size_t i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++) {
    const world_t *wd = &worlds[i];
    churn_opts_t co = {.cycles = 6, .timeout_ms = 30000};
    double t0 = nt_now_ms();
    int rc = wd->fn ? nt_run(&wd->o, wd->fn, wd->arg) : churn_run(&co);
    printf("%s elastic %s (%.1f s)\n", rc ? "FAIL" : "ok", wd->what,
           (nt_now_ms() - t0) / 1e3);
    fails += rc != 0;
  }
  close(hfd);
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
