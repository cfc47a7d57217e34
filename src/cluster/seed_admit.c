/*
 * The seed core's elastic part (seed_core.h, docs/elastic.md): joiners
 * held pending in arrival order, and the admission a members' leader asks
 * for at a checkpoint. Pending joiners live in s->jw[jhead, jlen); one
 * that leaves is marked (slot -1) and skipped, and the array is compacted
 * when the marked ones are half of it, so that every event is O(1)
 * amortized. An admission is O(ids + members): one JOIN encoding shared by
 * the joiners it admits, and one ADMITTED.
 */
#include <stdio.h>
#include <string.h>

#include "cluster/seed_core_int.h"

/* Moves the pending joiners to the front of s->jw. */
static void compact(nexar__seedc_t *s) {
  int n = 0;
  for (int i = s->jhead; i < s->jlen; i++) {
    if (s->jw[i].slot < 0) continue;
    s->jw[n] = s->jw[i];
    s->cs[s->jw[n].slot].idx = n;
    n++;
  }
  s->jhead = 0;
  s->jlen = n;
}

void nexar__seedc_forget_joiner(nexar__seedc_t *s, int i) {
  s->jw[i].slot = -1;
  s->njw--;
  while (s->jhead < s->jlen && s->jw[s->jhead].slot < 0) s->jhead++;
}

int nexar__seedc_join_hello(nexar__seedc_t *s, int slot) {
  const nexar__seed_hello_t *h = &s->hello;
  char why[NEXAR__REASON_MAX];
  int members = s->formed ? s->current : s->world;
  if (!s->max_world) {
    snprintf(why, sizeof(why),
             "this seed is not elastic (start it with a max world size "
             "above its world size of %d, e.g. nexar-seed --max-world N)",
             s->world);
    nexar__seedc_refuse(s, slot, NEXAR_ERR_INVALID_USAGE, why);
    return 0;
  }
  if (members + s->njw >= s->max_world ||
      s->nids + s->njw >= (int)NEXAR__ELASTIC_MAX_IDS) {
    snprintf(why, sizeof(why),
             "the elastic job is full: %d members and %d pending joiners of "
             "at most %d (max world size)",
             members, s->njw, s->max_world);
    nexar__seedc_refuse(s, slot, NEXAR_ERR_INVALID_USAGE, why);
    return 0;
  }
  if ((size_t)s->jlen == s->jw_cap && 2 * (s->jlen - s->njw) >= s->jlen)
    compact(s);
  if (nexar__seedc_grow(s, &s->jw, &s->jw_cap, (size_t)s->jlen + 1,
                        sizeof(*s->jw)) < 0)
    return NEXAR_ERR_NOMEM;
  nexar__seedc_record(s, slot, h, &s->jw[s->jlen]);
  s->cs[slot].kind = NEXAR__SEEDC_JOINER;
  s->cs[slot].idx = s->jlen++;
  s->njw++;
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP,
              "seed: joiner %s pid %u at %s pending (%d pending, %d members, "
              "max %d)",
              h->host, h->pid, s->cs[slot].name, s->njw, members, s->max_world);
  return 0;
}

/* Admits up to |room| pending joiners, in arrival order, into the world of
 * the members |a| lists: a JOIN to each, ADMITTED to the leader on |slot|.
 * Returns 0 or NEXAR_ERR_NOMEM / NEXAR_ERR_INTERNAL. */
static int admit(nexar__seedc_t *s, int slot, const nexar__seed_admit_t *a,
                 int room) {
  int rc = NEXAR_ERR_NOMEM, k = 0;
  int n = (int)a->nstay;
  bool lo = nexar__seedc_loopback(&s->ids[nexar__id_at(a->ids, 0)].addr);
  nexar__joiner_t *j =
      nexar__seedc_realloc(s, NULL, (size_t)(room > 0 ? room : 1) * sizeof(*j));
  int *jslot = nexar__seedc_realloc(
      s, NULL, (size_t)(room > 0 ? room : 1) * sizeof(int));
  uint32_t *members =
      nexar__seedc_realloc(s, NULL, (size_t)(n + room + 1) * sizeof(uint32_t));
  uint8_t *frame = NULL;
  size_t cap = NEXAR__SEED_FRAME_HDR + 24 +
               ((size_t)s->nids + (size_t)room) * 96 + 4 * (size_t)(n + room) +
               64; /* and the job section */
  if (!j || !jslot || !members ||
      nexar__seedc_grow(s, &s->ids, &s->ids_cap, (size_t)s->nids + (size_t)room,
                        sizeof(*s->ids)) < 0 ||
      nexar__seedc_grow(s, &s->tmp, &s->tmp_cap, s->ntmp + 1, sizeof(*s->tmp)) <
          0 ||
      !(frame = nexar__seedc_realloc(s, NULL, cap)))
    goto out;
  for (int i = 0; i < n; i++) members[i] = nexar__id_at(a->ids, (uint32_t)i);
  /* Never mix loopback and routable addresses in one world. */
  while (s->jhead < s->jlen && k < room) {
    nexar__seedc_worker_t *w = &s->jw[s->jhead];
    int ws = w->slot;
    if (ws < 0) {
      s->jhead++;
      continue;
    }
    if (nexar__seedc_loopback(&w->e.addr) != lo) {
      char why[NEXAR__REASON_MAX];
      snprintf(why, sizeof(why),
               "joiner %s pid %u is reachable at a %s address while the "
               "members are %s; set NEXAR_BIND_ADDR or NEXAR_ADVERTISE_ADDR",
               w->host, w->e.host.pid, lo ? "routable" : "loopback",
               lo ? "on loopback" : "on other hosts");
      nexar__seedc_refuse(s, ws, NEXAR_ERR_INVALID_ARG, why);
      s->cs[ws].kind = NEXAR__SEEDC_NEW;
      nexar__seedc_forget_joiner(s, s->jhead);
      continue;
    }
    j[k].id = (uint32_t)(s->nids + k);
    j[k].e = w->e;
    s->ids[j[k].id] = w->e;
    members[n + k] = j[k].id;
    jslot[k++] = ws;
    /* It leaves the pending list; its connection closes once the JOIN is
     * delivered. */
    s->cs[ws].kind = NEXAR__SEEDC_ADMITTED;
    w->slot = -1;
    s->njw--;
    s->jhead++;
  }
  nexar__seed_join_t jn = {.id = (uint32_t)s->nids,
                           .nids = (uint32_t)(s->nids + k),
                           .comm_id = a->comm_id,
                           .epoch = a->epoch,
                           .nmembers = (uint32_t)(n + k),
                           .job = s->job};
  s->nids += k;
  s->current = n + k;
  if (k) {
    /* One JOIN encoding; each joiner's own head carries its id. */
    int len = nexar__seed_join_encode(&jn, s->ids, members, frame, cap);
    if (len < 0) {
      rc = NEXAR_ERR_INTERNAL;
      goto out;
    }
    s->tmp[s->ntmp++] = frame;
    uint8_t head[WELCOME_HEAD];
    memcpy(head, frame, WELCOME_HEAD);
    for (int i = 0; i < k; i++) {
      nexar__put_u32(head + NEXAR__SEED_FRAME_HDR, j[i].id);
      if ((rc = nexar__seedc_queue(s, jslot[i], head, WELCOME_HEAD,
                                   frame + WELCOME_HEAD,
                                   (size_t)len - WELCOME_HEAD, false)) < 0)
        goto out;
    }
    frame = NULL;
  }
  uint8_t *af = nexar__seedc_realloc(s, NULL, cap);
  int len = af ? nexar__seed_admitted_encode((uint32_t)s->nids, j, (uint32_t)k,
                                             af, cap)
               : NEXAR_ERR_NOMEM;
  rc = len < 0 ? (af ? NEXAR_ERR_INTERNAL : len)
               : nexar__seedc_queue(s, slot, af, (size_t)len, NULL, 0, false);
  nexar__seedc_dealloc(s, af);
  NEXAR__INFO(NEXAR__SUB_BOOTSTRAP,
              "seed: admitted %d joiner%s into a world of %d (comm %llu epoch "
              "%u); %d still pending",
              k, k == 1 ? "" : "s", n + k, (unsigned long long)a->comm_id,
              a->epoch, s->njw);
out:
  nexar__seedc_dealloc(s, j);
  nexar__seedc_dealloc(s, jslot);
  nexar__seedc_dealloc(s, members);
  nexar__seedc_dealloc(s, frame);
  return rc;
}

int nexar__seedc_admit(nexar__seedc_t *s, int slot, const uint8_t *body,
                       size_t len, const char **why_close) {
  nexar__seed_admit_t a;
  if (nexar__seed_admit_decode(&a, body, len) < 0) {
    *why_close = "malformed admit";
    return NEXAR_ERR_PROTO;
  }
  char why[NEXAR__REASON_MAX];
  int code = nexar__seedc_check_proof(s, slot, a.proof, why);
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
    nexar__seedc_refuse(s, slot, code, why);
    return 0;
  }
  long room = s->max_world - (long)a.nstay;
  if (a.max_joiners != NEXAR__JOIN_UNLIMITED && (long)a.max_joiners < room)
    room = a.max_joiners;
  if (room > s->njw) room = s->njw;
  if (room > (long)NEXAR__ELASTIC_MAX_IDS - s->nids)
    room = (long)NEXAR__ELASTIC_MAX_IDS - s->nids;
  if (room < 0) room = 0;
  return admit(s, slot, &a, (int)room);
}
