/*
 * nexar-seed: runs a standalone seed for a multi-host job.
 *
 *   nexar-seed --listen IP:PORT --world-size N [--secret-file FILE]
 *              [--timeout-ms T] [--max-world M] [--stay]
 *
 * The seed admits N workers that present the cluster secret, assigns their
 * ranks and sends each the roster, then exits: it is never on the data path.
 * With --max-world M (> N) it is elastic: after formation it stays up and
 * admits joiners (NEXAR_JOIN=1) at the workers' elastic checkpoints, up to M
 * members, until SIGINT or SIGTERM (docs/elastic.md). With --stay it also
 * stays up after formation, until SIGINT or SIGTERM, answering nexar-inspect
 * (docs/debugging.md "Live inspection").
 * The secret comes from exactly one of --secret-file, NEXAR_SECRET and
 * NEXAR_SECRET_FILE (two of them are refused: which one was meant?); it is
 * never printed. Numbers, in options and in NEXAR_* variables alike, are
 * decimal (nexar__parse_dec: no 0x, no leading zero, no spaces). Exit
 * status: 0 when the cluster formed, 1 when it did not (the reason is
 * printed), 2 on bad arguments.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/base/param.h"
#include "cli.h"
#include "nexar.h"

static void usage(FILE *f) {
  fprintf(f,
          "Usage: nexar-seed --listen IP:PORT --world-size N [OPTION]...\n"
          "\n"
          "Runs the seed of a nexar cluster: admits N workers that know the "
          "cluster\n"
          "secret, assigns their ranks, sends each the roster and exits.\n"
          "\n"
          "  --listen IP:PORT     UDP address to listen on (PORT 0: any "
          "free port)\n"
          "  --world-size N       number of workers (else NEXAR_WORLD_SIZE)\n"
          "  --secret-file FILE   file holding the cluster secret (or "
          "NEXAR_SECRET or\n"
          "                       NEXAR_SECRET_FILE: exactly one of the "
          "three)\n"
          "  --timeout-ms T       formation deadline in ms (else\n"
          "                       NEXAR_BOOTSTRAP_TIMEOUT_MS)\n"
          "  --max-world M        elastic: after formation stay up and admit "
          "joiners\n"
          "                       (NEXAR_JOIN=1) up to M members, until "
          "SIGINT/SIGTERM\n"
          "                       (else NEXAR_MAX_WORLD_SIZE; M <= N: not "
          "elastic)\n"
          "  --stay               after formation stay up for nexar-inspect "
          "until\n"
          "                       SIGINT/SIGTERM\n"
          "  --help               print this help\n"
          "  --version            print the version\n"
          "\n"
          "Workers join with NEXAR_SEED=IP:PORT, the same secret and "
          "NEXAR_WORLD_SIZE=N.\n"
          "Exit status: 0 when the cluster formed, 1 when it did not, 2 on "
          "bad arguments.\n");
}

static int bad_arg(const char *msg, const char *value) {
  return cli_bad_arg("nexar-seed", usage, msg, value);
}

/* Parses the option or variable |name|=|s| as the library parses every
 * NEXAR_* integer (nexar__parse_dec). Returns 0, or prints why and returns
 * -1. */
static int parse_int(const char *name, const char *s, long lo, long hi,
                     int *out) {
  int64_t v;
  int rc = s && *s ? nexar__parse_dec(s, lo, hi, &v) : NEXAR__DEC_SYNTAX;
  if (rc == 0) {
    *out = (int)v;
    return 0;
  }
  char why[256];
  if (s && !*s)
    snprintf(why, sizeof(why), "%s is set but empty", name);
  else
    nexar__parse_dec_error(rc, name, s, lo, hi, why, sizeof(why));
  fprintf(stderr, "nexar-seed: %s\n", why);
  return -1;
}

int main(int argc, char **argv) {
  enum {
    OPT_LISTEN = 1,
    OPT_WORLD,
    OPT_SECRET_FILE,
    OPT_TIMEOUT,
    OPT_MAXW,
    OPT_STAY
  };
  static const struct option longopts[] = {
      {"listen", required_argument, NULL, OPT_LISTEN},
      {"world-size", required_argument, NULL, OPT_WORLD},
      {"secret-file", required_argument, NULL, OPT_SECRET_FILE},
      {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
      {"max-world", required_argument, NULL, OPT_MAXW},
      {"stay", no_argument, NULL, OPT_STAY},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  const char *listen = NULL, *secret_file = NULL;
  int world_size = 0, timeout_ms = NEXAR_UNSET, max_world = NEXAR_UNSET, c;
  int stay = 0;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
      case OPT_LISTEN:
        listen = optarg;
        break;
      case OPT_WORLD:
        if (parse_int("--world-size", optarg, 1, 1 << 20, &world_size) < 0)
          return bad_arg("--world-size wants a number >= 1, not", optarg);
        break;
      case OPT_SECRET_FILE:
        secret_file = optarg;
        break;
      case OPT_TIMEOUT:
        if (parse_int("--timeout-ms", optarg, 1, 86400000, &timeout_ms) < 0)
          return bad_arg("--timeout-ms wants a number of ms >= 1, not", optarg);
        break;
      case OPT_MAXW:
        if (parse_int("--max-world", optarg, 0, 16384, &max_world) < 0)
          return bad_arg("--max-world wants a number from 0 to 16384, not",
                         optarg);
        break;
      case OPT_STAY:
        stay = 1;
        break;
      case 'h':
        usage(stdout);
        return 0;
      case 'V':
        cli_print_version("nexar-seed");
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) return bad_arg("unexpected argument", argv[optind]);
  if (!listen) return bad_arg("--listen IP:PORT is required", NULL);
  const char *colon = strrchr(listen, ':');
  int port;
  if (!colon || colon == listen || !colon[1])
    return bad_arg("--listen wants IP:PORT, not", listen);
  if (parse_int("the PORT of --listen", colon + 1, 0, 65535, &port) < 0)
    return bad_arg("--listen wants IP:PORT with a decimal PORT, not", listen);
  if (world_size == 0) {
    /* The library would read NEXAR_WORLD_SIZE itself; parse it here too so
     * that the messages can say how many workers are awaited. */
    const char *env = getenv("NEXAR_WORLD_SIZE");
    if (!env)
      return bad_arg("--world-size N (or NEXAR_WORLD_SIZE) is required", NULL);
    if (parse_int("NEXAR_WORLD_SIZE", env, 1, 1 << 20, &world_size) < 0)
      return bad_arg("NEXAR_WORLD_SIZE wants a number >= 1, not", env);
  }
  const char *no_secret = cli_secret_sources(secret_file);
  if (no_secret) return bad_arg(no_secret, NULL);

  nexar_seed_config_t cfg = NEXAR_SEED_CONFIG_INIT;
  cfg.listen_addr = listen;
  cfg.secret_file = secret_file;
  cfg.world_size = world_size;
  cfg.timeout_ms = timeout_ms;
  cfg.max_world_size = max_world;
  /* Elastic: SIGINT and SIGTERM are taken with sigwait once formed, so they
   * are blocked before the seed's thread starts (it inherits the mask). */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  nexar_seed_t *seed = NULL;
  int rc = nexar_seed_start(&cfg, &seed);
  if (rc != NEXAR_OK) {
    const char *detail = nexar_last_error();
    fprintf(stderr, "nexar-seed: cannot start the seed on %s: %s%s%s\n", listen,
            nexar_strerror(rc), detail && *detail ? ": " : "",
            detail ? detail : "");
    return 1;
  }
  /* Print the port actually bound, which differs from PORT when it is 0. */
  fprintf(stderr, "nexar-seed: listening on %.*s:%d, waiting for %d workers\n",
          (int)(colon - listen), listen, nexar_seed_port(seed), world_size);
  /* Until formed, a signal ends the seed as it always did. */
  pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
  rc = nexar_seed_wait(seed, -1);
  if (rc == NEXAR_OK) {
    fprintf(stderr, "nexar-seed: cluster of %d formed\n", world_size);
    int maxw = nexar_seed_max_world_size(seed);
    if (maxw > 0 || stay) {
      pthread_sigmask(SIG_BLOCK, &stop, NULL);
      if (maxw > 0)
        fprintf(stderr,
                "nexar-seed: elastic: admitting joiners up to %d members; "
                "stop with SIGINT or SIGTERM\n",
                maxw);
      else
        fprintf(stderr,
                "nexar-seed: staying up for nexar-inspect; stop with SIGINT "
                "or SIGTERM\n");
      int sig = 0;
      sigwait(&stop, &sig);
      fprintf(stderr, "nexar-seed: stopped by signal %d\n", sig);
    }
  } else {
    const char *detail = nexar_seed_last_error(seed);
    fprintf(stderr, "nexar-seed: the cluster did not form: %s\n",
            detail && *detail ? detail : nexar_strerror(rc));
  }
  nexar_seed_stop(seed);
  return rc == NEXAR_OK ? 0 : 1;
}
