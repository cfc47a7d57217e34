/* Seed-protocol helpers shared by the seed and the worker side. */
#ifndef NEXAR_SEED_INT_H
#define NEXAR_SEED_INT_H

#include "cluster/cluster.h"

typedef int (*nexar__seed_frame_fn)(nexar__link_t *c, uint8_t type,
                                    const uint8_t *body, size_t len);
/*
 * Appends |n| bytes of seed-stream data to the connection's reassembly
 * buffer (bounded by one maximal frame) and calls |fn| for every complete
 * frame. Returns 0, NEXAR_ERR_PROTO on a bad frame header or overflow,
 * NEXAR_ERR_NOMEM, or the first negative value |fn| returned.
 */
int nexar__seed_feed(nexar__link_t *c, const uint8_t *d, size_t n,
                     nexar__seed_frame_fn fn);
/* nexar__seed_feed; on an error, |c| (if still live) is closed as a
 * protocol violation and fails with that code. Returns the same. */
int nexar__seed_feed_or_close(nexar__link_t *c, const uint8_t *d, size_t n,
                              nexar__seed_frame_fn fn);

/*
 * Worker side (bootstrap.c): checks the seed's PROOF frame body on |c| in
 * constant time and computes this worker's proof for the same session.
 * Returns 0; NEXAR_ERR_PROTO for a malformed body; NEXAR_ERR_AUTH (|c| is
 * then closed with AUTH) when the seed does not know the secret;
 * NEXAR_ERR_TRANSPORT when the TLS exporter fails.
 */
int nexar__seed_proof_answer(nexar_ctx_t *ctx, nexar__link_t *c,
                             const uint8_t *body, size_t len,
                             uint8_t proof[NEXAR__MAC_BYTES]);

/* The MAC label of an observer's proof (QUERY to the seed, INSPECT to a
 * rank), computed over the connection's TLS exporter. */
#define NEXAR__OBSERVER_LABEL "nexar observer proof v1"

/*
 * Live inspection, rank side (observe.c; engine). nexar__observe_admit:
 * whether to take one more observer (0 while fewer than
 * NEXAR__OBSERVERS_MAX are connected, else -1). _ready, _data, _closed: an
 * observer link's handshake finished, bytes arrived, it ended. _tick: closes
 * observers past their deadline.
 */
int nexar__observe_admit(nexar_ctx_t *ctx);
void nexar__observe_ready(nexar_ctx_t *ctx, nexar__link_t *c);
void nexar__observe_data(nexar__link_t *c, const uint8_t *d, size_t n);
void nexar__observe_closed(nexar_ctx_t *ctx, nexar__link_t *c);
void nexar__observe_tick(nexar_ctx_t *ctx, uint64_t now);

#endif /* NEXAR_SEED_INT_H */
