/*
 * Strict settings (docs/configuration.md): every bad value fails nexar_init
 * with NEXAR_ERR_INVALID_ARG within a second, before any socket, and
 * nexar_last_error() names the variable.
 *
 *  - every integer of the parameter table (iterated through
 *    NEXAR__PARAM_TABLE, so a new setting is covered by itself): "0x10",
 *    "010", "12abc", " 5", "5 ", "", "1e3", "--5", min - 1 and max + 1 are
 *    refused; min, max and "+min" are accepted by nexar__params_load;
 *  - every string of the table: "" is refused;
 *  - the word settings (NEXAR_DEBUG, _SUBSYS, _FILE, NEXAR_REDUCE_ISA,
 *    NEXAR_QUIC_LOG, NEXAR_RECOVERY, NEXAR_ALGO_*, NEXAR_HOST_KEY,
 * NEXAR_DEVICE, NEXAR_TOPOLOGY), the rules between settings, the secret given
 * twice, NEXAR_UDP_PAYLOAD 1 / 1199 / 1200, the address syntax and the config
 *    struct's fields;
 *  - a valid configuration gets past the checks (to the bootstrap, which
 *    times out on an unused seed port), and failed inits leave no file
 *    descriptor or thread behind, so nexar_init can be called again;
 *  - nexar-seed exits non-zero on a non-decimal option or variable.
 *
 * Every row sets its variables and restores them afterwards; the test
 * starts from an environment without any NEXAR_* variable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"
#include "nexar.h"
#include "cluster/cluster.h"

#ifndef NEXAR_SEED_BIN
#error "NEXAR_SEED_BIN (the path of nexar-seed) comes from tests/tests.cmake"
#endif

extern char **environ;

/* The bootstrap deadline of rows expected to get past the checks. */
#define BOOT_MS 300
/* An invalid setting must be reported within this. */
#define FAST_S 1.0

static char seed_env[64]; /* "127.0.0.1:<an unused port>" */
static int failures;
/* This host's name when getaddrinfo resolves it, else "" (setup). */
static char host_name[256];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- Environment rows. */

typedef struct {
  const char *name;
  const char *value; /* NULL: unset */
} kv_t;

#define MAX_KV 4

typedef struct {
  char *saved[MAX_KV];
  int had[MAX_KV];
} env_save_t;

static void env_apply(const kv_t *kv, int n, env_save_t *sv) {
  for (int i = 0; i < n; i++) {
    const char *old = getenv(kv[i].name);
    sv->had[i] = old != NULL;
    sv->saved[i] = old ? strdup(old) : NULL;
    if (kv[i].value)
      setenv(kv[i].name, kv[i].value, 1);
    else
      unsetenv(kv[i].name);
  }
}

static void env_restore(const kv_t *kv, int n, env_save_t *sv) {
  for (int i = n - 1; i >= 0; i--) {
    if (sv->had[i])
      setenv(kv[i].name, sv->saved[i], 1);
    else
      unsetenv(kv[i].name);
    free(sv->saved[i]);
  }
}

static void describe(const kv_t *kv, int n, char *out, size_t len) {
  size_t o = 0;
  out[0] = 0;
  for (int i = 0; i < n && o < len; i++)
    o += (size_t)snprintf(out + o, len - o, "%s%s='%s'", i ? " " : "",
                          kv[i].name, kv[i].value ? kv[i].value : "(unset)");
}

/* nexar_init with |kv| applied (and |cfg|); returns its result and the
 * seconds it took. A context (not expected) is finalised. */
static int init_with(const kv_t *kv, int n, const nexar_config_t *cfg,
                     double *secs, char *msg, size_t msglen) {
  env_save_t sv;
  env_apply(kv, n, &sv);
  nexar_ctx_t *ctx = NULL;
  double t0 = now_s();
  int rc = nexar_init(cfg, &ctx);
  *secs = now_s() - t0;
  snprintf(msg, msglen, "%s", nexar_last_error());
  if (rc == NEXAR_OK) nexar_finalize(ctx);
  env_restore(kv, n, &sv);
  return rc;
}

/*
 * Expects nexar_init to refuse the row quickly with NEXAR_ERR_INVALID_ARG
 * and a message containing each of |must| (NULL-terminated) and none of
 * |mustnot|. Failures are counted and printed, so one run lists them all.
 */
static void expect_invalid_cfg(const kv_t *kv, int n, const nexar_config_t *cfg,
                               const char *const *must,
                               const char *const *mustnot) {
  char msg[1024], row[512];
  double secs;
  int rc = init_with(kv, n, cfg, &secs, msg, sizeof(msg));
  describe(kv, n, row, sizeof(row));
  int ok = rc == NEXAR_ERR_INVALID_ARG && secs < FAST_S;
  for (int i = 0; ok && must && must[i]; i++) ok = strstr(msg, must[i]) != NULL;
  for (int i = 0; ok && mustnot && mustnot[i]; i++)
    ok = strstr(msg, mustnot[i]) == NULL;
  if (!ok) {
    failures++;
    print_error("row [%s]%s: %s after %.3f s: %s\n", row,
                cfg ? " (with config)" : "", nexar_err_name(rc), secs, msg);
  }
}

static void expect_invalid(const kv_t *kv, int n, const char *const *must) {
  expect_invalid_cfg(kv, n, NULL, must, NULL);
}

#define KV(...) ((const kv_t[]){__VA_ARGS__})
#define NKV(...) ((int)(sizeof((const kv_t[]){__VA_ARGS__}) / sizeof(kv_t)))
#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})
/* One row: variables, then the words the message must contain. */
#define BAD(words, ...) expect_invalid(KV(__VA_ARGS__), NKV(__VA_ARGS__), words)

/* nexar__params_load and nexar__params_check on the row: 0 expected. */
static void expect_accepted(const kv_t *kv, int n, nexar__params_t *out) {
  env_save_t sv;
  char err[1024] = "", row[512];
  nexar__params_t p;
  env_apply(kv, n, &sv);
  int rc = nexar__params_load(&p, NULL, err, sizeof(err));
  if (rc == 0) rc = nexar__params_check(&p, err, sizeof(err));
  env_restore(kv, n, &sv);
  if (rc != 0) {
    describe(kv, n, row, sizeof(row));
    failures++;
    print_error("row [%s] refused: %s\n", row, err);
  }
  if (out) *out = p;
}

#define GOOD(...) expect_accepted(KV(__VA_ARGS__), NKV(__VA_ARGS__), NULL)

static void end_rows(void) {
  int f = failures;
  failures = 0;
  assert_int_equal(f, 0);
}

/* ---- The strict decimal parser itself. */

static void test_parse_dec(void **state) {
  (void)state;
  static const struct {
    const char *s;
    int rc;
    int64_t v;
  } cases[] = {
      {"0", 0, 0},
      {"7", 0, 7},
      {"+7", 0, 7},
      {"-7", 0, -7},
      {"-0", 0, 0},
      {"10", 0, 10},
      {"9223372036854775807", 0, INT64_MAX},
      {"-9223372036854775808", 0, INT64_MIN},
      {"9223372036854775808", NEXAR__DEC_RANGE, 0},
      {"-9223372036854775809", NEXAR__DEC_RANGE, 0},
      {"99999999999999999999999", NEXAR__DEC_RANGE, 0},
      {"010", NEXAR__DEC_ZERO, 0},
      {"-010", NEXAR__DEC_ZERO, 0},
      {"00", NEXAR__DEC_ZERO, 0},
      {"0x10", NEXAR__DEC_SYNTAX, 0},
      {"12abc", NEXAR__DEC_SYNTAX, 0},
      {" 5", NEXAR__DEC_SYNTAX, 0},
      {"5 ", NEXAR__DEC_SYNTAX, 0},
      {"\t5", NEXAR__DEC_SYNTAX, 0},
      {"5\n", NEXAR__DEC_SYNTAX, 0},
      {"", NEXAR__DEC_SYNTAX, 0},
      {"+", NEXAR__DEC_SYNTAX, 0},
      {"-", NEXAR__DEC_SYNTAX, 0},
      {"--5", NEXAR__DEC_SYNTAX, 0},
      {"+-5", NEXAR__DEC_SYNTAX, 0},
      {"1e3", NEXAR__DEC_SYNTAX, 0},
      {"1.0", NEXAR__DEC_SYNTAX, 0},
      {"1_000", NEXAR__DEC_SYNTAX, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int64_t v = 12345;
    int rc = nexar__parse_dec(cases[i].s, INT64_MIN, INT64_MAX, &v);
    if (rc != cases[i].rc || (rc == 0 && v != cases[i].v) ||
        (rc != 0 && v != 12345)) {
      failures++;
      print_error("parse_dec('%s') = %d, %lld; want %d, %lld\n", cases[i].s, rc,
                  (long long)v, cases[i].rc, (long long)cases[i].v);
    }
  }
  int64_t v = 0;
  assert_int_equal(nexar__parse_dec("5", 6, 10, &v), NEXAR__DEC_RANGE);
  assert_int_equal(nexar__parse_dec("11", 6, 10, &v), NEXAR__DEC_RANGE);
  assert_int_equal(nexar__parse_dec("10", 6, 10, &v), 0);
  assert_int_equal(v, 10);
  assert_int_equal(nexar__parse_dec(NULL, 0, 1, &v), NEXAR__DEC_SYNTAX);
  char err[256];
  nexar__parse_dec_error(NEXAR__DEC_ZERO, "NEXAR_X", "010", 0, 9, err,
                         sizeof(err));
  assert_non_null(strstr(err, "NEXAR_X='010'"));
  assert_non_null(strstr(err, "leading zero"));
  nexar__parse_dec_error(NEXAR__DEC_RANGE, "NEXAR_X", "10", 0, 9, err,
                         sizeof(err));
  assert_string_equal(err, "NEXAR_X=10 is outside [0, 9]");
  end_rows();
}

/* ---- The parameter table, setting by setting. */

#define IS_INT 1
#define IS_STR 0
typedef struct {
  int is_int;
  const char *env;
  int64_t lo, hi;
  size_t off;
} setting_t;
#define SETTING(type, f, env, def, lo, hi, help) \
  {IS_##type, env, (int64_t)(lo), (int64_t)(hi), offsetof(nexar__params_t, f)},
static const setting_t settings[] = {NEXAR__PARAM_TABLE(SETTING)};
#undef SETTING
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static int64_t field_of(const nexar__params_t *p, const setting_t *s) {
  int64_t v;
  memcpy(&v, (const char *)p + s->off, sizeof(v));
  return v;
}

static void test_table_integers(void **state) {
  (void)state;
  static const char *const bad[] = {"0x10", "010", "12abc", " 5", "5 ",
                                    "",     "1e3", "--5",   "+",  "7\n"};
  int nint = 0;
  for (size_t i = 0; i < NSETTINGS; i++) {
    const setting_t *s = &settings[i];
    if (!s->is_int) continue;
    nint++;
    for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++)
      BAD(WORDS(s->env), {s->env, bad[b]});
    char v[32];
    snprintf(v, sizeof(v), "%lld", (long long)s->lo - 1);
    BAD(WORDS(s->env, "outside"), {s->env, v});
    snprintf(v, sizeof(v), "%lld", (long long)s->hi + 1);
    BAD(WORDS(s->env, "outside"), {s->env, v});
    /* The bounds are accepted by the loader, and read as written. */
    const int64_t bounds[2] = {s->lo, s->hi};
    for (int k = 0; k < 2; k++) {
      for (int plus = 0; plus < 2; plus++) {
        if (plus && bounds[k] < 0) continue;
        snprintf(v, sizeof(v), "%s%lld", plus ? "+" : "", (long long)bounds[k]);
        const kv_t kv[] = {{s->env, v}};
        env_save_t sv;
        env_apply(kv, 1, &sv);
        nexar__params_t p;
        char err[512] = "";
        int rc = nexar__params_load(&p, NULL, err, sizeof(err));
        env_restore(kv, 1, &sv);
        if (rc != 0 || field_of(&p, s) != bounds[k]) {
          failures++;
          print_error("%s='%s' not loaded as %lld: rc %d %s\n", s->env, v,
                      (long long)bounds[k], rc, err);
        }
      }
    }
  }
  /* The table has integers; a macro slip that made it empty is a failure. */
  assert_true(nint >= 30);
  end_rows();
}

static void test_table_strings(void **state) {
  (void)state;
  int nstr = 0;
  for (size_t i = 0; i < NSETTINGS; i++) {
    if (settings[i].is_int) continue;
    nstr++;
    BAD(WORDS(settings[i].env, "set but empty"), {settings[i].env, ""});
  }
  assert_true(nstr >= 8);
  end_rows();
}

/* ---- Word settings. */

static void test_words(void **state) {
  (void)state;
  BAD(WORDS("NEXAR_DEBUG", "TRACE"), {"NEXAR_DEBUG", "bogus"});
  BAD(WORDS("NEXAR_DEBUG", "empty"), {"NEXAR_DEBUG", ""});
  BAD(WORDS("NEXAR_DEBUG", "WARN"), {"NEXAR_DEBUG", "WARNING"});
  BAD(WORDS("NEXAR_DEBUG_SUBSYS", "BOGUS", "BOOTSTRAP"),
      {"NEXAR_DEBUG_SUBSYS", "INIT,BOGUS"});
  BAD(WORDS("NEXAR_DEBUG_SUBSYS", "empty item"),
      {"NEXAR_DEBUG_SUBSYS", "INIT,"});
  BAD(WORDS("NEXAR_DEBUG_SUBSYS"), {"NEXAR_DEBUG_SUBSYS", "^"});
  BAD(WORDS("NEXAR_DEBUG_SUBSYS", "empty"), {"NEXAR_DEBUG_SUBSYS", ""});
  BAD(WORDS("NEXAR_DEBUG_FILE", "/nonexistent/dir/x", strerror(ENOENT)),
      {"NEXAR_DEBUG_FILE", "/nonexistent/dir/x"});
  BAD(WORDS("NEXAR_DEBUG_FILE", "empty"), {"NEXAR_DEBUG_FILE", ""});
  BAD(WORDS("NEXAR_REDUCE_ISA", "avx512"), {"NEXAR_REDUCE_ISA", "sse"});
  BAD(WORDS("NEXAR_REDUCE_ISA", "empty"), {"NEXAR_REDUCE_ISA", ""});
  BAD(WORDS("NEXAR_QUIC_LOG"), {"NEXAR_QUIC_LOG", "0"});
  BAD(WORDS("NEXAR_QUIC_LOG", "empty"), {"NEXAR_QUIC_LOG", ""});
  BAD(WORDS("NEXAR_RECOVERY", "automatic"), {"NEXAR_RECOVERY", "sometimes"});
  BAD(WORDS("NEXAR_ALGO_ALLREDUCE", "rabenseifner"),
      {"NEXAR_ALGO_ALLREDUCE", "tree"});
  BAD(WORDS("NEXAR_ALGO_BCAST", "scatter_allgather"),
      {"NEXAR_ALGO_BCAST", "ring"});
  BAD(WORDS("NEXAR_ALGO_REDUCE", "rs_gather", "hier"),
      {"NEXAR_ALGO_REDUCE", "ring"});
  BAD(WORDS("NEXAR_ALGO_ALLGATHER", "ring, rd or hier"),
      {"NEXAR_ALGO_ALLGATHER", "binomial"});
  BAD(WORDS("NEXAR_ALGO_BARRIER", "two_phase, dissemination"),
      {"NEXAR_ALGO_BARRIER", "tree"});
  BAD(WORDS("NEXAR_HOST_KEY", "hexadecimal"), {"NEXAR_HOST_KEY", "0"});
  BAD(WORDS("NEXAR_HOST_KEY", "hexadecimal"), {"NEXAR_HOST_KEY", "0x12"});
  BAD(WORDS("NEXAR_HOST_KEY", "hexadecimal"),
      {"NEXAR_HOST_KEY", "12345678901234567"});
  BAD(WORDS("NEXAR_DEVICE", "cuda"), {"NEXAR_DEVICE", "gpu"});
  BAD(WORDS("NEXAR_TOPOLOGY", "hypercube"), {"NEXAR_TOPOLOGY", "ring"});
  BAD(WORDS("NEXAR_TOPOLOGY", "positive integer"),
      {"NEXAR_TOPOLOGY", "kregular:0x4"});
  BAD(WORDS("NEXAR_TOPOLOGY", "positive integer"),
      {"NEXAR_TOPOLOGY", "kregular: 4"});
  BAD(WORDS("NEXAR_TOPOLOGY", "positive integer"),
      {"NEXAR_TOPOLOGY", "kregular:04"});
  BAD(WORDS("NEXAR_TOPOLOGY"), {"NEXAR_TOPOLOGY", "kregular:"});

  /* Accepted words. */
  char logpath[128];
  snprintf(logpath, sizeof(logpath), "/tmp/nexar-test-config-%d-%%p.log",
           (int)getpid());
  GOOD({"NEXAR_DEBUG", "info"}, {"NEXAR_DEBUG_SUBSYS", "^NET,coll"},
       {"NEXAR_DEBUG_FILE", logpath});
  GOOD({"NEXAR_DEBUG", "NONE"}, {"NEXAR_DEBUG_SUBSYS", "ALL"});
  GOOD({"NEXAR_REDUCE_ISA", "portable"}, {"NEXAR_QUIC_LOG", NULL});
  GOOD({"NEXAR_REDUCE_ISA", "avx512"});
  GOOD({"NEXAR_TOPOLOGY", "kregular:4"});
  char path[160];
  snprintf(path, sizeof(path), "/tmp/nexar-test-config-%d-%d.log",
           (int)getpid(), (int)getpid());
  unlink(path);
  end_rows();
}

/* ---- Rules between settings, the secret, the UDP payload. */

static void test_conflicts(void **state) {
  (void)state;
  BAD(WORDS("NEXAR_IDLE_TIMEOUT_MS=300", "NEXAR_HEARTBEAT_TIMEOUT_MS=5000"),
      {"NEXAR_IDLE_TIMEOUT_MS", "300"});
  BAD(WORDS("NEXAR_IDLE_TIMEOUT_MS=1999", "NEXAR_HEARTBEAT_TIMEOUT_MS=2000"),
      {"NEXAR_IDLE_TIMEOUT_MS", "1999"},
      {"NEXAR_HEARTBEAT_TIMEOUT_MS", "2000"});
  BAD(WORDS("NEXAR_HEARTBEAT_TIMEOUT_MS=1000", "must be larger than",
            "NEXAR_HEARTBEAT_MS=1000"),
      {"NEXAR_HEARTBEAT_TIMEOUT_MS", "1000"}, {"NEXAR_HEARTBEAT_MS", "1000"});
  BAD(WORDS("NEXAR_RELAY_WINDOW_BYTES=1024", "NEXAR_EAGER_BYTES=131072"),
      {"NEXAR_RELAY_WINDOW_BYTES", "1024"});
  BAD(WORDS("NEXAR_RELAY_WINDOW_BYTES=4096", "NEXAR_EAGER_BYTES=8192"),
      {"NEXAR_RELAY_WINDOW_BYTES", "4096"}, {"NEXAR_EAGER_BYTES", "8192"});
  BAD(WORDS("NEXAR_MIN_WORLD_SIZE=5", "NEXAR_MAX_WORLD_SIZE=4"),
      {"NEXAR_MIN_WORLD_SIZE", "5"}, {"NEXAR_MAX_WORLD_SIZE", "4"});
  BAD(WORDS("NEXAR_UDP_PAYLOAD=1199", "1200"), {"NEXAR_UDP_PAYLOAD", "1199"});
  BAD(WORDS("NEXAR_UDP_PAYLOAD=1", "1200"), {"NEXAR_UDP_PAYLOAD", "1"});
  /* The secret twice: both named, the secret never printed. */
  expect_invalid_cfg(KV({"NEXAR_SECRET", "s3cr3t-value-xyz"},
                        {"NEXAR_SECRET_FILE", "/nonexistent/secret"}),
                     2, NULL, WORDS("NEXAR_SECRET", "NEXAR_SECRET_FILE"),
                     WORDS("s3cr3t-value-xyz"));

  GOOD({"NEXAR_IDLE_TIMEOUT_MS", "0"});
  GOOD({"NEXAR_IDLE_TIMEOUT_MS", "5000"});
  GOOD({"NEXAR_IDLE_TIMEOUT_MS", "300"}, {"NEXAR_HEARTBEAT_TIMEOUT_MS", "300"},
       {"NEXAR_HEARTBEAT_MS", "100"});
  GOOD({"NEXAR_RELAY_WINDOW_BYTES", "131072"});
  GOOD({"NEXAR_MIN_WORLD_SIZE", "5"}, {"NEXAR_MAX_WORLD_SIZE", "5"});
  GOOD({"NEXAR_MIN_WORLD_SIZE", "5"}, {"NEXAR_MAX_WORLD_SIZE", "0"});
  GOOD({"NEXAR_UDP_PAYLOAD", "0"});
  GOOD({"NEXAR_UDP_PAYLOAD", "1200"});
  GOOD({"NEXAR_UDP_PAYLOAD", "65507"});
  GOOD({"NEXAR_SECRET", NULL}, {"NEXAR_SECRET_FILE", "/any/file"});
  end_rows();
}

/* ---- Addresses. */

static void test_addresses(void **state) {
  (void)state;
  BAD(WORDS("NEXAR_SEED", "no port"), {"NEXAR_SEED", "127.0.0.1"});
  BAD(WORDS("NEXAR_SEED", "port"), {"NEXAR_SEED", "127.0.0.1:0"});
  BAD(WORDS("NEXAR_SEED", "port"), {"NEXAR_SEED", "127.0.0.1:65536"});
  BAD(WORDS("NEXAR_SEED", "port"), {"NEXAR_SEED", "127.0.0.1:0x10"});
  BAD(WORDS("NEXAR_SEED", "port"), {"NEXAR_SEED", "127.0.0.1: 5"});
  BAD(WORDS("NEXAR_SEED", "port"), {"NEXAR_SEED", "127.0.0.1:"});
  /* Host names are resolved at nexar_init; RFC 6761: .invalid never is. */
  BAD(WORDS("NEXAR_SEED", "'no-such-host.invalid'", "does not resolve"),
      {"NEXAR_SEED", "no-such-host.invalid:1"});
  BAD(WORDS("NEXAR_SEED", "no host"), {"NEXAR_SEED", ":5000"});
  BAD(WORDS("NEXAR_SEED", "no port"), {"NEXAR_SEED", "localhost"});
  BAD(WORDS("NEXAR_SEED", "no port"), {"NEXAR_SEED", "node01"});
  BAD(WORDS("NEXAR_SEED", "no port"), {"NEXAR_SEED", "[::1]"});
  BAD(WORDS("NEXAR_SEED", "brackets"), {"NEXAR_SEED", "::1:5000"});
  BAD(WORDS("NEXAR_SEED"), {"NEXAR_SEED", "[::1:5000"});
  BAD(WORDS("NEXAR_ADVERTISE_ADDR", "abc.invalid", "does not resolve"),
      {"NEXAR_ADVERTISE_ADDR", "abc.invalid"});
  BAD(WORDS("NEXAR_ADVERTISE_ADDR", "port"),
      {"NEXAR_ADVERTISE_ADDR", "10.0.0.1:0"});
  BAD(WORDS("NEXAR_BIND_ADDR", "garbage.invalid", "does not resolve"),
      {"NEXAR_BIND_ADDR", "garbage.invalid:0"});
  BAD(WORDS("NEXAR_BIND_ADDR", "port"), {"NEXAR_BIND_ADDR", "127.0.0.1:99999"});
  BAD(WORDS("NEXAR_BIND_ADDR", "port"), {"NEXAR_BIND_ADDR", "127.0.0.1:080"});

  GOOD({"NEXAR_SEED", "127.0.0.1:1"});
  GOOD({"NEXAR_SEED", "localhost:29500"});
  if (host_name[0]) {
    char seed[320];
    snprintf(seed, sizeof(seed), "%s:29500", host_name);
    GOOD({"NEXAR_SEED", seed});
    GOOD({"NEXAR_BIND_ADDR", host_name});
  }
  GOOD({"NEXAR_SEED", "[::1]:65535"});
  GOOD({"NEXAR_BIND_ADDR", "127.0.0.1:0"});
  GOOD({"NEXAR_BIND_ADDR", "0.0.0.0"});
  GOOD({"NEXAR_BIND_ADDR", "::1"});
  GOOD({"NEXAR_BIND_ADDR", "[::]:0"});
  GOOD({"NEXAR_ADVERTISE_ADDR", "10.0.0.1"});
  GOOD({"NEXAR_ADVERTISE_ADDR", "10.0.0.1:29500"});
  GOOD({"NEXAR_ADVERTISE_ADDR", "[fe80::1]:5"});
  end_rows();
}

/* nexar__resolve_addr itself: the numeric fast path, localhost, a name
 * through getaddrinfo (this host's name, when it resolves: the first
 * address getaddrinfo gives, with the port set), and a name that does not
 * resolve. */
static void test_resolve(void **state) {
  (void)state;
  struct sockaddr_storage ss;
  socklen_t sl;
  char why[128], str[128];
  assert_int_equal(nexar__resolve_addr("10.1.2.3:7", 0, AF_INET6, &ss, &sl, why,
                                       sizeof(why)),
                   0);
  nexar__addr_str((struct sockaddr *)&ss, str, sizeof(str));
  assert_string_equal(str, "10.1.2.3:7");
  assert_int_equal(nexar__resolve_addr("localhost", 9, AF_UNSPEC, &ss, &sl, why,
                                       sizeof(why)),
                   0);
  nexar__addr_str((struct sockaddr *)&ss, str, sizeof(str));
  assert_string_equal(str, "127.0.0.1:9");
  assert_int_equal(nexar__resolve_addr("no-such-host.invalid:1", 0, AF_UNSPEC,
                                       &ss, &sl, why, sizeof(why)),
                   NEXAR_ERR_INVALID_ARG);
  assert_true(why[0] != 0);
  if (!host_name[0]) {
    print_message(
        "this host's name does not resolve: getaddrinfo row "
        "skipped\n");
    return;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM};
  struct addrinfo *res = NULL;
  assert_int_equal(getaddrinfo(host_name, NULL, &hints, &res), 0);
  char want[128], name_port[320];
  if (res->ai_family == AF_INET)
    ((struct sockaddr_in *)res->ai_addr)->sin_port = htons(29500);
  else
    ((struct sockaddr_in6 *)res->ai_addr)->sin6_port = htons(29500);
  nexar__addr_str(res->ai_addr, want, sizeof(want));
  int family = res->ai_family;
  freeaddrinfo(res);
  snprintf(name_port, sizeof(name_port), "%s:29500", host_name);
  assert_int_equal(
      nexar__resolve_addr(name_port, 0, family, &ss, &sl, why, sizeof(why)), 0);
  nexar__addr_str((struct sockaddr *)&ss, str, sizeof(str));
  print_message("%s -> %s\n", name_port, str);
  assert_string_equal(str, want);
}

/* ---- The config struct. */

static void test_config_struct(void **state) {
  (void)state;
  nexar_config_t cfg = NEXAR_CONFIG_INIT;
  cfg.secret = "s3cr3t-cfg-abc";
  cfg.secret_file = "/nonexistent/secret";
  expect_invalid_cfg(NULL, 0, &cfg, WORDS("secret", "secret_file"),
                     WORDS("s3cr3t-cfg-abc"));
  /* A file in the struct and NEXAR_SECRET in the environment. */
  nexar_config_t c2 = NEXAR_CONFIG_INIT;
  c2.secret_file = "/nonexistent/secret";
  expect_invalid_cfg(KV({"NEXAR_SECRET", "s3cr3t-env-abc"}), 1, &c2,
                     WORDS("NEXAR_SECRET", "secret_file"),
                     WORDS("s3cr3t-env-abc"));
  nexar_config_t c3 = NEXAR_CONFIG_INIT;
  c3.seed_addr = "";
  expect_invalid_cfg(NULL, 0, &c3, WORDS("seed_addr", "empty"), NULL);
  nexar_config_t c4 = NEXAR_CONFIG_INIT;
  c4.seed_addr = "127.0.0.1";
  expect_invalid_cfg(NULL, 0, &c4, WORDS("NEXAR_SEED", "no port"), NULL);
  nexar_config_t c5 = NEXAR_CONFIG_INIT;
  c5.world_size = 0;
  expect_invalid_cfg(NULL, 0, &c5, WORDS("world_size"), NULL);
  nexar_config_t c6 = NEXAR_CONFIG_INIT;
  c6.bootstrap_timeout_ms = 99;
  expect_invalid_cfg(NULL, 0, &c6, WORDS("bootstrap_timeout_ms"), NULL);
  end_rows();
}

/* ---- A valid configuration reaches the bootstrap; nothing leaks. */

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static void test_valid_and_repeatable(void **state) {
  (void)state;
  char msg[1024];
  double secs;
  /* Once to settle what a first init creates for good (library-wide
   * initialisation). */
  int rc = init_with(NULL, 0, NULL, &secs, msg, sizeof(msg));
  print_message("valid config, unused seed port: %s after %.3f s: %s\n",
                nexar_err_name(rc), secs, msg);
  assert_int_not_equal(rc, NEXAR_ERR_INVALID_ARG);
  assert_int_not_equal(rc, NEXAR_OK);
  assert_true(secs < BOOT_MS / 1000.0 + 2.0);
  struct timespec ts = {0, 100 * 1000000};
  nanosleep(&ts, NULL);
  int fds0 = count_dir("/proc/self/fd"), thr0 = count_dir("/proc/self/task");
  assert_true(fds0 > 0 && thr0 > 0);
  for (int k = 0; k < 3; k++) {
    rc = init_with(KV({"NEXAR_IDLE_TIMEOUT_MS", k == 1 ? "0" : "60000"}), 1,
                   NULL, &secs, msg, sizeof(msg));
    assert_int_not_equal(rc, NEXAR_ERR_INVALID_ARG);
    assert_int_not_equal(rc, NEXAR_OK);
    assert_true(secs < BOOT_MS / 1000.0 + 2.0);
    for (int j = 0; j < 20; j++) {
      rc = init_with(KV({"NEXAR_WORLD_SIZE", "0x10"}), 1, NULL, &secs, msg,
                     sizeof(msg));
      assert_int_equal(rc, NEXAR_ERR_INVALID_ARG);
      rc = init_with(KV({"NEXAR_DEBUG_FILE", "/nonexistent/dir/x"}), 1, NULL,
                     &secs, msg, sizeof(msg));
      assert_int_equal(rc, NEXAR_ERR_INVALID_ARG);
    }
  }
  nanosleep(&ts, NULL);
  int fds1 = count_dir("/proc/self/fd"), thr1 = count_dir("/proc/self/task");
  print_message("fds %d -> %d, threads %d -> %d\n", fds0, fds1, thr0, thr1);
  assert_int_equal(fds1, fds0);
  assert_int_equal(thr1, thr0);
}

/* ---- nexar-seed. */

/* Runs nexar-seed with |args| and |kv| in its environment; returns its
 * exit status (-1 if it had to be killed after 10 s) and its stderr. */
static int run_seed(const char *const *args, const kv_t *kv, int n, char *out,
                    size_t outlen) {
  env_save_t sv;
  env_apply(kv, n, &sv);
  char *argv[16];
  int argc = 0;
  argv[argc++] = (char *)NEXAR_SEED_BIN;
  for (int i = 0; args[i] && argc < 15; i++) argv[argc++] = (char *)args[i];
  argv[argc] = NULL;
  int pfd[2];
  assert_int_equal(pipe(pfd), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
  posix_spawn_file_actions_addclose(&fa, pfd[0]);
  pid_t pid;
  int src = posix_spawn(&pid, NEXAR_SEED_BIN, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  env_restore(kv, n, &sv);
  close(pfd[1]);
  assert_int_equal(src, 0);
  size_t o = 0;
  double deadline = now_s() + 10.0;
  for (;;) {
    struct pollfd p = {pfd[0], POLLIN, 0};
    int left = (int)((deadline - now_s()) * 1000);
    if (left <= 0 || poll(&p, 1, left) <= 0) break;
    ssize_t r = read(pfd[0], out + o, outlen - 1 - o);
    if (r <= 0) break;
    o += (size_t)r;
    if (o >= outlen - 1) break;
  }
  out[o] = 0;
  close(pfd[0]);
  int st = 0;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (now_s() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_seed(const char *const *args, const kv_t *kv, int n,
                        int want, const char *word) {
  char out[8192];
  double t0 = now_s();
  int st = run_seed(args, kv, n, out, sizeof(out));
  double secs = now_s() - t0;
  if (st != want || !strstr(out, word) || secs > 5.0) {
    failures++;
    print_error(
        "nexar-seed %s %s...: exit %d after %.1f s (want %d, '%s'):\n%s",
        args[0], args[1] ? args[1] : "", st, secs, want, word, out);
  }
}

static void test_seed_program(void **state) {
  (void)state;
  expect_seed(WORDS("--listen", "127.0.0.1:0", "--world-size", "0x10"), NULL, 0,
              2, "--world-size='0x10'");
  expect_seed(WORDS("--listen", "127.0.0.1:0", "--world-size", "010"), NULL, 0,
              2, "leading zero");
  expect_seed(WORDS("--listen", "127.0.0.1:0", "--world-size", "2",
                    "--timeout-ms", "12abc"),
              NULL, 0, 2, "--timeout-ms='12abc'");
  expect_seed(WORDS("--listen", "127.0.0.1:0x10", "--world-size", "2"), NULL, 0,
              2, "--listen");
  expect_seed(WORDS("--listen", "127.0.0.1:0"), KV({"NEXAR_WORLD_SIZE", "010"}),
              1, 2, "NEXAR_WORLD_SIZE='010'");
  expect_seed(WORDS("--listen", "127.0.0.1:0"), KV({"NEXAR_WORLD_SIZE", ""}), 1,
              2, "NEXAR_WORLD_SIZE is set but empty");
  /* Variables only the library reads: refused by nexar_seed_start. */
  expect_seed(WORDS("--listen", "127.0.0.1:0", "--world-size", "2",
                    "--timeout-ms", "1000"),
              KV({"NEXAR_OP_TIMEOUT_MS", "0x10"}), 1, 1,
              "NEXAR_OP_TIMEOUT_MS='0x10'");
  expect_seed(WORDS("--listen", "127.0.0.1:0", "--world-size", "2",
                    "--timeout-ms", "1000"),
              KV({"NEXAR_SECRET_FILE", "/nonexistent/secret"}), 1, 2,
              "more than once");
  end_rows();
}

/* ---- Setup: no NEXAR_* variable but the baseline. */

static int unused_udp_port(void) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t l = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
      getsockname(fd, (struct sockaddr *)&a, &l) < 0)
    return -1;
  close(fd);
  return ntohs(a.sin_port);
}

static int setup(void **state) {
  (void)state;
  for (;;) {
    char name[256] = "";
    for (char **e = environ; *e; e++)
      if (!strncmp(*e, "NEXAR_", 6)) {
        size_t n = strcspn(*e, "=");
        if (n >= sizeof(name)) n = sizeof(name) - 1;
        memcpy(name, *e, n);
        name[n] = 0;
        break;
      }
    if (!name[0]) break;
    unsetenv(name);
  }
  /* Quiet: every refused init would log a warning. Set before the
   * logger's first (and only) read of the environment. */
  setenv("NEXAR_DEBUG", "NONE", 1);
  nexar__log_init();
  int port = unused_udp_port();
  if (port <= 0) return -1;
  struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *res = NULL;
  if (gethostname(host_name, sizeof(host_name) - 1) != 0 ||
      getaddrinfo(host_name, NULL, &hints, &res) != 0)
    host_name[0] = 0;
  if (res) freeaddrinfo(res);
  snprintf(seed_env, sizeof(seed_env), "127.0.0.1:%d", port);
  setenv("NEXAR_SEED", seed_env, 1);
  setenv("NEXAR_SECRET", "test-config-secret", 1);
  char boot[16];
  snprintf(boot, sizeof(boot), "%d", BOOT_MS);
  setenv("NEXAR_BOOTSTRAP_TIMEOUT_MS", boot, 1);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_dec),
      cmocka_unit_test(test_table_integers),
      cmocka_unit_test(test_table_strings),
      cmocka_unit_test(test_words),
      cmocka_unit_test(test_conflicts),
      cmocka_unit_test(test_addresses),
      cmocka_unit_test(test_resolve),
      cmocka_unit_test(test_config_struct),
      cmocka_unit_test(test_valid_and_repeatable),
      cmocka_unit_test(test_seed_program),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
