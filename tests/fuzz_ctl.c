/*
 * libFuzzer harness for the payloads of the process-level control messages
 * (docs/wire-protocol.md sections 2.4 and 2.5: MISMATCH notices, FAILED
 * notices, AGREE messages). The first input byte picks the target (modulo
 * 6), the rest is its input:
 *
 *   0  AGREE payload: u32 max_n (the receiver's member count), payload
 *   1  FAILED payload: u32 nids (the receiver's id count), payload
 *   2  MISMATCH notice payload
 *   3  a control message as the receiver gets it: u32 bound (max_n or
 *      nids), the 64-byte header, its payload; a header the codec accepts
 *      sends the payload to the decoder its kind names (match.c, then
 *      failure.c / agree.c / mismatch.c)
 *   4  AGREE built from the input: u64 id, u32 max_n, u32 ids to the end
 *   5  FAILED built from the input: u32 id, u32 reason, u32 nids
 *
 * Targets 0-3 check that a decoder accepts exactly the payloads the rules
 * allow, leaves its output untouched when it refuses, and that what it
 * accepts encodes back to exactly the accepted bytes. Targets 4 and 5
 * check the other direction: what the encoder writes decodes to the same
 * value whenever it is within the receiver's bounds. Any difference
 * aborts.
 *
 * Build: cmake -DNEXAR_FUZZ=ON with CC=clang (tests/CMakeLists.txt), or
 *        clang -g -fsanitize=fuzzer,address,undefined -Iinclude -Isrc
 *        src/wire/wire.c src/wire/wire_ctl.c tests/fuzz_ctl.c -o fuzz_ctl
 * Run:   ./fuzz_ctl -max_total_time=60 <copy of tests/corpus/ctl>
 *
 * With NEXAR_FUZZ_EMBED defined, no LLVMFuzzerTestOneInput is emitted and
 * the entry point is fuzz_ctl_one() (tests/test_ctl_decode.c replays the
 * corpus through it in the default gcc build).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

#define CHECK(c)                                                          \
  do {                                                                    \
    if (!(c)) {                                                           \
      fprintf(stderr, "fuzz_ctl.c:%d: check failed: %s\n", __LINE__, #c); \
      abort();                                                            \
    }                                                                     \
  } while (0)

#define AGREE_FIXED 12u
/* Lists longer than this are checked but not re-encoded. */
#define MAX_IDS_OUT 65536u

static uint8_t out[AGREE_FIXED + 4 * MAX_IDS_OUT];
static uint32_t ids[MAX_IDS_OUT];

int fuzz_ctl_one(const uint8_t *data, size_t size);
/* Round trips checked so far (for test_ctl_decode): one per accepted
 * payload re-encoded (targets 0-3), one per built value decoded (4, 5). */
extern unsigned long fuzz_ctl_roundtrips;
unsigned long fuzz_ctl_roundtrips;

static void fuzz_agree(const uint8_t *in, size_t len, uint32_t max_n) {
  nexar__agree_msg_t m, before;
  memset(&m, 0xa5, sizeof m);
  memcpy(&before, &m, sizeof m);
  int r = nexar__agree_decode(&m, in, len, max_n);
  uint32_t n = len >= AGREE_FIXED ? nexar__get_u32(in + 8) : 0;
  int valid = len >= AGREE_FIXED && n <= max_n && n <= NEXAR__AGREE_MAX_IDS &&
              len == AGREE_FIXED + 4 * (size_t)n;
  CHECK((r == 0) == valid);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    CHECK(memcmp(&m, &before, sizeof m) == 0);
    return;
  }
  CHECK(m.id == nexar__get_u64(in) && m.n == n && m.ids == in + AGREE_FIXED);
  /* The receiver's walk (agree.c): every id read lies in the payload. */
  uint64_t sum = 0;
  for (uint32_t i = 0; i < m.n; i++) sum += nexar__id_at(m.ids, i);
  (void)sum;
  if (m.n > MAX_IDS_OUT) return;
  for (uint32_t i = 0; i < m.n; i++) ids[i] = nexar__id_at(m.ids, i);
  int w = nexar__agree_encode(m.id, ids, m.n, out, sizeof out);
  CHECK(w == (int)len && memcmp(out, in, len) == 0);
  fuzz_ctl_roundtrips++;
}

static void fuzz_failed(const uint8_t *in, size_t len, uint32_t nids) {
  nexar__failed_t f, before;
  memset(&f, 0xa5, sizeof f);
  memcpy(&before, &f, sizeof f);
  int r = nexar__failed_decode(&f, in, len, nids);
  int valid = len == NEXAR__FAILED_BYTES && nexar__get_u32(in) < nids;
  CHECK((r == 0) == valid);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    CHECK(memcmp(&f, &before, sizeof f) == 0);
    return;
  }
  CHECK(f.id < nids);
  uint8_t o[NEXAR__FAILED_BYTES];
  nexar__failed_encode(&f, o);
  CHECK(memcmp(o, in, sizeof o) == 0);
  fuzz_ctl_roundtrips++;
}

/* The header's ranges for a fingerprint (wire.c fp_get). */
static int fp_valid(const uint8_t *p) {
  uint8_t op = p[2];
  return p[0] <= NEXAR__COLL_MAX && p[1] < NEXAR_NUM_DTYPES &&
         op < NEXAR_NUM_OPS && (op <= NEXAR_AVG || op >= NEXAR_BAND);
}

static void fuzz_notice(const uint8_t *in, size_t len) {
  nexar__notice_t n, before;
  memset(&n, 0xa5, sizeof n);
  memcpy(&before, &n, sizeof n);
  int r = nexar__notice_decode(&n, in, len);
  int valid =
      len == NEXAR__NOTICE_BYTES && fp_valid(in + 16) && fp_valid(in + 32);
  CHECK((r == 0) == valid);
  if (r != 0) {
    CHECK(r == NEXAR_ERR_PROTO);
    CHECK(memcmp(&n, &before, sizeof n) == 0);
    return;
  }
  uint8_t o[NEXAR__NOTICE_BYTES];
  nexar__notice_encode(&n, o);
  CHECK(memcmp(o, in, sizeof o) == 0);
  fuzz_ctl_roundtrips++;
}

static void fuzz_ctl_msg(const uint8_t *in, size_t len) {
  if (len < 4) return;
  uint32_t bound = nexar__get_u32(in);
  in += 4;
  len -= 4;
  nexar__hdr_t h;
  const char *why = NULL;
  /* Any receiver limit: the header bounds control payloads itself. */
  if (nexar__hdr_decode(&h, in, len, UINT64_MAX, &why) <= 0) return;
  uint8_t o[NEXAR__HDR_BYTES];
  nexar__hdr_encode(&h, o);
  CHECK(memcmp(o, in, NEXAR__HDR_BYTES) == 0);
  if (h.payload_len > len - NEXAR__HDR_BYTES) return; /* not all arrived */
  const uint8_t *pl = in + NEXAR__HDR_BYTES;
  size_t plen = (size_t)h.payload_len;
  switch (h.kind) {
    case NEXAR__KIND_FAILED:
      CHECK(h.lane == NEXAR__LANE_CONTROL && (h.comm_id >> 63) &&
            plen == NEXAR__FAILED_BYTES);
      fuzz_failed(pl, plen, bound);
      break;
    case NEXAR__KIND_AGREE:
      /* What match.c allocates for the payload is bounded here. */
      CHECK(h.lane == NEXAR__LANE_CONTROL && (h.comm_id >> 63) &&
            h.step >= NEXAR__AG_PROPOSE && h.step <= NEXAR__AG_READY &&
            plen >= AGREE_FIXED && (plen - AGREE_FIXED) % 4 == 0 &&
            (plen - AGREE_FIXED) / 4 <= NEXAR__AGREE_MAX_IDS);
      fuzz_agree(pl, plen, bound);
      break;
    case NEXAR__KIND_MISMATCH:
      CHECK(h.lane == NEXAR__LANE_CONTROL && plen == NEXAR__NOTICE_BYTES);
      fuzz_notice(pl, plen);
      break;
    default:
      break;
  }
}

static void build_agree(const uint8_t *in, size_t len) {
  if (len < 12) return;
  uint64_t id = nexar__get_u64(in);
  uint32_t max_n = nexar__get_u32(in + 8);
  size_t n = (len - 12) / 4;
  if (n > MAX_IDS_OUT) n = MAX_IDS_OUT;
  for (size_t i = 0; i < n; i++) ids[i] = nexar__get_u32(in + 12 + 4 * i);
  int w = nexar__agree_encode(id, ids, (uint32_t)n, out, sizeof out);
  CHECK(w == (int)(AGREE_FIXED + 4 * n));
  CHECK(nexar__agree_encode(id, ids, (uint32_t)n, out, (size_t)w - 1) ==
        NEXAR_ERR_INVALID_ARG);
  nexar__agree_msg_t m;
  int r = nexar__agree_decode(&m, out, (size_t)w, max_n);
  if (n > max_n) {
    CHECK(r == NEXAR_ERR_PROTO);
    return;
  }
  CHECK(r == 0 && m.id == id && m.n == n && m.ids == out + AGREE_FIXED);
  for (uint32_t i = 0; i < m.n; i++) CHECK(nexar__id_at(m.ids, i) == ids[i]);
  fuzz_ctl_roundtrips++;
}

static void build_failed(const uint8_t *in, size_t len) {
  if (len < 12) return;
  nexar__failed_t f = {.id = nexar__get_u32(in),
                       .reason = nexar__get_u32(in + 4)};
  uint32_t nids = nexar__get_u32(in + 8);
  uint8_t o[NEXAR__FAILED_BYTES];
  nexar__failed_encode(&f, o);
  nexar__failed_t d;
  int r = nexar__failed_decode(&d, o, sizeof o, nids);
  if (f.id >= nids) {
    CHECK(r == NEXAR_ERR_PROTO);
    return;
  }
  CHECK(r == 0 && d.id == f.id && d.reason == f.reason);
  fuzz_ctl_roundtrips++;
}

int fuzz_ctl_one(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const uint8_t *in = data + 1;
  size_t len = size - 1;
  switch (data[0] % 6) {
    case 0:
      if (len >= 4) fuzz_agree(in + 4, len - 4, nexar__get_u32(in));
      break;
    case 1:
      if (len >= 4) fuzz_failed(in + 4, len - 4, nexar__get_u32(in));
      break;
    case 2:
      fuzz_notice(in, len);
      break;
    case 3:
      fuzz_ctl_msg(in, len);
      break;
    case 4:
      build_agree(in, len);
      break;
    default:
      build_failed(in, len);
      break;
  }
  return 0;
}

#ifndef NEXAR_FUZZ_EMBED
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return fuzz_ctl_one(data, size);
}
#endif
