/*
 * The flight recorder and nexar-trace (docs/debugging.md) on a hang: one
 * rank of four sleeps instead of calling an allreduce that the others call
 * with a short NEXAR_OP_TIMEOUT_MS. The others fail with NEXAR_ERR_TIMEOUT
 * and dump their recorders by themselves into NEXAR_DEBUG_FILE's folder;
 * rank 0 also dumps through nexar_flight_dump while it waits (its allreduce
 * shows as waiting for rank 2), the sleeper dumps on SIGUSR1 and through
 * the API. nexar-trace on the folder must name rank 2, and only rank 2.
 *
 * Second case, a failure: rank 2 dumps and then dies (SIGKILL) instead of
 * calling the allreduce; the others' allreduce fails with
 * NEXAR_ERR_PEER_FAILED (or REVOKED), which dumps their recorders, and
 * nexar-trace names rank 2 again.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define SLEEPER 2
#define OP_TIMEOUT_MS 2000

static char dir[256];
static int killed; /* the second case: the sleeper dies instead */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0) {
  }
}

/* The contents of |path| (at most 256 KiB, NUL-terminated), or NULL. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *b = calloc(1, 1 << 18);
  if (b) fread(b, 1, (1 << 18) - 1, f);
  fclose(f);
  return b;
}

/* The automatic dump of world rank |rank| in |dir| (its name starts with
 * "nexar-flight.RANK."), read whole, or NULL. */
static char *auto_dump(int rank) {
  char prefix[64], path[600];
  snprintf(prefix, sizeof prefix, "nexar-flight.%d.", rank);
  DIR *d = opendir(dir);
  if (!d) return NULL;
  char *text = NULL;
  for (struct dirent *e; !text && (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (strncmp(e->d_name, prefix, strlen(prefix)) || n < 6 ||
        strcmp(e->d_name + n - 6, ".jsonl"))
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    text = slurp(path);
  }
  closedir(d);
  return text;
}

static int worker(int index, void *arg) {
  (void)arg;
  nexar_ctx_t *ctx;
  NT_OK(nt_join(&ctx));
  nexar_comm_t *w = nexar_comm_world(ctx);
  int32_t one = 1, sum = 0;
  /* Collective #0: everyone. */
  NT_OK(nexar_allreduce(w, &one, &sum, 1, NEXAR_INT32, NEXAR_SUM));
  NT_CHECK(sum == 4);
  /* A user message, recorded as a send on rank 1 and a recv on rank 3. */
  int32_t msg = 77;
  if (index == 1) NT_OK(nexar_send(w, &msg, 1, NEXAR_INT32, 3, 5));
  if (index == 3) {
    NT_OK(nexar_recv(w, &msg, 1, NEXAR_INT32, 1, 5, NULL));
    NT_CHECK(msg == 77);
  }
  /* The killed case: the others tell the victim they are past #0 and the
   * user message first (ranks leave a collective at different times; a
   * death before they have left #0 would fail #0, not #1). */
  if (killed && index != SLEEPER)
    NT_OK(nexar_send(w, &msg, 1, NEXAR_INT32, SLEEPER, 6));
  if (index == SLEEPER && killed) {
    int size = 0;
    NT_OK(nexar_comm_size(w, &size));
    for (int r = 0; r < size; r++)
      if (r != SLEEPER) NT_OK(nexar_recv(w, &msg, 1, NEXAR_INT32, r, 6, NULL));
    NT_OK(nexar_flight_dump(ctx, NULL));
    raise(SIGKILL);
  }
  if (killed) {
    int rc = nexar_allreduce(w, &one, &sum, 1, NEXAR_INT32, NEXAR_SUM);
    NT_CHECK(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED);
    char *d = auto_dump(index);
    NT_CHECK(d != NULL);
    char *e = strstr(d, "\"seq\":1,");
    NT_CHECK(e != NULL);
    NT_CHECK(strstr(e, "\"state\":\"failed\",\"error\":\"NEXAR_ERR_") != NULL);
    free(d);
    nexar_finalize(ctx);
    return 0;
  }
  if (index == SLEEPER) {
    /* Collective #1 is never called here. A SIGUSR1 dumps on the engine's
     * next pass. */
    NT_CHECK(raise(SIGUSR1) == 0);
    char *d = NULL;
    for (int i = 0; i < 100 && !(d = auto_dump(index)); i++) sleep_ms(20);
    NT_CHECK(d != NULL);
    NT_CHECK(strstr(d, "\"nexar_flight\":1,\"rank\":2,\"world\":4") != NULL);
    NT_CHECK(strstr(d, "\"op\":\"allreduce\",\"seq\":0,") != NULL);
    free(d);
    sleep_ms(OP_TIMEOUT_MS + 1000);
    NT_OK(nexar_flight_dump(ctx, NULL));
    nexar_finalize(ctx);
    return 0;
  }
  int rc;
  if (index == 0) {
    /* Non-blocking: the recorder shows the call waiting meanwhile. */
    nexar_req_t *r = NULL;
    NT_OK(nexar_iallreduce(w, &one, &sum, 1, NEXAR_INT32, NEXAR_SUM, &r));
    /* Once rank 1 (the first partner) has contributed, the call waits
     * for rank 2 only (rank 1 may be late on a loaded host: look again). */
    char path[300], *d = NULL, *e = NULL;
    snprintf(path, sizeof path, "%s/live.json", dir);
    for (int i = 0; i < 15 && !e; i++) {
      sleep_ms(100);
      free(d);
      NT_OK(nexar_flight_dump(ctx, path));
      d = slurp(path);
      NT_CHECK(d != NULL);
      e = strstr(d, "\"seq\":1,");
      NT_CHECK(e != NULL);
      NT_CHECK(strstr(e, "\"state\":\"waiting\"") != NULL);
      e = strstr(e, "\"waits_for\":[2]");
    }
    NT_CHECK(e != NULL);
    NT_CHECK(strstr(d, "secret") == NULL);
    free(d);
    NT_CHECK(nexar_flight_dump(ctx, "") == NEXAR_ERR_INVALID_ARG);
    NT_CHECK(nexar_flight_dump(NULL, path) == NEXAR_ERR_INVALID_ARG);
    rc = nexar_wait(&r, NULL);
  } else {
    rc = nexar_allreduce(w, &one, &sum, 1, NEXAR_INT32, NEXAR_SUM);
  }
  NT_CHECK(rc == NEXAR_ERR_TIMEOUT);
  /* The failure dumped the recorder by itself. */
  char *d = auto_dump(index);
  NT_CHECK(d != NULL);
  char *e = strstr(d, "\"seq\":1,");
  NT_CHECK(e != NULL);
  NT_CHECK(strstr(e, "\"state\":\"failed\",\"error\":\"NEXAR_ERR_TIMEOUT\"") !=
           NULL);
  if (index == 3)
    NT_CHECK(strstr(d,
                    "\"op\":\"recv\",\"dtype\":-1,\"count\":4,\"root\":1,"
                    "\"tag\":5,") != NULL);
  free(d);
  nexar_finalize(ctx); /* the sleeper may be gone or late: any result */
  return 0;
}

/* Runs the job once into a fresh |dir|, then nexar-trace on it; 0 when
 * both did what the case wants. */
static int run_case(const char *name) {
  snprintf(dir, sizeof dir, "/tmp/nexar-flight-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  char env[512];
  snprintf(env, sizeof env,
           "NEXAR_OP_TIMEOUT_MS=%d\nNEXAR_DEBUG_FILE=%s/log.%%p\n"
           "NEXAR_COLL_PROBE_MS=0",
           OP_TIMEOUT_MS, dir);
  nt_opts_t o = {.world_size = 4,
                 .timeout_ms = 30000,
                 .env = env,
                 .tolerate_kill = killed};
  int fail = nt_run(&o, worker, NULL);
  /* nexar-trace on the folder names the sleeper. */
  char cmd[700], out[8192] = "";
  snprintf(cmd, sizeof cmd, "python3 %s %s 2>&1", NEXAR_TRACE, dir);
  FILE *p = popen(cmd, "r");
  size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
  out[n] = 0;
  int st = p ? pclose(p) : -1;
  printf("%s", out);
  if (!p || !WIFEXITED(st) || WEXITSTATUS(st) != 1) {
    printf("FAIL: nexar-trace exit status %d (want 1: a problem found)\n", st);
    fail = 1;
  }
  if (!strstr(out, "collective #1 (allreduce") ||
      !strstr(out, "never posted by rank 2\n") ||
      !strstr(out, "\nsuspects: 2\n")) {
    printf("FAIL: nexar-trace does not name rank 2 at collective #1\n");
    fail = 1;
  }
  if (!fail) {
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fail = 1;
  }
  printf("%s %s\n", fail ? "FAIL" : "ok", name);
  return fail;
}

/* NEXAR_FLIGHT_RECORDER=0: nothing is recorded, a dump is the header. */
static int off_worker(int index, void *arg) {
  (void)index;
  (void)arg;
  setenv("NEXAR_FLIGHT_RECORDER", "0", 1);
  nexar_ctx_t *ctx;
  NT_OK(nt_join(&ctx));
  NT_OK(nexar_barrier(nexar_comm_world(ctx)));
  char path[300];
  snprintf(path, sizeof path, "%s/off.jsonl", dir);
  NT_OK(nexar_flight_dump(ctx, path));
  char *d = slurp(path);
  NT_CHECK(d != NULL);
  NT_CHECK(strstr(d, "\"capacity\":0,\"entries\":0}\n") != NULL);
  NT_CHECK(strchr(d, '\n') == d + strlen(d) - 1); /* one line */
  free(d);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/nexar-flight-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  nt_opts_t o = {.world_size = 1};
  int fail = nt_run(&o, off_worker, NULL);
  printf("%s off\n", fail ? "FAIL" : "ok");
  if (!fail) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    fail = system(cmd) != 0;
  }
  fail |= run_case("hang");
  killed = 1;
  fail |= run_case("killed");
  return fail;
}
