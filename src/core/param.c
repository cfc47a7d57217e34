/* The declarative NEXAR_* parameter table: defaults, parsing, validation. */
#include "core/param.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "nexar.h"

static const char *keep_str(nexar__params_t *p, const char *s) {
  size_t n = strlen(s) + 1;
  if (p->strused + n > sizeof(p->strbuf)) return NULL;
  char *d = p->strbuf + p->strused;
  memcpy(d, s, n);
  p->strused += n;
  return d;
}

static int parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int nexar__params_load(nexar__params_t *p, const struct nexar_config *cfg,
                       char *err, size_t errlen) {
  memset(p, 0, sizeof(*p));
  const char *s;
#define SET_DEFAULT_INT(f, def) p->f = (def);
#define SET_DEFAULT_STR(f, def) p->f = (def);
#define SET_DEFAULT(type, f, env, def, lo, hi, help) SET_DEFAULT_##type(f, def)
  NEXAR__PARAM_TABLE(SET_DEFAULT)
#undef SET_DEFAULT
#define LOAD_ENV_INT(f, env, lo, hi)                                           \
  if ((s = getenv(env)) && *s && parse_int(s, lo, hi, &p->f)) {                \
    snprintf(err, errlen, "%s='%s' is not an integer in [%lld, %lld]", env, s, \
             (long long)(lo), (long long)(hi));                                \
    return NEXAR_ERR_INVALID_ARG;                                              \
  }
#define LOAD_ENV_STR(f, env, lo, hi)                         \
  if ((s = getenv(env)) && *s && !(p->f = keep_str(p, s))) { \
    snprintf(err, errlen, "%s is too long", env);            \
    return NEXAR_ERR_INVALID_ARG;                            \
  }
#define LOAD_ENV(type, f, env, def, lo, hi, help) \
  LOAD_ENV_##type(f, env, lo, hi)
  NEXAR__PARAM_TABLE(LOAD_ENV)
#undef LOAD_ENV
  if (cfg) {
    if (cfg->size < sizeof(size_t) + sizeof(uint32_t) || cfg->version < 1) {
      snprintf(err, errlen,
               "nexar_config_t not initialised with "
               "NEXAR_CONFIG_INIT (size %zu, version %u)",
               cfg->size, cfg->version);
      return NEXAR_ERR_INVALID_ARG;
    }
#define CFG_STR(field)                                            \
  if (cfg->field && !(p->field = keep_str(p, cfg->field))) {      \
    snprintf(err, errlen, "config field " #field " is too long"); \
    return NEXAR_ERR_INVALID_ARG;                                 \
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
