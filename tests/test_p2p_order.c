/*
 * MPI matching order where a small message may take the receive side's
 * fast path (src/p2p/whole.c: a whole message in one shared-memory record
 * matched straight against the posted receives), over a real 3-rank world
 * (run over shared memory, over QUIC and with a small ring). Every payload
 * is checked bit for bit, every status field exactly:
 *   posted     receives posted before the messages: the first posted one
 *              that matches wins (a wildcard before a specific one), FIFO
 *              per (source, tag)
 *   partial    a message above the eager size is an unexpected, partly
 *              received stream and a small one of the same source and tag
 *              arrived whole after it: wildcard receives posted then get
 *              them in send order, and small messages sent once more
 *              receives are posted (one from each of two sources, an
 *              ANY_SOURCE receive among them) go to those
 *   trunc      a small message longer than its posted receive:
 *              NEXAR_ERR_TRUNCATE, the message's length in the status, the
 *              first bytes stored; the next message is whole
 *   scatter    a small message into a posted three-entry receive list
 *   credit     2,000 small messages into receives posted in advance
 *              (specific and wildcard tags mixed): each stream's credit
 *              comes back, so the sender never runs out of streams
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

#define CREDIT_N 2000
#define BIG (1u << 20) /* above the eager size: a stream that waits */

/* A control token on |ctl| (another communicator: it never matches the
 * receives under test). */
static int token(nexar_comm_t *ctl, int from, int to, int me, int tag) {
  int v = tag;
  if (me == from) NT_OKC(ctl, nexar_send(ctl, &v, 1, NEXAR_INT32, to, tag));
  if (me == to) {
    NT_OKC(ctl, nexar_recv(ctl, &v, 1, NEXAR_INT32, from, tag, NULL));
    NT_CHECKF(v == tag, "token %d carried %d", tag, v);
  }
  return 0;
}

/* Checks receive |i|'s status and payload: |n| bytes of pattern |seed|. */
static int check(const nexar_status_t *st, const uint8_t *b, int src, int tag,
                 size_t n, unsigned seed, const char *what) {
  NT_CHECKF(st->source == src && st->tag == tag && st->bytes == n &&
                st->error == NEXAR_OK,
            "%s: source %d tag %d bytes %zu error %d, want %d %d %zu", what,
            st->source, st->tag, st->bytes, st->error, src, tag, n);
  NT_CHECKF(nt_check_fill(b, n, seed) == n, "%s: payload differs at byte %zu",
            what, nt_check_fill(b, n, seed));
  return 0;
}

static int case_posted(nexar_comm_t *w, nexar_comm_t *ctl, int r) {
  uint8_t out[3][24], in[3][64];
  const int tags[3] = {5, 5, 7};
  const size_t lens[3] = {16, 16, 24};
  if (r == 0) {
    nexar_req_t *q[3];
    nexar_status_t st[3];
    memset(in, 0, sizeof in);
    NT_OKC(w, nexar_irecv(w, in[0], 64, NEXAR_BYTE, NEXAR_ANY_SOURCE,
                          NEXAR_ANY_TAG, &q[0]));
    NT_OKC(w, nexar_irecv(w, in[1], 64, NEXAR_BYTE, 1, 5, &q[1]));
    NT_OKC(w, nexar_irecv(w, in[2], 64, NEXAR_BYTE, 1, NEXAR_ANY_TAG, &q[2]));
    if (token(ctl, 0, 1, r, 1)) return 1;
    NT_OKC(w, nexar_waitall(3, q, st));
    for (int i = 0; i < 3; i++)
      if (check(&st[i], in[i], 1, tags[i], lens[i], 11 + (unsigned)i, "posted"))
        return 1;
  }
  if (r == 1) {
    if (token(ctl, 0, 1, r, 1)) return 1;
    for (int i = 0; i < 3; i++) {
      nt_fill(out[i], lens[i], 11 + (unsigned)i);
      NT_OKC(w, nexar_send(w, out[i], lens[i], NEXAR_BYTE, 0, tags[i]));
    }
  }
  return 0;
}

static int case_partial(nexar_comm_t *w, nexar_comm_t *ctl, int r) {
  uint8_t *big = malloc(BIG);
  uint8_t s[4][8];
  NT_CHECK(big);
  if (r == 1) {
    nexar_req_t *q;
    nt_fill(big, BIG, 21);
    nt_fill(s[0], 8, 22);
    nt_fill(s[1], 8, 23);
    NT_OKC(w, nexar_isend(w, big, BIG, NEXAR_BYTE, 0, 3, &q));
    NT_OKC(w, nexar_send(w, s[0], 8, NEXAR_BYTE, 0, 3));
    if (token(ctl, 1, 0, r, 2) || token(ctl, 0, 1, r, 3)) return 1;
    NT_OKC(w, nexar_send(w, s[1], 8, NEXAR_BYTE, 0, 3));
    NT_OKC(w, nexar_wait(&q, NULL));
  }
  if (r == 2) {
    nt_fill(s[2], 8, 24);
    if (token(ctl, 0, 2, r, 3)) return 1;
    NT_OKC(w, nexar_send(w, s[2], 8, NEXAR_BYTE, 0, 3));
  }
  if (r == 0) {
    nexar_req_t *q[4];
    nexar_status_t st[4];
    memset(big, 0, BIG);
    memset(s, 0, sizeof s);
    /* Both of rank 1's messages have come (the token was sent after
     * them): the big one is unexpected and waits for its window. */
    if (token(ctl, 1, 0, r, 2)) return 1;
    NT_OKC(w, nexar_irecv(w, big, BIG, NEXAR_BYTE, NEXAR_ANY_SOURCE,
                          NEXAR_ANY_TAG, &q[0]));
    NT_OKC(w, nexar_irecv(w, s[0], 8, NEXAR_BYTE, NEXAR_ANY_SOURCE,
                          NEXAR_ANY_TAG, &q[1]));
    NT_OKC(w, nexar_irecv(w, s[1], 8, NEXAR_BYTE, 1, 3, &q[2]));
    NT_OKC(w, nexar_irecv(w, s[2], 8, NEXAR_BYTE, NEXAR_ANY_SOURCE, 3, &q[3]));
    if (token(ctl, 0, 1, r, 3) || token(ctl, 0, 2, r, 3)) return 1;
    NT_OKC(w, nexar_waitall(4, q, st));
    if (check(&st[0], big, 1, 3, BIG, 21, "partial: big") ||
        check(&st[1], s[0], 1, 3, 8, 22, "partial: small after big") ||
        check(&st[2], s[1], 1, 3, 8, 23, "partial: from 1") ||
        check(&st[3], s[2], 2, 3, 8, 24, "partial: ANY_SOURCE from 2"))
      return 1;
  }
  free(big);
  return 0;
}

static int case_trunc(nexar_comm_t *w, nexar_comm_t *ctl, int r) {
  uint8_t out[16], next[4], in[4], in2[4];
  if (r == 0) {
    nexar_req_t *q[2];
    nexar_status_t st[2];
    memset(in, 0, sizeof in);
    memset(in2, 0, sizeof in2);
    NT_OKC(w, nexar_irecv(w, in, 4, NEXAR_BYTE, 1, 9, &q[0]));
    NT_OKC(w, nexar_irecv(w, in2, 4, NEXAR_BYTE, 1, 9, &q[1]));
    if (token(ctl, 0, 1, r, 4)) return 1;
    int rc = nexar_wait(&q[0], &st[0]);
    NT_CHECKF(rc == NEXAR_ERR_TRUNCATE && st[0].error == NEXAR_ERR_TRUNCATE,
              "truncated receive: %s", nexar_err_name(rc));
    NT_CHECKF(st[0].bytes == 16 && st[0].source == 1 && st[0].tag == 9,
              "truncated status: bytes %zu source %d tag %d", st[0].bytes,
              st[0].source, st[0].tag);
    NT_CHECKF(nt_check_fill(in, 4, 31) == 4, "truncated: first bytes differ");
    NT_CHECKF(strstr(nexar_comm_last_error(w), "truncated") != NULL,
              "error text: %s", nexar_comm_last_error(w));
    NT_OKC(w, nexar_wait(&q[1], &st[1]));
    if (check(&st[1], in2, 1, 9, 4, 32, "after truncation")) return 1;
  }
  if (r == 1) {
    nt_fill(out, 16, 31);
    nt_fill(next, 4, 32);
    if (token(ctl, 0, 1, r, 4)) return 1;
    NT_OKC(w, nexar_send(w, out, 16, NEXAR_BYTE, 0, 9));
    NT_OKC(w, nexar_send(w, next, 4, NEXAR_BYTE, 0, 9));
  }
  return 0;
}

static int case_scatter(nexar_comm_t *w, nexar_comm_t *ctl, int r) {
  uint8_t out[40], a[7], b[20], c[13];
  if (r == 0) {
    nexar_iov_t iov[3] = {{a, sizeof a}, {b, sizeof b}, {c, sizeof c}};
    nexar_req_t *q;
    nexar_status_t st;
    NT_OKC(w, nexar_irecvv(w, iov, 3, 1, 11, &q));
    if (token(ctl, 0, 1, r, 5)) return 1;
    NT_OKC(w, nexar_wait(&q, &st));
    memcpy(out, a, 7);
    memcpy(out + 7, b, 20);
    memcpy(out + 27, c, 13);
    if (check(&st, out, 1, 11, 40, 41, "scatter")) return 1;
  }
  if (r == 1) {
    nt_fill(out, 40, 41);
    if (token(ctl, 0, 1, r, 5)) return 1;
    NT_OKC(w, nexar_send(w, out, 40, NEXAR_BYTE, 0, 11));
  }
  return 0;
}

static int case_credit(nexar_comm_t *w, nexar_comm_t *ctl, int r) {
  if (r == 0) {
    uint32_t *in = calloc(CREDIT_N, sizeof *in);
    nexar_req_t **q = calloc(CREDIT_N, sizeof *q);
    nexar_status_t *st = calloc(CREDIT_N, sizeof *st);
    NT_CHECK(in && q && st);
    for (int i = 0; i < CREDIT_N; i++)
      NT_OKC(w, nexar_irecv(w, &in[i], 4, NEXAR_BYTE, 1,
                            i % 3 ? NEXAR_ANY_TAG : i % 5, &q[i]));
    if (token(ctl, 0, 1, r, 6)) return 1;
    NT_OKC(w, nexar_waitall(CREDIT_N, q, st));
    for (int i = 0; i < CREDIT_N; i++)
      NT_CHECKF(in[i] == (uint32_t)i * 2654435761u && st[i].tag == i % 5 &&
                    st[i].bytes == 4,
                "credit: receive %d got %u tag %d", i, in[i], st[i].tag);
    free(in);
    free(q);
    free(st);
  }
  if (r == 1) {
    if (token(ctl, 0, 1, r, 6)) return 1;
    for (int i = 0; i < CREDIT_N; i++) {
      uint32_t v = (uint32_t)i * 2654435761u;
      NT_OKC(w, nexar_send(w, &v, 4, NEXAR_BYTE, 0, i % 5));
    }
  }
  return 0;
}

static int worker(int index, void *arg) {
  nexar_ctx_t *ctx;
  nexar_comm_t *w, *ctl;
  int r, n;
  (void)index;
  (void)arg;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  NT_CHECKF(n == 3, "world of %d", n);
  NT_OKC(w, nexar_comm_dup(w, &ctl));
  if (case_posted(w, ctl, r) || case_partial(w, ctl, r) ||
      case_trunc(w, ctl, r) || case_scatter(w, ctl, r) ||
      case_credit(w, ctl, r))
    return 1;
  NT_OKC(w, nexar_barrier(w));
  NT_OKC(w, nexar_comm_free(&ctl));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  nt_opts_t o = {.world_size = 3, .timeout_ms = 60000};
  int fails = nt_run_case(&o, worker, 0, "order");
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
