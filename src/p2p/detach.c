/*
 * Whole unexpected messages leave their streams on sparse topologies
 * (docs/topology.md section 10, rule 3): the per-origin bounds, in bytes
 * and then by count, then the process-wide bound beyond them
 * (NEXAR_UNEXPECTED_BYTES), the messages refused past it (the operations
 * waiting end with NEXAR_ERR_NOMEM) and looked at again when room comes
 * back, and unexpected messages above the eager size let in whole. Runs
 * on the progress thread only; match.c calls these.
 */
#include <stdio.h>
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
 * Beyond both, within NEXAR_UNEXPECTED_BYTES for all origins together.
 * One refused keeps its stream, counted in topo.refused, until it is
 * matched or room comes back (nexar__p2p_redetach).
 * Only where the transport forgets a message at done_in
 * (NEXAR__TP_DONE_FORGETS). */
static bool detachable(nexar_ctx_t *ctx, const nexar__imsg_t *m) {
  const nexar__link_t *c = m->conn;
  return c && ctx->topo.detached && m->origin >= 0 && m->origin < ctx->topo.n &&
         (c->tp->caps & NEXAR__TP_DONE_FORGETS);
}

/* |m| takes |cost| bytes of counter |of| until it is freed. */
static void charge(nexar__imsg_t *m, uint64_t *of, uint64_t cost) {
  m->whole = cost;
  m->whole_of = of;
  *of += cost;
}

/* The counter that |cost| more bytes of unexpected message fit in: the
 * origin's own |mine| within NEXAR_RELAY_CREDIT_BYTES, else the
 * process-wide one beyond the per-origin bounds within
 * NEXAR_UNEXPECTED_BYTES; NULL when neither has room. */
static uint64_t *room(nexar_ctx_t *ctx, uint64_t *mine, uint64_t cost) {
  if (*mine + cost <= (uint64_t)ctx->prm.relay_credit_bytes) return mine;
  uint64_t *all = &ctx->topo.beyond_bytes;
  return *all + cost <= (uint64_t)ctx->prm.unexpected_bytes ? all : NULL;
}

/* Past NEXAR_UNEXPECTED_BYTES: |m| (|cost| bytes) keeps its stream, and
 * it may hold the credit that what this process waits for needs, so the
 * operations waiting here (posted receives and probes, collectives, on
 * every communicator) end with NEXAR_ERR_NOMEM and an error naming the
 * setting, instead of waiting for their op deadline or forever (MPI's
 * progress rule; Cray MPICH fails likewise past MPICH_UNEX_BUFFER_SIZE).
 * Runs once per message refused (an error event: it walks the
 * communicators). */
static void overflow(nexar_ctx_t *ctx, const nexar__imsg_t *m, uint64_t cost) {
  char why[NEXAR__ERRMSG_MAX];
  snprintf(why, sizeof(why),
           "rank %d: unexpected messages beyond the per-origin bounds hold "
           "%llu bytes, NEXAR_UNEXPECTED_BYTES=%lld: a message of %llu bytes "
           "from process %d (communicator %llu, tag %u, sequence %llu) keeps "
           "its stream, so the operations waiting end with NEXAR_ERR_NOMEM "
           "(raise NEXAR_UNEXPECTED_BYTES, or post receives earlier)",
           ctx->rank, (unsigned long long)ctx->topo.beyond_bytes,
           (long long)ctx->prm.unexpected_bytes, (unsigned long long)cost,
           m->origin, (unsigned long long)m->hdr.comm_id, m->hdr.tag,
           (unsigned long long)m->hdr.seq);
  NEXAR__WARN(NEXAR__SUB_P2P, "%s", why);
  NEXAR__FOR_EACH_COMM(ctx, comm, {
    nexar__comm_set_error(comm, "%s", why);
    ctx->hooks->coll_fail_comm(comm, NEXAR_ERR_NOMEM);
    while (comm->posted) nexar__p2p_cancel(comm->posted, NEXAR_ERR_NOMEM);
  });
}

/* |m| fits no bound: it keeps its stream, counted as refused for its
 * origin until it detaches, is matched or is freed. */
static void refuse(nexar_ctx_t *ctx, nexar__imsg_t *m, uint64_t cost) {
  if (m->refused_of) return; /* looked at again (nexar__p2p_redetach) */
  (*(m->refused_of = &ctx->topo.refused[m->origin]))++;
  overflow(ctx, m, cost);
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
    uint64_t *mine = &t->detached_bytes[m->origin];
    bool by_count = *mine + cost > (uint64_t)ctx->prm.relay_credit_bytes &&
                    t->detached[m->origin] < (uint32_t)ctx->prm.max_streams;
    uint64_t *of = by_count ? NULL : room(ctx, mine, cost);
    if (by_count) {
      m->held = &t->detached[m->origin];
      (*m->held)++;
    } else if (of) {
      charge(m, of, cost);
    } else {
      refuse(ctx, m, cost);
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
  NEXAR__FOR_EACH_COMM(ctx, comm, {
    if (!left) break;
    for (nexar__imsg_t *m = comm->unexp; m && left; m = m->next) {
      if (!m->refused_of || m->origin != origin) continue;
      left--;
      nexar__p2p_take_whole(ctx, m);
      nexar__p2p_detach(ctx, m);
    }
  });
}

/* On a sparse topology, an unexpected message above the eager size (a
 * later operation's, say) would hold its stream, and so a share of the
 * link's credit that relayed frames of earlier operations need, until a
 * receive matches it (docs/topology.md section 10, cycle 1): while the
 * origin's unexpected bytes taken this way stay within
 * NEXAR_RELAY_CREDIT_BYTES, or beyond that the process's within
 * NEXAR_UNEXPECTED_BYTES, its window opens to the whole message, which
 * then detaches from its stream like a small one (nexar__p2p_detach). One
 * that does not fit is refused, as nexar__p2p_detach refuses its own, and
 * let in when room comes back (nexar__p2p_redetach). */
void nexar__p2p_take_whole(nexar_ctx_t *ctx, nexar__imsg_t *m) {
  uint64_t len = m->hdr.payload_len;
  if (len <= (uint64_t)ctx->prm.eager_bytes || m->whole_of ||
      !detachable(ctx, m))
    return;
  uint64_t *of = room(ctx, &ctx->topo.whole[m->origin], len);
  if (!of) {
    refuse(ctx, m, len);
    return;
  }
  if (m->buf && !m->credited) { /* a prefix that waited (reorder) */
    uint8_t *b = realloc(m->buf, len);
    if (!b) return;
    m->buf = b;
    m->buf_pooled = false; /* whole now: not the pool's size */
  }
  nexar__p2p_unrefuse(m);
  charge(m, of, len);
  nexar__p2p_open_window(ctx, m);
}
