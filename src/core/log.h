/*
 * Debug logging: NEXAR_DEBUG=VERSION|WARN|INFO|TRACE (default WARN) and
 * NEXAR_DEBUG_SUBSYS, a comma list of subsystems with ^ negation (default
 * INIT,BOOTSTRAP,ENV). Level and mask are tested before any formatting.
 * Secrets are never passed to these functions.
 */
#ifndef NEXAR_LOG_H
#define NEXAR_LOG_H

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
void nexar__log_init(void);
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
