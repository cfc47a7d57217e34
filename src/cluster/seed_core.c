/*
 * The seed's protocol core (seed_core.h): discovery and admission as a
 * state machine without I/O or clock. The seed proves it knows the cluster
 * secret (a MAC bound to the TLS session: the driver passes each
 * connection's exporter value), checks the worker's proof the same way,
 * collects HELLOs until world_size workers have arrived, assigns ranks
 * (requested ranks first, then arrival order) and sends every worker the
 * roster: each rank's address and certificate fingerprint.
 *
 * Cost (issue 16, section 3: the seed's work is O(N)): a connection's
 * events find its record through its slot, a requested rank its holder
 * through a table of world_size entries, and the roster is encoded once:
 * every WELCOME is a 12-byte head of its own (frame header and rank) and
 * the same shared bytes after it. Each worker still receives the whole
 * roster, O(N) bytes, so the seed sends O(N^2) bytes in all
 * (docs/performance.md, "Start-up at scale").
 *
 * Elastic mode (max_world > world, docs/elastic.md): after formation the
 * core keeps the roster of every stable id it has assigned and holds
 * joiners (HELLO with the join flag) pending in arrival order, at most
 * max_world minus the members it knows of. At a checkpoint the members'
 * leader sends ADMIT; the core gives the pending joiners the next ids,
 * sends each a JOIN (its id, the roster, the new world; encoded once, a
 * head per joiner) and answers ADMITTED (seed_admit.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cluster/seed_core_int.h"
#include "cluster/seed_int.h"

void *nexar__seedc_realloc(nexar__seedc_t *s, void *p, size_t n) {
  return s->mem.realloc ? s->mem.realloc(s->mem.user, p, n) : realloc(p, n);
}

void nexar__seedc_dealloc(nexar__seedc_t *s, void *p) {
  if (!p) return;
  if (s->mem.free)
    s->mem.free(s->mem.user, p);
  else
    free(p);
}

/* Grows |*p| (|*cap| elements of |size| bytes) to hold |need|, doubling.
 * Returns 0 or NEXAR_ERR_NOMEM. */
int nexar__seedc_grow(nexar__seedc_t *s, void *p, size_t *cap, size_t need,
                      size_t size) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  void *q = nexar__seedc_realloc(s, *(void **)p, n * size);
  if (!q) return NEXAR_ERR_NOMEM;
  *(void **)p = q;
  *cap = n;
  return 0;
}

static void finish(nexar__seedc_t *s, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finish(nexar__seedc_t *s, int rc, const char *fmt, ...) {
  if (s->done) return;
  s->done = true;
  s->rc = rc;
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
  }
}

/* ---- The output queue. */

int nexar__seedc_queue(nexar__seedc_t *s, int slot, const uint8_t *head,
                       size_t head_len, const uint8_t *shared,
                       size_t shared_len, bool persistent) {
  if (nexar__seedc_grow(s, &s->oq, &s->oq_cap, s->noq + 1, sizeof(*s->oq)) <
          0 ||
      nexar__seedc_grow(s, &s->ob, &s->ob_cap, s->ob_len + head_len, 1) < 0)
    return NEXAR_ERR_NOMEM;
  nexar__seedc_out_t *o = &s->oq[s->noq++];
  o->conn = s->cs[slot].h;
  o->off = s->ob_len;
  o->len = head_len;
  o->shared = shared;
  o->shared_len = shared_len;
  o->persistent = persistent;
  memcpy(s->ob + s->ob_len, head, head_len);
  s->ob_len += head_len;
  s->sent_bytes += head_len + shared_len;
  return 0;
}

bool nexar__seedc_next(nexar__seedc_t *s, nexar__seedc_msg_t *m) {
  if (s->oq_pos == s->noq) {
    s->noq = s->oq_pos = s->ob_len = 0;
    for (size_t i = 0; i < s->ntmp; i++) nexar__seedc_dealloc(s, s->tmp[i]);
    s->ntmp = 0;
    return false;
  }
  const nexar__seedc_out_t *o = &s->oq[s->oq_pos++];
  m->conn = o->conn;
  m->head = s->ob + o->off;
  m->head_len = o->len;
  m->shared = o->shared;
  m->shared_len = o->shared_len;
  m->persistent = o->persistent;
  return true;
}

void nexar__seedc_reject(nexar__seedc_t *s, int slot, int code,
                         const char *reason) {
  uint8_t frame[NEXAR__SEED_FRAME_HDR + 8 + NEXAR__REASON_MAX];
  int n = nexar__seed_reject_encode(code, reason, frame, sizeof(frame));
  if (n > 0) (void)nexar__seedc_queue(s, slot, frame, (size_t)n, NULL, 0, 0);
}

void nexar__seedc_refuse(nexar__seedc_t *s, int slot, int code,
                         const char *why) {
  NEXAR__WARN(NEXAR__SUB_BOOTSTRAP, "seed: refused worker at %s: %s",
              s->cs[slot].name, why);
  nexar__seedc_reject(s, slot, code, why);
}

/* ---- Setup and connections. */

int nexar__seedc_new(const nexar__seedc_cfg_t *cfg, nexar__seedc_t **out) {
  if (!cfg || !out || cfg->world < 1 || cfg->world > NEXAR__SEEDC_MAX_WORLD ||
      cfg->timeout_ms < 1 || !cfg->key || cfg->max_world < 0 ||
      cfg->max_world > (int)NEXAR__ELASTIC_MAX_IDS)
    return NEXAR_ERR_INVALID_ARG;
  nexar__seedc_t tmp = {0};
  if (cfg->mem) tmp.mem = *cfg->mem;
  nexar__seedc_t *s = nexar__seedc_realloc(&tmp, NULL, sizeof(*s));
  if (!s) return NEXAR_ERR_NOMEM;
  *s = tmp;
  s->world = cfg->world;
  s->max_world = cfg->max_world > cfg->world ? cfg->max_world : 0;
  s->timeout_ms = cfg->timeout_ms;
  s->deadline = cfg->now + (uint64_t)cfg->timeout_ms * 1000000ull;
  memcpy(s->key, cfg->key, sizeof(s->key));
  s->free_slot = -1;
  s->req = nexar__seedc_realloc(s, NULL, (size_t)s->world * sizeof(int));
  if (!s->req) {
    nexar__seedc_free(s);
    return NEXAR_ERR_NOMEM;
  }
  for (int r = 0; r < s->world; r++) s->req[r] = -1;
  *out = s;
  return 0;
}

void nexar__seedc_free(nexar__seedc_t *s) {
  if (!s) return;
  for (int i = 0; i < s->nw; i++) nexar__seedc_dealloc(s, s->w[i].cert);
  for (size_t i = 0; i < s->ntmp; i++) nexar__seedc_dealloc(s, s->tmp[i]);
  void *bufs[] = {s->cs, s->w,  s->req, s->jw, s->ids,
                  s->oq, s->ob, s->wf,  s->tmp};
  for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
    nexar__seedc_dealloc(s, bufs[i]);
  memset(s->key, 0, sizeof(s->key));
  nexar__seedc_mem_t mem = s->mem;
  nexar__seedc_t tmp = {.mem = mem};
  nexar__seedc_dealloc(&tmp, s);
}

int nexar__seedc_open(nexar__seedc_t *s, void *conn,
                      const uint8_t exporter[NEXAR__MAC_BYTES],
                      const nexar__waddr_t *observed, const char *name) {
  int slot = s->free_slot;
  if (slot >= 0) {
    s->free_slot = s->cs[slot].idx;
  } else {
    if (nexar__seedc_grow(s, &s->cs, &s->cs_cap, (size_t)s->ncs + 1,
                          sizeof(*s->cs)) < 0)
      return NEXAR_ERR_NOMEM;
    slot = s->ncs++;
  }
  nexar__seedc_conn_t *c = &s->cs[slot];
  memset(c, 0, sizeof(*c));
  c->h = conn;
  c->name = name ? name : "?";
  c->observed = *observed;
  c->kind = NEXAR__SEEDC_NEW;
  c->idx = -1;
  memcpy(c->exp, exporter, NEXAR__MAC_BYTES);
  uint8_t mac[NEXAR__MAC_BYTES];
  uint8_t frame[NEXAR__SEED_FRAME_HDR + NEXAR__MAC_BYTES];
  nexar__mac(s->key, "nexar seed proof v1", c->exp, mac);
  int n = nexar__seed_proof_encode(mac, frame, sizeof(frame));
  if (n < 0 || nexar__seedc_queue(s, slot, frame, (size_t)n, NULL, 0, 0) < 0) {
    nexar__seedc_release(s, slot);
    return NEXAR_ERR_NOMEM;
  }
  return slot;
}

void nexar__seedc_release(nexar__seedc_t *s, int slot) {
  s->cs[slot].h = NULL;
  s->cs[slot].kind = NEXAR__SEEDC_FREE;
  s->cs[slot].idx = s->free_slot;
  s->free_slot = slot;
}

int nexar__seedc_check_proof(nexar__seedc_t *s, int slot, const uint8_t *proof,
                             char *why) {
  uint8_t mac[NEXAR__MAC_BYTES];
  nexar__mac(s->key, "nexar worker proof v1", s->cs[slot].exp, mac);
  if (nexar__ct_equal(mac, proof, NEXAR__MAC_BYTES)) return 0;
  snprintf(why, NEXAR__REASON_MAX, "wrong cluster secret");
  return NEXAR_ERR_AUTH;
}

bool nexar__seedc_loopback(const nexar__waddr_t *a) {
  static const uint8_t v6lo[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                   0, 0, 0, 0, 0, 0, 0, 1};
  return (a->family == 4 && a->ip[0] == 127) ||
         (a->family == 6 && memcmp(a->ip, v6lo, 16) == 0);
}

void nexar__seedc_record(nexar__seedc_t *s, int slot,
                         const nexar__seed_hello_t *h,
                         nexar__seedc_worker_t *w) {
  memset(w, 0, sizeof(*w));
  w->slot = slot;
  w->req = h->rank;
  w->rank = -1;
  /* The address peers dial: the advertised one, else the observed one. */
  w->e.addr = h->has_addr ? h->advertise : s->cs[slot].observed;
  memcpy(w->e.fingerprint, h->fingerprint, NEXAR__FP_BYTES);
  w->e.host.key = h->host_key;
  w->e.host.pid = h->pid;
  memcpy(w->e.host.nonce, h->nonce, NEXAR__NONCE_BYTES);
  memcpy(w->host, h->host, sizeof(w->host));
  w->job = h->job;
}

/* ---- Formation. */

/* The WELCOME of every worker, encoded once into s->wf: only the rank (the
 * body's first field) differs between workers. Returns 0 or an error code
 * (finish() called). */
static int encode_roster(nexar__seedc_t *s, nexar__roster_entry_t *roster,
                         const int *owner) {
  /* A full mesh pins each peer's certificate by its fingerprint during the
   * TLS handshake; sparse topologies also need every rank's certificate
   * (its relay key) for the ranks they never connect to. */
  bool certs = strcmp(s->topo, "full") != 0;
  const uint8_t **der = NULL;
  uint16_t *der_len = NULL;
  size_t cap = 16 + (size_t)s->world * 96 + 64;
  int rc = NEXAR_ERR_NOMEM;
  if (certs) {
    der = nexar__seedc_realloc(s, NULL, (size_t)s->world * sizeof(*der));
    der_len =
        nexar__seedc_realloc(s, NULL, (size_t)s->world * sizeof(*der_len));
    if (!der || !der_len) goto out;
  }
  for (int r = 0; r < s->world; r++) {
    const nexar__seedc_worker_t *w = &s->w[owner[r]];
    roster[r] = w->e;
    if (certs) {
      der[r] = w->cert;
      der_len[r] = w->cert_len;
      cap += 2u + w->cert_len;
    }
  }
  s->wf = nexar__seedc_realloc(s, NULL, cap);
  if (!s->wf) goto out;
  /* Rank 0's settings become the job's (docs/configuration.md). */
  s->job = s->w[owner[0]].job;
  int n = nexar__seed_welcome_encode_job(0, (uint32_t)s->world, roster, der,
                                         der_len, &s->job, s->wf, cap);
  if (n < 0) {
    rc = NEXAR_ERR_INTERNAL;
    goto out;
  }
  s->wf_len = (size_t)n;
  uint8_t *fit = nexar__seedc_realloc(s, s->wf, s->wf_len);
  if (fit) s->wf = fit;
  rc = 0;
out:
  nexar__seedc_dealloc(s, der);
  nexar__seedc_dealloc(s, der_len);
  if (rc == NEXAR_ERR_NOMEM)
    finish(s, rc, "out of memory forming the cluster of %d", s->world);
  else if (rc < 0)
    finish(s, rc,
           "cannot encode the welcome: a roster of %d ranks%s exceeds the "
           "%u-byte frame limit",
           s->world, certs ? " with certificates" : "", NEXAR__SEED_MAX_BODY);
  return rc;
}

/* Never tell a worker on another host to dial a loopback address. Returns
 * 0, or NEXAR_ERR_INVALID_ARG after a REJECT to every worker. */
static int check_hosts(nexar__seedc_t *s) {
  int lo = -1, remote = -1;
  for (int i = 0; i < s->nw; i++) {
    if (nexar__seedc_loopback(&s->w[i].e.addr))
      lo = i;
    else
      remote = i;
  }
  if (lo < 0 || remote < 0) return 0;
  char msg[NEXAR__REASON_MAX];
  snprintf(msg, sizeof(msg),
           "rank %d (%s pid %u) is reachable only at a loopback address "
           "while rank %d (%s) is on another host; set NEXAR_BIND_ADDR or "
           "NEXAR_ADVERTISE_ADDR to a routable address",
           s->w[lo].rank, s->w[lo].host, s->w[lo].e.host.pid, s->w[remote].rank,
           s->w[remote].host);
  for (int i = 0; i < s->nw; i++)
    nexar__seedc_reject(s, s->w[i].slot, NEXAR_ERR_INVALID_ARG, msg);
  finish(s, NEXAR_ERR_INVALID_ARG, "%s", msg);
  return NEXAR_ERR_INVALID_ARG;
}

/* All world_size workers are here: ranks, one roster, a WELCOME each. */
static int form(nexar__seedc_t *s) {
  /* Requested ranks first, then arrival order fills the free ranks. */
  int rc = NEXAR_ERR_NOMEM;
  int *owner = nexar__seedc_realloc(s, NULL, (size_t)s->world * sizeof(int));
  nexar__roster_entry_t *roster =
      nexar__seedc_realloc(s, NULL, (size_t)s->world * sizeof(*roster));
  if (!owner || !roster) {
    finish(s, rc, "out of memory forming the cluster of %d", s->world);
    goto out;
  }
  memcpy(owner, s->req, (size_t)s->world * sizeof(int));
  for (int r = 0; r < s->world; r++)
    if (owner[r] >= 0) s->w[owner[r]].rank = r;
  int next = 0;
  for (int i = 0; i < s->nw; i++) {
    if (s->w[i].req >= 0) continue;
    while (next < s->world && owner[next] >= 0) next++;
    owner[next] = i;
    s->w[i].rank = next;
  }
  if ((rc = check_hosts(s)) < 0) goto out;
  if ((rc = encode_roster(s, roster, owner)) < 0) {
    /* Nobody waits for a roster that will not come. */
    for (int i = 0; i < s->nw; i++)
      nexar__seedc_reject(s, s->w[i].slot, rc, s->err);
    goto out;
  }
  /* Each worker's WELCOME: the frame header and its rank, then the shared
   * rest of the one encoding. */
  uint8_t head[WELCOME_HEAD];
  memcpy(head, s->wf, WELCOME_HEAD);
  for (int i = 0; i < s->nw; i++) {
    nexar__put_u32(head + NEXAR__SEED_FRAME_HDR, (uint32_t)s->w[i].rank);
    rc = nexar__seedc_queue(s, s->w[i].slot, head, WELCOME_HEAD,
                            s->wf + WELCOME_HEAD, s->wf_len - WELCOME_HEAD,
                            true);
    if (rc < 0) {
      finish(s, rc, "out of memory sending the welcomes");
      goto out;
    }
  }
  s->formed = true;
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP, "seed: cluster of %d formed (roster %zu B)",
              s->world, s->wf_len);
  /* The roster of every id assigned is kept: for observers (QUERY), and
   * on an elastic seed for the joiners. */
  s->ids = roster;
  s->ids_cap = (size_t)s->world;
  s->nids = s->current = s->world;
  roster = NULL;
out:
  nexar__seedc_dealloc(s, owner);
  nexar__seedc_dealloc(s, roster);
  return rc == NEXAR_ERR_NOMEM ? rc : 0;
}

/* ---- Frames. */

/* The HELLO's certificate must be the one its fingerprint names and carry
 * a relay key (the roster hands it to the other workers on sparse
 * topologies, docs/topology.md). Returns 0 or a NEXAR_ERR_* code. */
static int hello_cert_check(const nexar__seed_hello_t *h) {
  uint8_t pub[32];
  if (!h->cert_len) return NEXAR_ERR_PROTO;
  return nexar__cert_relay_key(h->cert, h->cert_len, h->fingerprint, pub);
}

/* What refuses HELLO |h| from a worker of the cluster being formed: 0 and
 * |why| untouched when nothing does. */
static int hello_refusal(nexar__seedc_t *s, const nexar__seed_hello_t *h,
                         char *why) {
  if (s->formed) {
    snprintf(why, NEXAR__REASON_MAX, "the cluster of %d is already formed%s",
             s->world, s->max_world ? " (set NEXAR_JOIN=1 to join it)" : "");
    return NEXAR_ERR_INVALID_USAGE;
  }
  if (s->done) {
    snprintf(why, NEXAR__REASON_MAX, "the seed has ended: %s", s->err);
    return NEXAR_ERR_INVALID_USAGE;
  }
  if (h->world_size && h->world_size != s->world) {
    snprintf(why, NEXAR__REASON_MAX,
             "world size mismatch: the worker expects %d, the seed %d",
             h->world_size, s->world);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (h->rank >= s->world) {
    snprintf(why, NEXAR__REASON_MAX,
             "requested rank %d is outside world size %d", h->rank, s->world);
    return NEXAR_ERR_INVALID_ARG;
  }
  if (h->rank >= 0 && s->req[h->rank] >= 0) {
    const nexar__seedc_worker_t *o = &s->w[s->req[h->rank]];
    snprintf(why, NEXAR__REASON_MAX,
             "rank %d requested by %s pid %u is already taken by %s pid %u",
             h->rank, h->host, h->pid, o->host, o->e.host.pid);
    return NEXAR_ERR_INVALID_ARG;
  }
  return 0;
}

/* A HELLO on connection |slot| (decoded into s->hello). */
static int on_hello(nexar__seedc_t *s, int slot) {
  const nexar__seed_hello_t *h = &s->hello;
  char why[NEXAR__REASON_MAX];
  int code = nexar__seedc_check_proof(s, slot, h->proof, why), cert_rc;
  if (code == NEXAR_ERR_AUTH) {
    /* refused below, with |why| */
  } else if ((cert_rc = hello_cert_check(h)) != 0) {
    code = cert_rc;
    snprintf(why, sizeof(why), "the worker's certificate (%u bytes) %s",
             h->cert_len,
             cert_rc == NEXAR_ERR_AUTH ? "does not hash to its fingerprint"
                                       : "is missing or carries no relay key");
  } else if (s->nw && strcmp(h->topo, s->topo) != 0) {
    code = NEXAR_ERR_INVALID_ARG;
    snprintf(why, sizeof(why),
             "NEXAR_TOPOLOGY differs: this worker (%s pid %u) has '%s', the "
             "first worker (%s pid %u) '%s'; every worker needs the same",
             h->host, h->pid, h->topo, s->w[0].host, s->w[0].e.host.pid,
             s->topo);
  } else if (h->join && strcmp(h->topo, "full") != 0) {
    code = NEXAR_ERR_UNSUPPORTED;
    snprintf(why, sizeof(why),
             "elastic joins need NEXAR_TOPOLOGY=full (this worker has '%s')",
             h->topo);
  } else if (h->join) {
    return nexar__seedc_join_hello(s, slot);
  } else {
    code = hello_refusal(s, h, why);
  }
  if (code) {
    nexar__seedc_refuse(s, slot, code, why);
    return 0;
  }
  if (nexar__seedc_grow(s, &s->w, &s->w_cap, (size_t)s->nw + 1, sizeof(*s->w)) <
      0)
    return NEXAR_ERR_NOMEM;
  nexar__seedc_worker_t *w = &s->w[s->nw];
  nexar__seedc_record(s, slot, h, w);
  if (strcmp(h->topo, "full") != 0) {
    /* Sparse topologies: the roster carries every certificate. */
    if (!(w->cert = nexar__seedc_realloc(s, NULL, h->cert_len)))
      return NEXAR_ERR_NOMEM;
    memcpy(w->cert, h->cert, h->cert_len);
    w->cert_len = h->cert_len;
  }
  if (!s->nw) memcpy(s->topo, h->topo, sizeof(s->topo));
  if (h->rank >= 0) s->req[h->rank] = s->nw;
  s->cs[slot].kind = NEXAR__SEEDC_WORKER;
  s->cs[slot].idx = s->nw++;
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP, "seed: worker %d/%d arrived from %s", s->nw,
              s->world, s->cs[slot].name);
  return s->nw == s->world ? form(s) : 0;
}

/* An observer's QUERY (live inspection, docs/debugging.md): with the
 * observer proof of the secret on this session, the ROSTER of every id
 * assigned; without it NEXAR_ERR_AUTH (the driver closes the connection
 * and nothing is sent); before formation, or out of memory, a REJECT. */
static int on_query(nexar__seedc_t *s, int slot, const uint8_t *body,
                    size_t len, const char **why) {
  uint8_t mac[NEXAR__MAC_BYTES], want[NEXAR__MAC_BYTES];
  if (nexar__seed_proof_decode(mac, body, len) < 0) {
    *why = "malformed query";
    return NEXAR_ERR_PROTO;
  }
  nexar__mac(s->key, NEXAR__OBSERVER_LABEL, s->cs[slot].exp, want);
  if (!nexar__ct_equal(mac, want, NEXAR__MAC_BYTES)) {
    *why = "observer not authenticated";
    return NEXAR_ERR_AUTH;
  }
  if (!s->formed || !s->ids) {
    nexar__seedc_reject(s, slot, NEXAR_ERR_INVALID_USAGE,
                        "the cluster is not formed yet");
    return 0;
  }
  size_t cap = 64 + (size_t)s->nids * 96;
  uint8_t *frame = nexar__seedc_realloc(s, NULL, cap);
  int k = frame
              ? nexar__seed_roster_encode((uint32_t)s->nids, s->ids, frame, cap)
              : NEXAR_ERR_NOMEM;
  if (k < 0 ||
      nexar__seedc_queue(s, slot, frame, (size_t)k, NULL, 0, false) < 0)
    nexar__seedc_reject(s, slot, NEXAR_ERR_NOMEM, "seed out of memory");
  nexar__seedc_dealloc(s, frame);
  return 0;
}

int nexar__seedc_frame(nexar__seedc_t *s, int slot, uint8_t type,
                       const uint8_t *body, size_t len, const char **why) {
  if (slot < 0 || slot >= s->ncs || s->cs[slot].kind == NEXAR__SEEDC_FREE)
    return NEXAR_ERR_INVALID_ARG;
  if ((type != NEXAR__SEED_HELLO && type != NEXAR__SEED_ADMIT &&
       type != NEXAR__SEED_QUERY) ||
      s->cs[slot].kind != NEXAR__SEEDC_NEW) {
    *why = "unexpected seed frame";
    return NEXAR_ERR_PROTO;
  }
  if (type == NEXAR__SEED_QUERY) return on_query(s, slot, body, len, why);
  if (type == NEXAR__SEED_ADMIT)
    return nexar__seedc_admit(s, slot, body, len, why);
  if (nexar__seed_hello_decode(&s->hello, body, len) < 0) {
    *why = "malformed hello";
    return NEXAR_ERR_PROTO;
  }
  return on_hello(s, slot);
}

void nexar__seedc_closed(nexar__seedc_t *s, int slot, int code,
                         const char *reason) {
  (void)code;
  if (slot < 0 || slot >= s->ncs || s->cs[slot].kind == NEXAR__SEEDC_FREE)
    return;
  nexar__seedc_conn_t *c = &s->cs[slot];
  if (c->kind == NEXAR__SEEDC_JOINER) {
    nexar__seedc_worker_t *j = &s->jw[c->idx];
    NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                "seed: pending joiner %s pid %u at %s left: %s", j->host,
                j->e.host.pid, c->name, reason);
    nexar__seedc_forget_joiner(s, c->idx);
  } else if (c->kind == NEXAR__SEEDC_WORKER && s->formed) {
    /* A worker closes the seed link once it holds the welcome. */
    s->w[c->idx].slot = -1;
    s->w[c->idx].delivered = true;
  } else if (c->kind == NEXAR__SEEDC_WORKER) {
    NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                "seed: worker at %s left before formation: %s", c->name,
                reason);
    /* The last to arrive takes its place (and its place in arrival
     * order), as it always has. */
    int i = c->idx, last = --s->nw;
    nexar__seedc_worker_t *w = &s->w[i];
    if (w->req >= 0) s->req[w->req] = -1;
    nexar__seedc_dealloc(s, w->cert);
    if (i != last) {
      *w = s->w[last];
      s->cs[w->slot].idx = i;
      if (w->req >= 0) s->req[w->req] = i;
    }
  }
  nexar__seedc_release(s, slot);
}

/* ---- Time. */

/* The formation deadline passed: who is missing, a REJECT to everyone
 * waiting, NEXAR_ERR_TIMEOUT. O(world), once. */
static void timed_out(nexar__seedc_t *s) {
  char missing[256] = "";
  size_t o = 0;
  int unrequested = 0;
  for (int i = 0; i < s->nw; i++)
    if (s->w[i].req < 0) unrequested++;
  int nmissing = s->world - s->nw;
  for (int r = 0; r < s->world && o < sizeof(missing) - 16; r++)
    if (s->req[r] < 0 && unrequested-- <= 0)
      o += (size_t)snprintf(missing + o, sizeof(missing) - o, "%s%d",
                            o ? ", " : "", r);
  char msg[NEXAR__REASON_MAX];
  snprintf(msg, sizeof(msg),
           "cluster formation timed out after %d ms: %d of %d workers "
           "arrived; missing %d (rank%s %s)",
           s->timeout_ms, s->nw, s->world, nmissing, nmissing > 1 ? "s" : "",
           missing[0] ? missing : "unassigned");
  for (int i = 0; i < s->nw; i++)
    nexar__seedc_reject(s, s->w[i].slot, NEXAR_ERR_TIMEOUT, msg);
  for (int i = s->jhead; i < s->jlen; i++)
    if (s->jw[i].slot >= 0)
      nexar__seedc_reject(s, s->jw[i].slot, NEXAR_ERR_TIMEOUT, msg);
  finish(s, NEXAR_ERR_TIMEOUT, "%s", msg);
}

void nexar__seedc_tick(nexar__seedc_t *s, uint64_t now,
                       bool (*idle)(void *conn)) {
  if (s->done) return;
  if (!s->formed) {
    if (now >= s->deadline) timed_out(s);
    return;
  }
  /* Workers before s->dcur are delivered, and stay so. */
  for (; s->dcur < s->nw; s->dcur++) {
    nexar__seedc_worker_t *w = &s->w[s->dcur];
    if (!w->delivered && !(w->slot >= 0 && idle && idle(s->cs[w->slot].h)))
      return;
    w->delivered = true;
  }
  finish(s, NEXAR_OK, NULL);
}

bool nexar__seedc_result(const nexar__seedc_t *s, int *rc, const char **err) {
  if (!s->done) return false;
  *rc = s->rc;
  *err = s->err;
  return true;
}

void nexar__seedc_stats(const nexar__seedc_t *s, nexar__seedc_stats_t *st) {
  st->workers = s->nw;
  st->pending = s->njw;
  st->ids = s->nids;
  st->roster_bytes = s->wf_len;
  st->sent_bytes = s->sent_bytes;
}
