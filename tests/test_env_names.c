/*
 * Unknown NEXAR_* variables (docs/configuration.md, "Unknown variables"):
 *
 *  - a typo of a setting's name gets one warning naming the closest known
 *    name (NEXAR_HEARTBEAT_TIMEOUT -> NEXAR_HEARTBEAT_TIMEOUT_MS), exact
 *    text asserted; a far name gets the warning without a suggestion; a
 *    name in the wrong case is named too; the value is never quoted;
 *  - no warning for any name of the parameter table or of
 *    NEXAR__ENV_OTHER (iterated, so a new name is covered by itself), nor
 *    for variables outside NEXAR_*;
 *  - end to end, in a child process: nexar__params_load with a typo and a
 *    valid setting in the environment writes the typo's warning to stderr
 *    once, however often it is called, and nothing about the valid one.
 *
 * The drift between the lists and the names the tree reads is checked by
 * scripts/check-env-names.py (ctest test_env_names_list).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"

#define TAIL " (docs/configuration.md lists the settings)"

static void expect_warning(const char *entry, const char *want) {
  char msg[256] = "";
  assert_int_equal(nexar__env_unknown(entry, msg, sizeof msg), 1);
  assert_string_equal(msg, want);
}

static void test_typos(void **state) {
  (void)state;
  expect_warning("NEXAR_HEARTBEAT_TIMEOUT=5000",
                 "NEXAR_HEARTBEAT_TIMEOUT is not a nexar setting and is "
                 "ignored; did you mean NEXAR_HEARTBEAT_TIMEOUT_MS?" TAIL);
  expect_warning("NEXAR_TOPOLGY=hypercube",
                 "NEXAR_TOPOLGY is not a nexar setting and is ignored; did "
                 "you mean NEXAR_TOPOLOGY?" TAIL);
  /* A transposition is one edit. */
  expect_warning("NEXAR_SECERT=hunter2",
                 "NEXAR_SECERT is not a nexar setting and is ignored; did you "
                 "mean NEXAR_SECRET?" TAIL);
  expect_warning("nexar_seed=127.0.0.1:1",
                 "nexar_seed is not a nexar setting and is ignored; did you "
                 "mean NEXAR_SEED?" TAIL);
  expect_warning("NEXAR_DEBUG_SUBSYSTEM=ALL",
                 "NEXAR_DEBUG_SUBSYSTEM is not a nexar setting and is "
                 "ignored; did you mean NEXAR_DEBUG_SUBSYS?" TAIL);
  /* Too far from every name: no suggestion. */
  expect_warning("NEXAR_FOO=1",
                 "NEXAR_FOO is not a nexar setting and is ignored" TAIL);
  expect_warning("NEXAR_=1",
                 "NEXAR_ is not a nexar setting and is ignored" TAIL);
  /* A name too long for the distance table: still warned, no suggestion. */
  char lng[200] = "NEXAR_";
  memset(lng + 6, 'A', 120);
  strcpy(lng + 126, "=1");
  char msg[512];
  assert_int_equal(nexar__env_unknown(lng, msg, sizeof msg), 1);
  assert_null(strstr(msg, "did you mean"));
  /* The value never reaches the message (it may be a secret). */
  assert_int_equal(nexar__env_unknown("NEXAR_SECRT=hunter2", msg, sizeof msg),
                   1);
  assert_null(strstr(msg, "hunter2"));
  assert_non_null(strstr(msg, "did you mean NEXAR_SECRET?"));
}

static void test_known(void **state) {
  (void)state;
  char msg[256];
  char entry[128];
  int n = 0;
#define KNOWN_TABLE(type, f, env, def, lo, hi, help)               \
  snprintf(entry, sizeof entry, "%s=1", env);                      \
  assert_int_equal(nexar__env_unknown(entry, msg, sizeof msg), 0); \
  assert_int_equal(nexar__env_unknown(env, msg, sizeof msg), 0);   \
  assert_int_equal(nexar__env_known(env, strlen(env)), 1);         \
  n++;
  NEXAR__PARAM_TABLE(KNOWN_TABLE)
#undef KNOWN_TABLE
#define KNOWN_OTHER(name, who)                                     \
  snprintf(entry, sizeof entry, "%s=", name);                      \
  assert_int_equal(nexar__env_unknown(entry, msg, sizeof msg), 0); \
  n++;
  NEXAR__ENV_OTHER(KNOWN_OTHER)
#undef KNOWN_OTHER
  assert_true(n > 80);
  const char *outside[] = {"PATH=/bin", "NEXA_SEED=x",     "XNEXAR_SEED=1",
                           "NEXAR=1",   "MY_NEXAR_SEED=1", ""};
  for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++)
    assert_int_equal(nexar__env_unknown(outside[i], msg, sizeof msg), 0);
  /* A prefix of a known name is not that name. */
  assert_int_equal(nexar__env_known("NEXAR_SEED", 9), 0);
}

/* Runs nexar__params_load three times in a child whose environment holds
 * a typo and a valid setting; returns what it wrote to stderr. */
static void test_warned_once(void **state) {
  (void)state;
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd[1], 2);
    close(fd[0]);
    setenv("NEXAR_HEARTBEAT_TIMEOUT", "5000", 1);
    setenv("NEXAR_HEARTBEAT_MS", "100", 1);
    unsetenv("NEXAR_DEBUG");
    unsetenv("NEXAR_DEBUG_FILE");
    unsetenv("NEXAR_DEBUG_SUBSYS");
    nexar__log_init();
    static nexar__params_t p;
    char err[256];
    int bad = 0;
    for (int i = 0; i < 3; i++)
      bad |= nexar__params_load(&p, NULL, err, sizeof err) != 0;
    _exit(bad || p.heartbeat_ms != 100 ? 1 : 0);
  }
  close(fd[1]);
  char out[4096];
  size_t got = 0;
  ssize_t k;
  while (got < sizeof out - 1 &&
         (k = read(fd[0], out + got, sizeof out - 1 - got)) > 0)
    got += (size_t)k;
  out[got] = 0;
  close(fd[0]);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  const char *w =
      "NEXAR_HEARTBEAT_TIMEOUT is not a nexar setting and is "
      "ignored; did you mean NEXAR_HEARTBEAT_TIMEOUT_MS?";
  const char *at = strstr(out, w);
  if (!at) fail_msg("no warning in the child's stderr: '%s'", out);
  assert_null(strstr(at + 1, w)); /* once */
  assert_null(strstr(out, "NEXAR_HEARTBEAT_MS is not"));
  assert_null(strstr(out, "5000"));
}

int main(void) {
  /* The checks above read their own entries, not this environment. */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_typos),
      cmocka_unit_test(test_known),
      cmocka_unit_test(test_warned_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
