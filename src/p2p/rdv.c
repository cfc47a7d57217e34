/*
 * Rendezvous of relayed messages above the end-to-end credit
 * (docs/topology.md section 10). Engine only.
 *
 * A relayed point-to-point message whose payload exceeds what one credited
 * frame carries (NEXAR_RELAY_CREDIT_BYTES less the relay envelope and
 * inner header) first sends only a credited first part (P2P RDV: its
 * header, the message's length in count, its first bytes), which the
 * destination takes in like any credited frame: matched, or kept in the
 * unexpected store within the per-origin bounds. The send then waits like
 * a synchronous one; once a receive matches the first part, the
 * destination answers MATCHED (a control message, consumed at once: the
 * clear-to-send), and the origin copies the rest out as credited frames
 * (P2P RDV_DATA, each at most one credited frame, its offset in count),
 * which the destination writes straight into the matched receive. So
 * every relayed byte of such a message travels under the end-to-end
 * credit, and no part of it waits on a match anywhere but the first. A
 * vectored send (nexar_sendv) goes the same way, each part gathered from
 * its segments as it is copied out.
 */
#include <stdlib.h>
#include <string.h>

#include "p2p/p2p.h"

/* The payload one credited relay frame carries. */
static uint64_t part(const nexar_ctx_t *ctx) {
  return nexar__credit_frame(ctx);
}

/* The first part's payload: at most the eager size too, so that unmatched
 * it waits like a small message (detached by count, NEXAR_MAX_STREAMS per
 * origin) and leaves the destination's byte bound to whole messages. */
static uint64_t first(const nexar_ctx_t *ctx) {
  uint64_t e = (uint64_t)ctx->prm.eager_bytes;
  return e < part(ctx) ? e : part(ctx);
}

bool nexar__rdv_wants(nexar_ctx_t *ctx, const nexar__req_t *req, bool relayed) {
  return relayed && ctx->topo.credit && req->kind == NEXAR__REQ_SEND &&
         req->lane == NEXAR__LANE_DATA && req->hdr.kind == NEXAR__KIND_P2P &&
         (req->hdr.step == NEXAR__P2P_STANDARD ||
          req->hdr.step == NEXAR__P2P_SYNC) &&
         req->cap > part(ctx);
}

bool nexar__rdv_rpc_wants(nexar_ctx_t *ctx, const nexar__req_t *req,
                          bool relayed) {
  return relayed && ctx->topo.credit && req->kind == NEXAR__REQ_SEND &&
         req->lane == NEXAR__LANE_RPC && req->hdr.kind == NEXAR__KIND_RPC &&
         req->hdr.step != NEXAR__RPC_PART && !req->nsegs &&
         req->cap > part(ctx);
}

/* Queues |n| bytes at payload offset |off| of send |r| (header |h|) as
 * one copied frame; a vectored send's are gathered into |tmp| first (room
 * for one part). */
static int emit_part(nexar_ctx_t *ctx, nexar__req_t *r, nexar__hdr_t *h,
                     uint64_t off, uint64_t n, uint8_t *tmp) {
  if (r->nsegs) nexar__seg_copy(r->segs, r->nsegs, off, tmp, (size_t)n, true);
  return nexar__p2p_emit(ctx, r->peer, h, NEXAR__LANE_DATA,
                         r->nsegs ? tmp : r->buf + off, n, true, NULL, r->comm);
}

/* Scratch for gathering one part of vectored send |r| (NULL otherwise);
 * *rc NEXAR_ERR_NOMEM when it cannot be had. */
static uint8_t *gather_tmp(const nexar__req_t *r, uint64_t n, int *rc) {
  if (!r->nsegs) return NULL;
  uint8_t *t = malloc(n ? (size_t)n : 1);
  if (!t) *rc = NEXAR_ERR_NOMEM;
  return t;
}

int nexar__rdv_send(nexar_ctx_t *ctx, nexar__req_t *req) {
  nexar__hdr_t h = req->hdr;
  h.step = NEXAR__P2P_RDV;
  h.count = req->cap;
  int rc = 0;
  uint8_t *tmp = gather_tmp(req, first(ctx), &rc);
  if (rc == 0) rc = emit_part(ctx, req, &h, 0, first(ctx), tmp);
  free(tmp);
  if (rc < 0) return rc;
  /* Found by the clear-to-send as a synchronous send is by its MATCHED. */
  req->hdr.seq = h.seq;
  req->sync |= NEXAR__SYNC_RDV | NEXAR__SYNC_SENT;
  if (!(req->sync & NEXAR__SYNC_LINKED)) nexar__p2p_sync_link(req);
  return 0;
}

void nexar__rdv_rest(nexar__req_t *r) {
  nexar_ctx_t *ctx = r->comm->ctx;
  uint64_t p = part(ctx);
  int rc = 0;
  uint8_t *tmp = gather_tmp(r, p, &rc);
  for (uint64_t off = first(ctx); off < r->cap && rc == 0; off += p) {
    nexar__hdr_t h = {.kind = NEXAR__KIND_P2P,
                      .step = NEXAR__P2P_RDV_DATA,
                      .comm_id = r->hdr.comm_id,
                      .src_rank = r->hdr.src_rank,
                      .tag = r->hdr.tag,
                      .coll_seq = r->hdr.seq,
                      .count = off};
    uint64_t n = r->cap - off < p ? r->cap - off : p;
    rc = emit_part(ctx, r, &h, off, n, tmp);
  }
  free(tmp);
  r->st.bytes = r->cap;
  nexar__req_complete(r, rc < 0 ? rc : NEXAR_OK);
}

/* A relayed RPC message above one credited frame (rule 7): its first
 * credited frame carries its header with the whole length in algo, and
 * the rest follows at once in RPC PART frames of at most one credited
 * frame each, sequenced on the RPC lane. No clear-to-send: the
 * destination takes RPC messages in as they come (a request into a buffer
 * of the announced size, a response into its pending call). All copied,
 * so |req| completes here. */
int nexar__rdv_rpc_send(nexar_ctx_t *ctx, nexar__req_t *req) {
  uint64_t p = part(ctx);
  nexar__hdr_t h = req->hdr;
  h.algo = (uint32_t)req->cap; /* at most NEXAR_RPC_MAX_BYTES, 1 << 30 */
  int rc = nexar__p2p_emit(ctx, req->peer, &h, NEXAR__LANE_RPC, req->buf, p,
                           true, NULL, req->comm);
  if (rc < 0) return rc;
  for (uint64_t off = p; off < req->cap && rc == 0; off += p) {
    nexar__hdr_t d = {.kind = NEXAR__KIND_RPC,
                      .step = NEXAR__RPC_PART,
                      .comm_id = h.comm_id,
                      .src_rank = h.src_rank,
                      .tag = h.tag,
                      .coll_seq = h.seq,
                      .count = off};
    uint64_t n = req->cap - off < p ? req->cap - off : p;
    rc = nexar__p2p_emit(ctx, req->peer, &d, NEXAR__LANE_RPC, req->buf + off, n,
                         true, NULL, req->comm);
  }
  req->st.bytes = req->cap;
  nexar__p2p_complete(req, rc < 0 ? rc : NEXAR_OK);
  return 0;
}

/* ---- Destination ---- */

void nexar__rdv_bound(nexar__imsg_t *m, nexar__req_t *r) {
  nexar_comm_t *comm = r->comm;
  r->rdv_origin = m->origin;
  r->rdv_lane = m->hdr.lane;
  r->rdv_seq = m->hdr.seq;
  r->rdv_total = nexar__msg_bytes(&m->hdr);
  r->rdv_left = r->rdv_total - m->hdr.payload_len;
  r->st.source = (int)m->hdr.src_rank;
  r->st.tag = (int)m->hdr.tag;
  r->rdv_next = comm->rdv;
  comm->rdv = r;
  r->rdv_linked = true;
}

void nexar__rdv_unlink(nexar__req_t *r) {
  if (!r->rdv_linked) return;
  for (nexar__req_t **pp = &r->comm->rdv; *pp; pp = &(*pp)->rdv_next)
    if (*pp == r) {
      *pp = r->rdv_next;
      break;
    }
  r->rdv_next = NULL;
  r->rdv_linked = false;
}

/* The whole message is in: |r| ends as a receive of its full length. */
static void finish(nexar__req_t *r) {
  nexar__rdv_unlink(r);
  nexar__hdr_t h = {.src_rank = (uint32_t)r->st.source,
                    .tag = (uint32_t)r->st.tag,
                    .seq = r->rdv_seq,
                    .payload_len = r->rdv_total};
  nexar__p2p_recv_end(r, &h);
}

bool nexar__rdv_first_in(nexar__req_t *r) {
  if (!r->rdv_linked) return false;
  r->msg = NULL;
  if (!r->rdv_left) finish(r);
  return true;
}

/* The receive waiting for later part |m|, or NULL (it ended). */
static nexar__req_t *waiting(nexar_ctx_t *ctx, const nexar__imsg_t *m) {
  nexar_comm_t *comm = nexar__find_comm(ctx, m->hdr.comm_id);
  for (nexar__req_t *r = comm ? comm->rdv : NULL; r; r = r->rdv_next)
    if (r->rdv_origin == m->origin && r->rdv_lane == m->hdr.lane &&
        r->rdv_seq == m->hdr.coll_seq)
      return r;
  return NULL;
}

void nexar__rdv_data(nexar_ctx_t *ctx, nexar__imsg_t *m, uint64_t off,
                     const uint8_t *d, size_t n) {
  nexar__req_t *r = waiting(ctx, m);
  if (!r) return; /* cancelled, failed or timed out: dropped */
  if (m->bad_hash) {
    nexar__rdv_unlink(r);
    if (r->msg) r->msg->req = NULL;
    r->msg = NULL;
    nexar__comm_set_error(
        r->comm,
        "rank %d: part of message seq %llu from process %d relayed through "
        "rank %d: its payload does not match the digest its origin "
        "authenticated; it was refused",
        r->comm->rank, (unsigned long long)r->rdv_seq, m->origin,
        m->conn ? m->conn->peer : -1);
    nexar__req_complete(r, NEXAR_ERR_AUTH);
    return;
  }
  uint64_t at = m->hdr.count + off;
  if (at < r->cap) {
    size_t k = r->cap - at < n ? (size_t)(r->cap - at) : n;
    if (r->nsegs)
      nexar__seg_copy(r->segs, r->nsegs, at, (uint8_t *)d, k, false);
    else
      memcpy(r->buf + at, d, k);
  }
  r->rdv_left -= n < r->rdv_left ? n : r->rdv_left;
  if (!r->rdv_left && !r->msg) finish(r); /* the first part is in too */
}

void nexar__rdv_on_part(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  nexar__req_t *r = waiting(ctx, m);
  if (r && m->hdr.count + m->hdr.payload_len > r->rdv_total) {
    nexar__p2p_refuse(ctx, m->conn, m, "rendezvous part beyond its message");
    return;
  }
  m->rdv = true;
  if (r && m->buf_len) nexar__rdv_data(ctx, m, 0, m->buf, m->buf_len);
  /* Its later bytes go to nexar__rdv_data as they come. */
  nexar__p2p_discard(ctx, m);
}

void nexar__rdv_cut(nexar_ctx_t *ctx, nexar__imsg_t *m, int err) {
  nexar__req_t *r = m->rdv && !m->fin ? waiting(ctx, m) : NULL;
  if (!r) return;
  nexar__rdv_unlink(r);
  if (r->msg) r->msg->req = NULL;
  r->msg = NULL;
  if (!r->internal) /* an RPC request being taken in has no caller here */
    nexar__comm_set_error(r->comm,
                          "rank %d: part of message seq %llu from process %d "
                          "relayed through rank %d was cut: its stream "
                          "closed; the receive buffer is unspecified",
                          r->comm->rank, (unsigned long long)r->rdv_seq,
                          m->origin, m->conn ? m->conn->peer : -1);
  nexar__req_complete(r, err);
}

void nexar__rdv_fail_peer(nexar_ctx_t *ctx, int peer, int err,
                          const char *why) {
  NEXAR__FOR_EACH_COMM(ctx, comm, {
    for (nexar__req_t *r = comm->rdv, *next; r; r = next) {
      next = r->rdv_next;
      if (r->rdv_origin != peer) continue;
      nexar__rdv_unlink(r);
      if (r->msg) r->msg->req = NULL;
      r->msg = NULL;
      FAIL_TEXT(comm, "%s", why);
      nexar__req_complete(r, err);
    }
  });
}
