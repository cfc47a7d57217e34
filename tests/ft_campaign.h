/*
 * The randomized fault campaign (`make ft-campaign`, docs/testing.md): what
 * the campaign (ft_campaign.c), its trial runner (ft_campaign_trial.c) and
 * the workers (ft_campaign_worker.c) share.
 *
 * The campaign maps one fc_shared_t (MAP_SHARED) before it forks the seed and
 * the workers. Each worker writes only its own record; the runner writes
 * resume_ms before it sends SIGCONT to a stopped victim, so a worker can
 * tell which of its operations started after it was continued.
 */
#ifndef NEXAR_FT_CAMPAIGN_H
#define NEXAR_FT_CAMPAIGN_H

#include <stddef.h>
#include <stdint.h>

#define FC_MAXW 8                /* largest world of a trial */
#define FC_HB_MS 100             /* NEXAR_HEARTBEAT_MS */
#define FC_HB_TIMEOUT_MS 1000    /* NEXAR_HEARTBEAT_TIMEOUT_MS */
#define FC_OP_TIMEOUT_MS 10000   /* NEXAR_OP_TIMEOUT_MS */
#define FC_BOOT_TIMEOUT_MS 10000 /* NEXAR_BOOTSTRAP_TIMEOUT_MS */
/* The workload: rank 0 of the current communicator ends the loop once this
 * long has passed since its first barrier (faults fall at 150..1500 ms). */
#define FC_WORK_MS 3000
#define FC_MAX_ITERS 100000        /* every loop is bounded */
#define FC_MAX_FAILED_RECOVERIES 8 /* consecutive errors before giving up */
/* A worker still running this long after the later of the workload's end
 * and its last fault event (a stopped rank: its SIGCONT) is a HANG. */
#define FC_SLACK_MS 3000
#define FC_DEADLINE_MS (FC_OP_TIMEOUT_MS + 2 * FC_HB_TIMEOUT_MS + FC_SLACK_MS)
#define FC_TRIAL_LIMIT_MS 60000 /* everything of a trial is killed by then */
#define FC_CUT_ADDR "127.0.0.3" /* the route-loss victim's address */

enum { FC_ABORT, FC_MANUAL, FC_AUTOMATIC };
enum { FC_KILL, FC_STOP, FC_LATE, FC_ROUTE, FC_NFAULTS };
/* A trial's outcome, from how the ranks that were no victim ended. */
enum {
  FC_O_UNAFFECTED,  /* all done, nobody noticed a failure */
  FC_O_RECOVERED,   /* all done in a rebuilt communicator */
  FC_O_ABORTED,     /* all aborted */
  FC_O_NO_MAJORITY, /* automatic without a majority */
  FC_O_MIXED,       /* anything else (see the trial's lines) */
  FC_NOUTCOMES
};
extern const char *const fc_fault_names[FC_NFAULTS];
extern const char *const fc_policy_names[3];
extern const char *const fc_outcome_names[FC_NOUTCOMES];

/* A worker's final status, also its exit status. */
enum {
  FC_ST_DONE = 0,        /* finished the workload (rank 0 said stop) */
  FC_ST_ABORTED = 3,     /* abort policy: an error, then finalize */
  FC_ST_EXCLUDED = 4,    /* NEXAR_ERR_EXCLUDED: fenced out */
  FC_ST_NO_MAJORITY = 5, /* automatic: "no majority", stopped cleanly */
  FC_ST_FAILED = 6,      /* any other error (timeout, shrink failed...) */
  FC_ST_INIT_FAILED = 7  /* nexar_init or the first barrier failed */
};

typedef struct fc_rec {
  volatile int pid;
  volatile int ended; /* status below is final (set before finalize) */
  int status;         /* FC_ST_* */
  double end_ms;      /* when it set ended (CLOCK_MONOTONIC ms) */
  int rc;             /* the nexar code that ended the loop (0 if done) */
  char err[240];      /* its text */
  uint32_t epoch;     /* communicator it ended in: epoch, size, ids */
  int size;
  uint32_t mask;
  int ops;             /* verified operations that succeeded */
  int ops_final;       /* ... of them on the communicator it ended in */
  int recoveries;      /* errors after which it went on */
  int ok_after_resume; /* succeeded although started after resume_ms */
  char after_what[120];
  int wrong; /* verified values that differed */
  char wrong_what[200];
  uint32_t failed_mask;      /* ids it knew failed at the end */
  double failed_at[FC_MAXW]; /* when it learnt each (CLOCK_MONOTONIC ms) */
  char phase[120];           /* what it is doing now, for hang reports */
} fc_rec_t;

typedef struct fc_shared {
  int policy;
  uint64_t seed;              /* the trial's workload seed */
  volatile double resume_ms;  /* SIGCONT of the stopped victim, or 0 */
  volatile double started_ms; /* rank 0 left the first barrier, or 0 */
  fc_rec_t rec[FC_MAXW];
} fc_shared_t;

/* One trial's draw. */
typedef struct fc_plan {
  int policy, n, fault, nv;
  int victim[2], at_ms[2]; /* fault moments after the workload start */
  int pause_ms;            /* stop: SIGCONT after this */
  int restore_ms;          /* route: restored after this, -1 never */
  uint64_t wseed;
} fc_plan_t;

/* What a trial runner hands back to the campaign (shared mapping). */
typedef struct fc_out {
  int finished, skipped, setup_failed, crashes;
  int hangs, wrong, fenced, unexpected, outcome, excluded;
  double secs;
} fc_out_t;

static inline uint64_t fc_mix(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* CLOCK_MONOTONIC in ms (the clock of nexar_failure_t.when_ns). */
double fc_now_ms(void);
void fc_sleep_ms(int ms);

/* Runs trial |p| in this process (a fresh child of the campaign; it may
 * enter a network namespace): fills |shared| and |result|, prints a line
 * per finding, worker output goes to |logfd|. */
void fc_run_trial(const fc_plan_t *p, fc_shared_t *shared, fc_out_t *result,
                  int logfd);
/* 1 when this process may create network namespaces; else 0 and |why|. */
int fc_netns_works(char *why, size_t len);
int fc_is_victim(const fc_plan_t *p, int i);
const char *fc_status_name(int status);

/* The worker body (ft_campaign_worker.c): joins the cluster from the
 * environment, runs the workload, fills sh->rec[index]; returns its
 * status, which the process exits with. */
int fc_worker(fc_shared_t *sh, int index);

#endif /* NEXAR_FT_CAMPAIGN_H */
