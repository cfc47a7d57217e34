/*
 * Launchers' bad input (docs/launching.md): a half-set launcher, a rank
 * not below the world size, two launchers disagreeing, a malformed Slurm
 * node list, a rendezvous host that does not resolve, a missing secret
 * and a wrong NEXAR_LAUNCHER each fail nexar_init with
 * NEXAR_ERR_INVALID_ARG within a second (name resolution: ten), before any
 * socket, with a message naming the variables and their values and never
 * the secret (nor does any log line, INFO included). Slurm node lists
 * expand to their first host. A torchrun environment of world size 1 forms
 * through the embedded seed and reports local rank 0 of 1, also inside a
 * Kubernetes Indexed Job's pod (JOB_COMPLETION_INDEX, ignored).
 *
 * Every row starts from an environment without the variables of any
 * launcher and without NEXAR_*.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/launcher.h"
#include "nexar.h"

#define SECRET "TOPSECRET-launcher-test-7c1f"

extern char **environ;
static char logpath[256];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Unsets every variable a launcher reads, and NEXAR_* (but the log's). */
static void clean_env(void) {
  static const char *const prefixes[] = {"NEXAR_", "SLURM_", "OMPI_", "PMIX_"};
  static const char *const names[] = {
      "RANK",        "WORLD_SIZE",  "LOCAL_RANK",          "LOCAL_WORLD_SIZE",
      "MASTER_ADDR", "MASTER_PORT", "JOB_COMPLETION_INDEX"};
  for (int again = 1; again;) {
    again = 0;
    for (char **e = environ; *e && !again; e++)
      for (size_t p = 0; p < sizeof(prefixes) / sizeof(*prefixes); p++)
        if (!strncmp(*e, prefixes[p], strlen(prefixes[p])) &&
            strncmp(*e, "NEXAR_DEBUG", 11)) {
          char name[128];
          size_t n = strcspn(*e, "=");
          snprintf(name, sizeof(name), "%.*s", (int)n, *e);
          unsetenv(name);
          again = 1;
          break;
        }
  }
  for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
    unsetenv(names[i]);
}

/* "NAME=value" pairs, then the strings the error must hold; NULL ends
 * each list. */
typedef struct {
  const char *env[12];
  const char *must[4];
  double max_s;
} row_t;

static void run_row(const row_t *r) {
  clean_env();
  for (int i = 0; r->env[i]; i++) {
    char name[64];
    const char *eq = strchr(r->env[i], '=');
    snprintf(name, sizeof(name), "%.*s", (int)(eq - r->env[i]), r->env[i]);
    setenv(name, eq + 1, 1);
  }
  nexar_ctx_t *ctx = NULL;
  double t0 = now_s();
  int rc = nexar_init(NULL, &ctx);
  double dt = now_s() - t0;
  const char *e = nexar_last_error();
  printf("  %-60.60s -> %.3f s: %s\n", r->env[0], dt, e);
  if (rc == NEXAR_OK) nexar_finalize(ctx);
  assert_int_equal(rc, NEXAR_ERR_INVALID_ARG);
  assert_true(dt < (r->max_s > 0 ? r->max_s : 1.0));
  for (int i = 0; r->must[i]; i++)
    if (!strstr(e, r->must[i])) fail_msg("missing '%s' in: %s", r->must[i], e);
  assert_null(strstr(e, SECRET));
}

static void test_bad_env(void **state) {
  (void)state;
  const char *sec = "NEXAR_SECRET=" SECRET;
  const row_t rows[] = {
      {{"RANK=1", sec, NULL}, {"RANK='1'", "WORLD_SIZE is not", "torchrun"}, 0},
      {{"WORLD_SIZE=4", sec, NULL}, {"WORLD_SIZE='4'", "RANK is not"}, 0},
      {{"RANK=4", "WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500",
        sec, NULL},
       {"RANK=4 is not below WORLD_SIZE=4"},
       0},
      {{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", sec, NULL},
       {"MASTER_ADDR='127.0.0.1'", "MASTER_PORT='(unset)'"},
       0},
      {{"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2", "RANK=1", "WORLD_SIZE=4", sec,
        NULL},
       {"LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"},
       0},
      {{"SLURM_PROCID=x1", "SLURM_NTASKS=2", sec, NULL},
       {"SLURM_PROCID='x1' is not a decimal integer"},
       0},
      {{"SLURM_PROCID=1", sec, NULL}, {"SLURM_PROCID='1'", "SLURM_NTASKS"}, 0},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=node[1-3", sec,
        NULL},
       {"SLURM_JOB_NODELIST='node[1-3'", "without its ']'"},
       0},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_NODELIST=n[3-1]", sec,
        NULL},
       {"SLURM_STEP_NODELIST='n[3-1]'", "'3-1' is not a range"},
       0},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "OMPI_COMM_WORLD_RANK=1",
        "OMPI_COMM_WORLD_SIZE=2", sec, NULL},
       {"disagree", "OMPI_COMM_WORLD_RANK=1", "SLURM_PROCID=0"},
       0},
      {{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=no-such-host.invalid",
        "MASTER_PORT=29500", sec, NULL},
       {"'no-such-host.invalid' (from MASTER_ADDR) does not resolve"},
       10.0},
      {{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500",
        NULL},
       {"no cluster secret", "torchrun", "NEXAR_SECRET_FILE"},
       0},
      {{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=n[1-2]", NULL},
       {"no cluster secret", "slurm", "every node of the job shares"},
       0},
      {{"JOB_COMPLETION_INDEX=1", "NEXAR_WORLD_SIZE=2", "HOSTNAME=ddp-1",
        "NEXAR_K8S_SERVICE=svc", NULL},
       {"no cluster secret", "Kubernetes Secret", "as a file"},
       0},
      {{"JOB_COMPLETION_INDEX=1", sec, NULL},
       {"JOB_COMPLETION_INDEX=1", "NEXAR_WORLD_SIZE is not"},
       0},
      {{"JOB_COMPLETION_INDEX=1", "NEXAR_WORLD_SIZE=2", "HOSTNAME=ddp-7",
        "NEXAR_K8S_SERVICE=svc", sec, NULL},
       {"HOSTNAME='ddp-7' does not end in '-1'"},
       0},
      {{"JOB_COMPLETION_INDEX=1", "NEXAR_WORLD_SIZE=2", sec, NULL},
       {"k8s: no rendezvous host", "NEXAR_K8S_SERVICE"},
       0},
      {{"NEXAR_LAUNCHER=bogus", sec, NULL},
       {"NEXAR_LAUNCHER='bogus' is not one of"},
       0},
      {{"NEXAR_LAUNCHER=slurm", sec, NULL},
       {"NEXAR_LAUNCHER=slurm", "SLURM_PROCID and SLURM_NTASKS are not set"},
       0},
      {{"NEXAR_RANK=5", "RANK=1", "WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1",
        "MASTER_PORT=29500", sec, NULL},
       {"rank 5 is not below the world size 4", "NEXAR_RANK is set"},
       0},
      {{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4",
        "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2", sec,
        NULL},
       {"ompi: no rendezvous host", "PMIx"},
       0},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) run_row(&rows[i]);
}

static void test_nodelist(void **state) {
  (void)state;
  static const char *const good[][2] = {
      {"node01", "node01"},
      {"node[01-04,07],gpu1", "node01"},
      {"rack[2-3]-n[5-6]", "rack2-n5"},
      {"a,b[1-2]", "a"},
      {"gpu[7]", "gpu7"},
      {"n[009-011]", "n009"},
  };
  static const char *const badl[] = {"",      "[",      "n[1-",  "n]",
                                     "n[a]",  "n[3-1]", "n[1,]", ",x",
                                     "n[1-]", "n[]",    "n[[1]]"};
  char host[64], err[200];
  for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
    assert_int_equal(nexar__slurm_first_host(good[i][0], host, sizeof(host),
                                             err, sizeof(err)),
                     0);
    assert_string_equal(host, good[i][1]);
  }
  for (size_t i = 0; i < sizeof(badl) / sizeof(*badl); i++) {
    int rc =
        nexar__slurm_first_host(badl[i], host, sizeof(host), err, sizeof(err));
    printf("  '%s' -> %s\n", badl[i], rc ? err : host);
    assert_int_equal(rc, NEXAR_ERR_INVALID_ARG);
  }
}

/* torchrun's variables, world size 1: the embedded seed forms it. */
static void test_torchrun_one(void **state) {
  (void)state;
  clean_env();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("LOCAL_WORLD_SIZE", "1", 1);
  setenv("MASTER_ADDR", "localhost", 1);
  char port[16];
  snprintf(port, sizeof(port), "%d", 30000 + (int)(getpid() % 2000));
  setenv("MASTER_PORT", port, 1);
  setenv("NEXAR_SECRET", SECRET, 1);
  /* torchrun in pod 5 of an Indexed Job: the outer launcher's variables
   * are incomplete (no NEXAR_WORLD_SIZE) and not needed. */
  setenv("JOB_COMPLETION_INDEX", "5", 1);
  nexar_ctx_t *ctx;
  int rc = nexar_init(NULL, &ctx);
  if (rc != NEXAR_OK) fail_msg("nexar_init: %s", nexar_last_error());
  int lr = -1, ls = -1, size = 0;
  assert_int_equal(nexar_local_rank(ctx, &lr, &ls), NEXAR_OK);
  nexar_comm_size(nexar_comm_world(ctx), &size);
  assert_int_equal(lr, 0);
  assert_int_equal(ls, 1);
  assert_int_equal(size, 1);
  assert_int_equal(nexar_local_rank(NULL, &lr, &ls), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar_finalize(ctx), NEXAR_OK);
}

/* No log line, at INFO, carried the secret. */
static void test_log_has_no_secret(void **state) {
  (void)state;
  FILE *f = fopen(logpath, "r");
  assert_non_null(f);
  char line[4096];
  int n = 0, launcher = 0;
  while (fgets(line, sizeof(line), f)) {
    n++;
    if (strstr(line, "launcher: torchrun")) launcher++;
    if (strstr(line, SECRET)) fail_msg("the secret is in a log line: %s", line);
  }
  fclose(f);
  printf("  %d log lines, %d naming the launcher, none with the secret\n", n,
         launcher);
  assert_true(launcher >= 1);
  unlink(logpath);
}

int main(void) {
  snprintf(logpath, sizeof(logpath), "/tmp/test_launcher.%d.log",
           (int)getpid());
  setenv("NEXAR_DEBUG", "INFO", 1);
  setenv("NEXAR_DEBUG_FILE", logpath, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nodelist),
      cmocka_unit_test(test_bad_env),
      cmocka_unit_test(test_torchrun_one),
      cmocka_unit_test(test_log_has_no_secret),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
