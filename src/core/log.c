/* Debug logging to stderr (or NEXAR_DEBUG_FILE), NCCL style. */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

static void log_setup(void) {
  const char *lv = getenv("NEXAR_DEBUG");
  if (lv) {
    if (!strcasecmp(lv, "VERSION"))
      nexar__log_level = NEXAR__LOG_VERSION;
    else if (!strcasecmp(lv, "WARN"))
      nexar__log_level = NEXAR__LOG_WARN;
    else if (!strcasecmp(lv, "INFO"))
      nexar__log_level = NEXAR__LOG_INFO;
    else if (!strcasecmp(lv, "TRACE"))
      nexar__log_level = NEXAR__LOG_TRACE;
    else if (!strcasecmp(lv, "NONE"))
      nexar__log_level = NEXAR__LOG_NONE;
  }
  const char *ss = getenv("NEXAR_DEBUG_SUBSYS");
  if (ss && *ss) {
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s", ss);
    int mask = tmp[0] == '^' ? NEXAR__SUB_ALL : 0;
    for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
      int neg = t[0] == '^';
      if (neg) t++;
      for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]);
           i++)
        if (!strcasecmp(t, subsys_names[i].name))
          mask = neg ? (mask & ~subsys_names[i].bit)
                     : (mask | subsys_names[i].bit);
    }
    nexar__log_mask = mask;
  }
  gethostname(log_host, sizeof(log_host) - 1);
  log_file = stderr;
  const char *f = getenv("NEXAR_DEBUG_FILE");
  if (f && *f) {
    /* %h becomes the host name and %p the pid. */
    char path[512];
    size_t o = 0;
    for (const char *p = f; *p && o < sizeof(path) - 32; p++) {
      if (p[0] == '%' && p[1] == 'h') {
        o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", log_host);
        p++;
      } else if (p[0] == '%' && p[1] == 'p') {
        o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
        p++;
      } else {
        path[o++] = *p;
      }
    }
    path[o] = 0;
    FILE *fp = fopen(path, "a");
    if (fp) log_file = fp;
  }
}

void nexar__log_init(void) {
  pthread_once(&log_once, log_setup);
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
