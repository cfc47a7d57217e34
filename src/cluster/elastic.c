/*
 * Elastic membership (docs/elastic.md): nexar_elastic_checkpoint on the
 * members, the admission exchange of its leader with the seed, and the
 * joiner's side (its JOIN and its first barrier).
 *
 * A checkpoint, on every member of the world (user thread):
 *  1. allgather of (leave, next free communicator id) over the world: the
 *     staying members (old order), the leavers and the new world's id.
 *     Refused on every member when leaving would leave fewer than
 *     NEXAR_MIN_WORLD_SIZE.
 *  2. the leader (lowest staying rank) asks the seed to admit the pending
 *     joiners (ADMIT, then ADMITTED or REJECT) and broadcasts the ADMITTED
 *     body over the world; an empty body means no joiner.
 *  3. each staying member grows its id tables, registers a placeholder
 *     communicator for the new id (messages of the new world that arrive
 *     before the rebuild wait in it), dials the joiners (lower ids dial
 *     higher ones) and waits until they are connected.
 *  4. allgather of every member's status over the world. When it completes
 *     on a member, every staying member holds the placeholder, so nobody can
 *     be sent a message for an id it does not know. A failed status
 *     anywhere abandons the change on every member alike.
 *  5. commit (engine): a leaver revokes its world (only nexar_finalize may
 *     follow); a staying member marks the leavers departed, rebuilds the
 *     world in place (new members, new id, epoch + 1) and takes over the
 *     placeholder's early messages.
 *  6. a barrier on the new world, with the joiners, whose nexar_init ends
 *     with it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster/seed_int.h"
#include "cluster/cluster.h"

/* ---- Stable ids. */

int nexar__ctx_grow_ids(nexar_ctx_t *ctx, int n) {
  if (n <= ctx->world) return 0;
  if (n > (int)NEXAR__ELASTIC_MAX_IDS) return NEXAR_ERR_INVALID_ARG;
  /* A lazy mesh's links and flooding are the hypercube of the ids it
   * started with (docs/topology.md section 2). */
  if (ctx->topo.lazy) return NEXAR_ERR_UNSUPPORTED;
  size_t old = (size_t)ctx->world, add = (size_t)n - old;
  nexar__roster_entry_t *ro = realloc(ctx->roster, (size_t)n * sizeof(*ro));
  if (!ro) return NEXAR_ERR_NOMEM;
  ctx->roster = ro;
  nexar__link_t **pe = realloc(ctx->peers, (size_t)n * sizeof(*pe));
  if (!pe) return NEXAR_ERR_NOMEM;
  ctx->peers = pe;
  uint8_t *de = realloc(ctx->dead, (size_t)n);
  if (!de) return NEXAR_ERR_NOMEM;
  ctx->dead = de;
  uint8_t *dh = realloc(ctx->dead_how, (size_t)n);
  if (!dh) return NEXAR_ERR_NOMEM;
  ctx->dead_how = dh;
  memset(dh + old, 0, add);
  nexar__peer_t *ps = realloc(ctx->ps, (size_t)n * sizeof(*ps));
  if (!ps) return NEXAR_ERR_NOMEM;
  ctx->ps = ps;
  memset(ro + old, 0, add * sizeof(*ro));
  memset(pe + old, 0, add * sizeof(*pe));
  memset(de + old, 2, add); /* not members until made so */
  memset(ps + old, 0, add * sizeof(*ps));
  ctx->world = n;
  return nexar__topo_grow(ctx, n);
}

/* ---- Joiner side. */

int nexar__elastic_on_join(nexar_ctx_t *ctx, const uint8_t *body, size_t len) {
  nexar__seed_join_t j;
  if (nexar__seed_join_decode(&j, body, len) < 0) return NEXAR_ERR_PROTO;
  NEXAR__CHECK(nexar__ctx_grow_ids(ctx, (int)j.nids));
  for (uint32_t i = 0; i < j.nids; i++)
    if (nexar__join_entry(&j, i, &ctx->roster[i]) < 0) return NEXAR_ERR_PROTO;
  if (!nexar__ct_equal(ctx->roster[j.id].fingerprint, ctx->ep.id.fingerprint,
                       NEXAR__FP_BYTES))
    return NEXAR_ERR_PROTO;
  nexar__host_pace(ctx);
  nexar_comm_t *wc = ctx->world_comm;
  wc->world_ranks = malloc((size_t)j.nmembers * sizeof(int));
  if (!wc->world_ranks) return NEXAR_ERR_NOMEM;
  for (uint32_t i = 0; i < j.nmembers; i++) {
    uint32_t m = nexar__id_at(j.members, i);
    wc->world_ranks[i] = (int)m;
    ctx->dead[m] = 0;
    if (m == j.id) wc->rank = (int)i;
  }
  ctx->rank = (int)j.id;
  char err[NEXAR__ERRMSG_MAX];
  /* The job's settings, those of the first world's rank 0 (id 0). */
  int rc = nexar__params_job_adopt(&ctx->prm, &j.job, (int)j.id, 0, err,
                                   sizeof(err));
  if (rc == 0) rc = nexar__topo_init(ctx, (int)j.nids, err, sizeof(err));
  if (rc < 0) {
    NEXAR__INFO(NEXAR__SUB_BOOTSTRAP, "id %u: %s", j.id, err);
    return rc;
  }
  wc->size = (int)j.nmembers;
  wc->id = j.comm_id;
  wc->epoch = j.epoch;
  ctx->comm_hwm = j.comm_id + 1;
  nexar__bump_next_id(ctx, j.comm_id + 1);
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP,
              "id %u: admitted as rank %d of %u (comm %llu epoch %u)", j.id,
              wc->rank, j.nmembers, (unsigned long long)j.comm_id, j.epoch);
  return 0;
}

int nexar__elastic_joined(nexar_ctx_t *ctx) {
  nexar_comm_t *w = ctx->world_comm;
  int rc = nexar_barrier(w);
  if (rc < 0)
    nexar__set_init_error(
        "nexar_init: joined as id %d (rank %d of %d, comm %llu epoch %u) but "
        "the first barrier of the new world failed: %s",
        ctx->rank, w->rank, w->size, (unsigned long long)w->id, w->epoch,
        nexar_comm_last_error(w));
  return rc;
}

/* ---- Engine helpers shared by the checkpoint's phases. */

/* Runs |fn| in the engine every millisecond until it returns non-zero or
 * |deadline| (ns) passes. Returns its last value (0 at the deadline). */
static int poll_engine(nexar_ctx_t *ctx, int (*fn)(nexar__req_t *), void *arg,
                       uint64_t deadline) {
  for (;;) {
    int rc = nexar__ep_call(&ctx->ep, fn, arg, UINT64_MAX);
    if (rc || nexar__now() >= deadline) return rc;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

static uint64_t ms_from_now(int64_t ms) {
  return nexar__now() + (uint64_t)ms * 1000000ull;
}

/* ---- The leader's admission exchange with the seed. */

/* How long the leader waits for the seed: min(NEXAR_BOOTSTRAP_TIMEOUT_MS,
 * NEXAR_OP_TIMEOUT_MS / 2), so that the other members, waiting for its
 * answer in a broadcast bounded by the op timeout, always get it. */
static int64_t ask_ms(const nexar_ctx_t *ctx) {
  int64_t half = ctx->prm.op_timeout_ms / 2;
  return half < ctx->prm.bootstrap_timeout_ms ? half
                                              : ctx->prm.bootstrap_timeout_ms;
}

typedef struct ask {
  nexar_ctx_t *ctx;
  nexar__link_t *conn;   /* the admission connection (engine) */
  nexar__seed_admit_t a; /* what to ask (proof filled on PROOF) */
  const uint32_t *ids;   /* the staying members' ids */
  int64_t ms;            /* how long the leader waits for the answer */
  int rc;                /* 0 pending, 1 answered, or a NEXAR_ERR_* */
  char why[NEXAR__ERRMSG_MAX];
  uint8_t *body; /* the ADMITTED body once answered */
  size_t body_len;
} ask_t;

static void ask_end(ask_t *k, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ask_end(ask_t *k, int rc, const char *fmt, ...) {
  if (k->rc) return;
  k->rc = rc;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(k->why, sizeof(k->why), fmt, ap);
  va_end(ap);
}

/* Ends the admission connection |c| with |code| and |why|. */
static void ask_close(nexar__link_t *c, int code, int err, const char *why) {
  nexar__link_close(c, code, why);
  nexar__link_fail(c, err, why);
}

static int ask_send_admit(ask_t *k, nexar__link_t *c) {
  size_t cap = NEXAR__SEED_FRAME_HDR + 64 + 4 * (size_t)k->a.nstay;
  uint8_t *frame = malloc(cap);
  if (!frame) return NEXAR_ERR_NOMEM;
  int n = nexar__seed_admit_encode(&k->a, k->ids, frame, cap);
  int rc =
      n < 0 ? NEXAR_ERR_INTERNAL : nexar__link_seed_send(c, frame, (size_t)n);
  free(frame);
  return rc;
}

static int ask_on_admitted(ask_t *k, nexar__link_t *c, const uint8_t *body,
                           size_t len) {
  nexar_ctx_t *ctx = k->ctx;
  nexar__seed_admitted_t ad;
  nexar__joiner_t j;
  if (nexar__seed_admitted_decode(&ad, body, len) < 0) return NEXAR_ERR_PROTO;
  /* Joiners get ids never assigned before. */
  for (uint32_t i = 0; i < ad.njoin; i++)
    if (nexar__admitted_entry(&ad, i, &j) < 0 || (int)j.id < ctx->world)
      return NEXAR_ERR_PROTO;
  if ((int)ad.nids < ctx->world) return NEXAR_ERR_PROTO;
  k->body = malloc(len ? len : 1);
  if (!k->body) return NEXAR_ERR_NOMEM;
  memcpy(k->body, body, len);
  k->body_len = len;
  k->rc = 1;
  ask_close(c, NEXAR__CLOSE_OK, NEXAR_ERR_CLOSED, "admission done");
  return 0;
}

static int ask_on_frame(nexar__link_t *c, uint8_t type, const uint8_t *body,
                        size_t len) {
  ask_t *k = c->role_data;
  if (k->rc) return NEXAR_ERR_PROTO; /* nothing follows the answer */
  if (type == NEXAR__SEED_PROOF) {
    int r = nexar__seed_proof_answer(k->ctx, c, body, len, k->a.proof);
    if (r == NEXAR_ERR_AUTH) {
      ask_end(k, r, "the seed did not prove knowledge of the cluster secret");
      return 0;
    }
    NEXAR__CHECK(r);
    return ask_send_admit(k, c);
  }
  if (type == NEXAR__SEED_ADMITTED) return ask_on_admitted(k, c, body, len);
  if (type == NEXAR__SEED_REJECT) {
    nexar__seed_reject_t r;
    if (nexar__seed_reject_decode(&r, body, len) < 0) return NEXAR_ERR_PROTO;
    ask_end(k, r.code, "refused: %s", r.reason);
    ask_close(c, NEXAR__CLOSE_REJECT, r.code, "admission refused");
    return 0;
  }
  return NEXAR_ERR_PROTO;
}

void nexar__elastic_seed_data(nexar__link_t *c, const uint8_t *d, size_t n) {
  ask_t *k = c->role_data;
  int r = nexar__seed_feed(c, d, n, ask_on_frame);
  if (r < 0 && c->state != NEXAR__CS_DEAD) {
    ask_end(k, r, "bad message from the seed: %s", nexar_strerror(r));
    ask_close(c, NEXAR__CLOSE_PROTO, r, nexar_strerror(r));
  }
}

void nexar__elastic_seed_closed(nexar__link_t *c) {
  ask_t *k = c->role_data;
  c->role_data = NULL;
  k->conn = NULL;
  ask_end(k, NEXAR_ERR_TRANSPORT, "the connection ended before an answer: %s",
          c->close_reason[0] ? c->close_reason : "closed");
}

static int ask_begin_fn(nexar__req_t *req) {
  ask_t *k = req->cb_arg;
  nexar_ctx_t *ctx = k->ctx;
  if (!ctx->seed_sl) {
    ask_end(k, NEXAR_ERR_INVALID_ARG, "no seed address (NEXAR_SEED)");
    return 0;
  }
  nexar__dial_t d = {&ctx->seed_ss, ctx->seed_sl, NEXAR__ROLE_SEED, -1,
                     NULL,          NULL};
  int rc = nexar__link_dial(&ctx->ep, &d, &k->conn);
  if (rc < 0) {
    ask_end(k, rc, "cannot start a connection: %s", nexar_strerror(rc));
    return 0;
  }
  k->conn->role_data = k;
  return 0;
}

/* Engine: the exchange's state; a port unreachable from the seed's
 * address (nothing listens there: the seed has exited) ends it at once. */
static int ask_poll_fn(nexar__req_t *req) {
  ask_t *k = req->cb_arg;
  nexar__link_t *c = k->conn;
  if (!k->rc && c && c->port_closed && c->state != NEXAR__CS_DEAD) {
    ask_end(k, NEXAR_ERR_TRANSPORT,
            "nothing listens at that address (ICMP port unreachable): the "
            "seed has exited");
    ask_close(c, NEXAR__CLOSE_OK, NEXAR_ERR_TRANSPORT, "seed gone");
  }
  return k->rc;
}

/* Ends the exchange (NEXAR_ERR_TIMEOUT if still pending) and detaches the
 * connection from |k|, closing it if still open: nothing in the engine
 * refers to |k| afterwards. */
static int ask_stop_fn(nexar__req_t *req) {
  ask_t *k = req->cb_arg;
  ask_end(k, NEXAR_ERR_TIMEOUT, "no answer within %lld ms", (long long)k->ms);
  nexar__link_t *c = k->conn;
  if (!c) return 0;
  c->role_data = NULL;
  k->conn = NULL;
  if (c->state != NEXAR__CS_DEAD)
    ask_close(c, NEXAR__CLOSE_OK, NEXAR_ERR_CLOSED, "admission abandoned");
  return 0;
}

/*
 * The leader asks the seed to admit the pending joiners into the world of
 * |ids| (|n| staying members), new id |comm_id|, epoch |epoch|. Returns the
 * ADMITTED body in *body (malloc'd, *len bytes), or *body = NULL when
 * nobody can be admitted: the seed is not elastic, is gone (its port
 * closed: at once), cannot be reached within ask_ms(), or refused. The
 * checkpoint then goes on with its leaves only; after a seed that is not
 * elastic or unreachable no later checkpoint asks again (step 1 tells every
 * member).
 */
static void ask_seed(nexar_ctx_t *ctx, const uint32_t *ids, int n,
                     uint64_t comm_id, uint32_t epoch, uint8_t **body,
                     size_t *len) {
  *body = NULL;
  *len = 0;
  int64_t maxw = ctx->prm.max_world_size;
  ask_t k;
  memset(&k, 0, sizeof(k));
  k.ctx = ctx;
  k.ids = ids;
  k.a.comm_id = comm_id;
  k.a.epoch = epoch;
  k.a.nstay = (uint32_t)n;
  k.a.max_joiners = maxw ? (uint32_t)(maxw - n) : NEXAR__JOIN_UNLIMITED;
  k.ms = ask_ms(ctx);
  uint64_t t0 = nexar__now();
  nexar__ep_call(&ctx->ep, ask_begin_fn, &k, UINT64_MAX);
  poll_engine(ctx, ask_poll_fn, &k, t0 + (uint64_t)k.ms * 1000000ull);
  nexar__ep_call(&ctx->ep, ask_stop_fn, &k, UINT64_MAX);
  if (k.rc == 1) {
    *body = k.body;
    *len = k.body_len;
    NEXAR__INFO(NEXAR__SUB_INIT, "id %d: the seed answered in %.1f ms",
                ctx->rank, (double)(nexar__now() - t0) / 1e6);
    return;
  }
  /* Not elastic, unreachable, or no answer in time: asking again would
   * only stall every later checkpoint. */
  if (k.rc == NEXAR_ERR_UNSUPPORTED || k.rc == NEXAR_ERR_TRANSPORT ||
      k.rc == NEXAR_ERR_TIMEOUT)
    ctx->seed_no_admit = true;
  NEXAR__WARN(NEXAR__SUB_INIT,
              "id %d: elastic checkpoint: the seed at %s admitted nobody "
              "(%s: %s); going on without joiners%s",
              ctx->rank, ctx->prm.seed_addr ? ctx->prm.seed_addr : "(unset)",
              nexar_err_name(k.rc), k.why,
              ctx->seed_no_admit ? "; later checkpoints will not ask it" : "");
}

/* ---- The checkpoint. */

typedef struct change {
  nexar_ctx_t *ctx;
  bool leaving;                /* this process leaves */
  int *ids, n;                 /* new world: stable ids in rank order */
  int *gone, ngone;            /* the leavers' ids */
  nexar__seed_admitted_t adm;  /* the joiners (njoin may be 0) */
  uint64_t comm_id;            /* the new world's id */
  nexar_comm_t *ph;            /* placeholder for comm_id (engine) */
  char err[NEXAR__ERRMSG_MAX]; /* why this member's preparation failed */
  char waiting[128];           /* a joiner not connected yet */
} change_t;

/* Engine: the joiners become members; a placeholder for the new id; dial. */
static int prepare_fn(nexar__req_t *req) {
  change_t *x = req->cb_arg;
  nexar_ctx_t *ctx = x->ctx;
  nexar__joiner_t j;
  int rc = nexar__ctx_grow_ids(ctx, (int)x->adm.nids);
  for (uint32_t i = 0; rc == 0 && i < x->adm.njoin; i++) {
    rc = nexar__admitted_entry(&x->adm, i, &j);
    if (rc == 0 && (int)j.id < ctx->world && !ctx->dead[j.id])
      rc = NEXAR_ERR_PROTO; /* a member already */
    if (rc == 0) ctx->roster[j.id] = j.e;
  }
  if (rc == 0) nexar__host_pace(ctx);
  nexar_comm_t *ph = rc == 0 ? nexar__comm_new(ctx) : NULL;
  if (rc == 0 &&
      (!ph || !(ph->world_ranks = malloc((size_t)x->n * sizeof(int)))))
    rc = NEXAR_ERR_NOMEM;
  if (rc < 0) {
    nexar__comm_free(ph);
    snprintf(x->err, sizeof(x->err),
             "id %d: cannot take in the %u joiners (%u ids): %s%s", ctx->rank,
             x->adm.njoin, x->adm.nids, nexar_strerror(rc),
             ctx->topo.lazy ? " (a lazy full mesh does not grow: "
                              "NEXAR_MESH_LAZY_MIN=0 or above the largest "
                              "world keeps an elastic job's mesh eager)"
                            : "");
    return rc;
  }
  if (!ph) return NEXAR_ERR_INTERNAL; /* rc == 0 implies ph */
  memcpy(ph->world_ranks, x->ids, (size_t)x->n * sizeof(int));
  ph->size = x->n;
  for (int r = 0; r < x->n; r++)
    if (x->ids[r] == ctx->rank) ph->rank = r;
  ph->id = x->comm_id;
  rc = nexar__comm_register(ctx, ph);
  if (rc < 0) {
    nexar__comm_free(ph);
    return rc;
  }
  x->ph = ph;
  for (uint32_t i = 0; i < x->adm.njoin; i++) {
    nexar__admitted_entry(&x->adm, i, &j);
    ctx->dead[j.id] = 0;
    rc = nexar__dial_peer(ctx, (int)j.id);
    if (rc < 0) {
      snprintf(x->err, sizeof(x->err), "id %d: cannot dial joiner id %u: %s",
               ctx->rank, j.id, nexar_strerror(rc));
      return rc;
    }
  }
  nexar__topo_refresh(ctx); /* routes to the joiners */
  return 0;
}

/* Engine: 1 when every joiner is connected, 0 while some are not, or
 * NEXAR_ERR_PEER_FAILED (x->err says which) when a connection failed. */
static int joiners_up_fn(nexar__req_t *req) {
  change_t *x = req->cb_arg;
  nexar_ctx_t *ctx = x->ctx;
  nexar__joiner_t j;
  int up = 1;
  for (uint32_t i = 0; i < x->adm.njoin; i++) {
    nexar__admitted_entry(&x->adm, i, &j);
    nexar__link_t *c = ctx->peers[j.id];
    if (c && c->state == NEXAR__CS_READY) continue;
    if (!c || c->state >= NEXAR__CS_CLOSING) {
      snprintf(x->err, sizeof(x->err),
               "id %d: the connection to joiner id %u at %s failed: %s",
               ctx->rank, j.id, c ? c->remote_str : "?",
               c ? c->close_reason : "no connection");
      return NEXAR_ERR_PEER_FAILED;
    }
    if (up)
      snprintf(x->waiting, sizeof(x->waiting), "joiner id %u at %s", j.id,
               c->remote_str);
    up = 0;
  }
  return up;
}

/* Engine: the change is abandoned: the joiners are no members after all. */
static int abandon_fn(nexar__req_t *req) {
  change_t *x = req->cb_arg;
  nexar_ctx_t *ctx = x->ctx;
  nexar__joiner_t j;
  if (x->ph) {
    nexar__comm_unregister(ctx, x->ph);
    nexar__comm_free(x->ph);
    x->ph = NULL;
  }
  for (uint32_t i = 0; i < x->adm.njoin; i++) {
    if (nexar__admitted_entry(&x->adm, i, &j) < 0 || (int)j.id >= ctx->world)
      continue;
    ctx->dead[j.id] = 2;
    if (ctx->peers[j.id])
      nexar__link_close(ctx->peers[j.id], NEXAR__CLOSE_OK,
                        "elastic checkpoint abandoned");
  }
  nexar__topo_refresh(ctx);
  return 0;
}

/* Moves the early messages of placeholder |ph| to the rebuilt |world| and
 * drops |ph| from the registry, keeping the per-connection sequence state
 * of its id (now the world's). */
static void adopt(nexar_ctx_t *ctx, nexar_comm_t *world, nexar_comm_t *ph) {
  world->unexp = ph->unexp;
  world->unexp_tail = ph->unexp_tail;
  ph->unexp = ph->unexp_tail = NULL;
  for (int i = 0; i < ctx->ncomms; i++) {
    if (ctx->comms[i] != ph) continue;
    ctx->comms[i] = ctx->comms[--ctx->ncomms];
    break;
  }
  nexar__comm_free(ph);
}

/* Engine: the change takes effect on this process. */
static int commit_fn(nexar__req_t *req) {
  change_t *x = req->cb_arg;
  nexar_ctx_t *ctx = x->ctx;
  nexar_comm_t *w = ctx->world_comm;
  if (x->leaving) {
    char why[160];
    snprintf(why, sizeof(why),
             "id %d left the job at an elastic checkpoint: only "
             "nexar_finalize may follow",
             ctx->rank);
    ctx->left = true;
    nexar__comm_revoke(w, NEXAR_ERR_INVALID_USAGE, why);
    for (int i = 0; i < ctx->ncomms; i++)
      nexar__comm_revoke(ctx->comms[i], NEXAR_ERR_INVALID_USAGE, why);
    return 0;
  }
  int rc = nexar__comm_rebuild(ctx, w, x->ids, x->n, x->comm_id);
  if (rc < 0) return rc;
  for (int i = 0; i < x->ngone; i++) ctx->dead[x->gone[i]] = 2;
  nexar__topo_refresh(ctx);
  adopt(ctx, w, x->ph);
  x->ph = NULL;
  /* Children with a leaver in them: nobody may wait on it (or on a member
   * that waits on it). Its connection is freed once it has closed
   * (nexar__peer_release). */
  nexar__comm_revoke_departed(ctx, x->gone, x->ngone, w->epoch);
  return 0;
}

/* Step 3 on a staying member: returns 0 or the error (x->err says why). */
static int prepare(change_t *x, uint64_t deadline) {
  nexar_ctx_t *ctx = x->ctx;
  int rc = nexar__ep_call(&ctx->ep, prepare_fn, x, UINT64_MAX);
  if (rc < 0) return rc;
  rc = poll_engine(ctx, joiners_up_fn, x, deadline);
  if (rc == 0) {
    snprintf(x->err, sizeof(x->err),
             "id %d: %s (of %u joiners) was not connected within "
             "NEXAR_OP_TIMEOUT_MS=%lld",
             ctx->rank, x->waiting, x->adm.njoin,
             (long long)ctx->prm.op_timeout_ms);
    rc = NEXAR_ERR_TIMEOUT;
  }
  return rc < 0 ? rc : 0;
}

/* Step 2: the leader's ADMITTED body, broadcast from old rank |leader|;
 * decoded into x->adm (no joiner when the body is empty, or at once when
 * step 1 found there is no seed to ask). */
static int share_joiners(change_t *x, int leader, bool ask, uint8_t **body) {
  nexar_ctx_t *ctx = x->ctx;
  nexar_comm_t *w = ctx->world_comm;
  uint8_t *b = NULL;
  size_t blen = 0;
  memset(&x->adm, 0, sizeof(x->adm));
  x->adm.nids = (uint32_t)ctx->world;
  *body = NULL;
  if (!ask) return 0;
  if (w->rank == leader) {
    uint32_t *ids = malloc((size_t)(x->n > 0 ? x->n : 1) * sizeof(uint32_t));
    if (ids) {
      for (int i = 0; i < x->n; i++) ids[i] = (uint32_t)x->ids[i];
      ask_seed(ctx, ids, x->n, x->comm_id, w->epoch + 1, &b, &blen);
    }
    free(ids);
  }
  uint64_t len = blen;
  int rc = nexar_bcast(w, &len, 1, NEXAR_UINT64, leader);
  if (rc == 0 && len > NEXAR__SEED_MAX_BODY) rc = NEXAR_ERR_PROTO;
  if (rc == 0 && len) {
    if (w->rank != leader) b = malloc((size_t)len);
    /* Without memory this member still takes part (with no data): the
     * others then fail with a mismatch instead of waiting for it. */
    int brc = nexar_bcast(w, b ? (void *)b : (void *)&len, b ? (size_t)len : 0,
                          NEXAR_UINT8, leader);
    rc = b ? brc : NEXAR_ERR_NOMEM;
  }
  if (rc == 0 && len && nexar__seed_admitted_decode(&x->adm, b, len) < 0)
    rc = NEXAR_ERR_PROTO;
  *body = b;
  return rc;
}

int nexar_elastic_checkpoint(nexar_ctx_t *ctx, int leave,
                             nexar_membership_t *out) {
  if (!ctx) return NEXAR_ERR_INVALID_ARG;
  nexar_comm_t *w = ctx->world_comm;
  if (ctx->left) {
    nexar__comm_set_error(w,
                          "id %d: elastic checkpoint: this process left the "
                          "job at an earlier checkpoint; only nexar_finalize "
                          "may follow",
                          ctx->rank);
    return NEXAR_ERR_INVALID_USAGE;
  }
  int n = w->size, me = w->rank, rc = 0;
  uint32_t old_epoch = w->epoch;
  change_t x;
  memset(&x, 0, sizeof(x));
  x.ctx = ctx;
  x.leaving = leave != 0;
  uint8_t *body = NULL;
  int64_t *all = malloc((size_t)n * 3 * sizeof(int64_t));
  x.ids = malloc((size_t)n * sizeof(int));
  x.gone = malloc((size_t)n * sizeof(int));
  if (!all || !x.ids || !x.gone) {
    rc = NEXAR_ERR_NOMEM;
    goto out;
  }
  /* 1. Who leaves, the new world's id (as nexar_comm_split agrees), and
   * whether there is a seed to ask: -1 from a member that knows it is
   * not elastic or gone, else its NEXAR_MAX_WORLD_SIZE (the leader's
   * counts). */
  nexar__bump_next_id(ctx, 1);
  int64_t mine[3] = {x.leaving, (int64_t)atomic_load(&ctx->next_free_id),
                     ctx->seed_no_admit ? -1 : ctx->prm.max_world_size};
  rc = nexar_allgather(w, mine, all, 3, NEXAR_INT64);
  if (rc < 0) goto out;
  int leader = -1;
  for (int r = 0; r < n; r++) {
    if ((uint64_t)all[3 * r + 1] > x.comm_id)
      x.comm_id = (uint64_t)all[3 * r + 1];
    if (all[3 * r + 2] < 0) ctx->seed_no_admit = true;
    if (all[3 * r])
      x.gone[x.ngone++] = w->world_ranks[r];
    else {
      if (leader < 0) leader = r;
      x.ids[x.n++] = w->world_ranks[r];
    }
  }
  int64_t maxw = leader >= 0 ? all[3 * leader + 2] : 0;
  bool ask = leader >= 0 && !ctx->seed_no_admit && !(maxw && maxw <= x.n);
  nexar__bump_next_id(ctx, x.comm_id + 1);
  if (x.ngone && x.n < ctx->prm.min_world_size) {
    nexar__comm_set_error(w,
                          "rank %d (id %d): elastic checkpoint refused: %d of "
                          "%d ranks asked to leave, which would leave %d, "
                          "below NEXAR_MIN_WORLD_SIZE=%lld; nobody left",
                          me, ctx->rank, x.ngone, n, x.n,
                          (long long)ctx->prm.min_world_size);
    rc = NEXAR_ERR_INVALID_ARG;
    goto out;
  }
  /* 2. The joiners, from the seed through the leader. */
  rc = share_joiners(&x, leader, ask, &body);
  if (rc < 0) goto out;
  if (x.adm.njoin == 0 && x.ngone == 0) goto done; /* a barrier, in effect */
  /* 3. Staying members make room for the new world and dial the joiners. */
  int64_t st = 0;
  int *ids = realloc(x.ids, ((size_t)x.n + x.adm.njoin + 1) * sizeof(int));
  if (ids) {
    x.ids = ids;
    for (uint32_t i = 0; i < x.adm.njoin; i++) {
      nexar__joiner_t j;
      nexar__admitted_entry(&x.adm, i, &j);
      x.ids[x.n++] = (int)j.id;
    }
  } else {
    st = NEXAR_ERR_NOMEM;
    snprintf(x.err, sizeof(x.err), "id %d: out of memory", ctx->rank);
  }
  if (!x.leaving && st == 0)
    st = prepare(&x, ms_from_now(ctx->prm.op_timeout_ms));
  /* 4. Everyone's status: all go on, or all abandon. */
  rc = nexar_allgather(w, &st, all, 1, NEXAR_INT64);
  int bad = -1;
  for (int r = 0; rc == 0 && r < n; r++)
    if (all[r] < 0 && bad < 0) bad = r;
  if (rc < 0 || bad >= 0) {
    nexar__ep_call(&ctx->ep, abandon_fn, &x, UINT64_MAX);
    if (rc == 0) {
      rc = (int)all[bad];
      nexar__comm_set_error(w,
                            "rank %d (id %d): elastic checkpoint abandoned, "
                            "nothing changed: rank %d could not prepare "
                            "(%s)%s%s",
                            me, ctx->rank, bad, nexar_err_name(rc),
                            st < 0 ? ": " : "", st < 0 ? x.err : "");
    }
    goto out;
  }
  /* 5. Commit; 6. the first barrier of the new world, with the joiners. */
  rc = nexar__ep_call(&ctx->ep, commit_fn, &x, UINT64_MAX);
  if (rc == 0 && !x.leaving) rc = nexar_barrier(w);
  if (rc < 0) goto out;
  NEXAR__INFO(NEXAR__SUB_INIT,
              "id %d: elastic checkpoint: %d left, %u joined; world of %d, "
              "comm %llu epoch %u",
              ctx->rank, x.ngone, x.adm.njoin, x.n,
              (unsigned long long)x.comm_id, old_epoch + 1);
done:
  if (out) {
    out->epoch =
        x.leaving || x.ngone || x.adm.njoin ? old_epoch + 1 : old_epoch;
    out->old_rank = me;
    out->old_size = n;
    out->new_rank = x.leaving ? -1 : w->rank;
    out->new_size = x.n;
    out->joined = (int)x.adm.njoin;
    out->left = x.ngone;
  }
out:
  if (x.ph) nexar__ep_call(&ctx->ep, abandon_fn, &x, UINT64_MAX);
  free(body);
  free(all);
  free(x.ids);
  free(x.gone);
  return rc;
}
