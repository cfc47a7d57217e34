/*
 * libFuzzer harness for what a same-host peer controls in shared memory
 * (src/transport/shm_ring.c; layout in shm_ring.h): the first input byte
 * picks the target (modulo 2), the rest is its input.
 *
 *   0  the consumer's ring: u16 tail (in 64-byte units, the consumer's own
 *      counter), u64 stamp key (made odd), then the ring's bytes from
 *      offset 0 (record headers with their stamps, pads, payloads; at most
 *      the 4096-byte ring, the rest zero). Records are peeked and popped
 *      until the ring is empty or broken.
 *   1  a segment offered by a peer: u8 size (the file is 4096 + 4096 *
 *      (size % 5) + (size / 5) bytes), then the start of the file (its
 *      header, at most 64 bytes); nexar__shm_seg_attach maps it or refuses.
 *
 * Target 0 checks what the consumer promises: every record it returns lies
 * inside the ring and carries the stamp of its position, with a payload of
 * at most nexar__shm_ring_max_payload() bytes (each payload is read
 * whole); the tail stays 64-byte aligned and grows by whole records, at
 * most a ring's bytes; "empty" means the tail's stamp is not there; a
 * refusal is NEXAR_ERR_PROTO and stays so. Target 1 that attach accepts
 * exactly the header the rules allow (magic, version, header bytes, a
 * power-of-two ring of 4096 .. 1 GiB, total = 4096 + 2 * ring = the file's
 * size, an odd stamp key) and refuses anything else with NEXAR_ERR_PROTO.
 * Any difference aborts.
 *
 * Build: cmake -DNEXAR_FUZZ=ON with CC=clang (tests/CMakeLists.txt).
 * Run:   scripts/fuzz.sh BUILD_DIR shm, or
 *        ./fuzz_shm -max_total_time=60 <copy of tests/corpus/shm>
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/shm_ring.h"

#define RING 4096u

static void check(int cond) {
  if (!cond) abort();
}

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void fuzz_ring(const uint8_t *in, size_t len) {
  static nexar__shm_seg_t seg;
  static int ready;
  if (!ready) {
    check(nexar__shm_seg_create(RING, &seg) == 0);
    ready = 1;
  }
  if (len < 10) return;
  nexar__shm_ring_t *r = &seg.rx; /* the creator consumes ring 1 */
  uint64_t tail = (uint64_t)(in[0] | in[1] << 8) * 64u;
  r->key = le64(in + 2) | 1;
  in += 10;
  len -= 10;
  memset(r->data, 0, RING);
  memcpy(r->data, in, len < RING ? len : RING);
  r->tail = r->tail_pub = tail;
  r->peeked = 0;
  r->broken = 0;
  const uint8_t *lo = r->data, *hi = r->data + RING;
  volatile uint8_t sink = 0;
  for (int i = 0; i < 2 * (int)(RING / 64) + 2; i++) {
    nexar__shm_rec_t rec;
    uint64_t before = r->tail;
    int rc = nexar__shm_ring_peek(r, &rec);
    if (rc < 0) {
      check(rc == NEXAR_ERR_PROTO);
      check(nexar__shm_ring_peek(r, &rec) == NEXAR_ERR_PROTO);
      return;
    }
    check(r->tail % 64 == 0 && r->tail - tail <= RING);
    if (rc == 0) {
      check(le64(lo + (r->tail & (RING - 1))) != (r->tail ^ r->key));
      return;
    }
    check(rc == 1 && rec.type != NEXAR__SHM_PAD);
    check(rec.len <= nexar__shm_ring_max_payload(r));
    const uint8_t *p = rec.payload;
    check(p >= lo + NEXAR__SHM_REC_HDR && p + rec.len <= hi);
    /* The record starts at the tail (past any pad), stamped for it. */
    check(p == lo + (r->tail & (RING - 1)) + NEXAR__SHM_REC_HDR);
    check(le64(p - NEXAR__SHM_REC_HDR) == (r->tail ^ r->key));
    for (uint32_t k = 0; k < rec.len; k++) sink ^= p[k];
    nexar__shm_ring_pop(r);
    check(r->tail >= before + 64 && r->tail - tail <= RING &&
          r->tail % 64 == 0);
  }
  (void)sink;
  abort(); /* more records than a 4096-byte ring holds */
}

static void fuzz_attach(const uint8_t *in, size_t len) {
  if (len < 1) return;
  size_t bytes = 4096u + 4096u * (in[0] % 5u) + in[0] / 5u;
  in++;
  len--;
  int fd = memfd_create("fuzz_shm", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  check(fd >= 0);
  check(ftruncate(fd, (off_t)bytes) == 0);
  size_t n = len < 64 ? len : 64;
  check(pwrite(fd, in, n, 0) == (ssize_t)n);
  check(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  uint8_t h[40] = {0};
  memcpy(h, in, n < 40 ? n : 40);
  uint64_t ring = le64(h + 16);
  int ok = le64(h) == NEXAR__SHM_MAGIC &&
           (uint32_t)le64(h + 8) == NEXAR__SHM_VERSION &&
           (uint32_t)(le64(h + 8) >> 32) == NEXAR__SHM_HDR_BYTES &&
           ring >= NEXAR__SHM_RING_MIN && ring <= NEXAR__SHM_RING_MAX &&
           (ring & (ring - 1)) == 0 && le64(h + 24) == bytes &&
           NEXAR__SHM_HDR_BYTES + 2 * ring == bytes && (le64(h + 32) & 1);
  nexar__shm_seg_t seg;
  int rc = nexar__shm_seg_attach(fd, &seg);
  if (ok) {
    check(rc == 0 && seg.rx.cap == ring && seg.tx.cap == ring);
    nexar__shm_seg_close(&seg); /* closes fd */
  } else {
    check(rc == NEXAR_ERR_PROTO);
    close(fd);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2 == 0)
    fuzz_ring(data + 1, size - 1);
  else
    fuzz_attach(data + 1, size - 1);
  return 0;
}
