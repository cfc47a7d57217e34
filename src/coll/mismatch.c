/*
 * Mismatch detection. Every collective message carries the fingerprint of
 * its call (collective, dtype, op, count, root, algorithm); the receiver
 * compares it with its own call of the same sequence number, whether the
 * message arrives before, during or after that call. On a disagreement the
 * rank that sees it fails its collectives on the communicator with
 * NEXAR_ERR_MISMATCH and sends a notice naming both sides to every other
 * member, so no rank waits for a message that will never come. The
 * communicator stays poisoned: its ranks no longer agree on the sequence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/sched.h"

static const char *const coll_names[] = {
    "none",       "barrier",   "bcast",          "allreduce",
    "reduce",     "allgather", "reduce_scatter", "alltoall",
    "gather",     "scatter",   "scan",           "exscan",
    "allgatherv", "alltoallv", "gatherv",        "scatterv"};

static const char *const algo_names[] = {
    "default",           "ring",      "rd",     "rabenseifner", "binomial",
    "scatter_allgather", "rs_gather", "direct", "pairwise",     "dissemination",
    "two_phase",         "neighbour", "hier"};

const char *nexar__coll_name(int coll) {
  return coll >= 0 && coll < (int)(sizeof coll_names / sizeof *coll_names)
             ? coll_names[coll]
             : "collective?";
}

const char *nexar__algo_name(int algo) {
  return algo >= 0 && algo <= NEXAR__ALGO_MAX ? algo_names[algo] : "algo?";
}

static const char *dtype_short(int dt) {
  static const char *const n[] = {"i8",  "u8",   "i32",     "u32",
                                  "i64", "u64",  "f16",     "f32",
                                  "f64", "bf16", "fp8e4m3", "fp8e5m2"};
  return dt >= 0 && dt < NEXAR_NUM_DTYPES ? n[dt] : "dtype?";
}

static const char *op_short(int op) {
  static const char *const n[] = {"sum", "prod", "max",  "min", "avg", "?5",
                                  "?6",  "?7",   "band", "bor", "bxor"};
  return op >= 0 && op < NEXAR_NUM_OPS ? n[op] : "op?";
}

static nexar__fp_t fp_of(const nexar__hdr_t *h) {
  return (nexar__fp_t){h->coll_op,       h->dtype, h->redop,
                       (uint8_t)h->algo, h->tag,   h->count};
}

static bool fp_equal(const nexar__fp_t *a, const nexar__fp_t *b) {
  return a->coll_op == b->coll_op && a->dtype == b->dtype &&
         a->redop == b->redop && a->algo == b->algo && a->root == b->root &&
         a->count == b->count;
}

bool nexar__coll_same_call(const nexar__hdr_t *a, const nexar__hdr_t *b) {
  nexar__fp_t fa = fp_of(a), fb = fp_of(b);
  return fp_equal(&fa, &fb);
}

/* "allreduce(f32 x 1024, sum)", "bcast(f32 x 1024, root 0)", "barrier()";
 * the algorithm is named when |algo| is set. */
static void describe(const nexar__fp_t *f, bool algo, char *out, size_t len) {
  int c = f->coll_op;
  bool reducing = nexar__coll_is_reducing(c);
  bool vform = c >= NEXAR__COLL_ALLGATHERV && c <= NEXAR__COLL_SCATTERV;
  char root[32] = "", op[16] = "", cnt[32] = "";
  if (f->root != 0xffffffffu) snprintf(root, sizeof root, ", root %u", f->root);
  if (reducing) snprintf(op, sizeof op, ", %s", op_short(f->redop));
  if (!vform)
    snprintf(cnt, sizeof cnt, " x %llu", (unsigned long long)f->count);
  if (c == NEXAR__COLL_BARRIER)
    snprintf(out, len, "barrier()%s%s%s", algo ? " [" : "",
             algo ? nexar__algo_name(f->algo) : "", algo ? "]" : "");
  else
    snprintf(out, len, "%s(%s%s%s%s)%s%s%s", nexar__coll_name(c),
             dtype_short(f->dtype), cnt, op, root, algo ? " [" : "",
             algo ? nexar__algo_name(f->algo) : "", algo ? "]" : "");
}

/* Records the text and fails the running collectives of |comm| numbered
 * |seq| or later; earlier ones are sound and finish. */
static void poison(nexar_comm_t *comm, uint64_t seq, const char *text) {
  if (!comm->coll_poison || seq < comm->poison_seq) {
    comm->coll_poison = NEXAR_ERR_MISMATCH;
    comm->poison_seq = seq;
    snprintf(comm->poison_msg, sizeof comm->poison_msg, "%s", text);
  }
  nexar__comm_set_error(comm, "rank %d: %s", comm->rank, text);
  for (nexar__sched_t *s = comm->active, *next; s; s = next) {
    next = s->next;
    if (!s->a.final && s->tmpl.coll_seq >= seq)
      nexar__coll_cancel(s->user, NEXAR_ERR_MISMATCH);
  }
}

typedef struct {
  nexar__req_t req;
  uint8_t buf[NEXAR__NOTICE_BYTES];
} notice_tx_t;

static void notice_sent(nexar__req_t *r) {
  free(r);
}

static void notify_all(nexar_comm_t *comm, const nexar__notice_t *n) {
  nexar_ctx_t *ctx = comm->ctx;
  for (int p = 0; p < comm->size; p++) {
    if (p == comm->rank) continue;
    /* A lazy mesh: only the members this process holds a link to (its
     * hypercube neighbours at least), so that a notice never dials; every
     * process of a slow collective probing all of them made N(N - 1)
     * handshakes at once (docs/topology.md section 2). */
    if (ctx->topo.lazy && !ctx->peers[comm->world_ranks[p]]) continue;
    notice_tx_t *t = calloc(1, sizeof(*t));
    if (!t) return; /* the deadline still ends the peers' waits */
    nexar__notice_encode(n, t->buf);
    nexar__req_t *r = &t->req;
    r->kind = NEXAR__REQ_SEND;
    r->comm = comm;
    r->internal = true;
    r->cb = notice_sent;
    r->lane = NEXAR__LANE_CONTROL;
    r->comm_peer = p;
    r->peer = comm->world_ranks[p];
    r->buf = t->buf;
    r->cap = NEXAR__NOTICE_BYTES;
    r->hdr.kind = NEXAR__KIND_MISMATCH;
    r->hdr.comm_id = comm->id;
    r->hdr.src_rank = (uint32_t)comm->rank;
    r->hdr.coll_seq = n->coll_seq;
    r->hdr.tag = 0xffffffffu;
    nexar__p2p_start(r);
  }
}

static void mismatch(nexar_comm_t *comm, uint64_t seq, int ra,
                     const nexar__fp_t *a, int rb, const nexar__fp_t *b,
                     const char *extra) {
  char da[128], db[128], text[NEXAR__ERRMSG_MAX];
  bool algo = a->algo != b->algo;
  describe(a, algo, da, sizeof da);
  describe(b, algo, db, sizeof db);
  snprintf(text, sizeof text,
           "collective mismatch: rank %d called %s as collective #%llu of "
           "comm %llu; rank %d called %s%s",
           ra, da, (unsigned long long)seq, (unsigned long long)comm->id, rb,
           db, extra ? extra : "");
  poison(comm, seq, text);
}

/* This rank (b) disagrees with rank |them| (a): tell everyone, fail. */
static void report(nexar_comm_t *comm, uint64_t seq, int them,
                   const nexar__fp_t *a, const nexar__fp_t *b,
                   const char *extra) {
  nexar__notice_t n = {seq, (uint32_t)them, (uint32_t)comm->rank, *a, *b};
  notify_all(comm, &n);
  mismatch(comm, seq, them, a, comm->rank, b, extra);
}

void nexar__coll_mismatch_hdr(nexar_comm_t *comm, const nexar__hdr_t *mine,
                              const nexar__hdr_t *h, uint64_t want_bytes) {
  nexar__fp_t a = fp_of(h), b = fp_of(mine);
  int them = (int)h->src_rank;
  char extra[128] = "";
  if (fp_equal(&a, &b))
    snprintf(extra, sizeof extra,
             "; rank %d sent %llu bytes in step %u, rank %d expected %llu "
             "(per-rank counts disagree)",
             them, (unsigned long long)h->payload_len, h->step, comm->rank,
             (unsigned long long)want_bytes);
  report(comm, h->coll_seq, them, &a, &b, extra);
}

/* A probe (a notice whose two sides are its sender): the sender has waited
 * NEXAR_COLL_PROBE_MS for collective |seq| and says what it called, so
 * that disagreeing calls that exchange no message (a barrier root waiting
 * while the others run an allreduce that never reaches it) are still told
 * apart before the deadline. */
static void on_probe(nexar_comm_t *comm, int from, const nexar__notice_t *n) {
  size_t slot = (size_t)(n->coll_seq % NEXAR__FP_RING);
  if (comm->fp_seq[slot] != n->coll_seq + 1) return; /* not called yet */
  if (fp_equal(&comm->fp_ring[slot], &n->a)) return;
  if (comm->coll_poison && comm->poison_seq <= n->coll_seq) return;
  report(comm, n->coll_seq, from, &n->a, &comm->fp_ring[slot], NULL);
}

void nexar__coll_on_notice(nexar_comm_t *comm, int from, const uint8_t *payload,
                           size_t len) {
  nexar__notice_t n;
  if (nexar__notice_decode(&n, payload, len) < 0 ||
      n.rank_a >= (uint32_t)comm->size || n.rank_b >= (uint32_t)comm->size) {
    NEXAR__WARN(NEXAR__SUB_COLL,
                "rank %d: malformed mismatch notice from rank %d ignored",
                comm->rank, from);
    return;
  }
  if (n.rank_a == n.rank_b) {
    if (n.rank_a == (uint32_t)from) on_probe(comm, from, &n);
    return;
  }
  char extra[64];
  snprintf(extra, sizeof extra, " (seen by rank %d)", from);
  mismatch(comm, n.coll_seq, (int)n.rank_a, &n.a, (int)n.rank_b, &n.b, extra);
}

void nexar__coll_tick(nexar_comm_t *comm, uint64_t now) {
  int64_t ms = comm->ctx->prm.coll_probe_ms;
  if (ms <= 0) return;
  for (nexar__sched_t *s = comm->active; s; s = s->next) {
    if (s->probed || s->a.final || comm->size == 1 ||
        now - s->user->t_start < (uint64_t)ms * 1000000ull)
      continue;
    s->probed = true;
    nexar__fp_t f = fp_of(&s->tmpl);
    nexar__notice_t n = {s->tmpl.coll_seq, (uint32_t)comm->rank,
                         (uint32_t)comm->rank, f, f};
    notify_all(comm, &n);
  }
}

int nexar__coll_started(nexar__sched_t *s) {
  nexar_comm_t *comm = s->comm;
  uint64_t seq = s->tmpl.coll_seq;
  size_t slot = (size_t)(seq % NEXAR__FP_RING);
  s->prev = NULL;
  s->next = comm->active;
  if (comm->active) comm->active->prev = s;
  comm->active = s;
  if (s->a.final) return 0;
  comm->fp_ring[slot] = fp_of(&s->tmpl);
  comm->fp_seq[slot] = seq + 1;
  if (!comm->coll_poison) nexar__p2p_screen_early(comm, &s->tmpl);
  if (comm->coll_poison && seq >= comm->poison_seq) {
    char d[128];
    describe(&comm->fp_ring[slot], false, d, sizeof d);
    nexar__comm_set_error(comm,
                          "rank %d: %s as collective #%llu of comm %llu not "
                          "run: an earlier %s",
                          comm->rank, d, (unsigned long long)seq,
                          (unsigned long long)comm->id, comm->poison_msg);
    return comm->coll_poison;
  }
  return 0;
}

void nexar__coll_finished(nexar__sched_t *s) {
  nexar_comm_t *comm = s->comm;
  if (s->prev)
    s->prev->next = s->next;
  else if (comm->active == s)
    comm->active = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}

bool nexar__coll_screen(nexar_comm_t *comm, const nexar__hdr_t *h) {
  uint64_t seq = h->coll_seq;
  if (seq >= comm->coll_seq) return false; /* checked when the call starts */
  size_t slot = (size_t)(seq % NEXAR__FP_RING);
  if (comm->fp_seq[slot] != seq + 1) return true; /* long finished: stale */
  nexar__fp_t theirs = fp_of(h);
  if (!fp_equal(&comm->fp_ring[slot], &theirs)) {
    if (!comm->coll_poison)
      report(comm, seq, (int)h->src_rank, &theirs, &comm->fp_ring[slot], NULL);
    return true;
  }
  for (nexar__sched_t *s = comm->active; s; s = s->next)
    if (s->tmpl.coll_seq == seq) return false; /* running: keep */
  return true; /* a leftover of a finished or failed call */
}
