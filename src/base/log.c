/* Debug logging to stderr (or NEXAR_DEBUG_FILE), NCCL style. */
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nexar.h"

int nexar__log_level = NEXAR__LOG_WARN;
int nexar__log_mask = NEXAR__SUB_INIT | NEXAR__SUB_BOOTSTRAP | NEXAR__SUB_ENV;
static FILE *log_file;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static char log_host[64];

static const struct {
  const char *name;
  int bit;
} subsys_names[] = {
    {"INIT", NEXAR__SUB_INIT}, {"BOOTSTRAP", NEXAR__SUB_BOOTSTRAP},
    {"ENV", NEXAR__SUB_ENV},   {"NET", NEXAR__SUB_NET},
    {"TLS", NEXAR__SUB_TLS},   {"COLL", NEXAR__SUB_COLL},
    {"P2P", NEXAR__SUB_P2P},   {"ALL", NEXAR__SUB_ALL},
};

static const char *subsys_name(int bit) {
  for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
    if (subsys_names[i].bit == bit) return subsys_names[i].name;
  return "?";
}

/* NEXAR_DEBUG's words, in any case. Returns the level or -1. */
static int level_of(const char *v) {
  static const struct {
    const char *name;
    int level;
  } levels[] = {
      {"NONE", NEXAR__LOG_NONE},   {"VERSION", NEXAR__LOG_VERSION},
      {"WARN", NEXAR__LOG_WARN},   {"INFO", NEXAR__LOG_INFO},
      {"TRACE", NEXAR__LOG_TRACE},
  };
  for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
    if (!strcasecmp(v, levels[i].name)) return levels[i].level;
  return -1;
}

/*
 * Parses NEXAR_DEBUG_SUBSYS: items separated by commas, each a subsystem
 * name (any case) optionally preceded by ^; a list starting with ^ starts
 * from ALL. Returns 0 with *mask set, or -1 with the offending item in
 * |bad| (an empty item included).
 */
static int parse_subsys(const char *s, int *mask, char *bad, size_t badlen) {
  int m = s[0] == '^' ? NEXAR__SUB_ALL : 0;
  for (const char *t = s;; t++) {
    const char *e = strchr(t, ',');
    size_t n = e ? (size_t)(e - t) : strlen(t);
    int neg = n > 0 && t[0] == '^';
    const char *w = t + neg;
    size_t wn = n - (size_t)neg;
    int bit = 0;
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
      if (wn == strlen(subsys_names[i].name) &&
          !strncasecmp(w, subsys_names[i].name, wn))
        bit = subsys_names[i].bit;
    if (!bit) {
      snprintf(bad, badlen, "%.*s", (int)(n < 64 ? n : 64), t);
      return -1;
    }
    m = neg ? (m & ~bit) : (m | bit);
    if (!e) break;
    t = e;
  }
  *mask = m;
  return 0;
}

/* Expands NEXAR_DEBUG_FILE (%h: host name, %p: pid). -1 if too long. */
static int expand_path(const char *f, char *path, size_t n) {
  size_t o = 0;
  for (const char *p = f; *p; p++) {
    int w;
    if (p[0] == '%' && p[1] == 'h') {
      w = snprintf(path + o, n - o, "%s", log_host);
      p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      w = snprintf(path + o, n - o, "%d", (int)getpid());
      p++;
    } else {
      w = snprintf(path + o, n - o, "%c", *p);
    }
    if (w < 0 || (size_t)w >= n - o) return -1;
    o += (size_t)w;
  }
  path[o] = 0;
  return 0;
}

/* The expanded NEXAR_DEBUG_FILE the logger opened (log_file), if any. */
static char log_path[512];

static void log_setup(void) {
  /* A value that cannot be used leaves the default: the logger may run
   * before nexar_init (or without it) and must not fail; nexar_init
   * reports the value through nexar__log_check. */
  const char *lv = getenv("NEXAR_DEBUG");
  if (lv && level_of(lv) >= 0) nexar__log_level = level_of(lv);
  const char *ss = getenv("NEXAR_DEBUG_SUBSYS");
  int mask;
  char bad[72];
  if (ss && *ss && parse_subsys(ss, &mask, bad, sizeof(bad)) == 0)
    nexar__log_mask = mask;
  gethostname(log_host, sizeof(log_host) - 1);
  log_file = stderr;
  const char *f = getenv("NEXAR_DEBUG_FILE");
  char path[sizeof(log_path)];
  if (f && *f && expand_path(f, path, sizeof(path)) == 0) {
    FILE *fp = fopen(path, "a");
    if (fp) {
      log_file = fp;
      memcpy(log_path, path, sizeof(log_path));
    }
  }
}

void nexar__log_init(void) {
  pthread_once(&log_once, log_setup);
}

int nexar__log_check(char *err, size_t errlen) {
  nexar__log_init();
  const char *lv = getenv("NEXAR_DEBUG");
  if (lv && level_of(lv) < 0) {
    if (!*lv)
      snprintf(err, errlen,
               "NEXAR_DEBUG is set but empty: unset it to get the default");
    else
      snprintf(err, errlen,
               "NEXAR_DEBUG='%.64s' is not one of NONE, VERSION, WARN, INFO, "
               "TRACE",
               lv);
    return NEXAR_ERR_INVALID_ARG;
  }
  const char *ss = getenv("NEXAR_DEBUG_SUBSYS");
  int mask;
  char bad[72];
  if (ss && !*ss) {
    snprintf(err, errlen,
             "NEXAR_DEBUG_SUBSYS is set but empty: unset it to get the "
             "default");
    return NEXAR_ERR_INVALID_ARG;
  }
  if (ss && parse_subsys(ss, &mask, bad, sizeof(bad)) < 0) {
    snprintf(err, errlen,
             "NEXAR_DEBUG_SUBSYS='%.64s': '%s' is not one of INIT, BOOTSTRAP, "
             "ENV, NET, TLS, COLL, P2P, ALL (comma-separated, ^ negates)",
             ss, bad[0] ? bad : "(an empty item)");
    return NEXAR_ERR_INVALID_ARG;
  }
  const char *f = getenv("NEXAR_DEBUG_FILE");
  if (!f) return 0;
  char path[sizeof(log_path)];
  if (!*f) {
    snprintf(err, errlen,
             "NEXAR_DEBUG_FILE is set but empty: unset it to log to stderr");
    return NEXAR_ERR_INVALID_ARG;
  }
  if (expand_path(f, path, sizeof(path)) < 0) {
    snprintf(err, errlen, "NEXAR_DEBUG_FILE='%.64s...' is too long", f);
    return NEXAR_ERR_INVALID_ARG;
  }
  /* The file the logger writes to already: nothing to try. */
  if (log_file != stderr && !strcmp(path, log_path)) return 0;
  FILE *fp = fopen(path, "a");
  if (!fp) {
    snprintf(err, errlen, "NEXAR_DEBUG_FILE: cannot open '%s': %s", path,
             strerror(errno));
    return NEXAR_ERR_INVALID_ARG;
  }
  fclose(fp);
  return 0;
}

int nexar__log_dir(char *out, size_t n) {
  nexar__log_init();
  out[0] = 0;
  if (log_file == stderr || !log_path[0]) return -1;
  const char *slash = strrchr(log_path, '/');
  if (!slash) return snprintf(out, n, ".") < (int)n ? 0 : -1;
  size_t len = slash == log_path ? 1 : (size_t)(slash - log_path);
  if (len >= n) return -1;
  memcpy(out, log_path, len);
  out[len] = 0;
  return 0;
}

void nexar__log_write(int level, int subsys, const char *fmt, ...) {
  static const char *lvname[] = {"NONE", "VERSION", "WARN", "INFO", "TRACE"};
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  fprintf(log_file ? log_file : stderr, "%s:%d:%ld %ld.%06ld NEXAR %s %s %s\n",
          log_host, (int)getpid(), (long)syscall(SYS_gettid), (long)ts.tv_sec,
          ts.tv_nsec / 1000, lvname[level], subsys_name(subsys), msg);
}
