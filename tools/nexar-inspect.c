/*
 * nexar-inspect: prints what every rank of a running job is doing.
 *
 *   nexar-inspect --seed IP:PORT [--secret-file FILE] [--timeout-ms T]
 *
 * Asks the seed (which must still run: nexar-run's does until the job
 * ends, nexar-seed's with --stay or --max-world) for the roster, then each
 * rank for its state, proving the cluster secret to both, and prints one
 * table: rank, host, pid, the operation in progress and how long it has
 * waited, the ranks it waits for, bytes in flight per peer and the oldest
 * heartbeat age; then which ranks the others wait for
 * (docs/debugging.md "Live inspection"). Works while the job hangs: ranks
 * answer from their progress thread. The secret comes from exactly one of
 * --secret-file, NEXAR_SECRET and NEXAR_SECRET_FILE; it is never printed.
 * Exit status: 0 when the table was printed, 1 when no roster came (wrong
 * secret, no seed, timeout), 2 on bad arguments.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cluster/inspect.h"

static void usage(FILE *f) {
  fprintf(f,
          "Usage: nexar-inspect --seed IP:PORT [OPTION]...\n"
          "\n"
          "Prints what every rank of a running nexar job is doing: the "
          "operation in\n"
          "progress and how long it has waited, the ranks it waits for, "
          "bytes in\n"
          "flight per peer and heartbeat ages. Works while the job hangs.\n"
          "\n"
          "  --seed IP:PORT       the job's seed (it must still run)\n"
          "  --secret-file FILE   file holding the cluster secret (or "
          "NEXAR_SECRET or\n"
          "                       NEXAR_SECRET_FILE: exactly one of the "
          "three)\n"
          "  --timeout-ms T       wait at most T ms for the answers "
          "(default 5000)\n"
          "  --help               print this help\n"
          "  --version            print the version\n"
          "\n"
          "Exit status: 0 when the table was printed, 1 when the seed gave "
          "no roster\n"
          "(wrong secret, no seed, timeout), 2 on bad arguments.\n");
}

static int bad_arg(const char *msg, const char *value) {
  return cli_bad_arg("nexar-inspect", usage, msg, value);
}

int main(int argc, char **argv) {
  enum { OPT_SEED = 1, OPT_SECRET_FILE, OPT_TIMEOUT };
  static const struct option longopts[] = {
      {"seed", required_argument, NULL, OPT_SEED},
      {"secret-file", required_argument, NULL, OPT_SECRET_FILE},
      {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  nexar__inspect_opts_t o = {NULL, NULL, NULL, 5000, 0};
  int c;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
      case OPT_SEED:
        o.seed = optarg;
        break;
      case OPT_SECRET_FILE:
        o.secret_file = optarg;
        break;
      case OPT_TIMEOUT:
        if (cli_parse_int(optarg, 1, 600000, &o.timeout_ms) < 0)
          return bad_arg(
              "--timeout-ms wants a number of ms from 1 to 600000,"
              " not",
              optarg);
        break;
      case 'h':
        usage(stdout);
        return 0;
      case 'V':
        cli_print_version("nexar-inspect");
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) return bad_arg("unexpected argument", argv[optind]);
  if (!o.seed) return bad_arg("--seed IP:PORT is required", NULL);
  const char *no_secret = cli_secret_sources(o.secret_file);
  if (no_secret) return bad_arg(no_secret, NULL);
  char err[512];
  int rc = nexar__inspect(&o, stdout, err, sizeof err);
  if (rc < 0) {
    fprintf(stderr, "nexar-inspect: %s: %s\n", nexar_strerror(rc), err);
    return 1;
  }
  return 0;
}
