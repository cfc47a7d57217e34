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

#endif /* NEXAR_TOOLS_CLI_H */
