/*
 * Debug logging: NEXAR_DEBUG=NONE|VERSION|WARN|INFO|TRACE (default WARN) and
 * NEXAR_DEBUG_SUBSYS, a comma list of subsystems with ^ negation (default
 * INIT,BOOTSTRAP,ENV). Level and mask are tested before any formatting.
 * Secrets are never passed to these functions.
 */
#ifndef NEXAR_LOG_H
#define NEXAR_LOG_H

#include <stddef.h>

enum nexar__log_level {
  NEXAR__LOG_NONE = 0,
  NEXAR__LOG_VERSION = 1,
  NEXAR__LOG_WARN = 2,
  NEXAR__LOG_INFO = 3,
  NEXAR__LOG_TRACE = 4
};

enum nexar__subsys {
  NEXAR__SUB_INIT = 1 << 0,
  NEXAR__SUB_BOOTSTRAP = 1 << 1,
  NEXAR__SUB_ENV = 1 << 2,
  NEXAR__SUB_NET = 1 << 3,
  NEXAR__SUB_TLS = 1 << 4,
  NEXAR__SUB_COLL = 1 << 5,
  NEXAR__SUB_P2P = 1 << 6,
  NEXAR__SUB_ALL = 0x7fffffff
};

extern int nexar__log_level;
extern int nexar__log_mask;
/* Reads NEXAR_DEBUG, NEXAR_DEBUG_SUBSYS and NEXAR_DEBUG_FILE once. A value
 * it cannot use leaves the default (WARN, INIT,BOOTSTRAP,ENV, stderr): the
 * logger never fails; nexar__log_check reports the value. */
void nexar__log_init(void);
/*
 * Checks the logging variables as they are now: NEXAR_DEBUG one of NONE,
 * VERSION, WARN, INFO, TRACE (any case); NEXAR_DEBUG_SUBSYS a comma list of
 * INIT, BOOTSTRAP, ENV, NET, TLS, COLL, P2P, ALL, each optionally preceded
 * by ^, with no empty item; NEXAR_DEBUG_FILE a file that can be opened for
 * appending (after %h and %p are replaced). None may be set but empty.
 * Returns 0, or NEXAR_ERR_INVALID_ARG with |err| naming the variable (the
 * file's error: its path and strerror).
 */
int nexar__log_check(char *err, size_t errlen);
/* The folder of the file NEXAR_DEBUG_FILE names (the logger's file) into
 * |out|: 0, or -1 with |out| empty when the log goes to stderr. */
int nexar__log_dir(char *out, size_t n);
void nexar__log_write(int level, int subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define NEXAR__LOG(level, subsys, ...)                               \
  do {                                                               \
    if (nexar__log_level >= (level) && (nexar__log_mask & (subsys))) \
      nexar__log_write((level), (subsys), __VA_ARGS__);              \
  } while (0)
#define NEXAR__WARN(subsys, ...) \
  NEXAR__LOG(NEXAR__LOG_WARN, subsys, __VA_ARGS__)
#define NEXAR__INFO(subsys, ...) \
  NEXAR__LOG(NEXAR__LOG_INFO, subsys, __VA_ARGS__)
#define NEXAR__TRACE(subsys, ...) \
  NEXAR__LOG(NEXAR__LOG_TRACE, subsys, __VA_ARGS__)

#endif /* NEXAR_LOG_H */
