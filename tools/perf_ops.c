/*
 * nexar-perf: the table of benchmarked operations. Each entry says how the
 * size maps to the call's arguments (layout), its bus-bandwidth factor, how
 * to run one iteration and what each output element must hold.
 *
 * Point-to-point ops follow the OSU micro-benchmarks: latency is a
 * ping-pong (osu_latency, one-way time = half the round trip), bw streams a
 * window of non-blocking sends and then waits for a small ack (osu_bw), and
 * bibw does the same in both directions at once (osu_bibw). Ranks other
 * than 0 and 1 sit these out.
 */
#include <string.h>

#include "perf.h"

#define TAG_DATA 1
#define TAG_ACK 2

/* ---- Bus-bandwidth factors (nccl-tests doc/PERFORMANCE.md). */

static double bw_allreduce(int n) {
  return 2.0 * (n - 1) / n;
}
static double bw_nminus1(int n) {
  return (double)(n - 1) / n;
}
static double bw_one(int n) {
  (void)n;
  return 1.0;
}
static double bw_none(int n) {
  (void)n;
  return 0.0;
}

/* ---- Expected outputs. Copying ops move perf_input(p, 0, ...) values,
 * reducing ops combine perf_input(p, 1, ...) values. */

/* Element |i| of an output made of n blocks of p->count elements, block b
 * coming from rank b: the value rank b had at its element |base| + (i mod
 * count). */
static int64_t from_block(const perf_t *p, size_t i, size_t base) {
  size_t b = i / p->count, e = i % p->count;
  return perf_input(p, 0, (int)b, base + e);
}

static int64_t expect_reduced(const perf_t *p, size_t i) {
  return perf_reduced(p, p->n - 1, i);
}
static int64_t expect_reduce_scatter(const perf_t *p, size_t i) {
  return perf_reduced(p, p->n - 1, (size_t)p->rank * p->count + i);
}
static int64_t expect_scan(const perf_t *p, size_t i) {
  return perf_reduced(p, p->rank, i);
}
static int64_t expect_root(const perf_t *p, size_t i) {
  return perf_input(p, 0, p->root, i);
}
static int64_t expect_gathered(const perf_t *p, size_t i) {
  return from_block(p, i, 0);
}
static int64_t expect_scattered(const perf_t *p, size_t i) {
  return perf_input(p, 0, p->root, (size_t)p->rank * p->count + i);
}
static int64_t expect_alltoall(const perf_t *p, size_t i) {
  return from_block(p, i, (size_t)p->rank * p->count);
}
static int64_t expect_peer(const perf_t *p, size_t i) {
  return perf_input(p, 0, p->peer, i);
}

/* ---- Collectives. */

#define DT(p) ((p)->type->dtype)

static int run_allreduce(perf_t *p) {
  PERF_CALL(p, "nexar_allreduce",
            nexar_allreduce(p->comm, p->sendbuf, p->recvbuf, p->count, DT(p),
                            p->redop));
  return 0;
}

static int post_iallreduce(perf_t *p, nexar_req_t **req) {
  PERF_CALL(p, "nexar_iallreduce",
            nexar_iallreduce(p->comm, p->sendbuf, p->recvbuf, p->count, DT(p),
                             p->redop, req));
  return 0;
}

static int run_iallreduce(perf_t *p) {
  nexar_req_t *req = NULL;
  int rc = post_iallreduce(p, &req);
  if (rc) return rc;
  PERF_CALL(p, "nexar_wait (iallreduce)", nexar_wait(&req, NULL));
  return 0;
}

/* Compressed allreduce: a compressor per count, made before the first
 * iteration of a size (its residual then carries over the iterations, as
 * in training). Its result equals the plain sum only when every element
 * is sent (ratio 1: the check then runs); otherwise nothing is checked. */
static int prepare_compressed(perf_t *p, nexar_compress_kind_t kind) {
  if (p->cp && p->cp_count != p->count) nexar_compressor_free(&p->cp);
  if (!p->cp && p->count)
    PERF_CALL(p, "nexar_compressor_create",
              nexar_compressor_create(p->comm, kind, DT(p), p->count, 0,
                                      p->ratio, 1, &p->cp));
  p->cp_count = p->count;
  if (p->ratio < 1.0) p->out_elems = 0;
  return 0;
}
static void prepare_topk(perf_t *p) {
  prepare_compressed(p, NEXAR_COMPRESS_TOPK);
}
static void prepare_randk(perf_t *p) {
  prepare_compressed(p, NEXAR_COMPRESS_RANDK);
}

static int run_compressed(perf_t *p) {
  if (!p->count) return 0;
  if (!p->cp) return 1; /* prepare failed (printed) */
  PERF_CALL(p, "nexar_allreduce_compressed",
            nexar_allreduce_compressed(p->comm, p->sendbuf, p->recvbuf,
                                       p->count, DT(p), p->redop, p->cp));
  return 0;
}

/* bcast works in place on recvbuf; the root's data is its input. */
static void prepare_bcast(perf_t *p) {
  if (p->rank == p->root)
    memcpy(p->recvbuf, p->sendbuf, p->count * p->type->size);
}

static int run_bcast(perf_t *p) {
  PERF_CALL(p, "nexar_bcast",
            nexar_bcast(p->comm, p->recvbuf, p->count, DT(p), p->root));
  return 0;
}

static int run_reduce(perf_t *p) {
  PERF_CALL(p, "nexar_reduce",
            nexar_reduce(p->comm, p->sendbuf, p->recvbuf, p->count, DT(p),
                         p->redop, p->root));
  return 0;
}

static int run_allgather(perf_t *p) {
  PERF_CALL(p, "nexar_allgather",
            nexar_allgather(p->comm, p->sendbuf, p->recvbuf, p->count, DT(p)));
  return 0;
}

static int run_reduce_scatter(perf_t *p) {
  PERF_CALL(p, "nexar_reduce_scatter_block",
            nexar_reduce_scatter_block(p->comm, p->sendbuf, p->recvbuf,
                                       p->count, DT(p), p->redop));
  return 0;
}

static int run_alltoall(perf_t *p) {
  PERF_CALL(p, "nexar_alltoall",
            nexar_alltoall(p->comm, p->sendbuf, p->recvbuf, p->count, DT(p)));
  return 0;
}

static int run_gather(perf_t *p) {
  PERF_CALL(
      p, "nexar_gather",
      nexar_gather(p->comm, p->sendbuf, p->recvbuf, p->count, DT(p), p->root));
  return 0;
}

static int run_scatter(perf_t *p) {
  PERF_CALL(
      p, "nexar_scatter",
      nexar_scatter(p->comm, p->sendbuf, p->recvbuf, p->count, DT(p), p->root));
  return 0;
}

static int run_scan(perf_t *p) {
  PERF_CALL(
      p, "nexar_scan",
      nexar_scan(p->comm, p->sendbuf, p->recvbuf, p->count, DT(p), p->redop));
  return 0;
}

static int run_barrier(perf_t *p) {
  PERF_CALL(p, "nexar_barrier", nexar_barrier(p->comm));
  return 0;
}

/* ---- Point to point. */

/* osu_latency: rank 0 sends and waits for the reply; rank 1 echoes. */
static int run_latency(perf_t *p) {
  if (!p->active) return 0;
  if (p->rank == 0) {
    PERF_CALL(p, "nexar_send",
              nexar_send(p->comm, p->sendbuf, p->count, DT(p), 1, TAG_DATA));
    PERF_CALL(
        p, "nexar_recv",
        nexar_recv(p->comm, p->recvbuf, p->count, DT(p), 1, TAG_DATA, NULL));
  } else {
    PERF_CALL(
        p, "nexar_recv",
        nexar_recv(p->comm, p->recvbuf, p->count, DT(p), 0, TAG_DATA, NULL));
    PERF_CALL(p, "nexar_send",
              nexar_send(p->comm, p->sendbuf, p->count, DT(p), 0, TAG_DATA));
  }
  return 0;
}

/* osu_bw: rank 0 posts a window of non-blocking sends, waits for them and
 * for a 1-byte ack that rank 1 sends once all its receives are done. All
 * receives of a window share one buffer, as in OSU. */
static int run_bw(perf_t *p) {
  if (!p->active) return 0;
  unsigned char ack = 0;
  size_t w = (size_t)p->window;
  if (p->rank == 0) {
    for (size_t j = 0; j < w; j++)
      PERF_CALL(p, "nexar_isend",
                nexar_isend(p->comm, p->sendbuf, p->count, DT(p), 1, TAG_DATA,
                            &p->reqs[j]));
    PERF_CALL(p, "nexar_waitall (sends)", nexar_waitall(w, p->reqs, NULL));
    PERF_CALL(p, "nexar_recv (ack)",
              nexar_recv(p->comm, &ack, 1, NEXAR_UINT8, 1, TAG_ACK, NULL));
  } else {
    for (size_t j = 0; j < w; j++)
      PERF_CALL(p, "nexar_irecv",
                nexar_irecv(p->comm, p->recvbuf, p->count, DT(p), 0, TAG_DATA,
                            &p->reqs[j]));
    PERF_CALL(p, "nexar_waitall (receives)", nexar_waitall(w, p->reqs, NULL));
    PERF_CALL(p, "nexar_send (ack)",
              nexar_send(p->comm, &ack, 1, NEXAR_UINT8, 0, TAG_ACK));
  }
  return 0;
}

/* osu_bibw: both ranks post a window of receives and a window of sends
 * and wait for all of them. */
static int run_bibw(perf_t *p) {
  if (!p->active) return 0;
  size_t w = (size_t)p->window;
  for (size_t j = 0; j < w; j++)
    PERF_CALL(p, "nexar_irecv",
              nexar_irecv(p->comm, p->recvbuf, p->count, DT(p), p->peer,
                          TAG_DATA, &p->reqs[j]));
  for (size_t j = 0; j < w; j++)
    PERF_CALL(p, "nexar_isend",
              nexar_isend(p->comm, p->sendbuf, p->count, DT(p), p->peer,
                          TAG_DATA, &p->reqs[w + j]));
  PERF_CALL(p, "nexar_waitall", nexar_waitall(2 * w, p->reqs, NULL));
  return 0;
}

/* allreduce_multi: the buffer as MULTI_TENSORS tensors of mixed sizes
 * (tensor t a share of (t % 8) + 1), reduced in place in recvbuf by one
 * persistent nexar_multi object per size, every tensor marked ready at
 * once. Each iteration first copies the input from sendbuf (timed too: an
 * in-place input must be restored). */
#define MULTI_TENSORS 64
static nexar_multi_t *multi;
static size_t multi_count;
static void *multi_buf;

static void prepare_multi(perf_t *p) {
  size_t es = p->type->size, w = 0, at = 0;
  if (multi && multi_count == p->count && multi_buf == p->recvbuf) return;
  nexar_multi_free(&multi);
  nexar_tensor_t t[MULTI_TENSORS];
  for (int i = 0; i < MULTI_TENSORS; i++) w += (size_t)(i % 8) + 1;
  for (int i = 0; i < MULTI_TENSORS; i++) {
    size_t c = i == MULTI_TENSORS - 1 ? p->count - at
                                      : p->count * ((size_t)(i % 8) + 1) / w;
    t[i] = (nexar_tensor_t){(char *)p->recvbuf + at * es, c, DT(p)};
    at += c;
  }
  int rc = nexar_multi_create(p->comm, t, MULTI_TENSORS, p->redop, &multi);
  if (rc != NEXAR_OK) perf_fail(p, "nexar_multi_create", rc);
  multi_count = p->count;
  multi_buf = p->recvbuf;
}

static int run_multi(perf_t *p) {
  if (!multi) return 1; /* prepare failed (printed) */
  memcpy(p->recvbuf, p->sendbuf, p->count * p->type->size);
  for (size_t i = 0; i < MULTI_TENSORS; i++)
    PERF_CALL(p, "nexar_multi_ready", nexar_multi_ready(multi, i));
  PERF_CALL(p, "nexar_multi_wait", nexar_multi_wait(multi));
  return 0;
}

/* ---- The table. */

#define P2P PERF_F_P2P
#define REDOP PERF_F_REDOP
#define ROOT PERF_F_ROOT

static const perf_op_t ops[] = {
    {"latency", PERF_FLAT, P2P | PERF_F_HALF_RTT, bw_one, NULL, run_latency,
     NULL, expect_peer},
    {"bw", PERF_FLAT, P2P | PERF_F_WINDOWED | PERF_F_ONE_WAY, bw_one, NULL,
     run_bw, NULL, expect_peer},
    {"bibw", PERF_FLAT, P2P | PERF_F_WINDOWED | PERF_F_BOTH_WAYS, bw_one, NULL,
     run_bibw, NULL, expect_peer},
    {"allreduce", PERF_FLAT, REDOP, bw_allreduce, NULL, run_allreduce, NULL,
     expect_reduced},
    {"iallreduce", PERF_FLAT, REDOP, bw_allreduce, NULL, run_iallreduce,
     post_iallreduce, expect_reduced},
    {"allreduce_topk", PERF_FLAT, REDOP | PERF_F_COMPRESS, bw_allreduce,
     prepare_topk, run_compressed, NULL, expect_reduced},
    {"allreduce_randk", PERF_FLAT, REDOP | PERF_F_COMPRESS, bw_allreduce,
     prepare_randk, run_compressed, NULL, expect_reduced},
    {"bcast", PERF_FLAT, ROOT, bw_one, prepare_bcast, run_bcast, NULL,
     expect_root},
    {"reduce", PERF_FLAT, REDOP | ROOT | PERF_F_ROOT_OUT, bw_one, NULL,
     run_reduce, NULL, expect_reduced},
    {"allgather", PERF_GATHER, 0, bw_nminus1, NULL, run_allgather, NULL,
     expect_gathered},
    {"reduce_scatter", PERF_SCATTER, REDOP, bw_nminus1, NULL,
     run_reduce_scatter, NULL, expect_reduce_scatter},
    {"alltoall", PERF_ALL2ALL, 0, bw_nminus1, NULL, run_alltoall, NULL,
     expect_alltoall},
    {"gather", PERF_GATHER, ROOT | PERF_F_ROOT_OUT, bw_nminus1, NULL,
     run_gather, NULL, expect_gathered},
    {"scatter", PERF_SCATTER, ROOT, bw_nminus1, NULL, run_scatter, NULL,
     expect_scattered},
    {"scan", PERF_FLAT, REDOP, bw_one, NULL, run_scan, NULL, expect_scan},
    {"allreduce_multi", PERF_FLAT, REDOP, bw_allreduce, prepare_multi,
     run_multi, NULL, expect_reduced},
    {"barrier", PERF_NONE, 0, bw_none, NULL, run_barrier, NULL, NULL},
};

const perf_op_t *perf_op_find(const char *name) {
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(name, ops[i].name)) return &ops[i];
  return NULL;
}

void perf_layout(perf_t *p, const perf_op_t *op, size_t bytes) {
  size_t es = p->type->size, c = bytes / es, n = (size_t)p->n;
  switch (op->layout) {
    case PERF_FLAT:
      p->count = p->send_elems = p->recv_elems = c;
      break;
    case PERF_GATHER:
      p->count = p->send_elems = c / n;
      p->recv_elems = p->count * n;
      break;
    case PERF_SCATTER:
      p->count = p->recv_elems = c / n;
      p->send_elems = p->count * n;
      break;
    case PERF_ALL2ALL:
      p->count = c / n;
      p->send_elems = p->recv_elems = p->count * n;
      break;
    case PERF_NONE:
      p->count = p->send_elems = p->recv_elems = 0;
      break;
  }
  size_t big = p->send_elems > p->recv_elems ? p->send_elems : p->recv_elems;
  p->size = big * es;
  p->out_elems = p->recv_elems;
  p->active = 1;
  p->peer = -1;
  if ((op->flags & PERF_F_ROOT_OUT) && p->rank != p->root) p->out_elems = 0;
  if (op->flags & PERF_F_P2P) {
    p->active = p->rank < 2;
    p->peer = p->rank < 2 ? 1 - p->rank : -1;
    if (!p->active || ((op->flags & PERF_F_ONE_WAY) && p->rank == 0))
      p->out_elems = 0;
  }
}
