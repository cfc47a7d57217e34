/*
 * Agreement on the failed members of a communicator, then its rebuild
 * (docs/fault-tolerance.md).
 *
 * Flooding consensus with a perfect failure detector (Guerraoui &
 * Rodrigues, "Introduction to Reliable and Secure Distributed Programming",
 * 2nd ed. 2011, algorithm 5.1). Each live member proposes the set of members
 * it knows failed and the next communicator id it could use; in every round
 * it sends the union of what it received in the previous one to all members
 * it does not know failed. A round is complete when every member not known
 * failed has been heard from in it; a member decides when a round is heard
 * from exactly the members the round before was (nobody failed meanwhile)
 * and then sends DECIDE, which every receiver adopts and forwards, so a
 * decision reaches everybody even when its sender dies half-way. The
 * decided value (failed set, largest proposed id) is a deterministic
 * function of what the deciding round collected.
 *
 * The heartbeat detector is not perfect (a stopped process looks dead), so
 * suspicion is made final: a process that any member declares failed is
 * fenced (failure.c) and its messages are ignored, and a member that learns
 * that it is in a proposed failed set stops with NEXAR_ERR_EXCLUDED.
 * Failures during the agreement only add rounds (at most one per failure).
 *
 * There is one agreement per communicator id (the instance key both sides
 * derive alike), kept until the id is retired (an in-place rebuild) or the
 * communicator is freed. A call that ended without a new communicator (no
 * majority, a timeout) leaves it, and the next call joins it again rather
 * than start another under the same id that a peer may still hold as the
 * first; a decided one answers at once from its decision (without a
 * majority: the same error every time; nexar_comm_shrink builds the
 * survivors' communicator from the same decision). A member that has
 * decided answers a late proposal with DECIDE, so nobody waits on it.
 *
 * After the decision each survivor builds the new communicator (ranks in
 * the old order, the agreed id, epoch + 1), registers it, and sends READY;
 * the call returns once every survivor is ready, so no message on the new
 * id can reach a process that does not know it.
 *
 * Messages: kind AGREE on the control lane, comm_id = old id |
 * NEXAR__AGREE_BIT, src_rank = stable id, step = phase, coll_seq = round,
 * payload = u64 id, u32 count, count x u32 stable ids.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"

typedef struct nexar__agree {
  struct nexar__agree *next;
  nexar_ctx_t *ctx;
  uint64_t wid;       /* old comm id | NEXAR__AGREE_BIT */
  nexar_comm_t *comm; /* the communicator being recovered */
  int n;              /* members of the old epoch */
  int *ids;           /* their stable ids */
  int me;             /* this process's index in ids */
  int maxr;           /* rounds are 1 .. maxr - 1 */
  bool started;       /* the local user asked for the recovery */
  bool in_place;      /* rebuild comm (automatic) or build newc (shrink) */
  int round;
  uint8_t *from;  /* [maxr][n]: heard from in round r */
  uint8_t *set;   /* [maxr][n]: failed, union of round r's proposals */
  uint64_t *nid;  /* [maxr]: largest id proposed in round r */
  uint64_t my_id; /* the id this process proposes */
  bool decided;
  uint8_t *dset;  /* [n] decided failed set */
  uint64_t did;   /* decided id */
  uint8_t *ready; /* [n] */
  nexar_comm_t *newc;
  /* The calls on it, one at a time; it is kept between them (see the top
   * of this file). */
  bool applied; /* the current call built the new communicator, said READY */
  bool shrunk;  /* a nexar_comm_shrink on it returned a communicator */
  bool done;    /* the current call's result is in rc and err */
  int rc;
  char err[NEXAR__ERRMSG_MAX];
  nexar__req_t *waiter; /* the current call's wait, completed when done */
  bool busy, again;     /* re-entrancy guard of evaluate */
  /* Every message this process sent for the agreement (u8 phase, u32
   * round, u32 length, payload), re-sent to the members behind relays when
   * a route changes, since a relay may fail with one in transit (see
   * nexar__agree_resend). */
  uint8_t *log;
  size_t log_len, log_cap;
} nexar__agree_t;

static void evaluate(nexar__agree_t *ag);

static nexar__agree_t *find(nexar_ctx_t *ctx, uint64_t wid) {
  for (nexar__agree_t *a = ctx->ags; a; a = a->next)
    if (a->wid == wid) return a;
  return NULL;
}

static int idx_of(const nexar__agree_t *ag, int id) {
  for (int k = 0; k < ag->n; k++)
    if (ag->ids[k] == id) return k;
  return -1;
}

static void ag_free(nexar__agree_t *ag) {
  if (!ag) return;
  free(ag->ids);
  free(ag->from);
  free(ag->set);
  free(ag->nid);
  free(ag->dset);
  free(ag->ready);
  free(ag->log);
  free(ag);
}

/* Creates the agreement that retires |comm|'s current id. */
static nexar__agree_t *create(nexar_ctx_t *ctx, nexar_comm_t *comm) {
  nexar__agree_t *ag = calloc(1, sizeof(*ag));
  if (!ag) return NULL;
  int n = comm->size;
  ag->ctx = ctx;
  ag->wid = comm->id | NEXAR__AGREE_BIT;
  ag->comm = comm;
  ag->n = n;
  ag->me = comm->rank;
  ag->maxr = n + 2;
  ag->ids = malloc((size_t)n * sizeof(int));
  ag->from = calloc((size_t)ag->maxr * (size_t)n, 1);
  ag->set = calloc((size_t)ag->maxr * (size_t)n, 1);
  ag->nid = calloc((size_t)ag->maxr, sizeof(uint64_t));
  ag->dset = calloc((size_t)n, 1);
  ag->ready = calloc((size_t)n, 1);
  if (!ag->ids || !ag->from || !ag->set || !ag->nid || !ag->dset ||
      !ag->ready) {
    ag_free(ag);
    return NULL;
  }
  memcpy(ag->ids, comm->world_ranks, (size_t)n * sizeof(int));
  ag->next = ctx->ags;
  ctx->ags = ag;
  comm->ag = ag;
  return ag;
}

/* Unlinks and frees |ag|, forgetting its sequence state on every link. */
static void destroy(nexar_ctx_t *ctx, nexar__agree_t *ag) {
  for (nexar__agree_t **p = &ctx->ags; *p; p = &(*p)->next) {
    if (*p != ag) continue;
    *p = ag->next;
    break;
  }
  for (int k = 0; ctx->ps && k < ag->n; k++)
    if (ag->ids[k] != ctx->rank)
      nexar__peer_forget_seqs(ctx, ag->ids[k], ag->wid);
  if (ag->comm && ag->comm->ag == ag) ag->comm->ag = NULL;
  ag_free(ag);
}

static void finish(nexar__agree_t *ag, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finish(nexar__agree_t *ag, int rc, const char *fmt, ...) {
  if (ag->done) return;
  ag->done = true;
  ag->rc = rc;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ag->err, sizeof(ag->err), fmt, ap);
    va_end(ap);
  }
  if (ag->waiter) nexar__req_complete(ag->waiter, rc);
}

static bool member_dead(const nexar__agree_t *ag, int k) {
  return ag->ctx->dead[ag->ids[k]] == 1;
}

/* Records a message sent (see nexar__agree_t.log); on a sparse topology
 * only. Out of memory, the message is just not re-sent. */
static void log_sent(nexar__agree_t *ag, int phase, int round,
                     const uint8_t *pl, size_t len) {
  if (ag->ctx->topo.kind == NEXAR__TOPO_FULL) return;
  size_t need = ag->log_len + 9 + len;
  if (need > ag->log_cap) {
    size_t cap = ag->log_cap ? 2 * ag->log_cap : 256;
    while (cap < need) cap *= 2;
    uint8_t *l = realloc(ag->log, cap);
    if (!l) return;
    ag->log = l;
    ag->log_cap = cap;
  }
  uint8_t *p = ag->log + ag->log_len;
  p[0] = (uint8_t)phase;
  nexar__put_u32(p + 1, (uint32_t)round);
  nexar__put_u32(p + 5, (uint32_t)len);
  memcpy(p + 9, pl, len);
  ag->log_len = need;
}

/* Sends phase |phase| of round |round| with |set| and |id| to member |to|,
 * or (|to| -1) to every member not known failed. */
static void send_to(nexar__agree_t *ag, int phase, int round,
                    const uint8_t *set, uint64_t id, int to) {
  nexar_ctx_t *ctx = ag->ctx;
  int cnt = 0;
  for (int k = 0; k < ag->n; k++) cnt += set && set[k];
  size_t len = 12 + 4 * (size_t)cnt;
  uint8_t *pl = malloc(len);
  if (!pl) return; /* the peers' deadline ends their wait */
  nexar__put_u64(pl, id);
  nexar__put_u32(pl + 8, (uint32_t)cnt);
  for (int k = 0, o = 12; k < ag->n; k++) {
    if (!set || !set[k]) continue;
    nexar__put_u32(pl + o, (uint32_t)ag->ids[k]);
    o += 4;
  }
  nexar__hdr_t h = {.kind = NEXAR__KIND_AGREE,
                    .comm_id = ag->wid,
                    .src_rank = (uint32_t)ctx->rank,
                    .step = (uint32_t)phase,
                    .coll_seq = (uint64_t)round};
  for (int k = 0; k < ag->n; k++)
    if (k != ag->me && !member_dead(ag, k) && (to < 0 || k == to))
      nexar__ctl_send(ctx, ag->ids[k], &h, pl, len);
  if (to < 0) log_sent(ag, phase, round, pl, len);
  free(pl);
}

static void send_all(nexar__agree_t *ag, int phase, int round,
                     const uint8_t *set, uint64_t id) {
  send_to(ag, phase, round, set, id, -1);
}

/* This process's proposal for |round|: the previous round's union (or, in
 * round 1, what it knows) plus every member it now knows failed. */
static void propose(nexar__agree_t *ag, int round) {
  uint8_t *mine = ag->set + (size_t)round * (size_t)ag->n;
  const uint8_t *prev = ag->set + (size_t)(round - 1) * (size_t)ag->n;
  for (int k = 0; k < ag->n; k++)
    mine[k] |= (round > 1 && prev[k]) || member_dead(ag, k);
  uint64_t id = round > 1 ? ag->nid[round - 1] : 0;
  if (ag->my_id > id) id = ag->my_id;
  if (id > ag->nid[round]) ag->nid[round] = id;
  ag->from[(size_t)round * (size_t)ag->n + (size_t)ag->me] = 1;
  ag->round = round;
  send_all(ag, NEXAR__AG_PROPOSE, round, mine, ag->nid[round]);
}

/* Builds the new communicator from the decision and says READY. A
 * function of the decision alone: a later call on the same agreement gets
 * the same outcome (and, when it fails, the same error) without a round
 * trip. */
static void apply_decision(nexar__agree_t *ag) {
  nexar_ctx_t *ctx = ag->ctx;
  if (ag->dset[ag->me]) {
    nexar__declare_failed(ctx, ctx->rank, NEXAR_FAIL_REPORTED, -1,
                          "the agreement decided it failed");
    finish(ag, NEXAR_ERR_EXCLUDED,
           "rank %d: the other members of communicator %llu agreed that "
           "this process failed; it is fenced out",
           ag->me, (unsigned long long)(ag->wid & ~NEXAR__AGREE_BIT));
    return;
  }
  for (int k = 0; k < ag->n; k++)
    if (ag->dset[k] && !ctx->dead[ag->ids[k]])
      nexar__declare_failed(ctx, ag->ids[k], NEXAR_FAIL_REPORTED, ctx->rank,
                            "the survivors agreed it failed");
  int *surv = malloc((size_t)ag->n * sizeof(int));
  if (!surv) {
    finish(ag, NEXAR_ERR_NOMEM, "out of memory");
    return;
  }
  int ns = 0;
  for (int k = 0; k < ag->n; k++)
    if (!ag->dset[k]) surv[ns++] = ag->ids[k];
  nexar_comm_t *comm = ag->comm;
  /* The id is spent everywhere (proposals start above it from now on),
   * also when nothing is built now: a shrink after "no majority" builds
   * its communicator under this id later, so nothing else may take it. */
  uint64_t cur = atomic_load(&ctx->next_free_id);
  while (cur < ag->did + 1 &&
         !atomic_compare_exchange_weak(&ctx->next_free_id, &cur, ag->did + 1))
    ;
  if (ag->in_place && 2 * ns <= ag->n) {
    /* Automatic recovery continues only on a majority of the old epoch,
     * so the two sides of a partition can never both go on. The text is
     * the same on every survivor (no local rank in it) and becomes the
     * communicator's: every later call on it fails with it at once
     * (start_fn). */
    char who[160];
    size_t o = 0;
    int k = 0;
    for (; k < ns && o < sizeof(who) - 16; k++)
      o += (size_t)snprintf(who + o, sizeof(who) - o, "%s%d", k ? ", " : "",
                            surv[k]);
    if (k < ns) snprintf(who + o, sizeof(who) - o, ", ...");
    free(surv);
    finish(ag, NEXAR_ERR_PEER_FAILED,
           "only %d of %d ranks of communicator %llu (epoch %u) survive "
           "(processes %s), no majority: NEXAR_RECOVERY=automatic stops "
           "here and every call on it fails with this error; "
           "nexar_comm_shrink builds a communicator of the survivors",
           ns, ag->n, (unsigned long long)(ag->wid & ~NEXAR__AGREE_BIT),
           comm->epoch, who);
    snprintf(comm->revoke_msg, sizeof(comm->revoke_msg), "%s", ag->err);
    return;
  }
  if (comm == ctx->world_comm && ns < ctx->prm.min_world_size) {
    free(surv);
    finish(ag, NEXAR_ERR_INVALID_ARG,
           "rank %d: only %d ranks survive, fewer than "
           "NEXAR_MIN_WORLD_SIZE=%lld",
           comm->rank, ns, (long long)ctx->prm.min_world_size);
    return;
  }
  int rc;
  nexar_comm_t *nc = comm;
  if (ag->in_place) {
    comm->ag = NULL; /* the rebuild retires the old id (and would free ag) */
    rc = nexar__comm_rebuild(ctx, comm, surv, ns, ag->did);
    if (rc < 0) comm->ag = ag; /* not rebuilt: the old id lives on */
  } else {
    nc = nexar__comm_new(ctx);
    rc = nc ? 0 : NEXAR_ERR_NOMEM;
    if (nc) {
      nc->world_ranks = surv;
      surv = NULL;
      nc->id = ag->did;
      nc->size = ns;
      for (int r = 0; r < ns; r++)
        if (nc->world_ranks[r] == ctx->rank) nc->rank = r;
      nc->epoch = comm->epoch + 1;
      rc = nexar__comm_register(ctx, nc);
      if (rc < 0) {
        nexar__comm_free(nc);
        nc = NULL;
      }
    }
    ag->newc = nc;
  }
  free(surv);
  if (rc < 0) {
    finish(ag, rc, "rank %d: cannot build the new communicator: %s", ag->me,
           nexar_strerror(rc));
    return;
  }
  /* A member that failed after the decision: the new epoch starts
   * revoked, and the next call recovers it again. */
  for (int r = 0; r < nc->size; r++) {
    if (ctx->dead[nc->world_ranks[r]] != 1) continue;
    char why[NEXAR__ERRMSG_MAX];
    snprintf(why, sizeof(why),
             "rank %d of communicator %llu (epoch %u): process %d failed "
             "during the recovery; receive buffers are unspecified",
             nc->rank, (unsigned long long)nc->id, nc->epoch,
             nc->world_ranks[r]);
    nexar__comm_revoke(nc, NEXAR_ERR_PEER_FAILED, why);
    break;
  }
  ag->applied = true;
  ag->ready[ag->me] = 1;
  send_all(ag, NEXAR__AG_READY, 0, NULL, ag->did);
}

/* Records the decision (reached here, or adopted from a DECIDE) and sends
 * it on before anything acts on it, so that it survives its sender. The
 * current call applies it (evaluate_once). */
static void decide(nexar__agree_t *ag, const uint8_t *set, uint64_t id,
                   int round) {
  ag->decided = true;
  memcpy(ag->dset, set, (size_t)ag->n);
  ag->did = id;
  send_all(ag, NEXAR__AG_DECIDE, round, ag->dset, id);
}

/* Whether a call on |ag| is waiting for its result. */
static bool active(const nexar__agree_t *ag) {
  return ag->waiter && !ag->done;
}

/* Runs the rounds once this process has joined (also between calls, so
 * that no peer waits on it), and finishes the current call, if any. */
static void evaluate_once(nexar__agree_t *ag) {
  nexar_ctx_t *ctx = ag->ctx;
  if (!ag->started) return;
  if (atomic_load(&ctx->aborted)) {
    finish(ag, NEXAR_ERR_ABORTED, "nexar_abort was called");
    return;
  }
  if (ctx->fenced) {
    finish(ag, NEXAR_ERR_EXCLUDED,
           "rank %d: this process was declared failed and is fenced out",
           ag->me);
    return;
  }
  while (!ag->decided) {
    const uint8_t *cur = ag->from + (size_t)ag->round * (size_t)ag->n;
    const uint8_t *prev = ag->from + (size_t)(ag->round - 1) * (size_t)ag->n;
    bool complete = true, same = true;
    for (int k = 0; k < ag->n; k++) {
      if (!cur[k] && !member_dead(ag, k)) complete = false;
      /* Round 0 is everybody. */
      if (cur[k] != (ag->round == 1 ? 1 : prev[k])) same = false;
    }
    if (!complete) return;
    if (same) {
      decide(ag, ag->set + (size_t)ag->round * (size_t)ag->n,
             ag->nid[ag->round], ag->round);
      break;
    }
    if (ag->round + 1 >= ag->maxr) {
      finish(ag, NEXAR_ERR_INTERNAL, "agreement ran out of rounds");
      return;
    }
    propose(ag, ag->round + 1);
  }
  if (!active(ag)) return;
  if (!ag->applied) apply_decision(ag);
  if (ag->done) return;
  for (int k = 0; k < ag->n; k++)
    if (!ag->dset[k] && !ag->ready[k] && !member_dead(ag, k)) return;
  finish(ag, NEXAR_OK, NULL);
}

static void evaluate(nexar__agree_t *ag) {
  if (ag->busy) {
    ag->again = true;
    return;
  }
  ag->busy = true;
  do {
    ag->again = false;
    evaluate_once(ag);
  } while (ag->again);
  ag->busy = false;
}

void nexar__agree_on_failure(nexar_ctx_t *ctx) {
  for (nexar__agree_t *a = ctx->ags; a; a = a->next) evaluate(a);
}

bool nexar__agree_gone(nexar_ctx_t *ctx, uint64_t wid) {
  /* A kept agreement (even one whose calls are over) takes every message:
   * it answers a late proposal with its decision. Dropping one here would
   * also leave its sequence number unconsumed and hold back the sender's
   * next message on this id for good. */
  if (find(ctx, wid)) return false;
  return nexar__find_comm(ctx, wid & ~NEXAR__AGREE_BIT) == NULL;
}

/* What member |from| of the communicator recovered by |ag|, or of |comm|
 * when there is no agreement yet, says failed in |msg| is final (fencing),
 * here too. */
static void adopt_failed(nexar_ctx_t *ctx, const nexar__agree_t *ag,
                         const nexar_comm_t *comm, int from,
                         const nexar__agree_msg_t *msg) {
  for (uint32_t i = 0; i < msg->n; i++) {
    int id = (int)nexar__id_at(msg->ids, i);
    bool member = ag ? idx_of(ag, id) >= 0 : nexar__comm_rank_of(comm, id) >= 0;
    if (member && id < ctx->world && ctx->dead[id] != 1)
      nexar__declare_failed(ctx, id, NEXAR_FAIL_REPORTED, from,
                            "named in an agreement proposal");
  }
}

void nexar__agree_on_msg(nexar_ctx_t *ctx, int from, const nexar__hdr_t *h,
                         const uint8_t *payload, size_t len) {
  nexar__agree_t *ag = find(ctx, h->comm_id);
  if (!ag) {
    nexar_comm_t *comm = nexar__find_comm(ctx, h->comm_id & ~NEXAR__AGREE_BIT);
    if (!comm || comm->ag) return;
    /* The failures it names first, so that the revocation below names
     * them too: a recovery's first message can outrun the notice of the
     * failure that started it (on a lazy mesh it comes direct, the notice
     * floods over the hypercube). */
    nexar__agree_msg_t first;
    if (nexar__comm_rank_of(comm, from) >= 0 &&
        nexar__agree_decode(&first, payload, len, (uint32_t)comm->size) == 0)
      adopt_failed(ctx, NULL, comm, from, &first);
    if (comm->ag ||
        nexar__find_comm(ctx, h->comm_id & ~NEXAR__AGREE_BIT) != comm)
      return;
    ag = create(ctx, comm);
    if (!ag) return;
    char why[NEXAR__ERRMSG_MAX];
    snprintf(why, sizeof(why),
             "rank %d of communicator %llu (epoch %u): revoked, process %d "
             "started its recovery; receive buffers are unspecified",
             comm->rank, (unsigned long long)comm->id, comm->epoch, from);
    nexar__comm_revoke(comm, NEXAR_ERR_REVOKED, why);
  }
  int p = idx_of(ag, from);
  nexar__agree_msg_t msg;
  if (p < 0 || nexar__agree_decode(&msg, payload, len, (uint32_t)ag->n) < 0)
    return;
  uint64_t id = msg.id;
  uint8_t *set = calloc((size_t)ag->n, 1);
  if (!set) return;
  for (uint32_t i = 0; i < msg.n; i++) {
    int k = idx_of(ag, (int)nexar__id_at(msg.ids, i));
    if (k >= 0) set[k] = 1;
  }
  int round = (int)h->coll_seq;
  if (h->step == NEXAR__AG_PROPOSE && round >= 1 && round < ag->maxr) {
    size_t o = (size_t)round * (size_t)ag->n;
    ag->from[o + (size_t)p] = 1;
    for (int k = 0; k < ag->n; k++) ag->set[o + (size_t)k] |= set[k];
    if (id > ag->nid[round]) ag->nid[round] = id;
    /* A laggard still agreeing (it missed the DECIDE, or joins late) gets
     * the decision: nobody waits on a member that has decided. */
    if (ag->decided)
      send_to(ag, NEXAR__AG_DECIDE, ag->round, ag->dset, ag->did, p);
  } else if (h->step == NEXAR__AG_DECIDE && !ag->decided) {
    decide(ag, set, id, round);
  } else if (h->step == NEXAR__AG_READY) {
    ag->ready[p] = 1;
  }
  adopt_failed(ctx, ag, NULL, from, &msg);
  free(set);
  evaluate(ag);
}

void nexar__agree_resend(nexar_ctx_t *ctx) {
  /* Agreement messages are idempotent (a round's proposal is the same
   * bytes every time, DECIDE and READY are adopted once), so sending them
   * again is harmless, and it recovers one lost with a failed relay. Links
   * between neighbours lose nothing while both ends live. */
  for (nexar__agree_t *ag = ctx->ags; ag; ag = ag->next) {
    if (!ag->started) continue;
    for (size_t o = 0; o + 9 <= ag->log_len;) {
      const uint8_t *p = ag->log + o;
      uint32_t len = nexar__get_u32(p + 5);
      nexar__hdr_t h = {.kind = NEXAR__KIND_AGREE,
                        .comm_id = ag->wid,
                        .src_rank = (uint32_t)ctx->rank,
                        .step = p[0],
                        .coll_seq = nexar__get_u32(p + 1)};
      for (int k = 0; k < ag->n; k++)
        if (k != ag->me && !member_dead(ag, k) &&
            !nexar__topo_adjacent(&ctx->topo, ctx->rank, ag->ids[k]))
          nexar__ctl_send(ctx, ag->ids[k], &h, p + 9, len);
      o += 9u + len;
    }
  }
}

void nexar__agree_release(nexar_ctx_t *ctx, nexar_comm_t *comm) {
  if (comm->ag) destroy(ctx, comm->ag);
}

void nexar__agree_fini(nexar_ctx_t *ctx) {
  while (ctx->ags) {
    nexar__agree_t *ag = ctx->ags;
    ctx->ags = ag->next;
    if (ag->comm && ag->comm->ag == ag) ag->comm->ag = NULL;
    ag_free(ag);
  }
}

/* ---- User side ---- */

typedef struct recover_arg {
  nexar_comm_t *comm;
  bool in_place;
  nexar__req_t *waiter;
  uint64_t my_id;
  nexar__agree_t *ag;
  nexar_comm_t *newc;
  char err[NEXAR__ERRMSG_MAX];
  bool refused; /* a shrink to a minority in doubt (minority_in_doubt) */
} recover_arg_t;

/* Whether the decision of |ag| leaves no majority of the old epoch. */
static bool no_majority(const nexar__agree_t *ag) {
  int ns = 0;
  for (int k = 0; k < ag->n; k++) ns += !ag->dset[k];
  return ag->decided && 2 * ns <= ag->n;
}

/* A shrink that would leave a minority of |comm| while some of the others
 * are only known to have gone silent or out of reach (no proof that their
 * processes are gone): this process may be the one cut off by a network
 * partition, and the others may be going on without it. Says so in |err|
 * and returns true; the shrink is refused (docs/fault-tolerance.md). */
static bool minority_in_doubt(const nexar_comm_t *comm, char *err, size_t n) {
  const nexar_ctx_t *ctx = comm->ctx;
  int live = 0;
  for (int r = 0; r < comm->size; r++) live += !ctx->dead[comm->world_ranks[r]];
  if (2 * live > comm->size) return false;
  char silent[160] = "";
  size_t o = 0;
  for (int r = 0; r < comm->size && o < sizeof(silent) - 16; r++) {
    int id = comm->world_ranks[r];
    if (ctx->dead[id] == 1 && ctx->dead_how[id] != NEXAR_FAIL_CONNECTION)
      o += (size_t)snprintf(silent + o, sizeof(silent) - o, "%s%d",
                            o ? ", " : "", id);
  }
  if (!o) return false;
  snprintf(err, n,
           "rank %d: comm_shrink of communicator %llu (epoch %u): only %d of "
           "%d ranks are reachable and processes %s were declared failed "
           "only because they went silent or out of reach, not because their "
           "processes are known gone: this process may be cut off from the "
           "others, which may go on without it, so it does not shrink to a "
           "minority (only nexar_finalize may follow)",
           comm->rank, (unsigned long long)comm->id, comm->epoch, live,
           comm->size, silent);
  return true;
}

/* Joins the agreement of |comm| for one call: creates it, or takes up the
 * one kept from an earlier call (see nexar__agree_t), whose decision, when
 * there is one, answers at once. */
static int start_fn(nexar__req_t *ctl) {
  recover_arg_t *a = ctl->cb_arg;
  nexar_ctx_t *ctx = a->comm->ctx;
  nexar__agree_t *ag = a->comm->ag;
  /* Another call waits on it, or it was shrunk (an in-place call still
   * gets the "no majority" answer). */
  if (ag && (ag->waiter || (ag->shrunk && !(a->in_place && no_majority(ag)))))
    return NEXAR_ERR_INVALID_USAGE;
  if (!a->in_place && minority_in_doubt(a->comm, a->err, sizeof(a->err)))
    return NEXAR_ERR_PEER_FAILED;
  if (!ag) ag = create(ctx, a->comm);
  if (!ag) return NEXAR_ERR_NOMEM;
  char why[NEXAR__ERRMSG_MAX];
  snprintf(why, sizeof(why),
           "rank %d of communicator %llu (epoch %u): revoked for recovery; "
           "receive buffers are unspecified",
           a->comm->rank, (unsigned long long)a->comm->id, a->comm->epoch);
  nexar__comm_revoke(a->comm, NEXAR_ERR_REVOKED, why);
  if (!ag->started) {
    ag->started = true;
    ag->my_id = a->my_id;
    /* When others decided before this process joined, it adopts that. */
    if (!ag->decided) propose(ag, 1);
  }
  ag->in_place = a->in_place;
  ag->waiter = a->waiter;
  ag->done = false;
  ag->rc = 0;
  ag->err[0] = 0;
  ag->applied = false;
  a->ag = ag;
  evaluate(ag);
  return 0;
}

static int timeout_fn(nexar__req_t *ctl) {
  recover_arg_t *a = ctl->cb_arg;
  nexar__agree_t *ag = a->ag;
  char missing[256] = "";
  size_t o = 0;
  const uint8_t *cur = ag->from + (size_t)ag->round * (size_t)ag->n;
  for (int k = 0; k < ag->n && o < sizeof(missing) - 16; k++) {
    bool waiting = ag->decided ? !ag->dset[k] && !ag->ready[k]
                               : !cur[k] && !member_dead(ag, k);
    if (waiting)
      o += (size_t)snprintf(missing + o, sizeof(missing) - o, "%s%d",
                            o ? ", " : "", k);
  }
  finish(ag, NEXAR_ERR_TIMEOUT,
         "rank %d: recovery of communicator %llu did not finish within "
         "NEXAR_OP_TIMEOUT_MS=%lld (%s, round %d); ranks not heard from: %s",
         ag->me, (unsigned long long)(ag->wid & ~NEXAR__AGREE_BIT),
         (long long)a->comm->ctx->prm.op_timeout_ms,
         ag->decided ? "decided, waiting for READY" : "agreeing", ag->round,
         missing);
  return 0;
}

static int collect_fn(nexar__req_t *ctl) {
  recover_arg_t *a = ctl->cb_arg;
  nexar__agree_t *ag = a->ag;
  nexar_ctx_t *ctx = a->comm->ctx;
  snprintf(a->err, sizeof(a->err), "%s", ag->err);
  /* The decision may have taken more than this process knew when the
   * shrink began. */
  if (ag->rc == 0 && !ag->in_place &&
      minority_in_doubt(a->comm, a->err, sizeof(a->err)))
    a->refused = true;
  a->newc = ag->rc == 0 && !a->refused ? ag->newc : NULL;
  if ((ag->rc < 0 || a->refused) && ag->newc) {
    nexar__comm_unregister(ctx, ag->newc);
    nexar__comm_free(ag->newc);
  }
  ag->newc = NULL;
  ag->waiter = NULL;
  if (ag->rc == 0 && !ag->in_place) ag->shrunk = true;
  /* Rebuilt in place, the old id is gone: nothing more can arrive for it.
   * Otherwise the agreement stays with the communicator until it is freed
   * (see nexar__agree_t). */
  if (a->comm->ag != ag) destroy(ctx, ag);
  return 0;
}

int nexar__recover(nexar_comm_t *comm, nexar_comm_t **out) {
  nexar_ctx_t *ctx = comm->ctx;
  if (atomic_load(&ctx->aborted)) return NEXAR_ERR_ABORTED;
  nexar__req_t *w = calloc(1, sizeof(*w));
  if (!w) return NEXAR_ERR_NOMEM;
  w->kind = NEXAR__REQ_CTRL;
  w->comm = comm;
  recover_arg_t a = {.comm = comm, .in_place = out == NULL, .waiter = w};
  uint64_t one = 1;
  a.my_id = atomic_load(&ctx->next_free_id);
  if (a.my_id < one) a.my_id = one;
  uint64_t t0 = nexar__now();
  int rc = nexar__ep_call(&ctx->ep, start_fn, &a, UINT64_MAX);
  if (rc < 0) {
    free(w);
    if (a.err[0])
      nexar__comm_set_error(comm, "%s", a.err);
    else
      nexar__comm_set_error(comm,
                            "rank %d: communicator %llu is already being "
                            "recovered or was shrunk",
                            comm->rank, (unsigned long long)comm->id);
    return rc;
  }
  uint64_t deadline = t0 + (uint64_t)ctx->prm.op_timeout_ms * 1000000ull;
  if (nexar__req_wait(&ctx->ep, w, deadline) < 0)
    nexar__ep_call(&ctx->ep, timeout_fn, &a, UINT64_MAX);
  nexar__req_wait(&ctx->ep, w, UINT64_MAX);
  rc = w->rc;
  nexar__ep_call(&ctx->ep, collect_fn, &a, UINT64_MAX);
  free(w);
  if (a.refused) rc = NEXAR_ERR_PEER_FAILED;
  if (rc < 0) {
    nexar__comm_set_error(comm, "%s", a.err);
    return rc;
  }
  NEXAR__INFO(NEXAR__SUB_INIT,
              "rank %d: communicator recovered in %.1f ms: now rank %d of %d, "
              "epoch %u",
              ctx->rank, (double)(nexar__now() - t0) / 1e6,
              out ? a.newc->rank : comm->rank, out ? a.newc->size : comm->size,
              out ? a.newc->epoch : comm->epoch);
  if (out) *out = a.newc;
  return NEXAR_OK;
}

int nexar_comm_shrink(nexar_comm_t *comm, nexar_comm_t **newcomm) {
  if (!comm || !newcomm) return NEXAR_ERR_INVALID_ARG;
  *newcomm = NULL;
  if (comm->ctx->recovery == NEXAR__RECOVERY_ABORT) {
    nexar__comm_set_error(comm,
                          "rank %d: comm_shrink: NEXAR_RECOVERY=abort (use "
                          "manual or automatic to recover from failures)",
                          comm->rank);
    return NEXAR_ERR_INVALID_USAGE;
  }
  return nexar__recover(comm, newcomm);
}
