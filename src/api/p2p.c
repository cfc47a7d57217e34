/*
 * The public point-to-point API: argument checking on the caller's thread,
 * then requests handed to the progress thread (p2p/match.c, p2p/modes.c).
 */
#include <stdlib.h>

#include "api/api.h"

/* The call's name in messages. */
static const char *p2p_name(unsigned how) {
  if (how & NEXAR__API_PROBE) return "probe";
  if (how & NEXAR__API_GROUP) return "comm_create_group";
  if (how & NEXAR__API_SYNC) return "ssend";
  return how & NEXAR__API_SEND ? "send" : "recv";
}

/* Whether |peer| is a rank of |comm| and |tag| a user tag (a receive or
 * probe may pass the wildcards) and |count| elements of |es| bytes do not
 * overflow. */
static bool peer_tag_ok(const nexar_comm_t *comm, int peer, int tag,
                        unsigned how, size_t count, size_t es) {
  bool send = how & NEXAR__API_SEND;
  bool any_src = !send && peer == NEXAR_ANY_SOURCE;
  bool any_tag = !send && tag == NEXAR_ANY_TAG;
  return (any_src || (peer >= 0 && peer < comm->size)) &&
         (any_tag || (tag >= 0 && tag <= NEXAR_TAG_MAX)) &&
         count <= UINT64_MAX / es;
}

/* NEXAR_ERR_INVALID_ARG (message recorded) unless peer_tag_ok. */
static int check_peer_tag(nexar_comm_t *comm, int peer, int tag, unsigned how,
                          size_t count, size_t es) {
  if (!peer_tag_ok(comm, peer, tag, how, count, es)) {
    nexar__comm_set_error(comm,
                          "rank %d: %s: invalid peer rank %d (world size %d) "
                          "or tag %d",
                          comm->rank, p2p_name(how), peer, comm->size, tag);
    return NEXAR_ERR_INVALID_ARG;
  }
  return NEXAR_OK;
}

static int post_req(nexar_comm_t *comm, uint8_t *hbuf, uint64_t bytes,
                    nexar__stage_t *stage, const nexar_iov_t *iov, size_t niov,
                    uint32_t nsegs, nexar_dtype_t dtype, int peer, int tag,
                    unsigned how, nexar__req_t **out);

int nexar__api_p2p(nexar_comm_t *comm, const void *buf, size_t count,
                   nexar_dtype_t dtype, int peer, int tag, unsigned how,
                   nexar__req_t **out) {
  if (!comm || !out) return NEXAR_ERR_INVALID_ARG;
  bool send = how & NEXAR__API_SEND;
  size_t es = nexar_dtype_size(dtype);
  if (!es || (count && !buf)) {
    nexar__comm_set_error(comm, "rank %d: %s: invalid dtype %d or NULL buffer",
                          comm->rank, p2p_name(how), (int)dtype);
    return NEXAR_ERR_INVALID_ARG;
  }
  int crc = check_peer_tag(comm, peer, tag, how, count, es);
  if (crc < 0) return crc;
  /* Device memory: a send is copied to a bounce buffer now, a receive
   * lands in one and is copied back at completion. */
  uint8_t *hbuf = (uint8_t *)(uintptr_t)buf;
  uint64_t bytes = (uint64_t)count * es;
  nexar__stage_t *stage = NULL;
  nexar__dev_t *dev = &comm->ctx->dev;
  if (bytes && !(how & NEXAR__API_GROUP) && !nexar__dev_host_only(dev)) {
    const char *what = send ? "send" : "recv";
    const char *role = send ? "send" : "receive";
    int kind = nexar__dev_classify(dev, comm, what, role, buf, bytes);
    if (kind < 0) return kind;
    if (kind == NEXAR_MEM_DEVICE) {
      nexar__region_t all = {0, bytes};
      int rc = nexar__stage_add(&stage, dev, comm, what, role, hbuf, bytes,
                                &all, send ? 1 : 0, &all, send ? 0 : 1, &hbuf);
      if (rc < 0) {
        nexar__stage_abort(stage);
        return rc;
      }
    }
  }
  return post_req(comm, hbuf, bytes, stage, NULL, 0, 0, dtype, peer, tag, how,
                  out);
}

/* Builds and posts the request of a checked call: contiguous (|hbuf|,
 * |stage|) or vectored (the |nsegs| non-empty entries of the |niov| in
 * |iov|, copied after the request). */
static int post_req(nexar_comm_t *comm, uint8_t *hbuf, uint64_t bytes,
                    nexar__stage_t *stage, const nexar_iov_t *iov, size_t niov,
                    uint32_t nsegs, nexar_dtype_t dtype, int peer, int tag,
                    unsigned how, nexar__req_t **out) {
  bool send = how & NEXAR__API_SEND;
  bool any_src = !send && peer == NEXAR_ANY_SOURCE;
  nexar__req_t *r =
      nexar__zalloc(sizeof(*r) + (size_t)nsegs * sizeof(nexar__seg_t));
  if (!r) {
    nexar__stage_abort(stage);
    return NEXAR_ERR_NOMEM;
  }
  if (nsegs) {
    r->segs = (nexar__seg_t *)(r + 1);
    for (size_t i = 0, off = 0; i < niov; i++) {
      if (!iov[i].bytes) continue;
      r->segs[r->nsegs++] =
          (nexar__seg_t){(uint8_t *)iov[i].base, iov[i].bytes, off};
      off += iov[i].bytes;
    }
  }
  r->stage = stage;
  r->kind = send ? NEXAR__REQ_SEND : NEXAR__REQ_RECV;
  r->comm = comm;
  r->comm_peer = peer;
  r->peer = any_src ? NEXAR_ANY_SOURCE : comm->world_ranks[peer];
  r->t_start = nexar__now();
  r->tag = tag;
  r->lane = NEXAR__LANE_DATA;
  r->buf = hbuf;
  r->cap = bytes;
  r->st.source = peer;
  r->st.tag = tag;
  r->probe = how & NEXAR__API_PROBE;
  r->hdr.step = how & NEXAR__API_GROUP  ? NEXAR__P2P_GROUP
                : how & NEXAR__API_SYNC ? NEXAR__P2P_SYNC
                                        : NEXAR__P2P_STANDARD;
  if (how & NEXAR__API_GROUP) r->lane = NEXAR__LANE_CONTROL;
  if (send && (how & NEXAR__API_SYNC)) r->sync = NEXAR__SYNC_WAIT;
  if (send) {
    r->hdr.kind = NEXAR__KIND_P2P;
    r->hdr.comm_id = comm->id;
    r->hdr.src_rank = (uint32_t)comm->rank;
    r->hdr.tag = (uint32_t)tag;
    r->hdr.dtype = (uint8_t)dtype;
  }
  nexar__ep_post(&comm->ctx->ep, r);
  *out = r;
  return NEXAR_OK;
}

/* The vectored calls: NEXAR_ERR_INVALID_ARG (message recorded) for a list
 * longer than NEXAR_IOV_MAX, a NULL list or entry with bytes, a total that
 * overflows; NEXAR_ERR_UNSUPPORTED for an entry in device memory. Checked
 * before anything is allocated. */
static int api_p2pv(nexar_comm_t *comm, const nexar_iov_t *iov, size_t n,
                    int peer, int tag, unsigned how, nexar__req_t **out) {
  if (!comm || !out) return NEXAR_ERR_INVALID_ARG;
  const char *what = how & NEXAR__API_SEND ? "sendv" : "recvv";
  uint64_t total = 0;
  uint32_t nsegs = 0;
  if (n > NEXAR_IOV_MAX || (n && !iov)) {
    nexar__comm_set_error(comm,
                          "rank %d: %s: list of %zu entries (NULL: %d); at "
                          "most NEXAR_IOV_MAX=%d",
                          comm->rank, what, n, !iov, NEXAR_IOV_MAX);
    return NEXAR_ERR_INVALID_ARG;
  }
  for (size_t i = 0; i < n; i++) {
    if (!iov[i].bytes) continue;
    if (!iov[i].base || iov[i].bytes > UINT64_MAX - total) {
      nexar__comm_set_error(comm,
                            "rank %d: %s: entry %zu of %zu bytes is NULL or "
                            "overflows the total (%llu bytes before it)",
                            comm->rank, what, i, iov[i].bytes,
                            (unsigned long long)total);
      return NEXAR_ERR_INVALID_ARG;
    }
    total += iov[i].bytes;
    nsegs++;
  }
  int rc = check_peer_tag(comm, peer, tag, how, 0, 1);
  if (rc < 0) return rc;
  nexar__dev_t *dev = &comm->ctx->dev;
  for (size_t i = 0; i < n && !nexar__dev_host_only(dev); i++) {
    if (!iov[i].bytes) continue;
    int kind =
        nexar__dev_classify(dev, comm, what, "list", iov[i].base, iov[i].bytes);
    if (kind < 0) return kind;
    if (kind == NEXAR_MEM_DEVICE) {
      nexar__comm_set_error(comm,
                            "rank %d: %s: entry %zu is in device memory; "
                            "vectored calls take host memory only",
                            comm->rank, what, i);
      return NEXAR_ERR_UNSUPPORTED;
    }
  }
  return post_req(comm, NULL, total, NULL, iov, n, nsegs, NEXAR_BYTE, peer, tag,
                  how, out);
}

int nexar_isendv(nexar_comm_t *comm, const nexar_iov_t *iov, size_t n, int dest,
                 int tag, nexar_req_t **req) {
  return api_p2pv(comm, iov, n, dest, tag, NEXAR__API_SEND, req);
}

int nexar_irecvv(nexar_comm_t *comm, const nexar_iov_t *iov, size_t n,
                 int source, int tag, nexar_req_t **req) {
  return api_p2pv(comm, iov, n, source, tag, 0, req);
}

int nexar_sendv(nexar_comm_t *comm, const nexar_iov_t *iov, size_t n, int dest,
                int tag) {
  nexar__req_t *r;
  nexar__ep_defer_wake();
  int rc = nexar_isendv(comm, iov, n, dest, tag, &r);
  return nexar__wait_posted(rc, &r, NULL);
}

int nexar_recvv(nexar_comm_t *comm, const nexar_iov_t *iov, size_t n,
                int source, int tag, nexar_status_t *status) {
  nexar__req_t *r;
  nexar__ep_defer_wake();
  int rc = nexar_irecvv(comm, iov, n, source, tag, &r);
  return nexar__wait_posted(rc, &r, status);
}

int nexar_isend(nexar_comm_t *comm, const void *buf, size_t count,
                nexar_dtype_t dtype, int dest, int tag, nexar_req_t **req) {
  return nexar__api_p2p(comm, buf, count, dtype, dest, tag, NEXAR__API_SEND,
                        req);
}

int nexar_irecv(nexar_comm_t *comm, void *buf, size_t count,
                nexar_dtype_t dtype, int source, int tag, nexar_req_t **req) {
  return nexar__api_p2p(comm, buf, count, dtype, source, tag, 0, req);
}

/* Whether a blocking call may try the express path (p2p/express.c):
 * arguments the general path accepts (it reports the others), host
 * memory, a specific peer other than this rank. */
static bool express_ok(nexar_comm_t *comm, const void *buf, size_t count,
                       nexar_dtype_t dtype, int peer, int tag, unsigned how) {
  size_t es = nexar_dtype_size(dtype);
  return comm && es && (buf || !count) && peer != NEXAR_ANY_SOURCE &&
         peer != comm->rank && peer_tag_ok(comm, peer, tag, how, count, es) &&
         nexar__dev_host_only(&comm->ctx->dev);
}

int nexar_send(nexar_comm_t *comm, const void *buf, size_t count,
               nexar_dtype_t dtype, int dest, int tag) {
  if (express_ok(comm, buf, count, dtype, dest, tag, NEXAR__API_SEND) &&
      nexar__p2p_express_send(comm, buf,
                              (uint64_t)count * nexar_dtype_size(dtype), dtype,
                              dest, tag))
    return NEXAR_OK;
  nexar__req_t *r;
  nexar__ep_defer_wake();
  int rc = nexar_isend(comm, buf, count, dtype, dest, tag, &r);
  return nexar__wait_posted(rc, &r, NULL);
}

int nexar_recv(nexar_comm_t *comm, void *buf, size_t count, nexar_dtype_t dtype,
               int source, int tag, nexar_status_t *status) {
  int rc;
  if (express_ok(comm, buf, count, dtype, source, tag, 0) &&
      nexar__p2p_express_recv(comm, buf,
                              (uint64_t)count * nexar_dtype_size(dtype), source,
                              tag, status, &rc))
    return rc;
  nexar__req_t *r;
  nexar__ep_defer_wake();
  rc = nexar_irecv(comm, buf, count, dtype, source, tag, &r);
  return nexar__wait_posted(rc, &r, status);
}

int nexar_issend(nexar_comm_t *comm, const void *buf, size_t count,
                 nexar_dtype_t dtype, int dest, int tag, nexar_req_t **req) {
  return nexar__api_p2p(comm, buf, count, dtype, dest, tag,
                        NEXAR__API_SEND | NEXAR__API_SYNC, req);
}

int nexar_ssend(nexar_comm_t *comm, const void *buf, size_t count,
                nexar_dtype_t dtype, int dest, int tag) {
  nexar__req_t *r;
  nexar__ep_defer_wake();
  int rc = nexar_issend(comm, buf, count, dtype, dest, tag, &r);
  return nexar__wait_posted(rc, &r, NULL);
}

/* ---- Probes and cancels ---- */

typedef struct {
  nexar_comm_t *comm;
  int source, tag;
  bool found;
  nexar_status_t st;
} peek_t;

/* Engine: looks for the message; a revoked communicator answers as every
 * operation on it does (run_ops in core/engine.c). */
static int peek_fn(nexar__req_t *ctl) {
  peek_t *p = ctl->cb_arg;
  int why = atomic_load(&p->comm->revoked);
  if (why) {
    nexar__comm_set_error(p->comm, "%s", p->comm->revoke_msg);
    return why == NEXAR_ERR_PEER_FAILED ? NEXAR_ERR_REVOKED : why;
  }
  p->found = nexar__p2p_peek(p->comm, p->source, p->tag, &p->st);
  return 0;
}

int nexar_iprobe(nexar_comm_t *comm, int source, int tag, int *flag,
                 nexar_status_t *status) {
  if (!comm || !flag) return NEXAR_ERR_INVALID_ARG;
  *flag = 0;
  int rc = check_peer_tag(comm, source, tag, NEXAR__API_PROBE, 0, 1);
  if (rc < 0) return rc;
  nexar__ep_t *ep = &comm->ctx->ep;
  /* Polling makes progress, as nexar_test does: one pass if the engine is
   * free. */
  nexar__ep_progress(ep);
  peek_t p = {.comm = comm, .source = source, .tag = tag};
  rc = nexar__ep_call(ep, peek_fn, &p, UINT64_MAX);
  if (rc < 0) return comm->ctx->hooks->after(comm, rc);
  if (p.found) {
    *flag = 1;
    if (status) *status = p.st;
  }
  return NEXAR_OK;
}

int nexar_probe(nexar_comm_t *comm, int source, int tag,
                nexar_status_t *status) {
  nexar__req_t *r;
  nexar__ep_defer_wake();
  int rc = nexar__api_p2p(comm, NULL, 0, NEXAR_BYTE, source, tag,
                          NEXAR__API_PROBE, &r);
  return nexar__wait_posted(rc, &r, status);
}

static int cancel_fn(nexar__req_t *ctl) {
  nexar__p2p_cancel_recv(ctl->cb_arg);
  return 0;
}

int nexar_cancel(nexar_req_t *req) {
  if (!req) return NEXAR_ERR_INVALID_ARG;
  /* Only a receive can be cancelled; the engine looks whether a message
   * has been matched to it yet. */
  if (req->kind == NEXAR__REQ_RECV && !atomic_load(&req->done))
    nexar__ep_call(&req->comm->ctx->ep, cancel_fn, req, UINT64_MAX);
  return NEXAR_OK;
}
