/*
 * libFuzzer harness for the wire codec. The first input byte picks the
 * decoder (modulo 10: header, seed frame header, PROOF, HELLO, WELCOME,
 * REJECT, a whole seed frame, ADMIT, ADMITTED, JOIN), the rest is its input.
 * Whatever a decoder accepts must encode back to exactly the accepted bytes;
 * any difference aborts.
 *
 * Build: clang -g -fsanitize=fuzzer,address,undefined -Iinclude -Isrc
 *        src/wire/wire.c tests/fuzz_wire.c -o fuzz_wire
 * Run:   ./fuzz_wire tests/corpus/wire
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

#define ENTRY_BYTES (19u + NEXAR__FP_BYTES)
/* Bodies longer than this are not re-encoded (the roster buffer below). */
#define MAX_ENTRIES 1024u

static uint8_t out[NEXAR__SEED_FRAME_HDR + 8 +
                   MAX_ENTRIES * (ENTRY_BYTES + 2 + NEXAR__CERT_MAX)];
static nexar__roster_entry_t roster[MAX_ENTRIES];
static const uint8_t *certs[MAX_ENTRIES];
static uint16_t cert_len[MAX_ENTRIES];

static void check(int cond) {
  if (!cond) abort();
}

/* Checks that |n| is a frame holding exactly the |len| bytes at |body|. */
static void check_frame(int n, uint8_t type, const uint8_t *body, size_t len) {
  uint8_t t;
  uint32_t blen;
  check(n == (int)(NEXAR__SEED_FRAME_HDR + len));
  check(nexar__seed_frame_decode(out, (size_t)n, &t, &blen) ==
        (int)NEXAR__SEED_FRAME_HDR);
  check(t == type && blen == len);
  check(len == 0 || memcmp(out + NEXAR__SEED_FRAME_HDR, body, len) == 0);
}

static void fuzz_hdr(const uint8_t *in, size_t len) {
  nexar__hdr_t h;
  const char *why = NULL;
  uint64_t max_payload = UINT64_MAX;
  /* Vary the payload bound with the input so that both sides are hit. */
  if (len > NEXAR__HDR_BYTES) max_payload = (uint64_t)in[len - 1] << 8;
  int r = nexar__hdr_decode(&h, in, len, max_payload, &why);
  if (len < NEXAR__HDR_BYTES) {
    check(r == 0);
  } else if (r > 0) {
    check(r == (int)NEXAR__HDR_BYTES);
    /* A relay frame carries a whole message after its envelope. */
    check(h.payload_len <= max_payload ||
          (h.kind == NEXAR__KIND_RELAY &&
           h.payload_len - NEXAR__RELAY_PRE_BYTES <= max_payload));
    nexar__hdr_encode(&h, out);
    check(memcmp(out, in, NEXAR__HDR_BYTES) == 0);
  } else {
    check(r == NEXAR_ERR_PROTO && why != NULL);
  }
}

static void fuzz_frame(const uint8_t *in, size_t len) {
  uint8_t type;
  uint32_t blen;
  int r = nexar__seed_frame_decode(in, len, &type, &blen);
  if (r > 0) {
    check(r == (int)NEXAR__SEED_FRAME_HDR);
    check(type >= 1 && type <= NEXAR__SEED_TYPE_MAX);
    check(blen <= NEXAR__SEED_MAX_BODY);
  } else {
    check(r == 0 || r == NEXAR_ERR_PROTO);
    check(r != 0 || len < NEXAR__SEED_FRAME_HDR);
  }
}

static void fuzz_proof(const uint8_t *in, size_t len) {
  uint8_t mac[NEXAR__MAC_BYTES];
  int r = nexar__seed_proof_decode(mac, in, len);
  if (r == 0)
    check_frame(nexar__seed_proof_encode(mac, out, sizeof out),
                NEXAR__SEED_PROOF, in, len);
  else
    check(r == NEXAR_ERR_PROTO);
}

static void fuzz_hello(const uint8_t *in, size_t len) {
  nexar__seed_hello_t h;
  int r = nexar__seed_hello_decode(&h, in, len);
  if (r == 0)
    check_frame(nexar__seed_hello_encode(&h, out, sizeof out),
                NEXAR__SEED_HELLO, in, len);
  else
    check(r == NEXAR_ERR_PROTO);
}

static void fuzz_welcome(const uint8_t *in, size_t len) {
  nexar__seed_welcome_t w;
  int r = nexar__seed_welcome_decode(&w, in, len);
  if (r != 0) {
    check(r == NEXAR_ERR_PROTO);
    return;
  }
  check(w.world_size >= 1 && w.rank < w.world_size);
  if (w.world_size > MAX_ENTRIES) return;
  size_t pos = 0;
  for (uint32_t i = 0; i < w.world_size; i++) {
    check(nexar__welcome_entry(&w, i, &roster[i]) == 0);
    if (w.certs)
      check(nexar__welcome_cert(&w, &pos, &certs[i], &cert_len[i]) == 0);
  }
  check_frame(nexar__seed_welcome_encode_certs(
                  w.rank, w.world_size, roster, w.certs ? certs : NULL,
                  w.certs ? cert_len : NULL, out, sizeof out),
              NEXAR__SEED_WELCOME, in, len);
}

static uint32_t ids[MAX_ENTRIES];
static nexar__joiner_t joiners[MAX_ENTRIES];

static void fuzz_admit(const uint8_t *in, size_t len) {
  nexar__seed_admit_t a;
  int r = nexar__seed_admit_decode(&a, in, len);
  if (r != 0) {
    check(r == NEXAR_ERR_PROTO);
    return;
  }
  check(a.nstay >= 1 && a.nstay <= NEXAR__ELASTIC_MAX_IDS);
  if (a.nstay > MAX_ENTRIES) return;
  for (uint32_t i = 0; i < a.nstay; i++) ids[i] = nexar__id_at(a.ids, i);
  check_frame(nexar__seed_admit_encode(&a, ids, out, sizeof out),
              NEXAR__SEED_ADMIT, in, len);
}

static void fuzz_admitted(const uint8_t *in, size_t len) {
  nexar__seed_admitted_t a;
  int r = nexar__seed_admitted_decode(&a, in, len);
  if (r != 0) {
    check(r == NEXAR_ERR_PROTO);
    return;
  }
  check(a.njoin <= a.nids && a.nids <= NEXAR__ELASTIC_MAX_IDS);
  if (a.njoin > MAX_ENTRIES / 2) return; /* 55-byte entries fit out */
  for (uint32_t i = 0; i < a.njoin; i++)
    check(nexar__admitted_entry(&a, i, &joiners[i]) == 0 &&
          joiners[i].id < a.nids);
  check_frame(
      nexar__seed_admitted_encode(a.nids, joiners, a.njoin, out, sizeof out),
      NEXAR__SEED_ADMITTED, in, len);
}

static void fuzz_join(const uint8_t *in, size_t len) {
  nexar__seed_join_t j;
  int r = nexar__seed_join_decode(&j, in, len);
  if (r != 0) {
    check(r == NEXAR_ERR_PROTO);
    return;
  }
  check(j.id < j.nids && j.nmembers >= 1 && j.nmembers <= j.nids);
  /* The roster buffer bounds what is re-encoded (out holds its entries and
   * as many member ids). */
  if (j.nids > MAX_ENTRIES / 2) return;
  for (uint32_t i = 0; i < j.nids; i++)
    check(nexar__join_entry(&j, i, &roster[i]) == 0);
  for (uint32_t i = 0; i < j.nmembers; i++) {
    ids[i] = nexar__id_at(j.members, i);
    check(ids[i] < j.nids);
  }
  check_frame(nexar__seed_join_encode(&j, roster, ids, out, sizeof out),
              NEXAR__SEED_JOIN, in, len);
}

static void fuzz_reject(const uint8_t *in, size_t len) {
  nexar__seed_reject_t rj;
  int r = nexar__seed_reject_decode(&rj, in, len);
  if (r == 0)
    check_frame(nexar__seed_reject_encode(rj.code, rj.reason, out, sizeof out),
                NEXAR__SEED_REJECT, in, len);
  else
    check(r == NEXAR_ERR_PROTO);
}

/* A whole seed frame: header, then the body decoder named by its type. */
static void fuzz_seed_stream(const uint8_t *in, size_t len) {
  uint8_t type;
  uint32_t blen;
  if (nexar__seed_frame_decode(in, len, &type, &blen) <= 0) return;
  if (len - NEXAR__SEED_FRAME_HDR < blen) return;
  in += NEXAR__SEED_FRAME_HDR;
  switch (type) {
    case NEXAR__SEED_PROOF:
      fuzz_proof(in, blen);
      break;
    case NEXAR__SEED_HELLO:
      fuzz_hello(in, blen);
      break;
    case NEXAR__SEED_WELCOME:
      fuzz_welcome(in, blen);
      break;
    case NEXAR__SEED_ADMIT:
      fuzz_admit(in, blen);
      break;
    case NEXAR__SEED_ADMITTED:
      fuzz_admitted(in, blen);
      break;
    case NEXAR__SEED_JOIN:
      fuzz_join(in, blen);
      break;
    default:
      fuzz_reject(in, blen);
      break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const uint8_t *in = data + 1;
  size_t len = size - 1;
  switch (data[0] % 10) {
    case 0:
      fuzz_hdr(in, len);
      break;
    case 1:
      fuzz_frame(in, len);
      break;
    case 2:
      fuzz_proof(in, len);
      break;
    case 3:
      fuzz_hello(in, len);
      break;
    case 4:
      fuzz_welcome(in, len);
      break;
    case 5:
      fuzz_reject(in, len);
      break;
    case 6:
      fuzz_seed_stream(in, len);
      break;
    case 7:
      fuzz_admit(in, len);
      break;
    case 8:
      fuzz_admitted(in, len);
      break;
    default:
      fuzz_join(in, len);
      break;
  }
  return 0;
}
