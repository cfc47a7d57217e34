/* Seed-protocol helpers shared by the seed and the worker side. */
#ifndef NEXAR_SEED_INT_H
#define NEXAR_SEED_INT_H

#include "nexar_int.h"

typedef int (*nexar__seed_frame_fn)(nexar__conn_t *c, uint8_t type,
                                    const uint8_t *body, size_t len);
/*
 * Appends |n| bytes of seed-stream data to the connection's reassembly
 * buffer (bounded by one maximal frame) and calls |fn| for every complete
 * frame. Returns 0, NEXAR_ERR_PROTO on a bad frame header or overflow,
 * NEXAR_ERR_NOMEM, or the first negative value |fn| returned.
 */
int nexar__seed_feed(nexar__conn_t *c, const uint8_t *d, size_t n,
                     nexar__seed_frame_fn fn);

#endif /* NEXAR_SEED_INT_H */
