/*
 * Live inspection frames (docs/wire-protocol.md section 6.6): the STATE a
 * rank answers an authenticated observer with, and the ROSTER the seed
 * answers one with. Like wire.c: no I/O, no allocation, no clock; every
 * count and length is checked against the bytes present before anything is
 * read, and the output is written only when the whole input is valid.
 *
 * STATE body: u32 rank, u32 world, u32 pid, u8 host_len, host; u8 nops,
 * then per operation u64 comm, u64 seq, u64 waited_us, u32 epoch,
 * u32 crank, u32 csize, u8 op_len, op, u8 waits_len, waits; u32 npeers,
 * then per link u32 rank, u32 hb_age_ms, u64 inflight. Nothing follows.
 */
#include <string.h>

#include "wire/wire_int.h"

#define STATE_FIXED 13u /* rank, world, pid, host_len */
#define OP_FIXED 38u    /* the fixed fields of one operation, both lengths */

/* Whether the |n| bytes at |s| are printable ASCII (|names|) or a list of
 * ranks: digits, commas and spaces. */
static int text_ok(const uint8_t *s, size_t n, int names) {
  for (size_t i = 0; i < n; i++) {
    uint8_t ch = s[i];
    if (names ? (ch < 0x20 || ch > 0x7e)
              : !((ch >= '0' && ch <= '9') || ch == ',' || ch == ' '))
      return 0;
  }
  return 1;
}

static size_t text_len(const char *s, size_t max) {
  size_t n = 0;
  while (n <= max && s[n]) n++;
  return n;
}

/* Appends the string |s| (at most |max| bytes) as u8 length and bytes. */
static uint8_t *put_text(uint8_t *p, const char *s, size_t n) {
  p[0] = (uint8_t)n;
  memcpy(p + 1, s, n);
  return p + 1 + n;
}

int nexar__insp_state_encode(const nexar__insp_state_t *s,
                             const nexar__insp_peer_t *peers, uint8_t *out,
                             size_t cap) {
  if (!s || (s->npeers && !peers) || s->nops > NEXAR__INSP_OPS ||
      s->world < 1 || s->world > RANK_LIMIT || s->rank >= s->world ||
      s->npeers > s->world)
    return NEXAR_ERR_INVALID_ARG;
  size_t hl = text_len(s->host, NEXAR__HOST_MAX);
  if (hl > NEXAR__HOST_MAX || !text_ok((const uint8_t *)s->host, hl, 1))
    return NEXAR_ERR_INVALID_ARG;
  uint64_t body = STATE_FIXED + hl + 1u + 4u;
  size_t ol[NEXAR__INSP_OPS], wl[NEXAR__INSP_OPS];
  for (uint32_t i = 0; i < s->nops; i++) {
    const nexar__insp_op_t *o = &s->ops[i];
    ol[i] = text_len(o->op, NEXAR__INSP_OP_NAME);
    wl[i] = text_len(o->waits, NEXAR__INSP_WAITS);
    if (!ol[i] || ol[i] > NEXAR__INSP_OP_NAME || wl[i] > NEXAR__INSP_WAITS ||
        !text_ok((const uint8_t *)o->op, ol[i], 1) ||
        !text_ok((const uint8_t *)o->waits, wl[i], 0) || o->csize < 1 ||
        o->crank < 0 || o->crank >= o->csize)
      return NEXAR_ERR_INVALID_ARG;
    body += OP_FIXED + ol[i] + wl[i];
  }
  for (uint32_t i = 0; i < s->npeers; i++)
    if (peers[i].rank >= s->world) return NEXAR_ERR_INVALID_ARG;
  body += (uint64_t)s->npeers * NEXAR__INSP_PEER_BYTES;
  int n = nexar__wire_frame_begin(out, cap, NEXAR__SEED_STATE, (size_t)body);
  if (n < 0) return n;
  uint8_t *p = out + NEXAR__SEED_FRAME_HDR;
  nexar__put_u32(p, s->rank);
  nexar__put_u32(p + 4, s->world);
  nexar__put_u32(p + 8, s->pid);
  p = put_text(p + 12, s->host, hl);
  *p++ = (uint8_t)s->nops;
  for (uint32_t i = 0; i < s->nops; i++) {
    const nexar__insp_op_t *o = &s->ops[i];
    nexar__put_u64(p, o->comm);
    nexar__put_u64(p + 8, o->seq);
    nexar__put_u64(p + 16, o->waited_us);
    nexar__put_u32(p + 24, o->epoch);
    nexar__put_u32(p + 28, (uint32_t)o->crank);
    nexar__put_u32(p + 32, (uint32_t)o->csize);
    p = put_text(p + 36, o->op, ol[i]);
    p = put_text(p, o->waits, wl[i]);
  }
  nexar__put_u32(p, s->npeers);
  p += 4;
  for (uint32_t i = 0; i < s->npeers; i++, p += NEXAR__INSP_PEER_BYTES) {
    nexar__put_u32(p, peers[i].rank);
    nexar__put_u32(p + 4, peers[i].hb_age_ms);
    nexar__put_u64(p + 8, peers[i].inflight);
  }
  return n;
}

/* Reads a u8-length string of at most |max| bytes at |*pos| into |dst|. */
static int get_text(char *dst, size_t max, const uint8_t *b, size_t len,
                    size_t *pos, int names) {
  if (*pos >= len) return NEXAR_ERR_PROTO;
  size_t n = b[*pos];
  if (n > max || len - *pos - 1 < n || !text_ok(b + *pos + 1, n, names))
    return NEXAR_ERR_PROTO;
  memcpy(dst, b + *pos + 1, n);
  dst[n] = 0;
  *pos += 1 + n;
  return 0;
}

int nexar__insp_state_decode(nexar__insp_state_t *s, const uint8_t *body,
                             size_t len) {
  if (!s || (!body && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < STATE_FIXED || len > NEXAR__SEED_MAX_BODY) return NEXAR_ERR_PROTO;
  nexar__insp_state_t d;
  memset(&d, 0, sizeof d);
  d.rank = nexar__get_u32(body);
  d.world = nexar__get_u32(body + 4);
  d.pid = nexar__get_u32(body + 8);
  if (d.world < 1 || d.world > RANK_LIMIT || d.rank >= d.world)
    return NEXAR_ERR_PROTO;
  size_t pos = 12;
  if (get_text(d.host, NEXAR__HOST_MAX, body, len, &pos, 1) < 0 || pos >= len)
    return NEXAR_ERR_PROTO;
  d.nops = body[pos++];
  if (d.nops > NEXAR__INSP_OPS) return NEXAR_ERR_PROTO;
  for (uint32_t i = 0; i < d.nops; i++) {
    nexar__insp_op_t *o = &d.ops[i];
    if (len - pos < OP_FIXED - 2u) return NEXAR_ERR_PROTO;
    o->comm = nexar__get_u64(body + pos);
    o->seq = nexar__get_u64(body + pos + 8);
    o->waited_us = nexar__get_u64(body + pos + 16);
    o->epoch = nexar__get_u32(body + pos + 24);
    o->crank = (int32_t)nexar__get_u32(body + pos + 28);
    o->csize = (int32_t)nexar__get_u32(body + pos + 32);
    pos += 36;
    if (o->csize < 1 || o->csize > RANK_LIMIT || o->crank < 0 ||
        o->crank >= o->csize ||
        get_text(o->op, NEXAR__INSP_OP_NAME, body, len, &pos, 1) < 0 ||
        !o->op[0] ||
        get_text(o->waits, NEXAR__INSP_WAITS, body, len, &pos, 0) < 0)
      return NEXAR_ERR_PROTO;
  }
  if (len - pos < 4) return NEXAR_ERR_PROTO;
  d.npeers = nexar__get_u32(body + pos);
  pos += 4;
  /* Bounded before it is multiplied. */
  if (d.npeers > d.world ||
      (uint64_t)(len - pos) != (uint64_t)d.npeers * NEXAR__INSP_PEER_BYTES)
    return NEXAR_ERR_PROTO;
  for (uint32_t i = 0; i < d.npeers; i++)
    if (nexar__get_u32(body + pos + (size_t)i * NEXAR__INSP_PEER_BYTES) >=
        d.world)
      return NEXAR_ERR_PROTO;
  d.peers = d.npeers ? body + pos : NULL;
  *s = d;
  return 0;
}

void nexar__insp_peer_at(const nexar__insp_state_t *s, uint32_t i,
                         nexar__insp_peer_t *p) {
  const uint8_t *b = s->peers + (size_t)i * NEXAR__INSP_PEER_BYTES;
  p->rank = nexar__get_u32(b);
  p->hb_age_ms = nexar__get_u32(b + 4);
  p->inflight = nexar__get_u64(b + 8);
}

int nexar__seed_roster_encode(uint32_t world_size,
                              const nexar__roster_entry_t *entries,
                              uint8_t *out, size_t cap) {
  int n = nexar__seed_welcome_encode(0, world_size, entries, out, cap);
  if (n > 0) out[3] = NEXAR__SEED_ROSTER;
  return n;
}
