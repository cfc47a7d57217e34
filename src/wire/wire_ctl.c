/*
 * Payloads of the process-level control messages: FAILED notices and
 * AGREE messages (docs/wire-protocol.md section 2.5). Like wire.c: no I/O,
 * no allocation, no clock; every count and length is checked against the
 * bytes actually present and the receiver's bounds before anything is read
 * from a list, and the output is written only when the whole input is
 * valid.
 */
#include "wire.h"

/* Fixed part of an AGREE payload: u64 id, u32 n. */
#define AGREE_FIXED 12u

void nexar__failed_encode(const nexar__failed_t *f,
                          uint8_t out[NEXAR__FAILED_BYTES]) {
  nexar__put_u32(out, f->id);
  nexar__put_u32(out + 4, f->reason);
}

int nexar__failed_decode(nexar__failed_t *f, const uint8_t *in, size_t len,
                         uint32_t nids) {
  if (!f || (!in && len)) return NEXAR_ERR_INVALID_ARG;
  if (len != NEXAR__FAILED_BYTES) return NEXAR_ERR_PROTO;
  uint32_t id = nexar__get_u32(in);
  if (id >= nids) return NEXAR_ERR_PROTO;
  f->id = id;
  f->reason = nexar__get_u32(in + 4);
  return 0;
}

int nexar__agree_encode(uint64_t id, const uint32_t *ids, uint32_t n,
                        uint8_t *out, size_t cap) {
  if (!out || (n && !ids) || n > NEXAR__AGREE_MAX_IDS)
    return NEXAR_ERR_INVALID_ARG;
  size_t len = AGREE_FIXED + 4 * (size_t)n;
  if (cap < len) return NEXAR_ERR_INVALID_ARG;
  nexar__put_u64(out, id);
  nexar__put_u32(out + 8, n);
  for (uint32_t i = 0; i < n; i++)
    nexar__put_u32(out + AGREE_FIXED + 4 * (size_t)i, ids[i]);
  return (int)len;
}

int nexar__agree_decode(nexar__agree_msg_t *m, const uint8_t *in, size_t len,
                        uint32_t max_n) {
  if (!m || (!in && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < AGREE_FIXED) return NEXAR_ERR_PROTO;
  uint32_t n = nexar__get_u32(in + 8);
  /* The count is bounded before it is multiplied, so the product fits. */
  if (n > max_n || n > NEXAR__AGREE_MAX_IDS) return NEXAR_ERR_PROTO;
  if (len != AGREE_FIXED + 4 * (size_t)n) return NEXAR_ERR_PROTO;
  m->id = nexar__get_u64(in);
  m->n = n;
  m->ids = in + AGREE_FIXED;
  return 0;
}
