/*
 * libFuzzer harness for the seed exchange as each side reads it
 * (docs/wire-protocol.md sections 6 and 7). The first input byte picks the
 * target (modulo 8), the rest is its input:
 *
 *   0  the stream a seed reads from a worker or a members' leader, or a
 *      seed or a rank from an observer: u8 chunk, then the stream (HELLO,
 *      ADMIT, QUERY and INSPECT are read; seed.c, observe.c)
 *   1  the stream a worker or a members' leader reads from the seed, or an
 *      observer from the seed or a rank: u8 chunk, then the stream (PROOF,
 *      WELCOME, JOIN, ADMITTED, REJECT, ROSTER, STATE; bootstrap.c,
 *      elastic.c, inspect.c)
 *   2  a HELLO built from the input, encoded, then decoded
 *   3  a WELCOME (roster and certificates) built from the input
 *   4  an ADMIT built from the input
 *   5  an ADMITTED built from the input
 *   6  a JOIN built from the input
 *   7  a REJECT built from the input
 *
 * A stream is split into frames twice: all at once, and fed chunk + 1
 * bytes at a time through a reassembly buffer the way nexar__seed_feed
 * does; both must give the same frames and stop at the same point. Each
 * frame's body goes to the decoder its reader uses. What a decoder accepts
 * must encode back to exactly that frame, and is then walked the way the
 * cluster code walks it (every roster entry, certificate and id), checking
 * the bounds those callers index by. Targets 2-7 check the other
 * direction: a value the encoder accepts decodes to itself (in canonical
 * form: an IPv4 address's unused bytes are zero on the wire). Any
 * difference aborts.
 *
 * Build: cmake -DNEXAR_FUZZ=ON with CC=clang (tests/CMakeLists.txt), or
 *        clang -g -fsanitize=fuzzer,address,undefined -Iinclude -Isrc
 *        src/wire/wire*.c tests/fuzz_seed.c -o fuzz_seed
 * Run:   ./fuzz_seed -max_total_time=60 <copy of tests/corpus/seed>
 *
 * With NEXAR_FUZZ_EMBED defined, no LLVMFuzzerTestOneInput is emitted and
 * the entry point is fuzz_seed_one() (tests/test_ctl_decode.c replays the
 * corpus through it in the default gcc build).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

#define CHECK(c)                                                           \
  do {                                                                     \
    if (!(c)) {                                                            \
      fprintf(stderr, "fuzz_seed.c:%d: check failed: %s\n", __LINE__, #c); \
      abort();                                                             \
    }                                                                      \
  } while (0)

#define HDR NEXAR__SEED_FRAME_HDR
#define ENTRY_BYTES (19u + NEXAR__FP_BYTES)
/* The most roster entries any body can hold (a WELCOME without
 * certificates). */
#define MAX_ENTRIES ((NEXAR__SEED_MAX_BODY - 8u) / ENTRY_BYTES)
#define MAX_FRAMES 256

static uint8_t out[HDR + NEXAR__SEED_MAX_BODY];
static uint8_t sbuf[HDR + NEXAR__SEED_MAX_BODY];
static nexar__roster_entry_t roster[MAX_ENTRIES], roster2[MAX_ENTRIES];
static const uint8_t *certs[MAX_ENTRIES];
static uint16_t cert_len[MAX_ENTRIES];
static uint32_t ids[NEXAR__ELASTIC_MAX_IDS], ids2[NEXAR__ELASTIC_MAX_IDS];
static nexar__joiner_t joiners[NEXAR__ELASTIC_MAX_IDS];
static nexar__seed_hello_t hello, hello2;
static uint8_t certbuf[NEXAR__CERT_MAX];

int fuzz_seed_one(const uint8_t *data, size_t size);
/* Round trips checked so far (for test_ctl_decode): one per decoded value
 * re-encoded (targets 0 and 1), one per built value decoded (2-7). */
extern unsigned long fuzz_seed_roundtrips;
unsigned long fuzz_seed_roundtrips;

/* ---- Helpers. */

/* 1 when |a| and |b| are the same address in canonical form. */
static int waddr_eq(const nexar__waddr_t *a, const nexar__waddr_t *b) {
  return a->family == b->family && a->port == b->port &&
         memcmp(a->ip, b->ip, a->family == 4 ? 4 : 16) == 0;
}

static int entry_eq(const nexar__roster_entry_t *a,
                    const nexar__roster_entry_t *b) {
  return waddr_eq(&a->addr, &b->addr) &&
         memcmp(a->fingerprint, b->fingerprint, NEXAR__FP_BYTES) == 0;
}

/* A decoded address: a known family, and an IPv4 tail of zeros. */
static void check_waddr(const nexar__waddr_t *a) {
  CHECK(a->family == 4 || a->family == 6);
  if (a->family == 4)
    for (int i = 4; i < 16; i++) CHECK(a->ip[i] == 0);
}

static int printable(const char *s) {
  for (; *s; s++)
    if (*s < 0x20 || *s > 0x7e) return 0;
  return 1;
}

/* |n| ids below |limit|, each once. */
static void check_ids(const uint8_t *p, uint32_t n, uint32_t limit) {
  static uint8_t seen[NEXAR__ELASTIC_MAX_IDS];
  CHECK(limit <= NEXAR__ELASTIC_MAX_IDS);
  memset(seen, 0, limit);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t id = nexar__id_at(p, i);
    CHECK(id < limit && !seen[id]);
    seen[id] = 1;
  }
}

/* Checks that frame |n| (from an encoder) is |type| holding exactly the
 * |len| bytes at |body|. */
static void check_frame(int n, uint8_t type, const uint8_t *body, size_t len) {
  uint8_t t;
  uint32_t blen;
  const uint8_t *b;
  CHECK(n == (int)(HDR + len));
  CHECK(nexar__seed_frame_next(out, (size_t)n, &t, &b, &blen) == n);
  CHECK(t == type && blen == len && b == out + HDR);
  CHECK(len == 0 || memcmp(b, body, len) == 0);
  fuzz_seed_roundtrips++;
}

/* Reads input bytes; zeros once it runs out. */
typedef struct rd {
  const uint8_t *p;
  size_t left;
} rd_t;

static uint8_t get8(rd_t *r) {
  if (!r->left) return 0;
  r->left--;
  return *r->p++;
}
static uint16_t get16(rd_t *r) {
  uint16_t v = get8(r);
  return (uint16_t)(v | get8(r) << 8);
}
static uint32_t get32(rd_t *r) {
  uint32_t v = get16(r);
  return v | (uint32_t)get16(r) << 16;
}
static uint64_t get64(rd_t *r) {
  uint64_t v = get32(r);
  return v | (uint64_t)get32(r) << 32;
}
static void getn(rd_t *r, uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = get8(r);
}

/* An address: mostly a known family, sometimes any byte. */
static void get_waddr(rd_t *r, nexar__waddr_t *a) {
  uint8_t f = get8(r);
  a->family = f % 3 == 0 ? 4 : f % 3 == 1 ? 6 : f;
  a->port = get16(r);
  getn(r, a->ip, a->family == 4 ? 4 : 16);
  if (a->family == 4) memset(a->ip + 4, 0, 12);
}

/* A roster entry: its fingerprint is one input byte repeated (cheap). */
static void get_entry(rd_t *r, nexar__roster_entry_t *e) {
  memset(e, 0, sizeof *e);
  get_waddr(r, &e->addr);
  memset(e->fingerprint, get8(r), NEXAR__FP_BYTES);
}

/* ---- Decoders, as the readers use them. Each returns the decoder's result
 * and checks what it accepted against the frame it came from. */

static void dec_proof(const uint8_t *body, uint32_t len) {
  uint8_t mac[NEXAR__MAC_BYTES];
  int r = nexar__seed_proof_decode(mac, body, len);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO && len != NEXAR__MAC_BYTES);
    return;
  }
  check_frame(nexar__seed_proof_encode(mac, out, sizeof out), NEXAR__SEED_PROOF,
              body, len);
}

/* A rank's STATE, walked as inspect_table.c walks it. */
static nexar__insp_peer_t ipeers[NEXAR__SEED_MAX_BODY / NEXAR__INSP_PEER_BYTES];
static void dec_state(const uint8_t *body, uint32_t len) {
  nexar__insp_state_t s;
  int r = nexar__insp_state_decode(&s, body, len);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    return;
  }
  CHECK(s.rank < s.world && s.nops <= NEXAR__INSP_OPS && s.npeers <= s.world);
  CHECK(memchr(s.host, 0, sizeof s.host) && printable(s.host));
  for (uint32_t i = 0; i < s.nops; i++) {
    const nexar__insp_op_t *o = &s.ops[i];
    CHECK(o->op[0] && memchr(o->op, 0, sizeof o->op) && printable(o->op));
    CHECK(memchr(o->waits, 0, sizeof o->waits) &&
          strspn(o->waits, "0123456789, ") == strlen(o->waits));
    CHECK(o->crank >= 0 && o->crank < o->csize);
  }
  CHECK((uint64_t)s.npeers * NEXAR__INSP_PEER_BYTES <= len);
  for (uint32_t i = 0; i < s.npeers; i++) {
    nexar__insp_peer_at(&s, i, &ipeers[i]);
    CHECK(ipeers[i].rank < s.world);
  }
  check_frame(nexar__insp_state_encode(&s, ipeers, out, sizeof out),
              NEXAR__SEED_STATE, body, len);
}

static void dec_hello(const uint8_t *body, uint32_t len) {
  int r = nexar__seed_hello_decode(&hello, body, len);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    return;
  }
  /* seed.c prints host and topo, compares topo, checks the certificate. */
  CHECK(hello.rank >= -1 && hello.rank < (1 << 24));
  CHECK(hello.world_size >= 0 && hello.world_size <= (1 << 24));
  CHECK(hello.has_addr <= 1 && hello.join <= 1);
  if (hello.has_addr) check_waddr(&hello.advertise);
  CHECK(memchr(hello.host, 0, sizeof hello.host) && printable(hello.host));
  CHECK(memchr(hello.topo, 0, sizeof hello.topo) && printable(hello.topo));
  CHECK(hello.cert_len <= NEXAR__CERT_MAX);
  CHECK(hello.cert_len || !hello.topo[0]);
  check_frame(nexar__seed_hello_encode(&hello, out, sizeof out),
              NEXAR__SEED_HELLO, body, len);
}

static void dec_welcome(const uint8_t *body, uint32_t len) {
  nexar__seed_welcome_t w;
  int r = nexar__seed_welcome_decode(&w, body, len);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    return;
  }
  /* bootstrap.c on_welcome: tables of world_size, roster[rank]. */
  CHECK(w.world_size >= 1 && w.rank < w.world_size &&
        w.world_size <= MAX_ENTRIES);
  CHECK((uint64_t)w.world_size * ENTRY_BYTES + 8 <= len);
  for (uint32_t i = 0; i < w.world_size; i++) {
    CHECK(nexar__welcome_entry(&w, i, &roster[i]) == 0);
    check_waddr(&roster[i].addr);
  }
  CHECK(nexar__welcome_entry(&w, w.world_size, &roster2[0]) ==
        NEXAR_ERR_INVALID_ARG);
  /* roster_keys: one certificate per rank, the section used up exactly. */
  size_t pos = 0;
  for (uint32_t i = 0; w.certs && i < w.world_size; i++) {
    CHECK(nexar__welcome_cert(&w, &pos, &certs[i], &cert_len[i]) == 0);
    CHECK(cert_len[i] <= NEXAR__CERT_MAX && (cert_len[i] == 0) == !certs[i]);
    if (certs[i])
      CHECK(certs[i] >= body && certs[i] + cert_len[i] <= body + len);
  }
  const uint8_t *der;
  uint16_t cl;
  CHECK(nexar__welcome_cert(&w, &pos, &der, &cl) == NEXAR_ERR_INVALID_ARG);
  CHECK(!w.certs || pos == w.certs_len);
  check_frame(nexar__seed_welcome_encode_certs(
                  w.rank, w.world_size, roster, w.certs ? certs : NULL,
                  w.certs ? cert_len : NULL, out, sizeof out),
              NEXAR__SEED_WELCOME, body, len);
}

static void dec_reject(const uint8_t *body, uint32_t len) {
  nexar__seed_reject_t rj;
  int r = nexar__seed_reject_decode(&rj, body, len);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    return;
  }
  CHECK(rj.code < 0 && printable(rj.reason));
  check_frame(nexar__seed_reject_encode(rj.code, rj.reason, out, sizeof out),
              NEXAR__SEED_REJECT, body, len);
}

static void dec_admit(const uint8_t *body, uint32_t len) {
  nexar__seed_admit_t a;
  int r = nexar__seed_admit_decode(&a, body, len);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    return;
  }
  /* seed.c on_admit and admit(): ids compared with nids, then indexed. */
  CHECK(a.nstay >= 1 && a.nstay <= NEXAR__ELASTIC_MAX_IDS);
  CHECK(a.comm_id >= 1 && a.epoch >= 1);
  check_ids(a.ids, a.nstay, NEXAR__ELASTIC_MAX_IDS);
  for (uint32_t i = 0; i < a.nstay; i++) ids[i] = nexar__id_at(a.ids, i);
  check_frame(nexar__seed_admit_encode(&a, ids, out, sizeof out),
              NEXAR__SEED_ADMIT, body, len);
}

static void dec_admitted(const uint8_t *body, uint32_t len) {
  nexar__seed_admitted_t a;
  int r = nexar__seed_admitted_decode(&a, body, len);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    return;
  }
  /* elastic.c: tables grown to nids, then indexed by each joiner's id. */
  CHECK(a.nids <= NEXAR__ELASTIC_MAX_IDS && a.njoin <= a.nids);
  for (uint32_t i = 0; i < a.njoin; i++) {
    CHECK(nexar__admitted_entry(&a, i, &joiners[i]) == 0);
    CHECK(joiners[i].id < a.nids && (!i || joiners[i].id > joiners[i - 1].id));
    check_waddr(&joiners[i].e.addr);
  }
  nexar__joiner_t past;
  CHECK(nexar__admitted_entry(&a, a.njoin, &past) == NEXAR_ERR_INVALID_ARG);
  check_frame(
      nexar__seed_admitted_encode(a.nids, joiners, a.njoin, out, sizeof out),
      NEXAR__SEED_ADMITTED, body, len);
}

static void dec_join(const uint8_t *body, uint32_t len) {
  nexar__seed_join_t j;
  int r = nexar__seed_join_decode(&j, body, len);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    return;
  }
  /* elastic.c nexar__elastic_on_join: tables of nids, roster[id], dead[m]
   * for every member m, and the joiner among the members. */
  CHECK(j.nids >= 1 && j.nids <= NEXAR__ELASTIC_MAX_IDS && j.id < j.nids);
  CHECK(j.nmembers >= 1 && j.nmembers <= j.nids);
  CHECK(j.comm_id >= 1 && j.epoch >= 1);
  for (uint32_t i = 0; i < j.nids; i++) {
    CHECK(nexar__join_entry(&j, i, &roster[i]) == 0);
    check_waddr(&roster[i].addr);
  }
  CHECK(nexar__join_entry(&j, j.nids, &roster2[0]) == NEXAR_ERR_INVALID_ARG);
  check_ids(j.members, j.nmembers, j.nids);
  int found = 0;
  for (uint32_t i = 0; i < j.nmembers; i++) {
    ids[i] = nexar__id_at(j.members, i);
    found |= ids[i] == j.id;
  }
  CHECK(found);
  check_frame(nexar__seed_join_encode(&j, roster, ids, out, sizeof out),
              NEXAR__SEED_JOIN, body, len);
}

/* ---- Streams. */

typedef struct frame {
  uint8_t type;
  size_t off; /* of the body in the stream */
  uint32_t len;
} frame_t;

static frame_t fr1[MAX_FRAMES], fr2[MAX_FRAMES];

/* Splits |in| at once. Returns the frame count; *end is the last
 * nexar__seed_frame_next result (0: more needed, or NEXAR_ERR_PROTO). */
static int split_all(const uint8_t *in, size_t len, int *end) {
  size_t pos = 0;
  int n = 0;
  for (;;) {
    uint8_t t;
    uint32_t bl;
    const uint8_t *b;
    int r = nexar__seed_frame_next(in + pos, len - pos, &t, &b, &bl);
    if (r <= 0 || n == MAX_FRAMES) {
      CHECK(r == 0 || r == NEXAR_ERR_PROTO || n == MAX_FRAMES);
      *end = r <= 0 ? r : 0;
      return n;
    }
    CHECK((size_t)r == HDR + bl && (size_t)r <= len - pos);
    CHECK(b == in + pos + HDR && t >= 1 && t <= NEXAR__SEED_TYPE_MAX);
    CHECK(bl <= NEXAR__SEED_MAX_BODY);
    fr1[n++] = (frame_t){t, pos + HDR, bl};
    pos += (size_t)r;
  }
}

/* Splits |in| fed |chunk| bytes at a time into a buffer that keeps what is
 * not consumed yet (nexar__seed_feed). */
static int split_fed(const uint8_t *in, size_t len, size_t chunk, int *end) {
  size_t fed = 0, have = 0, base = 0; /* base: stream offset of sbuf[0] */
  int n = 0;
  *end = 0;
  while (fed < len) {
    size_t k = len - fed < chunk ? len - fed : chunk;
    CHECK(have + k <= sizeof sbuf);
    memcpy(sbuf + have, in + fed, k);
    have += k;
    fed += k;
    for (;;) {
      uint8_t t;
      uint32_t bl;
      const uint8_t *b;
      int r = nexar__seed_frame_next(sbuf, have, &t, &b, &bl);
      if (r < 0) {
        *end = r;
        return n;
      }
      if (r == 0) break;
      if (n == MAX_FRAMES) return n;
      fr2[n++] = (frame_t){t, base + HDR, bl};
      memmove(sbuf, sbuf + r, have - (size_t)r);
      have -= (size_t)r;
      base += (size_t)r;
    }
  }
  return n;
}

static void fuzz_stream(const uint8_t *in, size_t len, int to_seed) {
  if (len < 1) return;
  size_t chunk = (size_t)in[0] + 1;
  in++;
  len--;
  int end1, end2;
  int n1 = split_all(in, len, &end1);
  if (len <= NEXAR__SEED_MAX_BODY) {
    int n2 = split_fed(in, len, chunk, &end2);
    CHECK(n1 == n2);
    if (n1 < MAX_FRAMES) CHECK(end1 == end2);
    for (int i = 0; i < n1; i++)
      CHECK(fr1[i].type == fr2[i].type && fr1[i].off == fr2[i].off &&
            fr1[i].len == fr2[i].len);
  }
  for (int i = 0; i < n1; i++) {
    const uint8_t *b = in + fr1[i].off;
    uint32_t bl = fr1[i].len;
    switch (fr1[i].type) {
      case NEXAR__SEED_HELLO:
        if (to_seed) dec_hello(b, bl);
        break;
      case NEXAR__SEED_ADMIT:
        if (to_seed) dec_admit(b, bl);
        break;
      case NEXAR__SEED_PROOF:
        if (!to_seed) dec_proof(b, bl);
        break;
      case NEXAR__SEED_QUERY:
      case NEXAR__SEED_INSPECT:
        if (to_seed) dec_proof(b, bl);
        break;
      case NEXAR__SEED_ROSTER: /* a WELCOME body */
        if (!to_seed) dec_welcome(b, bl);
        break;
      case NEXAR__SEED_STATE:
        if (!to_seed) dec_state(b, bl);
        break;
      case NEXAR__SEED_WELCOME:
        if (!to_seed) dec_welcome(b, bl);
        break;
      case NEXAR__SEED_JOIN:
        if (!to_seed) dec_join(b, bl);
        break;
      case NEXAR__SEED_ADMITTED:
        if (!to_seed) dec_admitted(b, bl);
        break;
      default:
        if (!to_seed) dec_reject(b, bl);
        break;
    }
  }
}

/* ---- Values built from the input: decode(encode(x)) == x. */

/* The frame an encoder wrote into |out| (|n| bytes, or its error): false
 * when the encoder refused the input (only with NEXAR_ERR_INVALID_ARG),
 * else its type and body, the frame being exactly |n| bytes. */
static bool unframe(int n, uint8_t *t, const uint8_t **b, uint32_t *bl) {
  if (n < 0) {
    CHECK(n == NEXAR_ERR_INVALID_ARG);
    return false;
  }
  CHECK(nexar__seed_frame_next(out, (size_t)n, t, b, bl) == n);
  return true;
}

static void build_hello(rd_t *r) {
  nexar__seed_hello_t *h = &hello;
  memset(h, 0, sizeof *h);
  getn(r, h->proof, 4); /* the rest stays zero: cheap */
  h->rank = (int32_t)get32(r);
  h->world_size = (int32_t)get32(r);
  uint8_t f = get8(r);
  h->has_addr = f & 3;
  h->join = (uint8_t)(f >> 2 & 3);
  if (h->has_addr) get_waddr(r, &h->advertise);
  memset(h->fingerprint, get8(r), NEXAR__FP_BYTES);
  h->pid = get32(r);
  size_t hl = get8(r) % (NEXAR__HOST_MAX + 3);
  getn(r, (uint8_t *)h->host, hl < sizeof h->host ? hl : sizeof h->host);
  h->cert_len = get16(r) % (NEXAR__CERT_MAX + 3);
  memset(h->cert, get8(r), NEXAR__CERT_MAX);
  size_t tl = get8(r) % (NEXAR__TOPO_MAX + 3);
  getn(r, (uint8_t *)h->topo, tl < sizeof h->topo ? tl : sizeof h->topo);
  int n = nexar__seed_hello_encode(h, out, sizeof out);
  uint8_t t;
  uint32_t bl;
  const uint8_t *b;
  if (!unframe(n, &t, &b, &bl)) return;
  CHECK(t == NEXAR__SEED_HELLO);
  CHECK(nexar__seed_hello_decode(&hello2, b, bl) == 0);
  const nexar__seed_hello_t *d = &hello2;
  CHECK(memcmp(d->proof, h->proof, NEXAR__MAC_BYTES) == 0);
  CHECK(d->rank == h->rank && d->world_size == h->world_size);
  CHECK(d->has_addr == h->has_addr && d->join == h->join);
  CHECK(!h->has_addr || waddr_eq(&d->advertise, &h->advertise));
  CHECK(memcmp(d->fingerprint, h->fingerprint, NEXAR__FP_BYTES) == 0);
  CHECK(d->pid == h->pid && strcmp(d->host, h->host) == 0);
  CHECK(d->cert_len == h->cert_len &&
        memcmp(d->cert, h->cert, h->cert_len) == 0);
  CHECK(strcmp(d->topo, h->topo) == 0);
  fuzz_seed_roundtrips++;
}

static void build_welcome(rd_t *r) {
  uint32_t ws = get16(r) % 512;
  uint32_t rank = get16(r) % (ws + 2);
  int with_certs = get8(r) & 1;
  for (uint32_t i = 0; i < ws; i++) {
    get_entry(r, &roster[i]);
    if (!with_certs) continue;
    /* Certificates share one buffer: the contents do not matter here. */
    cert_len[i] = get16(r) % (NEXAR__CERT_MAX + 2);
    certs[i] = cert_len[i] ? certbuf : (get8(r) & 1 ? certbuf : NULL);
  }
  memset(certbuf, 0x5a, sizeof certbuf);
  int n = nexar__seed_welcome_encode_certs(
      rank, ws, roster, with_certs ? certs : NULL, with_certs ? cert_len : NULL,
      out, sizeof out);
  uint8_t t;
  uint32_t bl;
  const uint8_t *b;
  if (!unframe(n, &t, &b, &bl)) return;
  nexar__seed_welcome_t w;
  CHECK(t == NEXAR__SEED_WELCOME && nexar__seed_welcome_decode(&w, b, bl) == 0);
  CHECK(w.rank == rank && w.world_size == ws && !w.certs == !with_certs);
  size_t pos = 0;
  for (uint32_t i = 0; i < ws; i++) {
    CHECK(nexar__welcome_entry(&w, i, &roster2[i]) == 0);
    CHECK(entry_eq(&roster2[i], &roster[i]));
    if (!with_certs) continue;
    const uint8_t *der;
    uint16_t cl;
    CHECK(nexar__welcome_cert(&w, &pos, &der, &cl) == 0);
    CHECK(cl == cert_len[i] && (!cl || memcmp(der, certbuf, cl) == 0));
  }
  fuzz_seed_roundtrips++;
}

static void build_admit(rd_t *r) {
  nexar__seed_admit_t a;
  memset(&a, 0, sizeof a);
  getn(r, a.proof, 4);
  a.comm_id = get64(r);
  a.epoch = get32(r);
  a.max_joiners = get32(r);
  a.nstay = get16(r) % 1024;
  for (uint32_t i = 0; i < a.nstay; i++) ids[i] = get16(r);
  int n = nexar__seed_admit_encode(&a, ids, out, sizeof out);
  uint8_t t;
  uint32_t bl;
  const uint8_t *b;
  if (!unframe(n, &t, &b, &bl)) return;
  nexar__seed_admit_t d;
  CHECK(t == NEXAR__SEED_ADMIT && nexar__seed_admit_decode(&d, b, bl) == 0);
  CHECK(memcmp(d.proof, a.proof, NEXAR__MAC_BYTES) == 0);
  CHECK(d.comm_id == a.comm_id && d.epoch == a.epoch &&
        d.max_joiners == a.max_joiners && d.nstay == a.nstay);
  for (uint32_t i = 0; i < a.nstay; i++)
    CHECK(nexar__id_at(d.ids, i) == ids[i]);
  fuzz_seed_roundtrips++;
}

static void build_admitted(rd_t *r) {
  uint32_t nids = get16(r) % (NEXAR__ELASTIC_MAX_IDS + 2);
  uint32_t njoin = get8(r);
  uint32_t id = get16(r) % (nids + 1);
  for (uint32_t i = 0; i < njoin; i++) {
    joiners[i].id = id;
    get_entry(r, &joiners[i].e);
    id += get8(r) % 3; /* 0 repeats an id: refused */
  }
  int n = nexar__seed_admitted_encode(nids, joiners, njoin, out, sizeof out);
  uint8_t t;
  uint32_t bl;
  const uint8_t *b;
  if (!unframe(n, &t, &b, &bl)) return;
  nexar__seed_admitted_t a;
  CHECK(t == NEXAR__SEED_ADMITTED &&
        nexar__seed_admitted_decode(&a, b, bl) == 0);
  CHECK(a.nids == nids && a.njoin == njoin);
  for (uint32_t i = 0; i < njoin; i++) {
    nexar__joiner_t j;
    CHECK(nexar__admitted_entry(&a, i, &j) == 0);
    CHECK(j.id == joiners[i].id && entry_eq(&j.e, &joiners[i].e));
  }
  fuzz_seed_roundtrips++;
}

static void build_join(rd_t *r) {
  nexar__seed_join_t j;
  memset(&j, 0, sizeof j);
  j.nids = get16(r) % 600;
  j.id = get16(r) % (j.nids + 1);
  j.comm_id = get64(r);
  j.epoch = get32(r);
  j.nmembers = get16(r) % (j.nids + 2);
  for (uint32_t i = 0; i < j.nids; i++) get_entry(r, &roster[i]);
  for (uint32_t i = 0; i < j.nmembers; i++) ids2[i] = get16(r) % (j.nids + 1);
  int n = nexar__seed_join_encode(&j, roster, ids2, out, sizeof out);
  uint8_t t;
  uint32_t bl;
  const uint8_t *b;
  if (!unframe(n, &t, &b, &bl)) return;
  nexar__seed_join_t d;
  CHECK(t == NEXAR__SEED_JOIN && nexar__seed_join_decode(&d, b, bl) == 0);
  CHECK(d.id == j.id && d.nids == j.nids && d.comm_id == j.comm_id &&
        d.epoch == j.epoch && d.nmembers == j.nmembers);
  for (uint32_t i = 0; i < j.nids; i++) {
    CHECK(nexar__join_entry(&d, i, &roster2[i]) == 0);
    CHECK(entry_eq(&roster2[i], &roster[i]));
  }
  for (uint32_t i = 0; i < j.nmembers; i++)
    CHECK(nexar__id_at(d.members, i) == ids2[i]);
  fuzz_seed_roundtrips++;
}

static void build_reject(rd_t *r) {
  char reason[NEXAR__REASON_MAX + 8];
  int32_t code = (int32_t)get32(r);
  size_t rl = get16(r) % sizeof reason;
  memset(reason, 0, sizeof reason);
  getn(r, (uint8_t *)reason, rl < sizeof reason - 1 ? rl : sizeof reason - 1);
  int n = nexar__seed_reject_encode(code, reason, out, sizeof out);
  uint8_t t;
  uint32_t bl;
  const uint8_t *b;
  if (!unframe(n, &t, &b, &bl)) return;
  nexar__seed_reject_t d;
  CHECK(t == NEXAR__SEED_REJECT && nexar__seed_reject_decode(&d, b, bl) == 0);
  CHECK(d.code == code && strcmp(d.reason, reason) == 0);
  fuzz_seed_roundtrips++;
}

int fuzz_seed_one(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  rd_t r = {data + 1, size - 1};
  switch (data[0] % 8) {
    case 0:
      fuzz_stream(data + 1, size - 1, 1);
      break;
    case 1:
      fuzz_stream(data + 1, size - 1, 0);
      break;
    case 2:
      build_hello(&r);
      break;
    case 3:
      build_welcome(&r);
      break;
    case 4:
      build_admit(&r);
      break;
    case 5:
      build_admitted(&r);
      break;
    case 6:
      build_join(&r);
      break;
    default:
      build_reject(&r);
      break;
  }
  return 0;
}

#ifndef NEXAR_FUZZ_EMBED
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_seed_one(data, size);
}
#endif
