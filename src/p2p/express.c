/*
 * The express path of blocking small messages between ranks of one host
 * (nexar_send, nexar_recv; issue 13's 8-byte latency). The general path
 * allocates a request, queues it under a mutex, runs it from the queue,
 * and waits with whole passes: every transport read, every link's timers,
 * the ticks. Here, when the engine is free and nothing is queued (so every
 * operation posted before has started, and order is kept):
 *
 * - a send to a ready neighbour whose transport writes whole small
 *   messages at once (tp->send_now: shared memory) is given its sequence
 *   number and written by the calling thread, with no request at all; the
 *   transport refuses it (and the general path takes it) whenever the
 *   general path would have queued it: something of the lane waiting on
 *   the link, no stream to open, too long for one record or the window;
 * - a receive is a request in the caller's frame, started under the
 *   engine lock by the general matching (nexar__p2p_start: the unexpected
 *   list, then the posted list in order, truncation and status as
 *   always), and waited for by reading only the source's link
 *   (core/express.c), whose records go through the general receive
 *   (on_whole or the stream path), so a record for any other receive or
 *   none is handled as in a pass. The wait is bounded by the spin and
 *   ends at anything else that needs a pass; the general wait (the
 *   deadline, failures, expiry) then goes on with the same request.
 *
 * Both are entered in the flight recorder as the general path's are.
 *
 * Not taken (the general path runs the call): wildcard sources,
 * synchronous sends, probes, device memory, vectored calls, a revoked
 * communicator, a peer that is not a ready neighbour (failed, relayed, not yet
 * dialled), another thread in the engine or an operation queued, and a link
 * with writes due (the general post runs the output half for them).
 */
#include <string.h>

#include "core/flight.h"
#include "p2p/p2p.h"

/* The ready neighbour link to stable id |dest| (engine lock held), or
 * NULL. */
static nexar__link_t *neighbour(nexar_ctx_t *ctx, int dest) {
  if (dest < 0 || dest >= ctx->world || dest == ctx->rank || !ctx->peers ||
      ctx->dead[dest] || nexar__topo_next(ctx, dest) != dest)
    return NULL;
  nexar__link_t *c = ctx->peers[dest];
  return c && c->state == NEXAR__CS_READY && c->peer == dest ? c : NULL;
}

bool nexar__p2p_express_send(nexar_comm_t *comm, const void *buf,
                             uint64_t bytes, nexar_dtype_t dtype, int peer,
                             int tag) {
  nexar_ctx_t *ctx = comm->ctx;
  if (bytes > (uint64_t)ctx->prm.eager_bytes || !nexar__ep_try_own(&ctx->ep))
    return false;
  bool sent = false;
  int dest = comm->world_ranks[peer];
  nexar__link_t *c = neighbour(ctx, dest);
  nexar__seqs_t *sq = NULL;
  /* What the link owes the peer (stream credit) goes first, as a post's
   * output half would write it. */
  if (c && c->want_write) c->tp->flush(c);
  if (c && c->tp->send_now && !atomic_load(&comm->revoked) &&
      !nexar__link_output_due(c) &&
      c->eager_bytes + bytes <= NEXAR__EAGER_COPY_CAP &&
      (sq = nexar__peer_seqs(ctx, dest, comm->id))) {
    nexar__hdr_t h = {.kind = NEXAR__KIND_P2P,
                      .lane = NEXAR__LANE_DATA,
                      .dtype = (uint8_t)dtype,
                      .comm_id = comm->id,
                      .src_rank = (uint32_t)comm->rank,
                      .tag = (uint32_t)tag,
                      .seq = sq->next_tx[NEXAR__LANE_DATA],
                      .step = NEXAR__P2P_STANDARD,
                      .payload_len = bytes};
    sent = c->tp->send_now(c, NEXAR__LANE_DATA, &h, NULL, buf, bytes);
    if (sent) {
      sq->next_tx[NEXAR__LANE_DATA]++;
      nexar__flight_sent(ctx, comm, bytes, peer, tag);
      nexar__comm_count_tx(comm, bytes);
    }
  }
  nexar__ep_leave(&ctx->ep);
  return sent;
}

bool nexar__p2p_express_recv(nexar_comm_t *comm, void *buf, uint64_t cap,
                             int peer, int tag, nexar_status_t *status,
                             int *rc) {
  nexar_ctx_t *ctx = comm->ctx;
  if (peer == NEXAR_ANY_SOURCE || !nexar__ep_try_own(&ctx->ep)) return false;
  int src = comm->world_ranks[peer];
  nexar__link_t *c = neighbour(ctx, src);
  if (!c || !c->tp->poll_link || atomic_load(&comm->revoked)) {
    nexar__ep_leave(&ctx->ep);
    return false;
  }
  nexar__req_t r;
  memset(&r, 0, sizeof(r));
  r.kind = NEXAR__REQ_RECV;
  r.comm = comm;
  r.comm_peer = peer;
  r.peer = src;
  r.t_start = nexar__now();
  r.tag = tag;
  r.lane = NEXAR__LANE_DATA;
  r.buf = buf;
  r.cap = cap;
  r.st.source = peer;
  r.st.tag = tag;
  r.hdr.step = NEXAR__P2P_STANDARD;
  if (ctx->flight)
    nexar__flight_post(ctx, &r, "recv", NULL, UINT64_MAX, -1, cap, peer, tag);
  nexar__p2p_start(&r);
  uint64_t deadline = r.t_start + (uint64_t)ctx->prm.op_timeout_ms * 1000000ull;
  if (atomic_load_explicit(&r.done, memory_order_acquire))
    nexar__ep_leave(&ctx->ep);
  else
    nexar__ep_wait_link(&ctx->ep, &r, c, deadline);
  *rc = nexar__req_wait_local(&r, status);
  return true;
}
