/*
 * Command-line helpers shared by the tools.
 */
#ifndef NEXAR_TOOLS_CLI_H
#define NEXAR_TOOLS_CLI_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../src/base/param.h"
#include "nexar.h"

/* Parses a whole decimal integer in [lo, hi] into *out as the library
 * parses every NEXAR_* integer (nexar__parse_dec: digits and an optional
 * sign; no 0x, leading zero or blanks). Returns 0 or -1. */
static inline int cli_parse_int(const char *s, long lo, long hi, int *out) {
  int64_t v;
  if (nexar__parse_dec(s, lo, hi, &v) < 0) return -1;
  *out = (int)v;
  return 0;
}

/* --version: the tool's name and the library's version, as help2man reads
 * it for the man page. */
static inline void cli_print_version(const char *tool) {
  printf("%s (nexar) %s\n", tool, nexar_version());
}

/* Bad arguments: prints "TOOL: MSG 'VALUE'" (VALUE may be NULL) and the
 * usage to stderr; returns 2, the tools' exit status for bad arguments. */
static inline int cli_bad_arg(const char *tool, void (*usage)(FILE *),
                              const char *msg, const char *value) {
  fprintf(stderr, "%s: %s%s%s%s\n", tool, msg, value ? " '" : "",
          value ? value : "", value ? "'" : "");
  usage(stderr);
  return 2;
}

/* The cluster secret comes from exactly one of |secret_file| (the tool's
 * --secret-file, NULL when not given), NEXAR_SECRET and NEXAR_SECRET_FILE:
 * NULL when it does, else why not. */
static inline const char *cli_secret_sources(const char *secret_file) {
  int n = (secret_file != NULL) + (getenv("NEXAR_SECRET") != NULL) +
          (getenv("NEXAR_SECRET_FILE") != NULL);
  if (n == 0)
    return "no cluster secret: set NEXAR_SECRET or NEXAR_SECRET_FILE, or "
           "pass --secret-file";
  if (n > 1)
    return "the cluster secret is given more than once (--secret-file, "
           "NEXAR_SECRET, NEXAR_SECRET_FILE): give exactly one";
  return NULL;
}

#endif /* NEXAR_TOOLS_CLI_H */
