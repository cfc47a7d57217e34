/*
 * Comm: rank, size, Split/Dup/Free/shrink, and the buffer methods. Each
 * method checks its buffers against one another and against the
 * communicator's size before anything starts (nexar cannot see a buffer's
 * length), then runs the operation (op.c); the I-forms return a Request.
 */
#include "nexarpy.h"

int npy_comm_check(npy_comm *c, const char *what) {
  if (npy_ctx_check(c->ctx, what) < 0) return -1;
  if (c->comm) return 0;
  npy_raise(NEXAR_ERR_CLOSED, what, "the communicator was freed");
  return -1;
}

int npy_comm_rank_size(npy_comm *c, int *rank, int *size) {
  int rc = nexar_comm_rank(c->comm, rank);
  if (rc == NEXAR_OK) rc = nexar_comm_size(c->comm, size);
  if (rc < 0) npy_raise(rc, "Comm", NULL); /* accessors record no message */
  return rc < 0 ? -1 : 0;
}

/* The send buffer: 1 when in place (IN_PLACE or the receive buffer
 * itself), 0 with its element count in *n, -1 on error. */
static int get_send(npy_op *o, PyObject *sb, PyObject *rb, size_t *n) {
  if (sb == npy_in_place || (sb == rb && rb != Py_None)) {
    o->sbuf = NEXAR_IN_PLACE;
    return 1;
  }
  if (sb == Py_None) {
    npy_invalid("%s: sendbuf is required", o->name);
    return -1;
  }
  if (npy_buffer(o, sb, 0, "sendbuf", n) < 0) return -1;
  o->sbuf = o->views[o->nviews - 1].buf;
  return 0;
}

static int get_recv(npy_op *o, PyObject *rb, size_t *n) {
  if (rb == Py_None || rb == npy_in_place) {
    npy_invalid("%s: recvbuf is required", o->name);
    return -1;
  }
  if (npy_buffer(o, rb, 1, "recvbuf", n) < 0) return -1;
  o->rbuf = o->views[o->nviews - 1].buf;
  return 0;
}

static int want(npy_op *o, const char *what, size_t have, size_t need) {
  if (have == need) return 0;
  npy_invalid("%s: %s holds %zu elements, %zu expected", o->name, what, have,
              need);
  return -1;
}

static int divides(npy_op *o, const char *what, size_t n, int size) {
  if (n % (size_t)size == 0) return 0;
  npy_invalid("%s: %s holds %zu elements, not a multiple of the %d ranks",
              o->name, what, n, size);
  return -1;
}

/* The receive side of Allgatherv and of Gatherv at the root: recvbuf with
 * its counts and displacements (every block inside it), and the send
 * buffer, which holds counts[rank] elements (or is in place). */
static int gather_v(npy_op *o, PyObject *sb, PyObject *rb, PyObject *cnt,
                    PyObject *dsp, int rank, int size) {
  size_t n = 0;
  int ip;
  if (get_recv(o, rb, &n) < 0 ||
      !(o->rcounts = npy_array(o, 2, cnt, size, NULL, "counts")) ||
      !(o->rdispls = npy_array(o, 3, dsp, size, o->rcounts, "displs")) ||
      npy_blocks_fit(o, o->rcounts, o->rdispls, size, n, "recvbuf") < 0 ||
      (ip = get_send(o, sb, rb, &o->scount)) < 0)
    return -1;
  if (ip) o->scount = o->rcounts[rank];
  return ip ? 0 : want(o, "sendbuf", o->scount, o->rcounts[rank]);
}

/* A buffer method (blocking and I-form) over one parser. */
#define PAIR(Name, IName, parse, kind)                                \
  static PyObject *m_##Name(PyObject *s, PyObject *a, PyObject *k) {  \
    return parse((npy_comm *)s, a, k, 1, kind, #Name);                \
  }                                                                   \
  static PyObject *m_##IName(PyObject *s, PyObject *a, PyObject *k) { \
    return parse((npy_comm *)s, a, k, 0, kind, #IName);               \
  }
#define PARSER(fn)                                                             \
  static PyObject *fn(npy_comm *c, PyObject *args, PyObject *kw, int blocking, \
                      enum npy_kind kind, const char *name)
#define BEGIN(fmt, ...)                                                 \
  npy_op o = {.kind = kind, .name = name, .op = NEXAR_SUM};             \
  PyObject *dt = Py_None;                                               \
  int rank = 0, size = 1;                                               \
  if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, __VA_ARGS__)) \
    return NULL;                                                        \
  if (npy_comm_check(c, name) < 0 || npy_dtype_arg(dt, &o) < 0 ||       \
      npy_comm_rank_size(c, &rank, &size) < 0)                          \
    goto fail;
#define END                        \
  return npy_run(c, &o, blocking); \
  fail:                            \
  npy_op_release(&o);              \
  return NULL;

/* Allreduce, Scan, Exscan(sendbuf, recvbuf, op=SUM, dtype=None) */
PARSER(p_reduce_all) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "op", "dtype", NULL};
  PyObject *sb, *rb;
  int op = NEXAR_SUM;
  BEGIN("OO|iO", &sb, &rb, &op, &dt);
  o.op = (nexar_op_t)op;
  size_t ns = 0;
  int ip;
  if (get_recv(&o, rb, &o.rcount) < 0 || (ip = get_send(&o, sb, rb, &ns)) < 0)
    goto fail;
  if (!ip && want(&o, "sendbuf", ns, o.rcount) < 0) goto fail;
  END
}

/* Bcast(buf, root=0, dtype=None) */
PARSER(p_bcast) {
  static char *kwlist[] = {"buf", "root", "dtype", NULL};
  PyObject *b;
  BEGIN("O|iO", &b, &o.peer, &dt);
  if (get_recv(&o, b, &o.rcount) < 0) goto fail;
  END
}

/* Reduce(sendbuf, recvbuf=None, op=SUM, root=0, dtype=None) */
PARSER(p_reduce) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "op", "root", "dtype", NULL};
  PyObject *sb, *rb = Py_None;
  int op = NEXAR_SUM;
  BEGIN("O|OiiO", &sb, &rb, &op, &o.peer, &dt);
  o.op = (nexar_op_t)op;
  if (rank == o.peer) {
    int ip;
    if (get_recv(&o, rb, &o.rcount) < 0 ||
        (ip = get_send(&o, sb, rb, &o.scount)) < 0)
      goto fail;
    if (ip)
      o.scount = o.rcount;
    else if (want(&o, "sendbuf", o.scount, o.rcount) < 0)
      goto fail;
  } else if (get_send(&o, sb, Py_None, &o.scount) != 0) {
    if (!PyErr_Occurred()) npy_invalid("%s: IN_PLACE at the root only", name);
    goto fail;
  }
  END
}

/* Allgather(sendbuf, recvbuf, dtype=None) and Alltoall */
PARSER(p_all_blocks) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "dtype", NULL};
  PyObject *sb, *rb;
  BEGIN("OO|O", &sb, &rb, &dt);
  size_t n = 0, ns = 0;
  int ip;
  if (get_recv(&o, rb, &n) < 0 || divides(&o, "recvbuf", n, size) < 0 ||
      (ip = get_send(&o, sb, rb, &ns)) < 0)
    goto fail;
  o.scount = n / (size_t)size;
  if (!ip && want(&o, "sendbuf", ns, kind == NPY_ALLTOALL ? n : o.scount) < 0)
    goto fail;
  END
}

/* Allgatherv(sendbuf, recvbuf, counts, displs=None, dtype=None) */
PARSER(p_allgatherv) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "counts",
                           "displs",  "dtype",   NULL};
  PyObject *sb, *rb, *cnt, *dsp = Py_None;
  BEGIN("OOO|OO", &sb, &rb, &cnt, &dsp, &dt);
  if (gather_v(&o, sb, rb, cnt, dsp, rank, size) < 0) goto fail;
  END
}

/* Reduce_scatter(sendbuf, recvbuf, recvcounts=None, op=SUM, dtype=None) */
PARSER(p_reduce_scatter) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "recvcounts",
                           "op",      "dtype",   NULL};
  PyObject *sb, *rb, *cnt = Py_None;
  int op = NEXAR_SUM;
  BEGIN("OO|OiO", &sb, &rb, &cnt, &op, &dt);
  o.op = (nexar_op_t)op;
  size_t n = 0, ns = 0, total = 0;
  int ip;
  if (get_recv(&o, rb, &n) < 0 || (ip = get_send(&o, sb, rb, &ns)) < 0)
    goto fail;
  if (cnt == Py_None) { /* equal blocks */
    o.kind = NPY_REDUCE_SCATTER_BLOCK;
    if (ip && divides(&o, "recvbuf", n, size) < 0) goto fail;
    o.rcount = ip ? n / (size_t)size : n;
    if (!ip && want(&o, "sendbuf", ns, n * (size_t)size) < 0) goto fail;
  } else {
    if (!(o.rcounts = npy_array(&o, 2, cnt, size, NULL, "recvcounts")))
      goto fail;
    /* Each block lies in the input, so the sum cannot wrap. */
    size_t in = ip ? n : ns;
    for (int i = 0; i < size; i++) {
      if (o.rcounts[i] > in - total) {
        npy_invalid(
            "%s: recvcounts add up to more than the %zu elements of "
            "the input",
            name, in);
        goto fail;
      }
      total += o.rcounts[i];
    }
    if (ip ? n < total
           : want(&o, "sendbuf", ns, total) < 0 || n < o.rcounts[rank]) {
      if (!PyErr_Occurred())
        npy_invalid("%s: recvbuf holds %zu elements, %zu needed", name, n,
                    ip ? total : o.rcounts[rank]);
      goto fail;
    }
  }
  END
}

/* Alltoallv(sendbuf, recvbuf, sendcounts=None, recvcounts, sdispls=None,
 *           rdispls=None, dtype=None) */
PARSER(p_alltoallv) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "sendcounts", "recvcounts",
                           "sdispls", "rdispls", "dtype",      NULL};
  PyObject *sb, *rb, *sc = Py_None, *rc = Py_None, *sd = Py_None, *rd = Py_None;
  BEGIN("OO|OOOOO", &sb, &rb, &sc, &rc, &sd, &rd, &dt);
  size_t n = 0, ns = 0;
  int ip;
  if (get_recv(&o, rb, &n) < 0 ||
      !(o.rcounts = npy_array(&o, 2, rc, size, NULL, "recvcounts")) ||
      !(o.rdispls = npy_array(&o, 3, rd, size, o.rcounts, "rdispls")) ||
      npy_blocks_fit(&o, o.rcounts, o.rdispls, size, n, "recvbuf") < 0 ||
      (ip = get_send(&o, sb, rb, &ns)) < 0)
    goto fail;
  if (!ip &&
      (!(o.scounts = npy_array(&o, 0, sc, size, NULL, "sendcounts")) ||
       !(o.sdispls = npy_array(&o, 1, sd, size, o.scounts, "sdispls")) ||
       npy_blocks_fit(&o, o.scounts, o.sdispls, size, ns, "sendbuf") < 0))
    goto fail;
  END
}

/* Gather(sendbuf, recvbuf=None, root=0, dtype=None) */
PARSER(p_gather) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "root", "dtype", NULL};
  PyObject *sb, *rb = Py_None;
  BEGIN("O|OiO", &sb, &rb, &o.peer, &dt);
  int ip = 0;
  if (rank == o.peer) {
    size_t n = 0, ns = 0;
    if (get_recv(&o, rb, &n) < 0 || divides(&o, "recvbuf", n, size) < 0 ||
        (ip = get_send(&o, sb, rb, &ns)) < 0)
      goto fail;
    o.scount = n / (size_t)size;
    if (!ip && want(&o, "sendbuf", ns, o.scount) < 0) goto fail;
  } else if ((ip = get_send(&o, sb, Py_None, &o.scount)) != 0) {
    if (ip > 0) npy_invalid("%s: IN_PLACE at the root only", name);
    goto fail;
  }
  END
}

/* Gatherv(sendbuf, recvbuf=None, counts=None, displs=None, root=0,
 *         dtype=None) */
PARSER(p_gatherv) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "counts", "displs",
                           "root",    "dtype",   NULL};
  PyObject *sb, *rb = Py_None, *cnt = Py_None, *dsp = Py_None;
  BEGIN("O|OOOiO", &sb, &rb, &cnt, &dsp, &o.peer, &dt);
  int ip = 0;
  if (rank == o.peer) {
    if (gather_v(&o, sb, rb, cnt, dsp, rank, size) < 0) goto fail;
  } else if ((ip = get_send(&o, sb, Py_None, &o.scount)) != 0) {
    if (ip > 0) npy_invalid("%s: IN_PLACE at the root only", name);
    goto fail;
  }
  END
}

/* The receive buffer of a scatter: IN_PLACE (root only) or a buffer. */
static int scatter_recv(npy_op *o, PyObject *sb, PyObject *rb, int root) {
  if (rb == npy_in_place || (root && rb == sb)) {
    if (root) {
      o->rbuf = NEXAR_IN_PLACE;
      return 1;
    }
    npy_invalid("%s: IN_PLACE at the root only", o->name);
    return -1;
  }
  return get_recv(o, rb, &o->rcount);
}

/* The send buffer at the root of a scatter. */
static int root_send(npy_op *o, PyObject *sb, size_t *ns) {
  if (sb == npy_in_place || sb == Py_None) {
    npy_invalid("%s: sendbuf is required at the root", o->name);
    return -1;
  }
  if (npy_buffer(o, sb, 0, "sendbuf", ns) < 0) return -1;
  o->sbuf = o->views[o->nviews - 1].buf;
  return 0;
}

/* The root's own block: |block| elements, in place or into recvbuf. */
static int scatter_block(npy_op *o, int in_place, size_t block) {
  if (!in_place) return want(o, "recvbuf", o->rcount, block);
  o->rcount = block;
  return 0;
}

/* Scatter(sendbuf, recvbuf, root=0, dtype=None) */
PARSER(p_scatter) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "root", "dtype", NULL};
  PyObject *sb, *rb;
  BEGIN("OO|iO", &sb, &rb, &o.peer, &dt);
  int root = rank == o.peer, ip;
  size_t ns = 0;
  if ((ip = scatter_recv(&o, sb, rb, root)) < 0) goto fail;
  if (root) {
    if (root_send(&o, sb, &ns) < 0 || divides(&o, "sendbuf", ns, size) < 0 ||
        scatter_block(&o, ip, ns / (size_t)size) < 0)
      goto fail;
  }
  END
}

/* Scatterv(sendbuf, recvbuf, counts=None, displs=None, root=0, dtype=None) */
PARSER(p_scatterv) {
  static char *kwlist[] = {"sendbuf", "recvbuf", "counts", "displs",
                           "root",    "dtype",   NULL};
  PyObject *sb, *rb, *cnt = Py_None, *dsp = Py_None;
  BEGIN("OO|OOiO", &sb, &rb, &cnt, &dsp, &o.peer, &dt);
  int root = rank == o.peer, ip;
  size_t ns = 0;
  if ((ip = scatter_recv(&o, sb, rb, root)) < 0) goto fail;
  if (root) {
    if (root_send(&o, sb, &ns) < 0 ||
        !(o.scounts = npy_array(&o, 0, cnt, size, NULL, "counts")) ||
        !(o.sdispls = npy_array(&o, 1, dsp, size, o.scounts, "displs")) ||
        npy_blocks_fit(&o, o.scounts, o.sdispls, size, ns, "sendbuf") < 0 ||
        scatter_block(&o, ip, o.scounts[rank]) < 0)
      goto fail;
  }
  END
}

/* Send(buf, dest, tag=0, dtype=None) */
PARSER(p_send) {
  static char *kwlist[] = {"buf", "dest", "tag", "dtype", NULL};
  PyObject *b;
  BEGIN("Oi|iO", &b, &o.peer, &o.tag, &dt);
  if (npy_buffer(&o, b, 0, "buf", &o.scount) < 0) goto fail;
  o.sbuf = o.views[0].buf;
  END
}

/* Recv(buf, source=ANY_SOURCE, tag=ANY_TAG, dtype=None) -> Status */
PARSER(p_recv) {
  static char *kwlist[] = {"buf", "source", "tag", "dtype", NULL};
  PyObject *b;
  int source = NEXAR_ANY_SOURCE, tag = NEXAR_ANY_TAG;
  BEGIN("O|iiO", &b, &source, &tag, &dt);
  o.peer = source;
  o.tag = tag;
  if (get_recv(&o, b, &o.rcount) < 0) goto fail;
  END
}

/* Barrier() */
PARSER(p_barrier) {
  static char *kwlist[] = {NULL};
  BEGIN("", NULL);
  (void)rank;
  END
}

PAIR(Allreduce, Iallreduce, p_reduce_all, NPY_ALLREDUCE)
PAIR(Scan, Iscan, p_reduce_all, NPY_SCAN)
PAIR(Exscan, Iexscan, p_reduce_all, NPY_EXSCAN)
PAIR(Bcast, Ibcast, p_bcast, NPY_BCAST)
PAIR(Reduce, Ireduce, p_reduce, NPY_REDUCE)
PAIR(Allgather, Iallgather, p_all_blocks, NPY_ALLGATHER)
PAIR(Alltoall, Ialltoall, p_all_blocks, NPY_ALLTOALL)
PAIR(Allgatherv, Iallgatherv, p_allgatherv, NPY_ALLGATHERV)
PAIR(Reduce_scatter, Ireduce_scatter, p_reduce_scatter, NPY_REDUCE_SCATTER)
PAIR(Alltoallv, Ialltoallv, p_alltoallv, NPY_ALLTOALLV)
PAIR(Gather, Igather, p_gather, NPY_GATHER)
PAIR(Gatherv, Igatherv, p_gatherv, NPY_GATHERV)
PAIR(Scatter, Iscatter, p_scatter, NPY_SCATTER)
PAIR(Scatterv, Iscatterv, p_scatterv, NPY_SCATTERV)
PAIR(Send, Isend, p_send, NPY_SEND)
PAIR(Recv, Irecv, p_recv, NPY_RECV)
PAIR(Barrier, Ibarrier, p_barrier, NPY_BARRIER)

/* The blocking method and its I-form (mpi4py's names: Allreduce,
 * Iallreduce). */
#define METHOD(Name, doc)                         \
  {                                               \
#Name, (PyCFunction)(void (*)(void))m_##Name, \
        METH_VARARGS | METH_KEYWORDS, #Name doc   \
  }
#define IMETHOD(IName, doc)                                                  \
  {                                                                          \
#IName, (PyCFunction)(void (*)(void))m_##IName,                          \
        METH_VARARGS | METH_KEYWORDS, #IName doc " Non-blocking: a Request." \
  }

PyMethodDef npy_comm_buffer_methods[] = {
    METHOD(Allreduce, "(sendbuf, recvbuf, op=SUM, dtype=None)"),
    IMETHOD(Iallreduce, "(sendbuf, recvbuf, op=SUM, dtype=None)"),
    METHOD(Scan, "(sendbuf, recvbuf, op=SUM, dtype=None)"),
    IMETHOD(Iscan, "(sendbuf, recvbuf, op=SUM, dtype=None)"),
    METHOD(Exscan, "(sendbuf, recvbuf, op=SUM, dtype=None)"),
    IMETHOD(Iexscan, "(sendbuf, recvbuf, op=SUM, dtype=None)"),
    METHOD(Bcast, "(buf, root=0, dtype=None)"),
    IMETHOD(Ibcast, "(buf, root=0, dtype=None)"),
    METHOD(Reduce, "(sendbuf, recvbuf=None, op=SUM, root=0, dtype=None)"),
    IMETHOD(Ireduce, "(sendbuf, recvbuf=None, op=SUM, root=0, dtype=None)"),
    METHOD(Allgather, "(sendbuf, recvbuf, dtype=None)"),
    IMETHOD(Iallgather, "(sendbuf, recvbuf, dtype=None)"),
    METHOD(Alltoall, "(sendbuf, recvbuf, dtype=None)"),
    IMETHOD(Ialltoall, "(sendbuf, recvbuf, dtype=None)"),
    METHOD(Allgatherv, "(sendbuf, recvbuf, counts, displs=None, dtype=None)"),
    IMETHOD(Iallgatherv, "(sendbuf, recvbuf, counts, displs=None, dtype=None)"),
    METHOD(Reduce_scatter,
           "(sendbuf, recvbuf, recvcounts=None, op=SUM, dtype=None)"),
    IMETHOD(Ireduce_scatter,
            "(sendbuf, recvbuf, recvcounts=None, op=SUM, dtype=None)"),
    METHOD(Alltoallv,
           "(sendbuf, recvbuf, sendcounts=None, recvcounts, sdispls=None, "
           "rdispls=None, dtype=None)"),
    IMETHOD(Ialltoallv,
            "(sendbuf, recvbuf, sendcounts=None, recvcounts, sdispls=None, "
            "rdispls=None, dtype=None)"),
    METHOD(Gather, "(sendbuf, recvbuf=None, root=0, dtype=None)"),
    IMETHOD(Igather, "(sendbuf, recvbuf=None, root=0, dtype=None)"),
    METHOD(Gatherv,
           "(sendbuf, recvbuf=None, counts=None, displs=None, root=0, "
           "dtype=None)"),
    IMETHOD(Igatherv,
            "(sendbuf, recvbuf=None, counts=None, displs=None, root=0, "
            "dtype=None)"),
    METHOD(Scatter, "(sendbuf, recvbuf, root=0, dtype=None)"),
    IMETHOD(Iscatter, "(sendbuf, recvbuf, root=0, dtype=None)"),
    METHOD(Scatterv,
           "(sendbuf, recvbuf, counts=None, displs=None, root=0, dtype=None)"),
    IMETHOD(Iscatterv,
            "(sendbuf, recvbuf, counts=None, displs=None, root=0, dtype=None)"),
    METHOD(Send, "(buf, dest, tag=0, dtype=None)"),
    IMETHOD(Isend, "(buf, dest, tag=0, dtype=None)"),
    METHOD(Recv, "(buf, source=ANY_SOURCE, tag=ANY_TAG, dtype=None) -> Status"),
    IMETHOD(Irecv, "(buf, source=ANY_SOURCE, tag=ANY_TAG, dtype=None)"),
    METHOD(Barrier, "()"),
    IMETHOD(Ibarrier, "()"),
    {NULL, NULL, 0, NULL}};

/* ---- Comm: the rest ---- */

static PyObject *comm_int(PyObject *self, void *which) {
  npy_comm *c = (npy_comm *)self;
  int rank, size;
  if (npy_comm_check(c, "Comm") < 0 || npy_comm_rank_size(c, &rank, &size) < 0)
    return NULL;
  return PyLong_FromLong(which ? size : rank);
}

static PyObject *comm_epoch(PyObject *self, void *unused) {
  npy_comm *c = (npy_comm *)self;
  uint32_t e = 0;
  if (npy_comm_check(c, "epoch") < 0) return NULL;
  int rc = nexar_comm_epoch(c->comm, &e);
  if (rc < 0) return npy_raise(rc, "epoch", NULL);
  return PyLong_FromUnsignedLong(e);
}

static PyObject *comm_get_handle(PyObject *self, void *unused) {
  npy_comm *c = (npy_comm *)self;
  if (npy_comm_check(c, "handle") < 0) return NULL;
  return PyCapsule_New(c->comm, "nexar_comm_t", NULL);
}

static PyObject *comm_get_context(PyObject *self, void *unused) {
  return Py_NewRef(((npy_comm *)self)->ctx);
}

static PyObject *comm_id_of(PyObject *self, PyObject *arg) {
  npy_comm *c = (npy_comm *)self;
  int rank = PyLong_AsLong(arg), id = 0;
  if (rank == -1 && PyErr_Occurred()) return NULL;
  if (npy_comm_check(c, "id_of") < 0) return NULL;
  int rc = nexar_comm_id_of(c->comm, rank, &id);
  if (rc < 0)
    return npy_invalid("id_of: rank %d is not a rank of this communicator",
                       rank);
  return PyLong_FromLong(id);
}

/* Split, Dup and shrink: a new Comm of the same Python type, or None. */
static PyObject *new_comm(npy_comm *c, const char *what, int color, int key) {
  if (npy_comm_check(c, what) < 0) return NULL;
  nexar_comm_t *nc = NULL;
  int rc;
  c->ctx->busy++;
  Py_BEGIN_ALLOW_THREADS;
  if (what[0] == 'S')
    rc = nexar_comm_split(c->comm, color, key, &nc);
  else if (what[0] == 'D')
    rc = nexar_comm_dup(c->comm, &nc);
  else
    rc = nexar_comm_shrink(c->comm, &nc);
  Py_END_ALLOW_THREADS;
  c->ctx->busy--;
  if (rc < 0) return npy_raise_comm(rc, what, c->comm);
  if (!nc) Py_RETURN_NONE;
  return npy_comm_new(c->ctx, nc, 0);
}

static PyObject *comm_split(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"color", "key", NULL};
  npy_comm *c = (npy_comm *)self;
  int color, key = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "i|i:Split", kwlist, &color, &key))
    return NULL;
  return new_comm(c, "Split", color, key);
}

static PyObject *comm_dup(PyObject *self, PyObject *unused) {
  return new_comm((npy_comm *)self, "Dup", 0, 0);
}

static PyObject *comm_shrink(PyObject *self, PyObject *unused) {
  return new_comm((npy_comm *)self, "shrink", 0, 0);
}

static PyObject *comm_free(PyObject *self, PyObject *unused) {
  npy_comm *c = (npy_comm *)self;
  if (npy_comm_check(c, "Free") < 0) return NULL;
  if (c->is_world)
    return npy_raise(NEXAR_ERR_INVALID_USAGE, "Free",
                     "the world communicator belongs to the context");
  for (npy_request *r = c->ctx->reqs; r; r = r->next)
    if (r->comm == c)
      return npy_raise(NEXAR_ERR_INVALID_USAGE, "Free",
                       "a request on this communicator has not completed");
  int rc;
  nexar_comm_t *nc = c->comm;
  c->comm = NULL;
  c->ctx->busy++;
  Py_BEGIN_ALLOW_THREADS;
  rc = nexar_comm_free(&nc);
  Py_END_ALLOW_THREADS;
  c->ctx->busy--;
  if (rc < 0) return npy_raise(rc, "Free", nexar_strerror(rc));
  Py_RETURN_NONE;
}

static void comm_dealloc(PyObject *self) {
  /* A communicator not freed is freed by finalize (Free is collective). */
  Py_DECREF(((npy_comm *)self)->ctx);
  Py_TYPE(self)->tp_free(self);
}

static PyObject *comm_richcompare(PyObject *a, PyObject *b, int op) {
  if (!PyObject_TypeCheck(b, &npy_comm_type) || (op != Py_EQ && op != Py_NE))
    Py_RETURN_NOTIMPLEMENTED;
  int eq = ((npy_comm *)a)->comm == ((npy_comm *)b)->comm;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyMethodDef comm_methods[] = {
    {"Split", (PyCFunction)(void (*)(void))comm_split,
     METH_VARARGS | METH_KEYWORDS,
     "Split(color, key=0) -> Comm | None: collective; None for color "
     "UNDEFINED."},
    {"Dup", comm_dup, METH_NOARGS, "Dup() -> Comm: collective."},
    {"Free", comm_free, METH_NOARGS,
     "Free(): collective; every request on it must have completed."},
    {"shrink", comm_shrink, METH_NOARGS,
     "shrink() -> Comm: the live members, after failures (manual "
     "recovery)."},
    {"id_of", comm_id_of, METH_O, "id_of(rank) -> stable process id."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef comm_getset[] = {
    {"rank", comm_int, NULL, "This process's rank.", NULL},
    {"size", comm_int, NULL, "Number of ranks.", (void *)1},
    {"epoch", comm_epoch, NULL, "Rebuilds so far (recovery, elastic).", NULL},
    {"context", comm_get_context, NULL, "The Context.", NULL},
    {"handle", comm_get_handle, NULL,
     "PyCapsule 'nexar_comm_t' of the C communicator (for C extensions).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* The methods of comm.c, op.c's buffer methods and rpc.c's, in one table. */
static PyMethodDef all_methods[80];

int npy_comm_type_ready(void) {
  PyMethodDef *parts[] = {comm_methods, npy_comm_buffer_methods,
                          npy_comm_rpc_methods};
  size_t n = 0;
  for (size_t p = 0; p < 3; p++)
    for (PyMethodDef *m = parts[p]; m->ml_name; m++) {
      if (n + 1 >= sizeof(all_methods) / sizeof(all_methods[0])) {
        PyErr_SetString(PyExc_SystemError, "Comm: method table too small");
        return -1;
      }
      all_methods[n++] = *m;
    }
  npy_comm_type.tp_methods = all_methods;
  return PyType_Ready(&npy_comm_type);
}

PyTypeObject npy_comm_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nexar.Comm",
    .tp_basicsize = sizeof(npy_comm),
    .tp_dealloc = comm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A communicator (ctx.world, Split, Dup).",
    .tp_richcompare = comm_richcompare,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_getset = comm_getset,
};
