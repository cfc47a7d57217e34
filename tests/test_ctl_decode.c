/*
 * Decoders of untrusted control and seed input, in the default (gcc)
 * build, where the libFuzzer targets cannot be built:
 *
 *  - the checked-in corpora of fuzz_seed and fuzz_ctl (tests/corpus/seed,
 *    tests/corpus/ctl). Every file there must be one of the cases below,
 *    byte for byte; each is decoded and its result code and decoded values
 *    are compared with the values it was built from, and it then goes
 *    through the harness's own checks (tests/fuzz_seed.c and
 *    tests/fuzz_ctl.c are compiled into this program with
 *    NEXAR_FUZZ_EMBED). `test_ctl_decode --write-corpus tests/corpus`
 *    writes the files.
 *  - truncated, oversized-count, out-of-range-id and garbage inputs to the
 *    AGREE and FAILED payload decoders, the MISMATCH notice decoder, the
 *    seed stream splitter and the seed body decoders, with exact results.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "wire/wire.h"

#ifndef NEXAR_CORPUS_DIR
#error "NEXAR_CORPUS_DIR must name tests/corpus"
#endif

int fuzz_seed_one(const uint8_t *data, size_t size);
int fuzz_ctl_one(const uint8_t *data, size_t size);
extern unsigned long fuzz_seed_roundtrips, fuzz_ctl_roundtrips;

#define HDR NEXAR__SEED_FRAME_HDR
#define HELLO_FIXED 97u
#define ENTRY_BYTES 51u
#define P NEXAR_ERR_PROTO

/* ---- Deterministic PRNG (splitmix64), as in test_wire.c. */
static uint64_t rng_state;

static uint64_t rng(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* ---- Byte builder. */
typedef struct buf {
  uint8_t b[8192];
  size_t n;
} buf_t;

static void p8(buf_t *b, uint8_t v) {
  assert_true(b->n < sizeof b->b);
  b->b[b->n++] = v;
}
static void p16(buf_t *b, uint16_t v) {
  p8(b, (uint8_t)v);
  p8(b, (uint8_t)(v >> 8));
}
static void p32(buf_t *b, uint32_t v) {
  p16(b, (uint16_t)v);
  p16(b, (uint16_t)(v >> 16));
}
static void p64(buf_t *b, uint64_t v) {
  p32(b, (uint32_t)v);
  p32(b, (uint32_t)(v >> 32));
}
static void pmem(buf_t *b, const void *p, size_t n) {
  assert_true(b->n + n <= sizeof b->b);
  memcpy(b->b + b->n, p, n);
  b->n += n;
}

/* Appends the frame an encoder wrote to |frame| (|n| bytes, or an error). */
static uint8_t frame[HDR + NEXAR__SEED_MAX_BODY];
static void pframe(buf_t *b, int n) {
  assert_true(n > (int)HDR);
  pmem(b, frame, (size_t)n);
}

/* ---- The values the corpus is built from. */

static uint8_t mac_a[NEXAR__MAC_BYTES];
static nexar__seed_hello_t hello_v4, hello_id, hello_join, hello_host;
/* roster_h: roster5 with hosts (ids 0 and 2 on one, 1 unknown). */
static nexar__roster_entry_t roster5[5], roster_h[5];
static uint8_t cert_a[5] = {0x30, 0x03, 0x02, 0x01, 0x00};
static const uint8_t *certs2[2] = {cert_a, NULL};
static const uint16_t cert_len2[2] = {5, 0};
static uint32_t admit_ids[3] = {0, 2, 1};
static nexar__seed_admit_t admit_v;
static nexar__joiner_t joiners_v[2], joiners_h[2];
static uint32_t join_members[3] = {0, 1, 4};
static nexar__seed_join_t join_v, join_h;
/* A rank's STATE for an observer: one allreduce waiting for 2 and 3, one
 * send, two links. */
static nexar__insp_state_t state_v;
static const nexar__insp_peer_t state_peers[2] = {{0, 12, 0},
                                                  {2, 4500, 1u << 20}};
static const char reject_reason[] =
    "world size mismatch: the worker expects 4, the seed 3";
static nexar__notice_t notice_v;

static void waddr4(nexar__waddr_t *a, uint8_t last, uint16_t port) {
  memset(a, 0, sizeof *a);
  a->family = 4;
  a->port = port;
  a->ip[0] = 10;
  a->ip[3] = last;
}

static void waddr6(nexar__waddr_t *a, uint8_t last, uint16_t port) {
  memset(a, 0, sizeof *a);
  a->family = 6;
  a->port = port;
  a->ip[0] = 0xfd;
  a->ip[15] = last;
}

static void init_values(void) {
  memset(mac_a, 0x11, sizeof mac_a);

  memset(&hello_v4, 0, sizeof hello_v4);
  memset(hello_v4.proof, 0x22, NEXAR__MAC_BYTES);
  hello_v4.rank = 2;
  hello_v4.world_size = 4;
  hello_v4.has_addr = 1;
  waddr4(&hello_v4.advertise, 7, 4433);
  memset(hello_v4.fingerprint, 0xa1, NEXAR__FP_BYTES);
  hello_v4.pid = 1234;
  strcpy(hello_v4.host, "node-a");

  memset(&hello_id, 0, sizeof hello_id);
  memset(hello_id.proof, 0x33, NEXAR__MAC_BYTES);
  hello_id.rank = -1;
  memset(hello_id.fingerprint, 0xb2, NEXAR__FP_BYTES);
  hello_id.pid = 99;
  strcpy(hello_id.host, "gpu-17.example");
  hello_id.cert_len = 40;
  for (int i = 0; i < 40; i++) hello_id.cert[i] = (uint8_t)(0x30 + i);
  strcpy(hello_id.topo, "kregular:4");

  memset(&hello_join, 0, sizeof hello_join);
  memset(hello_join.proof, 0x44, NEXAR__MAC_BYTES);
  hello_join.rank = -1;
  hello_join.has_addr = 1;
  hello_join.join = 1;
  waddr6(&hello_join.advertise, 1, 5000);
  memset(hello_join.fingerprint, 0xc3, NEXAR__FP_BYTES);
  hello_join.pid = 4242;
  strcpy(hello_join.host, "late");
  hello_join.cert_len = 16;
  memset(hello_join.cert, 0x5c, 16);
  strcpy(hello_join.topo, "full");

  for (int i = 0; i < 5; i++) {
    if (i % 2)
      waddr6(&roster5[i].addr, (uint8_t)(i + 1), (uint16_t)(5001 + i));
    else
      waddr4(&roster5[i].addr, (uint8_t)(i + 1), (uint16_t)(5001 + i));
    memset(roster5[i].fingerprint, 0x10 * (i + 1), NEXAR__FP_BYTES);
  }

  hello_host = hello_id;
  hello_host.host_key = 0x0102030405060708ull;
  for (unsigned i = 0; i < NEXAR__NONCE_BYTES; i++)
    hello_host.nonce[i] = (uint8_t)(0xa0 + i);
  for (int i = 0; i < 5; i++) {
    roster_h[i] = roster5[i];
    roster_h[i].host.key = i == 1 ? 0 : 0x7700000000000000ull + (uint64_t)i % 2;
    roster_h[i].host.pid = 300u + (uint32_t)i;
    memset(roster_h[i].host.nonce, 0x61 + i, NEXAR__NONCE_BYTES);
  }

  memset(&admit_v, 0, sizeof admit_v);
  memset(admit_v.proof, 0x55, NEXAR__MAC_BYTES);
  admit_v.comm_id = 7;
  admit_v.epoch = 2;
  admit_v.max_joiners = NEXAR__JOIN_UNLIMITED;
  admit_v.nstay = 3;

  joiners_v[0].id = 4;
  joiners_v[0].e = roster5[4];
  joiners_v[1].id = 5;
  joiners_v[1].e = roster5[3];
  joiners_h[0].id = 4;
  joiners_h[0].e = roster_h[4];
  joiners_h[1].id = 5;
  joiners_h[1].e = roster_h[1];

  memset(&join_v, 0, sizeof join_v);
  join_v.id = 4;
  join_v.nids = 5;
  join_v.comm_id = 9;
  join_v.epoch = 3;
  join_v.nmembers = 3;
  join_h = join_v;

  memset(&state_v, 0, sizeof state_v);
  state_v.rank = 1;
  state_v.world = 4;
  state_v.pid = 4242;
  snprintf(state_v.host, sizeof state_v.host, "node-7");
  state_v.nops = 2;
  state_v.ops[0] =
      (nexar__insp_op_t){0, UINT64_MAX, 1500, 0, 1, 4, "send", "2"};
  state_v.ops[1] =
      (nexar__insp_op_t){0, 3, 2500000, 0, 1, 4, "allreduce", "2, 3"};
  state_v.npeers = 2;

  memset(&notice_v, 0, sizeof notice_v);
  notice_v.coll_seq = 12;
  notice_v.rank_a = notice_v.rank_b = 1;
  notice_v.a.coll_op = notice_v.b.coll_op = NEXAR__COLL_ALLREDUCE;
  notice_v.a.dtype = notice_v.b.dtype = NEXAR_FLOAT32;
  notice_v.a.redop = notice_v.b.redop = NEXAR_SUM;
  notice_v.a.root = notice_v.b.root = 0xffffffffu;
  notice_v.a.count = notice_v.b.count = 1000;
}

/* ---- Frame builders. */

static void f_proof(buf_t *b) {
  pframe(b, nexar__seed_proof_encode(mac_a, frame, sizeof frame));
}
static void f_mac(buf_t *b, uint8_t type) {
  pframe(b, nexar__seed_mac_encode(type, mac_a, frame, sizeof frame));
}
static void f_state(buf_t *b) {
  pframe(b,
         nexar__insp_state_encode(&state_v, state_peers, frame, sizeof frame));
}
static void f_hello(buf_t *b, const nexar__seed_hello_t *h) {
  pframe(b, nexar__seed_hello_encode(h, frame, sizeof frame));
}
static void f_admit(buf_t *b) {
  pframe(b, nexar__seed_admit_encode(&admit_v, admit_ids, frame, sizeof frame));
}
/* |hosts|: from roster_h (with the host section), else roster5. */
static void f_welcome_r(buf_t *b, uint32_t rank, uint32_t ws, int certs,
                        int hosts) {
  pframe(b, nexar__seed_welcome_encode_certs(
                rank, ws, hosts ? roster_h : roster5, certs ? certs2 : NULL,
                certs ? cert_len2 : NULL, frame, sizeof frame));
}
static void f_welcome(buf_t *b, uint32_t rank, uint32_t ws, int certs) {
  f_welcome_r(b, rank, ws, certs, 0);
}
static void f_join_r(buf_t *b, int hosts) {
  pframe(b, nexar__seed_join_encode(hosts ? &join_h : &join_v,
                                    hosts ? roster_h : roster5, join_members,
                                    frame, sizeof frame));
}
static void f_join(buf_t *b) {
  f_join_r(b, 0);
}
static void f_admitted_r(buf_t *b, uint32_t nids, uint32_t njoin, int hosts) {
  pframe(b, nexar__seed_admitted_encode(nids, hosts ? joiners_h : joiners_v,
                                        njoin, frame, sizeof frame));
}
static void f_admitted(buf_t *b, uint32_t nids, uint32_t njoin) {
  f_admitted_r(b, nids, njoin, 0);
}
static void f_reject(buf_t *b) {
  pframe(b, nexar__seed_reject_encode(NEXAR_ERR_INVALID_ARG, reject_reason,
                                      frame, sizeof frame));
}

/* Sets the u32 at |off| of the last frame's body (ending at b->n, body of
 * |blen| bytes) to |v|. */
static void patch32(buf_t *b, size_t blen, size_t off, uint32_t v) {
  nexar__put_u32(b->b + b->n - blen + off, v);
}

/* ---- Seed corpus: streams (target 0 to the seed, 1 to a worker). */

static void s_to_seed_hello(buf_t *b) {
  p8(b, 0);
  p8(b, 6); /* fed 7 bytes at a time */
  f_hello(b, &hello_v4);
}
static void s_to_seed_hello_identity(buf_t *b) {
  p8(b, 0);
  p8(b, 0); /* byte by byte */
  f_hello(b, &hello_id);
}
static void s_to_seed_join_admit(buf_t *b) {
  p8(b, 0);
  p8(b, 31);
  f_hello(b, &hello_join);
  f_admit(b);
}
static void s_to_seed_bad_magic(buf_t *b) {
  p8(b, 0);
  p8(b, 255);
  size_t at = b->n;
  f_hello(b, &hello_v4);
  b->b[at] ^= 0x01;
}
static void s_to_seed_oversized_body(buf_t *b) {
  p8(b, 0);
  p8(b, 3);
  p16(b, NEXAR__WIRE_MAGIC);
  p8(b, NEXAR__WIRE_VERSION);
  p8(b, NEXAR__SEED_HELLO);
  p32(b, NEXAR__SEED_MAX_BODY + 1);
  for (int i = 0; i < 16; i++) p8(b, 0);
}
static void s_to_seed_truncated(buf_t *b) {
  p8(b, 0);
  p8(b, 9);
  f_hello(b, &hello_v4);
  b->n--;
}
static void s_to_seed_admit_bad_id(buf_t *b) {
  p8(b, 0);
  p8(b, 64);
  f_admit(b);
  /* The last id (body: 52 fixed bytes, 3 ids): 16384, one past the
   * bound. */
  patch32(b, 52 + 12, 52 + 8, NEXAR__ELASTIC_MAX_IDS);
}
static void s_to_worker_welcome(buf_t *b) {
  p8(b, 1);
  p8(b, 12);
  f_proof(b);
  f_welcome(b, 1, 3, 0);
}
static void s_to_worker_welcome_certs(buf_t *b) {
  p8(b, 1);
  p8(b, 0);
  f_proof(b);
  f_welcome(b, 0, 2, 1);
}
static void s_to_worker_welcome_one(buf_t *b) {
  p8(b, 1);
  p8(b, 200);
  f_welcome(b, 0, 1, 0);
}
static void s_to_worker_welcome_bad_rank(buf_t *b) {
  p8(b, 1);
  p8(b, 5);
  f_welcome(b, 2, 3, 0);
  patch32(b, 8 + 3 * ENTRY_BYTES, 0, 3); /* rank == world_size */
}
static void s_to_worker_welcome_huge_count(buf_t *b) {
  p8(b, 1);
  p8(b, 7);
  f_welcome(b, 0, 1, 0);
  patch32(b, 8 + ENTRY_BYTES, 4, 0xffffffffu); /* world_size */
}
static void s_to_seed_hello_host(buf_t *b) {
  p8(b, 0);
  p8(b, 3);
  f_hello(b, &hello_host);
}
static void s_to_worker_welcome_hosts(buf_t *b) {
  p8(b, 1);
  p8(b, 12);
  f_proof(b);
  f_welcome_r(b, 1, 3, 0, 1);
}
static void s_to_worker_welcome_certs_hosts(buf_t *b) {
  p8(b, 1);
  p8(b, 0);
  f_welcome_r(b, 0, 2, 1, 1);
}
/* A host section that names no host (never sent): refused. */
static void s_to_worker_welcome_hosts_none(buf_t *b) {
  p8(b, 1);
  p8(b, 7);
  f_welcome_r(b, 1, 3, 0, 1);
  size_t blen = 8 + 3 * ENTRY_BYTES + 2 + 3 * 28;
  for (size_t i = 0; i < 3; i++) {
    patch32(b, blen, 8 + 3 * ENTRY_BYTES + 2 + 28 * i, 0);
    patch32(b, blen, 8 + 3 * ENTRY_BYTES + 2 + 28 * i + 4, 0);
  }
}
static void s_to_worker_join_hosts(buf_t *b) {
  p8(b, 1);
  p8(b, 33);
  f_join_r(b, 1);
}
static void s_to_worker_admitted_hosts(buf_t *b) {
  p8(b, 1);
  p8(b, 5);
  f_admitted_r(b, 6, 2, 1);
}
static void s_to_worker_join(buf_t *b) {
  p8(b, 1);
  p8(b, 40);
  f_proof(b);
  f_join(b);
}
static void s_to_worker_join_bad_member(buf_t *b) {
  p8(b, 1);
  p8(b, 40);
  f_join(b);
  patch32(b, 24 + 5 * ENTRY_BYTES + 12, 24 + 5 * ENTRY_BYTES + 4,
          5); /* member 1 := nids */
}
static void s_to_worker_admitted(buf_t *b) {
  p8(b, 1);
  p8(b, 2);
  f_proof(b);
  f_admitted(b, 6, 2);
}
static void s_to_worker_admitted_none(buf_t *b) {
  p8(b, 1);
  p8(b, 0);
  f_admitted(b, 4, 0);
}
static void s_to_worker_admitted_count(buf_t *b) {
  p8(b, 1);
  p8(b, 0);
  f_admitted(b, 6, 2);
  patch32(b, 8 + 2 * 55, 0, 1); /* nids 1 < njoin 2 */
}
/* Live inspection: what a seed or a rank reads from an observer, and what
 * an observer reads from a rank. */
static void s_to_seed_query(buf_t *b) {
  p8(b, 0);
  p8(b, 3);
  f_mac(b, NEXAR__SEED_QUERY);
}
static void s_to_rank_inspect(buf_t *b) {
  p8(b, 0);
  p8(b, 40);
  f_mac(b, NEXAR__SEED_INSPECT);
}
static void s_to_observer_state(buf_t *b) {
  p8(b, 1);
  p8(b, 7);
  f_proof(b);
  f_state(b);
}
static void s_to_observer_state_bad_peer(buf_t *b) {
  p8(b, 1);
  p8(b, 0);
  f_state(b);
  patch32(b, 16, 0, 4); /* the last link's rank == world */
}
static void s_to_worker_reject(buf_t *b) {
  p8(b, 1);
  p8(b, 17);
  f_reject(b);
}

/* ---- Seed corpus: values built by the harness (targets 2-7); the byte
 * layouts are fuzz_seed.c's. */

static void rd_waddr(buf_t *b, const nexar__waddr_t *a) {
  p8(b, a->family == 4 ? 0 : 1);
  p16(b, a->port);
  pmem(b, a->ip, a->family == 4 ? 4 : 16);
}
static void rd_entry(buf_t *b, const nexar__roster_entry_t *e) {
  rd_waddr(b, &e->addr);
  p8(b, e->fingerprint[0]);
}
static void s_build_hello(buf_t *b) {
  p8(b, 2);
  p32(b, 0x04030201); /* proof: the first four bytes */
  p32(b, 5);          /* rank */
  p32(b, 8);          /* world_size */
  p8(b, 1);           /* has_addr */
  rd_waddr(b, &hello_v4.advertise);
  p8(b, 0xee);
  p32(b, 777);
  p8(b, 6);
  pmem(b, "host-b", 6);
  p16(b, 3); /* cert_len */
  p8(b, 0x42);
  p8(b, 9);
  pmem(b, "hypercube", 9);
}
static void s_build_welcome(buf_t *b) {
  p8(b, 3);
  p16(b, 3); /* world_size */
  p16(b, 2); /* rank */
  p8(b, 1);  /* certificates */
  for (int i = 0; i < 3; i++) {
    rd_entry(b, &roster5[i]);
    p16(b, (uint16_t)(i == 1 ? 0 : 7 * (i + 1)));
    if (i == 1) p8(b, 0); /* no certificate */
  }
}
static void s_build_admit(buf_t *b) {
  p8(b, 4);
  p32(b, 0x55555555);
  p64(b, 11);
  p32(b, 4);
  p32(b, 2);
  p16(b, 4);
  for (uint16_t i = 0; i < 4; i++) p16(b, (uint16_t)(3 - i));
}
static void s_build_admitted(buf_t *b) {
  p8(b, 5);
  p16(b, 8);
  p8(b, 2);
  p16(b, 6);
  rd_entry(b, &roster5[0]);
  p8(b, 1);
  rd_entry(b, &roster5[1]);
  p8(b, 1);
}
static void s_build_join(buf_t *b) {
  p8(b, 6);
  p16(b, 3); /* nids */
  p16(b, 2); /* id */
  p64(b, 21);
  p32(b, 5);
  p16(b, 2); /* nmembers */
  for (int i = 0; i < 3; i++) rd_entry(b, &roster5[i]);
  p16(b, 0);
  p16(b, 2);
}
static void s_build_reject(buf_t *b) {
  p8(b, 7);
  p32(b, (uint32_t)NEXAR_ERR_UNSUPPORTED);
  p16(b, 10);
  pmem(b, "not today.", 10);
}

/* ---- Ctl corpus. */

static void agree_payload(buf_t *b, uint64_t id, uint32_t n,
                          const uint32_t *ids) {
  p64(b, id);
  p32(b, n);
  for (uint32_t i = 0; i < n; i++) p32(b, ids[i]);
}
static const uint32_t ids13[2] = {1, 3}, ids012[3] = {0, 1, 2};

static void c_agree_propose(buf_t *b) {
  p8(b, 0);
  p32(b, 4);
  agree_payload(b, 5, 2, ids13);
}
static void c_agree_empty(buf_t *b) {
  p8(b, 0);
  p32(b, 3);
  agree_payload(b, 0x0123456789abcdefull, 0, NULL);
}
static void c_agree_full(buf_t *b) {
  p8(b, 0);
  p32(b, 3);
  agree_payload(b, 7, 3, ids012);
}
static void c_agree_over(buf_t *b) {
  p8(b, 0);
  p32(b, 2);
  agree_payload(b, 7, 3, ids012);
}
static void c_agree_count_lies(buf_t *b) {
  p8(b, 0);
  p32(b, 8);
  p64(b, 1);
  p32(b, 0xffffffffu);
  p32(b, 0);
}
static void c_agree_short(buf_t *b) {
  p8(b, 0);
  p32(b, 4);
  for (int i = 0; i < 11; i++) p8(b, 0);
}
static void c_failed_heartbeat(buf_t *b) {
  p8(b, 1);
  p32(b, 4);
  p32(b, 3);
  p32(b, NEXAR_FAIL_HEARTBEAT);
}
static void c_failed_out_of_range(buf_t *b) {
  p8(b, 1);
  p32(b, 4);
  p32(b, 4);
  p32(b, NEXAR_FAIL_CONNECTION);
}
static void c_failed_unknown_reason(buf_t *b) {
  p8(b, 1);
  p32(b, 2);
  p32(b, 0);
  p32(b, 0xdeadbeefu);
}
static void c_notice_probe(buf_t *b) {
  p8(b, 2);
  nexar__notice_encode(&notice_v, frame);
  pmem(b, frame, NEXAR__NOTICE_BYTES);
}
static void c_msg(buf_t *b, uint32_t bound, uint8_t kind, uint64_t comm_id,
                  uint32_t step, uint64_t round, size_t plen) {
  nexar__hdr_t h;
  memset(&h, 0, sizeof h);
  h.kind = kind;
  h.lane = NEXAR__LANE_CONTROL;
  h.comm_id = comm_id;
  h.src_rank = 1;
  h.step = step;
  h.coll_seq = round;
  h.payload_len = plen;
  p8(b, 3);
  p32(b, bound);
  nexar__hdr_encode(&h, frame);
  pmem(b, frame, NEXAR__HDR_BYTES);
}
static void c_msg_agree(buf_t *b) {
  static const uint32_t two = 2;
  c_msg(b, 4, NEXAR__KIND_AGREE, 3 | (1ull << 63), NEXAR__AG_PROPOSE, 1, 16);
  agree_payload(b, 9, 1, &two);
}
static void c_msg_failed(buf_t *b) {
  c_msg(b, 3, NEXAR__KIND_FAILED, UINT64_MAX, 0, 0, 8);
  p32(b, 2);
  p32(b, NEXAR_FAIL_CONNECTION);
}
static void c_msg_mismatch(buf_t *b) {
  nexar__hdr_t h;
  memset(&h, 0, sizeof h);
  h.kind = NEXAR__KIND_MISMATCH;
  h.lane = NEXAR__LANE_CONTROL;
  h.comm_id = 5;
  h.src_rank = 1;
  h.coll_seq = 12;
  h.payload_len = NEXAR__NOTICE_BYTES;
  p8(b, 3);
  p32(b, 0);
  nexar__hdr_encode(&h, frame);
  pmem(b, frame, NEXAR__HDR_BYTES);
  nexar__notice_encode(&notice_v, frame);
  pmem(b, frame, NEXAR__NOTICE_BYTES);
}
static void c_build_agree(buf_t *b) {
  p8(b, 4);
  p64(b, 42);
  p32(b, 5);
  p32(b, 4);
  p32(b, 0);
}
static void c_build_failed(buf_t *b) {
  p8(b, 5);
  p32(b, 6);
  p32(b, NEXAR_FAIL_REPORTED);
  p32(b, 7);
}

/* ---- Expected results. */

/* One frame of a stream: its type, its body decoder's result and, when
 * that is 0, the value it must decode to. */
typedef struct fexp {
  uint8_t type;
  int rc;
  const void *v; /* a hello, or a per-type marker below */
} fexp_t;

enum {
  V_NONE,
  V_WELCOME_3,
  V_WELCOME_CERTS,
  V_WELCOME_1,
  V_ADMITTED_2,
  V_ADMITTED_0,
  V_WELCOME_HOSTS,
  V_WELCOME_CERTS_HOSTS,
  V_ADMITTED_HOSTS
};
static const int vtag[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};

typedef struct seed_case {
  const char *name;
  void (*build)(buf_t *b);
  int nframes;
  fexp_t f[2];
  int end;             /* the splitter's result after the last frame */
  unsigned roundtrips; /* checked by the harness */
} seed_case_t;

#define NOV NULL
/* clang-format off */
static const seed_case_t seed_cases[] = {
    {"to-seed-hello", s_to_seed_hello, 1,
     {{NEXAR__SEED_HELLO, 0, &hello_v4}}, 0, 1},
    {"to-seed-hello-identity", s_to_seed_hello_identity, 1,
     {{NEXAR__SEED_HELLO, 0, &hello_id}}, 0, 1},
    {"to-seed-join-admit", s_to_seed_join_admit, 2,
     {{NEXAR__SEED_HELLO, 0, &hello_join}, {NEXAR__SEED_ADMIT, 0, &admit_v}},
     0, 2},
    {"to-seed-bad-magic", s_to_seed_bad_magic, 0, {{0}}, P, 0},
    {"to-seed-oversized-body", s_to_seed_oversized_body, 0, {{0}}, P, 0},
    {"to-seed-truncated", s_to_seed_truncated, 0, {{0}}, 0, 0},
    {"to-seed-admit-bad-id", s_to_seed_admit_bad_id, 1,
     {{NEXAR__SEED_ADMIT, P, NOV}}, 0, 0},
    {"to-worker-welcome", s_to_worker_welcome, 2,
     {{NEXAR__SEED_PROOF, 0, mac_a},
      {NEXAR__SEED_WELCOME, 0, &vtag[V_WELCOME_3]}},
     0, 2},
    {"to-worker-welcome-certs", s_to_worker_welcome_certs, 2,
     {{NEXAR__SEED_PROOF, 0, mac_a},
      {NEXAR__SEED_WELCOME, 0, &vtag[V_WELCOME_CERTS]}},
     0, 2},
    {"to-worker-welcome-one", s_to_worker_welcome_one, 1,
     {{NEXAR__SEED_WELCOME, 0, &vtag[V_WELCOME_1]}}, 0, 1},
    {"to-worker-welcome-bad-rank", s_to_worker_welcome_bad_rank, 1,
     {{NEXAR__SEED_WELCOME, P, NOV}}, 0, 0},
    {"to-worker-welcome-huge-count", s_to_worker_welcome_huge_count, 1,
     {{NEXAR__SEED_WELCOME, P, NOV}}, 0, 0},
    {"to-worker-join", s_to_worker_join, 2,
     {{NEXAR__SEED_PROOF, 0, mac_a}, {NEXAR__SEED_JOIN, 0, &join_v}}, 0, 2},
    {"to-worker-join-bad-member", s_to_worker_join_bad_member, 1,
     {{NEXAR__SEED_JOIN, P, NOV}}, 0, 0},
    {"to-worker-admitted", s_to_worker_admitted, 2,
     {{NEXAR__SEED_PROOF, 0, mac_a},
      {NEXAR__SEED_ADMITTED, 0, &vtag[V_ADMITTED_2]}},
     0, 2},
    {"to-worker-admitted-none", s_to_worker_admitted_none, 1,
     {{NEXAR__SEED_ADMITTED, 0, &vtag[V_ADMITTED_0]}}, 0, 1},
    {"to-worker-admitted-count", s_to_worker_admitted_count, 1,
     {{NEXAR__SEED_ADMITTED, P, NOV}}, 0, 0},
    {"to-worker-reject", s_to_worker_reject, 1,
     {{NEXAR__SEED_REJECT, 0, reject_reason}}, 0, 1},
    {"to-seed-query", s_to_seed_query, 1,
     {{NEXAR__SEED_QUERY, 0, mac_a}}, 0, 1},
    {"to-rank-inspect", s_to_rank_inspect, 1,
     {{NEXAR__SEED_INSPECT, 0, mac_a}}, 0, 1},
    {"to-observer-state", s_to_observer_state, 2,
     {{NEXAR__SEED_PROOF, 0, mac_a}, {NEXAR__SEED_STATE, 0, &state_v}}, 0, 2},
    {"to-observer-state-bad-peer", s_to_observer_state_bad_peer, 1,
     {{NEXAR__SEED_STATE, P, NOV}}, 0, 0},
    /* Host identity: the HELLO host extension, host sections. */
    {"to-seed-hello-host", s_to_seed_hello_host, 1,
     {{NEXAR__SEED_HELLO, 0, &hello_host}}, 0, 1},
    {"to-worker-welcome-hosts", s_to_worker_welcome_hosts, 2,
     {{NEXAR__SEED_PROOF, 0, mac_a},
      {NEXAR__SEED_WELCOME, 0, &vtag[V_WELCOME_HOSTS]}},
     0, 2},
    {"to-worker-welcome-certs-hosts", s_to_worker_welcome_certs_hosts, 1,
     {{NEXAR__SEED_WELCOME, 0, &vtag[V_WELCOME_CERTS_HOSTS]}}, 0, 1},
    {"to-worker-welcome-hosts-none", s_to_worker_welcome_hosts_none, 1,
     {{NEXAR__SEED_WELCOME, P, NOV}}, 0, 0},
    {"to-worker-join-hosts", s_to_worker_join_hosts, 1,
     {{NEXAR__SEED_JOIN, 0, &join_h}}, 0, 1},
    {"to-worker-admitted-hosts", s_to_worker_admitted_hosts, 1,
     {{NEXAR__SEED_ADMITTED, 0, &vtag[V_ADMITTED_HOSTS]}}, 0, 1},
    /* Built values: nframes -1; each must encode and decode (1 round
     * trip). */
    {"build-hello", s_build_hello, -1, {{0}}, 0, 1},
    {"build-welcome", s_build_welcome, -1, {{0}}, 0, 1},
    {"build-admit", s_build_admit, -1, {{0}}, 0, 1},
    {"build-admitted", s_build_admitted, -1, {{0}}, 0, 1},
    {"build-join", s_build_join, -1, {{0}}, 0, 1},
    {"build-reject", s_build_reject, -1, {{0}}, 0, 1},
};
/* clang-format on */

typedef struct ctl_case {
  const char *name;
  void (*build)(buf_t *b);
  int rc;          /* the payload decoder's result */
  uint64_t id;     /* AGREE id, or FAILED id */
  uint32_t n;      /* AGREE count, or FAILED reason */
  uint32_t ids[3]; /* AGREE ids */
  unsigned roundtrips;
} ctl_case_t;

/* clang-format off */
static const ctl_case_t ctl_cases[] = {
    {"agree-propose", c_agree_propose, 0, 5, 2, {1, 3}, 1},
    {"agree-empty", c_agree_empty, 0, 0x0123456789abcdefull, 0, {0}, 1},
    {"agree-full", c_agree_full, 0, 7, 3, {0, 1, 2}, 1},
    {"agree-over", c_agree_over, P, 0, 0, {0}, 0},
    {"agree-count-lies", c_agree_count_lies, P, 0, 0, {0}, 0},
    {"agree-short", c_agree_short, P, 0, 0, {0}, 0},
    {"failed-heartbeat", c_failed_heartbeat, 0, 3, NEXAR_FAIL_HEARTBEAT, {0},
     1},
    {"failed-out-of-range", c_failed_out_of_range, P, 0, 0, {0}, 0},
    {"failed-unknown-reason", c_failed_unknown_reason, 0, 0, 0xdeadbeefu, {0},
     1},
    {"notice-probe", c_notice_probe, 0, 0, 0, {0}, 1},
    {"msg-agree", c_msg_agree, 0, 9, 1, {2}, 1},
    {"msg-failed", c_msg_failed, 0, 2, NEXAR_FAIL_CONNECTION, {0}, 1},
    {"msg-mismatch", c_msg_mismatch, 0, 0, 0, {0}, 1},
    {"build-agree", c_build_agree, 0, 42, 2, {4, 0}, 1},
    {"build-failed", c_build_failed, 0, 6, NEXAR_FAIL_REPORTED, {0}, 1},
};
/* clang-format on */

#define NSEED (sizeof seed_cases / sizeof seed_cases[0])
#define NCTL (sizeof ctl_cases / sizeof ctl_cases[0])

/* ---- Comparisons with the values. */

static void assert_waddr(const nexar__waddr_t *d, const nexar__waddr_t *v) {
  assert_int_equal(d->family, v->family);
  assert_int_equal(d->port, v->port);
  assert_memory_equal(d->ip, v->ip, 16); /* IPv4 tails are zero in both */
}

static void assert_entry(const nexar__roster_entry_t *d,
                         const nexar__roster_entry_t *v) {
  assert_waddr(&d->addr, &v->addr);
  assert_memory_equal(d->fingerprint, v->fingerprint, NEXAR__FP_BYTES);
  assert_true(d->host.key == v->host.key);
  assert_int_equal(d->host.pid, v->host.pid);
  assert_memory_equal(d->host.nonce, v->host.nonce, NEXAR__NONCE_BYTES);
}

static void assert_hello(const nexar__seed_hello_t *d,
                         const nexar__seed_hello_t *v) {
  assert_memory_equal(d->proof, v->proof, NEXAR__MAC_BYTES);
  assert_int_equal(d->rank, v->rank);
  assert_int_equal(d->world_size, v->world_size);
  assert_int_equal(d->has_addr, v->has_addr);
  assert_int_equal(d->join, v->join);
  assert_waddr(&d->advertise, &v->advertise);
  assert_memory_equal(d->fingerprint, v->fingerprint, NEXAR__FP_BYTES);
  assert_int_equal(d->pid, v->pid);
  assert_string_equal(d->host, v->host);
  assert_int_equal(d->cert_len, v->cert_len);
  assert_memory_equal(d->cert, v->cert, v->cert_len ? v->cert_len : 1);
  assert_string_equal(d->topo, v->topo);
  assert_true(d->host_key == v->host_key);
  assert_memory_equal(d->nonce, v->nonce, NEXAR__NONCE_BYTES);
}

/* Decodes one frame body and compares it with |e|. */
static void check_body(const fexp_t *e, const uint8_t *body, uint32_t len) {
  int rc;
  switch (e->type) {
    case NEXAR__SEED_PROOF:
    case NEXAR__SEED_QUERY:
    case NEXAR__SEED_INSPECT: {
      uint8_t mac[NEXAR__MAC_BYTES];
      rc = nexar__seed_proof_decode(mac, body, len);
      assert_int_equal(rc, e->rc);
      if (!rc) assert_memory_equal(mac, e->v, NEXAR__MAC_BYTES);
      break;
    }
    case NEXAR__SEED_STATE: {
      nexar__insp_state_t d;
      rc = nexar__insp_state_decode(&d, body, len);
      assert_int_equal(rc, e->rc);
      if (rc) break;
      assert_int_equal(d.rank, state_v.rank);
      assert_int_equal(d.world, state_v.world);
      assert_int_equal(d.pid, state_v.pid);
      assert_string_equal(d.host, state_v.host);
      assert_int_equal(d.nops, state_v.nops);
      for (uint32_t i = 0; i < d.nops; i++) {
        const nexar__insp_op_t *a = &d.ops[i], *v = &state_v.ops[i];
        assert_true(a->comm == v->comm && a->seq == v->seq &&
                    a->waited_us == v->waited_us && a->epoch == v->epoch);
        assert_int_equal(a->crank, v->crank);
        assert_int_equal(a->csize, v->csize);
        assert_string_equal(a->op, v->op);
        assert_string_equal(a->waits, v->waits);
      }
      assert_int_equal(d.npeers, 2);
      for (uint32_t i = 0; i < d.npeers; i++) {
        nexar__insp_peer_t p;
        nexar__insp_peer_at(&d, i, &p);
        assert_int_equal(p.rank, state_peers[i].rank);
        assert_int_equal(p.hb_age_ms, state_peers[i].hb_age_ms);
        assert_true(p.inflight == state_peers[i].inflight);
      }
      break;
    }
    case NEXAR__SEED_HELLO: {
      static nexar__seed_hello_t h;
      rc = nexar__seed_hello_decode(&h, body, len);
      assert_int_equal(rc, e->rc);
      if (!rc) assert_hello(&h, e->v);
      break;
    }
    case NEXAR__SEED_WELCOME: {
      nexar__seed_welcome_t w;
      rc = nexar__seed_welcome_decode(&w, body, len);
      assert_int_equal(rc, e->rc);
      if (rc) break;
      int tag = *(const int *)e->v;
      bool hosts = tag == V_WELCOME_HOSTS || tag == V_WELCOME_CERTS_HOSTS;
      bool certs = tag == V_WELCOME_CERTS || tag == V_WELCOME_CERTS_HOSTS;
      uint32_t ws = tag == V_WELCOME_3 || tag == V_WELCOME_HOSTS ? 3
                    : certs                                      ? 2
                                                                 : 1;
      assert_int_equal(w.world_size, ws);
      assert_int_equal(w.rank, ws == 3 ? 1 : 0);
      assert_true((w.hosts != NULL) == hosts);
      for (uint32_t i = 0; i < ws; i++) {
        nexar__roster_entry_t d;
        assert_int_equal(nexar__welcome_entry(&w, i, &d), 0);
        assert_entry(&d, hosts ? &roster_h[i] : &roster5[i]);
      }
      if (!certs) {
        assert_null(w.certs);
        break;
      }
      size_t pos = 0;
      for (uint32_t i = 0; i < 2; i++) {
        const uint8_t *der;
        uint16_t cl;
        assert_int_equal(nexar__welcome_cert(&w, &pos, &der, &cl), 0);
        assert_int_equal(cl, cert_len2[i]);
        if (cl)
          assert_memory_equal(der, certs2[i], cl);
        else
          assert_null(der);
      }
      assert_int_equal(pos, w.certs_len);
      break;
    }
    case NEXAR__SEED_REJECT: {
      nexar__seed_reject_t r;
      rc = nexar__seed_reject_decode(&r, body, len);
      assert_int_equal(rc, e->rc);
      if (rc) break;
      assert_int_equal(r.code, NEXAR_ERR_INVALID_ARG);
      assert_string_equal(r.reason, e->v);
      break;
    }
    case NEXAR__SEED_ADMIT: {
      nexar__seed_admit_t a;
      rc = nexar__seed_admit_decode(&a, body, len);
      assert_int_equal(rc, e->rc);
      if (rc) break;
      assert_memory_equal(a.proof, admit_v.proof, NEXAR__MAC_BYTES);
      assert_int_equal(a.comm_id, admit_v.comm_id);
      assert_int_equal(a.epoch, admit_v.epoch);
      assert_int_equal(a.max_joiners, admit_v.max_joiners);
      assert_int_equal(a.nstay, 3);
      for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(nexar__id_at(a.ids, i), admit_ids[i]);
      break;
    }
    case NEXAR__SEED_ADMITTED: {
      nexar__seed_admitted_t a;
      rc = nexar__seed_admitted_decode(&a, body, len);
      assert_int_equal(rc, e->rc);
      if (rc) break;
      int tag = *(const int *)e->v;
      bool two = tag != V_ADMITTED_0;
      const nexar__joiner_t *jv =
          tag == V_ADMITTED_HOSTS ? joiners_h : joiners_v;
      assert_int_equal(a.nids, two ? 6 : 4);
      assert_int_equal(a.njoin, two ? 2 : 0);
      assert_true((a.hosts != NULL) == (tag == V_ADMITTED_HOSTS));
      for (uint32_t i = 0; i < a.njoin; i++) {
        nexar__joiner_t j;
        assert_int_equal(nexar__admitted_entry(&a, i, &j), 0);
        assert_int_equal(j.id, jv[i].id);
        assert_entry(&j.e, &jv[i].e);
      }
      break;
    }
    case NEXAR__SEED_JOIN: {
      nexar__seed_join_t j;
      rc = nexar__seed_join_decode(&j, body, len);
      assert_int_equal(rc, e->rc);
      if (rc) break;
      assert_int_equal(j.id, join_v.id);
      assert_int_equal(j.nids, join_v.nids);
      assert_int_equal(j.comm_id, join_v.comm_id);
      assert_int_equal(j.epoch, join_v.epoch);
      assert_int_equal(j.nmembers, join_v.nmembers);
      bool hosts = e->v == &join_h;
      assert_true((j.hosts != NULL) == hosts);
      for (uint32_t i = 0; i < j.nids; i++) {
        nexar__roster_entry_t d;
        assert_int_equal(nexar__join_entry(&j, i, &d), 0);
        assert_entry(&d, hosts ? &roster_h[i] : &roster5[i]);
      }
      for (uint32_t i = 0; i < j.nmembers; i++)
        assert_int_equal(nexar__id_at(j.members, i), join_members[i]);
      break;
    }
    default:
      fail_msg("no decoder for type %u", e->type);
  }
}

static void check_seed_case(const seed_case_t *c, const uint8_t *in,
                            size_t len) {
  if (c->nframes < 0) return; /* built values: the harness checks them */
  const uint8_t *s = in + 2;  /* target, chunk */
  size_t left = len - 2;
  for (int i = 0; i <= c->nframes; i++) {
    uint8_t t = 0;
    uint32_t bl = 0;
    const uint8_t *body = NULL;
    int r = nexar__seed_frame_next(s, left, &t, &body, &bl);
    if (i == c->nframes) {
      assert_int_equal(r, c->end);
      break;
    }
    assert_int_equal(r, (int)(HDR + bl));
    assert_int_equal(t, c->f[i].type);
    assert_ptr_equal(body, s + HDR);
    check_body(&c->f[i], body, bl);
    s += r;
    left -= (size_t)r;
  }
}

static void check_ctl_case(const ctl_case_t *c, const uint8_t *in, size_t len) {
  const uint8_t *p = in + 1;
  size_t n = len - 1;
  uint8_t sel = in[0];
  if (sel == 3) {
    /* A whole message: the header first (it must be valid). */
    nexar__hdr_t h;
    uint32_t bound = nexar__get_u32(p);
    assert_int_equal(nexar__hdr_decode(&h, p + 4, n - 4, UINT64_MAX, NULL),
                     (int)NEXAR__HDR_BYTES);
    assert_int_equal(h.payload_len, n - 4 - NEXAR__HDR_BYTES);
    p += 4 + NEXAR__HDR_BYTES;
    n = (size_t)h.payload_len;
    if (h.kind == NEXAR__KIND_MISMATCH) {
      sel = 2;
    } else {
      sel = h.kind == NEXAR__KIND_AGREE ? 0 : 1;
      /* Put the bound back in front, as targets 0 and 1 have it. */
      static uint8_t tmp[64];
      assert_true(n + 4 <= sizeof tmp);
      nexar__put_u32(tmp, bound);
      memcpy(tmp + 4, p, n);
      p = tmp;
      n += 4;
    }
  }
  if (sel == 4) {
    /* Built: u64 id, u32 max_n, ids; encoded, then decoded. */
    static uint32_t ids[16];
    uint32_t k = (uint32_t)((n - 12) / 4);
    assert_true(k <= 16);
    for (uint32_t i = 0; i < k; i++) ids[i] = nexar__get_u32(p + 12 + 4 * i);
    uint8_t o[12 + 4 * 16];
    int w = nexar__agree_encode(nexar__get_u64(p), ids, k, o, sizeof o);
    assert_int_equal(w, 12 + 4 * (int)k);
    sel = 0;
    static uint8_t tmp[4 + sizeof o];
    memcpy(tmp, p + 8, 4);
    memcpy(tmp + 4, o, (size_t)w);
    p = tmp;
    n = 4 + (size_t)w;
  }
  if (sel == 5) {
    nexar__failed_t f = {nexar__get_u32(p), nexar__get_u32(p + 4)};
    static uint8_t tmp[12];
    memcpy(tmp, p + 8, 4);
    nexar__failed_encode(&f, tmp + 4);
    p = tmp;
    n = 12;
    sel = 1;
  }
  switch (sel) {
    case 0: {
      nexar__agree_msg_t m;
      int rc = nexar__agree_decode(&m, p + 4, n - 4, nexar__get_u32(p));
      assert_int_equal(rc, c->rc);
      if (rc) break;
      assert_int_equal(m.id, c->id);
      assert_int_equal(m.n, c->n);
      assert_ptr_equal(m.ids, p + 4 + 12);
      for (uint32_t i = 0; i < m.n; i++)
        assert_int_equal(nexar__id_at(m.ids, i), c->ids[i]);
      break;
    }
    case 1: {
      nexar__failed_t f;
      int rc = nexar__failed_decode(&f, p + 4, n - 4, nexar__get_u32(p));
      assert_int_equal(rc, c->rc);
      if (rc) break;
      assert_int_equal(f.id, c->id);
      assert_int_equal(f.reason, c->n);
      break;
    }
    case 2: {
      nexar__notice_t d;
      int rc = nexar__notice_decode(&d, p, n);
      assert_int_equal(rc, c->rc);
      if (rc) break;
      assert_int_equal(d.coll_seq, notice_v.coll_seq);
      assert_int_equal(d.rank_a, notice_v.rank_a);
      assert_int_equal(d.rank_b, notice_v.rank_b);
      assert_memory_equal(&d.a, &notice_v.a, sizeof d.a);
      assert_memory_equal(&d.b, &notice_v.b, sizeof d.b);
      break;
    }
    default:
      fail_msg("%s: unknown target %u", c->name, in[0]);
  }
}

/* ---- Corpus files. */

static uint8_t *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *b = malloc(1 << 16);
  assert_non_null(b);
  *len = fread(b, 1, 1 << 16, f);
  assert_true(feof(f));
  fclose(f);
  return b;
}

static int write_file(const char *path, const uint8_t *b, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(b, 1, len, f) == len;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* Fails on a file in |dir| that is not one of the |n| names. */
static void check_listed(const char *dir, const char *const *names, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", NEXAR_CORPUS_DIR, dir);
  DIR *d = opendir(path);
  assert_non_null(d);
  size_t seen = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    /* grown/: what `make fuzz` found (libFuzzer replays it). */
    if (e->d_name[0] == '.' || strcmp(e->d_name, "grown") == 0) continue;
    size_t i = 0;
    while (i < n && strcmp(names[i], e->d_name) != 0) i++;
    if (i == n)
      fail_msg("%s/%s: no case in test_ctl_decode.c describes this file", dir,
               e->d_name);
    seen++;
  }
  closedir(d);
  assert_int_equal(seen, n);
}

static void test_seed_corpus(void **state) {
  (void)state;
  const char *names[NSEED];
  for (size_t i = 0; i < NSEED; i++) names[i] = seed_cases[i].name;
  check_listed("seed", names, NSEED);
  for (size_t i = 0; i < NSEED; i++) {
    const seed_case_t *c = &seed_cases[i];
    buf_t b = {.n = 0};
    c->build(&b);
    char path[512];
    snprintf(path, sizeof path, "%s/seed/%s", NEXAR_CORPUS_DIR, c->name);
    size_t len = 0;
    uint8_t *in = read_file(path, &len);
    if (!in) fail_msg("%s: %s", path, strerror(errno));
    if (len != b.n || memcmp(in, b.b, len) != 0)
      fail_msg("%s differs from its case (regenerate the corpus)", path);
    check_seed_case(c, in, len);
    unsigned long before = fuzz_seed_roundtrips;
    fuzz_seed_one(in, len);
    if (fuzz_seed_roundtrips - before != c->roundtrips)
      fail_msg("%s: %lu round trips, expected %u", c->name,
               fuzz_seed_roundtrips - before, c->roundtrips);
    free(in);
  }
}

static void test_ctl_corpus(void **state) {
  (void)state;
  const char *names[NCTL];
  for (size_t i = 0; i < NCTL; i++) names[i] = ctl_cases[i].name;
  check_listed("ctl", names, NCTL);
  for (size_t i = 0; i < NCTL; i++) {
    const ctl_case_t *c = &ctl_cases[i];
    buf_t b = {.n = 0};
    c->build(&b);
    char path[512];
    snprintf(path, sizeof path, "%s/ctl/%s", NEXAR_CORPUS_DIR, c->name);
    size_t len = 0;
    uint8_t *in = read_file(path, &len);
    if (!in) fail_msg("%s: %s", path, strerror(errno));
    if (len != b.n || memcmp(in, b.b, len) != 0)
      fail_msg("%s differs from its case (regenerate the corpus)", path);
    check_ctl_case(c, in, len);
    unsigned long before = fuzz_ctl_roundtrips;
    fuzz_ctl_one(in, len);
    if (fuzz_ctl_roundtrips - before != c->roundtrips)
      fail_msg("%s: %lu round trips, expected %u", c->name,
               fuzz_ctl_roundtrips - before, c->roundtrips);
    free(in);
  }
}

/* Every corpus input cut short, and with every byte flipped, through the
 * harnesses (their checks abort on a wrong answer). */
static void test_corpus_mutations(void **state) {
  (void)state;
  for (size_t i = 0; i < NSEED + NCTL; i++) {
    buf_t b = {.n = 0};
    int seed = i < NSEED;
    if (seed)
      seed_cases[i].build(&b);
    else
      ctl_cases[i - NSEED].build(&b);
    for (size_t cut = 1; cut < b.n; cut++)
      (void)(seed ? fuzz_seed_one(b.b, cut) : fuzz_ctl_one(b.b, cut));
    for (size_t k = 1; k < b.n; k++) {
      for (int bit = 0; bit < 8; bit++) {
        b.b[k] ^= (uint8_t)(1u << bit);
        (void)(seed ? fuzz_seed_one(b.b, b.n) : fuzz_ctl_one(b.b, b.n));
        b.b[k] ^= (uint8_t)(1u << bit);
      }
    }
  }
}

/* ---- AGREE. */

static void test_agree_layout(void **state) {
  (void)state;
  static const uint32_t ids[2] = {1, 0x0a0b0c0du};
  static const uint8_t want[20] = {8, 7, 6, 5, 4, 3, 2,    1,    2,    0,
                                   0, 0, 1, 0, 0, 0, 0x0d, 0x0c, 0x0b, 0x0a};
  uint8_t o[20];
  assert_int_equal(nexar__agree_encode(0x0102030405060708ull, ids, 2, o, 20),
                   20);
  assert_memory_equal(o, want, 20);
  nexar__agree_msg_t m;
  assert_int_equal(nexar__agree_decode(&m, want, 20, 2), 0);
  assert_int_equal(m.id, 0x0102030405060708ull);
  assert_int_equal(m.n, 2);
  assert_ptr_equal(m.ids, want + 12);
  assert_int_equal(nexar__id_at(m.ids, 1), 0x0a0b0c0du);
  /* Encoder refusals. */
  assert_int_equal(nexar__agree_encode(1, ids, 2, o, 19),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__agree_encode(1, NULL, 1, o, 20),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__agree_encode(1, NULL, 0, NULL, 20),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(
      nexar__agree_encode(1, ids, NEXAR__AGREE_MAX_IDS + 1, o, SIZE_MAX),
      NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__agree_encode(1, NULL, 0, o, 12), 12);
  /* Argument errors of the decoder. */
  assert_int_equal(nexar__agree_decode(NULL, want, 20, 2),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__agree_decode(&m, NULL, 20, 2), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__agree_decode(&m, NULL, 0, 2), P);
}

static void test_agree_hostile(void **state) {
  (void)state;
  static const uint32_t ids[3] = {4, 0, 9};
  uint8_t pl[12 + 4 * 3 + 8];
  assert_int_equal(nexar__agree_encode(77, ids, 3, pl, sizeof pl), 24);
  nexar__agree_msg_t m, before;
  memset(&m, 0x5a, sizeof m);
  memcpy(&before, &m, sizeof m);
  /* Truncated: every shorter length. */
  for (size_t l = 0; l < 24; l++) {
    assert_int_equal(nexar__agree_decode(&m, pl, l, 3), P);
    assert_memory_equal(&m, &before, sizeof m);
  }
  /* Trailing bytes. */
  memset(pl + 24, 0, 8);
  assert_int_equal(nexar__agree_decode(&m, pl, 25, 3), P);
  assert_int_equal(nexar__agree_decode(&m, pl, 28, 3), P);
  /* The count against the member count: one fewer members refuses. */
  assert_int_equal(nexar__agree_decode(&m, pl, 24, 2), P);
  assert_int_equal(nexar__agree_decode(&m, pl, 24, 0), P);
  assert_memory_equal(&m, &before, sizeof m);
  assert_int_equal(nexar__agree_decode(&m, pl, 24, 3), 0);
  assert_int_equal(nexar__agree_decode(&m, pl, 24, UINT32_MAX), 0);
  /* Oversized counts that the length does not back. */
  static const uint32_t lies[] = {
      4, 2, 0, 0xffffffffu, 0x40000003u, NEXAR__AGREE_MAX_IDS + 1};
  for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
    nexar__put_u32(pl + 8, lies[i]);
    memcpy(&m, &before, sizeof m);
    assert_int_equal(nexar__agree_decode(&m, pl, 24, UINT32_MAX), P);
    assert_memory_equal(&m, &before, sizeof m);
  }
  /* The largest list, and one more (with the bytes there). */
  size_t big = 12 + 4 * ((size_t)NEXAR__AGREE_MAX_IDS + 1);
  uint8_t *b = calloc(1, big);
  assert_non_null(b);
  nexar__put_u32(b + 8, NEXAR__AGREE_MAX_IDS);
  assert_int_equal(nexar__agree_decode(&m, b, big - 4, UINT32_MAX), 0);
  assert_int_equal(m.n, NEXAR__AGREE_MAX_IDS);
  assert_int_equal(
      nexar__agree_decode(&m, b, big - 4, NEXAR__AGREE_MAX_IDS - 1), P);
  nexar__put_u32(b + 8, NEXAR__AGREE_MAX_IDS + 1);
  assert_int_equal(nexar__agree_decode(&m, b, big, UINT32_MAX), P);
  free(b);
  /* Out-of-range ids are the receiver's business (ignored, never an
   * index): accepted as sent. */
  static const uint32_t odd[2] = {0xffffffffu, 0x80000000u};
  assert_int_equal(nexar__agree_encode(3, odd, 2, pl, sizeof pl), 20);
  assert_int_equal(nexar__agree_decode(&m, pl, 20, 2), 0);
  assert_int_equal(nexar__id_at(m.ids, 0), 0xffffffffu);
  assert_int_equal(nexar__id_at(m.ids, 1), 0x80000000u);
}

static void test_agree_garbage(void **state) {
  (void)state;
  rng_state = 20;
  uint8_t in[64];
  for (int it = 0; it < 200000; it++) {
    size_t len = (size_t)(rng() % sizeof in);
    for (size_t i = 0; i < len; i++) in[i] = (uint8_t)rng();
    /* Mostly small counts, so that valid payloads come up. */
    if (len >= 12 && rng() % 2) nexar__put_u32(in + 8, (uint32_t)(rng() % 14));
    uint32_t max_n = (uint32_t)(rng() % 16);
    uint32_t n = len >= 12 ? nexar__get_u32(in + 8) : 0;
    int want = len >= 12 && n <= max_n && len == 12 + 4 * (size_t)n ? 0 : P;
    nexar__agree_msg_t m;
    memset(&m, 0, sizeof m);
    assert_int_equal(nexar__agree_decode(&m, in, len, max_n), want);
    if (want == 0)
      assert_true(m.n == n && m.ids == in + 12 && m.id == nexar__get_u64(in));
    else
      assert_true(m.n == 0 && m.ids == NULL && m.id == 0);
  }
}

/* ---- FAILED. */

static void test_failed(void **state) {
  (void)state;
  nexar__failed_t f = {.id = 0x01020304u, .reason = 0x0a0b0c0du}, d, before;
  uint8_t o[NEXAR__FAILED_BYTES + 1];
  static const uint8_t want[8] = {4, 3, 2, 1, 0x0d, 0x0c, 0x0b, 0x0a};
  nexar__failed_encode(&f, o);
  assert_memory_equal(o, want, 8);
  assert_int_equal(nexar__failed_decode(&d, o, 8, 0x01020305u), 0);
  assert_int_equal(d.id, f.id);
  assert_int_equal(d.reason, f.reason);
  memset(&d, 0x77, sizeof d);
  memcpy(&before, &d, sizeof d);
  /* Out-of-range ids: id == nids, nids 0, the largest id. */
  assert_int_equal(nexar__failed_decode(&d, o, 8, 0x01020304u), P);
  assert_int_equal(nexar__failed_decode(&d, o, 8, 0), P);
  f.id = 0xffffffffu;
  nexar__failed_encode(&f, o);
  assert_int_equal(nexar__failed_decode(&d, o, 8, 0xffffffffu), P);
  assert_memory_equal(&d, &before, sizeof d);
  f.id = 0xfffffffeu;
  nexar__failed_encode(&f, o);
  assert_int_equal(nexar__failed_decode(&d, o, 8, 0xffffffffu), 0);
  assert_int_equal(d.id, 0xfffffffeu);
  /* Truncated and too long. */
  memcpy(&before, &d, sizeof d);
  for (size_t l = 0; l < 8; l++)
    assert_int_equal(nexar__failed_decode(&d, o, l, 0xffffffffu), P);
  o[8] = 0;
  assert_int_equal(nexar__failed_decode(&d, o, 9, 0xffffffffu), P);
  assert_memory_equal(&d, &before, sizeof d);
  /* Every reason is kept as sent (it only names the cause). */
  for (uint32_t r = 0; r < 6; r++) {
    f.id = 1;
    f.reason = r;
    nexar__failed_encode(&f, o);
    assert_int_equal(nexar__failed_decode(&d, o, 8, 2), 0);
    assert_int_equal(d.reason, r);
  }
  assert_int_equal(nexar__failed_decode(NULL, o, 8, 2), NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__failed_decode(&d, NULL, 8, 2), NEXAR_ERR_INVALID_ARG);
  /* Garbage. */
  rng_state = 21;
  for (int it = 0; it < 100000; it++) {
    uint8_t in[12];
    size_t len = (size_t)(rng() % 13);
    for (size_t i = 0; i < len; i++) in[i] = (uint8_t)rng();
    uint32_t nids = (uint32_t)(rng() % 3 ? rng() % 8 : rng());
    if (len >= 4 && rng() % 2) nexar__put_u32(in, (uint32_t)(rng() % 10));
    int rc = len == 8 && nexar__get_u32(in) < nids ? 0 : P;
    assert_int_equal(nexar__failed_decode(&d, in, len, nids), rc);
  }
}

/* ---- MISMATCH notice: refused without touching the output. */

static void test_notice_refusal(void **state) {
  (void)state;
  uint8_t in[NEXAR__NOTICE_BYTES];
  nexar__notice_encode(&notice_v, in);
  nexar__notice_t n, before;
  memset(&n, 0x3c, sizeof n);
  memcpy(&before, &n, sizeof n);
  /* The second fingerprint's redop: 5..7 are unassigned. */
  in[32 + 2] = 5;
  assert_int_equal(nexar__notice_decode(&n, in, sizeof in), P);
  assert_memory_equal(&n, &before, sizeof n);
  in[32 + 2] = NEXAR_SUM;
  in[16 + 1] = NEXAR_NUM_DTYPES;
  assert_int_equal(nexar__notice_decode(&n, in, sizeof in), P);
  assert_memory_equal(&n, &before, sizeof n);
  in[16 + 1] = NEXAR_FLOAT32;
  assert_int_equal(nexar__notice_decode(&n, in, sizeof in - 1), P);
  assert_int_equal(nexar__notice_decode(&n, in, sizeof in), 0);
  assert_int_equal(n.coll_seq, 12);
}

/* ---- Seed stream splitting. */

static void test_frame_next(void **state) {
  (void)state;
  buf_t b = {.n = 0};
  f_proof(&b);
  f_hello(&b, &hello_v4);
  size_t first = HDR + NEXAR__MAC_BYTES;
  uint8_t t = 0;
  uint32_t bl = 0;
  const uint8_t *body = NULL;
  /* Every prefix of the first frame needs more bytes. */
  for (size_t l = 0; l < first; l++)
    assert_int_equal(nexar__seed_frame_next(b.b, l, &t, &body, &bl), 0);
  assert_null(body);
  assert_int_equal(nexar__seed_frame_next(b.b, b.n, &t, &body, &bl),
                   (int)first);
  assert_int_equal(t, NEXAR__SEED_PROOF);
  assert_int_equal(bl, NEXAR__MAC_BYTES);
  assert_ptr_equal(body, b.b + HDR);
  assert_int_equal(
      nexar__seed_frame_next(b.b + first, b.n - first, &t, &body, &bl),
      (int)(b.n - first));
  assert_int_equal(t, NEXAR__SEED_HELLO);
  /* A bad header is refused as soon as its 8 bytes are in. */
  uint8_t h[HDR];
  memcpy(h, b.b, HDR);
  h[3] = NEXAR__SEED_TYPE_MAX + 1;
  assert_int_equal(nexar__seed_frame_next(h, HDR - 1, &t, &body, &bl), 0);
  assert_int_equal(nexar__seed_frame_next(h, HDR, &t, &body, &bl), P);
  h[3] = 0;
  assert_int_equal(nexar__seed_frame_next(h, HDR, &t, &body, &bl), P);
  h[3] = NEXAR__SEED_PROOF;
  h[2] = NEXAR__WIRE_VERSION + 1;
  assert_int_equal(nexar__seed_frame_next(h, HDR, &t, &body, &bl), P);
  h[2] = NEXAR__WIRE_VERSION;
  /* The largest body waits for its bytes; one more is refused. */
  nexar__put_u32(h + 4, NEXAR__SEED_MAX_BODY);
  assert_int_equal(nexar__seed_frame_next(h, HDR, &t, &body, &bl), 0);
  nexar__put_u32(h + 4, NEXAR__SEED_MAX_BODY + 1);
  assert_int_equal(nexar__seed_frame_next(h, HDR, &t, &body, &bl), P);
  nexar__put_u32(h + 4, 0xffffffffu);
  assert_int_equal(nexar__seed_frame_next(h, HDR, &t, &body, &bl), P);
  /* An empty body is a whole frame. */
  nexar__put_u32(h + 4, 0);
  assert_int_equal(nexar__seed_frame_next(h, HDR, &t, &body, &bl), (int)HDR);
  assert_int_equal(bl, 0);
  /* Arguments. */
  assert_int_equal(nexar__seed_frame_next(h, HDR, NULL, &body, &bl),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_frame_next(h, HDR, &t, NULL, &bl),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_frame_next(h, HDR, &t, &body, NULL),
                   NEXAR_ERR_INVALID_ARG);
  assert_int_equal(nexar__seed_frame_next(NULL, 3, &t, &body, &bl),
                   NEXAR_ERR_INVALID_ARG);
  /* Garbage against what the header rules say. */
  rng_state = 22;
  for (int it = 0; it < 100000; it++) {
    uint8_t in[48];
    size_t len = (size_t)(rng() % sizeof in);
    for (size_t i = 0; i < len; i++) in[i] = (uint8_t)rng();
    if (len >= 8 && rng() % 4) {
      nexar__put_u16(in, NEXAR__WIRE_MAGIC);
      in[2] = NEXAR__WIRE_VERSION;
      if (rng() % 2) in[3] = (uint8_t)(rng() % 9);
      if (rng() % 2) nexar__put_u32(in + 4, (uint32_t)(rng() % 48));
    }
    int want;
    if (len < HDR)
      want = 0;
    else if (nexar__get_u16(in) != NEXAR__WIRE_MAGIC ||
             in[2] != NEXAR__WIRE_VERSION || in[3] < 1 ||
             in[3] > NEXAR__SEED_TYPE_MAX ||
             nexar__get_u32(in + 4) > NEXAR__SEED_MAX_BODY)
      want = P;
    else if (len - HDR < nexar__get_u32(in + 4))
      want = 0;
    else
      want = (int)(HDR + nexar__get_u32(in + 4));
    assert_int_equal(nexar__seed_frame_next(in, len, &t, &body, &bl), want);
  }
}

/* ---- Seed bodies cut short: refused, except where a shorter body is
 * itself whole (a HELLO without its identity or host extension, a WELCOME
 * without its certificates or hosts, an ADMITTED or JOIN without hosts):
 * the lengths also[0] and also[1]. */

static void truncate_one(uint8_t type, const uint8_t *body, uint32_t len,
                         const uint32_t also[2]) {
  static nexar__seed_hello_t h;
  for (uint32_t l = 0; l < len; l++) {
    int rc;
    switch (type) {
      case NEXAR__SEED_HELLO:
        rc = nexar__seed_hello_decode(&h, body, l);
        break;
      case NEXAR__SEED_WELCOME: {
        nexar__seed_welcome_t w;
        rc = nexar__seed_welcome_decode(&w, body, l);
        break;
      }
      case NEXAR__SEED_ADMIT: {
        nexar__seed_admit_t a;
        rc = nexar__seed_admit_decode(&a, body, l);
        break;
      }
      case NEXAR__SEED_ADMITTED: {
        nexar__seed_admitted_t a;
        rc = nexar__seed_admitted_decode(&a, body, l);
        break;
      }
      case NEXAR__SEED_JOIN: {
        nexar__seed_join_t j;
        rc = nexar__seed_join_decode(&j, body, l);
        break;
      }
      case NEXAR__SEED_REJECT: {
        nexar__seed_reject_t r;
        rc = nexar__seed_reject_decode(&r, body, l);
        break;
      }
      case NEXAR__SEED_STATE: {
        nexar__insp_state_t st;
        rc = nexar__insp_state_decode(&st, body, l);
        break;
      }
      default: {
        uint8_t mac[NEXAR__MAC_BYTES];
        rc = nexar__seed_proof_decode(mac, body, l);
        break;
      }
    }
    if (rc != (l == also[0] || l == also[1] ? 0 : P))
      fail_msg("type %u cut to %u of %u bytes: %d", type, l, len, rc);
  }
}

static void test_seed_truncated(void **state) {
  (void)state;
  for (size_t i = 0; i < NSEED; i++) {
    const seed_case_t *c = &seed_cases[i];
    if (c->nframes < 0) continue;
    buf_t b = {.n = 0};
    c->build(&b);
    const uint8_t *s = b.b + 2;
    size_t left = b.n - 2;
    for (int k = 0; k < c->nframes; k++) {
      uint8_t t;
      uint32_t bl;
      const uint8_t *body;
      int r = nexar__seed_frame_next(s, left, &t, &body, &bl);
      assert_true(r > 0);
      if (c->f[k].rc == 0) {
        uint32_t also[2] = {UINT32_MAX, UINT32_MAX};
        const void *v = c->f[k].v;
        int tag = t == NEXAR__SEED_WELCOME || t == NEXAR__SEED_ADMITTED
                      ? *(const int *)v
                      : -1;
        if (t == NEXAR__SEED_HELLO) {
          const nexar__seed_hello_t *h = v;
          uint32_t base = HELLO_FIXED + (uint32_t)strlen(h->host);
          if (h->cert_len) also[0] = base;
          if (h->host_key)
            also[1] = base + 3 + h->cert_len + (uint32_t)strlen(h->topo);
        }
        if (tag == V_WELCOME_CERTS || tag == V_WELCOME_CERTS_HOSTS)
          also[0] = 8 + 2 * ENTRY_BYTES;
        if (tag == V_WELCOME_CERTS_HOSTS) also[1] = 8 + 2 * ENTRY_BYTES + 9;
        if (tag == V_WELCOME_HOSTS) also[0] = 8 + 3 * ENTRY_BYTES;
        if (tag == V_ADMITTED_HOSTS) also[0] = 8 + 2 * 55;
        if (t == NEXAR__SEED_JOIN && v == &join_h)
          also[0] = 24 + 5 * ENTRY_BYTES + 3 * 4;
        truncate_one(t, body, bl, also);
      }
      s += r;
      left -= (size_t)r;
    }
  }
}

/* ---- Writing the corpus. */

static int write_corpus(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/seed", dir);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/ctl", dir);
  mkdir(path, 0755);
  for (size_t i = 0; i < NSEED + NCTL; i++) {
    buf_t b = {.n = 0};
    const char *name;
    if (i < NSEED) {
      seed_cases[i].build(&b);
      name = seed_cases[i].name;
      snprintf(path, sizeof path, "%s/seed/%s", dir, name);
    } else {
      ctl_cases[i - NSEED].build(&b);
      name = ctl_cases[i - NSEED].name;
      snprintf(path, sizeof path, "%s/ctl/%s", dir, name);
    }
    if (write_file(path, b.b, b.n) < 0) {
      fprintf(stderr, "%s: %s\n", path, strerror(errno));
      return 1;
    }
  }
  printf("wrote %zu seed and %zu ctl inputs under %s\n", NSEED, NCTL, dir);
  return 0;
}

int main(int argc, char **argv) {
  init_values();
  if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
    return write_corpus(argv[2]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seed_corpus),
      cmocka_unit_test(test_ctl_corpus),
      cmocka_unit_test(test_corpus_mutations),
      cmocka_unit_test(test_agree_layout),
      cmocka_unit_test(test_agree_hostile),
      cmocka_unit_test(test_agree_garbage),
      cmocka_unit_test(test_failed),
      cmocka_unit_test(test_notice_refusal),
      cmocka_unit_test(test_frame_next),
      cmocka_unit_test(test_seed_truncated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
