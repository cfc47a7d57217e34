/*
 * nexar_comm_create_group: a communicator of listed ranks, made by those
 * ranks only (MPI_Comm_create_group). The members agree on the new id as
 * nexar_comm_split does (the largest proposal), but with messages among
 * themselves on the parent communicator: GROUP-mode point-to-point
 * messages (docs/wire-protocol.md section 2) with the call's tag, which
 * only this code receives, so that neither the application's receives nor
 * a creation with another tag can take them.
 */
#include <stdlib.h>

#include "api/api.h"

/* A result code from a member's message: 0, a negative code, or
 * NEXAR_ERR_PROTO for a value no member sends. */
static int code_of(int64_t v) {
  return v >= 0 ? 0 : v >= NEXAR_ERR_INTERNAL ? (int)v : NEXAR_ERR_PROTO;
}

/* One round through the leader (list position 0): every member sends
 * {rc, value}; the leader answers each with {the first error or 0, the
 * largest value}, which every member returns in |out|. A member whose
 * round fails returns the error; the leader passes one on to the rest. */
static int round_trip(nexar_comm_t *comm, const int *ranks, int n, int me,
                      int tag, const int64_t mine[2], int64_t out[2]) {
  const unsigned send = NEXAR__API_SEND | NEXAR__API_GROUP;
  nexar__req_t *r = NULL;
  int rc;
  if (me != 0) {
    rc = nexar__api_p2p(comm, mine, 2, NEXAR_INT64, ranks[0], tag, send, &r);
    if (rc == NEXAR_OK) rc = nexar_wait(&r, NULL);
    if (rc < 0) return rc;
    rc = nexar__api_p2p(comm, out, 2, NEXAR_INT64, ranks[0], tag,
                        NEXAR__API_GROUP, &r);
    if (rc == NEXAR_OK) rc = nexar_wait(&r, NULL);
    return rc < 0 ? rc : code_of(out[0]);
  }
  nexar__req_t **reqs = calloc((size_t)n, sizeof(*reqs));
  int64_t *got = calloc((size_t)n * 2, sizeof(*got));
  if (!reqs || !got) {
    free(reqs);
    free(got);
    return NEXAR_ERR_NOMEM;
  }
  int64_t res[2] = {mine[0], mine[1]};
  for (int i = 1; i < n; i++) {
    int prc = nexar__api_p2p(comm, &got[2 * i], 2, NEXAR_INT64, ranks[i], tag,
                             NEXAR__API_GROUP, &reqs[i]);
    if (prc < 0 && res[0] == 0) res[0] = prc;
  }
  for (int i = 1; i < n; i++) {
    if (!reqs[i]) continue;
    int wrc = nexar_wait(&reqs[i], NULL);
    if (wrc < 0 && res[0] == 0) res[0] = wrc;
    if (wrc < 0) continue;
    if (code_of(got[2 * i]) < 0 && res[0] == 0) res[0] = code_of(got[2 * i]);
    if (got[2 * i + 1] > res[1]) res[1] = got[2 * i + 1];
  }
  for (int i = 1; i < n; i++) {
    int prc = nexar__api_p2p(comm, res, 2, NEXAR_INT64, ranks[i], tag, send,
                             &reqs[i]);
    if (prc < 0 && res[0] == 0) res[0] = prc;
  }
  /* The answers went out with res as it was when each was started. */
  int first = (int)res[0];
  for (int i = 1; i < n; i++) {
    int wrc = nexar_wait(&reqs[i], NULL);
    if (wrc < 0 && first == 0) first = wrc;
  }
  free(reqs);
  free(got);
  out[0] = res[0];
  out[1] = res[1];
  return first;
}

int nexar_comm_create_group(nexar_comm_t *comm, const int *ranks, int n,
                            int tag, nexar_comm_t **newcomm) {
  if (!comm || !ranks || !newcomm) return NEXAR_ERR_INVALID_ARG;
  *newcomm = NULL;
  /* Bounds before anything is allocated or sent. */
  int me = -1;
  const char *bad = NULL;
  if (n < 1 || n > comm->size) bad = "the rank count is out of range";
  if (!bad && (tag < 0 || tag > NEXAR_TAG_MAX)) bad = "the tag is invalid";
  for (int i = 0; !bad && i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= comm->size) bad = "a rank is out of range";
    for (int j = 0; !bad && j < i; j++)
      if (ranks[j] == ranks[i]) bad = "a rank is listed twice";
    if (ranks[i] == comm->rank) me = i;
  }
  if (!bad && me < 0) bad = "the calling rank is not in the list";
  if (bad) {
    nexar__comm_set_error(comm,
                          "rank %d: comm_create_group (comm %llu, %d ranks, "
                          "tag %d): %s",
                          comm->rank, (unsigned long long)comm->id, n, tag,
                          bad);
    return NEXAR_ERR_INVALID_ARG;
  }
  nexar_ctx_t *ctx = comm->ctx;
  /* The world is id 0: proposals start at 1. */
  nexar__bump_next_id(ctx, 1);
  int64_t mine[2] = {0, (int64_t)atomic_load(&ctx->next_free_id)};
  int64_t got[2] = {0, 0};
  int rc = round_trip(comm, ranks, n, me, tag, mine, got);
  if (rc < 0) return rc;
  uint64_t id = (uint64_t)got[1];
  if (got[1] < 1 || id >= NEXAR__AGREE_BIT) {
    /* Not an id any member proposes (the top bit is the agreements'). */
    nexar__comm_set_error(comm,
                          "rank %d: comm_create_group (comm %llu, tag %d): "
                          "rank %d answered the impossible id %llu",
                          comm->rank, (unsigned long long)comm->id, tag,
                          ranks[0], (unsigned long long)id);
    return NEXAR_ERR_PROTO;
  }
  /* Every member saw the same maximum: none proposes it again. */
  nexar__bump_next_id(ctx, id + 1);
  nexar_comm_t *c = nexar__api_comm_alloc(ctx, id, n);
  if (!c) {
    rc = NEXAR_ERR_NOMEM;
  } else {
    c->rank = me;
    for (int i = 0; i < n; i++) c->world_ranks[i] = comm->world_ranks[ranks[i]];
    rc = nexar__api_comm_add(&c);
  }
  /* Nobody sends on the new communicator before every member has
   * registered it; a member that could not tells the others, and all
   * fail. The round runs even after a local failure. */
  mine[0] = rc;
  int rrc = round_trip(comm, ranks, n, me, tag, mine, got);
  if (rc == 0 && rrc < 0) rc = rrc;
  if (rc < 0) {
    if (c) nexar__api_comm_drop(c);
    return rc;
  }
  *newcomm = c;
  return NEXAR_OK;
}
