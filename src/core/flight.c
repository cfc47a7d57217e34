/*
 * The flight recorder: recording (engine, emu held) and the JSON-lines
 * dump (docs/debugging.md gives the format). A dump holds what the entries
 * hold: names, sizes, ranks and times, never a payload or the secret.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/flight.h"

/* SIGUSR1 requests (any context of the process looks at the count). */
static volatile sig_atomic_t sig_count;
static _Atomic bool sig_installed;

static void on_sigusr1(int sig) {
  (void)sig;
  sig_count++;
}

/* Installs the handler unless the application has its own (or ignores the
 * signal); once per process. */
static void install_handler(void) {
  if (atomic_exchange(&sig_installed, true)) return;
  struct sigaction old;
  if (sigaction(SIGUSR1, NULL, &old) < 0) return;
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, NULL);
}

int nexar__flight_init(nexar_ctx_t *ctx) {
  int64_t n = ctx->prm.flight_recorder;
  if (n <= 0) return 0;
  /* A power of two: the slot of an id is a mask, not a division. */
  int64_t p2 = 1;
  while (p2 < n) p2 *= 2;
  n = p2;
  nexar__flight_t *f = calloc(1, sizeof(*f));
  if (!f) return NEXAR_ERR_NOMEM;
  size_t bytes = (size_t)n * sizeof(*f->ring);
  f->ring = calloc(1, bytes);
  if (!f->ring) {
    free(f);
    return NEXAR_ERR_NOMEM;
  }
  /* Each page written now (calloc leaves fresh pages untouched, and a
   * compiler turns malloc and memset into calloc): the first lap of the
   * ring would otherwise take a page fault every 30 operations in the job's
   * first exchanges (22 faults in the first 800 us of a ping-pong, at about
   * 40 us each on a paravirtualized host). */
  for (size_t off = 0; off < bytes; off += 4096)
    ((volatile uint8_t *)f->ring)[off] = 0;
  f->cap = (uint32_t)n;
  f->next = 1;
  f->sig_seen = (unsigned)sig_count;
  nexar__log_dir(f->dir, sizeof(f->dir));
  ctx->flight = f;
  install_handler();
  return 0;
}

void nexar__flight_fini(nexar_ctx_t *ctx) {
  if (!ctx->flight) return;
  free(ctx->flight->ring);
  free(ctx->flight);
  ctx->flight = NULL;
}

/* The next entry, filled for an operation of |c| posted at |t|. */
static nexar__flight_ent_t *fill(nexar__flight_t *f, nexar_comm_t *c,
                                 const char *op, const char *algo, uint64_t seq,
                                 int dtype, uint64_t count, int root, int tag,
                                 uint64_t t) {
  uint64_t id = f->next++;
  nexar__flight_ent_t *e = &f->ring[id & (f->cap - 1)];
  /* An entry overwritten while its request runs loses the link. */
  if (e->state == NEXAR__FL_POSTED && e->req) e->req->flight = 0;
  /* Field by field (the compound literal would clear wait[] whole). */
  e->id = id;
  e->comm = c->id;
  e->seq = seq;
  e->count = count;
  e->t_post = t;
  e->t_end = 0;
  e->op = op;
  e->algo = algo;
  e->req = NULL;
  e->epoch = c->epoch;
  e->crank = c->rank;
  e->csize = c->size;
  e->dtype = dtype;
  e->root = root;
  e->tag = tag;
  e->rc = 0;
  e->state = NEXAR__FL_POSTED;
  e->wait[0] = 0;
  return e;
}

void nexar__flight_post(nexar_ctx_t *ctx, nexar__req_t *req, const char *op,
                        const char *algo, uint64_t seq, int dtype,
                        uint64_t count, int root, int tag) {
  nexar__flight_t *f = ctx->flight;
  if (!f) return;
  /* The post time is the request's own (the API took it for the
   * deadline). */
  nexar__flight_ent_t *e =
      fill(f, req->comm, op, algo, seq, dtype, count, root, tag,
           req->t_start ? req->t_start : nexar__now());
  e->req = req;
  req->flight = e->id;
}

void nexar__flight_sent(nexar_ctx_t *ctx, nexar_comm_t *comm, uint64_t bytes,
                        int peer, int tag) {
  nexar__flight_t *f = ctx->flight;
  if (!f) return;
  uint64_t t = ctx->ep.pass_now;
  nexar__flight_ent_t *e =
      fill(f, comm, "send", NULL, UINT64_MAX, -1, bytes, peer, tag, t);
  e->t_end = t;
  e->state = NEXAR__FL_DONE;
}

static nexar__flight_ent_t *entry_of(const nexar__req_t *req) {
  nexar__flight_t *f = req->comm->ctx->flight;
  if (!f || !req->flight) return NULL;
  nexar__flight_ent_t *e = &f->ring[req->flight & (f->cap - 1)];
  return e->id == req->flight ? e : NULL;
}

/* A list "1, 2, 3" cut to fit |cap| bytes ends at a whole rank. */
static void trim_list(char *s, size_t cap) {
  if (strlen(s) + 1 < cap) return;
  char *comma = strrchr(s, ',');
  if (comma)
    *comma = 0;
  else
    s[0] = 0;
}

void nexar__flight_waits(nexar__req_t *req, const char *waits) {
  nexar__flight_ent_t *e = entry_of(req);
  /* The first look counts: later ones see cancelled steps as done. */
  if (!e || e->wait[0]) return;
  snprintf(e->wait, sizeof e->wait, "%s", waits);
  if (strlen(waits) >= sizeof e->wait) trim_list(e->wait, sizeof e->wait);
}

void nexar__flight_end(nexar__req_t *req, int rc) {
  nexar__flight_ent_t *e = entry_of(req);
  req->flight = 0;
  if (!e) return;
  /* The pass's clock: no clock read of our own. */
  uint64_t now = req->comm->ctx->ep.pass_now;
  e->t_end = now > e->t_post ? now : e->t_post;
  e->req = NULL;
  e->rc = rc;
  e->state = rc < 0 ? NEXAR__FL_FAILED : NEXAR__FL_DONE;
  if (rc != NEXAR_ERR_TIMEOUT && rc != NEXAR_ERR_PEER_FAILED &&
      rc != NEXAR_ERR_REVOKED)
    return;
  nexar_ctx_t *ctx = req->comm->ctx;
  nexar__flight_t *f = ctx->flight;
  if (!f->dir[0] || (f->last_auto && e->t_end - f->last_auto < 1000000000ull))
    return;
  f->last_auto = e->t_end;
  nexar__flight_write(ctx, NULL);
}

void nexar__flight_poll(nexar_ctx_t *ctx) {
  nexar__flight_t *f = ctx->flight;
  if (!f || f->sig_seen == (unsigned)sig_count) return;
  f->sig_seen = (unsigned)sig_count;
  if (f->dir[0]) nexar__flight_write(ctx, NULL);
}

/* ---- The dump ---- */

typedef struct {
  int fd;
  int rc;
  char buf[8192];
  size_t used;
} out_t;

static void out_flush(out_t *o) {
  for (size_t off = 0; off < o->used && o->rc == 0;) {
    ssize_t w = write(o->fd, o->buf + off, o->used - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) o->rc = NEXAR_ERR_SYS;
    if (w > 0) off += (size_t)w;
  }
  o->used = 0;
}

static void out_printf(out_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void out_printf(out_t *o, const char *fmt, ...) {
  if (sizeof(o->buf) - o->used < 1024) out_flush(o);
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(o->buf + o->used, sizeof(o->buf) - o->used, fmt, ap);
  va_end(ap);
  if (k > 0)
    o->used += (size_t)k < sizeof(o->buf) - o->used
                   ? (size_t)k
                   : sizeof(o->buf) - o->used - 1;
}

/* Unix time in seconds of monotonic time |t|. */
static double wall_of(uint64_t t, uint64_t mono_now, double wall_now) {
  return wall_now - (double)(int64_t)(mono_now - t) / 1e9;
}

/* The waits of an operation still posted: a collective's ranks that have
 * not contributed, a p2p request's peer. */
static void live_waits(nexar_ctx_t *ctx, const nexar__flight_ent_t *e,
                       char *out, size_t len) {
  out[0] = 0;
  if (!e->req) return;
  if (e->req->kind == NEXAR__REQ_COLL && e->req->sched)
    ctx->hooks->coll_waiting(e->req, out, len);
  else if (e->req->kind != NEXAR__REQ_COLL && e->root >= 0)
    snprintf(out, len, "%d", e->root);
  if (!strcmp(out, "none")) out[0] = 0;
  trim_list(out, len);
}

int nexar__flight_live(nexar_ctx_t *ctx, uint64_t now, nexar__insp_op_t *out,
                       int max) {
  nexar__flight_t *f = ctx->flight;
  if (!f) return 0;
  uint64_t first = f->next > f->cap ? f->next - f->cap : 1;
  int n = 0;
  for (uint64_t id = f->next; id-- > first && n < max;) {
    const nexar__flight_ent_t *e = &f->ring[id & (f->cap - 1)];
    if (e->id != id || e->state != NEXAR__FL_POSTED) continue;
    nexar__insp_op_t *o = &out[n++];
    memset(o, 0, sizeof(*o));
    o->comm = e->comm;
    o->seq = e->seq;
    o->waited_us = now > e->t_post ? (now - e->t_post) / 1000 : 0;
    o->epoch = e->epoch;
    o->crank = e->crank;
    o->csize = e->csize;
    snprintf(o->op, sizeof o->op, "%s", e->op);
    char waits[256];
    live_waits(ctx, e, waits, sizeof waits);
    snprintf(o->waits, sizeof o->waits, "%s", waits);
    if (strlen(waits) >= sizeof o->waits) trim_list(o->waits, sizeof o->waits);
  }
  return n;
}

static void write_entry(out_t *o, nexar_ctx_t *ctx,
                        const nexar__flight_ent_t *e, uint64_t mono,
                        double wall) {
  char waits[256];
  const char *state = e->state == NEXAR__FL_DONE ? "done" : "failed";
  if (e->state == NEXAR__FL_POSTED) {
    live_waits(ctx, e, waits, sizeof waits);
    state = waits[0] ? "waiting" : "posted";
  } else {
    snprintf(waits, sizeof waits, "%s", e->wait);
  }
  out_printf(o,
             "{\"id\":%llu,\"comm\":%llu,\"epoch\":%u,\"rank\":%d,\"size\":%d,"
             "\"op\":\"%s\",",
             (unsigned long long)e->id, (unsigned long long)e->comm,
             (unsigned)e->epoch, e->crank, e->csize, e->op);
  if (e->seq != UINT64_MAX)
    out_printf(o, "\"seq\":%llu,", (unsigned long long)e->seq);
  if (e->algo) out_printf(o, "\"algo\":\"%s\",", e->algo);
  out_printf(o, "\"dtype\":%d,\"count\":%llu,\"root\":%d,\"tag\":%d,", e->dtype,
             (unsigned long long)e->count, e->root, e->tag);
  out_printf(o, "\"t_post\":%.6f,", wall_of(e->t_post, mono, wall));
  if (e->t_end)
    out_printf(o, "\"t_end\":%.6f,", wall_of(e->t_end, mono, wall));
  else
    out_printf(o, "\"waited_ms\":%.3f,", (double)(mono - e->t_post) / 1e6);
  out_printf(o, "\"state\":\"%s\"", state);
  if (e->state == NEXAR__FL_FAILED)
    out_printf(o, ",\"error\":\"%s\"", nexar_err_name(e->rc));
  out_printf(o, ",\"waits_for\":[%s]}\n", waits);
}

int nexar__flight_write(nexar_ctx_t *ctx, const char *path) {
  nexar__flight_t *f = ctx->flight;
  char def[600], tmp[640], host[256] = "";
  gethostname(host, sizeof host - 1);
  if (!path) {
    /* With the recorder off: the same file, the header only. */
    char dir[sizeof f->dir];
    if (f)
      memcpy(dir, f->dir, sizeof dir);
    else
      nexar__log_dir(dir, sizeof dir);
    if (!dir[0]) return NEXAR_ERR_INVALID_ARG;
    snprintf(def, sizeof def, "%s/nexar-flight.%d.%s.%d.jsonl", dir, ctx->rank,
             host, (int)getpid());
    path = def;
  }
  /* Written whole to a temporary name, then renamed: a reader never sees
   * half a dump. */
  int k = snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (k < 0 || (size_t)k >= sizeof tmp) return NEXAR_ERR_INVALID_ARG;
  out_t *o = malloc(sizeof(*o));
  if (!o) return NEXAR_ERR_NOMEM;
  o->rc = 0;
  o->used = 0;
  o->fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (o->fd < 0) {
    free(o);
    return NEXAR_ERR_SYS;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double wall = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  uint64_t mono = nexar__now();
  uint64_t first = 1, last = f ? f->next : 1;
  if (f && last > f->cap) first = last - f->cap;
  int world = ctx->world_comm ? ctx->world_comm->size : ctx->world;
  out_printf(o,
             "{\"nexar_flight\":1,\"rank\":%d,\"world\":%d,\"host\":\"%s\","
             "\"pid\":%d,\"time\":%.6f,\"capacity\":%u,\"entries\":%llu}\n",
             ctx->rank, world, host, (int)getpid(), wall, f ? f->cap : 0,
             (unsigned long long)(last - first));
  for (uint64_t id = first; id < last; id++) {
    const nexar__flight_ent_t *e = &f->ring[id & (f->cap - 1)];
    if (e->id == id) write_entry(o, ctx, e, mono, wall);
  }
  out_flush(o);
  int rc = o->rc;
  if (close(o->fd) < 0 && rc == 0) rc = NEXAR_ERR_SYS;
  free(o);
  if (rc == 0 && rename(tmp, path) < 0) rc = NEXAR_ERR_SYS;
  if (rc < 0) unlink(tmp);
  return rc;
}
