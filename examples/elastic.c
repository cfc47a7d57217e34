/*
 * Elastic membership (docs/elastic.md): the job grows by processes started
 * later, then one member leaves, and the sums stay right.
 *
 *   build/tools/nexar-run -n 3 --max-world 5 -- build/examples/elastic 2
 *
 * Rank 0 starts the given number of joiners (this program again, with
 * NEXAR_JOIN=1; NEXAR_SEED and NEXAR_SECRET are inherited). The members
 * call nexar_elastic_checkpoint until the world has grown by that many (rank
 * 0 decides when to stop, so that every member stops at the same
 * checkpoint), allreduce, then the last rank leaves and the rest allreduce
 * again.
 */
#include <errno.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nexar.h"

extern char **environ;

#define MAX_JOINERS 16

/* Starts |n| joiners: this program with NEXAR_JOIN=1 and no NEXAR_RANK;
 * argv[1] is the target size. Returns how many started. */
static int spawn_joiners(int n, int target, pid_t *pids) {
  char t[16];
  snprintf(t, sizeof t, "%d", target);
  char *argv[] = {"elastic", "--target", t, NULL};
  setenv("NEXAR_JOIN", "1", 1);
  unsetenv("NEXAR_RANK");
  int started = 0;
  for (int i = 0; i < n; i++) {
    int rc = posix_spawn(&pids[started], "/proc/self/exe", NULL, NULL, argv,
                         environ);
    if (rc == 0)
      started++;
    else
      fprintf(stderr, "cannot start a joiner: %s\n", strerror(rc));
  }
  unsetenv("NEXAR_JOIN");
  return started;
}

static int sum_ranks(nexar_comm_t *w, const char *when) {
  int rank, size;
  nexar_comm_rank(w, &rank);
  nexar_comm_size(w, &size);
  int64_t v = rank, s = -1;
  int rc = nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM);
  if (rc < 0) {
    fprintf(stderr, "%s: allreduce: %s\n", when, nexar_comm_last_error(w));
    return rc;
  }
  if (s != (int64_t)size * (size - 1) / 2) {
    fprintf(stderr, "%s: wrong sum %lld\n", when, (long long)s);
    return NEXAR_ERR_INTERNAL;
  }
  printf("%s: rank %d of %d, sum of ranks %lld\n", when, rank, size,
         (long long)s);
  return 0;
}

int main(int argc, char **argv) {
  int joiners = 2, target = 0;
  if (argc == 3 && strcmp(argv[1], "--target") == 0)
    target = atoi(argv[2]); /* a joiner */
  else if (argc == 2)
    joiners = atoi(argv[1]);
  if (joiners < 0 || joiners > MAX_JOINERS) {
    fprintf(stderr, "usage: elastic [joiners 0..%d]\n", MAX_JOINERS);
    return 2;
  }
  nexar_ctx_t *ctx;
  int rc = nexar_init(NULL, &ctx);
  if (rc < 0) {
    fprintf(stderr, "nexar_init: %s\n", nexar_last_error());
    return 1;
  }
  nexar_comm_t *w = nexar_comm_world(ctx);
  int rank, size;
  nexar_comm_rank(w, &rank);
  nexar_comm_size(w, &size);
  pid_t pids[MAX_JOINERS];
  int spawned = 0;
  if (!target) {
    target = size + joiners;
    if (rank == 0) spawned = spawn_joiners(joiners, target, pids);
  }
  /* Grow: one checkpoint after another until rank 0 says stop. */
  for (int tries = 0;; tries++) {
    int go = size < target && tries < 500;
    rc = nexar_bcast(w, &go, 1, NEXAR_INT32, 0);
    if (rc < 0 || !go) break;
    nexar_membership_t m;
    rc = nexar_elastic_checkpoint(ctx, 0, &m);
    if (rc < 0) break;
    size = m.new_size;
    if (m.joined && m.new_rank == 0)
      printf("checkpoint: %d joined, world of %d (epoch %u)\n", m.joined,
             m.new_size, m.epoch);
    if (size < target) nanosleep(&(struct timespec){0, 20000000}, NULL);
  }
  if (rc == 0) rc = sum_ranks(w, "grown");
  /* The last rank leaves; the others go on. */
  if (rc == 0) {
    nexar_comm_rank(w, &rank);
    nexar_comm_size(w, &size);
    nexar_membership_t m;
    rc = nexar_elastic_checkpoint(ctx, size > 1 && rank == size - 1, &m);
    if (rc == 0 && m.new_rank < 0)
      printf("rank %d of %d left\n", m.old_rank, m.old_size);
    else if (rc == 0)
      rc = sum_ranks(w, "after the leave");
  }
  if (rc < 0)
    fprintf(stderr, "%s: %s\n", nexar_err_name(rc), nexar_comm_last_error(w));
  int f = nexar_finalize(ctx);
  for (int i = 0; i < spawned; i++) {
    int st;
    while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = NEXAR_ERR_INTERNAL;
  }
  return rc < 0 || f < 0 ? 1 : 0;
}
