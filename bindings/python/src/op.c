/*
 * Buffers, datatypes and the start of every buffer operation; the Request
 * type. A buffer is held with PyObject_GetBuffer from the moment a method
 * checks it until the operation completes: by the method for a blocking
 * call, by the Request for a non-blocking one.
 */
#include <string.h>

#include "nexarpy.h"

static const char *dtype_names[] = {"int8",    "uint8",   "int32",   "uint32",
                                    "int64",   "uint64",  "float16", "float32",
                                    "float64", "bfloat16"};
#define NDTYPES (sizeof(dtype_names) / sizeof(dtype_names[0]))

/* dtype= argument: None, a nexar datatype constant or its name. */
int npy_dtype_arg(PyObject *o, npy_op *op) {
  if (!o || o == Py_None) return 0;
  long v = -1;
  if (PyUnicode_Check(o)) {
    const char *s = PyUnicode_AsUTF8(o);
    if (!s) return -1;
    for (size_t i = 0; i < NDTYPES; i++)
      if (strcmp(s, dtype_names[i]) == 0) v = (long)i;
  } else if (PyLong_Check(o)) {
    v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
  }
  if (v < 0 || v >= (long)NDTYPES) {
    npy_invalid(
        "dtype must be a nexar datatype (nexar.FLOAT32, "
        "'bfloat16', ...), not %R",
        o);
    return -1;
  }
  op->dtype = (nexar_dtype_t)v;
  op->have_dtype = 2;
  return 0;
}

/* The nexar datatype of a struct-module format, or -1. */
static int format_dtype(const char *f, Py_ssize_t itemsize) {
  if (!f) return NEXAR_UINT8;
  if (*f == '@' || *f == '=' || *f == '<' || *f == '|') f++;
  if (!f[0] || f[1]) return -1;
  switch (f[0]) {
    case 'b':
      return NEXAR_INT8;
    case 'B':
    case 'c':
      return NEXAR_UINT8;
    case 'e':
      return NEXAR_FLOAT16;
    case 'f':
      return NEXAR_FLOAT32;
    case 'd':
      return NEXAR_FLOAT64;
    case 'i':
    case 'l':
    case 'q':
    case 'n':
      return itemsize == 4 ? NEXAR_INT32 : itemsize == 8 ? NEXAR_INT64 : -1;
    case 'I':
    case 'L':
    case 'Q':
    case 'N':
      return itemsize == 4 ? NEXAR_UINT32 : itemsize == 8 ? NEXAR_UINT64 : -1;
  }
  return -1;
}

int npy_buffer(npy_op *op, PyObject *obj, int writable, const char *what,
               size_t *count) {
  if (!PyObject_CheckBuffer(obj)) {
    PyErr_Format(PyExc_TypeError,
                 "%s: %s must support the buffer protocol (numpy array, "
                 "bytearray, memoryview), not %.100s",
                 op->name, what, Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (op->nviews == 2) { /* every operation has two buffers at most */
    npy_raise(NEXAR_ERR_INTERNAL, op->name, "more than two buffers");
    return -1;
  }
  Py_buffer *v = &op->views[op->nviews];
  int flags =
      PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj, v, flags) < 0) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    npy_invalid("%s: %s must be a %sC-contiguous buffer (%S)", op->name, what,
                writable ? "writable, " : "", value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -1;
  }
  op->nviews++;
  int dt = format_dtype(v->format, v->itemsize);
  if (op->have_dtype == 2) { /* given: the buffer is reinterpreted */
    dt = op->dtype;
  } else if (dt < 0) {
    npy_invalid(
        "%s: %s has format '%s', which maps to no nexar datatype "
        "(int8, uint8, int32, uint32, int64, uint64, float16, "
        "float32, float64); pass dtype=",
        op->name, what, v->format);
    return -1;
  } else if (op->have_dtype == 1 && (int)op->dtype != dt) {
    npy_invalid("%s: %s is %s but the other buffer is %s", op->name, what,
                dtype_names[dt], dtype_names[op->dtype]);
    return -1;
  }
  op->dtype = (nexar_dtype_t)dt;
  if (!op->have_dtype) op->have_dtype = 1;
  size_t size = nexar_dtype_size(op->dtype);
  if ((size_t)v->len % size) {
    npy_invalid("%s: %s holds %zd bytes, not a whole number of %s elements",
                op->name, what, v->len, dtype_names[op->dtype]);
    return -1;
  }
  *count = (size_t)v->len / size;
  return 0;
}

/* One of the four count/displacement arrays of |op| (which: 0..3), of |n|
 * entries, from |seq| (None: the prefix sums of |counts|). */
size_t *npy_array(npy_op *op, int which, PyObject *seq, int n,
                  const size_t *counts, const char *what) {
  if (!op->arr) {
    op->arr = PyMem_Calloc(4 * (size_t)(n ? n : 1), sizeof(size_t));
    if (!op->arr) return (size_t *)PyErr_NoMemory();
  }
  size_t *out = op->arr + (size_t)which * (size_t)n;
  if (!seq || seq == Py_None) {
    if (!counts) {
      npy_invalid("%s: %s is required", op->name, what);
      return NULL;
    }
    size_t sum = 0;
    for (int i = 0; i < n; i++) {
      out[i] = sum;
      sum += counts[i];
    }
    return out;
  }
  PyObject *fast = PySequence_Fast(seq, "");
  if (!fast) {
    PyErr_Clear();
    npy_invalid("%s: %s must be a sequence of %d integers", op->name, what, n);
    return NULL;
  }
  if (PySequence_Fast_GET_SIZE(fast) != n) {
    npy_invalid("%s: %s has %zd entries, the communicator %d ranks", op->name,
                what, PySequence_Fast_GET_SIZE(fast), n);
    Py_DECREF(fast);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    Py_ssize_t x = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(fast, i));
    if (x < 0) {
      if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError) ||
          PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        npy_invalid("%s: %s[%d] must be an integer >= 0", op->name, what, i);
      }
      Py_DECREF(fast);
      return NULL;
    }
    out[i] = (size_t)x;
  }
  Py_DECREF(fast);
  return out;
}

/* Every block (counts[i] elements at displs[i]) lies within |total|. */
int npy_blocks_fit(npy_op *op, const size_t *counts, const size_t *displs,
                   int n, size_t total, const char *what) {
  for (int i = 0; i < n; i++)
    if (counts[i] > total || displs[i] > total - counts[i]) {
      npy_invalid(
          "%s: block %d of %s (%zu elements at %zu) ends past its %zu "
          "elements",
          op->name, i, what, counts[i], displs[i], total);
      return -1;
    }
  return 0;
}

void npy_op_release(npy_op *op) {
  for (int i = 0; i < op->nviews; i++) PyBuffer_Release(&op->views[i]);
  op->nviews = 0;
  PyMem_Free(op->arr);
  op->arr = NULL;
}

static int op_start(nexar_comm_t *c, const npy_op *o, nexar_req_t **req) {
  const void *s = o->sbuf;
  void *r = o->rbuf;
  nexar_dtype_t t = o->dtype;
  switch (o->kind) {
    case NPY_SEND:
      return nexar_isend(c, s, o->scount, t, o->peer, o->tag, req);
    case NPY_RECV:
      return nexar_irecv(c, r, o->rcount, t, o->peer, o->tag, req);
    case NPY_ALLREDUCE:
      return nexar_iallreduce(c, s, r, o->rcount, t, o->op, req);
    case NPY_BCAST:
      return nexar_ibcast(c, r, o->rcount, t, o->peer, req);
    case NPY_REDUCE:
      return nexar_ireduce(c, s, r, o->scount, t, o->op, o->peer, req);
    case NPY_ALLGATHER:
      return nexar_iallgather(c, s, r, o->scount, t, req);
    case NPY_ALLGATHERV:
      return nexar_iallgatherv(c, s, o->scount, r, o->rcounts, o->rdispls, t,
                               req);
    case NPY_REDUCE_SCATTER:
      return nexar_ireduce_scatter(c, s, r, o->rcounts, t, o->op, req);
    case NPY_REDUCE_SCATTER_BLOCK:
      return nexar_ireduce_scatter_block(c, s, r, o->rcount, t, o->op, req);
    case NPY_ALLTOALL:
      return nexar_ialltoall(c, s, r, o->scount, t, req);
    case NPY_ALLTOALLV:
      return nexar_ialltoallv(c, s, o->scounts, o->sdispls, r, o->rcounts,
                              o->rdispls, t, req);
    case NPY_GATHER:
      return nexar_igather(c, s, r, o->scount, t, o->peer, req);
    case NPY_GATHERV:
      return nexar_igatherv(c, s, o->scount, r, o->rcounts, o->rdispls, t,
                            o->peer, req);
    case NPY_SCATTER:
      return nexar_iscatter(c, s, r, o->rcount, t, o->peer, req);
    case NPY_SCATTERV:
      return nexar_iscatterv(c, s, o->scounts, o->sdispls, r, o->rcount, t,
                             o->peer, req);
    case NPY_SCAN:
      return nexar_iscan(c, s, r, o->rcount, t, o->op, req);
    case NPY_EXSCAN:
      return nexar_iexscan(c, s, r, o->rcount, t, o->op, req);
    case NPY_BARRIER:
      return nexar_ibarrier(c, req);
  }
  return NEXAR_ERR_INVALID_ARG;
}

/* Starts |op| on |c|; blocking: waits for it with the GIL released and
 * returns None (Recv: its Status); else returns a Request holding the
 * buffers. Releases what |op| holds in every case. */
PyObject *npy_run(npy_comm *c, npy_op *op, int blocking) {
  PyObject *res = NULL;
  if (npy_comm_check(c, op->name) < 0) goto out;
  nexar_req_t *req = NULL;
  nexar_status_t st = {0};
  int rc;
  c->ctx->busy++;
  Py_BEGIN_ALLOW_THREADS;
  rc = op_start(c->comm, op, &req);
  if (rc == NEXAR_OK && blocking) rc = nexar_wait(&req, &st);
  Py_END_ALLOW_THREADS;
  c->ctx->busy--;
  if (rc < 0)
    npy_raise_comm(rc, op->name, c->comm);
  else if (!blocking)
    res = npy_request_new(c, op, req);
  else if (op->kind == NPY_RECV)
    res = npy_status(&st, nexar_dtype_size(op->dtype));
  else
    res = Py_NewRef(Py_None);
out:
  npy_op_release(op);
  return res;
}

/* ---- Request ---- */

PyObject *npy_request_new(npy_comm *c, npy_op *op, nexar_req_t *req) {
  npy_request *r = PyObject_New(npy_request, &npy_request_type);
  if (!r) {
    /* The operation runs on: wait for it before its buffers go. */
    Py_BEGIN_ALLOW_THREADS;
    nexar_wait(&req, NULL);
    Py_END_ALLOW_THREADS;
    return NULL;
  }
  r->comm = (npy_comm *)Py_NewRef(c);
  r->req = req;
  r->name = op->name;
  memcpy(r->views, op->views, sizeof(r->views));
  r->nviews = op->nviews;
  op->nviews = 0;
  r->itemsize = nexar_dtype_size(op->dtype);
  r->waiting = 0;
  r->rc = NEXAR_OK;
  memset(&r->st, 0, sizeof(r->st));
  npy_ctx_link(c->ctx, r);
  return (PyObject *)r;
}

/* |r| is over with |rc|: its buffers are let go. */
void npy_request_end(npy_request *r, int rc) {
  r->req = NULL;
  r->rc = rc;
  r->st.error = rc;
  for (int i = 0; i < r->nviews; i++) PyBuffer_Release(&r->views[i]);
  r->nviews = 0;
  npy_ctx_unlink(r->comm->ctx, r);
}

static PyObject *request_result(npy_request *r) {
  if (r->rc < 0) {
    const char *msg = r->rc == NEXAR_ERR_CLOSED && !r->comm->ctx->ctx
                          ? "the context was finalized before the request "
                            "completed"
                          : nexar_comm_last_error(r->comm->comm);
    return npy_raise(r->rc, r->name, msg);
  }
  return npy_status(&r->st, r->itemsize);
}

static int request_busy(npy_request *r) {
  if (!r->waiting) return 0;
  npy_raise(NEXAR_ERR_INVALID_USAGE, r->name,
            "another thread is waiting on this request");
  return -1;
}

PyObject *npy_request_wait(npy_request *r) {
  if (request_busy(r) < 0) return NULL;
  if (!r->req) return request_result(r);
  npy_context *ctx = r->comm->ctx;
  int rc;
  r->waiting = 1;
  ctx->busy++;
  Py_BEGIN_ALLOW_THREADS;
  rc = nexar_wait(&r->req, &r->st);
  Py_END_ALLOW_THREADS;
  ctx->busy--;
  r->waiting = 0;
  npy_request_end(r, rc);
  return request_result(r);
}

static PyObject *request_wait(PyObject *self, PyObject *unused) {
  return npy_request_wait((npy_request *)self);
}

static PyObject *request_test(PyObject *self, PyObject *unused) {
  npy_request *r = (npy_request *)self;
  if (request_busy(r) < 0) return NULL;
  if (r->req) {
    int done = 0;
    int rc = nexar_test(&r->req, &done, &r->st);
    if (!done) Py_RETURN_FALSE;
    npy_request_end(r, rc);
  }
  if (r->rc < 0) return request_result(r);
  Py_RETURN_TRUE;
}

static PyObject *request_get_status(PyObject *self, void *unused) {
  npy_request *r = (npy_request *)self;
  if (r->req || r->rc < 0) Py_RETURN_NONE;
  return npy_status(&r->st, r->itemsize);
}

static PyObject *request_get_done(PyObject *self, void *unused) {
  return PyBool_FromLong(((npy_request *)self)->req == NULL);
}

static void request_dealloc(PyObject *self) {
  npy_request *r = (npy_request *)self;
  if (r->req) {
    /* Dropped while running: nexar may still write into the buffers. */
    int rc;
    Py_BEGIN_ALLOW_THREADS;
    rc = nexar_wait(&r->req, NULL);
    Py_END_ALLOW_THREADS;
    npy_request_end(r, rc);
  }
  Py_DECREF(r->comm);
  PyObject_Free(self);
}

static PyMethodDef request_methods[] = {
    {"wait", request_wait, METH_NOARGS,
     "wait() -> Status: waits (GIL released) until the request completes; "
     "raises its error."},
    {"test", request_test, METH_NOARGS,
     "test() -> bool: True once completed (raises its error then)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef request_getset[] = {
    {"status", request_get_status, NULL,
     "Status once completed successfully, else None.", NULL},
    {"done", request_get_done, NULL, "True once completed.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject npy_request_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nexar.Request",
    .tp_basicsize = sizeof(npy_request),
    .tp_dealloc = request_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "A non-blocking operation; holds its buffers until it "
        "completes.",
    .tp_methods = request_methods,
    .tp_getset = request_getset,
};
