/*
 * The seed: discovery and admission only. Workers connect over QUIC; the
 * seed proves it knows the cluster secret (a MAC bound to the TLS session),
 * checks the worker's proof the same way, collects HELLOs until world_size
 * workers have arrived, assigns ranks (requested ranks first, then arrival
 * order) and sends every worker the roster: each rank's address and
 * certificate fingerprint. It never sees data traffic.
 *
 * Elastic mode (max_world_size > world_size, docs/elastic.md): the seed
 * stays up after formation, keeps the roster of every stable id it has
 * assigned, and holds joiners (HELLO with the join flag) pending, at most
 * max_world_size minus the members it knows of. At an elastic checkpoint
 * the members' leader sends ADMIT; the seed gives the pending joiners the
 * next ids in arrival order, sends each a JOIN (its id, the roster, the new
 * world) and answers ADMITTED (the joiners' ids, addresses, fingerprints).
 */
#include <errno.h>
#include <stddef.h>
#include <gnutls/gnutls.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/seed_int.h"
#include "cluster/cluster.h"

typedef struct worker {
  nexar__link_t *conn;
  nexar__seed_hello_t hello;
  nexar__waddr_t addr; /* address peers will dial */
  int rank;
  bool welcomed;
  bool delivered;
} worker_t;

struct nexar_seed {
  nexar__ep_t ep;
  uint8_t key[32];
  int world;
  uint64_t deadline;
  int timeout_ms;
  worker_t *w;
  int nw;
  bool formed;
  /* Elastic mode: max_world > world, else 0. After formation: the roster
   * of every id assigned (nids of them), the members of the world as of
   * the last admission, and the joiners waiting, in arrival order. */
  int max_world;
  nexar__roster_entry_t *ids;
  int nids;
  int current;
  worker_t *jw;
  int njw;
  /* Classic mode: the roster formed, kept for observers (QUERY). */
  nexar__roster_entry_t *roster;
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

static void finish(nexar_seed_t *s, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finish(nexar_seed_t *s, int rc, const char *fmt, ...) {
  pthread_mutex_lock(&s->mu);
  if (!s->done) {
    s->done = true;
    s->rc = rc;
    if (fmt) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(s->err, sizeof(s->err), fmt, ap);
      va_end(ap);
      NEXAR__WARN(NEXAR__SUB_BOOTSTRAP, "seed: %s", s->err);
    }
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
}

static void reject(nexar__link_t *c, int code, const char *reason) {
  uint8_t frame[NEXAR__SEED_FRAME_HDR + 8 + NEXAR__REASON_MAX];
  int n = nexar__seed_reject_encode(code, reason, frame, sizeof(frame));
  if (n > 0) nexar__link_seed_send(c, frame, (size_t)n);
}

static worker_t *find_in(worker_t *w, int n, nexar__link_t *c) {
  for (int i = 0; i < n; i++)
    if (w[i].conn == c) return &w[i];
  return NULL;
}

static worker_t *find_worker(nexar_seed_t *s, nexar__link_t *c) {
  return find_in(s->w, s->nw, c);
}

/* Closes |c| for a protocol violation |why|. Returns NEXAR_ERR_PROTO. */
static int proto_close(nexar__link_t *c, const char *why) {
  nexar__link_close(c, NEXAR__CLOSE_PROTO, why);
  nexar__link_fail(c, NEXAR_ERR_PROTO, why);
  return NEXAR_ERR_PROTO;
}

/* Checks that |proof| is the worker proof of the cluster secret on |c|'s
 * TLS session (constant-time). Returns 0; NEXAR_ERR_AUTH with |why| (of
 * NEXAR__REASON_MAX bytes) set, to refuse; NEXAR_ERR_TRANSPORT. */
static int check_proof(nexar_seed_t *s, nexar__link_t *c, const uint8_t *proof,
                       char *why) {
  uint8_t exp[32], mac[32];
  if (nexar__link_exporter(c, exp) < 0) return NEXAR_ERR_TRANSPORT;
  nexar__mac(s->key, "nexar worker proof v1", exp, mac);
  if (nexar__ct_equal(mac, proof, 32)) return 0;
  snprintf(why, NEXAR__REASON_MAX, "wrong cluster secret");
  return NEXAR_ERR_AUTH;
}

/* The address peers dial for a worker that sent |h| on |c|. */
static void dial_addr(nexar__link_t *c, const nexar__seed_hello_t *h,
                      nexar__waddr_t *out) {
  if (h->has_addr)
    *out = h->advertise;
  else
    nexar__addr_to_wire((const struct sockaddr *)&c->remote, out);
}

static bool waddr_loopback(const nexar__waddr_t *a) {
  static const uint8_t v6lo[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                   0, 0, 0, 0, 0, 0, 0, 1};
  return (a->family == 4 && a->ip[0] == 127) ||
         (a->family == 6 && memcmp(a->ip, v6lo, 16) == 0);
}

/* A worker's roster entry: where it listens, its fingerprint, and where
 * it runs (from its HELLO). */
static void roster_entry(nexar__roster_entry_t *e, const worker_t *w) {
  memset(e, 0, sizeof(*e));
  e->addr = w->addr;
  memcpy(e->fingerprint, w->hello.fingerprint, NEXAR__FP_BYTES);
  e->host.key = w->hello.host_key;
  e->host.pid = w->hello.pid;
  memcpy(e->host.nonce, w->hello.nonce, NEXAR__NONCE_BYTES);
}

static void form(nexar_seed_t *s) {
  /* Requested ranks first, then arrival order fills the free ranks. */
  int *owner = malloc((size_t)s->world * sizeof(int));
  nexar__roster_entry_t *roster = calloc((size_t)s->world, sizeof(*roster));
  /* A full mesh pins each peer's certificate by its fingerprint during the
   * TLS handshake; sparse topologies also need every rank's certificate
   * (its relay key) for the ranks they never connect to. */
  bool certs = s->nw && strcmp(s->w[0].hello.topo, "full") != 0;
  const uint8_t **der = calloc((size_t)s->world, sizeof(*der));
  uint16_t *der_len = calloc((size_t)s->world, sizeof(*der_len));
  size_t cap = 16 + (size_t)s->world * (96 + (certs ? 2 + NEXAR__CERT_MAX : 0));
  uint8_t *frame = malloc(cap);
  if (!owner || !roster || !frame || !der || !der_len) {
    finish(s, NEXAR_ERR_NOMEM, "out of memory forming the cluster");
    goto out;
  }
  for (int r = 0; r < s->world; r++) owner[r] = -1;
  for (int i = 0; i < s->nw; i++)
    if (s->w[i].hello.rank >= 0) owner[s->w[i].rank = s->w[i].hello.rank] = i;
  int next = 0;
  for (int i = 0; i < s->nw; i++) {
    if (s->w[i].hello.rank >= 0) continue;
    while (next < s->world && owner[next] >= 0) next++;
    owner[next] = i;
    s->w[i].rank = next;
  }
  /* Never tell a worker on another host to dial a loopback address. */
  int lo = -1, remote = -1;
  for (int i = 0; i < s->nw; i++) {
    if (waddr_loopback(&s->w[i].addr))
      lo = i;
    else
      remote = i;
  }
  if (lo >= 0 && remote >= 0) {
    char msg[NEXAR__REASON_MAX];
    snprintf(msg, sizeof(msg),
             "rank %d (%s pid %u) is reachable only at a loopback address "
             "while rank %d (%s) is on another host; set NEXAR_BIND_ADDR or "
             "NEXAR_ADVERTISE_ADDR to a routable address",
             s->w[lo].rank, s->w[lo].hello.host, s->w[lo].hello.pid,
             s->w[remote].rank, s->w[remote].hello.host);
    for (int i = 0; i < s->nw; i++)
      reject(s->w[i].conn, NEXAR_ERR_INVALID_ARG, msg);
    finish(s, NEXAR_ERR_INVALID_ARG, "%s", msg);
    goto out;
  }
  for (int r = 0; r < s->world; r++) {
    worker_t *w = &s->w[owner[r]];
    roster_entry(&roster[r], w);
    der[r] = w->hello.cert;
    der_len[r] = w->hello.cert_len;
  }
  for (int i = 0; i < s->nw; i++) {
    int n = nexar__seed_welcome_encode_certs(
        (uint32_t)s->w[i].rank, (uint32_t)s->world, roster, certs ? der : NULL,
        certs ? der_len : NULL, frame, cap);
    if (n < 0 || nexar__link_seed_send(s->w[i].conn, frame, (size_t)n) < 0) {
      finish(s, NEXAR_ERR_INTERNAL, "cannot encode the welcome");
      goto out;
    }
    s->w[i].welcomed = true;
  }
  s->formed = true;
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP, "seed: cluster of %d formed", s->world);
  if (s->max_world) {
    /* Elastic: the roster of every id assigned is kept for the joiners. */
    s->ids = roster;
    s->nids = s->current = s->world;
  } else {
    s->roster = roster;
  }
  roster = NULL;
out:
  free(owner);
  free(roster);
  free(der);
  free(der_len);
  free(frame);
}

/* The HELLO's certificate must be the one its fingerprint names and carry
 * a relay key (the roster hands it to the other workers on sparse
 * topologies, docs/topology.md). Returns 0 or a NEXAR_ERR_* code. */
static int hello_cert_check(const nexar__seed_hello_t *h) {
  uint8_t pub[32];
  if (!h->cert_len) return NEXAR_ERR_PROTO;
  return nexar__cert_relay_key(h->cert, h->cert_len, h->fingerprint, pub);
}

static void refuse(nexar__link_t *c, int code, const char *why) {
  NEXAR__WARN(NEXAR__SUB_BOOTSTRAP, "seed: refused worker at %s: %s",
              c->remote_str, why);
  reject(c, code, why);
}

/* A HELLO with the join flag: held pending until a checkpoint admits it. */
static int on_join_hello(nexar_seed_t *s, nexar__link_t *c,
                         const nexar__seed_hello_t *h) {
  char why[NEXAR__REASON_MAX];
  int members = s->formed ? s->current : s->world;
  if (!s->max_world) {
    snprintf(why, sizeof(why),
             "this seed is not elastic (start it with a max world size "
             "above its world size of %d, e.g. nexar-seed --max-world N)",
             s->world);
    refuse(c, NEXAR_ERR_INVALID_USAGE, why);
    return 0;
  }
  if (members + s->njw >= s->max_world ||
      s->nids + s->njw >= (int)NEXAR__ELASTIC_MAX_IDS) {
    snprintf(why, sizeof(why),
             "the elastic job is full: %d members and %d pending joiners of "
             "at most %d (max world size)",
             members, s->njw, s->max_world);
    refuse(c, NEXAR_ERR_INVALID_USAGE, why);
    return 0;
  }
  worker_t *nw = realloc(s->jw, (size_t)(s->njw + 1) * sizeof(*nw));
  if (!nw) return NEXAR_ERR_NOMEM;
  s->jw = nw;
  worker_t *w = &s->jw[s->njw++];
  memset(w, 0, sizeof(*w));
  w->conn = c;
  w->hello = *h;
  w->rank = -1;
  dial_addr(c, h, &w->addr);
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP,
              "seed: joiner %s pid %u at %s pending (%d pending, %d members, "
              "max %d)",
              h->host, h->pid, c->remote_str, s->njw, members, s->max_world);
  return 0;
}

static void forget_joiner(nexar_seed_t *s, int i) {
  memmove(&s->jw[i], &s->jw[i + 1], (size_t)(s->njw - i - 1) * sizeof(*s->jw));
  s->njw--;
}

/* Admits up to |room| pending joiners, in arrival order, into the world of
 * the members |a| lists: JOIN to each, ADMITTED to the leader on |c|. */
static int admit(nexar_seed_t *s, nexar__link_t *c,
                 const nexar__seed_admit_t *a, int room) {
  int rc = 0, k = 0;
  int n = (int)a->nstay;
  bool lo = waddr_loopback(&s->ids[nexar__id_at(a->ids, 0)].addr);
  nexar__joiner_t *j = calloc((size_t)(room > 0 ? room : 1), sizeof(*j));
  uint32_t *members = malloc((size_t)(n + room + 1) * sizeof(uint32_t));
  nexar__roster_entry_t *ids =
      realloc(s->ids, (size_t)(s->nids + room + 1) * sizeof(*ids));
  uint8_t *frame = NULL;
  size_t cap = NEXAR__SEED_FRAME_HDR + 24 + (size_t)(s->nids + room) * 96 +
               4 * (size_t)(n + room);
  if (ids) s->ids = ids;
  if (!j || !members || !ids || !(frame = malloc(cap))) {
    rc = NEXAR_ERR_NOMEM;
    goto out;
  }
  for (int i = 0; i < n; i++) members[i] = nexar__id_at(a->ids, (uint32_t)i);
  /* Never mix loopback and routable addresses in one world. */
  for (int i = 0; i < s->njw && k < room;) {
    worker_t *w = &s->jw[i];
    if (waddr_loopback(&w->addr) != lo) {
      char why[NEXAR__REASON_MAX];
      snprintf(why, sizeof(why),
               "joiner %s pid %u is reachable at a %s address while the "
               "members are %s; set NEXAR_BIND_ADDR or NEXAR_ADVERTISE_ADDR",
               w->hello.host, w->hello.pid, lo ? "routable" : "loopback",
               lo ? "on loopback" : "on other hosts");
      refuse(w->conn, NEXAR_ERR_INVALID_ARG, why);
      forget_joiner(s, i);
      continue;
    }
    j[k].id = (uint32_t)(s->nids + k);
    roster_entry(&j[k].e, w);
    s->ids[j[k].id] = j[k].e;
    members[n + k] = j[k].id;
    k++;
    i++;
  }
  nexar__seed_join_t jn = {.nids = (uint32_t)(s->nids + k),
                           .comm_id = a->comm_id,
                           .epoch = a->epoch,
                           .nmembers = (uint32_t)(n + k)};
  for (int i = 0; i < k; i++) {
    jn.id = j[i].id;
    int len = nexar__seed_join_encode(&jn, s->ids, members, frame, cap);
    if (len < 0 ||
        (rc = nexar__link_seed_send(s->jw[i].conn, frame, (size_t)len)) < 0) {
      rc = len < 0 ? NEXAR_ERR_INTERNAL : rc;
      goto out;
    }
  }
  /* The admitted leave the pending list; their connections close once the
   * JOIN is delivered. */
  if (k) memmove(s->jw, s->jw + k, (size_t)(s->njw - k) * sizeof(*s->jw));
  s->njw -= k;
  s->nids += k;
  s->current = n + k;
  int len = nexar__seed_admitted_encode((uint32_t)s->nids, j, (uint32_t)k,
                                        frame, cap);
  if (len < 0) {
    rc = NEXAR_ERR_INTERNAL;
    goto out;
  }
  rc = nexar__link_seed_send(c, frame, (size_t)len);
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP,
              "seed: admitted %d joiner%s into a world of %d (comm %llu epoch "
              "%u); %d still pending",
              k, k == 1 ? "" : "s", n + k, (unsigned long long)a->comm_id,
              a->epoch, s->njw);
out:
  free(j);
  free(members);
  free(frame);
  return rc;
}

/* ADMIT from the members' leader: checked, then admit(). */
static int on_admit(nexar_seed_t *s, nexar__link_t *c, const uint8_t *body,
                    size_t len) {
  nexar__seed_admit_t a;
  if (nexar__seed_admit_decode(&a, body, len) < 0)
    return proto_close(c, "malformed admit");
  char why[NEXAR__REASON_MAX];
  int code = check_proof(s, c, a.proof, why);
  if (code == NEXAR_ERR_TRANSPORT) return code;
  if (code == NEXAR_ERR_AUTH) {
    /* refused below, with |why| */
  } else if (!s->max_world) {
    code = NEXAR_ERR_UNSUPPORTED;
    snprintf(why, sizeof(why),
             "this seed is not elastic (max world size not above %d)",
             s->world);
  } else if (!s->formed) {
    code = NEXAR_ERR_INVALID_USAGE;
    snprintf(why, sizeof(why), "the cluster of %d is not formed yet", s->world);
  }
  for (uint32_t i = 0; !code && i < a.nstay; i++) {
    if ((int)nexar__id_at(a.ids, i) >= s->nids) {
      code = NEXAR_ERR_INVALID_ARG;
      snprintf(why, sizeof(why),
               "admit names member id %u but only %d ids were assigned",
               nexar__id_at(a.ids, i), s->nids);
    }
  }
  if (code) {
    refuse(c, code, why);
    return 0;
  }
  long room = s->max_world - (long)a.nstay;
  if (a.max_joiners != NEXAR__JOIN_UNLIMITED && (long)a.max_joiners < room)
    room = a.max_joiners;
  if (room > s->njw) room = s->njw;
  if (room > (long)NEXAR__ELASTIC_MAX_IDS - s->nids)
    room = (long)NEXAR__ELASTIC_MAX_IDS - s->nids;
  if (room < 0) room = 0;
  return admit(s, c, &a, (int)room);
}

static int on_frame(nexar__link_t *c, uint8_t type, const uint8_t *body,
                    size_t len) {
  nexar_seed_t *s = c->ep->owner;
  if ((type != NEXAR__SEED_HELLO && type != NEXAR__SEED_ADMIT &&
       type != NEXAR__SEED_QUERY) ||
      find_worker(s, c) || find_in(s->jw, s->njw, c))
    return proto_close(c, "unexpected seed frame");
  if (type == NEXAR__SEED_ADMIT) return on_admit(s, c, body, len);
  if (type == NEXAR__SEED_QUERY) return nexar__seed_on_query(c, body, len);
  nexar__seed_hello_t h;
  if (nexar__seed_hello_decode(&h, body, len) < 0)
    return proto_close(c, "malformed hello");
  char why[NEXAR__REASON_MAX];
  int code = check_proof(s, c, h.proof, why), cert_rc;
  if (code == NEXAR_ERR_TRANSPORT) return code;
  if (code == NEXAR_ERR_AUTH) {
    /* refused below, with |why| */
  } else if ((cert_rc = hello_cert_check(&h)) != 0) {
    code = cert_rc;
    snprintf(why, sizeof(why), "the worker's certificate (%u bytes) %s",
             h.cert_len,
             cert_rc == NEXAR_ERR_AUTH ? "does not hash to its fingerprint"
                                       : "is missing or carries no relay key");
  } else if (s->nw && strcmp(h.topo, s->w[0].hello.topo) != 0) {
    code = NEXAR_ERR_INVALID_ARG;
    snprintf(why, sizeof(why),
             "NEXAR_TOPOLOGY differs: this worker (%s pid %u) has '%s', the "
             "first worker (%s pid %u) '%s'; every worker needs the same",
             h.host, h.pid, h.topo, s->w[0].hello.host, s->w[0].hello.pid,
             s->w[0].hello.topo);
  } else if (h.join && strcmp(h.topo, "full") != 0) {
    code = NEXAR_ERR_UNSUPPORTED;
    snprintf(why, sizeof(why),
             "elastic joins need NEXAR_TOPOLOGY=full (this worker has '%s')",
             h.topo);
  } else if (h.join) {
    return on_join_hello(s, c, &h);
  } else if (s->formed) {
    code = NEXAR_ERR_INVALID_USAGE;
    snprintf(why, sizeof(why), "the cluster of %d is already formed%s",
             s->world, s->max_world ? " (set NEXAR_JOIN=1 to join it)" : "");
  } else if (h.world_size && h.world_size != s->world) {
    code = NEXAR_ERR_INVALID_ARG;
    snprintf(why, sizeof(why),
             "world size mismatch: the worker expects %d, the seed %d",
             h.world_size, s->world);
  } else if (h.rank >= s->world) {
    code = NEXAR_ERR_INVALID_ARG;
    snprintf(why, sizeof(why), "requested rank %d is outside world size %d",
             h.rank, s->world);
  } else if (h.rank >= 0) {
    for (int i = 0; i < s->nw; i++) {
      if (s->w[i].hello.rank == h.rank) {
        code = NEXAR_ERR_INVALID_ARG;
        snprintf(why, sizeof(why),
                 "rank %d requested by %s pid %u is already taken by %s "
                 "pid %u",
                 h.rank, h.host, h.pid, s->w[i].hello.host, s->w[i].hello.pid);
        break;
      }
    }
  }
  if (code) {
    refuse(c, code, why);
    return 0;
  }
  worker_t *nw = realloc(s->w, (size_t)(s->nw + 1) * sizeof(*nw));
  if (!nw) return NEXAR_ERR_NOMEM;
  s->w = nw;
  worker_t *w = &s->w[s->nw++];
  memset(w, 0, sizeof(*w));
  w->conn = c;
  w->hello = h;
  w->rank = -1;
  dial_addr(c, &h, &w->addr);
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP, "seed: worker %d/%d arrived from %s", s->nw,
              s->world, c->remote_str);
  if (s->nw == s->world) form(s);
  return 0;
}

static void seed_on_ready(nexar__link_t *c) {
  nexar_seed_t *s = c->ep->owner;
  uint8_t exp[32], mac[32];
  uint8_t frame[NEXAR__SEED_FRAME_HDR + NEXAR__MAC_BYTES];
  if (nexar__link_exporter(c, exp) < 0) {
    nexar__link_fail(c, NEXAR_ERR_TRANSPORT, "TLS exporter failed");
    return;
  }
  nexar__mac(s->key, "nexar seed proof v1", exp, mac);
  int n = nexar__seed_proof_encode(mac, frame, sizeof(frame));
  if (n > 0) nexar__link_seed_send(c, frame, (size_t)n);
}

static void seed_on_data(nexar__link_t *c, const uint8_t *d, size_t n) {
  int r = nexar__seed_feed(c, d, n, on_frame);
  if (r < 0 && c->state != NEXAR__CS_DEAD) {
    nexar__link_close(c, NEXAR__CLOSE_PROTO, nexar_strerror(r));
    nexar__link_fail(c, r, nexar_strerror(r));
  }
}

static void seed_on_closed(nexar__link_t *c) {
  nexar_seed_t *s = c->ep->owner;
  worker_t *w = find_worker(s, c);
  if (c->close_code == NEXAR__CLOSE_AUTH)
    NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                "seed: worker at %s refused this seed: %s", c->remote_str,
                c->close_reason);
  worker_t *j = find_in(s->jw, s->njw, c);
  if (j) {
    NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                "seed: pending joiner %s pid %u at %s left: %s", j->hello.host,
                j->hello.pid, c->remote_str, c->close_reason);
    forget_joiner(s, (int)(j - s->jw));
    return;
  }
  if (!w) return;
  if (w->welcomed) {
    /* A worker closes the seed link once it holds the welcome. */
    w->delivered = true;
  } else {
    NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                "seed: worker at %s left before formation: %s", c->remote_str,
                c->close_reason);
    *w = s->w[--s->nw];
    return;
  }
  w->conn = NULL;
}

static void seed_on_tick(nexar__ep_t *ep, uint64_t now) {
  nexar_seed_t *s = ep->owner;
  if (s->done) return;
  if (s->formed) {
    for (int i = 0; i < s->nw; i++)
      if (!s->w[i].delivered &&
          !(s->w[i].conn && nexar__link_idle(s->w[i].conn)))
        return;
    finish(s, NEXAR_OK, NULL);
    return;
  }
  if (now < s->deadline) return;
  char missing[256] = "";
  size_t o = 0;
  bool *have = calloc((size_t)s->world, 1);
  int unrequested = 0;
  for (int i = 0; i < s->nw; i++) {
    if (s->w[i].hello.rank >= 0 && have)
      have[s->w[i].hello.rank] = true;
    else
      unrequested++;
  }
  int nmissing = s->world - s->nw;
  for (int r = 0; have && r < s->world && o < sizeof(missing) - 16; r++)
    if (!have[r] && unrequested-- <= 0)
      o += (size_t)snprintf(missing + o, sizeof(missing) - o, "%s%d",
                            o ? ", " : "", r);
  free(have);
  char msg[NEXAR__REASON_MAX];
  snprintf(msg, sizeof(msg),
           "cluster formation timed out after %d ms: %d of %d workers "
           "arrived; missing %d (rank%s %s)",
           s->timeout_ms, s->nw, s->world, nmissing, nmissing > 1 ? "s" : "",
           missing[0] ? missing : "unassigned");
  for (int i = 0; i < s->nw; i++)
    if (s->w[i].conn) reject(s->w[i].conn, NEXAR_ERR_TIMEOUT, msg);
  for (int i = 0; i < s->njw; i++)
    reject(s->jw[i].conn, NEXAR_ERR_TIMEOUT, msg);
  finish(s, NEXAR_ERR_TIMEOUT, "%s", msg);
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
  if (s->world < 1 || s->timeout_ms < 1) {
    nexar__set_init_error("seed: world size must be >= 1 (NEXAR_WORLD_SIZE)");
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
  s->deadline = nexar__now() + (uint64_t)s->timeout_ms * 1000000ull;
  rc = nexar__ep_start(&s->ep);
  if (rc < 0) goto fail_ep;
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP,
              "seed listening on %s for %d workers (elastic up to %d)",
              s->ep.local_str, s->world, s->max_world);
  *out = s;
  return 0;
fail_ep:
  nexar__ep_fini(&s->ep);
fail:
  gnutls_memset(s->key, 0, sizeof(s->key));
  free(s);
  return rc;
}

/* An observer's QUERY (live inspection, docs/debugging.md): with the
 * observer proof of the secret on this TLS session, the roster formed (an
 * elastic seed's: every id assigned); without it the connection is closed
 * and nothing is sent; before formation a REJECT. */
int nexar__seed_on_query(nexar__link_t *c, const uint8_t *body, size_t len) {
  nexar_seed_t *s = c->ep->owner;
  uint8_t mac[NEXAR__MAC_BYTES], exp[32], want[32];
  if (nexar__seed_proof_decode(mac, body, len) < 0 ||
      nexar__link_exporter(c, exp) < 0)
    return proto_close(c, "malformed query");
  nexar__mac(s->key, NEXAR__OBSERVER_LABEL, exp, want);
  if (!nexar__ct_equal(mac, want, NEXAR__MAC_BYTES)) {
    NEXAR__WARN(NEXAR__SUB_BOOTSTRAP,
                "seed: observer at %s did not prove the cluster secret",
                c->remote_str);
    nexar__link_close(c, NEXAR__CLOSE_AUTH, "not authenticated");
    nexar__link_fail(c, NEXAR_ERR_AUTH, "observer not authenticated");
    return 0;
  }
  const nexar__roster_entry_t *r = s->max_world ? s->ids : s->roster;
  int n = s->max_world ? s->nids : s->world;
  if (!s->formed || !r) {
    reject(c, NEXAR_ERR_INVALID_USAGE, "the cluster is not formed yet");
    return 0;
  }
  size_t cap = 64 + (size_t)n * 96;
  uint8_t *frame = malloc(cap);
  if (!frame) return NEXAR_ERR_NOMEM;
  int k = nexar__seed_roster_encode((uint32_t)n, r, frame, cap);
  int rc = k < 0 ? k : nexar__link_seed_send(c, frame, (size_t)k);
  free(frame);
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
  nexar__ep_fini(&s->ep);
  free(s->w);
  free(s->jw);
  free(s->ids);
  free(s->roster);
  gnutls_memset(s->key, 0, sizeof(s->key));
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
  return NEXAR_OK;
}
