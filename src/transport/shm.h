/*
 * Shared-memory links (shm.c: streams and records; shm_setup.c: the
 * rendezvous, the socket, closes). Private to src/transport.
 */
#ifndef NEXAR_SHM_H
#define NEXAR_SHM_H

#include "transport/shm_ring.h"
#include "transport/transport.h"

#define HELLO_MAGIC 0x314f4c4c45484e58ull /* "XNHELLO1" */
#define CHUNK_BYTES (256u << 10)          /* payload of one DATA record */
#define SOCK_CHECK_NS 20000000ull         /* 20 ms between socket sweeps */
#define SETUP_NS 10000000000ull           /* 10 s to finish the rendezvous */
#define ACCEPT_MAX 64                     /* links not yet identified */
#define PARK_LOOK_NS 20000ull /* between looks at parked links' kicks */
#define BEAT_LOOKS 8          /* looks at heartbeat counts per interval */

enum {
  R_DATA = 1,
  R_CREDIT = 2,
  R_RESET = 3,
  R_STREAMS = 4,
  R_HB = 5,   /* accepted, no longer sent: heartbeats are counts */
  R_DESC = 6, /* a: stream, b: offset; payload: shm_desc_t (read it) */
  R_ACK = 7,  /* a: stream, b: bytes of descriptors read (or dropped) */
  R_SMALL = 8 /* a whole small message in one line (below) */
};
/* R_SMALL: a standard-mode point-to-point message of the data lane of at
 * most SMALL_MAX payload bytes, so that record header, message header and
 * payload share one 64-byte line: flags: datatype, a: the p2p sequence
 * number, b: communicator id, payload: u32 source rank, u32 tag, then the
 * message's bytes. It opens and ends the next stream of the bulk ring as
 * a DATA record with FIN would; the receiver rebuilds the 64-byte header
 * and reads it as that record (every check of the general path). */
#define SMALL_PRE 8u
#define SMALL_MAX (64u - NEXAR__SHM_REC_HDR - SMALL_PRE)
/* A descriptor: |len| stream bytes at |addr| in the sender's memory,
 * which the receiver copies with process_vm_readv (single copy). */
typedef struct shm_desc {
  uint64_t addr, len;
} shm_desc_t;
#define DESC_MAX_BYTES (1u << 20) /* per descriptor: bounds a pass's read */
/* The two rings of each direction (shm_tx.c): the bulk ring carries the
 * data lane, the priority ring the control and RPC lanes and the
 * flow-control records, in a segment of a quarter of the bulk ring's size
 * (at least the smallest ring). Streams are numbered per ring: ring q's
 * are 4q, 4q + 8, 4q + 16, ... */
enum { Q_BULK = 0, Q_PRIO = 1 };
#define LANE_Q(lane) ((lane) == NEXAR__LANE_DATA ? Q_BULK : Q_PRIO)
#define SID_STEP 8
#define PRIO_RING_BYTES(ring) \
  ((ring) / 4 > NEXAR__SHM_RING_MIN ? (ring) / 4 : NEXAR__SHM_RING_MIN)
enum { F_FIN = 1 };
enum { M_HELLO = 1, M_WELCOME = 2, M_CLOSE = 3 };

/* The rendezvous and close messages on the socket (host order: same host). */
typedef struct shm_msg {
  uint64_t magic;
  uint32_t type;
  uint32_t code;   /* M_CLOSE: application close code */
  uint64_t window; /* stream bytes the sender grants a new stream */
  uint64_t streams;
  uint32_t cma; /* 1: the sender can read the receiver's memory */
  uint32_t pad; /* streams the sender lets the peer open at once */
  uint8_t fp[NEXAR__FP_BYTES];
  char reason[128]; /* M_CLOSE */
} shm_msg_t;

typedef struct rstream {
  int64_t sid;
  nexar__imsg_t *m;
  uint64_t got, max; /* bytes received; bytes allowed */
  uint64_t max_sent; /* the limit the peer was last told */
  bool orphan;       /* its message was dropped: the rest is read unseen */
} rstream_t;

typedef struct nexar__shm {
  nexar__link_t l;
  int sock, efd_mine, efd_peer;
  nexar__shm_seg_t seg;  /* the bulk rings (Q_BULK) */
  nexar__shm_seg_t pseg; /* the priority rings (Q_PRIO) */
  bool attached;         /* both segments are mapped */
  /* Parked: nothing came for NEXAR_SHM_PARK_US (0, the default: never), so the
   * rings' sleep flags stay up and they are not polled; the peer's next record
   * kicks the eventfd, whose event (the sweep) puts the link back among the
   * polled ones. A waiting rank then looks only at the links that are talking.
   */
  bool parked;
  bool polled;    /* in ep->shm_poll */
  bool held;      /* its HELLO waits for the roster, out of the set */
  uint64_t rx_at; /* when a record was last read */
  uint64_t setup_deadline;
  uint64_t tx_at;        /* when a record was last written */
  int64_t next_sid[2];   /* the next stream this side opens, per ring */
  int64_t last_rsid[2];  /* the highest stream the peer opened, per ring */
  int rx_q;              /* the ring of the record being read */
  uint64_t window;       /* what the peer grants each new stream */
  uint64_t streams_left; /* streams this side may still open */
  uint64_t streams_max;  /* the peer's limit */
  uint64_t streams_owed; /* delivered streams not yet returned */
  uint64_t rstreams_max; /* this side's limit */
  rstream_t *rs;         /* open remote streams (rs_cap allocated) */
  int nrs, rs_cap;
  uint8_t tx_full[2]; /* a tx ring's wait for a kick: TX_FIT, TX_UNREAD */
  /* Single copy: the peer reads this side's buffers (it said so), this
   * side reads the peer's (its probe said so); the peer's pid; bytes at or
   * above which the payload goes as descriptors (0: never). */
  bool peer_reads, reads_peer;
  uint32_t peer_pid;
  uint64_t cma_min;
  uint8_t *bounce; /* CHUNK_BYTES for descriptors with nowhere to land */
  /* Descriptor bytes read (or dropped) not yet acknowledged, per stream. */
  struct {
    int64_t sid;
    uint64_t n;
  } * acks;
  int nacks;
} nexar__shm_t;

#define S(l) ((nexar__shm_t *)(l))
/* Streams with descriptor bytes to acknowledge, at most (drain stops
 * reading while that many wait). */
#define ACKS_MAX(s) (2 * (s)->rstreams_max)

/* shm_setup.c */
void nexar__shm_fail(nexar__link_t *l, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void nexar__shm_kick(nexar__shm_t *s); /* writes the peer's eventfd */
int nexar__shm_watch(nexar__ep_t *ep, int fd, bool add);
/* What a descriptor of the set ep->shm_sfd is: the listener (s NULL), a
 * link's socket, or the eventfd its peer kicks (efd_mine). */
enum { W_SOCK = 0, W_KICK = 1 };
/* Adds or removes |fd| in the set ep->shm_sfd. */
int nexar__shm_watch_fd(nexar__ep_t *ep, int fd, nexar__shm_t *s, int what,
                        bool add);
/* Reads every descriptor of the set that has something, with one
 * epoll_wait rather than a system call per link: new connections,
 * rendezvous messages, closes and ends, kicks. The next sweep is due
 * SOCK_CHECK_NS later; ep->shm_kicks asks for one sooner. */
void nexar__shm_sweep(nexar__ep_t *ep, uint64_t now);
/* Puts the HELLOs that came before the roster back in the set (once the
 * roster is known); the pass that follows sweeps them. */
void nexar__shm_release_held(nexar__ep_t *ep);
uint64_t nexar__shm_window(const nexar__ep_t *ep); /* a new stream's */
int nexar__shm_dial(nexar__ep_t *ep, const nexar__dial_t *d,
                    nexar__link_t **out);
void nexar__shm_on_hello(nexar__shm_t *s);   /* acceptor: the HELLO */
void nexar__shm_on_welcome(nexar__shm_t *s); /* dialer: the answer */
void nexar__shm_check_sock(nexar__shm_t *s); /* a close, or the end */
void nexar__shm_accept_new(nexar__ep_t *ep);
void nexar__shm_send_close(nexar__link_t *l);
/* shm.c: the polled links (ep->shm_poll). Reserve before a link is made
 * (room for ep->shm_nlinks + 1; NEXAR_ERR_NOMEM), then add never fails. */
int nexar__shm_poll_reserve(nexar__ep_t *ep);
void nexar__shm_poll_add(nexar__shm_t *s);
void nexar__shm_poll_forget(nexar__shm_t *s);
void nexar__shm_unpark(nexar__shm_t *s); /* its kick came: polled again */
/* shm.c: reads the link's records (bounded); true when more wait. */
bool nexar__shm_drain(nexar__shm_t *s);
/* Ended streams go back to the peer in batches (put_credit). */
static inline uint64_t nexar__shm_stream_batch(const nexar__shm_t *s) {
  uint64_t batch = s->rstreams_max / 4;
  return batch ? batch : 1;
}
/* shm_tx.c: the sending half. */
void nexar__shm_flush(nexar__link_t *l); /* tp->flush */
bool nexar__shm_send_now(nexar__link_t *l, int lane, const nexar__hdr_t *h,
                         const uint8_t *hdr, const uint8_t *data,
                         uint64_t len); /* tp->send_now */
/* Why a tx ring waits for its consumer's kick (tx_full, 0: it does not). */
enum { TX_FIT = 1, TX_UNREAD = 2 };
/* Whether a ring that waits (tx_full) has what it waits for now. */
bool nexar__shm_tx_room(nexar__shm_t *s);
/* Before the engine blocks: the waiting flags of the rings that wait go up
 * again; false (and a write wanted) when the room came meanwhile. */
bool nexar__shm_tx_arm(nexar__shm_t *s);

#endif
