/*
 * Wire codec: explicit little-endian encoding of every frame nexar sends.
 * No I/O, no allocation, no clock: bytes in, structs out (and back). The
 * layout is specified in docs/wire-protocol.md.
 *
 * Every decoder checks the magic, the version, reserved fields (must be
 * zero), enum ranges and every length against a bound before the caller
 * allocates anything. Decoders return the number of bytes consumed (> 0),
 * 0 when more bytes are needed, or a negative NEXAR_ERR_PROTO.
 */
#ifndef NEXAR_WIRE_H
#define NEXAR_WIRE_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nexar.h"

#define NEXAR__WIRE_MAGIC 0x584eu /* bytes 'N' 'X' */
#define NEXAR__WIRE_VERSION 1u

/* ---- Mesh message header: the first 64 bytes of every message stream. */
#define NEXAR__HDR_BYTES 64u

enum nexar__kind {
  NEXAR__KIND_P2P = 1,       /* tagged point-to-point message */
  NEXAR__KIND_COLL = 2,      /* one step of a collective */
  NEXAR__KIND_HEARTBEAT = 3, /* liveness only, no payload */
  NEXAR__KIND_MISMATCH = 4,  /* collective fingerprints disagree (notice) */
  NEXAR__KIND_RPC = 5,       /* RPC request or response (docs/rpc.md) */
  NEXAR__KIND_FAILED = 6,    /* failure notice: a process was declared failed */
  NEXAR__KIND_AGREE = 7,     /* failure agreement (docs/fault-tolerance.md) */
  NEXAR__KIND_RELAY = 8,  /* a message for a non-neighbour (docs/topology.md) */
  NEXAR__KIND_CREDIT = 9, /* end-to-end relay credit returned (topology.md) */
  NEXAR__KIND_MAX = 9
};

/* Relay frames (kind RELAY): a message between two processes that are not
 * neighbours, forwarded hop by hop. The stream carries this outer header,
 * then the relay envelope (NEXAR__RELAY_ENV_BYTES), then the message's own
 * 64-byte header as the origin built it (the inner header), then its
 * payload. Outer header: lane = the inner lane; src_rank = the origin's
 * stable id; tag = the destination's stable id; step = links crossed so
 * far, counting the one it is on (1 on the origin's link); algo = the hop
 * limit (step <= algo <= NEXAR__RELAY_MAX_HOPS); payload_len = envelope +
 * inner header + inner payload; count = 1 when the origin holds end-to-end
 * credit for the frame (relays store and forward it, and its destination
 * gives the credit back: CREDIT below), else 0; every other field zero.
 * Envelope: 32-byte SHA-256 of the inner payload, then the 32-byte
 * HMAC-SHA256 tag of the origin over ("nexar relay v1", origin, dest, inner
 * header, payload hash) under the pair key of (origin, dest), which no
 * relay knows (docs/wire-protocol.md section 2.6). */
#define NEXAR__RELAY_ENV_BYTES 64u
#define NEXAR__RELAY_PRE_BYTES (NEXAR__RELAY_ENV_BYTES + NEXAR__HDR_BYTES)
#define NEXAR__RELAY_MAX_HOPS 255u

/* Process-level control messages (kinds FAILED and AGREE) travel on the
 * control lane with comm_id's top bit set and src_rank = the sender's
 * stable id (checked against the authenticated peer).
 * FAILED: payload NEXAR__FAILED_BYTES = u32 failed id, u32 reason.
 * AGREE: step = phase (NEXAR__AG_*), coll_seq = round, payload = u64 new
 * comm id, u32 n, n x u32 failed stable ids (n <= NEXAR__AGREE_MAX_IDS). */
#define NEXAR__FAILED_BYTES 8u
/* CREDIT (control lane, comm_id = NEXAR__PROC_ID, src_rank = the sender's
 * stable id, no payload): the sender, destination of relay frames with
 * count = 1 from the receiver, took |count| bytes of them off its links on
 * lane |tag| (DATA or RPC); the receiver may send that many more. count 0:
 * a request from an origin whose next frame waits for credit: the
 * receiver gives back what it owes at once, or with the next frame of the
 * sender's that leaves its links. */
/* An agreement lists stable ids, distinct and below the job's id space
 * (NEXAR__ELASTIC_MAX_IDS): the header decoder bounds an AGREE payload by
 * it (64 KiB), before the receiver allocates anything for it. */
#define NEXAR__AGREE_MAX_IDS 16384u
enum nexar__ag_phase {
  NEXAR__AG_PROPOSE = 1,
  NEXAR__AG_DECIDE = 2,
  NEXAR__AG_READY = 3
};

/* RPC messages (kind NEXAR__KIND_RPC, RPC lane): tag = function id
 * (0..65535), coll_seq = call id (chosen by the caller, unique per
 * connection), step = NEXAR__RPC_REQUEST or NEXAR__RPC_RESPONSE; count: in
 * a request the time left to the caller's deadline in microseconds (at
 * most NEXAR__RPC_BUDGET_MAX_US; the callee counts it from the header's
 * arrival), in a response the status (low 32 bits, a result code as int32:
 * 0 or a NEXAR_ERR_*) and the handler's return value (high 32 bits,
 * int32); algo: 0, or, for the first part of a relayed message above one
 * credited relay frame (docs/topology.md section 10, rule 7), the whole
 * payload's length (> payload_len), the rest following in PART messages.
 * PART: a later part of such a message: tag = its function id, coll_seq =
 * the RPC-lane seq of its first part, count = the payload's offset in the
 * message (count + payload_len <= its length), algo 0. */
enum nexar__rpc_step {
  NEXAR__RPC_REQUEST = 0,
  NEXAR__RPC_RESPONSE = 1,
  NEXAR__RPC_PART = 2
};
/* The largest deadline budget a request carries: INT32_MAX ms. */
#define NEXAR__RPC_BUDGET_MAX_US (2147483647ull * 1000ull)

/* P2P messages (kind NEXAR__KIND_P2P): step is the mode.
 * STANDARD: an ordinary message. SYNC: a synchronous-mode send; the
 * receiver answers MATCHED once a receive has matched it. MATCHED: that
 * answer, on the control lane with no payload and tag 0; coll_seq = the
 * data-lane seq of the SYNC message it acknowledges. GROUP: a message of
 * nexar_comm_create_group (tag = the call's tag), matched only by the
 * library's own receives of that call, never by the application's.
 * RDV: the first part of a relayed message above the end-to-end relay
 * credit (rendezvous, docs/topology.md section 10), data lane: count = the
 * message's length (> payload_len), the payload its first bytes; matched
 * like a standard message, the receiver answers MATCHED (clear to send).
 * RDV_DATA: a later part, data lane: coll_seq = the seq of its RDV, count
 * = the payload's offset in the message (count + payload_len <= its
 * length). Other P2P messages have coll_seq and count 0. */
enum nexar__p2p_mode {
  NEXAR__P2P_STANDARD = 0,
  NEXAR__P2P_SYNC = 1,
  NEXAR__P2P_MATCHED = 2,
  NEXAR__P2P_GROUP = 3,
  NEXAR__P2P_RDV = 4,
  NEXAR__P2P_RDV_DATA = 5
};

/* Lanes, in the order a connection writes them: control, RPC, data
 * (quic.c). Control and RPC messages travel on unidirectional streams,
 * data on bidirectional ones, so stuck data can never take the stream
 * credit of the other two; the RPC lane leaves a reserve of that credit
 * to the control lane. */
enum nexar__lane {
  NEXAR__LANE_CONTROL = 0, /* barrier, membership, heartbeat: sent first */
  NEXAR__LANE_DATA = 1,    /* p2p and collective payloads: sent last */
  NEXAR__LANE_RPC = 2,     /* RPC requests and responses */
  NEXAR__LANE_COUNT = 3
};

/* Collective operation ids carried in coll_op (fingerprint). */
enum nexar__coll_op {
  NEXAR__COLL_NONE = 0,
  NEXAR__COLL_BARRIER = 1,
  NEXAR__COLL_BCAST = 2,
  NEXAR__COLL_ALLREDUCE = 3,
  NEXAR__COLL_REDUCE = 4,
  NEXAR__COLL_ALLGATHER = 5,
  NEXAR__COLL_REDUCE_SCATTER = 6,
  NEXAR__COLL_ALLTOALL = 7,
  NEXAR__COLL_GATHER = 8,
  NEXAR__COLL_SCATTER = 9,
  NEXAR__COLL_SCAN = 10,
  NEXAR__COLL_EXSCAN = 11,
  NEXAR__COLL_ALLGATHERV = 12,
  NEXAR__COLL_ALLTOALLV = 13,
  NEXAR__COLL_GATHERV = 14,
  NEXAR__COLL_SCATTERV = 15,
  NEXAR__COLL_MAX = 31
};

typedef struct nexar__hdr {
  uint8_t kind;         /* enum nexar__kind */
  uint8_t lane;         /* enum nexar__lane */
  uint8_t coll_op;      /* enum nexar__coll_op (0 for P2P) */
  uint8_t dtype;        /* nexar_dtype_t */
  uint8_t redop;        /* nexar_op_t */
  uint64_t comm_id;     /* communicator id (0 = world) */
  uint32_t src_rank;    /* sender's rank in comm (checked by the receiver) */
  uint32_t tag;         /* P2P: tag (<= NEXAR_TAG_MAX); COLL: root or ~0 */
  uint64_t seq;         /* per (sender, receiver, comm, lane), from 0 */
  uint64_t coll_seq;    /* collective number within comm (COLL only) */
  uint32_t step;        /* step within the collective (COLL only) */
  uint32_t algo;        /* algorithm of the collective (COLL only) */
  uint64_t count;       /* element count of the whole collective call */
  uint64_t payload_len; /* payload bytes following the header */
} nexar__hdr_t;

/* The top bit of a COLL step marks a clear-to-send: the empty message the
 * receiver of a transfer above one credited relay frame sends its sender
 * on a sparse topology once it has posted the transfer's receives
 * (docs/topology.md section 10, rule 6). */
#define NEXAR__COLL_STEP_CTS (1u << 31)

/* Whether header |h| is the first part of a message sent in parts: a
 * rendezvous first part (P2P RDV), or an RPC message whose length is in
 * algo (docs/topology.md section 10, rules 5 and 7). */
static inline bool nexar__msg_parted(const nexar__hdr_t *h) {
  return (h->kind == NEXAR__KIND_P2P && h->step == NEXAR__P2P_RDV) ||
         (h->kind == NEXAR__KIND_RPC && h->step != NEXAR__RPC_PART && h->algo);
}

/* The length of the message of header |h|: its payload, or for a first
 * part of a message sent in parts, the whole message's. */
static inline uint64_t nexar__msg_bytes(const nexar__hdr_t *h) {
  return !nexar__msg_parted(h)        ? h->payload_len
         : h->kind == NEXAR__KIND_P2P ? h->count
                                      : h->algo;
}

/* Writes exactly NEXAR__HDR_BYTES bytes to |out|. */
void nexar__hdr_encode(const nexar__hdr_t *h, uint8_t out[NEXAR__HDR_BYTES]);

/*
 * Decodes a header from |len| bytes at |in|. |max_payload| bounds
 * payload_len. Returns NEXAR__HDR_BYTES on success, 0 when len is short,
 * NEXAR_ERR_PROTO on a bad magic, version, kind, lane, reserved field, tag
 * or length; |why| (may be NULL) then points to static text naming the
 * field.
 */
int nexar__hdr_decode(nexar__hdr_t *h, const uint8_t *in, size_t len,
                      uint64_t max_payload, const char **why);

/* ---- Mismatch notice: the payload of a NEXAR__KIND_MISMATCH message,
 * sent on the control lane to every member of the communicator by the rank
 * that saw two fingerprints of one collective disagree. */
#define NEXAR__NOTICE_BYTES 48u

typedef struct nexar__fp {
  uint8_t coll_op, dtype, redop, algo;
  uint32_t root; /* the header's tag field */
  uint64_t count;
} nexar__fp_t;

typedef struct nexar__notice {
  uint64_t coll_seq;
  uint32_t rank_a, rank_b; /* comm ranks of the two sides */
  nexar__fp_t a, b;
} nexar__notice_t;

void nexar__notice_encode(const nexar__notice_t *n,
                          uint8_t out[NEXAR__NOTICE_BYTES]);
/* Returns 0, or NEXAR_ERR_PROTO when a field is out of range. */
int nexar__notice_decode(nexar__notice_t *n, const uint8_t *in, size_t len);

/* ---- Failure notice and agreement payloads (kinds FAILED and AGREE;
 * wire_ctl.c). Layouts above and in docs/wire-protocol.md section 2.5; the
 * header decoder has already checked the kind's lane, comm_id, step and
 * payload_len rules. */
typedef struct nexar__failed {
  uint32_t id;     /* the failed process's stable id */
  uint32_t reason; /* nexar_failure_reason_t, as sent (see the decoder) */
} nexar__failed_t;

/* Writes exactly NEXAR__FAILED_BYTES bytes to |out|. */
void nexar__failed_encode(const nexar__failed_t *f,
                          uint8_t out[NEXAR__FAILED_BYTES]);
/*
 * Decodes a FAILED payload of |len| bytes. |nids| is the number of stable
 * ids the receiver knows (ctx->world): the id must be below it, since it
 * indexes the receiver's tables. The reason is not range checked: it only
 * names the cause in a log line (the receiver records the process as
 * NEXAR_FAIL_REPORTED whatever it says), and a notice is not worth losing
 * over it. Returns 0, NEXAR_ERR_PROTO (length other than
 * NEXAR__FAILED_BYTES, id >= nids) or NEXAR_ERR_INVALID_ARG (f NULL, or in
 * NULL with len > 0). |f| is written only on success.
 */
int nexar__failed_decode(nexar__failed_t *f, const uint8_t *in, size_t len,
                         uint32_t nids);

typedef struct nexar__agree_msg {
  uint64_t id;        /* proposed or decided new communicator id */
  uint32_t n;         /* stable ids listed */
  const uint8_t *ids; /* n u32 ids, decoded in place (nexar__id_at) */
} nexar__agree_msg_t;

/*
 * Writes an AGREE payload (u64 id, u32 n, n u32 ids) into |out| of |cap|
 * bytes. Returns its length, 12 + 4 n, or NEXAR_ERR_INVALID_ARG (ids NULL
 * with n > 0, n above NEXAR__AGREE_MAX_IDS, out too small).
 */
int nexar__agree_encode(uint64_t id, const uint32_t *ids, uint32_t n,
                        uint8_t *out, size_t cap);
/*
 * Decodes an AGREE payload of |len| bytes. |max_n| is the most ids the
 * receiver accepts (the members of the communicator being agreed on). The
 * count is checked against both |max_n| and NEXAR__AGREE_MAX_IDS, and the
 * length must be exactly 12 + 4 n, before anything is read from the list.
 * The ids themselves are not range checked: ids that are not members are
 * ignored by the protocol (docs/wire-protocol.md section 2.5), so a
 * receiver only compares them with its members and never indexes by them.
 * Returns 0, NEXAR_ERR_PROTO or NEXAR_ERR_INVALID_ARG (m NULL, or in NULL
 * with len > 0). |m| is written only on success; m->ids points into |in|.
 */
int nexar__agree_decode(nexar__agree_msg_t *m, const uint8_t *in, size_t len,
                        uint32_t max_n);

/* ---- Seed protocol: framed messages on one bidirectional stream.
 * A frame is [u16 magic][u8 version][u8 type][u32 body_len][body]. */
#define NEXAR__SEED_FRAME_HDR 8u
/* 2 MiB: a WELCOME or JOIN naming 16k ranks with their host section. */
#define NEXAR__SEED_MAX_BODY (2u << 20)
#define NEXAR__MAC_BYTES 32u /* HMAC-SHA256 */
#define NEXAR__FP_BYTES 32u  /* SHA-256 certificate fingerprint */
#define NEXAR__HOST_MAX 64u
#define NEXAR__REASON_MAX 256u
/* A worker's DER certificate in HELLO and WELCOME (an ECDSA P-256
 * self-signed certificate with the relay key extension is about 420 bytes),
 * and the NEXAR_TOPOLOGY string a HELLO carries. */
#define NEXAR__CERT_MAX 2048u
#define NEXAR__TOPO_MAX 32u

enum nexar__seed_type {
  NEXAR__SEED_PROOF = 1,   /* seed -> worker: proof of the secret */
  NEXAR__SEED_HELLO = 2,   /* worker -> seed: proof, request, identity */
  NEXAR__SEED_WELCOME = 3, /* seed -> worker: rank and roster */
  NEXAR__SEED_REJECT = 4,  /* seed -> worker: refusal with reason */
  /* Elastic membership (docs/elastic.md). */
  NEXAR__SEED_ADMIT = 5,    /* member leader -> seed: admit the joiners */
  NEXAR__SEED_ADMITTED = 6, /* seed -> member leader: who was admitted */
  NEXAR__SEED_JOIN = 7,     /* seed -> joiner: its id, roster, new world */
  /* Live inspection (docs/debugging.md, docs/wire-protocol.md 6.6). */
  NEXAR__SEED_QUERY = 8,    /* observer -> seed: proof; asks for the roster */
  NEXAR__SEED_ROSTER = 9,   /* seed -> observer: the roster (WELCOME body) */
  NEXAR__SEED_INSPECT = 10, /* observer -> rank: proof; asks for its state */
  NEXAR__SEED_STATE = 11,   /* rank -> observer: its state */
  NEXAR__SEED_TYPE_MAX = 11
};

/* Bound on the stable ids an elastic seed assigns over a job's life (and so
 * on every id list of ADMIT, ADMITTED and JOIN): a JOIN carrying the whole
 * roster then stays below NEXAR__SEED_MAX_BODY. */
#define NEXAR__ELASTIC_MAX_IDS 16384u
_Static_assert(NEXAR__AGREE_MAX_IDS == NEXAR__ELASTIC_MAX_IDS,
               "an agreement lists ids of the job's id space");
/* ADMIT max_joiners: no limit on the members' side. */
#define NEXAR__JOIN_UNLIMITED 0xffffffffu

/* Where a process runs (docs/wire-protocol.md section 6.5): the host
 * section of WELCOME, ADMITTED and JOIN carries one per rank, and the
 * HELLO host extension the worker's own key and nonce (its pid is HELLO's).
 * Processes with one key share a boot and a network namespace. */
#define NEXAR__NONCE_BYTES 16u
typedef struct nexar__host_id {
  uint64_t key; /* 0: unknown (a HELLO without the extension) */
  uint32_t pid;
  uint8_t nonce[NEXAR__NONCE_BYTES]; /* random, names its shm rendezvous */
} nexar__host_id_t;

/* An IPv4 or IPv6 UDP address in wire form. */
typedef struct nexar__waddr {
  uint8_t family; /* 4 or 6 */
  uint16_t port;  /* host order */
  uint8_t ip[16]; /* IPv4 uses the first 4 bytes */
} nexar__waddr_t;

/* The job's settings (docs/wire-protocol.md section 6.8): values every
 * member must share, in the order of nexar__job_names (base/param.h lists
 * which settings they are; the wire only bounds them). A HELLO carries the
 * worker's own, WELCOME and JOIN the job's, which every member adopts. */
#define NEXAR__JOB_VALUES 4u
#define NEXAR__JOB_VALUE_MAX (1ull << 30)
typedef struct nexar__job {
  uint8_t n;                     /* 0: absent, else NEXAR__JOB_VALUES */
  uint64_t v[NEXAR__JOB_VALUES]; /* each 0 .. NEXAR__JOB_VALUE_MAX */
} nexar__job_t;

typedef struct nexar__seed_hello {
  uint8_t proof[NEXAR__MAC_BYTES];
  int32_t rank;       /* requested rank, or -1 */
  int32_t world_size; /* what the worker expects, or 0 for "any" */
  uint8_t has_addr;   /* 1 when advertise is set (else use observed) */
  uint8_t join;       /* 1: join a running elastic job (NEXAR_JOIN) */
  nexar__waddr_t advertise;
  uint8_t fingerprint[NEXAR__FP_BYTES];
  uint32_t pid;
  char host[NEXAR__HOST_MAX + 1]; /* NUL-terminated */
  /* Identity extension (optional on the wire; 0 / "" when absent): the
   * worker's DER certificate, whose SHA-256 must be |fingerprint|, and its
   * NEXAR_TOPOLOGY setting (printable ASCII). */
  uint16_t cert_len;
  uint8_t cert[NEXAR__CERT_MAX];
  char topo[NEXAR__TOPO_MAX + 1]; /* NUL-terminated */
  /* Host extension (optional, after the identity extension; 0 when
   * absent): host key (non-zero when sent) and shared-memory nonce. */
  uint64_t host_key;
  uint8_t nonce[NEXAR__NONCE_BYTES];
  /* Job extension (optional, last; n 0 when absent): its settings. */
  nexar__job_t job;
} nexar__seed_hello_t;

typedef struct nexar__roster_entry {
  nexar__waddr_t addr;
  uint8_t fingerprint[NEXAR__FP_BYTES];
  /* From the message's host section; all zero when it has none. Encoders
   * write the section when some entry has a non-zero key. */
  nexar__host_id_t host;
} nexar__roster_entry_t;

typedef struct nexar__seed_welcome {
  uint32_t rank;
  uint32_t world_size;
  /* Entries are decoded in place by nexar__welcome_entry(). */
  const uint8_t *entries;
  /* Certificate section (optional): world_size x (u16 length, DER), read
   * with nexar__welcome_cert(); NULL when the welcome has none. */
  const uint8_t *certs;
  size_t certs_len;
  /* Host section (optional, after the certificates): world_size host ids,
   * read by nexar__welcome_entry(); NULL when absent. */
  const uint8_t *hosts;
  /* Job section (optional, last): the job's settings; n 0 when absent. */
  nexar__job_t job;
} nexar__seed_welcome_t;

typedef struct nexar__seed_reject {
  int32_t code; /* a NEXAR_ERR_* value */
  char reason[NEXAR__REASON_MAX + 1];
} nexar__seed_reject_t;

/* ADMIT: the members' leader asks the seed to admit the pending joiners
 * into the world it is about to rebuild. Id lists are decoded in place
 * (nexar__id_at). */
typedef struct nexar__seed_admit {
  uint8_t proof[NEXAR__MAC_BYTES]; /* worker proof on this connection */
  uint64_t comm_id;                /* wire id of the new world (>= 1) */
  uint32_t epoch;                  /* its epoch (>= 1) */
  uint32_t max_joiners;            /* or NEXAR__JOIN_UNLIMITED */
  uint32_t nstay;                  /* staying members, 1..MAX_IDS */
  const uint8_t *ids;              /* their stable ids, in rank order */
} nexar__seed_admit_t;

/* One admitted joiner: its stable id and roster entry. */
typedef struct nexar__joiner {
  uint32_t id;
  nexar__roster_entry_t e;
} nexar__joiner_t;

/* ADMITTED: the seed's answer to ADMIT. */
typedef struct nexar__seed_admitted {
  uint32_t nids;  /* ids assigned so far, joiners included */
  uint32_t njoin; /* joiners admitted (ids ascending), 0..nids */
  const uint8_t *entries;
  const uint8_t *hosts; /* host section: njoin host ids, or NULL */
} nexar__seed_admitted_t;

/* JOIN: the elastic WELCOME of a joiner. */
typedef struct nexar__seed_join {
  uint32_t id;            /* the joiner's stable id, below nids */
  uint32_t nids;          /* ids assigned so far: the roster length */
  uint64_t comm_id;       /* wire id of the new world */
  uint32_t epoch;         /* its epoch */
  uint32_t nmembers;      /* members of the new world, id among them */
  const uint8_t *entries; /* nids roster entries (nexar__join_entry) */
  const uint8_t *members; /* nmembers ids in rank order (nexar__id_at) */
  const uint8_t *hosts;   /* host section: nids host ids, or NULL */
  nexar__job_t job;       /* job section (optional, last): n 0 if absent */
} nexar__seed_join_t;

/* STATE (live inspection): what one rank is doing. Names, sizes, ranks
 * and times only: never a payload or the secret. */
#define NEXAR__INSP_OPS 4u      /* operations in progress listed */
#define NEXAR__INSP_OP_NAME 15u /* bytes of an operation's name */
#define NEXAR__INSP_WAITS 63u   /* bytes of a "2, 5" list of comm ranks */
#define NEXAR__INSP_PEER_BYTES 16u
typedef struct nexar__insp_op {
  uint64_t comm;      /* communicator id */
  uint64_t seq;       /* collective sequence number; UINT64_MAX: p2p */
  uint64_t waited_us; /* since it was posted */
  uint32_t epoch;
  int32_t crank, csize; /* this rank's rank in the communicator, its size */
  char op[NEXAR__INSP_OP_NAME + 1];  /* printable */
  char waits[NEXAR__INSP_WAITS + 1]; /* digits, ", " */
} nexar__insp_op_t;
/* One link the rank holds: the peer's world rank, how long since it last
 * heard from it, and the bytes queued to it and not yet acknowledged. */
typedef struct nexar__insp_peer {
  uint32_t rank;
  uint32_t hb_age_ms; /* saturates at UINT32_MAX */
  uint64_t inflight;
} nexar__insp_peer_t;
typedef struct nexar__insp_state {
  uint32_t rank, world, pid;
  char host[NEXAR__HOST_MAX + 1]; /* printable */
  uint32_t nops;                  /* <= NEXAR__INSP_OPS, newest first */
  nexar__insp_op_t ops[NEXAR__INSP_OPS];
  uint32_t npeers; /* <= world; read with nexar__insp_peer_at() */
  const uint8_t *peers;
} nexar__insp_state_t;

/* Writes a STATE frame: |s| (its peers field ignored) and the |s->npeers|
 * links of |peers|. Returns the frame's length or NEXAR_ERR_INVALID_ARG (a
 * bound exceeded, a name not printable, or |cap| too small). */
int nexar__insp_state_encode(const nexar__insp_state_t *s,
                             const nexar__insp_peer_t *peers, uint8_t *out,
                             size_t cap);
/* Decodes a STATE body: every length and count checked against the bytes
 * present, ranks below the world, names printable, the body used exactly.
 * Returns 0 (s->peers then points into |body|) or NEXAR_ERR_PROTO. */
int nexar__insp_state_decode(nexar__insp_state_t *s, const uint8_t *body,
                             size_t len);
/* Peer |i| (< s->npeers) of a decoded STATE. */
void nexar__insp_peer_at(const nexar__insp_state_t *s, uint32_t i,
                         nexar__insp_peer_t *p);
/* QUERY and INSPECT carry a proof as PROOF does; ROSTER is a WELCOME body
 * (its rank field 0, meaningless) under type ROSTER. */
int nexar__seed_mac_encode(uint8_t type, const uint8_t mac[NEXAR__MAC_BYTES],
                           uint8_t *out, size_t cap);
int nexar__seed_roster_encode(uint32_t world_size,
                              const nexar__roster_entry_t *entries,
                              uint8_t *out, size_t cap);

/*
 * Reads a seed frame header. Returns NEXAR__SEED_FRAME_HDR and sets *type
 * and *body_len, 0 when short, NEXAR_ERR_PROTO on bad magic, version, type
 * or a body_len above NEXAR__SEED_MAX_BODY.
 */
int nexar__seed_frame_decode(const uint8_t *in, size_t len, uint8_t *type,
                             uint32_t *body_len);

/*
 * Splits the next whole frame off a stream: |in| holds the |len| bytes
 * received and not yet consumed. Returns the frame's length (header and
 * body) and sets *type, *body (pointing into |in|) and *body_len when a
 * whole frame is there; 0 when more bytes are needed; NEXAR_ERR_PROTO on a
 * bad header (as nexar__seed_frame_decode), which is reported as soon as
 * the 8 header bytes are in, before any body byte.
 */
int nexar__seed_frame_next(const uint8_t *in, size_t len, uint8_t *type,
                           const uint8_t **body, uint32_t *body_len);

/* Encoders write a whole frame (header and body) into |out| of |cap| bytes
 * and return its length, or NEXAR_ERR_INVALID_ARG when it does not fit. */
int nexar__seed_proof_encode(const uint8_t mac[NEXAR__MAC_BYTES], uint8_t *out,
                             size_t cap);
int nexar__seed_hello_encode(const nexar__seed_hello_t *h, uint8_t *out,
                             size_t cap);
int nexar__seed_welcome_encode(uint32_t rank, uint32_t world_size,
                               const nexar__roster_entry_t *entries,
                               uint8_t *out, size_t cap);
/* As nexar__seed_welcome_encode, followed by the certificate section:
 * certs[i] of cert_len[i] bytes (0 .. NEXAR__CERT_MAX; 0 = none) for every
 * rank. Both write the host section after it when some entries[i].host.key
 * is non-zero (as the ADMITTED and JOIN encoders do). */
int nexar__seed_welcome_encode_certs(uint32_t rank, uint32_t world_size,
                                     const nexar__roster_entry_t *entries,
                                     const uint8_t *const *certs,
                                     const uint16_t *cert_len, uint8_t *out,
                                     size_t cap);
/* As nexar__seed_welcome_encode_certs, followed by the job section when
 * |job| is not NULL and job->n is not 0 (NEXAR_ERR_INVALID_ARG when it is
 * not valid: n other than NEXAR__JOB_VALUES, a value out of bounds). */
int nexar__seed_welcome_encode_job(uint32_t rank, uint32_t world_size,
                                   const nexar__roster_entry_t *entries,
                                   const uint8_t *const *certs,
                                   const uint16_t *cert_len,
                                   const nexar__job_t *job, uint8_t *out,
                                   size_t cap);
int nexar__seed_reject_encode(int32_t code, const char *reason, uint8_t *out,
                              size_t cap);
/* |a->ids| is ignored: the ids come from |ids| (a->nstay of them). */
int nexar__seed_admit_encode(const nexar__seed_admit_t *a, const uint32_t *ids,
                             uint8_t *out, size_t cap);
int nexar__seed_admitted_encode(uint32_t nids, const nexar__joiner_t *j,
                                uint32_t njoin, uint8_t *out, size_t cap);
/* |j->entries| and |j->members| are ignored: they come from |roster|
 * (j->nids entries) and |members| (j->nmembers ids). */
int nexar__seed_join_encode(const nexar__seed_join_t *j,
                            const nexar__roster_entry_t *roster,
                            const uint32_t *members, uint8_t *out, size_t cap);

/* Body decoders: |body| is the frame body of |len| bytes. They return 0 or
 * NEXAR_ERR_PROTO (wrong length, bad family, unterminated text, ...). */
int nexar__seed_proof_decode(uint8_t mac[NEXAR__MAC_BYTES], const uint8_t *body,
                             size_t len);
int nexar__seed_hello_decode(nexar__seed_hello_t *h, const uint8_t *body,
                             size_t len);
/* Checks that len matches world_size entries (world_size >= 1 and bounded by
 * NEXAR__SEED_MAX_BODY), then optional sections, each exactly as long as
 * world_size entries of it make it (certificates, then hosts: u16
 * 0xffff, which no certificate length can be, and world_size host ids
 * naming some non-zero key), and that rank < world_size. */
int nexar__seed_welcome_decode(nexar__seed_welcome_t *w, const uint8_t *body,
                               size_t len);
/* Decodes entry |i| (< w->world_size) of a decoded welcome, its host from
 * the host section (zero without one). Returns 0 or NEXAR_ERR_PROTO (bad
 * family). */
int nexar__welcome_entry(const nexar__seed_welcome_t *w, uint32_t i,
                         nexar__roster_entry_t *e);
/* Walks the certificate section: |*pos| starts at 0 and is advanced past
 * one entry per call, which sets *der and *len (*len 0: none). Returns 0,
 * or NEXAR_ERR_INVALID_ARG when the welcome has no certificate section or
 * the walk is past its end (the decoder checked every length). */
int nexar__welcome_cert(const nexar__seed_welcome_t *w, size_t *pos,
                        const uint8_t **der, uint16_t *len);
int nexar__seed_reject_decode(nexar__seed_reject_t *r, const uint8_t *body,
                              size_t len);
/* Checks 1 <= nstay <= MAX_IDS, distinct ids below MAX_IDS, comm_id and
 * epoch >= 1, and the exact length. */
int nexar__seed_admit_decode(nexar__seed_admit_t *a, const uint8_t *body,
                             size_t len);
/* Checks nids <= MAX_IDS, njoin <= nids, ids below nids and strictly
 * ascending, every address, and the exact length (with or without a host
 * section of njoin host ids, which must name some non-zero key). */
int nexar__seed_admitted_decode(nexar__seed_admitted_t *a, const uint8_t *body,
                                size_t len);
/* Entry |i| (< a->njoin) of a decoded ADMITTED (host as in
 * nexar__welcome_entry). Returns 0 or
 * NEXAR_ERR_INVALID_ARG / NEXAR_ERR_PROTO. */
int nexar__admitted_entry(const nexar__seed_admitted_t *a, uint32_t i,
                          nexar__joiner_t *j);
/* Checks 1 <= nids <= MAX_IDS, id < nids, 1 <= nmembers <= nids, distinct
 * members below nids with id among them, every address, comm_id and epoch
 * >= 1, and the exact length (with or without a host section of nids host
 * ids after the members, which must name some non-zero key). */
int nexar__seed_join_decode(nexar__seed_join_t *j, const uint8_t *body,
                            size_t len);
/* Roster entry |i| (< j->nids) of a decoded JOIN (host as in
 * nexar__welcome_entry). */
int nexar__join_entry(const nexar__seed_join_t *j, uint32_t i,
                      nexar__roster_entry_t *e);

/* ---- Relay envelope (kind RELAY, after the outer header). */
typedef struct nexar__relay_env {
  uint8_t payload_hash[32]; /* SHA-256 of the inner payload */
  uint8_t tag[32];          /* HMAC-SHA256 of the origin (see above) */
} nexar__relay_env_t;

void nexar__relay_env_encode(const nexar__relay_env_t *e,
                             uint8_t out[NEXAR__RELAY_ENV_BYTES]);
void nexar__relay_env_decode(nexar__relay_env_t *e,
                             const uint8_t in[NEXAR__RELAY_ENV_BYTES]);

/* Little-endian helpers shared by the codecs: one unaligned load or store
 * each (memcpy), converted from or to the host's byte order. */
static inline void nexar__put_u16(uint8_t *p, uint16_t v) {
  v = htole16(v);
  memcpy(p, &v, sizeof(v));
}
static inline void nexar__put_u32(uint8_t *p, uint32_t v) {
  v = htole32(v);
  memcpy(p, &v, sizeof(v));
}
static inline void nexar__put_u64(uint8_t *p, uint64_t v) {
  v = htole64(v);
  memcpy(p, &v, sizeof(v));
}
static inline uint16_t nexar__get_u16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, sizeof(v));
  return le16toh(v);
}
static inline uint32_t nexar__get_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return le32toh(v);
}
static inline uint64_t nexar__get_u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return le64toh(v);
}

/* Id |i| of an id list decoded in place (ADMIT ids, JOIN members). */
static inline uint32_t nexar__id_at(const uint8_t *ids, uint32_t i) {
  return nexar__get_u32(ids + 4 * (size_t)i);
}

#endif /* NEXAR_WIRE_H */
