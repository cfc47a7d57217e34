/*
 * Context: nexar_init / nexar_finalize, the world communicator, failures,
 * elastic checkpoints, abort. Finalize refuses to run while other threads
 * are inside nexar calls on the context; requests still running when it
 * returns end with ClosedError and let go of their buffers.
 */
#include <string.h>

#include "nexarpy.h"

int npy_ctx_check(npy_context *ctx, const char *what) {
  if (ctx->ctx && !ctx->closing) return 0;
  npy_raise(NEXAR_ERR_CLOSED, what, "the context is finalized");
  return -1;
}

void npy_ctx_link(npy_context *ctx, npy_request *r) {
  r->prev = NULL;
  r->next = ctx->reqs;
  if (ctx->reqs) ctx->reqs->prev = r;
  ctx->reqs = r;
}

void npy_ctx_unlink(npy_context *ctx, npy_request *r) {
  if (r->prev)
    r->prev->next = r->next;
  else if (ctx->reqs == r)
    ctx->reqs = r->next;
  if (r->next) r->next->prev = r->prev;
  r->prev = r->next = NULL;
}

PyObject *npy_comm_new(npy_context *ctx, nexar_comm_t *c, int is_world) {
  npy_comm *o = (npy_comm *)ctx->comm_type->tp_alloc(ctx->comm_type, 0);
  if (!o) return NULL;
  o->ctx = (npy_context *)Py_NewRef(ctx);
  o->comm = c;
  o->is_world = is_world;
  return (PyObject *)o;
}

/* nexar._nexar.init(comm_type, **config) */
PyObject *npy_init(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {
      "comm_type",     "seed_addr",      "secret",
      "secret_file",   "world_size",     "rank",
      "bind_addr",     "advertise_addr", "bootstrap_timeout_ms",
      "op_timeout_ms", "topology",       NULL};
  PyObject *type;
  nexar_config_t cfg = NEXAR_CONFIG_INIT;
  if (!PyArg_ParseTupleAndKeywords(
          args, kw, "O!|$zzziizziiz", kwlist, &PyType_Type, &type,
          &cfg.seed_addr, &cfg.secret, &cfg.secret_file, &cfg.world_size,
          &cfg.rank, &cfg.bind_addr, &cfg.advertise_addr,
          &cfg.bootstrap_timeout_ms, &cfg.op_timeout_ms, &cfg.topology))
    return NULL;
  if (!PyType_IsSubtype((PyTypeObject *)type, &npy_comm_type))
    return PyErr_Format(PyExc_TypeError, "comm_type must derive from Comm");
  npy_context *o =
      (npy_context *)npy_context_type.tp_alloc(&npy_context_type, 0);
  if (!o) return NULL;
  o->comm_type = (PyTypeObject *)Py_NewRef(type);
  o->rpc_fns = PyDict_New();
  o->fail_fns = PyList_New(0);
  if (!o->rpc_fns || !o->fail_fns) goto fail;
  nexar_ctx_t *ctx = NULL;
  int rc;
  /* The strings stay alive in |args| and |kw| while the GIL is out. */
  Py_BEGIN_ALLOW_THREADS;
  rc = nexar_init(&cfg, &ctx);
  Py_END_ALLOW_THREADS;
  if (rc < 0) {
    npy_raise(rc, "init", nexar_last_error());
    goto fail;
  }
  o->ctx = ctx;
  o->world = npy_comm_new(o, nexar_comm_world(ctx), 1);
  if (!o->world) goto fail;
  return (PyObject *)o;
fail:
  Py_DECREF(o);
  return NULL;
}

static PyObject *ctx_finalize(PyObject *self, PyObject *unused) {
  npy_context *o = (npy_context *)self;
  if (!o->ctx) Py_RETURN_NONE;
  if (npy_in_handler)
    return npy_raise(NEXAR_ERR_INVALID_USAGE, "finalize",
                     "called from an RPC or failure handler");
  if (o->closing || o->busy)
    return npy_raise(NEXAR_ERR_INVALID_USAGE, "finalize",
                     "other threads are in nexar calls on this context");
  o->closing = 1;
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = nexar_finalize(o->ctx);
  Py_END_ALLOW_THREADS;
  o->ctx = NULL;
  o->closing = 0;
  /* The library is gone: nothing writes into the buffers any more. */
  while (o->reqs) npy_request_end(o->reqs, NEXAR_ERR_CLOSED);
  if (o->world) ((npy_comm *)o->world)->comm = NULL;
  PyDict_Clear(o->rpc_fns);
  if (PyList_SetSlice(o->fail_fns, 0, PY_SSIZE_T_MAX, NULL) < 0) return NULL;
  if (rc < 0) /* the context is freed all the same */
    return npy_raise(rc, "finalize",
                     rc == NEXAR_ERR_TIMEOUT
                         ? "flushing the sends timed out; the context is freed"
                         : "the final barrier failed; the context is freed");
  Py_RETURN_NONE;
}

static PyObject *ctx_abort(PyObject *self, PyObject *unused) {
  npy_context *o = (npy_context *)self;
  if (npy_ctx_check(o, "abort") < 0) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = nexar_abort(o->ctx);
  Py_END_ALLOW_THREADS;
  if (rc < 0) return npy_raise(rc, "abort", NULL);
  Py_RETURN_NONE;
}

static PyObject *failure_obj(const nexar_failure_t *f) {
  PyObject *s = PyStructSequence_New(npy_failure_type);
  if (!s) return NULL;
  PyStructSequence_SET_ITEM(s, 0, PyLong_FromLong(f->id));
  PyStructSequence_SET_ITEM(s, 1, PyLong_FromLong(f->reporter));
  PyStructSequence_SET_ITEM(s, 2, PyLong_FromLong(f->reason));
  PyStructSequence_SET_ITEM(s, 3, PyLong_FromUnsignedLongLong(f->when_ns));
  PyStructSequence_SET_ITEM(
      s, 4, PyUnicode_FromStringAndSize(f->addr, strnlen(f->addr, 64)));
  for (int i = 0; i < 5; i++)
    if (!PyStructSequence_GET_ITEM(s, i)) {
      Py_DECREF(s);
      return NULL;
    }
  return s;
}

/* Runs on a library thread: takes the GIL to call the Python handler. */
static void failure_trampoline(nexar_ctx_t *ctx, const nexar_failure_t *f,
                               void *user_data) {
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *fn = user_data;
  PyObject *obj = failure_obj(f);
  npy_in_handler++;
  PyObject *r = obj ? PyObject_CallOneArg(fn, obj) : NULL;
  npy_in_handler--;
  if (!r) PyErr_WriteUnraisable(fn);
  Py_XDECREF(r);
  Py_XDECREF(obj);
  PyGILState_Release(g);
}

static PyObject *ctx_set_failure_handler(PyObject *self, PyObject *fn) {
  npy_context *o = (npy_context *)self;
  if (npy_ctx_check(o, "set_failure_handler") < 0) return NULL;
  if (fn != Py_None && !PyCallable_Check(fn))
    return PyErr_Format(PyExc_TypeError,
                        "the failure handler must be "
                        "callable or None");
  /* A handler may be running while it is replaced: every one installed
   * stays referenced until finalize. */
  if (fn != Py_None && PyList_Append(o->fail_fns, fn) < 0) return NULL;
  int rc = nexar_set_failure_handler(o->ctx,
                                     fn == Py_None ? NULL : failure_trampoline,
                                     fn == Py_None ? NULL : fn);
  if (rc < 0) return npy_raise(rc, "set_failure_handler", NULL);
  Py_RETURN_NONE;
}

static PyObject *ctx_failures(PyObject *self, PyObject *unused) {
  npy_context *o = (npy_context *)self;
  if (npy_ctx_check(o, "failures") < 0) return NULL;
  int n = 0, rc = nexar_failures(o->ctx, NULL, 0, &n);
  nexar_failure_t *f = NULL;
  PyObject *list = NULL;
  /* More may be learnt between the two calls: take what fits. */
  if (rc == NEXAR_OK && n > 0) {
    f = PyMem_Calloc((size_t)n, sizeof(*f));
    if (!f) return PyErr_NoMemory();
    int max = n;
    rc = nexar_failures(o->ctx, f, max, &n);
    if (n > max) n = max;
  }
  if (rc < 0) {
    npy_raise(rc, "failures", NULL);
    goto out;
  }
  list = PyList_New(n);
  for (int i = 0; list && i < n; i++) {
    PyObject *x = failure_obj(&f[i]);
    if (!x)
      Py_CLEAR(list);
    else
      PyList_SET_ITEM(list, i, x);
  }
out:
  PyMem_Free(f);
  return list;
}

static PyObject *ctx_elastic_checkpoint(PyObject *self, PyObject *args,
                                        PyObject *kw) {
  static char *kwlist[] = {"leave", NULL};
  npy_context *o = (npy_context *)self;
  int leave = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwlist, &leave)) return NULL;
  if (npy_ctx_check(o, "elastic_checkpoint") < 0) return NULL;
  nexar_membership_t m = {0};
  int rc;
  o->busy++;
  Py_BEGIN_ALLOW_THREADS;
  rc = nexar_elastic_checkpoint(o->ctx, leave, &m);
  Py_END_ALLOW_THREADS;
  o->busy--;
  if (rc < 0)
    return npy_raise_comm(rc, "elastic_checkpoint", nexar_comm_world(o->ctx));
  PyObject *s = PyStructSequence_New(npy_membership_type);
  long v[7] = {(long)m.epoch, m.old_rank, m.old_size, m.new_rank,
               m.new_size,    m.joined,   m.left};
  for (int i = 0; s && i < 7; i++) {
    PyObject *x = PyLong_FromLong(v[i]);
    if (!x)
      Py_CLEAR(s);
    else
      PyStructSequence_SET_ITEM(s, i, x);
  }
  return s;
}

static PyObject *ctx_local(PyObject *self, void *which) {
  npy_context *o = (npy_context *)self;
  if (npy_ctx_check(o, "local_rank") < 0) return NULL;
  int lr = 0, ls = 0;
  int rc = nexar_local_rank(o->ctx, &lr, &ls);
  if (rc < 0) return npy_raise(rc, "local_rank", NULL);
  return PyLong_FromLong(which ? ls : lr);
}

static PyObject *ctx_get_world(PyObject *self, void *unused) {
  npy_context *o = (npy_context *)self;
  if (npy_ctx_check(o, "world") < 0) return NULL;
  return Py_NewRef(o->world);
}

static PyObject *ctx_get_closed(PyObject *self, void *unused) {
  return PyBool_FromLong(((npy_context *)self)->ctx == NULL);
}

/* For extensions built on this one (nexar.torch): the nexar_ctx_t *. */
static PyObject *ctx_get_handle(PyObject *self, void *unused) {
  npy_context *o = (npy_context *)self;
  if (npy_ctx_check(o, "handle") < 0) return NULL;
  return PyCapsule_New(o->ctx, "nexar_ctx_t", NULL);
}

static PyObject *ctx_enter(PyObject *self, PyObject *unused) {
  return Py_NewRef(self);
}

/* An exception leaving the `with` block aborts first: the other ranks then
 * fail at once instead of waiting in a collective finalize. */
static PyObject *ctx_exit(PyObject *self, PyObject *args) {
  npy_context *o = (npy_context *)self;
  PyObject *type = PyTuple_Size(args) > 0 ? PyTuple_GET_ITEM(args, 0) : NULL;
  if (type && type != Py_None && o->ctx && !o->closing && !o->busy) {
    Py_BEGIN_ALLOW_THREADS;
    nexar_abort(o->ctx);
    Py_END_ALLOW_THREADS;
  }
  PyObject *r = ctx_finalize(self, NULL);
  if (!r) return NULL;
  Py_DECREF(r);
  Py_RETURN_FALSE;
}

/* The world Comm and the context refer to each other, so a context lives
 * on (the library running, its handlers referenced) until the process
 * ends; only a failed init frees one. */
static void ctx_dealloc(PyObject *self) {
  npy_context *o = (npy_context *)self;
  Py_XDECREF(o->world);
  Py_XDECREF(o->comm_type);
  Py_XDECREF(o->rpc_fns);
  Py_XDECREF(o->fail_fns);
  Py_TYPE(self)->tp_free(self);
}

static PyMethodDef ctx_methods[] = {
    {"finalize", ctx_finalize, METH_NOARGS,
     "finalize(): collective end of the context (nexar_finalize); "
     "idempotent. Running requests end with ClosedError."},
    {"abort", ctx_abort, METH_NOARGS,
     "abort(): ends every operation of this process at once (nexar_abort)."},
    {"failures", ctx_failures, METH_NOARGS,
     "failures() -> list[Failure]: the failed processes this one knows of."},
    {"set_failure_handler", ctx_set_failure_handler, METH_O,
     "set_failure_handler(fn): fn(failure) is called on a library thread "
     "once per failed process; None removes it."},
    {"elastic_checkpoint", (PyCFunction)(void (*)(void))ctx_elastic_checkpoint,
     METH_VARARGS | METH_KEYWORDS,
     "elastic_checkpoint(leave=False) -> Membership: collective on the "
     "world; admits joiners, lets leavers go (docs/elastic.md)."},
    {"__enter__", ctx_enter, METH_NOARGS, NULL},
    {"__exit__", ctx_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef ctx_getset[] = {
    {"world", ctx_get_world, NULL, "The world communicator.", NULL},
    {"local_rank", ctx_local, NULL, "This process's place on its host.", NULL},
    {"local_size", ctx_local, NULL, "Processes of the job on this host.",
     (void *)1},
    {"closed", ctx_get_closed, NULL, "True once finalized.", NULL},
    {"handle", ctx_get_handle, NULL,
     "PyCapsule 'nexar_ctx_t' of the C context (for C extensions).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject npy_context_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nexar.Context",
    .tp_basicsize = sizeof(npy_context),
    .tp_dealloc = ctx_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "A nexar context (nexar.init()); a context manager that "
        "finalizes on exit.",
    .tp_methods = ctx_methods,
    .tp_getset = ctx_getset,
};
