/*
 * `make elastic-soak` (docs/testing.md): 1,000 join/leave cycles on a world
 * of 4 (tests/elastic_churn.c); every long-lived member's RSS must stay
 * within 2 MiB of its value after 100 warm-up cycles, and no connection of
 * a departed process may outlive its cycle. NEXAR_SOAK_CYCLES changes the
 * count (the warm-up stays a tenth of it). Not part of `make test`.
 */
#include <stdio.h>
#include <stdlib.h>

#include "elastic_churn.h"

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *s = getenv("NEXAR_SOAK_CYCLES");
  int cycles = s ? atoi(s) : 1000;
  if (cycles < 10) cycles = 10;
  churn_opts_t o = {.cycles = cycles,
                    .warmup = cycles / 10,
                    .rss_max_kb = 2048,
                    .report_every = cycles / 20,
                    .timeout_ms = 60000 + cycles * 1000};
#if defined(__SANITIZE_ADDRESS__)
  o.rss_max_kb = 0; /* ASan's quarantine holds freed memory: RSS not judged */
#endif
  int rc = churn_run(&o);
  printf("%s elastic soak: %d join/leave cycles\n", rc ? "FAIL" : "ok", cycles);
  return rc ? 1 : 0;
}
