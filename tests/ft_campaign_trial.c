/*
 * One trial of the fault campaign (tests/ft_campaign.c), run in its own
 * process (the runner) so that a route-loss trial gets a network namespace
 * of its own and everything of a trial can be killed at once.
 *
 * The runner forks a seed and the workers (tests/ft_campaign_worker.c),
 * waits for rank 0's first barrier, fires the planned faults at their
 * moments, SIGKILLs every worker still running at its deadline (a HANG),
 * and then judges the records the workers left in the shared mapping.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* unshare, strsignal */
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ft_campaign.h"
#include "nexar.h"

const char *const fc_fault_names[FC_NFAULTS] = {"kill", "stop", "late",
                                                "route"};
const char *const fc_policy_names[3] = {"abort", "manual", "automatic"};
const char *const fc_outcome_names[FC_NOUTCOMES] = {
    "unaffected", "recovered", "aborted", "no-majority", "mixed"};

typedef struct proc {
  pid_t pid;
  int running, wstatus;
} proc_t;

static fc_shared_t *sh;
static fc_out_t *out;
static int logfd = -1;

void fc_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- processes ---- */

static void child_common(void) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (logfd >= 0) {
    dup2(logfd, 1);
    dup2(logfd, 2);
  }
}

/* Runs `ip ARGS...` (output to the trial log); returns its exit status. */
static int ip(const char *a, const char *b, const char *c, const char *d,
              const char *e, const char *f, const char *g) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    child_common();
    execlp("ip", "ip", a, b, c, d, e, f, g, (char *)NULL);
    _exit(127);
  }
  int st = -1;
  if (pid < 0 || waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Enters a fresh network namespace (as `unshare -n`, else `unshare -rn`)
 * with lo up and the local table moved to rule 100, so that a rule at 50
 * can make one loopback address unreachable. */
static int enter_netns(char *why, size_t len) {
  if (unshare(CLONE_NEWNET) != 0) {
    int e1 = errno;
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
      snprintf(why, len, "unshare(CLONE_NEWNET): %s; with a user namespace: %s",
               strerror(e1), strerror(errno));
      return -1;
    }
    char m[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(m, sizeof m, "0 %u 1", (unsigned)uid);
    write_file("/proc/self/uid_map", m);
    snprintf(m, sizeof m, "0 %u 1", (unsigned)gid);
    write_file("/proc/self/gid_map", m);
  }
  if (ip("link", "set", "lo", "up", NULL, NULL, NULL) ||
      ip("rule", "add", "pref", "100", "lookup", "local", NULL) ||
      ip("rule", "del", "pref", "0", NULL, NULL, NULL)) {
    snprintf(why, len,
             "`ip link set lo up` / `ip rule` failed in the "
             "namespace (is iproute2 installed?)");
    return -1;
  }
  return 0;
}

static void secret_hex(char out_hex[65]) {
  unsigned char b[32];
  if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
    for (size_t i = 0; i < sizeof b; i++)
      b[i] = (unsigned char)fc_mix(i ^ (uint64_t)getpid());
  for (size_t i = 0; i < sizeof b; i++) sprintf(out_hex + 2 * i, "%02x", b[i]);
}

/* Forks the seed; returns its pid and sets *port, or -1. */
static pid_t start_seed(const char *secret, int n, int *port) {
  int pfd[2];
  if (pipe(pfd)) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    child_common();
    close(pfd[0]);
    nexar_seed_config_t cfg = NEXAR_SEED_CONFIG_INIT;
    cfg.listen_addr = "127.0.0.1:0";
    cfg.secret = secret;
    cfg.world_size = n;
    cfg.timeout_ms = FC_BOOT_TIMEOUT_MS + 2000;
    nexar_seed_t *seed = NULL;
    int p =
        nexar_seed_start(&cfg, &seed) == NEXAR_OK ? nexar_seed_port(seed) : -1;
    if (p < 0) fprintf(stderr, "seed: %s\n", nexar_last_error());
    if (write(pfd[1], &p, sizeof p) != (ssize_t)sizeof p || p < 0) _exit(1);
    int rc = nexar_seed_wait(seed, -1);
    if (rc) fprintf(stderr, "seed: %s\n", nexar_seed_last_error(seed));
    nexar_seed_stop(seed);
    _exit(rc ? 1 : 0);
  }
  close(pfd[1]);
  struct pollfd q = {pfd[0], POLLIN, 0};
  *port = -1;
  if (pid > 0 && poll(&q, 1, 10000) == 1 &&
      read(pfd[0], port, sizeof *port) != (ssize_t)sizeof *port)
    *port = -1;
  close(pfd[0]);
  return pid;
}

static pid_t start_worker(const fc_plan_t *p, int i, const char *secret,
                          int port) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid != 0) return pid;
  child_common();
  char v[96];
  snprintf(v, sizeof v, "127.0.0.1:%d", port);
  setenv("NEXAR_SEED", v, 1);
  setenv("NEXAR_SECRET", secret, 1);
  unsetenv("NEXAR_SECRET_FILE");
  snprintf(v, sizeof v, "%d", p->n);
  setenv("NEXAR_WORLD_SIZE", v, 1);
  snprintf(v, sizeof v, "%d", i);
  setenv("NEXAR_RANK", v, 1);
  setenv("NEXAR_RECOVERY", fc_policy_names[p->policy], 1);
#define SETNUM(name, value) \
  (snprintf(v, sizeof v, "%d", (value)), setenv(name, v, 1))
  SETNUM("NEXAR_HEARTBEAT_MS", FC_HB_MS);
  SETNUM("NEXAR_HEARTBEAT_TIMEOUT_MS", FC_HB_TIMEOUT_MS);
  SETNUM("NEXAR_OP_TIMEOUT_MS", FC_OP_TIMEOUT_MS);
  SETNUM("NEXAR_BOOTSTRAP_TIMEOUT_MS", FC_BOOT_TIMEOUT_MS);
  if (p->fault == FC_ROUTE && i == p->victim[0])
    setenv("NEXAR_BIND_ADDR", FC_CUT_ADDR, 1);
  else
    unsetenv("NEXAR_BIND_ADDR");
  unsetenv("NEXAR_ADVERTISE_ADDR");
  exit(fc_worker(sh, i));
}

/* CPU seconds a process has used (utime + stime), or -1. */
static double cpu_secs(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *s = strrchr(buf, ')');
  unsigned long ut = 0, st = 0;
  if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                   &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void reap(proc_t *pr) {
  int st;
  if (pr->running && waitpid(pr->pid, &st, WNOHANG) == pr->pid) {
    pr->running = 0;
    pr->wstatus = st;
  }
}

static void kill_reap(proc_t *pr) {
  if (!pr->running) return;
  kill(pr->pid, SIGKILL);
  if (waitpid(pr->pid, &pr->wstatus, 0) == pr->pid) pr->running = 0;
}

static double dmax(double a, double b) {
  return a > b ? a : b;
}

/* ---- one trial (in its own process: the runner) ---- */

int fc_is_victim(const fc_plan_t *p, int i) {
  return (i == p->victim[0]) || (p->nv > 1 && i == p->victim[1]);
}

static void mask_str(uint32_t m, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < FC_MAXW && o + 4 < len; i++)
    if (m & (1u << i))
      o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "{", i);
  snprintf(buf + o, len - o, "%s", o ? "}" : "{}");
}

const char *fc_status_name(int st) {
  switch (st) {
    case FC_ST_DONE:
      return "DONE";
    case FC_ST_ABORTED:
      return "ABORTED";
    case FC_ST_EXCLUDED:
      return "EXCLUDED";
    case FC_ST_NO_MAJORITY:
      return "NO-MAJORITY";
    case FC_ST_FAILED:
      return "FAILED";
    default:
      return "INIT-FAILED";
  }
}

/* Earliest time another process learnt that |i| failed, or 0; *who: the
 * processes that knew it. Only the verdicts of processes that went on with
 * a majority of the world (DONE) or stopped as their policy says (ABORTED)
 * count: a cut-off rank that declares everybody else failed has excluded
 * nobody. */
static double excluded_at(const fc_plan_t *p, int i, uint32_t *who) {
  double t = 0;
  *who = 0;
  for (int j = 0; j < p->n; j++) {
    const fc_rec_t *r = &sh->rec[j];
    if (j == i || !r->ended || !(r->failed_mask & (1u << i)) ||
        (r->status != FC_ST_ABORTED &&
         (r->status != FC_ST_DONE || 2 * r->size <= p->n)))
      continue;
    *who |= 1u << j;
    if (t == 0 || r->failed_at[i] < t) t = r->failed_at[i];
  }
  return t;
}

/* Whether rank |i|, no victim, ended as it should not have. */
static int unexpected_end(const fc_plan_t *p, const fc_rec_t *r) {
  switch (r->status) {
    case FC_ST_DONE:
      return 0;
    case FC_ST_ABORTED: /* abort's end, unless nobody saw the failure */
      return r->rc == NEXAR_ERR_TIMEOUT;
    case FC_ST_EXCLUDED: /* harmless under abort: the job ends anyway */
      return p->policy != FC_ABORT;
    case FC_ST_NO_MAJORITY: /* only when two kills leave half or fewer */
      return !(p->fault == FC_KILL && p->nv == 2 && 2 * (p->n - 2) <= p->n);
    default:
      return 1;
  }
}

/* The verdicts on a finished trial; prints a line per finding. */
static void judge(const fc_plan_t *p, const proc_t *w,
                  const int *killed_by_us) {
  uint32_t flagged = 0;
  char m1[40], m2[40];
  for (int i = 0; i < p->n; i++) {
    const fc_rec_t *r = &sh->rec[i];
    if (r->wrong) {
      out->wrong += r->wrong;
      printf("  WRONG rank %d: %d value(s) differ; first: %s\n", i, r->wrong,
             r->wrong_what);
    }
    if (!killed_by_us[i] && !r->ended && WIFSIGNALED(w[i].wstatus)) {
      out->crashes++;
      printf("  CRASH rank %d: died of signal %d (%s) in %s\n", i,
             WTERMSIG(w[i].wstatus), strsignal(WTERMSIG(w[i].wstatus)),
             r->phase);
    }
    if (!r->ended) continue;
    uint32_t who;
    double ex = excluded_at(p, i, &who);
    mask_str(who, m2, sizeof m2);
    if (ex > 0 && r->status == FC_ST_DONE && ex < r->end_ms) {
      flagged |= 1u << i;
      printf(
          "  FENCED-CARRYING-ON rank %d: declared failed (known to %s), "
          "yet ended with success (exit 0) %.0f ms later in %s (epoch "
          "%u, %d ops there)\n",
          i, m2, r->end_ms - ex, (mask_str(r->mask, m1, sizeof m1), m1),
          r->epoch, r->ops_final);
    }
    if (ex > 0 && r->ok_after_resume && sh->resume_ms > ex) {
      flagged |= 1u << i;
      printf(
          "  FENCED-CARRYING-ON rank %d: declared failed %.0f ms before "
          "its SIGCONT (known to %s), yet %d call(s) started after it "
          "succeeded; first: %s\n",
          i, sh->resume_ms - ex, m2, r->ok_after_resume, r->after_what);
    }
    /* With one faulty rank and no kill, every group that goes on holds
     * n - 1 > n / 2; one of half or fewer is a cut-off or fenced rank (or
     * what it left behind) carrying on. */
    if (!(flagged & (1u << i)) && p->fault != FC_KILL &&
        r->status == FC_ST_DONE && 2 * r->size <= p->n) {
      flagged |= 1u << i;
      printf(
          "  FENCED-CARRYING-ON rank %d%s: ended with success in %s "
          "(epoch %u, %d ops there), a minority of the %d\n",
          i, fc_is_victim(p, i) ? " (victim)" : "",
          (mask_str(r->mask, m1, sizeof m1), m1), r->epoch, r->ops_final, p->n);
    }
    if (!fc_is_victim(p, i) && unexpected_end(p, r)) {
      out->unexpected++;
      printf("  UNEXPECTED rank %d (not a victim) ended %s: %s\n", i,
             fc_status_name(r->status), r->err);
    }
  }
  /* Two groups, each without the other, that both completed collectives
   * (one line per pair of groups). */
  uint64_t seen[FC_MAXW * FC_MAXW];
  int nseen = 0;
  for (int i = 0; i < p->n; i++)
    for (int j = i + 1; j < p->n; j++) {
      const fc_rec_t *a = &sh->rec[i], *b = &sh->rec[j];
      if (!a->ops_final || !b->ops_final || !a->pid || !b->pid) continue;
      if ((a->mask & (1u << j)) || (b->mask & (1u << i))) continue;
      if (a->mask & b->mask) continue; /* reported through a common member */
      /* The minority side carries on; both, when neither has a majority. */
      if (2 * a->size > p->n)
        flagged |= 1u << j;
      else if (2 * b->size > p->n)
        flagged |= 1u << i;
      else
        flagged |= (1u << i) | (1u << j);
      uint64_t key = a->mask < b->mask ? (uint64_t)a->mask << 32 | b->mask
                                       : (uint64_t)b->mask << 32 | a->mask;
      int dup = 0;
      for (int q = 0; q < nseen; q++) dup |= seen[q] == key;
      if (dup) continue;
      seen[nseen++] = key;
      printf(
          "  FENCED-CARRYING-ON split: %s (epoch %u, rank %d: %d ops, %s) "
          "and %s (epoch %u, rank %d: %d ops, %s) both completed "
          "collectives\n",
          (mask_str(a->mask, m1, sizeof m1), m1), a->epoch, i, a->ops_final,
          fc_status_name(a->status), (mask_str(b->mask, m2, sizeof m2), m2),
          b->epoch, j, b->ops_final, fc_status_name(b->status));
    }
  out->fenced = __builtin_popcount(flagged);
  /* Outcome, from the non-victims. */
  int cnt[8] = {0}, nsurv = 0, recovered = 0;
  for (int i = 0; i < p->n; i++) {
    const fc_rec_t *r = &sh->rec[i];
    if (fc_is_victim(p, i) || !r->ended) continue;
    nsurv++;
    cnt[r->status]++;
    recovered |= r->recoveries > 0 || r->epoch > 0;
  }
  for (int i = 0; i < p->n; i++)
    if (sh->rec[i].ended && sh->rec[i].status == FC_ST_EXCLUDED)
      out->excluded++;
  out->outcome = FC_O_MIXED;
  if (nsurv && cnt[FC_ST_DONE] == nsurv)
    out->outcome = recovered ? FC_O_RECOVERED : FC_O_UNAFFECTED;
  else if (nsurv && cnt[FC_ST_ABORTED] == nsurv)
    out->outcome = FC_O_ABORTED;
  else if (nsurv && cnt[FC_ST_NO_MAJORITY] + cnt[FC_ST_EXCLUDED] == nsurv &&
           cnt[FC_ST_NO_MAJORITY])
    out->outcome = FC_O_NO_MAJORITY;
}

void fc_run_trial(const fc_plan_t *p, fc_shared_t *shared, fc_out_t *result,
                  int log) {
  sh = shared;
  out = result;
  logfd = log;
  double t_launch = fc_now_ms();
  char why[256];
  if (p->fault == FC_ROUTE && enter_netns(why, sizeof why)) {
    out->skipped = 1;
    printf("  SKIP route-loss trial: no network namespace: %s\n", why);
    return;
  }
  /* A cut route is a network fault: same-host shared memory would bypass
   * it, so route-loss trials run their ranks over QUIC. */
  if (p->fault == FC_ROUTE) setenv("NEXAR_TRANSPORT", "quic", 1);
  char secret[65];
  secret_hex(secret);
  proc_t seed = {0, 0, 0}, w[FC_MAXW];
  memset(w, 0, sizeof w);
  int port = -1;
  seed.pid = start_seed(secret, p->n, &port);
  seed.running = seed.pid > 0;
  for (int i = 0; port > 0 && i < p->n; i++) {
    w[i].pid = start_worker(p, i, secret, port);
    w[i].running = w[i].pid > 0;
    sh->rec[i].pid = w[i].pid;
  }
  /* Events, in ms after the workload start: kills, stop, cont, cut,
   * restore. t < 0: not scheduled; done[]: fired. */
  enum { E_KILL0, E_KILL1, E_STOP, E_CONT, E_CUT, E_RESTORE, E_N };
  double ev[E_N];
  int fired[E_N] = {0}, killed[FC_MAXW] = {0};
  for (int e = 0; e < E_N; e++) ev[e] = -1;
  if (p->fault == FC_KILL) {
    ev[E_KILL0] = p->at_ms[0];
    if (p->nv > 1) ev[E_KILL1] = p->at_ms[1];
  } else if (p->fault == FC_STOP || p->fault == FC_LATE) {
    ev[E_STOP] = p->at_ms[0];
    if (p->fault == FC_STOP) ev[E_CONT] = p->at_ms[0] + p->pause_ms;
  } else {
    ev[E_CUT] = p->at_ms[0];
    if (p->restore_ms >= 0) ev[E_RESTORE] = p->at_ms[0] + p->restore_ms;
  }
  int v0 = p->victim[0],
      stop_victim = p->fault == FC_STOP || p->fault == FC_LATE;
  double t0 = 0, last_event = 0, t_fault = 0, cpu0[FC_MAXW] = {0};
  int all_ended = port <= 0;
  if (port <= 0) {
    out->setup_failed = 1;
    printf("  SETUP the seed did not start\n");
  }
  while (!all_ended) {
    reap(&seed);
    all_ended = 1;
    int others_ended = 1;
    for (int i = 0; i < p->n; i++) {
      reap(&w[i]);
      all_ended &= !w[i].running;
      if (i != v0 || !stop_victim) others_ended &= !w[i].running;
    }
    if (all_ended) break;
    double now = fc_now_ms();
    if (now - t_launch > FC_TRIAL_LIMIT_MS) {
      for (int i = 0; i < p->n; i++)
        if (w[i].running) {
          out->hangs++;
          killed[i] = 1;
          printf(
              "  HANG rank %d: still running at the trial limit (%d s), "
              "in %s\n",
              i, FC_TRIAL_LIMIT_MS / 1000, sh->rec[i].phase);
          kill_reap(&w[i]);
        }
      break;
    }
    if (t0 == 0 && sh->started_ms > 0) t0 = sh->started_ms;
    if (t0 == 0) {
      int gone = 0;
      for (int i = 0; i < p->n; i++) gone |= !w[i].running;
      if (gone || now - t_launch > FC_BOOT_TIMEOUT_MS + 5000) {
        out->setup_failed = 1;
        printf("  SETUP the world did not form (%s)\n",
               gone ? "a worker ended before the first barrier"
                    : "no first barrier in time");
        for (int i = 0; i < p->n; i++) {
          if (sh->rec[i].ended) printf("    rank %d: %s\n", i, sh->rec[i].err);
          killed[i] = w[i].running;
          kill_reap(&w[i]);
        }
        break;
      }
      fc_sleep_ms(5);
      continue;
    }
    for (int e = 0; e < E_N; e++) {
      if (fired[e] || ev[e] < 0 || now < t0 + ev[e]) continue;
      fired[e] = 1;
      last_event = now;
      if (t_fault == 0) { /* CPU use from here on tells a spinning process */
        t_fault = now;
        for (int i = 0; i < p->n; i++)
          cpu0[i] = w[i].running ? cpu_secs(w[i].pid) : 0;
      }
      if (e == E_KILL0 || e == E_KILL1) {
        int v = p->victim[e - E_KILL0];
        killed[v] = 1;
        if (w[v].running) kill(w[v].pid, SIGKILL);
      } else if (e == E_STOP) {
        if (w[v0].running) kill(w[v0].pid, SIGSTOP);
      } else if (e == E_CONT) {
        sh->resume_ms = fc_now_ms();
        if (w[v0].running) kill(w[v0].pid, SIGCONT);
      } else if (e == E_CUT) {
        if (ip("rule", "add", "pref", "50", "to", FC_CUT_ADDR, "unreachable"))
          printf("  NOTE `ip rule add ... unreachable` failed\n");
      } else {
        ip("rule", "del", "pref", "50", NULL, NULL, NULL);
      }
    }
    if (p->fault == FC_LATE && fired[E_STOP] && !fired[E_CONT] &&
        others_ended) {
      fired[E_CONT] = 1;
      sh->resume_ms = fc_now_ms();
      if (w[v0].running) kill(w[v0].pid, SIGCONT);
    }
    for (int i = 0; i < p->n; i++) {
      if (!w[i].running) continue;
      double dl;
      if (stop_victim && i == v0 && fired[E_STOP])
        dl = fired[E_CONT] ? sh->resume_ms + FC_DEADLINE_MS : 0;
      else
        dl = dmax(t0 + FC_WORK_MS, last_event) + FC_DEADLINE_MS;
      if (dl == 0 || now < dl) continue;
      double since = t_fault > 0 ? t_fault : t_launch;
      double cpu = cpu_secs(w[i].pid) - cpu0[i];
      out->hangs++;
      killed[i] = 1;
      printf(
          "  HANG rank %d%s: still running %.1f s after %s; in %s; CPU "
          "%.0f %% since the %s\n",
          i, fc_is_victim(p, i) ? " (victim)" : "",
          (now - (dl - FC_DEADLINE_MS)) / 1e3,
          stop_victim && i == v0 ? "its SIGCONT"
                                 : "the workload end / last fault",
          sh->rec[i].phase, 100.0 * cpu / ((now - since) / 1e3),
          t_fault > 0 ? "fault" : "launch");
      kill_reap(&w[i]);
    }
    fc_sleep_ms(5);
  }
  kill_reap(&seed);
  if (!out->setup_failed) judge(p, w, killed);
  out->secs = (fc_now_ms() - t_launch) / 1e3;
}

/* Whether route-loss trials can run: tries the namespace in a child. */
int fc_netns_works(char *why, size_t len) {
  int pfd[2];
  if (pipe(pfd)) return 0;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    char w[256] = "";
    int rc = enter_netns(w, sizeof w);
    ssize_t n = write(pfd[1], w, strlen(w));
    (void)n;
    _exit(rc ? 1 : 0);
  }
  close(pfd[1]);
  ssize_t n = pid > 0 ? read(pfd[0], why, len - 1) : -1;
  why[n > 0 ? n : 0] = 0;
  close(pfd[0]);
  int st = -1;
  if (pid > 0) waitpid(pid, &st, 0);
  return pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
