/*
 * Unit tests of the wire codec (src/wire/wire.c): round trips, exact byte
 * layout, truncation, single-field corruption, length bounds, and a bounded
 * random-input loop that checks every accepted input re-encodes to the same
 * bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "transport/quic.h" /* the RPC connection's note (quic_rpc.c) */
#include "wire/wire.h"

#define WADDR_BYTES 19u
#define ENTRY_BYTES (WADDR_BYTES + NEXAR__FP_BYTES)
#define HELLO_FIXED 97u
#define MAX_WORLD ((NEXAR__SEED_MAX_BODY - 8u) / ENTRY_BYTES)

/* ---- Deterministic PRNG (splitmix64) so failures are reproducible. */
static uint64_t rng_state;

static uint64_t rng(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void rng_fill(uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng();
}

/* ---- Sample values. */

static nexar__hdr_t sample_p2p(void) {
  nexar__hdr_t h;
  memset(&h, 0, sizeof h);
  h.kind = NEXAR__KIND_P2P;
  h.lane = NEXAR__LANE_DATA;
  h.dtype = NEXAR_FLOAT32;
  h.comm_id = 0x0102030405060708ull;
  h.src_rank = 7;
  h.tag = 42;
  h.seq = 99;
  h.payload_len = 1000;
  return h;
}

static nexar__hdr_t sample_coll(void) {
  nexar__hdr_t h;
  memset(&h, 0, sizeof h);
  h.kind = NEXAR__KIND_COLL;
  h.lane = NEXAR__LANE_DATA;
  h.coll_op = NEXAR__COLL_ALLREDUCE;
  h.dtype = NEXAR_BFLOAT16;
  h.redop = NEXAR_BXOR;
  h.comm_id = 3;
  h.src_rank = 1;
  h.tag = 0xffffffffu;
  h.seq = 5;
  h.coll_seq = 17;
  h.step = 3;
  h.count = 1u << 20;
  h.payload_len = 4096;
  return h;
}

static void assert_hdr_equal(const nexar__hdr_t *a, const nexar__hdr_t *b) {
  assert_int_equal(a->kind, b->kind);
  assert_int_equal(a->lane, b->lane);
  assert_int_equal(a->coll_op, b->coll_op);
  assert_int_equal(a->dtype, b->dtype);
  assert_int_equal(a->redop, b->redop);
  assert_true(a->comm_id == b->comm_id);
  assert_int_equal(a->src_rank, b->src_rank);
  assert_int_equal(a->tag, b->tag);
  assert_true(a->seq == b->seq);
  assert_true(a->coll_seq == b->coll_seq);
  assert_int_equal(a->step, b->step);
  assert_true(a->count == b->count);
  assert_true(a->payload_len == b->payload_len);
}

static nexar__waddr_t v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d,
                         uint16_t port) {
  nexar__waddr_t w;
  memset(&w, 0, sizeof w);
  w.family = 4;
  w.port = port;
  w.ip[0] = a;
  w.ip[1] = b;
  w.ip[2] = c;
  w.ip[3] = d;
  return w;
}

static nexar__waddr_t v6(uint8_t fill, uint16_t port) {
  nexar__waddr_t w;
  w.family = 6;
  w.port = port;
  for (int i = 0; i < 16; i++) w.ip[i] = (uint8_t)(fill + i);
  return w;
}

static void assert_waddr_equal(const nexar__waddr_t *a,
                               const nexar__waddr_t *b) {
  assert_int_equal(a->family, b->family);
  assert_int_equal(a->port, b->port);
  assert_memory_equal(a->ip, b->ip, a->family == 4 ? 4 : 16);
}

static nexar__seed_hello_t sample_hello(void) {
  nexar__seed_hello_t h;
  memset(&h, 0, sizeof h);
  for (unsigned i = 0; i < NEXAR__MAC_BYTES; i++) h.proof[i] = (uint8_t)i;
  h.rank = 3;
  h.world_size = 8;
  h.has_addr = 1;
  h.advertise = v4(10, 0, 0, 1, 4433);
  for (unsigned i = 0; i < NEXAR__FP_BYTES; i++)
    h.fingerprint[i] = (uint8_t)(0xa0 + i);
  h.pid = 12345;
  strcpy(h.host, "node-01.example");
  return h;
}

static void assert_hello_equal(const nexar__seed_hello_t *a,
                               const nexar__seed_hello_t *b) {
  assert_memory_equal(a->proof, b->proof, NEXAR__MAC_BYTES);
  assert_int_equal(a->rank, b->rank);
  assert_int_equal(a->world_size, b->world_size);
  assert_int_equal(a->has_addr, b->has_addr);
  assert_int_equal(a->join, b->join);
  if (a->has_addr) assert_waddr_equal(&a->advertise, &b->advertise);
  assert_memory_equal(a->fingerprint, b->fingerprint, NEXAR__FP_BYTES);
  assert_int_equal(a->pid, b->pid);
  assert_string_equal(a->host, b->host);
}

/* Large buffers shared by the tests (a full roster is about 1 MiB). */
static uint8_t big[NEXAR__SEED_FRAME_HDR + NEXAR__SEED_MAX_BODY + 64];
static nexar__roster_entry_t roster[MAX_WORLD + 2];

static void fill_roster(uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (i % 2 == 0)
      roster[i].addr = v4((uint8_t)i, (uint8_t)(i >> 8), 1, 2, (uint16_t)i);
    else
      roster[i].addr = v6((uint8_t)i, (uint16_t)(65535 - i));
    for (unsigned j = 0; j < NEXAR__FP_BYTES; j++)
      roster[i].fingerprint[j] = (uint8_t)(i * 31 + j);
  }
}

/* ---- Mesh header. */

static void test_hdr_layout(void **state) {
  (void)state;
  nexar__hdr_t h;
  uint8_t b[NEXAR__HDR_BYTES];
  memset(&h, 0, sizeof h);
  h.kind = 2;
  h.lane = 1;
  h.coll_op = 0x0b;
  h.dtype = 0x09;
  h.redop = 0x0a;
  h.comm_id = 0x1122334455667788ull;
  h.src_rank = 0xa1a2a3a4u;
  h.tag = 0xb1b2b3b4u;
  h.seq = 0xc1c2c3c4c5c6c7c8ull;
  h.coll_seq = 0xd1d2d3d4d5d6d7d8ull;
  h.step = 0xe1e2e3e4u;
  h.count = 0xf1f2f3f4f5f6f7f8ull;
  h.payload_len = 0x0102030405060708ull;
  memset(b, 0xee, sizeof b);
  nexar__hdr_encode(&h, b);
  static const uint8_t want[NEXAR__HDR_BYTES] = {
      0x4e, 0x58, 0x01, 0x02, 0x01, 0x0b, 0x09, 0x0a, /* 0 */
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* 8 comm_id */
      0xa4, 0xa3, 0xa2, 0xa1, 0xb4, 0xb3, 0xb2, 0xb1, /* 16 src, tag */
      0xc8, 0xc7, 0xc6, 0xc5, 0xc4, 0xc3, 0xc2, 0xc1, /* 24 seq */
      0xd8, 0xd7, 0xd6, 0xd5, 0xd4, 0xd3, 0xd2, 0xd1, /* 32 coll_seq */
      0xe4, 0xe3, 0xe2, 0xe1, 0x00, 0x00, 0x00, 0x00, /* 40 step, rsvd */
      0xf8, 0xf7, 0xf6, 0xf5, 0xf4, 0xf3, 0xf2, 0xf1, /* 48 count */
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* 56 payload */
  };
  assert_memory_equal(b, want, sizeof want);
}

static void hdr_roundtrip_one(const nexar__hdr_t *h, uint64_t max_payload) {
  uint8_t b[NEXAR__HDR_BYTES + 8];
  nexar__hdr_t d;
  const char *why = NULL;
  nexar__hdr_encode(h, b);
  memset(&d, 0x5a, sizeof d);
  assert_int_equal(
      nexar__hdr_decode(&d, b, NEXAR__HDR_BYTES, max_payload, &why),
      NEXAR__HDR_BYTES);
  assert_hdr_equal(h, &d);
  /* Trailing payload bytes are not consumed. */
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, max_payload, NULL),
                   NEXAR__HDR_BYTES);
}

static void test_hdr_roundtrip(void **state) {
  (void)state;
  nexar__hdr_t h = sample_p2p();
  hdr_roundtrip_one(&h, 1000);

  /* P2P extremes. */
  h.comm_id = UINT64_MAX;
  h.src_rank = UINT32_MAX;
  h.tag = NEXAR_TAG_MAX;
  h.seq = UINT64_MAX;
  h.payload_len = UINT64_MAX;
  h.dtype = NEXAR_NUM_DTYPES - 1;
  h.redop = NEXAR_NUM_OPS - 1;
  h.lane = NEXAR__LANE_CONTROL;
  hdr_roundtrip_one(&h, UINT64_MAX);
  memset(&h, 0, sizeof h);
  h.kind = NEXAR__KIND_P2P;
  hdr_roundtrip_one(&h, 0);

  /* COLL, every op and extremes. */
  h = sample_coll();
  for (unsigned op = 0; op <= NEXAR__COLL_MAX; op++) {
    h.coll_op = (uint8_t)op;
    hdr_roundtrip_one(&h, 4096);
  }
  h.coll_seq = UINT64_MAX;
  h.step = UINT32_MAX;
  h.count = UINT64_MAX;
  h.tag = 0;
  h.payload_len = 0;
  hdr_roundtrip_one(&h, 0);

  /* Every dtype and op value in range. */
  for (unsigned dt = 0; dt < NEXAR_NUM_DTYPES; dt++) {
    h.dtype = (uint8_t)dt;
    hdr_roundtrip_one(&h, 0);
  }
  for (unsigned op = 0; op < NEXAR_NUM_OPS; op++) {
    if (op > NEXAR_AVG && op < NEXAR_BAND) continue;
    h.redop = (uint8_t)op;
    hdr_roundtrip_one(&h, 0);
  }

  /* Heartbeat. */
  memset(&h, 0, sizeof h);
  h.kind = NEXAR__KIND_HEARTBEAT;
  h.lane = NEXAR__LANE_CONTROL;
  h.seq = 12;
  hdr_roundtrip_one(&h, 0);
}

static void test_hdr_truncated(void **state) {
  (void)state;
  nexar__hdr_t h = sample_coll(), d;
  uint8_t b[NEXAR__HDR_BYTES];
  nexar__hdr_encode(&h, b);
  for (size_t n = 0; n < NEXAR__HDR_BYTES; n++)
    assert_int_equal(nexar__hdr_decode(&d, b, n, UINT64_MAX, NULL), 0);
  assert_int_equal(nexar__hdr_decode(&d, NULL, 0, UINT64_MAX, NULL), 0);
}

/* Sets byte |off| of a valid encoding of |h| to |v| and expects a rejection
 * naming |field| (unless |v| keeps the header valid). */
static int hdr_try(const nexar__hdr_t *h, size_t off, uint8_t v,
                   const char **why) {
  uint8_t b[NEXAR__HDR_BYTES];
  nexar__hdr_t d;
  nexar__hdr_encode(h, b);
  b[off] = v;
  *why = NULL;
  return nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, why);
}

static void expect_hdr_reject(const nexar__hdr_t *h, size_t off, uint8_t v,
                              const char *field) {
  const char *why;
  assert_int_equal(hdr_try(h, off, v, &why), NEXAR_ERR_PROTO);
  assert_non_null(why);
  assert_string_equal(why, field);
}

static void test_hdr_corrupt(void **state) {
  (void)state;
  const nexar__hdr_t hs[3] = {sample_p2p(), sample_coll(), {0}};
  for (int k = 0; k < 3; k++) {
    nexar__hdr_t h = hs[k];
    if (k == 2) h.kind = NEXAR__KIND_HEARTBEAT;
    for (unsigned v = 0; v < 256; v++) {
      const char *why;
      if (v != 0x4e) expect_hdr_reject(&h, 0, (uint8_t)v, "magic");
      if (v != 0x58) expect_hdr_reject(&h, 1, (uint8_t)v, "magic");
      if (v != NEXAR__WIRE_VERSION)
        expect_hdr_reject(&h, 2, (uint8_t)v, "version");
      if (v == 0 || v > NEXAR__KIND_MAX)
        expect_hdr_reject(&h, 3, (uint8_t)v, "kind");
      /* The RPC lane carries RPC messages only. */
      if (v >= NEXAR__LANE_COUNT || v == NEXAR__LANE_RPC)
        expect_hdr_reject(&h, 4, (uint8_t)v, "lane");
      else
        assert_int_equal(hdr_try(&h, 4, (uint8_t)v, &why), NEXAR__HDR_BYTES);
      if (v > NEXAR__COLL_MAX) expect_hdr_reject(&h, 5, (uint8_t)v, "coll_op");
      if (v >= NEXAR_NUM_DTYPES)
        expect_hdr_reject(&h, 6, (uint8_t)v, "dtype");
      else
        assert_int_equal(hdr_try(&h, 6, (uint8_t)v, &why), NEXAR__HDR_BYTES);
      if (v >= NEXAR_NUM_OPS || (v > NEXAR_AVG && v < NEXAR_BAND))
        expect_hdr_reject(&h, 7, (uint8_t)v, "redop");
      else
        assert_int_equal(hdr_try(&h, 7, (uint8_t)v, &why), NEXAR__HDR_BYTES);
      /* algo: any byte value for COLL, zero for every other kind. */
      for (size_t off = 44; v != 0 && off < 48; off++) {
        if (k == 1 && off == 44)
          assert_int_equal(hdr_try(&h, off, (uint8_t)v, &why),
                           NEXAR__HDR_BYTES);
        else
          expect_hdr_reject(&h, off, (uint8_t)v, "algo");
      }
    }
  }
  /* A NULL |why| is allowed on the error path. */
  uint8_t b[NEXAR__HDR_BYTES];
  nexar__hdr_t h = sample_p2p(), d;
  nexar__hdr_encode(&h, b);
  b[0] ^= 1;
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, NULL),
                   NEXAR_ERR_PROTO);
  /* Invalid arguments. */
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(NULL, b, sizeof b, UINT64_MAX, NULL),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__hdr_decode(&d, NULL, 64, UINT64_MAX, NULL),
                   NEXAR_ERR_INVALID_ARG);
}

static void test_hdr_rules(void **state) {
  (void)state;
  uint8_t b[NEXAR__HDR_BYTES];
  nexar__hdr_t h, d;
  const char *why;

  /* payload_len bound. */
  h = sample_p2p();
  h.payload_len = 1000;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 1000, &why),
                   NEXAR__HDR_BYTES);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 999, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "payload_len");
  h.payload_len = UINT64_MAX;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX - 1, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "payload_len");

  /* Heartbeats carry no payload. */
  memset(&h, 0, sizeof h);
  h.kind = NEXAR__KIND_HEARTBEAT;
  h.payload_len = 1;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "payload_len");

  /* P2P: tag range and collective fields must be zero. */
  h = sample_p2p();
  h.tag = (uint32_t)NEXAR_TAG_MAX + 1;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "tag");
  h.tag = UINT32_MAX;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);

  h = sample_p2p();
  h.coll_op = 1;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "coll_op");
  h = sample_p2p();
  h.coll_seq = 1ull << 63;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "coll_seq");
  /* P2P modes (step): standard, synchronous, match acknowledgement, group
   * creation; nothing above. */
  h = sample_p2p();
  for (uint32_t mode = NEXAR__P2P_STANDARD; mode <= NEXAR__P2P_GROUP; mode++) {
    if (mode == NEXAR__P2P_MATCHED) continue;
    h.step = mode;
    nexar__hdr_encode(&h, b);
    assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                     NEXAR__HDR_BYTES);
    assert_int_equal(d.step, mode);
  }
  h.step = NEXAR__P2P_RDV_DATA + 1;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "step");
  /* Rendezvous: a first part gives the message's length (above its
   * payload, within the bound) in count; a later part its offset (the part
   * within the bound) and its first part's seq in coll_seq; data lane. */
  h = sample_p2p();
  h.step = NEXAR__P2P_RDV;
  h.count = 5000;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 5000, &why),
                   NEXAR__HDR_BYTES);
  assert_true(d.count == 5000 && nexar__msg_bytes(&d) == 5000);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 4999, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "count");
  expect_hdr_reject(&h, 4, NEXAR__LANE_CONTROL, "lane");
  h.count = h.payload_len;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "count");
  h = sample_p2p();
  h.step = NEXAR__P2P_RDV_DATA;
  h.count = 4000;
  h.coll_seq = 98;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 5000, &why),
                   NEXAR__HDR_BYTES);
  assert_true(d.coll_seq == 98 && nexar__msg_bytes(&d) == h.payload_len);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 4999, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "count");
  expect_hdr_reject(&h, 4, NEXAR__LANE_RPC, "lane");
  /* A match acknowledgement: control lane, tag 0, no payload, coll_seq =
   * the acknowledged seq; anything else is refused. */
  h = sample_p2p();
  h.step = NEXAR__P2P_MATCHED;
  h.lane = NEXAR__LANE_CONTROL;
  h.tag = 0;
  h.payload_len = 0;
  h.coll_seq = UINT64_MAX;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR__HDR_BYTES);
  assert_true(d.coll_seq == UINT64_MAX);
  expect_hdr_reject(&h, 4, NEXAR__LANE_DATA, "lane");
  expect_hdr_reject(&h, 20, 1, "tag");
  expect_hdr_reject(&h, 56, 1, "payload_len");
  h.step = NEXAR__P2P_SYNC; /* coll_seq is the acknowledgement's only */
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "coll_seq");
  h = sample_p2p();
  h.count = 1;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "count");

  /* Every single-byte change of a P2P tag, coll_seq, step or count byte that
   * makes the field non-zero (or the tag too large) is rejected. */
  h = sample_p2p();
  h.tag = 0;
  for (size_t off = 32; off < 56; off++) {
    if (off >= 44 && off < 48) continue; /* algo, tested above */
    /* The step's low byte: 1..3 are modes, 4 (RDV) needs a count. */
    assert_int_equal(hdr_try(&h, off, off == 40 ? 4 : 1, &why),
                     NEXAR_ERR_PROTO);
  }
  assert_int_equal(hdr_try(&h, 23, 0x80, &why), NEXAR_ERR_PROTO);
  assert_string_equal(why, "tag");
  assert_int_equal(hdr_try(&h, 23, 0x7f, &why), NEXAR__HDR_BYTES);

  /* COLL accepts any tag (root or ~0). */
  h = sample_coll();
  h.tag = UINT32_MAX;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR__HDR_BYTES);

  /* The output is untouched on failure. */
  h = sample_p2p();
  nexar__hdr_encode(&h, b);
  b[3] = 0;
  memset(&d, 0x33, sizeof d);
  nexar__hdr_t before = d;
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR_ERR_PROTO);
  assert_memory_equal(&d, &before, sizeof d);
}

/* RPC headers: a function id fits 16 bits, the RPC lane, no collective
 * operation, step request, response or part, and a request carries its
 * deadline budget (microseconds, at most NEXAR__RPC_BUDGET_MAX_US), not a
 * status. A first part of a message in parts (docs/topology.md section 10,
 * rule 7) has its length in algo (above its payload, within the bound); a
 * PART has algo 0 and its offset in count (its end within the bound). */
static void test_hdr_rpc(void **state) {
  (void)state;
  uint8_t b[NEXAR__HDR_BYTES];
  nexar__hdr_t h, d;
  const char *why;
  nexar__hdr_t ok = sample_p2p();
  ok.kind = NEXAR__KIND_RPC;
  ok.lane = NEXAR__LANE_RPC;
  ok.tag = 0xffff;
  ok.coll_seq = 0x123456789abcull; /* call id */
  ok.step = NEXAR__RPC_REQUEST;
  ok.count = NEXAR__RPC_BUDGET_MAX_US;
  nexar__hdr_encode(&ok, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR__HDR_BYTES);
  assert_int_equal(d.tag, 0xffff);
  assert_true(d.coll_seq == ok.coll_seq);
  assert_true(d.count == NEXAR__RPC_BUDGET_MAX_US);
  /* A response carries status | handler code << 32 in count. */
  h = ok;
  h.step = NEXAR__RPC_RESPONSE;
  h.count = (uint64_t)(uint32_t)-1234 << 32;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR__HDR_BYTES);
  assert_true(d.count == h.count);

  const struct {
    int field;
    const char *why;
  } cases[] = {{0, "tag"},  {1, "lane"},  {5, "lane"}, {2, "coll_op"},
               {3, "step"}, {4, "count"}, {6, "algo"}, {7, "algo"},
               {8, "algo"}, {9, "count"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    h = ok;
    switch (cases[i].field) {
      case 0:
        h.tag = 0x10000;
        break;
      case 1:
        h.lane = NEXAR__LANE_CONTROL;
        break;
      case 5:
        h.lane = NEXAR__LANE_DATA;
        break;
      case 2:
        h.coll_op = 1;
        break;
      case 3:
        h.step = NEXAR__RPC_PART + 1;
        break;
      case 6: /* a first part's length must exceed its payload */
        h.algo = (uint32_t)h.payload_len;
        break;
      case 7: /* a part carries no length */
        h.step = NEXAR__RPC_PART;
        h.count = 0;
        h.algo = 5000;
        break;
      case 8: /* beyond the payload bound */
        h.algo = 5001;
        h.payload_len = 10;
        break;
      case 9: /* a part ending beyond the payload bound */
        h.step = NEXAR__RPC_PART;
        h.count = 4991;
        h.payload_len = 10;
        break;
      default:
        h.count = NEXAR__RPC_BUDGET_MAX_US + 1; /* past INT32_MAX ms */
    }
    nexar__hdr_encode(&h, b);
    assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 5000, &why),
                     NEXAR_ERR_PROTO);
    assert_string_equal(why, cases[i].why);
  }
  /* A first part in parts gives its message's length; a part decodes. */
  h = ok;
  h.payload_len = 10;
  h.algo = 5000;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 5000, &why),
                   NEXAR__HDR_BYTES);
  assert_true(nexar__msg_parted(&d) && nexar__msg_bytes(&d) == 5000);
  h.step = NEXAR__RPC_PART;
  h.algo = 0;
  h.count = 4990;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 5000, &why),
                   NEXAR__HDR_BYTES);
  assert_true(!nexar__msg_parted(&d) && nexar__msg_bytes(&d) == 10);
  /* The payload bound applies to RPC like any kind. */
  h = ok;
  h.payload_len = 1001;
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 1000, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "payload_len");
}

/* FAILED and AGREE headers: control lane, a comm_id with the top bit set,
 * no collective operation; FAILED carries 8 bytes, AGREE a phase 1..3 and
 * 12 + 4 n bytes. */
static void test_hdr_ctl(void **state) {
  (void)state;
  uint8_t b[NEXAR__HDR_BYTES];
  nexar__hdr_t h, d;
  const char *why;
  nexar__hdr_t f = sample_p2p();
  f.kind = NEXAR__KIND_FAILED;
  f.lane = NEXAR__LANE_CONTROL;
  f.comm_id = UINT64_MAX;
  f.payload_len = NEXAR__FAILED_BYTES;
  nexar__hdr_encode(&f, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR__HDR_BYTES);
  assert_true(d.comm_id == UINT64_MAX);
  nexar__hdr_t a = f;
  a.kind = NEXAR__KIND_AGREE;
  a.comm_id = 7 | (1ull << 63);
  a.step = NEXAR__AG_READY;
  a.coll_seq = 3;
  a.payload_len = 12 + 4 * 5;
  nexar__hdr_encode(&a, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                   NEXAR__HDR_BYTES);
  assert_int_equal(d.step, NEXAR__AG_READY);

  const struct {
    int agree, field;
    const char *why;
  } cases[] = {{0, 0, "lane"},        {0, 1, "comm_id"},
               {0, 2, "coll_op"},     {0, 3, "payload_len"},
               {1, 4, "step"},        {1, 5, "step"},
               {1, 6, "payload_len"}, {1, 7, "payload_len"},
               {1, 8, "payload_len"}, {1, 1, "comm_id"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    h = cases[i].agree ? a : f;
    switch (cases[i].field) {
      case 0:
        h.lane = NEXAR__LANE_DATA;
        break;
      case 1:
        h.comm_id = 7; /* an ordinary communicator id */
        break;
      case 2:
        h.coll_op = NEXAR__COLL_BARRIER;
        break;
      case 3:
        h.payload_len = NEXAR__FAILED_BYTES + 1;
        break;
      case 4:
        h.step = 0;
        break;
      case 5:
        h.step = NEXAR__AG_READY + 1;
        break;
      case 6:
        h.payload_len = 11;
        break;
      case 7:
        h.payload_len = 12 + 4 * 5 + 2; /* not whole ids */
        break;
      default:
        h.payload_len = 12 + 4ull * (NEXAR__AGREE_MAX_IDS + 1);
    }
    nexar__hdr_encode(&h, b);
    assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                     NEXAR_ERR_PROTO);
    assert_string_equal(why, cases[i].why);
  }
}

/* ---- Seed frame header. */

/* RELAY headers (docs/wire-protocol.md section 2.6): origin, destination,
 * hops and hop limit; the bound on payload_len allows the envelope and the
 * inner header on top of the largest message; every other field zero. */
static nexar__hdr_t sample_relay(void) {
  nexar__hdr_t h;
  memset(&h, 0, sizeof h);
  h.kind = NEXAR__KIND_RELAY;
  h.lane = NEXAR__LANE_DATA;
  h.src_rank = 5;
  h.tag = 9;
  h.step = 2;
  h.algo = 6;
  h.payload_len = NEXAR__RELAY_PRE_BYTES + 1000;
  return h;
}

static void test_hdr_relay(void **state) {
  (void)state;
  uint8_t b[NEXAR__HDR_BYTES];
  nexar__hdr_t h = sample_relay(), d;
  const char *why;
  hdr_roundtrip_one(&h, 1000);
  /* The bound applies to the inner payload. */
  nexar__hdr_encode(&h, b);
  assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, 999, &why),
                   NEXAR_ERR_PROTO);
  assert_string_equal(why, "payload_len");
  h.payload_len = UINT64_MAX;
  hdr_roundtrip_one(&h, UINT64_MAX);
  h = sample_relay();
  h.lane = NEXAR__LANE_CONTROL;
  h.step = NEXAR__RELAY_MAX_HOPS;
  h.algo = NEXAR__RELAY_MAX_HOPS;
  h.payload_len = NEXAR__RELAY_PRE_BYTES;
  hdr_roundtrip_one(&h, 0);
  /* A relayed RPC message keeps its lane. */
  h.lane = NEXAR__LANE_RPC;
  hdr_roundtrip_one(&h, 0);
  /* A frame its origin holds end-to-end credit for. */
  h.count = 1;
  hdr_roundtrip_one(&h, 0);

  const struct {
    int field;
    const char *why;
  } cases[] = {{0, "comm_id"},  {1, "coll_op"},     {2, "coll_op"}, {3, "seq"},
               {4, "coll_seq"}, {5, "count"},       {6, "algo"},    {7, "step"},
               {8, "step"},     {9, "payload_len"}, {10, "algo"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    h = sample_relay();
    switch (cases[i].field) {
      case 0:
        h.comm_id = 1;
        break;
      case 1:
        h.coll_op = NEXAR__COLL_BARRIER;
        break;
      case 2:
        h.dtype = 1;
        break;
      case 3:
        h.seq = 1;
        break;
      case 4:
        h.coll_seq = 1;
        break;
      case 5:
        h.count = 2; /* 0 or 1: whether the origin holds credit for it */
        break;
      case 6:
        h.algo = 0;
        h.step = 0;
        break;
      case 7:
        h.step = 0;
        break;
      case 8:
        h.step = h.algo + 1; /* past the hop limit */
        break;
      case 9:
        h.payload_len = NEXAR__RELAY_PRE_BYTES - 1;
        break;
      case 10:
        h.algo = NEXAR__RELAY_MAX_HOPS + 1;
        break;
    }
    nexar__hdr_encode(&h, b);
    why = NULL;
    assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                     NEXAR_ERR_PROTO);
    assert_non_null(why);
    assert_string_equal(why, cases[i].why);
  }
  /* The envelope: digest then tag, 64 bytes. */
  nexar__relay_env_t e, e2;
  uint8_t eb[NEXAR__RELAY_ENV_BYTES];
  for (int i = 0; i < 32; i++) {
    e.payload_hash[i] = (uint8_t)i;
    e.tag[i] = (uint8_t)(0x80 + i);
  }
  nexar__relay_env_encode(&e, eb);
  assert_int_equal(eb[0], 0);
  assert_int_equal(eb[32], 0x80);
  nexar__relay_env_decode(&e2, eb);
  assert_memory_equal(&e, &e2, sizeof e);
}

/* CREDIT headers: process-level, control lane, the lane credited in tag
 * (data or RPC), the bytes in count, no payload. */
static void test_hdr_credit(void **state) {
  (void)state;
  uint8_t b[NEXAR__HDR_BYTES];
  nexar__hdr_t h, d;
  const char *why;
  memset(&h, 0, sizeof h);
  h.kind = NEXAR__KIND_CREDIT;
  h.lane = NEXAR__LANE_CONTROL;
  h.comm_id = UINT64_MAX;
  h.src_rank = 3;
  h.tag = NEXAR__LANE_DATA;
  h.count = 123456;
  hdr_roundtrip_one(&h, 0);
  h.tag = NEXAR__LANE_RPC;
  hdr_roundtrip_one(&h, 0);
  const char *whys[] = {"lane", "comm_id", "tag", "tag", "payload_len"};
  for (int i = 0; i < 5; i++) {
    nexar__hdr_t x = h;
    if (i == 0) x.lane = NEXAR__LANE_DATA;
    if (i == 1) x.comm_id = 0;
    if (i == 2) x.tag = NEXAR__LANE_CONTROL;
    if (i == 3) x.tag = 7;
    if (i == 4) x.payload_len = 8;
    nexar__hdr_encode(&x, b);
    why = NULL;
    assert_int_equal(nexar__hdr_decode(&d, b, sizeof b, UINT64_MAX, &why),
                     NEXAR_ERR_PROTO);
    assert_string_equal(why, whys[i]);
  }
}

static void test_seed_frame(void **state) {
  (void)state;
  uint8_t mac[NEXAR__MAC_BYTES] = {0};
  uint8_t b[64], type;
  uint32_t blen;
  int n = nexar__seed_proof_encode(mac, b, sizeof b);
  assert_int_equal(n, NEXAR__SEED_FRAME_HDR + NEXAR__MAC_BYTES);
  static const uint8_t want[8] = {0x4e, 0x58, 0x01, 0x01, 32, 0, 0, 0};
  assert_memory_equal(b, want, sizeof want);
  assert_int_equal(nexar__seed_frame_decode(b, 8, &type, &blen),
                   NEXAR__SEED_FRAME_HDR);
  assert_int_equal(type, NEXAR__SEED_PROOF);
  assert_int_equal(blen, NEXAR__MAC_BYTES);

  for (size_t k = 0; k < NEXAR__SEED_FRAME_HDR; k++)
    assert_int_equal(nexar__seed_frame_decode(b, k, &type, &blen), 0);

  for (unsigned v = 0; v < 256; v++) {
    uint8_t c[8];
    memcpy(c, want, 8);
    c[0] = (uint8_t)v;
    if (v != 0x4e)
      assert_int_equal(nexar__seed_frame_decode(c, 8, &type, &blen),
                       NEXAR_ERR_PROTO);
    memcpy(c, want, 8);
    c[1] = (uint8_t)v;
    if (v != 0x58)
      assert_int_equal(nexar__seed_frame_decode(c, 8, &type, &blen),
                       NEXAR_ERR_PROTO);
    memcpy(c, want, 8);
    c[2] = (uint8_t)v;
    if (v != 1)
      assert_int_equal(nexar__seed_frame_decode(c, 8, &type, &blen),
                       NEXAR_ERR_PROTO);
    memcpy(c, want, 8);
    c[3] = (uint8_t)v;
    assert_int_equal(nexar__seed_frame_decode(c, 8, &type, &blen),
                     (v >= 1 && v <= NEXAR__SEED_TYPE_MAX)
                         ? (int)NEXAR__SEED_FRAME_HDR
                         : NEXAR_ERR_PROTO);
    /* Any non-zero top byte of body_len exceeds the 1 MiB bound. */
    memcpy(c, want, 8);
    c[7] = (uint8_t)v;
    assert_int_equal(nexar__seed_frame_decode(c, 8, &type, &blen),
                     v == 0 ? (int)NEXAR__SEED_FRAME_HDR : NEXAR_ERR_PROTO);
  }

  /* body_len bound. */
  uint8_t c[8];
  memcpy(c, want, 8);
  nexar__put_u32(c + 4, NEXAR__SEED_MAX_BODY);
  assert_int_equal(nexar__seed_frame_decode(c, 8, &type, &blen),
                   NEXAR__SEED_FRAME_HDR);
  assert_int_equal(blen, NEXAR__SEED_MAX_BODY);
  nexar__put_u32(c + 4, NEXAR__SEED_MAX_BODY + 1);
  assert_int_equal(nexar__seed_frame_decode(c, 8, &type, &blen),
                   NEXAR_ERR_PROTO);
  nexar__put_u32(c + 4, UINT32_MAX);
  assert_int_equal(nexar__seed_frame_decode(c, 8, &type, &blen),
                   NEXAR_ERR_PROTO);

  assert_int_equal(nexar__seed_frame_decode(want, 8, NULL, &blen),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_frame_decode(want, 8, &type, NULL),
                   NEXAR_ERR_INVALID_ARG);
}

/* ---- Mismatch notice. */

static void test_notice(void **state) {
  (void)state;
  nexar__notice_t n = {17,
                       3,
                       0,
                       {NEXAR__COLL_ALLREDUCE, NEXAR_FLOAT32, NEXAR_SUM, 1,
                        0xffffffffu, 1024},
                       {NEXAR__COLL_BCAST, NEXAR_FLOAT32, 0, 4, 0, 1024}},
                  d;
  uint8_t b[NEXAR__NOTICE_BYTES];
  nexar__notice_encode(&n, b);
  assert_int_equal(nexar__notice_decode(&d, b, sizeof b), 0);
  assert_true(d.coll_seq == 17 && d.rank_a == 3 && d.rank_b == 0);
  assert_true(d.a.coll_op == NEXAR__COLL_ALLREDUCE && d.a.count == 1024 &&
              d.a.root == 0xffffffffu && d.a.algo == 1);
  assert_true(d.b.coll_op == NEXAR__COLL_BCAST && d.b.root == 0 &&
              d.b.algo == 4 && d.b.dtype == NEXAR_FLOAT32);
  /* Wrong length, out-of-range collective, dtype and op are refused. */
  assert_int_equal(nexar__notice_decode(&d, b, sizeof b - 1), NEXAR_ERR_PROTO);
  const size_t bad_off[] = {16, 17, 18, 32, 33, 34};
  const uint8_t bad_val[] = {NEXAR__COLL_MAX + 1, NEXAR_NUM_DTYPES, 5,
                             NEXAR__COLL_MAX + 1, NEXAR_NUM_DTYPES, 7};
  for (size_t i = 0; i < 6; i++) {
    uint8_t c[NEXAR__NOTICE_BYTES];
    memcpy(c, b, sizeof c);
    c[bad_off[i]] = bad_val[i];
    assert_int_equal(nexar__notice_decode(&d, c, sizeof c), NEXAR_ERR_PROTO);
  }
}

/* ---- PROOF. */

static void test_proof(void **state) {
  (void)state;
  uint8_t mac[NEXAR__MAC_BYTES], got[NEXAR__MAC_BYTES], b[64];
  uint8_t type;
  uint32_t blen;
  for (int k = 0; k < 3; k++) {
    memset(mac, k == 0 ? 0 : 0xff, sizeof mac);
    if (k == 2)
      for (unsigned i = 0; i < sizeof mac; i++) mac[i] = (uint8_t)(i * 7);
    int n = nexar__seed_proof_encode(mac, b, sizeof b);
    assert_int_equal(n, 40);
    assert_int_equal(nexar__seed_frame_decode(b, (size_t)n, &type, &blen), 8);
    assert_int_equal(type, NEXAR__SEED_PROOF);
    assert_int_equal(blen, 32);
    assert_int_equal(nexar__seed_proof_decode(got, b + 8, blen), 0);
    assert_memory_equal(got, mac, sizeof mac);
  }
  for (size_t n = 0; n < 32; n++)
    assert_int_equal(nexar__seed_proof_decode(got, b + 8, n), NEXAR_ERR_PROTO);
  assert_int_equal(nexar__seed_proof_decode(got, b, 33), NEXAR_ERR_PROTO);
  for (size_t cap = 0; cap < 40; cap++)
    assert_int_equal(nexar__seed_proof_encode(mac, b, cap),
                     NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_proof_encode(NULL, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_proof_encode(mac, NULL, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
}

/* ---- HELLO. */

static int hello_frame(const nexar__seed_hello_t *h, uint8_t *b, size_t cap) {
  int n = nexar__seed_hello_encode(h, b, cap);
  if (n > 0) {
    uint8_t type;
    uint32_t blen;
    assert_int_equal(nexar__seed_frame_decode(b, (size_t)n, &type, &blen), 8);
    assert_int_equal(type, NEXAR__SEED_HELLO);
    assert_int_equal(blen, (uint32_t)n - 8);
  }
  return n;
}

static void hello_roundtrip_one(const nexar__seed_hello_t *h) {
  uint8_t b[256];
  nexar__seed_hello_t d;
  int n = hello_frame(h, b, sizeof b);
  assert_int_equal(n, 8 + HELLO_FIXED + strlen(h->host));
  memset(&d, 0x77, sizeof d);
  assert_int_equal(nexar__seed_hello_decode(&d, b + 8, (size_t)n - 8), 0);
  assert_hello_equal(h, &d);
  /* Exactly the advertised prefix length of the encoder is needed. */
  for (int cap = 0; cap < n; cap++)
    assert_int_equal(nexar__seed_hello_encode(h, b, (size_t)cap),
                     NEXAR_ERR_INVALID_ARG);
}

static void test_hello_roundtrip(void **state) {
  (void)state;
  nexar__seed_hello_t h = sample_hello();
  hello_roundtrip_one(&h);

  h.rank = -1;
  h.world_size = 0;
  h.has_addr = 0;
  memset(&h.advertise, 0, sizeof h.advertise);
  h.host[0] = '\0';
  h.pid = 0;
  hello_roundtrip_one(&h);

  h = sample_hello();
  h.rank = (1 << 24) - 1;
  h.world_size = 1 << 24;
  h.advertise = v6(0xf0, 65535);
  h.pid = UINT32_MAX;
  memset(h.proof, 0xff, sizeof h.proof);
  memset(h.fingerprint, 0, sizeof h.fingerprint);
  for (unsigned i = 0; i < NEXAR__HOST_MAX; i++)
    h.host[i] = (char)(0x20 + (i * 3) % 95); /* all printable, incl ' ' '~' */
  h.host[NEXAR__HOST_MAX] = '\0';
  hello_roundtrip_one(&h);

  h = sample_hello();
  h.rank = 0;
  h.advertise = v4(255, 255, 255, 255, 0);
  hello_roundtrip_one(&h);

  /* The join flag, with and without an address: flags byte 3 and 2. */
  h = sample_hello();
  h.join = 1;
  hello_roundtrip_one(&h);
  uint8_t jb[256];
  assert_true(hello_frame(&h, jb, sizeof jb) > 0);
  assert_int_equal(jb[8 + 40], 3);
  h.has_addr = 0;
  memset(&h.advertise, 0, sizeof h.advertise);
  hello_roundtrip_one(&h);
  assert_true(hello_frame(&h, jb, sizeof jb) > 0);
  assert_int_equal(jb[8 + 40], 2);

  /* has_addr = 0 writes a zero address whatever the struct holds. */
  h = sample_hello();
  h.has_addr = 0;
  h.advertise = v6(1, 2);
  uint8_t b[256];
  int n = hello_frame(&h, b, sizeof b);
  assert_true(n > 0);
  for (unsigned i = 0; i < WADDR_BYTES; i++) assert_int_equal(b[8 + 41 + i], 0);
  nexar__seed_hello_t d;
  assert_int_equal(nexar__seed_hello_decode(&d, b + 8, (size_t)n - 8), 0);
  assert_int_equal(d.advertise.family, 0);

  /* An IPv4 address is written with a zero tail even if the struct is not. */
  h = sample_hello();
  memset(h.advertise.ip + 4, 0xcc, 12);
  n = hello_frame(&h, b, sizeof b);
  assert_true(n > 0);
  for (unsigned i = 7; i < WADDR_BYTES; i++) assert_int_equal(b[8 + 41 + i], 0);
  assert_int_equal(nexar__seed_hello_decode(&d, b + 8, (size_t)n - 8), 0);
}

/* The identity extension of HELLO: certificate and topology after the
 * host; a HELLO without it stays valid. */
static void test_hello_identity(void **state) {
  (void)state;
  static uint8_t b[8 + 512 + NEXAR__CERT_MAX], c[sizeof b];
  nexar__seed_hello_t h = sample_hello(), d;
  for (unsigned i = 0; i < 300; i++) h.cert[i] = (uint8_t)(i * 7);
  h.cert_len = 300;
  strcpy(h.topo, "kregular:4");
  int n = hello_frame(&h, b, sizeof b);
  assert_int_equal(n, 8 + HELLO_FIXED + strlen(h.host) + 3 + 300 + 10);
  size_t blen = (size_t)n - 8;
  assert_int_equal(nexar__seed_hello_decode(&d, b + 8, blen), 0);
  assert_hello_equal(&h, &d);
  assert_int_equal(d.cert_len, 300);
  assert_memory_equal(d.cert, h.cert, 300);
  assert_string_equal(d.topo, "kregular:4");
  /* Largest certificate and topology. */
  h.cert_len = NEXAR__CERT_MAX;
  memset(h.topo, 'k', NEXAR__TOPO_MAX);
  h.topo[NEXAR__TOPO_MAX] = '\0';
  n = hello_frame(&h, b, sizeof b);
  assert_true(n > 0);
  assert_int_equal(nexar__seed_hello_decode(&d, b + 8, (size_t)n - 8), 0);
  assert_int_equal(d.cert_len, NEXAR__CERT_MAX);
  /* Encoder: a topology without a certificate, too long, unprintable. */
  h = sample_hello();
  strcpy(h.topo, "hypercube");
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h.cert_len = NEXAR__CERT_MAX + 1;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h.cert_len = 10;
  h.topo[1] = '\n';
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  /* Decoder: every truncation of the extension, a byte too many, lengths
   * out of range, an unprintable topology. */
  h = sample_hello();
  h.cert_len = 40;
  strcpy(h.topo, "full");
  n = hello_frame(&h, b, sizeof b);
  blen = (size_t)n - 8;
  size_t ext = HELLO_FIXED + strlen(h.host);
  for (size_t k = ext + 1; k < blen; k++)
    assert_int_equal(nexar__seed_hello_decode(&d, b + 8, k), NEXAR_ERR_PROTO);
  memcpy(c, b + 8, blen);
  c[blen] = 'x';
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen + 1), NEXAR_ERR_PROTO);
  memcpy(c, b + 8, blen);
  nexar__put_u16(c + ext, 0);
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), NEXAR_ERR_PROTO);
  nexar__put_u16(c + ext, NEXAR__CERT_MAX + 1);
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), NEXAR_ERR_PROTO);
  memcpy(c, b + 8, blen);
  c[ext + 2 + 40] = NEXAR__TOPO_MAX + 1;
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), NEXAR_ERR_PROTO);
  memcpy(c, b + 8, blen);
  c[blen - 1] = 0x7f;
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), NEXAR_ERR_PROTO);
}

/* The certificate section of WELCOME: one (length, DER) per rank after the
 * entries, lengths 0 .. NEXAR__CERT_MAX, ending exactly with the body. */
static void test_welcome_certs(void **state) {
  (void)state;
  enum { WS = 5 };
  static uint8_t certs[WS][NEXAR__CERT_MAX];
  const uint8_t *pc[WS];
  uint16_t cl[WS] = {3, 0, NEXAR__CERT_MAX, 1, 200};
  for (int i = 0; i < WS; i++) {
    memset(certs[i], 0x30 + i, sizeof certs[i]);
    pc[i] = certs[i];
  }
  fill_roster(WS);
  int n =
      nexar__seed_welcome_encode_certs(2, WS, roster, pc, cl, big, sizeof big);
  size_t want = 8 + 8 + WS * ENTRY_BYTES;
  for (int i = 0; i < WS; i++) want += 2u + cl[i];
  assert_int_equal(n, (int)want);
  nexar__seed_welcome_t w;
  size_t blen = (size_t)n - 8;
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, blen), 0);
  assert_non_null(w.certs);
  size_t pos = 0;
  for (int i = 0; i < WS; i++) {
    const uint8_t *der;
    uint16_t len;
    assert_int_equal(nexar__welcome_cert(&w, &pos, &der, &len), 0);
    assert_int_equal(len, cl[i]);
    if (len) assert_memory_equal(der, certs[i], len);
  }
  const uint8_t *der;
  uint16_t len;
  assert_int_equal(nexar__welcome_cert(&w, &pos, &der, &len),
                   NEXAR_ERR_INVALID_ARG);
  /* Truncations inside the section and one byte too many. */
  size_t fixed = 8 + WS * ENTRY_BYTES;
  for (size_t k = fixed + 1; k < blen; k += 97)
    assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, k),
                     NEXAR_ERR_PROTO);
  big[8 + blen] = 0;
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, blen + 1),
                   NEXAR_ERR_PROTO);
  /* A length above the bound. */
  nexar__put_u16(big + 8 + fixed, NEXAR__CERT_MAX + 1);
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, blen),
                   NEXAR_ERR_PROTO);
  /* Without the section: no certificates to walk. */
  n = nexar__seed_welcome_encode(2, WS, roster, big, sizeof big);
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, (size_t)n - 8), 0);
  assert_null(w.certs);
  pos = 0;
  assert_int_equal(nexar__welcome_cert(&w, &pos, &der, &len),
                   NEXAR_ERR_INVALID_ARG);
  /* Encoder: a length above the bound, certificates without lengths. */
  cl[0] = NEXAR__CERT_MAX + 1;
  assert_int_equal(
      nexar__seed_welcome_encode_certs(2, WS, roster, pc, cl, big, sizeof big),
      NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_welcome_encode_certs(2, WS, roster, pc, NULL,
                                                    big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
}

static void test_hello_encode_invalid(void **state) {
  (void)state;
  uint8_t b[256];
  nexar__seed_hello_t h;

  h = sample_hello();
  h.rank = -2;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h.rank = 1 << 24;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h.rank = INT32_MIN;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h = sample_hello();
  h.world_size = -1;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h.world_size = (1 << 24) + 1;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h = sample_hello();
  h.has_addr = 2;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h = sample_hello();
  h.join = 2;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h = sample_hello();
  h.advertise.family = 5;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h = sample_hello();
  memset(h.host, 'a', sizeof h.host); /* unterminated: 65 chars */
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h = sample_hello();
  h.host[2] = '\n';
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h.host[2] = (char)0x80;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h = sample_hello();
  assert_int_equal(nexar__seed_hello_encode(NULL, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_hello_encode(&h, NULL, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
}

static void test_hello_decode_invalid(void **state) {
  (void)state;
  nexar__seed_hello_t h = sample_hello(), d;
  uint8_t b[256], c[256];
  int n = hello_frame(&h, b, sizeof b);
  size_t blen = (size_t)n - 8;
  const uint8_t *body = b + 8;

  /* Every truncation and one extra byte. */
  for (size_t k = 0; k < blen; k++)
    assert_int_equal(nexar__seed_hello_decode(&d, body, k), NEXAR_ERR_PROTO);
  memcpy(c, body, blen);
  c[blen] = 'x';
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen + 1), NEXAR_ERR_PROTO);

  /* Body offsets: proof 0, rank 32, world 36, has_addr 40, addr 41,
   * fingerprint 60, pid 92, host_len 96, host 97. */
#define HELLO_MUT(off, v, expect)                                      \
  do {                                                                 \
    memcpy(c, body, blen);                                             \
    c[(off)] = (uint8_t)(v);                                           \
    assert_int_equal(nexar__seed_hello_decode(&d, c, blen), (expect)); \
  } while (0)

  for (unsigned v = 0; v < 256; v++) {
    /* Top byte of rank: only 0 (small rank) or 0xff with -1 is valid. */
    HELLO_MUT(35, v, v == 0 ? 0 : NEXAR_ERR_PROTO);
    HELLO_MUT(39, v, v == 0 ? 0 : NEXAR_ERR_PROTO);
    /* Flags: bit 0 has_addr (the address is set), bit 1 join. */
    HELLO_MUT(40, v, v == 1 || v == 3 ? 0 : NEXAR_ERR_PROTO);
    HELLO_MUT(41, v, (v == 4 || v == 6) ? 0 : NEXAR_ERR_PROTO);
    for (unsigned off = 41 + 7; off < 60; off++)
      HELLO_MUT(off, v, v == 0 ? 0 : NEXAR_ERR_PROTO);
    HELLO_MUT(96, v, v == strlen(h.host) ? 0 : NEXAR_ERR_PROTO);
    HELLO_MUT(97, v, (v >= 0x20 && v <= 0x7e) ? 0 : NEXAR_ERR_PROTO);
  }
  /* Rank -1 is fine, -2 is not; world_size 2^24 fine, 2^24 + 1 not. */
  memcpy(c, body, blen);
  nexar__put_u32(c + 32, 0xffffffffu);
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), 0);
  assert_int_equal(d.rank, -1);
  nexar__put_u32(c + 32, 0xfffffffeu);
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), NEXAR_ERR_PROTO);
  nexar__put_u32(c + 32, 1u << 24);
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), NEXAR_ERR_PROTO);
  memcpy(c, body, blen);
  nexar__put_u32(c + 36, 1u << 24);
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), 0);
  nexar__put_u32(c + 36, (1u << 24) + 1);
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), NEXAR_ERR_PROTO);
  nexar__put_u32(c + 36, 0x80000000u);
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), NEXAR_ERR_PROTO);

  /* has_addr = 0 with a non-zero address byte. */
  h.has_addr = 0;
  n = hello_frame(&h, b, sizeof b);
  blen = (size_t)n - 8;
  for (unsigned off = 41; off < 60; off++)
    for (unsigned v = 1; v < 256; v += 17) HELLO_MUT(off, v, NEXAR_ERR_PROTO);

  /* host_len above the bound, with a body long enough to hold it. */
  memset(&h, 0, sizeof h);
  h = sample_hello();
  memset(h.host, 'h', NEXAR__HOST_MAX);
  h.host[NEXAR__HOST_MAX] = '\0';
  n = hello_frame(&h, b, sizeof b);
  blen = (size_t)n - 8;
  memcpy(c, body, blen);
  c[96] = NEXAR__HOST_MAX + 1;
  c[blen] = 'h';
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen + 1), NEXAR_ERR_PROTO);
  HELLO_MUT(96, 255, NEXAR_ERR_PROTO);
  /* A NUL inside the host. */
  HELLO_MUT(97 + 10, 0, NEXAR_ERR_PROTO);
  HELLO_MUT(97 + 63, 0x7f, NEXAR_ERR_PROTO);
#undef HELLO_MUT

  assert_int_equal(nexar__seed_hello_decode(NULL, body, blen),
                   NEXAR_ERR_INVALID_ARG);
}

/* ---- WELCOME. */

static void welcome_roundtrip_one(uint32_t rank, uint32_t ws) {
  nexar__seed_welcome_t w;
  nexar__roster_entry_t e;
  uint8_t type;
  uint32_t blen;
  fill_roster(ws);
  int n = nexar__seed_welcome_encode(rank, ws, roster, big, sizeof big);
  assert_int_equal(n, 8 + 8 + ws * ENTRY_BYTES);
  assert_int_equal(nexar__seed_frame_decode(big, (size_t)n, &type, &blen), 8);
  assert_int_equal(type, NEXAR__SEED_WELCOME);
  assert_int_equal(blen, (uint32_t)n - 8);
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, blen), 0);
  assert_int_equal(w.rank, rank);
  assert_int_equal(w.world_size, ws);
  assert_ptr_equal(w.entries, big + 16);
  for (uint32_t i = 0; i < ws; i++) {
    assert_int_equal(nexar__welcome_entry(&w, i, &e), 0);
    assert_waddr_equal(&e.addr, &roster[i].addr);
    assert_memory_equal(e.fingerprint, roster[i].fingerprint, NEXAR__FP_BYTES);
  }
  assert_int_equal(nexar__welcome_entry(&w, ws, &e), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__welcome_entry(&w, UINT32_MAX, &e),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(
      nexar__seed_welcome_encode(rank, ws, roster, big, (size_t)n - 1),
      NEXAR_ERR_INVALID_ARG);
}

static void test_welcome_roundtrip(void **state) {
  (void)state;
  welcome_roundtrip_one(0, 1);
  welcome_roundtrip_one(0, 2);
  welcome_roundtrip_one(1, 2);
  welcome_roundtrip_one(4, 7);
  welcome_roundtrip_one(0, MAX_WORLD);
  welcome_roundtrip_one(MAX_WORLD - 1, MAX_WORLD);
  /* One entry more than fits in the body bound. */
  fill_roster(MAX_WORLD + 1);
  assert_int_equal(
      nexar__seed_welcome_encode(0, MAX_WORLD + 1, roster, big, sizeof big),
      NEXAR_ERR_INVALID_ARG);
  assert_int_equal(
      nexar__seed_welcome_encode(0, UINT32_MAX, roster, big, sizeof big),
      NEXAR_ERR_INVALID_ARG);
}

static void test_welcome_invalid(void **state) {
  (void)state;
  nexar__seed_welcome_t w;
  uint8_t c[8 + 8 * ENTRY_BYTES + 8];
  fill_roster(3);

  /* Encoder. */
  assert_int_equal(nexar__seed_welcome_encode(3, 3, roster, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_welcome_encode(0, 0, roster, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_welcome_encode(0, 3, NULL, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  roster[2].addr.family = 0;
  assert_int_equal(nexar__seed_welcome_encode(0, 3, roster, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  fill_roster(3);

  int n = nexar__seed_welcome_encode(1, 3, roster, big, sizeof big);
  assert_true(n > 0);
  size_t blen = (size_t)n - 8;
  const uint8_t *body = big + 8;

  for (size_t k = 0; k < blen; k++)
    assert_int_equal(nexar__seed_welcome_decode(&w, body, k), NEXAR_ERR_PROTO);
  memcpy(c, body, blen);
  c[blen] = 0;
  assert_int_equal(nexar__seed_welcome_decode(&w, c, blen + 1),
                   NEXAR_ERR_PROTO);

  /* rank >= world_size, world_size 0, world_size not matching length. */
  memcpy(c, body, blen);
  nexar__put_u32(c, 3);
  assert_int_equal(nexar__seed_welcome_decode(&w, c, blen), NEXAR_ERR_PROTO);
  nexar__put_u32(c, UINT32_MAX);
  assert_int_equal(nexar__seed_welcome_decode(&w, c, blen), NEXAR_ERR_PROTO);
  memcpy(c, body, blen);
  nexar__put_u32(c, 0);
  nexar__put_u32(c + 4, 0);
  assert_int_equal(nexar__seed_welcome_decode(&w, c, 8), NEXAR_ERR_PROTO);
  assert_int_equal(nexar__seed_welcome_decode(&w, c, blen), NEXAR_ERR_PROTO);
  for (uint32_t ws = 1; ws < 300; ws++) {
    if (ws == 3) continue;
    memcpy(c, body, blen);
    nexar__put_u32(c + 4, ws);
    assert_int_equal(nexar__seed_welcome_decode(&w, c, blen), NEXAR_ERR_PROTO);
  }
  /* A world size whose entry bytes overflow 32 bits. */
  memcpy(c, body, blen);
  nexar__put_u32(c + 4, 0x80000000u);
  assert_int_equal(nexar__seed_welcome_decode(&w, c, blen), NEXAR_ERR_PROTO);

  /* Bad family or IPv4 tail in any entry. */
  for (uint32_t i = 0; i < 3; i++) {
    size_t e = 8 + i * ENTRY_BYTES;
    for (unsigned v = 0; v < 256; v++) {
      memcpy(c, body, blen);
      c[e] = (uint8_t)v;
      int want = (v == 4 || v == 6) ? 0 : NEXAR_ERR_PROTO;
      /* Entry 1 is IPv6 with non-zero tail bytes, so it cannot become v4. */
      if (v == 4 && i == 1) want = NEXAR_ERR_PROTO;
      assert_int_equal(nexar__seed_welcome_decode(&w, c, blen), want);
    }
    if (roster[i].addr.family == 4) {
      for (size_t off = 7; off < WADDR_BYTES; off++) {
        memcpy(c, body, blen);
        c[e + off] = 1;
        assert_int_equal(nexar__seed_welcome_decode(&w, c, blen),
                         NEXAR_ERR_PROTO);
      }
    }
  }

  /* welcome_entry re-checks the family of a hand-made welcome. */
  memcpy(c, body, blen);
  assert_int_equal(nexar__seed_welcome_decode(&w, c, blen), 0);
  c[8] = 9;
  nexar__roster_entry_t e;
  assert_int_equal(nexar__welcome_entry(&w, 0, &e), NEXAR_ERR_PROTO);
  assert_int_equal(nexar__welcome_entry(&w, 1, &e), 0);
  assert_int_equal(nexar__welcome_entry(NULL, 0, &e), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__welcome_entry(&w, 0, NULL), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_welcome_decode(NULL, body, blen),
                   NEXAR_ERR_INVALID_ARG);
}

/* ---- REJECT. */

static void reject_roundtrip_one(int32_t code, const char *reason) {
  uint8_t b[512], type;
  uint32_t blen;
  nexar__seed_reject_t r;
  int n = nexar__seed_reject_encode(code, reason, b, sizeof b);
  assert_int_equal(n, 8 + 6 + strlen(reason));
  assert_int_equal(nexar__seed_frame_decode(b, (size_t)n, &type, &blen), 8);
  assert_int_equal(type, NEXAR__SEED_REJECT);
  memset(&r, 0x41, sizeof r);
  assert_int_equal(nexar__seed_reject_decode(&r, b + 8, blen), 0);
  assert_int_equal(r.code, code);
  assert_string_equal(r.reason, reason);
  for (size_t k = 0; k < blen; k++)
    assert_int_equal(nexar__seed_reject_decode(&r, b + 8, k), NEXAR_ERR_PROTO);
  b[n] = 'x';
  assert_int_equal(nexar__seed_reject_decode(&r, b + 8, blen + 1),
                   NEXAR_ERR_PROTO);
  for (int cap = 0; cap < n; cap++)
    assert_int_equal(nexar__seed_reject_encode(code, reason, b, (size_t)cap),
                     NEXAR_ERR_INVALID_ARG);
}

static void test_reject(void **state) {
  (void)state;
  char longr[NEXAR__REASON_MAX + 2];
  reject_roundtrip_one(NEXAR_ERR_AUTH, "bad secret");
  reject_roundtrip_one(-1, "");
  reject_roundtrip_one(INT32_MIN, "~ !");
  memset(longr, 'r', NEXAR__REASON_MAX);
  longr[NEXAR__REASON_MAX] = '\0';
  reject_roundtrip_one(NEXAR_ERR_PROTO, longr);

  uint8_t b[512];
  nexar__seed_reject_t r;
  /* NULL reason is an empty reason. */
  assert_int_equal(nexar__seed_reject_encode(-3, NULL, b, sizeof b), 14);
  /* Encoder range checks. */
  assert_int_equal(nexar__seed_reject_encode(0, "x", b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_reject_encode(INT32_MAX, "x", b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  longr[NEXAR__REASON_MAX] = 'r';
  longr[NEXAR__REASON_MAX + 1] = '\0';
  assert_int_equal(nexar__seed_reject_encode(-1, longr, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_reject_encode(-1, "a\tb", b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_reject_encode(-1, "\xc3\xa9", b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);

  /* Decoder: code sign, reason_len bound and text. */
  int n = nexar__seed_reject_encode(-8, "nope", b, sizeof b);
  size_t blen = (size_t)n - 8;
  uint8_t c[512];
  for (unsigned v = 0; v < 256; v++) {
    memcpy(c, b + 8, blen);
    c[3] = (uint8_t)v;
    assert_int_equal(nexar__seed_reject_decode(&r, c, blen),
                     v >= 0x80 ? 0 : NEXAR_ERR_PROTO);
    memcpy(c, b + 8, blen);
    c[6] = (uint8_t)v;
    assert_int_equal(nexar__seed_reject_decode(&r, c, blen),
                     (v >= 0x20 && v <= 0x7e) ? 0 : NEXAR_ERR_PROTO);
    memcpy(c, b + 8, blen);
    c[5] = (uint8_t)v;
    assert_int_equal(nexar__seed_reject_decode(&r, c, blen),
                     v == 0 ? 0 : NEXAR_ERR_PROTO);
  }
  /* reason_len of 257 with enough bytes behind it. */
  memset(c, 'a', sizeof c);
  nexar__put_u32(c, (uint32_t)-1);
  nexar__put_u16(c + 4, NEXAR__REASON_MAX + 1);
  assert_int_equal(nexar__seed_reject_decode(&r, c, 6 + NEXAR__REASON_MAX + 1),
                   NEXAR_ERR_PROTO);
  nexar__put_u16(c + 4, NEXAR__REASON_MAX);
  assert_int_equal(nexar__seed_reject_decode(&r, c, 6 + NEXAR__REASON_MAX), 0);
  assert_int_equal(strlen(r.reason), NEXAR__REASON_MAX);
  assert_int_equal(nexar__seed_reject_decode(NULL, c, 6),
                   NEXAR_ERR_INVALID_ARG);
}

/* ---- Elastic: ADMIT, ADMITTED, JOIN. */

#define ADMIT_FIXED 52u
#define JOINER_BYTES (4u + ENTRY_BYTES)
#define JOIN_FIXED 24u
#define MAX_IDS NEXAR__ELASTIC_MAX_IDS

static uint32_t ids[MAX_IDS + 2];
static nexar__joiner_t joiners[MAX_IDS + 2];

static nexar__seed_admit_t sample_admit(uint32_t nstay) {
  nexar__seed_admit_t a;
  memset(&a, 0, sizeof a);
  for (unsigned i = 0; i < NEXAR__MAC_BYTES; i++) a.proof[i] = (uint8_t)(7 * i);
  a.comm_id = 0x0102030405060708ull;
  a.epoch = 3;
  a.max_joiners = 2;
  a.nstay = nstay;
  /* Distinct, not in order. */
  for (uint32_t i = 0; i < nstay; i++) ids[i] = (i * 7919u) % MAX_IDS;
  return a;
}

static void admit_roundtrip_one(uint32_t nstay, uint32_t max_joiners) {
  nexar__seed_admit_t a = sample_admit(nstay), d;
  a.max_joiners = max_joiners;
  uint8_t type;
  uint32_t blen;
  int n = nexar__seed_admit_encode(&a, ids, big, sizeof big);
  assert_int_equal(n, 8 + ADMIT_FIXED + 4 * nstay);
  assert_int_equal(nexar__seed_frame_decode(big, (size_t)n, &type, &blen), 8);
  assert_int_equal(type, NEXAR__SEED_ADMIT);
  memset(&d, 0x55, sizeof d);
  assert_int_equal(nexar__seed_admit_decode(&d, big + 8, blen), 0);
  assert_memory_equal(d.proof, a.proof, NEXAR__MAC_BYTES);
  assert_true(d.comm_id == a.comm_id);
  assert_int_equal(d.epoch, a.epoch);
  assert_int_equal(d.max_joiners, max_joiners);
  assert_int_equal(d.nstay, nstay);
  for (uint32_t i = 0; i < nstay; i++)
    assert_int_equal(nexar__id_at(d.ids, i), ids[i]);
  assert_int_equal(nexar__seed_admit_encode(&a, ids, big, (size_t)n - 1),
                   NEXAR_ERR_INVALID_ARG);
}

static void test_admit(void **state) {
  (void)state;
  admit_roundtrip_one(1, 0);
  admit_roundtrip_one(4, NEXAR__JOIN_UNLIMITED);
  admit_roundtrip_one(MAX_IDS, 5);

  /* Encoder bounds. */
  nexar__seed_admit_t a = sample_admit(3);
  a.nstay = 0;
  assert_int_equal(nexar__seed_admit_encode(&a, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  a.nstay = MAX_IDS + 1;
  assert_int_equal(nexar__seed_admit_encode(&a, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  a = sample_admit(3);
  a.comm_id = 0;
  assert_int_equal(nexar__seed_admit_encode(&a, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  a = sample_admit(3);
  a.epoch = 0;
  assert_int_equal(nexar__seed_admit_encode(&a, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  a = sample_admit(3);
  ids[2] = ids[0]; /* duplicate */
  assert_int_equal(nexar__seed_admit_encode(&a, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  a = sample_admit(3);
  ids[1] = MAX_IDS;
  assert_int_equal(nexar__seed_admit_encode(&a, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_admit_encode(NULL, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_admit_encode(&a, NULL, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);

  /* Decoder: truncation, extension, each field. */
  a = sample_admit(3);
  int n = nexar__seed_admit_encode(&a, ids, big, sizeof big);
  size_t blen = (size_t)n - 8;
  uint8_t c[128];
  nexar__seed_admit_t d;
  for (size_t k = 0; k < blen; k++)
    assert_int_equal(nexar__seed_admit_decode(&d, big + 8, k), NEXAR_ERR_PROTO);
  memcpy(c, big + 8, blen);
  c[blen] = 0;
  assert_int_equal(nexar__seed_admit_decode(&d, c, blen + 1), NEXAR_ERR_PROTO);
#define ADMIT_PUT(off, put, v, expect)                                 \
  do {                                                                 \
    memcpy(c, big + 8, blen);                                          \
    put(c + (off), v);                                                 \
    assert_int_equal(nexar__seed_admit_decode(&d, c, blen), (expect)); \
  } while (0)
  ADMIT_PUT(32, nexar__put_u64, 0, NEXAR_ERR_PROTO); /* comm_id */
  ADMIT_PUT(32, nexar__put_u64, UINT64_MAX, 0);
  ADMIT_PUT(40, nexar__put_u32, 0, NEXAR_ERR_PROTO); /* epoch */
  ADMIT_PUT(44, nexar__put_u32, 0, 0);               /* max_joiners */
  ADMIT_PUT(48, nexar__put_u32, 2, NEXAR_ERR_PROTO); /* nstay vs len */
  ADMIT_PUT(48, nexar__put_u32, 0, NEXAR_ERR_PROTO);
  ADMIT_PUT(48, nexar__put_u32, UINT32_MAX, NEXAR_ERR_PROTO);
  ADMIT_PUT(52, nexar__put_u32, ids[1], NEXAR_ERR_PROTO);  /* duplicate */
  ADMIT_PUT(56, nexar__put_u32, MAX_IDS, NEXAR_ERR_PROTO); /* bound */
  ADMIT_PUT(56, nexar__put_u32, MAX_IDS - 1, 0);
#undef ADMIT_PUT
  assert_int_equal(nexar__seed_admit_decode(NULL, big + 8, blen),
                   NEXAR_ERR_INVALID_ARG);
}

static void fill_joiners(uint32_t first, uint32_t n) {
  fill_roster(n);
  for (uint32_t i = 0; i < n; i++) {
    joiners[i].id = first + i;
    joiners[i].e = roster[i];
  }
}

static void admitted_roundtrip_one(uint32_t nids, uint32_t first, uint32_t k) {
  nexar__seed_admitted_t a;
  nexar__joiner_t j;
  uint8_t type;
  uint32_t blen;
  fill_joiners(first, k);
  int n = nexar__seed_admitted_encode(nids, joiners, k, big, sizeof big);
  assert_int_equal(n, 8 + 8 + k * JOINER_BYTES);
  assert_int_equal(nexar__seed_frame_decode(big, (size_t)n, &type, &blen), 8);
  assert_int_equal(type, NEXAR__SEED_ADMITTED);
  assert_int_equal(nexar__seed_admitted_decode(&a, big + 8, blen), 0);
  assert_int_equal(a.nids, nids);
  assert_int_equal(a.njoin, k);
  for (uint32_t i = 0; i < k; i++) {
    assert_int_equal(nexar__admitted_entry(&a, i, &j), 0);
    assert_int_equal(j.id, first + i);
    assert_waddr_equal(&j.e.addr, &roster[i].addr);
    assert_memory_equal(j.e.fingerprint, roster[i].fingerprint,
                        NEXAR__FP_BYTES);
  }
  assert_int_equal(nexar__admitted_entry(&a, k, &j), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(
      nexar__seed_admitted_encode(nids, joiners, k, big, (size_t)n - 1),
      NEXAR_ERR_INVALID_ARG);
}

static void test_admitted(void **state) {
  (void)state;
  admitted_roundtrip_one(4, 4, 0); /* nobody admitted */
  admitted_roundtrip_one(6, 4, 2);
  admitted_roundtrip_one(MAX_IDS, 0, MAX_IDS);

  /* Encoder: njoin > nids, ids out of order or range, bad address. */
  fill_joiners(4, 3);
  assert_int_equal(nexar__seed_admitted_encode(2, joiners, 3, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_admitted_encode(6, joiners, 3, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(
      nexar__seed_admitted_encode(MAX_IDS + 1, joiners, 3, big, sizeof big),
      NEXAR_ERR_INVALID_ARG);
  joiners[2].id = 4;
  assert_int_equal(nexar__seed_admitted_encode(7, joiners, 3, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  fill_joiners(4, 3);
  joiners[1].e.addr.family = 5;
  assert_int_equal(nexar__seed_admitted_encode(7, joiners, 3, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_admitted_encode(7, NULL, 3, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);

  /* Decoder. */
  fill_joiners(4, 3);
  int n = nexar__seed_admitted_encode(7, joiners, 3, big, sizeof big);
  size_t blen = (size_t)n - 8;
  uint8_t c[8 + 3 * JOINER_BYTES + 8];
  nexar__seed_admitted_t a;
  for (size_t k = 0; k < blen; k++)
    assert_int_equal(nexar__seed_admitted_decode(&a, big + 8, k),
                     NEXAR_ERR_PROTO);
  memcpy(c, big + 8, blen);
  c[blen] = 0;
  assert_int_equal(nexar__seed_admitted_decode(&a, c, blen + 1),
                   NEXAR_ERR_PROTO);
#define ADM_PUT(off, v, expect)                                           \
  do {                                                                    \
    memcpy(c, big + 8, blen);                                             \
    nexar__put_u32(c + (off), v);                                         \
    assert_int_equal(nexar__seed_admitted_decode(&a, c, blen), (expect)); \
  } while (0)
  ADM_PUT(0, 6, NEXAR_ERR_PROTO); /* joiner id 6 not below nids */
  ADM_PUT(0, 2, NEXAR_ERR_PROTO); /* njoin > nids */
  ADM_PUT(0, MAX_IDS + 1, NEXAR_ERR_PROTO);
  ADM_PUT(4, 2, NEXAR_ERR_PROTO); /* njoin vs length */
  ADM_PUT(4, UINT32_MAX, NEXAR_ERR_PROTO);
  ADM_PUT(8 + JOINER_BYTES, 4, NEXAR_ERR_PROTO); /* not ascending */
  ADM_PUT(8, 0, 0);                              /* any ascending ids */
#undef ADM_PUT
  memcpy(c, big + 8, blen);
  c[8 + JOINER_BYTES + 4] = 9; /* address family of joiner 1 */
  assert_int_equal(nexar__seed_admitted_decode(&a, c, blen), NEXAR_ERR_PROTO);
  assert_int_equal(nexar__seed_admitted_decode(NULL, c, blen),
                   NEXAR_ERR_INVALID_ARG);
}

static nexar__seed_join_t sample_join(uint32_t nids, uint32_t nmembers) {
  nexar__seed_join_t j;
  memset(&j, 0, sizeof j);
  j.nids = nids;
  j.nmembers = nmembers;
  j.comm_id = 9;
  j.epoch = 2;
  fill_roster(nids);
  /* Members: the last nmembers ids, the joiner the last of them. */
  for (uint32_t i = 0; i < nmembers; i++) ids[i] = nids - nmembers + i;
  j.id = nids - 1;
  return j;
}

static void join_roundtrip_one(uint32_t nids, uint32_t nmembers) {
  nexar__seed_join_t j = sample_join(nids, nmembers), d;
  nexar__roster_entry_t e;
  uint8_t type;
  uint32_t blen;
  int n = nexar__seed_join_encode(&j, roster, ids, big, sizeof big);
  assert_int_equal(n, 8 + JOIN_FIXED + nids * ENTRY_BYTES + 4 * nmembers);
  assert_int_equal(nexar__seed_frame_decode(big, (size_t)n, &type, &blen), 8);
  assert_int_equal(type, NEXAR__SEED_JOIN);
  assert_int_equal(nexar__seed_join_decode(&d, big + 8, blen), 0);
  assert_int_equal(d.id, j.id);
  assert_int_equal(d.nids, nids);
  assert_true(d.comm_id == 9);
  assert_int_equal(d.epoch, 2);
  assert_int_equal(d.nmembers, nmembers);
  for (uint32_t i = 0; i < nids; i++) {
    assert_int_equal(nexar__join_entry(&d, i, &e), 0);
    assert_waddr_equal(&e.addr, &roster[i].addr);
    assert_memory_equal(e.fingerprint, roster[i].fingerprint, NEXAR__FP_BYTES);
  }
  for (uint32_t i = 0; i < nmembers; i++)
    assert_int_equal(nexar__id_at(d.members, i), ids[i]);
  assert_int_equal(nexar__join_entry(&d, nids, &e), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_join_encode(&j, roster, ids, big, (size_t)n - 1),
                   NEXAR_ERR_INVALID_ARG);
}

static void test_join(void **state) {
  (void)state;
  join_roundtrip_one(1, 1);
  join_roundtrip_one(6, 6);
  join_roundtrip_one(9, 5); /* ids 0..3 departed */
  join_roundtrip_one(MAX_IDS, MAX_IDS);

  /* Encoder. */
  nexar__seed_join_t j = sample_join(6, 6);
  j.id = 6;
  assert_int_equal(nexar__seed_join_encode(&j, roster, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  j = sample_join(6, 6);
  j.nmembers = 7;
  assert_int_equal(nexar__seed_join_encode(&j, roster, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  j = sample_join(6, 5);
  ids[4] = 0; /* the joiner (5) is not a member */
  assert_int_equal(nexar__seed_join_encode(&j, roster, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  j = sample_join(6, 3);
  ids[0] = ids[1];
  assert_int_equal(nexar__seed_join_encode(&j, roster, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  j = sample_join(6, 3);
  roster[0].addr.family = 0;
  assert_int_equal(nexar__seed_join_encode(&j, roster, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  j = sample_join(6, 3);
  j.epoch = 0;
  assert_int_equal(nexar__seed_join_encode(&j, roster, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);
  j = sample_join(MAX_IDS + 1, 1);
  assert_int_equal(nexar__seed_join_encode(&j, roster, ids, big, sizeof big),
                   NEXAR_ERR_INVALID_ARG);

  /* Decoder: 4 ids, members 1, 2, 3 (joiner 3). Offsets: id 0, nids 4,
   * comm_id 8, epoch 16, nmembers 20, entries 24, members 24 + 4 * 51. */
  j = sample_join(4, 3);
  int n = nexar__seed_join_encode(&j, roster, ids, big, sizeof big);
  size_t blen = (size_t)n - 8;
  size_t mo = JOIN_FIXED + 4 * ENTRY_BYTES;
  uint8_t c[JOIN_FIXED + 4 * ENTRY_BYTES + 16 + 8];
  nexar__seed_join_t d;
  for (size_t k = 0; k < blen; k++)
    assert_int_equal(nexar__seed_join_decode(&d, big + 8, k), NEXAR_ERR_PROTO);
  memcpy(c, big + 8, blen);
  c[blen] = 0;
  assert_int_equal(nexar__seed_join_decode(&d, c, blen + 1), NEXAR_ERR_PROTO);
#define JOIN_PUT(off, v, expect)                                      \
  do {                                                                \
    memcpy(c, big + 8, blen);                                         \
    nexar__put_u32(c + (off), v);                                     \
    assert_int_equal(nexar__seed_join_decode(&d, c, blen), (expect)); \
  } while (0)
  JOIN_PUT(0, 4, NEXAR_ERR_PROTO); /* id >= nids */
  JOIN_PUT(0, 0, NEXAR_ERR_PROTO); /* id not a member */
  JOIN_PUT(0, 1, 0);               /* another member: fine */
  JOIN_PUT(4, 5, NEXAR_ERR_PROTO); /* nids vs length */
  JOIN_PUT(4, 0, NEXAR_ERR_PROTO);
  JOIN_PUT(8, 0, NEXAR_ERR_PROTO);  /* comm_id low half 0, high 0 */
  JOIN_PUT(16, 0, NEXAR_ERR_PROTO); /* epoch */
  JOIN_PUT(20, 2, NEXAR_ERR_PROTO); /* nmembers vs length */
  JOIN_PUT(20, 0, NEXAR_ERR_PROTO);
  JOIN_PUT(mo, 3, NEXAR_ERR_PROTO); /* duplicate member */
  JOIN_PUT(mo, 4, NEXAR_ERR_PROTO); /* member >= nids */
  JOIN_PUT(mo, 0, 0);               /* a departed id back: fine */
#undef JOIN_PUT
  memcpy(c, big + 8, blen);
  c[JOIN_FIXED + 2 * ENTRY_BYTES] = 7; /* family of entry 2 */
  assert_int_equal(nexar__seed_join_decode(&d, c, blen), NEXAR_ERR_PROTO);
  assert_int_equal(nexar__seed_join_decode(NULL, c, blen),
                   NEXAR_ERR_INVALID_ARG);
}

/* ---- Random input: never crash, never accept non-canonical input. */

static nexar__roster_entry_t fuzz_roster[8];

/* Runs |in| through every decoder; whatever is accepted must re-encode to
 * exactly the accepted bytes. Returns how many decoders accepted. */
static int check_all(const uint8_t *in, size_t len) {
  static uint8_t out[512];
  int accepted = 0;
  nexar__hdr_t h;
  const char *why = NULL;
  int r = nexar__hdr_decode(&h, in, len, UINT64_MAX, &why);
  if (len < NEXAR__HDR_BYTES) {
    assert_int_equal(r, 0);
  } else if (r > 0) {
    assert_int_equal(r, NEXAR__HDR_BYTES);
    nexar__hdr_encode(&h, out);
    assert_memory_equal(out, in, NEXAR__HDR_BYTES);
    accepted++;
  } else {
    assert_int_equal(r, NEXAR_ERR_PROTO);
    assert_non_null(why);
  }

  uint8_t type;
  uint32_t blen;
  r = nexar__seed_frame_decode(in, len, &type, &blen);
  if (r > 0) {
    assert_int_equal(r, NEXAR__SEED_FRAME_HDR);
    assert_true(type >= 1 && type <= NEXAR__SEED_TYPE_MAX);
    assert_true(blen <= NEXAR__SEED_MAX_BODY);
    accepted++;
  } else {
    assert_true(r == 0 || r == NEXAR_ERR_PROTO);
  }

  uint8_t mac[NEXAR__MAC_BYTES];
  if (nexar__seed_proof_decode(mac, in, len) == 0) {
    int n = nexar__seed_proof_encode(mac, out, sizeof out);
    assert_int_equal(n, 8 + len);
    assert_memory_equal(out + 8, in, len);
    accepted++;
  }

  nexar__seed_hello_t hello;
  r = nexar__seed_hello_decode(&hello, in, len);
  if (r == 0) {
    int n = nexar__seed_hello_encode(&hello, out, sizeof out);
    assert_int_equal(n, 8 + len);
    assert_memory_equal(out + 8, in, len);
    accepted++;
  } else {
    assert_int_equal(r, NEXAR_ERR_PROTO);
  }

  nexar__seed_welcome_t w;
  r = nexar__seed_welcome_decode(&w, in, len);
  if (r == 0) {
    assert_true(w.world_size <= 8);
    for (uint32_t i = 0; i < w.world_size; i++)
      assert_int_equal(nexar__welcome_entry(&w, i, &fuzz_roster[i]), 0);
    int n = nexar__seed_welcome_encode(w.rank, w.world_size, fuzz_roster, out,
                                       sizeof out);
    assert_int_equal(n, 8 + len);
    assert_memory_equal(out + 8, in, len);
    accepted++;
  } else {
    assert_int_equal(r, NEXAR_ERR_PROTO);
  }

  nexar__seed_reject_t rj;
  r = nexar__seed_reject_decode(&rj, in, len);
  if (r == 0) {
    int n = nexar__seed_reject_encode(rj.code, rj.reason, out, sizeof out);
    assert_int_equal(n, 8 + len);
    assert_memory_equal(out + 8, in, len);
    accepted++;
  } else {
    assert_int_equal(r, NEXAR_ERR_PROTO);
  }

  static uint32_t fids[64];
  static nexar__joiner_t fj[8];
  nexar__seed_admit_t ad;
  r = nexar__seed_admit_decode(&ad, in, len);
  if (r == 0) {
    assert_true(ad.nstay <= 64);
    for (uint32_t i = 0; i < ad.nstay; i++) fids[i] = nexar__id_at(ad.ids, i);
    int n = nexar__seed_admit_encode(&ad, fids, out, sizeof out);
    assert_int_equal(n, 8 + len);
    assert_memory_equal(out + 8, in, len);
    accepted++;
  } else {
    assert_int_equal(r, NEXAR_ERR_PROTO);
  }

  nexar__seed_admitted_t am;
  r = nexar__seed_admitted_decode(&am, in, len);
  if (r == 0) {
    assert_true(am.njoin <= 8);
    for (uint32_t i = 0; i < am.njoin; i++)
      assert_int_equal(nexar__admitted_entry(&am, i, &fj[i]), 0);
    int n = nexar__seed_admitted_encode(am.nids, fj, am.njoin, out, sizeof out);
    assert_int_equal(n, 8 + len);
    assert_memory_equal(out + 8, in, len);
    accepted++;
  } else {
    assert_int_equal(r, NEXAR_ERR_PROTO);
  }

  nexar__seed_join_t jn;
  r = nexar__seed_join_decode(&jn, in, len);
  if (r == 0) {
    assert_true(jn.nids <= 8 && jn.nmembers <= jn.nids);
    for (uint32_t i = 0; i < jn.nids; i++)
      assert_int_equal(nexar__join_entry(&jn, i, &fuzz_roster[i]), 0);
    for (uint32_t i = 0; i < jn.nmembers; i++)
      fids[i] = nexar__id_at(jn.members, i);
    int n = nexar__seed_join_encode(&jn, fuzz_roster, fids, out, sizeof out);
    assert_int_equal(n, 8 + len);
    assert_memory_equal(out + 8, in, len);
    accepted++;
  } else {
    assert_int_equal(r, NEXAR_ERR_PROTO);
  }
  return accepted;
}

static void test_random_garbage(void **state) {
  (void)state;
  uint8_t buf[201];
  rng_state = 0x6e65786172ull; /* fixed seed */
  for (int it = 0; it < 200000; it++) {
    size_t len = (size_t)(rng() % 201);
    rng_fill(buf, len);
    /* Half the time start with a valid magic and version so the header
     * decoders look past the first bytes. */
    if ((it & 1) && len >= 3) {
      buf[0] = 0x4e;
      buf[1] = 0x58;
      buf[2] = 1;
    }
    check_all(buf, len);
  }
}

/* Valid encodings with a few random bytes changed, truncated or extended. */
static void test_random_mutation(void **state) {
  (void)state;
  uint8_t seeds[9][256];
  size_t seed_len[9];
  uint8_t buf[256];
  int n;

  nexar__hdr_t h = sample_p2p();
  nexar__hdr_encode(&h, seeds[0]);
  seed_len[0] = NEXAR__HDR_BYTES;
  h = sample_coll();
  nexar__hdr_encode(&h, seeds[1]);
  seed_len[1] = NEXAR__HDR_BYTES;
  nexar__seed_hello_t he = sample_hello();
  n = nexar__seed_hello_encode(&he, buf, sizeof buf);
  memcpy(seeds[2], buf + 8, (size_t)n - 8);
  seed_len[2] = (size_t)n - 8;
  he.has_addr = 0;
  he.advertise = v6(0, 0);
  n = nexar__seed_hello_encode(&he, buf, sizeof buf);
  memcpy(seeds[3], buf + 8, (size_t)n - 8);
  seed_len[3] = (size_t)n - 8;
  fill_roster(3);
  n = nexar__seed_welcome_encode(2, 3, roster, buf, sizeof buf);
  memcpy(seeds[4], buf + 8, (size_t)n - 8);
  seed_len[4] = (size_t)n - 8;
  n = nexar__seed_reject_encode(-5, "rank 3 already taken", buf, sizeof buf);
  memcpy(seeds[5], buf + 8, (size_t)n - 8);
  seed_len[5] = (size_t)n - 8;
  nexar__seed_admit_t ad = sample_admit(4);
  n = nexar__seed_admit_encode(&ad, ids, buf, sizeof buf);
  memcpy(seeds[6], buf + 8, (size_t)n - 8);
  seed_len[6] = (size_t)n - 8;
  fill_joiners(4, 2);
  n = nexar__seed_admitted_encode(7, joiners, 2, buf, sizeof buf);
  memcpy(seeds[7], buf + 8, (size_t)n - 8);
  seed_len[7] = (size_t)n - 8;
  nexar__seed_join_t jn = sample_join(3, 2);
  n = nexar__seed_join_encode(&jn, roster, ids, buf, sizeof buf);
  memcpy(seeds[8], buf + 8, (size_t)n - 8);
  seed_len[8] = (size_t)n - 8;

  for (int s = 0; s < 9; s++) assert_true(check_all(seeds[s], seed_len[s]) > 0);

  rng_state = 0x77697265ull;
  long accepted = 0;
  for (int it = 0; it < 200000; it++) {
    int s = (int)(rng() % 9);
    size_t len = seed_len[s];
    memcpy(buf, seeds[s], len);
    int muts = 1 + (int)(rng() % 3);
    for (int m = 0; m < muts; m++) {
      uint64_t x = rng();
      switch (x % 8) {
        case 0: /* truncate */
          len = (size_t)((x >> 8) % (len + 1));
          break;
        case 1: /* extend */
          if (len < sizeof buf) buf[len++] = (uint8_t)(x >> 8);
          break;
        case 2: /* set a byte to an edge value */
          if (len)
            buf[(x >> 8) % len] =
                (uint8_t[]){0, 1, 0x7f, 0x80, 0xff}[(x >> 40) % 5];
          break;
        default: /* random byte */
          if (len) buf[(x >> 8) % len] = (uint8_t)(x >> 32);
          break;
      }
    }
    accepted += check_all(buf, len);
  }
  /* Sanity: the mutations keep a good share of inputs valid. */
  assert_true(accepted > 1000);
}

/* ---- Host sections (HELLO host extension; WELCOME, ADMITTED and JOIN
 * host sections): round trips, every wrong length, a section that names
 * no host, and messages without one still decoding with zero hosts. */

#define HOST_BYTES 28u

/* Gives roster entries 0..n-1 a host (key 0 for every third: unknown), or
 * clears them (on = 0). */
static void fill_hosts(uint32_t n, int on) {
  for (uint32_t i = 0; i < n; i++) {
    memset(&roster[i].host, 0, sizeof roster[i].host);
    if (!on) continue;
    roster[i].host.key = i % 3 ? 0x0123456789abcdefull + i / 2 : 0;
    roster[i].host.pid = 1000 + i;
    for (unsigned k = 0; k < NEXAR__NONCE_BYTES; k++)
      roster[i].host.nonce[k] = (uint8_t)(i * 7 + k);
  }
}

static void assert_host_equal(const nexar__host_id_t *a,
                              const nexar__host_id_t *b) {
  assert_true(a->key == b->key);
  assert_int_equal(a->pid, b->pid);
  assert_memory_equal(a->nonce, b->nonce, NEXAR__NONCE_BYTES);
}

static void test_hello_host(void **state) {
  (void)state;
  static uint8_t b[8 + 512 + NEXAR__CERT_MAX], c[sizeof b];
  nexar__seed_hello_t h = sample_hello(), d;
  h.cert_len = 40;
  strcpy(h.topo, "full");
  h.host_key = 0xfedcba9876543210ull;
  for (unsigned i = 0; i < NEXAR__NONCE_BYTES; i++) h.nonce[i] = (uint8_t)i;
  int n = hello_frame(&h, b, sizeof b);
  size_t idlen = HELLO_FIXED + strlen(h.host) + 3 + 40 + 4;
  assert_int_equal(n, 8 + idlen + 24);
  size_t blen = (size_t)n - 8;
  assert_int_equal(nexar__seed_hello_decode(&d, b + 8, blen), 0);
  assert_hello_equal(&h, &d);
  assert_true(d.host_key == h.host_key);
  assert_memory_equal(d.nonce, h.nonce, NEXAR__NONCE_BYTES);
  /* Without the host extension: key and nonce decode as 0. */
  assert_int_equal(nexar__seed_hello_decode(&d, b + 8, idlen), 0);
  assert_true(d.host_key == 0);
  for (unsigned i = 0; i < NEXAR__NONCE_BYTES; i++)
    assert_int_equal(d.nonce[i], 0);
  /* Every other length after the identity extension, a zero key. */
  for (size_t k = idlen + 1; k < blen; k++)
    assert_int_equal(nexar__seed_hello_decode(&d, b + 8, k), NEXAR_ERR_PROTO);
  memcpy(c, b + 8, blen);
  c[blen] = 0;
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen + 1), NEXAR_ERR_PROTO);
  nexar__put_u64(c + idlen, 0);
  assert_int_equal(nexar__seed_hello_decode(&d, c, blen), NEXAR_ERR_PROTO);
  /* Encoder: a key without the identity extension; a nonce without key. */
  h.cert_len = 0;
  h.topo[0] = '\0';
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  h.cert_len = 40;
  strcpy(h.topo, "full");
  h.host_key = 0;
  assert_int_equal(nexar__seed_hello_encode(&h, b, sizeof b),
                   NEXAR_ERR_INVALID_ARG);
  memset(h.nonce, 0, sizeof h.nonce);
  assert_int_equal(hello_frame(&h, b, sizeof b), (int)(8 + idlen));
}

static void welcome_hosts_one(int with_certs) {
  enum { WS = 7 };
  static uint8_t certs[WS][64];
  const uint8_t *pc[WS];
  uint16_t cl[WS];
  for (int i = 0; i < WS; i++) {
    memset(certs[i], 0x40 + i, sizeof certs[i]);
    pc[i] = certs[i];
    cl[i] = (uint16_t)(i * 9);
  }
  fill_roster(WS);
  fill_hosts(WS, 1);
  int n =
      nexar__seed_welcome_encode_certs(3, WS, roster, with_certs ? pc : NULL,
                                       with_certs ? cl : NULL, big, sizeof big);
  size_t base = 8 + WS * ENTRY_BYTES, certs_len = 0;
  for (int i = 0; with_certs && i < WS; i++) certs_len += 2u + cl[i];
  assert_int_equal(n, (int)(8 + base + certs_len + 2 + WS * HOST_BYTES));
  size_t blen = (size_t)n - 8;
  nexar__seed_welcome_t w;
  nexar__roster_entry_t e;
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, blen), 0);
  assert_non_null(w.hosts);
  assert_int_equal(w.certs_len, certs_len);
  assert_true((w.certs != NULL) == (with_certs != 0));
  for (uint32_t i = 0; i < WS; i++) {
    assert_int_equal(nexar__welcome_entry(&w, i, &e), 0);
    assert_waddr_equal(&e.addr, &roster[i].addr);
    assert_host_equal(&e.host, &roster[i].host);
  }
  /* Without the section: zero hosts. */
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, base + certs_len),
                   0);
  assert_null(w.hosts);
  assert_int_equal(nexar__welcome_entry(&w, 1, &e), 0);
  assert_true(e.host.key == 0 && e.host.pid == 0);
  /* Every length between, one byte more, a bad mark, no known host. */
  for (size_t k = base + certs_len + 1; k < blen; k++)
    assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, k),
                     NEXAR_ERR_PROTO);
  big[8 + blen] = 0;
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, blen + 1),
                   NEXAR_ERR_PROTO);
  size_t mark = 8 + base + certs_len;
  big[mark] = 0xfe;
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, blen),
                   NEXAR_ERR_PROTO);
  big[mark] = 0xff;
  for (uint32_t i = 0; i < WS; i++)
    nexar__put_u64(big + mark + 2 + i * HOST_BYTES, 0);
  assert_int_equal(nexar__seed_welcome_decode(&w, big + 8, blen),
                   NEXAR_ERR_PROTO);
  /* A roster of unknown hosts is sent without the section. */
  fill_hosts(WS, 0);
  roster[2].host.pid = 77;
  n = nexar__seed_welcome_encode_certs(3, WS, roster, with_certs ? pc : NULL,
                                       with_certs ? cl : NULL, big, sizeof big);
  assert_int_equal(n, (int)(8 + base + certs_len));
  fill_hosts(WS, 0);
}

static void test_welcome_hosts(void **state) {
  (void)state;
  welcome_hosts_one(0);
  welcome_hosts_one(1);
}

static void test_admitted_hosts(void **state) {
  (void)state;
  nexar__seed_admitted_t a;
  nexar__joiner_t j;
  fill_roster(3);
  fill_hosts(3, 1);
  fill_joiners(4, 3);
  int n = nexar__seed_admitted_encode(7, joiners, 3, big, sizeof big);
  size_t base = 8 + 3 * JOINER_BYTES, blen = (size_t)n - 8;
  assert_int_equal(blen, base + 3 * HOST_BYTES);
  assert_int_equal(nexar__seed_admitted_decode(&a, big + 8, blen), 0);
  assert_non_null(a.hosts);
  for (uint32_t i = 0; i < 3; i++) {
    assert_int_equal(nexar__admitted_entry(&a, i, &j), 0);
    assert_int_equal(j.id, 4 + i);
    assert_host_equal(&j.e.host, &roster[i].host);
  }
  assert_int_equal(nexar__seed_admitted_decode(&a, big + 8, base), 0);
  assert_null(a.hosts);
  for (size_t k = base + 1; k < blen; k++)
    assert_int_equal(nexar__seed_admitted_decode(&a, big + 8, k),
                     NEXAR_ERR_PROTO);
  big[8 + blen] = 0;
  assert_int_equal(nexar__seed_admitted_decode(&a, big + 8, blen + 1),
                   NEXAR_ERR_PROTO);
  for (uint32_t i = 0; i < 3; i++)
    nexar__put_u64(big + 8 + base + i * HOST_BYTES, 0);
  assert_int_equal(nexar__seed_admitted_decode(&a, big + 8, blen),
                   NEXAR_ERR_PROTO);
  /* Nobody admitted: no section, and none accepted. */
  n = nexar__seed_admitted_encode(7, joiners, 0, big, sizeof big);
  assert_int_equal(n, 8 + 8);
  fill_hosts(3, 0);
}

static void test_join_hosts(void **state) {
  (void)state;
  nexar__seed_join_t j = sample_join(6, 4), d;
  nexar__roster_entry_t e;
  fill_hosts(6, 1);
  int n = nexar__seed_join_encode(&j, roster, ids, big, sizeof big);
  size_t base = JOIN_FIXED + 6 * ENTRY_BYTES + 4 * 4, blen = (size_t)n - 8;
  assert_int_equal(blen, base + 6 * HOST_BYTES);
  assert_int_equal(nexar__seed_join_decode(&d, big + 8, blen), 0);
  assert_non_null(d.hosts);
  for (uint32_t i = 0; i < 6; i++) {
    assert_int_equal(nexar__join_entry(&d, i, &e), 0);
    assert_host_equal(&e.host, &roster[i].host);
  }
  for (uint32_t i = 0; i < 4; i++)
    assert_int_equal(nexar__id_at(d.members, i), ids[i]);
  assert_int_equal(nexar__seed_join_decode(&d, big + 8, base), 0);
  assert_null(d.hosts);
  for (size_t k = base + 1; k < blen; k++)
    assert_int_equal(nexar__seed_join_decode(&d, big + 8, k), NEXAR_ERR_PROTO);
  big[8 + blen] = 0;
  assert_int_equal(nexar__seed_join_decode(&d, big + 8, blen + 1),
                   NEXAR_ERR_PROTO);
  for (uint32_t i = 0; i < 6; i++)
    nexar__put_u64(big + 8 + base + i * HOST_BYTES, 0);
  assert_int_equal(nexar__seed_join_decode(&d, big + 8, blen), NEXAR_ERR_PROTO);
  fill_hosts(6, 0);
}

/* ---- The QUIC transport's RPC note (src/transport/quic_rpc.c): exact
 * bytes, every other length, each field corrupted, random input. */
static void test_rpc_note(void **state) {
  (void)state;
  uint8_t b[NEXAR__RPC_NOTE_BYTES + 1];
  int kind = 0;
  uint16_t port = 0;
  nexar__qrpc_note_encode(b, NEXAR__RPC_NOTE_DIAL, 0xbeef);
  const uint8_t want[NEXAR__RPC_NOTE_BYTES] = {'N', 'X', 'R',  '1',
                                               2,   0,   0xbe, 0xef};
  assert_memory_equal(b, want, sizeof(want));
  assert_int_equal(nexar__qrpc_note_decode(b, sizeof(want), &kind, &port), 0);
  assert_int_equal(kind, NEXAR__RPC_NOTE_DIAL);
  assert_int_equal(port, 0xbeef);
  for (size_t n = 0; n <= sizeof(b); n++)
    if (n != NEXAR__RPC_NOTE_BYTES)
      assert_int_equal(nexar__qrpc_note_decode(b, n, &kind, &port),
                       NEXAR_ERR_PROTO);
  assert_int_equal(nexar__qrpc_note_decode(NULL, 8, &kind, &port),
                   NEXAR_ERR_PROTO);
  for (size_t i = 0; i < NEXAR__RPC_NOTE_BYTES - 2; i++) { /* all but port */
    uint8_t c[NEXAR__RPC_NOTE_BYTES];
    memcpy(c, want, sizeof(c));
    c[i] ^= i == 4 ? 0x04 : 0x40; /* kind 2 -> 6 (2 -> 1 is valid) */
    assert_int_equal(nexar__qrpc_note_decode(c, sizeof(c), &kind, &port),
                     NEXAR_ERR_PROTO);
  }
  const int kinds[] = {0, 3, 255};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    nexar__qrpc_note_encode(b, kinds[i], 1);
    assert_int_equal(nexar__qrpc_note_decode(b, 8, &kind, &port),
                     NEXAR_ERR_PROTO);
  }
  nexar__qrpc_note_encode(b, NEXAR__RPC_NOTE_PORT, 0);
  assert_int_equal(nexar__qrpc_note_decode(b, 8, &kind, &port),
                   NEXAR_ERR_PROTO);
  rng_state = 21;
  for (int i = 0; i < 100000; i++) {
    uint8_t r[NEXAR__RPC_NOTE_BYTES], e[NEXAR__RPC_NOTE_BYTES];
    rng_fill(r, sizeof(r));
    if (i & 1) memcpy(r, "NXR1", 4);
    if (nexar__qrpc_note_decode(r, sizeof(r), &kind, &port) < 0) continue;
    nexar__qrpc_note_encode(e, kind, port);
    assert_memory_equal(r, e, sizeof(r));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hdr_layout),
      cmocka_unit_test(test_hdr_roundtrip),
      cmocka_unit_test(test_hdr_truncated),
      cmocka_unit_test(test_hdr_corrupt),
      cmocka_unit_test(test_hdr_rules),
      cmocka_unit_test(test_hdr_rpc),
      cmocka_unit_test(test_hdr_ctl),
      cmocka_unit_test(test_hdr_relay),
      cmocka_unit_test(test_hdr_credit),
      cmocka_unit_test(test_seed_frame),
      cmocka_unit_test(test_notice),
      cmocka_unit_test(test_proof),
      cmocka_unit_test(test_hello_roundtrip),
      cmocka_unit_test(test_hello_identity),
      cmocka_unit_test(test_hello_encode_invalid),
      cmocka_unit_test(test_hello_decode_invalid),
      cmocka_unit_test(test_welcome_roundtrip),
      cmocka_unit_test(test_welcome_invalid),
      cmocka_unit_test(test_welcome_certs),
      cmocka_unit_test(test_hello_host),
      cmocka_unit_test(test_welcome_hosts),
      cmocka_unit_test(test_admitted_hosts),
      cmocka_unit_test(test_join_hosts),
      cmocka_unit_test(test_reject),
      cmocka_unit_test(test_admit),
      cmocka_unit_test(test_admitted),
      cmocka_unit_test(test_join),
      cmocka_unit_test(test_random_garbage),
      cmocka_unit_test(test_random_mutation),
      cmocka_unit_test(test_rpc_note),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
