/*
 * Requests: the machinery under every non-blocking MPI call (mpi_int.h),
 * generalized requests, and requests freed by MPI_Request_free while still
 * active (kept on an orphan list and completed in the background of later
 * calls, and at MPI_Finalize). Every wait keeps the active layer-built
 * schedules moving (mpi/progress.c), and every test steps them once.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

static nxm_req_t *g_orphans[4096];
static int g_norphans;

nxm_req_t *nxm_req_get(MPI_Request h) {
  return nxm_obj_is(h, NXM_MAGIC_REQ) ? (nxm_req_t *)h : NULL;
}

nxm_req_t *nxm_req_new(int kind, nxm_comm_t *c, size_t nsub) {
  if (nsub > (size_t)NXM_MAX_ITEMS) return NULL;
  nxm_req_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  if (nsub <= NXM_REQ_INLINE) {
    r->sub = r->sub_inline;
    r->xfer = r->xfer_inline;
  } else {
    r->sub = calloc(nsub, sizeof *r->sub);
    r->xfer = calloc(nsub, sizeof *r->xfer);
  }
  if (!r->sub || !r->xfer || nxm_obj_open(r, NXM_MAGIC_REQ) != MPI_SUCCESS) {
    if (r->sub != r->sub_inline) {
      free(r->sub);
      free(r->xfer);
    }
    free(r);
    return NULL;
  }
  r->kind = kind;
  r->nsub = nsub;
  r->comm = c;
  if (c) atomic_fetch_add(&c->refs, 1);
  nxm_status_empty(&r->status);
  r->done = kind == NXM_REQ_DONE;
  return r;
}

static void xfer_clear(nxm_xfer_t *x) {
  nxm_view_free(&x->view);
  if (x->utype) nxm_dtype_unref(x->utype);
  memset(x, 0, sizeof *x);
}

void nxm_req_free(nxm_req_t *r) {
  if (!r) return;
  nxm_progress_remove(r);
  for (size_t i = 0; i < r->nsub; i++) xfer_clear(&r->xfer[i]);
  if (r->sub != r->sub_inline) {
    free(r->sub);
    free(r->xfer);
  }
  if (r->ptype != NULL && !NXM_IS_PREDEF(r->ptype))
    nxm_dtype_unref(nxm_dtype_get(r->ptype));
  nxm_comm_unref(r->comm);
  nxm_obj_close(r);
  free(r);
}

/* Sub-request |i| finished with nexar result |rc| and status |st|. */
static void sub_done(nxm_req_t *r, size_t i, int rc, const nexar_status_t *st) {
  r->sub[i] = NULL;
  nxm_xfer_t *x = &r->xfer[i];
  if (x->ubuf && (rc == NEXAR_OK || rc == NEXAR_ERR_TRUNCATE))
    nxm_unpack(x->view.ptr,
               st->bytes < x->view.bytes ? st->bytes : x->view.bytes, x->ucount,
               x->utype, x->ubuf);
  xfer_clear(x);
  if (r->kind == NXM_REQ_RECV) {
    nxm_status_set(&r->status, st->source, st->tag, MPI_SUCCESS, st->bytes);
    if (rc == NEXAR_ERR_CANCELLED) r->status.mpi_private[2] = 1;
  }
  if (rc != NEXAR_OK && rc != NEXAR_ERR_CANCELLED && r->error == MPI_SUCCESS)
    r->error = nxm_class_of_nexar(rc);
}

static void finish(nxm_req_t *r) {
  if (r->finish) r->error = r->finish(r, r->error);
  r->status.MPI_ERROR = r->error;
  r->done = 1;
}

int nxm_req_step(nxm_req_t *r, int *done) {
  *done = 0;
  if (r->done) {
    *done = 1;
    return r->error;
  }
  int pending = 0;
  for (size_t i = 0; i < r->nsub; i++) {
    if (!r->sub[i]) continue;
    nexar_status_t st = {0};
    int d = 0;
    int rc = nexar_test(&r->sub[i], &d, &st);
    if (d || rc != NEXAR_OK)
      sub_done(r, i, rc, &st);
    else
      pending = 1;
  }
  int pdone = 1;
  if (r->progress && r->error == MPI_SUCCESS) {
    pdone = 0;
    int cls = r->progress(r, &pdone);
    if (cls != MPI_SUCCESS) {
      r->error = cls;
      pdone = 1;
    }
    for (size_t i = 0; !pending && i < r->nsub; i++)
      if (r->sub[i]) pending = 1;
  }
  if (pending || !pdone) return MPI_SUCCESS;
  finish(r);
  *done = 1;
  return r->error;
}

int nxm_req_poll(nxm_req_t *r, int *done) {
  *done = 0;
  if (atomic_exchange(&r->busy, 1)) return MPI_SUCCESS; /* being stepped */
  int cls = nxm_req_step(r, done);
  atomic_store(&r->busy, 0);
  return cls;
}

/* The op timeout passed while waiting for |r|: its schedule stops, its
 * receives are cancelled; it finishes with MPI_ERR_OTHER once nexar has
 * completed its pending requests (each bounded by the op timeout). */
static void expire(nxm_req_t *r) {
  while (atomic_exchange(&r->busy, 1)) sched_yield();
  if (!r->done) {
    r->error = MPI_ERR_OTHER;
    r->progress = NULL;
    for (size_t i = 0; i < r->nsub; i++)
      if (r->sub[i]) nexar_cancel(r->sub[i]);
  }
  atomic_store(&r->busy, 0);
}

/* Only nexar requests left in |r| and nothing else to advance: blocks in
 * nexar on each (a once-listed request is taken from any last step). */
static int block_in_nexar(nxm_req_t *r) {
  if (r->sched)
    while (atomic_exchange(&r->busy, 1)) sched_yield();
  if (!r->done) {
    for (size_t i = 0; i < r->nsub; i++) {
      if (!r->sub[i]) continue;
      nexar_status_t st = {0};
      int rc = nexar_wait(&r->sub[i], &st);
      sub_done(r, i, rc, &st);
    }
    finish(r);
  }
  if (r->sched) atomic_store(&r->busy, 0);
  return r->error;
}

int nxm_req_wait(nxm_req_t *r) {
  nxm_spin_t sp;
  int spinning = 0, expired = 0;
  for (;;) {
    if (!r->progress && !nxm_progress_active()) return block_in_nexar(r);
    int done = 0;
    nxm_req_poll(r, &done);
    if (done) return r->error;
    if (!spinning) nxm_spin_init(&sp);
    spinning = 1;
    if (!nxm_spin(&sp, r) && !expired) {
      expire(r);
      expired = 1;
    }
  }
}

int nxm_req_complete(MPI_Request *h, MPI_Status *status) {
  nxm_req_t *r = nxm_req_get(*h);
  int cls = r->error;
  if (status) {
    *status = r->status;
    status->MPI_ERROR = cls;
  }
  if (r->persistent) {
    r->active = 0;
    r->done = 0;
    r->error = MPI_SUCCESS;
    nxm_status_empty(&r->status);
  } else {
    nxm_req_free(r);
    *h = MPI_REQUEST_NULL;
  }
  return cls;
}

/* Completes the requests MPI_Request_free left behind, without blocking,
 * and steps the active schedules: what every test does besides its own
 * requests. Orphans are freed outside nxm_lock (nxm_progress_remove may
 * wait for a step that takes it), a bounded batch per call. */
static void background(void) {
  nxm_req_t *done_reqs[64];
  int n = 0;
  nxm_lock();
  for (int i = 0; i < g_norphans && n < 64;) {
    int done = 0;
    nxm_req_poll(g_orphans[i], &done);
    if (done) {
      done_reqs[n++] = g_orphans[i];
      g_orphans[i] = g_orphans[--g_norphans];
    } else {
      i++;
    }
  }
  nxm_unlock();
  for (int i = 0; i < n; i++) nxm_req_free(done_reqs[i]);
  nxm_progress(NULL);
}

void nxm_req_drain(void) {
  for (;;) {
    nxm_lock();
    nxm_req_t *r = g_norphans ? g_orphans[--g_norphans] : NULL;
    nxm_unlock();
    if (!r) return;
    nxm_req_wait(r);
    nxm_req_free(r);
  }
}

/* ---- MPI functions. An inactive persistent request and MPI_REQUEST_NULL
 * complete at once with an empty status. */

static int inactive(MPI_Request h) {
  nxm_req_t *r = nxm_req_get(h);
  return !r || (r->persistent && !r->active);
}

/* Reports a failed request through its communicator's error handler. */
static int report(nxm_comm_t *c, int cls, const char *fn) {
  if (cls == MPI_SUCCESS) return cls;
  const char *detail = c && c->nc ? nexar_comm_last_error(c->nc) : "";
  return nxm_err(c, cls, fn, "request failed%s%s", *detail ? ": " : "", detail);
}

static int check_req(MPI_Request *h, const char *fn) {
  if (!h) return nxm_err(NULL, MPI_ERR_REQUEST, fn, "NULL request");
  if (*h != MPI_REQUEST_NULL && !nxm_req_get(*h))
    return nxm_err(NULL, MPI_ERR_REQUEST, fn, "invalid request");
  return MPI_SUCCESS;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  int cls = check_req(request, "MPI_Wait");
  if (cls != MPI_SUCCESS) return cls;
  if (inactive(*request)) {
    nxm_status_empty(status);
    return MPI_SUCCESS;
  }
  nxm_req_t *r = nxm_req_get(*request);
  nxm_req_wait(r);
  if (r->error != MPI_SUCCESS) report(r->comm, r->error, "MPI_Wait");
  return nxm_req_complete(request, status);
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  int cls = check_req(request, "MPI_Test");
  if (cls != MPI_SUCCESS) return cls;
  if (!flag) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Test", "NULL flag");
  background();
  *flag = 1;
  if (inactive(*request)) {
    nxm_status_empty(status);
    return MPI_SUCCESS;
  }
  nxm_req_t *r = nxm_req_get(*request);
  int done = 0;
  nxm_req_poll(r, &done);
  if (!done) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  if (r->error != MPI_SUCCESS) report(r->comm, r->error, "MPI_Test");
  return nxm_req_complete(request, status);
}

static int check_array(int count, MPI_Request reqs[], const char *fn) {
  if (count < 0 || (count > 0 && !reqs))
    return nxm_err(NULL, MPI_ERR_ARG, fn, "count %d", count);
  for (int i = 0; i < count; i++)
    if (reqs[i] != MPI_REQUEST_NULL && !nxm_req_get(reqs[i]))
      return nxm_err(NULL, MPI_ERR_REQUEST, fn, "request %d invalid", i);
  return MPI_SUCCESS;
}

/* Remembers the first failed request's class and communicator (held). */
static void note_failure(const nxm_req_t *r, int *failed, nxm_comm_t **fc) {
  if (r->error == MPI_SUCCESS || *failed) return;
  *failed = r->error;
  *fc = r->comm;
  if (*fc) atomic_fetch_add(&(*fc)->refs, 1);
}

/* Completes request i of an array into statuses[i] (may be NULL);
 * returns its class. */
static int complete_at(MPI_Request reqs[], int i, MPI_Status statuses[]) {
  MPI_Status tmp;
  MPI_Status *st = statuses ? &statuses[i] : &tmp;
  if (inactive(reqs[i])) {
    nxm_status_empty(st);
    return MPI_SUCCESS;
  }
  return nxm_req_complete(&reqs[i], st);
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
  int cls = check_array(count, reqs, "MPI_Waitall");
  if (cls != MPI_SUCCESS) return cls;
  int failed = 0;
  nxm_comm_t *fc = NULL;
  for (int i = 0; i < count; i++) {
    nxm_req_t *r = inactive(reqs[i]) ? NULL : nxm_req_get(reqs[i]);
    if (r) {
      nxm_req_wait(r);
      note_failure(r, &failed, &fc);
    }
    complete_at(reqs, i, statuses);
  }
  if (!failed) return MPI_SUCCESS;
  cls = report(fc, statuses ? MPI_ERR_IN_STATUS : failed, "MPI_Waitall");
  nxm_comm_unref(fc);
  return cls;
}

int MPI_Testall(int count, MPI_Request reqs[], int *flag,
                MPI_Status statuses[]) {
  int cls = check_array(count, reqs, "MPI_Testall");
  if (cls != MPI_SUCCESS) return cls;
  if (!flag) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Testall", "NULL flag");
  background();
  *flag = 1;
  for (int i = 0; i < count; i++) {
    nxm_req_t *r = inactive(reqs[i]) ? NULL : nxm_req_get(reqs[i]);
    int done = 1;
    if (r) nxm_req_poll(r, &done);
    if (!done) *flag = 0;
  }
  if (!*flag) return MPI_SUCCESS;
  return MPI_Waitall(count, reqs, statuses);
}

/* One poll of the request behind |h| for the test family: NULL for an
 * inactive handle (*active untouched) or one still pending (*active = 1);
 * the request once it has finished. */
static nxm_req_t *poll_done(MPI_Request h, int *active) {
  if (inactive(h)) return NULL;
  *active = 1;
  nxm_req_t *r = nxm_req_get(h);
  int done = 0;
  nxm_req_poll(r, &done);
  return done ? r : NULL;
}

int MPI_Testany(int count, MPI_Request reqs[], int *index, int *flag,
                MPI_Status *status) {
  int cls = check_array(count, reqs, "MPI_Testany");
  if (cls != MPI_SUCCESS) return cls;
  if (!index || !flag)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Testany", "NULL argument");
  background();
  int any_active = 0;
  *flag = 0;
  *index = MPI_UNDEFINED;
  for (int i = 0; i < count; i++) {
    nxm_req_t *r = poll_done(reqs[i], &any_active);
    if (!r) continue;
    *flag = 1;
    *index = i;
    if (r->error != MPI_SUCCESS) report(r->comm, r->error, "MPI_Testany");
    return nxm_req_complete(&reqs[i], status);
  }
  if (!any_active) {
    *flag = 1;
    nxm_status_empty(status);
  }
  return MPI_SUCCESS;
}

/* MPI_Waitany in nexar_waitany when each active request is one pending
 * nexar request (sends and receives) and no schedule is active: one wait
 * in the engine instead of a polling loop. Sets *handled = 0 (and does
 * nothing) otherwise. */
static int waitany_nexar(int count, MPI_Request reqs[], int *index,
                         MPI_Status *status, int *handled) {
  *handled = 0;
  if (nxm_progress_active()) return MPI_SUCCESS;
  nexar_req_t *small[64];
  nexar_req_t **arr = count <= 64 ? small : malloc((size_t)count * sizeof *arr);
  if (!arr) return MPI_SUCCESS;
  int any = 0, simple = 1;
  for (int i = 0; i < count; i++) {
    arr[i] = NULL;
    if (inactive(reqs[i])) continue;
    nxm_req_t *r = nxm_req_get(reqs[i]);
    if (r->progress || r->nsub != 1 || !r->sub[0] || r->done) simple = 0;
    arr[i] = r->sub[0];
    any = 1;
  }
  int cls = MPI_SUCCESS;
  if (any && simple) {
    *handled = 1;
    size_t idx = NEXAR_UNDEFINED_INDEX;
    nexar_status_t st = {0};
    int rc = nexar_waitany((size_t)count, arr, &idx, &st);
    if (idx == NEXAR_UNDEFINED_INDEX || idx >= (size_t)count) {
      cls = nxm_err(NULL, nxm_class_of_nexar(rc), "MPI_Waitany", "%s",
                    nexar_strerror(rc));
    } else {
      nxm_req_t *r = nxm_req_get(reqs[idx]);
      sub_done(r, 0, rc, &st);
      finish(r);
      *index = (int)idx;
      if (r->error != MPI_SUCCESS) report(r->comm, r->error, "MPI_Waitany");
      cls = nxm_req_complete(&reqs[idx], status);
    }
  }
  if (arr != small) free(arr);
  return cls;
}

int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status) {
  int cls = check_array(count, reqs, "MPI_Waitany");
  if (cls != MPI_SUCCESS) return cls;
  if (!index) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Waitany", "NULL index");
  nxm_spin_t sp;
  nxm_spin_init(&sp);
  for (;;) {
    int flag = 0, handled = 0;
    cls = MPI_Testany(count, reqs, index, &flag, status);
    if (flag || cls != MPI_SUCCESS) return cls;
    cls = waitany_nexar(count, reqs, index, status, &handled);
    if (handled) return cls;
    if (!nxm_spin(&sp, NULL))
      return nxm_err(NULL, MPI_ERR_OTHER, "MPI_Waitany",
                     "no request finished within NEXAR_OP_TIMEOUT_MS");
  }
}

int MPI_Testsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[]) {
  int cls = check_array(incount, reqs, "MPI_Testsome");
  if (cls != MPI_SUCCESS) return cls;
  if (!outcount || (incount > 0 && !indices))
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Testsome", "NULL argument");
  background();
  int n = 0, any_active = 0, failed = 0;
  nxm_comm_t *fc = NULL;
  for (int i = 0; i < incount; i++) {
    nxm_req_t *r = poll_done(reqs[i], &any_active);
    if (!r) continue;
    note_failure(r, &failed, &fc);
    indices[n] = i;
    MPI_Status tmp;
    nxm_req_complete(&reqs[i], statuses ? &statuses[n] : &tmp);
    n++;
  }
  *outcount = any_active ? n : MPI_UNDEFINED;
  if (!failed) return MPI_SUCCESS;
  cls = report(fc, statuses ? MPI_ERR_IN_STATUS : failed, "MPI_Testsome");
  nxm_comm_unref(fc);
  return cls;
}

int MPI_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[]) {
  nxm_spin_t sp;
  nxm_spin_init(&sp);
  for (;;) {
    int cls = MPI_Testsome(incount, reqs, outcount, indices, statuses);
    if (cls != MPI_SUCCESS || *outcount != 0) return cls;
    if (!nxm_spin(&sp, NULL))
      return nxm_err(NULL, MPI_ERR_OTHER, "MPI_Waitsome",
                     "no request finished within NEXAR_OP_TIMEOUT_MS");
  }
}

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status) {
  if (!flag)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Request_get_status", "NULL");
  if (request != MPI_REQUEST_NULL && !nxm_req_get(request))
    return nxm_err(NULL, MPI_ERR_REQUEST, "MPI_Request_get_status",
                   "invalid request");
  *flag = 1;
  if (inactive(request)) {
    nxm_status_empty(status);
    return MPI_SUCCESS;
  }
  background();
  nxm_req_t *r = nxm_req_get(request);
  int done = 0;
  nxm_req_poll(r, &done);
  *flag = done;
  if (done && status) {
    *status = r->status;
    status->MPI_ERROR = r->error;
  }
  return MPI_SUCCESS;
}

int MPI_Request_free(MPI_Request *request) {
  int cls = check_req(request, "MPI_Request_free");
  if (cls != MPI_SUCCESS) return cls;
  nxm_req_t *r = nxm_req_get(*request);
  if (!r)
    return nxm_err(NULL, MPI_ERR_REQUEST, "MPI_Request_free",
                   "MPI_REQUEST_NULL");
  *request = MPI_REQUEST_NULL;
  int done = 0;
  if (r->persistent && !r->active) done = 1;
  if (!done) nxm_req_poll(r, &done);
  if (done) {
    nxm_req_free(r);
    return MPI_SUCCESS;
  }
  r->persistent = 0; /* freed when it completes */
  nxm_lock();
  int room = g_norphans < (int)(sizeof g_orphans / sizeof g_orphans[0]);
  if (room) g_orphans[g_norphans++] = r;
  nxm_unlock();
  if (!room) {
    nxm_req_wait(r);
    nxm_req_free(r);
  }
  return MPI_SUCCESS;
}

/* Cancels a pending receive (nexar_cancel); other requests complete as
 * usual, which MPI allows (MPI_Test_cancelled then says false). */
int MPI_Cancel(MPI_Request *request) {
  int cls = check_req(request, "MPI_Cancel");
  if (cls != MPI_SUCCESS) return cls;
  nxm_req_t *r = nxm_req_get(*request);
  if (!r) return nxm_err(NULL, MPI_ERR_REQUEST, "MPI_Cancel", "NULL");
  if (r->kind == NXM_REQ_RECV && !r->done && r->sub[0]) {
    int rc = nexar_cancel(r->sub[0]);
    if (rc != NEXAR_OK) return nxm_err_nexar(r->comm, "MPI_Cancel", rc);
  }
  return MPI_SUCCESS;
}

int MPI_Start(MPI_Request *request) {
  int cls = check_req(request, "MPI_Start");
  if (cls != MPI_SUCCESS) return cls;
  nxm_req_t *r = nxm_req_get(*request);
  if (!r || !r->persistent || r->active)
    return nxm_err(r ? r->comm : NULL, MPI_ERR_REQUEST, "MPI_Start",
                   "not an inactive persistent request");
  return nxm_p2p_start(r);
}

int MPI_Startall(int count, MPI_Request array_of_requests[]) {
  int cls = check_array(count, array_of_requests, "MPI_Startall");
  for (int i = 0; cls == MPI_SUCCESS && i < count; i++)
    cls = MPI_Start(&array_of_requests[i]);
  return cls;
}

/* ---- Generalized requests */

typedef struct greq {
  MPI_Grequest_query_function *query;
  MPI_Grequest_free_function *free_fn;
  MPI_Grequest_cancel_function *cancel;
  void *extra;
  atomic_int complete;
} greq_t;

static int greq_progress(nxm_req_t *r, int *done) {
  greq_t *g = r->state;
  *done = atomic_load(&g->complete);
  return MPI_SUCCESS;
}

static int greq_finish(nxm_req_t *r, int rc) {
  greq_t *g = r->state;
  if (g->query) rc = g->query(g->extra, &r->status);
  if (g->free_fn) {
    int frc = g->free_fn(g->extra);
    if (rc == MPI_SUCCESS) rc = frc;
  }
  free(g);
  r->state = NULL;
  return rc;
}

int MPI_Grequest_start(MPI_Grequest_query_function *query_fn,
                       MPI_Grequest_free_function *free_fn,
                       MPI_Grequest_cancel_function *cancel_fn,
                       void *extra_state, MPI_Request *request) {
  if (!request) return nxm_err(NULL, MPI_ERR_ARG, "MPI_Grequest_start", "NULL");
  greq_t *g = calloc(1, sizeof *g);
  nxm_req_t *r = g ? nxm_req_new(NXM_REQ_GREQ, NULL, 0) : NULL;
  if (!r) {
    free(g);
    return nxm_err(NULL, MPI_ERR_NO_MEM, "MPI_Grequest_start", "out of memory");
  }
  *g = (greq_t){query_fn, free_fn, cancel_fn, extra_state, 0};
  r->state = g;
  r->progress = greq_progress;
  r->finish = greq_finish;
  *request = (MPI_Request)r;
  return MPI_SUCCESS;
}

int MPI_Grequest_complete(MPI_Request request) {
  nxm_req_t *r = nxm_req_get(request);
  if (!r || r->kind != NXM_REQ_GREQ || !r->state)
    return nxm_err(NULL, MPI_ERR_REQUEST, "MPI_Grequest_complete",
                   "not a generalized request");
  atomic_store(&((greq_t *)r->state)->complete, 1);
  return MPI_SUCCESS;
}
