/*
 * Point-to-point: every mode of send and receive, probe, sendrecv,
 * persistent requests, and the buffered-send buffer. Messages travel as
 * bytes (NEXAR_BYTE): a contiguous datatype goes to nexar as the user's
 * buffer (no copy), any other is packed into a temporary on the way out and
 * unpacked from one on the way in.
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_int.h"

static int ntag(int tag) {
  return tag == MPI_ANY_TAG ? NEXAR_ANY_TAG : tag;
}

/* The blocking nexar send (|sync|: synchronous) and receive of bytes; while
 * layer-built schedules are active, their non-blocking forms waited for by
 * nxm_wait_nexar, which keeps those schedules moving. */
static int send_bytes(nexar_comm_t *nc, const void *p, size_t n, int dest,
                      int tag, int sync) {
  if (!nxm_progress_active())
    return sync ? nexar_ssend(nc, p, n, NEXAR_BYTE, dest, tag)
                : nexar_send(nc, p, n, NEXAR_BYTE, dest, tag);
  nexar_req_t *q = NULL;
  int rc = sync ? nexar_issend(nc, p, n, NEXAR_BYTE, dest, tag, &q)
                : nexar_isend(nc, p, n, NEXAR_BYTE, dest, tag, &q);
  return rc == NEXAR_OK ? nxm_wait_nexar(&q, NULL) : rc;
}

static int recv_bytes(nexar_comm_t *nc, void *p, size_t n, int source, int tag,
                      nexar_status_t *st) {
  if (!nxm_progress_active())
    return nexar_recv(nc, p, n, NEXAR_BYTE, source, tag, st);
  nexar_req_t *q = NULL;
  int rc = nexar_irecv(nc, p, n, NEXAR_BYTE, source, tag, &q);
  return rc == NEXAR_OK ? nxm_wait_nexar(&q, st) : rc;
}

/* Validates the arguments of a send (|recv| 0) or receive (1) and finds
 * the communicator and type. Reports errors through nxm_err. */
static int check_args(const char *fn, MPI_Comm comm, const void *buf, int count,
                      MPI_Datatype type, int peer, int tag, int recv,
                      nxm_comm_t **c, nxm_dtype_t **t, size_t *bytes) {
  *c = nxm_comm_get(comm);
  if (!*c) {
    int cls = nxm_check_init(fn);
    if (cls != MPI_SUCCESS) return cls;
    return nxm_err(NULL, MPI_ERR_COMM, fn, "invalid communicator");
  }
  if (count < 0) return nxm_err(*c, MPI_ERR_COUNT, fn, "count %d", count);
  int cls = nxm_dtype_check(type, count, t, bytes);
  if (cls != MPI_SUCCESS)
    return nxm_err(*c, cls, fn, "datatype invalid or not committed");
  if (!buf && *bytes > 0 && (*t)->true_lb == 0)
    return nxm_err(*c, MPI_ERR_BUFFER, fn, "NULL buffer");
  cls = nxm_check_rank(*c, fn, peer, recv);
  if (cls == MPI_SUCCESS) cls = nxm_check_tag(*c, fn, tag, recv);
  return cls;
}

int nxm_p2p_isend_mode(nxm_req_t *r, size_t i, nexar_comm_t *nc,
                       const void *buf, size_t count, const nxm_dtype_t *t,
                       int dest, int tag, int mode) {
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  nxm_xfer_t *x = &r->xfer[i];
  if (nxm_view_make(buf, count, t, 1, &x->view) != MPI_SUCCESS)
    return MPI_ERR_NO_MEM;
  int rc = mode == NXM_SEND_SYNC
               ? nexar_issend(nc, x->view.ptr, x->view.bytes, NEXAR_BYTE, dest,
                              tag, &r->sub[i])
               : nexar_isend(nc, x->view.ptr, x->view.bytes, NEXAR_BYTE, dest,
                             tag, &r->sub[i]);
  if (rc != NEXAR_OK) {
    nxm_view_free(&x->view);
    return nxm_class_of_nexar(rc);
  }
  return MPI_SUCCESS;
}

int nxm_p2p_isend(nxm_req_t *r, size_t i, nexar_comm_t *nc, const void *buf,
                  size_t count, const nxm_dtype_t *t, int dest, int tag) {
  return nxm_p2p_isend_mode(r, i, nc, buf, count, t, dest, tag,
                            NXM_SEND_STANDARD);
}

int nxm_p2p_irecv(nxm_req_t *r, size_t i, nexar_comm_t *nc, void *buf,
                  size_t count, const nxm_dtype_t *t, int source, int tag) {
  if (source == MPI_PROC_NULL) {
    if (r->kind == NXM_REQ_RECV)
      nxm_status_set(&r->status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
    return MPI_SUCCESS;
  }
  nxm_xfer_t *x = &r->xfer[i];
  if (nxm_view_make(buf, count, t, 0, &x->view) != MPI_SUCCESS)
    return MPI_ERR_NO_MEM;
  if (x->view.tmp) {
    x->ubuf = buf;
    x->ucount = count;
    x->utype = (nxm_dtype_t *)t;
    nxm_dtype_ref(x->utype);
  }
  int rc = nexar_irecv(nc, x->view.ptr, x->view.bytes, NEXAR_BYTE, source,
                       ntag(tag), &r->sub[i]);
  if (rc != NEXAR_OK) {
    if (x->utype) nxm_dtype_unref(x->utype);
    nxm_view_free(&x->view);
    memset(x, 0, sizeof *x);
    return nxm_class_of_nexar(rc);
  }
  return MPI_SUCCESS;
}

/* ---- Buffered sends: the data is copied at the call (into the layer's
 * memory), counted against the attached buffer's size (MPI_ERR_BUFFER
 * when it does not fit), and sent in the background. */

static void *g_battach;
static size_t g_bsize, g_bused;

static int bsend_finish(nxm_req_t *r, int rc) {
  nxm_lock();
  g_bused -= (size_t)(uintptr_t)r->state;
  nxm_unlock();
  return rc;
}

int MPI_Buffer_attach(void *buffer, int size) {
  if (size < 0 || (!buffer && size > 0))
    return nxm_err(NULL, MPI_ERR_BUFFER, "MPI_Buffer_attach", "size %d", size);
  nxm_lock();
  int busy = g_battach != NULL;
  if (!busy) {
    g_battach = buffer;
    g_bsize = (size_t)size;
  }
  nxm_unlock();
  if (busy)
    return nxm_err(NULL, MPI_ERR_BUFFER, "MPI_Buffer_attach",
                   "a buffer is already attached");
  return MPI_SUCCESS;
}

/* Waits until every buffered message has left, then detaches. */
int MPI_Buffer_detach(void *buffer_addr, int *size) {
  if (!buffer_addr || !size)
    return nxm_err(NULL, MPI_ERR_ARG, "MPI_Buffer_detach", "NULL");
  nxm_req_drain();
  nxm_lock();
  memcpy(buffer_addr, &g_battach, sizeof g_battach);
  *size = (int)g_bsize;
  g_battach = NULL;
  g_bsize = 0;
  nxm_unlock();
  return MPI_SUCCESS;
}

static int bsend(const char *fn, nxm_comm_t *c, const void *buf, int count,
                 nxm_dtype_t *t, size_t bytes, int dest, int tag) {
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  size_t need = bytes + MPI_BSEND_OVERHEAD;
  nxm_lock();
  int fits = g_battach && g_bused + need <= g_bsize;
  if (fits) g_bused += need;
  nxm_unlock();
  if (!fits)
    return nxm_err(c, MPI_ERR_BUFFER, fn,
                   "%zu bytes do not fit in the attached buffer", need);
  nxm_req_t *r = nxm_req_new(NXM_REQ_SEND, c, 1);
  int cls = MPI_ERR_NO_MEM;
  if (r) {
    r->state = (void *)(uintptr_t)need;
    r->finish = bsend_finish;
    nxm_xfer_t *x = &r->xfer[0];
    x->view.bytes = bytes;
    x->view.tmp = malloc(bytes ? bytes : 1);
    x->view.ptr = x->view.tmp;
    if (x->view.tmp) {
      nxm_pack(buf, (size_t)count, t, x->view.tmp);
      int rc = nexar_isend(c->nc, x->view.ptr, bytes, NEXAR_BYTE, dest, tag,
                           &r->sub[0]);
      cls = nxm_class_of_nexar(rc);
    }
  }
  if (cls != MPI_SUCCESS) {
    if (r) {
      r->finish = NULL;
      nxm_req_free(r);
    }
    nxm_lock();
    g_bused -= need;
    nxm_unlock();
    return nxm_err(c, cls, fn, "buffered send failed");
  }
  MPI_Request h = (MPI_Request)r;
  return MPI_Request_free(&h);
}

/* ---- Sends */

static int send_blocking(const char *fn, const void *buf, int count,
                         MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                         int mode) {
  nxm_comm_t *c;
  nxm_dtype_t *t;
  size_t bytes;
  int cls =
      check_args(fn, comm, buf, count, type, dest, tag, 0, &c, &t, &bytes);
  if (cls != MPI_SUCCESS) return cls;
  if (mode == NXM_SEND_BUFFERED)
    return bsend(fn, c, buf, count, t, bytes, dest, tag);
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  nxm_view_t v;
  if (nxm_view_make(buf, (size_t)count, t, 1, &v) != MPI_SUCCESS)
    return nxm_err(c, MPI_ERR_NO_MEM, fn, "packing %zu bytes", bytes);
  int rc = send_bytes(c->nc, v.ptr, bytes, dest, tag, mode == NXM_SEND_SYNC);
  nxm_view_free(&v);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, fn, rc);
  return MPI_SUCCESS;
}

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
             int tag, MPI_Comm comm) {
  return send_blocking("MPI_Send", buf, count, datatype, dest, tag, comm,
                       NXM_SEND_STANDARD);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm) {
  return send_blocking("MPI_Ssend", buf, count, datatype, dest, tag, comm,
                       NXM_SEND_SYNC);
}

/* Ready mode: a standard send satisfies it (the receive is posted). */
int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm) {
  return send_blocking("MPI_Rsend", buf, count, datatype, dest, tag, comm,
                       NXM_SEND_READY);
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm) {
  return send_blocking("MPI_Bsend", buf, count, datatype, dest, tag, comm,
                       NXM_SEND_BUFFERED);
}

/* Starts the operation of a (persistent or fresh) p2p request. */
int nxm_p2p_start(nxm_req_t *r) {
  const char *fn = r->kind == NXM_REQ_RECV ? "MPI_Recv_init/MPI_Start"
                                           : "MPI_Send_init/MPI_Start";
  nxm_dtype_t *t = nxm_dtype_get(r->ptype);
  nxm_comm_t *c = r->comm;
  r->done = 0;
  r->error = MPI_SUCCESS;
  nxm_status_empty(&r->status);
  int cls;
  if (r->kind == NXM_REQ_RECV) {
    cls = nxm_p2p_irecv(r, 0, c->nc, r->pbuf, (size_t)r->pcount, t, r->ppeer,
                        r->ptag);
  } else if (r->pmode == NXM_SEND_BUFFERED) {
    size_t bytes = (size_t)r->pcount * (size_t)t->size;
    cls = bsend(fn, c, r->pbuf, r->pcount, t, bytes, r->ppeer, r->ptag);
    if (cls != MPI_SUCCESS) return cls;
  } else {
    cls = nxm_p2p_isend_mode(r, 0, c->nc, r->pbuf, (size_t)r->pcount, t,
                             r->ppeer, r->ptag, r->pmode);
  }
  if (cls != MPI_SUCCESS) return nxm_err(c, cls, fn, "cannot start");
  r->active = 1;
  return MPI_SUCCESS;
}

/* Creates a p2p request; |persistent| 0 also starts it. */
static int make_req(const char *fn, int is_recv, int mode, int persistent,
                    void *buf, int count, MPI_Datatype type, int peer, int tag,
                    MPI_Comm comm, MPI_Request *request) {
  nxm_comm_t *c;
  nxm_dtype_t *t;
  size_t bytes;
  int cls = check_args(fn, comm, buf, count, type, peer, tag, is_recv, &c, &t,
                       &bytes);
  if (cls != MPI_SUCCESS) return cls;
  if (!request) return nxm_err(c, MPI_ERR_ARG, fn, "NULL request");
  if (mode == NXM_SEND_BUFFERED && !persistent) {
    cls = bsend(fn, c, buf, count, t, bytes, peer, tag);
    if (cls != MPI_SUCCESS) return cls;
    nxm_req_t *d = nxm_req_new(NXM_REQ_DONE, c, 0);
    if (!d) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
    *request = (MPI_Request)d;
    return MPI_SUCCESS;
  }
  nxm_req_t *r = nxm_req_new(is_recv ? NXM_REQ_RECV : NXM_REQ_SEND, c, 1);
  if (!r) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  r->persistent = persistent;
  r->pmode = mode;
  r->pbuf = buf;
  r->pcount = count;
  r->ptype = type;
  nxm_dtype_ref(t);
  r->ppeer = peer;
  r->ptag = tag;
  if (!persistent) {
    cls = nxm_p2p_start(r);
    if (cls != MPI_SUCCESS) {
      nxm_req_free(r);
      return cls;
    }
    r->active = 0;
  }
  *request = (MPI_Request)r;
  return MPI_SUCCESS;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Isend", 0, NXM_SEND_STANDARD, 0, (void *)buf, count,
                  datatype, dest, tag, comm, request);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest,
               int tag, MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Issend", 0, NXM_SEND_SYNC, 0, (void *)buf, count,
                  datatype, dest, tag, comm, request);
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest,
               int tag, MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Irsend", 0, NXM_SEND_READY, 0, (void *)buf, count,
                  datatype, dest, tag, comm, request);
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest,
               int tag, MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Ibsend", 0, NXM_SEND_BUFFERED, 0, (void *)buf, count,
                  datatype, dest, tag, comm, request);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
              MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Irecv", 1, 0, 0, buf, count, datatype, source, tag, comm,
                  request);
}

int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest,
                  int tag, MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Send_init", 0, NXM_SEND_STANDARD, 1, (void *)buf, count,
                  datatype, dest, tag, comm, request);
}

int MPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest,
                   int tag, MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Ssend_init", 0, NXM_SEND_SYNC, 1, (void *)buf, count,
                  datatype, dest, tag, comm, request);
}

int MPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest,
                   int tag, MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Rsend_init", 0, NXM_SEND_READY, 1, (void *)buf, count,
                  datatype, dest, tag, comm, request);
}

int MPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest,
                   int tag, MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Bsend_init", 0, NXM_SEND_BUFFERED, 1, (void *)buf, count,
                  datatype, dest, tag, comm, request);
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source,
                  int tag, MPI_Comm comm, MPI_Request *request) {
  return make_req("MPI_Recv_init", 1, 0, 1, buf, count, datatype, source, tag,
                  comm, request);
}

/* ---- Receives */

static void status_from(MPI_Status *st, const nexar_status_t *ns) {
  nxm_status_set(st, ns->source, ns->tag, MPI_SUCCESS, ns->bytes);
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
             MPI_Comm comm, MPI_Status *status) {
  const char *fn = "MPI_Recv";
  nxm_comm_t *c;
  nxm_dtype_t *t;
  size_t bytes;
  int cls = check_args(fn, comm, buf, count, datatype, source, tag, 1, &c, &t,
                       &bytes);
  if (cls != MPI_SUCCESS) return cls;
  if (source == MPI_PROC_NULL) {
    nxm_status_set(status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
    return MPI_SUCCESS;
  }
  nxm_view_t v;
  if (nxm_view_make(buf, (size_t)count, t, 0, &v) != MPI_SUCCESS)
    return nxm_err(c, MPI_ERR_NO_MEM, fn, "%zu bytes", bytes);
  nexar_status_t ns = {0};
  int rc = recv_bytes(c->nc, v.ptr, bytes, source, ntag(tag), &ns);
  if (v.tmp && (rc == NEXAR_OK || rc == NEXAR_ERR_TRUNCATE))
    nxm_unpack(v.tmp, ns.bytes < bytes ? ns.bytes : bytes, (size_t)count, t,
               buf);
  nxm_view_free(&v);
  status_from(status, &ns);
  if (rc == NEXAR_ERR_TRUNCATE)
    return nxm_err(c, MPI_ERR_TRUNCATE, fn,
                   "message of %zu bytes from rank %d, tag %d, longer than "
                   "the buffer's %zu",
                   ns.bytes, ns.source, ns.tag, bytes);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, fn, rc);
  return MPI_SUCCESS;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 int dest, int sendtag, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                 MPI_Status *status) {
  MPI_Request rr;
  int cls = MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &rr);
  if (cls != MPI_SUCCESS) return cls;
  cls = MPI_Send(sendbuf, sendcount, sendtype, dest, sendtag, comm);
  int rcls = MPI_Wait(&rr, status);
  return cls != MPI_SUCCESS ? cls : rcls;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest,
                         int sendtag, int source, int recvtag, MPI_Comm comm,
                         MPI_Status *status) {
  const char *fn = "MPI_Sendrecv_replace";
  nxm_comm_t *c;
  nxm_dtype_t *t;
  size_t bytes;
  int cls = check_args(fn, comm, buf, count, datatype, dest, sendtag, 0, &c, &t,
                       &bytes);
  if (cls != MPI_SUCCESS) return cls;
  void *copy = malloc(bytes ? bytes : 1);
  if (!copy) return nxm_err(c, MPI_ERR_NO_MEM, fn, "%zu bytes", bytes);
  nxm_pack(buf, (size_t)count, t, copy);
  MPI_Request rr;
  cls = MPI_Irecv(buf, count, datatype, source, recvtag, comm, &rr);
  if (cls == MPI_SUCCESS) {
    cls = MPI_Send(copy, (int)bytes, MPI_BYTE, dest, sendtag, comm);
    int rcls = MPI_Wait(&rr, status);
    if (cls == MPI_SUCCESS) cls = rcls;
  }
  free(copy);
  return cls;
}

/* ---- Probe */

static int probe(const char *fn, int source, int tag, MPI_Comm comm, int *flag,
                 MPI_Status *status, int blocking) {
  nxm_comm_t *c = nxm_comm_get(comm);
  if (!c) {
    int cls = nxm_check_init(fn);
    if (cls != MPI_SUCCESS) return cls;
    return nxm_err(NULL, MPI_ERR_COMM, fn, "invalid communicator");
  }
  int cls = nxm_check_rank(c, fn, source, 1);
  if (cls == MPI_SUCCESS) cls = nxm_check_tag(c, fn, tag, 1);
  if (cls != MPI_SUCCESS) return cls;
  if (!blocking && !flag) return nxm_err(c, MPI_ERR_ARG, fn, "NULL flag");
  if (source == MPI_PROC_NULL) {
    if (flag) *flag = 1;
    nxm_status_set(status, MPI_PROC_NULL, MPI_ANY_TAG, MPI_SUCCESS, 0);
    return MPI_SUCCESS;
  }
  nexar_status_t ns = {0};
  int f = 1;
  if (!blocking) nxm_progress(NULL);
  int rc = blocking ? nxm_probe_nexar(c->nc, source, ntag(tag), &ns)
                    : nexar_iprobe(c->nc, source, ntag(tag), &f, &ns);
  if (rc != NEXAR_OK) return nxm_err_nexar(c, fn, rc);
  if (flag) *flag = f;
  if (f) status_from(status, &ns);
  return MPI_SUCCESS;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  return probe("MPI_Probe", source, tag, comm, NULL, status, 1);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag,
               MPI_Status *status) {
  return probe("MPI_Iprobe", source, tag, comm, flag, status, 0);
}

/* ---- Matched probe. The message a probe found is the next one a receive
 * from its source with its tag gets (nexar matches FIFO per source, tag
 * and communicator), so MPI_Mrecv is that receive. Exact as long as no
 * other thread receives on the communicator between the two calls. */

#define NXM_MAGIC_MSG 0x4e4d4d53u /* "NMMS" */

typedef struct nxm_msg {
  uint32_t magic;
  nxm_comm_t *comm; /* referenced */
  int source, tag;
} nxm_msg_t;

static int mprobe(const char *fn, int source, int tag, MPI_Comm comm, int *flag,
                  MPI_Message *message, MPI_Status *status) {
  MPI_Status st;
  int f = 1;
  if (!message)
    return nxm_err(nxm_comm_get(comm), MPI_ERR_ARG, fn, "NULL message");
  int cls = probe(fn, source, tag, comm, flag ? &f : NULL, &st, !flag);
  if (cls != MPI_SUCCESS) return cls;
  if (flag) *flag = f;
  if (!f) return MPI_SUCCESS;
  if (status) *status = st;
  if (source == MPI_PROC_NULL) {
    *message = MPI_MESSAGE_NO_PROC;
    return MPI_SUCCESS;
  }
  nxm_comm_t *c = nxm_comm_get(comm);
  nxm_msg_t *m = malloc(sizeof *m);
  if (!m) return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  *m = (nxm_msg_t){NXM_MAGIC_DEAD, c, st.MPI_SOURCE, st.MPI_TAG};
  if (nxm_obj_open(m, NXM_MAGIC_MSG) != MPI_SUCCESS) {
    free(m);
    return nxm_err(c, MPI_ERR_NO_MEM, fn, "out of memory");
  }
  atomic_fetch_add(&c->refs, 1);
  *message = (MPI_Message)m;
  return MPI_SUCCESS;
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message,
               MPI_Status *status) {
  return mprobe("MPI_Mprobe", source, tag, comm, NULL, message, status);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag,
                MPI_Message *message, MPI_Status *status) {
  if (!flag)
    return nxm_err(nxm_comm_get(comm), MPI_ERR_ARG, "MPI_Improbe", "NULL");
  return mprobe("MPI_Improbe", source, tag, comm, flag, message, status);
}

/* Takes the message behind *message (set to MPI_MESSAGE_NULL): its
 * communicator handle, source and tag. MPI_MESSAGE_NO_PROC gives
 * MPI_PROC_NULL on MPI_COMM_SELF. */
static int take(const char *fn, MPI_Message *message, MPI_Comm *comm,
                int *source, int *tag) {
  if (message && *message == MPI_MESSAGE_NO_PROC) {
    *comm = MPI_COMM_SELF;
    *source = MPI_PROC_NULL;
    *tag = MPI_ANY_TAG;
    *message = MPI_MESSAGE_NULL;
    return MPI_SUCCESS;
  }
  if (!message || !nxm_obj_is(*message, NXM_MAGIC_MSG))
    return nxm_err(NULL, MPI_ERR_REQUEST, fn, "invalid message");
  nxm_msg_t *m = (nxm_msg_t *)*message;
  *comm = nxm_comm_handle(m->comm);
  *source = m->source;
  *tag = m->tag;
  nxm_obj_close(m);
  nxm_comm_unref(m->comm);
  free(m);
  *message = MPI_MESSAGE_NULL;
  return MPI_SUCCESS;
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
              MPI_Status *status) {
  MPI_Comm comm = MPI_COMM_NULL; /* set by take() when it succeeds */
  int source = MPI_PROC_NULL, tag = 0;
  int cls = take("MPI_Mrecv", message, &comm, &source, &tag);
  if (cls != MPI_SUCCESS) return cls;
  return MPI_Recv(buf, count, datatype, source, tag, comm, status);
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype datatype,
               MPI_Message *message, MPI_Request *request) {
  MPI_Comm comm = MPI_COMM_NULL; /* set by take() when it succeeds */
  int source = MPI_PROC_NULL, tag = 0;
  int cls = take("MPI_Imrecv", message, &comm, &source, &tag);
  if (cls != MPI_SUCCESS) return cls;
  return MPI_Irecv(buf, count, datatype, source, tag, comm, request);
}
