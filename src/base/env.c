/*
 * Unknown NEXAR_* variables: a setting's name with a typo would otherwise be
 * ignored silently. At init the environment is scanned once and every
 * NEXAR_* name that is neither a setting of the parameter table nor one of
 * the other documented names (NEXAR__ENV_OTHER) gets one warning naming
 * the closest known name (docs/configuration.md, "Unknown variables").
 */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/param.h"

#define PREFIX "NEXAR_"
#define PREFIX_LEN (sizeof PREFIX - 1)
/* Names longer than this get no suggestion (the distance table's bound). */
#define NAME_MAX_LEN 64

static const char *const known_names[] = {
#define NEXAR__ENV_TABLE_NAME(type, f, env, def, lo, hi, help) env,
    NEXAR__PARAM_TABLE(NEXAR__ENV_TABLE_NAME)
#undef NEXAR__ENV_TABLE_NAME
#define NEXAR__ENV_OTHER_NAME(name, who) name,
        NEXAR__ENV_OTHER(NEXAR__ENV_OTHER_NAME)
#undef NEXAR__ENV_OTHER_NAME
};
#define NKNOWN (sizeof known_names / sizeof known_names[0])

int nexar__env_known(const char *name, size_t n) {
  for (size_t i = 0; i < NKNOWN; i++)
    if (strlen(known_names[i]) == n && memcmp(known_names[i], name, n) == 0)
      return 1;
  return 0;
}

static size_t min3(size_t a, size_t b, size_t c) {
  size_t m = a < b ? a : b;
  return m < c ? m : c;
}

/* Optimal string alignment distance (Damerau-Levenshtein restricted to
 * transposing adjacent characters that are not edited again) between
 * a[0..n) and b[0..m), both at most NAME_MAX_LEN: insertions, deletions,
 * substitutions and adjacent transpositions cost 1. */
static size_t osa_distance(const char *a, size_t n, const char *b, size_t m) {
  size_t d[NAME_MAX_LEN + 1][NAME_MAX_LEN + 1];
  for (size_t i = 0; i <= n; i++) d[i][0] = i;
  for (size_t j = 0; j <= m; j++) d[0][j] = j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      size_t cost = a[i - 1] != b[j - 1];
      d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < d[i][j])
        d[i][j] = d[i - 2][j - 2] + 1;
    }
  return d[n][m];
}

/* The known name closest to the |n| upper-case bytes at |up| (a whole
 * name, NEXAR_ included), or NULL when none is close enough. */
static const char *closest(const char *up, size_t n) {
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  if (n > NAME_MAX_LEN) return NULL;
  for (size_t i = 0; i < NKNOWN; i++) {
    const char *k = known_names[i] + PREFIX_LEN;
    size_t kn = strlen(k);
    if (kn > NAME_MAX_LEN) continue;
    size_t d = osa_distance(up + PREFIX_LEN, n - PREFIX_LEN, k, kn);
    if (d <= 3 && 3 * d <= kn && d < best_d) {
      best = known_names[i];
      best_d = d;
    }
  }
  return best;
}

int nexar__env_unknown(const char *entry, char *msg, size_t len) {
  const char *eq = strchr(entry, '=');
  size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
  if (n < PREFIX_LEN || strncasecmp(entry, PREFIX, PREFIX_LEN) != 0 ||
      nexar__env_known(entry, n))
    return 0;
  char up[NAME_MAX_LEN + 1];
  const char *near = NULL;
  if (n <= NAME_MAX_LEN) {
    for (size_t i = 0; i < n; i++)
      up[i] = (char)toupper((unsigned char)entry[i]);
    near = closest(up, n);
  }
  if (near)
    snprintf(msg, len,
             "%.*s is not a nexar setting and is ignored; did you mean %s? "
             "(docs/configuration.md lists the settings)",
             (int)n, entry, near);
  else
    snprintf(msg, len,
             "%.*s is not a nexar setting and is ignored "
             "(docs/configuration.md lists the settings)",
             (int)n, entry);
  return 1;
}

extern char **environ;

void nexar__env_warn_unknown(void) {
  static atomic_flag done = ATOMIC_FLAG_INIT;
  if (atomic_flag_test_and_set(&done)) return;
  char msg[256];
  for (char **e = environ; e && *e; e++)
    if (nexar__env_unknown(*e, msg, sizeof msg))
      NEXAR__WARN(NEXAR__SUB_ENV, "%s", msg);
}
