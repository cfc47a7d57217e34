/*
 * Membership of a communicator over time: revocation (every operation on
 * the communicator fails until it is rebuilt) and rebuild in place (new
 * members, new wire id, next epoch). Both run in the engine (emu held).
 *
 * Each epoch of a communicator has its own wire id, taken from the same
 * never-reused space as split ids, so a message of an older epoch carries a
 * retired id and is discarded on arrival (p2p/match.c), never delivered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"

void nexar__comm_revoke(nexar_comm_t *comm, int code, const char *why) {
  if (atomic_load(&comm->revoked)) return;
  nexar_ctx_t *ctx = comm->ctx;
  snprintf(comm->revoke_msg, sizeof(comm->revoke_msg), "%s", why);
  atomic_store(&comm->revoked, code);
  nexar__comm_set_error(comm, "%s", why);
  NEXAR__INFO(NEXAR__SUB_INIT, "rank %d: communicator %llu epoch %u: %s",
              ctx->rank, (unsigned long long)comm->id, comm->epoch, why);
  /* Collectives first: each is failed (its steps end below with the rest,
   * and it finishes once none is in flight). */
  ctx->hooks->coll_fail_comm(comm, code);
  nexar__p2p_fail_comm(ctx, comm, code);
}

int nexar__comm_rebuild(nexar_ctx_t *ctx, nexar_comm_t *comm, const int *ids,
                        int n, uint64_t new_id) {
  int me = -1;
  for (int i = 0; i < n; i++)
    if (ids[i] == ctx->rank) me = i;
  if (me < 0) return NEXAR_ERR_EXCLUDED;
  int *wr = malloc((size_t)n * sizeof(int));
  if (!wr) return NEXAR_ERR_NOMEM;
  memcpy(wr, ids, (size_t)n * sizeof(int));
  bool world = comm == ctx->world_comm;
  /* Whatever is left of the old epoch fails or is dropped. */
  if (!atomic_load(&comm->revoked))
    nexar__comm_revoke(comm, NEXAR_ERR_REVOKED,
                       "communicator rebuilt; receive buffers are "
                       "unspecified");
  nexar__comm_unregister(ctx, comm);
  free(comm->world_ranks);
  comm->world_ranks = wr;
  comm->id = new_id;
  comm->size = n;
  comm->rank = me;
  comm->epoch++;
  comm->coll_seq = 0;
  memset(comm->fp_seq, 0, sizeof(comm->fp_seq));
  comm->coll_poison = 0;
  comm->poison_seq = 0;
  comm->revoke_msg[0] = 0;
  atomic_store(&comm->revoked, 0);
  if (world) {
    if (new_id + 1 > ctx->comm_hwm) ctx->comm_hwm = new_id + 1;
    return 0;
  }
  return nexar__comm_register(ctx, comm);
}

bool nexar__peer_release(nexar__link_t *c) {
  nexar_ctx_t *ctx = c->ep->owner;
  int id = c->peer;
  if (!ctx->dead || id < 0 || id >= ctx->world || !ctx->dead[id]) return false;
  /* A message that arrived whole before the peer went stays receivable
   * (its bytes live in the connection's stream state) until received or
   * its communicator is freed. */
  for (const nexar__imsg_t *m = c->imsgs; m; m = m->anext)
    if (m->state == NEXAR__IM_UNEXPECTED && m->fin) return false;
  if (ctx->peers[id] == c) ctx->peers[id] = NULL;
  nexar__peer_t *p = &ctx->ps[id];
  free(p->seqs);
  p->seqs = NULL;
  p->nseqs = p->cap_seqs = 0;
  NEXAR__INFO(NEXAR__SUB_NET, "id %d: released the connection of id %d (%s)",
              ctx->rank, id, ctx->dead[id] == 1 ? "failed" : "departed");
  return true;
}

void nexar__comm_revoke_departed(nexar_ctx_t *ctx, const int *ids, int n,
                                 uint32_t epoch) {
  char why[NEXAR__ERRMSG_MAX];
  for (int i = 0; i < ctx->ncomms; i++) {
    nexar_comm_t *cm = ctx->comms[i];
    for (int k = 0; k < n; k++) {
      int pr = nexar__comm_rank_of(cm, ids[k]);
      if (pr < 0) continue;
      snprintf(why, sizeof(why),
               "rank %d of communicator %llu (epoch %u): process %d (its rank "
               "%d here) left the job at the elastic checkpoint that made "
               "world epoch %u; the communicator is revoked (free it)",
               cm->rank, (unsigned long long)cm->id, cm->epoch, ids[k], pr,
               epoch);
      nexar__comm_revoke(cm, NEXAR_ERR_REVOKED, why);
      break;
    }
  }
}
