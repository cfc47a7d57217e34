/*
 * Device buffers in the core: the active device adapter of a context, the
 * cache of bounce buffers, and the staging of device buffers through host
 * memory (core.h; the adapters themselves are in src/device/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* A host bounce buffer, with what is needed to free it. */
struct nexar__bounce {
  nexar__bounce_t *next; /* in the cache */
  void *ptr;
  uint64_t bytes;
  bool pinned; /* from alloc_host: freed with free_host */
  uint64_t gen;
  void (*free_host)(void *user_data, void *ptr, size_t bytes);
  void *ud;
};

/* One staged device buffer of a call. */
typedef struct nexar__stage_buf {
  uint8_t *dev;         /* the user's device pointer */
  nexar__bounce_t *b;   /* its bounce buffer */
  nexar__region_t *out; /* merged ranges copied back at completion */
  size_t nout;
  const char *role; /* "send", "receive" */
} nexar__stage_buf_t;

/* At most two buffers per call: the send buffer and the receive buffer. */
#define NEXAR__STAGE_BUFS 2

struct nexar__stage {
  nexar__dev_t *dev;
  nexar_comm_t *comm;
  const char *what;       /* the call, for messages */
  nexar_device_ops_t ops; /* the adapter the call started with */
  void *ud;
  uint64_t gen;
  int nbufs;
  nexar__stage_buf_t b[NEXAR__STAGE_BUFS];
};

const char *nexar__dev_ops_name(const nexar_device_ops_t *ops) {
  return ops->name ? ops->name : "(unnamed)";
}

int nexar__dev_adapter_rc(int rc) {
  if (rc >= 0) return NEXAR_OK;
  if (rc >= NEXAR_ERR_DEVICE || rc == NEXAR_ERR_INTERNAL) return rc;
  return NEXAR_ERR_DEVICE;
}

/* ---- Bounce buffers ---- */

static void bounce_free(nexar__bounce_t *b) {
  if (!b) return;
  if (b->pinned)
    b->free_host(b->ud, b->ptr, (size_t)b->bytes);
  else
    free(b->ptr);
  free(b);
}

/* Frees a list of bounce buffers. */
static void bounce_free_list(nexar__bounce_t *b) {
  while (b) {
    nexar__bounce_t *n = b->next;
    bounce_free(b);
    b = n;
  }
}

/* A bounce buffer of at least |bytes| for |st|: the smallest cached one
 * that is not more than twice as large, else a new one. NULL when out of
 * memory. */
static nexar__bounce_t *bounce_get(nexar__stage_t *st, uint64_t bytes) {
  nexar__dev_t *dev = st->dev;
  uint64_t sz = (bytes + 63) & ~(uint64_t)63;
  if (bytes > SIZE_MAX - 64) return NULL;
  pthread_mutex_lock(&dev->mu);
  nexar__bounce_t **best = NULL;
  for (nexar__bounce_t **p = &dev->cache; *p; p = &(*p)->next) {
    nexar__bounce_t *b = *p;
    if (b->gen != st->gen || b->bytes < sz || b->bytes > 2 * sz + 4096)
      continue;
    if (!best || b->bytes < (*best)->bytes) best = p;
  }
  if (best) {
    nexar__bounce_t *b = *best;
    *best = b->next;
    b->next = NULL;
    dev->cached -= b->bytes;
    pthread_mutex_unlock(&dev->mu);
    return b;
  }
  pthread_mutex_unlock(&dev->mu);
  nexar__bounce_t *b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->bytes = sz;
  b->gen = st->gen;
  if (st->ops.alloc_host) {
    b->ptr = st->ops.alloc_host(st->ud, (size_t)sz);
    b->pinned = b->ptr != NULL;
    b->free_host = st->ops.free_host;
    b->ud = st->ud;
  }
  if (!b->ptr) b->ptr = aligned_alloc(64, (size_t)sz);
  if (!b->ptr) {
    free(b);
    return NULL;
  }
  return b;
}

/* Returns |b| to the cache of |dev| (evicting the least recently cached
 * buffers to make room), or frees it when it belongs to an older adapter
 * or is larger than the cache. */
static void bounce_put(nexar__dev_t *dev, nexar__bounce_t *b) {
  nexar__bounce_t *evicted = NULL;
  pthread_mutex_lock(&dev->mu);
  if (b->gen == dev->gen && b->bytes <= dev->cache_max) {
    while (dev->cache && dev->cached + b->bytes > dev->cache_max) {
      nexar__bounce_t **p = &dev->cache;
      while ((*p)->next) p = &(*p)->next;
      nexar__bounce_t *old = *p;
      *p = NULL;
      dev->cached -= old->bytes;
      old->next = evicted;
      evicted = old;
    }
    b->next = dev->cache;
    dev->cache = b;
    dev->cached += b->bytes;
    b = NULL;
  }
  pthread_mutex_unlock(&dev->mu);
  bounce_free(b);
  bounce_free_list(evicted);
}

/* Empties the cache of |dev|. */
static void cache_flush(nexar__dev_t *dev) {
  pthread_mutex_lock(&dev->mu);
  nexar__bounce_t *list = dev->cache;
  dev->cache = NULL;
  dev->cached = 0;
  pthread_mutex_unlock(&dev->mu);
  bounce_free_list(list);
}

/* ---- The adapter of a context ---- */

/* Installs |ops|: the cache is emptied and the generation bumped under one
 * lock, so a buffer of the previous adapter is never cached again. */
static void dev_install(nexar__dev_t *dev, const nexar_device_ops_t *ops,
                        void *ud) {
  pthread_mutex_lock(&dev->mu);
  nexar__bounce_t *old = dev->cache;
  dev->cache = NULL;
  dev->cached = 0;
  memcpy(&dev->ops, ops, sizeof(dev->ops));
  dev->ud = ud;
  dev->host_only = nexar__dev_is_cpu(ops);
  dev->gen++;
  pthread_mutex_unlock(&dev->mu);
  bounce_free_list(old);
}

int nexar__dev_init(nexar__dev_t *dev, const char *which, uint64_t cache_max,
                    char *err, size_t errlen) {
  memset(dev, 0, sizeof(*dev));
  pthread_mutex_init(&dev->mu, NULL);
  dev->cache_max = cache_max;
  const nexar_device_ops_t *ops = nexar_device_adapter_cpu();
  const char *w = which ? which : "cpu";
  if (strcmp(w, "cuda") == 0 || strcmp(w, "auto") == 0) {
    const nexar_device_ops_t *cuda = NULL;
    char why[256];
    if (nexar__cuda_load(&cuda, why, sizeof(why)) == 0) {
      ops = cuda;
    } else if (strcmp(w, "cuda") == 0) {
      snprintf(err, errlen, "NEXAR_DEVICE=cuda: %s", why);
      return NEXAR_ERR_UNSUPPORTED;
    } else {
      NEXAR__INFO(NEXAR__SUB_INIT, "NEXAR_DEVICE=auto: using cpu (%s)", why);
    }
  } else if (strcmp(w, "cpu") != 0) {
    snprintf(err, errlen, "NEXAR_DEVICE=%s: expected cpu, cuda or auto", w);
    return NEXAR_ERR_INVALID_ARG;
  }
  dev_install(dev, ops, NULL);
  NEXAR__INFO(NEXAR__SUB_INIT, "device adapter: %s", nexar__dev_ops_name(ops));
  return 0;
}

void nexar__dev_fini(nexar__dev_t *dev) {
  cache_flush(dev);
  pthread_mutex_destroy(&dev->mu);
}

int nexar_device_adapter_set(nexar_ctx_t *ctx, const nexar_device_ops_t *ops,
                             void *user_data) {
  if (!ctx) return NEXAR_ERR_INVALID_ARG;
  if (!ops) ops = nexar_device_adapter_cpu();
  const char *why = NULL;
  if (ops->size < sizeof(nexar_device_ops_t) ||
      ops->version < NEXAR_DEVICE_OPS_VERSION)
    why =
        "size or version too small (initialise size with "
        "sizeof(nexar_device_ops_t) and version with "
        "NEXAR_DEVICE_OPS_VERSION)";
  else if (!ops->classify || !ops->copy_to_host || !ops->copy_from_host)
    why = "classify, copy_to_host and copy_from_host are required";
  else if (!ops->alloc_host != !ops->free_host)
    why = "alloc_host and free_host go together";
  if (why) {
    nexar__comm_set_error(ctx->world_comm,
                          "rank %d: nexar_device_adapter_set(%s): %s",
                          ctx->rank, nexar__dev_ops_name(ops), why);
    return NEXAR_ERR_INVALID_ARG;
  }
  dev_install(&ctx->dev, ops, user_data);
  NEXAR__INFO(NEXAR__SUB_INIT, "rank %d: device adapter: %s", ctx->rank,
              nexar__dev_ops_name(ops));
  return NEXAR_OK;
}

int nexar_device_adapter_get(nexar_ctx_t *ctx, nexar_device_ops_t *ops,
                             void **user_data) {
  if (!ctx) return NEXAR_ERR_INVALID_ARG;
  if (ops) memcpy(ops, &ctx->dev.ops, sizeof(*ops));
  if (user_data) *user_data = ctx->dev.ud;
  return NEXAR_OK;
}

#ifndef NEXAR_HAVE_CUDA
/* Built without device_cuda.c (NEXAR_CUDA=OFF, or AUTO without a CUDA
 * toolkit). */
int nexar__cuda_load(const nexar_device_ops_t **ops, char *err, size_t errlen) {
  *ops = NULL;
  snprintf(err, errlen,
           "libnexar was built without the CUDA adapter (NEXAR_CUDA=OFF, or "
           "no CUDA toolkit found at configure time)");
  return NEXAR_ERR_UNSUPPORTED;
}
#endif

int nexar_device_adapter_cuda(const nexar_device_ops_t **ops) {
  if (!ops) return NEXAR_ERR_INVALID_ARG;
  *ops = NULL;
  char why[256];
  int rc = nexar__cuda_load(ops, why, sizeof(why));
  if (rc < 0) nexar__set_init_error("nexar_device_adapter_cuda: %s", why);
  return rc;
}

/* ---- Staging ---- */

int nexar__dev_classify(nexar__dev_t *dev, nexar_comm_t *comm, const char *what,
                        const char *role, const void *ptr, uint64_t bytes) {
  int kind = dev->ops.classify(dev->ud, ptr, (size_t)bytes);
  if (kind == NEXAR_MEM_HOST || kind == NEXAR_MEM_DEVICE) return kind;
  int rc = kind < 0 ? nexar__dev_adapter_rc(kind) : NEXAR_ERR_DEVICE;
  nexar__comm_set_error(comm,
                        "rank %d: %s: device adapter '%s' cannot classify "
                        "the %s buffer %p (%llu bytes): %s (%d)",
                        comm->rank, what, nexar__dev_ops_name(&dev->ops), role,
                        ptr, (unsigned long long)bytes, nexar_err_name(rc),
                        kind);
  return rc;
}

static int region_cmp(const void *a, const void *b) {
  const nexar__region_t *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Sorts |r| and merges overlapping or adjacent ranges, dropping empty
 * ones; returns the new length. */
static size_t regions_merge(nexar__region_t *r, size_t n) {
  if (n > 1) qsort(r, n, sizeof(*r), region_cmp);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (!r[i].len) continue;
    if (k && r[i].off <= r[k - 1].off + r[k - 1].len) {
      uint64_t end = r[i].off + r[i].len;
      if (end > r[k - 1].off + r[k - 1].len) r[k - 1].len = end - r[k - 1].off;
    } else {
      r[k++] = r[i];
    }
  }
  return k;
}

/* A merged copy of |n| regions in *out (NULL when none remain). */
static int regions_copy(const nexar__region_t *r, size_t n,
                        nexar__region_t **out, size_t *nout) {
  *out = NULL;
  *nout = 0;
  if (!n) return 0;
  nexar__region_t *c = malloc(n * sizeof(*c));
  if (!c) return NEXAR_ERR_NOMEM;
  memcpy(c, r, n * sizeof(*c));
  *nout = regions_merge(c, n);
  if (!*nout) {
    free(c);
    c = NULL;
  }
  *out = c;
  return 0;
}

int nexar__stage_add(nexar__stage_t **pst, nexar__dev_t *dev,
                     nexar_comm_t *comm, const char *what, const char *role,
                     void *ptr, uint64_t bytes, const nexar__region_t *in,
                     size_t nin, const nexar__region_t *out, size_t nout,
                     uint8_t **host) {
  nexar__stage_t *st = *pst;
  if (!st) {
    st = calloc(1, sizeof(*st));
    if (!st) return NEXAR_ERR_NOMEM;
    st->dev = dev;
    st->comm = comm;
    st->what = what;
    st->ops = dev->ops;
    st->ud = dev->ud;
    st->gen = dev->gen;
    *pst = st;
  }
  if (st->nbufs == NEXAR__STAGE_BUFS) return NEXAR_ERR_INTERNAL;
  nexar__stage_buf_t *sb = &st->b[st->nbufs];
  memset(sb, 0, sizeof(*sb));
  sb->dev = ptr;
  sb->role = role;
  nexar__region_t *ins = NULL;
  size_t nins = 0;
  int rc = regions_copy(out, nout, &sb->out, &sb->nout);
  if (rc == 0) rc = regions_copy(in, nin, &ins, &nins);
  if (rc == 0 && !(sb->b = bounce_get(st, bytes))) rc = NEXAR_ERR_NOMEM;
  st->nbufs++; /* from here on nexar__stage_abort releases it */
  if (rc < 0) {
    free(ins);
    nexar__comm_set_error(comm,
                          "rank %d: %s: no memory for a bounce buffer of "
                          "%llu bytes for the %s buffer",
                          comm->rank, what, (unsigned long long)bytes, role);
    return rc;
  }
  uint8_t *h = sb->b->ptr;
  for (size_t i = 0; i < nins && rc == 0; i++) {
    int crc = st->ops.copy_to_host(st->ud, h + ins[i].off, sb->dev + ins[i].off,
                                   (size_t)ins[i].len);
    if (crc < 0) {
      rc = nexar__dev_adapter_rc(crc);
      nexar__comm_set_error(comm,
                            "rank %d: %s: device adapter '%s': copy_to_host "
                            "of %llu bytes from the %s buffer (%p + %llu) "
                            "failed: %s (%d)",
                            comm->rank, what, nexar__dev_ops_name(&st->ops),
                            (unsigned long long)ins[i].len, role, ptr,
                            (unsigned long long)ins[i].off, nexar_err_name(rc),
                            crc);
    }
  }
  free(ins);
  if (rc == 0) *host = h;
  return rc;
}

/* Releases the buffers of |st| (to the cache when |reuse|) and frees it. */
static void stage_release(nexar__stage_t *st, bool reuse) {
  for (int i = 0; i < st->nbufs; i++) {
    nexar__stage_buf_t *sb = &st->b[i];
    if (sb->b) {
      if (reuse)
        bounce_put(st->dev, sb->b);
      else
        bounce_free(sb->b);
    }
    free(sb->out);
  }
  free(st);
}

void nexar__stage_abort(nexar__stage_t *st) {
  if (st) stage_release(st, true);
}

int nexar__stage_finish(nexar__stage_t *st, int rc, uint64_t limit) {
  if (rc != NEXAR_OK && rc != NEXAR_ERR_TRUNCATE) {
    stage_release(st, true);
    return rc;
  }
  nexar_comm_t *comm = st->comm;
  int err = 0;
  bool issued = false;
  for (int i = 0; i < st->nbufs && !err; i++) {
    nexar__stage_buf_t *sb = &st->b[i];
    const uint8_t *h = sb->b->ptr;
    for (size_t k = 0; k < sb->nout && !err; k++) {
      uint64_t off = sb->out[k].off, len = sb->out[k].len;
      if (off >= limit) break; /* sorted: the rest lies beyond too */
      if (len > limit - off) len = limit - off;
      issued = true;
      int crc =
          st->ops.copy_from_host(st->ud, sb->dev + off, h + off, (size_t)len);
      if (crc < 0) {
        err = nexar__dev_adapter_rc(crc);
        nexar__comm_set_error(
            comm,
            "rank %d: %s: device adapter '%s': "
            "copy_from_host of %llu bytes to the %s buffer "
            "(%p + %llu) failed: %s (%d)",
            comm->rank, st->what, nexar__dev_ops_name(&st->ops),
            (unsigned long long)len, sb->role, (void *)sb->dev,
            (unsigned long long)off, nexar_err_name(err), crc);
      }
    }
  }
  /* Copies may still read the bounce buffers until synchronize returns,
   * so it runs even after a failed copy. */
  if (issued && st->ops.synchronize) {
    int src = st->ops.synchronize(st->ud);
    if (src < 0 && !err) {
      err = nexar__dev_adapter_rc(src);
      nexar__comm_set_error(comm,
                            "rank %d: %s: device adapter '%s': synchronize "
                            "failed: %s (%d)",
                            comm->rank, st->what, nexar__dev_ops_name(&st->ops),
                            nexar_err_name(err), src);
    }
  }
  stage_release(st, err == 0);
  return err ? err : rc;
}
