/*
 * Wire codec. Every multi-byte integer is little-endian. Decoders validate
 * each field before anything is copied to the caller, and write the output
 * struct only when the whole input is valid. See docs/wire-protocol.md.
 */
#include "wire/wire_int.h"

#include <stdbool.h>
#include <string.h>

/* Header field offsets. */
enum {
  OFF_MAGIC = 0,
  OFF_VERSION = 2,
  OFF_KIND = 3,
  OFF_LANE = 4,
  OFF_COLL_OP = 5,
  OFF_DTYPE = 6,
  OFF_REDOP = 7,
  OFF_COMM_ID = 8,
  OFF_SRC_RANK = 16,
  OFF_TAG = 20,
  OFF_SEQ = 24,
  OFF_COLL_SEQ = 32,
  OFF_STEP = 40,
  OFF_ALGO = 44,
  OFF_COUNT = 48,
  OFF_PAYLOAD_LEN = 56
};

static int fail(const char **why, const char *field) {
  if (why) *why = field;
  return NEXAR_ERR_PROTO;
}

/* Reduction ops are 0..4 and 8..10; the values in between are unassigned. */
static int redop_valid(uint8_t op) {
  return op < NEXAR_NUM_OPS && (op <= NEXAR_AVG || op >= NEXAR_BAND);
}

void nexar__hdr_encode(const nexar__hdr_t *h, uint8_t out[NEXAR__HDR_BYTES]) {
  nexar__put_u16(out + OFF_MAGIC, NEXAR__WIRE_MAGIC);
  out[OFF_VERSION] = NEXAR__WIRE_VERSION;
  out[OFF_KIND] = h->kind;
  out[OFF_LANE] = h->lane;
  out[OFF_COLL_OP] = h->coll_op;
  out[OFF_DTYPE] = h->dtype;
  out[OFF_REDOP] = h->redop;
  nexar__put_u64(out + OFF_COMM_ID, h->comm_id);
  nexar__put_u32(out + OFF_SRC_RANK, h->src_rank);
  nexar__put_u32(out + OFF_TAG, h->tag);
  nexar__put_u64(out + OFF_SEQ, h->seq);
  nexar__put_u64(out + OFF_COLL_SEQ, h->coll_seq);
  nexar__put_u32(out + OFF_STEP, h->step);
  nexar__put_u32(out + OFF_ALGO, h->algo);
  nexar__put_u64(out + OFF_COUNT, h->count);
  nexar__put_u64(out + OFF_PAYLOAD_LEN, h->payload_len);
}

int nexar__hdr_decode(nexar__hdr_t *h, const uint8_t *in, size_t len,
                      uint64_t max_payload, const char **why) {
  nexar__hdr_t d;

  if (!h || (!in && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < NEXAR__HDR_BYTES) return 0;
  if (nexar__get_u16(in + OFF_MAGIC) != NEXAR__WIRE_MAGIC)
    return fail(why, "magic");
  if (in[OFF_VERSION] != NEXAR__WIRE_VERSION) return fail(why, "version");
  memset(&d, 0, sizeof d);
  d.kind = in[OFF_KIND];
  d.lane = in[OFF_LANE];
  d.coll_op = in[OFF_COLL_OP];
  d.dtype = in[OFF_DTYPE];
  d.redop = in[OFF_REDOP];
  d.comm_id = nexar__get_u64(in + OFF_COMM_ID);
  d.src_rank = nexar__get_u32(in + OFF_SRC_RANK);
  d.tag = nexar__get_u32(in + OFF_TAG);
  d.seq = nexar__get_u64(in + OFF_SEQ);
  d.coll_seq = nexar__get_u64(in + OFF_COLL_SEQ);
  d.step = nexar__get_u32(in + OFF_STEP);
  d.count = nexar__get_u64(in + OFF_COUNT);
  d.payload_len = nexar__get_u64(in + OFF_PAYLOAD_LEN);

  if (d.kind < 1 || d.kind > NEXAR__KIND_MAX) return fail(why, "kind");
  if (d.lane >= NEXAR__LANE_COUNT) return fail(why, "lane");
  if (d.coll_op > NEXAR__COLL_MAX) return fail(why, "coll_op");
  if (d.dtype >= NEXAR_NUM_DTYPES) return fail(why, "dtype");
  if (!redop_valid(d.redop)) return fail(why, "redop");
  d.algo = nexar__get_u32(in + OFF_ALGO);
  bool hop_limit = d.kind == NEXAR__KIND_RELAY;
  /* An RPC first part's algo is its message's length (checked below). */
  bool rpc_len = d.kind == NEXAR__KIND_RPC && d.step != NEXAR__RPC_PART;
  if (!rpc_len && (d.algo > 255 ||
                   (d.kind != NEXAR__KIND_COLL && !hop_limit && d.algo != 0)))
    return fail(why, "algo");
  /* A relay frame carries a whole message after its envelope. */
  uint64_t limit = max_payload;
  if (hop_limit)
    limit = max_payload > UINT64_MAX - NEXAR__RELAY_PRE_BYTES
                ? UINT64_MAX
                : max_payload + NEXAR__RELAY_PRE_BYTES;
  if (d.payload_len > limit) return fail(why, "payload_len");
  if (hop_limit) {
    if (d.comm_id != 0) return fail(why, "comm_id");
    if (d.coll_op || d.dtype || d.redop) return fail(why, "coll_op");
    if (d.seq != 0) return fail(why, "seq");
    if (d.coll_seq != 0) return fail(why, "coll_seq");
    if (d.count > 1) return fail(why, "count");
    if (d.algo < 1) return fail(why, "algo");
    if (d.step < 1 || d.step > d.algo) return fail(why, "step");
    if (d.payload_len < NEXAR__RELAY_PRE_BYTES) return fail(why, "payload_len");
  }
  /* The RPC lane carries RPC messages only (and relay frames of them). */
  if (d.lane == NEXAR__LANE_RPC && d.kind != NEXAR__KIND_RPC && !hop_limit)
    return fail(why, "lane");
  if (d.kind == NEXAR__KIND_HEARTBEAT && d.payload_len != 0)
    return fail(why, "payload_len");
  if (d.kind == NEXAR__KIND_MISMATCH &&
      (d.payload_len != NEXAR__NOTICE_BYTES || d.lane != NEXAR__LANE_CONTROL))
    return fail(why, "payload_len");
  if (d.kind == NEXAR__KIND_FAILED || d.kind == NEXAR__KIND_AGREE) {
    if (d.lane != NEXAR__LANE_CONTROL) return fail(why, "lane");
    if (!(d.comm_id >> 63)) return fail(why, "comm_id");
    if (d.coll_op != NEXAR__COLL_NONE) return fail(why, "coll_op");
  }
  if (d.kind == NEXAR__KIND_CREDIT) {
    if (d.lane != NEXAR__LANE_CONTROL) return fail(why, "lane");
    if (d.comm_id != UINT64_MAX) return fail(why, "comm_id");
    if (d.coll_op != NEXAR__COLL_NONE) return fail(why, "coll_op");
    if (d.tag != NEXAR__LANE_DATA && d.tag != NEXAR__LANE_RPC)
      return fail(why, "tag");
    if (d.payload_len != 0) return fail(why, "payload_len");
  }
  if (d.kind == NEXAR__KIND_FAILED && d.payload_len != NEXAR__FAILED_BYTES)
    return fail(why, "payload_len");
  if (d.kind == NEXAR__KIND_AGREE) {
    if (d.step < NEXAR__AG_PROPOSE || d.step > NEXAR__AG_READY)
      return fail(why, "step");
    if (d.payload_len < 12 || (d.payload_len - 12) % 4 ||
        (d.payload_len - 12) / 4 > NEXAR__AGREE_MAX_IDS)
      return fail(why, "payload_len");
  }
  if (d.kind == NEXAR__KIND_RPC) {
    if (d.tag > 0xffffu) return fail(why, "tag");
    if (d.lane != NEXAR__LANE_RPC) return fail(why, "lane");
    if (d.coll_op != NEXAR__COLL_NONE) return fail(why, "coll_op");
    if (d.step > NEXAR__RPC_PART) return fail(why, "step");
    if (d.step == NEXAR__RPC_REQUEST && d.count > NEXAR__RPC_BUDGET_MAX_US)
      return fail(why, "count");
    if (d.step == NEXAR__RPC_PART && d.count > max_payload - d.payload_len)
      return fail(why, "count");
    if (d.algo && (d.algo <= d.payload_len || d.algo > max_payload))
      return fail(why, "algo");
  }
  if (d.kind == NEXAR__KIND_P2P) {
    if (d.tag > NEXAR_TAG_MAX) return fail(why, "tag");
    if (d.coll_op != NEXAR__COLL_NONE) return fail(why, "coll_op");
    if (d.step > NEXAR__P2P_RDV_DATA) return fail(why, "step");
    bool rdv = d.step == NEXAR__P2P_RDV || d.step == NEXAR__P2P_RDV_DATA;
    if (rdv && d.lane != NEXAR__LANE_DATA) return fail(why, "lane");
    if (d.step == NEXAR__P2P_MATCHED) {
      if (d.lane != NEXAR__LANE_CONTROL) return fail(why, "lane");
      if (d.tag != 0) return fail(why, "tag");
      if (d.payload_len != 0) return fail(why, "payload_len");
    } else if (d.coll_seq != 0 && d.step != NEXAR__P2P_RDV_DATA) {
      return fail(why, "coll_seq");
    }
    if (d.step == NEXAR__P2P_RDV
            ? d.count <= d.payload_len || d.count > max_payload
        : d.step == NEXAR__P2P_RDV_DATA ? d.count > max_payload - d.payload_len
                                        : d.count != 0)
      return fail(why, "count");
  }
  *h = d;
  return (int)NEXAR__HDR_BYTES;
}

/* ---- Mismatch notice. */

static void fp_put(uint8_t *p, const nexar__fp_t *f) {
  p[0] = f->coll_op;
  p[1] = f->dtype;
  p[2] = f->redop;
  p[3] = f->algo;
  nexar__put_u32(p + 4, f->root);
  nexar__put_u64(p + 8, f->count);
}

static int fp_get(nexar__fp_t *f, const uint8_t *p) {
  f->coll_op = p[0];
  f->dtype = p[1];
  f->redop = p[2];
  f->algo = p[3];
  f->root = nexar__get_u32(p + 4);
  f->count = nexar__get_u64(p + 8);
  if (f->coll_op > NEXAR__COLL_MAX || f->dtype >= NEXAR_NUM_DTYPES ||
      !redop_valid(f->redop))
    return NEXAR_ERR_PROTO;
  return 0;
}

void nexar__notice_encode(const nexar__notice_t *n,
                          uint8_t out[NEXAR__NOTICE_BYTES]) {
  nexar__put_u64(out, n->coll_seq);
  nexar__put_u32(out + 8, n->rank_a);
  nexar__put_u32(out + 12, n->rank_b);
  fp_put(out + 16, &n->a);
  fp_put(out + 32, &n->b);
}

int nexar__notice_decode(nexar__notice_t *n, const uint8_t *in, size_t len) {
  nexar__notice_t d;

  if (!n || !in || len != NEXAR__NOTICE_BYTES) return NEXAR_ERR_PROTO;
  d.coll_seq = nexar__get_u64(in);
  d.rank_a = nexar__get_u32(in + 8);
  d.rank_b = nexar__get_u32(in + 12);
  /* Like every decoder here, |n| is written only when all of it is valid. */
  if (fp_get(&d.a, in + 16) < 0 || fp_get(&d.b, in + 32) < 0)
    return NEXAR_ERR_PROTO;
  *n = d;
  return 0;
}

/* ---- Seed frames. */

int nexar__seed_frame_decode(const uint8_t *in, size_t len, uint8_t *type,
                             uint32_t *body_len) {
  uint32_t blen;

  if (!type || !body_len || (!in && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < NEXAR__SEED_FRAME_HDR) return 0;
  if (nexar__get_u16(in) != NEXAR__WIRE_MAGIC) return NEXAR_ERR_PROTO;
  if (in[2] != NEXAR__WIRE_VERSION) return NEXAR_ERR_PROTO;
  if (in[3] < 1 || in[3] > NEXAR__SEED_TYPE_MAX) return NEXAR_ERR_PROTO;
  blen = nexar__get_u32(in + 4);
  if (blen > NEXAR__SEED_MAX_BODY) return NEXAR_ERR_PROTO;
  *type = in[3];
  *body_len = blen;
  return (int)NEXAR__SEED_FRAME_HDR;
}

int nexar__seed_frame_next(const uint8_t *in, size_t len, uint8_t *type,
                           const uint8_t **body, uint32_t *body_len) {
  uint8_t t;
  uint32_t blen;

  if (!body) return NEXAR_ERR_INVALID_ARG;
  int r = nexar__seed_frame_decode(in, len, type ? &t : NULL,
                                   body_len ? &blen : NULL);
  if (r <= 0) return r;
  /* blen <= NEXAR__SEED_MAX_BODY: the sum cannot overflow. */
  if (len - NEXAR__SEED_FRAME_HDR < blen) return 0;
  *type = t;
  *body = in + NEXAR__SEED_FRAME_HDR;
  *body_len = blen;
  return (int)(NEXAR__SEED_FRAME_HDR + blen);
}

/*
 * Checks that |cap| can hold a frame with a body of |body_len| bytes and
 * writes the frame header. Returns the frame length or
 * NEXAR_ERR_INVALID_ARG.
 */
int nexar__wire_frame_begin(uint8_t *out, size_t cap, uint8_t type,
                            size_t body_len) {
  if (!out || body_len > NEXAR__SEED_MAX_BODY ||
      cap < NEXAR__SEED_FRAME_HDR + body_len)
    return NEXAR_ERR_INVALID_ARG;
  nexar__put_u16(out, NEXAR__WIRE_MAGIC);
  out[2] = NEXAR__WIRE_VERSION;
  out[3] = type;
  nexar__put_u32(out + 4, (uint32_t)body_len);
  return (int)(NEXAR__SEED_FRAME_HDR + body_len);
}

/* Length of the string |s|, or |max| + 1 when it is longer than |max|. The
 * C11 library has no strnlen(). */
static size_t bounded_len(const char *s, size_t max) {
  size_t n = 0;
  while (n <= max && s[n] != '\0') n++;
  return n;
}

/* 1 when every one of the |n| bytes at |s| is printable ASCII. */
static int printable(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] < 0x20 || s[i] > 0x7e) return 0;
  return 1;
}

/* 1 when |a| can be put on the wire: a known family. */
int nexar__wire_waddr_valid(const nexar__waddr_t *a) {
  return a->family == 4 || a->family == 6;
}

/* Writes |a| in WADDR_BYTES bytes; the unused tail of an IPv4 address is
 * written as zeros. */
static void waddr_put(uint8_t *p, const nexar__waddr_t *a) {
  p[0] = a->family;
  nexar__put_u16(p + 1, a->port);
  memset(p + 3, 0, 16);
  memcpy(p + 3, a->ip, a->family == 4 ? 4 : 16);
}

/* Reads an address; returns 0 or NEXAR_ERR_PROTO on a bad family or a
 * non-zero IPv4 tail. */
static int waddr_get(nexar__waddr_t *a, const uint8_t *p) {
  if (p[0] != 4 && p[0] != 6) return NEXAR_ERR_PROTO;
  if (p[0] == 4) {
    for (size_t i = 3 + 4; i < WADDR_BYTES; i++)
      if (p[i] != 0) return NEXAR_ERR_PROTO;
  }
  a->family = p[0];
  a->port = nexar__get_u16(p + 1);
  memcpy(a->ip, p + 3, 16);
  return 0;
}

/* ---- Host sections: |n| host ids after a message's lists, present when
 * some key is non-zero (a section of unknown hosts is never sent, so every
 * message has one encoding). */

static void host_put(uint8_t *p, const nexar__host_id_t *h) {
  nexar__put_u64(p, h->key);
  nexar__put_u32(p + 8, h->pid);
  memcpy(p + 12, h->nonce, NEXAR__NONCE_BYTES);
}

/* Host id |i| of a section at |sec| (NULL: none, all zero). */
static void host_get(nexar__host_id_t *h, const uint8_t *sec, uint32_t i) {
  memset(h, 0, sizeof(*h));
  if (!sec) return;
  const uint8_t *p = sec + (size_t)i * HOST_BYTES;
  h->key = nexar__get_u64(p);
  h->pid = nexar__get_u32(p + 8);
  memcpy(h->nonce, p + 12, NEXAR__NONCE_BYTES);
}

/* 1 when one of the |n| host ids at |sec| has a non-zero key. */
int nexar__wire_hosts_known(const uint8_t *sec, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (nexar__get_u64(sec + (size_t)i * HOST_BYTES) != 0) return 1;
  return 0;
}

/* Host |i| of |n| roster entries laid out |stride| bytes apart (a roster,
 * or the entries inside an array of joiners). */
static const nexar__host_id_t *host_at(const nexar__roster_entry_t *e,
                                       uint32_t i, size_t stride) {
  return &((const nexar__roster_entry_t *)((const uint8_t *)e + i * stride))
              ->host;
}

/* Whether the host section of |n| entries |stride| bytes apart is sent. */
int nexar__wire_hosts_sent(const nexar__roster_entry_t *e, uint32_t n,
                           size_t stride) {
  for (uint32_t i = 0; i < n; i++)
    if (host_at(e, i, stride)->key) return 1;
  return 0;
}

/* Writes the host section of |n| entries |stride| bytes apart at |p|. */
void nexar__wire_hosts_put(uint8_t *p, const nexar__roster_entry_t *e,
                           uint32_t n, size_t stride) {
  for (uint32_t i = 0; i < n; i++)
    host_put(p + (size_t)i * HOST_BYTES, host_at(e, i, stride));
}

/* Writes |n| roster entries (address, fingerprint) at |p|. */
void nexar__wire_entries_put(uint8_t *p, const nexar__roster_entry_t *e,
                             uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    waddr_put(p, &e[i].addr);
    memcpy(p + WADDR_BYTES, e[i].fingerprint, NEXAR__FP_BYTES);
    p += ENTRY_BYTES;
  }
}

/* Reads one roster entry and its host, id |i| of the host section |hosts|
 * (NULL: none); |e| is written only when it is valid. */
int nexar__wire_entry_get(nexar__roster_entry_t *e, const uint8_t *p,
                          const uint8_t *hosts, uint32_t i) {
  nexar__roster_entry_t d;
  memset(&d, 0, sizeof d);
  if (waddr_get(&d.addr, p) != 0) return NEXAR_ERR_PROTO;
  memcpy(d.fingerprint, p + WADDR_BYTES, NEXAR__FP_BYTES);
  host_get(&d.host, hosts, i);
  *e = d;
  return 0;
}

/* 1 when each of the |n| entries at |p| has a valid address. */
int nexar__wire_entries_valid(const uint8_t *p, uint32_t n) {
  nexar__waddr_t a;
  for (uint32_t i = 0; i < n; i++)
    if (waddr_get(&a, p + (size_t)i * ENTRY_BYTES) != 0) return 0;
  return 1;
}

/* 1 when the |n| ids at |p| are below |limit| (<= MAX_IDS) and distinct. */
int nexar__wire_ids_valid(const uint8_t *p, uint32_t n, uint32_t limit) {
  uint8_t seen[NEXAR__ELASTIC_MAX_IDS / 8];
  memset(seen, 0, sizeof seen);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t id = nexar__id_at(p, i);
    if (id >= limit || (seen[id / 8] >> (id % 8)) & 1) return 0;
    seen[id / 8] |= (uint8_t)(1u << (id % 8));
  }
  return 1;
}

int nexar__seed_proof_encode(const uint8_t mac[NEXAR__MAC_BYTES], uint8_t *out,
                             size_t cap) {
  return nexar__seed_mac_encode(NEXAR__SEED_PROOF, mac, out, cap);
}

int nexar__seed_mac_encode(uint8_t type, const uint8_t mac[NEXAR__MAC_BYTES],
                           uint8_t *out, size_t cap) {
  int n;

  if (!mac) return NEXAR_ERR_INVALID_ARG;
  n = nexar__wire_frame_begin(out, cap, type, NEXAR__MAC_BYTES);
  if (n < 0) return n;
  memcpy(out + NEXAR__SEED_FRAME_HDR, mac, NEXAR__MAC_BYTES);
  return n;
}

int nexar__seed_proof_decode(uint8_t mac[NEXAR__MAC_BYTES], const uint8_t *body,
                             size_t len) {
  if (!mac || (!body && len)) return NEXAR_ERR_INVALID_ARG;
  if (len != NEXAR__MAC_BYTES) return NEXAR_ERR_PROTO;
  memcpy(mac, body, NEXAR__MAC_BYTES);
  return 0;
}

int nexar__seed_hello_encode(const nexar__seed_hello_t *h, uint8_t *out,
                             size_t cap) {
  size_t host_len;
  uint8_t *p;
  int n;

  if (!h) return NEXAR_ERR_INVALID_ARG;
  if (h->rank < -1 || h->rank >= RANK_LIMIT) return NEXAR_ERR_INVALID_ARG;
  if (h->world_size < 0 || h->world_size > RANK_LIMIT)
    return NEXAR_ERR_INVALID_ARG;
  if (h->has_addr > 1 || h->join > 1) return NEXAR_ERR_INVALID_ARG;
  if (h->has_addr && !nexar__wire_waddr_valid(&h->advertise))
    return NEXAR_ERR_INVALID_ARG;
  host_len = bounded_len(h->host, NEXAR__HOST_MAX);
  if (host_len > NEXAR__HOST_MAX ||
      !printable((const uint8_t *)h->host, host_len))
    return NEXAR_ERR_INVALID_ARG;

  size_t topo_len = bounded_len(h->topo, NEXAR__TOPO_MAX);
  if (h->cert_len > NEXAR__CERT_MAX || topo_len > NEXAR__TOPO_MAX ||
      !printable((const uint8_t *)h->topo, topo_len) ||
      (!h->cert_len && topo_len))
    return NEXAR_ERR_INVALID_ARG;
  static const uint8_t no_nonce[NEXAR__NONCE_BYTES];
  /* The host extension follows the identity extension; without a key
   * there is none, and so no nonce either. */
  if (h->host_key ? !h->cert_len
                  : memcmp(h->nonce, no_nonce, NEXAR__NONCE_BYTES) != 0)
    return NEXAR_ERR_INVALID_ARG;
  int job = nexar__wire_job_len(&h->job);
  if (job < 0 || (job && !h->cert_len)) return NEXAR_ERR_INVALID_ARG;
  size_t ext = h->cert_len ? HELLO_EXT_FIXED + h->cert_len + topo_len : 0;
  if (h->host_key) ext += HELLO_HOST_BYTES;
  ext += (size_t)job;

  n = nexar__wire_frame_begin(out, cap, NEXAR__SEED_HELLO,
                              HELLO_FIXED + host_len + ext);
  if (n < 0) return n;
  p = out + NEXAR__SEED_FRAME_HDR;
  memcpy(p, h->proof, NEXAR__MAC_BYTES);
  p += NEXAR__MAC_BYTES;
  nexar__put_u32(p, (uint32_t)h->rank);
  p += 4;
  nexar__put_u32(p, (uint32_t)h->world_size);
  p += 4;
  *p++ = (uint8_t)(h->has_addr | h->join << 1);
  if (h->has_addr)
    waddr_put(p, &h->advertise);
  else
    memset(p, 0, WADDR_BYTES);
  p += WADDR_BYTES;
  memcpy(p, h->fingerprint, NEXAR__FP_BYTES);
  p += NEXAR__FP_BYTES;
  nexar__put_u32(p, h->pid);
  p += 4;
  *p++ = (uint8_t)host_len;
  memcpy(p, h->host, host_len);
  p += host_len;
  if (ext) {
    nexar__put_u16(p, h->cert_len);
    memcpy(p + 2, h->cert, h->cert_len);
    p += 2 + h->cert_len;
    *p++ = (uint8_t)topo_len;
    memcpy(p, h->topo, topo_len);
    p += topo_len;
  }
  if (h->host_key) {
    nexar__put_u64(p, h->host_key);
    memcpy(p + 8, h->nonce, NEXAR__NONCE_BYTES);
    p += HELLO_HOST_BYTES;
  }
  if (job) nexar__wire_job_put(p, &h->job);
  return n;
}

int nexar__seed_hello_decode(nexar__seed_hello_t *h, const uint8_t *body,
                             size_t len) {
  nexar__seed_hello_t d;
  const uint8_t *p = body;
  size_t host_len;

  if (!h || (!body && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < HELLO_FIXED) return NEXAR_ERR_PROTO;
  memset(&d, 0, sizeof d);
  memcpy(d.proof, p, NEXAR__MAC_BYTES);
  p += NEXAR__MAC_BYTES;
  d.rank = (int32_t)nexar__get_u32(p);
  p += 4;
  d.world_size = (int32_t)nexar__get_u32(p);
  p += 4;
  if (d.rank < -1 || d.rank >= RANK_LIMIT) return NEXAR_ERR_PROTO;
  if (d.world_size < 0 || d.world_size > RANK_LIMIT) return NEXAR_ERR_PROTO;
  /* The flags byte: bit 0 has_addr, bit 1 join, the rest zero. */
  if (*p & ~HELLO_FLAGS) return NEXAR_ERR_PROTO;
  d.has_addr = *p & 1;
  d.join = (uint8_t)(*p++ >> 1);
  if (d.has_addr == 1) {
    if (waddr_get(&d.advertise, p) != 0) return NEXAR_ERR_PROTO;
  } else {
    for (size_t i = 0; i < WADDR_BYTES; i++)
      if (p[i] != 0) return NEXAR_ERR_PROTO;
  }
  p += WADDR_BYTES;
  memcpy(d.fingerprint, p, NEXAR__FP_BYTES);
  p += NEXAR__FP_BYTES;
  d.pid = nexar__get_u32(p);
  p += 4;
  host_len = *p++;
  if (host_len > NEXAR__HOST_MAX) return NEXAR_ERR_PROTO;
  if (len < HELLO_FIXED + host_len) return NEXAR_ERR_PROTO;
  if (!printable(p, host_len)) return NEXAR_ERR_PROTO;
  memcpy(d.host, p, host_len);
  d.host[host_len] = '\0';
  p += host_len;
  size_t rest = len - HELLO_FIXED - host_len;
  if (rest) {
    /* Identity extension: u16 cert_len (1..CERT_MAX), the certificate,
     * u8 topo_len (0..TOPO_MAX), the topology; then the host extension
     * (u64 key, non-zero; nonce) or nothing; then the job extension or
     * nothing. */
    if (rest < HELLO_EXT_FIXED) return NEXAR_ERR_PROTO;
    size_t cl = nexar__get_u16(p);
    if (cl < 1 || cl > NEXAR__CERT_MAX || rest < HELLO_EXT_FIXED + cl)
      return NEXAR_ERR_PROTO;
    size_t tl = p[2 + cl], id_len = HELLO_EXT_FIXED + cl + tl;
    if (tl > NEXAR__TOPO_MAX || rest < id_len || !printable(p + 3 + cl, tl))
      return NEXAR_ERR_PROTO;
    int64_t hx = nexar__wire_job_split(p + id_len, rest - id_len,
                                       HELLO_HOST_BYTES, &d.job);
    if (hx < 0) return NEXAR_ERR_PROTO;
    if (hx) {
      const uint8_t *x = p + id_len;
      if (nexar__get_u64(x) == 0) return NEXAR_ERR_PROTO;
      d.host_key = nexar__get_u64(x);
      memcpy(d.nonce, x + 8, NEXAR__NONCE_BYTES);
    }
    d.cert_len = (uint16_t)cl;
    memcpy(d.cert, p + 2, cl);
    memcpy(d.topo, p + 3 + cl, tl);
    d.topo[tl] = '\0';
  }
  *h = d;
  return 0;
}

int nexar__seed_welcome_encode(uint32_t rank, uint32_t world_size,
                               const nexar__roster_entry_t *entries,
                               uint8_t *out, size_t cap) {
  return nexar__seed_welcome_encode_certs(rank, world_size, entries, NULL, NULL,
                                          out, cap);
}

int nexar__seed_welcome_encode_certs(uint32_t rank, uint32_t world_size,
                                     const nexar__roster_entry_t *entries,
                                     const uint8_t *const *certs,
                                     const uint16_t *cert_len, uint8_t *out,
                                     size_t cap) {
  return nexar__seed_welcome_encode_job(rank, world_size, entries, certs,
                                        cert_len, NULL, out, cap);
}

int nexar__seed_welcome_encode_job(uint32_t rank, uint32_t world_size,
                                   const nexar__roster_entry_t *entries,
                                   const uint8_t *const *certs,
                                   const uint16_t *cert_len,
                                   const nexar__job_t *job, uint8_t *out,
                                   size_t cap) {
  uint64_t body_len;
  uint8_t *p;
  int n, jl = nexar__wire_job_len(job);

  if (world_size < 1 || rank >= world_size || !entries ||
      (!certs != !cert_len) || jl < 0)
    return NEXAR_ERR_INVALID_ARG;
  body_len = WELCOME_FIXED + (uint64_t)world_size * ENTRY_BYTES;
  if (body_len > NEXAR__SEED_MAX_BODY) return NEXAR_ERR_INVALID_ARG;
  for (uint32_t i = 0; certs && i < world_size; i++) {
    if (cert_len[i] > NEXAR__CERT_MAX || (cert_len[i] && !certs[i]))
      return NEXAR_ERR_INVALID_ARG;
    body_len += 2u + cert_len[i];
    if (body_len > NEXAR__SEED_MAX_BODY) return NEXAR_ERR_INVALID_ARG;
  }
  int hosts = nexar__wire_hosts_sent(entries, world_size, sizeof(*entries));
  if (hosts) body_len += 2u + (uint64_t)world_size * HOST_BYTES;
  body_len += (uint64_t)jl;
  if (body_len > NEXAR__SEED_MAX_BODY) return NEXAR_ERR_INVALID_ARG;
  for (uint32_t i = 0; i < world_size; i++)
    if (!nexar__wire_waddr_valid(&entries[i].addr))
      return NEXAR_ERR_INVALID_ARG;

  n = nexar__wire_frame_begin(out, cap, NEXAR__SEED_WELCOME, (size_t)body_len);
  if (n < 0) return n;
  p = out + NEXAR__SEED_FRAME_HDR;
  nexar__put_u32(p, rank);
  nexar__put_u32(p + 4, world_size);
  nexar__wire_entries_put(p + WELCOME_FIXED, entries, world_size);
  p += WELCOME_FIXED + (size_t)world_size * ENTRY_BYTES;
  for (uint32_t i = 0; certs && i < world_size; i++) {
    nexar__put_u16(p, cert_len[i]);
    if (cert_len[i]) memcpy(p + 2, certs[i], cert_len[i]);
    p += 2u + cert_len[i];
  }
  if (hosts) {
    nexar__put_u16(p, HOST_MARK);
    nexar__wire_hosts_put(p + 2, entries, world_size, sizeof(*entries));
    p += 2u + (size_t)world_size * HOST_BYTES;
  }
  if (jl) nexar__wire_job_put(p, job);
  return n;
}

int nexar__seed_welcome_decode(nexar__seed_welcome_t *w, const uint8_t *body,
                               size_t len) {
  uint32_t rank, world_size;

  if (!w || (!body && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < WELCOME_FIXED || len > NEXAR__SEED_MAX_BODY) return NEXAR_ERR_PROTO;
  rank = nexar__get_u32(body);
  world_size = nexar__get_u32(body + 4);
  if (world_size < 1 || rank >= world_size) return NEXAR_ERR_PROTO;
  uint64_t fixed = WELCOME_FIXED + (uint64_t)world_size * ENTRY_BYTES;
  if ((uint64_t)len < fixed) return NEXAR_ERR_PROTO;
  /* Optional certificate section: exactly world_size (u16 length, DER)
   * entries, each at most NEXAR__CERT_MAX bytes. */
  uint64_t o = fixed;
  if (o + 2 <= len && nexar__get_u16(body + o) != HOST_MARK &&
      nexar__get_u16(body + o) != JOB_MARK) {
    for (uint32_t i = 0; i < world_size; i++) {
      if (o + 2 > len) return NEXAR_ERR_PROTO;
      uint16_t cl = nexar__get_u16(body + o);
      if (cl > NEXAR__CERT_MAX || o + 2 + cl > len) return NEXAR_ERR_PROTO;
      o += 2u + cl;
    }
  }
  /* Optional host section, then the optional job section, ending with the
   * body. */
  const uint8_t *hosts = NULL;
  nexar__job_t job;
  int64_t hl = nexar__wire_job_split(
      body + o, len - o, 2u + (size_t)world_size * HOST_BYTES, &job);
  if (hl < 0) return NEXAR_ERR_PROTO;
  if (hl) {
    if (nexar__get_u16(body + o) != HOST_MARK ||
        !nexar__wire_hosts_known(body + o + 2, world_size))
      return NEXAR_ERR_PROTO;
    hosts = body + o + 2;
  }
  /* Validate every entry now, so that nexar__welcome_entry() cannot fail on
   * a welcome this function accepted. */
  if (!nexar__wire_entries_valid(body + WELCOME_FIXED, world_size))
    return NEXAR_ERR_PROTO;
  w->rank = rank;
  w->world_size = world_size;
  w->entries = body + WELCOME_FIXED;
  w->certs = o > fixed ? body + fixed : NULL;
  w->certs_len = (size_t)(o - fixed);
  w->hosts = hosts;
  w->job = job;
  return 0;
}

int nexar__welcome_cert(const nexar__seed_welcome_t *w, size_t *pos,
                        const uint8_t **der, uint16_t *len) {
  if (!w || !pos || !der || !len || !w->certs || *pos + 2 > w->certs_len)
    return NEXAR_ERR_INVALID_ARG;
  uint16_t cl = nexar__get_u16(w->certs + *pos);
  if (*pos + 2 + cl > w->certs_len) return NEXAR_ERR_INVALID_ARG;
  *der = cl ? w->certs + *pos + 2 : NULL;
  *len = cl;
  *pos += 2u + cl;
  return 0;
}

/* ---- Relay envelope. */

void nexar__relay_env_encode(const nexar__relay_env_t *e,
                             uint8_t out[NEXAR__RELAY_ENV_BYTES]) {
  memcpy(out, e->payload_hash, 32);
  memcpy(out + 32, e->tag, 32);
}

void nexar__relay_env_decode(nexar__relay_env_t *e,
                             const uint8_t in[NEXAR__RELAY_ENV_BYTES]) {
  memcpy(e->payload_hash, in, 32);
  memcpy(e->tag, in + 32, 32);
}

int nexar__welcome_entry(const nexar__seed_welcome_t *w, uint32_t i,
                         nexar__roster_entry_t *e) {
  if (!w || !e || !w->entries) return NEXAR_ERR_INVALID_ARG;
  if (i >= w->world_size) return NEXAR_ERR_INVALID_ARG;
  return nexar__wire_entry_get(e, w->entries + (size_t)i * ENTRY_BYTES,
                               w->hosts, i);
}

int nexar__seed_reject_encode(int32_t code, const char *reason, uint8_t *out,
                              size_t cap) {
  size_t reason_len;
  uint8_t *p;
  int n;

  if (code >= 0) return NEXAR_ERR_INVALID_ARG;
  if (!reason) reason = "";
  reason_len = bounded_len(reason, NEXAR__REASON_MAX);
  if (reason_len > NEXAR__REASON_MAX ||
      !printable((const uint8_t *)reason, reason_len))
    return NEXAR_ERR_INVALID_ARG;

  n = nexar__wire_frame_begin(out, cap, NEXAR__SEED_REJECT,
                              REJECT_FIXED + reason_len);
  if (n < 0) return n;
  p = out + NEXAR__SEED_FRAME_HDR;
  nexar__put_u32(p, (uint32_t)code);
  nexar__put_u16(p + 4, (uint16_t)reason_len);
  memcpy(p + REJECT_FIXED, reason, reason_len);
  return n;
}

int nexar__seed_reject_decode(nexar__seed_reject_t *r, const uint8_t *body,
                              size_t len) {
  int32_t code;
  size_t reason_len;

  if (!r || (!body && len)) return NEXAR_ERR_INVALID_ARG;
  if (len < REJECT_FIXED) return NEXAR_ERR_PROTO;
  code = (int32_t)nexar__get_u32(body);
  reason_len = nexar__get_u16(body + 4);
  if (code >= 0) return NEXAR_ERR_PROTO;
  if (reason_len > NEXAR__REASON_MAX) return NEXAR_ERR_PROTO;
  if (len != REJECT_FIXED + reason_len) return NEXAR_ERR_PROTO;
  if (!printable(body + REJECT_FIXED, reason_len)) return NEXAR_ERR_PROTO;
  r->code = code;
  memcpy(r->reason, body + REJECT_FIXED, reason_len);
  r->reason[reason_len] = '\0';
  return 0;
}
