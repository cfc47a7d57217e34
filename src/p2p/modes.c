/*
 * Point-to-point beyond the standard send: synchronous sends (the receiver
 * acknowledges the match, docs/wire-protocol.md section 2), probes and the
 * cancel of a receive not yet matched. Engine thread, emu held.
 */
#include <stdlib.h>

#include "p2p/p2p.h"

void nexar__p2p_sync_link(nexar__req_t *r) {
  nexar_comm_t *comm = r->comm;
  r->prev = NULL;
  r->next = comm->ssend;
  if (comm->ssend) comm->ssend->prev = r;
  comm->ssend = r;
  r->sync |= NEXAR__SYNC_LINKED;
}

void nexar__p2p_sync_unlink(nexar__req_t *r) {
  if (!(r->sync & NEXAR__SYNC_LINKED)) return;
  nexar_comm_t *comm = r->comm;
  if (r->prev)
    r->prev->next = r->next;
  else
    comm->ssend = r->next;
  if (r->next) r->next->prev = r->prev;
  r->next = r->prev = NULL;
  r->sync &= (uint8_t)~NEXAR__SYNC_LINKED;
}

void nexar__p2p_complete(nexar__req_t *r, int rc) {
  if (r->sync) {
    if (rc == NEXAR_OK) {
      r->sync |= NEXAR__SYNC_SENT;
      if (!(r->sync & NEXAR__SYNC_MATCHED)) return; /* still linked */
    }
    nexar__p2p_sync_unlink(r);
  }
  nexar__req_complete(r, rc);
}

void nexar__p2p_on_matched(nexar_comm_t *comm, int from, uint64_t seq) {
  for (nexar__req_t *r = comm->ssend; r; r = r->next) {
    if (r->peer != from || r->hdr.seq != seq) continue;
    nexar__p2p_sync_unlink(r);
    r->sync |= NEXAR__SYNC_MATCHED;
    if (r->sync & NEXAR__SYNC_RDV)
      nexar__rdv_rest(r); /* the clear-to-send */
    else if (r->sync & NEXAR__SYNC_SENT)
      nexar__req_complete(r, NEXAR_OK);
    return;
  }
  /* None: the send ended already (timed out, cancelled by a failure). */
}

void nexar__p2p_ack_match(nexar_ctx_t *ctx, nexar_comm_t *comm,
                          const nexar__imsg_t *m) {
  if (m->origin == ctx->rank) {
    nexar__p2p_on_matched(comm, ctx->rank, m->hdr.seq);
    return;
  }
  nexar__hdr_t h = {.kind = NEXAR__KIND_P2P,
                    .step = NEXAR__P2P_MATCHED,
                    .comm_id = comm->id,
                    .src_rank = (uint32_t)comm->rank,
                    .coll_seq = m->hdr.seq};
  int rc = nexar__p2p_emit(ctx, m->origin, &h, NEXAR__LANE_CONTROL, NULL, 0,
                           false, NULL, NULL);
  if (rc < 0)
    /* The sender is gone or unreachable: its send fails there with the
     * failure, or with its op timeout. */
    NEXAR__WARN(NEXAR__SUB_P2P,
                "rank %d: comm %llu: cannot acknowledge the match of the "
                "synchronous message seq %llu from rank %u (process %d): %s",
                comm->rank, (unsigned long long)comm->id,
                (unsigned long long)m->hdr.seq, m->hdr.src_rank, m->origin,
                nexar_strerror(rc));
}

static void sync_fail_comm(nexar_comm_t *comm, int peer, int err,
                           const char *why) {
  for (nexar__req_t *r = comm->ssend, *next; r; r = next) {
    next = r->next;
    if (r->peer != peer) continue;
    FAIL_TEXT(comm, "%s", why);
    nexar__p2p_cancel(r, err);
  }
}

void nexar__p2p_sync_fail_peer(nexar_ctx_t *ctx, int peer, int err,
                               const char *why) {
  sync_fail_comm(ctx->world_comm, peer, err, why);
  for (int i = 0; i < ctx->ncomms; i++)
    sync_fail_comm(ctx->comms[i], peer, err, why);
}

void nexar__p2p_probed(nexar__req_t *r, const nexar__imsg_t *m) {
  r->st.source = (int)m->hdr.src_rank;
  r->st.tag = (int)m->hdr.tag;
  r->st.bytes = nexar__msg_bytes(&m->hdr);
  nexar__req_complete(r, NEXAR_OK);
}

bool nexar__p2p_peek(nexar_comm_t *comm, int source, int tag,
                     nexar_status_t *st) {
  nexar__req_t probe = {.kind = NEXAR__REQ_RECV,
                        .comm = comm,
                        .comm_peer = source,
                        .tag = tag,
                        .probe = true};
  for (nexar__imsg_t *m = comm->unexp; m; m = m->next) {
    if (!nexar__p2p_matches(&probe, m)) continue;
    st->source = (int)m->hdr.src_rank;
    st->tag = (int)m->hdr.tag;
    st->bytes = nexar__msg_bytes(&m->hdr);
    st->error = NEXAR_OK;
    st->rpc_code = 0;
    return true;
  }
  return false;
}

bool nexar__p2p_cancel_recv(nexar__req_t *r) {
  nexar_comm_t *comm = r->comm;
  if (atomic_load(&r->done) || r->kind != NEXAR__REQ_RECV || r->msg ||
      (!r->prev && !r->next && comm->posted != r))
    return false;
  nexar__p2p_posted_remove(comm, r);
  nexar__comm_set_error(comm,
                        "rank %d: recv from rank %d tag %d on comm %llu was "
                        "cancelled before a message matched it",
                        comm->rank, r->comm_peer, r->tag,
                        (unsigned long long)comm->id);
  nexar__req_complete(r, NEXAR_ERR_CANCELLED);
  return true;
}
