/*
 * Relay stress (docs/topology.md section 9; issue 18 finding 1): random
 * MPI-valid collective sequences over sparse topologies with minimal
 * windows, at 7 processes, under a hard deadline, every result checked
 * bit for bit against a serial reference computed in the test.
 *
 * Each round draws (from the run's seed, the same on every rank) either a
 * batch of 2 to 4 non-blocking collectives on the world completed by one
 * nexar_waitall, or a split of the world into two disjoint communicators
 * that each run 2 to 4 blocking collectives in the same order. Ops:
 * allreduce (int64 sum), bcast (any root), allgather, alltoall, with 1 to
 * 3000 elements per rank (up to 24 KB, several 4096-byte segments).
 *
 * Configurations (each a fresh world of 7): hypercube with
 * NEXAR_MAX_STREAMS=4; kregular:2 with NEXAR_EAGER_BYTES=1024,
 * NEXAR_RELAY_WINDOW_BYTES=1024 and NEXAR_SEG_BYTES=4096; and every
 * topology (hypercube, kregular:2, kregular:4) with all four at their
 * minimum; then, as controls, hypercube and kregular:2 with the default
 * windows. Then relayed point-to-point (worker_p2p) at 5 and 8 processes,
 * and the same on a full mesh as the control.
 * NEXAR_OP_TIMEOUT_MS=20000 turns a hang into an error naming the
 * operation; the run's limit is 120 s per world.
 *
 * The default run (tests/tests.cmake) has each configuration for the
 * seeds that hung before relays stored and forwarded frames under
 * end-to-end credit and whole unexpected messages left their streams
 * (docs/topology.md section 10), and the controls; `make relay-stress`
 * runs every configuration for one seed.
 * Usage: relay_stress [seed [rounds [config [lag]]]] (config: 0-6 the
 * collective configurations, 7-11 point-to-point: kregular:2 at 5 and 8,
 * full at 8, kregular:2 at 8 with the end-to-end credit at its least, and
 * the same with a 4096-byte credit and messages of 1 to 64 KiB, relayed by
 * rendezvous; 12-13 collectives on kregular:2 and hypercube with the
 * default segments and a 4096-byte credit, so that relayed steps exceed
 * one credited frame; lag RANK:ROUND:OP:MS: that rank sleeps MS ms before
 * op OP of split round ROUND, so that the others run ahead).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "nexar.h"

#define MAXN 3000
#define NP 7

typedef struct {
  unsigned seed;
  int rounds;
  int maxlen; /* point-to-point: largest message (bytes) */
  /* A late rank: |lag_rank| sleeps |lag_ms| before op |lag_op| of split
   * round |lag_round| (lag_ms 0: none). */
  int lag_rank, lag_round, lag_op, lag_ms;
} run_t;

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Element |i| of rank |r|'s input to op |k| of round |round|. */
static int64_t val(int round, int k, int r, int i) {
  return nt_ival(r, i) + (int64_t)round * 131 + k * 17;
}

enum { OP_ALLREDUCE, OP_BCAST, OP_ALLGATHER, OP_ALLTOALL, NOPS };
static const char *const op_name[] = {"allreduce", "bcast", "allgather",
                                      "alltoall"};

typedef struct {
  int op, n, root;
  int64_t *in, *out;
} op_t;

/* Fills op |o|'s input for rank |me| (index |me| of |members|, |size| of
 * them) and returns the bytes its output needs. */
static void op_prepare(op_t *o, int round, int k, int me, const int *members,
                       int size) {
  size_t nin = o->op == OP_ALLTOALL ? (size_t)o->n * size : (size_t)o->n;
  size_t nout = o->op == OP_ALLGATHER || o->op == OP_ALLTOALL
                    ? (size_t)o->n * size
                    : (size_t)o->n;
  o->in = malloc(nin * 8);
  o->out = calloc(nout, 8);
  for (size_t i = 0; i < nin; i++)
    o->in[i] = val(round, k, members[me], (int)i);
  if (o->op == OP_BCAST) memcpy(o->out, o->in, nin * 8);
}

/* Checks op |o|'s output on rank |me| against the serial reference. */
static int op_check(const op_t *o, int round, int k, int me, const int *members,
                    int size) {
  for (int j = 0; j < (o->op == OP_ALLREDUCE || o->op == OP_BCAST ? 1 : size);
       j++)
    for (int i = 0; i < o->n; i++) {
      int64_t want = 0, got = o->out[(size_t)j * o->n + i];
      if (o->op == OP_ALLREDUCE)
        for (int r = 0; r < size; r++) want += val(round, k, members[r], i);
      else if (o->op == OP_BCAST)
        want = val(round, k, members[o->root], i);
      else if (o->op == OP_ALLGATHER)
        want = val(round, k, members[j], i);
      else
        want = val(round, k, members[j], me * o->n + i);
      NT_CHECKF(got == want,
                "round %d op %d (%s, %d elements, root %d): element %d of "
                "block %d is %lld, not %lld",
                round, k, op_name[o->op], o->n, o->root, i, j, (long long)got,
                (long long)want);
    }
  return 0;
}

static int op_start(nexar_comm_t *c, op_t *o, nexar_req_t **req) {
  switch (o->op) {
    case OP_ALLREDUCE:
      return req ? nexar_iallreduce(c, o->in, o->out, (size_t)o->n, NEXAR_INT64,
                                    NEXAR_SUM, req)
                 : nexar_allreduce(c, o->in, o->out, (size_t)o->n, NEXAR_INT64,
                                   NEXAR_SUM);
    case OP_BCAST:
      return req ? nexar_ibcast(c, o->out, (size_t)o->n, NEXAR_INT64, o->root,
                                req)
                 : nexar_bcast(c, o->out, (size_t)o->n, NEXAR_INT64, o->root);
    case OP_ALLGATHER:
      return req ? nexar_iallgather(c, o->in, o->out, (size_t)o->n, NEXAR_INT64,
                                    req)
                 : nexar_allgather(c, o->in, o->out, (size_t)o->n, NEXAR_INT64);
    default:
      return req ? nexar_ialltoall(c, o->in, o->out, (size_t)o->n, NEXAR_INT64,
                                   req)
                 : nexar_alltoall(c, o->in, o->out, (size_t)o->n, NEXAR_INT64);
  }
}

static int worker(int index, void *arg) {
  const run_t *run = arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *world;
  int rank, size;
  NT_OK(nt_join_world(&ctx, &world, &rank, &size));
  (void)index;
  uint64_t s = 0x9e3779b97f4a7c15ull ^ run->seed;
  for (int round = 0; round < run->rounds; round++) {
    int split = (int)(next(&s) % 2);
    int nops = 2 + (int)(next(&s) % 3);
    /* The split: each rank's color drawn from the seed. */
    int color[NP], members[NP], msize = 0, me = 0;
    for (int r = 0; r < size; r++) color[r] = split ? (int)(next(&s) % 2) : 0;
    for (int r = 0; r < size; r++)
      if (color[r] == color[rank]) {
        if (r == rank) me = msize;
        members[msize++] = r;
      }
    op_t ops[4];
    for (int k = 0; k < nops; k++) {
      ops[k].op = (int)(next(&s) % NOPS);
      ops[k].n = 1 + (int)(next(&s) % MAXN);
      ops[k].root = (int)(next(&s) % (uint64_t)NP);
    }
    nexar_comm_t *c = world;
    if (split) {
      int rc = nexar_comm_split(world, color[rank], rank, &c);
      NT_CHECKF(rc == NEXAR_OK, "round %d: split: %s", round,
                nexar_strerror(rc));
    }
    for (int k = 0; k < nops; k++) {
      ops[k].root %= msize;
      op_prepare(&ops[k], round, k, me, members, msize);
    }
    if (split) {
      for (int k = 0; k < nops; k++) {
        if (run->lag_ms && rank == run->lag_rank && round == run->lag_round &&
            k == run->lag_op) {
          struct timespec ts = {run->lag_ms / 1000,
                                (run->lag_ms % 1000) * 1000000L};
          nanosleep(&ts, NULL);
        }
        int rc = op_start(c, &ops[k], NULL);
        NT_CHECKF(rc == NEXAR_OK, "round %d op %d (%s, %d elements): %s (%s)",
                  round, k, op_name[ops[k].op], ops[k].n, nexar_strerror(rc),
                  nexar_comm_last_error(c));
      }
    } else {
      nexar_req_t *reqs[4];
      for (int k = 0; k < nops; k++) NT_OKC(c, op_start(c, &ops[k], &reqs[k]));
      int rc = nexar_waitall((size_t)nops, reqs, NULL);
      NT_CHECKF(rc == NEXAR_OK, "round %d: batch of %d: %s (%s)", round, nops,
                nexar_strerror(rc), nexar_comm_last_error(c));
    }
    for (int k = 0; k < nops; k++) {
      if (op_check(&ops[k], round, k, me, members, msize)) return 1;
      free(ops[k].in);
      free(ops[k].out);
    }
    if (split) NT_OK(nexar_comm_free(&c));
  }
  NT_OK(nexar_finalize(ctx));
  return 0;
}

/* Relayed point-to-point: NMSG messages drawn from the seed (source,
 * destination, tag, 1 to run->maxlen bytes); every rank posts all its receives,
 * then sends its messages in the drawn order, then waits for all. */
#define NMSG 400
static int worker_p2p(int index, void *arg) {
  const run_t *run = arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *world;
  int rank, size;
  NT_OK(nt_join_world(&ctx, &world, &rank, &size));
  (void)index;
  uint64_t s = 0x9e3779b97f4a7c15ull ^ run->seed;
  int src[NMSG], dst[NMSG], len[NMSG];
  for (int i = 0; i < NMSG; i++) {
    src[i] = (int)(next(&s) % (uint64_t)size);
    dst[i] = (int)((src[i] + 1 + next(&s) % (uint64_t)(size - 1)) % size);
    len[i] = 1 + (int)(next(&s) % (uint64_t)run->maxlen);
  }
  nexar_req_t **reqs = calloc(2 * NMSG, sizeof(*reqs));
  uint8_t **bufs = calloc(2 * NMSG, sizeof(*bufs));
  size_t nr = 0;
  for (int i = 0; i < NMSG; i++)
    if (dst[i] == rank) {
      bufs[nr] = malloc((size_t)len[i]);
      NT_OK(nexar_irecv(world, bufs[nr], (size_t)len[i], NEXAR_BYTE, src[i], i,
                        &reqs[nr]));
      nr++;
    }
  size_t nrecv = nr;
  NT_OK(nexar_barrier(world));
  for (int i = 0; i < NMSG; i++)
    if (src[i] == rank) {
      bufs[nr] = malloc((size_t)len[i]);
      nt_fill(bufs[nr], (size_t)len[i], (unsigned)i);
      NT_OK(nexar_isend(world, bufs[nr], (size_t)len[i], NEXAR_BYTE, dst[i], i,
                        &reqs[nr]));
      nr++;
    }
  int rc = nexar_waitall(nr, reqs, NULL);
  NT_CHECKF(rc == NEXAR_OK, "p2p: %s (%s)", nexar_strerror(rc),
            nexar_comm_last_error(world));
  for (size_t k = 0, i = 0; k < nrecv; i++)
    if (dst[i] == rank) {
      NT_CHECKF(
          nt_check_fill(bufs[k], (size_t)len[i], (unsigned)i) == (size_t)len[i],
          "message %zu from %d differs", i, src[i]);
      k++;
    }
  for (size_t k = 0; k < nr; k++) free(bufs[k]);
  free(bufs);
  free(reqs);
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static const char *const configs[] = {
    "NEXAR_TOPOLOGY=hypercube\nNEXAR_MAX_STREAMS=4",
    "NEXAR_TOPOLOGY=kregular:2\nNEXAR_EAGER_BYTES=1024\n"
    "NEXAR_RELAY_WINDOW_BYTES=1024\nNEXAR_SEG_BYTES=4096",
    "NEXAR_TOPOLOGY=hypercube\nNEXAR_MAX_STREAMS=4\nNEXAR_EAGER_BYTES=1024\n"
    "NEXAR_RELAY_WINDOW_BYTES=1024\nNEXAR_SEG_BYTES=4096",
    "NEXAR_TOPOLOGY=kregular:2\nNEXAR_MAX_STREAMS=4\nNEXAR_EAGER_BYTES=1024\n"
    "NEXAR_RELAY_WINDOW_BYTES=1024\nNEXAR_SEG_BYTES=4096",
    "NEXAR_TOPOLOGY=kregular:4\nNEXAR_MAX_STREAMS=4\nNEXAR_EAGER_BYTES=1024\n"
    "NEXAR_RELAY_WINDOW_BYTES=1024\nNEXAR_SEG_BYTES=4096",
    /* Controls: the default windows. */
    "NEXAR_TOPOLOGY=hypercube",
    "NEXAR_TOPOLOGY=kregular:2",
};
#define NCONFIGS (int)(sizeof configs / sizeof configs[0])

/* Relayed point-to-point (the finding's slowdown) at 5 and 8 processes;
 * the same on a full mesh as the control. */
#define P2P_MIN \
  "NEXAR_MAX_STREAMS=4\nNEXAR_EAGER_BYTES=1024\nNEXAR_RELAY_WINDOW_BYTES=1024"
static const struct {
  int np;
  const char *env;
  int maxlen;
} p2p_configs[] = {
    {5, "NEXAR_TOPOLOGY=kregular:2\n" P2P_MIN, 4096},
    {8, "NEXAR_TOPOLOGY=kregular:2\n" P2P_MIN, 4096},
    {8, "NEXAR_TOPOLOGY=full\n" P2P_MIN, 4096},
    /* The end-to-end credit at one largest message (4096 + 128) per pair:
     * origins wait for credit all the time. */
    {8, "NEXAR_TOPOLOGY=kregular:2\n" P2P_MIN "\nNEXAR_RELAY_CREDIT_BYTES=4224",
     4096},
    /* Messages up to 16 times the credit (rendezvous, 1 to 64 KiB). */
    {8, "NEXAR_TOPOLOGY=kregular:2\n" P2P_MIN "\nNEXAR_RELAY_CREDIT_BYTES=4096",
     65536},
};
#define NP2P (int)(sizeof p2p_configs / sizeof p2p_configs[0])

/* Collective steps above the end-to-end credit (the default 1 MiB
 * segments, a 4096-byte credit: steps of up to 3000 * 8 bytes), which wait
 * for a clear-to-send and, on relayed routes, go as credited frames
 * (docs/topology.md section 10, rule 6). Four streams per link: some
 * seeds leave more than four small unexpected messages per origin, which
 * must detach by bytes (rule 3). */
#define COLL_CREDIT                                 \
  "\nNEXAR_MAX_STREAMS=4\nNEXAR_EAGER_BYTES=1024\n" \
  "NEXAR_RELAY_WINDOW_BYTES=1024\nNEXAR_RELAY_CREDIT_BYTES=4096"
static const char *const credit_configs[] = {
    "NEXAR_TOPOLOGY=kregular:2" COLL_CREDIT,
    "NEXAR_TOPOLOGY=hypercube" COLL_CREDIT,
};
#define NCREDIT (int)(sizeof credit_configs / sizeof credit_configs[0])

/* Runs one world; prints "ok|FAIL <what> (...): <settings on one line>". */
static int run_one(const char *what, int np, const char *cfg, int op_ms,
                   nt_worker_fn fn, run_t *run) {
  char env[512], line[512];
  snprintf(env, sizeof env, "%s\nNEXAR_OP_TIMEOUT_MS=%d", cfg, op_ms);
  snprintf(line, sizeof line, "%s", cfg);
  for (char *c = line; *c; c++)
    if (*c == '\n') *c = ' ';
  nt_opts_t o = {.world_size = np, .timeout_ms = 120000, .env = env};
  double t0 = nt_now_ms();
  int rc = nt_run(&o, fn, run);
  printf("%s %s np %d (seed %u, %.1f s): %s\n", rc ? "FAIL" : "ok", what, np,
         run->seed, (nt_now_ms() - t0) / 1000, line);
  fflush(stdout);
  return rc != 0;
}

int main(int argc, char **argv) {
  run_t run = {.seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1,
               .rounds = argc > 2 ? atoi(argv[2]) : 12};
  int only = argc > 3 ? atoi(argv[3]) : -1;
  if (argc > 4 && sscanf(argv[4], "%d:%d:%d:%d", &run.lag_rank, &run.lag_round,
                         &run.lag_op, &run.lag_ms) != 4) {
    fprintf(stderr, "relay_stress: lag %s: expected RANK:ROUND:OP:MS\n",
            argv[4]);
    return 2;
  }
  int fails = 0;
  for (int i = 0; i < NCONFIGS + NP2P + NCREDIT; i++) {
    if (only >= 0 && i != only) continue;
    char what[32];
    snprintf(what, sizeof what, "config %d", i);
    if (i < NCONFIGS)
      fails += run_one(what, NP, configs[i], 20000, worker, &run);
    else if (i >= NCONFIGS + NP2P)
      fails += run_one(what, NP, credit_configs[i - NCONFIGS - NP2P], 20000,
                       worker, &run);
    else if ((run.maxlen = p2p_configs[i - NCONFIGS].maxlen))
      fails += run_one(what, p2p_configs[i - NCONFIGS].np,
                       p2p_configs[i - NCONFIGS].env, 60000, worker_p2p, &run);
  }
  return fails ? 1 : 0;
}
