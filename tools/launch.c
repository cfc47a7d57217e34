/*
 * launch: starts a seed and N workers, supervises them and forwards their
 * output. See launch.h for the contract; this file explains the mechanics.
 *
 * The supervisor is a single-threaded loop: poll() over every capture pipe
 * (and the seed's report pipe) with a short tick, then waitpid(WNOHANG) on
 * each child, then the deadline and escalation checks. Polling waitpid on a
 * tick instead of using SIGCHLD keeps the caller's signal dispositions
 * untouched; the tick bounds how late an exit is noticed. Reading every pipe
 * in the same poll() means no child can block on a full pipe while the
 * launcher waits on another, so forwarding cannot deadlock.
 */
#include "launch.h"
#include "launch_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster/inspect.h"
#include "nexar.h"

/* After SIGKILL, how long a child may take to be reaped before it is given
 * up as LAUNCH_PROC_LOST (a process stuck in the kernel). */
#define LOST_AFTER_KILL_MS 5000
/* How long the inspection of a timed-out job may take. */
#define LAUNCH_INSPECT_MS 3000

static long long mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Child |i| of the launch: the workers, then the seed at index nprocs. */
static launch_proc_t *proc_at(nexar_launch_t *l, int i) {
  return i < l->nprocs ? &l->procs[i] : &l->seed;
}

static void set_error(nexar_launch_t *l, const char *what, int err) {
  if (err)
    snprintf(l->error, sizeof l->error, "%s: %s", what, strerror(err));
  else
    snprintf(l->error, sizeof l->error, "%s", what);
}

int launch_secret(char out[LAUNCH_SECRET_LEN + 1]) {
  static const char hex[] = "0123456789abcdef";
  unsigned char raw[LAUNCH_SECRET_LEN / 2];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof raw; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[LAUNCH_SECRET_LEN] = '\0';
  explicit_bzero(raw, sizeof raw);
  return 0;
}

/* ------------------------------------------------------------------ */
/* Child side. Everything here runs between fork() and exec() or exit() in a
 * copy of a single-threaded parent, so plain libc calls are safe. */

/* Applies "K=V\nK=V" (a bare "K" unsets K). */
static void apply_env(const char *env) {
  const char *p = env;
  while (p && *p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    if (n > 0) {
      char *kv = strndup(p, n);
      if (kv) {
        char *eq = strchr(kv, '=');
        if (eq) {
          *eq = '\0';
          setenv(kv, eq + 1, 1);
        } else {
          unsetenv(kv);
        }
        free(kv);
      }
    }
    p += n;
    if (*p == '\n') p++;
  }
}

/* Common set-up of every child: own process group (so the launcher can stop
 * it with everything it started), death with the launcher, default signal
 * state, stdin on /dev/null, none of the launcher's pipes. */
static void child_setup(nexar_launch_t *l, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1); /* the launcher died before prctl */
  for (int sig = 1; sig < 32; sig++) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) {
    if (devnull != 0) {
      dup2(devnull, 0);
      close(devnull);
    }
  }
  if (l->seed_ctl >= 0) close(l->seed_ctl);
  for (int i = 0; i <= l->nprocs; i++) {
    launch_proc_t *p = proc_at(l, i);
    struct launch_stream *ss[2] = {p->out, p->err};
    for (int k = 0; k < 2; k++) {
      if (ss[k] && ss[k]->fd >= 0) {
        close(ss[k]->fd);
        ss[k]->fd = -1;
      }
    }
  }
}

/* In the child: points stdout and stderr at the capture pipes, if any. */
static void child_redirect(int outw, int errw) {
  if (outw < 0) return;
  dup2(outw, 1);
  dup2(errw, 2);
  close(outw);
  close(errw);
}

/* Writes a report line to the seed's pipe: "P <port>" or "R <code> <msg>".
 * Newlines in the message are flattened so that one report is one line. */
static void seed_say(int fd, char kind, int value, const char *msg) {
  char line[900];
  int n =
      snprintf(line, sizeof line - 1, "%c %d %s", kind, value, msg ? msg : "");
  if (n < 0) return;
  if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
  for (int i = 0; i < n; i++)
    if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
  line[n++] = '\n';
  for (int off = 0; off < n;) {
    ssize_t w = write(fd, line + off, (size_t)(n - off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += (int)w;
  }
}

static void seed_child(nexar_launch_t *l, int ctl, int outw, int errw,
                       pid_t parent) {
  child_setup(l, parent);
  child_redirect(outw, errw);
  unsetenv("NEXAR_SECRET_FILE");
  apply_env(l->opts.env);
  nexar_seed_config_t cfg = NEXAR_SEED_CONFIG_INIT;
  cfg.listen_addr = "127.0.0.1:0";
  cfg.secret = l->secret;
  cfg.world_size = l->opts.world_size;
  if (l->opts.seed_timeout_ms > 0) cfg.timeout_ms = l->opts.seed_timeout_ms;
  if (l->opts.max_world_size > 0) cfg.max_world_size = l->opts.max_world_size;
  /* SIGTERM stays with this thread (the seed's inherits the mask): until
   * formation it ends the seed as always, after it an elastic seed takes
   * it with sigwait and stops cleanly. */
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, NULL);
  nexar_seed_t *seed = NULL;
  int rc = nexar_seed_start(&cfg, &seed);
  pthread_sigmask(SIG_UNBLOCK, &term, NULL);
  if (rc != NEXAR_OK) {
    char msg[600];
    const char *detail = nexar_last_error();
    snprintf(msg, sizeof msg, "%s%s%s", nexar_strerror(rc),
             detail && *detail ? ": " : "", detail ? detail : "");
    seed_say(ctl, 'R', rc, msg);
    exit(1);
  }
  seed_say(ctl, 'P', nexar_seed_port(seed), "");
  rc = nexar_seed_wait(seed, -1);
  if (rc == NEXAR_OK) {
    seed_say(ctl, 'R', rc, "");
    /* The seed stays up until the launcher stops it (SIGTERM once every
     * worker has ended): an elastic one admits joiners, and every one
     * answers nexar-inspect and the table a timeout prints. */
    {
      int sig;
      pthread_sigmask(SIG_BLOCK, &term, NULL);
      sigwait(&term, &sig);
    }
  } else {
    const char *detail = nexar_seed_last_error(seed);
    seed_say(ctl, 'R', rc, detail && *detail ? detail : nexar_strerror(rc));
  }
  nexar_seed_stop(seed);
  close(ctl);
  exit(rc == NEXAR_OK ? 0 : 1);
}

static void worker_child(nexar_launch_t *l, int index, int outw, int errw,
                         pid_t parent) {
  child_setup(l, parent);
  child_redirect(outw, errw);
  char buf[64];
  if (!l->opts.no_seed) {
    snprintf(buf, sizeof buf, "127.0.0.1:%d", l->seed_port);
    setenv("NEXAR_SEED", buf, 1);
  }
  setenv("NEXAR_SECRET", l->secret, 1);
  /* The secret is given in NEXAR_SECRET; an inherited file would compete. */
  unsetenv("NEXAR_SECRET_FILE");
  snprintf(buf, sizeof buf, "%d", l->opts.world_size);
  setenv("NEXAR_WORLD_SIZE", buf, 1);
  if (l->opts.no_rank) {
    unsetenv("NEXAR_RANK");
    unsetenv("NEXAR_LOCAL_RANK");
    unsetenv("NEXAR_LOCAL_SIZE");
  } else {
    /* All on this host: the local rank is the rank (nexar_local_rank). */
    snprintf(buf, sizeof buf, "%d", index);
    setenv("NEXAR_RANK", buf, 1);
    setenv("NEXAR_LOCAL_RANK", buf, 1);
    snprintf(buf, sizeof buf, "%d", l->opts.nprocs);
    setenv("NEXAR_LOCAL_SIZE", buf, 1);
  }
  apply_env(l->opts.env);
  if (l->opts.argv) {
    execvp(l->opts.argv[0], l->opts.argv);
    int err = errno;
    fprintf(stderr, "%s: cannot run '%s': %s\n", program_invocation_short_name,
            l->opts.argv[0], strerror(err));
    _exit(err == ENOENT ? 127 : 126);
  }
  int rc = l->opts.fn(index, l->opts.fn_arg);
  fflush(NULL);
  /* exit(), not _exit(), so that atexit handlers and the sanitizers' leak
   * check run in the worker; the parent flushed stdio before fork, so no
   * inherited buffer is written twice. */
  exit(rc >= 0 && rc <= 255 ? rc : 1);
}

/* ------------------------------------------------------------------ */
/* Parent side. */

/* Sends |sig| to the process group of |p| (falling back to the process in
 * case its setpgid has not happened). */
static void signal_proc(launch_proc_t *p, int sig) {
  if (p->state != LAUNCH_PROC_RUNNING || p->pid <= 0) return;
  if (kill(-p->pid, sig) < 0) kill(p->pid, sig);
}

void launch_kill(nexar_launch_t *l, int sig) {
  long long now = mono_ms();
  for (int i = 0; i <= l->nprocs; i++) {
    launch_proc_t *p = proc_at(l, i);
    if (p->state != LAUNCH_PROC_RUNNING) continue;
    signal_proc(p, sig);
    p->stopped = 1;
    if (!p->term_at) p->term_at = now;
    if (sig == SIGKILL) p->killed = 1;
  }
}

/* Parses complete lines the seed has reported so far. */
static void seed_parse(nexar_launch_t *l) {
  char *line = l->seed_buf;
  char *end = l->seed_buf + l->seed_len;
  for (;;) {
    char *nl = memchr(line, '\n', (size_t)(end - line));
    if (!nl) break;
    *nl = '\0';
    if (line[0] == 'P') {
      l->seed_port = atoi(line + 1);
    } else if (line[0] == 'R') {
      char *msg = NULL;
      l->seed_code = (int)strtol(line + 1, &msg, 10);
      if (msg && *msg == ' ') msg++;
      snprintf(l->seed_error, sizeof l->seed_error, "%s", msg ? msg : "");
      l->seed_state =
          l->seed_code == NEXAR_OK ? LAUNCH_SEED_FORMED : LAUNCH_SEED_FAILED;
    }
    line = nl + 1;
  }
  size_t rest = (size_t)(end - line);
  memmove(l->seed_buf, line, rest);
  l->seed_len = rest;
}

/* Reads what the seed has written; closes the pipe at EOF. */
static void seed_read(nexar_launch_t *l) {
  while (l->seed_ctl >= 0) {
    if (l->seed_len >= sizeof l->seed_buf - 1) l->seed_len = 0; /* garbage */
    ssize_t n = read(l->seed_ctl, l->seed_buf + l->seed_len,
                     sizeof l->seed_buf - 1 - l->seed_len);
    if (n > 0) {
      l->seed_len += (size_t)n;
      seed_parse(l);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      close(l->seed_ctl);
      l->seed_ctl = -1;
    }
  }
}

/* Capture pipes of one child: out[0]/err[0] are read by the launcher,
 * out[1]/err[1] become the child's stdout/stderr. */
typedef struct child_pipes {
  int out[2], err[2];
} child_pipes_t;

static void pipes_close(child_pipes_t *cp) {
  for (int k = 0; k < 2; k++) {
    if (cp->out[k] >= 0) close(cp->out[k]);
    if (cp->err[k] >= 0) close(cp->err[k]);
    cp->out[k] = cp->err[k] = -1;
  }
}

/* Creates the capture pipes when opts.capture is set. Returns 0 or -1. */
static int pipes_open(nexar_launch_t *l, child_pipes_t *cp) {
  cp->out[0] = cp->out[1] = cp->err[0] = cp->err[1] = -1;
  if (!l->opts.capture) return 0;
  if (pipe2(cp->out, O_CLOEXEC) < 0 || pipe2(cp->err, O_CLOEXEC) < 0) {
    set_error(l, "pipe", errno);
    pipes_close(cp);
    return -1;
  }
  return 0;
}

/* In the parent after fork: keeps the read ends as |p|'s streams. */
static void pipes_attach(nexar_launch_t *l, launch_proc_t *p, child_pipes_t *cp,
                         const char *prefix) {
  if (cp->out[0] < 0) return;
  close(cp->out[1]);
  close(cp->err[1]);
  const char *pre = l->opts.no_prefix ? "" : prefix;
  p->out = launch_stream_new(cp->out[0], 1, pre);
  p->err = launch_stream_new(cp->err[0], 2, pre);
  /* Without memory for a stream the child keeps running unforwarded;
   * closing the read end would only make it die of SIGPIPE, so leak it. */
}

/* Forks the seed and waits until it reports its port. */
static int start_seed(nexar_launch_t *l, pid_t parent) {
  int fds[2];
  child_pipes_t cp;
  if (pipes_open(l, &cp) < 0) return -1;
  if (pipe2(fds, O_CLOEXEC) < 0) {
    set_error(l, "pipe", errno);
    pipes_close(&cp);
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    set_error(l, "fork (seed)", errno);
    close(fds[0]);
    close(fds[1]);
    pipes_close(&cp);
    return -1;
  }
  if (pid == 0) {
    close(fds[0]);
    if (cp.out[0] >= 0) {
      close(cp.out[0]);
      close(cp.err[0]);
    }
    seed_child(l, fds[1], cp.out[1], cp.err[1], parent);
  }
  setpgid(pid, pid); /* also done by the child; whichever runs first wins */
  close(fds[1]);
  l->seed.pid = pid;
  l->seed.state = LAUNCH_PROC_RUNNING;
  l->seed_state = LAUNCH_SEED_RUNNING;
  l->seed_ctl = fds[0];
  fcntl(l->seed_ctl, F_SETFL, O_NONBLOCK);
  pipes_attach(l, &l->seed, &cp, "[seed] ");

  long long limit = mono_ms() + LAUNCH_SEED_START_MS;
  while (l->seed_port == 0 && l->seed_state == LAUNCH_SEED_RUNNING &&
         l->seed_ctl >= 0) {
    long long left = limit - mono_ms();
    if (left <= 0) break;
    struct pollfd p[3] = {{.fd = l->seed_ctl, .events = POLLIN}};
    nfds_t n = 1;
    /* Forward what the seed prints meanwhile, so it cannot block on a full
     * pipe before it reports. */
    if (l->seed.out && l->seed.out->fd >= 0)
      p[n++] = (struct pollfd){.fd = l->seed.out->fd, .events = POLLIN};
    if (l->seed.err && l->seed.err->fd >= 0)
      p[n++] = (struct pollfd){.fd = l->seed.err->fd, .events = POLLIN};
    if (poll(p, n, (int)left) < 0 && errno != EINTR) break;
    if (l->seed.out) launch_stream_read(l->seed.out, READ_BUDGET);
    if (l->seed.err) launch_stream_read(l->seed.err, READ_BUDGET);
    seed_read(l);
  }
  if (l->seed_port > 0) return 0;
  if (l->seed_state == LAUNCH_SEED_FAILED) {
    snprintf(l->error, sizeof l->error, "the seed could not start: %s",
             l->seed_error);
  } else if (l->seed_ctl < 0) {
    snprintf(l->seed_error, sizeof l->seed_error,
             "the seed process died before reporting its port");
    snprintf(l->error, sizeof l->error, "%s", l->seed_error);
  } else {
    snprintf(l->seed_error, sizeof l->seed_error,
             "the seed did not report its port within %d ms",
             LAUNCH_SEED_START_MS);
    snprintf(l->error, sizeof l->error, "%s", l->seed_error);
  }
  l->seed_state = LAUNCH_SEED_FAILED;
  return -1;
}

static int start_worker(nexar_launch_t *l, int index, pid_t parent) {
  launch_proc_t *p = &l->procs[index];
  child_pipes_t cp;
  if (pipes_open(l, &cp) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    set_error(l, "fork (worker)", errno);
    pipes_close(&cp);
    return -1;
  }
  if (pid == 0) {
    if (cp.out[0] >= 0) {
      close(cp.out[0]);
      close(cp.err[0]);
    }
    worker_child(l, index, cp.out[1], cp.err[1], parent);
  }
  setpgid(pid, pid);
  p->pid = pid;
  p->state = LAUNCH_PROC_RUNNING;
  char prefix[24];
  snprintf(prefix, sizeof prefix, "[%d] ", index);
  pipes_attach(l, p, &cp, prefix);
  return 0;
}

/* Kills and reaps everything started so far (launch_start's error path and
 * launch_free). Bounded: gives up on a child after LOST_AFTER_KILL_MS. */
static void kill_and_reap_all(nexar_launch_t *l) {
  launch_kill(l, SIGKILL);
  long long limit = mono_ms() + LOST_AFTER_KILL_MS;
  for (int i = 0; i <= l->nprocs; i++) {
    launch_proc_t *p = proc_at(l, i);
    while (p->state == LAUNCH_PROC_RUNNING) {
      int st;
      pid_t r = waitpid(p->pid, &st, WNOHANG);
      if (r == p->pid) {
        p->state = WIFSIGNALED(st) ? LAUNCH_PROC_SIGNALED : LAUNCH_PROC_EXITED;
        p->code = WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
      } else if ((r < 0 && errno != EINTR) || mono_ms() >= limit) {
        p->state = LAUNCH_PROC_LOST;
      } else {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
      }
    }
  }
}

int launch_start(nexar_launch_t *l, const nexar_launch_opts_t *opts) {
  memset(l, 0, sizeof *l);
  l->seed_ctl = -1;
  l->first_failed = -1;
  l->outcome = LAUNCH_ERROR;
  if (!opts || opts->nprocs < 1) {
    set_error(l, "the number of workers must be at least 1", 0);
    return -1;
  }
  if ((!opts->argv || !opts->argv[0]) && !opts->fn) {
    set_error(l, "neither a program nor a function to run", 0);
    return -1;
  }
  l->opts = *opts;
  if (l->opts.argv && !l->opts.argv[0]) l->opts.argv = NULL;
  if (l->opts.world_size == 0) l->opts.world_size = opts->nprocs;
  if (l->opts.world_size < 0) {
    set_error(l, "the world size must not be negative", 0);
    return -1;
  }
  if (l->opts.grace_ms <= 0) l->opts.grace_ms = LAUNCH_DEFAULT_GRACE_MS;
  if (l->opts.seed_grace_ms <= 0)
    l->opts.seed_grace_ms = LAUNCH_DEFAULT_SEED_GRACE_MS;
  l->nprocs = opts->nprocs;
  l->procs = calloc((size_t)l->nprocs, sizeof *l->procs);
  if (!l->procs) {
    l->nprocs = 0;
    set_error(l, "out of memory", 0);
    return -1;
  }
  if (launch_secret(l->secret) < 0) {
    set_error(l, "getrandom", errno);
    return -1;
  }
  l->t0_ms = mono_ms();
  /* Children inherit unflushed stdio buffers; flush them so that nothing is
   * written twice. */
  fflush(NULL);
  pid_t parent = getpid();
  int ok = l->opts.no_seed || start_seed(l, parent) == 0;
  for (int i = 0; ok && i < l->nprocs; i++)
    ok = start_worker(l, i, parent) == 0;
  if (!ok) {
    kill_and_reap_all(l);
    return -1;
  }
  l->started = 1;
  l->outcome = LAUNCH_OK;
  return 0;
}

/* Records the end of |p| from a waitpid status. */
static void proc_ended(nexar_launch_t *l, launch_proc_t *p, int st,
                       long long now) {
  if (WIFSIGNALED(st)) {
    p->state = LAUNCH_PROC_SIGNALED;
    p->code = WTERMSIG(st);
  } else {
    p->state = LAUNCH_PROC_EXITED;
    p->code = WEXITSTATUS(st);
  }
  p->end_ms = now - l->t0_ms;
  /* What the child wrote before it died is in the pipe: forward it. Then
   * close, even if a grandchild still holds the write end. */
  if (p->out) {
    launch_stream_read(p->out, LINE_MAX_BYTES);
    launch_stream_close(p->out);
  }
  if (p->err) {
    launch_stream_read(p->err, LINE_MAX_BYTES);
    launch_stream_close(p->err);
  }
}

/* Reaps |p| if it has ended. Returns 1 when it ended now. */
static int reap(nexar_launch_t *l, launch_proc_t *p, long long now) {
  if (p->state != LAUNCH_PROC_RUNNING) return 0;
  int st;
  pid_t r = waitpid(p->pid, &st, WNOHANG);
  if (r == 0 || (r < 0 && errno == EINTR)) return 0;
  if (r < 0) {
    /* Someone else reaped it (ECHILD): its status is unknown. */
    p->state = LAUNCH_PROC_LOST;
    p->end_ms = now - l->t0_ms;
    return 1;
  }
  proc_ended(l, p, st, now);
  return 1;
}

static void seed_ended(nexar_launch_t *l) {
  seed_read(l); /* the final report may still be in the pipe */
  if (l->seed_ctl >= 0) {
    close(l->seed_ctl);
    l->seed_ctl = -1;
  }
  if (l->seed_state != LAUNCH_SEED_RUNNING) return; /* it reported */
  if (l->seed.stopped) {
    l->seed_state = LAUNCH_SEED_STOPPED;
    return;
  }
  l->seed_state = LAUNCH_SEED_FAILED;
  l->seed_code = NEXAR_ERR_INTERNAL;
  if (l->seed.state == LAUNCH_PROC_SIGNALED)
    snprintf(l->seed_error, sizeof l->seed_error,
             "the seed process was killed by signal %d (%s)", l->seed.code,
             strsignal(l->seed.code));
  else
    snprintf(l->seed_error, sizeof l->seed_error,
             "the seed process ended (status %d) without a report",
             l->seed.code);
}

/* The job timed out: before the ranks are stopped, print to stderr what
 * each is doing (live inspection through the seed, docs/debugging.md). */
static void inspect_hung(nexar_launch_t *l) {
  if (l->seed_port <= 0 || l->seed.state != LAUNCH_PROC_RUNNING) return;
  char seed[32], err[512];
  snprintf(seed, sizeof seed, "127.0.0.1:%d", l->seed_port);
  nexar__inspect_opts_t o = {seed, l->secret, NULL, LAUNCH_INSPECT_MS, 0};
  fprintf(stderr,
          "nexar-run: timed out after %d ms; what the ranks are doing:\n",
          l->opts.timeout_ms);
  if (nexar__inspect(&o, stderr, err, sizeof err) < 0)
    fprintf(stderr, "nexar-run: no inspection: %s\n", err);
}

/* Starts stopping everything for |why| unless already stopping. */
static void begin_stop(nexar_launch_t *l, launch_outcome_t why) {
  if (l->outcome != LAUNCH_OK) return;
  l->outcome = why;
  launch_kill(l, SIGTERM);
}

/* SIGKILL after the grace period; give up after LOST_AFTER_KILL_MS more. */
static void escalate(nexar_launch_t *l, launch_proc_t *p, long long now) {
  if (p->state != LAUNCH_PROC_RUNNING || !p->term_at) return;
  if (!p->killed && now - p->term_at >= l->opts.grace_ms) {
    signal_proc(p, SIGKILL);
    p->killed = 1;
  }
  if (p->killed && now - p->term_at >= l->opts.grace_ms + LOST_AFTER_KILL_MS) {
    p->state = LAUNCH_PROC_LOST;
    p->end_ms = now - l->t0_ms;
  }
}

launch_outcome_t launch_wait(nexar_launch_t *l) {
  if (!l->started) return l->outcome;
  int nfds_max = 2 * (l->nprocs + 1) + 1;
  struct pollfd *pfds = calloc((size_t)nfds_max, sizeof *pfds);
  struct launch_stream **owner = calloc((size_t)nfds_max, sizeof *owner);
  long long deadline =
      l->opts.timeout_ms > 0 ? l->t0_ms + l->opts.timeout_ms : 0;

  for (;;) {
    long long now = mono_ms();
    int running = 0;
    for (int i = 0; i < l->nprocs; i++) {
      launch_proc_t *p = &l->procs[i];
      if (reap(l, p, now) && !p->stopped && l->first_failed < 0 &&
          !(p->state == LAUNCH_PROC_EXITED && p->code == 0) &&
          !(l->opts.tolerate_kill && p->state == LAUNCH_PROC_SIGNALED &&
            p->code == SIGKILL))
        l->first_failed = i;
      if (p->state == LAUNCH_PROC_RUNNING) running++;
    }
    if (reap(l, &l->seed, now)) seed_ended(l);

    if (l->outcome == LAUNCH_OK) {
      if (l->opts.interrupt && *l->opts.interrupt) {
        l->interrupt_sig = *l->opts.interrupt;
        begin_stop(l, LAUNCH_INTERRUPTED);
      } else if (l->first_failed >= 0) {
        begin_stop(l, LAUNCH_WORKER_FAILED);
      } else if (deadline && now >= deadline && running > 0) {
        for (int i = 0; i < l->nprocs; i++)
          if (l->procs[i].state == LAUNCH_PROC_RUNNING)
            l->procs[i].at_deadline = 1;
        inspect_hung(l);
        begin_stop(l, LAUNCH_TIMED_OUT);
      }
    }
    if (running == 0) {
      if (!l->workers_done_ms) l->workers_done_ms = now;
      /* The seed has had its chance to report; a seed whose workers never
       * joined would otherwise wait for its whole formation deadline, and
       * one that has reported (an elastic seed stays up) is not needed. */
      if (l->seed.state == LAUNCH_PROC_RUNNING && !l->seed.term_at &&
          (l->seed_state != LAUNCH_SEED_RUNNING ||
           now - l->workers_done_ms >= l->opts.seed_grace_ms)) {
        signal_proc(&l->seed, SIGTERM);
        l->seed.stopped = 1;
        l->seed.term_at = now;
      }
    }
    for (int i = 0; i < l->nprocs; i++) escalate(l, &l->procs[i], now);
    escalate(l, &l->seed, now);
    if (l->seed.state == LAUNCH_PROC_LOST &&
        l->seed_state == LAUNCH_SEED_RUNNING)
      seed_ended(l);
    if (running == 0 && l->seed.state != LAUNCH_PROC_RUNNING) break;

    int n = 0;
    for (int i = 0; pfds && owner && i <= l->nprocs; i++) {
      launch_proc_t *p = proc_at(l, i);
      struct launch_stream *ss[2] = {p->out, p->err};
      for (int k = 0; k < 2; k++) {
        if (!ss[k] || ss[k]->fd < 0) continue;
        pfds[n] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
        owner[n++] = ss[k];
      }
    }
    if (pfds && owner && l->seed_ctl >= 0) {
      pfds[n] = (struct pollfd){.fd = l->seed_ctl, .events = POLLIN};
      owner[n++] = NULL;
    }
    int timeout = TICK_MS;
    if (deadline && l->outcome == LAUNCH_OK && running > 0 &&
        deadline - now < timeout)
      timeout = deadline - now > 0 ? (int)(deadline - now) : 0;
    int ready = n > 0 ? poll(pfds, (nfds_t)n, timeout) : 0;
    if (n == 0) {
      struct timespec ts = {0, (long)timeout * 1000000};
      nanosleep(&ts, NULL); /* EINTR just ends the tick early */
    }
    for (int j = 0; ready > 0 && j < n; j++) {
      if (!pfds[j].revents) continue;
      if (owner[j])
        launch_stream_read(owner[j], READ_BUDGET);
      else
        seed_read(l);
    }
  }

  for (int i = 0; i <= l->nprocs; i++) {
    launch_stream_close(proc_at(l, i)->out);
    launch_stream_close(proc_at(l, i)->err);
  }
  if (l->seed_ctl >= 0) seed_ended(l);
  free(pfds);
  free(owner);
  return l->outcome;
}

void launch_free(nexar_launch_t *l) {
  int any = 0;
  for (int i = 0; i < l->nprocs; i++)
    any |= l->procs[i].state == LAUNCH_PROC_RUNNING;
  if (any || l->seed.state == LAUNCH_PROC_RUNNING) kill_and_reap_all(l);
  for (int i = 0; i <= l->nprocs; i++) {
    launch_proc_t *p = proc_at(l, i);
    launch_stream_free(p->out);
    launch_stream_free(p->err);
    p->out = p->err = NULL;
  }
  free(l->procs);
  l->procs = NULL;
  l->nprocs = 0;
  if (l->seed_ctl >= 0) close(l->seed_ctl);
  l->seed_ctl = -1;
  explicit_bzero(l->secret, sizeof l->secret);
  l->started = 0;
}
