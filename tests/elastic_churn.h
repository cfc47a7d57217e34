/*
 * Membership churn (tests/elastic_churn.c): a world of 4 whose fourth
 * member is replaced at every cycle. Each cycle one new process joins
 * through the elastic seed and the previous joiner leaves, at the same
 * checkpoint when the joiner is pending in time (else at two). Used by
 * test_elastic (a few cycles, the long-lived members' connection count) and
 * by `make elastic-soak` (1,000 cycles, their RSS).
 */
#ifndef NEXAR_TEST_ELASTIC_CHURN_H
#define NEXAR_TEST_ELASTIC_CHURN_H

typedef struct churn_opts {
  int cycles;       /* joiners admitted, each leaving at the next checkpoint */
  int warmup;       /* RSS is taken as the base after this many cycles */
  long rss_max_kb;  /* allowed RSS growth after warm-up (0: not checked) */
  int report_every; /* print RSS every this many cycles (0: never) */
  int timeout_ms;   /* the whole run (nt_run's hard limit) */
  const char *env;  /* extra settings for every process (may be NULL) */
} churn_opts_t;

/* Runs the churn under nt_run. Every long-lived member checks, after each
 * cycle has settled, that it holds no connection beyond the live members'
 * (ended ones of departed processes are freed), and that its RSS grew at
 * most rss_max_kb from the end of warm-up to the end. Returns 0 on success
 * (printing the figures), 1 on failure. */
int churn_run(const churn_opts_t *o);

#endif
