/*
 * MPI semantics across the express path of blocking small messages
 * (src/p2p/express.c: nexar_send written at once, nexar_recv waiting on
 * its source's link) and the general path, between ranks of one host, in
 * a real 3-rank world (run over shared memory, with the smallest rings,
 * and over QUIC where the express path is never taken). Every payload is
 * checked bit for bit, every status field exactly:
 *   mixed    rank 1 sends 600 messages of one tag to rank 0, each by one
 *            of: nexar_send small (express), nexar_send above the eager
 *            size (a stream), nexar_isend (waited for later), nexar_ssend;
 *            small ones of 4..24 bytes go as one-line SMALL records, of
 *            25..63 as DATA records, in one ring order that this checks;
 *            rank 2 sends on another tag meanwhile. Rank 0 takes them in
 *            send order with nexar_recv from the source (express),
 *            nexar_recv from ANY_SOURCE or with ANY_TAG, nexar_irecv, and
 *            a receive posted first followed by a blocking one (the posted
 *            one must get the earlier message)
 *   trunc    a small message longer than the blocking receive's buffer:
 *            NEXAR_ERR_TRUNCATE, the message's length in the status, the
 *            first bytes stored; the next message is whole
 *   threads  4 threads of rank 1 send 400 small messages each (tag = the
 *            thread) while 4 threads of rank 0 receive them blocking from
 *            rank 1 (one tag each) and a fifth thread of rank 0 exchanges
 *            with rank 2: order per tag, no message lost or doubled
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nexar.h"

#define MIXED_N 600
#define BIG (1u << 20) /* above the eager size: a stream */
#define THREADS 4
#define PER_THREAD 400

/* Message |i| of |tag|: its index in the first 4 bytes, then a pattern. */
static void fill_msg(uint8_t *b, size_t n, int tag, int i) {
  uint32_t v = (uint32_t)i;
  nt_fill(b, n, (unsigned)(tag * 100003 + i));
  if (n >= 4) memcpy(b, &v, 4);
}

static int check_msg(const nexar_status_t *st, const uint8_t *b, int src,
                     int tag, size_t n, int i, const char *what) {
  uint32_t got = UINT32_MAX;
  if (st->bytes >= 4) memcpy(&got, b, 4);
  NT_CHECKF(st->source == src && st->tag == tag && st->bytes == n &&
                st->error == NEXAR_OK,
            "%s %d: source %d tag %d bytes %zu error %d (message %u), want "
            "%d %d %zu",
            what, i, st->source, st->tag, st->bytes, st->error, got, src, tag,
            n);
  NT_CHECKF(got == (uint32_t)i, "%s: message %u where %d was due", what, got,
            i);
  uint8_t *want = malloc(n ? n : 1);
  NT_CHECK(want);
  fill_msg(want, n, tag, i);
  int same = memcmp(want, b, n) == 0;
  free(want);
  NT_CHECKF(same, "%s %d: payload differs", what, i);
  return 0;
}

/* How rank 1 sends message |i| of the mixed case, and its length. */
static size_t mixed_len(int i) {
  return i % 13 == 5 ? BIG : (size_t)(4 + (i * 7) % 60);
}

static int mixed_send(nexar_comm_t *w, uint8_t *buf) {
  nexar_req_t *q[MIXED_N];
  uint8_t *own[MIXED_N];
  int nq = 0;
  for (int i = 0; i < MIXED_N; i++) {
    size_t n = mixed_len(i);
    if (i % 4 == 1) {
      /* Waited for at the end, from a buffer of its own. */
      NT_CHECK((own[nq] = malloc(n)) != NULL);
      fill_msg(own[nq], n, 3, i);
      NT_OKC(w, nexar_isend(w, own[nq], n, NEXAR_BYTE, 0, 3, &q[nq]));
      nq++;
      continue;
    }
    fill_msg(buf, n, 3, i);
    if (i % 9 == 4)
      NT_OKC(w, nexar_ssend(w, buf, n, NEXAR_BYTE, 0, 3));
    else
      NT_OKC(w, nexar_send(w, buf, n, NEXAR_BYTE, 0, 3));
  }
  NT_OKC(w, nexar_waitall((size_t)nq, q, NULL));
  for (int i = 0; i < nq; i++) free(own[i]);
  return 0;
}

static int case_mixed(nexar_comm_t *w, int r) {
  uint8_t *buf = malloc(BIG), *buf2 = malloc(BIG);
  NT_CHECK(buf && buf2);
  if (r == 1 && mixed_send(w, buf)) return 1;
  if (r == 2)
    for (int i = 0; i < MIXED_N / 3; i++) {
      fill_msg(buf, 8, 4, i);
      NT_OKC(w, nexar_send(w, buf, 8, NEXAR_BYTE, 0, 4));
    }
  if (r == 0) {
    nexar_status_t st, st2;
    int from2 = 0;
    for (int i = 0; i < MIXED_N; i++) {
      size_t n = mixed_len(i);
      switch (i % 5) {
        case 0:
          NT_OKC(w, nexar_recv(w, buf, BIG, NEXAR_BYTE, 1, 3, &st));
          break;
        case 1:
          NT_OKC(w,
                 nexar_recv(w, buf, BIG, NEXAR_BYTE, NEXAR_ANY_SOURCE, 3, &st));
          break;
        case 2:
          NT_OKC(w, nexar_recv(w, buf, BIG, NEXAR_BYTE, 1, NEXAR_ANY_TAG, &st));
          break;
        case 3: {
          nexar_req_t *q;
          NT_OKC(w, nexar_irecv(w, buf, BIG, NEXAR_BYTE, 1, 3, &q));
          NT_OKC(w, nexar_wait(&q, &st));
          break;
        }
        default:
          if (i + 1 < MIXED_N) {
            /* Posted first, so it gets message i; the blocking receive
             * after it gets i + 1. */
            nexar_req_t *q;
            NT_OKC(w, nexar_irecv(w, buf2, BIG, NEXAR_BYTE, 1, 3, &q));
            NT_OKC(w, nexar_recv(w, buf, BIG, NEXAR_BYTE, 1, 3, &st));
            NT_OKC(w, nexar_wait(&q, &st2));
            if (check_msg(&st2, buf2, 1, 3, n, i, "mixed (posted first)"))
              return 1;
            i++;
            n = mixed_len(i);
          } else {
            NT_OKC(w, nexar_recv(w, buf, BIG, NEXAR_BYTE, 1, 3, &st));
          }
      }
      if (check_msg(&st, buf, 1, 3, n, i, "mixed")) return 1;
      if (i % 3 == 0 && from2 < MIXED_N / 3) {
        NT_OKC(w, nexar_recv(w, buf, 64, NEXAR_BYTE, 2, 4, &st));
        if (check_msg(&st, buf, 2, 4, 8, from2, "mixed (rank 2)")) return 1;
        from2++;
      }
    }
    for (; from2 < MIXED_N / 3; from2++) {
      NT_OKC(w, nexar_recv(w, buf, 64, NEXAR_BYTE, 2, 4, &st));
      if (check_msg(&st, buf, 2, 4, 8, from2, "mixed (rank 2)")) return 1;
    }
  }
  free(buf);
  free(buf2);
  return 0;
}

static int case_trunc(nexar_comm_t *w, int r) {
  uint8_t out[64], in[64];
  if (r == 1) {
    fill_msg(out, 64, 8, 0);
    NT_OKC(w, nexar_send(w, out, 64, NEXAR_BYTE, 0, 8));
    fill_msg(out, 40, 8, 1);
    NT_OKC(w, nexar_send(w, out, 40, NEXAR_BYTE, 0, 8));
  }
  if (r == 0) {
    nexar_status_t st;
    memset(in, 0, sizeof in);
    int rc = nexar_recv(w, in, 16, NEXAR_BYTE, 1, 8, &st);
    NT_CHECKF(rc == NEXAR_ERR_TRUNCATE && st.error == NEXAR_ERR_TRUNCATE &&
                  st.bytes == 64 && st.source == 1 && st.tag == 8,
              "trunc: rc %d error %d bytes %zu source %d tag %d", rc, st.error,
              st.bytes, st.source, st.tag);
    uint8_t want[64];
    fill_msg(want, 64, 8, 0);
    NT_CHECKF(memcmp(in, want, 16) == 0 && in[16] == 0,
              "trunc: the first 16 bytes differ or more were stored");
    NT_OKC(w, nexar_recv(w, in, 64, NEXAR_BYTE, 1, 8, &st));
    if (check_msg(&st, in, 1, 8, 40, 1, "trunc (next)")) return 1;
  }
  return 0;
}

typedef struct {
  nexar_comm_t *w;
  int rank, tag, fails;
} thr_t;

static void *thr_main(void *arg) {
  thr_t *t = arg;
  uint8_t b[64];
  nexar_status_t st;
  for (int i = 0; i < PER_THREAD && !t->fails; i++) {
    size_t n = (size_t)(4 + (i + t->tag) % 29);
    if (t->rank == 1) {
      fill_msg(b, n, t->tag, i);
      t->fails += nexar_send(t->w, b, n, NEXAR_BYTE, 0, t->tag) != NEXAR_OK;
    } else if (t->tag == THREADS) {
      /* Rank 0's fifth thread: a ping-pong with rank 2 meanwhile. */
      fill_msg(b, 8, 9, i);
      t->fails += nexar_send(t->w, b, 8, NEXAR_BYTE, 2, 9) != NEXAR_OK;
      t->fails += nexar_recv(t->w, b, 64, NEXAR_BYTE, 2, 9, &st) != NEXAR_OK;
      t->fails += check_msg(&st, b, 2, 9, 8, i, "threads (rank 2)");
    } else {
      memset(b, 0, sizeof b);
      int rc = nexar_recv(t->w, b, sizeof b, NEXAR_BYTE, 1, t->tag, &st);
      t->fails += rc != NEXAR_OK;
      t->fails +=
          rc == NEXAR_OK && check_msg(&st, b, 1, t->tag, n, i, "threads");
    }
  }
  return NULL;
}

static int case_threads(nexar_comm_t *w, int r) {
  uint8_t b[64];
  if (r == 2)
    for (int i = 0; i < PER_THREAD; i++) {
      nexar_status_t st;
      NT_OKC(w, nexar_recv(w, b, 64, NEXAR_BYTE, 0, 9, &st));
      NT_OKC(w, nexar_send(w, b, st.bytes, NEXAR_BYTE, 0, 9));
    }
  if (r == 2) return 0;
  int n = r == 0 ? THREADS + 1 : THREADS;
  pthread_t th[THREADS + 1];
  thr_t t[THREADS + 1];
  for (int i = 0; i < n; i++) {
    t[i] = (thr_t){.w = w, .rank = r, .tag = i};
    NT_CHECK(pthread_create(&th[i], NULL, thr_main, &t[i]) == 0);
  }
  int fails = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    fails += t[i].fails;
  }
  NT_CHECKF(fails == 0, "threads: %d failure(s)", fails);
  return 0;
}

static int worker(int index, void *arg) {
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  (void)index;
  (void)arg;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  NT_CHECKF(n == 3, "world of %d", n);
  if (case_mixed(w, r) || case_trunc(w, r) || case_threads(w, r)) return 1;
  NT_OKC(w, nexar_barrier(w));
  NT_OK(nexar_finalize(ctx));
  return 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  nt_opts_t o = {.world_size = 3, .timeout_ms = 60000};
  int fails = nt_run_case(&o, worker, 0, "express");
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
