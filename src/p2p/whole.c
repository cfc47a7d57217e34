/*
 * The receive side's fast path for small messages (nexar__ep_ops_t's
 * on_whole): a message that arrives whole in one piece (on shared memory,
 * a record that opens and ends its stream) and whose receive is already
 * posted is matched and copied straight into that receive, with no
 * incoming-message object, no stream state and no copy of its own.
 *
 * It is taken only where the general path (match.c: header_done,
 * nexar__p2p_admit, on_header, bind_msg, deliver) would do the same thing
 * at once, and it does it in the same order: the header is the one the
 * general path decodes (same bounds), the source is the authenticated
 * peer, the sequence number is the next one of its (origin, communicator,
 * lane) and no header of that origin waits for order, and the receive is
 * the first posted one that matches it. Every earlier message of the same
 * origin and lane has had its header matched by then (sequence order), so
 * it is in the unexpected list or bound to an earlier receive, and a
 * posted receive has searched that list when it was posted: matching this
 * message to the first posted receive keeps MPI's order, with ANY_SOURCE
 * and ANY_TAG too. Anything else (no posted receive, a probe first in
 * line, a synchronous send, control and RPC messages, a collective that
 * does not match its call, relayed frames) goes the general way.
 */
#include <string.h>

#include "p2p/p2p.h"

/* The first posted receive of |comm| that matches |h|, or NULL. */
static nexar__req_t *first_match(nexar_comm_t *comm, const nexar__hdr_t *h) {
  for (nexar__req_t *r = comm->posted; r; r = r->next)
    if (nexar__p2p_hdr_matches(r, h)) return r;
  return NULL;
}

/* Whether |r| takes the whole payload of |h| the way bind_msg would, with
 * nothing left over (a folding receive folds whole elements only). */
static bool takes(nexar_ctx_t *ctx, const nexar__req_t *r,
                  const nexar__hdr_t *h) {
  if (r->probe) return false;
  if (r->is_coll &&
      (h->payload_len != r->cap || !ctx->hooks->coll_same_call(h, &r->hdr)))
    return false; /* a mismatch: the general path reports it */
  return !r->fold || (r->fold_es && h->payload_len % r->fold_es == 0);
}

/* The payload into |r| (clipped to its capacity: a longer message is a
 * truncation, which nexar__p2p_recv_end reports). */
static void put_payload(nexar__req_t *r, const uint8_t *d, uint64_t len) {
  size_t k = (size_t)(len < r->cap ? len : r->cap);
  if (!k) return;
  if (r->nsegs)
    nexar__seg_copy(r->segs, r->nsegs, 0, (uint8_t *)(uintptr_t)d, k, false);
  else if (r->fold)
    r->fold(r, r->buf, d, k);
  else
    memcpy(r->buf, d, k);
}

bool nexar__p2p_on_whole(nexar__link_t *c, const uint8_t *d, size_t n) {
  nexar_ctx_t *ctx = c->ep->owner;
  if (n < NEXAR__HDR_BYTES || c->peer < 0 || c->peer >= ctx->world)
    return false;
  /* The header is read once out of memory the peer may still write. */
  uint8_t raw[NEXAR__HDR_BYTES];
  memcpy(raw, d, NEXAR__HDR_BYTES);
  nexar__hdr_t h;
  if (nexar__hdr_decode(&h, raw, NEXAR__HDR_BYTES,
                        (uint64_t)ctx->prm.max_message_mb << 20, NULL) < 0 ||
      h.payload_len != n - NEXAR__HDR_BYTES)
    return false;
  return nexar__p2p_on_whole_hdr(c, &h, d + NEXAR__HDR_BYTES);
}

bool nexar__p2p_on_whole_hdr(nexar__link_t *c, const nexar__hdr_t *h,
                             const uint8_t *payload) {
  nexar_ctx_t *ctx = c->ep->owner;
  if (c->peer < 0 || c->peer >= ctx->world) return false;
  bool p2p = h->kind == NEXAR__KIND_P2P &&
             (h->step == NEXAR__P2P_STANDARD || h->step == NEXAR__P2P_GROUP);
  if (!p2p && h->kind != NEXAR__KIND_COLL) return false;
  nexar_comm_t *comm = nexar__find_comm(ctx, h->comm_id);
  if (!comm || (int64_t)h->src_rank >= comm->size ||
      comm->world_ranks[h->src_rank] != c->peer)
    return false;
  nexar__seqs_t *sq = nexar__peer_seqs(ctx, c->peer, h->comm_id);
  if (!sq || h->seq != sq->next_rx[h->lane] || ctx->ps[c->peer].reorder)
    return false;
  nexar__req_t *r = first_match(comm, h);
  if (!r || !takes(ctx, r, h)) return false;
  sq->next_rx[h->lane]++;
  nexar__p2p_posted_remove(comm, r);
  put_payload(r, payload, h->payload_len);
  nexar__p2p_recv_end(r, h);
  return true;
}
