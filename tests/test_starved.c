/*
 * A starved same-host peer is not a failed one (docs/fault-tolerance.md,
 * "Crowded hosts"). Rank 2 is put in a cgroup whose CPU quota is 1 ms per
 * second: its threads stay runnable but run about once a second, so its
 * heartbeats come about a second apart, more than NEXAR_HEARTBEAT_TIMEOUT_MS
 * (400 ms here). Its neighbours see that it waits for a CPU and give it
 * four timeouts: nobody is declared failed, and the barrier and allreduce
 * after it are right on every rank. Before that rule rank 2 was declared
 * failed within the timeout. A stopped peer is still judged at the timeout
 * (test_ft, sigstop).
 *
 * Needs a writable cgroup CPU controller (v1 "cpu" or v2 "cpu.max", as
 * root): skipped (77) where there is none.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

#define VICTIM 2
#define STARVE_MS 2500

static char group[512], home[512]; /* the throttled group, the original */

static int write_file(const char *dir, const char *name, const char *text) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int rc = fputs(text, f) < 0 ? -1 : 0;
  if (fclose(f) != 0) rc = -1;
  return rc;
}

/* This process's cgroup path in the v1 hierarchy with "cpu" among its
 * controllers, or (|v2|) in the unified one (empty controller list). */
static int own_path(int v2, char *out, size_t len) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return -1;
  char line[512];
  int found = -1;
  while (found < 0 && fgets(line, sizeof line, f)) {
    char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
    if (!b) continue;
    *b = 0;
    b[strcspn(b + 1, "\n") + 1] = 0;
    const char *ctl = a + 1;
    int match = v2 ? ctl[0] == 0 : 0;
    for (char *t = strtok(a + 1, ","); !v2 && t; t = strtok(NULL, ","))
      match |= strcmp(t, "cpu") == 0;
    if (match) {
      snprintf(out, len, "%s", b + 1);
      found = 0;
    }
  }
  fclose(f);
  return found;
}

/* Makes |group| with a quota of 1 ms per second; 0, or -1 (skip). */
static int make_group(void) {
  char path[256];
  struct stat st;
  int v1 = stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", &st) == 0;
  if (own_path(!v1, path, sizeof path) < 0) return -1;
  if (strcmp(path, "/") == 0) path[0] = 0;
  const char *root = v1 ? "/sys/fs/cgroup/cpu" : "/sys/fs/cgroup";
  snprintf(home, sizeof home, "%s%s", root, path);
  snprintf(group, sizeof group, "%s/nexar-starved-%d", home, (int)getpid());
  if (mkdir(group, 0755) != 0 && errno != EEXIST) return -1;
  int rc = v1 ? (write_file(group, "cpu.cfs_period_us", "1000000") ||
                 write_file(group, "cpu.cfs_quota_us", "1000"))
              : write_file(group, "cpu.max", "1000 1000000");
  if (rc) rmdir(group);
  return rc ? -1 : 0;
}

static int move(const char *dir, pid_t pid) {
  char text[32];
  snprintf(text, sizeof text, "%d\n", (int)pid);
  return write_file(dir, "cgroup.procs", text);
}

static int worker(int index, void *arg) {
  (void)arg;
  (void)index;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  int64_t mine = getpid(), all[8];
  NT_OKC(w, nexar_allgather(w, &mine, all, 1, NEXAR_INT64));
  NT_OKC(w, nexar_barrier(w));
  if (r == 0) {
    NT_CHECKF(move(group, (pid_t)all[VICTIM]) == 0,
              "cannot move rank %d into %s", VICTIM, group);
    struct timespec ts = {STARVE_MS / 1000, (STARVE_MS % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    NT_CHECKF(move(home, (pid_t)all[VICTIM]) == 0,
              "cannot move rank %d back to %s", VICTIM, home);
  }
  /* Rank 1 waits here for the starved rank; rank 2 crawls to it. */
  NT_OKC(w, nexar_barrier(w));
  int64_t v = r + 1, s = 0;
  NT_OKC(w, nexar_allreduce(w, &v, &s, 1, NEXAR_INT64, NEXAR_SUM));
  NT_CHECKF(s == (int64_t)n * (n + 1) / 2, "allreduce: %lld", (long long)s);
  nexar_failure_t f[8];
  int nf = -1;
  NT_OK(nexar_failures(ctx, f, 8, &nf));
  NT_CHECKF(nf == 0, "rank %d: %d failure(s), first: process %d", r, nf,
            nf > 0 ? f[0].id : -1);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (make_group() != 0) {
    printf("skip: no writable cgroup CPU controller (%s)\n", strerror(errno));
    return 77;
  }
  nt_opts_t o = {.world_size = 3,
                 .timeout_ms = 30000,
                 .env =
                     "NEXAR_TRANSPORT=shm\nNEXAR_HEARTBEAT_MS=100\n"
                     "NEXAR_HEARTBEAT_TIMEOUT_MS=400\n"};
  int rc = nt_run(&o, worker, NULL);
  rmdir(group);
  printf("%s starved rank %d for %d ms (quota 1 ms per s)\n",
         rc ? "FAIL" : "ok", VICTIM, STARVE_MS);
  return rc ? 1 : 0;
}
