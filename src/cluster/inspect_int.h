/* Private to the observer's side of live inspection (inspect.c,
 * inspect_table.c). */
#ifndef NEXAR_INSPECT_INT_H
#define NEXAR_INSPECT_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "cluster/cluster.h"
#include "cluster/inspect.h"

/* One rank as the observer sees it. */
typedef struct insp_rank {
  nexar__roster_entry_t e; /* address, fingerprint, host id */
  nexar__link_t *c;        /* the observer connection (engine) */
  bool got, failed;        /* answered; or ended without an answer */
  char why[160];           /* failed: how */
  uint64_t rx;             /* bytes of frames received from it (engine) */
  uint64_t dialled_at;     /* engine clock (ns) */
  uint8_t *body;           /* the STATE body st points into */
  nexar__insp_state_t st;
} insp_rank_t;

typedef struct insp {
  nexar__ep_t ep;
  bool ep_up;
  uint8_t key[32];
  struct sockaddr_storage seed_ss;
  socklen_t seed_sl;
  int wrong_proof;     /* nexar__inspect_opts_t's */
  nexar__link_t *seed; /* engine */
  uint64_t seed_rx;    /* bytes of frames from the seed after PROOF */
  bool dial;           /* the roster came: dial the ranks (engine) */
  int next_dial;       /* the next rank to dial (engine) */
  int dials;           /* handshakes at once (NEXAR_MESH_DIALS) */
  uint64_t slot_ns;    /* how long a silent rank holds a dial slot */
  insp_rank_t *rk;     /* [world] */
  int world;
  int answered; /* ranks answered or failed (engine) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
  int rc;
  char err[256];
} insp_t;

/* Prints the table of |s| (the engine stopped) to |out|. */
void nexar__inspect_table(const insp_t *s, FILE *out);

#endif /* NEXAR_INSPECT_INT_H */
