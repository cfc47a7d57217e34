/*
 * Whole unexpected messages leave their streams on sparse topologies
 * (docs/topology.md section 10, rule 3): the per-origin bounds, in bytes
 * and then by count, the messages refused beyond them and looked at again
 * when room comes back, and unexpected messages above the eager size let
 * in whole. Runs on the progress thread only; match.c calls these.
 */
#include <stdlib.h>

#include "p2p/p2p.h"

/* |m| is no longer an unexpected message refused by nexar__p2p_detach. */
void nexar__p2p_unrefuse(nexar__imsg_t *m) {
  if (m->refused_of) (*m->refused_of)--;
  m->refused_of = NULL;
}

/* On a sparse topology, an unexpected message that has arrived whole (at
 * most the eager size, or relayed under end-to-end credit) gives its
 * stream's credit back at once and waits unattached, like a message to
 * self, so that a later operation's messages cannot hold the credit of a
 * link an earlier one needs (docs/topology.md section 10, cycle 1). Per
 * origin, those not let in whole by nexar__p2p_take_whole detach while their
 * bytes (payload and record) stay within NEXAR_RELAY_CREDIT_BYTES, then
 * NEXAR_MAX_STREAMS more by count: a count alone let a collective running
 * ahead of a late rank (a ring allgather sends its right neighbour n - 1
 * messages before it needs one back) hold the last link's data streams.
 * One refused keeps its stream, counted in topo.refused, until it is
 * matched or room comes back (nexar__p2p_redetach).
 * Only where the transport forgets a message at done_in
 * (NEXAR__TP_DONE_FORGETS). */
static bool detachable(nexar_ctx_t *ctx, const nexar__imsg_t *m) {
  const nexar__link_t *c = m->conn;
  return c && ctx->topo.detached && m->origin >= 0 && m->origin < ctx->topo.n &&
         (c->tp->caps & NEXAR__TP_DONE_FORGETS);
}

void nexar__p2p_detach(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  nexar__topo_t *t = &ctx->topo;
  if (!detachable(ctx, m) || m->state != NEXAR__IM_UNEXPECTED || !m->fin ||
      m->got != m->hdr.payload_len || m->hash)
    return;
  /* A collective's clear-to-send is empty, and its origin cannot finish
   * the call without this process, so it is not counted (at most one per
   * transfer of the calls that origin has started and this one not). */
  bool cts = m->hdr.kind == NEXAR__KIND_COLL && !m->hdr.payload_len &&
             (m->hdr.step & NEXAR__COLL_STEP_CTS);
  if (!m->whole && !cts) { /* else counted in bytes (nexar__p2p_take_whole) */
    uint64_t cost = m->hdr.payload_len + sizeof(*m);
    if (t->detached_bytes[m->origin] + cost <=
        (uint64_t)ctx->prm.relay_credit_bytes) {
      m->whole = cost;
      m->whole_of = &t->detached_bytes[m->origin];
      *m->whole_of += cost;
    } else if (t->detached[m->origin] < (uint32_t)ctx->prm.max_streams) {
      m->held = &t->detached[m->origin];
      (*m->held)++;
    } else {
      if (!m->refused_of) (*(m->refused_of = &t->refused[m->origin]))++;
      return;
    }
  }
  nexar__p2p_unrefuse(m);
  nexar__p2p_link_release(m);
  m->conn = NULL;
}

/* Room for |origin|'s unexpected messages came back (one detached or let
 * in whole was freed): its messages that nexar__p2p_detach or
 * nexar__p2p_take_whole refused, in arrival order per communicator, are let
 * in whole and detach now where they fit, as on arrival (docs/topology.md
 * section 10, rule 3). The walk ends when it has seen as many as are
 * refused. */
void nexar__p2p_redetach(nexar_ctx_t *ctx, int origin) {
  uint32_t left = ctx->topo.refused[origin];
  for (int i = -1; i < ctx->ncomms && left; i++) {
    nexar_comm_t *comm = i < 0 ? ctx->world_comm : ctx->comms[i];
    if (!comm || (i >= 0 && comm == ctx->world_comm)) continue;
    for (nexar__imsg_t *m = comm->unexp; m && left; m = m->next) {
      if (!m->refused_of || m->origin != origin) continue;
      left--;
      nexar__p2p_take_whole(ctx, m);
      nexar__p2p_detach(ctx, m);
    }
  }
}

/* On a sparse topology, an unexpected message above the eager size (a
 * later operation's, say) would hold its stream, and so a share of the
 * link's credit that relayed frames of earlier operations need, until a
 * receive matches it (docs/topology.md section 10, cycle 1): while the
 * origin's unexpected bytes taken this way stay within
 * NEXAR_RELAY_CREDIT_BYTES, its window opens to the whole message, which
 * then detaches from its stream like a small one (nexar__p2p_detach). One
 * that does not fit is counted as refused, as nexar__p2p_detach counts
 * its own, and let in when room comes back (nexar__p2p_redetach). */
void nexar__p2p_take_whole(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  uint64_t len = m->hdr.payload_len;
  if (len <= (uint64_t)ctx->prm.eager_bytes || m->whole_of ||
      !detachable(ctx, m))
    return;
  if (ctx->topo.whole[m->origin] + len >
      (uint64_t)ctx->prm.relay_credit_bytes) {
    if (!m->refused_of) (*(m->refused_of = &ctx->topo.refused[m->origin]))++;
    return;
  }
  if (m->buf && !m->credited) { /* a prefix that waited (reorder) */
    uint8_t *b = realloc(m->buf, len);
    if (!b) return;
    m->buf = b;
  }
  nexar__p2p_unrefuse(m);
  m->whole = len;
  m->whole_of = &ctx->topo.whole[m->origin];
  *m->whole_of += len;
  nexar__p2p_open_window(ctx, m);
}
