/*
 * launch: the process-management core shared by nexar-run and the test
 * harness (tests/harness.c), so that starting a seed, spawning workers and
 * supervising them is written once.
 *
 * One launch is: a fresh random cluster secret; a seed running in its own
 * forked child (nexar_seed_start on 127.0.0.1:0, then nexar_seed_wait); N
 * forked workers, each given NEXAR_SEED, NEXAR_SECRET, NEXAR_WORLD_SIZE and
 * NEXAR_RANK, that either exec a program or call a function; and a
 * supervisor loop that reaps them under a hard deadline, stops the others
 * when one fails, and optionally forwards their output line by line with a
 * "[rank] " prefix.
 *
 * Typical use:
 *
 *   nexar_launch_opts_t o = {0};
 *   o.nprocs = 4;
 *   o.argv = argv;
 *   nexar_launch_t l;
 *   if (launch_start(&l, &o) == 0) {
 *     int outcome = launch_wait(&l);
 *     launch_report(&l, stderr, "nexar-run");
 *   }
 *   launch_free(&l);
 *
 * Process model. The caller must not have started any thread before
 * launch_start: children are created with fork() and, in function mode, keep
 * running the caller's code. Every child (seed and workers) is put in its own
 * process group so that stopping a worker also stops whatever it started
 * (sh -c 'prog' and the like), gets PR_SET_PDEATHSIG(SIGKILL) so that it dies
 * with the launcher, has its stdin on /dev/null, and gets default signal
 * dispositions and an empty signal mask. Because the children are in their
 * own process groups a terminal's Ctrl-C reaches only the launcher: the
 * caller forwards it through opts.interrupt (see below).
 *
 * Not thread-safe; one launch at a time per process is the intended use
 * (several are possible as long as they are not waited on concurrently).
 */
#ifndef NEXAR_LAUNCH_H
#define NEXAR_LAUNCH_H

#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Length of the hex-encoded cluster secret (32 random bytes), without the
 * terminating NUL. */
#define LAUNCH_SECRET_LEN 64

/* Defaults for the zero values of the matching option fields. */
#define LAUNCH_DEFAULT_GRACE_MS 2000
#define LAUNCH_DEFAULT_SEED_GRACE_MS 1000
/* How long launch_start waits for the seed child to report its port. */
#define LAUNCH_SEED_START_MS 10000

/*
 * A worker body in function mode: runs in the forked child with the worker
 * environment already set. |index| is the worker's index (0..nprocs-1, also
 * its NEXAR_RANK unless opts.no_rank). Return 0 for success; the child exits
 * with that value (values outside 0..255 become 1).
 */
typedef int (*launch_fn)(int index, void *arg);

/*
 * Options of a launch. Zero-initialise and set what you need: every zero
 * value means the documented default.
 */
typedef struct nexar_launch_opts {
  int nprocs;     /* workers to start; must be >= 1 */
  int world_size; /* NEXAR_WORLD_SIZE and the seed's size; 0 = nprocs */
  int no_seed;    /* 1: start no seed and set no NEXAR_SEED (use env) */
  int no_rank;    /* 1: do not set NEXAR_RANK (and unset an inherited one) */
  /* 1: a worker killed by SIGKILL (a fault-injection victim) is neither a
   * failure nor a reason to stop the others. */
  int tolerate_kill;
  /* 1: capture the stdout and stderr of every child through pipes and
   * forward them line by line to the launcher's fd 1 and fd 2, prefixed
   * "[i] " (the seed's "[seed] "). A line is written with one writev, so
   * lines of different workers never interleave; a last line without '\n'
   * gets one; a line over 1 MiB is split. The caller should ignore SIGPIPE,
   * so that a closed stdout drops output instead of killing the launcher. */
  int capture;
  int no_prefix;  /* with capture: forward lines without the "[i] " prefix */
  int timeout_ms; /* hard deadline from launch_start, ms; <= 0: none */
  int grace_ms;   /* SIGTERM to SIGKILL delay, ms; 0: 2000 */
  /* After every worker has ended, how long the seed may still take to report
   * formation before it is stopped, ms; 0: 1000. A seed whose workers never
   * called nexar_init never forms, so this bounds the wait for it. */
  int seed_grace_ms;
  /* Formation deadline given to the seed, ms; <= 0: the library default
   * (NEXAR_BOOTSTRAP_TIMEOUT_MS from the environment, opts.env applied). */
  int seed_timeout_ms;
  /* Elastic seed (docs/elastic.md): above world_size, the seed stays up
   * after formation and admits joiners up to this many members; 0: from
   * NEXAR_MAX_WORLD_SIZE in the environment (opts.env applied), if set. */
  int max_world_size;
  /* Optional "K=V\nK=V" applied, in order, in the seed and in every worker
   * after the launcher's own variables, so it overrides them. A line "K"
   * without '=' unsets K. Empty lines are ignored. */
  const char *env;
  char *const *argv; /* exec mode: execvp(argv[0], argv) in each worker */
  launch_fn fn;      /* function mode (used when argv is NULL) */
  void *fn_arg;      /* passed to fn */
  /* Optional flag set by the caller's signal handler (to the signal number);
   * when it becomes non-zero, launch_wait stops every child as on a failure
   * and returns LAUNCH_INTERRUPTED. The handler should be installed without
   * SA_RESTART so that the supervisor wakes at once. */
  volatile sig_atomic_t *interrupt;
} nexar_launch_opts_t;

/* State of one child process. */
typedef enum launch_state {
  LAUNCH_PROC_NONE = 0, /* not started */
  LAUNCH_PROC_RUNNING,
  LAUNCH_PROC_EXITED,   /* exited; code is the exit status */
  LAUNCH_PROC_SIGNALED, /* killed by a signal; code is the signal number */
  LAUNCH_PROC_LOST      /* did not die even after SIGKILL and the wait bound */
} launch_state_t;

/* Overall result of launch_wait. */
typedef enum launch_outcome {
  LAUNCH_OK = 0,        /* every worker exited 0 */
  LAUNCH_WORKER_FAILED, /* a worker exited non-zero or died of a signal */
  LAUNCH_TIMED_OUT,     /* the deadline passed; the rest were stopped */
  LAUNCH_INTERRUPTED,   /* *opts.interrupt became non-zero */
  LAUNCH_ERROR          /* the launcher itself failed (see error) */
} launch_outcome_t;

/* What became of the seed. */
typedef enum launch_seed_state {
  LAUNCH_SEED_NONE = 0, /* no seed (opts.no_seed) */
  LAUNCH_SEED_RUNNING,
  LAUNCH_SEED_FORMED, /* nexar_seed_wait returned NEXAR_OK */
  LAUNCH_SEED_FAILED, /* the seed reported an error or died (seed_error) */
  LAUNCH_SEED_STOPPED /* stopped by the launcher before it formed */
} launch_seed_state_t;

struct launch_stream; /* internal line buffer */

/* One child process. Fields are read-only for the caller. */
typedef struct launch_proc {
  pid_t pid; /* also its process group id */
  launch_state_t state;
  int code;         /* exit status or signal number, see state */
  int stopped;      /* 1: the launcher signalled it (not its own failure) */
  int at_deadline;  /* 1: still running when the deadline passed */
  long long end_ms; /* when it was reaped, ms since launch_start */
  /* Internal. */
  long long term_at; /* monotonic ms when SIGTERM was sent, 0: not yet */
  int killed;        /* SIGKILL sent */
  struct launch_stream *out, *err; /* capture buffers, or NULL */
} launch_proc_t;

/*
 * A launch. Filled by launch_start; the result fields are valid after
 * launch_wait. Read-only for the caller; release with launch_free.
 */
typedef struct nexar_launch {
  nexar_launch_opts_t opts;           /* copy, with defaults applied */
  char secret[LAUNCH_SECRET_LEN + 1]; /* hex; wiped by launch_free */
  int seed_port; /* UDP port of the seed on 127.0.0.1, or 0 */
  int nprocs;
  launch_proc_t *procs; /* nprocs workers */
  launch_proc_t seed;   /* the seed child (pid 0 when none) */
  launch_seed_state_t seed_state;
  int seed_code;        /* nexar_result_t reported by the seed */
  char seed_error[512]; /* seed's message when LAUNCH_SEED_FAILED */
  launch_outcome_t outcome;
  int first_failed;  /* index of the first failing worker, or -1 */
  int interrupt_sig; /* value of *opts.interrupt that stopped us */
  char error[640];   /* launcher error text (LAUNCH_ERROR) */
  /* Internal. */
  long long t0_ms;           /* monotonic ms at launch_start */
  long long workers_done_ms; /* monotonic ms when the last worker ended */
  int seed_ctl;              /* read end of the seed's report pipe, or -1 */
  char seed_buf[1024];       /* what the seed reported so far */
  size_t seed_len;
  int started;
} nexar_launch_t;

/*
 * Writes a fresh cluster secret, 32 bytes from getrandom() hex-encoded, into
 * |out| (LAUNCH_SECRET_LEN characters plus NUL). Returns 0, or -1 with errno
 * set when no randomness could be obtained.
 */
int launch_secret(char out[LAUNCH_SECRET_LEN + 1]);

/*
 * Starts a launch as described by |opts| (copied): generates the secret,
 * forks the seed and waits for its port (at most LAUNCH_SEED_START_MS), then
 * forks the nprocs workers. Flushes all stdio streams first so that children
 * do not repeat buffered output. |l| need not be initialised.
 *
 * Returns 0 with everything running, or -1 with l->error describing the
 * problem (bad options, the seed could not start: then l->seed_error holds
 * the seed's message, fork or pipe failure); on failure every child already
 * started has been killed and reaped and l->outcome is LAUNCH_ERROR.
 * launch_free(l) must be called in both cases.
 */
int launch_start(nexar_launch_t *l, const nexar_launch_opts_t *opts);

/*
 * Supervises the launch until every child has ended: reaps children, forwards
 * captured output, and stops everything (SIGTERM to each child's process
 * group, SIGKILL after opts.grace_ms) when a worker fails, the deadline
 * passes or *opts.interrupt becomes non-zero. A worker fails when it exits
 * non-zero or dies of a signal that the launcher did not send. The seed's
 * fate never stops the workers: a seed that fails to form is reported in
 * l->seed_state; once all workers have ended the seed gets
 * opts.seed_grace_ms to report, then is stopped. Every wait is bounded: a
 * child that survives SIGKILL for 5 s is marked LAUNCH_PROC_LOST.
 *
 * Returns the outcome (also in l->outcome): LAUNCH_OK when every worker
 * exited 0, whatever the seed did.
 */
launch_outcome_t launch_wait(nexar_launch_t *l);

/*
 * Sends |sig| to the process group of every child still running (workers and
 * seed) and marks them as stopped by the launcher, so that their death is
 * not counted as a failure. With SIGTERM, launch_wait follows up with
 * SIGKILL after the grace period. Not async-signal-safe: from a signal
 * handler, set *opts.interrupt instead.
 */
void launch_kill(nexar_launch_t *l, int sig);

/*
 * Writes to |f| one line per worker that did not exit 0, saying what became
 * of it (exit status, signal, stopped after which failure, running at the
 * deadline), plus a line about the seed when it did not form. Each line
 * starts with "|who|: ". Prints nothing for a fully successful launch.
 */
void launch_report(const nexar_launch_t *l, FILE *f, const char *who);

/*
 * Describes worker |index| (or the seed when index is -1) in |buf| of |len|
 * bytes, e.g. "exited with status 3" or "killed by signal 9 (Killed)".
 * Returns buf.
 */
char *launch_describe(const nexar_launch_t *l, int index, char *buf,
                      size_t len);

/*
 * Releases what launch_start allocated, closes its pipes and wipes the
 * secret. Children still running are killed (SIGKILL) and reaped first.
 * Safe on a launch whose launch_start failed, and idempotent.
 */
void launch_free(nexar_launch_t *l);

#ifdef __cplusplus
}
#endif
#endif /* NEXAR_LAUNCH_H */
