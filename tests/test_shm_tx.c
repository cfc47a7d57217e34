/*
 * The sending half of a shared-memory link waits for room
 * (src/transport/shm_tx.c): a ring that waits has its producer flag up
 * whenever the engine blocks, so the consumer's next release kicks it.
 *
 * The consumer kicks at any release and takes the flag, also when what it
 * released leaves the producer short of what it waits for (half of the ring
 * unread for the data lane, half of it free after a record did not fit).
 * The producer then blocks again, and must raise the flag again first:
 * without that, both sides slept until the engine's 50 ms tick (bw 64 MiB
 * at np 4, about one run in five; docs/performance.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "transport/shm.h"

#define RING 4096u

/* A link's bulk segment (its producer's view) and the peer's view of it
 * (the consumer). */
static void open_link(nexar__shm_t *s, nexar__shm_seg_t *peer) {
  memset(s, 0, sizeof *s);
  assert_int_equal(nexar__shm_seg_create(RING, &s->seg), 0);
  int fd = dup(s->seg.fd);
  assert_true(fd >= 0);
  assert_int_equal(nexar__shm_seg_attach(fd, peer), 0);
}

static void close_link(nexar__shm_t *s, nexar__shm_seg_t *peer) {
  nexar__shm_seg_close(&s->seg);
  nexar__shm_seg_close(peer);
}

static void put_100(nexar__shm_t *s) {
  static uint8_t buf[100];
  struct iovec v = {buf, sizeof buf};
  assert_int_equal(nexar__shm_ring_put(&s->seg.tx, 1, 0, 0, 0, &v, 1), 0);
}

static void read_one(nexar__shm_seg_t *peer) {
  nexar__shm_rec_t r;
  assert_int_equal(nexar__shm_ring_peek(&peer->rx, &r), 1);
  nexar__shm_ring_pop(&peer->rx);
}

/* Releases records until |enough| says the producer has its room; the
 * last release must kick it. */
static void read_until(nexar__shm_t *s, nexar__shm_seg_t *peer,
                       bool (*enough)(nexar__shm_ring_t *)) {
  int n = 0;
  while (!enough(&s->seg.tx)) {
    assert_true(++n < 64);
    read_one(peer);
  }
  assert_true(nexar__shm_ring_need_kick_space(&peer->rx));
}

static bool half_unread(nexar__shm_ring_t *r) {
  return nexar__shm_ring_unread_within(r, RING / 2);
}

static bool half_free(nexar__shm_ring_t *r) {
  return nexar__shm_ring_has_free(r, RING / 2);
}

/* The data lane writes while at most half of its ring is unread. */
static void test_wait_unread(void **state) {
  (void)state;
  nexar__shm_t s;
  nexar__shm_seg_t peer;
  open_link(&s, &peer);
  for (int i = 0; i < 4 || half_unread(&s.seg.tx); i++) put_100(&s);
  for (int i = 0; i < 4; i++) put_100(&s); /* several releases short */
  s.tx_full[Q_BULK] = TX_UNREAD;
  assert_true(nexar__shm_tx_arm(&s)); /* no room: block */
  /* One release kicks (the flag was up) but leaves the producer short. */
  read_one(&peer);
  assert_true(nexar__shm_ring_need_kick_space(&peer.rx));
  assert_false(nexar__shm_tx_room(&s));
  /* Before it blocks again, the flag goes up again. */
  assert_true(nexar__shm_tx_arm(&s));
  read_until(&s, &peer, half_unread);
  assert_true(nexar__shm_tx_room(&s));
  s.l.want_write = false;
  assert_false(nexar__shm_tx_arm(&s)); /* room came: no block */
  assert_true(s.l.want_write);
  close_link(&s, &peer);
}

/* A record that did not fit waits until half of the ring is free. */
static void test_wait_fit(void **state) {
  (void)state;
  nexar__shm_t s;
  nexar__shm_seg_t peer;
  open_link(&s, &peer);
  static uint8_t buf[100];
  struct iovec v = {buf, sizeof buf};
  while (nexar__shm_ring_put(&s.seg.tx, 1, 0, 0, 0, &v, 1) == 0) {
  }
  s.tx_full[Q_BULK] = TX_FIT;
  assert_int_equal(nexar__shm_ring_producer_sleep(&s.seg.tx, 100), 1);
  read_one(&peer);
  assert_true(nexar__shm_ring_need_kick_space(&peer.rx));
  assert_false(nexar__shm_tx_room(&s)); /* one record free, not half */
  assert_true(nexar__shm_tx_arm(&s));
  read_until(&s, &peer, half_free);
  assert_true(nexar__shm_tx_room(&s));
  close_link(&s, &peer);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wait_unread),
      cmocka_unit_test(test_wait_fit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
