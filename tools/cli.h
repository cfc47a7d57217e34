/*
 * Command-line helpers shared by the tools.
 */
#ifndef NEXAR_TOOLS_CLI_H
#define NEXAR_TOOLS_CLI_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "nexar.h"

/* Parses a whole decimal integer in [lo, hi] into *out. Returns 0 or -1. */
static inline int cli_parse_int(const char *s, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

/* --version: the tool's name and the library's version, as help2man reads
 * it for the man page. */
static inline void cli_print_version(const char *tool) {
  printf("%s (nexar) %s\n", tool, nexar_version());
}

#endif /* NEXAR_TOOLS_CLI_H */
