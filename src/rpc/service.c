/*
 * Handler threads of the RPC service (docs/rpc.md "Threads and
 * concurrency"): a pool of NEXAR_RPC_THREADS threads runs the queued
 * requests; a handler that waits for a nested call lends its place, and a
 * thread is added for it (at most NEXAR__RPC_LEND_MAX), so that call
 * cycles through busy processes complete. A request whose caller's
 * deadline has passed is dropped before it runs. Also the handler table.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rpc/rpc_int.h"

/* A handler's response buffer: anonymous pages, zero when the handler
 * starts, so that no byte of one caller's response can reach another
 * caller (a handler may claim bytes it did not write, or write past what
 * it claims). After each call resp_reset clears with memset the first
 * RESP_KEEP bytes or the pages of the response sent, whichever is more,
 * and hands the pages past them back to the kernel (MADV_DONTNEED: they
 * read as zeros again). Measured on this VM (CPU time of the handler's
 * write plus the reset, 1 MiB buffer): 2.2 us for a 64-byte response,
 * 2.7 us for 64 KiB, 7.5 us for 256 KiB (the write alone: 3.6), 42 us for
 * 1 MiB (21); handing back every page instead costs 5 and 44 us for 64 B
 * and 64 KiB (the page faults that follow), clearing the whole buffer
 * 20 us whatever the size. */
#define RESP_KEEP 65536 /* a multiple of the page size */

static uint8_t *resp_alloc(size_t cap) {
  void *b = mmap(NULL, cap ? cap : 1, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return b == MAP_FAILED ? NULL : b;
}

static void resp_reset(uint8_t *b, size_t cap, size_t len) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t keep = len > RESP_KEEP ? (len + pg - 1) / pg * pg : RESP_KEEP;
  if (keep > cap) keep = cap;
  memset(b, 0, keep);
  if (cap > keep && madvise(b + keep, cap - keep, MADV_DONTNEED) != 0)
    memset(b + keep, 0, cap - keep); /* not expected: our own mapping */
}

static void resp_free(uint8_t *b, size_t cap) {
  if (b) munmap(b, cap ? cap : 1);
}

/* The worker of the calling thread when it is a handler thread. */
static _Thread_local nexar__rpc_worker_t *self_w;

static nexar_rpc_handler_t lookup(nexar__rpc_t *p, uint16_t fn_id, void **ud) {
  for (int i = 0; i < p->nfns; i++) {
    if (p->fns[i].fn_id == fn_id) {
      *ud = p->fns[i].user_data;
      return p->fns[i].handler;
    }
  }
  return NULL;
}

/* Runs |it| on worker |w| (mu not held) and posts its response. A request
 * whose caller's deadline has passed is dropped unanswered: the caller has
 * stopped waiting for it. */
static void serve(nexar_ctx_t *ctx, nexar__rpc_worker_t *w,
                  nexar__rpc_item_t *it, nexar_rpc_handler_t fn, void *ud) {
  size_t cap = (size_t)ctx->prm.rpc_max_bytes;
  uint64_t now = nexar__now();
  if (now >= it->deadline) {
    NEXAR__INFO(NEXAR__SUB_P2P,
                "rank %d: rpc fn %u from rank %d (call %llu) dropped before "
                "it ran: its caller's deadline passed %llu ms ago",
                ctx->rank, it->fn_id, it->caller_world,
                (unsigned long long)it->call_id,
                (unsigned long long)((now - it->deadline) / 1000000ull));
    return;
  }
  int status = NEXAR_OK, code = 0;
  size_t len = 0;
  uint8_t *data = NULL;
  if (!fn) {
    status = NEXAR_ERR_RPC_UNKNOWN_FN;
  } else if (!w->resp) {
    status = NEXAR_ERR_NOMEM;
  } else {
    /* An empty request still gets a valid pointer. */
    static const uint8_t none[1];
    w->deadline = it->deadline;
    code = fn(ud, it->caller, it->fn_id, it->data ? it->data : none, it->len,
              w->resp, cap, &len);
    if (code >= 0 && len > cap) code = NEXAR_ERR_TRUNCATE;
    if (code < 0) {
      status = NEXAR_ERR_RPC_HANDLER;
      len = 0;
    } else if (len) {
      data = malloc(len);
      if (data)
        memcpy(data, w->resp, len);
      else
        status = NEXAR_ERR_NOMEM;
    }
    resp_reset(w->resp, cap, len);
  }
  nexar__rpc_answer(ctx, it, status, code, data, len);
}

/* Hands the failures not yet seen to the application's handler, one
 * worker at a time (mu held on entry and exit). */
static void dispatch_failures(nexar_ctx_t *ctx, nexar__rpc_t *p) {
  p->dispatching = true;
  int seen = p->fseen;
  pthread_mutex_unlock(&p->mu);
  ctx->hooks->ft_dispatch(ctx, &seen);
  pthread_mutex_lock(&p->mu);
  p->fseen = seen;
  p->dispatching = false;
}

static bool failures_due(nexar_ctx_t *ctx, nexar__rpc_t *p) {
  return !p->dispatching && p->fseen < atomic_load(&ctx->nfail);
}

/* A handler thread: runs requests while fewer than NEXAR_RPC_THREADS
 * handlers run (those lent to a nested call not counted). */
static void *worker_main(void *arg) {
  nexar__rpc_worker_t *w = arg;
  nexar_ctx_t *ctx = w->ctx;
  nexar__rpc_t *p = &ctx->rpc;
  size_t cap = (size_t)ctx->prm.rpc_max_bytes;
  w->resp = resp_alloc(cap);
  self_w = w;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && !failures_due(ctx, p) &&
           !(p->q_head && p->active < p->limit)) {
      p->idle++;
      pthread_cond_wait(&p->wcv, &p->mu);
      p->idle--;
    }
    if (p->stop) break;
    if (failures_due(ctx, p)) {
      dispatch_failures(ctx, p);
      continue;
    }
    nexar__rpc_item_t *it = p->q_head;
    p->q_head = it->next;
    if (!p->q_head) p->q_tail = NULL;
    void *ud = NULL;
    nexar_rpc_handler_t fn = lookup(p, it->fn_id, &ud);
    w->fn = fn ? it->fn_id : -1;
    p->active++;
    pthread_mutex_unlock(&p->mu);
    serve(ctx, w, it, fn, ud);
    nexar__rpc_item_free(it);
    pthread_mutex_lock(&p->mu);
    w->fn = -1;
    p->active--;
    p->load--;
    pthread_cond_broadcast(&p->cv); /* this thread takes the next request */
  }
  pthread_mutex_unlock(&p->mu);
  resp_free(w->resp, cap);
  w->resp = NULL;
  return NULL;
}

/* Starts one more handler thread (mu held). */
static int spawn(nexar_ctx_t *ctx) {
  nexar__rpc_t *p = &ctx->rpc;
  if (p->stop || p->nw == p->maxw) return NEXAR_ERR_SYS;
  nexar__rpc_worker_t *w = &p->w[p->nw];
  w->ctx = ctx;
  w->fn = -1;
  if (pthread_create(&w->th, NULL, worker_main, w) != 0) return NEXAR_ERR_SYS;
  p->nw++;
  return 0;
}

int nexar__rpc_start_service(nexar_ctx_t *ctx) {
  nexar__rpc_t *p = &ctx->rpc;
  p->limit = (int)ctx->prm.rpc_threads;
  p->maxw = p->limit + NEXAR__RPC_LEND_MAX;
  p->w = calloc((size_t)p->maxw, sizeof(*p->w));
  if (!p->w) return NEXAR_ERR_NOMEM;
  p->started = true;
  int rc = 0;
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->limit && rc == 0; i++) rc = spawn(ctx);
  pthread_mutex_unlock(&p->mu);
  return rc;
}

bool nexar__rpc_lend(nexar_ctx_t *ctx) {
  nexar__rpc_worker_t *w = self_w;
  if (!w || w->ctx != ctx || w->fn < 0 || w->lent) return false;
  nexar__rpc_t *p = &ctx->rpc;
  pthread_mutex_lock(&p->mu);
  w->lent = true;
  p->active--;
  /* The freed place needs a thread to run on: a cycle of nested calls
   * comes back to this process while this handler waits. */
  if (p->idle == 0 && spawn(ctx) < 0 && !p->stop)
    NEXAR__INFO(NEXAR__SUB_P2P,
                "rank %d: rpc: %d handler threads, none more for a handler "
                "waiting in a nested call",
                ctx->rank, p->nw);
  pthread_cond_broadcast(&p->wcv);
  pthread_mutex_unlock(&p->mu);
  return true;
}

void nexar__rpc_unlend(nexar_ctx_t *ctx) {
  nexar__rpc_t *p = &ctx->rpc;
  pthread_mutex_lock(&p->mu);
  self_w->lent = false;
  p->active++;
  pthread_mutex_unlock(&p->mu);
}

void nexar__rpc_stop(nexar_ctx_t *ctx) {
  nexar__rpc_t *p = &ctx->rpc;
  if (!p->inited || !p->started) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->cv);
  pthread_cond_broadcast(&p->wcv);
  int nw = p->nw; /* no thread is added once stop is set */
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < nw; i++) pthread_join(p->w[i].th, NULL);
  free(p->w);
  p->w = NULL;
  p->nw = 0;
  p->started = false;
}

uint64_t nexar__rpc_handler_deadline(const nexar_ctx_t *ctx) {
  nexar__rpc_worker_t *w = self_w;
  return w && w->fn >= 0 && w->ctx == ctx ? w->deadline : UINT64_MAX;
}

int64_t nexar_rpc_time_left_ms(void) {
  nexar__rpc_worker_t *w = self_w;
  if (!w || w->fn < 0) return -1;
  uint64_t now = nexar__now();
  return now < w->deadline ? (int64_t)((w->deadline - now) / 1000000ull) : 0;
}

/* ---- Handler table ---- */

int nexar_rpc_register(nexar_comm_t *comm, uint16_t fn_id,
                       nexar_rpc_handler_t handler, void *user_data) {
  if (!comm || !handler) return NEXAR_ERR_INVALID_ARG;
  nexar__rpc_t *p = &comm->ctx->rpc;
  int rc = NEXAR_OK;
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->nfns; i++) {
    if (p->fns[i].fn_id == fn_id) {
      rc = NEXAR_ERR_INVALID_USAGE;
      nexar__comm_set_error(comm,
                            "rank %d: rpc fn %u already has a handler "
                            "(unregister it first)",
                            comm->rank, fn_id);
      goto out;
    }
  }
  if (p->nfns == p->cap_fns) {
    int cap = p->cap_fns ? p->cap_fns * 2 : 16;
    nexar__rpc_fn_t *n = realloc(p->fns, (size_t)cap * sizeof(*n));
    if (!n) {
      rc = NEXAR_ERR_NOMEM;
      goto out;
    }
    p->fns = n;
    p->cap_fns = cap;
  }
  p->fns[p->nfns].fn_id = fn_id;
  p->fns[p->nfns].handler = handler;
  p->fns[p->nfns].user_data = user_data;
  p->nfns++;
out:
  pthread_mutex_unlock(&p->mu);
  return rc;
}

/* Whether a handler thread other than the caller runs |fn_id| (mu held). */
static bool running(const nexar__rpc_t *p, uint16_t fn_id) {
  for (int i = 0; i < p->nw; i++)
    if (p->w[i].fn == (int)fn_id && &p->w[i] != self_w) return true;
  return false;
}

int nexar_rpc_unregister(nexar_comm_t *comm, uint16_t fn_id) {
  if (!comm) return NEXAR_ERR_INVALID_ARG;
  nexar__rpc_t *p = &comm->ctx->rpc;
  int rc = NEXAR_ERR_INVALID_ARG;
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i < p->nfns; i++) {
    if (p->fns[i].fn_id == fn_id) {
      p->fns[i] = p->fns[--p->nfns];
      rc = NEXAR_OK;
      break;
    }
  }
  /* Wait for the running calls of the handler, but our own. */
  while (rc == NEXAR_OK && running(p, fn_id)) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  if (rc < 0)
    nexar__comm_set_error(comm, "rank %d: rpc fn %u has no handler", comm->rank,
                          fn_id);
  return rc;
}
