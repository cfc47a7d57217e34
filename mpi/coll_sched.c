/*
 * The machinery under the MPI layer's collectives (coll_int.h): the state
 * of one collective (temporaries, datatype references, contiguous images
 * of user buffers), the schedule of layer-built collectives and the
 * request hooks that run it, and the argument checks they share.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_int.h"

enum { CS_SEND, CS_RECV, CS_APPLY, CS_COPY, CS_FENCE };

typedef struct cs_step {
  int kind; /* CS_* */
  int peer, tag;
  const void *src; /* SEND, APPLY (in), COPY */
  void *dst;       /* RECV, APPLY (inout), COPY */
  size_t count;    /* of |t| */
  const nxm_dtype_t *t;
  size_t dcount; /* COPY: the destination */
  const nxm_dtype_t *dt;
} cs_step_t;

struct nxm_cs {
  nxm_comm_t *c;
  const nxm_op_t *op;
  int nomem; /* an allocation failed while building */
  cs_step_t *steps;
  size_t nsteps, cap, pc;
  size_t round, max_round; /* messages in the round being built, most */
  void **tmps;
  size_t ntmps, tmpcap;
  nxm_dtype_t **refs;
  size_t nrefs, refcap;
};

/* Grows *arr (elements of |size|) so that it holds one more than *n. */
static int grow(void *arr, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 8;
  if (nc > (size_t)NXM_MAX_ITEMS) return -1;
  void *p = realloc(*(void **)arr, nc * size);
  if (!p) return -1;
  *(void **)arr = p;
  *cap = nc;
  return 0;
}

nxm_cs_t *nxm_cs_new(nxm_comm_t *c, const nxm_op_t *op) {
  nxm_cs_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->c = c;
  s->op = op;
  nxm_op_ref(op); /* MPI_Op_free may come before the collective ends */
  return s;
}

void nxm_cs_free(nxm_cs_t *s) {
  if (!s) return;
  nxm_op_unref(s->op);
  for (size_t i = 0; i < s->ntmps; i++) free(s->tmps[i]);
  for (size_t i = 0; i < s->nrefs; i++) nxm_dtype_unref(s->refs[i]);
  free(s->tmps);
  free(s->refs);
  free(s->steps);
  free(s);
}

int nxm_cs_nomem(const nxm_cs_t *s) {
  return s->nomem;
}

void *nxm_cs_alloc(nxm_cs_t *s, size_t bytes) {
  void *p = NULL;
  if (grow(&s->tmps, &s->tmpcap, s->ntmps, sizeof *s->tmps) == 0)
    p = malloc(bytes ? bytes : 1);
  if (p)
    s->tmps[s->ntmps++] = p;
  else
    s->nomem = 1;
  return p;
}

void *nxm_cs_tbuf(nxm_cs_t *s, size_t count, const nxm_dtype_t *t) {
  /* Element i's data lies in [i x extent + true_lb, ... + true_extent). */
  MPI_Aint lo = t->true_lb, hi = t->true_lb + t->true_extent;
  if (count > 1) {
    MPI_Aint ext = t->extent < 0 ? -t->extent : t->extent;
    if (ext && count - 1 > (size_t)(PTRDIFF_MAX / 4) / (size_t)ext) {
      s->nomem = 1;
      return NULL;
    }
    MPI_Aint last = (MPI_Aint)(count - 1) * t->extent;
    if (last < 0) lo += last;
    if (last > 0) hi += last;
  }
  uint8_t *p = nxm_cs_alloc(s, count ? (size_t)(hi - lo) : 0);
  return p ? p - lo : NULL;
}

int nxm_cs_ref(nxm_cs_t *s, const nxm_dtype_t *t) {
  if (t->kind == NXM_DT_PREDEF) return MPI_SUCCESS; /* static */
  if (grow(&s->refs, &s->refcap, s->nrefs, sizeof *s->refs) != 0) {
    s->nomem = 1;
    return MPI_ERR_NO_MEM;
  }
  nxm_dtype_ref((nxm_dtype_t *)t);
  s->refs[s->nrefs++] = (nxm_dtype_t *)t;
  return MPI_SUCCESS;
}

const nxm_dtype_t *nxm_byte(void) {
  return nxm_dtype_get(MPI_BYTE);
}

int nxm_copy(const void *src, size_t scount, const nxm_dtype_t *st, void *dst,
             size_t dcount, const nxm_dtype_t *dt) {
  size_t bytes = scount * (size_t)st->size;
  if (st->contig && dt->contig) {
    if (bytes && src != dst) memmove(dst, src, bytes);
    return MPI_SUCCESS;
  }
  if (st->contig) {
    nxm_unpack(src, bytes, dcount, dt, dst);
    return MPI_SUCCESS;
  }
  if (dt->contig) {
    nxm_pack(src, scount, st, dst);
    return MPI_SUCCESS;
  }
  void *tmp = malloc(bytes ? bytes : 1);
  if (!tmp) return MPI_ERR_NO_MEM;
  nxm_pack(src, scount, st, tmp);
  nxm_unpack(tmp, bytes, dcount, dt, dst);
  free(tmp);
  return MPI_SUCCESS;
}

/* ---- Images for the native path */

void *nxm_cs_image(nxm_cs_t *s, const void *buf, size_t count,
                   const nxm_dtype_t *t, int in, int out) {
  if (t->contig || count == 0) return (void *)buf;
  size_t bytes = count * (size_t)t->size;
  void *p = nxm_cs_alloc(s, bytes);
  if (!p) return NULL;
  if (in) nxm_pack(buf, count, t, p);
  if (out) nxm_cs_ref(s, t);
  if (out) nxm_cs_copy(s, p, bytes, nxm_byte(), (void *)buf, count, t);
  return p;
}

void *nxm_cs_vimage(nxm_cs_t *s, const void *buf, int n, const int *counts,
                    const int *displs, const nxm_dtype_t *t, int in, int out,
                    size_t *bcounts, size_t *bdispls) {
  size_t es = (size_t)t->size, total = 0;
  for (int i = 0; i < n; i++) {
    bcounts[i] = (size_t)counts[i] * es;
    total += bcounts[i];
  }
  if (t->contig) {
    /* The user's buffer, based at its lowest block. */
    int lo = 0;
    for (int i = 0; i < n; i++)
      if (i == 0 || displs[i] < lo) lo = displs[i];
    for (int i = 0; i < n; i++)
      bdispls[i] = (size_t)((MPI_Aint)displs[i] - lo) * es;
    return (uint8_t *)buf + (MPI_Aint)lo * t->extent;
  }
  uint8_t *p = nxm_cs_alloc(s, total);
  if (!p) return NULL;
  if (out) nxm_cs_ref(s, t);
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    bdispls[i] = off;
    const uint8_t *ub = (const uint8_t *)buf + (MPI_Aint)displs[i] * t->extent;
    if (in) nxm_pack(ub, (size_t)counts[i], t, p + off);
    if (out)
      nxm_cs_copy(s, p + off, bcounts[i], nxm_byte(), (void *)ub,
                  (size_t)counts[i], t);
    off += bcounts[i];
  }
  return p;
}

/* ---- Schedule */

static cs_step_t *step(nxm_cs_t *s, int kind) {
  if (grow(&s->steps, &s->cap, s->nsteps, sizeof *s->steps) != 0) {
    s->nomem = 1;
    return NULL;
  }
  cs_step_t *p = &s->steps[s->nsteps++];
  memset(p, 0, sizeof *p);
  p->kind = kind;
  return p;
}

static void message(nxm_cs_t *s, int kind, const void *buf, size_t count,
                    const nxm_dtype_t *t, int peer, int tag) {
  if (peer == MPI_PROC_NULL) return;
  cs_step_t *p = step(s, kind);
  if (!p) return;
  p->peer = peer;
  p->tag = tag;
  p->src = buf;
  p->dst = (void *)buf;
  p->count = count;
  p->t = t;
  if (++s->round > s->max_round) s->max_round = s->round;
}

void nxm_cs_send(nxm_cs_t *s, const void *buf, size_t count,
                 const nxm_dtype_t *t, int peer, int tag) {
  message(s, CS_SEND, buf, count, t, peer, tag);
}

void nxm_cs_recv(nxm_cs_t *s, void *buf, size_t count, const nxm_dtype_t *t,
                 int peer, int tag) {
  message(s, CS_RECV, buf, count, t, peer, tag);
}

void nxm_cs_apply(nxm_cs_t *s, const void *in, void *inout, size_t count,
                  const nxm_dtype_t *t) {
  cs_step_t *p = step(s, CS_APPLY);
  if (!p) return;
  p->src = in;
  p->dst = inout;
  p->count = count;
  p->t = t;
}

void nxm_cs_copy(nxm_cs_t *s, const void *src, size_t scount,
                 const nxm_dtype_t *st, void *dst, size_t dcount,
                 const nxm_dtype_t *dt) {
  cs_step_t *p = step(s, CS_COPY);
  if (!p) return;
  p->src = src;
  p->dst = dst;
  p->count = scount;
  p->t = st;
  p->dcount = dcount;
  p->dt = dt;
}

void nxm_cs_fence(nxm_cs_t *s) {
  if (s->nsteps && s->steps[s->nsteps - 1].kind == CS_FENCE) return;
  step(s, CS_FENCE);
  s->round = 0;
}

/* Runs one step; messages go to sub-request *slot. */
static int run_step(nxm_req_t *r, nxm_cs_t *s, const cs_step_t *p,
                    size_t *slot) {
  nexar_comm_t *cc = s->c->cc;
  switch (p->kind) {
    case CS_SEND:
      return nxm_p2p_isend(r, (*slot)++, cc, p->src, p->count, p->t, p->peer,
                           p->tag);
    case CS_RECV:
      return nxm_p2p_irecv(r, (*slot)++, cc, p->dst, p->count, p->t, p->peer,
                           p->tag);
    case CS_APPLY:
      return nxm_op_apply(s->op, p->src, p->dst, p->count, p->t);
    case CS_COPY:
      return nxm_copy(p->src, p->count, p->t, p->dst, p->dcount, p->dt);
    default:
      return MPI_SUCCESS;
  }
}

/* Progress hook: once the round's messages have finished, runs the steps
 * up to the next fence that posts messages. */
static int cs_progress(nxm_req_t *r, int *done) {
  nxm_cs_t *s = r->state;
  *done = 0;
  for (;;) {
    for (size_t i = 0; i < r->nsub; i++)
      if (r->sub[i]) return MPI_SUCCESS;
    if (s->pc == s->nsteps) {
      *done = 1;
      return MPI_SUCCESS;
    }
    size_t slot = 0;
    while (s->pc < s->nsteps) {
      const cs_step_t *p = &s->steps[s->pc++];
      if (p->kind == CS_FENCE) break;
      int cls = run_step(r, s, p, &slot);
      if (cls != MPI_SUCCESS) return cls;
    }
  }
}

/* Finish hook: the native path's copies (unpacking into user buffers)
 * run once the nexar collective succeeded; then the state goes. */
static int cs_finish(nxm_req_t *r, int rc) {
  nxm_cs_t *s = r->state;
  size_t slot = 0;
  while (rc == MPI_SUCCESS && s->pc < s->nsteps) {
    const cs_step_t *p = &s->steps[s->pc++];
    if (p->kind == CS_COPY || p->kind == CS_APPLY)
      rc = run_step(r, s, p, &slot);
  }
  nxm_cs_free(s);
  r->state = NULL;
  return rc;
}

static int make_req(nxm_cs_t *s, const char *fn, size_t nsub, nxm_req_t **out) {
  nxm_comm_t *c = s->c;
  nxm_req_t *r = s->nomem ? NULL : nxm_req_new(NXM_REQ_COLL, c, nsub);
  if (!r) {
    nxm_cs_free(s);
    return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  }
  r->state = s;
  r->finish = cs_finish;
  *out = r;
  return MPI_SUCCESS;
}

int nxm_cs_start(nxm_cs_t *s, const char *fn, nxm_req_t **out) {
  nxm_comm_t *c = s->c;
  int cls = make_req(s, fn, s->max_round, out);
  if (cls != MPI_SUCCESS) return cls;
  nxm_req_t *r = *out;
  r->progress = cs_progress;
  int done = 0;
  cls = cs_progress(r, &done);
  if (cls == MPI_SUCCESS) {
    /* Later rounds: stepped from every MPI call until it finishes. */
    if (!done) nxm_progress_add(r);
    return MPI_SUCCESS;
  }
  /* Nothing of this round may stay in flight with the request gone. */
  r->progress = NULL;
  r->error = cls;
  nxm_req_wait(r);
  nxm_req_free(r);
  *out = NULL;
  return nxm_err(c, cls, fn, "cannot start the layer's schedule");
}

int nxm_cs_native(nxm_cs_t *s, const char *fn, nxm_req_t **out) {
  return make_req(s, fn, 1, out);
}

int nxm_cs_fail(nxm_req_t *r, const char *fn, int rc) {
  nxm_comm_t *c = r->comm;
  atomic_fetch_add(&c->refs, 1);
  nxm_cs_free(r->state);
  r->state = NULL;
  r->finish = NULL;
  nxm_req_free(r);
  int cls = nxm_err_nexar(c, fn, rc);
  nxm_comm_unref(c);
  return cls;
}

/* ---- Calls */

int nxm_coll_begin(MPI_Comm comm, const char *fn, nxm_comm_t **c) {
  int cls = nxm_check_init(fn);
  if (cls != MPI_SUCCESS) return cls;
  *c = nxm_comm_get(comm);
  if (!*c) return nxm_err(NULL, MPI_ERR_COMM, fn, "invalid communicator");
  return MPI_SUCCESS;
}

int nxm_coll_block(nxm_comm_t *c, const char *fn, int cls, nxm_req_t *r) {
  if (cls != MPI_SUCCESS || !r || r == NXM_REQ_BLOCKING) return cls;
  /* Layer-built schedules run on c->cc, the rest on c->nc. */
  nexar_comm_t *on = r->progress ? c->cc : c->nc;
  cls = nxm_req_wait(r);
  nxm_req_free(r);
  if (cls == MPI_SUCCESS) return cls;
  return nxm_err(c, cls, fn, "%s", nexar_comm_last_error(on));
}

int nxm_coll_post(int cls, nxm_req_t *r, MPI_Request *request) {
  if (cls == MPI_SUCCESS) *request = (MPI_Request)r;
  return cls;
}

/* ---- Argument checks */

int nxm_coll_type(nxm_comm_t *c, const char *fn, const void *buf, int count,
                  MPI_Datatype h, nxm_dtype_t **t) {
  size_t bytes;
  int cls = nxm_dtype_check(h, count, t, &bytes);
  if (cls == MPI_SUCCESS) return nxm_coll_buf(c, fn, buf, count, *t);
  return nxm_err(
      c, cls, fn, "%s (count %d)",
      cls == MPI_ERR_TYPE ? "invalid or uncommitted datatype" : "invalid count",
      count);
}

int nxm_coll_counts(nxm_comm_t *c, const char *fn, int n, const int *counts,
                    const void *displs) {
  if (!counts || !displs)
    return nxm_err(c, MPI_ERR_ARG, fn, "NULL counts or displacements");
  for (int i = 0; i < n; i++)
    if (counts[i] < 0)
      return nxm_err(c, MPI_ERR_COUNT, fn, "count %d of rank %d", counts[i], i);
  return MPI_SUCCESS;
}

int nxm_coll_op(nxm_comm_t *c, const char *fn, MPI_Op h, const nxm_dtype_t *t,
                nxm_op_t **op) {
  *op = nxm_op_get(h);
  if (!*op) return nxm_err(c, MPI_ERR_OP, fn, "invalid op");
  nexar_op_t nop;
  nexar_dtype_t ndt;
  MPI_Aint scale;
  if ((*op)->user_fn || nxm_op_native(*op, t, &nop, &ndt, &scale))
    return MPI_SUCCESS;
  /* A predefined op the kernels do not define for this type fails on no
   * elements already. */
  uint8_t dummy[64];
  if (nxm_op_apply(*op, dummy, dummy, 0, t) != MPI_SUCCESS)
    return nxm_err(c, MPI_ERR_OP, fn, "op not defined for datatype %s",
                   t->name);
  return MPI_SUCCESS;
}

void nxm_coll_work(const nxm_op_t *op, const nxm_dtype_t *t,
                   const nxm_dtype_t **wt, size_t *scale) {
  *wt = op->user_fn ? t : nxm_byte();
  *scale = op->user_fn ? 1 : (size_t)t->size;
}

int nxm_coll_buf(nxm_comm_t *c, const char *fn, const void *buf, int count,
                 const nxm_dtype_t *t) {
  if (buf || count == 0 || !t->contig || t->size == 0) return MPI_SUCCESS;
  return nxm_err(c, MPI_ERR_BUFFER, fn, "NULL buffer for %d elements", count);
}
