/*
 * Wire codec of elastic membership: ADMIT, ADMITTED and JOIN bodies (see
 * wire.c and docs/wire-protocol.md).
 */
#include <string.h>

#include "wire/wire_int.h"

/* ---- Elastic membership: ADMIT, ADMITTED, JOIN. */

int nexar__seed_admit_encode(const nexar__seed_admit_t *a, const uint32_t *ids,
                             uint8_t *out, size_t cap) {
  uint8_t *p;
  int n;

  if (!a || !ids || a->nstay < 1 || a->nstay > NEXAR__ELASTIC_MAX_IDS ||
      a->comm_id < 1 || a->epoch < 1)
    return NEXAR_ERR_INVALID_ARG;
  n = nexar__wire_frame_begin(out, cap, NEXAR__SEED_ADMIT,
                              ADMIT_FIXED + 4u * (size_t)a->nstay);
  if (n < 0) return n;
  p = out + NEXAR__SEED_FRAME_HDR;
  memcpy(p, a->proof, NEXAR__MAC_BYTES);
  p += NEXAR__MAC_BYTES;
  nexar__put_u64(p, a->comm_id);
  nexar__put_u32(p + 8, a->epoch);
  nexar__put_u32(p + 12, a->max_joiners);
  nexar__put_u32(p + 16, a->nstay);
  p += 20;
  for (uint32_t i = 0; i < a->nstay; i++) nexar__put_u32(p + 4 * i, ids[i]);
  /* Checked after writing, on the canonical form the decoder will see. */
  if (!nexar__wire_ids_valid(p, a->nstay, NEXAR__ELASTIC_MAX_IDS))
    return NEXAR_ERR_INVALID_ARG;
  return n;
}

int nexar__seed_admit_decode(nexar__seed_admit_t *a, const uint8_t *body,
                             size_t len) {
  nexar__seed_admit_t d;
  const uint8_t *p = body;

  if (!a || (!body && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < ADMIT_FIXED) return NEXAR_ERR_PROTO;
  memset(&d, 0, sizeof d);
  memcpy(d.proof, p, NEXAR__MAC_BYTES);
  p += NEXAR__MAC_BYTES;
  d.comm_id = nexar__get_u64(p);
  d.epoch = nexar__get_u32(p + 8);
  d.max_joiners = nexar__get_u32(p + 12);
  d.nstay = nexar__get_u32(p + 16);
  d.ids = p + 20;
  if (d.comm_id < 1 || d.epoch < 1) return NEXAR_ERR_PROTO;
  if (d.nstay < 1 || d.nstay > NEXAR__ELASTIC_MAX_IDS) return NEXAR_ERR_PROTO;
  if (len != ADMIT_FIXED + 4u * (size_t)d.nstay) return NEXAR_ERR_PROTO;
  if (!nexar__wire_ids_valid(d.ids, d.nstay, NEXAR__ELASTIC_MAX_IDS))
    return NEXAR_ERR_PROTO;
  *a = d;
  return 0;
}

int nexar__seed_admitted_encode(uint32_t nids, const nexar__joiner_t *j,
                                uint32_t njoin, uint8_t *out, size_t cap) {
  uint8_t *p;
  int n;

  if ((njoin && !j) || nids > NEXAR__ELASTIC_MAX_IDS || njoin > nids)
    return NEXAR_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < njoin; i++)
    if (j[i].id >= nids || (i && j[i].id <= j[i - 1].id) ||
        !nexar__wire_waddr_valid(&j[i].e.addr))
      return NEXAR_ERR_INVALID_ARG;
  int hosts = njoin && nexar__wire_hosts_sent(&j[0].e, njoin, sizeof(*j));
  n = nexar__wire_frame_begin(out, cap, NEXAR__SEED_ADMITTED,
                              ADMITTED_FIXED + (size_t)njoin * JOINER_BYTES +
                                  (hosts ? (size_t)njoin * HOST_BYTES : 0));
  if (n < 0) return n;
  p = out + NEXAR__SEED_FRAME_HDR;
  nexar__put_u32(p, nids);
  nexar__put_u32(p + 4, njoin);
  p += ADMITTED_FIXED;
  for (uint32_t i = 0; i < njoin; i++, p += JOINER_BYTES) {
    nexar__put_u32(p, j[i].id);
    nexar__wire_entries_put(p + 4, &j[i].e, 1);
  }
  if (hosts) nexar__wire_hosts_put(p, &j[0].e, njoin, sizeof(*j));
  return n;
}

int nexar__seed_admitted_decode(nexar__seed_admitted_t *a, const uint8_t *body,
                                size_t len) {
  uint32_t nids, njoin, prev = 0;

  if (!a || (!body && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < ADMITTED_FIXED) return NEXAR_ERR_PROTO;
  nids = nexar__get_u32(body);
  njoin = nexar__get_u32(body + 4);
  if (nids > NEXAR__ELASTIC_MAX_IDS || njoin > nids) return NEXAR_ERR_PROTO;
  size_t base = ADMITTED_FIXED + (size_t)njoin * JOINER_BYTES;
  const uint8_t *hosts = len > base ? body + base : NULL;
  if (len != base && (len != base + (size_t)njoin * HOST_BYTES ||
                      !nexar__wire_hosts_known(hosts, njoin)))
    return NEXAR_ERR_PROTO;
  for (uint32_t i = 0; i < njoin; i++) {
    const uint8_t *p = body + ADMITTED_FIXED + (size_t)i * JOINER_BYTES;
    uint32_t id = nexar__get_u32(p);
    if (id >= nids || (i && id <= prev) || !nexar__wire_entries_valid(p + 4, 1))
      return NEXAR_ERR_PROTO;
    prev = id;
  }
  a->nids = nids;
  a->njoin = njoin;
  a->entries = body + ADMITTED_FIXED;
  a->hosts = hosts;
  return 0;
}

int nexar__admitted_entry(const nexar__seed_admitted_t *a, uint32_t i,
                          nexar__joiner_t *j) {
  const uint8_t *p;

  if (!a || !j || !a->entries || i >= a->njoin) return NEXAR_ERR_INVALID_ARG;
  p = a->entries + (size_t)i * JOINER_BYTES;
  if (nexar__wire_entry_get(&j->e, p + 4, a->hosts, i) != 0)
    return NEXAR_ERR_PROTO;
  j->id = nexar__get_u32(p);
  return 0;
}

/* 1 when |id| is one of the |n| ids at |p|. */
static int ids_have(const uint8_t *p, uint32_t n, uint32_t id) {
  for (uint32_t i = 0; i < n; i++)
    if (nexar__id_at(p, i) == id) return 1;
  return 0;
}

int nexar__seed_join_encode(const nexar__seed_join_t *j,
                            const nexar__roster_entry_t *roster,
                            const uint32_t *members, uint8_t *out, size_t cap) {
  uint8_t *p;
  int n;

  if (!j || !roster || !members || j->nids < 1 ||
      j->nids > NEXAR__ELASTIC_MAX_IDS || j->id >= j->nids || j->nmembers < 1 ||
      j->nmembers > j->nids || j->comm_id < 1 || j->epoch < 1)
    return NEXAR_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < j->nids; i++)
    if (!nexar__wire_waddr_valid(&roster[i].addr)) return NEXAR_ERR_INVALID_ARG;
  int hosts = nexar__wire_hosts_sent(roster, j->nids, sizeof(*roster));
  int jl = nexar__wire_job_len(&j->job);
  if (jl < 0) return jl;
  n = nexar__wire_frame_begin(
      out, cap, NEXAR__SEED_JOIN,
      JOIN_FIXED + (size_t)j->nids * ENTRY_BYTES + 4u * (size_t)j->nmembers +
          (hosts ? (size_t)j->nids * HOST_BYTES : 0) + (size_t)jl);
  if (n < 0) return n;
  p = out + NEXAR__SEED_FRAME_HDR;
  nexar__put_u32(p, j->id);
  nexar__put_u32(p + 4, j->nids);
  nexar__put_u64(p + 8, j->comm_id);
  nexar__put_u32(p + 16, j->epoch);
  nexar__put_u32(p + 20, j->nmembers);
  p += JOIN_FIXED;
  nexar__wire_entries_put(p, roster, j->nids);
  p += (size_t)j->nids * ENTRY_BYTES;
  for (uint32_t i = 0; i < j->nmembers; i++)
    nexar__put_u32(p + 4 * i, members[i]);
  if (!nexar__wire_ids_valid(p, j->nmembers, j->nids) ||
      !ids_have(p, j->nmembers, j->id))
    return NEXAR_ERR_INVALID_ARG;
  p += 4u * (size_t)j->nmembers;
  if (hosts) {
    nexar__wire_hosts_put(p, roster, j->nids, sizeof(*roster));
    p += (size_t)j->nids * HOST_BYTES;
  }
  if (jl) nexar__wire_job_put(p, &j->job);
  return n;
}

int nexar__seed_join_decode(nexar__seed_join_t *j, const uint8_t *body,
                            size_t len) {
  nexar__seed_join_t d;

  if (!j || (!body && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < JOIN_FIXED) return NEXAR_ERR_PROTO;
  memset(&d, 0, sizeof d);
  d.id = nexar__get_u32(body);
  d.nids = nexar__get_u32(body + 4);
  d.comm_id = nexar__get_u64(body + 8);
  d.epoch = nexar__get_u32(body + 16);
  d.nmembers = nexar__get_u32(body + 20);
  if (d.nids < 1 || d.nids > NEXAR__ELASTIC_MAX_IDS || d.id >= d.nids ||
      d.nmembers < 1 || d.nmembers > d.nids || d.comm_id < 1 || d.epoch < 1)
    return NEXAR_ERR_PROTO;
  size_t base =
      JOIN_FIXED + (size_t)d.nids * ENTRY_BYTES + 4u * (size_t)d.nmembers;
  if (len < base) return NEXAR_ERR_PROTO;
  /* Then an optional host section (no mark) and an optional job section. */
  int64_t hl = nexar__wire_job_split(body + base, len - base,
                                     (size_t)d.nids * HOST_BYTES, &d.job);
  d.hosts = hl > 0 ? body + base : NULL;
  if (hl < 0 || (hl && !nexar__wire_hosts_known(d.hosts, d.nids)))
    return NEXAR_ERR_PROTO;
  d.entries = body + JOIN_FIXED;
  d.members = d.entries + (size_t)d.nids * ENTRY_BYTES;
  if (!nexar__wire_entries_valid(d.entries, d.nids) ||
      !nexar__wire_ids_valid(d.members, d.nmembers, d.nids) ||
      !ids_have(d.members, d.nmembers, d.id))
    return NEXAR_ERR_PROTO;
  *j = d;
  return 0;
}

int nexar__join_entry(const nexar__seed_join_t *j, uint32_t i,
                      nexar__roster_entry_t *e) {
  if (!j || !e || !j->entries || i >= j->nids) return NEXAR_ERR_INVALID_ARG;
  return nexar__wire_entry_get(e, j->entries + (size_t)i * ENTRY_BYTES,
                               j->hosts, i);
}
