/*
 * The randomized fault campaign (`make ft-campaign`; docs/testing.md).
 *
 * Each trial draws a recovery policy (abort, manual, automatic), a world
 * size (3..8) and one fault with its moment (150..1500 ms into the
 * workload of tests/ft_campaign_worker.c):
 *
 *   kill   SIGKILL of 1 or 2 ranks (together, or the second up to 800 ms
 *          later, during the recovery of the first)
 *   stop   SIGSTOP of a rank, SIGCONT after 100..500 ms (less than the
 *          heartbeat timeout) or 1500..3000 ms (more)
 *   late   SIGSTOP of a rank, SIGCONT only once every other rank has ended
 *   route  in a fresh network namespace, the victim binds 127.0.0.3 and an
 *          `ip rule ... unreachable` cuts every packet to it; restored after
 *          200..500 ms, 2000..3000 ms or never
 *
 * and checks, per trial:
 *
 *   HANG   a worker still running at its deadline: the later of the end of
 *          the workload and its last fault event (for a stopped rank, its
 *          SIGCONT), plus NEXAR_OP_TIMEOUT_MS + 2 x NEXAR_HEARTBEAT_TIMEOUT_MS
 *          + 3 s; it is SIGKILLed and reported with what it was doing and
 *          its CPU use (a spinning process shows ~100 %).
 *   WRONG  a verified value that differs (every successful operation is
 *          checked bit for bit).
 *   FENCED-CARRYING-ON  a process the others had declared failed that
 *          then ended with success, or had an operation succeed that it
 *          started after its SIGCONT; in a stop or route trial, one that
 *          ended with success in a minority (half the world or less); two
 *          groups, neither with the other, that both completed collectives
 *          (split brain).
 *
 * and the outcome mix per policy. Exit status 1 when any trial had a hang, a
 * wrong result, a fenced process carrying on, a crash, a world that did not
 * form, or a rank that was no victim yet ended excluded, failed, or (under
 * automatic) without a majority although the kills left one.
 *
 * Environment: NEXAR_CAMPAIGN_TRIALS (60), NEXAR_CAMPAIGN_SEED (from the
 * clock; printed), NEXAR_CAMPAIGN_ONLY=k (trial k alone, same draw),
 * NEXAR_CAMPAIGN_POLICY, _WORLD, _FAULT (force one draw; keep them when
 * replaying), NEXAR_CAMPAIGN_LOGDIR (worker logs; those of trials with
 * findings are kept), NEXAR_CAMPAIGN_KEEP_LOGS=1 (keep all).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ft_campaign.h"
#include "nexar.h"

static fc_shared_t *sh;
static fc_out_t *out;

static int draw(uint64_t *r, int n) {
  *r = fc_mix(*r);
  return (int)(*r % (uint64_t)n);
}

static int name_index(const char *v, const char *const *names, int n) {
  for (int i = 0; v && i < n; i++)
    if (!strcmp(v, names[i])) return i;
  return -1;
}

/* Trial k's draw; a forced policy, world or fault replaces only that draw,
 * so a replay with the same settings draws the same trial. */
static void make_plan(uint64_t seed, int k, fc_plan_t *p) {
  uint64_t r = fc_mix(seed ^ fc_mix((uint64_t)k + 1));
  memset(p, 0, sizeof *p);
  p->policy = draw(&r, 3);
  int f = name_index(getenv("NEXAR_CAMPAIGN_POLICY"), fc_policy_names, 3);
  if (f >= 0) p->policy = f;
  p->n = 3 + draw(&r, 6);
  const char *w = getenv("NEXAR_CAMPAIGN_WORLD");
  if (w && atoi(w) >= 3 && atoi(w) <= FC_MAXW) p->n = atoi(w);
  int d = draw(&r, 10); /* kill 3, stop 3, late 1, route 3 in 10 */
  p->fault = d < 3 ? FC_KILL : d < 6 ? FC_STOP : d < 7 ? FC_LATE : FC_ROUTE;
  f = name_index(getenv("NEXAR_CAMPAIGN_FAULT"), fc_fault_names, FC_NFAULTS);
  if (f >= 0) p->fault = f;
  p->nv = 1 + draw(&r, 2); /* drawn always, so forcing the fault keeps */
  if (p->fault != FC_KILL) p->nv = 1; /* the other draws as they were */
  p->victim[0] = draw(&r, p->n);
  p->victim[1] = (p->victim[0] + 1 + draw(&r, p->n - 1)) % p->n;
  p->at_ms[0] = 150 + draw(&r, 1351);
  p->at_ms[1] = p->at_ms[0] + (draw(&r, 2) ? 0 : draw(&r, 801));
  p->pause_ms = draw(&r, 2) ? 100 + draw(&r, 401) : 1500 + draw(&r, 1501);
  d = draw(&r, 4);
  p->restore_ms = d < 2    ? -1
                  : d == 2 ? 200 + draw(&r, 301)
                           : 2000 + draw(&r, 1001);
  p->wseed = fc_mix(r);
}

static void describe(const fc_plan_t *p, char *buf, size_t len) {
  int n = snprintf(buf, len, "%s n=%d: ", fc_policy_names[p->policy], p->n);
  buf += n, len -= (size_t)n;
  switch (p->fault) {
    case FC_KILL:
      if (p->nv == 1)
        snprintf(buf, len, "SIGKILL rank %d at %d ms", p->victim[0],
                 p->at_ms[0]);
      else
        snprintf(buf, len, "SIGKILL ranks %d, %d at %d, %d ms", p->victim[0],
                 p->victim[1], p->at_ms[0], p->at_ms[1]);
      break;
    case FC_STOP:
      snprintf(buf, len, "SIGSTOP rank %d at %d ms for %d ms (%s)",
               p->victim[0], p->at_ms[0], p->pause_ms,
               p->pause_ms < FC_HB_TIMEOUT_MS ? "< heartbeat timeout"
                                              : "> heartbeat timeout");
      break;
    case FC_LATE:
      snprintf(buf, len,
               "SIGSTOP rank %d at %d ms, SIGCONT once the others ended",
               p->victim[0], p->at_ms[0]);
      break;
    default:
      n = snprintf(buf, len, "route to rank %d (%s) cut at %d ms", p->victim[0],
                   FC_CUT_ADDR, p->at_ms[0]);
      if (p->restore_ms >= 0)
        snprintf(buf + n, len - (size_t)n, ", restored %d ms later",
                 p->restore_ms);
  }
}

/* How each rank ended: victims one by one, the others grouped by
 * (status, epoch, size), with the verified operations of all. */
static void print_ends(const fc_plan_t *p) {
  int ops = 0, done[FC_MAXW] = {0};
  for (int i = 0; i < p->n; i++) {
    const fc_rec_t *r = &sh->rec[i];
    ops += r->ops;
    if (!fc_is_victim(p, i)) continue;
    printf(" victim %d %s", i,
           r->ended              ? fc_status_name(r->status)
           : p->fault == FC_KILL ? "killed"
                                 : "killed at its deadline");
    if (r->ended && r->status != FC_ST_DONE)
      printf(" (%s)", nexar_err_name(r->rc));
    printf(",");
  }
  printf(" others");
  for (int i = 0; i < p->n; i++) {
    const fc_rec_t *r = &sh->rec[i];
    if (fc_is_victim(p, i) || done[i]) continue;
    int same = 0;
    for (int j = i; j < p->n; j++) {
      const fc_rec_t *q = &sh->rec[j];
      if (fc_is_victim(p, j) || done[j] || q->ended != r->ended ||
          q->status != r->status || q->epoch != r->epoch || q->size != r->size)
        continue;
      done[j] = 1;
      same++;
    }
    printf(" %dx %s in epoch %u size %d", same,
           r->ended ? fc_status_name(r->status) : "HUNG", r->epoch, r->size);
  }
  printf("; %d verified ops", ops);
}

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  int ntrials = env_int("NEXAR_CAMPAIGN_TRIALS", 60);
  if (ntrials > 100000) ntrials = 100000;
  const char *se = getenv("NEXAR_CAMPAIGN_SEED");
  uint64_t seed = se && *se ? strtoull(se, NULL, 0)
                            : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
  int only = env_int("NEXAR_CAMPAIGN_ONLY", -1);
  int keep = env_int("NEXAR_CAMPAIGN_KEEP_LOGS", 0);
  char logdir[512];
  const char *ld = getenv("NEXAR_CAMPAIGN_LOGDIR");
  if (ld && *ld)
    snprintf(logdir, sizeof logdir, "%s", ld);
  else
    snprintf(logdir, sizeof logdir, "%s/nexar-ft-campaign-%llu",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (unsigned long long)seed);
  mkdir(logdir, 0755);
  char forced[256] = "";
  const char *fv[] = {"NEXAR_CAMPAIGN_POLICY", "NEXAR_CAMPAIGN_WORLD",
                      "NEXAR_CAMPAIGN_FAULT"};
  for (int i = 0; i < 3; i++)
    if (getenv(fv[i]) && *getenv(fv[i]))
      snprintf(forced + strlen(forced), sizeof forced - strlen(forced),
               "%s=%s ", fv[i], getenv(fv[i]));
  char why[256] = "";
  int netns = fc_netns_works(why, sizeof why);
  printf(
      "ft-campaign: %d trial(s), seed %llu (replay one: %s"
      "NEXAR_CAMPAIGN_SEED=%llu NEXAR_CAMPAIGN_ONLY=k)\n",
      only >= 0 ? 1 : ntrials, (unsigned long long)seed, forced,
      (unsigned long long)seed);
  printf(
      "  settings: NEXAR_HEARTBEAT_MS=%d NEXAR_HEARTBEAT_TIMEOUT_MS=%d "
      "NEXAR_OP_TIMEOUT_MS=%d, workload %d ms, hang deadline %d ms after "
      "the later of workload end and last fault\n",
      FC_HB_MS, FC_HB_TIMEOUT_MS, FC_OP_TIMEOUT_MS, FC_WORK_MS, FC_DEADLINE_MS);
  if (netns)
    printf("  route loss: in a fresh network namespace per trial\n");
  else
    printf(
        "  route loss: SKIPPED, network namespaces are not allowed here: "
        "%s\n",
        why);
  printf("  worker logs: %s\n", logdir);

  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  out = mmap(NULL, sizeof *out, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED || out == MAP_FAILED) return 2;
  int logfd = -1;
  int mix_[3][FC_NOUTCOMES] = {{0}}, excl[3] = {0}, ran[3] = {0};
  int tot_hang = 0, tot_wrong = 0, tot_fenced = 0, tot_unexp = 0;
  int tot_setup = 0, tot_crash = 0, skipped = 0, nrun = 0, bad_trials = 0;
  double secs_sum = 0, secs_max = 0;
  for (int k = 0; k < ntrials || (only >= 0 && k <= only); k++) {
    if (only >= 0 && k != only) continue;
    fc_plan_t p;
    make_plan(seed, k, &p);
    char d[200];
    describe(&p, d, sizeof d);
    if (p.fault == FC_ROUTE && !netns) {
      skipped++;
      printf("trial %d: %s: SKIP (no network namespace)\n", k, d);
      continue;
    }
    char logpath[600];
    snprintf(logpath, sizeof logpath, "%s/trial-%d.log", logdir, k);
    logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (logfd < 0) logfd = open("/dev/null", O_WRONLY);
    memset(sh, 0, sizeof *sh);
    memset(out, 0, sizeof *out);
    sh->policy = p.policy;
    sh->seed = p.wseed;
    printf("trial %d: %s\n", k, d);
    fflush(NULL);
    pid_t runner = fork();
    if (runner == 0) {
      setpgid(0, 0);
      fc_run_trial(&p, sh, out, logfd);
      out->finished = 1;
      fflush(NULL);
      _exit(0);
    }
    if (runner > 0) setpgid(runner, runner);
    double t0 = fc_now_ms();
    int st = 0;
    while (runner > 0 && waitpid(runner, &st, WNOHANG) == 0) {
      if (fc_now_ms() - t0 > FC_TRIAL_LIMIT_MS + 15000) {
        printf("  HANG the trial runner itself: killed at %d s\n",
               FC_TRIAL_LIMIT_MS / 1000 + 15);
        out->hangs++;
        kill(-runner, SIGKILL);
        waitpid(runner, &st, 0);
        break;
      }
      fc_sleep_ms(20);
    }
    kill(-runner, SIGKILL); /* leftovers of its process group, if any */
    if (logfd >= 0) close(logfd);
    if (out->skipped) {
      skipped++;
      continue;
    }
    if (!out->finished && !out->hangs) {
      printf("  SETUP the trial runner died (status 0x%x)\n", st);
      out->setup_failed = 1;
    }
    int bad = out->hangs || out->wrong || out->fenced || out->setup_failed ||
              out->crashes || out->unexpected;
    nrun++;
    ran[p.policy]++;
    mix_[p.policy][out->outcome]++;
    excl[p.policy] += out->excluded;
    tot_hang += out->hangs;
    tot_wrong += out->wrong;
    tot_fenced += out->fenced;
    tot_unexp += out->unexpected;
    tot_setup += out->setup_failed;
    tot_crash += out->crashes;
    bad_trials += bad;
    double secs = out->secs > 0 ? out->secs : (fc_now_ms() - t0) / 1e3;
    secs_sum += secs;
    if (secs > secs_max) secs_max = secs;
    printf("  -> %s%s;", bad ? "FAIL " : "", fc_outcome_names[out->outcome]);
    print_ends(&p);
    printf("; %.1f s\n", secs);
    if (bad)
      printf(
          "  log: %s; replay: %sNEXAR_CAMPAIGN_SEED=%llu "
          "NEXAR_CAMPAIGN_ONLY=%d\n",
          logpath, forced, (unsigned long long)seed, k);
    else if (!keep)
      unlink(logpath);
  }
  printf(
      "\nft-campaign summary (seed %llu): %d trial(s) run, %d skipped, "
      "%d failed\n",
      (unsigned long long)seed, nrun, skipped, bad_trials);
  printf(
      "  HANGS %d, WRONG RESULTS %d, FENCED-CARRYING-ON %d; also failing: "
      "crashes %d, worlds not formed %d, survivors ended unexpectedly %d\n",
      tot_hang, tot_wrong, tot_fenced, tot_crash, tot_setup, tot_unexp);
  for (int q = 0; q < 3; q++) {
    if (!ran[q]) continue;
    printf("  %-9s %3d trials:", fc_policy_names[q], ran[q]);
    for (int o = 0; o < FC_NOUTCOMES; o++)
      if (mix_[q][o]) printf(" %s %d,", fc_outcome_names[o], mix_[q][o]);
    printf(" ranks excluded %d\n", excl[q]);
  }
  if (nrun)
    printf("  time per trial: mean %.1f s, max %.1f s\n", secs_sum / nrun,
           secs_max);
  if (!keep) rmdir(logdir); /* only when empty */
  return bad_trials ? 1 : 0;
}
