/*
 * nexar._nexar: the CPython extension over the public C API (include/nexar.h).
 * Shared declarations of its parts: module.c (exceptions, constants, result
 * types), context.c (Context), comm.c (Comm: argument checks of every
 * buffer method), op.c (starting an operation, Request), rpc.c (RPC and
 * failure handlers). docs/python.md describes the Python API.
 */
#ifndef NEXARPY_H
#define NEXARPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "nexar.h"

typedef struct npy_request npy_request;

/* A nexar context. Every object made from it holds a reference to it. */
typedef struct {
  PyObject_HEAD nexar_ctx_t *ctx; /* NULL once finalized */
  PyObject *world;                /* the world Comm */
  PyTypeObject *comm_type;        /* type of the Comms it makes */
  int busy;                       /* calls in flight with the GIL released */
  int closing;                    /* finalize is running */
  npy_request *reqs;              /* requests not yet completed (list) */
  PyObject *rpc_fns;              /* dict: function id -> handler */
  PyObject *fail_fns; /* list: every failure handler ever installed */
} npy_context;

/* A communicator. */
typedef struct {
  PyObject_HEAD npy_context *ctx;
  nexar_comm_t *comm; /* NULL once freed (or the context finalized) */
  int is_world;
} npy_comm;

/* The kinds of operation op.c can start. */
enum npy_kind {
  NPY_SEND,
  NPY_RECV,
  NPY_ALLREDUCE,
  NPY_BCAST,
  NPY_REDUCE,
  NPY_ALLGATHER,
  NPY_ALLGATHERV,
  NPY_REDUCE_SCATTER,
  NPY_REDUCE_SCATTER_BLOCK,
  NPY_ALLTOALL,
  NPY_ALLTOALLV,
  NPY_GATHER,
  NPY_GATHERV,
  NPY_SCATTER,
  NPY_SCATTERV,
  NPY_SCAN,
  NPY_EXSCAN,
  NPY_BARRIER
};

/* One operation: its arguments, the buffer views it holds and the count
 * and displacement arrays (read by nexar during the start only). */
typedef struct {
  enum npy_kind kind;
  const char *name; /* the Python method, for messages */
  const void *sbuf;
  void *rbuf;
  size_t scount, rcount;
  nexar_dtype_t dtype;
  int have_dtype; /* dtype known (given, or taken from a buffer) */
  nexar_op_t op;
  int peer; /* root, destination or source */
  int tag;
  size_t *arr; /* one allocation for the four arrays below */
  size_t *scounts, *sdispls, *rcounts, *rdispls;
  Py_buffer views[2];
  int nviews;
} npy_op;

struct npy_request {
  PyObject_HEAD npy_comm *comm;
  nexar_req_t *req; /* NULL once completed */
  npy_request *prev, *next;
  const char *name; /* the method that started it */
  Py_buffer views[2];
  int nviews;
  size_t itemsize;
  int waiting; /* a thread waits on it with the GIL released */
  int rc;
  nexar_status_t st;
};

extern PyTypeObject npy_context_type, npy_comm_type, npy_request_type;
extern PyTypeObject *npy_status_type, *npy_failure_type, *npy_membership_type;
extern PyObject *npy_in_place;

/* module.c */
PyObject *npy_raise(int code, const char *what, const char *msg);
PyObject *npy_raise_comm(int code, const char *what, const nexar_comm_t *comm);
PyObject *npy_invalid(const char *fmt, ...);
PyObject *npy_raise_rpc(int code, int rpc_code, const char *what,
                        const char *msg);
PyObject *npy_status(const nexar_status_t *st, size_t itemsize);
int npy_add_exceptions(PyObject *m);

/* context.c */
int npy_ctx_check(npy_context *ctx, const char *what);
PyObject *npy_comm_new(npy_context *ctx, nexar_comm_t *c, int is_world);
void npy_ctx_link(npy_context *ctx, npy_request *r);
void npy_ctx_unlink(npy_context *ctx, npy_request *r);
PyObject *npy_init(PyObject *self, PyObject *args, PyObject *kw);

/* comm.c */
int npy_comm_check(npy_comm *c, const char *what);
int npy_comm_rank_size(npy_comm *c, int *rank, int *size);
extern PyMethodDef npy_comm_buffer_methods[];
int npy_comm_type_ready(void);

/* op.c */
int npy_dtype_arg(PyObject *o, npy_op *op);
int npy_buffer(npy_op *op, PyObject *obj, int writable, const char *what,
               size_t *count);
size_t *npy_array(npy_op *op, int which, PyObject *seq, int n,
                  const size_t *counts, const char *what);
int npy_blocks_fit(npy_op *op, const size_t *counts, const size_t *displs,
                   int n, size_t total, const char *what);
void npy_op_release(npy_op *op);
PyObject *npy_run(npy_comm *c, npy_op *op, int blocking);
PyObject *npy_request_new(npy_comm *c, npy_op *op, nexar_req_t *req);
PyObject *npy_request_wait(npy_request *r);
void npy_request_end(npy_request *r, int rc);

/* rpc.c */
/* Nonzero on a library thread while it runs a Python handler. */
extern _Thread_local int npy_in_handler;
extern PyMethodDef npy_comm_rpc_methods[];
PyObject *npy_set_failure_handler(npy_context *ctx, PyObject *fn);

#endif
