/*
 * Building blocks of the same-host shared-memory transport: a segment of
 * two single-producer/single-consumer rings (shm_ring.c) and the operating
 * system pieces around it (shm_os.c): abstract Unix sockets, descriptor
 * passing with the sender's credentials, cross-memory attach and pidfds.
 * Plain C over descriptors and memory; nothing here knows about engines,
 * peers or matching, and nothing blocks, allocates or aborts.
 *
 * Results are 0 (or a count) on success, a negative NEXAR_ERR_* code, or
 * NEXAR__SHM_AGAIN: "not now" (ring full, socket would block), which never
 * leaves the transport.
 *
 * ---- Segment layout (all offsets in bytes, little-endian host order)
 *
 *   0       header: u64 magic, u32 version, u32 header bytes (4096),
 *           u64 ring bytes (a power of two), u64 total bytes, u64 stamp
 *           key (odd; random, not a secret)
 *   256     ring 0 control: producer line (a word unused since version 4,
 *           waiting, heartbeat count), consumer line (tail), consumer
 *           flag line (sleeping), each 128 bytes so that what one side
 *           writes shares no pair of cache lines with what the other side
 *           reads
 *   640     ring 1 control, the same
 *   4096    ring 0 data (ring bytes), then ring 1 data (ring bytes)
 *
 * The creator produces into ring 0 and consumes ring 1; the attacher the
 * reverse. The segment is an anonymous memfd sealed against shrinking and
 * growing (F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL), so a peer cannot
 * truncate it under a reader (SIGBUS); it is passed over a Unix socket,
 * never named in /dev/shm.
 *
 * ---- Ring
 *
 * head and tail are byte positions that only grow (u64, never wrap in
 * practice), each kept by its side. A record is a 32-byte header (u64
 * stamp, u32 payload length, u16 type, u16 flags, u64 a, u64 b) followed
 * by its payload, padded to 64 bytes, and never wraps: when it does not
 * fit before the end of the ring the producer fills the rest with a pad
 * record (type NEXAR__SHM_PAD) and starts again at offset 0. A record's
 * total size is at most half the ring (nexar__shm_ring_max_payload), so a
 * record always fits in an empty ring. The producer also pads to the end
 * (recycles) when a record would open a page past the ring's first four
 * records of its size (at least 16 KiB) while the consumer has released
 * everything, so traffic that the consumer keeps up with stays in a few
 * pages that both processes have mapped and cached, and a stream still
 * has room for four records before the pad. A first lap through the whole
 * ring costs a page fault per page on each side, and on a paravirtualized
 * host a fault costs tens of microseconds. Each side maps pages before it
 * first writes or reads them, in one system call for many
 * (MADV_POPULATE_WRITE: about 1-2 us a page here, against 15 for a
 * fault): the first 16 KiB and a page, then 256 KiB at a time, so a ring
 * costs the memory it has carried and no more.
 *
 * The producer publishes a record by a release store of its stamp, the
 * record's position XOR the segment's stamp key, after everything else of
 * it; the consumer polls the stamp of the record at its own tail (no
 * shared head: a record of up to 32 payload bytes is one cache line that
 * moves once from the producer's CPU to the consumer's). Stale bytes (an
 * earlier lap's record, or payload) match the expected stamp only by a
 * 2^-64 chance. The consumer releases records by a release store of tail,
 * lazily: when it has caught up (a peek finds nothing), after a quarter of
 * the ring, and before it kicks or sleeps (need_kick_space,
 * consumer_sleep); the producer reads that tail only when the room it last
 * saw runs short.
 *
 * Everything the consumer reads from the segment is untrusted (the other
 * process may be hostile or dying): the consumer keeps its own tail,
 * copies each record header out of shared memory before it looks at it
 * (no double fetch: the copy's stamp is checked again) and checks that the
 * record lies within the ring and its payload within the largest. A failed
 * check gives NEXAR_ERR_PROTO, and every later call on that ring too. The
 * payload stays in shared memory: the peer can still change it while it
 * is read, so the caller copies it before it trusts its content. The
 * producer likewise checks the tail it reads (never ahead of head, never
 * more than the ring behind).
 *
 * ---- Wakeups (Dekker-style: a flag, a seq_cst fence, a re-check)
 *
 * A consumer that found its ring empty for a while calls
 * nexar__shm_ring_consumer_sleep(): it sets the consumer's "sleeping" flag,
 * issues a seq_cst fence and looks at the stamp at its tail again. 1 means
 * still empty: it may now block (epoll on its eventfd); 0 means data arrived
 * (flag taken back): do not block. The producer, after publishing records,
 * calls nexar__shm_ring_need_kick(): a seq_cst fence, then an atomic exchange
 * of the flag with 0; true means the consumer is (about to be) asleep and the
 * producer must write the consumer's eventfd once. Because both sides store
 * then fence then load, at least one of them sees the other's store: either
 * the consumer sees the new stamp or the producer sees the flag, so a wakeup
 * is never lost. A kick may be spurious (the consumer saw the data itself);
 * the consumer just drains its eventfd.
 *
 * A producer facing a full ring mirrors this with the producer's "waiting"
 * flag: nexar__shm_ring_producer_sleep(ring, need) then block when it
 * returns 1; the consumer calls nexar__shm_ring_need_kick_space() after
 * releasing records and writes the producer's eventfd when it says so. The
 * consumer kicks at any release, which may leave the producer still short:
 * the producer raises the flag again before each block
 * (nexar__shm_ring_producer_wait, then its own check).
 *
 * Thread-safety: one thread produces and one consumes on each ring (per
 * process: one producer on its tx ring, one consumer on its rx ring).
 */
#ifndef NEXAR_SHM_RING_H
#define NEXAR_SHM_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "nexar.h"

/* "Not now": ring full or socket would block. Distinct from every
 * NEXAR_ERR_* code; never returned by a public function. */
#define NEXAR__SHM_AGAIN (-1000)

#define NEXAR__SHM_MAGIC 0x474553534d48534eull /* "NSHMSSEG" */
/* 2: the heartbeat counter; 3: the flag line; 4: stamped records (no
 * shared head), the 32-byte record header and the small-message record
 * (ranks of one host must run the same build) */
#define NEXAR__SHM_VERSION 4u
#define NEXAR__SHM_HDR_BYTES 4096u
#define NEXAR__SHM_ALIGN 64u
#define NEXAR__SHM_REC_HDR 32u /* record header bytes */
#define NEXAR__SHM_RING_MIN 4096u
#define NEXAR__SHM_RING_MAX (1ull << 30)
#define NEXAR__SHM_PAD 0u /* record type reserved for the wrap pad */

/* One record as the consumer sees it: the header copied out of shared
 * memory and validated, and a pointer to the payload in the segment. */
typedef struct nexar__shm_rec {
  uint32_t len;        /* payload bytes */
  uint16_t type;       /* 1..65535 (opaque to the ring) */
  uint16_t flags;      /* opaque */
  uint64_t a, b;       /* opaque (stream id, offset, ...) */
  const void *payload; /* len bytes in the segment (still shared) */
} nexar__shm_rec_t;

/* One direction of a segment, as this process uses it. All state the
 * checks rely on is local; only head/tail/flags are shared. */
typedef struct nexar__shm_ring {
  struct nexar__shm_ctl *ctl; /* shared counters */
  uint8_t *data;              /* ring bytes of shared data */
  uint64_t cap;               /* ring bytes (power of two), local copy */
  uint64_t key;               /* stamp key (segment header), local copy */
  uint64_t head;              /* producer: bytes published */
  uint64_t tail_seen;         /* producer: the consumer's tail last read */
  uint64_t resv_pad;          /* producer: pad before the reservation */
  uint64_t resv_off;          /* producer: the reserved record's offset */
  uint32_t resv_len;          /* producer: payload bytes reserved */
  int resv_open;              /* producer: a reservation is open */
  uint64_t beats;             /* producer: heartbeats written */
  uint64_t pad_end;           /* producer: stream position past the last pad */
  uint64_t pad_bytes;         /* producer: that pad's bytes */
  uint64_t tail;              /* consumer: bytes released */
  uint64_t tail_pub;          /* consumer: the tail last published */
  int tail_fresh;             /* consumer: published since the last look
                                 at the producer's waiting flag */
  uint64_t beat_seen;         /* consumer: the peer's count last seen */
  uint64_t peeked;            /* consumer: bytes of the peeked record */
  nexar__shm_rec_t cur;       /* consumer: the peeked record */
  int broken;                 /* a NEXAR_ERR_PROTO was returned */
  uint64_t warm_to;           /* ring bytes [0, warm_to) are mapped here */
} nexar__shm_ring_t;

typedef struct nexar__shm_seg {
  int fd;               /* the memfd (owned; -1 after close) */
  void *base;           /* the mapping */
  size_t map_bytes;     /* its length */
  nexar__shm_ring_t tx; /* the ring this process produces into */
  nexar__shm_ring_t rx; /* the ring this process consumes */
} nexar__shm_seg_t;

/* ---- Segment (shm_ring.c) */

/*
 * Creates a segment with two rings of |ring_bytes| each (a power of two,
 * NEXAR__SHM_RING_MIN..NEXAR__SHM_RING_MAX): a sealed memfd mapped shared,
 * header written, the creator's tx = ring 0 and rx = ring 1. Returns 0;
 * NEXAR_ERR_INVALID_ARG for a bad size or NULL |seg|; NEXAR_ERR_SYS when
 * memfd_create, ftruncate, sealing or mmap fails (nothing is left open).
 */
int nexar__shm_seg_create(size_t ring_bytes, nexar__shm_seg_t *seg);

/*
 * Maps a segment received from a peer and takes ownership of |fd| on
 * success (on failure the caller still owns it). Checks before anything is
 * trusted: a regular file of at most the largest segment's size, seals
 * that include F_SEAL_SHRINK and F_SEAL_GROW, then the header read once
 * (magic, version, header bytes, ring size a power of two in range, total
 * = 4096 + 2 * ring bytes = the file size). The attacher's tx = ring 1 and
 * rx = ring 0. Returns 0; NEXAR_ERR_INVALID_ARG for fd < 0 or NULL |seg|;
 * NEXAR_ERR_PROTO when the file, its seals or its header are wrong;
 * NEXAR_ERR_SYS when fstat or mmap fails.
 */
int nexar__shm_seg_attach(int fd, nexar__shm_seg_t *seg);

/*
 * Several segments in one memfd (one descriptor, one mapping; a link's
 * bulk and priority rings): |n| (1..NEXAR__SHM_SEGS_MAX) segments back to
 * back, each laid out as above with rings of |rings[i]| bytes. The first
 * owns the descriptor and the whole mapping (close it last, or alone: the
 * others own nothing). Results as nexar__shm_seg_create.
 */
#define NEXAR__SHM_SEGS_MAX 4
int nexar__shm_segs_create(const size_t *rings, int n, nexar__shm_seg_t *segs);

/*
 * Maps |n| segments that a peer created with nexar__shm_segs_create, with
 * nexar__shm_seg_attach's checks for each header in turn (every size
 * checked against what is left of the file, which they must fill exactly).
 * Takes ownership of |fd| on success (held by segs[0]). Results as
 * nexar__shm_seg_attach.
 */
int nexar__shm_segs_attach(int fd, int n, nexar__shm_seg_t *segs);

/* Unmaps and closes (idempotent; a zeroed or closed segment is fine). */
void nexar__shm_seg_close(nexar__shm_seg_t *seg);

/* ---- Producer (one thread) */

/* Largest payload one record can carry: ring bytes / 2 - 32. */
uint32_t nexar__shm_ring_max_payload(const nexar__shm_ring_t *r);

/*
 * Appends one record of type |type| (1..65535) whose payload is the
 * concatenation of |niov| iovecs (niov >= 0, total <= max payload) and
 * publishes it. Does not block. Returns 0; NEXAR__SHM_AGAIN when the ring
 * has no room now (nothing written); NEXAR_ERR_INVALID_ARG for type 0, a
 * payload too long or bad iovecs; NEXAR_ERR_INVALID_USAGE with a
 * reservation open; NEXAR_ERR_PROTO when the consumer's tail is corrupt.
 * Call nexar__shm_ring_need_kick() afterwards (once per batch).
 */
int nexar__shm_ring_put(nexar__shm_ring_t *r, uint16_t type, uint16_t flags,
                        uint64_t a, uint64_t b, const struct iovec *iov,
                        int niov);

/*
 * Reserves room for a record of up to |len| payload bytes and returns in
 * |*payload| where to write it in place (writing a wrap pad first when
 * needed, not yet visible to the consumer). Results as put. Exactly one
 * reservation may be open; nexar__shm_ring_commit publishes it.
 */
int nexar__shm_ring_reserve(nexar__shm_ring_t *r, uint32_t len, void **payload);

/*
 * Publishes the open reservation as a record of |len| (<= the reserved
 * length) payload bytes with the given header fields. Returns 0;
 * NEXAR_ERR_INVALID_USAGE without a reservation; NEXAR_ERR_INVALID_ARG for
 * type 0 or |len| above the reservation (the reservation stays open).
 */
int nexar__shm_ring_commit(nexar__shm_ring_t *r, uint16_t type, uint16_t flags,
                           uint64_t a, uint64_t b, uint32_t len);

/* Bytes the producer could append now (records take their payload plus 32,
 * rounded up to 64, and a wrap may cost the rest of the ring); 0 when the
 * tail is corrupt. */
uint64_t nexar__shm_ring_free(nexar__shm_ring_t *r);

/* Whether at least |bytes| are free (as nexar__shm_ring_free, but the
 * consumer's tail is read only when the one last read leaves less). */
bool nexar__shm_ring_has_free(nexar__shm_ring_t *r, uint64_t bytes);

/* Whether records the consumer has yet to read fill at most |bytes| of the
 * ring. A pad it has yet to pass is not counted: its room opens as soon as
 * the consumer reaches it, and after a recycle (shm_ring.c) nearly the
 * whole ring is such a pad. The consumer's tail is read only when the one
 * last read says no; false when the tail is corrupt. */
bool nexar__shm_ring_unread_within(nexar__shm_ring_t *r, uint64_t bytes);

/* After put/commit: true when the consumer sleeps and its eventfd must be
 * written (once). See "Wakeups" above. */
bool nexar__shm_ring_need_kick(nexar__shm_ring_t *r);

/* A heartbeat without a record (no kick, no wake-up): the producer bumps
 * a counter beside head, which the consumer looks at now and then
 * (nexar__shm_ring_beat_seen). The peer may write anything there: a
 * change says only that its process ran, as a heartbeat record would. */
void nexar__shm_ring_beat(nexar__shm_ring_t *r);

/* Consumer: true when the producer's heartbeat count changed since the
 * last call (it ran meanwhile). */
bool nexar__shm_ring_beat_seen(nexar__shm_ring_t *r);

/* Before blocking on a full ring: 1 when there is still no room for a
 * |len|-byte payload (block now; the consumer will kick), 0 when room
 * appeared, the ring is broken or |len| is above the largest payload (do
 * not block: put says why). */
int nexar__shm_ring_producer_sleep(nexar__shm_ring_t *r, uint32_t len);

/* Before blocking while the producer's own rule holds it back (not a
 * record that does not fit): raises the "waiting" flag and fences; the
 * caller then looks at its rule again, and that look sees every release
 * the consumer made before it could see the flag. A kick takes the flag
 * even when what the consumer released is still short of what the
 * producer waits for, so a producer raises it again before every block. */
void nexar__shm_ring_producer_wait(nexar__shm_ring_t *r);

/* ---- Consumer (one thread) */

/*
 * Looks at the next record without releasing it (pads are skipped).
 * Returns 1 with |*out| filled; 0 when the ring is empty; NEXAR_ERR_PROTO
 * when what the peer wrote is inconsistent (and for every later call).
 * Peeking again without pop returns the same record.
 */
int nexar__shm_ring_peek(nexar__shm_ring_t *r, nexar__shm_rec_t *out);

/* Releases the record returned by the last peek (no effect without one);
 * the producer sees it released once the tail is published (see "Ring"). */
void nexar__shm_ring_pop(nexar__shm_ring_t *r);

/* After a batch of pops: publishes the tail, then true when the producer
 * waits for room and its eventfd must be written (once). The flag is
 * looked at (after a seq_cst fence) only when a tail was published since
 * the last look: a producer that raised it later saw that tail. */
bool nexar__shm_ring_need_kick_space(nexar__shm_ring_t *r);

/* Before blocking on an empty ring: 1 when still empty (block now; the
 * producer will kick), 0 when data arrived (do not block). */
int nexar__shm_ring_consumer_sleep(nexar__shm_ring_t *r);

/* ---- Operating-system pieces (shm_os.c) */

/* The credentials of a socket's peer (SO_PEERCRED: taken when it connected
 * or when the pair was created). */
typedef struct nexar__shm_cred {
  pid_t pid;
  uid_t uid;
  gid_t gid;
} nexar__shm_cred_t;

#define NEXAR__SHM_NONCE_BYTES 16u
#define NEXAR__SHM_MAX_FDS 8 /* descriptors per message */

/*
 * A non-blocking, close-on-exec AF_UNIX SOCK_SEQPACKET listener bound to
 * the abstract name "nexar-shm-<32 hex digits of nonce>" (per network
 * namespace, nothing in the file system). The nonce must be secret and
 * random (learned over the authenticated channel); anyone in the namespace
 * who learns it can still connect or bind it first, so both sides check
 * the other's credentials (nexar__shm_peer_cred, nexar__shm_recv_fds).
 * Returns 0 with |*fd|; NEXAR_ERR_INVALID_ARG for NULL arguments;
 * NEXAR_ERR_TRANSPORT when the name is taken; NEXAR_ERR_SYS otherwise.
 */
int nexar__shm_listen(const uint8_t nonce[16], int *fd);

/* Accepts one connection (non-blocking, close-on-exec). Returns 0 with
 * |*fd|; NEXAR__SHM_AGAIN when none is pending; NEXAR_ERR_SYS. */
int nexar__shm_accept(int lfd, int *fd);

/*
 * Connects (non-blocking, close-on-exec) to the listener of |nonce|.
 * Returns 0 with |*fd| (connected: Unix sockets connect at once);
 * NEXAR__SHM_AGAIN when the listener's backlog is full;
 * NEXAR_ERR_PEER_FAILED when nobody listens; NEXAR_ERR_SYS otherwise.
 */
int nexar__shm_connect(const uint8_t nonce[16], int *fd);

/* SO_PEERCRED of a connected Unix socket. Returns 0; NEXAR_ERR_SYS. */
int nexar__shm_peer_cred(int sock, nexar__shm_cred_t *cred);

/*
 * Sends one message of |len| bytes (1..65536) with |nfds| descriptors
 * (0..NEXAR__SHM_MAX_FDS) attached by SCM_RIGHTS. Returns 0;
 * NEXAR__SHM_AGAIN when the socket would block (nothing sent);
 * NEXAR_ERR_PEER_FAILED when the peer closed; NEXAR_ERR_INVALID_ARG;
 * NEXAR_ERR_SYS.
 */
int nexar__shm_send_fds(int sock, const int *fds, int nfds, const void *msg,
                        size_t len);

/*
 * Receives one message into |msg| (|cap| bytes), at most |max_fds|
 * (<= NEXAR__SHM_MAX_FDS) descriptors into |fds| (close-on-exec) and the
 * sender's credentials (SO_PEERCRED) into |cred|, to be checked against
 * the roster. Returns the message length (>= 0) with *nfds set; on any
 * error no descriptor is left open: NEXAR__SHM_AGAIN (nothing pending),
 * NEXAR_ERR_PEER_FAILED (peer closed), NEXAR_ERR_TRUNCATE (message longer
 * than |cap|), NEXAR_ERR_PROTO (more descriptors than |max_fds|, control
 * data truncated, or anything but SCM_RIGHTS), NEXAR_ERR_SYS.
 */
int nexar__shm_recv_fds(int sock, int *fds, int max_fds, int *nfds, void *msg,
                        size_t cap, nexar__shm_cred_t *cred);

/*
 * Copies |len| bytes at |remote_addr| in process |pid| into |dst| with
 * process_vm_readv, looping over partial reads (bounded: each pass must
 * make progress). Returns 0; NEXAR_ERR_UNSUPPORTED when not permitted
 * (EPERM: use the copy through the ring instead); NEXAR_ERR_PEER_FAILED
 * when the process is gone (ESRCH); NEXAR_ERR_PROTO when the remote range
 * is not mapped (EFAULT: a bad address from the peer);
 * NEXAR_ERR_INVALID_ARG; NEXAR_ERR_SYS.
 */
int nexar__shm_cma_read(pid_t pid, void *dst, uint64_t remote_addr, size_t len);

/* Whether this process may read |pid|'s memory: 0 when permitted,
 * otherwise cma_read's codes (UNSUPPORTED, PEER_FAILED, SYS). Reads one
 * byte at address 0, which the kernel checks for permission first. */
int nexar__shm_cma_probe(pid_t pid);

/* Whether a thread of |pid| is running or waiting on a run queue (state R
 * in /proc/PID/task/TID/stat; at most NEXAR__SHM_TASKS_MAX threads are
 * looked at). False when none is, or the process is gone or unreadable. */
#define NEXAR__SHM_TASKS_MAX 64
bool nexar__shm_pid_runnable(pid_t pid);

/* A pidfd for |pid| (close-on-exec; readable once the process exits, for
 * epoll), or -1 with errno set when pidfd_open is unsupported or fails. */
int nexar__shm_pidfd_open(pid_t pid);

#endif /* NEXAR_SHM_RING_H */
