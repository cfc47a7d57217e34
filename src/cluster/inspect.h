/*
 * Live inspection, the observer's side (inspect.c): what nexar-inspect and
 * nexar-run (on a job timeout) call. docs/debugging.md "Live inspection".
 */
#ifndef NEXAR_INSPECT_H
#define NEXAR_INSPECT_H

#include <stdint.h>
#include <stdio.h>

typedef struct nexar__inspect_opts {
  const char *seed;        /* the seed's address, "host:port" */
  const char *secret;      /* the cluster secret, or NULL: secret_file */
  const char *secret_file; /* NULL with secret NULL: NEXAR_SECRET(_FILE) */
  int timeout_ms;          /* for the whole inspection; <= 0: 5000 */
  /* Tests only (test_inspect): prove a wrong secret to the seed (1) or,
   * with the roster known, to the ranks (2), or send the ranks nothing
   * (3); 0 otherwise. */
  int wrong_proof;
} nexar__inspect_opts_t;

/*
 * Asks the seed at o->seed for the roster (proving the cluster secret),
 * then every rank for its state (pinning its certificate, proving the
 * secret), and prints one table to |out|: per rank its host, process,
 * state (the operation in progress and how long it has waited, or idle),
 * which ranks it waits for, bytes in flight per peer and the oldest
 * heartbeat age; then which ranks are waited for. A rank that does not
 * answer within the timeout is listed as such. Returns 0 when the table
 * was printed (some ranks may not have answered); NEXAR_ERR_AUTH when the
 * seed refused the secret or did not prove it; NEXAR_ERR_TIMEOUT when no
 * roster came; NEXAR_ERR_INVALID_ARG / NEXAR_ERR_TRANSPORT / NOMEM.
 * |err| (|errlen| bytes) then says why. Never prints the secret. Not
 * thread-safe with itself on one |out|; otherwise any thread.
 */
int nexar__inspect(const nexar__inspect_opts_t *o, FILE *out, char *err,
                   size_t errlen);

#endif /* NEXAR_INSPECT_H */
