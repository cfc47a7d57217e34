/*
 * The public API's own pieces shared between its files (private to
 * src/api): building point-to-point requests, installing communicators.
 */
#ifndef NEXAR_API_H
#define NEXAR_API_H

#include "p2p/p2p.h"

/* What nexar__api_p2p builds (bits): a receive (0) or a SEND; a SYNC
 * (synchronous-mode) send; a PROBE (a receive that only reports the
 * message it matches); a GROUP message of nexar_comm_create_group (host
 * buffers, matched by the library's receives only). */
#define NEXAR__API_SEND 1u
#define NEXAR__API_SYNC 2u
#define NEXAR__API_PROBE 4u
#define NEXAR__API_GROUP 8u

/* Checks the arguments of a point-to-point call (the message names the
 * call), stages device buffers and posts the request: *out on
 * NEXAR_OK; NEXAR_ERR_INVALID_ARG, NEXAR_ERR_NOMEM or an adapter error
 * with nothing posted. |peer| and |tag| may be the wildcards for a
 * receive or probe. */
int nexar__api_p2p(nexar_comm_t *comm, const void *buf, size_t count,
                   nexar_dtype_t dtype, int peer, int tag, unsigned how,
                   nexar__req_t **out);

/* A new communicator object |id| of |n| ranks (rank 0 until the caller
 * sets it), its world_ranks allocated for the caller to fill; NULL when out
 * of memory. */
nexar_comm_t *nexar__api_comm_alloc(nexar_ctx_t *ctx, uint64_t id, int n);
/* User thread: registers communicator *pc with the engine: NEXAR_OK, or
 * NEXAR_ERR_NOMEM with *pc freed and set to NULL. */
int nexar__api_comm_add(nexar_comm_t **pc);
/* User thread: unregisters and frees |c|. */
void nexar__api_comm_drop(nexar_comm_t *c);

#endif /* NEXAR_API_H */
