/*
 * test_inspect's client with a wrong proof: nexar__inspect against the seed
 * at SEED proving a wrong secret to the seed (MODE 1) or, with the roster
 * fetched with the right one, to every rank (MODE 2), or connecting to
 * every rank and sending nothing (MODE 3). Prints the result code, the
 * error and (MODE 2, 3) the table; test_inspect.sh checks that nothing but
 * a refusal came back (and in MODE 3 that the ranks close at their
 * deadline, and refuse observers beyond their bound).
 *
 * usage: inspect_probe SEED MODE   (the secret: NEXAR_SECRET)
 */
#include <stdio.h>
#include <stdlib.h>

#include "cluster/inspect.h"
#include "nexar.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SEED MODE\n", argv[0]);
    return 2;
  }
  int mode = atoi(argv[2]);
  nexar__inspect_opts_t o = {argv[1], NULL, NULL, mode == 3 ? 8000 : 4000,
                             mode};
  char err[512];
  int rc = nexar__inspect(&o, stdout, err, sizeof err);
  printf("rc %s: %s\n", nexar_err_name(rc), err);
  return 0;
}
