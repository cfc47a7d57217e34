/*
 * Waiting for requests (include/nexar.h: nexar_wait, nexar_test,
 * nexar_waitall): the deadline, its expiry through the request's kind, the
 * staged device buffers' return, and the automatic recovery through the
 * hooks.
 */
#include <stdlib.h>

#include "core/core.h"

/* The result of finished |r| (its staged buffers returned), its status
 * into |status| when given. */
static int req_result(nexar__req_t *r, nexar_status_t *status) {
  int rc = r->rc;
  if (r->stage) {
    /* Device buffers: the result goes back before the call returns. A
     * receive defines the bytes of the message only. */
    uint64_t limit = UINT64_MAX;
    if (r->kind == NEXAR__REQ_RECV)
      limit = r->st.bytes < r->cap ? r->st.bytes : r->cap;
    rc = nexar__stage_finish(r->stage, rc, limit);
    r->stage = NULL;
    r->st.error = rc;
  }
  if (status) *status = r->st;
  return rc;
}

static int req_finish(nexar__req_t **preq, nexar_status_t *status) {
  nexar__req_t *r = *preq;
  int rc = req_result(r, status);
  nexar_comm_t *comm = r->comm;
  free(r);
  *preq = NULL;
  /* Under NEXAR_RECOVERY=automatic a failed operation leaves its
   * communicator rebuilt. */
  return comm ? comm->ctx->hooks->after(comm, rc) : rc;
}

/* Progress thread: ends |r| with NEXAR_ERR_TIMEOUT, its kind saying why. */
static int cancel_fn(nexar__req_t *ctl) {
  nexar__req_t *r = ctl->cb_arg;
  if (atomic_load(&r->done)) return 0;
  nexar__req_expire(r);
  return 0;
}

/* Deadline of |r|: NEXAR_OP_TIMEOUT_MS after it started (an RPC call:
 * its own). */
static uint64_t req_deadline(const nexar__req_t *r) {
  if (r->kind == NEXAR__REQ_RPC) return r->rpc_deadline;
  return r->t_start + (uint64_t)r->comm->ctx->prm.op_timeout_ms * 1000000ull;
}

static void expire(nexar__req_t *r) {
  nexar_ctx_t *ctx = r->comm->ctx;
  nexar__ep_call(&ctx->ep, cancel_fn, r, UINT64_MAX);
  /* A collective finishes once its cancelled steps have completed. */
  nexar__req_wait(&ctx->ep, r, UINT64_MAX);
}

int nexar_wait(nexar__req_t **preq, nexar_status_t *status) {
  if (!preq) return NEXAR_ERR_INVALID_ARG;
  nexar__req_t *r = *preq;
  if (!r) return NEXAR_OK;
  /* A handler waiting for a nested call lends its place (rpc.c). */
  nexar_ctx_t *ctx = r->comm->ctx;
  bool lent = r->kind == NEXAR__REQ_RPC && !atomic_load(&r->done) &&
              ctx->hooks->rpc_lend(ctx);
  if (nexar__req_wait(&ctx->ep, r, req_deadline(r)) < 0) expire(r);
  if (lent) ctx->hooks->rpc_unlend(ctx);
  return req_finish(preq, status);
}

int nexar__wait_posted(int rc, nexar__req_t **preq, nexar_status_t *status) {
  nexar__ep_defer_end();
  if (rc < 0) {
    nexar__ep_settle();
    return rc;
  }
  return nexar_wait(preq, status);
}

int nexar__req_wait_local(nexar__req_t *r, nexar_status_t *status) {
  nexar_ctx_t *ctx = r->comm->ctx;
  if (!atomic_load_explicit(&r->done, memory_order_acquire) &&
      nexar__req_wait(&ctx->ep, r, req_deadline(r)) < 0)
    expire(r);
  return ctx->hooks->after(r->comm, req_result(r, status));
}

int nexar_test(nexar__req_t **preq, int *done, nexar_status_t *status) {
  if (!preq || !done) return NEXAR_ERR_INVALID_ARG;
  if (!*preq) {
    *done = 1;
    return NEXAR_OK;
  }
  /* Polling makes progress, as in MPI: one pass if the engine is free. */
  if (!atomic_load_explicit(&(*preq)->done, memory_order_acquire))
    nexar__ep_progress(&(*preq)->comm->ctx->ep);
  if (!atomic_load_explicit(&(*preq)->done, memory_order_acquire)) {
    if (nexar__now() < req_deadline(*preq)) {
      *done = 0;
      return NEXAR_OK;
    }
    expire(*preq);
  }
  *done = 1;
  return req_finish(preq, status);
}

int nexar_waitall(size_t n, nexar__req_t **reqs, nexar_status_t *statuses) {
  if (n && !reqs) return NEXAR_ERR_INVALID_ARG;
  int first = NEXAR_OK;
  for (size_t i = 0; i < n; i++) {
    int rc = nexar_wait(&reqs[i], statuses ? &statuses[i] : NULL);
    if (rc < 0 && first == NEXAR_OK) first = rc;
  }
  return first;
}

int nexar_waitany(size_t n, nexar__req_t **reqs, size_t *index,
                  nexar_status_t *status) {
  if (!index || (n && !reqs)) return NEXAR_ERR_INVALID_ARG;
  *index = NEXAR_UNDEFINED_INDEX;
  nexar__req_t *first = NULL;
  for (size_t i = 0; i < n; i++) {
    if (!reqs[i]) continue;
    if (!first) first = reqs[i];
    if (reqs[i]->comm->ctx != first->comm->ctx) return NEXAR_ERR_INVALID_ARG;
  }
  if (!first) {
    if (status)
      *status =
          (nexar_status_t){.source = NEXAR_ANY_SOURCE, .tag = NEXAR_ANY_TAG};
    return NEXAR_OK;
  }
  nexar_ctx_t *ctx = first->comm->ctx;
  bool lent = false;
  for (;;) {
    /* The request that finished first in index order, else the one whose
     * deadline comes first. */
    size_t soon = n;
    for (size_t i = 0; i < n; i++) {
      if (!reqs[i]) continue;
      if (atomic_load_explicit(&reqs[i]->done, memory_order_acquire)) {
        *index = i;
        break;
      }
      if (soon == n || req_deadline(reqs[i]) < req_deadline(reqs[soon]))
        soon = i;
      /* A handler waiting for a nested call lends its place (rpc.c). */
      if (!lent && reqs[i]->kind == NEXAR__REQ_RPC)
        lent = ctx->hooks->rpc_lend(ctx);
    }
    if (*index != NEXAR_UNDEFINED_INDEX) break;
    if (nexar__req_wait_any(&ctx->ep, reqs, n, req_deadline(reqs[soon])) < 0) {
      expire(reqs[soon]);
      *index = soon;
      break;
    }
  }
  if (lent) ctx->hooks->rpc_unlend(ctx);
  return req_finish(&reqs[*index], status);
}
