/*
 * Bucketed multi-tensor allreduce (include/nexar.h: nexar_multi_*): the
 * tensors of a list are cut into buckets of NEXAR_BUCKET_BYTES in list
 * order, the same on every rank; a bucket's allreduce (nexar_iallreduce in
 * place) starts as soon as its tensors are ready and every bucket before
 * it has started, so buckets start in bucket order on every rank whatever
 * order the tensors are marked in (Li et al. 2020, "PyTorch Distributed:
 * Experiences on Accelerating Data Parallel Training", section 3.2). A
 * bucket of one tensor is reduced in that tensor's buffer; a bucket of
 * several is packed into a buffer of its own at its start and unpacked when
 * it is waited for. User threads only; one thread per object at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "coll/reduce.h"

typedef struct {
  size_t first, n;  /* tensors first .. first + n - 1 */
  size_t left;      /* of them not yet marked ready this step */
  uint64_t count;   /* elements */
  uint8_t *pack;    /* own buffer (several tensors), or NULL */
  nexar_req_t *req; /* its allreduce, once started and until it ends */
  bool ended;       /* this step: it ended (or failed to start) with rc */
  int rc;
} bucket_t;

struct nexar_multi {
  nexar_comm_t *comm;
  nexar_dtype_t dtype;
  nexar_op_t op;
  size_t es;
  size_t n, nb;
  nexar_tensor_t *t; /* [n] */
  size_t *bucket_of; /* [n] */
  uint8_t *ready;    /* [n]: marked this step */
  bucket_t *b;       /* [nb] */
  size_t next;       /* the next bucket to start */
  size_t marked;     /* tensors marked this step */
  uint64_t t_first;  /* when this step's first bucket started (ns) */
  nexar_multi_info_t info;
};

typedef struct {
  uintptr_t lo, hi;
  size_t i;
} span_t;

static int span_cmp(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int fail(nexar_comm_t *comm, int rc, const char *fmt, size_t a,
                size_t b) {
  char text[160];
  snprintf(text, sizeof text, fmt, a, b);
  nexar__comm_set_error(comm, "rank %d: multi allreduce: %s", comm->rank, text);
  return rc;
}

/* Checks the list (nothing allocated yet): one dtype, buffers for
 * non-empty tensors, no two overlapping, host memory. */
static int check(nexar_comm_t *comm, const nexar_tensor_t *t, size_t n,
                 nexar_op_t op) {
  if (!t || !n || n > NEXAR_MULTI_MAX)
    return fail(comm, NEXAR_ERR_INVALID_ARG,
                "a list of %zu tensors (NULL: %zu); 1..NEXAR_MULTI_MAX", n, !t);
  int rc = nexar__reduce_check(t[0].dtype, op);
  if (rc < 0)
    return fail(comm, rc, "dtype %zu with op %zu is not supported",
                (size_t)t[0].dtype, (size_t)op);
  size_t es = nexar_dtype_size(t[0].dtype);
  span_t *s = malloc(n * sizeof(*s));
  if (!s) return NEXAR_ERR_NOMEM;
  size_t k = 0;
  rc = NEXAR_OK;
  for (size_t i = 0; i < n && rc == NEXAR_OK; i++) {
    if (t[i].dtype != t[0].dtype)
      rc = fail(comm, NEXAR_ERR_INVALID_ARG,
                "tensor %zu has another dtype than tensor 0 (%zu); one "
                "dtype per list",
                i, (size_t)t[0].dtype);
    else if (t[i].count &&
             (!t[i].buf || t[i].count > SIZE_MAX / es ||
              (uintptr_t)t[i].buf > UINTPTR_MAX - t[i].count * es))
      rc = fail(comm, NEXAR_ERR_INVALID_ARG,
                "tensor %zu of %zu elements has a NULL or wrapping buffer", i,
                t[i].count);
    else if (t[i].count)
      s[k++] = (span_t){(uintptr_t)t[i].buf,
                        (uintptr_t)t[i].buf + t[i].count * es, i};
  }
  if (rc == NEXAR_OK) {
    qsort(s, k, sizeof(*s), span_cmp);
    for (size_t j = 1; j < k && rc == NEXAR_OK; j++)
      if (s[j].lo < s[j - 1].hi)
        rc = fail(comm, NEXAR_ERR_INVALID_ARG,
                  "the buffers of tensors %zu and %zu overlap",
                  s[j - 1].i < s[j].i ? s[j - 1].i : s[j].i,
                  s[j - 1].i < s[j].i ? s[j].i : s[j - 1].i);
  }
  nexar__dev_t *dev = &comm->ctx->dev;
  for (size_t j = 0; j < k && rc == NEXAR_OK && !nexar__dev_host_only(dev);
       j++) {
    int kind = nexar__dev_classify(dev, comm, "multi allreduce", "tensor",
                                   (void *)s[j].lo, s[j].hi - s[j].lo);
    if (kind < 0) rc = kind;
    if (kind == NEXAR_MEM_DEVICE)
      rc = fail(comm, NEXAR_ERR_UNSUPPORTED,
                "tensor %zu (%zu bytes) is in device memory; host only", s[j].i,
                s[j].hi - s[j].lo);
  }
  free(s);
  return rc;
}

/* Cuts the list into buckets of at most |cap| bytes (a larger tensor
 * alone); returns their number, each bucket's extent filled when |b|. */
static size_t cut(const nexar_tensor_t *t, size_t n, size_t es, uint64_t cap,
                  bucket_t *b, size_t *bucket_of) {
  size_t nb = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t tb = (uint64_t)t[i].count * es;
    if (i == 0 || bytes + tb > cap) {
      if (b) b[nb] = (bucket_t){.first = i};
      nb++;
      bytes = 0;
    }
    bytes += tb;
    if (b) {
      b[nb - 1].n++;
      b[nb - 1].count += t[i].count;
      bucket_of[i] = nb - 1;
    }
  }
  return nb;
}

int nexar_multi_free(nexar_multi_t **pm) {
  if (!pm || !*pm) return NEXAR_OK;
  nexar_multi_t *m = *pm;
  int rc = NEXAR_OK;
  for (size_t j = 0; j < m->next; j++) {
    int r = nexar_wait(&m->b[j].req, NULL); /* nothing left in flight */
    if (rc == NEXAR_OK && r < 0) rc = r;
  }
  /* m->b is NULL when nexar_multi_create ran out of memory for it. */
  for (size_t j = 0; m->b && j < m->nb; j++) free(m->b[j].pack);
  free(m->b);
  free(m->t);
  free(m->bucket_of);
  free(m->ready);
  free(m);
  *pm = NULL;
  return rc;
}

int nexar_multi_create(nexar_comm_t *comm, const nexar_tensor_t *tensors,
                       size_t n, nexar_op_t op, nexar_multi_t **out) {
  if (!comm || !out) return NEXAR_ERR_INVALID_ARG;
  *out = NULL;
  int rc = check(comm, tensors, n, op);
  if (rc < 0) return rc;
  size_t es = nexar_dtype_size(tensors[0].dtype);
  uint64_t cap = (uint64_t)comm->ctx->prm.bucket_bytes;
  size_t nb = cut(tensors, n, es, cap, NULL, NULL);
  nexar_multi_t *m = nexar__zalloc(sizeof(*m));
  if (!m) return NEXAR_ERR_NOMEM;
  m->comm = comm;
  m->dtype = tensors[0].dtype;
  m->op = op;
  m->es = es;
  m->n = n;
  m->nb = nb;
  m->t = malloc(n * sizeof(*m->t));
  m->bucket_of = malloc(n * sizeof(*m->bucket_of));
  m->ready = calloc(n, 1);
  m->b = calloc(nb, sizeof(*m->b));
  if (!m->t || !m->bucket_of || !m->ready || !m->b) goto nomem;
  memcpy(m->t, tensors, n * sizeof(*m->t));
  cut(tensors, n, es, cap, m->b, m->bucket_of);
  for (size_t j = 0; j < nb; j++) {
    bucket_t *b = &m->b[j];
    b->left = b->n;
    m->info.bytes += b->count * es;
    if (b->n > 1 && b->count) {
      b->pack = malloc(b->count * es);
      if (!b->pack) goto nomem;
      m->info.packed++;
      m->info.packed_bytes += b->count * es;
    }
  }
  m->info.buckets = nb;
  *out = m;
  return NEXAR_OK;
nomem:
  nexar_multi_free(&m);
  return NEXAR_ERR_NOMEM;
}

/* Starts the buckets whose turn it is: each once all its tensors are
 * ready and all before it have started. Returns the first error. */
static int launch(nexar_multi_t *m) {
  int first = NEXAR_OK;
  for (; m->next < m->nb && !m->b[m->next].left; m->next++) {
    bucket_t *b = &m->b[m->next];
    uint8_t *buf = b->pack ? b->pack : m->t[b->first].buf;
    if (b->pack) {
      uint8_t *p = b->pack;
      for (size_t i = b->first; i < b->first + b->n; i++) {
        size_t k = m->t[i].count * m->es;
        if (k) memcpy(p, m->t[i].buf, k);
        p += k;
      }
    }
    if (!m->next) m->t_first = nexar__now();
    int rc = nexar_iallreduce(m->comm, NEXAR_IN_PLACE, buf, b->count, m->dtype,
                              m->op, &b->req);
    if (rc < 0) {
      b->req = NULL;
      b->ended = true;
      b->rc = rc;
      if (first == NEXAR_OK) first = rc;
    }
  }
  return first;
}

int nexar_multi_ready(nexar_multi_t *m, size_t i) {
  if (!m) return NEXAR_ERR_INVALID_ARG;
  if (i >= m->n)
    return fail(m->comm, NEXAR_ERR_INVALID_ARG,
                "tensor %zu marked ready; the list has %zu", i, m->n);
  if (m->ready[i])
    return fail(m->comm, NEXAR_ERR_INVALID_USAGE,
                "tensor %zu marked ready twice in one step (%zu marked)", i,
                m->marked);
  m->ready[i] = 1;
  m->marked++;
  m->b[m->bucket_of[i]].left--;
  return launch(m);
}

/* Ends the step: waits for every bucket, unpacks, resets. */
static int finish(nexar_multi_t *m) {
  uint64_t t0 = nexar__now();
  int rc = NEXAR_OK;
  for (size_t j = 0; j < m->nb; j++) {
    bucket_t *b = &m->b[j];
    int r = b->req ? nexar_wait(&b->req, NULL) : b->rc;
    if (r == NEXAR_OK && b->pack) {
      const uint8_t *p = b->pack;
      for (size_t i = b->first; i < b->first + b->n; i++) {
        size_t k = m->t[i].count * m->es;
        if (k) memcpy(m->t[i].buf, p, k);
        p += k;
      }
    }
    if (rc == NEXAR_OK && r < 0) rc = r;
    b->left = b->n;
    b->ended = false;
    b->rc = NEXAR_OK;
  }
  uint64_t t1 = nexar__now();
  m->info.wait_ns = t1 - t0;
  m->info.comm_ns = t1 - m->t_first;
  m->info.steps++;
  memset(m->ready, 0, m->n);
  m->marked = 0;
  m->next = 0;
  return rc;
}

/* NEXAR_ERR_INVALID_USAGE (message recorded) unless every tensor is
 * marked ready this step. */
static int all_marked(nexar_multi_t *m) {
  if (m->marked == m->n) return NEXAR_OK;
  size_t i = 0;
  while (m->ready[i]) i++;
  return fail(m->comm, NEXAR_ERR_INVALID_USAGE,
              "wait with tensor %zu not marked ready (%zu marked)", i,
              m->marked);
}

int nexar_multi_wait(nexar_multi_t *m) {
  if (!m) return NEXAR_ERR_INVALID_ARG;
  int rc = all_marked(m);
  return rc < 0 ? rc : finish(m);
}

int nexar_multi_test(nexar_multi_t *m, int *done) {
  if (!m || !done) return NEXAR_ERR_INVALID_ARG;
  *done = 0;
  int rc = all_marked(m);
  if (rc < 0) return rc;
  for (size_t j = 0; j < m->nb; j++) {
    bucket_t *b = &m->b[j];
    if (b->ended) continue;
    int d = 0;
    rc = nexar_test(&b->req, &d, NULL); /* frees it when finished */
    if (!d) return NEXAR_OK;
    b->ended = true;
    b->rc = rc;
  }
  *done = 1;
  return finish(m);
}

int nexar_multi_get_info(const nexar_multi_t *m, nexar_multi_info_t *info) {
  if (!m || !info) return NEXAR_ERR_INVALID_ARG;
  *info = m->info;
  return NEXAR_OK;
}

int nexar_iallreduce_multi(nexar_comm_t *comm, const nexar_tensor_t *tensors,
                           size_t n, nexar_op_t op, nexar_multi_t **out) {
  int rc = nexar_multi_create(comm, tensors, n, op, out);
  for (size_t i = 0; rc == NEXAR_OK && i < n; i++)
    rc = nexar_multi_ready(*out, i);
  if (rc < 0) nexar_multi_free(out);
  return rc;
}

int nexar_allreduce_multi(nexar_comm_t *comm, const nexar_tensor_t *tensors,
                          size_t n, nexar_op_t op) {
  nexar_multi_t *m = NULL;
  int rc = nexar_iallreduce_multi(comm, tensors, n, op, &m);
  if (rc == NEXAR_OK) rc = nexar_multi_wait(m);
  int fr = nexar_multi_free(&m);
  return rc < 0 ? rc : fr;
}
