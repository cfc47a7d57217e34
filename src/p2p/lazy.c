/*
 * The lazy mesh (NEXAR_MESH_LAZY_MIN, docs/topology.md section 2): a full
 * topology whose formation makes only the hypercube's links; any other
 * link is dialled when the first frame needs it. Engine only.
 *
 * - A frame for a rank without a link dials it (nexar__lazy_dial) and
 *   waits in the new link's queue, in order, until the handshake ends; the
 *   link's deadline is the bootstrap's (QUIC) or the rendezvous's (shared
 *   memory), so a dial that fails ends those frames with an error.
 * - Either side may dial first, so both may dial at once. The lower rank's
 *   connection wins, the same on both sides: the lower rank keeps its own
 *   dial and only reads what the higher rank's carries; the higher rank
 *   takes the lower rank's connection as its link and moves what its own
 *   has not started onto it; what it did start goes on (frames are ordered
 *   by sequence number per origin, not per link, so the two links deliver
 *   in order). The losing link stays open until finalize: closing it
 *   earlier would drop a message that arrived whole on it but waits there,
 *   unmatched. A retired link is in no peer table: its end is no one's
 *   failure.
 */
#include <stdio.h>
#include <string.h>

#include "p2p/p2p.h"

int nexar__dial_peer(nexar_ctx_t *ctx, int id) {
  struct sockaddr_storage ss;
  socklen_t sl;
  if (nexar__wire_to_addr(&ctx->roster[id].addr, &ss, &sl) < 0)
    return NEXAR_ERR_PROTO;
  nexar__link_t *c;
  nexar__dial_t d = {&ss,
                     sl,
                     NEXAR__ROLE_MESH,
                     id,
                     ctx->roster[id].fingerprint,
                     &ctx->roster[id].host};
  NEXAR__CHECK(nexar__link_dial(&ctx->ep, &d, &c));
  ctx->peers[id] = c;
  return 0;
}

nexar__link_t *nexar__lazy_dial(nexar_ctx_t *ctx, int id, const char **why) {
  static _Thread_local char err[160];
  if (!ctx->topo.lazy || !ctx->roster || !ctx->ep.accept_mesh ||
      ctx->finalizing) {
    *why = "peer not connected";
    return NULL;
  }
  int rc = nexar__dial_peer(ctx, id);
  if (rc < 0) {
    char a[64] = "?";
    struct sockaddr_storage ss;
    socklen_t sl;
    if (nexar__wire_to_addr(&ctx->roster[id].addr, &ss, &sl) == 0)
      nexar__addr_str((struct sockaddr *)&ss, a, sizeof(a));
    snprintf(err, sizeof(err), "no link to it and dialling it at %s failed: %s",
             a, nexar_strerror(rc));
    *why = err;
    return NULL;
  }
  ctx->topo.st.dialled++;
  NEXAR__INFO(NEXAR__SUB_NET, "rank %d: dialling rank %d at %s on demand",
              ctx->rank, id, ctx->peers[id]->remote_str);
  return ctx->peers[id];
}

/* Moves the frames of |from| that no transport has touched onto |to|, in
 * queue order, with their eager copies' share of the accounting. */
static void move_unstarted(nexar__link_t *from, nexar__link_t *to) {
  for (int lane = 0; lane < NEXAR__LANE_COUNT; lane++) {
    nexar__omsg_t *keep = NULL, *kt = NULL, *m = from->outq[lane];
    while (m) {
      nexar__omsg_t *next = m->next;
      if (m->sid < 0 && m->sent == 0 && !m->fwd && !m->ending && !m->stop) {
        if (m->owned && from->eager_bytes >= m->len) {
          from->eager_bytes -= m->len;
          to->eager_bytes += m->len;
        }
        nexar__link_send(to, m);
      } else {
        m->next = NULL;
        if (kt)
          kt->next = m;
        else
          keep = m;
        kt = m;
      }
      m = next;
    }
    from->outq[lane] = keep;
    from->outq_tail[lane] = kt;
  }
}

static void retire(nexar_ctx_t *ctx, nexar__link_t *c) {
  c->retired = true;
  ctx->topo.lazy_retired++;
}

bool nexar__lazy_cross(nexar_ctx_t *ctx, nexar__link_t *c) {
  int r = c->peer;
  nexar__link_t *own = ctx->peers[r];
  if (!ctx->topo.lazy || !own || own == c || own->is_server) return false;
  if (r > ctx->rank) {
    /* Ours wins: |c| only carries what rank r started on it. */
    retire(ctx, c);
    return true;
  }
  NEXAR__INFO(NEXAR__SUB_NET,
              "rank %d: rank %d dialled this process while it dialled rank "
              "%d: the lower rank's connection is kept",
              ctx->rank, r, r);
  ctx->topo.st.crossed++;
  ctx->peers[r] = c;
  move_unstarted(own, c);
  retire(ctx, own);
  return true;
}

/* Calls |fn| on every retired link still open; stops at the first that
 * returns false, and returns whether none did. */
static bool each_retired(nexar_ctx_t *ctx, bool (*fn)(nexar__link_t *c)) {
  for (int i = 0; ctx->topo.lazy_retired && i < ctx->ep.nconns; i++) {
    nexar__link_t *c = ctx->ep.conns[i];
    if (c->retired && c->state != NEXAR__CS_DEAD && !fn(c)) return false;
  }
  return true;
}

static bool settled(nexar__link_t *c) {
  return c->state != NEXAR__CS_READY || c->port_closed || nexar__link_idle(c);
}

static bool close_one(nexar__link_t *c) {
  nexar__link_close(c, NEXAR__CLOSE_OK, "finalized (a crossing dial's link)");
  return true;
}

bool nexar__lazy_idle(nexar_ctx_t *ctx) {
  return each_retired(ctx, settled);
}

void nexar__lazy_close(nexar_ctx_t *ctx) {
  each_retired(ctx, close_one);
}

void nexar__lazy_gone(nexar_ctx_t *ctx, nexar__link_t *c) {
  if (c->retired && ctx->topo.lazy_retired) ctx->topo.lazy_retired--;
}
