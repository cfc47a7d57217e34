/*
 * The MPI-style additions to point-to-point and communicators, over real
 * multi-process clusters (run once per transport: NEXAR_TRANSPORT=shm and
 * quic):
 *   probe        iprobe before and after arrival, the message left queued,
 *                probe with NEXAR_ANY_SOURCE / NEXAR_ANY_TAG then a receive
 *                of exactly the probed size, MPI matching order (a pending
 *                receive takes the first message, the probe reports the
 *                next), bad arguments
 *   ssend        a synchronous send stays unfinished until the receiver
 *                posts its receive (eager, large and empty messages, to
 *                itself, with the receive posted first), then finishes
 *   ssend_fail   the receiver is SIGKILLed: ssend fails with the failure,
 *                long before the op timeout
 *   timeout      a synchronous send, a probe and a waitany nobody answers
 *                end with NEXAR_ERR_TIMEOUT at the op timeout
 *   cancel       a receive not yet matched is cancelled (the next message
 *                goes to the next receive); matched receives and sends are
 *                not
 *   waitany      the index of the request that finished, NULL entries, all
 *                NULL, bad arguments
 *   group        nexar_comm_create_group of a subset listed out of order
 *                (ranks numbered by the list), bit-exact collectives on it,
 *                a second group with another tag created at the same time
 *                by the non-members, a wildcard receive on the parent that
 *                the creation's messages must not match, argument errors
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "nexar.h"

enum {
  C_PROBE,
  C_SSEND,
  C_SSEND_FAIL,
  C_TIMEOUT,
  C_CANCEL,
  C_WAITANY,
  C_GROUP,
  C_COUNT
};

static int same_pat(const uint8_t *b, size_t n, unsigned seed) {
  return nt_check_fill(b, n, seed) == n;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- probe ---- */

/* Polls nexar_iprobe until it reports a message (at most 10 s). */
static int iprobe_until(nexar_comm_t *w, int src, int tag, nexar_status_t *st) {
  int flag = 0;
  double end = nt_now_ms() + 10000;
  while (!flag && nt_now_ms() < end) {
    NT_OKC(w, nexar_iprobe(w, src, tag, &flag, st));
    if (!flag) sleep_ms(1);
  }
  NT_CHECKF(flag, "iprobe(%d, %d) saw nothing in 10 s", src, tag);
  return 0;
}

static int case_probe(nexar_comm_t *w, int r, int n) {
  nexar_status_t st;
  int flag = -1;
  uint8_t buf[4096];
  /* Before arrival: nothing; rank 0 sends only after the barrier. */
  if (r == 1) {
    NT_OKC(w, nexar_iprobe(w, 0, 5, &flag, &st));
    NT_CHECKF(flag == 0, "iprobe before any send: flag %d", flag);
    NT_OKC(w, nexar_iprobe(w, NEXAR_ANY_SOURCE, NEXAR_ANY_TAG, &flag, NULL));
    NT_CHECKF(flag == 0, "wildcard iprobe before any send: flag %d", flag);
  }
  NT_OKC(w, nexar_barrier(w));
  if (r == 0) {
    nt_fill(buf, 40, 1);
    NT_OKC(w, nexar_send(w, buf, 40, NEXAR_BYTE, 1, 5));
  }
  if (r == 1) {
    memset(&st, 0, sizeof st);
    if (iprobe_until(w, 0, 5, &st)) return 1;
    NT_CHECKF(st.source == 0 && st.tag == 5 && st.bytes == 40,
              "iprobe status src %d tag %d bytes %zu", st.source, st.tag,
              st.bytes);
    /* Still queued: seen again, by a wildcard iprobe too, and not by one
     * for another tag. */
    NT_OKC(w, nexar_iprobe(w, NEXAR_ANY_SOURCE, NEXAR_ANY_TAG, &flag, &st));
    NT_CHECKF(flag == 1 && st.bytes == 40, "second iprobe flag %d bytes %zu",
              flag, st.bytes);
    NT_OKC(w, nexar_iprobe(w, 0, 6, &flag, NULL));
    NT_CHECKF(flag == 0, "iprobe of tag 6 flag %d", flag);
    memset(buf, 0, sizeof buf);
    NT_OKC(w, nexar_recv(w, buf, st.bytes, NEXAR_BYTE, 0, 5, &st));
    NT_CHECKF(st.bytes == 40 && same_pat(buf, 40, 1), "received %zu bytes",
              st.bytes);
    NT_OKC(w, nexar_iprobe(w, 0, 5, &flag, NULL));
    NT_CHECKF(flag == 0, "iprobe after the receive: flag %d", flag);
  }
  NT_OKC(w, nexar_barrier(w));

  /* Wildcards: every other rank sends rank 0 a message of its own size and
   * tag; rank 0 probes, then receives exactly the probed size. */
  if (r != 0) {
    size_t len = 100u * (size_t)r + 7u;
    nt_fill(buf, len, (unsigned)r);
    NT_OKC(w, nexar_send(w, buf, len, NEXAR_BYTE, 0, 30 + r));
  } else {
    int seen[8] = {0};
    for (int k = 1; k < n; k++) {
      NT_OKC(w, nexar_probe(w, NEXAR_ANY_SOURCE, NEXAR_ANY_TAG, &st));
      int s = st.source;
      NT_CHECKF(s >= 1 && s < n && !seen[s], "probed source %d", s);
      NT_CHECKF(st.tag == 30 + s && st.bytes == 100u * (size_t)s + 7u,
                "probed tag %d bytes %zu from %d", st.tag, st.bytes, s);
      seen[s] = 1;
      uint8_t *m = malloc(st.bytes);
      NT_CHECK(m);
      nexar_status_t rs;
      int rc = nexar_recv(w, m, st.bytes, NEXAR_BYTE, s, st.tag, &rs);
      int ok = rc == NEXAR_OK && rs.bytes == st.bytes && rs.source == s &&
               same_pat(m, rs.bytes, (unsigned)s);
      free(m);
      NT_CHECKF(ok, "recv of the probed message from %d: %s", s,
                nexar_err_name(rc));
    }
  }
  NT_OKC(w, nexar_barrier(w));

  /* Matching order: a receive posted before the probe takes the first
   * message; the probe reports the second, which the next receive gets. */
  if (r == 0) {
    nexar_req_t *first;
    uint8_t a[64] = {0};
    NT_OKC(w, nexar_irecv(w, a, sizeof a, NEXAR_BYTE, 1, 9, &first));
    NT_OKC(w, nexar_barrier(w));
    NT_OKC(w, nexar_probe(w, 1, 9, &st));
    NT_CHECKF(st.bytes == 20 && st.source == 1 && st.tag == 9,
              "probe after a pending receive: bytes %zu", st.bytes);
    NT_OKC(w, nexar_wait(&first, &st));
    NT_CHECKF(st.bytes == 10 && same_pat(a, 10, 10), "first message %zu B",
              st.bytes);
    NT_OKC(w, nexar_recv(w, buf, sizeof buf, NEXAR_BYTE, 1, 9, &st));
    NT_CHECKF(st.bytes == 20 && same_pat(buf, 20, 20), "second message %zu B",
              st.bytes);
  } else {
    NT_OKC(w, nexar_barrier(w));
    if (r == 1) {
      uint8_t m1[10], m2[20];
      nt_fill(m1, sizeof m1, 10);
      nt_fill(m2, sizeof m2, 20);
      NT_OKC(w, nexar_send(w, m1, sizeof m1, NEXAR_BYTE, 0, 9));
      NT_OKC(w, nexar_send(w, m2, sizeof m2, NEXAR_BYTE, 0, 9));
    }
  }

  /* Bad arguments: refused at once. */
  NT_CHECK(nexar_iprobe(w, n, 0, &flag, NULL) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_iprobe(w, 0, -5, &flag, NULL) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_iprobe(w, 0, 0, NULL, NULL) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_iprobe(NULL, 0, 0, &flag, NULL) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_probe(w, -7, 0, &st) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_probe(NULL, 0, 0, &st) == NEXAR_ERR_INVALID_ARG);
  NT_OKC(w, nexar_barrier(w));
  return 0;
}

/* ---- ssend ---- */

/* Rank |from| issends |len| bytes to rank |to| with tag 1; |to| posts its
 * receive only after rank |from|'s "go" (tag 2), which |from| sends after
 * seeing nexar_test report the ssend unfinished for 300 ms. */
static int ssend_gated(nexar_comm_t *w, int r, int from, int to, size_t len) {
  uint8_t *b = malloc(len ? len : 1);
  NT_CHECK(b);
  int go = 1;
  if (r == from) {
    nt_fill(b, len, (unsigned)len);
    nexar_req_t *s;
    int done = 0;
    NT_OKC(w, nexar_issend(w, b, len, NEXAR_BYTE, to, 1, &s));
    double end = nt_now_ms() + 300;
    while (nt_now_ms() < end) {
      NT_OKC(w, nexar_test(&s, &done, NULL));
      NT_CHECKF(!done,
                "issend of %zu B to %d finished before the receiver "
                "posted its receive",
                len, to);
      sleep_ms(5);
    }
    if (to != from) NT_OKC(w, nexar_send(w, &go, 1, NEXAR_INT32, to, 2));
    if (to == from) { /* to itself: the receive is posted here */
      uint8_t *got = malloc(len ? len : 1);
      nexar_status_t st;
      NT_CHECK(got);
      NT_OKC(w, nexar_recv(w, got, len, NEXAR_BYTE, from, 1, &st));
      NT_CHECKF(st.bytes == len && same_pat(got, len, (unsigned)len),
                "self ssend of %zu B: got %zu", len, st.bytes);
      free(got);
    }
    nexar_status_t st;
    NT_OKC(w, nexar_wait(&s, &st));
    NT_CHECKF(st.bytes == len, "issend status bytes %zu of %zu", st.bytes, len);
  } else if (r == to) {
    nexar_status_t st;
    NT_OKC(w, nexar_recv(w, &go, 1, NEXAR_INT32, from, 2, NULL));
    memset(b, 0, len ? len : 1);
    NT_OKC(w, nexar_recv(w, b, len, NEXAR_BYTE, NEXAR_ANY_SOURCE, 1, &st));
    NT_CHECKF(
        st.bytes == len && st.source == from && same_pat(b, len, (unsigned)len),
        "received %zu of %zu B from %d", st.bytes, len, st.source);
  }
  free(b);
  return 0;
}

static int case_ssend(nexar_comm_t *w, int r, int n) {
  int to = n > 1 ? 1 : 0;
  /* Eager size, above the eager limit (sent from the buffer), empty. */
  const size_t lens[] = {16, 4u << 20, 0};
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    if (ssend_gated(w, r, 0, to, lens[k])) return 1;
    NT_OKC(w, nexar_barrier(w));
  }
  /* Between two other ranks (relayed, and acknowledged back through the
   * relay, under NEXAR_TOPOLOGY=hypercube at world 3). */
  if (n >= 3) {
    if (ssend_gated(w, r, n - 1, 1, 4096)) return 1;
    NT_OKC(w, nexar_barrier(w));
  }
  /* The receiver sleeps 300 ms before it posts: the blocking ssend returns
   * only after the receive was posted. */
  int v = 42, got = 0;
  NT_OKC(w, nexar_barrier(w));
  if (n > 1 && r == 0) {
    NT_OKC(w, nexar_ssend(w, &v, 1, NEXAR_INT32, 1, 3));
    double back = nt_now_ms(), posted = 0;
    /* The workers share a host, hence CLOCK_MONOTONIC. */
    NT_OKC(w, nexar_recv(w, &posted, 1, NEXAR_FLOAT64, 1, 5, NULL));
    NT_CHECKF(back >= posted,
              "ssend returned %.1f ms before the receiver posted its receive",
              posted - back);
  } else if (n > 1 && r == 1) {
    sleep_ms(300);
    double posted = nt_now_ms();
    NT_OKC(w, nexar_recv(w, &got, 1, NEXAR_INT32, 0, 3, NULL));
    NT_CHECKF(got == 42, "got %d", got);
    NT_OKC(w, nexar_send(w, &posted, 1, NEXAR_FLOAT64, 0, 5));
  }
  /* A receive posted first: the ssend finishes as soon as it arrives. */
  nexar_req_t *rq = NULL;
  if (r == to) NT_OKC(w, nexar_irecv(w, &got, 1, NEXAR_INT32, 0, 4, &rq));
  NT_OKC(w, nexar_barrier(w));
  if (r == 0) NT_OKC(w, nexar_ssend(w, &v, 1, NEXAR_INT32, to, 4));
  if (r == to) {
    NT_OKC(w, nexar_wait(&rq, NULL));
    NT_CHECKF(got == 42, "got %d", got);
  }
  /* Bad arguments. */
  NT_CHECK(nexar_ssend(w, &v, 1, NEXAR_INT32, n, 0) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_ssend(w, &v, 1, NEXAR_INT32, 0, -1) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_issend(w, &v, 1, NEXAR_INT32, NEXAR_ANY_SOURCE, 0, &rq) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_issend(w, &v, 1, NEXAR_INT32, 0, 0, NULL) ==
           NEXAR_ERR_INVALID_ARG);
  NT_OKC(w, nexar_barrier(w));
  return 0;
}

/* Rank 1 is SIGKILLed while rank 0 waits in an ssend nobody receives. */
static int case_ssend_fail(nexar_comm_t *w, int r, int n) {
  (void)n;
  NT_OKC(w, nexar_barrier(w));
  if (r == 1) {
    sleep_ms(200);
    raise(SIGKILL);
  }
  int v = 7;
  double t0 = nt_now_ms();
  int rc = nexar_ssend(w, &v, 1, NEXAR_INT32, 1, 1);
  double dt = nt_now_ms() - t0;
  NT_CHECKF(rc == NEXAR_ERR_PEER_FAILED || rc == NEXAR_ERR_REVOKED,
            "ssend to a killed rank: %s (%s)", nexar_err_name(rc),
            nexar_comm_last_error(w));
  /* The op timeout is 30 s: the failure ended it, not the deadline. */
  NT_CHECKF(dt < 20000, "ssend failed after %.0f ms", dt);
  return 0;
}

/* NEXAR_OP_TIMEOUT_MS=1000: what nobody answers ends at the deadline. */
static int case_timeout(nexar_comm_t *w, int r, int n) {
  (void)n;
  int v = 1;
  nexar_status_t st;
  if (r == 0) {
    int rc = nexar_ssend(w, &v, 1, NEXAR_INT32, 1, 77);
    NT_CHECKF(rc == NEXAR_ERR_TIMEOUT, "unmatched ssend: %s",
              nexar_err_name(rc));
    rc = nexar_probe(w, 1, 78, &st);
    NT_CHECKF(rc == NEXAR_ERR_TIMEOUT, "probe of nothing: %s",
              nexar_err_name(rc));
    nexar_req_t *rq[2] = {NULL, NULL};
    size_t idx = 0;
    NT_OKC(w, nexar_irecv(w, &v, 1, NEXAR_INT32, 1, 79, &rq[1]));
    rc = nexar_waitany(2, rq, &idx, &st);
    NT_CHECKF(rc == NEXAR_ERR_TIMEOUT && idx == 1 && !rq[1],
              "waitany of nothing: %s index %zu", nexar_err_name(rc), idx);
    NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT32, 1, 90));
  } else if (r == 1) {
    /* Every blocking call would time out here too: poll for the end. */
    if (iprobe_until(w, 0, 90, &st)) return 1;
    NT_OKC(w, nexar_recv(w, &v, 1, NEXAR_INT32, 0, 90, NULL));
  }
  return 0;
}

/* ---- cancel ---- */

static int case_cancel(nexar_comm_t *w, int r, int n) {
  (void)n;
  nexar_status_t st;
  int a = -1, b = -1, v;
  if (r == 1) {
    nexar_req_t *ra, *rb;
    NT_OKC(w, nexar_irecv(w, &a, 1, NEXAR_INT32, 0, 4, &ra));
    NT_OKC(w, nexar_cancel(ra));
    NT_OKC(w, nexar_cancel(ra)); /* twice: no more effect */
    int rc = nexar_wait(&ra, &st);
    NT_CHECKF(rc == NEXAR_ERR_CANCELLED && st.error == NEXAR_ERR_CANCELLED,
              "cancelled receive: %s / %s", nexar_err_name(rc),
              nexar_err_name(st.error));
    NT_CHECKF(a == -1 && !ra, "buffer %d", a);
    /* A wildcard receive too. */
    NT_OKC(w, nexar_irecv(w, &a, 1, NEXAR_INT32, NEXAR_ANY_SOURCE,
                          NEXAR_ANY_TAG, &ra));
    NT_OKC(w, nexar_cancel(ra));
    int done = 0;
    rc = nexar_test(&ra, &done, &st);
    NT_CHECKF(done && rc == NEXAR_ERR_CANCELLED, "test: done %d %s", done,
              nexar_err_name(rc));
    /* The next receive gets the message. */
    NT_OKC(w, nexar_irecv(w, &b, 1, NEXAR_INT32, 0, 4, &rb));
    NT_OKC(w, nexar_barrier(w));
    NT_OKC(w, nexar_wait(&rb, &st));
    NT_CHECKF(b == 99 && a == -1, "next receive got %d (cancelled %d)", b, a);
    /* Matched already: not cancelled. */
    if (iprobe_until(w, 0, 6, &st)) return 1;
    NT_OKC(w, nexar_irecv(w, &a, 1, NEXAR_INT32, 0, 6, &ra));
    NT_OKC(w, nexar_cancel(ra));
    NT_OKC(w, nexar_wait(&ra, &st));
    NT_CHECKF(a == 100 && st.bytes == 4, "matched receive got %d", a);
  } else if (r == 0) {
    v = 99;
    NT_OKC(w, nexar_barrier(w));
    NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT32, 1, 4));
    /* A send is not cancelled either. */
    nexar_req_t *s;
    v = 100;
    NT_OKC(w, nexar_isend(w, &v, 1, NEXAR_INT32, 1, 6, &s));
    NT_OKC(w, nexar_cancel(s));
    NT_OKC(w, nexar_wait(&s, &st));
  } else {
    NT_OKC(w, nexar_barrier(w));
  }
  NT_CHECK(nexar_cancel(NULL) == NEXAR_ERR_INVALID_ARG);
  NT_OKC(w, nexar_barrier(w));
  return 0;
}

/* ---- waitany ---- */

static int case_waitany(nexar_comm_t *w, int r, int n) {
  (void)n;
  int vals[5] = {-1, -1, -1, -1, -1}, go = 1;
  nexar_status_t st;
  size_t idx = 7;
  if (r == 0) {
    nexar_req_t *rq[5] = {NULL};
    for (int t = 0; t < 4; t++)
      NT_OKC(w, nexar_irecv(w, &vals[t], 1, NEXAR_INT32, 1, t, &rq[t]));
    /* rq[4] stays NULL: skipped. */
    NT_OKC(w, nexar_send(w, &go, 1, NEXAR_INT32, 1, 100));
    NT_OKC(w, nexar_waitany(5, rq, &idx, &st));
    NT_CHECKF(
        idx == 2 && !rq[2] && st.tag == 2 && st.source == 1 && vals[2] == 1002,
        "first waitany: index %zu tag %d value %d", idx, st.tag, vals[2]);
    NT_OKC(w, nexar_send(w, &go, 1, NEXAR_INT32, 1, 101));
    NT_OKC(w, nexar_waitany(5, rq, &idx, &st));
    NT_CHECKF(idx == 0 && !rq[0] && st.tag == 0 && vals[0] == 1000,
              "second waitany: index %zu tag %d value %d", idx, st.tag,
              vals[0]);
    /* Two left; cancel them: each comes out cancelled. */
    NT_OKC(w, nexar_cancel(rq[1]));
    NT_OKC(w, nexar_cancel(rq[3]));
    int rc = nexar_waitany(5, rq, &idx, &st);
    NT_CHECKF(rc == NEXAR_ERR_CANCELLED && idx == 1 && !rq[1],
              "third waitany: %s index %zu", nexar_err_name(rc), idx);
    rc = nexar_waitany(5, rq, &idx, &st);
    NT_CHECKF(rc == NEXAR_ERR_CANCELLED && idx == 3 && !rq[3],
              "fourth waitany: %s index %zu", nexar_err_name(rc), idx);
    /* All NULL. */
    st.error = 5;
    NT_OKC(w, nexar_waitany(5, rq, &idx, &st));
    NT_CHECKF(idx == NEXAR_UNDEFINED_INDEX && st.error == NEXAR_OK &&
                  st.source == NEXAR_ANY_SOURCE,
              "all NULL: index %zu", idx);
    NT_OKC(w, nexar_waitany(0, NULL, &idx, NULL));
    NT_CHECK(idx == NEXAR_UNDEFINED_INDEX);
    NT_CHECK(nexar_waitany(5, rq, NULL, NULL) == NEXAR_ERR_INVALID_ARG);
    NT_CHECK(nexar_waitany(1, NULL, &idx, NULL) == NEXAR_ERR_INVALID_ARG);
  } else if (r == 1) {
    int v = 1002;
    NT_OKC(w, nexar_recv(w, &go, 1, NEXAR_INT32, 0, 100, NULL));
    NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT32, 0, 2));
    NT_OKC(w, nexar_recv(w, &go, 1, NEXAR_INT32, 0, 101, NULL));
    v = 1000;
    NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT32, 0, 0));
  }
  NT_OKC(w, nexar_barrier(w));
  return 0;
}

/* ---- group ---- */

/* On communicator |c| made of the world ranks |ranks| (new rank i =
 * ranks[i]): its shape, ids, and an allreduce and a bcast checked bit for
 * bit. */
static int check_group(nexar_comm_t *c, const int *ranks, int n, int wr) {
  int cr = -1, cs = -1, id = -1;
  NT_OKC(c, nexar_comm_rank(c, &cr));
  NT_OKC(c, nexar_comm_size(c, &cs));
  NT_CHECKF(cs == n && cr >= 0 && cr < n && ranks[cr] == wr,
            "world rank %d is rank %d of %d", wr, cr, cs);
  for (int i = 0; i < n; i++) {
    NT_OKC(c, nexar_comm_id_of(c, i, &id));
    NT_CHECKF(id == ranks[i], "rank %d of the group is process %d", i, id);
  }
  int64_t in[64], out[64];
  for (int i = 0; i < 64; i++) in[i] = nt_ival(wr, i);
  NT_OKC(c, nexar_allreduce(c, in, out, 64, NEXAR_INT64, NEXAR_SUM));
  for (int i = 0; i < 64; i++) {
    int64_t want = 0;
    for (int k = 0; k < n; k++) want += nt_ival(ranks[k], i);
    NT_CHECKF(out[i] == want, "allreduce[%d] = %lld, want %lld", i,
              (long long)out[i], (long long)want);
  }
  double d[8];
  for (int i = 0; i < 8; i++) d[i] = cr == n - 1 ? nt_dval(ranks[n - 1], i) : 0;
  NT_OKC(c, nexar_bcast(c, d, 8, NEXAR_FLOAT64, n - 1));
  for (int i = 0; i < 8; i++)
    NT_CHECKF(d[i] == nt_dval(ranks[n - 1], (size_t)i), "bcast[%d]", i);
  return 0;
}

static int case_group(nexar_comm_t *w, int r, int n) {
  /* Argument errors: local, at once, nothing made. */
  nexar_comm_t *c = w;
  const int dup[2] = {r, r}, out_of_range[2] = {r, n}, neg[1] = {-1};
  const int others[1] = {(r + 1) % n}, me[1] = {r};
  NT_CHECK(nexar_comm_create_group(w, dup, 2, 0, &c) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(c == NULL);
  NT_CHECK(nexar_comm_create_group(w, out_of_range, 2, 0, &c) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_comm_create_group(w, neg, 1, 0, &c) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_comm_create_group(w, others, 1, 0, &c) ==
           NEXAR_ERR_INVALID_ARG);
  NT_CHECK(strstr(nexar_comm_last_error(w), "not in the list"));
  NT_CHECK(nexar_comm_create_group(w, me, 0, 0, &c) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_comm_create_group(w, me, 1, -1, &c) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_comm_create_group(w, me, 1, 0, NULL) == NEXAR_ERR_INVALID_ARG);
  NT_CHECK(nexar_comm_create_group(NULL, me, 1, 0, &c) ==
           NEXAR_ERR_INVALID_ARG);
  /* A group of one. */
  NT_OKC(w, nexar_comm_create_group(w, me, 1, 3, &c));
  if (check_group(c, me, 1, r)) return 1;
  NT_OKC(c, nexar_comm_free(&c));
  NT_OKC(w, nexar_barrier(w));

  /* World 5: {3, 0, 4} with tag 7 and, at the same time, {2, 1} with tag
   * 8. Rank 0 has a wildcard receive pending on the world meanwhile. */
  const int ga[3] = {3, 0, 4}, gb[2] = {2, 1};
  const int *g = r == 1 || r == 2 ? gb : ga;
  int gn = r == 1 || r == 2 ? 2 : 3;
  int tag = r == 1 || r == 2 ? 8 : 7;
  nexar_req_t *any = NULL;
  int anyv = -1;
  if (r == 0)
    NT_OKC(w, nexar_irecv(w, &anyv, 1, NEXAR_INT32, NEXAR_ANY_SOURCE,
                          NEXAR_ANY_TAG, &any));
  /* The second group's members first exchange on the world. */
  if (r == 1 || r == 2) {
    int x = r * 11, y = -1;
    nexar_req_t *s;
    NT_OKC(w, nexar_isend(w, &x, 1, NEXAR_INT32, 3 - r, 50, &s));
    NT_OKC(w, nexar_recv(w, &y, 1, NEXAR_INT32, 3 - r, 50, NULL));
    NT_OKC(w, nexar_wait(&s, NULL));
    NT_CHECKF(y == (3 - r) * 11, "ping-pong got %d", y);
  }
  c = NULL;
  NT_OKC(w, nexar_comm_create_group(w, g, gn, tag, &c));
  NT_CHECK(c != NULL);
  if (check_group(c, g, gn, r)) return 1;
  if (r == 0) {
    /* The creation's messages did not match the wildcard receive. */
    int done = 1;
    NT_OKC(w, nexar_test(&any, &done, NULL));
    NT_CHECKF(!done, "the wildcard receive took a message (%d)", anyv);
    int go = 1; /* now rank 1 may send it one */
    NT_OKC(w, nexar_send(w, &go, 1, NEXAR_INT32, 1, 61));
  }
  NT_OKC(c, nexar_comm_free(&c));
  NT_CHECK(c == NULL);
  if (r == 1) {
    int v = 123;
    NT_OKC(w, nexar_recv(w, &v, 1, NEXAR_INT32, 0, 61, NULL));
    v = 123;
    NT_OKC(w, nexar_send(w, &v, 1, NEXAR_INT32, 0, 60));
  }
  if (r == 0) {
    nexar_status_t st;
    NT_OKC(w, nexar_wait(&any, &st));
    NT_CHECKF(anyv == 123 && st.source == 1 && st.tag == 60,
              "wildcard receive got %d from %d tag %d", anyv, st.source,
              st.tag);
  }
  NT_OKC(w, nexar_barrier(w));
  return 0;
}

/* ---- driver ---- */

typedef int (*case_fn)(nexar_comm_t *w, int r, int n);
static const case_fn cases[C_COUNT] = {
    case_probe,  case_ssend,   case_ssend_fail, case_timeout,
    case_cancel, case_waitany, case_group};

static int worker(int index, void *arg) {
  int c = *(const int *)arg;
  nexar_ctx_t *ctx;
  nexar_comm_t *w;
  int r, n;
  (void)index;
  NT_OK(nt_join_world(&ctx, &w, &r, &n));
  if (cases[c](w, r, n)) return 1;
  if (c == C_SSEND_FAIL) {
    nexar_finalize(ctx); /* the world is broken: its result is the failure */
    return 0;
  }
  NT_OK(nexar_finalize(ctx));
  return 0;
}

static const char *const names[C_COUNT] = {
    "probe", "ssend", "ssend_fail", "timeout", "cancel", "waitany", "group"};

static int run_case(int c, int world, const char *env, int tolerate_kill) {
  nt_opts_t o = {.world_size = world,
                 .timeout_ms = 60000,
                 .env = env,
                 .tolerate_kill = tolerate_kill};
  return nt_run_case(&o, worker, c, names[c]);
}

int main(void) {
  int fails = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* The result codes this file adds. */
  if (strcmp(nexar_err_name(NEXAR_ERR_CANCELLED), "NEXAR_ERR_CANCELLED") ||
      strcmp(nexar_strerror(NEXAR_ERR_CANCELLED),
             "the request was cancelled") ||
      nexar_err_is_fatal(NEXAR_ERR_CANCELLED) || NEXAR_ERR_CANCELLED != -21) {
    printf("FAIL NEXAR_ERR_CANCELLED's name, text or class\n");
    fails++;
  }
  fails += run_case(C_PROBE, 2, NULL, 0);
  fails += run_case(C_PROBE, 4, NULL, 0);
  fails += run_case(C_SSEND, 1, NULL, 0);
  fails += run_case(C_SSEND, 2, NULL, 0);
  fails += run_case(C_SSEND, 3, NULL, 0);
  fails += run_case(C_SSEND_FAIL, 2, NULL, 1);
  fails += run_case(C_TIMEOUT, 2, "NEXAR_OP_TIMEOUT_MS=1000", 0);
  fails += run_case(C_CANCEL, 3, NULL, 0);
  fails += run_case(C_WAITANY, 2, NULL, 0);
  fails += run_case(C_GROUP, 5, NULL, 0);
  printf("%d failure(s)\n", fails);
  return fails ? 1 : 0;
}
