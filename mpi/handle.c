/*
 * The live handles of the layer's objects (docs/mpi.md, "Handles").
 *
 * A handle the layer gave out is the address of an object whose first field
 * is its magic. Every object is entered here when it is made and taken out
 * before it is freed, and a lookup asks this table before it reads the
 * object: a freed, forged or garbage handle (MPI_Comm_free'd and used again,
 * a stray integer, a pointer into the stack) is then an error class, never a
 * read of memory the layer does not own.
 *
 * An open-addressing set of addresses (linear probing, tombstones), grown
 * to keep it at most 3/4 full; readers share a read lock, so lookups from
 * several threads (MPI_THREAD_MULTIPLE) do not serialise.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "mpi_int.h"

#define SLOT_EMPTY ((uintptr_t)0)
#define SLOT_GONE ((uintptr_t)1) /* tombstone: keeps probe chains intact */

static struct {
  pthread_rwlock_t lock;
  uintptr_t *slot;
  size_t cap;  /* slots, a power of two (0 before the first object) */
  size_t used; /* live addresses and tombstones */
} g_live = {PTHREAD_RWLOCK_INITIALIZER, NULL, 0, 0};

static size_t first_slot(uintptr_t a, size_t cap) {
  /* Fibonacci hashing of the address without its alignment bits. */
  uint64_t x = (uint64_t)(a >> 4) * 0x9e3779b97f4a7c15ull;
  return (size_t)(x >> 17) & (cap - 1);
}

/* The slot holding |a|, or SIZE_MAX. Under the lock. */
static size_t find(uintptr_t a) {
  if (!g_live.cap) return SIZE_MAX;
  size_t mask = g_live.cap - 1;
  for (size_t i = first_slot(a, g_live.cap), n = 0; n < g_live.cap;
       i = (i + 1) & mask, n++) {
    if (g_live.slot[i] == a) return i;
    if (g_live.slot[i] == SLOT_EMPTY) return SIZE_MAX;
  }
  return SIZE_MAX;
}

/* Rebuilds the table with |cap| slots, dropping tombstones. Under the
 * write lock. Returns 0, or -1 when out of memory (the table unchanged). */
static int rebuild(size_t cap) {
  uintptr_t *s = calloc(cap, sizeof *s);
  if (!s) return -1;
  size_t used = 0;
  for (size_t i = 0; i < g_live.cap; i++) {
    uintptr_t a = g_live.slot[i];
    if (a == SLOT_EMPTY || a == SLOT_GONE) continue;
    size_t j = first_slot(a, cap);
    while (s[j] != SLOT_EMPTY) j = (j + 1) & (cap - 1);
    s[j] = a;
    used++;
  }
  free(g_live.slot);
  g_live.slot = s;
  g_live.cap = cap;
  g_live.used = used;
  return 0;
}

int nxm_obj_open(void *obj, uint32_t magic) {
  uintptr_t a = (uintptr_t)obj;
  int rc = MPI_SUCCESS;
  *(uint32_t *)obj = NXM_MAGIC_DEAD;
  pthread_rwlock_wrlock(&g_live.lock);
  if (4 * (g_live.used + 1) > 3 * g_live.cap) {
    size_t live = 0;
    for (size_t i = 0; i < g_live.cap; i++) live += g_live.slot[i] > SLOT_GONE;
    size_t cap = 64;
    while (cap < 4 * (live + 1)) cap *= 2;
    if (rebuild(cap) != 0) {
      rc = MPI_ERR_NO_MEM;
      goto out;
    }
  }
  size_t i = first_slot(a, g_live.cap);
  while (g_live.slot[i] > SLOT_GONE) i = (i + 1) & (g_live.cap - 1);
  if (g_live.slot[i] == SLOT_EMPTY) g_live.used++;
  g_live.slot[i] = a;
  *(uint32_t *)obj = magic;
out:
  pthread_rwlock_unlock(&g_live.lock);
  return rc;
}

void nxm_obj_close(void *obj) {
  if (!obj) return;
  pthread_rwlock_wrlock(&g_live.lock);
  size_t i = find((uintptr_t)obj);
  if (i != SIZE_MAX) g_live.slot[i] = SLOT_GONE;
  *(uint32_t *)obj = NXM_MAGIC_DEAD;
  pthread_rwlock_unlock(&g_live.lock);
}

int nxm_obj_is(const void *h, uint32_t magic) {
  if (NXM_IS_PREDEF(h)) return 0;
  pthread_rwlock_rdlock(&g_live.lock);
  int ok = find((uintptr_t)h) != SIZE_MAX && *(const uint32_t *)h == magic;
  pthread_rwlock_unlock(&g_live.lock);
  return ok;
}
