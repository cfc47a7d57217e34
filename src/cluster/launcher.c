/*
 * Launchers (docs/launching.md): each one is read into a view (rank, world
 * size, local rank and size, rendezvous host and port, the variables it
 * came from); the first present in the order PMIx, Open MPI, torchrun,
 * Slurm, Kubernetes is used, unless NEXAR_LAUNCHER names one. Explicit
 * NEXAR_* settings win over what a launcher says. Every check runs before
 * any traffic but name resolution, and no message carries the secret.
 */
#include "cluster/launcher.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/cluster.h"

#define MAX_RANK ((1 << 20) - 1)

typedef struct view {
  const char *name;
  int rank, size, local_rank, local_size;
  bool one_host;
  char host[256];        /* rendezvous host ("": none named) */
  const char *host_from; /* the variables the host came from */
  int port;              /* 0: none */
  const char *port_from;
  int retry_ms; /* name resolution retried this long */
  char vars[200];
  const char *no_host; /* how to name a rendezvous where none is */
  const char *secret_hint;
} view_t;

static int bad(char *err, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return NEXAR_ERR_INVALID_ARG;
}

/* Reads the decimal variable |name| in [lo, hi]: 1 read, 0 unset, or
 * NEXAR_ERR_INVALID_ARG naming it and its value. */
static int env_i64(const char *name, int64_t lo, int64_t hi, int64_t *out,
                   char *err, size_t n) {
  const char *s = getenv(name);
  if (!s) return 0;
  int rc = *s ? nexar__parse_dec(s, lo, hi, out) : NEXAR__DEC_SYNTAX;
  if (rc < 0) {
    nexar__parse_dec_error(rc, name, s, lo, hi, err, n);
    return NEXAR_ERR_INVALID_ARG;
  }
  return 1;
}

static int env_int(const char *name, int lo, int hi, int *out, char *err,
                   size_t n) {
  int64_t v;
  int rc = env_i64(name, lo, hi, &v, err, n);
  if (rc == 1) *out = (int)v;
  return rc;
}

static void add_var(view_t *v, const char *name) {
  const char *s = getenv(name);
  size_t o = strlen(v->vars);
  if (s && o < sizeof(v->vars))
    snprintf(v->vars + o, sizeof(v->vars) - o, "%s%s=%.40s", o ? " " : "", name,
             s);
}

/* A rank variable and the size variable that must come with it (|who|
 * sets both): 1 both set and consistent, 0 neither, or an error. */
static int read_pair(view_t *v, const char *rvar, const char *svar, bool local,
                     const char *who, char *err, size_t n) {
  int r = -1, s = 0;
  int hr = env_int(rvar, 0, MAX_RANK, &r, err, n);
  if (hr < 0) return hr;
  int hs = env_int(svar, 1, MAX_RANK + 1, &s, err, n);
  if (hs < 0) return hs;
  if (!hr && !hs) return 0;
  if (hr != hs)
    return bad(err, n,
               "%s='%.40s' is set but %s is not: %s sets both (set the "
               "missing one, unset the other, or choose another launcher "
               "with NEXAR_LAUNCHER)",
               hr ? rvar : svar, getenv(hr ? rvar : svar), hr ? svar : rvar,
               who);
  if (r >= s)
    return bad(err, n, "%s=%d is not below %s=%d (ranks are 0 .. %d)", rvar, r,
               svar, s, s - 1);
  if (local) {
    v->local_rank = r;
    v->local_size = s;
  } else {
    v->rank = r;
    v->size = s;
  }
  add_var(v, rvar);
  add_var(v, svar);
  return 1;
}

/* The world and local pairs of Open MPI (|pre| "OMPI_COMM_WORLD_": RANK,
 * SIZE, LOCAL_RANK, LOCAL_SIZE) or torchrun (|pre| "": RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE). */
static int read_world(view_t *v, const char *pre, const char *who, char *err,
                      size_t n) {
  bool ompi = *pre != 0;
  char r[64], s[64], lr[64], ls[64];
  snprintf(r, sizeof(r), "%sRANK", pre);
  snprintf(s, sizeof(s), "%s%s", pre, ompi ? "SIZE" : "WORLD_SIZE");
  snprintf(lr, sizeof(lr), "%sLOCAL_RANK", pre);
  snprintf(ls, sizeof(ls), "%s%s", pre,
           ompi ? "LOCAL_SIZE" : "LOCAL_WORLD_SIZE");
  int rc = read_pair(v, r, s, false, who, err, n);
  if (rc <= 0) return rc;
  rc = read_pair(v, lr, ls, true, who, err, n);
  if (rc < 0) return rc;
  v->one_host = v->local_size == v->size;
  return 1;
}

/* A rendezvous host and port variable that go together. */
static int read_addr(view_t *v, const char *hvar, const char *pvar,
                     const char *who, char *err, size_t n) {
  const char *h = getenv(hvar);
  int hp = env_int(pvar, 1, 65535, &v->port, err, n);
  if (hp < 0) return hp;
  if (!h && !hp) return 0;
  if (!h || !hp || !*h)
    return bad(err, n, "%s='%.64s' but %s='%.64s': %s sets both", hvar,
               h ? h : "(unset)", pvar, hp ? getenv(pvar) : "(unset)", who);
  snprintf(v->host, sizeof(v->host), "%s", h);
  v->host_from = hvar;
  v->port_from = pvar;
  add_var(v, hvar);
  add_var(v, pvar);
  return 1;
}

/* A port derived from a job identity, below the usual ephemeral range, so
 * that two jobs on one host rarely meet (NEXAR_PORT settles it). */
static int derived_port(uint64_t h) {
  return 20000 + (int)(h % 12000u);
}

static int view_ompi(view_t *v, const nexar__params_t *p, char *err, size_t n) {
  (void)p;
  int rc = read_world(v, "OMPI_COMM_WORLD_", "Open MPI's mpirun", err, n);
  if (rc <= 0) return rc;
  const char *job = getenv("PMIX_NAMESPACE");
  if (job) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = job; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
    v->port = derived_port(h);
    v->port_from = "PMIX_NAMESPACE";
  }
  v->no_host =
      "Open MPI's variables name no rendezvous host for a job on several "
      "hosts: let nexar use mpirun's PMIx server (libpmix)";
  v->secret_hint =
      "export NEXAR_SECRET_FILE=/path/to/secret (on every host) and pass it "
      "with mpirun -x NEXAR_SECRET_FILE";
  return 1;
}

static int view_torchrun(view_t *v, const nexar__params_t *p, char *err,
                         size_t n) {
  (void)p;
  const char *who = "torchrun (torch's env:// rendezvous)";
  int rc = read_world(v, "", who, err, n);
  if (rc <= 0) return rc;
  rc = read_addr(v, "MASTER_ADDR", "MASTER_PORT", who, err, n);
  if (rc < 0) return rc;
  v->no_host = "set MASTER_ADDR and MASTER_PORT (rank 0's host and a port)";
  v->secret_hint =
      "give every node the same secret, e.g. NEXAR_SECRET_FILE=/path on a "
      "shared file system, in the environment torchrun passes on";
  return 1;
}

static int view_slurm(view_t *v, const nexar__params_t *p, char *err,
                      size_t n) {
  (void)p;
  int rc = read_pair(v, "SLURM_PROCID", "SLURM_NTASKS", false, "srun", err, n);
  if (rc <= 0) return rc;
  rc = env_int("SLURM_LOCALID", 0, MAX_RANK, &v->local_rank, err, n);
  if (rc < 0) return rc;
  add_var(v, "SLURM_LOCALID");
  const char *nv = getenv("SLURM_STEP_NUM_NODES") ? "SLURM_STEP_NUM_NODES"
                                                  : "SLURM_JOB_NUM_NODES";
  int nodes = 0;
  if ((rc = env_int(nv, 1, MAX_RANK + 1, &nodes, err, n)) < 0) return rc;
  if (nodes == 1) {
    v->one_host = true;
    v->local_size = v->size;
  }
  const char *lv = getenv("SLURM_STEP_NODELIST")  ? "SLURM_STEP_NODELIST"
                   : getenv("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST"
                                                  : NULL;
  if (lv) {
    char why[160];
    if (nexar__slurm_first_host(getenv(lv), v->host, sizeof(v->host), why,
                                sizeof(why)) < 0)
      return bad(err, n, "%s='%.100s' is not a Slurm node list: %s", lv,
                 getenv(lv), why);
    v->host_from = lv;
    add_var(v, lv);
  }
  int64_t job, step;
  const char *sv = getenv("SLURM_STEP_ID") ? "SLURM_STEP_ID" : "SLURM_STEPID";
  int hj = env_i64("SLURM_JOB_ID", 0, INT64_MAX, &job, err, n);
  if (hj < 0) return hj;
  int hs = env_i64(sv, 0, INT64_MAX, &step, err, n);
  if (hs < 0) return hs;
  if (hj && hs) {
    v->port = derived_port((uint64_t)job * 31u + (uint64_t)step);
    v->port_from = "SLURM_JOB_ID and SLURM_STEP_ID";
    add_var(v, "SLURM_JOB_ID");
    add_var(v, sv);
  }
  v->no_host = "run it with srun, which sets SLURM_STEP_NODELIST";
  v->secret_hint =
      "write a secret to a file in a directory every node of the job shares "
      "(head -c 32 /dev/urandom | base64 > ~/.nexar-secret; chmod 600 "
      "~/.nexar-secret) and export NEXAR_SECRET_FILE=~/.nexar-secret before "
      "srun";
  return 1;
}

static int view_k8s(view_t *v, const nexar__params_t *p, char *err, size_t n) {
  int rc = env_int("JOB_COMPLETION_INDEX", 0, MAX_RANK, &v->rank, err, n);
  if (rc <= 0) return rc;
  add_var(v, "JOB_COMPLETION_INDEX");
  if (!p->world_size)
    return bad(err, n,
               "JOB_COMPLETION_INDEX=%d is set (a Kubernetes Indexed Job) but "
               "NEXAR_WORLD_SIZE is not: set it to the Job's completions in "
               "the pod template",
               v->rank);
  v->size = (int)p->world_size;
  if (v->rank >= v->size)
    return bad(err, n,
               "JOB_COMPLETION_INDEX=%d is not below NEXAR_WORLD_SIZE=%d "
               "(ranks are 0 .. %d)",
               v->rank, v->size, v->size - 1);
  if (p->k8s_service) {
    /* Pod i of Job J is host J-i; under the headless Service S pod 0 is
     * J-0.S. */
    char hn[256] = "", idx[16];
    const char *h = getenv("HOSTNAME");
    if (h)
      snprintf(hn, sizeof(hn), "%s", h);
    else
      gethostname(hn, sizeof(hn) - 1);
    snprintf(idx, sizeof(idx), "-%d", v->rank);
    size_t hl = strlen(hn), il = strlen(idx);
    if (hl <= il || strcmp(hn + hl - il, idx))
      return bad(err, n,
                 "HOSTNAME='%.64s' does not end in '%s' (JOB_COMPLETION_INDEX="
                 "%d): an Indexed Job's pod is named <job>-<index>",
                 hn, idx, v->rank);
    snprintf(v->host, sizeof(v->host), "%.*s-0.%.120s", (int)(hl - il), hn,
             p->k8s_service);
    v->host_from = "HOSTNAME and NEXAR_K8S_SERVICE";
    add_var(v, "HOSTNAME");
    add_var(v, "NEXAR_K8S_SERVICE");
  }
  v->port = 29500;
  v->port_from = "the default for Kubernetes";
  /* Pod 0's DNS name appears once it runs: the others may start first. */
  v->retry_ms = (int)p->bootstrap_timeout_ms;
  v->no_host = "set NEXAR_K8S_SERVICE to the Job's headless Service";
  v->secret_hint =
      "create a Kubernetes Secret, mount it as a file and set "
      "NEXAR_SECRET_FILE to it (examples/k8s)";
  return 1;
}

static int view_pmix(view_t *v, const nexar__params_t *p, char *err, size_t n,
                     nexar__launch_t *l) {
  (void)p;
  if (!getenv("PMIX_NAMESPACE") && strcmp(p->launcher, "pmix")) return 0;
  int rc = nexar__pmix_open(l, err, n);
  if (rc <= 0) return rc;
  v->rank = l->rank;
  v->size = l->size;
  v->local_rank = l->local_rank;
  v->local_size = l->local_size;
  v->one_host = v->local_size == v->size;
  add_var(v, "PMIX_NAMESPACE");
  size_t o = strlen(v->vars);
  snprintf(v->vars + o, sizeof(v->vars) - o,
           " (rank %d of %d, local rank %d of %d)", v->rank, v->size,
           v->local_rank, v->local_size);
  return 1;
}

typedef int (*view_fn)(view_t *, const nexar__params_t *, char *, size_t);
static const struct {
  const char *name;
  view_fn fn;
  const char *vars; /* what marks it, for a forced launcher not found */
} kinds[] = {
    {"pmix", NULL, "PMIX_NAMESPACE, with a PMIx server and libpmix.so.2"},
    {"ompi", view_ompi, "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE"},
    {"torchrun", view_torchrun, "RANK and WORLD_SIZE"},
    {"slurm", view_slurm, "SLURM_PROCID and SLURM_NTASKS"},
    {"k8s", view_k8s, "JOB_COMPLETION_INDEX"},
};
enum { NKINDS = sizeof(kinds) / sizeof(kinds[0]) };

/* Resolves |host| (a name or a numeric address) to "ip:port", retrying
 * for |retry_ms|. */
static int resolve(const char *host, const char *from, int port, int retry_ms,
                   char *out, size_t outlen, char *err, size_t n) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  uint64_t end = nexar__now() + (uint64_t)retry_ms * 1000000ull;
  int rc;
  while ((rc = getaddrinfo(host, NULL, &hints, &res)) != 0 &&
         (rc == EAI_AGAIN || rc == EAI_NONAME) && nexar__now() < end) {
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (rc != 0)
    return bad(err, n,
               "the rendezvous host '%.100s' (from %s) does not "
               "resolve: %s",
               host, from, gai_strerror(rc));
  struct sockaddr_storage ss;
  memcpy(&ss, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (ss.ss_family == AF_INET6)
    ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
  else
    ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
  nexar__addr_str((struct sockaddr *)&ss, out, outlen);
  return 0;
}

/* The settings given explicitly (environment or config) win: is |env|
 * set, or the config field? */
static bool given(const char *env, const char *cfg_field) {
  return getenv(env) || cfg_field;
}

/* The view |c| fills the settings |p| left open and names the rendezvous. */
static int apply(nexar__params_t *p, const struct nexar_config *cfg,
                 const view_t *c, nexar__launch_t *l, char *err, size_t n) {
  bool pmix = !strcmp(c->name, "pmix");
  l->name = c->name;
  l->rank = c->rank;
  l->size = c->size;
  l->local_rank = c->local_rank;
  l->local_size = c->local_size;
  l->one_host = c->one_host || c->size == 1;
  if (p->rank < 0) p->rank = c->rank;
  if (!p->world_size) p->world_size = c->size;
  if (p->rank >= p->world_size)
    return bad(err, n,
               "rank %lld is not below the world size %lld (%s%s; launcher "
               "%s: %s)",
               (long long)p->rank, (long long)p->world_size,
               getenv("NEXAR_RANK") ? "NEXAR_RANK is set" : "",
               getenv("NEXAR_WORLD_SIZE") ? " NEXAR_WORLD_SIZE is set" : "",
               c->name, c->vars);
  if (!pmix && !p->secret && !p->secret_file)
    return bad(err, n,
               "no cluster secret (NEXAR_SECRET or NEXAR_SECRET_FILE): "
               "launched by %s, which gives no safe channel to share one, "
               "so nexar does not make one up; %s",
               c->name, c->secret_hint);
  snprintf(l->why, sizeof(l->why), "%s", c->vars);
  /* NEXAR_SEED given: a standalone seed, none embedded. */
  if (!p->seed_addr) {
    l->embedded = p->rank == 0 && !p->join; /* a joiner has a seed */
    l->port = p->port ? (int)p->port : c->port;
  }
  if (!p->seed_addr && !pmix) {
    const char *host = l->one_host ? "127.0.0.1" : c->host;
    if (!host[0])
      return bad(err, n,
                 "%s: no rendezvous host: %s (or set "
                 "NEXAR_SEED=host:port)",
                 c->name, c->no_host);
    if (!l->port)
      return bad(err, n,
                 "%s: no port for the embedded seed (%s): set "
                 "NEXAR_PORT",
                 c->name, c->vars);
    int rc = resolve(host, l->one_host ? "one host" : c->host_from, l->port,
                     c->retry_ms, l->seed, sizeof(l->seed), err, n);
    if (rc < 0) return rc;
    p->seed_addr = l->seed;
  }
  /* On several hosts every process listens on all its addresses (peers
   * dial the one the seed saw), unless NEXAR_BIND_ADDR says otherwise. */
  if (!l->one_host && !given("NEXAR_BIND_ADDR", cfg ? cfg->bind_addr : NULL))
    p->bind_addr = p->seed_addr && p->seed_addr[0] == '[' ? "::" : "0.0.0.0";
  return 0;
}

int nexar__launch_detect(nexar__params_t *p, const struct nexar_config *cfg,
                         nexar__launch_t *l, char *err, size_t n) {
  memset(l, 0, sizeof(*l));
  l->name = "none";
  l->rank = l->local_rank = -1;
  const char *want = p->launcher;
  bool forced = strcmp(want, "auto") != 0;
  int k = -1;
  for (int i = 0; i < NKINDS; i++)
    if (!strcmp(want, kinds[i].name)) k = i;
  if (forced && k < 0 && strcmp(want, "none"))
    return bad(err, n,
               "NEXAR_LAUNCHER='%.64s' is not one of auto, pmix, slurm, "
               "torchrun, ompi, k8s, none",
               want);
  if (!strcmp(want, "none")) {
    snprintf(l->why, sizeof(l->why), "NEXAR_LAUNCHER=none");
    return 0;
  }
  if (!forced && p->seed_addr && p->world_size) {
    snprintf(l->why, sizeof(l->why),
             "NEXAR_SEED and NEXAR_WORLD_SIZE are set (nexar-run, or a "
             "standalone nexar-seed)");
    return 0;
  }
  view_t v[NKINDS];
  int chosen = -1;
  for (int i = 0; i < NKINDS; i++) {
    memset(&v[i], 0, sizeof(v[i]));
    v[i].name = kinds[i].name;
    v[i].rank = v[i].local_rank = -1;
    if (forced && i != k) continue;
    int rc = kinds[i].fn ? kinds[i].fn(&v[i], p, err, n)
                         : view_pmix(&v[i], p, err, n, l);
    /* The outer launcher of a nested pair may lack what nexar would need
     * from it (torchrun in a Kubernetes Indexed Job: no NEXAR_WORLD_SIZE):
     * only the one used must be complete. */
    if (rc < 0 && chosen < 0) return rc;
    if (rc <= 0) v[i].name = NULL;
    if (rc == 1 && chosen < 0) chosen = i;
  }
  if (chosen < 0) {
    if (forced)
      return bad(err, n, "NEXAR_LAUNCHER=%s, but %s %s", want, kinds[k].vars,
                 k == 0 ? "are not all there" : "are not set");
    snprintf(l->why, sizeof(l->why), "no launcher's variables are set");
    return 0;
  }
  /* Nested launchers (torchrun under srun, mpirun in a Slurm job) differ
   * in world size; the same size with another rank is a stale or wrong
   * environment. */
  for (int i = chosen + 1; i < NKINDS; i++)
    if (v[i].name && v[i].size == v[chosen].size && v[i].rank != v[chosen].rank)
      return bad(err, n,
                 "the launchers disagree: %s says %s, %s says %s (the same "
                 "world size, another rank): unset the stale variables or "
                 "choose one with NEXAR_LAUNCHER",
                 v[chosen].name, v[chosen].vars, v[i].name, v[i].vars);
  return apply(p, cfg, &v[chosen], l, err, n);
}

/* PMIx, rank 0: the address the others dial, on this host or from its
 * first non-loopback IPv4 interface (NEXAR_ADVERTISE_ADDR wins). */
static void seed_host(const nexar__launch_t *l, const nexar__params_t *p,
                      char *out, size_t n) {
  snprintf(out, n, "127.0.0.1");
  if (l->one_host) return;
  if (p->advertise_addr) {
    snprintf(out, n, "%s", p->advertise_addr);
    return;
  }
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return;
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
        (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
      continue;
    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out,
              (socklen_t)n);
    break;
  }
  freeifaddrs(ifs);
}

int nexar__launch_start(nexar__launch_t *l, nexar__params_t *p, char *err,
                        size_t n) {
  bool pmix = l->pmix != NULL;
  if (l->embedded) {
    if (pmix && !p->secret && !p->secret_file) {
      uint8_t raw[32];
      if (gnutls_rnd(GNUTLS_RND_KEY, raw, sizeof(raw)) < 0)
        return bad(err, n, "cannot generate the cluster secret");
      for (int i = 0; i < 32; i++)
        snprintf(l->secret + 2 * i, 3, "%02x", raw[i]);
      gnutls_memset(raw, 0, sizeof(raw));
      p->secret = l->secret;
    }
    char listen[64];
    /* On one host the seed is reachable from it only. */
    bool v6 = p->seed_addr && p->seed_addr[0] == '[';
    snprintf(listen, sizeof(listen), "%s:%d",
             l->one_host ? "127.0.0.1"
             : v6        ? "[::]"
                         : "0.0.0.0",
             l->port);
    nexar_seed_config_t sc = NEXAR_SEED_CONFIG_INIT;
    sc.listen_addr = listen;
    sc.secret = p->secret;
    sc.secret_file = p->secret ? NULL : p->secret_file;
    sc.world_size = (int)p->world_size;
    sc.timeout_ms = (int)p->bootstrap_timeout_ms;
    sc.max_world_size = 0;
    int rc = nexar_seed_start(&sc, &l->seed_run);
    if (rc < 0) {
      const char *d = nexar_last_error();
      return bad(err, n,
                 "rank 0 cannot run the embedded seed on %s: %s%s%s (another "
                 "job on this host may hold the port: set NEXAR_PORT)",
                 listen, nexar_strerror(rc), d && *d ? ": " : "", d ? d : "");
    }
    if (pmix) {
      char host[64];
      seed_host(l, p, host, sizeof(host));
      snprintf(l->seed, sizeof(l->seed), "%s:%d", host,
               nexar_seed_port(l->seed_run));
    }
  }
  if (pmix) {
    int rc = nexar__pmix_exchange(l, (int)p->bootstrap_timeout_ms, err, n);
    if (rc < 0) return rc;
    if (!p->seed_addr) p->seed_addr = l->seed;
    if (!p->secret && !p->secret_file && l->secret[0]) p->secret = l->secret;
  }
  return 0;
}

void nexar__launch_stop(nexar__launch_t *l) {
  if (l->seed_run) {
    nexar_seed_stop(l->seed_run);
    l->seed_run = NULL;
  }
  nexar__pmix_close(l);
  gnutls_memset(l->secret, 0, sizeof(l->secret));
}

int nexar__slurm_first_host(const char *list, char *host, size_t hostlen,
                            char *err, size_t n) {
  /* The first name ends at a comma outside brackets; each [..] group is
   * replaced by its first value (zero padding kept). */
  size_t o = 0;
  const char *s = list;
  if (!s || !*s) return bad(err, n, "it is empty");
  for (; *s && *s != ','; s++) {
    if (*s == ']') return bad(err, n, "a ']' without its '['");
    if (*s != '[') {
      if (o + 1 >= hostlen) return bad(err, n, "the host name is too long");
      host[o++] = *s;
      continue;
    }
    const char *close = strchr(s, ']');
    const char *open2 = strchr(s + 1, '[');
    if (!close || (open2 && open2 < close))
      return bad(err, n, "a '[' without its ']'");
    /* Check every element of the group: N or N-M, N <= M, digits. */
    const char *first = s + 1, *e = first;
    if (close == first) return bad(err, n, "an empty '[]'");
    size_t flen = 0;
    while (e < close) {
      const char *a = e;
      while (e < close && *e >= '0' && *e <= '9') e++;
      size_t alen = (size_t)(e - a);
      if (alen && e < close && *e == '-') {
        const char *b = ++e;
        while (e < close && *e >= '0' && *e <= '9') e++;
        if (e == b || strtoull(a, NULL, 10) > strtoull(b, NULL, 10))
          return bad(err, n, "'%.*s' is not a range N-M with N <= M",
                     (int)(e - a), a);
      }
      if (!alen || (e < close && *e != ','))
        return bad(err, n,
                   "'[%.*s]' holds something other than numbers "
                   "and ranges",
                   (int)(close - first), first);
      if (a == first) flen = alen;
      if (e < close) e++; /* the comma */
      if (e == close && e[-1] == ',')
        return bad(err, n, "an empty element in '[%.*s]'", (int)(close - first),
                   first);
    }
    if (o + flen >= hostlen) return bad(err, n, "the host name is too long");
    memcpy(host + o, first, flen);
    o += flen;
    s = close;
  }
  if (!o) return bad(err, n, "the first host name is empty");
  host[o] = 0;
  return 0;
}
