/*
 * The seed: discovery and admission only; it never sees data traffic. This
 * file is its driver: the public nexar_seed_* API, a QUIC endpoint with its
 * progress thread, and the seed-stream reassembly. What the seed decides
 * (proofs, ranks, the roster, elastic admission) is the protocol core,
 * seed_core.c, which does no I/O and reads no clock: each endpoint event
 * (a connection ready, a whole frame, a close, a tick with the time) is a
 * call into it, and the frames it queues are sent here, each to the link
 * that is its connection handle. A link keeps its core slot in role_data.
 */
#include <errno.h>
#include <stddef.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/seed_core.h"
#include "cluster/seed_int.h"

struct nexar_seed {
  nexar__ep_t ep;
  uint8_t key[32];
  int world, max_world, timeout_ms;
  nexar__seedc_t *core; /* the protocol (seed_core.h) */
  /* Published to nexar_seed_wait (under mu). */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  int rc;
  char err[NEXAR__ERRMSG_MAX];
};

int nexar__seed_feed(nexar__link_t *c, const uint8_t *d, size_t n,
                     nexar__seed_frame_fn fn) {
  if (c->sbuf_len + n > NEXAR__SEED_FRAME_HDR + NEXAR__SEED_MAX_BODY)
    return NEXAR_ERR_PROTO;
  if (c->sbuf_len + n > c->sbuf_cap) {
    size_t cap = c->sbuf_cap ? c->sbuf_cap : 256;
    while (cap < c->sbuf_len + n) cap *= 2;
    uint8_t *b = realloc(c->sbuf, cap);
    if (!b) return NEXAR_ERR_NOMEM;
    c->sbuf = b;
    c->sbuf_cap = cap;
  }
  memcpy(c->sbuf + c->sbuf_len, d, n);
  c->sbuf_len += n;
  for (;;) {
    uint8_t type;
    uint32_t blen;
    const uint8_t *body;
    int r = nexar__seed_frame_next(c->sbuf, c->sbuf_len, &type, &body, &blen);
    if (r <= 0) return r;
    r = fn(c, type, body, blen);
    if (r < 0 || c->state == NEXAR__CS_DEAD) return r;
    size_t used = NEXAR__SEED_FRAME_HDR + blen;
    memmove(c->sbuf, c->sbuf + used, c->sbuf_len - used);
    c->sbuf_len -= used;
  }
}

int nexar__seed_feed_or_close(nexar__link_t *c, const uint8_t *d, size_t n,
                              nexar__seed_frame_fn fn) {
  int r = nexar__seed_feed(c, d, n, fn);
  if (r < 0 && c->state != NEXAR__CS_DEAD) {
    nexar__link_close(c, NEXAR__CLOSE_PROTO, nexar_strerror(r));
    nexar__link_fail(c, r, nexar_strerror(r));
  }
  return r;
}

/* After each call into the core: its frames go out, and its result, once
 * there is one, is published to nexar_seed_wait. The WELCOME roster is
 * referenced, not copied, by every worker's message (the core keeps it
 * until nexar_seed_stop, after the endpoint is gone). */
static void flush(nexar_seed_t *s) {
  nexar__seedc_msg_t m;
  while (nexar__seedc_next(s->core, &m)) {
    nexar__link_t *c = m.conn;
    if (c->state == NEXAR__CS_DEAD ||
        nexar__link_seed_sendv(c, m.head, m.head_len, m.shared, m.shared_len,
                               m.persistent) == 0)
      continue;
    /* The worker hears of it at once rather than at its deadline. */
    NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                "seed: out of memory queueing a frame to %s", c->remote_str);
    nexar__link_close(c, NEXAR__CLOSE_ABORT, "seed out of memory");
    nexar__link_fail(c, NEXAR_ERR_NOMEM, "seed out of memory");
  }
  int rc;
  const char *err;
  if (s->done || !nexar__seedc_result(s->core, &rc, &err)) return;
  pthread_mutex_lock(&s->mu);
  s->done = true;
  s->rc = rc;
  snprintf(s->err, sizeof(s->err), "%s", err);
  if (rc < 0) NEXAR__WARN(NEXAR__SUB_BOOTSTRAP, "seed: %s", s->err);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* The core's slot of |c| (-1: none), kept in c->role_data as slot + 1. */
static int slot_of(const nexar__link_t *c) {
  return (int)(intptr_t)c->role_data - 1;
}

static int on_frame(nexar__link_t *c, uint8_t type, const uint8_t *body,
                    size_t len) {
  nexar_seed_t *s = c->ep->owner;
  const char *why = NULL;
  int rc = nexar__seedc_frame(s->core, slot_of(c), type, body, len, &why);
  flush(s);
  if (rc == NEXAR_ERR_AUTH) {
    /* An observer without the secret: nothing, not even a REJECT. */
    NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                "seed: observer at %s did not prove the cluster secret",
                c->remote_str);
    nexar__link_close(c, NEXAR__CLOSE_AUTH, "not authenticated");
    nexar__link_fail(c, NEXAR_ERR_AUTH, why);
    return 0;
  }
  if (rc == NEXAR_ERR_PROTO) {
    nexar__link_close(c, NEXAR__CLOSE_PROTO, why);
    nexar__link_fail(c, NEXAR_ERR_PROTO, why);
  }
  return rc;
}

static void seed_on_ready(nexar__link_t *c) {
  nexar_seed_t *s = c->ep->owner;
  uint8_t exp[32];
  nexar__waddr_t observed;
  if (nexar__link_exporter(c, exp) < 0) {
    nexar__link_fail(c, NEXAR_ERR_TRANSPORT, "TLS exporter failed");
    return;
  }
  nexar__addr_to_wire((const struct sockaddr *)&c->remote, &observed);
  int slot = nexar__seedc_open(s->core, c, exp, &observed, c->remote_str);
  gnutls_memset(exp, 0, sizeof(exp));
  if (slot < 0) {
    nexar__link_fail(c, slot, "seed: out of memory");
    return;
  }
  c->role_data = (void *)(intptr_t)(slot + 1);
  flush(s);
}

static void seed_on_data(nexar__link_t *c, const uint8_t *d, size_t n) {
  if (slot_of(c) < 0) return;
  (void)nexar__seed_feed_or_close(c, d, n, on_frame);
}

static void seed_on_closed(nexar__link_t *c) {
  nexar_seed_t *s = c->ep->owner;
  if (c->close_code == NEXAR__CLOSE_AUTH)
    NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                "seed: worker at %s refused this seed: %s", c->remote_str,
                c->close_reason);
  int slot = slot_of(c);
  if (slot < 0) return;
  c->role_data = NULL;
  nexar__seedc_closed(s->core, slot, c->close_code, c->close_reason);
  flush(s);
}

static bool link_idle(void *c) {
  return nexar__link_idle(c);
}

static void seed_on_tick(nexar__ep_t *ep, uint64_t now) {
  nexar_seed_t *s = ep->owner;
  nexar__seedc_tick(s->core, now, link_idle);
  flush(s);
}

static int seed_verify_client(nexar__ep_t *ep, const uint8_t *fp) {
  return -2; /* seed clients are authenticated by MAC, not certificate */
}

static const nexar__ep_ops_t seed_ops = {
    .on_ready = seed_on_ready,
    .on_seed_data = seed_on_data,
    .on_closed = seed_on_closed,
    .on_tick = seed_on_tick,
    .verify_client = seed_verify_client,
    NEXAR__P2P_FRAME_OPS,
};

int nexar_seed_start(const nexar_seed_config_t *cfg, nexar_seed_t **out) {
  nexar__log_init();
  nexar_seed_config_t def = NEXAR_SEED_CONFIG_INIT;
  if (!cfg) cfg = &def;
  if (!out || cfg->size < sizeof(size_t)) return NEXAR_ERR_INVALID_ARG;
  nexar__params_t prm;
  char err[NEXAR__ERRMSG_MAX];
  int rc = nexar__params_load(&prm, NULL, err, sizeof(err));
  if (rc < 0) {
    nexar__set_init_error("%s", err);
    return rc;
  }
  nexar_seed_t *s = calloc(1, sizeof(*s));
  if (!s) return NEXAR_ERR_NOMEM;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->world =
      cfg->world_size != NEXAR_UNSET ? cfg->world_size : (int)prm.world_size;
  s->timeout_ms = cfg->timeout_ms != NEXAR_UNSET
                      ? cfg->timeout_ms
                      : (int)prm.bootstrap_timeout_ms;
  if (s->world < 1 || s->world > NEXAR__SEEDC_MAX_WORLD || s->timeout_ms < 1) {
    nexar__set_init_error("seed: world size must be 1..%d (NEXAR_WORLD_SIZE)",
                          NEXAR__SEEDC_MAX_WORLD);
    rc = NEXAR_ERR_INVALID_ARG;
    goto fail;
  }
  /* A config from before the field existed is shorter: then the
   * environment decides. */
  int maxw = cfg->size >= offsetof(nexar_seed_config_t, max_world_size) +
                              sizeof(cfg->max_world_size) &&
                     cfg->max_world_size != NEXAR_UNSET
                 ? cfg->max_world_size
                 : (int)prm.max_world_size;
  if (maxw < 0 || maxw > (int)NEXAR__ELASTIC_MAX_IDS) {
    nexar__set_init_error(
        "seed: max world size %d is outside 0..%u (NEXAR_MAX_WORLD_SIZE)", maxw,
        NEXAR__ELASTIC_MAX_IDS);
    rc = NEXAR_ERR_INVALID_ARG;
    goto fail;
  }
  s->max_world = maxw > s->world ? maxw : 0;
  rc = nexar__read_secret(cfg->secret ? cfg->secret : prm.secret,
                          cfg->secret        ? NULL
                          : cfg->secret_file ? cfg->secret_file
                                             : prm.secret_file,
                          s->key, err, sizeof(err));
  if (rc < 0) {
    nexar__set_init_error("seed: %s", err);
    goto fail;
  }
  struct sockaddr_storage ss;
  socklen_t sl;
  const char *listen = cfg->listen_addr ? cfg->listen_addr : "127.0.0.1:0";
  if (nexar__parse_addr(listen, 0, &ss, &sl) < 0) {
    nexar__set_init_error("seed: cannot parse listen address '%s'", listen);
    rc = NEXAR_ERR_INVALID_ARG;
    goto fail;
  }
  rc = nexar__ep_init(&s->ep, &ss, sl, &seed_ops, s, NULL, NULL);
  if (rc < 0) {
    nexar__set_init_error("seed: cannot listen on %s: %s", listen,
                          strerror(errno));
    goto fail_ep;
  }
  s->ep.server_alpn_seed = true;
  nexar__seedc_cfg_t cc = {.world = s->world,
                           .max_world = s->max_world,
                           .timeout_ms = s->timeout_ms,
                           .now = nexar__now(),
                           .key = s->key};
  rc = nexar__seedc_new(&cc, &s->core);
  gnutls_memset(s->key, 0, sizeof(s->key));
  if (rc < 0) goto fail_ep;
  rc = nexar__ep_start(&s->ep);
  if (rc < 0) goto fail_ep;
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP,
              "seed listening on %s for %d workers (elastic up to %d)",
              s->ep.local_str, s->world, s->max_world);
  *out = s;
  return 0;
fail_ep:
  nexar__ep_fini(&s->ep);
  nexar__seedc_free(s->core);
fail:
  gnutls_memset(s->key, 0, sizeof(s->key));
  free(s);
  return rc;
}

int nexar_seed_port(const nexar_seed_t *s) {
  if (!s) return -1;
  const struct sockaddr *sa = (const struct sockaddr *)&s->ep.local;
  return sa->sa_family == AF_INET
             ? ntohs(((const struct sockaddr_in *)sa)->sin_port)
             : ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
}

int nexar_seed_max_world_size(const nexar_seed_t *s) {
  return s ? s->max_world : 0;
}

int nexar_seed_wait(nexar_seed_t *s, int timeout_ms) {
  if (!s) return NEXAR_ERR_INVALID_ARG;
  uint64_t ms =
      timeout_ms < 0 ? (uint64_t)s->timeout_ms + 5000 : (uint64_t)timeout_ms;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
               ms * 1000000ull;
  ts.tv_sec = (time_t)(t / 1000000000ull);
  ts.tv_nsec = (long)(t % 1000000000ull);
  pthread_mutex_lock(&s->mu);
  while (!s->done)
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0) break;
  int rc = s->done ? s->rc : NEXAR_ERR_TIMEOUT;
  if (!s->done)
    snprintf(s->err, sizeof(s->err),
             "seed: formation not finished after %llu ms",
             (unsigned long long)ms);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

const char *nexar_seed_last_error(const nexar_seed_t *s) {
  return s ? s->err : "";
}

int nexar_seed_stop(nexar_seed_t *s) {
  if (!s) return NEXAR_OK;
  /* The endpoint first: its queued frames may reference the core's
   * roster. */
  nexar__ep_fini(&s->ep);
  nexar__seedc_free(s->core);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
  return NEXAR_OK;
}
