/*
 * The launcher's account of its children: one line per process saying how
 * it ended (launch.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "launch.h"
#include "launch_int.h"

/* ------------------------------------------------------------------ */
/* Reporting. */

static void describe_state(const launch_proc_t *p, char *buf, size_t len) {
  switch (p->state) {
    case LAUNCH_PROC_NONE:
      snprintf(buf, len, "not started");
      break;
    case LAUNCH_PROC_RUNNING:
      snprintf(buf, len, "still running");
      break;
    case LAUNCH_PROC_EXITED:
      snprintf(buf, len, "exited with status %d", p->code);
      break;
    case LAUNCH_PROC_SIGNALED:
      snprintf(buf, len, "killed by signal %d (%s)", p->code,
               strsignal(p->code));
      break;
    case LAUNCH_PROC_LOST:
      snprintf(buf, len, "could not be reaped (lost)");
      break;
  }
}

char *launch_describe(const nexar_launch_t *l, int index, char *buf,
                      size_t len) {
  if (len == 0) return buf;
  if (index < 0) {
    switch (l->seed_state) {
      case LAUNCH_SEED_NONE:
        snprintf(buf, len, "no seed");
        break;
      case LAUNCH_SEED_RUNNING:
        snprintf(buf, len, "still waiting for %d workers", l->opts.world_size);
        break;
      case LAUNCH_SEED_FORMED:
        snprintf(buf, len, "formed the cluster of %d", l->opts.world_size);
        break;
      case LAUNCH_SEED_FAILED:
        snprintf(buf, len, "failed to form the cluster of %d: %s",
                 l->opts.world_size, l->seed_error);
        break;
      case LAUNCH_SEED_STOPPED:
        snprintf(buf, len,
                 "stopped by the launcher before the cluster of %d formed",
                 l->opts.world_size);
        break;
    }
    return buf;
  }
  if (index >= l->nprocs) {
    snprintf(buf, len, "no such worker");
    return buf;
  }
  const launch_proc_t *p = &l->procs[index];
  char state[128];
  describe_state(p, state, sizeof state);
  if (p->at_deadline) {
    snprintf(buf, len, "hung: still running at the %d ms deadline, %s",
             l->opts.timeout_ms, state);
  } else if (p->stopped && l->outcome == LAUNCH_WORKER_FAILED &&
             l->first_failed >= 0) {
    snprintf(buf, len, "stopped after worker %d failed, %s", l->first_failed,
             state);
  } else if (p->stopped && l->outcome == LAUNCH_INTERRUPTED) {
    snprintf(buf, len, "stopped on signal %d, %s", l->interrupt_sig, state);
  } else if (p->stopped) {
    snprintf(buf, len, "stopped by the launcher, %s", state);
  } else {
    snprintf(buf, len, "%s", state);
  }
  return buf;
}

void launch_report(const nexar_launch_t *l, FILE *f, const char *who) {
  char d[700];
  switch (l->outcome) {
    case LAUNCH_OK:
      return;
    case LAUNCH_WORKER_FAILED:
      fprintf(f, "%s: worker %d failed (%s); stopped the others\n", who,
              l->first_failed,
              launch_describe(l, l->first_failed, d, sizeof d));
      break;
    case LAUNCH_TIMED_OUT:
      fprintf(f, "%s: the deadline of %d ms passed; stopped the workers\n", who,
              l->opts.timeout_ms);
      break;
    case LAUNCH_INTERRUPTED:
      fprintf(f, "%s: interrupted by signal %d (%s); stopped the workers\n",
              who, l->interrupt_sig, strsignal(l->interrupt_sig));
      break;
    case LAUNCH_ERROR:
      fprintf(f, "%s: %s\n", who, l->error);
      return;
  }
  for (int i = 0; i < l->nprocs; i++) {
    const launch_proc_t *p = &l->procs[i];
    if (i == l->first_failed ||
        (p->state == LAUNCH_PROC_EXITED && p->code == 0))
      continue;
    fprintf(f, "%s: worker %d (pid %d): %s\n", who, i, (int)p->pid,
            launch_describe(l, i, d, sizeof d));
  }
  if (l->seed_state == LAUNCH_SEED_FAILED ||
      l->seed_state == LAUNCH_SEED_STOPPED)
    fprintf(f, "%s: seed: %s\n", who, launch_describe(l, -1, d, sizeof d));
}
