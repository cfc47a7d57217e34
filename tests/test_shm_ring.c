/*
 * The shared-memory transport's building blocks (src/transport/shm_ring.h):
 * the ring's semantics in one process (wrap, reservations, full, wakeup
 * flags), segments that attach must refuse, two segments in one memfd
 * and the heartbeat count, a hostile writer (seeded random
 * corruption in one process, then a concurrent scribbler) that may only
 * produce NEXAR_ERR_PROTO or in-bounds records, 1 GiB each way between two
 * processes with eventfd wakeups and a sleeping consumer (bit-exact), an
 * 8-byte ping-pong, cross-memory attach, a peer killed mid-stream seen
 * through its pidfd, and a consumer that sleeps whenever its ring is empty
 * woken by every kick (30,000 records, both sides racing). Helpers in
 * tests/shm_procs.c run the child processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shm_procs.h"

/* ---- The ring in one process: creator produces ring 0, an attached
 * mapping of the same memfd consumes it. */

static void open_pair(size_t ring, nexar__shm_seg_t *w, nexar__shm_seg_t *c) {
  assert_int_equal(nexar__shm_seg_create(ring, w), 0);
  int fd = dup(w->fd);
  assert_true(fd >= 0);
  assert_int_equal(nexar__shm_seg_attach(fd, c), 0);
}

static void test_sizes(void **state) {
  (void)state;
  nexar__shm_seg_t s;
  size_t bad[] = {0, 4095, 5000, NEXAR__SHM_RING_MIN / 2,
                  (size_t)NEXAR__SHM_RING_MAX * 2};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(nexar__shm_seg_create(bad[i], &s), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__shm_seg_create(4096, NULL), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__shm_seg_attach(-1, &s), NEXAR_ERR_INVALID_ARG);
  nexar__shm_seg_t w, c;
  open_pair(4096, &w, &c);
  assert_int_equal(nexar__shm_ring_max_payload(&w.tx), 2048 - 32);
  assert_int_equal(w.map_bytes, 4096 + 2 * 4096);
  assert_ptr_equal(w.tx.data,
                   c.rx.data - (uint8_t *)c.base + (uint8_t *)w.base);
  assert_ptr_equal(w.rx.data,
                   c.tx.data - (uint8_t *)c.base + (uint8_t *)w.base);
  nexar__shm_seg_close(&w);
  nexar__shm_seg_close(&c);
  nexar__shm_seg_close(&c); /* idempotent */
}

static void test_basic(void **state) {
  (void)state;
  nexar__shm_seg_t w, c;
  open_pair(4096, &w, &c);
  nexar__shm_rec_t r;
  uint8_t buf[2048];
  for (unsigned i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 7 + 1);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0);
  assert_int_equal(nexar__shm_ring_free(&w.tx), 4096);
  /* Invalid puts change nothing. */
  struct iovec big = {buf, 2017};
  assert_int_equal(nexar__shm_ring_put(&w.tx, 1, 0, 0, 0, &big, 1),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__shm_ring_put(&w.tx, NEXAR__SHM_PAD, 0, 0, 0, NULL, 0),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__shm_ring_put(&w.tx, 1, 0, 0, 0, NULL, -1),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__shm_ring_commit(&w.tx, 1, 0, 0, 0, 0),
                   NEXAR_ERR_INVALID_USAGE);
  assert_int_equal(nexar__shm_ring_free(&w.tx), 4096);
  /* Two iovecs: 10 + 22 = 32 payload bytes, a 64-byte record. */
  struct iovec two[2] = {{buf, 10}, {buf + 10, 22}};
  assert_int_equal(nexar__shm_ring_put(&w.tx, 7, 9, 11, 13, two, 2), 0);
  assert_int_equal(nexar__shm_ring_free(&w.tx), 4096 - 64);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
  assert_int_equal(r.len, 32);
  assert_int_equal(r.type, 7);
  assert_int_equal(r.flags, 9);
  assert_int_equal(r.a, 11);
  assert_int_equal(r.b, 13);
  assert_memory_equal(r.payload, buf, 32);
  nexar__shm_rec_t again;
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &again), 1);
  assert_ptr_equal(again.payload, r.payload);
  nexar__shm_ring_pop(&c.rx);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0);
  assert_int_equal(nexar__shm_ring_free(&w.tx), 4096);
  /* Reserve 100, commit 50; a second reservation is refused. */
  void *p, *q;
  assert_int_equal(nexar__shm_ring_reserve(&w.tx, 100, &p), 0);
  assert_int_equal(nexar__shm_ring_reserve(&w.tx, 1, &q),
                   NEXAR_ERR_INVALID_USAGE);
  assert_int_equal(nexar__shm_ring_put(&w.tx, 1, 0, 0, 0, NULL, 0),
                   NEXAR_ERR_INVALID_USAGE);
  memcpy(p, buf, 50);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0); /* not yet visible */
  assert_int_equal(nexar__shm_ring_commit(&w.tx, 2, 0, 0, 0, 101),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__shm_ring_commit(&w.tx, 2, 0, 5, 6, 50), 0);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
  assert_int_equal(r.len, 50);
  assert_int_equal(r.a, 5);
  assert_memory_equal(r.payload, buf, 50);
  nexar__shm_ring_pop(&c.rx);
  /* Released lazily: the producer sees the room once the consumer finds
   * the ring empty (or kicks, or sleeps). */
  assert_int_equal(nexar__shm_ring_free(&w.tx), 4096 - 128);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0);
  assert_int_equal(nexar__shm_ring_free(&w.tx), 4096);
  /* Fill: 64 records of 0 bytes fill 4096, then full (nothing written). */
  for (int i = 0; i < 64; i++)
    assert_int_equal(nexar__shm_ring_put(&w.tx, 3, 0, (uint64_t)i, 0, NULL, 0),
                     0);
  assert_int_equal(nexar__shm_ring_free(&w.tx), 0);
  assert_int_equal(nexar__shm_ring_put(&w.tx, 3, 0, 0, 0, NULL, 0),
                   NEXAR__SHM_AGAIN);
  for (int i = 0; i < 64; i++) {
    assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
    assert_int_equal(r.a, (uint64_t)i);
    nexar__shm_ring_pop(&c.rx);
  }
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0);
  nexar__shm_seg_close(&w);
  nexar__shm_seg_close(&c);
}

/* Random interleaving of puts (every size from 0 to the largest, iovecs
 * and reservations) and pops over many laps, against a model queue. */
/* Random puts, reservations and reads against a queue of what was put;
 * every record bit-exact and in order. A 256 KiB ring also goes back to
 * its start whenever it is empty past its first 16 KiB (recycling). */
static void run_model(size_t ring) {
  nexar__shm_seg_t w, c;
  open_pair(ring, &w, &c);
  const uint32_t max = nexar__shm_ring_max_payload(&w.tx);
  static uint8_t src[1u << 18];
  uint64_t s = 42;
  for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)sp_rng(&s);
  enum { Q = 256 };
  uint32_t qlen[Q];
  uint64_t qoff[Q];
  uint64_t put = 0, got = 0, pads = 0, full = 0, recycled = 0;
  while (got < 200000) {
    if ((sp_rng(&s) & 1) && put - got < Q) {
      uint64_t x = sp_rng(&s);
      uint32_t len = x % 8 == 0 ? max : (uint32_t)((x >> 3) % (max + 1));
      uint64_t off = (x >> 32) % (sizeof src - max);
      uint64_t h0 = w.tx.head;
      int rc;
      if (x & (1ull << 20)) {
        void *p;
        rc = nexar__shm_ring_reserve(&w.tx, len, &p);
        if (rc == 0) {
          memcpy(p, src + off, len);
          rc = nexar__shm_ring_commit(&w.tx, 9, 0, put, off, len);
        }
      } else {
        struct iovec v[2] = {{src + off, len / 3},
                             {src + off + len / 3, len - len / 3}};
        rc = nexar__shm_ring_put(&w.tx, 9, 0, put, off, v, 2);
      }
      if (rc == NEXAR__SHM_AGAIN) {
        full++;
        continue;
      }
      assert_int_equal(rc, 0);
      uint64_t rec = (32 + len + 63) & ~63u;
      pads += (w.tx.head - h0) > rec;
      /* A pad although the record fitted before the end: recycled. */
      recycled += (w.tx.head - h0) > rec && rec <= ring - (h0 & (ring - 1));
      qlen[put % Q] = len;
      qoff[put % Q] = off;
      put++;
    } else {
      nexar__shm_rec_t r;
      int rc = nexar__shm_ring_peek(&c.rx, &r);
      assert_int_equal(rc, put > got ? 1 : 0);
      if (rc == 0) continue;
      assert_int_equal(r.a, got);
      assert_int_equal(r.len, qlen[got % Q]);
      assert_int_equal(r.b, qoff[got % Q]);
      assert_memory_equal(r.payload, src + r.b, r.len);
      nexar__shm_ring_pop(&c.rx);
      got++;
    }
  }
  printf(
      "model (%zu-byte ring): %llu records, %llu pads (%llu recycling), "
      "%llu full\n",
      ring, (unsigned long long)got, (unsigned long long)pads,
      (unsigned long long)recycled, (unsigned long long)full);
  assert_true(pads > 1000 && full > 1000);
  assert_true(ring > (16u << 10) ? recycled > 100 : recycled == 0);
  nexar__shm_seg_close(&w);
  nexar__shm_seg_close(&c);
}

static void test_model(void **state) {
  (void)state;
  run_model(8192);
  run_model(1u << 18);
}

/* Puts |n| records of |len| bytes, then reads them all (the consumer
 * lags, then catches up). */
static void put_lagging(nexar__shm_seg_t *w, nexar__shm_seg_t *c, uint32_t n,
                        const uint8_t *msg, size_t len) {
  nexar__shm_rec_t r;
  for (uint32_t i = 0; i < n; i++) {
    struct iovec v = {(void *)msg, len};
    assert_int_equal(nexar__shm_ring_put(&w->tx, 5, 0, i, 0, &v, 1), 0);
  }
  for (uint32_t i = 0; i < n; i++) {
    assert_int_equal(nexar__shm_ring_peek(&c->rx, &r), 1);
    assert_int_equal(r.a, i);
    nexar__shm_ring_pop(&c->rx);
  }
  assert_int_equal(nexar__shm_ring_peek(&c->rx, &r), 0);
}

/* Puts and reads records one at a time until one lands at the start of
 * the ring (true), at most a page of them plus one. */
static bool put_until_recycled(nexar__shm_seg_t *w, nexar__shm_seg_t *c,
                               const uint8_t *msg, size_t len) {
  nexar__shm_rec_t r;
  for (uint32_t i = 0; i <= 4096 / 64; i++) {
    struct iovec v = {(void *)msg, len};
    assert_int_equal(nexar__shm_ring_put(&w->tx, 5, 0, i, 0, &v, 1), 0);
    assert_int_equal(nexar__shm_ring_peek(&c->rx, &r), 1);
    assert_int_equal(r.a, i);
    bool first = r.payload == c->rx.data + 32;
    nexar__shm_ring_pop(&c->rx);
    assert_int_equal(nexar__shm_ring_peek(&c->rx, &r), 0);
    if (first) return true;
  }
  return false;
}

/* Recycling: a producer that finds the ring empty when a record would
 * open a page past the first 16 KiB starts again at offset 0, so small
 * messages keep to the first pages; while the consumer lags the records
 * go on in order through the ring. */
static void test_recycle(void **state) {
  (void)state;
  nexar__shm_seg_t w, c;
  open_pair(1u << 20, &w, &c);
  nexar__shm_rec_t r;
  uint8_t msg[40];
  uint64_t top = 0;
  for (uint32_t i = 0; i < 20000; i++) {
    memset(msg, (int)(i & 0xff), sizeof msg);
    struct iovec v = {msg, sizeof msg};
    assert_int_equal(nexar__shm_ring_put(&w.tx, 5, 0, i, 0, &v, 1), 0);
    assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
    assert_int_equal(r.a, i);
    assert_memory_equal(r.payload, msg, sizeof msg);
    uint64_t off = (uint64_t)((const uint8_t *)r.payload - c.rx.data);
    if (off > top) top = off;
    nexar__shm_ring_pop(&c.rx);
    assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0); /* caught up */
  }
  /* 20,000 records of 128 bytes went through the first 16 KiB and at most
   * one page more (2.4 laps of the whole ring without recycling). */
  assert_true(top < (16u << 10) + 4096);
  /* Lagging: 600 records (75 KiB) put before any is read go on in order
   * past 16 KiB; read back, a record that opens a page recycles. */
  uint64_t start = w.tx.head;
  put_lagging(&w, &c, 600, msg, sizeof msg);
  assert_int_equal(w.tx.head - start, 600 * 128);
  assert_true(put_until_recycled(&w, &c, msg, sizeof msg));
  /* A record stays where it is while fewer than four of its size fit
   * before it (a stream keeps room for several in flight): 300 KiB at
   * offset 76,928. */
  put_lagging(&w, &c, 600, msg, sizeof msg);
  uint64_t at = w.tx.head & ((1u << 20) - 1);
  assert_int_equal(at, 128 + 600 * 128);
  static uint8_t big[300u << 10];
  struct iovec vb = {big, sizeof big};
  assert_int_equal(nexar__shm_ring_put(&w.tx, 6, 0, 0, 0, &vb, 1), 0);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
  assert_ptr_equal(r.payload, c.rx.data + at + 32);
  nexar__shm_ring_pop(&c.rx);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0);
  assert_true(put_until_recycled(&w, &c, msg, sizeof msg));
  /* Larger records recycle too, once four of them fit before: 2,000
   * records of 16,000 bytes (16,064 in the ring) read one by one stay in
   * the first four (31 MiB through a 1 MiB ring otherwise). */
  static uint8_t mid[16000];
  top = 0;
  for (uint32_t i = 0; i < 2000; i++) {
    memset(mid, (int)(i & 0xff), sizeof mid);
    struct iovec vm = {mid, sizeof mid};
    assert_int_equal(nexar__shm_ring_put(&w.tx, 7, 0, i, 0, &vm, 1), 0);
    assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
    assert_memory_equal(r.payload, mid, sizeof mid);
    uint64_t off = (uint64_t)((const uint8_t *)r.payload - c.rx.data);
    if (off > top) top = off;
    nexar__shm_ring_pop(&c.rx);
    assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0); /* caught up */
  }
  assert_true(top < 4 * 16064);
  nexar__shm_seg_close(&w);
  nexar__shm_seg_close(&c);
}

/* Mapping ahead and the data lane's room after a recycle: a small record
 * past the first 20 KiB maps its page, not a 256 KiB chunk; a room check
 * (the producer's sleep for the largest record) maps nothing; a pad the
 * consumer has yet to pass is not unread. */
static void test_warm_unread(void **state) {
  (void)state;
  nexar__shm_seg_t w, c;
  const uint64_t cap = 1u << 22;
  open_pair(cap, &w, &c);
  uint8_t msg[100]; /* 192 bytes in the ring */
  memset(msg, 7, sizeof msg);
  put_lagging(&w, &c, 1, msg, sizeof msg);
  assert_int_equal(w.tx.warm_to, 20480);
  put_lagging(&w, &c, 120, msg, sizeof msg); /* to 23,232 */
  assert_int_equal(w.tx.warm_to, 24576);
  assert_int_equal(c.rx.warm_to, 24576);
  nexar__shm_ring_producer_sleep(&w.tx, nexar__shm_ring_max_payload(&w.tx));
  assert_true(nexar__shm_ring_has_free(&w.tx, 64 * 1024));
  assert_int_equal(w.tx.warm_to, 24576);
  /* Caught up: the record that opens the next page recycles. */
  nexar__shm_rec_t r;
  uint64_t h0 = 0;
  for (int i = 0; i < 64; i++) {
    h0 = w.tx.head;
    struct iovec v = {msg, sizeof msg};
    assert_int_equal(nexar__shm_ring_put(&w.tx, 5, 0, 0, 0, &v, 1), 0);
    if (w.tx.head - h0 > 192) break;
    assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
    nexar__shm_ring_pop(&c.rx);
    assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0);
  }
  assert_true(w.tx.head - h0 > cap / 2); /* a pad to the end, then 192 */
  assert_false(nexar__shm_ring_has_free(&w.tx, cap / 2));
  assert_true(nexar__shm_ring_unread_within(&w.tx, cap / 2));
  assert_true(nexar__shm_ring_unread_within(&w.tx, 192));
  assert_false(nexar__shm_ring_unread_within(&w.tx, 191));
  /* Read: the consumer passes the pad, and the room is the ring's. */
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
  assert_ptr_equal(r.payload, c.rx.data + 32);
  nexar__shm_ring_pop(&c.rx);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 0);
  assert_true(nexar__shm_ring_has_free(&w.tx, cap / 2));
  assert_true(nexar__shm_ring_unread_within(&w.tx, 0));
  nexar__shm_seg_close(&w);
  nexar__shm_seg_close(&c);
}

static void test_wakeup_flags(void **state) {
  (void)state;
  nexar__shm_seg_t w, c;
  open_pair(4096, &w, &c);
  nexar__shm_rec_t r;
  /* Empty: the consumer may sleep; the next put must kick, once. */
  assert_false(nexar__shm_ring_need_kick(&w.tx));
  assert_int_equal(nexar__shm_ring_consumer_sleep(&c.rx), 1);
  assert_int_equal(nexar__shm_ring_put(&w.tx, 1, 0, 0, 0, NULL, 0), 0);
  assert_true(nexar__shm_ring_need_kick(&w.tx));
  assert_false(nexar__shm_ring_need_kick(&w.tx));
  /* Not empty: no sleep, and the flag is taken back (no kick). */
  assert_int_equal(nexar__shm_ring_consumer_sleep(&c.rx), 0);
  assert_false(nexar__shm_ring_need_kick(&w.tx));
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
  assert_int_equal(nexar__shm_ring_consumer_sleep(&c.rx), 0); /* peeked */
  nexar__shm_ring_pop(&c.rx);
  /* Full: the producer may sleep; the next pop must kick, once. */
  struct iovec v = {w.base, 100};
  while (nexar__shm_ring_put(&w.tx, 1, 0, 0, 0, &v, 1) == 0) {
  }
  assert_false(nexar__shm_ring_need_kick_space(&c.rx));
  assert_int_equal(nexar__shm_ring_producer_sleep(&w.tx, 100), 1);
  assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
  nexar__shm_ring_pop(&c.rx);
  assert_true(nexar__shm_ring_need_kick_space(&c.rx));
  assert_false(nexar__shm_ring_need_kick_space(&c.rx));
  assert_int_equal(nexar__shm_ring_producer_sleep(&w.tx, 0), 0); /* room */
  assert_false(nexar__shm_ring_need_kick_space(&c.rx));
  nexar__shm_seg_close(&w);
  nexar__shm_seg_close(&c);
}

/* ---- Exact corruptions of ring 0 (4096 bytes): the consumer's tail is
 * moved to |tail| by valid 0-byte records, then a header {len, type}
 * stamped for ring position |pos| is written at |pos|'s offset (after a
 * pad, a valid 8-byte record stamped right at offset 0). Returns what peek
 * says. */
static int corrupt_case(uint64_t tail, uint64_t pos, uint32_t len,
                        uint16_t type) {
  nexar__shm_seg_t w, c;
  nexar__shm_rec_t r;
  open_pair(4096, &w, &c);
  for (uint64_t i = 0; i < tail / 64; i++) {
    assert_int_equal(nexar__shm_ring_put(&w.tx, 1, 0, 0, 0, NULL, 0), 0);
    assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), 1);
    nexar__shm_ring_pop(&c.rx);
  }
  const uint64_t key = w.tx.key;
  uint8_t h[32] = {0};
  uint64_t stamp = pos ^ key, next = pos + 4096 - (pos & 4095);
  memcpy(h, &stamp, 8);
  memcpy(h + 8, &len, 4);
  memcpy(h + 12, &type, 2);
  memcpy(w.tx.data + (pos & 4095), h, 32);
  if (type == NEXAR__SHM_PAD && (pos & 4095)) { /* the record after it */
    uint32_t eight = 8;
    stamp = next ^ key;
    memcpy(h, &stamp, 8);
    memcpy(h + 8, &eight, 4);
    h[12] = 3;
    memcpy(w.tx.data, h, 32);
  }
  int rc = nexar__shm_ring_peek(&c.rx, &r);
  if (rc == 1) {
    assert_int_equal(r.len, type == NEXAR__SHM_PAD ? 8 : len);
    assert_ptr_equal(r.payload,
                     c.rx.data + (type ? pos & 4095 : 0) + NEXAR__SHM_REC_HDR);
  }
  if (rc < 0) assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), rc);
  nexar__shm_seg_close(&w);
  nexar__shm_seg_close(&c);
  return rc;
}

static void test_corrupt_cases(void **state) {
  (void)state;
  const int P = NEXAR_ERR_PROTO;
  /* The references: a record, a pad to the end then a record. */
  assert_int_equal(corrupt_case(0, 0, 32, 3), 1);
  assert_int_equal(corrupt_case(0, 0, 0, 3), 1);
  assert_int_equal(corrupt_case(4032, 4032, 32, 0), 1);
  assert_int_equal(corrupt_case(128, 128, 2016, 3), 1); /* the largest */
  /* Stamped for another position (an earlier or later lap, the next
   * record, a position before the tail): nothing there yet. */
  assert_int_equal(corrupt_case(128, 128 + 4096, 40, 3), 0);
  assert_int_equal(corrupt_case(4096 + 128, 128, 40, 3), 0);
  assert_int_equal(corrupt_case(0, 64, 40, 3), 0);
  assert_int_equal(corrupt_case(128, 64, 40, 3), 0);
  /* A record past the ring's end, or longer than the largest. */
  assert_int_equal(corrupt_case(4032, 4032, 100, 3), P);
  assert_int_equal(corrupt_case(0, 0, 0xffffffffu, 3), P);
  assert_int_equal(corrupt_case(0, 0, 0xffffffe0u, 3), P);
  assert_int_equal(corrupt_case(0, 0, 2017, 3), P);
  /* Pads: short of the ring's end, past it, at offset 0. */
  assert_int_equal(corrupt_case(3968, 3968, 32, 0), P);
  assert_int_equal(corrupt_case(4032, 4032, 96, 0), P);
  assert_int_equal(corrupt_case(0, 0, 4096 - 32, 0), P);
}

/* ---- Segments attach must refuse. */

/* A memfd of |bytes| with |seals| and a header whose fields are given. */
static uint64_t mk_key = 0x9e3779b97f4a7c15ull; /* the stamp key written */

static int make_fd(unsigned mfd_flags, int seals, size_t bytes, uint64_t magic,
                   uint32_t version, uint64_t ring, uint64_t total) {
  int fd = memfd_create("t", MFD_CLOEXEC | mfd_flags);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
  struct {
    uint64_t magic;
    uint32_t version, hdr;
    uint64_t ring, total, key;
  } h = {magic, version, NEXAR__SHM_HDR_BYTES, ring, total, mk_key};
  if (bytes >= sizeof h)
    assert_int_equal(pwrite(fd, &h, sizeof h, 0), sizeof h);
  if (seals) assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
}

static void expect_refused(int fd, int want) {
  nexar__shm_seg_t s;
  assert_int_equal(nexar__shm_seg_attach(fd, &s), want);
  close(fd);
}

static void test_attach_refuses(void **state) {
  (void)state;
  const int sg = F_SEAL_SHRINK | F_SEAL_GROW;
  const uint64_t M = NEXAR__SHM_MAGIC, V = NEXAR__SHM_VERSION;
  const size_t n = 4096 + 2 * 4096;
  /* The reference: everything right attaches. */
  int fd = make_fd(MFD_ALLOW_SEALING, sg, n, M, V, 4096, n);
  nexar__shm_seg_t s;
  assert_int_equal(nexar__shm_seg_attach(fd, &s), 0);
  nexar__shm_seg_close(&s);
  /* No seals (sealing not allowed, or allowed but not applied), or only
   * one of SHRINK and GROW: a creator could truncate it under us. */
  expect_refused(make_fd(0, 0, n, M, V, 4096, n), NEXAR_ERR_PROTO);
  expect_refused(make_fd(MFD_ALLOW_SEALING, 0, n, M, V, 4096, n),
                 NEXAR_ERR_PROTO);
  expect_refused(make_fd(MFD_ALLOW_SEALING, F_SEAL_GROW, n, M, V, 4096, n),
                 NEXAR_ERR_PROTO);
  expect_refused(
      make_fd(MFD_ALLOW_SEALING, sg | F_SEAL_WRITE, n, M, V, 4096, n),
      NEXAR_ERR_PROTO);
  /* Too small, too large, or not matching its header. */
  expect_refused(make_fd(MFD_ALLOW_SEALING, sg, 100, M, V, 4096, 100),
                 NEXAR_ERR_PROTO);
  expect_refused(make_fd(MFD_ALLOW_SEALING, sg, n - 64, M, V, 4096, n - 64),
                 NEXAR_ERR_PROTO);
  size_t huge = 4096 + 2 * (size_t)NEXAR__SHM_RING_MAX + 4096;
  expect_refused(make_fd(MFD_ALLOW_SEALING, sg, huge, M, V, 4096, n),
                 NEXAR_ERR_PROTO);
  expect_refused(make_fd(MFD_ALLOW_SEALING, sg, n, M + 1, V, 4096, n),
                 NEXAR_ERR_PROTO);
  expect_refused(make_fd(MFD_ALLOW_SEALING, sg, n, M, V + 1, 4096, n),
                 NEXAR_ERR_PROTO);
  expect_refused(make_fd(MFD_ALLOW_SEALING, sg, n, M, V, 8192, n),
                 NEXAR_ERR_PROTO);
  expect_refused(make_fd(MFD_ALLOW_SEALING, sg, n, M, V, 4096, n + 4096),
                 NEXAR_ERR_PROTO);
  size_t odd = 4096 + 2 * 6144;
  expect_refused(make_fd(MFD_ALLOW_SEALING, sg, odd, M, V, 6144, odd),
                 NEXAR_ERR_PROTO);
  /* A stamp key that is even (zero: a zeroed ring would read as stamped). */
  mk_key = 0;
  expect_refused(make_fd(MFD_ALLOW_SEALING, sg, n, M, V, 4096, n),
                 NEXAR_ERR_PROTO);
  mk_key = 0x9e3779b97f4a7c15ull;
  /* Not a memfd at all: a pipe, a regular file. */
  int p[2];
  assert_int_equal(pipe(p), 0);
  expect_refused(p[0], NEXAR_ERR_PROTO);
  close(p[1]);
  char path[] = "/tmp/nexar-shm-XXXXXX";
  fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(ftruncate(fd, (off_t)n), 0);
  expect_refused(fd, NEXAR_ERR_PROTO);
}

/* ---- Two segments in one memfd (a link's bulk and priority rings), and
 * the heartbeat count beside each ring's head. */

static void test_segs_pair(void **state) {
  (void)state;
  const size_t rings[2] = {8192, 4096};
  const size_t n = (4096 + 2 * 8192) + (4096 + 2 * 4096);
  nexar__shm_seg_t w[2], c[2];
  assert_int_equal(nexar__shm_segs_create(rings, 0, w), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__shm_segs_create(rings, 2, w), 0);
  assert_int_equal(w[0].map_bytes, n);
  assert_int_equal(w[1].map_bytes, 0); /* the first owns the mapping */
  assert_int_equal(w[1].fd, -1);
  assert_ptr_equal((uint8_t *)w[1].base, (uint8_t *)w[0].base + 4096 + 16384);
  /* One segment, or three, is not what the file holds. */
  nexar__shm_seg_t one, three[3];
  int fd = dup(w[0].fd);
  assert_int_equal(nexar__shm_seg_attach(fd, &one), NEXAR_ERR_PROTO);
  assert_int_equal(nexar__shm_segs_attach(fd, 3, three), NEXAR_ERR_PROTO);
  assert_int_equal(nexar__shm_segs_attach(fd, 2, c), 0);
  assert_int_equal(c[0].map_bytes, n);
  assert_int_equal(nexar__shm_ring_max_payload(&c[1].tx), 2048 - 32);
  /* Records in the second segment reach its consumer only. */
  struct iovec v = {.iov_base = "prio", .iov_len = 4};
  assert_int_equal(nexar__shm_ring_put(&w[1].tx, 7, 0, 1, 2, &v, 1), 0);
  nexar__shm_rec_t r;
  assert_int_equal(nexar__shm_ring_peek(&c[0].rx, &r), 0);
  assert_int_equal(nexar__shm_ring_peek(&c[1].rx, &r), 1);
  assert_int_equal(r.type, 7);
  assert_memory_equal(r.payload, "prio", 4);
  /* A heartbeat is seen once, on its own ring, and wakes nobody: no
   * record, and the consumer's sleep flag stays up. */
  assert_false(nexar__shm_ring_beat_seen(&c[0].rx));
  assert_int_equal(nexar__shm_ring_consumer_sleep(&c[0].rx), 1);
  nexar__shm_ring_beat(&w[0].tx);
  assert_int_equal(nexar__shm_ring_peek(&c[0].rx, &r), 0);
  assert_true(nexar__shm_ring_beat_seen(&c[0].rx));
  assert_false(nexar__shm_ring_beat_seen(&c[0].rx));
  assert_false(nexar__shm_ring_beat_seen(&c[1].rx));
  assert_true(nexar__shm_ring_need_kick(&w[0].tx)); /* the flag was up */
  nexar__shm_seg_close(&c[1]);
  nexar__shm_seg_close(&c[0]);
  /* The second header is checked too: a wrong ring size there, or one
   * that reaches past the file. */
  struct {
    uint64_t magic;
    uint32_t version, hdr;
    uint64_t ring, total;
  } h = {NEXAR__SHM_MAGIC, NEXAR__SHM_VERSION, 4096, 8192, 4096 + 2 * 8192};
  fd = dup(w[0].fd);
  assert_int_equal(pwrite(fd, &h, sizeof h, 4096 + 16384), sizeof h);
  assert_int_equal(nexar__shm_segs_attach(fd, 2, c), NEXAR_ERR_PROTO);
  h.ring = 2048;
  h.total = 4096 + 2 * 2048;
  assert_int_equal(pwrite(fd, &h, sizeof h, 4096 + 16384), sizeof h);
  assert_int_equal(nexar__shm_segs_attach(fd, 2, c), NEXAR_ERR_PROTO);
  close(fd);
  nexar__shm_seg_close(&w[1]);
  nexar__shm_seg_close(&w[0]);
}

/* ---- Descriptor passing in one process (a socketpair), the refusals
 * above all: nothing received may stay open when a message is refused. */

static int open_fds(void) {
  int n = 0;
  char path[64];
  for (int fd = 0; fd < 1024; fd++) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    n += access(path, F_OK) == 0;
  }
  return n;
}

static void test_fd_passing(void **state) {
  (void)state;
  int sv[2], fds[NEXAR__SHM_MAX_FDS + 2], got[NEXAR__SHM_MAX_FDS], n;
  char msg[16];
  nexar__shm_cred_t cred;
  assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv),
                   0);
  for (int i = 0; i < NEXAR__SHM_MAX_FDS + 2; i++) fds[i] = 0; /* stdin */
  int base = open_fds();
  assert_int_equal(nexar__shm_recv_fds(sv[1], got, 2, &n, msg, 16, &cred),
                   NEXAR__SHM_AGAIN);
  /* Two descriptors and a message, with the sender's credentials. */
  assert_int_equal(nexar__shm_send_fds(sv[0], fds, 2, "hello", 5), 0);
  assert_int_equal(nexar__shm_recv_fds(sv[1], got, 2, &n, msg, 16, &cred), 5);
  assert_int_equal(n, 2);
  assert_memory_equal(msg, "hello", 5);
  assert_int_equal(cred.pid, getpid());
  assert_int_equal(cred.uid, getuid());
  for (int i = 0; i < 2; i++) {
    assert_true(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
    close(got[i]);
  }
  /* Refused, every received descriptor closed: more descriptors than
   * asked for, a message longer than the buffer, control data truncated
   * (more than NEXAR__SHM_MAX_FDS, sent around send_fds). */
  assert_int_equal(nexar__shm_send_fds(sv[0], fds, 3, "x", 1), 0);
  assert_int_equal(nexar__shm_recv_fds(sv[1], got, 2, &n, msg, 16, &cred),
                   NEXAR_ERR_PROTO);
  assert_int_equal(nexar__shm_send_fds(sv[0], fds, 2, "0123456789", 10), 0);
  assert_int_equal(nexar__shm_recv_fds(sv[1], got, 2, &n, msg, 4, &cred),
                   NEXAR_ERR_TRUNCATE);
  union {
    char b[CMSG_SPACE(sizeof fds)];
    struct cmsghdr a;
  } ctl;
  struct iovec io = {"y", 1};
  struct msghdr m = {.msg_iov = &io,
                     .msg_iovlen = 1,
                     .msg_control = ctl.b,
                     .msg_controllen = sizeof ctl.b};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  assert_int_equal(sendmsg(sv[0], &m, 0), 1);
  assert_int_equal(
      nexar__shm_recv_fds(sv[1], got, NEXAR__SHM_MAX_FDS, &n, msg, 16, &cred),
      NEXAR_ERR_PROTO);
  assert_int_equal(open_fds(), base);
  /* Bad arguments; the peer gone. */
  assert_int_equal(
      nexar__shm_send_fds(sv[0], fds, NEXAR__SHM_MAX_FDS + 1, "z", 1),
      NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__shm_send_fds(sv[0], fds, 1, "z", 0),
                   NEXAR_ERR_INVALID_ARG);
  close(sv[1]);
  assert_int_equal(nexar__shm_send_fds(sv[0], fds, 1, "z", 1),
                   NEXAR_ERR_PEER_FAILED);
  assert_int_equal(nexar__shm_recv_fds(sv[0], got, 2, &n, msg, 16, &cred),
                   NEXAR_ERR_PEER_FAILED);
  close(sv[0]);
  /* Abstract names: nobody listening. */
  uint8_t nonce[16] = {1, 2, 3};
  assert_int_equal(nexar__shm_connect(nonce, &n), NEXAR_ERR_PEER_FAILED);
  assert_int_equal(open_fds(), base - 2);
}

/* ---- Hostile writer, in one process: seeded random corruption of the
 * counter, record headers, lengths and data. The consumer (the creator,
 * ring 1: the end of the mapping, followed by a PROT_NONE guard page where
 * one can be placed) must return NEXAR_ERR_PROTO or records that lie in
 * the ring. */

static void test_hostile_seeded(void **state) {
  (void)state;
  uint64_t s = 0x5eed;
  long protos = 0, recs = 0, guards = 0;
  for (int trial = 0; trial < 4000; trial++) {
    /* A page-sized hole below a PROT_NONE page, for the creator's map. */
    uint8_t *g = mmap(NULL, 3 * 4096 + 4096, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(g != MAP_FAILED);
    munmap(g, 3 * 4096);
    nexar__shm_seg_t c, w;
    open_pair(4096, &c, &w); /* w (attacher) produces ring 1 */
    guards += (uint8_t *)c.base + c.map_bytes == g + 3 * 4096;
    /* Valid traffic first, so the tail sits anywhere. */
    int k = (int)(sp_rng(&s) % 40);
    for (int i = 0; i < k; i++) {
      nexar__shm_rec_t r;
      struct iovec v = {c.base, sp_rng(&s) % 700};
      (void)nexar__shm_ring_put(&w.tx, 5, 0, 0, 0, &v, 1);
      if (sp_rng(&s) % 3 == 0) continue;
      while (nexar__shm_ring_peek(&c.rx, &r) == 1) nexar__shm_ring_pop(&c.rx);
    }
    sp_corrupt(&w.tx, &s);
    int rc = 0;
    for (int i = 0; i < 4096 / 64 + 2; i++) {
      nexar__shm_rec_t r;
      rc = nexar__shm_ring_peek(&c.rx, &r);
      if (rc != 1) break;
      const uint8_t *p = r.payload;
      assert_true(p >= c.rx.data + 32 && p <= c.rx.data + c.rx.cap);
      assert_true(r.len <= (uint64_t)(c.rx.data + c.rx.cap - p));
      assert_true(r.type != NEXAR__SHM_PAD);
      recs++;
      nexar__shm_ring_pop(&c.rx);
    }
    if (rc < 0) {
      assert_int_equal(rc, NEXAR_ERR_PROTO);
      nexar__shm_rec_t r;
      assert_int_equal(nexar__shm_ring_peek(&c.rx, &r), NEXAR_ERR_PROTO);
      protos++;
    }
    munmap(g + 3 * 4096, 4096);
    nexar__shm_seg_close(&c);
    nexar__shm_seg_close(&w);
  }
  printf(
      "hostile (seeded): 4000 trials, %ld NEXAR_ERR_PROTO, %ld records "
      "accepted, %ld with a guard page\n",
      protos, recs, guards);
  assert_true(protos > 1000 && recs > 100); /* guards: where mmap allowed */
}

/* The same against a second process scribbling concurrently. */
static void test_hostile_process(void **state) {
  (void)state;
  long protos = 0, recs = 0;
  assert_int_equal(sp_hostile_run(1500, &protos, &recs), 0);
  printf("hostile (process): %ld NEXAR_ERR_PROTO, %ld records accepted\n",
         protos, recs);
  assert_true(protos >= 100);
}

static void test_stream(void **state) {
  (void)state;
  assert_int_equal(sp_stream_run(1ull << 30, 20000), 0);
}

static void test_pingpong(void **state) {
  (void)state;
  assert_int_equal(sp_pingpong_run(100000, 1000), 0);
}

static void test_cma(void **state) {
  (void)state;
  assert_int_equal(sp_cma_run(), 0);
}

static void test_peer_death(void **state) {
  (void)state;
  assert_int_equal(sp_death_run(), 0);
}

/* Every sleep of the consumer is ended by the producer's kick, with both
 * sides racing. */
static void test_wake_race(void **state) {
  (void)state;
  int sleeps = 0;
  assert_int_equal(sp_wake_run(30000, &sleeps), 0);
  assert_true(sleeps >= 300);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_basic),
      cmocka_unit_test(test_model),
      cmocka_unit_test(test_recycle),
      cmocka_unit_test(test_warm_unread),
      cmocka_unit_test(test_wakeup_flags),
      cmocka_unit_test(test_corrupt_cases),
      cmocka_unit_test(test_attach_refuses),
      cmocka_unit_test(test_segs_pair),
      cmocka_unit_test(test_fd_passing),
      cmocka_unit_test(test_hostile_seeded),
      cmocka_unit_test(test_hostile_process),
      cmocka_unit_test(test_stream),
      cmocka_unit_test(test_pingpong),
      cmocka_unit_test(test_cma),
      cmocka_unit_test(test_peer_death),
      cmocka_unit_test(test_wake_race),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
