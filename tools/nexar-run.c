/*
 * nexar-run: runs N processes of a program on this host as one nexar job.
 *
 *   nexar-run -n N [-t TIMEOUT_S] [--max-world M] [--no-prefix] [--]
 *             program [args...]
 *
 * It starts a seed on 127.0.0.1 (random port; it stays up until the job
 * ends, for nexar-inspect) and N processes of |program|,
 * each with NEXAR_SEED, NEXAR_SECRET (a fresh random secret, never printed),
 * NEXAR_WORLD_SIZE=N and NEXAR_RANK=0..N-1 in its environment, forwards
 * every line they print prefixed with the rank ("[0] ..."), and stops the
 * others as soon as one fails. With --max-world M (> N) the seed is elastic:
 * it stays up and admits processes started with NEXAR_JOIN=1 (and the
 * job's NEXAR_SEED and NEXAR_SECRET) at the job's elastic checkpoints, up to
 * M members (docs/elastic.md). The process management lives in launch.c,
 * shared with the test harness.
 *
 * Exit status:
 *   0        every process exited 0. The seed's fate does not matter then: a
 *            program that never calls nexar_init never forms a cluster, and
 *            that is not an error (a seed that reported an error is
 *            mentioned as a note on stderr).
 *   1..255   the exit status of the first process that failed, or 128+S
 *            when it was killed by signal S (as a shell reports it);
 *   124      the -t timeout passed (as timeout(1) reports it); before it
 *            stops the processes it prints to stderr what each rank is doing
 *            (nexar-inspect's table, docs/debugging.md);
 *   128+S    nexar-run was interrupted by signal S (SIGINT, SIGTERM, SIGHUP);
 *   1        nexar-run itself could not start the job (seed, fork, pipe);
 *   2        bad arguments (usage printed).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/base/param.h"
#include "cli.h"
#include "launch.h"
#include "nexar.h"

/* More processes than this on one host is surely a typo. */
#define MAX_PROCS 4096

static volatile sig_atomic_t g_interrupt;

/* Records the signal; launch_wait notices it (poll returns EINTR at once)
 * and stops the workers, which are in their own process groups and so do
 * not get the terminal's Ctrl-C themselves. */
static void on_signal(int sig) {
  g_interrupt = sig;
}

static void usage(FILE *f) {
  fprintf(f,
          "Usage: nexar-run -n N [OPTION]... [--] program [args...]\n"
          "\n"
          "Starts a nexar seed and N processes of program on this host with "
          "a fresh\n"
          "random cluster secret, and prefixes each output line with the "
          "rank (\"[0] \").\n"
          "When one process fails the others are stopped (SIGTERM, then "
          "SIGKILL).\n"
          "\n"
          "  -n, --np N          number of processes (1..%d)\n"
          "  -t, --timeout S     stop everything after S seconds (default 0: "
          "none),\n"
          "                      first printing what each rank is doing (as "
          "nexar-inspect)\n"
          "      --max-world M   elastic seed: admit joiners (NEXAR_JOIN=1) at "
          "elastic\n"
          "                      checkpoints up to M processes (M > N)\n"
          "      --no-prefix     do not prefix output lines with the rank\n"
          "      --tolerate-kill a process killed by SIGKILL is not a "
          "failure: the\n"
          "                      others go on (fault-tolerance demos)\n"
          "  -h, --help          print this help\n"
          "      --version       print the version\n"
          "\n"
          "Each process gets NEXAR_SEED, NEXAR_SECRET, NEXAR_WORLD_SIZE and "
          "NEXAR_RANK;\n"
          "other NEXAR_* variables are passed through. Exit status: 0 when "
          "all exited 0,\n"
          "else the first failing process's status (128+signal when killed), "
          "124 on\n"
          "timeout, 1 when the job could not start, 2 on bad arguments.\n",
          MAX_PROCS);
}

/* Parses a timeout in seconds into milliseconds: decimal digits (as
 * nexar__parse_dec takes them) with an optional fraction, "2" or "0.5";
 * no sign, exponent, 0x or spaces. */
static int parse_timeout(const char *s, int *ms) {
  char whole[24];
  const char *dot = strchr(s, '.');
  size_t n = dot ? (size_t)(dot - s) : strlen(s);
  int64_t sec;
  if (n == 0 || n >= sizeof(whole) || s[0] == '+' || s[0] == '-') return -1;
  memcpy(whole, s, n);
  whole[n] = 0;
  if (nexar__parse_dec(whole, 0, INT_MAX, &sec) < 0) return -1;
  double frac = 0, scale = 0.1;
  if (dot) {
    if (!dot[1]) return -1;
    for (const char *c = dot + 1; *c; c++, scale /= 10) {
      if (*c < '0' || *c > '9') return -1;
      frac += (*c - '0') * scale;
    }
  }
  double m = ((double)sec + frac) * 1000.0;
  *ms = m >= INT_MAX ? INT_MAX : (int)m;
  if (*ms == 0 && (sec > 0 || frac > 0)) *ms = 1; /* tiny is not "none" */
  return 0;
}

/* The exit status that reports |l|'s outcome (see the top of the file). */
static int exit_status(const nexar_launch_t *l) {
  switch (l->outcome) {
    case LAUNCH_OK:
      return 0;
    case LAUNCH_WORKER_FAILED: {
      if (l->first_failed < 0) return 1;
      const launch_proc_t *p = &l->procs[l->first_failed];
      if (p->state == LAUNCH_PROC_EXITED && p->code > 0) return p->code;
      if (p->state == LAUNCH_PROC_SIGNALED) return 128 + p->code;
      return 1;
    }
    case LAUNCH_TIMED_OUT:
      return 124;
    case LAUNCH_INTERRUPTED:
      return 128 + l->interrupt_sig;
    case LAUNCH_ERROR:
      return 1;
  }
  return 1;
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"np", required_argument, NULL, 'n'},
      {"timeout", required_argument, NULL, 't'},
      {"no-prefix", no_argument, NULL, 'P'},
      {"max-world", required_argument, NULL, 'M'},
      {"tolerate-kill", no_argument, NULL, 'K'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  int nprocs = 0, timeout_ms = 0, no_prefix = 0, max_world = 0, c;
  int tolerate_kill = 0;
  /* "+": stop at the first non-option, so the program's own options are
   * left alone even without "--". */
  while ((c = getopt_long(argc, argv, "+n:t:h", longopts, NULL)) != -1) {
    switch (c) {
      case 'n':
        if (cli_parse_int(optarg, 1, MAX_PROCS, &nprocs) < 0) {
          fprintf(stderr,
                  "nexar-run: -n wants a number from 1 to %d, not '%s'\n",
                  MAX_PROCS, optarg);
          usage(stderr);
          return 2;
        }
        break;
      case 't':
        if (parse_timeout(optarg, &timeout_ms) < 0) {
          fprintf(stderr,
                  "nexar-run: -t wants a number of seconds >= 0, not '%s'\n",
                  optarg);
          usage(stderr);
          return 2;
        }
        break;
      case 'P':
        no_prefix = 1;
        break;
      case 'M':
        if (cli_parse_int(optarg, 2, 16384, &max_world) < 0) {
          fprintf(stderr,
                  "nexar-run: --max-world wants a number from 2 to 16384, "
                  "not '%s'\n",
                  optarg);
          usage(stderr);
          return 2;
        }
        break;
      case 'K':
        tolerate_kill = 1;
        break;
      case 'h':
        usage(stdout);
        return 0;
      case 'V':
        cli_print_version("nexar-run");
        return 0;
      default: /* getopt has printed what was wrong */
        usage(stderr);
        return 2;
    }
  }
  if (nprocs < 1) {
    fprintf(stderr, "nexar-run: -n N is required\n");
    usage(stderr);
    return 2;
  }
  if (max_world && max_world <= nprocs) {
    fprintf(stderr, "nexar-run: --max-world %d must exceed -n %d\n", max_world,
            nprocs);
    usage(stderr);
    return 2;
  }
  if (optind >= argc) {
    fprintf(stderr, "nexar-run: no program to run\n");
    usage(stderr);
    return 2;
  }

  /* Handlers without SA_RESTART, so that the supervisor's poll returns at
   * once. SIGPIPE is ignored so that a closed stdout (nexar-run | head)
   * drops output instead of killing the launcher and orphaning the job;
   * the children get default dispositions back (launch.c). */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  nexar_launch_opts_t o;
  memset(&o, 0, sizeof o);
  o.nprocs = nprocs;
  o.capture = 1;
  o.no_prefix = no_prefix;
  o.tolerate_kill = tolerate_kill;
  o.timeout_ms = timeout_ms;
  o.max_world_size = max_world;
  o.argv = argv + optind;
  o.interrupt = &g_interrupt;

  nexar_launch_t l;
  if (launch_start(&l, &o) < 0) {
    if (l.seed_state == LAUNCH_SEED_FAILED)
      fprintf(stderr, "nexar-run: the seed failed to start: %s\n",
              l.seed_error);
    else
      fprintf(stderr, "nexar-run: cannot start the job: %s\n", l.error);
    launch_free(&l);
    return 1;
  }
  launch_wait(&l);
  launch_report(&l, stderr, "nexar-run");
  if (l.outcome == LAUNCH_OK && l.seed_state == LAUNCH_SEED_FAILED)
    fprintf(stderr,
            "nexar-run: note: the seed failed to form the cluster (%s); "
            "ignored because all %d processes exited 0\n",
            l.seed_error, nprocs);
  int status = exit_status(&l);
  launch_free(&l);
  return status;
}
