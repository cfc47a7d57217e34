/*
 * RPC with Python callables: a handler runs on one of nexar's RPC handler
 * threads and takes the GIL there; a call waits with the GIL released, so
 * a process may call its own handlers.
 */
#include <string.h>

#include "nexarpy.h"

_Thread_local int npy_in_handler;

/* Calls handler(caller, fn_id, request: bytes). It returns a bytes-like
 * response, None (empty response) or an int (>= 0 success with no
 * response, < 0 the caller's RpcHandlerError.rpc_code). An exception is
 * printed (sys.unraisablehook) and answered with rpc_code -1. */
static int rpc_trampoline(void *user_data, int caller, uint16_t fn_id,
                          const void *req, size_t req_bytes, void *resp,
                          size_t resp_cap, size_t *resp_bytes) {
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *fn = user_data;
  int rc = -1;
  npy_in_handler++;
  PyObject *r = PyObject_CallFunction(fn, "iiy#", caller, (int)fn_id, req,
                                      (Py_ssize_t)req_bytes);
  if (!r) goto out;
  if (r == Py_None) {
    rc = 0;
  } else if (PyLong_Check(r)) {
    long v = PyLong_AsLong(r);
    if (v == -1 && PyErr_Occurred()) goto out;
    rc = v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int)v;
  } else {
    Py_buffer v;
    if (PyObject_GetBuffer(r, &v, PyBUF_C_CONTIGUOUS) < 0) goto out;
    if ((size_t)v.len > resp_cap) {
      PyErr_Format(PyExc_ValueError,
                   "RPC handler of function %d: response of %zd bytes is "
                   "longer than NEXAR_RPC_MAX_BYTES (%zu)",
                   (int)fn_id, v.len, resp_cap);
    } else {
      memcpy(resp, v.buf, (size_t)v.len);
      *resp_bytes = (size_t)v.len;
      rc = 0;
    }
    PyBuffer_Release(&v);
  }
out:
  if (PyErr_Occurred()) PyErr_WriteUnraisable(fn);
  Py_XDECREF(r);
  npy_in_handler--;
  PyGILState_Release(g);
  return rc;
}

static int fn_id_arg(PyObject *o, uint16_t *id) {
  long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < 0 || v > UINT16_MAX) {
    npy_invalid("RPC function id %ld is outside 0..65535", v);
    return -1;
  }
  *id = (uint16_t)v;
  return 0;
}

static PyObject *comm_rpc_register(PyObject *self, PyObject *args) {
  npy_comm *c = (npy_comm *)self;
  PyObject *idobj, *fn;
  uint16_t id;
  if (!PyArg_ParseTuple(args, "OO:rpc_register", &idobj, &fn) ||
      fn_id_arg(idobj, &id) < 0 || npy_comm_check(c, "rpc_register") < 0)
    return NULL;
  if (!PyCallable_Check(fn))
    return PyErr_Format(PyExc_TypeError,
                        "rpc_register: handler must be "
                        "callable");
  int rc = nexar_rpc_register(c->comm, id, rpc_trampoline, fn);
  if (rc < 0)
    return npy_raise(rc, "rpc_register",
                     rc == NEXAR_ERR_INVALID_USAGE
                         ? "the function id has a handler: unregister it first"
                         : NULL);
  if (PyDict_SetItem(c->ctx->rpc_fns, idobj, fn) < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *comm_rpc_unregister(PyObject *self, PyObject *idobj) {
  npy_comm *c = (npy_comm *)self;
  uint16_t id;
  if (fn_id_arg(idobj, &id) < 0 || npy_comm_check(c, "rpc_unregister") < 0)
    return NULL;
  int rc;
  /* It waits for running handlers, which need the GIL. */
  c->ctx->busy++;
  Py_BEGIN_ALLOW_THREADS;
  rc = nexar_rpc_unregister(c->comm, id);
  Py_END_ALLOW_THREADS;
  c->ctx->busy--;
  if (rc < 0)
    return npy_raise(
        rc, "rpc_unregister",
        rc == NEXAR_ERR_INVALID_ARG ? "the function id has no handler" : NULL);
  if (PyDict_DelItem(c->ctx->rpc_fns, idobj) < 0) PyErr_Clear();
  Py_RETURN_NONE;
}

static PyObject *comm_rpc_call(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"rank",       "fn_id",    "request",
                           "timeout_ms", "resp_cap", NULL};
  npy_comm *c = (npy_comm *)self;
  int rank, timeout_ms = 0;
  PyObject *idobj, *reqobj = NULL;
  Py_ssize_t cap = 1 << 20;
  uint16_t id;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "iO|Oin:rpc_call", kwlist, &rank,
                                   &idobj, &reqobj, &timeout_ms, &cap) ||
      fn_id_arg(idobj, &id) < 0 || npy_comm_check(c, "rpc_call") < 0)
    return NULL;
  if (cap < 0) return npy_invalid("rpc_call: resp_cap must be >= 0");
  Py_buffer in = {0};
  if (reqobj && PyObject_GetBuffer(reqobj, &in, PyBUF_C_CONTIGUOUS) < 0)
    return NULL;
  PyObject *out = PyBytes_FromStringAndSize(NULL, cap);
  nexar_status_t st = {0};
  int rc = NEXAR_ERR_NOMEM;
  if (out) {
    nexar_req_t *req = NULL;
    char *resp = PyBytes_AS_STRING(out);
    c->ctx->busy++;
    Py_BEGIN_ALLOW_THREADS;
    rc = nexar_rpc_icall(c->comm, rank, id, in.buf, (size_t)in.len, resp,
                         (size_t)cap, timeout_ms, &req);
    if (rc == NEXAR_OK) rc = nexar_wait(&req, &st);
    Py_END_ALLOW_THREADS;
    c->ctx->busy--;
  }
  if (reqobj) PyBuffer_Release(&in);
  if (!out) return NULL;
  if (rc < 0) {
    Py_DECREF(out);
    const char *msg = nexar_comm_last_error(c->comm);
    return rc == NEXAR_ERR_RPC_HANDLER
               ? npy_raise_rpc(rc, st.rpc_code, "rpc_call", msg)
               : npy_raise(rc, "rpc_call", msg);
  }
  if (_PyBytes_Resize(&out, (Py_ssize_t)st.bytes) < 0) return NULL;
  return out;
}

PyMethodDef npy_comm_rpc_methods[] = {
    {"rpc_register", comm_rpc_register, METH_VARARGS,
     "rpc_register(fn_id, handler): handler(caller, fn_id, request: bytes) "
     "-> bytes | None | int runs on a library thread (with the GIL) for "
     "each call of fn_id on this process."},
    {"rpc_unregister", comm_rpc_unregister, METH_O,
     "rpc_unregister(fn_id): removes the handler; returns once it runs "
     "nowhere."},
    {"rpc_call", (PyCFunction)(void (*)(void))comm_rpc_call,
     METH_VARARGS | METH_KEYWORDS,
     "rpc_call(rank, fn_id, request=b'', timeout_ms=0, resp_cap=1 MiB) -> "
     "bytes: calls fn_id on rank and returns its response (GIL "
     "released)."},
    {NULL, NULL, 0, NULL}};
