/*
 * nexar._nexar module: the exception classes (one per result code), the
 * constants, the result types (Status, Failure, Membership) and the module
 * functions.
 */
#include <stdarg.h>

#include "nexarpy.h"

PyTypeObject *npy_status_type, *npy_failure_type, *npy_membership_type;
PyObject *npy_in_place;
static PyObject *npy_error; /* nexar.Error */

/* Result code -> exception class. |base| is a builtin exception the class
 * also derives from, so that `except TimeoutError` catches nexar's too. */
static struct {
  int code;
  const char *name;
  const char *doc;
  PyObject *cls;
} errors[] = {
    {NEXAR_ERR_INVALID_ARG, "InvalidArgError", "a bad argument", NULL},
    {NEXAR_ERR_INVALID_USAGE, "InvalidUsageError", "wrong call order or state",
     NULL},
    {NEXAR_ERR_NOMEM, "NoMemoryError", "allocation failed", NULL},
    {NEXAR_ERR_TIMEOUT, "TimeoutError", "the deadline passed", NULL},
    {NEXAR_ERR_PEER_FAILED, "PeerFailedError", "a peer is dead or unreachable",
     NULL},
    {NEXAR_ERR_REVOKED, "RevokedError", "the communicator was revoked", NULL},
    {NEXAR_ERR_MISMATCH, "MismatchError", "ranks called different collectives",
     NULL},
    {NEXAR_ERR_AUTH, "AuthError", "authentication failed", NULL},
    {NEXAR_ERR_PROTO, "ProtocolError", "malformed frame or version mismatch",
     NULL},
    {NEXAR_ERR_TRANSPORT, "TransportError", "QUIC, TLS or socket error", NULL},
    {NEXAR_ERR_CLOSED, "ClosedError", "object already finalized or aborted",
     NULL},
    {NEXAR_ERR_UNSUPPORTED, "UnsupportedError",
     "unsupported datatype and op, or feature", NULL},
    {NEXAR_ERR_SYS, "SysError", "operating-system error", NULL},
    {NEXAR_ERR_TRUNCATE, "TruncateError",
     "message longer than the receive buffer", NULL},
    {NEXAR_ERR_DEVICE, "DeviceError", "a device adapter operation failed",
     NULL},
    {NEXAR_ERR_RPC_UNKNOWN_FN, "RpcUnknownFunctionError",
     "no RPC handler for the function id", NULL},
    {NEXAR_ERR_RPC_HANDLER, "RpcHandlerError",
     "the RPC handler returned an error (rpc_code)", NULL},
    {NEXAR_ERR_RPC_BUSY, "RpcBusyError", "the callee's RPC queue was full",
     NULL},
    {NEXAR_ERR_ABORTED, "AbortedError", "nexar_abort ran", NULL},
    {NEXAR_ERR_EXCLUDED, "ExcludedError", "this rank was declared failed",
     NULL},
    {NEXAR_ERR_INTERNAL, "InternalError", "bug in the library", NULL},
};
#define NERRORS (sizeof(errors) / sizeof(errors[0]))

static PyObject *error_class(int code) {
  for (size_t i = 0; i < NERRORS; i++)
    if (errors[i].code == code) return errors[i].cls;
  return npy_error;
}

static PyObject *raise_text(int code, PyObject *text, int rpc_code) {
  if (!text) return NULL;
  PyObject *cls = error_class(code);
  PyObject *e = PyObject_CallOneArg(cls, text);
  Py_DECREF(text);
  if (!e) return NULL;
  PyObject *c = PyLong_FromLong(code);
  PyObject *r = PyLong_FromLong(rpc_code);
  if (c && r && PyObject_SetAttrString(e, "code", c) == 0 &&
      PyObject_SetAttrString(e, "rpc_code", r) == 0)
    PyErr_SetObject(cls, e);
  Py_XDECREF(c);
  Py_XDECREF(r);
  Py_DECREF(e);
  return NULL;
}

/* Raises the exception of |code|: "WHAT: MSG (NEXAR_ERR_...)". */
PyObject *npy_raise(int code, const char *what, const char *msg) {
  if (!msg || !*msg) msg = nexar_strerror(code);
  return raise_text(
      code,
      PyUnicode_FromFormat("%s: %s (%s)", what, msg, nexar_err_name(code)), 0);
}

PyObject *npy_raise_comm(int code, const char *what, const nexar_comm_t *comm) {
  return npy_raise(code, what, nexar_comm_last_error(comm));
}

/* Raises nexar.InvalidArgError (also a ValueError) with a printf message. */
PyObject *npy_invalid(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *text = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  return raise_text(NEXAR_ERR_INVALID_ARG, text, 0);
}

/* Raises RpcHandlerError with the handler's code as .rpc_code. */
PyObject *npy_raise_rpc(int code, int rpc_code, const char *what,
                        const char *msg) {
  return raise_text(
      code,
      PyUnicode_FromFormat("%s: %s (%s)", what, msg, nexar_err_name(code)),
      rpc_code);
}

int npy_add_exceptions(PyObject *m) {
  npy_error = PyErr_NewExceptionWithDoc(
      "nexar.Error",
      "Base of nexar's exceptions: .code is the NEXAR_ERR_* result code, "
      "str() the C library's message.",
      PyExc_Exception, NULL);
  if (!npy_error || PyModule_AddObjectRef(m, "Error", npy_error) < 0) return -1;
  PyObject *code = PyLong_FromLong(NEXAR_ERR_INTERNAL);
  PyObject *zero = PyLong_FromLong(0);
  int bad = !code || !zero ||
            PyObject_SetAttrString(npy_error, "code", code) < 0 ||
            PyObject_SetAttrString(npy_error, "rpc_code", zero) < 0;
  Py_XDECREF(code);
  Py_XDECREF(zero);
  if (bad) return -1;
  for (size_t i = 0; i < NERRORS; i++) {
    PyObject *builtin = NULL;
    if (errors[i].code == NEXAR_ERR_TIMEOUT) builtin = PyExc_TimeoutError;
    if (errors[i].code == NEXAR_ERR_INVALID_ARG) builtin = PyExc_ValueError;
    if (errors[i].code == NEXAR_ERR_NOMEM) builtin = PyExc_MemoryError;
    PyObject *bases = builtin ? PyTuple_Pack(2, npy_error, builtin)
                              : PyTuple_Pack(1, npy_error);
    char qual[64];
    snprintf(qual, sizeof(qual), "nexar.%s", errors[i].name);
    errors[i].cls =
        bases ? PyErr_NewExceptionWithDoc(qual, errors[i].doc, bases, NULL)
              : NULL;
    Py_XDECREF(bases);
    if (!errors[i].cls ||
        PyModule_AddObjectRef(m, errors[i].name, errors[i].cls) < 0)
      return -1;
  }
  return 0;
}

static PyStructSequence_Field status_fields[] = {
    {"source", "rank of the sender in the communicator"},
    {"tag", "tag of the message (RPC: the function id)"},
    {"error", "result code of the request (0: success)"},
    {"count", "elements received or sent (bytes / element size)"},
    {"bytes", "bytes received or sent"},
    {"rpc_code", "RPC: the handler's return value"},
    {NULL, NULL}};
static PyStructSequence_Desc status_desc = {
    "nexar.Status", "Completion status of a request.", status_fields, 6};

static PyStructSequence_Field failure_fields[] = {
    {"id", "stable process id: its world rank when it joined"},
    {"reporter", "id of the process whose detector declared it"},
    {"reason",
     "FAIL_HEARTBEAT, FAIL_CONNECTION, FAIL_REPORTED or "
     "FAIL_UNREACHABLE"},
    {"when_ns", "CLOCK_MONOTONIC time this process learnt it (ns)"},
    {"addr", "its UDP address, 'ip:port'"},
    {NULL, NULL}};
static PyStructSequence_Desc failure_desc = {
    "nexar.Failure", "One failed process.", failure_fields, 5};

static PyStructSequence_Field membership_fields[] = {
    {"epoch", "epoch of the world after the change"},
    {"old_rank", "rank before (-1 on a process that just joined)"},
    {"old_size", "world size before (0 on a process that just joined)"},
    {"new_rank", "rank after (-1 on a process that left)"},
    {"new_size", "world size after"},
    {"joined", "processes admitted"},
    {"left", "processes that left"},
    {NULL, NULL}};
static PyStructSequence_Desc membership_desc = {
    "nexar.Membership", "Result of an elastic checkpoint.", membership_fields,
    7};

PyObject *npy_status(const nexar_status_t *st, size_t itemsize) {
  PyObject *s = PyStructSequence_New(npy_status_type);
  if (!s) return NULL;
  PyStructSequence_SET_ITEM(s, 0, PyLong_FromLong(st->source));
  PyStructSequence_SET_ITEM(s, 1, PyLong_FromLong(st->tag));
  PyStructSequence_SET_ITEM(s, 2, PyLong_FromLong(st->error));
  PyStructSequence_SET_ITEM(
      s, 3, PyLong_FromSize_t(itemsize ? st->bytes / itemsize : st->bytes));
  PyStructSequence_SET_ITEM(s, 4, PyLong_FromSize_t(st->bytes));
  PyStructSequence_SET_ITEM(s, 5, PyLong_FromLong(st->rpc_code));
  for (int i = 0; i < 6; i++)
    if (!PyStructSequence_GET_ITEM(s, i)) {
      Py_DECREF(s);
      return NULL;
    }
  return s;
}

static PyObject *mod_version(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(nexar_version());
}

static PyObject *mod_dtype_size(PyObject *self, PyObject *arg) {
  npy_op op = {0};
  if (npy_dtype_arg(arg, &op) < 0) return NULL;
  return PyLong_FromSize_t(nexar_dtype_size(op.dtype));
}

static PyMethodDef module_methods[] = {
    {"init", (PyCFunction)(void (*)(void))npy_init,
     METH_VARARGS | METH_KEYWORDS,
     "init(comm_type, **config) -> Context: joins the cluster "
     "(nexar_init); use nexar.init()."},
    {"version", mod_version, METH_NOARGS,
     "The version of the loaded libnexar."},
    {"dtype_size", mod_dtype_size, METH_O,
     "Size in bytes of one element of a nexar datatype."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "nexar._nexar",
    .m_doc = "nexar's C extension; use the nexar package.",
    .m_size = -1,
    .m_methods = module_methods,
};

static const struct {
  const char *name;
  long value;
} constants[] = {
    {"INT8", NEXAR_INT8},
    {"UINT8", NEXAR_UINT8},
    {"BYTE", NEXAR_BYTE},
    {"INT32", NEXAR_INT32},
    {"UINT32", NEXAR_UINT32},
    {"INT64", NEXAR_INT64},
    {"UINT64", NEXAR_UINT64},
    {"FLOAT16", NEXAR_FLOAT16},
    {"FLOAT32", NEXAR_FLOAT32},
    {"FLOAT64", NEXAR_FLOAT64},
    {"BFLOAT16", NEXAR_BFLOAT16},
    {"SUM", NEXAR_SUM},
    {"PROD", NEXAR_PROD},
    {"MAX", NEXAR_MAX},
    {"MIN", NEXAR_MIN},
    {"AVG", NEXAR_AVG},
    {"BAND", NEXAR_BAND},
    {"BOR", NEXAR_BOR},
    {"BXOR", NEXAR_BXOR},
    {"ANY_SOURCE", NEXAR_ANY_SOURCE},
    {"ANY_TAG", NEXAR_ANY_TAG},
    {"TAG_MAX", NEXAR_TAG_MAX},
    {"UNDEFINED", NEXAR_UNDEFINED},
    {"FAIL_HEARTBEAT", NEXAR_FAIL_HEARTBEAT},
    {"FAIL_CONNECTION", NEXAR_FAIL_CONNECTION},
    {"FAIL_REPORTED", NEXAR_FAIL_REPORTED},
    {"FAIL_UNREACHABLE", NEXAR_FAIL_UNREACHABLE},
};

PyMODINIT_FUNC PyInit__nexar(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++)
    if (PyModule_AddIntConstant(m, constants[i].name, constants[i].value) < 0)
      goto fail;
  npy_in_place = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
  if (!npy_in_place || PyModule_AddObjectRef(m, "IN_PLACE", npy_in_place) < 0)
    goto fail;
  npy_status_type = PyStructSequence_NewType(&status_desc);
  npy_failure_type = PyStructSequence_NewType(&failure_desc);
  npy_membership_type = PyStructSequence_NewType(&membership_desc);
  if (!npy_status_type || !npy_failure_type || !npy_membership_type ||
      PyModule_AddType(m, npy_status_type) < 0 ||
      PyModule_AddType(m, npy_failure_type) < 0 ||
      PyModule_AddType(m, npy_membership_type) < 0)
    goto fail;
  if (PyType_Ready(&npy_context_type) < 0 || npy_comm_type_ready() < 0 ||
      PyType_Ready(&npy_request_type) < 0 ||
      PyModule_AddType(m, &npy_context_type) < 0 ||
      PyModule_AddType(m, &npy_comm_type) < 0 ||
      PyModule_AddType(m, &npy_request_type) < 0)
    goto fail;
  if (npy_add_exceptions(m) < 0) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
