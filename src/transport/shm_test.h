/*
 * Test hook of the shared-memory transport (shm.c): a hostile same-host
 * peer. Not part of the public API; tests/test_shm_hostile.c uses it.
 */
#ifndef NEXAR_SHM_TEST_H
#define NEXAR_SHM_TEST_H

#include <stdint.h>

#include "nexar.h"

/* What nexar__shm_test_forge writes into the ring to a peer. */
enum nexar__shm_forge {
  NEXAR__SHM_FORGE_SID_JUMP = 1, /* DATA for a stream never opened */
  NEXAR__SHM_FORGE_OFFSET,       /* a new stream, then DATA at a gap */
  NEXAR__SHM_FORGE_WINDOW,       /* DATA past the stream's window */
  NEXAR__SHM_FORGE_TYPE,         /* a record of unknown type */
  NEXAR__SHM_FORGE_STREAMS,      /* STREAMS returning more than opened */
  NEXAR__SHM_FORGE_CREDIT,       /* CREDIT for unknown streams (harmless) */
  NEXAR__SHM_FORGE_RESET,        /* RESET for unknown streams (harmless) */
  NEXAR__SHM_FORGE_RING,         /* a published record past the ring's end */
  NEXAR__SHM_FORGE_SMALL_LEN,    /* SMALL too short for its header */
  NEXAR__SHM_FORGE_SMALL_SRC,    /* SMALL claiming the receiver as source */
  NEXAR__SHM_FORGE_COUNT
};

/*
 * Writes one hostile record of |kind| (enum nexar__shm_forge) into the
 * ring to world rank |peer| and kicks it, on the progress thread; this
 * process's own stream state stays what it was, except that a kind that
 * opens a stream uses up its id. After NEXAR__SHM_FORGE_RING this side
 * writes nothing more on that ring. The SMALL kinds name communicator 0
 * (the world). Returns 0; NEXAR_ERR_INVALID_ARG for a
 * bad |kind| or |peer|; NEXAR_ERR_UNSUPPORTED when no shared-memory link
 * to |peer| is ready; NEXAR_ERR_TRANSPORT when the ring has no room now.
 * Thread-safe (any user thread).
 */
int nexar__shm_test_forge(nexar_ctx_t *ctx, int peer, int kind);
/*
 * The passes this process's progress thread has run so far (a pass reads
 * every transport and writes what is owed). tests/test_quiet_start.c bounds
 * it during nexar_init: the shared-memory set left readable and unswept
 * made the thread run an empty pass every few microseconds. Thread-safe.
 */
uint64_t nexar__test_bg_passes(nexar_ctx_t *ctx);
/* The transport's half (shm_setup.c; engine, emu held): the record on link
 * |l|; NEXAR_ERR_UNSUPPORTED when |l| is not a ready shared-memory link.
 * nexar__shm_test_forge (core/ctx.c) finds the link of |peer|. */
struct nexar__link;
int nexar__shm_forge_link(struct nexar__link *l, int kind);

#endif /* NEXAR_SHM_TEST_H */
