/* The declarative NEXAR_* parameter table: defaults, parsing, validation. */
#include "base/param.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "nexar.h"
#include "base/base.h"
#include "wire/wire.h"

static const char *keep_str(nexar__params_t *p, const char *s) {
  size_t n = strlen(s) + 1;
  if (p->strused + n > sizeof(p->strbuf)) return NULL;
  char *d = p->strbuf + p->strused;
  memcpy(d, s, n);
  p->strused += n;
  return d;
}

int nexar__parse_dec(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (!s) return NEXAR__DEC_SYNTAX;
  const char *d = s;
  bool neg = *d == '-';
  if (*d == '+' || *d == '-') d++;
  const char *e = d;
  while (*e >= '0' && *e <= '9') e++;
  if (e == d || *e) return NEXAR__DEC_SYNTAX;
  if (d[0] == '0' && e - d > 1) return NEXAR__DEC_ZERO;
  /* The magnitude in unsigned arithmetic, so that INT64_MIN fits. */
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
  uint64_t u = 0;
  for (const char *c = d; c < e; c++) {
    unsigned dig = (unsigned)(*c - '0');
    if (u > (limit - dig) / 10u) return NEXAR__DEC_RANGE;
    u = u * 10u + dig;
  }
  int64_t v = !neg                            ? (int64_t)u
              : u == (uint64_t)INT64_MAX + 1u ? INT64_MIN
                                              : -(int64_t)u;
  if (v < lo || v > hi) return NEXAR__DEC_RANGE;
  *out = v;
  return 0;
}

void nexar__parse_dec_error(int rc, const char *name, const char *s, int64_t lo,
                            int64_t hi, char *err, size_t errlen) {
  if (rc == NEXAR__DEC_ZERO)
    snprintf(err, errlen,
             "%s='%.64s' has a leading zero, which is refused (settings are "
             "decimal; it was once read as octal): write the number without "
             "it",
             name, s);
  else if (rc == NEXAR__DEC_RANGE)
    snprintf(err, errlen, "%s=%.64s is outside [%lld, %lld]", name, s,
             (long long)lo, (long long)hi);
  else
    snprintf(err, errlen,
             "%s='%.64s' is not a decimal integer in [%lld, %lld] (digits "
             "with an optional sign; no spaces, no 0x, nothing after)",
             name, s ? s : "", (long long)lo, (long long)hi);
}

static int empty_error(const char *name, char *err, size_t errlen) {
  snprintf(err, errlen,
           "%s is set but empty: unset it to get the default, or give a "
           "value",
           name);
  return NEXAR_ERR_INVALID_ARG;
}

int nexar__params_load(nexar__params_t *p, const struct nexar_config *cfg,
                       char *err, size_t errlen) {
  memset(p, 0, sizeof(*p));
  nexar__env_warn_unknown(); /* once per process */
  const char *s;
  int drc;
#define SET_DEFAULT_INT(f, def) p->f = (def);
#define SET_DEFAULT_STR(f, def) p->f = (def);
#define SET_DEFAULT(type, f, env, def, lo, hi, help) SET_DEFAULT_##type(f, def)
  NEXAR__PARAM_TABLE(SET_DEFAULT)
#undef SET_DEFAULT
  /* A variable set to "" is refused rather than taken for the default: an
   * empty expansion in a launch script is a mistake, not a choice. */
#define LOAD_ENV_INT(f, env, lo, hi)                            \
  if ((s = getenv(env))) {                                      \
    if (!*s) return empty_error(env, err, errlen);              \
    if ((drc = nexar__parse_dec(s, lo, hi, &p->f)) < 0) {       \
      nexar__parse_dec_error(drc, env, s, lo, hi, err, errlen); \
      return NEXAR_ERR_INVALID_ARG;                             \
    }                                                           \
  }
#define LOAD_ENV_STR(f, env, lo, hi)                \
  if ((s = getenv(env))) {                          \
    if (!*s) return empty_error(env, err, errlen);  \
    if (!(p->f = keep_str(p, s))) {                 \
      snprintf(err, errlen, "%s is too long", env); \
      return NEXAR_ERR_INVALID_ARG;                 \
    }                                               \
  }
#define LOAD_ENV(type, f, env, def, lo, hi, help) \
  LOAD_ENV_##type(f, env, lo, hi)
  NEXAR__PARAM_TABLE(LOAD_ENV)
#undef LOAD_ENV
  /* Where each half of the secret came from, to name both when both are
   * given: the secret would win and the file be ignored, silently. */
  const char *secret_from = p->secret ? "NEXAR_SECRET" : NULL;
  const char *file_from = p->secret_file ? "NEXAR_SECRET_FILE" : NULL;
  if (cfg) {
    if (cfg->size < sizeof(size_t) + sizeof(uint32_t) || cfg->version < 1) {
      snprintf(err, errlen,
               "nexar_config_t not initialised with "
               "NEXAR_CONFIG_INIT (size %zu, version %u)",
               cfg->size, cfg->version);
      return NEXAR_ERR_INVALID_ARG;
    }
#define CFG_STR(field)                                                    \
  if (cfg->field) {                                                       \
    if (!*cfg->field) {                                                   \
      snprintf(err, errlen,                                               \
               "config field " #field                                     \
               " is set but empty: leave it NULL to use the environment " \
               "or the default");                                         \
      return NEXAR_ERR_INVALID_ARG;                                       \
    }                                                                     \
    if (!(p->field = keep_str(p, cfg->field))) {                          \
      snprintf(err, errlen, "config field " #field " is too long");       \
      return NEXAR_ERR_INVALID_ARG;                                       \
    }                                                                     \
  }
#define CFG_INT(field, lo, hi)                                                \
  if (cfg->field != NEXAR_UNSET) {                                            \
    if (cfg->field < (lo) || cfg->field > (hi)) {                             \
      snprintf(err, errlen, "config field " #field "=%d is outside [%d, %d]", \
               cfg->field, (int)(lo), (int)(hi));                             \
      return NEXAR_ERR_INVALID_ARG;                                           \
    }                                                                         \
    p->field = cfg->field;                                                    \
  }
    CFG_STR(seed_addr)
    CFG_STR(secret)
    CFG_STR(secret_file)
    if (cfg->secret) secret_from = "the config field secret";
    if (cfg->secret_file) file_from = "the config field secret_file";
    CFG_INT(world_size, 1, 1 << 20)
    CFG_INT(rank, -1, (1 << 20) - 1)
    CFG_STR(bind_addr)
    CFG_STR(advertise_addr)
    CFG_INT(bootstrap_timeout_ms, 100, 86400000)
    CFG_INT(op_timeout_ms, 1, 86400000)
    /* Fields added after version 1's first layout: present only when the
     * caller's struct is large enough to hold them. */
    if (cfg->size >=
        offsetof(struct nexar_config, topology) + sizeof(cfg->topology))
      CFG_STR(topology)
#undef CFG_STR
#undef CFG_INT
  }
  if (secret_from && file_from) {
    /* Never the secret or the file's content: only where each came from. */
    snprintf(err, errlen,
             "%s and %s are both set: give the cluster secret one way only "
             "(NEXAR_SECRET or NEXAR_SECRET_FILE)",
             secret_from, file_from);
    return NEXAR_ERR_INVALID_ARG;
  }
  /* QUIC needs datagrams of at least 1200 bytes: below that the handshake
   * never completes and the bootstrap times out naming nothing. */
  if (p->udp_payload != 0 && p->udp_payload < NEXAR__UDP_PAYLOAD_MIN) {
    snprintf(err, errlen,
             "NEXAR_UDP_PAYLOAD=%lld is below QUIC's minimum datagram size: "
             "use 0 (automatic) or %d .. 65507",
             (long long)p->udp_payload, NEXAR__UDP_PAYLOAD_MIN);
    return NEXAR_ERR_INVALID_ARG;
  }
  return NEXAR_OK;
}

/* ---- Checks past a single integer (nexar__params_check). */

/* Port rules of an address setting. */
enum { ADDR_PORT_REQUIRED = 1, ADDR_PORT_ZERO_OK = 2 };

/*
 * Checks the syntax of the address setting |name|=|s| before any socket:
 * "host", "host:port", "[ipv6]" or "[ipv6]:port" (or a bare IPv6 address when
 * no port is required). The host goes through nexar__resolve_addr, as in the
 * bootstrap: numeric IPv4 or IPv6, localhost, or a host name that must
 * resolve now (so a typo fails at nexar_init, before any traffic).
 */
static int check_addr(const char *name, const char *s, int flags, char *err,
                      size_t errlen) {
  if (!s) return 0;
  const char *want = (flags & ADDR_PORT_REQUIRED)
                         ? "want host:port (e.g. 10.0.0.1:29500) or "
                           "[ipv6]:port"
                         : "want host, host:port, [ipv6] or [ipv6]:port";
  char host[128];
  const char *port = NULL;
  size_t hn;
  if (strlen(s) >= sizeof(host)) {
    snprintf(err, errlen, "%s is longer than %zu characters", name,
             sizeof(host) - 1);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (s[0] == '[') {
    const char *end = strchr(s, ']');
    if (!end || (end[1] && end[1] != ':')) {
      snprintf(err, errlen, "%s='%s' is not an address: %s", name, s, want);
      return NEXAR_ERR_INVALID_ARG;
    }
    hn = (size_t)(end - s - 1);
    memcpy(host, s + 1, hn);
    if (end[1] == ':') port = end + 2;
  } else {
    const char *colon = strchr(s, ':');
    if (colon && strchr(colon + 1, ':')) {
      /* Several colons: a bare IPv6 address, which cannot carry a port. */
      if (flags & ADDR_PORT_REQUIRED) {
        snprintf(err, errlen,
                 "%s='%s': an IPv6 address with a port needs brackets, "
                 "[addr]:port",
                 name, s);
        return NEXAR_ERR_INVALID_ARG;
      }
      hn = strlen(s);
    } else if (colon) {
      hn = (size_t)(colon - s);
      port = colon + 1;
    } else {
      hn = strlen(s);
    }
    memcpy(host, s, hn);
  }
  host[hn] = 0;
  if (!port && (flags & ADDR_PORT_REQUIRED)) {
    snprintf(err, errlen, "%s='%s' has no port: %s", name, s, want);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (port) {
    int64_t lo = (flags & ADDR_PORT_ZERO_OK) ? 0 : 1, v;
    if (nexar__parse_dec(port, lo, 65535, &v) < 0) {
      snprintf(err, errlen,
               "%s='%s': the port '%s' is not a decimal number from %lld to "
               "65535%s",
               name, s, port, (long long)lo,
               (flags & (ADDR_PORT_REQUIRED | ADDR_PORT_ZERO_OK))
                   ? ""
                   : " (leave it out to use the bound port)");
      return NEXAR_ERR_INVALID_ARG;
    }
  }
  if (!host[0]) {
    snprintf(err, errlen, "%s='%s' has no host: %s", name, s, want);
    return NEXAR_ERR_INVALID_ARG;
  }
  struct sockaddr_storage ss;
  socklen_t sl;
  char why[128];
  if (nexar__resolve_addr(host, 0, AF_UNSPEC, &ss, &sl, why, sizeof(why)) < 0) {
    snprintf(err, errlen,
             "%s='%s': the host name '%s' does not resolve (%s); %s", name, s,
             host, why, want);
    return NEXAR_ERR_INVALID_ARG;
  }
  return 0;
}

/* Checks that NEXAR_<name>, if set, is one of |words| (listed in |list|). */
static int check_word(const char *name, const char *const words[], int n,
                      const char *list, char *err, size_t errlen) {
  const char *v = getenv(name);
  if (!v) return 0;
  if (!*v) return empty_error(name, err, errlen);
  for (int i = 0; i < n; i++)
    if (!strcmp(v, words[i])) return 0;
  snprintf(err, errlen, "%s='%.64s' is not one of %s", name, v, list);
  return NEXAR_ERR_INVALID_ARG;
}

int nexar__params_check(const nexar__params_t *p, char *err, size_t errlen) {
  /* Every rule between two settings lives here, checked once after
   * loading, so that a combination that cannot work fails at nexar_init
   * rather than as a false failure or a hang later. */
  if (p->heartbeat_timeout_ms <= p->heartbeat_ms) {
    snprintf(err, errlen,
             "NEXAR_HEARTBEAT_TIMEOUT_MS=%lld must be larger than "
             "NEXAR_HEARTBEAT_MS=%lld",
             (long long)p->heartbeat_timeout_ms, (long long)p->heartbeat_ms);
    return NEXAR_ERR_INVALID_ARG;
  }
  /* QUIC closes a connection that received nothing for the idle timeout:
   * shorter than the heartbeat timeout, two healthy ranks computing
   * between calls would declare each other failed. */
  if (p->idle_timeout_ms != 0 && p->idle_timeout_ms < p->heartbeat_timeout_ms) {
    snprintf(err, errlen,
             "NEXAR_IDLE_TIMEOUT_MS=%lld must be 0 (off) or at least "
             "NEXAR_HEARTBEAT_TIMEOUT_MS=%lld (a shorter idle timeout "
             "closes connections between healthy ranks)",
             (long long)p->idle_timeout_ms, (long long)p->heartbeat_timeout_ms);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (p->relay_window_bytes < p->eager_bytes) {
    snprintf(err, errlen,
             "NEXAR_RELAY_WINDOW_BYTES=%lld must be at least "
             "NEXAR_EAGER_BYTES=%lld",
             (long long)p->relay_window_bytes, (long long)p->eager_bytes);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (p->max_world_size != 0 && p->min_world_size > p->max_world_size) {
    snprintf(err, errlen,
             "NEXAR_MIN_WORLD_SIZE=%lld must be at most "
             "NEXAR_MAX_WORLD_SIZE=%lld (0: no maximum)",
             (long long)p->min_world_size, (long long)p->max_world_size);
    return NEXAR_ERR_INVALID_ARG;
  }
  /* Addresses, before any socket: a seed without a port would be dialled
   * at port 0 until the bootstrap deadline. */
  int rc =
      check_addr("NEXAR_SEED", p->seed_addr, ADDR_PORT_REQUIRED, err, errlen);
  if (rc == 0)
    rc = check_addr("NEXAR_BIND_ADDR", p->bind_addr, ADDR_PORT_ZERO_OK, err,
                    errlen);
  if (rc == 0)
    rc = check_addr("NEXAR_ADVERTISE_ADDR", p->advertise_addr, 0, err, errlen);
  if (rc < 0) return rc;
  /* The words of NEXAR_TOPOLOGY are nexar__topo_parse's; the K of
   * kregular:K is decimal like every other number. */
  if (p->topology && !strncmp(p->topology, "kregular:", 9)) {
    int64_t k;
    if (nexar__parse_dec(p->topology + 9, 1, 1 << 20, &k) < 0) {
      snprintf(err, errlen,
               "NEXAR_TOPOLOGY='%.64s': the degree K of kregular:K must be a "
               "positive integer, in decimal, at most %d",
               p->topology, 1 << 20);
      return NEXAR_ERR_INVALID_ARG;
    }
  }
  /* Variables read outside the table (by the reduction kernels and the
   * QUIC library's log), checked here so that a typo fails at init. */
  static const char *const isa[] = {"portable", "avx2", "avx512"};
  rc = check_word("NEXAR_REDUCE_ISA", isa, 3,
                  "portable, avx2, avx512 (unset: the best the CPU runs)", err,
                  errlen);
  if (rc < 0) return rc;
  static const char *const transport[] = {"auto", "quic", "shm"};
  rc = check_word("NEXAR_TRANSPORT", transport, 3, "auto, quic, shm", err,
                  errlen);
  if (rc < 0) return rc;
  if (p->shm_ring_kib & (p->shm_ring_kib - 1)) {
    snprintf(err, errlen, "NEXAR_SHM_RING_KIB=%lld is not a power of two",
             (long long)p->shm_ring_kib);
    return NEXAR_ERR_INVALID_ARG;
  }
  static const char *const quic_log[] = {"1"};
  rc = check_word("NEXAR_QUIC_LOG", quic_log, 1,
                  "1 (unset it to turn the log off)", err, errlen);
  if (rc < 0) return rc;
  return nexar__log_check(err, errlen);
}

/* ---- Settings the job shares (NEXAR__PARAM_JOB). */

#define JOB_COUNT(f, env) +1
_Static_assert(0 NEXAR__PARAM_JOB(JOB_COUNT) == NEXAR__JOB_VALUES,
               "the job section carries every setting the job shares");
#undef JOB_COUNT

/* The range of setting |env| in the table. */
static void param_range(const char *env, int64_t *lo, int64_t *hi) {
#define RANGE(type, f, name, def, l, h, help) \
  if (!strcmp(env, name)) {                   \
    *lo = (int64_t)(l);                       \
    *hi = (int64_t)(h);                       \
  }
  NEXAR__PARAM_TABLE(RANGE)
#undef RANGE
}

void nexar__params_job_get(const nexar__params_t *p, nexar__job_t *job) {
  uint32_t i = 0;
  job->n = NEXAR__JOB_VALUES;
#define GET(f, env) job->v[i++] = (uint64_t)p->f;
  NEXAR__PARAM_JOB(GET)
#undef GET
}

int nexar__params_job_adopt(nexar__params_t *p, const nexar__job_t *job,
                            int rank, int from, char *err, size_t errlen) {
  if (!job->n) return NEXAR_OK;
  static const char *const names[] = {
#define NAME(f, env) env,
      NEXAR__PARAM_JOB(NAME)
#undef NAME
  };
  for (uint32_t i = 0; i < NEXAR__JOB_VALUES; i++) {
    int64_t lo = 0, hi = 0;
    param_range(names[i], &lo, &hi);
    if (job->v[i] < (uint64_t)lo || job->v[i] > (uint64_t)hi) {
      snprintf(err, errlen,
               "the job's %s=%llu (rank %d's, from the seed) is outside [%lld, "
               "%lld]",
               names[i], (unsigned long long)job->v[i], from, (long long)lo,
               (long long)hi);
      return NEXAR_ERR_PROTO;
    }
  }
  nexar__params_t mine = *p;
  uint32_t i = 0;
#define ADOPT(f, env)                                                       \
  if ((uint64_t)p->f != job->v[i]) {                                        \
    NEXAR__INFO(NEXAR__SUB_ENV,                                             \
                "rank %d: %s=%lld replaced by the job's %llu (rank %d's): " \
                "every member uses one value",                              \
                rank, env, (long long)p->f, (unsigned long long)job->v[i],  \
                from);                                                      \
    p->f = (int64_t)job->v[i];                                              \
  }                                                                         \
  i++;
  NEXAR__PARAM_JOB(ADOPT)
#undef ADOPT
  if (p->relay_window_bytes < p->eager_bytes) { /* a relay's own bound */
    NEXAR__INFO(NEXAR__SUB_ENV,
                "rank %d: NEXAR_RELAY_WINDOW_BYTES=%lld raised to the job's "
                "NEXAR_EAGER_BYTES=%lld (it must be at least that)",
                rank, (long long)p->relay_window_bytes,
                (long long)p->eager_bytes);
    p->relay_window_bytes = p->eager_bytes;
  }
  char why[256];
  if (nexar__params_check(p, why, sizeof(why)) < 0) {
    snprintf(err, errlen,
             "with the settings every member shares set to rank %d's: %s", from,
             why);
    *p = mine;
    return NEXAR_ERR_INVALID_ARG;
  }
  return NEXAR_OK;
}

void nexar__params_dump(const nexar__params_t *p) {
#define DUMP_INT(f, env) \
  NEXAR__INFO(NEXAR__SUB_ENV, "%s=%lld", env, (long long)p->f);
#define DUMP_STR(f, env)                          \
  NEXAR__INFO(NEXAR__SUB_ENV, "%s=%s", env,       \
              !p->f                   ? "(unset)" \
              : strstr(env, "SECRET") ? "(set)"   \
                                      : p->f);
#define DUMP(type, f, env, def, lo, hi, help) DUMP_##type(f, env)
  NEXAR__PARAM_TABLE(DUMP)
#undef DUMP
}

void nexar__params_help(void *file) {
  FILE *f = file;
#define HELP(type, fld, env, def, lo, hi, help) \
  fprintf(f, "  %-28s %s\n", env, help);
  NEXAR__PARAM_TABLE(HELP)
#undef HELP
}
