/*
 * The shared-memory segment and its two single-producer/single-consumer
 * rings: layout, checks and the wakeup protocol are described in
 * shm_ring.h. The consumer never trusts the segment; see "Ring" there.
 */
#include "transport/shm_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The shared counters of one ring: the producer's pair of cache lines, the
 * consumer's tail and the consumer's sleep flag (128 bytes each, against
 * adjacent-line prefetch). The flag has lines of its own: the producer
 * reads it after every record it writes, and the consumer writes its tail
 * after every record it reads, so together they would move a line between
 * the two CPUs per record. */
struct nexar__shm_ctl {
  uint64_t unused;          /* was head (version 3): records carry stamps */
  _Atomic uint32_t waiting; /* producer: blocked on a full ring */
  uint32_t pad;
  _Atomic uint64_t beat; /* producer: heartbeats (nexar__shm_ring_beat) */
  uint8_t pad0[128 - 24];
  _Atomic uint64_t tail; /* consumer: bytes released */
  uint8_t pad1[128 - 8];
  _Atomic uint32_t sleeping; /* consumer: blocked on an empty ring */
  uint8_t pad2[128 - 4];
};

/* The segment header (offset 0). */
struct shm_hdr {
  uint64_t magic;
  uint32_t version;
  uint32_t hdr_bytes;
  uint64_t ring_bytes;
  uint64_t total_bytes;
  uint64_t stamp_key; /* nonzero: records' stamps are position ^ key */
};

/* A record header as stored in the ring: the stamp first (the word the
 * consumer polls, stored last with release), then the fields. */
struct shm_rec_hdr {
  uint64_t stamp;
  uint32_t len;
  uint16_t type;
  uint16_t flags;
  uint64_t a;
  uint64_t b;
};

#define CTL_OFFSET 256u

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "shared counters must be lock-free");
_Static_assert(sizeof(struct nexar__shm_ctl) == 384, "ctl layout");
_Static_assert(sizeof(struct shm_rec_hdr) == NEXAR__SHM_REC_HDR, "rec hdr");
_Static_assert(CTL_OFFSET + 2 * sizeof(struct nexar__shm_ctl) <=
                   NEXAR__SHM_HDR_BYTES,
               "header page");

static uint64_t rec_bytes(uint64_t len) {
  return (NEXAR__SHM_REC_HDR + len + NEXAR__SHM_ALIGN - 1) &
         ~(uint64_t)(NEXAR__SHM_ALIGN - 1);
}

static int ring_size_ok(uint64_t n) {
  return n >= NEXAR__SHM_RING_MIN && n <= NEXAR__SHM_RING_MAX &&
         (n & (n - 1)) == 0;
}

static void ring_init(nexar__shm_ring_t *r, uint8_t *base, uint64_t ring,
                      uint64_t key, int idx) {
  memset(r, 0, sizeof *r);
  r->key = key;
  r->ctl = (struct nexar__shm_ctl *)(base + CTL_OFFSET +
                                     idx * sizeof(struct nexar__shm_ctl));
  r->data = base + NEXAR__SHM_HDR_BYTES + idx * ring;
  r->cap = ring;
}

static void seg_init(nexar__shm_seg_t *seg, int fd, void *base, size_t bytes,
                     uint64_t ring, uint64_t key, int creator) {
  seg->fd = fd;
  seg->base = base;
  seg->map_bytes = bytes;
  ring_init(&seg->tx, base, ring, key, creator ? 0 : 1);
  ring_init(&seg->rx, base, ring, key, creator ? 1 : 0);
}

/* A random nonzero stamp key (not a secret: the peer reads it; it makes
 * stale bytes read as a record of this lap only by a 2^-64 chance). */
static uint64_t new_key(void) {
  uint64_t k = 0;
  if (getrandom(&k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    k = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^
        (uint64_t)(uintptr_t)&k ^ ((uint64_t)getpid() << 17);
  }
  return k | 1;
}

static uint64_t seg_bytes(uint64_t ring) {
  return NEXAR__SHM_HDR_BYTES + 2 * ring;
}

int nexar__shm_segs_create(const size_t *rings, int n, nexar__shm_seg_t *segs) {
  if (!segs || !rings || n < 1 || n > NEXAR__SHM_SEGS_MAX)
    return NEXAR_ERR_INVALID_ARG;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    memset(&segs[i], 0, sizeof segs[i]);
    segs[i].fd = -1;
    if (!ring_size_ok(rings[i])) return NEXAR_ERR_INVALID_ARG;
    total += seg_bytes(rings[i]);
  }
  void *base = MAP_FAILED;
  int fd = memfd_create("nexar-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) goto fail;
  if (ftruncate(fd, (off_t)total) != 0) goto fail;
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    goto fail;
  base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) goto fail;
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    struct shm_hdr h = {.magic = NEXAR__SHM_MAGIC,
                        .version = NEXAR__SHM_VERSION,
                        .hdr_bytes = NEXAR__SHM_HDR_BYTES,
                        .ring_bytes = rings[i],
                        .total_bytes = seg_bytes(rings[i]),
                        .stamp_key = new_key()};
    memcpy((uint8_t *)base + off, &h, sizeof h);
    /* The first segment owns the descriptor and the whole mapping. */
    seg_init(&segs[i], i ? -1 : fd, (uint8_t *)base + off, i ? 0 : total,
             rings[i], h.stamp_key, 1);
    off += seg_bytes(rings[i]);
  }
  return 0;
fail:
  if (fd >= 0) close(fd);
  return NEXAR_ERR_SYS;
}

int nexar__shm_seg_create(size_t ring_bytes, nexar__shm_seg_t *seg) {
  return nexar__shm_segs_create(&ring_bytes, 1, seg);
}

int nexar__shm_segs_attach(int fd, int n, nexar__shm_seg_t *segs) {
  if (!segs || n < 1 || n > NEXAR__SHM_SEGS_MAX) return NEXAR_ERR_INVALID_ARG;
  for (int i = 0; i < n; i++) {
    memset(&segs[i], 0, sizeof segs[i]);
    segs[i].fd = -1;
  }
  if (fd < 0) return NEXAR_ERR_INVALID_ARG;
  const uint64_t min = n * seg_bytes(NEXAR__SHM_RING_MIN);
  const uint64_t max = n * seg_bytes(NEXAR__SHM_RING_MAX);
  struct stat st;
  if (fstat(fd, &st) != 0) return NEXAR_ERR_SYS;
  if (!S_ISREG(st.st_mode) || st.st_size < (off_t)min ||
      st.st_size > (off_t)max)
    return NEXAR_ERR_PROTO;
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return errno == EINVAL ? NEXAR_ERR_PROTO : NEXAR_ERR_SYS;
  int bad = F_SEAL_WRITE;
#ifdef F_SEAL_FUTURE_WRITE
  bad |= F_SEAL_FUTURE_WRITE;
#endif
  if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
          (F_SEAL_SHRINK | F_SEAL_GROW) ||
      (seals & bad))
    return NEXAR_ERR_PROTO;
  size_t bytes = (size_t)st.st_size;
  void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return NEXAR_ERR_SYS;
  /* Each header read once into a copy, every size checked against what is
   * left of the file, and the segments must fill it exactly. */
  uint64_t off = 0, ring[NEXAR__SHM_SEGS_MAX], key[NEXAR__SHM_SEGS_MAX];
  for (int i = 0; i < n; i++) {
    struct shm_hdr h;
    if (bytes - off < NEXAR__SHM_HDR_BYTES) goto bad;
    memcpy(&h, (uint8_t *)base + off, sizeof h);
    atomic_signal_fence(memory_order_seq_cst); /* checks use the copy only */
    if (h.magic != NEXAR__SHM_MAGIC || h.version != NEXAR__SHM_VERSION ||
        h.hdr_bytes != NEXAR__SHM_HDR_BYTES || !ring_size_ok(h.ring_bytes) ||
        h.total_bytes != seg_bytes(h.ring_bytes) ||
        h.total_bytes > bytes - off || !(h.stamp_key & 1))
      goto bad;
    ring[i] = h.ring_bytes;
    key[i] = h.stamp_key;
    off += h.total_bytes;
  }
  if (off != bytes) goto bad;
  off = 0;
  for (int i = 0; i < n; i++) {
    seg_init(&segs[i], i ? -1 : fd, (uint8_t *)base + off, i ? 0 : bytes,
             ring[i], key[i], 0);
    off += seg_bytes(ring[i]);
  }
  return 0;
bad:
  munmap(base, bytes);
  return NEXAR_ERR_PROTO;
}

int nexar__shm_seg_attach(int fd, nexar__shm_seg_t *seg) {
  return nexar__shm_segs_attach(fd, 1, seg);
}

void nexar__shm_seg_close(nexar__shm_seg_t *seg) {
  if (!seg) return;
  if (seg->base && seg->map_bytes) munmap(seg->base, seg->map_bytes);
  if (seg->fd >= 0) close(seg->fd);
  memset(seg, 0, sizeof *seg);
  seg->fd = -1;
}

/* ---- Producer */

uint32_t nexar__shm_ring_max_payload(const nexar__shm_ring_t *r) {
  return (uint32_t)(r->cap / 2 - NEXAR__SHM_REC_HDR);
}

static int ring_fail(nexar__shm_ring_t *r) {
  r->broken = 1;
  return NEXAR_ERR_PROTO;
}

/* Bytes not in use: from the consumer's tail last read when that leaves
 * at least |want| bytes (the tail only grows, so the room it gives is
 * there), else from the tail read once now; -1 when that tail is
 * impossible (ahead of head or more than the ring behind). Reading the
 * tail only when the room runs short leaves the consumer's line on its
 * CPU. */
static int64_t prod_free(nexar__shm_ring_t *r, uint64_t want) {
  uint64_t used = r->head - r->tail_seen;
  if (r->cap - used >= want) return (int64_t)(r->cap - used);
  uint64_t t = atomic_load_explicit(&r->ctl->tail, memory_order_acquire);
  used = r->head - t;
  if (used > r->cap) return -1;
  r->tail_seen = t;
  return (int64_t)(r->cap - used);
}

/* Whether a record of |rec| bytes at ring offset |off| should go to the
 * start of the ring instead (a pad to the end first): when it would open a
 * page beyond the first RECYCLE_SPAN records of its size (at least
 * RECYCLE_BYTES) while the consumer has released everything. Traffic that
 * the consumer keeps up with then cycles through a few pages that both
 * processes have mapped and cached rather than through the whole ring,
 * whose first lap costs a page fault per page on each side: about 0.8
 * faults per 64 B allreduce at np 4 before, and 150-230 us per 16 KiB
 * allreduce at np 2 for its first 250 calls (against 4-9 after the lap).
 * The span is in records, not bytes: until the consumer passes the pad
 * the producer has room only up to the offset it recycled from, so it
 * must hold several records (recycling at any offset a record fits before
 * left a stream of 256 KiB chunks one chunk in flight: 64 MiB p2p fell
 * from 13 to 7-9 GB/s). The tail is read only when a page would be opened;
 * a tail that is not head (behind, or corrupt: prod_free judges it) leaves
 * the record where it is. */
#define RECYCLE_BYTES (16u << 10) /* also the room a burst finds after one */
#define RECYCLE_SPAN 4u
#define PAGE_BYTES 4096u
static bool recycle(nexar__shm_ring_t *r, uint64_t off, uint64_t rec) {
  uint64_t keep = RECYCLE_SPAN * rec;
  if (keep < RECYCLE_BYTES) keep = RECYCLE_BYTES;
  if (off < keep || ((off - 1) ^ (off + rec - 1)) < PAGE_BYTES) return false;
  uint64_t t = atomic_load_explicit(&r->ctl->tail, memory_order_acquire);
  if (t != r->head) return false;
  r->tail_seen = t;
  return true;
}

/* Maps ring bytes [0, |end|) in this process before they are first
 * written or read, in one system call for many pages instead of a page
 * fault each (MADV_POPULATE_WRITE: about 1 us a page here, against 15 for
 * a fault; this paravirtualized VM still charges about 7 us at a page's
 * first touch, so few pages, which recycling keeps to, matter more than
 * this). The first call maps what recycling keeps to (the first
 * RECYCLE_BYTES and a page), so that small messages touch nothing more;
 * later ones map ahead by RECYCLE_SPAN records of the size |rec| that goes
 * there, in whole pages and at most WARM_CHUNK: the first lap of larger
 * records (a 64 KiB allreduce's, a bulk transfer's chunks) takes one call
 * per WARM_CHUNK, and a small record that could not recycle maps a page,
 * not a chunk (mapping 256 KiB for one 192-byte record stalled a 64 B
 * allreduce at np 4 for 0.2-0.5 ms). Called only for a record that is
 * written or read, never for a room check. Best effort: a kernel before
 * 5.14 refuses it, and the pages then fault as they are touched. Pages
 * once mapped stay mapped, so a ring costs the memory it has carried and
 * no more. */
#define WARM_FIRST (RECYCLE_BYTES + PAGE_BYTES)
#define WARM_CHUNK (256u << 10)
static void warm(nexar__shm_ring_t *r, uint64_t end, uint64_t rec) {
  if (end <= r->warm_to) return;
  uint64_t to;
  if (r->warm_to == 0 && end <= WARM_FIRST) {
    to = WARM_FIRST;
  } else {
    uint64_t chunk = PAGE_BYTES;
    while (chunk < RECYCLE_SPAN * rec && chunk < WARM_CHUNK) chunk *= 2;
    to = (end + chunk - 1) & ~(uint64_t)(chunk - 1);
  }
  if (to > r->cap) to = r->cap;
  (void)madvise(r->data + r->warm_to, to - r->warm_to, MADV_POPULATE_WRITE);
  r->warm_to = to;
}

/* Room for a record of |len| payload bytes: 0 with the pad it needs first
 * (0 or the rest of the ring), NEXAR__SHM_AGAIN, or NEXAR_ERR_PROTO. */
static int prod_room(nexar__shm_ring_t *r, uint32_t len, uint64_t *pad) {
  uint64_t rec = rec_bytes(len);
  uint64_t off = r->head & (r->cap - 1);
  uint64_t to_end = r->cap - off;
  *pad = rec > to_end || recycle(r, off, rec) ? to_end : 0;
  int64_t avail = prod_free(r, *pad + rec);
  if (avail < 0) return ring_fail(r);
  return *pad + rec <= (uint64_t)avail ? 0 : NEXAR__SHM_AGAIN;
}

/* Writes a record header at |at| for stream position |pos|: the fields,
 * then the stamp with release, so that a consumer that sees the stamp sees
 * the header and everything written before it (the payload). */
static void write_hdr(nexar__shm_ring_t *r, uint8_t *at, uint64_t pos,
                      uint32_t len, uint16_t type, uint16_t flags, uint64_t a,
                      uint64_t b) {
  struct shm_rec_hdr h = {
      .stamp = 0, .len = len, .type = type, .flags = flags, .a = a, .b = b};
  memcpy(at + 8, (uint8_t *)&h + 8, sizeof h - 8);
  atomic_store_explicit((_Atomic uint64_t *)(void *)at, pos ^ r->key,
                        memory_order_release);
}

int nexar__shm_ring_reserve(nexar__shm_ring_t *r, uint32_t len,
                            void **payload) {
  if (r->broken) return NEXAR_ERR_PROTO;
  if (r->resv_open) return NEXAR_ERR_INVALID_USAGE;
  if (!payload || len > nexar__shm_ring_max_payload(r))
    return NEXAR_ERR_INVALID_ARG;
  uint64_t pad;
  int rc = prod_room(r, len, &pad);
  if (rc != 0) return rc;
  uint64_t off = r->head & (r->cap - 1);
  uint64_t rec = rec_bytes(len);
  if (pad) warm(r, off + NEXAR__SHM_REC_HDR, NEXAR__SHM_REC_HDR);
  warm(r, (pad ? 0 : off) + rec, rec);
  if (pad) {
    write_hdr(r, r->data + off, r->head, (uint32_t)(pad - NEXAR__SHM_REC_HDR),
              NEXAR__SHM_PAD, 0, 0, 0);
    r->pad_end = r->head + pad;
    r->pad_bytes = pad;
    off = 0;
  }
  r->resv_open = 1;
  r->resv_len = len;
  r->resv_pad = pad;
  r->resv_off = off;
  *payload = r->data + off + NEXAR__SHM_REC_HDR;
  return 0;
}

int nexar__shm_ring_commit(nexar__shm_ring_t *r, uint16_t type, uint16_t flags,
                           uint64_t a, uint64_t b, uint32_t len) {
  if (!r->resv_open) return NEXAR_ERR_INVALID_USAGE;
  if (type == NEXAR__SHM_PAD || len > r->resv_len) return NEXAR_ERR_INVALID_ARG;
  write_hdr(r, r->data + r->resv_off, r->head + r->resv_pad, len, type, flags,
            a, b);
  r->head += r->resv_pad + rec_bytes(len);
  r->resv_open = 0;
  return 0;
}

int nexar__shm_ring_put(nexar__shm_ring_t *r, uint16_t type, uint16_t flags,
                        uint64_t a, uint64_t b, const struct iovec *iov,
                        int niov) {
  if (type == NEXAR__SHM_PAD || niov < 0 || (niov > 0 && !iov))
    return NEXAR_ERR_INVALID_ARG;
  uint64_t len = 0;
  for (int i = 0; i < niov; i++) {
    if (!iov[i].iov_base && iov[i].iov_len) return NEXAR_ERR_INVALID_ARG;
    len += iov[i].iov_len;
    if (len > nexar__shm_ring_max_payload(r)) return NEXAR_ERR_INVALID_ARG;
  }
  void *p;
  int rc = nexar__shm_ring_reserve(r, (uint32_t)len, &p);
  if (rc != 0) return rc;
  uint8_t *w = p;
  for (int i = 0; i < niov; i++) {
    if (iov[i].iov_len) memcpy(w, iov[i].iov_base, iov[i].iov_len);
    w += iov[i].iov_len;
  }
  return nexar__shm_ring_commit(r, type, flags, a, b, (uint32_t)len);
}

uint64_t nexar__shm_ring_free(nexar__shm_ring_t *r) {
  int64_t avail = prod_free(r, r->cap);
  return avail < 0 ? 0 : (uint64_t)avail;
}

bool nexar__shm_ring_has_free(nexar__shm_ring_t *r, uint64_t bytes) {
  int64_t avail = prod_free(r, bytes);
  return avail >= 0 && (uint64_t)avail >= bytes;
}

/* Bytes of records between |tail| (one prod_free accepted) and the head:
 * the last pad is left out while |tail| is at or before its start (the
 * consumer jumps a whole pad, so a tail inside one is corrupt, and then it
 * is counted). */
static uint64_t unread(const nexar__shm_ring_t *r, uint64_t tail) {
  uint64_t used = r->head - tail;
  bool before_pad = r->pad_end <= r->head && tail <= r->pad_end - r->pad_bytes;
  return before_pad ? used - r->pad_bytes : used;
}

bool nexar__shm_ring_unread_within(nexar__shm_ring_t *r, uint64_t bytes) {
  if (unread(r, r->tail_seen) <= bytes) return true;
  if (prod_free(r, r->cap) < 0) return false; /* reads the tail */
  return unread(r, r->tail_seen) <= bytes;
}

/* The waker's half of the protocol: fence (orders the caller's counter
 * store before the flag's load), then take the flag if it is set. */
static bool take_flag(_Atomic uint32_t *flag) {
  atomic_thread_fence(memory_order_seq_cst);
  if (!atomic_load_explicit(flag, memory_order_relaxed)) return false;
  return atomic_exchange_explicit(flag, 0, memory_order_seq_cst) != 0;
}

/* The sleeper's half: raise the flag, fence, then re-check with |ready|;
 * 1: still nothing (sleep), 0: ready (flag taken back, do not sleep). */
static int raise_flag(_Atomic uint32_t *flag, nexar__shm_ring_t *r,
                      int (*ready)(nexar__shm_ring_t *, uint32_t),
                      uint32_t arg) {
  atomic_store_explicit(flag, 1, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst);
  if (!ready(r, arg)) return 1;
  atomic_store_explicit(flag, 0, memory_order_relaxed);
  return 0;
}

bool nexar__shm_ring_need_kick(nexar__shm_ring_t *r) {
  return take_flag(&r->ctl->sleeping);
}

static int has_room(nexar__shm_ring_t *r, uint32_t len) {
  uint64_t pad;
  if (r->broken) return 1;
  return prod_room(r, len, &pad) != NEXAR__SHM_AGAIN;
}

void nexar__shm_ring_beat(nexar__shm_ring_t *r) {
  atomic_store_explicit(&r->ctl->beat, ++r->beats, memory_order_relaxed);
}

bool nexar__shm_ring_beat_seen(nexar__shm_ring_t *r) {
  uint64_t b = atomic_load_explicit(&r->ctl->beat, memory_order_relaxed);
  if (b == r->beat_seen) return false;
  r->beat_seen = b;
  return true;
}

int nexar__shm_ring_producer_sleep(nexar__shm_ring_t *r, uint32_t len) {
  if (len > nexar__shm_ring_max_payload(r)) return 0; /* put refuses it */
  return raise_flag(&r->ctl->waiting, r, has_room, len);
}

void nexar__shm_ring_producer_wait(nexar__shm_ring_t *r) {
  atomic_store_explicit(&r->ctl->waiting, 1, memory_order_seq_cst);
  atomic_thread_fence(memory_order_seq_cst);
}

/* ---- Consumer */

/* The consumer's tail made visible to the producer (a store to the
 * consumer's own line, which the producer reads only when the room it last
 * saw runs short). */
static void publish(nexar__shm_ring_t *r) {
  if (r->tail == r->tail_pub) return;
  r->tail_pub = r->tail;
  r->tail_fresh = 1;
  atomic_store_explicit(&r->ctl->tail, r->tail, memory_order_release);
}

/* Whether the record at the tail is published: its stamp is the tail's. */
static bool stamped(const nexar__shm_ring_t *r) {
  const uint8_t *at = r->data + (r->tail & (r->cap - 1));
  return atomic_load_explicit((const _Atomic uint64_t *)(const void *)at,
                              memory_order_acquire) == (r->tail ^ r->key);
}

int nexar__shm_ring_peek(nexar__shm_ring_t *r, nexar__shm_rec_t *out) {
  if (r->broken) return NEXAR_ERR_PROTO;
  if (r->peeked) {
    *out = r->cur;
    return 1;
  }
  /* At most a pad then a record: a pad never starts at offset 0. */
  for (int pass = 0; pass < 2; pass++) {
    warm(r, (r->tail & (r->cap - 1)) + NEXAR__SHM_REC_HDR, NEXAR__SHM_REC_HDR);
    if (!stamped(r)) {
      publish(r); /* caught up: the producer may see all the room */
      return 0;
    }
    uint64_t off = r->tail & (r->cap - 1);
    struct shm_rec_hdr hd;
    memcpy(&hd, r->data + off, sizeof hd);
    atomic_signal_fence(memory_order_seq_cst); /* no second fetch */
    uint64_t rec = rec_bytes(hd.len);
    if (hd.stamp != (r->tail ^ r->key) || rec > r->cap - off)
      return ring_fail(r);
    if (hd.type == NEXAR__SHM_PAD) {
      if (off == 0 || rec != r->cap - off) return ring_fail(r);
      r->tail += rec;
      continue;
    }
    if (hd.len > nexar__shm_ring_max_payload(r)) return ring_fail(r);
    warm(r, off + rec, rec);
    r->cur = (nexar__shm_rec_t){.len = hd.len,
                                .type = hd.type,
                                .flags = hd.flags,
                                .a = hd.a,
                                .b = hd.b,
                                .payload = r->data + off + NEXAR__SHM_REC_HDR};
    r->peeked = rec;
    *out = r->cur;
    return 1;
  }
  return ring_fail(r);
}

void nexar__shm_ring_pop(nexar__shm_ring_t *r) {
  if (!r->peeked) return;
  r->tail += r->peeked;
  r->peeked = 0;
  if (r->tail - r->tail_pub >= r->cap / 4) publish(r);
}

bool nexar__shm_ring_need_kick_space(nexar__shm_ring_t *r) {
  publish(r);
  if (!r->tail_fresh) return false; /* no fence: nothing new to see */
  r->tail_fresh = 0;
  return take_flag(&r->ctl->waiting);
}

static int has_data(nexar__shm_ring_t *r, uint32_t unused) {
  (void)unused;
  if (r->broken || r->peeked) return 1;
  return stamped(r);
}

int nexar__shm_ring_consumer_sleep(nexar__shm_ring_t *r) {
  publish(r);
  return raise_flag(&r->ctl->sleeping, r, has_data, 0);
}
